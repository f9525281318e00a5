package main

import (
	"bufio"
	"bytes"
	"os/exec"
	"path/filepath"
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
	{"github.com/blevesearch/bleve", "6.6 MB (seven index segment formats, geometry, bolt) for one in-memory BM25 index; internal/searchindex is it"},
	{"github.com/json-iterator/go", "came with bleve; its reflect2 embeds reflect.Type, which stops the linker pruning unused methods (TestLinkerPrunesMethods)"},
	{"github.com/modern-go/reflect2", "embeds reflect.Type, which stops the linker pruning unused methods (TestLinkerPrunesMethods)"},
	{"github.com/agentworld/agentworld/internal/testkit", "the shared test kit (fakellm, the fake model server, included): only tests may import it"},
}

// required are packages the binary must link: the embedded NATS server.
var required = []string{
	"github.com/agentworld/agentworld/internal/natsserver",
	"github.com/nats-io/nats-server/v2/server",
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
		// One process is a complete single-node cluster store, and three
		// form a cluster with nothing else installed (serve --nats-listen).
		for _, want := range required {
			if !slices.Contains(deps, want) {
				t.Errorf("GOOS=%s: the binary does not link %s", goos, want)
			}
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

// TestLinkerPrunesMethods links the binary with -dumpdep and fails if the
// linker marks a reachable function <ReflectMethod>: a call of reflect's
// Method or MethodByName with a name known only at run time. One such call
// anywhere makes the linker keep every exported method of every type that
// reaches an interface, used or not: 4.7 MB of this binary, through
// text/template's field lookup (the templates here use DataDog's copy
// without method calls) and reflect2's embedded reflect.Type. It links
// with -race when the test runs with it, so the packages come from the
// cache that go test -race filled (the race runtime adds no such call).
func TestLinkerPrunesMethods(t *testing.T) {
	if testing.Short() {
		t.Skip("links the whole binary")
	}
	args := []string{"build", "-o", filepath.Join(t.TempDir(), "agentworld"), "-ldflags=-dumpdep"}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, ".")...)
	cmd.Env = append(cmd.Environ(), "GOOS=linux", "GOARCH=amd64")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, tail(stderr.String(), 4000))
	}
	out := stderr.String()
	var culprits []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	marked := 0
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, " -> ") {
			marked++
		}
		// "caller -> callee <ReflectMethod>": the callee is the culprit.
		if i := strings.Index(line, " <ReflectMethod>"); i >= 0 {
			sym := line[:i]
			if j := strings.LastIndex(sym, " -> "); j >= 0 {
				sym = sym[j+len(" -> "):]
			}
			if !seen[sym] {
				seen[sym] = true
				culprits = append(culprits, line)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if marked == 0 {
		t.Fatalf("go %s printed no dependency edges; did -dumpdep change?\n%s", strings.Join(args, " "), tail(out, 2000))
	}
	if len(culprits) > 0 {
		if len(culprits) > 10 {
			culprits = culprits[:10]
		}
		t.Errorf("a reachable function calls reflect's Method or MethodByName with a run-time name, so the linker keeps every exported method (+4.7 MB); find the path to it in go build -ldflags=-dumpdep's output:\n%s", strings.Join(culprits, "\n"))
	}
}
