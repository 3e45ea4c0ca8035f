//! What the tests of cluster-scoped kinds share: the Secrets of the operator's namespace they
//! read, creating and waiting on this test's cluster-scoped objects, and the emulator's record
//! of a remote object.

use std::fmt::Debug;
use std::time::Duration;

use k8s_openapi::ClusterResourceScope;
use kube::api::{Api, PostParams};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::harness::{Harness, TOKEN};
use super::objects::Conditions;

/// A cluster-scoped kind of aigw.
pub trait ClusterKind:
    kube::Resource<Scope = ClusterResourceScope, DynamicType = ()>
    + Clone
    + Debug
    + DeserializeOwned
    + Serialize
{
}

impl<K> ClusterKind for K where
    K: kube::Resource<Scope = ClusterResourceScope, DynamicType = ()>
        + Clone
        + Debug
        + DeserializeOwned
        + Serialize
{
}

impl Harness {
    /// [`TestEnv::wait_for`](super::TestEnv::wait_for) in the test's namespace.
    pub async fn wait_for<K>(&self, name: &str, timeout: Duration, done: impl Fn(&K) -> bool) -> K
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + DeserializeOwned
            + Serialize
            + Debug,
    {
        self.env.wait_for(name, timeout, done).await
    }

    /// [`TestEnv::condition_message`](super::TestEnv::condition_message) in the test's namespace.
    pub async fn condition_message<K>(
        &self,
        name: &str,
        timeout: Duration,
        reason: (&str, &str),
    ) -> String
    where
        K: super::NamespacedKind + Conditions,
    {
        self.env.condition_message::<K>(name, timeout, reason).await
    }

    /// Applies the Secret `name` of the operator's namespace (the test namespace) with
    /// `string_data`, labelled for cluster-scoped readers when `readable`.
    pub async fn put_secret(&self, name: &str, string_data: Value, readable: bool) {
        let labels = match readable {
            true => json!({"aigw.io/cluster-readable": "true"}),
            false => json!({}),
        };
        self.env.put_secret(name, labels, string_data).await;
    }

    /// The API of the cluster-scoped kind `K`.
    pub fn cluster_api<K: ClusterKind>(&self) -> Api<K> {
        Api::all(self.env.client.clone())
    }

