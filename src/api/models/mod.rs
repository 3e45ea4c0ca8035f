//! Wire models of every resource the seed and FACTS.md describe. Reads are tolerant (both envelope
//! shapes, `0`/`1` flags, `config` as a string, unknown fields and unknown enum values); request
//! bodies send only the fields that are set.

mod config;
pub mod de;
mod deployment;
mod envelope;
mod error;
mod guardrail;
mod open_enum;
mod output;
mod rate_limits;
mod response;
mod tool;
mod usage_limits;
pub mod validate;
mod vector_store_file;

#[cfg(test)]
mod tests;

pub use config::*;
pub use deployment::*;
pub use envelope::{ListPage, Listing, StreamedPage, unwrap_success};
pub use error::{ApiErrorBody, ErrorEnvelope, ErrorObject};
pub use guardrail::*;
pub use output::*;
pub use rate_limits::*;
pub use response::*;
pub use tool::*;
pub use usage_limits::*;
pub use validate::Validate;
pub use vector_store_file::*;
