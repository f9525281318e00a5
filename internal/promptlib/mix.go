package promptlib

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/goccy/go-yaml"
)

// Stages a mixes file declares, in file order.
var Stages = []string{"cpt", "sft", "rl"}

// ErrBadMixes reports an unusable mixes file.
var ErrBadMixes = errors.New("bad template mixes")

// MixEntry is one weighted version of a stage's mix.
type MixEntry struct {
	// Version names the version as [Library.Get] resolves it.
	Version string `yaml:"version"`
	// Weight is the version's relative share; it must be > 0.
	Weight float64 `yaml:"weight"`

	// Resolved is the version Version names, set by ParseMixes.
	Resolved *Version `yaml:"-"`
}

// Mixes are the weighted versions each training stage draws from:
//
//	cpt:
//	  - {version: v0, weight: 1}
//	  - {version: v3, weight: 2}
//	sft: [{version: v3, weight: 1}]
//	rl:  [{version: v3, weight: 1}]
type Mixes struct {
	CPT []MixEntry `yaml:"cpt"`
	SFT []MixEntry `yaml:"sft"`
	RL  []MixEntry `yaml:"rl"`
}

// Stage returns the mix of stage ("cpt", "sft" or "rl").
func (m *Mixes) Stage(stage string) ([]MixEntry, error) {
	switch stage {
	case "cpt":
		return m.CPT, nil
	case "sft":
		return m.SFT, nil
	case "rl":
		return m.RL, nil
	}
	return nil, fmt.Errorf("%w: no stage %q (want cpt, sft or rl)", ErrBadMixes, stage)
}

// LoadMixes reads and checks a mixes file against lib.
func LoadMixes(path string, lib *Library) (*Mixes, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseMixes(b, path, lib)
}

// ParseMixes decodes a mixes file (name is for errors) and checks every
// entry: a known stage key, a version lib resolves, a positive weight, no
// version twice in one stage, at least one stage declared. Errors name the
// field (sft[1].weight).
func ParseMixes(data []byte, name string, lib *Library) (*Mixes, error) {
	var m Mixes
	if err := decodeYAML(data, &m); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w: %v (the file maps cpt, sft and rl to lists of {version, weight})", name, ErrBadMixes, yaml.FormatError(err, false, true))
	}
	total := 0
	for _, stage := range Stages {
		es, _ := m.Stage(stage)
		seen := map[string]int{}
		for i := range es {
			e := &es[i]
			field := fmt.Sprintf("%s[%d]", stage, i)
			if e.Version == "" {
				return nil, fmt.Errorf("%s: %w: %s.version: empty", name, ErrBadMixes, field)
			}
			v, err := lib.Get(e.Version)
			if err != nil {
				return nil, fmt.Errorf("%s: %w: %s.version: %v", name, ErrBadMixes, field, err)
			}
			if !(e.Weight > 0) {
				return nil, fmt.Errorf("%s: %w: %s.weight: must be > 0, got %v", name, ErrBadMixes, field, e.Weight)
			}
			if j, dup := seen[v.ID]; dup {
				return nil, fmt.Errorf("%s: %w: %s.version: %s is already %s[%d]", name, ErrBadMixes, field, e.Version, stage, j)
			}
			seen[v.ID] = i
			e.Resolved = v
		}
		total += len(es)
	}
	if total == 0 {
		return nil, fmt.Errorf("%s: %w: no stage declares a version (want cpt, sft and/or rl)", name, ErrBadMixes)
	}
	return &m, nil
}

// decodeYAML decodes strictly. go-yaml v1.19.2 panics on some malformed
// input ("cpt: ! ", found by FuzzParseMixes); that is bad input, not a
// crash, so the panic comes back as an error.
func decodeYAML(data []byte, v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed YAML: %v", r)
		}
	}()
	return yaml.NewDecoder(bytes.NewReader(data), yaml.DisallowUnknownField()).Decode(v)
}
