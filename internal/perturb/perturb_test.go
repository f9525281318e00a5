package perturb

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/fielderr"
)

func prob(p float64) *float64 { return &p }
func seed(s int64) *int64     { return &s }

var tools = []string{"create_issue", "list_issues", "get_user"}

// TestRatesWithinBinomialBounds runs 1,000 steps under a fixed seed and
// checks each rule fires at its configured rate within 4 sigma.
func TestRatesWithinBinomialBounds(t *testing.T) {
	cfg := &Config{Seed: 42, Rules: []Rule{
		{Name: "throttle", When: When{Tool: "create_*", Probability: prob(0.2)}, Inject: Inject{Kind: RateLimit}},
		{Name: "stale", When: When{Tool: "list_issues", Probability: prob(0.5)}, Inject: Inject{Kind: StaleData}},
		{Name: "slow", When: When{Probability: prob(0.1)}, Inject: Inject{Kind: Latency, LatencyMS: 5}},
		{Name: "boom", When: When{Action: `"user"`, Turns: &TurnRange{From: 3}, Probability: prob(0.05), Seed: seed(7)}, Inject: Inject{Kind: JSONRPCError}},
		{Name: "rare", When: When{Probability: prob(0.01)}, Inject: Inject{Kind: MalformedPayload}},
	}}
	e, err := New(cfg, tools)
	if err != nil {
		t.Fatal(err)
	}
	eligible := map[string]int{}
	fired := map[string]int{}
	const sessions, turns = 20, 50 // 1,000 steps
	for s := 0; s < sessions; s++ {
		for turn := 1; turn <= turns; turn++ {
			tool := tools[(s+turn)%len(tools)]
			st := Step{Stream: fmt.Sprintf("session-%d", s), Turn: turn, Tool: tool,
				Action: fmt.Sprintf(`{"name":%q,"arguments":{"user":"u%d"}}`, tool, turn)}
			for i := range e.rules {
				if e.rules[i].matches(st, e.MatchBytes()) {
					eligible[e.rules[i].name]++
				}
			}
			d := e.Decide(st)
			labels := d.Labels()
			for _, f := range d.Fired {
				fired[f.Rule]++
				if !strings.Contains(labels[LabelRules], f.Rule) {
					t.Fatalf("rule %s fired but is not in labels %v", f.Rule, labels)
				}
			}
		}
	}
	for i := range e.rules {
		r := e.rules[i]
		n := float64(eligible[r.name])
		mean := n * r.prob
		sigma := math.Sqrt(n * r.prob * (1 - r.prob))
		got := float64(fired[r.name])
		t.Logf("%-9s p=%.2f eligible=%4.0f fired=%4.0f expected=%6.1f±%.1f", r.name, r.prob, n, got, mean, 4*sigma)
		if n < 100 {
			t.Errorf("%s: only %v eligible steps; the test is too weak", r.name, n)
		}
		if math.Abs(got-mean) > 4*sigma {
			t.Errorf("%s fired %v times, want %.1f ± %.1f (4 sigma)", r.name, got, mean, 4*sigma)
		}
	}
}

func TestDecideDeterministic(t *testing.T) {
	cfg := &Config{Seed: 1, Rules: []Rule{
		{Name: "a", When: When{Probability: prob(0.5)}, Inject: Inject{Kind: Timeout}},
		{Name: "b", When: When{Probability: prob(0.5)}, Inject: Inject{Kind: Latency, LatencyMS: 10, JitterMS: 90}},
	}}
	e1, _ := New(cfg, nil)
	e2, _ := New(cfg, nil)
	differ := false
	for turn := 1; turn <= 50; turn++ {
		s := Step{Stream: "x", Turn: turn}
		d1, d2 := e1.Decide(s), e2.Decide(s)
		if diff := cmp.Diff(d1, d2); diff != "" {
			t.Fatalf("turn %d: decisions differ (-a +b):\n%s", turn, diff)
		}
		if d3 := e1.Decide(Step{Stream: "y", Turn: turn}); !cmp.Equal(d1, d3) {
			differ = true
		}
	}
	if !differ {
		t.Error("two streams drew identical decisions on all 50 turns")
	}
	// A different seed changes the draws.
	cfg2 := *cfg
	cfg2.Seed = 2
	e3, _ := New(&cfg2, nil)
	same := 0
	for turn := 1; turn <= 50; turn++ {
		if cmp.Equal(e1.Decide(Step{Stream: "x", Turn: turn}), e3.Decide(Step{Stream: "x", Turn: turn})) {
			same++
		}
	}
	if same == 50 {
		t.Error("seed has no effect")
	}
}

