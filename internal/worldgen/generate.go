// Package worldgen generates worlds and tasks with an LLM and proves them
// in simulation before they enter a world library: candidates come from
// seed descriptions, from mutations of imported MCP worlds, from a domain
// × topic mixture, or as fictional fact graphs whose documents and
// questions are rendered by code; each climbs a validation ladder (parse,
// schema and tool-schema compilation, action parsing, near-duplicate
// collapse, the initial state not meeting the check, fictional answers
// retrievable, the reference solution passing in at least 4 of 5
// replays, a no-op and a random agent passing in none) with survivors
// counted per rung and every rejection's reason kept.
//
// A run is a journal: every generator answer is appended before it is
// validated and every verdict after, so a run killed at any moment
// resumes without asking the generator again or losing an answer.
package worldgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentworld/agentworld/internal/fiction"
	"github.com/agentworld/agentworld/internal/journal"
	"github.com/agentworld/agentworld/internal/judge"
	"github.com/agentworld/agentworld/internal/library"
	"github.com/agentworld/agentworld/internal/progress"
	"github.com/agentworld/agentworld/internal/searchindex"
	"github.com/agentworld/agentworld/internal/world"
	"github.com/agentworld/agentworld/internal/worldhooks"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// Journal files, under LIB/generate/.
const (
	JournalDir   = "generate"
	AnswersFile  = "answers.jsonl"
	VerdictsFile = "verdicts.jsonl"
	SummaryFile  = "summary.json"
	// LedgerDir holds the facts fictional worlds' replays asserted, one
	// <world>.facts.jsonl each (fiction.FileStore).
	LedgerDir = "ledger"
)

// Defaults of [Options].
const (
	DefaultConcurrency    = 8
	DefaultTasksPerWorld  = 4
	DefaultReplays        = 5
	DefaultMaxAnswerBytes = 1 << 20
	DefaultMaxTokens      = 8192
)

// Sources of candidates ([library.Provenance.Source]).
const (
	SourceSeed    = "seed"
	SourceMCP     = "mcp"
	SourceMixture = "mixture"
	SourceFiction = "fiction"
)

// Seed is a seed description of a world to generate.
type Seed struct {
	ID          string `json:"id"`
	Description string `json:"description"`
}

// Options configures [Run]. Generator and WorldModel are required.
type Options struct {
	// Count is the number of candidates (each a world with its tasks);
	// required.
	Count int
	// Generator writes candidates; GeneratorModel names it in provenance.
	Generator      worldmodel.Completer
	GeneratorModel string
	// WorldModel simulates the ladder's replays; required.
	WorldModel worldmodel.Completer
	// SuccessJudge decides the replays of tasks whose check is a judged
	// criterion; nil rejects such tasks on the schema rung.
	SuccessJudge *judge.SuccessJudge
	// Seeds are seed descriptions, used in turn; with none, MCP worlds or
	// the mixture are used.
	Seeds []Seed
	// FromMCP are imported MCP worlds, mutated in turn (rename, extend,
	// remove tools, another state).
	FromMCP []*world.Spec
	// Domains limit the mixture ("fiction" draws fictional search
	// worlds); nil means every domain and fiction.
	Domains []string
	// Seed makes the run reproducible: candidate i's plan and generator
	// seed derive from it.
	Seed int64
	// Concurrency bounds candidates in flight (and so generator requests);
	// 0 means DefaultConcurrency.
	Concurrency int
	// Episodes bounds the ladder's replay episodes in flight across the
	// run (and so world-model requests): a candidate's tasks, and each
	// task's replays, are proven at once; 0 means 4 × Concurrency.
	Episodes int
	// TasksPerWorld is asked of the generator; 0 means DefaultTasksPerWorld.
	TasksPerWorld int
	// Replays per ladder agent; 0 means DefaultReplays (5). The reference
	// must pass in all but at most one, the trivial agents in none.
	Replays int
	// MaxAnswerBytes rejects a longer generator answer; 0 means
	// DefaultMaxAnswerBytes.
	MaxAnswerBytes int
	// MaxTokens is the generator's budget; 0 means DefaultMaxTokens.
	MaxTokens int
	// Shards of a new library; 0 means library.DefaultShards.
	Shards int
	// NearDuplicate is the estimated similarity (Jaccard of word
	// 3-shingles of description and state, 0 to 1) at or above which a
	// world with the same tools as an earlier one is its near-duplicate
	// and collapses into it; 0 means DefaultNearDuplicate, a negative
	// value or one above 1 compares exact fingerprints only. Tasks are
	// compared by exact normalized instruction only: an instruction that
	// changes one word often asks for another thing.
	NearDuplicate float64
	// Progress receives a progress line; nil writes none.
	Progress io.Writer
	// ProgressEvery is its interval; 0 means 2s.
	ProgressEvery time.Duration
	// Logger; nil discards.
	Logger *slog.Logger
}

