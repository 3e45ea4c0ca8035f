//! Gateway API keys (service and user) in memory: their read shape, one-time key values and
//! rotation with a transition period. The routes are in `api_key_routes`.
//!
//! The key value is returned in full only by create and by rotate (FACTS-more §0.5); every read
//! shows [`MASK`] in its place. A rotation issues a new value and keeps the one it replaces
//! working until its own transition expiry; each earlier value keeps its own expiry, so two
//! rotations in a row leave two old values live until they expire. A key whose `expires_at` has
//! passed is not live at all (its `expiry_enforced` reads 1 while it has an expiry).
//! `GET /_emulator/state` shows the current value and the still-live previous ones in clear,
//! with a rotation count per key; `POST /_emulator/api-keys/{id}/handshake` says whether a
//! presented value is live.
//!
//! DELETE removes the key (a hard delete, FACTS-more §0.4). `rotation_policy` is stored and shown
//! by the state dump, but the emulator never rotates on a schedule.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use super::{
    errors::{ApiResult, EmulatorError},
    fields::{self, Object},
    state::{Shared, new_id, now, now_plus, random_hex, touched},
};

/// What reads show instead of the key value (the deployments' mask).
pub const MASK: &str = "****";
/// The `object` of reads and of create and rotate receipts.
pub const OBJECT: &str = "api-key";
/// The shortest transition the API takes, which is also its default (30 minutes).
pub const MIN_TRANSITION_MS: u64 = 1_800_000;

/// Which per-kind route a key lives under: `/api-keys/service` or `/api-keys/user`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    Service,
    User,
}

impl KeyKind {
    pub fn segment(self) -> &'static str {
        match self {
            Self::Service => "service",
            Self::User => "user",
        }
    }

    /// How errors name a key of this kind: `service API key <id>`.
    pub fn noun(self) -> &'static str {
        match self {
            Self::Service => "service API key",
            Self::User => "user API key",
        }
    }
}

#[derive(Default)]
pub struct ApiKeyStore {
    by_id: HashMap<String, ApiKeyRecord>,
    /// The keys DELETE removed, each as `{id, name, rotations}` (for `GET /_emulator/state`:
    /// tests count the rotations a replaced key saw).
    deleted: Vec<Value>,
}

/// `defaults` of a key: what requests made with it get unless they say otherwise.
#[derive(Clone, Default)]
pub struct KeyDefaults {
    pub metadata: Value,
    pub config_id: Option<String>,
    /// `None` until a request sets it; reads then show `null` at the top level.
    pub allow_config_override: Option<bool>,
}

impl KeyDefaults {
    /// Each field `sent` has replaces the stored one (`config_id: null` unbinds the config);
    /// the others stay.
    pub fn merge(&mut self, sent: &Object) {
        if let Some(metadata) = sent.get("metadata") {
            self.metadata = metadata.clone();
        }
        if sent.contains_key("config_id") {
            self.config_id = fields::nullable_str(sent, "config_id");
        }
        if let Some(allow) = sent.get("allow_config_override") {
            self.allow_config_override =
                (!allow.is_null()).then(|| fields::flag_or(sent, "allow_config_override", true));
        }
    }

    fn to_json(&self) -> Value {
        let mut value = json!({ "metadata": self.metadata, "config_id": self.config_id });
        if let Some(allow) = self.allow_config_override {
            value["allow_config_override"] = json!(allow);
        }
        value
    }
}

/// A value a rotation replaced, live until `expires`.
pub struct PreviousKey {
    pub key: String,
    pub expires: Instant,
    pub expires_at: String,
}

pub struct ApiKeyRecord {
    pub seq: u64,
    /// When the API created it (`None` when seeded); lists lag behind it under `list_lag_ms`.
    pub api_created: Option<Instant>,
    pub id: String,
    pub kind: KeyKind,
    /// The read `type`: `workspace-service`, `workspace-user` or `organisation-service`.
    pub key_type: String,
    pub name: String,
    pub description: Option<String>,
    pub organisation_id: String,
    pub workspace_id: Option<String>,
    pub user_id: Option<String>,
    pub status: String,
    pub created_at: String,
    pub last_updated_at: String,
    pub creation_mode: String,
    pub rate_limits: Vec<Value>,
    pub usage_limits: Value,
    pub expires_at: Option<String>,
    pub last_reset_at: Option<String>,
    pub next_usage_reset_at: Option<String>,
    pub alert_emails: Vec<String>,
    pub scopes: Vec<String>,
    pub defaults: KeyDefaults,
    pub api_key_defaults_id: String,
    pub rotation_policy: Value,
    pub created_by: String,
    pub last_updated_by: String,
    /// The current key value.
    pub key: String,
    /// Values replaced by rotations whose transition has not ended yet (pruned on rotation).
    pub previous: Vec<PreviousKey>,
    /// How many rotations it has seen (shown by `GET /_emulator/state`).
    pub rotations: u64,
    pub last_rotated_at: Option<String>,
}

