//! When a cluster-managed rotation is due (Deployment credentials, API keys): only when
//! `spec.rotation.trigger` changes or `spec.rotation.interval` has passed since the last
//! rotation. Restarts, drift checks and status writes never make one due. Two rotations of one
//! resource are spaced by the operator's `--rotation-spacing`, whatever asks for them.

use std::time::Duration;

/// What a kind's spec and status say about its rotation schedule.
pub struct Schedule<'a> {
    /// `spec.rotation.trigger`, or "" when it sets none.
    pub trigger: &'a str,
    /// `status.observedRotationTrigger`: the trigger last acted upon.
    pub observed_trigger: Option<&'a str>,
    /// Whether `spec.rotation.interval` is set.
    pub has_interval: bool,
    /// `status.nextRotationAt`.
    pub next_rotation_at: Option<&'a str>,
    /// `status.rotationHeldUntil`: nothing is due before it.
    pub held_until: Option<&'a str>,
}

impl Schedule<'_> {
    /// Why a rotation is due now, if it is: asked for ([`Self::asked`]) and not held by the
    /// spacing after the last one.
    pub fn due(&self) -> Option<&'static str> {
        if held_for(self.held_until).is_some() {
            return None;
        }
        self.asked()
    }

    /// Why a rotation is asked for, spacing aside. The first trigger aigw sees (on an adopted
    /// object) is only recorded: rotating then would cut off whoever holds the current values.
    /// A trigger removed (the rotation block dropped, say) asks for nothing: its `restart` list
    /// is gone with it, so a rotation then would roll no workload.
    pub fn asked(&self) -> Option<&'static str> {
        if !self.trigger.is_empty()
            && self
                .observed_trigger
                .is_some_and(|seen| seen != self.trigger)
        {
            return Some("spec.rotation.trigger changed");
        }
        let due_at = self
            .next_rotation_at
            .and_then(|t| t.parse::<jiff::Timestamp>().ok());
        if self.has_interval && due_at.is_some_and(|due| due <= jiff::Timestamp::now()) {
            return Some("the rotation interval has passed");
        }
        None
    }
}

/// `nextRotationAt` from the last rotation (or from now, for an object not rotated yet) and
/// the interval; `current` (the recorded value) stays until a first rotation is recorded.
pub fn next_rotation_at(
    current: Option<&str>,
    last_rotated_at: Option<&str>,
    interval: Option<Duration>,
) -> Option<String> {
    let interval = interval?;
    if current.is_some() && last_rotated_at.is_none() {
        return current.map(str::to_string);
    }
    let base = last_rotated_at
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .unwrap_or_else(jiff::Timestamp::now);
    jiff::SignedDuration::try_from(interval)
        .ok()
        .and_then(|d| base.checked_add(d).ok())
        .and_then(|t| t.round(jiff::Unit::Second).ok())
        .map(|t| t.to_string())
}

/// How long until `next_rotation_at` (a little after, so the reconcile finds it due), or until
/// `held_until`: a rotation held by the spacing is looked at again when the hold ends, and at
/// once when it ended already (the hold is rounded up to the second, and a slow reconcile can
/// reach this after it). A status keeps `held_until` only while a rotation waits for it.
pub fn due_in(next_rotation_at: Option<&str>, held_until: Option<&str>) -> Option<Duration> {
    if let Some(until) = held_until.and_then(|t| t.parse::<jiff::Timestamp>().ok()) {
        let left = until.duration_since(jiff::Timestamp::now());
        return Some(Duration::try_from(left).unwrap_or_default() + Duration::from_millis(200));
    }
    let due = next_rotation_at?.parse::<jiff::Timestamp>().ok()?;
    let left = due.duration_since(jiff::Timestamp::now());
    Some(Duration::try_from(left).unwrap_or_default() + Duration::from_millis(200))
}

/// How long `held_until` is still ahead, if it is.
fn held_for(held_until: Option<&str>) -> Option<Duration> {
    let until = held_until?.parse::<jiff::Timestamp>().ok()?;
    let left = until.duration_since(jiff::Timestamp::now());
    Duration::try_from(left).ok().filter(|d| !d.is_zero())
}

