//! The `McpIntegration` kind: an upstream MCP server the organisation registers (URL, transport,
//! auth), the workspaces that may instantiate it and the toggles of the tools it offers.

use super::common::DeletionPolicy;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::rules;
use serde_json::{Map, Value};

use super::common::{SendsSecretValues, differing, other_slug, set_and_differs};
use super::managed_spec::ManagedSpec;
use super::managed_status::{CREATE_SETTLED, ManagedStatus, Reword, embeds_managed};
use crate::api;

/// An MCP integration (`/ai_gw/admin/v2/mcp-integrations`): one upstream MCP server of the
/// organisation. Its `configurations` (headers, client secrets, OAuth metadata, JWT validation)
/// are write-only in the API: they come from a Secret of the operator's own namespace, aigw
/// keeps a keyed hash of what it sent, and a changed Secret is sent with exactly one PUT.
/// Workspace access rows are enabled or disabled, never deleted; tool toggles wait for the
/// gateway to discover the tool (`status.pendingCapabilities`).
// kube's printcolumn(...) lists repeat `type_ = "string"`, which this lint misreads.
#[allow(clippy::duplicated_attributes)]
#[skip_serializing_none]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "aigw.io",
    doc = "An upstream MCP server of the organisation (cluster-scoped), with the workspaces that may use it and its tool toggles, kept in line with the management API by aigw.",
    version = "v1alpha1",
    kind = "McpIntegration",
    plural = "mcpintegrations",
    shortname = "aigwmcpi",
    category = "aigw",
    status = "McpIntegrationStatus",
    printcolumn(name = "Slug", type_ = "string", json_path = ".status.slug"),
    printcolumn(name = "URL", type_ = "string", json_path = ".spec.url")
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = rules::set_at_creation("slug", "McpIntegration"))]
#[x_kube(validation = rules::same_connection("McpIntegration"))]
// Rules, not a schema pattern: a pattern's refusal quotes the string, which may hold a token.
#[x_kube(validation = Rule::new(r"self.url.matches(r'^(?i:https?)://[^\t\n\f\r \\]+$')").field_path(".url").reason(Reason::FieldValueInvalid).message("spec.url must be an http:// or https:// URL without spaces or backslashes"))]
#[x_kube(validation = rules::no_credentials_in_url("url", "spec.url", "put them in a Secret named by spec.configurationsSecretRef, e.g. as custom_headers"))]
pub struct McpIntegrationSpec {
    /// The integration's slug (what an MCP server's `mcpIntegration` may name). Set, aigw adopts
    /// the integration with this slug if one exists, and otherwise creates one with it; absent,
    /// the API makes one from the name (recorded in `status.slug`). Only set at creation.
    #[schemars(regex(pattern = r"^[a-zA-Z0-9_-]+$"), length(min = 1, max = 255))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("spec.slug is immutable: create a new McpIntegration to use another slug"))]
    pub slug: Option<String>,

    /// Display name of the integration.
    #[schemars(length(min = 1, max = 255))]
    pub name: String,

    /// Description of the integration; left as the API has it when absent.
    #[schemars(length(max = 1024))]
    pub description: Option<String>,

    /// The upstream MCP server's URL (`http://` or `https://`), without credentials in it
    /// (`user:password@`): they go in `configurationsSecretRef` (`custom_headers`).
    // No minLength: its refusal would quote the URL; the scheme rule above needs 9 characters.
    #[schemars(length(max = 2048))]
    pub url: String,

    /// How the gateway authenticates upstream: `none`, `headers` (the `custom_headers` of the
    /// configurations) or `oauth_auto`.
    pub auth_type: McpAuthType,

    /// The upstream transport: `http` (streamable HTTP) or `sse`.
    pub transport: McpTransport,

    /// The Secret whose keys form `configurations`: each key is a field (e.g. `custom_headers`,
    /// `client_secret`, `oauth_metadata`, `jwt_validation`, `passthrough_headers`); a value
    /// that is a JSON object or array is sent as that JSON, any other as a string. Read only
    /// from the namespace the operator reads Connection Secrets from, and only from a Secret
    /// labelled `aigw.io/cluster-readable: "true"`. Write-only: never shown in status, events
    /// or logs; a change of the Secret is applied with one PUT (the API replaces
    /// `configurations` whole). Absent: the API's configurations are left as they are.
    pub configurations_secret_ref: Option<ConfigurationsSecretRef>,

