//! Rate limits policies (`/ai_gw/v2/policies/rate-limits`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use serde_with::skip_serializing_none;

use super::de;
use super::deployment::enum_str;
use super::policy::{Condition, GroupBy, LimitsPolicy, PolicyListQuery};
use super::query::{self, ListQuery};
use super::validate::{self, Validate};
use crate::api::error::ApiError;

/// What is counted. Immutable after create.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RateLimitType {
    Requests,
    Tokens,
}

/// Window of a rate limit. A RateLimitsPolicy's `spec.unit` is this type, so the CRD's schema
/// lists what the API accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RateLimitUnit {
    /// Per minute.
    Rpm,
    /// Per hour.
    Rph,
    /// Per day.
    Rpd,
    /// Per week.
    Rpw,
}

// Immutable after create; the API's default is `llm`. A RateLimitsPolicy's `spec.target` is
// this type, and this line of documentation is its description in the CRD.
/// What a rate limit applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RateLimitTarget {
    /// Model calls.
    Llm,
    /// MCP tool calls.
    McpTools,
}

/// What a rate-limits policy counts, per what time unit and how many; `target` is what it
/// applies to.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RateLimit {
    #[serde(rename = "type")]
    pub limit_type: RateLimitType,
    pub unit: RateLimitUnit,
    #[serde(serialize_with = "de::whole_f64")]
    pub value: f64,
    pub target: Option<RateLimitTarget>,
}

/// A rate-limits policy as reads return it.
pub type RateLimitsPolicy = LimitsPolicy<RateLimit>;

/// `POST /policies/rate-limits`.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreateRateLimitsPolicyRequest {
    pub name: Option<String>,
    pub description: Option<String>,
    pub conditions: Vec<Condition>,
    pub group_by: Vec<GroupBy>,
    /// What it counts, per what and how many: the block reads return as a policy's
    /// [`LimitsPolicy::limit`].
    #[serde(flatten)]
    pub limit: RateLimit,
    /// Workspace id or slug.
    pub workspace_id: Option<String>,
    pub organisation_id: Option<String>,
}

/// `PUT /policies/rate-limits/{id}`: only these fields can change.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UpdateRateLimitsPolicyRequest {
    pub name: Option<String>,
    pub description: Option<String>,
    pub conditions: Option<Vec<Condition>>,
    pub unit: Option<RateLimitUnit>,
    #[serde(serialize_with = "de::opt_whole_f64")]
    pub value: Option<f64>,
}

/// The create receipt.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyCreated {
    pub id: String,
    pub object: Option<String>,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The rate-limits filters of `GET /policies/rate-limits`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RateLimitsFilters {
    pub limit_type: Option<RateLimitType>,
    pub unit: Option<RateLimitUnit>,
    pub target: Option<RateLimitTarget>,
}

/// Filters of `GET /policies/rate-limits`.
pub type RateLimitsListQuery = PolicyListQuery<RateLimitsFilters>;

impl ListQuery for RateLimitsFilters {
    fn to_pairs(&self) -> Vec<(&'static str, String)> {
        query::filters([
            ("type", self.limit_type.as_ref().map(enum_str)),
            ("unit", self.unit.as_ref().map(enum_str)),
            ("target", self.target.as_ref().map(enum_str)),
        ])
    }
}

impl Validate for CreateRateLimitsPolicyRequest {
    fn validate(&self) -> Result<(), ApiError> {
        validate::max_chars("name", self.name.as_deref(), 255)?;
        validate::max_chars("description", self.description.as_deref(), 500)?;
        validate::non_empty("conditions", &self.conditions)?;
        validate::non_empty("group_by", &self.group_by)?;
        validate::non_negative("value", Some(self.limit.value))
    }
}

impl Validate for UpdateRateLimitsPolicyRequest {
    fn validate(&self) -> Result<(), ApiError> {
        validate::some_update(self, "must set at least one field")?;
        validate::max_chars("name", self.name.as_deref(), 255)?;
        validate::max_chars("description", self.description.as_deref(), 500)?;
        if let Some(conditions) = &self.conditions {
            validate::non_empty("conditions", conditions)?;
        }
        validate::non_negative("value", self.value)
    }
}
