# Sourced by hack/demo.sh (uses its $aigw, $api, $demo and step): the rest of the gateway as one
# chain, in the order the API needs it. A Workspace; a SecretReference into an external secret
# manager (its auth_config from a labelled Secret, never echoed); an Integration whose key the
# gateway reads through that reference; a Provider of the workspace on that Integration; an
# McpIntegration enabled for the workspace; an McpServer of it in the workspace, guarded by a
# Guardrail; an ApiKey of the workspace with scope mcp.invoke.

chain_secrets() {
	kubectl create secret generic -n aigw-system demo-sm-auth --from-literal=aws_auth_type=accessKey \
		--from-literal=aws_region=eu-west-1 --from-literal=aws_access_key_id="AKIA$(head -c 12 /dev/urandom | base32 | tr -d '=' | head -c 16)" \
		--from-literal=aws_secret_access_key="$(head -c 30 /dev/urandom | base64 | tr -d '/+=')" \
		--dry-run=client -o yaml | kubectl label --local -f - aigw.io/cluster-readable=true -o yaml | kubectl apply -f - >/dev/null
	kubectl create secret generic -n aigw-system demo-mcp-config \
		--from-literal=custom_headers="{\"Authorization\":\"Bearer ghp_$(head -c 24 /dev/urandom | base64 | tr -d '/+=')\"}" \
		--dry-run=client -o yaml | kubectl label --local -f - aigw.io/cluster-readable=true -o yaml | kubectl apply -f - >/dev/null
}

chain_organisation() {
	kubectl apply -f - <<YAML
apiVersion: aigw.io/v1alpha1
kind: Workspace
metadata: {name: demo-payments}
spec:
  name: Demo payments
  description: the chain's workspace
---
apiVersion: aigw.io/v1alpha1
kind: SecretReference
metadata: {name: demo-aws}
spec:
  slug: demo-aws
  name: Demo AWS secrets
  managerType: aws_sm
  secretPath: prod/ai-gateway/openai
  secretKey: api_key
  authConfigSecretRef: {name: demo-sm-auth}
---
apiVersion: aigw.io/v1alpha1
kind: McpIntegration
metadata: {name: demo-github}
spec:
  slug: demo-github
  name: Demo GitHub tools
  url: https://mcp.github.example/mcp
  authType: headers
  transport: http
  configurationsSecretRef: {name: demo-mcp-config}
  workspaces:
    - workspaceRef: {name: demo-payments}
YAML
}

chain_workspace_objects() {
	local ws
	ws=$(kubectl get workspaces.aigw.io demo-payments -o jsonpath='{.status.id}')
	# An Integration's workspace access names the workspace by id (known once it is Ready).
	kubectl apply -f - <<YAML
apiVersion: aigw.io/v1alpha1
kind: Integration
metadata: {name: demo-openai}
spec:
  slug: demo-openai
  name: Demo OpenAI (key in AWS Secrets Manager)
  aiProviderId: open-ai
  secretMappings:
    - {targetField: key, secretReferenceRef: {name: demo-aws}}
  workspaces:
    - id: $ws
YAML
	kubectl apply -n aigw-demo -f - <<YAML
apiVersion: aigw.io/v1alpha1
kind: Provider
metadata: {name: demo-openai}
spec:
  slug: demo-openai-payments
  name: OpenAI for payments
  workspaceRef: {name: demo-payments}
  integration: demo-openai
YAML
}

chain_mcp() {
	kubectl apply -n aigw-demo -f - <<YAML
apiVersion: aigw.io/v1alpha1
kind: McpServer
metadata: {name: demo-github}
spec:
  slug: demo-github-payments
  name: GitHub for payments
  integrationRef: {name: demo-github}
  workspaceRef: {name: demo-payments}
  defaultUserAccess: deny
---
apiVersion: aigw.io/v1alpha1
kind: Guardrail
metadata: {name: demo-tool-calls}
spec:
  name: demo-tool-calls
  workspaceRef: {name: demo-payments}
  target: mcp_tools
  checks:
    - id: default.regexMatch
      name: no repository deletion
      parameters: {rule: 'delete_repository'}
  actions: {deny: true}
  mcpServers:
    - mcpServerRef: {name: demo-github}
      runOn: [input]
---
apiVersion: aigw.io/v1alpha1
kind: ApiKey
metadata: {name: demo-agent}
spec:
  name: demo-agent
  kind: service
  workspaceRef: {name: demo-payments}
  scopes: [mcp.invoke]
  description: an agent calling the payments team's MCP tools
  secretRef: {name: demo-agent-key}
YAML
}

