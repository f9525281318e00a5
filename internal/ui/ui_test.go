package ui_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/bench"
	"github.com/agentworld/agentworld/internal/labels"
	"github.com/agentworld/agentworld/internal/score"
	"github.com/agentworld/agentworld/internal/ui"
)

func get(t *testing.T, c *http.Client, u string, want int) string {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("GET %s: %d, want %d\n%s", u, resp.StatusCode, want, b)
	}
	return string(b)
}

func mustContain(t *testing.T, what, body string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Errorf("%s lacks %q", what, w)
		}
	}
}

var tokenRE = regexp.MustCompile(`name="token" value="([0-9a-f]+)"`)

func TestPages(t *testing.T) {
	f := newFixture(t)
	srv, _ := f.server(t)
	c := srv.Client()
	home := get(t, c, srv.URL+"/", 200)
	mustContain(t, "home", home, "run-a", "run-b", "model-a", "judge-x", `href="/sessions"`)

	runA := get(t, c, srv.URL+"/runs/run-a", 200)
	mustContain(t, "run-a", runA, `<svg`, "Trust report", "Error taxonomy", "terminal", "page 1 of 3", `id="sample-list"`)
	runB := get(t, c, srv.URL+"/runs/run-b", 200)
	// model-b's planted errors: per domain 2 meta-commentary (i%4==0),
	// 2 lost state (i%4==1), 2 truncated (i%4==2); the unparsable ones
	// (i%4==3) are not classified.
	mustContain(t, "run-b", runB, "24 samples", "answers never parsed", "meta-commentary")
	filtered := get(t, c, srv.URL+"/runs/run-b?cat=truncated", 200)
	if n := strings.Count(filtered, `data-href="/runs/run-b/samples/`); n != 6 {
		t.Errorf("run-b truncated filter lists %d samples, want 6", n)
	}
	text := get(t, c, srv.URL+"/runs/run-b?q=PREAMBLE", 200)
	if n := strings.Count(text, `data-href="/runs/run-b/samples/`); n != 6 {
		t.Errorf("full-text filter lists %d samples, want 6", n)
	}

	cmp := get(t, c, srv.URL+"/compare?a=run-a&b=run-b&sort=delta", 200)
	mustContain(t, "compare", cmp, "24 shared samples match", `class="neg delta"`, "-3.00", `id="tax-compare"`, "<td>0 (0.0%)</td><td>6 (33.3%)</td><td>33.33</td>")
	cmpWeb := get(t, c, srv.URL+"/compare?a=run-a&b=run-b&domain=web&cat=meta_commentary", 200)
	if n := strings.Count(cmpWeb, `<tr data-href=`); n != 2 {
		t.Errorf("compare filtered to web/meta lists %d rows, want 2", n)
	}

	smp := get(t, c, srv.URL+"/runs/run-b/samples/terminal-0", 200)
	mustContain(t, "sample", smp, `class="del">- Sure! Here is the predicted observation:`, `class="ins">&#43; report-0.txt`, "breaks character", "meta-commentary", "rules scorer", "cd /work", `id="label-scores"`, `id="label-turing"`)
	if strings.Contains(strings.ToLower(smp), "meta-commentary") == false {
		t.Error("sample page lacks the taxonomy finding")
	}

	sessions := get(t, c, srv.URL+"/sessions", 200)
	mustContain(t, "sessions", sessions, "sess-root", "sess-fork", "active", "closed")
	sess := get(t, c, srv.URL+"/sessions/sess-root", 200)
	mustContain(t, "session", sess, "echo 1<", "out 10<", "11 ms", "page 1 of 12", "sess-fork", "success 1.00")
	if strings.Contains(sess, "echo 11<") {
		t.Error("the first transcript page holds turn 11")
	}
	last := get(t, c, srv.URL+"/sessions/sess-root?page=12", 200)
	mustContain(t, "last session page", last, "echo 120<")
	get(t, c, srv.URL+"/sessions/nope", 404)
	get(t, c, srv.URL+"/runs/nope", 404)
	get(t, c, srv.URL+"/runs/run-a/samples/nope", 404)
	get(t, c, srv.URL+"/runs/run-a?page=zero", 400)
	ro := get(t, c, srv.URL+"/rollouts/ro-1?group=g1", 200)
	mustContain(t, "rollout", ro, "pass@2 1.00", "add-test", "Episodes of group g1", "success 1.00", `href="/sessions/sess-root"`)
	rs := get(t, c, srv.URL+"/research/rs-1", 200)
	mustContain(t, "research", rs, "listings drift", "47.25", "v0 v1")
	diff := get(t, c, srv.URL+"/research/rs-1?a=v0&b=v1", 200)
	mustContain(t, "research diff", diff, `class="ins">&#43;Keep every file listing exact.`)
	get(t, c, srv.URL+"/research/rs-1?a=v0&b=v9", 400)
	get(t, c, srv.URL+"/rollouts/%2E%2E", 404)
	get(t, c, srv.URL+"/research/%2E%2E%2Fro-1", 404)
	mustContain(t, "home", home, `href="/rollouts/ro-1"`, `href="/research/rs-1"`)
	failed := get(t, c, srv.URL+"/runs/run-b/samples/terminal-3", 200)
	mustContain(t, "failed sample", failed, "No verdict (judge_unparseable)")
	css := get(t, c, srv.URL+"/static/style.css", 200)
	mustContain(t, "css", css, "body{")
}

