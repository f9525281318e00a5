package reward

import (
	"encoding/json"
	"math"
	"net/http"
	"testing"
)

// TestNeMoGymSessionAndMetrics: the two routes NeMo Gym's simple agent and
// collection step call on a resources server besides /verify
// (nemo_gym/base_resources_server.py at NVIDIA-NeMo/Gym 07d6b0d): an empty
// /seed_session answer, and /aggregate_metrics with RewardProfiler's
// baseline statistics under its key names.
func TestNeMoGymSessionAndMetrics(t *testing.T) {
	srv, _ := newTestServer(t, nil, nil)
	if code, body := post(t, srv.URL+SeedSessionPath, map[string]any{}); code != http.StatusOK || string(body) != "{}\n" {
		t.Fatalf("/seed_session: %d %s", code, body)
	}
	req := map[string]any{"verify_responses": []map[string]any{
		{"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 25.0, "rule": 25.0, "judge_failed": false},
		{"_ng_task_index": 0, "_ng_rollout_index": 1, "reward": 5.0, "rule": 0.0, "judge_failed": true},
		{"_ng_task_index": 1, "_ng_rollout_index": 0, "reward": 15.0, "rule": 0.0, "judge_failed": false},
	}}
	code, body := post(t, srv.URL+AggregateMetricsPath, req)
	if code != http.StatusOK {
		t.Fatalf("/aggregate_metrics: %d %s", code, body)
	}
	var got struct {
		Groups []map[string]float64 `json:"group_level_metrics"`
		Agent  map[string]float64   `json:"agent_metrics"`
		Key    map[string]float64   `json:"key_metrics"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if !near(got.Agent["mean/reward"], 15) || !near(got.Agent["std/reward"], 10) || got.Agent["median/reward"] != 15 ||
		got.Agent["max/reward"] != 25 || got.Agent["min/reward"] != 5 || !near(got.Agent["mean/judge_failed"], 1.0/3) {
		t.Errorf("agent metrics %v", got.Agent)
	}
	if len(got.Groups) != 2 || got.Groups[0]["mean/reward"] != 15 || got.Groups[1]["std/reward"] != 0 || got.Groups[1]["_ng_task_index"] != 1 || got.Groups[0]["num_rollouts"] != 2 {
		t.Errorf("group metrics %v", got.Groups)
	}
	if len(got.Key) != 3 || got.Key["mean/rule"] == 0 {
		t.Errorf("key metrics %v (want the mean/ entries)", got.Key)
	}
	if _, ok := got.Agent["mean/_ng_rollout_index"]; ok {
		t.Error("the rollout index is not a metric")
	}
}
