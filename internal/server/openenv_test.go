package server

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestWebSocketDisconnectCancelsStep: a client that leaves while its step
// waits on the world model cancels that step (the model request is
// abandoned) and the sessions it created are released at once, not when
// the model answers; a silent connection is closed after WebSocketIdle.
func TestWebSocketDisconnectCancelsStep(t *testing.T) {
	h := newHarness(t, "", nil)
	h.srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- New(h.m, &Options{Edge: Edge{WebSocketIdle: 500 * time.Millisecond}}).Serve(ctx, ln) }()
	defer func() { stop(); <-served }()
	ws := "ws://" + ln.Addr().String() + "/ws"

	wctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
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
	deadline := time.Now().Add(5 * time.Second)
	for h.m.Len() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions still held after the client left mid-step", h.m.Len())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := len(h.model.Requests()); n != 0 {
		t.Errorf("the abandoned step still reached the model's answer (%d requests answered)", n)
	}

	// A connection that sends nothing is closed after the idle timeout.
	c, _, err = websocket.Dial(wctx, ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	start := time.Now()
	_, _, err = c.Read(wctx)
	if d := time.Since(start); err == nil || d < 400*time.Millisecond || d > 5*time.Second {
		t.Fatalf("idle WebSocket: read returned %v after %v, want the connection closed after 500ms", err, d)
	}
}
