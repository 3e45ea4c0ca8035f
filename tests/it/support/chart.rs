//! The chart's RBAC, which every test's operator runs under: the chart's ServiceAccount and RBAC
//! (`helm template` of `templates/serviceaccount.yaml` and `templates/rbac.yaml`) applied to the
//! local apiserver, and kube clients (or kubeconfig files, for `aigw operator` processes) that
//! impersonate that ServiceAccount. Test code that plays the user keeps the admin client.
//!
//! Two releases, one per form of the chart, share the namespace [`RELEASE_NAMESPACE`]:
//! [`Form::ClusterWide`] (`watchNamespaces` empty: one ClusterRole grants everything) and
//! [`Form::Watched`] (`watchNamespaces` set: a Role in each watched namespace, the Connection
//! secret namespace and the Lease namespace). Each form is rendered once per process, with
//! placeholder namespaces that [`install`] replaces by the test's own; the cluster-scoped objects
//! (ClusterRoles, their bindings, the ServiceAccounts) are applied once per process and shared by
//! every test, the namespaced Roles and RoleBindings are applied per test.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, ResourceExt};
use serde::Deserialize;
use serde_json::Value;

use super::{kubeconfig_path, repo_root, wait_until};

/// The namespace of the test releases (their ServiceAccounts).
pub const RELEASE_NAMESPACE: &str = "aigw-test-system";

/// Stand-ins for the test's namespaces in the cached rendering of [`Form::Watched`].
const WATCHED: &str = "aigw-placeholder-watched";
const SECRETS: &str = "aigw-placeholder-secrets";
const LEASES: &str = "aigw-placeholder-leases";

/// Which form of the chart's RBAC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// `watchNamespaces` empty: the ClusterRole grants the namespaced rules everywhere.
    ClusterWide,
    /// `watchNamespaces` set: the namespaced rules only through a Role in each watched
    /// namespace; Connection Secrets only in the Connection secret namespace.
    Watched,
}

impl Form {
    fn release(self) -> &'static str {
        match self {
            Form::ClusterWide => "aigw-test-all",
            Form::Watched => "aigw-test-watched",
        }
    }
}

/// What a test's operator does, as the chart's values would say it.
#[derive(Clone, Debug)]
pub struct Scope {
    pub form: Form,
    /// `watchNamespaces` (a Role in each with [`Form::Watched`]; ignored with the other form).
    pub watched: Vec<String>,
    /// `connectionSecretNamespace` (with [`Form::Watched`]); `None`: the release namespace.
    pub secret_namespace: Option<String>,
    /// `leaderElection.namespace` when the operator elects a leader; `None`: it does not.
    pub lease_namespace: Option<String>,
    /// `sharding.enabled` (with [`Form::Watched`]): the Lease rules of `--shards`.
    pub sharded: bool,
}

impl Scope {
    pub fn cluster_wide() -> Self {
        Self {
            form: Form::ClusterWide,
            watched: Vec::new(),
            secret_namespace: None,
            lease_namespace: None,
            sharded: false,
        }
    }

    pub fn watched(namespaces: &[&str]) -> Self {
        Self {
            form: Form::Watched,
            watched: namespaces.iter().map(|n| n.to_string()).collect(),
            secret_namespace: None,
            lease_namespace: None,
            sharded: false,
        }
    }

    pub fn secret_namespace(mut self, namespace: Option<&str>) -> Self {
        self.secret_namespace = namespace.map(str::to_string);
        self
    }

    pub fn lease_namespace(mut self, namespace: &str) -> Self {
        self.lease_namespace = Some(namespace.to_string());
        self
    }

    /// With `sharding.enabled=true`.
    pub fn sharded(mut self) -> Self {
        self.sharded = true;
        self
    }
}

/// The chart's ServiceAccount of one form, bound to what the chart grants for one test.
#[derive(Clone, Debug)]
pub struct Identity {
    pub namespace: String,
    pub service_account: String,
}

impl Identity {
    /// The user name the apiserver gives the ServiceAccount's token.
    pub fn user(&self) -> String {
        format!(
            "system:serviceaccount:{}:{}",
            self.namespace, self.service_account
        )
    }

