// Package datapipe is the engine every stage of `agentworld data` runs
// on, and the unified trajectory line format they read: input files
// (plain, gzip or zstd; JSONL or pretty-printed JSON documents) cut into
// batches, processed by parallel workers and written back in input order;
// one policy for bad records ([OnError], [RecordError] naming file:line and
// field); the [Summary] every command prints; result files written
// atomically ([Output]); and the schema with its strict decoder
// ([DecodeTrajectory], [Validate]). Memory does not grow with the input.
package datapipe

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/sync/errgroup"

	"github.com/agentworld/agentworld/internal/trajectory"
)

// OnError says what a run does with a bad record.
type OnError int

const (
	// Skip reports the record, counts it in the summary and goes on.
	Skip OnError = iota
	// Fatal stops the run at the first bad record.
	Fatal
)

// ParseOnError accepts "skip" or "fatal".
func ParseOnError(s string) (OnError, error) {
	switch s {
	case "skip", "":
		return Skip, nil
	case "fatal":
		return Fatal, nil
	}
	return Skip, fmt.Errorf("unknown error policy %q (want skip or fatal)", s)
}

// DefaultMaxLine bounds one input line (64 MiB); longer lines are bad input.
const DefaultMaxLine = 64 << 20

// Options are shared by every pipeline command. A nil *Options means all
// defaults.
type Options struct {
	// Workers is the number of goroutines that process records; 0 means 1.
	Workers int
	// OnError is the bad-record policy; the zero value is Skip.
	OnError OnError
	// MaxLine bounds one input line in bytes; 0 means DefaultMaxLine.
	MaxLine int
	// Progress receives a progress bar over the input bytes; nil means none.
	Progress io.Writer
	// Logger receives one warning per skipped record; nil discards them.
	Logger *slog.Logger

	// report, when set, replaces the warning for each bad record.
	Report func(*RecordError)
	// documents reads each file as a sequence of JSON documents (pretty
	// printed or not) instead of lines; see docReader.
	Documents bool
}

func (o *Options) Norm() Options {
	var v Options
	if o != nil {
		v = *o
	}
	if v.Workers <= 0 {
		v.Workers = 1
	}
	if v.MaxLine <= 0 {
		v.MaxLine = DefaultMaxLine
	}
	if v.Logger == nil {
		v.Logger = slog.New(slog.DiscardHandler)
	}
	return v
}

// Sentinel errors of bad input, matched with errors.Is; each is a skip
// reason in the summary.
var (
	ErrInvalidUTF8        = errors.New("invalid UTF-8")
	ErrBadJSON            = errors.New("bad JSON")
	ErrInvalid            = errors.New("invalid record")
	ErrMissingObservation = trajectory.ErrMissingObservation
	ErrEmptyTurn          = trajectory.ErrEmptyTurn
	ErrRowsDisagree       = errors.New("rows of one trajectory disagree")
)

// RecordError names a bad record: file, line and, when known, the field.
type RecordError struct {
	File  string
	Line  int
	Field string
	Err   error
}

func (e *RecordError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s:%d: %s: %v", e.File, e.Line, e.Field, e.Err)
	}
	return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
}

func (e *RecordError) Unwrap() error { return e.Err }

// Reason is the short name the summary counts the error under.
func (e *RecordError) Reason() string {
	for _, r := range []struct {
		err  error
		name string
	}{
		{ErrInvalidUTF8, "invalid-utf8"},
		{trajectory.ErrLineTooLong, "line-too-long"},
		{ErrBadJSON, "bad-json"},
		{ErrMissingObservation, "missing-observation"},
		{ErrEmptyTurn, "empty-turn"},
		{ErrRowsDisagree, "rows-disagree"},
	} {
		if errors.Is(e.Err, r.err) {
			return r.name
		}
	}
	return "invalid"
}

// Summary counts what a run read, wrote and skipped.
type Summary struct {
	Files       int              `json:"files"`
	Lines       int64            `json:"lines"`
	Bytes       int64            `json:"bytes"`
	Records     int64            `json:"records"`
	Skipped     int64            `json:"skipped"`
	SkipReasons map[string]int64 `json:"skip_reasons,omitempty"`
	Written     int64            `json:"written"`
	Duplicates  int64            `json:"duplicates,omitempty"`
	// Templates counts the written lines per template version their
	// system prompt was rendered with ("name@id", TemplatePin); lines with
	// a trajectory's own prompt are not counted.
	Templates map[string]int64 `json:"templates,omitempty"`
	Elapsed   time.Duration    `json:"elapsed_ns"`
}

