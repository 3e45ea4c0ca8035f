//! `aigw plan` fed by a hostile pull request, on a real kube-apiserver and the emulator: a
//! manifest that names another team's remote object, a literal that replaces a Secret, candidate
//! values that probe a Secret, an Integration naming an organisation integration. The plan is
//! posted where the pull request's author reads it: it prints no value a Secret gave the remote
//! side, nor credentials a URL carries (attack on issue 27; each failed before its fix).

use crate::support;

use std::path::Path;
use std::time::Duration;

use crate::support::SendJson;
use aigw::emulator::EmulatorOptions;
use aigw::resources::{Config, Guardrail};
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use support::harness::{Harness, TOKEN};
use support::objects::Conditions;

const WAIT: Duration = Duration::from_secs(60);

/// Runs `aigw` off the async runtime (the in-process emulator keeps serving): whether it ran
/// The workspace of the other team's remote objects.
const WORKSPACE: &str = "9f3c2b1a-0d4e-4f6a-8b7c-1e2d3f4a5b6c";

/// to a plan's exit code (0, 1 or 2), and stdout then stderr.
async fn aigw(args: Vec<String>) -> (bool, String) {
    let (code, text) = support::cli::aigw(args).await;
    (code.is_some_and(|c| c <= 2), text)
}

/// `manifest` written to `dir` as `name`, its path.
fn write(dir: &Path, name: &str, manifest: &Value) -> String {
    let path = dir.join(name);
    std::fs::write(&path, serde_yaml::to_string(manifest).unwrap()).unwrap();
    path.to_str().unwrap().to_string()
}

