//! What the policy kinds (`RateLimitsPolicy`, `UsageLimitsPolicy`) share, bound once per kind:
//! a remote object with a UUID and no slug, in one workspace, adopted by `spec.policyId`, with
//! mutable and fixed fields. The operator's policy flow, `plan` and `export` are written once
//! against [`Policy`].

use std::fmt::Debug;
use std::future::Future;

use k8s_openapi::NamespaceResourceScope;
use kube::Resource;
use kube::core::{Message, Rule};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::common::WorkspaceRef;
use crate::api::{ApiError, Client, Listing, Reading};
use crate::controller::process::Watchable;

/// The fields every policy kind's spec opens with (flattened: the same keys at the top of
/// `spec`): the remote policy it adopts, its name and its workspace.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyIdentity {
    /// UUID of an existing remote policy to adopt. When absent, aigw creates a new policy.
    /// Only set at creation: it cannot be added, removed or changed afterwards.
    pub policy_id: Option<String>,

    /// Display name of the policy.
    #[schemars(length(max = 255))]
    pub name: Option<String>,

    /// Workspace (UUID or slug) the policy belongs to. Immutable.
    #[schemars(length(min = 1))]
    pub workspace_id: Option<String>,

    /// The Workspace resource whose workspace the policy belongs to, instead of `workspaceId` (set
    /// at most one of the two): the UUID it recorded is used once it is Ready, and the Connection's grants
    /// apply to that workspace. Immutable.
    pub workspace_ref: Option<WorkspaceRef>,
}

impl PolicyIdentity {
    /// True when the spec names the policy and the remote one is named otherwise (a spec
    /// without a name leaves the remote name alone).
    pub fn differs_in_name(&self, remote: Option<&String>) -> bool {
        self.name.is_some() && self.name.as_ref() != remote
    }

    /// The identity of a spec adopting `remote` (by id).
    pub fn adopting(facts: &Facts<'_>) -> Self {
        Self {
            policy_id: Some(facts.id.to_string()),
            name: facts.name.map(str::to_string),
            workspace_id: facts.workspace_id.map(str::to_string),
            workspace_ref: None,
        }
    }
}

/// Makes the fixed fields of [`PolicyIdentity`] refuse a change (`self == oldSelf`), with
/// messages naming the kind: `#[schemars(transform = FixedIdentity("RateLimitsPolicy"))]` on
/// the kind's spec.
pub struct FixedIdentity(pub &'static str);

impl schemars::transform::Transform for FixedIdentity {
    fn transform(&mut self, schema: &mut schemars::Schema) {
        let kind = self.0;
        let fixed = [
            ("policyId", "adopt another remote policy"),
            ("workspaceId", "change it"),
            ("workspaceRef", "move it to another workspace"),
        ];
        let Some(properties) = schema
            .get_mut("properties")
            .and_then(serde_json::Value::as_object_mut)
        else {
            return;
        };
        for (field, instead) in fixed {
            let Some(property) = properties.get_mut(field) else {
                continue;
            };
            let Ok(mut rules) = schemars::Schema::try_from(property.clone()) else {
                continue;
            };
            let rule = Rule::new("self == oldSelf").message(Message::Message(format!(
                "{field} is immutable: create a new {kind} to {instead}"
            )));
            if kube::core::validate(&mut rules, rule).is_ok() {
                *property = rules.to_value();
            }
        }
    }
}

/// What a flow needs to know of a remote policy as a read returns it.
pub struct Facts<'a> {
    pub id: &'a str,
    pub name: Option<&'a str>,
    pub active: bool,
    pub workspace_id: Option<&'a str>,
    pub created_at: Option<&'a str>,
    pub updated_at: Option<&'a str>,
}

impl Facts<'_> {
    /// `active` or `archived`, for `status.remoteStatus`.
    pub fn remote_status(&self) -> &'static str {
        if self.active { "active" } else { "archived" }
    }
}

/// The API and the CRD spell these enums the same way (`rpm`, `mcp_tools`, `cost`).
pub(crate) fn same_enum<A: Serialize, B: DeserializeOwned>(value: &A) -> Option<B> {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| serde_json::from_value(v).ok())
}

