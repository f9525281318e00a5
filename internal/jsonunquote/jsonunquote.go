// Package jsonunquote decodes JSON string literals exactly as
// encoding/json reads them, for one-pass decoders of hot paths that walk
// the bytes of a known shape instead of going through reflection: it finds
// where a literal ends, decodes one escape, and unquotes a whole literal,
// copying it once when it holds no escapes. It is the reading side of
// [github.com/agentworld/agentworld/internal/jsonappend]; fuzz targets hold
// each function to encoding/json.
package jsonunquote

import (
	"bytes"
	"encoding/binary"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// End returns the index in b of the quote that closes a string literal
// whose contents start at b[0]: the first quote not escaped by an odd
// number of backslashes. It is -1 when there is none. Nothing between is
// checked; [Unquote] does that.
func End(b []byte) int {
	for j := 0; ; {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1
		}
		q := j + k
		n := 0
		for p := q - 1; p >= 0 && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q
		}
		j = q + 1
	}
}

// Escape decodes the escape at the start of b, which starts with a
// backslash, returning the rune it stands for and the bytes it spans. A
// \u escape of a high surrogate followed by one of a low surrogate is one
// rune spanning 12 bytes; any other surrogate escape is U+FFFD spanning 6,
// and an escape after it is read on its own, as encoding/json does. ok is
// false for what encoding/json rejects: an unknown letter, a \u without
// four hex digits, b too short, or b not starting with a backslash.
func Escape(b []byte) (r rune, n int, ok bool) {
	if len(b) < 2 || b[0] != '\\' {
		return 0, 0, false
	}
	if c := short[b[1]]; c != 0 {
		return rune(c), 2, true
	}
	if b[1] != 'u' {
		return 0, 0, false
	}
	if r = hex4(b[2:]); r < 0 {
		return 0, 0, false
	}
	if !utf16.IsSurrogate(r) {
		return r, 6, true
	}
	if len(b) >= 12 && b[6] == '\\' && b[7] == 'u' {
		if pair := utf16.DecodeRune(r, hex4(b[8:])); pair != utf8.RuneError {
			return pair, 12, true
		}
	}
	return utf8.RuneError, 6, true
}

// short is what each two-byte escape's letter stands for; 0 for the
// letters that do not make one.
var short = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// hex4 reads the four hex digits at the start of b, or -1 when b does not
// start with four.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// Unquote decodes the contents of a string literal, s being the bytes
// between its quotes: escapes as [Escape] decodes them, each byte that is
// not part of valid UTF-8 as U+FFFD, the rest as it is. ok is false for
// what encoding/json rejects: a bad escape, a control character, or an
// unescaped quote. Contents without escapes that are valid UTF-8 are
// copied once into the string, with nothing decoded.
func Unquote(s []byte) (string, bool) {
	i := run(s, 0)
	// Runs split at ASCII bytes, so s is valid UTF-8 exactly when each
	// run is, and one pass over s answers for every run.
	valid := utf8.Valid(s)
	if i == len(s) && valid {
		return string(s), true
	}
	var out strings.Builder
	out.Grow(len(s))
	for done := 0; ; {
		if valid {
			out.Write(s[done:i])
		} else {
			writeUTF8(&out, s[done:i])
		}
		if i == len(s) {
			return out.String(), true
		}
		if i+1 < len(s) && s[i] == '\\' && short[s[i+1]] != 0 {
			out.WriteByte(short[s[i+1]]) // the common escapes, without a call
			done = i + 2
		} else {
			r, n, ok := Escape(s[i:]) // fails on a quote or a control character too
			if !ok {
				return "", false
			}
			out.WriteRune(r)
			done = i + n
		}
		i = run(s, done)
	}
}

// writeUTF8 writes s with each byte that is not part of valid UTF-8
// replaced by U+FFFD.
func writeUTF8(out *strings.Builder, s []byte) {
	for len(s) > 0 {
		r, size := utf8.DecodeRune(s)
		if r == utf8.RuneError && size == 1 {
			out.WriteRune(utf8.RuneError)
		} else {
			out.Write(s[:size])
		}
		s = s[size:]
	}
}

// run returns the index of the first quote, backslash or control
// character in s at or after i, or len(s). It tests eight bytes at a time
// (the bit tricks of "Bit Twiddling Hacks": a word has a byte below n when
// (x - n·0x01…01) &^ x has a high bit set, and XOR with a repeated quote or
// backslash makes those bytes zero, below 1), since literals are mostly
// long stretches of plain text; the three tests are ORed, not
// short-circuited, as branches cost more than the arithmetic.
func run(s []byte, i int) int {
	for ; i+8 <= len(s); i += 8 {
		x := binary.LittleEndian.Uint64(s[i:])
		q, b := x^(ones*'"'), x^(ones*'\\')
		if ((x-ones*0x20)&^x|(q-ones)&^q|(b-ones)&^b)&(ones*0x80) != 0 {
			break
		}
	}
	for i < len(s) && !special[s[i]] {
		i++
	}
	return i
}

const ones = 0x0101010101010101

// special marks the bytes that end a run of a literal's plain bytes.
var special = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()
