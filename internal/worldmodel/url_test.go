package worldmodel

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The chat endpoint is parsed once, in New; the request built from it must
// name the same URL and Host as http.NewRequest parsing the string would,
// and a base URL that does not parse fails each call with the parse error.
func TestChatURLParsedOnce(t *testing.T) {
	for _, base := range []string{
		"http://localhost:8000/v1",
		"http://localhost:8000/v1/",
		"http://h:/v1",
		"http://[::1]:8000/v1",
		"http://[::1]:/v1",
		"https://api.example.com/v1?key=a%20b",
		"http://user:pw@host/v1",
	} {
		c := New(base, "m", nil)
		if c.chatErr != nil {
			t.Fatalf("%s: %v", base, c.chatErr)
		}
		got := c.newPostTo(context.Background(), c.chatURL, []byte("{}"))
		want, err := http.NewRequest(http.MethodPost, base+"/chat/completions", bytes.NewReader([]byte("{}")))
		if base[len(base)-1] == '/' {
			want, err = http.NewRequest(http.MethodPost, base+"chat/completions", bytes.NewReader([]byte("{}")))
		}
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want.URL.String(), got.URL.String()); diff != "" {
			t.Errorf("%s: URL (-want +got):\n%s", base, diff)
		}
		if want.Host != got.Host {
			t.Errorf("%s: Host %q, want %q", base, got.Host, want.Host)
		}
		if got.URL == c.chatURL {
			t.Errorf("%s: the request shares the client's parsed URL", base)
		}
	}
	c := New("http://bad host/v1", "m", &Options{MaxRetries: -1})
	_, err := c.Complete(context.Background(), Request{})
	_, want := http.NewRequest(http.MethodPost, "http://bad host/v1/chat/completions", nil)
	if err == nil || want == nil || !strings.HasSuffix(err.Error(), want.Error()) {
		t.Errorf("bad base URL: err %v, want %v", err, want)
	}
}

// TestHeaderSharedOnlyWithItsOwnHTTPClient: requests share one header map
// only through the client's own HTTP client, which nothing in net/http
// writes to; a caller's client may have a cookie jar, which adds to each
// request's header, so its requests get their own.
func TestHeaderSharedOnlyWithItsOwnHTTPClient(t *testing.T) {
	own := New("http://localhost:8000/v1", "m", &Options{APIKey: "k"})
	theirs := New("http://localhost:8000/v1", "m", &Options{APIKey: "k", HTTPClient: &http.Client{}})
	want := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json"}, "Authorization": {"Bearer k"}}
	for _, c := range []*Client{own, theirs} {
		a := c.newPostTo(context.Background(), c.chatURL, nil)
		b := c.newPostTo(context.Background(), c.chatURL, nil)
		if diff := cmp.Diff(want, a.Header); diff != "" {
			t.Errorf("header (-want +got):\n%s", diff)
		}
		a.Header.Set("Cookie", "x=1") // what a cookie jar does
		if shared := b.Header.Get("Cookie") != ""; shared != (c == own) {
			t.Errorf("own HTTP client %v: requests share their header %v", c == own, shared)
		}
	}
}
