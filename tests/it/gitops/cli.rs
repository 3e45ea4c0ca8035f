//! `aigw validate`, `aigw plan` and `aigw export` run as the built binary: validate offline,
//! plan against the emulator over HTTP, and an export applied to the real apiserver with the
//! controllers running.

use crate::support;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::support::SendJson;
use aigw::emulator::EmulatorOptions;
use aigw::resources::{
    ClusterGuardrail, Config, Deployment, Guardrail, RateLimitsPolicy, UsageLimitsPolicy,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::Api;
use reqwest::Method;
use serde_json::{Value, json};
use support::harness::{CLUSTER_LABEL, Harness, TOKEN, call_api, count_in};
use support::objects::Conditions;

const WAIT: Duration = Duration::from_secs(30);

fn aigw(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aigw"))
        .args(args)
        .output()
        .expect("failed to run aigw")
}

fn aigw_stdin(args: &[&str], input: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_aigw"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("failed to run aigw");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn code(output: &Output) -> i32 {
    output.status.code().expect("aigw was killed")
}

/// Asserts the run's output `report` says `expected`; else a panic showing it.
fn assert_in(report: &str, expected: &str) {
    assert!(report.contains(expected), "{report}");
}

/// The output of a run that exited with `expected`; else a panic showing it.
fn exited(output: &Output, expected: i32) -> String {
    let report = text(output);
    assert_eq!(code(output), expected, "{report}");
    report
}

const GOOD: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: aigw.io/v1alpha1
kind: Config
metadata: {name: routing, namespace: team-a}
spec:
  name: routing
  config: {strategy: {mode: fallback}, targets: [{provider: "@openai"}, {provider: "@anthropic"}]}
---
apiVersion: aigw.io/v1alpha1
kind: RateLimitsPolicy
metadata: {name: per-key, namespace: team-a}
spec:
  type: requests
  unit: rpm
  value: 100
  conditions: [{key: workspace_id, value: ws-1}]
  groupBy: [{key: api_key}]
"#;

#[test]
fn validate_accepts_a_good_set_and_counts_what_it_ignored() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("nested")).unwrap();
    std::fs::write(dir.path().join("nested/set.yaml"), GOOD).unwrap();
    std::fs::write(dir.path().join("notes.txt"), "not a manifest").unwrap();
    let out = aigw(&["validate", "-f", dir.path().to_str().unwrap()]);
    let report = exited(&out, 0);
    assert_in(
        &report,
        "checked 2 aigw resources (1 Config, 1 RateLimitsPolicy), ignored 1 other document: valid",
    );
}

#[test]
fn validate_reads_stdin() {
    let out = aigw_stdin(&["validate", "-f", "-"], GOOD);
    exited(&out, 0);
    let bad = GOOD.replace("unit: rpm", "unit: rps");
    let out = aigw_stdin(&["validate", "-f", "-"], &bad);
    let report = exited(&out, 1);
    assert_in(
        &report,
        "-#2: RateLimitsPolicy team-a/per-key: spec.unit: Unsupported value: \"rps\"",
    );
}

/// What CI reads must not pass by accident: an empty input (a `kustomize build | aigw … -f -`
/// whose build failed) is an error, and so is a mistake on the command line, with exit 1, never
/// `plan`'s 2 ("changes"); help exits 0.
#[test]
fn no_document_and_a_usage_mistake_exit_1() {
    for command in ["validate", "plan"] {
        let out = aigw_stdin(&[command, "-f", "-"], "# only a comment\n---\n");
        let report = exited(&out, 1);
        assert_in(
            &report,
            "error: no objects passed: standard input held no YAML or JSON document",
        );
    }
    let empty = tempfile::tempdir().unwrap();
    let out = aigw(&["validate", "-f", empty.path().to_str().unwrap()]);
    assert_in(&exited(&out, 1), "no objects passed");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("set.yaml"), GOOD).unwrap();
    let set = dir.path().join("set.yaml");
    let set = set.to_str().unwrap();
    for mistake in [
        vec!["plan", "--bogus", "-f", set],
        vec!["plan"],
        vec!["plan", "-f", set, "-o", "yaml"],
        vec!["validate", "-f", set, "--min-rotation-interval", "soon"],
    ] {
        let out = aigw(&mistake);
        assert_in(&exited(&out, 1), "error:");
    }
    exited(&aigw(&["plan", "--help"]), 0);
    exited(&aigw(&["--version"]), 0);
    // A usage error echoing a value hides a credential in it, and help shows no env value.
    let header = [
        "api",
        "--header",
        "Authorization: Bearer sk-usage-leak-1",
        "configs",
        "list",
    ];
    let report = exited(&aigw(&header), 1);
    assert!(!report.contains("sk-usage-leak-1"), "{report}");
    for (command, variable) in [
        ("api", "AIGW_MANAGEMENT_URL"),
        ("operator", "AIGW_GATEWAY_URL"),
    ] {
        let help = Command::new(env!("CARGO_BIN_EXE_aigw"))
            .args([command, "--help"])
            .env(variable, "https://svc:help-leak-1@api.example")
            .output()
            .unwrap();
        let report = exited(&help, 0);
        assert_in(&report, &format!("[env: {variable}]"));
        assert!(!report.contains("help-leak-1"), "{report}");
    }
}

