#!/usr/bin/env bash
# Throughput and memory of `agentworld data mask` against its CPython peer
# (perf/mask_peer.py, the same statistics written the plain Python way).
#
#   bash perf/mask_ratio.sh                 # 100 MB corpus + 400 MB memory check
#   bash perf/mask_ratio.sh --large 2GB     # the 2 GB memory-flatness run
#   bash perf/mask_ratio.sh --size 50MB --large 200MB   # a quicker run
#
# It prints MB/s (wall clock and CPU time) of the peer, of agentworld with
# one worker on one core (GOMAXPROCS=1) and with --workers 2, the ratios,
# the peak RSS of each, and checks that both produce identical output.
# Target: ≥20× the peer in CPU time on one core (wall-clock ratios swing
# with the machine's load; CPU time does not), flat memory.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE=100MB
LARGE=400MB
SEED=1
while [ $# -gt 0 ]; do
	case "$1" in
	--size) SIZE=$2; shift 2 ;;
	--large) LARGE=$2; shift 2 ;;
	--seed) SEED=$2; shift 2 ;;
	*) echo "usage: $0 [--size 100MB] [--large 400MB|2GB] [--seed N]" >&2; exit 2 ;;
	esac
done
command -v python3 >/dev/null || { echo "python3 is needed for the peer" >&2; exit 1; }
TIME=/usr/bin/time
[ -x "$TIME" ] || { echo "GNU time (/usr/bin/time) is needed for peak RSS" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export PATH="/usr/local/go/bin:$PATH"
go build -o "$WORK/agentworld" ./cmd/agentworld
go build -o "$WORK/gencorpus" ./perf/gencorpus
"$WORK/agentworld" data mask --print-config json > "$WORK/cfg.json"
"$WORK/gencorpus" -size "$SIZE" -seed "$SEED" > "$WORK/corpus.jsonl"
BYTES=$(stat -c %s "$WORK/corpus.jsonl")

# measure NAME CMD...: runs CMD, records wall seconds, CPU seconds, peak KB.
measure() {
	local name=$1; shift
	"$TIME" -f "%e %U %S %M" -o "$WORK/$name.time" "$@"
	read -r wall usr sys rss < "$WORK/$name.time"
	eval "${name}_wall=$wall ${name}_cpu=$(echo "$usr + $sys" | bc -l) ${name}_rss=$rss"
}
mbs() { echo "scale=1; $BYTES / 1000000 / $1" | bc -l; }

echo "corpus: $((BYTES / 1000000)) MB, $(wc -l < "$WORK/corpus.jsonl") trajectories (seed $SEED)"
measure peer sh -c "python3 perf/mask_peer.py '$WORK/cfg.json' < '$WORK/corpus.jsonl' > '$WORK/peer.jsonl'"
measure one env GOMAXPROCS=1 "$WORK/agentworld" data mask --progress=false --workers 1 -o "$WORK/one.jsonl" "$WORK/corpus.jsonl" 2>/dev/null
measure two "$WORK/agentworld" data mask --progress=false --workers 2 -o "$WORK/two.jsonl" "$WORK/corpus.jsonl" 2>/dev/null

agree=yes
cmp -s "$WORK/peer.jsonl" "$WORK/one.jsonl" || agree=NO
cmp -s "$WORK/one.jsonl" "$WORK/two.jsonl" || agree=NO
printf '%-28s %10s %10s %12s\n' "" "wall MB/s" "CPU MB/s" "peak RSS MB"
for n in peer one two; do
	w=${n}_wall c=${n}_cpu r=${n}_rss
	label=$n
	[ $n = peer ] && label="CPython peer"
	[ $n = one ] && label="agentworld, 1 worker/1 core"
	[ $n = two ] && label="agentworld, --workers 2"
	printf '%-28s %10s %10s %12s\n' "$label" "$(mbs "${!w}")" "$(mbs "${!c}")" "$((${!r} / 1024))"
done
echo "outputs identical (peer vs agentworld, 1 vs 2 workers): $agree"
printf 'ratio, 1 worker:  %.1fx CPU, one core   target >= 20x  (%.1fx wall)\n' "$(echo "$peer_cpu / $one_cpu" | bc -l)" "$(echo "$peer_wall / $one_wall" | bc -l)"
printf 'ratio, 2 workers: %.1fx wall\n' "$(echo "$peer_wall / $two_wall" | bc -l)"

# Memory: the same command on a larger corpus must peak at about the same RSS.
rm -f "$WORK/peer.jsonl" "$WORK/one.jsonl" "$WORK/two.jsonl" "$WORK/corpus.jsonl"
"$WORK/gencorpus" -size "$LARGE" -seed "$((SEED + 1))" > "$WORK/large.jsonl"
LBYTES=$(stat -c %s "$WORK/large.jsonl")
measure lone env GOMAXPROCS=1 "$WORK/agentworld" data mask --progress=false --workers 1 -o /dev/null "$WORK/large.jsonl" 2>/dev/null
measure ltwo "$WORK/agentworld" data mask --progress=false --workers 2 -o /dev/null "$WORK/large.jsonl" 2>/dev/null
echo "peak RSS, $((BYTES / 1000000)) MB vs $((LBYTES / 1000000)) MB input: 1 worker $((one_rss / 1024)) → $((lone_rss / 1024)) MB, 2 workers $((two_rss / 1024)) → $((ltwo_rss / 1024)) MB"
[ "$agree" = yes ]