/// The plan of the right guess (`right`) reads as that of a wrong one once the guess is
/// replaced; the wrong one's. `when` says what an oracle would tell.
async fn reads_the_same<F, P>(
    plan: P,
    (right, wrong): (&'static str, &'static str),
    when: &str,
) -> String
where
    P: Fn(&'static str) -> F,
    F: std::future::Future<Output = (bool, String)>,
{
    let (ran, with_right) = plan(right).await;
    assert!(ran, "{with_right}");
    let (ran, with_wrong) = plan(wrong).await;
    assert!(ran, "{with_wrong}");
    assert_eq!(
        with_right.replace(right, wrong),
        with_wrong,
        "the plan differs when {when} (an oracle)"
    );
    with_wrong
}

/// [`with_pins`], and Config `pinned` there, its `/targets/0/account_pin` from Secret `pins`,
/// once Ready; its spec.
async fn pinned(prefix: &str, pin: &str) -> (Harness, Value) {
    let h = with_pins(prefix, pin).await;
    let spec = json!({"name": "pinned", "config": {"strategy": {"mode": "single"},
        "targets": [{"provider": "@openai"}]},
        "secretRefs": [{"path": "/targets/0/account_pin",
                        "secretKeyRef": {"name": "pins", "key": "pin"}}]});
    support::objects::create::<Config>(&h.env, "pinned", spec.clone()).await;
    h.wait_for::<Config>("pinned", WAIT, |c| c.ready()).await;
    (h, spec)
}

/// A harness whose namespace holds Secret `pins` with `pin`.
async fn with_pins(prefix: &str, pin: &str) -> Harness {
    let h = Harness::start_with(prefix, Duration::from_secs(600)).await;
    put_secret(&h.env, "pins", json!({"pin": pin})).await;
    h
}

/// `aigw plan` of `manifest` (written to `dir` as `file`) against `h`'s emulator, with cluster
/// access.
async fn plan_with_cluster(
    h: &Harness,
    dir: &Path,
    file: String,
    manifest: Value,
) -> (bool, String) {
    let token = token_file(dir);
    let manifest = write(dir, &file, &manifest);
    let kubeconfig = support::kubeconfig_path().to_str().unwrap().to_string();
    let mut all = args(&["plan", "-f", &manifest]);
    all.extend(args(&["--management-url", &h.emulator.management_url()]));
    all.extend(args(&["--token-file", &token, "--kubeconfig", &kubeconfig]));
    aigw(all).await
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

async fn put_secret(env: &support::TestEnv, name: &str, data: Value) {
    env.put_secret(name, json!({}), data).await;
}

/// A Config of team b takes a target's `custom_host` (credentials in its userinfo) from a
/// Secret. A pull request in team a adopts that config by slug, with a dummy value at the same
/// path (so the value is not at a dropped path): the plan printed team b's value, with and
/// without cluster access. With it, the plan now says another resource manages the object, or
/// that the grants refuse the adoption, and shows nothing of it; without, it shows the paths of
/// the values the manifest does not hold, never the values. The same holds when team b's own
/// Another team's guardrail (a card-number check in [`WORKSPACE`]) whose `on_fail` feedback
/// carries `metadata`; its slug.
async fn victim_guardrail(url: &str, metadata: String) -> String {
    let guardrail = post(
        url,
        "/ai_gw/v2/guardrails",
        json!({"name": "victim pii", "workspace_id": WORKSPACE,
            "checks": [{"id": "default.regexMatch", "parameters": {"rule": "\\d{16}"}}],
            "actions": {"deny": true, "on_fail": {"feedback": {"value": -5, "weight": 1,
                "metadata": metadata}}}}),
    )
    .await;
    guardrail["slug"].as_str().expect("slug").to_string()
}

/// `aigw plan` of `manifest` in `output`, against the API at `url` with the token file
/// `token`, and `extra` flags: it ran (else a panic naming `case`); its output.
async fn plan_ran(
    case: &str,
    (manifest, output): (&str, &str),
    (url, token): (&str, &str),
    extra: &[&str],
) -> String {
    let mut all = args(&["plan", "-f", manifest, "--output", output]);
    all.extend(args(&["--management-url", url, "--token-file", token]));
    all.extend(args(extra));
    let (ran, out) = aigw(all).await;
    assert!(ran, "[{case}] {out}");
    out
}

/// An emulator of the test's own, and its management URL.
async fn emulator() -> (aigw::emulator::Running, String) {
    let emulator = aigw::emulator::spawn(EmulatorOptions::new(TOKEN))
        .await
        .unwrap();
    let url = emulator.management_url();
    (emulator, url)
}

/// A file in `dir` holding the token; its path.
fn token_file(dir: &Path) -> String {
    let token = dir.join("token");
    std::fs::write(&token, TOKEN).unwrap();
    token.to_str().unwrap().to_string()
}

/// Every file in `dir`, named, with its text.
fn files_in(dir: impl AsRef<Path>) -> Vec<(String, String)> {
    let paths = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path());
    paths
        .map(|path| {
            (
                path.display().to_string(),
                std::fs::read_to_string(&path).unwrap(),
            )
        })
        .collect()
}

/// What `aigw export --kubeconfig` of the emulator at `url` said, then each file it wrote into
/// `out_dir`, as `(path, text)`.
async fn exported_with_cluster(url: &str, token: &str, out_dir: &Path) -> Vec<(String, String)> {
    let kubeconfig = support::kubeconfig_path().to_str().unwrap().to_string();
    let mut run = args(&["export", "--out", out_dir.to_str().unwrap()]);
    run.extend(args(&["--management-url", url, "--token-file", token]));
    run.extend(args(&["--kubeconfig", &kubeconfig]));
    let (ran, said) = aigw(run).await;
    assert!(ran, "{said}");
    let mut shown = vec![("export".to_string(), said)];
    shown.extend(files_in(out_dir));
    shown
}

/// The text of the exported file whose path ends in `name`.
fn exported_file(shown: &[(String, String)], name: &str) -> String {
    (shown.iter())
        .find(|(path, _)| path.ends_with(name))
        .map(|(_, text)| text.clone())
        .unwrap_or_else(|| panic!("{name} is exported: {shown:?}"))
}

/// No text `shown` (what showed it, the text) is one `leaks`; else a panic saying `what`
/// leaked, with every place.
fn assert_shows_none(shown: &[(String, String)], leaks: impl Fn(&str) -> bool, what: &str) {
    let leaked: Vec<String> = shown
        .iter()
        .filter(|(_, text)| leaks(text))
        .map(|(what, text)| format!("--- {what} ---\n{text}"))
        .collect();
    assert!(leaked.is_empty(), "{what}:\n{}", leaked.join("\n"));
}

/// Deletes the Integration `name`, then the test's namespace.
async fn cleanup_with_integration(env: support::TestEnv, name: &str) {
    kube::Api::<aigw::resources::Integration>::all(env.client.clone())
        .delete(name, &Default::default())
        .await
        .unwrap();
    env.cleanup().await;
}

/// pull request replaces the Secret with a literal at the same path.
#[tokio::test]
async fn plan_shows_no_value_of_a_remote_config_the_manifest_does_not_hold() {
    const USERINFO: &str = "u:VictimHostPassw0rd";
    let victim_host = format!("https://{USERINFO}@victim.example");
    let h = Harness::start_two_teams("atk-plan-foreign", Duration::from_secs(600), None).await;
    let (team_a, team_b) = (&h.env, h.other.as_ref().unwrap());
    put_secret(team_b, "upstream", json!({"host": victim_host})).await;
    let victim = json!({"name": "victim", "config": {"strategy": {"mode": "single"},
        "targets": [{"provider": "@openai"}]},
        "secretRefs": [{"path": "/targets/0/custom_host",
                        "secretKeyRef": {"name": "upstream", "key": "host"}}]});
    support::objects::create::<Config>(team_b, "victim", victim).await;
    let slug = team_b.ready_config_slug("victim", WAIT).await;

    let dir = tempfile::tempdir().unwrap();
    let token = token_file(dir.path());
    let url = h.emulator.management_url();
    let kubeconfig = support::kubeconfig_path().to_str().unwrap().to_string();
    let probe = json!({"apiVersion": "aigw.io/v1alpha1", "kind": "Config",
        "metadata": {"name": "probe", "namespace": team_a.namespace},
        "spec": {"name": "probe", "slug": slug, "config": {"strategy": {"mode": "single"},
                 "targets": [{"provider": "@openai", "custom_host": "https://dummy.example"}]}}});
    let probe = write(dir.path(), "probe.yaml", &probe);
    let grants = dir.path().join("grants.yaml");
    let namespaces = [&team_a.namespace, &team_b.namespace];
    std::fs::write(
        &grants,
        serde_yaml::to_string(&json!([{"namespaces": namespaces}])).unwrap(),
    )
    .unwrap();
    let grants = grants.to_str().unwrap().to_string();
    // Team b's pull request: the Secret replaced by a literal at the same path.
    let literal = json!({"apiVersion": "aigw.io/v1alpha1", "kind": "Config",
        "metadata": {"name": "victim", "namespace": team_b.namespace},
        "spec": {"name": "victim", "slug": slug, "config": {"strategy": {"mode": "single"},
                 "targets": [{"provider": "@openai", "custom_host": "https://public.example"}]}}});
    let literal = write(dir.path(), "literal.yaml", &literal);

    let cases: [(&str, &str, &[&str], &str); 4] = [
        ("adopting, no cluster access", &probe, &[], "(value hidden)"),
        (
            "adopting, cluster access",
            &probe,
            &["--kubeconfig", &kubeconfig],
            "(AlreadyManaged)",
        ),
        (
            "adopting, cluster access, grants without allowAdoption",
            &probe,
            &["--kubeconfig", &kubeconfig, "--grants-file", &grants],
            "AdoptionNotAllowed",
        ),
        (
            "a literal replaces the Secret, no cluster access",
            &literal,
            &[],
            "(value hidden)",
        ),
    ];
    let mut leaks = Vec::new();
    for (case, manifest, extra, expected) in cases {
        for output in ["human", "json"] {
            let out = plan_ran(case, (manifest, output), (&url, &token), extra).await;
            if out.contains("VictimHostPassw0rd") {
                leaks.push(format!("[{case}, {output}]\n{out}"));
            }
            assert!(out.contains(expected), "[{case}, {output}] {out}");
            // Who manages it in another namespace is not team a's pull request's to learn.
            assert!(
                manifest != probe || !out.contains(team_b.namespace.as_str()),
                "[{case}, {output}] names team b's resource: {out}"
            );
        }
    }
    assert!(
        leaks.is_empty(),
        "aigw plan printed the value team b's Secret gave its remote config:\n{}",
        leaks.join("\n")
    );
    h.stop().await;
}

/// With cluster access, a plan read the Secrets the manifest names and masked the manifest's
/// own literals that equal one of them: a pull request listing candidate values learnt which one
/// a Secret holds (the one shown masked). The manifest is now masked by path, so the plan reads
/// the same whichever candidates it lists.
#[tokio::test]
async fn plan_masks_the_manifest_by_path_never_by_a_secret_value() {
    const PIN: &str = "x7Q2";
    const OTHER: &str = "x7Q9";
    let (h, spec) = pinned("atk-plan-oracle", PIN).await;

    let dir = tempfile::tempdir().unwrap();
    let plan = |candidate: &'static str| {
        let mut probing = spec.clone();
        probing["config"]["targets"][0]["override_params"] =
            json!({"user": "x7Q1", "candidate": candidate});
        let manifest = json!({"apiVersion": "aigw.io/v1alpha1", "kind": "Config",
            "metadata": {"name": "pinned", "namespace": h.env.namespace}, "spec": probing});
        plan_with_cluster(&h, dir.path(), format!("{candidate}.yaml"), manifest)
    };
    let with_other =
        reads_the_same(plan, (PIN, OTHER), "a candidate equals the Secret's value").await;
    assert!(with_other.contains(OTHER), "{with_other}");
    h.stop().await;
}