/// A list keyed by a field (`x-kubernetes-list-type: map`) holds each key once, as the
/// apiserver requires, with its message (an Integration's `workspaces` by `id`).
#[test]
fn validate_refuses_a_list_key_twice() {
    let integration = r#"
apiVersion: aigw.io/v1alpha1
kind: Integration
metadata: {name: openai-prod}
spec:
  slug: openai-prod
  name: OpenAI production
  aiProviderId: open-ai
  keySecretRef: {name: openai-upstream, key: api-key}
  workspaces:
    - {id: 6f0e4a2c-5a4e-4c1b-9a53-3c2f1f0d9b11}
    - {id: 6f0e4a2c-5a4e-4c1b-9a53-3c2f1f0d9b11}
"#;
    let report = exited(&aigw_stdin(&["validate", "-f", "-"], integration), 1);
    assert_in(
        &report,
        r#"spec.workspaces[1]: Duplicate value: {"id":"6f0e4a2c-5a4e-4c1b-9a53-3c2f1f0d9b11"}"#,
    );
    // An aigw kind without a version in its apiVersion is a mistake, not another tool's
    // document; another group's kind of the same name is.
    let versionless = "apiVersion: aigw.io\nkind: RateLimitsPolicy\nmetadata: {name: x, namespace: a}\nspec: {}\n---\napiVersion: other.example/v1\nkind: Config\nmetadata: {name: y}\n";
    let report = exited(&aigw_stdin(&["validate", "-f", "-"], versionless), 1);
    assert_in(
        &report,
        "apiVersion: Invalid value: \"aigw.io\": an aigw kind's apiVersion is aigw.io/<version>",
    );
    assert_in(&report, "ignored 1 other document");
    // A cluster-scoped object named twice, once with a namespace, is one object twice; a key
    // written twice is a failure, never the last one winning.
    let twice = "apiVersion: aigw.io/v1alpha1\nkind: Integration\nmetadata: {name: openai}\nspec: {slug: openai, name: a, aiProviderId: openai}\n---\napiVersion: aigw.io/v1alpha1\nkind: Integration\nmetadata: {name: openai, namespace: team-a}\nspec: {slug: openai, name: a, name: b, aiProviderId: openai}\n---\napiVersion: aigw.io/v1alpha1\nkind: Integration\nmetadata: {name: openai, namespace: team-a}\nspec: {slug: openai, name: a, aiProviderId: openai}\n";
    let report = exited(&aigw_stdin(&["validate", "-f", "-"], twice), 1);
    assert_in(
        &report,
        "duplicate: Integration openai is also defined at -#0",
    );
    assert_in(&report, r#"mapping key defined twice: "name""#);
}

/// A directory's links to directories are not followed: a link to `.` or `..` would read the
/// same manifests again (reported as duplicates) or never end.
#[test]
fn validate_follows_no_link_to_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let set = dir.path().join("set");
    std::fs::create_dir(&set).unwrap();
    std::fs::write(set.join("set.yaml"), GOOD).unwrap();
    std::os::unix::fs::symlink(".", set.join("self")).unwrap();
    std::os::unix::fs::symlink("..", set.join("up")).unwrap();
    let out = aigw(&["validate", "-f", set.to_str().unwrap()]);
    let report = exited(&out, 0);
    assert_in(&report, "checked 2 aigw resources");
}

/// A field set to `null` (what templating leaves) reads as the apiserver reads it: absent, in
/// the schema and in the CEL rules, at any depth. Each manifest is judged by `aigw validate` and
/// by a server-side dry run, and both must agree (before: null counted as present, so validate
/// refused four that admission takes and took one it refuses).
#[tokio::test]
async fn validate_reads_a_null_field_as_the_apiserver_does() {
    let env = support::TestEnv::new("val-null").await;
    let ns = env.namespace.clone();
    let ws = "9f3c2b1a-0d4e-4f6a-8b7c-1e2d3f4a5b6c";
    let key = |name: &str, kind: &str| {
        json!({"kind": "ApiKey", "plural": "apikeys", "metadata": {"name": name}, "spec": {
            "name": name, "kind": kind, "userId": null, "workspaceId": ws,
            "scopes": ["completions.write"], "secretRef": {"name": "k"}}})
    };
    let cases = [
        (key("user-null", "user"), false),
        (key("service-null", "service"), true),
        (
            json!({"kind": "Provider", "plural": "providers", "metadata": {"name": "p"}, "spec": {
                "name": "p", "integrationId": "abc", "workspaceId": null,
                "workspaceRef": {"name": "ws"}}}),
            true,
        ),
        (
            json!({"kind": "McpServer", "plural": "mcpservers", "metadata": {"name": "m"},
                   "spec": {"name": "m", "integrationId": "abc", "integrationRef": null,
                            "workspaceId": ws}}),
            true,
        ),
        (
            json!({"kind": "Deployment", "plural": "deployments", "metadata": {"name": "d"},
                   "spec": {"name": "d", "credentialsSecretRef": {"name": "s"},
                            "rotation": {"interval": null}}}),
            true,
        ),
        (
            json!({"kind": "ConfigRollout", "plural": "configrollouts", "metadata": {"name": "r"},
                   "spec": {"stableConfigRef": {"name": "a"}, "candidateConfigRef": {"name": "b"},
                            "apiKeySelector": {"matchLabels": {"canary": "x"}},
                            "steps": [{"weight": 100, "pause": "5m"}],
                            "analysis": {"workspaceSlug": "w", "maxErrorRate": null}}}),
            false,
        ),
    ];
    for (mut manifest, valid) in cases {
        let plural = manifest["plural"].as_str().unwrap().to_string();
        let kind = manifest["kind"].as_str().unwrap().to_string();
        let object = manifest.as_object_mut().unwrap();
        object.remove("plural");
        object.insert("apiVersion".into(), json!("aigw.io/v1alpha1"));
        manifest["metadata"]["namespace"] = json!(ns);
        let name = format!("{kind} {}", manifest["metadata"]["name"]);

        let api: Api<kube::api::DynamicObject> = Api::namespaced_with(
            env.client.clone(),
            &ns,
            &support::aigw_resource(&kind, &plural),
        );
        let object: kube::api::DynamicObject = serde_json::from_value(manifest.clone()).unwrap();
        let dry_run = kube::api::PostParams {
            dry_run: true,
            ..Default::default()
        };
        let admitted = api.create(&dry_run, &object).await;
        assert_eq!(
            admitted.is_ok(),
            valid,
            "{name}: admission said {admitted:?}"
        );

        let yaml = serde_yaml::to_string(&manifest).unwrap();
        let out = aigw_stdin(&["validate", "-f", "-"], &yaml);
        exited(&out, if valid { 0 } else { 1 });
    }
    env.cleanup().await;
}

#[test]
fn validate_names_file_document_resource_and_field_of_each_problem() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.yaml");
    let bad = GOOD
        .replace("value: 100", "value: -5")
        .replace("groupBy: [{key: api_key}]", "groupBy: []")
        .replace("  name: routing\n", "  name: routing\n  colour: blue\n")
        + "---\napiVersion: aigw.io/v1alpha1\nkind: Connection\nmetadata: {name: default}\nspec: {managementUrl: 'https://api.example', auth: {}}\n"
        + "---\napiVersion: aigw.io/v1alpha1\nkind: Deployment\nmetadata: {name: edge, namespace: team-a}\nspec: {name: edge, credentialsSecretRef: {name: edge-creds}, rotation: {interval: 30days}}\n";
    std::fs::write(&file, bad).unwrap();
    let out = aigw(&["validate", "-f", file.to_str().unwrap()]);
    let report = exited(&out, 1);
    let at = file.display();
    for expected in [
        format!("{at}#1: Config team-a/routing: spec.colour: unknown field \"spec.colour\""),
        format!(
            "{at}#2: RateLimitsPolicy team-a/per-key: spec.groupBy: Invalid value: 0: spec.groupBy in body should have at least 1 items"
        ),
        format!(
            "{at}#2: RateLimitsPolicy team-a/per-key: spec.value: Invalid value: -5: spec.value in body should be greater than or equal to 0"
        ),
        format!(
            "{at}#3: Connection default: spec.auth: Invalid value: \"object\": auth needs exactly one of bearerToken or oauth2ClientCredentials"
        ),
        format!(
            "{at}#4: Deployment team-a/edge: spec.rotation.interval: Invalid value: \"30days\""
        ),
    ] {
        assert!(
            report.contains(&expected),
            "missing {expected:?} in:\n{report}"
        );
    }
    assert_in(&report, ": 5 problems");
}

