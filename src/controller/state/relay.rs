//! Objects of one kind handed to the controllers of other kinds, from that kind's own watch and
//! only once its cache stores them.
//!
//! A controller woken by a change of another kind reads that kind's watch cache (a Config
//! resolves the Guardrails it names; a Guardrail whose deletion waits looks for the Configs
//! still naming it). Woken by a watch of its own, it could read the cache before the cache
//! holds the change that woke it, decide on the older copy, and hear nothing more: a
//! Config went on naming a guardrail that was gone. Relayed from the cache's own stream, the
//! change is in the cache before anyone hears of it, and no kind is watched twice.
//!
//! Nothing is dropped: each subscriber has an unbounded queue, which its controller drains
//! into its scheduler as fast as it arrives (the scheduler merges requests for one object).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::ResourceExt;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use tokio::sync::mpsc;

use crate::controller::Context;
use crate::controller::process::Watchable;
use crate::controller::runtime::metrics::Metrics;

/// Requeues the objects of `objects` that `concerns` relates to a changed (or gone) object of
/// kind `S` (one they refer to, or one referring to them), heard from `S`'s own watch in
/// `namespace` (`None`: every watched namespace) once its cache holds the change: the one way a
/// controller hears of the objects its own depend on or are held by (a Provider's Integration,
/// the Configs naming a guardrail, the Workspace a `workspaceRef` names).
pub fn requeue_when<S: Watchable, K: Watchable>(
    controller: Controller<K>,
    ctx: &Context,
    namespace: Option<&str>,
    objects: Store<K>,
    concerns: impl Fn(&K, &S) -> bool + Send + Sync + 'static,
) -> Controller<K> {
    let stream = ctx.relay.subscribe::<S>(namespace.map(str::to_string));
    let map = move |source: Arc<S>| {
        objects
            .state()
            .into_iter()
            .filter(|o| concerns(o, &source))
            .map(|o| ObjectRef::from_obj(o.as_ref()))
            .collect()
    };
    controller.watches_shared_stream(stream, contained(ctx.metrics.clone(), map))
}

/// `step`, one step of a watch callback for one change of an object of `kind` (what the
/// promotion followers learn from it), with a panic in it (a bug) kept to that step: it is
/// logged and counted as the kind's panic, and the callback's other steps and the next change
/// go on. Uncaught, it would end the watch, and with it the kind's controller.
pub fn kept_to_the_change(kind: &str, metrics: &Metrics, step: impl FnOnce()) {
    let what = "a watch callback panicked on one change (a bug): that step is skipped for it";
    caught(kind, metrics, what, step);
}

/// `map`, a trigger's mapping of a changed object to the objects to reconcile, with a panic in
/// it (a bug) kept to the one change: it maps to nothing, is logged and counted as the kind's
/// panic (`aigw_reconciles_total{result="panic"}`, which `AigwReconcilePanicked` watches).
/// Uncaught, it would end the controller it feeds, stopping the kind for every namespace the
/// process serves: one tenant's object that trips a bug would stop every other tenant's.
pub fn contained<S, K: Watchable>(
    metrics: Arc<Metrics>,
    map: impl Fn(S) -> Vec<ObjectRef<K>> + Send + Sync + 'static,
) -> impl Fn(S) -> Vec<ObjectRef<K>> + Send + Sync + 'static {
    move |source| {
        caught(&K::kind(&()), &metrics, MAPPING_PANICKED, || map(source)).unwrap_or_default()
    }
}

/// What a trigger whose mapping of a change to the objects it concerns panicked logs.
pub const MAPPING_PANICKED: &str =
    "a trigger's mapping of a change to its objects panicked (a bug): the change wakes no object";

/// `f`'s result, or `None` when it panicked: then `what` happened is logged and counted as
/// `kind`'s panic, and the others go on.
pub fn caught<T>(kind: &str, metrics: &Metrics, what: &str, f: impl FnOnce() -> T) -> Option<T> {
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    if result.is_err() {
        metrics.reconcile_panicked(kind);
        tracing::error!(%kind, "{what}; the others go on");
    }
    result.ok()
}

