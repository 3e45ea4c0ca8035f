//! The fixtures of the conformance matrix: one per kind with a remote object.

use serde_json::{Value, json};

use super::{Conflict, Edits, Fixture, Meta, Remote, SecretChange};
use crate::support::harness::Harness;

const WORKSPACE: &str = "6f0e4a2c-5a4e-4c1b-9a53-3c2f1f0d9b11";
const OTHER_WORKSPACE: &str = "0b7c1d2e-3f40-4a5b-8c6d-7e8f9a0b1c2d";
const UPSTREAM_KEY: &str = "sk-upstream-Cf4Mx8Tq2Wz6";
/// The value a Secret change ([`Fixture::secret_change`]) sends instead.
const CHANGED_KEY: &str = "sk-changed-Hd7Lp3Rv9Xn2";
/// The lost-answer fault of a kind that reads the remote object its spec's slug names before
/// creating it (the write alone answered 5xx after the commit).
const READS_FIRST: &str = "error_after_commit_rate";
/// A kind that reads the remote object its spec's slug names before creating it, and Secrets of
/// the operator's namespace; what a correction replaced is in its event only.
const READS_SECRETS_FIRST: Meta = Meta {
    lost_answer: READS_FIRST,
    records_drift: false,
    secret_namespace: true,
    ..Meta::DEFAULT
};

/// The immutable edit of a kind with a `connectionRef`: another Connection.
fn another_connection() -> Value {
    json!({"connectionRef": {"name": "another-connection"}})
}

/// The edits of the text field `field` (shown at `pointer`), by the spec and remotely, and
/// `immutable`.
fn text_edits(field: &str, pointer: &'static str, immutable: Value) -> Edits {
    let edited = ("edited by the spec", "edited remotely");
    string_edits((field, field), pointer, edited, immutable)
}

/// The edits of a string field, `fields` in the spec's and the API's names (shown at
/// `pointer`), to `values` by the spec and remotely, and `immutable`.
fn string_edits(
    fields: (&str, &str),
    pointer: &'static str,
    values: (&str, &str),
    immutable: Value,
) -> Edits {
    Edits {
        spec: set(fields.0, pointer, values.0),
        remote: set(fields.1, pointer, values.1),
        immutable,
    }
}

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
    const META: Meta = Meta {
        kind: "Config",
        plural: "configs",
        remote: Remote::new("/ai_gw/v2/configs", "{slug}", "configs", "slug").slug_path(),
        ..Meta::DEFAULT
    };

    fn spec(_h: &Harness, name: &str) -> Value {
        json!({"name": name, "config": {"retry": {"attempts": 3}, "strategy": {"mode": "fallback"},
               "targets": [{"provider": "@openai"}, {"provider": "@anthropic"}]}})
    }
    fn edits() -> Edits {
        Edits {
            spec: (
                json!({"config": {"retry": {"attempts": 5}}}),
                "/config/retry/attempts",
                json!(5),
            ),
            remote: (
                json!({"config": {"retry": {"attempts": 9}}}),
                "/config/retry/attempts",
                json!(9),
            ),
            immutable: another_connection(),
        }
    }
}

/// A limits policy `name` of `type_` with its kind's `fields`, in the spec's terms.
fn policy(name: &str, type_: &str, fields: Value) -> Value {
    let mut policy = json!({"name": name, "type": type_,
        "conditions": [{"key": "workspace_id", "value": "ws-1"}], "groupBy": [{"key": "api_key"}]});
    super::merge(&mut policy, fields);
    policy
}

/// A policy's edits of its limit, `fields` in the spec's and the API's names, shown at
/// `pointer`: 250 by the spec, 1 remotely; its `type` is immutable.
fn limit_edits(fields: (&str, &str), pointer: &'static str) -> Edits {
    Edits {
        spec: set(fields.0, pointer, 250),
        remote: set(fields.1, pointer, 1),
        immutable: json!({"type": "tokens"}),
    }
}

/// A remote policy `name` with `fields` (the API's names) of type `tokens`: `type` is immutable.
fn tokens_policy(name: &str, fields: Value) -> Option<Conflict> {
    let mut post = policy(name, "tokens", fields);
    post["group_by"] = post["groupBy"].take();
    post.as_object_mut().unwrap().remove("groupBy");
    Some(Conflict::by_policy_id(post))
}

