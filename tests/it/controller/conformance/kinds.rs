//! The fixtures of the conformance matrix: one per kind with a remote object.

use serde_json::{Value, json};

use super::{Conflict, Fixture, Remote};
use crate::support::harness::Harness;

const WORKSPACE: &str = "6f0e4a2c-5a4e-4c1b-9a53-3c2f1f0d9b11";
const OTHER_WORKSPACE: &str = "0b7c1d2e-3f40-4a5b-8c6d-7e8f9a0b1c2d";
const UPSTREAM_KEY: &str = "sk-upstream-Cf4Mx8Tq2Wz6";
/// The lost-answer fault of a kind that reads the remote object its spec's slug names before
/// creating it (the write alone answered 5xx after the commit).
const READS_FIRST: &str = "error_after_commit_rate";

/// An edit setting `field` to `value`, with the pointer at which the remote object shows it.
fn set(
    field: &str,
    pointer: &'static str,
    value: impl Into<Value>,
) -> (Value, &'static str, Value) {
    let value = value.into();
    (json!({ field: value.clone() }), pointer, value)
}

pub struct ConfigKind;

impl Fixture for ConfigKind {
    const KIND: &'static str = "Config";
    const PLURAL: &'static str = "configs";
    const REMOTE: Remote = Remote::new(
        "/ai_gw/v2/configs",
        "/ai_gw/v2/configs/{slug}",
        "configs",
        "slug",
    )
    .slug_path();

    fn spec(_h: &Harness, name: &str) -> Value {
        json!({"name": name, "config": {"retry": {"attempts": 3}, "strategy": {"mode": "fallback"},
               "targets": [{"provider": "@openai"}, {"provider": "@anthropic"}]}})
    }
    fn spec_edit() -> (Value, &'static str, Value) {
        let edit = json!({"config": {"retry": {"attempts": 5}}});
        (edit, "/config/retry/attempts", json!(5))
    }
    fn remote_edit() -> (Value, &'static str, Value) {
        let edit = json!({"config": {"retry": {"attempts": 9}}});
        (edit, "/config/retry/attempts", json!(9))
    }
}

fn rate_limits(name: &str, type_: &str) -> Value {
    json!({"name": name, "type": type_, "unit": "rpm", "value": 100,
           "conditions": [{"key": "workspace_id", "value": "ws-1"}], "groupBy": [{"key": "api_key"}]})
}

pub struct RateLimitsPolicyKind;

impl Fixture for RateLimitsPolicyKind {
    const KIND: &'static str = "RateLimitsPolicy";
    const PLURAL: &'static str = "ratelimitspolicies";
    const REMOTE: Remote = Remote::new(
        "/ai_gw/v2/policies/rate-limits",
        "/ai_gw/v2/policies/rate-limits/{rateLimitsPolicyId}",
        "rate_limits",
        "id",
    );

    fn spec(_h: &Harness, name: &str) -> Value {
        rate_limits(name, "requests")
    }
    fn spec_edit() -> (Value, &'static str, Value) {
        set("value", "/value", 250)
    }
    fn remote_edit() -> (Value, &'static str, Value) {
        set("value", "/value", 1)
    }
    fn immutable_edit() -> Value {
        json!({"type": "tokens"})
    }
    fn conflict(_h: &Harness, name: &str) -> Option<Conflict> {
        let mut post = rate_limits(name, "tokens");
        post["group_by"] = post["groupBy"].take();
        post.as_object_mut().unwrap().remove("groupBy");
        Some(Conflict {
            post,
            adopt: "policyId",
            answer: "id",
        })
    }
}

fn usage_limits(name: &str, type_: &str) -> Value {
    json!({"name": name, "type": type_, "creditLimit": 100, "periodicReset": "monthly",
           "conditions": [{"key": "workspace_id", "value": "ws-1"}], "groupBy": [{"key": "api_key"}]})
}

pub struct UsageLimitsPolicyKind;

impl Fixture for UsageLimitsPolicyKind {
    const KIND: &'static str = "UsageLimitsPolicy";
    const PLURAL: &'static str = "usagelimitspolicies";
    const REMOTE: Remote = Remote::new(
        "/ai_gw/v2/policies/usage-limits",
        "/ai_gw/v2/policies/usage-limits/{policyUsageLimitsId}",
        "usage_limits",
        "id",
    );

