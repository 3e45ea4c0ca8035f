//! The Secrets aigw writes or reads, from watch caches instead of apiserver GETs.
//!
//! Two caches per watched namespace:
//!
//! - **every Secret's metadata** (no selector: a Secret may be named by a spec before anyone
//!   labels it, and an unlabelled namesake of a credentials Secret must be refused, not
//!   overwritten). It answers whether a Secret exists, its labels, annotations, owners and
//!   resourceVersion: enough for "is this Secret ours" before a create or a rotation, for the
//!   rotation id a delivery stamped, and for whether a referenced Secret changed;
//! - **the Secrets aigw delivered**, selected by `app.kubernetes.io/managed-by=aigw`, with their
//!   values dropped as they arrive (only which keys they hold is kept): whether the credentials
//!   Secret still holds its keys.
//!
//! - **the Secrets resources read**, with their values ([`SecretCache::values`]), selected by a
//!   label so that only those are held: a namespaced resource reads Secrets of its own
//!   namespace, which aigw labels [`REFERENCED_LABEL`]`=true` the first time one is named (a
//!   merge patch of that label alone; the operator may already patch Secrets there, for the
//!   credentials it delivers); a cluster-scoped resource reads only Secrets its user labelled
//!   `aigw.io/cluster-readable=true` in the Connection secret namespace, watched by that label
//!   there (aigw writes nothing in that namespace, where its role only reads). A read compares
//!   the version the metadata cache shows with the one the values cache holds and waits
//!   (briefly) for the latter to catch up, so a change that woke a resource is the one it
//!   reads. A Secret no longer named keeps the label until someone removes it (aigw labels it
//!   again if it is named again): it then costs its size in the cache, nothing else.
//!
//! What those caches cannot answer is read from the apiserver, counted: a Secret the metadata
//! cache does not hold (it may have been created a moment ago), one this replica may not
//! label (a dry run, a replica that does not lead) or whose values cache did not catch up.
//!
//! ## Freshness, and why the credential protocols stay exactly-once
//!
//! A cache answers as of the last event its watch delivered (its high-water mark: the largest
//! resourceVersion it has applied; events of one watch arrive in resourceVersion order, so the
//! cache then holds every change up to it). A GET answers as of the moment it is served; both
//! are stale by the time a decision is acted on. What keeps credentials from being overwritten
//! or lost is not the freshness of a read but the write that follows it: every Secret write is
//! conditional on the resourceVersion read (a create on its absence), so a decision taken on an
//! older state than the Secret's fails its write instead of storing over newer values, as a
//! decision taken on a GET that another writer overtook always did.
//!
//! What a cache would lose is read-your-writes: a reconcile that follows this process's own
//! write of a Secret could read the cache before its watch delivered that write, and decide
//! from the state before it (a Secret "missing" that was just filled; a resourceVersion that
//! makes the next write fail and the key it delivers be discarded). So every write of a Secret
//! records the resourceVersion it produced, and a read of that Secret waits until the cache has
//! applied at least that version (briefly), or else reads the apiserver: a fallback, counted in
//! `aigw_secret_cache_fallbacks_total{reason="behind_own_write"}`. A write whose outcome is
//! unknown (no answer, a conflict) makes the next read of that Secret a GET
//! (`reason="own_write_unknown"`). Reads before a cache has listed once, or of a namespace no
//! cache covers, are GETs too.
//!
//! The recovery paths of the protocols — resuming an interrupted rotation, recovering a create
//! whose answer was lost, checking whether a failed delivery stored its values after all —
//! decide from what another process (or a lost answer) may have written moments ago, without a
//! version to wait for: they read the apiserver, as before (`reason="recovery"`). They run only
//! after a crash or a lost answer, never at creation or at steady state.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PartialObjectMeta, Patch};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;

use crate::controller::Watchable;
use crate::controller::state::relay::Relayed;

/// How long a read waits for a cache to apply this process's own last write of a Secret
/// before it reads the apiserver instead.
const CATCH_UP: Duration = Duration::from_secs(2);
/// How long a read waits for a cache's first list.
const FIRST_LIST: Duration = Duration::from_secs(5);

