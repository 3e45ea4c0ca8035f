//! Test support for integration tests: a real kube-apiserver (started once per test process,
//! reused across processes), the CRDs from `crds/`, and a fresh namespace per test.

use std::path::{Path, PathBuf};
use std::sync::{LazyLock, OnceLock};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config, Resource, ResourceExt};
use serde::de::DeserializeOwned;

pub mod api_keys;
pub mod chart;
pub mod cli;
pub mod cluster;
pub mod emu;
pub mod endpoints;
pub mod harness;
pub mod objects;
pub mod proxy;
pub mod writes;

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Presents `credential` (`{"client_auth": …}` of a deployment, `{"key": …}` of an API key)
/// for `{objects}/{id}` to the emulator at `base` as its gateway would; the HTTP status.
pub async fn gateway_handshake(
    http: &reqwest::Client,
    base: &str,
    (objects, id): (&str, &str),
    credential: serde_json::Value,
) -> u16 {
    http.post(format!("{base}/_emulator/{objects}/{id}/handshake"))
        .json(&credential)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// The knob `key` of the environment, parsed; `default` when it is unset or does not parse
/// (the bench and chaos targets' knobs).
#[allow(dead_code)]
pub fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What the `/metrics` of the process listening at `base` (`http://host:port`) answers; panics
/// when it does not answer, and leaves an unreadable body to the caller.
pub async fn metrics_text(base: &str) -> reqwest::Result<String> {
    reqwest::get(format!("{base}/metrics"))
        .await
        .unwrap_or_else(|e| panic!("GET {base}/metrics: {e}"))
        .text()
        .await
}

/// The sum of the metric `name` over every label set of a `/metrics` text; with its labels
/// (`aigw_shard_objects{kind="Config"}`), the value of that one series (0 when absent).
pub fn metric_sum(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Starts the local control plane with `hack/cluster-up.sh` (idempotent; it reuses a running
/// one) once per test process. Panics with the script's output when it cannot start: an
/// integration test never passes, or skips, without a real apiserver.
pub fn kubeconfig_path() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let root = repo_root();
        let output = std::process::Command::new("bash")
            .arg(root.join("hack/cluster-up.sh"))
            .current_dir(&root)
            .output()
            .expect("failed to run hack/cluster-up.sh");
        assert!(
            output.status.success(),
            "the local control plane did not start (hack/cluster-up.sh exited {}):\n{}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        // hack/cluster-up.sh keeps its state in `AIGW_DEV_DIR` (the bench's own control plane)
        // or `.aigw-dev`.
        let dir = std::env::var_os("AIGW_DEV_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join(".aigw-dev"));
        let path = dir.join("kubeconfig");
        assert!(
            path.exists(),
            "hack/cluster-up.sh wrote no {}",
            path.display()
        );
        path
    })
}

pub async fn kube_client() -> Client {
    let kubeconfig = Kubeconfig::read_from(kubeconfig_path()).expect("unreadable kubeconfig");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("invalid kubeconfig");
    Client::try_from(config).expect("failed to build a kube client")
}

/// A client of the local control plane that acts as the user `user` (admin credentials
/// impersonating it, group `system:authenticated`): what that user's RBAC allows, and no more.
pub async fn impersonating(user: &str) -> Client {
    let kubeconfig = chart::impersonating_kubeconfig(user, vec!["system:authenticated".into()]);
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("invalid kubeconfig");
    Client::try_from(config).expect("failed to build a kube client")
}

/// Installs (server-side applies) every CRD under `crds/` and waits until each is established.
pub async fn install_crds(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let dir = repo_root().join("crds");
    let mut names = Vec::new();
    // Installed once the CRDs are established: the check that they are in force creates a
    // Config (a dry run).
    let mut policies = None;
    for entry in std::fs::read_dir(&dir).expect("crds/ is missing") {
        let path = entry.expect("unreadable crds/ entry").path();
        let text = std::fs::read_to_string(&path).expect("unreadable CRD file");
        if path.ends_with(aigw::resources::ADMISSION_POLICIES_FILE) {
            policies = Some(text);
            continue;
        }
        let crd: CustomResourceDefinition = serde_yaml::from_str(&text).expect("invalid CRD YAML");
        let name = crd.name_any();
        crds.patch(
            &name,
            &PatchParams::apply("aigw-tests").force(),
            &Patch::Apply(&crd),
        )
        .await
        .unwrap_or_else(|e| panic!("failed to install CRD {name}: {e}"));
        names.push(name);
    }
    for name in names {
        wait_until(Duration::from_secs(30), || async {
            let crd = crds.get(&name).await.ok()?;
            let established = crd
                .status?
                .conditions?
                .into_iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            established.then_some(())
        })
        .await
        .unwrap_or_else(|| panic!("CRD {name} was not established within 30s"));
    }
    if let Some(text) = policies {
        install_admission_policies(client, &text).await;
    }
}

/// Server-side applies the ValidatingAdmissionPolicies (and bindings) of `text`, the
/// multi-document file under `crds/` that bounds the free-form fields, and waits until the
/// apiserver enforces them (the Config CRD must be established).
pub async fn install_admission_policies(client: &Client, text: &str) {
    use k8s_openapi::api::admissionregistration::v1::{
        ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    };
    use serde::Deserialize as _;
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    let apply = PatchParams::apply("aigw-tests").force();
    for document in serde_yaml::Deserializer::from_str(text) {
        let value = serde_json::Value::deserialize(document).expect("invalid policy YAML");
        let name = value["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let result = match value["kind"].as_str() {
            Some("ValidatingAdmissionPolicy") => policies
                .patch(&name, &apply, &Patch::Apply(&value))
                .await
                .map(drop),
            Some("ValidatingAdmissionPolicyBinding") => bindings
                .patch(&name, &apply, &Patch::Apply(&value))
                .await
                .map(drop),
            other => panic!("unexpected kind {other:?} in the admission policies"),
        };
        result.unwrap_or_else(|e| panic!("failed to install {name}: {e}"));
    }
    // The apiserver enforces a binding once its policy cache has it: a dry-run create of a
    // Config nested past the bound is refused from then on.
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let in_force = wait_until(Duration::from_secs(60), || async {
        let probe = deep_config("aigw-admission-probe", "default", 150);
        match post_raw(client, "configs", "default", probe, &dry_run).await {
            Err(kube::Error::Api(refused)) => refused
                .message
                .contains("nested deeper than 32 levels")
                .then_some(()),
            _ => None,
        }
    })
    .await;
    in_force.expect("the admission policies were not in force within 60 s");
}

/// The JSON text of `{"a":{"a":…1…}}`, `levels` objects deep (written as text: a `Value` that
/// deep could not be read back by the client either).
pub fn nested(levels: usize) -> String {
    format!("{}1{}", "{\"a\":".repeat(levels), "}".repeat(levels))
}

/// The JSON text of `manifest` with its value `"DOC"` [`nested`] `levels` deep.
pub fn with_deep_doc(manifest: serde_json::Value, levels: usize) -> String {
    manifest.to_string().replace("\"DOC\"", &nested(levels))
}

/// A Config whose `spec.config.metadata` is `levels` objects deep.
pub fn deep_config(name: &str, namespace: &str, levels: usize) -> String {
    let manifest = serde_json::json!({
        "apiVersion": "aigw.io/v1alpha1", "kind": "Config",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"name": name, "config": {"metadata": "DOC"}},
    });
    with_deep_doc(manifest, levels)
}

/// POSTs the object of `body` (JSON text) of aigw's `plural` into `namespace` with `params` (a
/// dry run stores nothing), without decoding the answer (kube-client could not decode an object
/// nested past its depth limit).
pub async fn post_raw(
    client: &Client,
    plural: &str,
    namespace: &str,
    body: String,
    params: &PostParams,
) -> Result<(), kube::Error> {
    let path = format!("/apis/aigw.io/v1alpha1/namespaces/{namespace}/{plural}");
    let request = kube::core::Request::new(path)
        .create(params, body.into_bytes())
        .expect("request");
    client.request_text(request).await.map(drop)
}

/// The JSON of the status of every object `api` lists, to search for values that must not be
/// there.
pub async fn statuses<K>(api: &Api<K>) -> String
where
    K: kube::Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let list = api.list(&Default::default()).await.unwrap();
    let statuses: Vec<serde_json::Value> = list
        .items
        .iter()
        .map(|object| serde_json::to_value(object).unwrap()["status"].take())
        .collect();
    serde_json::to_string(&statuses).unwrap()
}

