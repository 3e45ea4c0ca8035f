//! Leader election across real `aigw operator` processes: one leads, a standby makes no
//! management-API call, and a standby takes over after the leader is SIGKILLed and after it is
//! SIGTERMed (which releases the lease). The processes run under the chart's RBAC (its
//! `watchNamespaces` form, with the Lease in the test namespace). The takeover times are
//! printed (`--nocapture`), not asserted: the only bound is the wait's timeout.

use crate::support;

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::SendJson;
use aigw::emulator::{EmulatorOptions, Running};
use aigw::resources::Config;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::PostParams;
use serde_json::{Value, json};
use support::objects::Conditions;
use support::{TestEnv, metric_sum, wait_until};

pub(super) const TOKEN: &str = "leader-test-token-5b1d";
const TAKEOVER_TIMEOUT: Duration = Duration::from_secs(60);

/// One `aigw operator` process, killed when dropped; its log is printed if the test fails.
pub(super) struct Operator {
    pub(super) name: String,
    process: support::cli::Process,
    metrics: tokio::sync::OnceCell<SocketAddr>,
}

impl Operator {
    /// `who` (this replica) made no call to the management API.
    async fn assert_no_api_call(&self, who: &str) {
        assert_eq!(
            self.api_requests().await,
            0.0,
            "{who} called the management API:\n{}",
            self.metrics().await
        );
    }

    /// Runs under the chart's RBAC, with the kubeconfig `support::chart::operator_kubeconfig`
    /// wrote into `dir`.
    fn start(name: &str, env: &TestEnv, emulator: &Running, dir: &Path) -> Self {
        let namespace = [env.namespace.as_str()];
        Self::spawn(name, &namespace, &env.namespace, emulator, dir, &[])
    }

    /// Watches `namespaces`, keeps its Lease in `lease_namespace`, with `extra` arguments.
    pub(super) fn spawn(
        name: &str,
        namespaces: &[&str],
        lease_namespace: &str,
        emulator: &Running,
        dir: &Path,
        extra: &[&str],
    ) -> Self {
        let token_file = dir.join("token");
        std::fs::write(&token_file, TOKEN).unwrap();
        let mut command = support::cli::command();
        command
            .arg("operator")
            .args(["--management-url", &emulator.management_url()])
            .arg("--token-file")
            .arg(&token_file)
            .args(namespaces.iter().flat_map(|n| ["--namespace", n]))
            .args([
                "--cluster-selector",
                &format!("aigw-test/env={lease_namespace}"),
            ])
            .args(["--metrics-addr", "127.0.0.1:0"])
            .args(["--leader-election-namespace", lease_namespace])
            .args(extra)
            .env("KUBECONFIG", dir.join("kubeconfig"))
            .env("POD_NAME", name)
            .env_remove("AIGW_LEADER_ELECT")
            .env_remove("POD_NAMESPACE");
        let log = dir.join(format!("{name}.log"));
        Self {
            name: name.to_string(),
            process: support::cli::Process::spawn(command, log),
            metrics: tokio::sync::OnceCell::new(),
        }
    }

    /// Where it serves its metrics and probes (the kernel's pick, read from its log).
    async fn addr(&self) -> SocketAddr {
        *self
            .metrics
            .get_or_init(|| self.process.probes_addr())
            .await
    }

    /// `/readyz` as (HTTP status, role), or `None` while the process does not answer.
    pub(super) async fn readyz(&self) -> Option<(u16, String)> {
        let response = reqwest::get(format!("http://{}/readyz", self.addr().await))
            .await
            .ok()?;
        let status = response.status().as_u16();
        let body: Value = response.json().await.ok()?;
        Some((status, body["role"].as_str()?.to_string()))
    }

    /// The role once `/readyz` is 200 (caches synced).
    async fn ready_role(&self) -> Option<String> {
        self.readyz()
            .await
            .and_then(|(status, role)| (status == 200).then_some(role))
    }

    /// Whether `/readyz` says 200 with the role "leader" within `within`.
    pub(super) async fn leads_within(&self, within: Duration) -> bool {
        let leading = wait_until(within, || async {
            (self.ready_role().await? == "leader").then_some(())
        });
        leading.await.is_some()
    }

    async fn healthz(&self) -> (u16, String) {
        let response = reqwest::get(format!("http://{}/healthz", self.addr().await))
            .await
            .unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    }

    pub(super) async fn metrics(&self) -> String {
        let base = format!("http://{}", self.addr().await);
        support::metrics_text(&base).await.unwrap()
    }

