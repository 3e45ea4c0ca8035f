//! Who follows whom (`spec.promotion.after`), kept from the controllers' own watch events: a
//! change of a source (its status included, once the watch cache holds it) requeues the
//! resources that follow it, in whatever namespace they are, so a promotion gate opens when
//! its source is ready rather than at the next drift check. No apiserver read, and a map
//! lookup per event rather than a scan of every cached object.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

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
    index: Mutex<Index>,
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
            index: Mutex::default(),
            requeues: broadcast::channel(BUFFERED).0,
        }
    }
}

impl Followers {
    /// Takes one event of kind `K`'s watch, after its cache stored it: records whom the object
    /// follows, and requeues the objects that follow it.
    pub fn observe<K: Managed>(&self, event: &watcher::Event<K>) {
        let (object, gone) = match event {
            watcher::Event::Apply(o) | watcher::Event::InitApply(o) => (o, false),
            watcher::Event::Delete(o) => (o, true),
            watcher::Event::Init | watcher::Event::InitDone => return,
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
        for follower in waiting {
            // Nobody listening (no controller yet) is fine.
            let _ = self.requeues.send(follower);
        }
    }

    /// The requeues of kind `K`'s objects in `namespace` (`None`: all), for its controller.
    pub fn requeues<K: Managed>(
        &self,
        namespace: Option<String>,
    ) -> impl futures::Stream<Item = ObjectRef<K>> + Send + 'static {
        let receiver = self.requeues.subscribe();
        futures::stream::unfold(receiver, move |mut receiver| {
            let namespace = namespace.clone();
            async move {
                loop {
                    match receiver.recv().await {
                        Ok((kind, ns, name)) => {
                            let mine = kind == K::KIND
                                && (namespace.is_none() || !K::NAMESPACED || ns == namespace);
                            if !mine {
                                continue;
                            }
                            let reference = match &ns {
                                Some(ns) => ObjectRef::new(&name).within(ns),
                                None => ObjectRef::new(&name),
                            };
                            return Some((reference, receiver));
                        }
                        Err(broadcast::error::RecvError::Lagged(_)) => continue,
                        Err(broadcast::error::RecvError::Closed) => return None,
                    }
                }
            }
        })
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
