//! The Secret values each object's reconciles handled, remembered past the reconcile: an error
//! that outlives its reconcile (logged by the controller's `error_policy`, or a later reconcile's
//! message) is concealed as the reconcile's own messages were ([`crate::api::concealment`]).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

/// How many values are remembered per object (the newest): twice the most `secretRefs` a
/// resource may hold (64), so every value the object's latest reconciles handled is kept,
/// with room for those it replaced (a rotated key the API may still quote for a while).
const PER_OBJECT: usize = 128;

/// How many bytes of values are remembered per object: what one message is checked against at
/// most ([`crate::api::concealment::CONCEALED_BYTES`]). An object whose values are more is
/// remembered as overflowed instead (no value kept): what is logged of it is withheld, and it
/// costs the operator no copy of a tenant's large Secret values.
pub const PER_OBJECT_BYTES: usize = crate::api::concealment::CONCEALED_BYTES;

/// The values remembered for one object.
#[derive(Default)]
struct Remembered {
    values: VecDeque<Arc<str>>,
    bytes: usize,
    /// Set once its values were more than [`PER_OBJECT_BYTES`]; none are kept then.
    overflowed: bool,
}

/// Each object's values, and every value remembered, held once however many objects remember it
/// (the Configs of a team that all name one Secret).
#[derive(Default)]
struct Held {
    by_object: HashMap<String, Remembered>,
    pool: HashSet<Arc<str>>,
}

/// Values by object key (`Kind/namespace/name`). Its `Debug` shows no value.
#[derive(Default)]
pub struct SecretValues {
    held: Mutex<Held>,
    /// What the object's last failing reconcile read of the Secrets an API error could quote
    /// ([`crate::controller::driver::echoes`]), bounded by their budget; `None`: more than it
    /// takes, so what is logged of the failure afterwards is withheld too.
    echoes: Mutex<HashMap<String, Option<Vec<String>>>>,
}

impl std::fmt::Debug for SecretValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let objects = self.held.lock().map_or(0, |m| m.by_object.len());
        f.debug_struct("SecretValues")
            .field("objects", &objects)
            .finish()
    }
}

impl SecretValues {
    /// Remembers `value` for the object `key`.
    pub fn remember(&self, key: &str, value: &str) {
        if value.is_empty() {
            return;
        }
        let mut guard = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let Held { by_object, pool } = &mut *guard;
        let kept = by_object.entry(key.to_string()).or_default();
        if kept.overflowed || kept.values.iter().any(|v| &**v == value) {
            return;
        }
        if kept.values.len() == PER_OBJECT
            && let Some(oldest) = kept.values.pop_front()
        {
            kept.bytes -= oldest.len();
            release(pool, oldest);
        }
        if kept.bytes + value.len() > PER_OBJECT_BYTES {
            for dropped in std::mem::take(&mut kept.values) {
                release(pool, dropped);
            }
            *kept = Remembered {
                overflowed: true,
                ..Remembered::default()
            };
            return;
        }
        let shared = match pool.get(value) {
            Some(shared) => shared.clone(),
            None => {
                let shared: Arc<str> = Arc::from(value);
                pool.insert(shared.clone());
                shared
            }
        };
        kept.bytes += value.len();
        kept.values.push_back(shared);
    }

    /// The values remembered for the object `key`, with those its last failure's echoes held.
    pub fn of(&self, key: &str) -> Vec<String> {
        let mut values: Vec<String> = self
            .held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .by_object
            .get(key)
            .map(|kept| kept.values.iter().map(|v| v.to_string()).collect())
            .unwrap_or_default();
        let echoes = self.echoes.lock().unwrap_or_else(|e| e.into_inner());
        values.extend(echoes.get(key).into_iter().flatten().flatten().cloned());
        values
    }

    /// Forgets the object `key` (it is gone).
    pub fn forget(&self, key: &str) {
        let mut guard = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let Held { by_object, pool } = &mut *guard;
        for dropped in by_object
            .remove(key)
            .into_iter()
            .flat_map(|kept| kept.values)
        {
            release(pool, dropped);
        }
        drop(guard);
        self.forget_echoes(key);
    }

    /// Keeps, for what is logged of the object `key`'s failure after its reconcile, the values
    /// of the Secrets its API errors could quote (`None`: more than a failure conceals), in
    /// place of the last failure's.
    pub fn keep_echoes(&self, key: &str, values: Option<Vec<String>>) {
        let mut echoes = self.echoes.lock().unwrap_or_else(|e| e.into_inner());
        echoes.insert(key.to_string(), values);
    }

