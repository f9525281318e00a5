package rejection

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestLastCheckpointSkipsWhatOutlivedItsData: after a power loss a
// checkpoint may count bytes its output files no longer hold; resume goes
// back to the last checkpoint the files still reach, and a torn line is
// ignored.
func TestLastCheckpointSkipsWhatOutlivedItsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), ProgressFile)
	lines := `{"next":1,"candidates":100,"sft":40,"pairs":30}
{"next":2,"candidates":200,"sft":40,"pairs":60}
{"next":3,"candidates":300,"sft":80,"pairs":90}
{"next":4,"candid`
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sizes [3]int64
		want  checkpoint
	}{
		{[3]int64{300, 80, 90}, checkpoint{Next: 3, Candidates: 300, SFT: 80, Pairs: 90}},
		{[3]int64{299, 80, 90}, checkpoint{Next: 2, Candidates: 200, SFT: 40, Pairs: 60}},
		{[3]int64{1000, 79, 1000}, checkpoint{Next: 2, Candidates: 200, SFT: 40, Pairs: 60}},
		{[3]int64{50, 50, 50}, checkpoint{}},
	} {
		got, err := lastCheckpoint(path, tc.sizes)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("sizes %v: checkpoint %+v, want %+v", tc.sizes, got, tc.want)
		}
	}
	if got, err := lastCheckpoint(filepath.Join(t.TempDir(), "none"), [3]int64{}); err != nil || got != (checkpoint{}) {
		t.Errorf("missing file: %+v, %v", got, err)
	}
}

// TestReadJournal keeps only what samples from next on need, ignores a torn
// last line and names a corrupt line in the middle.
func TestReadJournal(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, JournalFile)
	lines := `{"key":"k0","seq":0,"beam":1,"answer":{"content":"old"}}
{"key":"k1","seq":1,"beam":1,"answer":{"content":"a","finish_reason":"stop"}}
{"key":"k1","seq":1,"beam":1,"candidate":{"id":"t-1-1","seq":1,"beam":1,"kept":false}}
{"key":"k2","seq":1,"beam":2,"answer":{"content":"b"}}
{"key":"k3","seq":2,"beam":1,"cand`
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	scored, answers, err := readJournal(path, 1)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"k1", "k2"}, slices.Sorted(maps.Keys(answers))); diff != "" {
		t.Errorf("answers (-want +got):\n%s", diff)
	}
	if c := scored[1][1]; c == nil || c.ID != "t-1-1" || c.key != "k1" || len(scored) != 1 {
		t.Errorf("scored %+v", scored)
	}
	bad := strings.Replace(lines, `{"key":"k2"`, `{"kee":"k2"`, 1)
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readJournal(path, 0); err == nil || !strings.Contains(err.Error(), JournalFile+":4") {
		t.Errorf("corrupt line 4: error %v, want one naming it", err)
	}
}
