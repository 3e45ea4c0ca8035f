//! Prometheus metrics of the operator. Labels are kinds, endpoints, statuses and error
//! categories, never object names.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Metric, Registry};

use crate::controller::runtime::census::{self, Census};
use crate::controller::{Context, Health, Leadership};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindResult {
    kind: String,
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindConnection {
    kind: String,
    connection: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindAction {
    kind: String,
    action: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindCondition {
    kind: String,
    condition: String,
}

/// `aigw_leader_lease_transitions`, exported only once the Lease was read: a 0 before that
/// would read as a Lease whose count went back, and as changes of hands over a window.
#[derive(Debug, Default)]
struct LeaseTransitions(Mutex<Option<i64>>);

impl Collector for LeaseTransitions {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(transitions) = *self.0.lock().unwrap_or_else(|e| e.into_inner()) else {
            return Ok(());
        };
        let metric = encoder.encode_descriptor(
            "leader_lease_transitions",
            "spec.leaseTransitions of the leader Lease as this replica last read or wrote it: how often the lease changed hands (absent until read, and without leader election)",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(transitions).encode(metric)
    }
}

/// A ConfigRollout: its namespace and name. The one metric labelled by object name
/// (`aigw_rollout_step`): a step means nothing without its rollout, and rollouts are few and
/// short-lived; the series goes with the rollout.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RolloutLabel {
    /// Not `namespace`: the ServiceMonitor keeps the operator's labels over the target's
    /// (`honorLabels`), and `namespace` there is the operator's.
    rollout_namespace: String,
    rollout: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabel {
    decision: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PolicyLabel {
    policy: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TypeLabel {
    r#type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EndpointLabel {
    endpoint: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ApiRequest {
    method: String,
    endpoint: String,
    status: String,
}

/// Every metric the operator exports.
pub struct Metrics {
    registry: Registry,
    reconciles: Family<KindResult, Counter>,
    reconcile_seconds: Family<KindLabel, Histogram>,
    drift_corrections: Family<KindLabel, Counter>,
    api_requests: Family<ApiRequest, Counter>,
    api_request_seconds: Family<EndpointLabel, Histogram>,
    leader: Gauge,
    drift_pass_seconds: Family<KindLabel, Gauge<f64, AtomicU64>>,
    drift_reads: Family<KindLabel, Counter>,
    full_read_interval_seconds: Family<KindConnection, Gauge<f64, AtomicU64>>,
    events_suppressed: Family<TypeLabel, Counter>,
    dry_run_actions: Family<KindAction, Counter>,
    drift_interval_seconds: Gauge<f64, AtomicU64>,
    resources: Family<KindLabel, Gauge>,
    resource_conditions: Family<KindCondition, Gauge>,
    rotations_due: Family<KindLabel, Gauge>,
    unreadable_objects: Family<KindLabel, Counter>,
    secret_cache_fallbacks: Family<ReasonLabel, Counter>,
    rollout_step: Family<RolloutLabel, Gauge>,
    rollout_decisions: Family<DecisionLabel, Counter>,
    admission_policy_in_force: Family<PolicyLabel, Gauge>,
    lease_transitions: Arc<LeaseTransitions>,
    shard_members: Gauge,
    shard_handovers: Counter,
    shard_objects: Family<KindLabel, Gauge>,
    shard_cached_objects: Family<KindLabel, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("aigw");
        let r = &mut registry;
        // Each kind's panic series exists from the start, so that `increase()` sees the first
        // panic (AigwReconcilePanicked).
        let reconciles = Family::<KindResult, Counter>::default();
        for kind in crate::registry::KINDS {
            let _ = reconciles.get_or_create(&KindResult {
                kind: kind.kind.into(),
                result: "panic".into(),
            });
        }
        // Each decision's series exists from the start, so that `increase()` sees the first
        // rollback (a series born at 1 shows no increase).
        let rollout_decisions = Family::<DecisionLabel, Counter>::default();
        for decision in ["Proceed", "Complete", "RollBack", "Promote", "Abort"] {
            let _ = rollout_decisions.get_or_create(&DecisionLabel {
                decision: decision.into(),
            });
        }
        let lease_transitions = Arc::new(LeaseTransitions::default());
        Self {
            reconciles: registered(
                r,
                "reconciles",
                "Reconciles by kind and result (ok, error, panic, throttled)",
                reconciles,
            ),
            reconcile_seconds: registered(
                r,
                "reconcile_duration_seconds",
                "Time spent in one reconcile",
                latencies(),
            ),
            drift_corrections: registered(
                r,
                "drift_corrections",
                "Remote edits made outside aigw and corrected",
                Default::default(),
            ),
            api_requests: registered(
                r,
                "api_requests",
                "Management API requests by method, endpoint template and status",
                Default::default(),
            ),
            api_request_seconds: registered(
                r,
                "api_request_duration_seconds",
                "Management API request latency by endpoint template",
                latencies(),
            ),
            leader: registered(
                r,
                "leader",
                "1 while this replica holds the leader lease (always 1 without leader election)",
                Default::default(),
            ),
            shard_members: registered(
                r,
                "shard_members",
                "With --shards: how many replicas this one sees live (its view); 0 without --shards",
                Default::default(),
            ),
            shard_handovers: registered(
                r,
                "shard_handovers",
                "With --shards: how often this replica's view of the members changed, each time handing keys over or taking them",
                Default::default(),
            ),
            shard_objects: registered(
                r,
                "shard_objects",
                "With --shards: the objects of each kind this replica reconciles now (its share)",
                Default::default(),
            ),
            shard_cached_objects: registered(
                r,
                "shard_cached_objects",
                "With --shards: the objects of each kind this replica's watch caches hold (a namespaced kind's: its share, and during a hand-over the keys it gains or gives away)",
                Default::default(),
            ),
            drift_pass_seconds: registered(
                r,
                "drift_pass_duration_seconds",
                "How long the last drift pass took: its lists, and the reads of what they showed changed, paced to a share of the Connection's QPS",
                Default::default(),
            ),
            drift_reads: registered(
                r,
                "drift_reads",
                "Objects the drift pass asked to read again (changed, unknown, or not shown by a list)",
                Default::default(),
            ),
            full_read_interval_seconds: registered(
                r,
                "full_read_interval_seconds",
                "The period of the safety-net GET of every object, grown when the objects cannot be read within it at the drift share of the QPS",
                Default::default(),
            ),
            events_suppressed: registered(
                r,
                "events_suppressed",
                "Kubernetes Events not published because the event rate limit was reached (conditions still carry the state)",
                Default::default(),
            ),
            dry_run_actions: registered(
                r,
                "dry_run_actions",
                "With --dry-run: the writes the operator would have made, by kind and action (WouldCreate, WouldUpdate, WouldDelete, WouldRotate)",
                Default::default(),
            ),
            drift_interval_seconds: registered(
                r,
                "drift_interval_seconds",
                "--drift-interval: how often each listed kind's drift pass starts (a pass taking longer delays the next)",
                Default::default(),
            ),
            resources: registered(
                r,
                "resources",
                "Resources of each kind in this replica's watch caches",
                Default::default(),
            ),
            resource_conditions: registered(
                r,
                "resource_conditions",
                "Resources of each kind whose condition (Ready, Reconciling, Stalled, Drifted, Paused) is True",
                Default::default(),
            ),
            rotations_due: registered(
                r,
                "rotations_due",
                "Resources whose credential rotation is due (interval passed, trigger changed) or in flight, and not done yet",
                Default::default(),
            ),
            unreadable_objects: registered(
                r,
                "unreadable_objects",
                "Objects a watch or list could not decode (nested too deep, or of a shape this build does not know), left out of the caches and reported; each version counted once",
                Default::default(),
            ),
            secret_cache_fallbacks: registered(
                r,
                "secret_cache_fallbacks",
                "Secret reads the watch caches could not answer and the apiserver did, by reason (behind_own_write, own_write_unknown, recovery, not_listed, unwatched, echo; for referenced Secrets' values: new_version, not_cached)",
                Default::default(),
            ),
            rollout_step: registered(
                r,
                "rollout_step",
                "The step a ConfigRollout is at (0 for the first), by rollout_namespace and rollout; -1 once rolled back or aborted",
                Default::default(),
            ),
            rollout_decisions: registered(
                r,
                "rollout_decisions",
                "Decisions of the ConfigRollouts, by decision (Proceed, Complete, RollBack, Promote, Abort)",
                rollout_decisions,
            ),
            admission_policy_in_force: registered(
                r,
                "admission_policy_in_force",
                "1 while the admission policy of crds/free-form-limits.yaml that bounds a kind's free-form fields and refuses its credentials written in plain text is as `aigw crds` renders it, bound to deny everywhere, and the apiserver is seen to enforce the policies (a dry-run probe refused by the Config policy); 0 while it or its binding is missing or changed, the operator cannot watch them, or the probe is not refused; absent until the policies were listed",
                Default::default(),
            ),
            lease_transitions: {
                r.register_collector(Box::new(lease_transitions.clone()));
                lease_transitions
            },
            registry,
        }
    }
}

/// Registers `metric` as `name` and hands it back (the registry keeps a clone).
fn registered<M: Metric + Clone>(registry: &mut Registry, name: &str, help: &str, metric: M) -> M {
    registry.register(name, help, metric.clone());
    metric
}

/// A latency histogram family: 5 ms to about 41 s.
fn latencies<L: Clone + std::hash::Hash + Eq>() -> Family<L, Histogram> {
    Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.005, 2.0, 14)))
}

impl Metrics {
    /// Whether the admission policy `policy` is in force
    /// ([`crate::controller::state::admission`]).
    pub fn set_admission_policy_in_force(&self, policy: &str, in_force: bool) {
        let label = PolicyLabel {
            policy: policy.into(),
        };
        self.admission_policy_in_force
            .get_or_create(&label)
            .set(i64::from(in_force));
    }

    /// Where a ConfigRollout stands: its step, or -1 once rolled back or aborted.
    pub fn rollout_step(
        &self,
        namespace: &str,
        rollout: &str,
        step: Option<u32>,
        phase: crate::resources::config_rollout::Phase,
    ) {
        use crate::resources::config_rollout::Phase;
        let value = match phase {
            Phase::RolledBack | Phase::Aborted => -1,
            _ => step.map_or(0, i64::from),
        };
        self.rollout_step
            .get_or_create(&RolloutLabel {
                rollout_namespace: namespace.into(),
                rollout: rollout.into(),
            })
            .set(value);
    }

    /// A deleted ConfigRollout's step series goes.
    pub fn forget_rollout(&self, namespace: &str, rollout: &str) {
        self.rollout_step.remove(&RolloutLabel {
            rollout_namespace: namespace.into(),
            rollout: rollout.into(),
        });
    }

    pub fn rollout_decision(&self, decision: crate::resources::config_rollout::Decision) {
        self.rollout_decisions
            .get_or_create(&DecisionLabel {
                decision: decision.as_str().into(),
            })
            .inc();
    }

    /// A reconcile of `kind` panicked (a bug), kept to its object; or a drift pass of `kind`,
    /// kept to that pass; or a trigger of its controller, kept to the change it mapped; or the
    /// controller itself, kept to it: `result="panic"`.
    pub fn reconcile_panicked(&self, kind: &str) {
        self.reconciles
            .get_or_create(&KindResult {
                kind: kind.into(),
                result: "panic".into(),
            })
            .inc();
    }

    /// A reconcile of `kind` sent to its Connection's line before it started
    /// (`result="throttled"`): it comes back at its place.
    pub fn reconcile_throttled(&self, kind: &str) {
        self.reconciles
            .get_or_create(&KindResult {
                kind: kind.into(),
                result: "throttled".into(),
            })
            .inc();
    }

    pub fn observe_reconcile(&self, kind: &str, ok: bool, elapsed: Duration) {
        let result = if ok { "ok" } else { "error" };
        self.reconciles
            .get_or_create(&KindResult {
                kind: kind.into(),
                result: result.into(),
            })
            .inc();
        self.reconcile_seconds
            .get_or_create(&KindLabel { kind: kind.into() })
            .observe(elapsed.as_secs_f64());
    }

    /// A drift pass of `kind` ended after `took`, asking for `reads` objects to be read again.
    pub fn drift_pass(&self, kind: &str, took: Duration, reads: usize) {
        let label = KindLabel { kind: kind.into() };
        self.drift_pass_seconds
            .get_or_create(&label)
            .set(took.as_secs_f64());
        self.drift_reads.get_or_create(&label).inc_by(reads as u64);
    }

    pub fn full_read_interval(&self, kind: &str, connection: &str, interval: Duration) {
        let label = KindConnection {
            kind: kind.into(),
            connection: connection.into(),
        };
        self.full_read_interval_seconds
            .get_or_create(&label)
            .set(interval.as_secs_f64());
    }

    pub fn forget_full_read_interval(&self, kind: &str, connection: &str) {
        let label = KindConnection {
            kind: kind.into(),
            connection: connection.into(),
        };
        self.full_read_interval_seconds.remove(&label);
    }

    pub fn event_suppressed(&self, type_: &str) {
        self.events_suppressed
            .get_or_create(&TypeLabel {
                r#type: type_.into(),
            })
            .inc();
    }

    /// With `--dry-run`: a write of `action` that `kind` would have made.
    pub fn would(&self, kind: &str, action: &str) {
        self.dry_run_actions
            .get_or_create(&KindAction {
                kind: kind.into(),
                action: action.into(),
            })
            .inc();
    }

    /// The writes `kind` would have made with `action` so far (tests read it).
    pub fn would_count(&self, kind: &str, action: &str) -> u64 {
        self.dry_run_actions
            .get_or_create(&KindAction {
                kind: kind.into(),
                action: action.into(),
            })
            .get()
    }

    /// One more object of `kind` that a watch could not decode.
    /// A Secret read the watch caches could not answer ([`crate::controller::state::secret_cache`]).
    pub fn secret_cache_fallback(&self, reason: &str) {
        self.secret_cache_fallbacks
            .get_or_create(&ReasonLabel {
                reason: reason.into(),
            })
            .inc();
    }

    pub fn unreadable(&self, kind: &str) {
        self.unreadable_objects
            .get_or_create(&KindLabel { kind: kind.into() })
            .inc();
    }

    pub fn drift_corrected(&self, kind: &str) {
        self.drift_corrections
            .get_or_create(&KindLabel { kind: kind.into() })
            .inc();
    }

    /// Total drift corrections of `kind` so far (tests and logs read it).
    pub fn drift_corrections(&self, kind: &str) -> u64 {
        self.drift_corrections
            .get_or_create(&KindLabel { kind: kind.into() })
            .get()
    }

    pub fn observe_api_request(
        &self,
        method: &str,
        endpoint: &str,
        status: Option<u16>,
        elapsed: Duration,
    ) {
        let status = status.map_or_else(|| "error".to_string(), |s| s.to_string());
        self.api_requests
            .get_or_create(&ApiRequest {
                method: method.into(),
                endpoint: endpoint.into(),
                status,
            })
            .inc();
        self.api_request_seconds
            .get_or_create(&EndpointLabel {
                endpoint: endpoint.into(),
            })
            .observe(elapsed.as_secs_f64());
    }

    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    pub fn set_drift_interval(&self, interval: Duration) {
        self.drift_interval_seconds.set(interval.as_secs_f64());
    }

    pub fn set_lease_transitions(&self, transitions: i64) {
        *self
            .lease_transitions
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(transitions);
    }

    /// This replica's share with `--shards`: its member count, its view changes so far (the
    /// counter catches up to `handovers`) and nothing per kind ([`Metrics::shard_objects`]).
    pub fn set_shards(&self, members: usize, handovers: u64) {
        self.shard_members
            .set(i64::try_from(members).unwrap_or(i64::MAX));
        let counted = self.shard_handovers.get();
        if handovers > counted {
            self.shard_handovers.inc_by(handovers - counted);
        }
    }

    /// How many objects of `kind` this replica reconciles now, and how many its caches hold,
    /// with `--shards`.
    pub fn shard_objects(&self, kind: &str, owned: usize, cached: usize) {
        let label = KindLabel { kind: kind.into() };
        self.shard_objects
            .get_or_create(&label)
            .set(i64::try_from(owned).unwrap_or(i64::MAX));
        self.shard_cached_objects
            .get_or_create(&label)
            .set(i64::try_from(cached).unwrap_or(i64::MAX));
    }

    /// The gauges of `kind` from what its watch caches hold now.
    pub fn census(&self, kind: &str, census: &Census) {
        let label = KindLabel { kind: kind.into() };
        self.resources.get_or_create(&label).set(census.resources);
        self.rotations_due
            .get_or_create(&label)
            .set(census.rotations_due);
        for (condition, count) in census.conditions {
            self.resource_conditions
                .get_or_create(&KindCondition {
                    kind: kind.into(),
                    condition: condition.into(),
                })
                .set(count);
        }
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

/// Serves `/metrics` (the resource gauges counted from the watch caches at each scrape, see
/// [`census`]), `/healthz` (503 while a watch stream keeps failing) and `/readyz` (200 once the
/// caches are synced, leader or standby; the JSON body says which) on `listener`, bound by the
/// caller so that an address already in use stops the operator before it starts, until the
/// process ends.
pub async fn serve(listener: tokio::net::TcpListener, ctx: Arc<Context>) -> std::io::Result<()> {
    use axum::routing::get;
    let (scraped, probed) = (ctx.clone(), ctx.clone());
    let app = axum::Router::new()
        .route(
            "/metrics",
            get(move || {
                let ctx = scraped.clone();
                async move {
                    census::refresh(&ctx);
                    ctx.metrics.encode()
                }
            }),
        )
        .route(
            "/healthz",
            get(move || async move { healthz(&probed.health) }),
        )
        .route(
            "/readyz",
            get(move || async move { readyz(&ctx.health, &ctx.leadership) }),
        );
    axum::serve(listener, app).await
}

fn healthz(health: &Health) -> (StatusCode, String) {
    let failing = health.failing();
    if failing.is_empty() {
        (StatusCode::OK, "ok\n".into())
    } else {
        let body = format!("watch streams failing:\n{}\n", failing.join("\n"));
        (StatusCode::SERVICE_UNAVAILABLE, body)
    }
}

fn readyz(health: &Health, leadership: &Leadership) -> (StatusCode, axum::Json<serde_json::Value>) {
    let synced = health.synced();
    let role = match (leadership.is_leader(), leadership.shards()) {
        (true, Some(_)) => "shard",
        (true, None) => "leader",
        (false, _) => "standby",
    };
    let status = if synced {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = serde_json::json!({
        "role": role,
        "synced": synced,
        "identity": leadership.identity(),
    });
    (status, axum::Json(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_transitions_are_exported_once_known() {
        let metrics = Metrics::default();
        assert!(!metrics.encode().contains("aigw_leader_lease_transitions"));
        metrics.set_lease_transitions(3);
        let text = metrics.encode();
        assert!(
            text.lines()
                .any(|l| l == "# TYPE aigw_leader_lease_transitions gauge")
        );
        assert!(
            text.lines().any(|l| l == "aigw_leader_lease_transitions 3"),
            "{text}"
        );
    }

    /// `increase()` sees no rise in a series born at 1: every kind's panic series is there, at
    /// 0, before the first panic, so AigwReconcilePanicked fires on it.
    #[test]
    fn every_kind_counts_its_panics_from_zero() {
        let text = Metrics::default().encode();
        for kind in crate::registry::KINDS {
            let zero = format!(
                r#"aigw_reconciles_total{{kind="{}",result="panic"}} 0"#,
                kind.kind
            );
            assert!(text.lines().any(|l| l == zero), "{zero} in {text}");
        }
    }
}
