//! The `RateLimitsPolicy` kind: a rate-limits policy of the gateway.

use super::common::DeletionPolicy;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::rules;

pub use super::limits::RateLimitType;
use super::managed_spec::ManagedSpec;
use super::managed_status::{ManagedStatus, PENDING_CREATE, Reword, embeds_managed};
/// The spec's window and target are the API's own enums.
pub use crate::api::{RateLimitTarget, RateLimitUnit};

/// A rate-limits policy (`/ai_gw/v2/policies/rate-limits`). `name`, `unit`, `value` and
/// `conditions` are updated in place; `type`, `groupBy`, `target` and `workspaceId` are fixed
/// at creation.
// kube's printcolumn(...) lists repeat `type_ = "string"`, which this lint misreads.
#[allow(clippy::duplicated_attributes)]
#[skip_serializing_none]
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
    printcolumn(name = "Limit", type_ = "string", json_path = ".spec.value"),
    printcolumn(name = "Unit", type_ = "string", json_path = ".spec.unit"),
    printcolumn(name = "Id", type_ = "string", json_path = ".status.id", priority = 1)
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = rules::set_at_creation("policyId", "RateLimitsPolicy"))]
#[x_kube(validation = rules::set_at_creation("workspaceId", "RateLimitsPolicy"))]
#[x_kube(validation = rules::same_connection("RateLimitsPolicy"))]
#[x_kube(validation = rules::workspace_id_or_ref())]
#[x_kube(validation = rules::set_at_creation("workspaceRef", "RateLimitsPolicy"))]
#[x_kube(validation = rules::fixed_defaulting("target", "llm", "RateLimitsPolicy"))]
#[schemars(transform = Reword(&[
    (
        "managementPolicy",
        "`Full` (the default): aigw creates, updates and deletes the remote policy to \
         match this spec. `Observe`: aigw only reads it and reports differences in \
         the `Drifted` condition; it never writes to it, also not when this resource \
         is deleted (whatever `deletionPolicy` says).",
    ),
]))]
#[schemars(transform = FixedIdentity("RateLimitsPolicy"))]
pub struct RateLimitsPolicySpec {
    /// The remote policy it adopts, its name and its workspace: the fields every policy opens
    /// with.
    #[serde(flatten)]
    pub identity: PolicyIdentity,

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
    #[x_kube(validation = Rule::new("self == oldSelf").message("target is immutable: create a new RateLimitsPolicy to change it"))]
    pub target: Option<RateLimitTarget>,

    /// What happens to the remote policy when this resource is deleted: `Delete` (the default)
    /// or `Orphan`.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,

    /// Management policy and Connection: the block every kind keeps.
    #[serde(flatten)]
    pub managed: ManagedSpec,
}
embeds_managed!(RateLimitsPolicySpec, ManagedSpec);

/// A condition selecting the requests a policy applies to: the key has `value` (or one of
/// `values`), and not `excludes` (nor one of `excludedValues`).
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.value) != has(self.values)").message("a condition needs exactly one of value or values"))]
#[x_kube(validation = Rule::new("!has(self.excludes) || !has(self.excludedValues)").message("a condition takes excludes or excludedValues, not both"))]
pub struct PolicyCondition {
    /// `api_key`, `organisation_id`, `workspace_id` or `metadata.<key>`.
    #[schemars(length(min = 1))]
    pub key: String,
    /// Value the key must have.
    pub value: Option<String>,
    /// Values of which the key must have one, instead of `value`, e.g. `[team-a, team-b]`.
    #[schemars(length(min = 1))]
    pub values: Option<Vec<String>>,
    /// A value excluded from the match.
    pub excludes: Option<String>,
    /// Values excluded from the match, instead of `excludes`.
    #[schemars(length(min = 1))]
    pub excluded_values: Option<Vec<String>>,
}

/// A key the limit is counted per.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupBy {
    /// `api_key`, `organisation_id`, `workspace_id` or `metadata.<key>`.
    #[schemars(length(min = 1))]
    pub key: String,
}

