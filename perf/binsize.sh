#!/usr/bin/env bash
# Size of the agentworld binary against its goal, and where the bytes go.
#
#   bash perf/binsize.sh          # goal 45 MB, top 25 contributors
#   bash perf/binsize.sh --top 40
#
# It builds ./cmd/agentworld for linux/amd64 stripped (-trimpath
# -ldflags='-s -w', the shipped form) and unstripped (for the symbol
# table) into a temporary directory, prints both sizes and PASS or FAIL
# against the goal (issue 11: <= 45 MB stripped; 1 MB = 10^6 bytes), then
# the heaviest modules and standard-library packages by the bytes of their
# symbols in text, rodata and data (from `go tool nm -size`; the runtime's
# function tables, ~40% of the file, grow with the text and are not split
# per package). It also says whether the linker could prune unused
# methods: one reachable call of reflect's Method or MethodByName with a
# name known only at run time (text/template's field lookup, reflect2's
# embedded reflect.Type) makes it keep every exported method of every
# type, 4.7 MB here. Its exit status is 0 either way: it reports, it does
# not gate (cmd/agentworld's dependency and linker tests do).
set -euo pipefail
cd "$(dirname "$0")/.."
GOAL_MB=45
TOP=25
while [ $# -gt 0 ]; do
	case "$1" in
	--top) TOP=$2; shift 2 ;;
	--goal) GOAL_MB=$2; shift 2 ;;
	*) echo "usage: $0 [--top N] [--goal MB]" >&2; exit 2 ;;
	esac
done
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export GOOS=linux GOARCH=amd64 CGO_ENABLED=0
go build -trimpath -ldflags='-s -w' -o "$WORK/agentworld" ./cmd/agentworld
go build -trimpath -ldflags=-dumpdep -o "$WORK/agentworld.syms" ./cmd/agentworld 2>"$WORK/deps"
stripped=$(wc -c <"$WORK/agentworld")
unstripped=$(wc -c <"$WORK/agentworld.syms")
verdict=$(awk -v b="$stripped" -v g="$GOAL_MB" 'BEGIN { print (b <= g * 1e6) ? "PASS" : "FAIL" }')
awk -v s="$stripped" -v u="$unstripped" -v g="$GOAL_MB" -v v="$verdict" 'BEGIN {
	printf "agentworld linux/amd64 stripped:   %6.1f MB (%d bytes)  goal <= %d MB: %s\n", s / 1e6, s, g, v
	printf "agentworld linux/amd64 unstripped: %6.1f MB (%d bytes)\n", u / 1e6, u
}'
reflect=$(grep -o '^[^ ]* <ReflectMethod>' "$WORK/deps" | sort -u | head -n 5 | awk '{ printf " %s", $1 }' || true)
if [ -z "$reflect" ]; then
	echo "linker prunes unused methods: yes"
else
	echo "linker prunes unused methods: NO, reflect's method lookup is reachable in:$reflect"
fi
echo
echo "heaviest contributors (symbol bytes in text, rodata and data; bss excluded):"
# A symbol's package is its name up to the first dot after the last slash;
# third-party packages are summed by their module root (host/owner/repo on
# code hosts, host/name elsewhere: modernc.org/sqlite), the standard library
# by package. bss (zero-filled, not in the file) is
# skipped by the linker's runtime.bss..runtime.enoptrbss markers.
go tool nm -size -sort address "$WORK/agentworld.syms" | awk -v top="$TOP" '
function hex(s,   i, c, n) { n = 0; s = tolower(s); for (i = 1; i <= length(s); i++) { c = index("0123456789abcdef", substr(s, i, 1)) - 1; n = n * 16 + c }; return n }
{
	addr = $1; size = $2; name = $4
	if (name == "runtime.bss") inbss = 1
	if (name == "runtime.enoptrbss") { inbss = 0; next }
	if (inbss || NF < 4 || size == 0) next
	if (sub(/^type:\.eq\./, "", name))  # generated equality of a type: its package
		sub(/^(\[[0-9]+\]|\*)+/, "", name)
	sub(/\(.*$/, "", name)              # methods: pkg.(*T).M
	last = name; pre = ""
	if (match(name, /.*\//)) { pre = substr(name, 1, RLENGTH); last = substr(name, RLENGTH + 1) }
	pkg = pre (index(last, ".") ? substr(last, 1, index(last, ".") - 1) : last)
	gsub(/%2e/, ".", pkg)               # a dot in the last path element: nats%2ego
	if (pkg ~ /^(go|type|runtime)$/ || pkg ~ /^go:/) pkg = "(runtime, types, func tables)"
	else if (pkg ~ /^[^\/]*\.[^\/]*\//) {
		# module root: host/owner/repo on code hosts, host/name elsewhere
		n = split(pkg, p, "/")
		deep = p[1] ~ /^(github\.com|gitlab\.com|bitbucket\.org|codeberg\.org|git\.sr\.ht|golang\.org|gonum\.org)$/
		pkg = p[1] "/" p[2] ((deep && n > 2) ? "/" p[3] : "")
	}
	else if (pkg ~ /^vendor\//) pkg = "(std vendor) " pkg
	sum[pkg] += size; total += size
}
END {
	for (k in sum) printf "%d %s\n", sum[k], k
	printf "TOTAL %d\n", total
}' >"$WORK/sums"
grep -v '^TOTAL' "$WORK/sums" | sort -rn | head -n "$TOP" | awk '{ printf "  %7.2f MB  %s\n", $1 / 1e6, substr($0, length($1) + 2) }'
awk '$1 == "TOTAL" { printf "  %7.2f MB  (all symbols)\n", $2 / 1e6 }' "$WORK/sums"
echo
echo "$verdict"
