package workqueue

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// goodDigest is a well-formed digest (of nothing).
var goodDigest = digestOf(nil)

// FuzzDecodeStored: what the results bucket, the jobs bucket and an item
// message's header hold is read without panicking; what is taken is
// consistent (a reference is well formed and never besides an inline
// value) and encodes back to what decodes the same.
func FuzzDecodeStored(f *testing.F) {
	for _, s := range []string{
		`{"id":"a","payload":"eA==","worker":"w","deliveries":1}`,
		`{"id":"a","object":{"name":"result/YQ/00","size":3,"digest":"` + goodDigest + `"},"worker":"w","deliveries":2}`,
		`{"id":"a","object":{"name":"n","size":3,"digest":"SHA-256=xx"}}`,
		`{"id":"a","object":{"name":"","size":3,"digest":"` + goodDigest + `"}}`,
		`{"id":"a","payload":"eA==","object":{"name":"n","size":3,"digest":"` + goodDigest + `"}}`,
		`{"id":"a","error":"boom","object":{"name":"n","size":3,"digest":"` + goodDigest + `"}}`,
		`{"id":"j","kind":"k","spec":{"x":1}}`,
		`{"id":"j","kind":"k","spec_object":{"name":"spec/x","size":9,"digest":"` + goodDigest + `"}}`,
		`{"id":"j","kind":"k","spec":1,"spec_object":{"name":"spec/x","size":9,"digest":"` + goodDigest + `"}}`,
		`{"name":"item/YQ/x","size":70000,"digest":"` + goodDigest + `"}`,
		`{"name":"n","size":-1,"digest":"` + goodDigest + `"}`, `null`, `{}`, `[`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := decodeResult(b); err == nil {
			if r.Object != nil && (r.Object.check() != nil || len(r.Payload) > 0 || r.Err != "") {
				t.Fatalf("decodeResult(%q) took %+v", b, r)
			}
			again, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			r2, err := decodeResult(again)
			if err != nil {
				t.Fatalf("decodeResult refuses its own encoding %s: %v", again, err)
			}
			if d := cmp.Diff(r, r2, cmp.Comparer(func(a, b []byte) bool { return string(a) == string(b) })); d != "" {
				t.Fatalf("result round trip of %q (-first +second):\n%s", b, d)
			}
		}
		if d, err := decodeJob(b); err == nil {
			if d.SpecObject != nil && (d.SpecObject.check() != nil || len(d.Spec) > 0) {
				t.Fatalf("decodeJob(%q) took %+v", b, d)
			}
		}
		if ref, err := decodeRef(b); err == nil {
			if ref.Name == "" || !strings.HasPrefix(ref.Digest, digestPrefix) {
				t.Fatalf("decodeRef(%q) took %+v", b, ref)
			}
			again, _ := json.Marshal(ref)
			if ref2, err := decodeRef(again); err != nil || ref2 != ref {
				t.Fatalf("reference round trip of %q: %+v, %v", b, ref2, err)
			}
		}
	})
}

// TestDecodeStoredTakes: the decoders take what the queue writes and
// refuse the malformed cases, so the fuzz properties check something.
func TestDecodeStoredTakes(t *testing.T) {
	ref := `{"name":"result/YQ/00","size":3,"digest":"` + goodDigest + `"}`
	for _, c := range []struct {
		in   string
		want bool
	}{
		{`{"id":"a","payload":"eA==","worker":"w","deliveries":1}`, true},
		{`{"id":"a","object":` + ref + `,"worker":"w","deliveries":2}`, true},
		{`{"id":"a","payload":"eA==","object":` + ref + `}`, false},
		{`{"id":"a","error":"boom","object":` + ref + `}`, false},
		{`{"id":"a","object":{"name":"n","size":3,"digest":"SHA-256=xx"}}`, false},
		{`{"id":"a","object":{"name":"n","size":3,"digest":"MD5=` + strings.TrimPrefix(goodDigest, digestPrefix) + `"}}`, false},
		{`{"id":"a","object":{"size":3,"digest":"` + goodDigest + `"}}`, false},
		{`[`, false},
	} {
		_, err := decodeResult([]byte(c.in))
		if (err == nil) != c.want {
			t.Errorf("decodeResult(%s) = %v, want taken %v", c.in, err, c.want)
		}
	}
	if _, err := decodeJob([]byte(`{"id":"j","kind":"k","spec_object":` + ref + `}`)); err != nil {
		t.Errorf("decodeJob of a spec object: %v", err)
	}
	if _, err := decodeJob([]byte(`{"id":"j","kind":"k","spec":{},"spec_object":` + ref + `}`)); err == nil {
		t.Error("decodeJob took a spec besides a spec object")
	}
	if _, err := decodeRef([]byte(ref)); err != nil {
		t.Errorf("decodeRef(%s): %v", ref, err)
	}
}
