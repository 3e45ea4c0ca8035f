//! Resource handles: `client.configs().update(slug, &req)`. Each borrows the client.

mod configs;
mod deployments;
mod guardrails;
mod rate_limits;
mod responses;
mod vector_store_files;

pub use configs::Configs;
pub use deployments::Deployments;
pub use guardrails::Guardrails;
pub use rate_limits::RateLimits;
pub use responses::Responses;
pub use vector_store_files::VectorStoreFiles;

use super::error::ApiError;

/// Rejects an empty path identifier, which would silently address the collection instead.
fn require(field: &str, value: &str) -> Result<(), ApiError> {
    if value.trim().is_empty() {
        return Err(ApiError::validation(field, "must not be empty"));
    }
    Ok(())
}
