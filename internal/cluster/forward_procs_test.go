//go:build linux

package cluster

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentworld/agentworld/internal/jetstore"
	"github.com/agentworld/agentworld/internal/natsserver"
	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/testkit/natstest"
)

// BenchmarkForwardProcesses measures what a forward costs between
// processes, where BenchmarkForward's single process hides the wake-ups
// of a second one: an owner process answers step-sized requests, a front
// process forwards them to it, and the benchmark's clients (in this
// process, not counted) send them. cpu_us/op is the two children's CPU
// per request from /proc (owner_us/op and front_us/op apart); "direct"
// sends the requests to the owner itself, so the difference to it is
// what the forward costs. Ways to forward:
//
//   - forwarder: this package's HTTP/1.1 forwarder (what a node uses);
//   - h2c: net/http's unencrypted HTTP/2 between the two (one connection
//     carrying every request), through ReverseProxy with an HTTP/2-only
//     Transport;
//   - nats: the request's HTTP/1.1 bytes as a NATS request to a subject
//     the owner serves, over two embedded NATS servers joined by a route
//     (each process's connection to its own server in process, as a
//     node's is), the owner answering from a goroutine per request;
//   - mux: a minimal multiplexed framing, the prototype of a peer
//     protocol: one TCP connection, requests and answers as HTTP/1.1
//     bytes in frames of [length][id], a reader goroutine on each side
//     handing each answer to its waiting handler, a goroutine per request
//     on the owner.
//
// nats and mux answer on the owner through a recorder rather than
// net/http's server, which flatters them. Two loads: "busy" (64 clients,
// an owner answering at once: both processes rarely sleep) and "light"
// (16 clients, an owner taking 2 ms: a cluster whose store waits for its
// disk, each forward waking both processes).
//
//	go test ./internal/cluster -run '^$' -bench ForwardProcesses -benchtime 20000x
func BenchmarkForwardProcesses(b *testing.B) {
	for _, load := range []struct {
		name    string
		clients int
		delay   time.Duration
	}{{"busy", 64, 0}, {"light", 16, 2 * time.Millisecond}} {
		for _, mode := range []string{"direct", "forwarder", "h2c", "nats", "mux"} {
			b.Run(load.name+"/"+mode, func(b *testing.B) {
				ports := natstest.FreePorts(b, 2)
				env := []string{"FWDPROC_MODE=" + mode, "FWDPROC_DELAY=" + load.delay.String(),
					fmt.Sprintf("FWDPROC_ROUTES=127.0.0.1:%d,127.0.0.1:%d", ports[0], ports[1])}
				owner, oaddr := startProcess(b, "TestForwardProcessesOwner", env...)
				pids, addr := []int{owner}, oaddr[0]
				if mode != "direct" {
					front, faddr := startProcess(b, "TestForwardProcessesFront",
						append(env, "FWDPROC_OWNER="+oaddr[0], "FWDPROC_PEER="+oaddr[1])...)
					pids, addr = append(pids, front), faddr[0]
				}
				processSteps(b, "http://"+addr+"/v1/sessions/s1/step", load.clients, pids)
			})
		}
	}
}

// TestForwardProcessesOwner is BenchmarkForwardProcesses's owner: it
// prints "ADDR http-address peer-address" and serves until killed.
func TestForwardProcessesOwner(t *testing.T) {
	mode := testkit.ChildEnv(t, "FWDPROC_MODE", "BenchmarkForwardProcesses")
	delay, err := time.ParseDuration(os.Getenv("FWDPROC_DELAY"))
	if err != nil {
		t.Fatal(err)
	}
	answer := bytes.Repeat([]byte("x"), 1500)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if delay > 0 {
			time.Sleep(delay)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	})
	srv := &http.Server{Handler: h}
	if mode == "h2c" {
		srv.Protocols = new(http.Protocols)
		srv.Protocols.SetHTTP1(true)
		srv.Protocols.SetUnencryptedHTTP2(true)
	}
	peer := "-"
	switch mode {
	case "nats":
		nc := routedNATS(t, 0)
		if _, err := nc.Subscribe("fwd.owner", func(m *nats.Msg) {
			go func() {
				if out, err := serveRaw(h, m.Data); err == nil {
					_ = m.Respond(out)
				}
			}()
		}); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	case "mux":
		ln := listenLoopback(t)
		go muxServe(ln, h)
		peer = ln.Addr().String()
	}
	ln := listenLoopback(t)
	go func() { _ = srv.Serve(ln) }()
	fmt.Printf("ADDR %s %s\n", ln.Addr(), peer)
	select {}
}

