//! `/ai_gw/v2/configs`: flat create receipt, `config` as a JSON string on reads, whole-document
//! replace and a new `version_id` on every PUT, hard delete. `workspace_id` is a workspace UUID.

use std::{collections::HashMap, sync::Arc};

use axum::{
    Json,
    extract::{Path, Query, State},
    response::Response,
};
use serde_json::{Value, json};

use super::common::{
    clock::{now, touched},
    errors::{ApiResult, EmulatorError},
    faults::Faults,
    fields::{self, IdRule, JsonObject, Object},
    ids::new_id,
    normalise,
    records::{Key, Kind, Record, Records, Slug},
    state::{Common, KindState, lock},
};

/// What the config routes reach.
pub type ConfigsState = KindState<ConfigStore>;

/// Versions kept per config; older ones are dropped so a PUT hot loop cannot exhaust memory.
const MAX_VERSIONS: usize = 500;

/// Found by id or slug (an API key's `defaults.config_id` may be either).
pub type ConfigStore = Records<ConfigRecord>;

pub struct ConfigRecord {
    pub key: Key,
    name: String,
    organisation_id: String,
    workspace_id: String,
    is_default: bool,
    status: String,
    owner_id: String,
    updated_by: String,
    created_at: String,
    last_updated_at: String,
    /// The current document, serialised once; reads return it as a string.
    config: Arc<str>,
    version_id: String,
    /// Newest last.
    versions: Vec<ConfigVersion>,
}

struct ConfigVersion {
    version_id: String,
    name: String,
    status: String,
    config: Arc<str>,
    created_at: String,
    owner_id: String,
}

/// What the data plane routes by: a config's identity, current version and document.
pub struct ConfigView {
    pub id: String,
    pub slug: String,
    pub version_id: String,
    pub document: Arc<str>,
}

impl Record for ConfigRecord {
    const KIND: Kind = Kind::new("a", "config", Slug::Prefixed("pc"));

    fn key(&self) -> &Key {
        &self.key
    }
}

impl ConfigStore {
    /// The config named by id or slug (an API key's `defaults.config_id` may be either), as it
    /// stands now.
    pub fn current(&self, slug_or_id: &str) -> Option<ConfigView> {
        self.find(slug_or_id).map(|record| ConfigView {
            id: record.key.id.clone(),
            slug: record.key.slug.clone(),
            version_id: record.version_id.clone(),
            document: Arc::clone(&record.config),
        })
    }

    /// True when a config has this slug or id (a workspace's `defaults.config_id` must name one).
    pub fn exists(&self, slug_or_id: &str) -> bool {
        self.find(slug_or_id).is_some()
    }

    /// Every config with `config` as an object (for `GET /_emulator/state`).
    pub fn dump(&self) -> Vec<Value> {
        self.dump_with(|record| {
            let mut value = record.detail();
            value["config"] = serde_json::from_str(&record.config).unwrap_or(Value::Null);
            value["versions"] = json!(record.versions.len());
            value
        })
    }

    /// Preloads a config given in its read shape (`config` as object or string); returns `(id, slug)`.
    pub fn seed(&mut self, state: &Common, item: &Object) -> ApiResult<(String, String)> {
        let name = fields::str_or(item, "name", "seeded config");
        let document = match item.get("config") {
            Some(Value::String(text)) => serde_json::from_str::<Value>(text).map_err(|err| {
                EmulatorError::validation(format!("config is not valid json: {err}"))
            })?,
            Some(value @ Value::Object(_)) => value.clone(),
            _ => json!({}),
        };
        let created_at = fields::str_or(item, "created_at", now());
        let slug = match fields::nullable_str(item, "slug") {
            Some(slug) => slug,
            None => self.new_slug(&name),
        };
        let mut record = ConfigRecord {
            key: Key::seeded(state, fields::str_or(item, "id", new_id()), slug),
            name,
            organisation_id: fields::str_or(item, "organisation_id", &state.organisation_id),
            workspace_id: fields::str_or(item, "workspace_id", &state.default_workspace_id),
            is_default: fields::flag_or(item, "is_default", false),
            status: fields::str_or(item, "status", "active"),
            owner_id: fields::str_or(item, "owner_id", &state.user_id),
            updated_by: fields::str_or(item, "updated_by", &state.user_id),
            last_updated_at: fields::str_or(item, "last_updated_at", &created_at),
            created_at,
            config: Arc::from(document.to_string()),
            version_id: fields::str_or(item, "version_id", new_id()),
            versions: Vec::new(),
        };
        record.push_version(&state.user_id);
        self.check_new(&record.key.id, &record.key.slug)?;
        Ok(self.insert_seeded(record))
    }
}

