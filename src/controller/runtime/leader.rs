//! Leader election on a `coordination.k8s.io/v1` Lease, so that of several replicas only one
//! calls the management API while the others keep their watch caches warm.
//!
//! The lease loop is written here rather than taken from a crate, because none fits:
//! - `kube-leader-election` 0.44 (the newest) is built on `kube` 4; aigw uses `kube` 5.
//! - `kube-lease-manager` 0.13 works with `kube` 5, but a standby sleeps until the expiry it last
//!   read, so a lease released on SIGTERM is taken over only when the old term would have run out
//!   (up to the whole lease duration, not within a few seconds); while the apiserver cannot be
//!   reached the holder keeps reporting `true` (errors are logged and retried, never turned into
//!   a lost lease), so a stale leader would keep acting; and a renewal is a blind patch that
//!   does not check who holds the lease.
//!
//! The algorithm is client-go's: every write carries the Lease's `resourceVersion`, so of two
//! candidates only one wins (the other gets 409 Conflict); a standby considers a lease expired
//! when it has seen no change to it for `leaseDurationSeconds` of its *own* clock (so clock skew
//! between nodes does not matter); the holder renews every `retry_period` and gives up when it
//! has not renewed for `renew_deadline`, which is shorter than the lease duration so it stops
//! acting before anyone else may start; a holder that shuts down releases the lease so a standby
//! takes over at its next poll instead of waiting for the term to run out. Each process marks
//! the Lease it writes with a random id of its own ([`PROCESS_ANNOTATION`]): a Lease under its
//! identity marked by another process is another's (two processes with one identity, or a
//! restart whose old term has not run out), so a holder that finds one has lost, and a new
//! process waits for it to expire like anyone else's.

use std::future::Future;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ObjectMeta, PostParams};

use super::shards::{self, Membership, Shards, shard_key};
use crate::controller::state::installation;
use tokio::sync::watch;
use tracing::{debug, info, warn};

/// Name of the Lease every aigw replica competes for.
pub const LEASE_NAME: &str = "aigw";

/// Whether this replica may act on the management API. Cheap to clone; every controller holds
/// one through `Context`.
#[derive(Clone, Debug)]
pub struct Leadership {
    leading: watch::Receiver<bool>,
    identity: Option<Arc<str>>,
    /// Until when this replica's writes are safe, as nanoseconds after [`EPOCH`]: when its
    /// last successful renewal was *sent*, plus the renew deadline. A standby cannot take the
    /// lease before that (it waits a whole lease duration, which is longer, from when it saw
    /// the renewal), so a write let out before this instant cannot overlap a new leader's.
    valid_until: Arc<AtomicU64>,
    /// `spec.leaseTransitions` of the Lease as last read or written; [`UNKNOWN`] until then,
    /// and without leader election.
    lease_transitions: Arc<AtomicI64>,
    /// With `--shards`: which objects this replica acts on (its Lease is its own, and "leads"
    /// means that it holds it).
    shards: Option<Shards>,
    /// The shard key of the one object this handle's writes are for ([`Leadership::for_object`]).
    key: Option<Arc<str>>,
}

/// [`Leadership::lease_transitions`] before the Lease was read.
const UNKNOWN: i64 = -1;

/// The monotonic origin of [`Leadership::valid_until`]. `Instant` counts on while the process
/// is stopped (SIGSTOP), so a resumed replica sees its deadline passed.
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

fn since_epoch(at: Instant) -> u64 {
    u64::try_from(at.saturating_duration_since(*EPOCH).as_nanos()).unwrap_or(u64::MAX)
}

impl Leadership {
    /// A replica that always leads: leader election is off, or there is only one replica (the
    /// in-process test harness).
    pub fn always() -> Self {
        let (_, leading) = watch::channel(true);
        Self {
            leading,
            identity: None,
            valid_until: Arc::new(AtomicU64::new(u64::MAX)),
            lease_transitions: Arc::new(AtomicI64::new(UNKNOWN)),
            shards: None,
            key: None,
        }
    }

