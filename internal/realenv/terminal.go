package realenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// TerminalOptions configure a real terminal. The zero value is a 160x40
// pane, an empty work dir at /app and the fixed prompt.
type TerminalOptions struct {
	// Width and Height of the tmux pane; 0 means 160 and 40 (the Terminal
	// domain shows about 40 lines).
	Width, Height int
	// WorkDir is where the private writable directory appears inside the
	// sandbox; it is also HOME and the starting directory. "" means /app.
	WorkDir string
	// Seed is a host directory whose contents are copied into the work dir
	// before the shell starts; "" means an empty work dir.
	Seed string
	// Setup is a bash script run inside the sandbox, in the work dir, before
	// the first observation; "" runs nothing. A non-zero exit fails Start.
	Setup string
	// SetupTimeout bounds Setup; 0 means 5 minutes.
	SetupTimeout time.Duration
	// TaskDescription becomes the task_description component; "" means a
	// generic description of the shell.
	TaskDescription string
	// DefaultDuration is the wait, in seconds, for an element that gives no
	// duration; 0 means 1 second.
	DefaultDuration float64
	// MaxDuration caps the wait of one element; 0 means 2 minutes.
	MaxDuration time.Duration
	// Prompt is PS1; "" means `root@sandbox:$PWD# ` (bash expands $PWD at
	// each prompt, so the full path shows, as in Terminal-Bench screens).
	Prompt string
	// TempDir is where the host side of the sandbox is made; "" means the
	// system temporary directory.
	TempDir string
	// StartTimeout bounds sandbox start-up; 0 means 20 seconds.
	StartTimeout time.Duration
	// Logger receives lifecycle logs; nil discards them.
	Logger *slog.Logger
}

func (o *TerminalOptions) withDefaults() TerminalOptions {
	var v TerminalOptions
	if o != nil {
		v = *o
	}
	if v.Width <= 0 {
		v.Width = 160
	}
	if v.Height <= 0 {
		v.Height = 40
	}
	if v.WorkDir == "" {
		v.WorkDir = DefaultWorkDir
	}
	if v.SetupTimeout <= 0 {
		v.SetupTimeout = 5 * time.Minute
	}
	if v.DefaultDuration <= 0 {
		v.DefaultDuration = 1
	}
	if v.MaxDuration <= 0 {
		v.MaxDuration = 2 * time.Minute
	}
	if v.Prompt == "" {
		v.Prompt = `root@sandbox:$PWD# `
	}
	if v.StartTimeout <= 0 {
		v.StartTimeout = 20 * time.Second
	}
	if v.Logger == nil {
		v.Logger = slog.New(slog.DiscardHandler)
	}
	return v
}

// Terminal is a real bash shell in a tmux pane inside a bubblewrap sandbox.
//
// The tmux server runs inside the sandbox, one private server per terminal:
// its socket lives in the sandbox's control directory, which is a bind mount
// of a host directory, so the host tmux client sends keys and captures the
// pane through that socket while every process the shell starts stays inside
// the sandbox's namespaces (no network, read-only system, private /tmp). The
// sandbox's first process waits on the server; when the server ends (Close,
// or the shell exits) the sandbox ends, and --die-with-parent ends it if
// this process dies.
type Terminal struct {
	opts TerminalOptions
	log  *slog.Logger

	mu      sync.Mutex
	dir     string // host temp dir holding work/ and ctl/
	work    string // host path of the work dir
	ctl     string // host path of the control dir
	sock    string // host path of the tmux socket
	pane    string // the agent's pane id (%0)
	cmd     *exec.Cmd
	done    chan struct{}
	stderr  bytes.Buffer
	started bool
	ended   bool
	closed  bool
	last    string
	comps   trajectory.Components
	execN   int
}

// NewTerminal prepares a terminal; Start brings it up.
func NewTerminal(opts *TerminalOptions) *Terminal {
	o := opts.withDefaults()
	return &Terminal{opts: o, log: o.Logger}
}

// Domain is the Terminal domain.
func (t *Terminal) Domain() domain.Domain { return domain.Terminal }

// WorkDirHost is the host path of the sandbox's work dir (valid after
// Start until Close), for inspecting what the agent left behind.
func (t *Terminal) WorkDirHost() string { return t.work }

const tmuxSession = "env"