pub fn new_key() -> String {
    format!("ak-{}", random_hex(24))
}

/// Which of a key's values a presented one is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Live {
    Current,
    Previous,
}

impl ApiKeyRecord {
    /// A new active key made by the API, before the request's fields are applied.
    pub fn created(state: &Shared, kind: KeyKind, key_type: String, name: String) -> Self {
        let created_at = now();
        Self {
            seq: state.next_seq(),
            api_created: Some(Instant::now()),
            id: new_id(),
            kind,
            key_type,
            name,
            description: None,
            organisation_id: state.organisation_id.clone(),
            workspace_id: None,
            user_id: None,
            status: "active".to_owned(),
            last_updated_at: created_at.clone(),
            created_at,
            creation_mode: "api".to_owned(),
            rate_limits: Vec::new(),
            usage_limits: Value::Null,
            expires_at: None,
            last_reset_at: None,
            next_usage_reset_at: None,
            alert_emails: Vec::new(),
            scopes: Vec::new(),
            defaults: KeyDefaults::default(),
            api_key_defaults_id: new_id(),
            rotation_policy: Value::Null,
            created_by: state.user_id.clone(),
            last_updated_by: state.user_id.clone(),
            key: new_key(),
            previous: Vec::new(),
            rotations: 0,
            last_rotated_at: None,
        }
    }

    /// The live read shape (FACTS-more §4) with the key masked: `expiry_enforced` and the
    /// top-level `allow_config_override` as 0/1 integers (the latter `null` until set).
    pub fn read(&self) -> Value {
        json!({
            "id": self.id,
            "key": MASK,
            "name": self.name,
            "description": self.description,
            "type": self.key_type,
            "organisation_id": self.organisation_id,
            "workspace_id": self.workspace_id,
            "user_id": self.user_id,
            "status": self.status,
            "created_at": self.created_at,
            "last_updated_at": self.last_updated_at,
            "creation_mode": self.creation_mode,
            "rate_limits": self.rate_limits,
            "usage_limits": self.usage_limits,
            "reset_usage": 0,
            "expires_at": self.expires_at,
            "last_reset_at": self.last_reset_at,
            "alert_emails": self.alert_emails,
            "expiry_enforced": fields::flag(self.expires_at.is_some()),
            "next_usage_reset_at": self.next_usage_reset_at,
            "allow_config_override": self.defaults.allow_config_override.map(fields::flag),
            "api_key_defaults_id": self.api_key_defaults_id,
            "created_by": self.created_by,
            "last_updated_by": self.last_updated_by,
            "scopes": self.scopes,
            "defaults": self.defaults.to_json(),
            "object": OBJECT,
        })
    }

    /// The one-time create receipt.
    pub fn receipt(&self) -> Value {
        json!({ "id": self.id, "key": self.key, "object": OBJECT })
    }

    /// Whether `expires_at` has passed.
    fn expired(&self) -> bool {
        self.expires_at
            .as_deref()
            .and_then(|at| at.parse::<jiff::Timestamp>().ok())
            .is_some_and(|at| at <= jiff::Timestamp::now())
    }

    /// Whether `presented` authenticates as this key right now, and as which value.
    pub fn liveness(&self, presented: &str) -> Option<Live> {
        if self.expired() {
            return None;
        }
        if self.key == presented {
            return Some(Live::Current);
        }
        let now = Instant::now();
        self.previous
            .iter()
            .any(|old| old.key == presented && old.expires > now)
            .then_some(Live::Previous)
    }

    /// Issues a new value; the current one stays live for `transition`. Answers the one-time
    /// rotate receipt.
    pub fn rotate(&mut self, transition: Duration) -> Value {
        let started = Instant::now();
        self.previous.retain(|old| old.expires > started);
        let expires_at = now_plus(transition);
        let old = std::mem::replace(&mut self.key, new_key());
        self.previous.push(PreviousKey {
            key: old,
            expires: started + transition,
            expires_at: expires_at.clone(),
        });
        self.rotations += 1;
        self.last_rotated_at = Some(now());
        self.last_updated_at = touched(&self.last_updated_at);
        json!({
            "id": self.id,
            "key": self.key,
            "key_transition_expires_at": expires_at,
            "object": OBJECT,
        })
    }

    /// The transition a key's `rotation_policy` asks for, if any.
    pub fn policy_transition_ms(&self) -> Option<u64> {
        self.rotation_policy
            .get("key_transition_period_ms")
            .and_then(Value::as_u64)
    }

