package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// forbidden are import paths (a path and everything under it) that must not
// reach the binary, each with the reason. A dependency earns its bytes: a
// new entry's reason says what it cost or why it must stay out;
// perf/binsize.sh shows where the bytes go.
var forbidden = []struct{ path, why string }{
	{"github.com/openai/openai-go", "37 MB of the 71 MB stripped binary for a retry loop; internal/worldmodel/transport.go is the client"},
	{"github.com/tidwall/gjson", "came with openai-go; encoding/json decodes the answers"},
	{"gonum.org/v1/plot", "4.4 MB of bundled fonts (and a PDF and LaTeX stack) for two simple charts; internal/chart draws them"},
	{"codeberg.org/go-fonts", "bundled fonts: SVG text uses the viewer's fonts, PNG text x/image's bitmap face"},
	{"github.com/golang/freetype", "font rasterizing came with gonum/plot"},
	{"github.com/chromedp", "the browser driver of the web UI's tests (chromedp, cdproto): test-only"},
	{"github.com/nats-io/nats-server", "the embedded NATS server adds 9.7 MB (49.2 MB stripped, over the 45 MB goal): linked only with -tags natsserver (embed_nats.go); serve --cluster needs only nats.go"},
	{"github.com/agentworld/agentworld/internal/testkit", "the shared test kit (fakellm, the fake model server, included): only tests may import it"},
}

// TestDependencies is a dependency test in the spirit of tailscale's
// tstest/deptest: it lists what ./cmd/agentworld links, for Linux and for
// Windows (the CI cross-build), and fails on a forbidden package. (go test
// puts its own go command first on PATH.)
func TestDependencies(t *testing.T) {
	for _, goos := range []string{"linux", "windows"} {
		cmd := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".")
		cmd.Env = append(cmd.Environ(), "GOOS="+goos, "GOARCH=amd64", "CGO_ENABLED=0")
		out, err := cmd.Output()
		if err != nil {
			var stderr string
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("go list -deps (GOOS=%s): %v\n%s", goos, err, stderr)
		}
		deps := strings.Fields(string(out))
		if !slices.Contains(deps, "github.com/agentworld/agentworld/internal/cli") {
			t.Fatalf("go list -deps (GOOS=%s) does not list internal/cli: %q", goos, out)
		}
		for _, dep := range deps {
			for _, f := range forbidden {
				if dep == f.path || strings.HasPrefix(dep, f.path+"/") {
					t.Errorf("GOOS=%s: the binary links %s, which is forbidden: %s", goos, dep, f.why)
				}
			}
		}
	}
}