/// A pull request that drops a `secretRefs` entry and writes a literal at its path: the plan
/// compared the literal with the remote value the Secret gave, and said "no change" exactly
/// when they were equal (an oracle, exit code and all). It now reads the same whichever value
/// the literal holds, for a Config and a Guardrail: the path's source changes, whatever the
/// values.
#[tokio::test]
async fn plan_of_a_secret_path_made_literal_tells_nothing_of_the_value() {
    const PIN: &str = "k4Z8";
    const OTHER: &str = "k4Z3";
    let h = with_pins("atk-plan-moved", PIN).await;
    let pin_ref =
        |path: &str| json!([{"path": path, "secretKeyRef": {"name": "pins", "key": "pin"}}]);
    let config = json!({"name": "pinned", "config": {"strategy": {"mode": "single"},
        "targets": [{"provider": "@openai"}]},
        "secretRefs": pin_ref("/targets/0/account_pin")});
    support::objects::create::<Config>(&h.env, "pinned", config.clone()).await;
    let guardrail = json!({"name": "pinned", "workspaceId": WORKSPACE,
        "checks": [{"id": "default.regexMatch", "parameters": {}}],
        "secretRefs": pin_ref("/checks/0/parameters/rule"),
        "actions": {"deny": true, "onFail": {"value": -5}}});
    support::objects::create::<Guardrail>(&h.env, "pinned", guardrail.clone()).await;
    h.wait_for::<Config>("pinned", WAIT, |c| c.ready()).await;
    h.wait_for::<Guardrail>("pinned", WAIT, |g| g.ready()).await;

    let dir = tempfile::tempdir().unwrap();
    let plan = |kind: &'static str, candidate: &'static str| {
        let mut probing = match kind {
            "Config" => config.clone(),
            _ => guardrail.clone(),
        };
        match kind {
            "Config" => probing["config"]["targets"][0]["account_pin"] = json!(candidate),
            _ => probing["checks"][0]["parameters"]["rule"] = json!(candidate),
        }
        probing.as_object_mut().unwrap().remove("secretRefs");
        let manifest = json!({"apiVersion": "aigw.io/v1alpha1", "kind": kind,
            "metadata": {"name": "pinned", "namespace": h.env.namespace}, "spec": probing});
        plan_with_cluster(&h, dir.path(), format!("{kind}-{candidate}.yaml"), manifest)
    };
    for (kind, path) in [
        ("Config", "/targets/0/account_pin"),
        ("Guardrail", "/checks/0/parameters/rule"),
    ] {
        let equal = format!("[{kind}] the literal equals the Secret's value");
        let with_other = reads_the_same(|c| plan(kind, c), (PIN, OTHER), &equal).await;
        assert!(
            with_other.contains("1 to update") && with_other.contains(path),
            "[{kind}] the plan says the path's source changes: {with_other}"
        );
    }
    h.stop().await;
}

/// The live Config dropped its `secretRefs` entry, and the change waits (paused here; a
/// promotion gate or a stall hold it the same way): the remote config still holds the Secret's
/// value at the path. A pull request matching the live spec, with a guess at that path, was
/// compared with the remote value ("no change" for the right guess). The path the version
/// applied last takes from a Secret counts too: the plan reads the same for any guess.
#[tokio::test]
async fn plan_against_a_remote_older_than_the_live_spec_tells_nothing_of_the_value() {
    const PIN: &str = "q5W1";
    const OTHER: &str = "q5W7";
    let (h, pinned) = pinned("atk-plan-stale", PIN).await;
    let configs = h.env.api::<Config>();
    let paused = json!({"metadata": {"annotations": {"aigw.io/paused": "true"}}});
    support::merge_patch(&configs, "pinned", paused).await;
    let mut literal = pinned.clone();
    literal["config"]["targets"][0]["account_pin"] = json!("live-literal");
    literal["secretRefs"] = json!(null);
    support::merge_patch(&configs, "pinned", json!({"spec": literal})).await;

    let dir = tempfile::tempdir().unwrap();
    let plan = |candidate: &'static str| {
        let mut probing = literal.clone();
        probing["config"]["targets"][0]["account_pin"] = json!(candidate);
        probing.as_object_mut().unwrap().remove("secretRefs");
        let manifest = json!({"apiVersion": "aigw.io/v1alpha1", "kind": "Config",
            "metadata": {"name": "pinned", "namespace": h.env.namespace}, "spec": probing});
        plan_with_cluster(&h, dir.path(), format!("{candidate}.yaml"), manifest)
    };
    let holds = "the guess equals the value the remote still holds";
    reads_the_same(plan, (PIN, OTHER), holds).await;
    h.stop().await;
}