/// ApiKey manifests are checked offline as the operator and the apiserver would: a good one
/// passes; a short transition, a bad interval, a server-side rotation policy, a user key
/// without its user and an empty scope list are each named by field.
#[test]
fn validate_checks_api_keys_naming_each_field() {
    let good = "apiVersion: aigw.io/v1alpha1\nkind: ApiKey\nmetadata: {name: billing, namespace: team-a}\n\
        spec: {name: billing, kind: service, scopes: [completions.write], secretRef: {name: billing-key},\
        rotation: {interval: 30d, transitionPeriod: 1h, restart: [{kind: Deployment, name: billing}]}}\n";
    let out = aigw_stdin(&["validate", "-f", "-"], good);
    exited(&out, 0);
    let bad = good
        .replace("transitionPeriod: 1h", "transitionPeriod: 10m")
        .replace("interval: 30d", "interval: 30days")
        + "---\napiVersion: aigw.io/v1alpha1\nkind: ApiKey\nmetadata: {name: personal, namespace: team-a}\n\
        spec: {name: personal, kind: user, scopes: [], secretRef: {name: personal-key},\
        rotationPolicy: {rotationPeriod: weekly}}\n";
    let out = aigw_stdin(&["validate", "-f", "-"], &bad);
    let report = exited(&out, 1);
    for expected in [
        "-#0: ApiKey team-a/billing: spec.rotation.interval",
        "-#0: ApiKey team-a/billing: spec.rotation.transitionPeriod",
        "-#1: ApiKey team-a/personal: spec.rotationPolicy",
        "-#1: ApiKey team-a/personal: spec.userId",
        "-#1: ApiKey team-a/personal: spec.scopes",
    ] {
        assert!(
            report.contains(expected),
            "missing {expected:?} in:\n{report}"
        );
    }
    assert!(
        report.contains("dead key"),
        "the refusal says why: {report}"
    );
}

#[test]
fn validate_finds_duplicate_names_and_duplicate_claims() {
    let adopt = |name: &str, slug: &str| {
        format!(
            "apiVersion: aigw.io/v1alpha1\nkind: Config\nmetadata: {{name: {name}, namespace: team-a}}\nspec: {{slug: {slug}, name: x, config: {{retry: {{attempts: 2}}}}}}\n"
        )
    };
    let set = [
        adopt("a", "pc-1"),
        adopt("b", "pc-1"),
        adopt("a", "pc-2"),
        adopt("c", "pc-3"),
    ]
    .join("---\n");
    let out = aigw_stdin(&["validate", "-f", "-"], &set);
    let report = exited(&out, 1);
    assert_in(
        &report,
        "-#1: Config team-a/b: spec.slug: duplicate: Config pc-1 is also claimed by Config team-a/a at -#0",
    );
    assert_in(
        &report,
        "-#2: Config team-a/a: metadata.name: duplicate: Config team-a/a is also defined at -#0",
    );
    assert_in(&report, ": 2 problems");
}

