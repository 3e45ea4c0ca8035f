use crate::api::client::Call;
use crate::api::error::ApiError;
use crate::api::models::{
    CreateUsageLimitsPolicyRequest, Listing, PolicyCreated, UpdateUsageLimitsPolicyRequest,
    UsageEntity, UsageLimitsListQuery, UsageLimitsPolicy,
};
use crate::api::routes::{
    Route, USAGE_LIMIT, USAGE_LIMIT_ENTITIES, USAGE_LIMIT_ENTITY_RESET, USAGE_LIMITS, Verb,
};

use super::collection::{Archives, DeletedByKey, Listed, ReadByKey, Remote, Written};

/// Usage-limits policies (`/ai_gw/v2/policies/usage-limits`). A read sees an active policy,
/// with the usage per value of its grouping key (an archived one with `get_with_status`). An
/// update cannot change `type`, `group_by` or `workspace_id` (recreate the policy instead) and
/// never resets usage (see [`UsageLimits::reset_entity`]); a delete archives the policy.
pub type UsageLimits<'c> = super::Endpoint<'c, UsageLimitsPolicy>;

/// The largest page the entity list serves.
const ENTITY_PAGE: u32 = 100;

impl Remote for UsageLimitsPolicy {
    const COLLECTION: &'static str = USAGE_LIMITS;
    const ITEM: &'static str = USAGE_LIMIT;
    const KEY: &'static str = "policyUsageLimitsId";

    fn read_query() -> Vec<(&'static str, String)> {
        vec![("include_usage", "true".to_string())]
    }
}

impl ReadByKey for UsageLimitsPolicy {}

impl Listed for UsageLimitsPolicy {
    type Query = UsageLimitsListQuery;

    fn id(&self) -> &str {
        &self.id
    }
}

impl Written for UsageLimitsPolicy {
    type Create = CreateUsageLimitsPolicyRequest;
    type Created = PolicyCreated;
    type Update = UpdateUsageLimitsPolicyRequest;
    type Updated = ();
}

impl DeletedByKey for UsageLimitsPolicy {}

impl Archives for UsageLimitsPolicy {}

impl UsageLimits<'_> {
    /// Every value of the policy's grouping key that has usage, all pages.
    pub async fn entities(&self, id: &str) -> Result<Listing<UsageEntity>, ApiError> {
        super::require("policyUsageLimitsId", id)?;
        let pairs = vec![("page_size", ENTITY_PAGE.to_string())];
        super::paged(
            self.client,
            USAGE_LIMIT_ENTITIES,
            &[id],
            pairs,
            |e: &UsageEntity| e.id.as_str(),
        )
        .await
    }

    /// Brings one entity's usage back to zero.
    pub async fn reset_entity(&self, id: &str, entity: &str) -> Result<(), ApiError> {
        super::require("policyUsageLimitsId", id)?;
        super::require("entityId", entity)?;
        let call = Call::new(Route::mgmt(
            Verb::Put,
            USAGE_LIMIT_ENTITY_RESET,
            &[id, entity],
        ));
        self.client.empty(call).await
    }
}
