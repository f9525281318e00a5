package cli

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/store"
	"github.com/agentworld/agentworld/internal/testkit"
)

// TestHelperServeOwner is the first serve of TestSecondServeOnOneDBIsRefused,
// run in a process of its own: `agentworld serve --db $AGENTWORLD_TEST_OWNER_DB`
// with its log on stderr, until killed (or, as a safety net for an orphan,
// ten minutes: a shorter one could end the owner before a slow parent's
// checks, which need it alive).
func TestHelperServeOwner(t *testing.T) {
	db := testkit.ChildEnv(t, "AGENTWORLD_TEST_OWNER_DB", "TestSecondServeOnOneDBIsRefused")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root := New()
	root.SetErr(os.Stderr)
	root.SetArgs([]string{"serve", "--db", db, "--addr", "127.0.0.1:0"})
	_ = root.ExecuteContext(ctx)
}

// TestSecondServeOnOneDBIsRefused runs two real serve processes on one
// --db: the second stops at once with an error naming the database and the
// first's pid, the read-only `world check` works beside the owner, and once
// the owner is killed with SIGKILL (no clean-up) a new serve starts.
func TestSecondServeOnOneDBIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a serve process")
	}
	db := filepath.Join(t.TempDir(), "sessions.db")
	owner := testkit.Child("TestHelperServeOwner", "AGENTWORLD_TEST_OWNER_DB="+db)
	stderr, err := owner.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	testkit.StartChild(t, owner)
	serving := make(chan bool, 1)
	go func() { // ends when the owner's stderr closes (it exits or is killed)
		sc := bufio.NewScanner(stderr)
		found := false
		for sc.Scan() {
			if !found && strings.HasPrefix(sc.Text(), "serving on ") {
				found = true
				serving <- true
			}
		}
		if !found {
			serving <- false
		}
	}()
	select {
	case ok := <-serving:
		if !ok {
			t.Fatal("the first serve exited before serving")
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("the first serve did not start")
	}

	_, _, err = runCLI(t, "serve", "--db", db, "--addr", "127.0.0.1:0")
	want := "session database " + db + " is in use"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(owner.Process.Pid)) {
		t.Fatalf("second serve: %v, want an error saying %q and naming pid %d", err, want, owner.Process.Pid)
	}
	if _, _, err := runCLI(t, "world", "check", "quillfern-search", "--db", db); err != nil {
		t.Errorf("read-only world check beside the owner: %v", err)
	}

	if err := owner.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = owner.Wait()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { // ends when ctx is cancelled below
		root := New()
		root.SetErr(io.Discard)
		root.SetArgs([]string{"serve", "--db", db, "--addr", "127.0.0.1:0"})
		done <- root.ExecuteContext(ctx)
	}()
	// The new owner writes its pid into the lock file once it holds it.
	lock := db + store.LockSuffix
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if b, _ := os.ReadFile(lock); strings.TrimSpace(string(b)) == strconv.Itoa(os.Getpid()) {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("serve after the owner was killed: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("serve after the owner was killed did not take the lock")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("serve stopped with %v", err)
	}
}
