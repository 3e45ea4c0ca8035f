//! Usage-limits policies (budgets) in memory: their read shapes and the usage counted per value of
//! the grouping key (an *entity*). The routes are in `usage_limit_routes`.
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

use std::{collections::HashMap, time::Instant};

use serde_json::{Number, Value, json};

use super::{
    errors::ApiResult,
    fields::{self, Object},
    policy_fields::{self, STATUSES, conditions, group_by, required_enum},
    state::{Shared, new_id, now},
};

pub const TYPES: &[&str] = &["cost", "tokens"];
pub const PERIODIC_RESETS: &[&str] = &["monthly", "weekly"];
pub const ENTITY_STATUSES: &[&str] = &["active", "exhausted"];
/// The `object` of policy reads and create receipts, as rate limits use `policy_rate_limits`.
pub const OBJECT: &str = "policy_usage_limits";
/// The `object` of entity rows; the live value is redacted in every capture we have.
const ENTITY_OBJECT: &str = "policy_usage_limits_entity";

#[derive(Default)]
pub struct UsageLimitStore {
    by_id: HashMap<String, UsageLimitRecord>,
}

pub struct UsageLimitRecord {
    pub seq: u64,
    /// When the API created it (`None` when seeded); lists lag behind it under `list_lag_ms`.
    pub api_created: Option<Instant>,
    pub id: String,
    pub name: Option<String>,
    pub description: Option<String>,
    pub conditions: Vec<Value>,
    pub group_by: Vec<Value>,
    pub kind: String,
    pub credit_limit: Number,
    pub alert_threshold: Option<Number>,
    pub periodic_reset: Option<String>,
    pub periodic_reset_days: Option<u64>,
    pub next_usage_reset_at: Option<String>,
    pub last_reset_at: Option<String>,
    pub status: String,
    pub workspace_id: String,
    pub organisation_id: String,
    pub created_at: String,
    pub last_updated_at: String,
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
    /// The live read shape (FACTS-more §5), without usage.
    pub fn read(&self) -> Value {
        json!({
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "conditions": self.conditions,
            "group_by": self.group_by,
            "type": self.kind,
            "credit_limit": self.credit_limit,
            "alert_threshold": self.alert_threshold,
            "periodic_reset": self.periodic_reset,
            "periodic_reset_days": self.periodic_reset_days,
            "next_usage_reset_at": self.next_usage_reset_at,
            "last_reset_at": self.last_reset_at,
            "status": self.status,
            "workspace_id": self.workspace_id,
            "organisation_id": self.organisation_id,
            "created_at": self.created_at,
            "last_updated_at": self.last_updated_at,
            "created_by": self.created_by,
            "object": OBJECT,
        })
    }

    /// The read a GET or list answers: normalised under the fault, with
    /// `value_key_usage_map` when `include_usage` asks for it.
    pub fn read_as(&self, normalise: bool, include_usage: bool) -> Value {
        let mut read = policy_fields::normalised(self.read(), normalise);
        if include_usage {
            let map: serde_json::Map<String, Value> = self
                .entities
                .iter()
                .map(|entity| (entity.value_key.clone(), entity.usage()))
                .collect();
            read["value_key_usage_map"] = Value::Object(map);
        }
        read
    }

    fn limit(&self) -> f64 {
        self.credit_limit.as_f64().unwrap_or(0.0)
    }

    /// Counts `usage` against `value_key` (its entity is made on first use) and answers the
    /// entity as it now is.
    pub fn add_usage(&mut self, value_key: &str, usage: f64) -> Value {
        let limit = self.limit();
        let threshold = self.alert_threshold.as_ref().and_then(Number::as_f64);
        let at = match self.entities.iter().position(|e| e.value_key == value_key) {
            Some(at) => at,
            None => {
                self.entities.push(UsageEntity::new(value_key));
                self.entities.len() - 1
            }
        };
        let entity = &mut self.entities[at];
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

    /// The dump of `GET /_emulator/state`: the read, the reset count and every entity.
    fn dump(&self) -> Value {
        let mut value = self.read();
        value["resets"] = json!(self.resets);
        value["entities"] = self.entities.iter().map(UsageEntity::row).collect();
        value
    }
}

impl UsageLimitStore {
    /// Every policy in creation order, archived ones included.
    pub fn sorted(&self) -> Vec<&UsageLimitRecord> {
        let mut records: Vec<_> = self.by_id.values().collect();
        records.sort_by_key(|record| record.seq);
        records
    }

    pub fn insert(&mut self, record: UsageLimitRecord) {
        self.by_id.insert(record.id.clone(), record);
    }

    /// The policy if its status is `status`.
    pub fn find(&self, id: &str, status: &str) -> Option<&UsageLimitRecord> {
        self.by_id.get(id).filter(|record| record.status == status)
    }

