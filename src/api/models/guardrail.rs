//! The organisation's guardrails (`GET /ai_gw/admin/v2/guardrails`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use serde_with::skip_serializing_none;

use super::de;
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

impl Validate for GuardrailListQuery {
    fn validate(&self) -> Result<(), ApiError> {
        validate::range("page_size", self.page_size.map(u64::from), 1, 1000)
    }
}