// Start creates the sandbox, starts the shell, runs the setup script and
// returns the first screen.
func (t *Terminal) Start(ctx context.Context) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.started {
		return "", errors.New("terminal already started")
	}
	t.started = true
	for _, bin := range []string{"bwrap", "tmux"} {
		if _, err := exec.LookPath(bin); err != nil {
			return "", fmt.Errorf("%w: %s not found on PATH (install bubblewrap and tmux)", ErrUnavailable, bin)
		}
	}
	if err := t.prepare(); err != nil {
		t.cleanup()
		return "", err
	}
	if err := t.launch(ctx); err != nil {
		t.shutdown()
		return "", err
	}
	if strings.TrimSpace(t.opts.Setup) != "" {
		sctx, cancel := context.WithTimeout(ctx, t.opts.SetupTimeout)
		out, code, err := t.exec(sctx, t.opts.Setup)
		cancel()
		if err != nil {
			t.shutdown()
			return "", fmt.Errorf("terminal setup: %w", err)
		}
		if code != 0 {
			t.shutdown()
			return "", fmt.Errorf("terminal setup exited %d: %s", code, tail(out, 2000))
		}
	}
	screen, err := t.waitPrompt(ctx)
	if err != nil {
		t.shutdown()
		return "", err
	}
	t.last = screen
	t.comps = t.components(screen)
	t.log.Debug("terminal started", "dir", t.dir)
	return screen, nil
}

func (t *Terminal) prepare() error {
	dir, err := os.MkdirTemp(t.opts.TempDir, "agentworld-term-")
	if err != nil {
		return fmt.Errorf("terminal: %w", err)
	}
	t.dir = dir
	t.work, t.ctl = filepath.Join(dir, "work"), filepath.Join(dir, "ctl")
	t.sock = filepath.Join(t.ctl, "tmux.sock")
	if err := os.Mkdir(t.ctl, 0o700); err != nil {
		return fmt.Errorf("terminal: %w", err)
	}
	if t.opts.Seed != "" {
		if err := copyTree(t.opts.Seed, t.work); err != nil {
			return fmt.Errorf("terminal seed %s: %w", t.opts.Seed, err)
		}
	} else if err := os.Mkdir(t.work, 0o755); err != nil {
		return fmt.Errorf("terminal: %w", err)
	}
	// Status line off so the whole pane is the shell; no escape delay so
	// Escape is delivered at once.
	conf := fmt.Sprintf("set -g status off\nset -g default-size %dx%d\nset -g escape-time 0\nset -g history-limit 10000\nset -g default-terminal screen\nset -g default-shell /bin/bash\nset -g remain-on-exit off\n", t.opts.Width, t.opts.Height)
	rc := "PS1=" + shellQuote(t.opts.Prompt) + "\nPS2='> '\nunset PROMPT_COMMAND\nHISTFILE=/tmp/.bash_history\ncd " + shellQuote(t.opts.WorkDir) + "\n"
	if err := os.WriteFile(filepath.Join(t.ctl, "tmux.conf"), []byte(conf), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(t.ctl, "bashrc"), []byte(rc), 0o644)
}

func (t *Terminal) env() map[string]string {
	return map[string]string{
		"PATH": sandboxPath,
		"HOME": t.opts.WorkDir,
		"LANG": "C.UTF-8",
		"USER": "root",
		"TERM": "screen",
	}
}

func (t *Terminal) launch(ctx context.Context) error {
	args := bwrapArgs(sandboxSpec{HostWork: t.work, Work: t.opts.WorkDir, HostCtl: t.ctl, Env: t.env()}, os.Lstat, os.Readlink)
	sock := ctlDir + "/tmux.sock"
	script := fmt.Sprintf("tmux -S %s -f %s/tmux.conf new-session -d -s %s -x %d -y %d -c %s 'bash --rcfile %s/bashrc -i' && exec tmux -S %s wait-for agentworld-never",
		sock, ctlDir, tmuxSession, t.opts.Width, t.opts.Height, shellQuote(t.opts.WorkDir), ctlDir, sock)
	args = append(args, "--", "sh", "-c", script)
	t.cmd = exec.Command("bwrap", args...)
	t.cmd.Stderr = &lockedWriter{mu: &sync.Mutex{}, w: &t.stderr}
	if err := t.cmd.Start(); err != nil {
		return fmt.Errorf("%w: start bwrap: %v", ErrUnavailable, err)
	}
	t.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		_ = cmd.Wait()
		close(done)
	}(t.cmd, t.done)

	deadline := time.Now().Add(t.opts.StartTimeout)
	for {
		out, err := t.tmux(ctx, "display-message", "-p", "-t", tmuxSession+":", "#{pane_id}")
		if err == nil && strings.HasPrefix(strings.TrimSpace(out), "%") {
			t.pane = strings.TrimSpace(out)
			return nil
		}
		select {
		case <-t.done:
			return fmt.Errorf("%w: sandbox exited during start-up: %s", ErrUnavailable, strings.TrimSpace(t.stderrText()))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: tmux in the sandbox did not come up within %s: %s", ErrUnavailable, t.opts.StartTimeout, strings.TrimSpace(t.stderrText()))
		}
	}
}

