package fielderr

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var (
	errOuter = errors.New("invalid world spec")
	errInner = errors.New("invalid perturbation rule")
	errCause = errors.New("missing field")
)

func TestMessages(t *testing.T) {
	tests := []struct {
		name          string
		err           *Error
		public, error string
	}{
		{"msg", New(errInner, "rules[0].when.tool", "unknown tool %q", "x"),
			`field rules[0].when.tool: unknown tool "x"`, `invalid perturbation rule: field rules[0].when.tool: unknown tool "x"`},
		{"cause", Wrap(nil, "turns[2].observation", errCause),
			"field turns[2].observation: missing field", "field turns[2].observation: missing field"},
		{"msg and cause", &Error{Path: "a", Msg: "bad", Err: errCause, Kind: errOuter},
			"field a: bad: missing field", "invalid world spec: field a: bad: missing field"},
		{"no path", New(nil, "", "bad"), "bad", "bad"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Public(); got != tc.public {
				t.Errorf("Public = %q, want %q", got, tc.public)
			}
			if got := tc.err.Error(); got != tc.error {
				t.Errorf("Error = %q, want %q", got, tc.error)
			}
		})
	}
}

func TestUnder(t *testing.T) {
	inner := New(errInner, "rules[0].when.tool", "unknown tool")
	err := Under(errOuter, "perturbations", fmt.Errorf("validate: %w", inner))
	fe, ok := As(err)
	if !ok {
		t.Fatal("no field error")
	}
	if diff := cmp.Diff("perturbations.rules[0].when.tool", fe.Path); diff != "" {
		t.Error(diff)
	}
	if !errors.Is(err, errOuter) || !errors.Is(err, errInner) {
		t.Errorf("%v does not match both kinds", err)
	}
	if got, want := err.Error(), "invalid world spec: field perturbations.rules[0].when.tool: unknown tool"; got != want {
		t.Errorf("Error = %q, want %q", got, want)
	}
	// Without a new kind the old one stays; a plain error lands on the prefix.
	if fe, _ := As(Under(nil, "world", inner)); fe.Kind != errInner || fe.Path != "world.rules[0].when.tool" {
		t.Errorf("Under without kind: %+v", fe)
	}
	if fe, _ := As(Under(errOuter, "world", errCause)); fe.Path != "world" || !errors.Is(fe, errCause) || !errors.Is(fe, errOuter) {
		t.Errorf("Under of a plain error: %+v", fe)
	}
	if Under(errOuter, "x", nil) != nil {
		t.Error("Under(nil) is not nil")
	}
	// The setting that decided a refusal moves with it and stays out of the message.
	limited := New(errInner, "tools", "%d tools over the limit", 600).WithSetting("MaxInlineTools")
	if fe, _ := As(Under(errOuter, "world", limited)); fe.Setting != "MaxInlineTools" || strings.Contains(fe.Error(), "MaxInlineTools") {
		t.Errorf("Under of a limited field: setting %q, message %q", fe.Setting, fe.Error())
	}
}

func TestJoin(t *testing.T) {
	for _, tc := range [][3]string{
		{"", "a", "a"}, {"a", "", "a"}, {"a", "b.c", "a.b.c"}, {"a", "[2].b", "a[2].b"}, {Index("rules", 3), "when", "rules[3].when"},
	} {
		if got := Join(tc[0], tc[1]); got != tc[2] {
			t.Errorf("Join(%q, %q) = %q, want %q", tc[0], tc[1], got, tc[2])
		}
	}
}
