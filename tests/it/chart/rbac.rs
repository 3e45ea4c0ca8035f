//! The chart's RBAC is enough for the real operator, and no more: the chart is rendered
//! (`hack/chart-check.sh --template`), its ServiceAccount and RBAC are applied to the local
//! apiserver, and the `aigw` binary runs with a kubeconfig that impersonates that ServiceAccount,
//! once cluster-wide and once with `watchNamespaces`. It creates, rotates and deletes what it
//! manages, its log has no "forbidden" in it, and the same identity cannot read what the chart
//! does not grant.

use crate::support;

use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use aigw::emulator::{EmulatorOptions, Running};
use aigw::resources::{ApiKey, Config, Connection, Deployment};
use k8s_openapi::api::apps::v1::Deployment as AppsDeployment;
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::{Value, json};
use support::TestEnv;
use support::chart::{self, Identity};
use support::harness::Harness;
use support::objects::{Conditions, Rotates, ready_at};

const WAIT: Duration = Duration::from_secs(60);
const TOKEN: &str = "chart-rbac-token-5d1e7b";
const ROTATED_AT: &str = "aigw.io/credentials-rotated-at";
const API_TOKEN_SECRET: &str = "api-token";

#[tokio::test]
async fn cluster_wide_rbac_lets_the_operator_do_its_work() {
    // The cluster to itself: a cluster-wide operator would also reconcile the other tests' objects.
    let cluster = support::exclusive_cluster().await;
    let release = TestEnv::alone(&cluster, "chart-rel").await;
    let work = TestEnv::alone(&cluster, "chart-all").await;
    let chart = Chart::install(&release, &[]).await;
    let emulator = spawn_emulator().await;
    let operator = Operator::start(&chart, &emulator, &[]);

    manage_config_and_rotating_deployment(&work, &work, &operator, None).await;
    manage_rotating_api_key(&work, &operator).await;
    edit_during_a_slow_create(&work, &operator, &emulator).await;

    let sa = chart.client().await;
    let secrets: Api<Secret> = Api::namespaced(sa.clone(), &work.namespace);
    secrets
        .list(&Default::default())
        .await
        .expect("cluster-wide: the ServiceAccount lists Secrets in any namespace");
    let plain = plain_secret(&work, "not-aigw").await;
    assert_forbidden(
        secrets.delete(&plain, &DeleteParams::default()).await,
        "delete a Secret",
    );
    assert_cannot_list(
        Api::<ConfigMap>::namespaced(sa, &work.namespace),
        "list ConfigMaps",
    )
    .await;
    operator.stop_clean();
    chart.uninstall().await;
    work.cleanup().await;
    release.cleanup().await;
}

#[tokio::test]
async fn watch_namespaces_rbac_is_enough_and_confined_to_them() {
    let release = TestEnv::new("chart-rel").await;
    let a = TestEnv::new("chart-a").await;
    let b = TestEnv::new("chart-b").await;
    let c = TestEnv::new("chart-c").await;
    let watch = format!("watchNamespaces={{{},{}}}", a.namespace, b.namespace);
    let chart = Chart::install(&release, &[watch]).await;
    let emulator = spawn_emulator().await;
    let operator = Operator::start(&chart, &emulator, &[&a.namespace, &b.namespace]);

    // The Config in b through a Connection whose token Secret is in the release namespace (the
    // connection-secrets Role) and whose namespaceSelector matches b (Namespaces in the
    // ClusterRole); the Deployment (credentials Secret, workload restart) in a.
    let connection = connection_with_token_in(&release, &chart, &emulator).await;
    manage_config_and_rotating_deployment(&b, &a, &operator, Some(&connection)).await;

    let sa = chart.client().await;
    let outside = plain_secret(&c, "outside").await;
    assert_forbidden(
        Api::<Secret>::namespaced(sa.clone(), &c.namespace)
            .get(&outside)
            .await,
        "get a Secret in a namespace that is not watched",
    );
    assert_cannot_list(Api::<Secret>::all(sa.clone()), "list Secrets cluster-wide").await;
    assert_cannot_list(Api::<Config>::all(sa.clone()), "list Configs cluster-wide").await;
    let inside = plain_secret(&a, "inside").await;
    Api::<Secret>::namespaced(sa.clone(), &a.namespace)
        .get(&inside)
        .await
        .expect("the ServiceAccount reads Secrets in a watched namespace");
    Api::<Secret>::namespaced(sa.clone(), &release.namespace)
        .get(API_TOKEN_SECRET)
        .await
        .expect("the ServiceAccount reads Connection secrets in the release namespace");
    // It watches them there (the Connection secret namespace), and nowhere else unwatched.
    Api::<Secret>::namespaced(sa.clone(), &release.namespace)
        .list(&Default::default())
        .await
        .expect("the ServiceAccount lists the Connection secret namespace");
    assert_cannot_list(
        Api::<Secret>::namespaced(sa, &c.namespace),
        "list the Secrets of a namespace that is not watched",
    )
    .await;
    operator.stop_clean();
    let _ = Api::<Connection>::all(release.client.clone())
        .delete(&connection, &DeleteParams::default())
        .await;
    chart.uninstall().await;
    for env in [a, b, c, release] {
        env.cleanup().await;
    }
}

