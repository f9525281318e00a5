package worldgen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/fiction"
	"github.com/agentworld/agentworld/internal/library"
	"github.com/agentworld/agentworld/internal/world"
)

// Rungs of the validation ladder, in the order a candidate climbs them.
const (
	RungGenerate = "generate"       // the generator answered within the size cap
	RungParse    = "parse"          // the answer is one JSON object of the expected shape
	RungSchema   = "schema"         // the spec validates and its tool schemas compile; tasks are well formed
	RungActions  = "actions"        // demonstrations and reference actions parse with the simulator's parser
	RungDedup    = "dedup"          // not a near-duplicate of a world or task already accepted
	RungInitial  = "initial"        // the check is not met by the initial state
	RungAnswer   = "answerable"     // a fictional question's answer is in a document retrieval finds
	RungRef      = "reference"      // the reference solution passes in >= 4 of 5 replays
	RungTrivial  = "trivial-agents" // a no-op and a random agent pass in 0 of 5
	RungAccepted = "accepted"
)

// Rungs lists the ladder in order.
var Rungs = []string{RungGenerate, RungParse, RungSchema, RungActions, RungDedup, RungInitial, RungAnswer, RungRef, RungTrivial}

// rejection is why a candidate (or one task of it) left the ladder.
type rejection struct {
	Rung   string `json:"rung"`
	Reason string `json:"reason"`
}

func (r *rejection) Error() string { return r.Rung + ": " + r.Reason }

func reject(rung, format string, args ...any) *rejection {
	return &rejection{Rung: rung, Reason: fmt.Sprintf(format, args...)}
}

// rawCandidate is the generator's answer.
type rawCandidate struct {
	World   json.RawMessage `json:"world"`
	Tasks   []rawTask       `json:"tasks"`
	Fiction *rawFiction     `json:"fiction"`
}

type rawTask struct {
	Instruction string             `json:"instruction"`
	Difficulty  string             `json:"difficulty"`
	Check       *world.SuccessRule `json:"check"`
	Reference   []json.RawMessage  `json:"reference"`
	MaxTurns    int                `json:"max_turns,omitempty"`
}

type rawFiction struct {
	Name      string             `json:"name"`
	Topic     string             `json:"topic"`
	Entities  []fiction.Entity   `json:"entities"`
	Relations []fiction.Relation `json:"relations"`
}

// candidate is a parsed world with its tasks, before the simulation rungs.
type candidate struct {
	spec  *world.Spec
	tasks []*library.TaskEntry
	// support maps a fictional task's id to the documents holding its
	// answer (the answerable rung).
	support map[string][]string
}

// extractJSON finds the answer's JSON object: the whole answer, or the
// span from its first '{' to its last '}' (a fenced block, a preamble).
func extractJSON(s string) []byte {
	s = strings.TrimSpace(conversation.StripThinking(s))
	i, j := strings.IndexByte(s, '{'), strings.LastIndexByte(s, '}')
	if i < 0 || j < i {
		return nil
	}
	return []byte(s[i : j+1])
}

