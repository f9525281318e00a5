package promptlib

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/agentworld/agentworld/internal/domain"
)

// OfficialSystemFile is where a checkout of the official Qwen-AgentWorld
// repository keeps each domain's world-model system prompt.
const OfficialSystemFile = "prompts/%s/system_prompt.txt"

// OfficialCommit is the official commit whose world-model system prompts
// [OfficialHashes] pins.
const OfficialCommit = "cd0aa83"

// OfficialHashes are the SHA-256 digests of the official world-model system
// prompts at [OfficialCommit], by path: facts about public files, computed
// from a snapshot of the repository (their text is not part of agentworld).
var OfficialHashes = map[string]string{
	"prompts/android/system_prompt.txt":  "44659d61bf9ab8a990edcaafd8a1f36da5cf1937a79d4f10076a677985342769",
	"prompts/mcp/system_prompt.txt":      "11eefe9611721731005ec0007b7b9cbf68c97350dac8ad1837c1e886833b5038",
	"prompts/os/system_prompt.txt":       "5c0b7bf5e31e69a6fcd2bf1b07b5dca79c8189fc025513e6d505ab58a920b6f5",
	"prompts/search/system_prompt.txt":   "75c1950a9c6b8956edf4857d20c431ea89cecbf196528715cd32992d3a681471",
	"prompts/swe/system_prompt.txt":      "eac1fe2970fc96f023ba096eb1af77576715bd9efb3d51dc25398a9e4f6398be",
	"prompts/terminal/system_prompt.txt": "e550c7bdde941db5fbfd6dcf1ac32c7b7779a1c848c20fb3cb27b0c437cad41d",
	"prompts/web/system_prompt.txt":      "dcb679be88f6c5b1f241ec4f10eb506dafd19b95c063041fb0342655950bc86c",
}

// officialFields maps the str.format placeholders of the official system
// prompts to the components a version renders.
var officialFields = map[string]string{
	"tool_definitions": "ActionSpace",
	"demonstrations":   "Demonstrations",
}

var placeholderRe = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// OfficialImport is what ImportOfficial read.
type OfficialImport struct {
	// Version is the new version (not yet added to a library).
	Version *Version
	// Commit is the checkout's commit (short), "" when dir is no git
	// checkout.
	Commit string
	// Files are the files read with their SHA-256; Unpinned those that
	// differ from OfficialHashes.
	Files    map[string]string
	Unpinned []string
}

// ImportOfficial reads the official world-model system prompts of every
// domain from dir, a checkout of the official repository, into a version
// named name ("" means "official-" and the checkout's short commit). The
// text becomes each domain's "prompt" block as it is, read as Python reads
// it (UTF-8, universal newlines), with its {tool_definitions} and
// {demonstrations} placeholders rendering the action space and the
// demonstrations of a world; any other {name} is refused with file:line.
func ImportOfficial(dir, name string) (*OfficialImport, error) {
	imp := &OfficialImport{Files: map[string]string{}}
	commit, err := gitHead(dir)
	if err != nil {
		return nil, err
	}
	imp.Commit = commit
	if name == "" {
		if commit == "" {
			return nil, fmt.Errorf("%s is not a git checkout, so its commit is unknown: name the version", dir)
		}
		name = "official-" + commit
	}
	v := &Version{Name: name, Templates: map[string]string{}}
	for _, d := range domain.All {
		rel := fmt.Sprintf(OfficialSystemFile, d)
		path := filepath.Join(dir, filepath.FromSlash(rel))
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("official prompts: %w", err)
		}
		sum := sha256.Sum256(b)
		imp.Files[rel] = hex.EncodeToString(sum[:])
		if OfficialHashes[rel] != imp.Files[rel] {
			imp.Unpinned = append(imp.Unpinned, rel)
		}
		text := strings.ReplaceAll(strings.ReplaceAll(string(b), "\r\n", "\n"), "\r", "\n")
		src, err := officialTemplate(path, text)
		if err != nil {
			return nil, err
		}
		v.Templates[string(d)] = src
	}
	what := "commit " + commit
	if commit == "" {
		what = "a checkout of unknown commit"
	}
	v.Rationale = fmt.Sprintf("the official Qwen-AgentWorld world-model system prompts (prompts/<domain>/system_prompt.txt) imported from %s", what)
	if len(imp.Unpinned) > 0 {
		v.Rationale += fmt.Sprintf("; %d files differ from %s's", len(imp.Unpinned), OfficialCommit)
	}
	if err := v.compile(); err != nil {
		return nil, err
	}
	imp.Version = v
	return imp, nil
}

// officialTemplate turns an official system prompt into a version's
// template: a "prompt" block of its literal text ("{{" escaped) with the
// known placeholders as component actions.
func officialTemplate(path, text string) (string, error) {
	var b strings.Builder
	b.WriteString(`{{define "prompt"}}`)
	last := 0
	lit := func(s string) { b.WriteString(strings.ReplaceAll(s, "{{", `{{"{{"}}`)) }
	for _, m := range placeholderRe.FindAllStringSubmatchIndex(text, -1) {
		field, ok := officialFields[text[m[2]:m[3]]]
		if !ok {
			line := 1 + strings.Count(text[:m[0]], "\n")
			return "", fmt.Errorf("%s:%d: unknown placeholder {%s} (known: {tool_definitions}, {demonstrations})", path, line, text[m[2]:m[3]])
		}
		lit(text[last:m[0]])
		b.WriteString("{{." + field + "}}")
		last = m[1]
	}
	lit(text[last:])
	b.WriteString(`{{end}}`)
	return b.String(), nil
}

// gitHead is the short commit a checkout's HEAD points at, "" when dir has
// no .git directory. It reads HEAD, the loose ref and packed-refs; it does
// not run git.
func gitHead(dir string) (string, error) {
	gitDir := filepath.Join(dir, ".git")
	head, err := os.ReadFile(filepath.Join(gitDir, "HEAD"))
	if os.IsNotExist(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	h := strings.TrimSpace(string(head))
	ref, isRef := strings.CutPrefix(h, "ref: ")
	if !isRef {
		return short(h), nil
	}
	if b, err := os.ReadFile(filepath.Join(gitDir, filepath.FromSlash(ref))); err == nil {
		return short(strings.TrimSpace(string(b))), nil
	}
	f, err := os.Open(filepath.Join(gitDir, "packed-refs"))
	if err != nil {
		return "", fmt.Errorf("%s: HEAD names %s, which is neither a loose nor a packed ref", dir, ref)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if sha, name, ok := strings.Cut(sc.Text(), " "); ok && name == ref {
			return short(sha), nil
		}
	}
	return "", fmt.Errorf("%s: HEAD names %s, which packed-refs does not hold", dir, ref)
}

func short(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}
