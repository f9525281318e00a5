// Package library stores generated worlds and tasks: a directory of
// sharded, append-only JSONL files (worlds/NN.jsonl, tasks/NN.jsonl) with
// provenance on every entry (generator, model, seed, parent), read as a
// stream with filters (domain, tags, difficulty, provenance), sampled
// with a seed, and turned into the world specs a simulator serves (each
// task becomes a world of its own whose success rule is the task's check)
// and the tasks a rollout runs.
//
// Appends are single writes of whole lines (a kill leaves every finished
// entry or none of a batch), a torn last line is cut when the library is
// opened for writing, and one process writes at a time (a lock file).
package library

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/agentworld/agentworld/internal/atomicfile"
	"github.com/agentworld/agentworld/internal/filelock"
	"github.com/agentworld/agentworld/internal/journal"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/world"
)

// Files and directories of a library.
const (
	// ManifestFile marks a directory as a library and records its shard
	// count.
	ManifestFile = "library.json"
	// WorldsDir and TasksDir hold the shards.
	WorldsDir = "worlds"
	TasksDir  = "tasks"
	lockFile  = ".lock"
)

// DefaultShards is the shard count of a new library when none is given.
const DefaultShards = 16

// MaxLine bounds one stored entry; a longer line is refused on write and
// reported on read.
const MaxLine = 8 << 20

// Manifest is the library's library.json.
type Manifest struct {
	Version int `json:"version"`
	Shards  int `json:"shards"`
}

// Provenance says where an entry came from.
type Provenance struct {
	// Source is how it was made: "seed" (from a seed description), "mcp"
	// (a mutation of an imported MCP server's world), "mixture" (a domain ×
	// topic draw), "fiction" (a generated fact graph), "hand".
	Source string `json:"source"`
	// Generator names the program and version that made it.
	Generator string `json:"generator,omitempty"`
	// Model is the generator model.
	Model string `json:"model,omitempty"`
	// Seed is the generation seed of the candidate.
	Seed int64 `json:"seed"`
	// Parent is what it was derived from: the seed description's id, the
	// imported world, or for a task its world.
	Parent string `json:"parent,omitempty"`
	// Request is the hash of the generator request that produced it.
	Request string `json:"request,omitempty"`
}

// WorldEntry is one stored world.
type WorldEntry struct {
	Spec       *world.Spec `json:"spec"`
	Tags       []string    `json:"tags,omitempty"`
	Provenance Provenance  `json:"provenance"`
}

// Difficulty labels of tasks.
const (
	Easy   = "easy"
	Medium = "medium"
	Hard   = "hard"
)

// TaskEntry is one stored task: an instruction in a world, a check that
// decides success, and a reference solution.
type TaskEntry struct {
	// ID is unique in the library; it is also the name of the task's own
	// world when served (see [Specs]).
	ID string `json:"id"`
	// World names the task's world in this library.
	World       string `json:"world"`
	Instruction string `json:"instruction"`
	// Difficulty is easy, medium or hard.
	Difficulty string   `json:"difficulty"`
	Tags       []string `json:"tags,omitempty"`
	// Check decides success when an episode ends.
	Check *world.SuccessRule `json:"check"`
	// Reference is a solution: actions in the world's action format, the
	// last one ending the episode.
	Reference []json.RawMessage `json:"reference"`
	// MaxTurns caps an episode; 0 means the runner's default.
	MaxTurns   int        `json:"max_turns,omitempty"`
	Provenance Provenance `json:"provenance"`
}

// Validate checks the fields a task cannot do without.
func (t *TaskEntry) Validate() error {
	switch {
	case strings.TrimSpace(t.ID) == "":
		return errors.New("id: missing")
	case !nameOK(t.ID):
		return fmt.Errorf("id %q: use letters, digits, '.', '_' and '-' only", t.ID)
	case t.World == "":
		return errors.New("world: missing")
	case strings.TrimSpace(t.Instruction) == "":
		return errors.New("instruction: missing")
	case t.Check == nil:
		return errors.New("check: missing")
	case len(t.Reference) == 0:
		return errors.New("reference: missing")
	}
	switch t.Difficulty {
	case Easy, Medium, Hard:
	default:
		return fmt.Errorf("difficulty %q: want easy, medium or hard", t.Difficulty)
	}
	return t.Check.Validate()
}

