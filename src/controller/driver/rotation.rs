//! The one rotation protocol: how a value the API issues once (a Deployment's credentials, an
//! API key) is rotated into the Secret aigw owns, exactly once per trigger, and survives a lost
//! answer, a crash or a concurrent writer.
//!
//! 1. The intent (`status.pendingRotation`, a fresh rotation id, and the trigger it is for) is
//!    written with a compare-and-swap before the call: two writers never both rotate for one
//!    trigger, and a stale view stops here.
//! 2. The kind's rotate call goes through the gate (`Op::Rotate`).
//! 3. The answer is the only copy of the new values: they are written into the Secret first,
//!    stamped with the rotation id, and conditional on the Secret's resourceVersion as read
//!    before the call (a writer paused while another rotated never stores revoked values).
//! 4. The intent is settled and the workloads of `spec.rotation.restart` roll.
//!
//! A reconcile that finds the intent resumes it: if the Secret carries the rotation id, the
//! values got there and only step 4 is left (no second call). Otherwise the answer, or the
//! process, was lost in between: the values exist nowhere, so it rotates again. The Secret
//! never ends up holding revoked values, and Ready is never reported over them.

mod schedule;

use std::collections::BTreeMap;
use std::time::Duration;

pub use schedule::{Schedule, next_rotation_at, spaced_until};

use crate::api::SecretString;

use crate::controller::driver::{Change, Cx, Managed};
use crate::controller::error::{Error, Halt, Wait};

use crate::controller::driver::status::{CommonStatus, Outcome, record_outcome, set_condition};
use crate::controller::now_rfc3339;
use crate::resources::common::Recorded;
use crate::resources::rotation::{Rotation, RotationRecord, RotationStatus};

use super::secret_delivery::{self, Delivery, ROTATION_ID_ANNOTATION, SecretVersion};

/// Condition saying whether the Secret holds the resource's current values.
pub const CREDENTIALS_AVAILABLE: &str = "CredentialsAvailable";

/// What a kind whose values the API issues once supplies to the protocol.
pub trait Rotates: Managed<Status: RotationRecord> {
    /// Condition reason while a rotation is in flight, e.g. `RotatingCredentials`.
    const ROTATING_REASON: &'static str;
    /// The failpoint hit right after the rotate call answered (tests and chaos arm it).
    const AFTER_ROTATE: &'static str;
    /// The spec field naming the Secret, for the ownership check's message.
    const SECRET_FIELD: &'static str;
    /// The `CredentialsAvailable` message once the Secret holds the values.
    const STORED: &'static str;

    /// `spec.rotation`'s schedule and restarts, when set.
    fn rotation(&self) -> Option<&Rotation>;
    /// The name of the Secret that receives the values.
    fn secret_name(&self) -> &str;
    /// What is rotated, for messages (e.g. "the credentials of deployment ID").
    fn what(id: &str) -> String;
    /// Where the rotation stands in `status`.
    fn rotation_status(status: &mut Self::Status) -> &mut RotationStatus {
        status.rotation_mut()
    }

    /// Calls the API's rotation for the remote object `id`, through `cx.api(Op::Rotate)`.
    fn call_rotate(
        &self,
        cx: &Cx<'_, Self>,
        id: &str,
    ) -> impl Future<Output = Result<Issued, Halt>> + Send;

    /// Records what the Secret's annotations say about the values it now holds (for example
    /// when the previous value stops working): those written with them.
    fn settle(_status: &mut Self::Status, _annotations: &BTreeMap<String, String>) {}

    /// Gives up the remote object `id` when a rotation's answer was lost, instead of rotating
    /// it again: the value that rotation issued exists nowhere, and a kind that can replace the
    /// object (an API key: a new key, then the old one deleted) leaves no live value that
    /// nobody holds. Records that in `status` and returns what happened; `None` (the default)
    /// rotates again.
    fn give_up_lost(_status: &mut Self::Status, _id: &str) -> Option<String> {
        None
    }
}

