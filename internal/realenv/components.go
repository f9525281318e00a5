package realenv

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentworld/agentworld/internal/sandbox"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// Components describe the terminal for the world model: the shell, the
// action format, and the first screen with the work dir's files.
func (t *Terminal) Components() trajectory.Components {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.comps
}

func (t *Terminal) components(ctx context.Context, screen string) trajectory.Components {
	desc := t.opts.TaskDescription
	if strings.TrimSpace(desc) == "" {
		desc = "A Linux bash shell running in a tmux pane, driven by an agent."
	}
	desc += fmt.Sprintf("\n\nThe shell runs in a sandbox without network access; the system is read-only except %s (the working directory and HOME) and /tmp. The tmux pane is %d columns by %d rows.", t.opts.WorkDir, t.opts.Width, t.opts.Height)
	state := "Screen:\n" + screen
	if files := t.listWork(ctx, 200); files != "" {
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

// listWork lists the work dir's files (directories with a final "/"), at
// most limit of them, sorted, from inside the sandbox: the host never walks
// a directory the agent can write. An error lists nothing.
func (t *Terminal) listWork(ctx context.Context, limit int) string {
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	script := fmt.Sprintf(`find . -mindepth 1 -maxdepth 8 \( -type d -printf '%%P/\n' -o -printf '%%P\n' \) 2>/dev/null | head -n 100000 | LC_ALL=C sort | head -n %d`, limit)
	out, code, err := t.exec(lctx, sandbox.KindSetup, script)
	if err != nil || code != 0 {
		t.log.Debug("listing the work dir failed", "exit", code, "err", err)
		return ""
	}
	return strings.ToValidUTF8(strings.TrimRight(out, "\n"), "?")
}

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
