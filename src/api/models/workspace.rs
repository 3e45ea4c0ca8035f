//! Workspaces (`/workspaces`, reads on either plane, writes on the admin plane) and the SCM IAM
//! scopes a workspace's creation goes through (`/iam/v1/scopes`): create the scope, create the
//! workspace naming it (`scope_name`), then replace the scope with one that binds the
//! workspace's slug ([`IamScopeWrite::binding`]). Until that bind the workspace is invisible on
//! the data plane.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use serde_with::skip_serializing_none;

use super::de;
use super::query::{self, ListQuery};
use super::validate::{self, Validate};
use crate::api::error::ApiError;

/// Which base a workspace read goes through: the data plane (`/ai_gw/v2`) shows only workspaces
/// the caller's scope binds; the admin plane (`/ai_gw/admin/v2`) shows all and takes the writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ApiPlane {
    Data,
    #[default]
    Admin,
}

/// A workspace as list rows and the detail return it (a row lacks the detail's settings).
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Workspace {
    pub id: String,
    #[serde(default)]
    pub slug: String,
    /// As the API shows it: with the icon in front when there is one ([`Workspace::plain_name`]).
    #[serde(default)]
    pub name: String,
    pub description: Option<String>,
    pub icon: Option<String>,
    pub scope_name: Option<String>,
    /// 0/1 on the wire.
    #[serde(default, deserialize_with = "de::opt_flag")]
    pub is_default: Option<bool>,
    /// `active` or `archived` on list rows; the detail may say `null` for an active one.
    pub status: Option<String>,
    /// `{config_id, metadata}` (detail only).
    pub defaults: Option<Value>,
    /// `null` or an array of at most one usage policy (detail only).
    pub usage_limits: Option<Value>,
    pub rate_limits: Option<Value>,
    pub created_at: Option<String>,
    pub last_updated_at: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Workspace {
    /// The keys it can be named by: its UUID, then its slug (empty ones left out).
    pub fn keys(&self) -> Vec<String> {
        let keys = [self.id.clone(), self.slug.clone()].into_iter();
        keys.filter(|k| !k.is_empty()).collect()
    }

    /// `name` without the icon the API puts in front of it.
    pub fn plain_name(&self) -> &str {
        match self.icon.as_deref().filter(|i| !i.is_empty()) {
            Some(icon) => self
                .name
                .strip_prefix(icon)
                .and_then(|rest| rest.strip_prefix(' '))
                .unwrap_or(&self.name),
            None => &self.name,
        }
    }
}

/// `GET /workspaces` filters.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WorkspacesListQuery {
    /// `active` (the API's default) or `archived`.
    pub status: Option<String>,
    /// A case-sensitive part of the name.
    pub name: Option<String>,
    pub exact_name: Option<String>,
    pub page_size: Option<u32>,
}

impl ListQuery for WorkspacesListQuery {
    fn to_pairs(&self) -> Vec<(&'static str, String)> {
        query::filters([
            ("status", self.status.clone()),
            ("name", self.name.clone()),
            ("exact_name", self.exact_name.clone()),
            ("page_size", query::number(self.page_size)),
        ])
    }
}

/// `POST /workspaces` (admin plane). `scope_name` must name an IAM scope that exists.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CreateWorkspaceRequest {
    pub name: String,
    pub scope_name: String,
    pub description: Option<String>,
    pub icon: Option<String>,
    /// `{config_id, metadata, allow_config_override}`.
    pub defaults: Option<Value>,
    pub users: Option<Vec<String>>,
    pub usage_limits: Option<Vec<Value>>,
    pub rate_limits: Option<Vec<Value>>,
}

impl Validate for CreateWorkspaceRequest {
    fn validate(&self) -> Result<(), ApiError> {
        validate::not_blank([("name", &self.name), ("scope_name", &self.scope_name)])?;
        validate::max_chars("description", self.description.as_deref(), 1024)?;
        if self.usage_limits.as_ref().is_some_and(|u| u.len() > 1) {
            return Err(ApiError::validation(
                "usage_limits",
                "one usage policy per workspace",
            ));
        }
        Ok(())
    }
}

