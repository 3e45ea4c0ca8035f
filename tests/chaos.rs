//! `make chaos`: the exactly-once promise under leader kills, an apiserver restart and a faulty
//! management API, with the emulator's state as the truth.
//!
//! Everything runs as real processes: `aigw emulator` and two `aigw operator` replicas with leader
//! election, against the local kube-apiserver, under the chart's RBAC (its `watchNamespaces` form,
//! impersonating its ServiceAccount; no refusal may appear in their logs but right after the
//! apiserver restart, before its RBAC caches have synced). The emulator answers 10 % of requests
//! with a 5xx (half of them after the write committed), drops 5 % of connections after commit and
//! hides new objects from its lists for a while. Meanwhile the suite SIGKILLs the current leader 20
//! times at random moments (a fresh replica replaces each victim), changes rotation triggers in
//! between, freezes one leader (SIGSTOP) past its lease and resumes it (it must send nothing it had
//! queued, and exit), creates Configs and deletes them during their creates, and restarts the
//! kube-apiserver once. Then, faults off and everything
//! Ready, it checks: one remote object per resource, every Secret's `client_auth` accepted by
//! the gateway handshake (and every ApiKey Secret the key's current value), rotations equal to
//! trigger changes plus at most one per incident
//! inside the rotation's window, and no remote object left behind after deleting everything.
//!
//! It prints one JSON summary line and fails when any of those counts is off. It is a test
//! target with `test = false` (Cargo.toml): `make chaos` runs it at full scale, and `make test`
//! runs a short round (`make chaos-short`: 60 resources, 5 kills). Scale knobs:
//! `AIGW_CHAOS_CONFIGS`, `AIGW_CHAOS_POLICIES`, `AIGW_CHAOS_DEPLOYMENTS`, `AIGW_CHAOS_API_KEYS`,
//! `AIGW_CHAOS_KILLS`. `AIGW_CHAOS_SHARDS=N` runs the sharded mode instead (`make
//! chaos-sharded`, see `chaos/shards.rs`): N active-active replicas over 2×N namespaces.
//!
//! Rotating ApiKeys (5 by default) go through the same rotation protocol as the Deployments'
//! credentials and are held to the same counts; at the end each key's Secret must hold the
//! key's current value (not one still inside its transition period, which would die later).
//!
//! How extra rotations are allowed: a rotation whose answer was lost (5xx after commit, a
//! dropped connection) or whose reconcile was cut by a kill cannot be told apart from one that
//! never happened, so the operator may rotate once more. Each trigger change opens a window for
//! its Deployment that closes when the status reports the new trigger observed and Ready (the
//! create opens one too, closed at the first Ready). An incident is a leader SIGKILL, the
//! apiserver outage, or a `reconcile failed` line the operators logged for that Deployment (every
//! lost answer produces one: the write's error is the reconcile's error). The rotations the
//! emulator counted for a Deployment must be at least its trigger changes and at most its
//! trigger changes plus the incidents that fall inside its windows.

/// The sharded mode (`AIGW_CHAOS_SHARDS`).
#[path = "chaos/shards.rs"]
mod shards;

/// The integration binary's support (`tests/it/support`); this target uses part of it.
#[allow(dead_code)]
#[path = "it/support/mod.rs"]
mod support;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aigw::resources::{ApiKey, Config, Deployment, RateLimitsPolicy};
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use rand::Rng;
use serde_json::{Value, json};
use support::objects::{Conditions, gateway, limits, object, routing};
use support::{TestEnv, repo_root, wait_until};

const TOKEN: &str = "chaos-token-71c2e9";
const TAKEOVER_TIMEOUT: Duration = Duration::from_secs(120);
const SETTLE_TIMEOUT: Duration = Duration::from_secs(300);
/// The replicas' leader election (`--leader-elect-lease-duration`, `--leader-elect-renew-deadline`,
/// `--leader-elect-retry-period`): shorter than the defaults (15 s, 10 s, 2 s) so that each
/// takeover after a SIGKILL waits out less; the same order of the three, the same protocol.
const LEASE: [(&str, &str); 3] = [
    ("--leader-elect-lease-duration", "8s"),
    ("--leader-elect-renew-deadline", "6s"),
    ("--leader-elect-retry-period", "1s"),
];
const LEASE_DURATION: Duration = Duration::from_secs(8);
/// What a lost answer's recovery waits out (`--api-timeout`, `--longest-api-call`,
/// `--list-settle`): shorter than the defaults (30 s, 60 s, 30 s), still above the emulator's
/// list lag ([`FAULTS`]: 3 s) and its answers (it never hangs here).
const CALL_WINDOWS: [(&str, &str); 3] = [
    ("--api-timeout", "10s"),
    ("--longest-api-call", "20s"),
    ("--list-settle", "10s"),
];
/// How long a leader is frozen: longer than its lease, so a standby takes over meanwhile.
const PAUSE: Duration = Duration::from_secs(LEASE_DURATION.as_secs() + 7);
const FAULTS: &str = r#"{"error_rate": 0.05, "error_after_commit_rate": 0.05,
    "drop_after_commit_rate": 0.05, "list_lag_ms": 3000}"#;

/// How big the run is; the defaults are the issue's scale.
struct Scale {
    configs: usize,
    policies: usize,
    deployments: usize,
    api_keys: usize,
    kills: usize,
    /// `AIGW_CHAOS_SHARDS`: 0 for the leader-elected pair, N for N active-active shards.
    shards: usize,
}

impl Scale {
    fn from_env() -> Self {
        let knob = support::env_or::<usize>;
        Self {
            configs: knob("AIGW_CHAOS_CONFIGS", 300),
            policies: knob("AIGW_CHAOS_POLICIES", 20),
            deployments: knob("AIGW_CHAOS_DEPLOYMENTS", 10),
            api_keys: knob("AIGW_CHAOS_API_KEYS", 5),
            kills: knob("AIGW_CHAOS_KILLS", 20),
            shards: knob("AIGW_CHAOS_SHARDS", 0),
        }
    }
}

/// Where the resources live: the test's namespace, and in the sharded mode more of them
/// (resource `i` of each kind in namespace `i % n`), since a namespace is what the shards split.
/// Names stay unique across them, so a name alone tells a resource.
#[derive(Clone)]
struct Spread {
    client: kube::Client,
    namespaces: Vec<String>,
}

impl Spread {
    fn api<K>(&self, namespace: &str) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// The namespace of the `i`-th resource of a kind.
    fn home(&self, i: usize) -> &str {
        &self.namespaces[i % self.namespaces.len()]
    }

    /// The create of `object`, the `i`-th resource of its kind, in its namespace: to run with
    /// the others.
    fn create<K>(&self, i: usize, object: K) -> BoxFuture<'static, kube::Result<()>>
    where
        K: support::NamespacedKind + Send + Sync + 'static,
    {
        let api = self.api::<K>(self.home(i));
        async move {
            api.create(&PostParams::default(), &object)
                .await
                .map(|_| ())
        }
        .boxed()
    }

