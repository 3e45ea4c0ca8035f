//! The API's clock: timestamps as it writes them.

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

#[cfg(test)]
mod tests {
    use super::*;

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