/// Fails when a value of `secrets` (of 8 characters or more) is in one of `places` (where, its
/// text), saying that "a `what` appears in" that place.
pub fn assert_none_in(secrets: &[String], what: &str, places: &[(&str, &str)]) {
    for secret in secrets.iter().filter(|s| s.len() >= 8) {
        for (place, text) in places {
            assert!(
                !text.contains(secret.as_str()),
                "a {what} appears in {place}"
            );
        }
    }
}

/// A namespaced kind (aigw's or Kubernetes').
pub trait NamespacedKind:
    Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
    + Clone
    + DeserializeOwned
    + serde::Serialize
    + std::fmt::Debug
{
}

impl<K> NamespacedKind for K where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug
{
}

/// A request whose answer is JSON.
pub trait SendJson {
    /// Sends it; its answer's JSON (a failed send or a body that is not JSON panics).
    fn json_value(self) -> impl std::future::Future<Output = serde_json::Value> + Send;
}

impl SendJson for reqwest::RequestBuilder {
    async fn json_value(self) -> serde_json::Value {
        self.send().await.unwrap().json().await.unwrap()
    }
}

/// An event as one line: its type, object, reason and message.
pub fn event_line(e: &Event) -> String {
    format!(
        "{} {} {}: {}",
        e.type_.as_deref().unwrap_or(""),
        e.involved_object.name.as_deref().unwrap_or(""),
        e.reason.as_deref().unwrap_or(""),
        e.message.as_deref().unwrap_or("")
    )
}

