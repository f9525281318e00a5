package mcpworld

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/perturb"
	"github.com/agentworld/agentworld/internal/world"
)

// Simulator is what the facade needs of the session manager: one simulator
// session per MCP session, one step per tools/call.
type Simulator interface {
	// Open starts a session of the named world and returns its id.
	Open(ctx context.Context, world string, o SessionOptions) (string, error)
	// Step runs one action (the canonical tool-call text) in a session.
	Step(ctx context.Context, session, action string) (*StepOutcome, error)
	// Close ends a session; its transcript stays readable.
	Close(ctx context.Context, session string) error
}

// SessionOptions are per-session settings an MCP client may pick (over
// HTTP as query parameters of the endpoint URL).
type SessionOptions struct {
	// Seed seeds the session (perturbation draws, sampling); nil means none.
	Seed *int64
	// Params are per-session settings passed to the simulator, e.g.
	// "perturbations" overriding the spec's rules.
	Params map[string]json.RawMessage
	// Labels are recorded with the session.
	Labels map[string]string
	// ID names the simulator session; "" lets the simulator pick one.
	ID string
}

// StepOutcome is what the facade needs of a step's result.
type StepOutcome struct {
	Observation string
	// Fault is the direct fault a perturbation rule answered the step with;
	// nil for a simulated (or replayed) observation.
	Fault      *perturb.Fault
	Terminated bool
	Truncated  bool
	// Error explains an observation that is not a clean answer.
	Error string
	// Reward is the step's reward and RewardComponents its parts (a world
	// spec's reward rules, a real task's check); none when nothing scored
	// the step.
	Reward           float64
	RewardComponents map[string]float64
}

// Keys of the reward in a tool result's _meta, for clients that train on
// the world (an MCP tool result has no reward field of its own).
const (
	MetaReward           = "agentworld/reward"
	MetaRewardComponents = "agentworld/reward_components"
)

// ErrNotServable is returned for a world whose domain has no MCP form.
var ErrNotServable = errors.New("world cannot be served over MCP")

// Options tunes a Facade; nil means defaults.
type Options struct {
	// Version is reported as the server version; "" means "dev".
	Version string
	// SessionTimeout closes an idle streamable-HTTP MCP session (and its
	// simulator session); zero means 30 minutes.
	SessionTimeout time.Duration
	// HostChecked says the server in front checks the Host header against
	// its own allow-list, so the MCP SDK's built-in check (a loopback
	// connection must name a loopback Host) is left off and an operator's
	// allowed names reach /mcp too. false keeps the SDK's check.
	HostChecked bool
	// SessionIDs makes an MCP session's Mcp-Session-Id the id of its
	// simulator session, opened during initialize (not at the initialized
	// notification), so that a cluster's nodes find the session's owner
	// from the header of any request and forward it there. false opens
	// the simulator session at initialized under an id of its own.
	SessionIDs bool
	// Logger receives facade logs; nil discards them.
	Logger *slog.Logger
}

// Facade serves simulated worlds as MCP servers.
type Facade struct {
	sim    Simulator
	opts   Options
	log    *slog.Logger
	worlds map[string]*served

	mu     sync.Mutex
	closed bool
	live   map[*mcp.ServerSession]struct{}
	// byID are the live sessions bound to a simulator session, by MCP
	// session id; resumed are those this node took over (see resume.go).
	byID    map[string]*mcp.ServerSession
	resumed map[string]*resumedSession
	// resumeMu makes one resumption of a session at a time.
	resumeMu sync.Mutex
	wg       sync.WaitGroup
	handler  *mcp.StreamableHTTPHandler
}

type served struct {
	spec       *world.Spec
	tools      []world.Tool
	validators map[string]*Validator
	// schemas are the tools' compiled output schemas.
	schemas *Schemas
}

// legacyVersions are the protocol versions with sessions (initialize
// handshake). A simulated environment is stateful, so the facade does not
// offer the sessionless 2026-07-28 protocol: clients fall back to initialize.
func legacyVersions() []string {
	var out []string
	for _, v := range mcp.SupportedProtocolVersions() {
		if v < "2026-07-28" {
			out = append(out, v)
		}
	}
	return out
}