    /// The same replica, for the writes made for one object: with `--shards`, they are let out
    /// only while the object's shard is this replica's.
    pub fn for_object(&self, meta: &ObjectMeta) -> Self {
        Self {
            key: self.shards.as_ref().map(|_| shard_key(meta).into()),
            ..self.clone()
        }
    }

    /// True when this replica reconciles the object of `meta` now: it leads, and with `--shards`
    /// the object's shard is its own.
    pub fn acts_on(&self, meta: &ObjectMeta) -> bool {
        self.is_leader()
            && self
                .shards
                .as_ref()
                .is_none_or(|shards| shards.owns(&shard_key(meta)))
    }

    /// This replica's share, with `--shards`.
    pub fn shards(&self) -> Option<&Shards> {
        self.shards.as_ref()
    }

    /// True while this replica holds the lease (always true without leader election).
    pub fn is_leader(&self) -> bool {
        *self.leading.borrow()
    }

    /// `Ok` while a write sent now cannot overlap another leader's: this replica leads and its
    /// last renewal, counted from when it was sent, is within the renew deadline. Checked
    /// right before every non-idempotent call leaves the process ([`crate::api::WriteGuard`]).
    /// The limit: a process paused *after* this check and before its request reaches the
    /// network can still send it late; nothing in-process can close that gap.
    pub fn may_write(&self) -> Result<(), String> {
        if !self.is_leader() {
            return Err("this replica is not the leader".into());
        }
        if since_epoch(Instant::now()) >= self.valid_until.load(Ordering::Acquire) {
            return Err("this replica's leader lease was not renewed in time".into());
        }
        match (&self.shards, &self.key) {
            (None, _) => Ok(()),
            (Some(shards), Some(key)) if shards.owns(key) => Ok(()),
            (Some(_), Some(_)) => Err("this object's shard is not this replica's now".into()),
            (Some(_), None) => Err("with --shards a write must be made for one object".into()),
        }
    }

    /// The identity this replica campaigns with; `None` without leader election.
    pub fn identity(&self) -> Option<&str> {
        self.identity.as_deref()
    }

    /// How often the Lease changed hands (its `spec.leaseTransitions`), as this replica last
    /// read or wrote it: the `aigw_leader_lease_transitions` gauge. A standby reads the Lease
    /// at every poll, so every replica follows it. `None` before the first read, and without
    /// leader election.
    pub fn lease_transitions(&self) -> Option<i64> {
        Some(self.lease_transitions.load(Ordering::Relaxed)).filter(|t| *t != UNKNOWN)
    }

    /// Every change of `is_leader`, for whoever must follow it (the `aigw_leader` gauge).
    pub fn changes(&self) -> watch::Receiver<bool> {
        self.leading.clone()
    }

    /// Yields once each time this replica becomes leader, so controllers can reconcile every
    /// object they skipped while standing by. Ends when the election ends.
    /// With `--shards`, it also yields each time the share changed (it may have grown).
    pub fn acquired(&self) -> impl Stream<Item = ()> + Send + 'static {
        let mut leading = self.leading.clone();
        leading.mark_unchanged();
        let elected = futures::stream::unfold(leading, |mut leading| async move {
            loop {
                leading.changed().await.ok()?;
                if *leading.borrow_and_update() {
                    return Some(((), leading));
                }
            }
        });
        let regrouped = self.shards.as_ref().map(|shards| {
            let mut changes = shards.changes();
            changes.mark_unchanged();
            futures::stream::unfold(changes, |mut changes| async move {
                changes.changed().await.ok()?;
                // The namespaces of a hand-over come into the caches one list after another:
                // what changes within a moment wakes every object once, not once a namespace.
                tokio::time::sleep(SHARE_CHANGES_GATHERED).await;
                changes.mark_unchanged();
                Some(((), changes))
            })
        });
        futures::stream::select(elected, futures::stream::iter(regrouped).flatten())
    }
}

impl crate::api::WriteGuard for Leadership {
    fn may_write(&self) -> Result<(), String> {
        Leadership::may_write(self)
    }
}

/// How long a change of the share waits for the changes right behind it before it wakes every
/// object ([`Leadership::acquired`]).
const SHARE_CHANGES_GATHERED: Duration = Duration::from_millis(500);

