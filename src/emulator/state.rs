//! In-memory state: one std `Mutex` per collection, never held across an await.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{
        Arc, Mutex, MutexGuard, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
    time::Instant,
};

use serde_json::Value;
use tokio::sync::watch;

use super::{
    EmulatorOptions,
    api_keys::ApiKeyStore,
    configs::ConfigStore,
    deployments::DeploymentStore,
    errors::EmulatorError,
    faults::{Faults, RateWindow},
    guardrails::GuardrailStore,
    integrations::IntegrationStore,
    providers::ProviderStore,
    rate_limits::RateLimitStore,
    usage_limits::UsageLimitStore,
};

pub type Shared = Arc<AppState>;

/// Counts per `"<METHOD> <path template>"`, then per status code.
pub type Stats = HashMap<String, BTreeMap<u16, u64>>;

pub struct AppState {
    pub options: EmulatorOptions,
    /// The organisation every object belongs to (reads return this internal UUID).
    pub organisation_id: String,
    /// Workspace used when a create request names none.
    pub default_workspace_id: String,
    /// The user the bearer token stands for (`owner_id`, `updated_by`, `created_by`).
    pub user_id: String,
    pub oauth_tokens: Mutex<HashMap<String, Instant>>,
    pub configs: Mutex<ConfigStore>,
    pub deployments: Mutex<DeploymentStore>,
    pub rate_limits: Mutex<RateLimitStore>,
    pub usage_limits: Mutex<UsageLimitStore>,
    pub guardrails: Mutex<GuardrailStore>,
    pub api_keys: Mutex<ApiKeyStore>,
    /// Taken before `providers` when both are needed (a default provider is made while the
    /// integration is locked).
    pub integrations: Mutex<IntegrationStore>,
    pub providers: Mutex<ProviderStore>,
    pub responses: Mutex<HashMap<String, Value>>,
    pub vector_store_files: Mutex<HashMap<(String, String), Value>>,
    pub stats: Mutex<Stats>,
    pub faults: Mutex<Faults>,
    pub rate_window: Mutex<RateWindow>,
    /// Flips to true when the server shuts down; hung (timeout-fault) requests watch it.
    pub shutdown: watch::Receiver<bool>,
    seq: AtomicU64,
}

impl AppState {
    pub fn new(options: EmulatorOptions, shutdown: watch::Receiver<bool>) -> Self {
        Self {
            options,
            organisation_id: new_id(),
            default_workspace_id: new_id(),
            user_id: new_id(),
            oauth_tokens: Mutex::default(),
            configs: Mutex::default(),
            deployments: Mutex::default(),
            rate_limits: Mutex::default(),
            usage_limits: Mutex::default(),
            guardrails: Mutex::default(),
            api_keys: Mutex::default(),
            integrations: Mutex::default(),
            providers: Mutex::default(),
            responses: Mutex::default(),
            vector_store_files: Mutex::default(),
            stats: Mutex::default(),
            faults: Mutex::default(),
            rate_window: Mutex::default(),
            shutdown,
            seq: AtomicU64::new(0),
        }
    }

    /// A monotonically increasing number that orders lists by creation.
    pub fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::Relaxed)
    }

    /// A snapshot of the fault settings, for handlers whose answers they shape.
    pub fn faults(&self) -> Faults {
        lock(&self.faults).clone()
    }

    /// The error for a config, deployment, policy (or a policy's entity), API key, integration or
    /// provider that does not exist, e.g.
    /// `missing("config pc-x")`: 404 `AB08`, or 403 `AB03` under the `missing_as_ab03` fault.
    pub fn missing(&self, what: &str) -> EmulatorError {
        if lock(&self.faults).missing_as_ab03 {
            EmulatorError::NotVisible(format!("{what} is not visible with this token"))
        } else {
            EmulatorError::not_found(format!("{what} not found"))
        }
    }

    /// Empties every collection (control endpoint `DELETE /_emulator/state`).
    pub fn clear(&self) {
        *lock(&self.configs) = ConfigStore::default();
        *lock(&self.deployments) = DeploymentStore::default();
        *lock(&self.rate_limits) = RateLimitStore::default();
        *lock(&self.usage_limits) = UsageLimitStore::default();
        *lock(&self.guardrails) = GuardrailStore::default();
        *lock(&self.api_keys) = ApiKeyStore::default();
        *lock(&self.integrations) = IntegrationStore::default();
        *lock(&self.providers) = ProviderStore::default();
        lock(&self.responses).clear();
        lock(&self.vector_store_files).clear();
    }
}

