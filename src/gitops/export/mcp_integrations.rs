//! `aigw export` of the organisation's MCP integrations: each as an McpIntegration that adopts
//! it by slug and states what it reads back (its enabled workspace rows included), so applying
//! the export writes nothing. `configurations` read masked: they are left as the API has them
//! and the manifest says how to manage them (a Secret and `configurationsSecretRef`).

use super::{Builder, GitopsError, listed};
use crate::api::{self, Client};
use crate::resources::common::DeletionPolicy;
use crate::resources::mcp_integration::{
    McpAuthType, McpIntegration, McpIntegrationSpec, McpTransport, McpWorkspaceAccess,
};

/// Every organisation MCP integration (a workspace's own is not the organisation's), read in
/// full with its workspace access rows.
pub(super) async fn export_mcp_integrations(
    api: &Client,
    out: &mut Builder<'_>,
) -> Result<(), GitopsError> {
    let integrations = listed("MCP integrations", api.mcp_integrations().list()).await?;
    for row in integrations.iter().filter(|i| i.workspace_id.is_none()) {
        let what = format!("MCP integration {}", row.slug);
        let remote = api
            .mcp_integrations()
            .get(&row.id)
            .await
            .map_err(|e| GitopsError::api(format!("failed to read {what}"), e))?;
        let rows = api
            .mcp_integrations()
            .workspaces(&row.id)
            .await
            .map_err(|e| GitopsError::api(format!("failed to read the workspaces of {what}"), e))?;
        out.mcp_integration(&remote, &rows);
    }
    Ok(())
}

fn auth_type(read: Option<&str>) -> Option<McpAuthType> {
    Some(match read? {
        "none" => McpAuthType::None,
        "headers" => McpAuthType::Headers,
        "oauth_auto" => McpAuthType::OauthAuto,
        _ => return None,
    })
}

fn transport(read: Option<&str>) -> Option<McpTransport> {
    Some(match read? {
        "http" => McpTransport::Http,
        "sse" => McpTransport::Sse,
        _ => return None,
    })
}

impl Builder<'_> {
    /// The integration as an McpIntegration adopting it by slug; one whose auth type or
    /// transport the spec cannot state (a read-only value such as `oauth_client_credentials`)
    /// is left out, and said so.
    fn mcp_integration(
        &mut self,
        remote: &api::McpIntegration,
        rows: &api::McpIntegrationWorkspaces,
    ) {
        if self.left_as_managed("McpIntegration", &remote.slug, &remote.id) {
            return;
        }
        let (Some(auth), Some(transport)) = (
            auth_type(remote.auth_type.as_deref()),
            transport(remote.transport.as_deref()),
        ) else {
            self.export.skipped.push(format!(
                "MCP integration {}: its auth type {:?} or transport {:?} is not one an McpIntegration can write; write its manifest by hand",
                remote.slug, remote.auth_type, remote.transport
            ));
            return;
        };
        let Some(mut metadata) = self.meta("McpIntegration", &remote.slug, &remote.id, &remote.id)
        else {
            return;
        };
        metadata.namespace = None;
        let workspaces = rows
            .workspaces
            .iter()
            .filter(|r| r.enabled)
            .map(|r| McpWorkspaceAccess {
                workspace_ref: None,
                workspace: Some(r.id.clone()),
                enabled: true,
            })
            .collect();
        let spec = McpIntegrationSpec {
            slug: Some(remote.slug.clone()),
            name: remote.name.clone(),
            description: remote.description.clone().filter(|d| !d.is_empty()),
            url: remote.url.clone().unwrap_or_default(),
            auth_type: auth,
            transport,
            configurations_secret_ref: None,
            workspaces,
            capabilities: Vec::new(),
            deletion_policy: DeletionPolicy::Orphan,
            managed: Default::default(),
        };
        let object = McpIntegration {
            metadata,
            spec,
            status: None,
        };
        let configured = remote
            .configurations
            .as_ref()
            .is_some_and(|c| c.0.as_object().is_none_or(|m| !m.is_empty()) && !c.0.is_null());
        let left = match configured {
            true => {
                "# Its configurations are left as the API has them (reads mask them): to manage them, put every field in a Secret labelled aigw.io/cluster-readable and set spec.configurationsSecretRef.\n"
            }
            false => "",
        };
        let header = format!(
            "# Adopts MCP integration {} as it is (capability toggles left as the API has them).\n{left}",
            remote.slug
        );
        if let Err(e) = self.push(
            "McpIntegration",
            "mcpintegration",
            &object.metadata,
            &object,
            header,
        ) {
            self.export
                .skipped
                .push(format!("MCP integration {}: {e}", remote.slug));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_only_enums_are_not_written() {
        assert_eq!(auth_type(Some("oauth_client_credentials")), None);
        assert_eq!(transport(Some("interactive")), None);
        assert_eq!(auth_type(Some("headers")), Some(McpAuthType::Headers));
        assert_eq!(transport(Some("sse")), Some(McpTransport::Sse));
    }
}
