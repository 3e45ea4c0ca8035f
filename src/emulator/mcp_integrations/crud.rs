//! The MCP integration routes that write and read the integration itself and its workspace
//! access rows (see the module comment of `mcp_integrations`).

use std::collections::{HashMap, HashSet};

use axum::{
    Json,
    extract::{Path, Query, State},
    response::Response,
};
use serde_json::{Value, json};

use super::store::{McpIntegrationRecord, McpIntegrationsState, OBJECT, pending_metadata};
use crate::emulator::{
    common::{
        access::{self, WorkspaceAccess},
        clock::{now, touched},
        errors::{ApiResult, EmulatorError},
        fields::{self, IdRule, JsonObject, Object},
        mappings, normalise, policy_fields,
        records::{self, Key, reply_one},
        state::lock,
    },
    integrations::valid_slug,
    workspaces::WorkspacesState,
};

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
pub(super) async fn create(
    State(state): State<McpIntegrationsState>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let name = fields::req_str(&body, "name")?;
    let url = url(&body, true)?.unwrap_or_default();
    let auth_type = policy_fields::required_enum(&body, "auth_type", AUTH_TYPES)?;
    let transport = policy_fields::required_enum(&body, "transport", TRANSPORTS)?;
    IdRule::TsgOrUuid.opt_field(&body, "organisation_id")?;
    let workspace = IdRule::UuidOrSlug.opt_nonempty(&body, "workspace_id")?;
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
    let slug = store.claim_slug(slug, &name)?;
    let at = now();
    let record = McpIntegrationRecord {
        key: Key::created(&state, slug),
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
    Ok(Json(store.insert_receipt(record, OBJECT)))
}

/// `GET …/mcp-integrations` → `{object: "list", total, has_more, data}`: `type`,
/// `workspace_id`, `search`, `page_size` (1–1000), `current_page`.
pub(super) async fn list(
    State(state): State<McpIntegrationsState>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    if query.contains_key("organisation_id") {
        return Err(EmulatorError::validation(
            "organisation_id is not a query parameter",
        ));
    }
    let scope = policy_fields::ScopeFilter::parse(&query)?;
    let (page_size, current_page) = policy_fields::policy_page(&query)?;
    if page_size > 1000 {
        return Err(EmulatorError::validation("page_size must be 1 to 1000"));
    }
    let faults = state.faults();
    let admits = |r: &McpIntegrationRecord| {
        scope.admits(r.workspace_id.as_ref())
            && query
                .get("workspace_id")
                .is_none_or(|ws| r.enabled_for(&[ws.as_str()]))
            && policy_fields::searched(&query, &r.name)
    };
    let mut body = lock(&state.store).list_page(
        &faults,
        (page_size, current_page),
        admits,
        McpIntegrationRecord::row,
    );
    let total = body["total"].as_u64().unwrap_or_default();
    body["has_more"] = json!((((current_page + 1) * page_size) as u64) < total);
    Ok(normalise::reply(&body, faults.normalise))
}

pub(super) async fn read(
    State(state): State<McpIntegrationsState>,
    Path(key): Path<String>,
) -> ApiResult<Response> {
    reply_one(&state, &state.store, &key, McpIntegrationRecord::detail)
}

/// `PUT …/mcp-integrations/{id}` → `{}`: `name`, `description`, `configurations` (replaced
/// whole), `url`, `auth_type`, `transport`, `secret_mappings`; another `slug` or `workspace_id`
/// is 400.
pub(super) async fn update(
    State(state): State<McpIntegrationsState>,
    Path(key): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let name = fields::opt_name(&body)?;
    let description = fields::clearable_str(&body, "description", usize::MAX)?;
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
    let record = store.get_mut(&state, &key)?;
    fields::reject_changes(
        &body,
        &[
            ("slug", json!(record.key.slug)),
            ("workspace_id", json!(record.workspace_id)),
        ],
        "create another MCP integration",
    )?;
    fields::require_update(changes)?;
    fields::set(&mut record.name, name);
    fields::set(&mut record.description, description);
    if let Some(configurations) = configurations {
        record.configurations = configurations;
        record.configuration_writes += 1;
    }
    fields::set(&mut record.url, new_url);
    fields::set(&mut record.auth_type, auth_type);
    fields::set(&mut record.transport, transport);
    if let Some(mappings) = mappings {
        record.secret_mappings = Some(mappings);
    }
    record.last_updated_at = touched(&record.last_updated_at);
    Ok(Json(json!({})))
}

pub(super) async fn delete(
    State(state): State<McpIntegrationsState>,
    Path(key): Path<String>,
) -> ApiResult<Json<Value>> {
    lock(&state.store).take(&state, &key)?;
    Ok(Json(json!({})))
}

/// `GET …/workspaces`: the legacy shape, or with `?version=` the versioned one.
pub(super) async fn workspaces(
    State(state): State<McpIntegrationsState>,
    Path(key): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    reply_one(&state, &state.store, &key, |record| {
        let rows: Vec<Value> = record.rows.iter().map(WorkspaceAccess::row).collect();
        if query.contains_key("version") {
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
        }
    })
}

/// `PUT …/workspaces` → `{}`. A row names its workspace by UUID or slug and is kept under the
/// UUID (an admin key's rows read back with UUIDs, FACTS-rest §5); a key no workspace has is kept
/// as sent.
pub(super) async fn update_workspaces(
    State(state): State<McpIntegrationsState>,
    State(workspaces): State<WorkspacesState>,
    Path(key): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let items = fields::req_array(&body, "workspaces")?;
    let mut rows = Vec::with_capacity(items.len());
    let mut seen = HashSet::new();
    let known = lock(&workspaces.workspaces);
    for item in &items {
        let (_, sent, enabled) = fields::access_item(item)?;
        let id = known.find(&sent).map_or(sent, |w| w.key.id.clone());
        if !seen.insert(id.clone()) {
            return Err(EmulatorError::validation(format!(
                "workspaces names {id} twice"
            )));
        }
        rows.push((id, enabled));
    }
    drop(known);
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
    let record = store.get_mut(&state, &key)?;
    if overriding {
        access::disable_unlisted(&mut record.rows, |id| seen.contains(id));
    }
    for (id, enabled) in rows {
        let row = records::upsert(
            &mut record.rows,
            |r| r.id == id,
            || WorkspaceAccess::new(id.clone(), false),
        );
        row.enabled = enabled;
        row.touch();
    }
    if let Some(global) = global {
        record.global_access = Some(global).filter(|g| !g.is_null());
    }
    Ok(Json(json!({})))
}
