#!/usr/bin/env bash
# `make bench`: the real `aigw operator` process rolling out N Config resources against three floors
# (a minimal client doing one POST per config and one status patch per resource; a crash-safe one
# that first patches a finalizer and a create intent with a precondition; and that one claiming
# the object in status.installation first, as aigw does), with apiserver
# and management-API request counts, reconciles, peak RSS and CPU, edit-to-versionId latency and a
# steady-state window after a restart. Writes target/bench/report-N.json and prints it.
#
#   make bench                  # N=1000
#   N=10000 make bench          # the large run
#   PROFILE=release make bench  # a release build of the operator and the floor (long to build)
#
# It runs on a control plane of its own (state in target/bench/cluster, stopped and removed at
# the end), so apiserver_request_total counts only the bench's traffic and no earlier objects
# weigh on etcd; the bench starts a fresh one before each side (each floor, aigw, live and on the
# backlog), so no side runs beside the objects of the one before (BENCH_ONE_PLANE=1: one plane). Then the mixed set (tests/bench.rs, bench_mixed: Configs, RateLimitsPolicies,
# UsageLimitsPolicies, Guardrails, Deployments and ApiKeys, N in total) on a fresh control plane:
# target/bench/report-mixed-N.json. First, without a control plane, the bytes the watch cache holds
# per Ready Config (tests/bench/footprint.rs): target/bench/footprint.json. Knobs: N, BENCH_EDITS (50), BENCH_STEADY_SECONDS (60),
# BENCH_MIXED (1; 0 skips the mixed set), BENCH_STATUS (0; 1 adds the status-write comparison,
# target/bench/status-writes-N.json), BENCH_OUT (target/bench), BENCH_ONE_PLANE (1: every side on one control plane); the identity probes BENCH_IDENTITY
# (token: the operator's own ServiceAccount token instead of impersonation), BENCH_FLOOR_AS_OPERATOR
# (1: the floors write as the operator), BENCH_OPERATOR_FLAGS (more operator flags), and the size
# probe BENCH_FLOOR_SHAPE (operator: the floors write the annotations and status aigw leaves;
# operator-metadata: its annotations only; operator-status: its status only; design: only the
# status DESIGN.md requires of a Config).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

export N=${N:-1000}
export AIGW_DEV_DIR="$root/target/bench/cluster"
export KUBECONFIG="$AIGW_DEV_DIR/kubeconfig"
profile=()
[[ "${PROFILE:-debug}" == "release" ]] && profile=(--release)

cargo test "${profile[@]}" --test bench --no-run
# What the watch cache holds per Ready Config (no control plane; seconds): target/bench/footprint.json.
N=10000 cargo test "${profile[@]}" --test bench -- --exact footprint::bench_cache_footprint --nocapture
trap 'bash hack/cluster-down.sh >/dev/null' EXIT
bash hack/cluster-down.sh >/dev/null
bash hack/cluster-up.sh
cargo test "${profile[@]}" --test bench -- --exact bench --nocapture
# The mixed set (every namespaced kind, N in total) on a fresh control plane; BENCH_MIXED=0 skips it.
if [[ "${BENCH_MIXED:-1}" != "0" ]]; then
	bash hack/cluster-down.sh >/dev/null
	bash hack/cluster-up.sh
	cargo test "${profile[@]}" --test bench -- --exact bench_mixed --nocapture
fi
# Status writes, server-side apply against a merge patch (N/2 Configs each); BENCH_STATUS=1 runs it.
if [[ "${BENCH_STATUS:-0}" == "1" ]]; then
	bash hack/cluster-down.sh >/dev/null
	bash hack/cluster-up.sh
	cargo test "${profile[@]}" --test bench -- --exact bench_status_writes --nocapture
fi