func postLabel(t *testing.T, c *http.Client, u string, form url.Values, origin string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), "POST", u+"/label", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	c2 := *c
	c2.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c2.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestLabelsAndBadInput(t *testing.T) {
	f := newFixture(t)
	srv, l := f.server(t)
	c := srv.Client()
	page := get(t, c, srv.URL+"/runs/run-b/samples/terminal-1", 200)
	m := tokenRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("sample page has no token")
	}
	form := url.Values{"token": {m[1]}, "run": {"run-b"}, "sample": {"terminal-1"}, "kind": {"scores"}, "labeler": {"ann"},
		"format": {"4"}, "factuality": {"3"}, "consistency": {"4"}, "realism": {"4"}, "quality": {"3"}}
	count := func() int {
		n, err := l.Count(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Cross-origin: refused at the edge, nothing stored.
	if st, body := postLabel(t, c, srv.URL, form, "http://evil.example"); st != 403 || !strings.Contains(body, "Origin") {
		t.Errorf("cross-origin label: %d %s", st, body)
	}
	// Wrong token, unknown sample (with that sample's own token), bad score.
	bad := url.Values{}
	for k, v := range form {
		bad[k] = v
	}
	bad.Set("token", strings.Repeat("0", 64))
	if st, _ := postLabel(t, c, srv.URL, bad, ""); st != 403 {
		t.Errorf("wrong token: %d, want 403", st)
	}
	unknown := url.Values{}
	for k, v := range form {
		unknown[k] = v
	}
	unknown.Set("run", "run-tmp")
	unknown.Set("sample", "nope")
	unknown.Set("token", tokenFor(t, c, srv.URL, f, "nope"))
	if st, body := postLabel(t, c, srv.URL, unknown, ""); st != 404 || !strings.Contains(body, "nope") {
		t.Errorf("unknown sample: %d %s", st, body)
	}
	score6 := url.Values{}
	for k, v := range form {
		score6[k] = v
	}
	score6.Set("quality", "6")
	if st, body := postLabel(t, c, srv.URL, score6, ""); st != 400 || !strings.Contains(body, "quality") {
		t.Errorf("score 6: %d %s", st, body)
	}
	if n := count(); n != 0 {
		t.Fatalf("refused labels stored %d rows", n)
	}
	// A good label, same origin: stored, and the run's trust report
	// shows agreement with people.
	if st, body := postLabel(t, c, srv.URL, form, srv.URL); st != 303 {
		t.Fatalf("label: %d %s", st, body)
	}
	if n := count(); n != 1 {
		t.Fatalf("labels stored = %d, want 1", n)
	}
	run := get(t, c, srv.URL+"/runs/run-b", 200)
	mustContain(t, "run-b after a label", run, "Agreement with people (1 labels)", `data-dim="factuality"`)
	// A Turing pick.
	turing := url.Values{"token": {m[1]}, "run": {"run-b"}, "sample": {"terminal-1"}, "kind": {"turing"}, "nonce": {"abc"}, "pick": {"first"}}
	if st, body := postLabel(t, c, srv.URL, turing, ""); st != 303 {
		t.Fatalf("turing: %d %s", st, body)
	}
	run = get(t, c, srv.URL+"/runs/run-b", 200)
	mustContain(t, "run-b after a pick", run, "of 1 picks")
}

// tokenFor returns a valid token for (run-tmp, key) while the run no
// longer holds key: a label for a sample that went away.
func tokenFor(t *testing.T, c *http.Client, base string, f *fixture, key string) string {
	t.Helper()
	// Tokens are HMACs of (run, key); the test cannot compute one without
	// the server's secret, so it makes a sample with that key exist for a
	// moment in another run directory served by the same source.
	dir := filepath.Join(f.runs, "run-tmp")
	src, err := os.ReadFile(filepath.Join(f.runs, "run-b", bench.JudgedFile))
	if err != nil {
		t.Fatal(err)
	}
	line := strings.SplitN(string(src), "\n", 2)[0]
	line = strings.Replace(line, `"sample":"terminal-0"`, `"sample":"`+key+`"`, 1)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, bench.JudgedFile), []byte(line+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	page := get(t, c, base+"/runs/run-tmp/samples/"+key, 200)
	// Now the run holds another sample and no longer this one.
	if err := os.WriteFile(filepath.Join(dir, bench.JudgedFile), []byte(strings.SplitN(string(src), "\n", 2)[0]+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := tokenRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no token")
	}
	return m[1]
}

func TestTruncatedRunDirectory(t *testing.T) {
	f := newFixture(t)
	jp := filepath.Join(f.runs, "run-b", bench.JudgedFile)
	b, err := os.ReadFile(jp)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(jp, b[:len(b)-40], 0o644); err != nil {
		t.Fatal(err)
	}
	srv, _ := f.server(t)
	c := srv.Client()
	home := get(t, c, srv.URL+"/", 200)
	mustContain(t, "home", home, "run-b", "the last line is cut short")
	page := get(t, c, srv.URL+"/runs/run-b", 500)
	mustContain(t, "truncated run", page, "judged.jsonl:24", "cut short")
	get(t, c, srv.URL+"/runs/run-a", 200)
}

// TestReadOnlyWithoutLabels: without a label database the sample page has
// no form and a label POST is refused, whatever it carries.
func TestReadOnlyWithoutLabels(t *testing.T) {
	f := newFixture(t)
	s, err := ui.New(&ui.Options{Runs: bench.NewViewSource([]string{f.runs}, nil)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	page := get(t, srv.Client(), srv.URL+"/runs/run-a/samples/mcp-1", 200)
	if strings.Contains(page, `id="label-scores"`) || !strings.Contains(page, "read-only") {
		t.Error("a read-only UI shows a label form")
	}
	st, _ := postLabel(t, srv.Client(), srv.URL, url.Values{"run": {"run-a"}, "sample": {"mcp-1"}, "kind": {"scores"}}, "")
	if st/100 != 4 {
		t.Errorf("label POST on a read-only UI: %d", st)
	}
	if _, err := os.Stat(f.labelsPath); err == nil {
		t.Error("a read-only UI created a label database")
	}
}

// TestAgreePage: the runs of two models under two judges, analyzed
// together in the browser's bench agree, with a label counted.
func TestAgreePage(t *testing.T) {
	f := newFixture(t)
	for _, r := range []string{"run-a", "run-b"} {
		b, err := os.ReadFile(filepath.Join(f.runs, r, bench.JudgedFile))
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(f.runs, r+"-y")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, bench.JudgedFile), []byte(strings.ReplaceAll(string(b), `"judge":"judge-x"`, `"judge":"judge-y"`)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv, l := f.server(t)
	lab := labels.Label{Run: "run-a", Sample: "web-2", Model: "model-a", Scores: score.Scores{Format: 5, Factuality: 4, Consistency: 5, Realism: 5, Quality: 4}}
	if err := l.Add(context.Background(), &lab); err != nil {
		t.Fatal(err)
	}
	page := get(t, srv.Client(), srv.URL+"/agree", 200)
	mustContain(t, "agree", page, "2 model(s), 2 judge(s), 3 domain(s); 1 label(s)", "judge-x vs judge-y", `id="rankings"`, `id="human-all"`, "1.000")
	some := get(t, srv.Client(), srv.URL+"/agree?run=run-a&run=run-b", 200)
	mustContain(t, "agree of two runs", some, "2 model(s), 1 judge(s)", "one judge only")
	get(t, srv.Client(), srv.URL+"/agree?run=nope", 404)
}
