package main

// The embedded NATS server (serve --nats-listen, --nats-store): one
// agentworld process is a complete single-node cluster store, and three
// form a cluster with nothing else installed. It costs the binary about
// 9.3 MB (perf/binsize.sh); it registers itself with jetstore when
// imported, so packages that only talk to NATS do not link it.
import _ "github.com/agentworld/agentworld/internal/natsserver"
