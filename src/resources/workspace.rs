//! The `Workspace` kind: the organisation's workspace (cluster-scoped), created the way SCM's
//! console does it (an IAM scope, the workspace naming it, the scope bound to the workspace's
//! slug), or adopted by slug.

use super::common::{DeletionPolicy, set_and_differs};
use std::collections::BTreeMap;

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::rules;
use serde_json::{Map, Value, json};

use super::limits::{RateLimit, UsageLimits, covers};
use super::managed_spec::ManagedSpec;
use super::managed_status::{CREATE_SETTLED, ManagedStatus, Reword, embeds_managed};
use crate::api;

/// A workspace (`/workspaces`), where every namespaced object of the gateway lives. Created
/// by aigw in three calls (an IAM scope it owns, the workspace naming that scope, the scope
/// bound to the workspace's slug), or adopted by `spec.slug`. Deleting it archives it (the API
/// has no hard delete), after the aigw objects that name it are gone.
// kube's printcolumn(...) lists repeat `type_ = "string"`, which this lint misreads.
#[allow(clippy::duplicated_attributes)]
#[skip_serializing_none]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "aigw.io",
    doc = "A workspace of the organisation (cluster-scoped), which the gateway's namespaced objects live in, kept in line with the management API by aigw.",
    version = "v1alpha1",
    kind = "Workspace",
    plural = "workspaces",
    shortname = "aigwws",
    category = "aigw",
    status = "WorkspaceStatus",
    printcolumn(name = "Slug", type_ = "string", json_path = ".status.slug"),
    printcolumn(name = "ID", type_ = "string", json_path = ".status.id")
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = rules::set_at_creation("slug", "Workspace"))]
#[x_kube(validation = rules::same_connection("Workspace"))]
#[schemars(transform = Reword(&[
    (
        "connectionRef",
        "The Connection used to reach the management API; defaults to `default`. \
         Workspaces are written on the admin plane, and the IAM scope on the \
         Connection's IAM host.",
    ),
]))]
pub struct WorkspaceSpec {
    /// The slug of an existing workspace to adopt (the default workspace included). Absent,
    /// aigw creates the workspace, with an IAM scope of its own, and records the slug the API
    /// makes in `status.slug`. Only set at creation.
    #[schemars(regex(pattern = r"^[a-zA-Z0-9_-]+$"), length(min = 1, max = 255))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("spec.slug is immutable: create a new Workspace to adopt another workspace"))]
    pub slug: Option<String>,

    /// Display name of the workspace.
    #[schemars(length(min = 1, max = 255))]
    pub name: String,

    /// Description of the workspace; left as the API has it when absent. The API cannot clear
    /// a description (a blank one keeps the previous), so it cannot be blank here either.
    #[schemars(length(min = 1, max = 1024))]
    pub description: Option<String>,

    /// An icon (an emoji) shown in front of the name; `""` removes it; left as the API has it
    /// when absent.
    #[schemars(length(max = 16))]
    pub icon: Option<String>,

    /// The workspace's defaults (the default config and metadata of its requests). Absent: left
    /// as the API has them. Present, they are exactly what is given: `defaults: {}` clears the
    /// default config and the default metadata.
    pub defaults: Option<WorkspaceDefaults>,

    /// The workspace's budget: at most one usage policy. Absent: left as the API has it; `[]`
    /// removes it.
    #[schemars(length(max = 1))]
    pub usage_limits: Option<Vec<UsageLimits>>,

    /// The workspace's rate limits. Absent: left as the API has them; `[]` removes them.
    #[schemars(length(max = 16))]
    pub rate_limits: Option<Vec<RateLimit>>,

    /// What happens to the remote workspace when this resource is deleted: `Delete` (the
    /// default) archives it (the API keeps archived workspaces; there is no hard delete) and
    /// deletes the IAM scope aigw made for it; `Orphan` leaves both. The default workspace is
    /// never archived: deleting a Workspace that adopted it with `Delete` is refused
    /// (`DefaultWorkspace`) until `deletionPolicy` is `Orphan`. While aigw objects still name
    /// the workspace it is not archived (`StillReferenced`, naming them).
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,

