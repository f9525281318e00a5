package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/agentworld/agentworld/internal/answercache"
	"github.com/agentworld/agentworld/internal/bench"
)

func newBenchCacheCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cache",
		Short: "Keep a response cache (OUT/cache or --cache DIR) small",
	}
	cmd.AddCommand(newBenchCacheCompactCmd())
	return cmd
}

func newBenchCacheCompactCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "compact DIR",
		Short: "Rewrite a response cache's segments into one, dropping duplicates and damaged lines",
		Long: `Rewrite the answers of a response cache into one segment and remove the
segments they came from: each answer once (the one runs are served: the first
stored), without the lines that did not parse or were torn by a kill. DIR is a
cache directory (what --cache names) or a run directory (--out), whose cache is
DIR/cache.

Runs sharing the cache may go on meanwhile: segments a running process still
writes are left as they are, and the new segment is in place before any old one
is removed, so no run misses an answer. A kill at any point loses nothing: run
it again. Opening a cache of ` + fmt.Sprint(answercache.DefaultCompactAt) + ` segments or more (a run) compacts it too.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := cacheDirOf(args[0])
			st, err := answercache.CompactCache(cmd.Context(), dir, &answercache.CompactOptions{Progress: cmd.ErrOrStderr(), Logger: logger(cmd)})
			if err != nil {
				return err
			}
			return writeResult(cmd, asJSON, st, func(w io.Writer) error { return writeCompactStats(w, st) })
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the summary as JSON")
	return cmd
}

// cacheDirOf is the cache directory arg names: itself, or the cache of the
// run directory it is (one holding run.json).
func cacheDirOf(arg string) string {
	if _, err := os.Stat(filepath.Join(arg, bench.RunFile)); err == nil {
		return filepath.Join(arg, bench.CacheDir)
	}
	return arg
}

// writeCompactStats prints what a compaction did.
func writeCompactStats(w io.Writer, st *answercache.CompactStats) error {
	var b strings.Builder
	switch {
	case st.Segment != "":
		fmt.Fprintf(&b, "cache %s: %d segments rewritten into %s", st.Dir, st.Segments, st.Segment)
	case st.Segments > 0:
		fmt.Fprintf(&b, "cache %s: %d segments removed, nothing in them to keep", st.Dir, st.Segments)
	case st.Kept > 0:
		fmt.Fprintf(&b, "cache %s: already compact (one segment, nothing to drop)", st.Dir)
	default:
		fmt.Fprintf(&b, "cache %s: no segment to compact", st.Dir)
	}
	if st.InUse > 0 {
		fmt.Fprintf(&b, "; %d in use by running processes left as they are", st.InUse)
	}
	fmt.Fprintf(&b, "\nanswers: %d kept, %d duplicates dropped, %d damaged lines dropped, %d torn last lines dropped\n",
		st.Kept, st.Duplicates, st.Corrupt, st.Torn)
	if st.Segments > 0 {
		fmt.Fprintf(&b, "size: %s -> %s in %s\n", byteCount(st.BytesBefore), byteCount(st.BytesAfter), st.Elapsed.Round(1e6))
	}
	if len(st.Leftover) > 0 {
		fmt.Fprintf(&b, "not removed (open elsewhere; their answers are in the new segment, the next compaction drops them): %s\n", strings.Join(st.Leftover, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// byteCount writes n bytes exactly and, from a kibibyte, in the largest
// binary unit under which it is at least 1.
func byteCount(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%d B (%s)", n, humanize.IBytes(uint64(n)))
}
