//! The `McpServer` kind: a workspace's instance of an MCP integration (what clients reach at
//! `{gateway}/{slug}/mcp`), with its default and per-user access.

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::rules;

use super::common::{
    DeletionPolicy, WorkspaceRef, differing, other_slug, other_workspace, set_and_differs,
};
use super::managed_spec::ManagedSpec;
use super::managed_status::{ManagedStatus, Reword, embeds_managed};
use crate::api;

/// An MCP server (`/ai_gw/v2/mcp-servers`): one workspace's instance of an MCP integration.
/// It is created only once its integration enables the workspace (the API refuses it
/// otherwise); its workspace, integration and slug never change. User access is merged: the
/// rows the spec names are set, other users' rows are left as the API has them.
// kube's printcolumn(...) lists repeat `type_ = "string"`, which this lint misreads.
#[allow(clippy::duplicated_attributes)]
#[skip_serializing_none]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "aigw.io",
    doc = "An MCP server: a workspace's instance of an MCP integration, with its user access, kept in line with the management API by aigw.",
    version = "v1alpha1",
    kind = "McpServer",
    plural = "mcpservers",
    shortname = "aigwmcps",
    category = "aigw",
    namespaced,
    status = "McpServerStatus",
    printcolumn(name = "Slug", type_ = "string", json_path = ".status.slug"),
    printcolumn(name = "Workspace", type_ = "string", json_path = ".spec.workspaceId")
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.integrationRef) != has(self.integrationId)").message("set exactly one of spec.integrationRef (an McpIntegration resource) or spec.integrationId (an existing remote MCP integration)"))]
#[x_kube(validation = rules::set_at_creation("slug", "McpServer"))]
#[x_kube(validation = Rule::new("has(self.integrationRef) == has(oldSelf.integrationRef) && has(self.integrationId) == has(oldSelf.integrationId)").field_path(".integrationRef").reason(Reason::FieldValueForbidden).message("the integration of an McpServer cannot change: create a new McpServer instead"))]
#[x_kube(validation = rules::same_connection("McpServer"))]
#[x_kube(validation = rules::one_workspace())]
#[x_kube(validation = rules::workspace_named_alike("McpServer"))]
pub struct McpServerSpec {
    /// The server's slug (clients reach it at `{gateway}/{slug}/mcp`). Set, aigw creates the
    /// server with it, or adopts the server that has it (which needs `allowAdoption`); absent,
    /// the API makes one from the name (`status.slug`). Only set at creation.
    #[schemars(regex(pattern = r"^[a-zA-Z0-9_-]+$"), length(min = 3, max = 50))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("spec.slug is immutable: create a new McpServer to use another slug"))]
    pub slug: Option<String>,

    /// Display name of the server.
    #[schemars(length(min = 1, max = 255))]
    pub name: String,

    /// Description of the server; left as the API has it when absent.
    #[schemars(length(max = 500))]
    pub description: Option<String>,

    /// The McpIntegration resource (cluster-scoped) this server instantiates. The server waits
    /// until it is Ready and enables this server's workspace. Immutable.
    #[x_kube(validation = Rule::new("self == oldSelf").message("spec.integrationRef is immutable: create a new McpServer to instantiate another integration"))]
    pub integration_ref: Option<McpIntegrationRef>,

    /// Or: the UUID or slug of an existing remote MCP integration no McpIntegration manages.
    /// The server waits until it enables this server's workspace. Immutable.
    #[schemars(length(min = 1, max = 255))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("spec.integrationId is immutable: create a new McpServer to instantiate another integration"))]
    pub integration_id: Option<String>,

    /// The workspace (UUID or slug) the server belongs to; or name it by resource with
    /// `workspaceRef`. Immutable.
    #[schemars(length(min = 1, max = 255))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("spec.workspaceId is immutable: create a new McpServer to move it to another workspace"))]
    pub workspace_id: Option<String>,

    /// The Workspace resource whose workspace the server belongs to, instead of `workspaceId`
    /// (set one of the two): the UUID it recorded is used once it is Ready, and the
    /// Connection's grants apply to that workspace. Immutable.
    #[x_kube(validation = Rule::new("self == oldSelf").message("spec.workspaceRef is immutable: create a new McpServer to move it to another workspace"))]
    pub workspace_ref: Option<WorkspaceRef>,

    /// Whether users without a row of their own may use the server: `allow` or `deny`; left
    /// as the API has it when absent.
    pub default_user_access: Option<DefaultUserAccess>,

