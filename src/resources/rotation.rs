//! Cluster-managed rotation, shared by every kind whose values the API issues once (a
//! Deployment's credentials, an API key): when to rotate, which workloads to roll, and where a
//! rotation stands.

use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

/// When a rotation happens, and which workloads roll after it.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Rotation {
    /// Rotate when this much time has passed since the last rotation (or creation), as a
    /// duration such as `720h` or `30d` (days are whole: `1d`, not `0.5d`). Never zero, and for
    /// an ApiKey never shorter than its `transitionPeriod` (refused at admission). The operator
    /// rotates no more often than its `--min-rotation-interval` (default `1h`): a shorter
    /// interval is raised to it, with a `RotationIntervalRaised` condition and Warning event.
    #[schemars(regex(pattern = r"^([0-9]*[1-9][0-9]*d|[0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"))]
    #[schemars(length(max = 64))]
    pub interval: Option<String>,
    /// Any string; changing it rotates now (for example a date or a ticket id).
    pub trigger: Option<String>,
    /// Workloads in this namespace whose pods are restarted (by a pod-template annotation)
    /// right after the new values are in the Secret, so they pick them up.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restart: Vec<WorkloadRef>,
}

/// The operator's default `--min-rotation-interval`: rotation is credential hygiene (days or
/// weeks) and an urgent rotation is a `trigger` change, so no schedule rotates more than 24
/// times a day; an hour is also at least the API's default key transition (30 minutes), so a
/// key rotated on schedule has at most two live values.
pub const DEFAULT_MIN_INTERVAL: std::time::Duration = std::time::Duration::from_secs(3600);

/// The operator's default `--rotation-spacing`: the least time between two rotations of one
/// resource, whatever asks for them (the interval, a changed trigger). A trigger changed in a
/// loop rotates at most every 5 minutes, while an urgent rotation right after another waits
/// minutes, not hours.
pub const DEFAULT_SPACING: std::time::Duration = std::time::Duration::from_secs(300);

/// The operator's bounds on rotation (`--min-rotation-interval`, `--rotation-spacing`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RotationLimits {
    /// No schedule rotates more often than this.
    pub min_interval: std::time::Duration,
    /// No two rotations of one resource are closer than this.
    pub spacing: std::time::Duration,
}

impl Default for RotationLimits {
    fn default() -> Self {
        Self {
            min_interval: DEFAULT_MIN_INTERVAL,
            spacing: DEFAULT_SPACING,
        }
    }
}

impl RotationLimits {
    /// The floor of `rotation.interval`: `min_interval`, or the key transition period when
    /// that is longer (a key is not rotated again while an older value still works).
    pub fn floor(&self, transition: Option<std::time::Duration>) -> std::time::Duration {
        transition.map_or(self.min_interval, |t| t.max(self.min_interval))
    }

    /// `interval` held against [`Self::floor`]: the interval to rotate at, and the message
    /// saying it was raised when it was.
    pub fn floored(
        &self,
        interval: Option<std::time::Duration>,
        transition: Option<std::time::Duration>,
    ) -> (Option<std::time::Duration>, Option<String>) {
        let floor = self.floor(transition);
        match interval {
            Some(i) if i < floor => (Some(floor), Some(below_floor(i, floor))),
            other => (other, None),
        }
    }
}

/// Says that `interval` is below `floor`, naming the field.
pub fn below_floor(interval: std::time::Duration, floor: std::time::Duration) -> String {
    let floor = humantime::format_duration(floor);
    format!(
        "spec.rotation.interval {} is below the floor of {floor} (the operator's --min-rotation-interval, or the key's transitionPeriod when longer): rotating every {floor} instead",
        humantime::format_duration(interval),
    )
}

impl Rotation {
    /// `interval`, parsed; `None` when not set.
    pub fn parsed_interval(&self) -> Result<Option<std::time::Duration>, String> {
        parse_duration("spec.rotation.interval", self.interval.as_deref())
    }
}

/// A duration field such as `720h`; `field` names it in the error.
pub fn parse_duration(
    field: &str,
    text: Option<&str>,
) -> Result<Option<std::time::Duration>, String> {
    match text {
        None => Ok(None),
        Some(text) => super::duration::parse_with_days(text)
            .map(Some)
            .map_err(|e| format!("{field} {e}")),
    }
}

