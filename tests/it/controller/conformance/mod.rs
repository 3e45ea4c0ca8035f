//! The conformance matrix: the driver's guarantees, written once and proven the same way for
//! every kind that has a remote object (provider-template's behaviour tests, in aigw's terms).
//! A kind is one [`Fixture`] (in [`kinds`]): what it is ([`Meta`]: its routes in the emulator
//! among them), how to build a minimal valid resource of it, a field to edit remotely, a spec
//! edit, an immutable field ([`Edits`]); the `conformance!` list at the bottom instantiates
//! [`run`] for it. Each kind runs every check on one harness (one namespace, emulator and
//! operator), one object per check:
//!
//! - (a) `create`: created with exactly one POST, its key recorded in the status;
//! - (b) `steady`: no remote write and no write to the object (status included) across drift
//!   passes;
//! - (c) `drift`: a remote edit is corrected with exactly one write, and recorded (a
//!   `DriftCorrected` event);
//! - (d) `pause`: `aigw.io/paused` holds a spec edit back (no write) until removed;
//! - (e) `observe`: `managementPolicy: Observe` reports the edit as `Drifted`, writes nothing;
//! - (f) `orphan`: `deletionPolicy: Orphan` leaves the remote object;
//! - (g) `immutable`: admission refuses an edit of an immutable field; where the kind can adopt
//!   a remote object, one that differs in an immutable field is refused
//!   (`Stalled/InvalidSpec`) with no write;
//! - (h) `lost_create`: a create whose answer is lost (the emulator commits it and cuts the
//!   connection) is recovered, with no second remote object;
//! - (i) `secret_change`, for a kind that sends values from a Secret: a change of the Secret
//!   reaches the remote object with exactly one PUT and no other write, and is no drift;
//! - (j) `labelled_only`, for a cluster-scoped kind that sends values from a Secret (run
//!   first): a Secret without the `aigw.io/cluster-readable` label is not read (`Stalled`,
//!   `SecretNotReadable`, naming the label) and nothing is sent; labelled, the object is made.
//!
//! Counting is by the emulator's request counters (`/_emulator/stats`), as deltas around each
//! step. Waits are on what the operator does: a condition, the remote state, the operator's own
//! `reconcile` log line for the object, the drift pass's reads.

pub mod kinds;

use crate::support;

use std::time::Duration;

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::harness::{CLUSTER_LABEL, Harness, log_mark, logs_since};

/// The drift interval of every conformance harness.
pub const DRIFT: Duration = Duration::from_secs(1);
pub const WAIT: Duration = Duration::from_secs(30);

/// What a remote object the kind can adopt looks like when it differs in an immutable field.
pub struct Conflict {
    /// The body of a POST to [`Remote::collection`] that makes it.
    pub post: Value,
    /// The spec field that adopts it ("policyId", "slug").
    pub adopt: &'static str,
    /// The field of the POST's answer that field takes ("id", "slug").
    pub answer: &'static str,
}

impl Conflict {
    /// A conflict adopted by `slug`, the POST's answer's `slug`.
    pub fn by_slug(post: Value) -> Self {
        Conflict {
            post,
            adopt: "slug",
            answer: "slug",
        }
    }

    /// A policy's conflict, adopted by `policyId`, the POST's answer's `id`.
    pub fn by_policy_id(post: Value) -> Self {
        Conflict {
            post,
            adopt: "policyId",
            answer: "id",
        }
    }
}

/// Where the remote objects of a kind are.
pub struct Remote {
    /// Where creates go: `POST {collection}`; reads start with `GET {collection}`.
    pub collection: &'static str,
    /// The parameter of the item route (`{collection}/{param}`) as the emulator counts it:
    /// "{slug}".
    pub param: &'static str,
    /// The collection of `/_emulator/state` that holds its remote objects.
    pub state: &'static str,
    /// The status field that records the remote object, and the field of the remote object
    /// (in `/_emulator/state`) it holds.
    pub key: &'static str,
    /// The field of the remote object the item route takes.
    pub path_key: &'static str,
}

impl Remote {
    /// Remote objects recorded by `key`, their item route taking their `id`.
    pub const fn new(
        collection: &'static str,
        param: &'static str,
        state: &'static str,
        key: &'static str,
    ) -> Self {
        Remote {
            collection,
            param,
            state,
            key,
            path_key: "id",
        }
    }

    /// The item route as the emulator counts it: "/ai_gw/v2/configs/{slug}".
    pub fn item(&self) -> String {
        format!("{}/{}", self.collection, self.param)
    }

