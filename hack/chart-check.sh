#!/usr/bin/env bash
# Check the Helm chart charts/aigw:
#   1. charts/aigw/crds/ is byte-identical to crds/ (the generated CRDs): fails on drift;
#   2. helm lint --strict, with the default values and with an override;
#   3. helm template with the default values and with an override (watchNamespaces, a default
#      connection with token.existingSecret), plus assertions on what it renders;
#   4. values the chart must refuse (replicaCount 2, managementUrl without a token Secret) fail;
#   5. when the local control plane answers (.aigw-dev/kubeconfig, see hack/cluster-up.sh), the
#      rendered manifests, CRDs included, go through `kubectl apply --server-side --dry-run=server`.
#
# Helm is taken from $HELM, else from PATH (a v3), else from the cache, else built there with
# `go install` from the Go module proxy (pinned: $HELM_VERSION).
#
# Usage: bash hack/chart-check.sh            (AIGW_CHART_CHECK_SERVER=0 skips step 5)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

HELM_VERSION="${HELM_VERSION:-v3.22.0}"
CHART=charts/aigw
NAMESPACE="${AIGW_CHART_NAMESPACE:-aigw-system}"
KUBECONFIG_DEV="${AIGW_DEV_DIR:-.aigw-dev}/kubeconfig"
BIN_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/aigw/bin"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

step() { printf '\n=== %s\n' "$*"; }
die() {
	echo "FAIL: $*" >&2
	exit 1
}

# --- helm -----------------------------------------------------------------------------------
find_helm() {
	if [[ -n "${HELM:-}" ]]; then
		echo "$HELM"
		return
	fi
	if command -v helm >/dev/null 2>&1 && helm version --short 2>/dev/null | grep -q '^v3\.'; then
		command -v helm
		return
	fi
	local cached="$BIN_DIR/helm-$HELM_VERSION"
	if [[ ! -x "$cached" ]]; then
		command -v go >/dev/null 2>&1 || die "helm is not installed and Go is not there to build it"
		echo ">>> Building helm $HELM_VERSION with go install into $cached (once)" >&2
		export GOFLAGS=-mod=mod GOSUMDB=off GOTOOLCHAIN=local
		# The -X flags of helm's own Makefile: without them `helm version` is bare and helm
		# assumes Kubernetes v1.20 (so `helm template` rejects charts needing a newer one).
		# The Kubernetes version is that of the client-go module helm is built with, plus 1.
		local gomod k8s_minor gobin
		gomod="$(go mod download -json "helm.sh/helm/v3@$HELM_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
		k8s_minor="$(awk '$1 == "k8s.io/client-go" {print $2}' "$gomod" | cut -d. -f2)"
		[[ -n "$k8s_minor" ]] || die "cannot tell the client-go version of helm $HELM_VERSION"
		gobin="$(mktemp -d)"
		GOBIN="$gobin" go install -trimpath -ldflags "-s -w \
			-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION \
			-X helm.sh/helm/v3/internal/version.gitTreeState=clean \
			-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 \
			-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$k8s_minor \
			-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 \
			-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$k8s_minor" \
			"helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2
		mkdir -p "$BIN_DIR"
		mv -f "$gobin/helm" "$cached"
		rm -rf "$gobin"
	fi
	echo "$cached"
}
helm="$(find_helm)"
echo "helm: $helm ($("$helm" version --short))"

# --- 1. CRD copy ----------------------------------------------------------------------------
step "charts/aigw/crds/ is identical to crds/"
if ! diff -r crds "$CHART/crds" >"$work/crds.diff"; then
	head -n 40 "$work/crds.diff" >&2
	die "charts/aigw/crds/ differs from crds/; run: rm -f $CHART/crds/*.yaml && cp crds/*.yaml $CHART/crds/"
fi
echo "ok: $(find crds -name "*.yaml" | wc -l) CRD files identical"

# --- values ---------------------------------------------------------------------------------
cat >"$work/override.yaml" <<'EOF'
watchNamespaces: [team-a, team-b]
managementUrl: http://aigw-emulator.aigw-system.svc:8787
gatewayUrl: http://aigw-emulator.aigw-system.svc:8787/v1
token:
  existingSecret:
    name: aigw-api-token
    key: api-token
concurrency: 8
apiQps: 2.5
driftInterval: 5m
logFormat: text
logLevel: info,aigw=debug
image:
  tag: 0.1.0-dev
imagePullSecrets: [{name: regcred}]
metrics:
  port: 9464
  service:
    enabled: false
serviceAccount:
  name: aigw-operator
nodeSelector: {kubernetes.io/os: linux}
EOF

# --- 2. lint --------------------------------------------------------------------------------
step "helm lint --strict $CHART"
"$helm" lint --strict "$CHART"
"$helm" lint --strict "$CHART" -f "$work/override.yaml"