    /// Management policy and Connection: the block every kind keeps.
    #[serde(flatten)]
    pub managed: ManagedSpec,
}
embeds_managed!(WorkspaceSpec, ManagedSpec);

/// The defaults of a workspace's requests.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!(has(self.configRef) && has(self.configId))").message("spec.defaults: set configRef or configId, not both"))]
pub struct WorkspaceDefaults {
    /// The Config resource whose config is the default (its recorded UUID is sent). A Config
    /// in this workspace exists only after the workspace does: the workspace is created first
    /// and the default set once the Config is Ready (until then the Workspace reports
    /// `ReferenceNotReady`).
    pub config_ref: Option<WorkspaceConfigRef>,
    /// Or the default config by its UUID.
    #[schemars(length(min = 1, max = 255))]
    pub config_id: Option<String>,
    /// Metadata added to every request of the workspace (string values).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
}

/// A Config resource, by namespace and name.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct WorkspaceConfigRef {
    /// Namespace of the Config.
    #[schemars(length(min = 1, max = 63))]
    pub namespace: String,
    /// Name of the Config.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// What aigw knows of the workspace.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = Reword(&[CREATE_SETTLED]))]
pub struct WorkspaceStatus {
    /// Generation, conditions, create intent and claim: the block every kind keeps.
    #[serde(flatten)]
    pub managed: ManagedStatus,
    /// UUID of the remote workspace (what namespaced objects' `workspaceId` names).
    pub id: Option<String>,
    /// Slug of the remote workspace.
    pub slug: Option<String>,
    /// The IAM scope the workspace names (`scope_name`): who is granted it sees the workspace.
    pub scope_name: Option<String>,
    /// True for the organisation's default workspace (never archived).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_default: bool,
    /// When aigw last wrote the workspace.
    pub last_applied_at: Option<String>,
}
embeds_managed!(WorkspaceStatus, ManagedStatus);

/// The default config a write sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DefaultConfig {
    /// None: `config_id: null`.
    Clear,
    /// This config (UUID).
    Id(String),
    /// Named by a Config resource that has no remote config yet: not sent, not compared.
    Pending,
}

/// The settings of a workspace as the spec and its inputs make them (what the API can write).
#[derive(Debug, Clone, PartialEq)]
pub struct WorkspaceSettings {
    pub name: String,
    pub description: Option<String>,
    pub icon: Option<String>,
    /// `None`: the defaults are not managed.
    pub defaults: Option<(DefaultConfig, BTreeMap<String, String>)>,
    /// `None`: not managed; `Some(None)`: none (cleared with `null`).
    pub usage_limits: Option<Option<Value>>,
    /// `None`: not managed; `Some([])`: none.
    pub rate_limits: Option<Vec<Value>>,
}

impl WorkspaceSpec {
    /// The Config resource `defaults.configRef` names, if any.
    pub fn default_config_ref(&self) -> Option<&WorkspaceConfigRef> {
        self.defaults.as_ref()?.config_ref.as_ref()
    }

    /// The settings, with the default config `config` resolves to.
    pub fn settings(&self, config: Option<DefaultConfig>) -> WorkspaceSettings {
        let defaults = self.defaults.as_ref().map(|d| {
            let config = match (&d.config_id, config) {
                (Some(id), _) => DefaultConfig::Id(id.clone()),
                (None, Some(resolved)) => resolved,
                (None, None) => DefaultConfig::Clear,
            };
            (config, d.metadata.clone())
        });
        WorkspaceSettings {
            name: self.name.clone(),
            description: self.description.clone(),
            icon: self.icon.clone(),
            defaults,
            usage_limits: self
                .usage_limits
                .as_ref()
                .map(|u| u.first().map(UsageLimits::to_api)),
            rate_limits: self
                .rate_limits
                .as_ref()
                .map(|r| r.iter().map(RateLimit::to_api).collect()),
        }
    }
}

impl WorkspaceSettings {
    /// `defaults` as a write sends it (`None` when not managed).
    fn defaults_body(&self) -> Option<Value> {
        let (config, metadata) = self.defaults.as_ref()?;
        let mut body = json!({"metadata": metadata});
        match config {
            DefaultConfig::Clear => body["config_id"] = Value::Null,
            DefaultConfig::Id(id) => body["config_id"] = json!(id),
            DefaultConfig::Pending => {}
        }
        Some(body)
    }

