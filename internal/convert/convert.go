// Package convert brings outside data into the unified trajectory format
// and back: AgentWorldBench records (grouped per trajectory, rows that
// disagree reported), OpenAI chat-format tool-calling logs and agentworld
// session recordings into trajectories ([ToTrajectories]); trajectories
// into AgentWorldBench rows in the published byte layout ([ToBench]).
package convert

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/agentworld/agentworld/internal/datapipe"
	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// Source is an input format that converts into unified trajectories.
type Source int

const (
	// FromBench reads AgentWorldBench records (one line per evaluated turn).
	FromBench Source = iota
	// FromOpenAI reads OpenAI chat-format tool-calling logs: one
	// {"messages": [...], "tools": [...]} object per line.
	FromOpenAI
	// FromSession reads recordings of agentworld sessions, which are
	// unified trajectories already (JSONL, or one pretty-printed JSON
	// document per file as session recordings are saved); they are checked
	// and passed through.
	FromSession
)

// ParseSource accepts "bench", "openai" or "session".
func ParseSource(s string) (Source, error) {
	switch s {
	case "bench", "agentworldbench":
		return FromBench, nil
	case "openai", "openai-chat":
		return FromOpenAI, nil
	case "session", "trajectories":
		return FromSession, nil
	}
	return FromBench, fmt.Errorf("unknown source format %q (want bench, openai or session)", s)
}

// ConvertOptions configure conversion into trajectories; nil means defaults.
type ConvertOptions struct {
	// Domain labels OpenAI chat logs, which do not name one; "" means "mcp".
	Domain string
}

// BenchMeta is what a trajectory converted from AgentWorldBench records
// keeps under meta["agentworldbench"], so that converting back reproduces
// every original row field by field.
type BenchMeta struct {
	Task string          `json:"task"`
	ID   json.RawMessage `json:"id"`
	Rows []BenchRowMeta  `json:"rows"`
}

// BenchRowMeta describes one original row relative to the trajectory.
type BenchRowMeta struct {
	TurnIdx    int `json:"turn_idx"`
	TotalTurns int `json:"total_turns"`
	// PromptLen and ResponseLen are the lengths of the row's lists (rows
	// may carry fewer entries than the trajectory has turns).
	PromptLen   int `json:"prompt_len"`
	ResponseLen int `json:"response_len"`
	// PromptSuffix is appended to prompt[turn_idx-1] in this row (the
	// published rows add an answer instruction to the evaluated prompt).
	PromptSuffix string `json:"prompt_suffix,omitempty"`
	// CurrentPrompt is set when it differs from the turn's action.
	CurrentPrompt *string `json:"current_prompt,omitempty"`
	// SystemStr is set when it differs from the trajectory's prompt.
	SystemStr *string `json:"system_str,omitempty"`
	// ID is set when this row spells the id differently ("7" vs 7).
	ID json.RawMessage `json:"id,omitempty"`
	// Extra holds the row's unnamed fields in their order.
	Extra []BenchField `json:"extra,omitempty"`
	// Layout is how the row's line was spelled when it is not agentworld's
	// compact JSON: "python" (json.dumps with ensure_ascii=False) or
	// "python-ascii" (json.dumps' default), so the row is written back
	// byte for byte. Rows in a layout none of these reproduce (another key
	// order or spacing) come back field by field, compact.
	Layout string `json:"layout,omitempty"`
}

// BenchField is one unnamed top-level field of a record. Raw is the value's
// JSON text as a string, so its spacing survives the round trip.
type BenchField struct {
	Key string `json:"key"`
	Raw string `json:"raw"`
}

// benchMetaKey is the trajectory meta key of BenchMeta.
const benchMetaKey = "agentworldbench"

type benchRow struct {
	rec    *trajectory.Record
	file   string
	line   int
	layout string
}

