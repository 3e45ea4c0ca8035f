//! The fixtures of the conformance matrix: one per kind with a remote object.

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use super::{Conflict, DRIFT, Fixture};
use crate::support::harness::Harness;

const WORKSPACE: &str = "6f0e4a2c-5a4e-4c1b-9a53-3c2f1f0d9b11";
const OTHER_WORKSPACE: &str = "0b7c1d2e-3f40-4a5b-8c6d-7e8f9a0b1c2d";
const UPSTREAM_KEY: &str = "sk-upstream-Cf4Mx8Tq2Wz6";

pub struct ConfigKind;

impl Fixture for ConfigKind {
    const KIND: &'static str = "Config";
    const PLURAL: &'static str = "configs";
    const COLLECTION: &'static str = "/ai_gw/v2/configs";
    const ITEM: &'static str = "/ai_gw/v2/configs/{slug}";
    const STATE: &'static str = "configs";
    const KEY: &'static str = "slug";
    const PATH_KEY: &'static str = "slug";

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
    const COLLECTION: &'static str = "/ai_gw/v2/policies/rate-limits";
    const ITEM: &'static str = "/ai_gw/v2/policies/rate-limits/{rateLimitsPolicyId}";
    const STATE: &'static str = "rate_limits";
    const KEY: &'static str = "id";

    fn spec(_h: &Harness, name: &str) -> Value {
        rate_limits(name, "requests")
    }
    fn spec_edit() -> (Value, &'static str, Value) {
        (json!({"value": 250}), "/value", json!(250))
    }
    fn remote_edit() -> (Value, &'static str, Value) {
        (json!({"value": 1}), "/value", json!(1))
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
    const COLLECTION: &'static str = "/ai_gw/v2/policies/usage-limits";
    const ITEM: &'static str = "/ai_gw/v2/policies/usage-limits/{policyUsageLimitsId}";
    const STATE: &'static str = "usage_limits";
    const KEY: &'static str = "id";

    fn spec(_h: &Harness, name: &str) -> Value {
        usage_limits(name, "cost")
    }
    fn spec_edit() -> (Value, &'static str, Value) {
        (json!({"creditLimit": 250}), "/credit_limit", json!(250))
    }
    fn remote_edit() -> (Value, &'static str, Value) {
        (json!({"credit_limit": 1}), "/credit_limit", json!(1))
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
    const COLLECTION: &'static str = "/ai_gw/v2/guardrails";
    const ITEM: &'static str = "/ai_gw/v2/guardrails/{guardrailId}";
    const STATE: &'static str = "guardrails";
    const KEY: &'static str = "slug";
    const PATH_KEY: &'static str = "slug";

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
    const COLLECTION: &'static str = "/ai_gw/admin/v2/guardrails";
    const ITEM: &'static str = "/ai_gw/admin/v2/guardrails/{guardrailId}";
    const STATE: &'static str = "guardrails";
    const KEY: &'static str = "slug";
    const PATH_KEY: &'static str = "slug";

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

/// The upstream key Secret in the operator's namespace, labelled for cluster-scoped readers.
async fn put_upstream_key(h: &Harness) {
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "cf-upstream", "labels": {"aigw.io/cluster-readable": "true"}},
        "stringData": {"api-key": UPSTREAM_KEY}
    }))
    .unwrap();
    h.env
        .api::<Secret>()
        .patch(
            "cf-upstream",
            &PatchParams::apply("test").force(),
            &Patch::Apply(&secret),
        )
        .await
        .unwrap();
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
    const COLLECTION: &'static str = "/ai_gw/admin/v2/integrations";
    const ITEM: &'static str = "/ai_gw/admin/v2/integrations/{integrationId}";
    const STATE: &'static str = "integrations";
    const KEY: &'static str = "slug";
    /// It reads the remote object its spec's slug names before creating it.
    const LOST_ANSWER: &'static str = "error_after_commit_rate";
    /// What a correction replaced is in its event only.
    const RECORDS_DRIFT: bool = false;

    async fn start(prefix: &str) -> Harness {
        Harness::start_with_secret_namespace(prefix, DRIFT).await
    }
    async fn prepare(h: &Harness) {
        put_upstream_key(h).await;
    }
    fn spec(h: &Harness, name: &str) -> Value {
        integration(h, name)
    }
    fn spec_edit() -> (Value, &'static str, Value) {
        let name = "edited by the spec";
        (json!({"name": name}), "/name", json!(name))
    }
    fn remote_edit() -> (Value, &'static str, Value) {
        let name = "edited remotely";
        (json!({"name": name}), "/name", json!(name))
    }
    fn immutable_edit() -> Value {
        json!({"aiProviderId": "anthropic"})
    }
}

