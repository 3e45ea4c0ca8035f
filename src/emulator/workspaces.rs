//! Workspaces in memory, served where SCM serves them (FACTS-more §7, FACTS-rest §1): `GET
//! /workspaces` and `GET /workspaces/{uuid-or-slug}` on both planes (`/ai_gw/v2` and
//! `/ai_gw/admin/v2`), `POST`, `PUT` and `DELETE` on the admin plane only (the data plane has
//! no write route).
//!
//! The live quirks:
//! - create names an IAM scope (`scope_name`, required) that must already exist in
//!   `iam_scopes`, else `400 AB01`; the receipt is most of the record but lacks `status`,
//!   `is_default`, `icon`, `usage_limits`, `rate_limits` and the settings blocks;
//! - the data plane shows a workspace only once its scope binds its slug (the third call of the
//!   create flow): unbound, it is missing from data-plane lists and a data-plane GET answers
//!   `403 AB03`; the admin plane shows every workspace;
//! - `PUT` is partial and answers `{}`; an update naming no updatable field is `400 AB01` ("No
//!   update fields provided"); `scope_name` cannot change; the clearing forms are the explicit
//!   ones of FACTS-rest §1: `defaults: {config_id: null, metadata: {}}`, `usage_limits: null`
//!   (`[]` changes nothing), `rate_limits: []`, `icon: ""`; a blank description is ignored (SCM
//!   keeps the previous one); `defaults.config_id` must name an existing config;
//!   `defaults.allow_config_override` is taken but never echoed;
//! - one usage policy per workspace: a credit change keeps its `id`, a `type` change makes a new
//!   one;
//! - reads prepend the icon to `name` (`"🚀 Payments"`); `is_default` is 0/1; the detail's
//!   `status` is `null` while the list says `active`; `organisation_id` is the internal UUID;
//! - `DELETE` archives (no query parameters): the workspace then answers `404 AB08` (or `403
//!   AB03` under `missing_as_ab03`) and shows only in `?status=archived` lists; the default
//!   workspace cannot be archived (`400 AB01`; FACTS leaves this open, the emulator refuses).
//!
//! The default workspace (`Common::default_workspace_id`) always exists and is visible on both
//! planes.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use axum::{
    Json, Router,
    extract::{FromRef, Path, Query, State},
    response::Response,
    routing::get,
};
use serde_json::{Map, Value, json};

use super::{
    common::{
        clock::{now, touched},
        errors::{ApiResult, EmulatorError},
        fields::{self, IdRule, JsonObject, Object},
        ids::{make_slug, new_id},
        normalise, policy_fields,
        records::{Key, Kind, Record, Records, Slug, missing},
        state::{Common, lock},
    },
    configs::ConfigStore,
    iam_scopes::ScopeStore,
    integrations,
};

/// The `object` of reads and receipts.
pub const OBJECT: &str = "workspace";

/// The fields an update may carry (the API's own rejection message, plus `usage_limits`).
const UPDATABLE: &[&str] = &[
    "name",
    "description",
    "icon",
    "defaults",
    "usage_limits",
    "rate_limits",
];

/// What the workspace routes reach: the state every route shares, the workspaces, the IAM scopes
/// (create checks the scope; the data plane shows only bound workspaces) and the configs
/// (`defaults.config_id`).
#[derive(Clone)]
pub struct WorkspacesState {
    pub common: Arc<Common>,
    pub workspaces: Arc<Mutex<WorkspaceStore>>,
    pub scopes: Arc<Mutex<ScopeStore>>,
    pub configs: Arc<Mutex<ConfigStore>>,
}

/// Which base a read came through.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Plane {
    /// `/ai_gw/v2`: only workspaces whose scope binds them.
    Data,
    /// `/ai_gw/admin/v2`: every workspace.
    Admin,
}

pub type WorkspaceStore = Records<WorkspaceRecord>;

