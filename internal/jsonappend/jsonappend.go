// Package jsonappend appends JSON values to a byte slice exactly as
// encoding/json writes them without HTML escaping (an Encoder with
// SetEscapeHTML(false)), for encoders of hot paths that write a known
// struct field by field instead of through reflection. Fuzz targets hold
// each function to encoding/json's bytes.
package jsonappend

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// String appends s as a JSON string: the bytes that need no escape as they
// are; \" and \\; \b, \f, \n, \r and \t; \u00xx for the other control
// characters; \ufffd for each byte that is not valid UTF-8; \u2028 and
// \u2029 for the line and paragraph separators, which encoding/json
// escapes for JavaScript's sake.
func String(b []byte, s string) []byte {
	b = append(b, '"')
	done := 0 // s[:done] is in b
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if plain[c] {
				i++
				continue
			}
			b = append(b, s[done:i]...)
			if e := short[c]; e != 0 {
				b = append(b, '\\', e)
			} else {
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			done = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		var esc string
		switch {
		case r == utf8.RuneError && size == 1:
			esc = `\ufffd`
		case r == '\u2028':
			esc = `\u2028`
		case r == '\u2029':
			esc = `\u2029`
		default:
			i += size
			continue
		}
		b = append(append(b, s[done:i]...), esc...)
		i += size
		done = i
	}
	return append(append(b, s[done:]...), '"')
}

const hexDigits = "0123456789abcdef"

// plain marks the ASCII bytes a JSON string holds unescaped.
var plain = func() (t [utf8.RuneSelf]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// short is the letter of each two-byte escape encoding/json writes; 0 for
// bytes written otherwise.
var short = [utf8.RuneSelf]byte{'"': '"', '\\': '\\', '\b': 'b', '\f': 'f', '\n': 'n', '\r': 'r', '\t': 't'}

// Float appends f as encoding/json writes a float64: the shortest decimal
// that reads back as f, in exponent form only for magnitudes below 1e-6
// or from 1e21 on, whose exponent has no leading zero. ok is false, and b
// is returned as it was, for NaN and the infinities, which JSON cannot
// hold (encoding/json reports an error).
func Float(b []byte, f float64) (_ []byte, ok bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, false
	}
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if n := len(b); format == 'e' && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		b[n-2] = b[n-1] // e-07 is written e-7
		b = b[:n-1]
	}
	return b, true
}
