package answercache

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/agentworld/agentworld/internal/atomicfile"
	"github.com/agentworld/agentworld/internal/filelock"
	progressline "github.com/agentworld/agentworld/internal/progress"
)

// CompactLockName is the lock file a compaction holds in the cache
// directory, so that two never run at once.
const CompactLockName = "compact.lock"

// emptyGrace is how long an empty segment nobody locks is taken for one
// being created (its writer creates it, then locks it) before a compaction
// removes it as left by a writer killed in between.
const emptyGrace = 10 * time.Minute

// progressFrom is the size of segments from which a compaction shows its
// progress.
const progressFrom = 16 << 20

// compactHook, when set (by tests only), is called at each step of a
// compaction: "written" once half of the segments are in the new one,
// "renamed" once it is in place, "removed" after the first old segment is
// gone.
var compactHook func(step string)

// CompactOptions tunes [CompactCache]. The zero value is the default.
type CompactOptions struct {
	// Progress receives a progress line (bytes read, answers kept) while
	// it runs, when the segments to rewrite hold progressFrom bytes or
	// more (less takes well under a second); nil shows none.
	Progress io.Writer
	// ProgressInterval is how often a non-terminal progress line is
	// written; zero means the progress package's default.
	ProgressInterval time.Duration
	// Logger receives the segments that could not be removed and the
	// files of killed compactions cleared; nil discards.
	Logger *slog.Logger
}

// CompactStats is what a compaction did.
type CompactStats struct {
	// Dir is the cache directory.
	Dir string `json:"dir"`
	// Segments counts the segments rewritten into Segment; InUse those left
	// as they are because a running process still writes them.
	Segments int `json:"segments"`
	InUse    int `json:"in_use"`
	// Segment is the new segment's file name, "" when none was written
	// (nothing to keep, or a single segment with nothing to drop).
	Segment string `json:"segment,omitempty"`
	// Kept counts the answers in the new segment; Duplicates the lines
	// dropped for a request already answered (two processes stored it);
	// Corrupt the lines that did not parse ([Cache.Corrupt]); Torn the
	// unfinished last lines of writers killed mid-write.
	Kept       int64 `json:"kept"`
	Duplicates int64 `json:"duplicates"`
	Corrupt    int64 `json:"corrupt"`
	Torn       int   `json:"torn"`
	// BytesBefore is the size of the segments rewritten, BytesAfter that
	// of the new segment (segments in use are in neither).
	BytesBefore int64 `json:"bytes_before"`
	BytesAfter  int64 `json:"bytes_after"`
	// Leftover names rewritten segments that could not be removed (on
	// Windows, while another process has them open): their answers are in
	// the new segment too, and the next compaction drops them.
	Leftover []string `json:"leftover,omitempty"`
	// Elapsed is how long it took.
	Elapsed time.Duration `json:"elapsed_ns"`
}

