//! Drift detection that costs a list, not N reads.
//!
//! Between drift checks aigw trusts what it last wrote or read: a reconcile of an object whose
//! spec is applied, with nothing in flight, makes no API call (a restart, a resync, a requeue).
//! Once per drift interval, per Connection and workspace, one list (paged where the API pages)
//! shows every remote object's `last_updated_at`. Only these are read again (GET, then the usual
//! diff and `DriftCorrected` PUT):
//! - objects whose `last_updated_at` differs from the one their status recorded;
//! - objects aigw has never read, unless the list shows them untouched since aigw created them
//!   (`last_updated_at` equal to `created_at`): the create answer is trusted until then;
//! - objects a list did not show. Absence from a complete list means the object was deleted,
//!   which the GET confirms (only "not found" means gone); an incomplete list proves nothing, so
//!   the objects it did not show are read one by one.
//!
//! Since every object a list did not show is read, the pass proves nothing by a row's absence,
//! and a list of several pages is read once ([`crate::api::Reading::Once`]), not twice as a
//! lookup that proves a lost create's object absent reads it: a row that shifted past a page
//! boundary while the pages were read is one more object read by GET.
//!
//! Those reads are paced to a share of the Connection's QPS (`--drift-qps-share`), so a drift
//! pass over 10,000 objects never crowds out a user's change: spec changes, creates and deletes
//! take the rest of the budget, and their reconciles never queue behind drift reads.
//!
//! A full GET of every object still runs, at a much slower cadence (`--full-read-interval`,
//! 24 h by default), as a safety net: a list says nothing about a write the API made without
//! touching `last_updated_at`, about a list that lags or a clock that jumped, or about a record
//! lost with a status write. Each object's full read falls at a point of the interval fixed by
//! a hash of its key, so a restart never reads them all at once; the interval grows when the
//! objects cannot be read within it at the drift share of the QPS, and says so in a warning and
//! a metric. The drift pass is the timing wheel of these reads: each pass also sends the objects
//! whose point fell since the last pass, so no object holds a timer of its own (at 100,000
//! objects, a requeue each in the controller's scheduler was about half a KiB per object).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use rand::Rng;
use tokio::sync::broadcast;
use tracing::{debug, error, info, warn};

use crate::api::{ApiError, Client, Listing};
use crate::controller::Context;
use crate::controller::driver::Managed;
use crate::controller::driver::status::{CommonStatus, IntentStatus};
use crate::controller::runtime::backoff::jittered;
use crate::controller::spec_already_applied;
use crate::resources::common::Recorded;

/// Default period of the safety-net full read of every object.
pub const DEFAULT_FULL_READ_INTERVAL: Duration = Duration::from_secs(24 * 3600);
/// Default share of a Connection's QPS the drift reads may use.
pub const DEFAULT_QPS_SHARE: f64 = 0.5;

/// How drift detection runs.
#[derive(Debug, Clone, Copy)]
pub struct DriftSettings {
    /// How often each Connection and workspace is listed.
    pub interval: Duration,
    /// How often every object is read in full regardless of what the lists show.
    pub full_read_interval: Duration,
    /// Share (0–1] of a Connection's QPS the drift reads may use.
    pub qps_share: f64,
}

impl DriftSettings {
    pub fn new(interval: Duration) -> Self {
        Self {
            interval,
            full_read_interval: DEFAULT_FULL_READ_INTERVAL.max(interval),
            qps_share: DEFAULT_QPS_SHARE,
        }
    }
}

/// A row of a remote list: the keys the object can be found by, and its timestamps.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub keys: Vec<String>,
    pub created_at: Option<String>,
    pub updated_at: Option<String>,
}

impl Row {
    /// The row of an object found by `keys` (its id and slug, say: an empty one is no key).
    pub fn new(
        keys: impl IntoIterator<Item = String>,
        created_at: Option<String>,
        updated_at: Option<String>,
    ) -> Self {
        Self {
            keys: keys.into_iter().filter(|k| !k.is_empty()).collect(),
            created_at,
            updated_at,
        }
    }
}

/// A kind whose drift is found by listing (Config, RateLimitsPolicy). Deployments are read on
/// every drift check: their `connectionStatus` changes without `last_updated_at` changing.
pub trait Listed: Managed {
    /// The workspace filter of the list that shows this object.
    fn list_workspace(&self) -> Option<String>;
    /// Every remote object of the kind through `client`, in `workspace` (paged where the API
    /// pages, read once: [`crate::api::Reading::Once`]; `complete` false when the list fell
    /// short of its total).
    fn list(
        client: &Client,
        workspace: Option<String>,
    ) -> impl Future<Output = Result<Listing<Row>, ApiError>> + Send;
}

/// How long a reconcile waits for the cache to show the result of a remote write this process
/// recorded ([`Drift::behind_result`]).
pub const RESULT_SHOWS_WITHIN: Duration = Duration::from_secs(10);

/// How long the versions this process's own writes replaced are remembered once the cache
/// shows the last write ([`Drift::replaced_by_own_write`]): longer than a reconcile takes from
/// its copy being taken to its first look at it.
pub const REPLACED_KEPT_FOR: Duration = Duration::from_secs(30);

/// How many replaced versions an object keeps at most (a create replaces three; a create
/// recovered and rotated, with a conflict, about seven).
const REPLACED_AT_MOST: usize = 8;

/// What the drift pass shares with the reconciles: which objects it asked to read again, and
/// when each object's full read is due.
pub struct Drift {
    pub settings: DriftSettings,
    flagged: Mutex<HashSet<String>>,
    /// Objects whose inputs besides the spec (Secrets a Config substitutes) changed since.
    inputs: Mutex<HashSet<String>>,
    /// This process's last status write of each object, until a full reconcile has seen the
    /// cache catch up: a cached copy older than aigw's own last write (a failure, an intent,
    /// the result of a remote write) must not be trusted.
    written: Mutex<HashMap<String, Written>>,
    /// The objects this process has looked at, by a hash of their key (8 bytes each, not the
    /// key): the first look checks the inputs (a change made while aigw was away).
    seen: Mutex<HashSet<u64>>,
    /// The objects whose spec stall this process recorded, by a hash of their key: a stall an
    /// earlier process recorded (an older release, which may have sent the spec differently, or
    /// an API that refused it then) is tried again until this one records an outcome
    /// ([`Drift::tried_stall`]).
    stalls_tried: Mutex<HashSet<u64>>,
    /// Where the full reads' wheel starts: an object's full read falls at
    /// `epoch + phase × interval`, then once per interval ([`Drift::full_read_falls`]).
    epoch: Instant,
    /// Per kind and Connection, the full-read interval in force (grown with N when needed).
    full_read: Mutex<HashMap<&'static str, HashMap<String, Duration>>>,
    /// `--dry-run`: the objects read once already by this process.
    read: Mutex<HashSet<String>>,
    /// The versions this process's own writes replaced, of the objects whose cache shows the
    /// last of those writes already, for [`REPLACED_KEPT_FOR`] ([`Drift::replaced_by_own_write`]).
    replaced: Mutex<Replaced>,
    /// The objects (key → uid and generation) whose cleanup is done and whose finalizer is
    /// to go.
    cleaned: Mutex<HashMap<String, String>>,
}