/// Label on every Secret aigw writes (the delivered-Secrets cache selects by it).
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY: &str = "aigw";
/// Label aigw puts on a Secret a namespaced resource names, so that the values cache of its
/// namespace, selected by it, holds that Secret.
pub const REFERENCED_LABEL: &str = "aigw.io/referenced";
/// The field manager of the [`REFERENCED_LABEL`] write, so a Secret's `managedFields` name
/// what put the label there.
const LABELLER: &str = "aigw/secret-references";

/// Who reads a Secret's values: which cache answers, and what makes a Secret one of its.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Reader {
    /// A namespaced resource, reading a Secret of its own namespace (labelled by aigw).
    Namespaced,
    /// A cluster-scoped resource, reading a Secret its user labelled cluster-readable in the
    /// Connection secret namespace.
    Cluster,
}

impl Reader {
    /// The label (`key`, `"true"`) a Secret this reader reads carries.
    fn label(self) -> &'static str {
        match self {
            Reader::Namespaced => REFERENCED_LABEL,
            Reader::Cluster => crate::resources::common::CLUSTER_READABLE,
        }
    }
}

/// One namespace's (`None`: every namespace's) watch cache, with the largest resourceVersion it
/// has applied.
struct Tracked<K: 'static + kube::Resource<DynamicType = ()>> {
    namespace: Option<String>,
    store: Store<K>,
    applied: watch::Receiver<u64>,
}

impl<K: 'static + kube::Resource<DynamicType = ()>> Tracked<K> {
    /// True when this cache holds `namespace`'s objects.
    fn covers(&self, namespace: &str) -> bool {
        self.namespace.is_none() || self.namespace.as_deref() == Some(namespace)
    }
}

impl<K: 'static + kube::Resource<DynamicType = ()>> Clone for Tracked<K> {
    fn clone(&self) -> Self {
        Self {
            namespace: self.namespace.clone(),
            store: self.store.clone(),
            applied: self.applied.clone(),
        }
    }
}

/// What this process last did to a Secret, for read-your-writes.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Written {
    /// A write that produced this resourceVersion.
    At(u64),
    /// A write whose outcome is unknown.
    Unknown,
}

