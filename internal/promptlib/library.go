package promptlib

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/agentworld/agentworld/internal/atomicfile"
)

// Library is a directory of template versions plus the built-in v0.
type Library struct {
	dir      string
	versions []*Version // v0 first, then by name
}

// PromotedFile names, inside a library directory, the file holding the id
// of the promoted version (the one used when none is selected).
const PromotedFile = "PROMOTED"

// Open reads the library in dir; "" gives one holding only v0. A missing
// directory is an empty library (Add creates it). Every *.json file in dir
// is a version unless it is a JSON object with none of a version's members
// (see versionShaped), such as the metadata of a data export written
// there; a version file that does not parse is an error naming it.
func Open(dir string) (*Library, error) {
	l := &Library{dir: dir, versions: []*Version{Builtin()}}
	if dir == "" {
		return l, nil
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return l, nil
	}
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		if !versionShaped(b) {
			continue
		}
		v, err := ParseVersion(b, p)
		if err != nil {
			return nil, err
		}
		if other := l.byName(v.Name); other != nil {
			return nil, fmt.Errorf("%s: %w: name: %s is also the name of %s", p, ErrBadVersion, v.Name, other.Short())
		}
		l.versions = append(l.versions, v)
	}
	sort.SliceStable(l.versions[1:], func(i, j int) bool {
		a, b := l.versions[1+i], l.versions[1+j]
		return nameOrder(a.Name) < nameOrder(b.Name) || (nameOrder(a.Name) == nameOrder(b.Name) && a.Name < b.Name)
	})
	return l, nil
}

// versionMembers are the members of a version file ([Version]'s JSON).
var versionMembers = []string{"id", "name", "parent", "rationale", "templates"}

// versionShaped says whether b is meant as a version file. A JSON object
// with none of a version's members is something else that landed in the
// directory (the OUT.meta.json of a data export written there, a
// manifest), which the library leaves alone; anything else, a version
// with a typo as much as text that is no JSON object, is read as a version
// so that what is wrong with it is reported.
func versionShaped(b []byte) bool {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil || members == nil {
		return true
	}
	for _, k := range versionMembers {
		if _, ok := members[k]; ok {
			return true
		}
	}
	return false
}

var vName = regexp.MustCompile(`^v([0-9]+)$`)

// nameOrder sorts vN names by N, others after them.
func nameOrder(n string) int {
	if m := vName.FindStringSubmatch(n); m != nil {
		if k, err := strconv.Atoi(m[1]); err == nil {
			return k
		}
	}
	return 1 << 30
}

// Dir is the library's directory ("" for the built-in only library).
func (l *Library) Dir() string { return l.dir }

// List returns every version, v0 first.
func (l *Library) List() []*Version { return append([]*Version(nil), l.versions...) }

func (l *Library) byName(n string) *Version {
	for _, v := range l.versions {
		if v.Name == n {
			return v
		}
	}
	return nil
}

// Get resolves ref: a name (v3), a full id, or an id prefix of at least 6
// hex digits that only one version has. "" means the promoted version, or
// v0 when none was promoted.
func (l *Library) Get(ref string) (*Version, error) {
	if ref == "" {
		return l.Promoted()
	}
	if v := l.byName(ref); v != nil {
		return v, nil
	}
	var found []*Version
	if len(ref) >= 6 {
		for _, v := range l.versions {
			if strings.HasPrefix(v.ID, ref) {
				found = append(found, v)
			}
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return nil, fmt.Errorf("%w: %q (names: %s)", ErrNotFound, ref, strings.Join(l.names(), ", "))
	default:
		return nil, fmt.Errorf("%w: id prefix %q is ambiguous (%d versions)", ErrNotFound, ref, len(found))
	}
}

func (l *Library) names() []string {
	var s []string
	for _, v := range l.versions {
		s = append(s, v.Name)
	}
	return s
}

// byID finds a version by its full id.
func (l *Library) byID(id string) *Version {
	for _, v := range l.versions {
		if v.ID == id {
			return v
		}
	}
	return nil
}

// NextName is the first vN after every vN in the library.
func (l *Library) NextName() string {
	n := 0
	for _, v := range l.versions {
		if k := nameOrder(v.Name); k < 1<<30 && k >= n {
			n = k + 1
		}
	}
	return "v" + strconv.Itoa(n)
}

// Add stores v (from [Version.With]) and returns the stored version: the
// existing one when a version with the same content is already there, so
// adding is idempotent (a resumed run re-adding its candidates makes no
// duplicates). An empty name takes NextName. The parent must be in the
// library.
func (l *Library) Add(v *Version) (*Version, error) {
	if l.dir == "" {
		return nil, errors.New("the built-in template library is read-only: give a library directory")
	}
	if err := v.compile(); err != nil {
		return nil, err
	}
	if old := l.byID(v.ID); old != nil {
		return old, nil
	}
	if v.Parent != "" && l.byID(v.Parent) == nil {
		return nil, fmt.Errorf("%w: parent: %s is not in the library", ErrBadVersion, v.Parent)
	}
	if v.Name == "" {
		v.Name = l.NextName()
	}
	if l.byName(v.Name) != nil {
		return nil, fmt.Errorf("%w: name: %s is taken", ErrBadVersion, v.Name)
	}
	b, err := v.Marshal()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(filepath.Join(l.dir, v.Name+".json"), b, nil); err != nil {
		return nil, err
	}
	l.versions = append(l.versions, v)
	return v, nil
}

// Promote makes ref the version used when none is selected.
func (l *Library) Promote(ref string) (*Version, error) {
	v, err := l.Get(ref)
	if err != nil {
		return nil, err
	}
	if l.dir == "" {
		return nil, errors.New("the built-in template library is read-only: give a library directory")
	}
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		return nil, err
	}
	return v, atomicfile.WriteFile(filepath.Join(l.dir, PromotedFile), []byte(v.ID+"\n"), nil)
}

// Promoted is the promoted version, v0 when none was promoted.
func (l *Library) Promoted() (*Version, error) {
	if l.dir == "" {
		return l.versions[0], nil
	}
	b, err := os.ReadFile(filepath.Join(l.dir, PromotedFile))
	if errors.Is(err, fs.ErrNotExist) {
		return l.versions[0], nil
	}
	if err != nil {
		return nil, err
	}
	id := strings.TrimSpace(string(b))
	if v := l.byID(id); v != nil {
		return v, nil
	}
	return nil, fmt.Errorf("%s: %w: promoted id %s", filepath.Join(l.dir, PromotedFile), ErrNotFound, id)
}