// parseCandidate reads the generator's answer for plan p: the parse,
// schema and actions rungs. Task ids are <world>-t<k>.
func parseCandidate(p plan, answer string) (*candidate, error) {
	js := extractJSON(answer)
	if js == nil {
		return nil, reject(RungParse, "no JSON object in the answer (%d bytes)", len(answer))
	}
	var rc rawCandidate
	dec := json.NewDecoder(bytes.NewReader(js))
	if err := dec.Decode(&rc); err != nil {
		return nil, reject(RungParse, "malformed JSON: %v", err)
	}
	var c *candidate
	switch {
	case rc.Fiction != nil:
		var err error
		if c, err = buildFiction(p, rc.Fiction); err != nil {
			return nil, err
		}
	case len(rc.World) > 0:
		spec, err := world.Parse(rc.World, "world")
		if err != nil {
			return nil, reject(RungSchema, "%v", err)
		}
		spec.Name = worldName(spec.Name, p.Tag)
		c = &candidate{spec: spec}
		for k, rt := range rc.Tasks {
			c.tasks = append(c.tasks, &library.TaskEntry{
				ID: fmt.Sprintf("%s-t%d", spec.Name, k+1), World: spec.Name, Instruction: rt.Instruction,
				Difficulty: strings.ToLower(rt.Difficulty), Check: rt.Check, Reference: rt.Reference, MaxTurns: rt.MaxTurns,
			})
		}
	default:
		return nil, reject(RungParse, `the object has neither "world" nor "fiction"`)
	}
	if err := compileTools(c.spec); err != nil {
		return nil, err
	}
	if len(c.tasks) == 0 {
		return nil, reject(RungSchema, "no tasks")
	}
	for i, d := range c.spec.Demonstrations {
		raw, _ := json.Marshal(d.Action)
		if _, err := conversation.ParseAction(c.spec.Domain, raw); err != nil {
			return nil, reject(RungActions, "demonstrations[%d].action: %v", i, err)
		}
	}
	return c, nil
}

// compileTools compiles every tool's input schema.
func compileTools(s *world.Spec) error {
	for i, t := range s.ActionSpace.Tools {
		if len(t.InputSchema) == 0 {
			continue
		}
		var sc jsonschema.Schema
		if err := json.Unmarshal(t.InputSchema, &sc); err != nil {
			return reject(RungSchema, "action_space.tools[%d] (%s).input_schema: %v", i, t.Name, err)
		}
		if _, err := sc.Resolve(nil); err != nil {
			return reject(RungSchema, "action_space.tools[%d] (%s).input_schema does not compile: %v", i, t.Name, err)
		}
	}
	return nil
}

// checkTask is a task's own part of the schema and actions rungs: its
// fields (a judged check only when a success judge can decide the
// replays), and every reference action parsing in the world's domain (a
// tool call naming a tool the world has), the last one ending the
// episode.
func checkTask(s *world.Spec, t *library.TaskEntry, judged bool) error {
	if err := t.Validate(); err != nil {
		return reject(RungSchema, "%v", err)
	}
	if t.Check.Judge != nil && !judged {
		return reject(RungSchema, "check: a judged criterion needs a success judge to be proven in simulation (generate --success-judge-url)")
	}
	for i, a := range t.Reference {
		act, err := conversation.ParseAction(s.Domain, a)
		if err != nil {
			return reject(RungActions, "reference[%d]: %v", i, err)
		}
		if act.Tool != nil && len(s.ActionSpace.Tools) > 0 {
			if _, ok := s.ActionSpace.Tool(act.Tool.Name); !ok {
				return reject(RungActions, "reference[%d]: no tool %q in the action space", i, act.Tool.Name)
			}
		}
		if last := i == len(t.Reference)-1; act.End != last {
			if last {
				return reject(RungActions, "reference: the last action does not end the episode")
			}
			return reject(RungActions, "reference[%d] ends the episode before the last action", i)
		}
	}
	return nil
}

// worldName makes a generated name safe (letters, digits, '-') and unique
// by the candidate's tag (its request hash's first digits), so runs with
// other seeds or sources never reuse a name in one library.
func worldName(name, tag string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
		if b.Len() >= 40 {
			break
		}
	}
	base := strings.Trim(b.String(), "-")
	if base == "" {
		base = "world"
	}
	return base + "-" + tag
}

// noopAction is the action that ends an episode at once in a domain.
func noopAction(d domain.Domain) json.RawMessage {
	switch d {
	case domain.Terminal:
		return json.RawMessage(`[]`)
	case domain.Web:
		return json.RawMessage(`"send_msg_to_user(\"done\")"`)
	case domain.Android:
		return json.RawMessage(`{"action_type":"status","goal_status":"complete"}`)
	case domain.OS:
		return json.RawMessage(`"DONE"`)
	}
	return json.RawMessage(`"done"`)
}

var errNoTasks = errors.New("no task survived")
