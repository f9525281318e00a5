package reward

import (
	"encoding/json"
	"math"
	"net/http"
	"sort"
	"strings"
)

// Routes a NeMo Gym resources server answers besides /verify
// (nemo_gym/base_resources_server.py, SimpleResourcesServer): the simple
// agent seeds a session before each rollout and fails the rollout when
// that fails; the collection step asks for aggregate metrics.
const (
	SeedSessionPath      = "/seed_session"
	AggregateMetricsPath = "/aggregate_metrics"
)

// Keys NeMo Gym puts on each verify response it aggregates
// (nemo_gym/global_config.py).
const (
	gymTaskIndex    = "_ng_task_index"
	gymRolloutIndex = "_ng_rollout_index"
)

// seedSession answers /seed_session: the reward keeps no per-session
// state, so the empty BaseSeedSessionResponse.
func (h *Handler) seedSession(w http.ResponseWriter, r *http.Request) {
	var body map[string]json.RawMessage
	if !h.decode(w, r, &body) {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{})
}

// aggregateRequest is NeMo Gym's AggregateMetricsRequest.
type aggregateRequest struct {
	VerifyResponses []map[string]any `json:"verify_responses"`
}

// aggregateMetrics answers /aggregate_metrics as compute_aggregate_metrics
// (nemo_gym/reward_profile.py) does without custom functions: for every
// numeric field of the verify responses (booleans as 0 and 1) its mean,
// max, min, median and sample standard deviation ("mean/reward", …), per
// task (group_level_metrics, with _ng_task_index and num_rollouts) and
// over all rollouts (agent_metrics); key_metrics are the mean/ entries.
func (h *Handler) aggregateMetrics(w http.ResponseWriter, r *http.Request) {
	var req aggregateRequest
	if !h.decode(w, r, &req) {
		return
	}
	out := map[string]any{"group_level_metrics": []any{}, "agent_metrics": map[string]any{}, "key_metrics": map[string]any{}}
	if len(req.VerifyResponses) == 0 {
		writeJSON(w, http.StatusOK, out)
		return
	}
	byTask := map[float64][]map[string]any{}
	for _, vr := range req.VerifyResponses {
		t, _ := vr[gymTaskIndex].(float64)
		byTask[t] = append(byTask[t], vr)
	}
	tasks := make([]float64, 0, len(byTask))
	for t := range byTask {
		tasks = append(tasks, t)
	}
	sort.Float64s(tasks)
	var groups []any
	for _, t := range tasks {
		g := describe(byTask[t])
		g[gymTaskIndex] = t
		g["num_rollouts"] = len(byTask[t])
		groups = append(groups, g)
	}
	agent := describe(req.VerifyResponses)
	key := map[string]any{}
	for k, v := range agent {
		if strings.HasPrefix(k, "mean/") {
			key[k] = v
		}
	}
	out["group_level_metrics"], out["agent_metrics"], out["key_metrics"] = groups, agent, key
	writeJSON(w, http.StatusOK, out)
}

// describe computes the statistics of every numeric field of rows.
func describe(rows []map[string]any) map[string]any {
	cols := map[string][]float64{}
	for _, row := range rows {
		for k, v := range row {
			if k == gymTaskIndex || k == gymRolloutIndex {
				continue
			}
			switch x := v.(type) {
			case float64:
				cols[k] = append(cols[k], x)
			case bool:
				cols[k] = append(cols[k], oneIf(x))
			}
		}
	}
	out := map[string]any{}
	for k, xs := range cols {
		sort.Float64s(xs)
		n := float64(len(xs))
		sum := 0.0
		for _, x := range xs {
			sum += x
		}
		mean := sum / n
		med := xs[len(xs)/2]
		if len(xs)%2 == 0 {
			med = (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
		}
		std := 0.0
		if len(xs) > 1 {
			for _, x := range xs {
				std += (x - mean) * (x - mean)
			}
			std = math.Sqrt(std / (n - 1))
		}
		out["mean/"+k], out["max/"+k], out["min/"+k], out["median/"+k], out["std/"+k] = mean, xs[len(xs)-1], xs[0], med, std
	}
	return out
}