/// What the management API reports about the policy.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = Reword(&[PENDING_CREATE]))]
pub struct RateLimitsPolicyStatus {
    /// Generation, conditions, create intent and claim: the block every kind keeps.
    #[serde(flatten)]
    pub managed: ManagedStatus,
    /// UUID of the remote policy.
    pub id: Option<String>,
    /// `active` or `archived`, as the API reports it.
    pub remote_status: Option<String>,
    /// The remote object's `last_updated_at` when aigw last read it. The drift check lists the
    /// remote objects and reads again only those whose `last_updated_at` differs from this.
    pub remote_updated_at: Option<String>,
    /// What the last drift correction replaced: when, the remote version, and each changed
    /// path with the remote and the desired value (masked where secret).
    pub last_drift_correction: Option<Box<super::common::DriftCorrection>>,
}
embeds_managed!(RateLimitsPolicyStatus, ManagedStatus);

use super::common::differing;
use super::policy::{FixedIdentity, Policy, PolicyIdentity, bind_policy, same_enum};
use crate::api;

/// The values of a condition's `value` or `excludes`, as a set: a one-element list and a plain
/// string mean the same, and the API may list several in another order.
fn normalize(value: &api::OneOrMany) -> Vec<String> {
    let mut values = match value {
        api::OneOrMany::One(v) => vec![v.clone()],
        api::OneOrMany::Many(vs) => vs.clone(),
    };
    values.sort();
    values.dedup();
    values
}

/// The API's `value` or `excludes` for the spec's one value or several.
fn one_or_many(one: &Option<String>, many: &Option<Vec<String>>) -> Option<api::OneOrMany> {
    match (one, many) {
        (Some(one), _) => Some(api::OneOrMany::One(one.clone())),
        (None, Some(many)) => Some(api::OneOrMany::Many(many.clone())),
        (None, None) => None,
    }
}

/// The spec's one value (a one-element list too) or several, for the API's; neither for an
/// empty list, which the spec cannot hold (its lists have at least one item).
fn split(value: &api::OneOrMany) -> (Option<String>, Option<Vec<String>>) {
    match value {
        api::OneOrMany::One(v) => (Some(v.clone()), None),
        api::OneOrMany::Many(vs) if vs.is_empty() => (None, None),
        api::OneOrMany::Many(vs) if vs.len() == 1 => (Some(vs[0].clone()), None),
        api::OneOrMany::Many(vs) => (None, Some(vs.clone())),
    }
}

/// The API's `value` as compared: an empty list is what the spec writes as `""` (it cannot hold
/// an empty list), so an exported or adopted condition whose remote value is `[]` needs no write.
fn same_value(remote: &api::OneOrMany, wanted: &api::OneOrMany) -> bool {
    let (remote, wanted) = (normalize(remote), normalize(wanted));
    remote == wanted || (remote.is_empty() && wanted == [String::new()])
}

/// The API's `excludes` as compared: an empty list excludes nothing, as an absent one.
fn exclusions(excludes: Option<&api::OneOrMany>) -> Option<Vec<String>> {
    excludes.map(normalize).filter(|values| !values.is_empty())
}

impl PolicyCondition {
    pub(crate) fn to_api(&self) -> api::Condition {
        api::Condition {
            key: self.key.clone(),
            // Admission requires one of the two; an empty value stands in for neither.
            value: one_or_many(&self.value, &self.values)
                .unwrap_or_else(|| api::OneOrMany::One(String::new())),
            excludes: one_or_many(&self.excludes, &self.excluded_values),
        }
    }

    fn matches(&self, remote: &api::Condition) -> bool {
        let wanted = self.to_api();
        self.key == remote.key
            && same_value(&remote.value, &wanted.value)
            && exclusions(remote.excludes.as_ref()) == exclusions(wanted.excludes.as_ref())
    }
}

impl PolicyCondition {
    /// The spec's condition for a remote one.
    pub(crate) fn from_api(remote: &api::Condition) -> Self {
        let (value, values) = match split(&remote.value) {
            // An empty list: what aigw sends for neither, an empty value.
            (None, None) => (Some(String::new()), None),
            found => found,
        };
        let (excludes, excluded_values) = remote.excludes.as_ref().map(split).unwrap_or_default();
        Self {
            key: remote.key.clone(),
            value,
            values,
            excludes,
            excluded_values,
        }
    }

    /// The spec's conditions for remote ones.
    pub(crate) fn all_from_api(remote: &[api::Condition]) -> Vec<Self> {
        remote.iter().map(Self::from_api).collect()
    }

    /// The API's conditions for the spec's.
    pub(crate) fn all_to_api(conditions: &[Self]) -> Vec<api::Condition> {
        conditions.iter().map(Self::to_api).collect()
    }

