# shellcheck shell=bash
# Shared helpers for hack/*.sh. Source it; it defines variables and functions only.
#
# Environment knobs (all optional):
#   AIGW_DEV_DIR            state dir of the local control plane (default: <repo>/.aigw-dev)
#   AIGW_CACHE_DIR          build cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/aigw)
#   AIGW_CLUSTER_TIMEOUT    seconds cluster-up waits for /readyz (default: 90)
#   AIGW_APISERVER_PORT     fixed kube-apiserver port (default: last one used if free, else any free)
#   AIGW_KUBE_VERSION       1.35 (default) or 1.30, the oldest Kubernetes the chart supports
#                           (kube-apiserver v1.30.14, its own module in hack/controlplane-1.30)

HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$HACK_DIR/.." && pwd)"
case "${AIGW_KUBE_VERSION:-1.35}" in
1.35)
	K8S_VERSION="v1.35.4"
	CP_SRC="$HACK_DIR/controlplane"
	CP_LINK="aigw-controlplane"
	;;
1.30)
	K8S_VERSION="v1.30.14"
	CP_SRC="$HACK_DIR/controlplane-1.30"
	CP_LINK="aigw-controlplane-1.30"
	;;
*)
	echo "error: AIGW_KUBE_VERSION=$AIGW_KUBE_VERSION: the local control plane is built for 1.35 (default) or 1.30" >&2
	return 1 2>/dev/null || exit 1
	;;
esac
STATE="$(realpath -m "${AIGW_DEV_DIR:-$REPO_ROOT/.aigw-dev}")"
CACHE_ROOT="${AIGW_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/aigw}"

# The checksum database is unreachable here: go.sum (committed) is the trust anchor.
go_env() {
	env GOFLAGS="-mod=mod -buildvcs=false" GOSUMDB=off GONOSUMDB='*' GOTOOLCHAIN=local "$@"
}

# Version stamping as upstream's hack/lib/version.sh does it, so /version and
# `kubectl version` report v1.35.4 instead of v0.0.0-master.
k8s_ldflags() {
	local minor="${K8S_VERSION#v1.}"
	minor="${minor%%.*}"
	local pkg flags="-s -w"
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		flags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
		flags+=" -X $pkg.gitCommit= -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
	done
	printf '%s' "$flags"
}

