//! `/ai_gw/v2/providers` (FACTS-more §1): a workspace's handle on an integration, what configs
//! route to as `@<slug>`. Create, list, read, update and a hard delete, by UUID or slug, with an
//! optional `workspace_id` query that must match the provider's.
//!
//! Create takes `name` and `integration_id` (its UUID or slug), `workspace_id` (the default
//! workspace when absent), a `slug` (`^[a-zA-Z0-9_-]+$`; made from the name when absent),
//! `note`, `usage_limits` and `expires_at`. The integration must be enabled for the workspace
//! ([pTF]: "Must be an integration enabled for the workspace"), else 400. Inline `rate_limits`
//! on create answer 503, as they do live ([cTF]). `integration_id`, `workspace_id` and `slug`
//! are fixed afterwards.
//!
//! A read carries credential material as the live API's does: `key` (the integration's key in
//! clear) and `model_config` (its configurations in clear), next to `masked_api_key`. A client
//! must never copy them anywhere; the emulator hands them out so that tests can check it.

use std::{
    collections::HashMap,
    ops::Deref,
    sync::{Arc, Mutex},
};

use axum::{
    Json,
    extract::{Path, Query, State},
    http::StatusCode,
    response::Response,
};
use serde_json::{Value, json};

use super::common::{
    clock::now,
    errors::{ApiResult, EmulatorError},
    fields::{self, IdRule, JsonObject, Object},
    normalise, policy_fields,
    records::{Key, Kind, Record, Records, Slug, missing},
    state::{Common, lock},
};
use super::integrations::{
    IntegrationRecord, IntegrationStore, masked, opt_slug, rate_limits, usage_limits,
};

/// What the provider routes reach: the state every route shares and the providers.
#[derive(Clone)]
pub struct ProvidersState {
    pub common: Arc<Common>,
    pub providers: Arc<Mutex<ProviderStore>>,
    /// Taken after `providers` is released (an integration's default provider is made while the
    /// integration is locked).
    pub integrations: Arc<Mutex<IntegrationStore>>,
}

impl Deref for ProvidersState {
    type Target = Common;

    fn deref(&self) -> &Common {
        &self.common
    }
}

/// The `object` of reads and receipts.
const OBJECT: &str = "provider";
/// Rows per list page when the request names none ([PK]: "default to 50").
const DEFAULT_PAGE_SIZE: usize = 50;

pub type ProviderStore = Records<ProviderRecord>;

pub struct ProviderRecord {
    pub key: Key,
    pub name: String,
    /// The integration's UUID.
    pub integration_id: String,
    pub workspace_id: String,
    pub note: Option<String>,
    /// `null` or one usage-limits object.
    pub usage_limits: Value,
    pub expires_at: Option<String>,
    pub created_at: String,
    pub last_reset_at: Option<String>,
    pub exhausted: bool,
    /// Made by the API itself (`create_default_provider`), not by a provider create.
    pub default: bool,
}

impl Record for ProviderRecord {
    const KIND: Kind = Kind::new("a", "provider", Slug::Named("provider"));

    fn key(&self) -> &Key {
        &self.key
    }
}

impl ProviderRecord {
    fn status(&self) -> &'static str {
        let expired = self
            .expires_at
            .as_deref()
            .and_then(|at| at.parse::<jiff::Timestamp>().ok())
            .is_some_and(|at| at <= jiff::Timestamp::now());
        match (expired, self.exhausted) {
            (true, _) => "expired",
            (false, true) => "exhausted",
            (false, false) => "active",
        }
    }

    /// A list row: the subset the SDK types for lists.
    fn row(&self) -> Value {
        json!({
            "id": self.key.id,
            "name": self.name,
            "slug": self.key.slug,
            "integration_id": self.integration_id,
            "note": self.note,
            "status": self.status(),
            "usage_limits": self.usage_limits,
            "rate_limits": [],
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "reset_usage": null,
            "object": OBJECT,
        })
    }

    /// The live detail without its integration's part (see [`get`]).
    fn read(&self) -> Value {
        let mut value = self.row();
        for field in ["ai_provider_name", "model_config", "key", "masked_api_key"] {
            value[field] = Value::Null;
        }
        value["last_reset_at"] = json!(self.last_reset_at);
        value["tags"] = json!({});
        value
    }

    fn dump(&self) -> Value {
        let mut value = self.row();
        value["workspace_id"] = json!(self.workspace_id);
        value["last_reset_at"] = json!(self.last_reset_at);
        value["default"] = json!(self.default);
        value
    }
}

