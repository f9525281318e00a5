// Package expand turns trajectories into training samples: every turn
// for SFT or one drawn turn per trajectory for RL (uniformly or weighted by
// the masking category), each sample the request the simulator would send
// at that turn (system prompt under a pinned template version, history,
// current action) with its target observation. It also reads the selected
// set `agentworld data sample` writes back as samples ([ReadSampledLine]).
package expand

import (
	"crypto/sha256"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/masking"
	"github.com/agentworld/agentworld/internal/promptlib"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// Mode selects how trajectories become samples.
type Mode int

const (
	// SFT emits every turn k of a trajectory: history 1..k-1, action k as
	// input, observation k as target. A trajectory of T turns gives T samples.
	SFT Mode = iota
	// RL emits exactly one turn per trajectory, chosen by the Policy: many
	// samples sharing a prefix would collapse the reward signal.
	RL
)

// ParseMode accepts "sft" or "rl".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "sft", "":
		return SFT, nil
	case "rl":
		return RL, nil
	}
	return SFT, fmt.Errorf("unknown mode %q (want sft or rl)", s)
}

// Policy chooses the one turn of a trajectory in RL mode.
type Policy int

const (
	// Uniform picks each turn with probability 1/T.
	Uniform Policy = iota
	// Weighted picks turn k with probability proportional to the loss
	// weight of its masking category, so informative turns (retrieval)
	// are drawn far more often than echoes; if every weight is 0 it falls
	// back to Uniform.
	Weighted
)

// ParsePolicy accepts "uniform" or "weighted".
func ParsePolicy(s string) (Policy, error) {
	switch s {
	case "uniform", "":
		return Uniform, nil
	case "weighted":
		return Weighted, nil
	}
	return Uniform, fmt.Errorf("unknown policy %q (want uniform or weighted)", s)
}

// ExpandOptions configure expansion. A nil *ExpandOptions means SFT, the
// trajectory's own system prompt and the default masking config.
type ExpandOptions struct {
	// Mode is SFT (the zero value) or RL.
	Mode Mode
	// Policy picks the RL turn; the zero value is Uniform.
	Policy Policy
	// Seed makes RL turn choices and template draws reproducible; the
	// choice for a trajectory depends only on Seed, its id, domain and
	// turns, never on file order or worker count. Zero is a valid seed.
	Seed uint64
	// Templates, when set, is the mix of world-model template versions
	// (promptlib: the versions serve, bench and research use) the system
	// prompts are rendered with: each trajectory draws one version by
	// weight from Seed and the trajectory, and all its samples pin that
	// version's name and id. A trajectory with components is rendered from
	// them; one with only its own prompt has it split back into components
	// (promptlib.Library.Decompose) and rendered again, and a prompt that
	// cannot be split is an error naming the file and line. Nil keeps
	// every trajectory's own prompt and renders components with Default.
	Templates []promptlib.MixEntry
	// Library recognises the prompts its versions rendered when splitting
	// them; nil recognises v0 and the published sectioned layout.
	Library *promptlib.Library
	// Default renders the system prompt of a trajectory that carries only
	// components when Templates is nil, and its samples pin it; nil means
	// v0, the built-in templates.
	Default *promptlib.Version
	// Masking gives each sample its category and loss weight; nil means
	// the default config.
	Masking *masking.MaskingConfig
}

// Sample is one turn-level training example.
type Sample struct {
	// ID is "<trajectory id>#<turn>".
	ID           string `json:"id"`
	TrajectoryID string `json:"trajectory_id"`
	Domain       string `json:"domain"`
	Source       string `json:"source,omitempty"`
	// Turn is 1-based; TotalTurns is the trajectory's length.
	Turn       int `json:"turn"`
	TotalTurns int `json:"total_turns"`
	// Template names the template version (promptlib) the system prompt
	// was rendered with and TemplateID pins its content id, so a sample
	// says exactly which prompt it was made with; both are empty for a
	// trajectory's own prompt.
	Template    string            `json:"template,omitempty"`
	TemplateID  string            `json:"template_id,omitempty"`
	System      string            `json:"system"`
	History     []trajectory.Turn `json:"history"`
	Action      string            `json:"action"`
	Observation string            `json:"observation"`
	Stats       masking.Stats     `json:"stats"`
	Category    string            `json:"category"`
	Weight      float64           `json:"weight"`
	// Teacher is set on a sample read from `agentworld data sample`'s
	// selected set (ReadSampledLine): Observation is then the teacher's
	// kept prediction, not the recorded one, and the target carries the
	// teacher's reasoning.
	Teacher *Teacher `json:"teacher,omitempty"`
}

// Message is one chat message, the unit trainers consume.
type Message struct {
	Role    string `json:"role" parquet:"role"`
	Content string `json:"content" parquet:"content"`
}

