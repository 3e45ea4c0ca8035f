//! RateLimitsPolicy: the policy verbs ([`super::policy`]) over the rate-limits API: the driver
//! PUTs the mutable fields (name, unit, value, conditions) only when they differ, and deletes
//! per `deletionPolicy`.

use super::policy::{self, Policy, PolicyKind};
use crate::api::{ApiError, Client, Listing, RateLimitsPolicy as RemotePolicy};
use crate::controller::driver::Managed;
use crate::controller::driver::drift::{Listed, Row};
use crate::controller::driver::status::EmbedsManagedStatus;
use crate::resources::common::DriftCorrection;
use crate::resources::rate_limits_policy::{RateLimitsPolicy, RateLimitsPolicyStatus};

impl EmbedsManagedStatus for RateLimitsPolicyStatus {
    fn without_own_timestamps(&self) -> Self {
        self.clone()
    }
}

impl PolicyKind for RateLimitsPolicy {
    const REMOVAL: (&'static str, &'static str) = ("Deleted", "delete");

    fn record(status: &mut RateLimitsPolicyStatus, remote: Option<&RemotePolicy>) {
        let facts = remote.map(<Self as Policy>::facts);
        status.id = facts.as_ref().map(|r| r.id.to_string());
        status.remote_status = facts.as_ref().map(|r| r.remote_status().into());
        status.remote_updated_at = facts.and_then(|r| r.updated_at.map(str::to_string));
    }
    fn record_created(status: &mut RateLimitsPolicyStatus, id: String) {
        status.id = Some(id);
        status.remote_status = Some("active".into());
    }
    fn id(status: &RateLimitsPolicyStatus) -> Option<&str> {
        status.id.as_deref()
    }
    fn record_drift(status: &mut RateLimitsPolicyStatus, replaced: DriftCorrection) {
        status.last_drift_correction = Some(Box::new(replaced));
    }
}

impl Managed for RateLimitsPolicy {
    crate::controller::driver::kind::namespaced_api!();
    type Status = RateLimitsPolicyStatus;
    const KIND: &'static str = "RateLimitsPolicy";
    const MANAGER: &'static str = "aigw/ratelimitspolicy";
    const LISTED: bool = true;

    crate::controller::driver::kind::status_field!();

    crate::controller::driver::flow::driven!();
}

impl Listed for RateLimitsPolicy {
    fn list_workspace(&self) -> Option<String> {
        self.spec.workspace_id.clone()
    }

    async fn list(client: &Client, workspace: Option<String>) -> Result<Listing<Row>, ApiError> {
        policy::rows::<Self>(client, workspace).await
    }
}