pub struct RateLimitsPolicyKind;

impl Fixture for RateLimitsPolicyKind {
    const META: Meta = Meta {
        kind: "RateLimitsPolicy",
        plural: "ratelimitspolicies",
        remote: Remote::new(
            "/ai_gw/v2/policies/rate-limits",
            "{rateLimitsPolicyId}",
            "rate_limits",
            "id",
        ),
        ..Meta::DEFAULT
    };

    fn spec(_h: &Harness, name: &str) -> Value {
        policy(name, "requests", json!({"unit": "rpm", "value": 100}))
    }
    fn edits() -> Edits {
        limit_edits(("value", "value"), "/value")
    }
    fn conflict(_h: &Harness, name: &str) -> Option<Conflict> {
        tokens_policy(name, json!({"unit": "rpm", "value": 100}))
    }
}

pub struct UsageLimitsPolicyKind;

impl Fixture for UsageLimitsPolicyKind {
    const META: Meta = Meta {
        kind: "UsageLimitsPolicy",
        plural: "usagelimitspolicies",
        remote: Remote::new(
            "/ai_gw/v2/policies/usage-limits",
            "{policyUsageLimitsId}",
            "usage_limits",
            "id",
        ),
        ..Meta::DEFAULT
    };

    fn spec(_h: &Harness, name: &str) -> Value {
        policy(
            name,
            "cost",
            json!({"creditLimit": 100, "periodicReset": "monthly"}),
        )
    }
    fn edits() -> Edits {
        limit_edits(("creditLimit", "credit_limit"), "/credit_limit")
    }
    fn conflict(_h: &Harness, name: &str) -> Option<Conflict> {
        tokens_policy(
            name,
            json!({"credit_limit": 100, "periodic_reset": "monthly"}),
        )
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
    Conflict::by_slug(post)
}

/// A guardrail of a workspace (`Guardrail`) or of the organisation (`ClusterGuardrail`): one
/// fixture, the organisation's naming no workspace and living under the admin routes.
pub struct GuardrailOf<const ORGANISATION: bool>;

pub type GuardrailKind = GuardrailOf<false>;
pub type ClusterGuardrailKind = GuardrailOf<true>;

impl<const ORGANISATION: bool> Fixture for GuardrailOf<ORGANISATION> {
    const META: Meta = if ORGANISATION {
        Meta {
            kind: "ClusterGuardrail",
            plural: "clusterguardrails",
            cluster: true,
            remote: Remote::new(
                "/ai_gw/admin/v2/guardrails",
                "{guardrailId}",
                "guardrails",
                "slug",
            )
            .slug_path(),
            ..Meta::DEFAULT
        }
    } else {
        Meta {
            kind: "Guardrail",
            plural: "guardrails",
            remote: Remote::new(
                "/ai_gw/v2/guardrails",
                "{guardrailId}",
                "guardrails",
                "slug",
            )
            .slug_path(),
            ..Meta::DEFAULT
        }
    };

    fn spec(_h: &Harness, name: &str) -> Value {
        guardrail(name, !ORGANISATION)
    }
    fn edits() -> Edits {
        Edits {
            spec: (
                json!({"checks": checks("\\d{12}")}),
                "/checks/0/parameters/rule",
                json!("\\d{12}"),
            ),
            remote: (
                json!({"checks": checks("x")}),
                "/checks/0/parameters/rule",
                json!("x"),
            ),
            immutable: json!({"target": "mcp_tools"}),
        }
    }
    fn conflict(_h: &Harness, name: &str) -> Option<Conflict> {
        Some(mcp_guardrail(name, !ORGANISATION))
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
    const META: Meta = Meta {
        kind: "Integration",
        plural: "integrations",
        cluster: true,
        remote: Remote::new(
            "/ai_gw/admin/v2/integrations",
            "{integrationId}",
            "integrations",
            "slug",
        ),
        ..READS_SECRETS_FIRST
    };

    async fn prepare(h: &Harness) {
        put_upstream_key(h).await;
    }
    fn spec(h: &Harness, name: &str) -> Value {
        integration(h, name)
    }
    fn edits() -> Edits {
        text_edits("name", "/name", json!({"aiProviderId": "anthropic"}))
    }
    fn secret_change() -> Option<SecretChange> {
        Some(SecretChange {
            secret: ("cf-upstream", json!({"api-key": CHANGED_KEY})),
            shown: ("/key", json!(CHANGED_KEY)),
        })
    }
}

pub struct SecretReferenceKind;

impl Fixture for SecretReferenceKind {
    const META: Meta = Meta {
        kind: "SecretReference",
        plural: "secretreferences",
        cluster: true,
        remote: Remote::new(
            "/ai_gw/admin/v2/secret-references",
            "{secretReferenceId}",
            "secret_references",
            "slug",
        ),
        ..READS_SECRETS_FIRST
    };

