package realenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/agentworld/agentworld/internal/conversation"
)

// Task is a terminal task: a starting state (seed files and a setup
// script), an instruction for the agent, a check script that decides
// success, and optionally an oracle solution that passes the check. A task
// lives in a directory holding task.yaml (and the seed directory it names).
//
//	name: count-errors
//	horizon: short            # short | long
//	instruction: Count the ERROR lines of app.log into answer.txt.
//	seed: seed                # optional, relative to the task dir
//	setup: |                  # optional bash, run in the work dir
//	  printf 'ERROR a\nINFO b\n' > app.log
//	root: false               # optional: shell as root inside (no capabilities)
//	check: |                  # bash, exit 0 = task solved
//	  test "$(cat answer.txt)" = 1
//	oracle:
//	  actions:                # terminal actions, each a list of keystrokes
//	    - [{keystrokes: "grep -c ERROR app.log > answer.txt\n", duration: 0.5}]
//	  script: |               # or a bash script run in the sandbox
//	    grep -c ERROR app.log > answer.txt
//
// Setup and check run in the work dir, as the shell's user, each in a pid
// namespace of its own that ends with it, with an empty private directory
// at /run/private that no other process can see (a check unpacks the
// agent's archives there; it is also a check's HOME).
type Task struct {
	Name        string  `json:"name"`
	Horizon     string  `json:"horizon,omitempty"`
	Instruction string  `json:"instruction"`
	Seed        string  `json:"seed,omitempty"`
	Setup       string  `json:"setup,omitempty"`
	Check       string  `json:"check"`
	Oracle      *Oracle `json:"oracle,omitempty"`
	// MaxDuration caps one keystroke wait, seconds; 0 keeps the terminal's
	// default.
	MaxDuration float64 `json:"max_duration,omitempty"`
	// Root runs the shell as root inside the sandbox's user namespace
	// (still without capabilities) for tasks that need it; false runs it as
	// an unprivileged user.
	Root bool `json:"root,omitempty"`

	// Dir is the task's directory (where task.yaml was read).
	Dir string `json:"-"`
}

// Oracle is a known solution: terminal actions, a script, or both (the
// actions run first).
type Oracle struct {
	Actions []json.RawMessage `json:"actions,omitempty"`
	Script  string            `json:"script,omitempty"`
}

// ActionStrings returns the oracle's actions as Terminal-domain action
// strings (compact JSON arrays).
func (o *Oracle) ActionStrings() ([]string, error) {
	if o == nil {
		return nil, nil
	}
	out := make([]string, len(o.Actions))
	for i, a := range o.Actions {
		var buf bytes.Buffer
		if err := json.Compact(&buf, a); err != nil {
			return nil, fmt.Errorf("oracle.actions[%d]: %w", i, err)
		}
		if _, err := conversation.ParseKeystrokes(buf.String(), 1); err != nil {
			return nil, fmt.Errorf("oracle.actions[%d]: %w", i, err)
		}
		out[i] = buf.String()
	}
	return out, nil
}

// LoadTask reads a task from a directory holding task.yaml, or from the
// file itself, and validates it. Errors name the file and field.
func LoadTask(path string) (*Task, error) {
	file := path
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		file = filepath.Join(path, "task.yaml")
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	t := new(Task)
	if err := dec.Decode(t); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	t.Dir = filepath.Dir(file)
	if t.Name == "" {
		t.Name = filepath.Base(t.Dir)
	}
	if err := t.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return t, nil
}

func (t *Task) validate() error {
	switch {
	case strings.TrimSpace(t.Instruction) == "":
		return errors.New("field instruction: missing")
	case strings.TrimSpace(t.Check) == "":
		return errors.New("field check: missing")
	case t.Horizon != "" && t.Horizon != "short" && t.Horizon != "long":
		return fmt.Errorf("field horizon: %q is neither short nor long", t.Horizon)
	case t.MaxDuration < 0:
		return errors.New("field max_duration: negative")
	}
	if t.Seed != "" {
		if st, err := os.Stat(t.SeedDir()); err != nil || !st.IsDir() {
			return fmt.Errorf("field seed: %s is not a directory", t.SeedDir())
		}
	}
	if _, err := t.Oracle.ActionStrings(); err != nil {
		return fmt.Errorf("field %w", err)
	}
	return nil
}

// SeedDir is the absolute seed directory, "" when the task has none.
func (t *Task) SeedDir() string {
	if t.Seed == "" {
		return ""
	}
	if filepath.IsAbs(t.Seed) {
		return t.Seed
	}
	return filepath.Join(t.Dir, t.Seed)
}

