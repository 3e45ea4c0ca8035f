//! Which watched objects ask for a reconcile: those whose hash of what can ask for work changed
//! since the last copy of them that did. kube-runtime's `predicate_filter` does the same, keyed
//! by copies of each object's name, namespace and uid (three strings and a map entry, about 250
//! bytes an object, for as long as it exists); this one keys by a 64-bit hash of them, as
//! [`crate::controller::driver::drift::Drift`] keeps the objects it has seen: 24 bytes an
//! object. Two objects whose keys collide would share an entry, and one's copy could then be
//! passed over only if its own hash also equalled the other's: 2^-64 twice over.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;

/// Entries not refreshed for this long are dropped (deleted objects leave theirs behind), and
/// such an object's next copy passes: kube-runtime's default.
const FORGET_AFTER: Duration = Duration::from_secs(3600);

/// The copies of `stream` whose `hash` differs from the last one passed for the same object
/// (namespace, name and uid); errors pass.
pub fn changed<K, S>(
    stream: S,
    hash: impl Fn(&K) -> u64 + Send + 'static,
) -> impl Stream<Item = Result<K, watcher::Error>> + Send
where
    K: Resource + Send,
    S: Stream<Item = Result<K, watcher::Error>> + Send,
{
    let mut seen = Seen::new(Instant::now());
    stream.filter(move |item| {
        let pass = match item {
            Ok(object) => seen.changed(key(object), hash(object), Instant::now()),
            Err(_) => true,
        };
        futures::future::ready(pass)
    })
}

/// The objects of a cache's events that a reconcile can find in it: an applied object as it
/// comes, and the objects of a list only at its end (`InitDone`), when the cache swaps them in.
///
/// kube-runtime's `applied_objects` passes each object of a list as it arrives, while the cache
/// keeps a list aside until its end. The controller waits for its cache's first list, but not
/// for a later one: a watch re-listed after it expired, or a namespace that joins a replica's
/// share (`--shards`). A reconcile of such an object that runs before the list ends finds it in
/// no cache, the controller reports "not found in local store", and that trigger is lost: at
/// 100,000 Configs over 24 namespaces, each replica lost every page but the last (4,000 objects)
/// of a namespace it took. The list's objects are kept here as references only; their copies
/// come from the cache as the stream is read.
pub fn stored_objects<K, S>(
    events: S,
    cache: Store<K>,
) -> impl Stream<Item = Result<K, watcher::Error>> + Send
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
{
    let mut listing: Vec<ObjectRef<K>> = Vec::new();
    events.flat_map(move |event| {
        let now: Option<Result<K, watcher::Error>> = match event {
            Ok(watcher::Event::Apply(object)) => Some(Ok(object)),
            Ok(watcher::Event::Init) => {
                listing.clear();
                None
            }
            Ok(watcher::Event::InitApply(object)) => {
                // Name and namespace only (`from_obj` would keep the uid and version too).
                let meta = object.meta();
                let reference = ObjectRef::new(meta.name.as_deref().unwrap_or_default());
                listing.push(match &meta.namespace {
                    Some(namespace) => reference.within(namespace),
                    None => reference,
                });
                None
            }
            Ok(watcher::Event::InitDone) => {
                let (listed, cache) = (std::mem::take(&mut listing), cache.clone());
                return futures::stream::iter(listed)
                    .filter_map(move |reference| {
                        futures::future::ready(cache.get(&reference).map(|o| Ok((*o).clone())))
                    })
                    .right_stream();
            }
            Ok(watcher::Event::Delete(_)) => None,
            Err(e) => Some(Err(e)),
        };
        futures::stream::iter(now).left_stream()
    })
}

/// The hash of an object's identity: namespace, name and uid (a re-created object is another).
fn key<K: Resource>(object: &K) -> u64 {
    let meta = object.meta();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (&meta.namespace, &meta.name, &meta.uid).hash(&mut hasher);
    hasher.finish()
}