/// A policy kind's binding to its API: the calls, the diff, and the projection of a remote
/// policy onto a spec.
pub trait Policy:
    super::common::Governed + Watchable + Resource<Scope = NamespaceResourceScope> + Serialize
{
    type Spec: Serialize;
    /// The remote policy as a read returns it.
    type Remote: Serialize + Send + Sync;
    /// The create body.
    type Create: Serialize + Send + Sync;
    /// The kind's name: "RateLimitsPolicy".
    const RESOURCE: &'static str;

    fn spec(&self) -> &Self::Spec;
    fn facts(remote: &Self::Remote) -> Facts<'_>;
    /// `spec.policyId`: the existing policy this resource adopts.
    fn adopts(&self) -> Option<&str>;
    /// `status.id`: the policy this resource recorded.
    fn recorded(&self) -> Option<&str>;
    fn name(&self) -> Option<&str>;
    fn workspace_id(&self) -> Option<&str>;
    /// True when `deletionPolicy` leaves the remote policy in place.
    fn orphaned(&self) -> bool;
    /// Mutable fields that differ (a PUT fixes these).
    fn diff(&self, remote: &Self::Remote) -> Vec<&'static str>;
    /// Fixed fields that differ (no PUT can fix these).
    fn immutable_conflicts(&self, remote: &Self::Remote) -> Vec<&'static str>;
    fn create_request(&self) -> Self::Create;
    /// A spec that adopts `remote` (by id) and matches it, or why none can.
    fn projected(remote: &Self::Remote) -> Result<Self::Spec, String>;
    /// A resource named `name` holding `spec`, for `export`.
    fn with_spec(metadata: kube::api::ObjectMeta, spec: Self::Spec) -> Self;

    /// What correcting `remote` at time `at` replaces, in the spec's terms: the `fields` that
    /// differ (from [`Policy::diff`]), the remote's values as a spec adopting it would say them.
    fn drift_against(
        &self,
        remote: &Self::Remote,
        fields: &[&str],
        at: String,
    ) -> super::common::DriftCorrection {
        let current = Self::projected(remote)
            .ok()
            .and_then(|spec| serde_json::to_value(spec).ok())
            .unwrap_or_default();
        super::common::DriftCorrection::of_fields(at, None, self.spec(), &current, fields)
    }

    fn get(
        client: &Client,
        id: &str,
    ) -> impl Future<Output = Result<Self::Remote, ApiError>> + Send;
    /// Every policy of `workspace`, read as `reading` says.
    fn list(
        client: &Client,
        workspace: Option<String>,
        reading: Reading,
    ) -> impl Future<Output = Result<Listing<Self::Remote>, ApiError>> + Send;
    /// POSTs the spec; the new id.
    fn create(&self, client: &Client) -> impl Future<Output = Result<String, ApiError>> + Send;
    /// PUTs the mutable fields.
    fn update(
        &self,
        client: &Client,
        id: &str,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// DELETEs (archives) the policy.
    fn delete(client: &Client, id: &str) -> impl Future<Output = Result<(), ApiError>> + Send;
}

/// The binding of one policy kind: `$kind` with spec `$spec`, read model `$remote`, create
/// body `$create`, deletion policy `$deletion` (its `Orphan` leaves the policy in place), the
/// client handle `$handle` (`rate_limits`), list query `$query` and projection `$project`.
macro_rules! bind_policy {
    (
        $kind:ty, spec $spec:ty, remote $remote:ty, create $create:ty,
        deletion $deletion:path, handle $handle:ident, query $query:ty, project $project:path
    ) => {
        impl $crate::resources::policy::Policy for $kind {
            type Spec = $spec;
            type Remote = $remote;
            type Create = $create;
            const RESOURCE: &'static str = stringify!($kind);

            fn spec(&self) -> &$spec {
                &self.spec
            }
            fn facts(remote: &$remote) -> $crate::resources::policy::Facts<'_> {
                $crate::resources::policy::Facts {
                    id: &remote.id,
                    name: remote.name.as_deref(),
                    active: remote.status == $crate::api::PolicyStatus::Active,
                    workspace_id: remote.workspace_id.as_deref(),
                    created_at: remote.created_at.as_deref(),
                    updated_at: remote.last_updated_at.as_deref(),
                }
            }
            fn adopts(&self) -> Option<&str> {
                self.spec.identity.policy_id.as_deref()
            }
            fn recorded(&self) -> Option<&str> {
                self.status.as_ref().and_then(|s| s.id.as_deref())
            }
            fn name(&self) -> Option<&str> {
                self.spec.identity.name.as_deref()
            }
            fn workspace_id(&self) -> Option<&str> {
                self.spec.identity.workspace_id.as_deref()
            }
            fn orphaned(&self) -> bool {
                matches!(self.spec.deletion_policy, $deletion)
            }
            fn diff(&self, remote: &$remote) -> Vec<&'static str> {
                self.spec.diff(remote)
            }
            fn immutable_conflicts(&self, remote: &$remote) -> Vec<&'static str> {
                self.spec.immutable_conflicts(remote)
            }
            fn create_request(&self) -> $create {
                self.spec.create_request()
            }
            fn projected(remote: &$remote) -> Result<$spec, String> {
                $project(remote)
            }
            fn with_spec(metadata: kube::api::ObjectMeta, spec: $spec) -> Self {
                Self {
                    metadata,
                    spec,
                    status: None,
                }
            }
            async fn get(
                client: &$crate::api::Client,
                id: &str,
            ) -> Result<$remote, $crate::api::ApiError> {
                client.$handle().get(id).await
            }
            async fn list(
                client: &$crate::api::Client,
                workspace: Option<String>,
                reading: $crate::api::Reading,
            ) -> Result<$crate::api::Listing<$remote>, $crate::api::ApiError> {
                type Query = $query;
                let query = Query {
                    workspace_id: workspace,
                    ..Default::default()
                };
                client.$handle().listing(&query, reading).await
            }
            async fn create(
                &self,
                client: &$crate::api::Client,
            ) -> Result<String, $crate::api::ApiError> {
                let created = client.$handle().create(&self.spec.create_request()).await?;
                Ok(created.id)
            }
            async fn update(
                &self,
                client: &$crate::api::Client,
                id: &str,
            ) -> Result<(), $crate::api::ApiError> {
                client
                    .$handle()
                    .update(id, &self.spec.update_request())
                    .await
            }
            async fn delete(
                client: &$crate::api::Client,
                id: &str,
            ) -> Result<(), $crate::api::ApiError> {
                client.$handle().delete(id).await
            }
        }
    };
}
pub(crate) use bind_policy;

