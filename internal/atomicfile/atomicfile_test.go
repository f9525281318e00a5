package atomicfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestWriteFileReplacesWhole(t *testing.T) {
	p := filepath.Join(t.TempDir(), "out.json")
	if err := os.WriteFile(p, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, []byte("new content"), nil); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if string(b) != "new content" {
		t.Fatalf("got %q", b)
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v, want 0644", st.Mode().Perm())
	}
	if ents, _ := os.ReadDir(filepath.Dir(p)); len(ents) != 1 {
		t.Fatalf("temporary files left behind: %v", ents)
	}
}

func TestAbortKeepsOldFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "out.jsonl")
	os.WriteFile(p, []byte("old"), 0o644)
	f, err := Create(p, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("half"))
	f.Abort()
	f.Abort() // idempotent
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Fatalf("got %q, want old content kept", b)
	}
	if ents, _ := os.ReadDir(filepath.Dir(p)); len(ents) != 1 {
		t.Fatalf("temporary files left behind: %v", ents)
	}
}

// TestNonRegularTargetIsWrittenNotReplaced guards against renaming a
// temporary file over a device or pipe: `-o /dev/null` once replaced the
// machine's /dev/null with a regular file.
func TestNonRegularTargetIsWrittenNotReplaced(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	got := make(chan string, 1)
	go func() {
		b, _ := os.ReadFile(p)
		got <- string(b)
	}()
	if err := WriteFile(p, []byte("through the pipe"), nil); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s != "through the pipe" {
		t.Fatalf("reader got %q", s)
	}
	st, err := os.Lstat(p)
	if err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("target is no longer a pipe: %v %v", st.Mode(), err)
	}
}
