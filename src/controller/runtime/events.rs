//! A budget for Kubernetes Events. Every Event is an apiserver write, and a mass rollout of
//! 10,000 resources must not cost 10,000 of them. Conditions carry the state of every object;
//! Events are the human-facing trail, so past a burst they are rate-limited per type by a token
//! bucket, and what is dropped is counted in `aigw_events_suppressed_total` (the log line of the
//! change is still written).

use std::num::NonZeroU32;
use std::time::Duration;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use kube::runtime::events::EventType;

/// Normal events: a burst of 30, then one every second.
const NORMAL: (u32, Duration) = (30, Duration::from_secs(1));
/// Warnings matter more: a burst of 60, then five a second.
const WARNING: (u32, Duration) = (60, Duration::from_millis(200));

pub struct EventBudget {
    normal: DefaultDirectRateLimiter,
    warning: DefaultDirectRateLimiter,
}

impl Default for EventBudget {
    fn default() -> Self {
        Self {
            normal: bucket(NORMAL),
            warning: bucket(WARNING),
        }
    }
}

fn bucket((burst, period): (u32, Duration)) -> DefaultDirectRateLimiter {
    let quota = Quota::with_period(period)
        .unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN))
        .allow_burst(NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN));
    RateLimiter::direct(quota)
}

impl EventBudget {
    /// Takes one event of `type_` from the budget; false when it is spent.
    pub fn allow(&self, type_: &EventType) -> bool {
        match type_ {
            EventType::Normal => self.normal.check().is_ok(),
            EventType::Warning => self.warning.check().is_ok(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_passes_and_the_rest_is_held_back_per_type() {
        let budget = EventBudget::default();
        let normal = (0..100)
            .filter(|_| budget.allow(&EventType::Normal))
            .count();
        assert!((30..=31).contains(&normal), "{normal}");
        // Warnings have their own bucket, untouched by the Normal burst.
        let warnings = (0..100)
            .filter(|_| budget.allow(&EventType::Warning))
            .count();
        assert!((60..=61).contains(&warnings), "{warnings}");
    }
}
