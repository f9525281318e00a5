//go:build linux

package httpedge

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// loopbackOwner is the uid owning the client end of a loopback TCP
// connection, read from the kernel's socket tables (/proc/net/tcp and
// tcp6: the row whose local address is the client's and whose remote
// address is the server's), and whether it was found.
func loopbackOwner(local, remote *net.TCPAddr) (int, bool) {
	// The client's end: its local address is our remote one.
	want := rowKeys(remote, local)
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if uid, ok := scanTable(table, want); ok {
			return uid, true
		}
	}
	return 0, false
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
