//! The reconcile driver every kind shares: finalizer, observe → diff → create/update (in the
//! kind), conditions, events, status write, per-object backoff and the periodic drift check.

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::events::{Event as KubeEvent, EventType};
use tracing::{debug, info, warn};

pub mod calls;
pub mod create;
pub mod drift;
pub mod echoes;
mod finish;
pub mod flow;
pub mod gate;
pub mod issuing;
pub mod kind;
mod modes;
pub mod promotion;
pub mod reach;
pub mod referenced;
pub mod rotation;
pub mod secret_delivery;
pub mod status;
pub mod verbs;

use crate::controller::Context;
use crate::controller::driver::status::{
    CommonStatus, IntentStatus, Outcome, record_outcome, worth_writing,
};
use crate::controller::error::{Error, Halt, Wait};
use crate::controller::runtime::backoff::jittered;
use crate::resources::common::{
    FINALIZER, ManagementPolicy, Recorded,
    condition::{READY, STALLED},
    find_condition,
};
use finish::{Ending, finish};
pub use kind::{Change, Cx, Managed, object_key, observed, orphaned, removed};
pub use modes::OBSERVED;
use modes::{cleanup_as_orphan, hold_paused, leave_observed, observe_mode, resume_if_paused};

/// The reconcile function handed to `kube::runtime::Controller::run`. It works from the watch
/// cache: a stale copy cannot cause a remote write, because every intent and status write is a
/// compare-and-swap on the resourceVersion the reconcile started from.
pub async fn reconcile<K: Managed>(object: Arc<K>, ctx: Arc<Context>) -> Result<Action, Halt> {
    // A standby keeps its caches warm but acts on nothing; it reconciles everything on election.
    if !ctx.leadership.acts_on(object.meta()) {
        return Ok(Action::await_change());
    }
    let namespace = object.namespace().unwrap_or_default();
    let key = object_key(&*object);
    debug!(kind = K::KIND, object = %key, "reconcile");
    // A copy one of this process's own writes replaced (taken from the cache just before the
    // watch brought that write) is older than what this process knows: acting on it would
    // redo finished work. The watch delivers the newer one in a moment.
    if ctx
        .drift
        .replaced_by_own_write(&key, object.meta().resource_version.as_deref())
    {
        debug!(kind = K::KIND, object = %key, "the cached copy is older than this process's own last write; looking again shortly");
        return Ok(Action::requeue(Duration::from_millis(200)));
    }
    // A copy at this process's last write: the cache has caught up (its watch event may have
    // come before the write's answer was recorded), and the record of that write can go.
    ctx.drift
        .stored(&key, object.meta().resource_version.clone());
    let objects: Api<K> = K::api(&ctx.kube, Some(namespace.as_str()));
    // From here on the object is what its kind acts on: `spec.workspaceRef` resolved.
    let (object, _) = reach::reach(&ctx, object).await;
    let take = match standing::<K>(&object, &objects, &ctx, &key).await? {
        Standing::Ours => false,
        Standing::New => true,
        Standing::Done(action) => return Ok(action),
    };
    // Read once: the guard's state decides both whether the record comes first and whether
    // the reconcile's own writes carry the claim.
    let by_annotation = ctx.installation.claims_by_annotation();
    let object =
        match record_installation::<K>(&object, &objects, &ctx, take, by_annotation).await? {
            Some(recorded) => Arc::new(recorded),
            None => object,
        };
    let (object, unreached) = reach::reach(&ctx, object).await;
    let started = std::time::Instant::now();
    if ctx.dry_run {
        let result = dry_run::<K>(&object, &objects, &ctx, unreached).await;
        ctx.metrics
            .observe_reconcile(K::KIND, result.is_ok(), started.elapsed());
        return result;
    }
    let ours = ctx.installation.holds(&*object);
    let result = match (object.meta().deletion_timestamp.is_some(), ours) {
        (true, true) => {
            // A cleanup done is not done again, whatever copy comes next (one the cache still
            // holds, one changed meanwhile, a finalizer removal that failed): only its
            // finalizer is left to go.
            let cleaned = match ctx.drift.cleaned(&key, object.meta()) {
                true => Ok(Action::await_change()),
                false => cleanup::<K>(&object, &objects, &ctx).await,
            };
            match cleaned {
                Ok(action) => {
                    ctx.drift.cleanup_done(&key, object.meta());
                    release::<K>(&object, &objects, &ctx).await?;
                    ctx.drift
                        .released(&key, object.meta().resource_version.clone());
                    Ok(action)
                }
                Err(e) => Err(e),
            }
        }
        // Nothing of aigw's waits on it: it goes without aigw (it never wrote anything remote).
        (true, false) => Ok(Action::await_change()),
        (false, _) => apply::<K>(&object, &objects, &ctx, unreached, take && by_annotation).await,
    };
    // Sent to its Connection's line before its first call: nothing was done, and it starts
    // again at its place, neither a failure nor a step of its backoff.
    if let Err(Halt::Wait(throttled @ Wait::Throttled { look_again_in, .. })) = &result {
        debug!(kind = K::KIND, object = %key, "{throttled}");
        ctx.metrics.reconcile_throttled(K::KIND);
        return Ok(Action::requeue(*look_again_in));
    }
    ctx.metrics
        .observe_reconcile(K::KIND, result.is_ok(), started.elapsed());
    result
}