    /// The item route takes the remote object's `slug`.
    pub const fn slug_path(self) -> Self {
        Remote {
            path_key: "slug",
            ..self
        }
    }
}

/// What a kind of the matrix is, and how its remote objects behave.
pub struct Meta {
    pub kind: &'static str,
    pub plural: &'static str,
    pub cluster: bool,
    /// Where its remote objects are, in the API and in the emulator.
    pub remote: Remote,
    /// The emulator fault that loses the create's answer after committing it: the connection
    /// cut (`drop_after_commit_rate`, which loses every answer, reads too), or, for a kind that
    /// reads the object it names before creating it, the write alone answered 5xx
    /// (`error_after_commit_rate`).
    pub lost_answer: &'static str,
    /// The POSTs a create whose answer was lost takes in all (1: what it made is found and
    /// kept).
    pub lost_create_posts: u64,
    /// Whether the status keeps what a drift correction replaced (`status.lastDriftCorrection`).
    pub records_drift: bool,
    /// Whether it reads Secrets of the operator's namespace: its harness then has its own
    /// secret namespace (most kinds: the defaults).
    pub secret_namespace: bool,
}

impl Meta {
    /// The behaviour most kinds have: namespaced, a lost answer is a cut connection and
    /// recovered with one POST, drift corrections recorded in the status, no Secret of the
    /// operator's namespace read. Every kind names its own `kind`, `plural` and `remote`.
    pub const DEFAULT: Meta = Meta {
        kind: "",
        plural: "",
        cluster: false,
        remote: Remote::new("", "", "", ""),
        lost_answer: "drop_after_commit_rate",
        lost_create_posts: 1,
        records_drift: true,
        secret_namespace: false,
    };
}

