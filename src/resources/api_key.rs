//! The `ApiKey` kind: a gateway API key (service or user) whose one-time value aigw writes into
//! a Secret, and rotates there on request or on a schedule.

use super::common::DeletionPolicy;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::rules;
use serde_json::{Map, Value};

use super::common::{ManagementPolicy, free_form_object, json_equivalent, set_and_differs};
use super::deployment::SecretRef;
use super::limits::RateLimitType;
use super::managed_spec::ManagedSpec;
use super::managed_status::{ManagedStatus, Reword, embeds_managed};
use super::rotation::{Rotation, RotationStatus};
use crate::api;

/// The shortest `rotation.transitionPeriod` the API takes (30 minutes).
pub const MIN_TRANSITION: std::time::Duration =
    std::time::Duration::from_millis(api::MIN_KEY_TRANSITION_MS);

/// The key the value is stored under in the Secret.
pub const SECRET_KEY: &str = "api_key";

/// A gateway API key (`/ai_gw/v2/api-keys/{service|user}`). aigw creates it, writes its one-time
/// value into the Secret named by `spec.secretRef` (key `api_key`), keeps its mutable fields in
/// line with the spec, rotates it into the Secret when `spec.rotation` says so (the old value
/// keeps working for `transitionPeriod`), and deletes it (or leaves it) when the resource goes.
// kube's printcolumn(...) lists repeat `type_ = "string"`, which this lint misreads.
#[allow(clippy::duplicated_attributes)]
#[skip_serializing_none]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "aigw.io",
    doc = "A gateway API key whose one-time value aigw delivers into a Secret and rotates there.",
    version = "v1alpha1",
    kind = "ApiKey",
    plural = "apikeys",
    shortname = "aigwkey",
    category = "aigw",
    namespaced,
    status = "ApiKeyStatus",
    printcolumn(name = "Kind", type_ = "string", json_path = ".spec.kind"),
    printcolumn(name = "Secret", type_ = "string", json_path = ".spec.secretRef.name"),
    printcolumn(name = "Rotated", type_ = "date", json_path = ".status.lastRotatedAt"),
    printcolumn(name = "Id", type_ = "string", json_path = ".status.id", priority = 1)
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.rotationPolicy)").field_path(".rotationPolicy").reason(Reason::FieldValueForbidden).message("spec.rotationPolicy is refused: a server-side rotation would issue a new key that never reaches the Secret, which would be left holding a dead key; use spec.rotation (interval, trigger) so aigw rotates the key into the Secret"))]
#[x_kube(validation = Rule::new("self.kind != 'user' || has(self.userId)").field_path(".userId").reason(Reason::FieldValueRequired).message("spec.userId is required for a user key"))]
#[x_kube(validation = rules::uuid("userId"))]
#[x_kube(validation = rules::instant("expiresAt"))]
#[x_kube(validation = Rule::new("self.kind != 'service' || !has(self.userId)").field_path(".userId").reason(Reason::FieldValueForbidden).message("spec.userId is only taken by user keys"))]
#[x_kube(validation = rules::set_at_creation("userId", "ApiKey"))]
#[x_kube(validation = rules::set_at_creation("workspaceId", "ApiKey"))]
#[x_kube(validation = rules::same_connection("ApiKey"))]
#[x_kube(validation = rules::workspace_id_or_ref())]
#[x_kube(validation = rules::set_at_creation("workspaceRef", "ApiKey"))]
#[schemars(transform = Reword(&[
    (
        "managementPolicy",
        "`Full` (the default): aigw creates, updates, rotates and deletes the key to \
         match this spec. `Observe`: aigw only reads a key it already manages and \
         reports differences in the `Drifted` condition.",
    ),
]))]
pub struct ApiKeySpec {
    /// Display name of the key.
    #[schemars(length(min = 1, max = 255))]
    pub name: String,

    /// `service` (a key for an application) or `user` (a key that acts for `userId`). Immutable.
    #[x_kube(validation = Rule::new("self == oldSelf").message("kind is immutable: create a new ApiKey to change it"))]
    pub kind: ApiKeyKind,

