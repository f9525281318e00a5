package promptlib

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
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
// entry: a known stage key, a version lib resolves, a positive finite
// weight, no version twice in one stage, at least one stage declared.
// Errors name the file, the line and the field ("m.yaml:4: …:
// sft[1].weight: must be > 0").
func ParseMixes(data []byte, name string, lib *Library) (*Mixes, error) {
	var m Mixes
	if err := decodeYAML(data, &m); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w: %v\n%s", name, ErrBadMixes, yaml.FormatError(err, false, true), MixesShape)
	}
	bad := func(path, format string, a ...any) error {
		at := name
		if n := lineOf(data, path); n > 0 {
			at = fmt.Sprintf("%s:%d", name, n)
		}
		return fmt.Errorf("%s: %w: %s", at, ErrBadMixes, fmt.Sprintf(format, a...))
	}
	total := 0
	for _, stage := range Stages {
		es, _ := m.Stage(stage)
		seen := map[string]int{}
		for i := range es {
			e := &es[i]
			field := fmt.Sprintf("%s[%d]", stage, i)
			if e.Version == "" {
				return nil, bad(field, "%s.version: empty", field)
			}
			v, err := lib.Get(e.Version)
			if err != nil {
				return nil, bad(field+".version", "%s.version: %v", field, err)
			}
			if !(e.Weight > 0) || math.IsInf(e.Weight, 0) {
				return nil, bad(field+".weight", "%s.weight: must be a finite number > 0, got %v", field, e.Weight)
			}
			if j, dup := seen[v.ID]; dup {
				return nil, bad(field+".version", "%s.version: %s is already %s[%d]", field, e.Version, stage, j)
			}
			seen[v.ID] = i
			e.Resolved = v
		}
		total += len(es)
	}
	if total == 0 {
		return nil, fmt.Errorf("%s: %w: no stage declares a version\n%s", name, ErrBadMixes, MixesShape)
	}
	return &m, nil
}

// MixesShape shows what a mixes file looks like, for errors about its
// shape.
const MixesShape = `want a mapping of stages (cpt, sft, rl) to lists of {version, weight}, e.g.
cpt:
  - {version: v0, weight: 1}
  - {version: v3, weight: 2}
sft:
  - {version: v3, weight: 1}`

// lineOf is the line of the node at field (sft[1].weight) in data, trying
// its parents when it is absent; 0 when none is found.
func lineOf(data []byte, field string) int {
	f, err := parseYAMLFile(data)
	if err != nil {
		return 0
	}
	for field != "" {
		if p, err := yaml.PathString("$." + field); err == nil {
			if n, err := p.FilterFile(f); err == nil && n != nil && n.GetToken() != nil {
				return n.GetToken().Position.Line
			}
		}
		i := strings.LastIndexAny(field, ".[")
		if i < 0 {
			break
		}
		field = field[:i]
	}
	return 0
}

func parseYAMLFile(data []byte) (f *ast.File, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed YAML: %v", r)
		}
	}()
	return parser.ParseBytes(data, 0)
}

// Pick maps u in [0,1) to an entry of a stage's mix by weight.
func Pick(es []MixEntry, u float64) *MixEntry {
	total := 0.0
	for _, e := range es {
		total += e.Weight
	}
	x := u * total
	for i := range es {
		x -= es[i].Weight
		if x < 0 {
			return &es[i]
		}
	}
	return &es[len(es)-1]
}

// Single is a mix of one version, for a command given one version rather
// than a mixes file.
func Single(v *Version) []MixEntry {
	return []MixEntry{{Version: v.Name, Weight: 1, Resolved: v}}
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
