//! The operator's process wiring: the watch caches, one controller per kind (and namespace)
//! from [`crate::registry::KINDS`], the drift passes, leadership's gauge and the startup check.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde::{Serialize, de::DeserializeOwned};
use tracing::{debug, error, info, warn};

use super::driver::{self, Managed, drift, status};
use super::kinds::{config_rollout, connection};
use super::runtime::changes;
use super::runtime::lists::Lists;
use super::runtime::shard_cache;
use super::runtime::shards::Shards;
use super::runtime::{health, unreadable};
use super::state::claim_guard::ClaimMode;
use super::state::connection_reach::ConnectionReach;
use super::state::triggers::Triggers;
use super::state::{followers, relay};
use super::{Context, Settings};
use crate::resources::readable::{Readable, Unreadable, readable_api};

/// Fails with an install hint when a CRD aigw needs is not served by the cluster. It reads the
/// CRDs by name instead of listing the kinds cluster-wide, so an operator whose RBAC covers only
/// its watched namespaces (the chart with `watchNamespaces`) passes it.
pub async fn check_crds_installed(kube: &kube::Client) -> Result<(), String> {
    let crds: Api<CustomResourceDefinition> = Api::all(kube.clone());
    // The CRDs this build generates: a new kind is checked without an edit here.
    for (_, wanted) in crate::resources::crds() {
        let name = wanted.metadata.name.clone().unwrap_or_default();
        let version = wanted
            .spec
            .versions
            .first()
            .map(|v| v.name.clone())
            .unwrap_or_default();
        let crd = crds
            .get_opt(&name)
            .await
            .map_err(|e| format!("failed to check the CRD {name}: {e}"))?;
        let served = crd.is_some_and(|crd| {
            crd.spec
                .versions
                .iter()
                .any(|v| v.served && v.name == version)
        });
        if !served {
            return Err(format!(
                "the CRD {name} is not installed (or does not serve {version}); install the CRDs with `aigw crds | kubectl apply --server-side -f -` (or `kubectl apply -f crds/`)"
            ));
        }
    }
    Ok(())
}

pub(crate) fn scoped<K>(kube: &kube::Client, namespace: Option<&str>) -> Api<K>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    match namespace {
        Some(ns) => Api::namespaced(kube.clone(), ns),
        None => Api::all(kube.clone()),
    }
}

/// What a watch can fill a reflector store with.
pub trait Watchable: kube::Resource<DynamicType = ()> + Document + Send + Sync + 'static {}
impl<K: kube::Resource<DynamicType = ()> + Document + Send + Sync + 'static> Watchable for K {}

/// A document read and written whole: decoded, encoded, copied and printed.
pub trait Document: Clone + Serialize + DeserializeOwned + std::fmt::Debug {}
impl<T: Clone + Serialize + DeserializeOwned + std::fmt::Debug> Document for T {}

/// A reflector over the objects of kind `K` in `namespace` whose every item is reported to
/// `probe`, as a controller trigger (a change to the spec, annotations, finalizers or deletion;
/// a claim naming `installation` reads as none, see [`worth_reconciling`]). `prepare` makes each object what reconciles read
/// ([`driver::Managed::prepare`]); `on_event` sees every watch event before the store does (the
/// claim index), `on_stored` right after (what reads the store on hearing of it: the followers
/// of a source).
///
/// Objects are decoded one by one ([`Readable`]): one that does not decode goes to
/// `on_unreadable` and stays out of the cache, and the rest of the kind is listed and watched
/// as usual. The watch backs off after errors (kube-runtime's default: 800 ms doubling to 30 s,
/// reset after 120 s of health) instead of retrying at once.
#[allow(clippy::too_many_arguments)]
fn watched<K: Watchable>(
    kube: &kube::Client,
    namespace: Option<&str>,
    config: watcher::Config,
    lists: Lists,
    probe: health::WatchProbe,
    prepare: fn(&mut K),
    on_event: impl Fn(&watcher::Event<K>) + Send + Sync + 'static,
    on_stored: impl Fn(&watcher::Event<K>) + Send + 'static,
    on_unreadable: impl Fn(&Unreadable) + Send + Sync + 'static,
    on_panic: impl Fn() + Send + Sync + 'static,
    installation: String,
    share: Option<Share<K>>,
) -> (
    Store<K>,
    impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static,
) {
    let (reader, writer) = reflector::store();
    let (on_event, on_unreadable) = (Arc::new(on_event), Arc::new(on_unreadable));
    let on_panic = Arc::new(on_panic);
    let unindex = share.as_ref().map(|share| share.unindex.clone());
    let scope = namespace.map(str::to_string);
    let (kube, namespace, cache) = (kube.clone(), scope.clone(), reader.clone());
    // Paged initial lists (500 objects a page): a list served whole from the watch cache (the
    // "any" semantic ignores the page size) put every object in one response, which at 10,000
    // objects was the largest allocation of the process.
    let start = move || {
        let (cache, on_event, on_unreadable, on_panic, unindex) = (
            cache.clone(),
            on_event.clone(),
            on_unreadable.clone(),
            on_panic.clone(),
            unindex.clone(),
        );
        let api = readable_api::<K>(&kube, namespace.as_deref());
        lists
            .queued(watcher(api, config.clone()))
            .default_backoff()
            .filter_map(move |event| {
                let unindex = unindex.as_deref();
                let reactions = Reactions {
                    report: &*on_unreadable,
                    on_event: &*on_event,
                    on_panic: &*on_panic,
                };
                futures::future::ready(into_cache(event, &cache, unindex, prepare, reactions))
            })
            .boxed()
    };
    // With --shards, what the cache keeps is this replica's share ([`shard_cache`]).
    let (objects, listed) = match share {
        Some(Share {
            shards, skipped, ..
        }) => {
            let (objects, listed) =
                shard_cache::filtered(shards, scope.as_deref(), reader.clone(), start, skipped);
            (objects, Some(listed))
        }
        None => (start(), None),
    };
    let stored = reflector::reflector(writer, objects).inspect(move |item| {
        probe.observe(item);
        if let Ok(event) = item {
            if let Some(listed) = &listed {
                listed.stored(event);
            }
            on_stored(event);
        }
    });
    let stored = changes::stored_objects(stored, reader.clone());
    let stream = changes::changed(stored, move |object: &K| {
        worth_reconciling(object, &installation)
    });
    (reader, stream)
}

/// With `--shards`: the share a namespaced kind's cache keeps, and who hears the events of the
/// objects it leaves out.
pub struct Share<K> {
    shards: Shards,
    skipped: shard_cache::Skipped<K>,
    /// Drops the claim of an object that no longer decodes and that the cache does not hold
    /// (another share's): no copy goes from the cache, so no removal reaches the claim index.
    unindex: Arc<dyn Fn(&str) + Send + Sync>,
}

