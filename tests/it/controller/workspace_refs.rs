//! `spec.workspaceRef` on every namespaced kind that has it, written once over the conformance
//! fixtures ([`super::conformance::kinds`]): each kind's minimal spec, with its `workspaceId`
//! replaced by a Workspace resource. For each kind, on one harness whose Connection grants the
//! namespace two Workspace resources (`team`, `later`) and not a third (`other`):
//!
//! 1. `resolved`: the object is created with one POST, in the workspace the Workspace recorded
//!    (`status.id`), as the emulator holds it;
//! 2. `refused`: a Workspace not granted is refused (`Stalled/WorkspaceNotAllowed`), the
//!    condition naming the resource and not the workspace it stands for, with no write;
//! 3. `waits`: a Workspace not created yet, then one whose create is refused (the IAM bind of
//!    its three-call flow answered 403: it recorded its id, it is not Ready), is waited for
//!    (`Stalled/WorkspaceNotReady`, no write); once it is Ready the object is created in it with
//!    one POST;
//! 4. `admission`: `workspaceId` and `workspaceRef` both set are refused at admission naming
//!    `spec.workspaceRef`; where exactly one is required (Provider, McpServer, Guardrail), neither is
//!    refused too, and elsewhere neither is admitted (the API's default workspace).

use crate::support;

use std::time::Duration;

use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};
use support::endpoints::SCOPE_PUT;
use support::harness::{Harness, count_in};

use super::conformance::kinds::{
    ApiKeyKind, ConfigKind, GuardrailKind, McpServerKind, ProviderKind, RateLimitsPolicyKind,
    UsageLimitsPolicyKind,
};
use super::conformance::{Fixture, condition, ready, ready_within};

const WAIT: Duration = Duration::from_secs(40);
/// A kind of the matrix, with what its create needs of a workspace beyond the grant.
trait ByRef: Fixture {
    /// Whether exactly one of `workspaceId` and `workspaceRef` is required.
    const EXACTLY_ONE: bool = false;
    /// Lets what the kind's create depends on into workspace `id` (an Integration's or
    /// McpIntegration's workspace access), Ready.
    async fn open(_h: &Harness, _id: &str) {}
}

impl ByRef for ConfigKind {}
impl ByRef for RateLimitsPolicyKind {}
impl ByRef for UsageLimitsPolicyKind {}
impl ByRef for GuardrailKind {
    /// The API creates a workspace guardrail only in a workspace.
    const EXACTLY_ONE: bool = true;
}
impl ByRef for ApiKeyKind {}

impl ByRef for ProviderKind {
    const EXACTLY_ONE: bool = true;
    /// The Integration the provider binds is enabled for the workspace.
    async fn open(h: &Harness, id: &str) {
        grant_access::<aigw::resources::Integration>(h, "cf-int", json!({"id": id})).await;
    }
}

impl ByRef for McpServerKind {
    const EXACTLY_ONE: bool = true;
    /// The McpIntegration the server instantiates is enabled for the workspace.
    async fn open(h: &Harness, id: &str) {
        let entry = json!({"workspace": id});
        grant_access::<aigw::resources::McpIntegration>(h, "cf-mcpi", entry).await;
    }
}

/// Adds `entry` to `spec.workspaces` of this test's cluster-scoped `K` `name` and waits until
/// it is Ready for that spec.
async fn grant_access<K: kube::Resource<DynamicType = ()>>(h: &Harness, name: &str, entry: Value) {
    let resource = ApiResource::erase::<K>(&());
    let api = &Api::<DynamicObject>::all_with(h.env.client.clone(), &resource);
    let name = &h.cluster_name(name);
    let object = api.get(name).await.unwrap();
    let mut workspaces = object.data["spec"]["workspaces"].clone();
    workspaces.as_array_mut().unwrap().push(entry);
    let patch = json!({"spec": {"workspaces": workspaces}});
    support::merge_patch(api, name, &patch).await;
    assert!(
        ready_within(api, name, WAIT).await,
        "{name} never became Ready with {patch}"
    );
}

/// Stalled=True with `reason`: its message.
fn stalled_with(object: &Value, reason: &str) -> Option<String> {
    let c = condition(object, "Stalled")?;
    (c["status"] == "True" && c["reason"] == reason).then(|| c["message"].to_string())
}

/// One kind's objects, and the test's Workspaces.
struct Matrix<'h> {
    h: &'h Harness,
    api: Api<DynamicObject>,
    workspaces: Api<DynamicObject>,
}

impl<'h> Matrix<'h> {
    fn new<F: ByRef>(h: &'h Harness) -> Self {
        let resource = super::conformance::resource::<F>();
        let workspace = ApiResource::erase::<aigw::resources::Workspace>(&());
        Self {
            h,
            api: Api::namespaced_with(h.env.client.clone(), &h.env.namespace, &resource),
            workspaces: Api::all_with(h.env.client.clone(), &workspace),
        }
    }

