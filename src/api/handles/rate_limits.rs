use crate::api::error::ApiError;
use crate::api::models::{
    CreateRateLimitsPolicyRequest, Listing, PolicyCreated, PolicyStatus, RateLimitsListQuery,
    RateLimitsPolicy, UpdateRateLimitsPolicyRequest, enum_str,
};
use crate::api::routes::{RATE_LIMIT, RATE_LIMITS, Verb};

/// Rate limits policies (`/ai_gw/v2/policies/rate-limits`).
pub type RateLimits<'c> = super::Endpoint<'c, RateLimitsPolicy>;

impl RateLimits<'_> {
    /// Every matching policy: pages through `current_page` (0-based) until `total` rows arrived,
    /// or a page comes back empty.
    pub async fn list(
        &self,
        query: &RateLimitsListQuery,
    ) -> Result<Vec<RateLimitsPolicy>, ApiError> {
        Ok(self.listing(query).await?.items)
    }

    /// Like [`Self::list`], saying whether the pages prove the whole list (see `paged`).
    pub async fn listing(
        &self,
        query: &RateLimitsListQuery,
    ) -> Result<Listing<RateLimitsPolicy>, ApiError> {
        super::paged(
            self.client,
            RATE_LIMITS,
            &[],
            query.to_pairs(),
            |p: &RateLimitsPolicy| p.id.as_str(),
        )
        .await
    }

    /// Not retried when the answer is lost (`outcome_unknown()`).
    pub async fn create(
        &self,
        req: &CreateRateLimitsPolicyRequest,
    ) -> Result<PolicyCreated, ApiError> {
        let call = super::post(RATE_LIMITS, req)?;
        self.client.json(call).await
    }

    /// An active policy; archived ones read as not found unless asked for with [`Self::get_with_status`].
    pub async fn get(&self, id: &str) -> Result<RateLimitsPolicy, ApiError> {
        let call = super::on(Verb::Get, RATE_LIMIT, "rateLimitsPolicyId", id)?;
        self.client.json(call).await
    }

    pub async fn get_with_status(
        &self,
        id: &str,
        status: PolicyStatus,
    ) -> Result<RateLimitsPolicy, ApiError> {
        let call = super::on(Verb::Get, RATE_LIMIT, "rateLimitsPolicyId", id)?
            .query(vec![("status", enum_str(&status))]);
        self.client.json(call).await
    }

    /// `type`, `group_by`, `target` and `workspace_id` cannot change; recreate the policy instead.
    pub async fn update(
        &self,
        id: &str,
        req: &UpdateRateLimitsPolicyRequest,
    ) -> Result<(), ApiError> {
        let call = super::send(Verb::Put, RATE_LIMIT, "rateLimitsPolicyId", id, req)?;
        self.client.empty(call).await
    }

    pub async fn delete(&self, id: &str) -> Result<(), ApiError> {
        let call = super::on(Verb::Delete, RATE_LIMIT, "rateLimitsPolicyId", id)?;
        self.client.empty(call).await
    }
}
