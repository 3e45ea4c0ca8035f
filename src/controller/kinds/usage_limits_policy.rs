//! UsageLimitsPolicy: the policy verbs ([`super::policy`]) over the usage-limits API, and
//! the usage reset a change of `spec.resetUsage` asks for, exactly once.
//!
//! Applying a spec never resets usage: the update body has no reset field. A reset is a side
//! effect like a rotation: its intent (`status.resettingFor`, the trigger value) is written with
//! a resourceVersion precondition before the first reset call, so of two reconciles acting on
//! one view only one resets; it is cleared, with `status.observedResetUsage` set, by the same
//! reconcile's result write, which survives conflicts. Each value of the grouping key with usage
//! is reset with `PUT …/entities/{id}/reset`; a run that resumes an interrupted reset resets
//! only the values that still have usage.

use super::policy::{self, PolicyKind};
use crate::api::{ApiError, Client, Listing, UsageLimitsPolicy as RemotePolicy};
use crate::controller::driver::drift::{Listed, Row};
use crate::controller::driver::gate::Op;
use crate::controller::driver::status::EmbedsManagedStatus;
use crate::controller::driver::verbs::Changes;
use crate::controller::driver::{Change, Cx, Managed};
use crate::controller::error::{Error, Halt, Wait};
use crate::controller::now_rfc3339;
use crate::resources::usage_limits_policy::{
    UsageLimitsPolicy, UsageLimitsPolicyStatus, ValueUsage,
};

/// How many values of the grouping key `status.usage` lists (the largest first).
const USAGE_SHOWN: usize = 20;

impl EmbedsManagedStatus for UsageLimitsPolicyStatus {
    fn own_intent(&self) -> bool {
        self.resetting_for.is_some()
    }
}

/// The usage a read reported, largest first, at most [`USAGE_SHOWN`] values.
fn usage_of(remote: &RemotePolicy) -> (Vec<ValueUsage>, Option<u32>) {
    let Some(map) = &remote.limit.value_key_usage_map else {
        return (Vec::new(), None);
    };
    let mut usage: Vec<ValueUsage> = map
        .iter()
        .map(|(key, value)| ValueUsage {
            value_key: key.clone(),
            current_usage: value["current_usage"].as_f64().unwrap_or_default(),
            status: value["status"].as_str().map(str::to_string),
        })
        .collect();
    usage.sort_by(|a, b| {
        b.current_usage
            .total_cmp(&a.current_usage)
            .then_with(|| a.value_key.cmp(&b.value_key))
    });
    let values = u32::try_from(usage.len()).ok();
    usage.truncate(USAGE_SHOWN);
    (usage, values)
}

impl PolicyKind for UsageLimitsPolicy {
    const REMOVAL: (&'static str, &'static str) = ("Archived", "archive");

    /// When the usage was last reset, and the usage itself.
    fn record_more(status: &mut UsageLimitsPolicyStatus, remote: Option<&RemotePolicy>) {
        status.last_reset_at = remote.and_then(|r| r.limit.last_reset_at.clone());
        (status.usage, status.usage_values) = remote.map(usage_of).unwrap_or_default();
    }
    /// The usage reset a change of `spec.resetUsage` asks for. The trigger a policy is created
    /// or adopted with resets nothing: only a change does.
    async fn follow_up(
        &self,
        cx: &Cx<'_, Self>,
        status: &mut UsageLimitsPolicyStatus,
        first_sight: bool,
    ) -> Changes {
        if first_sight && status.resetting_for.is_none() {
            status.observed_reset_usage = self.spec.reset_usage.clone();
        }
        Ok(reset_usage(self, cx, status).await?.into_iter().collect())
    }
}

impl Managed for UsageLimitsPolicy {
    crate::controller::driver::kind::namespaced_api!();
    const KIND: &'static str = "UsageLimitsPolicy";
    const LISTED: bool = true;

    crate::controller::driver::flow::driven!();
}

/// Resets the usage of every value of the grouping key once per change of `spec.resetUsage`
/// (see the module docs). `None` when no reset is due.
async fn reset_usage(
    policy: &UsageLimitsPolicy,
    cx: &Cx<'_, UsageLimitsPolicy>,
    status: &mut UsageLimitsPolicyStatus,
) -> Result<Option<Change>, Halt> {
    let trigger = match (&status.resetting_for, &policy.spec.reset_usage) {
        // An interrupted reset is finished first, whatever the spec says now.
        (Some(resuming), _) => resuming.clone(),
        (None, Some(wanted)) if status.observed_reset_usage.as_ref() != Some(wanted) => {
            wanted.clone()
        }
        (None, wanted) => {
            status.observed_reset_usage = wanted.clone();
            return Ok(None);
        }
    };
    let Some(id) = status.id.clone() else {
        return Ok(None);
    };
    if status.resetting_for.is_none() {
        status.resetting_for = Some(trigger.clone());
        // The intent is a compare-and-swap: a reconcile acting on a stale view stops here.
        cx.save_status(status).await?;
    }
    let client = cx.api(Op::Update).await?;
    let entities = client
        .usage_limits()
        .entities(&id)
        .await
        .map_err(|e| Error::api(format!("list the usage of usage-limits policy {id}"), e))?;
    let mut reset = 0;
    for entity in entities
        .items
        .iter()
        .filter(|e| e.current_usage.is_none_or(|u| u > 0.0))
    {
        client
            .usage_limits()
            .reset_entity(&id, &entity.id)
            .await
            .map_err(|e| {
                Error::api(
                    format!(
                        "reset the usage of {} in usage-limits policy {id}",
                        entity.id
                    ),
                    e,
                )
            })?;
        reset += 1;
    }
    if !entities.complete {
        // What was reset stays reset (zero usage is skipped next time); the rest is found by
        // the next attempt, under the same intent.
        return Err(Wait::NotYetSettled {
            message: format!(
                "the usage list of usage-limits policy {id} was incomplete; resetting the rest next"
            ),
            look_again_in: std::time::Duration::from_secs(5),
        }
        .into());
    }
    status.resetting_for = None;
    status.observed_reset_usage = Some(trigger.clone());
    status.last_reset_at = Some(now_rfc3339());
    status.usage.iter_mut().for_each(|u| u.current_usage = 0.0);
    Ok(Some(Change::new(
        "UsageReset",
        format!(
            "reset the usage of {reset} value(s) of usage-limits policy {id} (resetUsage {trigger:?})"
        ),
    )))
}

impl Listed for UsageLimitsPolicy {
    fn list_workspace(&self) -> Option<String> {
        self.spec.identity.workspace_id.clone()
    }

    async fn list(client: &Client, workspace: Option<String>) -> Result<Listing<Row>, ApiError> {
        policy::rows::<Self>(client, workspace).await
    }
}
