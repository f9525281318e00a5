package mcpworld

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"weak"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/agentworld/agentworld/internal/mcpclient"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/world"
	"github.com/agentworld/agentworld/internal/worldhooks"
)

// ToolCalls is the step hook that checks a tool call against its world's
// tool definitions before any backend sees it, with the facade's own
// validators, so a step through the session API or OpenEnv is refused
// exactly as a tools/call through the facade (or a real MCP server) is: an
// unknown tool is the JSON-RPC error the SDK answers, arguments that break
// the input schema are the failed tool result real servers send. No model
// is asked (that is a paid call a real server would never make), and the
// refusal is recorded as the turn's observation, as an agent saw it.
//
// Worlds without tool definitions, and sessions on a real backend (whose
// server answers for itself), are not checked.
//
// A spec's compiled validators are kept while the spec lives and dropped
// once it is collected (an inline spec's when its session ends), so
// clients' distinct schemas do not pile up.
type ToolCalls struct {
	mu sync.Mutex
	// worlds holds specs weakly, and their tools' validators (nothing
	// that refers back to the spec); a nil value: the world is not
	// checked.
	worlds map[weak.Pointer[world.Spec]]map[string]*Validator
}

// LabelToolCheck is the step label a refused call carries:
// "unknown_tool" or "invalid_arguments".
const LabelToolCheck = "tool_check"

// NewToolCalls makes the hook.
func NewToolCalls() *ToolCalls {
	return &ToolCalls{worlds: map[weak.Pointer[world.Spec]]map[string]*Validator{}}
}

var _ sim.StepHook = (*ToolCalls)(nil)

// validators returns the validators of a spec's tools (compiled once per
// spec), nil when its calls are not checked.
func (h *ToolCalls) validators(s *world.Spec) map[string]*Validator {
	k := weak.Make(s)
	h.mu.Lock()
	defer h.mu.Unlock()
	if v, ok := h.worlds[k]; ok {
		return v
	}
	var v map[string]*Validator
	if len(s.ActionSpace.Tools) > 0 {
		// A world the facade cannot serve (a tool domain's spec with a
		// schema that is not an object schema) stays unchecked here too.
		if sv, err := newServed(s); err == nil {
			v = sv.validators
		}
	}
	h.worlds[k] = v
	runtime.AddCleanup(s, h.forget, k)
	return v
}

// forget drops a collected spec's validators.
func (h *ToolCalls) forget(k weak.Pointer[world.Spec]) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.worlds, k)
}

// BeforeStep implements sim.StepHook.
func (h *ToolCalls) BeforeStep(_ context.Context, s sim.SessionInfo, in *sim.StepInput) (*sim.Observation, error) {
	call := in.Action.Tool
	if call == nil || s.Spec == nil || strings.HasPrefix(s.Backend, "real:") {
		return nil, nil
	}
	validators := h.validators(s.Spec)
	if validators == nil {
		return nil, nil
	}
	var text, why string
	if v, ok := validators[call.Name]; !ok {
		// The words of the SDK's own answer to an unknown tool.
		text, why = mcpclient.RenderError(jsonrpc.CodeInvalidParams, fmt.Sprintf("unknown tool %q", call.Name)), "unknown_tool"
	} else if issue := v.Check(call.Arguments); issue != "" {
		r, err := mcpclient.RenderResult(ValidationFailure(call.Name, issue))
		if err != nil {
			return nil, err
		}
		text, why = r, "invalid_arguments"
	} else {
		return nil, nil
	}
	if in.Labels == nil {
		in.Labels = map[string]string{}
	}
	in.Labels[LabelToolCheck] = why
	return &sim.Observation{Text: text, Info: sim.StepInfo{Backend: worldhooks.BackendToolCheck, Labels: in.Labels}}, nil
}

// AfterStep implements sim.StepHook.
func (h *ToolCalls) AfterStep(context.Context, sim.SessionInfo, sim.StepInput, sim.StepResult) {}
