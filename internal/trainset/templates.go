package trainset

import (
	"encoding/json"

	"github.com/agentworld/agentworld/internal/datapipe"
	"github.com/agentworld/agentworld/internal/expand"
)

// TemplatePin is the "name@id" form a template version is counted under
// in summaries and manifests; "" (a trajectory's own prompt) when name is
// "".
func TemplatePin(name, id string) string {
	if name == "" {
		return ""
	}
	return name + "@" + id
}

// ExportMeta is the metadata of an export, written beside it
// (MetaPath): the template versions its system prompts were drawn from and
// rendered with, so an export pins the exact prompts it used.
type ExportMeta struct {
	// Format is what was written (samples, swift, verl, ...).
	Format string `json:"format"`
	// Stage and Mixes name the stage mix and the file it came from; empty
	// when one version was given or none.
	Stage string `json:"stage,omitempty"`
	Mixes string `json:"mixes,omitempty"`
	// Versions lists every version of the mix (or the one given, or the
	// default that rendered components), with the lines that used it.
	Versions []PinnedVersion `json:"versions"`
	// OwnPrompt counts lines that kept a trajectory's own prompt.
	OwnPrompt int64             `json:"own_prompt_lines"`
	Summary   *datapipe.Summary `json:"summary"`
}

// PinnedVersion is one template version an export drew from.
type PinnedVersion struct {
	Name string `json:"name"`
	ID   string `json:"id"`
	// Weight is its weight in the mix; 0 for the default version that
	// renders components when no mix was given.
	Weight float64 `json:"weight,omitempty"`
	// Lines counts the written lines that pin it.
	Lines int64 `json:"lines"`
}

// NewExportMeta describes an export made with xo that ended with sum.
func NewExportMeta(format string, xo *expand.ExpandOptions, sum *datapipe.Summary) *ExportMeta {
	m := &ExportMeta{Format: format, Summary: sum, Versions: []PinnedVersion{}}
	listed := map[string]bool{}
	if xo != nil {
		for _, e := range xo.Templates {
			pin := TemplatePin(e.Resolved.Name, e.Resolved.ID)
			listed[pin] = true
			m.Versions = append(m.Versions, PinnedVersion{Name: e.Resolved.Name, ID: e.Resolved.ID, Weight: e.Weight, Lines: sum.Templates[pin]})
		}
	}
	var pinned int64
	for _, n := range sum.Templates {
		pinned += n
	}
	if xo == nil || xo.Templates == nil {
		d := expand.BuiltinVersion
		if xo != nil && xo.Default != nil {
			d = xo.Default
		}
		if pin := TemplatePin(d.Name, d.ID); sum.Templates[pin] > 0 {
			m.Versions = append(m.Versions, PinnedVersion{Name: d.Name, ID: d.ID, Lines: sum.Templates[pin]})
		}
	}
	m.OwnPrompt = sum.Written - pinned
	return m
}

// MetaPath is where the metadata of an export written to out goes.
func MetaPath(out string) string { return out + ".meta.json" }

// WriteExportMeta writes m to path atomically.
func WriteExportMeta(path string, m *ExportMeta) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	w, err := datapipe.CreateOutput(path, nil)
	if err != nil {
		return err
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		w.Abort()
		return err
	}
	return w.Commit()
}
