//! `aigw plan` for an McpIntegration: the integration its live resource recorded, else the one
//! its slug names, compared on the fields a read shows. `configurations` come from a Secret and
//! read masked: the plan names the Secret, never a value. The workspace access rows and the
//! capability toggles are the operator's to merge (rows are never deleted, toggles of
//! capabilities not discovered yet wait): the plan says what the spec sets.

use serde_json::json;

use super::GitopsError;
use super::plan::{
    Action, Entry, FieldChange, Live, create_changes, entry, found, live_cluster_object, to_json,
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
    let managed = match live {
        Some(live) => live_cluster_object(live, integration).await?,
        None => None,
    };
    let status = managed.and_then(|m| m.status).unwrap_or_default();
    let adopting = status.id.is_none();
    let key = status.id.clone().or(spec.slug.clone());
    let remote = match &key {
        Some(key) => found(
            &format!("MCP integration {key}"),
            api.mcp_integrations().get(key).await,
        )?,
        None => None,
    };
    let (Some(key), Some(remote)) = (key, remote) else {
        return Ok(entry(
            Action::Create,
            None,
            create_changes(&desired, &["slug"]),
            None,
        ));
    };
    if let Some(workspace) = &remote.workspace_id {
        return Ok(entry(
            Action::Conflict,
            Some(key),
            Vec::new(),
            Some(format!(
                "the remote MCP integration belongs to workspace {workspace}, not to the organisation: the operator would stall (InvalidSpec)"
            )),
        )
        .identified(&remote.id));
    }
    let immutable = spec.immutable_conflicts(&remote);
    if !immutable.is_empty() {
        return Ok(entry(
            Action::Conflict,
            Some(key),
            Vec::new(),
            Some(format!(
                "{} of the remote MCP integration differ(s) and cannot be changed: the operator would stall (InvalidSpec)",
                immutable.join(", ")
            )),
        )
        .identified(&remote.id));
    }
    let changes: Vec<FieldChange> = spec
        .diff(&remote)
        .into_iter()
        .map(|field| FieldChange {
            field: field.into(),
            from: match field {
                "name" => json!(remote.name),
                "description" => json!(remote.description),
                "url" => json!(remote.url),
                "authType" => json!(remote.auth_type),
                _ => json!(remote.transport),
            },
            to: desired[field].clone(),
            diff: Vec::new(),
        })
        .collect();
    let action = match (adopting, changes.is_empty()) {
        (true, _) => Action::Adopt,
        (false, true) => Action::NoChange,
        (false, false) => Action::Update,
    };
    Ok(entry(action, Some(key), changes, None).identified(&remote.id))
}
