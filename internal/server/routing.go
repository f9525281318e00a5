package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/agentworld/agentworld/internal/api"
	"github.com/agentworld/agentworld/internal/cluster"
	"github.com/agentworld/agentworld/internal/fielderr"
	"github.com/agentworld/agentworld/internal/httpedge"
)

// Requests that name a session, on every surface, go through
// Options.Sessions before they are served, so any node of a cluster
// accepts any of them:
//
//   - the session API (/v1/sessions/{id}…), OpenEnv's HTTP /step and
//     /state (session_id, episode_id or the reset's cookie) and OpenEnv's
//     JSON-RPC POST /mcp (params.session_id) are forwarded to a live
//     owner as HTTP requests ([SessionRouter.Route]);
//   - a JSON-RPC message on a WebSocket that names a session other than
//     the connection's is sent to a live owner as POST /mcp, and its
//     answer is the message's ([Server.rpcElsewhere]);
//   - the MCP facade's sessions (/mcp/{world} with an Mcp-Session-Id,
//     which names the simulator session in a cluster) the same way;
//   - a WebSocket that attaches to a session (reset {session_id}) owned by
//     a live node is proxied there: this node opens the same WebSocket to
//     the owner, sends it the attach and from then on carries every frame
//     both ways. OpenEnv's WebSocket is a conversation with state on the
//     server (the connection's session, the sessions it created and
//     closes when it ends), so the owner serves the whole of it rather
//     than this node serving steps of a session another node holds. When
//     the owner dies the client's connection closes, as it would have on
//     that node; it reconnects, and its attach takes the session over.
//
// A session whose owner's lease ran out is taken over here by every one of
// them: the router claims it, and the transcript is loaded with its
// recorded answers.

// routeID asks Options.Sessions where a request for session id is served
// and answers it when it is not served here (forwarded, or an error
// written): true means the handler is done. body is what the handler
// already read of the request (nil for none); it is put back for the
// forward, which takes it without a copy (httpedge.PutBack).
func (s *Server) routeID(w http.ResponseWriter, r *http.Request, id string, body []byte) bool {
	rt := s.opts.Sessions
	if rt == nil || id == "" {
		return false
	}
	if body != nil {
		httpedge.PutBack(r, body)
	}
	handled, err := rt.Route(w, r, id)
	if err != nil {
		s.writeError(w, r, err)
		return true
	}
	return handled
}