/// The harness's in-process operator, which every other integration test runs, acts as the
/// chart's ServiceAccount: cluster-wide for one harness, through Roles in the watched namespaces
/// for a harness of two teams; never as the admin the test code uses.
#[tokio::test]
async fn the_harness_operator_runs_under_the_charts_rbac() {
    let h = Harness::start("chart-harness").await;
    let operator = h.ctx.kube.clone();
    let who = Api::<SelfSubjectReview>::all(operator.clone())
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .expect("ask who the operator is");
    let user = who
        .status
        .and_then(|s| s.user_info)
        .and_then(|u| u.username);
    assert_eq!(user, Some(h.identity.user()));
    assert!(h.identity.user().starts_with("system:serviceaccount:"));
    Api::<Secret>::all(operator.clone())
        .list(&Default::default())
        .await
        .expect("cluster-wide: Secrets in every namespace");
    assert_cannot_list(
        Api::<ConfigMap>::namespaced(operator, &h.env.namespace),
        "list ConfigMaps",
    )
    .await;
    h.stop().await;

    let h = Harness::start_two_teams("chart-harness", WAIT, None).await;
    let operator = h.ctx.kube.clone();
    let other = h.other.as_ref().expect("two teams");
    for namespace in [&h.env.namespace, &other.namespace] {
        Api::<Secret>::namespaced(operator.clone(), namespace)
            .list(&Default::default())
            .await
            .expect("watchNamespaces: Secrets in a watched namespace");
    }
    assert_cannot_list(
        Api::<Secret>::all(operator.clone()),
        "watchNamespaces: list Secrets cluster-wide",
    )
    .await;
    assert_forbidden(
        Api::<Config>::all(operator).list(&Default::default()).await,
        "watchNamespaces: list Configs cluster-wide",
    );
    h.stop().await;
}

/// Creates a Config in `config_ns`, and in `deployment_ns` a Deployment whose credentials
/// Secret the operator writes, rotates (restarting an apps/v1 Deployment), then deletes both:
/// every verb the chart grants for the namespaced kinds is exercised.
async fn manage_config_and_rotating_deployment(
    config_ns: &TestEnv,
    deployment_ns: &TestEnv,
    operator: &Operator,
    connection: Option<&str>,
) {
    config_ns
        .api::<Config>()
        .create(&PostParams::default(), &config("routing", connection))
        .await
        .expect("create the Config");
    operator.wait_for(config_ns, "routing", Config::ready).await;

    create_workload(deployment_ns, "gw", "gateway:1").await;
    let deployments = deployment_ns.api::<Deployment>();
    support::create(&deployments, &rotating_deployment("edge", "v1")).await;
    operator
        .wait_for(deployment_ns, "edge", Deployment::ready)
        .await;
    let first = client_auth(deployment_ns, "edge-creds").await;

    rotate_to_v2(&deployments, "edge").await;
    let rotated = operator
        .wait_for(deployment_ns, "edge", |d: &Deployment| d.rotated_for("v2"))
        .await;
    assert_ne!(
        client_auth(deployment_ns, "edge-creds").await,
        first,
        "the rotation wrote new credentials into the Secret"
    );
    let rotated_at = rotated.status.and_then(|s| s.rotation.last_rotated_at);
    assert_eq!(
        restarted_at(deployment_ns, "gw").await,
        rotated_at,
        "the workload was restarted (patched)"
    );
    assert!(
        deployment_ns.events_text().await.contains("Rotated"),
        "the operator published events:\n{}",
        deployment_ns.events_text().await
    );

    deployment_ns
        .delete_and_wait::<Deployment>("edge", WAIT)
        .await;
    config_ns.delete_and_wait::<Config>("routing", WAIT).await;
}

