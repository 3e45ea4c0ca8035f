//! Deployments: registered self-hosted gateways (`/ai_gw/admin/v2/deployments`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use serde_with::skip_serializing_none;

use super::de;
use super::open_enum::open_enum;
use super::validate::{self, Validate};
use crate::api::error::ApiError;
use crate::api::secret::SecretString;

/// `production` or `non_production`; the API accepts nothing else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeploymentType {
    Production,
    NonProduction,
}

/// `active` or `archived`; deleting a deployment archives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeploymentStatus {
    Active,
    Archived,
}

open_enum! {
    /// Whether the gateway's heartbeat reaches the control plane.
    pub enum ConnectionStatus {
        Healthy = "healthy",
        Unhealthy = "unhealthy",
        Unknown = "unknown",
    }
}

pub type Tags = BTreeMap<String, String>;

/// The fields of a deployment answer this client does not model, kept so that printing the model
/// shows what the API sent. Deployment answers carry secrets and a field added later may be one,
/// so `Debug` shows the keys only, as [`SecretString`] does for the fields it knows.
#[derive(Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SensitiveFields(pub Map<String, Value>);

impl std::ops::Deref for SensitiveFields {
    type Target = Map<String, Value>;

    fn deref(&self) -> &Map<String, Value> {
        &self.0
    }
}

impl std::ops::DerefMut for SensitiveFields {
    fn deref_mut(&mut self) -> &mut Map<String, Value> {
        &mut self.0
    }
}

impl std::fmt::Debug for SensitiveFields {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.0.keys().map(|key| (key, format_args!("***"))))
            .finish()
    }
}

/// A row of the deployment list.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeploymentSummary {
    pub id: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub slug: String,
    #[serde(rename = "type")]
    pub deployment_type: Option<DeploymentType>,
    pub status: Option<DeploymentStatus>,
    #[serde(default, deserialize_with = "de::opt_flag")]
    pub is_default: Option<bool>,
    pub connection_status: Option<ConnectionStatus>,
    pub created_by: Option<String>,
    pub created_at: Option<String>,
    pub last_updated_at: Option<String>,
    pub last_synced_at: Option<String>,
    pub last_resynced_at: Option<String>,
    pub tags: Option<Tags>,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: SensitiveFields,
}

/// A deployment as `GET /deployments/{id}` returns it. `client_auth` and `credentials.password`
/// come back masked here; only create and `rotate_auth` return the real values. Fields neither
/// struct models are kept in `summary.extra` (one catch-all per flattened record: two would each
/// take every unknown field).
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Deployment {
    #[serde(flatten)]
    pub summary: DeploymentSummary,
    pub auth_settings: Option<DeploymentAuthSettings>,
    pub deployment_config: Option<Value>,
    #[serde(default, deserialize_with = "de::null_as_empty")]
    pub workspaces: Vec<WorkspaceRef>,
    pub credentials: Option<Credentials>,
    pub client_auth: Option<SecretString>,
}

impl std::ops::Deref for Deployment {
    type Target = DeploymentSummary;

    fn deref(&self) -> &DeploymentSummary {
        &self.summary
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkspaceRef {
    pub id: String,
    #[serde(default)]
    pub slug: String,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: SensitiveFields,
}

/// Registry credentials. `Debug` hides the password.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Credentials {
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub password: SecretString,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: SensitiveFields,
}

/// `auth_settings` as reads return it; flags arrive as `0`/`1`.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct DeploymentAuthSettings {
    pub gateway_base_url: Option<String>,
    pub mcp_gateway_base_url: Option<String>,
    pub private_link_endpoint: Option<String>,
    #[serde(default, deserialize_with = "de::opt_flag")]
    pub use_private_link_proxy: Option<bool>,
    #[serde(default, deserialize_with = "de::opt_flag")]
    pub is_dataservice_hosted: Option<bool>,
    #[serde(default, deserialize_with = "de::opt_flag")]
    pub is_playground_proxy_allowed: Option<bool>,
    #[serde(default, deserialize_with = "de::opt_flag")]
    pub disable_service_gateway: Option<bool>,
    pub workspaces_allowed: Option<Vec<String>>,
    pub jwt_subs_allowed: Option<Vec<String>>,
    pub jwt_sub_workspace_mapping: Option<BTreeMap<String, String>>,
    #[serde(default, deserialize_with = "de::opt_flag")]
    pub allow_all_workspaces: Option<bool>,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: SensitiveFields,
}

/// `auth_settings` in create and update bodies.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct DeploymentAuthSettingsInput {
    pub gateway_base_url: Option<String>,
    pub mcp_gateway_base_url: Option<String>,
    pub workspaces_allowed: Option<Vec<String>>,
    pub jwt_subs_allowed: Option<Vec<String>>,
    pub jwt_sub_workspace_mapping: Option<BTreeMap<String, String>>,
    pub allow_all_workspaces: Option<bool>,
    /// Update only: workspaces to take off `workspaces_allowed`.
    pub remove_workspaces_allowed: Option<Vec<String>>,
    /// Update only: subjects to take off `jwt_subs_allowed`.
    pub remove_subs_allowed: Option<Vec<String>>,
}

