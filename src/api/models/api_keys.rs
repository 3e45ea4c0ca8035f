//! Gateway API keys, service and user (`/ai_gw/v2/api-keys/service`, `…/user`, the live per-kind
//! routes). The key value is one-time: create and rotate return it, reads show a mask. Both
//! receipts hold it in a [`SecretString`], whose `Debug` never prints it.

use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};
use serde_with::skip_serializing_none;

use super::de;
use super::deployment::SensitiveFields;
use super::open_enum::open_enum;
use super::query::WorkspaceListQuery;
use super::rate_limits::RateLimitType;
use super::validate::{self, Validate};
use crate::api::error::ApiError;
use crate::api::secret::SecretString;

/// The shortest transition a rotation takes, and the API's default: 30 minutes.
pub const MIN_KEY_TRANSITION_MS: u64 = 1_800_000;

/// Which per-kind route a key lives under. A key is read, changed and deleted through the
/// route of its kind only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApiKeyKind {
    /// A key for a service (`/api-keys/service`).
    Service,
    /// A key that acts for one user (`/api-keys/user`); create needs `user_id`.
    User,
}

impl ApiKeyKind {
    /// The path segment, `service` or `user`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Service => "service",
            Self::User => "user",
        }
    }
}

open_enum! {
    /// The read `type` (FACTS-more §4).
    pub enum ApiKeyType {
        OrganisationService = "organisation-service",
        WorkspaceService = "workspace-service",
        WorkspaceUser = "workspace-user",
    }
}

open_enum! {
    /// A key's `status`; `exhausted` once its usage limit is used up.
    pub enum ApiKeyStatus {
        Active = "active",
        Exhausted = "exhausted",
    }
}

open_enum! {
    /// The window of a key's rate limit.
    pub enum ApiKeyRateLimitUnit {
        Rps = "rps",
        Rpm = "rpm",
        Rph = "rph",
        Rpd = "rpd",
        Rpw = "rpw",
    }
}

/// One rate limit of a key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApiKeyRateLimit {
    #[serde(rename = "type")]
    pub limit_type: RateLimitType,
    pub unit: ApiKeyRateLimitUnit,
    pub value: u64,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten, default)]
    pub extra: Map<String, Value>,
}

/// What requests made with the key get unless they say otherwise. In an update, a field that is
/// present replaces the stored one; `config_id: null` unbinds the config.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ApiKeyDefaults {
    #[serde(default, deserialize_with = "de::double_option")]
    pub metadata: Option<Option<Map<String, Value>>>,
    #[serde(default, deserialize_with = "de::double_option")]
    pub config_id: Option<Option<String>>,
    /// Reads may carry it as 0/1.
    #[serde(default, deserialize_with = "de::opt_flag")]
    pub allow_config_override: Option<bool>,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// How often the API rotates the key by itself. An operator that owns the key's Secret should
/// not set one: nothing says how a scheduled value would reach it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RotationPeriod {
    Weekly,
    Monthly,
}

/// `rotation_policy`: a period **or** a next rotation time, and the transition to apply.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RotationPolicy {
    pub rotation_period: Option<RotationPeriod>,
    pub next_rotation_at: Option<String>,
    pub key_transition_period_ms: Option<u64>,
}

/// An API key as reads return it: `key` is masked (and printed masked whatever came back),
/// `expiry_enforced` and `allow_config_override` arrive as 0/1.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApiKey {
    pub id: String,
    #[serde(serialize_with = "masked_key")]
    pub key: Option<SecretString>,
    pub name: Option<String>,
    pub description: Option<String>,
    #[serde(rename = "type")]
    pub key_type: Option<ApiKeyType>,
    /// The internal organisation UUID (writes take the numeric TSG).
    pub organisation_id: Option<String>,
    pub workspace_id: Option<String>,
    pub user_id: Option<String>,
    pub status: Option<ApiKeyStatus>,
    #[serde(default, deserialize_with = "de::null_as_empty")]
    pub scopes: Vec<String>,
    #[serde(default, deserialize_with = "de::null_as_empty")]
    pub rate_limits: Vec<ApiKeyRateLimit>,
    pub usage_limits: Option<Value>,
    pub defaults: Option<ApiKeyDefaults>,
    #[serde(default, deserialize_with = "de::null_as_empty")]
    pub alert_emails: Vec<String>,
    pub expires_at: Option<String>,
    #[serde(default, deserialize_with = "de::opt_flag")]
    pub expiry_enforced: Option<bool>,
    #[serde(default, deserialize_with = "de::opt_flag")]
    pub allow_config_override: Option<bool>,
    pub created_at: Option<String>,
    pub last_updated_at: Option<String>,
    /// Fields not modelled here, kept as sent (`Debug` shows their names only).
    #[serde(flatten)]
    pub extra: SensitiveFields,
}

