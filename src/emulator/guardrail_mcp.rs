//! Guardrail ↔ MCP-server mappings (FACTS-rest §7, FACTS-more §2): which MCP servers a
//! guardrail applies to, under `…/guardrails/{guardrailId}/mcp-servers` on both planes
//! (`/ai_gw/v2` and `/ai_gw/admin/v2`). The mappings live on the servers (`mcp_servers`), whose
//! detail lists them as `guardrail_mappings`; deleting a server drops its mappings.
//!
//! - `GET` answers SCM's envelope `{object: "list", total, data}` (the spec says a bare array),
//!   rows `{id, guardrail_id, mcp_server_id, run_on, capability_ids, object}`.
//! - `PUT` is the bulk sync: `{mcp_servers: {<server UUID>: {run_on?, mcp_integration_
//!   capability_ids?}}}` is **the complete set** — servers left out lose the mapping — and
//!   answers `{changed, added, updated, removed, object}`. `run_on` defaults to `[input,
//!   output]`, at least one of them; each server must exist (400 otherwise).
//! - `PUT …/mcp-servers/{mcpServerId}` upserts one and answers `{map_id, object}`.
//! - A missing guardrail answers as the guardrail routes do (403).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use axum::{
    Json, Router,
    body::Bytes,
    extract::{FromRef, Path, State},
    response::Response,
    routing::{get, put},
};
use serde_json::{Value, json};

use super::{
    common::{
        errors::{ApiResult, EmulatorError},
        fields::{self, JsonObject, Object},
        ids::new_id,
        normalise,
        state::{Common, lock},
    },
    guardrails::{self, GuardrailStore},
    mcp_servers::{GuardrailMapping, McpServerStore},
};

/// Locks are taken in the order guardrails, servers.
#[derive(Clone)]
pub struct GuardrailMcpState {
    pub common: Arc<Common>,
    pub guardrails: Arc<Mutex<GuardrailStore>>,
    pub servers: Arc<Mutex<McpServerStore>>,
}

pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    GuardrailMcpState: FromRef<S>,
{
    let mut router = Router::new();
    for plane in ["/ai_gw/v2", "/ai_gw/admin/v2"] {
        router = router
            .route(
                &format!("{plane}/guardrails/{{guardrailId}}/mcp-servers"),
                get(list).put(sync),
            )
            .route(
                &format!("{plane}/guardrails/{{guardrailId}}/mcp-servers/{{mcpServerId}}"),
                put(upsert),
            );
    }
    router
}

fn guardrail_id(state: &GuardrailMcpState, key: &str) -> ApiResult<String> {
    lock(&state.guardrails)
        .id_of(key)
        .ok_or_else(|| guardrails::missing(key))
}

/// `run_on` and `mcp_integration_capability_ids` of one server's entry.
fn entry(value: &Value, at: &str) -> ApiResult<(Vec<String>, Vec<String>)> {
    let empty = Object::new();
    let item = match value {
        Value::Null => &empty,
        Value::Object(item) => item,
        _ => {
            return Err(EmulatorError::validation(format!("{at} must be an object")));
        }
    };
    let run_on = fields::opt_str_list(item, "run_on")?
        .unwrap_or_else(|| vec!["input".to_owned(), "output".to_owned()]);
    if run_on.is_empty() || run_on.iter().any(|r| r != "input" && r != "output") {
        return Err(EmulatorError::validation(format!(
            "{at}.run_on must be one or both of input, output"
        )));
    }
    let capabilities =
        fields::opt_str_list(item, "mcp_integration_capability_ids")?.unwrap_or_default();
    if capabilities.iter().any(|c| !fields::is_uuid(c)) {
        return Err(EmulatorError::validation(format!(
            "{at}.mcp_integration_capability_ids must be UUIDs"
        )));
    }
    Ok((run_on, capabilities))
}

/// `GET …/guardrails/{id}/mcp-servers` → `{object: "list", total, data}`.
async fn list(
    State(state): State<GuardrailMcpState>,
    Path(key): Path<String>,
) -> ApiResult<Response> {
    let guardrail = guardrail_id(&state, &key)?;
    let data = lock(&state.servers).mappings_of(&guardrail);
    let body = json!({"object": "list", "total": data.len(), "data": data});
    Ok(normalise::reply(&body, state.common.faults().normalise))
}

/// `PUT …/guardrails/{id}/mcp-servers`: the complete set.
async fn sync(
    State(state): State<GuardrailMcpState>,
    Path(key): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let servers = fields::req_object(&body, "mcp_servers")?;
    let mut wanted = HashMap::new();
    for (server, value) in &servers {
        if !fields::is_uuid(server) {
            return Err(EmulatorError::validation(format!(
                "mcp_servers keys must be MCP server UUIDs, got {server}"
            )));
        }
        wanted.insert(
            server.clone(),
            entry(value, &format!("mcp_servers.{server}"))?,
        );
    }
    let guardrail = guardrail_id(&state, &key)?;
    let mut store = lock(&state.servers);
    if let Some(unknown) = wanted.keys().find(|s| store.find(s).is_none()) {
        return Err(EmulatorError::validation(format!(
            "mcp_servers names {unknown}, which is not an MCP server"
        )));
    }
    let (mut added, mut updated, mut removed) = (0u64, 0u64, 0u64);
    for server in store.values_mut() {
        let at = server
            .guardrail_mappings
            .iter()
            .position(|m| m.guardrail_id == guardrail);
        match (wanted.remove(&server.key.id), at) {
            (Some((run_on, capability_ids)), Some(at)) => {
                let mapping = &mut server.guardrail_mappings[at];
                if mapping.run_on != run_on || mapping.capability_ids != capability_ids {
                    mapping.run_on = run_on;
                    mapping.capability_ids = capability_ids;
                    updated += 1;
                }
            }
            (Some((run_on, capability_ids)), None) => {
                server.guardrail_mappings.push(GuardrailMapping {
                    id: new_id(),
                    guardrail_id: guardrail.clone(),
                    run_on,
                    capability_ids,
                });
                added += 1;
            }
            (None, Some(at)) => {
                server.guardrail_mappings.remove(at);
                removed += 1;
            }
            (None, None) => {}
        }
    }
    Ok(Json(json!({
        "changed": added + updated + removed > 0, "added": added, "updated": updated,
        "removed": removed, "object": "guardrail-mcp-server-sync",
    })))
}

/// `PUT …/guardrails/{id}/mcp-servers/{serverId}` → `{map_id, object}`.
async fn upsert(
    State(state): State<GuardrailMcpState>,
    Path((key, server_key)): Path<(String, String)>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let body = if body.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        Value::Object(fields::parse_object(&body)?)
    };
    let (run_on, capability_ids) = entry(&body, "body")?;
    let guardrail = guardrail_id(&state, &key)?;
    let mut store = lock(&state.servers);
    let server = store
        .find_mut(&server_key)
        .ok_or_else(|| state.common.missing(&format!("MCP server {server_key}")))?;
    let map_id = match server
        .guardrail_mappings
        .iter_mut()
        .find(|m| m.guardrail_id == guardrail)
    {
        Some(mapping) => {
            mapping.run_on = run_on;
            mapping.capability_ids = capability_ids;
            mapping.id.clone()
        }
        None => {
            let mapping = GuardrailMapping {
                id: new_id(),
                guardrail_id: guardrail,
                run_on,
                capability_ids,
            };
            let id = mapping.id.clone();
            server.guardrail_mappings.push(mapping);
            id
        }
    };
    Ok(Json(
        json!({"map_id": map_id, "object": "guardrail-mcp-server-mapping"}),
    ))
}