    /// Sum of `aigw_api_requests_total` over every label set: this process's management-API calls.
    async fn api_requests(&self) -> f64 {
        metric_sum(&self.metrics().await, "aigw_api_requests_total")
    }

    async fn leader_gauge(&self) -> f64 {
        metric_sum(&self.metrics().await, "aigw_leader")
    }

    /// `aigw_leader_lease_transitions`: the Lease's count of changes of hands, once this
    /// process has read the Lease.
    async fn lease_transitions(&self) -> Option<f64> {
        self.metrics().await.lines().find_map(|l| {
            l.strip_prefix("aigw_leader_lease_transitions ")?
                .parse()
                .ok()
        })
    }

    pub(super) fn signal(&self, signal: &str) {
        self.process.signal(signal);
    }

    /// Waits for the process to exit and returns its exit code.
    pub(super) async fn exit_code(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.process.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(Instant::now() < deadline, "{} did not exit", self.name);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The namespaces (the first `env`'s), the emulator and the chart's sharded RBAC (its
/// kubeconfig in `dir`) of a test of shards.
pub(super) struct Field {
    pub(super) env: TestEnv,
    pub(super) namespaces: Vec<String>,
    pub(super) emu: Running,
    pub(super) dir: tempfile::TempDir,
}

impl Field {
    pub(super) async fn with(prefix: &str, namespaces: usize) -> Self {
        let env = TestEnv::new(prefix).await;
        let mut names = vec![env.namespace.clone()];
        for _ in 1..namespaces {
            names.push(TestEnv::another(prefix).await.namespace);
        }
        let emu = aigw::emulator::spawn(EmulatorOptions::new(TOKEN))
            .await
            .expect("emulator did not start");
        let dir = tempfile::tempdir().unwrap();
        let watched: Vec<&str> = names.iter().map(String::as_str).collect();
        let scope = support::chart::Scope::watched(&watched)
            .lease_namespace(&env.namespace)
            .sharded();
        support::chart::install(&env.client, &scope)
            .await
            .kubeconfig_file(dir.path());
        Self {
            env,
            namespaces: names,
            emu,
            dir,
        }
    }
}

pub(super) fn config(name: &str) -> Config {
    serde_json::from_value(json!({
        "apiVersion": "aigw.io/v1alpha1", "kind": "Config", "metadata": {"name": name},
        "spec": {"name": name, "config": {"strategy": {"mode": "fallback"},
                 "targets": [{"provider": "@openai"}, {"provider": "@anthropic"}]}}
    }))
    .unwrap()
}

/// Waits until exactly one of `operators` is ready as leader and the others as standby;
/// returns the leader's index.
async fn sole_leader(operators: &[&Operator]) -> usize {
    let found = wait_until(TAKEOVER_TIMEOUT, || async {
        let mut roles = Vec::new();
        for operator in operators {
            roles.push(operator.ready_role().await?);
        }
        let leaders: Vec<usize> = (0..roles.len()).filter(|&i| roles[i] == "leader").collect();
        let standbys = roles.iter().filter(|r| *r == "standby").count();
        (leaders.len() == 1 && standbys == roles.len() - 1).then(|| leaders[0])
    })
    .await;
    found.expect("no single leader with every other replica ready as standby")
}

/// Creates a Config and measures, from `since`, when `operator` reports leader and when the
/// Config goes Ready (reconciled by it).
async fn takeover(
    env: &TestEnv,
    operator: &Operator,
    since: Instant,
    name: &str,
) -> (Duration, Duration) {
    create_config(env, name).await;
    let leading = wait_until(TAKEOVER_TIMEOUT, || async {
        (operator.readyz().await?.1 == "leader").then(Instant::now)
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "{} did not take over within {TAKEOVER_TIMEOUT:?}",
            operator.name
        )
    });
    env.wait_for::<Config>(name, TAKEOVER_TIMEOUT, Config::ready)
        .await;
    (leading - since, since.elapsed())
}

/// An emulator and the chart's operator kubeconfig for `env` (in the directory), for replicas.
async fn emulator_and_kubeconfig(env: &TestEnv) -> (Running, tempfile::TempDir) {
    let emulator = aigw::emulator::spawn(EmulatorOptions::new(TOKEN))
        .await
        .expect("emulator did not start");
    let dir = tempfile::tempdir().unwrap();
    support::chart::operator_kubeconfig(&env.client, &env.namespace, dir.path()).await;
    (emulator, dir)
}

/// The test's namespace, and [`emulator_and_kubeconfig`] for it.
async fn replica_env(prefix: &str) -> (TestEnv, Running, tempfile::TempDir) {
    let env = TestEnv::new(prefix).await;
    let (emulator, dir) = emulator_and_kubeconfig(&env).await;
    (env, emulator, dir)
}

/// Stops the `replicas`, then removes the test's namespace and stops its emulator.
async fn finish<const N: usize>(env: TestEnv, emulator: Running, replicas: [Operator; N]) {
    drop(replicas);
    env.cleanup().await;
    let _ = emulator.shutdown().await;
}

async fn create_config(env: &TestEnv, name: &str) {
    support::create(&env.api::<Config>(), &config(name)).await;
}

async fn lease_holder(env: &TestEnv) -> Option<String> {
    let lease = env.api::<Lease>().get("aigw").await.unwrap();
    lease.spec?.holder_identity
}

#[tokio::test]
async fn one_leader_reconciles_and_a_standby_takes_over() {
    let (env, emulator, dir) = replica_env("leader").await;
    let suffix = &env.namespace[env.namespace.len() - 8..];
    let first = Operator::start(&format!("aigw-a-{suffix}"), &env, &emulator, dir.path());
    let second = Operator::start(&format!("aigw-b-{suffix}"), &env, &emulator, dir.path());

    let leader_index = sole_leader(&[&first, &second]).await;
    let (leader, mut standby) = if leader_index == 0 {
        (first, second)
    } else {
        (second, first)
    };
    assert_eq!(
        lease_holder(&env).await.as_deref(),
        Some(leader.name.as_str())
    );
    assert_eq!(leader.leader_gauge().await, 1.0);
    assert_eq!(standby.leader_gauge().await, 0.0);
    // Both follow the Lease's count of changes of hands: 0, it was created, never taken over.
    for operator in [&leader, &standby] {
        let seen = wait_until(TAKEOVER_TIMEOUT, || async {
            operator.lease_transitions().await
        })
        .await;
        assert_eq!(seen, Some(0.0), "{}", operator.name);
    }
    for operator in [&leader, &standby] {
        assert_eq!(operator.healthz().await, (200, "ok\n".to_string()));
    }

    create_config(&env, "before").await;
    env.wait_for::<Config>("before", TAKEOVER_TIMEOUT, Config::ready)
        .await;
    assert!(leader.api_requests().await > 0.0, "the leader reconciled");
    standby.assert_no_api_call("the standby").await;

    // SIGKILL: the lease is not released; the standby waits for it to expire.
    let killed_at = Instant::now();
    drop(leader);
    let (kill_takeover, kill_reconciled) = takeover(&env, &standby, killed_at, "after-kill").await;
    println!(
        "takeover after SIGKILL: leader after {:.1} s, new Config Ready after {:.1} s",
        kill_takeover.as_secs_f64(),
        kill_reconciled.as_secs_f64()
    );
    assert_eq!(
        lease_holder(&env).await.as_deref(),
        Some(standby.name.as_str())
    );
    let lease = env.api::<Lease>().get("aigw").await.unwrap();
    assert_eq!(lease.spec.and_then(|s| s.lease_transitions), Some(1));
    assert_eq!(
        standby.lease_transitions().await,
        Some(1.0),
        "the new leader reports the takeover"
    );

    // SIGTERM: the leader releases the lease; a freshly started replica takes over at once.
    let third = Operator::start(&format!("aigw-c-{suffix}"), &env, &emulator, dir.path());
    sole_leader(&[&standby, &third]).await;
    create_config(&env, "while-c-stands-by").await;
    env.wait_for::<Config>("while-c-stands-by", TAKEOVER_TIMEOUT, Config::ready)
        .await;
    third.assert_no_api_call("the new standby").await;
    let terminated_at = Instant::now();
    standby.signal("-TERM");
    let (term_takeover, term_reconciled) =
        takeover(&env, &third, terminated_at, "after-term").await;
    println!(
        "takeover after SIGTERM: leader after {:.1} s, new Config Ready after {:.1} s",
        term_takeover.as_secs_f64(),
        term_reconciled.as_secs_f64()
    );
    assert_eq!(
        standby.exit_code(Duration::from_secs(30)).await,
        Some(0),
        "SIGTERM is a clean exit"
    );
    assert_eq!(
        lease_holder(&env).await.as_deref(),
        Some(third.name.as_str())
    );

    finish(env, emulator, [third, standby]).await;
}

/// Another holder writing the lease (as after a network partition outlasting the term) makes
/// the leader stop: it exits non-zero at its next renewal instead of acting on beside it.
#[tokio::test]
async fn a_leader_that_loses_its_lease_exits_non_zero() {
    let (env, emulator, dir) = replica_env("leader-lost").await;
    let mut operator = Operator::start("aigw-lost", &env, &emulator, dir.path());
    sole_leader(&[&operator]).await;

    let leases = env.api::<Lease>();
    let mut lease = leases.get("aigw").await.unwrap();
    let spec = lease.spec.get_or_insert_default();
    spec.holder_identity = Some("intruder".into());
    spec.renew_time = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
    spec.lease_duration_seconds = Some(3600);
    leases
        .replace("aigw", &PostParams::default(), &lease)
        .await
        .unwrap();

    let code = operator.exit_code(TAKEOVER_TIMEOUT).await;
    assert!(
        code.is_some_and(|c| c != 0),
        "exit code {code:?} after losing the lease"
    );
    let log = std::fs::read_to_string(&operator.process.log).unwrap();
    support::assert_mentions(&log, &["lost the leader lease", "held by intruder"]);

    finish(env, emulator, [operator]).await;
}

/// Two installations whose Leases share a namespace under one `--leader-election-id`: the
/// Lease carries its holder's installation, and the other installation's replica, which stands
/// by for as long as that one runs, says why once, naming the flag that sets them apart.
#[tokio::test]
async fn an_installation_finding_the_lease_held_for_another_says_so() {
    let (env, emulator, dir) = replica_env("leader-shared").await;
    let suffix = &env.namespace[env.namespace.len() - 8..];
    let ns = [env.namespace.as_str()];
    let start = |name: &str, id: &str| {
        let extra = ["--installation-id", id];
        Operator::spawn(name, &ns, &env.namespace, &emulator, dir.path(), &extra)
    };
    let prod = start(&format!("aigw-prod-{suffix}"), "team/prod");
    sole_leader(&[&prod]).await;
    let staging = start(&format!("aigw-staging-{suffix}"), "team/staging");
    sole_leader(&[&prod, &staging]).await;
    let lease = env.api::<Lease>().get("aigw").await.unwrap();
    let annotations = lease.metadata.annotations.unwrap_or_default();
    assert_eq!(
        annotations.get("aigw.io/installation").map(String::as_str),
        Some("team/prod")
    );
    let warned = wait_until(TAKEOVER_TIMEOUT, || async {
        let log = std::fs::read_to_string(&staging.process.log).ok()?;
        log.contains("held for another installation").then_some(log)
    })
    .await
    .expect("the standby of the other installation says why it stands by");
    support::assert_mentions(&warned, &["team/prod", "--leader-election-id"]);
    finish(env, emulator, [prod, staging]).await;
}

/// A leader paused (SIGSTOP) while its creates wait on a slow API, resumed after another
/// replica took over: the writes it had queued are not sent, and every Config exists once.
#[tokio::test]
async fn a_paused_leader_resumed_after_a_takeover_sends_no_write() {
    let (env, emulator, dir) = replica_env("leader-stop").await;
    let http = reqwest::Client::new();
    let suffix = &env.namespace[env.namespace.len() - 8..];
    let first = Operator::start(&format!("aigw-a-{suffix}"), &env, &emulator, dir.path());
    let second = Operator::start(&format!("aigw-b-{suffix}"), &env, &emulator, dir.path());
    let leader_index = sole_leader(&[&first, &second]).await;
    let (leader, standby) = if leader_index == 0 {
        (&first, &second)
    } else {
        (&second, &first)
    };
    http.put(format!("{}/_emulator/faults", emulator.management_url()))
        .json(&json!({"latency_ms": 2000}))
        .send()
        .await
        .unwrap();
    const N: usize = 20;
    for i in 0..N {
        create_config(&env, &format!("stop-{i}")).await;
    }
    // Let the leader start its creates, then freeze it with calls queued.
    tokio::time::sleep(Duration::from_secs(3)).await;
    leader.signal("-STOP");
    tokio::time::sleep(Duration::from_secs(25)).await;
    leader.signal("-CONT");
    for i in 0..N {
        env.wait_for::<Config>(
            &format!("stop-{i}"),
            Duration::from_secs(120),
            Config::ready,
        )
        .await;
    }
    // Whatever the resumed replica still held is past its window by now.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let state: Value = http
        .get(format!("{}/_emulator/state", emulator.management_url()))
        .bearer_auth(TOKEN)
        .json_value()
        .await;
    let configs = state["configs"].as_array().map_or(0, Vec::len);
    assert_eq!(configs, N, "exactly one remote config per Config");
    let stats: Value = http
        .get(format!("{}/_emulator/stats", emulator.management_url()))
        .json_value()
        .await;
    let posts: u64 = stats["requests"]["POST /ai_gw/v2/configs"]
        .as_object()
        .map_or(0, |m| m.values().filter_map(Value::as_u64).sum());
    assert_eq!(posts, N as u64, "one POST per Config, none resent: {stats}");
    let log = std::fs::read_to_string(&leader.process.log).unwrap();
    let withheld = log.matches("was not sent").count() + log.matches("not acting").count();
    println!(
        "paused leader {}: {withheld} writes or reconciles withheld after resuming; standby {} took over",
        leader.name, standby.name
    );
    finish(env, emulator, [first, second]).await;
}

/// A replica that does not hold the lease (deposed, or not elected yet) restarts no workload
/// after a rotation: the pod-template patch asks the lease first, as the Secret write does. The
/// same call from a replica that leads rolls the workload (so the check is what stops it).
#[tokio::test]
async fn a_replica_without_the_lease_restarts_no_workload() {
    use aigw::controller::driver::Cx;
    use aigw::controller::runtime::leader::{LeaseSettings, elect};
    use aigw::controller::{Connections, Context, Leadership, Metrics, Settings};
    use aigw::resources::ApiKey;
    use aigw::resources::rotation::{WorkloadKind, WorkloadRef};
    use k8s_openapi::api::apps::v1::Deployment as AppsDeployment;

    let env = TestEnv::new("leader-restart").await;
    let workloads = env.api::<AppsDeployment>();
    let app: AppsDeployment = serde_json::from_value(json!({
        "metadata": {"name": "app"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "app"}},
            "template": {"metadata": {"labels": {"app": "app"}},
                "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1"}]}}}
    }))
    .unwrap();
    support::create(&workloads, &app).await;
    let key: ApiKey = serde_json::from_value(json!({
        "apiVersion": "aigw.io/v1alpha1", "kind": "ApiKey",
        "metadata": {"name": "key", "namespace": env.namespace},
        "spec": {"name": "key", "kind": "service", "scopes": ["completions.write"], "secretRef": {"name": "key"}}
    }))
    .unwrap();
    // The operator's own identity: the chart's RBAC, not the admin's.
    let kube = support::chart::install(&env.client, &support::chart::Scope::cluster_wide())
        .await
        .client()
        .await;
    let context = |leadership: Leadership| {
        Context::new(
            kube.clone(),
            Connections::new(kube.clone(), None),
            std::sync::Arc::new(Metrics::default()),
            &Settings::default(),
        )
        .with_leadership(leadership)
    };
    let restart = [WorkloadRef {
        kind: WorkloadKind::Deployment,
        name: "app".into(),
    }];
    let rolled_at = async || {
        workloads
            .get("app")
            .await
            .unwrap()
            .spec
            .and_then(|s| s.template.metadata)
            .and_then(|m| m.annotations)
            .and_then(|a| a.get("aigw.io/credentials-rotated-at").cloned())
    };

    // Campaigning, never elected (the elector is not run): not the leader.
    let (standby, _elector) = elect(kube.clone(), LeaseSettings::new(&env.namespace, "standby"));
    let restart_as = |leadership: Leadership, at: &'static str| {
        let (env, key, restart) = (&env, &key, &restart);
        async move {
            let ctx = context(leadership);
            let cx = Cx::new(&ctx, env.api::<ApiKey>(), key);
            aigw::controller::driver::secret_delivery::restart_workloads(&cx, restart, at).await;
        }
    };
    restart_as(standby, "2026-01-01T00:00:00Z").await;
    assert_eq!(
        rolled_at().await,
        None,
        "a replica without the lease rolled a workload"
    );

    restart_as(Leadership::always(), "2026-01-01T00:00:01Z").await;
    assert_eq!(rolled_at().await.as_deref(), Some("2026-01-01T00:00:01Z"));
    env.cleanup().await;
}

/// A replica whose probe address is taken stops at once, naming the flag, rather than running
/// on without probes (never ready, its metrics lost) as it did when the server failed aside.
#[test]
fn an_operator_whose_probe_address_is_taken_stops_naming_it() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let output = support::cli::command()
        .args(["operator", "--metrics-addr", &addr.to_string()])
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("AIGW_LEADER_ELECT")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("--metrics-addr: cannot listen on {addr}"))
            && stderr.contains("in use"),
        "{stderr}"
    );
}
