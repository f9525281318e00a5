package realenv

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseMCPAction(t *testing.T) {
	tests := []struct {
		in      string
		want    ToolCall
		wantErr string
	}{
		{in: `{"name":"read_graph"}`, want: ToolCall{Name: "read_graph"}},
		{in: `{"name":"a","arguments":{"x":1}}`, want: ToolCall{Name: "a", Arguments: json.RawMessage(`{"x":1}`)}},
		{in: `{"name":"a","arguments":null}`, want: ToolCall{Name: "a"}},
		{in: `{"tool":"a","args":{"x":1}}`, want: ToolCall{Name: "a", Arguments: json.RawMessage(`{"x":1}`)}},
		{in: `{"type":"function","function":{"name":"f","arguments":"{\"q\":\"x\"}"}}`, want: ToolCall{Name: "f", Arguments: json.RawMessage(`{"q":"x"}`)}},
		{in: `{"type":"function","function":{"name":"f","arguments":""}}`, want: ToolCall{Name: "f"}},
		{in: `{"arguments":{}}`, wantErr: "field name"},
		{in: `{"name":"a","arguments":[1]}`, wantErr: "field arguments"},
		{in: `{"name":"a","arguments":"[1]"}`, wantErr: "field arguments"},
		{in: `read_graph`, wantErr: "JSON object"},
		{in: `{"name":`, wantErr: "MCP action"},
	}
	for _, tt := range tests {
		got, err := ParseMCPAction(tt.in)
		if tt.wantErr != "" {
			if !errors.Is(err, ErrBadAction) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseMCPAction(%s) err = %v, want ErrBadAction with %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseMCPAction(%s): %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseMCPAction(%s) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func FuzzParseMCPAction(f *testing.F) {
	for _, s := range []string{`{"name":"a"}`, `{"name":"a","arguments":{"x":[1]}}`, `{"function":{"name":"f","arguments":"{}"}}`, `[]`, `{"name":1}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseMCPAction(s)
		if err != nil {
			if !errors.Is(err, ErrBadAction) {
				t.Fatalf("error %v does not wrap ErrBadAction", err)
			}
			return
		}
		if c.Name == "" {
			t.Fatal("accepted an action without a name")
		}
		if len(c.Arguments) > 0 && (c.Arguments[0] != '{' || !json.Valid(c.Arguments)) {
			t.Fatalf("arguments %s are not a JSON object", c.Arguments)
		}
	})
}
