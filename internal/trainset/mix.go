package trainset

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strings"
)

// WorldModelSource prefixes the data_source of every world-model RL row
// ("agentworld/<domain>"); a reward endpoint routes rows by it.
const WorldModelSource = "agentworld/"

// MixSummary says what a warm-up mix wrote.
type MixSummary struct {
	// WorldModel and Agent are the rows written of each kind; Available
	// the rows there were. Ratio is Agent / (WorldModel + Agent), the
	// share of the mixed-in rows.
	WorldModel, Agent                   int64
	WorldModelAvailable, AgentAvailable int64
	Ratio                               float64
}

// ErrMixRows marks an agent row the mix cannot route.
var ErrMixRows = errors.New("bad agent RL row")

// MixRL interleaves world-model RL rows (the JSON lines of wm, as
// FormatRLJSONL writes them) with an agent's own RL rows (the JSON lines of
// agentRows, one object each, written unchanged) so that the agent's rows
// are ratio of the output (as --mix-ratio is the mixed-in share in every
// mode), the recipe for LWM RL as a warm-up before agent RL. Every agent row must name a data_source that does not start with
// WorldModelSource, so one reward endpoint can tell the two apart. As many
// rows as the ratio allows are kept: all of the scarcer kind, a seeded
// choice of the other; the order is a seeded uniform interleaving. The
// same inputs, ratio and seed give the same bytes.
func MixRL(wm, agentRows string, out io.Writer, ratio float64, seed uint64) (*MixSummary, error) {
	if !(ratio > 0 && ratio < 1) {
		return nil, fmt.Errorf("mix ratio %v: want the share of the agent's rows, strictly between 0 and 1", ratio)
	}
	share := 1 - ratio // of the world-model rows
	nw, err := countRows(wm, nil)
	if err != nil {
		return nil, err
	}
	na, err := countRows(agentRows, checkAgentRow)
	if err != nil {
		return nil, err
	}
	if nw == 0 || na == 0 {
		return nil, fmt.Errorf("nothing to mix: %d world-model rows, %d agent rows (%s)", nw, na, agentRows)
	}
	// The most rows with world-model share ratio, rounded to the nearest.
	kw, ka := nw, int64(math.Round(float64(nw)*ratio/share))
	if ka > na {
		ka, kw = na, int64(math.Round(float64(na)*share/ratio))
	}
	kw, ka = max(min(kw, nw), 1), max(min(ka, na), 1)
	r := rand.New(rand.NewPCG(mixSeed(seed, "mix"), mixSeed(seed, "rows")))
	keepW, keepA := chooseRows(r, nw, kw), chooseRows(r, na, ka)
	sw, err := newRowScanner(wm)
	if err != nil {
		return nil, err
	}
	defer sw.close()
	sa, err := newRowScanner(agentRows)
	if err != nil {
		return nil, err
	}
	defer sa.close()
	bw := bufio.NewWriterSize(out, 1<<20)
	leftW, leftA := kw, ka
	for leftW+leftA > 0 {
		src, keep := sa, keepA
		if r.Int64N(leftW+leftA) < leftW {
			src, keep = sw, keepW
			leftW--
		} else {
			leftA--
		}
		line, err := src.nextKept(keep)
		if err != nil {
			return nil, err
		}
		bw.Write(line)
		if err := bw.WriteByte('\n'); err != nil {
			return nil, err
		}
	}
	if err := bw.Flush(); err != nil {
		return nil, err
	}
	return &MixSummary{WorldModel: kw, Agent: ka, WorldModelAvailable: nw, AgentAvailable: na, Ratio: float64(ka) / float64(kw+ka)}, nil
}

func mixSeed(seed uint64, what string) uint64 {
	h := sha256.Sum256(fmt.Appendf(nil, "%d\x00%s", seed, what))
	return binary.BigEndian.Uint64(h[:8])
}

// chooseRows marks k of n rows, chosen uniformly.
func chooseRows(r *rand.Rand, n, k int64) []bool {
	keep := make([]bool, n)
	for _, i := range r.Perm(int(n))[:k] {
		keep[i] = true
	}
	return keep
}

// checkAgentRow refuses an agent row the reward endpoint would route to
// the world-model reward.
func checkAgentRow(line []byte) error {
	var row struct {
		DataSource *string `json:"data_source"`
	}
	if err := json.Unmarshal(line, &row); err != nil {
		return fmt.Errorf("%w: not a JSON object: %v", ErrMixRows, err)
	}
	switch {
	case row.DataSource == nil || *row.DataSource == "":
		return fmt.Errorf("%w: data_source: missing (it routes the row to your reward function)", ErrMixRows)
	case strings.HasPrefix(*row.DataSource, WorldModelSource):
		return fmt.Errorf("%w: data_source %q: the %s prefix is the world-model rows'", ErrMixRows, *row.DataSource, WorldModelSource)
	}
	return nil
}

// countRows counts the non-blank lines of a JSONL file, checking each
// with check when given.
func countRows(path string, check func([]byte) error) (int64, error) {
	s, err := newRowScanner(path)
	if err != nil {
		return 0, err
	}
	defer s.close()
	var n int64
	for {
		line, err := s.next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if check != nil {
			if err := check(line); err != nil {
				return n, fmt.Errorf("%s:%d: %w", path, s.line, err)
			}
		}
		n++
	}
}

// rowScanner reads the non-blank lines of a JSONL file.
type rowScanner struct {
	path string
	f    *os.File
	sc   *bufio.Scanner
	line int   // the file line of the last row
	row  int64 // rows read so far
}

func newRowScanner(path string) (*rowScanner, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	return &rowScanner{path: path, f: f, sc: sc}, nil
}

func (s *rowScanner) close() { _ = s.f.Close() }

func (s *rowScanner) next() ([]byte, error) {
	for s.sc.Scan() {
		s.line++
		if b := bytes.TrimSpace(s.sc.Bytes()); len(b) > 0 {
			s.row++
			return b, nil
		}
	}
	if err := s.sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", s.path, err)
	}
	return nil, io.EOF
}

// nextKept returns the next row marked in keep.
func (s *rowScanner) nextKept(keep []bool) ([]byte, error) {
	for {
		b, err := s.next()
		if err != nil {
			return nil, fmt.Errorf("%s: fewer rows than counted: %w", s.path, err)
		}
		if keep[s.row-1] {
			return b, nil
		}
	}
}
