package realenv

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/mcpclient"
	"github.com/agentworld/agentworld/internal/sandbox"
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
	// system temporary directory. When this process runs as root the
	// sandbox runs as nobody, which must reach its work dir: a TempDir that
	// other users cannot search is replaced by the system temporary
	// directory.
	TempDir string
	// StartTimeout bounds sandbox start-up; 0 means 20 seconds.
	StartTimeout time.Duration
	// MaxScreenBytes caps one observation of the pane: a longer capture
	// (the agent can make its window 10,000 columns by 10,000 rows) is cut
	// there and says so; 0 means [DefaultMaxScreenBytes] or, for a pane
	// larger than 160x40, four bytes per cell.
	MaxScreenBytes int
	// Root runs the shell as uid 0 inside the sandbox's user namespace, for
	// tasks that need to own system paths inside; it has no capabilities
	// either way. false runs it as the unprivileged user agent (uid 1000).
	Root bool
	// Limits bound the sandbox's processes, memory, CPU time, file sizes,
	// /tmp and episode time; zero fields take [Limits] defaults.
	Limits sandbox.Limits
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
		v.WorkDir = sandbox.DefaultWorkDir
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
	if v.MaxScreenBytes <= 0 {
		v.MaxScreenBytes = max(DefaultMaxScreenBytes, 4*v.Width*v.Height+v.Height)
	}
	if v.Logger == nil {
		v.Logger = slog.New(slog.DiscardHandler)
	}
	v.Limits = v.Limits.WithDefaults()
	return v
}

// DefaultMaxScreenBytes is the default cap on one observation of the pane:
// ten times a 160x40 pane of four-byte characters.
const DefaultMaxScreenBytes = 256 << 10

// Terminal is a real bash shell in a tmux pane inside a bubblewrap sandbox.
//
// The sandbox (see [sandbox.Sandbox.Command]) holds the agent's world — a private
// tmux server and everything the shell starts, in a pid namespace of its
// own — and, beside it, the processes the host runs inside, each in a pid
// namespace made for it alone that ends with it: tmux clients that type
// keys and capture the pane, setup scripts and task checks, which see the
// agent's files (not its processes) while the agent cannot see them. The
// tmux server is the agent's (it can replace it with its own), so
// everything a tmux client reads is treated as hostile bytes: bounded, and
// never anything but text for the observation. Everything runs as the sandbox's user without capabilities, with no
// network, a read-only system and a private /tmp. When the shell exits the
// tmux server ends and the episode with it; Close kills the sandbox and
// everything in it, and --die-with-parent does so if this process dies.
type Terminal struct {
	opts TerminalOptions
	log  *slog.Logger

	mu      sync.Mutex
	dir     string   // host temp dir holding work/, ctl/ and the lock
	lock    *os.File // flock'd while the terminal lives (see cleanStale)
	work    string   // host path of the work dir
	ctl     string   // host path of the control dir
	pane    string   // the agent's pane id (%0)
	sb      *sandbox.Sandbox
	world   *exec.Cmd     // the agent's world: tmux server and shell
	done    chan struct{} // closed when the world ends
	begin   time.Time     // when Start returned the first screen
	started bool
	ended   bool
	closed  bool
	last    string
	comps   trajectory.Components
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
	for _, bin := range []string{"bwrap", "tmux", "nsenter"} {
		if _, err := exec.LookPath(bin); err != nil {
			return "", fmt.Errorf("%w: %s not found on PATH (install bubblewrap and tmux)", sandbox.ErrUnavailable, bin)
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
		out, code, err := t.exec(sctx, sandbox.KindSetup, t.opts.Setup)
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
	t.comps = t.components(ctx, screen)
	t.begin = time.Now()
	t.log.Debug("terminal started", "dir", t.dir)
	return screen, nil
}

func (t *Terminal) prepare() error {
	base := t.opts.TempDir
	if os.Geteuid() == 0 && base != "" && !sandbox.SearchableByOthers(base) {
		t.log.Debug("temp dir not searchable by the sandbox's user; using the system temp dir", "dir", base)
		base = ""
	}
	sandbox.CleanStale(base, t.log)
	dir, err := os.MkdirTemp(base, sandbox.TermDirPrefix)
	if err != nil {
		return fmt.Errorf("terminal: %w", err)
	}
	t.dir = dir
	if os.Geteuid() == 0 {
		// nobody (the sandbox) passes through to its work dir and reads
		// nothing else here.
		if err := os.Chmod(dir, 0o711); err != nil {
			return fmt.Errorf("terminal: %w", err)
		}
	}
	if t.lock, err = sandbox.LockDir(dir); err != nil {
		return fmt.Errorf("terminal: %w", err)
	}
	t.work, t.ctl = filepath.Join(dir, "work"), filepath.Join(dir, "ctl")
	if err := os.Mkdir(t.ctl, 0o755); err != nil {
		return fmt.Errorf("terminal: %w", err)
	}
	if t.opts.Seed != "" {
		if err := copyTree(t.opts.Seed, t.work); err != nil {
			return fmt.Errorf("terminal seed %s: %w", t.opts.Seed, err)
		}
	} else if err := os.Mkdir(t.work, 0o755); err != nil {
		return fmt.Errorf("terminal: %w", err)
	}
	if os.Geteuid() == 0 {
		// The sandbox runs as the host's nobody and must own its work dir
		// (an empty one is not walked: the host opens nothing in it).
		chown := func() error { return os.Lchown(t.work, sandbox.HostNobody, sandbox.HostNobody) }
		if t.opts.Seed != "" {
			chown = func() error { return sandbox.ChownTree(t.work, sandbox.HostNobody) }
		}
		if err := chown(); err != nil {
			return fmt.Errorf("terminal: %w", err)
		}
	}
	// Status line off so the whole pane is the shell; no escape delay so
	// Escape is delivered at once.
	conf := fmt.Sprintf("set -g status off\nset -g default-size %dx%d\nset -g escape-time 0\nset -g history-limit 10000\nset -g default-terminal screen\nset -g default-shell /bin/bash\nset -g remain-on-exit off\n", t.opts.Width, t.opts.Height)
	rc := "PS1=" + shellQuote(t.opts.Prompt) + "\nPS2='> '\nunset PROMPT_COMMAND\nHISTFILE=/tmp/.bash_history\ncd " + shellQuote(t.opts.WorkDir) + "\n"
	files := sandbox.Files(t.opts.WorkDir)
	files["tmux.conf"], files["bashrc"] = conf, rc
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(t.ctl, name), []byte(body), 0o644); err != nil {
			return fmt.Errorf("terminal: %w", err)
		}
	}
	return nil
}