/// A pull request names a Secret of the namespace it cannot read (`secretRefs` at a path of its
/// own), and keeps candidates in a document the remote config holds as well: the plan read the
/// Secret and masked, on the remote's side only, the candidate equal to it. The manifest's own
/// Secrets are never read: every candidate reads the same.
#[tokio::test]
async fn plan_reads_no_secret_only_the_manifest_names() {
    const PIN: &str = "7305";
    let h = with_pins("atk-plan-chosen", PIN).await;
    let candidates: Vec<String> = (7300..7310).map(|n| n.to_string()).collect();
    let spec = json!({"name": "mine", "config": {"strategy": {"mode": "single"},
        "targets": [{"provider": "@openai", "override_params": {"c": candidates}}]}});
    support::objects::create::<Config>(&h.env, "mine", spec.clone()).await;
    h.wait_for::<Config>("mine", WAIT, |c| c.ready()).await;

    let dir = tempfile::tempdir().unwrap();
    let mut probing = spec.clone();
    probing["secretRefs"] = json!([{"path": "/targets/0/zz",
                                    "secretKeyRef": {"name": "pins", "key": "pin"}}]);
    let manifest = json!({"apiVersion": "aigw.io/v1alpha1", "kind": "Config",
        "metadata": {"name": "mine", "namespace": h.env.namespace}, "spec": probing});
    let (ran, out) = plan_with_cluster(&h, dir.path(), "chosen.yaml".into(), manifest).await;
    assert!(ran, "{out}");
    assert!(out.contains("(secret pins/pin)"), "{out}");
    assert!(
        !out.contains("<masked"),
        "a remote candidate was masked by the value of a Secret only the manifest names: {out}"
    );
    h.stop().await;
}

/// An organisation integration holds account identifiers the API reads back unmasked
/// (`aws_access_key_id`, `aws_external_id`) and a `custom_host` with credentials in its
/// userinfo. A pull request naming its slug got them printed by `aigw plan`, which `aigw api
/// integrations get` and `aigw export` hide; the userinfo was printed by all three.
#[tokio::test]
async fn plan_export_and_api_show_no_hidden_configuration_of_an_integration() {
    const KEY_ID: &str = "AKIAVICTIMKEYID00001";
    const EXTERNAL: &str = "ext-victim-7Hq2Lm";
    const USERINFO: &str = "svc:IntegPassw0rd";
    let (_emulator, url) = emulator().await;
    let created = post(
        &url,
        "/ai_gw/admin/v2/integrations",
        json!({"name": "victim bedrock", "ai_provider_id": "bedrock",
            "slug": "victim-bedrock", "create_default_provider": false,
            "configurations": {"aws_region": "eu-west-1", "aws_access_key_id": KEY_ID,
                "aws_external_id": EXTERNAL,
                "custom_host": format!("https://{USERINFO}@bedrock.victim.example")}}),
    )
    .await;
    assert_eq!(created["slug"], "victim-bedrock", "{created}");
    let dir = tempfile::tempdir().unwrap();
    let token = token_file(dir.path());
    let manifest = json!({"apiVersion": "aigw.io/v1alpha1", "kind": "Integration",
        "metadata": {"name": "probe"},
        "spec": {"name": "victim bedrock", "aiProviderId": "bedrock", "slug": "victim-bedrock",
                 "configurations": {"aws_region": "us-east-1", "aws_access_key_id": "AKIADUMMY",
                                    "custom_host": "https://bedrock.example"}}});
    let manifest = write(dir.path(), "probe.yaml", &manifest);
    let connection = args(&["--management-url", &url, "--token-file", &token]);
    let out_dir = dir.path().join("export");
    let runs = [
        args(&["plan", "-f", &manifest]),
        args(&["plan", "-f", &manifest, "--output", "json"]),
        args(&["export", "--out", out_dir.to_str().unwrap()]),
    ];
    let mut shown = Vec::new();
    for mut run in runs {
        run.extend(connection.clone());
        let (ran, out) = aigw(run.clone()).await;
        assert!(ran, "{run:?}: {out}");
        shown.push((run[0].clone(), out));
    }
    let mut api = args(&["api"]);
    api.extend(connection.clone());
    api.extend(args(&["integrations", "get", "victim-bedrock"]));
    let (ran, out) = aigw(api).await;
    assert!(ran, "{out}");
    shown.push(("api integrations get".into(), out));
    shown.extend(files_in(&out_dir));
    assert_shows_none(
        &shown,
        |text| {
            [KEY_ID, EXTERNAL, "IntegPassw0rd"]
                .iter()
                .any(|v| text.contains(v))
        },
        "a configuration value the API read back was shown",
    );
    assert!(
        shown[0].1.contains("us-east-1") && shown[0].1.contains("aws_access_key_id"),
        "the plan still shows the change: {}",
        shown[0].1
    );
}