/// What a rotate call issued: the values for the Secret and the annotations stamped beside
/// them (the remote id, and anything [`Rotates::settle`] reads back).
pub struct Issued {
    pub values: Vec<(&'static str, SecretString)>,
    pub annotations: Vec<(&'static str, String)>,
    /// Appended to the `Rotated` event, e.g. "; the previous value works until T".
    pub note: String,
    /// Set when the answer lacked a value the Secret needs: after the values it did carry are
    /// stored, the rotation is reported unfinished with this message (and done again).
    pub incomplete: Option<String>,
}

/// The trigger as recorded in status: the spec's value, or "" when it sets none.
pub fn current_trigger<K: Rotates>(object: &K) -> String {
    object
        .rotation()
        .and_then(|r| r.trigger.clone())
        .unwrap_or_default()
}

/// Why a rotation is due now, if it is (see [`Schedule::due`]).
pub fn rotation_due<K: Rotates>(object: &K, rotation: &RotationStatus) -> Option<&'static str> {
    let trigger = current_trigger(object);
    schedule_of(object, rotation, &trigger).due()
}

fn schedule_of<'a, K: Rotates>(
    object: &K,
    rotation: &'a RotationStatus,
    trigger: &'a str,
) -> Schedule<'a> {
    Schedule {
        trigger,
        observed_trigger: rotation.observed_rotation_trigger.as_deref(),
        has_interval: object.rotation().is_some_and(|r| r.interval.is_some()),
        next_rotation_at: rotation.next_rotation_at.as_deref(),
        held_until: rotation.rotation_held_until.as_deref(),
    }
}

/// When to look at the rotation again: at `nextRotationAt`, or when the spacing that holds a
/// rotation asked for ends.
pub fn due_in(rotation: &RotationStatus) -> Option<Duration> {
    schedule::due_in(
        rotation.next_rotation_at.as_deref(),
        rotation.rotation_held_until.as_deref(),
    )
}

/// The condition set while `spec.rotation.interval` is below the operator's floor.
pub const INTERVAL_RAISED: &str = "RotationIntervalRaised";

/// `interval` raised to the operator's floor (`--min-rotation-interval`, or the key transition
/// `transition` when longer) for an object admitted below it (stored before admission refused
/// it, or below a floor the operator was given since): a `RotationIntervalRaised` condition,
/// and a Warning event when the condition is new for this generation.
pub async fn floored_interval<K: Rotates>(
    object: &K,
    cx: &Cx<'_, K>,
    status: &mut K::Status,
    interval: Option<Duration>,
    transition: Option<Duration>,
) -> Option<Duration> {
    let (interval, raised) = cx.ctx.rotation.floored(interval, transition);
    let generation = object.meta().generation;
    let conditions = status.conditions_mut();
    match raised {
        Some(message) => {
            let known = conditions.iter().any(|c| {
                c.type_ == INTERVAL_RAISED
                    && c.status == "True"
                    && c.observed_generation == generation
                    && c.message == message
            });
            set_condition(
                conditions,
                INTERVAL_RAISED,
                true,
                "BelowFloor",
                &message,
                generation,
            );
            if !known {
                cx.warn(INTERVAL_RAISED, &message).await;
            }
        }
        None => conditions.retain(|c| c.type_ != INTERVAL_RAISED),
    }
    interval
}

/// The reason of the Normal event saying a rotation waits for `--rotation-spacing`.
pub const ROTATION_HELD: &str = "RotationHeld";

/// Whether a rotation is in flight or due: the reconcile must not be skipped.
pub fn rotation_pending<K: Rotates>(object: &K, rotation: &RotationStatus) -> bool {
    rotation.pending_rotation.is_some() || rotation_due(object, rotation).is_some()
}

/// Sets `nextRotationAt` from the last rotation (or from now, for an object aigw has not
/// rotated yet) and the interval.
pub fn schedule(rotation: &mut RotationStatus, interval: Option<Duration>) {
    rotation.next_rotation_at = next_rotation_at(
        rotation.next_rotation_at.as_deref(),
        rotation.last_rotated_at.as_deref(),
        interval,
    );
}

/// The rotation step of a reconcile of the remote object `id`: resumes the rotation in flight,
/// or starts one that is due. `None` when there is neither (the first trigger seen is then
/// recorded, not acted on): the kind checks its Secret instead.
pub async fn rotate_if_due<K: Rotates>(
    object: &K,
    cx: &Cx<'_, K>,
    status: &mut K::Status,
    id: &str,
) -> Result<Option<Change>, Halt> {
    let rotation = K::rotation_status(status);
    if let Some(pending) = rotation.pending_rotation.clone() {
        return resume(object, cx, status, id, &pending).await.map(Some);
    }
    let trigger = current_trigger(object);
    let asked = schedule_of(object, rotation, &trigger).asked();
    if let Some(why) = asked {
        // Whatever asks, no two rotations of one resource are closer than the spacing.
        let spacing = cx.ctx.rotation.spacing;
        match spaced_until(rotation.last_rotated_at.as_deref(), spacing) {
            Some(until) => {
                if rotation.rotation_held_until.as_deref() != Some(until.as_str()) {
                    let message = format!(
                        "{why}: the rotation waits until {until}, --rotation-spacing after the last one"
                    );
                    tracing::info!(held_until = %until, "{message}");
                    // Said once per hold, where `kubectl describe` shows it: nothing else
                    // tells why a changed trigger rotated nothing yet.
                    cx.note(ROTATION_HELD, &message).await;
                }
                rotation.rotation_held_until = Some(until);
                return Ok(None);
            }
            None => {
                rotation.rotation_held_until = None;
                return rotate(object, cx, status, id, why, true).await.map(Some);
            }
        }
    }
    rotation.rotation_held_until = None;
    if rotation.observed_rotation_trigger.is_none() {
        rotation.observed_rotation_trigger = Some(current_trigger(object));
    }
    Ok(None)
}

