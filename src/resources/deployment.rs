//! The `Deployment` kind: a registered self-hosted gateway and its auth settings.

use super::common::ArchivePolicy;
use std::collections::BTreeMap;

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::rules;

use super::common::free_form_object;
use super::managed_spec::ManagedSpec;
use super::managed_status::{ManagedStatus, PENDING_CREATE, Reword, embeds_managed};
pub use super::rotation::{Rotation, RotationStatus, WorkloadKind, WorkloadRef};

/// A self-hosted gateway registered with the management API (`/ai_gw/admin/v2/deployments`).
/// On create, the one-time `client_auth`, `username` and `password` are written into the
/// Secret named by `spec.credentialsSecretRef`.
// kube's printcolumn(...) lists repeat `type_ = "string"`, which this lint misreads.
#[allow(clippy::duplicated_attributes)]
#[skip_serializing_none]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "aigw.io",
    doc = "A self-hosted AI gateway registered with the management API, with its auth settings and credentials Secret.",
    version = "v1alpha1",
    kind = "Deployment",
    plural = "deployments",
    shortname = "aigwdeploy",
    category = "aigw",
    namespaced,
    status = "DeploymentStatus",
    printcolumn(
        name = "Connection",
        type_ = "string",
        json_path = ".status.connectionStatus"
    ),
    printcolumn(name = "Remote", type_ = "string", json_path = ".status.remoteStatus")
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.rotation) || !has(self.rotation.interval) || self.rotation.interval.contains('d') || duration(self.rotation.interval) > duration('0s')").field_path(".rotation.interval").reason(Reason::FieldValueInvalid).message("spec.rotation.interval must be longer than zero"))]
#[x_kube(validation = rules::set_at_creation("deploymentId", "Deployment"))]
#[x_kube(validation = rules::same_connection("Deployment"))]
#[x_kube(validation = rules::no_credentials_in_url("authSettings.gatewayBaseUrl", "spec.authSettings.gatewayBaseUrl", "the gateway authenticates its callers itself"))]
#[x_kube(validation = rules::no_credentials_in_url("authSettings.mcpGatewayBaseUrl", "spec.authSettings.mcpGatewayBaseUrl", "the gateway authenticates its callers itself"))]
#[schemars(transform = Reword(&[
    (
        "managementPolicy",
        "`Full` (the default): aigw creates, updates, rotates and archives the remote \
         deployment to match this spec. `Observe`: aigw only reads it and reports \
         differences in the `Drifted` condition; it never writes to it, also not when \
         this resource is deleted (whatever `deletionPolicy` says).",
    ),
]))]
pub struct DeploymentSpec {
    /// UUID of an existing remote deployment to adopt. When absent, aigw registers a new
    /// deployment. Only set at creation: it cannot be added, removed or changed afterwards.
    #[x_kube(validation = Rule::new("self == oldSelf").message("deploymentId is immutable: create a new Deployment to adopt another remote deployment"))]
    pub deployment_id: Option<String>,

    /// Display name of the deployment.
    #[schemars(length(min = 1, max = 255))]
    pub name: String,

    /// `production` or `non_production`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<DeploymentType>,

    /// Whether this is the organisation's default deployment.
    pub is_default: Option<bool>,

    /// Free-form deployment configuration, passed to the API as `deployment_config`.
    #[serde(default)]
    #[schemars(schema_with = "optional_free_form_object")]
    pub deployment_config: Option<serde_json::Map<String, serde_json::Value>>,

    /// Tags of the deployment (string map). Keys under `aigw.io/` are aigw's own (it tags each
    /// gateway it creates with `aigw.io/uid` to find it again after a lost answer) and are
    /// refused.
    #[x_kube(validation = Rule::new("self.all(k, !k.startsWith('aigw.io/'))").message("tags under aigw.io/ are aigw's own (it marks the gateways it creates with aigw.io/uid): remove them from spec.tags"))]
    pub tags: Option<BTreeMap<String, String>>,

    /// Who may use the gateway and where it lives.
    pub auth_settings: Option<AuthSettings>,

    /// When true, `authSettings.workspacesAllowed` and `jwtSubsAllowed` replace the remote
    /// lists instead of being merged into them.
    pub override_existing: Option<bool>,

    /// Secret (in this namespace) that receives the one-time `client_auth`, `username` and
    /// `password` when aigw creates or rotates the deployment. aigw creates it and owns it.
    pub credentials_secret_ref: SecretRef,

    /// What happens to the remote deployment when this resource is deleted: `Archive` (the
    /// default; the API never hard-deletes deployments) or `Orphan`.
    #[serde(default)]
    pub deletion_policy: ArchivePolicy,

