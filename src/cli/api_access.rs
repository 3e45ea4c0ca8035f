//! `aigw api integrations …` and `aigw api providers …`: the organisation's upstream credentials
//! (with their workspace and model access) and the workspaces' providers on top of them. Reads
//! print keys and credentials masked as the API masks them; a provider read's credential
//! material (`key`, `model_config`) prints as `(withheld)`.

use clap::Subcommand;

use aigw::api::{
    Client, CreateIntegrationRequest, CreateProviderRequest, IntegrationsListQuery,
    ProvidersListQuery, UpdateIntegrationRequest, UpdateModelsRequest, UpdateProviderRequest,
    UpdateWorkspacesRequest,
};

use super::api::{BodyArg, print, print_empty, read_body};

#[derive(Subcommand)]
pub(super) enum IntegrationsCommand {
    /// List every integration (all pages; keys masked).
    List {
        /// Only those this workspace may use.
        #[arg(long)]
        workspace_id: Option<String>,
        /// workspace, organisation or all.
        #[arg(long = "type")]
        integration_type: Option<String>,
    },
    /// Retrieve an integration by UUID or slug (key and credentials masked).
    Get { id: String },
    /// Create an integration (send `"create_default_provider": false` to keep the API from
    /// making a provider in each workspace it is enabled for).
    Create(BodyArg),
    /// Update an integration's name, key, description, configurations (sent whole), secret
    /// mappings or pricing adjustments.
    Update {
        id: String,
        #[command(flatten)]
        body: BodyArg,
    },
    /// Delete an integration.
    Delete {
        id: String,
        /// The numeric TSG id the live API takes as `?organisation_id=`.
        #[arg(long)]
        organisation_id: Option<String>,
    },
    /// List the workspace access rows (disabled ones included).
    Workspaces { id: String },
    /// Merge workspace access rows (`{"workspaces": [{"id", "enabled"}]}`); a row is disabled
    /// with `"enabled": false`, never deleted.
    UpdateWorkspaces {
        id: String,
        #[command(flatten)]
        body: BodyArg,
    },
    /// List the models and whether each is enabled.
    Models { id: String },
    /// Merge model access per slug (`{"models": [{"slug", "enabled"}]}`).
    UpdateModels {
        id: String,
        #[command(flatten)]
        body: BodyArg,
    },
    /// Delete custom models (built-in ones can only be disabled).
    DeleteModels {
        id: String,
        /// Model slugs; repeatable.
        #[arg(long = "slug", required = true)]
        slugs: Vec<String>,
    },
}

#[derive(Subcommand)]
pub(super) enum ProvidersCommand {
    /// List every provider (all pages).
    List {
        #[arg(long)]
        workspace_id: Option<String>,
    },
    /// Retrieve a provider by UUID or slug (credential material withheld).
    Get {
        id: String,
        #[arg(long)]
        workspace_id: Option<String>,
    },
    /// Create a provider on an integration enabled for its workspace.
    Create(BodyArg),
    /// Update a provider's name, note, usage limits, expiry, or reset its usage.
    Update {
        id: String,
        #[arg(long)]
        workspace_id: Option<String>,
        #[command(flatten)]
        body: BodyArg,
    },
    /// Delete a provider for good.
    Delete {
        id: String,
        #[arg(long)]
        workspace_id: Option<String>,
    },
}

pub(super) async fn integrations(client: &Client, cmd: IntegrationsCommand) -> anyhow::Result<()> {
    let api = client.integrations();
    match cmd {
        IntegrationsCommand::List {
            workspace_id,
            integration_type,
        } => {
            let query = IntegrationsListQuery {
                workspace_id,
                integration_type,
                ..Default::default()
            };
            let rows: Vec<_> = api
                .list(&query)
                .await?
                .into_iter()
                .map(|i| i.with_configurations_hidden())
                .collect();
            print(&rows)
        }
        IntegrationsCommand::Get { id } => print(&api.get(&id).await?.with_configurations_hidden()),
        IntegrationsCommand::Create(body) => {
            let req: CreateIntegrationRequest = read_body(&body.file)?;
            print(&api.create(&req).await?)
        }
        IntegrationsCommand::Update { id, body } => {
            let req: UpdateIntegrationRequest = read_body(&body.file)?;
            api.update(&id, &req).await?;
            print_empty()
        }
        IntegrationsCommand::Delete {
            id,
            organisation_id,
        } => {
            api.delete(&id, organisation_id.as_deref()).await?;
            print_empty()
        }
        IntegrationsCommand::Workspaces { id } => print(&api.workspaces(&id).await?),
        IntegrationsCommand::UpdateWorkspaces { id, body } => {
            let req: UpdateWorkspacesRequest = read_body(&body.file)?;
            api.update_workspaces(&id, &req).await?;
            print_empty()
        }
        IntegrationsCommand::Models { id } => print(&api.models(&id).await?),
        IntegrationsCommand::UpdateModels { id, body } => {
            let req: UpdateModelsRequest = read_body(&body.file)?;
            api.update_models(&id, &req).await?;
            print_empty()
        }
        IntegrationsCommand::DeleteModels { id, slugs } => {
            api.delete_models(&id, &slugs).await?;
            print_empty()
        }
    }
}

pub(super) async fn providers(client: &Client, cmd: ProvidersCommand) -> anyhow::Result<()> {
    let api = client.providers();
    match cmd {
        ProvidersCommand::List { workspace_id } => {
            let query = ProvidersListQuery {
                workspace_id,
                ..Default::default()
            };
            print(&api.list(&query).await?)
        }
        ProvidersCommand::Get { id, workspace_id } => {
            print(&api.get(&id, workspace_id.as_deref()).await?)
        }
        ProvidersCommand::Create(body) => {
            let req: CreateProviderRequest = read_body(&body.file)?;
            print(&api.create(&req).await?)
        }
        ProvidersCommand::Update {
            id,
            workspace_id,
            body,
        } => {
            let req: UpdateProviderRequest = read_body(&body.file)?;
            print(&api.update(&id, workspace_id.as_deref(), &req).await?)
        }
        ProvidersCommand::Delete { id, workspace_id } => {
            api.delete(&id, workspace_id.as_deref()).await?;
            print_empty()
        }
    }
}
