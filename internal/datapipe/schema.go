package datapipe

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/agentworld/agentworld/internal/trajectory"
)

//go:embed schema.json
var trajectorySchema []byte

// TrajectorySchema returns the JSON Schema document of the unified
// trajectory line format.
func TrajectorySchema() []byte { return append([]byte(nil), trajectorySchema...) }

// DecodeTrajectory parses one JSONL line strictly (unknown fields are an
// error, so a typo does not silently drop data), drops a final action the
// environment never answered (Trajectory.TrimUnanswered), and checks the rest
// with Trajectory.Check. Every problem comes back as a *RecordError for
// file:line.
//
// A session as the simulator answers it (GET /v1/sessions/{id}: the
// trajectory plus "page", which turns the reply holds) is a trajectory
// too, when the page holds every turn; a page of a longer session is
// refused naming the turns it lacks, since a cut transcript would pass
// for a whole one.
func DecodeTrajectory(data []byte, file string, line int) (*trajectory.Trajectory, []*RecordError) {
	t := new(trajectory.Trajectory)
	w := struct {
		*trajectory.Trajectory
		Page *sessionPage `json:"page"`
	}{Trajectory: t}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return nil, []*RecordError{{File: file, Line: line, Field: jsonErrorField(err), Err: fmt.Errorf("%w: %v", ErrBadJSON, err)}}
	}
	if dec.More() {
		return nil, []*RecordError{{File: file, Line: line, Err: fmt.Errorf("%w: trailing data after the object", ErrBadJSON)}}
	}
	if p := w.Page; p != nil && (p.FromTurn != 1 || p.Turns != p.TotalTurns || len(t.Turns) != p.TotalTurns) {
		return nil, []*RecordError{{File: file, Line: line, Field: "page", Err: fmt.Errorf("%w: one page of a session (turns %d to %d of %d): export whole sessions with agentworld data convert --from sessions --db FILE (or ask for every turn: ?limit=, up to 1000)",
			ErrInvalid, p.FromTurn, p.FromTurn+p.Turns-1, p.TotalTurns)}}
	}
	t.TrimUnanswered()
	var errs []*RecordError
	for _, fe := range t.Check() {
		errs = append(errs, &RecordError{File: file, Line: line, Field: fe.Path, Err: fe.Err})
	}
	if len(errs) > 0 {
		return t, errs
	}
	return t, nil
}

// sessionPage is the "page" member of a session reply (server.TurnPage,
// GET /v1/sessions/{id}): which turns the reply holds.
type sessionPage struct {
	FromTurn     int `json:"from_turn"`
	Turns        int `json:"turns"`
	TotalTurns   int `json:"total_turns"`
	NextFromTurn int `json:"next_from_turn,omitempty"`
}

// jsonErrorField pulls the field path out of encoding/json errors.
func jsonErrorField(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return te.Field
	}
	const unk = "json: unknown field "
	if s := err.Error(); strings.HasPrefix(s, unk) {
		return strings.Trim(s[len(unk):], `"`)
	}
	return ""
}

// Validate checks every line of files against the schema and writes one
// "file:line: field: problem" line per problem to report. It returns the
// summary; Summary.Skipped counts the invalid lines. OnError is ignored:
// validation always reads to the end.
func Validate(ctx context.Context, files []string, report io.Writer, opts *Options) (*Summary, error) {
	o := opts.Norm()
	o.OnError = Skip
	var werr error
	o.Report = func(e *RecordError) {
		if werr == nil {
			_, werr = fmt.Fprintln(report, e.Error())
		}
	}
	sum := &Summary{}
	err := Run(ctx, files, o, sum, func(_ int, batch []InLine) (struct{}, []*RecordError, int64, error) {
		var errs []*RecordError
		var ok int64
		for _, l := range batch {
			_, es := DecodeTrajectory(l.Data, l.File, l.N)
			if len(es) == 0 {
				ok++
				continue
			}
			errs = append(errs, es...)
		}
		return struct{}{}, errs, ok, nil
	}, func(struct{}) error { return nil })
	if err == nil {
		err = werr
	}
	return sum, err
}

// ReadTrajectories decodes a whole JSONL file of unified trajectories (a
// .json file: JSON documents, such as a saved session reply) with
// [DecodeTrajectory], for callers that need them all at once (a small
// evaluation set, a test corpus); the first bad line is the error, naming
// file:line. Pipelines stream instead.
func ReadTrajectories(path string) ([]*trajectory.Trajectory, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var lr interface {
		Next() ([]byte, int, error)
	} = trajectory.NewLineReader(f, path, DefaultMaxLine)
	if isDocumentFile(path) { // a saved session reply, pretty-printed
		if lr, err = newDocReader(f, path, DefaultMaxLine); err != nil {
			return nil, err
		}
	}
	var out []*trajectory.Trajectory
	for {
		line, n, err := lr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		var bad *badDocument
		if errors.As(err, &bad) {
			return nil, &RecordError{File: path, Line: n, Err: bad.err}
		}
		if err != nil {
			return nil, err
		}
		t, errs := DecodeTrajectory(line, path, n)
		if len(errs) > 0 {
			return nil, errs[0]
		}
		out = append(out, t)
	}
}