/// A Secret by namespace and name.
type Key = (String, String);
/// What reports a fallback to the metrics.
type Counting = Arc<dyn Fn(&'static str) + Send + Sync>;

/// The Secret caches of every watched namespace ([module docs](self)).
#[derive(Default)]
pub struct SecretCache {
    all: RwLock<Vec<Tracked<PartialObjectMeta<Secret>>>>,
    delivered: RwLock<Vec<Tracked<Secret>>>,
    readable: RwLock<Vec<(Reader, Tracked<Secret>)>>,
    written: Mutex<HashMap<Key, Written>>,
    fallbacks: Mutex<HashMap<&'static str, u64>>,
    on_fallback: Mutex<Option<Counting>>,
}

/// A cache's answer, or why the apiserver must be read instead.
pub enum Cached<T> {
    Found(Option<Arc<T>>),
    /// The reason of the fallback (a metric label).
    Uncached(&'static str),
}

/// A watch that fills one [`SecretCache`] store; run it for the cache to fill.
pub type Filling = futures::stream::BoxStream<'static, Result<watcher::Event<()>, watcher::Error>>;

impl SecretCache {
    /// Reports each fallback to `count` (the metric) besides counting it here.
    pub fn count_fallbacks_with(&self, count: Counting) {
        *self.on_fallback.lock().unwrap_or_else(|e| e.into_inner()) = Some(count);
    }

    /// The caches of `namespace` (`None`: every namespace): returns their watches, named for
    /// the health report. Changes are handed to `relay` once stored (as
    /// `PartialObjectMeta<Secret>` and `Secret`), for the controllers that react to them.
    pub fn watch(
        &self,
        ctx: &Arc<crate::controller::Context>,
        namespace: Option<&str>,
    ) -> Vec<(String, Filling)> {
        let kube = &ctx.kube;
        let scoped = |ns: Option<&str>| crate::controller::stream_name("Secret", ns);
        let (all, all_watch) = tracked::<PartialObjectMeta<Secret>>(
            crate::controller::scoped(kube, namespace),
            watcher::Config::default(),
            namespace,
            what_is_read,
            ctx.clone(),
            true,
        );
        let selector = format!("{MANAGED_BY_LABEL}={MANAGED_BY}");
        let (delivered, delivered_watch) = tracked::<Secret>(
            crate::controller::scoped(kube, namespace),
            watcher::Config::default().labels(&selector),
            namespace,
            keys_only,
            ctx.clone(),
            true,
        );
        let mut watches = self.watch_readable(ctx, namespace, Reader::Namespaced);
        self.all
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(all);
        self.delivered
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(delivered);
        watches.push((scoped(namespace), all_watch));
        watches.push((
            format!("{}(managed-by=aigw)", scoped(namespace)),
            delivered_watch,
        ));
        watches
    }

    /// The caches of the Connection secret namespace, where cluster-scoped resources read the
    /// Secrets labelled for them: their values cache, and the metadata cache of every Secret
    /// there unless [`Self::watch`] already covers the namespace. Returns their watches.
    pub fn watch_cluster_readable(
        &self,
        ctx: &Arc<crate::controller::Context>,
        namespace: &str,
    ) -> Vec<(String, Filling)> {
        let mut watches = self.watch_readable(ctx, Some(namespace), Reader::Cluster);
        if !self.covers(Some(namespace)) {
            let (all, all_watch) = tracked::<PartialObjectMeta<Secret>>(
                crate::controller::scoped(&ctx.kube, Some(namespace)),
                watcher::Config::default(),
                Some(namespace),
                what_is_read,
                ctx.clone(),
                true,
            );
            self.all
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .push(all);
            let name = crate::controller::stream_name("Secret", Some(namespace));
            watches.push((name, all_watch));
        }
        watches
    }

    /// The values cache of the Secrets `reader` reads in `namespace` (selected by its label).
    /// Its changes are not relayed: resources hear of a Secret's change from the metadata
    /// cache, and read the values at the version it shows.
    fn watch_readable(
        &self,
        ctx: &Arc<crate::controller::Context>,
        namespace: Option<&str>,
        reader: Reader,
    ) -> Vec<(String, Filling)> {
        let selector = format!("{}=true", reader.label());
        let (readable, watch) = tracked::<Secret>(
            crate::controller::scoped(&ctx.kube, namespace),
            watcher::Config::default().labels(&selector),
            namespace,
            |_| {},
            ctx.clone(),
            false,
        );
        self.readable
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push((reader, readable));
        let name = crate::controller::stream_name("Secret", namespace);
        vec![(format!("{name}({selector})"), watch)]
    }

    /// True when a cache of every Secret's metadata covers `namespace` (`None`: every one).
    pub fn covers(&self, namespace: Option<&str>) -> bool {
        let all = self.all.read().unwrap_or_else(|e| e.into_inner());
        all.iter().any(|c| {
            c.namespace.is_none() || (namespace.is_some() && c.namespace.as_deref() == namespace)
        })
    }

    /// Notes this process's write of the Secret `namespace/name`: `Some(version)` it produced,
    /// `None` when its outcome is unknown.
    pub fn wrote(&self, namespace: &str, name: &str, version: Option<&str>) {
        let written = match version.and_then(|v| v.parse().ok()) {
            Some(version) => Written::At(version),
            None => Written::Unknown,
        };
        self.written
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert((namespace.to_string(), name.to_string()), written);
    }

    /// The metadata of the Secret `namespace/name` (any Secret, labelled or not).
    pub async fn metadata(&self, namespace: &str, name: &str) -> Cached<PartialObjectMeta<Secret>> {
        let caches = self.all.read().unwrap_or_else(|e| e.into_inner()).clone();
        self.lookup(&caches, namespace, name).await
    }

    /// The Secret `namespace/name` if aigw delivered it (labelled managed-by=aigw), its values
    /// left out: only its keys.
    pub async fn delivered(&self, namespace: &str, name: &str) -> Cached<Secret> {
        let caches = self
            .delivered
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        self.lookup(&caches, namespace, name).await
    }

    /// Counts a read that went to the apiserver for `reason`.
    pub fn fell_back(&self, reason: &'static str) {
        *self
            .fallbacks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(reason)
            .or_default() += 1;
        let count = self
            .on_fallback
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(count) = count {
            count(reason);
        }
    }

    /// Fallbacks so far, by reason.
    pub fn fallbacks(&self) -> HashMap<&'static str, u64> {
        self.fallbacks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The Secret `namespace/name` with its values, for `reader`
    /// ([module docs](self)): from the values cache at the version the metadata cache shows,
    /// labelling it first for a namespaced reader if it is not yet. A Secret a cluster-scoped
    /// reader may not read (not labelled for it) comes back without its data, for the caller
    /// to refuse. What the caches cannot answer is read from the apiserver (counted).
    pub async fn values(
        &self,
        ctx: &crate::controller::Context,
        namespace: &str,
        name: &str,
        reader: Reader,
    ) -> Result<Option<Arc<Secret>>, kube::Error> {
        let reason = match self.metadata(namespace, name).await {
            Cached::Found(Some(meta)) => match self.in_values_cache(ctx, &meta, reader).await? {
                Ok(secret) => return Ok(Some(secret)),
                Err(reason) => reason,
            },
            Cached::Found(None) => "not_cached",
            Cached::Uncached(reason) => reason,
        };
        self.fell_back(reason);
        self.read_values(&ctx.kube, namespace, name).await
    }

    /// The values of the Secret `meta` describes from the values cache of `reader`, or why
    /// that cache cannot answer.
    async fn in_values_cache(
        &self,
        ctx: &crate::controller::Context,
        meta: &PartialObjectMeta<Secret>,
        reader: Reader,
    ) -> Result<Result<Arc<Secret>, &'static str>, kube::Error> {
        let namespace = meta.metadata.namespace.clone().unwrap_or_default();
        let name = meta.metadata.name.clone().unwrap_or_default();
        let Some(cache) = self.readable_cache(&namespace, reader) else {
            return Ok(Err("unwatched"));
        };
        let mut version = version_of(meta);
        let labelled = meta
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(reader.label()))
            .is_some_and(|v| v == "true");
        if !labelled {
            // The cache holds the label already when the metadata cache is behind it.
            let key = ObjectRef::<Secret>::new(&name).within(&namespace);
            if let Some(held) = cache.store.get(&key)
                && version_of(&*held) >= version
            {
                return Ok(Ok(held));
            }
            match reader {
                // Not one a cluster-scoped resource may read: its metadata, for the refusal.
                Reader::Cluster => {
                    let secret = Secret {
                        metadata: meta.metadata.clone(),
                        ..Default::default()
                    };
                    return Ok(Ok(Arc::new(secret)));
                }
                Reader::Namespaced => {
                    let Some(labelled) = self.label(ctx, &namespace, &name).await? else {
                        return Ok(Err("unlabelled"));
                    };
                    version = labelled;
                }
            }
        }
        Ok(held_at(&cache, &namespace, &name, version)
            .await
            .ok_or("values_behind"))
    }

    /// Labels the Secret `namespace/name` [`REFERENCED_LABEL`] (that label alone, whatever
    /// else changes), so its namespace's values cache holds it; returns the version written.
    /// `None` when this replica may not write (a dry run, not the leader).
    async fn label(
        &self,
        ctx: &crate::controller::Context,
        namespace: &str,
        name: &str,
    ) -> Result<Option<u64>, kube::Error> {
        // With --shards, a write for the Secret's namespace: the shard of the objects that
        // reference it (a write without an object is refused there).
        let shard = kube::api::ObjectMeta {
            namespace: Some(namespace.to_string()),
            ..Default::default()
        };
        if ctx.dry_run || ctx.leadership.for_object(&shard).may_write().is_err() {
            return Ok(None);
        }
        let patch = serde_json::json!({"metadata": {"labels": {REFERENCED_LABEL: "true"}}});
        let params = crate::controller::runtime::apiserver::written_by(LABELLER);
        let patched = Api::<PartialObjectMeta<Secret>>::namespaced(ctx.kube.clone(), namespace)
            .patch_metadata(name, &params, &Patch::Merge(&patch))
            .await;
        match patched {
            Ok(meta) => Ok(Some(version_of(&meta))),
            // Gone meanwhile: the apiserver says so.
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The values cache of `reader` covering `namespace`.
    fn readable_cache(&self, namespace: &str, reader: Reader) -> Option<Tracked<Secret>> {
        let caches = self.readable.read().unwrap_or_else(|e| e.into_inner());
        caches
            .iter()
            .filter(|(r, _)| *r == reader)
            .map(|(_, c)| c)
            .find(|c| c.covers(namespace))
            .cloned()
    }

    /// The Secret from the apiserver (a counted fallback).
    async fn read_values(
        &self,
        kube: &kube::Client,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Arc<Secret>>, kube::Error> {
        let secret = Api::<Secret>::namespaced(kube.clone(), namespace)
            .get_opt(name)
            .await?;
        Ok(secret.map(|mut secret| {
            secret.metadata.managed_fields = None;
            Arc::new(secret)
        }))
    }

    async fn lookup<K>(&self, caches: &[Tracked<K>], namespace: &str, name: &str) -> Cached<K>
    where
        K: Watchable,
    {
        let Some(cache) = caches.iter().find(|c| c.covers(namespace)) else {
            return Cached::Uncached("unwatched");
        };
        let listed = tokio::time::timeout(FIRST_LIST, cache.store.wait_until_ready()).await;
        if !matches!(listed, Ok(Ok(()))) {
            return Cached::Uncached("not_listed");
        }
        let key = (namespace.to_string(), name.to_string());
        let written = self
            .written
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .copied();
        match written {
            None => {}
            Some(Written::Unknown) => return Cached::Uncached("own_write_unknown"),
            Some(Written::At(version)) => {
                let mut applied = cache.applied.clone();
                let caught_up =
                    tokio::time::timeout(CATCH_UP, applied.wait_for(|a| *a >= version)).await;
                if !matches!(caught_up, Ok(Ok(_))) {
                    return Cached::Uncached("behind_own_write");
                }
                self.forget_if_applied(&key, version);
            }
        }
        Cached::Found(
            cache
                .store
                .get(&ObjectRef::<K>::new(name).within(namespace)),
        )
    }

    /// Forgets the write at `version` once every cache of its namespace has applied it.
    fn forget_if_applied(&self, key: &(String, String), version: u64) {
        let namespace = key.0.as_str();
        if applied(&self.all, namespace, version) && applied(&self.delivered, namespace, version) {
            let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
            if written.get(key) == Some(&Written::At(version)) {
                written.remove(key);
            }
        }
    }
}

/// True when every cache of `caches` that covers `namespace` has applied `version`.
fn applied<K>(caches: &RwLock<Vec<Tracked<K>>>, namespace: &str, version: u64) -> bool
where
    K: 'static + kube::Resource<DynamicType = ()>,
{
    caches
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|c| c.covers(namespace))
        .all(|c| *c.applied.borrow() >= version)
}

/// The Secret `namespace/name` from the values cache `cache` once it holds `version` or a
/// later one: waits (briefly) for the cache to apply that version; `None` when it did not,
/// or holds none that recent.
async fn held_at(
    cache: &Tracked<Secret>,
    namespace: &str,
    name: &str,
    version: u64,
) -> Option<Arc<Secret>> {
    let listed = tokio::time::timeout(FIRST_LIST, cache.store.wait_until_ready()).await;
    if !matches!(listed, Ok(Ok(()))) {
        return None;
    }
    let mut applied = cache.applied.clone();
    let caught_up = tokio::time::timeout(CATCH_UP, applied.wait_for(|a| *a >= version)).await;
    if !matches!(caught_up, Ok(Ok(_))) {
        return None;
    }
    cache
        .store
        .get(&ObjectRef::<Secret>::new(name).within(namespace))
        .filter(|s| version_of(&**s) >= version)
}

/// A Secret's metadata as the cache of every Secret keeps it: the annotations only of a Secret
/// labelled as aigw's (the owner uid and rotation id a delivery stamped); any other Secret is
/// never aigw's to write whatever it is annotated with, and only its existence, labels and
/// resourceVersion are read. A namespace's Helm releases and kubectl-applied Secrets then cost
/// the cache little.
fn what_is_read(meta: &mut PartialObjectMeta<Secret>) {
    let ours = meta
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(MANAGED_BY_LABEL))
        .is_some_and(|v| v == MANAGED_BY);
    if !ours {
        meta.metadata.annotations = None;
    } else if let Some(annotations) = meta.metadata.annotations.as_mut() {
        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
}

/// A delivered Secret as the cache keeps it: its keys, each with an empty value, and no
/// managedFields. aigw never reads a delivered value back (it is one-time and was handed over
/// when written), and a cache holding none cannot leak one.
fn keys_only(secret: &mut Secret) {
    if let Some(data) = secret.data.as_mut() {
        for value in data.values_mut() {
            *value = ByteString(Vec::new());
        }
    }
    secret.string_data = None;
}

/// The resourceVersion of `object` as a number (etcd's revision); 0 when it is not one, which
/// never satisfies a wait (the read then goes to the apiserver).
fn version_of<K: kube::Resource>(object: &K) -> u64 {
    object
        .meta()
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// A reflector over `api` whose applied high-water mark is tracked: raised by each event once
/// the store applied it, and by a (re)list only once the list is complete (the store swaps
/// the listed objects in at its end).
fn tracked<K: Watchable>(
    api: Api<K>,
    config: watcher::Config,
    namespace: Option<&str>,
    prepare: fn(&mut K),
    ctx: Arc<crate::controller::Context>,
    relay: bool,
) -> (Tracked<K>, Filling) {
    let (reader, writer) = reflector::store();
    let (applied_tx, applied) = watch::channel(0u64);
    let mut listed = 0u64;
    let mut relayed = Relayed::<K>::default();
    let raise = move |tx: &watch::Sender<u64>, to: u64| {
        tx.send_if_modified(|a| {
            let raised = to > *a;
            if raised {
                *a = to;
            }
            raised
        });
    };
    let objects = ctx
        .lists
        .queued(watcher(api, config))
        .default_backoff()
        .modify(move |object| {
            object.meta_mut().managed_fields = None;
            prepare(object);
        });
    let filling = reflector::reflector(writer, objects)
        .map(move |event| {
            let event = event?;
            match &event {
                watcher::Event::Apply(o) | watcher::Event::Delete(o) => {
                    raise(&applied_tx, version_of(o));
                }
                watcher::Event::Init => listed = 0,
                watcher::Event::InitApply(o) => listed = listed.max(version_of(o)),
                watcher::Event::InitDone => raise(&applied_tx, listed),
            }
            if relay {
                relayed.stored(&ctx.relay, &event);
            }
            Ok(match event {
                watcher::Event::InitDone => watcher::Event::InitDone,
                _ => watcher::Event::Init,
            })
        })
        .boxed();
    let tracked = Tracked {
        namespace: namespace.map(str::to_string),
        store: reader,
        applied,
    };
    (tracked, filling)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(namespace: &str, name: &str, version: u64) -> Secret {
        let mut secret = Secret::default();
        secret.metadata.namespace = Some(namespace.into());
        secret.metadata.name = Some(name.into());
        secret.metadata.resource_version = Some(version.to_string());
        secret.data = Some([("client_auth".to_string(), ByteString(b"s3cr3t".to_vec()))].into());
        secret
    }

    /// A cache filled by hand: its writer, and the sender of its high-water mark.
    fn cache(
        namespace: &str,
    ) -> (
        Tracked<Secret>,
        reflector::store::Writer<Secret>,
        watch::Sender<u64>,
    ) {
        let (reader, writer) = reflector::store();
        let (tx, applied) = watch::channel(0);
        let tracked = Tracked {
            namespace: Some(namespace.into()),
            store: reader,
            applied,
        };
        (tracked, writer, tx)
    }

    #[tokio::test]
    async fn a_read_after_an_own_write_waits_for_the_cache_or_falls_back() {
        let cache_of = SecretCache::default();
        let (tracked, mut writer, applied) = cache("ns");
        cache_of.delivered.write().unwrap().push(tracked.clone());
        writer.apply_watcher_event(&watcher::Event::Init);
        writer.apply_watcher_event(&watcher::Event::InitDone);
        // Nothing written by this process: the cache answers, even "no such Secret".
        assert!(matches!(
            cache_of.delivered("ns", "creds").await,
            Cached::Found(None)
        ));
        // Written at 7, the cache still before it: the read waits, then falls back.
        cache_of.wrote("ns", "creds", Some("7"));
        let started = tokio::time::Instant::now();
        assert!(matches!(
            cache_of.delivered("ns", "creds").await,
            Cached::Uncached("behind_own_write")
        ));
        assert!(started.elapsed() >= CATCH_UP);
        // Once the cache applied version 7, it answers with what it holds.
        writer.apply_watcher_event(&watcher::Event::Apply(secret("ns", "creds", 7)));
        applied.send_replace(7);
        match cache_of.delivered("ns", "creds").await {
            Cached::Found(Some(s)) => assert_eq!(s.metadata.resource_version.as_deref(), Some("7")),
            _ => panic!("the cache holds version 7"),
        }
        // A write whose outcome is unknown: the next read goes to the apiserver at once.
        cache_of.wrote("ns", "creds", None);
        assert!(matches!(
            cache_of.delivered("ns", "creds").await,
            Cached::Uncached("own_write_unknown")
        ));
        // Another namespace is no cache's.
        assert!(matches!(
            cache_of.delivered("other", "creds").await,
            Cached::Uncached("unwatched")
        ));
    }

    #[tokio::test]
    async fn a_read_waiting_for_an_own_write_answers_as_soon_as_the_cache_applies_it() {
        let cache_of = SecretCache::default();
        let (tracked, mut writer, applied) = cache("ns");
        cache_of.delivered.write().unwrap().push(tracked);
        writer.apply_watcher_event(&watcher::Event::Init);
        writer.apply_watcher_event(&watcher::Event::InitDone);
        cache_of.wrote("ns", "creds", Some("9"));
        let later = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            writer.apply_watcher_event(&watcher::Event::Apply(secret("ns", "creds", 9)));
            applied.send_replace(9);
            writer
        });
        let started = tokio::time::Instant::now();
        assert!(matches!(
            cache_of.delivered("ns", "creds").await,
            Cached::Found(Some(_))
        ));
        assert!(started.elapsed() < CATCH_UP);
        let _writer = later.await.unwrap();
    }

    #[test]
    fn only_the_annotations_of_aigws_secrets_are_cached() {
        let meta = |labels: Option<&str>| {
            let mut meta = PartialObjectMeta::<Secret>::default();
            meta.metadata.labels =
                labels.map(|v| [(MANAGED_BY_LABEL.to_string(), v.to_string())].into());
            meta.metadata.annotations = Some(
                [
                    ("aigw.io/owner-uid".to_string(), "u1".to_string()),
                    (
                        "kubectl.kubernetes.io/last-applied-configuration".to_string(),
                        "{}".to_string(),
                    ),
                ]
                .into(),
            );
            meta
        };
        let mut ours = meta(Some(MANAGED_BY));
        what_is_read(&mut ours);
        let kept = ours.metadata.annotations.unwrap();
        assert_eq!(kept.keys().collect::<Vec<_>>(), vec!["aigw.io/owner-uid"]);
        for mut other in [meta(None), meta(Some("helm"))] {
            what_is_read(&mut other);
            assert!(other.metadata.annotations.is_none());
        }
    }

    #[test]
    fn a_delivered_secret_is_cached_with_its_keys_and_no_value() {
        let mut s = secret("ns", "creds", 3);
        keys_only(&mut s);
        let data = s.data.unwrap();
        assert!(data.contains_key("client_auth"));
        assert!(data.values().all(|v| v.0.is_empty()));
    }
}
