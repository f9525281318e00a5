package masking

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"

	"github.com/goccy/go-yaml"
)

//go:embed masking.yaml
var defaultMaskingYAML []byte

// DefaultMaskingConfig returns the shipped masking configuration as YAML, so
// users can start their own from it.
func DefaultMaskingConfig() []byte { return append([]byte(nil), defaultMaskingYAML...) }

// ErrBadConfig reports an unusable masking configuration.
var ErrBadConfig = errors.New("bad masking config")

// Bound is an inclusive range; a nil end is open.
type Bound struct {
	Min *float64 `yaml:"min,omitempty" json:"min,omitempty"`
	Max *float64 `yaml:"max,omitempty" json:"max,omitempty"`
}

func (b *Bound) holds(x float64) bool {
	if b == nil {
		return true
	}
	return (b.Min == nil || x >= *b.Min) && (b.Max == nil || x <= *b.Max)
}

// Conditions bound the statistics of a turn; a nil field does not constrain.
type Conditions struct {
	OL       *Bound `yaml:"ol,omitempty" json:"ol,omitempty"`
	Nov      *Bound `yaml:"nov,omitempty" json:"nov,omitempty"`
	Jac      *Bound `yaml:"jac,omitempty" json:"jac,omitempty"`
	R        *Bound `yaml:"r,omitempty" json:"r,omitempty"`
	ActWords *Bound `yaml:"act_words,omitempty" json:"act_words,omitempty"`
	ObsWords *Bound `yaml:"obs_words,omitempty" json:"obs_words,omitempty"`
}

func (c *Conditions) holds(s *Stats) bool {
	return c.OL.holds(s.OL) && c.Nov.holds(s.Nov) && c.Jac.holds(s.Jac) && c.R.holds(s.R) &&
		c.ActWords.holds(float64(s.ActWords)) && c.ObsWords.holds(float64(s.ObsWords))
}

func (c *Conditions) empty() bool {
	return c.OL == nil && c.Nov == nil && c.Jac == nil && c.R == nil && c.ActWords == nil && c.ObsWords == nil
}

// Category is one loss-masking class: a name, the loss weight of its turns
// and the bounds that select them.
type Category struct {
	Name   string     `yaml:"name" json:"name"`
	Weight float64    `yaml:"weight" json:"weight"`
	About  string     `yaml:"about,omitempty" json:"about,omitempty"`
	When   Conditions `yaml:"when,omitempty" json:"when,omitempty"`
}

// MaskingConfig is an ordered list of categories; a turn takes the first
// whose conditions hold. Domains optionally gives a domain its own bounds
// (`agentworld data mask --calibrate` writes them from corpus quantiles):
// the same category names in the same order, so every domain reports the
// same categories; a domain not listed uses Categories.
type MaskingConfig struct {
	Categories []Category            `yaml:"categories" json:"categories"`
	Domains    map[string][]Category `yaml:"domains,omitempty" json:"domains,omitempty"`
	// byDomain holds the per-domain configs, built by Validate.
	byDomain map[string]*MaskingConfig
}

// For returns the categories a turn of domain uses: the domain's own when
// the (validated) config has them, else c itself.
func (c *MaskingConfig) For(domain string) *MaskingConfig {
	if dc, ok := c.byDomain[domain]; ok {
		return dc
	}
	return c
}

// LoadMaskingConfig reads a YAML (or JSON) config; an empty path gives the
// defaults.
func LoadMaskingConfig(path string) (*MaskingConfig, error) {
	data := defaultMaskingYAML
	name := "default masking config"
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		data, name = b, path
	}
	return ParseMaskingConfig(data, name)
}

// ParseMaskingConfig decodes and checks a config; name is used in errors.
func ParseMaskingConfig(data []byte, name string) (*MaskingConfig, error) {
	var cfg MaskingConfig
	if err := yaml.UnmarshalWithOptions(data, &cfg, yaml.Strict()); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", name, ErrBadConfig, err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &cfg, nil
}

// Validate checks that names are unique, weights are finite and
// non-negative, bounds are ordered and the last category catches all, in
// the top-level list and in every domain's, and that each domain lists the
// top-level category names in order. It also prepares For.
func (c *MaskingConfig) Validate() error {
	if err := validateCategories(c.Categories); err != nil {
		return err
	}
	c.byDomain = nil
	names := c.Names()
	for _, d := range slices.Sorted(maps.Keys(c.Domains)) {
		cats := c.Domains[d]
		if err := validateCategories(cats); err != nil {
			return fmt.Errorf("domains.%s: %w", d, err)
		}
		sub := &MaskingConfig{Categories: cats}
		if got := sub.Names(); !slices.Equal(got, names) {
			return fmt.Errorf("%w: domains.%s lists categories %v, want the top-level %v", ErrBadConfig, d, got, names)
		}
		if c.byDomain == nil {
			c.byDomain = map[string]*MaskingConfig{}
		}
		c.byDomain[d] = sub
	}
	return nil
}

func validateCategories(cats []Category) error {
	if len(cats) == 0 {
		return fmt.Errorf("%w: no categories", ErrBadConfig)
	}
	seen := map[string]bool{}
	for i, cat := range cats {
		field := fmt.Sprintf("categories[%d]", i)
		switch {
		case cat.Name == "":
			return fmt.Errorf("%w: %s.name is empty", ErrBadConfig, field)
		case seen[cat.Name]:
			return fmt.Errorf("%w: %s.name %q repeats", ErrBadConfig, field, cat.Name)
		case cat.Weight < 0 || math.IsNaN(cat.Weight) || math.IsInf(cat.Weight, 0):
			return fmt.Errorf("%w: %s.weight %v must be a finite number ≥ 0", ErrBadConfig, field, cat.Weight)
		}
		seen[cat.Name] = true
		for stat, b := range map[string]*Bound{"ol": cat.When.OL, "nov": cat.When.Nov, "jac": cat.When.Jac, "r": cat.When.R, "act_words": cat.When.ActWords, "obs_words": cat.When.ObsWords} {
			if b != nil && b.Min != nil && b.Max != nil && *b.Min > *b.Max {
				return fmt.Errorf("%w: %s.when.%s: min %v > max %v", ErrBadConfig, field, stat, *b.Min, *b.Max)
			}
		}
	}
	if last := cats[len(cats)-1]; !last.When.empty() {
		return fmt.Errorf("%w: the last category (%s) must have no conditions so every turn is classified", ErrBadConfig, last.Name)
	}
	return nil
}

// Classify returns the index of the first category whose conditions hold.
func (c *MaskingConfig) Classify(s *Stats) int {
	for i := range c.Categories {
		if c.Categories[i].When.holds(s) {
			return i
		}
	}
	return len(c.Categories) - 1
}

// Names lists the category names in config order.
func (c *MaskingConfig) Names() []string {
	out := make([]string, len(c.Categories))
	for i, cat := range c.Categories {
		out[i] = cat.Name
	}
	return out
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
