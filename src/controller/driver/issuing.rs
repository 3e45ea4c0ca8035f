//! The flow of a kind whose create answer carries values the API never returns again (a
//! Deployment's credentials, an API key's value): the driver's flow ([`super::flow`]) with two
//! capabilities, rotation ([`super::rotation`]) and the delivery of the values into the Secret
//! aigw owns ([`super::secret_delivery`]). The kind supplies its verbs ([`Verbs`]), its rotate
//! call ([`Rotates`]) and what its answers issue ([`Issues`]); the driver keeps the protocols:
//!
//! - the create is the shared create-once protocol, and its answer's values go into the Secret
//!   before anything else. When that fails, a kind that must leave no live value nobody holds
//!   deletes the object (and never creates while the Secret cannot be written); otherwise a
//!   rotation is recorded, which issues new values once it can be;
//! - an object an earlier create made, whose answer was lost, is taken, rotated, adopted or
//!   replaced as the kind says ([`Issues::recovery`]);
//! - an object that exists is updated like any other, then its rotation resumes or starts
//!   when due (spaced, exactly once per trigger), or the Secret is checked. An object the
//!   rotation gave up (its new value was lost) is replaced by a new one, and deleted once the
//!   Secret holds the new one's value;
//! - `deletionPolicy: Orphan` keeps the Secret with the remote object.

use std::collections::BTreeMap;
use std::time::Duration;

use super::calls::{Calls, Found, Posted};
use super::create::{Created, made_by_unfinished_create};
use super::flow::{self, Recovery, Step, Undelivered};
use super::rotation::{self, Rotates};
use super::secret_delivery::{self, Delivery, ROTATION_ID_ANNOTATION, SecretVersion};
use super::secret_delivery::{UNFINISHED_ROTATION_ANNOTATION, Unfinished};
use super::verbs::Verbs;
use super::{Change, Cx, orphaned, removed};
use crate::api::SecretString;
use crate::controller::driver::gate::Op;
use crate::controller::driver::status::IntentStatus;
use crate::controller::error::{Error, Halt};
use crate::controller::now_rfc3339;
use crate::controller::runtime::failpoints;

/// What a kind whose answers issue one-time values supplies besides its verbs.
pub trait Issues: Verbs + Rotates {
    /// The annotation on the Secret naming the remote object its values belong to.
    const ID_ANNOTATION: &'static str;
    /// True for a kind that leaves no live object whose values no Secret holds (an API key):
    /// one whose values could not be stored is deleted, and none is created while the Secret
    /// cannot be written. False: a rotation issues new values later.
    const DISCARDS_UNDELIVERED: bool = false;
    /// The failpoint hit right after a create's answer, if any (tests and chaos arm it).
    const AFTER_CREATE: Option<&'static str> = None;

