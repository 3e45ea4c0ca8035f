//! How long to wait before the next attempt.

use std::time::{Duration, SystemTime};

use rand::Rng;
use reqwest::header::{HeaderMap, RETRY_AFTER};

use super::config::RetryPolicy;

impl RetryPolicy {
    /// The sleep before attempt `failed_attempts + 1`. The server's `Retry-After` wins over the
    /// backoff; `None` means the server asked for longer than `max_delay`, so stop retrying here.
    pub fn delay(&self, failed_attempts: u32, retry_after: Option<Duration>) -> Option<Duration> {
        if let Some(wait) = retry_after {
            return (wait <= self.max_delay).then_some(wait);
        }
        let exp = failed_attempts.saturating_sub(1).min(31);
        let cap = self
            .base_delay
            .saturating_mul(1u32 << exp)
            .min(self.max_delay);
        let cap_ms = u64::try_from(cap.as_millis()).unwrap_or(u64::MAX);
        Some(Duration::from_millis(rand::rng().random_range(0..=cap_ms)))
    }
}

/// `Retry-After` as delta-seconds or an HTTP date.
pub(crate) fn retry_after_header(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(
        at.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn full_jitter_stays_under_the_cap() {
        let p = RetryPolicy {
            max_attempts: 5,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(500),
        };
        for attempt in 1..40 {
            let d = p.delay(attempt, None).unwrap();
            let cap = Duration::from_millis(100 * (1u64 << (attempt - 1).min(20))).min(p.max_delay);
            assert!(d <= cap, "attempt {attempt}: {d:?} > {cap:?}");
        }
    }

    #[test]
    fn retry_after_wins_unless_too_long() {
        let p = RetryPolicy::default();
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(2))),
            Some(Duration::from_secs(2))
        );
        assert_eq!(p.delay(1, Some(Duration::from_secs(31))), None);
    }

    #[test]
    fn parses_seconds_and_http_dates() {
        let mut h = HeaderMap::new();
        h.insert(RETRY_AFTER, HeaderValue::from_static("3"));
        assert_eq!(retry_after_header(&h), Some(Duration::from_secs(3)));
        let future = SystemTime::now() + Duration::from_secs(120);
        h.insert(
            RETRY_AFTER,
            HeaderValue::from_str(&httpdate::fmt_http_date(future)).unwrap(),
        );
        let d = retry_after_header(&h).unwrap();
        assert!(
            d > Duration::from_secs(100) && d <= Duration::from_secs(120),
            "{d:?}"
        );
        h.insert(
            RETRY_AFTER,
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after_header(&h), Some(Duration::ZERO));
        h.insert(RETRY_AFTER, HeaderValue::from_static("soon"));
        assert_eq!(retry_after_header(&h), None);
    }
}
