//! What rate-limits and usage-limits policies share: the read model around each kind's limit
//! and the list filters around each kind's own.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use serde_with::skip_serializing_none;

use super::de;
use super::deployment::enum_str;
use super::query::{self, ListQuery};
use super::rate_limits::{Condition, GroupBy, PolicyStatus};

/// A policy as reads return it: which requests it applies to, how they are grouped, where it
/// lives and its lifecycle, around `limit`, what the kind limits and how
/// ([`RateLimitsPolicy`](super::RateLimitsPolicy), [`UsageLimitsPolicy`](super::UsageLimitsPolicy)).
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LimitsPolicy<L> {
    pub id: String,
    pub name: Option<String>,
    pub description: Option<String>,
    #[serde(default, deserialize_with = "de::null_as_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, deserialize_with = "de::null_as_empty")]
    pub group_by: Vec<GroupBy>,
    #[serde(flatten)]
    pub limit: L,
    pub status: PolicyStatus,
    pub workspace_id: Option<String>,
    pub organisation_id: Option<String>,
    pub created_at: Option<String>,
    pub last_updated_at: Option<String>,
    /// Fields not modelled here, kept as sent (after `limit` took its own).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Filters of a policy list: the workspace, the status and the kind's own (`F`). The client
/// pages through every page itself.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PolicyListQuery<F> {
    /// Workspace id or slug.
    pub workspace_id: Option<String>,
    /// The API defaults to `active`.
    pub status: Option<PolicyStatus>,
    pub filters: F,
    /// Rows per page request; the server's default when `None`.
    pub page_size: Option<u32>,
}

impl<F: ListQuery> ListQuery for PolicyListQuery<F> {
    fn to_pairs(&self) -> Vec<(&'static str, String)> {
        let mut pairs = query::filters([
            ("workspace_id", self.workspace_id.clone()),
            ("status", self.status.as_ref().map(enum_str)),
        ]);
        pairs.extend(self.filters.to_pairs());
        pairs.extend(query::filters([(
            "page_size",
            query::number(self.page_size),
        )]));
        pairs
    }
}
