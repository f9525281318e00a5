package conversation

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/agentworld/agentworld/internal/pytext"
)

// The pieces of a turn as the published data writes it. A user message is
//
//	### Turn N
//	**Action:**
//	<action>
//	[blank line, WorldStateHeading, the world state]
//	[blank line, ControlHeading, the control text]
//
//	<AnswerReminder>
//
// and the observation that answers it is ObservationMarker, a
// newline, and the observation.
const (
	// ObservationMarker opens every real observation in the published data.
	ObservationMarker = "**Environment Observation:**"
	// AnswerReminder ends every user message the simulator sends (and
	// every user message of the training samples built for it): it repeats
	// the answer format where a long history would otherwise bury it. It is
	// the same in every message, so messages already sent never change.
	AnswerReminder = "Predict the environment's observation for this action. Put it inside <predicted_observation></predicted_observation>."

	turnHeading   = "### Turn "
	actionHeading = "**Action:**"
	// WorldStateHeading opens the facts of a fictional world in the newest
	// user message.
	WorldStateHeading = "**World state (facts already established in this world):**"
	// ControlHeading opens the perturbation text that applies to one step.
	ControlHeading = "**Simulation control (applies to this step only):**"
)

// ActionPrompt renders turn n's action as AgentWorldBench records show it:
// "### Turn n\n**Action:**\n" and the action. An action already in that
// form (one taken from a record) is returned as is, so a record's prompt
// survives a conversion to a trajectory and back. [ParseActionPrompt]
// reads it.
func ActionPrompt(n int, action string) string {
	if strings.HasPrefix(action, turnHeading) {
		return action
	}
	return turnHeading + strconv.Itoa(n) + "\n" + actionHeading + "\n" + action
}

// ParseActionPrompt splits an action prompt into its turn number and
// action; ok is false when s does not start with the heading
// "### Turn N\n**Action:**\n".
func ParseActionPrompt(s string) (n int, action string, ok bool) {
	digits, rest, ok := cutTurnNumber(s, false)
	if !ok || !strings.HasPrefix(rest, "\n") {
		return 0, "", false
	}
	n, err := strconv.Atoi(digits)
	if err != nil {
		return 0, "", false
	}
	return n, rest[1:], true
}

// TrimActionHeading removes a leading "### Turn N\n**Action:**" (the
// newline after it stays) and returns s unchanged when it has none. With
// jsonEscaped, s is the raw content of a JSON string literal, where the
// newline is the two bytes `\n`. It reads bytes or a string without
// copying, for scanning records as they lie in a file.
func TrimActionHeading[S ~string | ~[]byte](s S, jsonEscaped bool) S {
	_, rest, ok := cutTurnNumber(s, jsonEscaped)
	if !ok {
		return s
	}
	return rest
}

// cutTurnNumber matches "### Turn " digits newline "**Action:**" at the
// start of s and returns the digits and what follows the action heading.
func cutTurnNumber[S ~string | ~[]byte](s S, jsonEscaped bool) (digits, rest S, ok bool) {
	if !hasPrefix(s, turnHeading) {
		return s, s, false
	}
	i := len(turnHeading)
	j := i
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	if j == i {
		return s, s, false
	}
	k := j
	switch {
	case k < len(s) && s[k] == '\n':
		k++
	case jsonEscaped && k+1 < len(s) && s[k] == '\\' && s[k+1] == 'n':
		k += 2
	default:
		return s, s, false
	}
	if !hasPrefix(s[k:], actionHeading) {
		return s, s, false
	}
	return s[i:j], s[k+len(actionHeading):], true
}

// hasPrefix compares byte by byte: a conversion to string would copy in
// generic code, and the dataset statistics call this once per turn.
func hasPrefix[S ~string | ~[]byte](s S, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		if s[i] != prefix[i] {
			return false
		}
	}
	return true
}

// ObservationResponse renders an observation as it answers an action: the
// assistant message of the simulator's requests and of training samples,
// and a record's response. It opens with the observation marker; an
// observation that already does (one taken from a record) is returned as
// is. [TrimObservationMarker] reads it.
func ObservationResponse(obs string) string {
	if strings.HasPrefix(obs, ObservationMarker) {
		return obs
	}
	return ObservationMarker + "\n" + obs
}

