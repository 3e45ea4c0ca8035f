//! The `UsageLimitsPolicy` kind: a budget of the gateway (a credit limit in cost or tokens, an
//! alert threshold, a periodic reset), the sibling of `RateLimitsPolicy`.

use super::common::ArchivePolicy;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::rules;

use super::common::differing;
pub use super::limits::UsageLimitType;
use super::managed_spec::ManagedSpec;
use super::managed_status::{ManagedStatus, Reword, embeds_managed};
use super::policy::{FixedIdentity, Policy, PolicyIdentity, bind_policy, same_enum};
pub use super::rate_limits_policy::{GroupBy, PolicyCondition};
use crate::api;

/// A usage-limits policy (`/ai_gw/v2/policies/usage-limits`). `name`, `creditLimit`,
/// `alertThreshold`, the periodic reset and `conditions` are updated in place; `type`,
/// `groupBy` and `workspaceId` are fixed at creation. Applying a spec never resets the usage
/// counted so far: only a change of `resetUsage` does.
// kube's printcolumn(...) lists repeat `type_ = "string"`, which this lint misreads.
#[allow(clippy::duplicated_attributes)]
#[skip_serializing_none]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "aigw.io",
    doc = "A usage-limits policy (a budget) of the AI gateway, kept in line with the management API by aigw.",
    version = "v1alpha1",
    kind = "UsageLimitsPolicy",
    plural = "usagelimitspolicies",
    shortname = "aigwulp",
    category = "aigw",
    namespaced,
    status = "UsageLimitsPolicyStatus",
    printcolumn(name = "Type", type_ = "string", json_path = ".spec.type"),
    printcolumn(name = "Limit", type_ = "string", json_path = ".spec.creditLimit"),
    printcolumn(name = "Remote", type_ = "string", json_path = ".status.remoteStatus"),
    printcolumn(name = "Id", type_ = "string", json_path = ".status.id", priority = 1)
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = rules::set_at_creation("policyId", "UsageLimitsPolicy"))]
#[x_kube(validation = rules::same_connection("UsageLimitsPolicy"))]
#[x_kube(validation = rules::set_at_creation("workspaceId", "UsageLimitsPolicy"))]
#[x_kube(validation = Rule::new("!(has(self.periodicReset) && has(self.periodicResetDays))").field_path(".periodicResetDays").reason(Reason::FieldValueForbidden).message("spec.periodicResetDays cannot be set together with spec.periodicReset: choose one"))]
#[x_kube(validation = rules::workspace_id_or_ref())]
#[x_kube(validation = rules::set_at_creation("workspaceRef", "UsageLimitsPolicy"))]
#[schemars(transform = Reword(&[
    (
        "managementPolicy",
        "`Full` (the default): aigw creates, updates and archives the remote policy \
         to match this spec. `Observe`: aigw only reads it and reports differences in \
         the `Drifted` condition.",
    ),
]))]
#[schemars(transform = FixedIdentity("UsageLimitsPolicy"))]
pub struct UsageLimitsPolicySpec {
    /// The remote policy it adopts, its name and its workspace: the fields every policy opens
    /// with.
    #[serde(flatten)]
    pub identity: PolicyIdentity,

    /// What is counted: `cost` or `tokens`. Immutable.
    #[serde(rename = "type")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("type is immutable: create a new UsageLimitsPolicy to change it"))]
    pub type_: UsageLimitType,

    /// The budget: how much cost or how many tokens each value of `groupBy` may use.
    #[schemars(range(min = 0))]
    pub credit_limit: f64,

    /// Usage at which the API sends a threshold alert; none when absent.
    #[schemars(range(min = 0))]
    pub alert_threshold: Option<f64>,

    /// Usage goes back to zero every `monthly` or `weekly` period. Not together with
    /// `periodicResetDays`; neither: usage is never reset by itself.
    pub periodic_reset: Option<PeriodicReset>,

    /// Usage goes back to zero every this many days (1–365). Not together with `periodicReset`.
    #[schemars(range(min = 1, max = 365))]
    pub periodic_reset_days: Option<u32>,

    /// Which requests the policy applies to; at least one.
    #[schemars(length(min = 1))]
    pub conditions: Vec<PolicyCondition>,

    /// Keys the usage is counted per (for example `api_key` or `metadata.user_id`); at least
    /// one. Immutable.
    #[schemars(length(min = 1))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("groupBy is immutable: create a new UsageLimitsPolicy to change it"))]
    pub group_by: Vec<GroupBy>,