    /// The kind's minimal spec naming its workspace by resource: Workspace `workspace` of
    /// this test (`None`: neither `workspaceId` nor `workspaceRef`).
    fn spec<F: ByRef>(&self, name: &str, workspace: Option<&str>) -> Value {
        let mut spec = F::spec(self.h, name);
        spec.as_object_mut().unwrap().remove("workspaceId");
        if let Some(workspace) = workspace {
            spec["workspaceRef"] = json!({"name": self.h.cluster_name(workspace)});
        }
        spec
    }

    fn object<F: ByRef>(name: &str, spec: Value) -> DynamicObject {
        serde_json::from_value(
            json!({"apiVersion": "aigw.io/v1alpha1", "kind": F::META.kind,
            "metadata": {"name": name}, "spec": spec}),
        )
        .unwrap()
    }

    async fn create<F: ByRef>(&self, name: &str, spec: Value) {
        self.api
            .create(&PostParams::default(), &Self::object::<F>(name, spec))
            .await
            .unwrap_or_else(|e| panic!("{} {name}: create refused: {e}", F::META.kind));
    }

    /// What admission answers to `spec` (a dry run: nothing is stored).
    async fn admit<F: ByRef>(&self, name: &str, spec: Value) -> Result<(), kube::Error> {
        let dry_run = PostParams {
            dry_run: true,
            ..Default::default()
        };
        self.api
            .create(&dry_run, &Self::object::<F>(name, spec))
            .await
            .map(drop)
    }

    async fn wait<F: ByRef, T>(
        &self,
        check: &str,
        name: &str,
        done: impl Fn(&Value) -> Option<T>,
    ) -> T {
        let get = || async {
            let object = self.api.get_opt(name).await.ok()??;
            Some(serde_json::to_value(object).unwrap())
        };
        let found = support::wait_until(WAIT, || async { done(&get().await?) }).await;
        match found {
            Some(found) => found,
            None => panic!(
                "{} ({check}): {name} did not get there\n--- object ---\n{}\n--- events ---\n{}",
                F::META.kind,
                serde_yaml::to_string(&get().await).unwrap_or_default(),
                self.h.env.events_text().await
            ),
        }
    }

    /// Creates Workspace `name` (this test's) and waits until `done` holds of it.
    async fn workspace(&self, name: &str, done: impl Fn(&Value) -> bool) -> Value {
        let object: DynamicObject = self.h.cluster_object(
            "Workspace",
            name,
            json!({"name": format!("By ref {name}"), "deletionPolicy": "Orphan"}),
        );
        support::create(&self.workspaces, &object).await;
        self.wait_workspace(name, done).await
    }

    async fn wait_workspace(&self, name: &str, done: impl Fn(&Value) -> bool) -> Value {
        let name = self.h.cluster_name(name);
        let found = support::wait_until(WAIT, || async {
            let w = serde_json::to_value(self.workspaces.get_opt(&name).await.ok()??).unwrap();
            done(&w).then_some(w)
        })
        .await;
        if let Some(w) = found {
            return w;
        }
        panic!(
            "Workspace {name} did not get there\n{}",
            self.h.cluster_events_text().await
        )
    }

    /// POSTs of the kind's creates so far.
    async fn posts<F: ByRef>(&self) -> u64 {
        count_in(
            &self.h.stats().await,
            &format!("POST {}", F::META.remote.collection),
        )
    }

    /// The workspace the emulator holds the remote object of `object` (Ready) in.
    async fn remote_workspace<F: ByRef>(&self, object: &Value) -> Value {
        let key = object["status"][F::META.remote.key].clone();
        let state = self.h.state().await;
        let remote = state[F::META.remote.state]
            .as_array()
            .and_then(|all| all.iter().find(|r| r[F::META.remote.key] == key))
            .unwrap_or_else(|| panic!("{}: no remote object {key} in {state}", F::META.kind));
        remote["workspace_id"].clone()
    }

    /// Waits until `name` is Ready, created with one POST (of `posts_before` so far) in the
    /// workspace `workspace_id`; the object.
    async fn created_once_in<F: ByRef>(
        &self,
        check: &str,
        name: &str,
        workspace_id: &str,
        posts_before: u64,
    ) -> Value {
        let object = self
            .wait::<F, _>(check, name, |o| ready(o).then(|| o.clone()))
            .await;
        let kind = F::META.kind;
        assert_eq!(
            self.remote_workspace::<F>(&object).await,
            workspace_id,
            "{kind} ({check})"
        );
        assert_eq!(
            self.posts::<F>().await,
            posts_before + 1,
            "{kind} ({check})"
        );
        object
    }
}

fn id(workspace: &Value) -> String {
    workspace["status"]["id"].as_str().unwrap().to_string()
}

/// Every check, in order, on one harness.
async fn run<F: ByRef>(prefix: &str) {
    let grants = json!([{"namespaces": ["{ns}"], "workspaces": ["{ns}-team", "{ns}-later"]}]);
    let h =
        Harness::start_with_grants(&prefix.replace('_', "-"), Duration::from_secs(1), grants).await;
    F::prepare(&h).await;
    {
        // The matrix borrows the harness: it goes before the harness stops.
        let m = Matrix::new::<F>(&h);
        admission::<F>(&m).await;
        resolved::<F>(&m).await;
        refused::<F>(&m).await;
        waits::<F>(&m).await;
    }
    h.stop().await;
}