    /// The API may return conditions in another order than written: compare them as a set.
    pub(crate) fn same_set(wanted: &[PolicyCondition], remote: &[api::Condition]) -> bool {
        wanted.len() == remote.len()
            && wanted.iter().all(|s| remote.iter().any(|r| s.matches(r)))
            && remote.iter().all(|r| wanted.iter().any(|s| s.matches(r)))
    }
}

impl GroupBy {
    /// The spec's grouping keys for remote ones.
    pub(crate) fn all_from_api(remote: &[api::GroupBy]) -> Vec<Self> {
        remote
            .iter()
            .map(|g| GroupBy { key: g.key.clone() })
            .collect()
    }

    /// The API's grouping keys for the spec's.
    pub(crate) fn all_to_api(group_by: &[Self]) -> Vec<api::GroupBy> {
        group_by
            .iter()
            .map(|g| api::GroupBy { key: g.key.clone() })
            .collect()
    }

    /// The same grouping keys, in any order.
    pub(crate) fn same_set(wanted: &[GroupBy], remote: &[api::GroupBy]) -> bool {
        let mut remote: Vec<&str> = remote.iter().map(|g| g.key.as_str()).collect();
        let mut wanted: Vec<&str> = wanted.iter().map(|g| g.key.as_str()).collect();
        remote.sort_unstable();
        wanted.sort_unstable();
        wanted == remote
    }
}

bind_policy!(
    RateLimitsPolicy,
    spec RateLimitsPolicySpec,
    remote api::RateLimitsPolicy,
    create api::CreateRateLimitsPolicyRequest,
    deletion DeletionPolicy::Orphan,
    handle rate_limits,
    query api::RateLimitsListQuery,
    project RateLimitsPolicySpec::adopting
);

impl RateLimitsPolicySpec {
    /// A spec that adopts `remote` (by id) and matches it, or why none can: the spec takes one
    /// value per condition, the API allows several.
    pub fn adopting(remote: &api::RateLimitsPolicy) -> Result<Self, String> {
        Ok(Self {
            identity: PolicyIdentity::adopting(&<RateLimitsPolicy as Policy>::facts(remote)),
            type_: same_enum(&remote.limit.limit_type).ok_or("unknown type")?,
            unit: same_enum(&remote.limit.unit).ok_or("unknown unit")?,
            value: remote.limit.value,
            conditions: PolicyCondition::all_from_api(&remote.conditions),
            group_by: GroupBy::all_from_api(&remote.group_by),
            target: remote.limit.target.as_ref().and_then(same_enum),
            deletion_policy: DeletionPolicy::Orphan,
            managed: ManagedSpec::default(),
        })
    }

    /// The create body for this spec.
    pub fn create_request(&self) -> api::CreateRateLimitsPolicyRequest {
        api::CreateRateLimitsPolicyRequest {
            name: self.identity.name.clone(),
            description: None,
            conditions: PolicyCondition::all_to_api(&self.conditions),
            group_by: GroupBy::all_to_api(&self.group_by),
            limit: api::RateLimit {
                limit_type: self.type_.to_api(),
                unit: self.unit,
                value: self.value,
                target: self.target,
            },
            workspace_id: self.identity.workspace_id.clone(),
            organisation_id: None,
        }
    }

    /// The update body: every field the API lets change.
    pub fn update_request(&self) -> api::UpdateRateLimitsPolicyRequest {
        api::UpdateRateLimitsPolicyRequest {
            name: self.identity.name.clone(),
            description: None,
            conditions: Some(PolicyCondition::all_to_api(&self.conditions)),
            unit: Some(self.unit),
            value: Some(self.value),
        }
    }

    /// Mutable fields where the remote policy differs from the spec; a PUT fixes these.
    pub fn diff(&self, remote: &api::RateLimitsPolicy) -> Vec<&'static str> {
        differing([
            ("name", self.identity.differs_in_name(remote.name.as_ref())),
            ("unit", self.unit != remote.limit.unit),
            ("value", self.value != remote.limit.value),
            (
                "conditions",
                !PolicyCondition::same_set(&self.conditions, &remote.conditions),
            ),
        ])
    }

    /// Immutable fields where the remote policy differs; no PUT can fix these.
    pub fn immutable_conflicts(&self, remote: &api::RateLimitsPolicy) -> Vec<&'static str> {
        let llm = api::RateLimitTarget::Llm;
        differing([
            ("type", self.type_.to_api() != remote.limit.limit_type),
            (
                "groupBy",
                !GroupBy::same_set(&self.group_by, &remote.group_by),
            ),
            (
                "target",
                self.target.unwrap_or(llm) != remote.limit.target.unwrap_or(llm),
            ),
        ])
    }
}

