//! Deployment records, their read shapes and their routes.
//!
//! Secrets: `client_auth` and `credentials.password` are random, returned in full only by create
//! and by a `rotate_auth: true` update; every read masks them. `GET /_emulator/state` shows them.
//!
//! `/ai_gw/admin/v2/deployments`: create with one-time secrets, masked reads, update with
//! `rotate_auth` / `override_existing`, and DELETE as archive.
//!
//! `organisation_id` (body of create, query of list, get and delete) is the numeric TSG id on
//! writes and the internal UUID on reads (FACTS §2): both are accepted, anything else is a 400.

use std::collections::HashMap;

use axum::{
    Json,
    body::Body,
    extract::{Path, Query, State},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};

use super::common::{
    clock::{now, touched},
    errors::{ApiResult, EmulatorError},
    fields::{self, IdRule, JsonObject, Object},
    ids::{new_id, random_hex},
    records::{Key, Kind, Record, Records, Slug, reply_one},
    state::{Common, KindState, lock},
};

/// What the deployment routes reach.
pub type DeploymentsState = KindState<DeploymentStore>;

/// What reads show instead of a secret.
pub const MASK: &str = "****";
pub const TYPES: &[&str] = &["production", "non_production"];
pub const STATUSES: &[&str] = &["active", "archived"];
pub const CONNECTION_STATUSES: &[&str] = &["healthy", "unhealthy", "unknown"];

/// Found by id, or by slug (the CLI and tests sometimes hold only the slug).
pub type DeploymentStore = Records<DeploymentRecord>;

pub struct DeploymentRecord {
    pub key: Key,
    /// How many `rotate_auth: true` updates it has seen (shown by `GET /_emulator/state`).
    pub rotations: u64,
    pub name: String,
    pub kind: String,
    pub status: String,
    pub is_default: bool,
    pub connection_status: String,
    pub created_by: String,
    pub created_at: String,
    pub last_updated_at: String,
    pub last_synced_at: Option<String>,
    pub last_resynced_at: Option<String>,
    pub tags: Object,
    pub auth: AuthSettings,
    pub deployment_config: Value,
    pub workspaces: Vec<Value>,
    pub organisation_id: String,
    pub username: String,
    pub password: String,
    pub client_auth: String,
}

#[derive(Clone, Default)]
pub struct AuthSettings {
    pub gateway_base_url: String,
    pub mcp_gateway_base_url: String,
    pub private_link_endpoint: String,
    pub use_private_link_proxy: bool,
    pub is_dataservice_hosted: bool,
    pub is_playground_proxy_allowed: bool,
    pub disable_service_gateway: bool,
    pub workspaces_allowed: Vec<String>,
    pub jwt_subs_allowed: Vec<String>,
    pub jwt_sub_workspace_mapping: Object,
    pub allow_all_workspaces: bool,
}

/// Whether a secret is shown in full or masked.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Secrets {
    Masked,
    Revealed,
}

impl Record for DeploymentRecord {
    const KIND: Kind = Kind::new("a", "deployment", Slug::Prefixed("dp"));

    fn key(&self) -> &Key {
        &self.key
    }
}

impl DeploymentStore {
    /// Every deployment with its secrets in clear and its rotation count (for
    /// `GET /_emulator/state`).
    pub fn dump(&self) -> Vec<Value> {
        self.dump_with(|record| {
            let mut value = record.detail(Secrets::Revealed);
            value["rotations"] = json!(record.rotations);
            value
        })
    }

