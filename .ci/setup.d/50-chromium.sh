#!/usr/bin/env bash
# Installs Debian's Chromium, which the web UI's browser tests
# (internal/ui, TestBrowser) drive through chromedp.
# Idempotent: installs only when chromium is missing.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
	echo "chromium present"
	exit 0
fi
apt-get update
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium
