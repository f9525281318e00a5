package jetstore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/textproto"
)

// OwnerFromLeader is Owner read from the owners stream's leader. Owner's
// key-value get may be answered by a replica that has not yet seen a
// record just written (a session created on another node a moment ago),
// so a router that finds no owner asks again here before it serves the
// session itself: without that, a step sent to another node right after
// the create would be served by two nodes.
func (s *Store) OwnerFromLeader(ctx context.Context, id string) (Lease, error) {
	epoch := s.currentEpoch()
	req, _ := json.Marshal(map[string]string{"last_by_subj": "$KV." + s.o.OwnersBucket + "." + key(id)})
	msg, err := s.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET.KV_"+s.o.OwnersBucket, req)
	if err != nil {
		return Lease{}, fmt.Errorf("owner of session %s from the leader: %w", id, err)
	}
	var resp struct {
		Message *struct {
			Seq  uint64 `json:"seq"`
			Hdrs []byte `json:"hdrs"`
			Data []byte `json:"data"`
		} `json:"message"`
		Error *struct {
			Code        int    `json:"code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return Lease{}, fmt.Errorf("owner of session %s from the leader: %w", id, err)
	}
	switch {
	case resp.Error != nil && resp.Error.Code == 404:
		return Lease{}, nil
	case resp.Error != nil:
		return Lease{}, fmt.Errorf("owner of session %s from the leader: %d %s", id, resp.Error.Code, resp.Error.Description)
	case resp.Message == nil:
		return Lease{}, errors.New("owner of session " + id + " from the leader: an empty answer")
	case deleted(resp.Message.Hdrs):
		return Lease{}, nil
	}
	return s.leaseOf(ctx, id, resp.Message.Data, resp.Message.Seq, epoch)
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