    fn spec(_h: &Harness, name: &str) -> Value {
        usage_limits(name, "cost")
    }
    fn spec_edit() -> (Value, &'static str, Value) {
        set("creditLimit", "/credit_limit", 250)
    }
    fn remote_edit() -> (Value, &'static str, Value) {
        set("credit_limit", "/credit_limit", 1)
    }
    fn immutable_edit() -> Value {
        json!({"type": "tokens"})
    }
    fn conflict(_h: &Harness, name: &str) -> Option<Conflict> {
        let post = json!({"name": name, "type": "tokens", "credit_limit": 100, "periodic_reset": "monthly",
                          "conditions": [{"key": "workspace_id", "value": "ws-1"}],
                          "group_by": [{"key": "api_key"}]});
        Some(Conflict {
            post,
            adopt: "policyId",
            answer: "id",
        })
    }
}

fn checks(rule: &str) -> Value {
    json!([{"id": "default.regexMatch", "parameters": {"rule": rule}}])
}

fn guardrail(name: &str, workspace: bool) -> Value {
    let mut spec = json!({"name": name, "target": "llm", "checks": checks("\\d{16}"),
                          "actions": {"deny": true}});
    if workspace {
        spec["workspaceId"] = json!(WORKSPACE);
    }
    spec
}

/// A remote guardrail of `name` that checks MCP tools (`target` is immutable).
fn mcp_guardrail(name: &str, workspace: bool) -> Conflict {
    let mut post = json!({"name": name, "target": "mcp_tools", "checks": checks("\\d{16}"),
                          "actions": {"deny": true}});
    if workspace {
        post["workspace_id"] = json!(WORKSPACE);
    }
    Conflict {
        post,
        adopt: "slug",
        answer: "slug",
    }
}

pub struct GuardrailKind;

impl Fixture for GuardrailKind {
    const KIND: &'static str = "Guardrail";
    const PLURAL: &'static str = "guardrails";
    const REMOTE: Remote = Remote::new(
        "/ai_gw/v2/guardrails",
        "/ai_gw/v2/guardrails/{guardrailId}",
        "guardrails",
        "slug",
    )
    .slug_path();

    fn spec(_h: &Harness, name: &str) -> Value {
        guardrail(name, true)
    }
    fn spec_edit() -> (Value, &'static str, Value) {
        let edit = json!({"checks": checks("\\d{12}")});
        (edit, "/checks/0/parameters/rule", json!("\\d{12}"))
    }
    fn remote_edit() -> (Value, &'static str, Value) {
        let edit = json!({"checks": checks("x")});
        (edit, "/checks/0/parameters/rule", json!("x"))
    }
    fn immutable_edit() -> Value {
        json!({"target": "mcp_tools"})
    }
    fn conflict(_h: &Harness, name: &str) -> Option<Conflict> {
        Some(mcp_guardrail(name, true))
    }
}

pub struct ClusterGuardrailKind;

impl Fixture for ClusterGuardrailKind {
    const KIND: &'static str = "ClusterGuardrail";
    const PLURAL: &'static str = "clusterguardrails";
    const CLUSTER: bool = true;
    const REMOTE: Remote = Remote::new(
        "/ai_gw/admin/v2/guardrails",
        "/ai_gw/admin/v2/guardrails/{guardrailId}",
        "guardrails",
        "slug",
    )
    .slug_path();

    fn spec(_h: &Harness, name: &str) -> Value {
        guardrail(name, false)
    }
    fn spec_edit() -> (Value, &'static str, Value) {
        GuardrailKind::spec_edit()
    }
    fn remote_edit() -> (Value, &'static str, Value) {
        GuardrailKind::remote_edit()
    }
    fn immutable_edit() -> Value {
        json!({"target": "mcp_tools"})
    }
    fn conflict(_h: &Harness, name: &str) -> Option<Conflict> {
        Some(mcp_guardrail(name, false))
    }
}

/// The upstream key Secret.
async fn put_upstream_key(h: &Harness) {
    h.put_secret("cf-upstream", json!({"api-key": UPSTREAM_KEY}), true)
        .await;
}

/// Creates the cluster-scoped object `name` of kind `K` with `spec`, and waits until it is Ready.
async fn create_ready<K>(h: &Harness, name: &str, spec: Value)
where
    K: crate::support::cluster::ClusterKind,
{
    h.create_cluster::<K>(name, spec).await;
    let api = h.cluster_api::<K>();
    let name = h.cluster_name(name);
    assert!(
        super::ready_within(&api, &name, super::WAIT).await,
        "{} {name} never became Ready",
        K::kind(&())
    );
}

