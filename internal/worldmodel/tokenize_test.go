package worldmodel

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTokenizeURLs(t *testing.T) {
	for in, want := range map[string][]string{
		"http://gpu:8000/v1":  {"http://gpu:8000/tokenize", "http://gpu:8000/v1/tokenize"},
		"http://gpu:8000/v1/": {"http://gpu:8000/tokenize", "http://gpu:8000/v1/tokenize"},
		"http://gpu:8000":     {"http://gpu:8000/tokenize"},
		"https://x/api/v1":    {"https://x/api/tokenize", "https://x/api/v1/tokenize"},
	} {
		if diff := cmp.Diff(want, tokenizeURLs(in)); diff != "" {
			t.Errorf("tokenizeURLs(%q) (-want +got):\n%s", in, diff)
		}
	}
}

// TestTokenizeFindsSGLangPath checks that a server serving /v1/tokenize only
// (SGLang) is found after the root 404s, and that the path is remembered.
func TestTokenizeFindsSGLangPath(t *testing.T) {
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.Path)
		if r.URL.Path != "/v1/tokenize" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`{"tokens":[5,6,7,8],"max_model_len":32768}`))
	}))
	defer srv.Close()
	c := New(srv.URL+"/v1", "wm", nil)
	for i := 0; i < 2; i++ {
		tc, err := c.Tokenize(context.Background(), "a b c d")
		if err != nil || tc != (TokenCount{Count: 4, MaxModelLen: 32768}) {
			t.Fatalf("Tokenize = %+v, %v", tc, err)
		}
	}
	if diff := cmp.Diff([]string{"/tokenize", "/v1/tokenize", "/v1/tokenize"}, paths); diff != "" {
		t.Errorf("paths asked (-want +got):\n%s", diff)
	}
}

// TestTokenize talks to a fake vLLM /tokenize and checks the request it
// receives and how each kind of answer is read.
func TestTokenize(t *testing.T) {
	cases := []struct {
		name    string
		status  int
		answer  string
		want    TokenCount
		wantErr error
	}{
		{"vllm", 200, `{"count":3,"max_model_len":131072,"tokens":[1,2,3]}`, TokenCount{Count: 3, MaxModelLen: 131072}, nil},
		{"no max_model_len", 200, `{"count":0,"tokens":[]}`, TokenCount{}, nil},
		{"tokens only", 200, `{"tokens":[1,2]}`, TokenCount{Count: 2}, nil},
		{"no count", 200, `{"max_model_len":8}`, TokenCount{}, ErrRejected},
		{"not served", 404, `{"detail":"Not Found"}`, TokenCount{}, ErrNoTokenizer},
		{"overloaded", 503, `busy`, TokenCount{}, ErrUnavailable},
		{"bad request", 400, `{"error":"bad"}`, TokenCount{}, ErrRejected},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got tokenizeRequest
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !strings.HasSuffix(r.URL.Path, "/tokenize") || r.Method != http.MethodPost || r.Header.Get("Authorization") != "Bearer k" {
					t.Errorf("request %s %s auth %q", r.Method, r.URL.Path, r.Header.Get("Authorization"))
				}
				_ = json.NewDecoder(r.Body).Decode(&got)
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.answer))
			}))
			defer srv.Close()
			c := New(srv.URL+"/v1", "wm", &Options{APIKey: "k"})
			n, err := c.Tokenize(context.Background(), "ls -la\n")
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil || n != tc.want {
				t.Fatalf("Tokenize = %+v, %v; want %+v", n, err, tc.want)
			}
			if got != (tokenizeRequest{Model: "wm", Prompt: "ls -la\n"}) {
				t.Fatalf("server got %+v", got)
			}
		})
	}
}

func FuzzDecodeTokenize(f *testing.F) {
	f.Add(`{"count":3,"max_model_len":8}`)
	f.Add(`{"count":-1}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, s string) {
		n, err := decodeTokenize([]byte(s))
		if err == nil && n.Count < 0 {
			t.Fatalf("decodeTokenize(%q) = %+v", s, n)
		}
		if err != nil && !strings.Contains(err.Error(), "tokenize") {
			t.Fatalf("error %v does not say what failed", err)
		}
	})
}
