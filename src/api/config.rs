//! How a [`Client`](super::Client) is set up.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::secret::SecretString;
use super::token::TokenSource;

/// Receives one call per HTTP attempt; the operator feeds its metrics from it.
pub trait RequestObserver: Send + Sync {
    /// `endpoint` is the path template (`/ai_gw/v2/configs/{slug}`), never the real path;
    /// `status` is `None` when no answer arrived.
    fn on_response(&self, method: &str, endpoint: &str, status: Option<u16>, elapsed: Duration);
}

/// Retries of transient failures: full-jitter exponential backoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in total, the first included. `1` disables retries.
    pub max_attempts: u32,
    pub base_delay: Duration,
    /// Upper bound of one backoff sleep. A `Retry-After` longer than this is not waited out in
    /// the client: the error is returned so the caller can requeue.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            base_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// No retries at all.
    pub fn none() -> Self {
        Self {
            max_attempts: 1,
            ..Self::default()
        }
    }
}

/// Everything a [`Client`](super::Client) needs.
#[derive(Clone)]
pub struct ClientConfig {
    /// Root of the management API; the client appends `/ai_gw/v2…` and `/ai_gw/admin/v2…`.
    pub management_url: String,
    /// The gateway address, including `/v1`.
    pub gateway_url: String,
    pub token: Arc<dyn TokenSource>,
    /// Extra headers sent on every request (e.g. `x-tsg-id`). Values are never logged.
    pub headers: Vec<(String, SecretString)>,
    /// Per attempt, from connecting until the body is read.
    pub timeout: Duration,
    pub retry: RetryPolicy,
    /// Client-side rate limit shared by every call through this client; `0` disables it.
    pub qps: f64,
    pub burst: u32,
    /// Requests on the wire at once.
    pub max_in_flight: usize,
    pub observer: Option<Arc<dyn RequestObserver>>,
}

/// How long a request may take by default ([`ClientConfig::timeout`]).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

impl ClientConfig {
    /// Defaults: 30 s timeout, 5 attempts, 10 qps with a burst of 20, 16 requests in flight.
    pub fn new(
        management_url: impl Into<String>,
        gateway_url: impl Into<String>,
        token: Arc<dyn TokenSource>,
    ) -> Self {
        Self {
            management_url: management_url.into(),
            gateway_url: gateway_url.into(),
            token,
            headers: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
            retry: RetryPolicy::default(),
            qps: 10.0,
            burst: 20,
            max_in_flight: 16,
            observer: None,
        }
    }

    pub fn header(mut self, name: impl Into<String>, value: impl Into<SecretString>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    pub fn rate_limit(mut self, qps: f64, burst: u32) -> Self {
        self.qps = qps;
        self.burst = burst;
        self
    }

    pub fn max_in_flight(mut self, n: usize) -> Self {
        self.max_in_flight = n;
        self
    }

    pub fn observer(mut self, observer: Arc<dyn RequestObserver>) -> Self {
        self.observer = Some(observer);
        self
    }
}

impl fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("ClientConfig")
            .field("management_url", &self.management_url)
            .field("gateway_url", &self.gateway_url)
            .field("token", &self.token)
            .field("headers", &header_names)
            .field("timeout", &self.timeout)
            .field("retry", &self.retry)
            .field("qps", &self.qps)
            .field("burst", &self.burst)
            .field("max_in_flight", &self.max_in_flight)
            .field("observer", &self.observer.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::StaticToken;

    #[test]
    fn debug_shows_header_names_only() {
        let cfg = ClientConfig::new(
            "http://m",
            "http://g/v1",
            Arc::new(StaticToken::new("tok-secret")),
        )
        .header("x-tsg-id", "tsg-secret");
        let debug = format!("{cfg:?}");
        assert!(debug.contains("x-tsg-id"));
        assert!(
            !debug.contains("tok-secret") && !debug.contains("tsg-secret"),
            "{debug}"
        );
        assert_eq!(cfg.retry.max_attempts, 5);
        assert_eq!((cfg.qps, cfg.burst, cfg.max_in_flight), (10.0, 20, 16));
    }
}
