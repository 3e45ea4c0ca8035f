//! `aigw plan` for an McpIntegration: the integration its live resource recorded, else the one
//! its slug names, compared on the fields a read shows. `configurations` come from a Secret and
//! read masked: the plan names the Secret, never a value. The workspace access rows and the
//! capability toggles are the operator's to merge (rows are never deleted, toggles of
//! capabilities not discovered yet wait): the plan says what the spec sets.

use serde_json::json;

use super::GitopsError;
use super::plan::{
    Action, Entry, Planner, compared_unless_immutable, creating, entry, plain_changes, to_json,
};
use crate::resources::McpIntegration;
use crate::resources::common::SendsSecretValues;

impl Planner<'_> {
    pub(super) async fn mcp_integration(
        self,
        integration: &McpIntegration,
    ) -> Result<Entry, GitopsError> {
        let spec = &integration.spec;
        let mut desired = to_json(spec);
        if let Some(named) = &spec.configurations_secret_ref {
            desired["configurationsSecretRef"] =
                json!(format!("(every key of secret {})", named.name));
        }
        let get = async |key: &str| self.api.mcp_integrations().get(key).await;
        let (_, found) = self.counterpart(integration, get).await?;
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
        let changes = plain_changes(spec.diff(&remote), &desired, |field| match field {
            "name" => json!(remote.name),
            "description" => json!(remote.description),
            "url" => json!(remote.url),
            "authType" => json!(remote.auth_type),
            _ => json!(remote.transport),
        });
        let immutable = spec.immutable_conflicts(&remote);
        let planned =
            compared_unless_immutable(counterpart, "MCP integration", &immutable, changes);
        Ok(planned.identified(&remote.id))
    }
}
