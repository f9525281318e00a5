package labels

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/agentworld/agentworld/internal/agree"
	"github.com/agentworld/agentworld/internal/score"
)

func TestAddListAndRefuse(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "labels.db")
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	good := Label{Run: "r", Sample: "s1", Model: "m", Labeler: "ann", Scores: score.Scores{Format: 5, Factuality: 4, Consistency: 3, Realism: 2, Quality: 1}}
	if err := d.Add(ctx, &good); err != nil || good.ID == 0 {
		t.Fatalf("add: %v (id %d)", err, good.ID)
	}
	pick := Label{Run: "r", Sample: "s2", Model: "m", TuringPick: agree.PickPrediction}
	if err := d.Add(ctx, &pick); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]Label{
		"no sample":     {Run: "r", Model: "m", Scores: good.Scores},
		"score 6":       {Run: "r", Sample: "s", Model: "m", Scores: score.Scores{Format: 6, Factuality: 1, Consistency: 1, Realism: 1, Quality: 1}},
		"missing dim":   {Run: "r", Sample: "s", Model: "m", Scores: score.Scores{Format: 3}},
		"bad pick":      {Run: "r", Sample: "s", Model: "m", TuringPick: "left"},
		"pick + scores": {Run: "r", Sample: "s", Model: "m", TuringPick: agree.PickTruth, Scores: good.Scores},
	} {
		if err := d.Add(ctx, &bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	ls, err := ReadAgree(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 2 || ls[0].Scores != good.Scores || ls[0].Key != "s1" || ls[1].TuringPick != agree.PickPrediction {
		t.Errorf("labels = %+v", ls)
	}
	if _, err := ReadAgree(ctx, filepath.Join(t.TempDir(), "none.db")); err == nil {
		t.Error("a missing label database is not an error")
	}
}