    /// Forgets what [`Self::keep_echoes`] kept for the object `key` (a reconcile begins).
    pub fn forget_echoes(&self, key: &str) {
        let mut echoes = self.echoes.lock().unwrap_or_else(|e| e.into_inner());
        echoes.remove(key);
    }

    /// True when what is said of the object `key` is withheld whole: its values were more
    /// than are remembered ([`PER_OBJECT_BYTES`]), or its last failure named more echoable
    /// Secret values than a failure conceals.
    pub fn withholds(&self, key: &str) -> bool {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if held.by_object.get(key).is_some_and(|kept| kept.overflowed) {
            return true;
        }
        drop(held);
        let echoes = self.echoes.lock().unwrap_or_else(|e| e.into_inner());
        matches!(echoes.get(key), Some(None))
    }
}

/// Lets go of `value`, one object's copy of a remembered value: the pool's too once no object
/// remembers it.
fn release(pool: &mut HashSet<Arc<str>>, value: Arc<str>) {
    // The pool's reference and this one: nobody else holds it.
    if Arc::strong_count(&value) == 2 {
        pool.remove(&*value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_many_objects_remember_is_held_once() {
        let values = SecretValues::default();
        for n in 0..100 {
            values.remember(&format!("Config/ns/c{n}"), "shared-team-key-1234");
        }
        values.remember("Config/ns/c0", "own-value-5678");
        let pool = |values: &SecretValues| values.held.lock().unwrap().pool.len();
        assert_eq!(pool(&values), 2);
        assert_eq!(values.of("Config/ns/c7"), ["shared-team-key-1234"]);
        for n in 0..99 {
            values.forget(&format!("Config/ns/c{n}"));
        }
        assert_eq!(
            pool(&values),
            1,
            "the last object still remembers the shared value"
        );
        values.forget("Config/ns/c99");
        assert_eq!(pool(&values), 0);
    }

    #[test]
    fn an_object_whose_values_outgrow_the_bound_keeps_none_and_is_withheld() {
        let values = SecretValues::default();
        values.remember("Config/ns/a", &"v".repeat(PER_OBJECT_BYTES / 2));
        assert!(!values.withholds("Config/ns/a"));
        values.remember("Config/ns/a", &"w".repeat(PER_OBJECT_BYTES / 2 + 1));
        assert!(values.withholds("Config/ns/a"));
        assert!(values.of("Config/ns/a").is_empty(), "no copy is kept");
        values.remember("Config/ns/a", "small");
        assert!(values.of("Config/ns/a").is_empty() && values.withholds("Config/ns/a"));
        values.forget("Config/ns/a");
        assert!(!values.withholds("Config/ns/a"));
    }

    #[test]
    fn a_failures_echoes_are_kept_until_the_next_reconcile_or_withheld() {
        let values = SecretValues::default();
        values.remember("ApiKey/ns/a", "read-value");
        values.keep_echoes("ApiKey/ns/a", Some(vec!["echo-value".into()]));
        assert_eq!(values.of("ApiKey/ns/a"), ["read-value", "echo-value"]);
        assert!(!values.withholds("ApiKey/ns/a"));
        values.forget_echoes("ApiKey/ns/a");
        assert_eq!(values.of("ApiKey/ns/a"), ["read-value"]);
        values.keep_echoes("ApiKey/ns/a", None);
        assert!(values.withholds("ApiKey/ns/a"));
        values.forget("ApiKey/ns/a");
        assert!(!values.withholds("ApiKey/ns/a") && values.of("ApiKey/ns/a").is_empty());
    }

    #[test]
    fn values_are_kept_per_object_newest_first_out_last() {
        let values = SecretValues::default();
        values.remember("Config/ns/a", "s3cret-value");
        values.remember("Config/ns/a", "s3cret-value");
        values.remember("Config/ns/b", "other");
        assert_eq!(values.of("Config/ns/a"), vec!["s3cret-value".to_string()]);
        for n in 0..PER_OBJECT {
            values.remember("Config/ns/a", &format!("v{n}"));
        }
        let kept = values.of("Config/ns/a");
        assert_eq!(kept.len(), PER_OBJECT);
        assert!(
            !kept.contains(&"s3cret-value".to_string()),
            "the oldest went"
        );
        values.forget("Config/ns/a");
        assert!(values.of("Config/ns/a").is_empty());
        assert!(!format!("{values:?}").contains("other"));
    }
}
