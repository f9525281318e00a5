package jetstore

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/store/storetest"
)

// TestResultTurnIsTurnRecord: a turn appended with its result already
// encoded is the same message as one appended by AppendTurn, and
// sim.TurnRecord has no field resultTurn would leave out.
func TestResultTurnIsTurnRecord(t *testing.T) {
	var names []string
	rt := reflect.TypeFor[sim.TurnRecord]()
	for i := range rt.NumField() {
		names = append(names, rt.Field(i).Name)
	}
	if d := cmp.Diff([]string{"Turn", "HistoryTurn", "Result"}, names); d != "" {
		t.Fatalf("sim.TurnRecord's fields changed; resultTurn must follow (-resultTurn +TurnRecord):\n%s", d)
	}
	tr := storetest.Turn(3)
	at := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	want, err := json.Marshal(entry{Kind: "turn", Turn: &tr, Status: sim.StatusActive, At: at})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := sim.EncodeResult(&tr.Result)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(resultEntry{Kind: "turn", Turn: resultTurn{Turn: tr.Turn, HistoryTurn: tr.HistoryTurn, Result: enc}, Status: sim.StatusActive, At: at})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Errorf("the pre-encoded turn's message differs (-AppendTurn +AppendTurnResult):\n%s", d)
	}
}
