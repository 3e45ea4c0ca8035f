//! `/ai_gw/admin/v2/deployments`: create with one-time secrets, masked reads, update with
//! `rotate_auth` / `override_existing`, and DELETE as archive.
//!
//! `organisation_id` (body of create, query of list, get and delete) is the numeric TSG id on
//! writes and the internal UUID on reads (FACTS §2): both are accepted, anything else is a 400.

use std::{collections::HashMap, time::Instant};

use axum::{
    Json,
    body::{Body, Bytes},
    extract::{Path, Query, State},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};

use super::{
    deployments::{
        AuthSettings, CONNECTION_STATUSES, DeploymentRecord, STATUSES, Secrets, TYPES,
        new_client_auth, new_password, new_username,
    },
    errors::{ApiResult, EmulatorError},
    fields::{self, IdRule, Object},
    normalise,
    state::{Shared, lock, new_id, now, touched},
};

/// For the API routes: 404, or 403 `AB03` under `missing_as_ab03`.
fn missing(state: &Shared, id: &str) -> EmulatorError {
    state.missing(&format!("deployment {id}"))
}

/// For the control routes, which no fault touches.
fn not_found(id: &str) -> EmulatorError {
    EmulatorError::not_found(format!("deployment {id} not found"))
}

/// `POST /ai_gw/admin/v2/deployments` → `{id, organisation_id, client_auth, credentials, object}`.
pub async fn create(State(state): State<Shared>, body: Bytes) -> ApiResult<Json<Value>> {
    let body = fields::parse_object(&body)?;
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

    let mut store = lock(&state.deployments);
    let slug = match slug {
        Some(slug) if store.slug_taken(&slug) => {
            return Err(EmulatorError::validation(format!(
                "slug {slug} is already in use"
            )));
        }
        Some(slug) => slug,
        None => store.unique_slug(&name),
    };
    let created_at = now();
    let record = DeploymentRecord {
        seq: state.next_seq(),
        api_created: Some(Instant::now()),
        rotations: 0,
        id: new_id(),
        name,
        slug,
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
    store.by_id.insert(record.id.clone(), record);
    Ok(Json(receipt))
}

/// `GET /ai_gw/admin/v2/deployments` → `{object: "list", total, data}`; no paging.
/// Filters: `status`, `type`, `search` (name or slug), `tags[k]=v` (deepObject; every given tag
/// must match) or `tags=k:v`, `workspace_slug`. Under `list_cap` the rows are cut short while
/// `total` stays the true count.
pub async fn list(
    State(state): State<Shared>,
    Query(query): Query<Vec<(String, String)>>,
) -> ApiResult<Response> {
    let filter = ListFilter::parse(&query)?;
    let faults = state.faults();
    let store = lock(&state.deployments);
    let mut data: Vec<Value> = store
        .sorted()
        .into_iter()
        .filter(|record| faults.listed(record.api_created) && filter.matches(record))
        .map(DeploymentRecord::row)
        .collect();
    let total = data.len();
    faults.cap(&mut data);
    let body = json!({ "object": "list", "total": total, "data": data });
    Ok(normalise::reply(&body, faults.normalise))
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
                || record.slug.to_lowercase().contains(needle.as_str())
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
    State(state): State<Shared>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    IdRule::TsgOrUuid.query(&query, "organisation_id")?;
    let normalise = state.faults().normalise;
    let mut store = lock(&state.deployments);
    let record = store.find_mut(&id).ok_or_else(|| missing(&state, &id))?;
    Ok(normalise::reply(&record.detail(Secrets::Masked), normalise))
}

/// `PUT /ai_gw/admin/v2/deployments/{id}` → the detail shape; when `rotate_auth` is true it
/// carries the new `client_auth` and password in clear, once.
pub async fn update(
    State(state): State<Shared>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let body = fields::parse_object(&body)?;
    if body.is_empty() {
        return Err(EmulatorError::validation(
            "request body must contain at least one field",
        ));
    }
    let change = DeploymentChange::parse(&body)?;
    let mut store = lock(&state.deployments);
    let record = store.find_mut(&id).ok_or_else(|| missing(&state, &id))?;
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
        let name = fields::opt_str(body, "name")?;
        if name.as_ref().is_some_and(|name| name.trim().is_empty()) {
            return Err(EmulatorError::validation("name must not be empty"));
        }
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
        if let Some(is_default) = self.is_default {
            record.is_default = is_default;
        }
        if let Some(tags) = &self.tags {
            record.tags.clone_from(tags);
        }
        Ok(())
    }
}

/// `DELETE /ai_gw/admin/v2/deployments/{id}[?organisation_id=TSG]`: archive; the record stays.
/// Empty 200 body.
pub async fn delete(
    State(state): State<Shared>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    IdRule::TsgOrUuid.query(&query, "organisation_id")?;
    let mut store = lock(&state.deployments);
    let record = store.find_mut(&id).ok_or_else(|| missing(&state, &id))?;
    record.status = "archived".to_owned();
    record.last_updated_at = touched(&record.last_updated_at);
    Ok(Body::empty().into_response())
}

/// `POST /_emulator/deployments/{id}/connection` with `{"connection_status": "healthy"}`:
/// what a gateway heartbeat would do; also stamps `last_synced_at`.
pub async fn set_connection(
    State(state): State<Shared>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let body = fields::parse_object(&body)?;
    let status = fields::opt_enum(&body, "connection_status", CONNECTION_STATUSES)?
        .ok_or_else(|| EmulatorError::validation("connection_status is required"))?;
    let mut store = lock(&state.deployments);
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
pub async fn purge(State(state): State<Shared>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let mut store = lock(&state.deployments);
    let found = store.find_mut(&id).map(|record| record.id.clone());
    let id = found.ok_or_else(|| not_found(&id))?;
    store.by_id.remove(&id);
    Ok(Json(serde_json::json!({ "purged": id })))
}

/// `POST /_emulator/deployments/{id}/handshake` with `{"client_auth": "…"}`: what a gateway
/// presents to the control plane when it connects. 200 `{"accepted": true}` for the current
/// value; 401 `{"accepted": false}` for any other, such as one a rotation revoked.
pub async fn handshake(
    State(state): State<Shared>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<(axum::http::StatusCode, Json<Value>)> {
    let body = fields::parse_object(&body)?;
    let presented = fields::opt_str(&body, "client_auth")?
        .ok_or_else(|| EmulatorError::validation("client_auth is required"))?;
    let mut store = lock(&state.deployments);
    let record = store.find_mut(&id).ok_or_else(|| not_found(&id))?;
    let accepted = record.client_auth == presented;
    let status = if accepted {
        axum::http::StatusCode::OK
    } else {
        axum::http::StatusCode::UNAUTHORIZED
    };
    Ok((status, Json(serde_json::json!({ "accepted": accepted }))))
}
