//! `aigw api integrations …` and `aigw api providers …`: the organisation's upstream credentials
//! (with their workspace and model access) and the workspaces' providers on top of them. Reads
//! print keys and credentials masked as the API masks them; a provider read's credential
//! material (`key`, `model_config`) prints as `(withheld)`.

use clap::Subcommand;

use aigw::api::{Client, Integration, IntegrationsListQuery, ProvidersListQuery};

use super::api::{BodyArg, IdBody, done, print, print_receipt, print_rows};

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
    Update(IdBody),
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
    UpdateWorkspaces(IdBody),
    /// List the models and whether each is enabled.
    Models { id: String },
    /// Merge model access per slug (`{"models": [{"slug", "enabled"}]}`).
    UpdateModels(IdBody),
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
            print_rows(
                api.list(&query).await?,
                Integration::with_configurations_hidden,
            )
        }
        IntegrationsCommand::Get { id } => print(&api.get(&id).await?.with_configurations_hidden()),
        IntegrationsCommand::Create(body) => print_receipt(&api.create(&body.read()?).await?),
        IntegrationsCommand::Update(IdBody { id, body }) => {
            done(api.update(&id, &body.read()?)).await
        }
        IntegrationsCommand::Delete {
            id,
            organisation_id,
        } => done(api.delete(&id, organisation_id.as_deref())).await,
        IntegrationsCommand::Workspaces { id } => print(&api.workspaces(&id).await?),
        IntegrationsCommand::UpdateWorkspaces(IdBody { id, body }) => {
            done(api.update_workspaces(&id, &body.read()?)).await
        }
        IntegrationsCommand::Models { id } => print(&api.models(&id).await?),
        IntegrationsCommand::UpdateModels(IdBody { id, body }) => {
            done(api.update_models(&id, &body.read()?)).await
        }
        IntegrationsCommand::DeleteModels { id, slugs } => {
            done(api.delete_models(&id, &slugs)).await
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
        ProvidersCommand::Create(body) => print(&api.create(&body.read()?).await?),
        ProvidersCommand::Update {
            id,
            workspace_id,
            body,
        } => print(
            &api.update(&id, workspace_id.as_deref(), &body.read()?)
                .await?,
        ),
        ProvidersCommand::Delete { id, workspace_id } => {
            done(api.delete(&id, workspace_id.as_deref())).await
        }
    }
}
