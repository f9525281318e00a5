package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/api"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// TestWebSocketDisconnectCancelsStep: a client that leaves while its step
// waits on the world model cancels that step (the model request is
// abandoned) and the sessions it created are released at once, not when
// the model answers; a silent connection is closed after WebSocketIdle.
func TestWebSocketDisconnectCancelsStep(t *testing.T) {
	h := newHarness(t, "", nil)
	// No idle timeout here: a test paused by a loaded machine between its
	// messages must not see its connection closed.
	h.serve(Edge{WebSocketIdle: edgeHangGuard})
	ws := "ws" + strings.TrimPrefix(h.base, "http") + "/ws"

	wctx, cancel := context.WithTimeout(context.Background(), edgeHangGuard)
	defer cancel()
	c, _, err := websocket.Dial(wctx, ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	wsSend(t, wctx, c, "reset", `{"world_id":"term"}`)
	if typ, _ := wsRecv(t, wctx, c); typ != "observation" {
		t.Fatalf("reset answered %s", typ)
	}
	arrived, release := h.model.Hold()
	defer release()
	wsSend(t, wctx, c, "step", `{"action":[{"keystrokes":"sleep 600\n"}]}`)
	<-arrived
	c.CloseNow() // the client leaves mid-step
	deadline := time.Now().Add(edgeHangGuard)
	for h.m.Len() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions still held after the client left mid-step", h.m.Len())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := len(h.model.Requests()); n != 0 {
		t.Errorf("the abandoned step still reached the model's answer (%d requests answered)", n)
	}

	// A connection that sends nothing is closed after the idle timeout
	// (not earlier; later only by as much as the machine is loaded: the
	// read's own deadline is the hang guard's, and the read must end by
	// the server's close, not by that).
	h.serve(Edge{WebSocketIdle: 500 * time.Millisecond})
	ws = "ws" + strings.TrimPrefix(h.base, "http") + "/ws"
	rctx, rcancel := context.WithTimeout(context.Background(), edgeHangGuard)
	defer rcancel()
	c, _, err = websocket.Dial(rctx, ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	start := time.Now()
	_, _, err = c.Read(rctx)
	if d := time.Since(start); err == nil || rctx.Err() != nil || d < 400*time.Millisecond {
		t.Fatalf("idle WebSocket: read returned %v after %v, want the connection closed by the server after 500ms", err, d)
	}
}

// TestTranscriptIsPaged: GET /v1/sessions/{id} answers a page of turns
// with a cursor to the next; walking the cursors gives every turn once, in
// order; bad page parameters are 400s naming the parameter.
func TestTranscriptIsPaged(t *testing.T) {
	h := newHarness(t, "", nil)
	var created sim.Reply
	if st := h.do("POST", "/v1/sessions", `{"world_id":"term"}`, &created); st != 201 {
		t.Fatalf("create: %d", st)
	}
	const steps = 7
	for i := 1; i <= steps; i++ {
		body := fmt.Sprintf(`{"action":[{"keystrokes":"echo %d\n"}],"turn":%d}`, i, i)
		if st := h.do("POST", "/v1/sessions/"+created.SessionID+"/step", body, nil); st != 200 {
			t.Fatalf("step %d: %d", i, st)
		}
	}
	type page struct {
		Turns []trajectory.Turn `json:"turns"`
		Page  TurnPage          `json:"page"`
		ID    string            `json:"id"`
	}
	var got []string
	var pages []TurnPage
	for from := 1; from != 0; {
		var p page
		if st := h.do("GET", fmt.Sprintf("/v1/sessions/%s?from_turn=%d&limit=3", created.SessionID, from), nil, &p); st != 200 {
			t.Fatalf("page from %d: %d", from, st)
		}
		if p.ID != created.SessionID {
			t.Fatalf("page from %d lacks the trajectory header: %+v", from, p)
		}
		for _, tr := range p.Turns {
			got = append(got, tr.Action)
		}
		pages = append(pages, p.Page)
		from = p.Page.NextFromTurn
	}
	want := []TurnPage{{FromTurn: 1, Turns: 3, TotalTurns: 7, NextFromTurn: 4}, {FromTurn: 4, Turns: 3, TotalTurns: 7, NextFromTurn: 7}, {FromTurn: 7, Turns: 1, TotalTurns: 7}}
	if diff := cmp.Diff(want, pages); diff != "" {
		t.Errorf("pages (-want +got):\n%s", diff)
	}
	if len(got) != steps || !strings.Contains(got[0], "echo 1") || !strings.Contains(got[steps-1], "echo 7") {
		t.Errorf("turns walked: %q", got)
	}
	var p page
	if st := h.do("GET", "/v1/sessions/"+created.SessionID, nil, &p); st != 200 || len(p.Turns) != steps || p.Page.NextFromTurn != 0 {
		t.Errorf("default page: %d %+v", st, p.Page)
	}
	for _, q := range []string{"from_turn=0", "from_turn=x", "limit=0", "limit=1001", "limit=-3"} {
		var e api.ErrorBody
		field := strings.Split(q, "=")[0]
		if st := h.do("GET", "/v1/sessions/"+created.SessionID+"?"+q, nil, &e); st != 400 || e.Error.Field != field {
			t.Errorf("%s: %d %+v, want 400 naming %s", q, st, e, field)
		}
	}
}
