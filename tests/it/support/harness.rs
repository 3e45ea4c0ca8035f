//! A running aigw for integration tests: the emulator over real HTTP, the real API client, and
//! the controllers in this process watching one test namespace of the real apiserver.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use aigw::api::{Client, ClientConfig, RetryPolicy, StaticToken};
pub use aigw::controller::driver::create::CallWindows;
use aigw::controller::runtime::apiserver;
use aigw::controller::runtime::hash_key::{self, HashKey};
use aigw::controller::{self, Connections, Context, Metrics, Settings};
use aigw::emulator::{EmulatorOptions, Running};
use aigw::resources::connection::Grant;
pub use aigw::resources::rotation::RotationLimits;
use serde_json::Value;

use super::SendJson;
use super::TestEnv;
use super::chart::{self, Identity, Scope};

pub const TOKEN: &str = "test-token-3a7f9c1e";

/// The timeout of the operator's management-API clients in tests (`--api-timeout`): the
/// default connection's and every Connection's.
pub const API_TIMEOUT: Duration = Duration::from_secs(10);

/// The windows a lost answer's recovery waits out (`--longest-api-call`, `--list-settle`),
/// shortened for the quick clients tests use: their calls time out after [`API_TIMEOUT`] (plus
/// the 5 s send margin, 5 s of rate limiting and retries fit), and the emulator's lists lag
/// nothing unless a test sets `list_lag_ms` (those tests keep the defaults:
/// [`Harness::with_call_windows`]).
pub const TEST_CALL_WINDOWS: CallWindows = CallWindows {
    longest_attempt: Duration::from_secs(20),
    list_settle: Duration::from_secs(3),
};

/// Every log line the operators of this test process wrote, for secret-leak checks.
pub fn captured_logs() -> String {
    String::from_utf8_lossy(&log_buffer().lock().unwrap_or_else(|e| e.into_inner())).into_owned()
}

/// Where the captured logs end now: [`logs_since`] shows what the operators logged after it.
pub fn log_mark() -> usize {
    log_buffer().lock().unwrap_or_else(|e| e.into_inner()).len()
}

/// The log lines the operators of this test process wrote since `mark` ([`log_mark`]).
pub fn logs_since(mark: usize) -> String {
    let buffer = log_buffer().lock().unwrap_or_else(|e| e.into_inner());
    String::from_utf8_lossy(buffer.get(mark..).unwrap_or_default()).into_owned()
}

fn log_buffer() -> &'static Arc<Mutex<Vec<u8>>> {
    static BUFFER: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    BUFFER.get_or_init(|| {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let writer = buffer.clone();
        let _ = tracing_subscriber::fmt()
            .with_env_filter("aigw=debug,info")
            .with_ansi(false)
            .with_writer(move || CaptureWriter(writer.clone()))
            .try_init();
        buffer
    })
}

struct CaptureWriter(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for CaptureWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Prints the operator's log lines about one namespace when the test that owns it panics.
struct LogsOnPanic(String);

impl Drop for LogsOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let lines: Vec<String> = captured_logs()
                .lines()
                .filter(|l| l.contains(&self.0))
                .map(str::to_string)
                .collect();
            eprintln!(
                "--- operator log for {} ({} lines) ---\n{}",
                self.0,
                lines.len(),
                lines.join("\n")
            );
            // Warnings of no object (a controller or watch error) name no namespace: the last
            // ones of the process, whichever test's operator wrote them.
            let logs = captured_logs();
            let warnings: Vec<&str> = logs
                .lines()
                .filter(|l| {
                    (l.contains(" WARN ") || l.contains(" ERROR ")) && !l.contains("object")
                })
                .collect();
            let last = &warnings[warnings.len().saturating_sub(20)..];
            eprintln!(
                "--- the process's last warnings naming no object ({}) ---\n{}",
                last.len(),
                last.join("\n")
            );
        }
    }
}

pub struct Harness {
    pub env: TestEnv,
    /// A second namespace the operator watches, for tests of what one team may do to another.
    pub other: Option<TestEnv>,
    pub emulator: Running,
    pub ctx: Arc<Context>,
    /// The operator's identity: the chart's ServiceAccount, with the chart's RBAC.
    pub identity: Identity,
    /// The operator's kube client, acting as [`Self::identity`] (test code keeps `env.client`).
    kube: kube::Client,
    /// Every request the operator's kube client sent (`METHOD path STATUS`), GETs included.
    requests: Arc<Mutex<Vec<String>>>,
    settings: Settings,
    grants: Option<Vec<Grant>>,
    secret_namespace: Option<String>,
    /// Where the operator keeps its hash key Secret: its Connection secret namespace (the
    /// chart's `connectionSecretNamespace`, the release namespace by default).
    pub hash_key_namespace: String,
    operator: tokio::task::JoinHandle<()>,
    http: reqwest::Client,
    _logs: LogsOnPanic,
}

