//! Usage-limits policies (budgets) in memory: their read shapes and the usage counted per value of
//! the grouping key (an *entity*).
//!
//! The sibling of rate-limits policies and kept like them: DELETE archives, reads filter on
//! `status` (default `active`). Usage only grows through the control endpoint
//! `POST /_emulator/usage-limits/{id}/usage`, standing in for gateway traffic; the emulator never
//! resets usage on a schedule, so `periodic_reset` and `next_usage_reset_at` are stored and read
//! back but never fire.
//!
//! An entity is `exhausted` while its usage is at or above `credit_limit` (re-evaluated when the
//! usage or the limit changes); its alert flags, 0/1 integers as on the live API (FACTS-more
//! §0.6), stay set until the entity is reset. Every reset (an entity reset, or an update with
//! `reset_usage_for_value`) is counted per policy for `GET /_emulator/state` and stamps
//! `last_reset_at`.
//!
//! `/ai_gw/v2/policies/usage-limits` and its entities, plus the control endpoint that stands in
//! for gateway traffic (`POST /_emulator/usage-limits/{id}/usage`).
//!
//! Like rate limits: `workspace_id` (body and list query) is a workspace UUID or slug,
//! `organisation_id` in a create body a UUID; DELETE archives, so a default (`status=active`) GET
//! answers 404 afterwards while `?status=archived` finds the record; writes, entity reads and
//! resets of an archived policy are 404. `credit_limit` is a required number ≥ 0 (`null` is a
//! 400 on create and update) and `alert_threshold`, when set, must stay below it (FACTS §4).
//! `periodic_reset` and `periodic_reset_days` are the two forms of a periodic reset: a request
//! that sets both is a 400; an update that sets one clears the other, and `null` clears either.

use std::collections::HashMap;

use axum::{
    Json,
    extract::{Path, Query, State},
    response::Response,
};
use serde_json::{Number, Value, json};

use super::common::{
    clock::now,
    errors::{ApiResult, EmulatorError},
    fields::{self, JsonObject, Object},
    ids::new_id,
    normalise,
    policy_fields::{self, Policy, PolicyFilter, PolicyKind, active_mut, in_status},
    records::{self, Kind, Records, Slug},
    state::{Common, KindState, lock},
};

/// What the usage-limits policy routes reach.
pub type UsageLimitsState = KindState<UsageLimitStore>;

pub const PERIODIC_RESETS: &[&str] = &["monthly", "weekly"];
pub const ENTITY_STATUSES: &[&str] = &["active", "exhausted"];
/// The `object` of entity rows; the live value is redacted in every capture we have.
const ENTITY_OBJECT: &str = "policy_usage_limits_entity";

pub type UsageLimitStore = Records<UsageLimitRecord>;

pub type UsageLimitRecord = Policy<UsageLimit>;

/// What a usage-limits policy holds besides its [`PolicyHead`].
pub struct UsageLimit {
    pub description: Option<String>,
    pub credit_limit: Number,
    pub alert_threshold: Option<Number>,
    pub periodic_reset: Option<String>,
    pub periodic_reset_days: Option<u64>,
    pub next_usage_reset_at: Option<String>,
    pub last_reset_at: Option<String>,
    pub created_by: String,
    /// In the order their first usage arrived.
    pub entities: Vec<UsageEntity>,
    /// Reset calls that hit this policy (shown by `GET /_emulator/state`).
    pub resets: u64,
}

/// The usage of one value of the grouping key (say one API key).
pub struct UsageEntity {
    pub id: String,
    pub value_key: String,
    pub current_usage: f64,
    pub exhausted: bool,
    pub threshold_alert_sent: bool,
    pub exhausted_alert_sent: bool,
    pub last_used_at: Option<String>,
}

/// A computed amount as a JSON number: whole amounts as integers, as a JSON server writes them.
fn amount(value: f64) -> Value {
    // Beyond 2^53 a float no longer holds every integer; keep such values as floats.
    const EXACT: f64 = 9_007_199_254_740_992.0;
    if value.fract() == 0.0 && value.abs() < EXACT {
        // Exact: the value is integral and within i64 range.
        json!(value as i64)
    } else {
        json!(value)
    }
}

impl UsageEntity {
    fn new(value_key: &str) -> Self {
        Self {
            id: new_id(),
            value_key: value_key.to_owned(),
            current_usage: 0.0,
            exhausted: false,
            threshold_alert_sent: false,
            exhausted_alert_sent: false,
            last_used_at: None,
        }
    }