    /// The `K` objects of every namespace.
    async fn list<K>(&self) -> kube::Result<Vec<K>>
    where
        K: support::NamespacedKind,
    {
        let mut all = Vec::new();
        for namespace in &self.namespaces {
            let list = self
                .api::<K>(namespace)
                .list(&ListParams::default())
                .await?;
            all.extend(list.items);
        }
        Ok(all)
    }

    /// Deletes the `K` objects of every namespace (their finalizers left to run).
    async fn delete_all<K: support::NamespacedKind>(&self) {
        let params = (DeleteParams::default(), ListParams::default());
        for namespace in &self.namespaces {
            self.api::<K>(namespace)
                .delete_collection(&params.0, &params.1)
                .await
                .unwrap();
        }
    }

    /// The `K` named `name`, in whichever namespace it is.
    async fn find<K>(&self, name: &str) -> Option<K>
    where
        K: support::NamespacedKind,
    {
        for namespace in &self.namespaces {
            if let Ok(Some(found)) = self.api::<K>(namespace).get_opt(name).await {
                return Some(found);
            }
        }
        None
    }
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// A child process killed (SIGKILL) when dropped.
struct Process {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Process {
    fn spawn(name: &str, command: &mut Command, dir: &Path) -> Self {
        let log = dir.join(format!("{name}.log"));
        let file = std::fs::File::create(&log).unwrap();
        let child = command
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("failed to start {name}: {e}"));
        Self {
            name: name.to_string(),
            child,
            log,
        }
    }

    /// The `addr` of the first JSON log line whose message is `message`: where a process
    /// started on port 0 listens once it says so. The kernel picks a free port at the bind; a
    /// port picked by the suite and handed over could be taken in between.
    fn said_addr(&self, message: &str) -> Option<SocketAddr> {
        let log = std::fs::read_to_string(&self.log).ok()?;
        log.lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .find(|line| line["fields"]["message"] == message)?["fields"]["addr"]
            .as_str()?
            .parse()
            .ok()
    }

    /// Where an operator serves `/metrics` and its probes, once it has bound the port.
    fn probes_addr(&self) -> Option<SocketAddr> {
        self.said_addr("serving /metrics, /healthz and /readyz")
    }

    fn exited(&mut self) -> bool {
        self.exit_status().is_some()
    }

    fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().unwrap()
    }
}

/// A replica that exited on its own, and why.
#[derive(Debug)]
struct Exit {
    replica: String,
    reason: ExitReason,
}

#[derive(Debug, PartialEq)]
enum ExitReason {
    /// It could not renew its Lease (the apiserver restarting, or a pause): it stops acting
    /// and exits, by design.
    LeaseLost,
    /// Anything else (a panic, a startup failure): the exit status and the last error line.
    Other(String),
}

