package worldgen

import (
	"slices"
	"strings"
)

func newStats() *Stats { return &Stats{Reasons: map[string]int{}} }

// rungIndex is the position of a rung in [Rungs].
func rungIndex(r string) int {
	if i := slices.Index(Rungs, r); i >= 0 {
		return i
	}
	return len(Rungs)
}

// add counts a verdict: a world rejected at rung k survived the rungs
// before k; an accepted world survived all; tasks likewise.
func (s *Stats) add(v verdict) {
	s.Candidates++
	s.SimSteps += v.SimSteps
	if len(s.Worlds) == 0 {
		for _, r := range Rungs {
			s.Worlds = append(s.Worlds, RungCount{Rung: r})
			s.Tasks = append(s.Tasks, RungCount{Rung: r})
		}
	}
	wk := len(Rungs)
	if v.Rejected != nil {
		wk = rungIndex(v.Rejected.Rung)
		s.reason(v.Rejected.Rung + ": " + clip(v.Rejected.Reason, 80))
	}
	for i := range s.Worlds {
		switch {
		case i < wk:
			s.Worlds[i].Survived++
		case i == wk:
			s.Worlds[i].Rejected++
		}
	}
	for _, tr := range v.TaskRej {
		k := rungIndex(tr.Rung)
		s.reason("task " + tr.Rung + ": " + clip(tr.Reason, 80))
		for i := range s.Tasks {
			switch {
			case i < k:
				s.Tasks[i].Survived++
			case i == k:
				s.Tasks[i].Rejected++
			}
		}
	}
	if v.Accepted {
		s.AcceptedWorlds++
		s.AcceptedTasks += v.Tasks
		for i := range s.Tasks {
			s.Tasks[i].Survived += v.Tasks
		}
	}
}

// spent counts a generator answer.
func (s *Stats) spent(a answerLine) {
	s.GeneratorRequests++
	s.PromptTokens += int64(a.PromptTokens)
	s.CompletionTokens += int64(a.CompletionTokens)
}

// maxReasons bounds the distinct reasons Stats keeps (a reason may name
// a world); past it they are counted under their rung alone.
const maxReasons = 200

func (s *Stats) reason(r string) {
	if _, ok := s.Reasons[r]; !ok && len(s.Reasons) >= maxReasons {
		r, _, _ = strings.Cut(r, ":")
		r += ": (other reasons)"
	}
	s.Reasons[r]++
}

func (s *Stats) finish() *Stats {
	if len(s.Worlds) == 0 {
		for _, r := range Rungs {
			s.Worlds = append(s.Worlds, RungCount{Rung: r})
			s.Tasks = append(s.Tasks, RungCount{Rung: r})
		}
	}
	return s
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
