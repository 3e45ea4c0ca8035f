//! MCP integration capabilities and metadata: what the gateway discovered upstream, the
//! toggles on it, and the control route that plays the discovery (see the module comment of
//! `mcp_integrations`).

use std::collections::HashMap;

use axum::{
    Json,
    extract::{Path, Query, State},
    response::Response,
};
use serde_json::{Map, Value, json};

use super::store::{Capability, KINDS, McpIntegrationsState};
use crate::emulator::common::{
    clock::{now, touched},
    errors::{ApiResult, EmulatorError},
    fields::{self, JsonObject, Object},
    policy_fields, records,
    state::lock,
};

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
    let data = records::page(matching, page_size, page - 1);
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
    fields::items("capabilities", &items, |item| {
        let name = fields::item_str("capabilities", item, "name")?;
        let kind = policy_fields::required_enum(item, "type", &["tool", "prompt", "resource"])
            .map_err(|e| EmulatorError::validation(format!("capabilities[].{e}")))?;
        let enabled = fields::item_bool("capabilities", item, "enabled")?;
        Ok((name, kind, enabled))
    })
}

/// The error for a capability the integration has not discovered.
pub fn undiscovered(kind: &str, name: &str) -> EmulatorError {
    EmulatorError::validation(format!(
        "{kind} {name} has not been discovered on this MCP integration"
    ))
}

pub(super) async fn capabilities(
    State(state): State<McpIntegrationsState>,
    Path(key): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    records::try_reply_one(&state, &state.store, &key, |record| {
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
        capabilities_page(&query, &all, items)
    })
}

/// `PUT …/capabilities` → `{success: true}`.
pub(super) async fn update_capabilities(
    State(state): State<McpIntegrationsState>,
    Path(key): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let updates = capability_updates(&body)?;
    let mut store = lock(&state.store);
    let record = store.get_mut(&state, &key)?;
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

pub(super) async fn metadata(
    State(state): State<McpIntegrationsState>,
    Path(key): Path<String>,
) -> ApiResult<Json<Value>> {
    let store = lock(&state.store);
    let record = store.get(&state, &key)?;
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
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let mut discovered = Vec::new();
    for (field, kind) in [
        ("tools", "tool"),
        ("prompts", "prompt"),
        ("resources", "resource"),
    ] {
        for item in fields::opt_array(&body, field)?.unwrap_or_default() {
            let item = fields::array_item(field, &item)?;
            let name = fields::item_str(field, item, "name")?;
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
    let record = store.get_mut(&state, &key)?;
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
            ("server_name", json!(record.key.slug)),
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
