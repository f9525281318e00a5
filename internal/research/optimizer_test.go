package research

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// answering answers every request with answer and counts the calls.
type answering struct {
	answer string
	n      atomic.Int64
}

func (a *answering) Complete(context.Context, worldmodel.Request) (*worldmodel.Response, error) {
	a.n.Add(1)
	return &worldmodel.Response{Content: a.answer, FinishReason: "stop"}, nil
}

// TestOptimizerBadAnswerNotCached: an unusable answer is asked again, then
// reported as ErrUnusableAnswer, and never cached; once the optimizer
// answers well, the same request gets a proposal.
func TestOptimizerBadAnswerNotCached(t *testing.T) {
	cache := &memoStore{m: map[string]*worldmodel.Response{}}
	req := OptimizeRequest{Domain: domain.OS, Template: "t", Worst: []Sample{{Trajectory: "a", Turn: 1}}}
	bad := &answering{answer: "no template here"}
	_, err := NewModelOptimizer(bad, "opt", &OptimizerOptions{Cache: cache}).Propose(context.Background(), req)
	if !errors.Is(err, ErrUnusableAnswer) || bad.n.Load() != DefaultOptimizerAttempts || len(cache.m) != 0 {
		t.Fatalf("err %v after %d calls, %d cached", err, bad.n.Load(), len(cache.m))
	}
	good := &answering{answer: "<rationale>r</rationale><template>\nnew</template>"}
	p, err := NewModelOptimizer(good, "opt", &OptimizerOptions{Cache: cache}).Propose(context.Background(), req)
	if err != nil || p.Template != "new" || good.n.Load() != 1 || len(cache.m) != 1 {
		t.Fatalf("%+v %v after %d calls", p, err, good.n.Load())
	}
	// Now cached: no call.
	if _, err := NewModelOptimizer(good, "opt", &OptimizerOptions{Cache: cache}).Propose(context.Background(), req); err != nil || good.n.Load() != 1 {
		t.Fatalf("%v, %d calls", err, good.n.Load())
	}
}

// TestHistoryBounded: the history shown with a case keeps the newest
// turns within the byte bound and says how many it left out.
func TestHistoryBounded(t *testing.T) {
	var turns []trajectory.Turn
	for i := range 10 {
		turns = append(turns, trajectory.Turn{Action: "act" + string(rune('0'+i)), Observation: strings.Repeat("o", 100)})
	}
	got := historyText(turns, 400)
	if !strings.Contains(got, "[8 earlier turns left out]") || !strings.Contains(got, "act8") || strings.Contains(got, "act7") || len(got) > 500 {
		t.Errorf("%s", got)
	}
	got = historyText([]trajectory.Turn{{Action: "a", Observation: strings.Repeat("é", 300)}}, 100)
	if !strings.Contains(got, "bytes of turn 1 cut]") || len(got) > 200 || !strings.HasSuffix(got, "é\n") {
		t.Errorf("%q", got)
	}
}
