//! `GET /ai_gw/admin/v2/guardrails` and `GET /ai_gw/v2/guardrails` (identical), plus a single-item
//! read. Guardrails are preloaded through `/_emulator/seed`; paging errors and missing guardrails
//! answer with the seed's error envelope (400 and 403).

use std::collections::HashMap;

use axum::{
    Json,
    extract::{Path, Query, State},
};
use serde_json::{Value, json};

use super::{
    errors::{ApiResult, EmulatorError},
    fields::{self, Object},
    state::{Shared, lock, make_slug, new_id, now},
};

const MAX_PAGE_SIZE: u64 = 1000;
const DEFAULT_PAGE_SIZE: u64 = 100;

/// Fills the defaults of a seeded guardrail summary; returns it with its `(id, slug)`.
pub fn seeded(state: &Shared, item: &Object) -> (Value, String, String) {
    let name = fields::str_or(item, "name", "seeded guardrail");
    let created_at = fields::str_or(item, "created_at", now());
    let mut value = item.clone();
    let mut default = |field: &str, fallback: Value| {
        if !value.contains_key(field) {
            value.insert(field.to_owned(), fallback);
        }
    };
    default("id", json!(new_id()));
    default("slug", json!(make_slug("pg", &name)));
    default("name", json!(name));
    default("last_updated_at", json!(created_at));
    default("created_at", json!(created_at));
    default("owner_id", json!(state.user_id));
    default("organisation_id", json!(state.organisation_id));
    default("workspace_id", json!(state.default_workspace_id));
    default("status", json!("active"));
    default("updated_by", json!(state.user_id));
    default("target", json!("llm"));
    default("object", json!("guardrail"));
    let id = fields::str_or(&value, "id", "");
    let slug = fields::str_or(&value, "slug", "");
    (Value::Object(value), id, slug)
}

/// Parses one paging parameter; bad values get the error envelope naming the parameter.
fn page_param(
    query: &HashMap<String, String>,
    param: &'static str,
    default: u64,
    range: std::ops::RangeInclusive<u64>,
) -> ApiResult<u64> {
    let Some(text) = query.get(param) else {
        return Ok(default);
    };
    let bounds = if *range.end() == u64::MAX {
        format!("an integer >= {}", range.start())
    } else {
        format!("an integer between {} and {}", range.start(), range.end())
    };
    text.trim()
        .parse::<u64>()
        .ok()
        .filter(|value| range.contains(value))
        .ok_or_else(|| EmulatorError::InvalidParam {
            param,
            message: format!("{param} must be {bounds}"),
        })
}

/// `GET …/guardrails?page_size=1..1000&current_page=0..` → `{data, total}`.
pub async fn list(
    State(state): State<Shared>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let page_size = page_param(&query, "page_size", DEFAULT_PAGE_SIZE, 1..=MAX_PAGE_SIZE)?;
    let current_page = page_param(&query, "current_page", 0, 0..=u64::MAX)?;
    let workspace = query.get("workspace_id").filter(|ws| !ws.is_empty());
    let guardrails = lock(&state.guardrails);
    let matching: Vec<&Value> = guardrails
        .iter()
        .filter(|g| {
            workspace.is_none_or(|ws| g.get("workspace_id").and_then(Value::as_str) == Some(ws))
        })
        .collect();
    let total = matching.len();
    let skip = usize::try_from(current_page.saturating_mul(page_size)).unwrap_or(usize::MAX);
    let take = usize::try_from(page_size).unwrap_or(usize::MAX);
    let data: Vec<Value> = matching
        .into_iter()
        .skip(skip)
        .take(take)
        .cloned()
        .collect();
    Ok(Json(json!({ "data": data, "total": total })))
}

/// `GET …/guardrails/{id}` (UUID or slug); a missing guardrail is 403, as the API reports it.
pub async fn get(State(state): State<Shared>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let guardrails = lock(&state.guardrails);
    guardrails
        .iter()
        .find(|g| {
            let field = |name: &str| g.get(name).and_then(Value::as_str);
            field("id") == Some(id.as_str()) || field("slug") == Some(id.as_str())
        })
        .cloned()
        .map(Json)
        .ok_or_else(|| EmulatorError::GuardrailNotFound(format!("guardrail {id} not found")))
}
