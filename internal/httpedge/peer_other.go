//go:build !linux

package httpedge

import "net"

// loopbackOwner is not known off Linux: loopback clients share the cap.
func loopbackOwner(local, remote *net.TCPAddr) (int, bool) { return 0, false }
