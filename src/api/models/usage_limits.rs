//! Usage-limits policies (`/ai_gw/v2/policies/usage-limits`): budgets in cost or tokens, with an
//! alert threshold and a periodic reset. The sibling of rate-limits policies: the same
//! conditions, grouping keys, receipts and archive-on-delete.

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::de;
use super::deployment::enum_str;
use super::policy::{Condition, GroupBy, LimitsPolicy, PolicyListQuery};
use super::query::{self, ListQuery};
use super::validate::{self, Validate};
use crate::api::error::ApiError;

/// What the budget counts. Immutable after create.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageLimitType {
    Cost,
    Tokens,
}

/// When usage goes back to zero by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PeriodicReset {
    Monthly,
    Weekly,
}

/// What a usage-limits policy counts and how much, when it alerts and when usage goes back to
/// zero.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageLimit {
    #[serde(rename = "type")]
    pub limit_type: UsageLimitType,
    #[serde(default, serialize_with = "de::whole_f64")]
    pub credit_limit: f64,
    #[serde(serialize_with = "de::opt_whole_f64")]
    pub alert_threshold: Option<f64>,
    pub periodic_reset: Option<PeriodicReset>,
    pub periodic_reset_days: Option<u32>,
    pub next_usage_reset_at: Option<String>,
    pub last_reset_at: Option<String>,
    /// Usage per value of the grouping key; only on a read with `include_usage=true`.
    pub value_key_usage_map: Option<serde_json::Map<String, serde_json::Value>>,
}

/// A usage-limits policy as reads return it.
pub type UsageLimitsPolicy = LimitsPolicy<UsageLimit>;

/// `POST /policies/usage-limits`.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreateUsageLimitsPolicyRequest {
    pub name: Option<String>,
    pub conditions: Vec<Condition>,
    pub group_by: Vec<GroupBy>,
    #[serde(rename = "type")]
    pub limit_type: UsageLimitType,
    #[serde(serialize_with = "de::whole_f64")]
    pub credit_limit: f64,
    #[serde(serialize_with = "de::opt_whole_f64")]
    pub alert_threshold: Option<f64>,
    pub periodic_reset: Option<PeriodicReset>,
    pub periodic_reset_days: Option<u32>,
    /// Workspace id or slug.
    pub workspace_id: Option<String>,
}

/// `PUT /policies/usage-limits/{id}`: only these fields can change. `alert_threshold`,
/// `periodic_reset` and `periodic_reset_days` are sent as `null` to clear them, so a PUT
/// states every one of them.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UpdateUsageLimitsPolicyRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    #[serde(
        default,
        serialize_with = "de::opt_whole_f64",
        skip_serializing_if = "Option::is_none"
    )]
    pub credit_limit: Option<f64>,
    #[serde(default, serialize_with = "de::opt_whole_f64")]
    pub alert_threshold: Option<f64>,
    #[serde(default)]
    pub periodic_reset: Option<PeriodicReset>,
    #[serde(default)]
    pub periodic_reset_days: Option<u32>,
}

/// One value of the grouping key and its usage (`GET …/{id}/entities`).
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageEntity {
    pub id: String,
    pub value_key: Option<String>,
    pub current_usage: Option<f64>,
    pub status: Option<String>,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// The usage-limits filter of `GET /policies/usage-limits`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct UsageLimitsFilters {
    pub limit_type: Option<UsageLimitType>,
}

/// Filters of `GET /policies/usage-limits`.
pub type UsageLimitsListQuery = PolicyListQuery<UsageLimitsFilters>;

impl ListQuery for UsageLimitsFilters {
    fn to_pairs(&self) -> Vec<(&'static str, String)> {
        query::filters([("type", self.limit_type.as_ref().map(enum_str))])
    }
}

fn validate_reset(reset: Option<PeriodicReset>, days: Option<u32>) -> Result<(), ApiError> {
    if reset.is_some() && days.is_some() {
        return Err(ApiError::validation(
            "periodic_reset_days",
            "cannot be set together with periodic_reset",
        ));
    }
    if days.is_some_and(|d| !(1..=365).contains(&d)) {
        return Err(ApiError::validation(
            "periodic_reset_days",
            "must be between 1 and 365",
        ));
    }
    Ok(())
}

impl Validate for CreateUsageLimitsPolicyRequest {
    fn validate(&self) -> Result<(), ApiError> {
        validate::max_chars("name", self.name.as_deref(), 255)?;
        validate::non_empty("conditions", &self.conditions)?;
        validate::non_empty("group_by", &self.group_by)?;
        validate::non_negative("credit_limit", Some(self.credit_limit))?;
        validate::non_negative("alert_threshold", self.alert_threshold)?;
        validate_reset(self.periodic_reset, self.periodic_reset_days)
    }
}

impl Validate for UpdateUsageLimitsPolicyRequest {
    fn validate(&self) -> Result<(), ApiError> {
        validate::max_chars("name", self.name.as_deref(), 255)?;
        if let Some(conditions) = &self.conditions {
            validate::non_empty("conditions", conditions)?;
        }
        validate::non_negative("credit_limit", self.credit_limit)?;
        validate::non_negative("alert_threshold", self.alert_threshold)?;
        validate_reset(self.periodic_reset, self.periodic_reset_days)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::models::PolicyStatus;
    use serde_json::json;

    #[test]
    fn the_live_read_decodes_with_its_nulls() {
        let policy: UsageLimitsPolicy = serde_json::from_value(json!({
            "id": "u1", "name": "budget", "description": null,
            "conditions": [{"key": "workspace_id", "value": "ws-1"}], "group_by": [{"key": "api_key"}],
            "type": "cost", "credit_limit": 100, "alert_threshold": null, "periodic_reset": "monthly",
            "periodic_reset_days": null, "next_usage_reset_at": null, "last_reset_at": null,
            "status": "archived", "workspace_id": "w", "organisation_id": "o",
            "created_at": "2026-09-06T00:00:00Z", "last_updated_at": "2026-09-06T00:00:00Z",
            "created_by": "someone", "object": "policy_usage_limits", "value_key_usage_map": {}
        }))
        .unwrap();
        assert_eq!(policy.status, PolicyStatus::Archived);
        assert_eq!(policy.limit.periodic_reset, Some(PeriodicReset::Monthly));
        assert_eq!(policy.limit.alert_threshold, None);
        assert_eq!(
            policy.extra["created_by"], "someone",
            "unknown fields are kept"
        );
    }

    #[test]
    fn an_update_states_the_fields_it_clears() {
        let body = serde_json::to_value(UpdateUsageLimitsPolicyRequest {
            credit_limit: Some(5.0),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(
            body,
            json!({"credit_limit": 5, "alert_threshold": null, "periodic_reset": null, "periodic_reset_days": null})
        );
    }

    #[test]
    fn both_reset_forms_are_refused() {
        let update = UpdateUsageLimitsPolicyRequest {
            periodic_reset: Some(PeriodicReset::Weekly),
            periodic_reset_days: Some(7),
            ..Default::default()
        };
        assert!(update.validate().is_err());
    }
}
