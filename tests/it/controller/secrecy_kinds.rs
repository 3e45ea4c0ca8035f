//! Secret values of issue 29's kinds never leave their Secret (the machinery of
//! [`super::secrecy`], over a table of kinds): against a real kube-apiserver, the emulator over
//! HTTP and the built binary, a SecretReference's `auth_config`, an McpIntegration's
//! `configurations` and the key and `secretRefs` values of an Integration that also maps a field
//! through `secretMappings` appear in no status, event, operator log line or metric, nor in what
//! `aigw api`, `export`, `plan`, `validate` and `history` print: not after the values moved to
//! other paths of their Secret-backed documents, nor when the API answers the writes with errors
//! that echo their bodies.

use crate::support;

use std::path::Path;
use std::time::Duration;

use aigw::resources::{Integration, McpIntegration, SecretReference};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::harness::{Harness, TOKEN, captured_logs};
use support::proxy::{delete_echo_proxy, echo_proxy};

use super::secrecy::{aigw_async, distinctive, text};

const WAIT: Duration = Duration::from_secs(45);

/// One kind of the table: the Secret its values come from (its data before and after the values
/// move to other paths), the spec naming it, and its `aigw api` group.
struct Case {
    kind: &'static str,
    name: &'static str,
    secret: &'static str,
    before: Value,
    after: Value,
    spec: Value,
    api: &'static str,
}

/// Every Secret-backed value of the table, the table, and the Integration spec after its
/// `secretRefs` value moved to another configuration field.
fn table(h: &Harness) -> (Vec<String>, Vec<Case>, Value) {
    let [
        key_id,
        access_key,
        header,
        client_secret,
        jwt,
        api_key,
        host,
    ] = ["akid", "sak", "hdr", "cs", "jwt", "key", "host"].map(distinctive);
    // A number a JSON value of the Secret holds: a Secret value too, though not a string.
    let pin = 70_000_000_000u64 + u64::from(uuid::Uuid::new_v4().as_fields().0) % 9_999_999_999;
    let auth = |id: &str, secret: &str| {
        json!({"aws_auth_type": "accessKey", "aws_region": "eu-west-1",
               "aws_access_key_id": id, "aws_secret_access_key": secret})
    };
    let jwt_validation = json!({"issuer": "https://idp.example", "shared_secret": jwt,
                                "clock_pin": pin})
    .to_string();
    let upstream_host = format!("https://svc:{host}@upstream.example");
    let integration = |path: &str| {
        json!({"slug": h.cluster_name("upstream"), "name": "Upstream", "aiProviderId": "open-ai",
               "keySecretRef": {"name": "secrecy-upstream", "key": "api-key"},
               "configurations": {"openai_organization": "org-public"},
               "secretRefs": [{"path": path,
                               "secretKeyRef": {"name": "secrecy-upstream", "key": "host"}}],
               "secretMappings": [{"targetField": "configurations.openai_admin_key",
                                   "secretReference": h.cluster_name("vault"),
                                   "secretKey": "admin_key"}],
               "workspaces": []})
    };
    let cases = vec![
        Case {
            kind: "SecretReference",
            name: "vault",
            secret: "secrecy-auth",
            before: auth(&key_id, &access_key),
            // The two credentials swap fields.
            after: auth(&access_key, &key_id),
            spec: json!({"slug": h.cluster_name("vault"), "name": "Vault", "managerType": "aws_sm",
                         "secretPath": "prod/openai", "secretKey": "api_key",
                         "authConfigSecretRef": {"name": "secrecy-auth"}}),
            api: "secret-references",
        },
        Case {
            kind: "McpIntegration",
            name: "tools",
            secret: "secrecy-mcp",
            before: json!({"custom_headers": json!({"x-api-key": header}).to_string(),
                           "client_secret": client_secret, "jwt_validation": jwt_validation}),
            // Each value moves: the header's under another name, the client secret into a
            // header, the JWT settings' secret into the client secret.
            after: json!({"custom_headers": json!({"authorization": header,
                                                   "x-api-key": client_secret}).to_string(),
                          "client_secret": jwt,
                          "jwt_validation": json!({"clock_pin": pin}).to_string()}),
            spec: json!({"slug": h.cluster_name("tools"), "name": "Tools",
                         "url": "https://mcp.example.com/mcp", "authType": "headers",
                         "transport": "http",
                         "configurationsSecretRef": {"name": "secrecy-mcp"}}),
            api: "mcp-integrations",
        },
        Case {
            kind: "Integration",
            name: "upstream",
            secret: "secrecy-upstream",
            before: json!({"api-key": api_key, "host": upstream_host}),
            after: json!({"api-key": api_key, "host": upstream_host}),
            spec: integration("/custom_host"),
            api: "integrations",
        },
    ];
    let values = vec![
        key_id,
        access_key,
        header,
        client_secret,
        jwt,
        pin.to_string(),
        api_key,
        host,
    ];
    (values, cases, integration("/x_upstream_host"))
}

