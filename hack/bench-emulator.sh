#!/usr/bin/env bash
# Loopback throughput of `aigw emulator`: seeds N configs, then drives GET and PUT
# /ai_gw/v2/configs/{slug} with wrk for a fixed time each.
#
#   hack/bench-emulator.sh                 # release build, 10000 configs, 10s per run
#   BIN=target/debug/aigw DURATION=5s hack/bench-emulator.sh
#
# Needs wrk (apt-get install -y wrk), curl and python3. Everything stays on 127.0.0.1.
set -euo pipefail

cd "$(dirname "$0")/.."
BIN=${BIN:-target/release/aigw}
PORT=${PORT:-18787}
CONFIGS=${CONFIGS:-10000}
DURATION=${DURATION:-10s}
THREADS=${THREADS:-2}
CONNECTIONS=${CONNECTIONS:-32}
TOKEN=bench-token
BASE="http://127.0.0.1:${PORT}"

if ! command -v wrk >/dev/null 2>&1; then
  echo "installing wrk (apt)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk
fi

if [[ ! -x "$BIN" ]]; then
  cargo build --release
fi

work=$(mktemp -d)
"$BIN" emulator --listen "127.0.0.1:${PORT}" --token "$TOKEN" >"$work/emulator.log" 2>&1 &
emulator_pid=$!
trap 'kill "$emulator_pid" 2>/dev/null || true; wait "$emulator_pid" 2>/dev/null || true; rm -rf "$work"' EXIT

for _ in $(seq 1 100); do
  curl -fsS "$BASE/_emulator/stats" >/dev/null 2>&1 && break
  sleep 0.1
done

python3 - "$CONFIGS" >"$work/seed.json" <<'EOF'
import json, sys
n = int(sys.argv[1])
configs = [{"slug": f"pc-bench-{i:06d}", "name": f"bench {i}",
            "config": {"retry": {"attempts": 3}, "targets": [{"provider": "@openai", "virtual_key": f"vk-{i}"}]}}
           for i in range(n)]
print(json.dumps({"configs": configs}))
EOF
curl -fsS -X POST -H 'content-type: application/json' --data-binary "@$work/seed.json" \
  "$BASE/_emulator/seed" >/dev/null
echo "seeded $(curl -fsS -H "Authorization: Bearer $TOKEN" "$BASE/ai_gw/v2/configs" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["total"])') configs"

cat >"$work/get.lua" <<EOF
wrk.headers["Authorization"] = "Bearer ${TOKEN}"
request = function()
  return wrk.format("GET", string.format("/ai_gw/v2/configs/pc-bench-%06d", math.random(0, ${CONFIGS} - 1)))
end
EOF
cat >"$work/put.lua" <<EOF
wrk.headers["Authorization"] = "Bearer ${TOKEN}"
wrk.headers["Content-Type"] = "application/json"
counter = 0
request = function()
  counter = counter + 1
  local body = string.format('{"config":{"retry":{"attempts":%d},"targets":[{"provider":"@openai","virtual_key":"vk"}]}}', counter % 5)
  return wrk.format("PUT", string.format("/ai_gw/v2/configs/pc-bench-%06d", math.random(0, ${CONFIGS} - 1)), nil, body)
end
EOF

for op in get put; do
  echo "== ${op^^} /ai_gw/v2/configs/{slug}: wrk -t${THREADS} -c${CONNECTIONS} -d${DURATION} =="
  wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency -s "$work/${op}.lua" "$BASE"
done

echo "== emulator stats =="
curl -fsS "$BASE/_emulator/stats"
echo
