package rollout

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/agentworld/agentworld/internal/api"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/world"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// Simulator is what the agent loop needs of the simulator: a world's spec
// (its domain, tools and reward rules), a reset, forks of a session, steps
// and closing a session. [Embedded] serves it in-process; api.Client over
// a running server's native session API.
type Simulator interface {
	World(ctx context.Context, name string) (*world.Spec, error)
	Create(ctx context.Context, req sim.CreateRequest) (*sim.Reply, error)
	Fork(ctx context.Context, id string, req sim.ForkRequest) (*sim.Reply, error)
	Step(ctx context.Context, id string, req sim.StepRequest) (*sim.StepResult, error)
	Delete(ctx context.Context, id string) error
}

// Embedded is a [Simulator] over an in-process manager.
type Embedded struct{ M *sim.Manager }

// World implements [Simulator].
func (e Embedded) World(_ context.Context, name string) (*world.Spec, error) {
	s, ok := e.M.World(name)
	if !ok {
		return nil, fmt.Errorf("%w: %q", sim.ErrUnknownWorld, name)
	}
	return s, nil
}

// Create implements [Simulator].
func (e Embedded) Create(ctx context.Context, req sim.CreateRequest) (*sim.Reply, error) {
	return e.M.Create(ctx, req)
}

// Fork implements [Simulator].
func (e Embedded) Fork(ctx context.Context, id string, req sim.ForkRequest) (*sim.Reply, error) {
	return e.M.Fork(ctx, id, req)
}

// Step implements [Simulator].
func (e Embedded) Step(ctx context.Context, id string, req sim.StepRequest) (*sim.StepResult, error) {
	return e.M.Step(ctx, id, req)
}

// Delete implements [Simulator].
func (e Embedded) Delete(ctx context.Context, id string) error { return e.M.Delete(ctx, id) }

// The native API's Go client is a Simulator.
var _ Simulator = (*api.Client)(nil)

// DefaultStepTimeout bounds one request to a server's session API (opening,
// forking, stepping or closing a session) when [Remote] is given 0. A step
// waits on the server's world model, one attempt of which a server bounds
// at [worldmodel.DefaultTimeout] unless told otherwise; the extra minute
// covers the rest of the step and the transfer.
const DefaultStepTimeout = worldmodel.DefaultTimeout + time.Minute

// Remote is a running server's session API as a [Simulator] for a run of
// at most maxInFlight episodes at once (0: the [Options] default). A
// client without its own HTTP client gets one that keeps a connection
// per episode in flight (the default keeps two per host, so the others
// would dial the server again for nearly every step) and gives up on a
// request after stepTimeout (0: [DefaultStepTimeout]; negative: never),
// so a server that stops answering fails the request with an error rather
// than holding its episode, and its group, for ever. Dialing and
// the TLS handshake keep the default transport's bounds. c itself is not
// changed.
func Remote(c *api.Client, maxInFlight int, stepTimeout time.Duration) *api.Client {
	if c.HTTP != nil {
		return c
	}
	if maxInFlight <= 0 {
		maxInFlight = defaultMaxInFlight
	}
	switch {
	case stepTimeout == 0:
		stepTimeout = DefaultStepTimeout
	case stepTimeout < 0:
		stepTimeout = 0 // http.Client's "none"
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	// A tree group holds its trunk's connection while its members run.
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 2*maxInFlight, 2*maxInFlight
	cl := *c
	cl.HTTP = &http.Client{Transport: t, Timeout: stepTimeout}
	return &cl
}