    /// The workspaces that may create MCP servers of this integration. Each row is merged into
    /// the API's access list on its own (rows of other workspaces are never sent); a workspace
    /// removed from this list is disabled (the API keeps its row, `enabled: false`), never
    /// deleted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 1000))]
    pub workspaces: Vec<McpWorkspaceAccess>,

    /// Toggles of the capabilities (tools, prompts, resources) the gateway discovered upstream.
    /// Capabilities not listed keep what the API has. A toggle of a capability not discovered
    /// yet waits, named in `status.pendingCapabilities`, and is applied once it appears.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 100))]
    #[x_kube(validation = Rule::new("self.all(c, self.exists_one(o, o.name == c.name && (has(o.type) ? o.type : 'tool') == (has(c.type) ? c.type : 'tool')))").message("spec.capabilities names a capability twice: each (type, name) is toggled once"))]
    pub capabilities: Vec<McpCapabilityToggle>,

    /// What happens to the remote integration when this resource is deleted: `Delete` (the
    /// default) or `Orphan`. An integration an MCP server still instantiates is not deleted:
    /// the resource reports `StillReferenced`, naming the servers, until they are gone.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,

    /// Management policy and Connection: the block every kind keeps.
    #[serde(flatten)]
    pub managed: ManagedSpec,
}
embeds_managed!(McpIntegrationSpec, ManagedSpec);

/// How the gateway authenticates to the upstream MCP server.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum McpAuthType {
    /// No authentication.
    None,
    /// Headers from `configurations.custom_headers`.
    Headers,
    /// OAuth, discovered by the gateway.
    OauthAuto,
}

impl McpAuthType {
    /// As the API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Headers => "headers",
            Self::OauthAuto => "oauth_auto",
        }
    }
}

/// The upstream transport.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum McpTransport {
    /// Streamable HTTP.
    Http,
    /// Server-sent events.
    Sse,
}

impl McpTransport {
    /// As the API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Sse => "sse",
        }
    }
}

/// The Secret that holds `configurations`.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigurationsSecretRef {
    /// Name of the Secret; each of its keys is a `configurations` field.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The Secret's namespace, if you want to say it: it must be the namespace the operator
    /// reads Connection Secrets from (any other is refused).
    pub namespace: Option<String>,
}

/// One workspace's access to the integration, naming the workspace by Workspace resource or by
/// UUID or slug.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.workspaceRef) != has(self.workspace)").message("a spec.workspaces entry names its workspace once: set workspaceRef (a Workspace resource) or workspace (a UUID or slug), not both"))]
pub struct McpWorkspaceAccess {
    /// A Workspace resource (cluster-scoped), standing for the workspace it recorded; the
    /// integration waits until it is Ready.
    pub workspace_ref: Option<WorkspaceResourceRef>,
    /// A workspace the API knows, by UUID or slug: read once per reconcile for its UUID, which
    /// is sent (access rows read back under it); a UUID the read does not find is sent as
    /// written, a slug waits (`WorkspaceNotReady`).
    #[schemars(length(min = 1, max = 255))]
    pub workspace: Option<String>,
    /// False keeps the row but disables it.
    #[serde(default = "enabled")]
    pub enabled: bool,
}

/// A Workspace resource, by name.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct WorkspaceResourceRef {
    /// Its `metadata.name`.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

fn enabled() -> bool {
    true
}

/// One capability toggle.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpCapabilityToggle {
    /// The capability's name, as the upstream server reports it (e.g. `create_issue`).
    #[schemars(length(min = 1, max = 255))]
    pub name: String,
    /// `tool` (the default), `prompt` or `resource`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<McpCapabilityKind>,
    /// Whether clients may use it.
    pub enabled: bool,
}

impl McpCapabilityToggle {
    /// `tool`, `prompt` or `resource`.
    pub fn kind(&self) -> &'static str {
        self.kind.unwrap_or(McpCapabilityKind::Tool).as_str()
    }

    /// How status and messages name it: `tool create_issue`.
    pub fn shown(&self) -> String {
        format!("{} {}", self.kind(), self.name)
    }
}