// nameOK reports a name usable as a world name in URLs and file names.
func nameOK(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, r := range s {
		if !(r == '.' || r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// IsLibrary reports whether dir holds a library.
func IsLibrary(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, ManifestFile))
	return err == nil && st.Mode().IsRegular()
}

// Library is an open library directory.
type Library struct {
	dir string
	man Manifest
}

// Open opens an existing library for reading.
func Open(dir string) (*Library, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s: not a world library (no %s)", dir, ManifestFile)
		}
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ManifestFile), err)
	}
	if m.Version != 1 || m.Shards < 1 || m.Shards > 4096 {
		return nil, fmt.Errorf("%s: version %d with %d shards: want version 1 and 1 to 4096 shards", filepath.Join(dir, ManifestFile), m.Version, m.Shards)
	}
	return &Library{dir: dir, man: m}, nil
}

// Dir is the library's directory.
func (l *Library) Dir() string { return l.dir }

// Shards is the shard count.
func (l *Library) Shards() int { return l.man.Shards }

// shard picks the shard of a world: a task lives in its world's shard, so
// a world's tasks are read together.
func (l *Library) shard(worldName string) int {
	h := fnv.New32a()
	h.Write([]byte(worldName))
	return int(h.Sum32() % uint32(l.man.Shards))
}

func (l *Library) shardPath(kind string, i int) string {
	return filepath.Join(l.dir, kind, fmt.Sprintf("%03d.jsonl", i))
}

// Writer appends to a library; one process at a time holds it.
type Writer struct {
	*Library
	lock *filelock.Lock

	mu   sync.Mutex
	apps map[string]*journal.Appender // shard path → appender
}

// Create opens dir for appending, making it a library with shards shards
// (0: DefaultShards) when it is not one yet; an existing library keeps
// its own shard count. The lock is held until Close.
func Create(dir string, shards int) (*Writer, error) {
	if shards <= 0 {
		shards = DefaultShards
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	lk, err := filelock.Acquire(filepath.Join(dir, lockFile), "world library "+dir)
	if err != nil {
		return nil, err
	}
	if !IsLibrary(dir) {
		b, _ := json.MarshalIndent(Manifest{Version: 1, Shards: shards}, "", "  ")
		if err := atomicfile.WriteFile(filepath.Join(dir, ManifestFile), append(b, '\n'), nil); err != nil {
			lk.Release()
			return nil, err
		}
	}
	l, err := Open(dir)
	if err != nil {
		lk.Release()
		return nil, err
	}
	return &Writer{Library: l, lock: lk, apps: map[string]*journal.Appender{}}, nil
}

func (w *Writer) appender(path string) (*journal.Appender, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if a, ok := w.apps[path]; ok {
		return a, nil
	}
	a, err := journal.Open(path, 0)
	if err != nil {
		return nil, err
	}
	w.apps[path] = a
	return a, nil
}

// Add stores a world and its tasks: the world's line, then the tasks' lines
// in one write each, so a kill between them leaves a world without (some
// of) its tasks, never a task without its world. Nothing is validated
// here beyond the task fields ([TaskEntry.Validate]); the generator's
// ladder decides what enters.
func (w *Writer) Add(we *WorldEntry, tasks []*TaskEntry) error {
	if we.Spec == nil || !nameOK(we.Spec.Name) {
		return fmt.Errorf("library: world name %q: use letters, digits, '.', '_' and '-' only", specName(we.Spec))
	}
	for _, t := range tasks {
		if t.World != we.Spec.Name {
			return fmt.Errorf("library: task %s names world %q, not %q", t.ID, t.World, we.Spec.Name)
		}
		if err := t.Validate(); err != nil {
			return fmt.Errorf("library: task %s: %w", t.ID, err)
		}
	}
	sh := w.shard(we.Spec.Name)
	line, err := encode(we)
	if err != nil {
		return fmt.Errorf("library: world %s: %w", we.Spec.Name, err)
	}
	var tlines []byte
	for _, t := range tasks {
		b, err := encode(t)
		if err != nil {
			return fmt.Errorf("library: task %s: %w", t.ID, err)
		}
		tlines = append(tlines, b...)
	}
	wa, err := w.appender(w.shardPath(WorldsDir, sh))
	if err != nil {
		return err
	}
	if err := wa.AppendLines(line); err != nil {
		return err
	}
	if len(tlines) == 0 {
		return nil
	}
	ta, err := w.appender(w.shardPath(TasksDir, sh))
	if err != nil {
		return err
	}
	return ta.AppendLines(tlines)
}

func specName(s *world.Spec) string {
	if s == nil {
		return ""
	}
	return s.Name
}

func encode(v any) ([]byte, error) {
	b, err := trajectory.Marshal(v)
	if err != nil {
		return nil, err
	}
	if len(b) >= MaxLine {
		return nil, fmt.Errorf("entry of %d bytes, over the %d-byte limit", len(b), MaxLine)
	}
	return append(b, '\n'), nil
}

// Close syncs and closes the shards and releases the lock.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var errs []error
	for _, a := range w.apps {
		errs = append(errs, a.Close())
	}
	w.apps = nil
	w.lock.Release()
	return errors.Join(errs...)
}

