package realenv

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/agentworld/agentworld/internal/sandbox"
)

var probe struct {
	once sync.Once
	err  error
}

// ProbeSandbox reports whether a sandboxed terminal can start here, by
// actually starting one and running a command in it (cached for the
// process). The error wraps ErrUnavailable and says why.
func ProbeSandbox() error {
	probe.once.Do(func() { probe.err = probeSandbox() })
	return probe.err
}

func probeSandbox() error {
	if _, err := exec.LookPath("tmux"); err != nil {
		return fmt.Errorf("%w: tmux not found on PATH (install tmux)", sandbox.ErrUnavailable)
	}
	term := NewTerminal(&TerminalOptions{StartTimeout: 15 * time.Second})
	defer term.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := term.Start(ctx); err != nil {
		if errors.Is(err, sandbox.ErrUnavailable) {
			return err
		}
		return fmt.Errorf("%w: %v", sandbox.ErrUnavailable, err)
	}
	out, code, err := term.Exec(ctx, "echo ok > probe && cat probe")
	if err != nil || code != 0 || strings.TrimSpace(out) != "ok" {
		return fmt.Errorf("%w: sandbox work dir not writable: exit %d, %v: %s", sandbox.ErrUnavailable, code, err, out)
	}
	return nil
}
