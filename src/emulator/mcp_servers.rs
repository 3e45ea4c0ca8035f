//! MCP servers in memory (workspace level, control plane `/ai_gw/v2`; FACTS-rest §6): a
//! workspace's instance of an MCP integration, with its capability toggles, user access and
//! connections, and the guardrails mapped onto it (`guardrail_mcp` writes those).
//!
//! - Create takes `name` and `mcp_integration_id` (UUID or slug) and an optional `workspace_id`
//!   (UUID or slug of an active workspace; the default workspace when absent), `slug` (3–50,
//!   `^[a-zA-Z0-9_-]+$`, made from the name when absent) and `description` (≤ 500). The
//!   integration must be enabled for that workspace first (an enabled access row, global access,
//!   or its own workspace), else `400 AB01`. Answers `{id, slug, object}`.
//! - The detail **omits `workspace_id`** (live: only service auth sees it); list rows carry it
//!   with the integration's and the workspace's names; list by `workspace_id` and `id` (comma
//!   separated) to prove where a server lives.
//! - `PUT` takes `name` and `description` only (another `workspace_id`, `mcp_integration_id` or
//!   `slug` is 400) and answers `{id, slug, object}`; `DELETE` answers `{}` and is hard.
//! - `…/capabilities` lists the integration's discovered capabilities with the server's own
//!   `enabled` and `integration_enabled`; a `PUT` toggles the server's layer (`{success: true}`;
//!   an undiscovered one is 400). `…/user-access` answers `{object, default_user_access, total,
//!   has_more, data}`; a `PUT` merges `user_access` rows per user and may set
//!   `default_user_access` (`{success: true, object}`). `GET …/connections` lists none.
//! - `POST …/test` and `DELETE …/connections` answer the 403 SCM gives even an owned server
//!   (the policy denial, `x-opa-decision: false`).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use axum::{
    Json, Router,
    extract::{FromRef, Path, Query, State},
    response::Response,
    routing::{get, post},
};
use serde_json::{Value, json};

use super::{
    common::{
        clock::{now, touched},
        errors::{ApiResult, EmulatorError},
        fields::{self, IdRule, JsonObject, Object},
        normalise, policy_fields,
        records::{self, Key, Kind, Record, Records, Slug, reply_one},
        routes::crud,
        state::{Common, lock},
    },
    denied::opa_denied,
    integrations::valid_slug,
    mcp_integrations::{McpIntegrationStore, capabilities_page, capability_updates, undiscovered},
    workspaces::WorkspaceStore,
};

pub const OBJECT: &str = "mcp-server";

/// What the MCP server routes reach. Locks are taken in the order workspaces, MCP
/// integrations, servers.
#[derive(Clone)]
pub struct McpServersState {
    pub common: Arc<Common>,
    pub store: Arc<Mutex<McpServerStore>>,
    pub mcp_integrations: Arc<Mutex<McpIntegrationStore>>,
    pub workspaces: Arc<Mutex<WorkspaceStore>>,
}

pub type McpServerStore = Records<McpServerRecord>;

pub struct McpServerRecord {
    pub key: Key,
    name: String,
    description: Option<String>,
    organisation_id: String,
    owner_id: String,
    pub workspace_id: String,
    pub mcp_integration_id: String,
    created_at: String,
    last_updated_at: String,
    /// The server's layer of capability toggles, by `(type, name)`; absent: enabled.
    capability_toggles: HashMap<(String, String), bool>,
    default_user_access: String,
    /// `(user_id, enabled)` overrides, in the order first set.
    user_access: Vec<(String, bool)>,
    /// The guardrails applied to it.
    pub guardrail_mappings: Vec<GuardrailMapping>,
}

/// One guardrail applied to a server.
#[derive(Clone, PartialEq)]
pub struct GuardrailMapping {
    pub id: String,
    pub guardrail_id: String,
    pub run_on: Vec<String>,
    pub capability_ids: Vec<String>,
}

impl GuardrailMapping {
    pub fn read(&self, server: &str) -> Value {
        json!({
            "id": self.id, "guardrail_id": self.guardrail_id, "mcp_server_id": server,
            "run_on": self.run_on, "capability_ids": self.capability_ids,
            "object": "guardrail-mcp-server-mapping",
        })
    }
}

impl Record for McpServerRecord {
    const KIND: Kind = Kind::new("an", "MCP server", Slug::Named("mcp-server"));

    fn key(&self) -> &Key {
        &self.key
    }
}

impl McpServerRecord {
    fn detail(&self) -> Value {
        json!({
            "id": self.key.id, "organisation_id": self.organisation_id, "slug": self.key.slug,
            "name": self.name, "status": "active", "description": self.description,
            "created_at": self.created_at, "mcp_integration_id": self.mcp_integration_id,
            "guardrail_mappings": self
                .guardrail_mappings
                .iter()
                .map(|m| m.read(&self.key.id))
                .collect::<Vec<_>>(),
            "object": OBJECT,
        })
    }

