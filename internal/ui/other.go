package ui

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentworld/agentworld/internal/promptlib"
	"github.com/agentworld/agentworld/internal/research"
	"github.com/agentworld/agentworld/internal/rollout"
)

// episode is what the rollout page shows of an episode; the messages and
// turns of a journal line are skipped by the decoder, not kept.
type episode struct {
	GroupID          string             `json:"group_id"`
	SampleIdx        int                `json:"sample_idx"`
	TaskID           string             `json:"task_id"`
	Reward           float64            `json:"reward"`
	RewardComponents map[string]float64 `json:"reward_components"`
	StopReason       string             `json:"stop_reason"`
	NumTurns         int                `json:"num_turns"`
	EnvSessionID     string             `json:"env_session_id"`
	ForkParent       string             `json:"fork_parent"`
	LWMModel         string             `json:"lwm_model"`
}

type rolloutData struct {
	Name     string
	Summary  *rollout.Summary
	Group    string
	Episodes []episode
	Err      string
}

func (s *Server) rollout(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("run")
	dir, err := dirOf(s.o.Rollouts, name, rollout.SummaryFile, rollout.EpisodesFile)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	d := rolloutData{Name: name, Group: r.URL.Query().Get("group")}
	if b, err := os.ReadFile(filepath.Join(dir, rollout.SummaryFile)); err == nil {
		d.Summary = new(rollout.Summary)
		if err := json.Unmarshal(b, d.Summary); err != nil {
			d.Err = fmt.Sprintf("%s: %v", rollout.SummaryFile, err)
			d.Summary = nil
		}
	} else {
		d.Err = fmt.Sprintf("no %s yet (the run has not finished)", rollout.SummaryFile)
	}
	if d.Group != "" {
		if d.Episodes, err = groupEpisodes(filepath.Join(dir, rollout.EpisodesFile), d.Group, s.o.PageSize*20); err != nil {
			s.failErr(w, r, err)
			return
		}
	}
	s.render(w, r, "rollout", "Rollout "+name, d)
}

// groupEpisodes streams the episodes file for one group's episodes (at
// most limit of them).
func groupEpisodes(path, group string, limit int) ([]episode, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	var out []episode
	for n := 1; len(out) < limit; n++ {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			var e episode
			if jerr := json.Unmarshal(line, &e); jerr != nil {
				if errors.Is(err, io.EOF) {
					break // a torn last line of a running rollout
				}
				return nil, fmt.Errorf("%s:%d: %w", path, n, jerr)
			}
			if e.GroupID == group {
				out = append(out, e)
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, err
		}
	}
	return out, nil
}

type researchData struct {
	Name     string
	Journal  *research.Journal
	Versions []string
	A, B     string
	Diff     []diffLine
	Err      string
}

func (s *Server) research(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("run")
	dir, err := dirOf(s.o.Research, name, "journal.jsonl")
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	f, err := os.Open(filepath.Join(dir, "journal.jsonl"))
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	j, err := research.ReadJournal(f)
	f.Close()
	if err != nil {
		s.failErr(w, r, fmt.Errorf("research run %s: %w", name, err))
		return
	}
	d := researchData{Name: name, Journal: j, A: r.URL.Query().Get("a"), B: r.URL.Query().Get("b")}
	lib, err := promptlib.Open(filepath.Join(dir, "templates"))
	if err != nil {
		d.Err = err.Error()
	} else {
		for _, v := range lib.List() {
			d.Versions = append(d.Versions, v.Name)
		}
		if d.A != "" && d.B != "" {
			va, ea := lib.Get(d.A)
			vb, eb := lib.Get(d.B)
			if err := errors.Join(ea, eb); err != nil {
				s.failErr(w, r, fmt.Errorf("%w: %v", errBadRequest, err))
				return
			}
			for _, l := range splitDiff(promptlib.Diff(va, vb)) {
				d.Diff = append(d.Diff, l)
			}
		}
	}
	s.render(w, r, "research", "Research "+name, d)
}

func splitDiff(text string) []diffLine {
	var out []diffLine
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	for sc.Scan() {
		l := sc.Text()
		if l == "" {
			continue
		}
		out = append(out, diffLine{Op: l[:1], Text: l[1:]})
	}
	return out
}
