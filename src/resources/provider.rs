//! The `Provider` kind: a workspace's handle on an integration, what configs route to as
//! `@<slug>`.

use super::common::{DeletionPolicy, differing, other_workspace, set_and_differs};
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::rules;
use serde_json::Value;

use super::limits::{UsageLimits, covers};
use super::managed_spec::ManagedSpec;
use super::managed_status::{ManagedStatus, embeds_managed};
use crate::api;

/// A provider (`/ai_gw/v2/providers`): binds an integration into one workspace. Configs route
/// to it as `@<slug>`, or name it with `spec.resourceRefs` (`kind: Provider`). Nothing a
/// provider read returns is kept: a read may carry the upstream key.
// kube's printcolumn(...) lists repeat `type_ = "string"`, which this lint misreads.
#[allow(clippy::duplicated_attributes)]
#[skip_serializing_none]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "aigw.io",
    doc = "A provider: a workspace's handle on an integration, kept in line with the management API by aigw.",
    version = "v1alpha1",
    kind = "Provider",
    plural = "providers",
    shortname = "aigwprov",
    category = "aigw",
    namespaced,
    status = "ProviderStatus",
    printcolumn(name = "Slug", type_ = "string", json_path = ".status.slug"),
    printcolumn(name = "Workspace", type_ = "string", json_path = ".spec.workspaceId"),
    printcolumn(
        name = "Integration",
        type_ = "string",
        json_path = ".spec.integration"
    )
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.integration) != has(self.integrationId)").message("set exactly one of spec.integration (an Integration resource) or spec.integrationId (an existing remote integration)"))]
#[x_kube(validation = rules::set_at_creation("slug", "Provider"))]
#[x_kube(validation = Rule::new("has(self.integration) == has(oldSelf.integration) && has(self.integrationId) == has(oldSelf.integrationId)").field_path(".integration").reason(Reason::FieldValueForbidden).message("the integration of a Provider cannot change: create a new Provider instead"))]
#[x_kube(validation = rules::same_connection("Provider"))]
#[x_kube(validation = rules::one_workspace())]
#[x_kube(validation = rules::instant("expiresAt"))]
#[x_kube(validation = rules::workspace_named_alike("Provider"))]
pub struct ProviderSpec {
    /// The provider's slug, what configs route to (`@<slug>`). Set, aigw creates the provider
    /// with it, or adopts the provider that has it (which needs `allowAdoption`); absent, the
    /// API makes one from the name (`status.slug`). Only set at creation.
    #[schemars(regex(pattern = r"^[a-zA-Z0-9_-]+$"), length(min = 1, max = 255))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("slug is immutable: create a new Provider to use another slug"))]
    pub slug: Option<String>,

    /// Display name of the provider.
    #[schemars(length(min = 1, max = 255))]
    pub name: String,

    /// The workspace (UUID) the provider belongs to; or name it by resource with
    /// `workspaceRef`. Immutable.
    #[schemars(length(min = 1, max = 255))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("workspaceId is immutable: create a new Provider to move it to another workspace"))]
    pub workspace_id: Option<String>,

    /// The Workspace resource whose workspace the provider belongs to, instead of `workspaceId` (set
    /// one of the two): the UUID it recorded is used once it is Ready, and the Connection's grants
    /// apply to that workspace. Immutable.
    #[x_kube(validation = Rule::new("self == oldSelf").message("workspaceRef is immutable: create a new Provider to move it to another workspace"))]
    pub workspace_ref: Option<super::common::WorkspaceRef>,

    /// Name of the Integration resource whose integration this provider binds. The provider
    /// waits until that Integration is Ready and grants this workspace access. Immutable.
    #[x_kube(validation = Rule::new("self == oldSelf").message("integration is immutable: create a new Provider to bind another integration"))]
    #[schemars(regex(pattern = super::bounds::DNS_SUBDOMAIN), length(max = 253))]
    pub integration: Option<String>,

    /// Or: the UUID (or slug) of an existing remote integration no Integration resource
    /// manages. Immutable.
    #[x_kube(validation = Rule::new("self == oldSelf").message("integrationId is immutable: create a new Provider to bind another integration"))]
    pub integration_id: Option<String>,

    /// A note on the provider. Without one, aigw notes a provider it creates as `created by
    /// aigw for <uid>`: after a lost create answer, that tells its provider from another
    /// party's of the same name.
    pub note: Option<String>,

    /// The provider's budget; left as the API has it when absent.
    pub usage_limits: Option<UsageLimits>,

    /// When the provider stops working (RFC 3339); left as the API has it when absent.
    pub expires_at: Option<String>,

    /// Any string; changing it resets the provider's usage (an `exhausted` provider becomes
    /// `active` again).
    pub reset_usage: Option<String>,

    /// What happens to the remote provider when this resource is deleted: `Delete` (the
    /// default) or `Orphan`. A provider a Config of this namespace names is not deleted until
    /// that reference is gone.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,

    /// Management policy and Connection: the block every kind keeps.
    #[serde(flatten)]
    pub managed: ManagedSpec,
}
embeds_managed!(ProviderSpec, ManagedSpec);

/// What aigw knows of the provider: identifiers only. A provider read may carry the upstream
/// key, so nothing else of it is ever recorded.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderStatus {
    /// Generation, conditions, create intent and claim: the block every kind keeps.
    #[serde(flatten)]
    pub managed: ManagedStatus,
    /// UUID of the remote provider.
    pub id: Option<String>,
    /// Slug of the remote provider: configs route to `@<slug>`.
    pub slug: Option<String>,
    /// The UUID of the integration the provider binds, as sent (the Integration resource's
    /// UUID, or the one `spec.integrationId`, a UUID or slug, was resolved to).
    pub integration_id: Option<String>,
    /// The `spec.resetUsage` value last acted upon.
    pub observed_reset_usage: Option<String>,
    /// When aigw last wrote the provider.
    pub last_applied_at: Option<String>,
}
embeds_managed!(ProviderStatus, ManagedStatus);

