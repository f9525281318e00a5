package server

import (
	"strconv"

	"github.com/agentworld/agentworld/internal/api"
)

// decodeStepRequest decodes the body of POST /v1/sessions/{id}/step as
// decodeStrict does. The usual body, {"action": "…", "turn": n} with those
// keys spelled so, each at most once, is read by scanStepRequest without
// reflection; any other body goes to decodeStrict.
func decodeStepRequest(body []byte) (api.StepSessionRequest, error) {
	if req, ok := scanStepRequest(body); ok {
		return req, nil
	}
	var req api.StepSessionRequest
	err := decodeStrict(body, &req, false)
	return req, err
}

// scanStepRequest reads an object of a string "action" and an integer
// "turn" (either may be missing, or null) and nothing else; ok false for
// anything else, including every body decodeStrict refuses
// (FuzzScanStepRequest). The action keeps its literal, as json.RawMessage
// does.
func scanStepRequest(b []byte) (req api.StepSessionRequest, ok bool) {
	i := jsonSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return req, false
	}
	var seenAction, seenTurn bool
	if i = jsonSpace(b, i+1); i < len(b) && b[i] == '}' {
		return req, jsonSpace(b, i+1) == len(b)
	}
	for {
		var key string
		switch {
		case hasAt(b, i, `"action"`):
			key, i = "action", i+len(`"action"`)
		case hasAt(b, i, `"turn"`):
			key, i = "turn", i+len(`"turn"`)
		default:
			return req, false
		}
		if i = jsonSpace(b, i); i >= len(b) || b[i] != ':' {
			return req, false
		}
		i = jsonSpace(b, i+1)
		null := hasAt(b, i, "null")
		switch {
		case key == "action" && !seenAction:
			seenAction = true
			end := i + len("null")
			if !null {
				if end = jsonStringEnd(b, i); end < 0 {
					return req, false
				}
			}
			req.Action, i = b[i:end:end], end
		case key == "turn" && !seenTurn:
			seenTurn = true
			if null {
				i += len("null")
				break
			}
			end := i
			if end < len(b) && b[end] == '-' {
				end++
			}
			digits := end
			for end < len(b) && '0' <= b[end] && b[end] <= '9' {
				end++
			}
			// JSON's grammar (no leading zero) and an int with room to
			// spare; a fraction or exponent goes to decodeStrict.
			if n := end - digits; n == 0 || n > 18 || (n > 1 && b[digits] == '0') {
				return req, false
			}
			t, err := strconv.Atoi(string(b[i:end]))
			if err != nil {
				return req, false
			}
			req.Turn, i = t, end
		default:
			return req, false
		}
		if i = jsonSpace(b, i); i < len(b) && b[i] == ',' {
			i = jsonSpace(b, i+1)
			continue
		}
		if i >= len(b) || b[i] != '}' || jsonSpace(b, i+1) != len(b) {
			return req, false
		}
		return req, true
	}
}

// jsonSpace returns the index of the first byte at or after i that is not
// JSON white space.
func jsonSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// hasAt reports whether b holds s at i.
func hasAt(b []byte, i int, s string) bool {
	return len(b)-i >= len(s) && string(b[i:i+len(s)]) == s
}

// jsonStringEnd returns the index after the JSON string literal at i, or
// -1 when there is none there: the literal's bytes are those encoding/json
// accepts (no control characters; escapes \" \\ \/ \b \f \n \r \t and \u
// with four hex digits; any other byte as is).
func jsonStringEnd(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return j + 1
		case c < 0x20:
			return -1
		case c == '\\':
			if j+1 >= len(b) {
				return -1
			}
			switch b[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j++
			case 'u':
				if len(b)-j < 6 {
					return -1
				}
				for _, h := range b[j+2 : j+6] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return -1
					}
				}
				j += 5
			default:
				return -1
			}
		}
	}
	return -1
}
