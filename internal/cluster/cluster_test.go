package cluster

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/jetstore"
)

// owners is an Ownership in memory: leases by session, claims as
// compare-and-set on the revision.
type owners struct {
	self   string
	leases map[string]jetstore.Lease
	// steal, when set, makes the next claim lose to node steal.
	steal  string
	claims int
	// forgot lists the sessions Forget was called for.
	forgot []string
}

func (o *owners) Self() string { return o.self }

func (o *owners) Owner(_ context.Context, id string) (jetstore.Lease, error) {
	return o.leases[id], nil
}

func (o *owners) Forget(id string) { o.forgot = append(o.forgot, id) }

func (o *owners) Claim(_ context.Context, id string, prev jetstore.Lease) error {
	o.claims++
	cur := o.leases[id]
	if o.steal != "" {
		cur = jetstore.Lease{Owner: jetstore.Owner{Node: o.steal, Backend: cur.Backend}, Revision: cur.Revision + 1, Alive: true}
		cur.Addr = prev.Addr
		o.leases[id], o.steal = cur, ""
	}
	if cur.Revision != prev.Revision {
		return jetstore.ErrClaimLost
	}
	o.leases[id] = jetstore.Lease{Owner: jetstore.Owner{Node: o.self, Backend: prev.Backend}, Revision: prev.Revision + 1, Alive: true}
	return nil
}

func lease(node, addr, backend string, rev uint64, alive bool) jetstore.Lease {
	return jetstore.Lease{Owner: jetstore.Owner{Node: node, Addr: addr, Backend: backend}, Revision: rev, Alive: alive}
}

func TestRoute(t *testing.T) {
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "owner served "+r.Host+r.URL.Path+" forwarded by "+r.Header.Get(ForwardedHeader))
	}))
	t.Cleanup(owner.Close)
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close() // an address nobody answers at
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"error":{"code":"owner_unreachable"}}`, http.StatusServiceUnavailable)
	}))
	t.Cleanup(refusing.Close)

	cases := []struct {
		name      string
		lease     jetstore.Lease
		steal     string
		forwarded string
		// want: "here" (served by this node), "forward" (answered by the
		// owner), or an error kind
		want      string
		wantErr   error
		wantOwner string
		evicted   bool
		// forgot: the router told the store to forget the owner it
		// remembers (the forward failed or was refused)
		forgot bool
	}{
		{name: "OwnedHere", lease: lease("me", "", "model", 3, true), want: "here", wantOwner: "me"},
		{name: "NoOwnerRecord", want: "here"},
		{name: "LiveOwnerForwarded", lease: lease("a", owner.URL, "model", 3, true), want: "forward", wantOwner: "a"},
		{name: "NeverForwardedTwice", lease: lease("a", owner.URL, "model", 3, true), forwarded: "b", wantErr: ErrOwnerUnreachable, wantOwner: "a"},
		{name: "LiveOwnerNotAnswering", lease: lease("a", gone.URL, "model", 3, true), wantErr: ErrOwnerUnreachable, wantOwner: "a", forgot: true},
		{name: "LiveOwnerRefusing", lease: lease("a", refusing.URL, "model", 3, true), want: "refused", wantOwner: "a", forgot: true},
		{name: "DeadOwnerTakenOver", lease: lease("a", owner.URL, "model", 3, false), want: "here", wantOwner: "me", evicted: true},
		{name: "RealEnvironmentCannotMove", lease: lease("a", owner.URL, "real:terminal", 3, false), wantErr: ErrCannotMove, wantOwner: "a"},
		{name: "ClaimLostGoesToWinner", lease: lease("a", owner.URL, "model", 3, false), steal: "c", want: "forward", wantOwner: "c"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			own := &owners{self: "me", leases: map[string]jetstore.Lease{}, steal: tc.steal}
			if tc.lease.Node != "" {
				own.leases["s1"] = tc.lease
			}
			var evicted []string
			r := New(own, &Options{Evict: func(id string) bool { evicted = append(evicted, id); return true }})
			req := httptest.NewRequest(http.MethodPost, "/v1/sessions/s1/step", strings.NewReader(`{"action":"x"}`))
			if tc.forwarded != "" {
				req.Header.Set(ForwardedHeader, tc.forwarded)
			}
			w := httptest.NewRecorder()
			handled, err := r.Route(w, req, "s1")
			switch {
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("error = %v, want %v", err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case tc.want == "here" && handled:
				t.Fatalf("answered (%q), want it left to this node", w.Body.String())
			case tc.want == "refused":
				if !handled || w.Code != http.StatusServiceUnavailable {
					t.Fatalf("handled %v, status %d; want the owner's 503 passed on", handled, w.Code)
				}
			case tc.want == "forward":
				if want := "owner served example.com/v1/sessions/s1/step forwarded by me"; !handled || w.Body.String() != want {
					t.Fatalf("handled %v, body %q; want %q", handled, w.Body.String(), want)
				}
			}
			if got := own.leases["s1"].Node; got != tc.wantOwner {
				t.Errorf("owner after the request = %q, want %q", got, tc.wantOwner)
			}
			if tc.forgot != (len(own.forgot) == 1) {
				t.Errorf("forgot %v, want forgot=%v", own.forgot, tc.forgot)
			}
			if tc.evicted != (len(evicted) == 1) {
				t.Errorf("evicted %v, want evicted=%v", evicted, tc.evicted)
			}
		})
	}
}

// TestCannotMoveSaysWhy: the refusal of a real-environment session names
// the session, its backend and node, and what to do.
func TestCannotMoveSaysWhy(t *testing.T) {
	own := &owners{self: "me", leases: map[string]jetstore.Lease{"s1": lease("a", "http://a", "real:terminal", 1, false)}}
	_, err := New(own, nil).Route(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/v1/sessions/s1", nil), "s1")
	for _, want := range []string{"s1", "real:terminal", "node a", "cannot move", "start a new session"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
	if own.claims != 0 {
		t.Errorf("a real-environment session was claimed %d times", own.claims)
	}
}
