//! `/ai_gw/v2/policies/rate-limits`.
//!
//! DELETE archives (`status: archived`) rather than removing the record. The list and get routes
//! filter on `status` with default `active`, which is what FACTS §4 infers from the live API: a
//! deleted policy disappears from default reads (GET → 404) but `?status=archived` still finds it.
//! A second DELETE, or a PUT, of an archived policy is 404.
//!
//! `workspace_id` (body and list query) is a workspace UUID or slug; `organisation_id` in a body is
//! a UUID. `value` is a required number: `null` is a 400 on create and on update.

use std::{collections::HashMap, time::Instant};

use axum::{
    Json,
    extract::{Path, Query, State},
    response::Response,
};
use serde_json::{Number, Value, json};

use super::common::{
    clock::{now, touched},
    errors::{ApiResult, EmulatorError},
    fields::{self, IdRule, JsonObject, Object},
    ids::new_id,
    normalise,
    policy_fields::{
        self, Policy, STATUSES, active_mut, archive, conditions, group_by, in_status, policy_page,
        reject_changes, required_enum, status_filter,
    },
    records::{Key, Kind, Record, Records, Slug},
    state::{Common, KindState, lock},
};

/// What the rate-limits policy routes reach.
pub type RateLimitsState = KindState<RateLimitStore>;

const TYPES: &[&str] = &["requests", "tokens"];
const UNITS: &[&str] = &["rpm", "rph", "rpd", "rpw"];
const TARGETS: &[&str] = &["llm", "mcp_tools"];

pub type RateLimitStore = Records<RateLimitRecord>;

pub struct RateLimitRecord {
    seq: u64,
    /// When the API created it (`None` when seeded); lists lag behind it under `list_lag_ms`.
    api_created: Option<Instant>,
    id: String,
    name: Option<String>,
    conditions: Vec<Value>,
    group_by: Vec<Value>,
    kind: String,
    unit: String,
    value: Number,
    target: String,
    status: String,
    workspace_id: String,
    organisation_id: String,
    created_at: String,
    last_updated_at: String,
}

/// A policy has no slug: its id is its only name.
impl Record for RateLimitRecord {
    const KIND: Kind = Kind::new("a", "rate limits policy", Slug::Named("rate-limits"));

    fn key(&self) -> Key<'_> {
        Key::new(self.seq, &self.id, &self.id, self.api_created)
    }
}

impl Policy for RateLimitRecord {
    fn status(&self) -> &str {
        &self.status
    }

    fn lifecycle(&mut self) -> (&mut String, &mut String) {
        (&mut self.status, &mut self.last_updated_at)
    }
}

impl RateLimitRecord {
    fn read(&self) -> Value {
        json!({
            "id": self.id,
            "name": self.name,
            "conditions": self.conditions,
            "group_by": self.group_by,
            "type": self.kind,
            "unit": self.unit,
            "value": self.value,
            "target": self.target,
            "status": self.status,
            "workspace_id": self.workspace_id,
            "organisation_id": self.organisation_id,
            "created_at": self.created_at,
            "last_updated_at": self.last_updated_at,
            "object": "policy_rate_limits",
        })
    }

    /// The read as a normalising server returns it: `conditions` and `group_by` reordered.
    fn read_as(&self, normalise: bool) -> Value {
        policy_fields::normalised(self.read(), normalise)
    }
}

impl RateLimitStore {
    /// Every policy, archived ones included (for `GET /_emulator/state`).
    pub fn dump(&self) -> Vec<Value> {
        self.dump_with(RateLimitRecord::read)
    }

    /// Preloads a policy given in its read shape; returns its id.
    pub fn seed(&mut self, state: &Common, item: &Object) -> ApiResult<String> {
        let created_at = fields::str_or(item, "created_at", now());
        let record = RateLimitRecord {
            seq: state.next_seq(),
            api_created: None,
            id: fields::str_or(item, "id", new_id()),
            name: fields::nullable_str(item, "name"),
            conditions: conditions(item, "conditions")?,
            group_by: group_by(item)?,
            kind: required_enum(item, "type", TYPES)?,
            unit: required_enum(item, "unit", UNITS)?,
            value: fields::opt_number(item, "value")?.unwrap_or_else(|| Number::from(0)),
            target: fields::opt_enum(item, "target", TARGETS)?.unwrap_or_else(|| "llm".to_owned()),
            status: fields::opt_enum(item, "status", STATUSES)?
                .unwrap_or_else(|| "active".to_owned()),
            workspace_id: fields::str_or(item, "workspace_id", &state.default_workspace_id),
            organisation_id: fields::str_or(item, "organisation_id", &state.organisation_id),
            last_updated_at: fields::str_or(item, "last_updated_at", &created_at),
            created_at,
        };
        let id = record.id.clone();
        self.insert(record);
        Ok(id)
    }
}

