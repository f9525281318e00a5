// Package play is the interactive loop of `agentworld play`: it opens a
// session of a world, prints each observation and turns each typed line
// into the domain's action (sim.HumanAction). It plays against anything
// that opens and steps sessions ([Player]): an in-process [sim.Manager] or
// a running server's HTTP API.
package play

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/sim"
)

// Player is what a person plays against: an in-process Manager ([Manager])
// or a remote server (api.Client).
type Player interface {
	Create(ctx context.Context, req sim.CreateRequest) (*sim.Reply, error)
	Step(ctx context.Context, id string, req sim.StepRequest) (*sim.StepResult, error)
}

// Play opens a session of world and loops: print the observation, read a
// line, turn it into an action (conversation.HumanAction), step. ":q" or end of
// input stops; ":json ACTION" sends ACTION verbatim.
func Play(ctx context.Context, p Player, worldID string, in io.Reader, out io.Writer) error {
	rep, err := p.Create(ctx, sim.CreateRequest{WorldID: worldID})
	if err != nil {
		return fmt.Errorf("open world %s: %w", worldID, err)
	}
	d := domain.Domain(rep.Info.Domain)
	fmt.Fprintf(out, "session %s: world %s (%s), answered by %s\n", rep.SessionID, rep.Info.World, d, rep.Info.Backend)
	fmt.Fprintf(out, "%s\n", hint(d))
	fmt.Fprintf(out, "----\n%s\n----\n", rep.Observation)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for {
		fmt.Fprint(out, "action> ")
		if !sc.Scan() {
			fmt.Fprintln(out)
			return sc.Err()
		}
		line := sc.Text()
		if strings.TrimSpace(line) == ":q" {
			return nil
		}
		act := conversation.HumanAction(d, line)
		if raw, ok := strings.CutPrefix(line, ":json "); ok {
			act = json.RawMessage(raw)
		}
		res, err := p.Step(ctx, rep.SessionID, sim.StepRequest{Action: act})
		if err != nil {
			fmt.Fprintf(out, "error: %v\n", err)
			continue
		}
		tag := res.Info.Backend
		if res.Info.Approximate {
			tag += ", approximate"
		}
		if res.Info.Error != "" {
			tag += ", " + res.Info.Error
		}
		fmt.Fprintf(out, "---- turn %d (%s)\n%s\n----\n", res.Info.Turn, tag, res.Observation)
		if res.Terminated || res.Truncated {
			fmt.Fprintf(out, "episode over: %s\n", res.Info.EndReason)
			return nil
		}
	}
}

func hint(d domain.Domain) string {
	switch d {
	case domain.Terminal:
		return "Type shell commands (Enter is added); ^C sends Ctrl-C; an empty line ends the task; :q quits."
	case domain.MCP, domain.Search, domain.SWE:
		return `Call a tool as: name {"arg": "value"}; plain text is your final answer; :q quits.`
	case domain.Web:
		return `Type browser commands such as click('108') or fill('108', 'text'); :q quits.`
	case domain.Android:
		return `Type an action such as {"action_type": "click", "index": 3}; :q quits.`
	}
	return "Type an action; :q quits."
}

// Manager plays against an in-process [sim.Manager].
type Manager struct{ M *sim.Manager }

// Create implements Player.
func (p Manager) Create(ctx context.Context, r sim.CreateRequest) (*sim.Reply, error) {
	return p.M.Create(ctx, r)
}

// Step implements Player.
func (p Manager) Step(ctx context.Context, id string, r sim.StepRequest) (*sim.StepResult, error) {
	return p.M.Step(ctx, id, r)
}
