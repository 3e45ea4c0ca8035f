//! MCP integrations in memory (organisation level, admin plane; FACTS-rest §4, §5): the
//! upstream MCP servers the organisation registers, with their workspace access, their tool
//! capabilities and their sync metadata.
//!
//! - `configurations` is write-only: the detail shows it as an object with its secret fields
//!   masked (`client_secret` → `masked_client_secret`, `oauth_metadata` → `masked_oauth_metadata`,
//!   `custom_headers` values masked in place); **list rows carry it as a JSON-encoded string** of
//!   that masked object. `GET /_emulator/state` shows it in clear with `configuration_writes`.
//! - `secret_mappings` read `null` until set; a mapping's `target_field` must be
//!   `configurations.<field>` and unique; `secret_reference_id` is a UUID or slug.
//! - Workspace access (`…/workspaces`): a PUT merges the listed rows (`override_existing_
//!   workspace_access: true` disables every other one) and answers `{}`; a row is never deleted:
//!   disabled, it stays listed with `enabled: false, status: "archived"`. `GET` answers the legacy
//!   `{workspaces, global_workspace_access, object}`, or with `?version=` the
//!   `{object: "list", global_workspace_access, total, data}` shape.
//! - Capabilities exist only after discovery: a new integration has none and its metadata says
//!   `sync_status: "pending"`. `POST /_emulator/mcp-integrations/{id}/discover` plays the gateway
//!   connecting upstream (`initialize` + `tools/list`): it sets the tools, prompts and resources
//!   the body lists (a name seen before keeps its `enabled`), and the metadata (`synced`, or
//!   `failed` with `sync_error` when the body carries `error`). `GET …/capabilities` pages from
//!   1 (`page`, `page_size` 1–500, `type`); a `PUT` toggles listed capabilities and answers
//!   `{success: true}`; naming one not discovered is `400 AB01` (FACTS leaves the live answer
//!   open).
//! - Create takes `organisation_id` as the numeric TSG or a UUID (reads show the internal UUID)
//!   and answers `{id, slug, object}`; `slug` and `workspace_id` are fixed; DELETE is a hard
//!   delete (FACTS: "Permanently delete").

use std::{
    collections::{HashMap, HashSet},
    time::Instant,
};

use axum::{
    Json, Router,
    body::Bytes,
    extract::{FromRef, Path, Query, State},
    response::Response,
    routing::get,
};
use serde_json::{Map, Value, json};

use super::{
    common::{
        clock::{now, touched},
        errors::{ApiResult, EmulatorError},
        fields::{self, IdRule, Object},
        ids::{free_slug, new_id},
        mappings, normalise, policy_fields,
        state::{Common, KindState, lock},
    },
    integrations::{masked_configurations, valid_slug},
};

pub type McpIntegrationsState = KindState<McpIntegrationStore>;

/// The `object` of reads and receipts.
pub const OBJECT: &str = "mcp-integration";

/// Capability kinds, as `type` and as the `counts` keys.
const KINDS: &[(&str, &str)] = &[
    ("tool", "tools"),
    ("prompt", "prompts"),
    ("resource", "resources"),
    ("resource_template", "resource_templates"),
];

#[derive(Default)]
pub struct McpIntegrationStore {
    by_id: HashMap<String, McpIntegrationRecord>,
}

pub struct McpIntegrationRecord {
    pub seq: u64,
    pub api_created: Option<Instant>,
    pub id: String,
    pub slug: String,
    pub name: String,
    pub description: Option<String>,
    pub url: String,
    pub auth_type: String,
    pub transport: String,
    /// Write-only as a whole.
    pub configurations: Object,
    /// `None` reads `null`.
    pub secret_mappings: Option<Vec<Value>>,
    pub organisation_id: String,
    pub workspace_id: Option<String>,
    pub owner_id: String,
    pub created_at: String,
    pub last_updated_at: String,
    pub global_access: Option<Value>,
    pub rows: Vec<AccessRow>,
    pub capabilities: Vec<Capability>,
    pub metadata: Object,
    /// Requests that wrote `configurations`.
    pub configuration_writes: u64,
}