impl Harness {
    pub async fn start(prefix: &str) -> Self {
        Self::start_with(prefix, Duration::from_secs(600)).await
    }

    pub async fn start_with(prefix: &str, drift_interval: Duration) -> Self {
        Self::start_with_emulator(prefix, drift_interval, EmulatorOptions::new(TOKEN)).await
    }

    pub async fn start_with_emulator(
        prefix: &str,
        drift_interval: Duration,
        options: EmulatorOptions,
    ) -> Self {
        Self::start_full(prefix, drift_interval, options, false, None, false).await
    }

    /// An operator whose Connection secret namespace (its "own" namespace) is the test
    /// namespace: where cluster-scoped resources read their Secrets. Only for test binaries
    /// that create no Connection: every harness reconciles every Connection, and harnesses that
    /// disagree on the secret namespace would fight over their status.
    pub async fn start_with_secret_namespace(prefix: &str, drift_interval: Duration) -> Self {
        let options = EmulatorOptions::new(TOKEN);
        Self::start_full(prefix, drift_interval, options, false, None, true).await
    }

    /// Like [`Self::start_with_secret_namespace`], with `grants` (a Connection's `spec.grants`,
    /// naming the test namespace as `{ns}`) on the default connection.
    pub async fn start_with_grants(prefix: &str, drift_interval: Duration, grants: Value) -> Self {
        let options = EmulatorOptions::new(TOKEN);
        Self::start_full(prefix, drift_interval, options, false, Some(grants), true).await
    }

    /// Two namespaces watched by one operator, whose default connection has `grants` (a
    /// Connection's `spec.grants`, naming the namespaces as `{ns}` and `{other}`).
    pub async fn start_two_teams(
        prefix: &str,
        drift_interval: Duration,
        grants: Option<Value>,
    ) -> Self {
        Self::start_full(
            prefix,
            drift_interval,
            EmulatorOptions::new(TOKEN),
            true,
            grants,
            false,
        )
        .await
    }

    /// Creates the routing Config `mine` in the test namespace and `theirs` in the other team's
    /// (of [`Self::start_two_teams`]), and waits until both are Ready.
    pub async fn ready_configs_in_both(&self, (mine, theirs): (&str, &str), within: Duration) {
        use super::objects::{Conditions, create, routing};
        let other = self.other.as_ref().expect("a harness of two teams");
        create::<aigw::resources::Config>(&self.env, mine, routing(mine)).await;
        create::<aigw::resources::Config>(other, theirs, routing(theirs)).await;
        for (env, name) in [(&self.env, mine), (other, theirs)] {
            env.wait_for::<aigw::resources::Config>(name, within, |c| c.ready())
                .await;
        }
    }

    async fn start_full(
        prefix: &str,
        drift_interval: Duration,
        options: EmulatorOptions,
        two_teams: bool,
        grants: Option<Value>,
        own_secret_namespace: bool,
    ) -> Self {
        log_buffer();
        let env = TestEnv::new(prefix).await;
        let other = match two_teams {
            true => Some(TestEnv::new(&format!("{prefix}-b")).await),
            false => None,
        };
        let grants: Option<Vec<Grant>> = grants.map(|g| {
            let other_ns = other
                .as_ref()
                .map(|o| o.namespace.clone())
                .unwrap_or_default();
            let text = g
                .to_string()
                .replace("{ns}", &env.namespace)
                .replace("{other}", &other_ns);
            serde_json::from_str(&text).expect("grants")
        });
        let emulator = aigw::emulator::spawn(options)
            .await
            .expect("emulator did not start");
        let mut namespaces = vec![env.namespace.clone()];
        namespaces.extend(other.iter().map(|o| o.namespace.clone()));
        let settings = Settings {
            namespaces,
            concurrency: 4,
            drift_interval,
            // Each test's operator takes only the cluster-scoped objects labelled for it.
            cluster_selector: Some(format!("{CLUSTER_LABEL}={}", env.namespace)),
            // Tests rotate on intervals of seconds and change triggers back to back; the tests
            // of the bounds raise them (`set_rotation_limits`).
            rotation: RotationLimits {
                min_interval: Duration::from_secs(1),
                spacing: Duration::ZERO,
            },
            call_windows: TEST_CALL_WINDOWS,
            ..Default::default()
        };
        let secret_namespace = own_secret_namespace.then(|| env.namespace.clone());
        // Operators that watch two teams or read Secrets in their own namespace run under the
        // chart's `watchNamespaces` form (a Role per namespace), the others under its
        // cluster-wide form.
        let scope = match two_teams || own_secret_namespace {
            true => {
                let watched: Vec<&str> = settings.namespaces.iter().map(String::as_str).collect();
                Scope::watched(&watched).secret_namespace(secret_namespace.as_deref())
            }
            false => Scope::cluster_wide(),
        };
        let identity = chart::install(&env.client, &scope).await;
        let requests = Arc::new(Mutex::new(Vec::new()));
        let kube = recording_client(identity.kubeconfig(), requests.clone(), true)
            .build()
            .await;
        let hash_key_namespace = secret_namespace
            .clone()
            .unwrap_or_else(|| chart::RELEASE_NAMESPACE.to_string());
        let hash_key = load_hash_key(&kube, &hash_key_namespace, settings.dry_run).await;
        let settings = Settings {
            own_namespace: Some(hash_key_namespace.clone()),
            ..settings
        };
        let ctx = new_context(
            &kube,
            &emulator,
            &settings,
            grants.clone(),
            secret_namespace.clone(),
            hash_key,
        );
        let operator = tokio::spawn(controller::run(ctx.clone(), settings.clone()));
        Self {
            _logs: LogsOnPanic(env.namespace.clone()),
            env,
            other,
            emulator,
            ctx,
            identity,
            kube,
            requests,
            settings,
            grants,
            secret_namespace,
            hash_key_namespace,
            operator,
            http: reqwest::Client::new(),
        }
    }

