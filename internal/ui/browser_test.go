package ui_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentworld/agentworld/internal/testkit"
)

var screenshots = flag.String("screenshots", "", "directory for the browser test's screenshots (default: a temporary one)")

// TestBrowser drives Debian's Chromium through the UI at 1280×800: every
// page loads, runs → compare → sample is followed by clicks and keys, the
// diff and the figures are on screen, and two labels submitted through
// the form change κ on the run page.
func TestBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Chromium")
	}
	bin := testkit.LookPath(t, "chromium", ".ci/setup.d/50-chromium.sh (apt-get install chromium)")
	shots := *screenshots
	if shots == "" {
		shots = t.TempDir()
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	srv, _ := f.server(t)

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.WindowSize(1280, 800),
		chromedp.NoSandbox, chromedp.Flag("disable-gpu", true), chromedp.UserDataDir(t.TempDir()))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 6*time.Minute)
	defer cancelT()

	shot := func(name string) chromedp.Action[chromedp.Void] {
		return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			buf, err := chromedp.CaptureScreenshot()(ctx, tg)
			if err != nil {
				return chromedp.Void{}, err
			}
			return chromedp.Void{}, os.WriteFile(filepath.Join(shots, name+".png"), buf, 0o644)
		}
	}
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	textOf := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	count := func(sel string) int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+"`"+sel+"`"+`).length`))
		if err != nil {
			t.Fatalf("count %s: %v", sel, err)
		}
		return n
	}
	var text string
	// Home: the runs with their scores.
	run("home", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#runs")), shot("1-runs"))
	text = textOf("#runs")
	if !strings.Contains(text, "run-a") || !strings.Contains(text, "model-b") {
		t.Errorf("runs table: %q", text)
	}
	// Keyboard: j selects the first run, Enter opens it.
	run("run page by keys", chromedp.KeyEvent("j"), chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.CSS("#figures")))
	text = textOf("#figures")
	for _, want := range []string{"terminal", "mcp", "web", "format"} {
		if !strings.Contains(text, want) {
			t.Errorf("figures lack %q: %q", want, text)
		}
	}
	run("chart", shot("2-run"))
	if count("figure.chart svg rect") == 0 {
		t.Error("the run page draws no chart bars")
	}
	// The taxonomy and trust report of run-b.
	run("run-b", chromedp.Navigate(srv.URL+"/runs/run-b"), chromedp.WaitVisible(chromedp.CSS("#taxonomy")), chromedp.ScrollIntoView(chromedp.CSS("#trust")), shot("3-run-b-trust"))
	text = textOf("#taxonomy")
	if !strings.Contains(text, "truncated") {
		t.Errorf("taxonomy: %q", text)
	}
	// Runs → compare by the home page's form.
	run("compare", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#compare-go")), chromedp.SetValue(chromedp.CSS(`select[name=b]`), "run-b"),
		chromedp.Click(chromedp.CSS("#compare-go")), chromedp.WaitVisible(chromedp.CSS("#compare-rows")))
	run("sort by delta", chromedp.Click(chromedp.CSS(`a[href*="sort=delta"]`)), chromedp.WaitVisible(chromedp.CSS("#compare-rows")), shot("4-compare"))
	text = textOf("#compare-rows")
	if !strings.Contains(text, "-3.00") {
		t.Errorf("compare rows lack the largest delta: %q", text)
	}
	// Compare → sample (run B's side of the first row).
	run("sample", chromedp.Click(chromedp.CSS(`#compare-rows tbody tr:first-child a.b-link`)), chromedp.WaitVisible(chromedp.CSS("#diff")), shot("5-sample"))
	text = textOf("pre.diff")
	if !strings.Contains(text, "-") || !strings.Contains(text, "+") {
		t.Errorf("the diff shows no removed or added line: %q", text)
	}
	// Labels: none yet, so no κ; one label gives κ; another changes it.
	kappa := func() string {
		run("κ", chromedp.Navigate(srv.URL+"/runs/run-b"), chromedp.WaitVisible(chromedp.CSS("#trust")))
		if count(`#human tr[data-dim=total] .kappa`) == 0 {
			return ""
		}
		return textOf(`#human tr[data-dim=total] .kappa`)
	}
	if k := kappa(); k != "" {
		t.Fatalf("κ before any label: %q", k)
	}
	label := func(sample string, vals [5]string, name string) {
		acts := []chromedp.Action[chromedp.Void]{chromedp.Navigate(srv.URL + "/runs/run-b/samples/" + sample), chromedp.WaitVisible(chromedp.CSS("#label-scores")),
			chromedp.SendKeys(chromedp.CSS(`#label-scores input[name=labeler]`), "tester")}
		for i, dim := range []string{"format", "factuality", "consistency", "realism", "quality"} {
			acts = append(acts, chromedp.Click(chromedp.CSS(`#label-scores input[name=`+dim+`][value="`+vals[i]+`"]`)))
		}
		acts = append(acts, chromedp.ScrollIntoView(chromedp.CSS("#submit-scores")), shot(name), chromedp.Click(chromedp.CSS("#submit-scores")), chromedp.WaitVisible(chromedp.CSS("#saved")))
		run("label "+sample, acts...)
	}
	label("terminal-1", [5]string{"4", "3", "4", "4", "3"}, "6-label-form")
	k1 := kappa()
	label("mcp-0", [5]string{"1", "5", "1", "5", "1"}, "7-label-form-2")
	k2 := kappa()
	run("after labels", chromedp.ScrollIntoView(chromedp.CSS("#human")), shot("8-kappa"))
	if k1 == "" || k2 == "" || k1 == k2 {
		t.Errorf("κ after one label %q, after two %q: want two different values", k1, k2)
	}
	// Sessions: the list, a transcript page, the fork tree.
	run("sessions", chromedp.Navigate(srv.URL+"/sessions"), chromedp.WaitVisible(chromedp.CSS("#session-list")), shot("9-sessions"),
		chromedp.Click(chromedp.CSS(`a[href="/sessions/sess-root"]`)), chromedp.WaitVisible(chromedp.CSS("#turns")), shot("10-session"))
	text = textOf("#forks")
	if !strings.Contains(text, "sess-fork") {
		t.Errorf("fork tree: %q", text)
	}
	run("next transcript page by key", chromedp.KeyEvent("n"), chromedp.WaitVisible(chromedp.CSS(`a[rel=prev]`)))
	text = textOf("#turns")
	if !strings.Contains(text, "echo 11") {
		t.Errorf("page 2 of the transcript: %q", text[:min(200, len(text))])
	}
	// Rollout groups and a research run's template diff.
	run("rollout", chromedp.Navigate(srv.URL+"/"), chromedp.Click(chromedp.CSS(`a[href="/rollouts/ro-1"]`)), chromedp.WaitVisible(chromedp.CSS("#groups")),
		chromedp.KeyEvent("j"), chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.CSS("#episodes")), shot("11-rollout"))
	if text = textOf("#episodes"); !strings.Contains(text, "terminated") {
		t.Errorf("episodes: %q", text)
	}
	run("research", chromedp.Navigate(srv.URL+"/"), chromedp.Click(chromedp.CSS(`a[href="/research/rs-1"]`)), chromedp.WaitVisible(chromedp.CSS("#iterations")),
		chromedp.Click(chromedp.CSS(`#iterations a[href*="a=v0"]`)), chromedp.WaitVisible(chromedp.CSS("pre.diff")), shot("12-research"))
	if text = textOf("pre.diff"); !strings.Contains(text, "+Keep every file listing exact.") {
		t.Errorf("template diff: %q", text[:min(300, len(text))])
	}
	// The judges of every run together, with the labels given above.
	run("agree", chromedp.Navigate(srv.URL+"/"), chromedp.Click(chromedp.CSS(`nav a[href="/agree"]`)), chromedp.WaitVisible(chromedp.CSS("#rankings")), shot("14-agree"))
	if text = textOf("#rankings"); !strings.Contains(text, "model-a") || !strings.Contains(text, "model-b") {
		t.Errorf("rankings: %q", text)
	}
	// A failed sample says why it has no verdict.
	run("failed sample", chromedp.Navigate(srv.URL+"/runs/run-b/samples/terminal-3"), chromedp.WaitVisible(chromedp.CSS("#verdict")), shot("13-failed-sample"))
	if text = textOf("#verdict"); !strings.Contains(text, "No verdict") {
		t.Errorf("failed sample: %q", text)
	}
	t.Logf("screenshots in %s", shots)
}
