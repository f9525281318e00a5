package sim

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"testing"
)

// fillResult sets every field of a StepResult by reflection, so that a
// field added to StepResult or StepInfo is set here too: field k takes
// strs[k%3] or n+k or true or f (maps a key of them) when bit k of set is
// on, and stays zero otherwise.
func fillResult(t *testing.T, strs [3]string, n int64, f float64, set uint64) *StepResult {
	t.Helper()
	var r StepResult
	k := 0
	var fill func(v reflect.Value)
	fill = func(v reflect.Value) {
		for i := range v.NumField() {
			fv, sf := v.Field(i), v.Type().Field(i)
			if sf.Type.Kind() == reflect.Struct {
				fill(fv)
				continue
			}
			on := set&(1<<(k%64)) != 0
			s := strs[k%3]
			k++
			if !on {
				continue
			}
			switch x := fv.Addr().Interface().(type) {
			case *string:
				*x = s
			case *int:
				*x = int(n) + k
			case *int64:
				*x = n + int64(k)
			case *bool:
				*x = true
			case *float64:
				*x = f
			case *map[string]float64:
				*x = map[string]float64{s: f}
			case *map[string]string:
				*x = map[string]string{s: strs[0]}
			case *map[string]json.RawMessage:
				*x = map[string]json.RawMessage{s: json.RawMessage(`{"n": 1}`)}
			default:
				t.Fatalf("field %s is a %s: teach fillResult and appendResult", sf.Name, sf.Type)
			}
		}
	}
	fill(reflect.ValueOf(&r).Elem())
	return &r
}

// jsonResult is r as encoding/json encodes a step's reply.
func jsonResult(r *StepResult) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(r)
	return buf.Bytes(), err
}

// FuzzEncodeResult: EncodeResult, which writes the usual result field by
// field, gives every result, each field set or not, exactly the bytes or
// the error encoding/json gives.
func FuzzEncodeResult(f *testing.F) {
	f.Add("obs 1", "model", "", int64(3), 0.0, ^uint64(0)>>40)
	f.Add("a <b> & \"c\"\n\t\x01é\u2028", "\xff", "r", int64(-7), -2.5e-8, ^uint64(0))
	f.Add("", "", "", int64(0), 1.0, uint64(0))
	f.Add("x", "y", "z", int64(1<<40), math.Inf(1), uint64(2))
	f.Add("x", "y", "z", int64(1), 0.25, uint64(1)<<16) // reward components only
	f.Fuzz(func(t *testing.T, a, b, c string, n int64, rew float64, set uint64) {
		r := fillResult(t, [3]string{a, b, c}, n, rew, set)
		want, wantErr := jsonResult(r)
		got, err := EncodeResult(r)
		if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
			t.Fatalf("EncodeResult(%+v) error %v, encoding/json's %v", r, err, wantErr)
		}
		if err == nil && !bytes.Equal(got, want) {
			t.Fatalf("EncodeResult(%+v)\n%s\nencoding/json writes\n%s", r, got, want)
		}
	})
}

// TestEncodeResultWritesEveryField: a result with every field but the
// maps set is written field by field, not handed to encoding/json, and
// still byte for byte as encoding/json writes it.
func TestEncodeResultWritesEveryField(t *testing.T) {
	r := fillResult(t, [3]string{"obs", "<m>", "x\ny"}, 5, 0.5, ^uint64(0))
	r.Info.RewardComponents, r.Info.Labels, r.Info.Extra = nil, nil, nil
	got, ok := appendResult(nil, r)
	if !ok {
		t.Fatal("appendResult refused a result without maps")
	}
	want, err := jsonResult(r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("appendResult\n%s\nencoding/json writes\n%s", got, want)
	}
}

// BenchmarkEncodeResult compares EncodeResult on a usual step's result
// with encoding/json's encoding of it:
//
//	go test ./internal/sim -run '^$' -bench EncodeResult -benchmem
func BenchmarkEncodeResult(b *testing.B) {
	r := &StepResult{Observation: "root@7f3c9e2a1b4d:/app# ls\nREADME.md  pyproject.toml  src  tests\nroot@7f3c9e2a1b4d:/app#", Info: StepInfo{
		Turn: 7, LatencyMS: 412, Backend: BackendModel, Model: "wm", PromptTokens: 2210, CompletionTokens: 57, CachedTokens: 2048, FinishReason: "stop", Reasoning: "The command lists the project.",
	}}
	b.Run("fields", func(b *testing.B) {
		for b.Loop() {
			if _, err := EncodeResult(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			if _, err := jsonResult(r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