impl ConfigRecord {
    /// The 12-field list row.
    fn row(&self) -> Value {
        json!({
            "id": self.key.id,
            "name": self.name,
            "slug": self.key.slug,
            "organisation_id": self.organisation_id,
            "workspace_id": self.workspace_id,
            "is_default": fields::flag(self.is_default),
            "status": self.status,
            "owner_id": self.owner_id,
            "updated_by": self.updated_by,
            "created_at": self.created_at,
            "last_updated_at": self.last_updated_at,
            "object": "config",
        })
    }

    /// The flat read shape: the row plus `config` (a JSON string), `format`, `type`, `version_id`.
    fn detail(&self) -> Value {
        let mut value = self.row();
        value["config"] = json!(&*self.config);
        value["format"] = json!("json");
        value["type"] = json!("ORG_CONFIG");
        value["version_id"] = json!(self.version_id);
        value
    }

    fn push_version(&mut self, owner_id: &str) {
        self.versions.push(ConfigVersion {
            version_id: self.version_id.clone(),
            name: self.name.clone(),
            status: self.status.clone(),
            config: Arc::clone(&self.config),
            created_at: self.last_updated_at.clone(),
            owner_id: owner_id.to_owned(),
        });
        if self.versions.len() > MAX_VERSIONS {
            let excess = self.versions.len() - MAX_VERSIONS;
            self.versions.drain(..excess);
        }
    }

    fn version_detail(&self, version: &ConfigVersion) -> Value {
        let mut value = self.detail();
        value["name"] = json!(version.name);
        value["status"] = json!(version.status);
        value["config"] = json!(&*version.config);
        value["version_id"] = json!(version.version_id);
        value["version_created_at"] = json!(version.created_at);
        value["version_owner_id"] = json!(version.owner_id);
        value
    }
}

/// A read with its `config` string rewritten as the `normalise` and `mask_credentials` faults say.
fn shaped(mut value: Value, faults: &Faults) -> Value {
    if let Some(text) = value["config"].as_str() {
        value["config"] = json!(normalise::config_text(
            text,
            faults.normalise,
            faults.mask_credentials
        ));
    }
    value
}

/// The answer to a read of the config `slug` (slug or id): what `read` makes of its record under
/// the faults in force.
fn read_config(
    state: &ConfigsState,
    slug: &str,
    read: impl FnOnce(&ConfigRecord, &Faults) -> Value,
) -> ApiResult<Response> {
    let faults = state.faults();
    let store = lock(&state.store);
    let body = read(store.get(state, slug)?, &faults);
    Ok(normalise::reply(&body, faults.normalise))
}

