//! Secret references (`/ai_gw/admin/v2/secret-references`): pointers to a secret in AWS Secrets
//! Manager, Azure Key Vault or HashiCorp Vault that integrations and MCP integrations name in
//! `secret_mappings`. `auth_config` is write-only: requests hold it in a [`SensitiveFields`]
//! (whose `Debug` hides the values); reads carry it masked, and
//! [`SecretReference::with_auth_config_hidden`] hides every value that is not a known public
//! setting before anything is printed.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use serde_with::skip_serializing_none;

use super::HIDDEN_CONFIGURATION;
use super::deployment::SensitiveFields;
use super::query::{self, ListQuery};
use super::validate::{self, Validate};
use crate::api::error::ApiError;

/// The managers a reference may point into.
pub const MANAGER_TYPES: &[&str] = &["aws_sm", "azure_kv", "hashicorp_vault"];

/// `auth_config` fields that are public settings (a variant, a region, an address), shown as
/// read; any other value prints as [`HIDDEN_CONFIGURATION`] (the API's `masked_<field>` masks
/// are shown as they are).
pub const PUBLIC_AUTH_CONFIG: &[&str] = &[
    "aws_auth_type",
    "aws_region",
    "aws_role_arn",
    "azure_auth_mode",
    "azure_vault_url",
    "azure_entra_tenant_id",
    "azure_entra_client_id",
    "azure_managed_client_id",
    "vault_auth_type",
    "vault_addr",
    "vault_namespace",
    "vault_role",
];

/// A secret reference as list rows and the detail return it. The detail omits
/// `allowed_workspaces` (live).
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SecretReference {
    pub id: String,
    #[serde(default)]
    pub slug: String,
    #[serde(default)]
    pub name: String,
    pub manager_type: Option<String>,
    pub description: Option<String>,
    /// Masked by the API; `Debug` hides the values anyway.
    pub auth_config: Option<SensitiveFields>,
    pub secret_path: Option<String>,
    pub secret_key: Option<String>,
    pub allow_all_workspaces: Option<bool>,
    pub tags: Option<Map<String, Value>>,
    /// `active` live, `ACTIVE` in the spec: compare without case.
    pub status: Option<String>,
    pub organisation_id: Option<String>,
    pub created_at: Option<String>,
    pub last_updated_at: Option<String>,
    /// Fields not modelled here (`Debug` shows their names only).
    #[serde(flatten)]
    pub extra: SensitiveFields,
}

impl SecretReference {
    /// The reference with every `auth_config` value that is neither a public setting (a scalar
    /// holding nothing that reads as a credential) nor the API's own mask
    /// ([`super::integration::looks_masked`]) replaced by [`HIDDEN_CONFIGURATION`]: the
    /// Secret an `authConfigSecretRef` names may put any value at any key.
    pub fn with_auth_config_hidden(mut self) -> Self {
        if let Some(config) = &mut self.auth_config {
            for (field, value) in config.iter_mut() {
                let shown = if field.starts_with("masked_") {
                    super::integration::looks_masked(value)
                } else {
                    PUBLIC_AUTH_CONFIG.contains(&field.as_str())
                        && !(value.is_object() || value.is_array())
                        && !super::integration::holds_credentials(value)
                };
                if !shown {
                    *value = Value::String(HIDDEN_CONFIGURATION.into());
                }
            }
        }
        self
    }
}

/// `GET /secret-references` filters.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SecretReferencesListQuery {
    pub manager_type: Option<String>,
    pub search: Option<String>,
    /// Every tag must match (sent as a JSON object).
    pub tags: Option<Map<String, Value>>,
}

impl ListQuery for SecretReferencesListQuery {
    fn to_pairs(&self) -> Vec<(&'static str, String)> {
        query::filters([
            ("page_size", Some("100".to_owned())),
            ("manager_type", self.manager_type.clone()),
            ("search", self.search.clone()),
            (
                "tags",
                self.tags
                    .clone()
                    .map(|tags| Value::Object(tags).to_string()),
            ),
        ])
    }
}

/// `POST /secret-references`. `auth_config` is a variant of `manager_type` (`aws_auth_type`,
/// `azure_auth_mode` or `vault_auth_type` says which).
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CreateSecretReferenceRequest {
    pub name: String,
    pub manager_type: String,
    pub auth_config: SensitiveFields,
    pub secret_path: String,
    pub slug: Option<String>,
    pub description: Option<String>,
    pub secret_key: Option<String>,
    /// The API's default is true; it cannot be true beside `allowed_workspaces`.
    pub allow_all_workspaces: Option<bool>,
    pub allowed_workspaces: Option<Vec<String>>,
    pub tags: Option<Map<String, Value>>,
    /// The numeric TSG id on live tenants.
    pub organisation_id: Option<String>,
}

