package research

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sync"
)

// Header is the first journal line: what the run's scores depend on, so a
// resumed run can refuse to mix in other settings.
type Header struct {
	Domain string `json:"domain"`
	// Seed is the id of the seed version.
	Seed     string `json:"seed"`
	RandSeed uint64 `json:"rand_seed"`
	// Model, Judge and Optimizer name the endpoints' models.
	Model     string `json:"model,omitempty"`
	Judge     string `json:"judge,omitempty"`
	Optimizer string `json:"optimizer,omitempty"`
	// Offline marks scores of an offline judge, not comparable with the
	// rubric judge's.
	Offline bool `json:"offline,omitempty"`
	// Real names the recorded real trajectories of the real-environment
	// check; "" when there is none.
	Real string `json:"real,omitempty"`
}

// Stop is the journal line of a run that ended on its budget.
type Stop struct {
	// Iteration is the first iteration the run did not finish.
	Iteration int    `json:"iteration"`
	Reason    string `json:"reason"`
	Limits    Limits `json:"limits"`
	Spent     Spend  `json:"spent"`
}

// callLine is written before a metered call is made, doneLine when it
// returns; together they let a resumed run count on.
type callLine struct {
	ID   int    `json:"id"`
	Role string `json:"role"`
	// Est is the estimated prompt tokens, charged if the run dies before
	// the call returns.
	Est int64 `json:"est"`
}

type doneLine struct {
	ID        int   `json:"id"`
	Tokens    int64 `json:"tokens"`
	Estimated bool  `json:"estimated,omitempty"`
}

// journalLine is one line of any kind but an iteration (which is written
// as itself, its "iteration" field telling it apart).
type journalLine struct {
	Header *Header   `json:"header,omitempty"`
	Call   *callLine `json:"call,omitempty"`
	Done   *doneLine `json:"done,omitempty"`
	Stop   *Stop     `json:"stop,omitempty"`
}

// Journal is what an earlier run wrote (see [ReadJournal]).
type Journal struct {
	// Header is nil for a journal of a version that wrote none.
	Header     *Header
	Iterations []Iteration
	// Spent is what the journaled calls cost.
	Spent Spend
	// Stop is the run's last budget stop, nil when it ended otherwise or
	// went on after it.
	Stop *Stop
	// nextCall is the id the next call gets.
	nextCall int
}

// journal serialises the run's journal lines: the budget writes call lines
// from many goroutines.
type journal struct {
	mu  sync.Mutex
	enc *json.Encoder
	err error
}

func newJournal(w io.Writer) *journal {
	if w == nil {
		w = io.Discard
	}
	return &journal{enc: json.NewEncoder(w)}
}

// write appends v as one line; the first failure is kept for [journal.Err]
// (a call line must not fail the call it describes).
func (j *journal) write(v any) {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.enc.Encode(v); err != nil && j.err == nil {
		j.err = fmt.Errorf("journal: %w", err)
	}
}

func (j *journal) Err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}

// ReadJournal reads what an earlier run wrote. A torn last line (the run
// was killed while writing it) is dropped: an iteration is simply done
// again, a call counted from its other line.
func ReadJournal(r io.Reader) (*Journal, error) {
	out := &Journal{}
	pending := map[int]callLine{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	line := 0
	for sc.Scan() {
		line++
		var probe struct {
			journalLine
			N *int `json:"iteration"`
		}
		if err := json.Unmarshal(sc.Bytes(), &probe); err != nil {
			if !sc.Scan() { // the last line: torn by a kill
				break
			}
			return nil, fmt.Errorf("journal line %d: %w", line, err)
		}
		switch {
		case probe.N != nil:
			var it Iteration
			if err := json.Unmarshal(sc.Bytes(), &it); err != nil {
				return nil, fmt.Errorf("journal line %d: %w", line, err)
			}
			if it.N != len(out.Iterations) {
				return nil, fmt.Errorf("journal line %d: iteration %d, want %d", line, it.N, len(out.Iterations))
			}
			out.Iterations = append(out.Iterations, it)
			out.Stop = nil
		case probe.Header != nil:
			if line != 1 {
				return nil, fmt.Errorf("journal line %d: a header after the first line", line)
			}
			out.Header = probe.Header
		case probe.Call != nil:
			c := *probe.Call
			if _, dup := pending[c.ID]; dup || c.ID < out.nextCall {
				return nil, fmt.Errorf("journal line %d: call %d again", line, c.ID)
			}
			out.Spent.add(c.Role, 1, 0, false)
			pending[c.ID] = c
			out.nextCall = c.ID + 1
		case probe.Done != nil:
			c, ok := pending[probe.Done.ID]
			if !ok {
				return nil, fmt.Errorf("journal line %d: call %d returned but never started", line, probe.Done.ID)
			}
			delete(pending, c.ID)
			out.Spent.add(c.Role, 0, probe.Done.Tokens, probe.Done.Estimated)
		case probe.Stop != nil:
			out.Stop = probe.Stop
		default:
			return nil, fmt.Errorf("journal line %d: not a header, iteration, call or stop", line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	// Calls in flight when the run died cost at least their prompts.
	for _, c := range pending {
		out.Spent.add(c.Role, 0, c.Est, true)
	}
	return out, nil
}