// NewFacade prepares MCP servers for specs of the MCP, Search and SWE
// domains. Search and SWE worlds without tool definitions get the
// domain's standard tools (see DefaultTools).
func NewFacade(sim Simulator, specs []*world.Spec, opts *Options) (*Facade, error) {
	f := &Facade{sim: sim, worlds: map[string]*served{}, live: map[*mcp.ServerSession]struct{}{},
		byID: map[string]*mcp.ServerSession{}, resumed: map[string]*resumedSession{}}
	if opts != nil {
		f.opts = *opts
	}
	if f.opts.Version == "" {
		f.opts.Version = "dev"
	}
	if f.opts.SessionTimeout == 0 {
		f.opts.SessionTimeout = 30 * time.Minute
	}
	f.log = f.opts.Logger
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	for _, s := range specs {
		sv, err := newServed(s)
		if err != nil {
			return nil, err
		}
		f.worlds[s.Name] = sv
	}
	f.handler = mcp.NewStreamableHTTPHandler(f.serverForRequest, &mcp.StreamableHTTPOptions{
		SessionTimeout:             f.opts.SessionTimeout,
		DisableLocalhostProtection: f.opts.HostChecked,
		Logger:                     f.log,
	})
	return f, nil
}

// Servable reports whether a world can be served over MCP (an error
// wrapping ErrNotServable says why not).
func Servable(s *world.Spec) error {
	_, err := newServed(s)
	return err
}

func newServed(s *world.Spec) (*served, error) {
	tools := s.ActionSpace.Tools
	switch s.Domain {
	case domain.MCP:
		if len(tools) == 0 {
			return nil, fmt.Errorf("world %s: %w: an MCP world needs tool definitions", s.Name, ErrNotServable)
		}
	case domain.Search, domain.SWE:
		if len(tools) == 0 {
			tools = DefaultTools(s.Domain)
		}
	default:
		return nil, fmt.Errorf("world %s: %w: domain %s has no tool calls (MCP, search and swe worlds do)", s.Name, ErrNotServable, s.Domain)
	}
	sv := &served{spec: s, tools: tools, validators: map[string]*Validator{}, schemas: &Schemas{}}
	for _, t := range tools {
		if len(t.InputSchema) > 0 {
			var m map[string]any
			if err := json.Unmarshal(t.InputSchema, &m); err != nil || m["type"] != "object" {
				return nil, fmt.Errorf("world %s tool %s: %w: the input schema must be a JSON object schema of type \"object\"", s.Name, t.Name, ErrNotServable)
			}
		}
		sv.validators[t.Name] = NewValidator(t.InputSchema)
	}
	return sv, nil
}

// DefaultTools are the standard tools of a Search world (search,
// open_page) and a SWE world (shell, read_file, write_file, edit_file).
func DefaultTools(d domain.Domain) []world.Tool {
	obj := func(props string, required ...string) json.RawMessage {
		req, _ := json.Marshal(required)
		return json.RawMessage(`{"type":"object","properties":{` + props + `},"required":` + string(req) + `}`)
	}
	switch d {
	case domain.Search:
		return []world.Tool{
			{Name: "search", Description: "Search the web; returns ranked results with URL, title and snippet.",
				InputSchema: obj(`"query":{"type":"string","description":"search terms"},"num_results":{"type":"integer","description":"how many results (default 10)"}`, "query")},
			{Name: "open_page", Description: "Fetch a web page and return its text.",
				InputSchema: obj(`"url":{"type":"string","description":"absolute URL"}`, "url")},
		}
	case domain.SWE:
		return []world.Tool{
			{Name: "shell", Description: "Run a shell command in the repository; returns stdout, stderr and the exit code.",
				InputSchema: obj(`"command":{"type":"string"},"timeout":{"type":"integer","description":"seconds"}`, "command")},
			{Name: "read_file", Description: "Read a file of the repository.",
				InputSchema: obj(`"path":{"type":"string"},"start_line":{"type":"integer"},"end_line":{"type":"integer"}`, "path")},
			{Name: "write_file", Description: "Create or overwrite a file.",
				InputSchema: obj(`"path":{"type":"string"},"content":{"type":"string"}`, "path", "content")},
			{Name: "edit_file", Description: "Replace one exact occurrence of old_string with new_string in a file.",
				InputSchema: obj(`"path":{"type":"string"},"old_string":{"type":"string"},"new_string":{"type":"string"}`, "path", "old_string", "new_string")},
		}
	}
	return nil
}

// Worlds lists the servable world names.
func (f *Facade) Worlds() []string {
	out := make([]string, 0, len(f.worlds))
	for n := range f.worlds {
		out = append(out, n)
	}
	return out
}

// binding ties one MCP session to its simulator session.
type binding struct {
	f     *Facade
	world *served
	so    SessionOptions

	mu  sync.Mutex
	sim string
}