/// One workspace's access; never deleted.
pub struct AccessRow {
    pub id: String,
    pub enabled: bool,
    pub created_at: String,
    pub last_updated_at: String,
    pub writes: u64,
}

impl AccessRow {
    fn row(&self) -> Value {
        json!({
            "id": self.id,
            "enabled": self.enabled,
            "status": if self.enabled { "active" } else { "archived" },
            "created_at": self.created_at,
            "last_updated_at": self.last_updated_at,
        })
    }
}

/// A discovered tool, prompt or resource.
#[derive(Clone)]
pub struct Capability {
    pub name: String,
    pub kind: String,
    pub description: Option<String>,
    pub input_schema: Value,
    pub enabled: bool,
    pub created_at: String,
    pub last_updated_at: String,
}

impl Capability {
    /// The live item.
    pub fn item(&self) -> Value {
        json!({
            "name": self.name, "type": self.kind, "title": self.name,
            "description": self.description, "icons": null, "enabled": self.enabled,
            "created_at": self.created_at, "last_updated_at": self.last_updated_at,
            "input_schema": self.input_schema, "output_schema": null, "execution": null,
            "annotations": null, "arguments": null, "uri": null, "uri_template": null,
            "mime_type": null, "size": null, "object": "mcp-capability",
        })
    }
}

/// `configurations` as reads show it: the integrations' masking plus `oauth_metadata`.
fn masked(configurations: &Object) -> Object {
    let mut plain = configurations.clone();
    let oauth = plain.remove("oauth_metadata");
    let mut shown = masked_configurations(&plain);
    if oauth.is_some() {
        shown.insert("masked_oauth_metadata".to_owned(), json!("****"));
    }
    shown
}

impl McpIntegrationRecord {
    pub fn integration_type(&self) -> &'static str {
        if self.workspace_id.is_some() {
            "workspace"
        } else {
            "organisation"
        }
    }

    /// The live detail.
    pub fn detail(&self) -> Value {
        json!({
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "owner_id": self.owner_id,
            "status": "active",
            "created_at": self.created_at,
            "last_updated_at": self.last_updated_at,
            "configurations": masked(&self.configurations),
            "global_workspace_access": self.global_access,
            "workspace_id": self.workspace_id,
            "slug": self.slug,
            "url": self.url,
            "auth_type": self.auth_type,
            "transport": self.transport,
            "type": self.integration_type(),
            "secret_mappings": self.secret_mappings,
            "object": OBJECT,
        })
    }

    /// A list row: the detail with `configurations` as a JSON string, plus the organisation,
    /// the enabled workspace count and the metadata summary.
    pub fn row(&self) -> Value {
        let mut row = self.detail();
        row["configurations"] = json!(Value::Object(masked(&self.configurations)).to_string());
        row["organisation_id"] = json!(self.organisation_id);
        row["workspaces_count"] = json!(self.rows.iter().filter(|r| r.enabled).count());
        let summary: Map<String, Value> = [
            "title",
            "description",
            "icons",
            "server_name",
            "server_version",
            "protocol_version",
            "sync_status",
            "last_synced_at",
        ]
        .iter()
        .map(|k| {
            (
                (*k).to_owned(),
                self.metadata.get(*k).cloned().unwrap_or(Value::Null),
            )
        })
        .collect();
        row["metadata"] = Value::Object(summary);
        row
    }

    /// Whether a server may be made in `workspace` (any of its names): its own workspace,
    /// global access, or an enabled row.
    pub fn enabled_for(&self, workspace: &[&str]) -> bool {
        self.workspace_id
            .as_deref()
            .is_some_and(|ws| workspace.contains(&ws))
            || self
                .global_access
                .as_ref()
                .is_some_and(|g| g["enabled"] == json!(true))
            || self
                .rows
                .iter()
                .any(|r| r.enabled && workspace.contains(&r.id.as_str()))
    }

    /// True when a mapping names the secret reference (by any of its names).
    pub fn maps_secret(&self, names: &[&str]) -> bool {
        self.secret_mappings.iter().flatten().any(|m| {
            m["secret_reference_id"]
                .as_str()
                .is_some_and(|r| names.contains(&r))
        })
    }

    fn dump(&self) -> Value {
        let mut value = self.detail();
        value["configurations"] = Value::Object(self.configurations.clone());
        value["configuration_writes"] = json!(self.configuration_writes);
        value["workspaces"] = self
            .rows
            .iter()
            .map(|r| {
                let mut row = r.row();
                row["writes"] = json!(r.writes);
                row
            })
            .collect();
        value["capabilities"] = self.capabilities.iter().map(Capability::item).collect();
        value["metadata"] = Value::Object(self.metadata.clone());
        value
    }
}

