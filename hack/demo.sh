#!/usr/bin/env bash
# `make demo`: the whole loop on this machine. Local control plane (kube-apiserver + etcd), the
# management API emulator, the operator, and examples/ applied; waits for Ready and prints
# `kubectl get aigw -A`. The emulator and the operator keep running afterwards so you can play;
# `bash hack/demo.sh stop` (or `make cluster-down`) stops them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
demo="$root/.aigw-dev/demo"
export KUBECONFIG="$root/.aigw-dev/kubeconfig"

stop() {
	for name in operator emulator; do
		[[ -f "$demo/$name.pid" ]] || continue
		pid=$(cat "$demo/$name.pid")
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$pid" 2>/dev/null || true
		rm -f "$demo/$name.pid"
	done
}

if [[ "${1:-}" == "stop" ]]; then
	stop
	exit 0
fi

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

step "Local control plane"
bash hack/cluster-up.sh
step "Building aigw"
cargo build --quiet --bin aigw
aigw="$root/target/debug/aigw"

stop
mkdir -p "$demo"
head -c 24 /dev/urandom | base64 | tr -d '/+=' >"$demo/token"
chmod 600 "$demo/token"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
api="http://127.0.0.1:$port"

step "Management API emulator on $api"
head -c 24 /dev/urandom | base64 | tr -d '/+=' >"$demo/client-secret"
"$aigw" emulator --listen "127.0.0.1:$port" --token-file "$demo/token" \
	--client-id demo-client --client-secret "$(cat "$demo/client-secret")" >"$demo/emulator.log" 2>&1 &
echo $! >"$demo/emulator.pid"
for _ in $(seq 50); do curl -fs "$api/_emulator/stats" >/dev/null && break; sleep 0.1; done

step "CRDs"
"$aigw" crds | kubectl apply --server-side --force-conflicts -f -
kubectl wait --for=condition=Established crd -l '!nonexistent' --timeout=60s >/dev/null 2>&1 || true
for ns in aigw-system aigw-demo aigw-dev aigw-prod; do
	kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
done

step "The chart's ServiceAccount and RBAC (release aigw-demo in aigw-system, watchNamespaces: aigw-demo, aigw-dev, aigw-prod)"
# The operator runs with exactly what the chart grants: the chart's RBAC applied, and a
# kubeconfig that impersonates its ServiceAccount (as a pod would run with its token).
bash hack/chart-check.sh --template aigw-demo --namespace aigw-system \
	--show-only templates/serviceaccount.yaml --show-only templates/rbac.yaml \
	--set 'watchNamespaces={aigw-demo,aigw-dev,aigw-prod}' --set connectionSecretNamespace=aigw-system \
	| kubectl apply --server-side --force-conflicts -f -
# (act-as is kubeconfig's `as`; the apiserver adds the ServiceAccount groups to that user.)
(umask 077 && kubectl config view --raw --minify >"$demo/kubeconfig")
user=$(kubectl --kubeconfig "$demo/kubeconfig" config view -o jsonpath='{.users[0].name}')
kubectl --kubeconfig "$demo/kubeconfig" config set "users.$user.act-as" \
	system:serviceaccount:aigw-system:aigw-demo >/dev/null

step "Operator as system:serviceaccount:aigw-system:aigw-demo (logs: $demo/operator.log)"
# An installation of its own (`--installation-id demo`): the cluster-scoped objects and Connections
# the tests label for themselves (`aigw-test/env`) are theirs, and it leaves them alone, so that
# `make test` runs beside it. The demo rotates right after creating: rotations are spaced by 10 s
# instead of the default 5 minutes.
KUBECONFIG="$demo/kubeconfig" "$aigw" operator --management-url "$api" --gateway-url "$api/v1" \
	--token-file "$demo/token" --namespace aigw-demo --namespace aigw-dev --namespace aigw-prod \
	--connection-secret-namespace aigw-system --leader-election-namespace aigw-system \
	--installation-id demo --cluster-selector '!aigw-test/env' \
	--drift-interval 5s --rotation-spacing 10s --metrics-addr 127.0.0.1:0 >"$demo/operator.log" 2>&1 &