// Prompt is the model input of a sample, in the messages `agentworld serve`
// sends a world model: the system prompt (omitted when empty); each earlier
// turn as a user message (the published "### Turn N" / "**Action:**" form
// ending with the answer reminder) and an assistant message (the
// observation after the published marker); then the current action the
// same way. A model trained on these samples is served exactly this shape.
func (s *Sample) Prompt() []Message {
	msgs := make([]Message, 0, 2*len(s.History)+2)
	if s.System != "" {
		msgs = append(msgs, Message{Role: "system", Content: s.System})
	}
	for i, h := range s.History {
		msgs = append(msgs,
			Message{Role: "user", Content: conversation.UserMessage(i+1, h.Action, "", "")},
			Message{Role: "assistant", Content: conversation.ObservationResponse(h.Observation)})
	}
	return append(msgs, Message{Role: "user", Content: conversation.UserMessage(s.Turn, s.Action, "", "")})
}

// Target is the assistant message a model should generate for the sample:
// the observation inside the answer tag the world-model prompts ask for,
// which is what the simulator and the benchmark extract from a generation.
// Earlier turns appear in the prompt the way the published inference shows
// them (ObservationResponse); only the generated turn carries the tag.
// A sample with a Teacher has the teacher's reasoning before the tag, the
// way thinking models write it (InlineReasoning).
func (s *Sample) Target() string {
	return InlineReasoning(s.Reasoning(), conversation.Answer(s.Observation))
}

// ContentHash identifies a sample by what a trainer sees: system prompt,
// history, action and target. Equal hashes mean exact duplicates.
func (s *Sample) ContentHash() [16]byte {
	h := sha256.New()
	var n [8]byte
	put := func(str string) {
		l := len(str)
		for i := range n {
			n[i] = byte(l >> (8 * i))
		}
		h.Write(n[:])
		h.Write(masking.UnsafeBytes(str))
	}
	put(s.System)
	for _, t := range s.History {
		put(t.Action)
		put(t.Observation)
	}
	put(s.Action)
	put(s.Observation)
	if s.Teacher != nil {
		put(s.Teacher.Reasoning)
	}
	var out [16]byte
	copy(out[:], h.Sum(nil))
	return out
}

