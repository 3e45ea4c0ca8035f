use crate::api::models::{
    CreateRateLimitsPolicyRequest, PolicyCreated, RateLimitsListQuery, RateLimitsPolicy,
    UpdateRateLimitsPolicyRequest,
};
use crate::api::routes::{RATE_LIMIT, RATE_LIMITS};

use super::collection::{Archives, DeletedByKey, Listed, ReadByKey, Remote, Written};

/// Rate limits policies (`/ai_gw/v2/policies/rate-limits`). A read sees active policies only
/// (an archived one with `get_with_status`). An update cannot change `type`, `group_by`,
/// `target` or `workspace_id`: recreate the policy instead.
pub type RateLimits<'c> = super::Endpoint<'c, RateLimitsPolicy>;

impl Remote for RateLimitsPolicy {
    const COLLECTION: &'static str = RATE_LIMITS;
    const ITEM: &'static str = RATE_LIMIT;
    const KEY: &'static str = "rateLimitsPolicyId";
}

impl ReadByKey for RateLimitsPolicy {}

impl Listed for RateLimitsPolicy {
    type Query = RateLimitsListQuery;

    fn id(&self) -> &str {
        &self.id
    }
}

impl Written for RateLimitsPolicy {
    type Create = CreateRateLimitsPolicyRequest;
    type Created = PolicyCreated;
    type Update = UpdateRateLimitsPolicyRequest;
    type Updated = ();
}

impl DeletedByKey for RateLimitsPolicy {}

impl Archives for RateLimitsPolicy {}