    /// A trigger: any string. Changing it resets the usage of every value of `groupBy` to zero,
    /// once (`status.observedResetUsage` records the value done). Applying any other change
    /// never resets usage.
    #[schemars(length(max = 253))]
    pub reset_usage: Option<String>,

    /// What happens to the remote policy when this resource is deleted: `Archive` (the
    /// default; the API archives usage-limits policies rather than deleting them) or `Orphan`.
    #[serde(default)]
    pub deletion_policy: ArchivePolicy,

    /// Management policy and Connection: the block every kind keeps.
    #[serde(flatten)]
    pub managed: ManagedSpec,
}
embeds_managed!(UsageLimitsPolicySpec, ManagedSpec);

/// The period after which usage goes back to zero.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PeriodicReset {
    /// Every month.
    Monthly,
    /// Every week.
    Weekly,
}

/// The usage of one value of `groupBy`, as the API last reported it.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ValueUsage {
    /// The value of the grouping key (for example an API key id).
    pub value_key: String,
    /// Usage counted since the last reset.
    pub current_usage: f64,
    /// `active` or `exhausted`.
    pub status: Option<String>,
}

/// What the management API reports about the policy.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UsageLimitsPolicyStatus {
    /// Generation, conditions, create intent and claim: the block every kind keeps.
    #[serde(flatten)]
    pub managed: ManagedStatus,
    /// UUID of the remote policy.
    pub id: Option<String>,
    /// `active` or `archived`, as the API reports it.
    pub remote_status: Option<String>,
    /// The remote object's `last_updated_at` when aigw last read it (for the drift check).
    pub remote_updated_at: Option<String>,
    /// Usage per value of `groupBy` at the last read (at most the 20 largest).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub usage: Vec<ValueUsage>,
    /// How many values of `groupBy` had usage at the last read.
    pub usage_values: Option<u32>,
    /// When the API last reset the usage (by period or on request).
    pub last_reset_at: Option<String>,
    /// The `spec.resetUsage` value whose reset is done.
    pub observed_reset_usage: Option<String>,
    /// Set (to the `spec.resetUsage` value) just before a reset is sent and cleared once it is
    /// done: of two reconciles acting on one view, only the one that recorded this resets.
    pub resetting_for: Option<String>,
    /// What the last drift correction replaced: when, the remote version, and each changed
    /// path with the remote and the desired value (masked where secret).
    pub last_drift_correction: Option<Box<super::common::DriftCorrection>>,
}
embeds_managed!(UsageLimitsPolicyStatus, ManagedStatus);

fn to_api_reset(r: PeriodicReset) -> api::PeriodicReset {
    match r {
        PeriodicReset::Monthly => api::PeriodicReset::Monthly,
        PeriodicReset::Weekly => api::PeriodicReset::Weekly,
    }
}

bind_policy!(
    UsageLimitsPolicy,
    spec UsageLimitsPolicySpec,
    remote api::UsageLimitsPolicy,
    create api::CreateUsageLimitsPolicyRequest,
    deletion ArchivePolicy::Orphan,
    handle usage_limits,
    query api::UsageLimitsListQuery,
    project UsageLimitsPolicySpec::adopting
);

impl UsageLimitsPolicySpec {
    /// A spec that adopts `remote` (by id) and matches it, or why none can.
    pub fn adopting(remote: &api::UsageLimitsPolicy) -> Result<Self, String> {
        Ok(Self {
            identity: PolicyIdentity::adopting(&<UsageLimitsPolicy as Policy>::facts(remote)),
            type_: same_enum(&remote.limit.limit_type).ok_or("unknown type")?,
            credit_limit: remote.limit.credit_limit,
            alert_threshold: remote.limit.alert_threshold,
            periodic_reset: remote.limit.periodic_reset.as_ref().and_then(same_enum),
            periodic_reset_days: remote.limit.periodic_reset_days,
            conditions: PolicyCondition::all_from_api(&remote.conditions),
            group_by: GroupBy::all_from_api(&remote.group_by),
            reset_usage: None,
            deletion_policy: ArchivePolicy::Orphan,
            managed: ManagedSpec::default(),
        })
    }

