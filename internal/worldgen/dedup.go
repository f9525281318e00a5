package worldgen

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/itemf1"
	"github.com/agentworld/agentworld/internal/library"
	"github.com/agentworld/agentworld/internal/world"
)

// fingerprint hashes normalized text.
func fingerprint(parts ...string) uint64 {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return binary.BigEndian.Uint64(h.Sum(nil))
}

// worldFP is a world's exact fingerprint: its domain, its tools (names
// and schemas, in name order) and its normalized state (the initial
// state, and a fictional world's facts).
func worldFP(s *world.Spec) uint64 {
	tools, state := worldParts(s)
	return fingerprint(string(s.Domain), tools, itemf1.Normalize(s.ActionSpace.Description), itemf1.Normalize(state))
}

// worldParts are the texts a world's fingerprints read: its tools, one
// line each in name order, and its state.
func worldParts(s *world.Spec) (tools, state string) {
	lines := make([]string, 0, len(s.ActionSpace.Tools))
	for _, t := range s.ActionSpace.Tools {
		sc, _ := conversation.CanonicalJSON(string(t.InputSchema))
		lines = append(lines, strings.ToLower(t.Name)+" "+sc)
	}
	sort.Strings(lines)
	state = s.InitialState
	if s.Facts != nil {
		state += "\n" + s.Facts.Render()
	}
	return strings.Join(lines, "\n"), state
}

// worldSig is a world's near-duplicate signature (see neardup.go) over
// its description and state, and the scope it is compared in: worlds of
// the same domain with the same tools. A world with other tools is
// another world however alike its state (an imported server's mutations
// rename, add and remove tools on purpose).
func worldSig(s *world.Spec) (sig signature, scope string, ok bool) {
	tools, state := worldParts(s)
	sig, ok = shingleSignature(s.ActionSpace.Description + "\n" + state)
	return sig, fmt.Sprintf("%s\x00%x", s.Domain, fingerprint(tools)), ok
}

func taskFP(t *library.TaskEntry) uint64 { return fingerprint(itemf1.Normalize(t.Instruction)) }

// stored reports whether the library holds this very world (same name
// and fingerprint) and how many of its tasks.
func (r *run) stored(s *world.Spec) (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.worldFPs[worldFP(s)] != s.Name {
		return 0, false
	}
	return r.storedTasks[s.Name], true
}

// dedup is the dedup rung: a world whose fingerprint an accepted (or
// earlier in-flight) world has is rejected; a task whose instruction an
// earlier task has is dropped. Fingerprints are claimed here and kept
// even if the candidate fails a later rung: its near-duplicates would
// most likely fail the same way.
func (r *run) dedup(s *world.Spec, tasks *[]*library.TaskEntry, v *verdict) *rejection {
	r.mu.Lock()
	defer r.mu.Unlock()
	fp := worldFP(s)
	if prev, ok := r.worldFPs[fp]; ok {
		return reject(RungDedup, "near-duplicate of world %s (same tools and state)", prev)
	}
	var wsig signature
	var wscope string
	wlong := false
	if r.nearWorlds != nil {
		wsig, wscope, wlong = worldSig(s)
	}
	if wlong {
		if prev, sim, ok := r.nearWorlds.find(wscope, s.Name, &wsig); ok {
			return reject(RungDedup, "near-duplicate of world %s (same tools; description and state %.0f%% alike)", prev, 100*sim)
		}
	}
	var kept []*library.TaskEntry
	claimed := map[uint64]bool{}
	for _, t := range *tasks {
		tf := taskFP(t)
		if prev, ok := r.taskFPs[tf]; ok || claimed[tf] {
			if !ok {
				prev = "a task of the same world"
			}
			v.TaskRej = append(v.TaskRej, taskReject{ID: t.ID, rejection: *reject(RungDedup, "same instruction as %s", prev)})
			continue
		}
		claimed[tf] = true
		kept = append(kept, t)
	}
	if len(kept) == 0 {
		return reject(RungDedup, "every task duplicates an earlier one")
	}
	r.worldFPs[fp] = s.Name
	if wlong {
		r.nearWorlds.add(wscope, s.Name, &wsig)
	}
	for _, t := range kept {
		r.taskFPs[taskFP(t)] = t.ID
	}
	*tasks = kept
	return nil
}

// loadFingerprints claims the fingerprints of the library's worlds and
// tasks (a resumed run, or a library generated into again).
func (r *run) loadFingerprints() error {
	if err := r.lib.Worlds(library.Filter{}, func(w *library.WorldEntry) error {
		r.worldFPs[worldFP(w.Spec)] = w.Spec.Name
		if sig, scope, ok := worldSig(w.Spec); ok {
			r.nearWorlds.add(scope, w.Spec.Name, &sig)
		}
		return nil
	}); err != nil {
		return err
	}
	return r.lib.Tasks(library.Filter{}, func(t *library.TaskEntry, _ string) error {
		r.taskFPs[taskFP(t)] = t.ID
		r.storedTasks[t.World]++
		return nil
	})
}
