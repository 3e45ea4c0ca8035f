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
