//! Rotating an API key into its Secret (see the parent module): the intent first, the rotate
//! call, the Secret write stamped with the rotation's id, then the workloads roll.

use std::time::Duration;

use crate::api::RotateApiKeyRequest;
use crate::controller::driver::{Change, Cx};
use crate::controller::error::Error;
use crate::controller::failpoints::AFTER_API_KEY_ROTATE;
use crate::controller::gate::Op;
use crate::controller::now_rfc3339;
use crate::controller::status::{Outcome, record_outcome, set_condition};
use crate::resources::api_key::{ApiKey, ApiKeyStatus, SECRET_KEY};

use super::super::deployment::CREDENTIALS_AVAILABLE;
use super::super::rotation_schedule::{self, Schedule};
use super::super::secret_delivery::{
    self, Delivery, ROTATION_ID_ANNOTATION, SecretVersion, check_secret_is_ours,
};
use super::{API_KEY_ID_ANNOTATION, PREVIOUS_EXPIRES_ANNOTATION, SECRET_FIELD};

/// The trigger as recorded in status: the spec's value, or "" when it sets none.
pub(super) fn current_trigger(key: &ApiKey) -> String {
    key.spec
        .rotation
        .as_ref()
        .and_then(|r| r.trigger.clone())
        .unwrap_or_default()
}

/// Why a rotation is due now, if it is (see [`Schedule::due`]).
pub(super) fn rotation_due(key: &ApiKey, status: &ApiKeyStatus) -> Option<&'static str> {
    let trigger = current_trigger(key);
    Schedule {
        trigger: &trigger,
        observed_trigger: status.observed_rotation_trigger.as_deref(),
        has_interval: key
            .spec
            .rotation
            .as_ref()
            .is_some_and(|r| r.interval.is_some()),
        next_rotation_at: status.next_rotation_at.as_deref(),
    }
    .due()
}

/// Sets `nextRotationAt` from the last rotation (or creation) and the interval.
pub(super) fn schedule_rotation(status: &mut ApiKeyStatus, interval: Option<Duration>) {
    status.next_rotation_at = rotation_schedule::next_rotation_at(
        status.next_rotation_at.as_deref(),
        status.last_rotated_at.as_deref(),
        interval,
    );
}

/// One rotation's call and Secret write.
struct Rotating<'a> {
    id: &'a str,
    rotation: &'a str,
    why: &'a str,
    secret_version: SecretVersion,
    transition: Option<Duration>,
}

/// Rotates the key: records the intent (a compare-and-swap, so two writers never both rotate
/// for one trigger), calls rotate, writes the new value into the Secret stamped with the
/// rotation's id, then settles the intent and rolls the workloads.
pub(super) async fn rotate(
    key: &ApiKey,
    cx: &Cx<'_, ApiKey>,
    status: &mut ApiKeyStatus,
    id: &str,
    why: &str,
    transition: Option<Duration>,
) -> Result<Change, Error> {
    let secret_version = check_secret_is_ours(cx, &key.spec.secret_ref.name, SECRET_FIELD).await?;
    let rotation = uuid::Uuid::new_v4().to_string();
    status.pending_rotation = Some(rotation.clone());
    status.rotating_for = Some(current_trigger(key));
    let rotating = Outcome::Progressing {
        reason: "RotatingKey".into(),
        message: format!("rotating API key {id}: {why}"),
    };
    record_outcome(&mut status.conditions, &rotating, key.metadata.generation);
    cx.save_status(status).await?;
    let rotating = Rotating {
        id,
        rotation: &rotation,
        why,
        secret_version,
        transition,
    };
    call_rotate(key, cx, status, rotating).await
}

/// Finishes the rotation an earlier reconcile started: completes it when the Secret already
/// holds its value, otherwise rotates again (the value of the first call, if it happened, is
/// lost; it stops working when its transition ends).
pub(super) async fn resume_rotation(
    key: &ApiKey,
    cx: &Cx<'_, ApiKey>,
    status: &mut ApiKeyStatus,
    id: &str,
    rotation: &str,
    transition: Option<Duration>,
) -> Result<Change, Error> {
    let name = &key.spec.secret_ref.name;
    let secret = secret_delivery::secrets(cx)
        .get_metadata_opt(name)
        .await
        .map_err(|e| Error::kube(format!("read the credentials Secret {name}"), e))?;
    let annotation = |a: &str| {
        secret
            .as_ref()
            .and_then(|s| s.metadata.annotations.as_ref())
            .and_then(|m| m.get(a).cloned())
    };
    if annotation(ROTATION_ID_ANNOTATION).as_deref() == Some(rotation) {
        // Settle the intent first (a compare-and-swap: a stale view stops here), then restart.
        let now = finish_rotation(key, status, annotation(PREVIOUS_EXPIRES_ANNOTATION));
        cx.save_status(status).await?;
        restart_workloads(key, cx, &now).await;
        return Ok(Change::new(
            "Rotated",
            format!(
                "completed the interrupted rotation of API key {id}: Secret {name} already holds its value"
            ),
        ));
    }
    let secret_version = check_secret_is_ours(cx, name, SECRET_FIELD).await?;
    let rotating = Rotating {
        id,
        rotation,
        why: "an interrupted rotation is done again",
        secret_version,
        transition,
    };
    call_rotate(key, cx, status, rotating).await
}

