package dataset

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"text/template"

	"github.com/goccy/go-yaml"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/domain"
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
	// Templates, when set, renders every sample's system prompt with a
	// template drawn from the weighted set; nil keeps the trajectory's
	// own prompt (or assembles it from its components).
	Templates *TemplateSet
	// Version, when set and Templates is nil, renders the system prompt of
	// every trajectory that carries components with a world-model template
	// version (promptlib: the versions serve and research use), and samples
	// pin it by name and id; trajectories without components keep their
	// own prompt and pin nothing. Nil renders as without it.
	Version *PromptVersion
	// Masking gives each sample its category and loss weight; nil means
	// the default config.
	Masking *MaskingConfig
}

// PromptVersion is a world-model template version as expansion needs it:
// its renderer, name and content id.
type PromptVersion struct {
	Render   trajectory.SystemPromptFunc
	Name, ID string
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
	// Template names the template version the system prompt came from and
	// TemplateID pins its text (Template.ID), so a sample says exactly
	// which prompt it was made with.
	Template    string            `json:"template,omitempty"`
	TemplateID  string            `json:"template_id,omitempty"`
	System      string            `json:"system"`
	History     []trajectory.Turn `json:"history"`
	Action      string            `json:"action"`
	Observation string            `json:"observation"`
	Stats       Stats             `json:"stats"`
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
	return InlineReasoning(s.reasoning(), conversation.Answer(s.Observation))
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
		h.Write(unsafeBytes(str))
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

// Template is one version of the world-model system prompt, a Go
// text/template over TemplateData.
type Template struct {
	Name string `yaml:"name" json:"name"`
	// Weight is the version's share when no stage mix is chosen; it may be
	// 0 (left out) in a file with mixes.
	Weight float64 `yaml:"weight,omitempty" json:"weight,omitempty"`
	// Parent names the version this one was derived from ("" for a root).
	Parent string `yaml:"parent,omitempty" json:"parent,omitempty"`
	Text   string `yaml:"text" json:"text"`
	tmpl   *template.Template
	id     string
}

// TemplateData is what a template sees. Fields of missing components are
// empty; SystemPrompt is the trajectory's own rendered prompt.
type TemplateData struct {
	Domain                string
	SystemPrompt          string
	TaskDescription       string
	ActionSpace           string
	InitialState          string
	Demonstrations        []trajectory.Demonstration
	SimulationInstruction string
}

// TemplateSet is a weighted set of template versions (the multi-template
// exposure: each sample sees one version, drawn by weight).
type TemplateSet struct {
	Templates []Template `yaml:"templates" json:"templates"`
	// Mixes declares per training stage (cpt, sft, rl, or any name) the
	// weighted versions it draws from; see Stage.
	Mixes map[string]map[string]float64 `yaml:"mixes,omitempty" json:"mixes,omitempty"`
	total float64
}

// ErrBadTemplates reports an unusable template file.
var ErrBadTemplates = errors.New("bad templates")

// LoadTemplates reads a YAML (or JSON) file:
//
//	templates:
//	  - name: v3
//	    weight: 2
//	    text: "You simulate {{.Domain}}.\n{{.TaskDescription}}\n..."
func LoadTemplates(path string) (*TemplateSet, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseTemplates(b, path)
}

// templatesShape is the file format, quoted by the errors about its shape
// so that a wrong file says what a right one looks like.
const templatesShape = `want a mapping with one key, "templates", holding a list of {name, weight, text}, e.g.
templates:
  - name: v1
    weight: 1
    text: "You simulate {{.Domain}}. {{.TaskDescription}}"`

// ParseTemplates decodes and compiles a template set; name is for errors.
func ParseTemplates(data []byte, name string) (*TemplateSet, error) {
	var ts TemplateSet
	if err := yaml.UnmarshalWithOptions(data, &ts, yaml.Strict()); err != nil {
		return nil, fmt.Errorf("%s: %w: %v\n%s", name, ErrBadTemplates, err, templatesShape)
	}
	if len(ts.Templates) == 0 {
		return nil, fmt.Errorf("%s: %w: no templates\n%s", name, ErrBadTemplates, templatesShape)
	}
	seen := map[string]bool{}
	for i := range ts.Templates {
		t := &ts.Templates[i]
		field := fmt.Sprintf("templates[%d]", i)
		if t.Name == "" || seen[t.Name] {
			return nil, fmt.Errorf("%s: %w: %s.name %q is empty or repeated", name, ErrBadTemplates, field, t.Name)
		}
		seen[t.Name] = true
		if t.Weight < 0 || math.IsNaN(t.Weight) || math.IsInf(t.Weight, 0) || t.Weight == 0 && len(ts.Mixes) == 0 {
			return nil, fmt.Errorf("%s: %w: %s.weight must be > 0 (or ≥ 0 in a file with mixes)", name, ErrBadTemplates, field)
		}
		tm, err := template.New(t.Name).Option("missingkey=error").Parse(t.Text)
		if err != nil {
			return nil, fmt.Errorf("%s: %w: %s.text: %v", name, ErrBadTemplates, field, err)
		}
		t.tmpl = tm
		t.id = templateID(t.Text)
		ts.total += t.Weight
	}
	if err := ts.checkLibrary(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &ts, nil
}

// pick maps u in [0,1) to a template by weight.
func (ts *TemplateSet) pick(u float64) *Template {
	x := u * ts.total
	for i := range ts.Templates {
		x -= ts.Templates[i].Weight
		if x < 0 {
			return &ts.Templates[i]
		}
	}
	return &ts.Templates[len(ts.Templates)-1]
}

func templateData(t *trajectory.Trajectory) TemplateData {
	d := TemplateData{Domain: t.Domain, SystemPrompt: t.SystemPrompt}
	if c := t.Components; c != nil {
		d.TaskDescription, d.ActionSpace, d.InitialState = c.TaskDescription, c.ActionSpace, c.InitialState
		d.Demonstrations, d.SimulationInstruction = c.Demonstrations, c.SimulationInstruction
	}
	return d
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
	sc   Scorer
	// weights is scratch for the weighted policy.
	weights []float64
	stats   []Stats
	// system is the system prompt of the trajectory being expanded, when no
	// templates are drawn (one render per trajectory, not per sample);
	// versioned says it was rendered by opts.Version.
	system    string
	versioned bool
}

// NewExpander checks the options; nil means defaults.
func NewExpander(o *ExpandOptions) (*Expander, error) {
	var v ExpandOptions
	if o != nil {
		v = *o
	}
	if v.Masking == nil {
		cfg, err := LoadMaskingConfig("")
		if err != nil {
			return nil, err
		}
		v.Masking = cfg
	}
	if v.Templates != nil && !(v.Templates.total > 0) {
		return nil, fmt.Errorf("%w: no version has a weight > 0: choose a stage mix", ErrBadTemplates)
	}
	return &Expander{opts: v}, nil
}

// mix derives an independent random stream for (seed, trajectory, salt).
func (e *Expander) rng(t *trajectory.Trajectory, salt string, turn int) *rand.Rand {
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
	if e.opts.Templates == nil {
		var err error
		if e.system, e.versioned, err = e.versionPrompt(t); err != nil {
			return err
		}
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
	r := e.rng(t, "rl-turn", 0)
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
	system, tm, err := e.systemPrompt(t, k)
	if err != nil {
		return err
	}
	s.System = system
	if tm != nil {
		s.Template, s.TemplateID = tm.Name, tm.ID()
	} else if e.versioned {
		s.Template, s.TemplateID = e.opts.Version.Name, e.opts.Version.ID
	}
	return emit(s)
}

// versionPrompt is t's system prompt without drawn templates: rendered
// by opts.Version when set and t has components (versioned), else the
// trajectory's own (AssembleSystemPrompt).
func (e *Expander) versionPrompt(t *trajectory.Trajectory) (string, bool, error) {
	v := e.opts.Version
	if v == nil || t.Components == nil {
		return AssembleSystemPrompt(t), false, nil
	}
	d, err := domain.Parse(t.Domain)
	if err != nil {
		return "", false, fmt.Errorf("trajectory %s: %w", t.ID, err)
	}
	s, err := v.Render(d, *t.Components)
	if err != nil {
		return "", false, fmt.Errorf("trajectory %s: template version %s: %w", t.ID, v.Name, err)
	}
	return s, true, nil
}

// systemPrompt is the system prompt of turn k (0-based) of t and the name
// the template version it came from (nil without templates): a version
// drawn by weight from the seed, the trajectory and the turn, or the
// trajectory's own prompt. Only during Expand.
func (e *Expander) systemPrompt(t *trajectory.Trajectory, k int) (string, *Template, error) {
	ts := e.opts.Templates
	if ts == nil {
		// Set by Expand, once per trajectory.
		return e.system, nil, nil
	}
	tm := ts.pick(e.rng(t, "template", k).Float64())
	var b bytes.Buffer
	if err := tm.tmpl.Execute(&b, templateData(t)); err != nil {
		return "", nil, fmt.Errorf("template %s for trajectory %s: %w", tm.Name, t.ID, err)
	}
	return b.String(), tm, nil
}