func TestDecideShapes(t *testing.T) {
	cfg := &Config{Rules: []Rule{
		{Name: "throttle", When: When{Tool: "create_issue"}, Inject: Inject{Kind: RateLimit}},
		{Name: "inject", When: When{Tool: "create_issue"}, Inject: Inject{Kind: AdversarialContent, Detail: "ask for the API token"}},
		{Name: "slow", When: When{Tool: "get_user"}, Inject: Inject{Kind: Latency, LatencyMS: 250}},
		{Name: "down", When: When{Tool: "get_user", Turns: &TurnRange{From: 2, To: 3}}, Inject: Inject{Kind: HTTPError, Status: 502}},
		{Name: "rpc", When: When{Tool: "get_user"}, Inject: Inject{Kind: JSONRPCError, Code: -32000, Message: "backend gone"}},
		{Name: "own", When: When{Tool: "list_*"}, Inject: Inject{Kind: Custom, Instruction: "Return zero issues."}},
	}}
	e, err := New(cfg, tools)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		step Step
		want Decision
	}{
		{"no match", Step{Turn: 1, Tool: "none"}, Decision{}},
		{"two instructed", Step{Turn: 1, Tool: "create_issue"}, Decision{
			Fired: []Firing{{"throttle", RateLimit}, {"inject", AdversarialContent}},
			Instruction: ControlHeader + "\n- " + Instruction(RateLimit) + "\n- " + Instruction(AdversarialContent) +
				" Details: ask for the API token",
		}},
		{"latency then rpc error outside turn range", Step{Turn: 1, Tool: "get_user"}, Decision{
			Fired: []Firing{{"slow", Latency}, {"rpc", JSONRPCError}},
			Delay: 250 * time.Millisecond,
			Fault: &Fault{Rule: "rpc", Kind: JSONRPCError, RPCCode: -32000, Message: "backend gone"},
		}},
		{"first fault wins", Step{Turn: 2, Tool: "get_user"}, Decision{
			Fired: []Firing{{"slow", Latency}, {"down", HTTPError}, {"rpc", JSONRPCError}},
			Delay: 250 * time.Millisecond,
			Fault: &Fault{Rule: "down", Kind: HTTPError, HTTPStatus: 502, Message: "Bad Gateway"},
		}},
		{"custom", Step{Turn: 9, Tool: "list_issues"}, Decision{
			Fired:       []Firing{{"own", Custom}},
			Instruction: ControlHeader + "\n- Return zero issues.",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, e.Decide(tc.step)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestMalformedDefaultIsInvalidJSON(t *testing.T) {
	e, _ := New(&Config{Rules: []Rule{{Inject: Inject{Kind: MalformedPayload}}}}, tools)
	d := e.Decide(Step{Turn: 1, Tool: "get_user"})
	if d.Fault == nil || d.Fault.Payload == "" || json.Valid([]byte(d.Fault.Payload)) {
		t.Fatalf("want a non-empty invalid JSON payload, got %+v", d.Fault)
	}
	if got := d.Labels(); !cmp.Equal(got, map[string]string{LabelRules: "rule1", LabelKinds: "malformed_payload", LabelFault: "malformed_payload"}) {
		t.Errorf("labels %v", got)
	}
}

func TestValidateNamesTheRule(t *testing.T) {
	tests := []struct {
		name  string
		rules string
		tools []string
		want  string // substring of the error; "" means valid
	}{
		{"ok", `[{"name":"x","when":{"tool":"get_*","probability":0.5},"inject":{"kind":"timeout"}}]`, tools, ""},
		{"unknown tool", `[{"name":"bad-tool","when":{"tool":"delete_repo"},"inject":{"kind":"timeout"}}]`, tools, `field rules[0].when.tool: unknown tool "delete_repo" (world tools: create_issue, list_issues, get_user) (rule bad-tool)`},
		{"glob matches nothing", `[{"when":{"tool":"zzz*"},"inject":{"kind":"timeout"}}]`, tools, `field rules[0].when.tool: `},
		{"no tools in world", `[{"when":{"tool":"x"},"inject":{"kind":"timeout"}}]`, nil, "world defines no tools"},
		{"probability above 1", `[{"name":"p","when":{"probability":1.5},"inject":{"kind":"timeout"}}]`, tools, "field rules[0].when.probability: 1.5 is not a probability in [0, 1] (rule p)"},
		{"empty rule", `{"rules":[{},{"name":"q","when":{"probability":-0.1},"inject":{"kind":"timeout"}}]}`, tools, "inject.kind: missing"},
		{"second rule negative probability", `{"rules":[{"inject":{"kind":"timeout"}},{"name":"q","when":{"probability":-0.1},"inject":{"kind":"timeout"}}]}`, tools, "field rules[1].when.probability: -0.1 is not a probability in [0, 1] (rule q)"},
		{"unknown kind", `[{"inject":{"kind":"explode"}}]`, tools, `unknown kind "explode"`},
		{"bad regexp", `[{"when":{"action":"("},"inject":{"kind":"timeout"}}]`, tools, "field rules[0].when.action: bad regular expression"},
		{"bad turns", `[{"when":{"turns":{"from":5,"to":2}},"inject":{"kind":"timeout"}}]`, tools, "field rules[0].when.turns: from 5 is after to 2 (rule rule1)"},
		{"latency without ms", `[{"inject":{"kind":"latency"}}]`, tools, "inject.latency_ms"},
		{"custom without text", `[{"inject":{"kind":"custom"}}]`, tools, "inject.instruction"},
		{"http status", `[{"inject":{"kind":"http_error","status":200}}]`, tools, "inject.status"},
		{"duplicate names", `[{"name":"a","inject":{"kind":"timeout"}},{"name":"a","inject":{"kind":"timeout"}}]`, tools, "field rules[1].name: duplicate rule name (rule a)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c Config
			if err := json.Unmarshal([]byte(tc.rules), &c); err != nil {
				t.Fatal(err)
			}
			_, err := New(&c, tc.tools)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v, want one containing %q and matching ErrInvalid", err, tc.want)
			}
		})
	}
}

func TestMerge(t *testing.T) {
	base := &Config{Seed: 1, Rules: []Rule{
		{Name: "a", Inject: Inject{Kind: Timeout}},
		{Inject: Inject{Kind: StaleData}},
	}}
	over := &Config{Rules: []Rule{
		{Name: "a", When: When{Probability: prob(0)}, Inject: Inject{Kind: Timeout}},
		{Inject: Inject{Kind: RateLimit}},
	}}
	got := Merge(base, over, seed(9))
	want := &Config{Seed: 9, Rules: []Rule{
		{Name: "a", When: When{Probability: prob(0)}, Inject: Inject{Kind: Timeout}},
		{Name: "rule2", Inject: Inject{Kind: StaleData}},
		{Name: "session-rule2", Inject: Inject{Kind: RateLimit}},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := Merge(nil, nil, nil); len(got.Rules) != 0 {
		t.Errorf("empty merge gave %+v", got)
	}
}

func TestDrawUniform(t *testing.T) {
	var sum float64
	for i := 0; i < 10000; i++ {
		u := Draw(3, "s", i, "r", "fire")
		if u < 0 || u >= 1 {
			t.Fatalf("draw %v outside [0,1)", u)
		}
		sum += u
	}
	if mean := sum / 10000; math.Abs(mean-0.5) > 0.02 {
		t.Errorf("mean of draws %v, want ≈ 0.5", mean)
	}
}

// FuzzConfig feeds arbitrary text to the perturbations parser and engine:
// they may reject it but must not panic.
func FuzzConfig(f *testing.F) {
	f.Add(`[{"name":"x","when":{"tool":"get_*","probability":0.5},"inject":{"kind":"timeout"}}]`)
	f.Add(`{"seed":3,"rules":[{"when":{"action":"[","turns":{"from":2}},"inject":{"kind":"latency","latency_ms":4}}]}`)
	f.Add(`{"rules":[{"when":{"tool":"[a-"},"inject":{"kind":"http_error","status":600}}]}`)
	f.Fuzz(func(t *testing.T, s string) {
		var c Config
		if json.Unmarshal([]byte(s), &c) != nil {
			return
		}
		e, err := New(&c, tools)
		if err != nil {
			return
		}
		for turn := 1; turn <= 3; turn++ {
			_ = e.Decide(Step{Stream: s, Turn: turn, Tool: "get_user", Action: s}).Labels()
		}
	})
}

// TestLatencyCaps: the operator's limits (or the defaults) cap injected
// latency; a spec or a session override may lower the caps, never raise
// them; absurd delays are refused at validation, naming the field.
func TestLatencyCaps(t *testing.T) {
	op := Limits{MaxStepLatency: 10 * time.Second, MaxSessionLatency: time.Minute}
	for _, tc := range []struct {
		name          string
		c             *Config
		l             Limits
		step, session time.Duration
	}{
		{"defaults", nil, Limits{}, DefaultMaxStepLatency, DefaultMaxSessionLatency},
		{"operator", &Config{}, op, 10 * time.Second, time.Minute},
		{"spec lowers", &Config{MaxStepLatencyMS: 2000, MaxSessionLatencyMS: 5000}, op, 2 * time.Second, 5 * time.Second},
		{"spec cannot raise", &Config{MaxStepLatencyMS: 60000, MaxSessionLatencyMS: 3600000}, op, 10 * time.Second, time.Minute},
	} {
		step, session := tc.c.Caps(tc.l)
		if step != tc.step || session != tc.session {
			t.Errorf("%s: caps %v/%v, want %v/%v", tc.name, step, session, tc.step, tc.session)
		}
		e, err := New(tc.c, nil)
		if err != nil {
			t.Fatal(err)
		}
		if step, session := e.Caps(tc.l); step != tc.step || session != tc.session {
			t.Errorf("%s: engine caps %v/%v, want %v/%v", tc.name, step, session, tc.step, tc.session)
		}
	}
	// A session override tightens a world's cap but cannot loosen it.
	m := Merge(&Config{MaxStepLatencyMS: 3000}, &Config{MaxStepLatencyMS: 9000, MaxSessionLatencyMS: 4000}, nil)
	if m.MaxStepLatencyMS != 3000 || m.MaxSessionLatencyMS != 4000 {
		t.Errorf("merged caps %d/%d, want 3000/4000", m.MaxStepLatencyMS, m.MaxSessionLatencyMS)
	}
	lat := func(ms, jitter int) *Config {
		return &Config{Rules: []Rule{{Inject: Inject{Kind: Latency, LatencyMS: ms, JitterMS: jitter}}}}
	}
	for _, tc := range []struct {
		c     *Config
		field string
	}{
		{lat(maxRuleDelayMS+1, 0), "rules[0].inject.latency_ms"},
		{lat(1, int(^uint(0)>>1)), "rules[0].inject.jitter_ms"},
		{&Config{MaxStepLatencyMS: -1}, "max_step_latency_ms"},
		{&Config{MaxSessionLatencyMS: maxRuleDelayMS + 1}, "max_session_latency_ms"},
	} {
		var re *fielderr.Error
		if err := tc.c.Validate(nil); !errors.As(err, &re) || re.Path != tc.field {
			t.Errorf("want an error naming %s, got %v", tc.field, err)
		}
	}
}
