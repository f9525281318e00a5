// Package replay answers simulator steps from recorded transitions: an
// exact match on domain + history + action returns the recorded
// observation; otherwise the nearest recorded transition of the same
// domain (by word similarity of the action and the preceding observation)
// answers, marked approximate, but only when its action is close to the
// one asked about (a share of their words, [DefaultMinSimilarity]): an
// action further from every recording is answered with an "unrecorded
// action" observation naming the nearest recorded actions, never with the
// answer to something else. It is the simulator's default backend when
// no world model is configured, and, as a Cache, a transition cache in
// front of a real model that records what the model answers.
//
// # Keys
//
// A history is named by a chain key: key_0 = H(domain), and each turn
// extends it, key_k = H(key_k-1, action_k, observation_k) (SHA-256 over
// tagged, length-prefixed fields, so different splits of the same text
// cannot collide). The exact key of a step is H(chain key of its history,
// action). A session keeps its running chain (see Chain), so a step hashes
// only the turn added since the previous one, however long the episode.
//
// # Files
//
// Recordings and cache files are JSONL; LoadDir reads every *.jsonl file
// under a directory. A line is one of two kinds:
//
//   - A unified trajectory (package trajectory), recognised by having no
//     "kind" member. Every turn is indexed; the world name comes from
//     meta.world and the observation before turn 1 from
//     meta.initial_observation. Bundled recordings and cache files written
//     by earlier versions of agentworld are made of these.
//   - A transition, {"kind":"transition","parent":HEX,"domain":D,
//     "world":W,"model":M,"action":A,"observation":O}: one step, where
//     parent is the chain key (64 lowercase hex digits) of the history the
//     action was taken after, and world and model (the world model that
//     answered) may be absent. Record appends one such line
//     per step (one write, then fsync), so a cache file grows with the
//     number of steps, not with the square of episode length.
//
// A transition line does not carry the observation before its action;
// loading finds it from an earlier line of the same library whose history
// ends where this one's parent does (empty when there is none), for
// nearest-neighbour scoring. A bad line stops loading with an error naming
// the file and line (*trajectory.LineError), except a torn last line (one a
// crash cut short: bad and without its newline), which is logged and
// skipped; RecordTo cuts it off before appending.
package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"unicode"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/journal"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// Backend names.
const (
	BackendReplay = "replay"
	BackendCache  = "cache"
)

// Library holds recorded transitions, indexed for exact and nearest
// lookups. It is safe for concurrent use.
//
// Every transition, loaded or recorded, is indexed both ways: the exact
// index answers replays and cache hits, and the per-domain list answers
// nearest-neighbour replays, so a library behaves the same whether its
// transitions were recorded in this process or loaded from a cache file.
// The word sets nearest-neighbour scoring needs are computed on first use,
// so a library used only as a Cache never pays for them.
type Library struct {
	mu       sync.RWMutex
	exact    map[Key][]*transition
	byDomain map[string][]*transition
	// after maps the chain key of each loaded history to its last
	// observation, which transition lines do not carry.
	after map[Key]string
	n     int

	outMu sync.Mutex
	out   syncWriter // where Record appends, when recording
	buf   bytes.Buffer

	log *slog.Logger
	// strict is Options.Strict.
	strict bool
	// minSim is Options.MinSimilarity, defaulted.
	minSim float64
}

// Options tunes a Library.
type Options struct {
	// Logger reports skipped torn lines; nil discards.
	Logger *slog.Logger
	// Strict makes the replay backend refuse a step whose action was not
	// recorded after that history (a bad request naming the action, the
	// nearest recorded action given as a hint) instead of answering with
	// the nearest recorded transition; false answers, marked approximate.
	Strict bool
	// MinSimilarity is how close (the share of words two actions have in
	// common, see [Match.ActionSimilarity]) a recorded action must be to
	// answer for another as an approximate match; an action further from
	// every recording gets the "unrecorded action" observation. 0 means
	// [DefaultMinSimilarity]; a negative value answers with the nearest
	// recording however far it is.
	MinSimilarity float64
}