    /// The dump of `GET /_emulator/state`: the read with the values in clear.
    fn dump(&self) -> Value {
        let now = Instant::now();
        let mut value = self.read();
        value["key"] = json!(self.key);
        value["kind"] = json!(self.kind.segment());
        value["previous_keys"] = self
            .previous
            .iter()
            .filter(|old| old.expires > now)
            .map(|old| json!({ "key": old.key, "key_transition_expires_at": old.expires_at }))
            .collect();
        value["rotations"] = json!(self.rotations);
        value["last_rotated_at"] = json!(self.last_rotated_at);
        value["rotation_policy"] = self.rotation_policy.clone();
        value
    }
}

impl ApiKeyStore {
    /// Every key in creation order.
    pub fn sorted(&self) -> Vec<&ApiKeyRecord> {
        let mut records: Vec<_> = self.by_id.values().collect();
        records.sort_by_key(|record| record.seq);
        records
    }

    pub fn insert(&mut self, record: ApiKeyRecord) {
        self.by_id.insert(record.id.clone(), record);
    }

    /// The key with this id under this kind's route.
    pub fn find(&self, kind: KeyKind, id: &str) -> Option<&ApiKeyRecord> {
        self.by_id.get(id).filter(|record| record.kind == kind)
    }

    pub fn find_mut(&mut self, kind: KeyKind, id: &str) -> Option<&mut ApiKeyRecord> {
        self.by_id.get_mut(id).filter(|record| record.kind == kind)
    }

    /// Any key, whatever its kind (the control endpoints).
    pub fn any(&self, id: &str) -> Option<&ApiKeyRecord> {
        self.by_id.get(id)
    }

    pub fn remove(&mut self, kind: KeyKind, id: &str) -> Option<ApiKeyRecord> {
        self.find(kind, id)?;
        let removed = self.by_id.remove(id)?;
        self.deleted.push(json!({
            "id": removed.id,
            "name": removed.name,
            "rotations": removed.rotations,
        }));
        Some(removed)
    }

    /// The keys DELETE removed: `{id, name, rotations}` each, in the order they went.
    pub fn deleted(&self) -> Vec<Value> {
        self.deleted.clone()
    }

    /// Every key with its values in clear and its rotation count (for `GET /_emulator/state`).
    pub fn dump(&self) -> Vec<Value> {
        self.sorted().into_iter().map(ApiKeyRecord::dump).collect()
    }

    /// Preloads a key given in its read shape (or as the state dump shows it). The kind is
    /// `kind` (`service`/`user`), else `user` for a `workspace-user` type, else `service`. A
    /// `key` in clear is kept (a masked or absent one is replaced by a fresh value), as are
    /// `previous_keys` whose `key_transition_expires_at` lies ahead, and a `rotations` count.
    /// Answers the id and the current value.
    pub fn seed(&mut self, state: &Shared, item: &Object) -> ApiResult<(String, String)> {
        let key_type = fields::str_or(item, "type", "workspace-service");
        let kind = match item.get("kind").and_then(Value::as_str) {
            Some("user") => KeyKind::User,
            Some("service") => KeyKind::Service,
            Some(other) => {
                return Err(EmulatorError::validation(format!(
                    "api_keys kind must be service or user, not {other}"
                )));
            }
            None if key_type == "workspace-user" => KeyKind::User,
            None => KeyKind::Service,
        };
        let name = fields::str_or(item, "name", "seeded key");
        let mut record = ApiKeyRecord::created(state, kind, key_type, name);
        record.api_created = None;
        record.id = fields::str_or(item, "id", record.id);
        if self.by_id.contains_key(&record.id) {
            return Err(EmulatorError::validation(format!(
                "api key {} already exists",
                record.id
            )));
        }
        record.apply_seed(state, item);
        let answer = (record.id.clone(), record.key.clone());
        self.insert(record);
        Ok(answer)
    }
}