    /// UUID of the user a `user` key acts for; required for user keys, refused for service keys.
    /// Immutable.
    #[x_kube(validation = Rule::new("self == oldSelf").message("userId is immutable: create a new ApiKey to change it"))]
    pub user_id: Option<String>,

    /// Workspace (UUID or slug) the key belongs to; the API's default workspace when absent.
    /// Immutable.
    #[x_kube(validation = Rule::new("self == oldSelf").message("workspaceId is immutable: create a new ApiKey to move it to another workspace"))]
    #[schemars(length(min = 1))]
    pub workspace_id: Option<String>,

    /// The Workspace resource whose workspace the key belongs to, instead of `workspaceId` (set
    /// at most one of the two): the UUID it recorded is used once it is Ready, and the Connection's grants
    /// apply to that workspace. Immutable.
    #[x_kube(validation = Rule::new("self == oldSelf").message("workspaceRef is immutable: create a new ApiKey to move it to another workspace"))]
    pub workspace_ref: Option<super::common::WorkspaceRef>,

    /// What the key may do, at least one, e.g. `completions.write`, `logs.write`, `mcp.invoke`.
    #[schemars(length(min = 1))]
    pub scopes: Vec<String>,

    /// Description of the key. Without one, aigw describes a key it creates as `created by
    /// aigw for <uid>`: after a lost create answer, that tells its key from another party's of
    /// the same name.
    pub description: Option<String>,

    /// Rate limits of the key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rate_limits: Vec<KeyRateLimit>,

    /// Usage limits of the key, as the API takes them (free-form object).
    #[serde(default)]
    #[schemars(schema_with = "optional_free_form_object")]
    pub usage_limits: Option<Map<String, Value>>,

    /// What requests made with the key get unless they say otherwise.
    pub defaults: Option<KeyDefaults>,

    /// When the key stops working (RFC 3339); never when absent.
    pub expires_at: Option<String>,

    /// The Secret (in this namespace) that receives the key's value under `api_key`. aigw
    /// creates it and owns it; it never takes over a Secret it did not create.
    pub secret_ref: SecretRef,

    /// Cluster-managed rotation of the key into the Secret.
    pub rotation: Option<KeyRotation>,

    /// Not supported, refused at admission: the API's own scheduled rotation would issue new
    /// values that never reach the Secret, leaving it with a dead key. Use `rotation` instead.
    #[serde(default)]
    #[schemars(schema_with = "optional_free_form_object")]
    pub rotation_policy: Option<Map<String, Value>>,

    /// What happens to the remote key when this resource is deleted: `Delete` (the default;
    /// the key stops working) or `Orphan` (it stays, and so does the Secret holding it).
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,

    /// Management policy and Connection: the block every kind keeps.
    #[serde(flatten)]
    pub managed: ManagedSpec,
}
embeds_managed!(ApiKeySpec, ManagedSpec);

fn optional_free_form_object(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    free_form_object(generator)
}

/// Service or user key.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApiKeyKind {
    /// A key for a service or application.
    Service,
    /// A key that acts for one user (`userId`).
    User,
}

impl ApiKeyKind {
    pub fn to_api(self) -> api::ApiKeyKind {
        match self {
            Self::Service => api::ApiKeyKind::Service,
            Self::User => api::ApiKeyKind::User,
        }
    }
}

/// One rate limit of the key.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyRateLimit {
    /// `requests` or `tokens`.
    #[serde(rename = "type")]
    pub type_: RateLimitType,
    /// `rps`, `rpm`, `rph`, `rpd` or `rpw`.
    pub unit: KeyRateLimitUnit,
    /// How many per unit.
    pub value: u64,
}

/// The window of a rate limit.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum KeyRateLimitUnit {
    /// Per second.
    Rps,
    /// Per minute.
    Rpm,
    /// Per hour.
    Rph,
    /// Per day.
    Rpd,
    /// Per week.
    Rpw,
}

