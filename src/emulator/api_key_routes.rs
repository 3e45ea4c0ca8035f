//! `/ai_gw/v2/api-keys/service` and `/ai_gw/v2/api-keys/user` (the live per-kind routes,
//! FACTS-more §0.1, §4): create with a one-time key, list, masked reads, update, hard delete and
//! rotate; plus the control endpoint `POST /_emulator/api-keys/{id}/handshake`. The store and the
//! rotation rules are in `api_keys`.
//!
//! Create takes `name` and a non-empty `scopes` (required), `user_id` (a UUID, required for user
//! keys and refused on service keys), `organisation_id` as the numeric TSG (or a UUID; reads show
//! the internal UUID), `workspace_id` (UUID or slug; default workspace when absent), and `type`
//! in either reading of FACTS-more §8.1: the SDK's plane (`workspace`, `organisation`) or
//! Terraform's kind (`service`, `user`, which must match the route), as well as the read values
//! (`workspace-service`, `workspace-user`, `organisation-service`). `organisation` makes an
//! organisation service key without a workspace. A key under the other kind's route is 404.
//!
//! Lists page like the policy lists: `page_size` ≥ 0 (0 or absent: 100), `current_page` from 0.
//! Rotate takes an optional `{key_transition_period_ms}` (an integer ≥ 1800000; absent: the key's
//! `rotation_policy.key_transition_period_ms`, else 1800000, the documented default). With
//! `--min-key-transition DUR` the transition applied is the smaller of that period and DUR, and
//! `key_transition_expires_at` reports when the old value really stops working.

use std::{collections::HashMap, time::Duration};

use axum::{
    Json, Router,
    body::Bytes,
    extract::{Path, Query, State},
    http::StatusCode,
    response::Response,
    routing::{get, post},
};
use serde_json::{Value, json};

use super::{
    api_keys::{ApiKeyRecord, KeyDefaults, KeyKind, Live, MIN_TRANSITION_MS},
    errors::{ApiResult, EmulatorError},
    fields::{self, IdRule, Object},
    normalise, policy_fields,
    state::{Shared, lock, touched},
};

const RATE_LIMIT_TYPES: &[&str] = &["requests", "tokens"];
const RATE_LIMIT_UNITS: &[&str] = &["rpd", "rph", "rpm", "rps", "rpw"];
const ROTATION_PERIODS: &[&str] = &["weekly", "monthly"];
/// Fields an update must not carry: the API wants the key recreated (`key` is changed by
/// rotation only).
const IMMUTABLE: &[&str] = &["type", "workspace_id", "user_id", "organisation_id", "key"];

/// The routes of both kinds, for the API router (auth, stats and faults wrap them there).
pub fn routes() -> Router<Shared> {
    Router::new()
        .merge(kind_routes(KeyKind::Service))
        .merge(kind_routes(KeyKind::User))
}

fn kind_routes(kind: KeyKind) -> Router<Shared> {
    let base = format!("/ai_gw/v2/api-keys/{}", kind.segment());
    Router::new()
        .route(
            &base,
            get(
                move |state: State<Shared>, query: Query<HashMap<String, String>>| {
                    list(state, kind, query)
                },
            )
            .post(move |state: State<Shared>, body: Bytes| create(state, kind, body)),
        )
        .route(
            &format!("{base}/{{keyId}}"),
            get(move |state: State<Shared>, id: Path<String>| read(state, kind, id))
                .put(move |state: State<Shared>, id: Path<String>, body: Bytes| {
                    update(state, kind, id, body)
                })
                .delete(move |state: State<Shared>, id: Path<String>| delete(state, kind, id)),
        )
        .route(
            &format!("{base}/{{keyId}}/rotate"),
            post(move |state: State<Shared>, id: Path<String>, body: Bytes| {
                rotate(state, kind, id, body)
            }),
        )
}

/// For the API routes: 404 `AB08`, or 403 `AB03` under `missing_as_ab03`.
fn missing(state: &Shared, kind: KeyKind, id: &str) -> EmulatorError {
    state.missing(&format!("{} {id}", kind.noun()))
}