// DefaultMinSimilarity is the action similarity an approximate answer
// needs by default: half the words of the two actions in common ("python
// -m pytest -q tests" answered by "python -m pytest -q" is 0.8, a search
// for a company's founder answered by one for the tallest building about
// 0.1, "echo step1" answered by "ls" 0).
const DefaultMinSimilarity = 0.5

// syncWriter is what Record appends to: an *os.File, or a test double.
type syncWriter interface {
	io.Writer
	Sync() error
	Close() error
}

type transition struct {
	world       string
	model       string
	action      string
	prevObs     string
	observation string

	once      sync.Once
	words     map[string]struct{}
	prevWords map[string]struct{}
}

// index computes the word sets of nearest-neighbour scoring, once.
func (t *transition) index() {
	t.once.Do(func() { t.words, t.prevWords = actionWords(t.action), words(t.prevObs) })
}

// New returns an empty library; o may be nil.
func New(o *Options) *Library {
	log := slog.New(slog.DiscardHandler)
	if o != nil && o.Logger != nil {
		log = o.Logger
	}
	l := &Library{exact: map[Key][]*transition{}, byDomain: map[string][]*transition{}, after: map[Key]string{}, log: log, minSim: DefaultMinSimilarity}
	if o != nil {
		l.strict = o.Strict
		if o.MinSimilarity != 0 {
			l.minSim = o.MinSimilarity
		}
	}
	return l
}

// Len is the number of transitions held.
func (l *Library) Len() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.n
}

// Domains lists the domains with recordings.
func (l *Library) Domains() []string {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]string, 0, len(l.byDomain))
	for d := range l.byDomain {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// LoadFS reads every *.jsonl file under dir of fsys (see the package doc
// for the line kinds).
func (l *Library) LoadFS(fsys fs.FS, dir string) error {
	return fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || path.Ext(p) != ".jsonl" {
			return nil
		}
		f, err := fsys.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		return l.Read(f, p)
	})
}

// LoadDir reads every *.jsonl file under a directory of the file system.
func (l *Library) LoadDir(dir string) error {
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("replay recordings: %w", err)
	}
	return l.LoadFS(os.DirFS(dir), ".")
}

// Read adds the lines (trajectories and transitions) of one JSONL stream;
// name is used in errors, which are *trajectory.LineError.
func (l *Library) Read(r io.Reader, name string) error {
	tail := &tailReader{r: r}
	lr := trajectory.NewLineReader(tail, name, 0)
	for {
		line, n, err := lr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		e, err := parseLine(line)
		if err != nil {
			err = &trajectory.LineError{File: name, Line: n, Err: err}
			if _, _, more := lr.Next(); errors.Is(more, io.EOF) && tail.last != '\n' {
				l.log.Warn("skipped a torn last line (a crash cut it short)", "err", err)
				return nil
			}
			return err
		}
		if e.traj != nil {
			l.AddTrajectory(e.traj)
			continue
		}
		s := e.step
		l.mu.Lock()
		l.add(s.domain, s.world, s.model, s.parent.exact(s.action), l.after[s.parent], s.action, s.observation)
		l.after[s.parent.Next(s.action, s.observation)] = s.observation
		l.mu.Unlock()
	}
}

// tailReader remembers the last byte read through it, which tells a torn
// last line (no newline after it) from a whole bad one.
type tailReader struct {
	r    io.Reader
	last byte
}

func (t *tailReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		t.last = p[n-1]
	}
	return n, err
}

// AddTrajectory indexes every transition of t.
func (l *Library) AddTrajectory(t *trajectory.Trajectory) {
	var w string
	if raw, ok := t.Meta["world"]; ok {
		_ = json.Unmarshal(raw, &w)
	}
	d := strings.ToLower(t.Domain)
	prev := ""
	if raw, ok := t.Meta["initial_observation"]; ok {
		_ = json.Unmarshal(raw, &prev)
	}
	chain := Root(d)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, tu := range t.Turns {
		act := canonical(d, tu.Action)
		l.add(d, w, "", chain.exact(act), prev, act, tu.Observation)
		chain = chain.Next(act, tu.Observation)
		l.after[chain] = tu.Observation
		prev = tu.Observation
	}
}