/// Timing and naming of the election.
#[derive(Debug, Clone)]
pub struct LeaseSettings {
    pub namespace: String,
    pub name: String,
    pub identity: String,
    /// How long a lease lasts after its last renewal before a standby may take it.
    pub lease_duration: Duration,
    /// How long the holder keeps acting without a successful renewal; shorter than
    /// `lease_duration`, so it stops before a standby may start.
    pub renew_deadline: Duration,
    /// How often the holder renews and a standby polls.
    pub retry_period: Duration,
}

impl LeaseSettings {
    /// 15 s lease, renewed every 2 s, given up after 10 s without a renewal: a standby takes
    /// over at most about 17 s after the holder dies, and within one poll (2 s) of a release.
    pub fn new(namespace: impl Into<String>, identity: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: LEASE_NAME.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// `POD_NAME` when set (the Downward API), else the hostname with a random suffix, so two
/// processes on one machine never share an identity.
pub fn default_identity() -> String {
    if let Some(pod) = std::env::var("POD_NAME").ok().filter(|p| !p.is_empty()) {
        return pod;
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "aigw".into());
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    format!("{host}-{}", &suffix[..8])
}

/// The holder could not keep the lease; the process must stop acting (and exit) at once.
#[derive(Debug, thiserror::Error)]
#[error("{identity} lost the leader lease {namespace}/{name}: {reason}")]
pub struct LeadershipLost {
    pub namespace: String,
    pub name: String,
    pub identity: String,
    pub reason: String,
}

/// The campaign for the lease; `run` drives it.
pub struct Elector {
    api: Api<Lease>,
    settings: LeaseSettings,
    leading: watch::Sender<bool>,
    /// Shared with [`Leadership`]: until when writes are safe.
    valid_until: Arc<AtomicU64>,
    /// Shared with [`Leadership`]: the Lease's `spec.leaseTransitions`.
    lease_transitions: Arc<AtomicI64>,
    /// The lease as last read: a lease nobody has renewed for its duration is expired.
    observed: Option<Observed>,
    /// With `--shards`: the group's members, listed after each renewal of this replica's Lease.
    membership: Option<Membership>,
    /// Without `--shards`: the group's members this replica does not act beside
    /// ([`Elector::deferring_to_shards`]).
    shards_gone: Option<shards::ShardsGone>,
    /// Why it last stood by for them, so a reason is logged once.
    waiting_for: Option<String>,
    /// This process's random id, on every Lease it writes ([`PROCESS_ANNOTATION`]).
    process: String,
    /// The `--installation-id`, on every Lease it writes ([`installation::ANNOTATION`]): a Lease
    /// another installation holds is named as such.
    installation: Option<String>,
    /// The installation last seen holding this Lease, so that sharing is warned of once.
    shared_with: Option<String>,
}

/// Annotation on a Lease: the random id of the process that last wrote it, so that of two
/// processes with one identity (`POD_NAME`) only one holds it.
pub const PROCESS_ANNOTATION: &str = "aigw.io/holder-process";

/// One version of the lease, timed on this process's clock.
struct Observed {
    resource_version: String,
    seen_at: Instant,
    expires_at: Instant,
}

/// What one acquire-or-renew attempt found.
#[derive(Debug, PartialEq)]
enum Attempt {
    /// This replica holds the lease (acquired or renewed).
    Held,
    /// Another replica holds a lease that has not expired.
    HeldBy(String),
    /// Another candidate wrote the lease between our read and our write.
    Conflict,
}

/// Where one attempt leaves the campaign.
#[derive(Debug, PartialEq)]
enum Step {
    /// Just became leader.
    Acquired(Instant),
    /// Still leading, last renewed at `renewed`; `retry` is the error of a failed renewal.
    Leading {
        renewed: Instant,
        retry: Option<String>,
    },
    /// Not leading: the lease is held by someone else (`Ok(holder)`) or could not be had.
    Standby(Result<String, String>),
    /// A held lease is gone, for the reason given.
    Lost(String),
}

/// The campaign's state machine: a holder that sees another holder, or has not renewed for
/// `renew_deadline`, has lost; a failed renewal within the deadline is retried. `now` is when
/// the attempt was sent: a renewal counts from then, not from when its answer came.
fn step(
    renewed: Option<Instant>,
    outcome: Result<Attempt, String>,
    now: Instant,
    renew_deadline: Duration,
) -> Step {
    let Some(at) = renewed else {
        return match outcome {
            Ok(Attempt::Held) => Step::Acquired(now),
            Ok(Attempt::HeldBy(holder)) => Step::Standby(Ok(holder)),
            Ok(Attempt::Conflict) => Step::Standby(Err("another candidate wrote the lease".into())),
            Err(e) => Step::Standby(Err(e)),
        };
    };
    let error = match outcome {
        Ok(Attempt::Held) => {
            return Step::Leading {
                renewed: now,
                retry: None,
            };
        }
        Ok(Attempt::HeldBy(holder)) => {
            return Step::Lost(format!("the lease is now held by {holder}"));
        }
        Ok(Attempt::Conflict) => "another candidate wrote the lease".to_string(),
        Err(e) => e,
    };
    if now.saturating_duration_since(at) >= renew_deadline {
        Step::Lost(format!("not renewed for {renew_deadline:?}: {error}"))
    } else {
        Step::Leading {
            renewed: at,
            retry: Some(error),
        }
    }
}

/// Creates the campaign and the handle controllers read. Nothing happens until `Elector::run`.
pub fn elect(kube: kube::Client, settings: LeaseSettings) -> (Leadership, Elector) {
    let (leading, receiver) = watch::channel(false);
    let valid_until = Arc::new(AtomicU64::new(0));
    let lease_transitions = Arc::new(AtomicI64::new(UNKNOWN));
    let leadership = Leadership {
        leading: receiver,
        identity: Some(settings.identity.as_str().into()),
        valid_until: valid_until.clone(),
        lease_transitions: lease_transitions.clone(),
        shards: None,
        key: None,
    };
    let elector = Elector {
        api: Api::namespaced(kube, &settings.namespace),
        settings,
        leading,
        valid_until,
        lease_transitions,
        observed: None,
        membership: None,
        shards_gone: None,
        waiting_for: None,
        process: uuid::Uuid::new_v4().simple().to_string(),
        installation: None,
        shared_with: None,
    };
    (leadership, elector)
}

/// Like [`elect`], for `--shards`: this replica holds a Lease of its own in `settings.namespace`,
/// named after `settings.name` and its identity, and shares the objects with the other holders
/// of the group's Leases ([`super::shards`]).
/// `installation` (the `--installation-id`) names the group, so two installations in one
/// namespace shard apart.
pub fn elect_shard(
    kube: kube::Client,
    mut settings: LeaseSettings,
    installation: &str,
) -> (Leadership, Elector) {
    let leader = std::mem::take(&mut settings.name);
    settings.name = shards::member_lease_name(&leader, &settings.identity);
    let shards = Shards::new(settings.identity.clone());
    let membership = Membership::new(
        Api::namespaced(kube.clone(), &settings.namespace),
        shards::group_of(installation),
        shards.clone(),
        leader,
        // Replicas started together renew within one retry period of each other.
        settings.retry_period,
    );
    let (mut leadership, mut elector) = elect(kube, settings);
    leadership.shards = Some(shards);
    elector.membership = Some(membership);
    (leadership, elector)
}

impl Elector {
    /// Writes `installation` on the Lease, and warns when another installation holds it: two
    /// installations that share a Lease (one namespace, one `--leader-election-id`) would have
    /// one of them stand by for good.
    pub fn of_installation(mut self, installation: &str) -> Self {
        self.installation = Some(installation.to_string());
        self
    }

    /// A leader without `--shards` that acts only once no replica with `--shards` of
    /// `installation` holds a live member Lease in the lease namespace
    /// ([`shards::ShardsGone`]): turning sharding off by a rolling update never has the new
    /// leader act beside the old shards. Before acquiring it does not campaign while members
    /// are live; right after acquiring it lists them again and releases the Lease, having
    /// acted on nothing, if any is live or the list fails.
    pub fn deferring_to_shards(mut self, installation: &str) -> Self {
        if self.membership.is_none() {
            self.shards_gone = Some(shards::ShardsGone::new(self.api.clone(), installation));
        }
        self
    }

    /// Why this replica may not lead now (live shard members, or they could not be listed).
    async fn shards_still_act(&mut self) -> Option<String> {
        let (duration, within) = (self.settings.lease_duration, self.settings.retry_period);
        match self.shards_gone.as_mut()?.live(duration, within).await {
            Ok(live) if live.is_empty() => None,
            Ok(live) => Some(format!(
                "replicas with --shards still hold live member Leases ({}); this replica leads once they are gone",
                live.join(", ")
            )),
            Err(e) => Some(format!(
                "the shard member Leases could not be listed ({e}); this replica leads once they can be, and none is live"
            )),
        }
    }

    /// Campaigns for the lease and renews it while held. Returns `Ok` when `shutdown` resolves
    /// (after releasing a held lease), or `LeadershipLost` when a held lease could not be kept.
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) -> Result<(), LeadershipLost> {
        let mut shutdown = std::pin::pin!(shutdown);
        info!(identity = %self.settings.identity, namespace = %self.settings.namespace, lease = %self.settings.name, "campaigning for the leader lease");
        let mut renewed: Option<Instant> = None;
        let mut hurried = false;
        loop {
            // Not campaigning while shards act saves a Lease write and release per retry.
            let waiting = match renewed {
                None => self.shards_still_act().await,
                Some(_) => None,
            };
            if let Some(why) = waiting {
                // Said once per reason at info (a failed list at warn: RBAC without `list` on
                // Leases keeps this replica from ever leading), then at debug.
                if self.waiting_for.as_deref() != Some(why.as_str()) {
                    match why.contains("could not be listed") {
                        true => warn!(%why, "standing by"),
                        false => info!(%why, "standing by"),
                    }
                    self.waiting_for = Some(why);
                } else {
                    debug!(%why, "standing by");
                }
                tokio::select! {
                    () = &mut shutdown => break,
                    () = tokio::time::sleep(self.settings.retry_period) => continue,
                }
            }
            let sent = Instant::now();
            let outcome = self.attempt(renewed).await;
            if renewed.is_none() && outcome == Ok(Attempt::Held) {
                // Acquired, and not acting yet: a shard that started before this list shows in
                // it, and one that starts after it sees this Lease held.
                if let Some(why) = self.shards_still_act().await {
                    info!(%why, "acquired the leader lease beside live shards; released it without acting");
                    self.release().await;
                    tokio::select! {
                        () = &mut shutdown => break,
                        () = tokio::time::sleep(self.settings.retry_period) => continue,
                    }
                }
            }
            renewed = self.follow(renewed, outcome, sent)?;
            let switched = self.regroup(renewed.is_some()).await;
            if switched && !hurried {
                // A new view is published at once (the replicas that gain keys wait for it),
                // but only once in a row: members that keep changing are followed at the pace
                // of the retry period.
                hurried = true;
                continue;
            }
            hurried = false;
            tokio::select! {
                () = &mut shutdown => break,
                () = tokio::time::sleep(self.pause(renewed.is_some())) => {}
            }
        }
        self.valid_until.store(0, Ordering::Release);
        self.leading.send_replace(false);
        if let Some(membership) = &self.membership {
            membership.shards().clear();
        }
        if renewed.is_some() {
            self.release().await;
        }
        Ok(())
    }

    /// With `--shards`, after each attempt: lists the members and takes the share they give
    /// (none while this replica does not hold its Lease). True when the view changed and must be
    /// published now.
    async fn regroup(&mut self, holding: bool) -> bool {
        let (duration, within) = (self.settings.lease_duration, self.settings.retry_period);
        let Some(membership) = self.membership.as_mut() else {
            return false;
        };
        if !holding {
            membership.shards().clear();
            return false;
        }
        membership.once(duration, within).await
    }

    /// This process's id on the Lease; the group label and published view, with `--shards`.
    fn decorate(&self, meta: &mut ObjectMeta) {
        let annotations = meta.annotations.get_or_insert_default();
        annotations.insert(PROCESS_ANNOTATION.to_string(), self.process.clone());
        if let Some(installation) = &self.installation {
            annotations.insert(installation::ANNOTATION.to_string(), installation.clone());
        }
        let Some(membership) = &self.membership else {
            return;
        };
        let (label, group) = membership.label();
        meta.labels.get_or_insert_default().insert(label, group);
        meta.annotations.get_or_insert_default().insert(
            shards::VIEW_ANNOTATION.to_string(),
            membership.shards().view_to_publish(),
        );
    }

    /// One acquire-or-renew, bounded so a hanging apiserver cannot outlast the renew deadline.
    async fn attempt(&mut self, renewed: Option<Instant>) -> Result<Attempt, String> {
        let budget = match renewed {
            Some(at) => self.settings.renew_deadline.saturating_sub(at.elapsed()),
            None => self.settings.lease_duration,
        };
        match tokio::time::timeout(budget, self.try_acquire_or_renew()).await {
            Ok(Ok(attempt)) => Ok(attempt),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("no answer from the apiserver within {budget:?}")),
        }
    }