    /// The `auth_config` Secret.
    async fn prepare(h: &Harness) {
        let data = json!({"aws_auth_type": "accessKey", "aws_region": "eu-west-1",
                          "aws_access_key_id": "AKIACF0TESTKEY", "aws_secret_access_key": UPSTREAM_KEY});
        h.put_secret("cf-sm-auth", data, true).await;
    }
    fn spec(h: &Harness, name: &str) -> Value {
        json!({"slug": h.cluster_name(name), "name": name, "managerType": "aws_sm",
               "secretPath": "prod/openai", "authConfigSecretRef": {"name": "cf-sm-auth"},
               "allowedWorkspaces": [WORKSPACE]})
    }
    fn edits() -> Edits {
        string_edits(
            ("secretPath", "secret_path"),
            "/secret_path",
            ("edited/by/the/spec", "edited/remotely"),
            json!({"managerType": "azure_kv"}),
        )
    }
    fn secret_change() -> Option<SecretChange> {
        let data = json!({"aws_auth_type": "accessKey", "aws_region": "eu-west-1",
                          "aws_access_key_id": "AKIACF0TESTKEY", "aws_secret_access_key": CHANGED_KEY});
        Some(SecretChange {
            secret: ("cf-sm-auth", data),
            shown: ("/auth_config/aws_secret_access_key", json!(CHANGED_KEY)),
        })
    }
    /// A reference into another manager (`managerType` is immutable).
    fn conflict(_h: &Harness, name: &str) -> Option<Conflict> {
        Some(Conflict::by_slug(
            json!({"name": name, "manager_type": "azure_kv", "secret_path": "kv/openai",
                         "auth_config": {"azure_auth_mode": "managed",
                                         "azure_vault_url": "https://kv.vault.azure.net"}}),
        ))
    }
}

pub struct ProviderKind;

impl Fixture for ProviderKind {
    const META: Meta = Meta {
        kind: "Provider",
        plural: "providers",
        remote: Remote::new("/ai_gw/v2/providers", "{providerId}", "providers", "slug"),
        ..READS_SECRETS_FIRST
    };

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
    fn edits() -> Edits {
        text_edits("note", "/note", json!({"workspaceId": OTHER_WORKSPACE}))
    }
}

pub struct DeploymentKind;

impl Fixture for DeploymentKind {
    const META: Meta = Meta {
        kind: "Deployment",
        plural: "deployments",
        remote: Remote::new(
            "/ai_gw/admin/v2/deployments",
            "{deploymentId}",
            "deployments",
            "id",
        ),
        ..Meta::DEFAULT
    };

    fn spec(_h: &Harness, name: &str) -> Value {
        json!({"name": name, "type": "non_production",
               "credentialsSecretRef": {"name": format!("{name}-credentials")}})
    }
    fn edits() -> Edits {
        string_edits(
            ("name", "name"),
            "/name",
            ("edited-by-the-spec", "edited-remotely"),
            another_connection(),
        )
    }
}

pub struct ApiKeyKind;

impl Fixture for ApiKeyKind {
    const META: Meta = Meta {
        kind: "ApiKey",
        plural: "apikeys",
        remote: Remote::new("/ai_gw/v2/api-keys/service", "{keyId}", "api_keys", "id"),
        // The value of a key whose create answer was lost is lost with it: the key found (by the
        // mark aigw puts in the description) is deleted and one more is created.
        lost_create_posts: 2,
        // What a correction replaced is in its event only.
        records_drift: false,
        ..Meta::DEFAULT
    };

