package worldgen

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// randomArgsDepth bounds how deep randomArguments follows nested objects
// and arrays: a generated schema may nest without end through its own
// shapes, and the random agent needs plausible calls, not exhaustive ones.
const randomArgsDepth = 4

// randomArguments returns arguments for a tool with the given input
// schema that the schema accepts: every required property, and each
// optional one with probability one half, gets a random value of its
// type within its bounds (enums and consts chosen from). The random agent
// calls tools this way so that its calls pass the schema check serve
// applies and reach the world, where a check too lax to tell a random
// call from the reference solution shows; calls with empty arguments are
// refused before any world sees them and prove nothing.
//
// Constraints it does not model (patterns, formats it does not know,
// $ref) can still make a call invalid; the call is then refused as any
// agent's would be.
func randomArguments(schema json.RawMessage, rng *rand.Rand) map[string]any {
	var s map[string]any
	if len(schema) == 0 || json.Unmarshal(schema, &s) != nil {
		return map[string]any{}
	}
	v, ok := randomValue(s, rng, 0).(map[string]any)
	if !ok {
		return map[string]any{}
	}
	return v
}

// randomValue returns a random instance of the subschema s.
func randomValue(s map[string]any, rng *rand.Rand, depth int) any {
	if c, ok := s["const"]; ok {
		return c
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return e[rng.IntN(len(e))]
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if alts, ok := s[k].([]any); ok && len(alts) > 0 {
			if alt, ok := alts[rng.IntN(len(alts))].(map[string]any); ok {
				return randomValue(alt, rng, depth)
			}
		}
	}
	if all, ok := s["allOf"].([]any); ok {
		merged := map[string]any{}
		for _, a := range all {
			if m, ok := a.(map[string]any); ok {
				mergeSchema(merged, m)
			}
		}
		mergeSchema(merged, s)
		delete(merged, "allOf")
		return randomValue(merged, rng, depth)
	}
	switch schemaType(s) {
	case "object":
		out := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		required := map[string]bool{}
		if r, ok := s["required"].([]any); ok {
			for _, n := range r {
				if n, ok := n.(string); ok {
					required[n] = true
				}
			}
		}
		names := make([]string, 0, len(props))
		for n := range props {
			names = append(names, n)
		}
		slices.Sort(names) // map order must not decide what the seed draws
		for _, n := range names {
			p, ok := props[n].(map[string]any)
			if !ok || (!required[n] && (depth >= randomArgsDepth || rng.IntN(2) == 0)) {
				continue
			}
			out[n] = randomValue(p, rng, depth+1)
		}
		// a required property with no schema of its own
		for n := range required {
			if _, ok := out[n]; !ok {
				out[n] = randomWord(rng, 3, 8)
			}
		}
		return out
	case "array":
		lo, hi := bound(s, "minItems", 0), bound(s, "maxItems", 2)
		hi = max(lo, min(hi, lo+2))
		if depth >= randomArgsDepth {
			hi = lo
		}
		item, _ := s["items"].(map[string]any)
		out := []any{}
		for range lo + rng.IntN(hi-lo+1) {
			out = append(out, randomValue(item, rng, depth+1))
		}
		return out
	case "integer":
		lo, hi := numBounds(s, 0, 100)
		return int64(lo) + rng.Int64N(int64(hi)-int64(lo)+1)
	case "number":
		lo, hi := numBounds(s, 0, 100)
		return float64(int64(lo) + rng.Int64N(int64(hi)-int64(lo)+1))
	case "boolean":
		return rng.IntN(2) == 0
	case "null":
		return nil
	}
	switch s["format"] {
	case "date":
		return fmt.Sprintf("20%02d-%02d-%02d", 20+rng.IntN(10), 1+rng.IntN(12), 1+rng.IntN(28))
	case "date-time":
		return fmt.Sprintf("20%02d-%02d-%02dT%02d:%02d:00Z", 20+rng.IntN(10), 1+rng.IntN(12), 1+rng.IntN(28), rng.IntN(24), rng.IntN(60))
	case "email":
		return randomWord(rng, 3, 8) + "@example.org"
	case "uri", "url":
		return "https://example.org/" + randomWord(rng, 3, 8)
	}
	lo, hi := bound(s, "minLength", -1), bound(s, "maxLength", -1)
	if lo < 0 { // three letters at least, where the schema allows
		lo = 3
		if hi >= 0 {
			lo = min(lo, hi)
		}
	}
	if hi < 0 {
		hi = lo + 5
	}
	return randomWord(rng, lo, max(lo, min(hi, lo+8)))
}

// schemaType is a subschema's type: its "type" (the first non-null one of
// a list), else what its keywords imply, else "string".
func schemaType(s map[string]any) string {
	switch t := s["type"].(type) {
	case string:
		return t
	case []any:
		for _, x := range t {
			if x, ok := x.(string); ok && x != "null" {
				return x
			}
		}
	}
	switch {
	case s["properties"] != nil || s["required"] != nil:
		return "object"
	case s["items"] != nil:
		return "array"
	}
	return "string"
}

// mergeSchema copies src's keywords into dst; properties and required are
// united, so an allOf of object shapes needs what each part needs.
func mergeSchema(dst, src map[string]any) {
	for k, v := range src {
		switch k {
		case "properties":
			p, _ := dst[k].(map[string]any)
			if p == nil {
				p = map[string]any{}
			}
			if m, ok := v.(map[string]any); ok {
				for n, x := range m {
					p[n] = x
				}
			}
			dst[k] = p
		case "required":
			r, _ := dst[k].([]any)
			if l, ok := v.([]any); ok {
				r = append(r, l...)
			}
			dst[k] = r
		default:
			dst[k] = v
		}
	}
}

// bound reads a non-negative integer keyword, def when absent or unusable.
func bound(s map[string]any, key string, def int) int {
	if f, ok := s[key].(float64); ok && f >= 0 && f <= 1<<16 {
		return int(f)
	}
	return def
}

// numBounds reads a numeric subschema's inclusive integer range, within
// [def lo, def hi] where the schema leaves a side open.
func numBounds(s map[string]any, lo, hi float64) (int64, int64) {
	if f, ok := s["minimum"].(float64); ok {
		lo = f
		hi = max(hi, lo+100)
	}
	if f, ok := s["exclusiveMinimum"].(float64); ok {
		lo = f + 1
		hi = max(hi, lo+100)
	}
	if f, ok := s["maximum"].(float64); ok {
		hi = f
		lo = min(lo, hi)
	}
	if f, ok := s["exclusiveMaximum"].(float64); ok {
		hi = f - 1
		lo = min(lo, hi)
	}
	// keep the range where int64 arithmetic on it cannot overflow
	lo, hi = max(-1e15, min(lo, 1e15)), max(-1e15, min(hi, 1e15))
	l, h := int64(math.Ceil(lo)), int64(math.Floor(hi))
	h = max(l, min(h, l+1_000_000))
	return l, h
}

// randomWord is a lowercase word of lo to hi letters.
func randomWord(rng *rand.Rand, lo, hi int) string {
	n := lo
	if hi > lo {
		n += rng.IntN(hi - lo + 1)
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + rng.IntN(26))
	}
	return string(b)
}