/// Finishes the rotation in flight, if one is (see [`Managed::finish_in_flight`]).
/// [`finish_in_flight`] of the remote object `status` records.
pub async fn finish_recorded<K: Rotates>(
    object: &K,
    cx: &Cx<'_, K>,
    status: &mut K::Status,
) -> Result<Option<Change>, Halt> {
    let id = status.recorded_remote().map(str::to_owned);
    finish_in_flight(object, cx, status, id.as_deref()).await
}

pub async fn finish_in_flight<K: Rotates>(
    object: &K,
    cx: &Cx<'_, K>,
    status: &mut K::Status,
    id: Option<&str>,
) -> Result<Option<Change>, Halt> {
    let pending = K::rotation_status(status).pending_rotation.clone();
    match (pending, id) {
        (Some(pending), Some(id)) => resume(object, cx, status, id, &pending).await.map(Some),
        _ => Ok(None),
    }
}

/// Records that values were issued into the Secret outside a rotation (a create, or a create
/// whose Secret write failed): `stored` says which. After a failed write only a rotation can
/// issue new values, so that intent is recorded for the next reconcile.
pub fn issued_by_create<K: Rotates>(object: &K, status: &mut K::Status, stored: bool) -> String {
    let now = now_rfc3339();
    let rotation = K::rotation_status(status);
    if stored {
        // Whatever rotation was recorded before is moot: the values are new.
        settle_intent(rotation);
        rotation.last_rotated_at = Some(now.clone());
        rotation.observed_rotation_trigger = Some(current_trigger(object));
        set_credentials_condition(object, status, true, "Stored", K::STORED);
    } else {
        record_intent(
            rotation,
            uuid::Uuid::new_v4().to_string(),
            current_trigger(object),
        );
        // No call of it is in flight: the next reconcile may rotate at once.
        rotation.rotation_call_ended_at = Some(now.clone());
    }
    now
}

/// Records a rotation about to be sent (saved by the caller with a compare-and-swap).
fn record_intent(rotation: &mut RotationStatus, id: String, trigger: String) {
    rotation.pending_rotation = Some(id);
    rotation.pending_rotation_since = Some(now_rfc3339());
    rotation.rotation_call_ended_at = None;
    rotation.rotating_for = Some(trigger);
}

fn settle_intent(rotation: &mut RotationStatus) {
    rotation.pending_rotation = None;
    rotation.pending_rotation_since = None;
    rotation.rotation_call_ended_at = None;
    rotation.rotating_for = None;
}

/// Rotates now, for the reason `why`: the intent (a compare-and-swap), then the call and the
/// Secret write. `asked`: the spec asks for it (its trigger or interval), and asks again if
/// the call is refused; otherwise (values a create could not deliver) only the intent does.
pub async fn rotate<K: Rotates>(
    object: &K,
    cx: &Cx<'_, K>,
    status: &mut K::Status,
    id: &str,
    why: &str,
    asked: bool,
) -> Result<Change, Halt> {
    let secret_version = writable_secret(object, cx).await?;
    let rotation = uuid::Uuid::new_v4().to_string();
    record_intent(
        K::rotation_status(status),
        rotation.clone(),
        current_trigger(object),
    );
    let rotating = Outcome::Progressing {
        reason: K::ROTATING_REASON.into(),
        message: format!("rotating {}: {why}", K::what(id)),
    };
    record_outcome(status.conditions_mut(), &rotating, object.meta().generation);
    cx.save_status(status).await?;
    let call_of = Call {
        rotation: &rotation,
        why,
        asked,
    };
    call(object, cx, status, id, call_of, secret_version).await
}

