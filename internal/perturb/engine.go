package perturb

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/http"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/agentworld/agentworld/internal/fielderr"
	"github.com/agentworld/agentworld/internal/regexlimit"
)

// Engine decides, step by step, which rules fire. It is immutable and safe
// for concurrent use.
type Engine struct {
	rules []compiled
	// caps keeps the config's own latency caps (see Config.Caps).
	caps Config
	// bytes estimates what the compiled patterns hold.
	bytes int
	// matchBytes is how much of an action each pattern is matched
	// against (see MatchBytes).
	matchBytes int
}

type compiled struct {
	name   string
	rule   Rule
	seed   int64
	action *regexp.Regexp
	prob   float64
}

// New validates c against the world's tool names and compiles it. A nil or
// empty config gives an engine that never fires.
func New(c *Config, tools []string) (*Engine, error) {
	e := &Engine{}
	if c == nil {
		return e, nil
	}
	if err := c.Validate(tools); err != nil {
		return nil, err
	}
	e.caps = Config{MaxStepLatencyMS: c.MaxStepLatencyMS, MaxSessionLatencyMS: c.MaxSessionLatencyMS}
	insts := 0
	for i, r := range c.Rules {
		cr := compiled{name: c.RuleName(i), rule: r, seed: c.Seed, prob: 1}
		if r.When.Seed != nil {
			cr.seed = *r.When.Seed
		}
		if r.When.Probability != nil {
			cr.prob = *r.When.Probability
		}
		if r.When.Action != "" {
			re, n, err := regexlimit.Compile(r.When.Action, nil)
			if err != nil { // validated above
				return nil, err
			}
			k, err := regexlimit.Insts(r.When.Action, nil)
			if err != nil {
				return nil, err
			}
			cr.action, e.bytes, insts = re, e.bytes+n, insts+k
		}
		e.rules = append(e.rules, cr)
	}
	n, err := regexlimit.MatchBytes(insts, regexlimit.DefaultMaxWork)
	if err != nil { // validated above
		return nil, fielderr.New(ErrInvalid, "rules", "%v", err)
	}
	e.matchBytes = n
	return e, nil
}

// MatchBytes is how many bytes of an action the engine's rules match
// their patterns against: an action longer than that is matched by its
// first MatchBytes bytes (cut back to a whole character), so that one
// step's matching stays within regexlimit.DefaultMaxWork
// instruction-bytes whatever the action and the patterns. It is that
// budget over the instructions of all the patterns (356 KiB for three
// rules of 46 instructions in all, 16 KiB for `.{0,500}x`), and never under
// regexlimit.MinMatchBytes (a config that would be is refused).
func (e *Engine) MatchBytes() int {
	if e == nil || e.matchBytes == 0 {
		return regexlimit.DefaultMaxWork
	}
	return e.matchBytes
}

// Caps are the engine's latency caps under the operator's limits l (see
// Config.Caps). Decide reports the delay its rules ask for; the caller
// holds it to these caps, the session one across steps.
func (e *Engine) Caps(l Limits) (step, session time.Duration) {
	if e == nil {
		return (*Config)(nil).Caps(l)
	}
	return e.caps.Caps(l)
}

// Bytes estimates the memory the engine's compiled patterns hold (see
// regexlimit.Cost), for caches of engines to bound themselves by.
func (e *Engine) Bytes() int {
	if e == nil {
		return 0
	}
	return e.bytes
}

// Empty reports an engine without rules.
func (e *Engine) Empty() bool { return e == nil || len(e.rules) == 0 }

// Step is what the engine sees of one step.
type Step struct {
	// Stream keys the random draws of one line of steps: a session passes a
	// key of its own (its seed or its root session id); a fork passes its
	// parent's key so the branch sees the draws the parent would have.
	Stream string
	// Turn is the 1-based turn of the step.
	Turn int
	// Tool is the called tool's name; empty for action-list domains.
	Tool string
	// Action is the action text as the world model will see it.
	Action string
}

// Firing records one rule that fired on a step.
type Firing struct {
	Rule string `json:"rule"`
	Kind Kind   `json:"kind"`
}

// Fault is a direct fault the server returns instead of calling the model.
type Fault struct {
	Rule string `json:"rule"`
	Kind Kind   `json:"kind"`
	// HTTPStatus is set for http_error.
	HTTPStatus int `json:"http_status,omitempty"`
	// RPCCode is set for jsonrpc_error.
	RPCCode int `json:"rpc_code,omitempty"`
	// Message is the error message of http_error and jsonrpc_error.
	Message string `json:"message,omitempty"`
	// Payload is the broken body of malformed_payload.
	Payload string `json:"payload,omitempty"`
}

