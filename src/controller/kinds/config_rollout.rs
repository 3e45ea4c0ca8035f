//! The ConfigRollout loop. A rollout makes no management-API write of its own: it moves an
//! ApiKey by writing the `aigw.io/rollout-config` annotation on the ApiKey resource, whose own
//! reconcile (the gate, the grants, one PUT only where the remote key differs) applies it. It
//! reads the gateway's telemetry for both cohorts through the namespace's Connection.
//!
//! Every decision is written into the rollout's status, with its resourceVersion as a
//! precondition, before any key is touched for it: the keys a step moves, a step's start, a
//! rollback. A reconcile that resumes (after a crash, or on another replica) reads the status
//! and redoes only what it shows undone: the annotations are idempotent (a key already carrying
//! its value is not written), so no key moves twice and none is left behind.

use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use tracing::{debug, warn};

use crate::api::{CohortFigures, TelemetryQuery};
use crate::controller::Context;
use crate::controller::driver::gate::{list_client, tenant_id};
use crate::controller::driver::status::{Outcome, record_outcome, worth_writing};
use crate::controller::error::{Error, Halt, Wait};
use crate::controller::runtime::apiserver::written_by;
use crate::resources::api_key::ApiKey;
use crate::resources::common::condition::READY;
use crate::resources::common::find_condition;
use crate::resources::config_rollout::{
    self as rollout, AnalysisRecord, CohortRecord, ConfigRollout, ConfigRolloutStatus, Decision,
    DecisionRecord, MAX_DECISIONS, Phase, RolloutStep,
};
use crate::resources::rollout_plan::{self, Verdict};
use crate::resources::{Config, common::FINALIZER};

mod keys;
use keys::{Keys, cohort_ids, names, stalled_key};

const KIND: &str = "ConfigRollout";
const MANAGER: &str = "aigw/configrollout";

/// How often a rollout looks again while keys move or traffic is awaited.
const POLL: Duration = Duration::from_secs(2);

crate::controller::driver::status::common_status!(ConfigRolloutStatus);

/// One reconcile's view: the rollout, the APIs of its namespace, the status it last wrote.
struct Run<'a> {
    ctx: &'a Context,
    rollout: &'a ConfigRollout,
    name: String,
    namespace: String,
    rollouts: Api<ConfigRollout>,
    keys: Api<ApiKey>,
    /// The resourceVersion the next status write expects.
    version: Option<String>,
}

pub async fn reconcile(object: Arc<ConfigRollout>, ctx: Arc<Context>) -> Result<Action, Halt> {
    if !ctx.leadership.acts_on(object.meta()) {
        return Ok(Action::await_change());
    }
    let namespace = object.namespace().unwrap_or_default();
    let rollouts: Api<ConfigRollout> = Api::namespaced(ctx.kube.clone(), &namespace);
    let object = match claimed(object, &rollouts, &ctx).await? {
        Ok(object) => object,
        Err(action) => return Ok(action),
    };
    let mut run = Run {
        ctx: &ctx,
        rollout: &object,
        name: object.name_any(),
        rollouts,
        keys: Api::namespaced(ctx.kube.clone(), &namespace),
        namespace,
        version: object.resource_version(),
    };
    if ctx.dry_run {
        debug!(kind = KIND, name = %run.name, "--dry-run: a rollout moves no key");
        return Ok(Action::await_change());
    }
    if object.meta().deletion_timestamp.is_some() {
        return run.release().await;
    }
    let before = object.status.clone().unwrap_or_default();
    let mut status = run.restarted(&before);
    let generation = object.meta().generation;
    let advanced = match claim_changed(&ctx, &object) {
        Some(refused) => Ok((refused, None)),
        None => run.advance(&mut status).await,
    };
    let (outcome, next) = match advanced {
        Ok(done) => done,
        Err(Halt::Fail(Error::InvalidSpec(message))) => (
            Outcome::Stalled {
                reason: "InvalidSpec".into(),
                message,
            },
            None,
        ),
        Err(error) => return Err(error),
    };
    status.observed_generation = generation;
    record_outcome(&mut status.conditions, &outcome, generation);
    let written = object.status.clone();
    if worth_writing(written.as_ref(), &status) {
        run.save(&status).await?;
    }
    ctx.metrics
        .rollout_step(&run.namespace, &run.name, status.current_step, status.phase);
    // Looked at again at least every drift interval, beside the triggers (a Connection that
    // changes reach wakes its users: `process::run_connections`).
    Ok(Action::requeue(next.unwrap_or(ctx.drift_interval)))
}

pub fn error_policy(object: Arc<ConfigRollout>, error: &Halt, ctx: Arc<Context>) -> Action {
    let key = format!(
        "{KIND}/{}/{}",
        object.namespace().unwrap_or_default(),
        object.name_any()
    );
    let delay = ctx.backoff.next_delay(&key, error.retry_after());
    match error {
        Halt::Wait(Wait::Conflict(_)) => debug!(kind = KIND, object = %key, "{error}"),
        _ => {
            warn!(kind = KIND, object = %key, error = %ctx.scrub(&key, &error.to_string()), "reconcile failed")
        }
    }
    Action::requeue(delay)
}

