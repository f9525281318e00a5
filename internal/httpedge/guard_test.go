package httpedge

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestAdmitOrder: each check refuses with its status, field and code, in
// the order that reads nothing a refused client sent (a foreign Host is
// refused before auth, auth before the content type, the content type
// before the length); an admitted request reaches the handler with its
// body, and a setting's hint ends the message it decided.
func TestAdmitOrder(t *testing.T) {
	g, err := New(Edge{AllowedHosts: []string{"sim.example"}, Hints: map[string]string{SettingAllowedHosts: "set by x --allowed-hosts"}},
		&Options{APIKey: "k3y", MaxBodyBytes: 64})
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		Status      int
		Field, Code string
		Body        string
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ref := g.Admit(w, r); ref != nil {
			w.Header().Set("X-Field", ref.Field)
			w.Header().Set("X-Code", ref.Code)
			w.WriteHeader(ref.Status)
			io.WriteString(w, ref.Message)
			return
		}
		b, _ := io.ReadAll(r.Body)
		io.WriteString(w, "admitted "+string(b))
	}))
	defer srv.Close()
	json, auth := "application/json", "Bearer k3y"
	for _, tc := range []struct {
		name, host, origin, auth, ctype, body string
		want                                  got
	}{
		{"foreign host, no auth, text", "evil.example", "", "", "text/plain", "x", got{403, "Host", "forbidden_host", `field Host: "evil.example" is not a name of this server (set by x --allowed-hosts)`}},
		{"cross origin, no auth", "", "https://evil.example", "", "text/plain", "x", got{403, "Origin", "forbidden_origin", `field Origin: cross-origin requests from "https://evil.example" are not allowed`}},
		{"no auth, text", "", "", "", "text/plain", "x", got{401, "Authorization", "unauthorized", "missing or wrong bearer token"}},
		{"wrong token", "", "", "Bearer nope", json, "{}", got{401, "Authorization", "unauthorized", "missing or wrong bearer token"}},
		{"text, too long", "", "", auth, "text/plain", strings.Repeat("x", 65), got{415, "Content-Type", "unsupported_media_type", `field Content-Type: "text/plain"; send application/json`}},
		{"too long", "", "", auth, json, strings.Repeat("x", 65), got{413, "body", "too_large", "field body: request body of 65 bytes exceeds 64 bytes"}},
		{"allowed host", "sim.example:9", "", auth, "application/vnd.api+json", `{"a":1}`, got{200, "", "", `admitted {"a":1}`}},
		{"same origin", "", srv.URL, auth, json, `{}`, got{200, "", "", `admitted {}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(tc.body))
			if tc.host != "" {
				req.Host = tc.host
			}
			for k, v := range map[string]string{"Origin": tc.origin, "Authorization": tc.auth, "Content-Type": tc.ctype} {
				if v != "" {
					req.Header.Set(k, v)
				}
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if diff := cmp.Diff(tc.want, got{resp.StatusCode, resp.Header.Get("X-Field"), resp.Header.Get("X-Code"), string(b)}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if refused := tc.want.Status != 200; refused != resp.Close {
				t.Errorf("refused %v, connection closed %v", refused, resp.Close)
			}
		})
	}
}

func TestWithHintAndDefaults(t *testing.T) {
	e := Edge{Hints: map[string]string{"MaxBatch": "set by reward serve --max-batch"}}
	if got := e.WithHint("too many", "MaxBatch"); got != "too many (set by reward serve --max-batch)" {
		t.Errorf("WithHint = %q", got)
	}
	for _, setting := range []string{"Other", ""} {
		if got := e.WithHint("too many", setting); got != "too many" {
			t.Errorf("WithHint(%q) = %q", setting, got)
		}
	}
	d := Edge{MaxConns: -1}.WithDefaults()
	if d.MaxConns != -1 || d.ReadTimeout != DefaultReadTimeout || d.WebSocketIdle != DefaultWebSocketIdle {
		t.Errorf("defaults: %+v", d)
	}
	if _, err := New(Edge{AllowedHosts: []string{"https://x"}}, nil); err == nil {
		t.Error("New accepted a host with a scheme")
	}
}

// deadlineRecorder is an http.ResponseWriter that records the write
// deadlines set on it through http.ResponseController.
type deadlineRecorder struct {
	*httptest.ResponseRecorder
	set []time.Time
}

func (d *deadlineRecorder) SetWriteDeadline(t time.Time) error {
	d.set = append(d.set, t)
	return nil
}

// TestWriterDeadline: a reply's header and body, written together, set the
// write deadline once, WriteTimeout ahead; a write after an eighth of
// WriteTimeout renews it; every write has at least 7/8 of WriteTimeout.
func TestWriterDeadline(t *testing.T) {
	// An hour, so that no pause of a loaded machine between two writes
	// reaches an eighth of it; the eighth that must pass before "more" is
	// taken off the writer's clock instead of slept.
	const timeout = time.Hour
	g, err := New(Edge{WriteTimeout: timeout}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := &deadlineRecorder{ResponseRecorder: httptest.NewRecorder()}
	w := g.Writer(rec)
	check := func(what string, calls int) {
		t.Helper()
		start := time.Now()
		switch what {
		case "header":
			w.WriteHeader(http.StatusTeapot)
		default:
			if _, err := w.Write([]byte(what)); err != nil {
				t.Fatal(err)
			}
		}
		if len(rec.set) != calls {
			t.Fatalf("after %s: %d deadlines set, want %d", what, len(rec.set), calls)
		}
		if left := rec.set[len(rec.set)-1].Sub(start); left < timeout-timeout/8 {
			t.Errorf("%s written with %v of its deadline left, want >= %v", what, left, timeout-timeout/8)
		}
	}
	check("header", 1)
	check("body", 1)
	w.Start = w.Start.Add(-(timeout/8 + time.Millisecond))
	check("more", 2)
	if w.Status != http.StatusTeapot || rec.Body.String() != "bodymore" {
		t.Errorf("status %d body %q", w.Status, rec.Body.String())
	}
}

// TestAdmitReadsTheBody: whatever its size and framing, an admitted body
// reaches the handler whole, both through ReadBody and as r.Body, whether
// Admit was given the guard's own Writer (whose Body it reuses) or a plain
// ResponseWriter; a chunked body past the bound is refused as too large
// however it was sent.
func TestAdmitReadsTheBody(t *testing.T) {
	const limit = 128 << 10
	g, err := New(Edge{}, &Options{MaxBodyBytes: limit})
	if err != nil {
		t.Fatal(err)
	}
	for _, own := range []bool{true, false} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if own {
				w = g.Writer(w)
			}
			if ref := g.Admit(w, r); ref != nil {
				w.WriteHeader(ref.Status)
				io.WriteString(w, ref.Code)
				return
			}
			if _, ok := r.Body.(*Body); !ok {
				t.Errorf("r.Body is a %T, want *Body", r.Body)
			}
			peek := make([]byte, 1)
			n, _ := r.Body.Read(peek)
			rest, err := ReadBody(r)
			if err != nil {
				t.Error(err)
			}
			io.WriteString(w, string(peek[:n])+string(rest))
		}))
		for _, tc := range []struct {
			name    string
			size    int
			chunked bool
			status  int
		}{
			{"declared, small", 70, false, 200},
			{"declared, past 64 KiB", 100 << 10, false, 200},
			{"declared, at the bound", limit, false, 200},
			{"chunked, small", 70, true, 200},
			{"chunked, at the bound", limit, true, 200},
			{"chunked, past the bound", limit + 1, true, 413},
		} {
			t.Run(fmt.Sprintf("own writer %v, %s", own, tc.name), func(t *testing.T) {
				body := strings.Repeat("a", tc.size)
				var rd io.Reader = strings.NewReader(body)
				if tc.chunked {
					rd = io.MultiReader(rd) // a reader of unknown length: sent chunked
				}
				resp, err := http.Post(srv.URL, "application/json", rd)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				got, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != tc.status {
					t.Fatalf("status %d (%s), want %d", resp.StatusCode, got, tc.status)
				}
				if tc.status == 200 && string(got) != body {
					t.Errorf("handler read %d bytes, want the %d sent", len(got), len(body))
				}
			})
		}
		srv.Close()
	}
}

// TestPutBack: a body a handler read and puts back reads again whole, as
// r.Body and through ReadBody; behind Admit it is Admit's own Body reset
// (the same buffer, no new Body), on any other request a new Body.
func TestPutBack(t *testing.T) {
	g, err := New(Edge{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, admitted := range []bool{true, false} {
		sent := `{"action":"ls"}`
		r := httptest.NewRequest(http.MethodPost, "http://localhost/step", strings.NewReader(sent))
		r.Header.Set("Content-Type", "application/json")
		if admitted {
			if ref := g.Admit(g.Writer(httptest.NewRecorder()), r); ref != nil {
				t.Fatal(ref)
			}
		}
		before := r.Body
		body, err := ReadBody(r)
		if err != nil || string(body) != sent {
			t.Fatalf("admitted %v: read %q, %v", admitted, body, err)
		}
		PutBack(r, body[1:])
		if (r.Body == before) != admitted {
			t.Errorf("admitted %v: the body put back is Admit's own: %v", admitted, r.Body == before)
		}
		if r.ContentLength != int64(len(sent)-1) {
			t.Errorf("admitted %v: ContentLength %d, want %d", admitted, r.ContentLength, len(sent)-1)
		}
		b, _ := r.Body.(*Body)
		peek := make([]byte, 1)
		if n, _ := r.Body.Read(peek); n != 1 || b == nil {
			t.Fatalf("admitted %v: r.Body is a %T that read %d bytes", admitted, r.Body, n)
		}
		rest, err := ReadBody(r)
		if err != nil || string(peek)+string(rest) != sent[1:] || &rest[0] != &body[2] {
			t.Errorf("admitted %v: read back %q+%q (%v), want %q in the buffer put back", admitted, peek, rest, err, sent[1:])
		}
	}
}

// TestJSONContent: the content types a JSON body may be sent with, the
// usual one decided without parsing and the others by mime.ParseMediaType.
func TestJSONContent(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/json":                true,
		"application/json; charset=utf-8": true,
		"Application/JSON":                true,
		"application/vnd.api+json":        true,
		"application/json;":               true,
		"application/jsonx":               false,
		"text/json":                       false,
		"":                                false,
		"text/plain":                      false,
	} {
		if got := jsonContent(ct); got != want {
			t.Errorf("jsonContent(%q) = %v, want %v", ct, got, want)
		}
	}
}