/// Prints a read's `key` only if it is a mask; anything else is printed as `****`, so a server
/// that sent a real value on a read still never gets it printed.
fn masked_key<S: Serializer>(key: &Option<SecretString>, s: S) -> Result<S::Ok, S::Error> {
    match key {
        Some(key) if key.is_masked() => s.serialize_str(key.expose()),
        Some(_) => s.serialize_str("****"),
        None => s.serialize_none(),
    }
}

/// `POST /api-keys/{service|user}`. `name` and a non-empty `scopes` are required; user keys need
/// `user_id`.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CreateApiKeyRequest {
    pub name: String,
    /// E.g. `completions.write`, `logs.write`, `mcp.invoke` (an open list).
    pub scopes: Vec<String>,
    /// Which value SCM wants here is unresolved (FACTS-more §8.1): the SDK sends `workspace`,
    /// Terraform the kind (`service`/`user`). Sent only when set.
    #[serde(rename = "type")]
    pub key_type: Option<String>,
    pub description: Option<String>,
    /// The numeric TSG id as a string on live tenants.
    pub organisation_id: Option<String>,
    pub workspace_id: Option<String>,
    /// Required for user keys, refused for service keys.
    pub user_id: Option<String>,
    pub rate_limits: Option<Vec<ApiKeyRateLimit>>,
    pub usage_limits: Option<Value>,
    pub defaults: Option<ApiKeyDefaults>,
    pub alert_emails: Option<Vec<String>>,
    pub expires_at: Option<String>,
    pub rotation_policy: Option<RotationPolicy>,
}

/// `PUT /api-keys/{service|user}/{id}`: only these fields can change (`type`, `workspace_id`,
/// `user_id` and `organisation_id` are fixed at create). Fields left `None` are not sent; the
/// nullable ones are `Some(None)` to send `null`, which clears them.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UpdateApiKeyRequest {
    pub name: Option<String>,
    #[serde(default, deserialize_with = "de::double_option")]
    pub description: Option<Option<String>>,
    pub scopes: Option<Vec<String>>,
    #[serde(default, deserialize_with = "de::double_option")]
    pub rate_limits: Option<Option<Vec<ApiKeyRateLimit>>>,
    #[serde(default, deserialize_with = "de::double_option")]
    pub usage_limits: Option<Option<Value>>,
    /// Resets the key's usage; the API does not keep the flag.
    pub reset_usage: Option<bool>,
    pub defaults: Option<ApiKeyDefaults>,
    #[serde(default, deserialize_with = "de::double_option")]
    pub alert_emails: Option<Option<Vec<String>>>,
    #[serde(default, deserialize_with = "de::double_option")]
    pub expires_at: Option<Option<String>>,
    #[serde(default, deserialize_with = "de::double_option")]
    pub rotation_policy: Option<Option<RotationPolicy>>,
}

/// `POST /api-keys/{service|user}/{id}/rotate`. Without a period the request has no body and the
/// API applies its default (30 minutes, or the key's `rotation_policy`).
#[skip_serializing_none]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RotateApiKeyRequest {
    /// How long the old value keeps working, in ms; at least [`MIN_KEY_TRANSITION_MS`].
    pub key_transition_period_ms: Option<u64>,
}