/// A spec edit while the create's POST is on the wire: the status write that records the
/// result conflicts, and the operator re-reads the object before writing it again. That re-read
/// must be one the chart allows (it once read `configs/status`, which the chart does not grant).
async fn edit_during_a_slow_create(env: &TestEnv, operator: &Operator, emulator: &Running) {
    let faults = format!("{}/_emulator/faults", emulator.management_url());
    let http = reqwest::Client::new();
    let set = async |body: Value| {
        let response = http
            .put(&faults)
            .json(&body)
            .send()
            .await
            .expect("set faults");
        assert!(
            response.status().is_success(),
            "faults: {}",
            response.status()
        );
    };
    set(json!({"latency_ms": 3000})).await;
    support::create(&env.api::<Config>(), &config("slow", None)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    support::merge_patch(
        &env.api::<Config>(),
        "slow",
        json!({"spec": {"name": "slow-renamed"}}),
    )
    .await;
    let done = operator.wait_for(env, "slow", Config::ready).await;
    set(json!({})).await;
    assert!(
        done.status.and_then(|s| s.slug).is_some(),
        "the create's result was recorded"
    );
    assert!(
        operator
            .log_text()
            .contains("writing its result on the new version"),
        "the status write conflicted and was retried (the path under test ran)"
    );
    env.delete_and_wait::<Config>("slow", WAIT).await;
}

/// Creates an ApiKey whose Secret the operator writes, rotates it (restarting the workload
/// `app`, an apps/v1 Deployment), then deletes it: the verbs the chart grants for API keys and
/// the Secrets they are delivered into.
async fn manage_rotating_api_key(env: &TestEnv, operator: &Operator) {
    create_workload(env, "app", "app:1").await;
    let key: ApiKey = object(json!({"apiVersion": "aigw.io/v1alpha1", "kind": "ApiKey",
        "metadata": {"name": "app-key"},
        "spec": {"name": "app-key", "kind": "service", "scopes": ["completions.write"],
                 "secretRef": {"name": "app-key"},
                 "rotation": {"trigger": "v1", "restart": [{"kind": "Deployment", "name": "app"}]}}}));
    let keys = env.api::<ApiKey>();
    support::create(&keys, &key).await;
    let key_ready = |k: &ApiKey| {
        k.status
            .as_ref()
            .is_some_and(|s| ready_at(&s.conditions, k.meta().generation) && s.id.is_some())
    };
    operator.wait_for(env, "app-key", key_ready).await;
    let first = secret_value(env, "app-key", "api_key").await;
    rotate_to_v2(&keys, "app-key").await;
    let rotated = operator
        .wait_for(env, "app-key", |k: &ApiKey| {
            key_ready(k) && k.rotated_for("v2")
        })
        .await;
    assert_ne!(
        secret_value(env, "app-key", "api_key").await,
        first,
        "the rotation wrote a new key into the Secret"
    );
    assert_eq!(
        restarted_at(env, "app").await,
        rotated.status.and_then(|s| s.rotation.last_rotated_at),
        "the workload was restarted (patched)"
    );
    env.delete_and_wait::<ApiKey>("app-key", WAIT).await;
}

/// Creates the workload (an apps/v1 Deployment) `name` running `image`.
async fn create_workload(env: &TestEnv, name: &str, image: &str) {
    let pod = json!({"metadata": {"labels": {"app": name}},
                     "spec": {"containers": [{"name": name, "image": image}]}});
    let workload: AppsDeployment = object(json!({"metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}}, "template": pod}}));
    support::create(&env.api::<AppsDeployment>(), &workload).await;
}

/// When the operator last restarted the workload `name` (its pod template's annotation).
async fn restarted_at(env: &TestEnv, name: &str) -> Option<String> {
    let workload = env.get::<AppsDeployment>(name).await;
    workload
        .spec
        .and_then(|s| s.template.metadata)
        .and_then(|m| m.annotations)
        .and_then(|a| a.get(ROTATED_AT).cloned())
}

/// The chart's ServiceAccount and RBAC, applied to the local apiserver.
struct Chart {
    admin: Client,
    objects: Vec<DynamicObject>,
    identity: Identity,
    service_account: String,
    namespace: String,
    dir: tempfile::TempDir,
}

impl Chart {
    /// Renders the chart into `release`'s namespace with a release name of its own (its
    /// ClusterRole is cluster-scoped: parallel runs must not share it) and applies the RBAC.
    async fn install(release: &TestEnv, sets: &[String]) -> Self {
        let name = format!("aigw-{}", &release.namespace[release.namespace.len() - 8..]);
        let documents = chart::render(&name, &release.namespace, sets);
        let mut objects = Vec::new();
        for document in &documents {
            objects.push(chart::apply(&release.client, document.clone()).await);
        }
        let service_account = objects
            .iter()
            .find(|o| o.types.as_ref().is_some_and(|t| t.kind == "ServiceAccount"))
            .map(|o| o.name_any())
            .expect("the chart renders a ServiceAccount");
        let identity = Identity {
            namespace: release.namespace.clone(),
            service_account: service_account.clone(),
        };
        identity.wait_authorized(&release.client, &documents).await;
        Self {
            admin: release.client.clone(),
            objects,
            identity,
            service_account,
            namespace: release.namespace.clone(),
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    fn kubeconfig_file(&self) -> PathBuf {
        self.identity.kubeconfig_file(self.dir.path())
    }

    /// A client acting as the chart's ServiceAccount.
    async fn client(&self) -> Client {
        self.identity.client().await
    }

    async fn uninstall(self) {
        for object in &self.objects {
            let (api, _) = chart::dynamic_api(&self.admin, object).await;
            let _ = api
                .delete(&object.name_any(), &DeleteParams::default())
                .await;
        }
    }
}

async fn spawn_emulator() -> Running {
    aigw::emulator::spawn(EmulatorOptions::new(TOKEN))
        .await
        .expect("emulator did not start")
}

/// The real `aigw operator` process, acting as the chart's ServiceAccount; killed on drop.
struct Operator {
    child: Mutex<Child>,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Operator {
    fn start(chart: &Chart, emulator: &Running, namespaces: &[&String]) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let token = dir.path().join("token");
        std::fs::write(&token, TOKEN).expect("write the token file");
        let log = dir.path().join("operator.log");
        let out = File::create(&log).expect("create the log file");
        let err = out.try_clone().expect("clone the log file");
        let mut command = Command::new(env!("CARGO_BIN_EXE_aigw"));
        command
            .arg("operator")
            .args(["--management-url", &emulator.management_url()])
            .args(["--gateway-url", &emulator.gateway_url()])
            .arg("--token-file")
            .arg(&token)
            .args(["--metrics-addr", "127.0.0.1:0"]);
        for namespace in namespaces {
            command.args(["--namespace", namespace]);
        }
        command.args(optional_flags(&chart.namespace));
        let child = command
            .env("KUBECONFIG", chart.kubeconfig_file())
            .env("POD_NAME", format!("{}-0", chart.service_account))
            .env("POD_NAMESPACE", &chart.namespace)
            .env("RUST_LOG", "info,aigw=debug")
            .env("AIGW_LOG_FORMAT", "text")
            .env("NO_COLOR", "1")
            .env_remove("AIGW_NAMESPACE")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("start aigw operator");
        Self {
            child: Mutex::new(child),
            log,
            _dir: dir,
        }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the object satisfies `done`; fails early when the operator has exited.
    async fn wait_for<K>(&self, env: &TestEnv, name: &str, done: impl Fn(&K) -> bool) -> K
    where
        K: crate::support::NamespacedKind,
    {
        let api = env.api::<K>();
        let deadline = tokio::time::Instant::now() + WAIT;
        while tokio::time::Instant::now() < deadline {
            if let Some(object) = api.get_opt(name).await.ok().flatten().filter(|o| done(o)) {
                return object;
            }
            self.assert_running();
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let current = api.get_opt(name).await.ok().flatten();
        panic!(
            "timed out after {WAIT:?} waiting for {name}\n--- object ---\n{}\n--- events ---\n{}",
            serde_yaml::to_string(&current).unwrap_or_default(),
            env.events_text().await
        );
    }

    fn assert_running(&self) {
        let exited = self
            .child
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .try_wait()
            .expect("query the operator process");
        assert!(exited.is_none(), "the operator exited: {exited:?}");
    }

    /// [`Self::assert_clean_log`], then stops it.
    fn stop_clean(self) {
        self.assert_clean_log();
    }

    /// Nothing the operator tried was refused, and the API token never reached its log.
    fn assert_clean_log(&self) {
        let log = self.log_text();
        let refused: Vec<&str> = log
            .lines()
            .filter(|line| line.to_lowercase().contains("forbidden"))
            .collect();
        assert!(
            refused.is_empty(),
            "the chart's RBAC refused the operator something:\n{}",
            refused.join("\n")
        );
        assert!(!log.contains(TOKEN), "the API token appears in the log");
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        let child = self.child.get_mut().unwrap_or_else(|e| e.into_inner());
        let _ = child.kill();
        let _ = child.wait();
        if std::thread::panicking() {
            eprintln!("--- operator log ---\n{}", self.log_text());
        }
    }
}

/// The flags the chart renders that the binary under test may not have yet: passed only when
/// `aigw operator --help` lists them.
fn optional_flags(release_namespace: &str) -> Vec<String> {
    let help = Command::new(env!("CARGO_BIN_EXE_aigw"))
        .args(["operator", "--help"])
        .output()
        .expect("aigw operator --help");
    let help = String::from_utf8_lossy(&help.stdout);
    let mut flags = Vec::new();
    if help.contains("--leader-elect") {
        flags.push("--leader-elect=true".to_string());
    }
    if help.contains("--leader-election-namespace") {
        flags.push(format!("--leader-election-namespace={release_namespace}"));
    }
    if help.contains("--leader-election-id") {
        flags.push("--leader-election-id=aigw".to_string());
    }
    if help.contains("--connection-secret-namespace") {
        flags.push(format!("--connection-secret-namespace={release_namespace}"));
    }
    // The test changes a rotation trigger right after the create.
    if help.contains("--rotation-spacing") {
        flags.push("--rotation-spacing=0s".to_string());
    }
    // Other tests' cluster-scoped objects are not this operator's.
    if help.contains("--cluster-selector") {
        flags.push(format!(
            "--cluster-selector=aigw-test/env={release_namespace}"
        ));
    }
    eprintln!("optional operator flags in this build: {flags:?}");
    flags
}

fn object<K: serde::de::DeserializeOwned>(value: Value) -> K {
    serde_json::from_value(value).expect("a valid object")
}

/// A Config; through the named Connection, or the operator's default connection.
fn config(name: &str, connection: Option<&str>) -> Config {
    let mut spec = json!({"name": name, "config": {"strategy": {"mode": "fallback"}, "targets": [{"provider": "@openai"}]}});
    if let Some(connection) = connection {
        spec["connectionRef"] = json!({"name": connection});
    }
    object(
        json!({"apiVersion": "aigw.io/v1alpha1", "kind": "Config", "metadata": {"name": name}, "spec": spec}),
    )
}

/// A Connection to the emulator (named like the release: unique, Connections are
/// cluster-scoped) whose bearer token is a Secret in the release namespace and whose
/// namespaceSelector matches the test's "chart-b" namespace; its name.
async fn connection_with_token_in(release: &TestEnv, chart: &Chart, emulator: &Running) -> String {
    let secret: Secret =
        object(json!({"metadata": {"name": API_TOKEN_SECRET}, "stringData": {"token": TOKEN}}));
    release
        .api::<Secret>()
        .create(&PostParams::default(), &secret)
        .await
        .expect("create the token Secret");
    let name = chart.service_account.clone();
    let connection: Connection = object(json!({
        "apiVersion": "aigw.io/v1alpha1", "kind": "Connection",
        // Selected by the release's --cluster-selector: otherwise another installation's.
        "metadata": {"name": name, "labels": {"aigw-test/env": release.namespace}},
        "spec": {
            "managementUrl": emulator.management_url(), "gatewayUrl": emulator.gateway_url(),
            "auth": {"bearerToken": {"secretRef": {"namespace": release.namespace, "name": API_TOKEN_SECRET, "key": "token"}}},
            "namespaceSelector": {"matchLabels": {"aigw.io/test": "chart-b"}}
        }
    }));
    Api::<Connection>::all(release.client.clone())
        .create(&PostParams::default(), &connection)
        .await
        .expect("create the Connection");
    name
}

fn rotating_deployment(name: &str, trigger: &str) -> Deployment {
    object(
        json!({"apiVersion": "aigw.io/v1alpha1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"name": name, "credentialsSecretRef": {"name": format!("{name}-creds")},
                 "rotation": {"trigger": trigger, "restart": [{"kind": "Deployment", "name": "gw"}]}}}),
    )
}

/// The `client_auth` of a credentials Secret, read as admin.
async fn client_auth(env: &TestEnv, name: &str) -> Vec<u8> {
    secret_value(env, name, "client_auth").await
}

/// The value of `key` in the Secret `name`, read as admin.
async fn secret_value(env: &TestEnv, name: &str, key: &str) -> Vec<u8> {
    let secret = env.get::<Secret>(name).await;
    secret
        .data
        .and_then(|d| d.get(key).map(|v| v.0.clone()))
        .unwrap_or_else(|| panic!("the Secret {name} holds {key}"))
}

/// A Secret aigw has nothing to do with, created as admin; its name.
async fn plain_secret(env: &TestEnv, name: &str) -> String {
    let secret: Secret = object(json!({"metadata": {"name": name}, "stringData": {"k": "v"}}));
    support::create(&env.api::<Secret>(), &secret).await;
    name.to_string()
}

/// The request was refused by RBAC (the object itself is never printed: it may be a Secret).
/// Listing through `api` is forbidden to the ServiceAccount.
async fn assert_cannot_list<K>(api: Api<K>, what: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    assert_forbidden(api.list(&Default::default()).await, what);
}

/// Moves the rotation trigger of `name` (a Deployment or an ApiKey) to `v2`.
async fn rotate_to_v2<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let patch = json!({"spec": {"rotation": {"trigger": "v2"}}});
    support::merge_patch(api, name, patch).await;
}

fn assert_forbidden<T>(result: kube::Result<T>, what: &str) {
    match result {
        Err(kube::Error::Api(status)) if status.code == 403 => {}
        Err(e) => panic!("{what}: expected 403 Forbidden for the ServiceAccount, got {e}"),
        Ok(_) => panic!("{what}: the ServiceAccount was allowed to"),
    }
}

/// The chart's user-facing roles (`templates/user-roles.yaml`, aggregated into `edit`/`admin`
/// and `view`) let a namespace's editors write the specs of the namespaced aigw kinds but never
/// their status, where `status.installation` records which installation owns an object: a
/// tenant who could write it could move its object to another installation. Viewers only read.
#[tokio::test]
async fn a_namespace_editor_writes_specs_but_never_status() {
    let env = TestEnv::new("chart-users").await;
    let release = format!("aigw-{}", &env.namespace[env.namespace.len() - 8..]);
    let mut documents = chart::render_templates(
        &release,
        &env.namespace,
        &["templates/user-roles.yaml"],
        &[],
    );
    let mut roles = Vec::new();
    for document in &documents {
        roles.push(chart::apply(&env.client, document.clone()).await);
    }
    assert_eq!(roles.len(), 2, "an edit and a view ClusterRole");
    for role in &roles {
        let rules = serde_json::to_string(&role.data["rules"]).unwrap();
        support::assert_mentions(&rules, &["configs", "apikeys"]);
        assert!(!rules.contains('/') && !rules.contains('*'), "{rules}");
    }
    for (who, role) in [("editor", "edit"), ("viewer", "view")] {
        let binding = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": format!("{who}-{role}"), "namespace": env.namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": format!("{release}-{role}")},
            "subjects": [{"kind": "ServiceAccount", "name": who, "namespace": env.namespace}]
        });
        let typed: k8s_openapi::api::rbac::v1::RoleBinding =
            serde_json::from_value(binding.clone()).unwrap();
        support::create(
            &env.api::<k8s_openapi::api::rbac::v1::RoleBinding>(),
            &typed,
        )
        .await;
        documents.push(binding);
    }
    let as_user = |who: &str| Identity {
        namespace: env.namespace.clone(),
        service_account: who.to_string(),
    };
    for who in ["editor", "viewer"] {
        as_user(who).wait_authorized(&env.client, &documents).await;
    }
    let editor = Api::<Config>::namespaced(as_user("editor").client().await, &env.namespace);
    support::create(&editor, &config("routing", None)).await;
    support::merge_patch(
        &editor,
        "routing",
        json!({"metadata": {"annotations": {"team": "a"}}}),
    )
    .await;
    assert_forbidden(
        editor
            .patch_status(
                "routing",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"installation": "somebody-else"}})),
            )
            .await,
        "an editor writing status.installation",
    );
    let viewer = Api::<Config>::namespaced(as_user("viewer").client().await, &env.namespace);
    viewer.get("routing").await.expect("a viewer reads it");
    assert_forbidden(
        viewer
            .patch(
                "routing",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {"team": "b"}}})),
            )
            .await,
        "a viewer editing a Config",
    );
    for role in roles {
        let (api, _) = chart::dynamic_api(&env.client, &role).await;
        let _ = api.delete(&role.name_any(), &DeleteParams::default()).await;
    }
    env.cleanup().await;
}
