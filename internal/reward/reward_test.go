package reward

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentworld/agentworld/internal/worldmodel"
)

func item(id, resp, truth string) Item {
	return Item{ID: id, DataSource: "agentworld/terminal", Prompt: "### Turn 1\n**Action:**\n[{\"keystrokes\": \"ls\\n\", \"duration\": 0.1}]", Response: resp, GroundTruth: truth}
}

const screen = "root@box:/app# ls\ncalc.py  test_calc.py\nroot@box:/app#"

func TestJudgeFailurePolicies(t *testing.T) {
	for _, tt := range []struct {
		policy   Policy
		dropped  bool
		rubric   float64
		fallback string
		reason   string
	}{
		{PolicyRules, false, -1, "rules", "rubric from the offline rules scorer"},
		{PolicyZero, false, 0, "", "rubric scored 0"},
		{PolicyDrop, true, 0, "", "item dropped"},
	} {
		t.Run(string(tt.policy), func(t *testing.T) {
			s, err := New(&Options{Judge: verdictJudge{}, JudgeModel: "j", OnJudgeFailure: tt.policy, RetryWait: 1})
			if err != nil {
				t.Fatal(err)
			}
			r := s.Score(context.Background(), item("a", tag("UNPARSEABLE"), screen))
			if r.Dropped != tt.dropped || (r.Score == nil) != tt.dropped {
				t.Errorf("dropped %v score %v, want dropped %v", r.Dropped, r.Score, tt.dropped)
			}
			if tt.rubric >= 0 && r.Components.Rubric != tt.rubric {
				t.Errorf("rubric %v, want %v", r.Components.Rubric, tt.rubric)
			}
			if tt.rubric < 0 && r.Components.Rubric < 5 {
				t.Errorf("rules fallback rubric %v, want in [5, 25]", r.Components.Rubric)
			}
			if r.Judge.Fallback != tt.fallback || !strings.HasSuffix(r.Reason, tt.reason) || r.Judge.ParseOK || r.Judge.Attempts != 3 {
				t.Errorf("judge %+v reason %q", r.Judge, r.Reason)
			}
			st := s.Stats()
			if st.JudgeFailed != 1 || st.JudgeUnparsed != 3 || st.Fallback+st.Zeroed+st.Dropped != 1 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

// flaky fails its first n calls in transport, then answers like verdictJudge.
type flaky struct{ n, calls atomic.Int64 }

func (f *flaky) Complete(ctx context.Context, req worldmodel.Request) (*worldmodel.Response, error) {
	if f.calls.Add(1) <= f.n.Load() {
		return nil, fmt.Errorf("%w: 503", worldmodel.ErrUnavailable)
	}
	return verdictJudge{}.Complete(ctx, req)
}

func TestTransportRetryAndCache(t *testing.T) {
	f := &flaky{}
	f.n.Store(2)
	s, err := New(&Options{Judge: f, JudgeModel: "j", RetryWait: 1})
	if err != nil {
		t.Fatal(err)
	}
	r := s.Score(context.Background(), item("a", tag(screen), screen))
	if !r.Judge.ParseOK || r.Judge.Attempts != 3 || r.Components.Rubric != 25 || r.Reason != "" {
		t.Fatalf("%+v", r)
	}
	r = s.Score(context.Background(), item("b", tag(screen), screen))
	if !r.Judge.Cached || r.Judge.Attempts != 0 || f.calls.Load() != 3 {
		t.Errorf("second scoring: %+v after %d calls, want a cache hit", r.Judge, f.calls.Load())
	}
	f.n.Store(100)
	s2, _ := New(&Options{Judge: f, JudgeModel: "j", RetryWait: 1, OnJudgeFailure: PolicyZero})
	r = s2.Score(context.Background(), item("c", tag(screen), screen))
	if r.Components.Rubric != 0 || !strings.Contains(r.Reason, "world model unavailable") || r.Components.Rule != 25 {
		t.Errorf("%+v", r)
	}
}

// sampled gives judge sample k the total 5-k.
type sampled struct{}

func (sampled) Complete(_ context.Context, req worldmodel.Request) (*worldmodel.Response, error) {
	v := 5 - *req.Seed
	return &worldmodel.Response{Content: fmt.Sprintf(`{"scores": {"format": %d, "factuality": %d, "consistency": %d, "realism": %d, "quality": %d}}`, v, v, v, v, v)}, nil
}

func TestJudgeSamplesSpread(t *testing.T) {
	s, err := New(&Options{Judge: sampled{}, JudgeModel: "j", Samples: 3})
	if err != nil {
		t.Fatal(err)
	}
	r := s.Score(context.Background(), item("a", tag(screen), screen))
	// Totals 5, 4, 3 → rubric values 25, 20, 15.
	if r.Components.Rubric != 20 || r.Judge.Spread != 10 || r.Judge.Samples != 3 || r.Components.RubricDims["format"] != 4 {
		t.Errorf("%+v %+v", r.Components, r.Judge)
	}
}

func TestSampleMix(t *testing.T) {
	s, err := New(&Options{Mix: MixSample, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	rule := 0
	const n = 2000
	for i := range n {
		r := s.Score(context.Background(), item(fmt.Sprint(i), tag(screen), screen))
		switch r.Components.Mix {
		case "sample:rule":
			rule++
			if *r.Score != r.Components.Rule {
				t.Fatalf("%+v", r)
			}
		case "sample:rubric":
			if *r.Score != r.Components.Rubric {
				t.Fatalf("%+v", r)
			}
		default:
			t.Fatalf("mix %q", r.Components.Mix)
		}
		if again := s.Score(context.Background(), item(fmt.Sprint(i), tag(screen), screen)); again.Components.Mix != r.Components.Mix {
			t.Fatal("the same item drew differently")
		}
	}
	if share := float64(rule) / n; math.Abs(share-0.1) > 0.025 {
		t.Errorf("rule drawn for %.3f of the items, want about 0.1", share)
	}
}

func TestNew(t *testing.T) {
	for _, tt := range []struct {
		name string
		o    Options
		want error
	}{
		{"same family refused", Options{Judge: verdictJudge{}, JudgeModel: "Qwen/Qwen3.5-397B-A17B", PolicyModel: "qwq-32b"}, ErrSameFamily},
		{"same family allowed", Options{Judge: verdictJudge{}, JudgeModel: "gpt-5.4", PolicyModel: "o3-mini", AllowSameFamily: true}, nil},
		{"other family", Options{Judge: verdictJudge{}, JudgeModel: "claude-opus-4-6", PolicyModel: "Qwen3.5-35B-A3B"}, nil},
		{"bad mix", Options{Mix: "average"}, errAny},
		{"bad policy", Options{OnJudgeFailure: "retry"}, errAny},
		{"negative weight", Options{RuleWeight: -1}, errAny},
		{"judge without name", Options{Judge: verdictJudge{}}, errAny},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(&tt.o)
			switch {
			case tt.want == nil && err != nil:
				t.Errorf("error %v", err)
			case tt.want == errAny && err == nil, tt.want != nil && tt.want != errAny && !errors.Is(err, tt.want):
				t.Errorf("error %v, want %v", err, tt.want)
			}
		})
	}
}

var errAny = errors.New("any error")

func TestFamily(t *testing.T) {
	for in, want := range map[string]string{
		"Qwen/Qwen3.5-35B-A3B": "qwen", "qwq-32b": "qwen", "gpt-5.4": "openai", "o3-mini": "openai",
		"claude-sonnet-4-6": "anthropic", "meta-llama/Llama-3.1-8B": "llama", "mixtral-8x7b": "mistral",
		"gemma-3-27b": "google", "deepseek-v3": "deepseek", "": "",
	} {
		if got := Family(in); got != want {
			t.Errorf("Family(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestInvalidItems(t *testing.T) {
	s, _ := New(nil)
	for _, it := range []Item{
		{ID: "no truth", DataSource: "terminal", Response: tag("x")},
		{ID: "bad record", DataSource: "terminal", Response: tag("x"), ExtraInfo: []byte(`{"record": {"task": "terminal", "turn_idx": 4}}`)},
	} {
		r := s.Score(context.Background(), it)
		if r.Score == nil || *r.Score != 0 || !strings.HasPrefix(r.Reason, "invalid item") {
			t.Errorf("%s: %+v", it.ID, r)
		}
	}
	if st := s.Stats(); st.Invalid != 2 {
		t.Errorf("invalid %d", st.Invalid)
	}
}

func TestRequireTag(t *testing.T) {
	s, _ := New(&Options{RequireTag: true})
	r := s.Score(context.Background(), item("a", screen, screen))
	if *r.Score != 0 || !strings.Contains(r.Reason, "no <predicted_observation> tag") {
		t.Errorf("%+v", r)
	}
}

// FuzzScore: any response against any ground truth gets a result within
// the ranges, with a reason whenever the score is 0, and never panics.
func FuzzScore(f *testing.F) {
	f.Add(tag(screen), screen, "terminal")
	f.Add("<think>x</think><predicted_observation>{\"a\": 1}", `{"a": 1}`, "mcp")
	f.Add("<THINK>", "\t[1] link 'x'", "web")
	f.Add("</think>Note to the grader", "ok", "search")
	s, err := New(nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, resp, truth, ds string) {
		r := s.Score(context.Background(), Item{ID: "f", DataSource: ds, Response: resp, GroundTruth: truth})
		if r.Score == nil {
			t.Fatalf("nil score without a judge: %+v", r)
		}
		c := r.Components
		if c.Rule != 0 && c.Rule != 25 || c.Rubric != 0 && (c.Rubric < 5 || c.Rubric > 25) || *r.Score < 0 || *r.Score > 25 {
			t.Fatalf("out of range: %+v", r)
		}
		if c.Rubric == 0 && r.Reason == "" {
			t.Fatalf("rubric 0 without a reason: %+v", r)
		}
	})
}