/// A routing target's `custom_host` and a guardrail's webhook URL may carry credentials in
/// their userinfo. `aigw api configs get` printed them, and `aigw export` wrote the guardrail's
/// into Git; now the api output reads `https://(hidden)@host` and the export moves the config's
/// to its placeholder Secret and leaves the guardrail out, saying why.
#[tokio::test]
async fn api_and_export_never_show_the_userinfo_of_a_url() {
    let (_emulator, url) = emulator().await;
    let http = reqwest::Client::new();
    let post = |path: &str, body: Value| {
        let request = http
            .post(format!("{url}{path}"))
            .bearer_auth(TOKEN)
            .json(&body);
        async move {
            let answer: Value = request.json_value().await;
            answer
        }
    };
    let config = post(
        "/ai_gw/v2/configs",
        json!({"name": "hosted", "config": {"strategy": {"mode": "single"},
            "targets": [{"provider": "@openai",
                         "custom_host": "https://svc:CfgPassw0rd@llm.example/v1"}]}}),
    )
    .await;
    let slug = config["slug"].as_str().expect("slug").to_string();
    post(
        "/ai_gw/v2/guardrails",
        json!({"name": "hook", "workspace_id": "9f3c2b1a-0d4e-4f6a-8b7c-1e2d3f4a5b6c",
               "checks": [{"id": "default.webhook",
                           "parameters": {"webhookURL": "https://hook:GrdPassw0rd@hooks.example/x"}}],
               "actions": {"deny": true}}),
    )
    .await;
    // A token in a URL's query (`?api_key=`) is a credential too: the MCP integration is left
    // out of the export (its `url` went to Git as it was).
    post(
        "/ai_gw/admin/v2/mcp-integrations",
        json!({"name": "Tickets", "slug": "tickets", "auth_type": "none", "transport": "http",
               "url": "https://mcp.internal/mcp?api_key=McpQueryKey0001"}),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let token = token_file(dir.path());
    let connection = args(&["--management-url", &url, "--token-file", &token]);
    let mut shown = Vec::new();
    let mut get = args(&["api"]);
    get.extend(connection.clone());
    get.extend(args(&["configs", "get", &slug]));
    let (ran, out) = aigw(get).await;
    assert!(ran, "{out}");
    assert!(out.contains("https://(hidden)@llm.example/v1"), "{out}");
    shown.push(("api configs get".to_string(), out));
    let out_dir = dir.path().join("export");
    let mut export = args(&["export", "--out", out_dir.to_str().unwrap()]);
    export.extend(connection);
    let (ran, out) = aigw(export).await;
    assert!(ran, "{out}");
    assert!(
        out.contains("webhookURL"),
        "the guardrail left out, saying why: {out}"
    );
    assert!(
        out.contains("McpIntegration") && out.contains("/spec/url"),
        "the MCP integration left out, saying why: {out}"
    );
    shown.push(("export".into(), out));
    shown.extend(files_in(&out_dir));
    assert_shows_none(
        &shown,
        |text| {
            ["CfgPassw0rd", "GrdPassw0rd", "McpQueryKey0001"]
                .iter()
                .any(|secret| text.contains(secret))
        },
        "credentials in a URL's userinfo were shown",
    );
}

/// The value team b's Integration takes from a Secret for a public setting (`custom_host`).
const VICTIM_HOST: &str = "https://proxy.victim.example/v1?api-key=SECRETQ-9f3a7c";

/// Another team's organisation integration (`slug`) whose `custom_host` its live Integration
/// takes from a Secret: the remote object in `emulator`, the live Integration (named `name`)
/// with the status the operator would have written.
async fn victim_integration(env: &support::TestEnv, emulator_url: &str, name: &str, slug: &str) {
    let created = post(
        emulator_url,
        "/ai_gw/admin/v2/integrations",
        json!({"name": "victim openai", "ai_provider_id": "openai", "slug": slug,
            "create_default_provider": false,
            "configurations": {"custom_host": VICTIM_HOST}}),
    )
    .await;
    let id = created["id"].as_str().expect("id").to_string();
    let integrations = kube::Api::<aigw::resources::Integration>::all(env.client.clone());
    let live = support::objects::object(
        "Integration",
        name,
        json!({"name": "victim openai", "aiProviderId": "openai", "slug": slug,
            "secretRefs": [{"path": "/custom_host",
                            "secretKeyRef": {"name": "oai", "key": "host"}}]}),
    );
    support::create(&integrations, &live).await;
    integrations
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"id": id, "slug": slug}})),
        )
        .await
        .unwrap();
}

/// A pull request adopts team b's integration by slug under its own name, with its own
/// `custom_host`: `aigw plan` printed team b's Secret-backed `custom_host` (with and without
/// cluster access) and said `adopt` where the operator answers AlreadyManaged. It now shows only
/// what the manifest holds, and with cluster access says another Integration manages it.
#[tokio::test]
async fn plan_of_an_adopted_integration_shows_no_secret_backed_setting() {
    let env = support::TestEnv::new("atk-plan-integ").await;
    let (_emulator, url) = emulator().await;
    let slug = "victim-oai";
    let victim = format!("victim-{}", env.namespace);
    victim_integration(&env, &url, &victim, slug).await;

    let dir = tempfile::tempdir().unwrap();
    let token = token_file(dir.path());
    let kubeconfig = support::kubeconfig_path().to_str().unwrap().to_string();
    let probe = json!({"apiVersion": "aigw.io/v1alpha1", "kind": "Integration",
        "metadata": {"name": format!("mine-{}", env.namespace)},
        "spec": {"name": "victim openai", "aiProviderId": "openai", "slug": slug,
                 "configurations": {"custom_host": "https://mine.example"}}});
    let probe = write(dir.path(), "probe.yaml", &probe);
    let cases: [(&str, &[&str], &str); 2] = [
        ("no cluster access", &[], "(value hidden)"),
        (
            "cluster access",
            &["--kubeconfig", &kubeconfig],
            "(AlreadyManaged)",
        ),
    ];
    let mut leaks = Vec::new();
    for (case, extra, expected) in cases {
        for output in ["human", "json"] {
            let out = plan_ran(case, (&probe, output), (&url, &token), extra).await;
            if out.contains("SECRETQ-9f3a7c") {
                leaks.push(format!("[{case}, {output}]\n{out}"));
            }
            assert!(out.contains(expected), "[{case}, {output}] {out}");
        }
    }
    assert!(
        leaks.is_empty(),
        "aigw plan printed the value team b's Secret gave its integration:\n{}",
        leaks.join("\n")
    );
    cleanup_with_integration(env, &victim).await;
}

/// The live Integration dropped its `secretRefs` entry for `custom_host` and wrote a literal,
/// not applied yet (not Ready at its generation): the remote integration still holds the
/// Secret's value there. The plan printed it as the remote side of every plan, and said "no
/// change" to a manifest guessing it right. An Integration records no paths it applied, so
/// none of its configurations' values show until its spec is applied.
#[tokio::test]
async fn plan_of_an_integration_not_applied_yet_shows_no_value_it_held() {
    const GUESS: &str = "https://proxy.victim.example/v1?api-key=SECRETQ-0000aa";
    let env = support::TestEnv::new("atk-plan-unapplied").await;
    let (_emulator, url) = emulator().await;
    let slug = "victim-held";
    let name = format!("held-{}", env.namespace);
    victim_integration(&env, &url, &name, slug).await;
    let integrations = kube::Api::<aigw::resources::Integration>::all(env.client.clone());
    let literal = json!({"spec": {"secretRefs": null,
        "configurations": {"custom_host": "https://live.example"}}});
    support::merge_patch(&integrations, &name, literal).await;

    let dir = tempfile::tempdir().unwrap();
    let token = token_file(dir.path());
    let kubeconfig = support::kubeconfig_path().to_str().unwrap().to_string();
    let mut seen = Vec::new();
    for guess in [VICTIM_HOST, GUESS] {
        let probe = json!({"apiVersion": "aigw.io/v1alpha1", "kind": "Integration",
            "metadata": {"name": name},
            "spec": {"name": "victim openai", "aiProviderId": "openai", "slug": slug,
                     "configurations": {"custom_host": guess}}});
        let probe = write(dir.path(), "probe.yaml", &probe);
        let extra = ["--kubeconfig", kubeconfig.as_str()];
        let out = plan_ran("unapplied", (&probe, "human"), (&url, &token), &extra).await;
        seen.push(out);
    }
    assert!(
        !seen[1].contains("SECRETQ-9f3a7c"),
        "the plan printed the value the remote still holds: {}",
        seen[1]
    );
    assert_eq!(
        seen[0].replace(VICTIM_HOST, GUESS),
        seen[1],
        "the plan differs when the guess equals the value the remote still holds (an oracle)"
    );
    cleanup_with_integration(env, &name).await;
}