// Filter selects entries; a zero field selects everything.
type Filter struct {
	Domain string
	// Tags must all be present.
	Tags []string
	// Difficulty selects tasks of that label (worlds: those are not
	// filtered by it).
	Difficulty string
	// Source, Model and Parent match the provenance fields exactly.
	Source, Model, Parent string
	// World selects one world (and tasks of it).
	World string
}

func (f Filter) prov(p Provenance) bool {
	return (f.Source == "" || p.Source == f.Source) && (f.Model == "" || p.Model == f.Model) &&
		(f.Parent == "" || p.Parent == f.Parent)
}

func hasTags(have, want []string) bool {
	for _, t := range want {
		if !slices.Contains(have, t) {
			return false
		}
	}
	return true
}

// MatchWorld reports whether a world passes the filter.
func (f Filter) MatchWorld(w *WorldEntry) bool {
	return (f.Domain == "" || string(w.Spec.Domain) == f.Domain) && (f.World == "" || w.Spec.Name == f.World) &&
		hasTags(w.Tags, f.Tags) && f.prov(w.Provenance)
}

// MatchTask reports whether a task passes the filter; domain is its
// world's.
func (f Filter) MatchTask(t *TaskEntry, domain string) bool {
	return (f.Domain == "" || domain == f.Domain) && (f.World == "" || t.World == f.World) &&
		(f.Difficulty == "" || t.Difficulty == f.Difficulty) && hasTags(t.Tags, f.Tags) && f.prov(t.Provenance)
}

// ErrStop, returned by a visit function, ends a walk early without error.
var ErrStop = errors.New("stop")

