//! Pieces every aigw kind shares: status conditions, the connection reference and schema helpers.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The API group of every aigw kind.
pub const GROUP: &str = "aigw.io";
/// The finalizer aigw puts on every namespaced kind so that `deletionPolicy` runs before removal.
pub const FINALIZER: &str = "aigw.io/finalizer";

/// Names the cluster-scoped `Connection` that says how to reach the management API.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionRef {
    /// Name of the cluster-scoped Connection. When no Connection of that name exists and the
    /// name is `default`, the operator's own flags (--management-url, --token-file) are used.
    pub name: String,
}

impl Default for ConnectionRef {
    fn default() -> Self {
        Self {
            name: "default".into(),
        }
    }
}

/// Condition types every aigw status carries (kstatus).
pub mod condition {
    /// The remote object matches the spec.
    pub const READY: &str = "Ready";
    /// Work towards the spec is in progress.
    pub const RECONCILING: &str = "Reconciling";
    /// Only a change of the spec can make progress.
    pub const STALLED: &str = "Stalled";
}

/// Schema of a free-form JSON object kept as the user wrote it.
pub fn free_form_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// Schema of the status conditions list: a map keyed by `type`, so server-side apply merges them.
pub fn conditions_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut schema = generator.subschema_for::<Vec<Condition>>();
    if let Some(object) = schema.as_object_mut() {
        object.insert("x-kubernetes-list-type".into(), "map".into());
        object.insert(
            "x-kubernetes-list-map-keys".into(),
            serde_json::json!(["type"]),
        );
    }
    schema
}

/// Returns the condition of the given type, if present.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}