/// Whose the rollout is, as the other kinds decide it
/// ([`crate::controller::state::installation`]): the installation its status records
/// (`status.installation`), else the one its `aigw.io/installation` annotation names. An
/// unclaimed rollout whose Connection this installation sees is taken (the annotation, then the
/// record in status, each guarded by the resourceVersion) before it moves any key. `Ok(object)`
/// to go on with (as written), `Err(action)` to leave it.
async fn claimed(
    object: Arc<ConfigRollout>,
    rollouts: &Api<ConfigRollout>,
    ctx: &Context,
) -> Result<Result<Arc<ConfigRollout>, Action>, Halt> {
    use crate::controller::state::installation::{self, Claim};
    let me = ctx.installation.id();
    let leave = Ok(Err(Action::await_change()));
    let deleting = object.meta().deletion_timestamp.is_some();
    let annotated = ctx.installation.claim_in(&object.metadata);
    let connection = connection_name(&object);
    match recorded_installation(&object) {
        Some(id) if id != me => return leave,
        Some(_) => {
            // Recorded here, but its Connection has left this installation's reach
            // (relabelled out of `--cluster-selector`, or claimed by another installation): as
            // for every kind (`installation::verdict`), a rollout holding none of this
            // installation's finalizers is given back (record and annotation removed) for the
            // installation that sees the Connection to take; one that holds one (it may have
            // moved keys, which use the same Connection and are left alone too) is left
            // untouched, deletion included, until the Connection is back in reach.
            match ctx.stores.connections.find(connection).await {
                None => return Ok(Err(Action::requeue(POLL))),
                Some(Some(found)) if !ctx.installation.sees_connection(&found.metadata) => {
                    let holds = object
                        .finalizers()
                        .iter()
                        .any(|f| f == ctx.installation.finalizer() || f == FINALIZER);
                    if holds {
                        debug!(kind = KIND, name = %object.name_any(), %connection, "its Connection is out of this installation's reach; left untouched");
                        return Ok(Err(Action::requeue(ctx.drift_interval)));
                    }
                    if !ctx.dry_run {
                        may_write(ctx, &object)?;
                        installation::give_back_recorded(rollouts, &object, true).await?;
                    }
                    debug!(kind = KIND, name = %object.name_any(), %connection, "its Connection is out of this installation's reach; claim given back");
                    return leave;
                }
                _ => {}
            }
            // Its own whatever the annotation says (a rewritten one stalls it, see
            // `claim_changed`; a removed one is written again). Its deletion is cleaned up here.
            if annotated == Claim::None && !deleting && !ctx.dry_run {
                may_write(ctx, &object)?;
                installation::take(rollouts, &object, me).await?;
                return leave;
            }
            return Ok(Ok(object));
        }
        None => {}
    }
    if let Claim::Theirs(_) = annotated {
        return leave;
    }
    match ctx.stores.connections.find(connection).await {
        // The Connection cache has not listed yet: decide later.
        None => return Ok(Err(Action::requeue(POLL))),
        Some(Some(found)) if !ctx.installation.sees_connection(&found.metadata) => return leave,
        Some(_) => {}
    }
    if deleting || ctx.dry_run {
        return Ok(Ok(object));
    }
    may_write(ctx, &object)?;
    if annotated == Claim::None {
        // The write wakes the next reconcile, which records the claim.
        installation::take(rollouts, &object, me).await?;
        return leave;
    }
    match installation::record(rollouts, &object, me).await? {
        Some(written) => Ok(Ok(Arc::new(written))),
        None => leave,
    }
}

fn recorded_installation(rollout: &ConfigRollout) -> Option<&str> {
    rollout.status.as_ref()?.installation.as_deref()
}

/// A rollout this installation records whose annotation names another installation (someone
/// rewrote the claim): it moves no key until the annotation names this installation again.
/// Its deletion is still cleaned up here.
fn claim_changed(ctx: &Context, rollout: &ConfigRollout) -> Option<Outcome> {
    use crate::controller::state::installation::{ANNOTATION, CLAIM_CHANGED, Claim};
    let me = ctx.installation.id();
    if recorded_installation(rollout) != Some(me) {
        return None;
    }
    let Claim::Theirs(named) = ctx.installation.claim_in(&rollout.metadata) else {
        return None;
    };
    Some(Outcome::Stalled {
        reason: CLAIM_CHANGED.into(),
        message: format!(
            "the annotation {ANNOTATION} names installation {named:?}, but this {KIND}'s status records installation {me:?}, which runs it: {me:?} moves no key for it until the annotation names {me:?} again (restoring it resumes), and {named:?} does not take it; deleting the {KIND} still returns its keys"
        ),
    })
}

