package cli

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestEveryNumericFlagHasAFloor: every int, float and duration flag of the
// command tree is either given a floor or listed as taking any value, so
// a new flag cannot quietly accept --workers 0.
func TestEveryNumericFlagHasAFloor(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if !numericType(f.Value.Type()) {
				return
			}
			_, floor := flagRule(flagFloors, c, f)
			_, any := flagRule(flagAnyValue, c, f)
			if !floor && !any {
				t.Errorf("%s --%s: give it a floor in flagFloors or say in flagAnyValue why any value means something", c.CommandPath(), f.Name)
			}
			if floor && any {
				if _, own := flagAnyValue[strings.TrimPrefix(c.CommandPath(), "agentworld ")+" --"+f.Name]; !own {
					t.Errorf("%s --%s: both in flagFloors and flagAnyValue", c.CommandPath(), f.Name)
				}
			}
		})
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(New())
}

// TestFlagsBelowTheirFloorRefused: commands refuse values that would make
// them do nothing (or run what was not asked), naming the flag, before
// doing anything.
func TestFlagsBelowTheirFloorRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "run", "--data", "x", "--model-url", "baseline:copy", "--out", "o", "--concurrency", "-3"}, "--concurrency -3: must be at least 1"},
		{[]string{"data", "convert", "--workers", "0", "x"}, "--workers 0: must be at least 1"},
		{[]string{"data", "sample", "x", "--out", "o", "--judge-concurrency", "0"}, "--judge-concurrency 0: must be at least 1"},
		{[]string{"serve", "--model-timeout", "-1s"}, "--model-timeout -1s: must not be negative"},
		{[]string{"rollout", "--group-size", "0", "--tasks", "x"}, "--group-size 0: must be at least 1"},
		{[]string{"reward", "score", "--judge-rps", "-2"}, "--judge-rps -2: must not be negative"},
		{[]string{"data", "sample", "x", "--progress-interval", "0s"}, "--progress-interval 0s: must be longer than 0"},
	} {
		_, _, err := runCLI(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	// Values that mean something pass the check.
	for _, args := range [][]string{
		{"data", "sample", "--help", "--temperature", "-1"},
		{"serve", "--help", "--max-session-bytes", "-1"},
	} {
		if _, _, err := runCLI(t, args...); err != nil {
			t.Errorf("%s: %v", strings.Join(args, " "), err)
		}
	}
}
