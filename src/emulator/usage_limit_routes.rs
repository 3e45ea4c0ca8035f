//! `/ai_gw/v2/policies/usage-limits` and its entities, plus the control endpoint that stands in
//! for gateway traffic (`POST /_emulator/usage-limits/{id}/usage`). The store and the usage rules
//! are in `usage_limits`.
//!
//! Like rate limits: `workspace_id` (body and list query) is a workspace UUID or slug,
//! `organisation_id` in a create body a UUID; DELETE archives, so a default (`status=active`) GET
//! answers 404 afterwards while `?status=archived` finds the record; writes, entity reads and
//! resets of an archived policy are 404. `credit_limit` is a required number ≥ 0 (`null` is a
//! 400 on create and update) and `alert_threshold`, when set, must stay below it (FACTS §4).
//! `periodic_reset` and `periodic_reset_days` are the two forms of a periodic reset: a request
//! that sets both is a 400; an update that sets one clears the other, and `null` clears either.

use std::{collections::HashMap, time::Instant};

use axum::{
    Json,
    body::Bytes,
    extract::{Path, Query, State},
    response::Response,
};
use serde_json::{Number, Value, json};

use super::{
    errors::{ApiResult, EmulatorError},
    fields::{self, IdRule, Object},
    normalise,
    policy_fields::{
        self, conditions, group_by, policy_page, reject_changes, required_enum, status_filter,
    },
    state::{Shared, lock, new_id, now, touched},
    usage_limits::{
        ENTITY_STATUSES, OBJECT, PERIODIC_RESETS, TYPES, UsageEntity, UsageLimitRecord,
    },
};

/// The entity list's `page_size` bounds (spec: 1–100); absent means the largest page.
const ENTITY_PAGE_SIZES: std::ops::RangeInclusive<usize> = 1..=100;

fn not_found(state: &Shared, id: &str) -> EmulatorError {
    state.missing(&format!("usage limits policy {id}"))
}

/// `periodic_reset_days`: an integer 1–365, or `null`.
fn opt_reset_days(body: &Object) -> ApiResult<Option<u64>> {
    match body.get("periodic_reset_days") {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_u64()
            .filter(|days| (1..=365).contains(days))
            .map(Some)
            .ok_or_else(|| {
                EmulatorError::validation("periodic_reset_days must be an integer from 1 to 365")
            }),
    }
}

/// The periodic reset a body asks for; refuses both forms at once.
fn reset_form(body: &Object) -> ApiResult<(Option<String>, Option<u64>)> {
    let reset = fields::opt_enum(body, "periodic_reset", PERIODIC_RESETS)?;
    let days = opt_reset_days(body)?;
    if reset.is_some() && days.is_some() {
        return Err(EmulatorError::validation(
            "periodic_reset and periodic_reset_days cannot both be set; choose one",
        ));
    }
    Ok((reset, days))
}

/// `alert_threshold` must stay below `credit_limit` (FACTS §4).
fn check_threshold(credit_limit: &Number, alert_threshold: Option<&Number>) -> ApiResult<()> {
    let limit = credit_limit.as_f64().unwrap_or(0.0);
    match alert_threshold.and_then(Number::as_f64) {
        Some(threshold) if threshold >= limit => Err(EmulatorError::validation(
            "alert_threshold must be less than credit_limit",
        )),
        _ => Ok(()),
    }
}

/// A nullable timestamp field of an update: `Some(None)` clears it.
fn opt_timestamp(body: &Object, field: &str) -> ApiResult<Option<Option<String>>> {
    match body.get(field) {
        None => Ok(None),
        Some(Value::Null) => Ok(Some(None)),
        Some(Value::String(text)) if text.parse::<jiff::Timestamp>().is_ok() => {
            Ok(Some(Some(text.clone())))
        }
        Some(_) => Err(EmulatorError::validation(format!(
            "{field} must be an RFC 3339 date-time or null"
        ))),
    }
}