impl McpIntegrationStore {
    pub fn sorted(&self) -> Vec<&McpIntegrationRecord> {
        let mut records: Vec<_> = self.by_id.values().collect();
        records.sort_by_key(|r| r.seq);
        records
    }

    /// By UUID or slug.
    pub fn find(&self, key: &str) -> Option<&McpIntegrationRecord> {
        self.by_id
            .get(key)
            .or_else(|| self.by_id.values().find(|r| r.slug == key))
    }

    fn find_mut(&mut self, key: &str) -> Option<&mut McpIntegrationRecord> {
        let id = self.find(key)?.id.clone();
        self.by_id.get_mut(&id)
    }

    pub fn dump(&self) -> Vec<Value> {
        self.sorted()
            .into_iter()
            .map(McpIntegrationRecord::dump)
            .collect()
    }

    /// Preloads an integration given in its read shape, with `configurations` in clear,
    /// `workspaces` as access rows (`{id, enabled}`) and `tools` as discovered tool names;
    /// answers its id and slug.
    pub fn seed(&mut self, common: &Common, item: &Object) -> ApiResult<(String, String)> {
        let name = fields::str_or(item, "name", "seeded MCP integration");
        let slug = fields::nullable_str(item, "slug")
            .unwrap_or_else(|| free_slug(&name, "mcp", |s| self.find(s).is_some()));
        let id = fields::str_or(item, "id", new_id());
        if self.find(&id).is_some() || self.find(&slug).is_some() {
            return Err(EmulatorError::validation(format!(
                "MCP integration {slug} already exists"
            )));
        }
        let at = now();
        let rows = item
            .get("workspaces")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_object)
            .map(|row| AccessRow {
                id: fields::str_or(row, "id", ""),
                enabled: fields::flag_or(row, "enabled", true),
                created_at: at.clone(),
                last_updated_at: at.clone(),
                writes: 0,
            })
            .collect();
        let capabilities = fields::opt_str_list(item, "tools")?
            .unwrap_or_default()
            .into_iter()
            .map(|name| Capability {
                name,
                kind: "tool".to_owned(),
                description: None,
                input_schema: json!({"type": "object"}),
                enabled: true,
                created_at: at.clone(),
                last_updated_at: at.clone(),
            })
            .collect::<Vec<_>>();
        let mut metadata = pending_metadata();
        if !capabilities.is_empty() {
            metadata.insert("sync_status".to_owned(), json!("synced"));
            metadata.insert("last_synced_at".to_owned(), json!(at));
        }
        let record = McpIntegrationRecord {
            seq: common.next_seq(),
            api_created: None,
            id: id.clone(),
            slug: slug.clone(),
            name,
            description: fields::nullable_str(item, "description"),
            url: fields::str_or(item, "url", "https://mcp.example.invalid/mcp"),
            auth_type: fields::str_or(item, "auth_type", "none"),
            transport: fields::str_or(item, "transport", "http"),
            configurations: fields::opt_object(item, "configurations")?.unwrap_or_default(),
            secret_mappings: fields::opt_array(item, "secret_mappings")?,
            organisation_id: common.organisation_id.clone(),
            workspace_id: fields::nullable_str(item, "workspace_id"),
            owner_id: common.user_id.clone(),
            created_at: at.clone(),
            last_updated_at: at,
            global_access: item
                .get("global_workspace_access")
                .cloned()
                .filter(|g| !g.is_null()),
            rows,
            capabilities,
            metadata,
            configuration_writes: 0,
        };
        self.by_id.insert(id.clone(), record);
        Ok((id, slug))
    }
}