    /// Applies one attempt's outcome: returns when the lease was last renewed (`None` while
    /// standing by), or `LeadershipLost` when a held lease is gone.
    fn follow(
        &self,
        renewed: Option<Instant>,
        outcome: Result<Attempt, String>,
        sent: Instant,
    ) -> Result<Option<Instant>, LeadershipLost> {
        match step(renewed, outcome, sent, self.settings.renew_deadline) {
            Step::Acquired(at) => {
                info!(identity = %self.settings.identity, "acquired the leader lease; this replica now reconciles");
                self.extend(at);
                self.leading.send_replace(true);
                Ok(Some(at))
            }
            Step::Leading { renewed, retry } => {
                self.extend(renewed);
                if let Some(error) = retry {
                    warn!(%error, "failed to renew the leader lease; retrying");
                }
                Ok(Some(renewed))
            }
            Step::Standby(why) => {
                match why {
                    Ok(holder) => debug!(%holder, "standing by: the leader lease is held"),
                    Err(error) => warn!(%error, "failed to read or acquire the leader lease"),
                }
                Ok(None)
            }
            Step::Lost(reason) => Err(self.lost(reason)),
        }
    }

    /// Writes are safe until the renew deadline, counted from the renewal sent at `renewed`.
    fn extend(&self, renewed: Instant) {
        let until = renewed
            .checked_add(self.settings.renew_deadline)
            .unwrap_or(renewed);
        self.valid_until
            .store(since_epoch(until), Ordering::Release);
    }

