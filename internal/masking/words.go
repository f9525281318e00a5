// Package masking decides which turns of a trajectory a model trains on
// and how much: it computes the four word-overlap statistics of every turn
// (the [Scorer], on the fast JSON walker or decoded text), classifies the
// turn into a loss-masking category with its weight ([MaskingConfig], the
// defaults in masking.yaml), writes the per-turn masking rows
// (`agentworld data mask`), and calibrates category bounds per domain
// (`data mask --calibrate`). Everything streams through package datapipe.
package masking

import (
	"math/bits"
	"unicode"
	"unicode/utf8"
	"unsafe"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/jsonunquote"
)

// Stats are the four word-overlap statistics of one (action, observation)
// pair, plus the counts they come from.
//
// The format markers of the published records are removed first: a leading
// "### Turn N\n**Action:**" of the action and a leading
// "**Environment Observation:**" of the observation.
//
// Words are maximal runs of Unicode letters (category L), decimal digits
// (category Nd) and '_', lower-cased one character at a time (simple case
// mapping). W_act and W_obs are the sets of distinct words.
//
//	OL  = |W_act ∩ W_obs| / |W_act|      0 when the action has no words
//	Nov = |W_obs \ W_act| / |W_obs|      0 when the observation has no words
//	Jac = |W_act ∩ W_obs| / |W_act ∪ W_obs|  0 when both have no words
//	R   = obs words / act words          counted with repetition; the
//	                                     denominator is at least 1, so an
//	                                     action without words gives R = obs words
type Stats struct {
	OL  float64 `json:"ol"`
	Nov float64 `json:"nov"`
	Jac float64 `json:"jac"`
	R   float64 `json:"r"`
	// ActWords and ObsWords count words with repetition.
	ActWords int `json:"act_words"`
	ObsWords int `json:"obs_words"`
	// ActDistinct, ObsDistinct and Shared are |W_act|, |W_obs| and
	// |W_act ∩ W_obs|.
	ActDistinct int `json:"act_distinct"`
	ObsDistinct int `json:"obs_distinct"`
	Shared      int `json:"shared"`
}

// finish fills the ratios from the counts.
func (s *Stats) finish() {
	if s.ActDistinct > 0 {
		s.OL = float64(s.Shared) / float64(s.ActDistinct)
	}
	if s.ObsDistinct > 0 {
		s.Nov = float64(s.ObsDistinct-s.Shared) / float64(s.ObsDistinct)
	}
	if u := s.ActDistinct + s.ObsDistinct - s.Shared; u > 0 {
		s.Jac = float64(s.Shared) / float64(u)
	}
	s.R = float64(s.ObsWords) / float64(max(s.ActWords, 1))
}

// Scorer computes Stats. It keeps its hash tables between calls so that
// scoring allocates nothing in steady state; a Scorer is not safe for
// concurrent use (give each worker its own).
//
// Words are compared by a 64-bit FNV-1a hash of their lower-cased UTF-8
// bytes; two different words of one turn colliding is ~n²/2⁶⁵, negligible for
// the few thousand words a turn has.
type Scorer struct {
	act, obs wordSet
	// buf, words and ks are the structured action's scratch (actionWords).
	buf       []byte
	words, ks []uint64
}

// Score computes the statistics of an action and its observation.
func (sc *Scorer) Score(action, observation string) Stats {
	return sc.score(UnsafeBytes(action), UnsafeBytes(observation), false)
}

// ScoreJSON computes the statistics from the raw contents of two JSON string
// literals (without the quotes), interpreting escapes on the fly, so the
// strings never need decoding. The result equals Score on the decoded text.
func (sc *Scorer) ScoreJSON(actionRaw, observationRaw []byte) Stats {
	return sc.score(actionRaw, observationRaw, true)
}

func (sc *Scorer) score(a, o []byte, escaped bool) Stats {
	a, o = conversation.TrimActionHeading(a, escaped), conversation.TrimObservationMarker(o)
	sc.act.reset()
	sc.obs.reset()
	var st Stats
	st.ActWords = sc.actionWords(a, escaped)
	st.ObsWords = scanWords(o, escaped, func(h uint64) {
		if sc.obs.add(h) && sc.act.has(h) {
			st.Shared++
		}
	})
	st.ActDistinct = sc.act.n
	st.ObsDistinct = sc.obs.n
	st.finish()
	return st
}

// Words returns the distinct words of s in order of first appearance; it is
// the readable form of the definition Score hashes, used by tests and docs.
func Words(s string) []string {
	var out []string
	seen := map[string]bool{}
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			w := string(cur)
			if !seen[w] {
				seen[w] = true
				out = append(out, w)
			}
			cur = cur[:0]
		}
	}
	for _, r := range s {
		if isWordRune(r) {
			cur = append(cur, unicode.ToLower(r))
		} else {
			flush()
		}
	}
	flush()
	return out
}