/// 1,000 generated resources; the time is printed for the report, not asserted.
#[test]
fn validate_a_thousand_resources() {
    let mut set = String::new();
    for i in 0..1000 {
        let doc = match i % 3 {
            0 => format!(
                "apiVersion: aigw.io/v1alpha1\nkind: Config\nmetadata: {{name: c-{i}, namespace: ns}}\nspec: {{slug: pc-{i}, name: c-{i}, config: {{strategy: {{mode: fallback}}, targets: [{{provider: '@a'}}, {{provider: '@b'}}]}}, state: active}}\n"
            ),
            1 => format!(
                "apiVersion: aigw.io/v1alpha1\nkind: Deployment\nmetadata: {{name: d-{i}, namespace: ns}}\nspec: {{name: d-{i}, type: production, credentialsSecretRef: {{name: d-{i}-creds}}, rotation: {{interval: 720h}}, authSettings: {{workspacesAllowed: [ws-1]}}}}\n"
            ),
            _ => format!(
                "apiVersion: aigw.io/v1alpha1\nkind: RateLimitsPolicy\nmetadata: {{name: p-{i}, namespace: ns}}\nspec: {{type: requests, unit: rpm, value: {i}, conditions: [{{key: workspace_id, value: ws-1}}], groupBy: [{{key: api_key}}]}}\n"
            ),
        };
        set.push_str(&doc);
        set.push_str("---\n");
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("many.yaml");
    std::fs::write(&file, set).unwrap();
    let started = std::time::Instant::now();
    let out = aigw(&["validate", "-f", file.to_str().unwrap()]);
    eprintln!("validate of 1000 resources took {:?}", started.elapsed());
    let report = exited(&out, 0);
    assert_in(&report, "checked 1000 aigw resources");
}

/// Remote writes recorded by the emulator.
fn writes(stats: &Value) -> u64 {
    stats["requests"]
        .as_object()
        .map(|m| {
            m.keys()
                .filter(|k| !k.starts_with("GET "))
                .map(|k| count_in(stats, k))
                .sum()
        })
        .unwrap_or(0)
}

struct Remote {
    url: String,
    http: reqwest::Client,
}

impl Remote {
    fn of(url: String) -> Self {
        Remote {
            url,
            http: reqwest::Client::new(),
        }
    }

    /// An emulator of its own, and its API.
    async fn spawn() -> (aigw::emulator::Running, Self) {
        let emulator = aigw::emulator::spawn(EmulatorOptions::new(TOKEN))
            .await
            .unwrap();
        let remote = Remote::of(emulator.management_url());
        (emulator, remote)
    }

    async fn call(&self, method: Method, path: &str, body: Value) -> Value {
        call_api(&self.http, &self.url, method, path, Some(body)).await
    }

    async fn stats(&self) -> Value {
        let url = format!("{}/_emulator/stats", self.url);
        self.http.get(url).json_value().await
    }

    async fn reset_stats(&self) {
        let url = format!("{}/_emulator/stats", self.url);
        self.http.delete(url).send().await.unwrap();
    }
}

/// A seeded emulator of its own, exported into a set of files.
struct Exported {
    _emulator: aigw::emulator::Running,
    remote: Remote,
    dir: tempfile::TempDir,
    /// The exported set's directory.
    set: String,
    url: String,
    /// The file holding the token.
    token: String,
}

impl Exported {
    /// [`seed`], then `aigw export` (with `flags`) of it; the emulator's counts reset after.
    async fn seeded(flags: &[&str]) -> Self {
        let (emulator, remote) = Remote::spawn().await;
        seed(&remote).await;
        let dir = tempfile::tempdir().unwrap();
        let token = token_file(dir.path(), TOKEN);
        let url = emulator.management_url();
        let set = dir.path().join("set").to_str().unwrap().to_string();
        let mut export = vec!["export", "--out", &set];
        export.extend(flags);
        exited(&aigw_async(connected(&export, &url, &token)).await, 0);
        remote.reset_stats().await;
        Exported {
            _emulator: emulator,
            remote,
            dir,
            set,
            url,
            token,
        }
    }
}

/// A config, a deployment and a policy in the emulator; returns the deployment's create answer.
async fn seed(remote: &Remote) -> Value {
    remote
        .call(
            Method::POST,
            "/ai_gw/v2/configs",
            json!({"name": "Chat Routing", "config": {"strategy": {"mode": "fallback"}, "targets": [{"provider": "@openai"}, {"provider": "@anthropic"}], "retry": {"attempts": 2}}}),
        )
        .await;
    let deployment = remote
        .call(
            Method::POST,
            "/ai_gw/admin/v2/deployments",
            json!({"name": "edge-eu", "type": "production", "tags": {"team": "a"},
                   "auth_settings": {"gateway_base_url": "gw.eu:8443", "mcp_gateway_base_url": "https://gw.eu/mcp?team=eu", "workspaces_allowed": ["ws-1"]}}),
        )
        .await;
    remote
        .call(
            Method::POST,
            "/ai_gw/v2/policies/rate-limits",
            json!({"name": "per key", "type": "requests", "unit": "rpm", "value": 100,
                   "conditions": [{"key": "workspace_id", "value": "ws-1"}], "group_by": [{"key": "api_key"}]}),
        )
        .await;
    remote
        .call(
            Method::POST,
            "/ai_gw/v2/guardrails",
            json!({"name": "pii check", "workspace_id": "9f3c2b1a-0d4e-4f6a-8b7c-1e2d3f4a5b6c",
                   "checks": [{"id": "default.regexMatch", "parameters": {"rule": "\\d{16}"}}],
                   // Feedback as the console writes it: `metadata` a string, '' or left out.
                   "actions": {"deny": true,
                               "on_fail": {"feedback": {"value": -5, "weight": 1, "metadata": ""}},
                               "on_success": {"feedback": {"value": 5, "weight": 1}}}}),
        )
        .await;
    remote
        .call(
            Method::POST,
            "/ai_gw/admin/v2/guardrails",
            json!({"name": "org secrets scan",
                   "checks": [{"id": "default.regexMatch", "parameters": {"rule": "sk-[a-z0-9]{20}"}}],
                   "actions": {"deny": true, "async": false}}),
        )
        .await;
    remote
        .call(
            Method::POST,
            "/ai_gw/v2/policies/usage-limits",
            json!({"name": "team budget", "type": "cost", "credit_limit": 500, "alert_threshold": 400,
                   "periodic_reset": "monthly",
                   "conditions": [{"key": "workspace_id", "value": "ws-1"}], "group_by": [{"key": "api_key"}]}),
        )
        .await;
    deployment
}

fn token_file(dir: &Path, token: &str) -> String {
    let path = dir.join("token");
    std::fs::write(&path, token).unwrap();
    path.display().to_string()
}

/// Creates the object the YAML document `yaml` holds in the test's namespace.
async fn create_yaml<K: support::NamespacedKind>(h: &Harness, yaml: &str) {
    let object: K = serde_yaml::from_str(yaml).unwrap();
    support::create(&h.env.api(), &object).await;
}

/// Runs the binary off the async runtime, so the in-process emulator keeps serving.
async fn aigw_async(args: Vec<String>) -> Output {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        aigw(&args)
    })
    .await
    .unwrap()
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// `cmd` against the management API at `url`, with the token in the file `token`.
/// `aigw export` of the tenant into `out`, for `namespace`, reading the cluster of `kubeconfig`.
fn export_from_cluster<'a>(out: &'a str, namespace: &'a str, kubeconfig: &'a str) -> Vec<&'a str> {
    let flags = ["--namespace", namespace, "--kubeconfig", kubeconfig];
    ["export", "--out", out].into_iter().chain(flags).collect()
}

fn connected(cmd: &[&str], url: &str, token: &str) -> Vec<String> {
    let mut all = args(cmd);
    all.extend(args(&["--management-url", url, "--token-file", token]));
    all
}

