package bench

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// progress is the one progress display of a run, on stderr: done/total,
// rate, ETA and failures. On a terminal it redraws one line a few times a
// second; otherwise (a log file, CI) it writes a plain line every interval.
type progress struct {
	w        io.Writer
	tty      bool
	total    int
	interval time.Duration

	mu                    sync.Mutex
	done, failed, resumed int
	started               time.Time
	stopCh, stopped       chan struct{}
}

func newProgress(w io.Writer, total int, interval time.Duration) *progress {
	if interval <= 0 {
		interval = 10 * time.Second
	}
	p := &progress{w: w, total: total, interval: interval, started: time.Now()}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
			p.interval = 200 * time.Millisecond
		}
	}
	return p
}

func (p *progress) start() {
	if p.w == nil {
		return
	}
	p.stopCh, p.stopped = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.stopped)
		t := time.NewTicker(p.interval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				p.draw(false)
			case <-p.stopCh:
				p.draw(true)
				return
			}
		}
	}()
}

func (p *progress) stop() {
	if p.stopCh == nil {
		return
	}
	close(p.stopCh)
	<-p.stopped
}

func (p *progress) add(n int, failed, resumed bool) {
	p.mu.Lock()
	p.done += n
	if failed {
		p.failed += n
	}
	if resumed {
		p.resumed += n
	}
	p.mu.Unlock()
}

// line renders the current state.
func (p *progress) line() string {
	p.mu.Lock()
	done, failed, resumed := p.done, p.failed, p.resumed
	p.mu.Unlock()
	el := time.Since(p.started)
	fresh := done - resumed
	rate := 0.0
	if el > 0 {
		rate = float64(fresh) / el.Seconds()
	}
	eta := "?"
	if rate > 0 && p.total >= done {
		eta = time.Duration(float64(p.total-done) / rate * float64(time.Second)).Round(time.Second).String()
	}
	pct := 0.0
	if p.total > 0 {
		pct = 100 * float64(done) / float64(p.total)
	}
	s := fmt.Sprintf("bench: %d/%d (%.0f%%)  %.1f samples/s  ETA %s  failed %d", done, p.total, pct, rate, eta, failed)
	if resumed > 0 {
		s += fmt.Sprintf("  resumed %d", resumed)
	}
	return s + fmt.Sprintf("  elapsed %s", el.Round(time.Second))
}

func (p *progress) draw(final bool) {
	l := p.line()
	switch {
	case p.tty && final:
		fmt.Fprintf(p.w, "\r\033[K%s\n", l)
	case p.tty:
		fmt.Fprintf(p.w, "\r\033[K%s", l)
	default:
		fmt.Fprintln(p.w, l)
	}
}