    /// Cluster-managed rotation of the gateway's credentials.
    pub rotation: Option<Rotation>,

    /// Management policy and Connection: the block every kind keeps.
    #[serde(flatten)]
    pub managed: ManagedSpec,
}
embeds_managed!(DeploymentSpec, ManagedSpec);

fn optional_free_form_object(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    free_form_object(generator)
}

/// Kind of deployment.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeploymentType {
    /// A production gateway.
    Production,
    /// A non-production gateway.
    NonProduction,
}

/// Authentication settings of the gateway, mapped to the API's `auth_settings`.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuthSettings {
    /// Base URL where the gateway is reachable, e.g. `https://gateway.example.com`. Recorded
    /// as written (the API takes any text; aigw never calls it), but without credentials
    /// (`user:password@`).
    pub gateway_base_url: Option<String>,
    /// Base URL of the gateway's MCP endpoint, as `gatewayBaseUrl`.
    pub mcp_gateway_base_url: Option<String>,
    /// Workspaces (slugs or UUIDs) allowed to use the gateway.
    pub workspaces_allowed: Option<Vec<String>>,
    /// JWT subjects allowed to use the gateway.
    pub jwt_subs_allowed: Option<Vec<String>>,
    /// Maps a JWT subject to the workspace its requests run in.
    pub jwt_sub_workspace_mapping: Option<BTreeMap<String, String>>,
    /// Allow every workspace of the organisation.
    pub allow_all_workspaces: Option<bool>,
}

/// A Secret in the resource's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretRef {
    /// Name of the Secret.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// Connection health of the gateway as the management API reports it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ConnectionStatus {
    /// The gateway's heartbeat reaches the control plane.
    Healthy,
    /// The gateway reported problems.
    Unhealthy,
    /// No heartbeat has been seen.
    Unknown,
}

/// Remote lifecycle state of the deployment.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RemoteStatus {
    /// In use.
    Active,
    /// Archived (deleted).
    Archived,
}

/// What the management API reports about the deployment.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = Reword(&[PENDING_CREATE]))]
pub struct DeploymentStatus {
    /// Generation, conditions, create intent and claim: the block every kind keeps.
    #[serde(flatten)]
    pub managed: ManagedStatus,
    /// UUID of the remote deployment.
    pub id: Option<String>,
    /// Slug of the remote deployment.
    pub slug: Option<String>,
    /// `healthy`, `unhealthy` or `unknown`, from the gateway's heartbeat.
    pub connection_status: Option<ConnectionStatus>,
    /// When the gateway last synced with the control plane.
    pub last_synced_at: Option<String>,
    /// `active` or `archived`.
    pub remote_status: Option<RemoteStatus>,
    /// Where the credentials' rotation stands.
    #[serde(flatten)]
    pub rotation: RotationStatus,
    /// What the last drift correction replaced: when, and each changed field with the remote
    /// and the desired value (masked where secret).
    pub last_drift_correction: Option<Box<super::common::DriftCorrection>>,
}
embeds_managed!(DeploymentStatus, ManagedStatus);

use crate::api;

fn to_api_type(t: DeploymentType) -> api::DeploymentType {
    match t {
        DeploymentType::Production => api::DeploymentType::Production,
        DeploymentType::NonProduction => api::DeploymentType::NonProduction,
    }
}

impl AuthSettings {
    fn to_api(&self) -> api::DeploymentAuthSettingsInput {
        api::DeploymentAuthSettingsInput {
            gateway_base_url: self.gateway_base_url.clone(),
            mcp_gateway_base_url: self.mcp_gateway_base_url.clone(),
            workspaces_allowed: self.workspaces_allowed.clone(),
            jwt_subs_allowed: self.jwt_subs_allowed.clone(),
            jwt_sub_workspace_mapping: self.jwt_sub_workspace_mapping.clone(),
            allow_all_workspaces: self.allow_all_workspaces,
            remove_workspaces_allowed: None,
            remove_subs_allowed: None,
        }
    }
}

/// `wanted` is satisfied by `remote`: the same set when the lists replace, a subset when the
/// API merges them (the default, without `overrideExisting`).
fn list_matches(wanted: &[String], remote: Option<&Vec<String>>, replace: bool) -> bool {
    let remote = remote.map(Vec::as_slice).unwrap_or_default();
    let contained = wanted.iter().all(|w| remote.contains(w));
    if replace {
        contained && remote.iter().all(|r| wanted.contains(r))
    } else {
        contained
    }
}

/// Tag every deployment aigw creates carries, holding the resource's uid: a deterministic
/// identity to find it by after a create whose answer was lost.
pub const UID_TAG: &str = "aigw.io/uid";

