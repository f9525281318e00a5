//go:build !linux

package realenv

import (
	"context"
	"fmt"
	"os/exec"
	"time"
)

// startSandbox needs Linux namespaces: elsewhere the real terminal is
// unavailable.
func startSandbox(context.Context, sandboxSpec, time.Duration) (*sandbox, error) {
	return nil, fmt.Errorf("%w: the real terminal sandbox needs Linux", ErrUnavailable)
}

// command is never reached without a sandbox; it names a program that
// does not exist so that running it fails.
func (s *sandbox) command(ctx context.Context, _ runKind, _ string, _ ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "agentworld-no-sandbox-on-this-platform")
}

func (s *sandbox) close() {}

func killGroup(int) {}
