package world

import (
	"testing"
)

// TestControlExamplesLoad keeps the perturbation and fictional-world
// examples valid.
func TestControlExamplesLoad(t *testing.T) {
	for _, f := range []string{"perturbed-tracker.yaml", "quillfern-search.yaml"} {
		s, err := Load("../../examples/worlds/" + f)
		if err != nil {
			t.Fatal(err)
		}
		if s.Perturbations == nil && s.Facts == nil {
			t.Errorf("%s: neither perturbations nor facts", f)
		}
	}
}
