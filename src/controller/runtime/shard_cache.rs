//! With `--shards`, the watch caches of the namespaced kinds hold this replica's share only,
//! so a replica's memory falls as replicas are added.
//!
//! The API cannot select objects by a hash of their namespace, so every replica still watches
//! every object; what it does not *keep* is dropped between the watch and the cache (after the
//! claim index, which must see every namespace: [`crate::controller::state::claims`]). The
//! share moves, so what a cache holds is tracked, and a replica acts on a namespace only once
//! every filtered cache holds it:
//! - the caches keep a key when this replica's view, or a view a live member published, hashes
//!   it to this replica (`Coverage::keep`): a superset of the keys it may act on;
//! - each change of those views is an *epoch*. One that may keep a key the caches dropped (a
//!   member leaving; not one joining, which only takes keys) makes the filtered caches list
//!   again ([`Keep::relist`]): a watch of every namespace always, a watch of one namespace only
//!   when its namespace is kept now and was not at every epoch since its last list
//!   (`Coverage::must_list`). One that keeps fewer drops the copies it no longer keeps from
//!   the caches, without a list (and again after each list ends, whose buffer may hold them),
//!   one removal at a time;
//! - the watches start before this replica has a share, keeping nothing, so the claim index
//!   hears every namespace from the start;
//! - a cache that finished a list begun at epoch `e` holds, and has followed since, every key
//!   that every epoch from `e` on keeps (`Coverage::covers`);
//! - [`super::shards::Shards::owns`] asks for that too, so a share gained is acted on only once
//!   its objects are cached, never from a half-filled cache.
//!
//! While a list runs, the namespaces the cache kept are served as they were, without events:
//! the new watch replaces the old one. What a reconcile reads of *another* namespace (a
//! promotion's source, the Configs naming a cluster-scoped guardrail, a Workspace's default
//! config) may be outside the share: those reads go to the apiserver when the cache does not
//! hold the namespace ([`crate::controller::state::claims::StoreList::holds`]), or to the claim
//! index (owners, creates in flight, the resources acting in a workspace).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use futures::stream::BoxStream;
use kube::runtime::reflector::Store;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;

use super::shards::{Shards, namespace_key, owner, shard_key};

/// The epoch of what the caches keep, and how many of the changes so far may have added keys
/// (each makes the filtered caches list again).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Keep {
    pub epoch: u64,
    pub relist: u64,
}

/// What the filtered caches keep and what they hold.
#[derive(Debug)]
pub(super) struct Coverage {
    state: Mutex<State>,
    keep: watch::Sender<Keep>,
}

#[derive(Debug, Default)]
struct State {
    now: Keep,
    /// The views kept at each epoch a cache may still be behind on, oldest first.
    kept: BTreeMap<u64, Vec<Vec<String>>>,
    /// Per filtered cache: the epoch its last completed list began at.
    listed: Vec<Option<u64>>,
    /// Per filtered cache: the one key it watches (a watch of one namespace), or `None`.
    scopes: Vec<Option<String>>,
}