/// Makes `object`, as a watch delivered it, the copy the cache keeps: without managedFields or
/// kubectl's copy of the last applied manifest (most of a cached object, never read by aigw),
/// and with the create intent annotation read by `prepare` into the status reconciles read
/// (kept, it would cost every cached object its text and a tree node for the map).
pub fn as_cached<K: kube::Resource>(object: &mut K, prepare: fn(&mut K)) {
    object.meta_mut().managed_fields = None;
    prepare(object);
    let meta = object.meta_mut();
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
        annotations.remove(crate::resources::common::CREATE_INTENT_ANNOTATION);
        if annotations.is_empty() {
            meta.annotations = None;
        }
    }
}

/// What a watch does besides caching: report an object it leaves out, tell the claim index of
/// each event, count a panic of its own (a bug) as the kind's.
struct Reactions<'a, K> {
    report: &'a dyn Fn(&Unreadable),
    on_event: &'a dyn Fn(&watcher::Event<K>),
    on_panic: &'a dyn Fn(),
}

/// What the cache of `K` takes for a watch event of [`Readable<K>`] (see [`readable_event`] and
/// [`taken`]): an object that does not decode, or whose taking panics, is reported and left out.
fn into_cache<K: Watchable>(
    event: Result<watcher::Event<Readable<K>>, watcher::Error>,
    cache: &Store<K>,
    unindex: Option<&(dyn Fn(&str) + Send + Sync)>,
    prepare: fn(&mut K),
    reactions: Reactions<'_, K>,
) -> Option<Result<watcher::Event<K>, watcher::Error>> {
    let Reactions {
        report,
        on_event,
        on_panic,
    } = reactions;
    match readable_event(event, cache, &report, unindex)? {
        Ok(event) => match taken(event, prepare, on_event, on_panic) {
            Ok(event) => Some(Ok(event)),
            Err(left) => {
                report(&left.unreadable);
                // In a list, as for an object that does not decode, nothing is removed.
                let removal =
                    left_out(&left.unreadable, cache, unindex).filter(|_| !left.listed)?;
                // The claim index and the object's bookkeeping hear of the removal as of any.
                heard(&removal, on_event, on_panic);
                Some(Ok(removal))
            }
        },
        Err(error) => Some(Err(error)),
    }
}

/// `event` made what the cache takes: each object as the cache keeps it ([`as_cached`]), then
/// seen by `on_event` (the claim index). A panic on the way (a bug, which an object's content may
/// trip) is kept to the object: it comes back as [`Unreadable`], which the watch reports and
/// leaves out of the cache as it does an object that does not decode, so neither a copy half
/// made (its create intent not yet read into its status) is reconciled, nor does the watch end
/// and stop the kind for every namespace. A deletion goes on to the cache all the same.
fn taken<K: Watchable>(
    event: watcher::Event<K>,
    prepare: fn(&mut K),
    on_event: &dyn Fn(&watcher::Event<K>),
    on_panic: &dyn Fn(),
) -> Result<watcher::Event<K>, Box<LeftOut>> {
    use watcher::Event;
    let mut event = event;
    let take = std::panic::AssertUnwindSafe(|| {
        if let Event::Apply(object) | Event::InitApply(object) | Event::Delete(object) = &mut event
        {
            as_cached(object, prepare);
        }
        on_event(&event);
    });
    match std::panic::catch_unwind(take) {
        Ok(()) => Ok(event),
        Err(_) => {
            on_panic();
            // The start or the end of a list carries no object: it goes on to the cache.
            let (Event::Apply(object) | Event::InitApply(object) | Event::Delete(object)) = &event
            else {
                error!(kind = %K::kind(&()), "the claim index panicked on a list's start or end (a bug); the watch goes on");
                return Ok(event);
            };
            let name = kube::ResourceExt::name_any(object);
            if let Event::Delete(_) = &event {
                // A deletion goes on to the cache whatever its taking did, and the claim index
                // hears of it (again), so no claim outlives the object.
                error!(kind = %K::kind(&()), object = %name, "taking a deletion into the watch cache panicked (a bug); the object is removed all the same");
                heard(&event, on_event, on_panic);
                return Ok(event);
            }
            error!(kind = %K::kind(&()), object = %name, "taking an object into the watch cache panicked (a bug): it is left out as unreadable; the rest of the kind goes on");
            let meta = object.meta();
            let identity = kube::api::ObjectMeta {
                name: meta.name.clone(),
                namespace: meta.namespace.clone(),
                uid: meta.uid.clone(),
                resource_version: meta.resource_version.clone(),
                annotations: meta.annotations.clone(),
                ..Default::default()
            };
            // Its text, for what reads a part of it (the installation its status records,
            // which decides whether this installation reports it at all).
            let text = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                serde_json::to_string(object).unwrap_or_default()
            }));
            let unreadable = Unreadable::panicked(identity, &text.unwrap_or_default());
            let listed = matches!(event, Event::InitApply(_));
            Err(Box::new(LeftOut { unreadable, listed }))
        }
    }
}

/// `on_event` told of a removal whatever happened before it, its own panic counted.
fn heard<K>(
    removal: &watcher::Event<K>,
    on_event: &dyn Fn(&watcher::Event<K>),
    on_panic: &dyn Fn(),
) {
    let tell = std::panic::AssertUnwindSafe(|| on_event(removal));
    if std::panic::catch_unwind(tell).is_err() {
        on_panic();
    }
}

/// An object [`taken`] leaves out of the cache.
struct LeftOut {
    unreadable: Unreadable,
    /// It came in a list (`InitApply`).
    listed: bool,
}

/// The event the cache of `K` takes for a watch event of [`Readable<K>`]. An object that does
/// not decode is reported and kept out of the cache: a copy read before it changed is removed
/// (as a relist would leave it out), so nothing reconciles a spec that is no longer the
/// object's. Its deletion removes that copy too, and needs no report.
fn readable_event<K: Watchable>(
    event: Result<watcher::Event<Readable<K>>, watcher::Error>,
    cache: &Store<K>,
    report: &impl Fn(&Unreadable),
    unindex: Option<&(dyn Fn(&str) + Send + Sync)>,
) -> Option<Result<watcher::Event<K>, watcher::Error>> {
    use watcher::Event;
    let cached = |unreadable: &Unreadable| left_out(unreadable, cache, unindex);
    let event = match event {
        Err(error) => return Some(Err(error)),
        Ok(event) => event,
    };
    let mapped = match event {
        Event::Init => Event::Init,
        Event::InitDone => Event::InitDone,
        Event::InitApply(Readable::Object(object)) => Event::InitApply(object),
        Event::Apply(Readable::Object(object)) => Event::Apply(object),
        Event::Delete(Readable::Object(object)) => Event::Delete(object),
        Event::InitApply(Readable::Unreadable(unreadable)) => {
            report(&unreadable);
            return None;
        }
        Event::Apply(Readable::Unreadable(unreadable)) => {
            report(&unreadable);
            cached(&unreadable)?
        }
        Event::Delete(Readable::Unreadable(unreadable)) => cached(&unreadable)?,
    };
    Some(Ok(mapped))
}

