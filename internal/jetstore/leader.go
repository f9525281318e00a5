package jetstore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/textproto"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// OwnerFromLeader is Owner read from the owners stream's leader. Owner's
// key-value get may be answered by a replica that has not yet seen a
// record just written (a session created on another node a moment ago),
// so a router that finds no owner asks again here before it serves the
// session itself: without that, a step sent to another node right after
// the create would be served by two nodes.
func (s *Store) OwnerFromLeader(ctx context.Context, id string) (Lease, error) {
	epoch := s.currentEpoch()
	e, err := s.lastFromLeader(ctx, s.o.OwnersBucket, key(id))
	switch {
	case err != nil:
		return Lease{}, fmt.Errorf("owner of session %s from the leader: %w", id, err)
	case e.seq == 0 || e.deleted:
		return Lease{}, nil
	}
	return s.leaseOf(ctx, id, e.data, e.seq, epoch)
}

// leaderEntry is a key-value entry as its stream's leader has it.
type leaderEntry struct {
	data []byte
	// seq is the entry's revision; 0 when the key has none.
	seq uint64
	// deleted marks a delete or purge marker at seq.
	deleted bool
	// at is when the leader stored it.
	at time.Time
}

// lastFromLeader reads key's latest entry in bucket from the bucket
// stream's leader, never from a replica that may lag behind it. A stream
// electing its leader does not answer at all, so the read is retried
// under short deadlines (retry).
func (s *Store) lastFromLeader(ctx context.Context, bucket, k string) (leaderEntry, error) {
	req, _ := json.Marshal(map[string]string{"last_by_subj": "$KV." + bucket + "." + k})
	var msg *nats.Msg
	if err := s.retry(ctx, func(ctx context.Context) (err error) {
		msg, err = s.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET.KV_"+bucket, req)
		return err
	}); err != nil {
		return leaderEntry{}, err
	}
	var resp struct {
		Message *struct {
			Seq  uint64    `json:"seq"`
			Hdrs []byte    `json:"hdrs"`
			Data []byte    `json:"data"`
			Time time.Time `json:"time"`
		} `json:"message"`
		Error *struct {
			Code        int    `json:"code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return leaderEntry{}, err
	}
	switch {
	case resp.Error != nil && resp.Error.Code == 404:
		return leaderEntry{}, nil
	case resp.Error != nil:
		return leaderEntry{}, &jetstream.APIError{Code: resp.Error.Code, Description: resp.Error.Description}
	case resp.Message == nil:
		return leaderEntry{}, errors.New("an empty answer")
	}
	m := resp.Message
	return leaderEntry{data: m.Data, seq: m.Seq, deleted: deleted(m.Hdrs), at: m.Time}, nil
}

// deleted says whether a key-value message's headers mark a delete or
// purge.
func deleted(hdrs []byte) bool {
	if len(hdrs) == 0 {
		return false
	}
	r := textproto.NewReader(bufio.NewReader(bytes.NewReader(hdrs)))
	if _, err := r.ReadLine(); err != nil { // NATS/1.0
		return false
	}
	h, _ := r.ReadMIMEHeader()
	op := h.Get("KV-Operation")
	return op == "DEL" || op == "PURGE"
}