/// A kind's edits: each merge patch with the pointer into the remote object it changes and the
/// value it shows there once applied.
pub struct Edits {
    /// A spec edit (merge patch of `spec`).
    pub spec: (Value, &'static str, Value),
    /// A remote edit (body of a PUT to the item route).
    pub remote: (Value, &'static str, Value),
    /// A merge patch of `spec` changing a field admission keeps immutable.
    pub immutable: Value,
}

/// A change of the Secret a kind sends values from ([`Fixture::secret_change`]).
pub struct SecretChange {
    /// The Secret, and its new data.
    pub secret: (&'static str, Value),
    /// Where the remote object shows the new value, and the value.
    pub shown: (&'static str, Value),
}

/// One kind of the matrix.
pub trait Fixture {
    const META: Meta;

    /// A harness for this kind.
    async fn start(prefix: &str) -> Harness {
        if Self::META.secret_namespace {
            Harness::start_with_secret_namespace(prefix, DRIFT).await
        } else {
            Harness::start_with(prefix, DRIFT).await
        }
    }
    /// What every object of the kind needs first (Secrets, an Integration).
    async fn prepare(_h: &Harness) {}
    /// A minimal valid spec of the object `name` (its metadata name, before the cluster prefix).
    fn spec(h: &Harness, name: &str) -> Value;
    /// Its spec, remote and immutable edits.
    fn edits() -> Edits;
    /// A remote object to adopt that differs in an immutable field; `None` where the kind has
    /// no immutable field an adoption could meet.
    fn conflict(_h: &Harness, _name: &str) -> Option<Conflict> {
        None
    }
    /// A change of the Secret [`Fixture::prepare`] made that the kind sends values from;
    /// `None` for a kind that sends none.
    fn secret_change() -> Option<SecretChange> {
        None
    }
}

/// The kind's API resource.
pub fn resource<F: Fixture>() -> ApiResource {
    support::aigw_resource(F::META.kind, F::META.plural)
}

/// One kind's objects on the apiserver, and its remote objects in the emulator.
struct Kind<'h> {
    h: &'h Harness,
    api: Api<DynamicObject>,
}

impl<'h> Kind<'h> {
    fn new<F: Fixture>(h: &'h Harness) -> Self {
        let resource = resource::<F>();
        let api = match F::META.cluster {
            true => Api::all_with(h.env.client.clone(), &resource),
            false => Api::namespaced_with(h.env.client.clone(), &h.env.namespace, &resource),
        };
        Self { h, api }
    }

    /// The object's name on the apiserver: cluster-scoped names carry the test's prefix.
    fn name<F: Fixture>(&self, name: &str) -> String {
        match F::META.cluster {
            true => self.h.cluster_name(name),
            false => name.to_string(),
        }
    }

    /// The operator's key of the object in its log lines.
    fn log_key<F: Fixture>(&self, name: &str) -> String {
        let namespace = match F::META.cluster {
            true => String::new(),
            false => self.h.env.namespace.clone(),
        };
        format!("{}/{namespace}/{}", F::META.kind, self.name::<F>(name))
    }

    async fn create<F: Fixture>(&self, name: &str, spec: Value) {
        let mut metadata = json!({"name": self.name::<F>(name)});
        if F::META.cluster {
            metadata["labels"] = json!({CLUSTER_LABEL: self.h.env.namespace});
        }
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "aigw.io/v1alpha1", "kind": F::META.kind,
            "metadata": metadata, "spec": spec
        }))
        .unwrap();
        self.api
            .create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("{} {name}: create refused: {e}", F::META.kind));
    }

    async fn patch<F: Fixture>(&self, name: &str, patch: Value) -> Result<(), kube::Error> {
        let name = self.name::<F>(name);
        let patch = Patch::Merge(patch);
        self.api
            .patch(&name, &PatchParams::default(), &patch)
            .await
            .map(drop)
    }

    async fn get<F: Fixture>(&self, name: &str) -> Option<Value> {
        let object = self.api.get_opt(&self.name::<F>(name)).await.ok()??;
        Some(serde_json::to_value(object).unwrap())
    }

    async fn events<F: Fixture>(&self) -> String {
        match F::META.cluster {
            true => self.h.cluster_events_text().await,
            false => self.h.env.events_text().await,
        }
    }

    /// Waits until the object satisfies `done`; else panics with the object and its events.
    async fn wait<F: Fixture>(
        &self,
        cell: &str,
        name: &str,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        self.wait_within::<F>(WAIT, cell, name, done).await
    }

    async fn wait_within<F: Fixture>(
        &self,
        within: Duration,
        cell: &str,
        name: &str,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let found = support::wait_until(within, || async {
            let object = self.get::<F>(name).await?;
            done(&object).then_some(object)
        })
        .await;
        match found {
            Some(object) => object,
            None => panic!(
                "{} ({cell}): {name} did not get there within {within:?}\n--- object ---\n{}\n--- events ---\n{}",
                F::META.kind,
                serde_yaml::to_string(&self.get::<F>(name).await).unwrap_or_default(),
                self.events::<F>().await
            ),
        }
    }

    async fn wait_ready<F: Fixture>(&self, cell: &str, name: &str) -> Value {
        self.wait::<F>(cell, name, ready).await
    }

    /// Deletes the object and waits until it is gone (its finalizer has run).
    async fn delete_and_wait<F: Fixture>(&self, cell: &str, name: &str) {
        let full = self.name::<F>(name);
        self.api
            .delete(&full, &Default::default())
            .await
            .unwrap_or_else(|e| panic!("{} ({cell}): delete {name}: {e}", F::META.kind));
        let gone = support::wait_until(WAIT, || async {
            self.api.get_opt(&full).await.ok()?.is_none().then_some(())
        })
        .await;
        if gone.is_none() {
            panic!(
                "{} ({cell}): {name} was not deleted within {WAIT:?}\n{}\n--- events ---\n{}",
                F::META.kind,
                serde_yaml::to_string(&self.get::<F>(name).await).unwrap_or_default(),
                self.events::<F>().await
            );
        }
    }

    /// Every remote object of the kind the emulator holds.
    async fn remotes<F: Fixture>(&self) -> Vec<Value> {
        self.h.state().await[F::META.remote.state]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The remote object whose [`Remote::key`] is `key`.
    async fn remote<F: Fixture>(&self, key: &str) -> Option<Value> {
        self.remotes::<F>()
            .await
            .into_iter()
            .find(|r| r[F::META.remote.key] == key)
    }

    /// Waits for the remote object `key` to satisfy `done`.
    async fn wait_remote<F: Fixture>(&self, cell: &str, key: &str, done: impl Fn(&Value) -> bool) {
        let found = support::wait_until(WAIT, || async {
            let remote = self.remote::<F>(key).await?;
            done(&remote).then_some(())
        })
        .await;
        assert!(
            found.is_some(),
            "{} ({cell}): the remote object {key} did not get there: {:?}\n--- events ---\n{}",
            F::META.kind,
            self.remote::<F>(key).await,
            self.events::<F>().await
        );
    }

    /// Waits until the operator reconciled object `name` at least `times` times since `mark`
    /// (its `reconcile` log line), then until the kind's remote objects were read `reads` times
    /// since `stats` (drift passes, re-reads), or four drift intervals passed: what the operator
    /// did after a change has then been done.
    async fn settle<F: Fixture>(&self, name: &str, mark: usize, times: usize, stats: &Value) {
        let key = format!("object={}", self.log_key::<F>(name));
        let reconciled = || {
            logs_since(mark)
                .lines()
                .filter(|l| l.contains(": reconcile ") && l.ends_with(&key))
                .count()
        };
        support::wait_until(WAIT, || async { (reconciled() >= times).then_some(()) })
            .await
            .unwrap_or_else(|| {
                panic!(
                    "{}: the operator did not reconcile {key} {times} times in {WAIT:?}",
                    F::META.kind
                )
            });
        let before = reads::<F>(stats);
        support::wait_until(DRIFT * 4, || async {
            (reads::<F>(&self.h.stats().await) >= before + 2).then_some(())
        })
        .await;
    }

    /// The key the status records (`status.<KEY>`).
    fn key<F: Fixture>(object: &Value) -> String {
        object["status"][F::META.remote.key]
            .as_str()
            .unwrap_or_else(|| {
                panic!(
                    "{}: no status.{} in {object}",
                    F::META.kind,
                    F::META.remote.key
                )
            })
            .to_string()
    }

    /// Since the stats `before`, `endpoint` was called `expected` times (else the check `cell`
    /// fails saying `what`), and the remote object `key` is there (else it fails saying it
    /// `missing`).
    async fn counted_then_kept<F: Fixture>(
        &self,
        before: &Value,
        (endpoint, expected, what): (&str, u64, &str),
        (cell, key, missing): (&str, &str, &str),
    ) {
        let after = self.h.stats().await;
        assert_delta::<F>((before, &after), Some(endpoint), expected, (cell, what));
        assert!(
            self.remote::<F>(key).await.is_some(),
            "{} ({cell}): the remote object {key} {missing}",
            F::META.kind
        );
    }

    /// Since the stats `before`, nothing was written (else the check `cell` fails saying
    /// `written`), and the remote object `key` does not show `edited` at `pointer` (else it
    /// fails saying `applied`).
    async fn unwritten<F: Fixture>(
        &self,
        before: &Value,
        (key, pointer, edited): (&str, &str, &Value),
        (cell, written, applied): (&str, &str, &str),
    ) {
        let after = self.h.stats().await;
        assert_delta::<F>((before, &after), None, 0, (cell, written));
        let remote = self.remote::<F>(key).await.unwrap();
        assert!(
            !same(at(&remote, pointer), edited),
            "{} ({cell}): {applied}",
            F::META.kind
        );
    }

    /// The path of the remote object `key` on the item route.
    async fn path<F: Fixture>(&self, key: &str) -> String {
        let remote = self.remote::<F>(key).await.expect("the remote object");
        let segment = remote[F::META.remote.path_key]
            .as_str()
            .expect("the remote object's path key");
        format!("{}/{segment}", F::META.remote.collection)
    }
}

