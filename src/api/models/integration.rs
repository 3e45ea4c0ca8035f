//! Integrations (`/ai_gw/admin/v2/integrations`): the organisation's upstream credentials, with
//! their workspace access and model access. `key` and the credential fields of
//! `configurations` are write-only: reads carry `masked_key` and `masked_<field>`; the requests
//! that send them hold them in types whose `Debug` never prints a value.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use serde_with::skip_serializing_none;

use super::de;
use super::deployment::SensitiveFields;
use super::query::{self, ListQuery};
use super::validate::{self, Validate};
use crate::api::error::ApiError;
use crate::api::secret::SecretString;

/// An integration as list rows and reads return it (a row lacks the detail's fields).
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Integration {
    pub id: String,
    #[serde(default)]
    pub slug: String,
    #[serde(default)]
    pub name: String,
    pub ai_provider_id: Option<String>,
    pub description: Option<String>,
    pub status: Option<String>,
    /// The internal organisation UUID (writes take the numeric TSG).
    pub organisation_id: Option<String>,
    /// Set for a workspace-scoped integration; `None` for an organisation one.
    pub workspace_id: Option<String>,
    /// `organisation` or `workspace`.
    #[serde(rename = "type")]
    pub integration_type: Option<String>,
    /// The key as the API masks it; never the key.
    pub masked_key: Option<String>,
    /// Non-secret settings as sent; secret ones as `masked_<field>`.
    pub configurations: Option<Map<String, Value>>,
    #[serde(default, deserialize_with = "de::opt_flag")]
    pub allow_all_models: Option<bool>,
    pub created_at: Option<String>,
    /// `null` until the first update.
    pub last_updated_at: Option<String>,
    /// `[{target_field, secret_reference_id, secret_key?, value_format?}]`; `null` when unset.
    pub secret_mappings: Option<Vec<Value>>,
    /// Fields not modelled here, kept as sent (`Debug` shows their names only).
    #[serde(flatten)]
    pub extra: SensitiveFields,
}

/// Configuration fields known to be public settings (a region, a host, a project, an account
/// or client id, Azure's deployment list), shown as read: the settings of the API's
/// configuration schemas (OpenAI, Azure OpenAI, Azure AI, Bedrock, SageMaker, Vertex AI,
/// Workers AI, Hugging Face, Cortex, custom host) but their secrets (`aws_secret_access_key`,
/// `azure_entra_client_secret`, `vertex_service_account_json`, `custom_headers`) and
/// `aws_external_id`. Any other field may come from a Secret (an Integration's `secretRefs`,
/// or a credential the API reads back unmasked): plan, export and `aigw api` never show its
/// value, and export references it from a Secret, which holds a string (so a structured
/// setting must be listed here to be exported as it is).
pub const PUBLIC_CONFIGURATIONS: &[&str] = &[
    "aws_region",
    "aws_auth_type",
    "aws_role_arn",
    "custom_host",
    "vertex_auth_type",
    "vertex_project_id",
    "vertex_region",
    "azure_resource_name",
    "azure_deployment_id",
    "azure_deployment_name",
    "azure_deployment_config",
    "azure_api_version",
    "azure_auth_mode",
    "azure_model_name",
    "azure_foundry_url",
    "azure_entra_tenant_id",
    "azure_entra_client_id",
    "azure_managed_client_id",
    "amzn_sagemaker_custom_attributes",
    "amzn_sagemaker_target_model",
    "amzn_sagemaker_target_variant",
    "amzn_sagemaker_target_container_hostname",
    "amzn_sagemaker_inference_id",
    "amzn_sagemaker_enable_explanations",
    "amzn_sagemaker_inference_component",
    "amzn_sagemaker_session_id",
    "amzn_sagemaker_model_name",
    "workers_ai_account_id",
    "huggingface_base_url",
    "snowflake_account",
    "openai_organization",
    "openai_project",
    "anthropic_version",
    "user_location",
];

/// What stands for a configuration value that is not shown.
pub const HIDDEN_CONFIGURATION: &str = "(hidden: may come from a Secret)";

/// True when the configuration field `field` is a known public setting
/// ([`PUBLIC_CONFIGURATIONS`]) or the API's own mask (`masked_<field>`).
pub fn shown_configuration(field: &str) -> bool {
    field.starts_with("masked_") || PUBLIC_CONFIGURATIONS.contains(&field)
}

/// True when `value` reads as the API's mask of a secret (`****wxyz`): a string of at least
/// three mask characters (`*`, `•`, `.`, `…`) and at most four others. A `masked_<field>` is
/// shown only then: a Secret may put any text at such a path (`secretRefs` at
/// `/masked_note`), and the API reads back what was sent.
pub fn looks_masked(value: &Value) -> bool {
    let Some(text) = value.as_str() else {
        return false;
    };
    let mask = |c: &char| matches!(c, '*' | '•' | '.' | '…');
    text.chars().filter(mask).count() >= 3 && text.chars().filter(|c| !mask(c)).count() <= 4
}

