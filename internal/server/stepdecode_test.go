package server

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/api"
)

// FuzzScanStepRequest: whatever step body the scanner takes, decodeStrict
// takes too and decodes to the same request.
func FuzzScanStepRequest(f *testing.F) {
	for _, s := range []string{
		`{"action":"[{\"keystrokes\":\"ls\\n\"}]","turn":3}`, `{}`, ` { "turn" : 12 , "action" : "x" } `, `{"action":null,"turn":null}`,
		`{"action":"\u00e9\/"}`, `{"action":"a","action":"b"}`, `{"Action":"a"}`, `{"turn":1.0}`, `{"turn":-0}`, `{"turn":01}`,
		`{"action":[1]}`, `{"action":"x"}}`, `{"action":"\x"}`, `{"turn":99999999999999999999}`, `{"action":"x","labels":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, ok := scanStepRequest(body)
		if !ok {
			return
		}
		var want api.StepSessionRequest
		if err := decodeStrict(body, &want, false); err != nil {
			t.Fatalf("scanStepRequest(%q) took what decodeStrict refuses: %v", body, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("scanStepRequest(%q) (-decodeStrict +scan):\n%s", body, diff)
		}
	})
}

// TestScanStepRequestTakes: the scanner takes the bodies clients send (so
// the fuzz comparison compares something) and leaves the rest.
func TestScanStepRequestTakes(t *testing.T) {
	for body, want := range map[string]bool{
		`{"action":"[{\"keystrokes\":\"ls\\n\"}]","turn":3}`: true, `{}`: true, ` { "turn" : 12 , "action" : "\u00e9\/" } `: true,
		`{"action":null,"turn":null}`: true, `{"turn":-0}`: true,
		`{"action":"a","action":"b"}`: false, `{"Action":"a"}`: false, `{"turn":1.0}`: false, `{"turn":01}`: false, `{"action":[1]}`: false,
		`{"action":"x"}}`: false, `{"action":"\x"}`: false, `{"turn":99999999999999999999}`: false, `{"action":"x","labels":{}}`: false, ``: false,
	} {
		if _, ok := scanStepRequest([]byte(body)); ok != want {
			t.Errorf("scanStepRequest(%s) ok = %v, want %v", body, ok, want)
		}
	}
}