fn check_workspaces(
    allow_all: Option<bool>,
    allowed: Option<&Vec<String>>,
) -> Result<(), ApiError> {
    if let Some(allowed) = allowed {
        validate::non_empty("allowed_workspaces", allowed)?;
        if allow_all == Some(true) {
            return Err(ApiError::validation(
                "allow_all_workspaces",
                "cannot be true beside allowed_workspaces",
            ));
        }
    }
    Ok(())
}

impl Validate for CreateSecretReferenceRequest {
    fn validate(&self) -> Result<(), ApiError> {
        validate::not_blank([("name", &self.name), ("secret_path", &self.secret_path)])?;
        if !MANAGER_TYPES.contains(&self.manager_type.as_str()) {
            return Err(ApiError::validation(
                "manager_type",
                format!("must be one of {}", MANAGER_TYPES.join(", ")),
            ));
        }
        if self.auth_config.is_empty() {
            return Err(ApiError::validation("auth_config", "must not be empty"));
        }
        validate::max_chars("name", Some(&self.name), 255)?;
        validate::max_chars("secret_path", Some(&self.secret_path), 1024)?;
        validate::max_chars("description", self.description.as_deref(), 1024)?;
        check_workspaces(self.allow_all_workspaces, self.allowed_workspaces.as_ref())
    }
}

/// `PUT /secret-references/{id}` (answers `{}`). `auth_config` is merged into the stored one;
/// `allowed_workspaces` replaces the list and turns `allow_all_workspaces` off.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UpdateSecretReferenceRequest {
    pub name: Option<String>,
    pub description: Option<String>,
    pub auth_config: Option<SensitiveFields>,
    pub secret_path: Option<String>,
    pub secret_key: Option<String>,
    pub allow_all_workspaces: Option<bool>,
    pub allowed_workspaces: Option<Vec<String>>,
    pub tags: Option<Map<String, Value>>,
}

impl Validate for UpdateSecretReferenceRequest {
    fn validate(&self) -> Result<(), ApiError> {
        validate::some_update(self, "names no field to update")?;
        validate::max_chars("description", self.description.as_deref(), 1024)?;
        check_workspaces(self.allow_all_workspaces, self.allowed_workspaces.as_ref())
    }
}

/// A create receipt `{id, slug, object}` (secret references, MCP integrations, MCP servers,
/// providers).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Created {
    pub id: String,
    #[serde(default)]
    pub slug: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One `secret_mappings` entry of an integration or MCP integration: `target_field` (`key` or
/// `configurations.<field>`; MCP integrations take only the latter) filled from the secret
/// reference `secret_reference_id` (UUID or slug).
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SecretMapping {
    pub target_field: String,
    pub secret_reference_id: String,
    /// Overrides the reference's own `secret_key`.
    pub secret_key: Option<String>,
    /// `json` parses the secret before applying it, `string` (default) does not.
    pub value_format: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_config_never_shows_in_debug_or_hidden_output() {
        let secret = "wJalrXUtnFEMI-secret-Zq1";
        let request = CreateSecretReferenceRequest {
            name: "aws".into(),
            manager_type: "aws_sm".into(),
            auth_config: SensitiveFields(
                serde_json::json!({"aws_auth_type": "accessKey", "aws_secret_access_key": secret})
                    .as_object()
                    .cloned()
                    .unwrap(),
            ),
            secret_path: "prod/openai".into(),
            ..Default::default()
        };
        assert!(!format!("{request:?}").contains(secret));
        let read: SecretReference = serde_json::from_value(serde_json::json!({
            "id": "r", "auth_config": {"aws_auth_type": "accessKey", "aws_secret_access_key": secret,
            "masked_aws_access_key_id": "****WXYZ",
            // What an authConfigSecretRef's Secret may put anywhere (an attack of stop 82).
            "masked_note": "LEAK-masked-1", "vault_role": {"secret_id": "LEAK-nested-2"}}
        }))
        .unwrap();
        let shown = serde_json::to_string(&read.with_auth_config_hidden()).unwrap();
        assert!(!shown.contains(secret), "{shown}");
        assert!(!shown.contains("LEAK-"), "{shown}");
        assert!(
            shown.contains("accessKey") && shown.contains("****WXYZ"),
            "{shown}"
        );
    }

    #[test]
    fn allow_all_beside_a_list_is_refused_before_sending() {
        let request = UpdateSecretReferenceRequest {
            allow_all_workspaces: Some(true),
            allowed_workspaces: Some(vec!["ws-a".into()]),
            ..Default::default()
        };
        assert!(request.validate().is_err());
        assert!(UpdateSecretReferenceRequest::default().validate().is_err());
    }
}
