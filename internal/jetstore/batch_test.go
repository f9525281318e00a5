package jetstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentworld/agentworld/internal/jetstore"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/store/storetest"
	"github.com/agentworld/agentworld/internal/testkit/natstest"
)

// openCluster starts three clustered NATS servers and opens a store on
// each, its stream replicated on all three (R3): stores[i] publishes
// through server i.
func openCluster(t testing.TB, o *natstest.Options) ([]*jetstore.Store, []*nats.Conn) {
	t.Helper()
	var stores []*jetstore.Store
	var conns []*nats.Conn
	for _, u := range natstest.StartCluster(t, 3, o) {
		nc, err := nats.Connect(u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		conns = append(conns, nc)
		st := open(t, nc, &jetstore.Options{Replicas: 3})
		if jetstore.Batching(st) {
			jetstore.PatientBatches(st)
		}
		stores = append(stores, st)
	}
	return stores, conns
}

// turnOf is session id's turn n, each session's and turn's its own.
func turnOf(id string, n int) sim.TurnRecord {
	return sim.TurnRecord{Turn: n, HistoryTurn: sim.HistoryTurn{Action: fmt.Sprintf("%s-%d", id, n), Observation: "ok"}}
}

// waitFor polls cond until it holds (the deadline only bounds a hang).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(2 * time.Minute); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("%s: not after 2 minutes", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// createAll creates sessions ids through st.
func createAll(t testing.TB, st *jetstore.Store, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if err := st.CreateSession(t.Context(), storetest.Session(id), nil); err != nil {
			t.Fatal(err)
		}
	}
}

// queued appends turn n to each of ids through st at once: the first
// append goes out alone and is held until every other one waits in st's
// queue, so that those go out together. It returns each append's error.
func queued(t *testing.T, st *jetstore.Store, n int, ids ...string) []error {
	t.Helper()
	return queuedTurns(t, st, func(id string) sim.TurnRecord { return turnOf(id, n) }, ids...)
}

// queuedTurns is queued with each session's turn made by turn.
func queuedTurns(t *testing.T, st *jetstore.Store, turn func(id string) sim.TurnRecord, ids ...string) []error {
	t.Helper()
	entered, release := jetstore.HoldAppend(st)
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	appendTurn := func(i int) {
		defer wg.Done()
		errs[i] = st.AppendTurn(t.Context(), ids[i], turn(ids[i]), sim.StatusActive)
	}
	wg.Add(len(ids))
	go appendTurn(0)
	<-entered
	for i := 1; i < len(ids); i++ {
		go appendTurn(i)
	}
	waitFor(t, "appends queued", func() bool { return jetstore.QueuedAppends(st) == len(ids)-1 })
	release()
	wg.Wait()
	return errs
}

