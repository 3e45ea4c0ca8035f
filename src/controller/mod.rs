//! Reconcile driver shared by all kinds, and per-kind observe/create/update/delete.

pub mod backoff;
pub mod claims;
pub mod config;
pub mod connection;
pub mod connections;
pub mod create;
pub mod deployment;
pub mod driver;
pub mod error;
pub mod failpoints;
pub mod metrics;
pub mod rate_limits_policy;
pub mod status;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Resource;
use kube::api::Api;
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::watcher;
use tracing::{info, warn};

pub use backoff::Backoff;
pub use connections::Connections;
pub use driver::{Change, Cx, Managed};
pub use error::Error;
pub use metrics::Metrics;

use crate::resources::{Config, Deployment, RateLimitsPolicy};

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
}

/// How the operator runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Namespaces to watch; empty means all.
    pub namespaces: Vec<String>,
    /// Reconciles running at once, per kind.
    pub concurrency: u16,
    /// Period of the drift check (jittered ±10 %).
    pub drift_interval: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            namespaces: Vec::new(),
            concurrency: 4,
            drift_interval: driver::DEFAULT_DRIFT_INTERVAL,
        }
    }
}

impl Context {
    pub fn new(
        kube: kube::Client,
        connections: Connections,
        metrics: Arc<Metrics>,
        settings: &Settings,
    ) -> Self {
        let reporter = Reporter {
            controller: "aigw".into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            recorder: Recorder::new(kube.clone(), reporter),
            kube,
            connections,
            backoff: Backoff::new(Duration::from_millis(500), Duration::from_secs(300)),
            metrics,
            drift_interval: settings.drift_interval,
            failpoints: Default::default(),
            stores: Default::default(),
        }
    }
}

/// Fails with an install hint when a CRD aigw needs is not served by the cluster. It reads the
/// CRDs by name instead of listing the kinds cluster-wide, so an operator whose RBAC covers only
/// its watched namespaces (the chart with `watchNamespaces`) passes it.
pub async fn check_crds_installed(kube: &kube::Client) -> Result<(), String> {
    let crds: Api<CustomResourceDefinition> = Api::all(kube.clone());
    for (plural, version) in [
        ("configs", Config::version(&())),
        ("deployments", Deployment::version(&())),
        ("ratelimitspolicies", RateLimitsPolicy::version(&())),
        ("connections", crate::resources::Connection::version(&())),
    ] {
        let name = format!("{plural}.aigw.io");
        let crd = crds
            .get_opt(&name)
            .await
            .map_err(|e| format!("failed to check the CRD {name}: {e}"))?;
        let served = crd.is_some_and(|crd| {
            crd.spec
                .versions
                .iter()
                .any(|v| v.served && v.name == version)
        });
        if !served {
            return Err(format!(
                "the CRD {name} is not installed (or does not serve {version}); install the CRDs with `aigw crds | kubectl apply --server-side -f -` (or `kubectl apply -f crds/`)"
            ));
        }
    }
    Ok(())
}

fn scoped<K>(kube: &kube::Client, namespace: Option<&str>) -> Api<K>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    match namespace {
        Some(ns) => Api::namespaced(kube.clone(), ns),
        None => Api::all(kube.clone()),
    }
}

async fn run_kind<K: Managed>(
    ctx: Arc<Context>,
    namespace: Option<String>,
    concurrency: u16,
    with_secrets: bool,
) {
    let api = scoped::<K>(&ctx.kube, namespace.as_deref());
    let mut controller = Controller::new(api, watcher::Config::default().any_semantic())
        .with_config(ControllerConfig::default().concurrency(concurrency));
    K::stores(&ctx.stores).register(controller.store());
    if with_secrets {
        // Deleting a credentials Secret must be noticed at once, not at the next drift check.
        controller = controller.owns(
            scoped::<Secret>(&ctx.kube, namespace.as_deref()),
            watcher::Config::default(),
        );
    }
    controller
        .shutdown_on_signal()
        .run(driver::reconcile::<K>, driver::error_policy::<K>, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                warn!(kind = K::KIND, error = %e, "controller error");
            }
        })
        .await;
}

async fn run_connections(ctx: Arc<Context>, concurrency: u16) {
    let controller = Controller::new(
        Api::<crate::resources::Connection>::all(ctx.kube.clone()),
        watcher::Config::default().any_semantic(),
    );
    ctx.stores.connections.register(controller.store());
    controller
        .with_config(ControllerConfig::default().concurrency(concurrency))
        .shutdown_on_signal()
        .run(connection::reconcile, connection::error_policy, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                warn!(kind = "Connection", error = %e, "controller error");
            }
        })
        .await;
}

/// Runs every controller until the process receives a termination signal or the returned
/// future is dropped.
pub async fn run(ctx: Arc<Context>, settings: Settings) {
    let namespaces: Vec<Option<String>> = if settings.namespaces.is_empty() {
        vec![None]
    } else {
        settings.namespaces.iter().cloned().map(Some).collect()
    };
    info!(namespaces = ?settings.namespaces, concurrency = settings.concurrency, drift_interval = ?settings.drift_interval, "starting controllers");
    let mut tasks = Vec::new();
    for namespace in namespaces {
        tasks.push(tokio::spawn(run_kind::<Config>(
            ctx.clone(),
            namespace.clone(),
            settings.concurrency,
            false,
        )));
        tasks.push(tokio::spawn(run_kind::<Deployment>(
            ctx.clone(),
            namespace.clone(),
            settings.concurrency,
            true,
        )));
        tasks.push(tokio::spawn(run_kind::<RateLimitsPolicy>(
            ctx.clone(),
            namespace,
            settings.concurrency,
            false,
        )));
    }
    tasks.push(tokio::spawn(run_connections(
        ctx.clone(),
        settings.concurrency,
    )));
    let _abort_on_drop = AbortOnDrop(tasks.iter().map(|t| t.abort_handle()).collect());
    for task in tasks {
        let _ = task.await;
    }
}

struct AbortOnDrop(Vec<tokio::task::AbortHandle>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for handle in &self.0 {
            handle.abort();
        }
    }
}

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
