// Package envconfig is the one registry of the environment variables
// agentworld reads. Each [Var] is declared once with its name, what it does
// and its default; the same table drives behaviour ([Var.Value], [First])
// and the "Environment variables" section of each command's help
// ([Help]), which prints names and descriptions only, never a value.
//
// Values are read when a command runs, never when it is built, so no
// variable ever becomes a flag default that --help would print.
package envconfig

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// Var is one environment variable agentworld reads.
type Var struct {
	// Name is the variable's name, e.g. AGENTWORLD_API_KEY.
	Name string
	// Description says what the variable does, for help text.
	Description string
	// Default is the value used when the variable is unset or empty;
	// "" means none.
	Default string
	// Secret marks credentials. Help never prints any value, but a secret
	// is also kept out of [Var.String].
	Secret bool
}

// Value is the variable's value from the environment, or its default when
// it is unset or empty.
func (v Var) Value() string {
	if s := os.Getenv(v.Name); s != "" {
		return s
	}
	return v.Default
}

// String names the variable; it never includes its value.
func (v Var) String() string { return v.Name }

var registry []Var

func register(v Var) Var {
	registry = append(registry, v)
	return v
}

// The variables agentworld reads.
var (
	// APIKey is the bearer token `serve` and `reward serve` require, and the one `play
	// --server` sends.
	APIKey = register(Var{
		Name:        "AGENTWORLD_API_KEY",
		Description: "bearer token the server requires on every route but /health (serve, reward serve) and sends (play --server), when --api-key is not given",
		Secret:      true,
	})
	// ModelAPIKey is sent to the world-model server.
	ModelAPIKey = register(Var{
		Name:        "AGENTWORLD_MODEL_API_KEY",
		Description: "API key sent to the world-model server, when no key flag is given",
		Secret:      true,
	})
	// JudgeAPIKey is sent to the judge model's server.
	JudgeAPIKey = register(Var{
		Name:        "AGENTWORLD_JUDGE_API_KEY",
		Description: "API key sent to the judge's server, when --judge-api-key is not given",
		Secret:      true,
	})
	// PolicyAPIKey is sent to rollout's policy server.
	PolicyAPIKey = register(Var{
		Name:        "AGENTWORLD_POLICY_API_KEY",
		Description: "API key sent to rollout's policy server, when --policy-api-key is not given (how a queue's rollout workers get it)",
		Secret:      true,
	})
	// OpenAIAPIKey is the fallback key of the model and the judge, the
	// variable OpenAI's own clients read.
	OpenAIAPIKey = register(Var{
		Name:        "OPENAI_API_KEY",
		Description: "API key of the world model and the judge when neither a flag nor its AGENTWORLD_ variable gives one",
		Secret:      true,
	})
)

// All returns every registered variable, in declaration order.
func All() []Var { return slices.Clone(registry) }

// First returns the value of the first of vars that is set (or has a
// default), or "".
func First(vars ...Var) string {
	for _, v := range vars {
		if s := v.Value(); s != "" {
			return s
		}
	}
	return ""
}

// Help renders the help section for vars: one line per variable with its
// name, description and default. It never reads the environment.
func Help(vars ...Var) string {
	if len(vars) == 0 {
		return ""
	}
	w := 0
	for _, v := range vars {
		w = max(w, len(v.Name))
	}
	var b strings.Builder
	b.WriteString("Environment variables:\n")
	for _, v := range vars {
		fmt.Fprintf(&b, "  %-*s  %s", w, v.Name, v.Description)
		if v.Default != "" && !v.Secret {
			fmt.Fprintf(&b, " (default %q)", v.Default)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// Lookup returns the registered variable called name.
func Lookup(name string) (Var, bool) {
	i := slices.IndexFunc(registry, func(v Var) bool { return v.Name == name })
	if i < 0 {
		return Var{}, false
	}
	return registry[i], true
}