/// Where this installation stands with `object`.
enum Standing {
    /// Its own: go on.
    Ours,
    /// Claimed by nobody (no record, no annotation), and this installation may take it: it takes
    /// it by recording itself in status ([`record_installation`]) and goes on in the same
    /// reconcile. The annotation follows in the first metadata write (with the finalizer and
    /// the create intent, [`Cx::save_intent`]), so a create costs no write of its own for the claim;
    /// a reconcile that writes no metadata writes it at its end ([`Cx::write_owed_claim`]).
    New,
    /// Not to be gone on with: what to do instead.
    Done(Action),
}

/// Whether this installation may go on with `object` ([`crate::controller::state::installation`]).
/// Otherwise what to do instead, having written nothing or only the claim: another
/// installation's object is left untouched (a debug line, no finalizer, status, event or API
/// call); a recorded object whose annotation was removed gets it again, and its reconcile starts
/// when the watch shows it. A dry run writes no claim: it goes on with an unclaimed object as
/// the installation that takes it would.
async fn standing<K: Managed>(
    object: &K,
    objects: &Api<K>,
    ctx: &Context,
    key: &str,
) -> Result<Standing, Halt> {
    use crate::controller::state::installation::{self, Verdict};
    let verdict = ctx.verdict(object).await;
    let deleting = object.meta().deletion_timestamp.is_some();
    // The shared finalizer of an object from before claims (no record, no annotation) waits for
    // whichever installation takes it: one takes it, so its deletion is not held for good.
    let holds = ctx.installation.holds(object)
        || (verdict == Verdict::Unclaimed
            && object.recorded_installation().is_none()
            && object.finalizers().iter().any(|f| f == FINALIZER));
    Ok(Standing::Done(match verdict {
        Verdict::Ours => return Ok(Standing::Ours),
        Verdict::Unclaimed if ctx.dry_run => return Ok(Standing::Ours),
        // Going without aigw: nothing to claim it for.
        Verdict::Unclaimed if deleting && !holds => Action::await_change(),
        Verdict::Unclaimed => {
            // A resource this installation's grants refuse is not taken: the installation whose
            // grants admit it may. Its refusal is still reported (the status write carries the
            // resourceVersion, so it never lands over another installation's claim), and
            // nothing else is written.
            let cx = Cx::new(ctx, objects.clone(), object);
            if let Err(error @ Error::NotAllowed { .. }) = cx.gate.granted().await {
                debug!(kind = K::KIND, object = %key, %error, "refused by this installation's grants; not claimed");
                return Ok(Standing::Ours);
            }
            if object.recorded_installation().is_none() && !deleting {
                return Ok(Standing::New);
            }
            installation::take(objects, object, ctx.installation.id()).await?;
            debug!(kind = K::KIND, object = %key, installation = ctx.installation.id(), "claimed for this installation");
            // Its own claim wakes no reconcile (`process::worth_reconciling`): look again soon,
            // once the cache holds the write.
            Action::requeue(Duration::from_secs(1))
        }
        Verdict::GiveBack(why) => {
            if !ctx.dry_run {
                installation::give_back(objects, object).await?;
            }
            debug!(kind = K::KIND, object = %key, %why, "not this installation's any more; claim given back");
            Action::await_change()
        }
        Verdict::NotOurs(why) => {
            debug!(kind = K::KIND, object = %key, %why, "not this installation's; left untouched");
            // A claim that changes shows in the watch; a Connection that comes into reach
            // wakes its users (`process::run_connections`); the drift check is the backstop.
            Action::requeue(jittered(ctx.drift_interval))
        }
        Verdict::Undecided => {
            debug!(kind = K::KIND, object = %key, "the Connection cache has not listed yet, or not yet the Connection a new object names; deciding later");
            Action::requeue(Duration::from_secs(1))
        }
    }))
}