/// The subscribers of each kind, by the kind's type.
#[derive(Default)]
pub struct Relay {
    subscribers: Mutex<HashMap<TypeId, Box<dyn Any + Send>>>,
}

/// The queues of one kind's subscribers, each with the namespace it hears (`None`: all).
type Queues<K> = Vec<(Option<String>, mpsc::UnboundedSender<Arc<K>>)>;

impl Relay {
    /// Every object of kind `K` in `namespace` (`None`: all) that its watch cache stores or
    /// removes from now on, as stored (a removed one as it was last seen).
    pub fn subscribe<K>(
        &self,
        namespace: Option<String>,
    ) -> impl futures::Stream<Item = Arc<K>> + Send + 'static
    where
        K: Send + Sync + 'static,
    {
        let (sender, receiver) = mpsc::unbounded_channel();
        let mut subscribers = self.subscribers.lock().unwrap_or_else(|e| e.into_inner());
        subscribers
            .entry(TypeId::of::<K>())
            .or_insert_with(|| Box::new(Queues::<K>::new()))
            .downcast_mut::<Queues<K>>()
            .expect("subscribers are keyed by their kind's type")
            .push((namespace, sender));
        futures::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|object| (object, receiver))
        })
    }

    /// Hands `object` to the subscribers of its namespace; `make` runs only if there is one.
    fn publish<K>(&self, namespace: Option<String>, make: impl FnOnce() -> Arc<K>)
    where
        K: Send + Sync + 'static,
    {
        let mut subscribers = self.subscribers.lock().unwrap_or_else(|e| e.into_inner());
        let Some(queues) = subscribers
            .get_mut(&TypeId::of::<K>())
            .and_then(|q| q.downcast_mut::<Queues<K>>())
        else {
            return;
        };
        let hears = |wanted: &Option<String>| wanted.is_none() || *wanted == namespace;
        if !queues.iter().any(|(wanted, _)| hears(wanted)) {
            return;
        }
        let object = make();
        // A controller that stopped has no queue to fill.
        queues.retain(|(wanted, queue)| !hears(wanted) || queue.send(object.clone()).is_ok());
    }
}

/// What one watch of kind `K` relays: each change once its cache stored it. The objects of a
/// list that follows a lost watch are relayed when the list is complete, as the cache takes
/// them all at once then; the first list is not (every controller looks at all its objects
/// when it starts).
pub struct Relayed<K> {
    listed_once: bool,
    relisted: Vec<Arc<K>>,
}

impl<K> Default for Relayed<K> {
    fn default() -> Self {
        Self {
            listed_once: false,
            relisted: Vec::new(),
        }
    }
}

