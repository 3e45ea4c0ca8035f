//! The `SecretReference` kind: the organisation's pointer into an external secret manager (AWS
//! Secrets Manager, Azure Key Vault, HashiCorp Vault) that integrations map fields to.

use super::common::DeletionPolicy;
use std::collections::BTreeMap;

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::rules;
use serde_json::{Map, Value};

use super::common::{SendsSecretValues, differing, other_slug, set_and_differs};
use super::managed_spec::ManagedSpec;
use super::managed_status::{CREATE_SETTLED, ManagedStatus, Reword, embeds_managed};
use crate::api;

/// A secret reference (`/ai_gw/admin/v2/secret-references`): where the gateway reads a secret
/// (a manager, a path, a key) and how it authenticates to that manager. The authentication
/// (`auth_config`) is write-only in the API: it comes from a Secret of the operator's own
/// namespace, aigw keeps a keyed hash of what it sent, and a changed Secret is sent with
/// exactly one PUT.
// kube's printcolumn(...) lists repeat `type_ = "string"`, which this lint misreads.
#[allow(clippy::duplicated_attributes)]
#[skip_serializing_none]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "aigw.io",
    doc = "A pointer of the organisation (cluster-scoped) into an external secret manager, which integrations map fields to, kept in line with the management API by aigw.",
    version = "v1alpha1",
    kind = "SecretReference",
    plural = "secretreferences",
    shortname = "aigwsecref",
    category = "aigw",
    status = "SecretReferenceStatus",
    printcolumn(name = "Slug", type_ = "string", json_path = ".status.slug"),
    printcolumn(name = "Manager", type_ = "string", json_path = ".spec.managerType")
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = rules::set_at_creation("slug", "SecretReference"))]
#[x_kube(validation = rules::same_connection("SecretReference"))]
pub struct SecretReferenceSpec {
    /// The reference's slug (what an integration's `secret_mappings` may name). Set, aigw
    /// adopts the reference with this slug if one exists, and otherwise creates one with it;
    /// absent, the API makes one from the name (recorded in `status.slug`). Only set at
    /// creation.
    #[schemars(regex(pattern = r"^[a-zA-Z0-9_-]+$"), length(min = 1, max = 255))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("spec.slug is immutable: create a new SecretReference to use another slug"))]
    pub slug: Option<String>,

    /// Display name of the reference.
    #[schemars(length(min = 1, max = 255))]
    pub name: String,

    /// Description of the reference.
    #[schemars(length(max = 1024))]
    pub description: Option<String>,

    /// The secret manager: `aws_sm`, `azure_kv` or `hashicorp_vault`. Immutable (the API
    /// cannot change it).
    #[x_kube(validation = Rule::new("self == oldSelf").message("spec.managerType is immutable: create a new SecretReference for another manager"))]
    pub manager_type: ManagerType,

    /// Where the secret is in the manager (an AWS secret name or ARN, a Key Vault secret name,
    /// a Vault path).
    #[schemars(length(min = 1, max = 1024))]
    pub secret_path: String,

    /// The key within the secret, when the secret holds several (an integration's mapping may
    /// override it).
    #[schemars(length(min = 1, max = 255))]
    pub secret_key: Option<String>,

    /// The Secret whose keys and values form `auth_config`, the credentials the gateway
    /// authenticates to the manager with (e.g. `aws_auth_type`, `aws_access_key_id`,
    /// `aws_secret_access_key`, `aws_region`). Read only from the namespace the operator reads
    /// Connection Secrets from, and only from a Secret labelled `aigw.io/cluster-readable:
    /// "true"`. Write-only: never shown in status, events or logs; a change of the Secret is
    /// applied with one PUT. The API merges what is sent into what it has, so a key removed
    /// from the Secret stays set in the API.
    pub auth_config_secret_ref: AuthConfigSecretRef,

    /// The workspaces (UUIDs or slugs) that may use the reference; empty: every workspace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 1000))]
    #[x_kube(validation = Rule::new("self.all(w, size(w) > 0)").message("spec.allowedWorkspaces names a workspace by UUID or slug: an entry is empty"))]
    pub allowed_workspaces: Vec<String>,

