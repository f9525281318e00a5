package fielderr_test

import (
	"errors"
	"fmt"

	"github.com/agentworld/agentworld/internal/fielderr"
)

var (
	errInvalidSpec = errors.New("invalid world spec")
	errInvalidRule = errors.New("invalid perturbation rule")
)

// A rule's error moves under the spec field that holds the rules; both
// kinds still match, and a client sees the path and the problem only.
func ExampleUnder() {
	inner := fielderr.New(errInvalidRule, "rules[0].when.tool", "unknown tool %q", "delete_repo")
	err := fielderr.Under(errInvalidSpec, "perturbations", inner)
	fe, _ := fielderr.As(err)
	fmt.Println(err)
	fmt.Println(fe.Public())
	fmt.Println(errors.Is(err, errInvalidSpec), errors.Is(err, errInvalidRule))
	// Output:
	// invalid world spec: field perturbations.rules[0].when.tool: unknown tool "delete_repo"
	// field perturbations.rules[0].when.tool: unknown tool "delete_repo"
	// true true
}