impl Run<'_> {
    /// The finalizers on the rollout that wait for this installation: its own, and the one all
    /// installations shared before (`aigw.io/finalizer`) on a rollout that is its own.
    fn finalizers_held(&self) -> Vec<String> {
        let me = self.ctx.installation.id();
        let ours = recorded_installation(self.rollout) == Some(me)
            || (recorded_installation(self.rollout).is_none()
                && self.ctx.installation.claim_in(&self.rollout.metadata)
                    == crate::controller::state::installation::Claim::Ours);
        self.rollout
            .finalizers()
            .iter()
            .filter(|f| *f == self.ctx.installation.finalizer() || (*f == FINALIZER && ours))
            .cloned()
            .collect()
    }

    /// A rollout rolled back or aborted whose spec changed since starts over (its keys are
    /// back); every other status is taken as it is.
    fn restarted(&self, before: &ConfigRolloutStatus) -> ConfigRolloutStatus {
        let changed = before.observed_generation != self.rollout.meta().generation;
        let aborted = matches!(self.rollout.action(), Ok(Some(rollout::Action::Abort)));
        match before.phase {
            Phase::RolledBack | Phase::Aborted if changed && !aborted => ConfigRolloutStatus {
                decisions: before.decisions.clone(),
                installation: before.installation.clone(),
                ..Default::default()
            },
            _ => before.clone(),
        }
    }

    /// One pass of the loop: what the status says to do next, done.
    async fn advance(
        &mut self,
        status: &mut ConfigRolloutStatus,
    ) -> Result<(Outcome, Option<Duration>), Halt> {
        let spec = &self.rollout.spec;
        let action = self.rollout.action().map_err(Error::InvalidSpec)?;
        // An abort of a rollout under way needs no valid spec (one stored before a bound it now
        // fails): its keys go back all the same.
        let aborting = status.phase == Phase::Progressing && action == Some(rollout::Action::Abort);
        if let Err(why) = spec.check(&self.namespace)
            && !aborting
        {
            return Err(Error::InvalidSpec(why).into());
        }
        if !status.phase.is_final() {
            self.ensure_finalizer().await?;
        }
        let keys = self.keys().await?;
        let configs = Api::<Config>::namespaced(self.ctx.kube.clone(), &self.namespace);
        let candidate = spec.candidate_config_ref.name.clone();
        // A candidate being deleted is gone as far as the rollout goes.
        let candidate_config = configs
            .get_opt(&candidate)
            .await
            .map_err(|e| Error::kube(format!("read Config {candidate}"), e))?
            .filter(|c| c.metadata.deletion_timestamp.is_none());
        // So is a stable one: the keys it moved go back to it (its deletion waits until no key
        // names it, see `crate::controller::kinds::config::holders`), and none moves again.
        let stable = spec.stable_config_ref.name.clone();
        let stable_found = configs
            .get_opt(&stable)
            .await
            .map_err(|e| Error::kube(format!("read Config {stable}"), e))?;
        let stable_deleting = stable_found
            .as_ref()
            .is_some_and(|c| c.metadata.deletion_timestamp.is_some());
        let stable_config = stable_found.filter(|_| !stable_deleting);
        // A promote skips the analysis, not the checks: a refused key, or a Config not Ready,
        // leaves the rollout where it is (and reports why), promoted by nothing.
        let promote = status.phase == Phase::Progressing
            && action == Some(rollout::Action::Promote)
            && self.promotable(
                status,
                &keys,
                stable_config.as_ref(),
                candidate_config.as_ref(),
            );
        if status.phase == Phase::Progressing {
            match action {
                Some(rollout::Action::Abort) => {
                    let message = "aborted (annotation aigw.io/rollout-action: abort)".to_string();
                    self.conclude(status, Phase::Aborted, Decision::Abort, message)
                        .await?;
                }
                Some(rollout::Action::Promote) if promote => {
                    status.moved_keys = names(&keys.eligible);
                    let message =
                        "promoted (annotation aigw.io/rollout-action: promote): every selected key goes to the candidate".to_string();
                    self.conclude(status, Phase::Completed, Decision::Promote, message)
                        .await?;
                }
                _ if candidate_config.is_none() && !status.moved_keys.is_empty() => {
                    let message = format!("the candidate Config {candidate} is gone");
                    self.conclude(status, Phase::RolledBack, Decision::RollBack, message)
                        .await?;
                }
                _ if stable_config.is_none() && !status.moved_keys.is_empty() => {
                    let message = match stable_deleting {
                        true => format!(
                            "the stable Config {stable} is being deleted: the rollout cannot go on; every moved key returns to its own defaults, and the Config's deletion waits until no ApiKey names it"
                        ),
                        false => format!("the stable Config {stable} is gone"),
                    };
                    self.conclude(status, Phase::RolledBack, Decision::RollBack, message)
                        .await?;
                }
                _ => {}
            }
        }
        match status.phase {
            Phase::Progressing => {
                self.progress(status, &keys, stable_config, candidate_config)
                    .await
            }
            Phase::Completed => self.hold_on_candidate(status, &keys).await,
            Phase::RolledBack | Phase::Aborted => self.hold_on_stable(status, &keys).await,
        }
    }

    /// Whether a `promote` may go through: both Configs Ready with a remote config (their ids
    /// are recorded in `status` if the rollout had not started) and no selected key refused
    /// ([`Self::refusal`]).
    fn promotable(
        &self,
        status: &mut ConfigRolloutStatus,
        keys: &Keys,
        stable: Option<&Config>,
        candidate: Option<&Config>,
    ) -> bool {
        let (Some(stable_slug), Some(candidate_slug)) =
            (remote_slug(stable), remote_slug(candidate))
        else {
            return false;
        };
        if self.refusal(keys).is_some() || keys.eligible.is_empty() {
            return false;
        }
        status.stable_config_id.get_or_insert(stable_slug);
        status.candidate_config_id.get_or_insert(candidate_slug);
        true
    }

    /// The step in progress: move its keys, wait for them, pause, judge.
    async fn progress(
        &mut self,
        status: &mut ConfigRolloutStatus,
        keys: &Keys,
        stable_config: Option<Config>,
        candidate: Option<Config>,
    ) -> Result<(Outcome, Option<Duration>), Halt> {
        let spec = &self.rollout.spec;
        let stable = spec.stable_config_ref.name.clone();
        let candidate_version = candidate
            .as_ref()
            .and_then(|c| c.status.as_ref())
            .and_then(|s| s.version_id.clone());
        let (Some(stable_slug), Some(candidate_slug)) = (
            remote_slug(stable_config.as_ref()),
            remote_slug(candidate.as_ref()),
        ) else {
            return Ok(progressing(
                "ConfigNotReady",
                format!(
                    "waiting for Configs {stable} and {} to be Ready with a remote config (and not being deleted)",
                    spec.candidate_config_ref.name
                ),
            ));
        };
        // What keeps a rollout from starting stops one under way too: it rolls back rather
        // than leave keys on the candidate that it can no longer judge or move.
        if let Some(refused) = self.refusal(keys) {
            if status.current_step.is_none() {
                return Err(Error::InvalidSpec(refused).into());
            }
            let message = format!("{refused}: the rollout cannot go on");
            self.conclude(status, Phase::RolledBack, Decision::RollBack, message)
                .await?;
            return self.hold_on_stable(status, keys).await;
        }
        if status.current_step.is_none() {
            if keys.eligible.is_empty() {
                return Ok(progressing(
                    "NoApiKeys",
                    "spec.apiKeySelector selects no ApiKey of this namespace yet".into(),
                ));
            }
            let unready = self.not_placed(keys, &names(&keys.eligible), None);
            let not_ready = |keys: String| {
                format!("waiting for ApiKeys {keys} to be Ready on their own defaults")
            };
            if let Some(waiting) = waiting_for(keys, &unready, "KeysNotReady", not_ready) {
                return Ok(waiting);
            }
            status.stable_config_id = Some(stable_slug);
            status.candidate_config_id = Some(candidate_slug.clone());
        }
        if let Some(at) = replanned(&spec.steps, status) {
            // `spec.steps` changed under way and no longer has the step the keys are at (or it
            // is smaller than their share): go on from the first step that covers the keys
            // already moved, paused and judged anew. Never further: no key moves unjudged.
            status.current_step = Some(at as u32);
            status.weight = Some(spec.steps[at].weight);
            status.restart_step();
            self.save(status).await?;
        }
        let step = status.current_step.unwrap_or(0) as usize;
        let weight = spec.steps[step].weight;
        let eligible = names(&keys.eligible);
        // A key it moved (or that names it) and is no longer selected goes back first: it is
        // neither left on the candidate nor counted in a cohort. It stays in movedKeys until
        // its own defaults show applied, so a crash meanwhile still returns it.
        let strays: Vec<String> = returning(keys, status)
            .into_iter()
            .filter(|name| !eligible.contains(name))
            .collect();
        if !strays.is_empty() {
            self.place(keys, &strays, None).await?;
            let waiting = self.not_placed(keys, &strays, None);
            let going_back = |keys: String| {
                format!(
                    "step {step} ({weight}%): ApiKeys {keys} left spec.apiKeySelector: returning them to their own defaults"
                )
            };
            if let Some(waiting) = waiting_for(keys, &waiting, "ReturningKeys", going_back) {
                return Ok(waiting);
            }
        }
        let size = rollout_plan::cohort_size(weight, eligible.len());
        let cohort = rollout_plan::cohort(&eligible, &status.moved_keys, size);
        if status.current_step.is_none() || cohort != status.moved_keys {
            // Recorded first: a crash after this write moves these keys on resume, and no other.
            status.current_step = Some(step as u32);
            status.weight = Some(weight);
            status.moved_keys = cohort;
            status.restart_step();
            self.save(status).await?;
        }
        let candidate_name = &spec.candidate_config_ref.name;
        self.place(keys, &status.moved_keys, Some(candidate_name))
            .await?;
        let Some(started) = status.step_started_at.clone() else {
            let waiting = self.not_placed(keys, &status.moved_keys, Some(candidate_name));
            if let Some(stalled) = stalled_key(keys, &waiting) {
                let message = format!("{stalled}: it cannot apply Config {candidate_name}");
                self.conclude(status, Phase::RolledBack, Decision::RollBack, message)
                    .await?;
                return self.hold_on_stable(status, keys).await;
            }
            let moving = |keys: String| {
                format!(
                    "step {step} ({weight}%): waiting for ApiKeys {keys} to apply Config {candidate_name}"
                )
            };
            if let Some(waiting) = waiting_for(keys, &waiting, "MovingKeys", moving) {
                return Ok(waiting);
            }
            status.step_started_at = Some(Timestamp::now().to_string());
            status.candidate_version_id = candidate_version;
            self.save(status).await?;
            let pause = spec.pause(step).map_err(Error::InvalidSpec)?;
            return Ok((pausing(step, weight, pause), Some(pause)));
        };
        // The candidate edited since the step's pause began (a new `versionId`): what ran so
        // far was another document, so the step starts over on this one.
        if status.candidate_version_id.is_some() && status.candidate_version_id != candidate_version
        {
            let message = format!(
                "step {step} ({weight}%): the candidate Config {candidate_name} changed (version {} to {}): the step's pause and analysis start again",
                status.candidate_version_id.as_deref().unwrap_or("-"),
                candidate_version.as_deref().unwrap_or("-"),
            );
            status.restart_step();
            self.save(status).await?;
            return Ok(progressing("CandidateChanged", message));
        }
        let started: Timestamp = started.parse().map_err(|_| {
            Error::MissingState(format!("status.stepStartedAt {started:?} is not a time"))
        })?;
        let pause = spec.pause(step).map_err(Error::InvalidSpec)?;
        let elapsed = elapsed_since(started, Timestamp::now());
        if elapsed < pause {
            let left = pause - elapsed;
            return Ok((pausing(step, weight, left), Some(left)));
        }
        self.analyse(status, keys, step, started, elapsed - pause)
            .await
    }

    /// The analysis of step `step`, `late` past its pause.
    async fn analyse(
        &mut self,
        status: &mut ConfigRolloutStatus,
        keys: &Keys,
        step: usize,
        started: Timestamp,
        late: Duration,
    ) -> Result<(Outcome, Option<Duration>), Halt> {
        let spec = &self.rollout.spec;
        let window = spec.window(step).map_err(Error::InvalidSpec)?;
        let to = Timestamp::now();
        let span = SignedDuration::try_from(window).unwrap_or(SignedDuration::ZERO);
        // Checked: a window reaching before the earliest time there is starts at the step.
        let from = to.checked_sub(span).unwrap_or(started).max(started).min(to);
        let (candidate_ids, stable_ids) = cohort_ids(keys, &spec.candidate_config_ref.name);
        let read = match self.figures(&candidate_ids, from, to).await {
            Ok(candidate) => self
                .figures(&stable_ids, from, to)
                .await
                .map(|stable| (candidate, stable)),
            Err(error) => Err(error),
        };
        let (candidate, stable) = match read {
            Ok(both) => {
                status.telemetry_failing_since = None;
                both
            }
            // The telemetry failing decides like too little traffic: it is waited for up to
            // `maxWait` past the pause (and reported meanwhile), then the step rolls back. So
            // does anything else that keeps it from being read (its Connection gone or out of
            // the grants, no TSG id to ask for it): the moved keys never stay unjudged for good.
            // The wait counts from the first failure of this step too, so that one failed read
            // after the operator was away past `maxWait` is read again, not taken for an outage.
            Err(Halt::Fail(error)) => {
                let max_wait = spec.max_wait().map_err(Error::InvalidSpec)?;
                let key = format!("{KIND}/{}/{}", self.namespace, self.name);
                let said = self.ctx.scrub(&key, &error.to_string());
                let since = status
                    .telemetry_failing_since
                    .as_deref()
                    .and_then(|s| s.parse::<Timestamp>().ok())
                    .unwrap_or(to);
                status.telemetry_failing_since = Some(since.to_string());
                let failing = elapsed_since(since, to);
                if max_wait.is_some_and(|max| late > max && failing > max) {
                    let message = format!(
                        "step {step}: the telemetry could not be read within analysis.maxWait: {said}"
                    );
                    self.conclude(status, Phase::RolledBack, Decision::RollBack, message)
                        .await?;
                    return self.hold_on_stable(status, keys).await;
                }
                let retry = error.retry_after().unwrap_or(POLL).max(POLL);
                return Ok((
                    Outcome::Progressing {
                        reason: "TelemetryUnavailable".into(),
                        message: format!(
                            "step {step}: {said}; read again in {}{}",
                            humantime::format_duration(retry),
                            match max_wait {
                                Some(max) => format!(
                                    ", rolled back once analysis.maxWait ({}) is past both the pause and the first failure",
                                    humantime::format_duration(max)
                                ),
                                None => " (no analysis.maxWait: waits as long as it takes)".into(),
                            }
                        ),
                    },
                    Some(retry),
                ));
            }
            Err(error) => return Err(error),
        };
        let verdict = rollout_plan::judge(&spec.analysis, spec.min_requests(), &stable, &candidate);
        let analysis = AnalysisRecord {
            step: step as u32,
            from: from.to_string(),
            to: to.to_string(),
            stable,
            candidate,
        };
        // Waiting for traffic, a window that only slid is no news: the record (and the
        // status write it would cost at every poll) changes once the figures do.
        // A record from before this step (re)started is no news either way: replaced.
        let same_figures = status.analysis.as_ref().is_some_and(|a| {
            (a.step, &a.stable, &a.candidate)
                == (analysis.step, &analysis.stable, &analysis.candidate)
                && a.from
                    .parse::<Timestamp>()
                    .is_ok_and(|from| from >= started)
        });
        if !(matches!(verdict, Verdict::Wait(_)) && same_figures) {
            status.analysis = Some(analysis);
        }
        let last = step + 1 == spec.steps.len();
        match verdict {
            Verdict::Wait(message) => {
                let max_wait = spec.max_wait().map_err(Error::InvalidSpec)?;
                if max_wait.is_some_and(|max| late > max) {
                    let message = format!("not enough traffic within analysis.maxWait: {message}");
                    self.conclude(status, Phase::RolledBack, Decision::RollBack, message)
                        .await?;
                    return self.hold_on_stable(status, keys).await;
                }
                Ok(progressing(
                    "WaitingForTraffic",
                    format!("step {step}: {message}"),
                ))
            }
            Verdict::Fail(message) => {
                let message = format!("step {step} failed its analysis: {message}");
                self.conclude(status, Phase::RolledBack, Decision::RollBack, message)
                    .await?;
                self.hold_on_stable(status, keys).await
            }
            Verdict::Pass(figures) if last => {
                let message = format!("step {step} passed, the last: {figures}");
                self.conclude(status, Phase::Completed, Decision::Complete, message)
                    .await?;
                self.hold_on_candidate(status, keys).await
            }
            Verdict::Pass(figures) => {
                let next = step + 1;
                record(
                    status,
                    step,
                    Decision::Proceed,
                    format!("step {step} passed: {figures}"),
                );
                self.ctx.metrics.rollout_decision(Decision::Proceed);
                status.current_step = Some(next as u32);
                status.weight = Some(spec.steps[next].weight);
                status.restart_step();
                self.save(status).await?;
                Ok((
                    Outcome::Progressing {
                        reason: "StepPassed".into(),
                        message: format!("step {step} passed; step {next} starts"),
                    },
                    Some(Duration::ZERO),
                ))
            }
        }
    }

    /// Records a final decision (written before any key is touched for it) and reports it.
    async fn conclude(
        &mut self,
        status: &mut ConfigRolloutStatus,
        phase: Phase,
        decision: Decision,
        message: String,
    ) -> Result<(), Halt> {
        let step = status.current_step.unwrap_or(0) as usize;
        status.phase = phase;
        // Kept by a rollback (it may be why); the step is over either way.
        if decision != Decision::RollBack {
            status.telemetry_failing_since = None;
        }
        record(status, step, decision, message.clone());
        status.observed_generation = self.rollout.meta().generation;
        self.save(status).await?;
        self.ctx.metrics.rollout_decision(decision);
        let type_ = match decision {
            Decision::RollBack => EventType::Warning,
            _ => EventType::Normal,
        };
        let reason = match phase {
            Phase::RolledBack => "RolledBack",
            Phase::Aborted => "Aborted",
            _ => "Completed",
        };
        crate::controller::driver::publish_on(
            self.ctx,
            KIND,
            &self.reference(),
            type_,
            reason,
            &message,
        )
        .await;
        Ok(())
    }

    /// Completed: every moved key stays on the candidate.
    async fn hold_on_candidate(
        &mut self,
        status: &mut ConfigRolloutStatus,
        keys: &Keys,
    ) -> Result<(Outcome, Option<Duration>), Halt> {
        let candidate = self.rollout.spec.candidate_config_ref.name.clone();
        self.place(keys, &status.moved_keys, Some(&candidate))
            .await?;
        // A key promoted in Git whose own defaults show the candidate applied is let go for
        // good: a later change of its defaults (a revert) is not overridden.
        let promoted = self.promoted_and_applied(keys, &status.moved_keys, &candidate);
        if !promoted.is_empty() {
            status.moved_keys.retain(|name| !promoted.contains(name));
            self.save(status).await?;
        }
        // Keys a later rollout holds are its to move (this one never writes them).
        let held: Vec<String> = status
            .moved_keys
            .iter()
            .filter(|name| !keys.taken.contains(name))
            .cloned()
            .collect();
        let decided = last_message(status);
        // `place` moves no refused key: say which, rather than wait for it.
        if let Some((key, refused)) = held
            .iter()
            .filter_map(|name| keys.all.iter().find(|k| k.name_any() == *name))
            .find_map(|key| Some((key, self.refused_on(key, &candidate)?)))
        {
            let now = match key
                .status
                .as_ref()
                .and_then(|s| s.config_override.as_deref())
            {
                Some(config) => format!(
                    "its annotations are removed, but it runs Config {config} until its own reconcile applies its defaults (an observed-only key applies nothing)"
                ),
                None => "its annotations are removed".to_string(),
            };
            return Ok((
                Outcome::Stalled {
                    reason: "KeyRefused".into(),
                    message: format!("{decided}; {refused}: {now}"),
                },
                Some(POLL),
            ));
        }
        let waiting = self.not_placed(keys, &held, Some(&candidate));
        let moving = |keys: String| {
            format!("{decided}; waiting for ApiKeys {keys} to apply Config {candidate}")
        };
        if let Some(waiting) = waiting_for(keys, &waiting, "MovingKeys", moving) {
            return Ok(waiting);
        }
        Ok((
            Outcome::Ready {
                reason: "Completed".into(),
                message: format!(
                    "{decided}; every key it holds is on Config {candidate}: promote it in Git (the stable Config's document, or the keys' defaults), then delete this rollout"
                ),
            },
            None,
        ))
    }

    /// Rolled back or aborted: every key this rollout moved is back on its own defaults.
    async fn hold_on_stable(
        &mut self,
        status: &mut ConfigRolloutStatus,
        keys: &Keys,
    ) -> Result<(Outcome, Option<Duration>), Halt> {
        // Every key it moved (whatever its annotations say now: a key re-tagged by hand is
        // still on the candidate) and every key that names it.
        let moved = returning(keys, status);
        self.place(keys, &moved, None).await?;
        let reason = match status.phase {
            Phase::Aborted => "Aborted",
            _ => "RolledBack",
        };
        let decided = last_message(status);
        let waiting = self.not_placed(keys, &moved, None);
        let going_back =
            |keys: String| format!("{decided}; returning ApiKeys {keys} to their own defaults");
        if let Some(waiting) = waiting_for(keys, &waiting, reason, going_back) {
            return Ok(waiting);
        }
        Ok((
            Outcome::Stalled {
                reason: reason.into(),
                message: format!("{decided}; every moved key is back on its own defaults"),
            },
            None,
        ))
    }

    /// A cohort's figures over the window (an empty cohort reads nothing).
    async fn figures(
        &self,
        ids: &[String],
        from: Timestamp,
        to: Timestamp,
    ) -> Result<CohortRecord, Halt> {
        if ids.is_empty() {
            return Ok(CohortRecord::default());
        }
        let connection = connection_name(self.rollout);
        let analysis = &self.rollout.spec.analysis;
        let organisation = analysis
            .organisation_id
            .clone()
            .or_else(|| tenant_id(self.ctx, connection))
            .ok_or_else(|| {
                Error::InvalidSpec(format!(
                    "spec.analysis.organisationId is required: Connection {connection} names no TSG id (x-tsg-id header or tsg_id: scope)"
                ))
            })?;
        let client = list_client(self.ctx, connection, Some(&self.namespace)).await?;
        let mut query =
            TelemetryQuery::window(organisation, analysis.workspace_slug.clone(), from, to);
        query.api_key_ids = ids.to_vec();
        let figures: CohortFigures = client
            .telemetry()
            .cohort(&query)
            .await
            .map_err(|e| Error::api("read the telemetry of a rollout cohort", e))?;
        Ok(CohortRecord {
            keys: ids.len() as u32,
            requests: figures.requests,
            server_errors: figures.server_errors,
            errors: figures.errors,
            client_errors: figures.client_errors,
            error_rate: figures.error_rate,
            p90_latency_ms: figures.p90_ms,
        })
    }

    /// Writes `status` on condition that the rollout is still at the version last read or
    /// written here: another writer (a second replica) makes this reconcile start over.
    async fn save(&mut self, status: &ConfigRolloutStatus) -> Result<(), Halt> {
        may_write(self.ctx, self.rollout)?;
        let patch = serde_json::json!({
            "apiVersion": ConfigRollout::api_version(&()),
            "kind": KIND,
            "metadata": {"resourceVersion": self.version},
            "status": status,
        });
        let written = self
            .rollouts
            .patch_status(
                &self.name,
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(&patch),
            )
            .await
            .map_err(|e| self.write_failed("write status", e))?;
        self.version = written.resource_version();
        Ok(())
    }

    /// The finalizer that returns the keys when the rollout is deleted, added before the first
    /// key moves.
    async fn ensure_finalizer(&mut self) -> Result<(), Halt> {
        if !self.finalizers_held().is_empty() {
            return Ok(());
        }
        may_write(self.ctx, self.rollout)?;
        let mut finalizers = self.rollout.finalizers().to_vec();
        finalizers.push(self.ctx.installation.finalizer().to_string());
        let written = self
            .write_finalizers(finalizers)
            .await
            .map_err(|e| self.write_failed("add the finalizer", e))?;
        self.version = written.resource_version();
        Ok(())
    }

    /// Deleted: every key this rollout moved returns to its own defaults, then the finalizer
    /// goes.
    async fn release(&mut self) -> Result<Action, Halt> {
        let held = self.finalizers_held();
        if held.is_empty() {
            return Ok(Action::await_change());
        }
        let keys = self.keys_to_return().await?;
        let status = self.rollout.status.clone().unwrap_or_default();
        self.place(&keys, &returning(&keys, &status), None).await?;
        may_write(self.ctx, self.rollout)?;
        let finalizers: Vec<String> = self
            .rollout
            .finalizers()
            .iter()
            .filter(|f| !held.contains(f))
            .cloned()
            .collect();
        match self.write_finalizers(finalizers).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(self.write_failed("remove the finalizer", e)),
        }
        self.ctx.metrics.forget_rollout(&self.namespace, &self.name);
        Ok(Action::await_change())
    }

    /// Sets the rollout's finalizers to `finalizers`, on condition that it is still at the
    /// version last read or written here.
    async fn write_finalizers(
        &self,
        finalizers: Vec<String>,
    ) -> Result<ConfigRollout, kube::Error> {
        let metadata =
            serde_json::json!({"resourceVersion": self.version, "finalizers": finalizers});
        let patch = serde_json::json!({ "metadata": metadata });
        self.rollouts
            .patch(&self.name, &written_by(MANAGER), &Patch::Merge(&patch))
            .await
    }

    /// Why a write of the rollout (`action`: "write status") failed: a conflict when another
    /// writer changed it since it was read or written here (this reconcile starts over).
    fn write_failed(&self, action: &str, e: kube::Error) -> Halt {
        match e {
            kube::Error::Api(s) if s.code == 409 => {
                Wait::Conflict(format!("{KIND} {} changed meanwhile", self.name)).into()
            }
            e => match Error::crd_outdated(KIND, &self.name, &e) {
                Some(outdated) => outdated.into(),
                None => Error::kube(format!("{action} of {KIND} {}", self.name), e).into(),
            },
        }
    }

    fn reference(&self) -> ObjectReference {
        self.rollout.object_ref(&())
    }
}