// add indexes one transition under its exact key; the caller holds l.mu.
// A transition already held (same key, world, model and observation) is
// not added again: cache files written by earlier versions repeat every
// earlier turn of a session on each line. add reports whether it added.
func (l *Library) add(d, world, model string, k Key, prevObs, action, observation string) bool {
	for _, c := range l.exact[k] {
		if c.world == world && c.model == model && c.observation == observation {
			return false
		}
	}
	tr := &transition{world: world, model: model, action: action, prevObs: prevObs, observation: observation}
	l.exact[k] = append(l.exact[k], tr)
	l.byDomain[d] = append(l.byDomain[d], tr)
	l.n++
	return true
}

// canonical renders a recorded action the way sessions render it, so
// recordings match live actions written with other key orders or spacing.
func canonical(d, action string) string {
	raw, _ := json.Marshal(action)
	if a, err := conversation.ParseAction(domain.Domain(d), raw); err == nil {
		return a.Text
	}
	return action
}

// actionWords are the words of what an action says: the string values of
// a JSON action (a tool's name and its arguments' text, a terminal action's
// keystrokes), not its keys, numbers or punctuation, which every action of
// a domain shares ("name", "arguments", "keystrokes", "duration"). Any
// other action is taken as text.
func actionWords(action string) map[string]struct{} {
	t := strings.TrimSpace(action)
	if t == "" || (t[0] != '{' && t[0] != '[') {
		return words(action)
	}
	var v any
	if json.Unmarshal([]byte(t), &v) != nil {
		return words(action)
	}
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			b.WriteString(x)
			b.WriteByte(' ')
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return words(b.String())
}

func words(s string) map[string]struct{} {
	out := map[string]struct{}{}
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' && r != '.' && r != '/' && r != '-'
	}) {
		out[w] = struct{}{}
	}
	return out
}

func jaccard(a, b map[string]struct{}) float64 {
	if len(a) == 0 && len(b) == 0 {
		return 1
	}
	inter := 0
	small, large := a, b
	if len(small) > len(large) {
		small, large = large, small
	}
	for w := range small {
		if _, ok := large[w]; ok {
			inter++
		}
	}
	return float64(inter) / float64(len(a)+len(b)-inter)
}

// At locates a step: what its answer may depend on besides the action.
type At struct {
	// Domain is the session's domain.
	Domain string
	// World is the world's name; "" matches recordings of no world.
	World string
	// Model names the world model a cache answer comes from ("" when not
	// known); cache hits need the same model, or a transition recorded
	// without one (recordings, caches written before models were kept).
	Model string
	// History is the chain key of the turns before the step (Chain.At).
	History Key
	// Prev is the last observation of those turns ("" before the first
	// turn); nearest-neighbour lookups weigh it.
	Prev string
}

// Match is a lookup result.
type Match struct {
	Observation string
	// Approximate is true for a nearest-neighbour answer.
	Approximate bool
	// Action and World are the recorded action the observation answered,
	// and its world: for an approximate match, another action than the
	// one asked about, which the answer must say.
	Action, World string
	// Score is the similarity of a nearest-neighbour match (1 for exact).
	Score float64
	// ActionSimilarity is the share of words the recorded action has in
	// common with the one asked about (Jaccard over [actionWords]; 1 for
	// an exact match).
	ActionSimilarity float64
	// Unrecorded is true when no recorded action is within the library's
	// MinSimilarity of the one asked about: Observation is then empty and
	// Nearest names the closest recorded actions.
	Unrecorded bool
	// Nearest are, for an unrecorded action, the closest recorded actions
	// (at most [nearestShown], best first, preferring the session's world).
	Nearest []Nearest
}

// nearestShown is how many recorded actions an unrecorded action's answer
// names.
const nearestShown = 3

