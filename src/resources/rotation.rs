//! Cluster-managed rotation, shared by every kind whose values the API issues once (a
//! Deployment's credentials, an API key): when to rotate, which workloads to roll, and where a
//! rotation stands.

use serde::{Deserialize, Serialize};

/// When a rotation happens, and which workloads roll after it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Rotation {
    /// Rotate when this much time has passed since the last rotation (or creation), as a
    /// duration such as `720h` or `30m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h|d))+$"))]
    pub interval: Option<String>,
    /// Any string; changing it rotates now (for example a date or a ticket id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<String>,
    /// Workloads in this namespace whose pods are restarted (by a pod-template annotation)
    /// right after the new values are in the Secret, so they pick them up.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restart: Vec<WorkloadRef>,
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
        Some(text) => humantime::parse_duration(text)
            .map(Some)
            .map_err(|e| format!("{field} {text:?} is not a duration: {e}")),
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

/// Where the rotation of a resource's one-time values stands (flattened into its status).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RotationStatus {
    /// When the values were last rotated (or first issued) into the Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_rotated_at: Option<String>,
    /// When the next scheduled rotation is due.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_rotation_at: Option<String>,
    /// The `spec.rotation.trigger` value that was last acted upon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_rotation_trigger: Option<String>,
    /// Set (to a rotation id) just before a rotation is sent and cleared once the new values
    /// are in the Secret: a rotation interrupted in between is finished, or done again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_rotation: Option<String>,
    /// The `spec.rotation.trigger` the rotation in flight is for: only that trigger is marked
    /// observed when it finishes, so a trigger changed meanwhile rotates again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotating_for: Option<String>,
}
