//! Rate-limits policies (`/ai_gw/v2/policies/rate-limits`) and usage-limits policies
//! (`/ai_gw/v2/policies/usage-limits`): two collections with the same calls, told apart by
//! [`PolicyKind`]. A read sees active policies only (an archived one with `get_with_status`);
//! a delete archives the policy. An update cannot change `type`, `group_by` or
//! `workspace_id` (nor a rate-limits policy's `target`): recreate the policy instead.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::api::models::{
    CreateRateLimitsPolicyRequest, CreateUsageLimitsPolicyRequest, LimitsPolicy, ListQuery,
    PolicyCreated, PolicyListQuery, RateLimit, RateLimitsFilters, UpdateRateLimitsPolicyRequest,
    UpdateUsageLimitsPolicyRequest, UsageLimit, UsageLimitsFilters, Validate,
};
use crate::api::routes::{RATE_LIMIT, RATE_LIMITS, USAGE_LIMIT, USAGE_LIMITS};

use super::collection::{Archives, DeletedByKey, Listed, ReadByKey, Remote, Written};

/// Rate limits policies.
pub type RateLimits<'c> = super::Endpoint<'c, LimitsPolicy<RateLimit>>;

/// Usage-limits policies. A read sees the usage per value of the policy's grouping key; an
/// update never resets usage (see [`UsageLimits::reset_entity`]).
pub type UsageLimits<'c> = super::Endpoint<'c, LimitsPolicy<UsageLimit>>;

/// What tells one policy collection from the other: what the kind limits (`Self`), where its
/// policies live, its own list filters and its write bodies.
pub trait PolicyKind: DeserializeOwned {
    const COLLECTION: &'static str;
    const ITEM: &'static str;
    type Filters: ListQuery;
    type Create: Validate + Serialize;
    type Update: Validate + Serialize;

    /// What a read asks for besides the key.
    fn read_query() -> Vec<(&'static str, String)> {
        Vec::new()
    }
}

impl PolicyKind for RateLimit {
    const COLLECTION: &'static str = RATE_LIMITS;
    const ITEM: &'static str = RATE_LIMIT;
    type Filters = RateLimitsFilters;
    type Create = CreateRateLimitsPolicyRequest;
    type Update = UpdateRateLimitsPolicyRequest;
}

impl PolicyKind for UsageLimit {
    const COLLECTION: &'static str = USAGE_LIMITS;
    const ITEM: &'static str = USAGE_LIMIT;
    type Filters = UsageLimitsFilters;
    type Create = CreateUsageLimitsPolicyRequest;
    type Update = UpdateUsageLimitsPolicyRequest;

    fn read_query() -> Vec<(&'static str, String)> {
        vec![("include_usage", "true".to_string())]
    }
}

impl<L: PolicyKind> Remote for LimitsPolicy<L> {
    const COLLECTION: &'static str = L::COLLECTION;
    const ITEM: &'static str = L::ITEM;

    fn read_query() -> Vec<(&'static str, String)> {
        L::read_query()
    }
}

impl<L: PolicyKind> ReadByKey for LimitsPolicy<L> {}

impl<L: PolicyKind> Listed for LimitsPolicy<L> {
    type Query = PolicyListQuery<L::Filters>;

    fn id(&self) -> &str {
        &self.id
    }
}

impl<L: PolicyKind> Written for LimitsPolicy<L> {
    type Create = L::Create;
    type Created = PolicyCreated;
    type Update = L::Update;
    type Updated = ();
}

impl<L: PolicyKind> DeletedByKey for LimitsPolicy<L> {}

impl<L: PolicyKind> Archives for LimitsPolicy<L> {}