fn missing(state: &Common, key: &str) -> EmulatorError {
    state.missing(&format!("MCP integration {key}"))
}

/// The routes under `/ai_gw/admin/v2/mcp-integrations`.
pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    McpIntegrationsState: FromRef<S>,
{
    let base = "/ai_gw/admin/v2/mcp-integrations";
    Router::new()
        .route(base, get(list).post(create))
        .route(
            &format!("{base}/{{mcpIntegrationId}}"),
            get(read).put(update).delete(delete),
        )
        .route(
            &format!("{base}/{{mcpIntegrationId}}/workspaces"),
            get(workspaces).put(update_workspaces),
        )
        .route(
            &format!("{base}/{{mcpIntegrationId}}/capabilities"),
            get(capabilities).put(update_capabilities),
        )
        .route(
            &format!("{base}/{{mcpIntegrationId}}/metadata"),
            get(metadata),
        )
}

/// `url`: an http(s) URI.
fn url(body: &Object, required: bool) -> ApiResult<Option<String>> {
    let url = fields::opt_str(body, "url")?;
    match &url {
        None if required => Err(EmulatorError::validation("url is required")),
        Some(u) if !(u.starts_with("https://") || u.starts_with("http://")) => Err(
            EmulatorError::validation("url must be an http or https URI"),
        ),
        _ => Ok(url),
    }
}

const AUTH_TYPES: &[&str] = &["oauth_auto", "headers", "none"];
const TRANSPORTS: &[&str] = &["http", "sse"];

/// `POST …/mcp-integrations` → `{id, slug, object}`.
async fn create(State(state): State<McpIntegrationsState>, body: Bytes) -> ApiResult<Json<Value>> {
    let body = fields::parse_object(&body)?;
    let name = fields::req_str(&body, "name")?;
    let url = url(&body, true)?.unwrap_or_default();
    let auth_type = policy_fields::required_enum(&body, "auth_type", AUTH_TYPES)?;
    let transport = policy_fields::required_enum(&body, "transport", TRANSPORTS)?;
    IdRule::TsgOrUuid.opt_field(&body, "organisation_id")?;
    let workspace = IdRule::UuidOrSlug
        .opt_field(&body, "workspace_id")?
        .filter(|w| !w.is_empty());
    let slug = fields::opt_str(&body, "slug")?;
    if slug.as_deref().is_some_and(|s| !valid_slug(s)) {
        return Err(EmulatorError::validation(
            "slug must match ^[a-zA-Z0-9_-]+$",
        ));
    }
    let configurations = fields::opt_object(&body, "configurations")?;
    let mappings = mappings::secret_mappings(&body, &["configurations."])?;
    let description = fields::opt_str(&body, "description")?;
    let mut store = lock(&state.store);
    let taken = |s: &str| store.by_id.values().any(|r| r.slug == s);
    let slug = match slug {
        Some(slug) if taken(&slug) => {
            return Err(EmulatorError::validation(format!(
                "an MCP integration with slug {slug} already exists"
            )));
        }
        Some(slug) => slug,
        None => free_slug(&name, "mcp", taken),
    };
    let at = now();
    let record = McpIntegrationRecord {
        seq: state.next_seq(),
        api_created: Some(Instant::now()),
        id: new_id(),
        slug,
        name,
        description,
        url,
        auth_type,
        transport,
        configuration_writes: u64::from(configurations.is_some()),
        configurations: configurations.unwrap_or_default(),
        secret_mappings: mappings,
        organisation_id: state.organisation_id.clone(),
        workspace_id: workspace,
        owner_id: state.user_id.clone(),
        created_at: at.clone(),
        last_updated_at: at,
        global_access: None,
        rows: Vec::new(),
        capabilities: Vec::new(),
        metadata: pending_metadata(),
    };
    let receipt = json!({"id": record.id, "slug": record.slug, "object": OBJECT});
    store.by_id.insert(record.id.clone(), record);
    Ok(Json(receipt))
}

fn pending_metadata() -> Object {
    let mut metadata: Object = [
        "server_name",
        "server_version",
        "title",
        "description",
        "website_url",
        "icons",
        "protocol_version",
        "capability_flags",
        "instructions",
        "last_synced_at",
        "sync_error",
    ]
    .iter()
    .map(|k| ((*k).to_owned(), Value::Null))
    .collect();
    metadata.insert("sync_status".to_owned(), json!("pending"));
    metadata
}