func (s *Summary) Pinned(pin string, n int) {
	if pin == "" {
		return
	}
	if s.Templates == nil {
		s.Templates = map[string]int64{}
	}
	s.Templates[pin] += int64(n)
}

func (s *Summary) skip(e *RecordError) {
	s.Skipped++
	if s.SkipReasons == nil {
		s.SkipReasons = map[string]int64{}
	}
	s.SkipReasons[e.Reason()]++
}

// String is the one-paragraph report printed at the end of a run.
func (s *Summary) String() string {
	var b strings.Builder
	secs := s.Elapsed.Seconds()
	mbs := 0.0
	if secs > 0 {
		mbs = float64(s.Bytes) / 1e6 / secs
	}
	fmt.Fprintf(&b, "summary: %d file(s), %d lines, %.1f MB in %.2fs (%.1f MB/s); %d records ok, %d skipped, %d written",
		s.Files, s.Lines, float64(s.Bytes)/1e6, secs, mbs, s.Records, s.Skipped, s.Written)
	if s.Duplicates > 0 {
		fmt.Fprintf(&b, ", %d duplicates dropped", s.Duplicates)
	}
	if len(s.SkipReasons) > 0 {
		keys := make([]string, 0, len(s.SkipReasons))
		for k := range s.SkipReasons {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteString("; skipped by reason:")
		for _, k := range keys {
			fmt.Fprintf(&b, " %s=%d", k, s.SkipReasons[k])
		}
	}
	if len(s.Templates) > 0 {
		b.WriteString("; lines per template version:")
		for _, k := range slices.Sorted(maps.Keys(s.Templates)) {
			name, id, _ := strings.Cut(k, "@")
			fmt.Fprintf(&b, " %s@%.12s=%d", name, id, s.Templates[k])
		}
	}
	return b.String()
}

// inLine is one input line with its origin.
type InLine struct {
	File string
	N    int
	Data []byte
	// err is set for a line that could not be read (too long).
	err error
}

// batchResult is what a worker hands back for one batch, in input order.
type batchResult[R any] struct {
	out    R
	errs   []*RecordError
	ok     int64
	lines  int64
	err    error
	bytes  int64
	isLast bool
}

const batchBytes = 1 << 20

// inputExts are the names of the files a directory argument stands for.
var inputExts = []string{".jsonl", ".json", ".jsonl.gz", ".jsonl.zst", ".json.gz", ".json.zst"}

// ExpandInputs replaces each directory among paths by the JSON and JSONL
// files under it (compressed ones too), in name order: a directory of
// saved session replies or trajectory files reads like the files. A
// directory holding none is an error naming it.
func ExpandInputs(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if p == "-" || err != nil || !st.IsDir() {
			out = append(out, p) // opening it reports what is wrong
			continue
		}
		n := len(out)
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				return nil
			}
			for _, ext := range inputExts {
				if strings.HasSuffix(d.Name(), ext) {
					out = append(out, path)
					break
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if len(out) == n {
			return nil, fmt.Errorf("%s: a directory without .json or .jsonl files", p)
		}
	}
	return out, nil
}

// isDocumentFile reports a file named as one JSON document (or several
// concatenated) rather than JSONL: a saved session reply, pretty-printed.
func isDocumentFile(path string) bool {
	return strings.HasSuffix(path, ".json") || strings.HasSuffix(path, ".json.gz") || strings.HasSuffix(path, ".json.zst")
}

// openInput opens a file ("-" is stdin) and undoes gzip or zstd compression,
// recognised by their magic bytes. counted receives the compressed bytes
// read, for progress.
func OpenInput(path string, counted *atomic.Int64) (io.Reader, func() error, error) {
	var f *os.File
	if path == "-" {
		f = os.Stdin
	} else {
		var err error
		if f, err = os.Open(path); err != nil {
			return nil, nil, err
		}
	}
	closeF := func() error {
		if f == os.Stdin {
			return nil
		}
		return f.Close()
	}
	br := bufio.NewReaderSize(&countingReader{r: f, n: counted}, 1<<20)
	magic, _ := br.Peek(4)
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		zr, err := gzip.NewReader(br)
		if err != nil {
			closeF()
			return nil, nil, fmt.Errorf("%s: gzip: %w", path, err)
		}
		return zr, func() error { zr.Close(); return closeF() }, nil
	case len(magic) == 4 && bytes.Equal(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
		if err != nil {
			closeF()
			return nil, nil, fmt.Errorf("%s: zstd: %w", path, err)
		}
		return zr, func() error { zr.Close(); return closeF() }, nil
	}
	return br, closeF, nil
}

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// run streams every line of files through work on opts.Workers goroutines
// and hands the results to sink in input order. Memory is bounded by a few
// batches per worker. work gets its worker index so it can keep per-worker
// scratch state.
func Run[R any](ctx context.Context, files []string, opts Options, sum *Summary,
	work func(w int, batch []InLine) (R, []*RecordError, int64, error),
	sink func(R) error,
) error {
	start := time.Now()
	defer func() { sum.Elapsed = time.Since(start) }()
	files, err := ExpandInputs(files)
	if err != nil {
		return err
	}
	var counted atomic.Int64
	var bar *progressbar.ProgressBar
	if opts.Progress != nil {
		var total int64
		for _, f := range files {
			if st, err := os.Stat(f); err == nil {
				total += st.Size()
			}
		}
		bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(opts.Progress),
			progressbar.OptionShowBytes(true),
			progressbar.OptionSetDescription("reading"),
			progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
		defer bar.Finish()
	}
	sum.Files += len(files)

	type job struct {
		batch []InLine
		res   chan batchResult[R]
	}
	g, ctx := errgroup.WithContext(ctx)
	jobs := make(chan job, opts.Workers)
	queue := make(chan chan batchResult[R], 2*opts.Workers)

	g.Go(func() error {
		defer close(jobs)
		defer close(queue)
		send := func(batch []InLine) error {
			res := make(chan batchResult[R], 1)
			select {
			case queue <- res:
			case <-ctx.Done():
				return ctx.Err()
			}
			select {
			case jobs <- job{batch: batch, res: res}:
			case <-ctx.Done():
				return ctx.Err()
			}
			return nil
		}
		for _, path := range files {
			r, closeF, err := OpenInput(path, &counted)
			if err != nil {
				return err
			}
			var lr interface {
				Next() ([]byte, int, error)
			}
			if opts.Documents || isDocumentFile(path) {
				dr, err := newDocReader(r, path, opts.MaxLine)
				if err != nil {
					closeF()
					return err
				}
				lr = dr
			} else {
				lr = trajectory.NewLineReader(r, path, opts.MaxLine)
			}
			var batch []InLine
			var arena []byte
			for {
				if err := ctx.Err(); err != nil {
					closeF()
					return err
				}
				data, n, err := lr.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					var bad *badDocument
					switch {
					case errors.As(err, &bad):
						batch = append(batch, InLine{File: path, N: n, err: bad.err})
						continue
					case !errors.Is(err, trajectory.ErrLineTooLong):
						closeF()
						return fmt.Errorf("read %s: %w", path, err)
					}
					batch = append(batch, InLine{File: path, N: n, err: trajectory.ErrLineTooLong})
					continue
				}
				if arena == nil {
					arena = make([]byte, 0, max(batchBytes, len(data)))
				}
				if len(arena)+len(data) > cap(arena) {
					if err := send(batch); err != nil {
						closeF()
						return err
					}
					batch = nil
					arena = make([]byte, 0, max(batchBytes, len(data)))
				}
				off := len(arena)
				arena = append(arena, data...)
				batch = append(batch, InLine{File: path, N: n, Data: arena[off:len(arena):len(arena)]})
			}
			if err := closeF(); err != nil {
				return fmt.Errorf("close %s: %w", path, err)
			}
			if len(batch) > 0 {
				if err := send(batch); err != nil {
					return err
				}
			}
		}
		return nil
	})
	for w := 0; w < opts.Workers; w++ {
		g.Go(func() error {
			for j := range jobs {
				var good []InLine
				var pre []*RecordError
				var nbytes int64
				for _, l := range j.batch {
					nbytes += int64(len(l.Data)) + 1
					switch {
					case errors.Is(l.err, trajectory.ErrLineTooLong):
						pre = append(pre, &RecordError{File: l.File, Line: l.N, Err: fmt.Errorf("%w (limit %d bytes)", l.err, opts.MaxLine)})
					case l.err != nil:
						pre = append(pre, &RecordError{File: l.File, Line: l.N, Err: l.err})
					case !utf8.Valid(l.Data):
						pre = append(pre, &RecordError{File: l.File, Line: l.N, Err: ErrInvalidUTF8})
					default:
						good = append(good, l)
					}
				}
				out, errs, ok, err := work(w, good)
				if len(pre) > 0 {
					errs = append(pre, errs...)
				}
				j.res <- batchResult[R]{out: out, errs: errs, ok: ok, err: err, lines: int64(len(j.batch)), bytes: nbytes}
				if err != nil {
					return err
				}
			}
			return nil
		})
	}
	g.Go(func() error {
		for res := range queue {
			var r batchResult[R]
			select {
			case r = <-res:
			case <-ctx.Done():
				return ctx.Err()
			}
			if r.err != nil {
				return r.err
			}
			sum.Lines += r.lines
			sum.Bytes += r.bytes
			sum.Records += r.ok
			if len(r.errs) > 0 {
				sortRecordErrors(r.errs)
				if opts.OnError == Fatal {
					return r.errs[0]
				}
				var last *RecordError
				for _, e := range r.errs {
					if last == nil || last.File != e.File || last.Line != e.Line {
						sum.skip(e)
					}
					last = e
					opts.tell(e)
				}
			}
			if err := sink(r.out); err != nil {
				return err
			}
			if bar != nil {
				_ = bar.Set64(counted.Load())
			}
		}
		return nil
	})
	return g.Wait()
}