/// An apps/v1 workload in the resource's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadRef {
    /// `Deployment`, `StatefulSet` or `DaemonSet` (apps/v1).
    pub kind: WorkloadKind,
    /// Name of the workload.
    pub name: String,
}

/// Kinds of workload that can be restarted after a rotation.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub enum WorkloadKind {
    /// apps/v1 Deployment.
    Deployment,
    /// apps/v1 StatefulSet.
    StatefulSet,
    /// apps/v1 DaemonSet.
    DaemonSet,
}

/// A status that keeps where a rotation stands ([`RotationStatus`], its `rotation` field).
pub trait RotationRecord {
    fn rotation(&self) -> &RotationStatus;
    fn rotation_mut(&mut self) -> &mut RotationStatus;
}

/// [`RotationRecord`] of statuses whose `rotation` field keeps it.
macro_rules! rotation_record {
    ($($status:ty),+) => {$(
        impl RotationRecord for $status {
            fn rotation(&self) -> &RotationStatus {
                &self.rotation
            }
            fn rotation_mut(&mut self) -> &mut RotationStatus {
                &mut self.rotation
            }
        }
    )+};
}

rotation_record!(
    crate::resources::api_key::ApiKeyStatus,
    crate::resources::deployment::DeploymentStatus
);

/// Where the rotation of a resource's one-time values stands (flattened into its status).
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RotationStatus {
    /// When the values were last rotated (or first issued) into the Secret.
    pub last_rotated_at: Option<String>,
    /// When the next scheduled rotation is due.
    pub next_rotation_at: Option<String>,
    /// The `spec.rotation.trigger` value that was last acted upon.
    pub observed_rotation_trigger: Option<String>,
    /// Set (to a rotation id) just before a rotation is sent and cleared once the new values
    /// are in the Secret: a rotation interrupted in between is finished, or done again.
    pub pending_rotation: Option<String>,
    /// When the rotation in flight was recorded.
    pub pending_rotation_since: Option<String>,
    /// When the call of the rotation in flight ended without its values stored (a lost or
    /// incomplete answer): it may be done again at once. Without it, a rotation recorded by
    /// another process is given the longest time a call can take before it is done again.
    pub rotation_call_ended_at: Option<String>,
    /// The `spec.rotation.trigger` the rotation in flight is for: only that trigger is marked
    /// observed when it finishes, so a trigger changed meanwhile rotates again.
    pub rotating_for: Option<String>,
    /// Set while a rotation is asked for (a changed trigger, a passed interval) but waits for
    /// the operator's `--rotation-spacing` after the last one: when it may start.
    pub rotation_held_until: Option<String>,
}

impl RotationStatus {
    /// A copy to compare statuses by: the id of the rotation in flight blanked (only whether
    /// one is in flight counts), as `ManagedStatus::without_timestamps` blanks a create's.
    pub fn without_timestamps(&self) -> Self {
        Self {
            pending_rotation: self.pending_rotation.as_ref().map(|_| String::new()),
            ..self.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_interval_floor_is_the_operators_or_the_transition_when_longer() {
        let limits = RotationLimits::default();
        assert_eq!(limits.floor(None), DEFAULT_MIN_INTERVAL);
        assert_eq!(
            limits.floor(Some(Duration::from_secs(1800))),
            DEFAULT_MIN_INTERVAL
        );
        assert_eq!(
            limits.floor(Some(Duration::from_secs(7200))),
            Duration::from_secs(7200)
        );
        let (raised, why) = limits.floored(Some(Duration::from_secs(1)), None);
        assert_eq!(raised, Some(DEFAULT_MIN_INTERVAL));
        assert!(
            why.unwrap()
                .contains("spec.rotation.interval 1s is below the floor of 1h"),
        );
        let (raised, _) = limits.floored(
            Some(Duration::from_secs(5400)),
            Some(Duration::from_secs(7200)),
        );
        assert_eq!(raised, Some(Duration::from_secs(7200)), "the transition");
        assert_eq!(
            limits.floored(Some(DEFAULT_MIN_INTERVAL), None),
            (Some(DEFAULT_MIN_INTERVAL), None)
        );
        assert_eq!(limits.floored(None, None), (None, None));
        let low = RotationLimits {
            min_interval: Duration::from_secs(1),
            spacing: Duration::ZERO,
        };
        assert_eq!(low.floored(Some(Duration::from_secs(4)), None).1, None);
    }
}