/// `POST /ai_gw/v2/policies/usage-limits` → `{id, object: "policy_usage_limits"}`.
pub async fn create(State(state): State<Shared>, body: Bytes) -> ApiResult<Json<Value>> {
    let body = fields::parse_object(&body)?;
    IdRule::Uuid.opt_field(&body, "organisation_id")?;
    let credit_limit = fields::opt_number_not_null(&body, "credit_limit")?
        .ok_or_else(|| EmulatorError::validation("credit_limit is required"))?;
    let alert_threshold = fields::opt_number(&body, "alert_threshold")?;
    check_threshold(&credit_limit, alert_threshold.as_ref())?;
    let (periodic_reset, periodic_reset_days) = reset_form(&body)?;
    let created_at = now();
    let record = UsageLimitRecord {
        seq: state.next_seq(),
        api_created: Some(Instant::now()),
        id: new_id(),
        name: fields::opt_str_max(&body, "name", 255)?,
        description: fields::opt_str_max(&body, "description", 500)?,
        conditions: conditions(&body, "conditions")?,
        group_by: group_by(&body)?,
        kind: required_enum(&body, "type", TYPES)?,
        credit_limit,
        alert_threshold,
        periodic_reset,
        periodic_reset_days,
        next_usage_reset_at: None,
        last_reset_at: None,
        status: "active".to_owned(),
        workspace_id: IdRule::UuidOrSlug
            .opt_field(&body, "workspace_id")?
            .filter(|id| !id.is_empty())
            .unwrap_or_else(|| state.default_workspace_id.clone()),
        organisation_id: state.organisation_id.clone(),
        created_at: created_at.clone(),
        last_updated_at: created_at,
        created_by: state.user_id.clone(),
        entities: Vec::new(),
        resets: 0,
    };
    let receipt = json!({ "id": record.id, "object": OBJECT });
    lock(&state.usage_limits).insert(record);
    Ok(Json(receipt))
}

/// `GET /ai_gw/v2/policies/usage-limits` → `{object: "list", data, total}`, 0-based paging;
/// filters `workspace_id`, `status` (default `active`) and `type`. Honours `list_lag_ms` and
/// `normalise` as the rate-limit list does.
pub async fn list(
    State(state): State<Shared>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    IdRule::UuidOrSlug.query(&query, "workspace_id")?;
    let status = status_filter(&query)?;
    let kind = policy_fields::enum_filter(&query, "type", TYPES)?;
    let workspace = query.get("workspace_id").filter(|ws| !ws.is_empty());
    let (page_size, current_page) = policy_page(&query)?;

    let faults = state.faults();
    let store = lock(&state.usage_limits);
    let matching: Vec<&UsageLimitRecord> = store
        .sorted()
        .into_iter()
        .filter(|r| faults.listed(r.api_created))
        .filter(|r| r.status == status)
        .filter(|r| kind.as_ref().is_none_or(|k| &r.kind == k))
        .filter(|r| workspace.is_none_or(|ws| &r.workspace_id == ws))
        .collect();
    let total = matching.len();
    let data: Vec<Value> = policy_fields::page(matching, page_size, current_page)
        .into_iter()
        .map(|record| record.read_as(faults.normalise, false))
        .collect();
    let body = json!({ "object": "list", "data": data, "total": total });
    Ok(normalise::reply(&body, faults.normalise))
}

/// `include_usage`: `true` or `false` (default).
fn include_usage(query: &HashMap<String, String>) -> ApiResult<bool> {
    match query.get("include_usage").map(String::as_str) {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(_) => Err(EmulatorError::validation(
            "include_usage must be true or false",
        )),
    }
}

/// `GET /ai_gw/v2/policies/usage-limits/{id}` (`?status`, default `active`;
/// `?include_usage=true` adds `value_key_usage_map`).
pub async fn get(
    State(state): State<Shared>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let status = status_filter(&query)?;
    let include_usage = include_usage(&query)?;
    let normalise = state.faults().normalise;
    let store = lock(&state.usage_limits);
    let record = store
        .find(&id, &status)
        .ok_or_else(|| not_found(&state, &id))?;
    let read = record.read_as(normalise, include_usage);
    Ok(normalise::reply(&read, normalise))
}