    /// A kubeconfig with the admin credentials of the local control plane that impersonates
    /// the ServiceAccount (user and groups, as the apiserver would authenticate its token).
    pub fn kubeconfig(&self) -> Kubeconfig {
        impersonating_kubeconfig(&self.user(), self.groups())
    }

    /// The groups the apiserver gives the ServiceAccount's token.
    fn groups(&self) -> Vec<String> {
        vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{}", self.namespace),
            "system:authenticated".into(),
        ]
    }

    /// A kubeconfig of the local control plane carrying a token the apiserver issued to the
    /// ServiceAccount (TokenRequest, one hour): the identity a real install's operator
    /// authenticates with, without impersonation (which costs the apiserver more per request).
    #[allow(dead_code)] // the bench's BENCH_IDENTITY=token
    pub async fn token_kubeconfig(&self, admin: &Client) -> Kubeconfig {
        use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
        use k8s_openapi::api::core::v1::ServiceAccount;
        let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), &self.namespace);
        let request = TokenRequest {
            spec: TokenRequestSpec {
                expiration_seconds: Some(3600),
                ..Default::default()
            },
            ..Default::default()
        };
        let issued = accounts
            .create_token_request(&self.service_account, &PostParams::default(), &request)
            .await
            .expect("a token for the ServiceAccount");
        let token = issued.status.expect("a TokenRequest answer").token;
        let mut kubeconfig =
            Kubeconfig::read_from(kubeconfig_path()).expect("unreadable kubeconfig");
        for named in &mut kubeconfig.auth_infos {
            if let Some(auth) = named.auth_info.as_mut() {
                *auth = kube::config::AuthInfo {
                    token: Some(token.clone().into()),
                    ..Default::default()
                };
            }
        }
        kubeconfig
    }

    /// [`Self::kubeconfig`] written to `dir/kubeconfig`, for `aigw operator` processes.
    pub fn kubeconfig_file(&self, dir: &Path) -> PathBuf {
        let path = dir.join("kubeconfig");
        let text = serde_yaml::to_string(&self.kubeconfig()).expect("kubeconfig as YAML");
        std::fs::write(&path, text).expect("write the kubeconfig");
        path
    }

    /// A client acting as the ServiceAccount.
    pub async fn client(&self) -> Client {
        let config =
            kube::Config::from_custom_kubeconfig(self.kubeconfig(), &KubeConfigOptions::default())
                .await
                .expect("invalid kubeconfig");
        Client::try_from(config).expect("kube client")
    }

    /// Waits until the apiserver's authorizer allows what each binding of `documents` grants
    /// the ServiceAccount. RBAC reaches the authorizer through watches, one per kind of object
    /// (Role, RoleBinding, ClusterRole, ClusterRoleBinding), so a request sent right after the
    /// apply may still be refused. Each binding is proven by one SubjectAccessReview (asked by
    /// `admin`) of the first rule of the role it names, where `documents` holds that role.
    pub async fn wait_authorized(&self, admin: &Client, documents: &[Value]) {
        for (namespace, rule) in bound_rules(documents, &self.service_account, &self.namespace) {
            let review = self.access_review(namespace.clone(), &rule);
            let reviews: Api<SubjectAccessReview> = Api::all(admin.clone());
            let allowed = wait_until(Duration::from_secs(30), || async {
                let answer = reviews.create(&PostParams::default(), &review).await.ok()?;
                answer.status.filter(|s| s.allowed).map(|_| ())
            })
            .await;
            assert!(
                allowed.is_some(),
                "{} was never granted {rule} in {namespace:?}",
                self.user()
            );
        }
    }

    /// A SubjectAccessReview of the first resource, verb and name `rule` names, for this
    /// ServiceAccount (its user and groups, as [`Self::kubeconfig`] impersonates them).
    fn access_review(&self, namespace: Option<String>, rule: &Value) -> SubjectAccessReview {
        let first = |field: &str| rule[field][0].as_str().map(str::to_string);
        let resource = first("resources").unwrap_or_default();
        let (resource, subresource) = match resource.split_once('/') {
            Some((resource, sub)) => (resource.to_string(), Some(sub.to_string())),
            None => (resource, None),
        };
        let verb = first("verbs").filter(|v| v != "*").unwrap_or("get".into());
        SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(self.user()),
                groups: Some(self.groups()),
                resource_attributes: Some(ResourceAttributes {
                    namespace,
                    group: first("apiGroups"),
                    resource: Some(resource),
                    subresource,
                    verb: Some(verb),
                    name: first("resourceNames"),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        }
    }
}

