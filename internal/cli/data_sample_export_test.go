package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/expand"
	"github.com/agentworld/agentworld/internal/rejection"
	"github.com/agentworld/agentworld/internal/trainset"
)

// TestDataSampleExportEachTrainer: recordings → convert → expand → sample
// (the fake teacher and judge of TestDataSampleEndToEnd) → export of the
// sampled directory for every trainer layout and CPT. Each layout holds
// every kept beam with the prompt the teacher saw, byte for byte, the
// teacher's reasoning where that trainer reads thinking, and the sample's
// loss weight where that trainer reads weights.
func TestDataSampleExportEachTrainer(t *testing.T) {
	dir := t.TempDir()
	samplesPath := expandRecordings(t, dir)
	_, srv := newSampleBackend(0)
	defer srv.Close()
	out := filepath.Join(dir, "sampled")
	if _, stderr, err := runBenchCLI(t, sampleArgs(srv.URL, out, samplesPath)...); err != nil {
		t.Fatalf("data sample: %v\n%s", err, stderr)
	}
	sft := readLines[rejection.SFTLine](t, filepath.Join(out, rejection.SFTFile))
	if len(sft) < 3 {
		t.Fatalf("%d kept beams; the test needs more", len(sft))
	}
	const (
		reasoning = "Beam 2 weighs the action; grade 5."
		answer    = "<predicted_observation>\nGRADE-5 screen\n</predicted_observation>"
		inline    = "<think>\n" + reasoning + "\n</think>\n\n" + answer
	)
	byID := map[string]rejection.SFTLine{}
	for _, l := range sft {
		byID[l.ID] = l
	}
	// prompt is what the teacher saw for a kept beam: its line's messages
	// but the target.
	prompt := func(id string) []expand.Message {
		l, ok := byID[id]
		if !ok {
			t.Fatalf("exported id %q is no kept beam", id)
		}
		var p []expand.Message
		for _, m := range l.Messages[:len(l.Messages)-1] {
			p = append(p, expand.Message{Role: m.Role, Content: m.Content})
		}
		return p
	}
	export := func(args ...string) string {
		t.Helper()
		path := filepath.Join(dir, strings.Join(args, "_")+".jsonl")
		args = append([]string{"export", "--progress=false", "--on-error", "fatal", "-o", path}, args...)
		if _, stderr, err := runData(t, append(args, out)...); err != nil {
			t.Fatalf("data %v: %v\n%s", args, err, stderr)
		}
		return path
	}

	t.Run("swift", func(t *testing.T) {
		lines := readLines[trainset.SwiftLine](t, export("--trainer", "swift"))
		if len(lines) != len(sft) {
			t.Fatalf("%d lines, want one per kept beam (%d)", len(lines), len(sft))
		}
		for _, l := range lines {
			var p []expand.Message
			for _, m := range l.Messages[:len(l.Messages)-1] {
				p = append(p, expand.Message{Role: m.Role, Content: m.Content})
				if m.Role == "assistant" && (m.Loss == nil || *m.Loss || m.LossScale == nil || *m.LossScale != 0) {
					t.Errorf("%s: history observation trains: %+v", l.ID, m)
				}
			}
			if d := cmp.Diff(prompt(l.ID), p); d != "" {
				t.Errorf("%s: prompt differs from the teacher's (-teacher +swift):\n%s", l.ID, d)
			}
			last := l.Messages[len(l.Messages)-1]
			if last.Content != inline || last.LossScale == nil || *last.LossScale != byID[l.ID].LossWeight {
				t.Errorf("%s: target %q loss_scale %v, want the inline reasoning at weight %v", l.ID, last.Content, last.LossScale, byID[l.ID].LossWeight)
			}
		}
	})
	t.Run("llamafactory", func(t *testing.T) {
		lines := readLines[trainset.LFLine](t, export("--trainer", "llamafactory"))
		if len(lines) != len(sft) {
			t.Fatalf("%d lines, want %d", len(lines), len(sft))
		}
		for _, l := range lines {
			var p []expand.Message
			for _, m := range l.Messages[:len(l.Messages)-1] {
				if len(m.Content) != 1 || m.LossWeight != 0 {
					t.Errorf("%s: prompt message %+v", l.ID, m)
				}
				p = append(p, expand.Message{Role: m.Role, Content: m.Content[0].Value})
			}
			if d := cmp.Diff(prompt(l.ID), p); d != "" {
				t.Errorf("%s: prompt differs (-teacher +llamafactory):\n%s", l.ID, d)
			}
			last := l.Messages[len(l.Messages)-1]
			want := []trainset.LFContent{{Type: "reasoning", Value: reasoning}, {Type: "text", Value: answer}}
			if d := cmp.Diff(want, last.Content); d != "" || last.LossWeight != byID[l.ID].LossWeight {
				t.Errorf("%s: target weight %v (want %v), content (-want +got):\n%s", l.ID, last.LossWeight, byID[l.ID].LossWeight, d)
			}
		}
	})
	for _, tr := range []string{"llamafactory-v0", "chat"} {
		t.Run(tr, func(t *testing.T) {
			lines := readLines[trainset.ChatLine](t, export("--trainer", tr))
			if len(lines) == 0 || (tr == "chat" && len(lines) != len(sft)) {
				t.Fatalf("%d lines (kept beams %d)", len(lines), len(sft))
			}
			for _, l := range lines {
				beam := l.ID
				var p []expand.Message
				for _, m := range l.Messages[:len(l.Messages)-1] {
					p = append(p, expand.Message{Role: m.Role, Content: m.Content})
				}
				var found bool
				for id, s := range byID {
					if s.Sample == l.ID {
						beam, found = id, true
					}
				}
				if !found {
					t.Fatalf("line %s names no sampled sample", l.ID)
				}
				if d := cmp.Diff(prompt(beam), p); d != "" {
					t.Errorf("%s: prompt differs (-teacher +%s):\n%s", l.ID, tr, d)
				}
				if last := l.Messages[len(l.Messages)-1]; last.Content != inline || l.LossWeight != byID[beam].LossWeight {
					t.Errorf("%s: target %q weight %v", l.ID, last.Content, l.LossWeight)
				}
			}
		})
	}
	t.Run("trl", func(t *testing.T) {
		lines := readLines[trainset.TRLLine](t, export("--trainer", "trl"))
		if len(lines) == 0 {
			t.Fatal("no lines")
		}
		for _, l := range lines {
			if len(l.Completion) != 1 || l.Completion[0].Content != inline {
				t.Errorf("%s: completion %+v", l.ID, l.Completion)
			}
		}
	})
	t.Run("cpt", func(t *testing.T) {
		shards := filepath.Join(dir, "cpt")
		if _, stderr, err := runData(t, "export", "--progress=false", "--on-error", "fatal", "--mode", "cpt", "-o", shards, out); err != nil {
			t.Fatalf("cpt: %v\n%s", err, stderr)
		}
		docs := readLines[trainset.CPTLine](t, filepath.Join(shards, "cpt-00000.jsonl"))
		if len(docs) != len(sft) {
			t.Fatalf("%d documents, want %d", len(docs), len(sft))
		}
		for _, d := range docs {
			l := byID[d.ID]
			if !strings.HasPrefix(d.Text, l.Messages[0].Content) || !strings.HasSuffix(d.Text, "<think>\n"+reasoning+"\n</think>\n\n**Environment Observation:**\nGRADE-5 screen") {
				t.Errorf("document %s: %q", d.ID, d.Text)
			}
		}
	})
	t.Run("rl refused", func(t *testing.T) {
		_, _, err := runData(t, "export", "--mode", "rl", "-o", filepath.Join(dir, "x.parquet"), out)
		if err == nil || !strings.Contains(err.Error(), "sampled set") {
			t.Errorf("rl export of the sampled set: %v", err)
		}
	})
	t.Run("edited line refused", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(out, rejection.SFTFile))
		if err != nil {
			t.Fatal(err)
		}
		bad := filepath.Join(dir, "edited.jsonl")
		if err := os.WriteFile(bad, []byte(strings.Replace(string(b), "### Turn 1", "### Turn 7", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, err = runData(t, "export", "--sampled", "--on-error", "fatal", "-o", filepath.Join(dir, "y.jsonl"), bad)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%s:1: messages[1].content", bad)) {
			t.Errorf("edited line: %v", err)
		}
	})
}