impl ProviderSpec {
    /// The workspace's UUID: `workspaceId`, or the one the operator resolved `workspaceRef` to
    /// (empty before it did).
    pub fn workspace(&self) -> &str {
        self.workspace_id.as_deref().unwrap_or_default()
    }

    /// The create body binding `integration_id`. Never inline rate limits (they fail live).
    pub fn create_request(&self, integration_id: &str) -> api::CreateProviderRequest {
        api::CreateProviderRequest {
            name: self.name.clone(),
            integration_id: integration_id.to_string(),
            workspace_id: Some(self.workspace().to_string()),
            slug: self.slug.clone(),
            note: self.note.clone(),
            usage_limits: self.usage_limits.as_ref().map(UsageLimits::to_api),
            rate_limits: None,
            expires_at: self.expires_at.clone(),
        }
    }

    /// The fields where `remote` differs from the spec, and the update body that sends only
    /// those (with `reset_usage` when `reset` asks for it). Fields the spec leaves out are the
    /// API's to manage.
    pub fn update_for(
        &self,
        remote: &api::Provider,
        reset: bool,
    ) -> (Vec<&'static str>, Option<api::UpdateProviderRequest>) {
        let mut fields = Vec::new();
        let mut update = api::UpdateProviderRequest::default();
        if remote.name != self.name {
            fields.push("name");
            update.name = Some(self.name.clone());
        }
        if set_and_differs(&self.note, &remote.note) {
            fields.push("note");
            update.note = Some(self.note.clone());
        }
        if let Some(limits) = &self.usage_limits {
            let wanted = limits.to_api();
            if !covers(remote.usage_limits.as_ref(), &wanted) {
                fields.push("usageLimits");
                update.usage_limits = Some(Some(wanted));
            }
        }
        if let Some(at) = &self.expires_at
            && !super::api_key::same_instant(Some(at), remote.expires_at.as_deref())
        {
            fields.push("expiresAt");
            update.expires_at = Some(Some(at.clone()));
        }
        if reset {
            fields.push("resetUsage");
            update.reset_usage = Some(true);
        }
        let update = (!fields.is_empty()).then_some(update);
        (fields, update)
    }

    /// Fixed fields where `remote` differs: its workspace (when the read says it), and its
    /// integration unless it is one of `integration` (the UUID and slug it may be read as).
    pub fn immutable_conflicts(
        &self,
        remote: &api::Provider,
        integration: &[&str],
    ) -> Vec<&'static str> {
        let binds = remote.integration_id.as_deref();
        differing([
            (
                "workspaceId",
                other_workspace(remote.workspace_id.as_deref(), self.workspace()),
            ),
            (
                "integration",
                binds.is_some_and(|id| !integration.contains(&id)),
            ),
        ])
    }
}

super::common::governed!(Provider, "provider", DeletionPolicy::Orphan, CreatesAs slug);

super::common::recorded!(ProviderStatus, id or slug);

impl Provider {
    /// True when `value` (a Config document's string) routes to this provider: `@<slug>` of
    /// the slug it recorded or names.
    pub fn routed_by(&self, value: &Value) -> bool {
        let slugs = [
            self.spec.slug.as_deref(),
            self.status.as_ref().and_then(|s| s.slug.as_deref()),
        ];
        value
            .as_str()
            .and_then(|v| v.strip_prefix('@'))
            .is_some_and(|slug| slugs.contains(&Some(slug)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec() -> ProviderSpec {
        serde_json::from_value(json!({
            "name": "OpenAI for team A", "workspaceId": "ws-a", "integration": "openai-prod",
            "note": "managed", "usageLimits": {"creditLimit": 50, "type": "tokens"},
            "expiresAt": "2030-01-01T00:00:00Z"
        }))
        .unwrap()
    }

    #[test]
    fn a_read_with_credentials_and_extra_fields_is_in_sync() {
        let read: api::Provider = serde_json::from_value(json!({
            "id": "p1", "slug": "openai-a", "name": "OpenAI for team A", "integration_id": "i1",
            "note": "managed", "usage_limits": {"credit_limit": 50, "type": "tokens", "alert_threshold": null},
            "expires_at": "2030-01-01 00:00:00", "key": "sk-live", "model_config": {}
        }))
        .unwrap();
        let (fields, update) = spec().update_for(&read, false);
        assert!(fields.is_empty() && update.is_none(), "{fields:?}");
        assert!(
            spec()
                .immutable_conflicts(&read, &["i1", "openai-prod"])
                .is_empty()
        );
        assert_eq!(
            spec().immutable_conflicts(&read, &["i2"]),
            vec!["integration"]
        );
        let (fields, update2) = spec().update_for(&read, true);
        assert!(fields.contains(&"resetUsage"));
        assert_eq!(update2.unwrap().reset_usage, Some(true));
    }

    #[test]
    fn the_create_body_never_carries_rate_limits() {
        let body = serde_json::to_value(spec().create_request("i1")).unwrap();
        assert_eq!(body["integration_id"], "i1");
        assert_eq!(body["workspace_id"], "ws-a");
        assert_eq!(body["usage_limits"]["credit_limit"], 50);
        assert!(body.get("rate_limits").is_none());
    }
}