/// Deletes every object `api` lists with `params`, their finalizers dropped first (the
/// operator that would run them may be gone).
pub async fn force_delete_all<K>(api: &Api<K>, params: &ListParams)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let Ok(list) = api.list(params).await else {
        return;
    };
    let drop_finalizers = serde_json::json!({"metadata": {"finalizers": null}});
    for object in list.items {
        let name = object.name_any();
        let _ = api
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(&drop_finalizers),
            )
            .await;
        let _ = api.delete(&name, &Default::default()).await;
    }
}

/// Creates `object` through `api`; the object as the apiserver stored it.
pub async fn create<K>(api: &Api<K>, object: &K) -> K
where
    K: Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    api.create(&PostParams::default(), object)
        .await
        .unwrap_or_else(|e| panic!("failed to create {}: {e}", object.name_any()))
}

/// The message of the apiserver's refusal `result` holds; a panic naming `what` when it was
/// accepted.
pub fn refusal<T>(result: Result<T, kube::Error>, what: impl std::fmt::Display) -> String {
    match result {
        Ok(_) => panic!("the apiserver accepted {what}"),
        Err(kube::Error::Api(status)) => status.message,
        Err(other) => panic!("unexpected error: {other}"),
    }
}

/// Merge-patches the object `name` through `api` with `patch`; the object as patched.
pub async fn merge_patch<K>(
    api: &Api<K>,
    name: &str,
    patch: impl serde::Serialize + std::fmt::Debug,
) -> K
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("failed to patch {name}: {e}"))
}

/// Merge-patches the `spec` of `name` through `api` with `spec`; the apiserver's refusal.
pub async fn refused_patch<K>(api: &Api<K>, name: &str, spec: serde_json::Value) -> String
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    let patch = Patch::Merge(serde_json::json!({"spec": spec}));
    let patched = api.patch(name, &PatchParams::default(), &patch).await;
    refusal(patched, format!("{spec} on {name}"))
}

/// Asserts that `text` (a condition's message, an error, an output) names each of `words`;
/// shows it when not.
pub fn assert_mentions(text: &str, words: &[&str]) {
    assert!(words.iter().all(|w| text.contains(w)), "{text}");
}

/// Asserts that one of `lines` (an export's skipped objects, say) `matches`; shows them all when
/// none does.
pub fn assert_any(lines: &[String], matches: impl Fn(&str) -> bool) {
    assert!(lines.iter().any(|l| matches(l)), "{lines:?}");
}

/// Whether `name` is gone from `api` within `within`.
pub async fn gone_within<K>(api: &Api<K>, name: &str, within: Duration) -> bool
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    wait_until(within, || async {
        api.get_opt(name).await.ok()?.is_none().then_some(())
    })
    .await
    .is_some()
}

/// Whether `name` of `api` is Ready (for its generation) within `within`.
pub async fn ready_within<K>(api: &Api<K>, name: &str, within: Duration) -> bool
where
    K: objects::Conditions + Clone + DeserializeOwned + std::fmt::Debug,
{
    wait_until(within, || async {
        api.get_opt(name).await.ok()??.ready().then_some(())
    })
    .await
    .is_some()
}