/// Ready=True for the object's generation.
pub(super) fn ready(object: &Value) -> bool {
    condition(object, "Ready").is_some_and(|c| {
        c["status"] == "True" && c["observedGeneration"] == object["metadata"]["generation"]
    })
}

/// Whether the object `name` of `api` (any kind, read as JSON) is [`ready`] within `within`.
pub(super) async fn ready_within<K>(api: &Api<K>, name: &str, within: Duration) -> bool
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    support::wait_until(within, || async {
        let object = serde_json::to_value(api.get_opt(name).await.ok()??).unwrap();
        ready(&object).then_some(())
    })
    .await
    .is_some()
}

/// The condition `type_` of the object (as JSON).
pub(super) fn condition<'a>(object: &'a Value, type_: &str) -> Option<&'a Value> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

fn condition_true(object: &Value, type_: &str) -> bool {
    condition(object, type_).is_some_and(|c| c["status"] == "True")
}

/// Requests counted for `"METHOD /template"`, all statuses, in a stats document.
fn count(stats: &Value, endpoint: &str) -> u64 {
    support::harness::count_in(stats, endpoint)
}

/// Every remote write (every request but GETs) in a stats document.
fn writes(stats: &Value) -> u64 {
    let endpoints = stats["requests"].as_object().cloned().unwrap_or_default();
    endpoints
        .keys()
        .filter(|k| !k.starts_with("GET "))
        .map(|k| count(stats, k))
        .sum()
}

/// Asserts `expected` requests to `endpoint` ("METHOD /template"; every remote write for
/// `None`) between the stats documents `before` and `after`; the failure says the kind, the
/// check `cell`, `what` went wrong and the stats after.
fn assert_delta<F: Fixture>(
    (before, after): (&Value, &Value),
    endpoint: Option<&str>,
    expected: u64,
    (cell, what): (&str, &str),
) {
    let counted = |stats: &Value| endpoint.map_or_else(|| writes(stats), |e| count(stats, e));
    assert_eq!(
        counted(after) - counted(before),
        expected,
        "{} ({cell}): {what}: {after}",
        F::META.kind
    );
}