fn integration(h: &Harness, name: &str) -> Value {
    json!({"slug": h.cluster_name(name), "name": name, "aiProviderId": "open-ai",
           "keySecretRef": {"name": "cf-upstream", "key": "api-key"},
           "workspaces": [{"id": WORKSPACE}]})
}

pub struct IntegrationKind;

impl Fixture for IntegrationKind {
    const KIND: &'static str = "Integration";
    const PLURAL: &'static str = "integrations";
    const CLUSTER: bool = true;
    const REMOTE: Remote = Remote::new(
        "/ai_gw/admin/v2/integrations",
        "/ai_gw/admin/v2/integrations/{integrationId}",
        "integrations",
        "slug",
    );
    const LOST_ANSWER: &'static str = READS_FIRST;
    /// What a correction replaced is in its event only.
    const RECORDS_DRIFT: bool = false;
    const SECRET_NAMESPACE: bool = true;

    async fn prepare(h: &Harness) {
        put_upstream_key(h).await;
    }
    fn spec(h: &Harness, name: &str) -> Value {
        integration(h, name)
    }
    fn spec_edit() -> (Value, &'static str, Value) {
        set("name", "/name", "edited by the spec")
    }
    fn remote_edit() -> (Value, &'static str, Value) {
        set("name", "/name", "edited remotely")
    }
    fn immutable_edit() -> Value {
        json!({"aiProviderId": "anthropic"})
    }
}

/// The `auth_config` Secret of a SecretReference.
async fn put_auth_config(h: &Harness) {
    let data = json!({"aws_auth_type": "accessKey", "aws_region": "eu-west-1",
                      "aws_access_key_id": "AKIACF0TESTKEY", "aws_secret_access_key": UPSTREAM_KEY});
    h.put_secret("cf-sm-auth", data, true).await;
}

pub struct SecretReferenceKind;

impl Fixture for SecretReferenceKind {
    const KIND: &'static str = "SecretReference";
    const PLURAL: &'static str = "secretreferences";
    const CLUSTER: bool = true;
    const REMOTE: Remote = Remote::new(
        "/ai_gw/admin/v2/secret-references",
        "/ai_gw/admin/v2/secret-references/{secretReferenceId}",
        "secret_references",
        "slug",
    );
    const LOST_ANSWER: &'static str = READS_FIRST;
    /// What a correction replaced is in its event only.
    const RECORDS_DRIFT: bool = false;
    const SECRET_NAMESPACE: bool = true;

    async fn prepare(h: &Harness) {
        put_auth_config(h).await;
    }
    fn spec(h: &Harness, name: &str) -> Value {
        json!({"slug": h.cluster_name(name), "name": name, "managerType": "aws_sm",
               "secretPath": "prod/openai", "authConfigSecretRef": {"name": "cf-sm-auth"},
               "allowedWorkspaces": [WORKSPACE]})
    }
    fn spec_edit() -> (Value, &'static str, Value) {
        set("secretPath", "/secret_path", "edited/by/the/spec")
    }
    fn remote_edit() -> (Value, &'static str, Value) {
        set("secret_path", "/secret_path", "edited/remotely")
    }
    fn immutable_edit() -> Value {
        json!({"managerType": "azure_kv"})
    }
    /// A reference into another manager (`managerType` is immutable).
    fn conflict(_h: &Harness, name: &str) -> Option<Conflict> {
        Some(Conflict {
            post: json!({"name": name, "manager_type": "azure_kv", "secret_path": "kv/openai",
                         "auth_config": {"azure_auth_mode": "managed",
                                         "azure_vault_url": "https://kv.vault.azure.net"}}),
            adopt: "slug",
            answer: "slug",
        })
    }
}

pub struct ProviderKind;

impl Fixture for ProviderKind {
    const KIND: &'static str = "Provider";
    const PLURAL: &'static str = "providers";
    const REMOTE: Remote = Remote::new(
        "/ai_gw/v2/providers",
        "/ai_gw/v2/providers/{providerId}",
        "providers",
        "slug",
    );
    const LOST_ANSWER: &'static str = READS_FIRST;
    /// What a correction replaced is in its event only.
    const RECORDS_DRIFT: bool = false;
    const SECRET_NAMESPACE: bool = true;