    /// Creates this test's cluster-scoped object `name` of kind `K` with `spec`.
    pub async fn create_cluster<K: ClusterKind>(&self, name: &str, spec: Value) -> K {
        let object: K = self.cluster_object(&K::kind(&()), name, spec);
        self.cluster_api::<K>()
            .create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("failed to create {name}: {e}"))
    }

    /// Deletes this test's cluster-scoped object `name` of kind `K` (its finalizers may keep it
    /// a while).
    pub async fn delete_cluster<K: ClusterKind>(&self, name: &str) {
        self.cluster_api::<K>()
            .delete(&self.cluster_name(name), &Default::default())
            .await
            .unwrap_or_else(|e| panic!("failed to delete {name}: {e}"));
    }

    /// This test's cluster-scoped object `name` once `done` holds for it, within `within`;
    /// otherwise a panic with its status, the events of the test's cluster-scoped objects and
    /// the emulator's stats.
    pub async fn wait_cluster<K: ClusterKind>(
        &self,
        name: &str,
        within: Duration,
        done: impl Fn(&K) -> bool,
    ) -> K {
        let api = self.cluster_api::<K>();
        let name = self.cluster_name(name);
        let found = super::wait_until(within, || async {
            let object = api.get_opt(&name).await.ok()??;
            done(&object).then_some(object)
        })
        .await;
        match found {
            Some(object) => object,
            None => {
                let object = api.get_opt(&name).await.ok().flatten();
                let status = object.map(|o| serde_json::to_value(o).unwrap()["status"].take());
                panic!(
                    "{} {name} did not get there: {status:?}\n--- events ---\n{}\n--- stats ---\n{}",
                    K::kind(&()),
                    self.cluster_events_text().await,
                    self.stats().await
                )
            }
        }
    }

    /// [`TestEnv::condition_message`](super::TestEnv::condition_message) of this test's
    /// cluster-scoped object `name`: once its condition `type_` says `reason`, that message.
    pub async fn cluster_condition_message<K: ClusterKind + Conditions>(
        &self,
        name: &str,
        within: Duration,
        (type_, reason): (&str, &str),
    ) -> String {
        let object: K = self
            .wait_cluster(name, within, |o: &K| o.says((type_, reason)))
            .await;
        object.condition(type_).unwrap().2
    }

    /// The `spec` `aigw export` wrote for the remote object `slug`, created as `name`: it keeps
    /// the remote object (Orphan), adopts it (Ready, with its slug) and writes nothing.
    pub async fn adopts_export<K: ClusterKind + Conditions>(
        &self,
        name: &str,
        spec: Value,
        slug: &str,
    ) {
        assert_eq!(spec["slug"], slug);
        assert_eq!(spec["deletionPolicy"], "Orphan");
        let before = self.remote_writes().await;
        self.create_cluster::<K>(name, spec).await;
        let ready: K = self
            .wait_cluster(name, Duration::from_secs(40), |o: &K| o.ready())
            .await;
        let status = serde_json::to_value(&ready).unwrap()["status"].take();
        assert_eq!(status["slug"], slug);
        self.assert_no_write_since(before, "adopting the export")
            .await;
    }

    /// Deletes this test's cluster-scoped `name` while the API says something uses it: the object
    /// waits (Ready=False StillReferenced) with a message naming `holder`; the object as it
    /// waits, and that message.
    pub async fn delete_waits_for<K: ClusterKind + Conditions>(
        &self,
        name: &str,
        holder: &str,
    ) -> (K, String) {
        self.cluster_api::<K>()
            .delete(&self.cluster_name(name), &Default::default())
            .await
            .unwrap();
        let held: K = self
            .wait_cluster(name, Duration::from_secs(40), |o: &K| {
                o.not_ready_with("StillReferenced")
            })
            .await;
        let (_, _, message) = held.condition("Ready").unwrap();
        assert!(message.contains(holder), "{message}");
        (held, message)
    }

    /// Once `release` lets go of this test's cluster-scoped `name` (held by a user in the API),
    /// its delete goes through: the object and the record `slug` of the emulator's `collection`
    /// are gone, and an event told of the wait.
    pub async fn released_then_gone<K: ClusterKind>(
        &self,
        name: &str,
        (collection, slug): (&str, &str),
        release: impl std::future::Future,
    ) {
        release.await;
        self.wait_cluster_gone::<K>(name, Duration::from_secs(60))
            .await;
        let record = self.remote_record(collection, "slug", slug).await;
        assert!(record.is_null(), "deleted remotely: {record}");
        let events = self.all_events_text().await;
        assert!(events.contains("StillReferenced"), "{events}");
    }

    /// Waits until this test's cluster-scoped object `name` is gone, within `within`.
    pub async fn wait_cluster_gone<K: ClusterKind>(&self, name: &str, within: Duration) {
        let api = self.cluster_api::<K>();
        let name = self.cluster_name(name);
        assert!(
            super::gone_within(&api, &name, within).await,
            "{} {name} was not deleted\n{}",
            K::kind(&()),
            self.cluster_events_text().await
        );
    }

    /// Edits a remote object as the console would (`PUT path` with `body`) and waits, within
    /// `within`, until `corrected` holds; 3 s later, `endpoint` ("METHOD /template") has been
    /// called exactly once since the edit: the one correction.
    pub async fn console_edit_corrected_once<F, Fut>(
        &self,
        path: &str,
        body: Value,
        within: Duration,
        endpoint: &str,
        mut corrected: F,
    ) where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        self.put(path, body).await;
        self.reset_stats().await;
        super::wait_until(within, || {
            let done = corrected();
            async move { done.await.then_some(()) }
        })
        .await
        .unwrap_or_else(|| panic!("the console edit of {path} was not corrected"));
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(
            self.count(endpoint).await,
            1,
            "one {endpoint} corrects the edit of {path}"
        );
    }

    /// Over `quiet` from now, the emulator sees no write.
    pub async fn assert_no_write_over(&self, quiet: Duration) {
        self.reset_stats().await;
        tokio::time::sleep(quiet).await;
        let writes = self.remote_writes().await;
        assert_eq!(
            writes,
            0,
            "no write at steady state: {}",
            self.stats().await
        );
    }

    /// 3 s from now, the emulator has seen no write since it had seen `before`.
    pub async fn assert_no_write_since(&self, before: u64, what: &str) {
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(
            self.remote_writes().await,
            before,
            "{what} wrote: {}",
            self.stats().await
        );
    }

    /// None of `values` (Secret values) is in `statuses`, the test's events, the operator's log,
    /// its metrics or `cli` (the CLI's output).
    pub async fn assert_hidden(&self, values: &[&str], statuses: &str, cli: &str) {
        let events = self.all_events_text().await;
        let logs = super::harness::captured_logs();
        let metrics = self.ctx.metrics.encode();
        let places = [
            ("a status", statuses),
            ("an event", &events),
            ("the operator's log", &logs),
            ("the metrics", &metrics),
            ("the CLI output", cli),
        ];
        for value in values {
            for (place, text) in places {
                assert!(!text.contains(value), "a secret in {place}");
            }
        }
    }

    /// A Workspace resource `name`, created by aigw; its recorded UUID once Ready.
    pub async fn ready_workspace(&self, name: &str) -> String {
        self.create_cluster::<aigw::resources::Workspace>(name, json!({"name": name}))
            .await;
        let ready: aigw::resources::Workspace = self
            .wait_cluster(
                name,
                Duration::from_secs(40),
                |w: &aigw::resources::Workspace| {
                    w.ready() && w.status.as_ref().is_some_and(|s| s.id.is_some())
                },
            )
            .await;
        ready.status.and_then(|s| s.id).unwrap()
    }

    /// Seeds the deployment `name` of `type_` in the emulator, as if made outside aigw; its id.
    pub async fn seed_deployment(&self, name: &str, type_: &str) -> String {
        let seed = json!({"deployments": [{"name": name, "type": type_}]});
        let seeded = self.post("/_emulator/seed", seed).await;
        seeded["deployments"][0]["id"].as_str().unwrap().to_string()
    }

    /// Seeds the workspace `id` (name `name`, slug `slug`) in the emulator, as if made outside
    /// aigw.
    pub async fn seed_workspace(&self, id: &str, name: &str, slug: &str) {
        let seed = json!({"workspaces": [{"id": id, "name": name, "slug": slug}]});
        self.post("/_emulator/seed", seed).await;
    }

    /// The emulator's deployment `id`, through the management API.
    pub async fn remote_deployment(&self, id: &str) -> Value {
        let path = format!("/ai_gw/admin/v2/deployments/{id}");
        self.get(&path).await
    }

    /// Every event of the test: of its cluster-scoped objects, then of its namespace.
    pub async fn all_events_text(&self) -> String {
        format!(
            "{}\n{}",
            self.cluster_events_text().await,
            self.env.events_text().await
        )
    }

    /// [`Harness::remote_record`], which must be there.
    pub async fn remote_record_present(&self, collection: &str, field: &str, value: &str) -> Value {
        let record = self.remote_record(collection, field, value).await;
        assert!(
            !record.is_null(),
            "no {collection} record with {field} {value}"
        );
        record
    }

    /// `aigw plan -f` of `manifest` (written to a file named `file_name`) against the emulator
    /// and the cluster; its exit code and what it printed.
    pub async fn plan(&self, file_name: &str, manifest: &str) -> (Option<i32>, String) {
        let dir = tempfile::tempdir().unwrap();
        let (file, token) = (dir.path().join(file_name), dir.path().join("token"));
        std::fs::write(&file, manifest).unwrap();
        std::fs::write(&token, TOKEN).unwrap();
        let mut command = super::cli::command();
        command
            .arg("plan")
            .arg("-f")
            .arg(&file)
            .args(["--management-url", &self.emulator.management_url()])
            .arg("--token-file")
            .arg(&token)
            .arg("--kubeconfig")
            .arg(super::kubeconfig_path());
        super::cli::run(command).await
    }

    /// The emulator's record in its state `collection` whose `field` is `value`, secrets in
    /// clear; `Null` when there is none.
    pub async fn remote_record(&self, collection: &str, field: &str, value: &str) -> Value {
        self.state().await[collection]
            .as_array()
            .and_then(|all| all.iter().find(|r| r[field] == value).cloned())
            .unwrap_or(Value::Null)
    }

    /// Every record of the emulator's state `collection` whose `field` is `value`, secrets in
    /// clear.
    pub async fn remote_records(&self, collection: &str, field: &str, value: &str) -> Vec<Value> {
        let state = self.state().await;
        state[collection]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| r[field] == value)
            .cloned()
            .collect()
    }

    /// Runs the built `aigw api …` against the emulator; its stdout and stderr (it must
    /// succeed).
    pub async fn aigw_api(&self, args: &[&str]) -> String {
        let output = super::cli::aigw_api(&self.emulator.management_url(), TOKEN, args).await;
        assert!(output.status.success(), "{args:?}: {output:?}");
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    }
}