/// The versions own writes replaced, kept a while after the cache caught up: a reconcile
/// started on a copy taken just before may look at it only after that.
#[derive(Default)]
struct Replaced {
    by_key: HashMap<String, (Instant, Vec<String>)>,
    /// When each key was put in `by_key`, oldest first (an entry put again since is skipped).
    order: std::collections::VecDeque<(Instant, String)>,
}

impl Replaced {
    fn keep(&mut self, key: &str, versions: Vec<String>) {
        let now = Instant::now();
        while let Some((at, _)) = self.order.front() {
            if now.duration_since(*at) < REPLACED_KEPT_FOR {
                break;
            }
            let (at, old) = self.order.pop_front().expect("a front entry");
            if self.by_key.get(&old).is_some_and(|(put, _)| *put == at) {
                self.by_key.remove(&old);
            }
        }
        if versions.is_empty() {
            return;
        }
        self.by_key.insert(key.to_string(), (now, versions));
        self.order.push_back((now, key.to_string()));
    }

    fn contains(&self, key: &str, version: &str) -> bool {
        self.by_key.get(key).is_some_and(|(at, versions)| {
            at.elapsed() < REPLACED_KEPT_FOR && versions.iter().any(|v| v == version)
        })
    }
}

/// One object, at one generation of its spec (its uid, then the generation).
fn life(meta: &ObjectMeta) -> Option<String> {
    Some(format!(
        "{}/{}",
        meta.uid.as_deref()?,
        meta.generation.unwrap_or_default()
    ))
}

impl Drift {
    pub fn new(settings: DriftSettings) -> Self {
        Self {
            settings,
            flagged: Mutex::default(),
            inputs: Mutex::default(),
            written: Mutex::default(),
            seen: Mutex::default(),
            stalls_tried: Mutex::default(),
            epoch: Instant::now(),
            full_read: Mutex::default(),
            read: Mutex::default(),
            replaced: Mutex::default(),
            cleaned: Mutex::default(),
        }
    }

    /// True when `key` was read once by this process already; notes it as read. A dry run
    /// trusts no recorded state before its first read of an object.
    pub fn read_once(&self, key: &str) -> bool {
        !lock(&self.read).insert(key.to_string())
    }

    /// False when the object `key` must be read now: a list asked for it, or the drift pass
    /// sent it because its full read fell due ([`Drift::full_read_falls`]). True when its
    /// recorded state may be trusted until the pass asks again.
    pub fn trust(&self, key: &str) -> bool {
        self.saw(key);
        !lock(&self.flagged).remove(key)
    }

    /// Something the object `key` reads besides its spec changed (a watched Secret): its next
    /// reconcile checks its inputs before trusting its recorded state.
    pub fn inputs_changed(&self, key: String) {
        lock(&self.inputs).insert(key);
    }

    /// Whether the inputs of `key` changed since it last checked them (and forgets it).
    pub fn take_inputs_changed(&self, key: &str) -> bool {
        lock(&self.inputs).remove(key)
    }