/// The reads of the kind's remote objects (its collection and items) in a stats document.
fn reads<F: Fixture>(stats: &Value) -> u64 {
    let endpoints = stats["requests"].as_object().cloned().unwrap_or_default();
    let prefix = format!("GET {}", F::META.remote.collection);
    endpoints
        .keys()
        .filter(|k| k.starts_with(&prefix))
        .map(|k| count(stats, k))
        .sum()
}

/// The value at `pointer` of the remote object.
fn at<'a>(remote: &'a Value, pointer: &str) -> &'a Value {
    remote.pointer(pointer).unwrap_or(&Value::Null)
}

/// Equal values, numbers by value (`5` is `5.0`).
fn same(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(a), Some(b)) => a == b,
        _ => a == b,
    }
}

/// Every check, in order, on one harness.
pub async fn run<F: Fixture>(prefix: &str) {
    let h = F::start(&prefix.replace('_', "-")).await;
    let kind = Kind::new::<F>(&h);
    labelled_only::<F>(&kind).await;
    F::prepare(&h).await;
    let key = create::<F>(&kind).await;
    steady::<F>(&kind, &key).await;
    drift::<F>(&kind, &key).await;
    secret_change::<F>(&kind, &key).await;
    pause::<F>(&kind).await;
    observe::<F>(&kind).await;
    orphan::<F>(&kind).await;
    immutable::<F>(&kind).await;
    lost_create::<F>(&kind).await;
    drop(kind);
    h.stop().await;
}

/// Creates object `name` with the kind's spec plus `extra` and waits until it is Ready; its
/// recorded key.
async fn ready_object<F: Fixture>(kind: &Kind<'_>, cell: &str, name: &str, extra: Value) -> String {
    let mut spec = F::spec(kind.h, name);
    merge(&mut spec, extra);
    kind.create::<F>(name, spec).await;
    let object = kind.wait_ready::<F>(cell, name).await;
    Kind::key::<F>(&object)
}

/// JSON merge patch `patch` onto `target`.
fn merge(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(target), Value::Object(patch)) => {
            for (k, v) in patch {
                match v {
                    Value::Null => {
                        target.remove(&k);
                    }
                    v => merge(target.entry(k).or_insert(Value::Null), v),
                }
            }
        }
        (target, patch) => *target = patch,
    }
}

/// (a) One POST, the key recorded, the remote object there.
async fn create<F: Fixture>(kind: &Kind<'_>) -> String {
    let before = kind.h.stats().await;
    let key = ready_object::<F>(kind, "create", "cf-create", json!({})).await;
    let post = format!("POST {}", F::META.remote.collection);
    let made = (post.as_str(), 1, "exactly one POST");
    kind.counted_then_kept::<F>(&before, made, ("create", &key, "the status records"))
        .await;
    let object = kind.get::<F>("cf-create").await.unwrap();
    field_managers::<F>(&object);
    key
}

/// What aigw wrote on `object` is recorded under the kind's field manager (`aigw/<kind>`): its
/// status apply, and the update that put its finalizer and create intent on the object (without a
/// named manager the apiserver records such a write as `unknown`).
fn field_managers<F: Fixture>(object: &Value) {
    let manager = format!("aigw/{}", F::META.kind.to_lowercase());
    let entries = object["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let owner = |owns: &dyn Fn(&Value) -> bool| {
        entries
            .iter()
            .find(|entry| owns(&entry["fieldsV1"]))
            .map(|entry| entry["manager"].as_str().unwrap_or_default().to_string())
    };
    let status = owner(&|fields| fields["f:status"].is_object());
    let finalizers = owner(&|fields| fields["f:metadata"]["f:finalizers"].is_object());
    assert_eq!(
        (status.as_deref(), finalizers.as_deref()),
        (Some(manager.as_str()), Some(manager.as_str())),
        "{} (create): the managers of the status and of the finalizer: {entries:?}",
        F::META.kind
    );
}