/// `POST /ai_gw/v2/configs` → `{id, version_id, slug, object: "config"}`.
pub async fn create(
    State(state): State<ConfigsState>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let name = fields::req_str(&body, "name")?;
    let document = fields::req_object(&body, "config")?;
    let workspace_id = IdRule::Uuid
        .opt_nonempty(&body, "workspace_id")?
        .unwrap_or_else(|| state.default_workspace_id.clone());
    let is_default = match fields::opt_bool(&body, "is_default")? {
        Some(flag) => flag,
        None => fields::opt_bool(&body, "isDefault")?.unwrap_or(false),
    };
    let created_at = now();
    let mut store = lock(&state.store);
    let mut record = ConfigRecord {
        key: Key::created(&state, store.new_slug(&name)),
        name,
        organisation_id: state.organisation_id.clone(),
        workspace_id,
        is_default,
        status: "active".to_owned(),
        owner_id: state.user_id.clone(),
        updated_by: state.user_id.clone(),
        created_at: created_at.clone(),
        last_updated_at: created_at,
        config: Arc::from(Value::Object(document).to_string()),
        version_id: new_id(),
        versions: Vec::new(),
    };
    record.push_version(&state.user_id);
    let mut receipt = json!({
        "id": record.key.id,
        "version_id": record.version_id,
        "slug": record.key.slug,
        "object": "config",
    });
    if state.faults().create_without_slug {
        // The published spec's receipt has no slug; a client must read it back.
        receipt
            .as_object_mut()
            .map(|receipt| receipt.remove("slug"));
    }
    store.insert(record);
    Ok(Json(receipt))
}

/// `GET /ai_gw/v2/configs` → `{object: "list", total, data}`; no paging, like the live API.
/// Under `list_cap` the rows are cut short while `total` stays the true count.
pub async fn list(
    State(state): State<ConfigsState>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let workspace = IdRule::Uuid.filter(&query, "workspace_id")?;
    let faults = state.faults();
    Ok(lock(&state.store).reply_unpaged(
        &faults,
        |record| workspace.is_none_or(|ws| &record.workspace_id == ws),
        ConfigRecord::row,
    ))
}

/// `GET /ai_gw/v2/configs/{slug}` (slug or id) → the flat record.
pub async fn get(
    State(state): State<ConfigsState>,
    Path(slug): Path<String>,
) -> ApiResult<Response> {
    read_config(&state, &slug, |record, faults| {
        shaped(record.detail(), faults)
    })
}

/// `PUT /ai_gw/v2/configs/{slug}` with `{name?, config?, status?}` → `{success, data: {version_id}}`.
pub async fn update(
    State(state): State<ConfigsState>,
    Path(slug): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let name = fields::opt_name(&body)?;
    let document = fields::opt_object(&body, "config")?;
    let status = fields::opt_str(&body, "status")?;
    // workspace_id is accepted (the SDK sends it) but a config never moves between workspaces.
    IdRule::Uuid.opt_field(&body, "workspace_id")?;
    if name.is_none() && document.is_none() && status.is_none() {
        return Err(EmulatorError::validation(
            "at least one of name, config, status is required",
        ));
    }
    let mut store = lock(&state.store);
    let record = store.get_mut(&state, &slug)?;
    fields::set(&mut record.name, name);
    if let Some(document) = document {
        record.config = Arc::from(Value::Object(document).to_string());
    }
    fields::set(&mut record.status, status);
    record.version_id = new_id();
    record.last_updated_at = touched(&record.last_updated_at);
    record.updated_by = state.user_id.clone();
    record.push_version(&state.user_id);
    Ok(Json(
        json!({ "success": true, "data": { "version_id": record.version_id } }),
    ))
}

/// `DELETE /ai_gw/v2/configs/{slug}`: hard delete → `{}`.
pub async fn delete(
    State(state): State<ConfigsState>,
    Path(slug): Path<String>,
) -> ApiResult<Json<Value>> {
    lock(&state.store).take(&state, &slug)?;
    Ok(Json(json!({})))
}

/// `GET /ai_gw/v2/configs/{slug}/versions` → `{object: "list", total, data}`, newest first.
pub async fn versions(
    State(state): State<ConfigsState>,
    Path(slug): Path<String>,
) -> ApiResult<Response> {
    read_config(&state, &slug, |record, faults| {
        let data: Vec<Value> = record
            .versions
            .iter()
            .rev()
            .map(|version| shaped(record.version_detail(version), faults))
            .collect();
        json!({ "object": "list", "total": data.len(), "data": data })
    })
}