super::common::governed!(
    RateLimitsPolicy,
    "rate-limits policy",
    DeletionPolicy::Orphan,
    Adopts identity.policy_id as "spec.policyId"
);

super::common::recorded!(RateLimitsPolicyStatus, id, remote_updated_at);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::resources::policy::fixtures;

    fn spec() -> RateLimitsPolicySpec {
        fixtures::spec(json!({"name": "per-key", "type": "requests", "unit": "rpm", "value": 100}))
    }

    fn remote() -> api::RateLimitsPolicy {
        fixtures::remote(json!({
            "id": "p1", "name": "per-key", "type": "requests", "unit": "rpm", "value": 100
        }))
    }

    #[test]
    fn equal_policies_have_no_difference() {
        fixtures::assert_in_sync::<RateLimitsPolicy>(spec(), &remote());
    }

    #[test]
    fn mutable_and_immutable_differences_are_told_apart() {
        let mut remote = remote();
        remote.limit.value = 50.0;
        remote.limit.unit = api::RateLimitUnit::Rph;
        remote.limit.limit_type = api::RateLimitType::Tokens;
        assert_eq!(spec().diff(&remote), vec!["unit", "value"]);
        assert_eq!(spec().immutable_conflicts(&remote), vec!["type"]);
    }

    /// Several values (or excluded values) per condition, as the API allows: sent as a list,
    /// compared as a set (a one-element list is the plain value), and read back into the spec
    /// an export writes.
    #[test]
    fn a_condition_may_hold_several_values() {
        let mut spec = spec();
        spec.conditions = serde_json::from_value(json!([
            {"key": "metadata.team", "values": ["b", "a"], "excludedValues": ["intern", "bot"]},
            {"key": "workspace_id", "values": ["ws-1"], "excludes": "ws-0"},
        ]))
        .unwrap();
        let body = serde_json::to_value(spec.create_request()).unwrap();
        assert_eq!(body["conditions"][0]["value"], json!(["b", "a"]));
        assert_eq!(body["conditions"][0]["excludes"], json!(["intern", "bot"]));
        let mut remote = remote();
        remote.conditions = serde_json::from_value(json!([
            {"key": "workspace_id", "value": "ws-1", "excludes": ["ws-0"]},
            {"key": "metadata.team", "value": ["a", "b"], "excludes": ["bot", "intern"]},
        ]))
        .unwrap();
        assert_eq!(spec.diff(&remote), Vec::<&str>::new());
        remote.conditions[1].value = api::OneOrMany::Many(vec!["a".into(), "c".into()]);
        assert_eq!(spec.diff(&remote), vec!["conditions"]);
        let read = PolicyCondition::all_from_api(&remote.conditions);
        assert_eq!(
            serde_json::to_value(&read).unwrap(),
            json!([
                {"key": "workspace_id", "value": "ws-1", "excludes": "ws-0"},
                {"key": "metadata.team", "values": ["a", "c"], "excludedValues": ["bot", "intern"]},
            ])
        );
        // Empty lists, which the API takes and the spec cannot hold (an attack of stop 82
        // exported them, and admission refused the file): no exclusion, an empty value.
        remote.conditions = serde_json::from_value(json!([
            {"key": "workspace_id", "value": [], "excludes": []},
        ]))
        .unwrap();
        let read = PolicyCondition::all_from_api(&remote.conditions);
        assert_eq!(
            serde_json::to_value(&read).unwrap(),
            json!([{"key": "workspace_id", "value": ""}])
        );
        spec.conditions = read;
        assert_eq!(
            spec.diff(&remote),
            Vec::<&str>::new(),
            "adopted as exported"
        );
        spec.conditions =
            serde_json::from_value(json!([{"key": "workspace_id", "value": "ws-1"}])).unwrap();
        remote.conditions = serde_json::from_value(json!([
            {"key": "workspace_id", "value": "ws-1", "excludes": []},
        ]))
        .unwrap();
        assert_eq!(spec.diff(&remote), Vec::<&str>::new());
    }

    #[test]
    fn create_body_carries_every_field() {
        let body = serde_json::to_value(spec().create_request()).unwrap();
        assert_eq!(body["type"], "requests");
        assert_eq!(body["group_by"][0]["key"], "api_key");
        assert_eq!(body["conditions"][0]["value"], "ws-1");
    }
}
