package masking

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMaskingConfig(t *testing.T) {
	cfg, err := LoadMaskingConfig("")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"empty", "echo", "ack", "retrieval", "context", "transform", "reply"}, cfg.Names()); d != "" {
		t.Fatal(d)
	}
	cases := []struct {
		st   Stats
		want string
	}{
		{Stats{ObsWords: 0, ActWords: 3}, "empty"},
		{Stats{OL: 0.9, Nov: 0.1, R: 1, ActWords: 5, ObsWords: 5}, "echo"},
		{Stats{OL: 0.1, Nov: 0.9, R: 0.1, ActWords: 100, ObsWords: 10}, "ack"},
		{Stats{OL: 1, Nov: 0.95, R: 30, ActWords: 2, ObsWords: 60}, "retrieval"},
		{Stats{OL: 0.8, Nov: 0.5, R: 6, ActWords: 10, ObsWords: 60}, "context"},
		{Stats{OL: 0.7, Nov: 0.6, Jac: 0.35, R: 1.5, ActWords: 10, ObsWords: 15}, "transform"},
		{Stats{OL: 0.6, Nov: 0.4, Jac: 0.4, R: 2.5, ActWords: 10, ObsWords: 25}, "transform"},
		{Stats{OL: 0.1, Nov: 0.9, Jac: 0.05, R: 1.5, ActWords: 10, ObsWords: 15}, "reply"},
	}
	for _, c := range cases {
		if got := cfg.Categories[cfg.Classify(&c.st)].Name; got != c.want {
			t.Errorf("%+v → %s, want %s", c.st, got, c.want)
		}
	}
	for _, bad := range []string{
		"categories: []",
		"categories: [{name: a, weight: 1, when: {r: {min: 1}}}]",
		"categories: [{name: a, weight: -1}]",
		"categories: [{name: a, weight: 1}, {name: a, weight: 1}]",
		"categories: [{name: a, weight: 1, when: {r: {min: 2, max: 1}}}, {name: b, weight: 1}]",
		"categories: [{name: a, weight: 1, when: {rr: {min: 2}}}, {name: b, weight: 1}]",
	} {
		if _, err := ParseMaskingConfig([]byte(bad), "bad.yaml"); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
