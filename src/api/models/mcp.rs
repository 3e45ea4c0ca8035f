//! MCP integrations (organisation level, `/ai_gw/admin/v2/mcp-integrations`), MCP servers
//! (workspace level, `/ai_gw/v2/mcp-servers`) and the guardrails mapped onto servers
//! (`…/guardrails/{id}/mcp-servers`). An integration's `configurations` is write-only: requests
//! hold it in a [`SensitiveFields`]; reads carry it masked (an object in the detail, a
//! JSON-encoded string in list rows), and [`McpIntegration::with_configurations_hidden`] hides it
//! whole before anything is printed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use serde_with::skip_serializing_none;

use super::deployment::SensitiveFields;
use super::query::{self, ListQuery};
use super::validate::{self, Validate};
use super::{HIDDEN_CONFIGURATION, MorePage, SecretMapping, de};
use crate::api::error::ApiError;

/// An MCP integration as list rows and the detail return it.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpIntegration {
    pub id: String,
    #[serde(default)]
    pub slug: String,
    #[serde(default)]
    pub name: String,
    pub description: Option<String>,
    pub url: Option<String>,
    /// `oauth_auto`, `headers`, `none` (reads may also say `oauth_client_credentials`).
    pub auth_type: Option<String>,
    /// `http`, `sse` (reads may also say `interactive`).
    pub transport: Option<String>,
    /// An object in the detail, a JSON-encoded string in list rows. Masked by the API as far as
    /// is known (FACTS leaves it open): `Debug` prints none of it.
    pub configurations: Option<HiddenValue>,
    /// `null` until set.
    pub secret_mappings: Option<Vec<SecretMapping>>,
    pub global_workspace_access: Option<Value>,
    /// `null` for an organisation integration.
    pub workspace_id: Option<String>,
    #[serde(rename = "type")]
    pub integration_type: Option<String>,
    pub status: Option<String>,
    pub created_at: Option<String>,
    pub last_updated_at: Option<String>,
    /// Fields not modelled here (`Debug` shows their names only).
    #[serde(flatten)]
    pub extra: SensitiveFields,
}

/// A JSON value that may carry a secret: serialised as it is, `Debug` prints `***`.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct HiddenValue(pub Value);

impl std::fmt::Debug for HiddenValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

impl McpIntegration {
    /// The integration with `configurations` replaced by [`HIDDEN_CONFIGURATION`] (keys kept
    /// when it is an object), so that printing it never shows a header or a client secret.
    pub fn with_configurations_hidden(mut self) -> Self {
        self.configurations = self.configurations.map(|HiddenValue(c)| {
            HiddenValue(match c {
                Value::Object(map) => Value::Object(
                    map.into_iter()
                        .map(|(k, _)| (k, Value::String(HIDDEN_CONFIGURATION.into())))
                        .collect(),
                ),
                Value::Null => Value::Null,
                _ => Value::String(HIDDEN_CONFIGURATION.into()),
            })
        });
        self
    }
}

/// `POST /mcp-integrations`.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CreateMcpIntegrationRequest {
    pub name: String,
    pub url: String,
    pub auth_type: String,
    pub transport: String,
    /// `^[a-zA-Z0-9_-]+$`; fixed once created.
    pub slug: Option<String>,
    pub description: Option<String>,
    pub configurations: Option<SensitiveFields>,
    pub secret_mappings: Option<Vec<SecretMapping>>,
    /// The numeric TSG id on live tenants.
    pub organisation_id: Option<String>,
}

fn check_mappings(mappings: Option<&Vec<SecretMapping>>) -> Result<(), ApiError> {
    let mut seen = std::collections::HashSet::new();
    for mapping in mappings.into_iter().flatten() {
        if !mapping.target_field.starts_with("configurations.")
            || mapping.target_field.len() == "configurations.".len()
        {
            return Err(ApiError::validation(
                "secret_mappings.target_field",
                "must be configurations.<field>",
            ));
        }
        if !seen.insert(&mapping.target_field) {
            return Err(ApiError::validation(
                "secret_mappings.target_field",
                format!("{} is named twice", mapping.target_field),
            ));
        }
    }
    Ok(())
}

