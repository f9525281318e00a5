// Package natsserver runs a NATS server with JetStream inside the
// agentworld process, so that agentworld nodes form a cluster with nothing
// else installed. Importing it registers [Start] as
// [jetstore.StartServer]'s server: the agentworld binary does
// (cmd/agentworld/embed_nats.go, about 9.3 MB of it), and so do the tests
// that start one. Its servers elect a new RAFT leader within 1.5 to 3 s
// of the old one's death instead of nats-server's 4 to 9 s
// (raftclock.go).
package natsserver

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/agentworld/agentworld/internal/jetstore"
)

func init() {
	jetstore.RegisterServer(func(o jetstore.ServerOptions) (jetstore.Embedded, error) { return Start(o) })
}

// Server is a NATS server with JetStream running in this process. It
// takes no client connections from the network; [Server.Connect] connects
// in process.
type Server struct {
	s *server.Server
}

var (
	clockOnce sync.Once
	clockErr  error // why the RAFT clock kept nats-server's defaults
)

// SetRaftClock sets the RAFT clock of every nats-server of this process
// to the embedded servers' (raftclock.go), once, and says why it kept
// nats-server's own when it did. [Start] calls it; a test that starts
// nats-server's servers itself calls it first, so that every server of
// its process runs on one clock and none is running when it is set.
func SetRaftClock() error {
	clockOnce.Do(func() { clockErr = setRaftClock(fastRaft) })
	return clockErr
}

