use crate::api::client::{Call, Client};
use crate::api::error::ApiError;
use crate::api::models::{
    CreateRateLimitsPolicyRequest, ListPage, Listing, PolicyCreated, PolicyStatus,
    RateLimitsListQuery, RateLimitsPolicy, UpdateRateLimitsPolicyRequest, Validate, enum_str,
};
use crate::api::routes::{RATE_LIMIT, RATE_LIMITS, Route, Verb};

/// Safety stop for a server whose `total` never matches what it returns.
const MAX_PAGES: u32 = 10_000;

/// Rate limits policies (`/ai_gw/v2/policies/rate-limits`).
#[derive(Debug, Clone, Copy)]
pub struct RateLimits<'c> {
    client: &'c Client,
}

/// The page size a query asks for, when it sets one.
fn page_size_of(query: &RateLimitsListQuery) -> Option<u64> {
    query
        .to_pairs()
        .into_iter()
        .find(|(k, _)| *k == "page_size")
        .and_then(|(_, v)| v.parse().ok())
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

    /// Like [`Self::list`], saying whether the pages prove the whole list: every page up to
    /// `total` arrived, every page reported the same `total`, and no row came twice (a row seen
    /// twice means rows shifted between pages, so another may have been skipped). Anything else
    /// (an early empty page, a changed total, shifted rows) leaves it incomplete: not proof of
    /// absence.
    pub async fn listing(
        &self,
        query: &RateLimitsListQuery,
    ) -> Result<Listing<RateLimitsPolicy>, ApiError> {
        let mut all: Vec<RateLimitsPolicy> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut first_total = None;
        let mut consistent = true;
        let mut complete = false;
        for page_no in 0..MAX_PAGES {
            let mut pairs = query.to_pairs();
            pairs.push(("current_page", page_no.to_string()));
            let call = Call::new(Route::mgmt(Verb::Get, RATE_LIMITS, &[])).query(pairs);
            let page: ListPage<RateLimitsPolicy> = self.client.json(call).await?;
            let got = page.data.len();
            if page_no == 0 {
                first_total = page.total;
            } else if page.total != first_total {
                consistent = false;
            }
            for policy in page.data {
                if !policy.id.is_empty() && !seen.insert(policy.id.clone()) {
                    consistent = false;
                    continue;
                }
                all.push(policy);
            }
            let done = match page.total {
                Some(total) => all.len() as u64 >= total,
                None => got == 0 || page_size_of(query).is_none_or(|size| (got as u64) < size),
            };
            if done {
                complete = consistent;
                break;
            }
            if got == 0 {
                break;
            }
        }
        Ok(Listing {
            items: all,
            complete,
        })
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
