//! `aigw api secret-references …`, `aigw api mcp-integrations …`, `aigw api mcp-servers …` and
//! the guardrail ↔ MCP-server mappings under `aigw api guardrails …`. Reads print a secret
//! reference's `auth_config` and an MCP integration's `configurations` hidden (only public
//! settings and the API's own masks show), whatever the API sent.

use clap::Subcommand;

use aigw::api::{
    Client, GuardrailPlane, McpIntegration, McpServerMappingTarget, McpServersListQuery,
    SecretReference, SecretReferencesListQuery, SyncMcpServerMappingsRequest,
};

use super::api::{BodyArg, IdBody, done, print, print_receipt, print_rows};

#[derive(Subcommand)]
pub(super) enum SecretReferencesCommand {
    /// List secret references (all pages).
    List {
        /// aws_sm, azure_kv or hashicorp_vault.
        #[arg(long)]
        manager_type: Option<String>,
        /// Only names containing this.
        #[arg(long)]
        search: Option<String>,
    },
    /// Retrieve one by UUID or slug (`auth_config` hidden but for public settings and masks).
    Get { id: String },
    /// Create one (`{"name", "manager_type", "auth_config", "secret_path", …}`).
    Create(BodyArg),
    /// Update one (`auth_config` is merged into the stored one).
    Update(IdBody),
    /// Delete one (refused while an integration maps a field to it).
    Delete { id: String },
}

#[derive(Subcommand)]
pub(super) enum McpIntegrationsCommand {
    /// List MCP integrations (all pages; configurations hidden).
    List,
    /// Retrieve one by UUID or slug (configurations hidden).
    Get { id: String },
    /// Create one (`{"name", "url", "auth_type", "transport", …}`).
    Create(BodyArg),
    /// Update one (`configurations` is sent whole).
    Update(IdBody),
    /// Delete one.
    Delete { id: String },
    /// List the workspace access rows (disabled ones stay listed).
    Workspaces { id: String },
    /// Merge workspace access rows (`{"workspaces": [{"id", "enabled"}]}`); a row is disabled,
    /// never deleted.
    UpdateWorkspaces(IdBody),
    /// List the discovered capabilities (all pages).
    Capabilities {
        id: String,
        /// tool, prompt, resource or resource_template.
        #[arg(long = "type")]
        kind: Option<String>,
    },
    /// Toggle discovered capabilities (`{"capabilities": [{"name", "type", "enabled"}]}`).
    UpdateCapabilities(IdBody),
    /// The sync metadata (server identity, `sync_status`, `sync_error`).
    Metadata { id: String },
}

#[derive(Subcommand)]
pub(super) enum McpServersCommand {
    /// List MCP servers (all pages).
    List {
        /// Workspace UUID or slug.
        #[arg(long)]
        workspace_id: Option<String>,
        /// Only these server ids; repeatable.
        #[arg(long = "id")]
        ids: Vec<String>,
    },
    /// Retrieve one by UUID or slug.
    Get { id: String },
    /// Create one (`{"name", "mcp_integration_id", "workspace_id", …}`).
    Create(BodyArg),
    /// Update one's name or description.
    Update(IdBody),
    /// Delete one.
    Delete { id: String },
    /// Run the connectivity test (SCM answers 403).
    Test { id: String },
    /// List the capabilities as this server sees them (all pages).
    Capabilities {
        id: String,
        #[arg(long = "type")]
        kind: Option<String>,
    },
    /// Toggle capabilities on this server.
    UpdateCapabilities(IdBody),
    /// The default user access and per-user overrides.
    UserAccess { id: String },
    /// Merge per-user access (`{"user_access": [{"user_id", "enabled"}], "default_user_access"}`).
    UpdateUserAccess(IdBody),
    /// List users' connections.
    Connections { id: String },
    /// End users' connections (SCM answers 403).
    DeleteConnections { id: String },
}

/// The guardrail ↔ MCP-server commands of `aigw api guardrails`.
pub(super) enum GuardrailMcp {
    List,
    Sync(SyncMcpServerMappingsRequest),
    Upsert(String, McpServerMappingTarget),
}

