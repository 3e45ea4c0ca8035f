//! Configs: named gateway routing documents (`/ai_gw/v2/configs`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use serde_with::skip_serializing_none;

use super::de;
use super::validate::{self, Validate};
use crate::api::error::ApiError;

/// A row of the config list. Rows carry no `config` document.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigSummary {
    pub id: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub slug: String,
    /// `active` is the value seen; the API has no enum.
    #[serde(default)]
    pub status: String,
    pub workspace_id: Option<String>,
    pub organisation_id: Option<String>,
    #[serde(default, deserialize_with = "de::opt_flag")]
    pub is_default: Option<bool>,
    pub owner_id: Option<String>,
    pub updated_by: Option<String>,
    pub created_at: Option<String>,
    pub last_updated_at: Option<String>,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The part of a config list row the drift check needs: what identifies the config and when it
/// was created and last changed. Every other field of the row is skipped while decoding, unknown
/// ones included: the drift check decodes every row of every workspace once per interval, and
/// these rows are never printed ([`ConfigSummary`] is the full row, unknown fields and all).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ConfigStamp {
    pub id: String,
    #[serde(default)]
    pub slug: String,
    #[serde(default)]
    pub created_at: Option<String>,
    #[serde(default)]
    pub last_updated_at: Option<String>,
}

/// A config as `GET /configs/{slug}` returns it. `config` arrives as a JSON string and is parsed.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigDetail {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub slug: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub status: String,
    pub workspace_id: Option<String>,
    #[serde(default, deserialize_with = "de::json_document")]
    pub config: Value,
    /// Changes on every update.
    pub version_id: Option<String>,
    pub organisation_id: Option<String>,
    #[serde(default, deserialize_with = "de::opt_flag")]
    pub is_default: Option<bool>,
    pub format: Option<String>,
    #[serde(rename = "type")]
    pub config_type: Option<String>,
    pub owner_id: Option<String>,
    pub updated_by: Option<String>,
    pub created_at: Option<String>,
    pub last_updated_at: Option<String>,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One entry of `GET /configs/{slug}/versions`. Fields neither struct models are kept in
/// `detail.extra` (one catch-all per flattened record: two would each take every unknown field).
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigVersion {
    #[serde(flatten)]
    pub detail: ConfigDetail,
    pub version_created_at: Option<String>,
    pub version_owner_id: Option<String>,
}

/// `POST /configs`.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CreateConfigRequest {
    pub name: String,
    /// The routing document, sent as an object.
    pub config: Value,
    pub workspace_id: Option<String>,
    /// Sent as `isDefault: 0|1`.
    #[serde(
        rename = "isDefault",
        default,
        deserialize_with = "de::opt_flag",
        serialize_with = "de::opt_flag_as_int"
    )]
    pub is_default: Option<bool>,
}

/// The create receipt. Live tenants return all three fields flat; the published spec has no slug.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigCreated {
    pub id: String,
    pub slug: Option<String>,
    pub version_id: Option<String>,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `PUT /configs/{slug}`. A `config` replaces the whole routing document.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UpdateConfigRequest {
    pub name: Option<String>,
    pub config: Option<Value>,
    pub status: Option<String>,
    pub workspace_id: Option<String>,
}

/// The update answer: `{success, data: {version_id}}` or flat.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ConfigUpdated {
    pub version_id: Option<String>,
    pub id: Option<String>,
    pub slug: Option<String>,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Validate for CreateConfigRequest {
    fn validate(&self) -> Result<(), ApiError> {
        validate::required([("name", &self.name)])?;
        check_document(&self.config)
    }
}

impl Validate for UpdateConfigRequest {
    fn validate(&self) -> Result<(), ApiError> {
        validate::some_update(self, "must set at least one field")?;
        self.config.as_ref().map_or(Ok(()), check_document)
    }
}

/// A routing document is a JSON object.
fn check_document(config: &Value) -> Result<(), ApiError> {
    if !config.is_object() {
        return Err(ApiError::validation("config", "must be a JSON object"));
    }
    Ok(())
}
