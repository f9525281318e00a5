// Package httpedge is the edge of agentworld's HTTP servers (serve and
// reward serve): the checks a request passes before any handler sees it,
// and the bounds on the connection it arrives on. A [Guard] built from an
// [Edge] admits a request only when its Host names this server (DNS
// rebinding), its Origin is this server's or an allowed one (CSRF), its
// bearer token matches, a state-changing body is JSON, and the declared
// body fits, all before one body byte is read; then it reads the body
// within the read timeout. [Guard.Listen] and [Guard.HTTPServer] hold
// connections to the edge's count and timeouts, and [ResponseWriter]
// gives each write its own deadline so a long step is not cut while a
// client that stops reading is.
//
// Refusals come back as a [Refusal] for each server to write in its own
// error format. Messages name request headers and the server's settings
// (Edge field names such as AllowedHosts), never command-line flags; a
// command maps settings to its flags through [Edge.Hints].
package httpedge

import (
	"time"
)

// Defaults of the zero [Edge] and [Options] fields.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = time.Minute
	DefaultWriteTimeout      = time.Minute
	DefaultIdleTimeout       = 2 * time.Minute
	DefaultWebSocketIdle     = 30 * time.Minute
	DefaultMaxConns          = 1024
	// DefaultPressureIdleTimeout is Edge.PressureIdleTimeout's default.
	DefaultPressureIdleTimeout = 5 * time.Second
	DefaultMaxBodyBytes        = 8 << 20
)

// Settings a refusal can name (the [Edge] fields that would admit it),
// for [Edge.Hints].
const (
	SettingAllowedHosts   = "AllowedHosts"
	SettingAllowedOrigins = "AllowedOrigins"
	// SettingMaxConnsPerClient names Edge.MaxConnsPerClient.
	SettingMaxConnsPerClient = "MaxConnsPerClient"
)

// Edge bounds what reaches the handlers: which Host and Origin headers are
// served, how long a client may take over a request, and how many
// connections are held at once. The zero value of every field is the safe
// default; a deployment behind a reverse proxy widens AllowedHosts (and
// AllowedOrigins for browser front ends).
type Edge struct {
	// AllowedHosts are Host header values served beside the loopback names
	// (localhost, 127.0.0.0/8, [::1], any port) and the address the
	// listener is bound to: "name" allows any port, "name:port" that port
	// only, "*" any Host (for a proxy that checks Host itself; it turns
	// DNS-rebinding protection off). nil allows only the defaults, which
	// is what stops DNS rebinding (a page whose own name resolves to this
	// server).
	AllowedHosts []string
	// AllowedOrigins are browser origins ("https://app.example:8443")
	// whose requests are served; "*" allows any. A request without an
	// Origin header (every non-browser client) is never refused for it,
	// and a page served from this server's own Host is same-origin. nil
	// allows no other origin, so a web page cannot drive the server.
	AllowedOrigins []string
	// ReadHeaderTimeout bounds reading a request's headers; 0 means 10s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, headers and body, before
	// the handler runs; 0 means 60s. Handlers are not bound by it: the
	// body is read by [Guard.Admit], which then lifts the read deadline.
	ReadTimeout time.Duration
	// WriteTimeout bounds each write of a response to the client (not the
	// time a handler takes to think: every write gets at least 7/8 of it
	// from the moment it starts, see [ResponseWriter]); 0 means 60s.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that sends no next request
	// for this long; 0 means 2 minutes.
	IdleTimeout time.Duration
	// WebSocketIdle closes a WebSocket that sends no message for this long,
	// for servers that hold WebSockets (serve's /ws; the edge itself does
	// not see WebSocket messages); 0 means 30 minutes.
	WebSocketIdle time.Duration
	// MaxConns caps the connections held at once; 0 means 1024, negative
	// means no cap. Only work fills it: when a new client finds it full,
	// the connection idle longest (a keep-alive connection between
	// requests, or one that has sent nothing for a second since it
	// connected; then a WebSocket waiting for its client for
	// PressureIdleTimeout, see [Waiting]) is closed to make room; only
	// when every connection is busy does the client wait (in the listen
	// backlog) for one to end.
	MaxConns int
	// MaxConnsPerClient caps the connections one client holds: a remote
	// IP address, or on loopback the user owning the client's socket (on
	// Linux; the server's own user and root are not capped: they can stop
	// the server anyway, and a local proxy or trainer of the operator's
	// runs as one of them); 0 means half of MaxConns (none when MaxConns
	// is negative), negative means no cap. A client at its cap has its own
	// idle connection (or waiting WebSocket, see [Waiting]) closed for a
	// new one; with none, the new one is answered 503 and closed at once,
	// before any other client's connection is closed to make room under
	// MaxConns. Clients behind one proxy or NAT share one cap.
	MaxConnsPerClient int
	// PressureIdleTimeout replaces IdleTimeout while the held connections
	// reach three quarters of MaxConns: idle connections older than it
	// are closed as new ones arrive. 0 means 5s.
	PressureIdleTimeout time.Duration
	// Hints maps a setting (a field name of Edge, e.g. "AllowedHosts", or
	// of the options of the server behind it) to how its operator changes
	// it, e.g. "serve --allowed-hosts"; a message about a refusal that
	// setting decided ends with the hint (see [Edge.WithHint]). nil, or a
	// setting without an entry, adds nothing.
	Hints map[string]string
}

// WithDefaults returns e with its zero fields filled.
func (e Edge) WithDefaults() Edge {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&e.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	def(&e.ReadTimeout, DefaultReadTimeout)
	def(&e.WriteTimeout, DefaultWriteTimeout)
	def(&e.IdleTimeout, DefaultIdleTimeout)
	def(&e.WebSocketIdle, DefaultWebSocketIdle)
	def(&e.PressureIdleTimeout, DefaultPressureIdleTimeout)
	if e.MaxConns == 0 {
		e.MaxConns = DefaultMaxConns
	}
	if e.MaxConnsPerClient == 0 {
		e.MaxConnsPerClient = max(e.MaxConns/2, 1)
		if e.MaxConns < 0 {
			e.MaxConnsPerClient = -1
		}
	}
	return e
}

// Validate reports an allowed host or origin that cannot be parsed.
func (e Edge) Validate() error {
	_, err := newHostPolicy(e)
	return err
}

// WithHint returns msg followed by the hint of setting in parentheses, or
// msg alone when Hints has none for it.
func (e Edge) WithHint(msg, setting string) string {
	if h := e.Hints[setting]; h != "" && setting != "" {
		return msg + " (" + h + ")"
	}
	return msg
}