// Lookup finds the recorded answer to action at a, preferring recordings
// of a.World. ok is false when the domain has no recordings at all.
func (l *Library) Lookup(a At, action string) (Match, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if cands := l.exact[a.History.exact(action)]; len(cands) > 0 {
		best := cands[0]
		for _, c := range cands {
			if c.world == a.World {
				best = c
				break
			}
		}
		return Match{Observation: best.observation, Action: best.action, World: best.world, Score: 1, ActionSimilarity: 1}, true
	}
	all := l.byDomain[a.Domain]
	if len(all) == 0 {
		return Match{}, false
	}
	aw, pw := actionWords(action), words(a.Prev)
	// The best answer among the recordings close enough, and the closest
	// few of all, for naming when none is.
	var best *scored
	var near []scored
	for _, t := range all {
		t.index()
		c := scored{t: t, act: jaccard(aw, t.words)}
		c.score = 0.7*c.act + 0.3*jaccard(pw, t.prevWords)
		if t.world == a.World && a.World != "" {
			c.score += 0.1
		}
		if (l.minSim < 0 || c.act >= l.minSim) && (best == nil || c.score > best.score) {
			cc := c
			best = &cc
		}
		near = keepNearest(near, c)
	}
	if best == nil {
		m := Match{Approximate: true, Unrecorded: true}
		for _, c := range near {
			m.Nearest = append(m.Nearest, Nearest{Action: c.t.action, World: c.t.world, Similarity: c.score, ActionSimilarity: c.act})
		}
		return m, true
	}
	return Match{Observation: best.t.observation, Approximate: true, Action: best.t.action, World: best.t.world, Score: best.score, ActionSimilarity: best.act}, true
}

// scored is a recorded transition weighed against a step: its ranking
// score and its action's similarity to the step's.
type scored struct {
	t          *transition
	score, act float64
}

// keepNearest inserts c into near (best score first, at most
// nearestShown, one entry per action text) when it ranks there.
func keepNearest(near []scored, c scored) []scored {
	for i := range near {
		if near[i].t.action == c.t.action {
			if c.score <= near[i].score {
				return near
			}
			near = append(near[:i], near[i+1:]...)
			break
		}
	}
	i := 0
	for i < len(near) && near[i].score >= c.score {
		i++
	}
	if i >= nearestShown {
		return near
	}
	near = append(near, scored{})
	copy(near[i+1:], near[i:])
	near[i] = c
	if len(near) > nearestShown {
		near = near[:nearestShown]
	}
	return near
}

// cached is the exact answer to action at a recorded for a's own world and
// model: a world model's answer depends on the world's prompt and on the
// model, so another world's or another model's answer to the same history
// and action is no cache hit.
func (l *Library) cached(a At, action string) (string, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, c := range l.exact[a.History.exact(action)] {
		if c.world == a.World && (c.model == "" || c.model == a.Model) {
			return c.observation, true
		}
	}
	return "", false
}

// RecordTo makes Record append to cache.jsonl in dir (created if needed),
// first cutting a torn last line so the next transition starts a line of
// its own.
func (l *Library) RecordTo(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cache dir: %w", err)
	}
	path := filepath.Join(dir, "cache.jsonl")
	if err := journal.CutTornTail(path); err != nil {
		return fmt.Errorf("cache file: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("cache file: %w", err)
	}
	l.outMu.Lock()
	l.out = f
	l.outMu.Unlock()
	return nil
}

// Record adds the answer observation to action at a and, when recording,
// appends it as one transition line (see the package doc) with a single
// write and syncs the file. A transition already held is neither added nor
// written again.
func (l *Library) Record(a At, action, observation string) error {
	d, err := domain.Parse(a.Domain)
	if err != nil {
		return err
	}
	s := step{parent: a.History, domain: string(d), world: a.World, model: a.Model, action: action, observation: observation}
	l.mu.Lock()
	added := l.add(s.domain, s.world, s.model, s.parent.exact(action), a.Prev, action, observation)
	l.mu.Unlock()
	if !added {
		return nil
	}

	l.outMu.Lock()
	defer l.outMu.Unlock()
	if l.out == nil {
		return nil
	}
	l.buf.Reset()
	if err := s.writeLine(&l.buf); err != nil {
		return fmt.Errorf("cache line: %w", err)
	}
	if _, err := l.out.Write(l.buf.Bytes()); err != nil {
		return fmt.Errorf("cache append: %w", err)
	}
	if l.buf.Cap() > 1<<20 { // do not keep one huge observation's buffer
		l.buf = bytes.Buffer{}
	}
	return l.out.Sync()
}

// Close stops recording.
func (l *Library) Close() error {
	l.outMu.Lock()
	defer l.outMu.Unlock()
	if l.out == nil {
		return nil
	}
	err := l.out.Close()
	l.out = nil
	return err
}
