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
// (leader election, health, metrics, events). Their modules are re-exported by name. `context`
// holds the state they share, `process` the wiring that starts them (from `crate::registry`).
pub use driver::{create, drift, gate, rotation, secret_delivery, status};
pub use kinds::{
    api_key, config, config_refs, config_rollout, connection, deployment, guardrail, integration,
    policy, provider, rate_limits_policy, usage_limits_policy,
};
pub use runtime::{
    backoff, census, events, failpoints, hash_key, health, leader, metrics, unreadable,
};
pub use state::{claims, connections, followers, installation, relay, secret_cache, secret_values};

pub use backoff::Backoff;
pub use connections::Connections;
pub use context::{Context, Settings};
pub use driver::{Change, Cx, Managed};
pub use error::Error;
pub use health::Health;
pub use leader::Leadership;
pub use metrics::Metrics;
pub use process::{Watchable, check_crds_installed, run};
pub(crate) use process::{scoped, stream_name};

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
