package convert

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/datapipe"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// chat wire types: the parts of an OpenAI chat request log we read.
type chatLog struct {
	ID       json.RawMessage `json:"id"`
	Messages []chatMsg       `json:"messages"`
	Tools    json.RawMessage `json:"tools"`
}

type chatMsg struct {
	Role         string          `json:"role"`
	Content      json.RawMessage `json:"content"`
	Name         string          `json:"name"`
	ToolCalls    []chatToolCall  `json:"tool_calls"`
	ToolCallID   string          `json:"tool_call_id"`
	FunctionCall *chatFunction   `json:"function_call"`
}

type chatToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// chatText flattens message content: a string, or text parts of an array.
func chatText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("content is neither a string nor a list of parts: %w", err)
	}
	var texts []string
	for _, p := range parts {
		if p.Text != "" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n"), nil
}

// toolAction renders a call as the action text the simulator records for
// it: conversation.RenderToolCall's canonical form, checked with the
// parser the simulator applies to an agent's action (conversation.
// ParseToolCall), so a converted turn trains and prompts on the very bytes
// `agentworld serve` puts in its prompt for the same call. Arguments that
// are not a JSON object are an error: the simulator refuses such a call,
// so no prompt it sends could show it.
func toolAction(f chatFunction) (string, error) {
	text, err := conversation.RenderToolCall(f.Name, json.RawMessage(f.Arguments))
	if err == nil {
		_, err = conversation.ParseToolCall(text)
	}
	if err != nil {
		return "", fmt.Errorf("%w: the simulator accepts a tool call's arguments only as a JSON object: %v", datapipe.ErrInvalid, err)
	}
	return text, nil
}

// ChatLogToTrajectory converts one OpenAI chat-format tool-calling log:
// system (and developer) messages → task_description, the first user
// message appended to it as the request, the tools list → action_space,
// each assistant tool call → an action, the tool message answering it →
// its observation. Later user messages go into the next turn's meta.
func ChatLogToTrajectory(data []byte, dom, file string, line int) (*trajectory.Trajectory, []*datapipe.RecordError) {
	fail := func(field string, err error) (*trajectory.Trajectory, []*datapipe.RecordError) {
		return nil, []*datapipe.RecordError{{File: file, Line: line, Field: field, Err: err}}
	}
	var log chatLog
	if err := json.Unmarshal(data, &log); err != nil {
		return fail("", fmt.Errorf("%w: %v", datapipe.ErrBadJSON, err))
	}
	if len(log.Messages) == 0 {
		return fail("messages", fmt.Errorf("%w: no messages", datapipe.ErrInvalid))
	}
	t := &trajectory.Trajectory{Domain: dom, Source: "openai-chat", Components: &trajectory.Components{}}
	var id string
	if json.Unmarshal(log.ID, &id) != nil || id == "" {
		id = fmt.Sprintf("%s:%d", filepath.Base(file), line)
	}
	t.ID = id
	if len(bytes.TrimSpace(log.Tools)) > 0 && string(bytes.TrimSpace(log.Tools)) != "null" {
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, log.Tools, "", "  "); err != nil {
			return fail("tools", fmt.Errorf("%w: %v", datapipe.ErrBadJSON, err))
		}
		t.Components.ActionSpace = pretty.String()
	}
	var sys []string
	sawUser := false
	pendingUser := ""
	callTurn := map[string]int{}
	var answered []bool
	for i, m := range log.Messages {
		field := fmt.Sprintf("messages[%d]", i)
		text, err := chatText(m.Content)
		if err != nil {
			return fail(field+".content", fmt.Errorf("%w: %v", datapipe.ErrInvalid, err))
		}
		switch m.Role {
		case "system", "developer":
			sys = append(sys, text)
		case "user":
			if !sawUser {
				sawUser = true
				sys = append(sys, "User request:\n"+text)
			} else {
				pendingUser = text
			}
		case "assistant":
			calls := m.ToolCalls
			if m.FunctionCall != nil {
				calls = append(calls, chatToolCall{ID: "function:" + m.FunctionCall.Name, Function: *m.FunctionCall})
			}
			for j, c := range calls {
				if c.Function.Name == "" {
					return fail(fmt.Sprintf("%s.tool_calls[%d].function.name", field, j), fmt.Errorf("%w: empty", datapipe.ErrInvalid))
				}
				action, err := toolAction(c.Function)
				if err != nil {
					return fail(fmt.Sprintf("%s.tool_calls[%d].function.arguments", field, j), err)
				}
				tu := trajectory.Turn{Action: action}
				if pendingUser != "" {
					raw, _ := trajectory.Marshal(pendingUser)
					tu.Meta = map[string]json.RawMessage{"user_message": raw}
					pendingUser = ""
				}
				callTurn[c.ID] = len(t.Turns)
				t.Turns = append(t.Turns, tu)
				answered = append(answered, false)
			}
		case "tool", "function":
			key := m.ToolCallID
			if m.Role == "function" {
				key = "function:" + m.Name
			}
			k, ok := callTurn[key]
			if !ok {
				return fail(field+".tool_call_id", fmt.Errorf("%w: %q answers no earlier tool call", datapipe.ErrInvalid, key))
			}
			if answered[k] {
				return fail(field+".tool_call_id", fmt.Errorf("%w: %q answered twice", datapipe.ErrInvalid, key))
			}
			answered[k] = true
			t.Turns[k].Observation = text
		default:
			return fail(field+".role", fmt.Errorf("%w: unknown role %q", datapipe.ErrInvalid, m.Role))
		}
	}
	t.Components.TaskDescription = strings.Join(sys, "\n\n")
	if len(t.Turns) == 0 {
		return fail("messages", fmt.Errorf("%w: no tool calls, so no environment turns", datapipe.ErrInvalid))
	}
	var errs []*datapipe.RecordError
	for _, fe := range t.Check() {
		field := fe.Path
		errs = append(errs, &datapipe.RecordError{File: file, Line: line, Field: field, Err: fe.Err})
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return t, nil
}
