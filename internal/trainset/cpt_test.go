package trainset

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/datapipe"
	"github.com/agentworld/agentworld/internal/expand"
	"github.com/agentworld/agentworld/internal/tokencount"
)

// readShards reads every shard the manifest lists, checking each file's
// size and counts against it.
func readShards(t *testing.T, dir string, m *CPTManifest) []CPTLine {
	t.Helper()
	var all []CPTLine
	for _, sh := range m.Shards {
		b, err := os.ReadFile(filepath.Join(dir, sh.Name))
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(b)) != sh.Bytes {
			t.Fatalf("%s: %d bytes, manifest says %d", sh.Name, len(b), sh.Bytes)
		}
		lines := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
		if int64(len(lines)) != sh.Documents {
			t.Fatalf("%s: %d lines, manifest says %d", sh.Name, len(lines), sh.Documents)
		}
		for _, l := range lines {
			var c CPTLine
			if err := json.Unmarshal(l, &c); err != nil {
				t.Fatal(err)
			}
			all = append(all, c)
		}
	}
	var m2 CPTManifest
	b, err := os.ReadFile(filepath.Join(dir, "cpt-manifest.json"))
	if err != nil || json.Unmarshal(b, &m2) != nil || len(m2.Shards) != len(m.Shards) {
		t.Fatalf("manifest file: %v", err)
	}
	return all
}

