package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/agentworld/agentworld/internal/jsonappend"
)

// Session statuses as stored.
const (
	StatusActive     = "active"
	StatusTerminated = "terminated"
	StatusTruncated  = "truncated"
	StatusClosed     = "closed"
	StatusExpired    = "expired"
	StatusBroken     = "broken"
)

// SessionRecord is a session as persisted.
type SessionRecord struct {
	ID      string `json:"id"`
	Parent  string `json:"parent,omitempty"`
	Root    string `json:"root"`
	World   string `json:"world"`
	Domain  string `json:"domain"`
	Backend string `json:"backend"`
	Model   string `json:"model,omitempty"`
	Seed    *int64 `json:"seed,omitempty"`
	// Spec is the world spec as JSON, so the session survives spec edits.
	Spec json.RawMessage `json:"spec"`
	// Inline is set for a session of a spec its client sent inline rather
	// than a world the server loaded: the SHA-256 (hex) of Spec. State kept
	// per world (fictional-world ledgers) is kept under it, so a client
	// cannot write into a loaded world's by reusing its name.
	Inline             string                     `json:"inline,omitempty"`
	SystemPrompt       string                     `json:"system_prompt"`
	InitialObservation string                     `json:"initial_observation"`
	Params             map[string]json.RawMessage `json:"params,omitempty"`
	Labels             map[string]string          `json:"labels,omitempty"`
	// Private marks a session no client can address (CreateRequest.Private).
	Private   bool      `json:"private,omitempty"`
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// TurnRecord is one recorded step.
type TurnRecord struct {
	Turn int `json:"turn"`
	HistoryTurn
	// Result is the step's reply, returned again for a retried step.
	Result StepResult `json:"result"`
}

// ErrNotFound is returned by a Store for an id it does not hold.
var ErrNotFound = errors.New("not found")

// Store persists sessions and their turns. Implementations must make each
// call atomic: after a crash a session has exactly the turns whose
// AppendTurn returned.
type Store interface {
	CreateSession(ctx context.Context, s SessionRecord, turns []TurnRecord) error
	AppendTurn(ctx context.Context, id string, t TurnRecord, status string) error
	SetStatus(ctx context.Context, id, status string) error
	// LoadSession returns ErrNotFound for an unknown id.
	LoadSession(ctx context.Context, id string) (SessionRecord, []TurnRecord, error)
	Close() error
}

// ResultAppender is a Store that records a turn whose result the step has
// already encoded (for its reply), so the store need not encode it again.
// The Manager uses it when its Store has it.
type ResultAppender interface {
	// AppendTurnResult is AppendTurn, with result holding t.Result as
	// [EncodeResult] wrote it.
	AppendTurnResult(ctx context.Context, id string, t TurnRecord, result []byte, status string) error
}

// EncodeResult encodes r as a step's HTTP reply carries it: JSON without
// HTML escaping, ending in a newline (what json.Encoder writes). It
// encodes in a reused buffer and returns a copy: one allocation. The
// usual result, without maps in its info and with a finite reward, is
// written field by field (appendResult); any other by encoding/json.
func EncodeResult(r *StepResult) ([]byte, error) {
	buf := resultBufs.Get().(*[]byte)
	defer func() {
		if cap(*buf) <= 1<<20 { // an outsized result's buffer is let go
			resultBufs.Put(buf)
		}
	}()
	b, ok := appendResult((*buf)[:0], r)
	if !ok {
		w := bytes.NewBuffer(b[:0])
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(r); err != nil {
			return nil, err
		}
		b = w.Bytes()
	}
	*buf = b
	return bytes.Clone(b), nil
}

// resultBufs holds the buffers EncodeResult encodes in.
var resultBufs = sync.Pool{New: func() any { return new([]byte) }}

// appendResult appends r as encoding/json encodes it (struct field order,
// omitempty), when r's info holds no map (reward components, labels,
// extra) and its reward is finite; otherwise ok is false. Every field of
// StepResult and StepInfo must be written here (FuzzEncodeResult sets
// each).
func appendResult(b []byte, r *StepResult) (_ []byte, ok bool) {
	in := &r.Info
	if len(in.RewardComponents) > 0 || len(in.Labels) > 0 || len(in.Extra) > 0 {
		return b, false
	}
	b = jsonappend.String(append(b, `{"observation":`...), r.Observation)
	if b, ok = jsonappend.Float(append(b, `,"reward":`...), r.Reward); !ok {
		return b, false
	}
	b = strconv.AppendBool(append(b, `,"terminated":`...), r.Terminated)
	b = strconv.AppendBool(append(b, `,"truncated":`...), r.Truncated)
	b = strconv.AppendInt(append(b, `,"info":{"turn":`...), int64(in.Turn), 10)
	b = strconv.AppendInt(append(b, `,"latency_ms":`...), in.LatencyMS, 10)
	b = jsonappend.String(append(b, `,"backend":`...), in.Backend)
	b = appendSet(b, `,"replica":`, in.Replica)
	b = appendSet(b, `,"model":`, in.Model)
	b = appendCount(b, `,"prompt_tokens":`, in.PromptTokens)
	b = appendCount(b, `,"completion_tokens":`, in.CompletionTokens)
	b = appendCount(b, `,"cached_tokens":`, in.CachedTokens)
	b = appendSet(b, `,"finish_reason":`, in.FinishReason)
	b = appendSet(b, `,"reasoning":`, in.Reasoning)
	if in.Approximate {
		b = append(b, `,"approximate":true`...)
	}
	b = appendSet(b, `,"error":`, in.Error)
	b = appendCount(b, `,"retries":`, in.Retries)
	b = appendCount(b, `,"transport_retries":`, in.TransportRetries)
	b = appendCount(b, `,"history_cut":`, in.HistoryCut)
	if in.PrefixBreak {
		b = append(b, `,"prefix_break":true`...)
	}
	b = appendSet(b, `,"end_reason":`, in.EndReason)
	return append(b, "}}\n"...), true
}

// appendSet appends an omitempty string field that is set.
func appendSet(b []byte, key, v string) []byte {
	if v == "" {
		return b
	}
	return jsonappend.String(append(b, key...), v)
}

// appendCount appends an omitempty int field that is set.
func appendCount(b []byte, key string, v int) []byte {
	if v == 0 {
		return b
	}
	return strconv.AppendInt(append(b, key...), int64(v), 10)
}

// MemStore is a Store in memory, for tests and for running without a
// database file.
type MemStore struct {
	mu       sync.Mutex
	sessions map[string]SessionRecord
	turns    map[string][]TurnRecord
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore {
	return &MemStore{sessions: map[string]SessionRecord{}, turns: map[string][]TurnRecord{}}
}

// CreateSession implements Store.
func (m *MemStore) CreateSession(_ context.Context, s SessionRecord, turns []TurnRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.sessions[s.ID]; ok { // as a database's unique key would
		return fmt.Errorf("%w: %s is in the store", ErrSessionExists, s.ID)
	}
	m.sessions[s.ID] = s
	m.turns[s.ID] = append([]TurnRecord(nil), turns...)
	return nil
}

// AppendTurn implements Store.
func (m *MemStore) AppendTurn(_ context.Context, id string, t TurnRecord, status string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[id]
	if !ok {
		return ErrNotFound
	}
	m.turns[id] = append(m.turns[id], t)
	s.Status, s.UpdatedAt = status, time.Now().UTC()
	m.sessions[id] = s
	return nil
}

// SetStatus implements Store.
func (m *MemStore) SetStatus(_ context.Context, id, status string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[id]
	if !ok {
		return ErrNotFound
	}
	s.Status, s.UpdatedAt = status, time.Now().UTC()
	m.sessions[id] = s
	return nil
}

// LoadSession implements Store.
func (m *MemStore) LoadSession(_ context.Context, id string) (SessionRecord, []TurnRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[id]
	if !ok {
		return SessionRecord{}, nil, ErrNotFound
	}
	return s, append([]TurnRecord(nil), m.turns[id]...), nil
}

// Close implements Store.
func (m *MemStore) Close() error { return nil }