/// Defaults of the key's requests.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!(has(self.configId) && has(self.config))").field_path(".config").reason(Reason::FieldValueForbidden).message("set either defaults.configId or defaults.config, not both"))]
pub struct KeyDefaults {
    /// Slug or id of the gateway config requests use by default.
    pub config_id: Option<String>,
    /// Name of a Config resource of this namespace whose remote config requests use by
    /// default; the key waits until that Config is Ready.
    #[schemars(regex(pattern = super::bounds::DNS_SUBDOMAIN), length(max = 253))]
    pub config: Option<String>,
    /// Whether a request may name another config.
    pub allow_config_override: Option<bool>,
    /// Metadata attached to the key's requests.
    #[serde(default)]
    #[schemars(schema_with = "optional_free_form_object")]
    pub metadata: Option<Map<String, Value>>,
}

/// When and how the key is rotated into the Secret.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
// Kubernetes' `duration()` does not read days: an interval with days is at least a day (the
// pattern takes whole days only), and is held against a transition of at most a day.
#[x_kube(validation = Rule::new("!has(self.interval) || self.interval.contains('d') || duration(self.interval) > duration('0s')").field_path(".interval").reason(Reason::FieldValueInvalid).message("spec.rotation.interval must be longer than zero"))]
#[x_kube(validation = Rule::new("!has(self.interval) || !has(self.transitionPeriod) || (self.interval.contains('d') ? duration(self.transitionPeriod) <= duration('24h') : duration(self.interval) >= duration(self.transitionPeriod))").field_path(".interval").reason(Reason::FieldValueInvalid).message("spec.rotation.interval must be at least spec.rotation.transitionPeriod (give the interval in hours when the transition is longer than a day)"))]
pub struct KeyRotation {
    /// `interval`, `trigger` and `restart`, as for a Deployment's credentials.
    #[serde(flatten)]
    pub schedule: Rotation,
    /// How long the previous key keeps working after a rotation, at least `30m` (the API's
    /// minimum and default), e.g. `2h`.
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"))]
    #[x_kube(validation = Rule::new("duration(self) >= duration('30m')").message("rotation.transitionPeriod must be at least 30m (the API's minimum)"))]
    pub transition_period: Option<String>,
}

/// What aigw knows of the key.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = Reword(&[
    (
        "conditions",
        "`Ready`, `Reconciling`, `Stalled` and `CredentialsAvailable`, each with a \
         reason and its own observedGeneration.",
    ),
]))]
pub struct ApiKeyStatus {
    /// Generation, conditions, create intent and claim: the block every kind keeps.
    #[serde(flatten)]
    pub managed: ManagedStatus,
    /// UUID of the remote key.
    pub id: Option<String>,
    /// The config the key's defaults name, as sent (resolved from `defaults.config`).
    pub config_id: Option<String>,
    /// The Config resource a ConfigRollout put the key on (its `aigw.io/rollout-config`
    /// annotation) when the config was last resolved; absent when the key's own
    /// `spec.defaults` decide.
    pub config_override: Option<String>,
    /// The remote key's `last_updated_at` when aigw last read it (for the drift check).
    pub remote_updated_at: Option<String>,
    /// Where the key's rotation stands.
    #[serde(flatten)]
    pub rotation: RotationStatus,
    /// When the previous value stops working (the API's `key_transition_expires_at` of the
    /// last rotation).
    pub previous_key_expires_at: Option<String>,
    /// The key a new one replaces because a rotation's answer, and so the value it issued,
    /// was lost: deleted once the Secret holds the new key's value.
    pub replaced_key: Option<String>,
    /// How many times the key was replaced instead of rotated (a rotation's answer lost): each
    /// gave the Secret a new value for the rotation it stood in for.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub replacements: u32,
}
embeds_managed!(ApiKeyStatus, ManagedStatus);

impl ApiKey {
    /// The Config resource a ConfigRollout put this key on (`aigw.io/rollout-config`), if any.
    /// It replaces what `spec.defaults` names, for a key whose spec has `defaults`.
    pub fn config_override(&self) -> Option<&str> {
        self.spec.defaults.as_ref()?;
        self.metadata
            .annotations
            .as_ref()?
            .get(super::config_rollout::CONFIG_OVERRIDE_ANNOTATION)
            .map(|name| name.trim())
            .filter(|name| !name.is_empty())
    }

