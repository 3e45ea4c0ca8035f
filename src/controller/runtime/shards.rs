//! Active-active shards: `--shards` gives every replica a Lease of its own, and the set of live
//! replicas decides, by rendezvous hashing of each object's shard key (its namespace, or its uid
//! when cluster-scoped), which replica reconciles what. There is no static configuration and no
//! coordinator.
//!
//! A share changes hands only when both sides agree, so two replicas never act on one object at
//! once:
//! - every replica publishes, on its own Lease (annotation [`VIEW_ANNOTATION`]), the member set
//!   it works from, its *view*;
//! - a replica acts on a key only when its own view and the view every live member has
//!   published (as read by a quorum list of the Leases, made after its own renewals) all hash
//!   the key to it;
//! - a replica that sees the members change switches its view, and so stops acting on the keys
//!   it loses, *before* it publishes the new view, which is what lets the gainer start.
//!
//! So if A acts on key k from its list at t₁ and B from its list at t₂ > t₁, B's list shows a
//! view of A's that hashes k to B, which A published only after it had stopped acting on k.
//! A member whose Lease stopped changing for the lease duration (by the observer's own clock),
//! or vanished that long ago (deleted by hand: its holder recreates it at its next renewal),
//! no longer counts: it stopped acting after the shorter renew deadline
//! ([`crate::controller::runtime::leader::Leadership::may_write`]), so it cannot overlap.
//! A replica that shuts down releases its Lease, and the others take its share at their next
//! list. While a replica *without* `--shards` holds the installation's leader Lease (the old
//! pods of a rolling update that turned sharding on), it acts on every object, so the shards act
//! on none until that Lease is released or lapses. What no in-process check closes is the same
//! as for the single leader: a process paused after the last check and before its request
//! reaches the network.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, Preconditions};
use tokio::sync::watch;
use tracing::{debug, info, warn};

use super::shard_cache::{Coverage, Keep};

/// Label on every member Lease; its value names the group (the installation's lease name), so
/// two installations in one namespace shard apart.
pub const GROUP_LABEL: &str = "aigw.io/shard-group";
/// Annotation on a member Lease: the member set its holder works from, comma-separated.
pub const VIEW_ANNOTATION: &str = "aigw.io/shard-view";

/// How many lease durations a member's Lease must go unchanged before a member deletes it.
const LAPSED_FOR: u32 = 4;

/// What decides where an object goes: its namespace, or its uid when it has none.
pub fn shard_key(meta: &ObjectMeta) -> String {
    match meta.namespace.as_deref().filter(|n| !n.is_empty()) {
        Some(namespace) => namespace_key(namespace),
        None => format!("uid/{}", meta.uid.as_deref().unwrap_or_default()),
    }
}

/// The shard key of the objects of `namespace`.
pub fn namespace_key(namespace: &str) -> String {
    format!("namespace/{namespace}")
}

/// The member of `view` that `key` hashes to (rendezvous hashing: the highest score wins, so a
/// member joining or leaving moves only the keys it takes or held). `None` for an empty view.
pub fn owner<'a>(view: &'a [String], key: &str) -> Option<&'a str> {
    view.iter()
        .map(|member| (score(member, key), member.as_str()))
        .max()
        .map(|(_, member)| member)
}

