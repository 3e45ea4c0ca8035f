//! The `Integration` kind: an organisation's upstream credential (an OpenAI key, Bedrock or
//! Vertex credentials), the workspaces that may use it and the models it exposes.

use super::common::{DeletionPolicy, differing, set_and_differs};
use std::borrow::Cow;

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::rules;
use serde_json::{Map, Value, json};

use super::config::{ConfigSecretRef, SecretKeyRef};
use super::config_document::SecretDocument;
use super::limits::{RateLimit, UsageLimits, covers};
use super::managed_spec::ManagedSpec;
use super::managed_status::{ManagedStatus, embeds_managed};
use crate::api;

/// An integration (`/ai_gw/admin/v2/integrations`): the upstream credential of the
/// organisation, granted to workspaces, on which Providers are made. The key and the
/// credential configurations come from Secrets of the operator's own namespace and are
/// write-only in the API: aigw keeps a salted hash of what it sent, and a changed Secret is
/// sent with exactly one PUT.
// kube's printcolumn(...) lists repeat `type_ = "string"`, which this lint misreads.
#[allow(clippy::duplicated_attributes)]
#[skip_serializing_none]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "aigw.io",
    doc = "An upstream credential of the organisation (cluster-scoped), granted to workspaces, kept in line with the management API by aigw.",
    version = "v1alpha1",
    kind = "Integration",
    plural = "integrations",
    shortname = "aigwint",
    category = "aigw",
    status = "IntegrationStatus",
    printcolumn(name = "Slug", type_ = "string", json_path = ".status.slug"),
    printcolumn(name = "Provider", type_ = "string", json_path = ".spec.aiProviderId"),
    printcolumn(
        name = "Workspaces",
        type_ = "string",
        json_path = ".status.workspaces[*]",
        priority = 1
    )
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = rules::set_at_creation("slug", "Integration"))]
#[x_kube(validation = rules::same_connection("Integration"))]
pub struct IntegrationSpec {
    /// The integration's slug. Set, aigw adopts the integration with this slug if one exists,
    /// and otherwise creates one with it; absent, the API makes one from the name (recorded in
    /// `status.slug`). Only set at creation.
    #[schemars(regex(pattern = r"^[a-zA-Z0-9_-]+$"), length(min = 1, max = 255))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("slug is immutable: create a new Integration to use another slug"))]
    pub slug: Option<String>,

    /// Display name of the integration.
    #[schemars(length(min = 1, max = 255))]
    pub name: String,

    /// The upstream provider: a catalogue entry such as `open-ai`, `anthropic`, `bedrock`,
    /// `vertex-ai`, `azure-openai` (on SCM, the entry's UUID). Immutable.
    #[schemars(length(min = 1, max = 255))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("aiProviderId is immutable: create a new Integration for another provider"))]
    pub ai_provider_id: String,

    /// Description of the integration.
    pub description: Option<String>,

    /// The Secret key holding the upstream key (an OpenAI or Anthropic API key). Read only from
    /// the namespace the operator reads Connection Secrets from, and only from a Secret labelled
    /// `aigw.io/cluster-readable: "true"`: a cluster-scoped resource never names another
    /// namespace's Secrets. A change of the Secret is applied with one PUT within seconds.
    pub key_secret_ref: Option<KeySecretRef>,

    /// Provider settings as the API takes them (free-form: `aws_region`, `aws_access_key_id`,
    /// `vertex_project_id`, `custom_host`, …), sent whole on every write. Credentials
    /// (`aws_secret_access_key`, `vertex_service_account_json`, `azure_entra_client_secret`, …)
    /// are refused here in plain text: set them with `secretRefs`.
    #[serde(default)]
    #[schemars(schema_with = "configurations_schema")]
    pub configurations: Option<Map<String, Value>>,

    /// Values of `configurations` taken from Secrets (of the operator's namespace, labelled as
    /// for `keySecretRef`), substituted when the integration is sent and never shown anywhere
    /// else: each names a JSON Pointer into `configurations` (e.g. `/aws_secret_access_key`)
    /// and a Secret key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub secret_refs: Vec<ConfigSecretRef>,