    fn row(&self, integrations: &McpIntegrationStore, workspaces: &WorkspaceStore) -> Value {
        let integration = integrations.find(&self.mcp_integration_id);
        let workspace = workspaces.find(&self.workspace_id);
        let metadata = integration
            .map(|i| i.row()["metadata"].clone())
            .unwrap_or(Value::Null);
        json!({
            "id": self.key.id, "organisation_id": self.organisation_id, "name": self.name,
            "description": self.description, "status": "active",
            "created_at": self.created_at, "last_updated_at": self.last_updated_at,
            "owner_id": self.owner_id, "slug": self.key.slug, "workspace_id": self.workspace_id,
            "mcp_integration_id": self.mcp_integration_id,
            "mcp_integration_slug": integration.map(|i| i.key.slug.clone()),
            "auth_type": integration.map(|i| i.auth_type.clone()),
            "mcp_integration_url": integration.map(|i| i.url.clone()),
            "workspace_name": workspace.map(|w| w.name.clone()),
            "workspace_slug": workspace.map(|w| w.key.slug.clone()),
            "url": format!("https://mcp.emulator.invalid/{}/mcp", self.key.slug),
            "metadata": metadata,
            "object": OBJECT,
        })
    }
}

impl McpServerStore {
    /// Every mapping of `guardrail`, by server, in server creation order.
    pub fn mappings_of(&self, guardrail: &str) -> Vec<Value> {
        self.sorted()
            .into_iter()
            .flat_map(|s| {
                s.guardrail_mappings
                    .iter()
                    .filter(|m| m.guardrail_id == guardrail)
                    .map(|m| m.read(&s.key.id))
            })
            .collect()
    }

    /// Preloads a server given in its list-row shape: `mcp_integration_id` and `workspace_id`
    /// (UUIDs, taken as given: a seed may describe what the console made), `name`, `slug`;
    /// answers its id and slug.
    pub fn seed(&mut self, common: &Common, item: &Object) -> ApiResult<(String, String)> {
        let missing = |_| EmulatorError::validation("mcp_servers items need mcp_integration_id");
        let integration = fields::req_str(item, "mcp_integration_id").map_err(missing)?;
        let (key, name) = self.seed_key(common, item, "seeded MCP server")?;
        let at = now();
        let record = McpServerRecord {
            key,
            name,
            description: fields::nullable_str(item, "description"),
            organisation_id: common.organisation_id.clone(),
            owner_id: common.user_id.clone(),
            workspace_id: fields::str_or(item, "workspace_id", common.default_workspace_id.clone()),
            mcp_integration_id: integration,
            created_at: at.clone(),
            last_updated_at: at,
            capability_toggles: HashMap::new(),
            default_user_access: fields::str_or(item, "default_user_access", "allow"),
            user_access: Vec::new(),
            guardrail_mappings: Vec::new(),
        };
        Ok(self.insert_seeded(record))
    }

    pub fn dump(&self) -> Vec<Value> {
        self.dump_with(|s| {
            let mut value = s.detail();
            value["workspace_id"] = json!(s.workspace_id);
            value["default_user_access"] = json!(s.default_user_access);
            value
        })
    }
}

/// The routes under `/ai_gw/v2/mcp-servers`.
pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    McpServersState: FromRef<S>,
{
    let base = "/ai_gw/v2/mcp-servers";
    crud(base, "mcpServerId", (list, create), (read, update, delete))
        .route(&format!("{base}/{{mcpServerId}}/test"), post(opa_denied))
        .route(
            &format!("{base}/{{mcpServerId}}/capabilities"),
            get(capabilities).put(update_capabilities),
        )
        .route(
            &format!("{base}/{{mcpServerId}}/user-access"),
            get(user_access).put(update_user_access),
        )
        .route(
            &format!("{base}/{{mcpServerId}}/connections"),
            get(connections).delete(opa_denied),
        )
}