/// Another team's guardrail whose `on_fail` feedback metadata holds a webhook its Guardrail
/// takes from a Secret. A pull request adopting it by slug got the value printed by `aigw plan`
/// without cluster access: the values it does not hold were hidden under `checks` only, and the
/// actions were compared in the spec's form while Secret paths are in the API's. It now shows
/// only what the manifest holds there too.
#[tokio::test]
async fn plan_of_an_adopted_guardrail_shows_no_action_value_it_does_not_hold() {
    const SINK: &str = "https://hooks.example/T0/GRSECRET-77aa21";
    let (_emulator, url) = emulator().await;
    let slug = victim_guardrail(&url, format!("team=b sink={SINK}")).await;
    let dir = tempfile::tempdir().unwrap();
    let token = token_file(dir.path());
    let mut shown = Vec::new();
    for kind in ["Guardrail"] {
        let probe = json!({"apiVersion": "aigw.io/v1alpha1", "kind": kind,
            "metadata": {"name": "probe"},
            "spec": {"name": "victim pii", "slug": slug, "workspaceId": WORKSPACE,
                     "checks": [{"id": "default.regexMatch", "parameters": {"rule": "\\d{16}"}}],
                     "actions": {"deny": false, "onFail": {"value": -5,
                        "metadata": "team=a"}}}});
        let probe = write(dir.path(), &format!("{kind}.yaml"), &probe);
        for output in ["json", "human"] {
            let mut all = args(&["plan", "-f", &probe, "--output", output]);
            all.extend(args(&["--management-url", &url, "--token-file", &token]));
            let (ran, out) = aigw(all).await;
            assert!(ran, "[{kind}, {output}] {out}");
            shown.push((format!("{kind}, {output}"), out));
        }
    }
    assert_shows_none(
        &shown,
        |text| text.contains("GRSECRET-77aa21"),
        "aigw plan printed a value of the adopted guardrail's actions",
    );
    // The change still shows, its unconfirmed values hidden.
    let json = &shown[0].1;
    support::assert_mentions(json, &["team=a", "(value hidden)"]);
}

/// Team b's organisation integration takes its `custom_host` (a public setting) from a Secret.
/// `aigw export --kubeconfig` wrote the value into the manifests: the live Integrations'
/// `secretRefs` were never consulted. The field is now a reference to the placeholder Secret.
#[tokio::test]
async fn export_never_writes_a_secret_backed_setting_of_an_integration() {
    let env = support::TestEnv::new("atk-export-integ").await;
    let (_emulator, url) = emulator().await;
    let victim = format!("victim-{}", env.namespace);
    victim_integration(&env, &url, &victim, "victim-openai").await;
    let dir = tempfile::tempdir().unwrap();
    let token = token_file(dir.path());
    let shown = exported_with_cluster(&url, &token, &dir.path().join("out2")).await;
    let exported = exported_file(&shown, "integration-victim-openai.yaml");
    assert_shows_none(
        &shown,
        |text| text.contains("SECRETQ-9f3a7c"),
        "aigw export wrote the value team b's Secret gave its integration",
    );
    assert!(exported.contains("path: /custom_host"), "{exported}");
    cleanup_with_integration(env, &victim).await;
}

/// An Integration took `aws_role_arn` (a public setting) from a Secret, then, paused, had its
/// `secretRefs` removed: the remote still holds the Secret's value, and the live spec no
/// longer says where. aigw export wrote that value (an attack of stop 82). While the live
/// spec is not applied, every configuration is referenced from the placeholder Secret; once it
/// is (Ready at its generation), the public setting is exported as it is.
#[tokio::test]
async fn export_of_an_integration_whose_spec_is_not_applied_writes_none_of_its_settings() {
    const ARN: &str = "arn:aws:iam::1:role/SECRETARN-4c2e";
    let env = support::TestEnv::new("atk-export-unapplied").await;
    let (_emulator, url) = emulator().await;
    let name = format!("paused-{}", env.namespace);
    let slug = "paused-bedrock";
    let created = post(
        &url,
        "/ai_gw/admin/v2/integrations",
        json!({"name": "paused bedrock", "ai_provider_id": "bedrock", "slug": slug,
            "create_default_provider": false,
            "configurations": {"aws_region": "eu-west-1", "aws_role_arn": ARN}}),
    )
    .await;
    let id = created["id"].as_str().expect("id").to_string();
    let integrations = kube::Api::<aigw::resources::Integration>::all(env.client.clone());
    let live = support::objects::object(
        "Integration",
        &name,
        json!({"name": "paused bedrock", "aiProviderId": "bedrock", "slug": slug,
               "configurations": {"aws_region": "eu-west-1"}}),
    );
    let live = support::create(&integrations, &live).await;
    let generation = live.metadata.generation.expect("generation");
    let dir = tempfile::tempdir().unwrap();
    let token = token_file(dir.path());
    let export = async |observed: i64, out: &str| {
        let ready = json!({"type": "Ready", "status": "True", "reason": "Synced",
            "message": "in sync", "lastTransitionTime": "2026-11-01T00:00:00Z",
            "observedGeneration": observed});
        integrations
            .patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"id": id, "slug": slug,
                    "observedGeneration": observed, "conditions": [ready]}})),
            )
            .await
            .unwrap();
        exported_with_cluster(&url, &token, &dir.path().join(out)).await
    };
    // Ready at an older generation: not applied.
    let shown = export(generation - 1, "unapplied").await;
    assert_shows_none(
        &shown,
        |text| text.contains("SECRETARN-4c2e"),
        "aigw export wrote a value the paused Integration's Secret gave it",
    );
    let exported = exported_file(&shown, "integration-paused-bedrock.yaml");
    assert!(exported.contains("path: /aws_role_arn"), "{exported}");
    assert!(exported.contains("path: /aws_region"), "{exported}");
    // Applied: its public settings are exported as they are.
    let shown = export(generation, "applied").await;
    assert!(
        shown
            .iter()
            .any(|(_, text)| text.contains("SECRETARN-4c2e")),
        "an applied Integration's public setting is exported as it is: {shown:?}"
    );
    cleanup_with_integration(env, &name).await;
}