    /// Fields the gateway reads from an external secret manager through a secret reference,
    /// so the value never passes through Kubernetes or the API: each maps `key` or
    /// `configurations.<field>` to a SecretReference resource (`secretReferenceRef`, resolved
    /// to its remote id once it is Ready) or to a secret reference the API knows
    /// (`secretReference`, its UUID or slug, sent as written). Set, the list is the whole set
    /// (`[]` removes every mapping); absent, the API's mappings are left as they are. A field
    /// mapped here is not also set by `keySecretRef` or `secretRefs`.
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new("self.all(m, self.exists_one(o, o.targetField == m.targetField))").message("spec.secretMappings names a targetField twice: each field is mapped once"))]
    pub secret_mappings: Option<Vec<SecretMapping>>,

    /// The workspaces that may use the integration. Each is merged into the API's access list
    /// on its own (the others are never touched); a workspace removed from this list is
    /// disabled (the API keeps its row, `enabled: false`), not deleted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "workspaces_schema")]
    pub workspaces: Vec<WorkspaceAccess>,

    /// Which models the integration exposes. Models not listed are left as the API has them.
    pub models: Option<ModelAccess>,

    /// What happens to the remote integration when this resource is deleted: `Delete` (the
    /// default) or `Orphan`. An integration a Provider resource names is not deleted until that
    /// Provider is gone.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,

    /// Management policy and Connection: the block every kind keeps.
    #[serde(flatten)]
    pub managed: ManagedSpec,
}
embeds_managed!(IntegrationSpec, ManagedSpec);

/// Where the upstream key is.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeySecretRef {
    /// Name of the Secret.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Key within the Secret's data; its value is sent as a string (UTF-8).
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
    /// The Secret's namespace, if you want to say it: it must be the namespace the operator
    /// reads Connection Secrets from (any other is refused).
    pub namespace: Option<String>,
}

/// One field of the integration the gateway reads through a secret reference.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.secretReferenceRef) != has(self.secretReference)").message("a secretMappings entry names its secret reference once: set secretReferenceRef (a SecretReference resource) or secretReference (a UUID or slug), not both"))]
pub struct SecretMapping {
    /// The field the value goes to: `key`, or `configurations.<field>` (e.g.
    /// `configurations.aws_secret_access_key`).
    #[schemars(
        regex(pattern = r"^(key|configurations\.[A-Za-z0-9_]+)$"),
        length(max = 255)
    )]
    pub target_field: String,
    /// The SecretReference resource (cluster-scoped) holding the value; the integration waits
    /// until it is Ready on a Connection of the same tenant.
    pub secret_reference_ref: Option<SecretReferenceRef>,
    /// A secret reference the API knows, by UUID or slug, sent as written.
    #[schemars(length(min = 1, max = 255))]
    pub secret_reference: Option<String>,
    /// The key within the external secret, overriding the reference's own `secretKey`.
    #[schemars(length(min = 1, max = 255))]
    pub secret_key: Option<String>,
    /// How the gateway reads the value: `string` or `json`.
    pub value_format: Option<ValueFormat>,
}

/// A SecretReference resource, by name.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct SecretReferenceRef {
    /// Its `metadata.name`.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// How the gateway reads a mapped secret's value.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ValueFormat {
    /// As text.
    String,
    /// As a JSON document (a service-account file, say).
    Json,
}

impl SecretMapping {
    /// The API's entry, naming the secret reference by `reference` (the resolved UUID or slug).
    pub fn to_api(&self, reference: &str) -> Value {
        let mut entry = Map::new();
        entry.insert("target_field".into(), json!(self.target_field));
        entry.insert("secret_reference_id".into(), json!(reference));
        if let Some(key) = &self.secret_key {
            entry.insert("secret_key".into(), json!(key));
        }
        if let Some(format) = self.value_format {
            let format = match format {
                ValueFormat::String => "string",
                ValueFormat::Json => "json",
            };
            entry.insert("value_format".into(), json!(format));
        }
        Value::Object(entry)
    }
}

