package datapipe

import (
	"bufio"
	"io"

	"github.com/agentworld/agentworld/internal/atomicfile"
)

// Output is where a command writes its result: stdout, or a file written
// through atomicfile, so a killed or failed run never leaves a half-written
// file under the final name.
type Output struct {
	*bufio.Writer
	f *atomicfile.File
}

// CreateOutput opens path for writing; "" or "-" means stdout.
func CreateOutput(path string, stdout io.Writer) (*Output, error) {
	if path == "" || path == "-" {
		return &Output{Writer: bufio.NewWriterSize(stdout, 1<<20)}, nil
	}
	f, err := atomicfile.Create(path, nil)
	if err != nil {
		return nil, err
	}
	return &Output{Writer: bufio.NewWriterSize(f, 1<<20), f: f}, nil
}

// Commit flushes the output and puts the file in place.
func (o *Output) Commit() error {
	if err := o.Flush(); err != nil {
		o.Abort()
		return err
	}
	if o.f == nil {
		return nil
	}
	return o.f.Commit()
}

// Abort drops the pending file; the final path is left untouched.
func (o *Output) Abort() {
	if o.f != nil {
		o.f.Abort()
	}
}
