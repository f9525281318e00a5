package replay

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// KindTransition is the "kind" of a compact cache line (see the package
// doc); lines without a kind are unified trajectories.
const KindTransition = "transition"

// ErrBadLine is wrapped by every complaint about the content of a
// recording or cache line (JSON syntax errors aside).
var ErrBadLine = errors.New("bad replay line")

// transitionLine is the wire shape of a compact cache line. Pointers tell
// a missing field from an empty one.
type transitionLine struct {
	Kind        string  `json:"kind"`
	Parent      *string `json:"parent,omitempty"`
	Domain      *string `json:"domain,omitempty"`
	World       string  `json:"world,omitempty"`
	Model       string  `json:"model,omitempty"`
	Action      *string `json:"action,omitempty"`
	Observation *string `json:"observation,omitempty"`
}

// step is one recorded transition as a compact cache line holds it.
type step struct {
	parent      Key
	domain      string // as domain.Parse normalizes it
	world       string
	model       string // the world model that answered; "" for recordings
	action      string
	observation string
}

// entry is one parsed line: exactly one of traj and step is set.
type entry struct {
	traj *trajectory.Trajectory
	step *step
}

// parseLine decodes one line of a recording or cache file.
func parseLine(line []byte) (entry, error) {
	var w transitionLine
	if err := json.Unmarshal(line, &w); err != nil {
		return entry{}, err
	}
	switch w.Kind {
	case "":
		t := new(trajectory.Trajectory)
		if err := json.Unmarshal(line, t); err != nil {
			return entry{}, err
		}
		if err := t.Validate(); err != nil {
			return entry{}, err
		}
		d, err := domain.Parse(t.Domain)
		if err != nil {
			return entry{}, err
		}
		t.Domain = string(d)
		return entry{traj: t}, nil
	case KindTransition:
		s, err := w.step()
		if err != nil {
			return entry{}, fmt.Errorf("%w: %s line: %w", ErrBadLine, KindTransition, err)
		}
		return entry{step: s}, nil
	default:
		return entry{}, fmt.Errorf("%w: unknown kind %q (want %q, or none for a trajectory)", ErrBadLine, w.Kind, KindTransition)
	}
}

func (w *transitionLine) step() (*step, error) {
	for _, f := range []struct {
		name string
		v    *string
	}{{"parent", w.Parent}, {"domain", w.Domain}, {"action", w.Action}, {"observation", w.Observation}} {
		if f.v == nil {
			return nil, fmt.Errorf("missing field %q", f.name)
		}
	}
	parent, err := ParseKey(*w.Parent)
	if err != nil {
		return nil, fmt.Errorf("parent: %w", err)
	}
	d, err := domain.Parse(*w.Domain)
	if err != nil {
		return nil, err
	}
	return &step{parent: parent, domain: string(d), world: w.World, model: w.Model, action: *w.Action, observation: *w.Observation}, nil
}

// writeLine encodes s as one compact cache line, newline included, without
// HTML escaping (like every line agentworld writes).
func (s *step) writeLine(out io.Writer) error {
	parent := s.parent.String()
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	return enc.Encode(transitionLine{
		Kind: KindTransition, Parent: &parent, Domain: &s.domain, World: s.world, Model: s.model,
		Action: &s.action, Observation: &s.observation,
	})
}
