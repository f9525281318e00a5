package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/agentworld/agentworld/internal/api"
	"github.com/agentworld/agentworld/internal/cluster"
	"github.com/agentworld/agentworld/internal/fielderr"
	"github.com/agentworld/agentworld/internal/httpedge"
	"github.com/agentworld/agentworld/internal/sim"
)

// OpenEnv surface; the wire shapes and their provenance are described on
// the OpenEnv types in wire.go.

func (s *Server) defaultWorld() string {
	if s.opts.DefaultWorld != "" {
		return s.opts.DefaultWorld
	}
	if ws := s.m.Worlds(); len(ws) > 0 {
		return ws[0].Name
	}
	return ""
}

// resetCreate turns an OpenEnv reset into a session creation. An
// episode_id becomes the session's id (so the client can step it by the
// name it chose) and stays a label; extra fields are labels too.
func (s *Server) resetCreate(ctx context.Context, req api.OpenEnvResetRequest, extra map[string]string) (*sim.Reply, error) {
	c, err := toCreate(s.m, api.CreateSessionRequest{World: req.World, WorldID: req.WorldID, Seed: req.Seed, Model: req.Model, Backend: req.Backend})
	if err != nil {
		return nil, err
	}
	if c.World == nil && c.WorldID == "" {
		c.WorldID = s.defaultWorld()
		if c.WorldID == "" {
			return nil, badRequest("world_id", "missing and the server has no worlds loaded")
		}
	}
	if len(extra) > 0 {
		c.Labels = maps.Clone(extra)
	}
	if req.GroupKey != "" {
		if req.EpisodeID != "" {
			return nil, badRequest("episode_id", "cannot name the session of a group_key reset (it is a fork of the group's root); use the session_id it answers with")
		}
		return s.groups.fork(ctx, s.m, req.GroupKey, c)
	}
	if req.EpisodeID != "" {
		if c.Labels == nil {
			c.Labels = map[string]string{}
		}
		c.Labels["episode_id"] = req.EpisodeID
		c.ID = req.EpisodeID
	}
	return s.m.Create(ctx, c)
}

// sessionCookie names the cookie an HTTP /reset answers with: the single-
// client convenience of stepping without a session_id. It is the client's
// own cookie, so two clients (two cookie jars, or clients that keep none
// and send session_id) never step each other's sessions.
const sessionCookie = "openenv_session"

func (s *Server) openEnvReset(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var req api.OpenEnvResetRequest
	extra, err := openEnvDecode(body, &req, true)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	mountWorld(r, &req)
	if req.SessionID != "" {
		s.writeError(w, r, badRequest("session_id", "HTTP /reset always starts a new session; step an existing one with /step {session_id}"))
		return
	}
	rep, err := s.resetCreate(r.Context(), req, extra)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: rep.SessionID, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	writeJSON(w, http.StatusOK, openEnvReply(rep))
}

// openEnvSession picks the session of an HTTP /step or /state: session_id,
// else episode_id, else the openenv_session cookie of the client's own
// latest /reset. Nothing else: a request naming none is refused rather
// than given some other client's session.
func (s *Server) openEnvSession(r *http.Request, id, episode string) (string, error) {
	if id == "" {
		id = episode
	}
	if id != "" {
		return id, nil
	}
	if c, err := r.Cookie(sessionCookie); err == nil && c.Value != "" {
		return c.Value, nil
	}
	return "", badRequest("session_id", "missing: send the session_id (or episode_id) of your /reset's observation, or keep the %s cookie /reset sets", sessionCookie)
}

