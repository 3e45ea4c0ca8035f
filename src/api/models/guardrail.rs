//! Guardrails: the list rows (`GET /ai_gw/admin/v2/guardrails`), a guardrail's full record and
//! its writes (`/ai_gw/v2/guardrails…` for workspace guardrails, `/ai_gw/admin/v2/guardrails…`
//! for organisation ones; the same shapes on both planes).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use serde_with::skip_serializing_none;

use super::de;
use super::query::{self, ListQuery};
use super::validate::{self, Validate};
use crate::api::error::ApiError;

/// One page of guardrails and the total across pages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuardrailList {
    #[serde(default, deserialize_with = "de::null_as_empty")]
    pub data: Vec<GuardrailSummary>,
    #[serde(default)]
    pub total: u64,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuardrailSummary {
    pub id: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub slug: String,
    pub created_at: Option<String>,
    pub last_updated_at: Option<String>,
    pub owner_id: Option<String>,
    /// `llm` appears; other values are not shown.
    pub target: Option<String>,
    pub organisation_id: Option<String>,
    /// `None` for organisation-level guardrails.
    pub workspace_id: Option<String>,
    pub status: Option<String>,
    pub updated_by: Option<String>,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Paging of the guardrails list: `page_size` 1..=1000 (default 100), `current_page` ≥ 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GuardrailListQuery {
    pub page_size: Option<u32>,
    pub current_page: Option<u32>,
}

impl ListQuery for GuardrailListQuery {
    fn to_pairs(&self) -> Vec<(&'static str, String)> {
        query::filters([
            ("page_size", query::number(self.page_size)),
            ("current_page", query::number(self.current_page)),
        ])
    }
}

impl Validate for GuardrailListQuery {
    fn validate(&self) -> Result<(), ApiError> {
        validate::range("page_size", self.page_size.map(u64::from), 1, 1000)
    }
}

/// Where a guardrail lives: a workspace (`/ai_gw/v2/guardrails`) or the organisation
/// (`/ai_gw/admin/v2/guardrails`, the admin plane).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuardrailPlane {
    Workspace,
    Organisation,
}

/// `GET …/guardrails/{guardrailId}`: the summary fields, the checks and the actions. Checks and
/// actions stay JSON: parameters are free-form per check, and a diff compares them by meaning.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuardrailDetails {
    pub id: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub slug: String,
    pub target: Option<String>,
    /// `None` for organisation guardrails.
    pub workspace_id: Option<String>,
    pub organisation_id: Option<String>,
    pub status: Option<String>,
    pub version_id: Option<String>,
    #[serde(default, deserialize_with = "de::null_as_empty")]
    pub checks: Vec<Map<String, Value>>,
    #[serde(default)]
    pub actions: Value,
    pub created_at: Option<String>,
    pub last_updated_at: Option<String>,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `POST …/guardrails`.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreateGuardrailRequest {
    pub name: String,
    pub target: Option<String>,
    pub workspace_id: Option<String>,
    pub checks: Value,
    pub actions: Value,
}

/// `PUT …/guardrails/{guardrailId}`: replaces the checks and actions; `target` and
/// `workspace_id` cannot change.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UpdateGuardrailRequest {
    pub name: Option<String>,
    pub checks: Option<Value>,
    pub actions: Option<Value>,
}

/// The receipt of a create or update: each mints a `version_id`.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuardrailWritten {
    pub id: String,
    #[serde(default)]
    pub slug: String,
    pub version_id: Option<String>,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn non_empty_checks(checks: Option<&Value>) -> Result<(), ApiError> {
    match checks {
        None => Ok(()),
        Some(Value::Array(items)) if !items.is_empty() => Ok(()),
        Some(_) => Err(ApiError::validation("checks", "must be a non-empty list")),
    }
}

impl Validate for CreateGuardrailRequest {
    fn validate(&self) -> Result<(), ApiError> {
        validate::max_chars("name", Some(self.name.as_str()), 255)?;
        validate::not_blank([("name", &self.name)])?;
        non_empty_checks(Some(&self.checks))
    }
}

impl Validate for UpdateGuardrailRequest {
    fn validate(&self) -> Result<(), ApiError> {
        validate::max_chars("name", self.name.as_deref(), 255)?;
        non_empty_checks(self.checks.as_ref())
    }
}