// tell reports one bad record.
func (o *Options) tell(e *RecordError) {
	if o.Report != nil {
		o.Report(e)
	} else {
		o.Logger.Warn("skipped bad record", "at", e.Error(), "reason", e.Reason())
	}
}

// bad applies the policy to a bad record found outside a worker (in a
// sink): fatal returns it, skip counts and reports it.
func (o *Options) Bad(sum *Summary, e *RecordError) error {
	if o.OnError == Fatal {
		return e
	}
	sum.skip(e)
	o.tell(e)
	return nil
}

func sortRecordErrors(errs []*RecordError) {
	sort.SliceStable(errs, func(i, j int) bool {
		if errs[i].File != errs[j].File {
			return false
		}
		return errs[i].Line < errs[j].Line
	})
}

// badDocument carries a document that could not be parsed; the rest of its
// file cannot be resynchronised and is not read.
type badDocument struct{ err error }

func (b *badDocument) Error() string { return b.err.Error() }

// docReader yields the JSON documents of a file as compact single lines,
// whatever their layout: JSONL, one pretty-printed object (how agentworld
// session recordings are saved), or several concatenated. Line numbers are
// those where each document starts. The file is read whole, so it must fit
// within maxLine bytes.
type docReader struct {
	data []byte
	pos  int
	line int
	done bool
}

