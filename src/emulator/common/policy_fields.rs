//! What rate-limits and usage-limits policies share on the wire: `conditions`, `group_by`, the
//! `status` filter with its `active` default, archiving ([`Policy`]), 0-based paging, immutable
//! fields on update, and how the `normalise` fault reorders a read. Kept in one place so the two
//! siblings cannot drift. The paged list envelope and the `search` and `type` filters serve the
//! other kinds' lists too.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::{
    clock::touched,
    errors::{ApiResult, EmulatorError},
    fields::{self, Object},
    records::{Record, Records, missing},
    state::Common,
};

/// A policy's `status`; DELETE archives, the `status` filter picks one of them.
pub const STATUSES: &[&str] = &["active", "archived"];

/// Rows per page when a list names no (or a zero) `page_size`.
pub const DEFAULT_PAGE_SIZE: usize = 100;

/// A required field that must be one of `allowed`.
pub fn required_enum(body: &Object, field: &str, allowed: &[&str]) -> ApiResult<String> {
    fields::opt_enum(body, field, allowed)?.ok_or_else(|| fields::required(field))
}

/// Keys a condition or `group_by` may name: `api_key`, `organisation_id`, `workspace_id`, or
/// `metadata.<key>` (Portkey's published description of `Condition.key`).
fn valid_key(key: &str) -> bool {
    matches!(key, "api_key" | "organisation_id" | "workspace_id")
        || key
            .strip_prefix("metadata.")
            .is_some_and(|rest| !rest.is_empty())
}

fn check_keys(field: &str, items: &[Value]) -> ApiResult<()> {
    match items
        .iter()
        .filter_map(|item| item.get("key").and_then(Value::as_str))
        .find(|key| !valid_key(key))
    {
        Some(key) => Err(EmulatorError::validation(format!(
            "{field}: unknown key {key:?}; use api_key, organisation_id, workspace_id or metadata.<key>"
        ))),
        None => Ok(()),
    }
}

/// `conditions`: at least one `{key, value: string | string[], excludes?: string | string[]}`.
pub fn conditions(body: &Object, field: &str) -> ApiResult<Vec<Value>> {
    let items = fields::opt_array(body, field)?.unwrap_or_default();
    if items.is_empty() {
        return Err(EmulatorError::validation(format!(
            "{field} must have at least one item"
        )));
    }
    let string_or_list = |value: Option<&Value>| match value {
        Some(Value::String(_)) => true,
        Some(Value::Array(items)) => items.iter().all(Value::is_string),
        _ => false,
    };
    for item in &items {
        let valid = item.get("key").is_some_and(Value::is_string)
            && string_or_list(item.get("value"))
            && item
                .get("excludes")
                .is_none_or(|ex| ex.is_null() || string_or_list(Some(ex)));
        if !valid {
            return Err(EmulatorError::validation(format!(
                "{field} items need a string key and a string (or string array) value"
            )));
        }
    }
    check_keys(field, &items)?;
    Ok(items)
}

/// `conditions` on an update: absent or `null` leaves them as they are.
pub fn opt_conditions(body: &Object) -> ApiResult<Option<Vec<Value>>> {
    match body.get("conditions") {
        None | Some(Value::Null) => Ok(None),
        Some(_) => conditions(body, "conditions").map(Some),
    }
}

/// `group_by`: at least one `{key}`.
pub fn group_by(body: &Object) -> ApiResult<Vec<Value>> {
    let items = fields::opt_array(body, "group_by")?.unwrap_or_default();
    if items.is_empty() {
        return Err(EmulatorError::validation(
            "group_by must have at least one item",
        ));
    }
    if !items
        .iter()
        .all(|item| item.get("key").is_some_and(Value::is_string))
    {
        return Err(EmulatorError::validation(
            "group_by items need a string key",
        ));
    }
    check_keys("group_by", &items)?;
    Ok(items)
}

/// Refuses an update that sends an immutable field with a value other than the current one
/// (sending the current value, or `null`, is accepted): the API wants the policy recreated.
pub fn reject_changes(body: &Object, immutable: &[(&str, Value)]) -> ApiResult<()> {
    fields::reject_changes(body, immutable, "delete and recreate the policy")
}

/// A policy record: reads filter on its `status`, DELETE archives it.
pub trait Policy: Record {
    /// `active` or `archived`.
    fn status(&self) -> &str;
    /// `status` and `last_updated_at`, for [`archive`].
    fn lifecycle(&mut self) -> (&mut String, &mut String);
}

