package verify

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/realenv"
	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// scriptedPredictor answers from a table and records the history length it
// was shown per turn.
type scriptedPredictor struct {
	answers  map[int]string
	failTurn int
	seen     chan [2]int
}

func (p *scriptedPredictor) Predict(_ context.Context, turn int, action string, history []trajectory.Turn) (string, error) {
	p.seen <- [2]int{turn, len(history)}
	if turn == p.failTurn {
		return "", errors.New("model down")
	}
	return p.answers[turn], nil
}

func TestTeacherForced(t *testing.T) {
	testkit.NoLeaks(t)
	tr := &trajectory.Trajectory{ID: "t1", Domain: "terminal", SystemPrompt: "s", Turns: []trajectory.Turn{
		{Action: `[{"keystrokes":"ls\n","duration":1}]`, Observation: "root@sandbox:/app# ls\na.txt\nroot@sandbox:/app#"},
		{Action: `[{"keystrokes":"cat b\n","duration":1}]`, Observation: "root@sandbox:/app# cat b\ncat: b: No such file or directory\nroot@sandbox:/app#"},
		{Action: `[{"keystrokes":"date\n","duration":1}]`, Observation: "root@sandbox:/app# date\nSun Nov 29 17:03:14 UTC 2026\nroot@sandbox:/app#"},
		{Action: `[]`, Observation: "root@sandbox:/app#"},
	}}
	p := &scriptedPredictor{
		answers: map[int]string{
			1: "**Environment Observation:**\nroot@sandbox:/app# ls\na.txt\nroot@sandbox:/app#",
			2: "root@sandbox:/app# cat b\nhello\nroot@sandbox:/app#",
			3: "root@sandbox:/app# date\nMon Jan 5 09:00:01 UTC 2026\nroot@sandbox:/app#",
		},
		failTurn: 4,
		seen:     make(chan [2]int, 4),
	}
	var progress strings.Builder
	rep, err := TeacherForced(context.Background(), tr, p, &VerifyOptions{Concurrency: 2, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	close(p.seen)
	for s := range p.seen {
		if s[1] != s[0]-1 {
			t.Errorf("turn %d saw %d history turns, want %d", s[0], s[1], s[0]-1)
		}
	}
	wantExact := []bool{true, false, true, false}
	for i, turn := range rep.Turns {
		if turn.Turn != i+1 || turn.Exact != wantExact[i] {
			t.Errorf("turn %d: exact %v, want %v (%+v)", i+1, turn.Exact, wantExact[i], turn.Divergence)
		}
	}
	if rep.Turns[0].RuleTotal != 5 || rep.Turns[1].RuleScores == nil || rep.Turns[1].RuleTotal >= 5 {
		t.Errorf("rules judge: exact turn %v, invented turn %v", rep.Turns[0].RuleTotal, rep.Turns[1].RuleTotal)
	}
	if rep.Turns[1].RulesPassed || rep.Turns[3].Error != "model down" {
		t.Errorf("turn 2 rules %v, turn 4 error %q", rep.Turns[1].RulesPassed, rep.Turns[3].Error)
	}
	s := rep.Summary
	if s.Turns != 4 || s.Exact != 2 || s.FirstDivergence != 2 || s.Errors != 1 || s.ExactRate != 0.5 {
		t.Errorf("summary %+v", s)
	}
	if strings.Count(progress.String(), "\n") != 4 {
		t.Errorf("progress lines:\n%s", progress.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p2 := &scriptedPredictor{seen: make(chan [2]int, 4)}
	if _, err := TeacherForced(ctx, tr, cancelledPredictor{p2}, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v", err)
	}
}

type cancelledPredictor struct{ *scriptedPredictor }

func (c cancelledPredictor) Predict(ctx context.Context, turn int, action string, h []trajectory.Turn) (string, error) {
	return "", fmt.Errorf("predict: %w", ctx.Err())
}

// TestClosedLoop replays simulated episodes of a task for real: the
// oracle's actions pass the check, an episode that only claimed success
// fails it.
func TestClosedLoop(t *testing.T) {
	if err := realenv.ProbeSandbox(); err != nil {
		testkit.Missing(t, "a working bubblewrap sandbox with tmux", err, "install bubblewrap and tmux (.ci/setup.d does)")
	}
	t.Parallel() // no leak check: other parallel tests run beside it
	task, err := realenv.LoadTask(filepath.Join("..", "..", "examples", "tasks", "hello-file"))
	if err != nil {
		t.Fatal(err)
	}
	good := &trajectory.Trajectory{ID: "sim-good", Domain: "terminal", SystemPrompt: "s", Turns: []trajectory.Turn{
		{Action: `[{"keystrokes":"echo 'hello agentworld' > greeting.txt\n","duration":1}]`, Observation: "root@sandbox:/app# echo 'hello agentworld' > greeting.txt\nroot@sandbox:/app#"},
		{Action: `[]`, Observation: "root@sandbox:/app# echo 'hello agentworld' > greeting.txt\nroot@sandbox:/app#"},
	}}
	bad := &trajectory.Trajectory{ID: "sim-bad", Domain: "terminal", SystemPrompt: "s", Turns: []trajectory.Turn{
		// The simulator let a write into a missing directory succeed.
		{Action: `[{"keystrokes":"echo 'hello agentworld' > out/greeting.txt\n","duration":1}]`, Observation: "root@sandbox:/app# echo 'hello agentworld' > out/greeting.txt\nroot@sandbox:/app#"},
		{Action: `[]`, Observation: "root@sandbox:/app# echo 'hello agentworld' > out/greeting.txt\nroot@sandbox:/app#"},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range []struct {
		tr        *trajectory.Trajectory
		pass      bool
		exactTurn bool
	}{{good, true, true}, {bad, false, false}} {
		rep, err := ClosedLoop(ctx, task, c.tr, &realenv.RunOptions{Terminal: &realenv.TerminalOptions{TempDir: t.TempDir()}})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Check == nil || rep.Check.Passed != c.pass {
			t.Errorf("%s: check %+v, want passed=%v", c.tr.ID, rep.Check, c.pass)
		}
		if len(rep.Turns) != 2 || rep.Turns[0].Exact != c.exactTurn || rep.RealSteps != 2 {
			t.Errorf("%s: turns %+v real steps %d", c.tr.ID, rep.Turns, rep.RealSteps)
		}
	}
}
