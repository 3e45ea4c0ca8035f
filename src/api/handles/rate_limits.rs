use crate::api::client::{Call, Client};
use crate::api::error::ApiError;
use crate::api::models::{
    CreateRateLimitsPolicyRequest, Listing, PolicyCreated, PolicyStatus, RateLimitsListQuery,
    RateLimitsPolicy, UpdateRateLimitsPolicyRequest, Validate, enum_str,
};
use crate::api::routes::{RATE_LIMIT, RATE_LIMITS, Route, Verb};

/// Rate limits policies (`/ai_gw/v2/policies/rate-limits`).
#[derive(Debug, Clone, Copy)]
pub struct RateLimits<'c> {
    client: &'c Client,
}

impl<'c> RateLimits<'c> {
    pub(crate) fn new(client: &'c Client) -> Self {
        Self { client }
    }

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
        req.validate()?;
        let call = Call::new(Route::mgmt(Verb::Post, RATE_LIMITS, &[])).json(req)?;
        self.client.json(call).await
    }

    /// An active policy; archived ones read as not found unless asked for with [`Self::get_with_status`].
    pub async fn get(&self, id: &str) -> Result<RateLimitsPolicy, ApiError> {
        super::require("rateLimitsPolicyId", id)?;
        let call = Call::new(Route::mgmt(Verb::Get, RATE_LIMIT, &[id]));
        self.client.json(call).await
    }

    pub async fn get_with_status(
        &self,
        id: &str,
        status: PolicyStatus,
    ) -> Result<RateLimitsPolicy, ApiError> {
        super::require("rateLimitsPolicyId", id)?;
        let call = Call::new(Route::mgmt(Verb::Get, RATE_LIMIT, &[id]))
            .query(vec![("status", enum_str(&status))]);
        self.client.json(call).await
    }

    /// `type`, `group_by`, `target` and `workspace_id` cannot change; recreate the policy instead.
    pub async fn update(
        &self,
        id: &str,
        req: &UpdateRateLimitsPolicyRequest,
    ) -> Result<(), ApiError> {
        super::require("rateLimitsPolicyId", id)?;
        req.validate()?;
        let call = Call::new(Route::mgmt(Verb::Put, RATE_LIMIT, &[id])).json(req)?;
        self.client.empty(call).await
    }

    pub async fn delete(&self, id: &str) -> Result<(), ApiError> {
        super::require("rateLimitsPolicyId", id)?;
        self.client
            .empty(Call::new(Route::mgmt(Verb::Delete, RATE_LIMIT, &[id])))
            .await
    }
}
