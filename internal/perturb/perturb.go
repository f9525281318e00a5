// Package perturb is the rule engine behind controllable perturbations: a
// world spec's `perturbations` section lists rules that, when a step matches
// (tool or action pattern, turn range, probability under a seed), either add
// a control instruction to that step's message so the world model simulates
// a failure (rate limit, timeout, partial result, …), or make the server
// produce a fault itself without calling the model (latency, HTTP or
// JSON-RPC error, malformed payload). Draws are a pure function of the seed,
// the session's stream key, the turn and the rule, so retries and forks see
// the same perturbations.
package perturb

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path"
	"strings"
	"time"

	"github.com/agentworld/agentworld/internal/fielderr"
	"github.com/agentworld/agentworld/internal/regexlimit"
)

// Kind names what a rule injects.
type Kind string

// Instructed kinds: the world model is told to simulate the failure.
const (
	RateLimit          Kind = "rate_limit"
	Timeout            Kind = "timeout"
	PartialResult      Kind = "partial_result"
	SchemaChange       Kind = "schema_change"
	StaleData          Kind = "stale_data"
	PermissionError    Kind = "permission_error"
	AdversarialContent Kind = "adversarial_content"
	// Custom sends the rule's own instruction text.
	Custom Kind = "custom"
)

// Direct kinds: the server produces the fault itself, without a model call
// (Latency delays the step and lets it continue).
const (
	Latency          Kind = "latency"
	HTTPError        Kind = "http_error"
	JSONRPCError     Kind = "jsonrpc_error"
	MalformedPayload Kind = "malformed_payload"
)

// Instructed reports whether k is carried out by the world model.
func (k Kind) Instructed() bool {
	_, ok := instructions[k]
	return ok || k == Custom
}

// Direct reports whether k is produced by the server itself.
func (k Kind) Direct() bool {
	switch k {
	case Latency, HTTPError, JSONRPCError, MalformedPayload:
		return true
	}
	return false
}

// Kinds lists every kind a rule may inject, for help texts and errors.
func Kinds() []Kind {
	return []Kind{RateLimit, Timeout, PartialResult, SchemaChange, StaleData, PermissionError,
		AdversarialContent, Custom, Latency, HTTPError, JSONRPCError, MalformedPayload}
}

// Config is a world spec's `perturbations` section. In a file it may be
// written as a list of rules (seed 0) or as {seed, rules}.
type Config struct {
	// Seed feeds every rule that sets no seed of its own; zero is a valid seed.
	Seed  int64  `json:"seed,omitempty"`
	Rules []Rule `json:"rules,omitempty"`
	// MaxStepLatencyMS lowers the operator's cap on the latency injected
	// into one step ([Limits.MaxStepLatency]); 0 keeps the operator's cap.
	// A larger value than the operator's is held to the operator's.
	MaxStepLatencyMS int `json:"max_step_latency_ms,omitempty"`
	// MaxSessionLatencyMS lowers the operator's cap on the latency
	// injected over all of a session's steps ([Limits.MaxSessionLatency]);
	// 0 keeps the operator's cap.
	MaxSessionLatencyMS int `json:"max_session_latency_ms,omitempty"`
}

// Default caps on injected latency when the operator sets none: enough to
// exercise an agent's patience and timeouts, not enough to hold a session
// (and the server's capacity) hostage.
const (
	DefaultMaxStepLatency    = 30 * time.Second
	DefaultMaxSessionLatency = 5 * time.Minute
)

// maxRuleDelayMS bounds one rule's latency_ms and jitter_ms (one day), so
// sums of delays cannot overflow whatever the caps.
const maxRuleDelayMS = 24 * 60 * 60 * 1000

// MaxPatternBytes bounds what a config's action patterns compile into,
// all together, as regexlimit estimates it; each one is bounded alone by
// regexlimit's defaults too. A session's override counts with the rules
// of the spec it is merged into.
const MaxPatternBytes = 8 << 20

