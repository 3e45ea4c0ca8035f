//! The reconcile driver every kind shares: finalizer, observe → diff → create/update (in the
//! kind), conditions, events, status write, per-object backoff and the periodic drift check.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::NamespaceResourceScope;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event as KubeEvent, EventType};
use kube::runtime::finalizer::{self, Event as FinalizerEvent};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tracing::{debug, info, warn};

pub mod create;
pub mod drift;
pub mod gate;
mod modes;
pub mod status;

use crate::controller::Context;
use crate::controller::backoff::jittered;
use crate::controller::error::Error;
use crate::controller::gate::{Gate, Op};
use crate::controller::status::{
    CommonStatus, IntentStatus, Outcome, record_outcome, sanitize_message, worth_writing,
};
use crate::resources::common::{
    FINALIZER, Governed, ManagementPolicy, Recorded,
    condition::{READY, STALLED},
    find_condition,
};
use modes::{clear_drifted, hold_paused, leave_observed, observe_mode, resume_if_paused};

/// Something a reconcile did to the remote side, reported as a Normal event.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// CamelCase event reason, e.g. `Created`, `Updated`, `DriftCorrected`.
    pub reason: &'static str,
    /// Human readable, secret-free.
    pub message: String,
}

impl Change {
    pub fn new(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }

    /// True when the change corrected an edit made outside aigw.
    pub fn is_drift(&self) -> bool {
        self.reason == "DriftCorrected"
    }
}

/// The change a kind reports when `deletionPolicy: Orphan` leaves `what` (e.g. "config
/// pc-abc") in place.
pub fn orphaned(what: &str) -> Vec<Change> {
    vec![Change::new(
        "Orphaned",
        format!("left {what} in place (deletionPolicy Orphan)"),
    )]
}

/// The outcome of the DELETE (or archive) of `what`: "already gone" (404, or `AB08`) counts
/// as done, so a finalizer that runs twice, or after an out-of-band delete, finishes.
pub fn removed(
    reason: &'static str,
    verb: &str,
    what: &str,
    result: Result<(), crate::api::ApiError>,
) -> Result<Vec<Change>, Error> {
    match result {
        Ok(()) => Ok(vec![Change::new(reason, format!("{verb}d {what}"))]),
        Err(e) if e.is_not_found() => Ok(vec![Change::new(
            reason,
            format!("{what} was already gone"),
        )]),
        Err(e) => Err(Error::api(format!("{verb} {what}"), e)),
    }
}

/// The outcome of the GET of the remote object `what`: `Some` when found; `None` when it is gone
/// and aigw created it (so it is created again); an error naming `adopted_by` (the spec field)
/// when an adopted object is gone, since creating another would not be adopting it.
pub fn observed<T>(
    what: &str,
    adopted_by: Option<&str>,
    result: Result<T, crate::api::ApiError>,
) -> Result<Option<T>, Error> {
    match result {
        Ok(remote) => Ok(Some(remote)),
        Err(e) if e.is_not_found() => match adopted_by {
            None => Ok(None),
            Some(field) => Err(Error::MissingState(format!(
                "{what} named by {field} does not exist: {}",
                e.api_message().unwrap_or("not found")
            ))),
        },
        Err(e) => Err(Error::api(format!("read {what}"), e)),
    }
}