/// The `auth_config` Secret of a SecretReference, in the operator's namespace, labelled for
/// cluster-scoped readers.
async fn put_auth_config(h: &Harness) {
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "cf-sm-auth", "labels": {"aigw.io/cluster-readable": "true"}},
        "stringData": {"aws_auth_type": "accessKey", "aws_region": "eu-west-1",
                       "aws_access_key_id": "AKIACF0TESTKEY", "aws_secret_access_key": UPSTREAM_KEY}
    }))
    .unwrap();
    h.env
        .api::<Secret>()
        .patch(
            "cf-sm-auth",
            &PatchParams::apply("test").force(),
            &Patch::Apply(&secret),
        )
        .await
        .unwrap();
}

pub struct SecretReferenceKind;

impl Fixture for SecretReferenceKind {
    const KIND: &'static str = "SecretReference";
    const PLURAL: &'static str = "secretreferences";
    const CLUSTER: bool = true;
    const COLLECTION: &'static str = "/ai_gw/admin/v2/secret-references";
    const ITEM: &'static str = "/ai_gw/admin/v2/secret-references/{secretReferenceId}";
    const STATE: &'static str = "secret_references";
    const KEY: &'static str = "slug";
    /// It reads the remote object its spec's slug names before creating it.
    const LOST_ANSWER: &'static str = "error_after_commit_rate";
    /// What a correction replaced is in its event only.
    const RECORDS_DRIFT: bool = false;

    async fn start(prefix: &str) -> Harness {
        Harness::start_with_secret_namespace(prefix, DRIFT).await
    }
    async fn prepare(h: &Harness) {
        put_auth_config(h).await;
    }
    fn spec(h: &Harness, name: &str) -> Value {
        json!({"slug": h.cluster_name(name), "name": name, "managerType": "aws_sm",
               "secretPath": "prod/openai", "authConfigSecretRef": {"name": "cf-sm-auth"},
               "allowedWorkspaces": [WORKSPACE]})
    }
    fn spec_edit() -> (Value, &'static str, Value) {
        let path = "edited/by/the/spec";
        (json!({"secretPath": path}), "/secret_path", json!(path))
    }
    fn remote_edit() -> (Value, &'static str, Value) {
        let path = "edited/remotely";
        (json!({"secret_path": path}), "/secret_path", json!(path))
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
    const COLLECTION: &'static str = "/ai_gw/v2/providers";
    const ITEM: &'static str = "/ai_gw/v2/providers/{providerId}";
    const STATE: &'static str = "providers";
    const KEY: &'static str = "slug";
    /// It reads the remote object its spec's slug names before creating it.
    const LOST_ANSWER: &'static str = "error_after_commit_rate";
    /// What a correction replaced is in its event only.
    const RECORDS_DRIFT: bool = false;

    async fn start(prefix: &str) -> Harness {
        Harness::start_with_secret_namespace(prefix, DRIFT).await
    }
    /// The Integration every provider binds, Ready.
    async fn prepare(h: &Harness) {
        put_upstream_key(h).await;
        let integrations = kube::Api::<aigw::resources::Integration>::all(h.env.client.clone());
        integrations
            .create(
                &Default::default(),
                &h.cluster_object("Integration", "cf-int", integration(h, "cf-int")),
            )
            .await
            .unwrap();
        let name = h.cluster_name("cf-int");
        let ready = crate::support::wait_until(super::WAIT, || async {
            let i = integrations.get_opt(&name).await.ok()??;
            let i = serde_json::to_value(i).unwrap();
            super::ready(&i).then_some(())
        })
        .await;
        assert!(ready.is_some(), "Integration {name} never became Ready");
    }
    fn spec(h: &Harness, name: &str) -> Value {
        json!({"slug": format!("{}-{name}", h.env.namespace), "name": name, "note": "conformance",
               "workspaceId": WORKSPACE, "integration": h.cluster_name("cf-int")})
    }
    fn spec_edit() -> (Value, &'static str, Value) {
        let note = "edited by the spec";
        (json!({"note": note}), "/note", json!(note))
    }
    fn remote_edit() -> (Value, &'static str, Value) {
        let note = "edited remotely";
        (json!({"note": note}), "/note", json!(note))
    }
    fn immutable_edit() -> Value {
        json!({"workspaceId": OTHER_WORKSPACE})
    }
}

pub struct DeploymentKind;

impl Fixture for DeploymentKind {
    const KIND: &'static str = "Deployment";
    const PLURAL: &'static str = "deployments";
    const COLLECTION: &'static str = "/ai_gw/admin/v2/deployments";
    const ITEM: &'static str = "/ai_gw/admin/v2/deployments/{deploymentId}";
    const STATE: &'static str = "deployments";
    const KEY: &'static str = "id";

