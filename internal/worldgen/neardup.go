package worldgen

import (
	"encoding/binary"
	"hash/fnv"
	"strings"

	"github.com/agentworld/agentworld/internal/itemf1"
)

// Near-duplicate worlds. Exact fingerprints (dedup.go) catch a candidate
// that repeats an earlier one after normalization; a generator asked for
// many worlds also writes the same world again with a sentence or a name
// changed. Those are caught by estimated Jaccard similarity of word
// 3-shingles of the world's description and state, among worlds of the
// same domain and tools: MinHash signatures, indexed by locality-sensitive
// hashing so that each candidate is compared only with the few library
// worlds that share a band of its signature (Broder's near-duplicate
// detection, as web crawls use it), never with all of them.
//
// Texts shorter than minShingles shingles are left to the exact
// fingerprints: in a short state one changed word (another issue key,
// another board) changes most shingles, and such states are usually
// different worlds, not rewordings.
const (
	// DefaultNearDuplicate is the estimated Jaccard similarity at or above
	// which a world or task is a near-duplicate of an earlier one.
	DefaultNearDuplicate = 0.9
	// minhashSize is the signature's length: the estimate's standard error
	// is at most 1/(2·√minhashSize), 0.0625.
	minhashSize = 64
	// lshBands × lshRows = minhashSize. A pair at similarity s shares a band
	// with probability 1−(1−s⁴)¹⁶: 0.89 at s=0.6, 0.9998 at s=0.8, so pairs
	// at or above the default threshold are examined; the estimate then decides.
	lshBands = 16
	lshRows  = minhashSize / lshBands
	// minShingles is the shortest text (in 3-word shingles) compared.
	minShingles = 8
)

// signature is a text's MinHash signature.
type signature [minhashSize]uint32

// shingleSignature returns the MinHash signature of text's normalized
// word 3-shingles, and false when it has fewer than minShingles of them.
func shingleSignature(text string) (signature, bool) {
	words := strings.Fields(itemf1.Normalize(text))
	var sig signature
	if len(words)-2 < minShingles {
		return sig, false
	}
	for i := range sig {
		sig[i] = ^uint32(0)
	}
	for i := 0; i+3 <= len(words); i++ {
		h := fnv.New64a()
		h.Write([]byte(words[i]))
		h.Write([]byte{0})
		h.Write([]byte(words[i+1]))
		h.Write([]byte{0})
		h.Write([]byte(words[i+2]))
		x := h.Sum64()
		for k := range sig {
			// one hash function per slot: the shingle's hash mixed with
			// the slot's own constant (splitmix64's finalizer)
			v := x + uint64(k+1)*0x9e3779b97f4a7c15
			v = (v ^ (v >> 30)) * 0xbf58476d1ce4e5b9
			v = (v ^ (v >> 27)) * 0x94d049bb133111eb
			v ^= v >> 31
			if u := uint32(v); u < sig[k] {
				sig[k] = u
			}
		}
	}
	return sig, true
}

// similarity estimates the Jaccard similarity of the shingle sets behind
// two signatures.
func (a *signature) similarity(b *signature) float64 {
	same := 0
	for k := range a {
		if a[k] == b[k] {
			same++
		}
	}
	return float64(same) / minhashSize
}

// nearIndex finds, among the signatures added so far, one similar to a
// new signature. Its memory is a signature and lshBands map entries per
// entry (about 1 KiB): a library of 1,000 worlds holds about 1 MiB here. Not safe for concurrent use (the run's mutex guards it).
type nearIndex struct {
	threshold float64
	names     []string
	sigs      []signature
	bands     [lshBands]map[uint64][]int32
}

func newNearIndex(threshold float64) *nearIndex {
	ix := &nearIndex{threshold: threshold}
	for b := range ix.bands {
		ix.bands[b] = map[uint64][]int32{}
	}
	return ix
}

// bandKey hashes band b of sig, with scope (a world's domain and tools)
// so that only entries of the same scope meet.
func bandKey(scope string, sig *signature, b int) uint64 {
	h := fnv.New64a()
	h.Write([]byte(scope))
	var buf [4 * lshRows]byte
	for r := range lshRows {
		binary.LittleEndian.PutUint32(buf[4*r:], sig[b*lshRows+r])
	}
	h.Write(buf[:])
	return h.Sum64()
}

// find returns the name and estimated similarity of the most similar
// entry of scope at or above the threshold, other than one named self.
func (ix *nearIndex) find(scope, self string, sig *signature) (string, float64, bool) {
	if ix == nil {
		return "", 0, false
	}
	best, bestSim := -1, 0.0
	seen := map[int32]bool{}
	for b := range ix.bands {
		for _, i := range ix.bands[b][bandKey(scope, sig, b)] {
			if seen[i] || ix.names[i] == self {
				continue
			}
			seen[i] = true
			if s := ix.sigs[i].similarity(sig); s >= ix.threshold && s > bestSim {
				best, bestSim = int(i), s
			}
		}
	}
	if best < 0 {
		return "", 0, false
	}
	return ix.names[best], bestSim, true
}

// add indexes sig under name.
func (ix *nearIndex) add(scope, name string, sig *signature) {
	if ix == nil {
		return
	}
	i := int32(len(ix.sigs))
	ix.names = append(ix.names, name)
	ix.sigs = append(ix.sigs, *sig)
	for b := range ix.bands {
		k := bandKey(scope, sig, b)
		ix.bands[b][k] = append(ix.bands[b][k], i)
	}
}