/// A stable 64-bit score (FNV-1a, then the splitmix64 finaliser): the same on every replica and
/// every release, unlike the standard library's hasher.
fn score(member: &str, key: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in member.bytes().chain([0xff]).chain(key.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash = (hash ^ (hash >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    hash = (hash ^ (hash >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    hash ^ (hash >> 31)
}

/// The views this replica acts under.
#[derive(Debug, Default, Clone, PartialEq)]
struct Table {
    /// This replica's own view: the live members it saw, sorted.
    view: Vec<String>,
    /// The views the live members (this one included) had published at the last list.
    published: Vec<Vec<String>>,
}

impl Table {
    fn owns(&self, me: &str, key: &str) -> bool {
        let mine = |view: &[String]| owner(view, key) == Some(me);
        mine(&self.view) && self.published.iter().all(|view| mine(view))
    }
}

/// This replica's share, shared by every controller through [`super::leader::Leadership`].
#[derive(Debug, Clone)]
pub struct Shards {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    me: String,
    table: RwLock<Table>,
    /// Bumped at every change of the table: the share may have grown.
    changed: watch::Sender<u64>,
    /// The view to publish on this replica's Lease at its next renewal.
    publish: Mutex<Publish>,
    /// How long a view that hands keys over waits before it is published ([`HANDOVER_GRACE`]).
    grace: Duration,
    handovers: AtomicU64,
    /// What the namespaced kinds' watch caches keep and hold of the share.
    coverage: Coverage,
}

/// A write that passed its check just before this replica stopped acting on its key may still
/// be on its way: a view that gives keys away is published only this long after the switch, so
/// such a write reaches the API before the gaining replica starts. The single leader's margin
/// is the same: its renew deadline ends 5 s before a standby may take over.
pub const HANDOVER_GRACE: Duration = Duration::from_secs(5);

/// The view published, and the next one with when it may be.
#[derive(Debug, Default)]
struct Publish {
    current: String,
    next: Option<(String, Instant)>,
}

impl Shards {
    pub fn new(me: impl Into<String>) -> Self {
        Self::with_grace(me, HANDOVER_GRACE)
    }

    /// With another hand-over grace (tests).
    pub fn with_grace(me: impl Into<String>, grace: Duration) -> Self {
        Self {
            inner: Arc::new(Inner {
                me: me.into(),
                table: RwLock::default(),
                changed: watch::channel(0).0,
                publish: Mutex::default(),
                grace,
                handovers: AtomicU64::new(0),
                coverage: Coverage::new(),
            }),
        }
    }

    /// True when this replica acts on the objects of `key` now: the views hash it here, and the
    /// watch caches hold a namespace's objects ([`Self::holds`]; a cluster-scoped object's
    /// caches hold every object of the kind).
    pub fn owns(&self, key: &str) -> bool {
        let table = self.inner.table.read().unwrap_or_else(|e| e.into_inner());
        table.owns(&self.inner.me, key) && (!key.starts_with("namespace/") || self.holds(key))
    }

    /// True when the filtered watch caches ([`super::shard_cache`]) hold the objects of `key`
    /// (a namespace) and follow them.
    pub fn holds(&self, key: &str) -> bool {
        self.inner.coverage.covers(&self.inner.me, key)
    }

    /// True when the filtered watch caches keep the objects of `key` now.
    pub fn keeps(&self, key: &str) -> bool {
        self.inner.coverage.keeps(&self.inner.me, key)
    }

    /// A watch cache that keeps this share only: the number to report its lists under.
    /// `scope`: the one key it watches (a watch of one namespace), if it watches one.
    pub fn register_cache(&self, scope: Option<String>) -> usize {
        self.inner.coverage.register(scope)
    }

    /// Whether cache `cache`, watching the one key `scope`, must list again for the epoch
    /// `epoch` (`Coverage::must_list`).
    pub fn must_list(&self, cache: usize, scope: &str, epoch: u64, listing: Option<u64>) -> bool {
        self.inner
            .coverage
            .must_list(cache, scope, &self.inner.me, epoch, listing)
    }

    /// Cache `cache` holds what it listed from epoch `epoch`; when that makes the caches hold
    /// more, the controllers hear of it as of a share change.
    pub fn cache_listed(&self, cache: usize, epoch: u64) {
        if self.inner.coverage.listed(cache, epoch) {
            self.inner.changed.send_modify(|n| *n += 1);
        }
    }

    /// Every change of what the filtered caches keep.
    pub fn keep_changes(&self) -> watch::Receiver<Keep> {
        self.inner.coverage.subscribe()
    }

    /// How many replicas this one sees live (its view).
    pub fn members(&self) -> usize {
        let table = self.inner.table.read().unwrap_or_else(|e| e.into_inner());
        table.view.len()
    }

    /// How often this replica's view changed since it started.
    pub fn handovers(&self) -> u64 {
        self.inner.handovers.load(Ordering::Relaxed)
    }

    /// Yields a value at every change of the share, for the controllers to reconcile what they
    /// may have gained.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.inner.changed.subscribe()
    }

    /// The view annotation to write at the next renewal: the new view once its grace is over.
    pub fn view_to_publish(&self) -> String {
        let mut publish = self.inner.publish.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((view, _)) = publish.next.take_if(|(_, at)| Instant::now() >= *at) {
            publish.current = view;
        }
        publish.current.clone()
    }

    /// While this replica settles ([`Arrival`]): publishes `view` at its next
    /// renewal, so the other members count it and their views agree sooner, and acts on and
    /// keeps nothing. Publishing at once gives nothing away, since this replica has acted on
    /// nothing yet. True when the view to publish changed.
    fn settle(&self, view: &[String]) -> bool {
        debug_assert!(
            *self.inner.table.read().unwrap_or_else(|e| e.into_inner()) == Table::default(),
            "a replica settles only before it acts"
        );
        let view = view.join(",");
        let mut publish = self.inner.publish.lock().unwrap_or_else(|e| e.into_inner());
        let changed = publish.current != view || publish.next.is_some();
        *publish = Publish {
            current: view,
            next: None,
        };
        changed
    }

    /// Acts on nothing (this replica stopped holding its Lease).
    pub fn clear(&self) {
        self.set(Table::default());
    }

    /// Takes a new table; a new own view is switched to first, then handed to the renewal.
    fn set(&self, next: Table) {
        let mut table = self.inner.table.write().unwrap_or_else(|e| e.into_inner());
        if *table == next {
            return;
        }
        let switched = table.view != next.view;
        // Only a member joining takes keys from this replica (rendezvous hashing). A view that
        // stops it acting on keys waits out the grace from that switch; one that gives away
        // nothing the published view had goes at once.
        let stopped_now = joined_to(&table.view, &next.view);
        let view = next.view.join(",");
        let members = next.view.clone();
        let mut kept = next.published.clone();
        kept.push(next.view.clone());
        *table = next;
        drop(table);
        self.inner.coverage.keep(&self.inner.me, kept);
        if switched {
            self.inner.handovers.fetch_add(1, Ordering::Relaxed);
            let mut publish = self.inner.publish.lock().unwrap_or_else(|e| e.into_inner());
            let published = parse_view(Some(&publish.current));
            let now = Instant::now();
            let at = match (stopped_now, &publish.next) {
                (true, _) => Some(now + self.inner.grace),
                (false, Some((_, at))) if joined_to(&published, &members) => Some(*at),
                (false, _) if joined_to(&published, &members) => Some(now + self.inner.grace),
                (false, _) => None,
            };
            match at {
                Some(at) => publish.next = Some((view, at)),
                None => {
                    *publish = Publish {
                        current: view,
                        next: None,
                    }
                }
            }
        }
        self.inner.changed.send_modify(|n| *n += 1);
    }
}

/// Follows the member Leases of one group and keeps [`Shards`] up to date. The elector calls
/// [`Membership::once`] right after each renewal of this replica's own Lease, so a list always
/// shows the view this replica last published.
#[derive(Debug)]
pub struct Membership {
    api: Api<Lease>,
    group: String,
    shards: Shards,
    /// Each member Lease as this process last saw it, by name.
    seen: BTreeMap<String, Seen>,
    /// The name of the installation's leader Lease, held by a replica without `--shards`.
    leader: String,
    /// The leader Lease's resourceVersion and when this process first saw it.
    leader_seen: Option<(String, Instant)>,
    /// This replica's first moments as a member.
    arrival: Arrival,
}

/// A replica that has just joined settles: for `settle` after its own Lease first shows in a
/// list it publishes its view but acts on nothing and keeps nothing, and past that until the
/// list shows the view it would take as the one it published (at most [`SETTLE_AT_MOST`]
/// settles). Replicas started together (a Deployment's pods, all restarted at once) then see
/// one another before any of them lists a namespace; the first to start would otherwise hold,
/// list and cache every namespace until the others join. Its first table then keeps no view
/// older than its own, which would give it keys a member that joined meanwhile takes. Acting on
/// less is always safe, so this costs a few seconds at a start and nothing else.
#[derive(Debug)]
struct Arrival {
    settle: Duration,
    /// When this replica's own Lease first showed in a list.
    joined: Option<Instant>,
    /// Settling is over, for good.
    settled: bool,
}

/// How many `settle` periods a replica settles at the most, waiting for its own published view.
const SETTLE_AT_MOST: u32 = 3;

impl Arrival {
    /// True while this replica settles. `member`: whether its own Lease shows in this list;
    /// `shown`: whether the list shows the view it would take as the one it published.
    fn settling(&mut self, member: bool, shown: bool, now: Instant) -> bool {
        if self.settled {
            return false;
        }
        let settling = match (member, self.joined) {
            (false, None) => true,
            // Its own Lease vanished (deleted by hand): the table says it acts on nothing.
            (false, Some(_)) => false,
            (true, _) => {
                let joined = *self.joined.get_or_insert(now);
                let settling = now.saturating_duration_since(joined);
                settling < self.settle || (!shown && settling < self.settle * SETTLE_AT_MOST)
            }
        };
        self.settled = !settling;
        settling
    }
}

/// One version of a member Lease, timed on this process's clock.
#[derive(Debug, Clone)]
struct Seen {
    version: String,
    /// When this process first saw this version.
    since: Instant,
    /// Its holder, lease duration and published view, while it has a holder.
    member: Option<(String, Duration, Vec<String>)>,
}

impl Membership {
    /// `leader` names the installation's leader Lease, which a replica without `--shards` holds.
    /// `settle`: how long a replica that has just joined acts on nothing (`Arrival`).
    pub fn new(
        api: Api<Lease>,
        group: impl Into<String>,
        shards: Shards,
        leader: impl Into<String>,
        settle: Duration,
    ) -> Self {
        Self {
            api,
            group: group.into(),
            shards,
            seen: BTreeMap::new(),
            leader: leader.into(),
            leader_seen: None,
            arrival: Arrival {
                settle,
                joined: None,
                settled: false,
            },
        }
    }

    pub fn shards(&self) -> &Shards {
        &self.shards
    }

    /// The label that marks the group's Leases.
    pub fn label(&self) -> (String, String) {
        (GROUP_LABEL.to_string(), self.group.clone())
    }

    /// Lists the group's Leases and takes the table they give. True when this replica's view
    /// changed, so the new view must be published at once. `lease_duration` is how long a member
    /// whose Lease does not change still counts as live; `within` bounds the list (and the
    /// deletes of lapsed Leases), so a slow apiserver never holds up this replica's renewals.
    pub async fn once(&mut self, lease_duration: Duration, within: Duration) -> bool {
        let selector = format!("{GROUP_LABEL}={}", self.group);
        // A list without a resourceVersion is a quorum read: it shows every renewal so far.
        let params = ListParams::default().labels(&selector);
        // A failed read keeps the table as it was: the others wait for this replica's
        // published view, and its lease guard stops it if it cannot renew either.
        let Some(leases) = answered(within, "list the shard Leases", self.api.list(&params)).await
        else {
            return false;
        };
        let leases = leases.items;
        let leader = self.api.get_opt(&self.leader);
        let Some(leader) = answered(within, "read the leader Lease", leader).await else {
            return false;
        };
        let _ = tokio::time::timeout(within, self.collect_lapsed(&leases, lease_duration)).await;
        let mut next = self.table(&leases, lease_duration);
        if self.leader_acts(leader.as_ref(), lease_duration) {
            // A replica without --shards acts on every object: an empty view gives this one none.
            next.published.push(Vec::new());
        }
        let me = &self.shards.inner.me;
        let shown = self.seen.values().any(|seen| {
            seen.member
                .as_ref()
                .is_some_and(|(holder, _, view)| holder == me && *view == next.view)
        });
        if self
            .arrival
            .settling(!next.view.is_empty(), shown, Instant::now())
        {
            let published = self.shards.settle(&next.view);
            if published {
                info!(members = ?next.view, settle = ?self.arrival.settle, "joined the shard members; acting on nothing while the replicas started beside this one join");
            }
            return published;
        }
        let switched = next.view != self.current_view();
        if switched {
            info!(members = ?next.view, "shard members changed; handing over");
        } else {
            debug!(members = ?next.view, "shard members");
        }
        self.shards.set(next);
        switched
    }

    /// Deletes the Leases of members gone for [`LAPSED_FOR`] lease durations (a replaced pod's),
    /// each on condition that it is still the version seen, so a member that comes back keeps
    /// its own.
    async fn collect_lapsed(&self, leases: &[Lease], lease_duration: Duration) {
        let now = Instant::now();
        for lease in leases {
            let name = lease.metadata.name.clone().unwrap_or_default();
            let Some(Seen { version, since, .. }) = self.seen.get(&name) else {
                continue;
            };
            let current = lease.metadata.resource_version.as_deref() == Some(version.as_str());
            if !current || now.saturating_duration_since(*since) < lease_duration * LAPSED_FOR {
                continue;
            }
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    resource_version: Some(version.clone()),
                    uid: None,
                }),
                ..Default::default()
            };
            match self.api.delete(&name, &params).await {
                Ok(_) => info!(lease = %name, "deleted the Lease of a shard member gone for good"),
                Err(e) => debug!(lease = %name, error = %e, "left a lapsed shard Lease"),
            }
        }
    }

    fn current_view(&self) -> Vec<String> {
        let table = self
            .shards
            .inner
            .table
            .read()
            .unwrap_or_else(|e| e.into_inner());
        table.view.clone()
    }

    /// True while a replica holds the leader Lease (it changed within its duration, by this
    /// process's clock, like a member's).
    fn leader_acts(&mut self, leader: Option<&Lease>, lease_duration: Duration) -> bool {
        let Some(lease) = leader else {
            self.leader_seen = None;
            return false;
        };
        let now = Instant::now();
        let version = lease.metadata.resource_version.clone().unwrap_or_default();
        let since = match &self.leader_seen {
            Some((seen, since)) if *seen == version => *since,
            _ => now,
        };
        self.leader_seen = Some((version, since));
        let Some(spec) = lease.spec.as_ref() else {
            return false;
        };
        let duration = spec.lease_duration_seconds.map_or(lease_duration, |s| {
            Duration::from_secs(u64::try_from(s).unwrap_or(0))
        });
        spec.holder_identity
            .as_deref()
            .is_some_and(|h| !h.is_empty())
            && now.saturating_duration_since(since) < duration
    }

    /// The live members and their published views, from one list.
    fn table(&mut self, leases: &[Lease], lease_duration: Duration) -> Table {
        let me = self.shards.inner.me.clone();
        let now = Instant::now();
        self.seen = follow_leases(&self.seen, leases, lease_duration, &me, now);
        let mut live = BTreeSet::new();
        let mut published = Vec::new();
        for (holder, view) in live_members(&self.seen, &me, now) {
            live.insert(holder.clone());
            published.push(view.clone());
        }
        if !live.contains(&me) {
            // This replica's own Lease is not there (yet): it acts on nothing.
            return Table::default();
        }
        Table {
            view: live.into_iter().collect(),
            published,
        }
    }
}

/// Each member Lease of one list, timed on this process's clock from what `before` saw (a
/// version first seen now counts from now). A Lease gone from the list (deleted by hand) counts
/// as one that stopped changing: its holder may act on until its renew deadline and recreates it
/// at its next renewal, so it stays, as last seen, for its lease duration. `me`: this replica's
/// identity (its own Lease never lapses in its own eyes), empty for a replica without one.
fn follow_leases(
    before: &BTreeMap<String, Seen>,
    leases: &[Lease],
    lease_duration: Duration,
    me: &str,
    now: Instant,
) -> BTreeMap<String, Seen> {
    let mut seen = BTreeMap::new();
    for lease in leases {
        let name = lease.metadata.name.clone().unwrap_or_default();
        let version = lease.metadata.resource_version.clone().unwrap_or_default();
        let since = match before.get(&name) {
            Some(seen) if seen.version == version => seen.since,
            _ => now,
        };
        let member = lease.spec.as_ref().and_then(|spec| {
            let holder = spec.holder_identity.clone().filter(|h| !h.is_empty())?;
            let duration = spec.lease_duration_seconds.map_or(lease_duration, |s| {
                Duration::from_secs(u64::try_from(s).unwrap_or(0))
            });
            let view = parse_view(
                lease
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(VIEW_ANNOTATION)),
            );
            Some((holder, duration, view))
        });
        seen.insert(
            name,
            Seen {
                version,
                since,
                member,
            },
        );
    }
    for (name, old) in before {
        let vanished = old.member.as_ref().is_some_and(|(holder, duration, _)| {
            *holder != me && now.saturating_duration_since(old.since) < *duration
        });
        if vanished && !seen.contains_key(name) {
            seen.insert(name.clone(), old.clone());
        }
    }
    seen
}