/// Whether this replica may write `rollout`: it leads for it.
fn may_write(ctx: &Context, rollout: &ConfigRollout) -> Result<(), Wait> {
    ctx.leadership
        .for_object(rollout.meta())
        .may_write()
        .map_err(Wait::NotLeader)
}

/// The keys a rollout returns to their own defaults: every key in `status.movedKeys` and every
/// key that names it in `aigw.io/rollout`, sorted; never a key another rollout holds now
/// ([`Keys::taken`]: a finished rollout left in place does not pull its old keys off a later
/// one).
fn returning(keys: &Keys, status: &ConfigRolloutStatus) -> Vec<String> {
    let mut moved = names(&keys.tagged);
    moved.extend(status.moved_keys.iter().cloned());
    moved.retain(|name| !keys.taken.contains(name));
    moved.sort();
    moved.dedup();
    moved
}

/// How long ago `started` was at `now`. A clock behind the one that started the step (a
/// failover to another replica) reads as no time elapsed, never as the pause being over.
fn elapsed_since(started: Timestamp, now: Timestamp) -> Duration {
    Duration::try_from(now.duration_since(started)).unwrap_or(Duration::ZERO)
}

/// The Connection a rollout uses (`default` when `spec.connectionRef` is absent).
pub(crate) fn connection_name(rollout: &ConfigRollout) -> &str {
    rollout
        .spec
        .connection_ref
        .as_ref()
        .map_or("default", |c| c.name.as_str())
}