// MaxActionInsts bounds the instructions of a config's action patterns
// together: a step matches each of them against the action, and Go's
// matcher works in the product of a program's instructions and the
// text's bytes, so `.{0,1000}x` (2,003 instructions) took 18 s over a
// 1 MiB action, for each rule that had it. The engine matches every
// pattern against the first [Engine.MatchBytes] bytes of an action:
// regexlimit.DefaultMaxWork over the instructions of all patterns, and at
// least regexlimit.MinMatchBytes, which this bound keeps. Real rules
// (`"LL-13"`, `(?i)\b(?:delete|drop)\b`) have a few dozen instructions
// in all and see hundreds of KiB of an action.
const MaxActionInsts = regexlimit.DefaultMaxWork / regexlimit.MinMatchBytes

// Limits are the operator's caps on the latency rules inject. A world spec
// or a session's override may lower them, never raise them.
type Limits struct {
	// MaxStepLatency caps the delay injected into one step; 0 means
	// DefaultMaxStepLatency.
	MaxStepLatency time.Duration
	// MaxSessionLatency caps the delay injected over a session's steps
	// (later steps get what is left, then none); 0 means
	// DefaultMaxSessionLatency.
	MaxSessionLatency time.Duration
}

// Caps are the effective latency caps of c under the operator's limits l:
// the operator's (or the default) cap, lowered by c's own when c sets one.
func (c *Config) Caps(l Limits) (step, session time.Duration) {
	step, session = l.MaxStepLatency, l.MaxSessionLatency
	if step <= 0 {
		step = DefaultMaxStepLatency
	}
	if session <= 0 {
		session = DefaultMaxSessionLatency
	}
	if c != nil {
		if ms := c.MaxStepLatencyMS; ms > 0 && time.Duration(ms)*time.Millisecond < step {
			step = time.Duration(ms) * time.Millisecond
		}
		if ms := c.MaxSessionLatencyMS; ms > 0 && time.Duration(ms)*time.Millisecond < session {
			session = time.Duration(ms) * time.Millisecond
		}
	}
	return step, session
}

// Rule is one `when` → `inject` pair.
type Rule struct {
	// Name labels the steps the rule fires on; defaults to "rule<N>" (1-based).
	Name string `json:"name,omitempty"`
	When When   `json:"when"`
	// Inject says what happens when the rule fires.
	Inject Inject `json:"inject"`
}

// When selects the steps a rule applies to. All set conditions must hold;
// an empty When matches every step, always.
type When struct {
	// Tool is a glob (path.Match syntax) on the called tool's name; empty
	// matches any step, tool call or not.
	Tool string `json:"tool,omitempty"`
	// Action is a regular expression searched in the action text.
	Action string `json:"action,omitempty"`
	// Turns bounds the 1-based turn; nil means every turn.
	Turns *TurnRange `json:"turns,omitempty"`
	// Probability that a matching step fires; nil means 1.
	Probability *float64 `json:"probability,omitempty"`
	// Seed overrides the section's seed for this rule.
	Seed *int64 `json:"seed,omitempty"`
}

// TurnRange is an inclusive 1-based range; zero bounds are open.
type TurnRange struct {
	From int `json:"from,omitempty"`
	To   int `json:"to,omitempty"`
}

// Contains reports whether turn lies in the range.
func (r *TurnRange) Contains(turn int) bool {
	if r == nil {
		return true
	}
	return (r.From == 0 || turn >= r.From) && (r.To == 0 || turn <= r.To)
}

// Inject describes the perturbation.
type Inject struct {
	Kind Kind `json:"kind"`
	// Instruction replaces the built-in control text of an instructed kind
	// (required for custom).
	Instruction string `json:"instruction,omitempty"`
	// Detail is appended to the control text (e.g. the adversarial payload to
	// plant, the field to rename).
	Detail string `json:"detail,omitempty"`
	// LatencyMS is the delay of a latency fault (required there); JitterMS
	// adds a seeded uniform 0..JitterMS on top.
	LatencyMS int `json:"latency_ms,omitempty"`
	JitterMS  int `json:"jitter_ms,omitempty"`
	// Status is the HTTP status of an http_error (zero: 503).
	Status int `json:"status,omitempty"`
	// Code is the JSON-RPC error code of a jsonrpc_error (zero: -32603).
	Code int `json:"code,omitempty"`
	// Message is the error message of http_error / jsonrpc_error (zero: the
	// status text or a generic internal error).
	Message string `json:"message,omitempty"`
	// Payload is the broken body of a malformed_payload (zero: a truncated
	// JSON document).
	Payload string `json:"payload,omitempty"`
}