echo $! >"$demo/operator.pid"
# A step that fails shows what the chart's RBAC refused the operator, if anything.
trap 'grep -F "is forbidden: User" "$demo/operator.log" | head -3 >&2 || true' ERR

step "A Connection using OAuth2 client credentials (the emulator's token endpoint)"
kubectl create secret generic -n aigw-system demo-oauth --from-literal=client_id=demo-client \
	--from-file=client_secret="$demo/client-secret" --dry-run=client -o yaml | kubectl apply -f -
kubectl apply -f - <<YAML
apiVersion: aigw.io/v1alpha1
kind: Connection
metadata: {name: demo-oauth}
spec:
  managementUrl: $api
  gatewayUrl: $api/v1
  auth:
    oauth2ClientCredentials:
      tokenUrl: $api/oauth2/access_token
      scope: "tsg_id:1234567890"
      clientIdRef: {namespace: aigw-system, name: demo-oauth, key: client_id}
      clientSecretRef: {namespace: aigw-system, name: demo-oauth, key: client_secret}
  headers: [{name: x-tsg-id, value: "1234567890"}]
  allowedNamespaces: [aigw-demo]
YAML

step "Applying examples/ (namespace aigw-demo) and the gitops overlays (aigw-dev, aigw-prod)"
# The workload that runs the gateway (nothing schedules it here; aigw only annotates it).
kubectl create deployment ai-gateway -n aigw-demo --image=registry.example/ai-gateway:1 \
	--dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl create secret generic -n aigw-demo airs-credentials --from-literal=api-key="airs-$(head -c 12 /dev/urandom | base64 | tr -d '/+=')" \
	--dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl apply -f examples/clusterguardrail.yaml
kubectl apply -n aigw-demo -f examples/config.yaml -f examples/deployment.yaml \
	-f examples/ratelimitspolicy.yaml -f examples/usagelimitspolicy.yaml \
	-f examples/guardrail.yaml -f examples/config-guardrail-ref.yaml \
	-f examples/rotating-deployment.yaml
kubectl apply -n aigw-demo -f - <<YAML
apiVersion: aigw.io/v1alpha1
kind: Config
metadata: {name: via-oauth}
spec:
  name: via-oauth
  connectionRef: {name: demo-oauth}
  config: {retry: {attempts: 2}, strategy: {mode: single}, targets: [{provider: "@openai"}]}
YAML
kubectl apply -k examples/gitops/overlays/dev
kubectl apply -k examples/gitops/overlays/prod

step "Waiting for Ready"
kubectl wait --for=condition=Ready connections.aigw.io/demo-oauth --timeout=60s
for ns in aigw-demo aigw-dev aigw-prod; do
	kubectl wait -n "$ns" --for=condition=Ready configs.aigw.io,deployments.aigw.io,ratelimitspolicies.aigw.io --all --timeout=120s
done
kubectl wait -n aigw-demo --for=condition=Ready usagelimitspolicies.aigw.io,guardrails.aigw.io --all --timeout=120s
kubectl wait --for=condition=Ready clusterguardrails.aigw.io/org-pii --timeout=120s
step "Config guarded-routing names Guardrail pii-check and ClusterGuardrail org-pii by resource; their slugs went into the document"
# On a re-run the resources still carry the status of the previous run's emulator (Ready, old
# slugs) until the operator has recreated them on this one: wait for the config to be served.
for _ in $(seq 60); do
	guard=$(kubectl get -n aigw-demo guardrails.aigw.io pii-check -o jsonpath='{.status.slug}')
	org=$(kubectl get clusterguardrails.aigw.io org-pii -o jsonpath='{.status.slug}')
	routed=$(kubectl get -n aigw-demo configs.aigw.io guarded-routing -o jsonpath='{.status.slug}')
	document=$(curl -fsS "$api/ai_gw/v2/configs/$routed" -H "authorization: Bearer $(cat "$demo/token")" 2>/dev/null) &&
		[[ "$document" == *"$guard"* && "$document" == *"$org"* ]] && break
	sleep 1
