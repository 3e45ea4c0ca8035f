//! `aigw plan` for an McpIntegration: the integration its live resource recorded, else the one
//! its slug names, compared on the fields a read shows. `configurations` come from a Secret and
//! read masked: the plan names the Secret, never a value. The workspace access rows and the
//! capability toggles are the operator's to merge (rows are never deleted, toggles of
//! capabilities not discovered yet wait): the plan says what the spec sets.

use serde_json::json;

use super::GitopsError;
use super::plan::{
    Action, Entry, Live, compared, creating, entry, immutable_differs, live_cluster_object,
    plain_changes, read_recorded_or_slug, status_of, to_json,
};
use crate::api::Client;
use crate::resources::McpIntegration;

pub(super) async fn plan_mcp_integration(
    api: &Client,
    live: Option<&Live>,
    integration: &McpIntegration,
) -> Result<Entry, GitopsError> {
    let spec = &integration.spec;
    let mut desired = to_json(spec);
    if let Some(named) = &spec.configurations_secret_ref {
        desired["configurationsSecretRef"] = json!(format!("(every key of secret {})", named.name));
    }
    let status = status_of(live_cluster_object(live, integration).await?);
    let keys = (status.id.as_ref(), spec.slug.as_ref());
    let found = read_recorded_or_slug(keys, "MCP integration", async |key| {
        api.mcp_integrations().get(key).await
    })
    .await?;
    let Some((counterpart, remote)) = found else {
        return Ok(creating(&desired, &["slug"]));
    };
    if let Some(workspace) = &remote.workspace_id {
        return Ok(entry(
            Action::Conflict,
            Some(counterpart.key),
            Vec::new(),
            Some(format!(
                "the remote MCP integration belongs to workspace {workspace}, not to the organisation: the operator would stall (InvalidSpec)"
            )),
        )
        .identified(&remote.id));
    }
    let immutable = spec.immutable_conflicts(&remote);
    if !immutable.is_empty() {
        let what = "MCP integration";
        return Ok(immutable_differs(counterpart.key, what, &immutable).identified(&remote.id));
    }
    let changes = plain_changes(spec.diff(&remote), &desired, |field| match field {
        "name" => json!(remote.name),
        "description" => json!(remote.description),
        "url" => json!(remote.url),
        "authType" => json!(remote.auth_type),
        _ => json!(remote.transport),
    });
    Ok(compared(&counterpart, changes).identified(&remote.id))
}