// TestForwardProcessesFront is BenchmarkForwardProcesses's forwarding
// node: it prints "ADDR http-address -" once it can reach the owner and
// serves until killed.
func TestForwardProcessesFront(t *testing.T) {
	mode := testkit.ChildEnv(t, "FWDPROC_MODE", "BenchmarkForwardProcesses")
	owner := "http://" + os.Getenv("FWDPROC_OWNER")
	var send func(raw []byte) ([]byte, error) // nats and mux
	var h http.Handler
	switch mode {
	case "forwarder", "h2c":
		var opts *Options
		if mode == "h2c" {
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.Protocols = new(http.Protocols)
			tr.Protocols.SetUnencryptedHTTP2(true)
			opts = &Options{Transport: tr}
		}
		r := New(&owners{self: "me", leases: map[string]jetstore.Lease{"s1": lease("a", owner, "model", 3, true)}}, opts)
		h = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if handled, err := r.Route(w, req, "s1"); err != nil || !handled {
				http.Error(w, "not forwarded: "+errString(err), http.StatusBadGateway)
			}
		})
	case "nats":
		nc := routedNATS(t, 1)
		send = func(raw []byte) ([]byte, error) {
			m, err := nc.Request("fwd.owner", raw, hang)
			if err != nil {
				return nil, err
			}
			return m.Data, nil
		}
		// the owner's subscription reaches this server over the route
		for deadline := time.Now().Add(hang); ; {
			_, err := nc.Request("fwd.owner", []byte("GET / HTTP/1.1\r\nHost: owner\r\n\r\n"), time.Second)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
		}
	case "mux":
		m, err := dialMux(os.Getenv("FWDPROC_PEER"))
		if err != nil {
			t.Fatal(err)
		}
		send = m.do
	}
	if send != nil {
		h = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			body, _ := io.ReadAll(req.Body)
			var raw bytes.Buffer
			bw := bufio.NewWriter(&raw)
			if err := writeRequest(bw, req, body, "me"); err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			out, err := send(raw.Bytes())
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(out)), req)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			for k, v := range resp.Header {
				w.Header()[k] = v
			}
			w.WriteHeader(resp.StatusCode)
			_, _ = io.Copy(w, resp.Body)
		})
	}
	ln := listenLoopback(t)
	go func() { _ = (&http.Server{Handler: h}).Serve(ln) }()
	fmt.Printf("ADDR %s -\n", ln.Addr())
	select {}
}

// routedNATS starts embedded NATS server i of the two FWDPROC_ROUTES
// and connects to it in process.
func routedNATS(t *testing.T, i int) *nats.Conn {
	routes := strings.Split(os.Getenv("FWDPROC_ROUTES"), ",")
	s, err := natsserver.Start(jetstore.ServerOptions{Name: "n" + strconv.Itoa(i), StoreDir: t.TempDir(),
		Listen: routes[i], Routes: []string{"nats://" + routes[0], "nats://" + routes[1]}})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := s.Connect()
	if err != nil {
		t.Fatal(err)
	}
	return nc
}