done
echo "Guardrail pii-check is $guard, ClusterGuardrail org-pii is $org; config $routed has:"
python3 -c 'import json,sys; c=json.loads(json.load(sys.stdin)["config"]); print("input_guardrails", c.get("input_guardrails"), "output_guardrails", c.get("output_guardrails"))' <<<"$document"

step "The gateway reports in (its heartbeat reaches the control plane)"
id=$(kubectl get -n aigw-demo deployments.aigw.io edge-gateway -o jsonpath='{.status.id}')
curl -fsS -X POST "$api/_emulator/deployments/$id/connection" -H 'content-type: application/json' \
	-d '{"connection_status":"healthy"}' >/dev/null
kubectl wait -n aigw-demo deployments.aigw.io/edge-gateway --for=jsonpath='{.status.connectionStatus}'=healthy --timeout=60s

step "Promotion gate: one commit reaches dev and prod; prod follows dev (spec.promotion: after aigw-dev, soak 20s)"
# What the pipeline does for a new Git commit: the same revision and document in both overlays.
rev="demo-$(date +%H%M%S)"
document='{"targets":[{"provider":"@openai","override_params":{"model":"gpt-4o"}},{"provider":"@anthropic"}],"retry":{"attempts":4},"strategy":{"mode":"fallback"}}'
config() { kubectl get -n "$1" configs.aigw.io assistant-routing -o jsonpath="$2"; }
versions() { # how many versions the emulator holds of prod's remote config
	curl -fsS "$api/_emulator/state" | python3 -c 'import json,sys; print(next(c["versions"] for c in json.load(sys.stdin)["configs"] if c["slug"] == sys.argv[1]))' \
		"$(config aigw-prod '{.status.slug}')"
}
before=$(config aigw-prod '{.status.versionId}') versions_before=$(versions)
seen=$(config aigw-prod '{.status.conditions[?(@.type=="Promoted")].reason}') dev_done=""
start=$(date +%s)
for ns in aigw-dev aigw-prod; do
	kubectl patch -n "$ns" configs.aigw.io assistant-routing --type merge >/dev/null \
		-p "{\"metadata\":{\"annotations\":{\"aigw.io/revision\":\"$rev\"}},\"spec\":{\"config\":$document}}"
done
echo "  +0s   commit $rev applied to aigw-dev and aigw-prod"
for _ in $(seq 120); do
	t="+$(($(date +%s) - start))s"
	if [[ -z "$dev_done" && "$(config aigw-dev '{.status.history[0].revision}')" == "$rev" ]]; then
		dev_done=1
		printf '  %-5s dev applied %s (versionId %s, Ready)\n' "$t" "$rev" "$(config aigw-dev '{.status.versionId}')"
	fi
	gate=$(config aigw-prod '{.status.conditions[?(@.type=="Promoted")].reason}')
	if [[ "$gate" != "$seen" ]]; then
		seen=$gate
		printf '  %-5s prod Promoted=%s %s: %s\n' "$t" "$(config aigw-prod '{.status.conditions[?(@.type=="Promoted")].status}')" \
			"$gate" "$(config aigw-prod '{.status.conditions[?(@.type=="Promoted")].message}')"
	fi
	if [[ "$(config aigw-prod '{.status.history[0].revision}')" == "$rev" && "$gate" == Promoted ]]; then
		printf '  %-5s prod applied %s: versionId %s -> %s\n' "$t" "$rev" "$before" "$(config aigw-prod '{.status.versionId}')"
		break
	fi
	sleep 1
done
echo "prod's remote config: $versions_before -> $(versions) versions (one PUT); status.history[0]: $(config aigw-prod '{.status.history[0]}')"

