package judge

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/score"
)

// Mode is how the judge compares: pointwise scores one prediction on the
// five dimensions; turing shows the real observation and the prediction
// and asks which is real; reference shows two predictions and the truth
// and asks which is closer.
type Mode string

// The judge modes.
const (
	Pointwise Mode = "pointwise"
	Turing    Mode = "turing"
	Reference Mode = "reference"
)

// Modes lists the judge modes.
var Modes = []Mode{Pointwise, Turing, Reference}

// ParseMode reads a --judge-mode value.
func ParseMode(s string) (Mode, error) {
	for _, m := range Modes {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("unknown judge mode %q (want pointwise, turing or reference)", s)
}

// Where the official repository keeps its judge text, relative to a
// checkout, and the names of its three user templates.
const (
	OfficialTemplatesFile = "eval/lwm_eval_utils/task_configs.py"
	officialPromptsDir    = "prompts"
	JudgeSystemFile       = "judge_system_prompt.txt"
)

type templateSpec struct {
	name   string
	fields []string
}

var templateSpecs = map[Mode]templateSpec{
	Pointwise: {"JUDGE_USER_PROMPT", []string{"context", "world_model_input", "predicted_observation", "ground_truth"}},
	Turing:    {"TURING_JUDGE_USER_PROMPT", []string{"context", "world_model_input", "response_a", "response_b"}},
	Reference: {"REF_ANSWER_JUDGE_USER_PROMPT", []string{"context", "world_model_input", "response_a", "response_b", "ground_truth"}},
}

// OfficialCommit is the commit of QwenLM/Qwen-AgentWorld whose judge text
// [OfficialHashes] pins (2026-07-20, "Fix evaluation message construction
// and judge output").
const OfficialCommit = "cd0aa83"

// OfficialHashes are the SHA-256 digests of the official judge files at
// [OfficialCommit], keyed by their path in the repository. They are facts
// about public files, computed from a snapshot of the repository; the text
// itself is not part of agentworld.
var OfficialHashes = map[string]string{
	"eval/lwm_eval_utils/task_configs.py":      "9f54d42d80bb0a4abab03f606da715b68bbb51f1e0257850e5a93d83b0f4113a",
	"prompts/android/judge_system_prompt.txt":  "04e654f3f907139c1aaeb9c0ab1374cb6bac8162ce3af76c0f4dc3ed2dedadaa",
	"prompts/mcp/judge_system_prompt.txt":      "dd2d05c1648cb90c77334cc5f15ba331aa92452effb85ddc5868e6b3608ebfb2",
	"prompts/os/judge_system_prompt.txt":       "105640a1d7c70280f5c4f042d3968a1a8a0dffae2b06ae9d780a45cb9a8c1426",
	"prompts/search/judge_system_prompt.txt":   "3300bf23258ca556020d48d2fea6c5fb878ce451a100c6110f461c079ab50d83",
	"prompts/swe/judge_system_prompt.txt":      "c4abc65e1ca1b5947c1596be2be63aebed5a8cd184ff95ebefaf38b3d4b9fa8e",
	"prompts/terminal/judge_system_prompt.txt": "0c416c5e55d77733ec6c52064a196e10b17833703d4bde9b046291e77a996dbc",
	"prompts/web/judge_system_prompt.txt":      "dc2517b4e04eb8ea9e10fb7b8fcdefc9487ad26cb0cc20ec8d2fca29d532c6d6",
}

// OwnLabel is what every run, report and reward result says when it was
// judged with agentworld's own text.
const OwnLabel = score.OwnPromptsLabel

// FileHash is one file read for the judge text and its SHA-256.
type FileHash = score.PromptFile

// Prompts is the text of the rubric judge: a system prompt per domain and
// the user templates of the three modes. The nil *Prompts and [Own] are
// agentworld's own text; [LoadPrompts] reads the official one from a
// checkout. Either way [Messages] builds the same structure.
type Prompts struct {
	official bool
	dir      string
	// system and pairwise map a domain to its system prompt (pairwise:
	// agentworld's text for the turing and reference modes).
	system, pairwise map[string]string
	tmpl             map[Mode]*Template
	files            []FileHash
}

// Official reports whether p is the official text read from a checkout.
func (p *Prompts) Official() bool { return p != nil && p.official }

// Files returns the files the text was read from with their SHA-256, sorted
// by path; nil for agentworld's own text.
func (p *Prompts) Files() []FileHash {
	if !p.Official() {
		return nil
	}
	return append([]FileHash(nil), p.files...)
}

// Digest is one SHA-256 over the files' paths and digests (sha256:…), or
// "" for agentworld's own text: two runs judged with the same text have the
// same digest.
func (p *Prompts) Digest() string {
	if !p.Official() {
		return ""
	}
	return filesDigest(p.files)
}

func filesDigest(files []FileHash) string {
	h := sha256.New()
	for _, f := range files {
		h.Write([]byte(f.Path))
		h.Write([]byte{0})
		h.Write([]byte(f.SHA256))
		h.Write([]byte{'\n'})
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// Label says in words which judge text p is: [OwnLabel], or
// "official (digest, matches cd0aa83)" / "(…, differs from cd0aa83)".
func (p *Prompts) Label() string {
	if !p.Official() {
		return OwnLabel
	}
	return OfficialLabel(p.Digest(), len(p.Unpinned()) == 0)
}

// Text describes p for run records and reports.
func (p *Prompts) Text() score.JudgeText {
	return score.JudgeText{Label: p.Label(), Digest: p.Digest(), Files: p.Files(), Unpinned: p.Unpinned()}
}

// OfficialLabel is the label of official text with the given digest.
func OfficialLabel(digest string, pinned bool) string {
	short := strings.TrimPrefix(digest, "sha256:")
	if len(short) > 12 {
		short = short[:12]
	}
	if pinned {
		return fmt.Sprintf("official (sha256 %s, as at %s)", short, OfficialCommit)
	}
	return fmt.Sprintf("official (sha256 %s, differs from %s)", short, OfficialCommit)
}

// Unpinned lists the files whose SHA-256 differs from the one pinned for
// [OfficialCommit]; callers warn about them (the numbers are then not
// those of the published text).
func (p *Prompts) Unpinned() []string {
	if !p.Official() {
		return nil
	}
	var out []string
	for _, f := range p.files {
		if OfficialHashes[f.Path] != f.SHA256 {
			out = append(out, f.Path)
		}
	}
	return out
}

// Template returns the user template of mode.
func (p *Prompts) Template(mode Mode) *Template {
	if p == nil {
		p = own
	}
	return p.tmpl[mode]
}

// ErrPrompts marks a prompts directory that cannot be used.
var ErrPrompts = errors.New("judge prompts")

// LoadPrompts reads the official judge text from dir, a checkout of the
// official repository: every domain's prompts/<domain>/judge_system_prompt.txt
// and the three user templates of eval/lwm_eval_utils/task_configs.py.
// Files are read as the official script reads them (UTF-8, universal
// newlines). A missing file, a template that is not a plain triple-quoted
// string, or a placeholder the official script does not fill is an error
// naming file (and line).
func LoadPrompts(dir string) (*Prompts, error) {
	if dir == "" {
		return nil, fmt.Errorf("%w: no directory given", ErrPrompts)
	}
	if st, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPrompts, err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("%w: %s is not a directory (want a checkout of the official repository)", ErrPrompts, dir)
	}
	p := &Prompts{official: true, dir: dir, system: map[string]string{}, tmpl: map[Mode]*Template{}}
	read := func(rel string) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrPrompts, filepath.Join(dir, filepath.FromSlash(rel)), err)
		}
		sum := sha256.Sum256(b)
		p.files = append(p.files, FileHash{Path: rel, SHA256: hex.EncodeToString(sum[:])})
		return b, nil
	}
	for _, d := range domain.All {
		rel := officialPromptsDir + "/" + string(d) + "/" + JudgeSystemFile
		b, err := read(rel)
		if err != nil {
			return nil, err
		}
		p.system[string(d)] = universalNewlines(string(b))
	}
	src, err := read(OfficialTemplatesFile)
	if err != nil {
		return nil, err
	}
	file := filepath.Join(dir, filepath.FromSlash(OfficialTemplatesFile))
	names := make([]string, 0, len(Modes))
	for _, m := range Modes {
		names = append(names, templateSpecs[m].name)
	}
	strs, err := readPyStrings(file, src, names...)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPrompts, err)
	}
	for _, m := range Modes {
		spec := templateSpecs[m]
		s := strs[spec.name]
		t, err := parseTemplate(file, spec.name, s.Value, s.lineAt, spec.fields, spec.fields)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrPrompts, err)
		}
		p.tmpl[m] = t
	}
	sort.Slice(p.files, func(i, j int) bool { return p.files[i].Path < p.files[j].Path })
	return p, nil
}

// universalNewlines turns \r\n and lone \r into \n, as Python's text mode
// does when it reads a file.
func universalNewlines(s string) string {
	if !strings.Contains(s, "\r") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
}

// officialSubtask is the official script's name for a task: the part after
// its last "/", exactly (no case folding, no trimming); "mcp" when empty
// (the script's default for a missing task).
func officialSubtask(task string) string {
	if task == "" {
		return "mcp"
	}
	if i := strings.LastIndexByte(task, '/'); i >= 0 {
		return task[i+1:]
	}
	return task
}

// HashFile returns the SHA-256 of a file as lower-case hex.
func HashFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