    /// Runs one more operator (its own caches and state) against the same namespaces, as a
    /// second replica without leader election would. Aborted when the handle is dropped.
    pub fn second_operator(&self) -> tokio::task::JoinHandle<()> {
        self.second_operator_armed(&[]).0
    }

    /// A second operator as [`Harness::second_operator`], with the failpoints `armed` armed in
    /// it; its context is returned, to release them.
    pub fn second_operator_armed(
        &self,
        armed: &[&str],
    ) -> (tokio::task::JoinHandle<()>, Arc<Context>) {
        let ctx = new_context(
            &self.kube,
            &self.emulator,
            &self.settings,
            self.grants.clone(),
            self.secret_namespace.clone(),
            self.ctx.hash_key.clone(),
        );
        for failpoint in armed {
            ctx.failpoints.arm(failpoint);
        }
        let run = tokio::spawn(controller::run(ctx.clone(), self.settings.clone()));
        (run, ctx)
    }

    /// Stops the controllers at once, as a killed process would stop, and starts new ones with
    /// fresh in-memory state (backoff, failpoints).
    pub async fn restart_operator(&mut self) {
        let config = api_config(self.emulator.management_url(), &self.emulator, TOKEN);
        self.restart_operator_with(config).await;
    }

    /// Restarts the operator with `--connection-secret-namespace` set to `namespace` (none: an
    /// operator started without it), its RBAC unchanged.
    pub async fn restart_operator_with_secret_namespace(&mut self, namespace: Option<String>) {
        self.secret_namespace = namespace;
        self.restart_operator().await;
    }

    /// Stops the controllers and starts new ones whose management API client is built from
    /// `config`.
    async fn restart_operator_with(&mut self, config: ClientConfig) {
        self.stop_operator().await;
        self.ctx = new_context_with(
            &self.kube,
            config,
            &self.settings,
            self.grants.clone(),
            self.secret_namespace.clone(),
            self.load_hash_key().await,
        );
        self.operator = tokio::spawn(controller::run(self.ctx.clone(), self.settings.clone()));
    }

    /// Like [`Self::restart_operator`], with a kube client (still the operator's identity) that
    /// records every request it sends (`METHOD path STATUS`, reads included) into the vector
    /// returned.
    #[allow(dead_code)]
    pub async fn restart_operator_recording(&mut self) -> Arc<Mutex<Vec<String>>> {
        let requests = Arc::new(Mutex::new(Vec::new()));
        self.kube = recording_client(self.identity.kubeconfig(), requests.clone(), true)
            .build()
            .await;
        self.restart_operator().await;
        requests
    }

    /// Replaces the operator by one whose management API client talks to `management_url`,
    /// and whose kube client answers every read of the resource `plural` (its watch cache's
    /// list and watch) `by` late: that kind's cache lists last after the start.
    #[allow(dead_code)]
    pub async fn restart_operator_via_with_late_reads(
        &mut self,
        management_url: &str,
        plural: &'static str,
        by: Duration,
    ) {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let mut kube = recording_client(self.identity.kubeconfig(), requests, false);
        kube.late = Some((plural, by));
        self.kube = kube.build().await;
        self.restart_operator_via(management_url).await;
    }

