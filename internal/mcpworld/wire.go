// Package mcpworld connects simulated worlds with the Model Context
// Protocol: it serves a world as a real MCP server (tools/list from the
// spec's tool definitions, tools/call as a simulation step) over stdio and
// streamable HTTP with the official Go SDK, and imports a world spec from a
// real MCP server (its tools, and optionally a few recorded calls as
// demonstrations). This file holds the pure converters between MCP wire
// values and the text a world model reads and writes.
package mcpworld

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"weak"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentworld/agentworld/internal/world"
)

// ToolFromMCP converts a tool definition listed by a real server into a
// world spec tool.
func ToolFromMCP(t *mcp.Tool) (world.Tool, error) {
	out := world.Tool{Name: t.Name, Description: t.Description}
	if t.Description == "" {
		out.Description = t.Title
	}
	var err error
	if out.InputSchema, err = rawSchema(t.InputSchema); err != nil {
		return world.Tool{}, fmt.Errorf("tool %s input schema: %w", t.Name, err)
	}
	if out.OutputSchema, err = rawSchema(t.OutputSchema); err != nil {
		return world.Tool{}, fmt.Errorf("tool %s output schema: %w", t.Name, err)
	}
	return out, nil
}

func rawSchema(s any) (json.RawMessage, error) {
	if s == nil {
		return nil, nil
	}
	b, err := json.Marshal(s)
	if err != nil || string(b) == "null" {
		return nil, err
	}
	return b, nil
}

// ToolToMCP converts a spec tool into the definition tools/list returns. A
// tool without an input schema accepts any object, as MCP requires an object
// schema.
func ToolToMCP(t world.Tool) *mcp.Tool {
	in := json.RawMessage(`{"type":"object"}`)
	if len(t.InputSchema) > 0 {
		in = t.InputSchema
	}
	mt := &mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: in}
	if len(t.OutputSchema) > 0 {
		mt.OutputSchema = t.OutputSchema
	}
	return mt
}

// Result is what a simulated observation becomes on the MCP wire: a tool
// result, or a protocol error.
type Result struct {
	Tool *mcp.CallToolResult
	RPC  *jsonrpc.Error
	// StructuredDropped reports JSON that did not match the tool's output
	// schema and was sent as text only.
	StructuredDropped bool
}

