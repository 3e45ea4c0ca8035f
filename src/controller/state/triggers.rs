//! What wakes a kind's controller besides its own objects ([`Triggers`]): the objects of other
//! kinds its objects depend on or are held by, and the Secrets they read. Each is heard from the
//! other kind's own watch once its cache holds the change ([`super::relay`]).

use std::sync::Arc;

use kube::runtime::controller::Controller;
use kube::runtime::reflector::{ObjectRef, Store};

use super::relay::{contained, requeue_when};
use crate::controller::driver::drift::Drift;
use crate::controller::driver::{Managed, object_key};
use crate::controller::{Context, Watchable};

/// A kind's controller while its own triggers are added, with what they are made from: the
/// operator's context, the namespace the controller watches (`None`: every watched namespace,
/// or a cluster-scoped kind) and the cache of its objects.
pub struct Triggers<'a, K: Managed> {
    controller: Controller<K>,
    pub ctx: &'a Context,
    pub namespace: Option<&'a str>,
    pub objects: Store<K>,
}

impl<'a, K: Managed> Triggers<'a, K> {
    pub fn new(
        controller: Controller<K>,
        ctx: &'a Context,
        namespace: Option<&'a str>,
        objects: Store<K>,
    ) -> Self {
        Self {
            controller,
            ctx,
            namespace,
            objects,
        }
    }

    /// Requeues the objects that `concerns` relates to a changed (or gone) object of kind `S`
    /// of every watched namespace ([`requeue_when`]).
    pub fn when<S: Watchable>(
        self,
        concerns: impl Fn(&K, &S) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.heard_in(None, concerns)
    }

    /// [`Triggers::when`] for the objects of kind `S` of the namespace this controller watches.
    pub fn when_beside<S: Watchable>(
        self,
        concerns: impl Fn(&K, &S) -> bool + Send + Sync + 'static,
    ) -> Self {
        let namespace = self.namespace;
        self.heard_in(namespace, concerns)
    }

    /// [`Triggers::when`] for the objects of kind `S` of `namespace` (`None`: all).
    pub fn heard_in<S: Watchable>(
        self,
        namespace: Option<&str>,
        concerns: impl Fn(&K, &S) -> bool + Send + Sync + 'static,
    ) -> Self {
        let objects = self.objects.clone();
        let controller = requeue_when(self.controller, self.ctx, namespace, objects, concerns);
        Self { controller, ..self }
    }

    /// [`Triggers::heard_in`] for the objects of kind `S` that may hold an object of this kind
    /// (`holds`), so that a deletion waiting for its holders goes as soon as the last lets go.
    /// While an object is being deleted, a spec change of any `S` (one its reconcile has not
    /// yet observed) and a deletion of one (relayed as such, [`super::relay::Relayed`]) wake
    /// it too: an edit that drops the reference shows
    /// only in the holder's new copy, which no longer names it. A holder's status write does
    /// not (it drops no reference), so a deletion held in a busy cluster is not read again at
    /// every write there.
    pub fn held_in<S: Managed>(
        self,
        namespace: Option<&str>,
        holds: impl Fn(&K, &S) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.heard_in(namespace, move |object: &K, holder: &S| {
            holds(object, holder)
                || (object.meta().deletion_timestamp.is_some() && may_let_go(holder))
        })
    }
    /// Requeues the objects that `uses` an object of kind `S` of `namespace` (`None`: all)
    /// whenever it changes or goes, and notes that their inputs changed ([`inputs_changed`]).
    pub fn inputs_from<S: Watchable>(
        self,
        namespace: Option<&str>,
        uses: impl Fn(&K, &S) -> bool + Send + Sync + 'static,
    ) -> Self {
        let stream = self.ctx.relay.subscribe::<S>(namespace.map(str::to_string));
        let (objects, drift) = (self.objects.clone(), self.ctx.drift.clone());
        let metrics = self.ctx.metrics.clone();
        self.with(|controller| {
            let map = move |source: Arc<S>| inputs_changed(&objects, &drift, |o| uses(o, &source));
            controller.watches_shared_stream(stream, contained(metrics, map))
        })
    }

    /// Adds a trigger of its own shape to the controller.
    pub fn with(self, add: impl FnOnce(Controller<K>) -> Controller<K>) -> Self {
        let controller = add(self.controller);
        Self { controller, ..self }
    }

    /// The controller with its triggers.
    pub fn controller(self) -> Controller<K> {
        self.controller
    }
}

/// The objects of `objects` that `uses` an input that changed, each marked so its next
/// reconcile checks its inputs before trusting its recorded state ([`Drift::inputs_changed`]).
pub fn inputs_changed<K: Managed>(
    objects: &Store<K>,
    drift: &Drift,
    uses: impl Fn(&K) -> bool,
) -> Vec<ObjectRef<K>> {
    objects
        .state()
        .iter()
        .filter(|o| uses(o))
        .map(|o| {
            drift.inputs_changed(object_key(o.as_ref()));
            ObjectRef::from_obj(o.as_ref())
        })
        .collect()
}

/// Whether `holder`'s copy may show a reference dropped: it is being deleted, or its spec
/// changed since its reconcile last observed it.
fn may_let_go<S: Managed>(holder: &S) -> bool {
    use crate::controller::driver::status::CommonStatus;
    let observed = holder.status().and_then(|s| s.observed_generation());
    holder.meta().deletion_timestamp.is_some() || observed != holder.meta().generation
}