/// `PUT /workspaces/{ref}` (admin plane; answers `{}`). Partial; the clearing forms are
/// explicit: [`UpdateWorkspaceRequest::clear_defaults`], `usage_limits: Some(None)` (sends
/// `null`; `[]` changes nothing), `rate_limits: Some(vec![])`, `icon: Some("")`. A blank
/// description does not clear it.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UpdateWorkspaceRequest {
    pub name: Option<String>,
    pub description: Option<String>,
    pub icon: Option<String>,
    pub defaults: Option<Value>,
    #[serde(default, deserialize_with = "de::double_option")]
    pub usage_limits: Option<Option<Vec<Value>>>,
    pub rate_limits: Option<Vec<Value>>,
}

impl UpdateWorkspaceRequest {
    /// The `defaults` that clear the default config and metadata.
    pub fn clear_defaults() -> Value {
        serde_json::json!({"config_id": null, "metadata": {}})
    }
}

impl Validate for UpdateWorkspaceRequest {
    fn validate(&self) -> Result<(), ApiError> {
        validate::some_update(self, "names no field to update")?;
        validate::not_blank_if_set("name", self.name.as_deref())?;
        validate::max_chars("description", self.description.as_deref(), 1024)
    }
}

/// The create receipt: most of the record (no `status`, `is_default`, `icon` or limits).
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkspaceCreated {
    pub id: String,
    #[serde(default)]
    pub slug: String,
    pub scope_name: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// An SCM IAM scope, keyed by `name` (`id` is `<name>:<tsg_id>` and not a path key).
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IamScope {
    pub name: String,
    /// `""` when unset.
    #[serde(default)]
    pub description: String,
    #[serde(default, deserialize_with = "de::null_as_empty")]
    pub resources: Vec<IamScopeResource>,
    pub tsg_id: Option<String>,
    pub id: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl IamScope {
    /// True when the scope binds the workspace with this slug.
    pub fn binds(&self, workspace_slug: &str) -> bool {
        self.resources
            .iter()
            .any(|r| r.resource_type == "workspace" && r.resource_id == workspace_slug)
    }
}

/// One resource of a scope: a workspace is `{resource_type: "workspace", resource_id: <slug>}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IamScopeResource {
    pub resource_type: String,
    pub resource_id: String,
    #[serde(default)]
    pub metadata: Vec<Value>,
}

/// `POST /iam/v1/scopes` and `PUT /iam/v1/scopes/{name}` (a full replacement: what is left out
/// is gone).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct IamScopeWrite {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub resources: Vec<IamScopeResource>,
}

impl IamScopeWrite {
    /// The replacement that binds `workspace_slug` to the scope, keeping `description`.
    pub fn binding(name: &str, description: &str, workspace_slug: &str) -> Self {
        Self {
            name: name.to_owned(),
            description: description.to_owned(),
            resources: vec![IamScopeResource {
                resource_type: "workspace".to_owned(),
                resource_id: workspace_slug.to_owned(),
                metadata: Vec::new(),
            }],
        }
    }
}

impl Validate for IamScopeWrite {
    fn validate(&self) -> Result<(), ApiError> {
        validate::not_blank([("name", &self.name)])
    }
}

/// `GET /iam/v1/scopes` → `{count, items}` (not paged).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IamScopeList {
    #[serde(default)]
    pub count: u64,
    #[serde(default, deserialize_with = "de::null_as_empty")]
    pub items: Vec<IamScope>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_icon_the_api_prepends_is_taken_off_the_name() {
        let ws: Workspace = serde_json::from_value(serde_json::json!({
            "id": "w", "slug": "ws-a", "name": "🚀 Payments", "icon": "🚀", "is_default": 0
        }))
        .unwrap();
        assert_eq!(ws.plain_name(), "Payments");
        assert_eq!(ws.is_default, Some(false));
        let bare: Workspace =
            serde_json::from_value(serde_json::json!({"id": "w", "name": "Payments"})).unwrap();
        assert_eq!(bare.plain_name(), "Payments");
    }

    #[test]
    fn clearing_usage_limits_sends_null_and_an_empty_update_is_refused() {
        let clear = UpdateWorkspaceRequest {
            usage_limits: Some(None),
            rate_limits: Some(vec![]),
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_value(&clear).unwrap(),
            serde_json::json!({"usage_limits": null, "rate_limits": []})
        );
        assert!(UpdateWorkspaceRequest::default().validate().is_err());
    }
}