/// Replaces `from` by `to` in the file `path`; its new content.
fn edit_file(path: &Path, from: &str, to: &str) -> String {
    let edited = std::fs::read_to_string(path).unwrap().replace(from, to);
    std::fs::write(path, &edited).unwrap();
    edited
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_exits_0_2_and_1_and_never_writes() {
    let exported = Exported::seeded(&["--namespace", "team-a"]).await;
    let (remote, dir, set) = (&exported.remote, exported.dir.path(), exported.set.as_str());
    let (url, token) = (&exported.url, &exported.token);
    let connection = |cmd: &[&str]| connected(cmd, url, token);

    // The export of the tenant: every resource adopts its object, which already matches.
    // Without cluster access the plan cannot say so of the config's and the guardrails' strings
    // (it never compares them with the manifest's: that would tell a guess from the truth), so
    // those three may write: exit 2. The deployment and the policies match: in sync.
    let out = aigw_async(connection(&["plan", "-f", set])).await;
    let plan = exited(&out, 2);
    assert_in(
        &plan,
        "Plan: 0 to create, 0 to update, 6 to adopt, 0 unchanged, 0 in conflict.",
    );
    assert_eq!(
        plan.matches("(may write; remote values hidden)").count(),
        3,
        "{plan}"
    );
    assert_eq!(
        plan.matches("(in sync, nothing to write)").count(),
        3,
        "{plan}"
    );

    // A changed document, a changed policy and a new config: exit 2, field by field.
    let config_file = Path::new(set).join("config-chat-routing.yaml");
    edit_file(&config_file, "attempts: 2", "attempts: 3");
    let policy_file = Path::new(set).join("ratelimitspolicy-per-key.yaml");
    edit_file(&policy_file, "value: 100.0", "value: 250");
    std::fs::write(Path::new(set).join("new.yaml"), "apiVersion: aigw.io/v1alpha1\nkind: Config\nmetadata: {name: fresh, namespace: team-a}\nspec: {name: fresh, config: {cache: {mode: simple}, targets: [{provider: '@openai', custom_headers: {authorization: sk-never-printed}}]}}\n").unwrap();
    let out = aigw_async(connection(&["plan", "-f", set])).await;
    let plan = exited(&out, 2);
    assert!(
        plan.contains("-     \"attempts\": 2\n") && plan.contains("+     \"attempts\": 3\n"),
        "{plan}"
    );
    assert_in(&plan, "    value: 100.0 → 250.0\n");
    assert_in(&plan, "Config team-a/fresh (");
    assert!(
        !plan.contains("sk-never-printed"),
        "a secret was printed:\n{plan}"
    );

    let out = aigw_async(connection(&["plan", "-f", set, "--output", "json"])).await;
    exited(&out, 2);
    let document: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(document["version"], 1);
    assert_eq!(document["summary"]["create"], 1);
    assert_eq!(document["resources"].as_array().unwrap().len(), 7);
    let policy = document["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "RateLimitsPolicy")
        .unwrap();
    assert_eq!(
        policy["changes"][0],
        json!({"field": "value", "from": 100.0, "to": 250.0})
    );

    // The same edits under `managementPolicy: Observe` are differences the operator would
    // report, never writes: the policy is planned as `observe`; the remaining changes (the
    // config, the new Config) still give exit 2, and without them exit 0.
    let edited = edit_file(
        &policy_file,
        "managementPolicy: Full",
        "managementPolicy: Observe",
    );
    assert_in(&edited, "managementPolicy: Observe");
    let out = aigw_async(connection(&["plan", "-f", set])).await;
    let plan = text(&out);
    assert_in(&plan, "per-key.yaml#0): observe");
    assert_in(&plan, "    value: 100.0 → 250.0\n");
    assert_in(&plan, "1 observed (Observe: never written)");
    std::fs::remove_file(Path::new(set).join("new.yaml")).unwrap();
    edit_file(&config_file, "attempts: 3", "attempts: 2");
    // The config and the guardrails still may write (their remote values are hidden): the
    // policy alone.
    let out = aigw_async(connection(&["plan", "-f", policy_file.to_str().unwrap()])).await;
    assert_eq!(
        code(&out),
        0,
        "an Observe difference is not a change: {}",
        text(&out)
    );

    // A bad token and an unreachable API: exit 1.
    let bad_token = dir.join("bad-token");
    std::fs::write(&bad_token, "not-the-token").unwrap();
    let out = aigw_async(args(&[
        "plan",
        "-f",
        set,
        "--management-url",
        url,
        "--token-file",
        bad_token.to_str().unwrap(),
    ]))
    .await;
    let report = exited(&out, 1);
    assert!(report.contains("HTTP 401"), "{}", report);
    let out = aigw_async(args(&[
        "plan",
        "-f",
        set,
        "--management-url",
        "http://127.0.0.1:1",
        "--token-file",
        token,
        "--timeout",
        "2s",
    ]))
    .await;
    exited(&out, 1);

    let stats = remote.stats().await;
    assert_eq!(writes(&stats), 0, "plan wrote to the API: {stats}");
    assert!(
        count_in(&stats, "GET /ai_gw/v2/configs/{slug}") > 0,
        "{stats}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_reports_conflicts_with_exit_1() {
    let exported = Exported::seeded(&[]).await;
    let (set, url, token) = (exported.set.as_str(), &exported.url, &exported.token);
    let policy_file = Path::new(set).join("ratelimitspolicy-per-key.yaml");
    edit_file(&policy_file, "type: requests", "type: tokens");
    std::fs::write(Path::new(set).join("gone.yaml"), "apiVersion: aigw.io/v1alpha1\nkind: Config\nmetadata: {name: gone}\nspec: {slug: pc-gone-000000, name: gone, config: {retry: {attempts: 1}}}\n").unwrap();
    let out = aigw_async(connected(&["plan", "-f", set], url, token)).await;
    let plan = exited(&out, 1);
    support::assert_mentions(
        &plan,
        &[
            "Config gone (",
            "spec.slug names config pc-gone-000000, which does not exist",
        ],
    );
    assert_in(&plan, "the remote policy has a different type");
    assert_in(&plan, "    type: \"requests\" → \"tokens\"\n");
}

/// Export the tenant, apply it with the operator running: everything Ready, nothing written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_applied_with_the_operator_running_adopts_everything_without_a_write() {
    let h = Harness::start("gitops-export").await;
    let remote = Remote::of(h.emulator.management_url());
    let created = seed(&remote).await;
    let dir = tempfile::tempdir().unwrap();
    let token = token_file(dir.path(), TOKEN);
    let url = h.emulator.management_url();
    let out_dir = dir.path().join("export");
    let out_dir = out_dir.to_str().unwrap().to_string();
    let out = aigw_async(connected(
        &["export", "--out", &out_dir, "--namespace", &h.env.namespace],
        &url,
        &token,
    ))
    .await;
    let report = exited(&out, 0);
    assert!(
        report
            .contains("exported 1 ClusterGuardrail, 1 Config, 1 Deployment, 1 Guardrail, 1 RateLimitsPolicy, 1 UsageLimitsPolicy"),
        "{report}"
    );
    let out = aigw_async(args(&["validate", "-f", &out_dir])).await;
    exited(&out, 0);

    // No credential was exported; the gateway's current ones go into the named Secret.
    let client_auth = created["client_auth"].as_str().unwrap();
    let password = created["credentials"]["password"].as_str().unwrap();
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&out_dir).unwrap() {
        let path = entry.unwrap().path();
        let content = std::fs::read_to_string(&path).unwrap();
        assert!(
            !content.contains(client_auth) && !content.contains(password),
            "{}",
            path.display()
        );
        files.push((path, content));
    }
    h.env.create_from::<Secret>(json!({
        "metadata": {"name": "edge-eu-credentials"},
        "stringData": {"client_auth": client_auth, "username": created["credentials"]["username"], "password": password}
    })).await;

    h.reset_stats().await;
    for (path, content) in &files {
        let name = path.file_name().unwrap().to_str().unwrap();
        let yaml = content.as_str();
        if name.starts_with("config-") {
            create_yaml::<Config>(&h, yaml).await;
        } else if name.starts_with("deployment-") {
            create_yaml::<Deployment>(&h, yaml).await;
        } else if name.starts_with("ratelimitspolicy-") {
            create_yaml::<RateLimitsPolicy>(&h, yaml).await;
        } else if name.starts_with("guardrail-") {
            create_yaml::<Guardrail>(&h, yaml).await;
        } else if name.starts_with("clusterguardrail-") {
            // Labelled for the harness's operator (which takes only its own cluster-scoped
            // objects); a leftover of an earlier run is removed first.
            let mut object: ClusterGuardrail = serde_yaml::from_str(yaml).unwrap();
            object.metadata.labels =
                Some([(CLUSTER_LABEL.to_string(), h.env.namespace.clone())].into());
            let cluster = Api::<ClusterGuardrail>::all(h.env.client.clone());
            let name = object.metadata.name.clone().unwrap();
            let unfinalized = json!({"metadata": {"finalizers": null}});
            let _ = cluster
                .patch(
                    &name,
                    &Default::default(),
                    &kube::api::Patch::Merge(&unfinalized),
                )
                .await;
            let _ = cluster.delete(&name, &Default::default()).await;
            support::wait_until(WAIT, || async {
                cluster.get_opt(&name).await.ok()?.is_none().then_some(())
            })
            .await
            .expect("a leftover ClusterGuardrail went");
            support::create(&cluster, &object).await;
        } else if name.starts_with("usagelimitspolicy-") {
            create_yaml::<UsageLimitsPolicy>(&h, yaml).await;
        }
    }
    h.wait_for::<Config>("chat-routing", WAIT, |c| c.ready())
        .await;
    h.wait_for::<Deployment>("edge-eu", WAIT, |d| d.ready())
        .await;
    h.wait_for::<RateLimitsPolicy>("per-key", WAIT, |p| p.ready())
        .await;
    h.wait_for::<UsageLimitsPolicy>("team-budget", WAIT, |p| p.ready())
        .await;
    h.wait_for::<Guardrail>("pii-check", WAIT, |g| g.ready())
        .await;
    let cluster = Api::<ClusterGuardrail>::all(h.env.client.clone());
    assert!(
        support::ready_within(&cluster, "org-secrets-scan", WAIT).await,
        "the exported ClusterGuardrail was adopted"
    );
    let stats = h.stats().await;
    assert_eq!(
        writes(&stats),
        0,
        "adopting the export wrote to the API: {stats}"
    );

    // With the cluster in view the same set is managed already: no change, exit 0.
    let kubeconfig = support::kubeconfig_path().display().to_string();
    let out = aigw_async(args(&[
        "plan",
        "-f",
        &out_dir,
        "--management-url",
        &url,
        "--token-file",
        &token,
        "--kubeconfig",
        &kubeconfig,
    ]))
    .await;
    let report = exited(&out, 0);
    assert_in(&report, "0 to adopt, 6 unchanged");
    h.stop().await;
}

/// `export --kubeconfig` gives no manifest a live resource's name and says which exported
/// objects live resources manage already; with `--skip-managed` it leaves those out (each said
/// skipped: the live resource is its manifest). Applying that export then adopts the rest and
/// changes nothing live: no second claimant stalls `AlreadyManaged`, no live resource is
/// changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_says_what_the_cluster_manages_and_can_leave_it_and_its_names_alone() {
    let h = Harness::start("gitops-export-live").await;
    let document = json!({"retry": {"attempts": 2}});
    // A config made outside aigw: its slug.
    let made_outside = async |name: &str| {
        let body = json!({"name": name, "config": document});
        let made = h.call(Method::POST, "/ai_gw/v2/configs", Some(body)).await;
        made["slug"].as_str().unwrap().to_string()
    };
    // Made outside aigw, then adopted by a resource of another name.
    let adopted_slug = made_outside("Chat Routing").await;
    let spec = json!({"slug": adopted_slug, "name": "Chat Routing", "config": document,
        "deletionPolicy": "Orphan"});
    h.env
        .create_from::<Config>(json!({"metadata": {"name": "my-routing"}, "spec": spec}))
        .await;
    // Made by aigw for a resource called what the next one's remote name makes.
    let spec = json!({"name": "Billing", "config": document, "deletionPolicy": "Orphan"});
    h.env
        .create_from::<Config>(json!({"metadata": {"name": "chat-routing-eu"}, "spec": spec}))
        .await;
    h.wait_for::<Config>("my-routing", WAIT, |c| c.ready())
        .await;
    let billing_slug = h.env.ready_config_slug("chat-routing-eu", WAIT).await;
    // Made outside aigw, managed by nothing, with the name of the live resource above.
    let fresh_slug = made_outside("Chat Routing EU").await;

    let dir = tempfile::tempdir().unwrap();
    let token = token_file(dir.path(), TOKEN);
    let url = h.emulator.management_url();
    let out_dir = dir.path().join("export");
    let out_dir = out_dir.to_str().unwrap().to_string();
    let kubeconfig = support::kubeconfig_path().display().to_string();
    let namespace = h.env.namespace.clone();
    // Without --skip-managed: all three exported, the two managed ones named.
    let listed = dir.path().join("listed");
    let listed = listed.to_str().unwrap();
    let export = export_from_cluster(listed, &namespace, &kubeconfig);
    let out = aigw_async(connected(&export, &url, &token)).await;
    let report = exited(&out, 0);
    assert_in(&report, "exported 3 Config to");
    assert_in(
        &report,
        "note: 2 exported objects are managed already by resources of the cluster (",
    );
    assert_in(
        &report,
        &format!("Config {adopted_slug} (by Config {namespace}/my-routing)"),
    );
    assert_in(&report, "pass --skip-managed to leave them out");
    // The fresh one's name is a live resource's: it takes another.
    assert!(
        Path::new(listed)
            .join("config-chat-routing-eu-2.yaml")
            .exists()
    );
    assert!(
        !Path::new(listed)
            .join("config-chat-routing-eu.yaml")
            .exists()
    );

    let mut export = export_from_cluster(&out_dir, &namespace, &kubeconfig);
    export.push("--skip-managed");
    let out = aigw_async(connected(&export, &url, &token)).await;
    let report = exited(&out, 0);
    for (slug, live) in [
        (&adopted_slug, "my-routing"),
        (&billing_slug, "chat-routing-eu"),
    ] {
        assert_in(
            &report,
            &format!(
                "skipped Config {slug}: managed already by the Config {namespace}/{live} of the cluster, which is its manifest (--skip-managed)"
            ),
        );
    }
    assert_in(&report, "exported 1 Config");
    let file = Path::new(&out_dir).join("config-chat-routing-eu-2.yaml");
    let yaml = std::fs::read_to_string(&file).unwrap();
    let manifest: Config = serde_yaml::from_str(&yaml).unwrap();
    assert_eq!(manifest.spec.slug.as_deref(), Some(fresh_slug.as_str()));

    // Applied: the fresh one adopted, nothing live changed, nothing written to the API.
    h.reset_stats().await;
    create_yaml::<Config>(&h, &yaml).await;
    h.wait_for::<Config>("chat-routing-eu-2", WAIT, |c| c.ready())
        .await;
    let billing = h
        .wait_for::<Config>("chat-routing-eu", WAIT, |c| c.ready())
        .await;
    assert_eq!(billing.status.and_then(|s| s.slug), Some(billing_slug));
    h.wait_for::<Config>("my-routing", WAIT, |c| c.ready())
        .await;
    let stats = h.stats().await;
    assert_eq!(
        writes(&stats),
        0,
        "adopting the export wrote to the API: {stats}"
    );
    h.stop().await;
}

