package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/world"
)

// PromptVersion names the agent prompt this package builds (system
// message, first user message, observation messages); it changes when
// their wording does, so trainers can tell rollouts apart.
const PromptVersion = "rollout-agent-v1"

// Stop reasons of an episode.
const (
	// StopTerminated: the environment ended the episode (a final answer,
	// an end action, a real check).
	StopTerminated = "terminated"
	// StopTruncated: the simulator truncated the episode (its turn limit).
	StopTruncated = "truncated"
	// StopMaxTurns: the agent used its turns without ending the episode.
	StopMaxTurns = "max_turns"
)

// Row is one trajectory in the output.
type Row struct {
	GroupID          string             `json:"group_id"`
	SampleIdx        int                `json:"sample_idx"`
	TaskID           string             `json:"task_id"`
	Messages         []Message          `json:"messages"`
	Reward           float64            `json:"reward"`
	RewardComponents map[string]float64 `json:"reward_components"`
	Terminated       bool               `json:"terminated"`
	Truncated        bool               `json:"truncated"`
	StopReason       string             `json:"stop_reason"`
	NumTurns         int                `json:"num_turns"`
	EnvSessionID     string             `json:"env_session_id"`
	ForkParent       string             `json:"fork_parent"`
	LWMModel         string             `json:"lwm_model"`
	PromptVersion    string             `json:"prompt_version"`
	Turns            []Turn             `json:"turns"`
	// RealCheck is the replay of the episode in the task's real world,
	// when the task names one and the episode ended.
	RealCheck *RealCheck `json:"real_check,omitempty"`
}

// RealCheck is a simulated episode replayed in a real environment.
type RealCheck struct {
	World            string             `json:"world"`
	Reward           float64            `json:"reward"`
	RewardComponents map[string]float64 `json:"reward_components"`
	// Passed is the real outcome, judged as the simulated one is.
	Passed bool `json:"passed"`
	// Deceived: the episode passed in simulation and fails in reality.
	Deceived bool `json:"deceived"`
}

// toolDomain reports a domain whose actions are tool calls.
func toolDomain(d domain.Domain) bool {
	return d == domain.MCP || d == domain.Search || d == domain.SWE
}

// agentToolsJSON is [agentTools] encoded once for all the policy requests
// of a group; nil when the domain has no tools.
func agentToolsJSON(s *world.Spec) ([]byte, error) {
	tools := agentTools(s)
	if len(tools) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(tools)
	if err != nil {
		return nil, fmt.Errorf("world %s: tools: %w", s.Name, err)
	}
	return b, nil
}

// agentTools turns a world's action space into OpenAI tool definitions.
func agentTools(s *world.Spec) []tool {
	if !toolDomain(s.Domain) {
		return nil
	}
	out := make([]tool, 0, len(s.ActionSpace.Tools))
	for _, t := range s.ActionSpace.Tools {
		params := t.InputSchema
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		out = append(out, tool{Type: "function", Function: toolFunction{Name: t.Name, Description: t.Description, Parameters: params}})
	}
	return out
}

// firstMessages are the system and first user message of every episode of
// a task: the same bytes for every member of a group.
func firstMessages(s *world.Spec, t Task, initial string) []Message {
	var sys strings.Builder
	sys.WriteString("You are an agent acting in a computer environment.\n\n")
	sys.WriteString(strings.TrimSpace(s.TaskDescription))
	if toolDomain(s.Domain) {
		sys.WriteString("\n\nAct by calling the tools. When the task is done, answer in plain text without a tool call; that ends the episode.")
	} else {
		fmt.Fprintf(&sys, "\n\nAnswer each observation with exactly one action in the %s action format", s.Domain)
		if d := strings.TrimSpace(s.ActionSpace.Description); d != "" {
			sys.WriteString(": ")
			sys.WriteString(d)
		} else {
			sys.WriteString(".")
		}
	}
	var user strings.Builder
	if t.Instruction != "" {
		user.WriteString("Task: ")
		user.WriteString(t.Instruction)
		user.WriteString("\n\n")
	}
	user.WriteString("Observation:\n")
	user.WriteString(initial)
	return []Message{{Role: "system", Content: sys.String()}, {Role: "user", Content: user.String()}}
}