    /// Preloads a deployment given in its read shape; secrets given in clear are kept.
    pub fn seed(&mut self, state: &Common, item: &Object) -> ApiResult<(String, String)> {
        let name = fields::str_or(item, "name", "seeded deployment");
        let created_at = fields::str_or(item, "created_at", now());
        let slug = fields::nullable_str(item, "slug").unwrap_or_else(|| self.new_slug(&name));
        let kind = fields::str_or(item, "type", "production");
        fields::check_enum("type", Some(&kind), TYPES)?;
        let status = fields::str_or(item, "status", "active");
        fields::check_enum("status", Some(&status), STATUSES)?;
        let connection_status = fields::str_or(item, "connection_status", "unknown");
        fields::check_enum(
            "connection_status",
            Some(&connection_status),
            CONNECTION_STATUSES,
        )?;
        let credentials = item.get("credentials").and_then(Value::as_object);
        let secret = |field: &str, fresh: fn() -> String| {
            credentials
                .and_then(|c| c.get(field))
                .and_then(Value::as_str)
                .filter(|value| *value != MASK)
                .map_or_else(fresh, str::to_owned)
        };
        let mut auth = AuthSettings::default();
        if let Some(settings) = item.get("auth_settings").and_then(Value::as_object) {
            auth.apply_seed(settings);
        }
        let record = DeploymentRecord {
            key: Key::seeded(state, fields::str_or(item, "id", new_id()), slug),
            rotations: 0,
            name,
            kind,
            status,
            is_default: fields::flag_or(item, "is_default", false),
            connection_status,
            created_by: fields::str_or(item, "created_by", &state.user_id),
            last_updated_at: fields::str_or(item, "last_updated_at", &created_at),
            created_at,
            last_synced_at: fields::nullable_str(item, "last_synced_at"),
            last_resynced_at: fields::nullable_str(item, "last_resynced_at"),
            tags: item
                .get("tags")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
            auth,
            deployment_config: item.get("deployment_config").cloned().unwrap_or(json!({})),
            workspaces: item
                .get("workspaces")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            organisation_id: fields::str_or(item, "organisation_id", &state.organisation_id),
            username: secret("username", new_username),
            password: secret("password", new_password),
            client_auth: item
                .get("client_auth")
                .and_then(Value::as_str)
                .filter(|value| *value != MASK)
                .map_or_else(new_client_auth, str::to_owned),
        };
        self.check_new(&record.key.id, &record.key.slug)?;
        Ok(self.insert_seeded(record))
    }
}

pub fn new_username() -> String {
    format!("aigw-{}", random_hex(6))
}

pub fn new_password() -> String {
    random_hex(24)
}

pub fn new_client_auth() -> String {
    format!("ca-{}", random_hex(32))
}

impl DeploymentRecord {
    /// The list row (`DeploymentListItem`).
    pub fn row(&self) -> Value {
        json!({
            "id": self.key.id,
            "name": self.name,
            "slug": self.key.slug,
            "type": self.kind,
            "status": self.status,
            "is_default": fields::flag(self.is_default),
            "connection_status": self.connection_status,
            "created_by": self.created_by,
            "created_at": self.created_at,
            "last_updated_at": self.last_updated_at,
            "last_synced_at": self.last_synced_at,
            "last_resynced_at": self.last_resynced_at,
            "tags": self.tags,
            "object": "deployment",
        })
    }

    /// The detail read shape; secrets masked unless `Secrets::Revealed`.
    pub fn detail(&self, secrets: Secrets) -> Value {
        let (password, client_auth) = match secrets {
            Secrets::Masked => (MASK, MASK),
            Secrets::Revealed => (self.password.as_str(), self.client_auth.as_str()),
        };
        let mut value = self.row();
        value["organisation_id"] = json!(self.organisation_id);
        value["auth_settings"] = self.auth.to_json();
        value["deployment_config"] = self.deployment_config.clone();
        value["workspaces"] = json!(self.workspaces);
        value["credentials"] = json!({ "username": self.username, "password": password });
        value["client_auth"] = json!(client_auth);
        value
    }

    /// The one-time receipt of create (and of a rotating update).
    pub fn receipt(&self) -> Value {
        json!({
            "id": self.key.id,
            "organisation_id": self.organisation_id,
            "client_auth": self.client_auth,
            "credentials": { "username": self.username, "password": self.password },
            "object": "deployment",
        })
    }

    /// Issues a new `client_auth` and registry password; the old ones stop being valid.
    pub fn rotate(&mut self) {
        self.client_auth = new_client_auth();
        self.password = new_password();
        self.rotations += 1;
    }
}

impl AuthSettings {
    pub fn to_json(&self) -> Value {
        json!({
            "gateway_base_url": self.gateway_base_url,
            "mcp_gateway_base_url": self.mcp_gateway_base_url,
            "private_link_endpoint": self.private_link_endpoint,
            "use_private_link_proxy": fields::flag(self.use_private_link_proxy),
            "is_dataservice_hosted": fields::flag(self.is_dataservice_hosted),
            "is_playground_proxy_allowed": fields::flag(self.is_playground_proxy_allowed),
            "disable_service_gateway": fields::flag(self.disable_service_gateway),
            "workspaces_allowed": self.workspaces_allowed,
            "jwt_subs_allowed": self.jwt_subs_allowed,
            "jwt_sub_workspace_mapping": self.jwt_sub_workspace_mapping,
            "allow_all_workspaces": fields::flag(self.allow_all_workspaces),
        })
    }

