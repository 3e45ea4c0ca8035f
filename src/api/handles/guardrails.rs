use crate::api::client::{Call, Client};
use crate::api::error::ApiError;
use crate::api::models::{GuardrailList, GuardrailListQuery, GuardrailSummary, Validate};
use crate::api::routes::{GUARDRAILS, Route, Verb};

/// The organisation's guardrails (`/ai_gw/admin/v2/guardrails`).
#[derive(Debug, Clone, Copy)]
pub struct Guardrails<'c> {
    client: &'c Client,
}

impl<'c> Guardrails<'c> {
    pub(crate) fn new(client: &'c Client) -> Self {
        Self { client }
    }

    /// One page: `page_size` 1..=1000 (server default 100), `current_page` from 0.
    pub async fn list(
        &self,
        page_size: Option<u32>,
        current_page: Option<u32>,
    ) -> Result<GuardrailList, ApiError> {
        let query = GuardrailListQuery {
            page_size,
            current_page,
        };
        query.validate()?;
        let mut pairs = Vec::new();
        if let Some(size) = page_size {
            pairs.push(("page_size", size.to_string()));
        }
        if let Some(page) = current_page {
            pairs.push(("current_page", page.to_string()));
        }
        let call = Call::new(Route::mgmt(Verb::Get, GUARDRAILS, &[])).query(pairs);
        self.client.json(call).await
    }

    /// Every guardrail, read page by page at the largest page size until `total` is reached (or
    /// a page comes back empty, so a shrinking list cannot loop). A reference check needs the
    /// whole list: a slug on a later page is as real as one on the first.
    pub async fn list_all(&self) -> Result<Vec<GuardrailSummary>, ApiError> {
        let mut all = Vec::new();
        for page in 0..MAX_PAGES {
            let listing = self.list(Some(PAGE_SIZE), Some(page)).await?;
            let fetched = listing.data.len();
            all.extend(listing.data);
            if fetched == 0 || all.len() as u64 >= listing.total {
                break;
            }
        }
        Ok(all)
    }
}

/// The largest page the API serves.
const PAGE_SIZE: u32 = 1000;

/// A bound on pages read in one listing (a million guardrails), against a server whose `total`
/// never stops growing.
const MAX_PAGES: u32 = 1000;
