#!/usr/bin/env bash
# Installs what the real-terminal tests drive for real: tmux (the terminal),
# bubblewrap (the sandbox around it) and util-linux's nsenter, unshare,
# setpriv and prlimit (which start processes inside the sandbox).
# Idempotent: installs only what is missing, and runs apt-get update at most
# once.
set -euo pipefail
missing=()
command -v tmux >/dev/null 2>&1 || missing+=(tmux)
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
for bin in nsenter unshare setpriv prlimit; do
	command -v "$bin" >/dev/null 2>&1 || { missing+=(util-linux); break; }
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "realenv: tmux, bubblewrap and util-linux present"
	exit 0
fi
apt-get update
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