/// `GET …/mcp-integrations` → `{object: "list", total, has_more, data}`: `type`,
/// `workspace_id`, `search`, `page_size` (1–1000), `current_page`.
async fn list(
    State(state): State<McpIntegrationsState>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    if query.contains_key("organisation_id") {
        return Err(EmulatorError::validation(
            "organisation_id is not a query parameter",
        ));
    }
    let kind = policy_fields::enum_filter(&query, "type", &["workspace", "organisation", "all"])?;
    let (page_size, current_page) = policy_fields::policy_page(&query)?;
    if page_size > 1000 {
        return Err(EmulatorError::validation("page_size must be 1 to 1000"));
    }
    let faults = state.faults();
    let store = lock(&state.store);
    let matching: Vec<&McpIntegrationRecord> = store
        .sorted()
        .into_iter()
        .filter(|r| faults.listed(r.api_created))
        .filter(|r| match kind.as_deref() {
            Some("workspace") => r.workspace_id.is_some(),
            Some("organisation") => r.workspace_id.is_none(),
            _ => true,
        })
        .filter(|r| {
            query
                .get("workspace_id")
                .is_none_or(|ws| r.enabled_for(&[ws.as_str()]))
        })
        .filter(|r| {
            query
                .get("search")
                .is_none_or(|s| r.name.to_lowercase().contains(&s.to_lowercase()))
        })
        .collect();
    let total = matching.len();
    let data: Vec<Value> = policy_fields::page(matching, page_size, current_page)
        .into_iter()
        .map(McpIntegrationRecord::row)
        .collect();
    let has_more = (current_page + 1) * page_size < total;
    let body = json!({"object": "list", "total": total, "has_more": has_more, "data": data});
    Ok(normalise::reply(&body, faults.normalise))
}

async fn read(
    State(state): State<McpIntegrationsState>,
    Path(key): Path<String>,
) -> ApiResult<Response> {
    let normalise = state.faults().normalise;
    let store = lock(&state.store);
    let record = store.find(&key).ok_or_else(|| missing(&state, &key))?;
    Ok(normalise::reply(&record.detail(), normalise))
}

/// `PUT …/mcp-integrations/{id}` → `{}`: `name`, `description`, `configurations` (replaced
/// whole), `url`, `auth_type`, `transport`, `secret_mappings`; another `slug` or `workspace_id`
/// is 400.
async fn update(
    State(state): State<McpIntegrationsState>,
    Path(key): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let body = fields::parse_object(&body)?;
    let name = fields::opt_str(&body, "name")?;
    if name.as_ref().is_some_and(|n| n.trim().is_empty()) {
        return Err(EmulatorError::validation("name must not be empty"));
    }
    let description = body
        .contains_key("description")
        .then(|| fields::opt_str(&body, "description"))
        .transpose()?;
    let configurations = fields::opt_object(&body, "configurations")?;
    let new_url = url(&body, false)?;
    let auth_type = fields::opt_enum(&body, "auth_type", AUTH_TYPES)?;
    let transport = fields::opt_enum(&body, "transport", TRANSPORTS)?;
    let mappings = mappings::secret_mappings(&body, &["configurations."])?;
    let changes = name.is_some()
        || description.is_some()
        || configurations.is_some()
        || new_url.is_some()
        || auth_type.is_some()
        || transport.is_some()
        || mappings.is_some();
    let mut store = lock(&state.store);
    let record = store.find_mut(&key).ok_or_else(|| missing(&state, &key))?;
    for (field, current) in [
        ("slug", json!(record.slug)),
        ("workspace_id", json!(record.workspace_id)),
    ] {
        if body
            .get(field)
            .is_some_and(|sent| !sent.is_null() && *sent != current)
        {
            return Err(EmulatorError::validation(format!(
                "{field} cannot be changed; create another MCP integration"
            )));
        }
    }
    if !changes {
        return Err(EmulatorError::validation(
            "request body must contain at least one field to update",
        ));
    }
    if let Some(name) = name {
        record.name = name;
    }
    if let Some(description) = description {
        record.description = description;
    }
    if let Some(configurations) = configurations {
        record.configurations = configurations;
        record.configuration_writes += 1;
    }
    if let Some(url) = new_url {
        record.url = url;
    }
    if let Some(auth_type) = auth_type {
        record.auth_type = auth_type;
    }
    if let Some(transport) = transport {
        record.transport = transport;
    }
    if let Some(mappings) = mappings {
        record.secret_mappings = Some(mappings);
    }
    record.last_updated_at = touched(&record.last_updated_at);
    Ok(Json(json!({})))
}

