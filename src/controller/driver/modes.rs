//! The modes around the kind's reconcile: `aigw.io/paused` (no API call at all) and
//! `managementPolicy: Observe` (read, report `Drifted`, never write; deletion leaves the remote
//! object alone).

use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use tracing::info;

use super::{Cx, Managed, object_key, publish, record_failure};
use crate::controller::driver::status::{
    CommonStatus, Outcome, record_outcome, set_condition, worth_writing,
};
use crate::controller::error::{Halt, Wait};
use crate::controller::runtime::backoff::jittered;
use crate::resources::common::{
    Recorded,
    condition::{DRIFTED, PAUSED, STALLED},
    find_condition,
};

/// `aigw.io/paused: "true"`: no API call at all, not even a read or the Connection's token. The
/// pause is recorded (`Paused=True`) and announced with one event the first time it is seen;
/// Ready and everything else stay as they were. The event follows the status write, a
/// compare-and-swap, so two reconciles of one view cannot both announce it.
pub(super) async fn hold_paused<K: Managed>(
    cx: &Cx<'_, K>,
    before: Option<&K::Status>,
) -> Result<Action, Halt> {
    let recorded = before
        .and_then(|s| find_condition(s.conditions(), PAUSED))
        .is_some_and(|c| c.status == "True");
    if recorded {
        return Ok(Action::await_change());
    }
    let message = "the aigw.io/paused annotation is \"true\": aigw makes no API call for this object until it is removed";
    let mut status = before.cloned().unwrap_or_default();
    let generation = cx.object.meta().generation;
    set_condition(
        status.conditions_mut(),
        PAUSED,
        true,
        "Paused",
        message,
        generation,
    );
    cx.save_status(&status).await?;
    info!(kind = K::KIND, object = %object_key(cx.object), "paused");
    publish(cx.ctx, cx.object, EventType::Normal, "Paused", message).await;
    // Removing the annotation is a change of the object, which wakes the controller.
    Ok(Action::await_change())
}

/// Turns a recorded `Paused=True` into `Paused=False` once the annotation is gone; the
/// reconcile then goes on as usual and writes it with its status.
pub(super) fn resume_if_paused<S: CommonStatus>(status: &mut S, generation: Option<i64>) {
    let paused = find_condition(status.conditions(), PAUSED).is_some_and(|c| c.status == "True");
    if paused {
        set_condition(
            status.conditions_mut(),
            PAUSED,
            false,
            "Resumed",
            "the aigw.io/paused annotation was removed; reconciling again",
            generation,
        );
    }
}

/// `managementPolicy: Observe`: read the remote object through the kind's `observe_only` and
/// report the differences as the `Drifted` condition. Nothing is ever created or written; an
/// object with no remote object to read is `Stalled/NothingToObserve`.
pub(super) async fn observe_mode<K: Managed>(
    cx: &Cx<'_, K>,
    key: &str,
    before: Option<&K::Status>,
    mut status: K::Status,
) -> Result<Action, Halt> {
    let object = cx.object;
    let generation = object.meta().generation;
    *status.observed_generation_mut() = generation;
    match K::finish_in_flight(object, cx, &mut status).await {
        Ok(Some(change)) => {
            info!(kind = K::KIND, object = %key, reason = change.reason, "{}", change.message);
            publish(
                cx.ctx,
                object,
                EventType::Normal,
                change.reason,
                &change.message,
            )
            .await;
        }
        Ok(None) => {}
        Err(halt) if halt.records_nothing() => return Err(halt),
        Err(error) => {
            let action = record_failure(cx, key, &error, before, &mut status).await;
            if worth_writing(before, &status) {
                cx.save_status(&status).await?;
            }
            return Ok(action);
        }
    }
    let action = if !knows_remote(object, &status) {
        let why = K::awaiting_replacement(&status).unwrap_or_else(|| {
            "names no remote object (spec.slug, spec.deploymentId or spec.policyId) and has none recorded: adopt an existing object or switch to Full".into()
        });
        nothing_to_observe(cx, before, &mut status, &why).await
    } else {
        match K::observe_only(object, cx, &mut status).await {
            Ok(_) if !knows_remote(object, &status) => {
                nothing_to_observe(
                    cx,
                    before,
                    &mut status,
                    "recorded a remote object that no longer exists: adopt an existing object or switch to Full",
                )
                .await
            }
            Ok(fields) => {
                cx.ctx.backoff.reset(key);
                record_observation(cx, before, &mut status, &fields).await;
                Action::requeue(jittered(cx.ctx.drift_interval))
            }
            Err(halt) if halt.records_nothing() => return Err(halt),
            Err(error) => record_failure(cx, key, &error, before, &mut status).await,
        }
    };
    // An observed object is left in place on delete, and said so (`Orphaned`): the finalizer
    // goes on before the status names it, as for any recorded remote object.
    if status.recorded_remote().is_some() {
        cx.ensure_finalizer().await?;
    }
    if worth_writing(before, &status) {
        cx.save_status(&status).await?;
    }
    Ok(action)
}

/// True when the spec names a remote object or the status has recorded one.
fn knows_remote<K: Managed>(object: &K, status: &K::Status) -> bool {
    object.named_remote().is_some() || status.recorded_remote().is_some()
}