func (s *Server) openEnvStep(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var req api.OpenEnvStepRequest
	extra, err := openEnvDecode(body, &req, false)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	id, err := s.openEnvSession(r, req.SessionID, req.EpisodeID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if s.routeID(w, r, id, body) {
		return
	}
	if req.RequestID != "" {
		if extra == nil {
			extra = map[string]string{}
		}
		extra["request_id"] = req.RequestID
	}
	ctx := r.Context()
	if req.TimeoutS != nil && *req.TimeoutS > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(*req.TimeoutS*float64(time.Second)))
		defer cancel()
	}
	out, err := s.openEnvToolStep(ctx, id, req.Action, sim.StepRequest{Turn: req.Turn, Labels: extra})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) openEnvState(w http.ResponseWriter, r *http.Request) {
	id, err := s.openEnvSession(r, r.URL.Query().Get("session_id"), r.URL.Query().Get("episode_id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if s.routeID(w, r, id, nil) {
		return
	}
	st, err := s.m.State(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// openEnvSchema answers GET /schema. On a world's mount, or on a server
// whose bare reset has one world to give (an explicit --default-world, or
// a single world loaded), the action schema is that world's: a world with
// tools answers OpenEnv's CallToolAction schema, which tells clients such
// as verifiers' OpenEnvTaskset to ask for the tools with list_tools.
func (s *Server) openEnvSchema(w http.ResponseWriter, r *http.Request) {
	sc := openEnvSchema()
	name := r.PathValue("world")
	if name == "" && (s.opts.DefaultWorld != "" || len(s.m.Worlds()) == 1) {
		name = s.defaultWorld()
	}
	if name != "" {
		spec, ok := s.m.World(name)
		if !ok {
			s.writeError(w, r, &Error{Status: http.StatusNotFound, Code: "not_found", Field: "world", Public: fmt.Sprintf("no world named %q", name)})
			return
		}
		if len(spec.ActionSpace.Tools) > 0 {
			sc["action"] = callToolActionSchema()
		}
	}
	writeJSON(w, http.StatusOK, sc)
}

// openEnvWorldRoutes mounts the OpenEnv surface once per world under
// /openenv/{world}: a client given that base URL (OpenEnv's EnvClient
// appends /ws, verifiers /schema) gets the world's own schema and tools,
// and its resets default to the world.
func (s *Server) openEnvWorldRoutes() {
	s.handleFunc("POST /openenv/{world}/reset", s.openEnvReset)
	s.handleFunc("POST /openenv/{world}/step", s.openEnvStep)
	s.handleFunc("GET /openenv/{world}/state", s.openEnvState)
	s.handleFunc("GET /openenv/{world}/schema", s.openEnvSchema)
	s.handleFunc("GET /openenv/{world}/metadata", s.openEnvMetadata)
	s.handleFunc("GET /openenv/{world}/health", s.health)
	s.handleFunc("GET /openenv/{world}/ws", s.openEnvWS)
}

// mountWorld gives a reset on a world's mount that names no world the
// mount's world.
func mountWorld(r *http.Request, req *api.OpenEnvResetRequest) {
	if req.WorldID == "" && len(req.World) == 0 {
		req.WorldID = r.PathValue("world")
	}
}

// connWorld is the world a request's reset gets when it names none.
func (s *Server) connWorld(r *http.Request) string {
	if name := r.PathValue("world"); name != "" {
		return name
	}
	return s.defaultWorld()
}

func (s *Server) openEnvMetadata(w http.ResponseWriter, r *http.Request) {
	names := []string{}
	for _, spec := range s.m.Worlds() {
		names = append(names, spec.Name)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"name":        "agentworld",
		"description": "Environments simulated by a language world model; /reset {world_id} picks one of: the worlds listed here.",
		"worlds":      names,
	})
}

// wsIn is one read of a WebSocket connection: a message or the error
// that ended reading.
type wsIn struct {
	msg api.OpenEnvWSMessage
	err error
}

// openEnvWS serves OpenEnv's WebSocket protocol. Messages are handled one
// at a time; a reader beside the loop notices the client leaving (or
// staying silent past WebSocketIdle) and cancels the step in flight, so
// its sessions are released at once rather than when the step ends. A
// server shutdown answers the message in flight, then closes.
func (s *Server) openEnvWS(w http.ResponseWriter, r *http.Request) {
	// The edge has checked Origin against the server's own policy (which
	// may allow other origins); Accept's same-host check would undo that.
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return // Accept has written the HTTP error
	}
	defer c.CloseNow() // ends the reader below, whatever ended the loop
	s.wsMu.Lock()
	select {
	case <-s.wsStop:
		s.wsMu.Unlock()
		c.Close(websocket.StatusGoingAway, "server shutting down")
		return
	default:
	}
	s.wsConns.Add(1)
	s.wsMu.Unlock()
	defer s.wsConns.Done()
	c.SetReadLimit(s.opts.MaxBodyBytes)

	// stepCtx outlives the request (the handler's context ends with the
	// hijack) and ends when the client leaves.
	stepCtx, leave := context.WithCancel(context.WithoutCancel(r.Context()))
	defer leave()
	in := make(chan wsIn)
	done := make(chan struct{})
	defer close(done)
	marks := &wsMarks{r: r, busy: 1}
	go func() {
		for {
			rctx, cancel := context.WithTimeout(context.Background(), s.edge.WebSocketIdle)
			_, rd, err := c.Reader(rctx)
			// Working from a message's first frame on (an error is
			// handled by the loop too), so a message that takes a while
			// to arrive is not cut for a new client.
			marks.add(+1)
			var frame []byte
			if err == nil {
				frame, err = io.ReadAll(rd)
			}
			cancel()
			var msg api.OpenEnvWSMessage
			if err != nil {
				leave()
			} else {
				// A frame that is not a message is answered, and the
				// connection (with its session) stays, as OpenEnv's
				// server does.
				err = decodeWS(frame, &msg)
			}
			select {
			case in <- wsIn{msg, err}:
			case <-done:
				return
			}
			if _, bad := errors.AsType[*wsBadFrame](err); err != nil && !bad {
				return
			}
		}
	}()

	var current string
	var owned []string // sessions this connection created; closed at the end
	defer func() {
		for _, id := range owned {
			if err := s.m.Delete(context.Background(), id); err != nil && !errors.Is(err, sim.ErrShuttingDown) {
				s.log.Debug("close websocket session", "session", id, "err", err)
			}
		}
	}()
	send := func(typ string, data any) error {
		b, err := json.Marshal(data)
		if err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(stepCtx, s.edge.WriteTimeout)
		defer cancel()
		return wsjson.Write(wctx, c, api.OpenEnvWSMessage{Type: typ, Data: b})
	}
	sendErr := func(err error) error {
		e := s.clientError(err)
		d := map[string]any{"message": e.Public, "code": wsCode(e), "status": e.Status}
		if e.Field != "" {
			d["field"] = e.Field
		}
		return send("error", d)
	}
	for {
		var got wsIn
		select {
		case <-s.wsStop: // checked first: no new message once shutdown began
			c.Close(websocket.StatusGoingAway, "server shutting down")
			return
		default:
		}
		// The last message is handled (or the upgrade done): unless the
		// next is arriving, the connection only waits for its client,
		// and the edge may close it for a new client when the cap is
		// full.
		marks.add(-1)
		select {
		case <-s.wsStop:
			c.Close(websocket.StatusGoingAway, "server shutting down")
			return
		case got = <-in:
		}
		msg := got.msg
		if err := got.err; err != nil {
			var ce websocket.CloseError
			switch bf, bad := errors.AsType[*wsBadFrame](err); {
			case bad:
				if send("error", map[string]any{"message": bf.msg, "code": bf.code}) == nil {
					continue
				}
			case errors.As(err, &ce):
			case errors.Is(err, context.DeadlineExceeded):
				c.Close(websocket.StatusPolicyViolation, "idle too long")
			default:
				c.Close(websocket.StatusPolicyViolation, "bad message")
			}
			return
		}
		var err error
		switch msg.Type {
		case "reset":
			var req api.OpenEnvResetRequest
			extra, derr := openEnvDecode(msg.Data, &req, true)
			if derr != nil {
				err = sendErr(derr)
				break
			}
			mountWorld(r, &req)
			if req.SessionID != "" { // attach to an existing session
				owner, lerr := s.wsOwner(stepCtx, r, req.SessionID)
				if lerr != nil {
					err = sendErr(lerr)
					break
				}
				if owner != nil { // a live node holds it: it serves the connection
					up, derr := s.dialOwner(stepCtx, r, owner)
					if derr != nil {
						s.log.Warn("open websocket on the session's owner", "session", req.SessionID, "owner", owner.Host, "err", derr)
						err = sendErr(fielderr.New(cluster.ErrOwnerUnreachable, "session_id", "session %s: its owner node did not answer; retry", req.SessionID))
						break
					}
					s.wsProxy(stepCtx, marks, c, up, msg, in)
					return
				}
				st, serr := s.m.State(stepCtx, req.SessionID)
				if serr != nil {
					err = sendErr(serr)
					break
				}
				current = req.SessionID
				err = send("observation", api.OpenEnvResult{
					Observation: api.OpenEnvObservation{Text: st.LastObservation, Turn: st.StepCount, SessionID: st.EpisodeID, Truncated: st.Status == sim.StatusTruncated},
					Done:        st.Status == sim.StatusTerminated || st.Status == sim.StatusTruncated,
					Metadata:    map[string]any{"attached": true, "world": st.World, "domain": st.Domain, "backend": st.Backend},
				})
				break
			}
			rep, cerr := s.resetCreate(stepCtx, req, extra)
			if cerr != nil {
				err = sendErr(cerr)
				break
			}
			current = rep.SessionID
			owned = append(owned, rep.SessionID)
			err = send("observation", openEnvReply(rep))
		case "step":
			if current == "" {
				if kind, _ := openEnvToolAction(msg.Data); kind == "list_tools" {
					// verifiers' OpenEnvTaskset lists the tools before its
					// reset, as an OpenEnv MCP environment allows.
					out, lerr := s.worldToolsResult(s.connWorld(r))
					if lerr != nil {
						err = sendErr(lerr)
					} else {
						err = send("observation", out)
					}
					break
				}
				err = sendErr(badRequest("type", "send a reset before the first step"))
				break
			}
			out, serr := s.openEnvToolStep(stepCtx, current, msg.Data, sim.StepRequest{})
			if serr != nil {
				err = sendErr(serr)
				break
			}
			err = send("observation", out)
		case "state":
			if current == "" {
				err = sendErr(badRequest("type", "send a reset before asking for state"))
				break
			}
			st, serr := s.m.State(stepCtx, current)
			if serr != nil {
				err = sendErr(serr)
				break
			}
			err = send("state", st)
		case "close":
			c.Close(websocket.StatusNormalClosure, "")
			return
		case "mcp":
			err = send("mcp", s.openEnvRPC(stepCtx, msg.Data, &rpcConn{current: &current, owned: &owned, r: r}))
		default:
			err = send("error", map[string]any{"message": fmt.Sprintf("unknown message type %q (want reset, step, state, mcp or close)", msg.Type), "code": "UNKNOWN_TYPE"})
		}
		if err != nil {
			return
		}
	}
}

// wsBadFrame is a WebSocket frame that is not a message: answered with
// an error of OpenEnv's code, after which the connection reads on.
type wsBadFrame struct{ code, msg string }

func (e *wsBadFrame) Error() string { return e.msg }

// decodeWS reads one client frame. OpenEnv's server answers a frame that
// is not JSON with INVALID_JSON; one that is JSON but not a {type, data}
// message gets VALIDATION_ERROR here (OpenEnv validates each type's
// message separately, with the same code).
func decodeWS(frame []byte, msg *api.OpenEnvWSMessage) error {
	if !json.Valid(frame) {
		var v any
		err := json.Unmarshal(frame, &v)
		return &wsBadFrame{code: "INVALID_JSON", msg: fmt.Sprintf("Invalid JSON: %v", err)}
	}
	if err := json.Unmarshal(frame, msg); err != nil {
		return &wsBadFrame{code: "VALIDATION_ERROR", msg: fmt.Sprintf("not a {type, data} message: %v", err)}
	}
	return nil
}

func wsCode(e *Error) string {
	switch {
	case e.Code == "capacity":
		return "CAPACITY_REACHED"
	case e.Status == http.StatusBadRequest || e.Status == http.StatusRequestEntityTooLarge || e.Status == http.StatusNotFound:
		return "VALIDATION_ERROR"
	}
	return "EXECUTION_ERROR"
}

// wsMarks keeps a WebSocket's mark for the connection caps (see
// [httpedge.Waiting]): working from the first frame of a client's message
// on until it is handled here (or answered by the session's owner node),
// waiting for its client otherwise.
type wsMarks struct {
	r  *http.Request
	mu sync.Mutex
	// busy counts the client's messages arriving, being handled or
	// awaiting their answer; the upgrade counts as one until the loop
	// first waits.
	busy int
}

// add changes busy by d and tells the edge when the connection starts or
// stops waiting.
func (m *wsMarks) add(d int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	was := m.busy
	m.busy = max(m.busy+d, 0)
	if (was == 0) != (m.busy == 0) {
		httpedge.Waiting(m.r, m.busy == 0)
	}
}
