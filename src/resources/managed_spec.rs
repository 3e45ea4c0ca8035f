//! The spec fields every kind that writes remote objects repeats, as one block each kind's spec
//! embeds with `#[serde(flatten)]`: the same camelCase keys at the top of `spec` as before the
//! block, so manifests and the CRDs are unchanged. `deletionPolicy` stays with each kind: its
//! type is one of the two enums ([`DeletionPolicy`], [`ArchivePolicy`]) and its meaning the kind's.
//!
//! [`DeletionPolicy`]: super::common::DeletionPolicy
//! [`ArchivePolicy`]: super::common::ArchivePolicy

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::common::{ConnectionRef, ManagementPolicy};

/// Whether aigw writes the remote object, and through which Connection.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManagedSpec {
    /// `Full` (the default) or `Observe` (read and report differences, never write).
    #[serde(default)]
    pub management_policy: ManagementPolicy,
    /// The Connection used to reach the management API; defaults to `default`.
    pub connection_ref: Option<ConnectionRef>,
}

impl ManagedSpec {
    /// The `connectionRef` name, `default` when absent (every spec reads it through its block).
    pub fn connection_name(&self) -> &str {
        self.connection_ref
            .as_ref()
            .map_or("default", |c| c.name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::resources::common::{DeletionPolicy, ManagementPolicy};
    use crate::resources::config::ConfigSpec;

    #[test]
    fn a_manifest_of_the_previous_release_reads_into_the_block_and_writes_back_unchanged() {
        let written = json!({
            "name": "chat-routing",
            "config": {"retry": {"attempts": 3}},
            "deletionPolicy": "Orphan",
            "managementPolicy": "Observe",
            "connectionRef": {"name": "prod"},
        });
        let spec: ConfigSpec = serde_json::from_value(written.clone()).unwrap();
        assert_eq!(spec.managed.management_policy, ManagementPolicy::Observe);
        assert_eq!(spec.managed.connection_ref.as_ref().unwrap().name, "prod");
        assert_eq!(spec.deletion_policy, DeletionPolicy::Orphan);
        assert_eq!(serde_json::to_value(&spec).unwrap(), written);
        // Keys keep their order in what `aigw export` writes: the block sits where its fields were.
        let text = serde_json::to_string(&spec).unwrap();
        let at = |key: &str| text.find(key).unwrap();
        assert!(at("deletionPolicy") < at("managementPolicy"));
        assert!(at("managementPolicy") < at("connectionRef"));
    }

    #[test]
    fn an_absent_policy_is_full_and_written_as_such() {
        let spec: ConfigSpec = serde_json::from_value(json!({"name": "c", "config": {}})).unwrap();
        assert_eq!(spec.managed.management_policy, ManagementPolicy::Full);
        assert!(spec.managed.connection_ref.is_none());
        let written = serde_json::to_value(&spec).unwrap();
        assert_eq!(written["managementPolicy"], "Full");
        assert!(written.get("connectionRef").is_none());
    }
}
