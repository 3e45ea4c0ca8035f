//! The query strings of list calls.

/// The filters of a list call.
pub trait ListQuery {
    /// The query pairs: each filter that is set.
    fn to_pairs(&self) -> Vec<(&'static str, String)>;
}

/// The pairs of a list query: each filter that is set, in the order given.
pub(crate) fn filters<const N: usize>(
    filters: [(&'static str, Option<String>); N],
) -> Vec<(&'static str, String)> {
    filters
        .into_iter()
        .filter_map(|(key, value)| Some((key, value?)))
        .collect()
}

/// A number filter's value.
pub(crate) fn number(value: Option<u32>) -> Option<String> {
    value.map(|n| n.to_string())
}

/// The filters of a list that takes a workspace only (API keys, providers). The client pages
/// through every page itself.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WorkspaceListQuery {
    pub workspace_id: Option<String>,
    /// Rows per page request; the server's default when `None`.
    pub page_size: Option<u32>,
}

impl ListQuery for WorkspaceListQuery {
    fn to_pairs(&self) -> Vec<(&'static str, String)> {
        filters([
            ("workspace_id", self.workspace_id.clone()),
            ("page_size", number(self.page_size)),
        ])
    }
}