impl Validate for CreateMcpIntegrationRequest {
    fn validate(&self) -> Result<(), ApiError> {
        validate::not_blank([
            ("name", &self.name),
            ("url", &self.url),
            ("auth_type", &self.auth_type),
            ("transport", &self.transport),
        ])?;
        check_mappings(self.secret_mappings.as_ref())
    }
}

/// `PUT /mcp-integrations/{id}`: at least one field; `configurations` is sent whole.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UpdateMcpIntegrationRequest {
    pub name: Option<String>,
    pub description: Option<String>,
    pub url: Option<String>,
    pub auth_type: Option<String>,
    pub transport: Option<String>,
    pub configurations: Option<SensitiveFields>,
    pub secret_mappings: Option<Vec<SecretMapping>>,
}

impl Validate for UpdateMcpIntegrationRequest {
    fn validate(&self) -> Result<(), ApiError> {
        validate::some_update(self, "names no field to update")?;
        check_mappings(self.secret_mappings.as_ref())
    }
}

/// One workspace's access to an MCP integration; a disabled row stays listed.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpWorkspaceAccess {
    pub id: String,
    #[serde(deserialize_with = "de::flag")]
    pub enabled: bool,
    pub status: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `GET …/mcp-integrations/{id}/workspaces`, either shape: legacy `workspaces` or versioned
/// `data` (both are read into `workspaces`).
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpIntegrationWorkspaces {
    pub workspaces: Vec<McpWorkspaceAccess>,
    pub global_workspace_access: Option<Value>,
    pub total: Option<u64>,
    /// The answer says more rows follow (MCP lists may carry `has_more`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub has_more: bool,
}

impl McpIntegrationWorkspaces {
    /// True unless the answer's `total` counts rows that did not come back, or it says more
    /// follow (the legacy shape has no `total`): a row absent from a short answer may still be
    /// there, enabled.
    pub fn complete(&self) -> bool {
        super::envelope::answer_whole(self.workspaces.len(), self.total, self.has_more)
    }
}

impl<'de> Deserialize<'de> for McpIntegrationWorkspaces {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut body = Map::<String, Value>::deserialize(d)?;
        let rows = body
            .remove("workspaces")
            .filter(|v| !v.is_null())
            .or_else(|| body.remove("data"))
            .unwrap_or(Value::Array(Vec::new()));
        Ok(Self {
            workspaces: serde_json::from_value(rows).map_err(D::Error::custom)?,
            global_workspace_access: body
                .remove("global_workspace_access")
                .filter(|v| !v.is_null()),
            total: body.get("total").and_then(Value::as_u64),
            has_more: body.get("has_more").and_then(Value::as_bool) == Some(true),
        })
    }
}

/// One row of [`UpdateMcpWorkspacesRequest`].
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct McpWorkspaceAccessUpdate {
    /// Workspace UUID or slug.
    pub id: String,
    pub enabled: bool,
}

/// `PUT …/mcp-integrations/{id}/workspaces` (answers `{}`): merges the listed rows; there is
/// no delete (a row is disabled). aigw never sets `override_existing_workspace_access`.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UpdateMcpWorkspacesRequest {
    pub workspaces: Vec<McpWorkspaceAccessUpdate>,
    #[serde(default, deserialize_with = "de::double_option")]
    pub global_workspace_access: Option<Option<Value>>,
    pub override_existing_workspace_access: Option<bool>,
}

impl Validate for UpdateMcpWorkspacesRequest {
    fn validate(&self) -> Result<(), ApiError> {
        let mut seen = std::collections::HashSet::new();
        for row in &self.workspaces {
            validate::not_blank([("workspaces.id", &row.id)])?;
            if !seen.insert(&row.id) {
                return Err(ApiError::validation(
                    "workspaces",
                    format!("names {} twice", row.id),
                ));
            }
        }
        Ok(())
    }
}

/// A discovered tool, prompt, resource or resource template. Server capabilities add
/// `integration_enabled`.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpCapability {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(deserialize_with = "de::flag")]
    pub enabled: bool,
    pub integration_enabled: Option<bool>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A capabilities page (`page` counts from 1).
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpCapabilities {
    #[serde(flatten)]
    pub page: MorePage<McpCapability>,
    pub counts: Option<Value>,
}