/// Whether the API's `secret_mappings` (`null` when unset) are `wanted`, by target field,
/// whatever their order: the reference, the key and the format each as sent (a null key or
/// format as left out).
pub fn same_mappings(wanted: &[Value], remote: Option<&[Value]>) -> bool {
    let remote = remote.unwrap_or_default();
    let entry = |m: &Value| {
        let field = |k: &str| m.get(k).filter(|v| !v.is_null()).cloned();
        (
            field("target_field"),
            field("secret_reference_id"),
            field("secret_key"),
            field("value_format"),
        )
    };
    let mut a: Vec<_> = wanted.iter().map(entry).collect();
    let mut b: Vec<_> = remote.iter().map(entry).collect();
    let key = |e: &(Option<Value>, Option<Value>, Option<Value>, Option<Value>)| {
        e.0.as_ref().map(Value::to_string)
    };
    a.sort_by_key(key);
    b.sort_by_key(key);
    a == b
}

/// One workspace's access to the integration.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceAccess {
    /// The workspace (UUID, or slug as the API lists its rows).
    #[schemars(length(min = 1, max = 255))]
    pub id: String,
    /// False keeps the row but disables it.
    #[serde(default = "enabled")]
    pub enabled: bool,
    /// The workspace's budget on this integration; left as the API has it when absent.
    pub usage_limits: Option<UsageLimits>,
    /// The workspace's rate limit on this integration; left as the API has it when absent.
    pub rate_limits: Option<RateLimit>,
}

fn enabled() -> bool {
    true
}

/// Model access of the integration.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelAccess {
    /// Whether models the provider adds later are enabled by default.
    pub allow_all_models: Option<bool>,
    /// Models and whether each is enabled; a model the integration does not offer is added as
    /// a custom model when `custom` is true.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<ModelEntry>,
}

/// One model.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelEntry {
    /// The model's slug, e.g. `gpt-4o`.
    #[schemars(length(min = 1, max = 255))]
    pub slug: String,
    /// False disables it (a built-in model cannot be deleted, only disabled).
    #[serde(default = "enabled")]
    pub enabled: bool,
    /// A custom model (e.g. a fine-tune) the integration does not offer by itself.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub custom: bool,
    /// The model a custom one is based on.
    pub base_model_slug: Option<String>,
}

/// What aigw knows of the integration. Nothing here comes from a credential: the key and
/// configurations are only ever kept as a salted hash.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IntegrationStatus {
    /// Generation, conditions, create intent and claim: the block every kind keeps.
    #[serde(flatten)]
    pub managed: ManagedStatus,
    /// UUID of the remote integration.
    pub id: Option<String>,
    /// Slug of the remote integration.
    pub slug: Option<String>,
    /// HMAC-SHA256 (keyed with the operator's Secret `aigw-hash-key`, over the object's uid)
    /// of the write-only values aigw last sent: the key
    /// and the configurations, Secret values filled in. The API never returns them, so a change
    /// (of the spec or of a Secret) is found by comparing this hash. Never the values.
    pub secret_hash: Option<String>,
    /// The workspaces aigw enabled, so that one removed from `spec.workspaces` is disabled.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workspaces: Vec<String>,
    /// When aigw last wrote the integration.
    pub last_applied_at: Option<String>,
}
embeds_managed!(IntegrationStatus, ManagedStatus);

/// `configurations`: free-form, credential keys refused in plain text at the top level (deeper
/// ones are refused before any write).
fn configurations_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let schema = super::common::refusing_credentials(
        |key| {
            format!(
                "A credential: refused here in plain text. Keep it in a Secret and set it with spec.secretRefs (path: /{key})."
            )
        },
        Map::new(),
    );
    serde_json::from_value(schema).unwrap_or_else(|_| schemars::json_schema!({"type": "object"}))
}

/// `workspaces`: a list keyed by `id` (one entry per workspace; server-side apply merges by it).
fn workspaces_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut schema = generator.subschema_for::<Vec<WorkspaceAccess>>();
    if let Some(object) = schema.as_object_mut() {
        object.insert("x-kubernetes-list-type".into(), "map".into());
        object.insert("x-kubernetes-list-map-keys".into(), json!(["id"]));
        object.insert("maxItems".into(), json!(1000));
    }
    schema
}

/// The path the key goes to in [`IntegrationSpec::document`].
pub const KEY_PATH: &str = "/key";

impl SecretDocument for IntegrationSpec {
    const FIELD: &'static str = "spec.configurations";