/// A kind aigw keeps in line with the management API. The kind supplies observe/create/
/// update/delete (in `apply`, `observe_only` and `cleanup`); the driver does everything around
/// them.
pub trait Managed:
    crate::controller::claims::Claims
    + Governed
    + Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    type Status: IntentStatus + Recorded;
    /// Kind name, for logs, metrics and messages.
    const KIND: &'static str;
    /// Server-side apply field manager for this kind's status.
    const MANAGER: &'static str;

    fn status(&self) -> Option<&Self::Status>;

    /// Name of the Connection this object uses.
    fn connection_name(&self) -> &str;

    /// Observe the remote object, diff it against the spec, create or update only when they
    /// differ, and fill `status` with what the API reported.
    fn apply(
        &self,
        cx: &Cx<'_, Self>,
        status: &mut Self::Status,
    ) -> impl Future<Output = Result<Vec<Change>, Error>> + Send;

    /// Read-only: GET the remote object this resource manages (if it knows one), record what it
    /// reports in `status`, and return the spec fields that differ. Never writes remotely. Used
    /// to keep status following the remote while the object waits for a spec change.
    fn observe_only(
        &self,
        cx: &Cx<'_, Self>,
        status: &mut Self::Status,
    ) -> impl Future<Output = Result<Vec<&'static str>, Error>> + Send;

    /// Honour `deletionPolicy` for the remote object (treating "already gone" as done). Resolve
    /// the client (`cx.api()`) only when an API call is needed.
    fn cleanup(&self, cx: &Cx<'_, Self>)
    -> impl Future<Output = Result<Vec<Change>, Error>> + Send;

    /// When this object needs looking at again sooner than the drift interval (a rotation that
    /// falls due), given the status just computed.
    fn due_in(&self, _status: &Self::Status) -> Option<Duration> {
        None
    }

    /// True for kinds whose drift is found by the list-based drift pass ([`crate::controller::drift`]):
    /// between drift checks, a reconcile of an applied spec trusts the recorded state and makes
    /// no API call. False: every reconcile reads the remote object.
    const LISTED: bool = false;

    /// False when something besides the spec asks for a write although the spec was applied
    /// (a Secret value the object substitutes changed). Checked before trusting the status,
    /// when the watch of those inputs reported a change ([`crate::controller::drift::Drift::inputs_changed`]).
    fn inputs_unchanged(
        &self,
        _cx: &Cx<'_, Self>,
        _status: &Self::Status,
    ) -> impl Future<Output = bool> + Send {
        async { true }
    }
}

/// What a kind's apply/cleanup may use: the gate to the management API for this object (the
/// only way to its client), the Kubernetes client, and status writes guarded by the
/// resourceVersion this reconcile last saw.
pub struct Cx<'a, K: Managed> {
    pub ctx: &'a Context,
    pub objects: Api<K>,
    pub object: &'a K,
    /// Every management-API call for this object passes here.
    pub gate: Gate<'a, K>,
    /// The resourceVersion of the object as this reconcile last read or wrote it: every status
    /// write is a compare-and-swap against it.
    resource_version: std::sync::Mutex<Option<String>>,
    /// The status last written by `save_status`, so the final write compares against what the
    /// cluster holds now rather than what the reconcile started from.
    saved: std::sync::Mutex<Option<K::Status>>,
}

impl<'a, K: Managed> Cx<'a, K> {
    pub fn new(ctx: &'a Context, objects: Api<K>, object: &'a K) -> Self {
        Self {
            ctx,
            objects,
            object,
            gate: Gate::new(ctx, object),
            resource_version: std::sync::Mutex::new(object.resource_version()),
            saved: Default::default(),
        }
    }

    /// The management API client for `op` on this object's remote object, once the gate
    /// allows it ([`Gate::client`]).
    pub async fn api(&self, op: Op) -> Result<&crate::api::Client, Error> {
        self.gate.client(op).await
    }

    pub fn name(&self) -> String {
        self.object.name_any()
    }

    pub fn namespace(&self) -> String {
        self.object.namespace().unwrap_or_default()
    }

    /// Publishes a Warning event about this object.
    pub async fn warn(&self, reason: &str, message: &str) {
        publish(
            self.ctx,
            self.object,
            EventType::Warning,
            reason,
            &sanitize_message(message),
        )
        .await;
    }