func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return asciiClass[r] != 0
	}
	return unicode.IsLetter(r) || unicode.Is(unicode.Nd, r)
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// asciiClass maps an ASCII byte to its lower-case form when it belongs to a
// word, and to 0 otherwise.
var asciiClass = func() (t [128]byte) {
	for c := 0; c < 128; c++ {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_':
			t[c] = byte(c)
		case c >= 'A' && c <= 'Z':
			t[c] = byte(c + 'a' - 'A')
		}
	}
	return t
}()

// scanWords calls emit with the hash of every word of b and returns the
// number of words. With escaped set, b is the inside of a JSON string
// literal: "\uXXXX" escapes (surrogate pairs included) are decoded and every
// other escape stands for a character that is not part of a word.
func scanWords(b []byte, escaped bool, emit func(uint64)) int {
	n := 0
	h := uint64(fnvOffset)
	in := false
	i := 0
	for i < len(b) {
		c := b[i]
		if c < utf8.RuneSelf {
			if lc := asciiClass[c]; lc != 0 {
				h = (h ^ uint64(lc)) * fnvPrime
				in = true
				i++
				continue
			}
			if c == '\\' && escaped {
				r, size := decodeEscape(b[i:])
				i += size
				if r >= utf8.RuneSelf && isWordRune(r) {
					h = hashRune(h, unicode.ToLower(r))
					in = true
					continue
				}
				if r >= 0 && r < utf8.RuneSelf {
					if lc := asciiClass[r]; lc != 0 {
						h = (h ^ uint64(lc)) * fnvPrime
						in = true
						continue
					}
				}
			} else {
				i++
			}
			if in {
				emit(h)
				n++
				h = fnvOffset
				in = false
			}
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		i += size
		if isWordRune(r) {
			h = hashRune(h, unicode.ToLower(r))
			in = true
			continue
		}
		if in {
			emit(h)
			n++
			h = fnvOffset
			in = false
		}
	}
	if in {
		emit(h)
		n++
	}
	return n
}

func hashRune(h uint64, r rune) uint64 {
	var buf [utf8.UTFMax]byte
	k := utf8.EncodeRune(buf[:], r)
	for _, c := range buf[:k] {
		h = (h ^ uint64(c)) * fnvPrime
	}
	return h
}

// decodeEscape decodes the JSON escape at the start of b as encoding/json
// does ([jsonunquote.Escape]) and returns the character and the bytes
// consumed. A malformed escape, which the line walker refuses before
// anything is scored, gives U+FFFD for the backslash and the byte after it.
func decodeEscape(b []byte) (rune, int) {
	if r, n, ok := jsonunquote.Escape(b); ok {
		return r, n
	}
	return utf8.RuneError, min(2, len(b))
}

// wordSet is an open-addressing set of word hashes that keeps its table
// between turns.
type wordSet struct {
	keys  []uint64
	n     int
	shift uint
	// dirty lists the slots in use so reset costs O(n), not O(table).
	dirty []uint32
}

func (s *wordSet) reset() {
	if len(s.dirty) > len(s.keys)/4 {
		clear(s.keys)
	} else {
		for _, i := range s.dirty {
			s.keys[i] = 0
		}
	}
	s.dirty = s.dirty[:0]
	s.n = 0
}

func (s *wordSet) slot(h uint64) uint64 { return (h * 0x9E3779B97F4A7C15) >> s.shift }

// add inserts h and reports whether it was new.
func (s *wordSet) add(h uint64) bool {
	if h == 0 {
		h = 1
	}
	if (s.n+1)*2 > len(s.keys) {
		s.grow()
	}
	mask := uint64(len(s.keys) - 1)
	for i := s.slot(h); ; i = (i + 1) & mask {
		switch s.keys[i] {
		case h:
			return false
		case 0:
			s.keys[i] = h
			s.dirty = append(s.dirty, uint32(i))
			s.n++
			return true
		}
	}
}

func (s *wordSet) has(h uint64) bool {
	if h == 0 {
		h = 1
	}
	if len(s.keys) == 0 {
		return false
	}
	mask := uint64(len(s.keys) - 1)
	for i := s.slot(h); ; i = (i + 1) & mask {
		switch s.keys[i] {
		case h:
			return true
		case 0:
			return false
		}
	}
}

func (s *wordSet) grow() {
	size := max(len(s.keys)*2, 256)
	old := s.keys
	s.keys = make([]uint64, size)
	s.shift = uint(64 - bits.TrailingZeros(uint(size)))
	s.dirty = s.dirty[:0]
	s.n = 0
	for _, h := range old {
		if h != 0 {
			s.add(h)
		}
	}
}

// unsafeBytes views a string's bytes without copying; the scanner only reads.
func UnsafeBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