/// Locks a collection; a handler that panicked mid-update cannot leave it worse than a crash would.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

pub fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// ISO 8601 UTC with milliseconds, as the API writes timestamps (`2024-05-12T21:37:06.000Z`).
pub fn now() -> String {
    format_timestamp(jiff::Timestamp::now())
}

/// The API's timestamp `by` from now (an expiry), saturating far in the future.
pub fn now_plus(by: std::time::Duration) -> String {
    let later = jiff::SignedDuration::try_from(by)
        .ok()
        .and_then(|span| jiff::Timestamp::now().checked_add(span).ok())
        .unwrap_or(jiff::Timestamp::MAX);
    format_timestamp(later)
}

/// The `last_updated_at` of a write: now, or one millisecond after `previous` when the clock has
/// not moved on at millisecond precision, so every write of an object changes it.
pub fn touched(previous: &str) -> String {
    let current = jiff::Timestamp::now().as_millisecond();
    let after_previous = previous
        .parse::<jiff::Timestamp>()
        .map_or(i64::MIN, |previous| {
            previous.as_millisecond().saturating_add(1)
        });
    jiff::Timestamp::from_millisecond(current.max(after_previous))
        .map_or_else(|_| now(), format_timestamp)
}

fn format_timestamp(timestamp: jiff::Timestamp) -> String {
    timestamp.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

pub fn unix_now() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// Six random lowercase hex digits, the suffix of generated slugs.
pub fn hex6() -> String {
    format!("{:06x}", rand::random::<u32>() & 0x00ff_ffff)
}

/// Random lowercase hex of `bytes` bytes, for one-time secrets.
pub fn random_hex(bytes: usize) -> String {
    (0..bytes)
        .map(|_| format!("{:02x}", rand::random::<u8>()))
        .collect()
}

/// `<prefix>-<first six characters of the name, dashed>-<6 hex>`, like `pc-pplx-c-ca7a87`.
pub fn make_slug(prefix: &str, name: &str) -> String {
    let stem: String = name
        .to_lowercase()
        .chars()
        .take(6)
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let stem = stem.trim_matches('-');
    let stem = if stem.is_empty() { prefix } else { stem };
    format!("{prefix}-{stem}-{}", hex6())
}

/// `<name, dashed, up to 40 characters>-<6 hex>` (`fallback` for a name with nothing to keep),
/// drawn again while `taken` says another object has it: integration and provider slugs.
pub fn free_slug(name: &str, fallback: &str, taken: impl Fn(&str) -> bool) -> String {
    let stem: String = name
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(40)
        .collect();
    let stem = stem.trim_matches('-');
    let stem = if stem.is_empty() { fallback } else { stem };
    loop {
        let slug = format!("{stem}-{}", hex6());
        if !taken(&slug) {
            return slug;
        }
    }
}

/// A uniform draw in [0, 1) against a configured probability.
pub fn roll(probability: Option<f64>) -> bool {
    probability.is_some_and(|p| p > 0.0 && rand::random::<f64>() < p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slug_takes_six_name_characters() {
        let slug = make_slug("pc", "Pplx Cache Test");
        assert!(slug.starts_with("pc-pplx-c-"), "{slug}");
        assert_eq!(slug.len(), "pc-pplx-c-".len() + 6);
        assert!(make_slug("dp", "!!!").starts_with("dp-dp-"));
    }

    #[test]
    fn touched_always_moves_forward() {
        let future = "2999-01-01T00:00:00.000Z";
        assert_eq!(touched(future), "2999-01-01T00:00:00.001Z");
        let stamp = now();
        assert!(touched(&stamp) > stamp);
        assert_eq!(touched("not a time").len(), stamp.len());
    }

    #[test]
    fn timestamps_have_milliseconds() {
        let ts = now();
        assert_eq!(ts.len(), "2024-05-12T21:37:06.000Z".len(), "{ts}");
        assert!(ts.ends_with('Z'));
    }
}