    /// Per-user access rows (by the API's user id). Each is set as written; a user removed
    /// from this list keeps the row the API has (the API deletes no row).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 100))]
    #[x_kube(validation = Rule::new("self.all(u, self.exists_one(o, o.userId == u.userId))").message("spec.userAccess names a user twice: each user has one row"))]
    pub user_access: Vec<McpUserAccessEntry>,

    /// What happens to the remote server when this resource is deleted: `Delete` (the
    /// default; the API's delete is hard) or `Orphan`.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,

    /// Management policy and Connection: the block every kind keeps.
    #[serde(flatten)]
    pub managed: ManagedSpec,
}
embeds_managed!(McpServerSpec, ManagedSpec);

/// An McpIntegration resource, by name.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct McpIntegrationRef {
    /// Its `metadata.name`.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// The access of users without a row of their own.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DefaultUserAccess {
    Allow,
    Deny,
}

impl DefaultUserAccess {
    /// As the API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Deny => "deny",
        }
    }
}

/// One user's access.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpUserAccessEntry {
    /// The API's user id (a global user id, or a `user_org_map_id`).
    #[schemars(length(min = 1, max = 255))]
    pub user_id: String,
    /// Whether the user may use the server.
    pub enabled: bool,
}

/// What aigw knows of the server.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = Reword(&[
    (
        "installation",
        "The installation (its `--installation-id`) that manages this object, \
         recorded by the operator before any other write of its own (see the other \
         kinds' `installation`).",
    ),
    ("createSettled", "The id of the last create intent whose outcome was recorded."),
]))]
pub struct McpServerStatus {
    /// Generation, conditions, create intent and claim: the block every kind keeps.
    #[serde(flatten)]
    pub managed: ManagedStatus,
    /// UUID of the remote server (what a Guardrail's `spec.mcpServers[].mcpServerRef` resolves
    /// to).
    pub id: Option<String>,
    /// Slug of the remote server.
    pub slug: Option<String>,
    /// The UUID of the MCP integration the server instantiates, as sent.
    pub integration_id: Option<String>,
    /// When aigw last wrote the server.
    pub last_applied_at: Option<String>,
}
embeds_managed!(McpServerStatus, ManagedStatus);

impl McpServerSpec {
    /// The workspace's UUID: `workspaceId`, or the one the operator resolved `workspaceRef` to
    /// (empty before it did).
    pub fn workspace(&self) -> &str {
        self.workspace_id.as_deref().unwrap_or_default()
    }

    /// The create body instantiating `integration` (its UUID or slug).
    pub fn create_request(&self, integration: &str) -> api::CreateMcpServerRequest {
        api::CreateMcpServerRequest {
            name: self.name.clone(),
            mcp_integration_id: integration.to_string(),
            workspace_id: Some(self.workspace().to_string()),
            slug: self.slug.clone(),
            description: self.description.clone(),
        }
    }

    /// The fields where `remote` differs (those a PUT can change), and the PUT that sends them.
    pub fn update_for(
        &self,
        remote: &api::McpServer,
    ) -> (Vec<&'static str>, api::UpdateMcpServerRequest) {
        let mut fields = Vec::new();
        let mut update = api::UpdateMcpServerRequest::default();
        if remote.name != self.name {
            fields.push("name");
            update.name = Some(self.name.clone());
        }
        if set_and_differs(&self.description, &remote.description) {
            fields.push("description");
            update.description = self.description.clone();
        }
        (fields, update)
    }

    /// Fixed fields where `remote` differs: its slug (when the spec names one), its workspace
    /// (when a list row told it), and its integration unless it is one of `integration` (the
    /// UUID and slug it may be read as; none known: not compared).
    pub fn immutable_conflicts(
        &self,
        remote: &api::McpServer,
        integration: &[&str],
    ) -> Vec<&'static str> {
        let instantiates = remote.mcp_integration_id.as_deref();
        let integration_slug = slug(&remote.mcp_integration_slug);
        let wanted = self.workspace();
        differing([
            ("slug", other_slug(self.slug.as_ref(), &remote.slug)),
            (
                "workspaceId",
                other_workspace(remote.workspace_id.as_deref(), wanted)
                    && slug(&remote.workspace_slug) != Some(wanted),
            ),
            (
                "integration",
                !integration.is_empty()
                    && instantiates.is_some_and(|id| !integration.contains(&id))
                    && integration_slug.is_none_or(|slug| !integration.contains(&slug)),
            ),
        ])
    }
}