/// The fixtures the policy kinds' tests share: one condition and one grouping key, and a remote
/// policy that matches them.
#[cfg(test)]
pub(crate) mod fixtures {
    use serde::de::DeserializeOwned;
    use serde_json::{Value, json};

    use super::Policy;

    /// `fields` and `shared`, as a `T`.
    fn with<T: DeserializeOwned>(mut fields: Value, shared: Value) -> T {
        if let (Some(fields), Value::Object(shared)) = (fields.as_object_mut(), shared) {
            fields.extend(shared);
        }
        serde_json::from_value(fields).unwrap()
    }

    /// A spec of the kind's own `fields` with the shared condition and grouping key.
    pub(crate) fn spec<S: DeserializeOwned>(fields: Value) -> S {
        let shared = json!({
            "conditions": [{"key": "workspace_id", "value": "ws-1"}], "groupBy": [{"key": "api_key"}]
        });
        with(fields, shared)
    }

    /// A remote policy of the kind's own `fields`, active in workspace `ws-1`, with the shared
    /// condition and grouping key as a read returns them.
    pub(crate) fn remote<R: DeserializeOwned>(fields: Value) -> R {
        let shared = json!({
            "status": "active", "workspace_id": "ws-1", "organisation_id": "o",
            "conditions": [{"key": "workspace_id", "value": ["ws-1"]}], "group_by": [{"key": "api_key"}],
            "created_at": "2026-01-01T00:00:00Z", "last_updated_at": "2026-01-01T00:00:00Z"
        });
        with(fields, shared)
    }

    /// Neither a mutable nor a fixed field differs between a resource holding `spec` and
    /// `remote`.
    pub(crate) fn assert_in_sync<P: Policy>(spec: P::Spec, remote: &P::Remote) {
        let policy = P::with_spec(Default::default(), spec);
        assert!(policy.diff(remote).is_empty());
        assert!(policy.immutable_conflicts(remote).is_empty());
    }
}
