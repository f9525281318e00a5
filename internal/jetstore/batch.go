package jetstore

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Group commit. On a replicated stream every publish is a RAFT proposal
// the leader hands to its followers and each server applies, and each
// costs every server several goroutine hand-offs. So while one append of
// this store is on its way, the appends that arrive meanwhile wait, and
// go out together as one JetStream atomic batch (ADR-50: messages staged
// under a Nats-Batch-Id, proposed to RAFT as one entry list when the one
// carrying Nats-Batch-Commit arrives, applied all or none, acknowledged
// once). An append that finds nothing on its way goes out at once, alone,
// as a plain publish: no timers, no latency added at low load.
//
// Each message keeps its own expected-last-subject-sequence check, but
// the server refuses the whole batch when one fails, and then no message
// of it was stored: every append of a refused batch is made again alone
// (putOne), so a stale writer's gets sim.ErrMoved exactly as it would
// have, and the others land. A batch whose acknowledgement never came may
// have been stored: its appends are made again alone as ones whose
// attempt timed out (put's own-message recognition). Batching is only for
// replicated streams: on one server the stream's store would stage each
// batch in a file store of its own, which costs more than it saves
// (docs/performance.md).

const (
	// maxBatch is the most appends one batch carries (nats-server takes
	// 1,000 by default; a server configured for fewer refuses larger
	// batches, and the store then halves its limit).
	maxBatch = 64
	// maxBatchBytes bounds a batch's data (and the server's max_payload
	// when it is smaller): an append larger than that goes out alone.
	maxBatchBytes = 1 << 20
	// batchHeaderRoom is what a batch message's headers add to its data.
	batchHeaderRoom = 512
)

// Error codes of the atomic batch publish API (nats-server's
// errors.json).
const (
	errCodeAtomicDisabled jetstream.ErrorCode = 10174
	errCodeBatchTooLarge  jetstream.ErrorCode = 10199
)

// batcher queues a store's appends while one is on its way.
type batcher struct {
	prefix string        // of batch ids: random, so no two stores' ids meet
	n      atomic.Uint64 // batches made, for their ids
	off    atomic.Bool   // the stream refused atomic batches: publish alone

	mu    sync.Mutex
	busy  bool // an append or batch is on its way
	queue []*batchOp
	max   int // appends per batch; halved when the server refuses as many
	bytes int // data per batch
	// wait bounds the wait for a batch's acknowledgement, after which
	// its appends are made alone (tests make it long).
	wait time.Duration

	// stage publishes a batch's message that is not its last one (no
	// answer is asked); commit sends its last and waits for the batch's
	// acknowledgement. Tests wrap them.
	stage  func(m *nats.Msg) error
	commit func(ctx context.Context, m *nats.Msg) (*nats.Msg, error)
	// sent counts the batches of two or more appends sent, carried the
	// appends in them, failed those refused or unanswered (tests,
	// benchmarks).
	sent, carried, failed atomic.Int64
}

// batchOp is one append waiting in a batcher's queue.
type batchOp struct {
	subj  string
	data  []byte
	seq   uint64
	start time.Time
	wake  chan struct{} // closed once the op leads a batch or has its outcome

	// Set before wake is closed.
	lead  []*batchOp // the batch this op sends (it is lead[0])
	at    uint64     // the stored message's sequence
	again bool       // the batch failed: make the append alone
	// unsure: the failed batch may have been stored (no answer came).
	unsure bool
}

// newBatcher is a batcher publishing on nc that waits up to wait for a
// batch's acknowledgement.
func newBatcher(nc *nats.Conn, wait time.Duration) *batcher {
	var r [12]byte
	_, _ = rand.Read(r[:])
	b := &batcher{prefix: base64.RawURLEncoding.EncodeToString(r[:]), max: maxBatch,
		bytes: min(maxBatchBytes, int(nc.MaxPayload())), wait: wait}
	b.stage = nc.PublishMsg
	b.commit = nc.RequestMsgWithContext
	return b
}

// batchingFor sets up group commit when st, just created or updated, is
// replicated and takes atomic batches (a server older than 2.12 does not
// keep AllowAtomicPublish in the stream's configuration).
func (s *Store) batchingFor(st jetstream.Stream) {
	info := st.CachedInfo()
	if info == nil || info.Config.Replicas < 2 || !info.Config.AllowAtomicPublish {
		s.batch = nil
		return
	}
	if s.batch == nil {
		s.batch = newBatcher(s.nc, min(lastAttempt, s.o.Wait))
	}
}