// ParseObservation turns a simulated observation into an MCP reply for
// tool t:
//   - the MCP wire shape {"content": [...], ...} is used as is;
//   - {"error": {"code": n, "message": s}} is a JSON-RPC error;
//   - anything else is one text item; text starting like an error report
//     ("Error:", "MCP error", "Error executing") sets isError.
//
// When t declares an output schema and the result's JSON (its structured
// content, or its only text item parsed as JSON) validates against it, the
// result carries it as structuredContent. The schema is compiled once in
// schemas, which must be those of the world t belongs to ([SchemasOf]);
// nil compiles it for this call alone.
func ParseObservation(text string, t world.Tool, schemas *Schemas) Result {
	trim := strings.TrimSpace(text)
	res := &mcp.CallToolResult{}
	parsed := false
	if strings.HasPrefix(trim, "{") {
		var probe struct {
			Content json.RawMessage `json:"content"`
			Error   *struct {
				Code    *int64 `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal([]byte(trim), &probe) == nil {
			switch {
			case len(probe.Content) > 0 && probe.Content[0] == '[':
				if err := json.Unmarshal([]byte(trim), res); err == nil {
					parsed = true
				} else {
					res = &mcp.CallToolResult{}
				}
			case probe.Error != nil && probe.Error.Code != nil && probe.Error.Message != "":
				return Result{RPC: &jsonrpc.Error{Code: *probe.Error.Code, Message: probe.Error.Message}}
			}
		}
	}
	if !parsed {
		res.Content = []mcp.Content{&mcp.TextContent{Text: text}}
		res.IsError = looksLikeError(trim)
	}
	if res.Content == nil {
		res.Content = []mcp.Content{}
	}
	out := Result{Tool: res}
	if len(t.OutputSchema) == 0 || res.IsError {
		res.StructuredContent = nil
		return out
	}
	var candidate any
	if res.StructuredContent != nil {
		candidate = res.StructuredContent
	} else if len(res.Content) == 1 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			var v any
			if json.Unmarshal([]byte(strings.TrimSpace(tc.Text)), &v) == nil {
				candidate = v
			}
		}
	}
	if candidate == nil {
		return out
	}
	if err := schemas.validate(t, candidate); err != nil {
		res.StructuredContent = nil
		out.StructuredDropped = true
		return out
	}
	res.StructuredContent = candidate
	if len(res.Content) == 0 {
		b, _ := json.Marshal(candidate)
		res.Content = []mcp.Content{&mcp.TextContent{Text: string(b)}}
	}
	return out
}

func looksLikeError(s string) bool {
	l := strings.ToLower(s)
	for _, p := range []string{"error:", "error executing", "mcp error", "error -32"} {
		if strings.HasPrefix(l, p) {
			return true
		}
	}
	return false
}

// Validator checks tool arguments against a tool's input schema.
type Validator struct {
	resolved *compiledSchema
	schema   map[string]any
}

// NewValidator compiles a tool's input schema; a tool without one, or with
// a schema the validator cannot compile (an old draft, one over
// world.MaxCompiledBytes, or one whose validation work cannot be bounded:
// see [schemaWork]), gets a validator that only checks the arguments form
// an object.
func NewValidator(schema json.RawMessage) *Validator {
	v := &Validator{}
	if len(schema) == 0 {
		return v
	}
	if v.resolved = compileSchema(schema); v.resolved != nil {
		_ = json.Unmarshal(schema, &v.schema)
	}
	return v
}

// Check validates raw arguments and returns the problem in the words real
// MCP servers use (the TypeScript SDK's "expected string, received number
// at message"), or "" when the arguments are valid.
func (v *Validator) Check(args json.RawMessage) string {
	var inst any = map[string]any{}
	if t := bytes.TrimSpace(args); len(t) > 0 && string(t) != "null" {
		if err := json.Unmarshal(t, &inst); err != nil {
			return "Invalid input: arguments are not valid JSON"
		}
	}
	if _, ok := inst.(map[string]any); !ok {
		return fmt.Sprintf("Invalid input: expected object, received %s", jsonType(inst))
	}
	if v.resolved == nil {
		return ""
	}
	if n := v.resolved.work.cost(inst, maxSchemaWork); n > maxSchemaWork {
		return fmt.Sprintf("Invalid input: checking these arguments against the tool's input schema would take over %d units of work (at most %d; each application of a subschema counts %d, each pattern its instructions times the bytes it reads)", maxSchemaWork, maxSchemaWork, visitWork)
	}
	err := v.resolved.rs.Validate(inst)
	if err == nil {
		return ""
	}
	if issue := firstIssue(v.schema, inst, ""); issue != "" {
		return issue
	}
	return "Invalid input: " + err.Error()
}

// Schemas holds the compiled output schemas of one world's tools, by tool
// name, compiled on the first call of each tool. A loaded world's are kept
// as long as the world; an inline spec's are its session's and go with it
// (see [SchemasOf]), so distinct schemas from clients never pile up. What
// one world's can hold is bounded by world.MaxCompiledBytes, which world
// validation enforces and compile checks again. The zero value is ready
// to use.
type Schemas struct {
	mu       sync.Mutex
	compiled map[string]*compiledSchema // nil: does not compile
}

// specSchemas maps a world spec, weakly, to its Schemas: an entry does not
// keep its spec alive, and is removed once the spec is collected.
var specSchemas sync.Map // weak.Pointer[world.Spec] → *Schemas

// SchemasOf is the Schemas of spec, made on first use and dropped when
// spec is garbage collected: for an inline spec, once its session ends.
func SchemasOf(spec *world.Spec) *Schemas {
	k := weak.Make(spec)
	if v, ok := specSchemas.Load(k); ok {
		return v.(*Schemas)
	}
	v, loaded := specSchemas.LoadOrStore(k, &Schemas{})
	if !loaded {
		runtime.AddCleanup(spec, func(k weak.Pointer[world.Spec]) { specSchemas.Delete(k) }, k)
	}
	return v.(*Schemas)
}

// compiledSchema is a resolved schema and the model that bounds the work
// of validating against it.
type compiledSchema struct {
	rs   *jsonschema.Resolved
	work *schemaWork
}

// compileSchema resolves a JSON schema; nil when it does not compile,
// would compile into more than world.MaxCompiledBytes (a spec that
// skipped validation, stored before the bound existed), or its validation
// work cannot be bounded (see [schemaWork]).
func compileSchema(raw json.RawMessage) *compiledSchema {
	if n, err := world.SchemaCost(raw); err != nil || n > world.MaxCompiledBytes {
		return nil
	}
	work, ok := newSchemaWork(raw)
	if !ok {
		return nil
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		return nil
	}
	return &compiledSchema{rs: rs, work: work}
}

// output is t's compiled output schema.
func (c *Schemas) output(t world.Tool) *compiledSchema {
	if c == nil {
		return compileSchema(t.OutputSchema)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if rs, ok := c.compiled[t.Name]; ok {
		return rs
	}
	rs := compileSchema(t.OutputSchema)
	if c.compiled == nil {
		c.compiled = map[string]*compiledSchema{}
	}
	c.compiled[t.Name] = rs
	return rs
}

func (c *Schemas) validate(t world.Tool, inst any) error {
	cs := c.output(t)
	if cs == nil {
		return nil // a schema we cannot compile does not veto the output
	}
	// Round-trip so numbers are float64 as the validator expects.
	b, _ := json.Marshal(inst)
	var norm any
	_ = json.Unmarshal(b, &norm)
	if cs.work.cost(norm, maxSchemaWork) > maxSchemaWork {
		return nil // nor one that would take too long to check this output
	}
	return cs.rs.Validate(norm)
}

// ValidationFailure is the tool result real (TypeScript SDK) servers send
// for arguments that violate the input schema.
func ValidationFailure(tool, issue string) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		IsError: true,
		Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(
			"MCP error %d: Input validation error: Invalid arguments for tool %s: %s", jsonrpc.CodeInvalidParams, tool, issue)}},
	}
}

// firstIssue finds the first missing required property or type mismatch,
// walking the schema as a plain map, and words it the way zod does.
func firstIssue(schema map[string]any, inst any, path string) string {
	if schema == nil {
		return ""
	}
	if want, ok := schema["type"].(string); ok && !typeMatches(want, inst) {
		return fmt.Sprintf("Invalid input: expected %s, received %s%s", want, jsonType(inst), at(path))
	}
	switch t := inst.(type) {
	case map[string]any:
		props, _ := schema["properties"].(map[string]any)
		if req, ok := schema["required"].([]any); ok {
			for _, r := range req {
				name, _ := r.(string)
				if _, present := t[name]; !present && name != "" {
					want := "value"
					if ps, ok := props[name].(map[string]any); ok {
						if ty, ok := ps["type"].(string); ok {
							want = ty
						}
					}
					return fmt.Sprintf("Invalid input: expected %s, received undefined%s", want, at(join(path, name)))
				}
			}
		}
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if ps, ok := props[k].(map[string]any); ok {
				if issue := firstIssue(ps, t[k], join(path, k)); issue != "" {
					return issue
				}
			}
		}
	case []any:
		if items, ok := schema["items"].(map[string]any); ok {
			for i, e := range t {
				if issue := firstIssue(items, e, join(path, fmt.Sprint(i))); issue != "" {
					return issue
				}
			}
		}
	}
	return ""
}

func at(path string) string {
	if path == "" {
		return ""
	}
	return " at " + path
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func typeMatches(want string, v any) bool {
	switch want {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "number":
		_, ok := v.(float64)
		return ok
	case "integer":
		f, ok := v.(float64)
		return ok && f == float64(int64(f))
	case "null":
		return v == nil
	}
	return true
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}