    fn lost(&self, reason: String) -> LeadershipLost {
        self.valid_until.store(0, Ordering::Release);
        self.leading.send_replace(false);
        if let Some(membership) = &self.membership {
            membership.shards().clear();
        }
        LeadershipLost {
            namespace: self.settings.namespace.clone(),
            name: self.settings.name.clone(),
            identity: self.settings.identity.clone(),
            reason,
        }
    }

    async fn try_acquire_or_renew(&mut self) -> Result<Attempt, kube::Error> {
        let Some(lease) = self.api.get_opt(&self.settings.name).await? else {
            return self.create().await;
        };
        let spec = lease.spec.clone().unwrap_or_default();
        self.saw_transitions(&spec);
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let expired = self.expired(&lease, &spec);
        let mine = holder.as_deref() == Some(self.settings.identity.as_str());
        // Under this identity but written by another process: one with the same identity holds
        // it (or this one's previous run, whose term must run out first).
        let ours = mine && self.wrote(&lease);
        if let Some(holder) = holder.filter(|_| !ours && !expired) {
            self.warn_if_shared(&lease, &holder);
            return Ok(Attempt::HeldBy(match mine {
                true => format!("another process as {holder}"),
                false => holder,
            }));
        }
        let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
        let next = LeaseSpec {
            holder_identity: Some(self.settings.identity.clone()),
            lease_duration_seconds: Some(self.duration_seconds()),
            renew_time: Some(now.clone()),
            acquire_time: if ours { spec.acquire_time } else { Some(now) },
            lease_transitions: Some(spec.lease_transitions.unwrap_or(0) + i32::from(!ours)),
            ..spec
        };
        self.write(lease, next).await
    }