/// The last hash passed per object, with when it was last seen (seconds since `start`).
struct Seen {
    start: Instant,
    last_sweep: u32,
    entries: HashMap<u64, (u64, u32)>,
}

impl Seen {
    fn new(start: Instant) -> Self {
        Self {
            start,
            last_sweep: 0,
            entries: HashMap::new(),
        }
    }

    fn changed(&mut self, key: u64, hash: u64, now: Instant) -> bool {
        let forget = FORGET_AFTER.as_secs() as u32;
        let now = now.saturating_duration_since(self.start).as_secs() as u32;
        if now.saturating_sub(self.last_sweep) >= forget {
            self.entries
                .retain(|_, (_, seen)| now.saturating_sub(*seen) < forget);
            self.last_sweep = now;
        }
        match self.entries.insert(key, (hash, now)) {
            Some((before, seen)) => before != hash || now.saturating_sub(seen) >= forget,
            None => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_passes_when_its_hash_changed_or_its_entry_was_forgotten() {
        let start = Instant::now();
        let mut seen = Seen::new(start);
        assert!(seen.changed(1, 10, start), "first copy");
        assert!(!seen.changed(1, 10, start), "same hash");
        assert!(seen.changed(2, 10, start), "another object");
        assert!(seen.changed(1, 11, start), "hash changed");
        assert!(!seen.changed(1, 11, start + Duration::from_secs(10)));
        let later = start + FORGET_AFTER + Duration::from_secs(11);
        // Not seen for the whole interval: passes again, and the sweep drops object 2.
        assert!(seen.changed(1, 11, later));
        assert!(!seen.entries.contains_key(&2));
        assert!(!seen.changed(1, 11, later));
    }

    #[tokio::test]
    async fn a_listed_object_is_passed_once_the_cache_holds_it() {
        use k8s_openapi::api::core::v1::ConfigMap;
        use kube::runtime::reflector;
        let map = |name: &str| -> ConfigMap {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "namespace": "ns"}
            }))
            .unwrap()
        };
        // A first list, then a re-list that brings `b` (as after a watch expired, or when a
        // namespace joins the share), then a change and a deletion.
        let events = [
            watcher::Event::Init,
            watcher::Event::InitApply(map("a")),
            watcher::Event::InitDone,
            watcher::Event::Init,
            watcher::Event::InitApply(map("a")),
            watcher::Event::InitApply(map("b")),
            watcher::Event::InitDone,
            watcher::Event::Apply(map("c")),
            watcher::Event::Delete(map("c")),
        ];
        let (reader, writer) = reflector::store();
        let stored = reflector::reflector(writer, futures::stream::iter(events.map(Ok)));
        let mut passed = Vec::new();
        let mut objects = std::pin::pin!(stored_objects(stored, reader.clone()));
        while let Some(object) = objects.next().await {
            let object = object.unwrap();
            assert!(
                reader.get(&ObjectRef::from_obj(&object)).is_some(),
                "{} was passed before the cache held it",
                object.metadata.name.as_deref().unwrap_or_default()
            );
            passed.push(object.metadata.name.unwrap());
        }
        assert_eq!(passed, ["a", "a", "b", "c"]);
    }

    #[test]
    fn objects_differing_in_namespace_name_or_uid_have_different_keys() {
        use crate::resources::Config;
        let config = |ns: &str, name: &str, uid: &str| -> Config {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "aigw.io/v1alpha1", "kind": "Config",
                "metadata": {"name": name, "namespace": ns, "uid": uid},
                "spec": {"name": name, "config": {}}
            }))
            .unwrap()
        };
        let keys = [
            key(&config("a", "x", "1")),
            key(&config("b", "x", "1")),
            key(&config("a", "y", "1")),
            key(&config("a", "x", "2")),
            key(&config("ax", "", "1")),
        ];
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(keys.iter().filter(|o| *o == k).count(), 1, "key {i}");
        }
    }
}
