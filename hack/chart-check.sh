#!/usr/bin/env bash
# Check the Helm chart charts/aigw:
#   1. charts/aigw/crds/ is byte-identical to crds/ (the generated CRDs): fails on drift;
#   2. helm lint --strict, with the default values and with an override;
#   3. helm template with the default values and with an override (watchNamespaces, a default
#      connection with token.existingSecret), plus assertions on what it renders (the FlowSchema
#      of the Lease requests among them: rendered with leader election, not without it or with
#      leaderElection.flowSchema.enabled=false);
#   4. the RBAC with watchNamespaces: [a, b]: Roles in a and b, no ClusterRole grants Secrets;
#   4b. with monitoring.enabled=true: the PrometheusRule (rules from files/prometheus-rules.yaml),
#      the ServiceMonitor and the Grafana dashboard ConfigMap (files/grafana-dashboard.json, with
#      the sidecar label); none of them by default;
#   5. values the chart must refuse (2 replicas without leader election, managementUrl without a
#      token Secret, ...) fail;
#   6. when the local control plane answers (.aigw-dev/kubeconfig, see hack/cluster-up.sh), the
#      rendered manifests, CRDs included, go through `kubectl apply --server-side --dry-run=server`
#      (the monitoring rendering without its PrometheusRule and ServiceMonitor: the local
#      apiserver has no Prometheus Operator CRDs; `make alerts-test` checks the rules with promtool),
#      and the RBAC rendered with watchNamespaces: [a, b] is applied for real and checked with
#      `kubectl auth can-i ... --as system:serviceaccount:...` (namespaces a, b, c are created
#      for it when missing; what the check created is deleted again); then the rendered
#      FlowSchema is applied, and the Lease requests the elector makes (create, get, update, list,
#      delete), sent as the chart's ServiceAccount (impersonated, kubectl -v=8), must come back
#      with the X-Kubernetes-PF-FlowSchema-UID / -PriorityLevel-UID headers of that FlowSchema and
#      of the built-in leader-election PriorityLevelConfiguration.
#
# Helm is taken from $HELM, else from PATH (a v3), else from the cache, else built there with
# `go install` from the Go module proxy (pinned: $HELM_VERSION).
#
# Usage: bash hack/chart-check.sh            (AIGW_CHART_CHECK_SERVER=0 skips step 6)
#        bash hack/chart-check.sh --template [helm template args...]
#            only prints `helm template <args...> charts/aigw` on stdout, with the helm found or
#            built as above (tests/it/chart/rbac.rs renders the chart this way).
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
if [[ "${1:-}" == --template ]]; then
	shift
	exec "$helm" template "$@" "$CHART"
fi
echo "helm: $helm ($("$helm" version --short))"

# --- 1. CRD copy ----------------------------------------------------------------------------
step "charts/aigw/crds/ is identical to crds/"
if ! diff -r crds "$CHART/crds" >"$work/crds.diff"; then
	head -n 40 "$work/crds.diff" >&2
	die "charts/aigw/crds/ differs from crds/; run: rm -f $CHART/crds/*.yaml && cp crds/*.yaml $CHART/crds/"
fi
echo "ok: $(find crds -name "*.yaml" | wc -l) CRD and policy files identical"

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
"$helm" lint --strict "$CHART" --set monitoring.enabled=true

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
# doc_of FILE KIND NAME NAMESPACE: the document of that object, comments dropped ("" when the
# object is not rendered). helm separates documents with "---" lines.
doc_of() {
	awk -v kind="$2" -v name="$3" -v ns="$4" '
		function flush() { if (k == kind && n == name && m == ns) printf "%s", doc; doc = ""; k = n = m = "" }
		/^---/ { flush(); next }
		/^[[:space:]]*#/ { next }
		{ doc = doc $0 "\n" }
		/^kind: / { k = $2 }
		/^  name: / { if (n == "") n = $2 }
		/^  namespace: / { if (m == "") m = $2 }
		END { flush() }' "$1"
}

step "helm template (default values)"
render "$work/default.yaml"
echo "rendered: $(kinds "$work/default.yaml.all")"
for kind in CustomResourceDefinition ServiceAccount ClusterRole ClusterRoleBinding Role RoleBinding \
	Deployment Service PodDisruptionBudget FlowSchema; do
	expect "$work/default.yaml.all" "kind: $kind" "default values"
