package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"

	"github.com/agentworld/agentworld/internal/score"
)

// stageMeta is one stage's settings as recorded in run.json.
type stageMeta struct {
	Name     string `json:"name"`
	URL      string `json:"url,omitempty"`
	Settings any    `json:"settings,omitempty"`
	// Template is the version the model's system prompts were rendered
	// under; absent when rows were sent as they are.
	Template *templateMeta `json:"template,omitempty"`
	// Prompts is the LLM judge's text, with the SHA-256 of each file read
	// when it is the official one.
	Prompts *score.JudgeText `json:"prompts,omitempty"`
	// Mode, BothOrders, Seed and Reference are a pairwise judge's settings
	// (absent for pointwise).
	Mode       string    `json:"mode,omitempty"`
	BothOrders bool      `json:"both_orders,omitempty"`
	Seed       uint64    `json:"seed,omitempty"`
	Reference  *fileMeta `json:"reference,omitempty"`
}

// fileMeta names an input file of a run by path and content.
type fileMeta struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

type templateMeta struct {
	Name string `json:"name"`
	ID   string `json:"id"`
}

type runMeta struct {
	Data  string     `json:"data"`
	Model *stageMeta `json:"model,omitempty"`
	Judge *stageMeta `json:"judge,omitempty"`
}

// sameStage compares the settings that decide results; the URL is not one
// of them (a server may move).
func sameStage(a, b *stageMeta) bool {
	if a == nil || b == nil {
		return true
	}
	decisive := func(s *stageMeta) stageMeta {
		d := stageMeta{Name: s.Name, Settings: s.Settings, Template: s.Template, Prompts: s.Prompts, Mode: s.Mode, BothOrders: s.BothOrders, Seed: s.Seed}
		if s.Reference != nil {
			d.Reference = &fileMeta{SHA256: s.Reference.SHA256} // the file may move
		}
		return d
	}
	ja, _ := json.Marshal(decisive(a))
	jb, _ := json.Marshal(decisive(b))
	var va, vb any
	_ = json.Unmarshal(ja, &va)
	_ = json.Unmarshal(jb, &vb)
	return reflect.DeepEqual(va, vb)
}

// checkMeta refuses to resume into a directory made with other settings,
// then records this run's settings in run.json.
func (p *pipeline) checkMeta() error {
	o := p.o
	path := filepath.Join(o.Out, RunFile)
	var old runMeta
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &old); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	meta := old
	if abs, err := filepath.Abs(o.Data); err == nil {
		meta.Data = abs
	} else {
		meta.Data = o.Data
	}
	if p.inf != nil {
		st := &stageMeta{Name: o.ModelName, URL: o.ModelURL, Settings: o.Infer}
		if t := o.Template; t != nil {
			st.Template = &templateMeta{Name: t.Name, ID: t.ID}
		}
		if !sameStage(old.Model, st) {
			tmpl := "as they are"
			if t := old.Model.Template; t != nil {
				tmpl = fmt.Sprintf("under template %s (%s)", t.Name, t.ID)
			}
			return fmt.Errorf("%w: %s has predictions of model %q with settings %s, system prompts %s; use another output directory", ErrSettingsChanged, o.Out, old.Model.Name, jsonText(old.Model.Settings), tmpl)
		}
		meta.Model = st
	}
	if p.jd != nil {
		st := &stageMeta{Name: p.jd.name, URL: o.JudgeURL, Settings: o.Judge, Prompts: o.judgeText()}
		if p.jd.rules != nil {
			st.URL, st.Settings, st.Prompts = "", nil, nil
		}
		if p.jd.mode != ModePointwise {
			st.Mode, st.BothOrders = p.jd.mode, p.jd.both
			if p.jd.mode == ModeTuring {
				st.Seed = p.jd.seed
			}
			if p.jd.mode == ModeReference {
				sum, err := fileSHA256(o.Reference)
				if err != nil {
					return err
				}
				st.Reference = &fileMeta{Path: o.Reference, SHA256: sum}
			}
		}
		if !sameStage(old.Judge, st) {
			prompts := "no judge prompts recorded (an older run)"
			if old.Judge.Prompts != nil {
				prompts = "judge prompts " + old.Judge.Prompts.Label
			}
			mode := old.Judge.Mode
			if mode == "" {
				mode = ModePointwise
			}
			prompts += ", judge mode " + mode
			if old.Judge.BothOrders {
				prompts += " in both orders"
			}
			if old.Judge.Reference != nil {
				prompts += " against reference " + old.Judge.Reference.Path + " (sha256 " + old.Judge.Reference.SHA256[:12] + ")"
			}
			return fmt.Errorf("%w: %s was judged by %q with settings %s, %s; use another output directory", ErrSettingsChanged, o.Out, old.Judge.Name, jsonText(old.Judge.Settings), prompts)
		}
		meta.Judge = st
	}
	b, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append(b, '\n'))
}

// judgeText is the LLM judge's text: JudgeText, or agentworld's own.
func (o *Options) judgeText() *score.JudgeText {
	if o.JudgeText != nil {
		return o.JudgeText
	}
	return &score.JudgeText{Label: score.OwnPromptsLabel}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// attachPromptFiles copies the official judge files and their SHA-256 from
// the run.json in dir when it recorded the text the rows were judged with.
func (r *Report) attachPromptFiles(dir string) {
	b, err := os.ReadFile(filepath.Join(dir, RunFile))
	if err != nil {
		return
	}
	var m runMeta
	if json.Unmarshal(b, &m) != nil || m.Judge == nil || m.Judge.Prompts == nil {
		return
	}
	for _, l := range r.JudgePrompts {
		if l == m.Judge.Prompts.Label {
			r.PromptFiles, r.PromptsUnpinned = m.Judge.Prompts.Files, m.Judge.Prompts.Unpinned
		}
	}
}

// RunData returns the data dir recorded in a run directory's run.json, so
// that judging a run's predictions needs no --data.
func RunData(out string) (string, error) {
	b, err := os.ReadFile(filepath.Join(out, RunFile))
	if err != nil {
		return "", err
	}
	var m runMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return "", fmt.Errorf("%s: %w", filepath.Join(out, RunFile), err)
	}
	return m.Data, nil
}