    /// Tags of the reference; left as the API has them when absent.
    pub tags: Option<BTreeMap<String, String>>,

    /// What happens to the remote reference when this resource is deleted: `Delete` (the
    /// default) or `Orphan`. A reference the API reports in use (an integration maps a field to
    /// it) is not deleted: the resource reports `StillReferenced` and is deleted once nothing
    /// maps to it.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,

    /// Management policy and Connection: the block every kind keeps.
    #[serde(flatten)]
    pub managed: ManagedSpec,
}
embeds_managed!(SecretReferenceSpec, ManagedSpec);

/// The secret managers the API knows.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub enum ManagerType {
    /// AWS Secrets Manager.
    #[serde(rename = "aws_sm")]
    AwsSm,
    /// Azure Key Vault.
    #[serde(rename = "azure_kv")]
    AzureKv,
    /// HashiCorp Vault.
    #[serde(rename = "hashicorp_vault")]
    HashicorpVault,
}

impl ManagerType {
    /// As the API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AwsSm => "aws_sm",
            Self::AzureKv => "azure_kv",
            Self::HashicorpVault => "hashicorp_vault",
        }
    }
}

/// The Secret that holds `auth_config`.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuthConfigSecretRef {
    /// Name of the Secret; each of its keys is an `auth_config` field, sent as a string.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The Secret's namespace, if you want to say it: it must be the namespace the operator
    /// reads Connection Secrets from (any other is refused).
    pub namespace: Option<String>,
}

/// What aigw knows of the reference. Nothing here comes from `auth_config`: it is only ever
/// kept as a keyed hash.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = Reword(&[CREATE_SETTLED]))]
pub struct SecretReferenceStatus {
    /// Generation, conditions, create intent and claim: the block every kind keeps.
    #[serde(flatten)]
    pub managed: ManagedStatus,
    /// UUID of the remote reference.
    pub id: Option<String>,
    /// Slug of the remote reference.
    pub slug: Option<String>,
    /// HMAC-SHA256 (keyed with the operator's Secret `aigw-hash-key`, over the object's uid)
    /// of what aigw last sent that a read never shows: `auth_config` (the Secret's values) and
    /// the allowed workspaces. A change of either is found by comparing this hash. Never the
    /// values.
    pub secret_hash: Option<String>,
    /// When aigw last wrote the reference.
    pub last_applied_at: Option<String>,
}
embeds_managed!(SecretReferenceStatus, ManagedStatus);

impl SecretReferenceSpec {
    /// `allow_all_workspaces` as the spec means it.
    fn allow_all(&self) -> bool {
        self.allowed_workspaces.is_empty()
    }

    fn tags_object(&self) -> Option<Map<String, Value>> {
        self.tags.as_ref().map(|tags| {
            tags.iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect()
        })
    }

    fn allowed(&self) -> Option<Vec<String>> {
        (!self.allow_all()).then(|| self.allowed_workspaces.clone())
    }
}

impl SendsSecretValues for SecretReferenceSpec {
    type Remote = api::SecretReference;
    type Values = Map<String, Value>;
    type Create = api::CreateSecretReferenceRequest;
    type Update = api::UpdateSecretReferenceRequest;
    const FROM_SECRET: &'static str =
        "authConfig (from spec.authConfigSecretRef) or allowedWorkspaces";

    /// The create body with `auth_config` filled in, in the tenant it names.
    fn create_request(
        &self,
        auth_config: Map<String, Value>,
        organisation_id: Option<String>,
    ) -> api::CreateSecretReferenceRequest {
        api::CreateSecretReferenceRequest {
            name: self.name.clone(),
            manager_type: self.manager_type.as_str().into(),
            auth_config: api::SensitiveFields(auth_config),
            secret_path: self.secret_path.clone(),
            slug: self.slug.clone(),
            description: self.description.clone(),
            secret_key: self.secret_key.clone(),
            allow_all_workspaces: Some(self.allow_all()),
            allowed_workspaces: self.allowed(),
            tags: self.tags_object(),
            organisation_id,
        }
    }