func (t *Terminal) stderrText() string {
	if lw, ok := t.cmd.Stderr.(*lockedWriter); ok {
		lw.mu.Lock()
		defer lw.mu.Unlock()
	}
	return t.stderr.String()
}

// waitPrompt polls the pane until the shell has drawn something and the
// screen stays the same for two polls in a row.
func (t *Terminal) waitPrompt(ctx context.Context) (string, error) {
	deadline := time.Now().Add(t.opts.StartTimeout)
	prev := ""
	for {
		screen, err := t.capture(ctx)
		if err != nil {
			return "", fmt.Errorf("%w: capture first screen: %v", ErrUnavailable, err)
		}
		if screen != "" && screen == prev {
			return screen, nil
		}
		prev = screen
		if time.Now().After(deadline) {
			return "", fmt.Errorf("%w: shell prompt did not appear within %s", ErrUnavailable, t.opts.StartTimeout)
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return "", err
		}
	}
}

// Step types the action's keystrokes, waiting each element's duration, and
// returns the visible pane. `[]` ends the episode and returns the current
// screen. A command still running when the wait ends shows as running.
func (t *Terminal) Step(ctx context.Context, action string) (StepResult, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	begin := time.Now()
	if !t.started || t.closed {
		return StepResult{}, errors.New("terminal not running")
	}
	if t.ended {
		return StepResult{}, ErrEnded
	}
	keys, err := ParseTerminalAction(action, t.opts.DefaultDuration)
	if err != nil {
		return StepResult{}, err
	}
	if len(keys) == 0 {
		t.ended = true
		screen, err := t.capture(ctx)
		if err != nil {
			screen = t.last
		}
		t.last = screen
		return StepResult{Observation: screen, Terminated: true, Latency: time.Since(begin)}, nil
	}
	for i, k := range keys {
		for _, op := range KeyOps(k.Keystrokes) {
			args := append([]string{"send-keys", "-t", t.pane}, op.Args()...)
			if _, err := t.tmux(ctx, args...); err != nil {
				if ctx.Err() != nil {
					return StepResult{}, ctx.Err()
				}
				return t.gone(begin, fmt.Sprintf("send-keys action[%d]: %v", i, err)), nil
			}
		}
		d := time.Duration(k.Duration * float64(time.Second))
		if d > t.opts.MaxDuration {
			d = t.opts.MaxDuration
		}
		if err := sleepCtx(ctx, d); err != nil {
			return StepResult{}, err
		}
	}
	screen, err := t.capture(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return StepResult{}, ctx.Err()
		}
		return t.gone(begin, fmt.Sprintf("capture-pane: %v", err)), nil
	}
	t.last = screen
	return StepResult{Observation: screen, Latency: time.Since(begin)}, nil
}

// gone reports a tmux server that went away: the shell exited (exit, C-d),
// which ends the episode, or the sandbox died.
func (t *Terminal) gone(begin time.Time, cause string) StepResult {
	t.ended = true
	select {
	case <-t.done:
	case <-time.After(2 * time.Second):
	}
	return StepResult{Observation: t.last, Terminated: true, Error: "shell exited: " + cause, Latency: time.Since(begin)}
}

// Exec runs a bash script inside the sandbox, in the work dir, in a tmux
// window the agent does not see, and returns its combined output and exit
// code. Checks and setup scripts use it, so they see the same files, /tmp
// and processes as the agent's shell.
func (t *Terminal) Exec(ctx context.Context, script string) (string, int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.started || t.closed {
		return "", 0, errors.New("terminal not running")
	}
	return t.exec(ctx, script)
}

