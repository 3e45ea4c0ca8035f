#!/usr/bin/env bash
# Install what the local control plane and the tests need on a fresh Debian
# machine, when missing: Go (checked only), flock/setsid, curl, kubectl
# (built from source when absent).
# Then pre-build the control plane binary, mdbook (the docs book) and Helm (the
# chart's RBAC the tests run under) into the cache (skip with --no-build) so that
# no test has to wait for those builds.
set -euo pipefail
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

build=1
[[ "${1:-}" == "--no-build" ]] && build=0

apt_updated=0
apt_install() {
	local sudo=()
	if [[ "$(id -u)" != 0 ]]; then
		command -v sudo >/dev/null 2>&1 || { echo "error: need root (or sudo) to apt-get install $*" >&2; return 1; }
		sudo=(sudo)
	fi
	if ((apt_updated == 0)); then
		"${sudo[@]}" apt-get update -qq
		apt_updated=1
	fi
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}

# Go: Kubernetes v1.35 needs Go >= 1.25. Debian's golang-go is older, so we
# do not try to install it.
if ! command -v go >/dev/null 2>&1; then
	echo "error: Go is not installed. The local control plane (kube-apiserver $K8S_VERSION, built from source)" >&2
	echo "       needs Go >= 1.25; Debian's golang-go package is too old. Install an upstream Go toolchain." >&2
	exit 1
fi
gov="$(go env GOVERSION)" # e.g. go1.26.8
IFS=. read -r major minor _ <<<"${gov#go}"
if ((major < 1 || (major == 1 && minor < 25))); then
	echo "error: $gov is too old: kube-apiserver $K8S_VERSION needs Go >= 1.25 (GOTOOLCHAIN=local: no auto-download)" >&2
	exit 1
fi
echo "go: $gov"

for cmd in flock setsid; do
	command -v "$cmd" >/dev/null 2>&1 || apt_install util-linux
done
command -v curl >/dev/null 2>&1 || apt_install curl ca-certificates
command -v sha256sum >/dev/null 2>&1 || apt_install coreutils

if command -v kubectl >/dev/null 2>&1; then
	echo "kubectl: $(command -v kubectl)"
else
	# Debian's kubernetes-client is 1.20, far outside the supported skew, so
	# build kubectl from the same pinned module (declared as a `tool` in go.mod).
	kbin="$CACHE_ROOT/kubectl-$K8S_VERSION-$(cp_hash)/kubectl"
	if [[ ! -x "$kbin" ]]; then
		echo ">>> Building kubectl $K8S_VERSION from source into $kbin"
		go_build k8s.io/kubernetes/cmd/kubectl "$kbin"
	fi
	mkdir -p "$HACK_DIR/bin"
	ln -sfn "$kbin" "$HACK_DIR/bin/kubectl"
	if [[ -w /usr/local/bin ]]; then
		ln -sfn "$kbin" /usr/local/bin/kubectl
		echo "kubectl: $kbin (linked from /usr/local/bin/kubectl)"
	else
		echo "kubectl: $kbin (linked from hack/bin/kubectl; add $HACK_DIR/bin to PATH)"
	fi
fi

if ((build)); then
	ensure_controlplane_binary
	echo "aigw-controlplane: $CP_BIN"
	ensure_mdbook
	echo "mdbook: $MDBOOK"
	# Helm renders the chart's RBAC, which the demo's and every integration test's operator runs
	# under; hack/chart-check.sh finds it or builds it into the cache.
	bash "$HACK_DIR/chart-check.sh" --template aigw --show-only templates/serviceaccount.yaml >/dev/null
	echo "helm: ready"
fi