    /// The create body, naming the IAM scope `scope_name` (which must exist).
    pub fn create_request(&self, scope_name: &str) -> api::CreateWorkspaceRequest {
        api::CreateWorkspaceRequest {
            name: self.name.clone(),
            scope_name: scope_name.to_owned(),
            description: self.description.clone(),
            icon: self.icon.clone().filter(|i| !i.is_empty()),
            defaults: self.defaults_body(),
            users: None,
            usage_limits: self.usage_limits.clone().flatten().map(|u| vec![u]),
            rate_limits: self.rate_limits.clone().filter(|r| !r.is_empty()),
        }
    }

    /// The update body: every managed field, in the API's explicit clearing forms.
    pub fn update_request(&self) -> api::UpdateWorkspaceRequest {
        api::UpdateWorkspaceRequest {
            name: Some(self.name.clone()),
            description: self.description.clone(),
            icon: self.icon.clone(),
            defaults: self.defaults_body(),
            usage_limits: self
                .usage_limits
                .clone()
                .map(|usage| usage.map(|u| vec![u])),
            rate_limits: self.rate_limits.clone(),
        }
    }

    /// The fields where `remote` differs, as far as a read can tell.
    pub fn diff(&self, remote: &api::Workspace) -> Vec<&'static str> {
        let mut fields = Vec::new();
        if remote.plain_name() != self.name {
            fields.push("name");
        }
        if set_and_differs(&self.description, &remote.description) {
            fields.push("description");
        }
        let icon = remote.icon.as_deref().unwrap_or_default();
        if self.icon.as_deref().is_some_and(|wanted| wanted != icon) {
            fields.push("icon");
        }
        if let Some((config, metadata)) = &self.defaults {
            let read = remote.defaults.as_ref();
            let read_config = read
                .and_then(|d| d.get("config_id"))
                .and_then(Value::as_str);
            let config_differs = match config {
                DefaultConfig::Clear => read_config.is_some(),
                DefaultConfig::Id(id) => read_config != Some(id.as_str()),
                DefaultConfig::Pending => false,
            };
            let read_metadata: Map<String, Value> = read
                .and_then(|d| d.get("metadata"))
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            let wanted: Map<String, Value> = metadata
                .iter()
                .map(|(k, v)| (k.clone(), json!(v)))
                .collect();
            if config_differs || read_metadata != wanted {
                fields.push("defaults");
            }
        }
        if let Some(usage) = &self.usage_limits {
            let read = remote
                .usage_limits
                .as_ref()
                .filter(|u| !u.is_null() && u.as_array().is_none_or(|a| !a.is_empty()));
            let differs = match usage {
                None => read.is_some(),
                Some(wanted) => !covers(read, wanted),
            };
            if differs {
                fields.push("usageLimits");
            }
        }
        if let Some(rates) = &self.rate_limits {
            let read = remote
                .rate_limits
                .as_ref()
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let same = read.len() == rates.len()
                && read
                    .iter()
                    .zip(rates)
                    .all(|(have, wanted)| covers(Some(have), wanted));
            if !same {
                fields.push("rateLimits");
            }
        }
        fields
    }
}

super::common::governed!(Workspace, "workspace", DeletionPolicy::Orphan, Adopts slug);

super::common::recorded!(WorkspaceStatus, id or slug);

/// The IAM scope aigw makes for the Workspace named `name` whose ownership token is `token`:
/// `ws_<name>_<6 characters of the token>`, SCM's own naming, fixed for the resource's life (a
/// Kubernetes name and uid never change), so a retried create finds the scope again.
pub fn scope_name(name: &str, token: &str) -> String {
    let name: String = name
        .chars()
        .map(|c| match c.is_ascii_alphanumeric() {
            true => c.to_ascii_lowercase(),
            false => '_',
        })
        .take(40)
        .collect();
    let tail: String = token
        .rsplit(':')
        .next()
        .unwrap_or(token)
        .chars()
        .take(6)
        .collect();
    format!("ws_{name}_{tail}")
}