/// A placeholder Secret never takes the name of a live Secret where it will be applied:
/// applied, its empty values would overwrite what that Secret holds. Export lists only the
/// Secrets' names; without `--kubeconfig` it cannot know, and the placeholder keeps its name.
#[tokio::test]
async fn export_names_no_placeholder_secret_after_a_live_secret() {
    let h = Harness::start("gitops-export-secret-names").await;
    let document = json!({"targets": [{"provider": "openai", "api_key": "sk-export-names-1"}]});
    let body = json!({"name": "Billing Routing", "config": document});
    h.call(Method::POST, "/ai_gw/v2/configs", Some(body)).await;
    // Another team's Secret, called what the placeholder would be.
    h.env
        .create_from::<Secret>(json!({
            "metadata": {"name": "billing-routing-secrets"},
            "stringData": {"password": "kept-export-names-1"}
        }))
        .await;

    let dir = tempfile::tempdir().unwrap();
    let token = token_file(dir.path(), TOKEN);
    let url = h.emulator.management_url();
    let kubeconfig = support::kubeconfig_path().display().to_string();
    let namespace = h.env.namespace.clone();
    let export = async |out: &str, read_cluster: bool| {
        let mut export = vec!["export", "--out", out, "--namespace", &namespace];
        if read_cluster {
            export.extend(["--kubeconfig", kubeconfig.as_str()]);
        }
        let report = exited(&aigw_async(connected(&export, &url, &token)).await, 0);
        assert!(!report.contains("kept-export-names-1"), "{report}");
        let config = std::fs::read_to_string(Path::new(out).join("config-billing-routing.yaml"));
        let exists = |file: &str| Path::new(out).join(file).exists();
        (
            config.unwrap(),
            exists("secret-billing-routing-secrets.yaml"),
            exists("secret-billing-routing-secrets-2.yaml"),
        )
    };
    let read = dir.path().join("read");
    let (config, same, other) = export(read.to_str().unwrap(), true).await;
    assert!(!same && other, "the placeholder takes another name");
    assert!(
        config.contains("name: billing-routing-secrets-2"),
        "{config}"
    );
    let blind = dir.path().join("blind");
    let (config, same, other) = export(blind.to_str().unwrap(), false).await;
    assert!(
        same && !other,
        "without the cluster the name is not checked"
    );
    assert!(
        config.contains("name: billing-routing-secrets\n"),
        "{config}"
    );

    // A reader that may list Secrets but not Deployments: what it manages is not said (a
    // warning with its cause), and the Secrets' names are checked all the same.
    let user = format!("exporter-{namespace}");
    let rules = json!([
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]},
        {"apiGroups": ["aigw.io"], "verbs": ["list"], "resources": ["configs", "guardrails",
            "clusterguardrails", "integrations", "ratelimitspolicies", "usagelimitspolicies",
            "providers", "mcpintegrations", "mcpservers", "workspaces"]}]);
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": user}, "rules": rules});
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": user},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": user},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]});
    let roles: Api<ClusterRole> = Api::all(h.env.client.clone());
    let bindings: Api<ClusterRoleBinding> = Api::all(h.env.client.clone());
    let role = serde_json::from_value(role).unwrap();
    roles.create(&Default::default(), &role).await.unwrap();
    let binding = serde_json::from_value(binding).unwrap();
    bindings
        .create(&Default::default(), &binding)
        .await
        .unwrap();
    let groups = vec!["system:authenticated".to_string()];
    let partial = support::chart::impersonating_kubeconfig(&user, groups);
    let partial_path = dir.path().join("partial-kubeconfig");
    std::fs::write(&partial_path, serde_yaml::to_string(&partial).unwrap()).unwrap();
    let out = dir.path().join("partial");
    let out = out.to_str().unwrap();
    let export = export_from_cluster(out, &namespace, partial_path.to_str().unwrap());
    // RBAC takes a moment to be enforced: until the list of Secrets is allowed, the export
    // says so.
    let report = support::wait_until(WAIT, || async {
        let report = exited(&aigw_async(connected(&export, &url, &token)).await, 0);
        (!report.contains("failed to list the names of Secrets")).then_some(report)
    })
    .await
    .expect("the reader's RBAC was never enforced");
    assert_in(&report, "warning: failed to list Deployments");
    assert_in(&report, "forbidden");
    let renamed = Path::new(out).join("secret-billing-routing-secrets-2.yaml");
    assert!(renamed.exists(), "{report}");
    let _ = bindings.delete(&user, &Default::default()).await;
    let _ = roles.delete(&user, &Default::default()).await;
    h.stop().await;
}

