package play

import (
	"net/http"
	"time"

	"github.com/agentworld/agentworld/internal/api"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// DefaultStepTimeout bounds one request to a server when
// [RemoteOptions.StepTimeout] is 0. A step waits on the server's world
// model, one attempt of which a server bounds at [worldmodel.DefaultTimeout]
// unless told otherwise (thinking models spend minutes on a long history);
// the extra minute covers the rest of the step and the transfer.
const DefaultStepTimeout = worldmodel.DefaultTimeout + time.Minute

// RemoteOptions tune [Remote]; nil means the defaults.
type RemoteOptions struct {
	// StepTimeout bounds one request (opening the session or one step),
	// reading the answer included; 0 means DefaultStepTimeout, negative
	// means none. A step that runs out is reported and the game goes on;
	// the server may still have taken it, which the next turn number shows.
	StepTimeout time.Duration
}

// Remote is c for [Play]: a client without its own HTTP client gets one
// that, unlike net/http's default client, gives up on a server that stops
// answering. Dialing and the TLS handshake keep the default transport's
// bounds (30 and 10 seconds) and every request gets the step timeout. Play
// sends one request at a time, so the one kept-alive connection it needs
// stays within the transport's per-host idle limit. c itself is not
// changed.
func Remote(c *api.Client, o *RemoteOptions) *api.Client {
	if c.HTTP != nil {
		return c
	}
	var opts RemoteOptions
	if o != nil {
		opts = *o
	}
	switch {
	case opts.StepTimeout == 0:
		opts.StepTimeout = DefaultStepTimeout
	case opts.StepTimeout < 0:
		opts.StepTimeout = 0 // http.Client's "none"
	}
	cl := *c
	cl.HTTP = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(), Timeout: opts.StepTimeout}
	return &cl
}
