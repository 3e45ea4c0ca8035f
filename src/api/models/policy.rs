//! What rate-limits and usage-limits policies share: conditions, grouping keys and status, the
//! read model around each kind's limit and the list filters around each kind's own.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use serde_with::skip_serializing_none;

use super::de;
use super::deployment::enum_str;
use super::query::{self, ListQuery};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyStatus {
    Active,
    Archived,
}

/// One value or several (`value` and `excludes` of a condition).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

/// Which requests the policy applies to. `key` is `api_key`, `organisation_id`, `workspace_id` or
/// `metadata.*`. Also a request body part the operator builds field by field, so it has no
/// catch-all for unknown fields: those of a read condition are dropped.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Condition {
    pub key: String,
    pub value: OneOrMany,
    pub excludes: Option<OneOrMany>,
}

/// A grouping key; same key set as [`Condition`]. Immutable after create. A request body part
/// too, without a catch-all, like [`Condition`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupBy {
    pub key: String,
}

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
