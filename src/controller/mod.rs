//! Reconcile driver shared by all kinds, and per-kind observe/create/update/delete.

pub mod context;
pub mod driver;
pub mod error;
pub mod kinds;
pub mod process;
pub mod runtime;
pub mod state;

// The layers: `driver` (the reconcile driver and its protocols: create, gate, drift, status),
// `kinds` (what each kind does), `state` (watch caches, claims, connections) and `runtime`
// (leader election, health, metrics, events); a module is reached by its file's path. `context`
// holds the state they share, `process` the wiring that starts them (from `crate::registry`).
pub use context::{Context, Settings};
pub use error::Error;
pub use process::{Watchable, check_crds_installed, run};
pub(crate) use process::{scoped, stream_name};
pub use runtime::backoff::Backoff;
pub use runtime::health::Health;
pub use runtime::leader::Leadership;
pub use runtime::metrics::Metrics;
pub use state::connections::Connections;

/// Now, as an RFC 3339 timestamp for status fields.
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .round(jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// True when the current spec generation was already applied successfully, so a difference
/// found now was made outside aigw (drift) rather than by a spec change.
pub fn spec_already_applied(
    generation: Option<i64>,
    observed_generation: Option<i64>,
    conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
) -> bool {
    generation.is_some()
        && generation == observed_generation
        && crate::resources::common::find_condition(
            conditions,
            crate::resources::common::condition::READY,
        )
        .is_some_and(|c| c.status == "True" && c.observed_generation == generation)
}