    fn apply_seed(&mut self, settings: &Object) {
        let text = |field: &str| fields::str_or(settings, field, "");
        let list = |field: &str| -> Vec<String> {
            settings
                .get(field)
                .and_then(Value::as_array)
                .map(|items| {
                    items
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default()
        };
        self.gateway_base_url = text("gateway_base_url");
        self.mcp_gateway_base_url = text("mcp_gateway_base_url");
        self.private_link_endpoint = text("private_link_endpoint");
        self.use_private_link_proxy = fields::flag_or(settings, "use_private_link_proxy", false);
        self.is_dataservice_hosted = fields::flag_or(settings, "is_dataservice_hosted", false);
        self.is_playground_proxy_allowed =
            fields::flag_or(settings, "is_playground_proxy_allowed", false);
        self.disable_service_gateway = fields::flag_or(settings, "disable_service_gateway", false);
        self.workspaces_allowed = list("workspaces_allowed");
        self.jwt_subs_allowed = list("jwt_subs_allowed");
        self.jwt_sub_workspace_mapping = settings
            .get("jwt_sub_workspace_mapping")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        self.allow_all_workspaces = fields::flag_or(settings, "allow_all_workspaces", false);
    }

    /// Applies a request's `auth_settings`. Lists and the JWT mapping merge into what is stored
    /// unless `override_existing` is set, in which case they replace it; the `remove_*` lists then
    /// take entries out.
    pub fn apply_request(&mut self, settings: &Object, override_existing: bool) -> ApiResult<()> {
        let url = |field: &str| {
            fields::opt_str(settings, field).map_err(|err| err.prefixed("auth_settings."))
        };
        if let Some(value) = url("gateway_base_url")? {
            self.gateway_base_url = value;
        }
        if let Some(value) = url("mcp_gateway_base_url")? {
            self.mcp_gateway_base_url = value;
        }
        if let Some(value) = url("private_link_endpoint")? {
            self.private_link_endpoint = value;
        }
        let flags: [(&str, &mut bool); 5] = [
            ("use_private_link_proxy", &mut self.use_private_link_proxy),
            ("is_dataservice_hosted", &mut self.is_dataservice_hosted),
            (
                "is_playground_proxy_allowed",
                &mut self.is_playground_proxy_allowed,
            ),
            ("disable_service_gateway", &mut self.disable_service_gateway),
            ("allow_all_workspaces", &mut self.allow_all_workspaces),
        ];
        for (field, slot) in flags {
            if let Some(value) =
                fields::opt_bool(settings, field).map_err(|err| err.prefixed("auth_settings."))?
            {
                *slot = value;
            }
        }
        let list = |field: &str| {
            fields::opt_str_list(settings, field).map_err(|err| err.prefixed("auth_settings."))
        };
        if let Some(items) = list("workspaces_allowed")? {
            merge_list(&mut self.workspaces_allowed, items, override_existing);
        }
        if let Some(items) = list("jwt_subs_allowed")? {
            merge_list(&mut self.jwt_subs_allowed, items, override_existing);
        }
        if let Some(items) = list("remove_workspaces_allowed")? {
            self.workspaces_allowed.retain(|item| !items.contains(item));
        }
        if let Some(items) = list("remove_subs_allowed")? {
            self.jwt_subs_allowed.retain(|item| !items.contains(item));
        }
        let mapping = fields::opt_string_map(settings, "jwt_sub_workspace_mapping")
            .map_err(|err| err.prefixed("auth_settings."))?;
        if let Some(mapping) = mapping {
            if override_existing {
                self.jwt_sub_workspace_mapping = mapping;
            } else {
                self.jwt_sub_workspace_mapping.extend(mapping);
            }
        }
        Ok(())
    }
}

fn merge_list(stored: &mut Vec<String>, items: Vec<String>, override_existing: bool) {
    if override_existing {
        *stored = items;
        return;
    }
    for item in items {
        if !stored.contains(&item) {
            stored.push(item);
        }
    }
}

/// For the control routes, which no fault touches.
fn not_found(id: &str) -> EmulatorError {
    EmulatorError::not_found(format!("deployment {id} not found"))
}

/// `POST /ai_gw/admin/v2/deployments` → `{id, organisation_id, client_auth, credentials, object}`.
pub async fn create(
    State(state): State<DeploymentsState>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let name = fields::req_str(&body, "name")?;
    let slug = fields::opt_str(&body, "slug")?;
    if slug
        .as_ref()
        .is_some_and(|slug| slug.is_empty() || slug.chars().count() > 50)
    {
        return Err(EmulatorError::validation("slug must be 1 to 50 characters"));
    }
    let kind = fields::opt_enum(&body, "type", TYPES)?.unwrap_or_else(|| "production".to_owned());
    let deployment_config = fields::opt_object(&body, "deployment_config")?.unwrap_or_default();
    let is_default = fields::opt_bool(&body, "is_default")?.unwrap_or(false);
    let tags = fields::opt_string_map(&body, "tags")?.unwrap_or_default();
    let mut auth = AuthSettings::default();
    if let Some(settings) = fields::opt_object(&body, "auth_settings")? {
        auth.apply_request(&settings, true)?;
    }
    // The live API takes the numeric TSG here and answers with its internal UUID.
    IdRule::TsgOrUuid.opt_field(&body, "organisation_id")?;

    let mut store = lock(&state.store);
    let slug = match slug {
        Some(slug) if store.slug_taken(&slug) => {
            return Err(EmulatorError::validation(format!(
                "slug {slug} is already in use"
            )));
        }
        Some(slug) => slug,
        None => store.new_slug(&name),
    };
    let created_at = now();
    let record = DeploymentRecord {
        key: Key::created(&state, slug),
        rotations: 0,
        name,
        kind,
        status: "active".to_owned(),
        is_default,
        connection_status: "unknown".to_owned(),
        created_by: state.user_id.clone(),
        created_at: created_at.clone(),
        last_updated_at: created_at,
        last_synced_at: None,
        last_resynced_at: None,
        tags,
        auth,
        deployment_config: Value::Object(deployment_config),
        workspaces: Vec::new(),
        organisation_id: state.organisation_id.clone(),
        username: new_username(),
        password: new_password(),
        client_auth: new_client_auth(),
    };
    let receipt = record.receipt();
    store.insert(record);
    Ok(Json(receipt))
}

/// `GET /ai_gw/admin/v2/deployments` → `{object: "list", total, data}`; no paging.
/// Filters: `status`, `type`, `search` (name or slug), `tags[k]=v` (deepObject; every given tag
/// must match) or `tags=k:v`, `workspace_slug`. Under `list_cap` the rows are cut short while
/// `total` stays the true count.
pub async fn list(
    State(state): State<DeploymentsState>,
    Query(query): Query<Vec<(String, String)>>,
) -> ApiResult<Response> {
    let filter = ListFilter::parse(&query)?;
    let faults = state.faults();
    Ok(lock(&state.store).reply_unpaged(
        &faults,
        |record| filter.matches(record),
        DeploymentRecord::row,
    ))
}

#[derive(Default)]
struct ListFilter {
    status: Option<String>,
    kind: Option<String>,
    search: Option<String>,
    tags: Vec<(String, String)>,
    workspace_slugs: Vec<String>,
}

impl ListFilter {
    fn parse(query: &[(String, String)]) -> ApiResult<Self> {
        let mut filter = Self::default();
        for (key, value) in query {
            match key.as_str() {
                "status" => {
                    filter.status = Some(fields::check_enum("status", Some(value), STATUSES)?)
                }
                "type" => filter.kind = Some(fields::check_enum("type", Some(value), TYPES)?),
                "search" if !value.is_empty() => filter.search = Some(value.to_lowercase()),
                "workspace_slug" | "workspace_slug[]" => filter.workspace_slugs.push(value.clone()),
                "tags" => filter.tags.extend(parse_tag_filter(value)?),
                "organisation_id" => IdRule::TsgOrUuid.check("organisation_id", value)?,
                _ => {
                    if let Some(tag) = key.strip_prefix("tags[").and_then(|k| k.strip_suffix(']')) {
                        filter.tags.push((tag.to_owned(), value.clone()));
                    }
                }
            }
        }
        Ok(filter)
    }

    fn matches(&self, record: &DeploymentRecord) -> bool {
        let search = |needle: &String| {
            record.name.to_lowercase().contains(needle.as_str())
                || record.key.slug.to_lowercase().contains(needle.as_str())
        };
        self.status
            .as_ref()
            .is_none_or(|status| &record.status == status)
            && self.kind.as_ref().is_none_or(|kind| &record.kind == kind)
            && self.search.as_ref().is_none_or(search)
            && self.tags.iter().all(|(key, value)| {
                record.tags.get(key).and_then(Value::as_str) == Some(value.as_str())
            })
            && (self.workspace_slugs.is_empty()
                || record.workspaces.iter().any(|ws| {
                    ws.get("slug")
                        .and_then(Value::as_str)
                        .is_some_and(|slug| self.workspace_slugs.iter().any(|s| s == slug))
                }))
    }
}

/// `tags=k:v`, `tags=k=v` or `tags={"k":"v"}`.
fn parse_tag_filter(value: &str) -> ApiResult<Vec<(String, String)>> {
    if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(value) {
        return Ok(map
            .into_iter()
            .map(|(key, value)| {
                (
                    key,
                    value
                        .as_str()
                        .map_or_else(|| value.to_string(), str::to_owned),
                )
            })
            .collect());
    }
    value
        .split_once([':', '='])
        .map(|(key, value)| vec![(key.to_owned(), value.to_owned())])
        .ok_or_else(|| EmulatorError::validation("tags must be key:value or tags[key]=value"))
}

/// `GET /ai_gw/admin/v2/deployments/{id}` → detail with masked secrets.
pub async fn get(
    State(state): State<DeploymentsState>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    IdRule::TsgOrUuid.query(&query, "organisation_id")?;
    reply_one(&state, &state.store, &id, |record| {
        record.detail(Secrets::Masked)
    })
}

/// `PUT /ai_gw/admin/v2/deployments/{id}` → the detail shape; when `rotate_auth` is true it
/// carries the new `client_auth` and password in clear, once.
pub async fn update(
    State(state): State<DeploymentsState>,
    Path(id): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    if body.is_empty() {
        return Err(EmulatorError::validation(
            "request body must contain at least one field",
        ));
    }
    let change = DeploymentChange::parse(&body)?;
    let mut store = lock(&state.store);
    let record = store.get_mut(&state, &id)?;
    change.apply(record)?;
    record.last_updated_at = touched(&record.last_updated_at);
    let secrets = if change.rotate_auth {
        record.rotate();
        Secrets::Revealed
    } else {
        Secrets::Masked
    };
    Ok(Json(record.detail(secrets)))
}

/// A validated `UpdateDeploymentRequest`.
struct DeploymentChange {
    name: Option<String>,
    kind: Option<String>,
    status: Option<String>,
    deployment_config: Option<Value>,
    is_default: Option<bool>,
    rotate_auth: bool,
    override_existing: bool,
    auth_settings: Option<Object>,
    tags: Option<Object>,
}

impl DeploymentChange {
    fn parse(body: &Object) -> ApiResult<Self> {
        let name = fields::opt_name(body)?;
        let deployment_config = match body.get("deployment_config") {
            None => None,
            Some(value @ (Value::Null | Value::Object(_))) => Some(value.clone()),
            Some(_) => {
                return Err(EmulatorError::validation(
                    "deployment_config must be an object",
                ));
            }
        };
        let tags = match body.get("tags") {
            Some(Value::Null) => Some(Object::new()),
            _ => fields::opt_string_map(body, "tags")?,
        };
        Ok(Self {
            name,
            kind: fields::opt_enum(body, "type", TYPES)?,
            status: fields::opt_enum(body, "status", STATUSES)?,
            deployment_config,
            is_default: fields::opt_bool(body, "is_default")?,
            rotate_auth: fields::opt_bool(body, "rotate_auth")?.unwrap_or(false),
            override_existing: fields::opt_bool(body, "override_existing")?.unwrap_or(false),
            auth_settings: fields::opt_object(body, "auth_settings")?,
            tags,
        })
    }

    /// Applies every field; auth settings first, so a rejected one changes nothing.
    fn apply(&self, record: &mut DeploymentRecord) -> ApiResult<()> {
        if let Some(settings) = &self.auth_settings {
            // Work on a copy so a setting rejected part-way changes nothing.
            let mut auth = record.auth.clone();
            auth.apply_request(settings, self.override_existing)?;
            record.auth = auth;
        }
        if let Some(name) = &self.name {
            record.name.clone_from(name);
        }
        if let Some(kind) = &self.kind {
            record.kind.clone_from(kind);
        }
        if let Some(status) = &self.status {
            record.status.clone_from(status);
        }
        if let Some(config) = &self.deployment_config {
            record.deployment_config = config.clone();
        }
        fields::set(&mut record.is_default, self.is_default);
        if let Some(tags) = &self.tags {
            record.tags.clone_from(tags);
        }
        Ok(())
    }
}

/// `DELETE /ai_gw/admin/v2/deployments/{id}[?organisation_id=TSG]`: archive; the record stays.
/// Empty 200 body.
pub async fn delete(
    State(state): State<DeploymentsState>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    IdRule::TsgOrUuid.query(&query, "organisation_id")?;
    let mut store = lock(&state.store);
    let record = store.get_mut(&state, &id)?;
    record.status = "archived".to_owned();
    record.last_updated_at = touched(&record.last_updated_at);
    Ok(Body::empty().into_response())
}

/// `POST /_emulator/deployments/{id}/connection` with `{"connection_status": "healthy"}`:
/// what a gateway heartbeat would do; also stamps `last_synced_at`.
pub async fn set_connection(
    State(state): State<DeploymentsState>,
    Path(id): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let status = fields::opt_enum(&body, "connection_status", CONNECTION_STATUSES)?
        .ok_or_else(|| EmulatorError::validation("connection_status is required"))?;
    let mut store = lock(&state.store);
    let record = store.find_mut(&id).ok_or_else(|| not_found(&id))?;
    record.connection_status = status;
    let synced = now();
    record.last_synced_at = Some(synced.clone());
    record.last_resynced_at = Some(synced);
    Ok(Json(record.detail(Secrets::Masked)))
}

/// `DELETE /_emulator/deployments/{id}`: the deployment vanishes, as if removed outside the API
/// (the API itself only archives): every later read of it answers 404. For tests of what a
/// gateway whose remote object is gone does (it is registered again).
pub async fn purge(
    State(state): State<DeploymentsState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let id = lock(&state.store)
        .remove(&id)
        .map(|record| record.key.id)
        .ok_or_else(|| not_found(&id))?;
    Ok(Json(serde_json::json!({ "purged": id })))
}

/// `POST /_emulator/deployments/{id}/handshake` with `{"client_auth": "…"}`: what a gateway
/// presents to the control plane when it connects. 200 `{"accepted": true}` for the current
/// value; 401 `{"accepted": false}` for any other, such as one a rotation revoked.
pub async fn handshake(
    State(state): State<DeploymentsState>,
    Path(id): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<(axum::http::StatusCode, Json<Value>)> {
    let presented = fields::opt_str(&body, "client_auth")?
        .ok_or_else(|| EmulatorError::validation("client_auth is required"))?;
    let mut store = lock(&state.store);
    let record = store.find_mut(&id).ok_or_else(|| not_found(&id))?;
    let accepted = record.client_auth == presented;
    let status = if accepted {
        axum::http::StatusCode::OK
    } else {
        axum::http::StatusCode::UNAUTHORIZED
    };
    Ok((status, Json(serde_json::json!({ "accepted": accepted }))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_merge_unless_override() {
        let mut auth = AuthSettings {
            workspaces_allowed: vec!["a".into()],
            ..AuthSettings::default()
        };
        let body = json!({"workspaces_allowed": ["b"], "remove_workspaces_allowed": ["a"]});
        let body = body.as_object().cloned().unwrap_or_default();
        auth.apply_request(&body, false).expect("valid settings");
        assert_eq!(auth.workspaces_allowed, vec!["b".to_owned()]);
        let replace = json!({"workspaces_allowed": ["c"]});
        let replace = replace.as_object().cloned().unwrap_or_default();
        auth.apply_request(&replace, true).expect("valid settings");
        assert_eq!(auth.workspaces_allowed, vec!["c".to_owned()]);
    }
}