chain_print() {
	local ws
	ws=$(kubectl get workspaces.aigw.io demo-payments -o jsonpath='{.status.id}')
	echo "Workspace demo-payments: $ws"
	echo "SecretReference demo-aws: $(kubectl get secretreferences.aigw.io demo-aws -o jsonpath='{.status.id}') (auth_config from Secret aigw-system/demo-sm-auth, sent write-only)"
	echo "Integration demo-openai: secret_mappings $("$aigw" api integrations get demo-openai --management-url "$api" --token-file "$demo/token" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["secret_mappings"]))')"
	echo "Provider aigw-demo/demo-openai: @$(kubectl get -n aigw-demo providers.aigw.io demo-openai -o jsonpath='{.status.slug}') on integration $(kubectl get -n aigw-demo providers.aigw.io demo-openai -o jsonpath='{.status.integrationId}'), in workspace $ws"
	echo "McpIntegration demo-github: $(kubectl get mcpintegrations.aigw.io demo-github -o jsonpath='{.status.id}'), enabled for $ws"
	local server
	server=$(kubectl get -n aigw-demo mcpservers.aigw.io demo-github -o jsonpath='{.status.id}')
	echo "McpServer aigw-demo/demo-github: $server, of integration $(kubectl get -n aigw-demo mcpservers.aigw.io demo-github -o jsonpath='{.status.integrationId}') in workspace $ws"
	echo "Guardrail aigw-demo/demo-tool-calls: $(kubectl get -n aigw-demo guardrails.aigw.io demo-tool-calls -o jsonpath='{.status.slug}') maps MCP servers $("$aigw" api guardrails mcp-servers "$(kubectl get -n aigw-demo guardrails.aigw.io demo-tool-calls -o jsonpath='{.status.id}')" --management-url "$api" --token-file "$demo/token" | python3 -c 'import json,sys; d=json.load(sys.stdin); rows = d if isinstance(d, list) else d["data"]; print([(m["mcp_server_id"], m["run_on"]) for m in rows])')"
	echo "ApiKey aigw-demo/demo-agent: $(kubectl get -n aigw-demo apikeys.aigw.io demo-agent -o jsonpath='{.status.id}') with scopes $("$aigw" api api-keys get "$(kubectl get -n aigw-demo apikeys.aigw.io demo-agent -o jsonpath='{.status.id}')" --management-url "$api" --token-file "$demo/token" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["scopes"], "workspace", d.get("workspace_id"))'); its key in Secret demo-agent-key"
}

# The credentials of the chain's Secrets (auth_config's keys, the MCP configurations) appear in
# no operator log line, status or event. (aws_auth_type and aws_region are auth_config's public
# fields: the API shows them on reads.)
chain_no_echo() {
	local dump="$demo/chain-dump" values value checked=0
	{
		kubectl get aigw -A -o yaml
		kubectl get events -A -o yaml
		cat "$demo/operator.log"
	} >"$dump"
	values=$(kubectl get secret -n aigw-system demo-sm-auth demo-mcp-config -o json |
		python3 -c 'import base64,json,sys; [print(base64.b64decode(v).decode()) for s in json.load(sys.stdin)["items"] for k, v in s["data"].items() if k not in ("aws_auth_type", "aws_region")]')
	while IFS= read -r value; do
		if grep -qF -- "$value" "$dump"; then
			echo "a credential of the chain's Secrets was echoed (see $dump)" >&2
			return 1
		fi
		checked=$((checked + 1))
	done <<<"$values"
	((checked == 3)) || { echo "expected 3 credentials in the chain's Secrets, read $checked" >&2; return 1; }
	echo "none of the $checked credentials of Secrets demo-sm-auth, demo-mcp-config in the operator's log, any aigw status or any event"
}