impl DeploymentSpec {
    /// The tags to send: the spec's, plus [`UID_TAG`] with the resource's uid on a deployment
    /// aigw creates (its identity, for finding it again after a lost create answer).
    fn tags_with_uid(&self, uid: Option<&str>) -> Option<BTreeMap<String, String>> {
        match uid {
            None => self.tags.clone(),
            Some(uid) => {
                let mut tags = self.tags.clone().unwrap_or_default();
                tags.insert(UID_TAG.to_string(), uid.to_string());
                Some(tags)
            }
        }
    }

    /// The create body for this spec, tagged with the resource's `uid`.
    pub fn create_request(&self, uid: Option<&str>) -> api::CreateDeploymentRequest {
        api::CreateDeploymentRequest {
            name: self.name.clone(),
            organisation_id: None,
            slug: None,
            deployment_type: self.type_.map(to_api_type),
            deployment_config: self
                .deployment_config
                .clone()
                .map(serde_json::Value::Object),
            is_default: self.is_default,
            auth_settings: self.auth_settings.as_ref().map(AuthSettings::to_api),
            tags: self.tags_with_uid(uid),
        }
    }

    /// The update body: every field the spec sets, and `status: active` (an archived
    /// deployment that is still declared is brought back). `uid` keeps the identity tag of a
    /// deployment aigw created.
    pub fn update_request(&self, uid: Option<&str>) -> api::UpdateDeploymentRequest {
        api::UpdateDeploymentRequest {
            name: Some(self.name.clone()),
            deployment_type: self.type_.map(to_api_type),
            status: Some(api::DeploymentStatus::Active),
            deployment_config: self
                .deployment_config
                .clone()
                .map(serde_json::Value::Object),
            is_default: self.is_default,
            rotate_auth: None,
            override_existing: self.override_existing,
            auth_settings: self.auth_settings.as_ref().map(AuthSettings::to_api),
            tags: self.tags_with_uid(uid),
        }
    }

    /// Fields where the remote deployment differs from the spec; empty when in sync. Fields the
    /// spec leaves out are the API's to manage and are not compared.
    pub fn diff(&self, remote: &api::Deployment) -> Vec<&'static str> {
        let mut fields = Vec::new();
        if self.name != remote.name {
            fields.push("name");
        }
        if self
            .type_
            .is_some_and(|t| Some(to_api_type(t)) != remote.deployment_type)
        {
            fields.push("type");
        }
        if self
            .is_default
            .is_some_and(|d| Some(d) != remote.is_default)
        {
            fields.push("isDefault");
        }
        if let Some(config) = &self.deployment_config
            && !remote.deployment_config.as_ref().is_some_and(|remote| {
                super::common::json_equivalent(&serde_json::Value::Object(config.clone()), remote)
            })
        {
            fields.push("deploymentConfig");
        }
        // The identity tag is aigw's own, not part of the user's tags.
        let remote_tags = remote.tags.as_ref().map(|tags| {
            let mut tags = tags.clone();
            tags.remove(UID_TAG);
            tags
        });
        let wanted_tags = self.tags.as_ref().map(|tags| {
            let mut tags = tags.clone();
            tags.remove(UID_TAG);
            tags
        });
        if wanted_tags
            .as_ref()
            .is_some_and(|t| Some(t) != remote_tags.as_ref())
        {
            fields.push("tags");
        }
        if remote.status == Some(api::DeploymentStatus::Archived) {
            fields.push("status");
        }
        if let Some(wanted) = &self.auth_settings {
            let remote_auth = remote.auth_settings.clone().unwrap_or_default();
            let replace = self.override_existing == Some(true);
            let differs = wanted
                .gateway_base_url
                .as_ref()
                .is_some_and(|u| Some(u) != remote_auth.gateway_base_url.as_ref())
                || wanted
                    .mcp_gateway_base_url
                    .as_ref()
                    .is_some_and(|u| Some(u) != remote_auth.mcp_gateway_base_url.as_ref())
                || wanted.workspaces_allowed.as_ref().is_some_and(|w| {
                    !list_matches(w, remote_auth.workspaces_allowed.as_ref(), replace)
                })
                || wanted.jwt_subs_allowed.as_ref().is_some_and(|w| {
                    !list_matches(w, remote_auth.jwt_subs_allowed.as_ref(), replace)
                })
                || wanted
                    .jwt_sub_workspace_mapping
                    .as_ref()
                    .is_some_and(|m| Some(m) != remote_auth.jwt_sub_workspace_mapping.as_ref())
                || wanted
                    .allow_all_workspaces
                    .is_some_and(|a| Some(a) != remote_auth.allow_all_workspaces);
            if differs {
                fields.push("authSettings");
            }
        }
        fields
    }

    /// The rotation interval, parsed; `None` when not set.
    pub fn rotation_interval(&self) -> Result<Option<std::time::Duration>, String> {
        self.rotation
            .as_ref()
            .map_or(Ok(None), Rotation::parsed_interval)
    }
}