    /// The name of the Config resource whose remote config the key's requests use by default:
    /// a rollout's override, else `defaults.config`.
    pub fn config_resource(&self) -> Option<&str> {
        self.config_override().or_else(|| self.own_config())
    }

    /// `defaults.config`, unless `defaults.configId` names the remote config itself.
    fn own_config(&self) -> Option<&str> {
        let defaults = self.spec.defaults.as_ref()?;
        match defaults.config_id {
            Some(_) => None,
            None => defaults.config.as_deref(),
        }
    }

    /// Whether the key's default may come from Config `name`: the rollout override it carries,
    /// or its own `defaults.config` (which it keeps when the override is not honoured, a
    /// rollout being gone).
    pub fn may_use_config(&self, name: &str) -> bool {
        self.config_override() == Some(name) || self.own_config() == Some(name)
    }
}

impl ApiKeySpec {
    fn rate_limits_to_api(&self) -> Vec<api::ApiKeyRateLimit> {
        self.rate_limits
            .iter()
            .map(|limit| api::ApiKeyRateLimit {
                limit_type: limit.type_.to_api(),
                unit: api::ApiKeyRateLimitUnit::from(match limit.unit {
                    KeyRateLimitUnit::Rps => "rps",
                    KeyRateLimitUnit::Rpm => "rpm",
                    KeyRateLimitUnit::Rph => "rph",
                    KeyRateLimitUnit::Rpd => "rpd",
                    KeyRateLimitUnit::Rpw => "rpw",
                }),
                value: limit.value,
                extra: Map::new(),
            })
            .collect()
    }

    /// The defaults to send, with `config_id` the resolved config (`None`: none named).
    fn defaults_to_api(&self, config_id: Option<&str>) -> Option<api::ApiKeyDefaults> {
        let defaults = self.defaults.as_ref()?;
        Some(api::ApiKeyDefaults {
            metadata: defaults.metadata.clone().map(Some),
            config_id: Some(config_id.map(str::to_string)),
            allow_config_override: defaults.allow_config_override,
            extra: Map::new(),
        })
    }

    /// The create body. `config_id` is `defaults.configId`, or what `defaults.config` resolved
    /// to. Never a `rotation_policy`.
    pub fn create_request(&self, config_id: Option<&str>) -> api::CreateApiKeyRequest {
        api::CreateApiKeyRequest {
            name: self.name.clone(),
            scopes: self.scopes.clone(),
            key_type: None,
            description: self.description.clone(),
            organisation_id: None,
            workspace_id: self.workspace_id.clone(),
            user_id: self.user_id.clone(),
            rate_limits: Some(self.rate_limits_to_api()).filter(|l| !l.is_empty()),
            usage_limits: self.usage_limits.clone().map(Value::Object),
            defaults: self.defaults_to_api(config_id),
            alert_emails: None,
            expires_at: self.expires_at.clone(),
            rotation_policy: None,
        }
    }

