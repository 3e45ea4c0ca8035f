//! Secret values never leave the Secret: against a real kube-apiserver, the emulator over HTTP and
//! the built binary, Secret values a Config's `spec.secretRefs` places where a check quotes what
//! it finds (guardrail references, wrongly typed lists, paths through a non-object) and the
//! credentials a tenant holds (`vertex_service_account_json`, header values) appear in no status,
//! event, log line, plan or exported file.

use crate::support;

use std::process::{Command, Output};
use std::time::Duration;

use aigw::emulator::EmulatorOptions;
use aigw::resources::{Config, Connection};
use k8s_openapi::api::core::v1::Secret;
use kube::api::PostParams;
use reqwest::Method;
use serde_json::{Value, json};
use support::TestEnv;
use support::harness::{Harness, TOKEN, call_api, captured_logs};
use support::objects::{Conditions, object, secret};

const WAIT: Duration = Duration::from_secs(30);

/// A value no test data holds by chance.
pub(super) fn distinctive(what: &str) -> String {
    format!(
        "s3cr3t-{what}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
}

fn secret_ref(path: &str, key: &str) -> Value {
    json!({"path": path, "secretKeyRef": {"name": "db", "key": key}})
}

fn aigw(args: &[String]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aigw"))
        .args(args)
        .output()
        .expect("failed to run aigw")
}

/// Runs the binary off the async runtime, so the in-process emulator keeps serving.
pub(super) async fn aigw_async(args: &[&str]) -> Output {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || aigw(&args))
        .await
        .unwrap()
}

