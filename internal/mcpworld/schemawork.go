package mcpworld

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/agentworld/agentworld/internal/regexlimit"
)

// Validating an instance against a JSON schema can cost far more than
// either's size: a schema that applies one definition twice (allOf of two
// $refs to it) under a property of itself doubles the work at every level
// of the instance, so 122 bytes of tool arguments took 7 s and 200 bytes
// would take hours; a `pattern` is matched against every string it
// applies to, at instructions × bytes. Both come from clients (an inline
// spec's schemas, a call's arguments). [schemaWork] bounds that work
// before the validator runs: it models which subschemas apply to an
// instance node and to its children, and counts, level by level of the
// instance, how many times each subschema can apply (saturating), every
// application costing visitWork and every pattern its instructions times
// the bytes it may read.
const (
	// visitWork is what one application of a subschema to an instance
	// node counts: the validator took about 10 µs for one on a loaded
	// machine (it formats the schema for its error context on every
	// call), against 20 to 60 ns per instruction-byte of matching.
	visitWork = 256
	// maxSchemaWork bounds one validation: 65,536 applications, or
	// regexlimit.DefaultMaxWork instruction-bytes of matching.
	maxSchemaWork = regexlimit.DefaultMaxWork
)

// schemaWork is a schema's applicator graph: node 0 is the root.
type schemaWork struct {
	nodes []workNode
	// rank orders the nodes so that each comes before every node it
	// applies in place.
	rank []int
}

type workNode struct {
	inPlace []int // applied to the same instance node (allOf, $ref, if, …)
	child   []int // applied to child nodes (properties, items, …) and keys (propertyNames)
	// insts are the instructions of the node's patterns, matched against
	// a string instance (pattern) or against each key of an object
	// (patternProperties).
	insts int
}

// Keywords whose value is one subschema or an array or object of them,
// applied to the instance itself or to its children. Keywords match as
// the validator decodes them (encoding/json: any case).
var (
	inPlaceOne   = []string{"not", "if", "then", "else"}
	inPlaceMany  = []string{"allOf", "anyOf", "oneOf"}
	inPlaceMap   = []string{"dependentSchemas", "dependencies"}
	childOne     = []string{"additionalProperties", "unevaluatedProperties", "propertyNames", "items", "additionalItems", "unevaluatedItems", "contains"}
	childMany    = []string{"prefixItems", "items"}
	childMap     = []string{"properties", "patternProperties"}
	unboundedRef = []string{"$dynamicRef", "$recursiveRef", "$dynamicAnchor", "$recursiveAnchor", "$anchor"}
)

// newSchemaWork models raw; false when it cannot bound the schema's work:
// a reference it cannot resolve the way the validator does (anything but a
// JSON pointer into this document, or under a nested $id), or subschemas
// applied in place in a cycle.
func newSchemaWork(raw json.RawMessage) (*schemaWork, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc any
	if dec.Decode(&doc) != nil {
		return nil, false
	}
	b := &workBuilder{doc: doc, index: map[uintptr]int{}, w: &schemaWork{}}
	if _, ok := b.node(doc, true); !ok {
		return nil, false
	}
	if !b.w.acyclicInPlace() {
		return nil, false
	}
	return b.w, true
}

type workBuilder struct {
	doc any
	// index maps a subschema object (by its map's identity: the same
	// whether reached by walking or by a $ref) to its node.
	index map[uintptr]int
	w     *schemaWork
}

// node is the node of the subschema v, built once; root says v is the
// document itself (where $id may stand).
func (b *workBuilder) node(v any, root bool) (int, bool) {
	obj, ok := v.(map[string]any)
	if !ok { // true, false: no subschemas
		b.w.nodes = append(b.w.nodes, workNode{})
		return len(b.w.nodes) - 1, true
	}
	id := reflect.ValueOf(obj).Pointer()
	if i, ok := b.index[id]; ok {
		return i, true
	}
	i := len(b.w.nodes)
	b.index[id] = i
	b.w.nodes = append(b.w.nodes, workNode{})
	var n workNode
	add := func(to *[]int, v any) bool {
		j, ok := b.node(v, false)
		*to = append(*to, j)
		return ok
	}
	for k, v := range obj {
		switch {
		case anyKeyword(k, unboundedRef) || (!root && strings.EqualFold(k, "$id")):
			return i, false
		case strings.EqualFold(k, "$ref"):
			ref, _ := v.(string)
			target, ok := b.resolve(ref)
			if !ok || !add(&n.inPlace, target) {
				return i, false
			}
		case strings.EqualFold(k, "pattern"):
			if s, ok := v.(string); ok {
				k, _ := regexlimit.Insts(s, nil)
				n.insts += k
			}
		}
		for _, set := range []struct {
			to   *[]int
			one  []string
			many []string
			m    []string
		}{{&n.inPlace, inPlaceOne, inPlaceMany, inPlaceMap}, {&n.child, childOne, childMany, childMap}} {
			switch sub := v.(type) {
			case map[string]any:
				if anyKeyword(k, set.one) && !add(set.to, sub) {
					return i, false
				}
				if anyKeyword(k, set.m) {
					for name, s := range sub {
						if !add(set.to, s) {
							return i, false
						}
						if strings.EqualFold(k, "patternProperties") {
							k, _ := regexlimit.Insts(name, nil)
							n.insts += k
						}
					}
				}
			case []any:
				if anyKeyword(k, set.many) {
					for _, s := range sub {
						if !add(set.to, s) {
							return i, false
						}
					}
				}
			case bool:
				if anyKeyword(k, set.one) && !add(set.to, sub) {
					return i, false
				}
			}
		}
	}
	b.w.nodes[i] = n
	return i, true
}

