package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/agentworld/agentworld/internal/world"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// fixedAnswer answers every request with the same response at once, the
// zero-cost model of BenchmarkManagerStep. The Manager does not write to a
// response it was given unless it retries, which this answer never causes,
// so one is shared.
type fixedAnswer struct{ r *worldmodel.Response }

func (f fixedAnswer) Complete(context.Context, worldmodel.Request) (*worldmodel.Response, error) {
	return f.r, nil
}

// writeOnlyStore takes encoded results (a ResultAppender), as the SQLite
// store serve uses does, and keeps nothing: what a store costs is not the
// simulator's work.
type writeOnlyStore struct{}

func (writeOnlyStore) CreateSession(context.Context, SessionRecord, []TurnRecord) error { return nil }
func (writeOnlyStore) AppendTurn(context.Context, string, TurnRecord, string) error     { return nil }
func (writeOnlyStore) AppendTurnResult(context.Context, string, TurnRecord, []byte, string) error {
	return nil
}
func (writeOnlyStore) SetStatus(context.Context, string, string) error { return nil }
func (writeOnlyStore) LoadSession(context.Context, string) (SessionRecord, []TurnRecord, error) {
	return SessionRecord{}, nil, ErrNotFound
}
func (writeOnlyStore) Close() error { return nil }

// nopHook is a step hook that does nothing, standing for the hooks serve
// always runs (a ledger and perturbation rules, idle for a world without
// facts or rules), so the hooks' path is part of the step.
type nopHook struct{}

func (nopHook) BeforeStep(context.Context, SessionInfo, *StepInput) (*Observation, error) {
	return nil, nil
}
func (nopHook) AfterStep(context.Context, SessionInfo, StepInput, StepResult) {}

// countSteps is an Observer that counts, standing for serve's metrics.
type countSteps struct{ n int }

func (c *countSteps) ObserveStep(StepEvent) { c.n++ }

// BenchmarkManagerStep measures the simulator's own work in one step
// (Manager.StepJSON, as the HTTP server calls it) against a model that
// answers at once: parsing the action, the session's history, the prompt
// and the check that it extends the previous one, the reply's encoding and
// the turn's record. Like
// the server benchmark's agents, 64 sessions of the bundled python-terminal
// world are stepped in turn, `turns` times each, so every history grows
// from 0 to turns-1 turns; sessions are opened with the timer stopped.
//
//	go test ./internal/sim -run '^$' -bench ManagerStep -benchmem
func BenchmarkManagerStep(b *testing.B) {
	spec, err := world.Load("../../examples/worlds/python-terminal.yaml")
	if err != nil {
		b.Fatal(err)
	}
	answer := &worldmodel.Response{
		Content:      "<think>t</think><predicted_observation>root@7f3c9e2a1b4d:/app# ls\nREADME.md  pyproject.toml  src  tests\nroot@7f3c9e2a1b4d:/app#</predicted_observation>",
		FinishReason: "stop", Model: "wm", PromptTokens: 100, CompletionTokens: 7, Attempts: 1,
	}
	const sessions = 64
	for _, turns := range []int{20, 100} {
		b.Run(fmt.Sprintf("turns=%d", turns), func(b *testing.B) {
			obs := &countSteps{}
			m := New(&Options{
				Store:       writeOnlyStore{},
				Worlds:      map[string]*world.Spec{spec.Name: spec},
				Backends:    map[string]BackendFactory{BackendModel: NewModelBackend(fixedAnswer{answer}, nil)},
				Hooks:       []StepHook{nopHook{}, nopHook{}},
				Observer:    obs,
				MaxTurns:    turns + 1,
				MaxSessions: 2 * sessions,
			})
			defer m.Close(context.Background())
			actions := make([]json.RawMessage, turns)
			for i := range actions {
				actions[i] = json.RawMessage(fmt.Sprintf(`[{"keystrokes":"echo %d\n","duration":0.1}]`, i+1))
			}
			ctx := context.Background()
			ids := make([]string, sessions)
			next, turn := sessions, turns // the session stepped next, its turn
			for b.Loop() {
				if next == sessions {
					next = 0
					if turn++; turn > turns {
						b.StopTimer()
						for i := range ids {
							if ids[i] != "" {
								if err := m.Delete(ctx, ids[i]); err != nil {
									b.Fatal(err)
								}
							}
							rep, err := m.Create(ctx, CreateRequest{WorldID: spec.Name})
							if err != nil {
								b.Fatal(err)
							}
							ids[i] = rep.SessionID
						}
						turn = 1
						b.StartTimer()
					}
				}
				id := ids[next]
				next++
				res, enc, err := m.StepJSON(ctx, id, StepRequest{Action: actions[turn-1], Turn: turn})
				if err != nil {
					b.Fatal(err)
				}
				if res.Info.Turn != turn || len(enc) == 0 || res.Info.PrefixBreak {
					b.Fatalf("turn %d: %+v, %d bytes", turn, res.Info, len(enc))
				}
			}
		})
	}
}

// BenchmarkManagerCreate measures opening (and closing) a session of a
// loaded world, the bundled python-terminal:
//
//	go test ./internal/sim -run '^$' -bench ManagerCreate -benchmem
func BenchmarkManagerCreate(b *testing.B) {
	spec, err := world.Load("../../examples/worlds/python-terminal.yaml")
	if err != nil {
		b.Fatal(err)
	}
	m := New(&Options{
		Store:    writeOnlyStore{},
		Worlds:   map[string]*world.Spec{spec.Name: spec},
		Backends: map[string]BackendFactory{BackendModel: NewModelBackend(fixedAnswer{}, nil)},
	})
	defer m.Close(context.Background())
	ctx := context.Background()
	for b.Loop() {
		rep, err := m.Create(ctx, CreateRequest{WorldID: spec.Name})
		if err != nil {
			b.Fatal(err)
		}
		if err := m.Delete(ctx, rep.SessionID); err != nil {
			b.Fatal(err)
		}
	}
}
