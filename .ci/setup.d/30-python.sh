#!/usr/bin/env bash
# Installs python3, which the tests run as a peer implementation (the
# CPython statistics of perf/) and as the trainers' reward shims.
# Idempotent: installs only when missing.
set -euo pipefail
if command -v python3 >/dev/null 2>&1; then
	echo "python3 present"
	exit 0
fi
apt-get update
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3