func newDocReader(r io.Reader, name string, maxLine int) (*docReader, error) {
	data, err := io.ReadAll(io.LimitReader(r, int64(maxLine)+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(data) > maxLine {
		return nil, fmt.Errorf("%s: %w: a document file over %d bytes", name, trajectory.ErrLineTooLong, maxLine)
	}
	return &docReader{data: data, line: 1}, nil
}

func (d *docReader) Next() ([]byte, int, error) {
	for !d.done && d.pos < len(d.data) {
		switch d.data[d.pos] {
		case '\n':
			d.line++
			d.pos++
			continue
		case ' ', '\t', '\r':
			d.pos++
			continue
		}
		break
	}
	if d.done || d.pos >= len(d.data) {
		return nil, d.line, io.EOF
	}
	start := d.line
	dec := json.NewDecoder(bytes.NewReader(d.data[d.pos:]))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		d.done = true
		return nil, start, &badDocument{err: fmt.Errorf("%w: %v (the rest of the file is not read)", ErrBadJSON, err)}
	}
	end := d.pos + int(dec.InputOffset())
	d.line += bytes.Count(d.data[d.pos:end], []byte{'\n'})
	d.pos = end
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, start, &badDocument{err: fmt.Errorf("%w: %v", ErrBadJSON, err)}
	}
	return buf.Bytes(), start, nil
}

// eachTrajectory decodes the lines of a batch, collects the errors of the
// invalid ones, and calls fn on every valid trajectory; ok counts the
// trajectories fn accepted. An error from fn stops the batch.
func EachTrajectory(batch []InLine, fn func(l *InLine, t *trajectory.Trajectory) error) (errs []*RecordError, ok int64, err error) {
	return EachDecoded(batch, DecodeTrajectory, fn)
}

// eachDecoded is eachTrajectory for any line decoder.
func EachDecoded[T any](batch []InLine, decode func(data []byte, file string, line int) (T, []*RecordError), fn func(l *InLine, v T) error) (errs []*RecordError, ok int64, err error) {
	for i := range batch {
		l := &batch[i]
		v, es := decode(l.Data, l.File, l.N)
		if len(es) > 0 {
			errs = append(errs, es...)
			continue
		}
		if err := fn(l, v); err != nil {
			return nil, 0, err
		}
		ok++
	}
	return errs, ok, nil
}