/// (b) No remote write, and no write to the object, across drift passes.
async fn steady<F: Fixture>(kind: &Kind<'_>, key: &str) {
    // Steady from the first drift pass after the create on.
    kind.settle::<F>("cf-create", log_mark(), 0, &kind.h.stats().await)
        .await;
    let object = kind.get::<F>("cf-create").await.unwrap();
    let version = object["metadata"]["resourceVersion"].clone();
    let before = kind.h.stats().await;
    let mark = log_mark();
    // Two reads of the kind: the drift passes ran (a listed kind's steady object is not even
    // reconciled again).
    kind.settle::<F>("cf-create", mark, 0, &before).await;
    let after = kind.h.stats().await;
    assert_delta::<F>(
        (&before, &after),
        None,
        0,
        ("steady", "remote writes at steady state"),
    );
    let now = kind.get::<F>("cf-create").await.unwrap();
    assert_eq!(
        now["metadata"]["resourceVersion"],
        version,
        "{} (steady): the object (or its status) was written at steady state: {now}",
        F::META.kind
    );
    assert!(kind.remote::<F>(key).await.is_some());
}

/// (c) A remote edit corrected with exactly one write, recorded as `DriftCorrected`.
async fn drift<F: Fixture>(kind: &Kind<'_>, key: &str) {
    let (body, pointer, edited) = F::edits().remote;
    let original = at(&kind.remote::<F>(key).await.unwrap(), pointer).clone();
    assert!(
        !same(&original, &edited),
        "{}: the remote edit changes nothing",
        F::META.kind
    );
    let path = kind.path::<F>(key).await;
    let before = kind.h.stats().await;
    kind.h.put(&path, body).await;
    kind.wait_remote::<F>("drift", key, |r| same(at(r, pointer), &original))
        .await;
    // The event follows the write (after the status write).
    let name = kind.name::<F>("cf-create");
    let recorded = support::wait_until(WAIT, || async {
        let events = kind.events::<F>().await;
        events
            .lines()
            .any(|l| l.contains(&name) && l.contains("DriftCorrected"))
            .then_some(())
    })
    .await;
    assert!(
        recorded.is_some(),
        "{} (drift): no DriftCorrected event:\n{}",
        F::META.kind,
        kind.events::<F>().await
    );
    if F::META.records_drift {
        let object = kind
            .wait::<F>("drift", "cf-create", |o| {
                o["status"]["lastDriftCorrection"]["changes"]
                    .as_array()
                    .is_some_and(|c| !c.is_empty())
            })
            .await;
        // The record says the field in the spec's terms (`creditLimit` for `credit_limit`).
        let squash = |s: &str| s.to_lowercase().replace('_', "");
        let record = object["status"]["lastDriftCorrection"].to_string();
        assert!(
            squash(&record).contains(&squash(pointer.rsplit('/').next().unwrap_or_default())),
            "{} (drift): the record does not name the edited field: {record}",
            F::META.kind
        );
    }
    assert!(
        kind.h.ctx.metrics.drift_corrections(F::META.kind) >= 1,
        "{} (drift): the correction is not counted",
        F::META.kind
    );
    let after = kind.h.stats().await;
    let put = format!("PUT {}", F::META.remote.item());
    // The edit itself is one PUT and one write.
    assert_delta::<F>(
        (&before, &after),
        Some(&put),
        2,
        ("drift", "one PUT corrects the edit"),
    );
    assert_delta::<F>(
        (&before, &after),
        None,
        2,
        ("drift", "one write corrects the edit"),
    );
}

/// (j) A cluster-scoped kind reads no Secret of the operator's namespace without the
/// `aigw.io/cluster-readable` label (that namespace also holds the Connections' credentials):
/// its object stalls naming the label and sends nothing; once [`Fixture::prepare`] writes the
/// Secret labelled, it is made. The Secret first holds [`Fixture::secret_change`]'s data, which
/// `prepare` replaces. The object is deleted after.
async fn labelled_only<F: Fixture>(kind: &Kind<'_>) {
    let (true, Some(SecretChange { secret, .. })) = (F::META.cluster, F::secret_change()) else {
        return;
    };
    let (cell, name) = ("labelled_only", "cf-labelled");
    let before = kind.h.stats().await;
    kind.h.put_secret(secret.0, secret.1, false).await;
    kind.create::<F>(name, F::spec(kind.h, name)).await;
    let stalled = kind
        .wait::<F>(cell, name, |o| {
            condition(o, "Stalled")
                .is_some_and(|c| c["status"] == "True" && c["reason"] == "SecretNotReadable")
        })
        .await;
    let message = condition(&stalled, "Stalled").unwrap()["message"].to_string();
    assert!(
        message.contains("aigw.io/cluster-readable"),
        "{} ({cell}): the refusal does not name the label: {message}",
        F::META.kind
    );
    let after = kind.h.stats().await;
    assert_delta::<F>((&before, &after), None, 0, (cell, "sent without the label"));
    F::prepare(kind.h).await;
    kind.wait_ready::<F>(cell, name).await;
    // Gone again, so that the checks after it count the writes of their own objects alone.
    kind.delete_and_wait::<F>(cell, name).await;
}