/// `Stalled/NothingToObserve`: Observe never creates, so only a spec change can help. `why`
/// follows "this `<kind>`" and says what to change.
async fn nothing_to_observe<K: Managed>(
    cx: &Cx<'_, K>,
    before: Option<&K::Status>,
    status: &mut K::Status,
    why: &str,
) -> Action {
    const REASON: &str = "NothingToObserve";
    let message = format!(
        "managementPolicy is Observe, which never creates, and this {} {why}",
        K::KIND
    );
    let generation = cx.object.meta().generation;
    let outcome = Outcome::Stalled {
        reason: REASON.into(),
        message: message.clone(),
    };
    record_outcome(status.conditions_mut(), &outcome, generation);
    let already = before
        .and_then(|s| find_condition(s.conditions(), STALLED))
        .is_some_and(|c| c.status == "True" && c.reason == REASON);
    if !already {
        publish(cx.ctx, cx.object, EventType::Warning, REASON, &message).await;
    }
    Action::await_change()
}

/// The `Ready` reason of an object in Observe: read, nothing written.
pub const OBSERVED: &str = "Observed";

/// A successful observation: Ready (the observation is what Observe promises), and `Drifted`
/// saying whether, and in which fields, the remote object differs from the spec.
async fn record_observation<K: Managed>(
    cx: &Cx<'_, K>,
    before: Option<&K::Status>,
    status: &mut K::Status,
    fields: &[&'static str],
) {
    let generation = cx.object.meta().generation;
    let outcome = Outcome::Ready {
        reason: OBSERVED.into(),
        message: format!(
            "observed the remote {} (managementPolicy Observe: aigw does not write to it)",
            K::KIND
        ),
    };
    record_outcome(status.conditions_mut(), &outcome, generation);
    if fields.is_empty() {
        set_in_sync::<K>(status, generation);
        return;
    }
    let message = format!(
        "the remote {} differs from the spec in: {}; managementPolicy Observe leaves it as it is",
        K::KIND,
        fields.join(", ")
    );
    set_condition(
        status.conditions_mut(),
        DRIFTED,
        true,
        "RemoteDiffers",
        &message,
        generation,
    );
    let was_drifted = before
        .and_then(|s| find_condition(s.conditions(), DRIFTED))
        .is_some_and(|c| c.status == "True" && c.message == message);
    if !was_drifted {
        publish(
            cx.ctx,
            cx.object,
            EventType::Normal,
            "RemoteDiffers",
            &message,
        )
        .await;
    }
}

/// After a successful apply the remote object matches the spec: a `Drifted` left over from
/// Observe is cleared. Objects that never observed carry no `Drifted` at all.
pub(super) fn clear_drifted<K: Managed>(status: &mut K::Status, generation: Option<i64>) {
    if find_condition(status.conditions(), DRIFTED).is_some() {
        set_in_sync::<K>(status, generation);
    }
}

/// `Drifted=False/InSync`.
fn set_in_sync<K: Managed>(status: &mut K::Status, generation: Option<i64>) {
    set_condition(
        status.conditions_mut(),
        DRIFTED,
        false,
        "InSync",
        &format!("the remote {} matches the spec", K::KIND),
        generation,
    );
}

/// Runs the kind's cleanup as `deletionPolicy: Orphan` would (no API call; what a live remote
/// object still needs, such as a Deployment's credentials Secret, is kept). A failure is
/// published as a Warning.
pub(super) async fn cleanup_as_orphan<K: Managed>(object: &K, cx: &Cx<'_, K>) -> Result<(), Halt> {
    let orphan = object.orphaning();
    let orphan_cx = Cx::new(cx.ctx, cx.objects.clone(), &orphan);
    let error = match K::cleanup(&orphan, &orphan_cx).await {
        Ok(changes) => {
            // The caller says what was left in place; what the user must act on is said here.
            let warnings = changes.into_iter().filter(|c| c.warning).collect();
            super::report(cx.ctx, object, &object_key(object), warnings).await;
            return Ok(());
        }
        Err(error) => error,
    };
    if let Halt::Wait(Wait::DryRun { reason, message }) = &error {
        // `--dry-run`: the Kubernetes leftover it would release, reported, not retried.
        super::would(cx, &object_key(object), reason, message).await;
        return Ok(());
    }
    if error.records_nothing() {
        return Err(error);
    }
    let message = cx.scrub_halt(&error).await;
    publish(
        cx.ctx,
        object,
        EventType::Warning,
        error.category(),
        &message,
    )
    .await;
    Err(error)
}

/// Deleting an Observe resource never touches the remote object, whatever `deletionPolicy`
/// says: the kind's cleanup runs as for `Orphan` (which makes no API call, and keeps what a
/// live remote object still needs, such as a Deployment's credentials Secret).
pub(super) async fn leave_observed<K: Managed>(object: &K, cx: &Cx<'_, K>) -> Result<Action, Halt> {
    cleanup_as_orphan(object, cx).await?;
    let remote = object
        .named_remote()
        .or(object.status().and_then(Recorded::recorded_remote))
        .unwrap_or("object");
    let message = format!(
        "left the remote {} {remote} in place (managementPolicy Observe never deletes)",
        K::KIND
    );
    info!(kind = K::KIND, object = %object_key(object), "{message}");
    publish(cx.ctx, object, EventType::Normal, "Orphaned", &message).await;
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpausing_turns_a_recorded_pause_off_and_adds_none_otherwise() {
        use crate::resources::config::ConfigStatus;
        let mut never = ConfigStatus::default();
        resume_if_paused(&mut never, Some(1));
        assert!(never.conditions.is_empty());
        let mut paused = ConfigStatus::default();
        set_condition(&mut paused.conditions, PAUSED, true, "Paused", "", Some(1));
        resume_if_paused(&mut paused, Some(2));
        let condition = find_condition(&paused.conditions, PAUSED).unwrap();
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            ("False", "Resumed")
        );
    }
}
