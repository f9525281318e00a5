package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runData(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	root := New()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(append([]string{"data"}, args...))
	err := root.Execute()
	return out.String(), errb.String(), err
}

func TestDataCommands(t *testing.T) {
	out, _, err := runData(t, "schema")
	if err != nil || !json.Valid([]byte(out)) {
		t.Fatalf("schema: %v", err)
	}
	out, errOut, err := runData(t, "validate", "--progress=false", "../datapipe/testdata/bad.jsonl")
	if err == nil || !strings.Contains(out, "bad.jsonl:2: turns[0].observation:") || !strings.Contains(errOut, "summary:") {
		t.Fatalf("validate: err %v\nout %s\nerr %s", err, out, errOut)
	}
	dir := t.TempDir()
	trajs := filepath.Join(dir, "t.jsonl")
	if _, _, err := runData(t, "convert", "--progress=false", "--on-error", "fatal", "-o", trajs, "../../examples/bench/terminal_test.jsonl"); err != nil {
		t.Fatal(err)
	}
	rl := filepath.Join(dir, "rl.parquet")
	if _, _, err := runData(t, "export", "--progress=false", "--mode", "rl", "-o", rl, trajs); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(rl); err != nil || !bytes.HasPrefix(b, []byte("PAR1")) {
		t.Fatalf("parquet: %v", err)
	}
	// To stdout the RL rows are JSON lines; Parquet needs a file.
	if out, _, err := runData(t, "export", "--progress=false", "--mode", "rl", trajs); err != nil || !strings.HasPrefix(out, `{"data_source":"agentworld/terminal"`) {
		t.Fatalf("rl export to stdout: %v\n%.200s", err, out)
	}
	if _, _, err := runData(t, "export", "--progress=false", "--mode", "rl", "--format", "parquet", trajs); err == nil {
		t.Fatal("rl Parquet to stdout accepted")
	}
	for trainer, field := range map[string]string{"swift": `"loss_scale":`, "llamafactory": `"loss_weight":`, "trl": `"completion":`} {
		out, _, err := runData(t, "export", "--progress=false", "--trainer", trainer, trajs)
		if err != nil || !strings.Contains(out, field) {
			t.Fatalf("export --trainer %s: %v\n%s", trainer, err, out)
		}
	}
	if _, _, err := runData(t, "export", "--progress=false", "--trainer", "axolotl", trajs); err == nil {
		t.Fatal("unknown --trainer accepted")
	}
	cptDir := filepath.Join(dir, "cpt")
	if out, _, err := runData(t, "export", "--progress=false", "--mode", "cpt", "-o", cptDir, trajs); err != nil || !strings.Contains(out, "1 shard(s)") {
		t.Fatalf("export --mode cpt: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(cptDir, "cpt-manifest.json")); err != nil {
		t.Fatal(err)
	}
	lib := filepath.Join(dir, "templates")
	v1 := addVersion(t, lib, "terminal", "Keep the prompt line.")
	mixes := filepath.Join(dir, "mixes.yaml")
	os.WriteFile(mixes, []byte("cpt:\n  - {version: v0, weight: 1}\nsft:\n  - {version: v1, weight: 1}\n"), 0o644)
	for mode, want := range map[string]string{"cpt": `"template":"v0"`, "sft": `"template":"v1","template_id":"` + v1.ID + `"`} {
		out := filepath.Join(dir, mode+"-lib")
		args := []string{"export", "--progress=false", "--mode", mode, "--mixes", mixes, "--template-dir", lib, "-o", out, trajs}
		if _, _, err := runData(t, args...); err != nil {
			t.Fatalf("export --mode %s with mixes: %v", mode, err)
		}
		got, _ := os.ReadFile(out)
		if mode == "cpt" {
			got, _ = os.ReadFile(filepath.Join(out, "cpt-00000.jsonl"))
			if m, _ := os.ReadFile(filepath.Join(out, "cpt-manifest.json")); !strings.Contains(string(m), `"stage": "cpt",
  "mixes": "`+mixes+`"`) {
				t.Fatalf("cpt manifest:\n%s", m)
			}
		} else {
			meta, err := os.ReadFile(out + ".meta.json")
			if err != nil || !strings.Contains(string(meta), `"name": "v1",
      "id": "`+v1.ID+`"`) || !strings.Contains(string(meta), `"stage": "sft"`) {
				t.Fatalf("export metadata: %v\n%s", err, meta)
			}
		}
		if !strings.Contains(string(got), want) {
			t.Fatalf("--mode %s drew from the wrong mix or pinned nothing:\n%.300s", mode, got)
		}
	}
	if _, _, err := runData(t, "export", "--progress=false", "--mode", "rl", "--mixes", mixes, "--template-dir", lib, "-o", filepath.Join(dir, "x.parquet"), trajs); err == nil || !strings.Contains(err.Error(), "declares no rl versions") {
		t.Fatalf("--mode rl with mixes lacking an rl mix: %v", err)
	}
	if _, _, err := runData(t, "export", "--progress=false", "--templates", "examples/prompts.yaml", trajs); !errors.Is(err, errOldTemplates) || !strings.Contains(err.Error(), "{version, weight}") {
		t.Fatalf("--templates: %v", err)
	}
	if _, _, err := runData(t, "export", "--progress=false", "--mode", "cpt", trajs); err == nil {
		t.Fatal("cpt export without --out accepted")
	}
	calibrated := filepath.Join(dir, "calibrated.yaml")
	out, _, err = runData(t, "mask", "--progress=false", "--calibrate", calibrated, "--min-turns", "1", "../datapipe/testdata/small.jsonl")
	if err != nil || !strings.Contains(out, "→") {
		t.Fatalf("mask --calibrate: %v\n%s", err, out)
	}
	if out, _, err := runData(t, "mask", "--progress=false", "--config", calibrated, trajs); err != nil || strings.Count(out, "\n") != 4 {
		t.Fatalf("mask --config calibrated: %v\n%s", err, out)
	}
	if _, _, err := runData(t, "mask", "--progress=false", "--on-error", "bogus", trajs); err == nil {
		t.Fatal("bad --on-error accepted")
	}
	out, _, err = runData(t, "mask", "--progress=false", trajs)
	if err != nil || strings.Count(out, "\n") != 4 {
		t.Fatalf("mask: %v\n%s", err, out)
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".*tmp*"))
	if len(leftovers) > 0 {
		t.Fatalf("temporary files left: %v", leftovers)
	}
}
