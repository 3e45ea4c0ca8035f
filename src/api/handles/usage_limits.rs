//! The usage-limits policies' own calls: the usage per value of the grouping key, and its reset.

use crate::api::error::ApiError;
use crate::api::models::{Listing, UsageEntity};
use crate::api::routes::{USAGE_LIMIT_ENTITIES, USAGE_LIMIT_ENTITY_RESET, Verb};

use super::policies::UsageLimits;

/// The largest page the entity list serves.
const ENTITY_PAGE: u32 = 100;

impl UsageLimits<'_> {
    /// Every value of the policy's grouping key that has usage, all pages, read once: a reset
    /// acts on each row it sees, and an entity that joins meanwhile is no reason to read again
    /// (a second reading that disagreed would send the reset round again, zeroing usage gained
    /// since).
    pub async fn entities(&self, id: &str) -> Result<Listing<UsageEntity>, ApiError> {
        let pairs = vec![("page_size", ENTITY_PAGE.to_string())];
        super::paged(
            self.client,
            USAGE_LIMIT_ENTITIES,
            &[id],
            pairs,
            |e: &UsageEntity| e.id.as_str(),
            super::Reading::Once,
        )
        .await
    }

    /// Brings one entity's usage back to zero.
    pub async fn reset_entity(&self, id: &str, entity: &str) -> Result<(), ApiError> {
        let call = super::at(Verb::Put, USAGE_LIMIT_ENTITY_RESET, &[id, entity])?;
        self.client.empty(call).await
    }
}