// rpcSession is the params.session_id of a JSON-RPC request, "" when it
// names none or is not one (the handler answers that).
func rpcSession(body []byte) string {
	var req struct {
		Params struct {
			SessionID string `json:"session_id"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &req) != nil {
		return ""
	}
	return req.Params.SessionID
}

// wsOwner says where a WebSocket's attach to session id is served: nil
// here (taken over if its owner is gone), else the live owner's base URL.
func (s *Server) wsOwner(ctx context.Context, r *http.Request, id string) (*url.URL, error) {
	if s.opts.Sessions == nil {
		return nil, nil
	}
	return s.opts.Sessions.Locate(ctx, id, r.Header.Get(cluster.ForwardedHeader))
}

// wsHeaders are the client's handshake headers the owner checks as this
// node did (auth, origin, cookies); the rest belong to this hop.
var wsHeaders = []string{"Authorization", "Origin", "Cookie", "User-Agent"}

// dialOwner opens the client's WebSocket on the owner node.
func (s *Server) dialOwner(ctx context.Context, r *http.Request, owner *url.URL) (*websocket.Conn, error) {
	u := *owner
	switch u.Scheme {
	case "https":
		u.Scheme = "wss"
	default:
		u.Scheme = "ws"
	}
	u.Path, u.RawQuery = r.URL.Path, r.URL.RawQuery
	h := http.Header{}
	for _, k := range wsHeaders {
		for _, v := range r.Header.Values(k) {
			h.Add(k, v)
		}
	}
	s.opts.Sessions.Mark(h)
	dctx, cancel := context.WithTimeout(ctx, s.edge.WriteTimeout)
	defer cancel()
	up, resp, err := websocket.Dial(dctx, u.String(), &websocket.DialOptions{HTTPHeader: h, Host: r.Host})
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		return nil, err
	}
	up.SetReadLimit(-1) // the owner bounds what it sends; the client's reads are its own
	return up, nil
}

// wsProxy carries a WebSocket to the owner of the session it attaches to:
// first the attach, then every message the client sends (from in, the
// connection's reader) and every frame the owner answers, until either
// side closes; the client's connection closes as the owner's did. Each
// of the client's messages, the attach included, is counted working in
// marks by the reader from its first frame on; the owner's answer (one
// each) ends it.
func (s *Server) wsProxy(ctx context.Context, marks *wsMarks, c, up *websocket.Conn, attach api.OpenEnvWSMessage, in <-chan wsIn) {
	defer up.CloseNow()
	send := func(m api.OpenEnvWSMessage) error {
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, s.edge.WriteTimeout)
		defer cancel()
		return up.Write(wctx, websocket.MessageText, b)
	}
	upDone := make(chan error, 1)
	go func() { // the owner's frames, to the client
		for {
			typ, b, err := up.Read(context.Background()) // ends with up
			if err != nil {
				upDone <- err
				return
			}
			wctx, cancel := context.WithTimeout(ctx, s.edge.WriteTimeout)
			err = c.Write(wctx, typ, b)
			cancel()
			if err != nil {
				upDone <- nil // the client went away; closing up ends the owner's side
				return
			}
			marks.add(-1)
		}
	}()
	closeLike := func(err error) {
		var ce websocket.CloseError
		if errors.As(err, &ce) {
			c.Close(ce.Code, ce.Reason)
			return
		}
		c.Close(websocket.StatusGoingAway, "the session's node went away; reconnect and attach again")
	}
	if err := send(attach); err != nil {
		closeLike(err)
		return
	}
	for {
		select {
		case <-s.wsStop:
			up.Close(websocket.StatusGoingAway, "server shutting down")
			c.Close(websocket.StatusGoingAway, "server shutting down")
			return
		case err := <-upDone:
			if err != nil {
				closeLike(err)
			}
			return
		case got := <-in:
			if err := got.err; err != nil {
				if bf, bad := errors.AsType[*wsBadFrame](err); bad {
					// answered here as the owner would answer it
					b, _ := json.Marshal(map[string]any{"message": bf.msg, "code": bf.code})
					wctx, cancel := context.WithTimeout(ctx, s.edge.WriteTimeout)
					werr := wsjson.Write(wctx, c, api.OpenEnvWSMessage{Type: "error", Data: b})
					cancel()
					if werr == nil {
						marks.add(-1) // answered
						continue
					}
				}
				var ce websocket.CloseError
				switch {
				case errors.As(err, &ce):
					up.Close(ce.Code, ce.Reason)
				case errors.Is(err, context.DeadlineExceeded):
					up.Close(websocket.StatusNormalClosure, "")
					c.Close(websocket.StatusPolicyViolation, "idle too long")
				default:
					c.Close(websocket.StatusPolicyViolation, "bad message")
				}
				return
			}
			if err := send(got.msg); err != nil {
				closeLike(err)
				return
			}
		}
	}
}

// mcpSessionHeader is the session header of MCP's streamable HTTP
// transport.
const mcpSessionHeader = "Mcp-Session-Id"

// mcpRouted routes the MCP facade's requests by their Mcp-Session-Id,
// which in a cluster is the simulator session's id
// (mcpworld.Options.SessionIDs): forwarded to a live owner (its event
// streams too), or served here after a takeover. A request without one
// (initialize) starts a session here.
func (s *Server) mcpRouted(h http.Handler) http.Handler {
	if s.opts.Sessions == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.routeID(w, r, r.Header.Get(mcpSessionHeader), nil) {
			return
		}
		h.ServeHTTP(w, r)
	})
}

// rpcClient carries a WebSocket's JSON-RPC request to another node.
var rpcClient = &http.Client{Timeout: 5 * time.Minute}

// rpcElsewhere answers a JSON-RPC request that arrived on a WebSocket and
// names a session other than the connection's: when a live node owns it,
// the request goes there as OpenEnv's POST /mcp and its answer is this
// one (forwarded true); when it is served here, forwarded is false.
func (s *Server) rpcElsewhere(ctx context.Context, r *http.Request, session string, id json.RawMessage, raw []byte) (rpcResponse, bool) {
	if s.opts.Sessions == nil {
		return rpcResponse{}, false
	}
	owner, err := s.opts.Sessions.Locate(ctx, session, r.Header.Get(cluster.ForwardedHeader))
	switch {
	case err != nil:
		return s.rpcFromErr(id, err), true
	case owner == nil:
		return rpcResponse{}, false
	}
	u := *owner
	u.Path = "/mcp"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(raw))
	if err != nil {
		return s.rpcFromErr(id, err), true
	}
	for _, k := range wsHeaders {
		for _, v := range r.Header.Values(k) {
			req.Header.Add(k, v)
		}
	}
	req.Host = r.Host
	req.Header.Set("Content-Type", "application/json")
	s.opts.Sessions.Mark(req.Header)
	resp, err := rpcClient.Do(req)
	if err == nil {
		defer resp.Body.Close()
		var out struct {
			rpcResponse
			Result json.RawMessage `json:"result,omitempty"`
		}
		if resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&out) == nil {
			if out.Result != nil {
				out.rpcResponse.Result = out.Result
			}
			return out.rpcResponse, true
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		err = fmt.Errorf("%d %s", resp.StatusCode, b)
	}
	s.log.Warn("forward JSON-RPC to the session's owner", "session", session, "owner", owner.Host, "err", err)
	return s.rpcFromErr(id, fielderr.New(cluster.ErrOwnerUnreachable, "session_id", "session %s: its owner node did not answer; retry", session)), true
}