    pub fn status(&self) -> &'static str {
        if self.exhausted {
            "exhausted"
        } else {
            "active"
        }
    }

    /// The row of `GET …/{id}/entities`.
    pub fn row(&self) -> Value {
        json!({
            "id": self.id,
            "value_key": self.value_key,
            "current_usage": amount(self.current_usage),
            "status": self.status(),
            "is_threshold_alerts_sent": fields::flag(self.threshold_alert_sent),
            "is_exhausted_alerts_sent": fields::flag(self.exhausted_alert_sent),
            "last_used_at": self.last_used_at,
            "object": ENTITY_OBJECT,
        })
    }

    /// The entry of `value_key_usage_map` (`ValueKeyUsage`).
    fn usage(&self) -> Value {
        json!({
            "current_usage": amount(self.current_usage),
            "status": self.status(),
            "is_threshold_alerts_sent": fields::flag(self.threshold_alert_sent),
            "is_exhausted_alerts_sent": fields::flag(self.exhausted_alert_sent),
        })
    }

    fn reset(&mut self) {
        self.current_usage = 0.0;
        self.exhausted = false;
        self.threshold_alert_sent = false;
        self.exhausted_alert_sent = false;
    }

    /// Re-evaluates exhaustion against `limit`; the first time it is reached the alert is "sent".
    fn check_limit(&mut self, limit: f64) {
        self.exhausted = self.current_usage >= limit;
        self.exhausted_alert_sent |= self.exhausted;
    }

    /// Preloads an entity from its row (or `value_key_usage_map` entry) leniently.
    fn seed(value_key: &str, item: &Object) -> Self {
        let mut entity = Self::new(value_key);
        entity.id = fields::str_or(item, "id", entity.id);
        entity.current_usage = item
            .get("current_usage")
            .and_then(Value::as_f64)
            .unwrap_or(0.0);
        entity.exhausted = fields::str_or(item, "status", "active") == "exhausted";
        entity.threshold_alert_sent = fields::flag_or(item, "is_threshold_alerts_sent", false);
        entity.exhausted_alert_sent = fields::flag_or(item, "is_exhausted_alerts_sent", false);
        entity.last_used_at = fields::nullable_str(item, "last_used_at");
        entity
    }
}

impl UsageLimitRecord {
    /// The read a GET or list answers: normalised under the fault, with
    /// `value_key_usage_map` when `include_usage` asks for it.
    pub fn read_with_usage(&self, normalise: bool, include_usage: bool) -> Value {
        let mut read = self.read_as(normalise);
        if include_usage {
            let map: serde_json::Map<String, Value> = self
                .own
                .entities
                .iter()
                .map(|entity| (entity.value_key.clone(), entity.usage()))
                .collect();
            read["value_key_usage_map"] = Value::Object(map);
        }
        read
    }
}