    /// The create body for this spec.
    pub fn create_request(&self) -> api::CreateUsageLimitsPolicyRequest {
        api::CreateUsageLimitsPolicyRequest {
            name: self.identity.name.clone(),
            conditions: PolicyCondition::all_to_api(&self.conditions),
            group_by: GroupBy::all_to_api(&self.group_by),
            limit_type: self.type_.to_api(),
            credit_limit: self.credit_limit,
            alert_threshold: self.alert_threshold,
            periodic_reset: self.periodic_reset.map(to_api_reset),
            periodic_reset_days: self.periodic_reset_days,
            workspace_id: self.identity.workspace_id.clone(),
        }
    }

    /// The update body: every field the API lets change (the optional ones as `null` to clear
    /// them). It never carries a usage reset.
    pub fn update_request(&self) -> api::UpdateUsageLimitsPolicyRequest {
        api::UpdateUsageLimitsPolicyRequest {
            name: self.identity.name.clone(),
            conditions: Some(PolicyCondition::all_to_api(&self.conditions)),
            credit_limit: Some(self.credit_limit),
            alert_threshold: self.alert_threshold,
            periodic_reset: self.periodic_reset.map(to_api_reset),
            periodic_reset_days: self.periodic_reset_days,
        }
    }

    /// Mutable fields where the remote policy differs from the spec; a PUT fixes these.
    pub fn diff(&self, remote: &api::UsageLimitsPolicy) -> Vec<&'static str> {
        let limit = &remote.limit;
        differing([
            ("name", self.identity.differs_in_name(remote.name.as_ref())),
            ("creditLimit", self.credit_limit != limit.credit_limit),
            (
                "alertThreshold",
                self.alert_threshold != limit.alert_threshold,
            ),
            (
                "periodicReset",
                self.periodic_reset.map(to_api_reset) != limit.periodic_reset,
            ),
            (
                "periodicResetDays",
                self.periodic_reset_days != limit.periodic_reset_days,
            ),
            (
                "conditions",
                !PolicyCondition::same_set(&self.conditions, &remote.conditions),
            ),
        ])
    }

    /// Immutable fields where the remote policy differs; no PUT can fix these.
    pub fn immutable_conflicts(&self, remote: &api::UsageLimitsPolicy) -> Vec<&'static str> {
        differing([
            ("type", self.type_.to_api() != remote.limit.limit_type),
            (
                "groupBy",
                !GroupBy::same_set(&self.group_by, &remote.group_by),
            ),
        ])
    }
}

super::common::governed!(
    UsageLimitsPolicy,
    "usage-limits policy",
    ArchivePolicy::Orphan,
    Adopts identity.policy_id as "spec.policyId"
);

super::common::recorded!(UsageLimitsPolicyStatus, id, remote_updated_at);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::resources::policy::fixtures;

    fn spec() -> UsageLimitsPolicySpec {
        fixtures::spec(json!({
            "name": "budget", "type": "cost", "creditLimit": 100, "alertThreshold": 80,
            "periodicReset": "monthly"
        }))
    }

    fn remote() -> api::UsageLimitsPolicy {
        fixtures::remote(json!({
            "id": "u1", "name": "budget", "type": "cost", "credit_limit": 100, "alert_threshold": 80,
            "periodic_reset": "monthly", "periodic_reset_days": null
        }))
    }

    #[test]
    fn equal_policies_have_no_difference() {
        fixtures::assert_in_sync::<UsageLimitsPolicy>(spec(), &remote());
    }

    #[test]
    fn mutable_and_immutable_differences_are_told_apart() {
        let mut remote = remote();
        remote.limit.credit_limit = 50.0;
        remote.limit.alert_threshold = None;
        remote.limit.periodic_reset = None;
        remote.limit.periodic_reset_days = Some(7);
        remote.limit.limit_type = api::UsageLimitType::Tokens;
        assert_eq!(
            spec().diff(&remote),
            vec![
                "creditLimit",
                "alertThreshold",
                "periodicReset",
                "periodicResetDays"
            ]
        );
        assert_eq!(spec().immutable_conflicts(&remote), vec!["type"]);
    }

    #[test]
    fn the_update_never_resets_usage_and_clears_what_the_spec_dropped() {
        let mut spec = spec();
        spec.alert_threshold = None;
        spec.reset_usage = Some("now".into());
        let body = serde_json::to_value(spec.update_request()).unwrap();
        assert_eq!(body["alert_threshold"], serde_json::Value::Null);
        assert!(body.get("reset_usage_for_value").is_none());
        assert_eq!(body["credit_limit"], 100);
    }
}