/// Exported through `--connection FILE`, every manifest names that Connection, so that applied
/// it reaches the tenant it was read from rather than `default`'s. Its placeholder Secret names
/// none (a Secret has no such field), and an export through `default` names none either.
#[tokio::test]
async fn export_through_a_connection_names_it_in_every_manifest() {
    let (_emulator, remote) = Remote::spawn().await;
    let document = json!({"targets": [{"provider": "openai", "api_key": "sk-export-conn-1"}]});
    let body = json!({"name": "Billing Routing", "config": document});
    remote.call(Method::POST, "/ai_gw/v2/configs", body).await;
    let body = json!({"name": "edge-eu", "type": "production",
        "auth_settings": {"gateway_base_url": "https://gw.eu", "workspaces_allowed": ["ws-1"]}});
    remote
        .call(Method::POST, "/ai_gw/admin/v2/deployments", body)
        .await;

    let dir = tempfile::tempdir().unwrap();
    let token = token_file(dir.path(), TOKEN);
    // A Connection manifest of `metadata` at `file`. Its URLs are never used with --token-file:
    // the token goes to --management-url only.
    let connection = |file: &Path, metadata: Value| {
        let manifest = json!({"apiVersion": "aigw.io/v1alpha1", "kind": "Connection",
            "metadata": metadata, "spec": {"managementUrl": "https://unused.example",
            "auth": {"bearerToken": {"secretRef": {"namespace": "aigw-system", "name": "t", "key": "token"}}}}});
        std::fs::write(file, serde_json::to_string(&manifest).unwrap()).unwrap();
    };
    // `aigw VERB FLAG AT --connection FILE` (export --out, plan -f) on the emulator.
    let through = |verb: &str, flag: &str, at: &Path, file: &Path| {
        let cmd = [
            verb,
            flag,
            at.to_str().unwrap(),
            "--connection",
            file.to_str().unwrap(),
        ];
        aigw_async(connected(&cmd, &remote.url, &token))
    };
    let export = async |name: &str| {
        let file = dir.path().join(format!("connection-{name}.yaml"));
        connection(&file, json!({"name": name}));
        let out = dir.path().join(name);
        exited(&through("export", "--out", &out, &file).await, 0);
        let out = out.to_str().unwrap();
        let read = |file: &str| std::fs::read_to_string(Path::new(out).join(file)).unwrap();
        (
            read("config-billing-routing.yaml"),
            read("deployment-edge-eu.yaml"),
            read("secret-billing-routing-secrets.yaml"),
        )
    };
    let (config, deployment, secret) = export("prod-eu").await;
    for manifest in [&config, &deployment] {
        assert!(
            manifest.contains("  managementPolicy: Full\n  connectionRef:\n    name: prod-eu\n"),
            "{manifest}"
        );
        let parsed: Value = serde_yaml::from_str(manifest).unwrap();
        assert_eq!(parsed["spec"]["connectionRef"], json!({"name": "prod-eu"}));
    }
    let config: Config = serde_yaml::from_str(&config).unwrap();
    assert_eq!(config.spec.connection_name(), "prod-eu");
    assert!(!secret.contains("connectionRef"), "{secret}");
    let out = aigw_async(args(&[
        "validate",
        "-f",
        dir.path().join("prod-eu").to_str().unwrap(),
    ]));
    exited(&out.await, 0);

    let (config, deployment, _) = export("default").await;
    assert!(!config.contains("connectionRef") && !deployment.contains("connectionRef"));

    // Planned against another Connection than the one they name, the manifests are said so.
    let exported = dir.path().join("prod-eu");
    let plan = |connection: &str| {
        let file = dir.path().join(format!("connection-{connection}.yaml"));
        through("plan", "-f", &exported, &file)
    };
    let report = text(&plan("default").await);
    assert_in(
        &report,
        "note: 2 manifests name another Connection than default (Config billing-routing names prod-eu, Deployment edge-eu names prod-eu)",
    );
    let report = text(&plan("prod-eu").await);
    assert!(!report.contains("another Connection"), "{report}");

    // A file naming no Connection, or not as one can be named, is refused: the manifests
    // would go through `default`, or be refused at admission.
    for metadata in [json!({}), json!({"name": "Prod_EU"})] {
        let file = dir.path().join("unnamed.yaml");
        connection(&file, metadata);
        let out = dir.path().join("unnamed");
        let report = exited(&through("export", "--out", &out, &file).await, 1);
        assert_in(&report, "unnamed.yaml: metadata.name");
        assert!(!out.exists(), "nothing is written: {report}");
    }
}

