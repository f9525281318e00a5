package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// A numeric flag given a value it cannot use (--concurrency -3, --workers
// 0) must not be taken quietly: a pool of no workers does nothing, and a
// library that reads 0 as "the default" runs something the user did not
// ask for. Every numeric flag of the command tree is either given a floor
// here or listed in flagAnyValue with the reason every value means
// something; TestEveryNumericFlagHasAFloor keeps the lists complete.

// flagFloors are the least value a numeric flag accepts (durations in
// seconds), by flag name; a "*-" key matches any prefix (the transport
// flags --judge-rps, --teacher-timeout, …), and "command path --flag"
// picks one command's flag.
var flagFloors = map[string]float64{
	// Pools, batches and counts: none is no work at all.
	"concurrency": 1, "*-concurrency": 1, "workers": 1, "beams": 1, "top-k": 1,
	"judge-samples": 1, "max-batch": 1, "iterations": 1, "minibatch": 1,
	"group-size": 1, "episode-turns": 1, "max-inflight": 1, "max-sessions": 1,
	"max-turns": 1, "width": 1, "height": 1, "max-line": 1, "shard-bytes": 1,
	"min-turns": 1, "max-tokens": 1, "n": 1, "count": 1, "tasks-per-world": 1,
	// Rates, retries, budgets and limits where 0 means none, unlimited or
	// the default (each flag's help says which).
	"rps": 0, "*-rps": 0, "retries": 0, "*-retries": 0,
	"max-response-bytes": 0, "*-max-response-bytes": 0,
	"*-max-tokens": 0, "context-budget": 0, "branch-at": 0,
	"budget": 0, "budget-tokens": 0, "budget-completion-tokens": 0,
	"rubric-weight": 0, "rule-weight": 0, "mix-ratio": 0, "scale": 0,
	"verify-tolerance": 0, "temperature": 0, "policy-temperature": 0, "top-p": 0, "*-top-p": 0,
	// Durations: a negative time is no time.
	"timeout": 0, "*-timeout": 0, "idle-ttl": 0, "step-timeout": 0, "drain-timeout": 0,
	"max-step-latency": 0, "max-session-latency": 0,
	// 0 is the default (one replica per embedded server, up to 3).
	"nats-replicas": 0,
	// An item no worker may hold for any time is handed out for ever.
	"ack-wait": 0.001,
	// A lease must outlast a heartbeat (a third of it).
	"lease": 0.3,
	// A ticker of no interval cannot tick.
	"progress-interval": 0.001,
	// -1 is "no limit" (see their help); further below means nothing.
	"max-inline-spec-bytes": -1, "max-inline-tools": -1, "max-session-bytes": -1,
}

// flagAnyValue are the numeric flags every value of which means something,
// with why.
var flagAnyValue = map[string]string{
	"seed": "any seed", "*-seed": "any seed", "beam-seed": "any seed", "first-id": "any id",
	"replay-min-similarity":     "negative: the nearest recording however far",
	"near-duplicate":            "0 or negative: exact fingerprints only; above 1 is refused with the flag named",
	"resamples":                 "negative: none",
	"max-conns":                 "negative: no cap; 0: the default",
	"max-conns-per-client":      "negative: no cap; 0: half of --max-conns",
	"data sample --temperature": "negative: none sent",
	"data sample --top-p":       "negative: none sent",
	"data sample --max-tokens":  "negative: none sent",
	"data sample --min-reward":  "checked against the reward range by rejection",
	"data sample --min-margin":  "checked against the reward range by rejection",
	"judge-temperature":         "negative: none sent",
}

// numericType reports a pflag value type checkFlagFloors reads.
func numericType(t string) bool {
	switch t {
	case "int", "int64", "int32", "uint", "uint64", "float64", "float32", "duration":
		return true
	}
	return false
}

// flagRule finds the entry of table that governs flag f of cmd: the
// command's own, the flag's name, or a prefix rule.
func flagRule[V any](table map[string]V, cmd *cobra.Command, f *pflag.Flag) (V, bool) {
	path := strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
	if v, ok := table[path+" --"+f.Name]; ok {
		return v, true
	}
	if v, ok := table[f.Name]; ok {
		return v, true
	}
	if i := strings.LastIndexByte(f.Name, '-'); i > 0 {
		for j := i; j > 0; j = strings.LastIndexByte(f.Name[:j], '-') {
			if v, ok := table["*"+f.Name[j:]]; ok {
				return v, true
			}
		}
	}
	var zero V
	return zero, false
}

// checkFlagFloors refuses a numeric flag given below its floor, naming
// the flag and the value.
func checkFlagFloors(cmd *cobra.Command) error {
	var err error
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if err != nil || !numericType(f.Value.Type()) {
			return
		}
		if _, ok := flagRule(flagAnyValue, cmd, f); ok {
			return
		}
		floor, ok := flagRule(flagFloors, cmd, f)
		if !ok {
			return
		}
		v, perr := flagNumber(f)
		if perr != nil || v >= floor {
			return
		}
		switch {
		case f.Value.Type() == "duration" && floor > 0:
			err = fmt.Errorf("--%s %s: must be longer than 0", f.Name, f.Value)
		case f.Value.Type() == "duration":
			err = fmt.Errorf("--%s %s: must not be negative", f.Name, f.Value)
		case floor == 0:
			err = fmt.Errorf("--%s %s: must not be negative", f.Name, f.Value)
		default:
			err = fmt.Errorf("--%s %s: must be at least %s", f.Name, f.Value, strconv.FormatFloat(floor, 'f', -1, 64))
		}
	})
	return err
}

// flagNumber is a numeric flag's value (a duration in seconds).
func flagNumber(f *pflag.Flag) (float64, error) {
	if f.Value.Type() == "duration" {
		d, err := time.ParseDuration(f.Value.String())
		return d.Seconds(), err
	}
	return strconv.ParseFloat(f.Value.String(), 64)
}