// UnmarshalJSON accepts a bare list of rules as well as {seed, rules};
// unknown fields (a misspelt "probabilty") are errors.
func (c *Config) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if len(b) > 0 && b[0] == '[' {
		*c = Config{}
		return dec.Decode(&c.Rules)
	}
	type plain Config
	var p plain
	if err := dec.Decode(&p); err != nil {
		return err
	}
	*c = Config(p)
	return nil
}

// ErrInvalid wraps every rule validation failure.
var ErrInvalid = errors.New("invalid perturbation rule")

// RuleName is the rule's name or its default "rule<N>".
func (c *Config) RuleName(i int) string {
	if n := strings.TrimSpace(c.Rules[i].Name); n != "" {
		return n
	}
	return fmt.Sprintf("rule%d", i+1)
}

// Validate checks every rule. tools lists the world's tool names; a rule
// naming a tool (or a glob matching none) outside it is an error. With no
// tools (action-list domains) any tool condition is an error.
func (c *Config) Validate(tools []string) error {
	if c == nil {
		return nil
	}
	for _, f := range []struct {
		name string
		ms   int
	}{{"max_step_latency_ms", c.MaxStepLatencyMS}, {"max_session_latency_ms", c.MaxSessionLatencyMS}} {
		if f.ms < 0 || f.ms > maxRuleDelayMS {
			return fielderr.New(ErrInvalid, f.name, "%d is not in 0..%d (one day)", f.ms, maxRuleDelayMS)
		}
	}
	seen := map[string]bool{}
	patterns, insts := 0, 0
	for i := range c.Rules {
		r := &c.Rules[i]
		name := c.RuleName(i)
		// The rule is named in the message: its index alone is hard to
		// find in a long list.
		bad := func(field, format string, args ...any) error {
			return fielderr.New(ErrInvalid, fielderr.Join(fielderr.Index("rules", i), field), "%s (rule %s)", fmt.Sprintf(format, args...), name)
		}
		if seen[name] {
			return bad("name", "duplicate rule name")
		}
		seen[name] = true
		if r.When.Tool != "" {
			if _, err := path.Match(r.When.Tool, ""); err != nil {
				return bad("when.tool", "bad pattern %q: %v", r.When.Tool, err)
			}
			if !matchesAny(r.When.Tool, tools) {
				if len(tools) == 0 {
					return bad("when.tool", "world defines no tools, so %q can never match", r.When.Tool)
				}
				return bad("when.tool", "unknown tool %q (world tools: %s)", r.When.Tool, strings.Join(tools, ", "))
			}
		}
		if r.When.Action != "" {
			n, err := regexlimit.Cost(r.When.Action, nil)
			if err != nil {
				return bad("when.action", "bad regular expression: %v", err)
			}
			if patterns += n; patterns > MaxPatternBytes {
				return bad("when.action", "the action patterns up to here compile into about %d KiB, over the limit of %d KiB for all of them", patterns>>10, MaxPatternBytes>>10)
			}
			k, err := regexlimit.Insts(r.When.Action, nil)
			if err != nil {
				return bad("when.action", "bad regular expression: %v", err)
			}
			// Every rule may match the same action: the step's work is
			// the sum of the rules' programs times the bytes they see.
			if insts += k; insts > MaxActionInsts {
				return bad("when.action", "the action patterns up to here compile into %d instructions, over the limit of %d for all of them: each step matches every pattern against the action, and each must see at least %d KiB of it within %d instruction-bytes of work (counted repetitions such as {1000} multiply what they repeat)",
					insts, MaxActionInsts, regexlimit.MinMatchBytes>>10, regexlimit.DefaultMaxWork)
			}
		}
		if t := r.When.Turns; t != nil {
			if t.From < 0 || t.To < 0 {
				return bad("when.turns", "turns are 1-based, got from=%d to=%d", t.From, t.To)
			}
			if t.To != 0 && t.From > t.To {
				return bad("when.turns", "from %d is after to %d", t.From, t.To)
			}
		}
		if p := r.When.Probability; p != nil && (math.IsNaN(*p) || *p < 0 || *p > 1) {
			return bad("when.probability", "%v is not a probability in [0, 1]", *p)
		}
		in := r.Inject
		switch {
		case in.Kind == "":
			return bad("inject.kind", "missing (one of %s)", kindList())
		case in.Kind == Custom && strings.TrimSpace(in.Instruction) == "":
			return bad("inject.instruction", "custom needs an instruction text")
		case in.Kind == Latency && in.LatencyMS <= 0:
			return bad("inject.latency_ms", "latency needs a positive latency_ms")
		case !in.Kind.Instructed() && !in.Kind.Direct():
			return bad("inject.kind", "unknown kind %q (one of %s)", in.Kind, kindList())
		}
		if in.LatencyMS < 0 || in.JitterMS < 0 {
			return bad("inject.latency_ms", "negative delay")
		}
		if in.LatencyMS > maxRuleDelayMS {
			return bad("inject.latency_ms", "%d ms is more than a day", in.LatencyMS)
		}
		if in.JitterMS > maxRuleDelayMS {
			return bad("inject.jitter_ms", "%d ms is more than a day", in.JitterMS)
		}
		if in.Kind == HTTPError && in.Status != 0 && (in.Status < 400 || in.Status > 599) {
			return bad("inject.status", "%d is not an HTTP error status (400-599)", in.Status)
		}
		if in.Kind == JSONRPCError && in.Code > 0 {
			return bad("inject.code", "JSON-RPC error codes are negative, got %d", in.Code)
		}
	}
	return nil
}