/// For each RoleBinding or ClusterRoleBinding of `documents` naming the ServiceAccount `name`
/// of `namespace` among its subjects: where it grants (the binding's namespace, `None` for a
/// ClusterRoleBinding) and the first resource rule of the Role or ClusterRole it names, when
/// `documents` holds that role.
fn bound_rules(documents: &[Value], name: &str, namespace: &str) -> Vec<(Option<String>, Value)> {
    let kind = |d: &Value| d["kind"].as_str().unwrap_or_default().to_string();
    let names_account = |binding: &Value| {
        let subjects = binding["subjects"].as_array().into_iter().flatten();
        subjects.into_iter().any(|s| {
            s["kind"] == "ServiceAccount" && s["name"] == name && s["namespace"] == namespace
        })
    };
    let mut rules = Vec::new();
    for binding in documents {
        let granted_in = match kind(binding).as_str() {
            "RoleBinding" => binding["metadata"]["namespace"]
                .as_str()
                .map(str::to_string),
            "ClusterRoleBinding" => None,
            _ => continue,
        };
        if !names_account(binding) {
            continue;
        }
        let role_ref = &binding["roleRef"];
        let role = documents.iter().find(|d| {
            kind(d) == role_ref["kind"]
                && d["metadata"]["name"] == role_ref["name"]
                && (role_ref["kind"] == "ClusterRole"
                    || d["metadata"]["namespace"].as_str() == granted_in.as_deref())
        });
        let rules_of = role.and_then(|r| r["rules"].as_array());
        let first = rules_of.and_then(|r| r.iter().find(|rule| rule["resources"].is_array()));
        if let Some(rule) = first {
            rules.push((granted_in, rule.clone()));
        }
    }
    rules
}

/// The admin kubeconfig of the local control plane, impersonating `user` in `groups`.
pub fn impersonating_kubeconfig(user: &str, groups: Vec<String>) -> Kubeconfig {
    let mut kubeconfig = Kubeconfig::read_from(kubeconfig_path()).expect("unreadable kubeconfig");
    for named in &mut kubeconfig.auth_infos {
        if let Some(auth) = named.auth_info.as_mut() {
            auth.impersonate = Some(user.to_string());
            auth.impersonate_groups = Some(groups.clone());
        }
    }
    kubeconfig
}

/// Applies what the chart grants for `scope` (the shared objects once per process) and returns
/// the identity to run the operator as, once the apiserver authorizes it.
pub async fn install(admin: &Client, scope: &Scope) -> Identity {
    let documents = match scope.sharded {
        true => rendered_sharded(),
        false => rendered(scope.form),
    };
    shared(admin, scope.form, documents).await;
    let mut namespaced = Vec::new();
    for document in documents {
        let Some(namespace) = document["metadata"]["namespace"].as_str() else {
            continue;
        };
        let targets: Vec<String> = match namespace {
            WATCHED => scope.watched.clone(),
            SECRETS => vec![
                scope
                    .secret_namespace
                    .clone()
                    .unwrap_or_else(|| RELEASE_NAMESPACE.to_string()),
            ],
            LEASES => scope.lease_namespace.iter().cloned().collect(),
            _ => continue,
        };
        for target in targets {
            namespaced.push(in_namespace(document, namespace, &target));
        }
    }
    for document in &namespaced {
        apply(admin, document.clone()).await;
    }
    let identity = identity(scope.form, documents);
    let shared_documents = documents.iter().filter(|d| {
        let namespace = d["metadata"]["namespace"].as_str();
        !matches!(namespace, Some(WATCHED | SECRETS | LEASES))
    });
    let applied: Vec<Value> = shared_documents.cloned().chain(namespaced).collect();
    identity.wait_authorized(admin, &applied).await;
    identity
}