/// Why a replica exited, from its exit status and its log.
fn exit_reason(status: std::process::ExitStatus, log: &str) -> ExitReason {
    let last_error = log.lines().rev().find(|line| line.starts_with("error: "));
    match last_error {
        Some(line) if line.contains("lost the leader lease") => ExitReason::LeaseLost,
        Some(line) => ExitReason::Other(format!("{status}: {line}")),
        None => {
            let panic = log.lines().find(|line| line.contains("panicked at"));
            ExitReason::Other(format!("{status}: {}", panic.unwrap_or("no error line")))
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `aigw emulator` as a process, and the calls the suite makes to its control endpoints.
struct Emulator {
    _process: Process,
    url: String,
    http: reqwest::Client,
}

impl Emulator {
    async fn start(dir: &Path) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_aigw"));
        command
            .arg("emulator")
            .args(["--listen", "127.0.0.1:0", "--token", TOKEN])
            .env("AIGW_LOG_FORMAT", "json")
            .env("RUST_LOG", "warn,aigw::cli::emulator=info");
        let process = Process::spawn("emulator", &mut command, dir);
        let addr = wait_until(Duration::from_secs(30), || async {
            process.said_addr("emulator listening")
        })
        .await
        .expect("the emulator did not say where it listens within 30 s");
        let emulator = Self {
            _process: process,
            url: format!("http://{addr}"),
            http: http(),
        };
        wait_until(Duration::from_secs(30), || async {
            emulator.get("/_emulator/faults").await.ok().map(|_| ())
        })
        .await
        .expect("the emulator did not answer within 30 s");
        emulator
    }

    async fn get(&self, path: &str) -> reqwest::Result<Value> {
        let response = self.http.get(format!("{}{path}", self.url)).send().await?;
        response.error_for_status()?.json().await
    }

    async fn faults(&self, faults: &str) {
        let response = self
            .http
            .put(format!("{}/_emulator/faults", self.url))
            .header("content-type", "application/json")
            .body(faults.to_string())
            .send()
            .await
            .unwrap();
        assert!(response.status().is_success(), "faults {faults} refused");
    }

    async fn state(&self) -> Value {
        self.get("/_emulator/state").await.unwrap()
    }

    /// The HTTP status of the gateway's check of API key `id` presented as `key`.
    async fn key_handshake(&self, id: &str, key: &str) -> u16 {
        let credential = json!({ "key": key });
        support::gateway_handshake(&self.http, &self.url, ("api-keys", id), credential).await
    }

    /// The HTTP status of the gateway handshake with `client_auth`.
    async fn handshake(&self, id: &str, client_auth: &str) -> u16 {
        let credential = json!({ "client_auth": client_auth });
        support::gateway_handshake(&self.http, &self.url, ("deployments", id), credential).await
    }
}

/// The two (or, briefly, more) operator replicas; each victim is replaced by a fresh one. In
/// the sharded mode, N (or, while one is added, N + 1) replicas with `--shards`.
struct Replicas {
    live: Vec<Process>,
    started: usize,
    /// The replicas that exited on their own, with why ([`exit_reason`]).
    exits: Vec<Exit>,
    dir: PathBuf,
    /// Where the Leases are (the test's namespace).
    namespace: String,
    /// The namespaces the replicas watch.
    watched: Vec<String>,
    /// 0: leader election; N: `--shards`.
    shards: usize,
    /// How many replicas [`Replicas::keep_up`] keeps running.
    wanted: usize,
    /// The Leases' namespace as the admin sees it (the sharded mode reads the published views).
    leases: Api<Lease>,
    management_url: String,
    token_file: PathBuf,
    /// Impersonates the chart's ServiceAccount: the replicas run under the chart's RBAC.
    kubeconfig: PathBuf,
}

impl Replicas {
    fn new(
        dir: &Path,
        spread: &Spread,
        shards: usize,
        management_url: &str,
        kubeconfig: PathBuf,
    ) -> Self {
        let token_file = dir.join("token");
        std::fs::write(&token_file, TOKEN).unwrap();
        Self {
            live: Vec::new(),
            started: 0,
            exits: Vec::new(),
            dir: dir.to_path_buf(),
            namespace: spread.namespaces[0].clone(),
            watched: spread.namespaces.clone(),
            shards,
            wanted: if shards > 0 { shards } else { 2 },
            leases: Api::namespaced(spread.client.clone(), &spread.namespaces[0]),
            management_url: management_url.to_string(),
            token_file,
            kubeconfig,
        }
    }

    fn start_one(&mut self) {
        self.started += 1;
        let name = format!("aigw-chaos-{:02}", self.started);
        let mut command = Command::new(env!("CARGO_BIN_EXE_aigw"));
        command
            .arg("operator")
            .args(["--management-url", &self.management_url])
            .arg("--token-file")
            .arg(&self.token_file)
            .args(self.watched.iter().flat_map(|n| ["--namespace", n]))
            .args([
                "--cluster-selector",
                &format!("aigw-test/env={}", self.namespace),
            ])
            .args(["--leader-election-namespace", &self.namespace])
            .args(["--metrics-addr", "127.0.0.1:0"])
            .args(["--drift-interval", "10s", "--concurrency", "8"])
            // The suite changes triggers every few seconds: no spacing between rotations.
            .args(["--rotation-spacing", "0s"])
            .args(["--api-qps", "100"])
            .args(
                LEASE
                    .iter()
                    .chain(&CALL_WINDOWS)
                    .flat_map(|(f, v)| [*f, *v]),
            )
            .args(if self.shards > 0 {
                &["--shards=true"][..]
            } else {
                &[]
            })
            .env("KUBECONFIG", &self.kubeconfig)
            .env("POD_NAME", &name)
            .env("AIGW_LOG_FORMAT", "json")
            .env("RUST_LOG", "info")
            .env_remove("AIGW_LEADER_ELECT")
            .env_remove("POD_NAMESPACE");
        let process = Process::spawn(&name, &mut command, &self.dir);
        self.live.push(process);
    }

    /// Replaces replicas that exited on their own (a leader that cannot renew its lease while
    /// the apiserver is down exits non-zero by design) so that two (sharded: as many as
    /// wanted) are always running.
    fn keep_up(&mut self) {
        let mut kept = Vec::new();
        for mut process in std::mem::take(&mut self.live) {
            if let Some(status) = process.exit_status() {
                let log = std::fs::read_to_string(self.dir.join(format!("{}.log", process.name)));
                self.exits.push(Exit {
                    replica: process.name.clone(),
                    reason: exit_reason(status, &log.unwrap_or_default()),
                });
            } else {
                kept.push(process);
            }
        }
        self.live = kept;
        while self.live.len() < self.wanted {
            self.start_one();
        }
    }

    /// `/readyz` of every live replica: `(HTTP status, role)`, `None` while it does not answer.
    async fn roles(&self) -> Vec<Option<(u16, String)>> {
        let client = http();
        let mut roles = Vec::new();
        for process in &self.live {
            roles.push(match process.probes_addr() {
                Some(addr) => readyz(&client, addr).await,
                None => None,
            });
        }
        roles
    }

    /// Waits for the steady state of the mode: one leader and ready standbys, or every replica
    /// a ready shard that has published the live replicas as its view.
    async fn steady(&mut self) {
        match self.shards {
            0 => {
                self.sole_leader().await;
            }
            _ => {
                self.settled().await;
            }
        }
    }

    /// Waits until one live replica leads and every other one is a ready standby; returns the
    /// leader's index in `live`.
    async fn sole_leader(&mut self) -> usize {
        let deadline = Instant::now() + TAKEOVER_TIMEOUT;
        loop {
            self.keep_up();
            let roles = self.roles().await;
            let ready: Vec<Option<&str>> = roles
                .iter()
                .map(|r| {
                    r.as_ref()
                        .filter(|(s, _)| *s == 200)
                        .map(|(_, r)| r.as_str())
                })
                .collect();
            let leaders: Vec<usize> = (0..ready.len())
                .filter(|&i| ready[i] == Some("leader"))
                .collect();
            let standbys = ready.iter().filter(|r| **r == Some("standby")).count();
            if leaders.len() == 1 && standbys == ready.len() - 1 {
                return leaders[0];
            }
            assert!(
                Instant::now() < deadline,
                "no single ready leader within {TAKEOVER_TIMEOUT:?}: {roles:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Freezes the replica at `index` (SIGSTOP) for longer than its lease, so that another
    /// takes over, then resumes it (SIGCONT): it must send none of the writes it had queued,
    /// and it exits once it sees the lease gone (that exit is planned). Returns the pause.
    async fn pause_past_the_lease(&mut self, index: usize) -> (Timestamp, Timestamp) {
        let pid = self.live[index].child.id().to_string();
        let name = self.live[index].name.clone();
        let signal = |s: &str| {
            let status = Command::new("kill").args([s, &pid]).status().unwrap();
            assert!(status.success(), "kill {s} {name} failed");
        };
        let stopped = Timestamp::now();
        signal("-STOP");
        tokio::time::sleep(PAUSE).await;
        signal("-CONT");
        let resumed = Timestamp::now();
        let mut paused = self.live.remove(index);
        let deadline = Instant::now() + TAKEOVER_TIMEOUT;
        while !paused.exited() {
            assert!(
                Instant::now() < deadline,
                "{name} kept running after losing its lease while paused"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.keep_up();
        (stopped, resumed)
    }

    /// SIGKILLs the replica at `index`, starts its replacement, and returns how long it took
    /// until a live replica reported itself the leader.
    async fn kill_and_time_takeover(&mut self, index: usize) -> Duration {
        let mut victim = self.live.remove(index);
        let killed_at = Instant::now();
        victim.child.kill().unwrap();
        victim.child.wait().unwrap();
        self.start_one();
        loop {
            let roles = self.roles().await;
            if roles.iter().flatten().any(|(_, role)| role == "leader") {
                return killed_at.elapsed();
            }
            assert!(
                killed_at.elapsed() < TAKEOVER_TIMEOUT,
                "no replica took over within {TAKEOVER_TIMEOUT:?} after SIGKILL of {}",
                victim.name
            );
            self.keep_up();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

async fn readyz(client: &reqwest::Client, metrics: SocketAddr) -> Option<(u16, String)> {
    let response = client
        .get(format!("http://{metrics}/readyz"))
        .send()
        .await
        .ok()?;
    let status = response.status().as_u16();
    let body: Value = response.json().await.ok()?;
    Some((status, body["role"].as_str()?.to_string()))
}

/// Rotation windows per Deployment: opened when the suite creates it or changes its trigger,
/// closed once the status shows that trigger observed and the object Ready.
#[derive(Default)]
struct Windows {
    open: HashMap<String, (Timestamp, String)>,
    closed: HashMap<String, Vec<(Timestamp, Timestamp)>>,
    trigger_changes: HashMap<String, u32>,
}

impl Windows {
    /// Opens `name`'s window, now, for its change to `trigger`.
    fn open_now(&mut self, name: String, trigger: &str) {
        self.open
            .insert(name, (Timestamp::now(), trigger.to_string()));
    }

    fn is_open(&self, name: &str) -> bool {
        self.open.contains_key(name)
    }

    fn close_settled<K: Rotating>(&mut self, objects: &[K]) {
        let now = Timestamp::now();
        for object in objects {
            let name = object.name_any();
            let Some((_, expected)) = self.open.get(&name) else {
                continue;
            };
            if settled_on(object, expected) {
                let (start, _) = self.open.remove(&name).unwrap();
                self.closed.entry(name).or_default().push((start, now));
            }
        }
    }

    /// Incidents `(start, end)` that overlap one of `name`'s windows.
    fn incidents_inside(&self, name: &str, incidents: &[(Timestamp, Timestamp)]) -> u32 {
        let windows = self.closed.get(name).map_or(&[][..], Vec::as_slice);
        let inside = incidents
            .iter()
            .filter(|(a, b)| windows.iter().any(|(s, e)| a <= e && b >= s))
            .count();
        u32::try_from(inside).unwrap()
    }
}

/// A kind whose values aigw rotates into a Secret: Deployment credentials and API keys.
trait Rotating:
    Conditions
    + Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
    + Clone
    + serde::de::DeserializeOwned
    + serde::Serialize
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
    const KIND: &'static str;
    fn trigger(&self) -> Option<String>;
    fn rotation_status(&self) -> Option<&aigw::resources::rotation::RotationStatus>;
    fn remote_id(&self) -> Option<&str>;
}

impl Rotating for Deployment {
    const KIND: &'static str = "Deployment";
    fn trigger(&self) -> Option<String> {
        self.spec.rotation.as_ref()?.trigger.clone()
    }
    fn rotation_status(&self) -> Option<&aigw::resources::rotation::RotationStatus> {
        self.status.as_ref().map(|s| &s.rotation)
    }
    fn remote_id(&self) -> Option<&str> {
        self.status.as_ref()?.id.as_deref()
    }
}

impl Rotating for ApiKey {
    const KIND: &'static str = "ApiKey";
    fn trigger(&self) -> Option<String> {
        self.spec.rotation.as_ref()?.schedule.trigger.clone()
    }
    fn rotation_status(&self) -> Option<&aigw::resources::rotation::RotationStatus> {
        self.status.as_ref().map(|s| &s.rotation)
    }
    fn remote_id(&self) -> Option<&str> {
        self.status.as_ref()?.id.as_deref()
    }
}

/// Ready, on `trigger`, with that trigger observed and a remote object recorded.
fn settled_on<K: Rotating>(object: &K, trigger: &str) -> bool {
    object.ready()
        && object.trigger().as_deref() == Some(trigger)
        && object
            .rotation_status()
            .and_then(|s| s.observed_rotation_trigger.as_deref())
            == Some(trigger)
        && object.remote_id().is_some()
}

fn settled<K: Rotating>(object: &K) -> bool {
    object.trigger().is_some_and(|t| settled_on(object, &t))
}

/// Closes windows every 500 ms until the returned handle is aborted.
fn watch_windows(spread: &Spread, windows: Arc<Mutex<Windows>>) -> tokio::task::JoinHandle<()> {
    let spread = spread.clone();
    tokio::spawn(async move {
        loop {
            if let Ok(list) = spread.list::<Deployment>().await {
                windows.lock().unwrap().close_settled(&list);
            }
            if let Ok(list) = spread.list::<ApiKey>().await {
                windows.lock().unwrap().close_settled(&list);
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
}

async fn create_all(spread: &Spread, scale: &Scale, windows: &Mutex<Windows>) {
    let mut creates = Vec::new();
    for i in 0..scale.configs {
        let name = format!("c-{i:03}");
        let config: Config = object("Config", &name, routing(&name));
        creates.push(spread.create(i, config));
    }
    for i in 0..scale.policies {
        let name = format!("p-{i:02}");
        let policy: RateLimitsPolicy = object("RateLimitsPolicy", &name, limits(&name));
        creates.push(spread.create(i, policy));
    }
    for i in 0..scale.deployments {
        let name = format!("d-{i:02}");
        let mut spec = gateway(&name, &format!("{name}-credentials"));
        spec["rotation"] = json!({"trigger": "t0"});
        let deployment: Deployment = object("Deployment", &name, spec);
        windows.lock().unwrap().open_now(name, "t0");
        creates.push(spread.create(i, deployment));
    }
    for i in 0..scale.api_keys {
        let name = format!("k-{i:02}");
        let spec = json!({"name": name, "kind": "service", "scopes": ["completions.write"],
            "secretRef": {"name": format!("{name}-key")}, "rotation": {"trigger": "t0"}});
        let key: ApiKey = object("ApiKey", &name, spec);
        windows.lock().unwrap().open_now(name, "t0");
        creates.push(spread.create(i, key));
    }
    let results: Vec<_> = futures::stream::iter(creates)
        .buffer_unordered(16)
        .collect()
        .await;
    for result in results {
        result.expect("failed to create a resource");
    }
}

/// A round's trigger changes, between random pauses; how many were made.
async fn change_triggers_between_pauses(
    spread: &Spread,
    windows: &Mutex<Windows>,
    step: usize,
) -> usize {
    tokio::time::sleep(random_pause(0.5, 4.0)).await;
    let changed = change_triggers(spread, windows, step).await;
    tokio::time::sleep(random_pause(0.0, 3.0)).await;
    changed
}

/// Changes the trigger of about half of the Deployments and ApiKeys whose last change has
/// settled.
async fn change_triggers(spread: &Spread, windows: &Mutex<Windows>, step: usize) -> usize {
    change_triggers_of::<Deployment>(spread, windows, step).await
        + change_triggers_of::<ApiKey>(spread, windows, step).await
}

async fn change_triggers_of<K: Rotating>(
    spread: &Spread,
    windows: &Mutex<Windows>,
    step: usize,
) -> usize {
    let list = spread.list::<K>().await.unwrap();
    let mut changed = 0;
    for object in list {
        let name = object.name_any();
        let api = spread.api::<K>(&object.namespace().unwrap_or_default());
        if windows.lock().unwrap().is_open(&name) || rand::rng().random_bool(0.5) {
            continue;
        }
        let trigger = format!("t{}", step + 1);
        windows.lock().unwrap().open_now(name.clone(), &trigger);
        let patch = json!({"spec": {"rotation": {"trigger": trigger}}});
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                *windows
                    .lock()
                    .unwrap()
                    .trigger_changes
                    .entry(name)
                    .or_default() += 1;
                changed += 1;
            }
            Err(e) => {
                eprintln!("trigger change of {name} failed: {e}");
                windows.lock().unwrap().open.remove(&name);
            }
        }
    }
    changed
}

/// SIGKILLs the local kube-apiserver (and its embedded etcd) and starts it again on the same
/// state with `hack/cluster-up.sh`; returns the outage.
fn restart_apiserver() -> (Timestamp, Timestamp) {
    let root = repo_root();
    let pid = std::fs::read_to_string(root.join(".aigw-dev/controlplane.pid"))
        .expect("no .aigw-dev/controlplane.pid")
        .trim()
        .to_string();
    let down = Timestamp::now();
    let killed = Command::new("kill").args(["-KILL", &pid]).status().unwrap();
    assert!(killed.success(), "kill -KILL {pid} failed");
    while Path::new(&format!("/proc/{pid}")).exists() {
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = Command::new("bash")
        .arg(root.join("hack/cluster-up.sh"))
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "hack/cluster-up.sh failed after the restart:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (down, Timestamp::now())
}

/// What the kill loop saw.
#[derive(Default)]
struct Chaos {
    takeovers: Vec<f64>,
    incidents: Vec<(Timestamp, Timestamp)>,
    apiserver_restarts: u32,
    /// When the apiserver was down: from its kill until it answered again.
    outages: Vec<(Timestamp, Timestamp)>,
    pauses: u32,
    deleted_during_create: usize,
    /// Sharded mode: replicas added and removed (SIGTERM) mid-run.
    added: u32,
    removed: u32,
    /// Sharded mode: paused replicas still running after their pause (they must exit).
    kept_running: Vec<String>,
    /// Sharded mode: removed replicas that did not exit 0 after SIGTERM.
    unclean_removals: Vec<String>,
}

impl Chaos {
    /// Records the kill that ended round `step` (of `kills`).
    fn killed(&mut self, kill: Kill, step: usize, kills: usize) {
        self.incidents.push((kill.at, kill.at));
        self.takeovers.push(kill.took.as_secs_f64());
        eprintln!(
            "chaos: kill {}/{kills}: {} trigger changes before it, {} {:.1} s",
            step + 1,
            kill.changed,
            kill.settled,
            kill.took.as_secs_f64()
        );
    }

    /// Records a pause (SIGSTOP) of a replica, from its start to its end.
    fn paused(&mut self, pause: (Timestamp, Timestamp)) {
        self.incidents.push(pause);
        self.pauses += 1;
    }

    /// The disruptions of both modes at the same rounds: Configs deleted while their creates
    /// run (two thirds in) and an apiserver restart (halfway).
    async fn disrupt_at(&mut self, round: &Round<'_>) {
        let (kills, step) = (round.scale.kills, round.step);
        if step == kills * 2 / 3 {
            self.deleted_during_create += delete_during_creates(round.spread, step, 10).await;
        }
        if step == kills / 2 {
            self.restart_apiserver();
        }
    }

    /// Restarts the kube-apiserver: an outage and an incident.
    fn restart_apiserver(&mut self) {
        let outage = restart_apiserver();
        self.incidents.push(outage);
        self.outages.push(outage);
        self.apiserver_restarts += 1;
        eprintln!(
            "chaos: apiserver restarted, down {:.1} s",
            outage.1.duration_since(outage.0).as_secs_f64()
        );
    }
}

/// Creates `n` Configs and deletes them about a second later, while their creates are in
/// flight (and faulty): each must go, leaving no remote config behind.
async fn delete_during_creates(spread: &Spread, step: usize, n: usize) -> usize {
    let names: Vec<String> = (0..n).map(|i| format!("x-{step:02}-{i:02}")).collect();
    for (i, name) in names.iter().enumerate() {
        let config: Config = object("Config", name, routing(name));
        let api = spread.api::<Config>(spread.home(i));
        api.create(&PostParams::default(), &config).await.unwrap();
    }
    tokio::time::sleep(random_pause(0.5, 1.5)).await;
    for (i, name) in names.iter().enumerate() {
        let api = spread.api::<Config>(spread.home(i));
        api.delete(name, &DeleteParams::default()).await.unwrap();
    }
    n
}

/// One round of chaos, as a mode's round function gets it.
struct Round<'a> {
    spread: &'a Spread,
    scale: &'a Scale,
    windows: &'a Mutex<Windows>,
    step: usize,
}

impl Round<'_> {
    /// [`change_triggers_between_pauses`] in this round: how many triggers changed.
    async fn change_triggers(&self) -> usize {
        change_triggers_between_pauses(self.spread, self.windows, self.step).await
    }
}

/// The kill that ends a round: when, after how many trigger changes, and how long until the
/// objects were served again (`settled` says how that was told).
struct Kill {
    at: Timestamp,
    changed: usize,
    took: Duration,
    settled: &'static str,
}

/// The rounds, [`Scale::kills`] of them, each in the mode's way (leader election, or
/// [`shards::round`]) and each ending with a kill.
async fn run_chaos(
    spread: &Spread,
    scale: &Scale,
    replicas: &mut Replicas,
    windows: &Mutex<Windows>,
) -> Chaos {
    let mut chaos = Chaos::default();
    for step in 0..scale.kills {
        let round = Round {
            spread,
            scale,
            windows,
            step,
        };
        let kill = match scale.shards {
            0 => leader_round(round, &mut chaos, replicas).await,
            _ => shards::round(round, &mut chaos, replicas).await,
        };
        chaos.killed(kill, step, scale.kills);
    }
    chaos
}

/// A round of the leader-election mode: the leader paused past its lease once, and killed.
async fn leader_round(round: Round<'_>, chaos: &mut Chaos, replicas: &mut Replicas) -> Kill {
    let mut leader = replicas.sole_leader().await;
    let changed = round.change_triggers().await;
    if round.step == (round.scale.kills / 3).max(1) {
        chaos.paused(replicas.pause_past_the_lease(leader).await);
        eprintln!("chaos: leader paused (SIGSTOP) for {PAUSE:?}, resumed and exited");
        leader = replicas.sole_leader().await;
    }
    chaos.disrupt_at(&round).await;
    let alive = replicas
        .live
        .get_mut(leader)
        .is_some_and(|process| !process.exited());
    let leader = match alive {
        true => leader,
        false => replicas.sole_leader().await,
    };
    let at = Timestamp::now();
    let took = replicas.kill_and_time_takeover(leader).await;
    Kill {
        at,
        changed,
        took,
        settled: "takeover",
    }
}

fn random_pause(min_s: f64, max_s: f64) -> Duration {
    Duration::from_secs_f64(rand::rng().random_range(min_s..max_s))
}

/// The names of the objects of kind `K` that are not Ready (or whose check fails).
async fn not_ready<K>(spread: &Spread, done: impl Fn(&K) -> bool) -> Vec<String>
where
    K: support::NamespacedKind,
{
    match spread.list::<K>().await {
        Ok(list) => list
            .iter()
            .filter(|o| !done(o))
            .map(ResourceExt::name_any)
            .collect(),
        Err(e) => vec![format!("<list failed: {e}>")],
    }
}

async fn pending(spread: &Spread) -> Vec<String> {
    let mut pending = not_ready::<Config>(spread, Conditions::ready).await;
    pending.extend(not_ready::<RateLimitsPolicy>(spread, Conditions::ready).await);
    pending.extend(not_ready::<Deployment>(spread, settled).await);
    pending.extend(not_ready::<ApiKey>(spread, settled).await);
    pending
}

async fn wait_all_ready(spread: &Spread) {
    let settled = wait_until(SETTLE_TIMEOUT, || async {
        pending(spread).await.is_empty().then_some(())
    })
    .await;
    if settled.is_none() {
        let left = pending(spread).await;
        let mut dump = String::new();
        for name in left.iter().take(5) {
            let yaml = match name.chars().next() {
                Some('c') => serde_yaml::to_string(&spread.find::<Config>(name).await),
                Some('p') => serde_yaml::to_string(&spread.find::<RateLimitsPolicy>(name).await),
                Some('k') => serde_yaml::to_string(&spread.find::<ApiKey>(name).await),
                _ => serde_yaml::to_string(&spread.find::<Deployment>(name).await),
            };
            dump.push_str(&yaml.unwrap_or_default());
        }
        panic!(
            "{} resources not Ready within {SETTLE_TIMEOUT:?} after the faults stopped: {left:?}\n{dump}",
            left.len()
        );
    }
}

/// Duplicates: remote objects beyond one per resource (or with no resource), and resources
/// whose remote object is missing or is not the one their status names.
#[derive(Debug, Default)]
struct Duplicates {
    extra: usize,
    missing: Vec<String>,
}

fn count_by<'a>(
    rows: impl Iterator<Item = &'a Value>,
    key: impl Fn(&Value) -> Option<String>,
) -> BTreeMap<String, Vec<String>> {
    let mut by: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for row in rows {
        let k = key(row).unwrap_or_default();
        by.entry(k)
            .or_default()
            .push(row["id"].as_str().unwrap_or_default().to_string());
    }
    by
}

/// Compares `(resource key, status id)` pairs with the remote objects grouped by that key.
fn tally(
    dup: &mut Duplicates,
    kind: &str,
    resources: &[(String, Option<String>)],
    mut remote: BTreeMap<String, Vec<String>>,
) {
    for (key, id) in resources {
        let ids = remote.remove(key).unwrap_or_default();
        dup.extra += ids.len().saturating_sub(1);
        if ids.len() != 1 || id.as_ref() != ids.first() {
            dup.missing
                .push(format!("{kind} {key}: status id {id:?}, remote {ids:?}"));
        }
    }
    for (key, ids) in remote {
        dup.extra += ids.len();
        dup.missing
            .push(format!("{kind} {key}: remote {ids:?} without a resource"));
    }
}

async fn check_duplicates(spread: &Spread, state: &Value) -> Duplicates {
    let mut dup = Duplicates::default();
    let configs = spread.list::<Config>().await.unwrap();
    let resources: Vec<_> = configs
        .iter()
        .map(|c| {
            (
                c.spec.name.clone(),
                c.status.as_ref().and_then(|s| s.id.clone()),
            )
        })
        .collect();
    let remote = count_by(rows(state, "configs"), |r| {
        r["name"].as_str().map(str::to_string)
    });
    tally(&mut dup, "Config", &resources, remote);

    let policies = spread.list::<RateLimitsPolicy>().await.unwrap();
    let resources: Vec<_> = policies
        .iter()
        .map(|p| (p.name_any(), p.status.as_ref().and_then(|s| s.id.clone())))
        .collect();
    let active = rows(state, "rate_limits").filter(|r| r["status"] == "active");
    let remote = count_by(active, |r| r["name"].as_str().map(str::to_string));
    tally(&mut dup, "RateLimitsPolicy", &resources, remote);

    let deployments = spread.list::<Deployment>().await.unwrap();
    let resources: Vec<_> = deployments
        .iter()
        .map(|d| {
            (
                d.uid().unwrap_or_default(),
                d.status.as_ref().and_then(|s| s.id.clone()),
            )
        })
        .collect();
    let remote = count_by(rows(state, "deployments"), |r| {
        r["tags"]["aigw.io/uid"].as_str().map(str::to_string)
    });
    tally(&mut dup, "Deployment", &resources, remote);

    let keys = spread.list::<ApiKey>().await.unwrap();
    let resources: Vec<_> = keys
        .iter()
        .map(|k| (k.spec.name.clone(), k.remote_id().map(str::to_string)))
        .collect();
    let remote = count_by(rows(state, "api_keys"), |r| {
        r["name"].as_str().map(str::to_string)
    });
    tally(&mut dup, "ApiKey", &resources, remote);
    dup
}

fn rows<'a>(state: &'a Value, collection: &str) -> impl Iterator<Item = &'a Value> {
    state[collection].as_array().into_iter().flatten()
}

/// Deployments whose Secret's `client_auth` the gateway handshake refuses (or that has none).
async fn dead_credentials(spread: &Spread, emulator: &Emulator) -> Vec<String> {
    let mut dead = Vec::new();
    for deployment in spread.list::<Deployment>().await.unwrap() {
        let name = deployment.name_any();
        let secrets = spread.api::<Secret>(&deployment.namespace().unwrap_or_default());
        let id = deployment
            .status
            .as_ref()
            .and_then(|s| s.id.clone())
            .unwrap_or_default();
        let secret = secrets
            .get_opt(&format!("{name}-credentials"))
            .await
            .unwrap();
        let client_auth = secret
            .and_then(|s| s.data?.get("client_auth").cloned())
            .map(|b| String::from_utf8_lossy(&b.0).into_owned());
        let status = match client_auth {
            Some(value) => emulator.handshake(&id, &value).await,
            None => 0,
        };
        if status != 200 {
            dead.push(format!("{name}: handshake {status}"));
        }
    }
    dead
}

/// ApiKeys whose Secret does not hold the key's current value: the gateway refuses it, or it
/// is a previous value that stops working when its transition ends.
async fn dead_keys(spread: &Spread, emulator: &Emulator, state: &Value) -> Vec<String> {
    let mut dead = Vec::new();
    for key in spread.list::<ApiKey>().await.unwrap() {
        let name = key.name_any();
        let secrets = spread.api::<Secret>(&key.namespace().unwrap_or_default());
        let id = key.remote_id().unwrap_or_default().to_string();
        let held = secrets
            .get_opt(&key.spec.secret_ref.name)
            .await
            .unwrap()
            .and_then(|s| s.data?.get("api_key").cloned())
            .map(|b| String::from_utf8_lossy(&b.0).into_owned());
        let current = rows(state, "api_keys")
            .find(|r| r["id"] == id.as_str())
            .and_then(|r| r["key"].as_str());
        let status = match &held {
            Some(value) => emulator.key_handshake(&id, value).await,
            None => 0,
        };
        if status != 200 || held.as_deref() != current {
            let current = held.as_deref() == current;
            dead.push(format!(
                "{name}: handshake {status}, current value: {current}"
            ));
        }
    }
    dead
}

/// Per rotating object: `(name, trigger changes, rotations, incidents inside its windows)`.
async fn rotations(
    spread: &Spread,
    state: &Value,
    windows: &Windows,
    incidents: &[(Timestamp, Timestamp)],
) -> Vec<(String, u32, u32, u32)> {
    let deployments = spread.list::<Deployment>().await.unwrap();
    let mut result = rotations_of(windows, incidents, deployments, |d| {
        let uid = d.uid().unwrap_or_default();
        rows(state, "deployments")
            .filter(|r| r["tags"]["aigw.io/uid"] == uid.as_str())
            .filter_map(|r| r["rotations"].as_u64())
            .sum()
    });
    let keys = spread.list::<ApiKey>().await.unwrap();
    // A key whose rotated value was lost is replaced, not rotated again: the replacement gives
    // the Secret the value that rotation was for (`status.replacements`), and the replaced
    // key's rotations count with the current key's.
    result.extend(rotations_of(windows, incidents, keys, |k| {
        let id = k.remote_id().unwrap_or_default();
        let replaced = rows(state, "deleted_api_keys").filter(|r| r["name"] == k.spec.name);
        let rotations: u64 = rows(state, "api_keys")
            .filter(|r| r["id"] == id)
            .chain(replaced)
            .filter_map(|r| r["rotations"].as_u64())
            .sum();
        let replacements = k.status.as_ref().map_or(0, |s| u64::from(s.replacements));
        rotations + replacements
    }));
    result
}

fn rotations_of<K: Rotating>(
    windows: &Windows,
    incidents: &[(Timestamp, Timestamp)],
    objects: Vec<K>,
    counted: impl Fn(&K) -> u64,
) -> Vec<(String, u32, u32, u32)> {
    let mut result = Vec::new();
    for object in objects {
        let name = object.name_any();
        let counted = counted(&object);
        let changes = windows.trigger_changes.get(&name).copied().unwrap_or(0);
        let namespace = object.namespace().unwrap_or_default();
        let own = failed_reconciles(K::KIND, &namespace, &name, &run_dir());
        let mut all = incidents.to_vec();
        all.extend(own);
        let inside = windows.incidents_inside(&name, &all);
        result.push((name, changes, u32::try_from(counted).unwrap(), inside));
    }
    result
}

/// `(name, trigger changes, rotations, incidents inside its windows)` per Deployment, summed up.
struct RotationTally {
    changes: u32,
    rotated: u32,
    extra: u32,
    allowed: u32,
    /// Fewer rotations than trigger changes: a trigger change was lost.
    missed: Vec<(String, u32, u32, u32)>,
    /// More extra rotations than incidents in the Deployment's windows.
    unexplained: Vec<(String, u32, u32, u32)>,
}

impl RotationTally {
    fn new(per_deployment: Vec<(String, u32, u32, u32)>) -> Self {
        for (name, changes, rotated, incidents) in &per_deployment {
            eprintln!(
                "chaos: {name}: {changes} trigger changes, {rotated} rotations, {incidents} incidents in its windows"
            );
        }
        Self {
            changes: per_deployment.iter().map(|d| d.1).sum(),
            rotated: per_deployment.iter().map(|d| d.2).sum(),
            extra: per_deployment.iter().map(|d| d.2.saturating_sub(d.1)).sum(),
            allowed: per_deployment.iter().map(|d| d.3).sum(),
            missed: per_deployment
                .iter()
                .filter(|d| d.2 < d.1)
                .cloned()
                .collect(),
            unexplained: per_deployment
                .iter()
                .filter(|d| d.2 > d.1 + d.3)
                .cloned()
                .collect(),
        }
    }
}

/// Where the run keeps its logs (kept after the run for reading).
fn run_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("chaos")
}

/// `reconcile failed` lines every operator logged (JSON) for the `kind` object `ns/name`.
fn failed_reconciles(
    kind: &str,
    namespace: &str,
    name: &str,
    dir: &Path,
) -> Vec<(Timestamp, Timestamp)> {
    let object = format!("{kind}/{namespace}/{name}");
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let is_operator = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("aigw-chaos-"));
        if !is_operator {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for line in text.lines() {
            let Ok(entry) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            let fields = &entry["fields"];
            let at = entry["timestamp"].as_str().and_then(|t| t.parse().ok());
            if fields["message"] == "reconcile failed"
                && fields["object"] == object.as_str()
                && let Some(at) = at
            {
                found.push((at, at));
            }
        }
    }
    found
}

/// How long a restarted apiserver may refuse what RBAC grants: it answers before its RBAC
/// informers have synced (seen: 403s for 1 s after a restart, real kube-apiserver behaviour).
const RBAC_SYNC: Duration = Duration::from_secs(15);

/// Log lines of every operator in which the apiserver refused it something (a verb the chart's
/// RBAC lacks), except during an apiserver outage and the [`RBAC_SYNC`] after it.
fn refusals(dir: &Path, outages: &[(Timestamp, Timestamp)]) -> Vec<String> {
    let restarting = |line: &str| {
        let at: Option<Timestamp> = serde_json::from_str::<Value>(line)
            .ok()
            .and_then(|entry| entry["timestamp"].as_str()?.parse().ok());
        at.is_some_and(|at| {
            outages
                .iter()
                .any(|(down, up)| at >= *down && at <= *up + RBAC_SYNC)
        })
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with("aigw-chaos-"))
        })
        .flat_map(|e| {
            std::fs::read_to_string(e.path())
                .unwrap_or_default()
                .lines()
                .filter(|l| l.contains("is forbidden: User") && !restarting(l))
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Deletes every aigw object in the namespaces and waits until their finalizers have run.
async fn delete_everything(spread: &Spread) -> Vec<String> {
    spread.delete_all::<Config>().await;
    spread.delete_all::<RateLimitsPolicy>().await;
    spread.delete_all::<Deployment>().await;
    spread.delete_all::<ApiKey>().await;
    let remaining = || async {
        let mut left = not_ready::<Config>(spread, |_| false).await;
        left.extend(not_ready::<RateLimitsPolicy>(spread, |_| false).await);
        left.extend(not_ready::<Deployment>(spread, |_| false).await);
        left.extend(not_ready::<ApiKey>(spread, |_| false).await);
        left
    };
    let gone = wait_until(SETTLE_TIMEOUT, || async {
        remaining().await.is_empty().then_some(())
    })
    .await;
    match gone {
        Some(()) => Vec::new(),
        None => remaining().await,
    }
}

/// Remote objects a deletion should have removed (or archived) but did not.
fn lost_deletes(state: &Value, deployment_uids: &[String]) -> Vec<String> {
    let mut lost: Vec<String> = rows(state, "configs")
        .map(|r| format!("config {}", r["name"]))
        .collect();
    lost.extend(
        rows(state, "rate_limits")
            .filter(|r| r["status"] != "archived")
            .map(|r| format!("rate limit {}", r["name"])),
    );
    lost.extend(
        rows(state, "deployments")
            .filter(|r| {
                deployment_uids
                    .iter()
                    .any(|u| r["tags"]["aigw.io/uid"] == u.as_str())
            })
            .filter(|r| r["status"] != "archived")
            .map(|r| format!("deployment {} ({})", r["name"], r["status"])),
    );
    lost.extend(rows(state, "api_keys").map(|r| format!("API key {}", r["name"])));
    lost
}

#[tokio::test]
async fn exactly_once_under_kills_failover_and_faults() {
    let started = Instant::now();
    let scale = Scale::from_env();
    let dir = run_dir();
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let env = TestEnv::new("chaos").await;
    let mut more = Vec::new();
    for _ in 1..scale.shards * 2 {
        more.push(TestEnv::another("chaos").await);
    }
    let spread = Spread {
        client: env.client.clone(),
        namespaces: std::iter::once(&env)
            .chain(&more)
            .map(|e| e.namespace.clone())
            .collect(),
    };
    let emulator = Emulator::start(&dir).await;
    let kubeconfig = match scale.shards {
        0 => support::chart::operator_kubeconfig(&env.client, &env.namespace, &dir).await,
        _ => shards::chart_rbac(&spread, &dir).await,
    };
    let mut replicas = Replicas::new(&dir, &spread, scale.shards, &emulator.url, kubeconfig);
    replicas.keep_up();
    replicas.steady().await;
    emulator.faults(FAULTS).await;

    let windows = Arc::new(Mutex::new(Windows::default()));
    create_all(&spread, &scale, &windows).await;
    let watcher = watch_windows(&spread, windows.clone());
    let chaos = run_chaos(&spread, &scale, &mut replicas, &windows).await;

    emulator.faults("{}").await;
    replicas.steady().await;
    wait_all_ready(&spread).await;
    watcher.abort();
    let deployments = spread.list::<Deployment>().await.unwrap();
    windows.lock().unwrap().close_settled(&deployments);
    let keys = spread.list::<ApiKey>().await.unwrap();
    windows.lock().unwrap().close_settled(&keys);
    let uids: Vec<String> = deployments.iter().filter_map(|d| d.uid()).collect();

    let state = emulator.state().await;
    let duplicates = check_duplicates(&spread, &state).await;
    let dead = dead_credentials(&spread, &emulator).await;
    let dead_keys = dead_keys(&spread, &emulator, &state).await;
    let windows = std::mem::take(&mut *windows.lock().unwrap());
    let open: Vec<&String> = windows.open.keys().collect();
    assert!(open.is_empty(), "rotation windows still open: {open:?}");
    let per_deployment = rotations(&spread, &state, &windows, &chaos.incidents).await;
    let rotations = RotationTally::new(per_deployment);

    emulator.faults(FAULTS).await;
    let stuck = delete_everything(&spread).await;
    emulator.faults("{}").await;
    let lost = lost_deletes(&emulator.state().await, &uids);
    let (lease_lost, unplanned): (Vec<&Exit>, Vec<&Exit>) = replicas
        .exits
        .iter()
        .partition(|exit| exit.reason == ExitReason::LeaseLost);

    let max_takeover = chaos.takeovers.iter().copied().fold(0.0, f64::max);
    let rounded: Vec<f64> = chaos
        .takeovers
        .iter()
        .map(|t| (t * 10.0).round() / 10.0)
        .collect();
    let mut summary = json!({
        "kills": chaos.takeovers.len(),
        "apiserver_restarts": chaos.apiserver_restarts,
        "deleted_during_create": chaos.deleted_during_create,
        "lease_lost_exits": lease_lost.len(),
        "unplanned_exits": unplanned.len(),
        "resources": scale.configs + scale.policies + scale.deployments + scale.api_keys,
        "api_keys": scale.api_keys,
        "duplicates": duplicates.extra,
        "dead_credentials": dead.len(),
        "dead_keys": dead_keys.len(),
        "mismatched_ids": duplicates.missing.len(),
        "trigger_changes": rotations.changes,
        "rotations": rotations.rotated,
        "extra_rotations": rotations.extra,
        "allowed_extra_rotations": rotations.allowed,
        "unexplained_rotations": rotations.unexplained.len(),
        "missed_rotations": rotations.missed.len(),
        "lost_deletes": lost.len() + stuck.len(),
        "elapsed_s": started.elapsed().as_secs(),
    });
    let figures = summary.as_object_mut().unwrap();
    let mut overlapping = Vec::new();
    if scale.shards == 0 {
        figures.insert(
            "max_takeover_s".into(),
            json!((max_takeover * 10.0).round() / 10.0),
        );
        figures.insert("takeover_s".into(), json!(rounded));
        figures.insert("leader_pauses".into(), json!(chaos.pauses));
    } else {
        figures.insert(
            "max_handover_s".into(),
            json!((max_takeover * 10.0).round() / 10.0),
        );
        figures.insert("handover_s".into(), json!(rounded));
        overlapping = shards::figures(figures, &scale, &chaos, &emulator).await;
    }
    println!("{summary}");
    std::fs::write(dir.join("summary.json"), format!("{summary}\n")).unwrap();

    assert!(
        duplicates.extra == 0 && duplicates.missing.is_empty(),
        "{duplicates:?}"
    );
    assert_empty(&dead, "dead credentials");
    assert_empty(&dead_keys, "dead API keys");
    assert_empty(
        &rotations.missed,
        "fewer rotations than trigger changes (name, changes, rotations, incidents)",
    );
    assert_empty(
        &rotations.unexplained,
        "more extra rotations than incidents in the window (name, changes, rotations, incidents)",
    );
    let within = format!("not deleted (finalizer stuck) within {SETTLE_TIMEOUT:?}");
    assert_empty(&stuck, &within);
    assert_empty(&lost, "remote objects left after deleting everything");
    let unplanned: Vec<String> = unplanned
        .iter()
        .map(|exit| format!("{}: {:?}", exit.replica, exit.reason))
        .collect();
    assert_empty(
        &unplanned,
        "replicas that exited for another reason than a lost Lease",
    );
    let refused = refusals(&dir, &chaos.outages);
    assert!(
        refused.is_empty(),
        "the chart's RBAC refused the operator: {refused:#?}"
    );
    shards::assert_held(&chaos, &overlapping);
    println!("logs: {}", dir.display());
    drop(replicas);
    for more in more {
        more.cleanup().await;
    }
    env.cleanup().await;
}

/// Asserts that nothing was `found`, naming `what` was.
fn assert_empty<T: std::fmt::Debug>(found: &[T], what: &str) {
    assert!(found.is_empty(), "{what}: {found:?}");
}
