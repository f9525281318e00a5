package realenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentworld/agentworld/internal/atomicfile"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// RecordOptions configure a recorded session. The zero value records in
// memory only, under a random id.
type RecordOptions struct {
	// ID names the session and its file; "" means a random id.
	ID string
	// Dir is where the trajectory is written as <id>.json after every step
	// (atomically); "" keeps it in memory only.
	Dir string
	// Source labels the trajectory ("real:terminal", "real:mcp"); ""
	// means "real:" + the domain.
	Source string
	// Task names the task the session ran, recorded in meta; "" records
	// none.
	Task string
	// SystemPrompt renders the world-model system prompt stored with the
	// trajectory; nil means trajectory.WorldSystemPrompt.
	SystemPrompt trajectory.SystemPromptFunc
	// Logger receives write failures; nil discards them.
	Logger *slog.Logger
}

// Recorded runs a real environment and records every step as a unified
// trajectory: the components (the action space included) after Start, then
// one turn per answered step with its latency and any error. A step rejected
// as malformed changes nothing and is not recorded. When the environment
// breaks the recording is kept and marked broken.
type Recorded struct {
	env  Env
	opts RecordOptions
	log  *slog.Logger

	mu   sync.Mutex
	traj trajectory.Trajectory
	path string
}

// NewRecorded wraps env.
func NewRecorded(env Env, opts *RecordOptions) *Recorded {
	var o RecordOptions
	if opts != nil {
		o = *opts
	}
	if o.ID == "" {
		o.ID = randomID()
	}
	if o.Source == "" {
		o.Source = "real:" + string(env.Domain())
	}
	if o.SystemPrompt == nil {
		o.SystemPrompt = trajectory.WorldSystemPrompt
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Recorded{env: env, opts: o, log: o.Logger}
	r.traj = trajectory.Trajectory{ID: o.ID, Domain: string(env.Domain()), Source: o.Source, Turns: []trajectory.Turn{}, Meta: map[string]json.RawMessage{}}
	if o.Dir != "" {
		r.path = filepath.Join(o.Dir, o.ID+".json")
	}
	return r
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ID is the session id.
func (r *Recorded) ID() string { return r.opts.ID }

// Path is the recording's file, "" when in memory only.
func (r *Recorded) Path() string { return r.path }

// Env is the wrapped environment.
func (r *Recorded) Env() Env { return r.env }

// Start starts the environment and records its description.
func (r *Recorded) Start(ctx context.Context) (string, error) {
	obs, err := r.env.Start(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.setMeta("started_at", time.Now().UTC().Format(time.RFC3339Nano))
	if r.opts.Task != "" {
		r.setMeta("task", r.opts.Task)
	}
	if err != nil {
		r.setMeta("status", "failed")
		r.setMeta("error", err.Error())
		r.saveLocked()
		return "", err
	}
	c := r.env.Components()
	r.traj.Components = &c
	if sp, perr := r.opts.SystemPrompt(r.env.Domain(), c); perr == nil {
		r.traj.SystemPrompt = sp
	} else {
		r.log.Warn("render system prompt", "session", r.opts.ID, "err", perr)
	}
	r.setMeta("initial_observation", obs)
	r.setMeta("status", "running")
	return obs, r.saveLocked()
}

// Step performs one action and records the turn.
func (r *Recorded) Step(ctx context.Context, action string) (StepResult, error) {
	res, err := r.env.Step(ctx, action)
	if err != nil {
		return res, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	turn := trajectory.Turn{Action: action, Observation: res.Observation, Meta: map[string]json.RawMessage{}}
	setRaw(turn.Meta, "latency_ms", res.Latency.Milliseconds())
	if res.Error != "" {
		setRaw(turn.Meta, "error", res.Error)
	}
	if res.Broken {
		setRaw(turn.Meta, "broken", true)
		r.setMeta("status", "broken")
		r.setMeta("broken", true)
	}
	if res.Terminated {
		setRaw(turn.Meta, "terminated", true)
		r.setMeta("status", "ended")
	}
	r.traj.Turns = append(r.traj.Turns, turn)
	if err := r.saveLocked(); err != nil {
		return res, fmt.Errorf("record step: %w", err)
	}
	return res, nil
}

// SetMeta records a session-level fact (e.g. a task check's result).
func (r *Recorded) SetMeta(key string, v any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.setMeta(key, v)
	return r.saveLocked()
}

// Trajectory returns a copy of the recording so far.
func (r *Recorded) Trajectory() trajectory.Trajectory {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.traj
	t.Turns = append([]trajectory.Turn(nil), r.traj.Turns...)
	t.Meta = make(map[string]json.RawMessage, len(r.traj.Meta))
	for k, v := range r.traj.Meta {
		t.Meta[k] = v
	}
	return t
}

// Close closes the environment and writes the final recording.
func (r *Recorded) Close() error {
	cerr := r.env.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	var st string
	_ = json.Unmarshal(r.traj.Meta["status"], &st)
	if st == "running" {
		r.setMeta("status", "closed")
	}
	r.setMeta("closed_at", time.Now().UTC().Format(time.RFC3339Nano))
	return errors.Join(cerr, r.saveLocked())
}

func (r *Recorded) setMeta(key string, v any) { setRaw(r.traj.Meta, key, v) }

func setRaw(m map[string]json.RawMessage, key string, v any) {
	b, err := trajectory.Marshal(v)
	if err == nil {
		m[key] = b
	}
}

func (r *Recorded) saveLocked() error {
	if r.path == "" {
		return nil
	}
	b, err := json.MarshalIndent(r.traj, "", " ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(r.path), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(r.path, append(b, '\n'), nil)
}