/// A slug a row read back, unless it reads like a UUID: a workspace may be given a slug that
/// reads like another one's UUID, and must not be taken for that one.
fn slug(slug: &Option<String>) -> Option<&str> {
    slug.as_deref()
        .filter(|s| uuid::Uuid::parse_str(s).is_err())
}

/// The user-access PUT that brings `read` in line with the spec (`None`: nothing differs): the
/// rows the spec names whose state differs or that the first page does not show, and the
/// default when the spec sets one that differs. Other users' rows are never sent.
pub fn user_access_update(
    spec: &McpServerSpec,
    read: &api::McpUserAccess,
) -> Option<api::UpdateUserAccessRequest> {
    let row = |user: &str| {
        read.page
            .data
            .iter()
            .find(|r| r.get("user_id").and_then(|u| u.as_str()) == Some(user))
            .and_then(|r| r.get("enabled").and_then(|e| e.as_bool()))
    };
    let user_access: Vec<api::UserAccessUpdate> = spec
        .user_access
        .iter()
        .filter(|want| row(&want.user_id) != Some(want.enabled))
        .map(|want| api::UserAccessUpdate {
            user_id: want.user_id.clone(),
            enabled: want.enabled,
        })
        .collect();
    let default = spec
        .default_user_access
        .map(DefaultUserAccess::as_str)
        .filter(|d| *d != read.default_user_access);
    match user_access.is_empty() && default.is_none() {
        true => None,
        false => Some(api::UpdateUserAccessRequest {
            user_access,
            default_user_access: default.map(str::to_string),
        }),
    }
}

super::common::governed!(McpServer, "MCP server", DeletionPolicy::Orphan, CreatesAs slug);

super::common::recorded!(McpServerStatus, id or slug);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec() -> McpServerSpec {
        serde_json::from_value(json!({
            "name": "Linear for payments", "slug": "linear-pay", "description": "Linear",
            "workspaceId": "ws-a", "integrationRef": {"name": "linear"},
            "defaultUserAccess": "deny",
            "userAccess": [{"userId": "u1", "enabled": true}, {"userId": "u2", "enabled": false}]
        }))
        .unwrap()
    }

    fn remote(value: serde_json::Value) -> api::McpServer {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn only_name_and_description_are_updated_and_the_rest_is_fixed() {
        let read = remote(
            json!({"id": "s1", "slug": "linear-pay", "name": "Linear for payments",
            "description": "Linear", "mcp_integration_id": "i1", "workspace_id": "ws-a"}),
        );
        let (fields, _) = spec().update_for(&read);
        assert!(fields.is_empty());
        assert!(spec().immutable_conflicts(&read, &["i1"]).is_empty());
        let read = remote(
            json!({"id": "s1", "slug": "other", "name": "x", "description": "y",
            "mcp_integration_id": "i2", "workspace_id": "ws-b"}),
        );
        let (fields, update) = spec().update_for(&read);
        assert_eq!(fields, ["name", "description"]);
        assert_eq!(update.name.as_deref(), Some("Linear for payments"));
        assert_eq!(
            spec().immutable_conflicts(&read, &["i1", "linear"]),
            ["slug", "workspaceId", "integration"]
        );
        // The detail carries no workspace: nothing to compare.
        let detail = remote(json!({"id": "s1", "slug": "linear-pay", "name": "x",
            "mcp_integration_id": "i1"}));
        assert!(spec().immutable_conflicts(&detail, &["i1"]).is_empty());
    }

    #[test]
    fn user_access_sends_only_the_rows_and_default_that_differ() {
        let read: api::McpUserAccess = serde_json::from_value(json!({
            "default_user_access": "allow", "data": [
                {"user_id": "u1", "enabled": true}, {"user_id": "u3", "enabled": false}]
        }))
        .unwrap();
        let update = user_access_update(&spec(), &read).unwrap();
        let rows: Vec<(&str, bool)> = update
            .user_access
            .iter()
            .map(|u| (u.user_id.as_str(), u.enabled))
            .collect();
        assert_eq!(rows, [("u2", false)]);
        assert_eq!(update.default_user_access.as_deref(), Some("deny"));
        let read: api::McpUserAccess = serde_json::from_value(json!({
            "default_user_access": "deny", "data": [
                {"user_id": "u1", "enabled": true}, {"user_id": "u2", "enabled": false}]
        }))
        .unwrap();
        assert_eq!(user_access_update(&spec(), &read), None);
    }
}