// put publishes data to subj if the subject's last message is seq (0:
// the subject is empty) and returns the new message's sequence (see
// putOne), in a batch with the appends that arrive while an earlier one
// is on its way.
func (s *Store) put(ctx context.Context, subj string, data []byte, seq uint64) (uint64, error) {
	b := s.batch
	if b == nil || b.off.Load() || len(data)+batchHeaderRoom > b.bytes {
		return s.putOne(ctx, subj, data, seq, false)
	}
	b.mu.Lock()
	if !b.busy {
		b.busy = true
		b.mu.Unlock()
		at, err := s.putOne(ctx, subj, data, seq, false)
		s.handOn()
		return at, err
	}
	// Made under the lock only when it waits: an append going out alone
	// (every one at low load) allocates nothing for the queue.
	op := &batchOp{subj: subj, data: data, seq: seq, start: time.Now(), wake: make(chan struct{})}
	b.queue = append(b.queue, op)
	b.mu.Unlock()
	select {
	case <-op.wake:
	case <-ctx.Done():
		b.mu.Lock()
		for i, q := range b.queue {
			if q == op {
				b.queue = append(b.queue[:i], b.queue[i+1:]...)
				b.mu.Unlock()
				return 0, ctx.Err()
			}
		}
		b.mu.Unlock()
		// Taken into a batch already: its outcome (or the lead of it,
		// which the others of the batch wait for) comes soon.
		<-op.wake
	}
	if op.lead != nil {
		if len(op.lead) == 1 {
			at, err := s.putOne(ctx, subj, data, seq, false)
			s.handOn()
			return at, err
		}
		s.sendBatch(op.lead)
		s.handOn()
	}
	if !op.again {
		return op.at, nil
	}
	// The batch was refused or not answered: alone, within what is left
	// of the store's Wait (at least one attempt's worth).
	end := op.start.Add(s.o.Wait)
	if e := time.Now().Add(lastAttempt); end.Before(e) {
		end = e
	}
	actx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	return s.putOne(actx, subj, data, seq, op.unsure)
}

// handOn passes the batcher on after an append or batch got its outcome:
// the appends queued meanwhile (up to a batch's limits) become the next
// batch, led by the first of them; with none queued the batcher is idle.
func (s *Store) handOn() {
	b := s.batch
	b.mu.Lock()
	if len(b.queue) == 0 {
		b.busy = false
		b.mu.Unlock()
		return
	}
	n, size := 0, 0
	for n < len(b.queue) && n < b.max {
		size += len(b.queue[n].data) + batchHeaderRoom
		if n > 0 && size > b.bytes {
			break
		}
		n++
	}
	next := make([]*batchOp, n)
	copy(next, b.queue[:n])
	b.queue = append(b.queue[:0], b.queue[n:]...)
	b.mu.Unlock()
	next[0].lead = next
	close(next[0].wake)
}

// batchAck is the acknowledgement of an atomic batch.
type batchAck struct {
	Error    *jetstream.APIError `json:"error,omitempty"`
	Stream   string              `json:"stream"`
	Sequence uint64              `json:"seq"`
	Batch    string              `json:"batch"`
	Count    int                 `json:"count"`
}

// sendBatch stores ops (the first of which is the caller's) and tells
// each of the others its outcome.
func (s *Store) sendBatch(ops []*batchOp) {
	b := s.batch
	again, unsure, err := s.commitBatch(ops)
	if err != nil {
		b.failed.Add(1)
		s.log.Debug("JetStream atomic batch not stored; its appends are made one by one",
			"appends", len(ops), "unsure", unsure, "err", err)
	}
	for i, op := range ops {
		op.again, op.unsure = again, unsure
		if i > 0 {
			close(op.wake)
		}
	}
}

// commitBatch sends ops as one atomic batch: on success each op has its
// sequence; otherwise again is true, and unsure says the batch may have
// been stored.
func (s *Store) commitBatch(ops []*batchOp) (again, unsure bool, err error) {
	b := s.batch
	b.sent.Add(1)
	b.carried.Add(int64(len(ops)))
	id := b.prefix + "." + strconv.FormatUint(b.n.Add(1), 36)
	ctx, cancel := context.WithTimeout(context.Background(), b.wait)
	defer cancel()
	var reply *nats.Msg
	for i, op := range ops {
		m := nats.NewMsg(op.subj)
		m.Data = op.data
		m.Header.Set(jetstream.ExpectedStreamHeader, s.o.Stream)
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(op.seq, 10))
		m.Header.Set("Nats-Batch-Id", id)
		m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i+1))
		if i < len(ops)-1 {
			if err = b.stage(m); err != nil {
				// Nothing is stored before the commit; the server drops
				// the staged messages after its batch timeout.
				return true, false, err
			}
			continue
		}
		m.Header.Set("Nats-Batch-Commit", "1")
		if reply, err = b.commit(ctx, m); err != nil {
			// Without responders (no stream leader) nothing was taken.
			return true, !errors.Is(err, nats.ErrNoResponders), err
		}
	}
	var ack batchAck
	if err := json.Unmarshal(reply.Data, &ack); err != nil {
		return true, true, fmt.Errorf("batch acknowledgement %q: %w", reply.Data, err)
	}
	if ack.Error != nil {
		// Refused before it was proposed: nothing of it is stored.
		switch ack.Error.ErrorCode {
		case errCodeAtomicDisabled:
			// A node of an older agentworld updated the stream without
			// AllowAtomicPublish: publish alone from now on.
			b.off.Store(true)
		case errCodeBatchTooLarge:
			b.mu.Lock()
			b.max = max(2, b.max/2)
			b.mu.Unlock()
		}
		return true, false, ack.Error
	}
	if ack.Batch != id || ack.Count != len(ops) || ack.Sequence < uint64(len(ops)) {
		// Not an atomic batch's answer: a server that ignores the batch
		// headers stored each message alone, each at a sequence of its
		// own. Recognise them one by one, and batch no more.
		b.off.Store(true)
		return true, true, fmt.Errorf("acknowledgement %q is not batch %s's of %d messages", reply.Data, id, len(ops))
	}
	// An atomic batch is stored in one piece: its messages have the
	// sequences up to the acknowledged one, in order.
	for i, op := range ops {
		op.at = ack.Sequence - uint64(len(ops)-1-i)
	}
	return false, false, nil
}
