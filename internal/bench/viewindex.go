package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/agentworld/agentworld/internal/atomicfile"
	"github.com/agentworld/agentworld/internal/runview"
	"github.com/agentworld/agentworld/internal/taxonomy"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// index returns the run's index header and an opener of its entry lines,
// building the index when it is missing or stale.
func (v *ViewSource) index(dir string) (*indexHeader, func() (io.ReadCloser, error), error) {
	jp := filepath.Join(dir, JudgedFile)
	st, err := os.Stat(jp)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, fmt.Errorf("run %s: not judged yet (no %s)", filepath.Base(dir), JudgedFile)
		}
		return nil, nil, err
	}
	ip := filepath.Join(dir, IndexFile)
	if hdr, off, err := readIndexHeader(ip); err == nil && hdr.Version == indexVersion && hdr.Size == st.Size() && hdr.MTime == st.ModTime().UnixNano() {
		return hdr, func() (io.ReadCloser, error) { return openAt(ip, off) }, nil
	}
	v.mu.Lock()
	if mi := v.mem[dir]; mi != nil && mi.hdr.Size == st.Size() && mi.hdr.MTime == st.ModTime().UnixNano() {
		v.mu.Unlock()
		return mi.hdr, func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(mi.entries)), nil }, nil
	}
	v.mu.Unlock()
	hdr, entries, err := v.build(dir, jp, st)
	if err != nil {
		return nil, nil, err
	}
	hb, err := json.Marshal(hdr)
	if err != nil {
		return nil, nil, err
	}
	file := append(append(hb, '\n'), entries...)
	if err := atomicfile.WriteFile(ip, file, nil); err == nil {
		return hdr, func() (io.ReadCloser, error) { return openAt(ip, int64(len(hb)+1)) }, nil
	}
	v.mu.Lock()
	v.mem[dir] = &memIndex{hdr: hdr, entries: entries}
	v.mu.Unlock()
	return hdr, func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(entries)), nil }, nil
}

func openAt(path string, off int64) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// readIndexHeader reads the first line of an index and where the entries
// start.
func readIndexHeader(path string) (*indexHeader, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	line, err := bufio.NewReaderSize(f, 64<<10).ReadBytes('\n')
	if err != nil {
		return nil, 0, err
	}
	hdr := new(indexHeader)
	if err := json.Unmarshal(line, hdr); err != nil {
		return nil, 0, err
	}
	return hdr, int64(len(line)), nil
}

// build streams judged.jsonl once: each row is classified and reduced to
// an index entry (its texts dropped), so memory holds the entries, not
// the rows. A row repeated by a resumed run replaces the earlier one. A
// torn last line (a run killed mid-write) or a malformed one is an error
// naming file and line.
func (v *ViewSource) build(dir, jp string, st os.FileInfo) (*indexHeader, []byte, error) {
	f, err := os.Open(jp)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	var ents []*indexEntry
	at := map[string]int{}
	var off int64
	tax := taxonomy.NewCounts()
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(line) == 0 && errors.Is(err, io.EOF) {
			break
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, nil, err
		}
		body := bytes.TrimSpace(line)
		if len(body) == 0 {
			off += int64(len(line))
			continue
		}
		j := new(Judged)
		if jerr := json.Unmarshal(body, j); jerr != nil {
			if err != nil { // no newline: the last line was cut
				return nil, nil, fmt.Errorf("run %s: %s:%d: the last line is cut short (%d bytes, no newline): the run was stopped mid-write; rerun it to finish or remove the line", filepath.Base(dir), jp, n, len(line))
			}
			return nil, nil, &trajectory.LineError{File: jp, Line: n, Err: jerr}
		}
		e := &indexEntry{Off: off, Len: len(line), Key: j.Sample, Domain: DomainOf(j), Task: j.Task, ID: j.ID, Turn: j.TurnIdx,
			Model: j.Model, Judge: j.Judge, Scores: j.Scores, Failure: j.Failure}
		if !j.Valid() && e.Failure == "" {
			e.Failure = FailUnscored
		}
		if Classifiable(j) {
			for _, fd := range taxonomy.Classify(TaxonomyInput(j, nil)) {
				e.Cats = append(e.Cats, fd.Category)
			}
		}
		off += int64(len(line))
		if i, ok := at[e.Key]; ok && e.Key != "" {
			ents[i] = e
		} else {
			at[e.Key] = len(ents)
			ents = append(ents, e)
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	// The figures, from slim rows.
	rows := make([]*Judged, len(ents))
	for i, e := range ents {
		rows[i] = &Judged{Prediction: Prediction{Sample: e.Key, Task: e.Task, Domain: e.Domain, ID: e.ID, Model: e.Model, Failure: e.Failure}, Judge: e.Judge, Scores: e.Scores}
		if e.Failure == FailUnscored {
			rows[i].Failure = ""
		}
		if e.valid() || e.Failure == FailLength {
			tax.Add(e.Domain, e.Key, catFindings(e.Cats))
		}
	}
	rep := Score(rows, &ScoreOptions{Resamples: v.o.Resamples})
	hdr := &indexHeader{Version: indexVersion, Size: st.Size(), MTime: st.ModTime().UnixNano(), Count: len(ents),
		SampleMean: runview.Num(rep.OverallSampleMean), Taxonomy: tax, Trust: rep.Trust.Agree}
	info := runview.RunInfo{Name: filepath.Base(dir), Overall: runview.Num(rep.OverallDomainMean), CI: [2]runview.Num{runview.Num(rep.OverallCI95[0]), runview.Num(rep.OverallCI95[1])}}
	models, judges := map[string]bool{}, map[string]bool{}
	for _, e := range ents {
		models[e.Model], judges[e.Judge] = true, true
	}
	info.Model, info.Judge = joinKeys(models), joinKeys(judges)
	for _, d := range rep.Order {
		ds := rep.Domains[d]
		info.Judged += ds.N
		info.Valid += ds.Valid
		info.Failed += ds.Failed
		dm := runview.Domain{Name: d, N: ds.N, Valid: ds.Valid, Failed: ds.Failed, Total: runview.Num(ds.Total),
			CI: [2]runview.Num{runview.Num(ds.CI95[0]), runview.Num(ds.CI95[1])}, Failures: reasonsText(rep.Failures[d])}
		for i, x := range ds.Dims() {
			dm.Dims[i] = runview.Num(x)
		}
		hdr.Domains = append(hdr.Domains, dm)
	}
	hdr.Info = info
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, e := range ents {
		if err := enc.Encode(e); err != nil {
			return nil, nil, err
		}
	}
	return hdr, buf.Bytes(), nil
}

func catFindings(cats []taxonomy.Category) []taxonomy.Finding {
	out := make([]taxonomy.Finding, len(cats))
	for i, c := range cats {
		out[i] = taxonomy.Finding{Category: c}
	}
	return out
}

func joinKeys(m map[string]bool) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		if k != "" {
			ks = append(ks, k)
		}
	}
	sort.Strings(ks)
	return strings.Join(ks, "+")
}

// readEntries decodes the entries keep accepts.
func readEntries(open func() (io.ReadCloser, error), keep func(*indexEntry) bool) ([]*indexEntry, error) {
	rc, err := open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var out []*indexEntry
	for sc.Scan() {
		e := new(indexEntry)
		if err := json.Unmarshal(sc.Bytes(), e); err != nil {
			return nil, fmt.Errorf("%s: %w", IndexFile, err)
		}
		if keep(e) {
			out = append(out, e)
		}
	}
	return out, sc.Err()
}
