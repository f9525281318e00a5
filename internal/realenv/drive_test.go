package realenv

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/domain"
)

func TestReadActions(t *testing.T) {
	in := "# a comment\nls -la > out.txt\n\n[{\"keystrokes\":\"C-c\",\"duration\":0.2}]\n[]\n"
	got, err := ReadActions(strings.NewReader(in), "acts", domain.Terminal)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`[{"keystrokes":"ls -la > out.txt\n","duration":1}]`, `[{"keystrokes":"C-c","duration":0.2}]`, `[]`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	_, err = ReadActions(strings.NewReader("ok\n[{\"duration\":1}]\n"), "acts", domain.Terminal)
	if !errors.Is(err, conversation.ErrBadAction) || !strings.HasPrefix(err.Error(), "acts:2:") {
		t.Fatalf("bad line: err = %v", err)
	}
	mcpActs, err := ReadActions(strings.NewReader(`{"name":"read_graph"}`+"\n"), "m", domain.MCP)
	if err != nil || len(mcpActs) != 1 {
		t.Fatalf("mcp: %v %v", mcpActs, err)
	}
	if _, err := ReadActions(strings.NewReader("read_graph\n"), "m", domain.MCP); !errors.Is(err, conversation.ErrBadAction) {
		t.Fatalf("mcp bad line: %v", err)
	}
}