/// The read `type` and whether the key is organisation-level, from the create body's `type`.
fn key_type(body: &Object, kind: KeyKind) -> ApiResult<(String, bool)> {
    let sent = fields::opt_str(body, "type")?;
    let organisation = match (kind, sent.as_deref()) {
        (_, None | Some("workspace")) => false,
        (KeyKind::Service, Some("service" | "workspace-service"))
        | (KeyKind::User, Some("user" | "workspace-user")) => false,
        (KeyKind::Service, Some("organisation" | "organisation-service")) => true,
        (KeyKind::Service, Some(other)) => {
            return Err(EmulatorError::validation(format!(
                "type {other:?} does not fit a service key; use workspace, organisation or service"
            )));
        }
        (KeyKind::User, Some(other)) => {
            return Err(EmulatorError::validation(format!(
                "type {other:?} does not fit a user key; use workspace or user"
            )));
        }
    };
    let read = match (organisation, kind) {
        (true, _) => "organisation-service",
        (false, KeyKind::Service) => "workspace-service",
        (false, KeyKind::User) => "workspace-user",
    };
    Ok((read.to_owned(), organisation))
}

/// `POST /ai_gw/v2/api-keys/{service|user}` → `{id, key, object: "api-key"}`; the only time the
/// key value is returned.
async fn create(State(state): State<Shared>, kind: KeyKind, body: Bytes) -> ApiResult<Json<Value>> {
    let body = fields::parse_object(&body)?;
    let name = fields::req_str(&body, "name")?;
    if !body.contains_key("scopes") {
        return Err(EmulatorError::validation("scopes is required"));
    }
    let (read_type, organisation) = key_type(&body, kind)?;
    IdRule::TsgOrUuid.opt_field(&body, "organisation_id")?;
    let workspace_id = IdRule::UuidOrSlug
        .opt_field(&body, "workspace_id")?
        .filter(|id| !id.is_empty());
    if organisation && workspace_id.is_some() {
        return Err(EmulatorError::validation(
            "an organisation key takes no workspace_id",
        ));
    }
    let user_id = IdRule::Uuid
        .opt_field(&body, "user_id")?
        .filter(|id| !id.is_empty());
    match (kind, &user_id) {
        (KeyKind::User, None) => {
            return Err(EmulatorError::validation(
                "user_id is required for user keys",
            ));
        }
        (KeyKind::Service, Some(_)) => {
            return Err(EmulatorError::validation(
                "user_id is only taken by user keys",
            ));
        }
        _ => {}
    }
    let changes = Changes::parse(&body)?;
    let mut record = ApiKeyRecord::created(&state, kind, read_type, name);
    record.workspace_id = match organisation {
        true => None,
        false => Some(workspace_id.unwrap_or_else(|| state.default_workspace_id.clone())),
    };
    record.user_id = user_id;
    changes.apply(&mut record);
    let receipt = record.receipt();
    lock(&state.api_keys).insert(record);
    Ok(Json(receipt))
}

/// `GET /ai_gw/v2/api-keys/{service|user}` → `{object: "list", total, data}` in creation order;
/// `workspace_id` filters; honours `list_lag_ms` and `normalise`.
async fn list(
    State(state): State<Shared>,
    kind: KeyKind,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    IdRule::UuidOrSlug.query(&query, "workspace_id")?;
    let workspace = query.get("workspace_id").filter(|ws| !ws.is_empty());
    let (page_size, current_page) = policy_fields::policy_page(&query)?;
    let faults = state.faults();
    let store = lock(&state.api_keys);
    let matching: Vec<&ApiKeyRecord> = store
        .sorted()
        .into_iter()
        .filter(|r| r.kind == kind && faults.listed(r.api_created))
        .filter(|r| workspace.is_none_or(|ws| r.workspace_id.as_ref() == Some(ws)))
        .collect();
    let total = matching.len();
    let data: Vec<Value> = policy_fields::page(matching, page_size, current_page)
        .into_iter()
        .map(ApiKeyRecord::read)
        .collect();
    let body = json!({ "object": "list", "total": total, "data": data });
    Ok(normalise::reply(&body, faults.normalise))
}

/// `GET /ai_gw/v2/api-keys/{service|user}/{keyId}` → the live read shape, key masked.
async fn read(
    State(state): State<Shared>,
    kind: KeyKind,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let normalise = state.faults().normalise;
    let store = lock(&state.api_keys);
    let record = store
        .find(kind, &id)
        .ok_or_else(|| missing(&state, kind, &id))?;
    Ok(normalise::reply(&record.read(), normalise))
}