// AssembleSystemPrompt renders a trajectory's system prompt without a
// template: the prompt itself when set; otherwise the domain's world-model
// prompt built from the five components, exactly what `agentworld serve`
// sends and what benchmark records carry (trajectory.RecordSystemPrompt), so
// a model trained on these samples is served the prompt it learned; for a
// domain without a world-model template, the components under headings,
// empty ones left out.
func AssembleSystemPrompt(t *trajectory.Trajectory) string {
	if t.SystemPrompt != "" || t.Components == nil {
		return t.SystemPrompt
	}
	if p, err := t.RecordSystemPrompt(nil); err == nil {
		return p
	}
	c := t.Components
	var b strings.Builder
	section := func(title, body string) {
		if strings.TrimSpace(body) == "" {
			return
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString("## " + title + "\n" + body)
	}
	section("Task", c.TaskDescription)
	section("Action space", c.ActionSpace)
	section("Initial state", c.InitialState)
	if len(c.Demonstrations) > 0 {
		var d strings.Builder
		for i, x := range c.Demonstrations {
			fmt.Fprintf(&d, "Example %d\nAction:\n%s\nObservation:\n%s\n", i+1, x.Action, x.Observation)
		}
		section("Demonstrations", strings.TrimRight(d.String(), "\n"))
	}
	section("Simulation instructions", c.SimulationInstruction)
	return b.String()
}

// Expander turns trajectories into samples. It keeps scratch state, so
// give each worker its own.
type Expander struct {
	opts ExpandOptions
	sc   masking.Scorer
	// weights is scratch for the weighted policy.
	weights []float64
	stats   []masking.Stats
	// system is the system prompt of the trajectory being expanded (one
	// render per trajectory) and version the template version it was
	// rendered with (nil: the trajectory's own prompt).
	system  string
	version *promptlib.Version
	// rr splits and renders own prompts under each version of Templates,
	// keeping what it compiled.
	rr map[string]*promptlib.Rerenderer
}

// NewExpander checks the options; nil means defaults.
func NewExpander(o *ExpandOptions) (*Expander, error) {
	var v ExpandOptions
	if o != nil {
		v = *o
	}
	if v.Masking == nil {
		cfg, err := masking.LoadMaskingConfig("")
		if err != nil {
			return nil, err
		}
		v.Masking = cfg
	}
	if v.Templates != nil && len(v.Templates) == 0 {
		return nil, fmt.Errorf("template mix: no version (want at least one {version, weight})")
	}
	for i, e := range v.Templates {
		if e.Resolved == nil || !(e.Weight > 0) {
			return nil, fmt.Errorf("template mix [%d] %q: no resolved version with a weight > 0 (use promptlib.ParseMixes or promptlib.Single)", i, e.Version)
		}
	}
	if v.Default == nil {
		v.Default = BuiltinVersion
	}
	if v.Library == nil {
		v.Library = builtinLibrary
	}
	x := &Expander{opts: v, rr: map[string]*promptlib.Rerenderer{}}
	for _, e := range v.Templates {
		x.rr[e.Resolved.ID] = promptlib.NewRerenderer(v.Library, e.Resolved)
	}
	return x, nil
}

// mix derives an independent random stream for (seed, trajectory, salt).
func (e *Expander) Rng(t *trajectory.Trajectory, salt string, turn int) *rand.Rand {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%s\x00%d\x00%s\x00%d", t.ID, t.Domain, len(t.Turns), salt, turn)
	return rand.New(rand.NewPCG(e.opts.Seed, h.Sum64()))
}

// Expand emits the samples of one valid trajectory in turn order.
func (e *Expander) Expand(t *trajectory.Trajectory, emit func(*Sample) error) error {
	n := len(t.Turns)
	if n == 0 {
		return nil
	}
	e.stats = e.stats[:0]
	for _, tu := range t.Turns {
		e.stats = append(e.stats, e.sc.Score(tu.Action, tu.Observation))
	}
	var err error
	if e.system, e.version, err = e.SystemPrompt(t); err != nil {
		return err
	}
	if e.opts.Mode == RL {
		return e.emit(t, e.chooseTurn(t), emit)
	}
	for k := 0; k < n; k++ {
		if err := e.emit(t, k, emit); err != nil {
			return err
		}
	}
	return nil
}

// chooseTurn implements the RL policy; it returns a 0-based index.
func (e *Expander) chooseTurn(t *trajectory.Trajectory) int {
	r := e.Rng(t, "rl-turn", 0)
	n := len(t.Turns)
	if e.opts.Policy == Weighted {
		e.weights = e.weights[:0]
		total := 0.0
		mc := e.opts.Masking.For(t.Domain)
		for i := range e.stats {
			w := mc.Categories[mc.Classify(&e.stats[i])].Weight
			e.weights = append(e.weights, w)
			total += w
		}
		if total > 0 {
			x := r.Float64() * total
			for i, w := range e.weights {
				x -= w
				if x < 0 && w > 0 {
					return i
				}
			}
			for i := n - 1; i >= 0; i-- {
				if e.weights[i] > 0 {
					return i
				}
			}
		}
	}
	return r.IntN(n)
}

func (e *Expander) emit(t *trajectory.Trajectory, k int, emit func(*Sample) error) error {
	st := e.stats[k]
	mc := e.opts.Masking.For(t.Domain)
	cat := &mc.Categories[mc.Classify(&st)]
	s := &Sample{
		ID:           fmt.Sprintf("%s#%d", t.ID, k+1),
		TrajectoryID: t.ID,
		Domain:       t.Domain,
		Source:       t.Source,
		Turn:         k + 1,
		TotalTurns:   len(t.Turns),
		History:      make([]trajectory.Turn, k),
		Action:       t.Turns[k].Action,
		Observation:  t.Turns[k].Observation,
		Stats:        st,
		Category:     cat.Name,
		Weight:       cat.Weight,
	}
	for i := 0; i < k; i++ {
		s.History[i] = trajectory.Turn{Action: t.Turns[i].Action, Observation: t.Turns[i].Observation}
	}
	s.System = e.system
	if v := e.version; v != nil {
		s.Template, s.TemplateID = v.Name, v.ID
	}
	return emit(s)
}

// systemPrompt is t's system prompt and the version that rendered it (nil
// for the trajectory's own prompt): under Templates, a version drawn by
// weight from the seed and the trajectory, rendering its components or
// its own prompt split back into them; without, its own prompt, or its
// components rendered by Default.
func (e *Expander) SystemPrompt(t *trajectory.Trajectory) (string, *promptlib.Version, error) {
	if e.opts.Templates == nil {
		if strings.TrimSpace(t.SystemPrompt) != "" || t.Components == nil {
			return AssembleSystemPrompt(t), nil, nil
		}
		if _, err := domain.Parse(t.Domain); err != nil {
			return AssembleSystemPrompt(t), nil, nil // no world template: the components under headings
		}
		s, err := e.render(e.opts.Default, t)
		if err != nil {
			return "", nil, err
		}
		return s, e.opts.Default, nil
	}
	v := promptlib.Pick(e.opts.Templates, e.Rng(t, "template", 0).Float64()).Resolved
	if t.Components != nil {
		s, err := e.render(v, t)
		return s, v, err
	}
	d, err := domain.Parse(t.Domain)
	if err != nil {
		return "", nil, fmt.Errorf("trajectory %s: %w", t.ID, err)
	}
	s, err := e.rr[v.ID].Rerender(d, t.SystemPrompt)
	if err != nil {
		return "", nil, fmt.Errorf("trajectory %s: system_prompt: template version %s: %w", t.ID, v.Name, err)
	}
	return s, v, nil
}

// render is t's components rendered by v.
func (e *Expander) render(v *promptlib.Version, t *trajectory.Trajectory) (string, error) {
	d, err := domain.Parse(t.Domain)
	if err != nil {
		return "", fmt.Errorf("trajectory %s: %w", t.ID, err)
	}
	s, err := v.Render(d, *t.Components)
	if err != nil {
		return "", fmt.Errorf("trajectory %s: template version %s: %w", t.ID, v.Name, err)
	}
	return s, nil
}

// builtinVersion and builtinLibrary are v0 and the library holding only
// it, made once.
var (
	BuiltinVersion    = promptlib.Builtin()
	builtinLibrary, _ = promptlib.Open("")
)