/// Records this installation in the status of an object that is its own, or that it takes
/// (`take`: claimed by nobody, [`Standing::New`]), before anything else is written for it
/// ([`crate::controller::state::installation::record`], guarded by the resourceVersion the
/// decision was made on, so of two installations racing for a new object exactly one records
/// itself), so that a claim rewritten later cannot move it to another installation. Returns the
/// object as written, to go on with (`None`: nothing to record, or a dry run, which writes
/// nothing). An object being deleted is cleaned up without it.
async fn record_installation<K: Managed>(
    object: &K,
    objects: &Api<K>,
    ctx: &Context,
    take: bool,
    by_annotation: bool,
) -> Result<Option<K>, Halt> {
    use crate::controller::state::installation::{self, Claim};
    let me = ctx.installation.id();
    // With the claim annotation guarded at admission, the reconcile's own writes carry the
    // claim ([`Cx::taking`]) and its first status write the record.
    if by_annotation
        || ctx.dry_run
        || object.meta().deletion_timestamp.is_some()
        || object.recorded_installation() == Some(me)
        || (!take && ctx.installation.claim_on(object) != Claim::Ours)
    {
        return Ok(None);
    }
    let Some(mut recorded) = installation::record(objects, object, me).await? else {
        return Ok(None);
    };
    recorded.prepare();
    let has_intent = recorded.status().is_some_and(|s| s.has_intent());
    ctx.drift.wrote(
        &object_key(object),
        object.meta().resource_version.as_deref(),
        recorded.resource_version(),
        has_intent,
        None,
    );
    debug!(kind = K::KIND, object = %object_key(object), installation = me, "recorded this installation in status");
    Ok(Some(recorded))
}

/// Removes this installation's finalizers once the cleanup is done (its own, and the shared
/// one of an object that is its own: [`crate::controller::state::installation::Installation::finalizers_held`]):
/// a JSON patch that tests each is still where the cached copy has it (another controller's
/// finalizer going meanwhile makes it fail, and the next reconcile tries again). An object
/// already gone is fine.
async fn release<K: Managed>(object: &K, objects: &Api<K>, ctx: &Context) -> Result<(), Halt> {
    let held = ctx.installation.finalizers_held(object);
    let mut positions: Vec<usize> = object
        .finalizers()
        .iter()
        .enumerate()
        .filter(|(_, f)| held.contains(&f.as_str()))
        .map(|(at, _)| at)
        .collect();
    if positions.is_empty() {
        return Ok(());
    }
    // From the last, so that each index still points where the test found it.
    positions.reverse();
    let operations: Vec<serde_json::Value> = positions
        .iter()
        .flat_map(|at| {
            let path = format!("/metadata/finalizers/{at}");
            let value = &object.finalizers()[*at];
            [
                serde_json::json!({"op": "test", "path": path, "value": value}),
                serde_json::json!({"op": "remove", "path": path}),
            ]
        })
        .collect();
    let patch: json_patch::Patch = serde_json::from_value(serde_json::Value::Array(operations))
        .map_err(|e| Error::MissingState(format!("finalizer patch: {e}")))?;
    match objects
        .patch::<K>(
            &object.name_any(),
            &kind::own_write::<K>(),
            &kube::api::Patch::Json(patch),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(Error::kube("remove finalizer", e).into()),
    }
}

