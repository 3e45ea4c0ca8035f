//! Liveness and readiness from the controllers' watch streams, for `/healthz` and `/readyz`.
//!
//! Each watch stream reports what it yields. A stream is *failing* while its errors follow one
//! another with no event in between; `/healthz` answers 503 once any stream has been failing
//! for longer than `unhealthy_after` (a process whose caches can no longer follow the cluster
//! is better restarted). A watch that recovers without a relist emits nothing, so a streak also
//! ends when no error has come for `ERROR_STREAK_GAP`, which is longer than the controller's
//! longest retry interval (30 s backoff plus a 30 s connect timeout).
//!
//! `/readyz` answers 200 once every stream has listed its objects at least once, on the leader
//! and on a standby alike: a standby with warm caches is what a RollingUpdate should wait for,
//! and gating readiness on leadership would stall the rollout (only one replica can lead).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::runtime::watcher;

/// How long a watch stream may keep failing before `/healthz` reports the process unhealthy.
pub const UNHEALTHY_AFTER: Duration = Duration::from_secs(60);

/// An error streak ends when no error has followed the last one for this long.
const ERROR_STREAK_GAP: Duration = Duration::from_secs(90);

/// The state of every watch stream of every controller.
#[derive(Debug)]
pub struct Health {
    unhealthy_after: Duration,
    streams: Mutex<BTreeMap<String, StreamState>>,
}

#[derive(Debug, Default)]
struct StreamState {
    /// Listed its objects at least once.
    synced: bool,
    failing: Option<Streak>,
}

/// Consecutive errors of one stream.
#[derive(Debug)]
struct Streak {
    since: Instant,
    last: Instant,
    error: String,
}

impl Default for Health {
    fn default() -> Self {
        Self::new(UNHEALTHY_AFTER)
    }
}

impl Health {
    pub fn new(unhealthy_after: Duration) -> Self {
        Self {
            unhealthy_after,
            streams: Mutex::default(),
        }
    }

    /// Adds a stream (e.g. `Config/ns1`) that is not synced yet, and returns its reporter.
    pub fn register(self: &Arc<Self>, name: impl Into<String>) -> WatchProbe {
        let name = name.into();
        self.lock().entry(name.clone()).or_default();
        WatchProbe {
            health: self.clone(),
            name,
        }
    }

    /// True when at least one stream is registered and every one has listed its objects.
    pub fn synced(&self) -> bool {
        let streams = self.lock();
        !streams.is_empty() && streams.values().all(|s| s.synced)
    }

    /// Streams failing for longer than `unhealthy_after`, each with its latest error.
    pub fn failing(&self) -> Vec<String> {
        self.failing_at(Instant::now())
    }

    fn failing_at(&self, now: Instant) -> Vec<String> {
        self.lock()
            .iter()
            .filter_map(|(name, state)| {
                let streak = state.failing.as_ref()?;
                let ongoing = now.saturating_duration_since(streak.last) < ERROR_STREAK_GAP;
                let long = now.saturating_duration_since(streak.since) > self.unhealthy_after;
                (ongoing && long).then(|| format!("{name}: {}", streak.error))
            })
            .collect()
    }

    fn record_ok(&self, name: &str, listed: bool) {
        if let Some(state) = self.lock().get_mut(name) {
            state.failing = None;
            state.synced |= listed;
        }
    }

    fn record_error(&self, name: &str, error: String, now: Instant) {
        if let Some(state) = self.lock().get_mut(name) {
            match &mut state.failing {
                Some(streak) if now.saturating_duration_since(streak.last) < ERROR_STREAK_GAP => {
                    streak.last = now;
                    streak.error = error;
                }
                _ => {
                    state.failing = Some(Streak {
                        since: now,
                        last: now,
                        error,
                    })
                }
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, StreamState>> {
        self.streams.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What one watch stream reports to `Health`; `observe` every item the stream yields.
#[derive(Debug, Clone)]
pub struct WatchProbe {
    health: Arc<Health>,
    name: String,
}

impl WatchProbe {
    pub fn observe<K>(&self, item: &Result<watcher::Event<K>, watcher::Error>) {
        match item {
            Ok(event) => self
                .health
                .record_ok(&self.name, matches!(event, watcher::Event::InitDone)),
            Err(e) => {
                tracing::debug!(stream = %self.name, error = %e, "watch stream error");
                self.health
                    .record_error(&self.name, e.to_string(), Instant::now());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn health(names: &[&str]) -> Arc<Health> {
        let health = Arc::new(Health::new(Duration::from_secs(60)));
        for name in names {
            health.register(*name);
        }
        health
    }

    #[test]
    fn synced_only_when_every_stream_listed() {
        let health = health(&["Config/a", "Secret/a"]);
        assert!(!health.synced());
        health.record_ok("Config/a", true);
        assert!(!health.synced());
        health.record_ok("Secret/a", false);
        assert!(!health.synced(), "an event before the list is not a sync");
        health.record_ok("Secret/a", true);
        assert!(health.synced());
    }

    #[test]
    fn nothing_registered_is_not_synced() {
        assert!(!Health::default().synced());
    }

    /// `Config/a` refused at each of `seconds` after the start; the start.
    fn refused_at(health: &Health, seconds: &[u64]) -> Instant {
        let start = Instant::now();
        for s in seconds {
            let at = start + Duration::from_secs(*s);
            health.record_error("Config/a", "refused".into(), at);
        }
        start
    }

    /// What fails `seconds` after `start`.
    fn failing(health: &Health, start: Instant, seconds: u64) -> Vec<String> {
        health.failing_at(start + Duration::from_secs(seconds))
    }

    #[test]
    fn errors_shorter_than_the_threshold_are_healthy() {
        let health = health(&["Config/a"]);
        let start = refused_at(&health, &[0, 20, 40, 59]);
        assert!(failing(&health, start, 60).is_empty());
    }

    #[test]
    fn a_streak_longer_than_the_threshold_is_unhealthy_until_an_event() {
        let health = health(&["Config/a", "Secret/a"]);
        let start = refused_at(&health, &[0, 30, 60]);
        assert_eq!(failing(&health, start, 61), ["Config/a: refused"]);
        health.record_ok("Config/a", false);
        assert!(failing(&health, start, 62).is_empty());
    }

    #[test]
    fn a_streak_ends_when_errors_stop_coming() {
        let health = health(&["Config/a"]);
        let start = refused_at(&health, &[0, 30, 61]);
        let quiet = start + Duration::from_secs(61) + ERROR_STREAK_GAP;
        assert!(health.failing_at(quiet).is_empty());
    }

    #[test]
    fn errors_far_apart_are_separate_streaks() {
        let health = health(&["Config/a"]);
        let start = refused_at(&health, &[0]);
        let later = start + ERROR_STREAK_GAP + Duration::from_secs(1);
        health.record_error("Config/a", "refused".into(), later);
        assert!(failing(&health, later, 30).is_empty());
    }
}