pub struct WorkspaceRecord {
    pub key: Key,
    pub name: String,
    pub description: Option<String>,
    pub icon: Option<String>,
    pub scope_name: String,
    /// `config_id` (null when unset) and `metadata` (an object).
    pub defaults: Object,
    /// `null` or an array of at most one usage policy (each with its `id`).
    pub usage_limits: Value,
    /// An array (empty when unset).
    pub rate_limits: Vec<Value>,
    pub is_default: bool,
    pub status: String,
    pub users: Vec<Value>,
    pub created_at: String,
    pub last_updated_at: String,
    pub organisation_id: String,
    pub created_by: String,
    /// Requests that wrote it (create, updates, the archive).
    pub writes: u64,
}

/// Found by UUID or slug, archived ones included.
impl Record for WorkspaceRecord {
    const KIND: Kind = Kind::new("a", "workspace", Slug::Prefixed("ws"));

    fn key(&self) -> &Key {
        &self.key
    }
}

impl WorkspaceStore {
    /// The store with the organisation's default workspace in it.
    pub fn new(common: &Common) -> Self {
        let mut record = WorkspaceRecord::created(common, "Default".to_owned(), String::new());
        record.key.api_created = None;
        record.key.id = common.default_workspace_id.clone();
        record.key.slug = make_slug("ws", "default");
        record.scope_name = format!("main_airs_workspace_{}", record.key.id);
        record.is_default = true;
        let mut store = Self::default();
        store.insert(record);
        store
    }

    /// An active workspace by UUID or slug.
    pub fn active(&self, key: &str) -> Option<&WorkspaceRecord> {
        self.find(key).filter(|r| r.status == "active")
    }

    /// Every workspace with its write count, for `GET /_emulator/state`.
    pub fn dump(&self) -> Vec<Value> {
        self.dump_with(|r| {
            let mut value = r.detail();
            value["status"] = json!(r.status);
            value["writes"] = json!(r.writes);
            value
        })
    }

    /// Preloads a workspace given in its read shape (`status` `archived` for an archived one);
    /// answers its id and slug.
    pub fn seed(&mut self, common: &Common, item: &Object) -> ApiResult<(String, String)> {
        let name = fields::str_or(item, "name", "seeded workspace");
        let scope = fields::str_or(item, "scope_name", format!("ws_{name}_seeded"));
        let mut record = WorkspaceRecord::created(common, name, scope);
        record.key.api_created = None;
        record.key.id = fields::str_or(item, "id", record.key.id);
        record.key.slug =
            fields::nullable_str(item, "slug").unwrap_or_else(|| self.new_slug(&record.name));
        self.check_new(&record.key.id, &record.key.slug)?;
        record.description = fields::nullable_str(item, "description");
        record.icon = fields::nullable_str(item, "icon").filter(|i| !i.is_empty());
        record.status = fields::str_or(item, "status", "active");
        Ok(self.insert_seeded(record))
    }
}

impl WorkspaceRecord {
    fn created(common: &Common, name: String, scope_name: String) -> Self {
        let at = now();
        Self {
            key: Key::created(common, String::new()),
            name,
            description: None,
            icon: None,
            scope_name,
            defaults: Map::from_iter([
                ("config_id".to_owned(), Value::Null),
                ("metadata".to_owned(), json!({})),
            ]),
            usage_limits: Value::Null,
            rate_limits: Vec::new(),
            is_default: false,
            status: "active".to_owned(),
            users: Vec::new(),
            created_at: at.clone(),
            last_updated_at: at,
            organisation_id: common.organisation_id.clone(),
            created_by: common.user_id.clone(),
            writes: 0,
        }
    }

    /// `name` as reads show it: the icon, a space, the name.
    fn shown_name(&self) -> String {
        match &self.icon {
            Some(icon) => format!("{icon} {}", self.name),
            None => self.name.clone(),
        }
    }

    /// A row of the list.
    pub fn row(&self) -> Value {
        json!({
            "id": self.key.id,
            "slug": self.key.slug,
            "name": self.shown_name(),
            "icon": self.icon,
            "description": self.description,
            "created_at": self.created_at,
            "last_updated_at": self.last_updated_at,
            "is_default": fields::flag(self.is_default),
            "status": self.status,
            "scope_name": self.scope_name,
            "object": OBJECT,
        })
    }

