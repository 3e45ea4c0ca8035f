//! `aigw api workspaces …` and `aigw api scopes …`: workspaces (reads on either plane, writes on
//! the admin plane) and the SCM IAM scopes their creation goes through. Nothing here is secret.

use clap::Subcommand;

use aigw::api::{ApiPlane, Client, IamScopeWrite, WorkspacesListQuery};

use super::api::{BodyArg, done, print};

#[derive(Subcommand)]
pub(super) enum WorkspacesCommand {
    /// List workspaces (all pages).
    List {
        /// active (the API's default) or archived.
        #[arg(long)]
        status: Option<String>,
        /// Only names containing this (case-sensitive).
        #[arg(long)]
        name: Option<String>,
        /// Read through the data plane, which lists only workspaces the token's scope binds.
        #[arg(long)]
        data_plane: bool,
    },
    /// Retrieve a workspace by UUID or slug.
    Get {
        workspace: String,
        /// Read through the data plane (403 AB03 for a workspace outside the token's scope).
        #[arg(long)]
        data_plane: bool,
    },
    /// Create a workspace (`{"name", "scope_name", …}`); the IAM scope must exist (`aigw api
    /// scopes create`) and must then bind the workspace's slug (`aigw api scopes bind`).
    Create(BodyArg),
    /// Update a workspace (partial). Clear with `"defaults": {"config_id": null, "metadata": {}}`,
    /// `"usage_limits": null`, `"rate_limits": []`, `"icon": ""`.
    Update {
        workspace: String,
        #[command(flatten)]
        body: BodyArg,
    },
    /// Archive a workspace (there is no hard delete).
    Archive { workspace: String },
}

#[derive(Subcommand)]
pub(super) enum ScopesCommand {
    /// List every IAM scope.
    List,
    /// Retrieve a scope by name.
    Get { name: String },
    /// Create a scope (`{"name", "description", "resources": []}`).
    Create(BodyArg),
    /// Replace a scope whole (`{"name", "description", "resources"}`): what is left out is gone.
    Replace {
        name: String,
        #[command(flatten)]
        body: BodyArg,
    },
    /// Replace a scope with one binding only this workspace slug (its description kept).
    Bind {
        name: String,
        workspace_slug: String,
    },
    /// Delete a scope.
    Delete { name: String },
}

fn plane(data_plane: bool) -> ApiPlane {
    match data_plane {
        true => ApiPlane::Data,
        false => ApiPlane::Admin,
    }
}

pub(super) async fn workspaces(client: &Client, cmd: WorkspacesCommand) -> anyhow::Result<()> {
    let admin = client.workspaces();
    match cmd {
        WorkspacesCommand::List {
            status,
            name,
            data_plane,
        } => {
            let query = WorkspacesListQuery {
                status,
                name,
                ..Default::default()
            };
            print(&client.workspaces_on(plane(data_plane)).list(&query).await?)
        }
        WorkspacesCommand::Get {
            workspace,
            data_plane,
        } => print(
            &client
                .workspaces_on(plane(data_plane))
                .get(&workspace)
                .await?,
        ),
        WorkspacesCommand::Create(body) => print(&admin.create(&body.read()?).await?),
        WorkspacesCommand::Update { workspace, body } => {
            done(admin.update(&workspace, &body.read()?)).await
        }
        WorkspacesCommand::Archive { workspace } => done(admin.archive(&workspace)).await,
    }
}

pub(super) async fn scopes(client: &Client, cmd: ScopesCommand) -> anyhow::Result<()> {
    let api = client.iam_scopes();
    match cmd {
        ScopesCommand::List => print(&api.list().await?),
        ScopesCommand::Get { name } => print(&api.get(&name).await?),
        ScopesCommand::Create(body) => print(&api.create(&body.read()?).await?),
        ScopesCommand::Replace { name, body } => print(&api.replace(&name, &body.read()?).await?),
        ScopesCommand::Bind {
            name,
            workspace_slug,
        } => {
            let current = api.get(&name).await?;
            let req = IamScopeWrite::binding(&name, &current.description, &workspace_slug);
            print(&api.replace(&name, &req).await?)
        }
        ScopesCommand::Delete { name } => done(api.delete(&name)).await,
    }
}