/// True when the value of a public setting holds something that reads as a credential: a
/// secret-looking key at any depth (an `api_key` in an entry of Azure's deployment list), a
/// URL's userinfo, or a secret-looking `key=value` in its text. Such a value is not shown
/// (nor exported as it is): the API reads back whatever was sent, a Secret's value included.
pub fn holds_credentials(value: &Value) -> bool {
    use crate::api::secret_fields::{secret_pointers, secret_text_pointers, userinfo_pointers};
    !secret_pointers(value).is_empty()
        || !userinfo_pointers(value).is_empty()
        || !secret_text_pointers(value).is_empty()
}

/// The fields of an entry of Azure's `azure_deployment_config`, as the API's schema lists them.
const AZURE_DEPLOYMENT_FIELDS: &[&str] = &[
    "alias",
    "azure_api_version",
    "azure_deployment_name",
    "azure_model_slug",
    "is_default",
];

/// True when `value` of the public setting `field` may be shown as read: in the shape the
/// API's schema gives that setting (a scalar; for `azure_deployment_config`, a list of entries
/// holding only the schema's fields, each a scalar), and holding nothing that reads as a
/// credential ([`holds_credentials`]). Anything else at a public setting (a `passWord` in a
/// deployment entry, an object where a string goes) may have come from a Secret.
pub fn public_value(field: &str, value: &Value) -> bool {
    let scalar = |v: &Value| !(v.is_object() || v.is_array());
    let shaped = match (field, value) {
        ("azure_deployment_config", Value::Array(entries)) => entries.iter().all(|entry| {
            entry.as_object().is_some_and(|entry| {
                (entry.iter())
                    .all(|(k, v)| AZURE_DEPLOYMENT_FIELDS.contains(&k.as_str()) && scalar(v))
            })
        }),
        _ => scalar(value),
    };
    shaped && !holds_credentials(value)
}

impl Integration {
    /// The integration with every configuration value that is not a known public setting, or
    /// not a [`public_value`] of it (`custom_host: https://user:pass@host`, a `passWord` in an
    /// entry of Azure's deployment list), replaced by [`HIDDEN_CONFIGURATION`] (each value of a
    /// map, such as headers), so that printing it never shows a value that came from a Secret
    /// at a path no public setting has. (A public setting a Secret supplied is shown as read:
    /// `aigw api` reads no cluster to know it was; plan and export with `--kubeconfig` do.)
    pub fn with_configurations_hidden(mut self) -> Self {
        if let Some(configurations) = &mut self.configurations {
            for (field, value) in configurations.iter_mut() {
                let masked = field.starts_with("masked_");
                if (masked && looks_masked(value))
                    || (!masked && shown_configuration(field) && public_value(field, value))
                {
                    continue;
                }
                match value {
                    Value::Object(map) => map
                        .values_mut()
                        .for_each(|v| *v = Value::String(HIDDEN_CONFIGURATION.into())),
                    other => *other = Value::String(HIDDEN_CONFIGURATION.into()),
                }
            }
        }
        self
    }
}

/// `POST /integrations`. Send `create_default_provider: Some(false)` unless you want the API to
/// make a provider nobody manages (it defaults to true).
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CreateIntegrationRequest {
    pub name: String,
    /// A catalogue entry (`open-ai`, `bedrock`, … or its UUID on SCM).
    pub ai_provider_id: String,
    /// `^[a-zA-Z0-9_-]+$`; made from the name when absent. Fixed once created.
    pub slug: Option<String>,
    pub key: Option<SecretString>,
    pub description: Option<String>,
    /// The numeric TSG id as a string on live tenants.
    pub organisation_id: Option<String>,
    /// Makes a workspace-scoped integration; absent for an organisation one.
    pub workspace_id: Option<String>,
    /// Provider settings (`aws_region`, `aws_secret_access_key`, …); `Debug` hides the values.
    pub configurations: Option<SensitiveFields>,
    pub create_default_provider: Option<bool>,
    pub default_provider_slug: Option<String>,
    pub secret_mappings: Option<Vec<Value>>,
    pub pricing_adjustments: Option<Value>,
}

/// `PUT /integrations/{id}`: `configurations` is sent whole (no source says whether the API
/// merges it). `ai_provider_id`, `slug` and `workspace_id` cannot change.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UpdateIntegrationRequest {
    pub name: Option<String>,
    pub key: Option<SecretString>,
    pub description: Option<String>,
    pub configurations: Option<SensitiveFields>,
    pub secret_mappings: Option<Vec<Value>>,
    pub pricing_adjustments: Option<Value>,
}

