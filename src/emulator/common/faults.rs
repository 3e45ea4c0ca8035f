//! The fault switches (`PUT /_emulator/faults`): transport faults (latency, timeouts, 429,
//! dropped connections) and commit faults that `middleware` applies, and shape faults that the
//! handlers read through [`Faults`] (lagging and capped lists, 403 for missing objects,
//! normalised or masked documents, create receipts without a slug), and the data plane's
//! per-provider faults (error rate, status, latency) with the seed of its random draws.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::errors::EmulatorError;

/// The longest `list_lag_ms` accepted: ten minutes is already far past any test's patience.
const MAX_LIST_LAG_MS: u64 = 600_000;

/// Fault settings (`PUT /_emulator/faults`); `{}` clears them all.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Faults {
    /// Extra delay before every API request, on top of `--latency`.
    pub latency_ms: Option<u64>,
    /// Share of requests answered 500 or 503 without touching state.
    pub error_rate: Option<f64>,
    /// Share of requests that hang (then 504) without touching state.
    pub timeout_rate: Option<f64>,
    /// Share of requests that are applied, after which the connection is cut with no response.
    pub drop_after_commit_rate: Option<f64>,
    /// Requests (`"METHOD /route/template"`, as `/_emulator/stats` names them) applied, after
    /// which the connection is cut with no response: each entry once, the next request that
    /// matches it (a lost answer on one call of a flow, the others answered).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub drop_after_commit_once: Vec<String>,
    /// Routes (`"METHOD /route/template"`, as `/_emulator/stats` names them) answered with the
    /// given status (400..599) every time, without touching state: one route's outage (the
    /// telemetry down while the rest of the API answers).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub failing_routes: BTreeMap<String, u16>,
    /// Requests per second allowed across all API routes; beyond it, 429 with `Retry-After`.
    pub rate_limit_qps: Option<f64>,
    /// Share of successful writes (POST/PUT/DELETE) that are applied, then answered 500/502/503.
    pub error_after_commit_rate: Option<f64>,
    /// Share of successful writes that are applied, then answered 200 with a body that is not JSON.
    pub garbage_2xx_rate: Option<f64>,
    /// Config and deployment create receipts omit `slug` (reads still show it).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub create_without_slug: bool,
    /// A missing config, deployment, policy (or policy entity), API key, integration or provider
    /// answers 403 `AB03` instead of 404.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub missing_as_ab03: bool,
    /// Config and deployment lists return at most this many rows; `total` stays the true count.
    pub list_cap: Option<u64>,
    /// List answers (a JSON object with a `data` array) come without `total`, as the spec's
    /// config list does: only the rows tell where a list ends.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub list_without_total: bool,
    /// Paged lists churn: every answer to a later page (`current_page` 1 or more) comes as if,
    /// since the page before it was read, a row of an earlier page left the list and another
    /// joined it at the end. The page's first row is missing (it moved onto the page read
    /// before) and a new row is appended (that row under a new `id`, its `slug`, `name` and
    /// `scope_name` suffixed), the `total` unchanged. Nothing stored changes.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub list_churn: bool,
    /// List answers say more rows follow (`has_more: true`), whatever their `total` counts: an
    /// answer that contradicts itself.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub list_has_more: bool,
    /// The answer to a successful POST carries the fields of its request body beside its own
    /// (its own win), as an API that answers with the object it stored, write-only fields and
    /// all.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub echo_writes: bool,
    /// Answers of `failing_routes` quote the bearer token they were called with, as an API
    /// that names the credentials it refused: whoever prints them must conceal it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub quote_credentials: bool,
    /// Objects created through the API less than this many ms ago are missing from every list.
    pub list_lag_ms: Option<u64>,
    /// Reads come back as a real server writes them: keys in another order, `1.0` as `1`,
    /// policy `conditions` and `group_by` reordered.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub normalise: bool,
    /// Config reads replace credential fields of the document with a mask.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub mask_credentials: bool,
    /// Faults of the data plane's simulated providers, by provider slug (a config target's
    /// `provider` without its `@`, or its `virtual_key`). The management faults above never
    /// touch the data plane; these never touch the management API.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub providers: BTreeMap<String, ProviderFault>,
    /// Restarts the data plane's random draws (loadbalance picks, provider error rolls) from
    /// this seed, so a test's routes repeat run after run. Each PUT that names it restarts them.
    pub gateway_seed: Option<u64>,
}

/// How one simulated provider misbehaves.
#[skip_serializing_none]
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ProviderFault {
    /// Share of calls (0..1) answered with `status` instead of a completion.
    pub error_rate: Option<f64>,
    /// The status of a failed call (400..599; default 503).
    pub status: Option<u16>,
    /// Time every call to the provider takes, failed or not.
    pub latency_ms: Option<u64>,
}

impl ProviderFault {
    /// The status of a failed call.
    pub fn failure_status(&self) -> u16 {
        self.status.unwrap_or(503)
    }
}

