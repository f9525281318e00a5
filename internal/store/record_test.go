package store

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/sim"
)

// A turn recorded with the result its step already encoded for the reply
// (AppendTurnResult) is stored byte for byte as AppendTurn stores it: the
// reply's encoding does not escape HTML and the record's does, so the
// cases hold <, > and &, the line and paragraph separators JSON escapes
// in both, invalid UTF-8, and the maps and empty fields the encoders sort
// or leave out.
func TestEncodeRecordWithResult(t *testing.T) {
	for _, tc := range []struct {
		name string
		rec  sim.TurnRecord
	}{
		{"empty", sim.TurnRecord{}},
		{"plain", sim.TurnRecord{Turn: 3, HistoryTurn: sim.HistoryTurn{Action: "ls", Observation: "a b"},
			Result: sim.StepResult{Observation: "a b", Reward: 0.5, Info: sim.StepInfo{Turn: 3, Backend: "llm", Model: "m"}}}},
		{"html", sim.TurnRecord{Turn: 1, HistoryTurn: sim.HistoryTurn{Action: "<a href='x'>&amp;</a>", Observation: "1 < 2 && 3 > 2", Message: "<b>", Assistant: "&"},
			Result: sim.StepResult{Observation: "1 < 2 && 3 > 2 <script>", Terminated: true, Info: sim.StepInfo{EndReason: "<done> & over", Error: "x>y"}}}},
		{"separators and bad utf-8", sim.TurnRecord{Turn: 2, HistoryTurn: sim.HistoryTurn{Action: "a\u2028b\u2029c"},
			Result: sim.StepResult{Observation: "a\u2028b\u2029c\xff\xfe \"q\" \\ \t\n\x01 é 世界 😀", Truncated: true}}},
		{"maps", sim.TurnRecord{Turn: 9, Result: sim.StepResult{Reward: -1.25e-7, Info: sim.StepInfo{
			Labels:           map[string]string{"z": "<1>", "a": "&", "m": ""},
			RewardComponents: map[string]float64{"b<": 1, "a": 0.1},
			Extra:            map[string]json.RawMessage{"k": json.RawMessage(`{ "x" : "<&>" , "n": [1, 2] }`)},
		}}}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkRecordWithResult(t, tc.rec) })
	}
}

func checkRecordWithResult(t *testing.T, rec sim.TurnRecord) {
	t.Helper()
	want, err := encodeRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sim.EncodeResult(&rec.Result)
	if err != nil {
		t.Fatal(err)
	}
	got, err := encodeRecordWith(rec, res)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("record (-AppendTurn +AppendTurnResult):\n%s", diff)
	}
}

// FuzzEncodeRecordWithResult holds the byte-for-byte equality for any
// text a world model or an agent sends.
func FuzzEncodeRecordWithResult(f *testing.F) {
	f.Add("ls", "<a>&</a>", "k", "\u2028\xff")
	f.Fuzz(func(t *testing.T, action, obs, label, reason string) {
		checkRecordWithResult(t, sim.TurnRecord{Turn: 1, HistoryTurn: sim.HistoryTurn{Action: action, Observation: obs, Message: reason},
			Result: sim.StepResult{Observation: obs, Info: sim.StepInfo{EndReason: reason, Labels: map[string]string{label: obs}}}})
	})
}