    /// The policy if it is active: only active policies take writes, usage and resets.
    pub fn active_mut(&mut self, id: &str) -> Option<&mut UsageLimitRecord> {
        self.by_id
            .get_mut(id)
            .filter(|record| record.status == "active")
    }

    /// Every policy, archived ones included, with reset counts and entities (for
    /// `GET /_emulator/state`).
    pub fn dump(&self) -> Vec<Value> {
        self.sorted()
            .into_iter()
            .map(UsageLimitRecord::dump)
            .collect()
    }

    /// Preloads a policy given in its read shape, with its usage as `entities` (entity rows) or
    /// `value_key_usage_map`, and an optional `resets` count; returns its id.
    pub fn seed(&mut self, state: &Shared, item: &Object) -> ApiResult<String> {
        let created_at = fields::str_or(item, "created_at", now());
        let record = UsageLimitRecord {
            seq: state.next_seq(),
            api_created: None,
            id: fields::str_or(item, "id", new_id()),
            name: fields::nullable_str(item, "name"),
            description: fields::nullable_str(item, "description"),
            conditions: conditions(item, "conditions")?,
            group_by: group_by(item)?,
            kind: required_enum(item, "type", TYPES)?,
            credit_limit: fields::opt_number(item, "credit_limit")?
                .unwrap_or_else(|| Number::from(0)),
            alert_threshold: fields::opt_number(item, "alert_threshold")?,
            periodic_reset: fields::opt_enum(item, "periodic_reset", PERIODIC_RESETS)?,
            periodic_reset_days: item.get("periodic_reset_days").and_then(Value::as_u64),
            next_usage_reset_at: fields::nullable_str(item, "next_usage_reset_at"),
            last_reset_at: fields::nullable_str(item, "last_reset_at"),
            status: fields::opt_enum(item, "status", STATUSES)?
                .unwrap_or_else(|| "active".to_owned()),
            workspace_id: fields::str_or(item, "workspace_id", &state.default_workspace_id),
            organisation_id: fields::str_or(item, "organisation_id", &state.organisation_id),
            last_updated_at: fields::str_or(item, "last_updated_at", &created_at),
            created_at,
            created_by: fields::str_or(item, "created_by", &state.user_id),
            entities: seeded_entities(item),
            resets: item.get("resets").and_then(Value::as_u64).unwrap_or(0),
        };
        let id = record.id.clone();
        self.insert(record);
        Ok(id)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn record(limit: u64, threshold: Option<u64>) -> UsageLimitRecord {
        UsageLimitRecord {
            seq: 0,
            api_created: None,
            id: new_id(),
            name: None,
            description: None,
            conditions: Vec::new(),
            group_by: Vec::new(),
            kind: "cost".to_owned(),
            credit_limit: Number::from(limit),
            alert_threshold: threshold.map(Number::from),
            periodic_reset: None,
            periodic_reset_days: None,
            next_usage_reset_at: None,
            last_reset_at: None,
            status: "active".to_owned(),
            workspace_id: new_id(),
            organisation_id: new_id(),
            created_at: now(),
            last_updated_at: now(),
            created_by: new_id(),
            entities: Vec::new(),
            resets: 0,
        }
    }

    #[test]
    fn usage_crosses_the_threshold_then_exhausts() {
        let mut policy = record(10, Some(5));
        let row = policy.add_usage("k", 2.5);
        assert_eq!(
            (row["current_usage"].clone(), row["status"].clone()),
            (json!(2.5), json!("active"))
        );
        assert_eq!(row["is_threshold_alerts_sent"], json!(0));
        let row = policy.add_usage("k", 2.5);
        assert_eq!(row["current_usage"], json!(5), "whole amounts as integers");
        assert_eq!(row["is_threshold_alerts_sent"], json!(1));
        let row = policy.add_usage("k", 5.0);
        assert_eq!(row["status"], "exhausted");
        assert_eq!(row["is_exhausted_alerts_sent"], json!(1));
        assert_eq!(policy.entities.len(), 1, "one entity per value");
    }

    #[test]
    fn a_raised_limit_reopens_and_a_reset_clears_everything() {
        let mut policy = record(10, None);
        policy.add_usage("k", 12.0);
        policy.credit_limit = Number::from(20);
        policy.recheck_limit();
        let usage = policy.read_as(false, true)["value_key_usage_map"]["k"].clone();
        assert_eq!(usage["status"], "active");
        assert_eq!(
            usage["is_exhausted_alerts_sent"],
            json!(1),
            "alerts stay sent"
        );
        policy.reset_value("k");
        policy.reset_value("never-used");
        assert_eq!(policy.resets, 2);
        assert!(policy.last_reset_at.is_some());
        let row = policy.entities[0].row();
        assert_eq!(
            (
                row["current_usage"].clone(),
                row["is_exhausted_alerts_sent"].clone()
            ),
            (json!(0), json!(0))
        );
    }
}