/// One toggle of [`UpdateCapabilitiesRequest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapabilityToggle {
    pub name: String,
    /// `tool`, `prompt` or `resource`.
    #[serde(rename = "type")]
    pub kind: String,
    pub enabled: bool,
}

/// `PUT …/capabilities` (answers `{success}`): only capabilities already discovered.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UpdateCapabilitiesRequest {
    pub capabilities: Vec<CapabilityToggle>,
}

impl Validate for UpdateCapabilitiesRequest {
    fn validate(&self) -> Result<(), ApiError> {
        validate::non_empty("capabilities", &self.capabilities)?;
        self.capabilities.iter().try_for_each(|toggle| {
            validate::one_of(
                "capabilities.type",
                Some(&toggle.kind),
                &["tool", "prompt", "resource"],
            )
        })
    }
}

/// An MCP server as list rows and the detail return it. The detail omits `workspace_id`: list
/// with a `workspace_id` and `id` filter to prove where a server lives.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpServer {
    pub id: String,
    #[serde(default)]
    pub slug: String,
    #[serde(default)]
    pub name: String,
    pub description: Option<String>,
    pub mcp_integration_id: Option<String>,
    /// List rows only.
    pub mcp_integration_slug: Option<String>,
    /// List rows only.
    pub workspace_id: Option<String>,
    /// List rows only.
    pub workspace_slug: Option<String>,
    pub status: Option<String>,
    /// Detail only.
    pub guardrail_mappings: Option<Vec<McpServerMapping>>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `GET /mcp-servers` filters.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct McpServersListQuery {
    /// UUID or slug.
    pub workspace_id: Option<String>,
    pub ids: Vec<String>,
    pub search: Option<String>,
}

impl ListQuery for McpServersListQuery {
    fn to_pairs(&self) -> Vec<(&'static str, String)> {
        query::filters([
            ("page_size", Some("100".to_owned())),
            ("workspace_id", self.workspace_id.clone()),
            ("id", (!self.ids.is_empty()).then(|| self.ids.join(","))),
            ("search", self.search.clone()),
        ])
    }
}

/// `POST /mcp-servers`. The integration must be enabled for the workspace first.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CreateMcpServerRequest {
    pub name: String,
    /// UUID or slug.
    pub mcp_integration_id: String,
    /// UUID or slug; required with an organisation admin token.
    pub workspace_id: Option<String>,
    pub slug: Option<String>,
    pub description: Option<String>,
}

impl Validate for CreateMcpServerRequest {
    fn validate(&self) -> Result<(), ApiError> {
        validate::not_blank([
            ("name", &self.name),
            ("mcp_integration_id", &self.mcp_integration_id),
        ])?;
        validate::max_chars("name", Some(&self.name), 255)?;
        validate::max_chars("description", self.description.as_deref(), 500)?;
        if let Some(slug) = &self.slug
            && !(3..=50).contains(&slug.len())
        {
            return Err(ApiError::validation("slug", "must be 3 to 50 characters"));
        }
        Ok(())
    }
}

/// `PUT /mcp-servers/{id}`: `name` and `description` only.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UpdateMcpServerRequest {
    pub name: Option<String>,
    pub description: Option<String>,
}

impl Validate for UpdateMcpServerRequest {
    fn validate(&self) -> Result<(), ApiError> {
        validate::some_update(self, "names no field to update")?;
        validate::max_chars("description", self.description.as_deref(), 500)
    }
}

/// `GET …/mcp-servers/{id}/user-access`.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct McpUserAccess {
    /// `allow` or `deny`.
    #[serde(default)]
    pub default_user_access: String,
    #[serde(flatten)]
    pub page: MorePage<Value>,
}

/// One row of [`UpdateUserAccessRequest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserAccessUpdate {
    pub user_id: String,
    pub enabled: bool,
}

/// `PUT …/mcp-servers/{id}/user-access` (answers `{success, object}`).
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UpdateUserAccessRequest {
    #[serde(default)]
    pub user_access: Vec<UserAccessUpdate>,
    /// `allow` or `deny`.
    pub default_user_access: Option<String>,
}