/// Until when a rotation asked for now must wait: `spacing` after `last_rotated_at`, when
/// that is still ahead (rounded up to the second).
pub fn spaced_until(last_rotated_at: Option<&str>, spacing: Duration) -> Option<String> {
    let last = last_rotated_at?.parse::<jiff::Timestamp>().ok()?;
    let until = last
        .checked_add(jiff::SignedDuration::try_from(spacing).ok()?)
        .ok()?;
    if until <= jiff::Timestamp::now() {
        return None;
    }
    let whole = until
        .round(
            jiff::TimestampRound::new()
                .smallest(jiff::Unit::Second)
                .mode(jiff::RoundMode::Ceil),
        )
        .ok()?;
    Some(whole.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_changed_trigger_or_a_passed_interval_is_due() {
        let mut schedule = Schedule {
            trigger: "b",
            observed_trigger: None,
            has_interval: false,
            next_rotation_at: Some("2020-01-01T00:00:00Z"),
            held_until: None,
        };
        assert_eq!(schedule.due(), None, "the first trigger is only recorded");
        schedule.observed_trigger = Some("a");
        assert_eq!(schedule.due(), Some("spec.rotation.trigger changed"));
        schedule.observed_trigger = Some("b");
        assert_eq!(schedule.due(), None, "no interval");
        schedule.has_interval = true;
        assert_eq!(schedule.due(), Some("the rotation interval has passed"));
        let removed = Schedule {
            trigger: "",
            observed_trigger: Some("b"),
            has_interval: false,
            next_rotation_at: None,
            held_until: None,
        };
        assert_eq!(removed.due(), None, "a trigger removed asks for nothing");
    }

    #[test]
    fn a_rotation_asked_for_within_the_spacing_waits_for_it() {
        let spacing = Duration::from_secs(300);
        let just_now = jiff::Timestamp::now().to_string();
        let until = spaced_until(Some(&just_now), spacing).expect("held");
        let mut schedule = Schedule {
            trigger: "b",
            observed_trigger: Some("a"),
            has_interval: true,
            next_rotation_at: Some("2020-01-01T00:00:00Z"),
            held_until: Some(&until),
        };
        assert_eq!(schedule.due(), None, "a changed trigger waits");
        assert_eq!(schedule.asked(), Some("spec.rotation.trigger changed"));
        let left = due_in(schedule.next_rotation_at, schedule.held_until).unwrap();
        assert!(left > Duration::from_secs(290) && left <= Duration::from_secs(302));
        schedule.observed_trigger = Some("b");
        assert_eq!(schedule.due(), None, "a passed interval waits too");
        schedule.held_until = Some("2020-01-01T00:00:00Z");
        assert_eq!(schedule.due(), Some("the rotation interval has passed"));
        assert_eq!(
            due_in(schedule.next_rotation_at, schedule.held_until),
            Some(Duration::from_millis(200))
        );
        // A trigger change held until a moment already past (no interval): looked at at once,
        // not at the next drift check.
        assert_eq!(
            due_in(None, Some("2020-01-01T00:00:00Z")),
            Some(Duration::from_millis(200))
        );
        assert_eq!(due_in(None, None), None);
        assert_eq!(spaced_until(Some("2020-01-01T00:00:00Z"), spacing), None);
        assert_eq!(spaced_until(Some(&just_now), Duration::ZERO), None);
        assert_eq!(spaced_until(None, spacing), None);
    }

    #[test]
    fn the_next_rotation_follows_the_last_one() {
        let next = next_rotation_at(
            Some("2020-01-01T00:00:00Z"),
            Some("2026-01-01T00:00:00Z"),
            Some(Duration::from_secs(3600)),
        );
        assert_eq!(next.as_deref(), Some("2026-01-01T01:00:00Z"));
        let kept = next_rotation_at(
            Some("2030-01-01T00:00:00Z"),
            None,
            Some(Duration::from_secs(1)),
        );
        assert_eq!(kept.as_deref(), Some("2030-01-01T00:00:00Z"));
        assert_eq!(next_rotation_at(Some("x"), None, None), None);
    }
}