/// `PUT /ai_gw/v2/api-keys/{service|user}/{keyId}` → `{}`. The body must change something; an
/// immutable field in it (with a value) is a 400 naming it.
async fn update(
    State(state): State<Shared>,
    kind: KeyKind,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let body = fields::parse_object(&body)?;
    if let Some(field) = IMMUTABLE
        .iter()
        .find(|field| body.get(**field).is_some_and(|value| !value.is_null()))
    {
        return Err(EmulatorError::validation(match *field {
            "key" => "key cannot be set; rotate the API key instead".to_owned(),
            field => format!("{field} cannot be changed; delete and recreate the API key"),
        }));
    }
    let changes = Changes::parse(&body)?;
    if changes.is_empty() {
        return Err(EmulatorError::validation(
            "request body must contain at least one field to update",
        ));
    }
    let mut store = lock(&state.api_keys);
    let record = store
        .find_mut(kind, &id)
        .ok_or_else(|| missing(&state, kind, &id))?;
    changes.apply(record);
    record.last_updated_at = touched(&record.last_updated_at);
    record.last_updated_by = state.user_id.clone();
    Ok(Json(json!({})))
}

/// `DELETE /ai_gw/v2/api-keys/{service|user}/{keyId}` → `{}`; the key is gone (every value stops
/// working) and later calls answer 404.
async fn delete(
    State(state): State<Shared>,
    kind: KeyKind,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    lock(&state.api_keys)
        .remove(kind, &id)
        .ok_or_else(|| missing(&state, kind, &id))?;
    Ok(Json(json!({})))
}

/// The `key_transition_period_ms` of a rotate body (which may be empty).
fn transition_period(body: &Bytes) -> ApiResult<Option<u64>> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let body = fields::parse_object(body)?;
    match body.get("key_transition_period_ms") {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_u64()
            .filter(|ms| *ms >= MIN_TRANSITION_MS)
            .map(Some)
            .ok_or_else(|| {
                EmulatorError::validation(format!(
                    "key_transition_period_ms must be an integer of at least {MIN_TRANSITION_MS}"
                ))
            }),
    }
}

/// `POST /ai_gw/v2/api-keys/{service|user}/{keyId}/rotate` →
/// `{id, key, key_transition_expires_at, object}`: the new value, once; the old one works until
/// `key_transition_expires_at` (see the module comment for the period and its cap).
async fn rotate(
    State(state): State<Shared>,
    kind: KeyKind,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let requested = transition_period(&body)?;
    let mut store = lock(&state.api_keys);
    let record = store
        .find_mut(kind, &id)
        .ok_or_else(|| missing(&state, kind, &id))?;
    let period = requested
        .or_else(|| record.policy_transition_ms())
        .unwrap_or(MIN_TRANSITION_MS);
    let mut transition = Duration::from_millis(period);
    if let Some(cap) = state.options.min_key_transition {
        transition = transition.min(cap);
    }
    Ok(Json(record.rotate(transition)))
}

/// `POST /_emulator/api-keys/{id}/handshake` with `{"key": "…"}`: what a gateway does with the
/// key a request presents. 200 `{"live": true, "as": "current" | "previous"}` for the current
/// value or a previous one still in its transition; 401 `{"live": false}` for any other (one
/// whose transition has ended, another key's, any once `expires_at` has passed); 404 for an
/// unknown or deleted key.
pub async fn handshake(
    State(state): State<Shared>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let body = fields::parse_object(&body)?;
    let presented = fields::opt_str(&body, "key")?
        .ok_or_else(|| EmulatorError::validation("key is required"))?;
    let store = lock(&state.api_keys);
    let record = store
        .any(&id)
        .ok_or_else(|| EmulatorError::not_found(format!("api key {id} not found")))?;
    Ok(match record.liveness(&presented) {
        Some(Live::Current) => (StatusCode::OK, Json(json!({"live": true, "as": "current"}))),
        Some(Live::Previous) => (
            StatusCode::OK,
            Json(json!({"live": true, "as": "previous"})),
        ),
        None => (StatusCode::UNAUTHORIZED, Json(json!({"live": false}))),
    })
}

