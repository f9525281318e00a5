package rejection

import (
	"fmt"
	"sync"
	"time"

	progressline "github.com/agentworld/agentworld/internal/progress"
)

// progress counts what the run did for its progress line: samples done of
// total (-1 until counted), beams, kept, rate and ETA.
type progress struct {
	resumed                       int64
	mu                            sync.Mutex
	total, done, beams, kept, bad int64
	started                       time.Time
}

func newProgress(resumed int64) *progress {
	return &progress{total: -1, resumed: resumed, done: resumed, started: time.Now()}
}

func (p *progress) setTotal(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total = n
}

func (p *progress) add(j *job) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	kept := false
	for _, c := range j.beams {
		p.beams++
		kept = kept || c.Kept
		if c.Error != "" {
			p.bad++
		}
	}
	if kept {
		p.kept++
	}
}

func (p *progress) line() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	rate, eta := progressline.Rate(p.done, p.resumed, p.total, p.started)
	total := "?"
	if p.total >= 0 {
		total = fmt.Sprint(p.total)
	}
	return fmt.Sprintf("sample: %d/%s samples (%d resumed), %d beams, %d samples kept, %d beams failed, %.1f samples/s, ETA %s, elapsed %s",
		p.done, total, p.resumed, p.beams, p.kept, p.bad, rate, eta, time.Since(p.started).Round(time.Second))
}