// splitByFirstTurn separates rows that share (task, id) but start
// differently: rows whose first action or first observation differ are
// different trajectories that reuse an id (the published Android data has
// one). Rows that agree on turn 1 and differ later stay together and are
// reported as disagreeing.
func splitByFirstTurn(rows []benchRow) [][]benchRow {
	sig := func(r *trajectory.Record) [2]string {
		var s [2]string
		if len(r.Prompt) > 0 {
			s[0] = r.Prompt[0]
			if r.TurnIdx == 1 && r.CurrentPrompt != "" && strings.HasPrefix(s[0], r.CurrentPrompt) {
				s[0] = r.CurrentPrompt
			}
		}
		if len(r.Response) > 0 {
			s[1] = r.Response[0]
		}
		return s
	}
	var out [][]benchRow
	var sigs [][2]string
	for _, r := range rows {
		s := sig(r.rec)
		placed := false
		for i := range out {
			if sigs[i] == s {
				out[i] = append(out[i], r)
				placed = true
				break
			}
		}
		if !placed {
			out = append(out, []benchRow{r})
			sigs = append(sigs, s)
		}
	}
	return out
}

// groupToTrajectory rebuilds one trajectory from the rows of a (task, id)
// group: turns come from the most complete row (longest response list, then
// longest prompt list, first on ties); every row is checked against them.
// Rows that disagree come back as errors and are left out of the meta.
func groupToTrajectory(rows []benchRow) (*trajectory.Trajectory, []*datapipe.RecordError) {
	best := rows[0]
	for _, r := range rows[1:] {
		if len(r.rec.Response) > len(best.rec.Response) ||
			len(r.rec.Response) == len(best.rec.Response) && len(r.rec.Prompt) > len(best.rec.Prompt) {
			best = r
		}
	}
	b := best.rec
	actions := append([]string(nil), b.Prompt...)
	if k := b.TurnIdx - 1; k >= 0 && k < len(actions) && b.CurrentPrompt != "" &&
		strings.HasPrefix(actions[k], b.CurrentPrompt) {
		actions[k] = b.CurrentPrompt
	}
	t := &trajectory.Trajectory{
		ID:           b.ID.String(),
		Domain:       string(domain.FromTask(b.Task)),
		Source:       "agentworldbench",
		SystemPrompt: b.SystemStr,
	}
	for i, a := range actions {
		tu := trajectory.Turn{Action: a}
		if i < len(b.Response) {
			tu.Observation = b.Response[i]
		}
		t.Turns = append(t.Turns, tu)
	}
	idRaw, _ := rows[0].rec.ID.MarshalJSON()
	meta := BenchMeta{Task: rows[0].rec.Task, ID: idRaw}
	var errs []*datapipe.RecordError
	for _, r := range rows {
		m, err := rowMeta(r.rec, t, idRaw)
		if err != nil {
			err.File, err.Line = r.file, r.line
			errs = append(errs, err)
			continue
		}
		m.Layout = r.layout
		meta.Rows = append(meta.Rows, m)
	}
	raw, _ := trajectory.Marshal(meta)
	t.Meta = map[string]json.RawMessage{benchMetaKey: raw}
	return t, errs
}

func rowMeta(r *trajectory.Record, t *trajectory.Trajectory, idRaw []byte) (BenchRowMeta, *datapipe.RecordError) {
	disagree := func(field, format string, args ...any) *datapipe.RecordError {
		return &datapipe.RecordError{Field: field, Err: fmt.Errorf("%w: %s", datapipe.ErrRowsDisagree, fmt.Sprintf(format, args...))}
	}
	m := BenchRowMeta{TurnIdx: r.TurnIdx, TotalTurns: r.TotalTurns, PromptLen: len(r.Prompt), ResponseLen: len(r.Response)}
	if len(r.Prompt) > len(t.Turns) {
		return m, disagree("prompt", "%d entries, the most complete row has %d", len(r.Prompt), len(t.Turns))
	}
	for i, p := range r.Prompt {
		a := t.Turns[i].Action
		switch {
		case p == a:
		case i == r.TurnIdx-1 && strings.HasPrefix(p, a):
			m.PromptSuffix = p[len(a):]
		default:
			return m, disagree(fmt.Sprintf("prompt[%d]", i), "differs from the same turn in the most complete row")
		}
	}
	for i, o := range r.Response {
		if i >= len(t.Turns) || o != t.Turns[i].Observation {
			return m, disagree(fmt.Sprintf("response[%d]", i), "differs from the same turn in the most complete row")
		}
	}
	if k := r.TurnIdx - 1; k < 0 || k >= len(t.Turns) || r.CurrentPrompt != t.Turns[k].Action {
		cp := r.CurrentPrompt
		m.CurrentPrompt = &cp
	}
	if r.SystemStr != t.SystemPrompt {
		s := r.SystemStr
		m.SystemStr = &s
	}
	if raw, _ := r.ID.MarshalJSON(); !bytes.Equal(raw, idRaw) {
		m.ID = raw
	}
	for _, f := range r.Extra {
		m.Extra = append(m.Extra, BenchField{Key: f.Key, Raw: string(f.Value)})
	}
	return m, nil
}