impl PolicyKind for UsageLimit {
    const KIND: Kind = Kind::new("a", "usage limits policy", Slug::Named("usage-limits"));
    const TYPES: &'static [&'static str] = &["cost", "tokens"];
    const OBJECT: &'static str = "policy_usage_limits";
    type Changes = Update;

    /// With its usage as `entities` (entity rows) or `value_key_usage_map`, and an optional
    /// `resets` count.
    fn seed(state: &Common, item: &Object) -> ApiResult<Self> {
        Ok(Self {
            description: fields::nullable_str(item, "description"),
            credit_limit: fields::opt_number(item, "credit_limit")?
                .unwrap_or_else(|| Number::from(0)),
            alert_threshold: fields::opt_number(item, "alert_threshold")?,
            periodic_reset: fields::opt_enum(item, "periodic_reset", PERIODIC_RESETS)?,
            periodic_reset_days: item.get("periodic_reset_days").and_then(Value::as_u64),
            next_usage_reset_at: fields::nullable_str(item, "next_usage_reset_at"),
            last_reset_at: fields::nullable_str(item, "last_reset_at"),
            created_by: fields::str_or(item, "created_by", &state.user_id),
            entities: seeded_entities(item),
            resets: item.get("resets").and_then(Value::as_u64).unwrap_or(0),
        })
    }

    /// `POST /ai_gw/v2/policies/usage-limits`: `credit_limit` is required and
    /// `alert_threshold` must stay below it.
    fn create(state: &Common, body: &Object) -> ApiResult<Self> {
        let credit_limit = fields::opt_number_not_null(body, "credit_limit")?
            .ok_or_else(|| EmulatorError::validation("credit_limit is required"))?;
        let alert_threshold = fields::opt_number(body, "alert_threshold")?;
        check_threshold(&credit_limit, alert_threshold.as_ref())?;
        let (periodic_reset, periodic_reset_days) = reset_form(body)?;
        Ok(Self {
            description: fields::opt_str_max(body, "description", 500)?,
            credit_limit,
            alert_threshold,
            periodic_reset,
            periodic_reset_days,
            next_usage_reset_at: None,
            last_reset_at: None,
            created_by: state.user_id.clone(),
            entities: Vec::new(),
            resets: 0,
        })
    }

    /// `PUT /ai_gw/v2/policies/usage-limits/{id}`: `reset_usage_for_value` resets that value's
    /// usage.
    fn changes(body: &Object) -> ApiResult<Update> {
        Update::parse(body)
    }

    fn apply(&mut self, changes: Update) -> ApiResult<()> {
        changes.apply(self)
    }

    /// The live read shape (FACTS-more §5), without usage.
    fn read(&self) -> Value {
        json!({
            "description": self.description,
            "credit_limit": self.credit_limit,
            "alert_threshold": self.alert_threshold,
            "periodic_reset": self.periodic_reset,
            "periodic_reset_days": self.periodic_reset_days,
            "next_usage_reset_at": self.next_usage_reset_at,
            "last_reset_at": self.last_reset_at,
            "created_by": self.created_by,
        })
    }

    /// The read, the reset count and every entity.
    fn dump(policy: &Policy<Self>) -> Value {
        let mut value = policy.read();
        value["resets"] = json!(policy.own.resets);
        value["entities"] = policy.own.entities.iter().map(UsageEntity::row).collect();
        value
    }
}

impl UsageLimit {
    fn limit(&self) -> f64 {
        self.credit_limit.as_f64().unwrap_or(0.0)
    }

    /// Counts `usage` against `value_key` (its entity is made on first use) and answers the
    /// entity as it now is.
    pub fn add_usage(&mut self, value_key: &str, usage: f64) -> Value {
        let limit = self.limit();
        let threshold = self.alert_threshold.as_ref().and_then(Number::as_f64);
        let entity = records::upsert(
            &mut self.entities,
            |e| e.value_key == value_key,
            || UsageEntity::new(value_key),
        );
        entity.current_usage += usage;
        entity.last_used_at = Some(now());
        let used = entity.current_usage;
        entity.threshold_alert_sent |= threshold.is_some_and(|t| used >= t);
        entity.check_limit(limit);
        entity.row()
    }

    /// Re-evaluates every entity after `credit_limit` changed: a raised limit reopens an
    /// exhausted value, a lowered one can exhaust it.
    pub fn recheck_limit(&mut self) {
        let limit = self.limit();
        self.entities
            .iter_mut()
            .for_each(|entity| entity.check_limit(limit));
    }

    /// `reset_usage_for_value`: that value's usage back to zero (a value without usage has
    /// nothing to reset, but the call still counts).
    pub fn reset_value(&mut self, value_key: &str) {
        if let Some(entity) = self.entities.iter_mut().find(|e| e.value_key == value_key) {
            entity.reset();
        }
        self.count_reset();
    }

    /// `PUT …/entities/{entityId}/reset`; false when the policy has no such entity.
    pub fn reset_entity(&mut self, entity_id: &str) -> bool {
        let Some(entity) = self.entities.iter_mut().find(|e| e.id == entity_id) else {
            return false;
        };
        entity.reset();
        self.count_reset();
        true
    }

    fn count_reset(&mut self) {
        self.resets += 1;
        self.last_reset_at = Some(now());
    }
}

/// The usage of a seeded policy: `entities` rows, else the `value_key_usage_map` of a read with
/// `include_usage=true`. Items without a `value_key` are skipped.
fn seeded_entities(item: &Object) -> Vec<UsageEntity> {
    let rows = item.get("entities").and_then(Value::as_array);
    if let Some(rows) = rows {
        return rows
            .iter()
            .filter_map(Value::as_object)
            .filter_map(|row| {
                let key = row.get("value_key").and_then(Value::as_str)?;
                Some(UsageEntity::seed(key, row))
            })
            .collect();
    }
    item.get("value_key_usage_map")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(key, usage)| usage.as_object().map(|usage| UsageEntity::seed(key, usage)))
        .collect()
}

