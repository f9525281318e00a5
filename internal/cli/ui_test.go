package cli

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeUI starts serve with --ui in process: the UI answers on its own
// address beside the API, shows the sessions of serve's --db (one created
// through the API), refuses a foreign Host, and both stop with the context.
func TestServeUI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts serve")
	}
	db := filepath.Join(t.TempDir(), "sessions.db")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { // ends when ctx is cancelled below
		root := New()
		root.SetErr(pw)
		root.SetOut(io.Discard)
		root.SetArgs([]string{"serve", "--db", db, "--addr", "127.0.0.1:0", "--ui", "127.0.0.1:0"})
		done <- root.ExecuteContext(ctx)
		pw.Close()
	}()
	addrs := make(chan [2]string, 1)
	go func() { // ends when the pipe closes
		sc := bufio.NewScanner(pr)
		var api, ui string
		for sc.Scan() {
			l := sc.Text()
			if rest, ok := strings.CutPrefix(l, "serving on "); ok {
				api = strings.Fields(rest)[0]
			}
			if rest, ok := strings.CutPrefix(l, "agentworld ui on "); ok {
				ui = rest
			}
			if api != "" && ui != "" {
				addrs <- [2]string{api, ui}
				api = "x" // report once
				ui = ""
			}
		}
	}()
	var a [2]string
	select {
	case a = <-addrs:
	case err := <-done:
		t.Fatalf("serve stopped: %v", err)
	case <-time.After(3 * time.Minute):
		t.Fatal("serve --ui did not start")
	}
	resp, err := http.Post(a[0]+"/v1/sessions", "application/json", strings.NewReader(`{"world_id": "quillfern-search"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("create session: %d", resp.StatusCode)
	}
	var body string
	// The session's row is committed by serve's writer, when a loaded
	// machine lets it: poll (a minute at most, a hang guard).
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		resp, err := http.Get(a[1] + "/sessions")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		if strings.Contains(body, "quillfern-search") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(body, "quillfern-search") {
		t.Errorf("the UI lists no session of serve's database:\n%s", body)
	}
	req, _ := http.NewRequest("GET", a[1]+"/", nil)
	req.Host = "evil.example"
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("foreign Host: %d, want 403", resp.StatusCode)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("serve --ui did not stop")
	}
}