    /// Replaces the default Connection's grants (`{ns}` stands for the test namespace); the
    /// next `restart_operator` uses them.
    #[allow(dead_code)]
    pub fn set_grants(&mut self, grants: Value) {
        let text = grants.to_string().replace("{ns}", &self.env.namespace);
        self.grants = Some(serde_json::from_str(&text).expect("grants"));
    }

    /// Replaces the operator's rotation bounds (`--min-rotation-interval`,
    /// `--rotation-spacing`); the next `restart_operator` uses them.
    #[allow(dead_code)]
    pub fn set_rotation_limits(&mut self, limits: RotationLimits) {
        self.settings.rotation = limits;
    }

    /// This harness with its operator restarted under `windows` (`--longest-api-call`,
    /// `--list-settle`) instead of [`TEST_CALL_WINDOWS`]: for tests whose emulator lists lag.
    #[allow(dead_code)]
    pub async fn with_call_windows(mut self, windows: CallWindows) -> Self {
        self.settings.call_windows = windows;
        self.restart_operator().await;
        self
    }

    /// Stops the controllers at once, as a killed process would stop, and starts none (a later
    /// `restart_operator` starts new ones).
    pub async fn stop_operator(&mut self) {
        self.operator.abort();
        let stopped = std::mem::replace(&mut self.operator, tokio::spawn(async {}));
        let _ = stopped.await;
    }

    /// Replaces the operator by one whose management API client talks to `management_url` (a
    /// proxy in front of the emulator) instead of to the emulator itself.
    pub async fn restart_operator_via(&mut self, management_url: &str) {
        let config = api_config(management_url.to_string(), &self.emulator, TOKEN);
        self.restart_operator_with(config).await;
    }

    /// Like [`Self::restart_operator_via`], with the client the operator binary builds (its
    /// 30 s timeout, and retries that wait out a `Retry-After` of up to 30 s) instead of the
    /// quick one tests use), under the binary's default windows (a 30 s call does not fit
    /// [`TEST_CALL_WINDOWS`]).
    pub async fn restart_operator_via_production_client(&mut self, management_url: &str) {
        self.settings.call_windows = CallWindows::default();
        let config = ClientConfig::new(
            management_url,
            self.emulator.gateway_url(),
            Arc::new(StaticToken::new(TOKEN)),
        );
        self.restart_operator_with(config).await;
    }

    /// The hash key a starting operator reads (as `aigw operator` does at start, under the
    /// chart's RBAC).
    pub async fn load_hash_key(&self) -> HashKey {
        load_hash_key(&self.kube, &self.hash_key_namespace, self.settings.dry_run).await
    }