/// The fields create and update share, validated before anything changes. The outer `Option`
/// is "sent"; for nullable fields `null` clears (lists become empty).
#[derive(Default)]
struct Changes {
    name: Option<String>,
    description: Option<Option<String>>,
    scopes: Option<Vec<String>>,
    rate_limits: Option<Vec<Value>>,
    usage_limits: Option<Value>,
    reset_usage: bool,
    defaults: Option<Option<Object>>,
    alert_emails: Option<Vec<String>>,
    expires_at: Option<Option<String>>,
    rotation_policy: Option<Value>,
}

/// `Some(value)` when the body has `field` (`value` being `None` for `null`).
fn sent<T>(body: &Object, field: &str, value: Option<T>) -> Option<Option<T>> {
    body.contains_key(field).then_some(value)
}

impl Changes {
    fn parse(body: &Object) -> ApiResult<Self> {
        let name = fields::opt_str(body, "name")?;
        if name.as_ref().is_some_and(|name| name.trim().is_empty()) {
            return Err(EmulatorError::validation("name must not be empty"));
        }
        Ok(Self {
            name,
            description: sent(body, "description", fields::opt_str(body, "description")?),
            scopes: scopes(body)?,
            rate_limits: sent(body, "rate_limits", rate_limits(body)?)
                .map(Option::unwrap_or_default),
            usage_limits: match body.get("usage_limits") {
                None => None,
                Some(value @ (Value::Null | Value::Object(_))) => Some(value.clone()),
                Some(_) => return Err(EmulatorError::validation("usage_limits must be an object")),
            },
            reset_usage: fields::opt_bool(body, "reset_usage")?.unwrap_or(false),
            defaults: sent(body, "defaults", defaults(body)?),
            alert_emails: sent(body, "alert_emails", alert_emails(body)?)
                .map(Option::unwrap_or_default),
            expires_at: sent(body, "expires_at", timestamp(body, "expires_at")?),
            rotation_policy: sent(body, "rotation_policy", rotation_policy(body)?)
                .map(|policy| policy.map_or(Value::Null, Value::Object)),
        })
    }

    fn is_empty(&self) -> bool {
        self.name.is_none()
            && self.description.is_none()
            && self.scopes.is_none()
            && self.rate_limits.is_none()
            && self.usage_limits.is_none()
            && !self.reset_usage
            && self.defaults.is_none()
            && self.alert_emails.is_none()
            && self.expires_at.is_none()
            && self.rotation_policy.is_none()
    }

    fn apply(self, record: &mut ApiKeyRecord) {
        if let Some(name) = self.name {
            record.name = name;
        }
        if let Some(description) = self.description {
            record.description = description;
        }
        if let Some(scopes) = self.scopes {
            record.scopes = scopes;
        }
        if let Some(rate_limits) = self.rate_limits {
            record.rate_limits = rate_limits;
        }
        if let Some(usage_limits) = self.usage_limits {
            record.usage_limits = usage_limits;
        }
        // Not persisted by the API ([pTF]): the reset shows only as `last_reset_at`.
        if self.reset_usage {
            record.last_reset_at = Some(super::state::now());
        }
        match self.defaults {
            None => {}
            Some(None) => record.defaults = KeyDefaults::default(),
            Some(Some(defaults)) => record.defaults.merge(&defaults),
        }
        if let Some(emails) = self.alert_emails {
            record.alert_emails = emails;
        }
        if let Some(expires_at) = self.expires_at {
            record.expires_at = expires_at;
        }
        if let Some(policy) = self.rotation_policy {
            record.rotation_policy = policy;
        }
    }
}

/// `scopes`: a non-empty array of non-empty strings (an open list: `completions.write`, …).
fn scopes(body: &Object) -> ApiResult<Option<Vec<String>>> {
    let Some(scopes) = fields::opt_str_list(body, "scopes")? else {
        return match body.get("scopes") {
            Some(Value::Null) => Err(EmulatorError::validation(
                "scopes must have at least one item",
            )),
            _ => Ok(None),
        };
    };
    if scopes.is_empty() || scopes.iter().any(|scope| scope.trim().is_empty()) {
        return Err(EmulatorError::validation(
            "scopes must have at least one item, none of them empty",
        ));
    }
    Ok(Some(scopes))
}