# Management-API writes the emulator has served (every request but a GET).
chain_writes() {
	curl -fsS "$api/_emulator/stats" | python3 -c 'import json,sys; print(sum(sum(codes.values()) for route, codes in json.load(sys.stdin)["requests"].items() if not route.startswith("GET ")))'
}

# The chain handed over to what `aigw export` writes of its workspace: the resources are deleted
# with deletionPolicy Orphan (the remote objects stay), the export of the workspace is applied,
# and the operator adopts every object without a single write. (The ApiKey goes first, with its
# remote key: a key cannot be adopted, since its value cannot be read back. Deployments and the
# ClusterGuardrail in the export are the demo's other resources, still managed: left out.)
chain_round_trip() {
	local ws out="$demo/chain-export" before after files=()
	ws=$(kubectl get workspaces.aigw.io demo-payments -o jsonpath='{.status.id}')
	kubectl delete -n aigw-demo apikeys.aigw.io/demo-agent --timeout=60s >/dev/null
	for r in mcpservers.aigw.io/demo-github guardrails.aigw.io/demo-tool-calls providers.aigw.io/demo-openai; do
		kubectl patch -n aigw-demo "$r" --type merge -p '{"spec":{"deletionPolicy":"Orphan"}}' >/dev/null
	done
	for r in mcpintegrations.aigw.io/demo-github integrations.aigw.io/demo-openai workspaces.aigw.io/demo-payments; do
		kubectl patch "$r" --type merge -p '{"spec":{"deletionPolicy":"Orphan"}}' >/dev/null
	done
	kubectl delete -n aigw-demo mcpservers.aigw.io/demo-github guardrails.aigw.io/demo-tool-calls providers.aigw.io/demo-openai --timeout=60s
	kubectl delete mcpintegrations.aigw.io/demo-github integrations.aigw.io/demo-openai workspaces.aigw.io/demo-payments --timeout=60s
	rm -rf "$out"
	"$aigw" export --out "$out" --workspace-id "$ws" --namespace aigw-demo --management-url "$api" --token-file "$demo/token" 2>/dev/null
	for kind in workspace integration mcpintegration provider mcpserver guardrail; do
		files+=("$out/$kind"-*.yaml)
	done
	before=$(chain_writes)
	for f in "${files[@]}"; do kubectl apply -f "$f"; done
	for f in "${files[@]}"; do kubectl wait --for=condition=Ready -f "$f" --timeout=120s >/dev/null; done
	sleep 12 # two drift checks (--drift-interval 5s)
	after=$(chain_writes)
	echo "${#files[@]} exported manifests of workspace $ws applied and Ready: $((after - before)) management-API writes"
	((after == before))
}

chain() {
	step "The rest of the gateway, one chain: Workspace -> SecretReference -> Integration -> Provider; McpIntegration -> McpServer guarded by a Guardrail -> ApiKey with mcp.invoke"
	chain_secrets
	chain_organisation
	kubectl wait --for=condition=Ready workspaces.aigw.io/demo-payments secretreferences.aigw.io/demo-aws --timeout=120s
	chain_workspace_objects
	kubectl wait --for=condition=Ready integrations.aigw.io/demo-openai mcpintegrations.aigw.io/demo-github --timeout=120s
	kubectl wait -n aigw-demo --for=condition=Ready providers.aigw.io/demo-openai --timeout=120s
	chain_mcp
	kubectl wait -n aigw-demo --for=condition=Ready mcpservers.aigw.io/demo-github --timeout=120s
	kubectl wait -n aigw-demo --for=condition=Ready guardrails.aigw.io/demo-tool-calls apikeys.aigw.io/demo-agent --timeout=120s
	chain_print
	chain_no_echo
	step "aigw export of the chain's workspace, re-applied in place of the chain's resources: adopted without a write"
	chain_round_trip
}