    /// Stops the controllers and starts an `--dry-run` operator in their place.
    pub async fn restart_dry_run(&mut self) {
        self.settings.dry_run = true;
        self.restart_operator().await;
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.emulator.management_url())
    }

    pub async fn stats(&self) -> Value {
        self.http
            .get(self.url("/_emulator/stats"))
            .json_value()
            .await
    }

    pub async fn reset_stats(&self) {
        self.http
            .delete(self.url("/_emulator/stats"))
            .send()
            .await
            .unwrap();
    }

    /// Requests counted for `"METHOD /template"`, all statuses.
    /// Remote writes (every request but GETs) the emulator counted, all endpoints.
    pub async fn remote_writes(&self) -> u64 {
        let stats = self.stats().await;
        stats["requests"]
            .as_object()
            .map(|m| {
                m.keys()
                    .filter(|k| !k.starts_with("GET "))
                    .map(|k| count_in(&stats, k))
                    .sum()
            })
            .unwrap_or(0)
    }

    pub async fn count(&self, endpoint: &str) -> u64 {
        count_in(&self.stats().await, endpoint)
    }

    /// Asserts that the emulator counted `expected` requests for `endpoint` (`METHOD path
    /// template`), showing all it counted when not.
    pub async fn assert_count(&self, endpoint: &str, expected: u64) {
        let stats = self.stats().await;
        assert_eq!(count_in(&stats, endpoint), expected, "{endpoint}: {stats}");
    }

    pub async fn faults(&self, faults: Value) {
        let response = self
            .http
            .put(self.url("/_emulator/faults"))
            .json(&faults)
            .send()
            .await
            .unwrap();
        assert!(
            response.status().is_success(),
            "faults not accepted: {}",
            response.status()
        );
    }

    /// Presents `client_auth` for deployment `id` as its gateway would; the HTTP status.
    pub async fn handshake(&self, id: &str, client_auth: &str) -> u16 {
        let body = serde_json::json!({ "client_auth": client_auth });
        super::gateway_handshake(&self.http, &self.url(""), ("deployments", id), body).await
    }

    /// Makes deployment `id` vanish from the emulator, as if removed outside the API: later
    /// reads answer 404.
    pub async fn purge_deployment(&self, id: &str) {
        let url = self.url(&format!("/_emulator/deployments/{id}"));
        let response = self.http.delete(url).send().await.unwrap();
        assert!(
            response.status().is_success(),
            "purge: {}",
            response.status()
        );
    }

    pub async fn state(&self) -> Value {
        self.http
            .get(self.url("/_emulator/state"))
            .json_value()
            .await
    }

    /// The single-object GETs of Secrets (`GET /api/v1/namespaces/{ns}/secrets/{name}`) the
    /// operator sent to the apiserver so far; lists and watches are not counted.
    #[allow(dead_code)]
    pub fn secret_gets(&self) -> Vec<String> {
        let requests = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        requests
            .iter()
            .filter(|r| {
                let mut parts = r.split(' ');
                let (method, path) = (parts.next(), parts.next().unwrap_or(""));
                let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
                method == Some("GET")
                    && matches!(segments[..], ["api", "v1", "namespaces", _, "secrets", _])
            })
            .cloned()
            .collect()
    }

    /// A management API call outside the operator (an out-of-band edit).
    pub async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let base = self.emulator.management_url();
        call_api(&self.http, &base, method, path, body).await
    }

    /// A management API `GET path` outside the operator; its answer.
    pub async fn get(&self, path: &str) -> Value {
        self.call(reqwest::Method::GET, path, None).await
    }

    /// A management API `POST path` of `body` outside the operator; its answer.
    pub async fn post(&self, path: &str, body: Value) -> Value {
        self.call(reqwest::Method::POST, path, Some(body)).await
    }

    /// A remote object made outside the operator (`POST path` of `body`): its `key` (`id` or
    /// `slug`). The stats are reset after it, so they count only what follows.
    pub async fn made_outside(&self, path: &str, body: Value, key: &str) -> String {
        let created = self.post(path, body).await;
        self.reset_stats().await;
        created[key].as_str().unwrap().to_string()
    }

    /// A management API `PUT path` of `body` outside the operator (an out-of-band edit); its
    /// answer.
    pub async fn put(&self, path: &str, body: Value) -> Value {
        self.call(reqwest::Method::PUT, path, Some(body)).await
    }

    /// A management API `DELETE path` outside the operator; its answer.
    pub async fn delete(&self, path: &str) -> Value {
        self.call(reqwest::Method::DELETE, path, None).await
    }

    pub async fn stop(self) {
        self.operator.abort();
        let _ = self.operator.await;
        assert_no_refusals(&self.env.namespace);
        purge_cluster::<aigw::resources::ClusterGuardrail>(&self.env).await;
        purge_cluster::<aigw::resources::Integration>(&self.env).await;
        purge_cluster::<aigw::resources::Workspace>(&self.env).await;
        purge_cluster::<aigw::resources::McpIntegration>(&self.env).await;
        if let Some(other) = self.other {
            other.cleanup().await;
        }
        self.env.cleanup().await;
    }
}

/// Fails when the apiserver refused the operator anything about the test's objects (their log
/// lines name the test namespace; cluster-scoped ones are named after it): a verb the chart's
/// RBAC lacks.
pub fn assert_no_refusals(namespace: &str) {
    let refused: Vec<String> = captured_logs()
        .lines()
        .filter(|l| l.contains(namespace) && l.contains("is forbidden: User"))
        .map(str::to_string)
        .collect();
    assert!(
        refused.is_empty(),
        "the chart's RBAC refused the operator:\n{}",
        refused.join("\n")
    );
}

/// The label that selects a test's cluster-scoped objects for its operator (value: its namespace).
pub const CLUSTER_LABEL: &str = "aigw-test/env";

