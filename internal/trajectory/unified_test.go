package trajectory

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTrimUnanswered(t *testing.T) {
	turn := func(a, o string) Turn { return Turn{Action: a, Observation: o} }
	cases := []struct {
		name    string
		turns   []Turn
		want    []Turn
		dropped int
	}{
		{"final end action", []Turn{turn("ls", "a b"), turn("[]", "")}, []Turn{turn("ls", "a b")}, 1},
		{"two unanswered at the end", []Turn{turn("ls", "a"), turn("x", " "), turn("DONE", "")}, []Turn{turn("ls", "a")}, 2},
		{"all answered", []Turn{turn("ls", "a")}, []Turn{turn("ls", "a")}, 0},
		{"unanswered in the middle stays", []Turn{turn("ls", ""), turn("pwd", "/")}, []Turn{turn("ls", ""), turn("pwd", "/")}, 0},
		{"nothing answered stays for Check", []Turn{turn("ls", "")}, []Turn{turn("ls", "")}, 0},
		{"empty final turn stays for Check", []Turn{turn("ls", "a"), turn("", "")}, []Turn{turn("ls", "a"), turn("", "")}, 0},
	}
	for _, c := range cases {
		tr := &Trajectory{Turns: c.turns}
		if got := tr.TrimUnanswered(); got != c.dropped {
			t.Errorf("%s: dropped %d, want %d", c.name, got, c.dropped)
		}
		if diff := cmp.Diff(c.want, tr.Turns); diff != "" {
			t.Errorf("%s: turns (-want +got):\n%s", c.name, diff)
		}
	}
}
