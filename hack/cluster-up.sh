#!/usr/bin/env bash
# Start the local Kubernetes control plane (what `make cluster` runs).
#
# Idempotent and safe to run concurrently: if the control plane of
# .aigw-dev/ (or $AIGW_DEV_DIR) already answers /readyz it only says so.
# Otherwise it builds hack/controlplane into the cache if needed, starts it
# detached (it outlives this shell and make), waits for /readyz and leaves
# the admin kubeconfig at .aigw-dev/kubeconfig (context aigw-dev).
# Etcd data persists across restarts until hack/cluster-down.sh.
set -euo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

timeout_s="${AIGW_CLUSTER_TIMEOUT:-90}"

lock_state

# One state directory holds one Kubernetes version's etcd data: another version is refused
# rather than started on it, or reused in its place.
recorded="$(cat "$STATE/kube-version" 2>/dev/null || true)"
if [[ -n "$recorded" && "$recorded" != "$K8S_VERSION" ]]; then
	echo "error: $STATE holds the state of kube-apiserver $recorded, not $K8S_VERSION (AIGW_KUBE_VERSION=${AIGW_KUBE_VERSION:-1.35}):" >&2
	echo "       stop and remove it with hack/cluster-down.sh, or give this version a directory of its own (AIGW_DEV_DIR)" >&2
	exit 1
fi

if cp_ready; then
	echo "Control plane already running: $(cp_server) (pid $(cp_pid)); kubeconfig: $STATE/kubeconfig"
	exit 0
fi

# Something is there but not ready (crashed, hung, or killed uncleanly): stop it.
cp_stop

ensure_controlplane_binary

log="$STATE/controlplane.log"
rm -f "$STATE/ready" "$STATE/controlplane.pid"
echo "=== cluster-up $(date -u +%FT%TZ) ===" >>"$log"
echo "$K8S_VERSION" >"$STATE/kube-version"

port_args=()
[[ -n "${AIGW_APISERVER_PORT:-}" ]] && port_args=(--apiserver-port "$AIGW_APISERVER_PORT")
# AIGW_APISERVER_EXTRA_ARGS: kube-apiserver flags of one's own, e.g. "--profiling=true" to read
# CPU profiles at /debug/pprof while a benchmark runs (Benchmark chapter).
[[ -n "${AIGW_APISERVER_EXTRA_ARGS:-}" ]] && port_args+=(--apiserver-extra-args "$AIGW_APISERVER_EXTRA_ARGS")

echo "Starting aigw-controlplane (kube-apiserver $K8S_VERSION + etcd), state in $STATE"
t0=$SECONDS
# Detach: setsid gives it its own session and process group (cluster-down
# kills the group), and it inherits no fd but /dev/null and the log. In
# particular not fd 9 (our lock: it would stay held forever) nor the pipes of
# whoever called us (make, cargo test), which would then never see EOF.
(
	for fd in "/proc/$BASHPID/fd/"*; do
		fd="${fd##*/}"
		if ((fd > 2)); then eval "exec $fd>&-"; fi
	done
	exec setsid "$CP_BIN" --state-dir "$STATE" --kubeconfig "$STATE/kubeconfig" "${port_args[@]}"
) </dev/null >>"$log" 2>&1 &
launcher=$!

fail() {
	echo "error: $1" >&2
	echo "----- last lines of $log -----" >&2
	tail -n 60 "$log" >&2 || true
	echo "------------------------------" >&2
	cp_stop >&2 || true
	kill "$launcher" 2>/dev/null || true
	exit 1
}

while ! cp_ready; do
	if ((SECONDS - t0 > timeout_s)); then
		fail "control plane not ready after ${timeout_s} s"
	fi
	if ! kill -0 "$launcher" 2>/dev/null && ! cp_pid >/dev/null; then
		fail "aigw-controlplane exited during startup"
	fi
	sleep 0.3
done

echo "Control plane ready in $((SECONDS - t0)) s: $(cp_server) (pid $(cp_pid))"
echo "kubeconfig: $STATE/kubeconfig   (kubectl --kubeconfig $STATE/kubeconfig get ns)"