async fn delete(
    State(state): State<McpIntegrationsState>,
    Path(key): Path<String>,
) -> ApiResult<Json<Value>> {
    let mut store = lock(&state.store);
    let id = store
        .find(&key)
        .ok_or_else(|| missing(&state, &key))?
        .id
        .clone();
    store.by_id.remove(&id);
    Ok(Json(json!({})))
}

/// `GET …/workspaces`: the legacy shape, or with `?version=` the versioned one.
async fn workspaces(
    State(state): State<McpIntegrationsState>,
    Path(key): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let normalise = state.faults().normalise;
    let store = lock(&state.store);
    let record = store.find(&key).ok_or_else(|| missing(&state, &key))?;
    let rows: Vec<Value> = record.rows.iter().map(AccessRow::row).collect();
    let body = if query.contains_key("version") {
        let data: Vec<Value> = rows
            .into_iter()
            .map(|mut row| {
                row["object"] = json!("mcp-integration-workspace");
                row
            })
            .collect();
        json!({"object": "list", "global_workspace_access": record.global_access,
               "total": data.len(), "data": data})
    } else {
        json!({"workspaces": rows, "global_workspace_access": record.global_access,
               "object": "mcp-integration-workspaces"})
    };
    Ok(normalise::reply(&body, normalise))
}

/// `PUT …/workspaces` → `{}`.
async fn update_workspaces(
    State(state): State<McpIntegrationsState>,
    Path(key): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let body = fields::parse_object(&body)?;
    let items = fields::opt_array(&body, "workspaces")?
        .ok_or_else(|| EmulatorError::validation("workspaces is required"))?;
    let mut rows = Vec::with_capacity(items.len());
    let mut seen = HashSet::new();
    for item in &items {
        let item = item
            .as_object()
            .ok_or_else(|| EmulatorError::validation("workspaces items must be objects"))?;
        let id = fields::req_str(item, "id")
            .map_err(|_| EmulatorError::validation("workspaces[].id is required"))?;
        IdRule::UuidOrSlug.check("workspace_id", &id)?;
        let enabled = fields::opt_bool(item, "enabled")?
            .ok_or_else(|| EmulatorError::validation("workspaces[].enabled is required"))?;
        if !seen.insert(id.clone()) {
            return Err(EmulatorError::validation(format!(
                "workspaces names {id} twice"
            )));
        }
        rows.push((id, enabled));
    }
    let global = match body.get("global_workspace_access") {
        None => None,
        Some(Value::Null) => Some(Value::Null),
        Some(Value::Object(g)) if g.get("enabled").is_some_and(Value::is_boolean) => {
            Some(Value::Object(g.clone()))
        }
        Some(_) => {
            return Err(EmulatorError::validation(
                "global_workspace_access must be null or {enabled: boolean}",
            ));
        }
    };
    let overriding =
        fields::opt_bool(&body, "override_existing_workspace_access")?.unwrap_or(false);
    let mut store = lock(&state.store);
    let record = store.find_mut(&key).ok_or_else(|| missing(&state, &key))?;
    if overriding {
        for row in record.rows.iter_mut().filter(|r| !seen.contains(&r.id)) {
            if row.enabled {
                row.enabled = false;
                row.last_updated_at = touched(&row.last_updated_at);
                row.writes += 1;
            }
        }
    }
    for (id, enabled) in rows {
        let at = match record.rows.iter().position(|r| r.id == id) {
            Some(at) => at,
            None => {
                let created = now();
                record.rows.push(AccessRow {
                    id,
                    enabled: false,
                    created_at: created.clone(),
                    last_updated_at: created,
                    writes: 0,
                });
                record.rows.len() - 1
            }
        };
        let row = &mut record.rows[at];
        row.enabled = enabled;
        row.last_updated_at = touched(&row.last_updated_at);
        row.writes += 1;
    }
    if let Some(global) = global {
        record.global_access = Some(global).filter(|g| !g.is_null());
    }
    Ok(Json(json!({})))
}