/// A Config's first version took a target's `custom_host` from a Secret; eleven versions later
/// that version has left `status.history` (ten entries), and with it the `secretRefs` it used.
/// `aigw history --diff` of it printed the Secret's value. A version older than the recorded
/// history now shows its paths only, each value `(value hidden)`, and says so.
#[tokio::test]
async fn history_diff_hides_the_values_of_a_version_older_than_the_recorded_history() {
    const OLD: &str = "https://proxy.example/v1?token=OLDSECRET-5d1e";
    const PUBLIC: &str = "https://public.example/v1";
    let env = support::TestEnv::new("atk-hist-old").await;
    let (_emulator, url) = emulator().await;
    let http = reqwest::Client::new();
    let document = |n: u64, host: &str| {
        json!({"retry": {"attempts": n}, "strategy": {"mode": "single"},
               "targets": [{"provider": "@openai", "custom_host": host}]})
    };
    let created: Value = http
        .post(format!("{url}/ai_gw/v2/configs"))
        .bearer_auth(TOKEN)
        .json(&json!({"name": "old", "config": document(1, OLD)}))
        .json_value()
        .await;
    let slug = created["slug"].as_str().expect("slug").to_string();
    for n in 2..=12 {
        let answer = http
            .put(format!("{url}/ai_gw/v2/configs/{slug}"))
            .bearer_auth(TOKEN)
            .json(&json!({"config": document(n, PUBLIC)}))
            .send()
            .await
            .unwrap();
        assert!(answer.status().is_success(), "{answer:?}");
    }
    let versions: Value = http
        .get(format!("{url}/ai_gw/v2/configs/{slug}/versions"))
        .bearer_auth(TOKEN)
        .json_value()
        .await;
    // Newest first.
    let ids: Vec<String> = versions["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version_id"].as_str().expect("version_id").to_string())
        .collect();
    assert_eq!(ids.len(), 12, "{versions}");
    let spec = json!({"name": "old", "config": document(12, PUBLIC)});
    support::objects::create::<Config>(&env, "old", spec).await;
    let recorded: Vec<Value> = ids[..10]
        .iter()
        .map(|id| json!({"versionId": id, "appliedAt": "2026-11-01T00:00:00Z"}))
        .collect();
    env.api::<Config>()
        .patch_status(
            "old",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"slug": slug, "history": recorded}})),
        )
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let token = token_file(dir.path());
    let kubeconfig = support::kubeconfig_path().to_str().unwrap().to_string();
    let history = |a: &str, b: &str| {
        let mut all = args(&["history", "config/old", "--diff", a, b]);
        all.extend(args(&["-n", &env.namespace, "--kubeconfig", &kubeconfig]));
        all.extend(args(&["--management-url", &url, "--token-file", &token]));
        aigw(all)
    };
    let (ran, out) = history(&ids[11], &ids[10]).await;
    assert!(ran, "{out}");
    assert!(
        !out.contains("OLDSECRET-5d1e"),
        "aigw history --diff printed the value of a version older than the recorded history:\n{out}"
    );
    assert!(out.contains("(value hidden)"), "{out}");
    assert!(out.contains("older than"), "it says why: {out}");
    // Two recorded versions still show their values.
    let (ran, out) = history(&ids[1], &ids[0]).await;
    assert!(ran, "{out}");
    assert!(out.contains("\"attempts\": 12"), "{out}");
    env.cleanup().await;
}

/// Runs `aigw plan` (off the async runtime): its exit code and stdout then stderr.
async fn plan_exit(args: Vec<String>) -> (Option<i32>, String) {
    support::cli::aigw(args).await
}

/// `body` POSTed to the emulator at `path`, its answer.
async fn post(url: &str, path: &str, body: Value) -> Value {
    reqwest::Client::new()
        .post(format!("{url}{path}"))
        .bearer_auth(TOKEN)
        .json(&body)
        .json_value()
        .await
}