/// What an update body asks for, validated before anything changes. The outer `Option` of a
/// nullable field is "sent", the inner one its value (`None` clears).
struct Update {
    name: Option<String>,
    description: Option<Option<String>>,
    conditions: Option<Vec<Value>>,
    credit_limit: Option<Number>,
    alert_threshold: Option<Option<Number>>,
    periodic_reset: Option<Option<String>>,
    periodic_reset_days: Option<Option<u64>>,
    next_usage_reset_at: Option<Option<String>>,
    reset_usage_for_value: Option<String>,
}

/// `Some(value)` when the body has `field` (`value` being `None` for `null`).
fn sent<T>(body: &Object, field: &str, value: Option<T>) -> Option<Option<T>> {
    body.contains_key(field).then_some(value)
}

impl Update {
    fn parse(body: &Object) -> ApiResult<Self> {
        IdRule::UuidOrSlug.opt_field(body, "workspace_id")?;
        let (reset, days) = reset_form(body)?;
        let reset_usage_for_value = fields::opt_str(body, "reset_usage_for_value")?;
        if reset_usage_for_value.as_deref() == Some("") {
            return Err(EmulatorError::validation(
                "reset_usage_for_value must not be empty",
            ));
        }
        Ok(Self {
            name: fields::opt_str_max(body, "name", 255)?,
            description: sent(
                body,
                "description",
                fields::opt_str_max(body, "description", 500)?,
            ),
            conditions: policy_fields::opt_conditions(body)?,
            credit_limit: fields::opt_number_not_null(body, "credit_limit")?,
            alert_threshold: sent(
                body,
                "alert_threshold",
                fields::opt_number(body, "alert_threshold")?,
            ),
            periodic_reset: sent(body, "periodic_reset", reset),
            periodic_reset_days: sent(body, "periodic_reset_days", days),
            next_usage_reset_at: opt_timestamp(body, "next_usage_reset_at")?,
            reset_usage_for_value,
        })
    }

    /// Checks the limits the policy would end up with, then applies everything.
    fn apply(self, record: &mut UsageLimitRecord) -> ApiResult<()> {
        let credit_limit = self.credit_limit.as_ref().unwrap_or(&record.credit_limit);
        let alert_threshold = match &self.alert_threshold {
            Some(sent) => sent.as_ref(),
            None => record.alert_threshold.as_ref(),
        };
        check_threshold(credit_limit, alert_threshold)?;
        self.apply_reset_form(record);
        if let Some(name) = self.name {
            record.name = Some(name);
        }
        if let Some(description) = self.description {
            record.description = description;
        }
        if let Some(conditions) = self.conditions {
            record.conditions = conditions;
        }
        if let Some(threshold) = self.alert_threshold {
            record.alert_threshold = threshold;
        }
        if let Some(at) = self.next_usage_reset_at {
            record.next_usage_reset_at = at;
        }
        if let Some(limit) = self.credit_limit {
            record.credit_limit = limit;
            record.recheck_limit();
        }
        if let Some(value_key) = &self.reset_usage_for_value {
            record.reset_value(value_key);
        }
        record.last_updated_at = touched(&record.last_updated_at);
        Ok(())
    }

    /// One reset form at a time: setting one clears the other.
    fn apply_reset_form(&self, record: &mut UsageLimitRecord) {
        if let Some(reset) = &self.periodic_reset {
            record.periodic_reset.clone_from(reset);
            if reset.is_some() {
                record.periodic_reset_days = None;
            }
        }
        if let Some(days) = self.periodic_reset_days {
            record.periodic_reset_days = days;
            if days.is_some() {
                record.periodic_reset = None;
            }
        }
    }
}

/// `PUT /ai_gw/v2/policies/usage-limits/{id}` → `{}`. `type`, `group_by` and `workspace_id` are
/// immutable and a differing value is a 400; `reset_usage_for_value` resets that value's usage.
pub async fn update(
    State(state): State<Shared>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let body = fields::parse_object(&body)?;
    let update = Update::parse(&body)?;
    let mut store = lock(&state.usage_limits);
    let record = store
        .active_mut(&id)
        .ok_or_else(|| not_found(&state, &id))?;
    reject_changes(
        &body,
        &[
            ("type", json!(record.kind)),
            ("group_by", json!(record.group_by)),
            ("workspace_id", json!(record.workspace_id)),
        ],
    )?;
    update.apply(record)?;
    Ok(Json(json!({})))
}