/// The kinds of capability the API toggles.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum McpCapabilityKind {
    Tool,
    Prompt,
    Resource,
}

impl McpCapabilityKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tool => "tool",
            Self::Prompt => "prompt",
            Self::Resource => "resource",
        }
    }
}

/// What aigw knows of the integration. Nothing here comes from `configurations`: it is only
/// ever kept as a keyed hash.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = Reword(&[CREATE_SETTLED]))]
pub struct McpIntegrationStatus {
    /// Generation, conditions, create intent and claim: the block every kind keeps.
    #[serde(flatten)]
    pub managed: ManagedStatus,
    /// UUID of the remote integration.
    pub id: Option<String>,
    /// Slug of the remote integration.
    pub slug: Option<String>,
    /// HMAC-SHA256 (keyed with the operator's Secret `aigw-hash-key`, over the object's uid)
    /// of the `configurations` aigw last sent (the Secret's values), which reads never show in
    /// clear. A change of the Secret is found by comparing this hash. Never the values.
    pub secret_hash: Option<String>,
    /// The workspaces (as sent: UUID or slug) whose access aigw enabled, so that one removed
    /// from `spec.workspaces` is disabled.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workspaces: Vec<String>,
    /// Toggles of `spec.capabilities` waiting for the gateway to discover their capability
    /// (`tool create_issue`): applied once it appears (each reconcile reads the capabilities).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_capabilities: Vec<String>,
    /// When aigw last wrote the integration.
    pub last_applied_at: Option<String>,
}
embeds_managed!(McpIntegrationStatus, ManagedStatus);

/// A workspace access row as the spec wants it, its workspace resolved: what is sent (`id`),
/// every key a read row may carry for it (UUID and slug), and whether it is enabled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WantedAccess {
    pub id: String,
    pub keys: Vec<String>,
    pub enabled: bool,
}

impl SendsSecretValues for McpIntegrationSpec {
    type Remote = api::McpIntegration;
    /// `None`: the spec names no Secret.
    type Values = Option<Map<String, Value>>;
    type Create = api::CreateMcpIntegrationRequest;
    type Update = api::UpdateMcpIntegrationRequest;
    const FROM_SECRET: &'static str = "configurations (from spec.configurationsSecretRef)";

    /// The create body with `configurations` filled in (`None`: none sent), in the tenant it
    /// names.
    fn create_request(
        &self,
        configurations: Option<Map<String, Value>>,
        organisation_id: Option<String>,
    ) -> api::CreateMcpIntegrationRequest {
        api::CreateMcpIntegrationRequest {
            name: self.name.clone(),
            url: self.url.clone(),
            auth_type: self.auth_type.as_str().into(),
            transport: self.transport.as_str().into(),
            slug: self.slug.clone(),
            description: self.description.clone(),
            configurations: configurations.map(api::SensitiveFields),
            secret_mappings: None,
            organisation_id,
        }
    }

    /// The update body: every readable field the spec sets, and `configurations` when given
    /// (replaced whole by the API).
    fn update_request(
        &self,
        configurations: Option<Option<Map<String, Value>>>,
    ) -> api::UpdateMcpIntegrationRequest {
        let configurations = configurations.flatten();
        api::UpdateMcpIntegrationRequest {
            name: Some(self.name.clone()),
            description: self.description.clone(),
            url: Some(self.url.clone()),
            auth_type: Some(self.auth_type.as_str().into()),
            transport: Some(self.transport.as_str().into()),
            configurations: configurations.map(api::SensitiveFields),
            secret_mappings: None,
        }
    }