impl State {
    fn current(&self) -> &[Vec<String>] {
        self.kept
            .get(&self.now.epoch)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// The oldest epoch a filtered cache may lack keys of; `None` while one has not listed.
    fn oldest_listed(&self) -> Option<u64> {
        self.oldest_listed_of(None)
    }

    /// The same over the caches that may hold `key` (all, for `None`): a watch of one namespace
    /// holds nothing of another, and a key no cache may hold (a namespace not watched) has
    /// none, so it is never held.
    fn oldest_listed_of(&self, key: Option<&str>) -> Option<u64> {
        let mut caches = self
            .listed
            .iter()
            .zip(&self.scopes)
            .filter(|(_, scope)| match (key, scope) {
                (Some(key), Some(scope)) => key == scope,
                _ => true,
            })
            .peekable();
        if key.is_some() {
            caches.peek()?;
        }
        caches.try_fold(u64::MAX, |oldest, (at, _)| Some(oldest.min((*at)?)))
    }

    /// True when every epoch from `from` on keeps `key`.
    fn kept_since(&self, from: u64, me: &str, key: &str) -> bool {
        self.kept
            .range(from..)
            .all(|(_, views)| keeps(views, me, key))
    }

    /// Epochs no cache can be behind on any more are not asked about again.
    fn forget_old_epochs(&mut self) {
        if let Some(oldest) = self.oldest_listed() {
            let current = self.now.epoch;
            self.kept.retain(|epoch, _| *epoch >= oldest.min(current));
        }
    }
}

fn keeps(views: &[Vec<String>], me: &str, key: &str) -> bool {
    views.iter().any(|view| owner(view, key) == Some(me))
}

impl Coverage {
    pub(super) fn new() -> Self {
        let mut state = State::default();
        state.kept.insert(0, Vec::new());
        Self {
            state: Mutex::new(state),
            keep: watch::channel(Keep::default()).0,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps, from now, the keys `views` hash to this replica (its own view and the published
    /// ones).
    pub(super) fn keep(&self, me: &str, mut views: Vec<Vec<String>>) {
        views.retain(|view| !view.is_empty());
        views.sort();
        views.dedup();
        let mut state = self.state();
        if state.current() == views.as_slice() {
            return;
        }
        // A view gives `me` only keys a current view gave it when it holds that view's members
        // and more (rendezvous hashing: a member joining takes keys, never gives them), or
        // when it does not hold `me`. Any other may keep a key the caches dropped.
        let grows = views.iter().any(|view| {
            let mine = view.iter().any(|m| m == me);
            let narrower = |current: &Vec<String>| {
                current.iter().any(|m| m == me) && current.iter().all(|m| view.contains(m))
            };
            mine && !state.current().iter().any(narrower)
        });
        state.now.epoch += 1;
        if grows {
            state.now.relist += 1;
        }
        let epoch = state.now.epoch;
        state.kept.insert(epoch, views);
        let now = state.now;
        drop(state);
        self.keep.send_replace(now);
    }

    /// True when the caches keep the objects of `key` now.
    pub(super) fn keeps(&self, me: &str, key: &str) -> bool {
        keeps(self.state().current(), me, key)
    }

    /// True when every filtered cache holds the objects of `key` and follows them: each listed
    /// since an epoch from which on every epoch kept `key`.
    pub(super) fn covers(&self, me: &str, key: &str) -> bool {
        let state = self.state();
        let Some(oldest) = state.oldest_listed_of(Some(key)) else {
            return false;
        };
        state.kept_since(oldest, me, key)
    }

    /// A filtered cache, by the number it reports its lists under; `scope` is the one key it
    /// watches (a watch of one namespace), if it watches one.
    pub(super) fn register(&self, scope: Option<String>) -> usize {
        let mut state = self.state();
        state.listed.push(None);
        state.scopes.push(scope);
        state.listed.len() - 1
    }

    /// Whether cache `cache`, which watches the one key `scope`, must list again for the epoch
    /// `epoch` that asks for lists; `listing` is the epoch a list in progress began at. It need
    /// not when that epoch does not keep `scope` (the copies go without a list), or when every
    /// epoch since its list keeps it (it followed every event of `scope` meanwhile). Without
    /// a list in progress it then holds, as of `epoch`, what it held.
    pub(super) fn must_list(
        &self,
        cache: usize,
        scope: &str,
        me: &str,
        epoch: u64,
        listing: Option<u64>,
    ) -> bool {
        let mut state = self.state();
        let listed = state.listed.get(cache).copied().flatten();
        // What the cache holds dates from the list under way, else from its last one.
        let Some(from) = listing.or(listed) else {
            return true;
        };
        let held = !state
            .kept
            .get(&epoch)
            .is_some_and(|views| keeps(views, me, scope))
            || state.kept_since(from, me, scope);
        if !held {
            return true;
        }
        if listing.is_none()
            && let Some(at) = state.listed.get_mut(cache)
        {
            *at = Some(from.max(epoch));
            state.forget_old_epochs();
        }
        false
    }

    /// Cache `cache` holds what it listed from epoch `epoch`. True when the oldest epoch a
    /// cache may lack (of those that may hold its namespace) moved on: the caches hold more
    /// than before.
    pub(super) fn listed(&self, cache: usize, epoch: u64) -> bool {
        let mut state = self.state();
        // A watch of one namespace adds to what is held of that namespace only.
        let scope = state.scopes.get(cache).cloned().flatten();
        let before = state.oldest_listed_of(scope.as_deref());
        if let Some(at) = state.listed.get_mut(cache) {
            *at = Some(at.map_or(epoch, |at| at.max(epoch)));
        }
        let after = state.oldest_listed_of(scope.as_deref());
        state.forget_old_epochs();
        after != before
    }

    pub(super) fn subscribe(&self) -> watch::Receiver<Keep> {
        self.keep.subscribe()
    }
}

/// One filtered cache's report of its lists: the epoch a list began at, once the list is in the
/// cache.
#[derive(Clone)]
pub struct Listed {
    shards: Shards,
    cache: usize,
    ending: Arc<Mutex<Option<u64>>>,
}

impl Listed {
    /// Called on every event right after the cache took it.
    pub fn stored<K>(&self, event: &Event<K>) {
        if !matches!(event, Event::InitDone) {
            return;
        }
        let ended = self.ending.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(epoch) = ended {
            self.shards.cache_listed(self.cache, epoch);
        }
    }
}

type Events<K> = BoxStream<'static, Result<Event<K>, watcher::Error>>;

/// Who hears the events of the objects a filtered cache leaves out.
pub type Skipped<K> = Box<dyn Fn(&Event<K>) + Send>;

/// The watch events of `start` (called again for every list the share asks for) that the cache
/// `cache` keeps under `shards`: objects of other shares are left out (`skipped` hears them),
/// and a copy the share no longer keeps is removed. Before this replica has a share it keeps
/// nothing (the watch runs: the claim index sees every namespace). The [`Listed`] is to hear
/// every event once the cache took it.
pub fn filtered<K>(
    shards: Shards,
    namespace: Option<&str>,
    cache: Store<K>,
    start: impl Fn() -> Events<K> + Send + 'static,
    skipped: impl Fn(&Event<K>) + Send + 'static,
) -> (Events<K>, Listed)
where
    K: kube::Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    // A watch of one namespace watches one key: it lists again only when the share gains it.
    let scope = namespace.map(namespace_key);
    let listed = Listed {
        cache: shards.register_cache(scope.clone()),
        shards: shards.clone(),
        ending: Arc::default(),
    };
    let filter = Filter {
        keep: shards.keep_changes(),
        id: listed.cache,
        scope,
        shards,
        cache,
        start: Box::new(start),
        skipped: Box::new(skipped),
        inner: None,
        at: Keep::default(),
        listing: None,
        ending: listed.ending.clone(),
        pending: VecDeque::new(),
        sweep: false,
    };
    let events = futures::stream::unfold(filter, |mut filter| async move {
        let event = filter.next().await?;
        Some((event, filter))
    });
    (events.boxed(), listed)
}

struct Filter<K: kube::Resource<DynamicType = ()> + 'static> {
    shards: Shards,
    /// The number this cache reports its lists under.
    id: usize,
    /// The one key this cache watches, if it watches one namespace.
    scope: Option<String>,
    cache: Store<K>,
    start: Box<dyn Fn() -> Events<K> + Send>,
    skipped: Skipped<K>,
    keep: watch::Receiver<Keep>,
    inner: Option<Events<K>>,
    /// What the events passed so far were kept under.
    at: Keep,
    /// The epoch the list in progress began at.
    listing: Option<u64>,
    ending: Arc<Mutex<Option<u64>>>,
    /// Copies no longer kept, to remove before anything else passes.
    pending: VecDeque<Arc<K>>,
    /// A list ended: look for copies it put back that the share no longer keeps.
    sweep: bool,
}

impl<K> Filter<K>
where
    K: kube::Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    async fn next(&mut self) -> Option<Result<Event<K>, watcher::Error>> {
        loop {
            // One removal at a time: a share that shrinks by tens of thousands of objects
            // copies one of them at a time, not all at once.
            if let Some(removed) = self.pending.pop_front() {
                return Some(Ok(Event::Delete(K::clone(&removed))));
            }
            if std::mem::take(&mut self.sweep) {
                // The list that just ended may have put back copies dropped while it ran.
                self.drop_unkept();
                continue;
            }
            let Some(inner) = self.inner.as_mut() else {
                // The watch starts before this replica has a share: the claim index must see
                // every namespace, and the caches report listed (nothing kept) meanwhile.
                self.follow();
                continue;
            };
            tokio::select! {
                biased;
                changed = self.keep.changed() => {
                    if changed.is_err() {
                        return None;
                    }
                    self.follow();
                }
                event = inner.next() => {
                    if let Some(passed) = self.pass(event?) {
                        return Some(passed);
                    }
                }
            }
        }
    }