/// The cluster-scoped object `kind`/`name` of this test, as JSON.
async fn get(h: &Harness, kind: &str, name: &str) -> Option<Value> {
    let name = h.cluster_name(name);
    let client = h.env.client.clone();
    let found = match kind {
        "SecretReference" => Api::<SecretReference>::all(client)
            .get_opt(&name)
            .await
            .map(|o| o.map(|o| serde_json::to_value(o).unwrap())),
        "McpIntegration" => Api::<McpIntegration>::all(client)
            .get_opt(&name)
            .await
            .map(|o| o.map(|o| serde_json::to_value(o).unwrap())),
        _ => Api::<Integration>::all(client)
            .get_opt(&name)
            .await
            .map(|o| o.map(|o| serde_json::to_value(o).unwrap())),
    };
    found.ok().flatten()
}

async fn create(h: &Harness, kind: &str, name: &str, spec: &Value) {
    let client = h.env.client.clone();
    let params = PostParams::default();
    match kind {
        "SecretReference" => {
            let object: SecretReference = h.cluster_object(kind, name, spec.clone());
            Api::all(client).create(&params, &object).await.map(|_| ())
        }
        "McpIntegration" => {
            let object: McpIntegration = h.cluster_object(kind, name, spec.clone());
            Api::all(client).create(&params, &object).await.map(|_| ())
        }
        _ => {
            let object: Integration = h.cluster_object(kind, name, spec.clone());
            Api::all(client).create(&params, &object).await.map(|_| ())
        }
    }
    .unwrap();
}

/// A new generation of the object (its description changed).
async fn touch(h: &Harness, kind: &str, name: &str) {
    let (name, params) = (h.cluster_name(name), PatchParams::default());
    let patch = Patch::Merge(json!({"spec": {"description": "tried again"}}));
    let client = h.env.client.clone();
    match kind {
        "SecretReference" => Api::<SecretReference>::all(client)
            .patch(&name, &params, &patch)
            .await
            .map(|_| ()),
        "McpIntegration" => Api::<McpIntegration>::all(client)
            .patch(&name, &params, &patch)
            .await
            .map(|_| ()),
        _ => Api::<Integration>::all(client)
            .patch(&name, &params, &patch)
            .await
            .map(|_| ()),
    }
    .unwrap();
}

async fn delete(h: &Harness, kind: &str, name: &str) {
    let (name, params) = (h.cluster_name(name), Default::default());
    let client = h.env.client.clone();
    match kind {
        "SecretReference" => Api::<SecretReference>::all(client)
            .delete(&name, &params)
            .await
            .map(|_| ()),
        "McpIntegration" => Api::<McpIntegration>::all(client)
            .delete(&name, &params)
            .await
            .map(|_| ()),
        _ => Api::<Integration>::all(client)
            .delete(&name, &params)
            .await
            .map(|_| ()),
    }
    .unwrap();
}