/// (4) Both fields refused naming `spec.workspaceRef`; neither refused where one is required.
async fn admission<F: ByRef>(m: &Matrix<'_>) {
    let mut both = m.spec::<F>("both", Some("team"));
    both["workspaceId"] = json!("6f0e4a2c-5a4e-4c1b-9a53-3c2f1f0d9b11");
    let refused = m
        .admit::<F>("both", both)
        .await
        .expect_err("workspaceId and workspaceRef both admitted");
    let message = refused.to_string();
    assert!(
        message.contains("spec.workspaceRef") && message.contains("spec.workspaceId"),
        "{} (admission): {message}",
        F::META.kind
    );
    let neither = m.admit::<F>("neither", m.spec::<F>("neither", None)).await;
    match F::EXACTLY_ONE {
        true => {
            let message = neither.expect_err("neither admitted").to_string();
            assert!(
                message.contains("spec.workspaceRef") && message.contains("spec.workspaceId"),
                "{} (admission): {message}",
                F::META.kind
            );
        }
        false => neither.unwrap_or_else(|e| panic!("{} (admission): {e}", F::META.kind)),
    }
    let by_ref = m.admit::<F>("by-ref", m.spec::<F>("by-ref", Some("team")));
    by_ref
        .await
        .unwrap_or_else(|e| panic!("{} (admission): {e}", F::META.kind));
}

/// (1) Created with one POST in the workspace the Workspace recorded.
async fn resolved<F: ByRef>(m: &Matrix<'_>) {
    let team = m.workspace("team", ready).await;
    let team_id = id(&team);
    F::open(m.h, &team_id).await;
    let posts = m.posts::<F>().await;
    m.create::<F>("inside", m.spec::<F>("inside", Some("team")))
        .await;
    let inside = m
        .created_once_in::<F>("resolved", "inside", &team_id, posts)
        .await;
    // The spec is as written: the id lives only in what the reconcile acted on.
    assert_eq!(
        inside["spec"]["workspaceId"],
        Value::Null,
        "{}",
        F::META.kind
    );
}

/// (2) A Workspace not granted: refused naming the resource, not its workspace; no write.
async fn refused<F: ByRef>(m: &Matrix<'_>) {
    let other = m.workspace("other", ready).await;
    let other_id = id(&other);
    let writes = m.h.remote_writes().await;
    m.create::<F>("outside", m.spec::<F>("outside", Some("other")))
        .await;
    let message = m
        .wait::<F, _>("refused", "outside", |o| {
            stalled_with(o, "WorkspaceNotAllowed")
        })
        .await;
    let resource = m.h.cluster_name("other");
    assert!(
        message.contains("spec.workspaceRef") && message.contains(&resource),
        "{} (refused): {message}",
        F::META.kind
    );
    assert!(
        !message.contains(&other_id),
        "{} (refused): {message}",
        F::META.kind
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        m.h.remote_writes().await,
        writes,
        "{} (refused): written: {}",
        F::META.kind,
        m.h.stats().await
    );
}

/// (3) A Workspace not created yet, then created with its create refused, is waited for with
/// no write; once Ready the object is created in it with one POST.
async fn waits<F: ByRef>(m: &Matrix<'_>) {
    let posts = m.posts::<F>().await;
    m.create::<F>("waiting", m.spec::<F>("waiting", Some("later")))
        .await;
    let waiting = |check: &'static str| {
        m.wait::<F, _>(check, "waiting", |o| stalled_with(o, "WorkspaceNotReady"))
    };
    let message = waiting("waits: not created").await;
    assert!(
        message.contains("spec.workspaceRef") && message.contains(&m.h.cluster_name("later")),
        "{} (waits): {message}",
        F::META.kind
    );

    // Its create is refused at the bind: it recorded its workspace and is not Ready.
    m.h.faults(json!({"failing_routes": {SCOPE_PUT: 403}}))
        .await;
    let later = m
        .workspace("later", |w| w["status"]["id"].is_string() && !ready(w))
        .await;
    let later_id = id(&later);
    F::open(m.h, &later_id).await;
    // Time for the object to act, were it to act on the id alone.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let later = m.wait_workspace("later", |w| !ready(w)).await;
    waiting("waits: create refused").await;
    assert_eq!(
        m.posts::<F>().await,
        posts,
        "{} (waits): created while the Workspace is not Ready: {later}",
        F::META.kind
    );

    m.h.faults(json!({})).await;
    m.wait_workspace("later", ready).await;
    m.created_once_in::<F>("waits: Ready", "waiting", &later_id, posts)
        .await;
}

super::conformance::per_kind! {
    "wr-":
    config => ConfigKind,
    rate_limits_policy => RateLimitsPolicyKind,
    usage_limits_policy => UsageLimitsPolicyKind,
    guardrail => GuardrailKind,
    api_key => ApiKeyKind,
    provider => ProviderKind,
    mcp_server => McpServerKind,
}