func (t *Terminal) exec(ctx context.Context, script string) (string, int, error) {
	t.execN++
	name := fmt.Sprintf("exec-%d", t.execN)
	if err := os.WriteFile(filepath.Join(t.ctl, name+".sh"), []byte(script), 0o644); err != nil {
		return "", 0, err
	}
	in := ctlDir + "/" + name
	cmdline := fmt.Sprintf("bash %s.sh > %s.out 2>&1 < /dev/null; echo $? > %s.rc.tmp; mv %s.rc.tmp %s.rc", in, in, in, in, in)
	out, err := t.tmux(ctx, "new-window", "-d", "-P", "-F", "#{window_id}", "-t", tmuxSession+":", "-c", t.opts.WorkDir, cmdline)
	if err != nil {
		return "", 0, fmt.Errorf("start script in sandbox: %w", err)
	}
	win := strings.TrimSpace(out)
	rcPath := filepath.Join(t.ctl, name+".rc")
	for {
		if b, err := os.ReadFile(rcPath); err == nil {
			code, perr := strconv.Atoi(strings.TrimSpace(string(b)))
			if perr != nil {
				return "", 0, fmt.Errorf("script exit status %q: %w", b, perr)
			}
			output, _ := os.ReadFile(filepath.Join(t.ctl, name+".out"))
			return string(output), code, nil
		}
		select {
		case <-t.done:
			return "", 0, fmt.Errorf("%w: sandbox ended while a script ran", ErrBroken)
		case <-ctx.Done():
			_, _ = t.tmux(context.Background(), "kill-window", "-t", win)
			return "", 0, fmt.Errorf("script in sandbox: %w", ctx.Err())
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// WaitIdle waits, up to limit, until the agent's shell runs no foreground
// command (tmux reports bash as the pane's current command twice in a row),
// so a check does not race the last command. It reports whether the shell
// became idle.
func (t *Terminal) WaitIdle(ctx context.Context, limit time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	deadline := time.Now().Add(limit)
	idle := 0
	for {
		out, err := t.tmux(ctx, "display-message", "-p", "-t", t.pane, "#{pane_current_command}")
		if err != nil {
			return false
		}
		if strings.TrimSpace(out) == "bash" {
			idle++
			if idle == 2 {
				return true
			}
		} else {
			idle = 0
		}
		if time.Now().After(deadline) || sleepCtx(ctx, 50*time.Millisecond) != nil {
			return false
		}
	}
}

// Screen returns the pane as it is now.
func (t *Terminal) Screen(ctx context.Context) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.capture(ctx)
}

func (t *Terminal) capture(ctx context.Context) (string, error) {
	out, err := t.tmux(ctx, "capture-pane", "-p", "-t", t.pane)
	if err != nil {
		return "", err
	}
	return NormalizeScreen(out), nil
}

// NormalizeScreen trims trailing blanks from every line and drops the empty
// lines below the last non-empty one, so a screen compares equal however
// much of the pane is still unused.
func NormalizeScreen(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t\r")
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return strings.Join(lines, "\n")
}

func (t *Terminal) tmux(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "tmux", append([]string{"-S", t.sock}, args...)...)
	cmd.Env = tmuxClientEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("tmux %s: %v: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

func tmuxClientEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "TMUX=") || strings.HasPrefix(kv, "TMUX_PANE=") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// Components describe the terminal for the world model: the shell, the
// action format, and the first screen with the work dir's files.
func (t *Terminal) Components() trajectory.Components {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.comps
}

func (t *Terminal) components(screen string) trajectory.Components {
	desc := t.opts.TaskDescription
	if strings.TrimSpace(desc) == "" {
		desc = "A Linux bash shell running in a tmux pane, driven by an agent."
	}
	desc += fmt.Sprintf("\n\nThe shell runs in a sandbox without network access; the system is read-only except %s (the working directory and HOME) and /tmp. The tmux pane is %d columns by %d rows.", t.opts.WorkDir, t.opts.Width, t.opts.Height)
	state := "Screen:\n" + screen
	if files := listFiles(t.work, 200); files != "" {
		state += "\n\nFiles under " + t.opts.WorkDir + ":\n" + files
	}
	return trajectory.Components{
		TaskDescription: desc,
		ActionSpace:     TerminalActionSpace,
		InitialState:    state,
	}
}

// TerminalActionSpace documents the Terminal domain's action format.
const TerminalActionSpace = `Each action is a JSON array of objects {"keystrokes": string, "duration": seconds}. The keystrokes are typed into the tmux pane in order, waiting "duration" seconds after each. Text is typed literally and a newline presses Enter, so a trailing newline runs the command. A string that is exactly a tmux key name sends that key: C-c (interrupt), C-d (end of input), C-z, Escape, Tab, Up, Down, Left, Right, Enter, BSpace, and so on. The observation is the visible screen after the last wait. An empty array [] ends the task.`

func listFiles(root string, limit int) string {
	var lines []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return nil
		}
		if len(lines) >= limit {
			return filepath.SkipAll
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			rel += "/"
		}
		lines = append(lines, rel)
		return nil
	})
	return strings.Join(lines, "\n")
}

// Close stops the shell, the tmux server and the sandbox, and removes the
// host directories.
func (t *Terminal) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	t.shutdown()
	return nil
}

func (t *Terminal) shutdown() {
	if t.cmd != nil && t.done != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, _ = t.tmux(ctx, "kill-server")
		cancel()
		select {
		case <-t.done:
		case <-time.After(3 * time.Second):
			_ = t.cmd.Process.Kill()
			<-t.done
		}
	}
	t.cleanup()
}

func (t *Terminal) cleanup() {
	if t.dir != "" {
		_ = os.RemoveAll(t.dir)
	}
}

// copyTree copies a directory's contents (files, directories, symlinks,
// modes) into dst, which it creates.
func copyTree(src, dst string) error {
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("not a directory")
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(target, info.Mode().Perm()|0o700)
		case info.Mode()&os.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(target, b, info.Mode().Perm())
		}
		return nil
	})
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