/// The policy `id` names if its status is `status`, else the API's answer for a missing one.
pub fn in_status<'a, R: Policy>(
    store: &'a Records<R>,
    common: &Common,
    id: &str,
    status: &str,
) -> ApiResult<&'a R> {
    store
        .find(id)
        .filter(|r| r.status() == status)
        .ok_or_else(|| missing::<R>(common, id))
}

/// The policy `id` names if it is active (only active policies take writes), else the API's
/// answer for a missing one.
pub fn active_mut<'a, R: Policy>(
    store: &'a mut Records<R>,
    common: &Common,
    id: &str,
) -> ApiResult<&'a mut R> {
    store
        .find_mut(id)
        .filter(|r| r.status() == "active")
        .ok_or_else(|| missing::<R>(common, id))
}

/// DELETE: archives the active policy `id` names.
pub fn archive<R: Policy>(store: &mut Records<R>, common: &Common, id: &str) -> ApiResult<()> {
    let (status, last_updated_at) = active_mut(store, common, id)?.lifecycle();
    *status = "archived".to_owned();
    *last_updated_at = touched(last_updated_at);
    Ok(())
}

/// Reads the `status` query filter (default `active`).
pub fn status_filter(query: &HashMap<String, String>) -> ApiResult<String> {
    match query.get("status") {
        None => Ok("active".to_owned()),
        Some(status) => fields::check_enum("status", Some(status), STATUSES),
    }
}

/// An optional enumerated query filter.
pub fn enum_filter(
    query: &HashMap<String, String>,
    name: &str,
    allowed: &[&str],
) -> ApiResult<Option<String>> {
    query
        .get(name)
        .map(|value| fields::check_enum(name, Some(value), allowed))
        .transpose()
}

/// The `type` list filter of integrations and MCP integrations: `workspace` or `organisation`
/// scoped ones, or `all` (also when absent).
pub struct ScopeFilter(Option<String>);

impl ScopeFilter {
    pub fn parse(query: &HashMap<String, String>) -> ApiResult<Self> {
        enum_filter(query, "type", &["workspace", "organisation", "all"]).map(Self)
    }

    /// Whether an object of that `workspace_id` (`None`: organisation scoped) is listed.
    pub fn admits<T>(&self, workspace_id: Option<&T>) -> bool {
        match self.0.as_deref() {
            Some("workspace") => workspace_id.is_some(),
            Some("organisation") => workspace_id.is_none(),
            _ => true,
        }
    }
}

/// A non-negative integer query parameter.
pub fn page_param(query: &HashMap<String, String>, name: &str, default: usize) -> ApiResult<usize> {
    match query.get(name) {
        None => Ok(default),
        Some(text) => text
            .parse::<usize>()
            .map_err(|_| EmulatorError::validation(format!("{name} must be an integer >= 0"))),
    }
}

/// A policy list's `(page_size, current_page)`: a `page_size` of 0 (or none) means the default.
pub fn policy_page(query: &HashMap<String, String>) -> ApiResult<(usize, usize)> {
    let page_size = match page_param(query, "page_size", DEFAULT_PAGE_SIZE)? {
        0 => DEFAULT_PAGE_SIZE,
        size => size,
    };
    Ok((page_size, page_param(query, "current_page", 0)?))
}

/// One 0-based page of `rows`.
pub fn page<T>(rows: Vec<T>, page_size: usize, current_page: usize) -> Vec<T> {
    rows.into_iter()
        .skip(current_page.saturating_mul(page_size))
        .take(page_size)
        .collect()
}

/// `{object: "list", total, data}`: the 0-based page of `matching`, each row shown by `row`.
pub fn list_body<T>(
    matching: Vec<T>,
    page_size: usize,
    current_page: usize,
    row: impl FnMut(T) -> Value,
) -> Value {
    let total = matching.len();
    let data: Vec<Value> = page(matching, page_size, current_page)
        .into_iter()
        .map(row)
        .collect();
    json!({"object": "list", "total": total, "data": data})
}

/// The `search` query filter: a case-insensitive part of `name` (absent: everything).
pub fn searched(query: &HashMap<String, String>, name: &str) -> bool {
    query
        .get("search")
        .is_none_or(|s| name.to_lowercase().contains(&s.to_lowercase()))
}

/// A read as a normalising server returns it: `conditions` and `group_by` in reverse order (the
/// rest of the reordering is [`super::normalise::reply`]'s).
pub fn normalised(mut read: Value, normalise: bool) -> Value {
    if normalise {
        for field in ["conditions", "group_by"] {
            if let Some(items) = read[field].as_array_mut() {
                items.reverse();
            }
        }
    }
    read
}