impl ProviderStore {
    /// Every provider, default ones marked (for `GET /_emulator/state`).
    pub fn dump(&self) -> Vec<Value> {
        self.dump_with(ProviderRecord::dump)
    }

    /// Preloads a provider given in its read shape (`integration_id` and `workspace_id` as
    /// they should read); answers its id and slug.
    pub fn seed(&mut self, state: &Common, item: &Object) -> ApiResult<(String, String)> {
        let (key, name) = self.seed_key(state, item, "seeded provider")?;
        let record = ProviderRecord {
            key,
            name,
            integration_id: fields::str_or(item, "integration_id", ""),
            workspace_id: fields::str_or(item, "workspace_id", &state.default_workspace_id),
            note: fields::nullable_str(item, "note"),
            usage_limits: item.get("usage_limits").cloned().unwrap_or(Value::Null),
            expires_at: fields::nullable_str(item, "expires_at"),
            created_at: fields::str_or(item, "created_at", now()),
            last_reset_at: fields::nullable_str(item, "last_reset_at"),
            exhausted: item.get("status").and_then(Value::as_str) == Some("exhausted"),
            default: false,
        };
        Ok(self.insert_seeded(record))
    }
}

/// The provider the API makes by itself when an integration is enabled for `workspace` without
/// `create_default_provider: false`; answers its id. Called with the integrations locked.
pub fn create_default(
    state: &Common,
    providers: &Mutex<ProviderStore>,
    integration: &IntegrationRecord,
    workspace: &str,
    slug: Option<String>,
) -> String {
    let mut store = lock(providers);
    let slug = slug
        .filter(|s| !store.slug_taken(s))
        .unwrap_or_else(|| store.new_slug(&integration.key.slug));
    let record = ProviderRecord {
        key: Key::created(state, slug),
        name: integration.name.clone(),
        integration_id: integration.key.id.clone(),
        workspace_id: workspace.to_owned(),
        note: None,
        usage_limits: Value::Null,
        expires_at: None,
        created_at: now(),
        last_reset_at: None,
        exhausted: false,
        default: true,
    };
    let id = record.key.id.clone();
    store.insert(record);
    id
}

/// An RFC 3339 date-time or `null` (`Some(None)`), absent (`None`).
fn expires_at(body: &Object) -> ApiResult<Option<Option<String>>> {
    match body.get("expires_at") {
        None => Ok(None),
        Some(Value::Null) => Ok(Some(None)),
        Some(Value::String(at)) if at.parse::<jiff::Timestamp>().is_ok() => {
            Ok(Some(Some(at.clone())))
        }
        Some(_) => Err(EmulatorError::validation(
            "expires_at must be an RFC 3339 date-time or null",
        )),
    }
}

/// The provider `key` names, when it lives in `workspace` (if the request names one).
fn in_workspace<'a>(
    store: &'a ProviderStore,
    state: &Common,
    key: &str,
    workspace: Option<&String>,
) -> ApiResult<&'a ProviderRecord> {
    store
        .find(key)
        .filter(|r| workspace.is_none_or(|ws| ws.is_empty() || &r.workspace_id == ws))
        .ok_or_else(|| missing::<ProviderRecord>(state, key))
}

/// `POST /ai_gw/v2/providers` → `{id, slug, object: "provider"}` (no `version_id`).
pub async fn create(
    State(state): State<ProvidersState>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let name = fields::req_str(&body, "name")?;
    let integration = fields::req_str(&body, "integration_id")?;
    let workspace = IdRule::UuidOrSlug
        .opt_nonempty(&body, "workspace_id")?
        .unwrap_or_else(|| state.default_workspace_id.clone());
    let slug = opt_slug(&body, "slug")?;
    let note = fields::opt_str(&body, "note")?;
    let limits = match body.get("usage_limits") {
        None | Some(Value::Null) => Value::Null,
        Some(value) => usage_limits(value, "usage_limits")?,
    };
    let expires = expires_at(&body)?.flatten();
    if body.get("rate_limits").is_some_and(|v| !v.is_null()) {
        rate_limits(&body["rate_limits"], "rate_limits")?;
        // Live: "Inline provider rate limits on create currently fail … with upstream HTTP 503".
        let message = "inline provider rate limits on create are not supported upstream";
        return Err(EmulatorError::injected(
            StatusCode::SERVICE_UNAVAILABLE,
            message,
        ));
    }
    let integration_id = {
        let integrations = lock(&state.integrations);
        let found = integrations.find(&integration).ok_or_else(|| {
            EmulatorError::validation(format!("integration {integration} does not exist"))
        })?;
        if !found.enabled_for(&workspace) {
            return Err(EmulatorError::validation(format!(
                "integration {integration} is not enabled for workspace {workspace}; grant it workspace access first"
            )));
        }
        found.key.id.clone()
    };
    let mut store = lock(&state.providers);
    let slug = store.claim_slug(slug, &name)?;
    let record = ProviderRecord {
        key: Key::created(&state, slug),
        name,
        integration_id,
        workspace_id: workspace,
        note,
        usage_limits: limits,
        expires_at: expires,
        created_at: now(),
        last_reset_at: None,
        exhausted: false,
        default: false,
    };
    Ok(Json(store.insert_receipt(record, OBJECT)))
}

