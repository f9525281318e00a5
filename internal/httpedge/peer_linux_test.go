//go:build linux

package httpedge

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// dialAs connects to addr from a socket owned by uid: the kernel records
// a socket's owner from the file-system uid of the thread that made it, so
// the test (root) makes it on a locked thread with that fsuid, the way a
// client process of that user would.
func dialAs(t *testing.T, uid int, addr string) net.Conn {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	prev, _, _ := syscall.RawSyscall(syscall.SYS_SETFSUID, uintptr(uid), 0, 0)
	c, err := net.DialTimeout("tcp", addr, hangGuard)
	syscall.RawSyscall(syscall.SYS_SETFSUID, prev, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root to make sockets owned by other users")
	}
}

// TestLoopbackOwner: the owner of a loopback client's socket is read from
// the kernel's tables, over IPv4 and IPv6.
func TestLoopbackOwner(t *testing.T) {
	needRoot(t)
	for _, network := range []string{"127.0.0.1:0", "[::1]:0"} {
		ln, err := net.Listen("tcp", network)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		accepted := make(chan net.Conn, 1)
		go func() {
			c, err := ln.Accept()
			if err == nil {
				accepted <- c
			}
			close(accepted)
		}()
		dialAs(t, 65534, ln.Addr().String())
		sc := <-accepted
		if sc == nil {
			t.Fatal("accept failed")
		}
		defer sc.Close()
		local, remote := sc.LocalAddr().(*net.TCPAddr), sc.RemoteAddr().(*net.TCPAddr)
		uid, ok := loopbackOwner(local, remote)
		if !ok || uid != 65534 {
			t.Fatalf("%s: owner %d %v, want 65534", network, uid, ok)
		}
		// The kernel's one-socket lookup answers it, not the table scan
		// (whose cost grows with every socket of the machine).
		if uid, err := diagOwner(remote, local); err != nil || uid != 65534 {
			t.Fatalf("%s: sock_diag owner %d, %v; want 65534", network, uid, err)
		}
		// No socket from the client's port to another port of the
		// server: not found, not a failure. (The kernel falls back to a
		// socket listening on the source address, and none listens on the
		// client's port.)
		gone := *local
		gone.Port = local.Port + 1
		if _, err := diagOwner(remote, &gone); !errors.Is(err, syscall.ENOENT) {
			t.Fatalf("%s: sock_diag of no socket: %v, want ENOENT", network, err)
		}
		if got := clientOf(sc); got != "uid 65534" {
			t.Fatalf("%s: counted under %q", network, got)
		}
	}
}

// TestLoopbackClientsAreCappedByUser is the local half of issue 21's
// connection lock-out: loopback clients used to be exempt from
// MaxConnsPerClient, so one local user could hold every slot with
// connections busy sending a body slowly (up to ReadTimeout, renewable)
// while others waited. Now another user's loopback connections count
// under its uid: busy at its cap, its next connection is answered 503
// naming the flag; a second user has a cap of its own, and the server's
// own user (root here) is not capped.
func TestLoopbackClientsAreCappedByUser(t *testing.T) {
	needRoot(t)
	g, addr := edgeServer(t, Edge{MaxConns: 16, MaxConnsPerClient: 3, Hints: map[string]string{SettingMaxConnsPerClient: "set by serve --max-conns-per-client"}})
	busy := func(c net.Conn) {
		t.Helper()
		// A body that never ends: the handler is reading it.
		if _, err := fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: %s\r\nContent-Length: 100\r\n\r\n{", addr); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		busy(dialAs(t, 65534, addr))
	}
	// The held count is taken at Accept, so wait for the three to be in.
	deadline := time.Now().Add(hangGuard)
	for n, _ := g.held(); n < 3; n, _ = g.held() {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections held", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	over := dialAs(t, 65534, addr)
	busy(over)
	_ = over.SetReadDeadline(time.Now().Add(hangGuard))
	resp, err := http.ReadResponse(bufio.NewReader(over), nil)
	if err != nil {
		t.Fatalf("the user's fourth connection got no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "--max-conns-per-client") {
		t.Fatalf("the user's fourth connection: %d %q", resp.StatusCode, body)
	}
	for range 3 {
		busy(dialAs(t, 65533, addr))
	}
	mine := dialHeld(t, addr)
	if err := mine.get(addr); err != nil {
		t.Fatalf("the server's own user beside two capped users: %v", err)
	}
	other := &heldConn{Conn: dialAs(t, 65533, addr)}
	other.br = bufio.NewReader(other.Conn)
	if err := other.get(addr); err == nil {
		t.Fatal("a second user got a fourth connection beside three busy ones")
	}
}

// TestLoopbackUserOverItsCapClosesNoOtherConnection: with the server's
// cap full, a local user at its own cap (its connection busy) is refused
// at once, and another user's idle connection, which a client within its
// cap could have had closed for it, is left alone: the listener used to
// make room under MaxConns first, closing it for a client it then
// refused.
func TestLoopbackUserOverItsCapClosesNoOtherConnection(t *testing.T) {
	needRoot(t)
	g, addr := edgeServer(t, Edge{MaxConns: 2, MaxConnsPerClient: 1, PressureIdleTimeout: time.Hour})
	busy := dialAs(t, 65534, addr)
	if _, err := fmt.Fprintf(busy, "POST / HTTP/1.1\r\nHost: %s\r\nContent-Length: 100\r\n\r\n{", addr); err != nil {
		t.Fatal(err)
	}
	other := &heldConn{Conn: dialAs(t, 65533, addr)}
	other.br = bufio.NewReader(other.Conn)
	if err := other.get(addr); err != nil {
		t.Fatal(err)
	}
	waitStats(t, g, "one connection busy and one idle", func(st ConnStats) bool {
		return st.Held == 2 && len(st.Quiet) == 1 && st.Quiet[0].Asked
	})
	over := dialAs(t, 65534, addr)
	_ = over.SetReadDeadline(time.Now().Add(hangGuard))
	resp, err := http.ReadResponse(bufio.NewReader(over), nil)
	if err != nil {
		t.Fatalf("the user's second connection got no answer: %v; %v", err, g.ConnStats())
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("the user's second connection: %d", resp.StatusCode)
	}
	if err := other.get(addr); err != nil {
		t.Fatalf("another user's idle connection was closed for a user over its cap: %v; %v", err, g.ConnStats())
	}
}

// BenchmarkLoopbackOwner: the owner of a loopback connection by the
// kernel's one-socket lookup and by reading the socket tables, with 500
// other loopback connections open (the table scan's cost grows with them).
func BenchmarkLoopbackOwner(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	var conns []net.Conn
	for range 500 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, c)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	c := conns[len(conns)-1]
	src, dst := c.LocalAddr().(*net.TCPAddr), c.RemoteAddr().(*net.TCPAddr)
	b.Run("sock_diag", func(b *testing.B) {
		for range b.N {
			if _, err := diagOwner(src, dst); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("tables", func(b *testing.B) {
		want := rowKeys(src, dst)
		for range b.N {
			if _, ok := scanTable("/proc/net/tcp", want); !ok {
				b.Fatal("not found")
			}
		}
	})
}