// Stats counts a run's candidates per rung.
type Stats struct {
	Candidates int `json:"candidates"`
	// Worlds and Tasks count, per rung in [Rungs] order, how many reached
	// it and survived it.
	Worlds []RungCount `json:"worlds"`
	Tasks  []RungCount `json:"tasks"`
	// AcceptedWorlds and AcceptedTasks entered the library.
	AcceptedWorlds int `json:"accepted_worlds"`
	AcceptedTasks  int `json:"accepted_tasks"`
	// Reasons counts rejections by rung and reason (first 80 characters).
	Reasons map[string]int `json:"reasons"`
	// GeneratorRequests, PromptTokens and CompletionTokens are the
	// generator's spending over the journal (every run into the library);
	// SimSteps the world-model steps of the ladder's replays of the
	// decided candidates.
	GeneratorRequests int   `json:"generator_requests"`
	PromptTokens      int64 `json:"prompt_tokens"`
	CompletionTokens  int64 `json:"completion_tokens"`
	SimSteps          int64 `json:"sim_steps"`
	// Failed candidates hit an error (generator unavailable); a rerun
	// tries them again.
	Failed int `json:"failed"`
}

// RungCount is the survivors of one rung.
type RungCount struct {
	Rung     string `json:"rung"`
	Survived int    `json:"survived"`
	Rejected int    `json:"rejected"`
}

// verdict is a journal line: what became of candidate I.
type verdict struct {
	I int `json:"i"`
	// Request is the hash of the generator request: a candidate is
	// decided when a verdict for its request exists, so a rerun with other
	// options into the same library generates what it has not seen.
	Request  string       `json:"request"`
	World    string       `json:"world,omitempty"`
	Accepted bool         `json:"accepted"`
	Rejected *rejection   `json:"rejected,omitempty"`
	Tasks    int          `json:"tasks"`
	TaskRej  []taskReject `json:"task_rejections,omitempty"`
	// SimSteps are the world-model steps its replays took.
	SimSteps int64 `json:"sim_steps,omitempty"`
}

type taskReject struct {
	ID string `json:"id"`
	rejection
}

type answerLine struct {
	I       int    `json:"i"`
	Request string `json:"request"`
	Content string `json:"content"`
	// PromptTokens and CompletionTokens are what the answer cost.
	PromptTokens     int `json:"prompt_tokens,omitempty"`
	CompletionTokens int `json:"completion_tokens,omitempty"`
	// Err is set when the generator's answer was refused before its text
	// (over the size cap): a verdict without content.
	Err string `json:"error,omitempty"`
}

// plan is what candidate Index is about.
type plan struct {
	Index      int
	Seed       int64
	Source     string
	Parent     string
	SeedText   string
	ParentJSON string
	Mutation   string
	Domain     string
	Topic      string
	Tasks      int
	// Tag names the candidate's world: its request hash's first digits,
	// set once the request is made.
	Tag string
}

// plans derives candidate i's plan from the run seed.
func (o *Options) plan(i int) plan {
	r := rand.New(rand.NewPCG(uint64(o.Seed), uint64(i)))
	p := plan{Index: i, Seed: int64(r.Uint64() >> 1), Tasks: o.TasksPerWorld}
	switch {
	case len(o.Seeds) > 0:
		s := o.Seeds[i%len(o.Seeds)]
		p.Source, p.Parent, p.SeedText = SourceSeed, s.ID, s.Description
	case len(o.FromMCP) > 0:
		w := o.FromMCP[i%len(o.FromMCP)]
		b, _ := json.Marshal(w)
		p.Source, p.Parent, p.ParentJSON = SourceMCP, w.Name, string(b)
		p.Mutation = mutationNames[r.IntN(len(mutationNames))]
	default:
		ds := o.Domains
		if len(ds) == 0 {
			ds = append(slices.Clone(allDomains), "fiction")
		}
		p.Domain = ds[r.IntN(len(ds))]
		p.Topic = topics[r.IntN(len(topics))]
		p.Source = SourceMixture
		if p.Domain == "fiction" {
			p.Source = SourceFiction
		}
	}
	return p
}

