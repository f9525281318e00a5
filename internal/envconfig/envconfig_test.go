package envconfig

import (
	"strings"
	"testing"
)

func TestValueFirstAndHelp(t *testing.T) {
	a := Var{Name: "AGENTWORLD_TEST_A", Description: "a", Secret: true}
	b := Var{Name: "AGENTWORLD_TEST_B", Description: "b", Default: "dflt"}
	t.Setenv(a.Name, "")
	t.Setenv(b.Name, "")
	if got := First(a, b); got != "dflt" {
		t.Errorf("First with a unset = %q, want b's default", got)
	}
	t.Setenv(a.Name, "secret-value")
	if got := First(a, b); got != "secret-value" {
		t.Errorf("First = %q", got)
	}
	h := Help(a, b)
	if strings.Contains(h, "secret-value") || !strings.Contains(h, `(default "dflt")`) || !strings.HasPrefix(h, "Environment variables:\n") {
		t.Errorf("help:\n%s", h)
	}
	if Help() != "" {
		t.Error("help of no variables is not empty")
	}
}

func TestRegistry(t *testing.T) {
	seen := map[string]bool{}
	for _, v := range All() {
		if v.Name == "" || v.Description == "" || seen[v.Name] {
			t.Errorf("bad or duplicate entry %+v", v)
		}
		seen[v.Name] = true
		if got, ok := Lookup(v.Name); !ok || got != v {
			t.Errorf("Lookup(%s) = %+v, %v", v.Name, got, ok)
		}
	}
	if _, ok := Lookup("NOT_REGISTERED"); ok {
		t.Error("Lookup found an unregistered name")
	}
}
