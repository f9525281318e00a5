package rejection

import (
	"context"
	"errors"
	"io"
	"os"

	"github.com/agentworld/agentworld/internal/datapipe"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// eachLine calls fn for every non-blank line of files, in order.
func eachLine(files []string, maxLine int, fn func(b []byte, file string, line int) error) error {
	if maxLine <= 0 {
		maxLine = datapipe.DefaultMaxLine
	}
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		lr := trajectory.NewLineReader(f, path, maxLine)
		for {
			b, n, err := lr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err == nil {
				err = fn(b, path, n)
			}
			if err != nil {
				f.Close()
				return err
			}
		}
		f.Close()
	}
	return nil
}

// countSamples counts the input's lines for progress.
func countSamples(ctx context.Context, files []string, maxLine int) (int64, error) {
	var n int64
	err := eachLine(files, maxLine, func([]byte, string, int) error { n++; return ctx.Err() })
	return n, err
}

func countLines(path string) int64 {
	var n int64
	_ = eachLine([]string{path}, 0, func([]byte, string, int) error { n++; return nil })
	return n
}