/// `rate_limits`: `[{type: requests|tokens, unit: rpd|rph|rpm|rps|rpw, value: integer ≥ 0}]`.
fn rate_limits(body: &Object) -> ApiResult<Option<Vec<Value>>> {
    let Some(items) = fields::opt_array(body, "rate_limits")? else {
        return Ok(None);
    };
    items
        .iter()
        .map(|item| {
            let item = item
                .as_object()
                .ok_or_else(|| EmulatorError::validation("rate_limits items must be objects"))?;
            let kind = policy_fields::required_enum(item, "type", RATE_LIMIT_TYPES)
                .map_err(|err| prefixed(err, "rate_limits[]."))?;
            let unit = policy_fields::required_enum(item, "unit", RATE_LIMIT_UNITS)
                .map_err(|err| prefixed(err, "rate_limits[]."))?;
            let value = item.get("value").and_then(Value::as_u64).ok_or_else(|| {
                EmulatorError::validation("rate_limits[].value must be an integer >= 0")
            })?;
            Ok(json!({ "type": kind, "unit": unit, "value": value }))
        })
        .collect::<ApiResult<Vec<_>>>()
        .map(Some)
}

/// `defaults`: `{metadata?: object, config_id?: string|null, allow_config_override?: bool}`.
fn defaults(body: &Object) -> ApiResult<Option<Object>> {
    let Some(defaults) = fields::opt_object(body, "defaults")? else {
        return Ok(None);
    };
    let prefix = |err| prefixed(err, "defaults.");
    if defaults
        .get("metadata")
        .is_some_and(|m| !m.is_null() && !m.is_object())
    {
        return Err(EmulatorError::validation(
            "defaults.metadata must be an object",
        ));
    }
    IdRule::UuidOrSlug
        .opt_field(&defaults, "config_id")
        .map_err(|_| EmulatorError::validation("defaults.config_id must be a config id or slug"))?;
    fields::opt_bool(&defaults, "allow_config_override").map_err(prefix)?;
    Ok(Some(defaults))
}

/// `alert_emails`: an array of e-mail addresses.
fn alert_emails(body: &Object) -> ApiResult<Option<Vec<String>>> {
    let emails = fields::opt_str_list(body, "alert_emails")?;
    let valid = |email: &String| {
        email
            .split_once('@')
            .is_some_and(|(user, domain)| !user.is_empty() && domain.contains('.'))
    };
    if emails.as_ref().is_some_and(|e| !e.iter().all(valid)) {
        return Err(EmulatorError::validation(
            "alert_emails must be e-mail addresses",
        ));
    }
    Ok(emails)
}

/// An RFC 3339 date-time, or `null`.
fn timestamp(body: &Object, field: &str) -> ApiResult<Option<String>> {
    let text = fields::opt_str(body, field)?;
    if text
        .as_ref()
        .is_some_and(|text| text.parse::<jiff::Timestamp>().is_err())
    {
        return Err(EmulatorError::validation(format!(
            "{field} must be an RFC 3339 date-time or null"
        )));
    }
    Ok(text)
}

/// `rotation_policy`: `{rotation_period?: weekly|monthly, next_rotation_at?, key_transition_period_ms?
/// ≥ 1800000}`, the period and the next time not both. Stored, never acted on.
fn rotation_policy(body: &Object) -> ApiResult<Option<Object>> {
    let Some(policy) = fields::opt_object(body, "rotation_policy")? else {
        return Ok(None);
    };
    let prefix = |err| prefixed(err, "rotation_policy.");
    let period = fields::opt_enum(&policy, "rotation_period", ROTATION_PERIODS).map_err(prefix)?;
    let next = timestamp(&policy, "next_rotation_at").map_err(prefix)?;
    if period.is_some() && next.is_some() {
        return Err(EmulatorError::validation(
            "rotation_policy.rotation_period and next_rotation_at cannot both be set",
        ));
    }
    if let Some(value) = policy
        .get("key_transition_period_ms")
        .filter(|v| !v.is_null())
        && value.as_u64().is_none_or(|ms| ms < MIN_TRANSITION_MS)
    {
        return Err(EmulatorError::validation(format!(
            "rotation_policy.key_transition_period_ms must be an integer of at least {MIN_TRANSITION_MS}"
        )));
    }
    Ok(Some(policy))
}

/// Qualifies a validation message with the enclosing field (`rate_limits[].unit must be …`).
fn prefixed(err: EmulatorError, prefix: &str) -> EmulatorError {
    match err {
        EmulatorError::Validation(message) => {
            EmulatorError::Validation(format!("{prefix}{message}"))
        }
        other => other,
    }
}