impl Harness {
    /// `kind`/`name` as a cluster-scoped object of this test: its name prefixed with the test
    /// namespace (cluster-wide names are shared by every test), labelled for this operator.
    pub fn cluster_object<K: serde::de::DeserializeOwned>(
        &self,
        kind: &str,
        name: &str,
        spec: Value,
    ) -> K {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "aigw.io/v1alpha1", "kind": kind,
            "metadata": {"name": self.cluster_name(name),
                         "labels": {CLUSTER_LABEL: self.env.namespace}},
            "spec": spec
        }))
        .unwrap()
    }

    /// Every event about cluster-scoped objects of this test (they are published to the
    /// namespace `default`), one per line.
    pub async fn cluster_events_text(&self) -> String {
        let events = kube::Api::<k8s_openapi::api::core::v1::Event>::namespaced(
            self.env.client.clone(),
            "default",
        )
        .list(&Default::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
        let prefix = format!("{}-", self.env.namespace);
        events
            .iter()
            .filter(|e| {
                e.involved_object
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with(&prefix))
            })
            .map(super::event_line)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// A Connection `<namespace>-reach` to this test's emulator, labelled into this operator's
    /// reach, with its token Secret `reach-token`: its name and the Connections' API, to
    /// relabel it out of reach (`CLUSTER_LABEL` set to another value) and back.
    pub async fn connection_in_reach(&self) -> (String, kube::Api<aigw::resources::Connection>) {
        let data = serde_json::json!({ "token": TOKEN });
        self.connection_with_secret("reach", data).await
    }

    /// A Connection `<namespace>-<suffix>` to this test's emulator, labelled into this
    /// operator's reach, whose bearer token is key `token` of Secret `<suffix>-token`, created
    /// with `string_data` in this test's namespace: its name and the Connections' API.
    pub async fn connection_with_secret(
        &self,
        suffix: &str,
        string_data: serde_json::Value,
    ) -> (String, kube::Api<aigw::resources::Connection>) {
        use k8s_openapi::api::core::v1::Secret;
        let ns = &self.env.namespace;
        let secret = format!("{suffix}-token");
        self.env
            .create_from::<Secret>(serde_json::json!({
                "metadata": {"name": secret}, "stringData": string_data
            }))
            .await;
        let name = format!("{ns}-{suffix}");
        let connection: aigw::resources::Connection = serde_json::from_value(serde_json::json!({
            "apiVersion": "aigw.io/v1alpha1", "kind": "Connection",
            "metadata": {"name": name, "labels": {CLUSTER_LABEL: ns}},
            "spec": {"managementUrl": self.emulator.management_url(),
                     "gatewayUrl": self.emulator.gateway_url(),
                     "auth": {"bearerToken": {"secretRef": {"namespace": ns, "name": secret, "key": "token"}}}}
        }))
        .unwrap();
        let connections = kube::Api::all(self.env.client.clone());
        connections
            .create(&Default::default(), &connection)
            .await
            .unwrap();
        (name, connections)
    }

    /// Deletes `object` of `api` while the Connection `name` (of [`Self::connection_in_reach`])
    /// is out of reach and sees its deletion held (its finalizer kept); puts the Connection back
    /// in reach and sees the object go within `within` (woken by the relabel alone: its deletion
    /// was heard before); then deletes the Connection.
    pub async fn deletion_held_until_back_in_reach<K>(
        &self,
        api: &kube::Api<K>,
        object: &str,
        (name, connections): (&str, &kube::Api<aigw::resources::Connection>),
        within: Duration,
    ) where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        api.delete(object, &Default::default()).await.unwrap();
        tokio::time::sleep(Duration::from_secs(3)).await;
        let held = api.get(object).await.unwrap();
        let finalizers = &held.meta().finalizers;
        assert!(
            finalizers.as_ref().is_some_and(|f| !f.is_empty()),
            "{finalizers:?}"
        );
        let back = serde_json::json!({"metadata": {"labels": {CLUSTER_LABEL: self.env.namespace}}});
        super::merge_patch(connections, name, back).await;
        let gone = super::gone_within(api, object, within).await;
        assert!(gone, "its deletion goes once the Connection is back");
        connections.delete(name, &Default::default()).await.unwrap();
    }

    /// The cluster-wide name of this test's cluster-scoped object `name`.
    pub fn cluster_name(&self, name: &str) -> String {
        format!("{}-{name}", self.env.namespace)
    }
}

/// Deletes the cluster-scoped objects of kind `K` labelled for `env`, finalizers dropped.
async fn purge_cluster<K>(env: &TestEnv)
where
    K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api = kube::Api::<K>::all(env.client.clone());
    let selector = format!("{CLUSTER_LABEL}={}", env.namespace);
    let params = kube::api::ListParams::default().labels(&selector);
    super::force_delete_all(&api, &params).await;
}

