package judge

import (
	"fmt"
	"sort"
	"strings"
)

// Template is a judge user template in Python str.format syntax: literal
// text with {name} fields, "{{" and "}}" standing for single braces. Only
// bare field names are understood; conversions, format specs, indexing and
// positional fields are refused when the template is read.
type Template struct {
	// Name is the template's name (JUDGE_USER_PROMPT, …) and Source where it
	// was read (file, or "agentworld" for the embedded text).
	Name, Source string
	parts        []tmplPart
}

type tmplPart struct {
	text  string // literal text, or the field name when field is set
	field bool
}

// parseTemplate parses s, the value of template name read from source
// (lineAt maps an offset of s to a source line for errors; nil reports
// offsets instead). Every field must be one of allowed; every name in
// required must appear.
func parseTemplate(source, name, s string, lineAt func(int) int, allowed, required []string) (*Template, error) {
	where := func(off int) string {
		if lineAt != nil {
			return fmt.Sprintf("%s:%d: %s", source, lineAt(off), name)
		}
		return fmt.Sprintf("%s: %s (offset %d)", source, name, off)
	}
	ok := map[string]bool{}
	for _, a := range allowed {
		ok[a] = true
	}
	t := &Template{Name: name, Source: source}
	seen := map[string]bool{}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			t.parts = append(t.parts, tmplPart{text: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch c {
		case '{':
			if i+1 < len(s) && s[i+1] == '{' {
				lit.WriteByte('{')
				i += 2
				continue
			}
			end := strings.IndexByte(s[i+1:], '}')
			if end < 0 {
				return nil, fmt.Errorf("%s: single '{' with no closing '}' (write {{ for a literal brace)", where(i))
			}
			field := s[i+1 : i+1+end]
			if strings.ContainsAny(field, "{!:.[") || !isIdent(field) {
				return nil, fmt.Errorf("%s: placeholder {%s} is not a bare name (only {name} fields are supported)", where(i), field)
			}
			if !ok[field] {
				return nil, fmt.Errorf("%s: unknown placeholder {%s} (this template may use %s)", where(i), field, braceList(allowed))
			}
			flush()
			t.parts = append(t.parts, tmplPart{text: field, field: true})
			seen[field] = true
			i += end + 2
		case '}':
			if i+1 < len(s) && s[i+1] == '}' {
				lit.WriteByte('}')
				i += 2
				continue
			}
			return nil, fmt.Errorf("%s: single '}' (write }} for a literal brace)", where(i))
		default:
			lit.WriteByte(c)
			i++
		}
	}
	flush()
	var missing []string
	for _, r := range required {
		if !seen[r] {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s: placeholder %s missing: the judge would never see it", where(0), braceList(missing))
	}
	return t, nil
}

func isIdent(s string) bool {
	if s == "" || !isIdentStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isIdentChar(s[i]) {
			return false
		}
	}
	return true
}

func braceList(names []string) string {
	n := append([]string(nil), names...)
	sort.Strings(n)
	for i := range n {
		n[i] = "{" + n[i] + "}"
	}
	return strings.Join(n, ", ")
}

// Format fills the template as str.format(**fields) does. Every field of
// the template must be in fields (parsing guaranteed the names are known).
func (t *Template) Format(fields map[string]string) string {
	size := 0
	for _, p := range t.parts {
		if p.field {
			size += len(fields[p.text])
		} else {
			size += len(p.text)
		}
	}
	var b strings.Builder
	b.Grow(size)
	for _, p := range t.parts {
		if p.field {
			b.WriteString(fields[p.text])
		} else {
			b.WriteString(p.text)
		}
	}
	return b.String()
}