pub(super) fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Fails naming where `value` showed up, if it did.
pub(super) fn assert_absent(values: &[String], place: &str, haystack: &str) {
    for value in values {
        assert!(
            !haystack.contains(value.as_str()),
            "a Secret value ({value}) is in {place}:\n{haystack}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checked_secret_values_stay_out_of_status_events_and_logs() {
    let h = Harness::start_with("secrecy", Duration::from_secs(2)).await;
    let hook = distinctive("hook");
    let nested = distinctive("nested");
    let typed = distinctive("typed");
    let parent = distinctive("parent");
    let child = distinctive("child");
    let known = format!("pg-{}", distinctive("known"));
    let values = [&hook, &nested, &typed, &parent, &child, &known].map(|v| v.to_string());
    // The one guardrail a Secret names that exists: its slug is itself a Secret value.
    let seed = json!({"guardrails": [{"slug": known, "name": "known"}]});
    h.post("/_emulator/seed", seed).await;
    let pairs = [
        ("password", hook.as_str()),
        ("nested", nested.as_str()),
        ("typed", typed.as_str()),
        ("parent", parent.as_str()),
        ("child", child.as_str()),
        ("known", known.as_str()),
    ];
    support::create(&h.env.api(), &secret("db", &pairs)).await;
    let configs = [
        (
            "hook",
            json!({"before_request_hooks": [{}]}),
            vec![secret_ref("/before_request_hooks/0/id", "password")],
        ),
        (
            "nested",
            json!({"strategy": {"mode": "fallback"},
                   "targets": [{"provider": "@a", "input_guardrails": [{}]}]}),
            vec![secret_ref("/targets/0/input_guardrails/0/id", "nested")],
        ),
        (
            "typed",
            json!({"provider": "@a"}),
            vec![secret_ref("/output_guardrails", "typed")],
        ),
        (
            // One path inside another's value is refused at admission (below); a document
            // value that is no object is found at run time.
            "parent",
            json!({"provider": "@a", "custom_headers": "plain"}),
            vec![secret_ref("/custom_headers/x-key", "child")],
        ),
        (
            "resolved",
            json!({"after_request_hooks": [{}]}),
            vec![secret_ref("/after_request_hooks/0/id", "known")],
        ),
    ];
    for (name, document, refs) in configs {
        let spec = json!({"name": name, "config": document, "secretRefs": refs});
        support::objects::create::<Config>(&h.env, name, spec).await;
    }
    let nested_refs = json!({"name": "nested-refs", "config": {"provider": "@a"}, "secretRefs": [
        secret_ref("/custom_headers", "parent"), secret_ref("/custom_headers/x-key", "child")]});
    let created = h
        .env
        .api::<Config>()
        .create(
            &Default::default(),
            &support::objects::object("Config", "nested-refs", nested_refs),
        )
        .await;
    let refused = support::refusal(created, "a secretRefs path inside another's value");
    assert!(refused.contains("inside another's value"), "{refused}");

    // Each stalled with `reason`, its condition `type_` saying where the Secret's value went.
    for (name, reason, type_, says) in [
        (
            "hook",
            "UnresolvedGuardrail",
            "GuardrailsResolved",
            "the value of secret db/password at /before_request_hooks/0/id",
        ),
        (
            "nested",
            "UnresolvedGuardrail",
            "Ready",
            "the value of secret db/nested at /targets/0/input_guardrails/0/id",
        ),
        (
            "typed",
            "InvalidSpec",
            "Ready",
            "/output_guardrails must be a list, but it is the value of secret db/typed",
        ),
        (
            "parent",
            "InvalidSpec",
            "Ready",
            "/custom_headers/x-key cannot be set",
        ),
    ] {
        let config = h
            .wait_for::<Config>(name, WAIT, |c| c.stalled_with(reason))
            .await;
        let (_, _, message) = config.condition(type_).unwrap();
        assert!(message.contains(says), "{message}");
    }
    // The Secret's value is what is looked up: the guardrail it names exists, so it is written.
    let resolved = h.wait_for::<Config>("resolved", WAIT, |c| c.ready()).await;
    let slug = resolved
        .status
        .as_ref()
        .and_then(|s| s.slug.clone())
        .unwrap();
    let remote = h.get(&format!("/ai_gw/v2/configs/{slug}")).await;
    assert!(
        remote["config"].as_str().unwrap().contains(known.as_str()),
        "the request body lacks the Secret's value: {remote}"
    );
    // Let failed reconciles retry and log a few times before looking.
    tokio::time::sleep(Duration::from_secs(3)).await;

    for name in ["hook", "nested", "typed", "parent", "resolved"] {
        let current = h.env.api::<Config>().get(name).await.unwrap();
        let whole = serde_json::to_string(&current).unwrap();
        assert_absent(&values, &format!("Config {name}"), &whole);
    }
    assert_absent(&values, "the events", &h.env.events_text().await);
    let logs = captured_logs();
    assert!(
        logs.contains(&h.env.namespace),
        "the operator logged nothing about the test namespace"
    );
    assert_absent(&values, "the operator log", &logs);
    h.stop().await;
}

/// A tenant whose config holds a Vertex service account, provider headers and forwarded
/// headers: the export commits none of them and the plan prints none of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_and_export_never_print_vertex_credentials_or_header_values() {
    let emulator = aigw::emulator::spawn(EmulatorOptions::new(TOKEN))
        .await
        .unwrap();
    let url = emulator.management_url();
    let vertex = distinctive("vertex");
    let header = distinctive("header");
    let forwarded = distinctive("forwarded");
    let new_header = distinctive("new-header");
    let values = [&vertex, &header, &forwarded, &new_header].map(|v| v.to_string());
    let created = call_api(
        &reqwest::Client::new(),
        &url,
        Method::POST,
        "/ai_gw/v2/configs",
        Some(json!({"name": "vertex", "config": {
            "provider": "vertex-ai", "vertex_project_id": "p-1",
            "vertex_service_account_json": vertex,
            "custom_headers": {"x-team": header},
            "forward_headers": {"x-upstream": forwarded},
            "retry": {"attempts": 2}}})),
    )
    .await;
    let slug = created["slug"].as_str().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, TOKEN).unwrap();
    let token = token.to_str().unwrap();
    let out_dir = dir.path().join("export");
    let out_dir = out_dir.to_str().unwrap();

    let out = aigw_async(&[
        "export",
        "--out",
        out_dir,
        "--namespace",
        "team-a",
        "--management-url",
        &url,
        "--token-file",
        token,
    ])
    .await;
    assert!(out.status.success(), "{}", text(&out));
    assert_absent(&values, "the export's output", &text(&out));
    let mut exported = String::new();
    for entry in std::fs::read_dir(out_dir).unwrap() {
        exported.push_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap());
    }
    assert_absent(&values, "the exported files", &exported);
    for path in [
        "/vertex_service_account_json",
        "/custom_headers/x-team",
        "/forward_headers/x-upstream",
    ] {
        assert!(
            exported.contains(&format!("path: {path}")),
            "{path} is not a secretRefs path of the export:\n{exported}"
        );
    }

    // A manifest that adopts the config and changes its header in plain text: the plan says
    // the header changes and shows neither value, nor the Vertex key it would drop.
    let manifest = format!(
        "apiVersion: aigw.io/v1alpha1\nkind: Config\nmetadata: {{name: vertex, namespace: team-a}}\nspec:\n  slug: {slug}\n  name: vertex\n  config: {{provider: vertex-ai, vertex_project_id: p-1, retry: {{attempts: 3}}, custom_headers: {{x-team: {new_header}}}}}\n"
    );
    for (output, code, plan) in support::cli::plan_each_output(&url, TOKEN, &manifest).await {
        assert_eq!(code, Some(2), "{plan}");
        assert!(plan.contains("<masked, changed>"), "{plan}");
        assert_absent(&values, &format!("the {output} plan"), &plan);
    }
}