// PatternBytes is what c's action patterns compile into, as regexlimit
// estimates it; patterns that do not compile count nothing (Validate
// refuses them).
func (c *Config) PatternBytes() int {
	if c == nil {
		return 0
	}
	n := 0
	for _, r := range c.Rules {
		if r.When.Action != "" {
			k, _ := regexlimit.Cost(r.When.Action, nil)
			n += k
		}
	}
	return n
}

func matchesAny(pattern string, names []string) bool {
	for _, n := range names {
		if ok, _ := path.Match(pattern, n); ok {
			return true
		}
	}
	return false
}

func kindList() string {
	var s []string
	for _, k := range Kinds() {
		s = append(s, string(k))
	}
	return strings.Join(s, ", ")
}

// Merge returns base with a session's override applied: a rule of the same
// name replaces the base rule in place, new rules are appended (unnamed
// ones as "session-rule<N>"), and a
// non-nil override seed replaces the section seed. Either may be nil. Of
// the latency caps the lower one set wins: a session may tighten a world's
// caps, never loosen them.
func Merge(base *Config, override *Config, overrideSeed *int64) *Config {
	out := &Config{}
	if base != nil {
		out.Seed = base.Seed
		out.MaxStepLatencyMS, out.MaxSessionLatencyMS = base.MaxStepLatencyMS, base.MaxSessionLatencyMS
		for i := range base.Rules {
			r := base.Rules[i]
			r.Name = base.RuleName(i)
			out.Rules = append(out.Rules, r)
		}
	}
	if override != nil {
		out.MaxStepLatencyMS = lowerCap(out.MaxStepLatencyMS, override.MaxStepLatencyMS)
		out.MaxSessionLatencyMS = lowerCap(out.MaxSessionLatencyMS, override.MaxSessionLatencyMS)
		for i := range override.Rules {
			r := override.Rules[i]
			if strings.TrimSpace(r.Name) == "" {
				// Unnamed session rules must not replace the spec's rule<N>.
				r.Name = fmt.Sprintf("session-rule%d", i+1)
			}
			replaced := false
			for j := range out.Rules {
				if out.Rules[j].Name == r.Name {
					out.Rules[j], replaced = r, true
					break
				}
			}
			if !replaced {
				out.Rules = append(out.Rules, r)
			}
		}
	}
	if overrideSeed != nil {
		out.Seed = *overrideSeed
	}
	return out
}

// lowerCap is the lower of two caps where 0 means unset.
func lowerCap(a, b int) int {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}