// serveRaw serves the HTTP/1.1 request raw with h and returns the answer
// as HTTP/1.1 bytes.
func serveRaw(h http.Handler, raw []byte) ([]byte, error) {
	req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
	if err != nil {
		return nil, err
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	resp := rec.Result()
	resp.ContentLength = int64(rec.Body.Len())
	var out bytes.Buffer
	err = resp.Write(&out)
	return out.Bytes(), err
}

// maxFrame bounds the mux prototype's frames.
const maxFrame = maxForwardBody + 64<<10

func readFrame(br *bufio.Reader) (uint32, []byte, error) {
	var hd [8]byte
	if _, err := io.ReadFull(br, hd[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hd[:4])
	if n > maxFrame {
		return 0, nil, errors.New("frame too large")
	}
	p := make([]byte, n)
	_, err := io.ReadFull(br, p)
	return binary.BigEndian.Uint32(hd[4:]), p, err
}

func writeFrame(bw *bufio.Writer, id uint32, p []byte) error {
	var hd [8]byte
	binary.BigEndian.PutUint32(hd[:4], uint32(len(p)))
	binary.BigEndian.PutUint32(hd[4:], id)
	_, _ = bw.Write(hd[:])
	_, _ = bw.Write(p)
	return bw.Flush()
}

// muxServe is the mux prototype's owner end: each frame a request served
// on its own goroutine, answers written under one lock.
func muxServe(ln net.Listener, h http.Handler) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			br, bw := bufio.NewReaderSize(c, 64<<10), bufio.NewWriterSize(c, 64<<10)
			var wmu sync.Mutex
			for {
				id, raw, err := readFrame(br)
				if err != nil {
					return
				}
				go func() {
					out, err := serveRaw(h, raw)
					if err != nil {
						c.Close()
						return
					}
					wmu.Lock()
					defer wmu.Unlock()
					if writeFrame(bw, id, out) != nil {
						c.Close()
					}
				}()
			}
		}()
	}
}

// muxConn is the mux prototype's forwarding end.
type muxConn struct {
	wmu     sync.Mutex
	bw      *bufio.Writer
	mu      sync.Mutex
	next    uint32
	waiting map[uint32]chan []byte
}

func dialMux(addr string) (*muxConn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	m := &muxConn{bw: bufio.NewWriterSize(c, 64<<10), waiting: map[uint32]chan []byte{}}
	go func() {
		br := bufio.NewReaderSize(c, 64<<10)
		for {
			id, out, err := readFrame(br)
			if err != nil {
				panic(err) // the benchmark's owner does not go away
			}
			m.mu.Lock()
			ch := m.waiting[id]
			delete(m.waiting, id)
			m.mu.Unlock()
			ch <- out
		}
	}()
	return m, nil
}

func (m *muxConn) do(raw []byte) ([]byte, error) {
	ch := make(chan []byte, 1)
	m.mu.Lock()
	m.next++
	id := m.next
	m.waiting[id] = ch
	m.mu.Unlock()
	m.wmu.Lock()
	err := writeFrame(m.bw, id, raw)
	m.wmu.Unlock()
	if err != nil {
		return nil, err
	}
	return <-ch, nil
}

func listenLoopback(t testing.TB) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// startProcess starts child test, waits for its ADDR line and returns
// its pid and the addresses on it.
func startProcess(b *testing.B, test string, env ...string) (int, []string) {
	cmd := testkit.Child(test, env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	testkit.StartChild(b, cmd)
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "ADDR" {
			go func() { _, _ = io.Copy(io.Discard, out) }()
			return cmd.Process.Pid, f[1:]
		}
	}
	b.Fatalf("%s printed no address", test)
	return 0, nil
}

// processCPU is process pid's user and system time so far.
func processCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	utime, _ := strconv.Atoi(f[11])
	stime, _ := strconv.Atoi(f[12])
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ on Linux
}

// processSteps sends b.N step requests to url from clients clients after
// a warm-up and reports the CPU per request of the processes pids (the
// owner first).
func processSteps(b *testing.B, url string, clients int, pids []int) {
	run := stepSender(b, url, clients)
	run(50 * clients) // connections open, both runtimes warm
	cpu := make([]time.Duration, len(pids))
	for i, p := range pids {
		cpu[i] = processCPU(b, p)
	}
	b.ResetTimer()
	run(b.N)
	b.StopTimer()
	var total time.Duration
	for i, p := range pids {
		d := processCPU(b, p) - cpu[i]
		total += d
		b.ReportMetric(float64(d.Microseconds())/float64(b.N), []string{"owner_us/op", "front_us/op"}[i])
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N), "cpu_us/op")
}