// Start starts an embedded NATS server with JetStream, syncing
// every write to disk (sync_interval: always) so that an acknowledged
// step survives a machine's crash, and waits until it accepts
// connections. The first call sets the RAFT clock of every embedded
// server of this process (raftclock.go).
func Start(o jetstore.ServerOptions) (*Server, error) {
	SetRaftClock()
	if o.Name == "" {
		return nil, errors.New("embedded NATS server: a name is required")
	}
	if o.StoreDir == "" {
		return nil, errors.New("embedded NATS server: a store directory is required")
	}
	opts := &server.Options{
		ServerName: o.Name, DontListen: true, NoSigs: true,
		JetStream: true, StoreDir: o.StoreDir, SyncAlways: true,
		MaxPayload: jetstore.MaxPayload,
	}
	if o.Listen != "" {
		host, port, err := net.SplitHostPort(o.Listen)
		if err != nil {
			return nil, fmt.Errorf("embedded NATS server: %w %q: %w", jetstore.ErrListen, o.Listen, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("embedded NATS server: %w %q: want a port from 1 to 65535", jetstore.ErrListen, o.Listen)
		}
		name := o.ClusterName
		if name == "" {
			name = jetstore.DefaultClusterName
		}
		opts.Cluster = server.ClusterOpts{Name: name, Host: host, Port: p}
		// Routing starts only once a client listener is up (the server's
		// start-up waits for it), so a clustered server takes clients on
		// a random loopback port, which only this process uses.
		opts.DontListen, opts.Host, opts.Port = false, "127.0.0.1", server.RANDOM_PORT
		for _, r := range o.Routes {
			r = strings.TrimSpace(r)
			if r == "" {
				continue
			}
			u, err := jetstore.ParseRoute(r)
			if err != nil {
				return nil, fmt.Errorf("embedded NATS server: %w", err)
			}
			opts.Routes = append(opts.Routes, u)
		}
	} else if len(o.Routes) > 0 {
		return nil, errors.New("embedded NATS server: routes need a listen address for the others' routes")
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded NATS server: %w", err)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// nats-server reports a listener it could not open (a port in use),
	// like a store it could not start, through its logger's Fatalf and
	// then never becomes ready; the logger passes that on at once instead
	// of a wait for readiness that only times out.
	fatal := make(chan fatalMsg, 1)
	s.SetLoggerV2(natsLog{l: log.With("nats", o.Name), fatal: fatal}, false, false, false)
	if clockErr != nil {
		log.Warn("embedded NATS server: RAFT timing", "err", clockErr)
	}
	s.Start()
	for end := time.Now().Add(readyTimeout); !s.ReadyForConnections(readyPoll); {
		select {
		case m := <-fatal:
			s.Shutdown()
			if o.Listen != "" && strings.HasPrefix(m.format, routeListenFatal) {
				return nil, fmt.Errorf("embedded NATS server: %w %q: %s", jetstore.ErrListen, o.Listen, m.msg)
			}
			return nil, fmt.Errorf("embedded NATS server: %s", m.msg)
		default:
		}
		if time.Now().After(end) {
			s.Shutdown()
			return nil, fmt.Errorf("embedded NATS server: not ready after %s", readyTimeout)
		}
	}
	return &Server{s: s}, nil
}

// routeListenFatal begins the format of nats-server's Fatalf when it
// cannot open the route listener (server/route.go); its other fatal
// errors (JetStream's store, the client listener on a loopback port of
// its own) are no fault of the listen address. TestStartFailsAtOnceOnBusyPort
// notices a nats-server that words it otherwise.
const routeListenFatal = "Error listening on router port"

// readyTimeout bounds Start's wait for the server, checked every
// readyPoll for a listener that failed.
const (
	readyTimeout = 30 * time.Second
	readyPoll    = 50 * time.Millisecond
)

// Connect opens an in-process connection that reconnects for as long as
// the server runs.
func (s *Server) Connect() (*nats.Conn, error) {
	nc, err := nats.Connect("", nats.InProcessServer(s.s), nats.MaxReconnects(-1), nats.Name("agentworld"))
	if err != nil {
		return nil, fmt.Errorf("connect to the embedded NATS server: %w", err)
	}
	return nc, nil
}

// Shutdown stops the server and waits for it.
func (s *Server) Shutdown() {
	s.s.Shutdown()
	s.s.WaitForShutdown()
}

// Servers is this server and the servers its routes are connected to
// (nats-server keys its routes by the remote server, so a pool of several
// connections to one counts once).
func (s *Server) Servers() int { return 1 + s.s.NumRemotes() }

// RouteAddrs are the remote addresses of this server's route connections
// (several to one server with a pool; an accepted one's port is the
// other side's own).
func (s *Server) RouteAddrs() []netip.AddrPort {
	rz, err := s.s.Routez(nil)
	if err != nil {
		return nil
	}
	var addrs []netip.AddrPort
	for _, r := range rz.Routes {
		ip, err := netip.ParseAddr(r.IP)
		if err == nil && r.Port > 0 && r.Port < 65536 {
			addrs = append(addrs, netip.AddrPortFrom(ip.Unmap(), uint16(r.Port)))
		}
	}
	return addrs
}

// natsLog passes the server's warnings and errors to a slog.Logger, and
// of its notices those about RAFT leaders at info level: a stream that
// elects a new leader after a node died holds its sessions until then,
// so the log says when that happened and where.
// Fatalf is passed on to fatal too (when there is room), for Start.
type natsLog struct {
	l     *slog.Logger
	fatal chan<- fatalMsg
}

// fatalMsg is a Fatalf's format and message.
type fatalMsg struct{ format, msg string }

func (n natsLog) Noticef(f string, a ...any) {
	if strings.Contains(f, "leader") {
		n.l.Info(fmt.Sprintf(f, a...))
	}
}
func (n natsLog) Debugf(string, ...any)     {}
func (n natsLog) Tracef(string, ...any)     {}
func (n natsLog) Warnf(f string, a ...any)  { n.l.Warn(fmt.Sprintf(f, a...)) }
func (n natsLog) Errorf(f string, a ...any) { n.l.Error(fmt.Sprintf(f, a...)) }
func (n natsLog) Fatalf(f string, a ...any) {
	msg := fmt.Sprintf(f, a...)
	n.l.Error(msg)
	select {
	case n.fatal <- fatalMsg{f, msg}:
	default:
	}
}
