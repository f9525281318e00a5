package dataset

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/goccy/go-yaml"
)

// Output is where a command writes its result: stdout, or a file written
// through a temporary file beside it and renamed into place by Commit, so
// a killed or failed run never leaves a half-written file under the final
// name.
type Output struct {
	*bufio.Writer
	f    *os.File
	path string
}

// CreateOutput opens path for writing; "" or "-" means stdout.
func CreateOutput(path string, stdout io.Writer) (*Output, error) {
	if path == "" || path == "-" {
		return &Output{Writer: bufio.NewWriterSize(stdout, 1<<20)}, nil
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return nil, err
	}
	return &Output{Writer: bufio.NewWriterSize(f, 1<<20), f: f, path: path}, nil
}

// Commit flushes, syncs and renames the file into place.
func (o *Output) Commit() error {
	if err := o.Flush(); err != nil {
		o.Abort()
		return err
	}
	if o.f == nil {
		return nil
	}
	if err := o.f.Sync(); err != nil {
		o.Abort()
		return err
	}
	if err := o.f.Close(); err != nil {
		os.Remove(o.f.Name())
		return err
	}
	return os.Rename(o.f.Name(), o.path)
}

// Abort drops the temporary file; the final path is left untouched.
func (o *Output) Abort() {
	if o.f != nil {
		o.f.Close()
		os.Remove(o.f.Name())
	}
}

// Encode writes the config as "yaml" or "json".
func (c *MaskingConfig) Encode(w io.Writer, format string) error {
	var b []byte
	var err error
	switch format {
	case "json":
		b, err = json.MarshalIndent(c, "", "  ")
	case "yaml":
		b, err = yaml.Marshal(c)
	default:
		return fmt.Errorf("config format %q: want yaml or json", format)
	}
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
