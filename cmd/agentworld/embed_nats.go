//go:build natsserver

package main

// The embedded NATS server (serve --nats-listen, --nats-store) costs about
// 10 MB, over the binary's size goal, so it is linked only into builds
// tagged natsserver: go build -tags natsserver ./cmd/agentworld.
import _ "github.com/agentworld/agentworld/internal/natsserver"