    /// `{configurations}`; the key goes to `/key` and the configuration Secrets under
    /// `/configurations` ([`Self::secret_refs`]).
    fn document(&self) -> Map<String, Value> {
        let mut document = Map::new();
        if let Some(configurations) = &self.configurations {
            document.insert(
                "configurations".into(),
                Value::Object(configurations.clone()),
            );
        }
        document
    }

    /// `keySecretRef` at `/key`, each of `secretRefs` under `/configurations`.
    fn secret_refs(&self) -> Cow<'_, [ConfigSecretRef]> {
        let key = self.key_secret_ref.iter().map(|r| ConfigSecretRef {
            path: KEY_PATH.into(),
            secret_key_ref: SecretKeyRef {
                name: r.name.clone(),
                key: r.key.clone(),
            },
        });
        let configurations = self.secret_refs.iter().map(|r| ConfigSecretRef {
            path: format!("/configurations{}", r.path),
            secret_key_ref: r.secret_key_ref.clone(),
        });
        Cow::Owned(key.chain(configurations).collect())
    }
}

impl IntegrationSpec {
    /// The create body sending `document` (`{key?, configurations?}`, Secret values filled in).
    /// Never lets the API make a default provider.
    pub fn create_request_with(
        &self,
        document: &Map<String, Value>,
        organisation_id: Option<String>,
    ) -> api::CreateIntegrationRequest {
        let (key, configurations) = write_only(document);
        api::CreateIntegrationRequest {
            name: self.name.clone(),
            ai_provider_id: self.ai_provider_id.clone(),
            slug: self.slug.clone(),
            key,
            description: self.description.clone(),
            organisation_id,
            workspace_id: None,
            configurations,
            create_default_provider: Some(false),
            default_provider_slug: None,
            secret_mappings: None,
            pricing_adjustments: None,
        }
    }

    /// The update body: the name, the description and every write-only value, sent whole.
    pub fn update_request_with(
        &self,
        document: &Map<String, Value>,
    ) -> api::UpdateIntegrationRequest {
        let (key, configurations) = write_only(document);
        api::UpdateIntegrationRequest {
            name: Some(self.name.clone()),
            key,
            description: self.description.clone(),
            configurations,
            secret_mappings: None,
            pricing_adjustments: None,
        }
    }

