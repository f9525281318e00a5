package server

import (
	"context"
	"log/slog"
	"sort"

	"github.com/agentworld/agentworld/internal/fiction"
	"github.com/agentworld/agentworld/internal/mcpworld"
	"github.com/agentworld/agentworld/internal/perturb"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/world"
	"github.com/agentworld/agentworld/internal/worldhooks"
)

// worldControlHooks are the step hooks every simulator runs: fictional
// worlds' ledger first (world-state text), then perturbation rules (control
// text, direct faults, latency held to lim).
func worldControlHooks(l *fiction.Ledger, lim perturb.Limits, log *slog.Logger) []sim.StepHook {
	p := worldhooks.NewPerturbations(log)
	p.Limits = lim
	return []sim.StepHook{worldhooks.NewLedger(l, log), p}
}

// mountMCP serves every world that has an MCP form at /mcp/{world}, behind
// the same auth as the other routes, and closes MCP sessions when the
// server shuts down (so their open streams do not hold the drain).
func (a *App) mountMCP(worlds map[string]*world.Spec, log *slog.Logger) error {
	names := make([]string, 0, len(worlds))
	for n := range worlds {
		names = append(names, n)
	}
	sort.Strings(names)
	var servable []*world.Spec
	for _, n := range names {
		if mcpworld.Servable(worlds[n]) == nil {
			servable = append(servable, worlds[n])
		}
	}
	f, err := mcpworld.NewFacade(mcpworld.Sessions{M: a.Manager}, servable, &mcpworld.Options{HostChecked: true, Logger: log})
	if err != nil {
		return err
	}
	a.MCP = f
	a.Server.Handle("/mcp/{world}", f.Handler())
	a.Server.OnShutdown(func(ctx context.Context) {
		if err := f.Close(ctx); err != nil {
			log.Warn("close MCP sessions", "err", err)
		}
	})
	return nil
}

// OnShutdown registers f to run when Serve starts a graceful shutdown,
// before in-flight requests are drained. Call it before Serve.
func (s *Server) OnShutdown(f func(context.Context)) {
	s.onShutdown = append(s.onShutdown, f)
}
