#!/usr/bin/env bash
# The OpenAI Python SDK against `aigw emulator`'s data plane (hack/openai-sdk.py): starts the
# emulator on loopback, installs the `openai` package into a throwaway virtualenv with pip,
# runs the script, stops the emulator. Not part of `make test` (it needs the package registry).
#
#   hack/openai-sdk.sh                   # debug build
#   BIN=target/release/aigw hack/openai-sdk.sh
set -euo pipefail

cd "$(dirname "$0")/.."
BIN=${BIN:-target/debug/aigw}
PORT=${PORT:-18788}
TOKEN=sdk-token
VENV=${VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/aigw/openai-venv}

[[ -x "$BIN" ]] || cargo build --bin aigw
if [[ ! -x "$VENV/bin/python" ]]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q openai
fi

"$BIN" emulator --listen "127.0.0.1:${PORT}" --token "$TOKEN" >/dev/null 2>&1 &
emulator=$!
trap 'kill "$emulator" 2>/dev/null || true' EXIT
for _ in $(seq 50); do
  curl -sf "http://127.0.0.1:${PORT}/_emulator/stats" >/dev/null && break
  sleep 0.1
done

AIGW_EMULATOR_URL="http://127.0.0.1:${PORT}" AIGW_EMULATOR_TOKEN="$TOKEN" \
  "$VENV/bin/python" hack/openai-sdk.py