    /// Fields where `remote` differs from the spec as far as a read can tell: the name, the
    /// description when the spec sets one, and each readable configuration field the spec sets
    /// (secret ones read masked; the hash covers them).
    pub fn diff(&self, remote: &api::Integration) -> Vec<&'static str> {
        let shown = remote.configurations.as_ref();
        let differs = self.configurations.iter().flatten().any(|(key, value)| {
            let from_secret = self.secret_refs.iter().any(|r| {
                r.path
                    .trim_start_matches('/')
                    .split('/')
                    .next()
                    .is_some_and(|top| top == key)
            });
            !from_secret
                && !crate::api::secret_fields::is_secret_key(key)
                && shown
                    .and_then(|s| s.get(key))
                    .is_some_and(|have| !super::common::json_equivalent(have, value))
        });
        differing([
            ("name", self.name != remote.name),
            (
                "description",
                set_and_differs(&self.description, &remote.description),
            ),
            ("configurations", differs),
        ])
    }

    /// Fixed fields where the remote integration differs; no PUT can fix these. A
    /// workspace-scoped integration is not an organisation one and is refused too.
    pub fn immutable_conflicts(&self, remote: &api::Integration) -> Vec<&'static str> {
        let provider = remote.ai_provider_id.as_deref();
        let workspace = remote.workspace_id.as_deref();
        differing([
            (
                "aiProviderId",
                provider.is_some_and(|p| p != self.ai_provider_id),
            ),
            ("workspaceId", workspace.is_some_and(|w| !w.is_empty())),
        ])
    }

    /// The workspace access rows to PUT so the API matches the spec: the spec's rows that
    /// differ (or that a short list cannot show), and `enabled: false` for each workspace aigw
    /// enabled before (`managed`) that the spec no longer lists. Rows of other workspaces are
    /// never sent. Never asks for a default provider.
    pub fn access_updates(
        &self,
        remote: &api::IntegrationWorkspaces,
        managed: &[String],
    ) -> Vec<api::WorkspaceAccessUpdate> {
        let complete = remote.complete();
        let row = |id: &str| remote.workspaces.iter().find(|r| r.id == id);
        let mut updates = Vec::new();
        for wanted in &self.workspaces {
            let usage = wanted.usage_limits.as_ref().map(UsageLimits::to_api);
            let rate = wanted.rate_limits.as_ref().map(RateLimit::to_api);
            let differs = match row(&wanted.id) {
                None => wanted.enabled || !complete,
                Some(have) => {
                    have.enabled != wanted.enabled
                        || usage.as_ref().is_some_and(|u| {
                            !covers(Some(&Value::Array(have.usage_limits.clone())), u)
                        })
                        || rate.as_ref().is_some_and(|r| {
                            !covers(Some(&Value::Array(have.rate_limits.clone())), r)
                        })
                }
            };
            if differs {
                updates.push(api::WorkspaceAccessUpdate {
                    id: wanted.id.clone(),
                    enabled: wanted.enabled,
                    usage_limits: usage.map(|u| Some(vec![u])),
                    rate_limits: rate.map(|r| Some(vec![r])),
                    create_default_provider: Some(false),
                    ..Default::default()
                });
            }
        }
        for id in managed {
            let listed = self.workspaces.iter().any(|w| &w.id == id);
            let enabled = match row(id) {
                Some(have) => have.enabled,
                None => !complete,
            };
            if !listed && enabled {
                updates.push(api::WorkspaceAccessUpdate {
                    id: id.clone(),
                    enabled: false,
                    create_default_provider: Some(false),
                    ..Default::default()
                });
            }
        }
        updates
    }

    /// The workspaces the spec enables (what `status.workspaces` records once applied).
    pub fn enabled_workspaces(&self) -> Vec<String> {
        self.workspaces
            .iter()
            .filter(|w| w.enabled)
            .map(|w| w.id.clone())
            .collect()
    }

    /// The model access PUT that makes `remote` match the spec, if anything differs.
    pub fn model_updates(
        &self,
        remote: &api::IntegrationModels,
    ) -> Option<api::UpdateModelsRequest> {
        let access = self.models.as_ref()?;
        let models: Vec<api::ModelAccessUpdate> = access
            .models
            .iter()
            .filter(|wanted| {
                remote
                    .models
                    .iter()
                    .find(|m| m.slug == wanted.slug)
                    .is_none_or(|have| have.enabled != wanted.enabled)
            })
            .map(|wanted| api::ModelAccessUpdate {
                slug: wanted.slug.clone(),
                enabled: wanted.enabled,
                is_custom: wanted.custom.then_some(true),
                base_model_slug: wanted.base_model_slug.clone(),
                ..Default::default()
            })
            .collect();
        let allow_all = access
            .allow_all_models
            .filter(|wanted| remote.allow_all_models != Some(*wanted));
        if models.is_empty() && allow_all.is_none() {
            return None;
        }
        Some(api::UpdateModelsRequest {
            models,
            allow_all_models: allow_all,
        })
    }
}

/// The key and configurations of a filled document, as request fields.
fn write_only(
    document: &Map<String, Value>,
) -> (Option<api::SecretString>, Option<api::SensitiveFields>) {
    let key = document
        .get("key")
        .and_then(Value::as_str)
        .map(api::SecretString::from);
    let configurations = document
        .get("configurations")
        .and_then(Value::as_object)
        .map(|c| api::SensitiveFields(c.clone()));
    (key, configurations)
}

super::common::governed!(Integration, "integration", DeletionPolicy::Orphan, CreatesAs slug);