impl Faults {
    pub fn validate(&self) -> Result<(), EmulatorError> {
        if let Some((route, status)) = self
            .failing_routes
            .iter()
            .find(|(_, status)| !(400..=599).contains(*status))
        {
            return Err(EmulatorError::validation(format!(
                "failing_routes.{route:?} is {status}: a status from 400 to 599"
            )));
        }
        let rates = [
            ("error_rate", self.error_rate),
            ("timeout_rate", self.timeout_rate),
            ("drop_after_commit_rate", self.drop_after_commit_rate),
            ("error_after_commit_rate", self.error_after_commit_rate),
            ("garbage_2xx_rate", self.garbage_2xx_rate),
        ];
        for (field, rate) in rates {
            if rate.is_some_and(|rate| !(0.0..=1.0).contains(&rate)) {
                return Err(EmulatorError::validation(format!(
                    "{field} must be between 0 and 1"
                )));
            }
        }
        if self
            .rate_limit_qps
            .is_some_and(|qps| qps.is_nan() || qps <= 0.0)
        {
            return Err(EmulatorError::validation(
                "rate_limit_qps must be greater than 0",
            ));
        }
        for (provider, fault) in &self.providers {
            if fault
                .error_rate
                .is_some_and(|rate| !(0.0..=1.0).contains(&rate))
            {
                return Err(EmulatorError::validation(format!(
                    "providers.{provider}.error_rate must be between 0 and 1"
                )));
            }
            if fault
                .status
                .is_some_and(|status| !(400..600).contains(&status))
            {
                return Err(EmulatorError::validation(format!(
                    "providers.{provider}.status must be an HTTP error status (400..599)"
                )));
            }
            if fault.latency_ms.is_some_and(|ms| ms > MAX_LIST_LAG_MS) {
                return Err(EmulatorError::validation(format!(
                    "providers.{provider}.latency_ms must be at most {MAX_LIST_LAG_MS}"
                )));
            }
        }
        if self.list_lag_ms.is_some_and(|lag| lag > MAX_LIST_LAG_MS) {
            return Err(EmulatorError::validation(format!(
                "list_lag_ms must be at most {MAX_LIST_LAG_MS}"
            )));
        }
        Ok(())
    }

    /// Takes the entry of [`Faults::drop_after_commit_once`] that `endpoint` (`"METHOD
    /// /template"`) matches: true when there was one.
    pub fn take_drop_once(&mut self, endpoint: &str) -> bool {
        let found = self
            .drop_after_commit_once
            .iter()
            .position(|e| e == endpoint);
        found
            .map(|at| self.drop_after_commit_once.remove(at))
            .is_some()
    }

    /// Whether a list shows an object yet. `created` is when the API created it; seeded objects
    /// (`None`) existed before the test and are always listed.
    pub fn listed(&self, created: Option<Instant>) -> bool {
        match (self.list_lag_ms, created) {
            (Some(lag), Some(created)) => created.elapsed() >= Duration::from_millis(lag),
            _ => true,
        }
    }

    /// Cuts a config or deployment list down to `list_cap` rows.
    pub fn cap<T>(&self, rows: &mut Vec<T>) {
        if let Some(cap) = self.list_cap {
            rows.truncate(usize::try_from(cap).unwrap_or(usize::MAX));
        }
    }
}

/// A token bucket holding up to one second of requests.
#[derive(Default)]
pub struct RateWindow {
    tokens: f64,
    qps: f64,
    last: Option<Instant>,
}

impl RateWindow {
    /// Takes a token, or says how many whole seconds to wait for one.
    pub fn take(&mut self, qps: f64) -> Result<(), u64> {
        let now = Instant::now();
        let capacity = qps.max(1.0);
        match self.last {
            Some(last) if self.qps == qps => {
                let refill = now.duration_since(last).as_secs_f64() * qps;
                self.tokens = (self.tokens + refill).min(capacity);
            }
            _ => {
                self.qps = qps;
                self.tokens = capacity;
            }
        }
        self.last = Some(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return Ok(());
        }
        let wait = ((1.0 - self.tokens) / qps).ceil().max(1.0);
        // Saturating float-to-int conversion; the wait is small and positive.
        Err(wait as u64)
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
    fn bucket_refuses_past_capacity() {
        let mut window = RateWindow::default();
        assert!(window.take(2.0).is_ok());
        assert!(window.take(2.0).is_ok());
        assert_eq!(window.take(2.0), Err(1));
    }

    #[test]
    fn lag_hides_only_fresh_api_objects() {
        let faults = Faults {
            list_lag_ms: Some(60_000),
            ..Faults::default()
        };
        assert!(!faults.listed(Some(Instant::now())));
        assert!(faults.listed(None), "seeded objects are always listed");
        assert!(Faults::default().listed(Some(Instant::now())));
    }

    #[test]
    fn commit_rates_are_validated_too() {
        for faults in [
            Faults {
                error_after_commit_rate: Some(-0.1),
                ..Faults::default()
            },
            Faults {
                garbage_2xx_rate: Some(1.1),
                ..Faults::default()
            },
            Faults {
                list_lag_ms: Some(MAX_LIST_LAG_MS + 1),
                ..Faults::default()
            },
            Faults {
                failing_routes: [("GET /ai_gw/v2/logs/groups/{dimension}".to_string(), 200)].into(),
                ..Faults::default()
            },
        ] {
            assert!(faults.validate().is_err(), "{faults:?}");
        }
    }

    #[test]
    fn rates_must_be_probabilities() {
        let faults = Faults {
            error_rate: Some(1.5),
            ..Faults::default()
        };
        assert!(faults.validate().is_err());
    }

    #[test]
    fn a_drop_once_entry_is_used_up_by_the_first_request_it_matches() {
        let mut faults: Faults = serde_json::from_value(serde_json::json!({
            "drop_after_commit_once": ["POST /iam/v1/scopes", "PUT /iam/v1/scopes/{name}"]
        }))
        .unwrap();
        assert!(!faults.take_drop_once("GET /iam/v1/scopes"));
        assert!(faults.take_drop_once("POST /iam/v1/scopes"));
        assert!(!faults.take_drop_once("POST /iam/v1/scopes"));
        assert_eq!(faults.drop_after_commit_once, ["PUT /iam/v1/scopes/{name}"]);
    }
}
