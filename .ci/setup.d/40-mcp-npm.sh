#!/usr/bin/env bash
# Installs the pinned npm MCP servers and the npm MCP client SDK that the MCP
# tests start for real (tools/npm/package-lock.json fixes every version).
# Idempotent: skips npm ci when node_modules already matches the lock file.
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	if command -v apt-get >/dev/null 2>&1; then
		apt-get update
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nodejs npm
	fi
fi
dir=tools/npm
stamp="$dir/node_modules/.agentworld-lock.sha256"
want=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	echo "tools/npm: up to date"
	exit 0
fi
(cd "$dir" && npm ci --no-audit --no-fund)
echo "$want" >"$stamp"
