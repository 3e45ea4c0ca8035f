//! One owner per remote object. A remote object (kind, tenant, remote id or slug) is managed by
//! at most one aigw resource, decided the same way by every replica and every reconcile:
//! - the resource that already manages it (it created or adopted it and recorded its id)
//!   stays its owner;
//! - among claimants that never managed it, the oldest (creation time, then uid) owns it;
//! - a claimant refused by its grants, that never managed the object, claims nothing: it does
//!   not block a later claimant that is allowed.
//!
//! The others are `Stalled/AlreadyManaged` and make no API write, and deleting them never
//! touches the object. Claims are keyed per Connection name; a check looks at every
//! Connection that reaches the same tenant ([`crate::resources::connection::ConnectionSpec::tenant`]).
//!
//! The check reads an index kept from the controllers' own watch events, never the apiserver,
//! and costs a map lookup per claimed id rather than a scan of every cached object (a scan per
//! reconcile made a 10,000-resource rollout quadratic).

use std::any::{Any, TypeId};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use crate::controller::runtime::shards::{Shards, namespace_key};

use kube::ResourceExt;
use kube::runtime::reflector::Store;
use kube::runtime::watcher;

use crate::resources::common::{CreateAttempt, Governed, condition::STALLED, find_condition};
use crate::resources::guardrail::GuardrailKind;
use crate::resources::{
    ApiKey, ClusterGuardrail, Config, ConfigRollout, Connection, Deployment, Guardrail,
    Integration, McpIntegration, McpServer, Provider, RateLimitsPolicy, SecretReference,
    UsageLimitsPolicy, Workspace,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

/// The watch caches of one kind: one store per watched namespace (or one for all), and the
/// index of which resource claims which remote object.
pub struct StoreList<K: Cached> {
    stores: RwLock<Vec<Store<K>>>,
    claims: Mutex<ClaimIndex>,
    /// With `--shards`, the share the caches keep ([`crate::controller::runtime::shard_cache`]).
    share: OnceLock<Shards>,
}

/// What a reflector store can hold.
pub trait Cached: kube::Resource<DynamicType = ()> + Clone + 'static {}
impl<K: kube::Resource<DynamicType = ()> + Clone + 'static> Cached for K {}

impl<K: Cached> Default for StoreList<K> {
    fn default() -> Self {
        Self {
            stores: RwLock::new(Vec::new()),
            claims: Mutex::new(ClaimIndex::default()),
            share: OnceLock::new(),
        }
    }
}

impl<K: Cached> StoreList<K> {
    /// Adds one watch cache; returns its stream number, for [`StoreList::index_event`].
    pub fn register(&self, store: Store<K>) -> usize {
        let mut stores = self.stores.write().unwrap_or_else(|e| e.into_inner());
        stores.push(store);
        stores.len() - 1
    }

    /// The caches keep the share of `shards` only.
    pub fn keep_share(&self, shards: Shards) {
        let _ = self.share.set(shards);
    }

    /// True when the caches hold every object of the kind (no `--shards`), so an object absent
    /// from them is absent.
    pub fn whole(&self) -> bool {
        self.share.get().is_none()
    }

    /// True when the caches hold the objects of `namespace` and follow them.
    pub fn holds(&self, namespace: &str) -> bool {
        self.share
            .get()
            .is_none_or(|shards| shards.holds(&namespace_key(namespace)))
    }

    fn snapshot(&self) -> Vec<Store<K>> {
        self.stores
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The object named `name` (cluster-scoped kinds), from caches that have listed once.
    /// `None` when no cache is registered or one has not filled yet: the caller then reads the
    /// apiserver, rather than taking an empty cache for "no such object".
    pub async fn find(&self, name: &str) -> Option<Option<std::sync::Arc<K>>> {
        let stores = self.snapshot();
        if stores.is_empty() || !all_listed(&stores).await {
            return None;
        }
        Some(
            stores
                .iter()
                .find_map(|s| s.find(|o| o.meta().name.as_deref() == Some(name))),
        )
    }

    /// The object `namespace`/`name` (namespaced kinds), from caches that have listed once;
    /// `None` as for [`Self::find`].
    /// With `--shards`, `None` as well for a namespace outside the share.
    pub async fn find_in(&self, namespace: &str, name: &str) -> Option<Option<std::sync::Arc<K>>> {
        let wanted = kube::runtime::reflector::ObjectRef::new(name).within(namespace);
        let stores = self.snapshot();
        if stores.is_empty() || !self.holds(namespace) || !all_listed(&stores).await {
            return None;
        }
        let found = stores.iter().find_map(|s| s.get(&wanted));
        // A share moved while it read: an absence may be a copy dropped meanwhile.
        self.holds(namespace).then_some(found)
    }

    /// True once `expected` watch caches of the kind are registered and every one has listed:
    /// until then the claim index may lack a namespace, and no ownership decision can be made.
    /// Waits up to `within`.
    pub async fn listed(&self, expected: usize, within: std::time::Duration) -> bool {
        let stores = self.snapshot();
        if stores.len() < expected {
            return false;
        }
        tokio::time::timeout(
            within,
            futures::future::join_all(stores.iter().map(Store::wait_until_ready)),
        )
        .await
        .is_ok_and(|all| all.iter().all(Result::is_ok))
    }

    /// True when `expected` watch caches of the kind are registered and every one has listed,
    /// now (no wait): before that, an object missing from them may yet exist.
    pub fn listed_now(&self, expected: usize) -> bool {
        use futures::FutureExt;
        let stores = self.snapshot();
        stores.len() >= expected
            && stores.iter().all(|store| {
                let ready = store.wait_until_ready().now_or_never();
                matches!(ready, Some(Ok(())))
            })
    }

    /// True once the watch caches no longer hold `object` (by namespace and name): its watch
    /// reported it deleted. False while any holds it, or when no cache is registered.
    pub fn lost(&self, object: &K) -> bool {
        let wanted = kube::runtime::reflector::ObjectRef::from_obj(object);
        let stores = self.snapshot();
        !stores.is_empty() && stores.iter().all(|store| store.get(&wanted).is_none())
    }

    /// Every cached object of the kind, across the registered stores.
    pub fn all(&self) -> Vec<std::sync::Arc<K>> {
        self.snapshot()
            .iter()
            .flat_map(|store| store.state())
            .collect()
    }
}

impl<K: Claims> StoreList<K> {
    /// Keeps the claim index in step with watch stream `stream` (from `register`), every object
    /// taken as this installation's own.
    pub fn index_event(&self, stream: usize, event: &watcher::Event<K>) {
        self.index(stream, event, true);
    }

    fn index(&self, stream: usize, event: &watcher::Event<K>, ours: bool) {
        let mut index = self.claims.lock().unwrap_or_else(|e| e.into_inner());
        match event {
            watcher::Event::Apply(o) | watcher::Event::InitApply(o) => {
                index.upsert(stream, o, ours)
            }
            watcher::Event::Delete(o) => index.remove(&o.uid().unwrap_or_default()),
            watcher::Event::Init => index.begin(stream),
            watcher::Event::InitDone => index.finish(stream),
        }
    }

    /// [`StoreList::index_event`] as `installation` sees it: an object another installation
    /// claimed claims nothing here. Its name in that installation's tenant is not one in this
    /// one's, even under the same Connection name (`default` is each installation's own), so it
    /// neither makes this installation's objects `AlreadyManaged` nor stops a create lookup.
    pub fn index_event_as(
        &self,
        installation: &crate::controller::state::installation::Installation,
        stream: usize,
        event: &watcher::Event<K>,
    ) {
        use crate::controller::state::installation::Claim;
        match event {
            watcher::Event::Apply(o) | watcher::Event::InitApply(o) => {
                match installation.claim_on(o) {
                    Claim::Theirs(_) => {
                        let mut index = self.claims.lock().unwrap_or_else(|e| e.into_inner());
                        index.remove(&o.uid().unwrap_or_default());
                    }
                    claim => self.index(stream, event, claim == Claim::Ours),
                }
            }
            _ => self.index(stream, event, false),
        }
    }

    /// Forgets the claims of the resource of uid `uid`.
    pub fn unindex(&self, uid: &str) {
        let mut index = self.claims.lock().unwrap_or_else(|e| e.into_inner());
        index.remove(uid);
    }

    /// True when another resource than `object` of this installation, reaching the tenant
    /// through one of `connections`, has a create in flight that sent `sent`'s name (and
    /// workspace, and slug: where both sent one, another slug made another object). From the
    /// index, which sees every namespace: with `--shards` the caches hold this replica's share
    /// only, and another replica's create must hold this one's lookup.
    pub fn attempted_elsewhere(
        &self,
        object: &K,
        connections: &[String],
        sent: &CreateAttempt,
    ) -> bool {
        let uid = object.uid().unwrap_or_default();
        let index = self.claims.lock().unwrap_or_else(|e| e.into_inner());
        let name = sent.name.as_deref().map(Box::from);
        index.attempts.get(&name).is_some_and(|attempts| {
            attempts.iter().any(|theirs| {
                *theirs.uid != *uid
                    && connections.iter().any(|c| **c == *theirs.connection)
                    && same_or_unknown(&theirs.workspace_id, &sent.workspace_id)
                    && same_or_unknown(&theirs.slug, &sent.slug)
            })
        })
    }

    /// The `namespace/name` (`/name` for a cluster-scoped kind) of the senior other resource
    /// claiming what `object` claims ([`ClaimIndex::owner_of`]). The index names it: with
    /// `--shards` the caches may not hold it, and a re-list keeps what it lists aside until it
    /// ends.
    fn owner_of(&self, object: &K, connections: &[String]) -> Option<String> {
        self.claims
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .owner_of(object, connections)
    }

    /// True when a resource other than `object` records or names `id` through one of
    /// `connections`: a create lookup must not take it for its own.
    pub fn claimed_by_other(&self, object: &K, connections: &[String], id: &str) -> bool {
        let uid = object.uid().unwrap_or_default();
        let index = self.claims.lock().unwrap_or_else(|e| e.into_inner());
        connections.iter().any(|connection| {
            index
                .by_key
                .get(&*claim_key(connection, id))
                .is_some_and(|claimants| claimants.iter().any(|c| *c.2 != *uid))
        })
    }
}

/// A resource that manages its object ranks first (tier 0), then one that does not (1), then
/// one that never managed it and is refused by its grants (2); then older first; the uid
/// breaks ties between objects created in the same second. The uid is shared with the index's
/// other entries for the resource.
type Seniority = (u8, Option<jiff::Timestamp>, Arc<str>);

/// One resource's claims, as last seen on its watch stream.
struct Claim {
    stream: usize,
    /// The list (epoch) of its stream that last showed it.
    epoch: u64,
    /// The keys of [`ClaimIndex::by_key`] it is under (the same allocations).
    keys: Vec<Arc<str>>,
    seniority: Seniority,
    /// `namespace/name`, to name it as an owner.
    name: Box<str>,
    /// The key of [`ClaimIndex::attempts`] its create in flight is under.
    attempt: Option<Option<Box<str>>>,
    acts_in: ActsIn,
}

/// The workspaces a resource acts in, which hold them against their archive.
struct ActsIn {
    /// Its grants refuse it and it never managed its object: it never acted in them.
    refused: bool,
    /// `spec.workspaceRef`.
    workspace_ref: Option<Box<str>>,
    /// The workspace ids or slugs its spec names.
    workspaces: Box<[Box<str>]>,
}

/// A create in flight: who sent it, through which Connection, into which workspace, with
/// which slug.
struct Attempt {
    uid: Arc<str>,
    connection: Box<str>,
    workspace_id: Option<Box<str>>,
    slug: Option<Box<str>>,
}

/// Both name the same thing, or one of them names none (so it may be the same). Case is not
/// told apart: nothing says the API keeps two names that differ only in case apart.
fn same_or_unknown(theirs: &Option<Box<str>>, sent: &Option<String>) -> bool {
    match (theirs, sent) {
        (Some(theirs), Some(sent)) => theirs.eq_ignore_ascii_case(sent),
        _ => true,
    }
}

/// A key of [`ClaimIndex::by_key`]: a Connection's name and a remote id in one string (a
/// Kubernetes name holds no newline), so an entry costs one allocation, shared with the
/// claim that lists it.
fn claim_key(connection: &str, id: &str) -> Arc<str> {
    Arc::from(format!("{connection}\n{id}"))
}

/// Who claims what: `(connection, remote id)` → claimants, senior first (a sorted `Vec`: almost
/// always one claimant, where a set would cost a tree node per id).
#[derive(Default)]
struct ClaimIndex {
    by_uid: HashMap<Arc<str>, Claim>,
    by_key: HashMap<Arc<str>, Vec<Seniority>>,
    /// The creates in flight of this installation's resources, by the name they sent.
    attempts: HashMap<Option<Box<str>>, Vec<Attempt>>,
    /// Per stream, the number of the list in progress or last completed.
    epochs: HashMap<usize, u64>,
    /// The streams that completed a list: the index holds every object they watch.
    finished: std::collections::HashSet<usize>,
}

impl ClaimIndex {
    /// Everything of `object` is read before the index changes, so a panic in reading it (a
    /// bug its spec trips, kept to the object by the watch) leaves the index as it was rather
    /// than with entries no uid leads to.
    fn upsert<K: Claims>(&mut self, stream: usize, object: &K, ours: bool) {
        let uid = object.uid().unwrap_or_default();
        let connection = object.connection_name();
        let keys: Vec<Arc<str>> = object
            .claimed_ids()
            .iter()
            .map(|id| claim_key(connection, id))
            .collect();
        let seniority = seniority(object);
        let sent = object.create_attempt().filter(|_| ours).map(|sent| {
            let attempt = Attempt {
                uid: seniority.2.clone(),
                connection: connection.into(),
                workspace_id: sent.workspace_id.as_deref().map(Box::from),
                slug: sent.slug.as_deref().map(Box::from),
            };
            (sent.name.as_deref().map(Box::from), attempt)
        });
        let name = format!(
            "{}/{}",
            object.namespace().unwrap_or_default(),
            object.name_any()
        );
        let acts_in = ActsIn {
            refused: refused_by_grants(object),
            workspace_ref: object.workspace_ref().map(Box::from),
            workspaces: object
                .workspaces()
                .into_iter()
                .filter_map(|(_, ws)| Some(ws?.into_boxed_str()))
                .collect(),
        };

        self.remove(&uid);
        let attempt = sent.map(|(sent_name, attempt)| {
            let attempts = self.attempts.entry(sent_name.clone()).or_default();
            attempts.push(attempt);
            sent_name
        });
        for key in &keys {
            let claimants = self.by_key.entry(key.clone()).or_default();
            if let Err(at) = claimants.binary_search(&seniority) {
                claimants.insert(at, seniority.clone());
            }
        }
        let claim = Claim {
            stream,
            epoch: self.epochs.get(&stream).copied().unwrap_or_default(),
            keys,
            seniority,
            name: name.into(),
            attempt,
            acts_in,
        };
        self.by_uid.insert(claim.seniority.2.clone(), claim);
    }

    fn remove(&mut self, uid: &str) {
        let Some(claim) = self.by_uid.remove(uid) else {
            return;
        };
        if let Some(name) = &claim.attempt
            && let Some(attempts) = self.attempts.get_mut(name)
        {
            attempts.retain(|a| *a.uid != *uid);
            if attempts.is_empty() {
                self.attempts.remove(name);
            }
        }
        for key in claim.keys {
            if let Some(claimants) = self.by_key.get_mut(&*key) {
                claimants.retain(|c| *c != claim.seniority);
                if claimants.is_empty() {
                    self.by_key.remove(&*key);
                }
            }
        }
    }

    /// A re-list of `stream` starts: what it does not show again by `finish` is gone.
    fn begin(&mut self, stream: usize) {
        *self.epochs.entry(stream).or_default() += 1;
    }

    fn finish(&mut self, stream: usize) {
        self.finished.insert(stream);
        let epoch = self.epochs.get(&stream).copied().unwrap_or_default();
        let stale: Vec<Arc<str>> = self
            .by_uid
            .iter()
            .filter(|(_, c)| c.stream == stream && c.epoch < epoch)
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in stale {
            self.remove(&uid);
        }
    }

    /// The name of the senior other resource claiming any of what `object` claims through any
    /// of `connections` (those reaching its tenant), when senior to it.
    fn owner_of<K: Claims>(&self, object: &K, connections: &[String]) -> Option<String> {
        let mine = seniority(object);
        let ids = object.claimed_ids();
        // The index may hold a newer copy of the object itself (after its own intent write),
        // ranked differently: never its own rival.
        let senior = connections
            .iter()
            .flat_map(|connection| {
                ids.iter()
                    .filter_map(|id| self.by_key.get(&*claim_key(connection, id)))
            })
            .filter_map(|claimants| claimants.iter().find(|c| c.2 != mine.2))
            .filter(|senior| **senior < mine)
            .min()?;
        self.by_uid.get(&senior.2).map(|c| c.name.to_string())
    }
}

/// The watch caches of every kind: the Connections', and one [`StoreList`] per managed kind of
/// [`crate::registry::KINDS`] (its `store` entry), found by type with [`Stores::of`].
pub struct Stores {
    pub connections: StoreList<Connection>,
    /// The ConfigRollouts' (a driven kind, with no claims): what an ApiKey reads to know
    /// whether the rollout its annotation names holds it, and a Config whether one names it.
    pub rollouts: StoreList<ConfigRollout>,
    kinds: HashMap<TypeId, Box<dyn KindStore>>,
}

/// What every kind's watch caches answer, whatever the kind: the questions asked across kinds.
pub trait KindStore: Send + Sync {
    fn as_any(&self) -> &dyn Any;
    /// The resources of the claim index that act in a workspace one of `keys` (its UUID, its
    /// slug) names, or that name the Workspace resource `resource` (`spec.workspaceRef`), as
    /// `Kind namespace/name`. Neither another installation's resources (the index leaves them
    /// out) nor ones their grants refuse count: they never acted in the workspace through this
    /// installation.
    fn naming_workspace(&self, keys: &BTreeSet<&str>, resource: &str) -> Vec<String>;
    /// True once the claim index holds every object of the kind: each of its watch streams (one
    /// per watched namespace of `namespaces`, or one for a cluster-scoped kind) listed once.
    fn indexed(&self, namespaces: usize) -> bool;
    /// Ends a list of stream `stream` in the claim index (tests).
    #[cfg(test)]
    fn listed_once(&self, stream: usize);
}

impl<K: Claims + Send + Sync> KindStore for StoreList<K>
where
    K::Scope: 'static,
{
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn indexed(&self, namespaces: usize) -> bool {
        let namespaced =
            TypeId::of::<K::Scope>() == TypeId::of::<k8s_openapi::NamespaceResourceScope>();
        let streams = if namespaced { namespaces } else { 1 };
        let index = self.claims.lock().unwrap_or_else(|e| e.into_inner());
        index.finished.len() >= streams
    }

    #[cfg(test)]
    fn listed_once(&self, stream: usize) {
        self.index_event(stream, &watcher::Event::InitDone);
    }

    fn naming_workspace(&self, keys: &BTreeSet<&str>, resource: &str) -> Vec<String> {
        // From the claim index, which sees every namespace (with `--shards`, the caches hold
        // this replica's share only).
        let index = self.claims.lock().unwrap_or_else(|e| e.into_inner());
        index
            .by_uid
            .values()
            .filter(|claim| {
                let acts_in = &claim.acts_in;
                !acts_in.refused
                    && (acts_in.workspace_ref.as_deref() == Some(resource)
                        || acts_in.workspaces.iter().any(|ws| keys.contains(&**ws)))
            })
            .map(|claim| {
                let name = claim.name.strip_prefix('/').unwrap_or(&claim.name);
                format!("{} {name}", K::kind(&()))
            })
            .collect()
    }
}

/// A kind's entry of [`Stores`]: what a registry line's `store` makes.
pub type StoreEntry = (TypeId, Box<dyn KindStore>);

/// The empty [`StoreList`] of `K`, keyed by its type: the `store` of `K`'s registry line.
pub fn store_of<K: Claims + Send + Sync>() -> StoreEntry
where
    K::Scope: 'static,
{
    (TypeId::of::<K>(), Box::new(StoreList::<K>::default()))
}

impl Default for Stores {
    /// A store for every managed kind of the registry.
    fn default() -> Self {
        Self {
            connections: StoreList::default(),
            rollouts: StoreList::default(),
            kinds: crate::registry::KINDS
                .iter()
                .filter_map(|k| k.store)
                .map(|store| store())
                .collect(),
        }
    }
}

impl Stores {
    /// The watch caches of `K`. Panics when `K` has no registry line with a `store`: a kind's
    /// controllers are started from the same line, so nothing reaches here for such a kind.
    pub fn of<K: Cached>(&self) -> &StoreList<K> {
        self.kinds
            .get(&TypeId::of::<K>())
            .and_then(|store| store.as_any().downcast_ref())
            .unwrap_or_else(|| {
                panic!(
                    "{} has no watch cache: it has no `store` in registry::KINDS",
                    std::any::type_name::<K>()
                )
            })
    }

    /// True when `K` has a watch cache (a managed kind of the registry).
    pub fn holds<K: Cached>(&self) -> bool {
        self.kinds
            .get(&TypeId::of::<K>())
            .is_some_and(|store| store.as_any().is::<StoreList<K>>())
    }

    /// Every resource, of any kind, acting in the workspace `keys` name (its UUID and slug), or
    /// naming the Workspace resource `resource` by `spec.workspaceRef`: what holds a Workspace
    /// against its archive. Sorted. `None` until the claim index of every kind holds every
    /// object (`namespaces`: how many namespaces are watched, one stream each).
    pub fn naming_workspace(
        &self,
        keys: &BTreeSet<&str>,
        resource: &str,
        namespaces: usize,
    ) -> Option<Vec<String>> {
        if !self.kinds.values().all(|store| store.indexed(namespaces)) {
            return None;
        }
        let mut holders: Vec<String> = self
            .kinds
            .values()
            .flat_map(|store| store.naming_workspace(keys, resource))
            .collect();
        holders.sort();
        Some(holders)
    }
}

/// A kind whose resources claim remote objects, in workspaces: what ownership and grants are
/// decided on. It knows nothing of the reconcile driver, so the claim index depends on the
/// resources alone.
pub trait Claims: Cached {
    /// Name of the Connection this object uses.
    fn connection_name(&self) -> &str;
    /// True when it recorded its remote object (an id in its status) or has a create or
    /// rotation in flight.
    fn manages(&self) -> bool;
    /// Its status conditions.
    fn conditions(&self) -> &[Condition];
    /// The installation its status records as the one that manages it
    /// ([`crate::controller::state::installation`]), if one does.
    fn recorded_installation(&self) -> Option<&str>;
    /// True on a prepared copy whose `aigw.io/installation` annotation named the recorded
    /// installation and was dropped ([`crate::resources::managed_status::ClaimAnnotated`]).
    fn claim_annotated(&self) -> bool {
        false
    }
    /// What its create in flight sent, while one is in flight.
    fn create_attempt(&self) -> Option<&CreateAttempt>;
    /// The store list of this kind.
    fn stores(stores: &Stores) -> &StoreList<Self> {
        stores.of::<Self>()
    }
    /// The remote identities this resource claims (spec ids it adopts, ids it recorded).
    fn claimed_ids(&self) -> Vec<String>;
    /// The spec field and id of the existing remote object it adopts, if it adopts one.
    fn adopted(&self) -> Option<(&'static str, String)>;
    /// The workspaces it acts in, each with the spec field naming it (`None`: not set).
    fn workspaces(&self) -> Vec<(&'static str, Option<String>)>;
    /// The spec field that makes it organisation-wide (a default gateway), when set: that
    /// needs the grant `allowDefault`.
    fn organisation_wide(&self) -> Option<&'static str> {
        None
    }
    /// The Workspace resource its `spec.workspaceRef` names, instead of a workspace id
    /// ([`crate::controller::driver::reach`] resolves it).
    fn workspace_ref(&self) -> Option<&str> {
        None
    }
    /// Writes the UUID its `spec.workspaceRef` resolved to into `spec.workspaceId` of the copy
    /// a reconcile acts on: from the reach on, every rule and call sees the workspace by id.
    fn reach_workspace(&mut self, _id: String) {}
}

/// The spec field naming the workspace of a kind that takes `spec.workspaceId` or
/// `spec.workspaceRef`, and [`Claims::workspace_ref`] and [`Claims::reach_workspace`] for it
/// (`|o| expr` is its spec).
macro_rules! workspace_named {
    (|$o:ident| $spec:expr) => {
        fn workspace_ref(&self) -> Option<&str> {
            let $o = self;
            $spec.workspace_ref.as_ref().map(|r| r.name.as_str())
        }
        fn reach_workspace(&mut self, id: String) {
            let $o = self;
            $spec.workspace_id = Some(id);
        }
    };
}

/// The field a grant refusal names for the workspace of `object`: `spec.workspaceRef` when the
/// spec names it by resource (its `spec.workspaceId` is then what the reach resolved).
fn workspace_field<K: Claims>(object: &K) -> &'static str {
    match object.workspace_ref() {
        Some(_) => "spec.workspaceRef",
        None => "spec.workspaceId",
    }
}

/// The resource (`namespace/name`, `/name` for a cluster-scoped kind) that owns what `object`
/// claims, when it is another one. `connections` are the names of the Connections reaching the
/// same tenant as the object's (its own included).
pub fn owned_by_another<K: Claims>(
    object: &K,
    stores: &Stores,
    connections: &[String],
) -> Option<String> {
    K::stores(stores).owner_of(object, connections)
}

/// A claimant that never managed its object and whose grants refuse its current spec ranks
/// after every other claimant, so it cannot keep an allowed claimant from the object. It still
/// ranks among the refused: when a grant is widened, the refusals recorded before are stale
/// for a moment, and of two refused claimants admitted at once only the senior may act.
/// Nor does such an object hold anything it names against deletion (an Integration its
/// Provider would bind, a ClusterGuardrail its Config would use): it never used it remotely.
pub fn refused_by_grants<K: Claims>(object: &K) -> bool {
    if object.manages() {
        return false;
    }
    let generation = object.meta().generation;
    find_condition(object.conditions(), STALLED).is_some_and(|c| {
        c.status == "True"
            && c.observed_generation == generation
            && crate::controller::state::connections::GRANT_REFUSALS.contains(&c.reason.as_str())
    })
}

fn seniority<K: Claims>(object: &K) -> Seniority {
    let tier = match (object.manages(), refused_by_grants(object)) {
        (true, _) => 0,
        (false, false) => 1,
        (false, true) => 2,
    };
    (
        tier,
        object.meta().creation_timestamp.as_ref().map(|t| t.0),
        object.uid().unwrap_or_default().into(),
    )
}

/// Waits (briefly) for every one of `stores` to have listed once: false when one has not.
async fn all_listed<K: Cached>(stores: &[Store<K>]) -> bool {
    for store in stores {
        let ready = tokio::time::timeout(
            std::time::Duration::from_millis(200),
            store.wait_until_ready(),
        )
        .await;
        if !matches!(ready, Ok(Ok(()))) {
            return false;
        }
    }
    true
}

fn ids(values: [Option<&String>; 3]) -> Vec<String> {
    let mut ids: Vec<String> = values.into_iter().flatten().cloned().collect();
    ids.sort();
    ids.dedup();
    ids
}

/// The `Claims` methods every kind reads the same way from its spec and status
/// (`spec.connectionRef`, `status.conditions`, `status.pendingCreate`/`createAttempt`).
macro_rules! status_claims {
    () => {
        fn create_attempt(&self) -> Option<&CreateAttempt> {
            self.status
                .as_ref()
                .filter(|s| s.pending_create.is_some())
                .and_then(|s| s.create_attempt.as_deref())
        }
        fn connection_name(&self) -> &str {
            self.spec.connection_name()
        }
        fn conditions(&self) -> &[Condition] {
            self.status
                .as_ref()
                .map_or(&[], |s| s.conditions.as_slice())
        }
        fn recorded_installation(&self) -> Option<&str> {
            self.status.as_ref().and_then(|s| s.installation.as_deref())
        }
        fn claim_annotated(&self) -> bool {
            self.status.as_ref().is_some_and(|s| s.claim_annotated.0)
        }
    };
}

/// `manages` and `claimed_ids` of a kind that records a UUID and a slug and may name a slug
/// in `spec.slug`.
macro_rules! slug_claims {
    () => {
        fn manages(&self) -> bool {
            self.status
                .as_ref()
                .is_some_and(|s| s.id.is_some() || s.slug.is_some() || s.pending_create.is_some())
        }
        fn claimed_ids(&self) -> Vec<String> {
            let status = self.status.as_ref();
            ids([
                self.spec.slug.as_ref(),
                status.and_then(|s| s.slug.as_ref()),
                status.and_then(|s| s.id.as_ref()),
            ])
        }
    };
}

impl Claims for Config {
    status_claims!();
    slug_claims!();
    fn adopted(&self) -> Option<(&'static str, String)> {
        self.spec
            .slug
            .clone()
            .map(|slug| (<Self as Governed>::NAMED_BY, slug))
    }
    fn workspaces(&self) -> Vec<(&'static str, Option<String>)> {
        vec![(workspace_field(self), self.spec.workspace_id.clone())]
    }
    workspace_named!(|o| o.spec);
}

impl Claims for Deployment {
    status_claims!();
    fn manages(&self) -> bool {
        self.status.as_ref().is_some_and(|s| {
            s.id.is_some() || s.pending_create.is_some() || s.rotation.pending_rotation.is_some()
        })
    }
    fn claimed_ids(&self) -> Vec<String> {
        let status = self.status.as_ref();
        ids([
            self.spec.deployment_id.as_ref(),
            status.and_then(|s| s.id.as_ref()),
            status.and_then(|s| s.slug.as_ref()),
        ])
    }
    fn adopted(&self) -> Option<(&'static str, String)> {
        self.spec
            .deployment_id
            .clone()
            .map(|id| (<Self as Governed>::NAMED_BY, id))
    }
    /// The workspaces whose requests the gateway may serve: each must be granted, and
    /// `allowAllWorkspaces` needs a grant of every workspace.
    fn workspaces(&self) -> Vec<(&'static str, Option<String>)> {
        let Some(auth) = &self.spec.auth_settings else {
            return Vec::new();
        };
        let mut workspaces: Vec<(&'static str, Option<String>)> = auth
            .workspaces_allowed
            .iter()
            .flatten()
            .map(|ws| ("spec.authSettings.workspacesAllowed", Some(ws.clone())))
            .collect();
        // A JWT subject mapped to a workspace is let into that workspace.
        workspaces.extend(
            auth.jwt_sub_workspace_mapping
                .iter()
                .flatten()
                .map(|(_, ws)| ("spec.authSettings.jwtSubWorkspaceMapping", Some(ws.clone()))),
        );
        if auth.allow_all_workspaces == Some(true) {
            workspaces.push(("spec.authSettings.allowAllWorkspaces", Some("*".into())));
        }
        workspaces
    }
    fn organisation_wide(&self) -> Option<&'static str> {
        (self.spec.is_default == Some(true)).then_some("spec.isDefault")
    }
}

/// `Claims` of a policy kind: a UUID in `status.id`, adopted by `spec.policyId`, in the one
/// workspace `spec.workspaceId` names.
macro_rules! policy_claims {
    ($kind:ty) => {
        impl Claims for $kind {
            status_claims!();
            fn manages(&self) -> bool {
                self.status
                    .as_ref()
                    .is_some_and(|s| s.id.is_some() || s.pending_create.is_some())
            }
            fn claimed_ids(&self) -> Vec<String> {
                ids([
                    self.spec.identity.policy_id.as_ref(),
                    self.status.as_ref().and_then(|s| s.id.as_ref()),
                    None,
                ])
            }
            fn adopted(&self) -> Option<(&'static str, String)> {
                self.spec
                    .identity
                    .policy_id
                    .clone()
                    .map(|id| (<Self as Governed>::NAMED_BY, id))
            }
            fn workspaces(&self) -> Vec<(&'static str, Option<String>)> {
                vec![(
                    workspace_field(self),
                    self.spec.identity.workspace_id.clone(),
                )]
            }
            workspace_named!(|o| o.spec.identity);
        }
    };
}

/// `Claims` of a guardrail kind: a slug (and UUID) in its status, adopted by `spec.slug`, in
/// the workspace `spec.workspaceId` names (none for an organisation guardrail).
macro_rules! guardrail_claims {
    ($kind:ty $(, $named:tt)?) => {
        impl Claims for $kind {
            status_claims!();
            fn manages(&self) -> bool {
                self.status.as_ref().is_some_and(|s| {
                    s.slug.is_some() || s.id.is_some() || s.pending_create.is_some()
                })
            }
            fn claimed_ids(&self) -> Vec<String> {
                let status = self.status.as_ref();
                ids([
                    self.definition().slug.as_ref(),
                    status.and_then(|s| s.slug.as_ref()),
                    status.and_then(|s| s.id.as_ref()),
                ])
            }
            fn adopted(&self) -> Option<(&'static str, String)> {
                self.definition()
                    .slug
                    .clone()
                    .map(|slug| (<Self as Governed>::NAMED_BY, slug))
            }
            fn workspaces(&self) -> Vec<(&'static str, Option<String>)> {
                match self.metadata.namespace {
                    Some(_) => vec![(workspace_field(self), self.workspace_id().map(String::from))],
                    None => Vec::new(),
                }
            }
            $(workspace_named! $named;)?
        }
    };
}

/// An API key is never adopted: it claims the UUID it recorded, in the workspace
/// `spec.workspaceId` names.
impl Claims for ApiKey {
    status_claims!();
    fn manages(&self) -> bool {
        self.status.as_ref().is_some_and(|s| {
            s.id.is_some()
                || s.replaced_key.is_some()
                || s.pending_create.is_some()
                || s.rotation.pending_rotation.is_some()
        })
    }
    fn claimed_ids(&self) -> Vec<String> {
        let status = self.status.as_ref();
        ids([
            status.and_then(|s| s.id.as_ref()),
            status.and_then(|s| s.replaced_key.as_ref()),
            None,
        ])
    }
    fn adopted(&self) -> Option<(&'static str, String)> {
        None
    }
    fn workspaces(&self) -> Vec<(&'static str, Option<String>)> {
        vec![(workspace_field(self), self.spec.workspace_id.clone())]
    }
    workspace_named!(|o| o.spec);
}

/// `Claims` of an organisation object (cluster-scoped: no workspace grant applies; an
/// Integration, SecretReference, Workspace, McpIntegration): it claims its UUID and slug, and
/// the slug `spec.slug` adopts. It acts in no workspace.
macro_rules! organisation_claims {
    ($($kind:ty),*) => {
        $(impl Claims for $kind {
            status_claims!();
            slug_claims!();
            fn adopted(&self) -> Option<(&'static str, String)> {
                self.spec.slug.clone().map(|slug| (<Self as Governed>::NAMED_BY, slug))
            }
            fn workspaces(&self) -> Vec<(&'static str, Option<String>)> {
                Vec::new()
            }
        })*
    };
}

/// `Claims` of an object a workspace holds that is created with its slug (a Provider, an
/// McpServer): it claims its UUID and slug, and the slug `spec.slug` names, in the one
/// workspace `spec.workspaceId` (or the Workspace `spec.workspaceRef` names) is. Its slug is
/// not an adoption by itself: finding one that exists is, and is checked then
/// ([`crate::controller::driver::gate::Gate::adopting`]).
macro_rules! workspace_object_claims {
    ($($kind:ty),*) => {
        $(impl Claims for $kind {
            status_claims!();
            slug_claims!();
            fn adopted(&self) -> Option<(&'static str, String)> {
                None
            }
            fn workspaces(&self) -> Vec<(&'static str, Option<String>)> {
                vec![(workspace_field(self), self.spec.workspace_id.clone())]
            }
            workspace_named!(|o| o.spec);
        })*
    };
}

organisation_claims!(Integration, SecretReference, Workspace, McpIntegration);
workspace_object_claims!(Provider, McpServer);

guardrail_claims!(Guardrail, (|o| o.spec));
guardrail_claims!(ClusterGuardrail);

policy_claims!(RateLimitsPolicy);
policy_claims!(UsageLimitsPolicy);

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::reflector::store;
    use kube::runtime::watcher::Event;

    fn config(ns: &str, name: &str, uid: &str, created: &str, slug: Option<&str>) -> Config {
        let mut c: Config = serde_json::from_value(serde_json::json!({
            "apiVersion": "aigw.io/v1alpha1", "kind": "Config",
            "metadata": {"name": name, "namespace": ns, "uid": uid, "creationTimestamp": created},
            "spec": {"name": name, "config": {"retry": {"attempts": 1}}}
        }))
        .unwrap();
        c.spec.slug = slug.map(str::to_string);
        c
    }

    fn tenant() -> Vec<String> {
        vec!["default".into()]
    }

    /// The resource that owns `object`'s remote object instead of it, in the default tenant.
    fn other_owner(object: &Config, stores: &Stores) -> Option<String> {
        owned_by_another(object, stores, &tenant())
    }

    fn stores_with(objects: &[Config]) -> Stores {
        let (reader, mut writer) = store::<Config>();
        for o in objects {
            writer.apply_watcher_event(&Event::Apply(o.clone()));
        }
        let stores = Stores::default();
        let stream = stores.of::<Config>().register(reader);
        for o in objects {
            stores
                .of::<Config>()
                .index_event(stream, &Event::Apply(o.clone()));
        }
        stores
    }

    /// `config` of installation `main` with a create in flight that sent `name` into
    /// `workspace`.
    fn creating(mut c: Config, name: &str, workspace: Option<&str>) -> Config {
        c.status = Some(
            serde_json::from_value(serde_json::json!({
                "installation": "main",
                "pendingCreate": "intent-1",
                "createAttempt": {"name": name, "workspaceId": workspace},
            }))
            .unwrap(),
        );
        c
    }

    #[test]
    fn caches_are_listed_now_only_once_every_one_has_listed() {
        let stores = Stores::default();
        let configs = stores.of::<Config>();
        assert!(!configs.listed_now(1), "none registered");
        let (reader, mut writer) = store::<Config>();
        configs.register(reader);
        assert!(!configs.listed_now(1), "registered, not listed");
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitDone);
        assert!(configs.listed_now(1));
        assert!(
            !configs.listed_now(2),
            "a second namespace's cache is missing"
        );
    }

    #[test]
    fn a_create_in_flight_of_another_slug_made_another_object() {
        use crate::controller::state::installation::Installation;
        let mut other = creating(
            config("dev", "b", "u2", "2026-01-02T00:00:00Z", None),
            "shared",
            None,
        );
        let attempt = other
            .status
            .as_mut()
            .unwrap()
            .managed
            .create_attempt
            .as_mut();
        attempt.unwrap().slug = Some("theirs".into());
        let mine = config("prod", "a", "u1", "2026-01-01T00:00:00Z", None);
        let list = stores_with(std::slice::from_ref(&mine));
        let list = list.of::<Config>();
        let installation = Installation::new("main", None).unwrap();
        list.index_event_as(&installation, 0, &Event::Apply(other));
        let sent = |slug: Option<&str>| CreateAttempt {
            name: Some("shared".into()),
            slug: slug.map(str::to_string),
            ..Default::default()
        };
        assert!(!list.attempted_elsewhere(&mine, &tenant(), &sent(Some("mine"))));
        assert!(list.attempted_elsewhere(&mine, &tenant(), &sent(Some("theirs"))));
        assert!(list.attempted_elsewhere(&mine, &tenant(), &sent(Some("Theirs"))));
        assert!(list.attempted_elsewhere(&mine, &tenant(), &sent(None)));
    }

    #[test]
    fn a_create_in_flight_is_seen_from_every_namespace_through_the_index() {
        use crate::controller::state::installation::Installation;
        let sent = |name: &str, workspace: Option<&str>| CreateAttempt {
            name: Some(name.into()),
            workspace_id: workspace.map(str::to_string),
            ..Default::default()
        };
        let mine = config("prod", "a", "u1", "2026-01-01T00:00:00Z", None);
        let other = creating(
            config("dev", "b", "u2", "2026-01-02T00:00:00Z", None),
            "shared",
            Some("ws-1"),
        );
        // The index alone heard of the other (another shard's, not cached here).
        let stores = stores_with(std::slice::from_ref(&mine));
        let list = stores.of::<Config>();
        let installation = Installation::new("main", None).unwrap();
        list.index_event_as(&installation, 0, &Event::Apply(other.clone()));
        assert!(list.attempted_elsewhere(&mine, &tenant(), &sent("shared", Some("ws-1"))));
        assert!(list.attempted_elsewhere(&mine, &tenant(), &sent("shared", None)));
        assert!(!list.attempted_elsewhere(&mine, &tenant(), &sent("shared", Some("ws-2"))));
        assert!(!list.attempted_elsewhere(&mine, &tenant(), &sent("other", Some("ws-1"))));
        // A slug the other create did not send (it sent none here) may still be its.
        let slugged = CreateAttempt {
            slug: Some("mine".into()),
            ..sent("shared", None)
        };
        assert!(list.attempted_elsewhere(&mine, &tenant(), &slugged));
        assert!(!list.attempted_elsewhere(&mine, &["elsewhere".into()], &sent("shared", None)));
        // Its own attempt is not another's.
        assert!(!list.attempted_elsewhere(&other, &tenant(), &sent("shared", None)));
        // Another installation's create, or one no installation claims, holds nothing here.
        for installation in ["other", "main"] {
            let observer = Installation::new(installation, None).unwrap();
            let mut foreign = other.clone();
            foreign.status.as_mut().unwrap().managed.installation = Some("other".into());
            list.index_event_as(&observer, 0, &Event::Apply(foreign));
            assert_eq!(
                list.attempted_elsewhere(&mine, &tenant(), &sent("shared", None)),
                installation == "other",
                "{installation}"
            );
        }
        let mut unclaimed = other.clone();
        unclaimed.status.as_mut().unwrap().managed.installation = None;
        list.index_event_as(&installation, 0, &Event::Apply(unclaimed));
        assert!(!list.attempted_elsewhere(&mine, &tenant(), &sent("shared", None)));
        // Settled, or deleted: gone from the index.
        list.index_event_as(&installation, 0, &Event::Apply(other.clone()));
        let settled = config("dev", "b", "u2", "2026-01-02T00:00:00Z", None);
        list.index_event_as(&installation, 0, &Event::Apply(settled.clone()));
        assert!(!list.attempted_elsewhere(&mine, &tenant(), &sent("shared", None)));
        list.index_event_as(&installation, 0, &Event::Apply(other.clone()));
        list.index_event_as(&installation, 0, &Event::Delete(other));
        assert!(!list.attempted_elsewhere(&mine, &tenant(), &sent("shared", None)));
    }

    #[test]
    fn the_oldest_claimant_owns_and_the_uid_breaks_ties() {
        let prod = config("prod", "a", "u2", "2026-01-01T00:00:00Z", Some("pc-x"));
        let dev = config("dev", "a", "u1", "2026-01-02T00:00:00Z", Some("pc-x"));
        let twin = config("qa", "a", "u0", "2026-01-01T00:00:00Z", Some("pc-x"));
        let stores = stores_with(&[prod.clone(), dev.clone()]);
        assert_eq!(other_owner(&prod, &stores), None);
        assert_eq!(other_owner(&dev, &stores).as_deref(), Some("prod/a"));
        let stores = stores_with(&[prod.clone(), twin.clone()]);
        assert_eq!(other_owner(&prod, &stores).as_deref(), Some("qa/a"));
        assert_eq!(other_owner(&twin, &stores), None);
    }

    #[test]
    fn an_object_another_installation_claimed_claims_nothing_here() {
        use crate::controller::state::installation::{ANNOTATION, Installation};
        let claimed = |mut c: Config, id: &str| {
            c.metadata.annotations = Some([(ANNOTATION.to_string(), id.to_string())].into());
            c
        };
        // Both name no Connection: `default` is each installation's own tenant.
        let theirs = claimed(
            config("b", "a", "u1", "2026-01-01T00:00:00Z", Some("pc-x")),
            "other",
        );
        let mine = claimed(
            config("a", "a", "u2", "2026-01-02T00:00:00Z", Some("pc-x")),
            "me",
        );
        let me = Installation::new("me", None).unwrap();
        let stores = Stores::default();
        let (reader, mut writer) = store::<Config>();
        let stream = stores.of::<Config>().register(reader);
        // As the watch does: the index hears of a copy, then the cache keeps it.
        let mut hear = |o: &Config| {
            stores
                .of::<Config>()
                .index_event_as(&me, stream, &Event::Apply(o.clone()));
            writer.apply_watcher_event(&Event::Apply(o.clone()));
        };
        for o in [&theirs, &mine] {
            hear(o);
        }
        assert_eq!(other_owner(&mine, &stores), None);
        assert!(
            !stores
                .of::<Config>()
                .claimed_by_other(&mine, &tenant(), "pc-x")
        );
        // Unclaimed, it is a rival as before; claimed by the other installation later, no more.
        let unclaimed = config("b", "a", "u1", "2026-01-01T00:00:00Z", Some("pc-x"));
        hear(&unclaimed);
        assert_eq!(other_owner(&mine, &stores).as_deref(), Some("b/a"));
        hear(&theirs);
        assert_eq!(other_owner(&mine, &stores), None);
    }

    #[test]
    fn different_objects_or_connections_do_not_collide() {
        let a = config("prod", "a", "u1", "2026-01-01T00:00:00Z", Some("pc-x"));
        let b = config("dev", "b", "u2", "2026-01-02T00:00:00Z", Some("pc-y"));
        let mut c = config("dev", "c", "u3", "2026-01-02T00:00:00Z", Some("pc-x"));
        c.spec.connection_ref = Some(crate::resources::common::ConnectionRef {
            name: "other-tenant".into(),
        });
        let stores = stores_with(&[a, b.clone(), c.clone()]);
        assert_eq!(other_owner(&b, &stores), None);
        assert_eq!(
            owned_by_another(&c, &stores, &["other-tenant".into()]),
            None
        );
    }

    #[test]
    fn an_owner_the_cache_does_not_hold_is_named_from_the_index() {
        let older = config("prod", "a", "u1", "2026-01-01T00:00:00Z", Some("pc-x"));
        let newer = config("dev", "b", "u2", "2026-01-02T00:00:00Z", Some("pc-x"));
        // The index heard of both; the cache holds only the newer (a re-list in progress keeps
        // what it lists aside until it ends; with --shards the older is another replica's).
        let stores = stores_with(std::slice::from_ref(&newer));
        stores
            .of::<Config>()
            .index_event(0, &Event::Apply(older.clone()));
        assert_eq!(other_owner(&newer, &stores).as_deref(), Some("prod/a"));
        assert_eq!(other_owner(&older, &stores), None);
    }

    #[test]
    fn a_relist_forgets_claims_it_no_longer_shows() {
        let old = config("prod", "a", "u1", "2026-01-01T00:00:00Z", Some("pc-x"));
        let new = config("dev", "b", "u2", "2026-01-02T00:00:00Z", Some("pc-x"));
        let stores = stores_with(&[old.clone(), new.clone()]);
        assert_eq!(other_owner(&new, &stores).as_deref(), Some("prod/a"));
        // The watch restarts and lists only `new`: `old` was deleted while it was away.
        stores.of::<Config>().index_event(0, &Event::Init);
        stores
            .of::<Config>()
            .index_event(0, &Event::InitApply(new.clone()));
        stores.of::<Config>().index_event(0, &Event::InitDone);
        assert_eq!(other_owner(&new, &stores), None);
        stores
            .of::<Config>()
            .index_event(0, &Event::Apply(old.clone()));
        assert_eq!(other_owner(&new, &stores).as_deref(), Some("prod/a"));
        stores.of::<Config>().index_event(0, &Event::Delete(old));
        assert_eq!(other_owner(&new, &stores), None);
    }

    #[test]
    fn the_resource_that_manages_the_object_stays_its_owner() {
        let older = config("qa", "a", "u0", "2026-01-01T00:00:00Z", Some("pc-x"));
        let mut owner = config("prod", "a", "u2", "2026-01-01T00:00:00Z", Some("pc-x"));
        owner.status = Some(crate::resources::config::ConfigStatus {
            slug: Some("pc-x".into()),
            ..Default::default()
        });
        let stores = stores_with(&[older.clone(), owner.clone()]);
        assert_eq!(other_owner(&owner, &stores), None);
        assert_eq!(other_owner(&older, &stores).as_deref(), Some("prod/a"));
    }

    /// A Config whose last reconcile was refused by its grants (`AdoptionNotAllowed`).
    fn refused(ns: &str, uid: &str, created: &str) -> Config {
        let mut refused = config(ns, "a", uid, created, Some("pc-x"));
        refused.metadata.generation = Some(1);
        let mut conditions = Vec::new();
        crate::controller::driver::status::record_outcome(
            &mut conditions,
            &crate::controller::driver::status::Outcome::Stalled {
                reason: "AdoptionNotAllowed".into(),
                message: "no".into(),
            },
            Some(1),
        );
        refused.status = Some(crate::resources::config::ConfigStatus {
            managed: crate::resources::managed_status::ManagedStatus {
                conditions,
                ..Default::default()
            },
            ..Default::default()
        });
        refused
    }

    #[test]
    fn of_two_refused_claimants_admitted_at_once_only_the_senior_may_act() {
        // A grant was widened: both refusals are stale, both are reconciled at once.
        let older = refused("dev", "u1", "2026-01-01T00:00:00Z");
        let younger = refused("qa", "u2", "2026-01-02T00:00:00Z");
        let stores = stores_with(&[older.clone(), younger.clone()]);
        assert_eq!(other_owner(&older, &stores), None);
        assert_eq!(other_owner(&younger, &stores).as_deref(), Some("dev/a"));
    }

    #[test]
    fn a_claimant_refused_by_its_grants_does_not_block_an_allowed_one() {
        let refused = refused("dev", "u0", "2026-01-01T00:00:00Z");
        let mut allowed = config("prod", "a", "u2", "2026-01-02T00:00:00Z", Some("pc-x"));
        let stores = stores_with(&[refused.clone(), allowed.clone()]);
        assert_eq!(other_owner(&allowed, &stores), None);
        // Once the allowed one adopted it, it stays the owner even if the grants change.
        allowed.status = Some(crate::resources::config::ConfigStatus {
            slug: Some("pc-x".into()),
            ..Default::default()
        });
        let stores = stores_with(&[refused.clone(), allowed.clone()]);
        assert_eq!(other_owner(&refused, &stores).as_deref(), Some("prod/a"));
    }

    #[test]
    fn two_connections_to_one_tenant_share_owners() {
        let a = config("prod", "a", "u1", "2026-01-01T00:00:00Z", Some("pc-x"));
        let mut b = config("dev", "b", "u2", "2026-01-02T00:00:00Z", Some("pc-x"));
        b.spec.connection_ref = Some(crate::resources::common::ConnectionRef {
            name: "same-tenant".into(),
        });
        let stores = stores_with(&[a, b.clone()]);
        assert_eq!(owned_by_another(&b, &stores, &["same-tenant".into()]), None);
        let both = vec!["same-tenant".to_string(), "default".to_string()];
        assert_eq!(
            owned_by_another(&b, &stores, &both).as_deref(),
            Some("prod/a")
        );
    }

    #[test]
    fn the_resources_acting_in_a_workspace_are_found_across_kinds() {
        let mut in_pay = config("pay", "main", "u1", "2026-01-01T00:00:00Z", None);
        in_pay.spec.workspace_id = Some("ws-uuid".into());
        let mut by_slug = config("ops", "routing", "u2", "2026-01-01T00:00:00Z", None);
        by_slug.spec.workspace_id = Some("ws-pay".into());
        let elsewhere = config("dev", "other", "u3", "2026-01-01T00:00:00Z", None);
        let mut by_resource = config("web", "edge", "u4", "2026-01-01T00:00:00Z", None);
        by_resource.spec.workspace_ref =
            Some(crate::resources::common::WorkspaceRef { name: "pay".into() });
        let stores = stores_with(&[in_pay, by_slug, elsewhere, by_resource]);
        let keys: BTreeSet<&str> = ["ws-uuid", "ws-pay"].into_iter().collect();
        // Not before every kind's watch listed: the index may lack a namespace.
        stores.of::<Config>().index_event(0, &Event::InitDone);
        assert_eq!(stores.naming_workspace(&keys, "pay", 1), None);
        for store in stores.kinds.values() {
            store.listed_once(0);
        }
        assert_eq!(
            stores.naming_workspace(&keys, "pay", 2),
            None,
            "one namespace of two"
        );
        assert_eq!(
            stores.naming_workspace(&keys, "pay", 1).unwrap(),
            ["Config ops/routing", "Config pay/main", "Config web/edge"]
        );
        // A workspace id equal to the resource's name is not the resource.
        assert_eq!(
            stores.naming_workspace(&["ws-x"].into(), "ws-uuid", 1),
            Some(Vec::<String>::new())
        );
        assert!(
            stores
                .naming_workspace(&["ws-x"].into(), "other", 1)
                .is_some_and(|holders| holders.is_empty())
        );
    }
}
