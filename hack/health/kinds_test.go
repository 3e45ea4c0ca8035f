package health

import (
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// outcome is one reconcile conclusion as aigw's controller::status::record_outcome writes it.
type outcome struct {
	state   string // Ready, Progressing or Stalled
	reason  string
	message string
}

// kind is one aigw kind: how the test creates an object of it and what aigw writes.
type kind struct {
	kind     string
	resource string
	// namespaced: the kind's objects live in a namespace.
	namespaced bool
	// managed kinds (all but Connection) also have the aigw.io/paused annotation and the
	// Drifted condition.
	managed bool
	// manager is the field manager of the operator's status writes (src/controller).
	manager string
	// example is the file under examples/ whose object the test creates.
	example string
	// bump is a merge patch of the spec that raises metadata.generation.
	bump map[string]any
	// settled is what aigw records beside the conditions once the remote object is known.
	settled     map[string]any
	ready       outcome
	progressing outcome
	stalled     outcome
	// gated is what a kind with spec.promotion reports while its gate holds a change (nil:
	// the kind has no promotion gate).
	gated *outcome
}

// step is one state the test puts an object in, with what kstatus and Argo CD must say of it.
type step struct {
	fixture string // file name under testdata/
	// write is the outcome written to the status subresource; nil leaves the status alone.
	write *outcome
	// creating: the remote object does not exist yet, so the kind's own fields are absent.
	creating bool
	paused   bool // sets the aigw.io/paused annotation and the Paused condition
	drifted  bool // adds Drifted=True (observe-only mode)
	gated    bool // adds Promoted=False with the outcome's reason (a promotion gate holds it)
	bump     bool // changes the spec after the status write
	kstatus  status.Status
	health   HealthStatus
}

const (
	pausedMessage  = `aigw.io/paused is "true": aigw makes no API calls`
	driftedMessage = "observe-only: the remote object differs from the spec (spec.name)"
)

var kinds = []kind{
	{
		kind: "Config", resource: "configs", namespaced: true, managed: true, manager: "aigw/config", example: "config.yaml",
		bump: map[string]any{"spec": map[string]any{"name": "chat-routing-v2"}},
		settled: map[string]any{
			"id": "5e0c8a4e-6d1f-4a7b-9c3e-2f1d0b7a8c91", "slug": "pc-chat-r-1a2b3c",
			"versionId": "b2f4d6e8-1a3c-4e5f-8a7b-9c0d1e2f3a4b", "lastAppliedAt": "2026-01-05T10:00:00Z",
		},
		ready:       outcome{"Ready", "Reconciled", "Config is in sync with the management API"},
		progressing: outcome{"Progressing", "ServerError", "failed to create config: POST /ai_gw/v2/configs returned HTTP 503: upstream unavailable"},
		stalled: outcome{"Stalled", "Validation", "failed to update config pc-chat-r-1a2b3c: PUT /ai_gw/v2/configs/pc-chat-r-1a2b3c " +
			"returned HTTP 400: targets[1].provider: unknown provider @anthropic-prod"},
		gated: &outcome{"Progressing", "Soaking", "revision 9d4e7a21 becomes eligible at 2026-01-05T11:00:01Z: Config aigw-dev/chat-routing " +
			"has been proven at it since 2026-01-05T10:00:00Z and must stay so for 1h (spec.promotion.soak)"},
	},
	{
		kind: "Deployment", resource: "deployments", namespaced: true, managed: true, manager: "aigw/deployment", example: "deployment.yaml",
		bump: map[string]any{"spec": map[string]any{"name": "edge-gateway-v2"}},
		settled: map[string]any{
			"id": "0b8f2c1d-7e6a-4b5c-9d8e-1f2a3b4c5d6e", "slug": "edge-gateway", "connectionStatus": "healthy",
			"lastSyncedAt": "2026-01-05T10:00:00Z",
		},
		ready:       outcome{"Ready", "Reconciled", "Deployment is in sync with the management API"},
		progressing: outcome{"Progressing", "RotatingCredentials", "rotating the credentials of deployment 0b8f2c1d-7e6a-4b5c-9d8e-1f2a3b4c5d6e: spec.rotation.trigger changed"},
		stalled: outcome{"Stalled", "MissingState", "the credentials Secret edge-gateway-credentials is missing and the one-time credentials of deployment " +
			"0b8f2c1d-7e6a-4b5c-9d8e-1f2a3b4c5d6e cannot be read back; change spec.rotation.trigger to issue new ones"},
	},
	{
		kind: "RateLimitsPolicy", resource: "ratelimitspolicies", namespaced: true, managed: true, manager: "aigw/ratelimitspolicy", example: "ratelimitspolicy.yaml",
		bump:        map[string]any{"spec": map[string]any{"value": 1200}},
		settled:     map[string]any{"id": "3c2d1e0f-9a8b-4c7d-8e6f-5a4b3c2d1e0f", "remoteStatus": "active"},
		ready:       outcome{"Ready", "Reconciled", "RateLimitsPolicy is in sync with the management API"},
		progressing: outcome{"Progressing", "RateLimited", "failed to create rate-limits policy: POST /ai_gw/v2/policies/rate-limits returned HTTP 429: too many requests"},
		stalled:     outcome{"Stalled", "NamespaceNotAllowed", "Connection default does not allow namespace aigw-health (spec.allowedNamespaces)"},
	},
	{
		kind: "UsageLimitsPolicy", resource: "usagelimitspolicies", namespaced: true, managed: true, manager: "aigw/usagelimitspolicy", example: "usagelimitspolicy.yaml",
		bump:        map[string]any{"spec": map[string]any{"creditLimit": 800}},
		settled:     map[string]any{"id": "8f1e2d3c-4b5a-4c6d-9e8f-7a6b5c4d3e2f", "remoteStatus": "active"},
		ready:       outcome{"Ready", "Reconciled", "UsageLimitsPolicy is in sync with the management API"},
		progressing: outcome{"Progressing", "RateLimited", "failed to create usage-limits policy: POST /ai_gw/v2/policies/usage-limits returned HTTP 429: too many requests"},
		stalled: outcome{"Stalled", "WorkspaceNotAllowed", "spec.workspaceId team-b is not among the workspaces this namespace may manage " +
			"through Connection default (spec.grants[].workspaces)"},
	},
	{
		kind: "ApiKey", resource: "apikeys", namespaced: true, managed: true, manager: "aigw/apikey", example: "apikey.yaml",
		bump:        map[string]any{"spec": map[string]any{"description": "billing service v2"}},
		settled:     map[string]any{"id": "3c2b1a09-8f7e-4d6c-9b5a-4e3d2c1b0a9f", "lastRotatedAt": "2026-01-05T10:00:00Z"},
		ready:       outcome{"Ready", "Reconciled", "ApiKey is in sync with the management API"},
		progressing: outcome{"Progressing", "ServerError", "failed to rotate API key 3c2b1a09-8f7e-4d6c-9b5a-4e3d2c1b0a9f: POST /ai_gw/v2/api-keys/service/3c2b1a09-8f7e-4d6c-9b5a-4e3d2c1b0a9f/rotate returned HTTP 503: upstream unavailable"},
		stalled:     outcome{"Stalled", "SecretConflict", "Secret billing-app-key exists and was not created by aigw for this ApiKey; aigw never overwrites it: name another Secret in spec.secretRef, or delete that one"},
	},
	{
		kind: "Guardrail", resource: "guardrails", namespaced: true, managed: true, manager: "aigw/guardrail", example: "guardrail.yaml",
		bump: map[string]any{"spec": map[string]any{"name": "pii-check-v2"}},
		settled: map[string]any{
			"id": "7a6b5c4d-3e2f-4a1b-9c8d-7e6f5a4b3c2d", "slug": "pg-pii-ch-4d5e6f",
			"versionId": "c3d4e5f6-a7b8-4c9d-8e0f-1a2b3c4d5e6f", "lastAppliedAt": "2026-01-05T10:00:00Z",
		},
		ready:       outcome{"Ready", "Reconciled", "Guardrail is in sync with the management API"},
		progressing: outcome{"Progressing", "ServerError", "failed to create guardrail: POST /ai_gw/v2/guardrails returned HTTP 503: upstream unavailable"},
		stalled: outcome{"Stalled", "SecretNotFound", "Secret aigw-health/airs-credentials named by spec.secretRefs " +
			"(path /checks/1/parameters/api_key) does not exist"},
		gated: &outcome{"Progressing", "SourceNotReady", "revision 9d4e7a21 waits for Guardrail aigw-dev/pii-check, which is not Ready " +
			"(ServerError: failed to update guardrail pg-pii-ch-4d5e6f: PUT /ai_gw/v2/guardrails/pg-pii-ch-4d5e6f returned HTTP 503: upstream unavailable)"},
	},
	{
		kind: "ClusterGuardrail", resource: "clusterguardrails", managed: true, manager: "aigw/clusterguardrail", example: "clusterguardrail.yaml",
		bump: map[string]any{"spec": map[string]any{"name": "org-pii-v2"}},
		settled: map[string]any{
			"id": "2b3c4d5e-6f7a-4b8c-9d0e-1f2a3b4c5d6e", "slug": "pg-org-pi-7a8b9c",
			"versionId": "d4e5f6a7-b8c9-4d0e-8f1a-2b3c4d5e6f7a", "lastAppliedAt": "2026-01-05T10:00:00Z",
		},
		ready:       outcome{"Ready", "Reconciled", "ClusterGuardrail is in sync with the management API"},
		progressing: outcome{"Progressing", "ServerError", "failed to create guardrail: POST /ai_gw/admin/v2/guardrails returned HTTP 503: upstream unavailable"},
		stalled: outcome{"Stalled", "StillReferenced", "guardrail pg-org-pi-7a8b9c is still named by Config team-a/chat-routing; " +
			"it is deleted once no Config names it (or set deletionPolicy: Orphan)"},
		gated: &outcome{"Progressing", "Soaking", "revision 9d4e7a21 becomes eligible at 2026-01-06T10:00:01Z: ClusterGuardrail org-pii-staging " +
			"has been proven at it since 2026-01-05T10:00:00Z and must stay so for 1day (spec.promotion.soak)"},
	},
	{
		kind: "Integration", resource: "integrations", managed: true, manager: "aigw/integration", example: "integration.yaml",
		bump:        map[string]any{"spec": map[string]any{"name": "OpenAI production v2"}},
		settled:     map[string]any{"id": "4e5f6a7b-8c9d-4e0f-9a1b-2c3d4e5f6a7b", "slug": "openai-prod", "workspaces": []any{"6f0e4a2c-5a4e-4c1b-9a53-3c2f1f0d9b11"}},
		ready:       outcome{"Ready", "Reconciled", "Integration is in sync with the management API"},
		progressing: outcome{"Progressing", "ServerError", "failed to update the workspace access of integration 4e5f6a7b-8c9d-4e0f-9a1b-2c3d4e5f6a7b: PUT /ai_gw/admin/v2/integrations/{integrationId}/workspaces returned HTTP 503: upstream unavailable"},
		stalled: outcome{"Stalled", "SecretNotReadable", "Secret aigw-system/openai-upstream (named by spec.keySecretRef) is not labelled " +
			"aigw.io/cluster-readable=true: a cluster-scoped resource reads only the Secrets labelled for it in the operator's namespace, so the Connection Secrets there stay out of its reach"},
	},
	{
		kind: "Provider", resource: "providers", namespaced: true, managed: true, manager: "aigw/provider", example: "provider.yaml",
		bump:        map[string]any{"spec": map[string]any{"name": "OpenAI for team A v2"}},
		settled:     map[string]any{"id": "5f6a7b8c-9d0e-4f1a-8b2c-3d4e5f6a7b8c", "slug": "openai-team-a", "integrationId": "4e5f6a7b-8c9d-4e0f-9a1b-2c3d4e5f6a7b"},
		ready:       outcome{"Ready", "Reconciled", "Provider is in sync with the management API"},
		progressing: outcome{"Progressing", "ServerError", "failed to create provider: POST /ai_gw/v2/providers returned HTTP 503: upstream unavailable"},
		stalled: outcome{"Stalled", "IntegrationNotAllowed", "spec.integration openai-prod is not among the integrations this namespace may bind " +
			"through Connection default (spec.grants[].integrations: anthropic-prod)"},
	},
	{
		kind: "SecretReference", resource: "secretreferences", managed: true, manager: "aigw/secretreference", example: "secretreference.yaml",
		bump:        map[string]any{"spec": map[string]any{"name": "AWS production secrets v2"}},
		settled:     map[string]any{"id": "7b8c9d0e-1f2a-4b3c-8d4e-5f6a7b8c9d0e", "slug": "aws-prod"},
		ready:       outcome{"Ready", "Reconciled", "SecretReference is in sync with the management API"},
		progressing: outcome{"Progressing", "ServerError", "failed to create secret reference: POST /ai_gw/admin/v2/secret-references returned HTTP 503: upstream unavailable"},
		stalled: outcome{"Stalled", "StillReferenced", "secret reference aws-prod is still in use and is not deleted: " +
			"the API refused the delete: referenced by integration mapped-openai"},
	},
	{
		kind: "Workspace", resource: "workspaces", managed: true, manager: "aigw/workspace", example: "workspace.yaml",
		bump:        map[string]any{"spec": map[string]any{"name": "Payments v2"}},
		settled:     map[string]any{"id": "3c4d5e6f-7a8b-4c9d-8e0f-1a2b3c4d5e6f", "slug": "ws-payments-1a2b3c", "scopeName": "ws_payments_0a1b2c"},
		ready:       outcome{"Ready", "Reconciled", "Workspace is in sync with the management API"},
		progressing: outcome{"Progressing", "ServerError", "failed to create workspace: POST /ai_gw/admin/v2/workspaces returned HTTP 503: upstream unavailable"},
		stalled: outcome{"Stalled", "StillReferenced", "workspace ws-payments-1a2b3c is still named by Config payments/main-routing; " +
			"it is archived once they are gone (or set deletionPolicy: Orphan)"},
	},
	{
		kind: "ConfigRollout", resource: "configrollouts", namespaced: true, manager: "aigw/configrollout", example: "configrollout.yaml",
		bump: map[string]any{"spec": map[string]any{"analysis": map[string]any{"minRequests": 100}}},
		settled: map[string]any{
			"phase": "Progressing", "currentStep": 0, "weight": 10, "movedKeys": []any{"checkout-a"},
			"stableConfigId": "pc-chat-r-1a2b3c", "candidateConfigId": "pc-chat-r-4d5e6f",
		},
		ready:       outcome{"Ready", "Completed", "step 2 passed, the last: candidate 4 keys, 212 requests, 0 5xx (0.000), p90 120ms; stable 0 keys, no requests; every selected key is on Config chat-routing-next"},
		progressing: outcome{"Progressing", "Pausing", "step 0 (10%): every key is on the candidate; analysis in 4m 30s"},
		stalled: outcome{"Stalled", "RolledBack", "step 0 failed its analysis: candidate error rate 0.310 is above maxErrorRate 0.05 " +
			"(candidate 1 keys, 71 requests, 22 5xx (0.310), p90 130ms; stable 3 keys, 212 requests, 0 5xx (0.000), p90 120ms); every moved key is back on Config chat-routing"},
	},
	{
		kind: "Connection", resource: "connections", manager: "aigw/connection", example: "connection.yaml",
		bump:        map[string]any{"spec": map[string]any{"qps": 5}},
		ready:       outcome{"Ready", "TokenObtained", "a token was obtained"},
		progressing: outcome{"Progressing", "ConnectionUnavailable", "Connection production is unusable: failed to get a bearer token: POST https://auth.apps.paloaltonetworks.com/oauth2/access_token timed out after 10s"},
		stalled:     outcome{"Stalled", "InvalidSpec", "invalid spec: headers[0]: x-tsg-id must be a number"},
	},
}

// steps walks an object through every state aigw can report, in an order the operator can
// reach them: created, reconciling, ready, drifted, stalled, paused, then a new spec.
func (k kind) steps() []step {
	var steps []step
	add := func(s step, managedOnly bool) {
		if k.managed || !managedOnly {
			steps = append(steps, s)
		}
	}
	add(step{fixture: "progressing_no_status.yaml", kstatus: status.CurrentStatus,
		health: HealthStatus{"Progressing", "Waiting for aigw to report a status"}}, false)
	add(step{fixture: "progressing_reconciling.yaml", write: &k.progressing, creating: true, kstatus: status.InProgressStatus,
		health: HealthStatus{"Progressing", k.progressing.message}}, false)
	add(step{fixture: "healthy.yaml", write: &k.ready, kstatus: status.CurrentStatus,
		health: HealthStatus{"Healthy", k.ready.message}}, false)
	add(step{fixture: "healthy_drifted.yaml", write: &k.ready, drifted: true, kstatus: status.CurrentStatus,
		health: HealthStatus{"Healthy", k.ready.message + "; drifted: " + driftedMessage}}, true)
	if k.gated != nil {
		steps = append(steps, step{fixture: "progressing_soaking.yaml", write: k.gated, gated: true, kstatus: status.InProgressStatus,
			health: HealthStatus{"Progressing", k.gated.message}})
	}
	add(step{fixture: "degraded_stalled.yaml", write: &k.stalled, kstatus: status.FailedStatus,
		health: HealthStatus{"Degraded", k.stalled.message}}, false)
	add(step{fixture: "suspended_paused.yaml", write: &k.ready, paused: true, kstatus: status.CurrentStatus,
		health: HealthStatus{"Suspended", pausedMessage}}, true)
	add(step{fixture: "progressing_new_generation.yaml", write: &k.ready, bump: true, kstatus: status.InProgressStatus,
		health: HealthStatus{"Progressing", "Waiting for aigw to observe generation 2"}}, false)
	return steps
}