    /// The live detail: the settings blocks the API shows but no write sets, `status` null.
    pub fn detail(&self) -> Value {
        json!({
            "id": self.key.id,
            "name": self.shown_name(),
            "description": self.description,
            "created_at": self.created_at,
            "last_updated_at": self.last_updated_at,
            "is_default": fields::flag(self.is_default),
            "defaults": self.defaults,
            "slug": self.key.slug,
            "icon": self.icon,
            "usage_limits": self.usage_limits,
            "rate_limits": self.rate_limits,
            "security_settings": {
                "membersViewLogs": true, "membersViewConfigs": true, "managersWriteConfigs": true,
                "managersWriteMcpServers": true,
            },
            "data_plane_security_settings": {"blockInlineConfig": false},
            "settings": {
                "debug_log": 1, "user_api_key_ttl": null, "user_key_metadata": {},
                "user_api_key_count": null, "user_api_key_max_ttl": null,
                "user_api_key_auto_create": false, "user_key_metadata_override": false,
                "user_api_key_rotation_period": null,
            },
            "status": Value::Null,
            "organisation_id": self.organisation_id,
            "last_reset_at": Value::Null,
            "created_by": self.created_by,
            "creation_source": "api",
            "scope_name": self.scope_name,
            "export_settings": {},
            "users": self.users,
            "object": OBJECT,
        })
    }

    /// The create receipt: most of the record.
    fn receipt(&self) -> Value {
        json!({
            "id": self.key.id,
            "name": self.shown_name(),
            "slug": self.key.slug,
            "description": self.description,
            "created_at": self.created_at,
            "last_updated_at": self.last_updated_at,
            "scope_name": self.scope_name,
            "defaults": self.defaults,
            "users": self.users,
            "object": OBJECT,
        })
    }

    /// Visible through `plane`: the admin plane sees all, the data plane the default workspace
    /// and those whose scope binds their slug.
    fn visible(&self, plane: Plane, scopes: &ScopeStore) -> bool {
        plane == Plane::Admin || self.is_default || scopes.binds(&self.scope_name, &self.key.slug)
    }
}

/// The routes under `/ai_gw/v2/workspaces` (reads) and `/ai_gw/admin/v2/workspaces` (reads and
/// writes).
pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    WorkspacesState: FromRef<S>,
{
    Router::new()
        .route(
            "/ai_gw/v2/workspaces",
            get(|state, query| list(state, Plane::Data, query)),
        )
        .route(
            "/ai_gw/v2/workspaces/{workspaceRef}",
            get(|state, key| read(state, Plane::Data, key)),
        )
        .route(
            "/ai_gw/admin/v2/workspaces",
            get(|state, query| list(state, Plane::Admin, query)).post(create),
        )
        .route(
            "/ai_gw/admin/v2/workspaces/{workspaceRef}",
            get(|state, key| read(state, Plane::Admin, key))
                .put(update)
                .delete(archive),
        )
}

/// `?status=` (comma separated, default `active`).
fn statuses(query: &HashMap<String, String>) -> ApiResult<Vec<String>> {
    let Some(raw) = query.get("status") else {
        return Ok(vec!["active".to_owned()]);
    };
    raw.split(',')
        .map(|s| fields::check_enum("status", Some(s.trim()), &["active", "archived"]))
        .collect()
}

/// `GET …/workspaces` → `{object: "list", total, data}`: `status`, `name` (a case-sensitive
/// part of the name) and `exact_name` filter; pages with `page_size`/`current_page`.
async fn list(
    State(state): State<WorkspacesState>,
    plane: Plane,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let statuses = statuses(&query)?;
    let (page_size, current_page) = policy_fields::policy_page(&query)?;
    let faults = state.common.faults();
    let scopes = lock(&state.scopes);
    let admits = |r: &WorkspaceRecord| {
        statuses.contains(&r.status)
            && r.visible(plane, &scopes)
            && query
                .get("name")
                .is_none_or(|n| r.name.contains(n.as_str()))
            && query.get("exact_name").is_none_or(|n| &r.name == n)
    };
    Ok(lock(&state.workspaces).reply_page(
        &faults,
        (page_size, current_page),
        admits,
        WorkspaceRecord::row,
    ))
}