// TestCPTDocumentsReconstructTurns parses every document back with the
// published record headings, independently of the renderer (an action or
// observation taken from a record already carries its heading or marker
// and keeps it, as the renderers specify), and requires
// exactly its trajectory's system prompt and turns, in order; and every
// shard to stay within the size bound unless it holds one document.
func TestCPTDocumentsReconstructTurns(t *testing.T) {
	const path = "../datapipe/testdata/small.jsonl"
	trajs, err := datapipe.ReadTrajectories(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	const limit = 60 << 10
	m, sum, err := ExportCPT(context.Background(), []string{path}, dir, nil, &CPTOptions{ShardBytes: limit}, &datapipe.Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	docs := readShards(t, dir, m)
	if len(docs) != len(trajs) || sum.Written != int64(len(trajs)) || m.Documents["trajectory"] != int64(len(trajs)) {
		t.Fatalf("%d documents, summary %+v, manifest %+v", len(docs), sum, m.Documents)
	}
	// Every document is counted once: under its pinned version, or as
	// keeping its own prompt; never under an empty version name.
	pinned := int64(0)
	for pin, n := range m.Templates {
		if pin == "" {
			t.Errorf("manifest templates has an empty version name (%d documents)", n)
		}
		pinned += n
	}
	if pinned+m.OwnPrompt != int64(len(trajs)) {
		t.Errorf("manifest: %d pinned + %d own prompts, want %d documents", pinned, m.OwnPrompt, len(trajs))
	}
	if len(m.Shards) < 2 {
		t.Fatalf("%d shard(s) of %d bytes: the bound was never reached", len(m.Shards), limit)
	}
	for _, sh := range m.Shards {
		if sh.Bytes > limit && sh.Documents != 1 {
			t.Errorf("%s: %d bytes over the %d bound with %d documents", sh.Name, sh.Bytes, limit, sh.Documents)
		}
	}
	var tokens int64
	for i, d := range docs {
		tr := trajs[i]
		if d.ID != tr.ID || d.Domain != tr.Domain || d.Source != "trajectory" {
			t.Fatalf("document %d: %s/%s/%s, want %s/%s", i, d.ID, d.Domain, d.Source, tr.ID, tr.Domain)
		}
		if d.Tokens != tokencount.Estimate(d.Text) {
			t.Fatalf("%s: tokens %d", d.ID, d.Tokens)
		}
		tokens += int64(d.Tokens)
		rest, ok := strings.CutPrefix(d.Text, expand.AssembleSystemPrompt(tr)+"\n\n")
		if !ok {
			t.Fatalf("%s: the document does not open with the system prompt", d.ID)
		}
		for k, tu := range tr.Turns {
			head := "### Turn " + strconv.Itoa(k+1) + "\n**Action:**\n"
			if !strings.HasPrefix(tu.Action, "### Turn ") {
				if rest, ok = strings.CutPrefix(rest, head); !ok {
					t.Fatalf("%s turn %d: no action heading at %.60q", d.ID, k+1, rest)
				}
			}
			obs := tu.Observation
			if !strings.HasPrefix(obs, "**Environment Observation:**") {
				obs = "**Environment Observation:**\n" + obs
			}
			block := tu.Action + "\n\n" + obs
			if rest, ok = strings.CutPrefix(rest, block); !ok {
				t.Fatalf("%s turn %d: action and observation differ at %.80q", d.ID, k+1, rest)
			}
			if k < len(tr.Turns)-1 {
				if rest, ok = strings.CutPrefix(rest, "\n\n"); !ok {
					t.Fatalf("%s turn %d: no separator", d.ID, k+1)
				}
			}
		}
		if rest != "" {
			t.Fatalf("%s: %d bytes after the last turn", d.ID, len(rest))
		}
	}
	if tokens != m.Tokens["trajectory"] {
		t.Fatalf("manifest tokens %d, documents sum to %d", m.Tokens["trajectory"], tokens)
	}
}

func TestCPTDedup(t *testing.T) {
	data, _ := os.ReadFile("../datapipe/testdata/small.jsonl")
	path := filepath.Join(t.TempDir(), "twice.jsonl")
	os.WriteFile(path, append(append([]byte{}, data...), data...), 0o644)
	dir := t.TempDir()
	m, _, err := ExportCPT(context.Background(), []string{path}, dir, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	docs := readShards(t, dir, m)
	if len(docs) != 6 || m.Duplicates != 6 {
		t.Fatalf("%d documents, %d duplicates; want 6 and 6", len(docs), m.Duplicates)
	}
	seen := map[string]bool{}
	for _, d := range docs {
		if seen[d.Text] {
			t.Fatalf("%s written twice", d.ID)
		}
		seen[d.Text] = true
	}
	m, _, err = ExportCPT(context.Background(), []string{path}, t.TempDir(), nil, &CPTOptions{KeepDuplicates: true}, nil)
	if err != nil || m.Documents["trajectory"] != 12 {
		t.Fatalf("keep duplicates: %v %+v", err, m.Documents)
	}
}

func writeCorpus(t *testing.T, n int) string {
	t.Helper()
	var b bytes.Buffer
	for i := range n {
		line, _ := json.Marshal(map[string]string{"text": fmt.Sprintf("Manual page %d. %s", i, strings.Repeat("The kernel schedules processes by priority. ", 20))})
		b.Write(append(line, '\n'))
	}
	p := filepath.Join(t.TempDir(), "corpus.jsonl")
	os.WriteFile(p, b.Bytes(), 0o644)
	return p
}

// TestCPTMix checks the corpus share of estimated tokens: at the target
// within one corpus document when the corpus is large enough, and all of
// it (flagged exhausted) when it is not.
func TestCPTMix(t *testing.T) {
	corpus := writeCorpus(t, 2000)
	dir := t.TempDir()
	m, _, err := ExportCPT(context.Background(), []string{"../datapipe/testdata/small.jsonl"}, dir, nil, &CPTOptions{Corpus: []string{corpus}, CorpusRatio: 0.25}, nil)
	if err != nil {
		t.Fatal(err)
	}
	docs := readShards(t, dir, m)
	var traj, corp, maxDoc int64
	for _, d := range docs {
		if d.Source == "corpus" {
			corp += int64(d.Tokens)
			maxDoc = max(maxDoc, int64(d.Tokens))
		} else {
			traj += int64(d.Tokens)
		}
	}
	total := float64(traj + corp)
	if m.CorpusExhausted || m.CorpusRatio < 0.25 || m.CorpusRatio > 0.25+float64(maxDoc)/total {
		t.Fatalf("ratio %v (exhausted %v), want 0.25 plus at most one document (%d of %.0f tokens)", m.CorpusRatio, m.CorpusExhausted, maxDoc, total)
	}
	if d := cmp.Diff(map[string]int64{"trajectory": traj, "corpus": corp}, m.Tokens); d != "" {
		t.Fatal(d)
	}
	if docs[0].Source != "trajectory" || docs[1].Source != "corpus" {
		t.Fatalf("corpus documents are not interleaved: %s, %s", docs[0].Source, docs[1].Source)
	}

	small := writeCorpus(t, 3)
	m, _, err = ExportCPT(context.Background(), []string{"../datapipe/testdata/small.jsonl"}, t.TempDir(), nil, &CPTOptions{Corpus: []string{small}, CorpusRatio: 0.5}, nil)
	if err != nil || !m.CorpusExhausted || m.Documents["corpus"] != 3 || m.CorpusRatio >= 0.5 {
		t.Fatalf("small corpus: %v %+v", err, m)
	}
}

func TestCPTBadInput(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	os.WriteFile(bad, []byte("{\"text\":\"ok\"}\n{\"body\":\"no text\"}\n"), 0o644)
	_, _, err := ExportCPT(context.Background(), []string{"../datapipe/testdata/small.jsonl"}, t.TempDir(), nil, &CPTOptions{Corpus: []string{bad}, CorpusRatio: 0.9}, nil)
	if err == nil || !strings.Contains(err.Error(), "bad.jsonl:2: text") {
		t.Fatalf("missing text: %v", err)
	}
	for _, r := range []float64{-0.1, 1} {
		if _, _, err := ExportCPT(context.Background(), nil, t.TempDir(), nil, &CPTOptions{Corpus: []string{bad}, CorpusRatio: r}, nil); err == nil {
			t.Errorf("ratio %v accepted", r)
		}
	}
}

func TestEstimateTokens(t *testing.T) {
	for s, want := range map[string]int{"": 0, "abcd": 1, "abcde": 2, "東京": 2, "ab東": 2, "naïve": 2} {
		if got := tokencount.Estimate(s); got != want {
			t.Errorf("tokencount.Estimate(%q) = %d, want %d", s, got, want)
		}
	}
}