/// The entity list's `page_size` bounds (spec: 1–100); absent means the largest page.
const ENTITY_PAGE_SIZES: std::ops::RangeInclusive<usize> = 1..=100;

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

/// `GET /ai_gw/v2/policies/usage-limits` → `{object: "list", data, total}`, 0-based paging;
/// filters `workspace_id`, `status` (default `active`) and `type`. Honours `list_lag_ms` and
/// `normalise` as the rate-limit list does.
pub async fn list(
    State(state): State<UsageLimitsState>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let filter = PolicyFilter::parse(&query, UsageLimit::TYPES)?;
    Ok(filter.reply(
        &state,
        |_| true,
        |record, normalise| record.read_with_usage(normalise, false),
    ))
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
    State(state): State<UsageLimitsState>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let include_usage = include_usage(&query)?;
    policy_fields::reply_one(&state, &id, &query, |record, normalise| {
        record.read_with_usage(normalise, include_usage)
    })
}

/// What an update body asks of the policy's own fields (the generic PUT handles `name` and
/// `conditions`), validated before anything changes. The outer `Option` of a nullable field is
/// "sent", the inner one its value (`None` clears).
pub struct Update {
    description: Option<Option<String>>,
    credit_limit: Option<Number>,
    alert_threshold: Option<Option<Number>>,
    periodic_reset: Option<Option<String>>,
    periodic_reset_days: Option<Option<u64>>,
    next_usage_reset_at: Option<Option<String>>,
    reset_usage_for_value: Option<String>,
}

impl Update {
    fn parse(body: &Object) -> ApiResult<Self> {
        let (reset, days) = reset_form(body)?;
        let reset_usage_for_value = fields::opt_str(body, "reset_usage_for_value")?;
        if reset_usage_for_value.as_deref() == Some("") {
            return Err(EmulatorError::validation(
                "reset_usage_for_value must not be empty",
            ));
        }
        Ok(Self {
            description: fields::sent(
                body,
                "description",
                fields::opt_str_max(body, "description", 500)?,
            ),
            credit_limit: fields::opt_number_not_null(body, "credit_limit")?,
            alert_threshold: fields::sent(
                body,
                "alert_threshold",
                fields::opt_number(body, "alert_threshold")?,
            ),
            periodic_reset: fields::sent(body, "periodic_reset", reset),
            periodic_reset_days: fields::sent(body, "periodic_reset_days", days),
            next_usage_reset_at: opt_timestamp(body, "next_usage_reset_at")?,
            reset_usage_for_value,
        })
    }

    /// Checks the limits the policy would end up with, then applies everything.
    fn apply(self, own: &mut UsageLimit) -> ApiResult<()> {
        let credit_limit = self.credit_limit.as_ref().unwrap_or(&own.credit_limit);
        let alert_threshold = match &self.alert_threshold {
            Some(sent) => sent.as_ref(),
            None => own.alert_threshold.as_ref(),
        };
        check_threshold(credit_limit, alert_threshold)?;
        self.apply_reset_form(own);
        fields::set(&mut own.description, self.description);
        fields::set(&mut own.alert_threshold, self.alert_threshold);
        fields::set(&mut own.next_usage_reset_at, self.next_usage_reset_at);
        if let Some(limit) = self.credit_limit {
            own.credit_limit = limit;
            own.recheck_limit();
        }
        if let Some(value_key) = &self.reset_usage_for_value {
            own.reset_value(value_key);
        }
        Ok(())
    }

