// Package progress shows how far a long job is, on a writer (stderr): on a
// terminal one line redrawn a few times a second, elsewhere (a log file,
// CI) a plain line every interval, and a final line when the job stops.
// The job renders the line; [Rate] gives the rate and ETA every job
// reports the same way.
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// DefaultInterval is the plain-line interval when none is given.
const DefaultInterval = 10 * time.Second

// redraw is how often a terminal's line is redrawn.
const redraw = 200 * time.Millisecond

// Ticker prints a job's progress line until [Ticker.Stop].
type Ticker struct {
	w        io.Writer
	tty      bool
	line     func() string
	stopOnce sync.Once
	stopCh   chan struct{}
	stopped  chan struct{}
}

// Start prints line() on w every interval (0 means DefaultInterval; on a
// terminal every 200 ms, redrawn in place) until Stop, which prints it a
// last time. A nil w prints nothing. line is called from the ticker's own
// goroutine, which Stop waits for.
func Start(w io.Writer, interval time.Duration, line func() string) *Ticker {
	t := &Ticker{w: w, line: line}
	if w == nil {
		return t
	}
	if interval <= 0 {
		interval = DefaultInterval
	}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			t.tty, interval = true, redraw
		}
	}
	t.stopCh, t.stopped = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(t.stopped)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				t.draw(false)
			case <-t.stopCh:
				t.draw(true)
				return
			}
		}
	}()
	return t
}

// Stop prints the final line and returns once the ticker's goroutine is
// gone; later calls do nothing.
func (t *Ticker) Stop() {
	if t.stopCh == nil {
		return
	}
	t.stopOnce.Do(func() { close(t.stopCh) })
	<-t.stopped
}

func (t *Ticker) draw(final bool) {
	l := t.line()
	switch {
	case t.tty && final:
		fmt.Fprintf(t.w, "\r\033[K%s\n", l)
	case t.tty:
		fmt.Fprintf(t.w, "\r\033[K%s", l)
	default:
		fmt.Fprintln(t.w, l)
	}
}

// Rate is the items per second a job did since started, counting only
// what it did itself (done minus resumed, the items an earlier run had
// finished), and the time left for total at that rate ("?" until known).
func Rate(done, resumed, total int64, started time.Time) (perSec float64, eta string) {
	el := time.Since(started)
	if el > 0 {
		perSec = float64(done-resumed) / el.Seconds()
	}
	eta = "?"
	if perSec > 0 && total >= done {
		eta = time.Duration(float64(total-done) / perSec * float64(time.Second)).Round(time.Second).String()
	}
	return perSec, eta
}
