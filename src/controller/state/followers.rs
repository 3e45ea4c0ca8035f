//! Who follows whom (`spec.promotion.after`), kept from the controllers' own watch events: a
//! change of a source (its status included, once the watch cache holds it) requeues the
//! resources that follow it, in whatever namespace they are, so a promotion gate opens when
//! its source is ready rather than at the next drift check. No apiserver read, and a map
//! lookup per event rather than a scan of every cached object.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use futures::StreamExt;

use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use tokio::sync::broadcast;

use crate::controller::driver::Managed;

/// One object of one kind: kind, namespace (`None`: cluster-scoped), name.
type Key = (&'static str, Option<String>, String);

/// How many requeues may wait for a controller; past that the oldest are dropped (those
/// resources are looked at again at their soak's end or their drift check).
const BUFFERED: usize = 1024;

/// The follower index, and the channel its requeues go out on.
pub struct Followers {
    index: Arc<Mutex<Index>>,
    requeues: broadcast::Sender<Key>,
}

#[derive(Default)]
struct Index {
    /// Source → the resources whose `spec.promotion.after` names it.
    followers: HashMap<Key, BTreeSet<Key>>,
    /// Follower → the sources it names (to drop them when its spec changes).
    sources: HashMap<Key, Vec<Key>>,
}

impl Default for Followers {
    fn default() -> Self {
        Self {
            index: Arc::default(),
            requeues: broadcast::channel(BUFFERED).0,
        }
    }
}

/// One watch's part in the index: what a re-list brings waits for its end, when the cache
/// holds it (a follower woken on the re-list's first objects would read its source from the
/// cache before the cache swaps the list in, and not be woken again).
pub struct Listing {
    /// The namespace the watch covers (`None`: all).
    scope: Option<String>,
    /// Between a re-list's start and its end.
    relisting: bool,
    /// The followers the re-list has woken so far.
    woken: BTreeSet<Key>,
    /// The sources the re-list showed: a source it did not show is gone.
    shown: HashSet<Key>,
}

impl Listing {
    pub fn new(scope: Option<String>) -> Self {
        Self {
            scope,
            relisting: false,
            woken: BTreeSet::new(),
            shown: HashSet::new(),
        }
    }
}

impl Followers {
    /// Takes one event of kind `K`'s watch, after its cache stored it (or after the share left
    /// it out): records whom the object follows, and requeues the objects that follow it, those
    /// a re-list wakes at its end (with the followers of the sources it no longer shows).
    pub fn observe<K: Managed>(&self, listing: &mut Listing, event: &watcher::Event<K>) {
        let (object, gone) = match event {
            watcher::Event::Apply(o) | watcher::Event::InitApply(o) => (o, false),
            watcher::Event::Delete(o) => (o, true),
            watcher::Event::Init => {
                listing.relisting = true;
                listing.woken.clear();
                listing.shown.clear();
                return;
            }
            watcher::Event::InitDone => {
                listing.relisting = false;
                let shown = std::mem::take(&mut listing.shown);
                let mut woken = std::mem::take(&mut listing.woken);
                {
                    let index = self.index.lock().unwrap_or_else(|e| e.into_inner());
                    for (source, followers) in &index.followers {
                        let (kind, namespace, _) = source;
                        let covered = *kind == K::KIND
                            && (listing.scope.is_none() || *namespace == listing.scope);
                        if covered && !shown.contains(source) {
                            woken.extend(followers.iter().cloned());
                        }
                    }
                }
                self.wake(woken);
                return;
            }
        };
        let key: Key = (K::KIND, object.namespace(), object.name_any());
        let named: Vec<Key> = match (gone, object.promotion()) {
            (false, Some(promotion)) => {
                let own = object.namespace();
                promotion
                    .sources(own.as_deref())
                    .map(|(_, namespace, name)| {
                        (K::KIND, namespace.map(str::to_string), name.to_string())
                    })
                    .collect()
            }
            _ => Vec::new(),
        };
        let waiting: Vec<Key> = {
            let mut index = self.index.lock().unwrap_or_else(|e| e.into_inner());
            index.follow(&key, named);
            index
                .followers
                .get(&key)
                .map(|f| f.iter().cloned().collect())
                .unwrap_or_default()
        };
        if listing.relisting {
            // Only sources are kept (a list of 100,000 objects holds none of the others): a
            // source listed before its follower counts as gone, which costs a spare wake.
            if !waiting.is_empty() {
                listing.shown.insert(key);
            }
            listing.woken.extend(waiting);
        } else {
            self.wake(waiting);
        }
    }

    fn wake(&self, followers: impl IntoIterator<Item = Key>) {
        for follower in followers {
            // Nobody listening (no controller yet) is fine.
            let _ = self.requeues.send(follower);
        }
    }

    /// The requeues of kind `K`'s objects in `namespace` (`None`: all), for its controller.
    /// When it fell behind (more wakes at once than the channel holds, a large re-list's end),
    /// every follower of the kind there that its cache (`store`) holds is requeued: none of the
    /// dropped wakes is lost.
    pub fn requeues<K: Managed>(
        &self,
        namespace: Option<String>,
        store: kube::runtime::reflector::Store<K>,
    ) -> impl futures::Stream<Item = ObjectRef<K>> + Send + 'static {
        let receiver = self.requeues.subscribe();
        let index = self.index.clone();
        let mine = move |(kind, ns, _): &Key| {
            *kind == K::KIND && (namespace.is_none() || !K::NAMESPACED || *ns == namespace)
        };
        let reference = |(_, ns, name): Key| match ns {
            Some(ns) => ObjectRef::new(&name).within(&ns),
            None => ObjectRef::new(&name),
        };
        futures::stream::unfold(receiver, move |mut receiver| {
            let (index, mine, store) = (index.clone(), mine.clone(), store.clone());
            async move {
                loop {
                    match receiver.recv().await {
                        Ok(key) if mine(&key) => {
                            return Some((vec![reference(key)], receiver));
                        }
                        Ok(_) => continue,
                        Err(broadcast::error::RecvError::Lagged(_)) => {
                            let index = index.lock().unwrap_or_else(|e| e.into_inner());
                            let all = index.sources.keys().filter(|k| mine(k)).cloned();
                            let all = all.map(reference).filter(|r| store.get(r).is_some());
                            let all: Vec<_> = all.collect();
                            return Some((all, receiver));
                        }
                        Err(broadcast::error::RecvError::Closed) => return None,
                    }
                }
            }
        })
        .flat_map(futures::stream::iter)
    }
}

