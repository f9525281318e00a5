//go:build unix

package mcpclient

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup starts the server in a process group of its own, so
// killGroup reaches what it started and a terminal's Ctrl-C reaches
// agentworld (which closes the session) rather than the server directly.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup kills whatever is left in the server's process group. The
// group id cannot be reused while any member lives, so this reaches only
// the server's own processes.
func (s *Session) killGroup() {
	if s.cmd.Process == nil {
		return
	}
	if err := syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL); err == nil {
		s.log.Debug("killed processes the MCP server left behind", "pgid", s.cmd.Process.Pid)
	}
}
