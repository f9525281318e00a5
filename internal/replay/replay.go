// Package replay answers simulator steps from recorded trajectories: an
// exact match on domain + history + action returns the recorded
// observation; otherwise the nearest recorded transition of the same
// domain (by word similarity of the action and the preceding observation)
// answers, marked approximate. It is the simulator's default backend when
// no world model is configured, and, as a Cache, a transition cache in
// front of a real model that records what the model answers.
package replay

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// Backend names.
const (
	BackendReplay = "replay"
	BackendCache  = "cache"
)

// Library holds recorded transitions, indexed for exact and nearest
// lookups. It is safe for concurrent use.
type Library struct {
	mu       sync.RWMutex
	exact    map[[32]byte][]*transition
	byDomain map[string][]*transition
	n        int

	out   *os.File // where Record appends, when recording
	outMu sync.Mutex
}

type transition struct {
	world       string
	action      string
	prevObs     string
	observation string
	words       map[string]struct{}
	prevWords   map[string]struct{}
}

// New returns an empty library.
func New() *Library {
	return &Library{exact: map[[32]byte][]*transition{}, byDomain: map[string][]*transition{}}
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

// LoadFS reads every *.jsonl file under dir of fsys; each line is one
// trajectory in the unified schema.
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

// Read adds the trajectories of one JSONL stream; name is used in errors.
func (l *Library) Read(r io.Reader, name string) error {
	lr := trajectory.NewLineReader(r, name, 0)
	for {
		line, n, err := lr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var t trajectory.Trajectory
		if err := json.Unmarshal(line, &t); err != nil {
			return &trajectory.LineError{File: name, Line: n, Err: err}
		}
		if err := t.Validate(); err != nil {
			return &trajectory.LineError{File: name, Line: n, Err: err}
		}
		if _, err := domain.Parse(t.Domain); err != nil {
			return &trajectory.LineError{File: name, Line: n, Err: err}
		}
		l.AddTrajectory(&t)
	}
}

// AddTrajectory indexes every transition of t.
func (l *Library) AddTrajectory(t *trajectory.Trajectory) {
	var w string
	if raw, ok := t.Meta["world"]; ok {
		_ = json.Unmarshal(raw, &w)
	}
	d := strings.ToLower(t.Domain)
	hist := make([]sim.HistoryTurn, 0, len(t.Turns))
	l.mu.Lock()
	defer l.mu.Unlock()
	prev := ""
	if raw, ok := t.Meta["initial_observation"]; ok {
		_ = json.Unmarshal(raw, &prev)
	}
	for _, tu := range t.Turns {
		act := canonical(d, tu.Action)
		tr := &transition{world: w, action: act, prevObs: prev, observation: tu.Observation,
			words: words(act), prevWords: words(prev)}
		k := key(d, hist, act)
		l.exact[k] = append(l.exact[k], tr)
		l.byDomain[d] = append(l.byDomain[d], tr)
		l.n++
		hist = append(hist, sim.HistoryTurn{Action: act, Observation: tu.Observation})
		prev = tu.Observation
	}
}

// canonical renders a recorded action the way sessions render it, so
// recordings match live actions written with other key orders or spacing.
func canonical(d, action string) string {
	raw, _ := json.Marshal(action)
	if a, err := sim.ParseAction(domain.Domain(d), raw); err == nil {
		return a.Text
	}
	return action
}

func key(d string, hist []sim.HistoryTurn, action string) [32]byte {
	h := sha256.New()
	h.Write([]byte(d))
	for _, t := range hist {
		h.Write([]byte{0})
		h.Write([]byte(t.Action))
		h.Write([]byte{0})
		h.Write([]byte(t.Observation))
	}
	h.Write([]byte{1})
	h.Write([]byte(action))
	var k [32]byte
	copy(k[:], h.Sum(nil))
	return k
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

// Match is a lookup result.
type Match struct {
	Observation string
	// Approximate is true for a nearest-neighbour answer.
	Approximate bool
	// Score is the similarity of a nearest-neighbour match (1 for exact).
	Score float64
}

// Lookup finds the recorded answer to action after hist in domain d,
// preferring recordings of the named world. ok is false when the domain
// has no recordings at all.
func (l *Library) Lookup(d, worldName string, hist []sim.HistoryTurn, action string) (Match, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if cands := l.exact[key(d, hist, action)]; len(cands) > 0 {
		best := cands[0]
		for _, c := range cands {
			if c.world == worldName {
				best = c
				break
			}
		}
		return Match{Observation: best.observation, Score: 1}, true
	}
	all := l.byDomain[d]
	if len(all) == 0 {
		return Match{}, false
	}
	aw := words(action)
	prev := ""
	if len(hist) > 0 {
		prev = hist[len(hist)-1].Observation
	}
	pw := words(prev)
	var best *transition
	bestScore := -1.0
	for _, t := range all {
		s := 0.7*jaccard(aw, t.words) + 0.3*jaccard(pw, t.prevWords)
		if t.world == worldName && worldName != "" {
			s += 0.1
		}
		if s > bestScore {
			best, bestScore = t, s
		}
	}
	return Match{Observation: best.observation, Approximate: true, Score: bestScore}, true
}

// RecordTo makes Record append to a JSONL file in dir (created if needed).
func (l *Library) RecordTo(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cache dir: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "cache.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("cache file: %w", err)
	}
	l.outMu.Lock()
	l.out = f
	l.outMu.Unlock()
	return nil
}

// Record adds a transition and, when recording, appends it as one
// trajectory line (the whole history, so an exact lookup can rebuild its
// key) and syncs the file.
func (l *Library) Record(d, worldName string, hist []sim.HistoryTurn, action, observation string) error {
	t := trajectory.Trajectory{
		ID: fmt.Sprintf("cache-%d", time.Now().UnixNano()), Domain: d, Source: BackendCache,
		SystemPrompt: "(recorded transition)", Meta: map[string]json.RawMessage{},
	}
	if worldName != "" {
		b, _ := json.Marshal(worldName)
		t.Meta["world"] = b
	}
	for _, h := range hist {
		t.Turns = append(t.Turns, trajectory.Turn{Action: h.Action, Observation: h.Observation})
	}
	t.Turns = append(t.Turns, trajectory.Turn{Action: action, Observation: observation})
	l.mu.Lock()
	k := key(d, hist, action)
	l.exact[k] = append(l.exact[k], &transition{world: worldName, action: action, observation: observation, words: words(action)})
	l.n++
	l.mu.Unlock()

	l.outMu.Lock()
	defer l.outMu.Unlock()
	if l.out == nil {
		return nil
	}
	line, err := trajectory.Marshal(t)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(l.out)
	w.Write(line)
	w.WriteByte('\n')
	if err := w.Flush(); err != nil {
		return fmt.Errorf("cache append: %w", err)
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

// Backend returns the replay BackendFactory over l.
func Backend(l *Library) sim.BackendFactory {
	return func(ctx context.Context, s sim.SessionInfo) (sim.Environment, error) {
		return &replayEnv{lib: l, s: s}, nil
	}
}

type replayEnv struct {
	lib *Library
	s   sim.SessionInfo
}

func (e *replayEnv) Reset(context.Context) (sim.Observation, error) {
	return sim.Observation{Text: e.s.Spec.InitialState, Info: sim.StepInfo{Backend: "spec"}}, nil
}

func (e *replayEnv) Close() error { return nil }

func (e *replayEnv) Step(ctx context.Context, in sim.StepInput) (sim.Observation, error) {
	start := time.Now()
	d := string(e.s.Spec.Domain)
	m, ok := e.lib.Lookup(d, e.s.Spec.Name, in.History, in.Action.Text)
	info := sim.StepInfo{Backend: BackendReplay, Approximate: m.Approximate}
	if !ok {
		info.Error = fmt.Sprintf("no recorded %s transitions to replay; configure a world model (--model URL) or add recordings", d)
		return sim.Observation{Text: "[replay: no recording for this domain]", Info: info}, nil
	}
	info.LatencyMS = time.Since(start).Milliseconds()
	return sim.Observation{Text: m.Observation, Info: info}, nil
}

// Cache returns a BackendFactory that answers exact hits from l and sends
// misses to next, recording next's answers into l (and its file, if
// RecordTo was called). Approximate matches are never used as cache hits.
// Steps carrying control or world-state text bypass the cache: their
// answer depends on more than the history and action.
func Cache(l *Library, next sim.BackendFactory) sim.BackendFactory {
	return func(ctx context.Context, s sim.SessionInfo) (sim.Environment, error) {
		inner, err := next(ctx, s)
		if err != nil {
			return nil, err
		}
		return &cacheEnv{lib: l, s: s, next: inner}, nil
	}
}

type cacheEnv struct {
	lib  *Library
	s    sim.SessionInfo
	next sim.Environment
}

func (e *cacheEnv) Reset(ctx context.Context) (sim.Observation, error) { return e.next.Reset(ctx) }
func (e *cacheEnv) Close() error                                       { return e.next.Close() }

func (e *cacheEnv) Step(ctx context.Context, in sim.StepInput) (sim.Observation, error) {
	d := string(e.s.Spec.Domain)
	plain := in.Control == "" && in.WorldState == ""
	if plain {
		e.lib.mu.RLock()
		cands := e.lib.exact[key(d, in.History, in.Action.Text)]
		e.lib.mu.RUnlock()
		if len(cands) > 0 {
			return sim.Observation{Text: cands[0].observation, Info: sim.StepInfo{Backend: BackendCache}}, nil
		}
	}
	obs, err := e.next.Step(ctx, in)
	if err != nil {
		return obs, err
	}
	if plain && obs.Info.Error == "" {
		if err := e.lib.Record(d, e.s.Spec.Name, in.History, in.Action.Text, obs.Text); err != nil {
			return obs, fmt.Errorf("record transition: %w", err)
		}
	}
	return obs, nil
}
