package sim

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strings"

	"github.com/agentworld/agentworld/internal/fielderr"
	"github.com/agentworld/agentworld/internal/world"
)

// Bounds of inline world specs, the part of a session a client sizes. The
// bundled worlds are a few KB and a large imported MCP server's tool list
// some hundred KB; a session holds its spec several times over (parsed,
// as JSON in its record, rendered into the system prompt), so the byte
// bound is what bounds a session's size before its first step.
const (
	// DefaultMaxInlineSpecBytes is Options.MaxInlineSpecBytes's default.
	DefaultMaxInlineSpecBytes = 1 << 20
	// DefaultMaxInlineTools is Options.MaxInlineTools's default.
	DefaultMaxInlineTools = 512
	// DefaultMaxSessionBytes is Options.MaxSessionBytes's default: about
	// 128 times the text of a full 128K-token context, so real episodes
	// never meet it, while one session cannot grow without bound. (10,000
	// sessions at the limit would still need 640 GB: operators of many
	// sessions lower it.)
	DefaultMaxSessionBytes = 64 << 20
)

// sizeLocked is what the session holds in memory by
// Options.MaxSessionBytes's measure, an inline spec's compiled schemas and
// regular expressions included. The caller holds s.mu.
func (s *session) sizeLocked() int {
	return len(s.rec.Spec) + len(s.rec.SystemPrompt) + len(s.rec.InitialObservation) + s.compiled + s.turnBytes
}

// turnBytes is one turn's share of a session's size: the texts it keeps
// (the result repeats the observation, counted once more).
func turnBytes(t HistoryTurn) int {
	return len(t.Action) + 2*len(t.Observation) + len(t.Message) + len(t.Assistant)
}

// ParseInlineSpec reads a world spec a client sent inline (a JSON object),
// within the manager's bounds: a spec over MaxInlineSpecBytes is refused
// before it is parsed (ErrTooLarge, field "world"), and one with more than
// MaxInlineTools tools after (ErrTooLarge, field
// "world.action_space.tools"). Other errors are FieldErrors naming
// world.<field>.
func (m *Manager) ParseInlineSpec(raw []byte) (*world.Spec, error) {
	if lim := m.opts.MaxInlineSpecBytes; lim > 0 && len(raw) > lim {
		return nil, fielderr.New(ErrTooLarge, "world", "inline world spec of %d bytes exceeds the server's limit of %d bytes; load large worlds on the server and name them with world_id", len(raw), lim).WithSetting("MaxInlineSpecBytes")
	}
	spec, err := world.Parse(raw, "inline")
	if err != nil {
		if _, ok := fielderr.As(err); ok {
			return nil, fielderr.Under(ErrBadRequest, "world", err)
		}
		msg := strings.TrimPrefix(err.Error(), "inline: ")
		if i := strings.Index(msg, "unknown field "); i >= 0 {
			return nil, badField("world."+strings.Trim(msg[i+len("unknown field "):], `"`), "unknown field")
		}
		return nil, badField("world", "%s", msg)
	}
	if err := m.checkInlineTools(spec); err != nil {
		return nil, err
	}
	return spec, nil
}

// checkInlineTools applies MaxInlineTools to an inline spec.
func (m *Manager) checkInlineTools(spec *world.Spec) error {
	if lim := m.opts.MaxInlineTools; lim > 0 && len(spec.ActionSpace.Tools) > lim {
		return fielderr.New(ErrTooLarge, "world.action_space.tools", "%d tools exceed the server's limit of %d", len(spec.ActionSpace.Tools), lim).WithSetting("MaxInlineTools")
	}
	return nil
}

// checkInlineSampling refuses extra_body keys of an inline spec the
// operator did not allow (Options.ExtraBodyKeys): a client must not steer
// what the world-model server is asked beyond the sampling settings a spec
// has fields for.
func (m *Manager) checkInlineSampling(spec *world.Spec) error {
	if spec.Sampling == nil {
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(spec.Sampling.Extra)) {
		if !slices.Contains(m.opts.ExtraBodyKeys, k) {
			allowed := "none"
			if len(m.opts.ExtraBodyKeys) > 0 {
				allowed = strings.Join(m.opts.ExtraBodyKeys, ", ")
			}
			return fielderr.New(ErrBadRequest, "world.sampling.extra_body."+k,
				"not allowed in an inline spec (the server allows: %s)", allowed).WithSetting("ExtraBodyKeys")
		}
	}
	return nil
}

// checkModel refuses a session model the operator did not list
// (Options.Models).
func (m *Manager) checkModel(name string) error {
	if name == "" || slices.Contains(m.opts.Models, name) {
		return nil
	}
	if len(m.opts.Models) == 0 {
		return fielderr.New(ErrBadRequest, "model", "%q: this server does not let clients choose the model", name).WithSetting("Models")
	}
	return fielderr.New(ErrBadRequest, "model", "%q is not served here (the server allows: %s)", name, strings.Join(m.opts.Models, ", ")).WithSetting("Models")
}

// inlineDigest is SessionRecord.Inline for a new session: the hex SHA-256
// of its spec's JSON when the client sent the spec inline, else "".
func inlineDigest(req CreateRequest, specJSON []byte) string {
	if req.World == nil {
		return ""
	}
	sum := sha256.Sum256(specJSON)
	return hex.EncodeToString(sum[:])
}