/// `GET …/workspaces/{uuid-or-slug}`.
async fn read(
    State(state): State<WorkspacesState>,
    plane: Plane,
    Path(key): Path<String>,
) -> ApiResult<Response> {
    let normalise = state.common.faults().normalise;
    let scopes = lock(&state.scopes);
    let store = lock(&state.workspaces);
    let record = store
        .active(&key)
        .ok_or_else(|| missing::<WorkspaceRecord>(&state.common, &key))?;
    if !record.visible(plane, &scopes) {
        return Err(EmulatorError::NotVisible(format!(
            "workspace {key} is not in the caller's scope"
        )));
    }
    Ok(normalise::reply(&record.detail(), normalise))
}

/// `defaults` of a write, merged into `current`: `config_id` (a string naming a config, or null
/// to clear), `metadata` (an object of strings, replaced; `{}` clears), `allow_config_override`
/// (a boolean, taken and not kept).
fn merge_defaults(current: &mut Object, sent: &Object, configs: &ConfigStore) -> ApiResult<()> {
    if let Some(config) = sent.get("config_id") {
        match config {
            Value::Null => {}
            Value::String(id) if configs.exists(id) => {}
            Value::String(id) => {
                return Err(EmulatorError::validation(format!(
                    "defaults.config_id {id} does not name a config"
                )));
            }
            _ => {
                return Err(EmulatorError::validation(
                    "defaults.config_id must be a string or null",
                ));
            }
        }
        current.insert("config_id".to_owned(), config.clone());
    }
    if let Some(metadata) = fields::opt_string_map(sent, "metadata")
        .map_err(|e| EmulatorError::validation(format!("defaults.{e}")))?
    {
        current.insert("metadata".to_owned(), Value::Object(metadata));
    }
    fields::opt_bool(sent, "allow_config_override")
        .map_err(|e| EmulatorError::validation(format!("defaults.{e}")))?;
    Ok(())
}

/// `usage_limits` of a write: `None` when it changes nothing (absent, or `[]`), `Some(null)` to
/// clear, `Some([policy])` to set; a policy of the current `type` keeps the current `id`.
fn usage_limits(body: &Object, current: &Value) -> ApiResult<Option<Value>> {
    match body.get("usage_limits") {
        None => Ok(None),
        Some(Value::Null) => Ok(Some(Value::Null)),
        Some(Value::Array(items)) if items.is_empty() => Ok(None),
        Some(Value::Array(items)) if items.len() == 1 => {
            let mut policy = integrations::usage_limits(&items[0], "usage_limits[]")?;
            let kept = current
                .get(0)
                .filter(|old| old["type"] == policy["type"])
                .and_then(|old| old["id"].as_str())
                .map_or_else(new_id, str::to_owned);
            policy["id"] = json!(kept);
            Ok(Some(json!([policy])))
        }
        Some(Value::Array(_)) => Err(EmulatorError::validation(
            "usage_limits: one usage policy per workspace",
        )),
        Some(_) => Err(EmulatorError::validation(
            "usage_limits must be an array or null",
        )),
    }
}

/// `rate_limits` of a write: `None` when absent (or null), `Some(list)` to replace (`[]` clears).
fn rate_limits(body: &Object) -> ApiResult<Option<Vec<Value>>> {
    let Some(items) = fields::opt_array(body, "rate_limits")? else {
        return Ok(None);
    };
    items
        .iter()
        .map(|item| integrations::rate_limits(item, "rate_limits[]"))
        .collect::<ApiResult<Vec<_>>>()
        .map(Some)
}

