package realenv

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/fielderr"
	"github.com/agentworld/agentworld/internal/sim"
)

// Offer restricts the backends [Backends] returned to the real ones the
// operator turned on. off maps each real backend name that stays off to
// the reason a client is told (e.g. the flag that turns it on): its
// factory refuses every session with a field error naming "backend", and
// the simulator backend (named simulator) refuses shadow: real for that
// backend's domain with one naming "shadow". A real environment runs code
// on this host, so a server offers none unless told to.
func Offer(b map[string]sim.BackendFactory, simulator string, off map[string]string) map[string]sim.BackendFactory {
	out := make(map[string]sim.BackendFactory, len(b))
	for name, f := range b {
		out[name] = f
	}
	for name, why := range off {
		msg := fmt.Sprintf("%s is off on this server: %s", name, why)
		out[name] = func(context.Context, sim.SessionInfo) (sim.Environment, error) {
			return nil, fielderr.New(sim.ErrBadRequest, "backend", "%s", msg)
		}
	}
	if f, ok := out[simulator]; ok && len(off) > 0 {
		out[simulator] = func(ctx context.Context, s sim.SessionInfo) (sim.Environment, error) {
			var shadow string
			if raw := s.Params["shadow"]; len(raw) > 0 {
				_ = json.Unmarshal(raw, &shadow) // a malformed value is the wrapped factory's to refuse
			}
			if shadow == ShadowReal {
				if why, ok := off[realBackendOf(s.Spec.Domain)]; ok {
					return nil, fielderr.New(sim.ErrBadRequest, "shadow", "shadow %q needs %s, which is off on this server: %s", shadow, realBackendOf(s.Spec.Domain), why)
				}
			}
			return f(ctx, s)
		}
	}
	return out
}

// realBackendOf names the real backend of a domain, "" when it has none.
func realBackendOf(d domain.Domain) string {
	switch d {
	case domain.Terminal:
		return BackendTerminal
	case domain.MCP:
		return BackendMCP
	}
	return ""
}
