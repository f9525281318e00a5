package play

import (
	"context"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/app"
)

func TestPlayInProcess(t *testing.T) {
	a, err := app.New(context.Background(), app.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	var out strings.Builder
	in := strings.NewReader("ls\npython -m pytest -q\n\n")
	if err := Play(context.Background(), Manager{a.Manager}, "python-terminal", in, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"world python-terminal (terminal)", "turn 1 (replay", "1 failed, 4 passed", "episode over"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("play output lacks %q:\n%s", want, out.String())
		}
	}
}