impl ApiKeyRecord {
    fn apply_seed(&mut self, state: &Shared, item: &Object) {
        let list = |field: &str| -> Vec<String> {
            item.get(field)
                .and_then(Value::as_array)
                .map(|items| {
                    let strings = items.iter().filter_map(Value::as_str);
                    strings.map(str::to_owned).collect()
                })
                .unwrap_or_default()
        };
        self.description = fields::nullable_str(item, "description");
        self.organisation_id = fields::str_or(item, "organisation_id", &state.organisation_id);
        self.workspace_id = match item.get("workspace_id") {
            None if self.key_type == "organisation-service" => None,
            None => Some(state.default_workspace_id.clone()),
            Some(value) => value.as_str().map(str::to_owned),
        };
        self.user_id = fields::nullable_str(item, "user_id");
        self.status = fields::str_or(item, "status", "active");
        self.created_at = fields::str_or(item, "created_at", &self.created_at);
        self.last_updated_at = fields::str_or(item, "last_updated_at", &self.created_at);
        self.creation_mode = fields::str_or(item, "creation_mode", "api");
        self.rate_limits = item
            .get("rate_limits")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        self.usage_limits = item.get("usage_limits").cloned().unwrap_or(Value::Null);
        self.expires_at = fields::nullable_str(item, "expires_at");
        self.last_reset_at = fields::nullable_str(item, "last_reset_at");
        self.next_usage_reset_at = fields::nullable_str(item, "next_usage_reset_at");
        self.alert_emails = list("alert_emails");
        self.scopes = list("scopes");
        if let Some(defaults) = item.get("defaults").and_then(Value::as_object) {
            self.defaults.merge(defaults);
        }
        self.api_key_defaults_id =
            fields::str_or(item, "api_key_defaults_id", &self.api_key_defaults_id);
        self.rotation_policy = item.get("rotation_policy").cloned().unwrap_or(Value::Null);
        self.created_by = fields::str_or(item, "created_by", &state.user_id);
        self.last_updated_by = fields::str_or(item, "last_updated_by", &self.created_by);
        if let Some(key) = item
            .get("key")
            .and_then(Value::as_str)
            .filter(|key| !key.is_empty() && !key.chars().all(|c| c == '*'))
        {
            self.key = key.to_owned();
        }
        self.previous = seeded_previous(item);
        self.rotations = item.get("rotations").and_then(Value::as_u64).unwrap_or(0);
        self.last_rotated_at = fields::nullable_str(item, "last_rotated_at");
    }
}

/// `previous_keys: [{key, key_transition_expires_at}]` of a seeded key, those still ahead.
fn seeded_previous(item: &Object) -> Vec<PreviousKey> {
    let rows = item.get("previous_keys").and_then(Value::as_array);
    rows.into_iter()
        .flatten()
        .filter_map(|row| {
            let key = row.get("key")?.as_str()?.to_owned();
            let expires_at = row.get("key_transition_expires_at")?.as_str()?.to_owned();
            let ends = expires_at.parse::<jiff::Timestamp>().ok()?;
            let left = jiff::Timestamp::now().duration_until(ends);
            let left = Duration::try_from(left).ok()?;
            Some(PreviousKey {
                key,
                expires: Instant::now() + left,
                expires_at,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> ApiKeyRecord {
        ApiKeyRecord {
            seq: 0,
            api_created: None,
            id: new_id(),
            kind: KeyKind::Service,
            key_type: "workspace-service".to_owned(),
            name: "k".to_owned(),
            description: None,
            organisation_id: new_id(),
            workspace_id: None,
            user_id: None,
            status: "active".to_owned(),
            created_at: now(),
            last_updated_at: now(),
            creation_mode: "api".to_owned(),
            rate_limits: Vec::new(),
            usage_limits: Value::Null,
            expires_at: None,
            last_reset_at: None,
            next_usage_reset_at: None,
            alert_emails: Vec::new(),
            scopes: vec!["completions.write".to_owned()],
            defaults: KeyDefaults::default(),
            api_key_defaults_id: new_id(),
            rotation_policy: Value::Null,
            created_by: new_id(),
            last_updated_by: new_id(),
            key: new_key(),
            previous: Vec::new(),
            rotations: 0,
            last_rotated_at: None,
        }
    }

    #[test]
    fn reads_mask_the_key_and_use_integer_flags() {
        let mut key = record();
        let read = key.read();
        assert_eq!(read["key"], MASK);
        assert_eq!(read["expiry_enforced"], 0);
        assert!(read["allow_config_override"].is_null());
        key.expires_at = Some("2999-01-01T00:00:00.000Z".to_owned());
        key.defaults.allow_config_override = Some(false);
        let read = key.read();
        assert_eq!(read["expiry_enforced"], 1);
        assert_eq!(read["allow_config_override"], 0);
        assert_eq!(read["defaults"]["allow_config_override"], false);
    }

    #[test]
    fn a_rotation_keeps_the_old_value_until_its_transition_ends() {
        let mut key = record();
        let first = key.key.clone();
        let receipt = key.rotate(Duration::from_secs(3600));
        let second = receipt["key"].as_str().unwrap().to_owned();
        assert_ne!(first, second);
        assert_eq!(key.liveness(&first), Some(Live::Previous));
        assert_eq!(key.liveness(&second), Some(Live::Current));
        key.rotate(Duration::ZERO);
        assert_eq!(
            key.liveness(&second),
            None,
            "a zero transition ends at once"
        );
        assert_eq!(
            key.liveness(&first),
            Some(Live::Previous),
            "keeps its own expiry"
        );
        assert_eq!(key.rotations, 2);
    }

    #[test]
    fn an_expired_key_is_not_live() {
        let mut key = record();
        let value = key.key.clone();
        key.expires_at = Some("2000-01-01T00:00:00.000Z".to_owned());
        assert_eq!(key.liveness(&value), None);
    }
}