// Server builds an MCP server for one session of a world: tools/list
// answers the world's tools and every tools/call is a step of the
// simulator session opened at initialization.
func (f *Facade) Server(worldName string, so SessionOptions) (*mcp.Server, error) {
	srv, _, err := f.server(worldName, so)
	return srv, err
}

// server is Server with the session's binding.
func (f *Facade) server(worldName string, so SessionOptions) (*mcp.Server, *binding, error) {
	sv, ok := f.worlds[worldName]
	if !ok {
		return nil, nil, fmt.Errorf("unknown MCP world %q", worldName)
	}
	b := &binding{f: f, world: sv, so: so}
	instr := sv.spec.Description
	if instr == "" {
		instr = firstLine(sv.spec.TaskDescription)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: sv.spec.Name, Version: f.opts.Version}, &mcp.ServerOptions{
		Instructions:              instr,
		Logger:                    f.log,
		Capabilities:              &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
		SupportedProtocolVersions: legacyVersions(),
		InitializedHandler: func(ctx context.Context, req *mcp.InitializedRequest) {
			if _, err := b.session(ctx, req.Session); err != nil {
				f.log.Warn("open simulator session", "world", worldName, "err", err)
			}
		},
	})
	if f.opts.SessionIDs {
		// The session exists before initialize answers with its id, so
		// any node a client's next request reaches can find its owner.
		srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if ss, ok := req.GetSession().(*mcp.ServerSession); ok && method == "initialize" && ss.ID() != "" {
					if _, err := b.session(ctx, ss); err != nil {
						return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "cannot open a simulator session: " + err.Error()}
					}
				}
				return next(ctx, method, req)
			}
		})
	}
	for _, t := range sv.tools {
		srv.AddTool(ToolToMCP(t), b.call(t))
	}
	return srv, b, nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// session returns the simulator session of this MCP session, opening it
// on first use, and closes it when the MCP session ends.
func (b *binding) session(ctx context.Context, ss *mcp.ServerSession) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sim != "" {
		return b.sim, nil
	}
	f := b.f
	// The open is counted in wg under the same lock that checks closed, so
	// Close (which sets closed under that lock before it waits) waits for
	// an open already under way, and none starts after it.
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return "", errFacadeClosed
	}
	f.wg.Add(1)
	f.mu.Unlock()
	so := b.so
	so.Labels = withLabel(so.Labels, "transport", "mcp")
	if f.opts.SessionIDs {
		so.ID = ss.ID()
	}
	id, err := f.sim.Open(ctx, b.world.spec.Name, so)
	if err != nil {
		f.wg.Done()
		return "", err
	}
	f.mu.Lock()
	if f.closed {
		// Close ran while the session opened and could not see it: close
		// it here rather than leave it open past Close.
		f.mu.Unlock()
		f.closeSim(id)
		f.wg.Done()
		return "", errFacadeClosed
	}
	f.bindLocked(b, ss, id, nil)
	f.mu.Unlock()
	f.log.Info("MCP session bound", "world", b.world.spec.Name, "session", id, "mcp_session", ss.ID())
	return id, nil
}

// bindLocked makes id the simulator session of b's MCP session ss, which
// closes it when it ends (then closes done, when not nil); the caller
// holds f.mu and has counted the session in f.wg.
func (f *Facade) bindLocked(b *binding, ss *mcp.ServerSession, id string, done chan struct{}) {
	f.live[ss] = struct{}{}
	if ss.ID() != "" {
		f.byID[ss.ID()] = ss
	}
	b.sim = id
	go func() {
		defer f.wg.Done()
		_ = ss.Wait()
		f.closeSim(id)
		f.mu.Lock()
		delete(f.live, ss)
		if f.byID[ss.ID()] == ss {
			delete(f.byID, ss.ID())
		}
		delete(f.resumed, ss.ID())
		f.mu.Unlock()
		if done != nil {
			close(done)
		}
	}()
}

// errFacadeClosed refuses sessions once Close has begun.
var errFacadeClosed = errors.New("MCP facade is shutting down")

// closeSim closes a simulator session, bounded so a stuck simulator cannot
// hold Close forever.
func (f *Facade) closeSim(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.sim.Close(ctx, id); err != nil {
		f.log.Warn("close simulator session", "session", id, "err", err)
	}
}

func withLabel(m map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for a, b := range m {
		out[a] = b
	}
	out[k] = v
	return out
}