/// A pull request adopts another team's Config, Guardrail and Integration by slug, without
/// cluster access, and guesses the value one of their strings holds (a team PIN a Secret gave
/// it). The plan showed a remote string equal to the manifest's as equal and any other as
/// `(value hidden)`: guessing wrong gave a `-/+` line and exit 2, guessing right `adopt … (in
/// sync, nothing to write)` and exit 0 (attack on issue 27: a guessing oracle). An adoption's
/// remote strings are now never compared with the manifest's: the plan reads the same, exit code
/// included, whatever the guess, and says the adoption may write with the remote values hidden.
#[tokio::test]
async fn an_adoption_plan_reads_the_same_whether_a_guess_is_right_or_wrong() {
    const PIN: &str = "pin-4711";
    const WRONG: &str = "pin-1234";
    let (_emulator, url) = emulator().await;
    let document = |pin: &str| {
        json!({"strategy": {"mode": "single"},
               "targets": [{"provider": "@openai", "override_params": {"team_pin": pin}}]})
    };
    let config = post(
        &url,
        "/ai_gw/v2/configs",
        json!({"name": "victim", "config": document(PIN)}),
    )
    .await;
    let config_slug = config["slug"].as_str().expect("slug").to_string();
    let guardrail_slug = victim_guardrail(&url, format!("team_pin={PIN}")).await;
    post(
        &url,
        "/ai_gw/admin/v2/integrations",
        json!({"name": "victim openai", "ai_provider_id": "openai", "slug": "victim-pin",
            "create_default_provider": false,
            "configurations": {"custom_host": format!("https://{PIN}.victim.example")}}),
    )
    .await;
    let manifests = |pin: &str| {
        [
            (
                "Config",
                json!({"apiVersion": "aigw.io/v1alpha1", "kind": "Config",
                    "metadata": {"name": "probe", "namespace": "team-a"},
                    "spec": {"name": "victim", "slug": config_slug, "config": document(pin)}}),
            ),
            (
                "Guardrail",
                json!({"apiVersion": "aigw.io/v1alpha1", "kind": "Guardrail",
                    "metadata": {"name": "probe", "namespace": "team-a"},
                    "spec": {"name": "victim pii", "slug": guardrail_slug,
                        "workspaceId": WORKSPACE,
                        "checks": [{"id": "default.regexMatch",
                                    "parameters": {"rule": "\\d{16}"}}],
                        "actions": {"deny": true, "onFail": {"value": -5,
                            "metadata": format!("team_pin={pin}")}}}}),
            ),
            (
                "Integration",
                json!({"apiVersion": "aigw.io/v1alpha1", "kind": "Integration",
                    "metadata": {"name": "probe"},
                    "spec": {"name": "victim openai", "aiProviderId": "openai",
                        "slug": "victim-pin",
                        "configurations": {"custom_host": format!("https://{pin}.victim.example")}}}),
            ),
        ]
    };
    let dir = tempfile::tempdir().unwrap();
    let token = token_file(dir.path());
    let mut oracles = Vec::new();
    for index in 0..3 {
        for output in ["human", "json"] {
            let mut seen = Vec::new();
            for pin in [WRONG, PIN] {
                let (kind, manifest) = manifests(pin)[index].clone();
                let path = write(dir.path(), &format!("{kind}.yaml"), &manifest);
                let mut all = args(&["plan", "-f", &path, "--output", output]);
                all.extend(args(&["--management-url", &url, "--token-file", &token]));
                let (code, out) = plan_exit(all).await;
                assert!(code.is_some_and(|c| c <= 2), "[{kind}, {output}] {out}");
                seen.push((kind, code, out));
            }
            let (kind, wrong_code, wrong) = &seen[0];
            let (_, right_code, right) = &seen[1];
            // The right guess, written as the wrong one: an oracle reads differently.
            if (right_code, right.replace(PIN, WRONG)) != (wrong_code, wrong.clone()) {
                oracles.push(format!(
                    "[{kind}, {output}] wrong guess (exit {wrong_code:?}):\n{wrong}\nright guess (exit {right_code:?}):\n{right}"
                ));
                continue;
            }
            assert_eq!(
                *wrong_code,
                Some(2),
                "[{kind}, {output}] may write: {wrong}"
            );
            let said = match output {
                "human" => "(may write; remote values hidden)",
                _ => "\"valuesHidden\": true",
            };
            assert!(wrong.contains(said), "[{kind}, {output}] {wrong}");
            // The adoption shows the manifest's values it may write, as changed lines.
            if output == "human" {
                assert!(
                    wrong.contains("+ ") && wrong.contains(WRONG),
                    "[{kind}, human] no change lines: {wrong}"
                );
            }
        }
    }
    assert!(
        oracles.is_empty(),
        "the plan of an adoption tells whether a guess equals the remote value:\n{}",
        oracles.join("\n\n")
    );
}

/// Two manifests of one pull request adopt the same remote config, one by its slug and one by
/// its id (and two Integrations the same integration): `aigw validate` compares the spec fields
/// as written and passed them, and the plan showed two adoptions that would undo each other's
/// writes (attack on issue 27). The plan now resolves both to the remote object and reports
/// each as a conflict naming the other's resource and file.
#[tokio::test]
async fn a_remote_object_adopted_by_slug_and_by_id_in_one_plan_is_a_conflict() {
    let (_emulator, url) = emulator().await;
    let document = json!({"strategy": {"mode": "single"}, "targets": [{"provider": "@openai"}]});
    let config = post(
        &url,
        "/ai_gw/v2/configs",
        json!({"name": "shared", "config": document}),
    )
    .await;
    let (slug, id) = (
        config["slug"].as_str().expect("slug").to_string(),
        config["id"].as_str().expect("id").to_string(),
    );
    assert_ne!(slug, id);
    let integration = post(
        &url,
        "/ai_gw/admin/v2/integrations",
        json!({"name": "shared openai", "ai_provider_id": "openai", "slug": "shared-oai",
            "create_default_provider": false, "configurations": {}}),
    )
    .await;
    let integration_id = integration["id"].as_str().expect("id").to_string();
    let dir = tempfile::tempdir().unwrap();
    let manifests = dir.path().join("pr");
    std::fs::create_dir(&manifests).unwrap();
    let config_named = |name: &str, key: &str| {
        json!({"apiVersion": "aigw.io/v1alpha1", "kind": "Config",
            "metadata": {"name": name, "namespace": "team-a"},
            "spec": {"name": "shared", "slug": key, "config": document}})
    };
    let integration_named = |name: &str, key: &str| {
        json!({"apiVersion": "aigw.io/v1alpha1", "kind": "Integration",
            "metadata": {"name": name},
            "spec": {"name": "shared openai", "aiProviderId": "openai", "slug": key}})
    };
    write(&manifests, "by-slug.yaml", &config_named("by-slug", &slug));
    write(&manifests, "by-id.yaml", &config_named("by-id", &id));
    write(
        &manifests,
        "integration-by-slug.yaml",
        &integration_named("oai-by-slug", "shared-oai"),
    );
    write(
        &manifests,
        "integration-by-id.yaml",
        &integration_named("oai-by-id", &integration_id),
    );
    let token = dir.path().join("token");
    std::fs::write(&token, TOKEN).unwrap();
    let token = token.to_str().unwrap().to_string();
    for output in ["human", "json"] {
        let mut all = args(&[
            "plan",
            "-f",
            manifests.to_str().unwrap(),
            "--output",
            output,
        ]);
        all.extend(args(&["--management-url", &url, "--token-file", &token]));
        let (code, out) = plan_exit(all).await;
        assert_eq!(code, Some(1), "[{output}] a conflict: {out}");
        for (this, other) in [
            ("by-slug", "by-id.yaml"),
            ("by-id", "by-slug.yaml"),
            ("oai-by-slug", "integration-by-id.yaml"),
            ("oai-by-id", "integration-by-slug.yaml"),
        ] {
            assert!(
                out.lines()
                    .any(|l| l.contains("same remote object") && l.contains(other)),
                "[{output}] {this} names {other}: {out}"
            );
        }
    }
}