/// `plan --connection` reads the Connection's Secret from the operator's namespace only: a
/// Connection naming another namespace is refused, whatever that namespace holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_reads_connection_secrets_only_from_the_operator_namespace() {
    let operator = TestEnv::new("secrecy-op").await;
    let elsewhere = TestEnv::new("secrecy-else").await;
    for env in [&operator, &elsewhere] {
        support::create(
            &env.api::<Secret>(),
            &secret("api-token", &[("token", TOKEN)]),
        )
        .await;
    }
    let emulator = aigw::emulator::spawn(EmulatorOptions::new(TOKEN))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    // The cluster's Connection (what plan uses) and the same manifest on disk.
    let connection = async |namespace: &str| -> String {
        let name = format!("plan-{namespace}");
        let spec = json!({"managementUrl": emulator.management_url(),
            "auth": {"bearerToken": {"secretRef": {"namespace": namespace, "name": "api-token", "key": "token"}}}});
        create_connection(&operator, &name, &spec).await;
        connection_file(dir.path(), &name, &spec)
    };
    let manifest = dir.path().join("config.yaml");
    std::fs::write(
        &manifest,
        format!(
            "apiVersion: aigw.io/v1alpha1\nkind: Config\nmetadata: {{name: fresh, namespace: {}}}\nspec: {{name: fresh, config: {{retry: {{attempts: 2}}}}}}\n",
            operator.namespace
        ),
    )
    .unwrap();
    let manifest = manifest.to_str().unwrap();
    let kubeconfig = support::kubeconfig_path().to_str().unwrap();
    let plan = |connection: String, namespace: Option<String>| async move {
        let mut args = vec![
            "plan".to_string(),
            "-f".into(),
            manifest.into(),
            "--connection".into(),
            connection,
            "--kubeconfig".into(),
            kubeconfig.into(),
        ];
        if let Some(namespace) = namespace {
            args.extend(["--connection-secret-namespace".into(), namespace]);
        }
        tokio::task::spawn_blocking(move || aigw(&args))
            .await
            .unwrap()
    };
    let own = Some(operator.namespace.clone());

    let out = plan(connection(&elsewhere.namespace).await, own.clone()).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains(&format!(
            "Connections may only read Secrets in namespace {}",
            operator.namespace
        )),
        "{}",
        text(&out)
    );
    let ours = connection(&operator.namespace).await;
    let out = plan(ours.clone(), None).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("--connection-secret-namespace"),
        "{}",
        text(&out)
    );
    let out = plan(ours, own).await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("Config"), "{}", text(&out));
    assert!(!text(&out).contains(TOKEN), "{}", text(&out));
    for namespace in [&operator.namespace, &elsewhere.namespace] {
        delete_connection(&operator, &format!("plan-{namespace}")).await;
    }
    operator.cleanup().await;
    elsewhere.cleanup().await;
}

