package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBranchAtSharesHistory: with --branch-at 1 a trunk takes one turn,
// then four forks of its session continue it: every member repeats the
// trunk's first turn (messages and token fields) byte for byte and then
// goes its own way, and the world model sees the trunk's turn in every
// member's request.
func TestBranchAtSharesHistory(t *testing.T) {
	m, model := fakeWorld(t)
	var n atomic.Int64
	pol := newFakePolicy(t, func(msgs []Message) string {
		tools := 0
		for _, m := range msgs {
			if m.Role == "tool" {
				tools++
			}
		}
		if tools >= 2 {
			return ""
		}
		return fmt.Sprintf(`{"key":"WS-%d"}`, n.Add(1))
	})
	dir := t.TempDir()
	res, err := Run(context.Background(), Embedded{M: m}, []Task{{ID: "tree", World: "tracker"}}, dir, &Options{
		Policy: &Policy{URL: pol.srv.URL + "/v1", Model: "pol"}, GroupSize: 4, BranchAt: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Done != 4 {
		t.Fatalf("result %+v", res)
	}
	rows, err := readRows(filepath.Join(dir, EpisodesFile))
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].SampleIdx < rows[j].SampleIdx })
	trunk := rows[0].ForkParent
	seen := map[string]bool{}
	shared := func(r Row) string {
		b, _ := json.Marshal(struct {
			M []Message
			T Turn
		}{r.Messages[:4], r.Turns[0]})
		return string(b)
	}
	branchKeys := map[string]bool{}
	for i, r := range rows {
		if r.SampleIdx != i || r.ForkParent != trunk || seen[r.EnvSessionID] || r.EnvSessionID == trunk {
			t.Errorf("row %d: sample %d session %q parent %q", i, r.SampleIdx, r.EnvSessionID, r.ForkParent)
		}
		seen[r.EnvSessionID] = true
		if r.NumTurns != 3 || len(r.Turns) != 3 || r.StopReason != StopTerminated {
			t.Errorf("row %d: %d turns, stop %q", i, r.NumTurns, r.StopReason)
		}
		if diff := cmp.Diff(shared(rows[0]), shared(r)); diff != "" {
			t.Errorf("row %d does not share the trunk's turn (-row 0 +row):\n%s", i, diff)
		}
		branchKeys[r.Messages[4].ToolCalls[0].Function.Arguments] = true
	}
	if rows[0].Messages[2].ToolCalls[0].Function.Arguments != `{"key":"WS-1"}` || len(branchKeys) != 4 {
		t.Errorf("trunk call %s, %d distinct branch calls", rows[0].Messages[2].ToolCalls[0].Function.Arguments, len(branchKeys))
	}
	// One world-model request for the trunk's step, then one per member
	// whose history holds the trunk's step as the request for it had it.
	reqs := model.Requests()
	if len(reqs) != 5 {
		t.Fatalf("%d world-model requests, want 5", len(reqs))
	}
	trunkReq, _ := json.Marshal(reqs[0].Messages)
	for _, r := range reqs[1:] {
		b, _ := json.Marshal(r.Messages[:len(reqs[0].Messages)])
		if string(b) != string(trunkReq) {
			t.Errorf("member request does not start with the trunk's:\n%s\n%s", b, trunkReq)
		}
	}
	if m.Len() != 0 {
		t.Errorf("%d sessions left open", m.Len())
	}
}