/// What the cache takes for `unreadable`, which it keeps out: the removal of a copy read before
/// (as a relist would leave it out), so nothing reconciles a spec that is no longer the object's.
/// Without a copy, its claim is dropped from the index (`unindex`, with `--shards`).
fn left_out<K: Watchable>(
    unreadable: &Unreadable,
    cache: &Store<K>,
    unindex: Option<&(dyn Fn(&str) + Send + Sync)>,
) -> Option<watcher::Event<K>> {
    let mut key = ObjectRef::<K>::new(unreadable.meta.name.as_deref()?);
    if let Some(namespace) = &unreadable.meta.namespace {
        key = key.within(namespace);
    }
    let copy = cache.get(&key);
    if copy.is_none()
        && let Some(unindex) = unindex
    {
        unindex(unreadable.meta.uid.as_deref().unwrap_or_default());
    }
    copy.map(|object| watcher::Event::Delete(K::clone(&object)))
}

/// The annotation `kubectl apply` keeps the whole last applied manifest in.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// What of an object can ask for work: its spec (generation), annotations (pause, revision),
/// finalizers and deletion. What aigw itself writes is not: its status, its create intent
/// annotation and its finalizer (written together before a POST, by the reconcile that goes on
/// to finish the create). They still update the cache, but start no other reconcile.
fn worth_reconciling<K: kube::Resource>(object: &K, installation: &str) -> u64 {
    use crate::controller::state::installation::ANNOTATION;
    use crate::resources::common::{CREATE_INTENT_ANNOTATION, FINALIZER};
    use std::hash::{Hash, Hasher};
    let meta = object.meta();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    let annotations = meta.annotations.iter().flatten();
    // A claim naming this installation reads as none: the one its own first metadata write
    // adds wakes nothing, while a claim rewritten to another installation, or restored, does.
    let others = annotations.filter(|(key, value)| {
        *key != CREATE_INTENT_ANNOTATION && !(*key == ANNOTATION && *value == installation)
    });
    let finalizers = meta.finalizers.iter().flatten();
    // Every installation's aigw finalizer (`aigw.io/finalizer`, `aigw.io/finalizer.<id>`).
    let others_finalizers = finalizers.filter(|f| !f.starts_with(FINALIZER));
    (
        meta.generation,
        others.collect::<Vec<_>>(),
        others_finalizers.collect::<Vec<_>>(),
        meta.deletion_timestamp.as_ref().map(|t| t.0.as_second()),
    )
        .hash(&mut hasher);
    hasher.finish()
}

/// The name a watch stream reports its health under, e.g. `Config/ns1` or `Connection/*`.
pub(crate) fn stream_name(kind: &str, namespace: Option<&str>) -> String {
    format!("{kind}/{}", namespace.unwrap_or("*"))
}

/// Adds a kind's own triggers to its controller (the Config kind watches the Secrets it reads).
pub type ExtraTriggers<K> = for<'a> fn(Triggers<'a, K>) -> Triggers<'a, K>;

/// What a kind's controller adds to the shared setup.
#[derive(Clone)]
struct KindSetup<K: Managed> {
    /// Watch the credentials Secrets aigw writes (Deployments).
    with_secrets: bool,
    extra: Option<ExtraTriggers<K>>,
    /// The kind's one drift pass, whose reads this namespace's controller takes.
    drift: Option<drift::Reads<K>>,
}

/// The setup of a kind whose drift is found by listing: its one drift pass goes to `passes`.
fn listed_kind<K: drift::Listed>(
    ctx: &Arc<Context>,
    passes: &mut Vec<futures::future::BoxFuture<'static, ()>>,
    extra: Option<ExtraTriggers<K>>,
) -> KindSetup<K> {
    let (reads, pass) = drift::pass_of::<K>(ctx.clone());
    passes.push(pass);
    KindSetup {
        with_secrets: false,
        extra,
        drift: Some(reads),
    }
}

/// The reconciles of one kind running at once, over all its controllers (one per watched
/// namespace): `--concurrency` is per kind. `None`: any number (`--concurrency 0`).
type Slots = Option<Arc<tokio::sync::Semaphore>>;

/// `reconcile`, each run in its object's turn ([`in_turn`]); an object gone by then waits for its
/// next change.
fn taking_turns<K, E, R>(
    slots: Slots,
    store: Store<K>,
    reconcile: fn(Arc<K>, Arc<Context>) -> R,
) -> impl FnMut(Arc<K>, Arc<Context>) -> futures::future::BoxFuture<'static, Result<Action, E>>
where
    K: kube::Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
    R: Future<Output = Result<Action, E>> + Send + 'static,
    E: Send + 'static,
{
    move |object, ctx| {
        let (slots, store) = (slots.clone(), store.clone());
        Box::pin(async move {
            match in_turn(slots, &store, object).await {
                Some((_slot, object)) => {
                    let reference = ObjectRef::from_obj(&*object).erase();
                    let metrics = ctx.metrics.clone();
                    contained(reference, &metrics, reconcile(object, ctx)).await
                }
                None => Ok(Action::await_change()),
            }
        })
    }
}

/// How long an object whose reconcile panicked waits before it is reconciled again.
const AFTER_PANIC: std::time::Duration = std::time::Duration::from_secs(300);

/// `reconcile`, a panic in it kept to its one object. kube-runtime runs each reconcile in a task
/// and resumes its panic in the controller's stream, which ends the controller of that kind for
/// every namespace the process serves: one tenant's object that trips a bug would stop every
/// other tenant's. Here the panic is logged with the object it was for (the runtime's panic
/// hook has printed where it happened), and the object is reconciled again in
/// [`AFTER_PANIC`] and counted (`aigw_reconciles_total{result="panic"}`); the others go on.
async fn contained<E>(
    object: ObjectRef<kube::core::DynamicObject>,
    metrics: &super::runtime::metrics::Metrics,
    reconcile: impl Future<Output = Result<Action, E>>,
) -> Result<Action, E> {
    use futures::FutureExt;
    match std::panic::AssertUnwindSafe(reconcile).catch_unwind().await {
        Ok(result) => result,
        Err(_) => {
            metrics.reconcile_panicked(&object.dyntype.kind);
            let again = humantime::format_duration(AFTER_PANIC);
            error!(%object, "the reconcile panicked (a bug): this object is reconciled again in {again}; the others go on");
            Ok(Action::requeue(AFTER_PANIC))
        }
    }
}