impl DeploymentSpec {
    /// A spec that adopts `remote` (by id) and matches it. No credential leaves the API: the spec
    /// only names the Secret the credentials are expected in.
    pub fn adopting(remote: &api::Deployment, secret_name: &str) -> DeploymentSpec {
        // Empty values are left out: a spec field that is absent is not compared, so the
        // manifest stays short and still matches.
        let auth = remote.auth_settings.as_ref().map(|a| AuthSettings {
            gateway_base_url: a.gateway_base_url.clone().filter(|u| !u.is_empty()),
            mcp_gateway_base_url: a.mcp_gateway_base_url.clone().filter(|u| !u.is_empty()),
            workspaces_allowed: a.workspaces_allowed.clone().filter(|w| !w.is_empty()),
            jwt_subs_allowed: a.jwt_subs_allowed.clone().filter(|s| !s.is_empty()),
            jwt_sub_workspace_mapping: a
                .jwt_sub_workspace_mapping
                .clone()
                .filter(|m| !m.is_empty()),
            allow_all_workspaces: a.allow_all_workspaces,
        });
        DeploymentSpec {
            deployment_id: Some(remote.id.clone()),
            name: remote.name.clone(),
            type_: remote
                .deployment_type
                .as_ref()
                .and_then(super::policy::same_enum),
            is_default: remote.is_default,
            deployment_config: remote
                .deployment_config
                .as_ref()
                .and_then(|c| c.as_object().cloned())
                .filter(|c| !c.is_empty()),
            // aigw's own identity tags stay out of manifests (admission refuses them).
            tags: remote
                .tags
                .clone()
                .map(|mut tags| {
                    tags.retain(|k, _| !k.starts_with("aigw.io/"));
                    tags
                })
                .filter(|t| !t.is_empty()),
            auth_settings: auth.filter(|a| a != &AuthSettings::default()),
            override_existing: None,
            credentials_secret_ref: SecretRef {
                name: secret_name.into(),
            },
            deletion_policy: ArchivePolicy::Orphan,
            rotation: None,
            managed: ManagedSpec::default(),
        }
    }
}

super::common::governed!(
    Deployment,
    "deployment",
    ArchivePolicy::Orphan,
    Adopts deployment_id as "spec.deploymentId"
);

super::common::recorded!(DeploymentStatus, id);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec() -> DeploymentSpec {
        serde_json::from_value(json!({
            "name": "edge", "type": "production", "credentialsSecretRef": {"name": "edge-creds"},
            "tags": {"team": "a"},
            "authSettings": {"gatewayBaseUrl": "https://gw", "workspacesAllowed": ["ws-1"]}
        }))
        .unwrap()
    }

    fn remote(workspaces: &[&str]) -> api::Deployment {
        serde_json::from_value(json!({
            "id": "d1", "name": "edge", "slug": "dp-edge", "type": "production", "status": "active",
            "is_default": 0, "connection_status": "unknown", "tags": {"team": "a"},
            "auth_settings": {"gateway_base_url": "https://gw", "workspaces_allowed": workspaces, "allow_all_workspaces": 0},
            "object": "deployment"
        }))
        .unwrap()
    }

    #[test]
    fn merged_lists_only_need_to_contain_the_spec() {
        assert!(spec().diff(&remote(&["ws-1", "ws-2"])).is_empty());
        assert_eq!(spec().diff(&remote(&["ws-2"])), vec!["authSettings"]);
        let mut replacing = spec();
        replacing.override_existing = Some(true);
        assert_eq!(
            replacing.diff(&remote(&["ws-1", "ws-2"])),
            vec!["authSettings"]
        );
    }

    #[test]
    fn archived_remote_is_a_difference() {
        let mut remote = remote(&["ws-1"]);
        remote.summary.status = Some(api::DeploymentStatus::Archived);
        assert_eq!(spec().diff(&remote), vec!["status"]);
    }

    #[test]
    fn rotation_interval_parses_go_style_durations() {
        let mut spec = spec();
        spec.rotation = Some(Rotation {
            interval: Some("720h".into()),
            ..Default::default()
        });
        assert_eq!(
            spec.rotation_interval().unwrap(),
            Some(std::time::Duration::from_secs(720 * 3600))
        );
    }
}
