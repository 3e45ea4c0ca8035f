//! `aigw plan` for an McpServer: the server its live resource recorded, else the one its slug
//! names, compared on what a PUT can change (name, description) and on what it cannot (slug,
//! workspace, integration: a conflict). The workspace comes from the server's list row (the
//! detail has none). User access is the operator's to merge: the plan says what the spec sets.

use serde_json::json;

use super::GitopsError;
use super::plan::{Entry, Live, Planner, compared_unless_fixed, creating, to_json};
use crate::api::McpServersListQuery;
use crate::resources::McpServer;
use crate::resources::guardrail::GuardrailMcpServer;

impl Planner<'_> {
    pub(super) async fn mcp_server(self, server: &McpServer) -> Result<Entry, GitopsError> {
        let spec = &server.spec;
        let desired = to_json(spec);
        let get = async |key: &str| self.api.mcp_servers().get(key).await;
        let (status, found) = self.counterpart(server, get).await?;
        let Some((counterpart, mut remote)) = found else {
            let fields = ["slug", "integrationRef", "integrationId", "userAccess"];
            return Ok(creating(&desired, &fields));
        };
        let query = McpServersListQuery {
            ids: vec![remote.id.clone()],
            ..Default::default()
        };
        let rows = self.api.mcp_servers().list(&query).await.map_err(|e| {
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
        let fields = (conflicts, spec.update_for(&remote).0);
        let what = ("MCP server", "McpServer");
        let planned = compared_unless_fixed(counterpart, fields, (&current, &desired), what);
        Ok(planned.identified(&remote.id))
    }
}

/// A guardrail's MCP server mappings as the operator sends them: each `mcpServerRef` resolved
/// to the id its McpServer recorded (read with the kubeconfig, as the operator reads its
/// cache; a Guardrail's own namespace when the reference names none). A reference the plan
/// cannot resolve (no cluster access, the McpServer absent or without a server yet) stays as
/// written: the operator waits for it (`McpServerNotReady`) before it syncs the set.
pub(super) async fn resolved_mappings(
    live: Option<&Live>,
    namespace: Option<&str>,
    servers: &[GuardrailMcpServer],
) -> Result<Vec<GuardrailMcpServer>, GitopsError> {
    let mut resolved = Vec::with_capacity(servers.len());
    for server in servers {
        let mut server = server.clone();
        let named = server.mcp_server_ref.as_ref();
        let at = named.and_then(|r| Some((r.name.clone(), r.namespace.as_deref().or(namespace)?)));
        if let (Some(live), Some((name, namespace))) = (live, at) {
            let read = kube::Api::<McpServer>::namespaced(live.client.clone(), namespace)
                .get_opt(&name)
                .await
                .map_err(|e| {
                    GitopsError::kube(format!("failed to read McpServer {namespace}/{name}"), e)
                })?;
            if let Some(id) = read.and_then(|s| s.status?.id).filter(|id| !id.is_empty()) {
                server.id = Some(id);
                server.mcp_server_ref = None;
            }
        }
        resolved.push(server);
    }
    Ok(resolved)
}