/// `object`'s turn: a slot of its kind's (held for the reconcile), then its copy as the cache
/// has it now. kube hands the reconcile the copy of when it was scheduled, and a reconcile may
/// wait for a slot behind the other namespaces' (96 of a kind at 24 namespaces): an object
/// edited meanwhile is reconciled as it is now, and one gone from the cache (deleted, or out of
/// this replica's share) is not reconciled (`None`).
async fn in_turn<K: kube::Resource + Clone + 'static>(
    slots: Slots,
    store: &Store<K>,
    object: Arc<K>,
) -> Option<(Option<tokio::sync::OwnedSemaphorePermit>, Arc<K>)>
where
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let slot = match slots {
        Some(slots) => Some(slots.acquire_owned().await.ok()?),
        None => None,
    };
    let now = store.get(&ObjectRef::from_obj(&*object))?;
    Some((slot, now))
}

fn spawn_kind<K: Managed>(
    ctx: &Arc<Context>,
    namespace: &Option<String>,
    concurrency: u16,
    slots: &Slots,
    setup: &KindSetup<K>,
) -> tokio::task::JoinHandle<()> {
    let controller = run_kind::<K>(
        ctx.clone(),
        namespace.clone(),
        concurrency,
        slots.clone(),
        setup.clone(),
    );
    tokio::spawn(kept_to_its_kind(K::KIND, ctx.metrics.clone(), controller))
}

async fn run_kind<K: Managed>(
    ctx: Arc<Context>,
    namespace: Option<String>,
    concurrency: u16,
    slots: Slots,
    setup: KindSetup<K>,
) {
    let KindSetup {
        with_secrets,
        extra,
        drift,
    } = setup;
    let ns = namespace.as_deref();
    let probe = ctx.health.register(stream_name(K::KIND, ns));
    let stream = Arc::new(std::sync::OnceLock::new());
    let index = {
        let (ctx, stream) = (ctx.clone(), stream.clone());
        move |event: &watcher::Event<K>| {
            if let Some(n) = stream.get() {
                K::stores(&ctx.stores).index_event_as(&ctx.installation, *n, event);
            }
            // Whatever way an object went (finalizer done or removed by hand), its drift
            // bookkeeping and its backoff go with it.
            if let watcher::Event::Delete(object) = event {
                let key = driver::object_key(object);
                ctx.drift.forget(&key);
                ctx.backoff.reset(&key);
                ctx.secret_values.forget(&key);
            }
        }
    };
    // The follower index's view of this watch, shared with the share's skipped objects.
    let listing = Arc::new(std::sync::Mutex::new(followers::Listing::new(
        namespace.clone().filter(|_| K::NAMESPACED),
    )));
    let stored = {
        let (ctx, listing) = (ctx.clone(), listing.clone());
        let relayed = std::sync::Mutex::new(relay::Relayed::default());
        move |event: &watcher::Event<K>| {
            relay::kept_to_the_change(K::KIND, &ctx.metrics, || {
                let mut listing = listing.lock().unwrap_or_else(|e| e.into_inner());
                ctx.followers.observe(&mut listing, event)
            });
            relayed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .stored(&ctx.relay, event);
            // The cache now holds this process's last write of the object: nothing of it needs
            // remembering any more (at 10,000 creates, one status copy each).
            if let watcher::Event::Apply(object) | watcher::Event::InitApply(object) = event {
                ctx.drift.stored(
                    &driver::object_key(object),
                    object.meta().resource_version.clone(),
                );
            }
        }
    };
    let unreadable = unreadable::reporter::<K>(&ctx);
    // With --shards, a namespaced kind's cache keeps this replica's share; what it leaves out
    // still wakes the followers of a promotion source here.
    let share = match (K::NAMESPACED, ctx.leadership.shards()) {
        (true, Some(shards)) => Some(Share {
            shards: shards.clone(),
            skipped: Box::new({
                let ctx = ctx.clone();
                move |event: &watcher::Event<K>| {
                    relay::kept_to_the_change(K::KIND, &ctx.metrics, || {
                        let mut listing = listing.lock().unwrap_or_else(|e| e.into_inner());
                        ctx.followers.observe(&mut listing, event)
                    })
                }
            }),
            unindex: Arc::new({
                let ctx = ctx.clone();
                move |uid: &str| K::stores(&ctx.stores).unindex(uid)
            }),
        }),
        _ => None,
    };
    let stores = K::stores(&ctx.stores);
    if let Some(share) = &share {
        stores.keep_share(share.shards.clone());
    }
    let (store, objects) = watched(
        &ctx.kube,
        ns,
        ctx.watch_config::<K>(),
        ctx.lists.clone(),
        probe,
        K::prepare,
        index,
        stored,
        unreadable,
        {
            let metrics = ctx.metrics.clone();
            move || metrics.reconcile_panicked(K::KIND)
        },
        ctx.installation.id().to_string(),
        share,
    );
    let _ = stream.set(stores.register(store.clone()));
    let mut controller = Controller::for_stream(objects, store.clone())
        .with_config(ControllerConfig::default().concurrency(concurrency))
        .reconcile_all_on(ctx.leadership.acquired())
        .reconcile_on(claimed_by_annotation_only(&ctx, store.clone()))
        .reconcile_on(users_of_changed_connections(
            &ctx,
            store.clone(),
            K::connection_name,
        ))
        .reconcile_on(
            ctx.followers
                .requeues::<K>(namespace.clone(), store.clone()),
        );
    if with_secrets {
        // Deleting a credentials Secret must be noticed at once, not at the next drift check:
        // each change of a Secret aigw delivered, heard once the delivered-Secrets cache (which
        // the reconcile reads) holds it, wakes the resource that owns it.
        let secrets = ctx.relay.subscribe::<Secret>(namespace.clone());
        let owner = |secret: Arc<Secret>| {
            let namespace = secret.metadata.namespace.clone().unwrap_or_default();
            secret
                .metadata
                .owner_references
                .iter()
                .flatten()
                .filter(|o| o.controller == Some(true) && o.kind == K::KIND)
                .filter(|o| o.api_version.starts_with("aigw.io/"))
                .map(|o| ObjectRef::<K>::new(&o.name).within(&namespace))
                .collect()
        };
        let owner = relay::contained(ctx.metrics.clone(), owner);
        controller = controller.watches_shared_stream(secrets, owner);
    }
    if let Some(reads) = &drift {
        controller = controller.reconcile_on(drift::reads_for(reads, namespace.clone()));
    }
    let latest = store.clone();
    let mut triggers = Triggers::new(controller, &ctx, ns, store);
    if K::NAMESPACED {
        // An object waiting for the Workspace its `spec.workspaceRef` names acts once it can.
        triggers = driver::reach::requeue_referrers(triggers);
    }
    if let Some(extra) = extra {
        triggers = extra(triggers);
    }
    let controller = triggers.controller().shutdown_on_signal().run(
        taking_turns(slots, latest, driver::reconcile::<K>),
        driver::error_policy::<K>,
        ctx,
    );
    drained(K::KIND, controller).await;
}