/// `POST /ai_gw/v2/policies/rate-limits` → `{id, object: "policy_rate_limits"}`.
pub async fn create(
    State(state): State<RateLimitsState>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    IdRule::Uuid.opt_field(&body, "organisation_id")?;
    let created_at = now();
    let record = RateLimitRecord {
        seq: state.next_seq(),
        api_created: Some(Instant::now()),
        id: new_id(),
        name: fields::opt_str_max(&body, "name", 255)?,
        conditions: conditions(&body, "conditions")?,
        group_by: group_by(&body)?,
        kind: required_enum(&body, "type", TYPES)?,
        unit: required_enum(&body, "unit", UNITS)?,
        value: fields::opt_number_not_null(&body, "value")?
            .ok_or_else(|| EmulatorError::validation("value is required"))?,
        target: fields::opt_enum(&body, "target", TARGETS)?.unwrap_or_else(|| "llm".to_owned()),
        status: "active".to_owned(),
        workspace_id: IdRule::UuidOrSlug
            .opt_field(&body, "workspace_id")?
            .filter(|id| !id.is_empty())
            .unwrap_or_else(|| state.default_workspace_id.clone()),
        organisation_id: state.organisation_id.clone(),
        created_at: created_at.clone(),
        last_updated_at: created_at,
    };
    let receipt = json!({ "id": record.id, "object": "policy_rate_limits" });
    lock(&state.store).insert(record);
    Ok(Json(receipt))
}

/// `GET /ai_gw/v2/policies/rate-limits` → `{object: "list", data, total}`, 0-based paging.
pub async fn list(
    State(state): State<RateLimitsState>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let workspace = IdRule::UuidOrSlug.filter(&query, "workspace_id")?;
    let status = status_filter(&query)?;
    let kind = policy_fields::enum_filter(&query, "type", TYPES)?;
    let unit = policy_fields::enum_filter(&query, "unit", UNITS)?;
    let target = policy_fields::enum_filter(&query, "target", TARGETS)?;
    let search = query.get("search").map(|text| text.to_lowercase());
    let (page_size, current_page) = policy_page(&query)?;

    let faults = state.faults();
    let store = lock(&state.store);
    let matching: Vec<&RateLimitRecord> = store
        .listed(&faults)
        .into_iter()
        .filter(|r| r.status == status)
        .filter(|r| kind.as_ref().is_none_or(|k| &r.kind == k))
        .filter(|r| unit.as_ref().is_none_or(|u| &r.unit == u))
        .filter(|r| target.as_ref().is_none_or(|t| &r.target == t))
        .filter(|r| workspace.is_none_or(|ws| &r.workspace_id == ws))
        .filter(|r| {
            search.as_ref().is_none_or(|needle| {
                r.name
                    .as_ref()
                    .is_some_and(|name| name.to_lowercase().contains(needle.as_str()))
            })
        })
        .collect();
    let body = policy_fields::list_body(matching, page_size, current_page, |record| {
        record.read_as(faults.normalise)
    });
    Ok(normalise::reply(&body, faults.normalise))
}

/// `GET /ai_gw/v2/policies/rate-limits/{id}` (`?status`, default `active`).
pub async fn get(
    State(state): State<RateLimitsState>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let status = status_filter(&query)?;
    let normalise = state.faults().normalise;
    let store = lock(&state.store);
    let record = in_status(&store, &state, &id, &status)?;
    Ok(normalise::reply(&record.read_as(normalise), normalise))
}

/// `PUT /ai_gw/v2/policies/rate-limits/{id}`: only `name`, `unit`, `value`, `conditions` change;
/// `type`, `group_by`, `target` and `workspace_id` are immutable and a differing value is a 400.
pub async fn update(
    State(state): State<RateLimitsState>,
    Path(id): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let name = fields::opt_str_max(&body, "name", 255)?;
    let unit = fields::opt_enum(&body, "unit", UNITS)?;
    let value = fields::opt_number_not_null(&body, "value")?;
    IdRule::UuidOrSlug.opt_field(&body, "workspace_id")?;
    let new_conditions = policy_fields::opt_conditions(&body)?;
    let mut store = lock(&state.store);
    let record = active_mut(&mut store, &state, &id)?;
    reject_changes(
        &body,
        &[
            ("type", json!(record.kind)),
            ("group_by", json!(record.group_by)),
            ("target", json!(record.target)),
            ("workspace_id", json!(record.workspace_id)),
        ],
    )?;
    if let Some(name) = name {
        record.name = Some(name);
    }
    fields::set(&mut record.unit, unit);
    fields::set(&mut record.value, value);
    fields::set(&mut record.conditions, new_conditions);
    record.last_updated_at = touched(&record.last_updated_at);
    Ok(Json(json!({})))
}

/// `DELETE /ai_gw/v2/policies/rate-limits/{id}` → `{}`; archives (see the module comment).
pub async fn delete(
    State(state): State<RateLimitsState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    archive(&mut lock(&state.store), &state, &id)?;
    Ok(Json(json!({})))
}
