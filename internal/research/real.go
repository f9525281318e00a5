package research

import (
	"context"
	"fmt"

	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/promptlib"
)

// RealScore is how far a version's simulator strays from recorded real
// trajectories when replayed teacher-forced (each turn predicted from the
// real turns before it).
type RealScore struct {
	// Divergence is 100 × (1 − the mean turn similarity), averaged over the
	// trajectories: 0 when every prediction matched the real observation.
	// Lower is better.
	Divergence float64 `json:"divergence"`
	// ExactRate is the share of turns whose deterministic content matched.
	ExactRate float64 `json:"exact_rate"`
	Turns     int     `json:"turns"`
	// Errors counts turns the simulator did not answer; they count as
	// fully divergent.
	Errors int `json:"errors,omitempty"`
}

func (r *RealScore) String() string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", r.Divergence)
}

// RealChecker scores versions on recorded real trajectories (the CLI
// wires the verify machinery), so a prompt cannot win by pleasing the
// judge alone.
type RealChecker interface {
	Divergence(ctx context.Context, v *promptlib.Version, d domain.Domain) (*RealScore, error)
	// Calls is the most world-model calls one scoring makes.
	Calls() int
}

// realVerdict says why a candidate with real score c is rejected against
// the seed's s, "" when it is not.
func realVerdict(c, s *RealScore, tol float64) string {
	if c == nil || s == nil || c.Divergence <= s.Divergence+tol {
		return ""
	}
	return fmt.Sprintf("real divergence %.2f exceeds the seed's %.2f by more than %.2f", c.Divergence, s.Divergence, tol)
}