/// `--dry-run`: the reconcile without the finalizer (adding or removing it is a write), every
/// write refused at the gate ([`crate::controller::driver::gate::Gate::client`]) and reported instead
/// ([`would`]); status writes are skipped in [`Cx::save_status`].
async fn dry_run<K: Managed>(
    object: &K,
    objects: &Api<K>,
    ctx: &Context,
    unreached: Option<Halt>,
) -> Result<Action, Halt> {
    let ours = ctx.installation.holds(object);
    match object.meta().deletion_timestamp {
        Some(_) if ours => cleanup::<K>(object, objects, ctx).await,
        // Nothing of aigw's waits on it: it goes without aigw.
        Some(_) => Ok(Action::await_change()),
        None => apply::<K>(object, objects, ctx, unreached, false).await,
    }
}

/// Reports a write `--dry-run` refused: a log line, a Normal event with `reason`
/// (`WouldCreate`, `WouldUpdate`, `WouldDelete`, `WouldRotate`) and the metric
/// `aigw_dry_run_actions_total`. Looked at again at the next drift check.
async fn would<K: Managed>(
    cx: &Cx<'_, K>,
    key: &str,
    reason: &'static str,
    message: &str,
) -> Action {
    let message = cx.scrub(message);
    info!(kind = K::KIND, object = %key, reason, "dry run: {message}");
    cx.ctx.metrics.would(K::KIND, reason);
    publish(cx.ctx, cx.object, EventType::Normal, reason, &message).await;
    Action::requeue(jittered(cx.ctx.drift_interval))
}