    /// The Integration every provider binds, Ready.
    async fn prepare(h: &Harness) {
        put_upstream_key(h).await;
        let spec = integration(h, "cf-int");
        create_ready::<aigw::resources::Integration>(h, "cf-int", spec).await;
    }
    fn spec(h: &Harness, name: &str) -> Value {
        json!({"slug": format!("{}-{name}", h.env.namespace), "name": name, "note": "conformance",
               "workspaceId": WORKSPACE, "integration": h.cluster_name("cf-int")})
    }
    fn spec_edit() -> (Value, &'static str, Value) {
        set("note", "/note", "edited by the spec")
    }
    fn remote_edit() -> (Value, &'static str, Value) {
        set("note", "/note", "edited remotely")
    }
    fn immutable_edit() -> Value {
        json!({"workspaceId": OTHER_WORKSPACE})
    }
}

pub struct DeploymentKind;

impl Fixture for DeploymentKind {
    const KIND: &'static str = "Deployment";
    const PLURAL: &'static str = "deployments";
    const REMOTE: Remote = Remote::new(
        "/ai_gw/admin/v2/deployments",
        "/ai_gw/admin/v2/deployments/{deploymentId}",
        "deployments",
        "id",
    );

    fn spec(_h: &Harness, name: &str) -> Value {
        json!({"name": name, "type": "non_production",
               "credentialsSecretRef": {"name": format!("{name}-credentials")}})
    }
    fn spec_edit() -> (Value, &'static str, Value) {
        set("name", "/name", "edited-by-the-spec")
    }
    fn remote_edit() -> (Value, &'static str, Value) {
        set("name", "/name", "edited-remotely")
    }
}

pub struct ApiKeyKind;

impl Fixture for ApiKeyKind {
    const KIND: &'static str = "ApiKey";
    const PLURAL: &'static str = "apikeys";
    const REMOTE: Remote = Remote::new(
        "/ai_gw/v2/api-keys/service",
        "/ai_gw/v2/api-keys/service/{keyId}",
        "api_keys",
        "id",
    );
    /// The value of a key whose create answer was lost is lost with it: the key found (by the
    /// mark aigw puts in the description) is deleted and one more is created.
    const LOST_CREATE_POSTS: u64 = 2;
    /// What a correction replaced is in its event only.
    const RECORDS_DRIFT: bool = false;

    fn spec(_h: &Harness, name: &str) -> Value {
        json!({"name": name, "kind": "service", "scopes": ["completions.write"],
               "secretRef": {"name": format!("{name}-key")}})
    }
    fn spec_edit() -> (Value, &'static str, Value) {
        let scopes = json!({"scopes": ["completions.write", "logs.write"]});
        (scopes, "/scopes/1", json!("logs.write"))
    }
    fn remote_edit() -> (Value, &'static str, Value) {
        let scopes = json!({"scopes": ["logs.write"]});
        (scopes, "/scopes/0", json!("logs.write"))
    }
    fn immutable_edit() -> Value {
        json!({"kind": "user"})
    }
}

pub struct WorkspaceKind;

impl Fixture for WorkspaceKind {
    const KIND: &'static str = "Workspace";
    const PLURAL: &'static str = "workspaces";
    const CLUSTER: bool = true;
    const REMOTE: Remote = Remote::new(
        "/ai_gw/admin/v2/workspaces",
        "/ai_gw/admin/v2/workspaces/{workspaceRef}",
        "workspaces",
        "id",
    );
    /// Its create reads its IAM scope first (and the lost-answer fault of every request would
    /// lose that read too): the writes alone are answered 5xx after the commit.
    const LOST_ANSWER: &'static str = "error_after_commit_rate";
    /// What a correction replaced is in its event only.
    const RECORDS_DRIFT: bool = false;

    fn spec(_h: &Harness, name: &str) -> Value {
        json!({"name": name, "description": "made by the conformance matrix"})
    }
    fn spec_edit() -> (Value, &'static str, Value) {
        set("description", "/description", "edited by the spec")
    }
    fn remote_edit() -> (Value, &'static str, Value) {
        set("description", "/description", "edited remotely")
    }
}