/// Waits until `done` holds of the object's conditions (a list of `(type, status, reason,
/// message)`); panics naming them otherwise.
async fn wait_until(
    h: &Harness,
    kind: &str,
    name: &str,
    what: &str,
    done: impl Fn(&[(String, String, String, String)]) -> bool,
) {
    let conditions = |object: &Value| -> Vec<(String, String, String, String)> {
        let generation = &object["metadata"]["generation"];
        object["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| &c["observedGeneration"] == generation)
            .map(|c| {
                let text = |k: &str| c[k].as_str().unwrap_or_default().to_string();
                (
                    text("type"),
                    text("status"),
                    text("reason"),
                    text("message"),
                )
            })
            .collect()
    };
    let reached = support::wait_until(WAIT, || async {
        let object = get(h, kind, name).await?;
        done(&conditions(&object)).then_some(())
    })
    .await;
    if reached.is_none() {
        panic!(
            "{kind} {name} is not {what}: {:?}\n--- events ---\n{}",
            get(h, kind, name).await.map(|o| o["status"].clone()),
            h.cluster_events_text().await
        );
    }
}

fn ready(conditions: &[(String, String, String, String)]) -> bool {
    conditions
        .iter()
        .any(|(t, s, _, _)| t == "Ready" && s == "True")
}

/// Whether a condition carries the echoing proxy's refusal (concealed or withheld).
fn refused(conditions: &[(String, String, String, String)]) -> bool {
    conditions.iter().any(|(_, _, _, m)| {
        m.contains("invalid request") || m.contains("rejected values") || m.contains("withheld")
    })
}

/// What leaked where: each place whose text holds a value.
struct Leaks(Vec<String>);

impl Leaks {
    fn check(&mut self, values: &[String], place: &str, text: &str) {
        for value in values.iter().filter(|v| text.contains(v.as_str())) {
            self.0.push(format!("--- {value} in {place} ---\n{text}"));
        }
    }
}

/// Runs the built `aigw <command>` with the emulator's URL and a token file (and the cluster's
/// kubeconfig when `kube`), then `rest`; whether it ran to an exit code of 0, 1 or 2, and what
/// it printed.
async fn aigw(h: &Harness, dir: &Path, command: &str, kube: bool, rest: &[&str]) -> (bool, String) {
    let token = dir.join("token");
    std::fs::write(&token, TOKEN).unwrap();
    let url = h.emulator.management_url();
    let kubeconfig = support::kubeconfig_path().to_str().unwrap().to_string();
    let mut args = vec![command];
    if command != "validate" {
        args.extend([
            "--management-url",
            &url,
            "--token-file",
            token.to_str().unwrap(),
        ]);
    }
    if kube {
        args.extend(["--kubeconfig", &kubeconfig]);
    }
    args.extend(rest);
    let output = aigw_async(&args).await;
    let ran = output.status.code().is_some_and(|c| c <= 2);
    (ran, text(&output))
}

/// `object` written as YAML to `dir/name`.
fn write(dir: &Path, name: &str, object: &Value) {
    std::fs::write(dir.join(name), serde_yaml::to_string(object).unwrap()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_29_kinds_keep_secret_values_out_of_every_output() {
    let mut h = Harness::start_with_secret_namespace("secrecy-kinds", Duration::from_secs(1)).await;
    let (values, cases, moved_integration) = table(&h);
    for case in &cases {
        h.put_secret(case.secret, case.before.clone(), true).await;
    }
    for case in &cases {
        create(&h, case.kind, case.name, &case.spec).await;
    }
    for case in &cases {
        wait_until(&h, case.kind, case.name, "Ready", ready).await;
    }
    let remote = h.state().await.to_string();
    for value in &values {
        assert!(
            remote.contains(value.as_str()),
            "{value} did not reach the API"
        );
    }

    // The API refuses every write, echoing it: new objects of each kind (creates), and the
    // values moved inside each Secret (updates), the Integration's to another field.
    let direct = h.emulator.management_url();
    let proxy = echo_proxy(direct.clone()).await;
    h.restart_operator_via(&proxy).await;
    for case in &cases {
        h.put_secret(case.secret, case.after.clone(), true).await;
        let mut spec = case.spec.clone();
        spec["slug"] = json!(h.cluster_name(&format!("{}-2", case.name)));
        create(&h, case.kind, &format!("{}-2", case.name), &spec).await;
    }
    let integrations = Api::<Integration>::all(h.env.client.clone());
    support::merge_patch(
        &integrations,
        &h.cluster_name("upstream"),
        json!({"spec": {"secretRefs": moved_integration["secretRefs"]}}),
    )
    .await;
    for case in &cases {
        for name in [case.name.to_string(), format!("{}-2", case.name)] {
            wait_until(&h, case.kind, &name, "refused by the echoing API", refused).await;
        }
    }
    // Failed reconciles retry and log a few times.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut leaks = Leaks(Vec::new());
    let mut statuses = String::new();
    for case in &cases {
        for name in [case.name.to_string(), format!("{}-2", case.name)] {
            let object = get(&h, case.kind, &name).await.unwrap();
            statuses.push_str(&format!("{} {name}: {}\n", case.kind, object["status"]));
            leaks.check(
                &values,
                &format!("{} {name}", case.kind),
                &object.to_string(),
            );
        }
    }
    eprintln!("statuses while the API echoes:\n{statuses}");
    leaks.check(&values, "the events", &h.cluster_events_text().await);
    leaks.check(&values, "the metrics", &h.ctx.metrics.encode());

    // `aigw api` creates through the echoing API: the error it prints hides the body's values.
    let dir = tempfile::tempdir().unwrap();
    let bodies = [
        (
            "secret-references",
            json!({"name": "cli", "manager_type": "aws_sm",
            "secret_path": "p", "auth_config": cases[0].before}),
        ),
        (
            "mcp-integrations",
            json!({"name": "cli", "url": "https://mcp.example.com/mcp",
            "auth_type": "headers", "transport": "http",
            "configurations": {"client_secret": values[3], "custom_headers": {"x-api-key": values[2]}}}),
        ),
        (
            "integrations",
            json!({"name": "cli", "ai_provider_id": "open-ai", "key": values[6],
            "create_default_provider": false,
            "configurations": {"custom_host": format!("https://svc:{}@upstream.example", values[7])}}),
        ),
    ];
    for (group, body) in &bodies {
        let file = dir.path().join(format!("{group}.json"));
        std::fs::write(&file, body.to_string()).unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, TOKEN).unwrap();
        let out = aigw_async(&[
            "api",
            "--management-url",
            &proxy,
            "--token-file",
            token.to_str().unwrap(),
            group,
            "create",
            "--file",
            file.to_str().unwrap(),
        ])
        .await;
        let said = text(&out);
        assert!(
            !out.status.success(),
            "[{group}] the echoing API refused: {said}"
        );
        leaks.check(&values, &format!("aigw api {group} create (echoed)"), &said);
    }

    // The API answers again: the moved values are written, and every reading tool runs.
    // A refused write stalls its generation: a new one is tried again.
    h.restart_operator_via(&direct).await;
    for case in &cases {
        touch(&h, case.kind, case.name).await;
    }
    for case in &cases {
        wait_until(&h, case.kind, case.name, "Ready again", ready).await;
    }
    let remote = h.state().await.to_string();
    assert!(
        remote.contains("x_upstream_host"),
        "the Integration's value did not move: {remote}"
    );
    for case in &cases {
        let slug = h.cluster_name(case.name);
        for command in [&["get", slug.as_str()][..], &["list"][..]] {
            let mut rest = vec![case.api];
            rest.extend(command);
            let (ran, out) = aigw(&h, dir.path(), "api", false, &rest).await;
            assert!(ran, "{rest:?}: {out}");
            assert!(
                case.api == "integrations" || out.contains(&slug),
                "{rest:?}: {out}"
            );
            leaks.check(&values, &format!("aigw api {}", rest.join(" ")), &out);
        }
        let history = format!("{}/{}", case.kind.to_lowercase(), slug);
        let (_, out) = aigw(&h, dir.path(), "history", true, &[&history]).await;
        leaks.check(&values, &format!("aigw history {history}"), &out);
    }
    let exported = dir.path().join("export");
    let (ran, out) = aigw(
        &h,
        dir.path(),
        "export",
        true,
        &["--out", exported.to_str().unwrap()],
    )
    .await;
    assert!(ran, "{out}");
    leaks.check(&values, "aigw export's output", &out);
    for entry in std::fs::read_dir(&exported).unwrap() {
        let path = entry.unwrap().path();
        let content = std::fs::read_to_string(&path).unwrap();
        leaks.check(&values, &format!("exported {}", path.display()), &content);
    }
    // The pull request: the manifests as first applied (the Integration's value back at
    // `/custom_host`, where the live resource no longer takes it), once as the cluster knows
    // them and once adopting each remote object by slug without cluster access.
    let manifests = dir.path().join("pr");
    std::fs::create_dir(&manifests).unwrap();
    for case in &cases {
        let object = json!({"apiVersion": "aigw.io/v1alpha1", "kind": case.kind,
            "metadata": {"name": h.cluster_name(case.name)}, "spec": case.spec});
        write(&manifests, &format!("{}.yaml", case.name), &object);
    }
    for (files, kube) in [(&manifests, true), (&manifests, false), (&exported, true)] {
        let files = files.to_str().unwrap();
        let (ran, out) = aigw(&h, dir.path(), "validate", false, &["-f", files]).await;
        assert!(ran, "{out}");
        leaks.check(&values, &format!("aigw validate -f {files}"), &out);
        for output in ["human", "json"] {
            let rest = ["-f", files, "--output", output];
            let (ran, out) = aigw(&h, dir.path(), "plan", kube, &rest).await;
            assert!(ran, "{out}");
            let place = format!("aigw plan -f {files} ({output}, cluster access: {kube})");
            leaks.check(&values, &place, &out);
            // The Integration's value moved back to `/custom_host` is a change, shown by path.
            if kube && output == "json" && files.ends_with("pr") {
                assert!(out.contains("\"update\": 1"), "{place}: {out}");
            }
        }
    }
    let logs = captured_logs();
    assert!(
        logs.contains(&h.cluster_name("tools")),
        "the operator logged nothing about the test's objects"
    );
    leaks.check(&values, "the operator log", &logs);
    h.stop().await;
    assert!(
        leaks.0.is_empty(),
        "Secret values leaked:\n{}",
        leaks.0.join("\n")
    );
}

/// A delete the API refuses with an error echoing what it stores of the object, answered to an
/// operator restarted since the object was written (it remembers no value of it): the values
/// reach no status, event, log line or metric.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_delete_echoing_issue_29_kinds_values_reaches_no_output() {
    let mut h =
        Harness::start_with_secret_namespace("secrecy-kinds-del", Duration::from_secs(1)).await;
    let (values, cases, _) = table(&h);
    for case in &cases {
        h.put_secret(case.secret, case.before.clone(), true).await;
        create(&h, case.kind, case.name, &case.spec).await;
    }
    // A reference no Integration maps: its delete is tried at once.
    let mut free = cases[0].spec.clone();
    free["slug"] = json!(h.cluster_name("free"));
    create(&h, "SecretReference", "free", &free).await;
    for case in &cases {
        wait_until(&h, case.kind, case.name, "Ready", ready).await;
    }
    wait_until(&h, "SecretReference", "free", "Ready", ready).await;
    let direct = h.emulator.management_url();
    let proxy = delete_echo_proxy(direct.clone()).await;
    h.restart_operator_via(&proxy).await;
    // The Integration first: the SecretReference it maps waits for it otherwise.
    for case in cases.iter().rev() {
        delete(&h, case.kind, case.name).await;
    }
    delete(&h, "SecretReference", "free").await;
    let echoed = |conditions: &[(String, String, String, String)]| {
        conditions
            .iter()
            .any(|(_, _, _, m)| m.contains("cannot delete") || m.contains("withheld"))
    };
    wait_until(&h, "Integration", "upstream", "refused deletion", echoed).await;
    wait_until(&h, "McpIntegration", "tools", "refused deletion", echoed).await;
    wait_until(&h, "SecretReference", "free", "refused deletion", echoed).await;
    // The failed cleanups retry and log a few times.
    support::wait_until(WAIT, || async {
        (captured_logs().matches("reconcile failed").count() >= 2).then_some(())
    })
    .await
    .expect("the failed cleanups were logged");
    let mut leaks = Leaks(Vec::new());
    let objects = cases.iter().map(|c| (c.kind, c.name));
    for (kind, name) in objects.chain([("SecretReference", "free")]) {
        if let Some(object) = get(&h, kind, name).await {
            leaks.check(&values, &format!("{kind} {name}"), &object.to_string());
        }
    }
    leaks.check(&values, "the events", &h.cluster_events_text().await);
    leaks.check(&values, "the metrics", &h.ctx.metrics.encode());
    leaks.check(&values, "the operator log", &captured_logs());
    // Let the objects go.
    h.restart_operator_via(&direct).await;
    let objects = cases.iter().map(|c| (c.kind, c.name));
    for (kind, name) in objects.chain([("SecretReference", "free")]) {
        let gone = support::wait_until(WAIT, || async {
            get(&h, kind, name).await.is_none().then_some(())
        })
        .await;
        assert!(gone.is_some(), "{kind} {name} was not deleted");
    }
    h.stop().await;
    assert!(
        leaks.0.is_empty(),
        "Secret values leaked:\n{}",
        leaks.0.join("\n")
    );
}