// FromBenchRecords reports whether t was converted from AgentWorldBench
// records and so converts back to its original rows.
func FromBenchRecords(t *trajectory.Trajectory) bool {
	_, ok := t.Meta[benchMetaKey]
	return ok
}

// TrajectoryToRecords converts a trajectory into AgentWorldBench records in
// the published format, so any trajectory set becomes a benchmark that
// `agentworld bench` scores. A trajectory that came from records
// (FromBenchRecords) gets its original rows back field by field, ids
// included, and id and sp are unused. Any other gets
// trajectory.BenchRecords(t, id, sp): one row per turn, "### Turn N" /
// "**Action:**" prompts, observations opened by the observation marker,
// the integer id, and the trajectory's own id and source as extra fields,
// exactly as `agentworld realenv export` writes them.
func TrajectoryToRecords(t *trajectory.Trajectory, id int64, sp trajectory.SystemPromptFunc) ([]*trajectory.Record, error) {
	recs, _, err := trajectoryToRecords(t, id, sp)
	return recs, err
}

// trajectoryToRecords is TrajectoryToRecords that also returns each
// record's layout (all compact for trajectories not from records).
func trajectoryToRecords(t *trajectory.Trajectory, id int64, sp trajectory.SystemPromptFunc) ([]*trajectory.Record, []string, error) {
	if !FromBenchRecords(t) {
		recs, err := trajectory.BenchRecords(t, id, sp)
		return recs, make([]string, len(recs)), err
	}
	actions := make([]string, len(t.Turns))
	obs := make([]string, len(t.Turns))
	for i, tu := range t.Turns {
		actions[i], obs[i] = tu.Action, tu.Observation
	}
	var m BenchMeta
	if err := json.Unmarshal(t.Meta[benchMetaKey], &m); err != nil {
		return nil, nil, fmt.Errorf("meta.%s: %w", benchMetaKey, err)
	}
	var out []*trajectory.Record
	var layouts []string
	for i, row := range m.Rows {
		if row.PromptLen > len(actions) || row.ResponseLen > len(obs) || row.PromptLen < 0 || row.ResponseLen < 0 {
			return nil, nil, fmt.Errorf("meta.%s.rows[%d]: lists longer than the trajectory", benchMetaKey, i)
		}
		rec := &trajectory.Record{
			Task:       m.Task,
			Prompt:     append([]string{}, actions[:row.PromptLen]...),
			Response:   append([]string{}, obs[:row.ResponseLen]...),
			SystemStr:  t.SystemPrompt,
			TurnIdx:    row.TurnIdx,
			TotalTurns: row.TotalTurns,
		}
		idRaw := m.ID
		if row.ID != nil {
			idRaw = row.ID
		}
		if err := rec.ID.UnmarshalJSON(idRaw); err != nil {
			return nil, nil, fmt.Errorf("meta.%s.rows[%d].id: %w", benchMetaKey, i, err)
		}
		if k := row.TurnIdx - 1; k >= 0 && k < len(rec.Prompt) {
			rec.Prompt[k] += row.PromptSuffix
		}
		switch k := row.TurnIdx - 1; {
		case row.CurrentPrompt != nil:
			rec.CurrentPrompt = *row.CurrentPrompt
		case k >= 0 && k < len(actions):
			rec.CurrentPrompt = actions[k]
		}
		if row.SystemStr != nil {
			rec.SystemStr = *row.SystemStr
		}
		for _, f := range row.Extra {
			if !json.Valid([]byte(f.Raw)) {
				return nil, nil, fmt.Errorf("meta.%s.rows[%d].extra %q: not JSON", benchMetaKey, i, f.Key)
			}
			rec.Extra = append(rec.Extra, trajectory.Field{Key: f.Key, Value: json.RawMessage(f.Raw)})
		}
		switch row.Layout {
		case layoutCompact, layoutPython, layoutPythonASCII:
		default:
			return nil, nil, fmt.Errorf("meta.%s.rows[%d].layout: unknown layout %q", benchMetaKey, i, row.Layout)
		}
		out = append(out, rec)
		layouts = append(layouts, row.Layout)
	}
	return out, layouts, nil
}

