package promptlib

import (
	"fmt"
	"strings"
)

// Diff shows, per domain whose template differs, the lines removed from a
// ("-") and added in b ("+") with unchanged lines (" ") between them, from
// a longest common subsequence of lines. "" when a and b are equal.
func Diff(a, b *Version) string {
	var out strings.Builder
	seen := map[string]bool{}
	var doms []string
	for _, v := range []*Version{a, b} {
		for _, d := range v.Domains() {
			if !seen[d] {
				seen[d] = true
				doms = append(doms, d)
			}
		}
	}
	for _, d := range doms {
		x, y := a.Templates[d], b.Templates[d]
		if x == y {
			continue
		}
		fmt.Fprintf(&out, "--- %s %s\n+++ %s %s\n", a.Name, d, b.Name, d)
		out.WriteString(lineDiff(x, y))
	}
	return out.String()
}

// LineDiff is the line diff of x and y: each line prefixed by "-"
// (only in x), "+" (only in y) or " " (in both), from a longest common
// subsequence. Its table is len(x)×len(y) lines: callers with long texts
// bound them first.
func LineDiff(x, y string) string { return lineDiff(x, y) }

// lineDiff is the LCS line diff of x and y. Templates are a few hundred
// lines, so the quadratic table is small.
func lineDiff(x, y string) string {
	a, b := splitLines(x), splitLines(y)
	n, m := len(a), len(b)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out strings.Builder
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			out.WriteString(" " + a[i] + "\n")
			i, j = i+1, j+1
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			out.WriteString("+" + b[j] + "\n")
			j++
		default:
			out.WriteString("-" + a[i] + "\n")
			i++
		}
	}
	return out.String()
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
