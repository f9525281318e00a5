//go:build linux

package cluster

import (
	"net"
	"syscall"
)

// closedByPeer reports whether the other end closed c (or reset it) while
// it was idle: a peek at the socket that does not wait. A connection that
// has data waiting is not idle either and counts as closed, since it
// cannot carry a new request.
func closedByPeer(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	closed := false
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// EAGAIN: nothing to read, open. Otherwise an end of file (no
		// error, no byte), a reset, or bytes nobody asked for.
		closed = err != syscall.EAGAIN && err != syscall.EINTR
		return true
	})
	return closed || err != nil
}