    /// Writes `status` now, before a call whose outcome might be lost (intent records) or right
    /// after one (a remote id). The write carries the resourceVersion this reconcile last saw:
    /// if anyone changed the object since, it fails with [`Error::Conflict`] and nothing that
    /// depends on it may happen. That is what makes an intent a lock: of two writers acting on
    /// the same view, exactly one records its intent; the other re-reads.
    pub async fn save_status(&self, status: &K::Status) -> Result<(), Error> {
        let expected = self.expected_version();
        let written =
            write_status::<K>(&self.objects, &self.name(), status, expected.as_deref()).await?;
        self.ctx.drift.wrote(
            &object_key(self.object),
            written.clone(),
            status.has_intent(),
        );
        *self
            .resource_version
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = written;
        *self.saved.lock().unwrap_or_else(|e| e.into_inner()) = Some(status.clone());
        Ok(())
    }

    /// Writes the result of a side effect this reconcile started under the intent `intent` (the
    /// status it wrote before the call). The result must not be lost to a change made during
    /// the call (a `kubectl delete`, an annotation or spec edit): on a conflict it re-reads the
    /// object and, while the intent there is still the one this reconcile wrote (nobody else
    /// took the work over), writes again on the new resourceVersion.
    pub async fn save_result(&self, status: &K::Status, intent: &K::Status) -> Result<(), Error> {
        const ATTEMPTS: usize = 5;
        let mine = serde_json::to_value(intent).ok();
        for _ in 0..ATTEMPTS {
            match self.save_status(status).await {
                Err(Error::Conflict(_)) => {}
                other => return other,
            }
            let fresh = match self.objects.get_status(&self.name()).await {
                Ok(fresh) => fresh,
                // Gone: nothing holds a status any more, and its finalizer kept it until
                // cleanup, so this only happens once the cleanup has run.
                Err(kube::Error::Api(e)) if e.code == 404 => return Ok(()),
                Err(e) => {
                    return Err(Error::kube(
                        format!("re-read {} {}", K::KIND, self.name()),
                        e,
                    ));
                }
            };
            let held = fresh.status().and_then(|s| serde_json::to_value(s).ok());
            if held != mine {
                return Err(Error::Conflict(format!(
                    "{} {} (its intent was taken over)",
                    K::KIND,
                    self.name()
                )));
            }
            debug!(kind = K::KIND, object = %object_key(self.object), "the object changed during a side effect; writing its result on the new version");
            *self
                .resource_version
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = fresh.resource_version();
        }
        Err(Error::Conflict(format!("{} {}", K::KIND, self.name())))
    }

    /// True when this reconcile has not written the status (so far).
    fn wrote_nothing(&self) -> bool {
        self.expected_version() == self.object.resource_version()
    }

