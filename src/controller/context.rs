//! The state every controller shares ([`Context`]) and how the operator runs ([`Settings`]).

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::watcher;

use super::driver::{self, Managed, drift, status};
use super::kinds::config_refs;
use super::runtime::{events, failpoints, hash_key, unreadable};
use super::state::{claims, followers, installation, relay, secret_cache, secret_values};
use super::{Backoff, Connections, Health, Leadership, Metrics};

/// Shared state of every controller.
pub struct Context {
    pub kube: kube::Client,
    pub connections: Connections,
    pub backoff: Backoff,
    pub metrics: Arc<Metrics>,
    pub recorder: Recorder,
    pub drift_interval: Duration,
    pub failpoints: failpoints::Failpoints,
    /// The controllers' watch caches, for checks that must not cost an apiserver read.
    pub stores: claims::Stores,
    /// Whether this replica may act; a standby skips every reconcile.
    pub leadership: Leadership,
    /// What the watch streams report, for `/healthz` and `/readyz`.
    pub health: Arc<Health>,
    /// Names of Connections whose spec or usability just changed; the kinds requeue their users.
    pub connection_changes: tokio::sync::broadcast::Sender<String>,
    /// Each connection's guardrails, listed once per short TTL for every Config to check against.
    pub guardrails: config_refs::GuardrailCache,
    /// What the list-based drift pass asked to read again, and when full reads are due.
    pub drift: Arc<drift::Drift>,
    /// Limits the Kubernetes Events a mass rollout publishes.
    pub events: events::EventBudget,
    /// The namespaces the namespaced kinds are watched in (`None`: all of them).
    pub watched_namespaces: Vec<Option<String>>,
    /// The label selector of the cluster-scoped objects this operator reconciles (`None`: all).
    pub cluster_selector: Option<String>,
    /// This installation (`--installation-id`, `--cluster-selector`): which objects are its own.
    pub installation: installation::Installation,
    /// `--dry-run`: read everything, write nothing (no management-API write, no status, no
    /// finalizer, no Secret); each write a reconcile reaches becomes a `Would…` event.
    pub dry_run: bool,
    /// Who follows whom (`spec.promotion.after`): a source's change requeues its followers.
    pub followers: followers::Followers,
    /// Each kind's changes, once its watch cache stored them, for the controllers of the kinds
    /// that read it (a Config hears the Guardrails it names).
    pub relay: relay::Relay,
    /// The objects watches could not decode, each version reported once.
    pub unreadable: unreadable::Reported,
    /// The key of every Secret-derived hash written to the cluster ([`hash_key`]): loaded from
    /// the operator's Secret by [`hash_key::load`]; a random in-memory one until then.
    pub hash_key: hash_key::HashKey,
    /// `--min-rotation-interval` and `--rotation-spacing`: how often a resource may rotate.
    pub rotation: crate::resources::rotation::RotationLimits,
    /// `--longest-api-call` and `--list-settle`: what a lost answer's recovery waits out.
    pub call_windows: driver::create::CallWindows,
    /// The places this operator's watches take to list ([`crate::controller::runtime::lists`]).
    pub lists: crate::controller::runtime::lists::Lists,
    /// The Secret values each object's reconciles handled, for the messages that outlive them.
    pub secret_values: secret_values::SecretValues,
    /// The Secrets aigw writes or reads, from watch caches ([`secret_cache`]).
    pub secrets: secret_cache::SecretCache,
}