fn identity(form: Form, documents: &[Value]) -> Identity {
    let account = documents
        .iter()
        .find(|d| d["kind"] == "ServiceAccount")
        .expect("the chart renders a ServiceAccount");
    Identity {
        namespace: RELEASE_NAMESPACE.to_string(),
        service_account: account["metadata"]["name"]
            .as_str()
            .unwrap_or(form.release())
            .to_string(),
    }
}

/// The release namespace, the ServiceAccount, the cluster-scoped objects and those in the
/// namespace `default` (events of cluster-scoped objects): the same for every test of a form,
/// applied once per process and control plane (the bench starts a fresh plane for each of its
/// sides; a plane is told apart by the uid of its `kube-system` namespace).
async fn shared(admin: &Client, form: Form, documents: &[Value]) {
    static APPLIED: tokio::sync::Mutex<BTreeSet<(&'static str, String)>> =
        tokio::sync::Mutex::const_new(BTreeSet::new());
    let plane = Api::<Namespace>::all(admin.clone())
        .get("kube-system")
        .await
        .expect("the control plane's kube-system namespace")
        .metadata
        .uid
        .unwrap_or_default();
    // Held while applying: a second test of the form waits until the first has applied.
    let mut applied = APPLIED.lock().await;
    if applied.insert((form.release(), plane)) {
        let namespace = Namespace {
            metadata: kube::api::ObjectMeta {
                name: Some(RELEASE_NAMESPACE.to_string()),
                ..Default::default()
            },
            ..Default::default()
        };
        match Api::<Namespace>::all(admin.clone())
            .create(&PostParams::default(), &namespace)
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => panic!("create namespace {RELEASE_NAMESPACE}: {e}"),
        }
        for document in documents {
            let namespace = document["metadata"]["namespace"].as_str();
            if matches!(namespace, Some(WATCHED | SECRETS | LEASES)) {
                continue;
            }
            apply(admin, document.clone()).await;
        }
    }
}

/// `document` (rendered in the placeholder namespace `placeholder`) in `namespace`.
fn in_namespace(document: &Value, placeholder: &str, namespace: &str) -> Value {
    let text = document.to_string().replace(placeholder, namespace);
    serde_json::from_str(&text).expect("JSON")
}

/// The chart's ServiceAccount and RBAC for `form`, rendered once per process.
fn rendered(form: Form) -> &'static [Value] {
    static CLUSTER_WIDE: OnceLock<Vec<Value>> = OnceLock::new();
    static WATCHED_FORM: OnceLock<Vec<Value>> = OnceLock::new();
    let leases = format!("leaderElection.namespace={LEASES}");
    match form {
        Form::ClusterWide => CLUSTER_WIDE
            .get_or_init(|| render(form.release(), RELEASE_NAMESPACE, &[leases]))
            .as_slice(),
        Form::Watched => WATCHED_FORM
            .get_or_init(|| {
                let sets = [
                    format!("watchNamespaces={{{WATCHED}}}"),
                    format!("connectionSecretNamespace={SECRETS}"),
                    leases,
                ];
                render(form.release(), RELEASE_NAMESPACE, &sets)
            })
            .as_slice(),
    }
}

/// [`Form::Watched`] with `sharding.enabled=true`: the same objects but for the Lease rules.
fn rendered_sharded() -> &'static [Value] {
    static SHARDED: OnceLock<Vec<Value>> = OnceLock::new();
    SHARDED
        .get_or_init(|| {
            let sets = [
                format!("watchNamespaces={{{WATCHED}}}"),
                format!("connectionSecretNamespace={SECRETS}"),
                format!("leaderElection.namespace={LEASES}"),
                "sharding.enabled=true".to_string(),
            ];
            render(Form::Watched.release(), RELEASE_NAMESPACE, &sets)
        })
        .as_slice()
}

/// `helm template` (through `hack/chart-check.sh --template`) of the chart's ServiceAccount and
/// RBAC, one JSON value per document.
pub fn render(release: &str, namespace: &str, sets: &[String]) -> Vec<Value> {
    render_templates(
        release,
        namespace,
        &["templates/serviceaccount.yaml", "templates/rbac.yaml"],
        sets,
    )
}