// request is candidate p's generator request.
func (o *Options) request(p plan) worldmodel.Request {
	sys := systemPrompt
	if p.Source == SourceFiction {
		sys = fictionSystemPrompt
	}
	temp := 1.0
	seed := p.Seed
	return worldmodel.Request{
		Messages:  []worldmodel.Message{{Role: "system", Content: sys}, {Role: "user", Content: p.userPrompt()}},
		MaxTokens: o.MaxTokens, Temperature: &temp, Seed: &seed,
	}
}

// Estimate is the cost of a run, said before it starts.
type Estimate struct {
	Candidates int
	// PromptTokens and CompletionTokens bound the generator's tokens
	// (prompt by characters / 4; completion by the budget).
	PromptTokens, CompletionTokens int64
	// SimSteps is about how many world-model steps the ladder takes:
	// per task, Replays × (reference length + a random agent's 2 calls).
	SimSteps int64
}

func (e Estimate) String() string {
	return fmt.Sprintf("%d candidates: generator ≤ %d prompt + %d completion tokens; ladder ≈ %d world-model steps", e.Candidates, e.PromptTokens, e.CompletionTokens, e.SimSteps)
}

// LoadSeeds reads seed descriptions: JSONL rows {"id", "description"},
// or plain text with one description per non-empty line (ids seed-N).
func LoadSeeds(path string) ([]Seed, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []Seed
	for n, ln := range strings.Split(string(b), "\n") {
		ln = strings.TrimSpace(ln)
		if ln == "" || strings.HasPrefix(ln, "#") {
			continue
		}
		s := Seed{ID: fmt.Sprintf("seed-%d", n+1), Description: ln}
		if strings.HasPrefix(ln, "{") {
			if err := json.Unmarshal([]byte(ln), &s); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, n+1, err)
			}
			if strings.TrimSpace(s.Description) == "" {
				return nil, fmt.Errorf("%s:%d: description: missing", path, n+1)
			}
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no seed descriptions", path)
	}
	return out, nil
}

// EstimateCost estimates the run's spending for candidates not done yet.
func EstimateCost(o Options, todo int) Estimate {
	o.defaults()
	e := Estimate{Candidates: todo}
	for i := range min(todo, 16) { // prompts vary little: average a few
		req := o.request(o.plan(i))
		for _, m := range req.Messages {
			e.PromptTokens += int64(len(m.Content) / 4)
		}
	}
	if n := min(todo, 16); n > 0 {
		e.PromptTokens = e.PromptTokens * int64(todo) / int64(n)
	}
	e.CompletionTokens = int64(todo) * int64(o.MaxTokens)
	e.SimSteps = int64(todo) * int64(o.TasksPerWorld) * int64(o.Replays) * (3 + 2)
	return e
}

