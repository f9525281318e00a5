#!/usr/bin/env bash
# Installs what the real-terminal tests drive for real: tmux (the terminal)
# and bubblewrap (the sandbox around it). Idempotent: installs only what is
# missing, and runs apt-get update at most once.
set -euo pipefail
missing=()
command -v tmux >/dev/null 2>&1 || missing+=(tmux)
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
if [ ${#missing[@]} -eq 0 ]; then
	echo "realenv: tmux and bubblewrap present"
	exit 0
fi
apt-get update
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
