//! RateLimitsPolicy: create or adopt, PUT the mutable fields (name, unit, value, conditions)
//! only when they differ, delete per `deletionPolicy`.

use super::driver::{Change, Cx, Managed, observed, orphaned, removed};
use super::error::Error;
use super::status::common_status;
use super::{now_rfc3339, spec_already_applied};
use crate::api::{RateLimitsListQuery, RateLimitsPolicy as RemotePolicy};
use crate::resources::rate_limits_policy::{
    RateLimitsPolicy, RateLimitsPolicyDeletionPolicy, RateLimitsPolicyStatus,
};

common_status!(
    RateLimitsPolicyStatus,
    |s| RateLimitsPolicyStatus {
        pending_create: s.pending_create.as_ref().map(|_| String::new()),
        ..s.clone()
    },
    fresh_read_when = |s| s.id.is_none() || s.pending_create.is_some()
);

impl Managed for RateLimitsPolicy {
    type Status = RateLimitsPolicyStatus;
    const KIND: &'static str = "RateLimitsPolicy";
    const MANAGER: &'static str = "aigw/ratelimitspolicy";

    fn status(&self) -> Option<&RateLimitsPolicyStatus> {
        self.status.as_ref()
    }

    fn connection_name(&self) -> &str {
        self.spec.connection_name()
    }

    async fn apply(
        &self,
        cx: &Cx<'_, Self>,
        status: &mut RateLimitsPolicyStatus,
    ) -> Result<Vec<Change>, Error> {
        let remote = match observe(self, cx, status).await? {
            Some(remote) => remote,
            None => {
                return create(self, cx, status)
                    .await
                    .map(|c| c.into_iter().collect());
            }
        };
        status.id = Some(remote.id.clone());
        status.remote_status = Some(
            match remote.status {
                crate::api::PolicyStatus::Active => "active",
                crate::api::PolicyStatus::Archived => "archived",
            }
            .to_string(),
        );
        let conflicts = self.spec.immutable_conflicts(&remote);
        if !conflicts.is_empty() {
            return Err(Error::InvalidSpec(format!(
                "remote policy {} has a different {} and the API cannot change it; create a new RateLimitsPolicy instead",
                remote.id,
                conflicts.join(", ")
            )));
        }
        let differences = self.spec.diff(&remote);
        if differences.is_empty() {
            return Ok(Vec::new());
        }
        cx.api
            .rate_limits()
            .update(&remote.id, &self.spec.update_request())
            .await
            .map_err(|e| Error::api(format!("update rate-limits policy {}", remote.id), e))?;
        let fields = differences.join(", ");
        Ok(vec![if spec_already_applied(
            self.metadata.generation,
            status.observed_generation,
            &status.conditions,
        ) {
            Change::new(
                "DriftCorrected",
                format!(
                    "rate-limits policy {} was changed outside aigw ({fields}); restored it",
                    remote.id
                ),
            )
        } else {
            Change::new(
                "Updated",
                format!("updated rate-limits policy {} ({fields})", remote.id),
            )
        }])
    }

    async fn cleanup(&self, cx: &Cx<'_, Self>) -> Result<Vec<Change>, Error> {
        let status = self.status.clone().unwrap_or_default();
        let known = status.id.or(self.spec.policy_id.clone());
        if self.spec.deletion_policy == RateLimitsPolicyDeletionPolicy::Orphan {
            return Ok(orphaned(&format!(
                "rate-limits policy {}",
                known.unwrap_or_default()
            )));
        }
        let pending = match (&known, status.pending_create) {
            (None, Some(_)) => find_by_name(self, cx).await?.map(|found| found.id),
            _ => None,
        };
        let Some(id) = known.or(pending) else {
            return Ok(Vec::new());
        };
        let result = cx.api.rate_limits().delete(&id).await;
        removed(
            "Deleted",
            "delete",
            &format!("rate-limits policy {id}"),
            result,
        )
    }
}

async fn observe(
    policy: &RateLimitsPolicy,
    cx: &Cx<'_, RateLimitsPolicy>,
    status: &mut RateLimitsPolicyStatus,
) -> Result<Option<RemotePolicy>, Error> {
    let adopted = policy.spec.policy_id.as_deref();
    let Some(id) = adopted.or(status.id.as_deref()).map(str::to_string) else {
        return Ok(None);
    };
    let result = cx.api.rate_limits().get(&id).await;
    let found = observed(
        &format!("rate-limits policy {id}"),
        adopted.map(|_| "spec.policyId"),
        result,
    )?;
    if found.is_none() {
        status.id = None;
        status.remote_status = None;
    }
    Ok(found)
}

/// Creates the remote policy, or finds the one an earlier create made. The intent is recorded
/// in `status.pendingCreate` before the POST (see `controller::config::create` for why); a
/// reconcile that finds it set looks the policy up by name, type and workspace first.
async fn create(
    policy: &RateLimitsPolicy,
    cx: &Cx<'_, RateLimitsPolicy>,
    status: &mut RateLimitsPolicyStatus,
) -> Result<Option<Change>, Error> {
    if status.pending_create.is_some()
        && let Some(found) = find_by_name(policy, cx).await?
    {
        status.id = Some(found.id.clone());
        status.pending_create = None;
        if !policy.spec.diff(&found).is_empty() {
            cx.api
                .rate_limits()
                .update(&found.id, &policy.spec.update_request())
                .await
                .map_err(|e| Error::api(format!("update rate-limits policy {}", found.id), e))?;
        }
        return Ok(Some(Change::new(
            "Created",
            format!(
                "found rate-limits policy {} from an earlier create whose answer was lost",
                found.id
            ),
        )));
    }
    status.pending_create = Some(now_rfc3339());
    cx.save_status(status).await?;
    match cx
        .api
        .rate_limits()
        .create(&policy.spec.create_request())
        .await
    {
        Ok(created) => {
            status.pending_create = None;
            status.id = Some(created.id.clone());
            status.remote_status = Some("active".into());
            Ok(Some(Change::new(
                "Created",
                format!("created rate-limits policy {}", created.id),
            )))
        }
        Err(e) if e.outcome_unknown() => Err(Error::api(
            "create rate-limits policy (outcome unknown, will look it up)",
            e,
        )),
        Err(e) => {
            status.pending_create = None;
            Err(Error::api("create rate-limits policy", e))
        }
    }
}

async fn find_by_name(
    policy: &RateLimitsPolicy,
    cx: &Cx<'_, RateLimitsPolicy>,
) -> Result<Option<RemotePolicy>, Error> {
    let query = RateLimitsListQuery {
        workspace_id: policy.spec.workspace_id.clone(),
        ..Default::default()
    };
    let policies = cx
        .api
        .rate_limits()
        .list(&query)
        .await
        .map_err(|e| Error::api("list rate-limits policies", e))?;
    // With a name, the name identifies it; without one, only an identical policy does.
    Ok(policies.into_iter().find(|p| {
        let same_name = match policy.spec.name.as_deref() {
            Some(name) => p.name.as_deref() == Some(name),
            None => policy.spec.diff(p).is_empty(),
        };
        same_name && policy.spec.immutable_conflicts(p).is_empty()
    }))
}