/// A capabilities page (`page` from 1, `page_size` 1–500, `type`) of `items`, with the counts
/// of every kind taken from `all` (`(kind, enabled)` per capability).
pub fn capabilities_page(
    query: &HashMap<String, String>,
    all: &[(String, bool)],
    items: Vec<(String, Value)>,
) -> ApiResult<Value> {
    let page = policy_fields::page_param(query, "page", 1)?;
    if page == 0 {
        return Err(EmulatorError::validation("page starts at 1"));
    }
    let page_size = policy_fields::page_param(query, "page_size", 100)?;
    if !(1..=500).contains(&page_size) {
        return Err(EmulatorError::validation("page_size must be 1 to 500"));
    }
    let kinds: Vec<&str> = KINDS.iter().map(|(k, _)| *k).collect();
    let kind = policy_fields::enum_filter(query, "type", &kinds)?;
    let mut counts = Map::new();
    for (kind, plural) in KINDS {
        let of_kind: Vec<_> = all.iter().filter(|(k, _)| k == kind).collect();
        counts.insert(
            (*plural).to_owned(),
            json!({"total": of_kind.len(), "enabled": of_kind.iter().filter(|(_, e)| *e).count()}),
        );
    }
    let matching: Vec<Value> = items
        .into_iter()
        .filter(|(k, _)| kind.as_ref().is_none_or(|want| want == k))
        .map(|(_, item)| item)
        .collect();
    let total = matching.len();
    let data = policy_fields::page(matching, page_size, page - 1);
    Ok(json!({
        "object": "list", "counts": counts, "total": total,
        "has_more": page * page_size < total, "data": data,
    }))
}

/// A capabilities `PUT` body: `capabilities: [{name, type (tool|prompt|resource), enabled}]`,
/// at least one.
pub fn capability_updates(body: &Object) -> ApiResult<Vec<(String, String, bool)>> {
    let items = fields::opt_array(body, "capabilities")?
        .filter(|items| !items.is_empty())
        .ok_or_else(|| EmulatorError::validation("capabilities must name at least one"))?;
    items
        .iter()
        .map(|item| {
            let item = item
                .as_object()
                .ok_or_else(|| EmulatorError::validation("capabilities items must be objects"))?;
            let name = fields::req_str(item, "name")
                .map_err(|_| EmulatorError::validation("capabilities[].name is required"))?;
            let kind = policy_fields::required_enum(item, "type", &["tool", "prompt", "resource"])
                .map_err(|e| EmulatorError::validation(format!("capabilities[].{e}")))?;
            let enabled = fields::opt_bool(item, "enabled")?
                .ok_or_else(|| EmulatorError::validation("capabilities[].enabled is required"))?;
            Ok((name, kind, enabled))
        })
        .collect()
}

/// The error for a capability the integration has not discovered.
pub fn undiscovered(kind: &str, name: &str) -> EmulatorError {
    EmulatorError::validation(format!(
        "{kind} {name} has not been discovered on this MCP integration"
    ))
}

async fn capabilities(
    State(state): State<McpIntegrationsState>,
    Path(key): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let normalise = state.faults().normalise;
    let store = lock(&state.store);
    let record = store.find(&key).ok_or_else(|| missing(&state, &key))?;
    let all: Vec<(String, bool)> = record
        .capabilities
        .iter()
        .map(|c| (c.kind.clone(), c.enabled))
        .collect();
    let items = record
        .capabilities
        .iter()
        .map(|c| (c.kind.clone(), c.item()))
        .collect();
    let body = capabilities_page(&query, &all, items)?;
    Ok(normalise::reply(&body, normalise))
}