func (o *Options) defaults() {
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Episodes <= 0 {
		o.Episodes = 4 * o.Concurrency
	}
	if o.TasksPerWorld <= 0 {
		o.TasksPerWorld = DefaultTasksPerWorld
	}
	if o.Replays <= 0 {
		o.Replays = DefaultReplays
	}
	if o.MaxAnswerBytes <= 0 {
		o.MaxAnswerBytes = DefaultMaxAnswerBytes
	}
	if o.MaxTokens <= 0 {
		o.MaxTokens = DefaultMaxTokens
	}
	if o.NearDuplicate == 0 {
		o.NearDuplicate = DefaultNearDuplicate
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// run is one Run call's state.
type run struct {
	o   Options
	lib *library.Writer
	ans *journal.Appender
	ver *journal.Appender

	mu       sync.Mutex
	stats    *Stats
	worldFPs map[uint64]string // world fingerprint → world name
	taskFPs  map[uint64]string // instruction fingerprint → task id
	// nearWorlds finds near-duplicate worlds (nil: not looked for).
	nearWorlds *nearIndex
	// storedTasks counts the tasks per world the library held at the start.
	storedTasks map[string]int

	done, resumed atomic.Int64
	// episodes bounds the replays in flight across the run.
	episodes chan struct{}
	// retrieval gives fictional worlds' replays their documents as a
	// server would.
	retrieval *worldhooks.Retrieval
	// ledger records the facts fictional worlds' replays assert, in
	// LIB/generate/ledger, and shares them between the replays as a
	// server's ledger would.
	ledger *worldhooks.Ledger
}

// Run generates Count candidates into the library at dir and returns the
// statistics of every candidate in its journal. Candidates that failed on
// an error (not a rejection) are counted in Stats.Failed and make Run
// return an error; a rerun retries them.
func Run(ctx context.Context, dir string, opts Options) (*Stats, error) {
	o := opts
	o.defaults()
	if o.Count <= 0 {
		return nil, errors.New("worldgen: count must be at least 1")
	}
	if o.Generator == nil || o.WorldModel == nil {
		return nil, errors.New("worldgen: a generator and a world model are required")
	}
	for _, d := range o.Domains {
		if d != "fiction" && !slices.Contains(allDomains, d) {
			return nil, fmt.Errorf("worldgen: domain %q: want one of %s or fiction", d, strings.Join(allDomains, ", "))
		}
	}
	lib, err := library.Create(dir, o.Shards)
	if err != nil {
		return nil, err
	}
	r := &run{o: o, lib: lib, stats: newStats(), worldFPs: map[uint64]string{}, taskFPs: map[uint64]string{}, storedTasks: map[string]int{}, retrieval: worldhooks.NewRetrieval(o.Logger), episodes: make(chan struct{}, o.Episodes)}
	if t := o.NearDuplicate; t > 0 && t <= 1 {
		r.nearWorlds = newNearIndex(t)
	}
	defer func() { lib.Close() }()
	jdir := filepath.Join(dir, JournalDir)
	facts, err := fiction.NewFileStore(filepath.Join(jdir, LedgerDir), o.Logger)
	if err != nil {
		return nil, err
	}
	r.ledger = worldhooks.NewLedger(fiction.NewLedger(facts, &fiction.LedgerOptions{Logger: o.Logger}), o.Logger)
	if r.ans, err = journal.Open(filepath.Join(jdir, AnswersFile), 0); err != nil {
		return nil, err
	}
	defer r.ans.Close()
	if r.ver, err = journal.Open(filepath.Join(jdir, VerdictsFile), 0); err != nil {
		return nil, err
	}
	defer r.ver.Close()
	decided, err := r.readVerdicts(filepath.Join(jdir, VerdictsFile))
	if err != nil {
		return nil, err
	}
	answers, err := readAnswers(filepath.Join(jdir, AnswersFile), decided, r.stats)
	if err != nil {
		return nil, err
	}
	if err := r.loadFingerprints(); err != nil {
		return nil, err
	}
	var todo []int
	for i := range o.Count {
		if decided[o.request(o.plan(i)).Hash(o.GeneratorModel)] {
			r.resumed.Add(1)
		} else {
			todo = append(todo, i)
		}
	}
	started := time.Now()
	var tick *progress.Ticker
	if o.Progress != nil {
		tick = progress.Start(o.Progress, o.ProgressEvery, func() string {
			d, res := r.done.Load(), r.resumed.Load()
			rate, eta := progress.Rate(d, res, int64(o.Count), started)
			r.mu.Lock()
			aw, at := r.stats.AcceptedWorlds, r.stats.AcceptedTasks
			r.mu.Unlock()
			return fmt.Sprintf("generate: %d/%d candidates (%d resumed), %d worlds and %d tasks accepted, %.2f/s, eta %s", d+res, o.Count, res, aw, at, rate, eta)
		})
	}
	work := make(chan int)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range o.Concurrency {
		wg.Go(func() {
			for i := range work {
				if err := r.candidate(ctx, i, answers); err != nil {
					failed.Add(1)
					o.Logger.Warn("candidate failed", "i", i, "err", err)
				}
				r.done.Add(1)
			}
		})
	}
feed:
	for _, i := range todo {
		select {
		case work <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if tick != nil {
		tick.Stop()
	}
	r.stats.Failed = int(failed.Load())
	st := r.stats.finish()
	b, _ := json.MarshalIndent(st, "", "  ")
	if err := os.WriteFile(filepath.Join(jdir, SummaryFile), append(b, '\n'), 0o644); err != nil {
		return st, err
	}
	if err := ctx.Err(); err != nil {
		return st, err
	}
	if st.Failed > 0 {
		return st, fmt.Errorf("worldgen: %d candidates failed (see the log); a rerun retries them", st.Failed)
	}
	return st, nil
}

// candidate takes candidate i from the generator (or the journal's
// answer) through the ladder into the library or a rejection.
func (r *run) candidate(ctx context.Context, i int, answers map[string]*answerLine) error {
	p := r.o.plan(i)
	req := r.o.request(p)
	hash := req.Hash(r.o.GeneratorModel)
	p.Tag = hash[:8]
	content, genErr := "", ""
	if cached := answers[hash]; cached != nil {
		content, genErr = cached.Content, cached.Err
	} else {
		resp, err := r.o.Generator.Complete(ctx, req)
		al := answerLine{I: i, Request: hash}
		if resp != nil {
			al.PromptTokens, al.CompletionTokens = resp.PromptTokens, resp.CompletionTokens
		}
		switch {
		case errors.Is(err, worldmodel.ErrResponseTooLarge):
			genErr = fmt.Sprintf("generator answer over the response cap: %v", err)
		case err != nil:
			return err
		case len(resp.Content) > r.o.MaxAnswerBytes:
			genErr = fmt.Sprintf("generator answer of %d bytes, over the %d-byte cap", len(resp.Content), r.o.MaxAnswerBytes)
		default:
			content = resp.Content
		}
		al.Content, al.Err = content, genErr
		if err := r.ans.Append(al); err != nil {
			return err
		}
		r.mu.Lock()
		r.stats.spent(al)
		r.mu.Unlock()
	}
	v := verdict{I: i, Request: hash}
	steps := new(atomic.Int64) // the world-model steps of its replays
	if genErr != "" {
		v.Rejected = reject(RungGenerate, "%s", genErr)
		return r.decide(v, steps)
	}
	c, err := parseCandidate(p, content)
	var rj *rejection
	if errors.As(err, &rj) {
		v.Rejected = rj
		return r.decide(v, steps)
	}
	if err != nil {
		return err
	}
	v.World = c.spec.Name
	prov := library.Provenance{Source: p.Source, Generator: "agentworld " + PromptVersion, Model: r.o.GeneratorModel, Seed: p.Seed, Parent: p.Parent, Request: hash}
	// task-level schema and actions rungs
	var tasks []*library.TaskEntry
	for _, t := range c.tasks {
		t.Provenance = prov
		t.Provenance.Parent = c.spec.Name
		if err := checkTask(c.spec, t, r.o.SuccessJudge != nil); err != nil {
			v.TaskRej = append(v.TaskRej, taskReject{ID: t.ID, rejection: *asRejection(err)})
			continue
		}
		tasks = append(tasks, t)
	}
	if len(tasks) == 0 {
		v.Rejected = reject(RungActions, "%v", errNoTasks)
		return r.decide(v, steps)
	}
	// dedup: the world, then each task's instruction
	if stored, ok := r.stored(c.spec); ok {
		// a run killed between storing this world and journaling its
		// verdict: it is in the library already
		v.Accepted, v.Tasks = true, stored
		return r.decide(v, steps)
	}
	if rj := r.dedup(c.spec, &tasks, &v); rj != nil {
		v.Rejected = rj
		return r.decide(v, steps)
	}
	// the simulation rungs, task by task
	var ix *searchindex.Index
	if c.support != nil && c.spec.Facts != nil {
		if ix, err = searchindex.New(c.spec.Facts.Documents); err != nil {
			return err
		}
		defer ix.Close()
	}
	proven := make([]error, len(tasks))
	var wg sync.WaitGroup
	for k, t := range tasks {
		wg.Go(func() { proven[k] = r.prove(ctx, c, t, ix, steps) })
	}
	wg.Wait()
	var kept []*library.TaskEntry
	for k, t := range tasks {
		if err := proven[k]; err != nil {
			if rj := asRejection(err); rj != nil {
				v.TaskRej = append(v.TaskRej, taskReject{ID: t.ID, rejection: *rj})
				continue
			}
			return err
		}
		kept = append(kept, t)
	}
	if len(kept) == 0 {
		last := v.TaskRej[len(v.TaskRej)-1]
		v.Rejected = reject(last.Rung, "%v (last: %s)", errNoTasks, last.Reason)
		return r.decide(v, steps)
	}
	if err := r.lib.Add(&library.WorldEntry{Spec: c.spec, Tags: tags(p), Provenance: prov}, kept); err != nil {
		return err
	}
	v.Accepted, v.Tasks = true, len(kept)
	return r.decide(v, steps)
}

func tags(p plan) []string {
	t := []string{p.Source}
	if p.Mutation != "" {
		t = append(t, "mutation:"+p.Mutation)
	}
	if p.Topic != "" {
		t = append(t, "topic:"+strings.ReplaceAll(p.Topic, " ", "-"))
	}
	return t
}

func asRejection(err error) *rejection {
	var rj *rejection
	if errors.As(err, &rj) {
		return rj
	}
	return nil
}

// decide journals a verdict and counts it.
func (r *run) decide(v verdict, steps *atomic.Int64) error {
	v.SimSteps = steps.Load()
	if err := r.ver.Append(v); err != nil {
		return err
	}
	r.mu.Lock()
	r.stats.add(v)
	r.mu.Unlock()
	return nil
}