impl Index {
    /// Records that `follower` now follows `sources` (none: it follows nothing, or is gone).
    fn follow(&mut self, follower: &Key, sources: Vec<Key>) {
        for old in self.sources.remove(follower).unwrap_or_default() {
            if let Some(set) = self.followers.get_mut(&old) {
                set.remove(follower);
                if set.is_empty() {
                    self.followers.remove(&old);
                }
            }
        }
        if sources.is_empty() {
            return;
        }
        for source in &sources {
            self.followers
                .entry(source.clone())
                .or_default()
                .insert(follower.clone());
        }
        self.sources.insert(follower.clone(), sources);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ns: &str, name: &str) -> Key {
        ("Config", Some(ns.into()), name.into())
    }

    fn config(ns: &str, name: &str, after: Option<(&str, &str)>) -> crate::resources::Config {
        let mut spec =
            serde_json::json!({"name": name, "connectionRef": {"name": "gw"}, "config": {}});
        if let Some((namespace, name)) = after {
            spec["promotion"] = serde_json::json!({"after": [{"namespace": namespace, "name": name}], "soak": "1s"});
        }
        let mut config: crate::resources::Config = serde_json::from_value(
            serde_json::json!({"apiVersion": "aigw.io/v1alpha1", "kind": "Config", "metadata": {}, "spec": spec}),
        )
        .expect("a Config");
        config.metadata.namespace = Some(ns.into());
        config.metadata.name = Some(name.into());
        config
    }

    /// What a re-list brings wakes the followers at its end, when the cache holds it, and the
    /// followers of a source it no longer shows are woken too.
    #[tokio::test]
    async fn a_relist_wakes_followers_at_its_end_and_those_of_sources_gone() {
        use watcher::Event;
        let followers = Followers::default();
        let (store, _writer) = kube::runtime::reflector::store();
        let mut requeues = Box::pin(followers.requeues::<crate::resources::Config>(None, store));
        let mut listing = Listing::new(Some("dev".into()));
        let mut prod = Listing::new(Some("prod".into()));
        let web = config("dev", "web", None);
        for event in [Event::Init, Event::InitApply(web.clone()), Event::InitDone] {
            followers.observe(&mut listing, &event);
        }
        for follower in [("web", "web"), ("api", "api")] {
            let event = Event::Apply(config("prod", follower.0, Some(("dev", follower.1))));
            followers.observe(&mut prod, &event);
        }
        // A change of a source wakes its follower at once.
        followers.observe(&mut listing, &Event::Apply(web.clone()));
        let woken = requeues.next().await.expect("a requeue");
        assert_eq!(
            (woken.name.as_str(), woken.namespace.as_deref()),
            ("web", Some("prod"))
        );
        // A re-list wakes nobody until it ends; then the follower of what it showed, and the
        // follower of `api`, which it no longer shows.
        followers.observe(&mut listing, &Event::<crate::resources::Config>::Init);
        followers.observe(&mut listing, &Event::InitApply(web));
        assert!(
            futures::FutureExt::now_or_never(requeues.next()).is_none(),
            "woken before the re-list ended"
        );
        followers.observe(&mut listing, &Event::<crate::resources::Config>::InitDone);
        let mut woken = vec![
            requeues.next().await.expect("a requeue").name,
            requeues.next().await.expect("a requeue").name,
        ];
        woken.sort();
        assert_eq!(woken, ["api", "web"]);
    }

    #[test]
    fn a_follower_is_found_by_its_sources_until_it_follows_others() {
        let mut index = Index::default();
        let prod = key("prod", "web");
        index.follow(&prod, vec![key("dev", "web"), key("stage", "web")]);
        assert!(index.followers[&key("dev", "web")].contains(&prod));
        index.follow(&prod, vec![key("stage", "web")]);
        assert!(!index.followers.contains_key(&key("dev", "web")));
        assert!(index.followers[&key("stage", "web")].contains(&prod));
        index.follow(&prod, Vec::new());
        assert!(index.followers.is_empty() && index.sources.is_empty());
    }
}