    /// The fields where `remote` differs from the spec, and the update body that sends only
    /// those (`None` when in sync). Fields the spec leaves out are the API's to manage.
    pub fn update_for(
        &self,
        remote: &api::ApiKey,
        config_id: Option<&str>,
    ) -> (Vec<&'static str>, Option<api::UpdateApiKeyRequest>) {
        let mut fields = Vec::new();
        let mut update = api::UpdateApiKeyRequest::default();
        if remote.name.as_deref() != Some(self.name.as_str()) {
            fields.push("name");
            update.name = Some(self.name.clone());
        }
        if set_and_differs(&self.description, &remote.description) {
            fields.push("description");
            update.description = Some(self.description.clone());
        }
        let mut wanted = self.scopes.clone();
        let mut have = remote.scopes.clone();
        wanted.sort();
        have.sort();
        if wanted != have {
            fields.push("scopes");
            update.scopes = Some(self.scopes.clone());
        }
        let limits = self.rate_limits_to_api();
        let strip = |l: &api::ApiKeyRateLimit| (l.limit_type, l.unit.to_string(), l.value);
        if limits.iter().map(strip).collect::<Vec<_>>()
            != remote.rate_limits.iter().map(strip).collect::<Vec<_>>()
        {
            fields.push("rateLimits");
            update.rate_limits = Some(Some(limits).filter(|l| !l.is_empty()));
        }
        if let Some(usage) = &self.usage_limits {
            let wanted = Value::Object(usage.clone());
            if !remote
                .usage_limits
                .as_ref()
                .is_some_and(|r| json_equivalent(&wanted, r))
            {
                fields.push("usageLimits");
                update.usage_limits = Some(Some(wanted));
            }
        }
        if let Some(wanted) = self.defaults_to_api(config_id) {
            let remote_defaults = remote.defaults.clone().unwrap_or_default();
            let config_differs =
                remote_defaults.config_id.clone().flatten().as_deref() != config_id;
            let override_differs = wanted.allow_config_override.is_some()
                && wanted.allow_config_override
                    != remote_defaults
                        .allow_config_override
                        .or(remote.allow_config_override);
            let metadata_differs = wanted.metadata.as_ref().is_some_and(|m| {
                let have = remote_defaults.metadata.clone().flatten();
                !json_equivalent(
                    &m.clone().map(Value::Object).unwrap_or(Value::Null),
                    &have.map(Value::Object).unwrap_or(Value::Null),
                )
            });
            if config_differs || override_differs || metadata_differs {
                fields.push("defaults");
                update.defaults = Some(wanted);
            }
        }
        if let Some(expires) = &self.expires_at
            && !same_instant(Some(expires), remote.expires_at.as_deref())
        {
            fields.push("expiresAt");
            update.expires_at = Some(Some(expires.clone()));
        }
        let update = (!fields.is_empty()).then_some(update);
        (fields, update)
    }

    /// The fixed fields where `remote` differs: the API cannot change them.
    pub fn immutable_conflicts(&self, remote: &api::ApiKey) -> Vec<&'static str> {
        let mut fields = Vec::new();
        if set_and_differs(&self.user_id, &remote.user_id) {
            fields.push("userId");
        }
        if let (Some(wanted), Some(have)) = (&self.workspace_id, &remote.workspace_id)
            && wanted != have
        {
            fields.push("workspaceId");
        }
        fields
    }

    /// The rotation interval, parsed; `None` when not set.
    pub fn rotation_interval(&self) -> Result<Option<std::time::Duration>, String> {
        self.rotation
            .as_ref()
            .map_or(Ok(None), |r| r.schedule.parsed_interval())
    }

    /// The transition period, parsed and at least [`MIN_TRANSITION`]; `None` when not set.
    pub fn transition_period(&self) -> Result<Option<std::time::Duration>, String> {
        let period = super::rotation::parse_duration(
            "spec.rotation.transitionPeriod",
            self.rotation
                .as_ref()
                .and_then(|r| r.transition_period.as_deref()),
        )?;
        match period {
            Some(p) if p < MIN_TRANSITION => Err(format!(
                "spec.rotation.transitionPeriod must be at least 30m, got {p:?}"
            )),
            other => Ok(other),
        }
    }
}

/// An instant as the API writes one: RFC 3339, or `2026-09-06 19:18:51` (no `T`, no zone: UTC),
/// as the live API also writes it.
fn instant(t: &str) -> Option<jiff::Timestamp> {
    t.parse::<jiff::Timestamp>().ok().or_else(|| {
        t.replace(' ', "T")
            .parse::<jiff::civil::DateTime>()
            .ok()
            .and_then(|d| d.to_zoned(jiff::tz::TimeZone::UTC).ok())
            .map(|z| z.timestamp())
    })
}

/// An instant the API wrote, as a spec takes it (RFC 3339 with its offset, which admission
/// requires); text that does not parse as it was.
pub(crate) fn rfc3339(t: &str) -> String {
    instant(t).map_or_else(|| t.to_string(), |at| at.to_string())
}

/// True when both are the same instant (or the same text, where one does not parse); the live
/// API also writes `2026-09-06 19:18:51` (no `T`, no zone: UTC).
pub(crate) fn same_instant(a: Option<&str>, b: Option<&str>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => match (instant(a), instant(b)) {
            (Some(x), Some(y)) => x == y,
            _ => a == b,
        },
        (a, b) => a == b,
    }
}

