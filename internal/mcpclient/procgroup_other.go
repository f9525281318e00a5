//go:build !unix

package mcpclient

import "os/exec"

// ownProcessGroup does nothing where there are no Unix process groups.
func ownProcessGroup(*exec.Cmd) {}

// killGroup kills the server itself; without process groups, what it
// started is left to the operating system.
func (s *Session) killGroup() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
	}
}
