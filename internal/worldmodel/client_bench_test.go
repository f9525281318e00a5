package worldmodel

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// typicalAnswer is a chat completion as vLLM answers a simulator step.
var typicalAnswer = []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"wm","choices":[{"index":0,"message":{"role":"assistant","content":"<think>t</think><predicted_observation>tests/test_1.py ....F.. [ 80%]\n\"quoted\" <tag>\n</predicted_observation>","reasoning_content":null},"logprobs":null,"finish_reason":"stop","stop_reason":null}],"usage":{"prompt_tokens":1200,"total_tokens":1240,"completion_tokens":40,"prompt_tokens_details":null},"prompt_logprobs":null}`)

// BenchmarkClientComplete measures one simulator step's model call as serve
// makes it: Client.Complete of a session whose history grows by one
// exchange per call (so the request is encoded through the session's
// previous prefix), against a loopback server that does as little as an
// HTTP server can (it reads the body and writes a fixed answer of the shape
// vLLM returns). A session runs 20 steps and then starts over, as episodes
// do. The server's work is in the figures too; what changes between client
// versions is the client's share.
func BenchmarkClientComplete(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(typicalAnswer)))
		w.Write(typicalAnswer)
	}))
	defer srv.Close()
	c := New(srv.URL+"/v1", "wm", nil)
	ctx := WithAffinity(context.Background(), "session-1")
	const steps = 20
	system := Message{Role: "system", Content: strings.Repeat("You simulate a Linux terminal in a Python project. <rules> & details\n", 40)}
	var turns []Message
	for i := 1; i <= steps; i++ {
		turns = append(turns,
			Message{Role: "user", Content: fmt.Sprintf(`[{"keystrokes":"python -m pytest -q tests/test_%d.py\n","duration":5}]`, i)},
			Message{Role: "assistant", Content: strings.Repeat(fmt.Sprintf("tests/test_%d.py ....F.. [ 80%%]\n\"quoted\" <tag>\n", i), 3)})
	}
	hist := make([]Message, 0, 2*steps+1)
	hist = append(hist, system)
	step := 0
	b.ReportAllocs()
	for b.Loop() {
		if step == steps {
			step, hist = 0, hist[:1]
		}
		hist = append(hist, turns[2*step])
		resp, err := c.Complete(ctx, Request{Messages: hist, MaxTokens: 4096})
		if err != nil {
			b.Fatal(err)
		}
		if resp.FinishReason != "stop" {
			b.Fatalf("answer %+v", resp)
		}
		hist = append(hist, turns[2*step+1])
		step++
	}
}

// BenchmarkDecodeAnswer measures reading a typical chat completion answer
// into a Response.
func BenchmarkDecodeAnswer(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeAnswer(typicalAnswer, "wm"); err != nil {
			b.Fatal(err)
		}
	}
}