/// `DELETE /ai_gw/v2/policies/usage-limits/{id}` → `{}`; archives (see the module comment).
pub async fn delete(State(state): State<Shared>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let mut store = lock(&state.usage_limits);
    let record = store
        .active_mut(&id)
        .ok_or_else(|| not_found(&state, &id))?;
    record.status = "archived".to_owned();
    record.last_updated_at = touched(&record.last_updated_at);
    Ok(Json(json!({})))
}

/// The entity list's `page_size` (1–100, default 100) and `current_page` (≥ 0).
fn entity_page(query: &HashMap<String, String>) -> ApiResult<(usize, usize)> {
    let largest = *ENTITY_PAGE_SIZES.end();
    let page_size = policy_fields::page_param(query, "page_size", largest)?;
    if !ENTITY_PAGE_SIZES.contains(&page_size) {
        return Err(EmulatorError::validation(
            "page_size must be an integer from 1 to 100",
        ));
    }
    Ok((
        page_size,
        policy_fields::page_param(query, "current_page", 0)?,
    ))
}

/// `GET /ai_gw/v2/policies/usage-limits/{id}/entities` → `{object: "list", data, total}`: the
/// values with usage, in the order their usage began; filters `status` (`active`/`exhausted`)
/// and `search` (a case-insensitive substring of `value_key`).
pub async fn entities(
    State(state): State<Shared>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let status = policy_fields::enum_filter(&query, "status", ENTITY_STATUSES)?;
    let search = query.get("search").map(|text| text.to_lowercase());
    let (page_size, current_page) = entity_page(&query)?;
    let normalise = state.faults().normalise;
    let store = lock(&state.usage_limits);
    let record = store
        .find(&id, "active")
        .ok_or_else(|| not_found(&state, &id))?;
    let matching: Vec<Value> = record
        .entities
        .iter()
        .filter(|entity| status.as_deref().is_none_or(|s| entity.status() == s))
        .filter(|entity| {
            search
                .as_ref()
                .is_none_or(|needle| entity.value_key.to_lowercase().contains(needle.as_str()))
        })
        .map(UsageEntity::row)
        .collect();
    let total = matching.len();
    let data = policy_fields::page(matching, page_size, current_page);
    let body = json!({ "object": "list", "data": data, "total": total });
    Ok(normalise::reply(&body, normalise))
}

/// `PUT /ai_gw/v2/policies/usage-limits/{id}/entities/{entityId}/reset` → `{}`: that value's
/// usage back to zero and `active`; counts one reset.
pub async fn reset_entity(
    State(state): State<Shared>,
    Path((id, entity_id)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let mut store = lock(&state.usage_limits);
    let record = store
        .active_mut(&id)
        .ok_or_else(|| not_found(&state, &id))?;
    if !record.reset_entity(&entity_id) {
        return Err(state.missing(&format!("usage limits entity {entity_id} of policy {id}")));
    }
    Ok(Json(json!({})))
}

/// `POST /_emulator/usage-limits/{id}/usage` with `{"value_key": "k", "usage": 12.5}`: what
/// gateway traffic does, counting usage against one value of an active policy's grouping key.
/// Answers the entity row as it now is (its `id` is what entity resets take).
pub async fn add_usage(
    State(state): State<Shared>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let body = fields::parse_object(&body)?;
    let value_key = fields::req_str(&body, "value_key")?;
    let usage = fields::opt_number_not_null(&body, "usage")?
        .and_then(|usage| usage.as_f64())
        .ok_or_else(|| EmulatorError::validation("usage is required"))?;
    let mut store = lock(&state.usage_limits);
    let record = store.active_mut(&id).ok_or_else(|| {
        EmulatorError::not_found(format!("active usage limits policy {id} not found"))
    })?;
    Ok(Json(record.add_usage(&value_key, usage)))
}