    /// `spec.rotation`'s interval and key transition, or why the spec is refused.
    fn timing(&self) -> Result<(Option<Duration>, Option<Duration>), Error>;
    /// The values a create's answer carries, for the Secret.
    fn issued(posted: &Posted<Self>) -> Vec<(&'static str, SecretString)>;
    /// The `Created` message once Secret `secret` holds the values of the object `key`.
    fn created_message(key: &str, secret: &str) -> String;
    /// What becomes of `found`, the object an earlier create made whose answer was lost;
    /// `held`: the Secret names it (its values got there before a status write was lost).
    fn recovery(&self, found: &Found<Self>, held: bool) -> Recovery;
    /// The key of the Secret that holds the issued value `check_delivered` looks for.
    const HELD: &'static str;
    /// Why the Secret `secret` may rightly lack the values of the remote object `key`: they
    /// were issued before aigw managed it (an adopted deployment). `None` (the default): a
    /// Secret without them lost them.
    fn never_issued(&self, _status: &Self::Status, _key: &str, _secret: &str) -> Option<String> {
        None
    }
    /// The remote object a replacement replaces, deleted once the Secret holds the new one's
    /// values ([`Rotates::give_up_lost`] records it).
    fn replaced_remote(_status: &Self::Status) -> Option<String> {
        None
    }
    /// Forgets [`Issues::replaced_remote`] once it is deleted.
    fn forget_replaced(_status: &mut Self::Status) {}
}

/// [`super::Managed::apply`]: observe, create once or update, then rotate or check the
/// Secret, and schedule the next rotation.
pub async fn apply<K: Issues>(
    object: &K,
    cx: &Cx<'_, K>,
    status: &mut K::Status,
) -> Result<Vec<Change>, Halt> {
    let (interval, transition) = object.timing()?;
    let interval = rotation::floored_interval(object, cx, status, interval, transition).await;
    let (desired, remote, comparison, step) = flow::found(object, cx, status).await?;
    let mut changes = Vec::new();
    match (step, &remote, &comparison) {
        (Step::Create, _, _) => changes.extend(create(object, cx, status, &desired).await?),
        (Step::Refuse(fields), Some(remote), _) => {
            return Err(flow::refusal::<K>(remote, &fields).into());
        }
        (step, Some(remote), Some(comparison)) => {
            if let Step::Update { drift } = step {
                let update = flow::update(object, cx, status, &desired, remote, comparison, drift);
                changes.push(update.await?);
            }
            let key = K::Calls::key(remote);
            changes.extend(keep_issued(object, cx, status, &desired, &key).await?);
        }
        // `decide` refuses or updates only an observed object.
        (Step::Refuse(_) | Step::Update { .. } | Step::InSync, _, _) => {}
    }
    changes.extend(retire_replaced(object, cx, status).await?);
    rotation::schedule(K::rotation_status(status), interval);
    Ok(changes)
}

/// [`super::Managed::cleanup`]: the flow's, with the Secret kept under `deletionPolicy: Orphan`
/// (the remote object stays live and its one-time values exist nowhere else). A replaced
/// object goes whatever the policy (its last value was lost); mid-replacement under Orphan,
/// the Secret still holds the replaced object's value, which works until it goes: kept, unless
/// the Secret names the replacement's object already (delivered, its record lost).
pub async fn cleanup<K: Issues>(object: &K, cx: &Cx<'_, K>) -> Result<Vec<Change>, Halt> {
    let status = object.status().cloned().unwrap_or_default();
    let replaced = K::replaced_remote(&status);
    let mut changes = Vec::new();
    if let (Some(replaced), None, true) = (&replaced, K::recorded(&status), object.orphans()) {
        // The object the Secret names: the replaced one until the replacement is delivered.
        let secret = object.secret_name();
        let read = secret_delivery::read_now(cx, secret, K::ID_ANNOTATION).await?;
        let held = read.named.as_deref();
        // What the replacement's unfinished create made is held by nobody: it goes, unless the
        // Secret holds it already (the replacement was delivered, only its record was lost).
        if status.pending_create().is_some() {
            let lookup = K::Calls::find_created(object, cx, &status);
            if let Some(found) =
                made_by_unfinished_create(&status, K::WHAT, lookup, cx.ctx.call_windows).await?
            {
                let key = K::Calls::found_key(&found);
                let stored = held == Some(key.as_str());
                match object.recovery(&found, stored) {
                    Recovery::Stored | Recovery::Found => {}
                    // Taken under the adoption grant, not proven the replacement's: never
                    // deleted, like any object found only by what the create sent.
                    Recovery::Adopt => changes.push(Change::new(
                        "Released",
                        format!(
                            "left {} {key} in place without a call: nothing proves the unfinished replacement made it",
                            K::WHAT
                        ),
                    )),
                    Recovery::Replace | Recovery::Rotate(_) => {
                        // Whoever holds its answer must not deliver it after the DELETE. No
                        // Secret: a delivery after this one would recreate it, owned by a
                        // resource about to be gone (collected), so none is made to release.
                        if !stored && read.version.is_some() {
                            secret_delivery::fence(cx, secret, &read).await?;
                        }
                        fence_intent(cx, &status).await?;
                        let what = format!("{} {key} (made by an unfinished replacement)", K::WHAT);
                        changes.extend(remove(object, cx, &status, &key, &what).await?);
                    }
                }
            }
        }
        match held.filter(|held| held != replaced) {
            // The Secret holds another object's value (the replacement's, delivered, whatever
            // the lookup could prove of it): that one stays with the Secret, and the replaced
            // object, whose value nothing holds now, goes like any replaced one.
            Some(delivered) => {
                let what = format!("{} {replaced}", K::WHAT);
                changes.extend(remove(object, cx, &status, replaced, &what).await?);
                changes.extend(orphaned(&format!("{} {delivered}", K::WHAT)));
            }
            // The Secret still holds the replaced object's value, which works until it goes.
            None => changes.extend(orphaned(&format!("{} {replaced}", K::WHAT))),
        }
        changes.extend(release_secret(object, cx, &status).await?);
        return Ok(changes);
    }
    if let Some(replaced) = &replaced {
        let what = format!("{} {replaced}", K::WHAT);
        changes.extend(remove(object, cx, &status, replaced, &what).await?);
    }
    if object.orphans() {
        changes.extend(release_secret(object, cx, &status).await?);
    }
    changes.extend(flow::cleanup(object, cx).await?);
    Ok(changes)
}

/// Keeps the Secret under `deletionPolicy: Orphan` (in Observe, and when the grants release
/// the resource too). A rotation unfinished then, whose values the Secret does not hold, may
/// have left it values that no longer work: the Secret is marked so, and a Warning says so.
/// No API call finishes the rotation: a cleanup needs none, and one could hold the finalizer
/// for good.
async fn release_secret<K: Issues>(
    object: &K,
    cx: &Cx<'_, K>,
    status: &K::Status,
) -> Result<Vec<Change>, Halt> {
    let mut status = status.clone();
    let rotation = K::rotation_status(&mut status);
    let since = rotation
        .pending_rotation_since
        .as_deref()
        .unwrap_or("unknown");
    let unfinished = rotation
        .pending_rotation
        .as_deref()
        .map(|rotation| Unfinished { rotation, since });
    let secret = object.secret_name();
    if !secret_delivery::release_secret(cx, secret, unfinished).await? {
        return Ok(Vec::new());
    }
    Ok(vec![Change::warning(
        "UnfinishedRotation",
        format!(
            "left the Secret {secret} in place while a rotation of its values (recorded {since}) was unfinished: the values it holds may no longer work (annotated {UNFINISHED_ROTATION_ANNOTATION}); rotate them before relying on them"
        ),
    )])
}

/// Deletes the remote object `key` (shown as `what`) through the gate; "already gone" is done.
async fn remove<K: Issues>(
    object: &K,
    cx: &Cx<'_, K>,
    status: &K::Status,
    key: &str,
    what: &str,
) -> Result<Vec<Change>, Halt> {
    let (reason, verb) = K::REMOVAL;
    let client = cx.api(Op::Delete).await?;
    let result = K::Calls::delete(object, cx, client, key, status).await;
    Ok(removed(reason, verb, what, result)?)
}

/// Checks that the Secret holds the values of the remote object `key` (they cannot be read
/// back), recording `CredentialsAvailable`: missing, they are lost (an error that only a
/// rotation the user asks for mends), unless they were never issued to aigw
/// ([`Issues::never_issued`]).
async fn check_delivered<K: Issues>(
    object: &K,
    cx: &Cx<'_, K>,
    status: &mut K::Status,
    key: &str,
) -> Result<(), Error> {
    let secret = object.secret_name();
    if secret_delivery::secret_holds(cx, secret, K::HELD).await? {
        rotation::set_credentials_condition(object, status, true, "Stored", K::STORED);
        return Ok(());
    }
    if let Some(message) = object.never_issued(status, key, secret) {
        rotation::set_credentials_condition(object, status, false, "NotIssued", &message);
        return Ok(());
    }
    let message = format!(
        "the Secret {secret} that held {} is missing, and one-time values cannot be read back; change spec.rotation.trigger to issue new ones",
        K::what(key)
    );
    rotation::set_credentials_condition(object, status, false, "SecretMissing", &message);
    Err(Error::MissingState(message))
}

/// The rotation step for the remote object `key`, or the check that the Secret holds its
/// values; a new object when the rotation gave this one up.
async fn keep_issued<K: Issues>(
    object: &K,
    cx: &Cx<'_, K>,
    status: &mut K::Status,
    desired: &K::Desired,
    key: &str,
) -> Result<Vec<Change>, Halt> {
    let mut changes = Vec::new();
    match rotation::rotate_if_due(object, cx, status, key).await? {
        Some(rotated) => changes.push(rotated),
        None => check_delivered(object, cx, status, key).await?,
    }
    if K::recorded(status).is_none() {
        // Given up (its rotated value was lost): a new object replaces it.
        changes.extend(create(object, cx, status, desired).await?);
    }
    Ok(changes)
}

/// Creates the object through the create-once protocol and writes its values into the Secret.
async fn create<K: Issues>(
    object: &K,
    cx: &Cx<'_, K>,
    status: &mut K::Status,
    desired: &K::Desired,
) -> Result<Vec<Change>, Halt> {
    if status.pending_create().is_none() {
        object.before_create(cx, desired).await?;
    }
    let mut version = rotation::check_secret_is_ours(object, cx).await?;
    let before = status.clone();
    let client = cx.create_client().await?;
    if K::DISCARDS_UNDELIVERED {
        // Nothing is issued while its Secret cannot be written.
        secret_delivery::probe(cx, object.secret_name(), version.as_deref()).await?;
    }
    let mut changes = Vec::new();
    if status.pending_create().is_some() {
        cx.ctx
            .failpoints
            .hit(failpoints::BEFORE_CREATE_LOOKUP)
            .await;
    }
    let posted = match flow::post_once(object, cx, status, &before, desired, client).await? {
        Created::Posted(posted) => posted,
        Created::Recovered(found) => {
            let recovered = recover(object, cx, status, &before, desired, found, &mut version);
            match recovered.await? {
                Recovered::Taken(taken) => return Ok(taken),
                Recovered::Deleted(deleted) => changes.extend(deleted),
            }
            // The earlier create's intent is settled: this one looks nothing up.
            match flow::post_once(object, cx, status, &before, desired, client).await? {
                Created::Posted(posted) => posted,
                Created::Recovered(_) => {
                    return Err(Error::MissingState(format!(
                        "the create of the replacement {} found no answer",
                        K::WHAT
                    ))
                    .into());
                }
            }
        }
    };
    changes.push(deliver(object, cx, status, desired, posted, version).await?);
    Ok(changes)
}

/// What [`recover`] did with what an earlier create made.
enum Recovered {
    /// Recorded it (and rotated or recorded a rotation, as its recovery said).
    Taken(Vec<Change>),
    /// Deleted it: a new one is created.
    Deleted(Vec<Change>),
}

/// Takes or deletes `found`, as [`Issues::recovery`] says. Until it is known gone the create
/// intent stays recorded: a failure (the Secret read, the fence, the gate, the DELETE) leaves
/// the status as `before`, and the next reconcile finds it again instead of creating past it.
/// `version`: the Secret's version the next delivery expects, moved by the fence.
async fn recover<K: Issues>(
    object: &K,
    cx: &Cx<'_, K>,
    status: &mut K::Status,
    before: &K::Status,
    desired: &K::Desired,
    found: Found<K>,
    version: &mut SecretVersion,
) -> Result<Recovered, Halt> {
    let keep_intent = |status: &mut K::Status, e: Halt| {
        *status = before.clone();
        e
    };
    let secret = object.secret_name();
    let key = K::Calls::found_key(&found);
    let fenced = unheld(object, cx, &found, &key).await;
    let (recovery, fenced) = fenced.map_err(|e| keep_intent(status, e))?;
    if let Some(fenced) = fenced {
        *version = fenced;
    }
    if recovery == Recovery::Replace {
        fence_intent(cx, before)
            .await
            .map_err(|e| keep_intent(status, e))?;
        cx.ctx
            .failpoints
            .hit(failpoints::BEFORE_RECOVERY_DELETE)
            .await;
        let what = format!(
            "{} {key} (an earlier create made it, but its answer and so its value were lost)",
            K::WHAT
        );
        let deleted = remove(object, cx, &*status, &key, &what).await;
        let deleted = deleted.map_err(|e| keep_intent(status, e))?;
        cx.ctx
            .failpoints
            .hit(failpoints::AFTER_RECOVERY_DELETE)
            .await;
        return Ok(Recovered::Deleted(deleted));
    }
    object.record_compared(status, desired);
    let key = object.record_created(status, desired, Created::Recovered(found));
    let taken = Change::new(
        "Created",
        format!(
            "found {} {key} from an earlier create whose answer was lost",
            K::WHAT
        ),
    );
    let change = match recovery {
        Recovery::Stored => {
            rotation::issued_by_create(object, status, true);
            Change::new(
                "Created",
                format!(
                    "found {} {key} from an earlier create whose status write was lost; Secret {secret} already holds its value",
                    K::WHAT
                ),
            )
        }
        Recovery::Adopt => {
            rotation::issued_by_create(object, status, false);
            Change::new(
                "Adopted",
                format!(
                    "adopted {} {key} (it has the name an unanswered create sent, but not this resource's mark); rotating it to store a value in Secret {secret}",
                    K::WHAT
                ),
            )
        }
        Recovery::Rotate(_) => {
            // The rotation is owed in the same write that records the id: a process that dies
            // before the rotation leaves an intent the next reconcile resumes, not an id with a
            // Secret that nothing will ever fill.
            rotation::issued_by_create(object, status, false);
            taken
        }
        Recovery::Found | Recovery::Replace => taken,
    };
    cx.save_status(status).await?;
    let mut changes = vec![change];
    if let Recovery::Rotate(why) = recovery {
        cx.ctx
            .failpoints
            .hit(failpoints::AFTER_RECOVERY_SAVED)
            .await;
        changes.push(rotation::rotate(object, cx, status, &key, why, false).await?);
    }
    Ok(Recovered::Taken(changes))
}

/// What becomes of `found` (its key `key`), the object an earlier create made, and, when that
/// deletes or rotates it while the Secret does not hold its values, the Secret's version after
/// the fence ([`secret_delivery::fence`]). The create is unfinished, not necessarily lost: another
/// process (a replica whose lease lapsed mid-call, a second operator) may hold its answer and be
/// about to deliver the values; the fence makes that delivery fail rather than store values this
/// recovery kills. Only deletion and rotation are fenced: an object taken as it is (or adopted,
/// rotated later) keeps whatever values that process delivers.
async fn unheld<K: Issues>(
    object: &K,
    cx: &Cx<'_, K>,
    found: &Found<K>,
    key: &str,
) -> Result<(Recovery, Option<SecretVersion>), Halt> {
    let secret = object.secret_name();
    let read = secret_delivery::read_now(cx, secret, K::ID_ANNOTATION).await?;
    let held = read.named.as_deref() == Some(key);
    let recovery = object.recovery(found, held);
    match recovery {
        Recovery::Replace | Recovery::Rotate(_) if !held => {
            let fenced = secret_delivery::fence(cx, secret, &read).await?;
            Ok((recovery, fenced))
        }
        _ => Ok((recovery, None)),
    }
}

/// Fences the resource before a recovery deletes what the unfinished create of `with_intent`
/// made: the intent is written again, conditional on the version this reconcile read, with the
/// time its request is known to have ended. A process that would record the object from an
/// older view (its creator, whose Secret write the fence failed, keeping the object for a
/// rotation when its own DELETE fails; a recovery from a stale copy) now fails instead of
/// recording, then rotating into the Secret, an object about to be deleted. An end recorded
/// already was recorded by a creator that never had the answer; the write then changes nothing
/// but still fails on a version that moved.
async fn fence_intent<K: Issues>(cx: &Cx<'_, K>, with_intent: &K::Status) -> Result<(), Halt> {
    let mut intent = with_intent.clone();
    if let Some(attempt) = intent.create_attempt_mut() {
        attempt.ended_at.get_or_insert_with(now_rfc3339);
    }
    cx.save_intent(&intent).await
}

/// Records what the create made and writes its values into the Secret (stamped with the
/// object's key and the rotation id `create`) before anything else: they exist only in this
/// answer. Then the values count as issued, and a re-created object's workloads roll.
async fn deliver<K: Issues>(
    object: &K,
    cx: &Cx<'_, K>,
    status: &mut K::Status,
    desired: &K::Desired,
    posted: Posted<K>,
    version: SecretVersion,
) -> Result<Change, Halt> {
    let values = K::issued(&posted);
    for (_, value) in &values {
        cx.conceal(value.expose());
    }
    if let Some(failpoint) = K::AFTER_CREATE {
        cx.ctx.failpoints.hit(failpoint).await;
    }
    object.record_compared(status, desired);
    let key = object.record_created(status, desired, Created::Posted(posted));
    let secret = object.secret_name();
    let annotations = vec![
        (K::ID_ANNOTATION, key.clone()),
        (ROTATION_ID_ANNOTATION, "create".to_string()),
    ];
    let delivery = Delivery {
        name: secret,
        values: values.iter().map(|(k, v)| (*k, v.expose())).collect(),
        annotations: annotations.clone(),
        expected: version.as_deref(),
    };
    if let Err(e) = secret_delivery::deliver(cx, delivery).await {
        undelivered(object, cx, status, &key, e).await?;
    }
    // An object created again (the remote one was gone) has new values: roll the workloads.
    let recreated = K::rotation_status(status).last_rotated_at.is_some();
    let annotations: BTreeMap<String, String> = annotations
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    K::settle(status, &annotations);
    let now = rotation::issued_by_create(object, status, true);
    cx.save_status(status).await?;
    if recreated {
        rotation::restart_workloads(object, cx, &now).await;
    }
    Ok(Change::new("Created", K::created_message(&key, secret)))
}

/// After the Secret write of the values of `key` failed with `error`: `Ok` when it stored them
/// after all; otherwise the object is deleted (a kind that discards it) or a rotation is
/// recorded with its key, and the error stands.
async fn undelivered<K: Issues>(
    object: &K,
    cx: &Cx<'_, K>,
    status: &mut K::Status,
    key: &str,
    error: Halt,
) -> Result<(), Halt> {
    let secret = object.secret_name();
    let conflict = matches!(error, Halt::Fail(Error::SecretConflict(_)));
    let held = match K::DISCARDS_UNDELIVERED && !conflict {
        // A write whose answer was lost may have stored them after all.
        true => match secret_delivery::secret_annotation(cx, secret, K::ID_ANNOTATION).await {
            Ok(held) => Some(held.as_deref() == Some(key)),
            Err(_) => None,
        },
        false => Some(false),
    };
    let outcome = match held {
        Some(held) => flow::undelivered(K::DISCARDS_UNDELIVERED, conflict, held),
        // Whether it stored them is not known: nothing is deleted on a read that failed; a
        // rotation gives the Secret values of the object either way.
        None => Undelivered::Rotate,
    };
    match outcome {
        Undelivered::Stored => return Ok(()),
        Undelivered::Rotate => {}
        Undelivered::Discard { or_rotate } => {
            let why = match conflict {
                // Someone else's Secret took the name.
                true => "no Secret can hold its value".to_string(),
                false => format!("its value could not be stored in Secret {secret}"),
            };
            let client = cx.api(Op::Delete).await?;
            let result = K::Calls::delete(object, cx, client, key, &*status).await;
            let (reason, verb) = K::REMOVAL;
            let what = format!("{} {key} ({why})", K::WHAT);
            match (removed(reason, verb, &what, result), or_rotate) {
                (Ok(_), _) => {
                    // The next create first asks whether the Secret may be written.
                    K::record(status, None);
                    return Err(error);
                }
                (Err(e), false) => return Err(e.into()),
                (Err(_), true) => {}
            }
        }
    }
    // The object stays: only a rotation can give the Secret values of it, once the Secret may
    // be written. Record that intent with the key.
    rotation::issued_by_create(object, status, false);
    cx.save_status(status).await?;
    Err(error)
}

/// Deletes the object a new one replaced ([`Issues::replaced_remote`]) once the Secret holds the new
/// one's value: the old one's last value was lost with a rotation's answer, so nobody holds it.
/// Until then it stays, and with it the value the Secret still holds.
async fn retire_replaced<K: Issues>(
    object: &K,
    cx: &Cx<'_, K>,
    status: &mut K::Status,
) -> Result<Vec<Change>, Halt> {
    let Some(old) = K::replaced_remote(status) else {
        return Ok(Vec::new());
    };
    let new = K::recorded(status);
    // A new object whose Secret write failed waits for its own rotation into the Secret; and
    // the object the Secret holds is never the one deleted.
    let rotating = K::rotation_status(status).pending_rotation.is_some();
    if new.is_none() || new.as_deref() == Some(old.as_str()) || rotating {
        return Ok(Vec::new());
    }
    cx.gate.intend(format!(
        "would delete {} {old}, replaced by a new one because the value of its last rotation was lost",
        K::WHAT
    ));
    let what = format!(
        "{} {old} (replaced by {}: the value of its last rotation was lost with the answer)",
        K::WHAT,
        new.unwrap_or_default()
    );
    let changes = remove(object, cx, &*status, &old, &what).await?;
    K::forget_replaced(status);
    Ok(changes)
}