pub(super) async fn guardrail_mcp(
    client: &Client,
    guardrail: &str,
    organisation: bool,
    cmd: GuardrailMcp,
) -> anyhow::Result<()> {
    let plane = match organisation {
        true => GuardrailPlane::Organisation,
        false => GuardrailPlane::Workspace,
    };
    let api = client.guardrail_mcp_servers(plane);
    match cmd {
        GuardrailMcp::List => print(&api.list(guardrail).await?),
        GuardrailMcp::Sync(req) => print(&api.sync(guardrail, &req).await?),
        GuardrailMcp::Upsert(server, target) => {
            print(&api.upsert(guardrail, &server, &target).await?)
        }
    }
}

pub(super) async fn secret_references(
    client: &Client,
    cmd: SecretReferencesCommand,
) -> anyhow::Result<()> {
    let api = client.secret_references();
    match cmd {
        SecretReferencesCommand::List {
            manager_type,
            search,
        } => {
            let query = SecretReferencesListQuery {
                manager_type,
                search,
                ..Default::default()
            };
            print_rows(
                api.list(&query).await?,
                SecretReference::with_auth_config_hidden,
            )
        }
        SecretReferencesCommand::Get { id } => {
            print(&api.get(&id).await?.with_auth_config_hidden())
        }
        SecretReferencesCommand::Create(body) => print_receipt(&api.create(&body.read()?).await?),
        SecretReferencesCommand::Update(IdBody { id, body }) => {
            done(api.update(&id, &body.read()?)).await
        }
        SecretReferencesCommand::Delete { id } => done(api.delete(&id)).await,
    }
}

pub(super) async fn mcp_integrations(
    client: &Client,
    cmd: McpIntegrationsCommand,
) -> anyhow::Result<()> {
    let api = client.mcp_integrations();
    match cmd {
        McpIntegrationsCommand::List => print_rows(
            api.list().await?,
            McpIntegration::with_configurations_hidden,
        ),
        McpIntegrationsCommand::Get { id } => {
            print(&api.get(&id).await?.with_configurations_hidden())
        }
        McpIntegrationsCommand::Create(body) => print_receipt(&api.create(&body.read()?).await?),
        McpIntegrationsCommand::Update(IdBody { id, body }) => {
            done(api.update(&id, &body.read()?)).await
        }
        McpIntegrationsCommand::Delete { id } => done(api.delete(&id)).await,
        McpIntegrationsCommand::Workspaces { id } => print(&api.workspaces(&id).await?),
        McpIntegrationsCommand::UpdateWorkspaces(IdBody { id, body }) => {
            done(api.update_workspaces(&id, &body.read()?)).await
        }
        McpIntegrationsCommand::Capabilities { id, kind } => {
            print(&api.capabilities(&id, kind.as_deref()).await?)
        }
        McpIntegrationsCommand::UpdateCapabilities(IdBody { id, body }) => {
            done(api.update_capabilities(&id, &body.read()?)).await
        }
        McpIntegrationsCommand::Metadata { id } => print(&api.metadata(&id).await?),
    }
}

pub(super) async fn mcp_servers(client: &Client, cmd: McpServersCommand) -> anyhow::Result<()> {
    let api = client.mcp_servers();
    match cmd {
        McpServersCommand::List { workspace_id, ids } => {
            let query = McpServersListQuery {
                workspace_id,
                ids,
                ..Default::default()
            };
            print(&api.list(&query).await?)
        }
        McpServersCommand::Get { id } => print(&api.get(&id).await?),
        McpServersCommand::Create(body) => print(&api.create(&body.read()?).await?),
        McpServersCommand::Update(IdBody { id, body }) => {
            print(&api.update(&id, &body.read()?).await?)
        }
        McpServersCommand::Delete { id } => done(api.delete(&id)).await,
        McpServersCommand::Test { id } => print(&api.test(&id).await?),
        McpServersCommand::Capabilities { id, kind } => {
            print(&api.capabilities(&id, kind.as_deref()).await?)
        }
        McpServersCommand::UpdateCapabilities(IdBody { id, body }) => {
            done(api.update_capabilities(&id, &body.read()?)).await
        }
        McpServersCommand::UserAccess { id } => print(&api.user_access(&id).await?),
        McpServersCommand::UpdateUserAccess(IdBody { id, body }) => {
            done(api.update_user_access(&id, &body.read()?)).await
        }
        McpServersCommand::Connections { id } => print(&api.connections(&id).await?),
        McpServersCommand::DeleteConnections { id } => done(api.delete_connections(&id)).await,
    }
}