/// `POST /ai_gw/v2/mcp-servers` → `{id, slug, object}`.
async fn create(
    State(state): State<McpServersState>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let name = fields::req_str_max(&body, "name", 255)?;
    let integration_key = fields::req_str(&body, "mcp_integration_id")?;
    let workspace_key = IdRule::UuidOrSlug
        .opt_nonempty(&body, "workspace_id")?
        .unwrap_or_else(|| state.common.default_workspace_id.clone());
    let slug = fields::opt_str(&body, "slug")?;
    if slug
        .as_deref()
        .is_some_and(|s| !valid_slug(s) || !(3..=50).contains(&s.len()))
    {
        return Err(EmulatorError::validation(
            "slug must be 3 to 50 characters of ^[a-zA-Z0-9_-]+$",
        ));
    }
    let description = fields::opt_str_max(&body, "description", 500)?;
    let workspaces = lock(&state.workspaces);
    let workspace = workspaces.active(&workspace_key).ok_or_else(|| {
        EmulatorError::validation(format!("workspace_id {workspace_key} is not a workspace"))
    })?;
    let integrations = lock(&state.mcp_integrations);
    let integration = integrations.find(&integration_key).ok_or_else(|| {
        EmulatorError::validation(format!(
            "mcp_integration_id {integration_key} is not an MCP integration"
        ))
    })?;
    if !integration.enabled_for(&[workspace.key.id.as_str(), workspace.key.slug.as_str()]) {
        return Err(EmulatorError::validation(format!(
            "MCP integration {} is not enabled for workspace {}",
            integration.key.slug, workspace.key.slug
        )));
    }
    let mut store = lock(&state.store);
    let slug = store.claim_slug(slug, &name)?;
    let at = now();
    let record = McpServerRecord {
        key: Key::created(&state.common, slug),
        name,
        description,
        organisation_id: state.common.organisation_id.clone(),
        owner_id: state.common.user_id.clone(),
        workspace_id: workspace.key.id.clone(),
        mcp_integration_id: integration.key.id.clone(),
        created_at: at.clone(),
        last_updated_at: at,
        capability_toggles: HashMap::new(),
        default_user_access: "allow".to_owned(),
        user_access: Vec::new(),
        guardrail_mappings: Vec::new(),
    };
    Ok(Json(store.insert_receipt(record, OBJECT)))
}

/// `GET /ai_gw/v2/mcp-servers` → `{object: "list", total, data}`: `workspace_id` (UUID or
/// slug), `id` (comma separated), `search`, `page_size` (1–100), `current_page`.
async fn list(
    State(state): State<McpServersState>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let (page_size, current_page) = policy_fields::policy_page(&query)?;
    if page_size > 100 {
        return Err(EmulatorError::validation("page_size must be 1 to 100"));
    }
    let ids: Option<Vec<&str>> = query.get("id").map(|ids| {
        ids.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect()
    });
    let faults = state.common.faults();
    let workspaces = lock(&state.workspaces);
    let integrations = lock(&state.mcp_integrations);
    let store = lock(&state.store);
    let workspace = query.get("workspace_id").map(|key| {
        workspaces
            .find(key)
            .map_or(key.clone(), |w| w.key.id.clone())
    });
    let admits = |r: &McpServerRecord| {
        workspace.as_ref().is_none_or(|w| &r.workspace_id == w)
            && ids
                .as_ref()
                .is_none_or(|ids| ids.contains(&r.key.id.as_str()))
            && policy_fields::searched(&query, &r.name)
    };
    Ok(
        store.reply_page(&faults, (page_size, current_page), admits, |r| {
            r.row(&integrations, &workspaces)
        }),
    )
}

async fn read(
    State(state): State<McpServersState>,
    Path(key): Path<String>,
) -> ApiResult<Response> {
    reply_one(&state.common, &state.store, &key, McpServerRecord::detail)
}

/// `PUT …/mcp-servers/{id}`: `name`, `description` → `{id, slug, object}`.
async fn update(
    State(state): State<McpServersState>,
    Path(key): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let name = fields::opt_str(&body, "name")?;
    if name
        .as_ref()
        .is_some_and(|n| n.trim().is_empty() || n.chars().count() > 255)
    {
        return Err(EmulatorError::validation(
            "name must be 1 to 255 characters",
        ));
    }
    let description = fields::clearable_str(&body, "description", 500)?;
    let mut store = lock(&state.store);
    let record = store.get_mut(&state.common, &key)?;
    for field in ["workspace_id", "mcp_integration_id", "slug"] {
        if body.get(field).is_some_and(|v| !v.is_null()) {
            return Err(EmulatorError::validation(format!(
                "{field} cannot be changed; create another MCP server"
            )));
        }
    }
    if name.is_none() && description.is_none() {
        return Err(EmulatorError::validation(
            "request body must contain name or description",
        ));
    }
    fields::set(&mut record.name, name);
    fields::set(&mut record.description, description);
    record.last_updated_at = touched(&record.last_updated_at);
    Ok(Json(
        json!({"id": record.key.id, "slug": record.key.slug, "object": OBJECT}),
    ))
}

async fn delete(
    State(state): State<McpServersState>,
    Path(key): Path<String>,
) -> ApiResult<Json<Value>> {
    lock(&state.store).take(&state.common, &key)?;
    Ok(Json(json!({})))
}