// Worlds calls fn with every world that passes f, shard by shard, holding
// one entry at a time. A world stored twice (a generator rerun after a
// kill) is visited at each place; [Specs] keeps the first.
func (l *Library) Worlds(f Filter, fn func(*WorldEntry) error) error {
	for i := range l.man.Shards {
		p := l.shardPath(WorldsDir, i)
		err := journal.Rows(p, decodeWorld, func(w *WorldEntry, _ []byte, _ int64) error {
			if !f.MatchWorld(w) {
				return nil
			}
			return fn(w)
		})
		if errors.Is(err, ErrStop) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Tasks calls fn with every task that passes f (and the domain of its
// world), shard by shard; a shard's world domains are read first, so
// memory holds one shard's world names, not the library.
func (l *Library) Tasks(f Filter, fn func(t *TaskEntry, domain string) error) error {
	for i := range l.man.Shards {
		domains := map[string]string{}
		wp := l.shardPath(WorldsDir, i)
		err := journal.Rows(wp, nil, func(w *worldDomain, _ []byte, _ int64) error {
			domains[w.Spec.Name] = strings.ToLower(w.Spec.Domain)
			return nil
		})
		if err != nil {
			return err
		}
		tp := l.shardPath(TasksDir, i)
		decodeTask := func(line []byte, t *TaskEntry) error {
			if err := decodeStrict(line, t); err != nil {
				return err
			}
			if err := t.Validate(); err != nil {
				return fmt.Errorf("task %s: %w", t.ID, err)
			}
			if _, ok := domains[t.World]; !ok {
				return fmt.Errorf("task %s: world %q is not in the library", t.ID, t.World)
			}
			return nil
		}
		err = journal.Rows(tp, decodeTask, func(t *TaskEntry, _ []byte, _ int64) error {
			d := domains[t.World]
			if !f.MatchTask(t, d) {
				return nil
			}
			return fn(t, d)
		})
		if errors.Is(err, ErrStop) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// decodeWorld reads a line of a worlds shard: a valid world spec.
func decodeWorld(line []byte, w *WorldEntry) error {
	if err := decodeStrict(line, w); err != nil {
		return err
	}
	if w.Spec == nil {
		return errors.New("spec: missing")
	}
	if w.Spec.Name == "" {
		return errors.New("spec.name: missing")
	}
	if err := w.Spec.Validate(); err != nil {
		return fmt.Errorf("world %s: %w", w.Spec.Name, err)
	}
	return nil
}

// worldDomain is what Tasks reads of a world: its name and domain.
type worldDomain struct {
	Spec struct {
		Name   string `json:"name"`
		Domain string `json:"domain"`
	} `json:"spec"`
}

func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// Specs returns the specs a simulator serves from the library: every
// world, and for every task a world of its own named by the task id: its
// world's spec with the task's check as the success rule and its max
// turns. Task worlds share their world's tools, facts and demonstrations
// (a shallow copy), so they cost a few hundred bytes each. A name stored
// twice keeps its first entry.
func (l *Library) Specs() (map[string]*world.Spec, error) {
	out := map[string]*world.Spec{}
	err := l.Worlds(Filter{}, func(w *WorldEntry) error {
		if _, dup := out[w.Spec.Name]; !dup {
			out[w.Spec.Name] = w.Spec
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	bases := make(map[string]*world.Spec, len(out))
	for k, v := range out {
		bases[k] = v
	}
	err = l.Tasks(Filter{}, func(t *TaskEntry, _ string) error {
		if _, dup := out[t.ID]; dup {
			if _, isWorld := bases[t.ID]; isWorld {
				return fmt.Errorf("library %s: task id %q is also a world's name", l.dir, t.ID)
			}
			return nil
		}
		out[t.ID] = TaskSpec(bases[t.World], t)
		return nil
	})
	return out, err
}

// TaskSpec is the world a task is served as: base's spec named by the
// task id, with the task's check as its success rule (a tool-error rule
// of base is kept; a judged criterion is prefixed with the instruction,
// which the judge would not see otherwise) and the task's max turns.
func TaskSpec(base *world.Spec, t *TaskEntry) *world.Spec {
	s := *base
	s.Name = t.ID
	r := world.Reward{}
	if base.Reward != nil {
		r = *base.Reward
	}
	c := *t.Check
	if c.Judge != nil {
		// the judge sees the world's task description, not the agent's
		// instruction: the criterion carries it
		j := *c.Judge
		j.Criterion = "The agent was asked: " + strings.TrimSpace(t.Instruction) + "\nSuccess means: " + j.Criterion
		c.Judge = &j
	}
	r.Success = &c
	s.Reward = &r
	if t.MaxTurns > 0 {
		s.MaxTurns = t.MaxTurns
	}
	return &s
}

// Sample draws up to n entries uniformly from those fn is fed (reservoir
// sampling, seeded), holding n at a time whatever the library's size.
type Sample[T any] struct {
	n    int
	seen int
	rng  *splitmix
	Out  []T
}

// NewSample starts a sample of n with a seed.
func NewSample[T any](n int, seed int64) *Sample[T] {
	return &Sample[T]{n: n, rng: &splitmix{uint64(seed)}}
}

// Offer considers one entry.
func (s *Sample[T]) Offer(v T) {
	s.seen++
	if len(s.Out) < s.n {
		s.Out = append(s.Out, v)
		return
	}
	if j := int(s.rng.next() % uint64(s.seen)); j < s.n {
		s.Out[j] = v
	}
}

// splitmix is a small seeded generator, so a sample is the same across Go
// versions.
type splitmix struct{ s uint64 }

func (r *splitmix) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Counts summarizes a library.
type Counts struct {
	Worlds       int            `json:"worlds"`
	Tasks        int            `json:"tasks"`
	ByDomain     map[string]int `json:"worlds_by_domain"`
	ByDifficulty map[string]int `json:"tasks_by_difficulty"`
}

// Count tallies the entries that pass f.
func (l *Library) Count(f Filter) (*Counts, error) {
	c := &Counts{ByDomain: map[string]int{}, ByDifficulty: map[string]int{}}
	if err := l.Worlds(f, func(w *WorldEntry) error {
		c.Worlds++
		c.ByDomain[string(w.Spec.Domain)]++
		return nil
	}); err != nil {
		return nil, err
	}
	err := l.Tasks(f, func(t *TaskEntry, _ string) error {
		c.Tasks++
		c.ByDifficulty[t.Difficulty]++
		return nil
	})
	return c, err
}

// SortedKeys lists a count map's keys in order, for stable printing.
func SortedKeys(m map[string]int) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
