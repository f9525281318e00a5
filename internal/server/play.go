package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/sim"
)

// Player is what a person plays against: an in-process Manager or a
// remote server (Client).
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

// Client is a Player over a running server's native API.
type Client struct {
	BaseURL string
	APIKey  string
	HTTP    *http.Client
}

func (c *Client) post(ctx context.Context, path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.BaseURL, "/")+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var e errorBody
		if json.Unmarshal(raw, &e) == nil && e.Error.Message != "" {
			return fmt.Errorf("%s: %s", resp.Status, e.Error.Message)
		}
		return fmt.Errorf("%s: %s", resp.Status, raw)
	}
	return json.Unmarshal(raw, out)
}

// Create implements Player.
func (c *Client) Create(ctx context.Context, req sim.CreateRequest) (*sim.Reply, error) {
	var rep sim.Reply
	if err := c.post(ctx, "/v1/sessions", CreateSessionRequest{WorldID: req.WorldID, Seed: req.Seed, Model: req.Model, Backend: req.Backend}, &rep); err != nil {
		return nil, err
	}
	return &rep, nil
}

// Step implements Player.
func (c *Client) Step(ctx context.Context, id string, req sim.StepRequest) (*sim.StepResult, error) {
	var res sim.StepResult
	if err := c.post(ctx, "/v1/sessions/"+id+"/step", StepSessionRequest{Action: req.Action, Turn: req.Turn}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}