done
# crds/ holds one file per CRD, and free-form-limits.yaml (the admission policies bounding the
# free-form fields), which the chart installs with them.
crd_count=$(grep -l '^kind: CustomResourceDefinition' crds/*.yaml | wc -l)
[[ "$(grep -c '^kind: CustomResourceDefinition' "$work/default.yaml.all")" == "$crd_count" ]] || die "expected $crd_count CRDs (one per CRD file under crds/)"
expect "$work/default.yaml.all" "kind: ValidatingAdmissionPolicy" "default values (the free-form bounds)"
expect "$work/default.yaml" "- operator" "default values"
expect "$work/default.yaml" "--metrics-addr=0.0.0.0:9090" "default values"
expect "$work/default.yaml" "image: \"aigw/aigw:0.1.0\"" "default values"
expect "$work/default.yaml" "fieldPath: metadata.name" "default values (POD_NAME)"
expect "$work/default.yaml" "readOnlyRootFilesystem: true" "default values"
expect "$work/default.yaml" "type: RuntimeDefault" "default values"
expect "$work/default.yaml" "path: /healthz" "default values (liveness)"
expect "$work/default.yaml" "path: /readyz" "default values (readiness)"
# Two replicas under leader election, rolled one new replica at a time, on different nodes.
expect "$work/default.yaml" "replicas: 2" "default values"
expect "$work/default.yaml" "type: RollingUpdate" "default values"
expect "$work/default.yaml" "maxUnavailable: 0" "default values (rollout)"
expect "$work/default.yaml" "maxSurge: 1" "default values (rollout)"
expect "$work/default.yaml" "kind: PodDisruptionBudget" "default values"
expect "$work/default.yaml" "maxUnavailable: 1" "default values (PDB)"
expect "$work/default.yaml" "preferredDuringSchedulingIgnoredDuringExecution" "default values (anti-affinity)"
expect "$work/default.yaml" "topologyKey: kubernetes.io/hostname" "default values (anti-affinity)"
expect "$work/default.yaml" "--leader-elect=true" "default values"
expect "$work/default.yaml" "\"--leader-election-namespace=$NAMESPACE\"" "default values"
expect "$work/default.yaml" "\"--connection-secret-namespace=$NAMESPACE\"" "default values"
expect "$work/default.yaml" "fieldPath: metadata.namespace" "default values (POD_NAMESPACE)"
expect "$work/default.yaml" "name: aigw-leader-election" "default values (Lease Role)"
expect_not "$work/default.yaml" "type: Recreate" "default values"
# The FlowSchema putting the operator's Lease requests into the leader-election priority level.
fs="$(doc_of "$work/default.yaml" FlowSchema aigw-leader-election "")"
[[ -n "$fs" ]] || die "default values: no FlowSchema aigw-leader-election"
for line in "apiVersion: flowcontrol.apiserver.k8s.io/v1" "name: leader-election" "matchingPrecedence: 200" \
	"kind: ServiceAccount" "name: aigw" "namespace: $NAMESPACE" 'apiGroups: ["coordination.k8s.io"]' \
	'resources: ["leases"]' "namespaces: [\"$NAMESPACE\"]" 'verbs: ["get", "list", "create", "update", "delete"]'; do
	grep -qF -- "$line" <<<"$fs" || die "default values: '$line' not in the FlowSchema"
done
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

step "helm template (replicaCount: 1, leaderElection.enabled: false)"
render "$work/single.yaml" --set replicaCount=1 --set leaderElection.enabled=false
f="$work/single.yaml"
expect "$f" "replicas: 1" "single replica"
expect "$f" "type: Recreate" "single replica without leader election"
expect "$f" "--leader-elect=false" "single replica"
expect_not "$f" "kind: PodDisruptionBudget" "single replica"
expect_not "$f" "coordination.k8s.io" "single replica (no Lease Role)"
expect_not "$f" "\"--leader-election-namespace=" "single replica"
expect_not "$f" "kind: FlowSchema" "single replica (no Lease, no FlowSchema)"

step "helm template (leaderElection.flowSchema: disabled, and another precedence and Lease namespace)"
render "$work/no-flowschema.yaml" --set leaderElection.flowSchema.enabled=false
expect_not "$work/no-flowschema.yaml" "kind: FlowSchema" "leaderElection.flowSchema.enabled=false"
expect "$work/no-flowschema.yaml" "name: aigw-leader-election" "leaderElection.flowSchema.enabled=false (the Lease Role stays)"
render "$work/flowschema-ns.yaml" --set leaderElection.flowSchema.matchingPrecedence=850 \
	--set leaderElection.namespace=leases --set serviceAccount.name=aigw-sa
fs="$(doc_of "$work/flowschema-ns.yaml" FlowSchema aigw-leader-election "")"
for line in "matchingPrecedence: 850" 'namespaces: ["leases"]' "name: aigw-sa" "namespace: $NAMESPACE"; do
	grep -qF -- "$line" <<<"$fs" || die "FlowSchema with leaderElection.namespace=leases: '$line' not in it"
done
echo "ok"

# --- 4. RBAC with watchNamespaces ---------------------------------------------------------
# The `resources:` lines of every ClusterRole of FILE (the chart writes them in flow style).
cluster_role_resources() {
	awk '
		function flush() { if (k == "ClusterRole") printf "%s", doc; doc = ""; k = "" }
		/^---/ { flush(); next }
		/^[[:space:]]*#/ { next }
		{ doc = doc $0 "\n" }
		/^kind: / { k = $2 }
		END { flush() }' "$1" | grep -E '^[[:space:]]*(- )?resources:' || true
}

step "RBAC with watchNamespaces: [a, b]: Roles in a and b, no Secrets through a ClusterRole"
render "$work/rbac-ns.yaml" --set "watchNamespaces={a,b}"
f="$work/rbac-ns.yaml"
cluster_role_resources "$f" >"$work/cr.txt"
[[ -s "$work/cr.txt" ]] || die "no ClusterRole rendered (Connections and Namespaces need one)"
if grep -qw secrets "$work/cr.txt"; then
	die "a ClusterRole grants secrets although watchNamespaces is set"
fi
for resource in connections namespaces; do
	grep -qw "$resource" "$work/cr.txt" || die "the ClusterRole does not grant $resource"
done
for resource in configs deployments ratelimitspolicies events statefulsets; do
	if grep -qw "$resource" "$work/cr.txt"; then
		die "the ClusterRole grants $resource although watchNamespaces is set"
	fi
done
for ns in a b; do
	role="$(doc_of "$f" Role aigw "$ns")"
	[[ -n "$role" ]] || die "no Role aigw in namespace $ns"
	for resource in secrets configs deployments ratelimitspolicies events statefulsets daemonsets; do
		grep -qw "$resource" <<<"$role" || die "the Role in $ns does not grant $resource"
	done
	[[ -n "$(doc_of "$f" RoleBinding aigw "$ns")" ]] || die "no RoleBinding aigw in namespace $ns"
done
[[ -z "$(doc_of "$f" Role aigw c)" ]] || die "a Role in a namespace not watched"
role="$(doc_of "$f" Role aigw-connection-secrets "$NAMESPACE")"
grep -qw secrets <<<"$role" || die "no Role for the Connection secrets in $NAMESPACE"
grep -q 'verbs: \["get", "list", "watch"\]' <<<"$role" || die "the Connection secrets Role grants more than reading (get, list, watch)"
grep -qw leases <<<"$(doc_of "$f" Role aigw-leader-election "$NAMESPACE")" ||
	die "no Role for the Lease in $NAMESPACE"
role="$(doc_of "$f" Role aigw-hash-key "$NAMESPACE")"
grep -q 'resourceNames: \["aigw-hash-key"\]' <<<"$role" ||
	die "no Role for the hash key Secret in $NAMESPACE, or its get is not limited to that Secret"
echo "ok: ClusterRole without secrets; Roles in a, b; connection-secrets, hash-key and leader-election Roles in $NAMESPACE"

step "RBAC without watchNamespaces: one ClusterRole for every namespace"
cluster_role_resources "$work/default.yaml" >"$work/cr-default.txt"
for resource in secrets configs connections namespaces events deployments statefulsets; do
	grep -qw "$resource" "$work/cr-default.txt" || die "the cluster-wide ClusterRole does not grant $resource"
done
expect_not "$work/default.yaml" "name: aigw-connection-secrets" "default values (the ClusterRole covers them)"
expect "$work/default.yaml" "name: aigw-hash-key" "default values (the hash key Secret's Role)"
echo "ok"

# --- 4b. monitoring ---------------------------------------------------------------------------
step "monitoring: PrometheusRule, ServiceMonitor and Grafana dashboard (monitoring.enabled=true)"
for kind in PrometheusRule ServiceMonitor; do
	expect_not "$work/default.yaml" "kind: $kind" "default values (monitoring.enabled is false)"
done
expect_not "$work/default.yaml" "grafana_dashboard" "default values (monitoring.enabled is false)"
render "$work/monitoring.yaml" --set monitoring.enabled=true \
	--set monitoring.rules.labels.release=kube-prometheus-stack \
	--set monitoring.dashboard.annotations.grafana_folder=aigw
f="$work/monitoring.yaml"
echo "rendered: $(kinds "$f")"
expect "$f" "kind: PrometheusRule" "monitoring"
expect "$f" "apiVersion: monitoring.coreos.com/v1" "monitoring"
expect "$f" "release: kube-prometheus-stack" "monitoring (rules.labels)"
expect "$f" "alert: AigwResourcesStalled" "monitoring"
expect "$f" 'job="aigw-metrics",namespace="'"$NAMESPACE"'"' "monitoring (the rules' default selector)"
expect "$f" 'summary: "{{ $value }} aigw {{ $labels.kind }}' "monitoring (Prometheus templates pass through Helm)"
expect "$f" "kind: ServiceMonitor" "monitoring"
expect "$f" "honorLabels: true" "monitoring (aigw's endpoint label kept)"
expect "$f" "grafana_dashboard: \"1\"" "monitoring (the dashboard sidecar label)"
expect "$f" "grafana_folder: aigw" "monitoring (dashboard.annotations)"
expect "$f" '"uid": "aigw-operator"' "monitoring (the dashboard JSON)"
render "$work/monitoring-only-rules.yaml" --set monitoring.enabled=true \
	--set monitoring.serviceMonitor.enabled=false --set monitoring.dashboard.enabled=false
expect "$work/monitoring-only-rules.yaml" "kind: PrometheusRule" "monitoring without ServiceMonitor and dashboard"
expect_not "$work/monitoring-only-rules.yaml" "kind: ServiceMonitor" "monitoring.serviceMonitor.enabled=false"
expect_not "$work/monitoring-only-rules.yaml" "grafana_dashboard" "monitoring.dashboard.enabled=false"
# The server-side dry run below takes what the local apiserver knows: no Prometheus Operator CRDs.
awk 'function flush() { if (k != "PrometheusRule" && k != "ServiceMonitor") printf "%s", doc; doc = ""; k = "" }
	/^---/ { flush(); doc = $0 "\n"; next }
	{ doc = doc $0 "\n" }
	/^kind: / { k = $2 }
	END { flush() }' "$f.all" >"$work/monitoring-core.yaml.all"
echo "ok"

# --- 5. refused values ----------------------------------------------------------------------
step "values the chart refuses"
refuse() { # what, helm args...
	local what="$1"
	shift
	if "$helm" template aigw "$CHART" --namespace "$NAMESPACE" "$@" >/dev/null 2>"$work/err"; then
		die "rendered although $what"
	fi
	echo "ok: refused $what: $(grep -E "fail|rror|- at" "$work/err" | tr -s "\n " " " | cut -c1-220)"
}
refuse "replicaCount=2 without leader election" --set replicaCount=2 --set leaderElection.enabled=false
refuse "podAntiAffinity=sometimes" --set podAntiAffinity=sometimes
refuse "managementUrl without token.existingSecret" --set managementUrl=http://x
refuse "token.existingSecret without managementUrl" --set token.existingSecret.name=t
refuse "logFormat=xml" --set logFormat=xml
refuse "concurrency=0" --set concurrency=0
refuse "a ServiceMonitor without the metrics Service" --set monitoring.enabled=true --set metrics.service.enabled=false
refuse "leaderElection.flowSchema.matchingPrecedence=0" --set leaderElection.flowSchema.matchingPrecedence=0

# --- 6. against the local control plane ----------------------------------------------------
created_namespaces=()
applied=()
cleanup_server() {
	local f ns
	for f in "${applied[@]}"; do
		"${k[@]}" delete --ignore-not-found --wait=false -f "$f" >/dev/null 2>&1 || true
	done
	# No namespace controller in the local control plane: finalize what was created directly.
	for ns in "${created_namespaces[@]}"; do
		"${k[@]}" delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
		printf '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"%s"},"spec":{"finalizers":[]}}' "$ns" |
			"${k[@]}" replace --raw "/api/v1/namespaces/$ns/finalize" -f - >/dev/null 2>&1 || true
	done
	if ((${#created_namespaces[@]})); then echo "cleaned up: namespaces ${created_namespaces[*]}"; fi
}
ensure_namespace() {
	if ! "${k[@]}" get namespace "$1" >/dev/null 2>&1; then
		"${k[@]}" create namespace "$1" >/dev/null
		created_namespaces+=("$1")
	fi
}
# can WANT VERB RESOURCE [kubectl args...]: `kubectl auth can-i` as the operator's ServiceAccount.
can() {
	local want="$1" got
	shift
	got="$("${k[@]}" auth can-i "$@" --as "$sa" 2>/dev/null || true)"
	[[ "$got" == "$want" ]] || die "kubectl auth can-i $* --as $sa: '$got', expected '$want'"
	printf 'ok: %-3s can-i %s\n' "$got" "$*"
}
# apply_rbac RELEASE helm-args...: applies the ServiceAccount and RBAC of a render for real.
apply_rbac() {
	local release="$1" out="$work/rbac-$1.yaml"
	shift
	"$helm" template "$release" "$CHART" --namespace "$NAMESPACE" "$@" \
		--show-only templates/serviceaccount.yaml --show-only templates/rbac.yaml >"$out"
	applied+=("$out")
	"${k[@]}" apply --server-side --field-manager=aigw-chart-check -f "$out" >/dev/null
	sa="system:serviceaccount:$NAMESPACE:$release"
}

# lease_request PRIORITY-LEVEL-UID FLOWSCHEMA-UID KUBECTL-ARGS...: runs kubectl as $sa with -v=8 and
# prints "<METHOD> <fs uid> <pl uid>" for each request it made to a Lease URL, from the
# X-Kubernetes-PF-FlowSchema-UID and X-Kubernetes-PF-PriorityLevel-UID headers of the answers
# (the apiserver sets them on every answer, a refusal included). Its stdout goes to $work/kubectl.out,
# its exit status to $work/kubectl.rc.
pf_of_lease_requests() {
	local rc=0
	"${k[@]}" "$@" --as "$sa" -v=8 >"$work/kubectl.out" 2>"$work/kubectl.log" || rc=$?
	echo "$rc" >"$work/kubectl.rc"
	# kubectl <= 1.32: "round_trippers.go:...] GET https://..." then header lines; later versions
	# log '"Response" verb="GET" url="https://..." ... headers=<' and the header lines.
	awk '
		function emit() { if (method != "" && fs != "" && pl != "") print method, fs, pl; fs = pl = "" }
		match($0, /(verb="|\] )(GET|POST|PUT|PATCH|DELETE)"? (url=")?https?:\/\/[^ "]*/) {
			emit()
			req = substr($0, RSTART, RLENGTH)
			method = ""
			if (req ~ /\/leases([\/?]|$)/) {
				sub(/^(verb="|\] )/, "", req)
				method = substr(req, 1, index(req, " ") - 1)
				sub(/"$/, "", method)
			}
		}
		tolower($0) ~ /x-kubernetes-pf-flowschema-uid:/ { fs = $NF }
		tolower($0) ~ /x-kubernetes-pf-prioritylevel-uid:/ { pl = $NF }
		END { emit() }' "$work/kubectl.log"
}
# classified WANT WHAT KUBECTL-ARGS...: every Lease request of that kubectl command (at least one)
# was classified (WANT=yes) or not (WANT=no) into the chart's FlowSchema $fs_uid and the
# leader-election priority level $pl_uid.
classified() {
	local want="$1" what="$2" method f p n=0
	shift 2
	while read -r method f p; do
		n=$((n + 1))
		if [[ "$want" == yes ]]; then
			[[ "$f" == "$fs_uid" && "$p" == "$pl_uid" ]] ||
				die "$what: $method as $sa classified into FlowSchema $f / priority level $p, expected $fs_uid ($fs_name) / $pl_uid (leader-election)"
			printf 'ok: %-6s %s: FlowSchema %s (%s), PriorityLevel %s (leader-election)\n' "$method" "$what" "$f" "$fs_name" "$p"
		else
			[[ "$f" != "$fs_uid" && "$p" != "$pl_uid" ]] ||
				die "$what: $method as $sa classified into the chart's FlowSchema or leader-election (FlowSchema $f, priority level $p)"
			printf 'ok: %-6s %s: FlowSchema %s (%s), PriorityLevel %s, not leader-election\n' "$method" "$what" "$f" \
				"$("${k[@]}" get flowschemas -o jsonpath="{.items[?(@.metadata.uid==\"$f\")].metadata.name}")" "$p"
		fi
	done < <(pf_of_lease_requests "$@")
	((n > 0)) || die "$what: no Lease request with the X-Kubernetes-PF-* headers in kubectl -v=8 output (kubectl $*)"
	if [[ "$want" == yes && "$(cat "$work/kubectl.rc")" != 0 ]]; then
		grep -iE "error|forbidden" "$work/kubectl.log" | tail -n 3 >&2
		die "$what: kubectl $* --as $sa failed"
	fi
}

step "against the local control plane"
if [[ "${AIGW_CHART_CHECK_SERVER:-1}" == 0 ]]; then
	echo "skipped (AIGW_CHART_CHECK_SERVER=0)"
elif [[ ! -f "$KUBECONFIG_DEV" ]]; then
	echo "skipped: no $KUBECONFIG_DEV (start the local control plane with: make cluster)"
elif ! kubectl --kubeconfig "$KUBECONFIG_DEV" --request-timeout=5s get --raw /readyz >/dev/null 2>&1; then
	echo "skipped: the control plane of $KUBECONFIG_DEV does not answer (make cluster)"
else
	k=(kubectl --kubeconfig "$KUBECONFIG_DEV")
	trap 'cleanup_server; rm -rf "$work"' EXIT
	# Namespaced objects pass a server dry run only in namespaces that exist.
	for ns in "$NAMESPACE" team-a team-b a b c; do ensure_namespace "$ns"; done

	for values in default override-rendered single rbac-ns monitoring-core; do
		echo "--- kubectl apply --dry-run=server: $values"
		"${k[@]}" apply --server-side --force-conflicts --field-manager=aigw-chart-check \
			--dry-run=server --validate=strict -f "$work/$values.yaml.all" >"$work/dry-run.out"
		echo "ok: $(wc -l <"$work/dry-run.out") objects accepted"
	done

	# can-i resolves the aigw kinds only once their CRDs are served (they stay, as after an install).
	"${k[@]}" apply --server-side --force-conflicts --field-manager=aigw-chart-check -f "$CHART/crds/" >/dev/null
	mapfile -t crd_files < <(grep -l '^kind: CustomResourceDefinition' "$CHART"/crds/*.yaml)
	"${k[@]}" wait --for condition=established --timeout=30s "${crd_files[@]/#/-f}" >/dev/null

	echo "--- RBAC applied with watchNamespaces: [a, b] (release aigw-chart-check)"
	apply_rbac aigw-chart-check --set "watchNamespaces={a,b}"
	can no get secrets -n c
	can yes get secrets -n a
	can yes list secrets -n b
	can yes watch secrets -n a
	can yes create secrets -n a
	can yes patch secrets -n b
	can no delete secrets -n a
	can no list secrets --all-namespaces
	can yes get secrets -n "$NAMESPACE"
	can yes watch secrets -n "$NAMESPACE"
	# The hash key Secret aigw-hash-key is created there at the first start (create cannot be
	# limited to a name); nothing else may be written there.
	can yes create secrets -n "$NAMESPACE"
	can no patch secrets -n "$NAMESPACE"
	can no delete secrets -n "$NAMESPACE"
	can yes get secrets/aigw-hash-key -n "$NAMESPACE"
	can yes list configs.aigw.io -n a
	can yes patch deployments.aigw.io --subresource=status -n b
	can yes watch providers.aigw.io -n a
	can yes patch providers.aigw.io --subresource=status -n b
	can no list providers.aigw.io -n c
	can yes watch apikeys.aigw.io -n a
	can yes patch apikeys.aigw.io --subresource=status -n b
	can no list apikeys.aigw.io -n c
	can no list configs.aigw.io --all-namespaces
	can no list ratelimitspolicies.aigw.io -n c
	can yes watch connections.aigw.io
	can yes patch connections.aigw.io --subresource=status
	can no update connections.aigw.io
	can yes watch clusterguardrails.aigw.io
	can yes patch clusterguardrails.aigw.io --subresource=status
	can no update clusterguardrails.aigw.io
	can yes watch integrations.aigw.io
	can yes patch integrations.aigw.io --subresource=status
	can no update integrations.aigw.io
	can yes create events.events.k8s.io -n default
	can yes get namespaces
	can yes create events.events.k8s.io -n a
	can no create events.events.k8s.io -n c
	can yes patch deployments.apps -n b
	can no patch deployments.apps -n c
	can no get configmaps -n a
	can yes create leases.coordination.k8s.io -n "$NAMESPACE"
	can yes update leases.coordination.k8s.io/aigw -n "$NAMESPACE"
	can no update leases.coordination.k8s.io/other -n "$NAMESPACE"
	can yes get customresourcedefinitions.apiextensions.k8s.io/configs.aigw.io
	can no get customresourcedefinitions.apiextensions.k8s.io/other.example.com

	echo "--- RBAC applied without watchNamespaces (release aigw-chart-check-all)"
	apply_rbac aigw-chart-check-all
	can yes get secrets -n c
	can yes list secrets --all-namespaces
	can yes list configs.aigw.io --all-namespaces
	can yes patch statefulsets.apps -n c
	can no delete secrets -n c
	can yes update leases.coordination.k8s.io/aigw -n "$NAMESPACE"

	# API Priority and Fairness: the rendered FlowSchema applied for real, and the Lease requests
	# the elector makes (create, get, update, list, delete), sent as the chart's ServiceAccount,
	# are classified into it and the built-in leader-election priority level. With sharding (the
	# RBAC then grants every verb on any Lease there) so the Lease is not the operator's `aigw`.
	release=aigw-chart-check-apf
	echo "--- FlowSchema applied with sharding.enabled=true (release $release)"
	apply_rbac "$release" --set sharding.enabled=true
	"$helm" template "$release" "$CHART" --namespace "$NAMESPACE" --set sharding.enabled=true \
		--show-only templates/flowschema.yaml >"$work/flowschema.yaml" 2>"$work/err" ||
		die "the chart renders no FlowSchema with leader election on: $(tr -s '\n' ' ' <"$work/err")"
	applied+=("$work/flowschema.yaml")
	fs_name="$release-leader-election"
	"${k[@]}" apply --server-side --field-manager=aigw-chart-check -f "$work/flowschema.yaml" >/dev/null
	fs_uid="$("${k[@]}" get flowschema "$fs_name" -o jsonpath='{.metadata.uid}')"
	pl_uid="$("${k[@]}" get prioritylevelconfiguration leader-election -o jsonpath='{.metadata.uid}')"
	[[ -n "$fs_uid" && -n "$pl_uid" ]] || die "no FlowSchema $fs_name or no PriorityLevelConfiguration leader-election"
	echo "FlowSchema $fs_name uid $fs_uid; PriorityLevelConfiguration leader-election uid $pl_uid"
	# The apiserver's APF configuration follows the FlowSchemas through an informer: wait until
	# it classifies by the new one (dangling: false, and the first request lands in it).
	for _ in $(seq 1 40); do
		[[ "$("${k[@]}" get flowschema "$fs_name" -o jsonpath='{.status.conditions[?(@.type=="Dangling")].status}')" == False ]] &&
			pf_of_lease_requests get leases -n "$NAMESPACE" | grep -q " $fs_uid $pl_uid\$" && break
		sleep 0.5
	done
	lease="$release-probe"
	lease_json="{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":\"$lease\",\"namespace\":\"$NAMESPACE\"},\"spec\":{\"holderIdentity\":\"chart-check\",\"leaseDurationSeconds\":15}}"
	"${k[@]}" delete lease "$lease" -n "$NAMESPACE" --ignore-not-found >/dev/null
	classified yes "create Lease" create -f - <<<"$lease_json"
	classified yes "get Lease" get lease "$lease" -n "$NAMESPACE" -o json
	mv "$work/kubectl.out" "$work/lease.json"
	classified yes "update Lease" replace -f "$work/lease.json"
	classified yes "list Leases" get leases -n "$NAMESPACE"
	classified yes "delete Lease" delete lease "$lease" -n "$NAMESPACE" --wait=false
	# Only what the FlowSchema names: Leases elsewhere stay with the suggested schemas.
	classified no "list Leases in namespace a" get leases -n a
fi

printf '\nchart-check: all checks passed\n'