func (t *Terminal) env() map[string]string {
	user := sandbox.User
	if t.opts.Root {
		user = "root"
	}
	return map[string]string{
		"PATH": sandbox.Path,
		"HOME": t.opts.WorkDir,
		"LANG": "C.UTF-8",
		"USER": user,
		"TERM": "screen",
	}
}

func (t *Terminal) launch(ctx context.Context) error {
	sb, err := sandbox.Start(ctx, sandbox.Spec{HostWork: t.work, Work: t.opts.WorkDir, HostCtl: t.ctl, Root: t.opts.Root, Limits: t.opts.Limits, Env: t.env()}, t.opts.StartTimeout)
	if err != nil {
		return err
	}
	t.sb = sb
	script := fmt.Sprintf("tmux -S %s -f %s/tmux.conf new-session -d -s %s -x %d -y %d -c %s 'bash --rcfile %s/bashrc -i' && exec tmux -S %s wait-for agentworld-never",
		sandbox.TmuxSock, sandbox.CtlDir, tmuxSession, t.opts.Width, t.opts.Height, shellQuote(t.opts.WorkDir), sandbox.CtlDir, sandbox.TmuxSock)
	// The world lives until the shell exits or Close; it is not bound to ctx.
	t.world = sb.Command(context.Background(), sandbox.KindWorld, t.opts.WorkDir, "sh", "-c", script)
	worldErr := mcpclient.NewTailBuffer(sandbox.MaxStderr)
	t.world.Stderr = worldErr
	if err := t.world.Start(); err != nil {
		return fmt.Errorf("%w: start the shell in the sandbox: %v", sandbox.ErrUnavailable, err)
	}
	t.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		_ = cmd.Wait()
		close(done)
	}(t.world, t.done)

	deadline := time.Now().Add(t.opts.StartTimeout)
	for {
		out, err := t.tmux(ctx, "display-message", "-p", "-t", tmuxSession+":", "#{pane_id}")
		if err == nil && strings.HasPrefix(strings.TrimSpace(out), "%") {
			t.pane = strings.TrimSpace(out)
			return nil
		}
		select {
		case <-t.done:
			return fmt.Errorf("%w: the shell's sandbox exited during start-up: %s %s", sandbox.ErrUnavailable, strings.TrimSpace(worldErr.String()), strings.TrimSpace(sb.Stderr.String()))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: tmux in the sandbox did not come up within %s: %v %s", sandbox.ErrUnavailable, t.opts.StartTimeout, err, strings.TrimSpace(worldErr.String()))
		}
	}
}