/// The slug (else id) of a Ready Config.
fn remote_slug(config: Option<&Config>) -> Option<String> {
    let status = config?.status.as_ref()?;
    let ready = find_condition(&status.conditions, READY).is_some_and(|c| c.status == "True");
    ready
        .then(|| status.slug.clone().or(status.id.clone()))
        .flatten()
}

fn record(status: &mut ConfigRolloutStatus, step: usize, decision: Decision, message: String) {
    status.decisions.push(DecisionRecord {
        at: Timestamp::now().to_string(),
        step: step as u32,
        decision,
        message,
    });
    let excess = status.decisions.len().saturating_sub(MAX_DECISIONS);
    status.decisions.drain(..excess);
}

fn last_message(status: &ConfigRolloutStatus) -> String {
    status
        .decisions
        .last()
        .map_or_else(String::new, |d| d.message.clone())
}

fn progressing(reason: &str, message: String) -> (Outcome, Option<Duration>) {
    (
        Outcome::Progressing {
            reason: reason.into(),
            message,
        },
        Some(POLL),
    )
}

/// [`progressing`] while the ApiKeys `waiting` wait (`None` when none does), their names in
/// the message `says`; `Stalled` (`KeyStalled`, naming the key and its own reason) while one of
/// them is Stalled for its generation.
fn waiting_for(
    keys: &Keys,
    waiting: &[String],
    reason: &str,
    says: impl FnOnce(String) -> String,
) -> Option<(Outcome, Option<Duration>)> {
    if waiting.is_empty() {
        return None;
    }
    let message = says(waiting.join(", "));
    // A key that only a change of its own can mend holds the rollout until then: it says so
    // rather than wait in silence, and goes on once the key recovers.
    Some(match stalled_key(keys, waiting) {
        Some(stalled) => (
            Outcome::Stalled {
                reason: "KeyStalled".into(),
                message: format!("{message}; {stalled}"),
            },
            Some(POLL),
        ),
        None => progressing(reason, message),
    })
}