    fn spec(_h: &Harness, name: &str) -> Value {
        json!({"name": name, "type": "non_production",
               "credentialsSecretRef": {"name": format!("{name}-credentials")}})
    }
    fn spec_edit() -> (Value, &'static str, Value) {
        let name = "edited-by-the-spec";
        (json!({"name": name}), "/name", json!(name))
    }
    fn remote_edit() -> (Value, &'static str, Value) {
        let name = "edited-remotely";
        (json!({"name": name}), "/name", json!(name))
    }
}

pub struct ApiKeyKind;

impl Fixture for ApiKeyKind {
    const KIND: &'static str = "ApiKey";
    const PLURAL: &'static str = "apikeys";
    const COLLECTION: &'static str = "/ai_gw/v2/api-keys/service";
    const ITEM: &'static str = "/ai_gw/v2/api-keys/service/{keyId}";
    const STATE: &'static str = "api_keys";
    const KEY: &'static str = "id";
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
    const COLLECTION: &'static str = "/ai_gw/admin/v2/workspaces";
    const ITEM: &'static str = "/ai_gw/admin/v2/workspaces/{workspaceRef}";
    const STATE: &'static str = "workspaces";
    const KEY: &'static str = "id";
    /// Its create reads its IAM scope first (and the lost-answer fault of every request would
    /// lose that read too): the writes alone are answered 5xx after the commit.
    const LOST_ANSWER: &'static str = "error_after_commit_rate";
    /// What a correction replaced is in its event only.
    const RECORDS_DRIFT: bool = false;

    fn spec(_h: &Harness, name: &str) -> Value {
        json!({"name": name, "description": "made by the conformance matrix"})
    }
    fn spec_edit() -> (Value, &'static str, Value) {
        let edit = "edited by the spec";
        (json!({"description": edit}), "/description", json!(edit))
    }
    fn remote_edit() -> (Value, &'static str, Value) {
        let edit = "edited remotely";
        (json!({"description": edit}), "/description", json!(edit))
    }
}

/// The `configurations` Secret of an McpIntegration, in the operator's namespace, labelled for
/// cluster-scoped readers.
async fn put_mcp_configurations(h: &Harness) {
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "cf-mcp-config", "labels": {"aigw.io/cluster-readable": "true"}},
        "stringData": {"custom_headers": format!("{{\"x-api-key\":\"{UPSTREAM_KEY}\"}}")}
    }))
    .unwrap();
    h.env
        .api::<Secret>()
        .patch(
            "cf-mcp-config",
            &PatchParams::apply("test").force(),
            &Patch::Apply(&secret),
        )
        .await
        .unwrap();
}

pub struct McpIntegrationKind;

impl Fixture for McpIntegrationKind {
    const KIND: &'static str = "McpIntegration";
    const PLURAL: &'static str = "mcpintegrations";
    const CLUSTER: bool = true;
    const COLLECTION: &'static str = "/ai_gw/admin/v2/mcp-integrations";
    const ITEM: &'static str = "/ai_gw/admin/v2/mcp-integrations/{mcpIntegrationId}";
    const STATE: &'static str = "mcp_integrations";
    const KEY: &'static str = "slug";
    /// It reads the remote object its spec's slug names before creating it.
    const LOST_ANSWER: &'static str = "error_after_commit_rate";
    /// What a correction replaced is in its event only.
    const RECORDS_DRIFT: bool = false;

    async fn start(prefix: &str) -> Harness {
        Harness::start_with_secret_namespace(prefix, DRIFT).await
    }
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
        let url = "https://mcp.example.com/edited-by-the-spec";
        (json!({"url": url}), "/url", json!(url))
    }
    fn remote_edit() -> (Value, &'static str, Value) {
        let url = "https://mcp.example.com/edited-remotely";
        (json!({"url": url}), "/url", json!(url))
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
    h.call(
        reqwest::Method::POST,
        "/_emulator/seed",
        Some(json!({"workspaces": [{"id": WORKSPACE, "name": "conformance", "slug": "cf-ws"}]})),
    )
    .await;
    let integrations = kube::Api::<aigw::resources::McpIntegration>::all(h.env.client.clone());
    let spec = json!({"slug": h.cluster_name(name), "name": name,
        "url": "https://mcp.example.com/mcp", "authType": "none", "transport": "http",
        "workspaces": [{"workspace": WORKSPACE}]});
    integrations
        .create(
            &Default::default(),
            &h.cluster_object("McpIntegration", name, spec),
        )
        .await
        .unwrap();
    let name = h.cluster_name(name);
    let ready = crate::support::wait_until(super::WAIT, || async {
        let i = integrations.get_opt(&name).await.ok()??;
        let i = serde_json::to_value(i).unwrap();
        super::ready(&i).then_some(())
    })
    .await;
    assert!(ready.is_some(), "McpIntegration {name} never became Ready");
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
    const COLLECTION: &'static str = "/ai_gw/v2/mcp-servers";
    const ITEM: &'static str = "/ai_gw/v2/mcp-servers/{mcpServerId}";
    const STATE: &'static str = "mcp_servers";
    const KEY: &'static str = "slug";
    /// It reads the remote object its spec's slug names before creating it.
    const LOST_ANSWER: &'static str = "error_after_commit_rate";
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
        let edit = "edited by the spec";
        (json!({"description": edit}), "/description", json!(edit))
    }
    fn remote_edit() -> (Value, &'static str, Value) {
        let edit = "edited remotely";
        (json!({"description": edit}), "/description", json!(edit))
    }
    fn immutable_edit() -> Value {
        json!({"workspaceId": OTHER_WORKSPACE})
    }
}
