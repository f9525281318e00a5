package ui

import (
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"

	template "github.com/DataDog/datadog-agent/pkg/template/html"

	"github.com/agentworld/agentworld/internal/agree"
	"github.com/agentworld/agentworld/internal/runview"
	"github.com/agentworld/agentworld/internal/score"
	"github.com/agentworld/agentworld/internal/taxonomy"
)

// pages are the templates, each parsed with the layout.
var pages = []string{"index", "run", "sample", "compare", "agree", "sessions", "session", "rollout", "research", "error"}

var funcs = template.FuncMap{
	"num": func(n runview.Num) string {
		if !n.Known() {
			return "-"
		}
		return fmt.Sprintf("%.2f", float64(n))
	},
	"signed": func(n runview.Num) string {
		if !n.Known() {
			return "-"
		}
		return fmt.Sprintf("%+.2f", float64(n))
	},
	"ci": func(c [2]runview.Num) string {
		if !c[0].Known() || !c[1].Known() {
			return "-"
		}
		return fmt.Sprintf("[%.2f, %.2f]", float64(c[0]), float64(c[1]))
	},
	"anum": func(n agree.Num) string { return n.String() },
	"aci":  func(c agree.CI) string { return c.String() },
	"pct": func(x any) string {
		var f float64
		switch v := x.(type) {
		case float64:
			f = v
		case agree.Num:
			f = float64(v)
		}
		if math.IsNaN(f) {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", 100*f)
	},
	"f2":    func(f float64) string { return nanOr(f) },
	"path":  url.PathEscape,
	"query": url.QueryEscape,
	"title": func(c taxonomy.Category) string { return taxonomy.Titles[c] },
	"cats": func(cs []taxonomy.Category) string {
		s := make([]string, len(cs))
		for i, c := range cs {
			s[i] = string(c)
		}
		return strings.Join(s, " ")
	},
	"dims": func(s *score.Scores) []int {
		if s == nil {
			return nil
		}
		v := s.Values()
		return v[:]
	},
	"time":   func(t time.Time) string { return since(t) },
	"indent": func(n int) string { return strings.Repeat("\u2003", n) },
	"seq": func(a, b int) []int {
		var o []int
		for i := a; i <= b; i++ {
			o = append(o, i)
		}
		return o
	},
	"dimname": func(i int) string { return score.Dimensions[i] },
	"heat": func(share float64) string {
		return fmt.Sprintf("heat%d", min(4, int(share*10)))
	},
	"sel": func(a, b string) bool { return a == b },
	"numstr": func(n runview.Num) string {
		if !n.Known() {
			return ""
		}
		return fmt.Sprintf("%g", float64(n))
	},
	"add": func(a, b int) int { return a + b },
	"neg": func(n runview.Num) bool { return n.Known() && n < 0 },
}

func parseTemplates() (map[string]*template.Template, error) {
	out := map[string]*template.Template{}
	for _, p := range pages {
		t, err := template.New(p).Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/"+p+".html")
		if err != nil {
			return nil, fmt.Errorf("ui template %s: %w", p, err)
		}
		out[p] = t
	}
	return out, nil
}