// TrimObservationMarker removes a leading observation marker and the
// newline after it, if there is one of each; for the published judge's
// rule, which removes the marker anywhere, see [StripObservationMarker].
func TrimObservationMarker[S ~string | ~[]byte](s S) S {
	if !hasPrefix(s, ObservationMarker) {
		return s
	}
	s = s[len(ObservationMarker):]
	if len(s) > 0 && s[0] == '\n' {
		s = s[1:]
	}
	return s
}

// StripObservationMarker removes the observation marker the way the
// published judge does for predictions and ground truths: a leading marker
// is dropped once, otherwise every occurrence is removed; then white space
// is trimmed.
func StripObservationMarker(s string) string {
	if strings.HasPrefix(s, ObservationMarker) {
		s = s[len(ObservationMarker):]
	} else {
		s = strings.ReplaceAll(s, ObservationMarker, "")
	}
	return pytext.Strip(s)
}

// UserMessage renders turn n's action as the simulator sends it and as
// training samples show it: the [ActionPrompt], then the optional world
// state and control text under their headings, then the answer reminder.
// Only the newest message carries a step's world state and control text;
// once sent, a message is recorded and repeated verbatim, which keeps every
// request a byte prefix of the next. [ParseUserMessage] reads it.
func UserMessage(n int, action, worldState, control string) string {
	// Every step renders one, so it is written into a buffer of its exact
	// size: one allocation.
	var num [20]byte
	digits := num[:0]
	size := len(action) + 2 + len(AnswerReminder)
	heading := !strings.HasPrefix(action, turnHeading) // else ActionPrompt keeps it as is
	if heading {
		digits = strconv.AppendInt(digits, int64(n), 10)
		size += len(turnHeading) + len(digits) + 1 + len(actionHeading) + 1
	}
	worldState, control = strings.TrimSpace(worldState), strings.TrimSpace(control)
	if worldState != "" {
		size += len(WorldStateHeading) + len(worldState) + 3
	}
	if control != "" {
		size += len(ControlHeading) + len(control) + 3
	}
	var b strings.Builder
	b.Grow(size)
	if heading {
		b.WriteString(turnHeading)
		b.Write(digits)
		b.WriteString("\n" + actionHeading + "\n")
	}
	b.WriteString(action)
	b.WriteString("\n")
	if worldState != "" {
		b.WriteString("\n" + WorldStateHeading + "\n")
		b.WriteString(worldState)
		b.WriteString("\n")
	}
	if control != "" {
		b.WriteString("\n" + ControlHeading + "\n")
		b.WriteString(control)
		b.WriteString("\n")
	}
	b.WriteString("\n" + AnswerReminder)
	return b.String()
}

// ParseUserMessage splits a user message into its parts; an error says
// which part is missing. A truncation note the simulator puts before the
// first shown message is not part of the message and is not accepted.
func ParseUserMessage(msg string) (n int, action, worldState, control string, err error) {
	body, ok := strings.CutSuffix(msg, "\n\n"+AnswerReminder)
	if !ok {
		return 0, "", "", "", fmt.Errorf("user message: does not end with the answer reminder")
	}
	n, rest, ok := ParseActionPrompt(body)
	if !ok {
		return 0, "", "", "", fmt.Errorf("user message: does not start with %q", turnHeading+"N\n"+actionHeading)
	}
	if a, c, ok := strings.Cut(rest, "\n\n"+ControlHeading+"\n"); ok {
		rest, control = a, c
	}
	if a, w, ok := strings.Cut(rest, "\n\n"+WorldStateHeading+"\n"); ok {
		rest, worldState = a, w
	}
	return n, rest, worldState, control, nil
}

// Example renders the n-th few-shot demonstration of a system prompt: "##
// Example n", the action under "**Action:**", then the observation after
// the observation marker, both trimmed.
func Example(n int, action, obs string) string {
	return fmt.Sprintf("## Example %d\n%s\n%s\n%s\n%s", n, actionHeading, strings.TrimSpace(action), ObservationMarker, strings.TrimSpace(obs))
}