// episode runs one agent episode on a session already forked from the
// group's root.
type episode struct {
	sim    Simulator
	policy *Policy
	spec   *world.Spec
	// tools is the encoded tool definitions (nil: none), shared by the
	// group.
	tools    []byte
	maxTurns int
	// row is the output row but for its messages, which hist holds.
	row  Row
	hist transcript
	turn int // simulator steps taken
	// actions are the steps' actions in order, for a real replay.
	actions []json.RawMessage
}

func (e *episode) addReward(res *sim.StepResult) {
	e.row.Reward += res.Reward
	for k, v := range res.Info.RewardComponents {
		e.row.RewardComponents[k] += v
	}
	if e.row.LWMModel == "" && res.Info.Model != "" {
		e.row.LWMModel = res.Info.Model
	}
}

// step sends one action; a malformed action is answered by the parser's
// error without a simulator step, so the agent can correct itself. The
// simulator parses every action itself and refuses a malformed one before
// taking a turn, so the loop parses an action only when a step fails, to
// tell a malformed action (an observation for the agent) from a failure
// of the simulator (an error), the same way in-process and over HTTP.
func (e *episode) step(ctx context.Context, raw json.RawMessage) (obs string, over bool, err error) {
	e.turn++
	res, err := e.sim.Step(ctx, e.row.EnvSessionID, sim.StepRequest{Action: raw, Turn: e.turn})
	if err != nil {
		if _, perr := conversation.ParseAction(e.spec.Domain, raw); perr != nil {
			e.turn--
			return "invalid action: " + perr.Error(), false, nil
		}
		return "", false, err
	}
	e.actions = append(e.actions, raw)
	e.addReward(res)
	e.row.Terminated, e.row.Truncated = res.Terminated, res.Truncated
	switch {
	case res.Terminated:
		e.row.StopReason = StopTerminated
	case res.Truncated:
		e.row.StopReason = StopTruncated
	}
	return res.Observation, res.Terminated || res.Truncated, nil
}

// run drives the episode until it ends or has made limit policy turns in
// all (its max turns when limit is 0 or beyond them); only running out of
// the max turns ends it with [StopMaxTurns]. An episode stopped earlier has
// no stop reason yet and may be forked and continued.
func (e *episode) run(ctx context.Context, limit int) error {
	if limit <= 0 || limit > e.maxTurns {
		limit = e.maxTurns
	}
	for e.row.NumTurns < limit {
		msgs, err := e.hist.json()
		if err != nil {
			return err
		}
		rep, err := e.policy.complete(ctx, e.row.EnvSessionID, msgs, e.tools)
		if err != nil {
			return err
		}
		e.row.NumTurns++
		e.row.Turns = append(e.row.Turns, rep.Turn)
		msg := rep.Message
		if !toolDomain(e.spec.Domain) {
			msg.ToolCalls = nil
		}
		e.hist.add(msg)
		if len(msg.ToolCalls) > 0 {
			for _, tc := range msg.ToolCalls {
				args := strings.TrimSpace(tc.Function.Arguments)
				if args == "" {
					args = "{}"
				}
				var obs string
				over := false
				if !json.Valid([]byte(args)) {
					obs = "invalid action: the arguments of " + tc.Function.Name + " are not JSON"
				} else {
					raw, err := json.Marshal(toolAction{Arguments: json.RawMessage(args), Name: tc.Function.Name})
					if err != nil {
						return err
					}
					if obs, over, err = e.step(ctx, raw); err != nil {
						return err
					}
				}
				e.hist.add(Message{Role: "tool", ToolCallID: tc.ID, Content: obs})
				if over {
					return nil
				}
			}
			continue
		}
		// A text answer: the domain's action text, or in a tool domain the
		// final answer (which ends the episode by that domain's rule).
		text := strings.TrimSpace(conversation.StripThinking(msg.Content))
		if text == "" {
			text = msg.Content
		}
		raw, _ := json.Marshal(text)
		obs, over, err := e.step(ctx, raw)
		if err != nil {
			return err
		}
		if over {
			return nil
		}
		e.hist.add(Message{Role: "user", Content: "Observation:\n" + obs})
	}
	if e.row.NumTurns >= e.maxTurns {
		e.row.StopReason = StopMaxTurns
		e.row.Truncated = true
	}
	return nil
}

