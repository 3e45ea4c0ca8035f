#!/usr/bin/env bash
# `make bench-scale`: how the operator's and the control plane's cost grows with N. For each N
# (BENCH_SCALE, default "1000 10000 100000") on a fresh control plane of its own: N Configs
# created first, the operator started on that backlog, edits, then a restart with default flags
# (tests/bench.rs, bench_scale). Writes target/bench/scale-N.json per N and prints one line per N.
#
#   make bench-scale                      # 1,000 / 10,000 / 100,000 Configs (about an hour)
#   BENCH_SCALE="1000 10000" make bench-scale
#   PROFILE=debug make bench-scale        # release is the default here
#
# Not part of `make test`. Knobs as for `make bench`: BENCH_EDITS (20 here), BENCH_STEADY_SECONDS.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

export AIGW_DEV_DIR="$root/target/bench/cluster"
export KUBECONFIG="$AIGW_DEV_DIR/kubeconfig"
export BENCH_EDITS=${BENCH_EDITS:-20}
out=${BENCH_OUT:-$root/target/bench}
profile=(--release)
[[ "${PROFILE:-release}" == "debug" ]] && profile=()

cargo test "${profile[@]}" --test bench --no-run
trap 'bash hack/cluster-down.sh >/dev/null' EXIT
for n in ${BENCH_SCALE:-1000 10000 100000}; do
	bash hack/cluster-down.sh >/dev/null
	# etcd's default 2 GiB quota holds 100,000 Configs with their history; the apiserver's
	# watch cache is sized by object count, not bytes.
	bash hack/cluster-up.sh
	echo "== N=$n"
	N=$n cargo test "${profile[@]}" --test bench -- --exact bench_scale --nocapture
done
# Active-active: the same backlog spread over 24 namespaces, rolled out by BENCH_REPLICAS
# operators with --shards (tests/bench/shards.rs). BENCH_SHARD_SCALE="" skips it.
replicas=${BENCH_REPLICAS:-3}
for n in ${BENCH_SHARD_SCALE-100000}; do
	bash hack/cluster-down.sh >/dev/null
	bash hack/cluster-up.sh
	echo "== N=$n on $replicas shards"
	N=$n BENCH_REPLICAS=$replicas cargo test "${profile[@]}" --test bench -- --exact shards::bench_shards --nocapture
done
echo
printf '%8s %10s %10s %12s %12s %12s %12s %10s\n' N rollout_s ops_rss ops_rss_rst ops_cpu_s plane_rss plane_cpu_s edit_p99
for n in ${BENCH_SCALE:-1000 10000 100000}; do
	f="$out/scale-$n.json"
	[[ -f $f ]] || continue
	python3 - "$f" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
ro, st, cp = r["rollout"], r["steady_state_after_restart"], r["control_plane"]
print("%8d %10.1f %10.1f %12.1f %12.1f %12.1f %12.1f %10s" % (
    r["n"], ro["rollout_seconds"], ro["peak_rss_mib"], st["peak_rss_mib"], ro["cpu_seconds"],
    cp["peak_rss_mib"], cp["cpu_seconds_during_rollout"], r["edit_to_version_id_ms"]["p99"]))
PY
done
for n in ${BENCH_SHARD_SCALE-100000}; do
	f="$out/shards-$n-$replicas.json"
	[[ -f $f ]] || continue
	python3 - "$f" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
ro, st = r["rollout"], r["after_restart"]
print("%8d on %d shards: rollout %.1f s; per replica share / peak RSS MiB rollout / restart / CPU s: %s; writes after restart %d" % (
    r["n"], r["replicas"], ro["rollout_seconds"],
    ", ".join("%d / %.1f / %.1f / %.1f" % (a["share"], a["peak_rss_mib"], b["peak_rss_mib"], a["cpu_seconds"])
              for a, b in zip(ro["replicas"], st["replicas"])),
    st["apiserver_writes"]))
PY
done
