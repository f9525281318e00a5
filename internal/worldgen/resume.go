package worldgen

import (
	"encoding/json"
	"fmt"

	"github.com/agentworld/agentworld/internal/journal"
)

// readVerdicts counts the journal's verdicts and says which requests are
// decided.
func (r *run) readVerdicts(path string) (map[string]bool, error) {
	decided := map[string]bool{}
	err := journal.Rows(path, nil, func(v *verdict, _ []byte, _ int64) error {
		if !decided[v.Request] {
			decided[v.Request] = true
			r.stats.add(*v)
		}
		return nil
	})
	return decided, err
}

// answerPeek is what resume reads of every answer line first: the
// request and the spending, not the (long) answer.
type answerPeek struct {
	Request          string `json:"request"`
	PromptTokens     int    `json:"prompt_tokens"`
	CompletionTokens int    `json:"completion_tokens"`
}

// readAnswers keeps the journal's answers of undecided requests (the
// generator is not asked again for them) and counts every answer's
// spending.
func readAnswers(path string, decided map[string]bool, st *Stats) (map[string]*answerLine, error) {
	out := map[string]*answerLine{}
	err := journal.Rows(path, nil, func(p *answerPeek, line []byte, off int64) error {
		st.spent(answerLine{PromptTokens: p.PromptTokens, CompletionTokens: p.CompletionTokens})
		if decided[p.Request] {
			return nil
		}
		var a answerLine
		if err := json.Unmarshal(line, &a); err != nil {
			return fmt.Errorf("%s: the answer at byte %d: %w", path, off, err)
		}
		out[a.Request] = &a
		return nil
	})
	return out, err
}