/// (i) A change of the Secret the kind sends values from reaches the remote object with
/// exactly one PUT and no other write, and counts as no drift correction.
async fn secret_change<F: Fixture>(kind: &Kind<'_>, key: &str) {
    let Some(SecretChange { secret, shown }) = F::secret_change() else {
        return;
    };
    let (pointer, value) = shown;
    let corrections = kind.h.ctx.metrics.drift_corrections(F::META.kind);
    let before = kind.h.stats().await;
    let mark = log_mark();
    kind.h.put_secret(secret.0, secret.1, true).await;
    kind.wait_remote::<F>("secret_change", key, |r| same(at(r, pointer), &value))
        .await;
    kind.settle::<F>("cf-create", mark, 1, &before).await;
    let after = kind.h.stats().await;
    let put = format!("PUT {}", F::META.remote.item());
    let cell = "secret_change";
    assert_delta::<F>((&before, &after), Some(&put), 1, (cell, "one PUT"));
    assert_delta::<F>((&before, &after), None, 1, (cell, "one write"));
    assert_eq!(
        kind.h.ctx.metrics.drift_corrections(F::META.kind),
        corrections,
        "{} ({cell}): a Secret change was counted as a drift correction",
        F::META.kind
    );
}

/// (d) A paused object makes no write for a spec edit until the annotation goes; then the edit
/// is applied.
async fn pause<F: Fixture>(kind: &Kind<'_>) {
    let name = "cf-pause";
    let key = ready_object::<F>(kind, "pause", name, json!({})).await;
    let paused = json!({"metadata": {"annotations": {"aigw.io/paused": "true"}}});
    kind.patch::<F>(name, paused).await.unwrap();
    kind.wait::<F>("pause", name, |o| condition_true(o, "Paused"))
        .await;
    let (edit, pointer, edited) = F::edits().spec;
    let before = kind.h.stats().await;
    let mark = log_mark();
    kind.patch::<F>(name, json!({"spec": edit})).await.unwrap();
    kind.settle::<F>(name, mark, 1, &before).await;
    let edit = (key.as_str(), pointer, &edited);
    kind.unwritten::<F>(
        &before,
        edit,
        ("pause", "a paused object was written", "applied"),
    )
    .await;

    let resumed = json!({"metadata": {"annotations": {"aigw.io/paused": null}}});
    kind.patch::<F>(name, resumed).await.unwrap();
    kind.wait_remote::<F>("pause", &key, |r| same(at(r, pointer), &edited))
        .await;
    kind.wait::<F>("pause", name, |o| ready(o) && !condition_true(o, "Paused"))
        .await;
}

/// (e) Observe reports a spec edit as `Drifted` and writes nothing.
async fn observe<F: Fixture>(kind: &Kind<'_>) {
    let name = "cf-observe";
    let key = ready_object::<F>(kind, "observe", name, json!({})).await;
    let (mut edit, pointer, edited) = F::edits().spec;
    edit["managementPolicy"] = json!("Observe");
    let before = kind.h.stats().await;
    kind.patch::<F>(name, json!({"spec": edit})).await.unwrap();
    kind.wait::<F>("observe", name, |o| condition_true(o, "Drifted"))
        .await;
    let mark = log_mark();
    kind.settle::<F>(name, mark, 1, &kind.h.stats().await).await;
    let edit = (key.as_str(), pointer, &edited);
    let cell = (
        "observe",
        "an observed object was written",
        "the edit was applied",
    );
    kind.unwritten::<F>(&before, edit, cell).await;
}

/// (f) `deletionPolicy: Orphan` leaves the remote object, with no call to remove it.
async fn orphan<F: Fixture>(kind: &Kind<'_>) {
    let name = "cf-orphan";
    let key = ready_object::<F>(kind, "orphan", name, json!({"deletionPolicy": "Orphan"})).await;
    let before = kind.h.stats().await;
    kind.delete_and_wait::<F>("orphan", name).await;
    let delete = format!("DELETE {}", F::META.remote.item());
    let removed = (delete.as_str(), 0, "the remote object was removed");
    kind.counted_then_kept::<F>(&before, removed, ("orphan", &key, "is gone"))
        .await;
}