super::common::recorded!(IntegrationStatus, id or slug);

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> IntegrationSpec {
        serde_json::from_value(json!({
            "name": "OpenAI prod", "aiProviderId": "open-ai", "slug": "openai-prod",
            "keySecretRef": {"name": "openai", "key": "api-key"},
            "configurations": {"aws_region": "eu-west-1"},
            "secretRefs": [{"path": "/aws_secret_access_key", "secretKeyRef": {"name": "aws", "key": "secret"}}],
            "workspaces": [{"id": "ws-a"}, {"id": "ws-b", "usageLimits": {"creditLimit": 100, "type": "cost"}}],
            "models": {"models": [{"slug": "gpt-4o-mini", "enabled": false}]}
        }))
        .unwrap()
    }

    fn rows(value: Value) -> api::IntegrationWorkspaces {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn the_key_and_configuration_secrets_are_slots_of_one_document() {
        let refs = spec().secret_refs().into_owned();
        let paths: Vec<&str> = refs.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(paths, ["/key", "/configurations/aws_secret_access_key"]);
        let marked = crate::resources::config_document::MarkedDocument::new(&spec()).unwrap();
        let values = [
            ("/key".to_string(), "sk-1".to_string()),
            (
                "/configurations/aws_secret_access_key".to_string(),
                "aws-1".to_string(),
            ),
        ]
        .into();
        let filled = marked.filled(&values);
        let body = spec().create_request_with(&filled, Some("1234".into()));
        let sent = serde_json::to_value(&body).unwrap();
        assert_eq!(sent["key"], "sk-1");
        assert_eq!(sent["configurations"]["aws_secret_access_key"], "aws-1");
        assert_eq!(sent["configurations"]["aws_region"], "eu-west-1");
        assert_eq!(sent["create_default_provider"], false);
        assert_eq!(sent["organisation_id"], "1234");
        assert!(!format!("{body:?}").contains("sk-1"));
        let mut plain = spec();
        plain.configurations = Some(
            json!({"aws_secret_access_key": "x"})
                .as_object()
                .unwrap()
                .clone(),
        );
        plain.secret_refs.clear();
        assert!(crate::resources::config_document::MarkedDocument::new(&plain).is_err());
    }

    #[test]
    fn access_updates_touch_only_differing_rows_and_disable_removed_ones() {
        let remote = rows(json!({"total": 3, "workspaces": [
            {"id": "ws-a", "enabled": true},
            {"id": "ws-b", "enabled": true, "usage_limits": [{"credit_limit": 100, "type": "cost", "next_usage_reset_at": null}]},
            {"id": "ws-old", "enabled": true},
            {"id": "ws-other", "enabled": true}]}));
        assert!(spec().access_updates(&remote, &["ws-a".into()]).is_empty());
        let updates = spec().access_updates(&remote, &["ws-a".into(), "ws-old".into()]);
        assert_eq!(updates.len(), 1, "{updates:?}");
        assert_eq!(
            (updates[0].id.as_str(), updates[0].enabled),
            ("ws-old", false)
        );
        assert_eq!(updates[0].create_default_provider, Some(false));
        let empty = rows(json!({"total": 0, "workspaces": []}));
        let updates = spec().access_updates(&empty, &[]);
        let ids: Vec<&str> = updates.iter().map(|u| u.id.as_str()).collect();
        assert_eq!(ids, ["ws-a", "ws-b"]);
        assert!(updates[1].usage_limits.is_some());
    }

    #[test]
    fn model_updates_send_only_what_differs() {
        let remote: api::IntegrationModels = serde_json::from_value(json!({
            "models": [{"slug": "gpt-4o", "enabled": true}, {"slug": "gpt-4o-mini", "enabled": 1}],
            "allow_all_models": true
        }))
        .unwrap();
        let update = spec().model_updates(&remote).unwrap();
        assert_eq!(update.models.len(), 1);
        assert!(!update.models[0].enabled);
        let mut done = remote.clone();
        done.models[1].enabled = false;
        assert!(spec().model_updates(&done).is_none());
    }

    #[test]
    fn a_masked_read_is_in_sync_and_a_visible_edit_is_not() {
        let read: api::Integration = serde_json::from_value(json!({
            "id": "i1", "slug": "openai-prod", "name": "OpenAI prod", "ai_provider_id": "open-ai",
            "masked_key": "****abcd",
            "configurations": {"aws_region": "eu-west-1", "masked_aws_secret_access_key": "****"}
        }))
        .unwrap();
        assert!(spec().diff(&read).is_empty());
        assert!(spec().immutable_conflicts(&read).is_empty());
        let mut edited = read.clone();
        edited
            .configurations
            .as_mut()
            .unwrap()
            .insert("aws_region".into(), json!("us-east-1"));
        assert_eq!(spec().diff(&edited), vec!["configurations"]);
        edited.ai_provider_id = Some("bedrock".into());
        edited.workspace_id = Some("ws-a".into());
        assert_eq!(
            spec().immutable_conflicts(&edited),
            vec!["aiProviderId", "workspaceId"]
        );
    }
}