/// A call with the test token to the management API at `base` (an emulator of the test's own);
/// its answer (`Null` when empty). A failed status panics with the path and the answer.
pub async fn call_api(
    http: &reqwest::Client,
    base: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> Value {
    let mut request = http
        .request(method, format!("{base}{path}"))
        .bearer_auth(TOKEN);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    assert!(status.is_success(), "{path}: {status} {text}");
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

/// Sums every status of `endpoint` ("METHOD /template") in an emulator stats document.
pub fn count_in(stats: &Value, endpoint: &str) -> u64 {
    stats["requests"][endpoint]
        .as_object()
        .map(|by_status| by_status.values().filter_map(Value::as_u64).sum())
        .unwrap_or(0)
}

fn new_context(
    kube: &kube::Client,
    emulator: &Running,
    settings: &Settings,
    grants: Option<Vec<Grant>>,
    secret_namespace: Option<String>,
    hash_key: HashKey,
) -> Arc<Context> {
    let config = api_config(emulator.management_url(), emulator, TOKEN);
    new_context_with(kube, config, settings, grants, secret_namespace, hash_key)
}

fn new_context_with(
    kube: &kube::Client,
    config: ClientConfig,
    settings: &Settings,
    grants: Option<Vec<Grant>>,
    secret_namespace: Option<String>,
    hash_key: HashKey,
) -> Arc<Context> {
    let api = Client::new(config).expect("api client");
    Arc::new(
        Context::new(
            kube.clone(),
            Connections::new(kube.clone(), Some(api))
                .with_default_grants(grants)
                .with_secret_namespace(secret_namespace)
                .with_api_timeout(API_TIMEOUT),
            Arc::new(Metrics::default()),
            settings,
        )
        .with_hash_key(hash_key),
    )
}

/// [`hash_key::load`] as the operator identity `kube`; a test cannot go on without it.
async fn load_hash_key(kube: &kube::Client, namespace: &str, dry_run: bool) -> HashKey {
    hash_key::load(kube, namespace, dry_run)
        .await
        .unwrap_or_else(|e| panic!("the operator's hash key: {e}"))
}

/// The management API client configuration of an operator's `default` connection:
/// `management_url` (the emulator, or a proxy in front of it) with `token`.
fn api_config(management_url: String, emulator: &Running, token: &str) -> ClientConfig {
    ClientConfig::new(
        management_url,
        emulator.gateway_url(),
        Arc::new(StaticToken::new(token)),
    )
    .timeout(API_TIMEOUT)
    .retry(RetryPolicy {
        max_attempts: 3,
        base_delay: Duration::from_millis(50),
        max_delay: Duration::from_secs(1),
    })
    .rate_limit(200.0, 200)
}

/// One more installation of the operator over a harness's namespaces: its own id, its own
/// emulator (a tenant of its own, reached with its own token as its `default`), its own
/// `--cluster-selector`, and a kube client that records every write it sends, so a test can
/// show what it did, and did not do, to the cluster. Its events name it as their reporting
/// instance. Stopped when dropped.
pub struct Installation {
    pub id: String,
    pub emulator: Running,
    /// The bearer token its emulator takes.
    pub token: String,
    writes: Arc<Mutex<Vec<String>>>,
    operator: tokio::task::JoinHandle<()>,
    http: reqwest::Client,
}

impl Harness {
    /// Starts installation `id` over this harness's namespaces, selecting the cluster-scoped
    /// objects (Connections included) that `cluster_selector` selects.
    pub async fn installation(&self, id: &str, cluster_selector: &str) -> Installation {
        self.installation_claiming(id, cluster_selector, Default::default())
            .await
    }

    /// [`Self::installation`] with `--claims claims`.
    pub async fn installation_claiming(
        &self,
        id: &str,
        cluster_selector: &str,
        claims: aigw::controller::state::claim_guard::ClaimMode,
    ) -> Installation {
        // Random, as a real token is: one holding the installation's id would be concealed
        // wherever a message names the installation (the operator conceals its own token).
        let token = format!("tok-{}", uuid::Uuid::new_v4().simple());
        let emulator = aigw::emulator::spawn(EmulatorOptions::new(&token))
            .await
            .expect("emulator did not start");
        let settings = Settings {
            cluster_selector: Some(cluster_selector.to_string()),
            installation_id: id.to_string(),
            claims,
            ..self.settings.clone()
        };
        let writes = Arc::new(Mutex::new(Vec::new()));
        // Under the chart's RBAC, as the harness's operator.
        let kube = recording_client(self.identity.kubeconfig(), writes.clone(), false)
            .build()
            .await;
        let config = api_config(emulator.management_url(), &emulator, &token);
        let api = Client::new(config).expect("api client");
        let hash_key = load_hash_key(&kube, &self.hash_key_namespace, settings.dry_run).await;
        let mut ctx = Context::new(
            kube.clone(),
            Connections::new(kube.clone(), Some(api))
                .with_default_grants(self.grants.clone())
                .with_secret_namespace(self.secret_namespace.clone())
                .with_api_timeout(API_TIMEOUT),
            Arc::new(Metrics::default()),
            &settings,
        )
        .with_hash_key(hash_key);
        let reporter = kube::runtime::events::Reporter {
            controller: "aigw".into(),
            instance: Some(id.to_string()),
        };
        ctx.recorder = kube::runtime::events::Recorder::new(kube, reporter);
        let ctx = Arc::new(ctx);
        let operator = tokio::spawn(controller::run(ctx, settings));
        Installation {
            id: id.to_string(),
            emulator,
            token,
            writes,
            operator,
            http: reqwest::Client::new(),
        }
    }
}

impl Installation {
    /// Every write (`METHOD path STATUS`) this installation sent to the apiserver so far.
    pub fn kube_writes(&self) -> Vec<String> {
        self.writes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The writes this installation sent about object `name` of `resource` (the plural, e.g.
    /// `configs`): to it, its status or its metadata, each with the apiserver's answer.
    pub fn writes_to(&self, resource: &str, name: &str) -> Vec<String> {
        let target = format!("/{resource}/{name}");
        self.kube_writes()
            .into_iter()
            .filter(|w| w.contains(&format!("{target} ")) || w.contains(&format!("{target}/")))
            .collect()
    }

    /// Its emulator's state (`GET /_emulator/state`).
    pub async fn state(&self) -> Value {
        let url = format!("{}/_emulator/state", self.emulator.management_url());
        let response = self.http.get(url).send().await.unwrap();
        response.json().await.unwrap()
    }

    /// The remote writes (every request but GETs) its emulator counted.
    pub async fn remote_writes(&self) -> u64 {
        let url = format!("{}/_emulator/stats", self.emulator.management_url());
        let stats: Value = self.http.get(url).json_value().await;
        let endpoints = stats["requests"].as_object().cloned().unwrap_or_default();
        endpoints
            .keys()
            .filter(|k| !k.starts_with("GET "))
            .map(|k| count_in(&stats, k))
            .sum()
    }

    /// How many requests its emulator counted for `endpoint` (`METHOD path template`).
    pub async fn count(&self, endpoint: &str) -> u64 {
        let url = format!("{}/_emulator/stats", self.emulator.management_url());
        let stats: Value = self.http.get(url).json_value().await;
        count_in(&stats, endpoint)
    }

    /// Stops its controllers at once, as a killed process would stop.
    pub async fn stop(&mut self) {
        self.operator.abort();
        let stopped = std::mem::replace(&mut self.operator, tokio::spawn(async {}));
        let _ = stopped.await;
    }
}

impl Drop for Installation {
    fn drop(&mut self) {
        self.operator.abort();
    }
}

/// A client of the local control plane (as `kubeconfig` says) that records every request, with
/// its answer (`METHOD path STATUS`), into `requests`: the reads too when `reads`.
fn recording_client(
    kubeconfig: kube::config::Kubeconfig,
    requests: Arc<Mutex<Vec<String>>>,
    reads: bool,
) -> RecordingClient {
    RecordingClient {
        kubeconfig,
        recording: Recording {
            inner: (),
            writes: requests,
            reads,
            late: None,
        },
        late: None,
    }
}

/// What [`recording_client`] builds, with its reads of one resource answered late if asked.
struct RecordingClient {
    kubeconfig: kube::config::Kubeconfig,
    recording: Recording<()>,
    late: Option<(&'static str, Duration)>,
}

impl RecordingClient {
    async fn build(mut self) -> kube::Client {
        let config = kube::Config::from_custom_kubeconfig(self.kubeconfig, &Default::default())
            .await
            .expect("invalid kubeconfig");
        self.recording.late = self.late;
        // The operator's own client: HTTP/2 to the apiserver, as `aigw operator` speaks it.
        apiserver::builder(config, apiserver::Protocol::Http2)
            .expect("kube client")
            .with_layer(&self.recording)
            .build()
    }
}

/// The layer (`inner: ()`) and the service of [`recording_client`].
struct Recording<S> {
    inner: S,
    writes: Arc<Mutex<Vec<String>>>,
    /// Reads recorded too.
    reads: bool,
    /// Reads of the resource of this plural (a list or watch) are sent this much later.
    late: Option<(&'static str, Duration)>,
}

impl<S> tower::Layer<S> for Recording<()> {
    type Service = Recording<S>;

    fn layer(&self, inner: S) -> Recording<S> {
        Recording {
            inner,
            writes: self.writes.clone(),
            reads: self.reads,
            late: self.late,
        }
    }
}

impl<S, B> tower::Service<http::Request<kube::client::Body>> for Recording<S>
where
    S: tower::Service<http::Request<kube::client::Body>, Response = http::Response<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = futures::future::BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<kube::client::Body>) -> Self::Future {
        let write = (self.reads || request.method() != http::Method::GET)
            .then(|| format!("{} {}", request.method(), request.uri().path()));
        let writes = self.writes.clone();
        let late = self.late.filter(|(plural, _)| {
            request.method() == http::Method::GET
                && request.uri().path().ends_with(&format!("/{plural}"))
        });
        let answer = self.inner.call(request);
        Box::pin(async move {
            if let Some((_, by)) = late {
                tokio::time::sleep(by).await;
            }
            let response = answer.await?;
            if let Some(write) = write {
                let line = format!("{write} {}", response.status().as_u16());
                writes.lock().unwrap_or_else(|e| e.into_inner()).push(line);
            }
            Ok(response)
        })
    }
}