// writeTrajectory appends one trajectory line.
func writeTrajectory(w io.Writer, t *trajectory.Trajectory) error {
	b, err := trajectory.Marshal(t)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// ToTrajectories converts files of the given source format into unified
// trajectories JSONL on out. AgentWorldBench rows are grouped by (task, id)
// over consecutive lines; a key seen again after other keys starts a new
// trajectory.
func ToTrajectories(ctx context.Context, files []string, out io.Writer, from Source, co *ConvertOptions, opts *datapipe.Options) (*datapipe.Summary, error) {
	var c ConvertOptions
	if co != nil {
		c = *co
	}
	if c.Domain == "" {
		c.Domain = string(domain.MCP)
	}
	o := opts.Norm()
	sum := &datapipe.Summary{}
	switch from {
	case FromBench:
		var group []benchRow
		emit := func(rows []benchRow, id string) error {
			t, errs := groupToTrajectory(rows)
			if id != "" {
				t.ID = id
			}
			for _, e := range errs {
				if err := o.Bad(sum, e); err != nil {
					return err
				}
			}
			if fes := t.Check(); len(fes) > 0 {
				for _, fe := range fes {
					if err := o.Bad(sum, &datapipe.RecordError{File: rows[0].file, Line: rows[0].line, Field: fe.Path, Err: fe.Err}); err != nil {
						return err
					}
				}
				return nil
			}
			sum.Written++
			return writeTrajectory(out, t)
		}
		flush := func() error {
			if len(group) == 0 {
				return nil
			}
			clusters := splitByFirstTurn(group)
			group = nil
			for i, c := range clusters {
				id := ""
				if i > 0 {
					id = fmt.Sprintf("%s-%d", c[0].rec.ID.String(), i+1)
				}
				if err := emit(c, id); err != nil {
					return err
				}
			}
			return nil
		}
		err := datapipe.Run(ctx, files, o, sum, func(_ int, batch []datapipe.InLine) ([]benchRow, []*datapipe.RecordError, int64, error) {
			var rows []benchRow
			var errs []*datapipe.RecordError
			for _, l := range batch {
				rec := new(trajectory.Record)
				if err := json.Unmarshal(l.Data, rec); err != nil {
					errs = append(errs, &datapipe.RecordError{File: l.File, Line: l.N, Err: fmt.Errorf("%w: %v", datapipe.ErrBadJSON, err)})
					continue
				}
				if err := rec.Validate(); err != nil {
					errs = append(errs, &datapipe.RecordError{File: l.File, Line: l.N, Err: fmt.Errorf("%w: %v", datapipe.ErrInvalid, err)})
					continue
				}
				layout, _ := detectLayout(rec, l.Data)
				rows = append(rows, benchRow{rec: rec, file: l.File, line: l.N, layout: layout})
			}
			return rows, errs, int64(len(rows)), nil
		}, func(rows []benchRow) error {
			for _, r := range rows {
				if len(group) > 0 && group[0].rec.Key() != r.rec.Key() {
					if err := flush(); err != nil {
						return err
					}
				}
				group = append(group, r)
			}
			return nil
		})
		if err == nil {
			err = flush()
		}
		return sum, err
	case FromOpenAI, FromSession:
		o.Documents = from == FromSession
		err := datapipe.Run(ctx, files, o, sum, func(_ int, batch []datapipe.InLine) ([]byte, []*datapipe.RecordError, int64, error) {
			var buf bytes.Buffer
			var errs []*datapipe.RecordError
			var ok int64
			for _, l := range batch {
				var t *trajectory.Trajectory
				var es []*datapipe.RecordError
				if from == FromOpenAI {
					t, es = ChatLogToTrajectory(l.Data, c.Domain, l.File, l.N)
				} else {
					t, es = datapipe.DecodeTrajectory(l.Data, l.File, l.N)
					if len(es) == 0 && t.Source == "" {
						t.Source = "session"
					}
				}
				if len(es) > 0 {
					errs = append(errs, es...)
					continue
				}
				if err := writeTrajectory(&buf, t); err != nil {
					return nil, nil, 0, err
				}
				ok++
			}
			return buf.Bytes(), errs, ok, nil
		}, func(b []byte) error {
			sum.Written += int64(bytes.Count(b, []byte{'\n'}))
			_, err := out.Write(b)
			return err
		})
		return sum, err
	}
	return nil, fmt.Errorf("unknown source %d", from)
}

// BenchOptions configure ToBench; nil means defaults.
type BenchOptions struct {
	// FirstID is the id of the first trajectory that did not come from
	// records; the next ones count up from it in input order (ids number
	// trajectories, as in the published data and `realenv export`). 0
	// means 1. Trajectories that came from records keep their own ids.
	FirstID int64
	// SystemPrompt renders system_str for trajectories that carry only
	// components; nil means trajectory.WorldSystemPrompt, the simulator's
	// own template.
	SystemPrompt trajectory.SystemPromptFunc
}

// benchOut is one trajectory's records on their way to the writer;
// numbered records get their id there, in input order.
type benchOut struct {
	recs     []*trajectory.Record
	layouts  []string
	numbered bool
}

// ToBench converts unified trajectories into AgentWorldBench records in the
// published format (see TrajectoryToRecords). Records are built by the
// workers; ids are given, and lines written, in input order, so the output
// does not depend on --workers.
func ToBench(ctx context.Context, files []string, out io.Writer, bo *BenchOptions, opts *datapipe.Options) (*datapipe.Summary, error) {
	var b BenchOptions
	if bo != nil {
		b = *bo
	}
	if b.FirstID == 0 {
		b.FirstID = 1
	}
	o := opts.Norm()
	sum := &datapipe.Summary{}
	next := b.FirstID
	var buf bytes.Buffer
	err := datapipe.Run(ctx, files, o, sum, func(_ int, batch []datapipe.InLine) ([]benchOut, []*datapipe.RecordError, int64, error) {
		var res []benchOut
		var errs []*datapipe.RecordError
		for _, l := range batch {
			t, es := datapipe.DecodeTrajectory(l.Data, l.File, l.N)
			if len(es) > 0 {
				errs = append(errs, es...)
				continue
			}
			recs, layouts, err := trajectoryToRecords(t, 0, b.SystemPrompt)
			if err != nil {
				errs = append(errs, &datapipe.RecordError{File: l.File, Line: l.N, Err: fmt.Errorf("%w: %v", datapipe.ErrInvalid, err)})
				continue
			}
			res = append(res, benchOut{recs: recs, layouts: layouts, numbered: !FromBenchRecords(t)})
		}
		return res, errs, int64(len(res)), nil
	}, func(res []benchOut) error {
		buf.Reset()
		for _, r := range res {
			if r.numbered {
				id := trajectory.IntID(strconv.FormatInt(next, 10))
				next++
				for _, rec := range r.recs {
					rec.ID = id
				}
			}
			for i, rec := range r.recs {
				b, err := encodeRecord(rec, r.layouts[i])
				if err != nil {
					return err
				}
				buf.Write(append(b, '\n'))
			}
			sum.Written += int64(len(r.recs))
		}
		_, err := out.Write(buf.Bytes())
		return err
	})
	return sum, err
}
