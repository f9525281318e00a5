package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/agentworld/agentworld/internal/envconfig"
)

// TestHelpNeverPrintsEnvironmentValues sets every registered variable to a
// sentinel and asks every command for --help: no sentinel may appear (a
// variable read into a flag default would print it), and each command that
// reads a variable lists it by name.
func TestHelpNeverPrintsEnvironmentValues(t *testing.T) {
	const sentinel = "sk-sentinel-c0ffee"
	for _, v := range envconfig.All() {
		t.Setenv(v.Name, sentinel)
	}
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		paths = append(paths, path)
		for _, sub := range c.Commands() {
			walk(sub, append(append([]string(nil), path...), sub.Name()))
		}
	}
	walk(New(), nil)
	listed := map[string]bool{}
	for _, path := range paths {
		root := New()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append(append([]string(nil), path...), "--help"))
		if err := root.ExecuteContext(context.Background()); err != nil {
			t.Fatalf("%v --help: %v", path, err)
		}
		if strings.Contains(out.String(), sentinel) {
			t.Errorf("agentworld %s --help prints an environment value:\n%s", strings.Join(path, " "), out.String())
		}
		for _, v := range envconfig.All() {
			if strings.Contains(out.String(), v.Name) {
				listed[v.Name] = true
			}
		}
	}
	if len(paths) < 10 {
		t.Fatalf("walked only %d commands", len(paths))
	}
	for _, v := range envconfig.All() {
		if !listed[v.Name] {
			t.Errorf("%s is registered but no command's help names it", v.Name)
		}
	}
}

// TestEnvironmentSectionOfServe pins the help section's form on one command.
func TestEnvironmentSectionOfServe(t *testing.T) {
	root := New()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"serve", "--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(out.String(), "Environment variables:\n")
	if !ok {
		t.Fatalf("no environment section:\n%s", out.String())
	}
	for _, name := range []string{"AGENTWORLD_API_KEY", "AGENTWORLD_MODEL_API_KEY"} {
		if !strings.Contains(sec, "  "+name+" ") {
			t.Errorf("serve's environment section lacks %s:\n%s", name, sec)
		}
	}
}

// TestBadLogLevelIsAnError: an unknown --log-level is named, not ignored.
func TestBadLogLevelIsAnError(t *testing.T) {
	root := New()
	root.SetArgs([]string{"version", "--log-level", "loud"})
	root.SetOut(&bytes.Buffer{})
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), "--log-level") {
		t.Fatalf("err = %v, want one naming --log-level", err)
	}
}