// actions is each session's transcript, as its turns' actions, read
// through st.
func actions(t *testing.T, st *jetstore.Store, ids ...string) map[string][]string {
	t.Helper()
	got := map[string][]string{}
	for _, id := range ids {
		_, turns, err := st.LoadSession(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		got[id] = []string{}
		for _, tr := range turns {
			got[id] = append(got[id], tr.Action)
		}
	}
	return got
}

// want is the transcripts of ids with turns 1 to n each.
func want(n int, ids ...string) map[string][]string {
	w := map[string][]string{}
	for _, id := range ids {
		w[id] = []string{}
		for i := 1; i <= n; i++ {
			w[id] = append(w[id], turnOf(id, i).Action)
		}
	}
	return w
}

var batchIDs = []string{"s_0", "s_1", "s_2", "s_3", "s_4", "s_5", "s_6"}

// TestBatchCommitsQueuedAppends: appends that arrive while one is on its
// way go out as one batch, each stored once at the sequence the store
// then expects (the next appends, alone, pass their checks).
func TestBatchCommitsQueuedAppends(t *testing.T) {
	stores, _ := openCluster(t, nil)
	st := stores[0]
	if !jetstore.Batching(st) {
		t.Fatal("a store on an R3 stream does not batch")
	}
	createAll(t, st, batchIDs...)
	for i, err := range queued(t, st, 1, batchIDs...) {
		if err != nil {
			t.Errorf("append %d: %v", i, err)
		}
	}
	if sent, failed := jetstore.Batches(st); sent != 1 || failed != 0 {
		t.Errorf("batches sent %d, failed %d; want 1 sent, none failed", sent, failed)
	}
	for _, id := range batchIDs {
		if err := st.AppendTurn(t.Context(), id, turnOf(id, 2), sim.StatusActive); err != nil {
			t.Errorf("%s's next append: %v", id, err)
		}
	}
	if d := cmp.Diff(want(2, batchIDs...), actions(t, stores[1], batchIDs...)); d != "" {
		t.Errorf("transcripts (-want +got):\n%s", d)
	}
}

// TestBatchWithAStaleAppend: one append of a batch whose store's copy is
// stale (another node appended meanwhile) makes the server refuse the
// batch; that append fails with sim.ErrMoved, the others are stored.
func TestBatchWithAStaleAppend(t *testing.T) {
	stores, _ := openCluster(t, nil)
	st, other := stores[0], stores[1]
	createAll(t, st, batchIDs...)
	const stale = "s_3"
	if err := other.AppendTurn(t.Context(), stale, turnOf(stale, 1), sim.StatusActive); err != nil {
		t.Fatal(err)
	}
	for i, err := range queued(t, st, 1, batchIDs...) {
		if batchIDs[i] == stale {
			if !errors.Is(err, sim.ErrMoved) {
				t.Errorf("the stale append: %v, want sim.ErrMoved", err)
			}
		} else if err != nil {
			t.Errorf("append %d: %v", i, err)
		}
	}
	if sent, failed := jetstore.Batches(st); sent != 1 || failed != 1 {
		t.Errorf("batches sent %d, failed %d; want the one refused", sent, failed)
	}
	if d := cmp.Diff(want(1, batchIDs...), actions(t, other, batchIDs...)); d != "" {
		t.Errorf("transcripts (-want +got):\n%s", d)
	}
}

// TestBatchLimits: a batch carries no more data than the server's
// max_payload (the queue goes out as several batches), and an entry over
// it fails with sim.ErrTooLarge as it does alone.
func TestBatchLimits(t *testing.T) {
	const limit = 64 << 10
	stores, _ := openCluster(t, &natstest.Options{MaxPayload: limit})
	st := stores[0]
	createAll(t, st, batchIDs...)
	errs := queuedTurns(t, st, func(id string) sim.TurnRecord {
		tr := turnOf(id, 1)
		tr.Observation = strings.Repeat("o", 20<<10) // three fit in a batch
		return tr
	}, batchIDs...)
	for i, err := range errs {
		if err != nil {
			t.Errorf("append %d: %v", i, err)
		}
	}
	if sent, failed := jetstore.Batches(st); sent != 2 || failed != 0 {
		t.Errorf("batches sent %d, failed %d; want 2 sent (six appends, three a batch), none failed", sent, failed)
	}
	huge := turnOf("s_0", 2)
	huge.Observation = strings.Repeat("o", 2*limit)
	if err := st.AppendTurn(t.Context(), "s_0", huge, sim.StatusActive); !errors.Is(err, sim.ErrTooLarge) {
		t.Errorf("an entry over max_payload: %v, want sim.ErrTooLarge", err)
	}
	if d := cmp.Diff(want(1, batchIDs...), actions(t, stores[2], batchIDs...)); d != "" {
		t.Errorf("transcripts (-want +got):\n%s", d)
	}
}

// TestBatchAcrossLeaderChange: the stream's leader steps down between a
// batch's first messages and its commit; the new leader never saw the
// batch and refuses it, and every append is then stored alone, once.
func TestBatchAcrossLeaderChange(t *testing.T) {
	stores, conns := openCluster(t, nil)
	st := stores[0]
	createAll(t, st, batchIDs...)
	js, err := jetstream.New(conns[0])
	if err != nil {
		t.Fatal(err)
	}
	once := sync.Once{}
	jetstore.BeforeBatchCommit(st, func() {
		once.Do(func() { stepDown(t, js, conns[0]) })
	})
	for i, err := range queued(t, st, 1, batchIDs...) {
		if err != nil {
			t.Errorf("append %d: %v", i, err)
		}
	}
	if sent, failed := jetstore.Batches(st); sent != 1 || failed != 1 {
		t.Errorf("batches sent %d, failed %d; want the one refused", sent, failed)
	}
	for _, id := range batchIDs {
		if err := st.AppendTurn(t.Context(), id, turnOf(id, 2), sim.StatusActive); err != nil {
			t.Errorf("%s's next append: %v", id, err)
		}
	}
	if d := cmp.Diff(want(2, batchIDs...), actions(t, stores[1], batchIDs...)); d != "" {
		t.Errorf("transcripts (-want +got):\n%s", d)
	}
}

// stepDown makes the session stream's leader step down and waits until
// another server leads it.
func stepDown(t *testing.T, js jetstream.JetStream, nc *nats.Conn) {
	t.Helper()
	leader := func() string {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, jetstore.DefaultStream)
		if err != nil {
			return ""
		}
		info, err := s.Info(ctx)
		if err != nil || info.Cluster == nil {
			return ""
		}
		return info.Cluster.Leader
	}
	old := leader()
	if _, err := nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+jetstore.DefaultStream, nil, 10*time.Second); err != nil {
		t.Errorf("step down: %v", err)
		return
	}
	waitFor(t, "a new stream leader", func() bool { l := leader(); return l != "" && l != old })
}