    fn expected_version(&self) -> Option<String> {
        self.resource_version
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn take_saved(&self) -> Option<K::Status> {
        self.saved.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// Server-side applies `status` under the kind's field manager. With `expected` set, the write
/// only succeeds while the object still has that resourceVersion. Returns the new one.
async fn write_status<K: Managed>(
    objects: &Api<K>,
    name: &str,
    status: &K::Status,
    expected: Option<&str>,
) -> Result<Option<String>, Error> {
    let mut patch = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    if let Some(version) = expected {
        patch["metadata"] = serde_json::json!({ "resourceVersion": version });
    }
    let written = objects
        .patch_status(
            name,
            &PatchParams::apply(K::MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await
        .map_err(|e| match e {
            kube::Error::Api(status) if status.code == 409 => {
                Error::Conflict(format!("{} {name}", K::KIND))
            }
            e => Error::kube(format!("write status of {} {name}", K::KIND), e),
        })?;
    debug!(
        kind = K::KIND,
        object = %format!("{}/{name}", written.namespace().unwrap_or_default()),
        resource_version = written.resource_version().unwrap_or_default(),
        "status written"
    );
    Ok(written.resource_version())
}

pub(super) fn object_key<K: Managed>(object: &K) -> String {
    format!(
        "{}/{}/{}",
        K::KIND,
        object.namespace().unwrap_or_default(),
        object.name_any()
    )
}

/// The reconcile function handed to `kube::runtime::Controller::run`. It works from the watch
/// cache: a stale copy cannot cause a remote write, because every intent and status write is a
/// compare-and-swap on the resourceVersion the reconcile started from.
pub async fn reconcile<K: Managed>(object: Arc<K>, ctx: Arc<Context>) -> Result<Action, Error> {
    // A standby keeps its caches warm but acts on nothing; it reconciles everything on election.
    if !ctx.leadership.is_leader() {
        return Ok(Action::await_change());
    }
    let namespace = object.namespace().unwrap_or_default();
    debug!(kind = K::KIND, object = %object_key(&*object), "reconcile");
    let objects: Api<K> = Api::namespaced(ctx.kube.clone(), &namespace);
    let started = std::time::Instant::now();
    let result = finalizer::finalizer(&objects, FINALIZER, object, |event| async {
        match event {
            FinalizerEvent::Apply(object) => apply::<K>(&object, &objects, &ctx).await,
            FinalizerEvent::Cleanup(object) => cleanup::<K>(&object, &objects, &ctx).await,
        }
    })
    .await;
    ctx.metrics
        .observe_reconcile(K::KIND, result.is_ok(), started.elapsed());
    result.map_err(|e| match e {
        finalizer::Error::ApplyFailed(e) | finalizer::Error::CleanupFailed(e) => e,
        finalizer::Error::AddFinalizer(e) | finalizer::Error::RemoveFinalizer(e) => {
            Error::kube("update finalizer", e)
        }
        other => Error::MissingState(other.to_string()),
    })
}

/// `error_policy` for the Controller: only errors the driver could not record in status land
/// here (a lost status race, a failed status or finalizer write, a failed cleanup). Back off
/// per object.
pub fn error_policy<K: Managed>(object: Arc<K>, error: &Error, ctx: Arc<Context>) -> Action {
    let key = object_key(&*object);
    let delay = ctx.backoff.next_delay(&key, error.retry_after());
    if matches!(error, Error::Conflict(_)) {
        debug!(kind = K::KIND, object = %key, retry_in = ?delay, "{error}");
    } else {
        let error = sanitize_message(&error.to_string());
        warn!(kind = K::KIND, object = %key, %error, retry_in = ?delay, "reconcile failed");
    }
    Action::requeue(delay)
}

/// The reason of a `Stalled=True` condition recorded for `generation` that only a spec change
/// can clear (a 400 stays a 400): such an object makes no API write until its spec changes.
fn stalled_on_this_generation(
    conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    generation: Option<i64>,
) -> Option<String> {
    find_condition(conditions, STALLED)
        .filter(|c| {
            c.status == "True" && c.observed_generation == generation && generation.is_some()
        })
        .filter(|c| !Error::is_rechecked_reason(&c.reason))
        .map(|c| c.reason.clone())
}

async fn apply<K: Managed>(object: &K, objects: &Api<K>, ctx: &Context) -> Result<Action, Error> {
    let key = object_key(object);
    let generation = object.meta().generation;
    let before = object.status().cloned();
    let cx = Cx::new(ctx, objects.clone(), object);
    if object.paused() {
        return hold_paused(&cx, before.as_ref()).await;
    }
    let mut status = before.clone().unwrap_or_default();
    resume_if_paused(&mut status, generation);
    let resumed = worth_writing(before.as_ref(), &status);
    // The gate's rules that need no API call: which resource owns the remote object, and
    // what the Connection's grants allow this namespace.
    if let Err(error) = cx.gate.admit().await {
        if error.records_nothing() {
            return Err(error);
        }
        *status.observed_generation_mut() = generation;
        let action = record_failure(&cx, &key, &error, before.as_ref(), &mut status).await;
        if worth_writing(before.as_ref(), &status) {
            cx.save_status(&status).await?;
        }
        return Ok(action);
    }
    // A cached copy that still shows an intent this process has settled is older than its own
    // last write: wait for the watch to deliver the newer one rather than redo finished work.
    let cached_intent = before.as_ref().is_some_and(|s| s.has_intent());
    if ctx.drift.shows_settled_intent(
        &key,
        object.meta().resource_version.as_deref(),
        cached_intent,
    ) {
        debug!(kind = K::KIND, object = %key, "the cache is older than this process's last status write; looking again shortly");
        return Ok(Action::requeue(Duration::from_millis(200)));
    }
    let trust = match resumed {
        // Leaving a pause is recorded by a full reconcile.
        true => None,
        false => trusted(&cx, &key, before.as_ref()).await,
    };
    if let Some(wait) = trust {
        let wait = K::due_in(object, &status).map_or(wait, |due| due.min(wait));
        return Ok(Action::requeue(wait));
    }
    if object.management_policy() == ManagementPolicy::Observe {
        return observe_mode(&cx, &key, before.as_ref(), status).await;
    }
    let stalled = before
        .as_ref()
        .filter(|s| !s.has_intent())
        .and_then(|s| stalled_on_this_generation(s.conditions(), generation));
    if let Some(reason) = stalled {
        debug!(kind = K::KIND, object = %key, %reason, "stalled on this generation; refreshing what it observes, read-only");
        if let Err(e) = K::observe_only(object, &cx, &mut status).await {
            let error = sanitize_message(&e.to_string());
            debug!(kind = K::KIND, object = %key, %error, "read-only refresh failed");
        }
        if worth_writing(before.as_ref(), &status) {
            cx.save_status(&status).await?;
        }
        return Ok(Action::requeue(jittered(ctx.drift_interval)));
    }

    let result = K::apply(object, &cx, &mut status).await;
    let intent = cx.take_saved();
    let written = intent.clone().or(before.clone());
    *status.observed_generation_mut() = generation;
    let (action, changes) = match result {
        Ok(changes) => {
            ctx.backoff.reset(&key);
            let outcome = Outcome::Ready {
                reason: "Reconciled".into(),
                message: format!("{} is in sync with the management API", K::KIND),
            };
            record_outcome(status.conditions_mut(), &outcome, generation);
            clear_drifted::<K>(&mut status, generation);
            // A listed kind is looked at again when its full read is due (the drift pass asks
            // sooner if a list shows it changed); the others at the next drift check.
            let next = match K::LISTED {
                // A read the kind asked for (an object found again after a lost answer).
                true if ctx.drift.is_flagged(&key) => Duration::from_secs(1),
                true => ctx.drift.until_full_read(K::KIND, &key),
                false => jittered(ctx.drift_interval),
            };
            let due = K::due_in(object, &status).map_or(next, |due| due.min(next));
            (Action::requeue(due), changes)
        }
        // Lost a race with another writer (this view is stale), or may not act: record nothing.
        Err(error) if error.records_nothing() => return Err(error),
        Err(error) => (
            record_failure(&cx, &key, &error, before.as_ref(), &mut status).await,
            Vec::new(),
        ),
    };

    // The events first, so that whoever waits for the status finds them; then the one status
    // write (which also records a create's id: a crash before it leaves the intent, and the
    // lookup finds the object again).
    report(ctx, object, &key, changes).await;
    if worth_writing(written.as_ref(), &status) {
        match intent.filter(|i| i.has_intent()) {
            // The result of a side effect started under an intent is never lost to a conflict.
            Some(intent) => cx.save_result(&status, &intent).await?,
            None => cx.save_status(&status).await?,
        }
    } else if cx.wrote_nothing() {
        ctx.drift.caught_up(&key);
    }
    Ok(action)
}

/// How long this reconcile may trust the recorded state instead of reading the remote object:
/// the spec was applied (or observed) at this generation, nothing is in flight, its inputs are
/// unchanged, no drift list asked to read it and its full read is not due. `None`: read it.
async fn trusted<K: Managed>(
    cx: &Cx<'_, K>,
    key: &str,
    before: Option<&K::Status>,
) -> Option<Duration> {
    let before = before?;
    let object = cx.object;
    let applied = K::LISTED && crate::controller::drift::settled(object, before);
    let drift = &cx.ctx.drift;
    // A copy older than this process's own last write (a failure, an intent) is stale.
    if !applied || drift.cache_behind(key, object.meta().resource_version.as_deref()) {
        return None;
    }
    // Inputs are read when their watch says they changed, and the first time this process
    // sees the object (a change made while it was away), not on every reconcile.
    let check_inputs = drift.first_sight(key) | drift.take_inputs_changed(key);
    if check_inputs && !K::inputs_unchanged(object, cx, before).await {
        return None;
    }
    drift.trust(K::KIND, key)
}

/// Records a failed reconcile in the conditions (one Warning event per new reason) and decides
/// when to look again. While an intent (a create or rotation in flight) is recorded, every
/// failure is transient: the work it stands for must finish, whatever went wrong.
async fn record_failure<K: Managed>(
    cx: &Cx<'_, K>,
    key: &str,
    error: &Error,
    before: Option<&K::Status>,
    status: &mut K::Status,
) -> Action {
    let ctx = cx.ctx;
    let generation = cx.object.meta().generation;
    let reason = error.category();
    let message = sanitize_message(&error.to_string());
    let previous_reason = before.and_then(|s| {
        find_condition(s.conditions(), READY)
            .filter(|c| c.status == "False")
            .map(|c| c.reason.clone())
    });
    if previous_reason.as_deref() != Some(reason) {
        publish(ctx, cx.object, EventType::Warning, reason, &message).await;
    }
    warn!(kind = K::KIND, object = %key, reason, error = %message, "reconcile failed");
    let delay = match error.look_again_in() {
        Some(delay) => delay,
        None => ctx.backoff.next_delay(key, error.retry_after()),
    };
    if error.is_transient() || status.has_intent() {
        let outcome = Outcome::Progressing {
            reason: reason.into(),
            message,
        };
        record_outcome(status.conditions_mut(), &outcome, generation);
        return Action::requeue(delay);
    }
    let outcome = Outcome::Stalled {
        reason: reason.into(),
        message,
    };
    record_outcome(status.conditions_mut(), &outcome, generation);
    if error.recheck_while_stalled() {
        Action::requeue(delay.min(jittered(ctx.drift_interval)))
    } else {
        // Only a spec change can help: the drift pass refreshes status read-only meanwhile.
        Action::requeue(jittered(ctx.drift_interval))
    }
}

async fn cleanup<K: Managed>(object: &K, objects: &Api<K>, ctx: &Context) -> Result<Action, Error> {
    let key = object_key(object);
    let cx = Cx::new(ctx, objects.clone(), object);
    // The same gate as every call: a resource that never managed its object, or that the rules
    // refuse, releases it whatever its deletionPolicy, and makes no call.
    if let Some(why) = cx.gate.release_reason().await? {
        let message = format!("left the remote object alone: {why}");
        info!(kind = K::KIND, object = %key, "{message}");
        publish(
            ctx,
            object,
            EventType::Normal,
            "Released",
            &sanitize_message(&message),
        )
        .await;
        ctx.backoff.reset(&key);
        ctx.drift.forget(&key);
        return Ok(Action::await_change());
    }
    if object.management_policy() == ManagementPolicy::Observe {
        return leave_observed(object, &cx).await;
    }
    match K::cleanup(object, &cx).await {
        Ok(changes) => {
            ctx.backoff.reset(&key);
            ctx.drift.forget(&key);
            report(ctx, object, &key, changes).await;
            Ok(Action::await_change())
        }
        Err(error) if error.records_nothing() => Err(error),
        Err(error) => {
            let message = sanitize_message(&error.to_string());
            publish(ctx, object, EventType::Warning, error.category(), &message).await;
            Err(error)
        }
    }
}

/// Logs each change, counts drift corrections, and publishes each as a Normal event.
async fn report<K: Managed>(ctx: &Context, object: &K, key: &str, changes: Vec<Change>) {
    for change in changes {
        info!(kind = K::KIND, object = %key, reason = change.reason, "{}", change.message);
        if change.is_drift() {
            ctx.metrics.drift_corrected(K::KIND);
        }
        publish(
            ctx,
            object,
            EventType::Normal,
            change.reason,
            &change.message,
        )
        .await;
    }
}

async fn publish<K: Managed>(
    ctx: &Context,
    object: &K,
    type_: EventType,
    reason: &str,
    message: &str,
) {
    if !ctx.events.allow(&type_) {
        ctx.metrics.event_suppressed(match type_ {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        });
        debug!(
            kind = K::KIND,
            reason, "event rate limit reached; not publishing this event"
        );
        return;
    }
    let event = KubeEvent {
        type_,
        reason: reason.to_string(),
        note: Some(message.to_string()),
        action: "Reconcile".into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &object.object_ref(&())).await {
        warn!(kind = K::KIND, error = %e, "failed to publish event");
    }
}

/// Default drift interval when none is configured.
pub const DEFAULT_DRIFT_INTERVAL: Duration = Duration::from_secs(600);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ApiError, HttpError};

    fn http(status: u16) -> ApiError {
        ApiError::Http(Box::new(HttpError {
            method: "GET",
            endpoint: "/ai_gw/v2/configs/{slug}",
            status,
            body: None,
            raw: String::new(),
            retry_after: None,
            opa_denied: false,
        }))
    }

    #[test]
    fn a_vanished_object_is_recreated_unless_it_was_adopted() {
        assert_eq!(
            observed("config a", None, Ok::<_, ApiError>(1)).unwrap(),
            Some(1)
        );
        assert_eq!(
            observed::<u8>("config a", None, Err(http(404))).unwrap(),
            None
        );
        let adopted = observed::<u8>("config a", Some("spec.slug"), Err(http(404))).unwrap_err();
        assert_eq!(adopted.category(), "MissingState");
        assert!(
            adopted
                .to_string()
                .contains("config a named by spec.slug does not exist")
        );
        assert!(
            observed::<u8>("config a", None, Err(http(503)))
                .unwrap_err()
                .is_transient()
        );
    }

    #[test]
    fn only_the_annotation_value_true_pauses() {
        use crate::resources::Config;
        let mut config: Config = serde_json::from_value(serde_json::json!({
            "apiVersion": "aigw.io/v1alpha1", "kind": "Config", "metadata": {"name": "c"},
            "spec": {"name": "c", "config": {}}
        }))
        .unwrap();
        assert!(!config.paused());
        for (value, paused) in [("false", false), ("yes", false), ("true", true)] {
            config
                .annotations_mut()
                .insert("aigw.io/paused".into(), value.into());
            assert_eq!(config.paused(), paused, "{value}");
        }
        assert_eq!(config.management_policy(), ManagementPolicy::Full);
    }

    #[test]
    fn already_gone_counts_as_removed() {
        let gone = removed("Deleted", "delete", "config a", Err(http(404))).unwrap();
        assert_eq!(gone[0].message, "config a was already gone");
        let done = removed("Archived", "archive", "deployment d", Ok(())).unwrap();
        assert_eq!(
            (done[0].reason, done[0].message.as_str()),
            ("Archived", "archived deployment d")
        );
        let failed = removed("Deleted", "delete", "config a", Err(http(500))).unwrap_err();
        assert!(failed.to_string().starts_with("failed to delete config a"));
    }
}
