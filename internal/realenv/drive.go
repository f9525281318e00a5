package realenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/domain"
)

// ReadActions reads one action per line (blank lines and lines starting
// with "#" are skipped). For the Terminal domain a line that is not a JSON
// array is shorthand for typing it as a command: [{"keystrokes": line+"\n",
// "duration": 1}]. Errors name the line.
func ReadActions(r io.Reader, name string, d domain.Domain) ([]string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	var out []string
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimRight(sc.Text(), "\r")
		a, ok, err := lineAction(line, d)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		if ok {
			out = append(out, a)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// lineAction turns one input line into an action; ok is false for lines
// that carry none.
func lineAction(line string, d domain.Domain) (string, bool, error) {
	trimmed := strings.TrimSpace(line)
	if trimmed == "" || strings.HasPrefix(trimmed, "#") {
		return "", false, nil
	}
	switch d {
	case domain.Terminal:
		if strings.HasPrefix(trimmed, "[") {
			if _, err := conversation.ParseKeystrokes(trimmed, 1); err != nil {
				return "", false, err
			}
			return trimmed, true, nil
		}
		return conversation.RenderKeystrokes([]conversation.Keystroke{{Keystrokes: line + "\n", Duration: 1}}), true, nil
	case domain.MCP:
		if _, err := conversation.ParseToolCall(trimmed); err != nil {
			return "", false, err
		}
	}
	return trimmed, true, nil
}

// Drive starts rec, performs each action in turn and writes every
// observation to w in the published record format, stopping when the episode ends or the environment
// breaks. It returns the number of steps taken.
func Drive(ctx context.Context, rec *Recorded, actions []string, w io.Writer) (int, error) {
	first, err := rec.Start(ctx)
	if err != nil {
		return 0, err
	}
	fmt.Fprintf(w, "%s\n\n", conversation.ObservationResponse(first))
	for i, a := range actions {
		if err := ctx.Err(); err != nil {
			return i, err
		}
		res, err := rec.Step(ctx, a)
		if err != nil {
			if errors.Is(err, conversation.ErrBadAction) {
				return i, fmt.Errorf("action %d: %w", i+1, err)
			}
			return i, err
		}
		fmt.Fprintf(w, "%s\n%s\n\n", conversation.ActionPrompt(i+1, a), conversation.ObservationResponse(res.Observation))
		if res.Broken {
			return i + 1, fmt.Errorf("%w: %s", ErrBroken, res.Error)
		}
		if res.Terminated {
			return i + 1, nil
		}
	}
	return len(actions), nil
}

// TrajectoryActions returns the actions of the first trajectory in a file
// (an agent's episode against the simulator, to replay for real).
func TrajectoryActions(path string) ([]string, error) {
	ts, err := ReadTrajectories(path)
	if err != nil {
		return nil, err
	}
	if len(ts) == 0 {
		return nil, fmt.Errorf("%s: no trajectory", path)
	}
	out := make([]string, 0, len(ts[0].Turns))
	for _, t := range ts[0].Turns {
		out = append(out, t.Action)
	}
	return out, nil
}