impl super::common::Governed for ApiKey {
    const WHAT: &'static str = "API key";
    const NAMING: super::common::Naming = super::common::Naming::Adopts;
    const NAMED_BY: &'static str = "";
    fn management_policy(&self) -> ManagementPolicy {
        self.spec.management_policy
    }
    fn orphaning(&self) -> Self {
        let mut copy = self.clone();
        copy.spec.deletion_policy = DeletionPolicy::Orphan;
        copy
    }
    fn orphans(&self) -> bool {
        self.spec.deletion_policy == DeletionPolicy::Orphan
    }
    /// An API key is never adopted: its value cannot be read back, so only a key aigw created
    /// (and whose value it wrote into the Secret) is managed.
    fn named_remote(&self) -> Option<&str> {
        None
    }
}

super::common::recorded!(ApiKeyStatus, id, remote_updated_at);

fn is_zero(count: &u32) -> bool {
    *count == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_instant_the_api_wrote_is_written_as_rfc3339() {
        assert_eq!(rfc3339("2026-09-06 19:18:51"), "2026-09-06T19:18:51Z");
        assert_eq!(rfc3339("2026-09-06T21:18:51+02:00"), "2026-09-06T19:18:51Z");
        assert_eq!(rfc3339("not a date"), "not a date");
        assert!(same_instant(
            Some("2026-09-06 19:18:51"),
            Some("2026-09-06T19:18:51Z")
        ));
    }

    fn spec() -> ApiKeySpec {
        serde_json::from_value(json!({
            "name": "app", "kind": "service", "workspaceId": "ws-1",
            "scopes": ["completions.write", "logs.write"], "secretRef": {"name": "app-key"},
            "rateLimits": [{"type": "requests", "unit": "rpm", "value": 100}],
            "defaults": {"configId": "pc-a"}, "expiresAt": "2030-01-01T00:00:00Z"
        }))
        .unwrap()
    }

    fn remote() -> api::ApiKey {
        serde_json::from_value(json!({
            "id": "k1", "key": "****", "name": "app", "workspace_id": "ws-1",
            "scopes": ["logs.write", "completions.write"],
            "rate_limits": [{"type": "requests", "unit": "rpm", "value": 100}],
            "defaults": {"metadata": null, "config_id": "pc-a"}, "usage_limits": null,
            "expires_at": "2030-01-01 00:00:00", "allow_config_override": null
        }))
        .unwrap()
    }

    #[test]
    fn a_remote_matching_the_spec_needs_no_update() {
        let (fields, update) = spec().update_for(&remote(), Some("pc-a"));
        assert!(fields.is_empty(), "{fields:?}");
        assert!(update.is_none());
    }

    #[test]
    fn only_differing_fields_are_sent() {
        let mut remote = remote();
        remote.name = Some("renamed".into());
        remote.scopes = vec!["logs.write".into()];
        let (fields, update) = spec().update_for(&remote, Some("pc-a"));
        assert_eq!(fields, vec!["name", "scopes"]);
        let body = serde_json::to_value(update.unwrap()).unwrap();
        assert_eq!(
            body,
            json!({"name": "app", "scopes": ["completions.write", "logs.write"]})
        );
    }

    #[test]
    fn the_create_body_never_carries_a_rotation_policy() {
        let mut spec = spec();
        spec.rotation_policy = Some(Map::from_iter([(
            "rotation_period".into(),
            json!("weekly"),
        )]));
        let body = serde_json::to_value(spec.create_request(Some("pc-a"))).unwrap();
        assert!(body.get("rotation_policy").is_none(), "{body}");
        assert_eq!(body["defaults"]["config_id"], "pc-a");
    }

    #[test]
    fn transition_periods_under_30_minutes_are_refused() {
        let mut spec = spec();
        spec.rotation = Some(KeyRotation {
            transition_period: Some("29m".into()),
            ..Default::default()
        });
        assert!(spec.transition_period().is_err());
        spec.rotation.as_mut().unwrap().transition_period = Some("2h".into());
        assert_eq!(
            spec.transition_period().unwrap(),
            Some(std::time::Duration::from_secs(7200))
        );
    }
}