/// How the operator runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Namespaces to watch; empty means all.
    pub namespaces: Vec<String>,
    /// Reconciles running at once, per kind.
    pub concurrency: u16,
    /// Period of the drift check (jittered ±10 %): one list per Connection and workspace.
    pub drift_interval: Duration,
    /// Period of the safety-net full read (GET) of every object.
    pub full_read_interval: Duration,
    /// Share (0–1] of a Connection's QPS that drift reads may use.
    pub drift_qps_share: f64,
    /// Label selector of the cluster-scoped objects to reconcile (`None`: all of them), so that
    /// operators sharing a cluster (one per environment) each take their own.
    pub cluster_selector: Option<String>,
    /// The id this installation claims objects under (`aigw.io/installation`); installations
    /// sharing a cluster need different ids, the replicas of one installation the same.
    pub installation_id: String,
    /// Read everything and write nothing; report each write as a `Would…` event.
    pub dry_run: bool,
    /// How often one resource may rotate (`--min-rotation-interval`, `--rotation-spacing`).
    pub rotation: crate::resources::rotation::RotationLimits,
    /// How long a call may run and lists may lag (`--longest-api-call`, `--list-settle`).
    pub call_windows: driver::create::CallWindows,
    /// How many watches list at once (`--concurrent-lists`; `0`: any number).
    pub concurrent_lists: usize,
    /// How a new object is taken (`--claims`): in its first metadata write while the claim
    /// annotation is guarded at admission, or always by a status record first.
    pub claims: crate::controller::state::claim_guard::ClaimMode,
    /// The operator's own namespace (where its hash key lives), into which it sends the
    /// dry-run create that tells whether the apiserver enforces the admission policies
    /// ([`crate::controller::state::admission`]); `None`: not probed.
    pub own_namespace: Option<String>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            namespaces: Vec::new(),
            concurrency: 4,
            drift_interval: driver::DEFAULT_DRIFT_INTERVAL,
            full_read_interval: drift::DEFAULT_FULL_READ_INTERVAL,
            drift_qps_share: drift::DEFAULT_QPS_SHARE,
            cluster_selector: None,
            installation_id: installation::DEFAULT_ID.to_string(),
            dry_run: false,
            rotation: Default::default(),
            call_windows: Default::default(),
            concurrent_lists: crate::controller::runtime::lists::AT_ONCE,
            claims: Default::default(),
            own_namespace: None,
        }
    }
}

impl Settings {
    /// The namespaces to watch, `[None]` for all.
    pub fn watched_namespaces(&self) -> Vec<Option<String>> {
        if self.namespaces.is_empty() {
            vec![None]
        } else {
            self.namespaces.iter().cloned().map(Some).collect()
        }
    }
}

impl Settings {
    /// This installation, from `installation_id` and `cluster_selector` (the CLI checked both).
    /// Should either be invalid all the same, the installation selects nothing cluster-scoped
    /// (no Connection, no cluster-scoped object) rather than everything.
    pub fn installation(&self) -> installation::Installation {
        let selector = self.cluster_selector.as_deref();
        installation::Installation::new(&self.installation_id, selector).unwrap_or_else(|error| {
            tracing::error!(%error, "this installation selects no cluster-scoped object");
            installation::Installation::new(
                installation::DEFAULT_ID,
                Some("aigw.io/none,!aigw.io/none"),
            )
            .unwrap_or_default()
        })
    }
}

/// How long a new object naming a Connection the watch cache lacks waits for it to appear.
const CONNECTION_LAG: std::time::Duration = std::time::Duration::from_secs(5);

/// True when `object` was created less than `age` ago (by this process's clock).
fn created_within<K: kube::Resource>(object: &K, age: std::time::Duration) -> bool {
    object.meta().creation_timestamp.as_ref().is_some_and(|t| {
        let created = std::time::SystemTime::from(t.0);
        std::time::SystemTime::now()
            .duration_since(created)
            .is_ok_and(|elapsed| elapsed < age)
    })
}

impl Context {
    /// `message` about the object `key` with every Secret value this operator knows for it
    /// concealed ([`crate::api::concealment`]: the values its reconciles handled, and those of
    /// the Connections), then trimmed to one line: for what is logged or recorded outside a
    /// reconcile (the controller's error policy).
    pub fn scrub(&self, key: &str, message: &str) -> String {
        self.scrub_with(key, message, &[])
    }

    /// [`Self::scrub`] with `handled` concealed too: the values a reconcile of the object
    /// handles ([`crate::controller::driver::Cx::scrub`]).
    pub fn scrub_with(&self, key: &str, message: &str, handled: &[String]) -> String {
        if self.secret_values.withholds(key) {
            return crate::controller::driver::echoes::WITHHELD.into();
        }
        let remembered = self.secret_values.of(key);
        let connections = self.connections.secret_values();
        let values: Vec<&str> = (handled.iter().chain(&remembered).chain(&connections))
            .map(String::as_str)
            .collect();
        status::scrubbed(message, &values)
    }