    /// Takes what the caches keep now: lists again when it may keep more, else removes the
    /// copies it no longer keeps.
    fn follow(&mut self) {
        let now = *self.keep.borrow_and_update();
        let must_list = match &self.scope {
            _ if self.inner.is_none() => true,
            _ if now.relist == self.at.relist => false,
            None => true,
            Some(scope) => self
                .shards
                .must_list(self.id, scope, now.epoch, self.listing),
        };
        if must_list {
            // The new watch starts with a list; the cache serves what it had until it ends.
            self.inner = Some((self.start)());
            self.listing = Some(now.epoch);
        } else {
            self.drop_unkept();
        }
        self.at = now;
    }

    /// Removes the cached copies the share no longer keeps.
    fn drop_unkept(&mut self) {
        let dropped: Vec<_> = self
            .cache
            .state()
            .into_iter()
            .filter(|object| !self.kept(object.as_ref()))
            .collect();
        self.pending.extend(dropped);
    }

    fn kept(&self, object: &K) -> bool {
        self.shards.keeps(&shard_key(object.meta()))
    }

    fn cached(&self, object: &K) -> Option<Arc<K>> {
        self.cache
            .get(&kube::runtime::reflector::ObjectRef::from_obj(object))
    }

    fn pass(
        &mut self,
        event: Result<Event<K>, watcher::Error>,
    ) -> Option<Result<Event<K>, watcher::Error>> {
        let event = match event {
            Ok(event) => event,
            failed => return Some(failed),
        };
        let passed = match &event {
            Event::Init => Some(Event::Init),
            Event::InitDone => {
                let began = self.listing.take();
                *self.ending.lock().unwrap_or_else(|e| e.into_inner()) = began;
                // Polled again only once the cache took the InitDone.
                self.sweep = true;
                Some(Event::InitDone)
            }
            Event::InitApply(object) | Event::Apply(object) | Event::Delete(object)
                if self.kept(object) =>
            {
                return Some(Ok(event));
            }
            Event::InitApply(_) => None,
            // A copy cached before the share moved goes rather than grows stale.
            Event::Apply(object) | Event::Delete(object) => self
                .cached(object)
                .map(|copy| Event::Delete(K::clone(&copy))),
        };
        if passed.is_none() || matches!(event, Event::Apply(_) | Event::Delete(_)) {
            (self.skipped)(&event);
        }
        passed.map(Ok)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(members: &[&str]) -> Vec<String> {
        members.iter().map(|m| m.to_string()).collect()
    }

    /// A key `view` hashes to `me`, and one it does not (`view` has another member).
    fn keys_of(view: &[String], me: &str) -> (String, String) {
        let mut mine = None;
        let mut other = None;
        for n in 0..10_000 {
            let key = format!("namespace/ns{n}");
            match owner(view, &key) == Some(me) {
                true => mine = mine.or(Some(key)),
                false => other = other.or(Some(key)),
            }
            if let (Some(mine), Some(other)) = (&mine, &other) {
                return (mine.clone(), other.clone());
            }
        }
        unreachable!()
    }

    #[test]
    fn nothing_is_covered_until_every_cache_listed_and_a_gain_asks_for_a_list() {
        let coverage = Coverage::new();
        let (a, b) = (coverage.register(None), coverage.register(None));
        let alone = view(&["r0"]);
        let key = "namespace/any";
        coverage.keep("r0", vec![alone.clone(), alone.clone()]);
        let now = *coverage.subscribe().borrow();
        assert_eq!(
            now,
            Keep {
                epoch: 1,
                relist: 1
            }
        );
        assert!(coverage.keeps("r0", key));
        assert!(!coverage.covers("r0", key), "no cache listed yet");
        assert!(!coverage.listed(a, 1), "b has not listed");
        assert!(!coverage.covers("r0", key));
        assert!(coverage.listed(b, 1));
        assert!(coverage.covers("r0", key));

        // r1 joins: r0 switches to its new view while the old one is still published, so the
        // caches keep the union, which is no more than they kept: no list.
        let two = view(&["r0", "r1"]);
        let (kept, given) = keys_of(&two, "r0");
        coverage.keep("r0", vec![two.clone(), alone.clone()]);
        assert_eq!(
            *coverage.subscribe().borrow(),
            Keep {
                epoch: 2,
                relist: 1
            }
        );
        assert!(
            coverage.keeps("r0", &given),
            "the old published view keeps it"
        );
        // Until the caches list again, a key kept all along stays covered.
        assert!(coverage.covers("r0", &kept));
        assert!(coverage.covers("r0", &given));
        // The old view is no longer published: r0 keeps fewer keys, and lists nothing again.
        coverage.keep("r0", vec![two.clone()]);
        assert_eq!(
            *coverage.subscribe().borrow(),
            Keep {
                epoch: 3,
                relist: 1
            }
        );
        assert!(!coverage.keeps("r0", &given));
        assert!(!coverage.covers("r0", &given));
        assert!(coverage.covers("r0", &kept));
    }

    #[test]
    fn a_key_dropped_and_kept_again_is_covered_only_after_a_new_list() {
        let coverage = Coverage::new();
        let cache = coverage.register(None);
        let alone = view(&["r0"]);
        let two = view(&["r0", "r1"]);
        let (_, given) = keys_of(&two, "r0");
        coverage.keep("r0", vec![alone.clone()]);
        coverage.listed(cache, 1);
        assert!(coverage.covers("r0", &given));
        coverage.keep("r0", vec![two.clone()]);
        assert!(!coverage.covers("r0", &given), "dropped at epoch 2");
        // r1 leaves again: the key is kept, but its events of epoch 2 were dropped.
        coverage.keep("r0", vec![alone.clone()]);
        assert_eq!(
            *coverage.subscribe().borrow(),
            Keep {
                epoch: 3,
                relist: 2
            }
        );
        assert!(coverage.keeps("r0", &given));
        assert!(!coverage.covers("r0", &given));
        assert!(coverage.listed(cache, 3));
        assert!(coverage.covers("r0", &given));
        // r2 joins where r0 had the view of r0 and r1: no list; r1 leaves a view r0 shared
        // with r2: a list (r0 may take r1's keys).
        let three = view(&["r0", "r1", "r2"]);
        coverage.keep("r0", vec![two.clone()]);
        coverage.keep("r0", vec![three.clone()]);
        assert_eq!(
            coverage.subscribe().borrow().relist,
            2,
            "a member joining gives no key"
        );
        coverage.keep("r0", vec![view(&["r0", "r2"])]);
        assert_eq!(coverage.subscribe().borrow().relist, 3);
        // A view without r0 keeps r0 nothing.
        coverage.keep("r0", vec![view(&["r0", "r2"]), view(&["r1", "r2"])]);
        assert_eq!(coverage.subscribe().borrow().relist, 3);
    }

    #[test]
    fn a_watch_of_one_namespace_lists_again_only_when_its_namespace_is_gained() {
        let coverage = Coverage::new();
        let two = view(&["r0", "r1"]);
        let (mine, theirs) = keys_of(&two, "r0");
        let (kept, gained) = (
            coverage.register(Some(mine.clone())),
            coverage.register(Some(theirs.clone())),
        );
        // Alone, r0 keeps both; each cache lists its namespace.
        coverage.keep("r0", vec![view(&["r0"])]);
        assert!(
            !coverage.covers("r0", "namespace/unwatched"),
            "a namespace no cache watches is never held"
        );
        assert!(coverage.listed(kept, 1), "its namespace is held now");
        assert!(
            coverage.covers("r0", &mine),
            "the other cache holds none of it"
        );
        assert!(
            !coverage.covers("r0", &theirs),
            "its own cache has not listed"
        );
        assert!(coverage.listed(gained, 1));
        assert!(coverage.covers("r0", &theirs));
        // r1 joins (no list), then leaves (a list is asked for).
        coverage.keep("r0", vec![two.clone()]);
        assert!(!coverage.keeps("r0", &theirs));
        coverage.keep("r0", vec![view(&["r0"])]);
        let now = *coverage.subscribe().borrow();
        assert_eq!(now.relist, 2);
        // The namespace kept all along needs no list, and is still covered.
        assert!(!coverage.must_list(kept, &mine, "r0", now.epoch, None));
        assert!(coverage.covers("r0", &mine));
        // The one dropped at epoch 2 and kept again does, and is covered once it listed.
        assert!(coverage.must_list(gained, &theirs, "r0", now.epoch, None));
        assert!(!coverage.covers("r0", &theirs));
        // A list already under way since this epoch need not start over.
        assert!(!coverage.must_list(gained, &theirs, "r0", now.epoch, Some(now.epoch)));
        assert!(!coverage.covers("r0", &theirs), "not until that list ends");
        coverage.listed(gained, now.epoch);
        assert!(coverage.covers("r0", &theirs));
        // r1 joins again: the namespace r0 no longer keeps lists nothing, and is not covered.
        coverage.keep("r0", vec![two.clone()]);
        let now = *coverage.subscribe().borrow();
        assert!(!coverage.must_list(gained, &theirs, "r0", now.epoch, None));
        assert!(!coverage.covers("r0", &theirs));
        assert!(coverage.covers("r0", &mine));
    }

    #[test]
    fn no_share_keeps_nothing() {
        let coverage = Coverage::new();
        let cache = coverage.register(None);
        coverage.keep("r0", vec![view(&["r0"])]);
        coverage.listed(cache, 1);
        coverage.keep("r0", Vec::new());
        assert!(!coverage.keeps("r0", "namespace/a"));
        assert!(!coverage.covers("r0", "namespace/a"));
        assert_eq!(
            coverage.subscribe().borrow().relist,
            1,
            "losing keys lists nothing"
        );
    }
}
