package worldmodel

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// bodyServer records every request body as it arrived and answers with
// typicalAnswer, or drops the connection after reading the body, or
// redirects with a status.
type bodyServer struct {
	*httptest.Server
	mu       sync.Mutex
	bodies   []string
	drop     map[int]bool // by request number, from 1
	redirect map[int]int
}

func newBodyServer(t *testing.T) *bodyServer {
	s := &bodyServer{drop: map[int]bool{}, redirect: map[int]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *bodyServer) serve(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		b = []byte("read error: " + err.Error())
	}
	s.mu.Lock()
	s.bodies = append(s.bodies, r.Method+" "+string(b))
	n := len(s.bodies)
	drop, redirect := s.drop[n], s.redirect[n]
	s.mu.Unlock()
	switch {
	case drop:
		conn, _, _ := http.NewResponseController(w).Hijack()
		conn.Close()
	case redirect != 0:
		http.Redirect(w, r, "/v1/chat/completions?again", redirect)
	default:
		w.Header().Set("Content-Type", "application/json")
		w.Write(typicalAnswer)
	}
}

func (s *bodyServer) received() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bodies...)
}

// TestClientWritesStepsIntoOneBuffer runs a session's steps through the
// client — two of them dropped once and retried, one redirected with its
// body (307, which sends the body again through GetBody), one redirected
// to a GET (303) — and checks that the server receives each step's whole
// history, byte for byte; that only the steps after a redirect found the
// previous body not free (net/http read it in a way the client does not
// count), and none of them was written into its memory; and that most
// steps were (the others grew the session's buffer).
func TestClientWritesStepsIntoOneBuffer(t *testing.T) {
	srv := newBodyServer(t)
	srv.drop[5], srv.drop[12] = true, true // steps 5 and 11, retried
	srv.redirect[17], srv.redirect[20] = http.StatusTemporaryRedirect, http.StatusSeeOther
	c := New(srv.URL+"/v1", "wm", &Options{MaxRetryDelay: 1})
	ctx := WithAffinity(context.Background(), "s")
	hist := []Message{{Role: "system", Content: "world <rules> & \"more\"\n"}}
	var want []string
	var last *byte
	var notFree []int
	inPlace := 0
	for step := 1; step <= 30; step++ {
		hist = append(hist, Message{Role: "user", Content: fmt.Sprintf("action %d\n", step)})
		prev := c.prefixes.get("s")
		free := prev != nil && prev.use.free()
		if !free {
			notFree = append(notFree, step)
		}
		if _, err := c.Complete(ctx, Request{Messages: hist, MaxTokens: 64}); err != nil {
			t.Fatal(err)
		}
		body, err := encodeChatRequest(newChatRequest(Request{Messages: hist, MaxTokens: 64}, "wm"), nil)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, "POST "+string(body))
		switch step {
		case 5, 11: // dropped, sent again
			want = append(want, "POST "+string(body))
		case 15: // redirected (307): sent again to the new place
			want = append(want, "POST "+string(body))
		case 17: // redirected (303): a GET follows
			want = append(want, "GET ")
		}
		p := c.prefixes.get("s")
		if &p.room[:1][0] == last {
			if !free {
				t.Errorf("step %d was written into memory net/http may read", step)
			}
			inPlace++
		}
		last = &p.room[:1][0]
		hist = append(hist, Message{Role: "assistant", Content: strings.Repeat(fmt.Sprintf("observation %d ", step), 10)})
	}
	if diff := cmp.Diff(want, srv.received()); diff != "" {
		t.Fatalf("bodies received (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{1, 16, 18}, notFree); diff != "" {
		t.Errorf("steps after which the body was not free (-want +got):\n%s", diff)
	}
	if inPlace < 20 {
		t.Errorf("%d of 30 steps written into the buffer of the step before, want most", inPlace)
	}
}

// TestBodyUseCounts checks the accounting of a followed body: free only
// once the attempts are over and every connection got has finished its
// write, never once forsaken.
func TestBodyUseCounts(t *testing.T) {
	u := newBodyUse()
	steps := []struct {
		do   func()
		free bool
	}{
		{func() { u.trace.GotConn(httptrace.GotConnInfo{}) }, false},
		{func() { u.trace.WroteRequest(httptrace.WroteRequestInfo{}) }, false}, // attempts not over
		{func() { u.trace.GotConn(httptrace.GotConnInfo{}) }, false},           // a retry
		{func() { u.over.Store(true) }, false},                                 // its write not done
		{func() { u.trace.WroteRequest(httptrace.WroteRequestInfo{}) }, true},
		{func() { u.getBody([]byte("x"))() }, false},
	}
	for i, st := range steps {
		st.do()
		if got := u.free(); got != st.free {
			t.Errorf("step %d: free %v, want %v", i, got, st.free)
		}
	}
	if (*bodyUse)(nil).free() {
		t.Error("a body not followed is free")
	}
}

// TestClientFollowsBodiesOnlyWhereItCan: bodies are followed through the
// client's own transport to an http:// URL, for a session, when the
// caller traces nothing itself.
func TestClientFollowsBodiesOnlyWhereItCan(t *testing.T) {
	srv := newBodyServer(t)
	traced := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{})
	cases := []struct {
		name   string
		c      *Client
		ctx    context.Context
		follow bool
	}{
		{"own transport", New(srv.URL+"/v1", "wm", nil), context.Background(), true},
		{"caller's HTTP client", New(srv.URL+"/v1", "wm", &Options{HTTPClient: &http.Client{}}), context.Background(), false},
		{"no prefix cache", New(srv.URL+"/v1", "wm", &Options{PrefixCacheBytes: -1}), context.Background(), false},
		{"caller's trace", New(srv.URL+"/v1", "wm", nil), traced, false},
		{"https", New("https://localhost:1/v1", "wm", &Options{MaxRetries: -1}), context.Background(), false},
	}
	for _, tc := range cases {
		ctx := WithAffinity(tc.ctx, "s")
		tc.c.Complete(ctx, Request{Messages: []Message{{Role: "user", Content: "hi"}}})
		p := tc.c.prefixes.get("s")
		if followed := p != nil && p.use != nil; followed != tc.follow {
			t.Errorf("%s: body followed %v, want %v", tc.name, followed, tc.follow)
		}
	}
}