    /// What this installation does with `object` ([`installation::verdict`]), from the object and
    /// the Connection watch cache: no apiserver read.
    pub async fn verdict<K: Managed>(&self, object: &K) -> installation::Verdict {
        let name = object.connection_name();
        let mut cached = self.stores.connections.find(name).await;
        // A Connection created just before the object may not have reached the watch cache
        // yet: a young object naming a Connection the cache lacks waits a moment, rather than
        // being taken by an installation the Connection is not meant for. (An omitted
        // `connectionRef` is `default`, whose absence means the operator's flags: no wait.)
        if matches!(cached, Some(None))
            && name != "default"
            && created_within(object, CONNECTION_LAG)
        {
            cached = None;
        }
        let meta = cached
            .as_ref()
            .map(|found| found.as_ref().map(|c| &c.metadata));
        let holds = self.installation.holds(object);
        installation::verdict(&self.installation, object, name, meta, holds)
    }

    pub fn new(
        kube: kube::Client,
        connections: Connections,
        metrics: Arc<Metrics>,
        settings: &Settings,
    ) -> Self {
        metrics.set_drift_interval(settings.drift_interval);
        let reporter = Reporter {
            controller: "aigw".into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        let secrets = secret_cache::SecretCache::default();
        let counted = metrics.clone();
        secrets.count_fallbacks_with(Arc::new(move |reason| {
            counted.secret_cache_fallback(reason)
        }));
        Self {
            recorder: Recorder::new(kube.clone(), reporter),
            kube,
            connections,
            backoff: Backoff::new(Duration::from_millis(500), Duration::from_secs(300)),
            metrics,
            drift_interval: settings.drift_interval,
            failpoints: Default::default(),
            stores: Default::default(),
            leadership: Leadership::always(),
            health: Arc::default(),
            connection_changes: tokio::sync::broadcast::channel(256).0,
            guardrails: Default::default(),
            drift: Arc::new(drift::Drift::new(drift::DriftSettings {
                interval: settings.drift_interval,
                full_read_interval: settings.full_read_interval.max(settings.drift_interval),
                qps_share: settings.drift_qps_share.clamp(0.01, 1.0),
            })),
            events: Default::default(),
            watched_namespaces: settings.watched_namespaces(),
            cluster_selector: settings.cluster_selector.clone(),
            installation: settings.installation(),
            dry_run: settings.dry_run,
            followers: Default::default(),
            relay: Default::default(),
            unreadable: Default::default(),
            hash_key: hash_key::HashKey::random(),
            rotation: settings.rotation,
            call_windows: settings.call_windows,
            lists: crate::controller::runtime::lists::Lists::new(settings.concurrent_lists),
            secret_values: Default::default(),
            secrets,
        }
    }

    /// Hash Secret-derived values with `key` (see [`hash_key::load`]).
    pub fn with_hash_key(mut self, key: hash_key::HashKey) -> Self {
        self.hash_key = key;
        self
    }

    /// What a watch of kind `K` lists: everything of a namespaced kind (in its namespace); the
    /// cluster-scoped objects `--cluster-selector` selects.
    pub fn watch_config<K: Managed>(&self) -> watcher::Config {
        match (&self.cluster_selector, K::NAMESPACED) {
            (Some(selector), false) => watcher::Config::default().labels(selector),
            _ => watcher::Config::default(),
        }
    }

    /// True once every watch cache of kind `K` has listed (now, no wait): before that, a
    /// resource they lack may exist.
    pub fn listed<K: Managed>(&self) -> bool {
        self.stores.of::<K>().listed_now(self.stores_of::<K>())
    }

    /// How many watch caches kind `K` has (one per watched namespace, or one for all; one for
    /// a cluster-scoped kind): ownership is decided only once every one of them has listed.
    pub fn stores_of<K: Managed>(&self) -> usize {
        match K::NAMESPACED {
            true => self.watched_namespaces.len(),
            false => 1,
        }
    }

    /// Reconcile only while `leadership` says so (leader election); without it, always.
    pub fn with_leadership(mut self, leadership: Leadership) -> Self {
        self.leadership = leadership;
        self
    }
}
