package research

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/agentworld/agentworld/internal/worldmodel"
)

// ErrBudget is the cause a run's context is cancelled with when its next
// call would go over a cap of its [Budget]; [Run] then ends cleanly.
var ErrBudget = errors.New("research budget exhausted")

// Limits caps what a run spends; a zero field is no cap.
type Limits struct {
	// Calls caps the model, judge, optimizer and real-check calls together.
	// A call answered from a cache never reaches the budget and is free.
	Calls int `json:"calls,omitempty"`
	// Tokens caps their prompt plus completion tokens. It holds: a call is
	// sent only when its worst case (its prompt's estimate plus its
	// max_tokens) fits in what is left, so a run may end with up to one
	// worst case unspent.
	Tokens int64 `json:"tokens,omitempty"`
	// Completion is the completion cap a call under a Tokens cap is sent
	// with when it carries none (as max_completion_tokens), so that its
	// worst case is known; 0 means [DefaultCompletion].
	Completion int `json:"completion,omitempty"`
}

// DefaultCompletion is [Limits.Completion] when zero: the generation
// budget the world model's calls get by default, ample for a judge's or
// the optimizer's answer.
const DefaultCompletion = 32768

// RoleSpend is the share of one kind of call ("model", "judge",
// "optimizer", "verify") in a [Spend].
type RoleSpend struct {
	Calls  int   `json:"calls"`
	Tokens int64 `json:"tokens"`
}

// Spend is what a run's calls cost.
type Spend struct {
	Calls  int   `json:"calls"`
	Tokens int64 `json:"tokens"`
	// Estimated is the part of Tokens estimated from text length (four
	// bytes a token) because the endpoint reported no usage, the call
	// failed, or the run was killed while it was in flight.
	Estimated int64                `json:"estimated_tokens,omitempty"`
	Roles     map[string]RoleSpend `json:"roles,omitempty"`
}

func (s *Spend) add(role string, calls int, tokens int64, estimated bool) {
	s.Calls += calls
	s.Tokens += tokens
	if estimated {
		s.Estimated += tokens
	}
	if s.Roles == nil {
		s.Roles = map[string]RoleSpend{}
	}
	r := s.Roles[role]
	r.Calls += calls
	r.Tokens += tokens
	s.Roles[role] = r
}

func (s Spend) clone() Spend {
	c := s
	c.Roles = make(map[string]RoleSpend, len(s.Roles))
	for k, v := range s.Roles {
		c.Roles[k] = v
	}
	return c
}

// String is the spend for a progress line, against l where capped: "120/400
// calls (model 80, judge 30, optimizer 10), 35210/100000 tokens (1200
// estimated)".
func (s Spend) String(l Limits) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d", s.Calls)
	if l.Calls > 0 {
		fmt.Fprintf(&b, "/%d", l.Calls)
	}
	b.WriteString(" calls")
	if len(s.Roles) > 0 {
		roles := make([]string, 0, len(s.Roles))
		for r := range s.Roles {
			roles = append(roles, r)
		}
		sort.Strings(roles)
		for i, r := range roles {
			roles[i] = fmt.Sprintf("%s %d", r, s.Roles[r].Calls)
		}
		fmt.Fprintf(&b, " (%s)", strings.Join(roles, ", "))
	}
	fmt.Fprintf(&b, ", %d", s.Tokens)
	if l.Tokens > 0 {
		fmt.Fprintf(&b, "/%d", l.Tokens)
	}
	b.WriteString(" tokens")
	if s.Estimated > 0 {
		fmt.Fprintf(&b, " (%d estimated)", s.Estimated)
	}
	return b.String()
}

// Budget meters the calls of a run against its [Limits]. Wrap every
// client that costs money with [Budget.Meter], inside any response cache,
// so that cache hits stay free. Under a token cap every call reserves its
// worst case (prompt estimate plus max_tokens) before it is sent and gives
// back what it did not use when it returns; a call that fits only once the
// calls in flight have given theirs back waits for them. A call that would
// go over a cap even then is not made: the budget waits for the calls in
// flight, cancels the run's context with [ErrBudget] and [Run] ends with
// what it has. Every call is
// journaled before it is made and again when it returns, so a run killed
// and resumed counts on from where it was (a call in flight at the kill
// counts, with its prompt's estimated tokens).
type Budget struct {
	limits Limits

	mu      sync.Mutex
	drained sync.Cond
	spent   Spend
	// finished counts calls that returned, whose mean size predicts the
	// next one's and the test split's tokens.
	finished int
	// pending are the worst-case tokens reserved by the calls in flight.
	pending int64
	// largest is the largest worst case of a call admitted so far; the
	// search holds that much back beyond the test split's expected tokens,
	// so that the test's last call still fits.
	largest  int64
	inflight int
	next     int
	// reserve is held back for the test split during the search.
	reserve int
	stopped error
	cancel  context.CancelCauseFunc
	journal *journal
	// progress receives a spend line every `every` finished calls.
	progress io.Writer
	every    int
}

// NewBudget caps a run at l (zero fields: no cap).
func NewBudget(l Limits) *Budget {
	b := &Budget{limits: l}
	b.drained.L = &b.mu
	return b
}

// Limits are the caps the budget was made with.
func (b *Budget) Limits() Limits { return b.limits }

// Spent is what the run has spent so far, resumed runs included.
func (b *Budget) Spent() Spend {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.spent.clone()
}

// Meter returns c counted under role.
func (b *Budget) Meter(role string, c worldmodel.Completer) worldmodel.Completer {
	return &metered{b: b, role: role, c: c}
}

