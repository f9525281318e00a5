//go:build linux

package httpedge

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// loopbackOwner is the uid owning the client end of a loopback TCP
// connection, and whether it was found. It asks the kernel for that one
// socket over a NETLINK_SOCK_DIAG socket (a hashed lookup of the exact
// four-tuple: microseconds); only where that fails does it read the whole
// socket tables (/proc/net/tcp and tcp6), whose cost grows with every
// socket of the machine: 3 ms of CPU per accepted connection with a
// thousand sockets open, which a client opening many connections would
// make the accept loop pay for each.
func loopbackOwner(local, remote *net.TCPAddr) (int, bool) {
	if uid, err := diagOwner(remote, local); err == nil {
		return uid, true
	} else if errors.Is(err, syscall.ENOENT) {
		return 0, false
	}
	// The client's end: its local address is our remote one.
	want := rowKeys(remote, local)
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if uid, ok := scanTable(table, want); ok {
			return uid, true
		}
	}
	return 0, false
}

// The inet_diag wire format (linux/inet_diag.h), fixed by the kernel's ABI.
const (
	diagSockIDLen  = 48 // struct inet_diag_sockid
	diagReqLen     = 8 + diagSockIDLen
	diagMsgUIDOff  = 4 + diagSockIDLen + 12 // struct inet_diag_msg's idiag_uid
	diagMsgMinLen  = diagMsgUIDOff + 8
	nlmsgHdrLen    = 16
	tcpEstablished = 1
)

// diagOwner asks the kernel which uid owns the TCP socket from src to dst:
// the IPv4 table for an IPv4 pair, then the IPv6 one (an IPv4-mapped pair
// of a dual-stack socket). ENOENT: no such socket.
func diagOwner(src, dst *net.TCPAddr) (int, error) {
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, syscall.NETLINK_INET_DIAG)
	if err != nil {
		return 0, err
	}
	defer syscall.Close(fd)
	// A reply that never comes must not hold the accept loop.
	tv := syscall.Timeval{Sec: 1}
	if err := syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv); err != nil {
		return 0, err
	}
	if err := syscall.Bind(fd, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return 0, err
	}
	var families []uint8
	if src.IP.To4() != nil && dst.IP.To4() != nil {
		families = append(families, syscall.AF_INET)
	}
	families = append(families, syscall.AF_INET6)
	err = syscall.ENOENT
	for _, fam := range families {
		var uid int
		if uid, err = diagQuery(fd, fam, src, dst); err == nil {
			return uid, nil
		}
		if !errors.Is(err, syscall.ENOENT) {
			return 0, err
		}
	}
	return 0, err
}

// diagQuery sends one SOCK_DIAG_BY_FAMILY request for the exact socket and
// reads the owner from its answer.
func diagQuery(fd int, family uint8, src, dst *net.TCPAddr) (int, error) {
	req := make([]byte, nlmsgHdrLen+diagReqLen)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], 20) // SOCK_DIAG_BY_FAMILY
	ne.PutUint16(req[6:], syscall.NLM_F_REQUEST)
	ne.PutUint32(req[8:], 1) // sequence
	r := req[nlmsgHdrLen:]
	r[0], r[1] = family, syscall.IPPROTO_TCP
	ne.PutUint32(r[4:], 1<<tcpEstablished|1<<2|1<<3) // established, syn-sent, syn-recv
	id := r[8:]
	binary.BigEndian.PutUint16(id[0:], uint16(src.Port))
	binary.BigEndian.PutUint16(id[2:], uint16(dst.Port))
	if family == syscall.AF_INET {
		copy(id[4:8], src.IP.To4())
		copy(id[20:24], dst.IP.To4())
	} else {
		copy(id[4:20], src.IP.To16())
		copy(id[20:36], dst.IP.To16())
	}
	// idiag_if 0; idiag_cookie INET_DIAG_NOCOOKIE: look the socket up by
	// its addresses alone.
	ne.PutUint32(id[40:], ^uint32(0))
	ne.PutUint32(id[44:], ^uint32(0))
	if err := syscall.Sendto(fd, req, 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return 0, err
	}
	buf := make([]byte, 4096)
	n, _, err := syscall.Recvfrom(fd, buf, 0)
	if err != nil {
		return 0, err
	}
	buf = buf[:n]
	if len(buf) < nlmsgHdrLen {
		return 0, fmt.Errorf("sock_diag: short answer of %d bytes", len(buf))
	}
	switch typ := ne.Uint16(buf[4:]); typ {
	case syscall.NLMSG_ERROR:
		if len(buf) < nlmsgHdrLen+4 {
			return 0, fmt.Errorf("sock_diag: short error")
		}
		if errno := -int32(ne.Uint32(buf[nlmsgHdrLen:])); errno != 0 {
			return 0, syscall.Errno(errno)
		}
		return 0, syscall.ENOENT
	case 20:
		msg := buf[nlmsgHdrLen:]
		if len(msg) < diagMsgMinLen {
			return 0, fmt.Errorf("sock_diag: short message of %d bytes", len(msg))
		}
		return int(ne.Uint32(msg[diagMsgUIDOff:])), nil
	default:
		return 0, fmt.Errorf("sock_diag: answer of type %d", typ)
	}
}

// rowKeys is the "local rem" address pair a socket table row shows for a
// socket from a to b, in both the IPv4 form and the IPv4-mapped IPv6 form.
func rowKeys(a, b *net.TCPAddr) []string {
	var keys []string
	if a4, b4 := a.IP.To4(), b.IP.To4(); a4 != nil && b4 != nil {
		keys = append(keys, hexAddr(a4, a.Port)+" "+hexAddr(b4, b.Port))
	}
	if a16, b16 := a.IP.To16(), b.IP.To16(); a16 != nil && b16 != nil {
		keys = append(keys, hexAddr(a16, a.Port)+" "+hexAddr(b16, b.Port))
	}
	return keys
}

// hexAddr is an address as the socket tables print it: each 32-bit word
// of the address in host byte order, in hex, then the port.
func hexAddr(ip net.IP, port int) string {
	var b strings.Builder
	for i := 0; i+4 <= len(ip); i += 4 {
		fmt.Fprintf(&b, "%08X", binary.NativeEndian.Uint32(ip[i:i+4]))
	}
	fmt.Fprintf(&b, ":%04X", port)
	return b.String()
}

func scanTable(path string, want []string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for _, w := range want {
		// Rows are "sl: local rem st ... uid ...": the pair is unique.
		i := bytes.Index(b, []byte(" "+w+" "))
		if i < 0 {
			continue
		}
		line := b[i:]
		if j := bytes.IndexByte(line, '\n'); j >= 0 {
			line = line[:j]
		}
		// local rem st tx:rx tr:when retrnsmt uid
		fields := strings.Fields(string(line))
		if len(fields) < 7 {
			return 0, false
		}
		uid, err := strconv.Atoi(fields[6])
		return uid, err == nil
	}
	return 0, false
}
