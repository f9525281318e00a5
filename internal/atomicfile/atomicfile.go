// Package atomicfile writes output files so that a killed or failed run
// leaves either the previous file or the complete new one under the final
// name, never a torn one. Every command that writes a result file goes
// through it, so the rule lives in one place: write a temporary file beside
// the target, sync it, rename it over the target, sync the directory. A
// target that exists and is not a regular file (/dev/null, /dev/stdout, a
// named pipe) is written in place and never replaced.
package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
)

// Options tunes a write. The zero value is the safe default.
type Options struct {
	// NoSync skips fsync of the file and its directory; zero value syncs.
	// Use it only for data that can be recomputed, such as cache entries.
	NoSync bool
	// Perm is the mode of a newly created file; zero means 0o644.
	Perm os.FileMode
}

// File is an output being written; Commit puts it in place, Abort drops it.
type File struct {
	f      *os.File
	path   string
	direct bool
	opts   Options
	done   bool
}

// Create starts writing path. The directory must exist. nil opts means
// defaults.
func Create(path string, opts *Options) (*File, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Perm == 0 {
		o.Perm = 0o644
	}
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return nil, err
		}
		return &File{f: f, path: path, direct: true, opts: o}, nil
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, err
	}
	return &File{f: f, path: path, opts: o}, nil
}

// Write appends to the pending file.
func (f *File) Write(p []byte) (int, error) { return f.f.Write(p) }

// Name is the final path.
func (f *File) Name() string { return f.path }

// Commit syncs the pending file and renames it over the final path.
func (f *File) Commit() error {
	if f.done {
		return errors.New("atomicfile: commit after commit or abort")
	}
	f.done = true
	if f.direct {
		return f.f.Close()
	}
	tmp := f.f.Name()
	var serr error
	if !f.opts.NoSync {
		serr = f.f.Sync()
	}
	cerr := f.f.Close()
	if err := errors.Join(serr, cerr); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Chmod(tmp, f.opts.Perm); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, f.path); err != nil {
		os.Remove(tmp)
		return err
	}
	if !f.opts.NoSync {
		if d, err := os.Open(filepath.Dir(f.path)); err == nil {
			d.Sync() // best effort: some filesystems refuse directory sync
			d.Close()
		}
	}
	return nil
}

// Abort drops the pending file and leaves the final path untouched. It is
// safe to call after Commit (it then does nothing), so it can be deferred.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	f.f.Close()
	if !f.direct {
		os.Remove(f.f.Name())
	}
}

// WriteFile writes data to path atomically. nil opts means defaults.
func WriteFile(path string, data []byte, opts *Options) error {
	f, err := Create(path, opts)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := f.Write(data); err != nil {
		return err
	}
	return f.Commit()
}

// WriteFrom writes everything r yields to path atomically.
func WriteFrom(path string, r io.Reader, opts *Options) error {
	f, err := Create(path, opts)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := io.Copy(f, r); err != nil {
		return err
	}
	return f.Commit()
}