/// `POST /deployments`. Only `name` is required.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CreateDeploymentRequest {
    pub name: String,
    /// The numeric TSG id as a string on live tenants.
    pub organisation_id: Option<String>,
    /// 1 to 50 characters.
    pub slug: Option<String>,
    #[serde(rename = "type")]
    pub deployment_type: Option<DeploymentType>,
    pub deployment_config: Option<Value>,
    pub is_default: Option<bool>,
    pub auth_settings: Option<DeploymentAuthSettingsInput>,
    pub tags: Option<Tags>,
}

/// The create receipt: the only time `client_auth` and the password are readable.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeploymentCreated {
    pub id: String,
    pub slug: Option<String>,
    pub organisation_id: Option<String>,
    pub client_auth: SecretString,
    pub credentials: Credentials,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: SensitiveFields,
}

/// `PUT /deployments/{id}`. No field is required, but the body must not be empty.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UpdateDeploymentRequest {
    pub name: Option<String>,
    #[serde(rename = "type")]
    pub deployment_type: Option<DeploymentType>,
    pub status: Option<DeploymentStatus>,
    pub deployment_config: Option<Value>,
    pub is_default: Option<bool>,
    /// Re-issues `client_auth` and the credentials, returned once in the answer.
    pub rotate_auth: Option<bool>,
    /// Replace the allow lists instead of merging into them.
    pub override_existing: Option<bool>,
    pub auth_settings: Option<DeploymentAuthSettingsInput>,
    pub tags: Option<Tags>,
}

/// The update answer; carries new secrets after `rotate_auth: true`. Masked values (`****`), which
/// an answer without rotation may echo, read as `None`, so `Some` always means a usable secret.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(from = "RawDeploymentUpdated")]
pub struct DeploymentUpdated {
    pub id: Option<String>,
    pub client_auth: Option<SecretString>,
    pub credentials: Option<Credentials>,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: SensitiveFields,
}

#[derive(Deserialize)]
struct RawDeploymentUpdated {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    client_auth: Option<SecretString>,
    #[serde(default)]
    credentials: Option<Credentials>,
    #[serde(flatten)]
    extra: SensitiveFields,
}

impl From<RawDeploymentUpdated> for DeploymentUpdated {
    fn from(raw: RawDeploymentUpdated) -> Self {
        Self {
            id: raw.id,
            client_auth: raw.client_auth.filter(|s| !s.is_masked()),
            credentials: raw.credentials.filter(|c| !c.password.is_masked()),
            extra: raw.extra,
        }
    }
}

/// Filters of `GET /deployments`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DeploymentListQuery {
    pub status: Option<DeploymentStatus>,
    pub deployment_type: Option<DeploymentType>,
    pub search: Option<String>,
    pub workspace_slug: Vec<String>,
    pub organisation_id: Option<String>,
    /// Only deployments carrying all of these tags (`tags[KEY]=VALUE`, deepObject).
    pub tags: BTreeMap<String, String>,
}

impl DeploymentListQuery {
    pub(crate) fn to_pairs(&self) -> Vec<(String, String)> {
        let mut pairs = Vec::new();
        if let Some(status) = self.status {
            pairs.push(("status".to_string(), enum_str(&status)));
        }
        if let Some(t) = self.deployment_type {
            pairs.push(("type".to_string(), enum_str(&t)));
        }
        if let Some(search) = &self.search {
            pairs.push(("search".to_string(), search.clone()));
        }
        for slug in &self.workspace_slug {
            pairs.push(("workspace_slug".to_string(), slug.clone()));
        }
        if let Some(org) = &self.organisation_id {
            pairs.push(("organisation_id".to_string(), org.clone()));
        }
        for (key, value) in &self.tags {
            pairs.push((format!("tags[{key}]"), value.clone()));
        }
        pairs
    }
}

/// The wire string of a unit enum.
pub(crate) fn enum_str<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(Value::String(s)) => s,
        _ => String::new(),
    }
}

impl Validate for CreateDeploymentRequest {
    fn validate(&self) -> Result<(), ApiError> {
        validate::required([("name", &self.name)])?;
        if let Some(slug) = &self.slug {
            validate::max_chars("slug", Some(slug), 50)?;
            if slug.is_empty() {
                return Err(ApiError::validation("slug", "must not be empty"));
            }
        }
        Ok(())
    }
}

impl Validate for UpdateDeploymentRequest {
    fn validate(&self) -> Result<(), ApiError> {
        validate::some_update(self, "must set at least one field")
    }
}