/// The `configurations` Secret of an McpIntegration.
async fn put_mcp_configurations(h: &Harness) {
    let data = json!({"custom_headers": format!("{{\"x-api-key\":\"{UPSTREAM_KEY}\"}}")});
    h.put_secret("cf-mcp-config", data, true).await;
}

pub struct McpIntegrationKind;

impl Fixture for McpIntegrationKind {
    const KIND: &'static str = "McpIntegration";
    const PLURAL: &'static str = "mcpintegrations";
    const CLUSTER: bool = true;
    const REMOTE: Remote = Remote::new(
        "/ai_gw/admin/v2/mcp-integrations",
        "/ai_gw/admin/v2/mcp-integrations/{mcpIntegrationId}",
        "mcp_integrations",
        "slug",
    );
    const LOST_ANSWER: &'static str = READS_FIRST;
    /// What a correction replaced is in its event only.
    const RECORDS_DRIFT: bool = false;
    const SECRET_NAMESPACE: bool = true;

    async fn prepare(h: &Harness) {
        put_mcp_configurations(h).await;
    }
    fn spec(h: &Harness, name: &str) -> Value {
        json!({"slug": h.cluster_name(name), "name": name, "url": "https://mcp.example.com/mcp",
               "authType": "headers", "transport": "http",
               "configurationsSecretRef": {"name": "cf-mcp-config"},
               "workspaces": [{"workspace": WORKSPACE}]})
    }
    fn spec_edit() -> (Value, &'static str, Value) {
        set("url", "/url", "https://mcp.example.com/edited-by-the-spec")
    }
    fn remote_edit() -> (Value, &'static str, Value) {
        set("url", "/url", "https://mcp.example.com/edited-remotely")
    }
    fn immutable_edit() -> Value {
        json!({"slug": "another-slug"})
    }
    /// A workspace's own MCP integration (`workspace_id` set, which no update can change) is
    /// never the organisation's to adopt.
    fn conflict(_h: &Harness, name: &str) -> Option<Conflict> {
        Some(Conflict {
            post: json!({"name": name, "url": "https://mcp.example.com/mcp", "auth_type": "none",
                         "transport": "http", "workspace_id": WORKSPACE}),
            adopt: "slug",
            answer: "slug",
        })
    }
}

/// The McpIntegration every MCP server of a matrix instantiates, enabling [`WORKSPACE`] (an
/// active workspace of the emulator, seeded: a server is created only in one), Ready.
pub async fn ready_mcp_integration(h: &Harness, name: &str) {
    h.seed_workspace(WORKSPACE, "conformance", "cf-ws").await;
    let spec = json!({"slug": h.cluster_name(name), "name": name,
        "url": "https://mcp.example.com/mcp", "authType": "none", "transport": "http",
        "workspaces": [{"workspace": WORKSPACE}]});
    create_ready::<aigw::resources::McpIntegration>(h, name, spec).await;
}

/// A server slug unique to the test's namespace, within the API's 3–50 characters.
pub fn server_slug(h: &Harness, name: &str) -> String {
    let ns = &h.env.namespace;
    format!("s{}-{name}", &ns[ns.len().saturating_sub(8)..])
}

pub struct McpServerKind;

impl Fixture for McpServerKind {
    const KIND: &'static str = "McpServer";
    const PLURAL: &'static str = "mcpservers";
    const REMOTE: Remote = Remote::new(
        "/ai_gw/v2/mcp-servers",
        "/ai_gw/v2/mcp-servers/{mcpServerId}",
        "mcp_servers",
        "slug",
    );
    const LOST_ANSWER: &'static str = READS_FIRST;
    /// What a correction replaced is in its event only.
    const RECORDS_DRIFT: bool = false;

    async fn prepare(h: &Harness) {
        ready_mcp_integration(h, "cf-mcpi").await;
    }
    fn spec(h: &Harness, name: &str) -> Value {
        json!({"slug": server_slug(h, name), "name": name, "description": "conformance",
               "workspaceId": WORKSPACE, "integrationRef": {"name": h.cluster_name("cf-mcpi")}})
    }
    fn spec_edit() -> (Value, &'static str, Value) {
        set("description", "/description", "edited by the spec")
    }
    fn remote_edit() -> (Value, &'static str, Value) {
        set("description", "/description", "edited remotely")
    }
    fn immutable_edit() -> Value {
        json!({"workspaceId": OTHER_WORKSPACE})
    }
}