// LoadTasks loads every task directory under root (each holding a
// task.yaml), sorted by name.
func LoadTasks(root string) ([]*Task, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var out []*Task
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, e.Name(), "task.yaml")); err != nil {
			continue
		}
		t, err := LoadTask(filepath.Join(root, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *Task) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// TerminalOptions returns the options that start this task's terminal.
func (t *Task) TerminalOptions(base *TerminalOptions) *TerminalOptions {
	var o TerminalOptions
	if base != nil {
		o = *base
	}
	o.Seed = t.SeedDir()
	o.Setup = t.Setup
	o.TaskDescription = t.Instruction
	o.Root = o.Root || t.Root
	if t.MaxDuration > 0 {
		o.MaxDuration = time.Duration(t.MaxDuration * float64(time.Second))
	}
	return &o
}

// CheckResult is a task check's outcome.
type CheckResult struct {
	Passed   bool   `json:"passed"`
	ExitCode int    `json:"exit_code"`
	Output   string `json:"output,omitempty"`
}

// RunOptions configure RunTask. The zero value runs with default terminal
// options and records in memory.
type RunOptions struct {
	// Terminal are the base terminal options (pane size, temp dir, …); the
	// task supplies seed, setup and instruction. nil means defaults.
	Terminal *TerminalOptions
	// Record configures the recording; nil records in memory under a random
	// id. Its Task field defaults to the task's name.
	Record *RecordOptions
	// Script, when set, runs in the sandbox after the actions (an oracle
	// script).
	Script string
	// CheckBefore also runs the check right after start, before any action,
	// into TaskRun.Before: a well-formed task's check fails there.
	CheckBefore bool
	// CheckTimeout bounds the check script; 0 means 2 minutes.
	CheckTimeout time.Duration
	// Logger receives progress; nil discards them.
	Logger *slog.Logger
}

// TaskRun is what RunTask did: the recorded trajectory and the check.
type TaskRun struct {
	Recording *Recorded
	Check     CheckResult
	// Before is the check's result before any action (RunOptions.CheckBefore).
	Before *CheckResult
	// Steps is how many actions ran before the episode ended.
	Steps int
}

// RunTask starts the task's terminal, replays the actions (stopping early
// if the episode ends), runs opts.Script if set, then the check script, in
// the same sandbox, and records everything; the check result is stored in
// the recording's meta under "check".
func RunTask(ctx context.Context, t *Task, actions []string, opts *RunOptions) (*TaskRun, error) {
	var o RunOptions
	if opts != nil {
		o = *opts
	}
	if o.CheckTimeout <= 0 {
		o.CheckTimeout = 2 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	ropts := RecordOptions{}
	if o.Record != nil {
		ropts = *o.Record
	}
	if ropts.Task == "" {
		ropts.Task = t.Name
	}
	if ropts.Logger == nil {
		ropts.Logger = o.Logger
	}
	topts := t.TerminalOptions(o.Terminal)
	if topts.Logger == nil {
		topts.Logger = o.Logger
	}
	term := NewTerminal(topts)
	rec := NewRecorded(term, &ropts)
	run := &TaskRun{Recording: rec}
	defer rec.Close()
	if _, err := rec.Start(ctx); err != nil {
		return run, fmt.Errorf("task %s: %w", t.Name, err)
	}
	if o.CheckBefore {
		before, err := runCheck(ctx, term, t, o.CheckTimeout)
		if err != nil {
			return run, err
		}
		run.Before = &before
	}
	for i, a := range actions {
		res, err := rec.Step(ctx, a)
		if err != nil {
			return run, fmt.Errorf("task %s action %d: %w", t.Name, i+1, err)
		}
		run.Steps++
		if res.Terminated || res.Broken {
			break
		}
	}
	if strings.TrimSpace(o.Script) != "" {
		out, code, err := term.Exec(ctx, o.Script)
		if err != nil {
			return run, fmt.Errorf("task %s script: %w", t.Name, err)
		}
		if code != 0 {
			o.Logger.Warn("task script failed", "task", t.Name, "exit", code, "output", tail(out, 500))
		}
	}
	// Let the agent's last command finish (briefly) before judging.
	if !term.WaitIdle(ctx, 5*time.Second) {
		o.Logger.Debug("task check runs while the shell is busy", "task", t.Name)
	}
	check, err := runCheck(ctx, term, t, o.CheckTimeout)
	if err != nil {
		return run, err
	}
	run.Check = check
	if err := rec.SetMeta("check", run.Check); err != nil {
		return run, err
	}
	return run, nil
}

func runCheck(ctx context.Context, term *Terminal, t *Task, timeout time.Duration) (CheckResult, error) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, code, err := term.Exec(cctx, t.Check)
	if err != nil {
		return CheckResult{}, fmt.Errorf("task %s check: %w", t.Name, err)
	}
	return CheckResult{Passed: code == 0, ExitCode: code, Output: tail(out, 4000)}, nil
}
