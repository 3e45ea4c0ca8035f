//! `aigw export` of a workspace's MCP servers: each as an McpServer that adopts it by slug,
//! names its integration by id and states its default user access, so applying the export
//! writes nothing. Per workspace only (`--workspace-id`), as providers are: a server belongs
//! to one, and the manifest must name it.

use super::{Builder, GitopsError, listed};
use crate::api::{self, Client, McpServersListQuery};
use crate::resources::common::DeletionPolicy;
use crate::resources::mcp_server::{DefaultUserAccess, McpServer, McpServerSpec};

/// Every MCP server of `workspace`, with its default user access.
pub(super) async fn export_mcp_servers(
    api: &Client,
    workspace: Option<&str>,
    out: &mut Builder<'_>,
) -> Result<(), GitopsError> {
    let query = McpServersListQuery {
        workspace_id: workspace.map(str::to_string),
        ..Default::default()
    };
    let servers = listed("MCP servers", api.mcp_servers().list(&query)).await?;
    let what = "MCP servers: exported per workspace only";
    let Some(workspace) = out.per_workspace(workspace, servers.len(), what) else {
        return Ok(());
    };
    for row in &servers {
        let access = api.mcp_servers().user_access(&row.id).await.map_err(|e| {
            GitopsError::api(
                format!("failed to read the user access of MCP server {}", row.slug),
                e,
            )
        })?;
        out.mcp_server(row, workspace, &access);
    }
    Ok(())
}

impl Builder<'_> {
    /// The server as an McpServer of `workspace` adopting it by slug.
    fn mcp_server(
        &mut self,
        remote: &api::McpServer,
        workspace: &str,
        access: &api::McpUserAccess,
    ) {
        let Some(integration) = remote.mcp_integration_id.clone() else {
            self.export.skipped.push(format!(
                "MCP server {}: its read names no integration",
                remote.slug
            ));
            return;
        };
        let default_user_access = match access.default_user_access.as_str() {
            "allow" => Some(DefaultUserAccess::Allow),
            "deny" => Some(DefaultUserAccess::Deny),
            _ => None,
        };
        let Some(metadata) = self.meta("McpServer", &remote.name, &remote.slug, &remote.id) else {
            return;
        };
        let spec = McpServerSpec {
            slug: Some(remote.slug.clone()),
            name: remote.name.clone(),
            description: remote.description.clone().filter(|d| !d.is_empty()),
            integration_ref: None,
            integration_id: Some(integration),
            workspace_id: Some(workspace.to_string()),
            workspace_ref: None,
            default_user_access,
            user_access: Vec::new(),
            deletion_policy: DeletionPolicy::Orphan,
            managed: Default::default(),
        };
        let object = McpServer {
            metadata,
            spec,
            status: None,
        };
        let header = format!(
            "# Adopts MCP server {} as it is (per-user access rows left as the API has them).\n",
            remote.slug
        );
        if let Err(e) = self.push("McpServer", "mcpserver", &object.metadata, &object, header) {
            self.export
                .skipped
                .push(format!("MCP server {}: {e}", remote.slug));
        }
    }
}
