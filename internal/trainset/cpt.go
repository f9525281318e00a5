package trainset

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/datapipe"
	"github.com/agentworld/agentworld/internal/expand"
	"github.com/agentworld/agentworld/internal/masking"
	"github.com/agentworld/agentworld/internal/tokencount"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// CPTOptions configure ExportCPT; nil means the defaults.
type CPTOptions struct {
	// ShardBytes bounds a shard file; a shard is closed before a document
	// would take it past the bound, so only a single document larger than
	// the bound makes a larger shard (alone). 0 means 256 MiB.
	ShardBytes int64
	// KeepDuplicates turns off exact dedup of documents (by a hash of the
	// text, 16 bytes kept per distinct document); false dedups.
	KeepDuplicates bool
	// Corpus lists files of the user's own documents to mix in: JSONL with
	// a "text" field per line (gzip or zstd allowed), or, for names ending
	// in .txt or .md, the whole file as one document. Nil mixes nothing.
	Corpus []string
	// CorpusRatio is the share of the estimated tokens that should come
	// from Corpus, in [0, 1); 0 means none. Corpus documents are
	// interleaved with the trajectory documents so that every prefix of
	// the output keeps the ratio; when the corpus runs out the achieved
	// ratio is lower and the manifest says so. Corpus documents are used
	// at most once, in order.
	CorpusRatio float64
	// Sampled reads the input as `agentworld data sample`'s selected set
	// (ReadSampledLine): one document per kept beam, SampledCPTDocument,
	// with the system prompt the line carries; false (the zero value)
	// reads trajectories.
	Sampled bool
	// Stage and Mixes name the stage mix the template versions were drawn
	// from and its file, recorded in the manifest; empty when one version
	// or none was given.
	Stage, Mixes string
}

// CPTLine is one line of a CPT shard: the document text, which trainers'
// pretraining loaders read, and where it came from.
type CPTLine struct {
	Text string `json:"text"`
	// Source is "trajectory" or "corpus".
	Source string `json:"source"`
	ID     string `json:"id"`
	Domain string `json:"domain,omitempty"`
	// Template names the template version the system prompt came from;
	// TemplateID pins its text.
	Template   string `json:"template,omitempty"`
	TemplateID string `json:"template_id,omitempty"`
	// Tokens is tokencount.Estimate(Text).
	Tokens int `json:"tokens"`
}

// CPTShard describes one written shard.
type CPTShard struct {
	Name      string `json:"name"`
	Bytes     int64  `json:"bytes"`
	Documents int64  `json:"documents"`
	Tokens    int64  `json:"tokens"`
}

// CPTManifest is what ExportCPT wrote, saved as cpt-manifest.json beside
// the shards.
type CPTManifest struct {
	Shards     []CPTShard       `json:"shards"`
	Documents  map[string]int64 `json:"documents"`
	Tokens     map[string]int64 `json:"tokens"`
	Duplicates int64            `json:"duplicates"`
	// Templates counts the documents per pinned template version
	// ("name@id"), drawn from the mix Stage of the file Mixes when those
	// are set; OwnPrompt counts those that kept their trajectory's own
	// system prompt (no version rendered them).
	Templates map[string]int64 `json:"templates"`
	OwnPrompt int64            `json:"own_prompt"`
	Stage     string           `json:"stage,omitempty"`
	Mixes     string           `json:"mixes,omitempty"`
	// CorpusRatio is the achieved share of corpus tokens; CorpusTarget the
	// one asked for; CorpusExhausted is true when the corpus ran out first.
	CorpusRatio     float64 `json:"corpus_ratio"`
	CorpusTarget    float64 `json:"corpus_target"`
	CorpusExhausted bool    `json:"corpus_exhausted"`
	TokenEstimate   string  `json:"token_estimate"`
}

const tokenEstimateRule = "ceil(ASCII bytes / 4) + one token per non-ASCII character"

// CPTDocument renders a trajectory as one pretraining document: the system
// prompt, then every turn as the action prompt AgentWorldBench records show
// ("### Turn N", "**Action:**") and the observation after the observation
// marker, blocks separated by a blank line; the same renderers the
// simulator and the SFT samples use.
func CPTDocument(system string, turns []trajectory.Turn) string {
	var b strings.Builder
	if system != "" {
		b.WriteString(system)
	}
	for i, t := range turns {
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(conversation.ActionPrompt(i+1, t.Action))
		b.WriteString("\n\n")
		b.WriteString(conversation.ObservationResponse(t.Observation))
	}
	return b.String()
}