/// camelCase credential keys (as guardrail plugins spell them) are refused in plain text like
/// snake_case ones, by the document check (review F14: both were accepted), which names the
/// exact path (admission refuses them by the kind's policy; the CRD has no rule for them).
#[test]
fn validate_refuses_camel_case_credentials_in_plain_text() {
    let manifests = "apiVersion: aigw.io/v1alpha1\nkind: Guardrail\nmetadata: {name: guard, namespace: team-a}\n\
        spec: {name: guard, workspaceId: 9f3c2b1a-0d4e-4f6a-8b7c-1e2d3f4a5b6c, checks: [{id: bedrock.guard, parameters: {accessKeySecret: wJalrXUtnFEMI, region: us-east-1}}]}\n\
        ---\napiVersion: aigw.io/v1alpha1\nkind: Config\nmetadata: {name: c, namespace: team-a}\n\
        spec: {name: c, config: {targets: [{provider: \"@x\", awsSessionToken: tok-1}]}}\n";
    let out = aigw_stdin(&["validate", "-f", "-"], manifests);
    let report = exited(&out, 1);
    assert_in(&report, "/checks/0/parameters/accessKeySecret");
    assert_in(
        &report,
        "spec.config holds credentials in plain text at /targets/0/awsSessionToken",
    );
    assert!(
        !report.contains("wJalrXUtnFEMI") && !report.contains("tok-1"),
        "{report}"
    );
}

/// `aigw plan` without `--kubeconfig` cannot know the `secretRefs` of the live resource: a pull
/// request that drops an entry (and its field) leaves the value its Secret gave the remote
/// document at a path the manifest no longer has. That value is hidden in place, on the text
/// and the JSON output (attack on issue 27). Before, the removed line printed it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_without_a_kubeconfig_hides_a_value_at_a_dropped_path() {
    const VALUE: &str = "plan-leak-value-0001";
    let (emulator, remote) = Remote::spawn().await;
    let created = remote
        .call(
            Method::POST,
            "/ai_gw/v2/configs",
            json!({"name": "dropped-ref", "config": {"strategy": {"mode": "single"},
                   "targets": [{"provider": "@openai", "tenant_label": VALUE}]}}),
        )
        .await;
    let slug = created["slug"].as_str().expect("slug").to_string();
    let url = emulator.management_url();
    let manifest = format!(
        "apiVersion: aigw.io/v1alpha1\nkind: Config\nmetadata: {{name: dropped-ref, namespace: team-a}}\nspec: {{name: dropped-ref, slug: {slug}, config: {{strategy: {{mode: single}}, targets: [{{provider: '@openai'}}]}}}}\n"
    );
    for (output, code, plan) in support::cli::plan_each_output(&url, TOKEN, &manifest).await {
        assert_eq!(code, Some(2), "{plan}");
        assert!(
            !plan.contains(VALUE),
            "[{output}] the value was printed:\n{plan}"
        );
        assert!(
            plan.contains("tenant_label"),
            "[{output}] the change shows:\n{plan}"
        );
    }
}

/// `aigw plan` resolves a `workspaceRef` as the operator does: with `--kubeconfig` the create is
/// planned in the UUID the Workspace recorded; without cluster access the entry says the
/// operator would wait (`WorkspaceNotReady`), a conflict (exit 1). Nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_resolves_a_workspace_named_by_resource_through_the_cluster() {
    let h = Harness::start("gitops-wsref").await;
    let name = h.cluster_name("planned");
    h.create_cluster::<aigw::resources::Workspace>("planned", json!({"name": "Planned"}))
        .await;
    let workspaces = Api::<aigw::resources::Workspace>::all(h.env.client.clone());
    let id = support::wait_until(WAIT, || async {
        let w = workspaces.get_opt(&name).await.ok()??;
        w.ready().then(|| w.status?.id).flatten()
    })
    .await
    .expect("the Workspace is Ready");
    let dir = tempfile::tempdir().unwrap();
    let token = token_file(dir.path(), TOKEN);
    let url = h.emulator.management_url();
    let manifest = dir.path().join("config.yaml");
    std::fs::write(
        &manifest,
        format!(
            "apiVersion: aigw.io/v1alpha1\nkind: Config\nmetadata: {{name: by-ref, namespace: {ns}}}\n\
             spec: {{name: by-ref, workspaceRef: {{name: {name}}}, config: {{retry: {{attempts: 2}}}}}}\n",
            ns = h.env.namespace
        ),
    )
    .unwrap();
    let manifest = manifest.display().to_string();
    h.reset_stats().await;
    let kubeconfig = support::kubeconfig_path().display().to_string();
    let common = [
        "plan",
        "-f",
        &manifest,
        "--management-url",
        &url,
        "--token-file",
        &token,
    ];
    let mut with_cluster = common.to_vec();
    with_cluster.extend(["--kubeconfig", kubeconfig.as_str()]);
    let out = aigw_async(args(&with_cluster)).await;
    let report = text(&out);
    assert_eq!(code(&out), 2, "a create is a change: {report}");
    assert!(
        report.contains(&id),
        "planned in the Workspace's UUID: {report}"
    );
    let out = aigw_async(args(&common)).await;
    let report = exited(&out, 1);
    assert_in(&report, "WorkspaceNotReady");
    assert_eq!(writes(&h.stats().await), 0, "a plan writes nothing");
    h.stop().await;
}
