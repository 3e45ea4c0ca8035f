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

chain_print() {
	local ws
	ws=$(kubectl get workspaces.aigw.io demo-payments -o jsonpath='{.status.id}')
	echo "Workspace demo-payments: $ws"
	echo "SecretReference demo-aws: $(kubectl get secretreferences.aigw.io demo-aws -o jsonpath='{.status.id}') (auth_config from Secret aigw-system/demo-sm-auth, sent write-only)"
	echo "Integration demo-openai: secret_mappings $("$aigw" api integrations get demo-openai --management-url "$api" --token-file "$demo/token" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["secret_mappings"]))')"
	echo "Provider aigw-demo/demo-openai: @$(kubectl get -n aigw-demo providers.aigw.io demo-openai -o jsonpath='{.status.slug}') on integration $(kubectl get -n aigw-demo providers.aigw.io demo-openai -o jsonpath='{.status.integrationId}'), in workspace $ws"
	echo "McpIntegration demo-github: $(kubectl get mcpintegrations.aigw.io demo-github -o jsonpath='{.status.id}'), enabled for $ws"
}

# The credentials of the chain's Secrets (auth_config's keys, the MCP configurations) appear in
# no operator log line, status or event. (aws_auth_type and aws_region are auth_config's public
# fields: the API shows them on reads.)
chain_no_echo() {
	local seen=0 value
	while IFS= read -r value; do
		[[ ${#value} -ge 8 ]] || continue
		if grep -qF -- "$value" "$demo/operator.log" ||
			kubectl get aigw -A -o yaml | grep -qF -- "$value" ||
			kubectl get events -A -o yaml | grep -qF -- "$value"; then
			echo "a Secret value of the chain was echoed" >&2
			seen=1
		fi
	done < <(kubectl get secret -n aigw-system demo-sm-auth demo-mcp-config -o json |
		python3 -c 'import base64,json,sys; [print(base64.b64decode(v).decode()) for s in json.load(sys.stdin)["items"] for k, v in s["data"].items() if k not in ("aws_auth_type", "aws_region")]')
	((seen == 0)) && echo "no value of Secrets demo-sm-auth, demo-mcp-config in the operator's log, any aigw status or any event"
	return "$seen"
}

chain() {
	step "The rest of the gateway, one chain: Workspace -> SecretReference -> Integration -> Provider -> McpIntegration"
	chain_secrets
	chain_organisation
	kubectl wait --for=condition=Ready workspaces.aigw.io/demo-payments secretreferences.aigw.io/demo-aws --timeout=120s
	chain_workspace_objects
	kubectl wait --for=condition=Ready integrations.aigw.io/demo-openai mcpintegrations.aigw.io/demo-github --timeout=120s
	kubectl wait -n aigw-demo --for=condition=Ready providers.aigw.io/demo-openai --timeout=120s
	chain_print
	chain_no_echo
}