    /// Warns (once per installation seen) when `holder` holds the Lease for another
    /// installation.
    fn warn_if_shared(&mut self, lease: &Lease, holder: &str) {
        let theirs = lease.metadata.annotations.as_ref();
        let theirs = theirs.and_then(|a| a.get(installation::ANNOTATION));
        let (Some(ours), Some(theirs)) = (&self.installation, theirs) else {
            return;
        };
        if theirs == ours || self.shared_with.as_ref() == Some(theirs) {
            return;
        }
        warn!(
            lease = %self.settings.name, namespace = %self.settings.namespace, %holder,
            installation = ?theirs,
            "the leader Lease is held for another installation: this one stands by for as long as that one runs; give each installation its own --leader-election-id (chart: leaderElection.id)"
        );
        self.shared_with = Some(theirs.clone());
    }

    /// Whether the lease's holder has let it run out, by this process's clock: no change seen
    /// for the lease's duration since it was first observed in its current version.
    fn expired(&mut self, lease: &Lease, spec: &LeaseSpec) -> bool {
        let version = lease.metadata.resource_version.clone().unwrap_or_default();
        let duration = spec
            .lease_duration_seconds
            .map_or(self.settings.lease_duration, |s| {
                Duration::from_secs(u64::try_from(s).unwrap_or(0))
            });
        let observed = match self.observed.take() {
            Some(seen) if seen.resource_version == version => seen,
            _ => {
                let now = Instant::now();
                Observed {
                    resource_version: version,
                    seen_at: now,
                    expires_at: now.checked_add(duration).unwrap_or(now),
                }
            }
        };
        let expired = observed.seen_at.elapsed() >= duration;
        self.observed = Some(observed);
        expired
    }