/// Runs a controller of `kind` to its end, logging what its stream reports
/// ([`controller_error`]).
async fn drained<T, E, Q>(
    kind: &str,
    results: impl futures::Stream<Item = Result<T, kube::runtime::controller::Error<E, Q>>>,
) where
    E: std::error::Error + 'static,
    Q: std::error::Error + 'static,
{
    let logged = |result: Result<T, _>| {
        if let Err(e) = result {
            controller_error(kind, &e);
        }
        futures::future::ready(())
    };
    results.for_each(logged).await;
}

/// Logs what a controller's stream reports. A failed reconcile was logged by the kind's
/// `error_policy` with its Secret values concealed: here only which object it was, since the
/// error's text (an API's answer, which may echo a value) is not concealed on this path.
fn controller_error<E, Q>(kind: &str, error: &kube::runtime::controller::Error<E, Q>)
where
    E: std::error::Error + 'static,
    Q: std::error::Error + 'static,
{
    use kube::runtime::controller::Error as Failed;
    match error {
        Failed::ReconcilerFailed(_, object) => {
            debug!(kind, object = %object, "reconcile failed (logged by its error policy)");
        }
        other => {
            let error = status::sanitize_message(&other.to_string());
            warn!(kind, %error, "controller error");
        }
    }
}

/// The objects of `store` claimed for this installation by their annotation alone (no
/// `status.installation` yet), each time the claim guard goes out of force
/// ([`claim_guard::Guard::lost`]): their reconcile records them in status, so that a tenant can
/// no more move them once their annotation is unguarded than before.
fn claimed_by_annotation_only<K: Managed>(
    ctx: &Context,
    store: Store<K>,
) -> impl futures::Stream<Item = ObjectRef<K>> + Send + 'static {
    use crate::controller::state::installation::Claim;
    let installation = ctx.installation.clone();
    let metrics = ctx.metrics.clone();
    ctx.installation.guard().lost().flat_map(move |()| {
        let unrecorded = relay::caught(K::KIND, &metrics, relay::MAPPING_PANICKED, || {
            store
                .state()
                .iter()
                .filter(|o| {
                    o.recorded_installation().is_none()
                        && installation.claim_in(o.meta()) == Claim::Ours
                })
                .map(|o| ObjectRef::from_obj(&**o))
                .collect::<Vec<_>>()
        });
        futures::stream::iter(unrecorded.unwrap_or_default())
    })
}

/// The objects of `store` that use (`connection_of`) a Connection that just changed (its spec,
/// whether it works, or whether it is in this installation's reach), so a fixed Connection, or
/// one back in reach, brings them back at once rather than at their next retry.
fn users_of_changed_connections<K: Watchable>(
    ctx: &Context,
    store: Store<K>,
    connection_of: fn(&K) -> &str,
) -> impl futures::Stream<Item = ObjectRef<K>> + Send + 'static {
    let metrics = ctx.metrics.clone();
    told(
        metrics,
        ctx.connection_changes.subscribe(),
        store,
        move |o, name| connection_of(o) == name,
    )
}