fn pausing(step: usize, weight: u32, left: Duration) -> Outcome {
    Outcome::Progressing {
        reason: "Pausing".into(),
        message: format!(
            "step {step} ({weight}%): every key is on the candidate; analysis in {}",
            humantime::format_duration(Duration::from_secs(left.as_secs()))
        ),
    }
}

/// The step a rollout under way goes on from when `steps` no longer has its current step, or
/// that step's weight is below the share of keys already moved (`status.weight`): the first
/// step whose weight covers that share (the last step's weight is 100). `None`: the current
/// step stands.
fn replanned(steps: &[RolloutStep], status: &ConfigRolloutStatus) -> Option<usize> {
    let at = status.current_step? as usize;
    let moved = status.weight.unwrap_or(0);
    if steps.get(at).is_some_and(|step| step.weight >= moved) {
        return None;
    }
    let covering = steps.iter().position(|step| step.weight >= moved);
    Some(covering.unwrap_or(steps.len().saturating_sub(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ApiKey `name` at generation 2 whose `Stalled` condition is `stalled` for
    /// `generation`.
    fn key(name: &str, stalled: &str, generation: i64) -> ApiKey {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "aigw.io/v1alpha1", "kind": "ApiKey",
            "metadata": {"name": name, "namespace": "shop", "generation": 2},
            "spec": {"name": name, "kind": "service", "scopes": ["completions.write"],
                     "secretRef": {"name": name}},
            "status": {"conditions": [{
                "type": "Stalled", "status": stalled, "reason": "NotAllowed",
                "message": "workspace ws-1 is not granted to this namespace",
                "observedGeneration": generation, "lastTransitionTime": "2026-12-03T10:00:00Z"}]}
        }))
        .unwrap()
    }

    fn keys(all: Vec<ApiKey>) -> Keys {
        Keys {
            eligible: Vec::new(),
            tagged: Vec::new(),
            held_elsewhere: Vec::new(),
            all,
            taken: Vec::new(),
        }
    }

    /// A rollout waiting for a key that is Stalled says which and why (`KeyStalled`), and keeps
    /// looking; a key not Stalled, or Stalled for an older generation, is waited for as before.
    /// A stray key (out of the selector, so neither eligible nor tagged) counts too.
    #[test]
    fn a_wait_on_a_stalled_key_says_so() {
        let says = |keys: String| format!("returning ApiKeys {keys}");
        let waiting = ["key-a".to_string()];
        let (outcome, next) = waiting_for(
            &keys(vec![key("key-a", "True", 2)]),
            &waiting,
            "ReturningKeys",
            says,
        )
        .unwrap();
        assert_eq!(next, Some(POLL));
        let Outcome::Stalled { reason, message } = outcome else {
            panic!("not Stalled: {outcome:?}");
        };
        assert_eq!(reason, "KeyStalled");
        assert_eq!(
            message,
            "returning ApiKeys key-a; ApiKey key-a is Stalled (NotAllowed: workspace ws-1 is not granted to this namespace)"
        );
        for healthy in [key("key-a", "False", 2), key("key-a", "True", 1)] {
            let (outcome, _) =
                waiting_for(&keys(vec![healthy]), &waiting, "ReturningKeys", says).unwrap();
            assert!(
                matches!(&outcome, Outcome::Progressing { reason, .. } if reason == "ReturningKeys"),
                "{outcome:?}"
            );
        }
        assert!(
            waiting_for(
                &keys(vec![key("key-a", "True", 2)]),
                &[],
                "ReturningKeys",
                says
            )
            .is_none()
        );
    }

    #[test]
    fn a_clock_behind_the_steps_start_reads_as_no_time_elapsed() {
        let started: Timestamp = "2026-12-03T10:00:00Z".parse().unwrap();
        let later: Timestamp = "2026-12-03T10:05:00Z".parse().unwrap();
        let earlier: Timestamp = "2026-12-03T09:55:00Z".parse().unwrap();
        assert_eq!(elapsed_since(started, later), Duration::from_secs(300));
        assert_eq!(elapsed_since(started, earlier), Duration::ZERO);
    }

    fn steps(weights: &[u32]) -> Vec<RolloutStep> {
        let steps: Vec<serde_json::Value> = weights
            .iter()
            .map(|w| serde_json::json!({"weight": w, "pause": "1m"}))
            .collect();
        serde_json::from_value(serde_json::Value::from(steps)).unwrap()
    }

    fn at(step: u32, weight: u32) -> ConfigRolloutStatus {
        ConfigRolloutStatus {
            current_step: Some(step),
            weight: Some(weight),
            ..Default::default()
        }
    }

    /// A steps edit under way never moves keys past a judged step: the rollout goes on from
    /// the first step that covers the share already moved.
    #[test]
    fn a_steps_edit_under_way_goes_on_from_the_step_covering_the_moved_keys() {
        let not_started = ConfigRolloutStatus::default();
        assert_eq!(replanned(&steps(&[50, 100]), &not_started), None);
        assert_eq!(replanned(&steps(&[10, 25, 50, 100]), &at(2, 50)), None);
        assert_eq!(
            replanned(&steps(&[10, 25, 75, 100]), &at(2, 50)),
            None,
            "a larger step at the same place grows the cohort and is judged"
        );
        // Shortened: at step 2 (50 %) of [10, 25, 50, 100], now [50, 100].
        assert_eq!(replanned(&steps(&[50, 100]), &at(2, 50)), Some(0));
        assert_eq!(replanned(&steps(&[40, 100]), &at(2, 50)), Some(1));
        // The step at the same place is now below the share moved.
        assert_eq!(replanned(&steps(&[10, 20, 30, 100]), &at(2, 50)), Some(3));
        assert_eq!(replanned(&steps(&[100]), &at(3, 100)), Some(0));
    }
}