// restore continues from an earlier run's spend, journals to j and
// reports the spend to progress every `every` calls (never when every <= 0).
func (b *Budget) restore(s Spend, next int, j *journal, progress io.Writer, every int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.spent, b.next, b.journal = s.clone(), next, j
	b.finished = s.Calls
	b.progress, b.every = progress, every
}

// phase starts a part of the run: calls refused from now on cancel it, and
// reserve calls (with their expected tokens) are held back.
func (b *Budget) phase(cancel context.CancelCauseFunc, reserve int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cancel, b.reserve, b.stopped = cancel, reserve, nil
}

// meanTokens is the mean size of a finished call, 0 before the first.
func (b *Budget) meanTokens() int64 {
	if b.finished == 0 {
		return 0
	}
	return b.spent.Tokens / int64(b.finished)
}

// over says which cap a call of about est prompt tokens and at most worst
// tokens in all would go over, "" when none; wait says it fits once the
// calls in flight have given back their unused reservations.
func (b *Budget) over(est, worst int64) (why string, wait bool) {
	l := b.limits
	if l.Calls > 0 && b.spent.Calls+1 > l.Calls-b.reserve {
		held := ""
		if b.reserve > 0 {
			held = fmt.Sprintf(" (%d held back for the test split)", b.reserve)
		}
		return fmt.Sprintf("call %d would go over the cap of %d calls%s", b.spent.Calls+1, l.Calls, held), false
	}
	if l.Tokens > 0 {
		held := int64(0)
		if b.reserve > 0 {
			held = int64(b.reserve)*b.meanTokens() + max(b.largest, worst)
		}
		room := l.Tokens - b.spent.Tokens - held
		if worst > room {
			s := fmt.Sprintf("a call of up to %d tokens (about %d prompt, %d completion at most) would go over the cap of %d tokens (%d spent", worst, est, worst-est, l.Tokens, b.spent.Tokens)
			if held > 0 {
				s += fmt.Sprintf(", about %d held back for the test split", held)
			}
			return s + ")", false
		}
		if worst > room-b.pending {
			return "", true
		}
	}
	return "", false
}

// admit counts a call of about est prompt tokens and at most worst tokens
// before it is made, or refuses it.
func (b *Budget) admit(role string, est, worst int64) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.stopped == nil {
		why, wait := b.over(est, worst)
		if why != "" {
			b.stopped = fmt.Errorf("%w: %s", ErrBudget, why)
		} else if !wait {
			break
		} else {
			// Calls in flight hold the room this one needs until they
			// return (each returns, its error included, and broadcasts).
			b.drained.Wait()
		}
	}
	if b.stopped != nil {
		// Let the admitted calls finish (their answers get cached), then
		// stop the run; the caller sees its context cancelled, never an
		// endpoint failure it would record.
		for b.inflight > 0 {
			b.drained.Wait()
		}
		if b.cancel != nil {
			b.cancel(b.stopped)
		}
		return 0, b.stopped
	}
	id := b.next
	b.next++
	b.spent.add(role, 1, 0, false)
	b.inflight++
	b.pending += worst
	b.largest = max(b.largest, worst)
	b.journal.write(journalLine{Call: &callLine{ID: id, Role: role, Est: est}})
	return id, nil
}

// settle books a finished call's tokens (the usage the endpoint reported,
// else an estimate) in place of the worst case it reserved.
func (b *Budget) settle(id int, role string, est, worst int64, resp *worldmodel.Response) {
	tokens, estimated := est, true
	if resp != nil {
		if u := int64(resp.PromptTokens + resp.CompletionTokens); u > 0 {
			tokens, estimated = u, false
		} else {
			tokens += textTokens(resp.Content) + textTokens(resp.Reasoning)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inflight--
	b.pending -= worst
	b.finished++
	b.spent.add(role, 0, tokens, estimated)
	b.journal.write(journalLine{Done: &doneLine{ID: id, Tokens: tokens, Estimated: estimated}})
	if b.every > 0 && b.finished%b.every == 0 {
		fmt.Fprintf(b.progress, "research: spent %s\n", b.spent.String(b.limits))
	}
	b.drained.Broadcast()
}

type metered struct {
	b    *Budget
	role string
	c    worldmodel.Completer
}

func (m *metered) Complete(ctx context.Context, req worldmodel.Request) (*worldmodel.Response, error) {
	est := int64(0)
	for _, msg := range req.Messages {
		est += textTokens(msg.Content) + 4 // the chat template's per-message tokens
	}
	// The completion's worst case is its max_tokens; under a token cap a
	// call without one is sent with the budget's, so the cap can hold.
	completion := int64(max(req.MaxTokens, 0))
	if req.MaxTokens <= 0 && m.b.limits.Tokens > 0 {
		req.MaxTokens, req.MaxCompletionTokens = m.b.completion(), true
		completion = int64(req.MaxTokens)
	}
	// Never below a mean call, which guards a prompt whose estimate falls
	// short of what the endpoint counts.
	worst := max(est+completion, m.b.mean())
	id, err := m.b.admit(m.role, est, worst)
	if err != nil {
		return nil, err
	}
	resp, err := m.c.Complete(ctx, req)
	m.b.settle(id, m.role, est, worst, resp)
	return resp, err
}

// mean is [Budget.meanTokens] under the lock.
func (b *Budget) mean() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.meanTokens()
}

// completion is the completion cap of a call that carries none.
func (b *Budget) completion() int {
	if b.limits.Completion > 0 {
		return b.limits.Completion
	}
	return DefaultCompletion
}

// textTokens estimates the tokens of s at four bytes a token, the usual
// ratio of English text and code under BPE tokenizers.
func textTokens(s string) int64 { return int64(len(s)+3) / 4 }
