package world

import (
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// LoadFS loads every spec file (.yaml, .yml, .json) directly under dir of
// fsys, keyed by world name: the embedded example worlds load this way.
func LoadFS(fsys fs.FS, dir string) (map[string]*Spec, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	out := map[string]*Spec{}
	for _, e := range entries {
		ext := strings.ToLower(path.Ext(e.Name()))
		if e.IsDir() || (ext != ".yaml" && ext != ".yml" && ext != ".json") {
			continue
		}
		p := path.Join(dir, e.Name())
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, err
		}
		s, err := Parse(data, p)
		if err != nil {
			return nil, err
		}
		if _, dup := out[s.Name]; dup {
			return nil, fmt.Errorf("%s: world name %q already used by another spec in %s", p, s.Name, dir)
		}
		out[s.Name] = s
	}
	return out, nil
}