/// `error_policy` for the Controller: only errors the driver could not record in status land
/// here (a lost status race, a failed status or finalizer write, a failed cleanup). Back off
/// per object.
pub fn error_policy<K: Managed>(object: Arc<K>, error: &Halt, ctx: Arc<Context>) -> Action {
    let key = object_key(&*object);
    if K::stores(&ctx.stores).lost(&object) {
        // Gone while its reconcile ran: its watch Delete already pruned its backoff, and a
        // failure of a reconcile that lost its object must not bring it back.
        ctx.backoff.reset(&key);
        return Action::await_change();
    }
    let delay = ctx.backoff.next_delay(&key, error.retry_after());
    // A lost status race, or caches that have not listed yet (every object of a replica that
    // just started or took a share asks once): waits, not failures, and not one warning each.
    if matches!(
        error,
        Halt::Wait(Wait::Conflict(_) | Wait::CachesNotReady(_))
    ) {
        debug!(kind = K::KIND, object = %key, retry_in = ?delay, "{error}");
    } else {
        let error = ctx.scrub(&key, &error.to_string());
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

/// Brings `object` in line, unless `unreached` says why it cannot act yet (the Workspace its
/// `spec.workspaceRef` names is not Ready: [`reach`]), which is recorded like a refusal. However
/// it goes ([`run`]), it ends through [`finish`].
async fn apply<K: Managed>(
    object: &K,
    objects: &Api<K>,
    ctx: &Context,
    unreached: Option<Halt>,
    taking: bool,
) -> Result<Action, Halt> {
    let key = object_key(object);
    let before = object.status().cloned();
    // What an earlier failure read to conceal is its own: this reconcile reads again if it fails.
    ctx.secret_values.forget_echoes(&key);
    let cx = Cx::new(ctx, objects.clone(), object).taking(taking);
    let mut status = before.clone().unwrap_or_default();
    let ending = run(&cx, &key, before.as_ref(), &mut status, unreached).await;
    let finished = finish(&cx, &key, before.as_ref(), status, ending).await;
    if let Err(Halt::Wait(Wait::Throttled { .. })) = &finished
        && cx.took_a_read_request()
    {
        // What made it read in full (a read the drift pass asked for, a changed Secret) was
        // taken before it left for its Connection's line: it is asked again.
        ctx.drift.flag(key);
    }
    let action = finished?;
    cx.write_owed_claim().await?;
    Ok(action)
}

/// The way of one reconcile to the kind's apply: the pause, the gate's rules that need no API
/// call, a cache older than this process's own writes, a trusted steady state, Observe, a
/// spec stalled on this generation. Records nothing itself: `status` is what it computed.
async fn run<K: Managed>(
    cx: &Cx<'_, K>,
    key: &str,
    before: Option<&K::Status>,
    status: &mut K::Status,
    unreached: Option<Halt>,
) -> Ending {
    let (object, ctx) = (cx.object, cx.ctx);
    let generation = object.meta().generation;
    // A pause waits for work in flight (a create or rotation whose intent is recorded) to
    // finish: a rotation is never frozen between its PUT and its Secret write.
    if object.paused() && !before.is_some_and(|s| s.has_intent()) {
        if let Err(halt) = cx.settle_claim().await {
            return Ending::Mode(Err(halt));
        }
        return Ending::Mode(hold_paused(cx, before).await);
    }
    resume_if_paused(status, generation);
    let resumed = worth_writing(before, status);
    // The gate's rules that need no API call: which resource owns the remote object, and
    // what the Connection's grants allow this namespace; before them, the workspace reach.
    let admitted = match unreached {
        Some(halt) => Err(halt),
        None => cx.gate.admit().await,
    };
    if let Err(halt) = admitted {
        return Ending::Refused(halt);
    }
    // A cached copy that still shows an intent this process has settled is older than its own
    // last write: wait for the watch to deliver the newer one rather than redo finished work.
    let cached_intent = before.is_some_and(|s| s.has_intent());
    if ctx.drift.shows_settled_intent(
        key,
        object.meta().resource_version.as_deref(),
        cached_intent,
    ) {
        debug!(kind = K::KIND, object = %key, "the cache is older than this process's last status write; looking again shortly");
        return Ending::Later(Action::requeue(Duration::from_millis(200)));
    }
    // A cached copy that does not show yet the result of a remote write this process recorded
    // (a PUT's hash) is older than that write: wait for the watch rather than redo the write.
    let cached = before.and_then(|s| drift::Fingerprint::of(&s.without_timestamps()));
    if ctx.drift.behind_result(key, cached) {
        debug!(kind = K::KIND, object = %key, "the cache does not show this process's last result yet; looking again shortly");
        return Ending::Later(Action::requeue(Duration::from_millis(200)));
    }
    let trust = match resumed {
        // Leaving a pause is recorded by a full reconcile.
        true => false,
        false => trusted(cx, key, before).await,
    };
    if trust {
        // Trusted: the spec is applied, so a revision that moved only the annotation is this
        // resource's revision now.
        K::note_revision(object, status);
        // The drift pass sends it when a list shows it changed or its full read falls: no
        // timer of its own unless the kind wants it sooner.
        return Ending::Kept(
            K::due_in(object, status).map_or_else(Action::await_change, Action::requeue),
        );
    }
    if object.management_policy() == ManagementPolicy::Observe {
        if let Err(halt) = cx.settle_claim().await {
            return Ending::Mode(Err(halt));
        }
        let observed = std::mem::take(status);
        return Ending::Mode(observe_mode(cx, key, before, observed).await);
    }
    let stalled = before
        .filter(|s| !s.has_intent())
        .and_then(|s| stalled_on_this_generation(s.conditions(), generation));
    // A stall recorded before this process started is tried until this process records an
    // outcome: the release that recorded it (or the API then) may have been what refused the
    // spec. A try that only waits (a backlogged Connection) is no outcome.
    let stalled = match stalled {
        Some(reason) if !ctx.drift.tried_stall(key) => {
            debug!(kind = K::KIND, object = %key, %reason, "stalled before this process started; trying its spec once more");
            None
        }
        stalled => stalled,
    };
    if let Some(reason) = stalled {
        debug!(kind = K::KIND, object = %key, %reason, "stalled on this generation; refreshing what it observes, read-only");
        match K::observe_only(object, cx, status).await {
            // Its Connection is backlogged: it refreshes when its place comes.
            Err(throttled @ Halt::Wait(Wait::Throttled { .. })) => {
                return Ending::Refused(throttled);
            }
            Err(e) => {
                let error = cx.scrub_halt(&e).await;
                debug!(kind = K::KIND, object = %key, %error, "read-only refresh failed");
            }
            Ok(_) => {}
        }
        return Ending::Kept(Action::requeue(jittered(ctx.drift_interval)));
    }
    Ending::Applied(K::apply(object, cx, status).await)
}

/// Whether this reconcile may trust the recorded state instead of reading the remote object:
/// the spec was applied (or observed) at this generation, nothing is in flight, its inputs are
/// unchanged, and the drift pass did not ask to read it (a list, or its full read).
async fn trusted<K: Managed>(cx: &Cx<'_, K>, key: &str, before: Option<&K::Status>) -> bool {
    let Some(before) = before else {
        return false;
    };
    // A dry run reads every object once at least: what it would write (a new version rendering
    // a document differently) shows only against the remote object.
    if cx.ctx.dry_run && !cx.ctx.drift.read_once(key) {
        return false;
    }
    let object = cx.object;
    let applied = K::LISTED
        && object.listed_whole()
        && crate::controller::driver::drift::settled(object, before)
        && !K::due_now(object, before)
        && !K::asks_for_apply(object, before);
    let drift = &cx.ctx.drift;
    if !applied {
        // Read in full now: a read the drift pass asked for is done by this reconcile.
        if !drift.trust(key) {
            cx.took_read_request();
        }
        return false;
    }
    // A copy older than this process's own last write (a failure, an intent) is stale.
    if drift.cache_behind(key, object.meta().resource_version.as_deref()) {
        return false;
    }
    // Inputs are read when their watch says they changed, and the first time this process
    // sees the object (a change made while it was away), not on every reconcile.
    let changed = drift.take_inputs_changed(key);
    let check_inputs = drift.first_sight(key) | changed;
    if check_inputs && !K::inputs_unchanged(object, cx, before).await {
        if changed {
            cx.took_read_request();
        }
        return false;
    }
    drift.trust(key)
}

/// Records a failed reconcile in the conditions (one Warning event per new reason) and decides
/// when to look again. While an intent (a create or rotation in flight) is recorded, every
/// failure is transient: the work it stands for must finish, whatever went wrong.
async fn record_failure<K: Managed>(
    cx: &Cx<'_, K>,
    key: &str,
    error: &Halt,
    before: Option<&K::Status>,
    status: &mut K::Status,
) -> Action {
    let ctx = cx.ctx;
    let generation = cx.object.meta().generation;
    let reason = error.category();
    let message = cx.scrub_halt(error).await;
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
    // Recorded by this process: not tried again until its spec changes.
    ctx.drift.recorded_stall(key);
    if error.recheck_while_stalled() {
        Action::requeue(delay.min(jittered(ctx.drift_interval)))
    } else {
        // Only a spec change can help: the drift pass refreshes status read-only meanwhile.
        Action::requeue(jittered(ctx.drift_interval))
    }
}

async fn cleanup<K: Managed>(object: &K, objects: &Api<K>, ctx: &Context) -> Result<Action, Halt> {
    let key = object_key(object);
    ctx.secret_values.forget_echoes(&key);
    let cx = Cx::new(ctx, objects.clone(), object);
    // Neither Observe nor `deletionPolicy: Orphan` calls the API (only Kubernetes leftovers
    // are handled): they go even when the Connection is gone.
    if object.management_policy() == ManagementPolicy::Observe {
        return leave_observed(object, &cx).await;
    }
    let release = match object.orphans() {
        true => None,
        // The same gate as every call: a resource that never managed its object, or that the
        // rules refuse, releases it whatever its deletionPolicy, and makes no call.
        false => match cx.gate.release_reason().await {
            Ok(release) => release,
            Err(error) if error.records_nothing() => return Err(error),
            Err(error) => {
                let message = cx.scrub(&format!(
                    "cannot delete the remote object yet, the finalizer waits: {error}"
                ));
                publish(ctx, object, EventType::Warning, error.category(), &message).await;
                return Err(error);
            }
        },
    };
    if let Some(why) = release {
        if !object.orphans() && !object.manages() {
            // What a refused create left behind (a workspace's IAM scope), proven this
            // resource's by its mark; a gate refusal means it is not this resource's to touch.
            match object.remove_unused(&cx).await {
                Ok(changes) => report(ctx, object, &key, changes).await,
                Err(Halt::Fail(Error::AlreadyManaged(_) | Error::NotAllowed { .. })) => {}
                Err(error) => return cleanup_failed(object, &cx, &key, error).await,
            }
        }
        return release_remote(object, &cx, &key, &why).await;
    }
    match K::cleanup(object, &cx).await {
        Ok(changes) => {
            ctx.backoff.reset(&key);
            report(ctx, object, &key, changes).await;
            Ok(Action::await_change())
        }
        Err(error) => cleanup_failed(object, &cx, &key, error).await,
    }
}

/// A cleanup that failed: a dry run reports what it would do; otherwise the deletion waits,
/// saying why in the conditions and an event.
async fn cleanup_failed<K: Managed>(
    object: &K,
    cx: &Cx<'_, K>,
    key: &str,
    error: Halt,
) -> Result<Action, Halt> {
    let ctx = cx.ctx;
    match error {
        Halt::Wait(Wait::DryRun { reason, message }) => Ok(would(cx, key, reason, &message).await),
        error if error.records_nothing() => Err(error),
        error => {
            let message = cx.scrub_halt(&error).await;
            record_waiting_deletion(cx, &error, &message).await;
            publish(ctx, object, EventType::Warning, error.category(), &message).await;
            Err(error)
        }
    }
}

/// Records why a deletion waits (a referencing Config, an unknown create outcome, an API
/// error) in the object's conditions, as a reconcile records a failure: `Stalled` with the
/// reason for what only something else can change, `Reconciling` for what passes. Written only
/// when it changes what the status says; a failed write is left to the next attempt.
async fn record_waiting_deletion<K: Managed>(cx: &Cx<'_, K>, error: &Halt, message: &str) {
    let Some(before) = cx.object.status().cloned() else {
        return;
    };
    let mut status = before.clone();
    let outcome = if error.is_transient() {
        Outcome::Progressing {
            reason: error.category().into(),
            message: message.into(),
        }
    } else {
        Outcome::Stalled {
            reason: error.category().into(),
            message: message.into(),
        }
    };
    record_outcome(
        status.conditions_mut(),
        &outcome,
        cx.object.meta().generation,
    );
    if status.without_timestamps() != before.without_timestamps() {
        let _ = cx.save_status(&status).await;
    }
}

/// Lets the finalizer go without touching the remote object. A resource that never managed
/// one says so in a Normal event. One that did (its grants were narrowed since) leaves it in
/// place as `deletionPolicy: Orphan` would, keeping what only it holds (a gateway's
/// credentials Secret), and says so in a Warning that names the object.
async fn release_remote<K: Managed>(
    object: &K,
    cx: &Cx<'_, K>,
    key: &str,
    why: &str,
) -> Result<Action, Halt> {
    let ctx = cx.ctx;
    let recorded = object
        .status()
        .and_then(Recorded::recorded_remote)
        .map(str::to_string);
    let (type_, message) = match &recorded {
        None => (
            EventType::Normal,
            format!("left the remote object alone: {why}"),
        ),
        Some(remote) => {
            cleanup_as_orphan(object, cx).await?;
            (
                EventType::Warning,
                format!(
                    "left the remote {} {remote} in place, unmanaged (find it by this id): {why}",
                    K::KIND
                ),
            )
        }
    };
    info!(kind = K::KIND, object = %key, "{message}");
    publish(ctx, object, type_, "Released", &cx.scrub(&message)).await;
    ctx.backoff.reset(key);
    Ok(Action::await_change())
}

/// Logs each change, counts drift corrections, and publishes each as an event: Normal, or
/// Warning for a change the user must act on.
async fn report<K: Managed>(ctx: &Context, object: &K, key: &str, changes: Vec<Change>) {
    for change in changes {
        let type_ = match change.warning {
            true => {
                warn!(kind = K::KIND, object = %key, reason = change.reason, "{}", change.message);
                EventType::Warning
            }
            false => {
                info!(kind = K::KIND, object = %key, reason = change.reason, "{}", change.message);
                EventType::Normal
            }
        };
        if change.is_drift() {
            ctx.metrics.drift_corrected(K::KIND);
        }
        publish(ctx, object, type_, change.reason, &change.message).await;
    }
}

pub(crate) async fn publish<K: Managed>(
    ctx: &Context,
    object: &K,
    type_: EventType,
    reason: &str,
    message: &str,
) {
    publish_on(
        ctx,
        K::KIND,
        &object.object_ref(&()),
        type_,
        reason,
        message,
    )
    .await;
}

/// [`publish`] on the object `reference` names, of `kind`.
pub(crate) async fn publish_on(
    ctx: &Context,
    kind: &str,
    reference: &k8s_openapi::api::core::v1::ObjectReference,
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
            kind,
            reason, "event rate limit reached; not publishing this event"
        );
        return;
    }
    // A dry run only says what it would do: a Normal event about something done (`Rotated`,
    // `Orphaned`, `Released`) would read as the real operator's.
    let reason = match (ctx.dry_run, &type_) {
        (true, EventType::Normal) if !reason.starts_with("Would") => format!("Would{reason}"),
        _ => reason.to_string(),
    };
    // A Warning keeps its reason (what failed is the same for both), its note says whose it is.
    let message = match (ctx.dry_run, &type_) {
        (true, EventType::Warning) => format!("(dry run) {message}"),
        _ => message.to_string(),
    };
    // An event's note is capped by the apiserver (1 KiB); a longer one would be refused.
    let note: String = message.chars().take(EVENT_NOTE_CHARS).collect();
    let event = KubeEvent {
        type_,
        reason,
        note: Some(note),
        action: "Reconcile".into(),
        secondary: None,
    };
    match ctx.recorder.publish(&event, reference).await {
        Ok(()) => {}
        // An object whose namespace is being deleted takes no new events: nothing is lost that
        // the namespace would keep, and it is no refusal of the operator's rights.
        Err(e) if namespace_terminating(&e) => {
            debug!(
                kind,
                "not publishing an event: its namespace is being deleted"
            )
        }
        Err(e) => warn!(kind, error = %e, "failed to publish event"),
    }
}

