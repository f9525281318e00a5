// Package promptlib keeps versions of the world-model system-prompt
// templates: each version is a complete set of per-domain templates named
// by the hash of its content, with a short name (v0, v3), its parent and
// the reason it was made. The built-in templates are version v0. A library
// directory holds the rest, one JSON file a version, and the stage mixes
// (which versions CPT, SFT and RL data draw from, by weight) are declared
// in one YAML file. Serve, data and research select versions from here, so
// a prompt found better in one place is rendered the same way everywhere.
package promptlib

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	template "github.com/DataDog/datadog-agent/pkg/template/text"

	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// BuiltinName is the name of the version made of the built-in templates.
const BuiltinName = "v0"

// ErrBadVersion reports a version that cannot be used: an unparseable
// file, a template that does not compile, an unknown domain.
var ErrBadVersion = errors.New("bad template version")

// ErrNotFound reports a version reference that names no version (or more
// than one, for an ambiguous id prefix).
var ErrNotFound = errors.New("template version not found")

// Version is one version of the world-model templates.
type Version struct {
	// ID is the hex SHA-256 of the templates (see [ContentID]); two
	// versions with the same text have the same id whatever their names.
	ID string `json:"id"`
	// Name is the short name (v3); unique in a library.
	Name string `json:"name"`
	// Parent is the id of the version this one was edited from; "" for v0.
	Parent string `json:"parent,omitempty"`
	// Rationale says why the version was made (an optimizer's reasoning,
	// a person's note); "" when none was given.
	Rationale string `json:"rationale,omitempty"`
	// Templates maps a domain name to its template text, in the shape
	// [domain.WorldTemplateSource] returns (it defines "prompt" and may
	// define "rules").
	Templates map[string]string `json:"templates"`

	parsed map[domain.Domain]*template.Template
}

// ContentID hashes templates in domain order, each as its name, a NUL, its
// length and its text, so no two different sets share an id.
func ContentID(templates map[string]string) string {
	keys := make([]string, 0, len(templates))
	for k := range templates {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%s\x00%d\x00%s", k, len(templates[k]), templates[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Short is the first 12 hex digits of the id, enough to name it in output.
func (v *Version) Short() string {
	if len(v.ID) < 12 {
		return v.ID
	}
	return v.ID[:12]
}

// Builtin is version v0: the templates compiled into the binary.
func Builtin() *Version {
	v := &Version{Name: BuiltinName, Templates: map[string]string{}}
	for _, d := range domain.All {
		src, err := domain.WorldTemplateSource(d)
		if err != nil {
			panic(err) // the embedded files are part of the binary
		}
		v.Templates[string(d)] = src
	}
	if err := v.compile(); err != nil {
		panic(err)
	}
	return v
}

// compile parses every template, checks the domains and sets ID.
func (v *Version) compile() error {
	if len(v.Templates) == 0 {
		return fmt.Errorf("%w: templates: none", ErrBadVersion)
	}
	v.parsed = map[domain.Domain]*template.Template{}
	for name, src := range v.Templates {
		d, err := domain.Parse(name)
		if err != nil || string(d) != name {
			return fmt.Errorf("%w: templates.%s: not a domain name (want one of %s)", ErrBadVersion, name, domainNames())
		}
		t, err := domain.ParseWorldTemplate(name, src)
		if err != nil {
			return fmt.Errorf("%w: templates.%s: %v", ErrBadVersion, name, err)
		}
		v.parsed[d] = t
	}
	v.ID = ContentID(v.Templates)
	return nil
}

func domainNames() string {
	var s []string
	for _, d := range domain.All {
		s = append(s, string(d))
	}
	return strings.Join(s, ", ")
}

// Domains lists the domains the version has a template for, sorted.
func (v *Version) Domains() []string {
	var s []string
	for k := range v.Templates {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

// Render is the system prompt of domain d with components c under this
// version. Under v0 it is byte-identical to [trajectory.WorldSystemPrompt].
func (v *Version) Render(d domain.Domain, c trajectory.Components) (string, error) {
	return v.RenderParts(d, Parts{
		TaskDescription:       c.TaskDescription,
		ActionSpace:           c.ActionSpace,
		InitialState:          c.InitialState,
		Demonstrations:        trajectory.RenderDemonstrations(c.Demonstrations),
		SimulationInstruction: c.SimulationInstruction,
	})
}

// RenderParts is Render from components already in text form, as
// [Library.Decompose] recovers them from a rendered prompt.
func (v *Version) RenderParts(d domain.Domain, p Parts) (string, error) {
	t, ok := v.parsed[d]
	if !ok {
		return "", fmt.Errorf("template version %s (%s) has no template for domain %s", v.Name, v.Short(), d)
	}
	return domain.RenderWorldTemplate(t, p)
}

// SystemPrompt is Render as a [trajectory.SystemPromptFunc], for the
// simulator and the exporters.
func (v *Version) SystemPrompt() trajectory.SystemPromptFunc { return v.Render }

// With returns a child of v whose template for d is src, named name (""
// leaves it for the library to assign) with the given rationale. Other
// domains keep v's templates.
func (v *Version) With(d domain.Domain, src, name, rationale string) (*Version, error) {
	c := &Version{Name: name, Parent: v.ID, Rationale: rationale, Templates: map[string]string{}}
	for k, s := range v.Templates {
		c.Templates[k] = s
	}
	c.Templates[string(d)] = src
	if err := c.compile(); err != nil {
		return nil, err
	}
	return c, nil
}

// ParseVersion decodes a version file; name is for errors. The stored id
// must match the content, so a hand-edited file is caught, not trusted.
func ParseVersion(data []byte, name string) (*Version, error) {
	var v Version
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", name, ErrBadVersion, err)
	}
	want := v.ID
	if err := v.compile(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if strings.TrimSpace(v.Name) == "" {
		return nil, fmt.Errorf("%s: %w: name: empty", name, ErrBadVersion)
	}
	if want != "" && want != v.ID {
		return nil, fmt.Errorf("%s: %w: id: %s does not match the templates' hash %s (edited by hand? remove the id to rehash)", name, ErrBadVersion, want, v.ID)
	}
	return &v, nil
}

// Marshal encodes v as its library file.
func (v *Version) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