/// The live members of `seen` (holder and published view): a Lease held and changed within its
/// duration, or `me`'s own.
fn live_members<'s>(
    seen: &'s BTreeMap<String, Seen>,
    me: &str,
    now: Instant,
) -> impl Iterator<Item = (&'s String, &'s Vec<String>)> {
    seen.values().filter_map(move |Seen { since, member, .. }| {
        let (holder, duration, view) = member.as_ref()?;
        let lapsed = *holder != me && now.saturating_duration_since(*since) >= *duration;
        (!lapsed).then_some((holder, view))
    })
}

/// What a replica *without* `--shards` checks before it acts on the installation's leader Lease:
/// whether replicas with `--shards` of its group still hold live member Leases (the old pods
/// of a rolling update that turns sharding off). It acts only when, after acquiring the Lease,
/// it finds none; so a shard acting on its share and the new leader never act at once. A
/// shard that starts after that check sees the leader Lease held and acts on nothing
/// ([`Membership`]): whichever mode came first goes on until it is gone.
#[derive(Debug)]
pub struct ShardsGone {
    api: Api<Lease>,
    selector: String,
    seen: BTreeMap<String, Seen>,
}

impl ShardsGone {
    /// The member Leases of `installation`'s group in the namespace of `api`.
    pub fn new(api: Api<Lease>, installation: &str) -> Self {
        Self {
            api,
            selector: format!("{GROUP_LABEL}={}", group_of(installation)),
            seen: BTreeMap::new(),
        }
    }

