package realenv

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentworld/agentworld/internal/mcpclient"
	"github.com/agentworld/agentworld/internal/sandbox"
)

// sendKeyChunk is the most text one send-keys call types. A tmux client
// sends its whole command line in one message of at most 16 KiB, so a
// longer literal is refused ("command too long"), which used to end the
// episode; longer text is typed in chunks.
const sendKeyChunk = 4096

// maxActionKeystrokes bounds the keystrokes of one action: typing them
// holds the terminal.
const maxActionKeystrokes = 1 << 20

// sendKeyBatch is the most argument text one tmux invocation carries,
// below the client's 16 KiB message.
const sendKeyBatch = 12 << 10

// sendKeyBatches turns key operations into tmux command lines, each a run
// of send-keys commands separated by ";" arguments, so an action costs one
// tmux client (one entry into the sandbox) per 12 KiB instead of one per
// operation.
func sendKeyBatches(pane string, ops []KeyOp) [][]string {
	var out [][]string
	var cur []string
	size := 0
	for _, op := range sendKeyOps(ops) {
		op.Literal = tmuxLiteral(op.Literal)
		args := append([]string{"send-keys", "-t", pane}, op.Args()...)
		n := 0
		for _, a := range args {
			n += len(a) + 1
		}
		if len(cur) > 0 && size+n > sendKeyBatch {
			out = append(out, cur)
			cur, size = nil, 0
		}
		if len(cur) > 0 {
			cur = append(cur, ";")
		}
		cur = append(cur, args...)
		size += n
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// tmuxLiteral escapes text for a tmux command-line argument: tmux takes an
// argument ending in ";" as the end of a command and drops the ";" (and
// turns a final "\;" into ";"), so `find . -exec rm {} \;` used to arrive
// without its backslash. A final ";" is written as "\;", which tmux turns
// back into ";".
func tmuxLiteral(s string) string {
	if strings.HasSuffix(s, ";") {
		return s[:len(s)-1] + `\;`
	}
	return s
}

// sendKeyOps splits literal operations longer than sendKeyChunk bytes, on
// UTF-8 character boundaries.
func sendKeyOps(ops []KeyOp) []KeyOp {
	var out []KeyOp
	for _, op := range ops {
		s := op.Literal
		for op.Key == "" && len(s) > sendKeyChunk {
			n := sendKeyChunk
			for n > 0 && !utf8.RuneStart(s[n]) {
				n--
			}
			if n == 0 {
				n = sendKeyChunk
			}
			out = append(out, KeyOp{Literal: s[:n]})
			s = s[n:]
		}
		if op.Key == "" {
			op.Literal = s
		}
		out = append(out, op)
	}
	return out
}

// maxTmuxReply caps what a tmux command other than capture-pane may print
// (a pane id, a command name).
const maxTmuxReply = 4 << 10

// tmuxTimeout bounds one tmux client: a server that takes the connection
// and never answers (the agent's fake) would otherwise hold the step, and
// the terminal's lock, for ever. A real server answers in milliseconds.
const tmuxTimeout = 30 * time.Second

// tmux runs a tmux client inside the sandbox (see [sandbox.Sandbox.Command] for
// why never on the host) and returns at most maxTmuxReply bytes of its
// output.
func (t *Terminal) tmux(ctx context.Context, args ...string) (string, error) {
	out, _, err := t.tmuxRead(ctx, maxTmuxReply, args...)
	return out, err
}

// tmuxRead runs a tmux client and returns the first limit bytes of what it
// printed, cut at a UTF-8 boundary. The server it talks to is the agent's
// (it may be a fake that streams without end, or never answers), so past
// limit the client is killed and cut is set: no more than limit bytes are
// ever held; past tmuxTimeout it is killed and the call fails.
func (t *Terminal) tmuxRead(ctx context.Context, limit int, args ...string) (out string, cut bool, err error) {
	cctx, cancel := context.WithTimeout(ctx, tmuxTimeout)
	defer cancel()
	cmd := t.sb.Command(cctx, sandbox.KindClient, "/", append([]string{"tmux", "-S", sandbox.TmuxSock}, args...)...)
	stdout := &headBuffer{max: limit, full: cancel}
	stderr := mcpclient.NewTailBuffer(1 << 10)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = 500 * time.Millisecond
	err = cmd.Run()
	if cmd.Process != nil {
		sandbox.KillGroup(cmd.Process.Pid)
	}
	if stdout.cut {
		return stdout.String(), true, nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return "", false, ctx.Err()
		}
		return "", false, fmt.Errorf("tmux %s: %v: %s", args[0], err, strings.TrimSpace(strings.ToValidUTF8(stderr.String(), "?")))
	}
	return stdout.String(), false, nil
}

// headBuffer keeps the first max bytes written to it and discards the
// rest; the first write past max calls full (which kills the writer).
type headBuffer struct {
	buf  []byte
	max  int
	cut  bool
	full func()
}

func (b *headBuffer) Write(p []byte) (int, error) {
	room := b.max - len(b.buf)
	if len(p) > room {
		b.buf = append(b.buf, p[:max(room, 0)]...)
		if !b.cut {
			b.cut = true
			b.full()
		}
		return len(p), nil
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

// String is the kept bytes, without a UTF-8 character the cut split.
func (b *headBuffer) String() string {
	s := b.buf
	if b.cut {
		for i := len(s) - 1; i >= 0 && i >= len(s)-utf8.UTFMax; i-- {
			if utf8.RuneStart(s[i]) {
				if !utf8.FullRune(s[i:]) {
					s = s[:i]
				}
				break
			}
		}
	}
	return string(s)
}