step "Rotation: a new spec.rotation.trigger rotates the gateway's credentials into its Secret"
old=$(kubectl get secret -n aigw-demo rotating-gateway-credentials -o jsonpath='{.data.client_auth}')
kubectl patch -n aigw-demo deployments.aigw.io rotating-gateway --type merge -p '{"spec":{"rotation":{"trigger":"demo-rotation"}}}'
kubectl wait -n aigw-demo deployments.aigw.io/rotating-gateway --for=jsonpath='{.status.observedRotationTrigger}'=demo-rotation --timeout=60s
new=$(kubectl get secret -n aigw-demo rotating-gateway-credentials -o jsonpath='{.data.client_auth}')
[[ "$old" != "$new" ]] && echo "client_auth in Secret rotating-gateway-credentials replaced (lastRotatedAt $(kubectl get -n aigw-demo deployments.aigw.io rotating-gateway -o jsonpath='{.status.lastRotatedAt}'))"
echo "apps/v1 Deployment ai-gateway pod template: $(kubectl get -n aigw-demo deployment.apps ai-gateway -o jsonpath='{.spec.template.metadata.annotations}')"

step "An application's API key: created into its Secret, then rotated there (its workload rolled)"
kubectl create deployment billing-app -n aigw-demo --image=registry.example/billing:1 \
	--dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl apply -n aigw-demo -f examples/apikey.yaml
kubectl patch -n aigw-demo apikeys.aigw.io billing-app --type merge \
	-p '{"spec":{"rotation":{"restart":[{"kind":"Deployment","name":"billing-app"}]}}}'
kubectl wait -n aigw-demo --for=condition=Ready apikeys.aigw.io/billing-app --timeout=60s
key_id=$(kubectl get -n aigw-demo apikeys.aigw.io billing-app -o jsonpath='{.status.id}')
handshake() { # the emulator's answer for the key in Secret billing-app-key (never printed)
	local key
	key=$(kubectl get secret -n aigw-demo billing-app-key -o jsonpath='{.data.api_key}' | base64 -d)
	curl -sS -X POST "$api/_emulator/api-keys/$key_id/handshake" -H 'content-type: application/json' \
		-d "{\"key\":\"$key\"}"
}
echo "key $key_id in Secret billing-app-key: handshake $(handshake)"
kubectl patch -n aigw-demo apikeys.aigw.io billing-app --type merge -p '{"spec":{"rotation":{"trigger":"demo-rotation"}}}'
kubectl wait -n aigw-demo apikeys.aigw.io/billing-app --for=jsonpath='{.status.observedRotationTrigger}'=demo-rotation --timeout=60s
echo "rotated (lastRotatedAt $(kubectl get -n aigw-demo apikeys.aigw.io billing-app -o jsonpath='{.status.lastRotatedAt}')); the new key: handshake $(handshake)"
echo "apps/v1 Deployment billing-app pod template: $(kubectl get -n aigw-demo deployment.apps billing-app -o jsonpath='{.spec.template.metadata.annotations}')"

step "Canary a config by API-key cohort: one rollout completes, one rolls back (its candidate's provider fails 30 % of requests)"
# Four keys on canary-stable; canary-good and canary-bad are candidates whose providers differ.
{
	for config in stable good bad; do
		printf -- '---\napiVersion: aigw.io/v1alpha1\nkind: Config\nmetadata: {name: canary-%s}\nspec: {name: canary-%s, config: {provider: "@%s-openai"}}\n' "$config" "$config" "$config"
	done
	for key in a b c d; do
		printf -- '---\napiVersion: aigw.io/v1alpha1\nkind: ApiKey\nmetadata: {name: canary-%s, labels: {canary: demo}}\n' "$key"
		printf 'spec: {name: canary-%s, kind: service, scopes: [completions.write], workspaceId: ws-canary, secretRef: {name: canary-%s-key}, defaults: {config: canary-stable}}\n' "$key" "$key"
	done
} | kubectl apply -n aigw-demo -f -
kubectl wait -n aigw-demo --for=condition=Ready apikeys.aigw.io -l canary=demo --timeout=90s
curl -fsS -X PUT "$api/_emulator/faults" -H 'content-type: application/json' \
	-d '{"gateway_seed": 7, "providers": {"bad-openai": {"error_rate": 0.3, "status": 503}}}' >/dev/null