/// The description of an IAM scope aigw made: the resource's ownership token, which only the
/// operator (holding the hash key) can compute, so a scope is never taken for ours without it.
pub fn scope_marker(token: &str) -> String {
    format!("managed by aigw; owner token {token}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(value: Value) -> WorkspaceSpec {
        serde_json::from_value(value).unwrap()
    }

    fn remote(value: Value) -> api::Workspace {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_read_that_matches_differs_in_nothing() {
        let spec = spec(json!({
            "name": "Payments", "description": "the payments team", "icon": "🚀",
            "defaults": {"configId": "c1", "metadata": {"team": "pay"}},
            "usageLimits": [{"creditLimit": 100, "type": "cost"}],
            "rateLimits": [{"type": "requests", "unit": "rpm", "value": 60}]
        }));
        let read = remote(json!({
            "id": "w1", "slug": "ws-pay", "name": "🚀 Payments", "icon": "🚀",
            "description": "the payments team",
            "defaults": {"config_id": "c1", "metadata": {"team": "pay"}},
            "usage_limits": [{"id": "u1", "credit_limit": 100.0, "type": "cost"}],
            "rate_limits": [{"type": "requests", "unit": "rpm", "value": 60}]
        }));
        assert!(spec.settings(None).diff(&read).is_empty());
    }

    #[test]
    fn every_managed_field_is_compared_and_unmanaged_ones_are_not() {
        let managed = spec(json!({
            "name": "Payments", "description": "d", "icon": "", "defaults": {},
            "usageLimits": [], "rateLimits": []
        }));
        let read = remote(json!({
            "id": "w1", "name": "🚀 Pay", "icon": "🚀", "description": "other",
            "defaults": {"config_id": "c1", "metadata": {}},
            "usage_limits": [{"credit_limit": 5, "type": "cost"}],
            "rate_limits": [{"type": "requests", "unit": "rpm", "value": 60}]
        }));
        assert_eq!(
            managed.settings(None).diff(&read),
            [
                "name",
                "description",
                "icon",
                "defaults",
                "usageLimits",
                "rateLimits"
            ]
        );
        let unmanaged = spec(json!({"name": "Pay"}));
        assert!(unmanaged.settings(None).diff(&read).is_empty());
    }

    #[test]
    fn a_pending_default_config_is_neither_sent_nor_compared() {
        let spec = spec(json!({"name": "Pay", "defaults": {
            "configRef": {"namespace": "pay", "name": "main"}}}));
        let settings = spec.settings(Some(DefaultConfig::Pending));
        let read = remote(json!({"id": "w1", "name": "Pay",
            "defaults": {"config_id": null, "metadata": {}}}));
        assert!(settings.diff(&read).is_empty());
        let body = serde_json::to_value(settings.update_request()).unwrap();
        assert_eq!(body["defaults"], json!({"metadata": {}}));
    }

    #[test]
    fn clearing_uses_the_apis_explicit_forms() {
        let spec = spec(json!({"name": "Pay", "icon": "", "defaults": {},
            "usageLimits": [], "rateLimits": []}));
        let body = serde_json::to_value(spec.settings(None).update_request()).unwrap();
        assert_eq!(
            body,
            json!({"name": "Pay", "icon": "",
                   "defaults": {"config_id": null, "metadata": {}},
                   "usage_limits": null, "rate_limits": []})
        );
        let create = serde_json::to_value(spec.settings(None).create_request("ws_s")).unwrap();
        assert_eq!(
            create,
            json!({"name": "Pay", "scope_name": "ws_s",
                   "defaults": {"config_id": null, "metadata": {}}})
        );
    }

    #[test]
    fn the_scope_name_is_scms_form_fixed_by_name_and_token() {
        let token = "hmac-sha256:0a1b2c3d4e5f";
        assert_eq!(scope_name("team-pay.eu", token), "ws_team_pay_eu_0a1b2c");
        assert_eq!(
            scope_name("team-pay.eu", token),
            scope_name("team-pay.eu", token)
        );
        assert!(scope_marker(token).contains(token));
    }
}
