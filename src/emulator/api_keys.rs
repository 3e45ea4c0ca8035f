//! Gateway API keys (service and user) in memory: their read shape, one-time key values and
//! rotation with a transition period.
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
//!
//! `/ai_gw/v2/api-keys/service` and `/ai_gw/v2/api-keys/user` (the live per-kind routes,
//! FACTS-more §0.1, §4): create with a one-time key, list, masked reads, update, hard delete and
//! rotate; plus the control endpoint `POST /_emulator/api-keys/{id}/handshake`.
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

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use axum::{
    Json, Router,
    body::Bytes,
    extract::{FromRef, Path, Query, State},
    http::StatusCode,
    response::Response,
    routing::{get, post},
};
use serde_json::{Value, json};

use super::common::{
    clock::{now, now_plus, touched},
    errors::{ApiResult, EmulatorError},
    fields::{self, IdRule, JsonObject, Object},
    ids::{new_id, random_hex},
    normalise, policy_fields, records,
    state::{Common, KindState, lock},
};

/// What the API key routes reach.
pub type ApiKeysState = KindState<ApiKeyStore>;

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
    /// The write log of its default config: each value `defaults.config_id` took from a create
    /// or an update that changed it, in order (`GET /_emulator/state` shows it as
    /// `config_writes`; tests count the moves of a key between configs).
    pub config_writes: Vec<Option<String>>,
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
    pub fn created(state: &Common, kind: KeyKind, key_type: String, name: String) -> Self {
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
            config_writes: Vec::new(),
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
        value["config_writes"] = json!(self.config_writes);
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
    pub fn seed(&mut self, state: &Common, item: &Object) -> ApiResult<(String, String)> {
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
    fn apply_seed(&mut self, state: &Common, item: &Object) {
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

const RATE_LIMIT_TYPES: &[&str] = &["requests", "tokens"];
const RATE_LIMIT_UNITS: &[&str] = &["rpd", "rph", "rpm", "rps", "rpw"];
const ROTATION_PERIODS: &[&str] = &["weekly", "monthly"];
/// Fields an update must not carry: the API wants the key recreated (`key` is changed by
/// rotation only).
const IMMUTABLE: &[&str] = &["type", "workspace_id", "user_id", "organisation_id", "key"];

/// The routes of both kinds, for the API router (auth, stats and faults wrap them there).
pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    ApiKeysState: FromRef<S>,
{
    Router::new()
        .merge(kind_routes(KeyKind::Service))
        .merge(kind_routes(KeyKind::User))
}

fn kind_routes<S>(kind: KeyKind) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    ApiKeysState: FromRef<S>,
{
    let base = format!("/ai_gw/v2/api-keys/{}", kind.segment());
    Router::new()
        .route(
            &base,
            get(
                move |state: State<ApiKeysState>, query: Query<HashMap<String, String>>| {
                    list(state, kind, query)
                },
            )
            .post(move |state: State<ApiKeysState>, body: JsonObject| create(state, kind, body)),
        )
        .route(
            &format!("{base}/{{keyId}}"),
            get(move |state: State<ApiKeysState>, id: Path<String>| read(state, kind, id))
                .put(
                    move |state: State<ApiKeysState>, id: Path<String>, body: JsonObject| {
                        update(state, kind, id, body)
                    },
                )
                .delete(move |state: State<ApiKeysState>, id: Path<String>| {
                    delete(state, kind, id)
                }),
        )
        .route(
            &format!("{base}/{{keyId}}/rotate"),
            post(
                move |state: State<ApiKeysState>, id: Path<String>, body: Bytes| {
                    rotate(state, kind, id, body)
                },
            ),
        )
}

/// For the API routes: 404 `AB08`, or 403 `AB03` under `missing_as_ab03`.
fn missing(state: &Common, kind: KeyKind, id: &str) -> EmulatorError {
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
async fn create(
    State(state): State<ApiKeysState>,
    kind: KeyKind,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let name = fields::req_str(&body, "name")?;
    if !body.contains_key("scopes") {
        return Err(EmulatorError::validation("scopes is required"));
    }
    let (read_type, organisation) = key_type(&body, kind)?;
    IdRule::TsgOrUuid.opt_field(&body, "organisation_id")?;
    let workspace_id = IdRule::UuidOrSlug.opt_nonempty(&body, "workspace_id")?;
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
    lock(&state.store).insert(record);
    Ok(Json(receipt))
}

/// `GET /ai_gw/v2/api-keys/{service|user}` → `{object: "list", total, data}` in creation order;
/// `workspace_id` filters; honours `list_lag_ms` and `normalise`.
async fn list(
    State(state): State<ApiKeysState>,
    kind: KeyKind,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let workspace = IdRule::UuidOrSlug.filter(&query, "workspace_id")?;
    let (page_size, current_page) = policy_fields::policy_page(&query)?;
    let faults = state.faults();
    let store = lock(&state.store);
    let matching: Vec<&ApiKeyRecord> = store
        .sorted()
        .into_iter()
        .filter(|r| r.kind == kind && faults.listed(r.api_created))
        .filter(|r| workspace.is_none_or(|ws| r.workspace_id.as_ref() == Some(ws)))
        .collect();
    let total = matching.len();
    let data: Vec<Value> = records::page(matching, page_size, current_page)
        .into_iter()
        .map(ApiKeyRecord::read)
        .collect();
    let body = json!({ "object": "list", "total": total, "data": data });
    Ok(normalise::reply(&body, faults.normalise))
}

/// `GET /ai_gw/v2/api-keys/{service|user}/{keyId}` → the live read shape, key masked.
async fn read(
    State(state): State<ApiKeysState>,
    kind: KeyKind,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let normalise = state.faults().normalise;
    let store = lock(&state.store);
    let record = store
        .find(kind, &id)
        .ok_or_else(|| missing(&state, kind, &id))?;
    Ok(normalise::reply(&record.read(), normalise))
}

/// `PUT /ai_gw/v2/api-keys/{service|user}/{keyId}` → `{}`. The body must change something; an
/// immutable field in it (with a value) is a 400 naming it.
async fn update(
    State(state): State<ApiKeysState>,
    kind: KeyKind,
    Path(id): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
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
    fields::require_update(!changes.is_empty())?;
    let mut store = lock(&state.store);
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
    State(state): State<ApiKeysState>,
    kind: KeyKind,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    lock(&state.store)
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
    State(state): State<ApiKeysState>,
    kind: KeyKind,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let requested = transition_period(&body)?;
    let mut store = lock(&state.store);
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
    State(state): State<ApiKeysState>,
    Path(id): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let presented = fields::opt_str(&body, "key")?
        .ok_or_else(|| EmulatorError::validation("key is required"))?;
    let store = lock(&state.store);
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

impl Changes {
    fn parse(body: &Object) -> ApiResult<Self> {
        let name = fields::opt_name(body)?;
        Ok(Self {
            name,
            description: fields::sent(body, "description", fields::opt_str(body, "description")?),
            scopes: scopes(body)?,
            rate_limits: fields::sent(body, "rate_limits", rate_limits(body)?)
                .map(Option::unwrap_or_default),
            usage_limits: match body.get("usage_limits") {
                None => None,
                Some(value @ (Value::Null | Value::Object(_))) => Some(value.clone()),
                Some(_) => return Err(EmulatorError::validation("usage_limits must be an object")),
            },
            reset_usage: fields::opt_bool(body, "reset_usage")?.unwrap_or(false),
            defaults: fields::sent(body, "defaults", defaults(body)?),
            alert_emails: fields::sent(body, "alert_emails", alert_emails(body)?)
                .map(Option::unwrap_or_default),
            expires_at: fields::sent(body, "expires_at", timestamp(body, "expires_at")?),
            rotation_policy: fields::sent(body, "rotation_policy", rotation_policy(body)?)
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
        fields::set(&mut record.name, self.name);
        fields::set(&mut record.description, self.description);
        fields::set(&mut record.scopes, self.scopes);
        fields::set(&mut record.rate_limits, self.rate_limits);
        fields::set(&mut record.usage_limits, self.usage_limits);
        // Not persisted by the API ([pTF]): the reset shows only as `last_reset_at`.
        if self.reset_usage {
            record.last_reset_at = Some(now());
        }
        let config_before = record.defaults.config_id.clone();
        match self.defaults {
            None => {}
            Some(None) => record.defaults = KeyDefaults::default(),
            Some(Some(defaults)) => record.defaults.merge(&defaults),
        }
        if record.defaults.config_id != config_before {
            record.config_writes.push(record.defaults.config_id.clone());
        }
        fields::set(&mut record.alert_emails, self.alert_emails);
        fields::set(&mut record.expires_at, self.expires_at);
        fields::set(&mut record.rotation_policy, self.rotation_policy);
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
    fields::items("rate_limits", &items, |item| {
        let kind = policy_fields::required_enum(item, "type", RATE_LIMIT_TYPES)
            .map_err(|err| err.prefixed("rate_limits[]."))?;
        let unit = policy_fields::required_enum(item, "unit", RATE_LIMIT_UNITS)
            .map_err(|err| err.prefixed("rate_limits[]."))?;
        let value = item.get("value").and_then(Value::as_u64).ok_or_else(|| {
            EmulatorError::validation("rate_limits[].value must be an integer >= 0")
        })?;
        Ok(json!({ "type": kind, "unit": unit, "value": value }))
    })
    .map(Some)
}

/// `defaults`: `{metadata?: object, config_id?: string|null, allow_config_override?: bool}`.
fn defaults(body: &Object) -> ApiResult<Option<Object>> {
    let Some(defaults) = fields::opt_object(body, "defaults")? else {
        return Ok(None);
    };
    let prefix = |err: EmulatorError| err.prefixed("defaults.");
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
    let prefix = |err: EmulatorError| err.prefixed("rotation_policy.");
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
            config_writes: Vec::new(),
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