impl<K> Relayed<K>
where
    K: kube::Resource + Clone + Send + Sync + 'static,
{
    /// Takes one event of the watch, after its cache stored it.
    pub fn stored(&mut self, relay: &Relay, event: &watcher::Event<K>) {
        match event {
            watcher::Event::Apply(object) => {
                relay.publish(object.namespace(), || Arc::new(object.clone()));
            }
            // Gone: relayed as being deleted whatever its last copy says (one deleted without a
            // finalizer carries no deletionTimestamp), so a deletion waiting for it hears it.
            watcher::Event::Delete(object) => {
                relay.publish(object.namespace(), || {
                    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
                    let mut gone = object.clone();
                    let now = Time(k8s_openapi::jiff::Timestamp::now());
                    gone.meta_mut().deletion_timestamp.get_or_insert(now);
                    Arc::new(gone)
                });
            }
            watcher::Event::Init => self.relisted.clear(),
            watcher::Event::InitApply(object) if self.listed_once => {
                self.relisted.push(Arc::new(object.clone()));
            }
            watcher::Event::InitApply(_) => {}
            watcher::Event::InitDone => {
                self.listed_once = true;
                for object in std::mem::take(&mut self.relisted) {
                    relay.publish(object.namespace(), || object.clone());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn map(namespace: &str, name: &str) -> ConfigMap {
        let mut object = ConfigMap::default();
        object.metadata.namespace = Some(namespace.into());
        object.metadata.name = Some(name.into());
        object
    }

    fn names(received: Vec<Arc<ConfigMap>>) -> Vec<String> {
        received.iter().map(|o| o.name_any()).collect()
    }

    #[tokio::test]
    async fn a_subscriber_hears_changes_of_its_namespace_and_a_relist_once_complete() {
        let relay = Relay::default();
        let mut watch = Relayed::<ConfigMap>::default();
        let mine = relay.subscribe::<ConfigMap>(Some("a".into()));
        let all = relay.subscribe::<ConfigMap>(None);
        // The first list is not relayed.
        watch.stored(&relay, &watcher::Event::Init);
        watch.stored(&relay, &watcher::Event::InitApply(map("a", "first")));
        watch.stored(&relay, &watcher::Event::InitDone);
        watch.stored(&relay, &watcher::Event::Apply(map("a", "one")));
        watch.stored(&relay, &watcher::Event::Apply(map("b", "two")));
        watch.stored(&relay, &watcher::Event::Delete(map("a", "three")));
        // A list after a lost watch is, once the cache holds all of it.
        watch.stored(&relay, &watcher::Event::Init);
        watch.stored(&relay, &watcher::Event::InitApply(map("a", "four")));
        watch.stored(&relay, &watcher::Event::InitDone);
        drop(relay);
        assert_eq!(names(mine.collect().await), ["one", "three", "four"]);
        assert_eq!(names(all.collect().await), ["one", "two", "three", "four"]);
    }

    #[tokio::test]
    async fn nothing_is_copied_for_a_kind_nobody_hears_and_a_gone_subscriber_is_dropped() {
        let relay = Relay::default();
        relay.publish::<ConfigMap>(None, || unreachable!("no subscriber"));
        drop(relay.subscribe::<ConfigMap>(None));
        relay.publish(None, || Arc::new(map("a", "one")));
        relay.publish::<ConfigMap>(None, || unreachable!("its only subscriber is gone"));
    }

    /// A watch callback's step that panics on one change is skipped for it and counted; the
    /// steps after it run.
    #[test]
    fn a_panicking_watch_step_is_kept_to_its_change() {
        let metrics = Metrics::default();
        let mut after = false;
        kept_to_the_change("ConfigMap", &metrics, || {
            let bug: Option<()> = std::hint::black_box(None);
            bug.expect("a bug");
        });
        kept_to_the_change("ConfigMap", &metrics, || after = true);
        assert!(after);
        let counted = r#"aigw_reconciles_total{kind="ConfigMap",result="panic"} 1"#;
        assert!(metrics.encode().contains(counted), "{}", metrics.encode());
    }

    /// A trigger's mapping that panics maps its change to no object and counts the kind's
    /// panic; the mapping of the next change runs as usual.
    #[test]
    fn a_panicking_trigger_maps_to_nothing_and_counts() {
        let metrics = Arc::new(Metrics::default());
        let wake = contained(metrics.clone(), |source: Arc<ConfigMap>| {
            let name = source.name_any();
            assert_ne!(name, "trips-a-bug", "a bug");
            vec![ObjectRef::<ConfigMap>::new(&name).within("a")]
        });
        assert!(wake(Arc::new(map("a", "trips-a-bug"))).is_empty());
        let woken = wake(Arc::new(map("a", "fine")));
        assert_eq!(woken, vec![ObjectRef::new("fine").within("a")]);
        let counted = r#"aigw_reconciles_total{kind="ConfigMap",result="panic"} 1"#;
        assert!(metrics.encode().contains(counted), "{}", metrics.encode());
    }
}