    /// Whether the full read of `key` fell in `(since, until]`. Its point in the interval is
    /// fixed by a hash of the key (anywhere in the interval, so a start does not read every
    /// object at once), counted from this process's start.
    pub fn full_read_falls(
        &self,
        (kind, connection): (&'static str, &str),
        key: &str,
        since: Instant,
        until: Instant,
    ) -> bool {
        let interval = self.full_read_interval(kind, connection);
        let interval = interval.as_secs_f64().max(1.0);
        let phase = (key_hash(key) as f64 / u64::MAX as f64) * interval;
        // How many of the key's points lie at or before `at`.
        let turns = |at: Instant| {
            ((at.saturating_duration_since(self.epoch).as_secs_f64() - phase) / interval).floor()
        };
        turns(until) > turns(since)
    }

    /// This process wrote the status (or metadata) of `key` over version `replaced` (the
    /// write's precondition), which now has `resource_version`; `intent`: that status holds an
    /// intent (a create or rotation in flight); `result`: the status (without timestamps) when it
    /// records a remote write's result.
    pub fn wrote(
        &self,
        key: &str,
        replaced: Option<&str>,
        resource_version: Option<String>,
        intent: bool,
        result: Option<Fingerprint>,
    ) {
        let mut written = lock(&self.written);
        let Some(rv) = resource_version else {
            written.remove(key);
            return;
        };
        let mut versions = Vec::new();
        if let Some(earlier) = written.remove(key) {
            versions = earlier.replaced;
            // This process's earlier write is older than this one, even when another writer's
            // change came between them (a conflict, then a write on the version read again).
            versions.push(earlier.rv);
        }
        versions.extend(replaced.map(str::to_string));
        // A write that changed nothing keeps the version it was made on: that one is current.
        versions.retain(|v| *v != rv);
        versions.dedup();
        if versions.len() > REPLACED_AT_MOST {
            versions.drain(..versions.len() - REPLACED_AT_MOST);
        }
        written.insert(
            key.to_string(),
            Written {
                rv,
                intent,
                result: result.map(|status| (status, Instant::now())),
                replaced: versions,
                at: Instant::now(),
            },
        );
    }

    /// True when the cached copy of `key` (at `resource_version`) is a version one of this
    /// process's own writes replaced, within [`REPLACED_KEPT_FOR`] of that write: it is older
    /// than that write, whatever else this tracker forgot meanwhile (the cache may show the
    /// write between the copy being taken and this look at it). Exact for the writes recorded
    /// here ([`Drift::wrote`]), each guarded by the version it replaces; the others (a claim
    /// taken or given back, a finalizer removed) are guarded by their precondition alone.
    /// Past the window (a cache that stays behind, an etcd restored) the copy is taken as it is.
    pub fn replaced_by_own_write(&self, key: &str, resource_version: Option<&str>) -> bool {
        let Some(version) = resource_version else {
            return false;
        };
        let pending = lock(&self.written).get(key).is_some_and(|w| {
            w.at.elapsed() < REPLACED_KEPT_FOR && w.replaced.iter().any(|v| v == version)
        });
        pending || lock(&self.replaced).contains(key, version)
    }

    /// True when the cached copy's status (`cached`, without timestamps) is not yet the result
    /// this process last wrote for `key`, written within [`RESULT_SHOWS_WITHIN`]: only aigw
    /// writes status, so that copy is older than the write, and acting on it would redo the
    /// remote write. Past that window (a status edited by hand) the cache is taken as it is.
    pub fn behind_result(&self, key: &str, cached: Option<Fingerprint>) -> bool {
        let mut written = lock(&self.written);
        let Some(entry) = written.get_mut(key) else {
            return false;
        };
        match &entry.result {
            Some((status, at)) if at.elapsed() < RESULT_SHOWS_WITHIN => {
                cached.as_ref() != Some(status)
            }
            _ => {
                entry.result = None;
                false
            }
        }
    }

    /// True when the cached copy (at `resource_version`, `intent` set or not) still shows an
    /// intent this process has since settled: only aigw writes status, so that copy is older
    /// than its own last write, and acting on it would look up (or redo) finished work.
    pub fn shows_settled_intent(
        &self,
        key: &str,
        resource_version: Option<&str>,
        intent: bool,
    ) -> bool {
        intent
            && lock(&self.written)
                .get(key)
                .is_some_and(|w| !w.intent && Some(w.rv.as_str()) != resource_version)
    }

    /// The watch cache now holds `key` at `resource_version`: when that is this process's last
    /// write of it, the cache has caught up and the record of that write goes.
    pub fn stored(&self, key: &str, resource_version: Option<String>) {
        let mut written = lock(&self.written);
        if written
            .get(key)
            .is_some_and(|w| resource_version.as_deref() == Some(w.rv.as_str()))
            && let Some(shown) = written.remove(key)
        {
            lock(&self.replaced).keep(key, shown.replaced);
        }
    }

    /// A full reconcile ended without writing: whatever the cache holds is what it acted on.
    pub fn caught_up(&self, key: &str) {
        if let Some(written) = lock(&self.written).remove(key) {
            lock(&self.replaced).keep(key, written.replaced);
        }
    }

    /// True when the cached copy (at `resource_version`) is not the one this process last wrote.
    pub fn cache_behind(&self, key: &str, resource_version: Option<&str>) -> bool {
        lock(&self.written)
            .get(key)
            .is_some_and(|w| Some(w.rv.as_str()) != resource_version)
    }

    /// This process has looked at `key` (its inputs with it): not a first sight any more.
    pub fn saw(&self, key: &str) {
        lock(&self.seen).insert(key_hash(key));
    }

    /// True the first time this process looks at `key` (it has not trusted it yet).
    pub fn first_sight(&self, key: &str) -> bool {
        !lock(&self.seen).contains(&key_hash(key))
    }

    /// True when this process recorded a spec stall of `key` ([`Drift::recorded_stall`]). A
    /// stall recorded by an earlier process is tried until this one records an outcome (the
    /// stall waits for a spec change, a 400 staying a 400, but a new release may send the spec
    /// differently); a try that waits (its Connection backlogged, a cache not listed) records
    /// none, and leaves the try to the next reconcile.
    pub fn tried_stall(&self, key: &str) -> bool {
        lock(&self.stalls_tried).contains(&key_hash(key))
    }

    /// This process recorded a spec stall of `key`: it is not tried again until its spec
    /// changes.
    pub fn recorded_stall(&self, key: &str) {
        lock(&self.stalls_tried).insert(key_hash(key));
    }

    /// The object is gone: forget its schedule.
    pub fn forget(&self, key: &str) {
        lock(&self.read).remove(key);
        lock(&self.flagged).remove(key);
        lock(&self.inputs).remove(key);
        lock(&self.written).remove(key);
        lock(&self.replaced).by_key.remove(key);
        lock(&self.cleaned).remove(key);
        lock(&self.seen).remove(&key_hash(key));
        lock(&self.stalls_tried).remove(&key_hash(key));
    }

    /// The cleanup of `key` is done for the object `meta` describes, at its generation:
    /// whatever reconcile of it comes next, from any copy of that spec (the one the cleanup ran
    /// on, or one changed meanwhile that still holds the finalizer), only lets the finalizer go
    /// ([`Drift::cleaned`]), never cleans up again (a second remote DELETE). A spec edited
    /// meanwhile (`deletionPolicy` turned from `Orphan` to `Delete`) is cleaned up again.
    /// Forgotten with the object, when its watch reports it gone.
    pub fn cleanup_done(&self, key: &str, meta: &ObjectMeta) {
        if let Some(life) = life(meta) {
            lock(&self.cleaned).insert(key.to_string(), life);
        }
    }

    /// Whether the cleanup of `key` is done for the object and generation `meta` describes
    /// ([`Drift::cleanup_done`]).
    pub fn cleaned(&self, key: &str, meta: &ObjectMeta) -> bool {
        life(meta).is_some_and(|life| lock(&self.cleaned).get(key) == Some(&life))
    }

    /// The finalizer of `key` went from its copy at `resource_version`: a reconcile of that
    /// copy, which the cache may hold until its watch reports the object gone, is older than
    /// this process knows ([`Drift::replaced_by_own_write`]) and waits for the watch.
    pub fn released(&self, key: &str, resource_version: Option<String>) {
        lock(&self.replaced).keep(key, resource_version.into_iter().collect());
    }

    /// Asks the next reconcile of `key` to read the remote object rather than trust the status.
    pub fn flag(&self, key: String) {
        lock(&self.flagged).insert(key);
    }

    /// Whether a read of `key` is asked for and not yet done.
    pub fn is_flagged(&self, key: &str) -> bool {
        lock(&self.flagged).contains(key)
    }

    /// Forgets the full-read intervals (and their gauges) of the Connections of `kind` that no
    /// object of `kind` uses any more (not in `listed`): a deleted Connection's grown interval
    /// would otherwise stay, and its series with it.
    fn forget_full_reads(
        &self,
        metrics: &crate::controller::Metrics,
        kind: &'static str,
        listed: &HashMap<String, usize>,
    ) {
        let mut full_read = lock(&self.full_read);
        let Some(intervals) = full_read.get_mut(kind) else {
            return;
        };
        intervals.retain(|connection, _| {
            let kept = listed.contains_key(connection);
            if !kept {
                metrics.forget_full_read_interval(kind, connection);
            }
            kept
        });
    }

    /// The full-read interval of the objects of `kind` that use Connection `connection`.
    fn full_read_interval(&self, kind: &'static str, connection: &str) -> Duration {
        let full_read = lock(&self.full_read);
        let interval = full_read.get(kind).and_then(|of| of.get(connection));
        interval
            .copied()
            .unwrap_or(self.settings.full_read_interval)
    }

    /// Grows the full-read interval of the objects of `kind` that use Connection `connection`
    /// so that their `objects` full reads spread over it use at most half of the drift share of
    /// that Connection's `qps` (the other half is for what the lists show). Each Connection has
    /// its own: a tenant's many objects, or its slow Connection, lengthen no other tenant's.
    fn fit_full_read(
        &self,
        metrics: &crate::controller::Metrics,
        (kind, connection): (&'static str, String),
        objects: usize,
        qps: Option<f64>,
    ) {
        let configured = self.settings.full_read_interval;
        let needed = qps
            .filter(|q| *q > 0.0)
            .map(|q| Duration::from_secs_f64(2.0 * objects as f64 / (q * self.settings.qps_share)))
            .unwrap_or_default();
        let interval = configured.max(needed);
        metrics.full_read_interval(kind, &connection, interval);
        let previous = lock(&self.full_read)
            .entry(kind)
            .or_default()
            .insert(connection.clone(), interval);
        if interval > configured && previous.is_none_or(|p| p.abs_diff(interval) > p / 10) {
            warn!(
                kind,
                %connection,
                objects,
                qps,
                configured = ?configured,
                interval = ?interval,
                "these objects cannot all be read within --full-read-interval at the drift share of the Connection's qps; reading each once per the longer interval (raise spec.qps or --drift-qps-share to shorten it)"
            );
        }
    }
}

/// A hash of an object's key, stable within a process (SipHash with fixed keys).
fn key_hash(key: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut hasher);
    hasher.finish()
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Why the object recorded by `keys` and `recorded` (its last-read `last_updated_at`) must be
/// read again, given a list of `rows`; `None` when the list vouches for it.
pub fn needs_read(
    keys: &[&str],
    recorded: Option<&str>,
    created_by_aigw: bool,
    rows: &HashMap<&str, &Row>,
    complete: bool,
) -> Option<&'static str> {
    let Some(row) = keys.iter().find_map(|k| rows.get(k)) else {
        return Some(if complete {
            "absent from a complete list"
        } else {
            "not shown by an incomplete list"
        });
    };
    if row.keys.iter().any(|k| !keys.contains(&k.as_str())) {
        // A slug the create answer did not carry, say: the status is not complete.
        return Some("listed with a key the status lacks");
    }
    match (recorded, row.updated_at.as_deref()) {
        (_, None) => Some("listed without last_updated_at"),
        (Some(seen), Some(now)) if seen == now => None,
        (Some(_), Some(_)) => Some("changed since aigw last read it"),
        // Never read since aigw created it: what it created is there while nothing updated it.
        (None, Some(now)) if created_by_aigw && row.created_at.as_deref() == Some(now) => None,
        (None, Some(_)) => Some("never read by aigw"),
    }
}

/// The wait between two reads a pass asks for: never faster than the drift share of the
/// Connection's QPS, and a small batch spread over a quarter of the interval rather than sent at
/// once (a big one takes what the share allows, and the pass runs long).
fn spacing(settings: &DriftSettings, qps: Option<f64>, reads: usize) -> Duration {
    let budget = qps
        .filter(|q| *q > 0.0)
        .map(|q| Duration::from_secs_f64(1.0 / (q * settings.qps_share)))
        .unwrap_or_default();
    let spread = settings.interval / 4 / u32::try_from(reads.max(1)).unwrap_or(u32::MAX);
    budget.max(spread)
}

/// Whether the drift pass lists `object`: a remote object recorded, nothing in flight. That
/// includes an object whose spec is not applied yet (a change held at its promotion gate for a
/// soak of hours, a failing one): it keeps the remote object it recorded meanwhile, and a list
/// that shows that object changed or gone asks for a read, so the resources that name it learn
/// at once (a held Guardrail whose remote guardrail was deleted, and the Configs naming it).
fn listable<K: Listed>(object: &K) -> bool {
    let Some(status) = object.status() else {
        return false;
    };
    object.meta().deletion_timestamp.is_none()
        && !object.paused()
        && !status.remote_keys().is_empty()
        && !status.has_intent()
}

/// The spec of `object` was applied (or observed) at its generation and nothing is in flight:
/// what `status` records may be trusted until a list or a full read says otherwise.
pub fn settled<K: Managed>(object: &K, status: &K::Status) -> bool {
    !status.has_intent()
        && spec_already_applied(
            object.meta().generation,
            status.observed_generation(),
            status.conditions(),
        )
}

/// What this process last wrote into an object's status.
struct Written {
    rv: String,
    intent: bool,
    /// The fingerprint of the status written (without timestamps) when it recorded a remote
    /// write's result, and when: a reconcile waits for the cache to show it
    /// ([`Drift::behind_result`]).
    result: Option<(Fingerprint, Instant)>,
    /// The versions this process's writes replaced since the cache last showed one of them.
    replaced: Vec<String>,
    /// When the write was made.
    at: Instant,
}

/// What [`Drift`] keeps of a status it waits for the cache to show: a hash of its JSON, not the
/// document (a record can outlive its write when the watch shows the write before it is made).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint(u64);

impl Fingerprint {
    /// The hash of `value`'s JSON, keys sorted; `None` when it cannot be written as JSON.
    pub fn of<T: serde::Serialize>(value: &T) -> Option<Self> {
        use std::hash::{Hash, Hasher};
        let text = serde_json::to_value(value).ok()?.to_string();
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        text.hash(&mut hasher);
        Some(Self(hasher.finish()))
    }
}

/// Where the drift pass sends the objects to read again: every controller of the kind (one per
/// watched namespace) hears them and takes those of its namespace ([`reads_for`]).
pub type Reads<K> = broadcast::Sender<ObjectRef<K>>;

/// How many objects to read again may wait for a controller; past that the oldest are dropped
/// (they are read at their full read instead).
const READS_BUFFERED: usize = 4096;

/// The one drift pass of kind `K`, over every watched namespace: its sender, for
/// [`reads_for`], and the future that runs it. One pass per kind (not per namespace) makes one
/// list per Connection and workspace, whatever `--namespace` says.
pub fn pass_of<K: Listed>(
    ctx: Arc<Context>,
) -> (Reads<K>, futures::future::BoxFuture<'static, ()>) {
    let (sender, _) = broadcast::channel(READS_BUFFERED);
    (sender.clone(), Box::pin(run(ctx, sender)))
}

/// The objects of `namespace` (all, for `None`) the pass asks to read again, for
/// `Controller::reconcile_on`.
pub fn reads_for<K: Managed>(
    reads: &Reads<K>,
    namespace: Option<String>,
) -> impl futures::Stream<Item = ObjectRef<K>> + Send + 'static {
    futures::stream::unfold(reads.subscribe(), move |mut reads| {
        let namespace = namespace.clone();
        async move {
            loop {
                match reads.recv().await {
                    Ok(object) if namespace.is_none() || object.namespace == namespace => {
                        return Some((object, reads));
                    }
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        }
    })
}

/// How long the pass waits for every watch cache of its kind to list before it looks again. Short
/// on purpose: a wait that starts while a cache is registered but not yet filled was seen to
/// miss the moment it filled (the pass then sat out the whole wait), so it is retried.
const CACHES_LISTED_WITHIN: Duration = Duration::from_secs(2);

/// The drift pass of one kind, until the process stops: every drift interval, one list per
/// Connection and workspace, and the objects it shows changed sent to the controllers through
/// `reads`, paced.
async fn run<K: Listed>(ctx: Arc<Context>, reads: Reads<K>) {
    while !K::stores(&ctx.stores)
        .listed(ctx.stores_of::<K>(), CACHES_LISTED_WITHIN)
        .await
    {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let interval = ctx.drift.settings.interval;
    // The first pass soon after a start (edits made while aigw was away), not at once.
    let mut wait = interval
        .min(Duration::from_secs(30))
        .mul_f64(rand::rng().random_range(0.5..1.0));
    // The full reads that fell since the last pass are this pass's to send.
    let mut swept = Instant::now();
    loop {
        tokio::time::sleep(wait).await;
        let started = Instant::now();
        let since = std::mem::replace(&mut swept, started);
        if ctx.leadership.is_leader() {
            // A bug in the pass is kept to this pass: the next one runs at its time, and the
            // kind's reconciles go on.
            let this_pass = std::panic::AssertUnwindSafe(pass(&ctx, &reads, since, started));
            let Ok(asked) = futures::FutureExt::catch_unwind(this_pass).await else {
                // The full reads that fell due in it are the next pass's to send.
                swept = since;
                ctx.metrics.reconcile_panicked(K::KIND);
                error!(
                    kind = K::KIND,
                    "a drift pass panicked (a bug): the next one starts at its time; the reconciles go on"
                );
                wait = jittered(interval).saturating_sub(started.elapsed());
                continue;
            };
            let took = started.elapsed();
            ctx.metrics.drift_pass(K::KIND, took, asked);
            if took > interval {
                warn!(kind = K::KIND, took = ?took, interval = ?interval, "a drift pass took longer than --drift-interval: the next one starts at once (raise spec.qps or --drift-qps-share)");
            } else {
                debug!(kind = K::KIND, took = ?took, read_again = asked, "drift pass done");
            }
        }
        wait = jittered(interval).saturating_sub(started.elapsed());
    }
}

/// One pass: returns how many objects it asked to read again. Besides what the lists show, the
/// objects whose full read fell in `(since, until]` are read.
async fn pass<K: Listed>(ctx: &Context, reads: &Reads<K>, since: Instant, until: Instant) -> usize {
    let mut groups: BTreeMap<(String, Option<String>), Vec<Arc<K>>> = BTreeMap::new();
    let mut due: Vec<(Arc<K>, &'static str)> = Vec::new();
    // How many objects each Connection has, for its full-read interval.
    let mut listed: HashMap<String, usize> = HashMap::new();
    for object in K::stores(&ctx.stores).all() {
        // Only this installation's objects: an API list through another's Connection is a call
        // it must not make (an object not claimed yet is claimed by its reconcile first).
        let ours = || async {
            ctx.verdict(object.as_ref()).await
                == crate::controller::state::installation::Verdict::Ours
        };
        let key = crate::controller::driver::object_key(object.as_ref());
        // Every object whose full read fell, listable or not (its reconcile decides), except
        // one going or paused, which no read helps.
        if object.meta().deletion_timestamp.is_none()
            && !object.paused()
            && ctx
                .drift
                .full_read_falls((K::KIND, object.connection_name()), &key, since, until)
            && ctx.leadership.acts_on(object.meta())
            && ours().await
        {
            *listed
                .entry(object.connection_name().to_string())
                .or_default() += 1;
            due.push((object, "its full read is due"));
            continue;
        }
        // With --shards, only this replica's share (the others list theirs).
        if listable(object.as_ref()) && ctx.leadership.acts_on(object.meta()) && ours().await {
            // Listed in the workspace its `spec.workspaceRef` stands for; one whose Workspace is
            // not Ready waits in its reconcile (`WorkspaceNotReady`), not here.
            let (object, unreached) = super::reach::reach(ctx, object).await;
            if unreached.is_some() {
                continue;
            }
            groups
                .entry((
                    object.connection_name().to_string(),
                    object.list_workspace(),
                ))
                .or_default()
                .push(object);
        }
    }
    let mut slowest: Option<f64> = None;
    for ((connection, workspace), members) in groups {
        let (client, refused) = client_for_group(ctx, &connection, &members).await;
        let (refused, members): (Vec<Arc<K>>, Vec<Arc<K>>) = members
            .into_iter()
            .partition(|o| refused.contains(&o.namespace()));
        // Their reconcile records why the Connection cannot be used for them; once it has (the
        // object is not settled any more), it retries on its own schedule, not every pass.
        due.extend(
            refused
                .into_iter()
                .filter(|o| o.status().is_some_and(|s| settled(o.as_ref(), s)))
                .map(|o| (o, "its Connection cannot be used for its namespace")),
        );
        let Some(client) = client else {
            continue;
        };
        *listed.entry(connection.clone()).or_default() += members.len();
        let qps = client.qps();
        slowest = match (slowest, qps) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let listing = match K::list(&client, workspace.clone()).await {
            Ok(listing) => listing,
            Err(e) => {
                // The API's answer may quote the credentials it was sent, or what it stores of
                // any object of the list, which this process may not know (after a restart it
                // has read none): its text is left out, its status and code kept. The objects'
                // own reads report what the API says of each, concealed.
                let error = ctx.scrub("", &e.without_answer_text());
                warn!(kind = K::KIND, %connection, workspace = workspace.as_deref().unwrap_or(""), %error, "drift list failed; the objects wait for the next pass or their full read");
                continue;
            }
        };
        let rows: HashMap<&str, &Row> = listing
            .items
            .iter()
            .flat_map(|row| row.keys.iter().map(move |k| (k.as_str(), row)))
            .collect();
        for object in members {
            let Some(status) = object.status() else {
                continue;
            };
            if let Some(why) = needs_read(
                &status.remote_keys(),
                status.remote_updated_at(),
                object.adopted().is_none(),
                &rows,
                listing.complete,
            ) {
                due.push((object.clone(), why));
            }
        }
    }
    // Each Connection's qps; one no client was built for yet (only full reads fell due) is
    // taken as the slowest listed.
    let qps = |connection: &str| ctx.connections.qps_of(connection).unwrap_or(slowest);
    ctx.drift.forget_full_reads(&ctx.metrics, K::KIND, &listed);
    for (connection, objects) in listed {
        let qps = qps(&connection);
        ctx.drift
            .fit_full_read(&ctx.metrics, (K::KIND, connection), objects, qps);
    }
    // One budget per Connection, however many workspaces it listed: each Connection's reads
    // are paced by its own drift share, at the same time as the others', so a tenant's slow
    // Connection holds back no other tenant's reads.
    let due = due
        .into_iter()
        .map(|read| (read.0.connection_name().to_string(), read));
    let lanes = lanes(&ctx.drift.settings, due, qps);
    let ask = |(object, why): (Arc<K>, &'static str)| {
        let reference = ObjectRef::from_obj(object.as_ref());
        debug!(kind = K::KIND, object = %reference, why, "drift: reading again");
        ctx.drift
            .flag(crate::controller::driver::object_key(object.as_ref()));
        // No controller listening (shutting down): nothing more to ask.
        reads.send(reference).is_ok()
    };
    let asked = paced(lanes, &ask).await;
    if asked > 0 {
        info!(
            kind = K::KIND,
            read_again = asked,
            "drift pass: lists showed objects changed or unknown, or their full read fell due"
        );
    }
    asked
}

/// The reads `due` asks for, one lane per Connection (the name beside each read), each
/// [`spacing`] by its Connection's drift share of its `qps` (`None`: without a limit).
fn lanes<T>(
    settings: &DriftSettings,
    due: impl IntoIterator<Item = (String, T)>,
    qps: impl Fn(&str) -> Option<f64>,
) -> Vec<(Duration, Vec<T>)> {
    let mut by_connection: BTreeMap<String, Vec<T>> = BTreeMap::new();
    for (connection, read) in due {
        by_connection.entry(connection).or_default().push(read);
    }
    let lane = |(connection, reads): (String, Vec<T>)| {
        (spacing(settings, qps(&connection), reads.len()), reads)
    };
    by_connection.into_iter().map(lane).collect()
}

/// Hands each item of every lane to `ask`, a lane's items `spacing` apart and the lanes at the
/// same time, but no two items closer than the shortest lane's spacing: together the lanes
/// queue no more reads for the reconciles (whose `--concurrency` they share with the users'
/// changes) than the fastest Connection alone would. A lane stops at the first item `ask`
/// refuses. How many were asked.
async fn paced<T>(lanes: Vec<(Duration, Vec<T>)>, ask: &(impl Fn(T) -> bool + Sync)) -> usize {
    let shortest = lanes.iter().map(|(spacing, _)| *spacing).min();
    let next = Mutex::new(tokio::time::Instant::now());
    let turn = || {
        let mut next = lock(&next);
        let at = (*next).max(tokio::time::Instant::now());
        *next = at + shortest.unwrap_or_default();
        at
    };
    let turn = &turn;
    let lanes = lanes.into_iter().map(|(spacing, items)| async move {
        let mut asked = 0;
        for (n, item) in items.into_iter().enumerate() {
            if n > 0 {
                tokio::time::sleep(spacing).await;
            }
            tokio::time::sleep_until(turn()).await;
            if !ask(item) {
                break;
            }
            asked += 1;
        }
        asked
    });
    futures::future::join_all(lanes).await.into_iter().sum()
}

/// The client of `connection`, resolved for the namespaces of `members` (the client is the
/// same for all; the grants differ), and the namespaces it cannot be used for: one refused
/// namespace never stops the others' drift checks.
/// Cluster-scoped objects have no namespace (`None`).
async fn client_for_group<K: Listed>(
    ctx: &Context,
    connection: &str,
    members: &[Arc<K>],
) -> (Option<Client>, HashSet<Option<String>>) {
    let namespaces: std::collections::BTreeSet<Option<String>> =
        members.iter().map(|o| o.namespace()).collect();
    let mut client = None;
    let mut refused = HashSet::new();
    for namespace in namespaces {
        match crate::controller::driver::gate::list_client(ctx, connection, namespace.as_deref())
            .await
        {
            Ok(listing) => client = Some(listing),
            Err(e) => {
                let shown = namespace.as_deref().unwrap_or("(cluster-scoped)");
                // A Connection's token exchange may quote its Secrets.
                let e = ctx.scrub("", &e.to_string());
                warn!(kind = K::KIND, %connection, namespace = %shown, error = %e, "drift pass cannot use this Connection for this namespace; its objects are reconciled to report it");
                refused.insert(namespace);
            }
        }
    }
    (client, refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(keys: &[&str], created: &str, updated: Option<&str>) -> Row {
        Row {
            keys: keys.iter().map(|k| k.to_string()).collect(),
            created_at: Some(created.into()),
            updated_at: updated.map(str::to_string),
        }
    }

    fn check(
        recorded: Option<&str>,
        created_by_aigw: bool,
        rows: &[Row],
        complete: bool,
    ) -> Option<&'static str> {
        let index: HashMap<&str, &Row> = rows
            .iter()
            .flat_map(|r| r.keys.iter().map(move |k| (k.as_str(), r)))
            .collect();
        needs_read(
            &["id-1", "slug-1"],
            recorded,
            created_by_aigw,
            &index,
            complete,
        )
    }

    /// A slow Connection's reads take their time without holding back a fast one's: each lane
    /// at its own spacing, the lanes at once.
    #[tokio::test(start_paused = true)]
    async fn each_connection_is_paced_by_its_own_share() {
        let start = tokio::time::Instant::now();
        let asked = Mutex::new(Vec::new());
        let ask = |item: &'static str| {
            lock(&asked).push((item, start.elapsed().as_secs()));
            item != "refused"
        };
        let lanes = vec![
            (Duration::from_secs(10), vec!["slow-1", "slow-2", "slow-3"]),
            (Duration::from_secs(1), vec!["fast-1", "fast-2", "fast-3"]),
            (Duration::from_secs(1), vec!["refused", "never"]),
        ];
        assert_eq!(paced(lanes, &ask).await, 6);
        let mut asked = lock(&asked).clone();
        asked.sort_by_key(|(item, at)| (*at, *item));
        // One item a second at most, the fastest lane's pace, whichever lane it is from.
        assert_eq!(
            asked,
            [
                ("slow-1", 0),
                ("fast-1", 1),
                ("refused", 2),
                ("fast-2", 3),
                ("fast-3", 4),
                ("slow-2", 10),
                ("slow-3", 20),
            ]
        );
    }

    /// One lane per Connection, spaced by its own qps where known, else by the fallback.
    #[test]
    fn each_connection_gets_a_lane_of_its_own() {
        let settings = DriftSettings {
            interval: Duration::from_secs(40),
            full_read_interval: Duration::from_secs(3600),
            qps_share: 0.5,
        };
        let due = [
            ("slow", 1),
            ("fast", 2),
            ("slow", 3),
            ("unlisted", 4),
            ("free", 5),
        ]
        .map(|(c, n)| (c.to_string(), n));
        // Where no client is known, 2 qps: what the pass takes for the slowest listed.
        let qps = |connection: &str| match connection {
            "slow" => Some(0.25),
            "fast" => Some(100.0),
            "free" => None,
            _ => Some(2.0),
        };
        let secs = |s: f64| Duration::from_secs_f64(s);
        assert_eq!(
            lanes(&settings, due, qps),
            vec![
                // 10 s: a quarter of the interval for its one read; its qps allows more.
                (secs(10.0), vec![2]),
                (secs(10.0), vec![5]),
                // 8 s: 1 / (0.25 qps × 0.5 share), more than its two reads' spread (5 s).
                (secs(8.0), vec![1, 3]),
                // 10 s again: its one read spread over a quarter of the interval, the
                // fallback's 1 s budget allowing more.
                (secs(10.0), vec![4]),
            ]
        );
        let crowded = (0..100).map(|n| ("unlisted".to_string(), n));
        let spaced = lanes(&settings, crowded, |_| Some(2.0));
        assert_eq!(spaced[0].0, secs(1.0), "1 / (2 qps × 0.5 share)");
    }

    #[test]
    fn only_changed_unknown_or_missing_objects_are_read() {
        let t1 = "2026-01-01T00:00:01Z";
        let t2 = "2026-01-01T00:00:02Z";
        let same = [row(&["id-1", "slug-1"], t1, Some(t2))];
        assert_eq!(check(Some(t2), true, &same, true), None);
        assert_eq!(
            check(Some(t1), true, &same, true),
            Some("changed since aigw last read it")
        );
        // Found by slug alone.
        assert_eq!(
            check(Some(t2), true, &[row(&["slug-1"], t1, Some(t2))], true),
            None
        );
        assert_eq!(
            check(Some(t2), true, &[row(&["id-1"], t1, None)], true),
            Some("listed without last_updated_at")
        );
    }

    #[test]
    fn an_untouched_object_aigw_created_is_trusted_but_an_adopted_one_is_read() {
        let t1 = "2026-01-01T00:00:01Z";
        let untouched = [row(&["id-1"], t1, Some(t1))];
        assert_eq!(check(None, true, &untouched, true), None);
        assert_eq!(
            check(None, false, &untouched, true),
            Some("never read by aigw")
        );
        let edited = [row(&["id-1"], t1, Some("2026-01-01T00:00:09Z"))];
        assert_eq!(check(None, true, &edited, true), Some("never read by aigw"));
    }

    #[test]
    fn absence_is_read_and_an_incomplete_list_proves_nothing() {
        let other = [row(&["id-9"], "2026-01-01T00:00:01Z", None)];
        assert_eq!(
            check(Some("x"), true, &other, true),
            Some("absent from a complete list")
        );
        assert_eq!(
            check(Some("x"), true, &other, false),
            Some("not shown by an incomplete list")
        );
    }

    #[test]
    fn reads_are_paced_to_the_share_and_small_batches_spread_out() {
        let settings = DriftSettings {
            interval: Duration::from_secs(600),
            full_read_interval: Duration::from_secs(86_400),
            qps_share: 0.5,
        };
        // 10,000 reads at qps 10: the share (5/s) is the limit.
        assert_eq!(
            spacing(&settings, Some(10.0), 10_000),
            Duration::from_millis(200)
        );
        // 50 reads: spread over a quarter of the interval.
        assert_eq!(spacing(&settings, Some(10.0), 50), Duration::from_secs(3));
        // No limiter: only the spread.
        assert_eq!(spacing(&settings, None, 150), Duration::from_secs(1));
    }

    /// A reconcile may take its copy from the cache just before the watch brings this
    /// process's last write, and look at it after: the versions its writes replaced stay known
    /// once the cache shows the write (found as a fourth status write of a create).
    #[test]
    fn a_copy_an_own_write_replaced_is_known_older_after_the_cache_caught_up() {
        let drift = Drift::new(DriftSettings::new(Duration::from_secs(60)));
        let key = "Config/ns/a";
        // A create: the claim over version 1, the intent over 2, the result over 3.
        drift.wrote(key, Some("1"), Some("2".into()), false, None);
        drift.wrote(key, Some("2"), Some("3".into()), true, None);
        drift.stored(key, Some("2".into()));
        drift.wrote(key, Some("3"), Some("4".into()), false, None);
        for (version, older) in [("1", true), ("2", true), ("3", true), ("4", false)] {
            assert_eq!(
                drift.replaced_by_own_write(key, Some(version)),
                older,
                "{version}"
            );
        }
        // The cache shows the result: what it replaced is still known older.
        drift.stored(key, Some("4".into()));
        assert!(!drift.cache_behind(key, Some("4")));
        for (version, older) in [("1", true), ("3", true), ("4", false), ("5", false)] {
            assert_eq!(
                drift.replaced_by_own_write(key, Some(version)),
                older,
                "{version}"
            );
        }
        assert!(!drift.replaced_by_own_write("Config/ns/b", Some("3")));
        assert!(!drift.replaced_by_own_write(key, None));
        // A later write replaces what the cache showed; gone, the object is forgotten.
        drift.wrote(key, Some("4"), Some("6".into()), false, None);
        assert!(drift.replaced_by_own_write(key, Some("4")));
        drift.forget(key);
        assert!(!drift.replaced_by_own_write(key, Some("4")));
        assert!(!drift.replaced_by_own_write(key, Some("3")));
        // A conflict: another writer's change (9) came between two writes of this process (8,
        // then 10 on 9 read again): the earlier write's version is older all the same.
        drift.wrote(key, Some("7"), Some("8".into()), true, None);
        drift.wrote(key, Some("9"), Some("10".into()), false, None);
        for (version, older) in [("8", true), ("9", true), ("10", false)] {
            assert_eq!(
                drift.replaced_by_own_write(key, Some(version)),
                older,
                "{version}"
            );
        }
        drift.forget(key);
        // A cleanup done: any copy of that object only lets the finalizer go; an object made
        // again under the name (another uid) is cleaned up; gone, the object is forgotten.
        let meta = |uid: Option<&str>, generation| ObjectMeta {
            uid: uid.map(str::to_string),
            generation: Some(generation),
            ..Default::default()
        };
        drift.cleanup_done(key, &meta(Some("uid-1"), 2));
        assert!(drift.cleaned(key, &meta(Some("uid-1"), 2)));
        assert!(
            !drift.cleaned(key, &meta(Some("uid-1"), 3)),
            "a spec edited since"
        );
        assert!(
            !drift.cleaned(key, &meta(Some("uid-2"), 2)),
            "another object of the name"
        );
        assert!(!drift.cleaned(key, &meta(None, 2)));
        drift.forget(key);
        assert!(!drift.cleaned(key, &meta(Some("uid-1"), 2)));
        // The finalizer gone from version 11: a copy at 11 still cached waits for the watch.
        drift.released(key, Some("11".into()));
        assert!(drift.replaced_by_own_write(key, Some("11")));
        drift.forget(key);
        // A write that changed nothing replaced nothing: its version is the current one.
        drift.wrote(key, Some("7"), Some("7".into()), false, None);
        drift.stored(key, Some("7".into()));
        assert!(!drift.replaced_by_own_write(key, Some("7")));
    }

    /// Each Connection's full-read interval fits its own objects and qps: a tenant's many
    /// objects behind a slow Connection lengthen no other Connection's, nor another kind's.
    #[test]
    fn each_connection_fits_its_own_full_read_interval() {
        let drift = Drift::new(DriftSettings {
            interval: Duration::from_secs(60),
            full_read_interval: Duration::from_secs(3600),
            qps_share: 0.5,
        });
        let metrics = crate::controller::Metrics::default();
        // 10,000 full reads at half the drift share of 1 qps: 2 × 10,000 / 0.5 = 40,000 s.
        drift.fit_full_read(&metrics, ("Config", "slow".into()), 10_000, Some(1.0));
        drift.fit_full_read(&metrics, ("Config", "fast".into()), 100, Some(10.0));
        drift.fit_full_read(&metrics, ("Config", "unlimited".into()), 10_000, None);
        let interval = |kind, connection| drift.full_read_interval(kind, connection).as_secs();
        assert_eq!(interval("Config", "slow"), 40_000);
        assert_eq!(interval("Config", "fast"), 3600);
        assert_eq!(interval("Config", "unlimited"), 3600);
        assert_eq!(interval("Guardrail", "slow"), 3600);
        let exported = metrics.encode();
        let slow = r#"aigw_full_read_interval_seconds{kind="Config",connection="slow"} 40000"#;
        assert!(exported.contains(slow), "{exported}");
        // An object of the fast Connection falls once an hour; one of the slow, once in 40,000 s.
        let hours = |connection| {
            let at = |h: u64| drift.epoch + Duration::from_secs(3600 * h);
            (0..12)
                .filter(|h| {
                    drift.full_read_falls(("Config", connection), "ns/c", at(*h), at(h + 1))
                })
                .count()
        };
        assert_eq!((hours("fast"), hours("slow")), (12, 1));
        // A Connection no object uses any more is forgotten, with its series.
        let still = HashMap::from([("fast".to_string(), 100)]);
        drift.forget_full_reads(&metrics, "Config", &still);
        assert_eq!(interval("Config", "slow"), 3600);
        assert!(!metrics.encode().contains(r#"connection="slow""#));
        assert_eq!(interval("Config", "unlimited"), 3600);
    }

    #[test]
    fn a_stall_is_tried_until_this_process_records_one() {
        let drift = Drift::new(DriftSettings::new(Duration::from_secs(60)));
        assert!(
            !drift.tried_stall("a"),
            "an earlier process's stall is tried"
        );
        assert!(!drift.tried_stall("a"), "until this process records one");
        drift.recorded_stall("a");
        assert!(drift.tried_stall("a"));
        assert!(!drift.tried_stall("b"));
        drift.forget("a");
        assert!(
            !drift.tried_stall("a"),
            "a new object of the name starts afresh"
        );
    }

    #[test]
    fn a_flag_forces_one_read_and_full_reads_fall_once_per_interval() {
        let drift = Drift::new(DriftSettings {
            interval: Duration::from_secs(60),
            full_read_interval: Duration::from_secs(3600),
            qps_share: 0.5,
        });
        assert!(drift.first_sight("a"));
        assert!(drift.trust("a"), "trusted on first sight");
        assert!(!drift.first_sight("a"));
        drift.flag("a".into());
        assert!(!drift.trust("a"));
        assert!(drift.trust("a"));
        // Over consecutive windows of a drift interval each, every key's full read falls in
        // exactly one window per full-read interval, and the keys spread over the windows.
        let hour: usize = 3600 / 60;
        let windows: Vec<(Instant, Instant)> = (0..2 * hour)
            .map(|w| {
                let at = |w: usize| drift.epoch + Duration::from_secs(60 * w as u64);
                (at(w), at(w + 1))
            })
            .collect();
        let mut first_hour = HashSet::new();
        for key in (0..100).map(|n| format!("ns/config-{n}")) {
            let falls: Vec<usize> = windows
                .iter()
                .enumerate()
                .filter(|(_, (since, until))| {
                    drift.full_read_falls(("Config", "default"), &key, *since, *until)
                })
                .map(|(w, _)| w)
                .collect();
            assert_eq!(falls.len(), 2, "{key}: {falls:?}");
            assert_eq!(falls[1] - falls[0], hour, "{key}: {falls:?}");
            first_hour.insert(falls[0]);
        }
        assert!(
            first_hour.len() > 30,
            "spread over {} windows",
            first_hour.len()
        );
        drift.forget("a");
        assert!(drift.first_sight("a"));
    }
}