/// `PUT …/capabilities` → `{success: true}`.
async fn update_capabilities(
    State(state): State<McpIntegrationsState>,
    Path(key): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let body = fields::parse_object(&body)?;
    let updates = capability_updates(&body)?;
    let mut store = lock(&state.store);
    let record = store.find_mut(&key).ok_or_else(|| missing(&state, &key))?;
    for (name, kind, _) in &updates {
        if !record
            .capabilities
            .iter()
            .any(|c| &c.name == name && &c.kind == kind)
        {
            return Err(undiscovered(kind, name));
        }
    }
    for (name, kind, enabled) in updates {
        if let Some(cap) = record
            .capabilities
            .iter_mut()
            .find(|c| c.name == name && c.kind == kind)
            && cap.enabled != enabled
        {
            cap.enabled = enabled;
            cap.last_updated_at = touched(&cap.last_updated_at);
        }
    }
    Ok(Json(json!({"success": true})))
}

async fn metadata(
    State(state): State<McpIntegrationsState>,
    Path(key): Path<String>,
) -> ApiResult<Json<Value>> {
    let store = lock(&state.store);
    let record = store.find(&key).ok_or_else(|| missing(&state, &key))?;
    let mut body = record.metadata.clone();
    body.insert("object".to_owned(), json!("mcp-integration-metadata"));
    Ok(Json(Value::Object(body)))
}

/// `POST /_emulator/mcp-integrations/{id}/discover` (control): what the gateway learns when it
/// connects upstream. Body `{server_name?, server_version?, tools?: [{name, description?,
/// input_schema?}], prompts?: […], resources?: […], error?}` → the metadata.
pub async fn discover(
    State(state): State<McpIntegrationsState>,
    Path(key): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let body = fields::parse_object(&body)?;
    let mut discovered = Vec::new();
    for (field, kind) in [
        ("tools", "tool"),
        ("prompts", "prompt"),
        ("resources", "resource"),
    ] {
        for item in fields::opt_array(&body, field)?.unwrap_or_default() {
            let item = item.as_object().ok_or_else(|| {
                EmulatorError::validation(format!("{field} items must be objects"))
            })?;
            let name = fields::req_str(item, "name")
                .map_err(|_| EmulatorError::validation(format!("{field}[].name is required")))?;
            discovered.push((
                name,
                kind,
                fields::nullable_str(item, "description"),
                item.get("input_schema")
                    .cloned()
                    .unwrap_or(json!({"type": "object"})),
            ));
        }
    }
    let error = fields::opt_str(&body, "error")?;
    let mut store = lock(&state.store);
    let record = store.find_mut(&key).ok_or_else(|| missing(&state, &key))?;
    let at = now();
    if let Some(error) = error {
        record
            .metadata
            .insert("sync_status".to_owned(), json!("failed"));
        record
            .metadata
            .insert("sync_error".to_owned(), json!(error));
    } else {
        let previous = std::mem::take(&mut record.capabilities);
        record.capabilities = discovered
            .into_iter()
            .map(|(name, kind, description, input_schema)| {
                let before = previous.iter().find(|c| c.name == name && c.kind == kind);
                Capability {
                    enabled: before.is_none_or(|c| c.enabled),
                    created_at: before.map_or_else(|| at.clone(), |c| c.created_at.clone()),
                    last_updated_at: at.clone(),
                    name,
                    kind: kind.to_owned(),
                    description,
                    input_schema,
                }
            })
            .collect();
        for (field, default) in [
            ("server_name", json!(record.slug)),
            ("server_version", json!("1.0.0")),
        ] {
            let value = body.get(field).cloned().unwrap_or(default);
            record.metadata.insert(field.to_owned(), value);
        }
        record
            .metadata
            .insert("title".to_owned(), json!(record.name));
        record
            .metadata
            .insert("protocol_version".to_owned(), json!("2025-06-18"));
        record
            .metadata
            .insert("sync_status".to_owned(), json!("synced"));
        record.metadata.insert("sync_error".to_owned(), Value::Null);
    }
    record
        .metadata
        .insert("last_synced_at".to_owned(), json!(at));
    Ok(Json(Value::Object(record.metadata.clone())))
}