/// Whether `error` is the apiserver refusing new content in a namespace being deleted (its
/// namespace lifecycle admission: a 403 that no RBAC rule causes).
fn namespace_terminating(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(s) if s.code == 403 && s.message.contains("because it is being terminated"))
}

/// The longest event note published, in characters (the apiserver refuses more than 1 KiB).
const EVENT_NOTE_CHARS: usize = 900;

/// Default drift interval when none is configured.
pub const DEFAULT_DRIFT_INTERVAL: Duration = Duration::from_secs(600);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ApiError, HttpError};

    #[test]
    fn only_the_namespace_lifecycle_refusal_reads_as_a_namespace_being_deleted() {
        let refused = |code: u16, message: &str| {
            let status = kube::core::Status::failure(message, "Forbidden").with_code(code);
            kube::Error::Api(Box::new(status))
        };
        let terminating = "events.events.k8s.io \"x.1\" is forbidden: unable to create new content in namespace team-a because it is being terminated";
        assert!(namespace_terminating(&refused(403, terminating)));
        let rbac = "events.events.k8s.io is forbidden: User \"system:serviceaccount:aigw:aigw\" cannot create resource \"events\" in API group \"events.k8s.io\" in the namespace \"team-a\"";
        assert!(!namespace_terminating(&refused(403, rbac)));
        assert!(!namespace_terminating(&refused(409, terminating)));
    }

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
        use crate::resources::common::Governed;
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