# Traffic: each key's value from its Secret, sent to the emulator's gateway until stopped.
values=()
for key in a b c d; do
	values+=("$(kubectl get secret -n aigw-demo "canary-$key-key" -o jsonpath='{.data.api_key}' | base64 -d)")
done
(
	while :; do
		for value in "${values[@]}"; do
			curl -s -o /dev/null -X POST "$api/v1/chat/completions" -H "x-portkey-api-key: $value" \
				-H 'content-type: application/json' -d '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}'
		done
		sleep 0.05
	done
) &
traffic=$!
rollout() { # name candidate
	kubectl apply -n aigw-demo -f - <<YAML
apiVersion: aigw.io/v1alpha1
kind: ConfigRollout
metadata: {name: $1}
spec:
  stableConfigRef: {name: canary-stable}
  candidateConfigRef: {name: $2}
  apiKeySelector: {matchLabels: {canary: demo}}
  steps: [{weight: 25, pause: 3s}, {weight: 50, pause: 3s}, {weight: 100, pause: 3s}]
  analysis: {workspaceSlug: ws-canary, organisationId: "1234567890", window: 5s, minRequests: 20,
             maxErrorRate: 0.1, maxErrorRateOverStable: 0.05}
YAML
}
rollout canary-good canary-good
kubectl wait -n aigw-demo configrollouts.aigw.io/canary-good --for=jsonpath='{.status.phase}'=Completed --timeout=120s
"$aigw" rollout status canary-good -n aigw-demo
# Completed is not promoted: Git would promote canary-good; deleting the rollout returns the keys.
kubectl delete -n aigw-demo configrollouts.aigw.io canary-good
rollout canary-bad canary-bad
kubectl wait -n aigw-demo configrollouts.aigw.io/canary-bad --for=jsonpath='{.status.phase}'=RolledBack --timeout=120s
kubectl wait -n aigw-demo configrollouts.aigw.io/canary-bad --for=jsonpath='{.status.conditions[?(@.type=="Stalled")].status}'=True --timeout=60s
"$aigw" rollout status canary-bad -n aigw-demo
kill "$traffic" 2>/dev/null || true
stable=$(kubectl get -n aigw-demo configs.aigw.io canary-stable -o jsonpath='{.status.slug}')
for key in a b c d; do
	echo "canary-$key: config $(kubectl get -n aigw-demo apikeys.aigw.io "canary-$key" -o jsonpath='{.status.configId}') (stable: $stable)"
done

# shellcheck source=hack/demo-chain.sh
source hack/demo-chain.sh
chain

step "kubectl get aigw -A"
kubectl get aigw -A

step "Credentials Secret written by aigw (keys only)"
kubectl get secret -n aigw-demo edge-gateway-credentials -o jsonpath='{.data}' | python3 -c 'import json,sys; print(sorted(json.load(sys.stdin)))'

step "Management API calls the emulator served"
curl -fsS "$api/_emulator/stats" | python3 -m json.tool

step "Nothing the operator did was refused by the chart's RBAC"
if grep -F "is forbidden: User" "$demo/operator.log"; then
	echo "the chart's RBAC refused the operator the calls above (see $demo/operator.log)" >&2
	exit 1
fi
echo "no refusal in $demo/operator.log"

cat <<MSG

The emulator ($api, token in $demo/token) and the operator keep running.
Try:  kubectl --kubeconfig $KUBECONFIG edit -n aigw-demo configs.aigw.io chat-routing
Stop: bash hack/demo.sh stop   (make cluster-down stops everything)
MSG
