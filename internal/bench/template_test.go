package bench_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/answercache"
	"github.com/agentworld/agentworld/internal/bench"
	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
)

// modelSystems lists the system messages of the requests the model under
// test ("wm") received.
func modelSystems(srv *fakellm.Server) []string {
	var out []string
	for _, r := range srv.Requests() {
		if r.Model == "wm" && len(r.Messages) > 0 && r.Messages[0].Role == "system" {
			out = append(out, r.Messages[0].Content)
		}
	}
	return out
}

// TestTemplateRerendersSystemPrompts: with Options.Template every request
// carries the row's system prompt as the template renders it, run.json
// records the version, the version is part of the cache key, a rerun into
// the same directory under another version is refused, and a row the
// template cannot render stops the run naming its file and line.
func TestTemplateRerendersSystemPrompts(t *testing.T) {
	srv := fakellm.New(fakeBackend(0))
	defer srv.Close()
	data := t.TempDir()
	writeData(t, data, 14)
	tmpl := func(name string, fail domain.Domain) *bench.Template {
		return &bench.Template{Name: name, ID: strings.Repeat(name, 32)[:64], Render: func(d domain.Domain, s string) (string, error) {
			if d == fail {
				return "", errors.New("cannot split it")
			}
			return fmt.Sprintf("[%s] %s under %s", d, s, name), nil
		}}
	}
	out := t.TempDir()
	o := options(srv, data, out)
	o.Cache, _ = answercache.OpenCache(filepath.Join(out, bench.CacheDir), nil)
	o.Template = tmpl("v7", "")
	if _, err := bench.Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	systems := modelSystems(srv)
	if len(systems) != 14 {
		t.Fatalf("%d model requests with a system message", len(systems))
	}
	for _, s := range systems {
		d, _, _ := strings.Cut(strings.TrimPrefix(s, "["), "]")
		if want := fmt.Sprintf("[%s] world bench/%s under v7", d, d); s != want {
			t.Fatalf("system %q, want %q", s, want)
		}
	}
	meta, _ := os.ReadFile(filepath.Join(out, bench.RunFile))
	if !strings.Contains(string(meta), `"template": {
      "name": "v7",
      "id": "`+o.Template.ID+`"`) {
		t.Fatalf("run.json does not record the template:\n%s", meta)
	}

	// The same cache under another version: every model call is made.
	srv.Reset()
	o2 := options(srv, data, t.TempDir())
	o2.Cache, _ = answercache.OpenCache(filepath.Join(out, bench.CacheDir), nil)
	o2.Template = tmpl("v8", "")
	if _, err := bench.Run(context.Background(), o2); err != nil {
		t.Fatal(err)
	}
	if n := len(modelSystems(srv)); n != 14 {
		t.Fatalf("another version made %d model calls, want 14 (the version is not in the cache key)", n)
	}

	// Into the first directory without the template: refused.
	o3 := options(srv, data, out)
	if _, err := bench.Run(context.Background(), o3); !errors.Is(err, bench.ErrSettingsChanged) || !strings.Contains(err.Error(), "under template v7") {
		t.Fatalf("rerun without the template: %v", err)
	}

	o4 := options(srv, data, t.TempDir())
	o4.Template = tmpl("v9", domain.OS)
	_, err := bench.Run(context.Background(), o4)
	if err == nil || !regexp.MustCompile(regexp.QuoteMeta(filepath.Join(data, "os_test.jsonl"))+`:[12]: system_str: template v9: cannot split it`).MatchString(err.Error()) {
		t.Fatalf("unrenderable row: %v", err)
	}
}