    /// The update body: every field the spec sets, `auth_config` included (merged by the API).
    fn update_request(
        &self,
        auth_config: Option<Map<String, Value>>,
    ) -> api::UpdateSecretReferenceRequest {
        let allowed = self.allowed();
        api::UpdateSecretReferenceRequest {
            name: Some(self.name.clone()),
            description: self.description.clone(),
            auth_config: auth_config.map(api::SensitiveFields),
            secret_path: Some(self.secret_path.clone()),
            secret_key: self.secret_key.clone(),
            allow_all_workspaces: allowed.is_none().then_some(true),
            allowed_workspaces: allowed,
            tags: self.tags_object(),
        }
    }

    /// Fields where `remote` differs from the spec as far as a read can tell (`auth_config`
    /// reads masked and the allowed workspaces not at all: the hash covers them).
    fn diff(&self, remote: &api::SecretReference) -> Vec<&'static str> {
        let allow_all = remote.allow_all_workspaces;
        let tags = self.tags_object();
        differing([
            ("name", self.name != remote.name),
            (
                "description",
                set_and_differs(&self.description, &remote.description),
            ),
            (
                "secretPath",
                remote.secret_path.as_deref() != Some(self.secret_path.as_str()),
            ),
            (
                "secretKey",
                set_and_differs(&self.secret_key, &remote.secret_key),
            ),
            (
                "allowedWorkspaces",
                allow_all.is_some_and(|all| all != self.allow_all()),
            ),
            ("tags", set_and_differs(&tags, &remote.tags)),
        ])
    }

    /// Fixed fields where the remote reference differs; no PUT can fix these.
    fn immutable_conflicts(&self, remote: &api::SecretReference) -> Vec<&'static str> {
        let manager = remote.manager_type.as_deref();
        differing([
            (
                "managerType",
                manager.is_some_and(|m| m != self.manager_type.as_str()),
            ),
            ("slug", other_slug(self.slug.as_ref(), &remote.slug)),
        ])
    }
}

super::common::governed!(
    SecretReference,
    "secret reference",
    DeletionPolicy::Orphan,
    CreatesAs slug
);

super::common::recorded!(SecretReferenceStatus, id or slug);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec() -> SecretReferenceSpec {
        serde_json::from_value(json!({
            "name": "AWS prod", "slug": "aws-prod", "managerType": "aws_sm",
            "secretPath": "prod/openai", "authConfigSecretRef": {"name": "aws-sm"},
            "allowedWorkspaces": ["ws-a"], "tags": {"team": "platform"}
        }))
        .unwrap()
    }

    fn remote(value: Value) -> api::SecretReference {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_read_that_matches_differs_in_nothing() {
        let read = remote(json!({
            "id": "r1", "slug": "aws-prod", "name": "AWS prod", "manager_type": "aws_sm",
            "secret_path": "prod/openai", "allow_all_workspaces": false,
            "tags": {"team": "platform"},
            "auth_config": {"aws_auth_type": "accessKey", "masked_aws_secret_access_key": "****"}
        }));
        assert!(spec().diff(&read).is_empty());
        assert!(spec().immutable_conflicts(&read).is_empty());
    }

    #[test]
    fn readable_fields_and_the_manager_are_compared() {
        let read = remote(json!({
            "id": "r1", "slug": "aws-prod", "name": "renamed", "manager_type": "azure_kv",
            "secret_path": "other", "allow_all_workspaces": true, "tags": {}
        }));
        assert_eq!(
            spec().diff(&read),
            ["name", "secretPath", "allowedWorkspaces", "tags"]
        );
        assert_eq!(spec().immutable_conflicts(&read), ["managerType"]);
    }

    #[test]
    fn no_allowed_workspaces_means_every_workspace() {
        let mut spec = spec();
        spec.allowed_workspaces.clear();
        let update = spec.update_request(None);
        assert_eq!(update.allow_all_workspaces, Some(true));
        assert_eq!(update.allowed_workspaces, None);
        let create = spec.create_request(Map::new(), None);
        assert_eq!(create.allow_all_workspaces, Some(true));
        let create = super::tests::spec().create_request(Map::new(), None);
        assert_eq!(create.allow_all_workspaces, Some(false));
        assert_eq!(create.allowed_workspaces, Some(vec!["ws-a".to_string()]));
    }
}