# Cache key: Kubernetes version + hash of the Go module, the program, the
# link flags and the Go toolchain.
cp_hash() {
	{
		cat "$CP_SRC/go.mod" "$CP_SRC/go.sum" "$CP_SRC"/*.go
		k8s_ldflags
		go version
	} | sha256sum | cut -c1-12
}

cp_cache_dir() { printf '%s/controlplane-%s-%s' "$CACHE_ROOT" "$K8S_VERSION" "$(cp_hash)"; }

need_go() {
	if ! command -v go >/dev/null 2>&1; then
		echo "error: Go is not installed (need Go >= 1.25 to build kube-apiserver $K8S_VERSION); run hack/ensure-tools.sh" >&2
		return 1
	fi
}

# go_build PKG OUT: build a package of the hack/controlplane module to OUT
# (atomically: concurrent builders never see a half-written file).
go_build() {
	local pkg="$1" out="$2" tmp
	mkdir -p "$(dirname "$out")"
	tmp="$out.tmp.$$"
	if ! (cd "$CP_SRC" && go_env go build -trimpath -ldflags "$(k8s_ldflags)" -o "$tmp" "$pkg"); then
		rm -f "$tmp"
		return 1
	fi
	mv -f "$tmp" "$out"
}

# ensure_controlplane_binary: sets CP_BIN, building it into the cache if missing.
ensure_controlplane_binary() {
	need_go
	local dir
	dir="$(cp_cache_dir)"
	CP_BIN="$dir/aigw-controlplane"
	if [[ ! -x "$CP_BIN" ]]; then
		echo ">>> Building aigw-controlplane (kube-apiserver $K8S_VERSION + embedded etcd) from source"
		echo ">>>   into $CP_BIN"
		echo ">>>   the first build takes several minutes on 2 cores; later ones come from this cache"
		local t0=$SECONDS
		go_build . "$CP_BIN"
		echo ">>> Built aigw-controlplane in $((SECONDS - t0)) s"
	fi
	mkdir -p "$HACK_DIR/bin"
	ln -sfn "$CP_BIN" "$HACK_DIR/bin/$CP_LINK"
}

# Take an exclusive flock on $STATE/lock as fd 9. Retries if the lock file
# was removed (cluster-down) while we were waiting for it.
lock_state() {
	while :; do
		mkdir -p "$STATE"
		exec 9>>"$STATE/lock"
		flock 9
		if [[ -e "$STATE/lock" ]] &&
			[[ "$(stat -L -c %d:%i "$STATE/lock")" == "$(stat -L -c %d:%i /proc/$$/fd/9)" ]]; then
			return 0
		fi
		exec 9>&-
	done
}

# Pid of the running control plane for $STATE, or nothing.
cp_pid() {
	local pid
	pid="$(cat "$STATE/controlplane.pid" 2>/dev/null || true)"
	if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null &&
		tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q aigw-controlplane; then
		echo "$pid"
		return 0
	fi
	# Fallback when the pid file is gone: a process whose command line names
	# exactly this state dir.
	local f args
	for f in /proc/[0-9]*/cmdline; do
		args="$(tr '\0' ' ' 2>/dev/null <"$f")" || continue
		if [[ "$args" == *aigw-controlplane*" --state-dir $STATE "* ]]; then
			pid="${f#/proc/}"
			echo "${pid%/cmdline}"
			return 0
		fi
	done
	return 1
}

cp_server() { sed -n 's/.*"server": *"\([^"]*\)".*/\1/p' "$STATE/ready" 2>/dev/null; }

# True when the control plane of $STATE runs and its /readyz answers ok.
cp_ready() {
	[[ -f "$STATE/ready" && -f "$STATE/kubeconfig" ]] || return 1
	cp_pid >/dev/null || return 1
	if command -v curl >/dev/null 2>&1; then
		local server token
		server="$(cp_server)"
		token="$(cat "$STATE/pki/admin.token" 2>/dev/null)" || return 1
		[[ -n "$server" ]] || return 1
		[[ "$(curl -fsS --max-time 5 --cacert "$STATE/pki/ca.crt" \
			-H "Authorization: Bearer $token" "$server/readyz" 2>/dev/null)" == ok ]]
	else
		[[ "$(kubectl --kubeconfig "$STATE/kubeconfig" --request-timeout=5s get --raw /readyz 2>/dev/null)" == ok ]]
	fi
}

# Stop the control plane of $STATE (whole process group), waiting for it to exit.
cp_stop() {
	local pid i
	pid="$(cp_pid)" || return 0
	echo "Stopping aigw-controlplane (pid $pid)"
	kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 100; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.2
	done
	echo "aigw-controlplane (pid $pid) ignored SIGTERM for 20 s; killing it" >&2
	kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
	for ((i = 0; i < 50; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
}

# mdBook, which builds the book under docs/ (`make docs`). No Debian package carries it, so it
# is built from crates.io once, with the lock file it was published with.
MDBOOK_VERSION="0.5.4"

# ensure_mdbook: sets MDBOOK, installing mdbook $MDBOOK_VERSION into the cache if missing
# ($AIGW_MDBOOK names another binary instead). Concurrent callers wait for one install.
ensure_mdbook() {
	if [[ -n "${AIGW_MDBOOK:-}" ]]; then
		MDBOOK="$AIGW_MDBOOK"
		return 0
	fi
	MDBOOK="$CACHE_ROOT/bin/mdbook-$MDBOOK_VERSION"
	[[ -x "$MDBOOK" ]] && return 0
	if ! command -v cargo >/dev/null 2>&1; then
		echo "error: cargo is needed to install mdbook $MDBOOK_VERSION (the docs book)" >&2
		return 1
	fi
	mkdir -p "$CACHE_ROOT/bin"
	(
		exec 8>>"$CACHE_ROOT/bin/.mdbook.lock"
		flock 8
		[[ -x "$MDBOOK" ]] && exit 0
		local work t0=$SECONDS
		work="$(mktemp -d)"
		trap 'rm -rf "$work"' EXIT
		echo ">>> Installing mdbook $MDBOOK_VERSION from crates.io into $MDBOOK (once, a few minutes)" >&2
		# Its own target dir: a CARGO_TARGET_DIR in the environment would keep the build there.
		CARGO_TARGET_DIR="$work/target" cargo install mdbook --version "=$MDBOOK_VERSION" --locked \
			--no-default-features --features search --root "$work/root" --quiet >&2
		mv -f "$work/root/bin/mdbook" "$MDBOOK.tmp.$$"
		mv -f "$MDBOOK.tmp.$$" "$MDBOOK"
		echo ">>> Installed mdbook $MDBOOK_VERSION in $((SECONDS - t0)) s" >&2
	)
}
