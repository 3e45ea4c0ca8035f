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

pub use schedule::{Schedule, due_in, next_rotation_at};

use crate::api::SecretString;

use crate::controller::driver::{Change, Cx, Managed};
use crate::controller::error::Error;

use crate::controller::now_rfc3339;
use crate::controller::status::{CommonStatus, Outcome, record_outcome, set_condition};
use crate::resources::rotation::{Rotation, RotationStatus};

use super::secret_delivery::{self, Delivery, ROTATION_ID_ANNOTATION, SecretVersion};

/// Condition saying whether the Secret holds the resource's current values.
pub const CREDENTIALS_AVAILABLE: &str = "CredentialsAvailable";

/// What a kind whose values the API issues once supplies to the protocol.
pub trait Rotates: Managed {
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
    fn rotation_status(status: &mut Self::Status) -> &mut RotationStatus;

    /// Calls the API's rotation for the remote object `id`, through `cx.api(Op::Rotate)`.
    fn call_rotate(
        &self,
        cx: &Cx<'_, Self>,
        id: &str,
    ) -> impl Future<Output = Result<Issued, Error>> + Send;

    /// Records what the Secret's annotations say about the values it now holds (for example
    /// when the previous value stops working): those written with them.
    fn settle(_status: &mut Self::Status, _annotations: &BTreeMap<String, String>) {}
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
    Schedule {
        trigger: &trigger,
        observed_trigger: rotation.observed_rotation_trigger.as_deref(),
        has_interval: object.rotation().is_some_and(|r| r.interval.is_some()),
        next_rotation_at: rotation.next_rotation_at.as_deref(),
    }
    .due()
}

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
) -> Result<Option<Change>, Error> {
    let rotation = K::rotation_status(status);
    if let Some(pending) = rotation.pending_rotation.clone() {
        return resume(object, cx, status, id, &pending).await.map(Some);
    }
    if let Some(why) = rotation_due(object, rotation) {
        return rotate(object, cx, status, id, why).await.map(Some);
    }
    if rotation.observed_rotation_trigger.is_none() {
        rotation.observed_rotation_trigger = Some(current_trigger(object));
    }
    Ok(None)
}

/// Records that values were issued into the Secret outside a rotation (a create, or a create
/// whose Secret write failed): `stored` says which. After a failed write only a rotation can
/// issue new values, so that intent is recorded for the next reconcile.
pub fn issued_by_create<K: Rotates>(object: &K, status: &mut K::Status, stored: bool) -> String {
    let now = now_rfc3339();
    let rotation = K::rotation_status(status);
    if stored {
        rotation.last_rotated_at = Some(now.clone());
        rotation.observed_rotation_trigger = Some(current_trigger(object));
        set_credentials_condition(object, status, true, "Stored", K::STORED);
    } else {
        rotation.pending_rotation = Some(uuid::Uuid::new_v4().to_string());
        rotation.rotating_for = Some(current_trigger(object));
    }
    now
}

/// Rotates now, for the reason `why`: the intent (a compare-and-swap), then the call and the
/// Secret write.
pub async fn rotate<K: Rotates>(
    object: &K,
    cx: &Cx<'_, K>,
    status: &mut K::Status,
    id: &str,
    why: &str,
) -> Result<Change, Error> {
    let secret_version = check_secret_is_ours(object, cx).await?;
    let rotation = uuid::Uuid::new_v4().to_string();
    let state = K::rotation_status(status);
    state.pending_rotation = Some(rotation.clone());
    state.rotating_for = Some(current_trigger(object));
    let rotating = Outcome::Progressing {
        reason: K::ROTATING_REASON.into(),
        message: format!("rotating {}: {why}", K::what(id)),
    };
    record_outcome(status.conditions_mut(), &rotating, object.meta().generation);
    cx.save_status(status).await?;
    call(object, cx, status, id, &rotation, why, secret_version).await
}

/// Finishes the rotation an earlier reconcile started: completes it when the Secret already
/// holds its values, otherwise rotates again (the values of the first call, if it happened,
/// are lost).
async fn resume<K: Rotates>(
    object: &K,
    cx: &Cx<'_, K>,
    status: &mut K::Status,
    id: &str,
    rotation: &str,
) -> Result<Change, Error> {
    let name = object.secret_name();
    let secret = secret_delivery::secrets(cx)
        .get_metadata_opt(name)
        .await
        .map_err(|e| Error::kube(format!("read the Secret {name}"), e))?;
    let stamped = secret
        .as_ref()
        .and_then(|s| s.metadata.annotations.as_ref())
        .and_then(|m| m.get(ROTATION_ID_ANNOTATION));
    if stamped.map(String::as_str) == Some(rotation) {
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
    let secret_version = check_secret_is_ours(object, cx).await?;
    let why = "an interrupted rotation is done again";
    call(object, cx, status, id, rotation, why, secret_version).await
}

/// The rotate call, the Secret write, then the settled intent and the restarts.
async fn call<K: Rotates>(
    object: &K,
    cx: &Cx<'_, K>,
    status: &mut K::Status,
    id: &str,
    rotation: &str,
    why: &str,
    secret_version: SecretVersion,
) -> Result<Change, Error> {
    let issued = object.call_rotate(cx, id).await?;
    for (_, value) in &issued.values {
        cx.conceal(value.expose());
    }
    cx.ctx.failpoints.hit(K::AFTER_ROTATE).await;
    let name = object.secret_name();
    let mut annotations = issued.annotations;
    annotations.push((ROTATION_ID_ANNOTATION, rotation.to_string()));
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
    secret_delivery::deliver(cx, delivery).await?;
    let annotations = annotations
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    if let Some(missing) = issued.incomplete {
        return Err(Error::MissingState(missing));
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

/// Records a finished rotation in `status`; returns its time, for the workload restarts.
fn finish<K: Rotates>(
    object: &K,
    status: &mut K::Status,
    annotations: &BTreeMap<String, String>,
) -> String {
    let now = now_rfc3339();
    let rotation = K::rotation_status(status);
    rotation.pending_rotation = None;
    rotation.last_rotated_at = Some(now.clone());
    rotation.next_rotation_at = None;
    // The trigger this rotation was started for, not one that changed while it was in flight.
    let rotated_for = rotation
        .rotating_for
        .take()
        .unwrap_or_else(|| current_trigger(object));
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
