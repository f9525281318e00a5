package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/worldmodel"
)

// resultStore is a MemStore that takes encoded results, as the SQLite
// store does, and keeps what it was given.
type resultStore struct {
	*MemStore
	results [][]byte
}

func (s *resultStore) AppendTurnResult(ctx context.Context, id string, t TurnRecord, result []byte, status string) error {
	s.results = append(s.results, result)
	return s.AppendTurn(ctx, id, t, status)
}

// StepJSON encodes a computed step's result once: the bytes it returns
// are EncodeResult's (what the HTTP reply writes) and the ones the store
// is handed; a retried turn's stored result comes back unencoded.
func TestStepJSONEncodesOnce(t *testing.T) {
	st := &resultStore{MemStore: NewMemStore()}
	m := newTestManager(t, &scriptedModel{replies: []worldmodel.Response{{Content: "a <b> & c", FinishReason: "stop"}}}, Options{Store: st})
	rep, err := m.Create(context.Background(), CreateRequest{WorldID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	req := StepRequest{Action: json.RawMessage(`[{"keystrokes":"ls\n"}]`), Turn: 1}
	res, enc, err := m.StepJSON(context.Background(), rep.SessionID, req)
	if err != nil {
		t.Fatal(err)
	}
	want, err := EncodeResult(res)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(enc, want) {
		t.Errorf("StepJSON bytes\n%s\nwant EncodeResult's\n%s", enc, want)
	}
	if len(st.results) != 1 || !bytes.Equal(st.results[0], want) {
		t.Errorf("store was given %q, want %q", st.results, want)
	}
	again, enc2, err := m.StepJSON(context.Background(), rep.SessionID, req)
	if err != nil {
		t.Fatal(err)
	}
	if enc2 != nil {
		t.Errorf("retried turn: bytes %q, want none", enc2)
	}
	if diff := cmp.Diff(res, again); diff != "" {
		t.Errorf("retried turn (-first +again):\n%s", diff)
	}
}
