package worldgen

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/agentworld/agentworld/internal/mcpworld"
)

// TestRandomArgumentsPassTheirSchema: the random agent's arguments pass
// the same schema check serve applies to every tool call, over many seeds
// and the schema shapes generated worlds use.
func TestRandomArgumentsPassTheirSchema(t *testing.T) {
	schemas := map[string]string{
		"required string":  `{"type":"object","properties":{"key":{"type":"string"}},"required":["key"]}`,
		"no properties":    `{"type":"object"}`,
		"enum and const":   `{"type":"object","properties":{"state":{"enum":["open","closed"]},"v":{"const":2}},"required":["state","v"]}`,
		"bounded numbers":  `{"type":"object","properties":{"n":{"type":"integer","minimum":5,"maximum":7},"x":{"type":"number","exclusiveMinimum":0.5,"exclusiveMaximum":3},"big":{"type":"integer","minimum":-1e300,"maximum":1e300}},"required":["n","x","big"]}`,
		"string lengths":   `{"type":"object","properties":{"code":{"type":"string","minLength":4,"maxLength":4},"long":{"type":"string","minLength":20}},"required":["code","long"]}`,
		"nullable type":    `{"type":"object","properties":{"s":{"type":["null","string"]},"b":{"type":"boolean"}},"required":["s","b"]}`,
		"array of objects": `{"type":"object","properties":{"items":{"type":"array","minItems":1,"maxItems":3,"items":{"type":"object","properties":{"sku":{"type":"string"},"qty":{"type":"integer","minimum":1}},"required":["sku","qty"]}}},"required":["items"]}`,
		"nested object":    `{"type":"object","properties":{"filter":{"type":"object","properties":{"tag":{"type":"string"},"page":{"type":"integer","minimum":1}},"required":["page"]}},"required":["filter"]}`,
		"anyOf":            `{"type":"object","properties":{"id":{"anyOf":[{"type":"integer","minimum":1},{"type":"string","minLength":1}]}},"required":["id"]}`,
		"allOf":            `{"allOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},{"properties":{"b":{"type":"integer"}},"required":["b"]}]}`,
		"formats":          `{"type":"object","properties":{"due":{"type":"string","format":"date"},"at":{"type":"string","format":"date-time"},"to":{"type":"string","format":"email"}},"required":["due","at","to"]}`,
		"closed object":    `{"type":"object","properties":{"q":{"type":"string"}},"required":["q"],"additionalProperties":false}`,
	}
	for name, schema := range schemas {
		v := mcpworld.NewValidator(json.RawMessage(schema))
		for seed := range uint64(200) {
			rng := rand.New(rand.NewPCG(seed, 7))
			args := randomArguments(json.RawMessage(schema), rng)
			b, err := json.Marshal(args)
			if err != nil {
				t.Fatal(err)
			}
			if issue := v.Check(b); issue != "" {
				t.Errorf("%s, seed %d: %s breaks the schema: %s", name, seed, b, issue)
				break
			}
		}
	}
}

// TestRandomArgumentsSeeded: the same seed draws the same arguments (the
// ladder's verdicts must not depend on map order), and different seeds
// draw different ones.
func TestRandomArgumentsSeeded(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"},"c":{"type":"integer"},"d":{"type":"boolean"}}}`)
	draw := func(seed uint64) string {
		b, _ := json.Marshal(randomArguments(schema, rand.New(rand.NewPCG(seed, 1))))
		return string(b)
	}
	seen := map[string]bool{}
	for seed := range uint64(20) {
		if a, b := draw(seed), draw(seed); a != b {
			t.Fatalf("seed %d drew %s, then %s", seed, a, b)
		}
		seen[draw(seed)] = true
	}
	if len(seen) < 10 {
		t.Errorf("20 seeds drew only %d distinct argument sets", len(seen))
	}
}

// FuzzRandomArguments: any schema text a generator writes yields
// arguments without a panic.
func FuzzRandomArguments(f *testing.F) {
	f.Add(`{"type":"object","properties":{"x":{"type":"array","items":{"type":"array"}}},"required":["x"]}`)
	f.Add(`{"allOf":[{"allOf":[{"required":["a"]}]}]}`)
	f.Add(`{"type":"object","properties":{"n":{"type":"integer","minimum":10,"maximum":1}},"required":["n"]}`)
	f.Fuzz(func(t *testing.T, schema string) {
		_ = randomArguments(json.RawMessage(schema), rand.New(rand.NewPCG(1, 2)))
	})
}
