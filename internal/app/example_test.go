package app_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentworld/agentworld/internal/app"
	"github.com/agentworld/agentworld/internal/sim"
)

// The zero Config is the embedded default: the bundled worlds answered by
// replaying the bundled recordings. Whoever calls New closes the App.
func ExampleNew() {
	ctx := context.Background()
	a, err := app.New(ctx, app.Config{})
	if err != nil {
		panic(err)
	}
	defer a.Close(ctx)
	rep, err := a.Manager.Create(ctx, sim.CreateRequest{WorldID: "python-terminal"})
	if err != nil {
		panic(err)
	}
	fmt.Println(strings.HasPrefix(a.Describe, "embedded default"), rep.Info.Backend)
	// Output: true replay
}
