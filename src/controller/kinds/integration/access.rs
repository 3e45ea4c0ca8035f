//! An integration's sub-resources, kept with it ([`Verbs::sync_sub_resources`]): the workspace
//! access rows the spec names (merged: a removed workspace is disabled, rows of other
//! workspaces are never sent) and the model access, one PUT each where they differ; read-only
//! in Observe ([`Verbs::sub_resources_differ`]). The integration's key is its recorded id.
//!
//! [`Verbs::sync_sub_resources`]: crate::controller::driver::verbs::Verbs::sync_sub_resources
//! [`Verbs::sub_resources_differ`]: crate::controller::driver::verbs::Verbs::sub_resources_differ

use crate::api::{self, Client};
use crate::controller::driver::gate::Op;
use crate::controller::driver::{Change, Cx};
use crate::controller::error::{Error, Halt};
use crate::controller::kinds::sub_resources::{self, Part, WORKSPACE_ACCESS};
use crate::resources::integration::{Integration, IntegrationSpec, IntegrationStatus};

/// The model access, as messages name it, and the reason of its writes.
const MODELS: Part = Part::new("models", "ModelsUpdated");

/// Brings the workspace access rows, then the model access, in line with the spec.
pub(super) async fn sync(
    spec: &IntegrationSpec,
    cx: &Cx<'_, Integration>,
    status: &mut IntegrationStatus,
) -> Result<Vec<Change>, Halt> {
    let key = status.id.clone().unwrap_or_default();
    let access = apply_access(spec, cx, &key, &status.workspaces).await?;
    status.workspaces = spec.enabled_workspaces();
    let models = apply_models(spec, cx, &key).await?;
    Ok(access.into_iter().chain(models).collect())
}

/// The sub-resources that differ from the spec (`workspaces`, `models`), read without a write.
pub(super) async fn differ(
    spec: &IntegrationSpec,
    cx: &Cx<'_, Integration>,
    status: &IntegrationStatus,
) -> Result<Vec<&'static str>, Halt> {
    let client = cx.api(Op::Read).await?;
    let key = status.id.clone().unwrap_or_default();
    let mut fields = Vec::new();
    if !spec.workspaces.is_empty() || !status.workspaces.is_empty() {
        let rows = read_workspaces(client, &key).await?;
        if !spec.access_updates(&rows, &status.workspaces).is_empty() {
            fields.push("workspaces");
        }
    }
    if spec.models.is_some() {
        let models = read_models(client, &key).await?;
        if spec.model_updates(&models).is_some() {
            fields.push("models");
        }
    }
    Ok(fields)
}

async fn read_workspaces(client: &Client, key: &str) -> Result<api::IntegrationWorkspaces, Error> {
    let integrations = client.integrations();
    WORKSPACE_ACCESS
        .read::<Integration, _>(key, integrations.workspaces(key))
        .await
}

async fn read_models(client: &Client, key: &str) -> Result<api::IntegrationModels, Error> {
    let integrations = client.integrations();
    MODELS
        .read::<Integration, _>(key, integrations.models(key))
        .await
}

/// Merges the access rows the spec names and disables the workspaces it no longer lists
/// (`enabled` lists those it enabled before), in one PUT; rows of other workspaces are never
/// sent.
async fn apply_access<'a>(
    spec: &IntegrationSpec,
    cx: &'a Cx<'_, Integration>,
    key: &str,
    enabled: &[String],
) -> Result<Option<Change>, Halt> {
    if spec.workspaces.is_empty() && enabled.is_empty() {
        return Ok(None);
    }
    let rows = read_workspaces(cx.api(Op::Read).await?, key).await?;
    let updates = spec.access_updates(&rows, enabled);
    let write = |client: &'a Client, workspaces| async move {
        let request = api::UpdateWorkspacesRequest {
            workspaces,
            create_default_provider: Some(false),
            ..Default::default()
        };
        client.integrations().update_workspaces(key, &request).await
    };
    sub_resources::write_access(cx, key, (updates, "enabled or changed"), write).await
}

/// One model access PUT when a listed model (or `allowAllModels`) differs.
async fn apply_models(
    spec: &IntegrationSpec,
    cx: &Cx<'_, Integration>,
    key: &str,
) -> Result<Option<Change>, Halt> {
    if spec.models.is_none() {
        return Ok(None);
    }
    let models = read_models(cx.api(Op::Read).await?, key).await?;
    let Some(request) = spec.model_updates(&models) else {
        return Ok(None);
    };
    let slugs: Vec<&str> = request.models.iter().map(|m| m.slug.as_str()).collect();
    let what = match (slugs.is_empty(), request.allow_all_models) {
        (_, Some(all)) => format!("{} (allowAllModels {all})", slugs.join(", ")),
        (_, None) => slugs.join(", "),
    };
    let change = MODELS
        .write(cx, (key, &what), |client| async move {
            client.integrations().update_models(key, &request).await
        })
        .await?;
    Ok(Some(change))
}
