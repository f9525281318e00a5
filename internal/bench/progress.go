package bench

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/agentworld/agentworld/internal/answercache"
	progressline "github.com/agentworld/agentworld/internal/progress"
)

// progress is the one progress display of a run, on stderr: done/total,
// rate, ETA and failures, shown by package progress (redrawn in place on a
// terminal, a plain line every interval otherwise).
type progress struct {
	w        io.Writer
	interval time.Duration
	ticker   *progressline.Ticker
	// cache's damaged lines are shown once there are some (nil: none).
	cache *answercache.Cache

	mu                           sync.Mutex
	total, done, failed, resumed int
	started                      time.Time
}

func newProgress(w io.Writer, total int, interval time.Duration) *progress {
	return &progress{w: w, total: total, interval: interval, started: time.Now()}
}

func (p *progress) start() { p.ticker = progressline.Start(p.w, p.interval, p.line) }

func (p *progress) stop() {
	if p.ticker != nil {
		p.ticker.Stop()
	}
}

// setTotal sets the total once it is known (a run counts its rows while
// the first samples are already in flight).
func (p *progress) setTotal(n int) {
	p.mu.Lock()
	p.total = n
	p.mu.Unlock()
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
	done, failed, resumed, total := p.done, p.failed, p.resumed, p.total
	p.mu.Unlock()
	rate, eta := progressline.Rate(int64(done), int64(resumed), int64(total), p.started)
	pct := 0.0
	if total > 0 {
		pct = 100 * float64(done) / float64(total)
	}
	s := fmt.Sprintf("bench: %d/%d (%.0f%%)  %.1f samples/s  ETA %s  failed %d", done, total, pct, rate, eta, failed)
	if resumed > 0 {
		s += fmt.Sprintf("  resumed %d", resumed)
	}
	if n := p.cache.Corrupt(); n > 0 {
		s += fmt.Sprintf("  cache damaged lines %d", n)
	}
	return s + fmt.Sprintf("  elapsed %s", time.Since(p.started).Round(time.Second))
}