# --- 3. template ----------------------------------------------------------------------------
render() { # out-file, extra helm args...: out-file gets the templates, out-file.all the CRDs too
	local out="$1"
	shift
	"$helm" template aigw "$CHART" --namespace "$NAMESPACE" "$@" >"$out"
	"$helm" template aigw "$CHART" --namespace "$NAMESPACE" --include-crds "$@" >"$out.all"
}
expect() { # file, fixed string, what
	grep -qF -- "$2" "$1" || die "$3: '$2' not in the rendered manifests ($1)"
}
expect_not() {
	if grep -qF -- "$2" "$1"; then die "$3: '$2' should not be rendered"; fi
}
kinds() { grep -E '^kind: ' "$1" | sort | uniq -c | awk '{printf "%s%s×%s", sep, $3, $1; sep=", "}'; }

step "helm template (default values)"
render "$work/default.yaml"
echo "rendered: $(kinds "$work/default.yaml.all")"
for kind in CustomResourceDefinition ServiceAccount ClusterRole ClusterRoleBinding Deployment Service; do
	expect "$work/default.yaml.all" "kind: $kind" "default values"
done
[[ "$(grep -c '^kind: CustomResourceDefinition' "$work/default.yaml.all")" == 4 ]] || die "expected 4 CRDs"
expect "$work/default.yaml" "- operator" "default values"
expect "$work/default.yaml" "--metrics-addr=0.0.0.0:9090" "default values"
expect "$work/default.yaml" "image: \"aigw/aigw:0.1.0\"" "default values"
expect "$work/default.yaml" "fieldPath: metadata.name" "default values (POD_NAME)"
expect "$work/default.yaml" "readOnlyRootFilesystem: true" "default values"
expect "$work/default.yaml" "type: RuntimeDefault" "default values"
expect "$work/default.yaml" "path: /healthz" "default values"
expect_not "$work/default.yaml" "--namespace=" "default values (all namespaces)"
expect_not "$work/default.yaml" "--token-file" "default values (no default connection)"

step "helm template (override: watchNamespaces, managementUrl, token.existingSecret)"
render "$work/override-rendered.yaml" -f "$work/override.yaml"
echo "rendered: $(kinds "$work/override-rendered.yaml.all")"
f="$work/override-rendered.yaml"
expect "$f" "\"--namespace=team-a\"" "override"
expect "$f" "\"--namespace=team-b\"" "override"
expect "$f" "\"--management-url=http://aigw-emulator.aigw-system.svc:8787\"" "override"
expect "$f" "\"--gateway-url=http://aigw-emulator.aigw-system.svc:8787/v1\"" "override"
expect "$f" "--token-file=/var/run/secrets/aigw/token" "override"
expect "$f" "--api-qps=2.5" "override"
expect "$f" "--concurrency=8" "override"
expect "$f" "\"--drift-interval=5m\"" "override"
expect "$f" "--metrics-addr=0.0.0.0:9464" "override"
expect "$f" "secretName: aigw-api-token" "override"
expect "$f" "key: api-token" "override"
expect "$f" "mountPath: /var/run/secrets/aigw" "override"
expect "$f" "name: aigw-operator" "override (serviceAccount.name)"
expect "$f" "image: \"aigw/aigw:0.1.0-dev\"" "override"
[[ "$(grep -c '^kind: Service$' "$f")" == 0 ]] || die "override: metrics Service rendered although disabled"

# --- 4. refused values ----------------------------------------------------------------------
step "values the chart refuses"
refuse() { # what, helm args...
	local what="$1"
	shift
	if "$helm" template aigw "$CHART" --namespace "$NAMESPACE" "$@" >/dev/null 2>"$work/err"; then
		die "rendered although $what"
	fi
	echo "ok: refused $what: $(grep -E "fail|rror|- at" "$work/err" | tr -s "\n " " " | cut -c1-220)"
}
refuse "replicaCount=2 (no leader election)" --set replicaCount=2
refuse "managementUrl without token.existingSecret" --set managementUrl=http://x
refuse "token.existingSecret without managementUrl" --set token.existingSecret.name=t
refuse "logFormat=xml" --set logFormat=xml
refuse "concurrency=0" --set concurrency=0

# --- 5. server-side dry run -----------------------------------------------------------------
step "kubectl apply --dry-run=server"
if [[ "${AIGW_CHART_CHECK_SERVER:-1}" == 0 ]]; then
	echo "skipped (AIGW_CHART_CHECK_SERVER=0)"
elif [[ ! -f "$KUBECONFIG_DEV" ]]; then
	echo "skipped: no $KUBECONFIG_DEV (start the local control plane with: make cluster)"
elif ! kubectl --kubeconfig "$KUBECONFIG_DEV" --request-timeout=5s get --raw /readyz >/dev/null 2>&1; then
	echo "skipped: the control plane of $KUBECONFIG_DEV does not answer (make cluster)"
else
	k=(kubectl --kubeconfig "$KUBECONFIG_DEV")
	# The release namespace must exist for the namespaced objects to pass a server dry run.
	if ! "${k[@]}" get namespace "$NAMESPACE" >/dev/null 2>&1; then
		"${k[@]}" create namespace "$NAMESPACE"
	fi
	for values in default override-rendered; do
		echo "--- $values"
		"${k[@]}" apply --server-side --force-conflicts --field-manager=aigw-chart-check \
			--dry-run=server --validate=strict -f "$work/$values.yaml.all"
	done
fi

printf '\nchart-check: all checks passed\n'