// waitPrompt polls the pane until the shell has drawn something and the
// screen stays the same for two polls in a row.
func (t *Terminal) waitPrompt(ctx context.Context) (string, error) {
	deadline := time.Now().Add(t.opts.StartTimeout)
	prev := ""
	for {
		screen, err := t.capture(ctx)
		if err != nil {
			return "", fmt.Errorf("%w: capture first screen: %v", sandbox.ErrUnavailable, err)
		}
		if screen != "" && screen == prev {
			return screen, nil
		}
		prev = screen
		if time.Now().After(deadline) {
			return "", fmt.Errorf("%w: shell prompt did not appear within %s", sandbox.ErrUnavailable, t.opts.StartTimeout)
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
	keys, err := conversation.ParseKeystrokes(action, t.opts.DefaultDuration)
	if err != nil {
		return StepResult{}, err
	}
	if since := time.Since(t.begin); since > t.opts.Limits.Episode {
		t.ended = true
		return StepResult{Observation: t.last, Terminated: true, Error: fmt.Sprintf("episode time limit %s reached", t.opts.Limits.Episode), Latency: time.Since(begin)}, nil
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
	total := 0
	for _, k := range keys {
		total += len(k.Keystrokes)
	}
	if total > maxActionKeystrokes {
		return StepResult{}, fmt.Errorf("%w: %d bytes of keystrokes in one action exceed %d", conversation.ErrBadAction, total, maxActionKeystrokes)
	}
	for i, k := range keys {
		for _, args := range sendKeyBatches(t.pane, KeyOps(k.Keystrokes)) {
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

// maxScriptBytes bounds a script run by Exec: it travels as one argument.
const maxScriptBytes = 100 << 10

// maxExecOutput is how much of a script's output Exec keeps (the end).
const maxExecOutput = 1 << 20

// Exec runs a bash script inside the sandbox, in the work dir, and returns
// its combined output (the last MiB) and exit code. Checks use it: they see
// the same files and /tmp as the agent's shell (not its processes), and a
// fresh private directory at /run/private, also their HOME, that nothing
// else sees; the agent cannot see, signal or trace them: each runs in a pid
// namespace of its own, made for it and ended with it (see
// [sandbox.Sandbox.Command]). Output and
// status come back through pipes to this process, never through files the
// agent could write. When the script exits, or ctx ends, everything it
// started ends with it.
func (t *Terminal) Exec(ctx context.Context, script string) (string, int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.started || t.closed {
		return "", 0, errors.New("terminal not running")
	}
	return t.exec(ctx, sandbox.KindCheck, script)
}

func (t *Terminal) exec(ctx context.Context, kind sandbox.Kind, script string) (string, int, error) {
	if len(script) > maxScriptBytes {
		return "", 0, fmt.Errorf("script of %d bytes exceeds %d", len(script), maxScriptBytes)
	}
	if !t.sb.Alive() {
		return "", 0, fmt.Errorf("%w: sandbox ended", ErrBroken)
	}
	out := mcpclient.NewTailBuffer(maxExecOutput)
	cmd := t.sb.Command(ctx, kind, t.opts.WorkDir, "bash", "-c", script)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = 500 * time.Millisecond
	err := cmd.Run()
	// What the script left running in its process group goes with it (a
	// check's stray process would otherwise hold its output until WaitDelay
	// and live on beside the agent).
	if cmd.Process != nil {
		sandbox.KillGroup(cmd.Process.Pid)
	}
	if errors.Is(err, exec.ErrWaitDelay) {
		err = nil // exited 0; a process it started held the output open
	}
	if ctx.Err() != nil {
		return out.String(), 0, fmt.Errorf("script in sandbox: %w", ctx.Err())
	}
	if !t.sb.Alive() {
		return out.String(), 0, fmt.Errorf("%w: sandbox ended while a script ran", ErrBroken)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0, nil
	case errors.As(err, &ee):
		if st, ok := ee.Sys().(syscall.WaitStatus); ok && st.Signaled() {
			return out.String(), 128 + int(st.Signal()), nil
		}
		return out.String(), ee.ExitCode(), nil
	default:
		return out.String(), 0, fmt.Errorf("script in sandbox: %w", err)
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
	out, cut, err := t.tmuxRead(ctx, t.opts.MaxScreenBytes, "capture-pane", "-p", "-t", t.pane)
	if err != nil {
		return "", err
	}
	// What a fake server sends need not be text.
	screen := NormalizeScreen(strings.ToValidUTF8(out, "\uFFFD"))
	if cut {
		screen += fmt.Sprintf("\n[agentworld: the screen was cut at %d bytes]", t.opts.MaxScreenBytes)
	}
	return screen, nil
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
	if t.sb != nil {
		if t.done != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			_, _ = t.tmux(ctx, "kill-server")
			cancel()
			select {
			case <-t.done:
			case <-time.After(3 * time.Second):
			}
		}
		t.sb.Close()
		if t.done != nil {
			<-t.done
		}
	}
	t.cleanup()
}

func (t *Terminal) cleanup() {
	if t.dir != "" {
		_ = os.RemoveAll(t.dir)
	}
	if t.lock != nil {
		t.lock.Close()
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
