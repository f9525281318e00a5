package world

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/agentworld/agentworld/internal/regexlimit"
)

// What a spec makes the server compile: its tools' JSON schemas (when a
// tool call is checked against them) and its regular expressions
// (perturbation action patterns, a success rule's final_observation,
// schema patterns). A client's inline spec of 1 MiB could otherwise hold
// gigabytes: a schema node of ten bytes of text compiles into about a
// kilobyte, a counted repetition of a Unicode class into a hundred.
const (
	// SchemaNodeBytes is what CompiledBytes charges per JSON object in a
	// tool's schema: measured at 0.6 to 1.1 KiB per subschema compiled
	// (see mcpworld's TestSchemaCostBoundsMemory), doubled.
	SchemaNodeBytes = 2 << 10
	// MaxCompiledBytes bounds CompiledBytes for any spec: about 16,000
	// schema nodes, far more than a large MCP server's tools declare.
	MaxCompiledBytes = 32 << 20
	// MaxSchemaDepth bounds how deep a schema's JSON nests (objects and
	// arrays): the validator's resolver works in the square of it, so a
	// 72 KB schema of 9,000 nested "not"s took 167 s and 181 MiB to
	// compile. Real tool schemas nest a dozen levels.
	MaxSchemaDepth = 128
)

// CompiledBytes estimates what s can make the server hold compiled: its
// tools' schemas (SchemaNodeBytes per JSON object) and every regular
// expression, as regexlimit estimates them. Validate refuses a spec over
// MaxCompiledBytes; servers count an inline spec's in its session's size.
func (s *Spec) CompiledBytes() int {
	n, _ := s.compiledBytes()
	return n
}

// compiledBytes is CompiledBytes, or the first schema pattern over
// regexlimit's bound.
func (s *Spec) compiledBytes() (int, error) {
	n := s.Perturbations.PatternBytes()
	if r := s.Reward; r != nil && r.Success != nil && r.Success.FinalObservation != "" {
		k, _ := regexlimit.Cost(r.Success.FinalObservation, nil)
		n += k
	}
	for i, t := range s.ActionSpace.Tools {
		for _, sch := range []struct {
			field string
			raw   json.RawMessage
		}{{"input_schema", t.InputSchema}, {"output_schema", t.OutputSchema}} {
			k, err := SchemaCost(sch.raw)
			if err != nil {
				return 0, bad(fmt.Sprintf("action_space.tools[%d].%s", i, sch.field), "%v", err)
			}
			n += k
		}
	}
	return n, nil
}

// validateCompiled checks CompiledBytes against MaxCompiledBytes.
func (s *Spec) validateCompiled() error {
	n, err := s.compiledBytes()
	if err != nil {
		return err
	}
	if n > MaxCompiledBytes {
		return bad("action_space.tools", "the spec's schemas and regular expressions compile into about %d MiB, over the limit of %d MiB (each JSON object in a schema counts %d KiB)",
			n>>20, MaxCompiledBytes>>20, SchemaNodeBytes>>10)
	}
	return nil
}

// SchemaCost estimates what the JSON schema raw compiles into:
// SchemaNodeBytes per JSON object in it, plus twice regexlimit's estimate
// of the regular expressions of its "pattern" keywords and
// "patternProperties" keys (the validator holds a compiled pattern with
// more around it than regexp alone; measured by mcpworld's
// TestSchemaCostBoundsMemory). A pattern over regexlimit's bound, or
// nesting deeper than MaxSchemaDepth, is an error; one that does not
// parse counts nothing (the schema then does not compile, and checks
// nothing). Text that is not JSON costs nothing: it is never compiled.
func SchemaCost(raw json.RawMessage) (int, error) {
	if len(raw) == 0 {
		return 0, nil
	}
	type frame struct {
		object, wantKey bool
		key             string
		// patternKeys: the keys of this object are patterns.
		patternKeys bool
	}
	var (
		stack []frame
		n     int
	)
	pattern := func(expr string) error {
		k, err := regexlimit.Cost(expr, nil)
		if errors.Is(err, regexlimit.ErrTooLarge) {
			return fmt.Errorf("pattern %.40q: %w", expr, err)
		}
		n += 2 * k
		return nil
	}
	// valueDone marks the end of a value inside the innermost container.
	valueDone := func() {
		if k := len(stack); k > 0 && stack[k-1].object {
			stack[k-1].wantKey = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return 0, nil
		}
		top := len(stack) - 1
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				if len(stack) >= MaxSchemaDepth {
					return 0, fmt.Errorf("the schema nests deeper than the limit of %d levels", MaxSchemaDepth)
				}
				f := frame{object: v == '{', wantKey: true}
				if v == '{' {
					n += SchemaNodeBytes
					f.patternKeys = top >= 0 && stack[top].object && isKeyword(stack[top].key, "patternProperties")
				}
				stack = append(stack, f)
			default:
				stack = stack[:top]
				valueDone()
			}
		case string:
			if top >= 0 && stack[top].object && stack[top].wantKey {
				stack[top].key, stack[top].wantKey = v, false
				if stack[top].patternKeys {
					if err := pattern(v); err != nil {
						return 0, err
					}
				}
				continue
			}
			if top >= 0 && stack[top].object && isKeyword(stack[top].key, "pattern") {
				if err := pattern(v); err != nil {
					return 0, err
				}
			}
			valueDone()
		default:
			valueDone()
		}
	}
}

// isKeyword reports whether key names keyword for the schema validator:
// it decodes schemas with encoding/json, which matches object keys to
// fields without regard to case (Unicode simple folding, as
// strings.EqualFold), so "Pattern" or "PATTERN" is a pattern it compiles.
func isKeyword(key, keyword string) bool { return strings.EqualFold(key, keyword) }
