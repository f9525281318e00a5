// Command agentworld is the single binary of the project: the simulator
// server, the AgentWorldBench harness and the training-data pipeline.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentworld/agentworld/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cli.New().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentworld:", err)
		os.Exit(1)
	}
}