/// The integration's capabilities as this server sees them: `(type, name, integration_enabled,
/// server enabled)`.
fn layered(
    record: &McpServerRecord,
    integrations: &McpIntegrationStore,
) -> Vec<(String, Value, bool)> {
    let Some(integration) = integrations.find(&record.mcp_integration_id) else {
        return Vec::new();
    };
    integration
        .capabilities
        .iter()
        .map(|c| {
            let enabled = record
                .capability_toggles
                .get(&(c.kind.clone(), c.name.clone()))
                .copied()
                .unwrap_or(true);
            let mut item = c.item();
            item["integration_enabled"] = json!(c.enabled);
            item["enabled"] = json!(enabled);
            (c.kind.clone(), item, enabled)
        })
        .collect()
}

async fn capabilities(
    State(state): State<McpServersState>,
    Path(key): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let normalise = state.common.faults().normalise;
    let integrations = lock(&state.mcp_integrations);
    let store = lock(&state.store);
    let record = store.get(&state.common, &key)?;
    let layers = layered(record, &integrations);
    let all: Vec<(String, bool)> = layers.iter().map(|(k, _, e)| (k.clone(), *e)).collect();
    let items = layers.into_iter().map(|(k, item, _)| (k, item)).collect();
    let body = capabilities_page(&query, &all, items)?;
    Ok(normalise::reply(&body, normalise))
}

/// `PUT …/capabilities` → `{success: true}`: the server's own layer.
async fn update_capabilities(
    State(state): State<McpServersState>,
    Path(key): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let updates = capability_updates(&body)?;
    let integrations = lock(&state.mcp_integrations);
    let mut store = lock(&state.store);
    let record = store.get_mut(&state.common, &key)?;
    let known = integrations
        .find(&record.mcp_integration_id)
        .map(|i| i.capabilities.clone())
        .unwrap_or_default();
    for (name, kind, _) in &updates {
        if !known.iter().any(|c| &c.name == name && &c.kind == kind) {
            return Err(undiscovered(kind, name));
        }
    }
    for (name, kind, enabled) in updates {
        record.capability_toggles.insert((kind, name), enabled);
    }
    Ok(Json(json!({"success": true})))
}

/// `GET …/user-access`: `page` (from 1), `page_size` (1–500), `search` (user id).
async fn user_access(
    State(state): State<McpServersState>,
    Path(key): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let page = policy_fields::page_param(&query, "page", 1)?.max(1);
    let page_size = policy_fields::page_param(&query, "page_size", 100)?;
    if !(1..=500).contains(&page_size) {
        return Err(EmulatorError::validation("page_size must be 1 to 500"));
    }
    let store = lock(&state.store);
    let record = store.get(&state.common, &key)?;
    let rows: Vec<Value> = record
        .user_access
        .iter()
        .filter(|(user, _)| {
            query
                .get("search")
                .is_none_or(|s| user.contains(s.as_str()))
        })
        .map(|(user, enabled)| {
            json!({"user_id": user, "first_name": null, "last_name": null, "enabled": enabled,
                   "has_override": true, "connection_status": "not_connected"})
        })
        .collect();
    let total = rows.len();
    let data = records::page(rows, page_size, page - 1);
    Ok(Json(json!({
        "object": "list", "default_user_access": record.default_user_access, "total": total,
        "has_more": page * page_size < total, "data": data,
    })))
}

/// `PUT …/user-access` `{user_access: [{user_id, enabled}], default_user_access?}` →
/// `{success: true, object}`.
async fn update_user_access(
    State(state): State<McpServersState>,
    Path(key): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let rows = fields::req_items(&body, "user_access", |item| {
        let user = fields::item_str("user_access", item, "user_id")?;
        Ok((user, fields::item_bool("user_access", item, "enabled")?))
    })?;
    let default = fields::opt_enum(&body, "default_user_access", &["allow", "deny"])?;
    let mut store = lock(&state.store);
    let record = store.get_mut(&state.common, &key)?;
    for (user, enabled) in rows {
        match record.user_access.iter_mut().find(|(u, _)| *u == user) {
            Some(row) => row.1 = enabled,
            None => record.user_access.push((user, enabled)),
        }
    }
    fields::set(&mut record.default_user_access, default);
    record.last_updated_at = touched(&record.last_updated_at);
    Ok(Json(
        json!({"success": true, "object": "mcp-server-user-access"}),
    ))
}

/// `GET …/connections` → `{object, total, has_more, data}` (no user has connected).
async fn connections(
    State(state): State<McpServersState>,
    Path(key): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let page_size = policy_fields::page_param(&query, "page_size", 100)?;
    if page_size > 500 {
        return Err(EmulatorError::validation("page_size must be at most 500"));
    }
    let store = lock(&state.store);
    store.get(&state.common, &key)?;
    Ok(Json(
        json!({"object": "list", "total": 0, "has_more": false, "data": []}),
    ))
}
