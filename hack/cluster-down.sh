#!/usr/bin/env bash
# Stop the local control plane and delete its state (what `make cluster-down` runs).
# Idempotent.
set -euo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [[ ! -d "$STATE" ]] && ! cp_pid >/dev/null; then
	echo "No control plane state at $STATE; nothing to do"
	exit 0
fi

lock_state
cp_stop
# Remove everything but the lock first, then the lock file and the dir (a
# concurrent cluster-up waiting on the lock notices and re-creates it).
find "$STATE" -mindepth 1 -maxdepth 1 ! -name lock -exec rm -rf {} +
rm -f "$STATE/lock"
rmdir "$STATE" 2>/dev/null || true
echo "Control plane stopped; removed $STATE"