type cptItem struct {
	hash [16]byte
	line CPTLine
}

// ExportCPT writes trajectories (and optionally a user corpus) as
// continued-pretraining documents into size-bounded JSONL shards
// dir/cpt-00000.jsonl, … and a manifest dir/cpt-manifest.json, dropping
// exact duplicate documents. xo's Templates, Default and Seed choose each
// trajectory's system prompt as for its samples; its Mode and Policy are
// not used.
func ExportCPT(ctx context.Context, files []string, dir string, xo *expand.ExpandOptions, co *CPTOptions, opts *datapipe.Options) (*CPTManifest, *datapipe.Summary, error) {
	var c CPTOptions
	if co != nil {
		c = *co
	}
	if c.ShardBytes <= 0 {
		c.ShardBytes = 256 << 20
	}
	if c.CorpusRatio < 0 || c.CorpusRatio >= 1 {
		return nil, nil, fmt.Errorf("corpus ratio %v: want a share in [0, 1)", c.CorpusRatio)
	}
	if c.CorpusRatio > 0 && len(c.Corpus) == 0 {
		return nil, nil, fmt.Errorf("corpus ratio %v without corpus files", c.CorpusRatio)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	o := opts.Norm()
	exps := make([]*expand.Expander, o.Workers)
	for i := range exps {
		x, err := expand.NewExpander(xo)
		if err != nil {
			return nil, nil, err
		}
		exps[i] = x
	}
	m := &CPTManifest{
		Documents: map[string]int64{}, Tokens: map[string]int64{}, Templates: map[string]int64{},
		CorpusTarget: c.CorpusRatio, TokenEstimate: tokenEstimateRule, Stage: c.Stage, Mixes: c.Mixes,
	}
	sw := &shardWriter{dir: dir, limit: c.ShardBytes, m: m}
	defer sw.abort()
	seen := map[[16]byte]struct{}{}
	sum := &datapipe.Summary{}
	var corpus *corpusReader
	if c.CorpusRatio > 0 {
		corpus = &corpusReader{files: c.Corpus}
		defer corpus.close()
	}
	write := func(l CPTLine, h [16]byte) error {
		if !c.KeepDuplicates {
			if _, dup := seen[h]; dup {
				m.Duplicates++
				return nil
			}
			seen[h] = struct{}{}
		}
		if err := sw.write(&l); err != nil {
			return err
		}
		m.Documents[l.Source]++
		m.Tokens[l.Source] += int64(l.Tokens)
		if l.Source == "trajectory" {
			if pin := TemplatePin(l.Template, l.TemplateID); pin != "" {
				m.Templates[pin]++
			} else {
				m.OwnPrompt++
			}
		}
		sum.Written++
		return nil
	}
	// topUp writes corpus documents until the corpus share of tokens
	// reaches the target for the trajectory tokens written so far.
	topUp := func() error {
		if corpus == nil {
			return nil
		}
		want := c.CorpusRatio / (1 - c.CorpusRatio) * float64(m.Tokens["trajectory"])
		for float64(m.Tokens["corpus"]) < want {
			text, id, ok, err := corpus.next()
			if err != nil {
				return err
			}
			if !ok {
				m.CorpusExhausted = true
				corpus = nil
				return nil
			}
			l := CPTLine{Text: text, Source: "corpus", ID: id, Tokens: tokencount.Estimate(text)}
			if err := write(l, sha256Of(text)); err != nil {
				return err
			}
		}
		return nil
	}
	err := datapipe.Run(ctx, files, o, sum, func(w int, batch []datapipe.InLine) ([]cptItem, []*datapipe.RecordError, int64, error) {
		if c.Sampled {
			return sampledCPTItems(batch)
		}
		var items []cptItem
		errs, ok, err := datapipe.EachTrajectory(batch, func(l *datapipe.InLine, t *trajectory.Trajectory) error {
			system, v, err := exps[w].SystemPrompt(t)
			if err != nil {
				return fmt.Errorf("%s:%d: %w", l.File, l.N, err)
			}
			tmpl, tmplID := "", ""
			if v != nil {
				tmpl, tmplID = v.Name, v.ID
			}
			text := CPTDocument(system, t.Turns)
			items = append(items, cptItem{hash: sha256Of(text), line: CPTLine{
				Text: text, Source: "trajectory", ID: t.ID, Domain: t.Domain, Template: tmpl, TemplateID: tmplID, Tokens: tokencount.Estimate(text),
			}})
			return nil
		})
		return items, errs, ok, err
	}, func(items []cptItem) error {
		for _, it := range items {
			if err := write(it.line, it.hash); err != nil {
				return err
			}
			if err := topUp(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return m, sum, err
	}
	if err := sw.close(); err != nil {
		return m, sum, err
	}
	if total := m.Tokens["trajectory"] + m.Tokens["corpus"]; total > 0 {
		m.CorpusRatio = float64(m.Tokens["corpus"]) / float64(total)
	}
	mf, err := datapipe.CreateOutput(filepath.Join(dir, "cpt-manifest.json"), nil)
	if err != nil {
		return m, sum, err
	}
	enc := json.NewEncoder(mf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		mf.Abort()
		return m, sum, err
	}
	return m, sum, mf.Commit()
}

func sha256Of(s string) [16]byte {
	h := sha256.Sum256(masking.UnsafeBytes(s))
	var out [16]byte
	copy(out[:], h[:])
	return out
}

// shardWriter writes CPT lines into numbered shards of bounded size.
type shardWriter struct {
	dir   string
	limit int64
	m     *CPTManifest
	cur   *datapipe.Output
	shard *CPTShard
}

func (s *shardWriter) write(l *CPTLine) error {
	b, err := trajectory.Marshal(l)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if s.cur != nil && s.shard.Bytes+int64(len(b)) > s.limit {
		if err := s.close(); err != nil {
			return err
		}
	}
	if s.cur == nil {
		name := fmt.Sprintf("cpt-%05d.jsonl", len(s.m.Shards))
		if s.cur, err = datapipe.CreateOutput(filepath.Join(s.dir, name), nil); err != nil {
			return err
		}
		s.m.Shards = append(s.m.Shards, CPTShard{Name: name})
		s.shard = &s.m.Shards[len(s.m.Shards)-1]
	}
	if _, err := s.cur.Write(b); err != nil {
		return err
	}
	s.shard.Bytes += int64(len(b))
	s.shard.Documents++
	s.shard.Tokens += int64(l.Tokens)
	return nil
}

func (s *shardWriter) close() error {
	if s.cur == nil {
		return nil
	}
	err := s.cur.Commit()
	s.cur, s.shard = nil, nil
	return err
}

// abort drops the open shard of a failed run. Shards already closed stay;
// the manifest, written last, is what marks an export complete.
func (s *shardWriter) abort() {
	if s.cur != nil {
		s.cur.Abort()
	}
}

// corpusReader yields the user's documents one at a time.
type corpusReader struct {
	files  []string
	i      int
	sc     *bufio.Scanner
	closer func() error
	name   string
	line   int
}

func (r *corpusReader) next() (text, id string, ok bool, err error) {
	for {
		if r.sc == nil {
			if r.i >= len(r.files) {
				return "", "", false, nil
			}
			r.name = r.files[r.i]
			r.i++
			if ext := strings.ToLower(filepath.Ext(r.name)); ext == ".txt" || ext == ".md" {
				b, err := os.ReadFile(r.name)
				if err != nil {
					return "", "", false, err
				}
				return string(b), filepath.Base(r.name), true, nil
			}
			var counted atomic.Int64
			rd, closer, err := datapipe.OpenInput(r.name, &counted)
			if err != nil {
				return "", "", false, err
			}
			r.sc, r.closer, r.line = bufio.NewScanner(rd), closer, 0
			r.sc.Buffer(make([]byte, 0, 1<<20), datapipe.DefaultMaxLine)
		}
		for r.sc.Scan() {
			r.line++
			b := r.sc.Bytes()
			if len(strings.TrimSpace(string(b))) == 0 {
				continue
			}
			var doc struct {
				Text *string `json:"text"`
			}
			if err := json.Unmarshal(b, &doc); err != nil {
				return "", "", false, fmt.Errorf("%s:%d: corpus line is not JSON: %v", r.name, r.line, err)
			}
			if doc.Text == nil {
				return "", "", false, fmt.Errorf("%s:%d: text: missing (a corpus line is {\"text\": \"...\"})", r.name, r.line)
			}
			return *doc.Text, fmt.Sprintf("%s:%d", filepath.Base(r.name), r.line), true, nil
		}
		if err := r.sc.Err(); err != nil {
			return "", "", false, fmt.Errorf("%s:%d: %w", r.name, r.line+1, err)
		}
		r.close()
	}
}

func (r *corpusReader) close() {
	if r.closer != nil {
		r.closer()
	}
	r.sc, r.closer = nil, nil
}
