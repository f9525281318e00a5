package convert

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/agentworld/agentworld/internal/trajectory"
)

// Record layouts: how a record line of AgentWorldBench data is spelled, so
// converting records to trajectories and back gives the same bytes, not
// only the same fields. The published files are written by Python's
// json.dumps; agentworld writes compact JSON.
const (
	// layoutCompact is agentworld's own: no spaces, non-ASCII text as is
	// (U+2028 and U+2029 escaped, as Go does).
	layoutCompact = ""
	// layoutPython is json.dumps(ensure_ascii=False): ", " and ": "
	// separators, every non-ASCII character as is.
	layoutPython = "python"
	// layoutPythonASCII is json.dumps' default: ", " and ": " separators,
	// every non-ASCII character as a \uXXXX escape.
	layoutPythonASCII = "python-ascii"
)

// encodeRecord writes rec in the given layout, without a newline.
func encodeRecord(rec *trajectory.Record, layout string) ([]byte, error) {
	b, err := trajectory.Marshal(rec)
	if err != nil {
		return nil, err
	}
	switch layout {
	case layoutCompact:
		return b, nil
	case layoutPython, layoutPythonASCII:
		var c bytes.Buffer
		if err := json.Compact(&c, b); err != nil {
			return nil, err
		}
		return pythonLayout(c.Bytes(), layout == layoutPythonASCII), nil
	}
	return nil, fmt.Errorf("unknown record layout %q", layout)
}

// detectLayout returns the layout in which rec, rebuilt with its keys in
// the canonical order (as TrajectoryToRecords rebuilds it), spells line
// exactly; ok is false when none does (other key order or spacing), and
// then only the fields survive a round trip.
func detectLayout(rec *trajectory.Record, line []byte) (layout string, ok bool) {
	line = bytes.TrimRight(line, " \t\r")
	fresh := &trajectory.Record{Task: rec.Task, ID: rec.ID, Prompt: rec.Prompt, Response: rec.Response,
		CurrentPrompt: rec.CurrentPrompt, SystemStr: rec.SystemStr, TurnIdx: rec.TurnIdx, TotalTurns: rec.TotalTurns, Extra: rec.Extra}
	b, err := trajectory.Marshal(fresh)
	if err != nil {
		return layoutCompact, false
	}
	if bytes.Equal(b, line) {
		return layoutCompact, true
	}
	if !bytes.HasPrefix(line, []byte(`{"`)) || bytes.HasPrefix(line, []byte(`{"task":"`)) {
		return layoutCompact, false
	}
	var c bytes.Buffer
	if json.Compact(&c, b) != nil {
		return layoutCompact, false
	}
	for _, l := range []string{layoutPython, layoutPythonASCII} {
		if bytes.Equal(pythonLayout(c.Bytes(), l == layoutPythonASCII), line) {
			return l, true
		}
	}
	return layoutCompact, false
}

// pythonLayout respaces compact JSON the way Python's json.dumps writes it:
// a space after every ',' and ':' outside strings; U+2028 and U+2029 as
// they are, or, when ascii is set, every non-ASCII character escaped as
// \uXXXX (UTF-16 surrogate pairs above U+FFFF), lowercase hex.
func pythonLayout(compact []byte, ascii bool) []byte {
	out := make([]byte, 0, len(compact)+len(compact)/16)
	inString := false
	for i := 0; i < len(compact); i++ {
		c := compact[i]
		if !inString {
			out = append(out, c)
			switch c {
			case '"':
				inString = true
			case ',', ':':
				out = append(out, ' ')
			}
			continue
		}
		switch {
		case c == '"':
			inString = false
			out = append(out, c)
		case c == '\\' && i+1 < len(compact):
			if !ascii && i+5 < len(compact) && compact[i+1] == 'u' {
				switch string(compact[i+2 : i+6]) {
				case "2028":
					out = utf8.AppendRune(out, '\u2028')
					i += 5
					continue
				case "2029":
					out = utf8.AppendRune(out, '\u2029')
					i += 5
					continue
				}
			}
			out = append(out, c, compact[i+1])
			i++
		case c >= utf8.RuneSelf && ascii:
			r, size := utf8.DecodeRune(compact[i:])
			if r > 0xFFFF {
				r -= 0x10000
				out = fmt.Appendf(out, `\u%04x\u%04x`, 0xD800+(r>>10), 0xDC00+(r&0x3FF))
			} else {
				out = fmt.Appendf(out, `\u%04x`, r)
			}
			i += size - 1
		default:
			out = append(out, c)
		}
	}
	return out
}
