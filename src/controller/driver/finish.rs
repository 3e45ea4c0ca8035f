//! The one exit of the driver's reconcile of an object: whatever way it went ([`Ending`]),
//! [`finish`] alone decides what it records (conditions, events, the one status write) and
//! when to look again. A [`Halt`] is a value here like any other ending: a wait is reported as
//! what it is (a dry run's `Would…` event, a promotion hold, an unknown create outcome), a
//! failure as a failure, and one whose view is stale (or that may not act) records nothing.

use std::time::Duration;

use kube::runtime::controller::Action;

use super::modes::clear_drifted;
use super::{Cx, Managed, promotion, record_failure, report, would};
use crate::controller::driver::status::{CommonStatus, Outcome, record_outcome, worth_writing};
use crate::controller::error::{Halt, Wait};
use crate::controller::runtime::backoff::jittered;
use crate::resources::common::Recorded;

/// How a reconcile went, before [`finish`] records it.
pub(super) enum Ending {
    /// Nothing to record (the cache is older than this process's own last write): look again
    /// after the action.
    Later(Action),
    /// A mode that records itself (`aigw.io/paused`, `managementPolicy: Observe`).
    Mode(Result<Action, Halt>),
    /// Stopped at the gate, before any API call: recorded as the kind's apply failing would
    /// be, and nothing else.
    Refused(Halt),
    /// Nothing for the kind to do (a trusted steady state, a read-only refresh of a spec that
    /// waits for a change): the status as computed is written when it changed.
    Kept(Action),
    /// The kind's apply ran: the changes it made remotely, or what stopped it.
    Applied(Result<Vec<super::Change>, Halt>),
}

/// Records how the reconcile of `cx.object` went: the conditions of `status` (read as
/// `before`), the events, and at most one status write; then when to look again. `Err` only for
/// a halt that records nothing (a lost status race, a replica that may not act), which the
/// controller's `error_policy` backs off, or a failed write here.
pub(super) async fn finish<K: Managed>(
    cx: &Cx<'_, K>,
    key: &str,
    before: Option<&K::Status>,
    mut status: K::Status,
    ending: Ending,
) -> Result<Action, Halt> {
    let (ctx, object) = (cx.ctx, cx.object);
    let generation = object.meta().generation;
    // What the cluster holds now: the kind may have written an intent meanwhile.
    let written = cx.last_saved().or(before.cloned());
    let applied = match &ending {
        Ending::Applied(result) => Some(result.is_ok()),
        _ => None,
    };
    let records = match &ending {
        Ending::Later(_) | Ending::Mode(_) => false,
        Ending::Refused(halt) | Ending::Applied(Err(halt)) => !halt.records_nothing(),
        Ending::Kept(_) | Ending::Applied(Ok(_)) => true,
    };
    if records {
        // A new object's claim comes before anything recorded about it.
        cx.settle_claim().await?;
    }
    let (action, mut changes) = match ending {
        Ending::Later(action) => return Ok(action),
        Ending::Mode(result) => return result,
        Ending::Kept(action) => (action, Vec::new()),
        Ending::Refused(halt) | Ending::Applied(Err(halt)) => {
            if halt.records_nothing() {
                return Err(halt);
            }
            *status.observed_generation_mut() = generation;
            let action = match halt {
                Halt::Wait(Wait::DryRun { reason, message }) => {
                    return Ok(would(cx, key, reason, &message).await);
                }
                // The promotion gate holds the change: nothing was written, nothing failed.
                Halt::Wait(Wait::Gated {
                    reason,
                    message,
                    look_again_in,
                }) => promotion::hold(cx, reason, &message, look_again_in, &mut status),
                halt => record_failure(cx, key, &halt, before, &mut status).await,
            };
            (action, Vec::new())
        }
        Ending::Applied(Ok(changes)) => {
            *status.observed_generation_mut() = generation;
            (applied_in_sync(cx, key, &mut status), changes)
        }
    };
    if let Some(succeeded) = applied {
        changes.extend(promotion::conclude(cx, before, &mut status, succeeded));
        // A remote object recorded without a write (adopted as it was, found again) is cleaned
        // up on delete like one aigw wrote: the finalizer goes on before the status names it.
        if status.recorded_remote().is_some() {
            cx.ensure_finalizer().await?;
        }
        // The events first, so that whoever waits for the status finds them; then the one
        // status write (which also records a create's id: a crash before it leaves the intent,
        // and the lookup finds the object again).
        report(ctx, object, key, changes).await;
    }
    if worth_writing(written.as_ref(), &status) || cx.owes_record() {
        // The result of a side effect started under an intent is never lost to a conflict.
        cx.save_status(&status).await?;
    } else if applied.is_some() && cx.wrote_nothing() {
        ctx.drift.caught_up(key);
    }
    Ok(action)
}

/// The kind's apply succeeded: `Ready`, no `Drifted` left from Observe, the revision noted;
/// looked at again when its full read is due, or sooner when the kind asks.
fn applied_in_sync<K: Managed>(cx: &Cx<'_, K>, key: &str, status: &mut K::Status) -> Action {
    let (ctx, object) = (cx.ctx, cx.object);
    let generation = object.meta().generation;
    ctx.backoff.reset(key);
    let outcome = Outcome::Ready {
        reason: "Reconciled".into(),
        message: format!("{} is in sync with the management API", K::KIND),
    };
    record_outcome(status.conditions_mut(), &outcome, generation);
    clear_drifted::<K>(status, generation);
    K::note_revision(object, status);
    // A listed kind is looked at again when the drift pass sends it (a list shows it changed,
    // or its full read falls): no timer of its own; the others at the next drift check.
    let next = match K::LISTED && object.listed_whole() {
        // A read the kind asked for (an object found again after a lost answer).
        true if ctx.drift.is_flagged(key) => Some(Duration::from_secs(1)),
        true => {
            ctx.drift.saw(key);
            None
        }
        false => Some(jittered(ctx.drift_interval)),
    };
    let due = match (K::due_in(object, status), next) {
        (Some(due), Some(next)) => Some(due.min(next)),
        (due, next) => due.or(next),
    };
    due.map_or_else(Action::await_change, Action::requeue)
}