    /// Fields where `remote` differs from the spec as far as a read can tell
    /// (`configurations` reads masked: the hash covers it).
    fn diff(&self, remote: &api::McpIntegration) -> Vec<&'static str> {
        differing([
            ("name", self.name != remote.name),
            (
                "description",
                set_and_differs(&self.description, &remote.description),
            ),
            ("url", remote.url.as_deref() != Some(self.url.as_str())),
            (
                "authType",
                remote.auth_type.as_deref() != Some(self.auth_type.as_str()),
            ),
            (
                "transport",
                remote.transport.as_deref() != Some(self.transport.as_str()),
            ),
        ])
    }

    /// Fixed fields where the remote integration differs; no PUT can fix these.
    fn immutable_conflicts(&self, remote: &api::McpIntegration) -> Vec<&'static str> {
        differing([("slug", other_slug(self.slug.as_ref(), &remote.slug))])
    }
}

/// The access rows to PUT so the API matches `wanted`: the wanted rows that differ, and
/// `enabled: false` for each workspace aigw enabled before (`managed`) that is no longer
/// wanted and still enabled. Rows of other workspaces are never sent. A row a short answer
/// ([`api::McpIntegrationWorkspaces::complete`] false) leaves out may be enabled: it is disabled
/// again rather than taken for absent, so a dropped workspace never keeps its access.
pub fn access_updates(
    wanted: &[WantedAccess],
    rows: &api::McpIntegrationWorkspaces,
    managed: &[String],
) -> Vec<api::McpWorkspaceAccessUpdate> {
    let row = |keys: &[String]| rows.workspaces.iter().find(|r| keys.contains(&r.id));
    let unseen_may_be_enabled = !rows.complete();
    let mut updates = Vec::new();
    for want in wanted {
        let differs = match row(&want.keys) {
            None => want.enabled || unseen_may_be_enabled,
            Some(have) => have.enabled != want.enabled,
        };
        if differs {
            updates.push(api::McpWorkspaceAccessUpdate {
                id: want.id.clone(),
                enabled: want.enabled,
            });
        }
    }
    for id in managed {
        let still = wanted.iter().any(|w| w.keys.contains(id));
        let enabled = row(std::slice::from_ref(id)).map_or(unseen_may_be_enabled, |r| r.enabled);
        if !still && enabled {
            updates.push(api::McpWorkspaceAccessUpdate {
                id: id.clone(),
                enabled: false,
            });
        }
    }
    updates
}

/// The capability toggles to PUT (those discovered whose `enabled` differs) and the ones not
/// discovered yet (as [`McpCapabilityToggle::shown`]).
pub fn capability_updates(
    wanted: &[McpCapabilityToggle],
    discovered: &[api::McpCapability],
) -> (Vec<api::CapabilityToggle>, Vec<String>) {
    let mut toggles = Vec::new();
    let mut pending = Vec::new();
    for want in wanted {
        match discovered
            .iter()
            .find(|c| c.name == want.name && c.kind == want.kind())
        {
            None => pending.push(want.shown()),
            Some(have) if have.enabled != want.enabled => toggles.push(api::CapabilityToggle {
                name: want.name.clone(),
                kind: want.kind().into(),
                enabled: want.enabled,
            }),
            Some(_) => {}
        }
    }
    pending.sort();
    (toggles, pending)
}

super::common::governed!(McpIntegration, "MCP integration", DeletionPolicy::Orphan, CreatesAs slug);

