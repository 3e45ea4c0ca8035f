//! Providers (`/ai_gw/v2/providers`): a workspace's handle on an integration, what configs route
//! to as `@<slug>`. A provider read may carry credential material (`key`, `model_config`,
//! `credentials`, `configurations`: FACTS-more §0.5): those fields are dropped as they are
//! decoded and print as `(withheld)`, so nothing that holds or prints a read can leak them.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use serde_with::skip_serializing_none;

use super::de;
use super::deployment::SensitiveFields;
use super::query::WorkspaceListQuery;
use super::validate::{self, Validate};
use crate::api::error::ApiError;

/// A field of a provider read that may hold credentials: its value is never kept.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct Withheld;

impl std::fmt::Debug for Withheld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("(withheld)")
    }
}

impl Serialize for Withheld {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str("(withheld)")
    }
}

impl<'de> Deserialize<'de> for Withheld {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(d).map(|_| Withheld)
    }
}

/// A provider as list rows and reads return it. Reads have no `id` in the PANW reference but do
/// live.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Provider {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub slug: String,
    #[serde(default)]
    pub name: String,
    pub integration_id: Option<String>,
    pub workspace_id: Option<String>,
    pub note: Option<String>,
    /// `active`, `exhausted` or `expired`.
    pub status: Option<String>,
    /// `null`, one object, or an array (all seen live).
    pub usage_limits: Option<Value>,
    pub rate_limits: Option<Value>,
    pub expires_at: Option<String>,
    pub created_at: Option<String>,
    pub last_reset_at: Option<String>,
    /// "Potentially secret-bearing. Never log or persist this field." (SDK)
    pub key: Option<Withheld>,
    pub model_config: Option<Withheld>,
    pub credentials: Option<Withheld>,
    pub configurations: Option<Withheld>,
    /// Fields not modelled here, kept as sent (`Debug` shows their names only).
    #[serde(flatten)]
    pub extra: SensitiveFields,
}

/// `POST /providers`. Inline `rate_limits` fail live (HTTP 503): use a rate-limits policy.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CreateProviderRequest {
    pub name: String,
    /// The integration's UUID (what the SDK and Terraform send; its slug may work too).
    pub integration_id: String,
    pub workspace_id: Option<String>,
    /// `^[a-zA-Z0-9_-]+$`; made from the name when absent. Fixed once created.
    pub slug: Option<String>,
    pub note: Option<String>,
    pub usage_limits: Option<Value>,
    pub rate_limits: Option<Value>,
    pub expires_at: Option<String>,
}

/// `PUT /providers/{id}`: `Some(None)` sends `null`, which clears.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UpdateProviderRequest {
    pub name: Option<String>,
    #[serde(default, deserialize_with = "de::double_option")]
    pub note: Option<Option<String>>,
    #[serde(default, deserialize_with = "de::double_option")]
    pub usage_limits: Option<Option<Value>>,
    #[serde(default, deserialize_with = "de::double_option")]
    pub rate_limits: Option<Option<Value>>,
    #[serde(default, deserialize_with = "de::double_option")]
    pub expires_at: Option<Option<String>>,
    /// Resets the provider's usage (an `exhausted` provider becomes `active`).
    pub reset_usage: Option<bool>,
}

/// The create and update receipt `{id, slug}`.
pub type ProviderWritten = super::Created;

/// Filters of `GET /providers`.
pub type ProvidersListQuery = WorkspaceListQuery;

impl Validate for CreateProviderRequest {
    fn validate(&self) -> Result<(), ApiError> {
        validate::required([
            ("name", &self.name),
            ("integration_id", &self.integration_id),
        ])?;
        if self.rate_limits.is_some() {
            return Err(ApiError::validation(
                "rate_limits",
                "inline provider rate limits on create fail live (HTTP 503); use a rate-limits policy",
            ));
        }
        super::integration::check_slug("slug", self.slug.as_deref())
    }
}

impl Validate for UpdateProviderRequest {
    fn validate(&self) -> Result<(), ApiError> {
        validate::some_update(self, "must set at least one field")?;
        validate::not_blank_if_set("name", self.name.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_read_keeps_no_credential_material() {
        let read: Provider = serde_json::from_value(json!({
            "id": "p1", "slug": "openai-prod", "name": "OpenAI", "integration_id": "i1",
            "key": "sk-live-123456", "model_config": {"aws_secret_access_key": "aws-hidden"},
            "masked_api_key": "****3456", "usage_limits": null, "rate_limits": [], "status": "active"
        }))
        .unwrap();
        let printed = serde_json::to_string(&read).unwrap();
        let debug = format!("{read:?}");
        for text in [&printed, &debug] {
            assert!(
                !text.contains("sk-live") && !text.contains("aws-hidden"),
                "{text}"
            );
        }
        assert_eq!(read.key, Some(Withheld));
        assert!(printed.contains("(withheld)"));
    }

    #[test]
    fn create_refuses_inline_rate_limits() {
        let mut create = CreateProviderRequest {
            name: "p".into(),
            integration_id: "i".into(),
            ..Default::default()
        };
        assert!(create.validate().is_ok());
        create.rate_limits = Some(json!({"type": "requests", "unit": "rpm", "value": 1}));
        assert!(create.validate().is_err());
    }
}
