//! `aigw plan` for an McpServer: the server its live resource recorded, else the one its slug
//! names, compared on what a PUT can change (name, description) and on what it cannot (slug,
//! workspace, integration: a conflict). The workspace comes from the server's list row (the
//! detail has none). User access is the operator's to merge: the plan says what the spec sets.

use serde_json::json;

use super::GitopsError;
use super::plan::{
    Action, Counterpart, Entry, Live, compared, create_changes, entry, field_changes, found,
    live_object, to_json,
};
use crate::api::{Client, McpServersListQuery};
use crate::resources::McpServer;

pub(super) async fn plan_mcp_server(
    api: &Client,
    live: Option<&Live>,
    server: &McpServer,
) -> Result<Entry, GitopsError> {
    let spec = &server.spec;
    let desired = to_json(spec);
    let managed = match live {
        Some(live) => live_object(live, server).await?,
        None => None,
    };
    let status = managed.and_then(|m| m.status).unwrap_or_default();
    let counterpart = status
        .id
        .clone()
        .or(spec.slug.clone())
        .map(|key| Counterpart {
            key,
            adopting: status.id.is_none(),
            from_spec: status.id.is_none(),
        });
    let remote = match &counterpart {
        Some(c) => found(
            &format!("MCP server {}", c.key),
            api.mcp_servers().get(&c.key).await,
        )?,
        None => None,
    };
    let (Some(counterpart), Some(mut remote)) = (counterpart, remote) else {
        let fields = ["slug", "integrationRef", "integrationId", "userAccess"];
        return Ok(entry(
            Action::Create,
            None,
            create_changes(&desired, &fields),
            None,
        ));
    };
    let query = McpServersListQuery {
        ids: vec![remote.id.clone()],
        ..Default::default()
    };
    let rows = api.mcp_servers().list(&query).await.map_err(|e| {
        GitopsError::api(format!("failed to list MCP server {}", counterpart.key), e)
    })?;
    remote.workspace_id = rows
        .into_iter()
        .find(|r| r.id == remote.id)
        .and_then(|r| r.workspace_id);
    // What the integration is known by: the spec's id, or what the live resource recorded.
    let known: Vec<&str> = spec
        .integration_id
        .iter()
        .chain(status.integration_id.iter())
        .map(String::as_str)
        .collect();
    let conflicts = spec.immutable_conflicts(&remote, &known);
    let current = json!({"name": remote.name, "description": remote.description,
        "slug": remote.slug, "workspaceId": remote.workspace_id,
        "integration": remote.mcp_integration_id});
    let mut fields = conflicts.clone();
    fields.extend(spec.update_for(&remote).0);
    let changes = field_changes(&fields, &current, &desired);
    let planned = match conflicts.is_empty() {
        true => compared(&counterpart, changes),
        false => entry(
            Action::Conflict,
            Some(counterpart.key),
            changes,
            Some(format!(
                "the remote MCP server has a different {} and the API cannot change it; create a new McpServer instead",
                conflicts.join(", ")
            )),
        ),
    };
    Ok(planned.identified(&remote.id))
}