impl RotateApiKeyRequest {
    /// A rotation whose old value keeps working for `transition` (whole milliseconds).
    pub fn with_transition(transition: std::time::Duration) -> Self {
        Self {
            key_transition_period_ms: Some(
                u64::try_from(transition.as_millis()).unwrap_or(u64::MAX),
            ),
        }
    }
}

/// The create receipt: the only time the new key's value is readable. Store it before anything
/// else.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApiKeyCreated {
    pub id: String,
    pub key: SecretString,
    pub object: Option<String>,
    /// Fields not modelled here, kept as sent (`Debug` shows their names only).
    #[serde(flatten)]
    pub extra: SensitiveFields,
}

/// The rotate receipt: the new value, once, and when the old one stops working.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApiKeyRotated {
    pub id: String,
    pub key: SecretString,
    pub key_transition_expires_at: Option<String>,
    pub object: Option<String>,
    /// Fields not modelled here, kept as sent (`Debug` shows their names only).
    #[serde(flatten)]
    pub extra: SensitiveFields,
}

/// Filters of `GET /api-keys/{service|user}`.
pub type ApiKeysListQuery = WorkspaceListQuery;

fn validate_scopes(scopes: &[String]) -> Result<(), ApiError> {
    validate::non_empty("scopes", scopes)?;
    if scopes.iter().any(|scope| scope.trim().is_empty()) {
        return Err(ApiError::validation(
            "scopes",
            "must not contain an empty scope",
        ));
    }
    Ok(())
}

fn validate_transition(field: &str, ms: Option<u64>) -> Result<(), ApiError> {
    match ms {
        Some(ms) if ms < MIN_KEY_TRANSITION_MS => Err(ApiError::validation(
            field,
            format!("must be at least {MIN_KEY_TRANSITION_MS} (30 minutes), got {ms}"),
        )),
        _ => Ok(()),
    }
}

fn validate_rate_limits(limits: &[ApiKeyRateLimit]) -> Result<(), ApiError> {
    match limits
        .iter()
        .find(|limit| matches!(limit.unit, ApiKeyRateLimitUnit::Other(_)))
    {
        Some(limit) => Err(ApiError::validation(
            "rate_limits[].unit",
            format!("must be rps, rpm, rph, rpd or rpw, got {}", limit.unit),
        )),
        None => Ok(()),
    }
}

impl Validate for RotationPolicy {
    fn validate(&self) -> Result<(), ApiError> {
        if self.rotation_period.is_some() && self.next_rotation_at.is_some() {
            return Err(ApiError::validation(
                "rotation_policy",
                "rotation_period and next_rotation_at cannot both be set",
            ));
        }
        validate_transition(
            "rotation_policy.key_transition_period_ms",
            self.key_transition_period_ms,
        )
    }
}

impl Validate for CreateApiKeyRequest {
    fn validate(&self) -> Result<(), ApiError> {
        validate::required([("name", &self.name)])?;
        validate_scopes(&self.scopes)?;
        validate_rate_limits(self.rate_limits.as_deref().unwrap_or_default())?;
        self.rotation_policy.validate()
    }
}

impl CreateApiKeyRequest {
    /// [`Validate::validate`], plus what the kind demands: `user_id` on user keys only.
    pub fn validate_for(&self, kind: ApiKeyKind) -> Result<(), ApiError> {
        self.validate()?;
        let has_user = self
            .user_id
            .as_deref()
            .is_some_and(|id| !id.trim().is_empty());
        match (kind, has_user) {
            (ApiKeyKind::User, false) => {
                Err(ApiError::validation("user_id", "is required for user keys"))
            }
            (ApiKeyKind::Service, true) => Err(ApiError::validation(
                "user_id",
                "is only taken by user keys",
            )),
            _ => Ok(()),
        }
    }
}

impl Validate for UpdateApiKeyRequest {
    fn validate(&self) -> Result<(), ApiError> {
        validate::some_update(self, "must set at least one field")?;
        validate::not_blank_if_set("name", self.name.as_deref())?;
        if let Some(scopes) = &self.scopes {
            validate_scopes(scopes)?;
        }
        if let Some(Some(limits)) = &self.rate_limits {
            validate_rate_limits(limits)?;
        }
        self.rotation_policy.clone().flatten().validate()
    }
}