/// `plan`/`export`/`history --connection FILE --kubeconfig` send credentials only where the
/// cluster's Connection of that name says: a file (which a pull request can edit) naming another
/// token URL, management URL, gateway URL or Secret is refused, naming the field, and a listener
/// at the URL it names receives nothing; `--token-file` with a file needs `--management-url`.
/// The file that matches the cluster's Connection plans as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_file_never_decides_where_credentials_go() {
    const CLIENT_SECRET: &str = "oauth-client-secret-5d1c";
    let env = TestEnv::new("secrecy-reach").await;
    let secrets = env.api::<Secret>();
    for (name, pairs) in [
        (
            "oauth",
            &[
                ("client_id", "aigw-client"),
                ("client_secret", CLIENT_SECRET),
            ][..],
        ),
        ("integration-key", &[("api-key", "sk-upstream-77aa01")][..]),
    ] {
        support::create(&secrets, &secret(name, pairs)).await;
    }
    let mut options = EmulatorOptions::new(TOKEN);
    options.oauth = Some(aigw::emulator::OAuthOptions {
        client_id: "aigw-client".into(),
        client_secret: CLIENT_SECRET.into(),
        token_ttl: Duration::from_secs(300),
    });
    let emulator = aigw::emulator::spawn(options).await.unwrap();
    // Where a hostile file would send the credentials: every connection to it is counted.
    let trap = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let trap_url = format!("http://{}", trap.local_addr().unwrap());
    let received = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = received.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = trap.accept().await {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(socket);
        }
    });

    let ns = env.namespace.clone();
    let name = format!("reach-{ns}");
    let oauth_ref = |key: &str| json!({"namespace": ns, "name": "oauth", "key": key});
    let live = json!({"managementUrl": emulator.management_url(),
        "gatewayUrl": emulator.gateway_url(),
        "auth": {"oauth2ClientCredentials": {
            "tokenUrl": format!("{}/oauth2/access_token", emulator.management_url().trim_end_matches('/')),
            "scope": "tsg_id:1234",
            "clientIdRef": oauth_ref("client_id"), "clientSecretRef": oauth_ref("client_secret")}},
        "headers": [{"name": "x-tsg-id", "value": "1234"}]});
    create_connection(&env, &name, &live).await;

    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("config.yaml");
    std::fs::write(
        &manifest,
        format!(
            "apiVersion: aigw.io/v1alpha1\nkind: Config\nmetadata: {{name: fresh, namespace: {ns}}}\nspec: {{name: fresh, config: {{retry: {{attempts: 2}}}}}}\n"
        ),
    )
    .unwrap();
    let manifest = manifest.to_str().unwrap().to_string();
    let kubeconfig = support::kubeconfig_path().to_str().unwrap().to_string();
    let token = dir.path().join("token");
    std::fs::write(&token, TOKEN).unwrap();
    let token = token.to_str().unwrap().to_string();
    let run = |command: &str, file: &str, extra: &[&str]| {
        let mut args: Vec<String> = vec![command.into()];
        if command == "plan" {
            args.extend(["-f".into(), manifest.clone()]);
        } else {
            args.extend([
                "--out".into(),
                dir.path().join("export").display().to_string(),
            ]);
        }
        args.extend(
            ["--connection", file, "--connection-secret-namespace", &ns]
                .iter()
                .map(|s| s.to_string()),
        );
        args.extend(extra.iter().map(|s| s.to_string()));
        async move {
            tokio::task::spawn_blocking(move || aigw(&args))
                .await
                .unwrap()
        }
    };
    let with_cluster = ["--kubeconfig", kubeconfig.as_str()];

    let hostile: [(&str, Value, &str); 5] = [
        ("managementUrl", json!(trap_url), "spec.managementUrl"),
        (
            "gatewayUrl",
            json!(format!("{trap_url}/v1")),
            "spec.gatewayUrl",
        ),
        (
            "/auth/oauth2ClientCredentials/tokenUrl",
            json!(format!("{trap_url}/token")),
            "spec.auth.oauth2ClientCredentials.tokenUrl",
        ),
        (
            "/auth/oauth2ClientCredentials/clientSecretRef",
            json!({"namespace": ns, "name": "integration-key", "key": "api-key"}),
            "spec.auth.oauth2ClientCredentials.clientSecretRef",
        ),
        (
            "headers",
            json!([{"name": "x-tsg-id", "valueFrom": {"secretRef": {"namespace": ns, "name": "integration-key", "key": "api-key"}}}]),
            "spec.headers[0]",
        ),
    ];
    for (at, value, field) in hostile {
        let mut spec = live.clone();
        match at.strip_prefix('/') {
            Some(pointer) => *spec.pointer_mut(&format!("/{pointer}")).unwrap() = value,
            None => spec[at] = value,
        }
        let file = connection_file(dir.path(), &name, &spec);
        for command in ["plan", "export"] {
            let out = run(command, &file, &with_cluster).await;
            let said = text(&out);
            assert_eq!(
                out.status.code(),
                Some(1),
                "{command} with {field} changed: {said}"
            );
            assert!(
                said.contains(&format!(
                    "{field} differs from the cluster's Connection {name}"
                )),
                "{command} with {field} changed: {said}"
            );
            assert!(
                !said.contains(CLIENT_SECRET) && !said.contains("sk-upstream"),
                "{said}"
            );
        }
    }

    // A file naming no Connection of the cluster is refused too: the file is never the source.
    let file = connection_file(dir.path(), &format!("absent-{ns}"), &live);
    let out = run("plan", &file, &with_cluster).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("does not exist in the cluster"),
        "{}",
        text(&out)
    );

    // With --token-file, the token goes only to --management-url, with or without a cluster.
    let mut pointed = live.clone();
    pointed["managementUrl"] = json!(trap_url);
    let trapped = connection_file(dir.path(), &format!("tokenfile-{ns}"), &pointed);
    for extra in [
        &["--token-file", token.as_str()][..],
        &[
            "--token-file",
            token.as_str(),
            "--kubeconfig",
            kubeconfig.as_str(),
        ][..],
    ] {
        let out = run("plan", &trapped, extra).await;
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert!(
            text(&out).contains("--token-file with --connection needs --management-url"),
            "{}",
            text(&out)
        );
    }

    assert_eq!(
        received.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the URL a Connection file named was contacted"
    );

    // The file that matches the cluster's Connection plans, over OAuth, as the operator would.
    let file = connection_file(dir.path(), &name, &live);
    let out = run("plan", &file, &with_cluster).await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("Config"), "{}", text(&out));
    assert!(!text(&out).contains(CLIENT_SECRET), "{}", text(&out));
    // And --token-file with --management-url still works with a file Connection.
    let url = emulator.management_url();
    let out = run(
        "plan",
        &file,
        &["--token-file", &token, "--management-url", &url],
    )
    .await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert_eq!(received.load(std::sync::atomic::Ordering::SeqCst), 0);

    // An API that quotes the token it refused: the export's error conceals the access token the
    // CLI obtained with the Connection's client credentials, and the --token-file token.
    let faults = json!({"quote_credentials": true, "failing_routes": {
        "GET /ai_gw/v2/configs": 400, "GET /ai_gw/v2/configs/{slug}": 400}});
    let answer = reqwest::Client::new()
        .put(format!("{}/_emulator/faults", url.trim_end_matches('/')))
        .bearer_auth(TOKEN)
        .json(&faults)
        .send()
        .await
        .unwrap();
    assert!(answer.status().is_success(), "{}", answer.status());
    for extra in [
        &with_cluster[..],
        &["--token-file", &token, "--management-url", &url][..],
    ] {
        let out = run("export", &file, extra).await;
        let said = text(&out);
        assert_eq!(out.status.code(), Some(1), "{said}");
        assert!(said.contains("for token <secret>"), "{said}");
        assert!(
            !said.contains("for token emu-") && !said.contains(TOKEN),
            "{said}"
        );
    }

    delete_connection(&env, &name).await;
    env.cleanup().await;
}

/// Creates the cluster-scoped Connection `name` with `spec`.
async fn create_connection(env: &TestEnv, name: &str, spec: &Value) {
    let connection: Connection = object("Connection", name, spec.clone());
    kube::Api::<Connection>::all(env.client.clone())
        .create(&PostParams::default(), &connection)
        .await
        .unwrap();
}

async fn delete_connection(env: &TestEnv, name: &str) {
    let _ = kube::Api::<Connection>::all(env.client.clone())
        .delete(name, &Default::default())
        .await;
}

/// Writes a Connection manifest `name` with `spec` into `dir`; returns its path.
fn connection_file(dir: &std::path::Path, name: &str, spec: &Value) -> String {
    let path = dir.join(format!(
        "connection-{name}-{}.yaml",
        uuid::Uuid::new_v4().simple()
    ));
    let manifest = json!({"apiVersion": "aigw.io/v1alpha1", "kind": "Connection",
        "metadata": {"name": name}, "spec": spec});
    std::fs::write(&path, serde_json::to_string(&manifest).unwrap()).unwrap();
    path.display().to_string()
}
