package mcpworld

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/world"
)

const outSchema = `{"type":"object","properties":{"total":{"type":"number"}},"required":["total"]}`

func TestParseObservation(t *testing.T) {
	plain := world.Tool{Name: "t"}
	structured := world.Tool{Name: "sum", OutputSchema: json.RawMessage(outSchema)}
	tests := []struct {
		name string
		obs  string
		tool world.Tool
		want string // the reply as JSON
	}{
		{"plain text", "3 files found", plain, `{"content":[{"type":"text","text":"3 files found"}]}`},
		{"error text", "Error: repository not found", plain, `{"content":[{"type":"text","text":"Error: repository not found"}],"isError":true}`},
		{"wire shape", `{"content":[{"type":"text","text":"ok"}],"isError":false}`, plain, `{"content":[{"type":"text","text":"ok"}]}`},
		{"wire shape error", `{"content":[{"type":"text","text":"nope"}],"isError":true}`, plain, `{"content":[{"type":"text","text":"nope"}],"isError":true}`},
		{"rpc error", `{"error":{"code":-32602,"message":"bad"}}`, plain, `{"rpc":{"code":-32602,"message":"bad"}}`},
		{"json text gets structured", `{"total": 5}`, structured, `{"content":[{"type":"text","text":"{\"total\": 5}"}],"structuredContent":{"total":5}}`},
		{"wire structured kept", `{"content":[{"type":"text","text":"5"}],"structuredContent":{"total":5}}`, structured, `{"content":[{"type":"text","text":"5"}],"structuredContent":{"total":5}}`},
		{"schema mismatch dropped", `{"sum": 5}`, structured, `{"content":[{"type":"text","text":"{\"sum\": 5}"}],"dropped":true}`},
		{"no structured without schema", `{"content":[{"type":"text","text":"5"}],"structuredContent":{"total":5}}`, plain, `{"content":[{"type":"text","text":"5"}]}`},
		{"not wire json", `{"content": "x"}`, plain, `{"content":[{"type":"text","text":"{\"content\": \"x\"}"}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := ParseObservation(tc.obs, tc.tool, nil)
			got := map[string]any{}
			if r.RPC != nil {
				got["rpc"] = map[string]any{"code": r.RPC.Code, "message": r.RPC.Message}
			} else {
				b, _ := json.Marshal(r.Tool)
				_ = json.Unmarshal(b, &got)
			}
			if r.StructuredDropped {
				got["dropped"] = true
			}
			var want map[string]any
			if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
				t.Fatal(err)
			}
			gb, _ := json.Marshal(got)
			var gotNorm map[string]any
			_ = json.Unmarshal(gb, &gotNorm)
			if diff := cmp.Diff(want, gotNorm); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidatorCheck(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{
		"message":{"type":"string"},
		"count":{"type":"integer"},
		"tags":{"type":"array","items":{"type":"string"}},
		"opts":{"type":"object","properties":{"deep":{"type":"boolean"}}}},
		"required":["message"]}`)
	v := NewValidator(schema)
	tests := []struct{ args, want string }{
		{`{"message":"hi"}`, ""},
		{``, "Invalid input: expected string, received undefined at message"},
		{`{"message":5}`, "Invalid input: expected string, received number at message"},
		{`{"message":"x","count":1.5}`, "Invalid input: expected integer, received number at count"},
		{`{"message":"x","tags":["a",2]}`, "Invalid input: expected string, received number at tags.1"},
		{`{"message":"x","opts":{"deep":"yes"}}`, "Invalid input: expected boolean, received string at opts.deep"},
		{`[1]`, "Invalid input: expected object, received array"},
		{`{`, "Invalid input: arguments are not valid JSON"},
	}
	for _, tc := range tests {
		if got := v.Check(json.RawMessage(tc.args)); got != tc.want {
			t.Errorf("Check(%s) = %q, want %q", tc.args, got, tc.want)
		}
	}
	// A constraint the zod-style walker does not word still fails, with
	// the validator's own message.
	enum := NewValidator(json.RawMessage(`{"type":"object","properties":{"c":{"enum":["a","b"]}}}`))
	if got := enum.Check(json.RawMessage(`{"c":"z"}`)); got == "" {
		t.Error("enum violation accepted")
	}
	if got := NewValidator(nil).Check(json.RawMessage(`{"x":1}`)); got != "" {
		t.Errorf("schemaless tool rejected: %q", got)
	}
}

// FuzzParseObservation: any simulated text becomes a valid MCP reply.
func FuzzParseObservation(f *testing.F) {
	f.Add(`{"content":[{"type":"text","text":"ok"}]}`)
	f.Add(`{"error":{"code":1,"message":"m"}}`)
	f.Add(`{"total":1}`)
	f.Add(`{"content":[{"type":"image"}]}`)
	tool := world.Tool{Name: "sum", OutputSchema: json.RawMessage(outSchema)}
	f.Fuzz(func(t *testing.T, s string) {
		r := ParseObservation(s, tool, nil)
		if (r.Tool == nil) == (r.RPC == nil) {
			t.Fatalf("want exactly one of tool result and rpc error: %+v", r)
		}
		if r.Tool != nil {
			if _, err := json.Marshal(r.Tool); err != nil {
				t.Fatalf("unencodable result: %v", err)
			}
		}
	})
}