    /// How long to wait before the next attempt: the retry period, or less when a standby
    /// would otherwise poll again only after the lease it watches has expired.
    fn pause(&self, leading: bool) -> Duration {
        let until_expiry = self
            .observed
            .as_ref()
            .filter(|_| !leading)
            .map(|o| o.expires_at.saturating_duration_since(Instant::now()))
            .filter(|d| !d.is_zero());
        until_expiry.map_or(self.settings.retry_period, |d| {
            d.min(self.settings.retry_period)
        })
    }

    /// Whether this process wrote the Lease last.
    fn wrote(&self, lease: &Lease) -> bool {
        lease
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(PROCESS_ANNOTATION))
            .is_some_and(|process| *process == self.process)
    }

    async fn create(&mut self) -> Result<Attempt, kube::Error> {
        let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
        let mut metadata = ObjectMeta {
            name: Some(self.settings.name.clone()),
            ..Default::default()
        };
        self.decorate(&mut metadata);
        let lease = Lease {
            metadata,
            spec: Some(LeaseSpec {
                holder_identity: Some(self.settings.identity.clone()),
                lease_duration_seconds: Some(self.duration_seconds()),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: Some(0),
                ..Default::default()
            }),
        };
        match self.api.create(&PostParams::default(), &lease).await {
            Ok(_) => {
                self.lease_transitions.store(0, Ordering::Relaxed);
                Ok(Attempt::Held)
            }
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(Attempt::Conflict),
            Err(e) => Err(e),
        }
    }

    fn saw_transitions(&self, spec: &LeaseSpec) {
        let transitions = spec.lease_transitions.unwrap_or(0);
        self.lease_transitions
            .store(i64::from(transitions), Ordering::Relaxed);
    }

    /// Replaces the lease's spec, conditional on the `resourceVersion` it was read at.
    async fn write(&self, mut lease: Lease, spec: LeaseSpec) -> Result<Attempt, kube::Error> {
        let written = spec.clone();
        lease.spec = Some(spec);
        lease.metadata.managed_fields = None;
        self.decorate(&mut lease.metadata);
        match self
            .api
            .replace(&self.settings.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => {
                self.saw_transitions(&written);
                Ok(Attempt::Held)
            }
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(Attempt::Conflict),
            Err(e) => Err(e),
        }
    }

    /// Gives the lease up (holder cleared, duration 1 s) so a standby takes over at its next
    /// poll. Best effort: if it fails, the lease simply expires.
    async fn release(&self) {
        let released = tokio::time::timeout(self.settings.retry_period * 2, async {
            for _ in 0..3 {
                match self.try_release().await {
                    Ok(Attempt::Conflict) => continue,
                    other => return other,
                }
            }
            Ok(Attempt::Conflict)
        })
        .await;
        match released {
            Ok(Ok(Attempt::Held)) => {
                info!(identity = %self.settings.identity, "released the leader lease")
            }
            Ok(Ok(_)) => debug!("the leader lease was no longer ours to release"),
            Ok(Err(e)) => warn!(error = %e, "failed to release the leader lease; it will expire"),
            Err(_) => warn!("timed out releasing the leader lease; it will expire"),
        }
    }

    /// `Held` when the lease was ours and is now released.
    async fn try_release(&self) -> Result<Attempt, kube::Error> {
        let Some(lease) = self.api.get_opt(&self.settings.name).await? else {
            return Ok(Attempt::HeldBy(String::new()));
        };
        let spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.settings.identity.as_str())
            || !self.wrote(&lease)
        {
            return Ok(Attempt::HeldBy(spec.holder_identity.unwrap_or_default()));
        }
        let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
        let released = LeaseSpec {
            holder_identity: None,
            lease_duration_seconds: Some(1),
            renew_time: Some(now.clone()),
            acquire_time: Some(now),
            ..spec
        };
        self.write(lease, released).await
    }

    fn duration_seconds(&self) -> i32 {
        i32::try_from(self.settings.lease_duration.as_secs()).unwrap_or(i32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEADLINE: Duration = Duration::from_secs(10);

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn a_standby_acquires_a_free_lease() {
        let now = Instant::now();
        assert_eq!(
            step(None, Ok(Attempt::Held), now, DEADLINE),
            Step::Acquired(now)
        );
    }

    #[test]
    fn a_standby_keeps_standing_by_on_errors_and_held_leases() {
        let now = Instant::now();
        let held = step(None, Ok(Attempt::HeldBy("b".into())), now, DEADLINE);
        assert_eq!(held, Step::Standby(Ok("b".into())));
        let failed = step(None, Err("refused".into()), now, DEADLINE);
        assert_eq!(failed, Step::Standby(Err("refused".into())));
        assert!(matches!(
            step(None, Ok(Attempt::Conflict), now, DEADLINE),
            Step::Standby(Err(_))
        ));
    }

    #[test]
    fn a_renewal_moves_the_deadline() {
        let at = Instant::now();
        let now = at + secs(2);
        let next = step(Some(at), Ok(Attempt::Held), now, DEADLINE);
        assert_eq!(
            next,
            Step::Leading {
                renewed: now,
                retry: None
            }
        );
    }

    #[test]
    fn failed_renewals_are_retried_until_the_deadline() {
        let at = Instant::now();
        let early = step(Some(at), Err("refused".into()), at + secs(9), DEADLINE);
        assert_eq!(
            early,
            Step::Leading {
                renewed: at,
                retry: Some("refused".into())
            }
        );
        let conflict = step(Some(at), Ok(Attempt::Conflict), at + secs(9), DEADLINE);
        assert!(matches!(conflict, Step::Leading { renewed, .. } if renewed == at));
        let late = step(Some(at), Err("refused".into()), at + DEADLINE, DEADLINE);
        assert!(matches!(late, Step::Lost(reason) if reason.contains("refused")));
    }

    #[test]
    fn a_holder_that_sees_another_holder_has_lost_at_once() {
        let at = Instant::now();
        let next = step(
            Some(at),
            Ok(Attempt::HeldBy("b".into())),
            at + secs(1),
            DEADLINE,
        );
        assert!(matches!(next, Step::Lost(reason) if reason.contains("held by b")));
    }

    #[test]
    fn the_renew_deadline_ends_before_the_lease_does() {
        let settings = LeaseSettings::new("ns", "me");
        assert!(settings.renew_deadline < settings.lease_duration);
        assert!(settings.retry_period * 3 <= settings.renew_deadline);
    }
}