// resolve finds the subschema a $ref names: "#" or a JSON pointer "#/…"
// into this document, whose every step exists exactly once.
func (b *workBuilder) resolve(ref string) (any, bool) {
	if ref == "#" {
		return b.doc, true
	}
	if !strings.HasPrefix(ref, "#/") {
		return nil, false
	}
	v := b.doc
	for _, seg := range strings.Split(ref[2:], "/") {
		seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		switch c := v.(type) {
		case map[string]any:
			// A step that matches other keys without regard to case is
			// ambiguous: the validator's decoding may have kept another.
			found := 0
			for k := range c {
				if strings.EqualFold(k, seg) {
					found++
				}
			}
			if found != 1 || c[seg] == nil {
				return nil, false
			}
			v = c[seg]
		case []any:
			j, err := strconv.Atoi(seg)
			if err != nil || j < 0 || j >= len(c) {
				return nil, false
			}
			v = c[j]
		default:
			return nil, false
		}
	}
	return v, true
}

func anyKeyword(k string, set []string) bool {
	for _, s := range set {
		if strings.EqualFold(k, s) {
			return true
		}
	}
	return false
}

// acyclicInPlace reports whether no subschema applies to the same
// instance node through itself (the validator would not end), and ranks
// the nodes so that each comes before what it applies in place.
func (w *schemaWork) acyclicInPlace() bool {
	state := make([]byte, len(w.nodes)) // 0 new, 1 on the path, 2 done
	post := make([]int, 0, len(w.nodes))
	var visit func(i int) bool
	visit = func(i int) bool {
		switch state[i] {
		case 1:
			return false
		case 2:
			return true
		}
		state[i] = 1
		for _, j := range w.nodes[i].inPlace {
			if !visit(j) {
				return false
			}
		}
		state[i] = 2
		post = append(post, i)
		return true
	}
	for i := range w.nodes {
		if !visit(i) {
			return false
		}
	}
	w.rank = make([]int, len(w.nodes))
	for k, i := range post {
		w.rank[i] = len(post) - k
	}
	return true
}

// levels are an instance's nodes and string bytes by depth (object keys
// count as strings one level down, where propertyNames reads them).
type level struct{ nodes, bytes int64 }

func instanceLevels(v any, d int, out *[]level) {
	for len(*out) <= d+1 {
		*out = append(*out, level{})
	}
	(*out)[d].nodes++
	switch c := v.(type) {
	case string:
		(*out)[d].bytes += int64(len(c))
	case map[string]any:
		for k, e := range c {
			(*out)[d].bytes += int64(len(k)) // patternProperties read keys here
			(*out)[d+1].nodes++              // propertyNames applies to the key
			(*out)[d+1].bytes += int64(len(k))
			instanceLevels(e, d+1, out)
		}
	case []any:
		for _, e := range c {
			instanceLevels(e, d+1, out)
		}
	}
}

// cost bounds the work of validating inst (decoded JSON), saturating just
// past limit: for each level of the instance, the number of ways each
// subschema can apply there, times what it costs on that level's nodes
// and bytes.
func (w *schemaWork) cost(inst any, limit int64) int64 {
	var lv []level
	instanceLevels(inst, 0, &lv)
	sat := func(a, b int64) int64 {
		if a != 0 && b > (limit+1)/a {
			return limit + 1
		}
		return min(a*b, limit+1)
	}
	total := int64(0)
	reach := map[int]int64{0: 1}
	for d := 0; d < len(lv) && len(reach) > 0; d++ {
		// Close over in-place applicators (a DAG): collect what the
		// level's nodes reach in place, then pass the counts down in rank
		// order, so each edge is followed once however many paths share it.
		all := map[int]int64{}
		var seen []int
		var collect func(i int)
		collect = func(i int) {
			if _, ok := all[i]; ok {
				return
			}
			all[i] = 0
			seen = append(seen, i)
			for _, j := range w.nodes[i].inPlace {
				collect(j)
			}
		}
		for i := range reach {
			collect(i)
		}
		for i, n := range reach {
			all[i] = n
		}
		slices.SortFunc(seen, func(a, b int) int { return w.rank[a] - w.rank[b] })
		for _, i := range seen {
			for _, j := range w.nodes[i].inPlace {
				all[j] = min(all[j]+all[i], limit+1)
			}
		}
		next := map[int]int64{}
		for i, n := range all {
			total = min(total+sat(n, sat(lv[d].nodes, visitWork))+sat(n, sat(int64(w.nodes[i].insts), lv[d].bytes)), limit+1)
			if total > limit {
				return total
			}
			for _, j := range w.nodes[i].child {
				next[j] = min(next[j]+n, limit+1)
			}
		}
		reach = next
	}
	return total
}