    fn spec(_h: &Harness, name: &str) -> Value {
        json!({"name": name, "kind": "service", "scopes": ["completions.write"],
               "secretRef": {"name": format!("{name}-key")}})
    }
    fn edits() -> Edits {
        Edits {
            spec: (
                json!({"scopes": ["completions.write", "logs.write"]}),
                "/scopes/1",
                json!("logs.write"),
            ),
            remote: (
                json!({"scopes": ["logs.write"]}),
                "/scopes/0",
                json!("logs.write"),
            ),
            immutable: json!({"kind": "user"}),
        }
    }
}

pub struct WorkspaceKind;

impl Fixture for WorkspaceKind {
    const META: Meta = Meta {
        kind: "Workspace",
        plural: "workspaces",
        cluster: true,
        remote: Remote::new(
            "/ai_gw/admin/v2/workspaces",
            "{workspaceRef}",
            "workspaces",
            "id",
        ),
        // Its create reads its IAM scope first (and the lost-answer fault of every request would
        // lose that read too): the writes alone are answered 5xx after the commit.
        lost_answer: "error_after_commit_rate",
        // What a correction replaced is in its event only.
        records_drift: false,
        ..Meta::DEFAULT
    };

    fn spec(_h: &Harness, name: &str) -> Value {
        json!({"name": name, "description": "made by the conformance matrix"})
    }
    fn edits() -> Edits {
        text_edits("description", "/description", another_connection())
    }
}

pub struct McpIntegrationKind;

impl Fixture for McpIntegrationKind {
    const META: Meta = Meta {
        kind: "McpIntegration",
        plural: "mcpintegrations",
        cluster: true,
        remote: Remote::new(
            "/ai_gw/admin/v2/mcp-integrations",
            "{mcpIntegrationId}",
            "mcp_integrations",
            "slug",
        ),
        ..READS_SECRETS_FIRST
    };

    /// The `configurations` Secret.
    async fn prepare(h: &Harness) {
        let data = json!({"custom_headers": format!("{{\"x-api-key\":\"{UPSTREAM_KEY}\"}}")});
        h.put_secret("cf-mcp-config", data, true).await;
    }
    fn spec(h: &Harness, name: &str) -> Value {
        json!({"slug": h.cluster_name(name), "name": name, "url": "https://mcp.example.com/mcp",
               "authType": "headers", "transport": "http",
               "configurationsSecretRef": {"name": "cf-mcp-config"},
               "workspaces": [{"workspace": WORKSPACE}]})
    }
    fn edits() -> Edits {
        string_edits(
            ("url", "url"),
            "/url",
            (
                "https://mcp.example.com/edited-by-the-spec",
                "https://mcp.example.com/edited-remotely",
            ),
            json!({"slug": "another-slug"}),
        )
    }
    fn secret_change() -> Option<SecretChange> {
        let data = json!({"custom_headers": format!("{{\"x-api-key\":\"{CHANGED_KEY}\"}}")});
        Some(SecretChange {
            secret: ("cf-mcp-config", data),
            shown: (
                "/configurations/custom_headers/x-api-key",
                json!(CHANGED_KEY),
            ),
        })
    }
    /// A workspace's own MCP integration (`workspace_id` set, which no update can change) is
    /// never the organisation's to adopt.
    fn conflict(_h: &Harness, name: &str) -> Option<Conflict> {
        Some(Conflict::by_slug(
            json!({"name": name, "url": "https://mcp.example.com/mcp", "auth_type": "none",
                         "transport": "http", "workspace_id": WORKSPACE}),
        ))
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
    const META: Meta = Meta {
        kind: "McpServer",
        plural: "mcpservers",
        remote: Remote::new(
            "/ai_gw/v2/mcp-servers",
            "{mcpServerId}",
            "mcp_servers",
            "slug",
        ),
        lost_answer: READS_FIRST,
        // What a correction replaced is in its event only.
        records_drift: false,
        ..Meta::DEFAULT
    };

    async fn prepare(h: &Harness) {
        ready_mcp_integration(h, "cf-mcpi").await;
    }
    fn spec(h: &Harness, name: &str) -> Value {
        json!({"slug": server_slug(h, name), "name": name, "description": "conformance",
               "workspaceId": WORKSPACE, "integrationRef": {"name": h.cluster_name("cf-mcpi")}})
    }
    fn edits() -> Edits {
        text_edits(
            "description",
            "/description",
            json!({"workspaceId": OTHER_WORKSPACE}),
        )
    }
}