/// Finishes the rotation an earlier reconcile started: completes it when the Secret already
/// holds its values, otherwise rotates again or, for a kind that can, gives the object up to
/// be replaced (the values of the first call, if it happened, are lost).
async fn resume<K: Rotates>(
    object: &K,
    cx: &Cx<'_, K>,
    status: &mut K::Status,
    id: &str,
    rotation: &str,
) -> Result<Change, Halt> {
    let name = object.secret_name();
    // A recovery: what the interrupted process wrote is read from the apiserver, not a cache.
    let secret = secret_delivery::fresh_metadata(cx, name).await?;
    let stamped = secret
        .as_ref()
        .and_then(|s| s.metadata.annotations.as_ref())
        .and_then(|m| m.get(ROTATION_ID_ANNOTATION));
    if stamped.map(String::as_str) == Some(rotation) {
        if cx.ctx.dry_run {
            // Only status is left to write, and a dry run writes none.
            return Err(Wait::DryRun {
                reason: "WouldUpdate",
                message: format!(
                    "would complete the interrupted rotation of {}: Secret {name} already holds its values",
                    K::what(id)
                ),
            }
            .into());
        }
        let annotations = secret
            .and_then(|s| s.metadata.annotations)
            .unwrap_or_default();
        // Settle the intent first (a compare-and-swap: a stale view stops here), then restart.
        let now = finish(object, status, &annotations);
        cx.save_status(status).await?;
        restart_workloads(object, cx, &now).await;
        return Ok(Change::new(
            "Rotated",
            format!(
                "completed the interrupted rotation of {}: Secret {name} already holds its values",
                K::what(id)
            ),
        ));
    }
    if let Some(left) = maybe_in_flight(
        K::rotation_status(status),
        cx.ctx.call_windows.longest_attempt,
    ) {
        return Err(Wait::RotationInFlight {
            message: format!(
                "a rotation of {} recorded by another process may still be in flight; doing it again once any such call has ended",
                K::what(id)
            ),
            look_again_in: left,
        }
        .into());
    }
    let rotating_for = K::rotation_status(status)
        .rotating_for
        .clone()
        .unwrap_or_else(|| current_trigger(object));
    // Neither a rotation nor a replacement issues values while their Secret cannot be written.
    let secret_version = writable_secret(object, cx).await?;
    if let Some(message) = K::give_up_lost(status, id) {
        // The rotation ends here (a compare-and-swap: of two writers resuming the same view,
        // only one gives the object up); the kind replaces the object.
        let rotation = K::rotation_status(status);
        settle_intent(rotation);
        rotation.observed_rotation_trigger = Some(rotating_for);
        cx.save_status(status).await?;
        return Ok(Change::new("Replacing", message));
    }
    // A fresh id, recorded with a compare-and-swap: of two writers resuming the same view,
    // only one calls again.
    let rotation = uuid::Uuid::new_v4().to_string();
    record_intent(K::rotation_status(status), rotation.clone(), rotating_for);
    cx.save_status(status).await?;
    let why = "an interrupted rotation is done again";
    let call_of = Call {
        rotation: &rotation,
        why,
        asked: false,
    };
    call(object, cx, status, id, call_of, secret_version).await
}

/// How long a call of the recorded rotation may still be running, when it may: none ended
/// (as far as status knows) and it was recorded less than the longest call ago.
fn maybe_in_flight(rotation: &RotationStatus, longest_attempt: Duration) -> Option<Duration> {
    if rotation.rotation_call_ended_at.is_some() {
        return None;
    }
    let since = rotation
        .pending_rotation_since
        .as_deref()?
        .parse::<jiff::Timestamp>()
        .ok()?;
    let longest = jiff::SignedDuration::try_from(longest_attempt).ok()?;
    let left = since
        .checked_add(longest)
        .ok()?
        .duration_since(jiff::Timestamp::now());
    Duration::try_from(left).ok().filter(|d| !d.is_zero())
}

/// One rotate call: the intent it is for, why, and whether the spec asks for it
/// ([`rotate`]'s `asked`).
struct Call<'a> {
    rotation: &'a str,
    why: &'a str,
    asked: bool,
}