/// `GET /ai_gw/v2/providers` → `{object: "list", total, data}`: `workspace_id` filters,
/// `current_page` from 0, `page_size` (default 50).
pub async fn list(
    State(state): State<ProvidersState>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let workspace = IdRule::UuidOrSlug.filter(&query, "workspace_id")?;
    let page_size = match policy_fields::page_param(&query, "page_size", DEFAULT_PAGE_SIZE)? {
        0 => DEFAULT_PAGE_SIZE,
        size => size,
    };
    let current_page = policy_fields::page_param(&query, "current_page", 0)?;
    let faults = state.faults();
    Ok(lock(&state.providers).reply_page(
        &faults,
        (page_size, current_page),
        |r| workspace.is_none_or(|ws| &r.workspace_id == ws),
        ProviderRecord::row,
    ))
}

/// `GET /ai_gw/v2/providers/{id}` (UUID or slug; `?workspace_id`) → the live detail.
pub async fn get(
    State(state): State<ProvidersState>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let normalise = state.faults().normalise;
    let (mut read, integration) = {
        let store = lock(&state.providers);
        let record = in_workspace(&store, &state, &id, query.get("workspace_id"))?;
        (record.read(), record.integration_id.clone())
    };
    // The credential material a live read carries. The providers lock is released before the
    // integrations one is taken (create_default takes them the other way round).
    if let Some(found) = lock(&state.integrations).find(&integration) {
        read["ai_provider_name"] = json!(found.ai_provider_id);
        read["key"] = json!(found.upstream_key);
        read["masked_api_key"] = json!(found.upstream_key.as_deref().map(masked));
        read["model_config"] = Value::Object(found.configurations.clone());
    }
    Ok(normalise::reply(&read, normalise))
}

/// `PUT /ai_gw/v2/providers/{id}` → `{id, slug}`: `name`, `note`, `usage_limits`,
/// `rate_limits`, `expires_at` (`null` clears the nullable ones) and `reset_usage`.
pub async fn update(
    State(state): State<ProvidersState>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let name = fields::opt_name(&body)?;
    let note = fields::clearable_str(&body, "note", usize::MAX)?;
    let limits = match body.get("usage_limits") {
        None => None,
        Some(Value::Null) => Some(Value::Null),
        Some(value) => Some(usage_limits(value, "usage_limits")?),
    };
    if let Some(value) = body.get("rate_limits").filter(|v| !v.is_null()) {
        rate_limits(value, "rate_limits")?;
    }
    let expires = expires_at(&body)?;
    let reset = fields::opt_bool(&body, "reset_usage")?.unwrap_or(false);
    let changes = name.is_some()
        || note.is_some()
        || limits.is_some()
        || body.contains_key("rate_limits")
        || expires.is_some()
        || reset;
    let workspace = fields::opt_str(&body, "workspace_id")?.or(query.get("workspace_id").cloned());
    let mut store = lock(&state.providers);
    let current = in_workspace(&store, &state, &id, workspace.as_ref())?;
    fields::reject_changes(
        &body,
        &[
            ("integration_id", json!(current.integration_id)),
            ("slug", json!(current.key.slug)),
        ],
        "create a new provider",
    )?;
    fields::require_update(changes)?;
    let record = store.get_mut(&state, &id)?;
    fields::set(&mut record.name, name);
    fields::set(&mut record.note, note);
    fields::set(&mut record.usage_limits, limits);
    fields::set(&mut record.expires_at, expires);
    if reset {
        record.exhausted = false;
        record.last_reset_at = Some(now());
    }
    Ok(Json(
        json!({ "id": record.key.id, "slug": record.key.slug }),
    ))
}

/// `DELETE /ai_gw/v2/providers/{id}` (`?workspace_id`) → `{}`; gone for good.
pub async fn delete(
    State(state): State<ProvidersState>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let mut store = lock(&state.providers);
    let found = in_workspace(&store, &state, &id, query.get("workspace_id"))?
        .key
        .id
        .clone();
    store.take(&state, &found)?;
    Ok(Json(json!({})))
}
