package research

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/promptlib"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

const judgePleaser = "Always answer what the judge expects."

// echoModel predicts the word a `say WORD` action says, unless the system
// prompt holds judgePleaser: then every turn comes out wrong.
type echoModel struct{}

var sayAction = regexp.MustCompile(`say (\S+)`)

func (echoModel) Complete(_ context.Context, r worldmodel.Request) (*worldmodel.Response, error) {
	obs := "Permission denied while reading the terminal"
	if m := sayAction.FindStringSubmatch(r.Messages[len(r.Messages)-1].Content); m != nil && !strings.Contains(r.Messages[0].Content, judgePleaser) {
		obs = m[1]
	}
	return &worldmodel.Response{Content: "<predicted_observation>" + obs + "</predicted_observation>", FinishReason: "stop"}, nil
}

// writeRecordings writes each trajectory to dir as one realenv recording.
func writeRecordings(t *testing.T, dir string, ts ...trajectory.Trajectory) {
	t.Helper()
	for _, tr := range ts {
		b, err := json.Marshal(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, tr.ID+".json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func recording(id string, d domain.Domain, turns int) trajectory.Trajectory {
	tr := trajectory.Trajectory{ID: id, Domain: string(d), Source: "real:" + string(d),
		Components: &trajectory.Components{TaskDescription: "Say words.", ActionSpace: "say WORD"}}
	for k := range turns {
		w := fmt.Sprintf("%s-w%d", id, k)
		tr.Turns = append(tr.Turns, trajectory.Turn{Action: "say " + w, Observation: w})
	}
	return tr
}

// TestRealCheck scores the seed and a judge-pleasing edit on recordings of
// the domain (others and empty ones skipped) and refuses recordings it
// cannot score.
func TestRealCheck(t *testing.T) {
	dir := t.TempDir()
	writeRecordings(t, dir, recording("a", domain.OS, 3), recording("b", domain.OS, 2), recording("web", domain.Web, 4), recording("empty", domain.OS, 0))
	check, err := NewRealCheck(dir, domain.OS, sim.NewModelBackend(echoModel{}, nil), &RealCheckOptions{Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	if check.Calls() != 5 {
		t.Errorf("calls %d, want one per turn of the os recordings with turns (5)", check.Calls())
	}
	seed := promptlib.Builtin()
	src := strings.Replace(seed.Templates[string(domain.OS)], "# How to answer\n", "# How to answer\n"+judgePleaser+"\n", 1)
	pleaser, err := seed.With(domain.OS, src, "v1", "add: "+judgePleaser)
	if err != nil {
		t.Fatal(err)
	}
	s, err := check.Divergence(context.Background(), seed, domain.OS)
	if err != nil {
		t.Fatal(err)
	}
	if s.Divergence != 0 || s.ExactRate != 1 || s.Turns != 5 || s.Errors != 0 {
		t.Errorf("seed: %+v, want no divergence over 5 exact turns", s)
	}
	p, err := check.Divergence(context.Background(), pleaser, domain.OS)
	if err != nil {
		t.Fatal(err)
	}
	if p.Divergence < 50 || p.ExactRate != 0 || p.Turns != 5 {
		t.Errorf("judge pleaser: %+v, want every turn diverging", p)
	}
	if why := realVerdict(p, s, 1); why == "" {
		t.Errorf("the judge pleaser (%.2f) passes against the seed (%.2f)", p.Divergence, s.Divergence)
	}

	for _, c := range []struct {
		name string
		recs []trajectory.Trajectory
		want string
	}{
		{"no components", []trajectory.Trajectory{recording("a", domain.OS, 2), func() trajectory.Trajectory {
			r := recording("bare", domain.OS, 2)
			r.Components = nil
			return r
		}()}, "trajectory bare has no components"},
		{"no recording of the domain", []trajectory.Trajectory{recording("web", domain.Web, 2), recording("empty", domain.OS, 0)}, "no recorded os trajectory with turns"},
	} {
		dir := t.TempDir()
		writeRecordings(t, dir, c.recs...)
		_, err := NewRealCheck(dir, domain.OS, sim.NewModelBackend(echoModel{}, nil), nil)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), dir) {
			t.Errorf("%s: %v, want %q naming %s", c.name, err, c.want, dir)
		}
	}
}