/// The rotate call, the Secret write, then the settled intent and the restarts.
async fn call<K: Rotates>(
    object: &K,
    cx: &Cx<'_, K>,
    status: &mut K::Status,
    id: &str,
    Call {
        rotation,
        why,
        asked,
    }: Call<'_>,
    secret_version: SecretVersion,
) -> Result<Change, Halt> {
    let issued = match object.call_rotate(cx, id).await {
        Ok(issued) => issued,
        Err(e) if asked && surely_not_rotated(&e) => {
            // Nothing was issued: the intent ends, and the trigger (or interval), still not
            // observed, asks again (a lost answer instead would have its values taken for
            // gone). An intent that stands for values never delivered is kept: only it asks.
            settle_intent(K::rotation_status(status));
            return Err(e);
        }
        Err(e) => return Err(call_ended::<K>(status, e)),
    };
    for (_, value) in &issued.values {
        cx.conceal(value.expose());
    }
    cx.ctx.failpoints.hit(K::AFTER_ROTATE).await;
    let name = object.secret_name();
    let mut annotations = issued.annotations;
    if issued.incomplete.is_none() {
        // The stamp says "this rotation's values are stored": never on a partial answer.
        annotations.push((ROTATION_ID_ANNOTATION, rotation.to_string()));
    }
    // The answer is the only copy of the new values: write them before anything else.
    let delivery = Delivery {
        name,
        values: issued
            .values
            .iter()
            .map(|(key, value)| (*key, value.expose()))
            .collect(),
        annotations: annotations.clone(),
        expected: secret_version.as_deref(),
    };
    if let Err(e) = secret_delivery::deliver(cx, delivery).await {
        return Err(call_ended::<K>(status, e));
    }
    let annotations = annotations
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    if let Some(missing) = issued.incomplete {
        return Err(call_ended::<K>(status, Error::MissingState(missing).into()));
    }
    let now = finish(object, status, &annotations);
    restart_workloads(object, cx, &now).await;
    Ok(Change::new(
        "Rotated",
        format!(
            "rotated {} ({why}); Secret {name} updated{}",
            K::what(id),
            issued.note
        ),
    ))
}

/// True when the rotate call surely did not rotate: it never reached the API (the gate, the
/// token, the spec stopped it) or the API answered that it did not (a 4xx). A timeout, a cut
/// connection, a 5xx or an unreadable 2xx may have rotated ([`crate::api::ApiError::outcome_unknown`]).
fn surely_not_rotated(error: &Halt) -> bool {
    match error {
        Halt::Fail(Error::Api { source, .. }) => !source.outcome_unknown(),
        Halt::Wait(_) | Halt::Fail(_) => true,
    }
}

/// Records that the rotation's call ended without its values stored (the failure's status
/// write keeps it): the next reconcile may rotate again at once.
fn call_ended<K: Rotates>(status: &mut K::Status, error: Halt) -> Halt {
    K::rotation_status(status).rotation_call_ended_at = Some(now_rfc3339());
    error
}

/// Records a finished rotation in `status`; returns its time, for the workload restarts.
fn finish<K: Rotates>(
    object: &K,
    status: &mut K::Status,
    annotations: &BTreeMap<String, String>,
) -> String {
    let now = now_rfc3339();
    let rotation = K::rotation_status(status);
    // The trigger this rotation was started for, not one that changed while it was in flight.
    let rotated_for = rotation
        .rotating_for
        .take()
        .unwrap_or_else(|| current_trigger(object));
    settle_intent(rotation);
    rotation.last_rotated_at = Some(now.clone());
    rotation.next_rotation_at = None;
    rotation.observed_rotation_trigger = Some(rotated_for);
    K::settle(status, annotations);
    set_credentials_condition(object, status, true, "Stored", K::STORED);
    now
}

/// Rolls the workloads of `spec.rotation.restart` so they read the new values.
pub async fn restart_workloads<K: Rotates>(object: &K, cx: &Cx<'_, K>, rotated_at: &str) {
    if let Some(rotation) = object.rotation() {
        secret_delivery::restart_workloads(cx, &rotation.restart, rotated_at).await;
    }
}

/// The Secret named by the kind must never be one aigw did not create for this resource.
pub async fn check_secret_is_ours<K: Rotates>(
    object: &K,
    cx: &Cx<'_, K>,
) -> Result<SecretVersion, Error> {
    secret_delivery::check_secret_is_ours(cx, object.secret_name(), K::SECRET_FIELD).await
}

/// The version of the Secret the values go to, once it is this resource's and can be written:
/// no values are issued while their Secret cannot be written (an admission policy refusing it
/// would otherwise have a key minted on every retry).
async fn writable_secret<K: Rotates>(object: &K, cx: &Cx<'_, K>) -> Result<SecretVersion, Halt> {
    let version = check_secret_is_ours(object, cx).await?;
    secret_delivery::probe(cx, object.secret_name(), version.as_deref()).await?;
    Ok(version)
}

/// Sets the `CredentialsAvailable` condition.
pub fn set_credentials_condition<K: Rotates>(
    object: &K,
    status: &mut K::Status,
    available: bool,
    reason: &str,
    message: &str,
) {
    set_condition(
        status.conditions_mut(),
        CREDENTIALS_AVAILABLE,
        available,
        reason,
        message,
        object.meta().generation,
    );
}
