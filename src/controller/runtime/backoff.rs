//! Per-object exponential backoff. kube-rs' `error_policy` has no memory of earlier failures,
//! so the number of consecutive failures of each object is kept here.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use rand::Rng;

/// Consecutive failures per object key, and the delays they lead to.
#[derive(Debug)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    failures: Mutex<HashMap<String, u32>>,
}

impl Backoff {
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// Records a failure of `key` and returns how long to wait before the next attempt:
    /// `base · 2^(n-1)` capped at `max`, with ±20 % jitter, but never less than `retry_after`.
    pub fn next_delay(&self, key: &str, retry_after: Option<Duration>) -> Duration {
        let failures = {
            let mut map = self.failures.lock().unwrap_or_else(|e| e.into_inner());
            let n = map.entry(key.to_string()).or_insert(0);
            *n = n.saturating_add(1);
            *n
        };
        let exponential = self
            .base
            .saturating_mul(2u32.saturating_pow(failures.saturating_sub(1).min(20)))
            .min(self.max);
        let jittered = exponential.mul_f64(rand::rng().random_range(0.8..1.2));
        jittered.max(retry_after.unwrap_or_default())
    }

    /// Forgets the failures of `key` after a success.
    pub fn reset(&self, key: &str) {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }

    /// Consecutive failures recorded for `key`.
    pub fn failures(&self, key: &str) -> u32 {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .copied()
            .unwrap_or(0)
    }
}

/// `interval` ± 10 %, so periodic drift checks of many objects spread out.
pub fn jittered(interval: Duration) -> Duration {
    interval.mul_f64(rand::rng().random_range(0.9..1.1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_cap_and_reset() {
        let backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(8));
        let delays: Vec<_> = (0..6).map(|_| backoff.next_delay("a", None)).collect();
        assert!(
            delays[0] >= Duration::from_millis(800) && delays[0] <= Duration::from_millis(1200)
        );
        assert!(
            delays[2] >= Duration::from_millis(3200) && delays[2] <= Duration::from_millis(4800)
        );
        assert!(
            delays[5] <= Duration::from_millis(9600),
            "capped: {:?}",
            delays[5]
        );
        assert_eq!(backoff.failures("a"), 6);
        assert_eq!(backoff.failures("b"), 0, "objects back off independently");
        backoff.reset("a");
        assert_eq!(backoff.failures("a"), 0);
    }

    #[test]
    fn retry_after_is_a_floor() {
        let backoff = Backoff::new(Duration::from_millis(10), Duration::from_secs(1));
        assert_eq!(
            backoff.next_delay("a", Some(Duration::from_secs(30))),
            Duration::from_secs(30)
        );
    }
}
