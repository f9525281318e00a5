//go:build linux

package cluster

import (
	"net"
	"syscall"
)

// peerCheck returns a check of whether the other end closed c (or reset
// it) while it was idle: a peek at the socket that does not wait. A
// connection that has data waiting is not idle either and counts as
// closed, since it cannot carry a new request. It is made once per
// connection, so that the check before each reuse allocates nothing; it
// is for whoever holds the connection, one caller at a time.
func peerCheck(c net.Conn) func() bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return neverClosed
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return func() bool { return true }
	}
	closed := false
	var b [1]byte
	peek := func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// EAGAIN: nothing to read, open. Otherwise an end of file (no
		// error, no byte), a reset, or bytes nobody asked for.
		closed = err != syscall.EAGAIN && err != syscall.EINTR
		return true
	}
	return func() bool {
		closed = false
		err := rc.Read(peek)
		return closed || err != nil
	}
}
