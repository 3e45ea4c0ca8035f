//! The promotion gate (`spec.promotion`): an update of a spec not applied yet waits until the
//! resources it follows have proven its revision ([`crate::resources::promotion`] has the
//! rule). [`crate::controller::driver::gate::Gate::client`] asks it before every update, so the gated
//! resource keeps its remote object as it is and makes no write. The sources are read from the
//! watch caches (never the apiserver), and [`crate::controller::state::followers`] requeues a waiting
//! resource whenever one of them changes; a soak in progress requeues itself for its end.
//!
//! Not gated: the first create of a remote object (nothing uses it yet), and writes that
//! restore the spec already applied at this generation (a drift correction, a changed Secret
//! value, a referenced resource's new slug). Creating the object again after it was deleted
//! outside aigw is gated like an update: it would publish the held change.

use std::time::Duration;

use kube::ResourceExt;
use kube::runtime::controller::Action;

use super::{Change, Cx, Managed, referenced};
use crate::controller::Context;
use crate::controller::driver::status::{
    CommonStatus, Outcome, record_outcome, sanitize_message, set_condition,
};
use crate::controller::error::{Error, Halt, Wait};
use crate::controller::runtime::backoff::jittered;
use crate::controller::state::connections::Scope;
use crate::resources::common::find_condition;
use crate::resources::promotion::{
    PROMOTED, Promotion, REVISION_MISSING, SOAKING, SOURCE_NOT_READY, Source, SourceState, Verdict,
    judge, promote_now, revision_of,
};

/// What the gate decided for one update.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// The change goes through: its sources proved it, or `aigw.io/promote-now` named its
    /// revision (`overridden`).
    Passed { overridden: bool, message: String },
    /// The change waits, or is refused, for `reason`.
    Held {
        reason: &'static str,
        message: String,
    },
}

impl Decision {
    /// The decision an error of the gate stands for.
    pub fn held(error: &Halt) -> Self {
        Decision::Held {
            reason: error.category(),
            message: sanitize_message(&error.to_string()),
        }
    }
}

/// The gate's rule for an update of `object`: `Ok(None)` when it does not apply (no
/// `spec.promotion`, or the spec was applied at this generation already), `Ok(Some(Passed))`
/// when the change may be written, and the error that holds or refuses it otherwise.
pub async fn decide<K: Managed>(
    ctx: &Context,
    object: &K,
    scope: &Scope,
) -> Result<Option<Decision>, Halt> {
    let Some(promotion) = object.promotion() else {
        return Ok(None);
    };
    let meta = object.meta();
    // This generation's spec was written already (the newest version recorded is of it), or
    // applied and Ready: a write now restores it (a drift correction, a Secret value, a
    // referenced resource's new slug), whatever failed since.
    let applied = object.status().is_some_and(|s| {
        let written = K::history(s)
            .first()
            .is_some_and(|v| v.generation.is_some() && v.generation == meta.generation);
        written
            || crate::controller::spec_already_applied(
                meta.generation,
                s.observed_generation(),
                s.conditions(),
            )
    });
    if applied {
        return Ok(None);
    }
    let Some(revision) = revision_of(meta) else {
        return Err(Halt::Fail(Error::not_allowed(
            REVISION_MISSING,
            format!(
                "spec.promotion gates each change by its revision, and this {} has no aigw.io/revision annotation: set it (the pipeline sets it to the Git commit it applies)",
                K::KIND
            ),
        )));
    };
    let held = match verdict(ctx, object, promotion, scope, revision).await {
        Ok(message) => {
            return Ok(Some(Decision::Passed {
                overridden: false,
                message,
            }));
        }
        // Only waiting can be cut short: a refused source namespace (the grants) or an
        // invalid `spec.promotion` stays refused, whatever the annotation says.
        Err(held @ Halt::Wait(Wait::Gated { .. })) => held,
        Err(refused) => return Err(refused),
    };
    match promote_now(meta) {
        Some(named) if named == revision => Ok(Some(Decision::Passed {
            overridden: true,
            message: format!(
                "revision {revision} was let through by the aigw.io/promote-now annotation while its promotion gate said: {}",
                sanitize_message(&held.to_string())
            ),
        })),
        Some(named) => Err(with_note(
            held,
            &format!(
                "(aigw.io/promote-now names {named}, not {revision}: it lets only that revision through)"
            ),
        )),
        None => Err(held),
    }
}

