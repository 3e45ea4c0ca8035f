//! RateLimitsPolicy: the policy verbs ([`super::policy`]) over the rate-limits API: the driver
//! PUTs the mutable fields (name, unit, value, conditions) only when they differ, and deletes
//! per `deletionPolicy`.

use super::policy::{self, PolicyKind};
use crate::api::{ApiError, Client, Listing};
use crate::controller::driver::Managed;
use crate::controller::driver::drift::{Listed, Row};
use crate::controller::driver::status::EmbedsManagedStatus;
use crate::resources::rate_limits_policy::{RateLimitsPolicy, RateLimitsPolicyStatus};

impl EmbedsManagedStatus for RateLimitsPolicyStatus {}

impl PolicyKind for RateLimitsPolicy {
    const REMOVAL: (&'static str, &'static str) = ("Deleted", "delete");
}

impl Managed for RateLimitsPolicy {
    crate::controller::driver::kind::namespaced_api!();
    const KIND: &'static str = "RateLimitsPolicy";
    const LISTED: bool = true;

    crate::controller::driver::flow::driven!();
}

impl Listed for RateLimitsPolicy {
    fn list_workspace(&self) -> Option<String> {
        self.spec.identity.workspace_id.clone()
    }

    async fn list(client: &Client, workspace: Option<String>) -> Result<Listing<Row>, ApiError> {
        policy::rows::<Self>(client, workspace).await
    }
}