    /// One reset form at a time: setting one clears the other.
    fn apply_reset_form(&self, record: &mut UsageLimit) {
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
    State(state): State<UsageLimitsState>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let status = policy_fields::enum_filter(&query, "status", ENTITY_STATUSES)?;
    let search = query.get("search").map(|text| text.to_lowercase());
    let (page_size, current_page) = entity_page(&query)?;
    let normalise = state.faults().normalise;
    let store = lock(&state.store);
    let record = in_status(&store, &state, &id, "active")?;
    let matching: Vec<Value> = record
        .own
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
    let data = records::page(matching, page_size, current_page);
    let body = json!({ "object": "list", "data": data, "total": total });
    Ok(normalise::reply(&body, normalise))
}

/// `PUT /ai_gw/v2/policies/usage-limits/{id}/entities/{entityId}/reset` → `{}`: that value's
/// usage back to zero and `active`; counts one reset.
pub async fn reset_entity(
    State(state): State<UsageLimitsState>,
    Path((id, entity_id)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let mut store = lock(&state.store);
    let record = active_mut(&mut store, &state, &id)?;
    if !record.own.reset_entity(&entity_id) {
        return Err(state.missing(&format!("usage limits entity {entity_id} of policy {id}")));
    }
    Ok(Json(json!({})))
}

/// `POST /_emulator/usage-limits/{id}/usage` with `{"value_key": "k", "usage": 12.5}`: what
/// gateway traffic does, counting usage against one value of an active policy's grouping key.
/// Answers the entity row as it now is (its `id` is what entity resets take).
pub async fn add_usage(
    State(state): State<UsageLimitsState>,
    Path(id): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let value_key = fields::req_str(&body, "value_key")?;
    let usage = fields::opt_number_not_null(&body, "usage")?
        .and_then(|usage| usage.as_f64())
        .ok_or_else(|| EmulatorError::validation("usage is required"))?;
    let mut store = lock(&state.store);
    let record = store
        .find_mut(&id)
        .filter(|r| r.head.status == "active")
        .ok_or_else(|| {
            EmulatorError::not_found(format!("active usage limits policy {id} not found"))
        })?;
    Ok(Json(record.own.add_usage(&value_key, usage)))
}

#[cfg(test)]
mod tests {
    use super::super::common::{policy_fields::PolicyHead, records::Key};
    use super::*;

    fn record(limit: u64, threshold: Option<u64>) -> UsageLimitRecord {
        Policy {
            head: PolicyHead {
                key: Key {
                    seq: 0,
                    api_created: None,
                    id: "p".to_owned(),
                    slug: "p".to_owned(),
                },
                name: None,
                conditions: Vec::new(),
                group_by: Vec::new(),
                kind: "cost".to_owned(),
                status: "active".to_owned(),
                workspace_id: new_id(),
                organisation_id: new_id(),
                created_at: now(),
                last_updated_at: now(),
            },
            own: UsageLimit {
                description: None,
                credit_limit: Number::from(limit),
                alert_threshold: threshold.map(Number::from),
                periodic_reset: None,
                periodic_reset_days: None,
                next_usage_reset_at: None,
                last_reset_at: None,
                created_by: new_id(),
                entities: Vec::new(),
                resets: 0,
            },
        }
    }

    #[test]
    fn usage_crosses_the_threshold_then_exhausts() {
        let mut policy = record(10, Some(5));
        let row = policy.own.add_usage("k", 2.5);
        assert_eq!(
            (row["current_usage"].clone(), row["status"].clone()),
            (json!(2.5), json!("active"))
        );
        assert_eq!(row["is_threshold_alerts_sent"], json!(0));
        let row = policy.own.add_usage("k", 2.5);
        assert_eq!(row["current_usage"], json!(5), "whole amounts as integers");
        assert_eq!(row["is_threshold_alerts_sent"], json!(1));
        let row = policy.own.add_usage("k", 5.0);
        assert_eq!(row["status"], "exhausted");
        assert_eq!(row["is_exhausted_alerts_sent"], json!(1));
        assert_eq!(policy.own.entities.len(), 1, "one entity per value");
    }

    #[test]
    fn a_raised_limit_reopens_and_a_reset_clears_everything() {
        let mut policy = record(10, None);
        policy.own.add_usage("k", 12.0);
        policy.own.credit_limit = Number::from(20);
        policy.own.recheck_limit();
        let usage = policy.read_with_usage(false, true)["value_key_usage_map"]["k"].clone();
        assert_eq!(usage["status"], "active");
        assert_eq!(
            usage["is_exhausted_alerts_sent"],
            json!(1),
            "alerts stay sent"
        );
        policy.own.reset_value("k");
        policy.own.reset_value("never-used");
        assert_eq!(policy.own.resets, 2);
        assert!(policy.own.last_reset_at.is_some());
        let row = policy.own.entities[0].row();
        assert_eq!(
            (
                row["current_usage"].clone(),
                row["is_exhausted_alerts_sent"].clone()
            ),
            (json!(0), json!(0))
        );
    }
}