// toolAction is a tool call as the simulator's action parser reads it;
// the fields are in the order json.Marshal writes a map's keys.
type toolAction struct {
	Arguments json.RawMessage `json:"arguments"`
	Name      string          `json:"name"`
}

// result is the episode's output row.
func (e *episode) result() Row {
	r := e.row
	r.Messages = e.hist.msgs
	return r
}

// ended reports an episode that has its stop reason.
func (e *episode) ended() bool { return e.row.StopReason != "" }

// branch continues a paused episode in a fork of its session: the same
// messages, turns and rewards so far, owned by the copy.
func (e *episode) branch(idx int, fork *sim.Reply) *episode {
	c := *e
	c.row.SampleIdx = idx
	c.row.EnvSessionID, c.row.ForkParent = fork.SessionID, e.row.EnvSessionID
	c.hist = e.hist.clone()
	c.row.Turns = slices.Clone(e.row.Turns)
	c.row.RewardComponents = maps.Clone(e.row.RewardComponents)
	c.actions = slices.Clone(e.actions)
	return &c
}

// checkReal replays an ended episode's actions in a fresh session of the
// task's real world and records the real outcome beside the simulated one.
func (e *episode) checkReal(ctx context.Context, world string) error {
	if world == "" || e.row.StopReason != StopTerminated {
		return nil
	}
	rep, err := e.sim.Create(ctx, sim.CreateRequest{WorldID: world, Labels: map[string]string{"rollout_real_check": e.row.EnvSessionID}})
	if err != nil {
		return fmt.Errorf("real check: %w", err)
	}
	defer e.sim.Delete(context.WithoutCancel(ctx), rep.SessionID)
	rc := &RealCheck{World: world, RewardComponents: map[string]float64{}}
	for i, a := range e.actions {
		res, err := e.sim.Step(ctx, rep.SessionID, sim.StepRequest{Action: a, Turn: i + 1})
		if err != nil {
			return fmt.Errorf("real check: turn %d: %w", i+1, err)
		}
		rc.Reward += res.Reward
		for k, v := range res.Info.RewardComponents {
			rc.RewardComponents[k] += v
		}
		if res.Terminated || res.Truncated {
			break
		}
	}
	rc.Passed = passed(Row{Reward: rc.Reward, RewardComponents: rc.RewardComponents})
	rc.Deceived = passed(e.row) && !rc.Passed
	e.row.RealCheck = rc
	return nil
}

// newEpisode starts an episode on a fork with the group's first messages
// (copied, not shared).
func newEpisode(s Simulator, o *Options, t Task, spec *world.Spec, tools []byte, idx int, first []Message, fork *sim.Reply) *episode {
	maxTurns := o.MaxTurns
	if t.MaxTurns > 0 {
		maxTurns = t.MaxTurns
	}
	return &episode{sim: s, policy: o.Policy, spec: spec, tools: tools, maxTurns: maxTurns,
		row:  newRow(t.ID, idx, t, fork, fork.Info.Parent, o.LWMModel),
		hist: transcript{msgs: slices.Clone(first)}}
}

// newRow starts an episode's row, without its messages.
func newRow(groupID string, idx int, t Task, fork *sim.Reply, parent, lwm string) Row {
	return Row{
		GroupID: groupID, SampleIdx: idx, TaskID: t.ID,
		RewardComponents: map[string]float64{},
		EnvSessionID:     fork.SessionID, ForkParent: parent,
		LWMModel: lwm, PromptVersion: PromptVersion,
		Turns: []Turn{},
	}
}