super::common::recorded!(McpIntegrationStatus, id or slug);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec() -> McpIntegrationSpec {
        serde_json::from_value(json!({
            "name": "GitHub tools", "slug": "github-tools", "url": "https://mcp.example.com/mcp",
            "authType": "headers", "transport": "http", "description": "GitHub",
            "configurationsSecretRef": {"name": "github-mcp"},
            "capabilities": [{"name": "delete_repo", "enabled": false}]
        }))
        .unwrap()
    }

    fn remote(value: Value) -> api::McpIntegration {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_read_that_matches_differs_in_nothing_and_configurations_are_not_compared() {
        let read = remote(json!({
            "id": "m1", "slug": "github-tools", "name": "GitHub tools", "description": "GitHub",
            "url": "https://mcp.example.com/mcp", "auth_type": "headers", "transport": "http",
            "configurations": "{\"custom_headers\":{\"x-api-key\":\"****\"}}"
        }));
        assert!(spec().diff(&read).is_empty());
        assert!(spec().immutable_conflicts(&read).is_empty());
    }

    #[test]
    fn readable_fields_and_the_slug_are_compared() {
        let read = remote(json!({
            "id": "m1", "slug": "other", "name": "renamed", "url": "https://elsewhere.example/mcp",
            "auth_type": "none", "transport": "sse"
        }));
        assert_eq!(
            spec().diff(&read),
            ["name", "description", "url", "authType", "transport"]
        );
        assert_eq!(spec().immutable_conflicts(&read), ["slug"]);
    }

    fn rows(value: Value) -> api::McpIntegrationWorkspaces {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn access_enables_what_is_wanted_and_disables_what_was_dropped_never_touching_others() {
        let wanted = vec![
            WantedAccess {
                id: "uuid-a".into(),
                keys: vec!["uuid-a".into(), "ws-a".into()],
                enabled: true,
            },
            WantedAccess {
                id: "ws-b".into(),
                keys: vec!["ws-b".into()],
                enabled: false,
            },
        ];
        let read = rows(json!({"workspaces": [
            {"id": "uuid-a", "enabled": true}, {"id": "ws-b", "enabled": true},
            {"id": "uuid-c", "enabled": true}, {"id": "uuid-other", "enabled": true}
        ]}));
        let updates = access_updates(&wanted, &read, &["uuid-a".into(), "uuid-c".into()]);
        let sent: Vec<(&str, bool)> = updates.iter().map(|u| (u.id.as_str(), u.enabled)).collect();
        assert_eq!(sent, [("ws-b", false), ("uuid-c", false)]);
        // In line: nothing to send; a disabled row is never re-sent to disable it again.
        let read = rows(json!({"workspaces": [
            {"id": "uuid-a", "enabled": true}, {"id": "ws-b", "enabled": false},
            {"id": "uuid-c", "enabled": false}
        ]}));
        assert!(access_updates(&wanted, &read, &["uuid-c".into()]).is_empty());
        // A workspace not listed yet is enabled; one wanted disabled and not listed needs no row.
        let read = rows(json!({"workspaces": []}));
        let sent: Vec<String> = access_updates(&wanted, &read, &[])
            .into_iter()
            .map(|u| u.id)
            .collect();
        assert_eq!(sent, ["uuid-a"]);
        // A short answer (2 of 3 rows): the dropped workspace it leaves out is disabled again,
        // and so is the one wanted disabled.
        let read = rows(json!({"total": 3, "data": [
            {"id": "uuid-a", "enabled": true}, {"id": "uuid-other", "enabled": true}
        ]}));
        let updates = access_updates(&wanted, &read, &["uuid-c".into()]);
        let sent: Vec<(&str, bool)> = updates.iter().map(|u| (u.id.as_str(), u.enabled)).collect();
        assert_eq!(sent, [("ws-b", false), ("uuid-c", false)]);
        // So is one that says more rows follow.
        let read = rows(json!({"has_more": true, "data": [{"id": "uuid-a", "enabled": true}]}));
        assert_eq!(access_updates(&wanted, &read, &["uuid-c".into()]).len(), 2);
    }

    #[test]
    fn a_toggle_of_an_undiscovered_capability_is_pending_not_sent() {
        let wanted = vec![
            McpCapabilityToggle {
                name: "delete_repo".into(),
                kind: None,
                enabled: false,
            },
            McpCapabilityToggle {
                name: "summarise".into(),
                kind: Some(McpCapabilityKind::Prompt),
                enabled: false,
            },
            McpCapabilityToggle {
                name: "list_repos".into(),
                kind: None,
                enabled: true,
            },
        ];
        let discovered: Vec<api::McpCapability> = serde_json::from_value(json!([
            {"name": "delete_repo", "type": "tool", "enabled": true},
            {"name": "list_repos", "type": "tool", "enabled": true},
            {"name": "summarise", "type": "tool", "enabled": true}
        ]))
        .unwrap();
        let (toggles, pending) = capability_updates(&wanted, &discovered);
        assert_eq!(toggles.len(), 1);
        assert_eq!(
            (toggles[0].name.as_str(), toggles[0].kind.as_str()),
            ("delete_repo", "tool")
        );
        assert!(!toggles[0].enabled);
        assert_eq!(pending, ["prompt summarise"]);
    }
}