/// Deletes `name` through `api`; whether it is gone (its finalizers run) within `within`.
pub async fn deleted_within<K>(api: &Api<K>, name: &str, within: Duration) -> bool
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    api.delete(name, &Default::default())
        .await
        .unwrap_or_else(|e| panic!("failed to delete {name}: {e}"));
    gone_within(api, name, within).await
}

/// Polls `probe` every 100 ms until it returns `Some` or `timeout` passes.
pub async fn wait_until<T, F, Fut>(timeout: Duration, mut probe: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = probe().await {
            return Some(value);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Who holds the cluster: the tests sharing it, whether one test holds it alone, and how many
/// wait to. The integration tests share one process and run in parallel, each in namespaces of
/// its own; every [`TestEnv`] is a share. A test whose operator watches every namespace (it
/// would reconcile the other tests' objects) holds the cluster alone: [`exclusive_cluster`].
#[derive(Debug, Default)]
struct Holders {
    shares: usize,
    alone: bool,
    waiting_alone: usize,
}

static CLUSTER: LazyLock<tokio::sync::watch::Sender<Holders>> =
    LazyLock::new(|| tokio::sync::watch::Sender::new(Holders::default()));

/// How long a new share gives way to a test waiting to hold the cluster alone. Bounded: a test
/// on a multi-threaded runtime taking a second share cannot be told from a new one, and would
/// otherwise wait for the exclusive test, which waits for it.
const GIVE_WAY: Duration = Duration::from_secs(120);

thread_local! {
    /// The shares the test on this thread holds (a test of the default current-thread runtime
    /// runs on one thread).
    static HELD: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Waits until `take` changes the state of [`CLUSTER`] (it returns whether it did).
async fn take_cluster(mut take: impl FnMut(&mut Holders) -> bool) {
    let mut changed = CLUSTER.subscribe();
    loop {
        if CLUSTER.send_if_modified(&mut take) {
            return;
        }
        changed
            .changed()
            .await
            .expect("the cluster state is static");
    }
}

/// A share of the cluster, held by a [`TestEnv`]: no test holds it alone meanwhile.
struct Share;

impl Share {
    async fn take() -> Self {
        // A new test gives way to one waiting to hold the cluster alone: without it, that one
        // waits until no test holds a share, which with tests starting back to back is the end
        // of the run, its test thread idle all along. A test taking a second share while it
        // holds one never waits for one that waits for it.
        let gives_way = HELD.with(std::cell::Cell::get) == 0;
        let after_exclusive = take_cluster(|c| {
            if c.alone || (gives_way && c.waiting_alone > 0) {
                return false;
            }
            c.shares += 1;
            true
        });
        if tokio::time::timeout(GIVE_WAY, after_exclusive)
            .await
            .is_err()
        {
            take_cluster(|c| {
                if c.alone {
                    return false;
                }
                c.shares += 1;
                true
            })
            .await;
        }
        HELD.with(|held| held.set(held.get() + 1));
        Share
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        HELD.with(|held| held.set(held.get().saturating_sub(1)));
        CLUSTER.send_modify(|c| c.shares -= 1);
    }
}

/// The cluster held by one test alone, until dropped (see [`exclusive_cluster`]).
pub struct Exclusive(());

impl Drop for Exclusive {
    fn drop(&mut self) {
        CLUSTER.send_modify(|c| c.alone = false);
    }
}

/// Holds the cluster alone: waits until no [`TestEnv`] of another test is alive (new ones give
/// way meanwhile), and holds back new ones until the result is dropped. Its own namespaces come
/// from [`TestEnv::alone`].
pub async fn exclusive_cluster() -> Exclusive {
    CLUSTER.send_modify(|c| c.waiting_alone += 1);
    take_cluster(|c| {
        if c.shares > 0 || c.alone {
            return false;
        }
        c.alone = true;
        c.waiting_alone -= 1;
        true
    })
    .await;
    Exclusive(())
}

/// One test's slice of the cluster: a client and a namespace of its own.
pub struct TestEnv {
    pub client: Client,
    pub namespace: String,
    _share: Option<Share>,
}

impl TestEnv {
    pub async fn new(prefix: &str) -> Self {
        let share = Share::take().await;
        let mut env = Self::create(prefix).await;
        env._share = Some(share);
        env
    }

    /// One more namespace for a test that already holds its share of the cluster (one that
    /// spreads its objects over several namespaces); the test deletes it.
    pub async fn another(prefix: &str) -> Self {
        Self::create(prefix).await
    }

    /// A namespace of a test that holds the cluster alone.
    pub async fn alone(_cluster: &Exclusive, prefix: &str) -> Self {
        Self::create(prefix).await
    }

    async fn create(prefix: &str) -> Self {
        // Once per process: the CRDs and admission policies do not change while the tests run.
        static INSTALLED: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
        let client = kube_client().await;
        INSTALLED.get_or_init(|| install_crds(&client)).await;
        let namespace = format!(
            "{prefix}-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        let ns = Namespace {
            metadata: kube::api::ObjectMeta {
                name: Some(namespace.clone()),
                labels: Some([("aigw.io/test".to_string(), prefix.to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap_or_else(|e| panic!("failed to create namespace {namespace}: {e}"));
        Self {
            client,
            namespace,
            _share: None,
        }
    }

    /// `prefix` and the namespace's random part (its last 8 characters): a name or slug unique
    /// to the test.
    pub fn suffixed(&self, prefix: &str) -> String {
        format!("{prefix}-{}", &self.namespace[self.namespace.len() - 8..])
    }

    pub fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// The object `name` of kind `K`, if it exists.
    pub async fn get_opt<K: NamespacedKind>(&self, name: &str) -> Option<K> {
        self.api::<K>()
            .get_opt(name)
            .await
            .unwrap_or_else(|e| panic!("failed to read {name}: {e}"))
    }

    /// The object `name` of kind `K`, which must exist.
    pub async fn get<K: NamespacedKind>(&self, name: &str) -> K {
        self.api::<K>()
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("failed to read {name}: {e}"))
    }

    /// Creates the object `manifest` describes (any namespaced kind) in the namespace; the
    /// object as the apiserver stored it.
    pub async fn create_from<K: NamespacedKind>(&self, manifest: serde_json::Value) -> K {
        let object: K = serde_json::from_value(manifest).unwrap();
        self.api::<K>()
            .create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("failed to create {}: {e}", object.name_any()))
    }

    /// Applies the Secret `name` of the namespace with `labels` and `string_data`.
    pub async fn put_secret(
        &self,
        name: &str,
        labels: serde_json::Value,
        string_data: serde_json::Value,
    ) {
        let secret: k8s_openapi::api::core::v1::Secret =
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "labels": labels},
                "stringData": string_data
            }))
            .unwrap();
        self.api::<k8s_openapi::api::core::v1::Secret>()
            .patch(
                name,
                &PatchParams::apply("test").force(),
                &Patch::Apply(&secret),
            )
            .await
            .unwrap();
    }

    /// Waits until an event of the namespace says `text`; on timeout, panics with the events.
    pub async fn wait_event(&self, text: &str, timeout: Duration) {
        let found = wait_until(timeout, || async {
            self.events_text().await.contains(text).then_some(())
        })
        .await;
        assert!(
            found.is_some(),
            "no event says {text:?}:\n{}",
            self.events_text().await
        );
    }

    /// Merge-patches the `spec` of the object `name` with `spec`; the object as patched.
    pub async fn patch_spec<K>(&self, name: &str, spec: serde_json::Value) -> K
    where
        K: NamespacedKind,
    {
        merge_patch(&self.api::<K>(), name, serde_json::json!({ "spec": spec })).await
    }

    /// Waits until the named object satisfies `done`; on timeout, panics with the object and
    /// the namespace's events so the failure explains itself.
    pub async fn wait_for<K>(&self, name: &str, timeout: Duration, done: impl Fn(&K) -> bool) -> K
    where
        K: NamespacedKind,
    {
        let api = self.api::<K>();
        let found = wait_until(timeout, || async {
            let object = api.get_opt(name).await.ok()??;
            done(&object).then_some(object)
        })
        .await;
        match found {
            Some(object) => object,
            None => {
                let current = api.get_opt(name).await.ok().flatten();
                panic!(
                    "timed out after {timeout:?} waiting for {name}\n--- object ---\n{}\n--- events ---\n{}",
                    serde_yaml::to_string(&current).unwrap_or_default(),
                    self.events_text().await
                );
            }
        }
    }

    /// Waits until `name` is Ready with `value` of it (a version, an id) there and no longer
    /// `old`; the object as it is then.
    pub async fn ready_with_new<K>(
        &self,
        name: &str,
        within: Duration,
        old: &str,
        value: impl Fn(&K) -> Option<&str>,
    ) -> K
    where
        K: NamespacedKind + objects::Conditions,
    {
        let renewed = |o: &K| o.ready() && value(o).is_some_and(|now| now != old);
        self.wait_for::<K>(name, within, renewed).await
    }

    /// The slug of the Config `name` once it is Ready, within `within`.
    pub async fn ready_config_slug(&self, name: &str, within: Duration) -> String {
        let ready = self
            .wait_for::<aigw::resources::Config>(name, within, objects::Conditions::ready)
            .await;
        ready
            .status
            .and_then(|s| s.slug)
            .expect("a Ready Config has a slug")
    }

    /// Deletes the object `name` of kind `K` (its finalizers may keep it a while).
    pub async fn delete<K: NamespacedKind>(&self, name: &str) {
        self.api::<K>()
            .delete(name, &Default::default())
            .await
            .unwrap_or_else(|e| panic!("failed to delete {name}: {e}"));
    }

    /// Waits until the object `name`'s condition `type_` ("Stalled" or "Ready") says `reason`
    /// (Stalled=True, or Ready=False); that condition's message.
    pub async fn condition_message<K>(
        &self,
        name: &str,
        timeout: Duration,
        (type_, reason): (&str, &str),
    ) -> String
    where
        K: NamespacedKind + objects::Conditions,
    {
        let (_, message) = self
            .wait_condition::<K>(name, timeout, (type_, reason))
            .await;
        message
    }

    /// [`Self::condition_message`], with the object as it was then.
    pub async fn wait_condition<K>(
        &self,
        name: &str,
        timeout: Duration,
        (type_, reason): (&str, &str),
    ) -> (K, String)
    where
        K: NamespacedKind + objects::Conditions,
    {
        let object = self
            .wait_for::<K>(name, timeout, |o| o.says((type_, reason)))
            .await;
        let message = object.condition(type_).unwrap().2;
        (object, message)
    }

    /// Deletes the named object and waits until it is gone (its finalizer has run); on timeout,
    /// panics with the object and the namespace's events.
    pub async fn delete_and_wait<K>(&self, name: &str, timeout: Duration)
    where
        K: NamespacedKind,
    {
        let api = self.api::<K>();
        if !deleted_within(&api, name, timeout).await {
            let current = api.get_opt(name).await.ok().flatten();
            panic!(
                "{name} was not deleted within {timeout:?}\n--- object ---\n{}\n--- events ---\n{}",
                serde_yaml::to_string(&current).unwrap_or_default(),
                self.events_text().await
            );
        }
    }

    /// Every event in the namespace, one per line (for failure dumps and secret-leak checks).
    pub async fn events_text(&self) -> String {
        let events = self
            .api::<Event>()
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        events.iter().map(event_line).collect::<Vec<_>>().join("\n")
    }

    /// Deletes the test's namespace with its aigw objects ([`drop_namespace`]).
    pub async fn cleanup(self) {
        drop_namespace(&self.client, &self.namespace).await;
    }
}

/// The API resource of aigw's kind `kind`, whose resource name is `plural`.
pub fn aigw_resource(kind: &str, plural: &str) -> kube::core::ApiResource {
    let gvk = kube::core::GroupVersionKind::gvk(aigw::registry::GROUP, "v1alpha1", kind);
    kube::core::ApiResource::from_gvk_with_plural(&gvk, plural)
}

/// Deletes namespace `name` as the namespace controller the local control plane lacks would:
/// the aigw objects of every kind in it first (their finalizers dropped: the operator that
/// would run them is stopped), then the namespace, finalized directly. Without it the objects
/// stay in etcd, and in the lists of every later cluster-wide operator.
pub async fn drop_namespace(client: &Client, name: &str) {
    for kind in aigw::registry::KINDS.iter().filter(|k| k.namespaced) {
        let resource = aigw_resource(kind.kind, kind.plural);
        let api =
            Api::<kube::core::DynamicObject>::namespaced_with(client.clone(), name, &resource);
        force_delete_all(&api, &ListParams::default()).await;
    }
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let _ = namespaces.delete(name, &Default::default()).await;
    let finalize = serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name}, "spec": {"finalizers": []}
    });
    let _ = namespaces
        .replace_subresource("finalize", name, &PostParams::default(), &finalize)
        .await;
}
