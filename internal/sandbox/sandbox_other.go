//go:build !linux

package sandbox

import (
	"context"
	"fmt"
	"os/exec"
	"time"
)

// Start needs Linux namespaces: elsewhere the real terminal is
// unavailable.
func Start(context.Context, Spec, time.Duration) (*Sandbox, error) {
	return nil, fmt.Errorf("%w: the real terminal sandbox needs Linux", ErrUnavailable)
}

// Command is never reached without a sandbox; it names a program that
// does not exist so that running it fails.
func (s *Sandbox) Command(ctx context.Context, _ Kind, _ string, _ ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "agentworld-no-sandbox-on-this-platform")
}

// Close does nothing: there is no sandbox.
func (s *Sandbox) Close() {}

// KillGroup does nothing without process groups.
func KillGroup(int) {}
