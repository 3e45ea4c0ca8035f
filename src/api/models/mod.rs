//! Wire models of every resource the seed and FACTS.md describe. Reads are tolerant (both envelope
//! shapes, `0`/`1` flags, `config` as a string, unknown fields and unknown enum values); request
//! bodies send only the fields that are set.
//!
//! Read models keep what they do not name, so serialising one (what `aigw api` prints) gives back
//! every field the API sent: each has a flattened `extra` catch-all (a [`SensitiveFields`] on
//! deployment answers, whose `Debug` hides the values), a tagged enum's known kind keeps its
//! unknown fields in its own `extra`, and an unknown kind is kept whole as `Other`/`Unknown`. The
//! fields the seed names stay typed. Left without a catch-all on purpose: [`ConfigStamp`] (the
//! drift check's row, decoded for every config on every pass and never printed) and
//! [`Condition`]/[`GroupBy`] (request body parts the operator builds field by field).

mod api_keys;
mod config;
pub mod de;
mod deployment;
mod envelope;
mod error;
mod guardrail;
mod integration;
mod mcp;
mod open_enum;
mod output;
mod policy;
mod provider;
mod query;
mod rate_limits;
mod response;
mod secret_reference;
mod telemetry;
mod tool;
mod usage_limits;
pub mod validate;
mod vector_store_file;
mod workspace;

#[cfg(test)]
mod tests;

pub use api_keys::*;
pub use config::*;
pub use deployment::*;
pub use envelope::{ListPage, Listing, MorePage, StreamedPage, unwrap_success};
pub use error::{ApiErrorBody, ErrorEnvelope, ErrorObject};
pub use guardrail::*;
pub use integration::*;
pub use mcp::*;
pub use output::*;
pub use policy::{Condition, GroupBy, LimitsPolicy, OneOrMany, PolicyListQuery, PolicyStatus};
pub use provider::*;
pub use query::{ListQuery, WorkspaceListQuery};
pub use rate_limits::*;
pub use response::*;
pub use secret_reference::*;
pub use telemetry::*;
pub use tool::*;
pub use usage_limits::*;
pub use validate::Validate;
pub use vector_store_file::*;
pub use workspace::*;
