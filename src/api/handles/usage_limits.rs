use crate::api::client::Call;
use crate::api::error::ApiError;
use crate::api::models::{
    CreateUsageLimitsPolicyRequest, Listing, PolicyCreated, PolicyStatus,
    UpdateUsageLimitsPolicyRequest, UsageEntity, UsageLimitsListQuery, UsageLimitsPolicy, enum_str,
};
use crate::api::routes::{
    Route, USAGE_LIMIT, USAGE_LIMIT_ENTITIES, USAGE_LIMIT_ENTITY_RESET, USAGE_LIMITS, Verb,
};

/// Usage-limits policies (`/ai_gw/v2/policies/usage-limits`).
pub type UsageLimits<'c> = super::Endpoint<'c, UsageLimitsPolicy>;

/// The largest page the entity list serves.
const ENTITY_PAGE: u32 = 100;

impl UsageLimits<'_> {
    /// Every matching policy, all pages.
    pub async fn list(
        &self,
        query: &UsageLimitsListQuery,
    ) -> Result<Vec<UsageLimitsPolicy>, ApiError> {
        Ok(self.listing(query).await?.items)
    }

    /// Like [`Self::list`], saying whether the pages prove the whole list.
    pub async fn listing(
        &self,
        query: &UsageLimitsListQuery,
    ) -> Result<Listing<UsageLimitsPolicy>, ApiError> {
        super::paged(
            self.client,
            USAGE_LIMITS,
            &[],
            query.to_pairs(),
            |p: &UsageLimitsPolicy| p.id.as_str(),
        )
        .await
    }

    /// Not retried when the answer is lost (`outcome_unknown()`).
    pub async fn create(
        &self,
        req: &CreateUsageLimitsPolicyRequest,
    ) -> Result<PolicyCreated, ApiError> {
        let call = super::post(USAGE_LIMITS, req)?;
        self.client.json(call).await
    }

    /// An active policy, with the usage per value of its grouping key; an archived one reads as
    /// not found unless asked for with [`Self::get_with_status`].
    pub async fn get(&self, id: &str) -> Result<UsageLimitsPolicy, ApiError> {
        let call = super::on(Verb::Get, USAGE_LIMIT, "policyUsageLimitsId", id)?
            .query(vec![("include_usage", "true".to_string())]);
        self.client.json(call).await
    }

    pub async fn get_with_status(
        &self,
        id: &str,
        status: PolicyStatus,
    ) -> Result<UsageLimitsPolicy, ApiError> {
        let call = super::on(Verb::Get, USAGE_LIMIT, "policyUsageLimitsId", id)?
            .query(vec![("status", enum_str(&status))]);
        self.client.json(call).await
    }

    /// `type`, `group_by` and `workspace_id` cannot change; recreate the policy instead. Never
    /// resets usage (see [`Self::reset_entity`]).
    pub async fn update(
        &self,
        id: &str,
        req: &UpdateUsageLimitsPolicyRequest,
    ) -> Result<(), ApiError> {
        let call = super::send(Verb::Put, USAGE_LIMIT, "policyUsageLimitsId", id, req)?;
        self.client.empty(call).await
    }

    /// Archives the policy (the API keeps it, readable with `?status=archived`).
    pub async fn delete(&self, id: &str) -> Result<(), ApiError> {
        let call = super::on(Verb::Delete, USAGE_LIMIT, "policyUsageLimitsId", id)?;
        self.client.empty(call).await
    }

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