impl Validate for UpdateUserAccessRequest {
    fn validate(&self) -> Result<(), ApiError> {
        validate::one_of(
            "default_user_access",
            self.default_user_access.as_deref(),
            &["allow", "deny"],
        )
    }
}

/// `GET …/mcp-servers/{id}/connections` (operational: per-user OAuth connections).
pub type McpConnections = MorePage<Value>;

/// A guardrail applied to an MCP server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpServerMapping {
    pub id: String,
    pub guardrail_id: String,
    pub mcp_server_id: String,
    /// `input`, `output` or both.
    #[serde(default)]
    pub run_on: Vec<String>,
    #[serde(default, deserialize_with = "de::null_as_empty")]
    pub capability_ids: Vec<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// What one server of [`SyncMcpServerMappingsRequest`] gets.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpServerMappingTarget {
    /// Default (absent): `[input, output]`.
    pub run_on: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_integration_capability_ids: Vec<String>,
}

/// `PUT …/guardrails/{id}/mcp-servers`: the **complete** set, by server UUID; servers left out
/// lose the guardrail.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SyncMcpServerMappingsRequest {
    pub mcp_servers: BTreeMap<String, McpServerMappingTarget>,
}

impl Validate for SyncMcpServerMappingsRequest {
    fn validate(&self) -> Result<(), ApiError> {
        for target in self.mcp_servers.values() {
            if let Some(run_on) = &target.run_on {
                validate::non_empty("run_on", run_on)?;
                for run in run_on {
                    validate::one_of("run_on", Some(run), &["input", "output"])?;
                }
            }
        }
        Ok(())
    }
}

/// What a bulk sync changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpServerMappingsSynced {
    #[serde(default)]
    pub changed: bool,
    #[serde(default)]
    pub added: u64,
    #[serde(default)]
    pub updated: u64,
    #[serde(default)]
    pub removed: u64,
}

/// The answer of a one-server upsert.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpServerMappingWritten {
    pub map_id: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_rows_carry_configurations_as_a_string_and_printing_hides_it() {
        let row: McpIntegration = serde_json::from_value(serde_json::json!({
            "id": "i", "configurations": "{\"custom_headers\":{\"x-api-key\":\"hdr-secret-9\"}}"
        }))
        .unwrap();
        let shown = serde_json::to_string(&row.with_configurations_hidden()).unwrap();
        assert!(!shown.contains("hdr-secret-9"), "{shown}");
        let detail: McpIntegration = serde_json::from_value(serde_json::json!({
            "id": "i", "configurations": {"client_secret": "cs-secret-1"}
        }))
        .unwrap();
        let shown = serde_json::to_string(&detail.with_configurations_hidden()).unwrap();
        assert!(
            !shown.contains("cs-secret-1") && shown.contains("client_secret"),
            "{shown}"
        );
    }

    #[test]
    fn both_workspace_access_shapes_read_the_same() {
        let legacy: McpIntegrationWorkspaces = serde_json::from_value(serde_json::json!({
            "workspaces": [{"id": "w", "enabled": true}], "global_workspace_access": null
        }))
        .unwrap();
        let versioned: McpIntegrationWorkspaces = serde_json::from_value(serde_json::json!({
            "object": "list", "total": 1, "data": [{"id": "w", "enabled": true}]
        }))
        .unwrap();
        assert_eq!(legacy.workspaces, versioned.workspaces);
    }

    #[test]
    fn a_mapping_must_target_a_configuration_field_once() {
        let mapping = |target: &str| SecretMapping {
            target_field: target.into(),
            secret_reference_id: "ref".into(),
            secret_key: None,
            value_format: None,
        };
        let twice = UpdateMcpIntegrationRequest {
            secret_mappings: Some(vec![
                mapping("configurations.oauth_metadata"),
                mapping("configurations.oauth_metadata"),
            ]),
            ..Default::default()
        };
        assert!(twice.validate().is_err());
        let key = UpdateMcpIntegrationRequest {
            secret_mappings: Some(vec![mapping("key")]),
            ..Default::default()
        };
        assert!(key.validate().is_err());
    }
}