/// The chart's `templates` rendered for `release` in `namespace`, one value per document.
pub fn render_templates(
    release: &str,
    namespace: &str,
    templates: &[&str],
    sets: &[String],
) -> Vec<Value> {
    let mut command = Command::new("bash");
    command.arg(repo_root().join("hack/chart-check.sh")).args([
        "--template",
        release,
        "--namespace",
        namespace,
    ]);
    for template in templates {
        command.args(["--show-only", template]);
    }
    for set in sets {
        command.args(["--set", set]);
    }
    let output = command.output().expect("run hack/chart-check.sh");
    assert!(
        output.status.success(),
        "hack/chart-check.sh --template failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).expect("UTF-8 manifests");
    serde_yaml::Deserializer::from_str(&text)
        .map(|document| Value::deserialize(document).expect("invalid YAML from helm"))
        .filter(|value| !value.is_null())
        .collect()
}

/// The API of `object`'s kind, in its namespace when the kind is namespaced; and whether it is.
pub async fn dynamic_api(client: &Client, object: &DynamicObject) -> (Api<DynamicObject>, bool) {
    let types = object.types.as_ref().expect("apiVersion and kind");
    let gvk = GroupVersionKind::try_from(types).expect("apiVersion");
    let (resource, capabilities) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .unwrap_or_else(|e| panic!("the apiserver does not serve {gvk:?}: {e}"));
    let namespaced = capabilities.scope == kube::discovery::Scope::Namespaced;
    let api = match object.namespace() {
        Some(ns) if namespaced => Api::namespaced_with(client.clone(), &ns, &resource),
        _ => Api::all_with(client.clone(), &resource),
    };
    (api, namespaced)
}

/// Server-side applies `document` as admin.
pub async fn apply(admin: &Client, document: Value) -> DynamicObject {
    let object: DynamicObject = serde_json::from_value(document).expect("a Kubernetes object");
    let (api, namespaced) = dynamic_api(admin, &object).await;
    assert!(
        !namespaced || object.namespace().is_some(),
        "{} has no namespace",
        object.name_any()
    );
    api.patch(
        &object.name_any(),
        &PatchParams::apply("aigw-chart-rbac-test").force(),
        &Patch::Apply(&object),
    )
    .await
    .unwrap_or_else(|e| panic!("apply {}: {e}", object.name_any()))
}

/// The chart's objects for an operator process watching `namespace`, holding its Lease there,
/// and started without `--connection-secret-namespace` or `POD_NAMESPACE`: its own namespace
/// (the hash key, the dry-run probe of the admission policies) is the Lease's, so the chart's
/// Role of the Connection secret namespace goes there too.
fn own_namespace_scope(namespace: &str) -> Scope {
    Scope::watched(&[namespace])
        .lease_namespace(namespace)
        .secret_namespace(Some(namespace))
}

/// For an `aigw operator` process that watches `namespace` and keeps its Lease there: the
/// chart's `watchNamespaces` RBAC for that namespace, and a kubeconfig in `dir` that
/// impersonates the chart's ServiceAccount (pass it as `KUBECONFIG`).
pub async fn operator_kubeconfig(admin: &Client, namespace: &str, dir: &Path) -> PathBuf {
    let scope = own_namespace_scope(namespace);
    install(admin, &scope).await.kubeconfig_file(dir)
}

/// [`operator_kubeconfig`] with the ServiceAccount's own token ([`Identity::token_kubeconfig`])
/// instead of impersonation, written to `dir/kubeconfig`.
#[allow(dead_code)] // the bench's BENCH_IDENTITY=token
pub async fn operator_token_kubeconfig(admin: &Client, namespace: &str, dir: &Path) -> PathBuf {
    let scope = own_namespace_scope(namespace);
    let kubeconfig = install(admin, &scope).await.token_kubeconfig(admin).await;
    let path = dir.join("kubeconfig");
    let text = serde_yaml::to_string(&kubeconfig).expect("kubeconfig as YAML");
    std::fs::write(&path, text).expect("write the kubeconfig");
    path
}