// TestBatchAckLost: a batch stored whose acknowledgement never came is
// made again append by append, each recognised as stored already: no
// error, no turn twice, and the next appends pass their checks.
func TestBatchAckLost(t *testing.T) {
	stores, _ := openCluster(t, nil)
	st := stores[0]
	createAll(t, st, batchIDs...)
	jetstore.LoseBatchAcks(st, 1)
	for i, err := range queued(t, st, 1, batchIDs...) {
		if err != nil {
			t.Errorf("append %d: %v", i, err)
		}
	}
	for _, id := range batchIDs {
		if err := st.AppendTurn(t.Context(), id, turnOf(id, 2), sim.StatusActive); err != nil {
			t.Errorf("%s's next append: %v", id, err)
		}
	}
	if d := cmp.Diff(want(2, batchIDs...), actions(t, stores[1], batchIDs...)); d != "" {
		t.Errorf("transcripts (-want +got):\n%s", d)
	}
}

// TestBatchOnAStreamUpgradedInPlace: a replicated stream made by an
// agentworld without group commit is updated to take atomic batches when
// a store opens it; if a node of the older kind turns them off again,
// the batch it refuses is stored append by append and the store stops
// batching.
func TestBatchOnAStreamUpgradedInPlace(t *testing.T) {
	urls := natstest.StartCluster(t, 3, nil)
	nc, err := nats.Connect(urls[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := jetstream.StreamConfig{Name: jetstore.DefaultStream, Subjects: []string{jetstore.DefaultPrefix + ">"},
		Storage: jetstream.FileStorage, Replicas: 3}
	waitFor(t, "the old stream made", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		_, err := js.CreateStream(ctx, cfg)
		return err == nil
	})
	st := open(t, nc, &jetstore.Options{Replicas: 3})
	if !jetstore.Batching(st) {
		t.Fatal("the store does not batch on the stream it updated")
	}
	jetstore.PatientBatches(st)
	createAll(t, st, batchIDs...)
	if _, err := js.UpdateStream(t.Context(), cfg); err != nil { // an older node's setup
		t.Fatal(err)
	}
	for i, err := range queued(t, st, 1, batchIDs...) {
		if err != nil {
			t.Errorf("append %d: %v", i, err)
		}
	}
	if jetstore.Batching(st) {
		t.Error("the store still batches on a stream that refuses batches")
	}
	if d := cmp.Diff(want(1, batchIDs...), actions(t, st, batchIDs...)); d != "" {
		t.Errorf("transcripts (-want +got):\n%s", d)
	}
}

// TestBatchUnderLoad: writers on three nodes append to their sessions at
// once, some to sessions another node writes too (stale appends inside
// batches); every append that succeeded is in its transcript once, in
// order, and none that failed is.
func TestBatchUnderLoad(t *testing.T) {
	stores, _ := openCluster(t, nil)
	const writers, turns = 24, 12
	ids := make([]string, writers)
	for i := range ids {
		ids[i] = fmt.Sprintf("s_%d", i)
	}
	createAll(t, stores[0], ids...)
	var mu sync.Mutex
	stored := map[string][]string{}
	var wg sync.WaitGroup
	for w := range writers {
		// Writer w appends to session w through node w%3; a second writer
		// on another node contends for every fourth session.
		run := func(st *jetstore.Store, id, tag string) {
			defer wg.Done()
			for n := 1; n <= turns; n++ {
				tr := turnOf(id+tag, n)
				err := st.AppendTurn(t.Context(), id, tr, sim.StatusActive)
				switch {
				case err == nil:
					mu.Lock()
					stored[id] = append(stored[id], tr.Action)
					mu.Unlock()
				case errors.Is(err, sim.ErrMoved):
					if _, _, err := st.LoadSession(t.Context(), id); err != nil {
						t.Errorf("reload %s: %v", id, err)
						return
					}
				default:
					t.Errorf("append to %s: %v", id, err)
					return
				}
			}
		}
		wg.Add(1)
		go run(stores[w%3], ids[w], "")
		if w%4 == 0 {
			wg.Add(1)
			go run(stores[(w+1)%3], ids[w], "'")
		}
	}
	wg.Wait()
	got := actions(t, stores[2], ids...)
	for _, id := range ids {
		// Contending writers' turns interleave as the stream took them:
		// every acknowledged one is there once, and nothing else.
		if len(stored[id]) != len(got[id]) {
			t.Errorf("%s: %d turns acknowledged, transcript %v", id, len(stored[id]), got[id])
		}
		seen := map[string]bool{}
		for _, a := range got[id] {
			if seen[a] {
				t.Errorf("%s: %s twice", id, a)
			}
			seen[a] = true
		}
		for _, a := range stored[id] {
			if !seen[a] {
				t.Errorf("%s: acknowledged %s missing", id, a)
			}
		}
	}
}