async fn call_rotate(
    key: &ApiKey,
    cx: &Cx<'_, ApiKey>,
    status: &mut ApiKeyStatus,
    rotating: Rotating<'_>,
) -> Result<Change, Error> {
    let Rotating {
        id,
        rotation,
        why,
        secret_version,
        transition,
    } = rotating;
    let request = transition
        .map(RotateApiKeyRequest::with_transition)
        .unwrap_or_default();
    let rotated = cx
        .api(Op::Rotate)
        .await?
        .api_keys(key.spec.kind.to_api())
        .rotate(id, &request)
        .await
        .map_err(|e| Error::api(format!("rotate API key {id}"), e))?;
    cx.conceal(rotated.key.expose());
    cx.ctx.failpoints.hit(AFTER_API_KEY_ROTATE).await;
    let name = &key.spec.secret_ref.name;
    let mut annotations = vec![
        (API_KEY_ID_ANNOTATION, id.to_string()),
        (ROTATION_ID_ANNOTATION, rotation.to_string()),
    ];
    if let Some(expires) = &rotated.key_transition_expires_at {
        annotations.push((PREVIOUS_EXPIRES_ANNOTATION, expires.clone()));
    }
    // The answer is the only copy of the new value: write it before anything else.
    let delivery = Delivery {
        name,
        values: vec![(SECRET_KEY, rotated.key.expose())],
        annotations,
        expected: secret_version.as_deref(),
    };
    secret_delivery::deliver(cx, delivery).await?;
    let now = finish_rotation(key, status, rotated.key_transition_expires_at.clone());
    restart_workloads(key, cx, &now).await;
    let until = rotated
        .key_transition_expires_at
        .map(|t| format!("; the previous value works until {t}"))
        .unwrap_or_default();
    Ok(Change::new(
        "Rotated",
        format!("rotated API key {id} ({why}); Secret {name} updated{until}"),
    ))
}

/// Records a finished rotation in `status`; returns its time, for the workload restarts.
fn finish_rotation(
    key: &ApiKey,
    status: &mut ApiKeyStatus,
    previous_expires: Option<String>,
) -> String {
    let now = now_rfc3339();
    status.pending_rotation = None;
    status.last_rotated_at = Some(now.clone());
    status.next_rotation_at = None;
    status.previous_key_expires_at = previous_expires;
    // The trigger this rotation was started for, not one that changed while it was in flight.
    let rotated_for = status
        .rotating_for
        .take()
        .unwrap_or_else(|| current_trigger(key));
    status.observed_rotation_trigger = Some(rotated_for);
    set_secret_condition(key, status, true, "Stored", STORED);
    now
}

pub(super) async fn restart_workloads(key: &ApiKey, cx: &Cx<'_, ApiKey>, rotated_at: &str) {
    if let Some(rotation) = &key.spec.rotation {
        secret_delivery::restart_workloads(cx, &rotation.restart, rotated_at).await;
    }
}

pub(super) const STORED: &str = "the Secret holds the key's current value";

/// Checks that the Secret still holds the key's value; a missing one cannot be refilled by a
/// read (the value is one-time), only by a rotation the user asks for.
pub(super) async fn check_secret(
    key: &ApiKey,
    cx: &Cx<'_, ApiKey>,
    status: &mut ApiKeyStatus,
    id: &str,
) -> Result<(), Error> {
    let name = &key.spec.secret_ref.name;
    if secret_delivery::secret_holds(cx, name, SECRET_KEY).await? {
        set_secret_condition(key, status, true, "Stored", STORED);
        return Ok(());
    }
    let message = format!(
        "the Secret {name} is missing and the one-time value of API key {id} cannot be read back; change spec.rotation.trigger to issue a new one"
    );
    set_secret_condition(key, status, false, "SecretMissing", &message);
    Err(Error::MissingState(message))
}

pub(super) fn set_secret_condition(
    key: &ApiKey,
    status: &mut ApiKeyStatus,
    available: bool,
    reason: &str,
    message: &str,
) {
    set_condition(
        &mut status.conditions,
        CREDENTIALS_AVAILABLE,
        available,
        reason,
        message,
        key.metadata.generation,
    );
}
