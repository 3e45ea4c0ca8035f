//! The `RateLimitsPolicy` kind: a rate-limits policy of the gateway.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::common::{ConnectionRef, conditions_schema};

/// A rate-limits policy (`/ai_gw/v2/policies/rate-limits`). `name`, `unit`, `value` and
/// `conditions` are updated in place; `type`, `groupBy`, `target` and `workspaceId` are fixed
/// at creation.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "aigw.io",
    doc = "A rate-limits policy of the AI gateway, kept in line with the management API by aigw.",
    version = "v1alpha1",
    kind = "RateLimitsPolicy",
    plural = "ratelimitspolicies",
    shortname = "aigwrlp",
    category = "aigw",
    namespaced,
    status = "RateLimitsPolicyStatus",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(name = "Limit", type_ = "string", json_path = ".spec.value"),
    printcolumn(name = "Unit", type_ = "string", json_path = ".spec.unit"),
    printcolumn(name = "Id", type_ = "string", json_path = ".status.id", priority = 1),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct RateLimitsPolicySpec {
    /// UUID of an existing remote policy to adopt. When absent, aigw creates a new policy.
    /// Cannot be changed once set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("policyId is immutable: create a new RateLimitsPolicy to adopt another remote policy"))]
    pub policy_id: Option<String>,

    /// Display name of the policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 255))]
    pub name: Option<String>,

    /// Workspace (UUID or slug) the policy belongs to. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("workspaceId is immutable: create a new RateLimitsPolicy to change it"))]
    pub workspace_id: Option<String>,

    /// What is counted: `requests` or `tokens`. Immutable.
    #[serde(rename = "type")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("type is immutable: create a new RateLimitsPolicy to change it"))]
    pub type_: RateLimitType,

    /// Window of the limit: `rpm` (per minute), `rph` (per hour), `rpd` (per day) or `rpw`
    /// (per week).
    pub unit: RateLimitUnit,

    /// How many requests or tokens are allowed per window.
    #[schemars(range(min = 0))]
    pub value: f64,

    /// Which requests the policy applies to; at least one.
    #[schemars(length(min = 1))]
    pub conditions: Vec<PolicyCondition>,

    /// Keys the limit is counted per (for example `api_key` or `metadata.user_id`); at least
    /// one. Immutable.
    #[schemars(length(min = 1))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("groupBy is immutable: create a new RateLimitsPolicy to change it"))]
    pub group_by: Vec<GroupBy>,

    /// What is limited: `llm` (model calls, the default) or `mcp_tools`. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("target is immutable: create a new RateLimitsPolicy to change it"))]
    pub target: Option<RateLimitTarget>,

    /// What happens to the remote policy when this resource is deleted: `Delete` (the default)
    /// or `Orphan`.
    #[serde(default)]
    pub deletion_policy: RateLimitsPolicyDeletionPolicy,

    /// The Connection used to reach the management API; defaults to `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_ref: Option<ConnectionRef>,
}

/// What a rate limit counts.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RateLimitType {
    /// Requests.
    Requests,
    /// Tokens.
    Tokens,
}

/// Window of a rate limit.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
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

/// What a rate limit applies to.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RateLimitTarget {
    /// Model calls.
    Llm,
    /// MCP tool calls.
    McpTools,
}

/// A condition selecting the requests a policy applies to.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyCondition {
    /// `api_key`, `organisation_id`, `workspace_id` or `metadata.<key>`.
    #[schemars(length(min = 1))]
    pub key: String,
    /// Value the key must have.
    pub value: String,
    /// A value excluded from the match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excludes: Option<String>,
}

/// A key the limit is counted per.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupBy {
    /// `api_key`, `organisation_id`, `workspace_id` or `metadata.<key>`.
    #[schemars(length(min = 1))]
    pub key: String,
}

/// What happens to the remote policy when the resource is deleted.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, schemars::JsonSchema,
)]
pub enum RateLimitsPolicyDeletionPolicy {
    /// Delete the remote policy.
    #[default]
    Delete,
    /// Leave the remote policy in place.
    Orphan,
}

/// What the management API reports about the policy.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RateLimitsPolicyStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, `Reconciling` and `Stalled`, each with a reason and its own observedGeneration.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
    /// UUID of the remote policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `active` or `archived`, as the API reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_status: Option<String>,
    /// Set just before a create is sent and cleared once its outcome is known: a create whose
    /// outcome was lost is looked up by name instead of being sent again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_create: Option<String>,
}
