//! RateLimitsPolicy: the shared policy flow ([`super::policy`]) over the rate-limits API: PUT
//! the mutable fields (name, unit, value, conditions) only when they differ, delete per
//! `deletionPolicy`.

use super::policy::{self, Facts, PolicyKind, PolicyStatus};
use crate::api::{
    ApiError, Client, Listing, RateLimitsListQuery, RateLimitsPolicy as RemotePolicy,
};
use crate::controller::create::body_hash;
use crate::controller::drift::{Listed, Row};
use crate::controller::driver::{Change, Cx, Managed};
use crate::controller::error::Error;
use crate::controller::status::common_status;
use crate::resources::rate_limits_policy::{
    RateLimitsPolicy, RateLimitsPolicyDeletionPolicy, RateLimitsPolicyStatus,
};

common_status!(
    RateLimitsPolicyStatus,
    |s| RateLimitsPolicyStatus {
        pending_create: s.pending_create.as_ref().map(|_| String::new()),
        ..s.clone()
    },
    intent_when = |s| s.pending_create.is_some()
);

impl PolicyStatus for RateLimitsPolicyStatus {
    fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }
}

impl PolicyKind for RateLimitsPolicy {
    type Remote = RemotePolicy;
    const WHAT: &'static str = "rate-limits policy";
    const REMOVAL: (&'static str, &'static str) = ("Deleted", "delete");

    fn facts(remote: &RemotePolicy) -> Facts<'_> {
        Facts {
            id: &remote.id,
            name: remote.name.as_deref(),
            active: remote.status == crate::api::PolicyStatus::Active,
            workspace_id: remote.workspace_id.as_deref(),
            created_at: remote.created_at.as_deref(),
            updated_at: remote.last_updated_at.as_deref(),
        }
    }
    fn record(status: &mut RateLimitsPolicyStatus, remote: Option<&RemotePolicy>) {
        let facts = remote.map(Self::facts);
        status.id = facts.as_ref().map(|r| r.id.to_string());
        status.remote_status = facts.as_ref().map(|r| r.remote_status().into());
        status.remote_updated_at = facts.and_then(|r| r.updated_at.map(str::to_string));
    }
    fn record_created(status: &mut RateLimitsPolicyStatus, id: String) {
        status.id = Some(id);
        status.remote_status = Some("active".into());
    }
    fn adopts(&self) -> Option<&str> {
        self.spec.policy_id.as_deref()
    }
    fn name(&self) -> Option<&str> {
        self.spec.name.as_deref()
    }
    fn workspace_id(&self) -> Option<&str> {
        self.spec.workspace_id.as_deref()
    }
    fn orphaned(&self) -> bool {
        self.spec.deletion_policy == RateLimitsPolicyDeletionPolicy::Orphan
    }
    fn diff(&self, remote: &RemotePolicy) -> Vec<&'static str> {
        self.spec.diff(remote)
    }
    fn immutable_conflicts(&self, remote: &RemotePolicy) -> Vec<&'static str> {
        self.spec.immutable_conflicts(remote)
    }
    fn create_hash(&self) -> Option<String> {
        body_hash(self.metadata.uid.as_deref(), &self.spec.create_request())
    }
    async fn get(client: &Client, id: &str) -> Result<RemotePolicy, ApiError> {
        client.rate_limits().get(id).await
    }
    async fn list(
        client: &Client,
        workspace: Option<String>,
    ) -> Result<Listing<RemotePolicy>, ApiError> {
        let query = RateLimitsListQuery {
            workspace_id: workspace,
            ..Default::default()
        };
        client.rate_limits().listing(&query).await
    }
    async fn create(&self, client: &Client) -> Result<String, ApiError> {
        let created = client
            .rate_limits()
            .create(&self.spec.create_request())
            .await?;
        Ok(created.id)
    }
    async fn update(&self, client: &Client, id: &str) -> Result<(), ApiError> {
        client
            .rate_limits()
            .update(id, &self.spec.update_request())
            .await
    }
    async fn delete(client: &Client, id: &str) -> Result<(), ApiError> {
        client.rate_limits().delete(id).await
    }
}

impl Managed for RateLimitsPolicy {
    type Status = RateLimitsPolicyStatus;
    const KIND: &'static str = "RateLimitsPolicy";
    const MANAGER: &'static str = "aigw/ratelimitspolicy";
    const LISTED: bool = true;

    fn status(&self) -> Option<&RateLimitsPolicyStatus> {
        self.status.as_ref()
    }

    async fn apply(
        &self,
        cx: &Cx<'_, Self>,
        status: &mut RateLimitsPolicyStatus,
    ) -> Result<Vec<Change>, Error> {
        policy::apply(self, cx, status).await
    }

    async fn observe_only(
        &self,
        cx: &Cx<'_, Self>,
        status: &mut RateLimitsPolicyStatus,
    ) -> Result<Vec<&'static str>, Error> {
        policy::observe_only(self, cx, status).await
    }

    async fn cleanup(&self, cx: &Cx<'_, Self>) -> Result<Vec<Change>, Error> {
        policy::cleanup(self, cx).await
    }
}

impl Listed for RateLimitsPolicy {
    fn list_workspace(&self) -> Option<String> {
        self.spec.workspace_id.clone()
    }

    async fn list(client: &Client, workspace: Option<String>) -> Result<Listing<Row>, ApiError> {
        policy::rows::<Self>(client, workspace).await
    }
}