impl Validate for RotateApiKeyRequest {
    fn validate(&self) -> Result<(), ApiError> {
        validate_transition("key_transition_period_ms", self.key_transition_period_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_live_read_decodes_with_flags_and_keeps_unknown_fields() {
        let key: ApiKey = serde_json::from_value(json!({
            "id": "k1", "key": "****", "name": "svc", "description": null,
            "type": "workspace-service", "organisation_id": "o", "workspace_id": "w",
            "user_id": null, "status": "active", "created_at": "2026-09-06T00:00:00Z",
            "last_updated_at": "2026-09-06T00:00:00Z", "creation_mode": "api", "rate_limits": [],
            "usage_limits": null, "reset_usage": 0, "expires_at": null, "last_reset_at": null,
            "alert_emails": null, "expiry_enforced": 0, "next_usage_reset_at": null,
            "allow_config_override": null, "api_key_defaults_id": "d", "created_by": "u",
            "last_updated_by": "u", "scopes": ["completions.write"],
            "defaults": {"metadata": null, "config_id": null}, "object": "api-key"
        }))
        .unwrap();
        assert_eq!(key.key_type, Some(ApiKeyType::WorkspaceService));
        assert_eq!(key.expiry_enforced, Some(false));
        assert_eq!(key.allow_config_override, None);
        assert_eq!(key.extra["creation_mode"], "api", "unknown fields are kept");
        let defaults = key.defaults.as_ref().unwrap();
        assert_eq!(defaults.config_id, Some(None), "null is not absent");
    }

    #[test]
    fn a_read_never_prints_a_real_key() {
        let key: ApiKey = serde_json::from_value(json!({"id": "k1", "key": "ak-real"})).unwrap();
        let printed = serde_json::to_string(&key).unwrap();
        assert!(!printed.contains("ak-real"), "{printed}");
        assert!(!format!("{key:?}").contains("ak-real"));
    }

    #[test]
    fn receipts_hide_the_key_from_debug_only() {
        let created: ApiKeyCreated =
            serde_json::from_value(json!({"id": "k1", "key": "ak-secret", "object": "api-key"}))
                .unwrap();
        assert!(!format!("{created:?}").contains("ak-secret"));
        assert_eq!(created.key.expose(), "ak-secret");
        let rotated: ApiKeyRotated = serde_json::from_value(json!({
            "id": "k1", "key": "ak-new", "key_transition_expires_at": "2026-01-01T00:00:00.000Z"
        }))
        .unwrap();
        assert!(!format!("{rotated:?}").contains("ak-new"));
    }

    #[test]
    fn requests_are_checked_before_sending() {
        let create = CreateApiKeyRequest {
            name: "svc".into(),
            scopes: vec!["completions.write".into()],
            ..Default::default()
        };
        assert!(create.validate_for(ApiKeyKind::Service).is_ok());
        assert!(create.validate_for(ApiKeyKind::User).is_err(), "user_id");
        let no_scopes = CreateApiKeyRequest {
            scopes: Vec::new(),
            ..create.clone()
        };
        assert!(no_scopes.validate().is_err());
        assert!(UpdateApiKeyRequest::default().validate().is_err());
        let short = RotateApiKeyRequest {
            key_transition_period_ms: Some(MIN_KEY_TRANSITION_MS - 1),
        };
        assert!(short.validate().is_err());
        assert!(RotateApiKeyRequest::default().validate().is_ok());
    }

    #[test]
    fn an_update_sends_null_only_to_clear() {
        let update = UpdateApiKeyRequest {
            name: Some("renamed".into()),
            expires_at: Some(None),
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_value(&update).unwrap(),
            json!({"name": "renamed", "expires_at": null})
        );
        let read: UpdateApiKeyRequest =
            serde_json::from_value(json!({"name": "x", "alert_emails": null})).unwrap();
        assert_eq!(read.alert_emails, Some(None));
        assert_eq!(read.expires_at, None);
    }
}