// call is the tools/call handler of one tool.
func (b *binding) call(t world.Tool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args := req.Params.Arguments
		if issue := b.world.validators[t.Name].Check(args); issue != "" {
			return ValidationFailure(t.Name, issue), nil
		}
		action, err := conversation.RenderToolCall(t.Name, args)
		if err != nil {
			return ValidationFailure(t.Name, "Invalid input: arguments are not valid JSON"), nil
		}
		id, err := b.session(ctx, req.Session)
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "cannot open a simulator session: " + err.Error()}
		}
		out, err := b.f.sim.Step(ctx, id, action)
		if err != nil {
			b.f.log.Warn("simulated tool call failed", "world", b.world.spec.Name, "session", id, "tool", t.Name, "err", err)
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "simulation step failed: " + err.Error()}
		}
		if out.Fault != nil {
			return faultReply(out.Fault)
		}
		r := ParseObservation(out.Observation, t, b.world.schemas)
		if r.RPC != nil {
			return nil, r.RPC
		}
		if r.StructuredDropped {
			b.f.log.Debug("observation did not match the output schema; sent as text", "tool", t.Name, "session", id)
		}
		if len(out.RewardComponents) > 0 {
			if r.Tool.Meta == nil {
				r.Tool.Meta = mcp.Meta{}
			}
			r.Tool.Meta[MetaReward] = out.Reward
			r.Tool.Meta[MetaRewardComponents] = out.RewardComponents
		}
		return r.Tool, nil
	}
}

// faultReply renders a direct fault on the MCP wire: a JSON-RPC error as a
// protocol error; an HTTP error as the failed tool result an MCP server
// proxying an HTTP API reports (the MCP transport itself answers 200); a
// malformed payload as a tool result whose text is the broken body.
func faultReply(f *perturb.Fault) (*mcp.CallToolResult, error) {
	switch f.Kind {
	case perturb.JSONRPCError:
		return nil, &jsonrpc.Error{Code: int64(f.RPCCode), Message: f.Message}
	case perturb.HTTPError:
		msg := fmt.Sprintf("HTTP %d %s", f.HTTPStatus, http.StatusText(f.HTTPStatus))
		if f.Message != "" && f.Message != http.StatusText(f.HTTPStatus) {
			msg += ": " + f.Message
		}
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}, nil
	case perturb.MalformedPayload:
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: f.Payload}}}, nil
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "injected fault " + string(f.Kind)}
}

// serverForRequest picks the world from the URL path /mcp/{world} (the
// last path element) and session options from the query (?seed=N).
func (f *Facade) serverForRequest(r *http.Request) *mcp.Server {
	name := worldOf(r)
	var so SessionOptions
	if s := r.URL.Query().Get("seed"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			f.log.Warn("MCP session: bad seed", "seed", s)
			return nil
		}
		so.Seed = &n
	}
	srv, err := f.Server(name, so)
	if err != nil {
		f.log.Warn("MCP session refused", "world", name, "err", err)
		return nil
	}
	return srv
}

// worldOf is the world a request's path names (/mcp/{world}, or its last
// element).
func worldOf(r *http.Request) string {
	name := r.PathValue("world")
	if name == "" {
		p := strings.TrimSuffix(r.URL.Path, "/")
		name = p[strings.LastIndexByte(p, '/')+1:]
	}
	return name
}

// Handler serves streamable HTTP MCP sessions. Mount it at "/mcp/{world}"
// (the world name is also read from the last path element when the
// pattern has no {world} wildcard).
func (f *Facade) Handler() http.Handler {
	if !f.opts.SessionIDs {
		return f.handler
	}
	return http.HandlerFunc(f.serveResumable)
}

// ServeStdio serves one MCP session of a world over r/w (stdin/stdout)
// until the client disconnects or ctx ends.
func (f *Facade) ServeStdio(ctx context.Context, worldName string, so SessionOptions, r io.ReadCloser, w io.WriteCloser) error {
	srv, err := f.Server(worldName, so)
	if err != nil {
		return err
	}
	return srv.Run(ctx, &mcp.IOTransport{Reader: r, Writer: w})
}

// Close ends every live MCP session, closing their simulator sessions, and
// waits for that to finish or ctx to end.
func (f *Facade) Close(ctx context.Context) error {
	f.mu.Lock()
	f.closed = true
	live := make([]*mcp.ServerSession, 0, len(f.live))
	for ss := range f.live {
		live = append(live, ss)
	}
	f.mu.Unlock()
	for _, ss := range live {
		_ = ss.Close()
	}
	done := make(chan struct{})
	go func() { f.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("close MCP sessions: %w", ctx.Err())
	}
}