/// The gate's verdict on `revision` for `object`: the message of an open gate, or the error
/// that holds it (a refused source namespace, a source not ready, a soak in progress). A source
/// is read from the watch cache, or (with `--shards`, another shard's) from the apiserver.
async fn verdict<K: Managed>(
    ctx: &Context,
    object: &K,
    promotion: &Promotion,
    scope: &Scope,
    revision: &str,
) -> Result<String, Halt> {
    let soak = promotion.soak().map_err(Error::InvalidSpec)?;
    let own = object.namespace();
    if let Some(field) = promotion.names_itself(own.as_deref(), &object.name_any()) {
        return Err(Error::InvalidSpec(format!("{field} names this {} itself", K::KIND)).into());
    }
    let mut found = Vec::new();
    for (field, namespace, name) in promotion.sources(own.as_deref()) {
        if let (Some(own), Some(namespace)) = (&own, namespace)
            && own != namespace
        {
            scope.check_promote_from(&field, own, namespace)?;
        }
        let (shown, source) = match namespace {
            Some(namespace) => (
                format!("{} {namespace}/{name}", K::KIND),
                referenced::find_in::<K>(ctx, namespace, name).await?,
            ),
            None => (
                format!("{} {name}", K::KIND),
                referenced::named::<K>(ctx, name),
            ),
        };
        found.push((shown, source));
    }
    let sources: Vec<Source> = found
        .iter()
        .map(|(shown, source)| Source {
            name: shown.clone(),
            state: source.as_deref().map(state_of),
        })
        .collect();
    let now = jiff::Timestamp::now();
    match judge(revision, soak, &sources, now) {
        Verdict::Open { message } => Ok(message),
        Verdict::Soaking { until, message } => Err(Halt::Wait(Wait::Gated {
            reason: SOAKING,
            message,
            look_again_in: Some(
                Duration::try_from(until.duration_since(now)).unwrap_or(Duration::ZERO)
                    + Duration::from_millis(100),
            ),
        })),
        Verdict::SourceNotReady { message } => Err(Halt::Wait(Wait::Gated {
            reason: SOURCE_NOT_READY,
            message,
            look_again_in: None,
        })),
    }
}

/// What a cached source shows the rule.
pub(crate) fn state_of<K: Managed>(source: &K) -> SourceState<'_> {
    let status = source.status();
    SourceState {
        meta: source.meta(),
        observed_generation: status.and_then(CommonStatus::observed_generation),
        conditions: status.map(CommonStatus::conditions).unwrap_or_default(),
        history: status.map(K::history).unwrap_or_default(),
        order: status.and_then(K::revision_order),
    }
}

/// `error` with `note` added to its message.
pub(super) fn with_note(error: Halt, note: &str) -> Halt {
    match error {
        Halt::Wait(Wait::Gated {
            reason,
            message,
            look_again_in,
        }) => Halt::Wait(Wait::Gated {
            reason,
            message: format!("{message} {note}"),
            look_again_in,
        }),
        Halt::Fail(Error::NotAllowed { reason, message }) => Halt::Fail(Error::NotAllowed {
            reason,
            message: format!("{message} {note}"),
        }),
        other => other,
    }
}

/// A change the gate holds: `Reconciling` with the gate's reason (so kstatus and Argo CD say
/// Progressing, not Degraded), and a look again when the soak ends; a source that is not
/// ready brings the resource back through its watch, or at the drift check.
pub(super) fn hold<K: Managed>(
    cx: &Cx<'_, K>,
    reason: &str,
    message: &str,
    look_again_in: Option<Duration>,
    status: &mut K::Status,
) -> Action {
    let outcome = Outcome::Progressing {
        reason: reason.into(),
        message: cx.scrub(message),
    };
    record_outcome(
        status.conditions_mut(),
        &outcome,
        cx.object.meta().generation,
    );
    cx.ctx.backoff.reset(&super::object_key(cx.object));
    Action::requeue(look_again_in.unwrap_or_else(|| jittered(cx.ctx.drift_interval)))
}

/// After the kind's apply: the `Promoted` condition says what the gate decided (when it was
/// asked), an override is marked in `status.history`, and a change of the condition is
/// announced (returned as the event to publish).
pub(super) fn conclude<K: Managed>(
    cx: &Cx<'_, K>,
    before: Option<&K::Status>,
    status: &mut K::Status,
    succeeded: bool,
) -> Option<Change> {
    let object = cx.object;
    let generation = object.meta().generation;
    if object.promotion().is_none() {
        status.conditions_mut().retain(|c| c.type_ != PROMOTED);
        return None;
    }
    let revision = revision_of(object.meta()).unwrap_or("(none)");
    let (promoted, reason, message) = match cx.gate.promotion() {
        Some(Decision::Held { reason, message }) => (false, reason, message),
        Some(Decision::Passed {
            overridden,
            message,
        }) if succeeded => {
            if overridden {
                mark_override::<K>(status, generation);
            }
            let reason = if overridden { "PromoteNow" } else { "Promoted" };
            (true, reason, message)
        }
        // The gate let it through but the write failed: the failure says so.
        Some(Decision::Passed { .. }) => return None,
        None if succeeded => {
            let current = find_condition(status.conditions(), PROMOTED);
            if current.is_some_and(|c| c.status == "True") {
                return None;
            }
            let message = format!(
                "nothing of revision {revision} waited at the promotion gate: the remote object was created, or already held it"
            );
            (true, "InSync", message)
        }
        None => return None,
    };
    let message = cx.scrub(&message);
    set_condition(
        status.conditions_mut(),
        PROMOTED,
        promoted,
        reason,
        &message,
        generation,
    );
    let was = before
        .and_then(|s| find_condition(s.conditions(), PROMOTED))
        .map(|c| (c.status == "True", c.reason.clone()));
    // Failures (a refused source, a missing revision) have their Warning from the driver.
    let gate_reason = matches!(
        reason,
        SOAKING | SOURCE_NOT_READY | "Promoted" | "PromoteNow"
    );
    let announce = was != Some((promoted, reason.to_string())) && gate_reason;
    announce.then(|| Change::new(reason, message))
}

/// Marks the entry just recorded for this generation as let through by `aigw.io/promote-now`.
fn mark_override<K: Managed>(status: &mut K::Status, generation: Option<i64>) {
    if let Some(newest) = K::history_mut(status).and_then(|h| h.first_mut())
        && newest.generation == generation
    {
        newest.promotion_override = true;
    }
}