// CompactCache rewrites the answers of a cache directory's segments into
// one new segment and removes the old ones: each answer once (the one a
// Cache serves: the first stored), without the lines that did not parse or
// were torn by a kill. Segments a running process still writes (locked by
// their writer) are left as they are, so it is safe while other runs use
// the directory:
//
//   - the new segment is written under a temporary name, synced and renamed
//     in ([atomicfile]) before any old segment is removed, so a process
//     opening the cache meanwhile finds every answer in one or the other
//     (and a Cache reads the old segments it opened to the end: an open file
//     outlives its name);
//   - a kill at any point leaves either the old segments, or them and the new
//     one (their answers twice, dropped by the next compaction), plus at
//     most a temporary file, which the next compaction removes.
//
// Versions of this package before compaction wrote their segments
// unlocked: a run of one still going would lose what it appends after its
// segment is taken for a finished one.
//
// One compaction runs at a time: another one's lock is an error wrapping
// [filelock.ErrHeld]. The legacy one-file-per-answer layout is left alone
// (a Cache still reads it). A cancelled ctx stops it with nothing changed
// unless the new segment is already in place. nil opts means defaults.
func CompactCache(ctx context.Context, dir string, opts *CompactOptions) (*CompactStats, error) {
	var o CompactOptions
	if opts != nil {
		o = *opts
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	start := time.Now()
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("cache %s: %w", dir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("cache %s: not a directory", dir)
	}
	lk, err := filelock.Acquire(filepath.Join(dir, CompactLockName), "cache "+dir+" (compaction)")
	if err != nil {
		return nil, err
	}
	defer lk.Release()

	stats := &CompactStats{Dir: dir}
	segs, err := compactable(dir, stats, log)
	defer func() {
		for _, s := range segs {
			s.f.Close()
		}
	}()
	if err != nil {
		return nil, err
	}
	stats.Segments = len(segs)
	for _, s := range segs {
		stats.BytesBefore += s.size
	}
	if len(segs) == 0 {
		stats.Elapsed = time.Since(start)
		return stats, nil
	}

	var read, kept, dups atomic.Int64
	var done atomic.Int32
	if stats.BytesBefore < progressFrom {
		o.Progress = nil
	}
	tk := progressline.Start(o.Progress, o.ProgressInterval, func() string {
		r := read.Load()
		pct := 100.0
		if stats.BytesBefore > 0 {
			pct = 100 * float64(r) / float64(stats.BytesBefore)
		}
		return fmt.Sprintf("cache compact: segment %d/%d  %s of %s read (%.0f%%)  %d answers kept  %d duplicates  elapsed %s",
			done.Load(), len(segs), humanize.IBytes(uint64(r)), humanize.IBytes(uint64(stats.BytesBefore)), pct, kept.Load(), dups.Load(),
			time.Since(start).Round(time.Second))
	})
	name, err := writeCompacted(ctx, dir, segs, stats, &read, &kept, &dups, &done)
	tk.Stop()
	if err != nil {
		return nil, fmt.Errorf("cache %s: compaction: %w (the cache is as it was)", dir, err)
	}
	stats.Segment = name
	if name != "" && compactHook != nil {
		compactHook("renamed")
	}
	if name == "" && len(segs) == 1 && stats.Kept > 0 {
		// A single segment with nothing to drop is already compact.
		stats.Segments = 0
		stats.BytesBefore, stats.BytesAfter = 0, 0
		stats.Elapsed = time.Since(start)
		return stats, nil
	}
	for i, s := range segs {
		s.f.Close() // Windows removes no open file; the lock goes with it
		if err := os.Remove(filepath.Join(dir, s.name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			log.Warn("cache: a compacted segment could not be removed; the next compaction drops it", "segment", s.name, "err", err)
			stats.Leftover = append(stats.Leftover, s.name)
		}
		if i == 0 && compactHook != nil {
			compactHook("removed")
		}
	}
	stats.Elapsed = time.Since(start)
	return stats, nil
}

// compactSeg is a segment a compaction rewrites: open, and locked so that
// no writer can take it back.
type compactSeg struct {
	name string
	f    *os.File
	size int64
}

// compactable opens and locks, in name order, the segments of dir no
// process writes any more, counting the others in stats.InUse, and removes
// the temporary files of compactions killed before they renamed theirs in
// (the compaction lock is held: none is running). On an error the
// segments opened so far are returned for closing.
func compactable(dir string, stats *CompactStats, log *slog.Logger) ([]*compactSeg, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("cache %s: %w", dir, err)
	}
	var segs []*compactSeg
	for _, e := range ents {
		name := e.Name()
		if isCompactTemp(name) {
			if err := os.Remove(filepath.Join(dir, name)); err == nil {
				log.Info("cache: removed the temporary file of a killed compaction", "file", name)
			}
			continue
		}
		if !isSegmentName(name) || !e.Type().IsRegular() {
			continue
		}
		f, err := os.Open(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return segs, fmt.Errorf("cache %s: %w", dir, err)
		}
		// An empty segment is looked at before it is locked: its writer
		// may be about to lock it, and must not find it held. One with
		// lines was locked by its writer before its first.
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return segs, fmt.Errorf("cache %s: %w", dir, err)
		}
		if fi.Size() == 0 && time.Since(fi.ModTime()) < emptyGrace {
			f.Close()
			stats.InUse++
			continue
		}
		held, err := filelock.TryLock(f)
		if err != nil {
			f.Close()
			return segs, fmt.Errorf("cache %s: cannot tell which segments running processes still write: %w", dir, err)
		}
		if held {
			f.Close()
			stats.InUse++
			continue
		}
		if fi, err = f.Stat(); err != nil { // as it is now that nobody writes it
			f.Close()
			return segs, fmt.Errorf("cache %s: %w", dir, err)
		}
		segs = append(segs, &compactSeg{name: name, f: f, size: fi.Size()})
	}
	return segs, nil
}

// isCompactTemp reports atomicfile's temporary name for a segment.
func isCompactTemp(name string) bool {
	return strings.HasPrefix(name, "."+segPrefix) && strings.Contains(name, segSuffix+".tmp-")
}

// writeCompacted writes the first line of each key of segs, in order, to
// a new segment, and returns its name once it is in place: "" when it
// would hold nothing, or nothing less than the one segment it would
// replace (then nothing is written).
func writeCompacted(ctx context.Context, dir string, segs []*compactSeg, stats *CompactStats, read, kept, dups *atomic.Int64, done *atomic.Int32) (string, error) {
	name := newSegmentName()
	out, err := atomicfile.Create(filepath.Join(dir, name), nil)
	if err != nil {
		return "", err
	}
	defer out.Abort()
	w := bufio.NewWriterSize(out, 1<<20)
	seen := make(map[[32]byte]struct{})
	var werr error
	var written int64
	for i, s := range segs {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		n := 0
		end, err := eachLine(io.NewSectionReader(s.f, 0, s.size), 0, func(off int64, line []byte) {
			read.Add(int64(len(line)) + 1)
			key, ok := lineKey(line)
			if !ok {
				if len(bytes.TrimSpace(line)) > 0 {
					stats.Corrupt++
				}
				return
			}
			d := digest(key)
			if _, dup := seen[d]; dup {
				dups.Add(1)
				return
			}
			seen[d] = struct{}{}
			if werr == nil {
				_, werr = w.Write(line)
				if werr == nil {
					werr = w.WriteByte('\n')
				}
				written += int64(len(line)) + 1
			}
			kept.Add(1)
			if n++; n%4096 == 0 && ctx.Err() != nil && werr == nil {
				werr = ctx.Err()
			}
		})
		if err != nil {
			return "", fmt.Errorf("%s: %w", s.name, err)
		}
		if werr != nil {
			return "", werr
		}
		if end < s.size {
			stats.Torn++
			read.Add(s.size - end)
		}
		done.Store(int32(i + 1))
		if i+1 == (len(segs)+1)/2 && compactHook != nil {
			if err := w.Flush(); err != nil {
				return "", err
			}
			compactHook("written")
		}
	}
	stats.Kept, stats.Duplicates = kept.Load(), dups.Load()
	if stats.Kept == 0 {
		return "", nil
	}
	if len(segs) == 1 && stats.Duplicates == 0 && stats.Corrupt == 0 && stats.Torn == 0 {
		return "", nil
	}
	if err := w.Flush(); err != nil {
		return "", err
	}
	if err := out.Commit(); err != nil {
		return "", err
	}
	stats.BytesAfter = written
	return name, nil
}