/// The objects of `store` that `concerns` each name told on `names` (lagging past the oldest
/// is fine: those objects are looked at again at their drift check).
fn told<K: Watchable>(
    metrics: Arc<crate::controller::Metrics>,
    names: tokio::sync::broadcast::Receiver<String>,
    store: Store<K>,
    concerns: impl Fn(&K, &str) -> bool + Send + 'static,
) -> impl futures::Stream<Item = ObjectRef<K>> + Send + 'static {
    futures::stream::unfold(names, |mut names| async move {
        loop {
            match names.recv().await {
                Ok(name) => return Some((name, names)),
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
    .flat_map(move |name: String| {
        let objects = relay::caught(&K::kind(&()), &metrics, relay::MAPPING_PANICKED, || {
            store
                .state()
                .iter()
                .filter(|o| concerns(o, &name))
                .map(|o| ObjectRef::from_obj(o.as_ref()))
                .collect::<Vec<_>>()
        });
        futures::stream::iter(objects.unwrap_or_default())
    })
}

/// The watch of a kind the driver does not reconcile (Connection, ConfigRollout): every object
/// of `namespace` (`None`: of every namespace), unindexed and unsharded; a change of any claim
/// is a trigger (a Connection carries none; a rollout's claim is written on its own and wakes
/// its next reconcile). `on_stored` sees each event once the cache holds it.
fn watched_whole<K: Watchable>(
    ctx: &Arc<Context>,
    namespace: Option<&str>,
    on_stored: impl Fn(&watcher::Event<K>) + Send + 'static,
) -> (
    Store<K>,
    impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static,
) {
    let probe = ctx.health.register(stream_name(&K::kind(&()), namespace));
    watched(
        &ctx.kube,
        namespace,
        watcher::Config::default(),
        ctx.lists.clone(),
        probe,
        |_| {},
        |_| {},
        on_stored,
        unreadable::reporter::<K>(ctx),
        {
            let metrics = ctx.metrics.clone();
            move || metrics.reconcile_panicked(&K::kind(&()))
        },
        String::new(),
        None,
    )
}

async fn run_connections(ctx: Arc<Context>, concurrency: u16) {
    // A Connection that comes into reach or leaves it (a relabel, a claim) wakes its users once
    // the cache holds it ([`ConnectionReach`]).
    let stored = {
        let ctx = ctx.clone();
        let reach = std::sync::Mutex::new(ConnectionReach::default());
        move |event: &watcher::Event<crate::resources::Connection>| {
            let mut reach = reach.lock().unwrap_or_else(|e| e.into_inner());
            for name in reach.stored(event, |meta| ctx.installation.sees_connection(meta)) {
                // Nobody listening (no kind controller yet) is fine.
                let _ = ctx.connection_changes.send(name);
            }
        }
    };
    let (store, connections) = watched_whole::<crate::resources::Connection>(&ctx, None, stored);
    ctx.stores.connections.register(store.clone());
    // A Connection looks again when a Secret it reads changes (a fixed or rotated token), so
    // its Ready, and its users waiting on it, follow at once rather than at the drift check.
    let secret_namespace = ctx.connections.secret_namespace().map(str::to_string);
    let readers = told(
        ctx.metrics.clone(),
        ctx.connections.secret_changes(),
        store.clone(),
        move |c: &crate::resources::Connection, secret| {
            c.spec.secret_refs().any(|r| {
                Some(r.namespace.as_str()) == secret_namespace.as_deref() && r.name == secret
            })
        },
    );
    let controller = Controller::for_stream(connections, store)
        .with_config(ControllerConfig::default().concurrency(concurrency))
        .reconcile_on(readers)
        .reconcile_all_on(ctx.leadership.acquired())
        .shutdown_on_signal()
        .run(
            |c, ctx| {
                let reference = ObjectRef::from_obj(&*c).erase();
                let metrics = ctx.metrics.clone();
                async move { contained(reference, &metrics, connection::reconcile(c, ctx)).await }
            },
            connection::error_policy,
            ctx,
        );
    drained("Connection", controller).await;
}

/// The ConfigRollouts of `namespace`: each reconciled when it changes, when an ApiKey of its
/// namespace changes (a moved key's status shows its new config), when a Config it names
/// changes (a deleted candidate rolls it back at once, not at its next step), when its
/// Connection changes or comes back in reach, and on election.
async fn run_rollouts(
    ctx: Arc<Context>,
    namespace: Option<String>,
    concurrency: u16,
    slots: Slots,
) {
    use crate::resources::{ApiKey, Config, ConfigRollout};
    let ns = namespace.as_deref();
    // Relayed once stored, like the managed kinds: a Config whose deletion waits on a rollout
    // hears it go.
    let stored = {
        let ctx = ctx.clone();
        let relayed = std::sync::Mutex::new(relay::Relayed::default());
        move |event: &watcher::Event<ConfigRollout>| {
            relayed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .stored(&ctx.relay, event);
        }
    };
    let (store, rollouts) = watched_whole::<ConfigRollout>(&ctx, ns, stored);
    ctx.stores.rollouts.register(store.clone());
    let latest = store.clone();
    let controller = Controller::for_stream(rollouts, store.clone())
        .with_config(ControllerConfig::default().concurrency(concurrency))
        .reconcile_all_on(ctx.leadership.acquired())
        .reconcile_on(users_of_changed_connections(
            &ctx,
            store.clone(),
            config_rollout::connection_name,
        ));
    let beside = |rollout: &ConfigRollout, meta: &kube::core::ObjectMeta| {
        rollout.metadata.namespace == meta.namespace
    };
    let controller = relay::requeue_when(
        controller,
        &ctx,
        ns,
        store.clone(),
        move |rollout: &ConfigRollout, key: &ApiKey| beside(rollout, &key.metadata),
    );
    let controller = relay::requeue_when(
        controller,
        &ctx,
        ns,
        store,
        move |rollout: &ConfigRollout, config: &Config| {
            let spec = &rollout.spec;
            beside(rollout, &config.metadata)
                && config.metadata.name.as_ref().is_some_and(|name| {
                    *name == spec.stable_config_ref.name || *name == spec.candidate_config_ref.name
                })
        },
    )
    .shutdown_on_signal()
    .run(
        taking_turns(slots, latest, config_rollout::reconcile),
        config_rollout::error_policy,
        ctx,
    );
    drained("ConfigRollout", controller).await;
}

/// Keeps the `aigw_leader` gauge equal to this replica's leadership.
async fn follow_leadership(ctx: Arc<Context>) {
    if ctx.dry_run {
        // A dry run leads nothing: `sum(aigw_leader)` stays the real operators' count.
        ctx.metrics.set_leader(false);
        return;
    }
    let mut leading = ctx.leadership.changes();
    loop {
        let now = *leading.borrow_and_update();
        ctx.metrics.set_leader(now);
        if leading.changed().await.is_err() {
            return;
        }
    }
}

/// How long the controllers wait at start for the first look at the admission policies
/// (`--claims auto`).
const FIRST_LOOK: std::time::Duration = std::time::Duration::from_secs(15);

/// Runs every controller until the process receives a termination signal or the returned
/// future is dropped.
pub async fn run(ctx: Arc<Context>, settings: Settings) {
    let namespaces = settings.watched_namespaces();
    info!(namespaces = ?settings.namespaces, concurrency = settings.concurrency, drift_interval = ?settings.drift_interval, "starting controllers");
    if !settings.namespaces.is_empty() && settings.cluster_selector.is_none() {
        warn!(
            "--namespace scopes the namespaced kinds only: this installation sees every Connection and takes every unclaimed cluster-scoped object (ClusterGuardrail, Integration, McpIntegration, SecretReference, Workspace); when several installations share the cluster, give each a --cluster-selector and its own --installation-id"
        );
    }
    let mut tasks = Vec::new();
    let mut passes = Vec::new();
    let mut helpers = Vec::new();
    // Whether a new object is taken in its first metadata write: known before any controller
    // starts, then followed.
    let claims = (settings.claims == ClaimMode::Auto).then(|| ctx.installation.guard().clone());
    // Whether the admission policies are in force, watched: the free-form fields' (told in
    // the logs and by `aigw_admission_policy_in_force`) and the claim guard. Until its first
    // look the claim guard counts as out of force; the controllers wait for that look (a
    // listing and the probe, `FIRST_LOOK` at most), so that new objects are taken in their
    // first metadata write from the start where the guard holds.
    let (looked, first_look) = tokio::sync::oneshot::channel();
    let following_claims = claims.is_some();
    helpers.push(tokio::spawn(super::state::admission::follow(
        ctx.kube.clone(),
        ctx.metrics.clone(),
        claims,
        settings.own_namespace.clone(),
        looked,
    )));
    if following_claims && tokio::time::timeout(FIRST_LOOK, first_look).await.is_err() {
        warn!(
            "the admission policies were not seen within {FIRST_LOOK:?}: new objects are taken by a status record first until they are"
        );
    }
    // The Secrets aigw writes or reads, per watched namespace ([`super::secret_cache`]): their
    // caches exist before any controller reads them.
    let mut secret_watches = Vec::new();
    for namespace in &namespaces {
        secret_watches.extend(ctx.secrets.watch(&ctx, namespace.as_deref()));
    }
    // Cluster-scoped resources read the Secrets labelled for them in the Connection secret
    // namespace (after the loop above: it watches that namespace's metadata only if no
    // watched namespace covers it).
    if let Some(namespace) = ctx.connections.secret_namespace() {
        secret_watches.extend(ctx.secrets.watch_cluster_readable(&ctx, namespace));
    }
    for (name, watch) in secret_watches {
        let probe = ctx.health.register(name);
        helpers.push(tokio::spawn(watch.for_each(move |item| {
            probe.observe(&item);
            futures::future::ready(())
        })));
    }
    // Every kind of the registry: one drift pass per listed kind, over every watched namespace;
    // one controller per namespaced kind and namespace, one per cluster-scoped kind whatever
    // `--namespace` says.
    let mut spawner = Spawner {
        ctx: &ctx,
        passes: &mut passes,
        tasks: &mut tasks,
        namespaces: &namespaces,
        concurrency: settings.concurrency,
    };
    for kind in crate::registry::KINDS {
        (kind.controllers)(&mut spawner);
    }
    // Cache-filling watches and the gauge serve the controllers: they stop with them (on a
    // termination signal the controllers finish and `run` returns), never keep `run` alive.
    helpers.push(tokio::spawn(follow_leadership(ctx.clone())));
    helpers.extend(passes.into_iter().map(tokio::spawn));
    for (name, watch) in ctx.connections.watches() {
        let probe = ctx.health.register(name.to_string());
        helpers.push(tokio::spawn(watch.for_each(move |item| {
            probe.observe(&item);
            futures::future::ready(())
        })));
    }
    let mut handles: Vec<_> = tasks.iter().map(|t| t.abort_handle()).collect();
    handles.extend(helpers.iter().map(|t| t.abort_handle()));
    let _abort_on_drop = AbortOnDrop(handles);
    for task in tasks {
        let _ = task.await;
    }
}

/// `controller`, a controller of `kind`, with a panic that no reconcile or trigger kept (one in
/// kube-runtime's own code, or in a watch callback) kept to it: it is logged and counted as the
/// kind's panic (`AigwReconcilePanicked` fires), that controller's objects wait until the
/// process restarts, and every other controller goes on. Before, it ended unnoticed. Stopping
/// the process instead would turn a panic that a stored object triggers into a crash loop of
/// every kind, for every tenant, on every replica that took over.
async fn kept_to_its_kind(
    kind: &'static str,
    metrics: Arc<super::Metrics>,
    controller: impl Future<Output = ()>,
) {
    use futures::FutureExt;
    if std::panic::AssertUnwindSafe(controller)
        .catch_unwind()
        .await
        .is_err()
    {
        metrics.reconcile_panicked(kind);
        error!(
            kind,
            "a controller ended in a panic (a bug): its objects wait until the process restarts; the other controllers go on"
        );
    }
}

struct AbortOnDrop(Vec<tokio::task::AbortHandle>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for handle in &self.0 {
            handle.abort();
        }
    }
}

/// Starts the controllers of the kinds of [`crate::registry::KINDS`], each kind through its
/// [`crate::registry::Kind::controllers`].
pub struct Spawner<'a> {
    ctx: &'a Arc<Context>,
    passes: &'a mut Vec<futures::future::BoxFuture<'static, ()>>,
    tasks: &'a mut Vec<tokio::task::JoinHandle<()>>,
    namespaces: &'a [Option<String>],
    concurrency: u16,
}

impl Spawner<'_> {
    /// A kind whose drift is found by listing (one drift pass for the kind), with `extra`
    /// triggers of its own.
    pub fn listed<K: drift::Listed>(&mut self, extra: Option<ExtraTriggers<K>>) {
        let setup = listed_kind::<K>(self.ctx, self.passes, extra);
        self.spawn(setup);
    }

    /// A kind whose drift is found by reading each object; `with_secrets`: it watches the
    /// credentials Secrets aigw writes for it.
    pub fn read<K: Managed>(&mut self, with_secrets: bool, extra: Option<ExtraTriggers<K>>) {
        self.spawn(KindSetup::<K> {
            with_secrets,
            extra,
            drift: None,
        });
    }

    /// The Connections' controller.
    pub fn connections(&mut self) {
        let controller = run_connections(self.ctx.clone(), self.concurrency);
        let metrics = self.ctx.metrics.clone();
        let task = tokio::spawn(kept_to_its_kind("Connection", metrics, controller));
        self.tasks.push(task);
    }

    /// The ConfigRollouts' controllers, one per watched namespace, sharing `--concurrency`.
    pub fn rollouts(&mut self) {
        let slots = self.slots();
        for namespace in self.namespaces {
            let controller = run_rollouts(
                self.ctx.clone(),
                namespace.clone(),
                self.concurrency,
                slots.clone(),
            );
            let metrics = self.ctx.metrics.clone();
            let task = tokio::spawn(kept_to_its_kind("ConfigRollout", metrics, controller));
            self.tasks.push(task);
        }
    }

    /// One kind's `--concurrency` slots.
    fn slots(&self) -> Slots {
        (self.concurrency > 0)
            .then(|| Arc::new(tokio::sync::Semaphore::new(usize::from(self.concurrency))))
    }

    fn spawn<K: Managed>(&mut self, setup: KindSetup<K>) {
        // With `--namespace` a kind has a controller per namespace: at 24 namespaces, 96
        // reconciles of a kind ran at once where `--concurrency 4` said four.
        let slots = self.slots();
        if K::NAMESPACED {
            for namespace in self.namespaces {
                let task = spawn_kind(self.ctx, namespace, self.concurrency, &slots, &setup);
                self.tasks.push(task);
            }
        } else {
            let task = spawn_kind(self.ctx, &None, self.concurrency, &slots, &setup);
            self.tasks.push(task);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::watcher::Event;

    /// A controller that ends in a panic ends alone, counted as its kind's panic; the task
    /// that ran it ends without one, so nothing else stops.
    #[tokio::test]
    async fn a_controller_that_panics_is_kept_to_its_kind() {
        let metrics = Arc::new(crate::controller::Metrics::default());
        let panics = async {
            let bug: Option<()> = std::hint::black_box(None);
            bug.expect("a bug");
        };
        let task = tokio::spawn(kept_to_its_kind("Config", metrics.clone(), panics));
        assert!(task.await.is_ok(), "the panic ended the task");
        let counted = r#"aigw_reconciles_total{kind="Config",result="panic"} 1"#;
        assert!(metrics.encode().contains(counted), "{}", metrics.encode());
    }

    /// A reconcile that panics comes back as a requeue of its object, not as the panic that
    /// would end the controller of every namespace; any other outcome passes as it came.
    #[tokio::test]
    async fn a_panicking_reconcile_is_kept_to_its_object() {
        let object = || ObjectRef::<ConfigMap>::new("m").within("n").erase();
        let panics = async {
            let window: Option<u64> = std::hint::black_box(None);
            Ok::<Action, ()>(Action::requeue(std::time::Duration::from_secs(
                window.expect("a bug"),
            )))
        };
        let metrics = crate::controller::Metrics::default();
        assert_eq!(
            contained(object(), &metrics, panics).await,
            Ok(Action::requeue(AFTER_PANIC))
        );
        let counted = r#"aigw_reconciles_total{kind="ConfigMap",result="panic"} 1"#;
        assert!(metrics.encode().contains(counted), "{}", metrics.encode());
        let fine = async { Ok::<Action, ()>(Action::await_change()) };
        let passed = contained(object(), &metrics, fine).await;
        assert_eq!(passed, Ok(Action::await_change()));
        let failed = async { Err::<Action, &str>("failed") };
        assert_eq!(contained(object(), &metrics, failed).await, Err("failed"));
    }

    fn map(data: &str) -> ConfigMap {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "m", "namespace": "n"},
            "data": {"v": data},
        }))
        .unwrap()
    }

    /// A reconcile that waited for a slot gets the copy of when its turn came, not the one kube
    /// scheduled it with.
    #[tokio::test]
    async fn a_reconcile_waiting_for_a_slot_reconciles_the_object_as_it_is_then() {
        let (store, mut writer) = reflector::store::<ConfigMap>();
        writer.apply_watcher_event(&Event::Apply(map("scheduled")));
        let slots: Slots = Some(Arc::new(tokio::sync::Semaphore::new(1)));
        let busy = slots.clone().unwrap().acquire_owned().await.unwrap();
        let scheduled = store.get(&ObjectRef::from_obj(&map(""))).unwrap();
        let waiting = tokio::spawn({
            let (slots, store) = (slots.clone(), store.clone());
            async move { in_turn(slots, &store, scheduled).await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "waits while the only slot is held");
        writer.apply_watcher_event(&Event::Apply(map("edited")));
        drop(busy);
        let (slot, object) = waiting.await.unwrap().expect("still in the cache");
        assert!(slot.is_some(), "holds the slot for the reconcile");
        assert_eq!(object.data.as_ref().unwrap()["v"], "edited");
    }

    /// An object whose taking into the cache panics (a bug its content trips) is reported as
    /// unreadable and left out, its earlier copy removed (the claim index hearing of the
    /// removal); a deletion goes on to the cache all the same; the objects after it, and the
    /// list's end, go on to the cache.
    #[test]
    fn an_object_whose_taking_panics_is_left_out_alone() {
        let (store, mut writer) = reflector::store::<ConfigMap>();
        writer.apply_watcher_event(&Event::Apply(map("before")));
        let reported = std::sync::Mutex::new(Vec::new());
        let report = |u: &Unreadable| reported.lock().unwrap().push(u.reason.clone());
        fn prepare(object: &mut ConfigMap) {
            let data = object.data.get_or_insert_default();
            assert_ne!(data["v"], "trips a bug", "a bug");
            data.insert("prepared".into(), "yes".into());
        }
        // What the claim index heard: each event's kind and value.
        let heard = std::sync::Mutex::new(Vec::new());
        let on_event = |event: &Event<ConfigMap>| {
            let value = |o: &ConfigMap| o.data.as_ref().unwrap()["v"].clone();
            let entry = match event {
                Event::Apply(o) => format!("apply {}", value(o)),
                Event::Delete(o) => format!("delete {}", value(o)),
                _ => panic!("a bug in the index"),
            };
            heard.lock().unwrap().push(entry);
        };
        let panics = std::sync::Mutex::new(0);
        let on_panic = || *panics.lock().unwrap() += 1;
        let take = |event: Event<Readable<ConfigMap>>| {
            let reactions = Reactions {
                report: &report,
                on_event: &on_event,
                on_panic: &on_panic,
            };
            into_cache(Ok(event), &store, None, prepare, reactions)
        };
        let applied = |v: &str| Event::Apply(Readable::Object(map(v)));

        let Some(Ok(Event::Delete(removed))) = take(applied("trips a bug")) else {
            panic!("the earlier copy is not removed");
        };
        assert_eq!(removed.data.unwrap()["v"], "before");
        assert_eq!(reported.lock().unwrap().len(), 1);
        assert!(reported.lock().unwrap()[0].contains("panicked"));
        assert_eq!(*heard.lock().unwrap(), ["delete before"]);

        let Some(Ok(Event::Apply(next))) = take(applied("next")) else {
            panic!("the next object is not taken");
        };
        assert_eq!(next.data.unwrap()["prepared"], "yes");
        let Some(Ok(Event::InitDone)) = take(Event::InitDone) else {
            panic!("the end of a list is not taken");
        };
        let deleted = Event::Delete(Readable::Object(map("trips a bug")));
        let Some(Ok(Event::Delete(_))) = take(deleted) else {
            panic!("a deletion is not taken");
        };
        let heard = heard.lock().unwrap();
        assert_eq!(
            *heard,
            ["delete before", "apply next", "delete trips a bug"]
        );
        assert_eq!(reported.lock().unwrap().len(), 1);
        // Each counted as the kind's panic: the object's, the list end's, the deletion's.
        assert_eq!(*panics.lock().unwrap(), 3);
    }

    /// An object deleted (or moved out of this replica's share) while its reconcile waited is
    /// not reconciled.
    #[tokio::test]
    async fn a_reconcile_of_an_object_gone_while_it_waited_does_not_run() {
        let (store, mut writer) = reflector::store::<ConfigMap>();
        writer.apply_watcher_event(&Event::Apply(map("scheduled")));
        let scheduled = store.get(&ObjectRef::from_obj(&map(""))).unwrap();
        writer.apply_watcher_event(&Event::Delete(map("scheduled")));
        let slots: Slots = Some(Arc::new(tokio::sync::Semaphore::new(1)));
        assert!(in_turn(slots, &store, scheduled.clone()).await.is_none());
        writer.apply_watcher_event(&Event::Apply(map("again")));
        let (slot, object) = in_turn(None, &store, scheduled).await.unwrap();
        assert!(slot.is_none());
        assert_eq!(object.data.as_ref().unwrap()["v"], "again");
    }
}