// Decision is what the engine decided for one step.
type Decision struct {
	// Fired lists every rule that fired, in rule order.
	Fired []Firing `json:"fired,omitempty"`
	// Instruction is the control text for the step's last user message; empty
	// when no instructed rule fired.
	Instruction string `json:"instruction,omitempty"`
	// Delay is the total latency to add before answering.
	Delay time.Duration `json:"delay,omitempty"`
	// Fault, when set, answers the step without a model call; the first
	// firing error or malformed-payload rule wins.
	Fault *Fault `json:"fault,omitempty"`
}

// Label keys that Decision.Labels sets on a step.
const (
	LabelRules = "perturb.rules"
	LabelKinds = "perturb.kinds"
	LabelFault = "perturb.fault"
)

// Labels renders the decision as step labels: comma-joined rule names and
// kinds, and the fault kind. No rule fired → nil.
func (d Decision) Labels() map[string]string {
	if len(d.Fired) == 0 {
		return nil
	}
	var names, kinds []string
	for _, f := range d.Fired {
		names = append(names, f.Rule)
		kinds = append(kinds, string(f.Kind))
	}
	m := map[string]string{LabelRules: strings.Join(names, ","), LabelKinds: strings.Join(kinds, ",")}
	if d.Fault != nil {
		m[LabelFault] = string(d.Fault.Kind)
	}
	return m
}

// Decide evaluates every rule against the step. The result depends only on
// the rules and the step, never on call order or time.
func (e *Engine) Decide(s Step) Decision {
	var d Decision
	if e == nil {
		return d
	}
	var texts []string
	for i := range e.rules {
		r := &e.rules[i]
		if !r.matches(s, e.MatchBytes()) {
			continue
		}
		if r.prob < 1 && Draw(r.seed, s.Stream, s.Turn, r.name, "fire") >= r.prob {
			continue
		}
		in := r.rule.Inject
		d.Fired = append(d.Fired, Firing{Rule: r.name, Kind: in.Kind})
		switch {
		case in.Kind.Instructed():
			texts = append(texts, instructionText(in))
		case in.Kind == Latency:
			ms := in.LatencyMS
			if in.JitterMS > 0 {
				ms += int(Draw(r.seed, s.Stream, s.Turn, r.name, "jitter") * float64(in.JitterMS+1))
			}
			d.Delay += time.Duration(ms) * time.Millisecond
		default:
			if d.Fault == nil {
				d.Fault = fault(r.name, in, s)
			}
		}
	}
	if len(texts) > 0 {
		d.Instruction = ControlHeader + "\n" + strings.Join(texts, "\n")
	}
	return d
}

func (r *compiled) matches(s Step, matchBytes int) bool {
	if !r.rule.When.Turns.Contains(s.Turn) {
		return false
	}
	if r.rule.When.Tool != "" {
		if s.Tool == "" {
			return false
		}
		if ok, _ := path.Match(r.rule.When.Tool, s.Tool); !ok {
			return false
		}
	}
	if r.action != nil && !r.action.MatchString(regexlimit.Prefix(s.Action, matchBytes)) {
		return false
	}
	return true
}

// Draw is the engine's deterministic uniform number in [0, 1) for one rule
// on one step: a hash of seed, stream, turn, rule name and purpose.
func Draw(seed int64, stream string, turn int, rule, purpose string) float64 {
	h := sha256.New()
	var buf [8]byte
	binary.LittleEndian.PutUint64(buf[:], uint64(seed))
	h.Write(buf[:])
	for _, s := range []string{stream, rule, purpose} {
		binary.LittleEndian.PutUint64(buf[:], uint64(len(s)))
		h.Write(buf[:])
		h.Write([]byte(s))
	}
	binary.LittleEndian.PutUint64(buf[:], uint64(turn))
	h.Write(buf[:])
	sum := h.Sum(nil)
	return float64(binary.LittleEndian.Uint64(sum[:8])>>11) / (1 << 53)
}

func fault(rule string, in Inject, s Step) *Fault {
	f := &Fault{Rule: rule, Kind: in.Kind, Message: in.Message}
	switch in.Kind {
	case HTTPError:
		f.HTTPStatus = in.Status
		if f.HTTPStatus == 0 {
			f.HTTPStatus = http.StatusServiceUnavailable
		}
		if f.Message == "" {
			f.Message = http.StatusText(f.HTTPStatus)
		}
	case JSONRPCError:
		f.RPCCode = in.Code
		if f.RPCCode == 0 {
			f.RPCCode = -32603
		}
		if f.Message == "" {
			f.Message = "Internal error"
		}
	case MalformedPayload:
		f.Payload = in.Payload
		if f.Payload == "" {
			f.Payload = malformed(s)
		}
	}
	return f
}

// malformed builds a JSON document cut off mid-value, the shape a dropped
// connection or a buggy server produces.
func malformed(s Step) string {
	name := s.Tool
	if name == "" {
		name = "result"
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","result":{"content":[{"type":"text","text":"{\"%s\": {\"items\": [{\"id\": `, name)
}