    /// The holders of the group's live member Leases, from a quorum list bounded by `within`;
    /// `Err` when they could not be listed (the caller then does not act either).
    pub async fn live(
        &mut self,
        lease_duration: Duration,
        within: Duration,
    ) -> Result<Vec<String>, String> {
        let params = ListParams::default().labels(&self.selector);
        let leases = match tokio::time::timeout(within, self.api.list(&params)).await {
            Ok(Ok(leases)) => leases.items,
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => return Err(format!("no answer within {within:?}")),
        };
        let now = Instant::now();
        self.seen = follow_leases(&self.seen, &leases, lease_duration, "", now);
        Ok(live_members(&self.seen, "", now)
            .map(|(holder, _)| holder.clone())
            .collect())
    }
}

/// True when `next` holds a member `before` did not: published over `before`, it would give keys
/// away.
fn joined_to(before: &[String], next: &[String]) -> bool {
    !before.is_empty() && next.iter().any(|member| !before.contains(member))
}

fn parse_view(annotation: Option<&String>) -> Vec<String> {
    let mut view: Vec<String> = annotation
        .map(|a| {
            a.split(',')
                .map(str::trim)
                .filter(|m| !m.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    view.sort();
    view.dedup();
    view
}

/// The value of [`GROUP_LABEL`] for an installation: a hash of its id, which may hold
/// characters a label value cannot.
pub fn group_of(installation: &str) -> String {
    format!("{:016x}", score(installation, ""))
}

/// The name of a member's Lease: `<group>-<identity>`, kept to a valid object name.
pub fn member_lease_name(group: &str, identity: &str) -> String {
    let cleaned: String = identity
        .to_ascii_lowercase()
        .chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' | '-' | '.' => c,
            _ => '-',
        })
        .collect();
    let name = format!("{group}-{}", cleaned.trim_matches(|c| c == '-' || c == '.'));
    name.chars().take(253).collect()
}

/// The answer of `read`, or `None`, with a warning naming `what`, when it fails or does not
/// come `within`.
async fn answered<T>(
    within: Duration,
    what: &str,
    read: impl Future<Output = kube::Result<T>>,
) -> Option<T> {
    let error = match tokio::time::timeout(within, read).await {
        Ok(Ok(answer)) => return Some(answer),
        Ok(Err(e)) => e.to_string(),
        Err(_) => format!("no answer within {within:?}"),
    };
    warn!(%error, "failed to {what}; keeping this replica's share as it was");
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(members: &[&str]) -> Vec<String> {
        members.iter().map(|m| m.to_string()).collect()
    }

    fn keys(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("namespace/team-{i}")).collect()
    }

    #[test]
    fn every_key_has_one_owner_and_the_shares_are_even() {
        let members = view(&["a", "b", "c"]);
        let mut counts = BTreeMap::new();
        for key in keys(3000) {
            *counts.entry(owner(&members, &key).unwrap()).or_insert(0) += 1;
        }
        for (member, count) in &counts {
            assert!(
                (800..1200).contains(count),
                "{member} holds {count} of 3000"
            );
        }
    }

    #[test]
    fn a_member_joining_takes_keys_only_from_the_others_and_about_its_share() {
        let before = view(&["a", "b", "c"]);
        let after = view(&["a", "b", "c", "d"]);
        let mut moved = 0;
        for key in keys(4000) {
            let (old, new) = (owner(&before, &key), owner(&after, &key));
            if old != new {
                assert_eq!(new, Some("d"), "{key} moved between two old members");
                moved += 1;
            }
        }
        assert!((800..1200).contains(&moved), "{moved} of 4000 moved");
    }

    #[test]
    fn a_key_is_acted_on_only_when_every_published_view_agrees() {
        let me = "a";
        let key = keys(200)
            .into_iter()
            .find(|k| {
                owner(&view(&["a", "b"]), k) == Some("a")
                    && owner(&view(&["a", "b", "c"]), k) == Some("c")
            })
            .expect("some key moves from a to c");
        let settled = Table {
            view: view(&["a", "b"]),
            published: vec![view(&["a", "b"]), view(&["a", "b"])],
        };
        assert!(settled.owns(me, &key));
        // c joined: a's own view moves the key to c, so a stops at once ...
        let switched = Table {
            view: view(&["a", "b", "c"]),
            published: vec![view(&["a", "b"]), view(&["a", "b"]), view(&["a", "b", "c"])],
        };
        assert!(!switched.owns(me, &key));
        // ... and c starts only once a and b have published views that give it the key.
        let c_early = Table {
            view: view(&["a", "b", "c"]),
            published: vec![view(&["a", "b"]), view(&["a", "b"]), view(&["a", "b", "c"])],
        };
        assert!(!c_early.owns("c", &key));
        let c_late = Table {
            view: view(&["a", "b", "c"]),
            published: vec![view(&["a", "b", "c"]); 3],
        };
        assert!(c_late.owns("c", &key));
        // A member without a published view blocks every key.
        let unpublished = Table {
            view: view(&["a", "b"]),
            published: vec![view(&["a", "b"]), vec![]],
        };
        assert!(!unpublished.owns(me, &key));
    }

    #[test]
    fn a_new_view_is_switched_to_before_it_is_published() {
        let shards = Shards::new("a");
        let mut changes = shards.changes();
        shards.set(Table {
            view: view(&["a", "b"]),
            published: vec![view(&["a"]), view(&["a", "b"])],
        });
        assert_eq!(shards.view_to_publish(), "a,b");
        assert_eq!(shards.handovers(), 1);
        assert!(changes.has_changed().unwrap());
        // The same members with new published views: no handover, but the share may grow.
        changes.mark_unchanged();
        shards.set(Table {
            view: view(&["a", "b"]),
            published: vec![view(&["a", "b"]); 2],
        });
        assert_eq!(shards.handovers(), 1);
        assert!(changes.has_changed().unwrap());
    }

    #[test]
    fn a_replica_that_just_joined_publishes_its_view_and_acts_on_nothing_until_it_settled() {
        let settle = Duration::from_secs(2);
        let arrival = || Arrival {
            settle,
            joined: None,
            settled: false,
        };
        let t0 = Instant::now();
        let mut a = arrival();
        assert!(a.settling(false, false, t0), "not a member yet: nothing");
        assert!(a.settling(true, true, t0 + settle), "joined now");
        assert!(a.settling(true, true, t0 + settle + settle / 2));
        assert!(!a.settling(true, true, t0 + settle * 2), "settled");
        assert!(
            !a.settling(true, false, t0 + settle * 2 + settle / 2),
            "settled for good"
        );
        // Past `settle`, it waits for the list to show the view it would take as its own ...
        let mut a = arrival();
        assert!(a.settling(true, false, t0));
        assert!(a.settling(true, false, t0 + settle * 2));
        assert!(!a.settling(true, true, t0 + settle * 2 + settle / 10));
        // ... for a bounded time.
        let mut a = arrival();
        assert!(a.settling(true, false, t0));
        assert!(!a.settling(true, false, t0 + settle * SETTLE_AT_MOST));
        // Its own Lease gone from the list after it joined: the table says nothing is its own.
        let mut a = arrival();
        assert!(a.settling(true, true, t0));
        assert!(!a.settling(false, false, t0 + settle / 2));
        assert!(!a.settling(true, true, t0 + settle / 2 + settle / 10));

        // While it settles, the view goes out at once and nothing is acted on or kept.
        let shards = Shards::with_grace("a", Duration::from_secs(3600));
        let key = namespace_key("team-1");
        assert!(shards.settle(&view(&["a"])));
        assert!(shards.settle(&view(&["a", "b"])));
        assert!(!shards.settle(&view(&["a", "b"])), "nothing new to publish");
        assert_eq!(shards.view_to_publish(), "a,b");
        assert!(!shards.owns(&key) && !shards.keeps(&key));
        assert_eq!(shards.handovers(), 0);
        // Settled on the view it published: no grace, nothing to give away.
        shards.set(Table {
            view: view(&["a", "b"]),
            published: vec![view(&["a", "b"]); 2],
        });
        assert_eq!(shards.view_to_publish(), "a,b");
        let mine = keys(50)
            .into_iter()
            .find(|k| owner(&view(&["a", "b"]), k) == Some("a"))
            .expect("a holds some key");
        assert!(shards.keeps(&mine));
    }

    #[test]
    fn a_view_that_gives_keys_away_is_published_after_the_grace() {
        let shards = Shards::with_grace("a", Duration::from_secs(3600));
        let table = |members: &[&str]| Table {
            view: view(members),
            published: vec![view(members)],
        };
        shards.set(table(&["a", "b"]));
        assert_eq!(
            shards.view_to_publish(),
            "a,b",
            "the first view goes at once"
        );
        shards.set(table(&["a", "b", "c"]));
        assert_eq!(
            shards.view_to_publish(),
            "a,b",
            "c joined: held for the grace"
        );
        shards.set(table(&["a", "c"]));
        assert_eq!(
            shards.view_to_publish(),
            "a,b",
            "b left, but over the published a,b the view a,c still gives keys to c"
        );
        shards.set(table(&["a"]));
        assert_eq!(shards.view_to_publish(), "a", "nothing given away: at once");
        let quick = Shards::with_grace("a", Duration::ZERO);
        quick.set(table(&["a"]));
        quick.set(table(&["a", "b"]));
        assert_eq!(quick.view_to_publish(), "a,b");
    }

    #[test]
    fn shard_keys_and_lease_names() {
        let namespaced = ObjectMeta {
            namespace: Some("team-a".into()),
            uid: Some("u1".into()),
            ..Default::default()
        };
        assert_eq!(shard_key(&namespaced), "namespace/team-a");
        let cluster = ObjectMeta {
            uid: Some("u2".into()),
            ..Default::default()
        };
        assert_eq!(shard_key(&cluster), "uid/u2");
        assert_eq!(member_lease_name("aigw", "Pod_1.x"), "aigw-pod-1.x");
        assert_eq!(parse_view(Some(&"b, a,,a".to_string())), view(&["a", "b"]));
    }
}