/// (g) Admission refuses an edit of an immutable field; a remote object to adopt that differs
/// in one is refused (`Stalled/InvalidSpec`) with no write.
async fn immutable<F: Fixture>(kind: &Kind<'_>) {
    let refused = kind
        .patch::<F>("cf-create", json!({"spec": F::edits().immutable}))
        .await
        .expect_err("an immutable field was changed");
    assert!(
        refused.to_string().contains("immutable"),
        "{} (immutable): {refused}",
        F::META.kind
    );
    let Some(conflict) = F::conflict(kind.h, "cf-conflict") else {
        return;
    };
    let made = kind.h.post(F::META.remote.collection, conflict.post).await;
    let remote_key = made[conflict.answer].as_str().expect("the answer's key");
    let mut spec = F::spec(kind.h, "cf-conflict");
    merge(
        &mut spec,
        json!({conflict.adopt: remote_key, "deletionPolicy": "Orphan"}),
    );
    let before = kind.h.stats().await;
    kind.create::<F>("cf-conflict", spec).await;
    let stalled = kind
        .wait::<F>("immutable", "cf-conflict", |o| {
            condition(o, "Stalled")
                .is_some_and(|c| c["status"] == "True" && c["reason"] == "InvalidSpec")
        })
        .await;
    let after = kind.h.stats().await;
    assert_eq!(
        writes(&after) - writes(&before),
        0,
        "{} (immutable): the refused object was written: {after}\n{stalled}",
        F::META.kind
    );
    kind.delete_and_wait::<F>("immutable", "cf-conflict").await;
}

/// (h) A create whose answer is lost is recovered: one POST, one remote object, recorded.
async fn lost_create<F: Fixture>(kind: &Kind<'_>) {
    let name = "cf-lost";
    let count_before = kind.remotes::<F>().await.len();
    let before = kind.h.stats().await;
    kind.h.faults(json!({F::META.lost_answer: 1.0})).await;
    kind.create::<F>(name, F::spec(kind.h, name)).await;
    let landed = support::wait_until(WAIT, || async {
        (kind.remotes::<F>().await.len() > count_before).then_some(())
    })
    .await;
    // The intent was recorded before the POST went (the annotation, with the finalizer).
    let intended = kind.get::<F>(name).await.unwrap_or_default();
    kind.h.faults(json!({})).await;
    assert!(
        intended["metadata"]["annotations"]["aigw.io/create-intent"].is_string(),
        "{} (lost_create): no create intent recorded before the POST: {intended}",
        F::META.kind
    );
    assert!(
        landed.is_some(),
        "{} (lost_create): the create never reached the emulator: {}",
        F::META.kind,
        kind.h.stats().await
    );
    // The lookup waits until a list taken a settle time after the lost request proves it.
    let object = kind
        .wait_within::<F>(WAIT * 3, "lost_create", name, ready)
        .await;
    let key = Kind::key::<F>(&object);
    let after = kind.h.stats().await;
    let post = format!("POST {}", F::META.remote.collection);
    assert_delta::<F>(
        (&before, &after),
        Some(&post),
        F::META.lost_create_posts,
        ("lost_create", "created again"),
    );
    let remotes = kind.remotes::<F>().await;
    assert_eq!(
        remotes.len(),
        count_before + 1,
        "{} (lost_create): a duplicate: {remotes:?}",
        F::META.kind
    );
    assert!(
        remotes
            .iter()
            .any(|r| r[F::META.remote.key] == key.as_str()),
        "{} (lost_create): the status records {key}, not the object made",
        F::META.kind
    );
    assert!(
        object["status"]["pendingCreate"].is_null() && object["status"]["createAttempt"].is_null(),
        "{} (lost_create): the intent stays: {object}",
        F::META.kind
    );
}

/// One `#[tokio::test]` per kind, `kind_name => Fixture`, each calling the invoking module's
/// `run::<Fixture>` with the prefix `"prefix-kind_name"`.
macro_rules! per_kind {
    ($prefix:literal: $($test:ident => $fixture:ty),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $test() {
                run::<$fixture>(concat!($prefix, stringify!($test))).await;
            }
        )*
    };
}
pub(crate) use per_kind;

per_kind! {
    "cf-":
    config => kinds::ConfigKind,
    rate_limits_policy => kinds::RateLimitsPolicyKind,
    usage_limits_policy => kinds::UsageLimitsPolicyKind,
    guardrail => kinds::GuardrailKind,
    cluster_guardrail => kinds::ClusterGuardrailKind,
    integration => kinds::IntegrationKind,
    secret_reference => kinds::SecretReferenceKind,
    mcp_integration => kinds::McpIntegrationKind,
    mcp_server => kinds::McpServerKind,
    provider => kinds::ProviderKind,
    deployment => kinds::DeploymentKind,
    api_key => kinds::ApiKeyKind,
    workspace => kinds::WorkspaceKind,
}
