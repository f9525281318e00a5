package mcpworld

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/world"
)

// TestSchemaCostBoundsMemory: world.SchemaCost, which world validation
// holds specs to, is above what the compiled schemas hold (heap in use
// after GC, runtime.MemStats), for the shapes that cost most per byte of
// text; so the bound on a spec's estimate bounds its compiled schemas.
func TestSchemaCostBoundsMemory(t *testing.T) {
	for _, node := range []string{`{}`, `{"type":"string"}`, `{"type":"string","pattern":"^[a-z]{1,%d}$"}`, `{"type":"object","properties":{"a":{},"b":{"enum":[1,2,3]}}}`} {
		props := make([]string, 2000)
		for i := range props {
			n := node
			if strings.Contains(n, "%d") {
				n = fmt.Sprintf(n, 1+i%40)
			}
			props[i] = fmt.Sprintf(`"p%d":%s`, i, n)
		}
		raw := json.RawMessage(`{"type":"object","properties":{` + strings.Join(props, ",") + `}}`)
		cost, err := world.SchemaCost(raw)
		if err != nil {
			t.Fatal(err)
		}
		before := testkit.HeapAfterGC()
		rs := compileSchema(raw)
		held := testkit.HeapAfterGC() - before
		if rs == nil {
			t.Fatalf("%s: did not compile", node)
		}
		runtime.KeepAlive(rs)
		t.Logf("%.30s ×2000: %d KiB of text, estimated %d KiB, held %d KiB", node, len(raw)>>10, cost>>10, held>>10)
		if held > int64(cost) {
			t.Errorf("%s: holds %d bytes compiled, over the estimate %d", node, held, cost)
		}
	}
}

// TestSchemasGoWithTheirSpec: a spec's compiled output schemas are kept
// (one compile per tool however many calls) while the spec lives, and
// the entry goes once the spec is collected (an inline spec's session
// ended), so distinct schemas from clients do not pile up.
func TestSchemasGoWithTheirSpec(t *testing.T) {
	count := func() int {
		n := 0
		specSchemas.Range(func(any, any) bool { n++; return true })
		return n
	}
	base := count()
	for i := range 50 {
		spec := &world.Spec{Name: "w", ActionSpace: world.ActionSpace{Tools: []world.Tool{{Name: "get",
			OutputSchema: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"n%d":{"type":"integer"}},"required":["n%d"]}`, i, i))}}}}
		tool := spec.ActionSpace.Tools[0]
		sc := SchemasOf(spec)
		if SchemasOf(spec) != sc {
			t.Fatal("one spec got two Schemas")
		}
		good := ParseObservation(fmt.Sprintf(`{"n%d": 3}`, i), tool, sc)
		bad := ParseObservation(`{"other": 3}`, tool, sc)
		if good.Tool.StructuredContent == nil || bad.Tool.StructuredContent != nil || !bad.StructuredDropped {
			t.Fatalf("schema not applied: %+v / %+v", good.Tool, bad.Tool)
		}
		if len(sc.compiled) != 1 {
			t.Fatalf("%d compiled entries for one tool", len(sc.compiled))
		}
	}
	deadline := time.Now().Add(time.Minute) // a hang guard: collections run the cleanups
	for count() > base {
		if time.Now().After(deadline) {
			t.Fatalf("%d spec entries left after their specs were collected", count()-base)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// TestToolCallValidatorsGoWithTheirSpec: the step hook that checks tool
// calls compiles a spec's input schemas once and drops them once the spec
// is collected, so inline specs' distinct schemas do not pile up.
func TestToolCallValidatorsGoWithTheirSpec(t *testing.T) {
	h := NewToolCalls()
	for i := range 50 {
		spec := &world.Spec{Name: "w", Domain: "mcp", ActionSpace: world.ActionSpace{Tools: []world.Tool{{Name: "get",
			InputSchema: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"n%d":{"type":"integer"}},"required":["n%d"]}`, i, i))}}}}
		v := h.validators(spec)
		if v == nil || v["get"].Check(json.RawMessage(`{}`)) == "" || len(h.validators(spec)) != 1 {
			t.Fatalf("spec %d: validators %v", i, v)
		}
	}
	held := func() int {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.worlds)
	}
	deadline := time.Now().Add(time.Minute) // a hang guard: collections run the cleanups
	for held() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d specs' validators left after the specs were collected", held())
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSchemaKeywordsAnyCase: the validator decodes a schema with
// encoding/json, which matches keys to keywords whatever their case, so
// "Pattern" and "PATTERNPROPERTIES" are patterns it compiles and checks
// (shown on a small one); world.SchemaCost must count them as it counts
// "pattern" (issue 21's large pattern under a capitalised key passed as
// 2 KiB, and compiled).
func TestSchemaKeywordsAnyCase(t *testing.T) {
	rs := compileSchema(json.RawMessage(`{"type":"object","properties":{"a":{"type":"string","Pattern":"^x$"}},"PATTERNPROPERTIES":{"^b":{"type":"integer"}}}`))
	if rs == nil {
		t.Fatal("a small schema with capitalised keywords did not compile")
	}
	for _, bad := range []string{`{"a":"y"}`, `{"b1":"text"}`} {
		var v any
		if err := json.Unmarshal([]byte(bad), &v); err != nil {
			t.Fatal(err)
		}
		if rs.rs.Validate(v) == nil {
			t.Fatalf("%s validated: the validator ignored a capitalised keyword, so this test no longer shows the hole", bad)
		}
	}
	big := strings.Repeat(`\\pL{1000}`, 400)
	lower, err := world.SchemaCost(json.RawMessage(`{"type":"string","pattern":"` + big + `"}`))
	if err == nil {
		t.Fatalf("a large pattern costs %d, admitted", lower)
	}
	for _, raw := range []string{
		`{"type":"string","Pattern":"` + big + `"}`,
		`{"type":"object","PatternProperties":{"` + big + `":{}}}`,
	} {
		if n, err := world.SchemaCost(json.RawMessage(raw)); err == nil {
			t.Errorf("%.60s: costs %d, admitted", raw, n)
		}
		if compileSchema(json.RawMessage(raw)) != nil {
			t.Errorf("%.60s: compiled", raw)
		}
	}
}