/// The create receipt: `{id, slug, provider_id, object}` (live).
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntegrationCreated {
    pub id: String,
    #[serde(default)]
    pub slug: String,
    /// The default provider the API made, if it made one.
    pub provider_id: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `GET /integrations/{id}/workspaces`.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntegrationWorkspaces {
    pub total: Option<u64>,
    #[serde(default, deserialize_with = "de::null_as_empty")]
    pub workspaces: Vec<WorkspaceAccess>,
    /// Live: an object `{enabled, rate_limits?, usage_limits?}`.
    pub global_workspace_access: Option<Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl IntegrationWorkspaces {
    /// True when every row the API counts came back (absence from a short list proves nothing).
    pub fn complete(&self) -> bool {
        let has_more = self.extra.get("has_more").and_then(Value::as_bool) == Some(true);
        super::envelope::answer_whole(self.workspaces.len(), self.total, has_more)
    }
}

/// One workspace's access to an integration. A disabled row stays listed (`enabled: false`).
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkspaceAccess {
    /// The workspace, as the API writes it (UUID or slug: FACTS-more §8.4).
    pub id: String,
    #[serde(deserialize_with = "de::flag")]
    pub enabled: bool,
    /// `null` or at most one usage-limits object.
    #[serde(default, deserialize_with = "de::null_as_empty")]
    pub usage_limits: Vec<Value>,
    #[serde(default, deserialize_with = "de::null_as_empty")]
    pub rate_limits: Vec<Value>,
    pub status: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `PUT /integrations/{id}/workspaces`: merges the listed rows. aigw never sets
/// `override_existing_workspace_access` (it would disable every row not listed).
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UpdateWorkspacesRequest {
    pub workspaces: Vec<WorkspaceAccessUpdate>,
    pub global_workspace_access: Option<Value>,
    pub override_existing_workspace_access: Option<bool>,
    pub create_default_provider: Option<bool>,
    pub default_provider_slug: Option<String>,
}

/// One row of [`UpdateWorkspacesRequest`]; `usage_limits`/`rate_limits` hold at most one item,
/// `Some(None)` sends `null`.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct WorkspaceAccessUpdate {
    pub id: String,
    pub enabled: bool,
    #[serde(default, deserialize_with = "de::double_option")]
    pub usage_limits: Option<Option<Vec<Value>>>,
    #[serde(default, deserialize_with = "de::double_option")]
    pub rate_limits: Option<Option<Vec<Value>>>,
    pub reset_usage: Option<bool>,
    pub create_default_provider: Option<bool>,
    pub default_provider_slug: Option<String>,
}

/// `GET /integrations/{id}/models`.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntegrationModels {
    pub total: Option<u64>,
    #[serde(default, deserialize_with = "de::null_as_empty")]
    pub models: Vec<IntegrationModel>,
    #[serde(default, deserialize_with = "de::opt_flag")]
    pub allow_all_models: Option<bool>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One model of an integration; the flags may come as booleans, numbers or strings.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntegrationModel {
    pub slug: String,
    #[serde(deserialize_with = "de::flag")]
    pub enabled: bool,
    #[serde(default, deserialize_with = "de::opt_flag")]
    pub is_custom: Option<bool>,
    #[serde(default, deserialize_with = "de::opt_flag")]
    pub is_finetune: Option<bool>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `PUT /integrations/{id}/models`: merges per slug (inference, FACTS-more §8.5).
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UpdateModelsRequest {
    pub models: Vec<ModelAccessUpdate>,
    pub allow_all_models: Option<bool>,
}

/// One model of [`UpdateModelsRequest`].
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ModelAccessUpdate {
    pub slug: String,
    pub enabled: bool,
    pub is_custom: Option<bool>,
    pub is_finetune: Option<bool>,
    pub base_model_slug: Option<String>,
    pub configurations: Option<Value>,
    pub pricing_config: Option<Value>,
}

/// Filters of `GET /integrations`. The client pages through every page itself.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct IntegrationsListQuery {
    /// Integrations that workspace may use.
    pub workspace_id: Option<String>,
    /// `workspace`, `organisation` or `all` (the default).
    pub integration_type: Option<String>,
    pub page_size: Option<u32>,
}

impl ListQuery for IntegrationsListQuery {
    fn to_pairs(&self) -> Vec<(&'static str, String)> {
        query::filters([
            ("workspace_id", self.workspace_id.clone()),
            ("type", self.integration_type.clone()),
            ("page_size", query::number(self.page_size)),
        ])
    }
}

/// `^[a-zA-Z0-9_-]+$`, at most 255 characters.
pub(crate) fn check_slug(field: &str, slug: Option<&str>) -> Result<(), ApiError> {
    let Some(slug) = slug else { return Ok(()) };
    let allowed = slug
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if slug.is_empty() || slug.len() > 255 || !allowed {
        return Err(ApiError::validation(
            field,
            "must be 1 to 255 letters, digits, underscores or dashes",
        ));
    }
    Ok(())
}

impl Validate for CreateIntegrationRequest {
    fn validate(&self) -> Result<(), ApiError> {
        validate::required([
            ("name", &self.name),
            ("ai_provider_id", &self.ai_provider_id),
        ])?;
        if self.key.as_ref().is_some_and(SecretString::is_empty) {
            return Err(ApiError::validation("key", "must not be empty"));
        }
        check_slug("slug", self.slug.as_deref())?;
        check_slug(
            "default_provider_slug",
            self.default_provider_slug.as_deref(),
        )
    }
}

impl Validate for UpdateIntegrationRequest {
    fn validate(&self) -> Result<(), ApiError> {
        validate::some_update(self, "must set at least one field")?;
        if self.key.as_ref().is_some_and(SecretString::is_empty) {
            return Err(ApiError::validation("key", "must not be empty"));
        }
        Ok(())
    }
}

impl Validate for UpdateWorkspacesRequest {
    fn validate(&self) -> Result<(), ApiError> {
        if self.workspaces.is_empty() && self.global_workspace_access.is_none() {
            return Err(ApiError::validation(
                "workspaces",
                "must have at least one item (or set global_workspace_access)",
            ));
        }
        for row in &self.workspaces {
            validate::required([("workspaces[].id", &row.id)])?;
            for (field, items) in [
                ("workspaces[].usage_limits", &row.usage_limits),
                ("workspaces[].rate_limits", &row.rate_limits),
            ] {
                if items
                    .as_ref()
                    .and_then(Option::as_ref)
                    .is_some_and(|i| i.len() > 1)
                {
                    return Err(ApiError::validation(field, "takes at most one item"));
                }
            }
        }
        Ok(())
    }
}

impl Validate for UpdateModelsRequest {
    fn validate(&self) -> Result<(), ApiError> {
        validate::non_empty("models", &self.models)?;
        self.models
            .iter()
            .try_for_each(|model| validate::required([("models[].slug", &model.slug)]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_live_detail_decodes_and_never_debugs_a_secret() {
        let read: Integration = serde_json::from_value(json!({
            "id": "i1", "slug": "openai-prod", "name": "OpenAI", "ai_provider_id": "open-ai",
            "organisation_id": "o", "status": "active", "type": "organisation", "workspace_id": null,
            "masked_key": "****wxyz", "configurations": {"masked_aws_secret_access_key": "****abcd"},
            "allow_all_models": true, "global_workspace_access": null, "last_updated_at": null,
            "owner_id": "u", "tags": {}, "object": "integration"
        }))
        .unwrap();
        assert_eq!(read.masked_key.as_deref(), Some("****wxyz"));
        assert_eq!(read.last_updated_at, None);
        assert_eq!(read.extra["owner_id"], "u");
        let create = CreateIntegrationRequest {
            name: "n".into(),
            ai_provider_id: "open-ai".into(),
            key: Some("sk-live-secret".into()),
            configurations: Some(SensitiveFields(
                json!({"aws_secret_access_key": "aws-hidden"})
                    .as_object()
                    .unwrap()
                    .clone(),
            )),
            ..Default::default()
        };
        let debug = format!("{create:?}");
        assert!(
            !debug.contains("sk-live") && !debug.contains("aws-hidden"),
            "{debug}"
        );
        let body = serde_json::to_value(&create).unwrap();
        assert_eq!(body["key"], "sk-live-secret", "the body carries it");
    }

    #[test]
    fn workspace_rows_take_0_1_and_null_limits() {
        let rows: IntegrationWorkspaces = serde_json::from_value(json!({
            "total": 2, "object": "list", "global_workspace_access": {"enabled": false},
            "workspaces": [{"id": "ws-1", "enabled": 1, "usage_limits": null, "status": "active"},
                           {"id": "ws-2", "enabled": false, "rate_limits": [], "status": "archived"}]
        }))
        .unwrap();
        assert!(rows.workspaces[0].enabled && !rows.workspaces[1].enabled);
        assert!(rows.complete());
        let short: IntegrationWorkspaces =
            serde_json::from_value(json!({"total": 3, "workspaces": []})).unwrap();
        assert!(!short.complete());
        let update = UpdateWorkspacesRequest {
            workspaces: vec![WorkspaceAccessUpdate {
                id: "ws-1".into(),
                enabled: false,
                usage_limits: Some(None),
                ..Default::default()
            }],
            create_default_provider: Some(false),
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_value(&update).unwrap(),
            json!({"workspaces": [{"id": "ws-1", "enabled": false, "usage_limits": null}],
                   "create_default_provider": false})
        );
    }
}
