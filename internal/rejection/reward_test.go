package rejection

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/expand"
	"github.com/agentworld/agentworld/internal/reward"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// TestRewardItemScoresAsItsJSON: the record handed to the scorer in
// memory scores exactly as the same record sent as extra_info (the form
// the reward's HTTP route and offline scoring read).
func TestRewardItemScoresAsItsJSON(t *testing.T) {
	sc, err := reward.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &expand.Sample{ID: "t1#3", TrajectoryID: "t1", Domain: "terminal", Turn: 3, TotalTurns: 4, System: "simulate a shell",
		History: []trajectory.Turn{{Action: "ls", Observation: "a.txt b.txt"}, {Action: "cat a.txt", Observation: "hello <world> & co"}},
		Action:  "cat b.txt", Observation: "second file\nhello <world> & co"}
	for _, content := range []string{
		"<think>b.txt was listed</think><predicted_observation>\nsecond file\nhello <world> & co\n</predicted_observation>",
		"<predicted_observation>\ncat: b.txt: No such file or directory\n</predicted_observation>",
	} {
		it := rewardItem(s, sampleRecord(s), &Candidate{ID: "t1-3-1", Content: content})
		viaJSON := it
		extra, err := json.Marshal(map[string]any{"record": it.Record})
		if err != nil {
			t.Fatal(err)
		}
		viaJSON.Record, viaJSON.ExtraInfo = nil, extra
		got, want := sc.Score(context.Background(), it), sc.Score(context.Background(), viaJSON)
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("in-memory record scores differently (-json +memory):\n%s", d)
		}
	}
}