/// `POST /ai_gw/admin/v2/workspaces` → the receipt.
async fn create(
    State(state): State<WorkspacesState>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let name = fields::req_str(&body, "name")?;
    let scope_name = fields::req_str(&body, "scope_name")?;
    IdRule::TsgOrUuid.opt_field(&body, "organisation_id")?;
    let description = fields::opt_str_max(&body, "description", 1024)?;
    let icon = fields::opt_str(&body, "icon")?.filter(|i| !i.is_empty());
    let defaults = fields::opt_object(&body, "defaults")?;
    let users = fields::opt_str_list(&body, "users")?.unwrap_or_default();
    let usage = usage_limits(&body, &Value::Null)?;
    let rates = rate_limits(&body)?;
    if !lock(&state.scopes).exists(&scope_name) {
        return Err(EmulatorError::validation(format!(
            "scope_name {scope_name} does not name an existing IAM scope"
        )));
    }
    let mut record = WorkspaceRecord::created(&state.common, name, scope_name);
    if let Some(defaults) = defaults {
        merge_defaults(&mut record.defaults, &defaults, &lock(&state.configs))?;
    }
    record.description = description;
    record.icon = icon;
    record.users = users.into_iter().map(Value::String).collect();
    record.usage_limits = usage.unwrap_or(Value::Null);
    record.rate_limits = rates.unwrap_or_default();
    record.writes = 1;
    let mut store = lock(&state.workspaces);
    record.key.slug = store.new_slug(&record.name);
    let receipt = record.receipt();
    store.insert(record);
    Ok(Json(receipt))
}

/// `PUT /ai_gw/admin/v2/workspaces/{ref}` → `{}` (see the module comment for what clears).
async fn update(
    State(state): State<WorkspacesState>,
    Path(key): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let name = fields::opt_name(&body)?;
    let description = fields::opt_str_max(&body, "description", 1024)?;
    let icon = fields::opt_str(&body, "icon")?;
    let defaults = fields::opt_object(&body, "defaults")?;
    let rates = rate_limits(&body)?;
    let configs = lock(&state.configs);
    let mut store = lock(&state.workspaces);
    let record = store
        .find_mut(&key)
        .filter(|r| r.status == "active")
        .ok_or_else(|| missing::<WorkspaceRecord>(&state.common, &key))?;
    if body
        .get("scope_name")
        .is_some_and(|sent| !sent.is_null() && *sent != json!(record.scope_name))
    {
        return Err(EmulatorError::validation(
            "scope_name cannot be changed; it governs who sees the workspace",
        ));
    }
    if !UPDATABLE.iter().any(|field| body.contains_key(*field)) {
        return Err(EmulatorError::validation(format!(
            "No update fields provided; expected one of {}",
            UPDATABLE.join(", ")
        )));
    }
    let usage = usage_limits(&body, &record.usage_limits)?;
    let mut merged = record.defaults.clone();
    if let Some(defaults) = &defaults {
        merge_defaults(&mut merged, defaults, &configs)?;
    }
    record.defaults = merged;
    fields::set(&mut record.name, name);
    // SCM keeps the previous description for a blank write.
    if let Some(description) = description.filter(|d| !d.trim().is_empty()) {
        record.description = Some(description);
    }
    if let Some(icon) = icon {
        record.icon = Some(icon).filter(|i| !i.is_empty());
    }
    fields::set(&mut record.usage_limits, usage);
    fields::set(&mut record.rate_limits, rates);
    record.last_updated_at = touched(&record.last_updated_at);
    record.writes += 1;
    Ok(Json(json!({})))
}

/// `DELETE /ai_gw/admin/v2/workspaces/{ref}` → `{}`: archives (the default workspace refuses).
async fn archive(
    State(state): State<WorkspacesState>,
    Path(key): Path<String>,
) -> ApiResult<Json<Value>> {
    let mut store = lock(&state.workspaces);
    let record = store
        .find_mut(&key)
        .filter(|r| r.status == "active")
        .ok_or_else(|| missing::<WorkspaceRecord>(&state.common, &key))?;
    if record.is_default {
        return Err(EmulatorError::validation(
            "the default workspace cannot be archived",
        ));
    }
    record.status = "archived".to_owned();
    record.last_updated_at = touched(&record.last_updated_at);
    record.writes += 1;
    Ok(Json(json!({})))
}
