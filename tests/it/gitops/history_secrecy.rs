//! `aigw history config/NAME --diff A B` on a real kube-apiserver and the emulator: a value a
//! Config takes from a Secret is never printed, whatever its key is called (found by an attack
//! on issue 20's secrecy; it failed before the fix).

use crate::support;

use std::time::Duration;

use aigw::resources::Config;
use k8s_openapi::api::core::v1::Secret;
use serde_json::{Value, json};
use support::harness::Harness;
use support::objects::{Conditions, object, routing};

const WAIT: Duration = Duration::from_secs(60);

/// Once the Config `bedrock` records two versions: the newer's id, then the older's.
async fn two_versions(h: &Harness) -> (String, String) {
    let config = h
        .wait_for::<Config>("bedrock", WAIT, |c| {
            c.ready() && c.status.as_ref().is_some_and(|s| s.history.len() == 2)
        })
        .await;
    let history = config.status.unwrap().history;
    (
        history[0].version_id.clone().unwrap(),
        history[1].version_id.clone().unwrap(),
    )
}

/// `aigw history config/NAME --diff A B`: a value taken from a Secret (`spec.secretRefs`) is
/// never printed, whatever its key.
#[tokio::test]
async fn history_diff_never_prints_a_secret_backed_value() {
    const FIRST: &str = "AKIAQ7ZX3EXAMPLEKEY1";
    const SECOND: &str = "AKIAQ7ZX3EXAMPLEKEY2";
    let h = Harness::start_with("atk-hist-secret", Duration::from_secs(600)).await;
    let put = |value: &'static str| h.put_secret("aws", json!({"id": value}), false);
    put(FIRST).await;
    let mut spec = routing("bedrock");
    spec["secretRefs"] =
        json!([{"path": "/aws_access_key_id", "secretKeyRef": {"name": "aws", "key": "id"}}]);
    support::objects::create::<Config>(&h.env, "bedrock", spec).await;
    h.wait_for::<Config>("bedrock", WAIT, |c| c.ready()).await;
    put(SECOND).await;
    let (newer, older) = two_versions(&h).await;
    let out = super::modes::history(&h, &["config/bedrock", "--diff", &older, &newer]).await;
    assert!(
        !out.contains(FIRST) && !out.contains(SECOND),
        "aigw history --diff printed the Secret's values:\n{out}"
    );
    h.stop().await;
}

/// Runs `aigw` off the async runtime (the in-process emulator keeps serving); stdout and stderr.
async fn aigw(args: Vec<String>) -> (bool, String) {
    let (code, text) = support::cli::aigw(args).await;
    (code.is_some_and(|c| c <= 2), text)
}

/// `aigw {args}` succeeds and shows the change (to `@openai`), never `value`.
async fn shows_the_change_not(value: &str, args: Vec<String>, what: &str) {
    let (ran, out) = aigw(args).await;
    assert!(ran, "{out}");
    assert!(out.contains("@openai"), "{what} shows the change: {out}");
    assert!(
        !out.contains(value),
        "{what} printed the Secret's value:\n{out}"
    );
}

/// A harness (drift pass every 10 minutes) whose namespace holds the Secret `name` of `data`.
async fn with_secret(prefix: &str, name: &str, data: Value) -> Harness {
    let h = Harness::start_with(prefix, Duration::from_secs(600)).await;
    let secret = json!({"metadata": {"name": name}, "stringData": data});
    h.env.create_from::<Secret>(secret).await;
    h
}

/// Runs `aigw export --out DIR/export {args}`: its output, and the output with every file it
/// wrote, which must not hold `value`.
async fn exported_without(
    value: &str,
    dir: &std::path::Path,
    args: Vec<String>,
) -> (String, String) {
    let out_dir = dir.join("export");
    let mut all = vec!["export".to_string(), "--out".into()];
    all.push(out_dir.to_str().unwrap().into());
    all.extend(args);
    let (ran, out) = aigw(all).await;
    assert!(ran, "{out}");
    let mut exported = out.clone();
    for entry in std::fs::read_dir(&out_dir).unwrap() {
        exported.push_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap());
    }
    assert!(
        !exported.contains(value),
        "aigw export wrote the Secret's value:\n{exported}"
    );
    (out, exported)
}

/// The flags of an export for `namespace` from `h`'s emulator (the token in `token`) that reads
/// the cluster.
fn reading_the_cluster(h: &Harness, namespace: &str, token: &std::path::Path) -> Vec<String> {
    [
        "--namespace",
        namespace,
        "--management-url",
        &h.emulator.management_url(),
        "--token-file",
        token.to_str().unwrap(),
        "--kubeconfig",
        support::kubeconfig_path().to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec()
}

/// A target prepended before the one a Secret fills shifts the `secretRefs` index: the remote
/// document and the older version hold the value at the old index. Neither `aigw plan` (with
/// and without cluster access) nor `aigw history --diff` prints it, nor does `aigw export`
/// after a console edit moved it (review F2; plan and export printed it before the fix).
#[tokio::test]
async fn plan_history_and_export_never_print_a_secret_backed_value_after_an_index_shift() {
    const VALUE: &str = "AKIAPLANLEAK00000001";
    let mut h = with_secret("atk-index-shift", "aws", json!({"id": VALUE})).await;
    let spec = |targets: Value, index: usize| {
        json!({"name": "bedrock",
               "config": {"strategy": {"mode": "fallback"}, "targets": targets},
               "secretRefs": [{"path": format!("/targets/{index}/aws_access_key_id"),
                               "secretKeyRef": {"name": "aws", "key": "id"}}]})
    };
    let before = spec(json!([{"provider": "@bedrock-a"}]), 0);
    let after = spec(
        json!([{"provider": "@openai"}, {"provider": "@bedrock-a"}]),
        1,
    );
    support::objects::create::<Config>(&h.env, "bedrock", before).await;
    let slug = h.env.ready_config_slug("bedrock", WAIT).await;

    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, support::harness::TOKEN).unwrap();
    let token = token.to_str().unwrap().to_string();
    let kubeconfig = support::kubeconfig_path().to_str().unwrap().to_string();
    let url = h.emulator.management_url();
    let target = |kube: bool| {
        let mut args = vec![
            "--management-url".to_string(),
            url.clone(),
            "--token-file".into(),
            token.clone(),
        ];
        if kube {
            args.extend(["--kubeconfig".into(), kubeconfig.clone()]);
        }
        args
    };
    // The pull request: the same Config with a target prepended. Once as the live resource
    // knows it (cluster access), once adopting the remote config by slug (no cluster access).
    let manifest = |with_slug: bool| {
        let mut object: Value = object("Config", "bedrock", after.clone());
        object["metadata"]["namespace"] = json!(h.env.namespace);
        if with_slug {
            object["spec"]["slug"] = json!(slug);
        }
        let path = dir.path().join(format!("pr-{with_slug}.yaml"));
        std::fs::write(&path, serde_yaml::to_string(&object).unwrap()).unwrap();
        path.to_str().unwrap().to_string()
    };
    for (kube, with_slug) in [(true, false), (false, true)] {
        for output in ["human", "json"] {
            let mut args = vec!["plan".to_string(), "-f".into(), manifest(with_slug)];
            args.extend(["--output".into(), output.into()]);
            args.extend(target(kube));
            let what = format!("aigw plan ({output}, cluster access: {kube})");
            shows_the_change_not(VALUE, args, &what).await;
        }
    }

    h.env.patch_spec::<Config>("bedrock", json!(after)).await;
    let (newer, older) = two_versions(&h).await;
    let mut args = vec!["history".to_string(), "config/bedrock".into()];
    args.extend(["--diff".into(), older, newer]);
    args.extend(["-n".into(), h.env.namespace.clone()]);
    args.extend(target(true));
    shows_the_change_not(VALUE, args, "aigw history --diff").await;

    // A console edit swaps the targets: the remote holds the value at index 0, the live
    // resource names index 1. `aigw export` writes no file holding it, and says why. The
    // operator stops first: a reconcile still under way would put the document back.
    h.stop_operator().await;
    h.put(
        &format!("/ai_gw/v2/configs/{slug}"),
        json!({"config": {"strategy": {"mode": "fallback"}, "targets": [
            {"provider": "@bedrock-a", "aws_access_key_id": VALUE}, {"provider": "@openai"}]}}),
    )
    .await;
    let mut args = vec!["--namespace".to_string(), h.env.namespace.clone()];
    args.extend(target(true));
    let (out, _) = exported_without(VALUE, dir.path(), args).await;
    assert!(out.contains(&format!("config {slug}")), "{out}");
    h.stop().await;
}

/// A Config whose current spec names no Secret any more, while the remote still holds the value
/// the version applied last took from one (the new spec not applied yet: the operator stopped,
/// as under a promotion gate, a pause or a stall): `aigw export` hides it by the history's
/// references, whatever its key is called (before: a resource without `spec.secretRefs` was
/// skipped, and a value at an innocent-looking key was exported).
#[tokio::test]
async fn export_hides_a_value_only_the_history_names() {
    const VALUE: &str = "PIN-4417-EXPORTLEAK";
    let mut h = with_secret("atk-export-hist", "pins", json!({"pin": VALUE})).await;
    let mut spec = routing("billing");
    spec["config"]["metadata"] = json!({"team": "billing"});
    spec["secretRefs"] =
        json!([{"path": "/metadata/ticket", "secretKeyRef": {"name": "pins", "key": "pin"}}]);
    support::objects::create::<Config>(&h.env, "billing", spec).await;
    let slug = h.env.ready_config_slug("billing", WAIT).await;
    h.stop_operator().await;
    let mut plain = routing("billing");
    plain["config"]["metadata"] = json!({"team": "billing", "ticket": "none"});
    h.env.patch_spec::<Config>("billing", json!(plain)).await;
    let unset = json!({"spec": {"secretRefs": null}});
    h.env
        .api::<Config>()
        .patch(
            "billing",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&unset),
        )
        .await
        .unwrap();

    // A config no live resource records (another cluster's, an orphaned one's): exported, and
    // named as one whose Secret-backed values cannot be recognised.
    let orphan = h
        .post(
            "/ai_gw/v2/configs",
            json!({"name": "orphan", "config": {"strategy": {"mode": "single"},
                   "targets": [{"provider": "@openai"}]}}),
        )
        .await;
    let orphan = orphan["slug"].as_str().expect("slug").to_string();

    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, support::harness::TOKEN).unwrap();
    let args = reading_the_cluster(&h, &h.env.namespace, &token);
    let (out, exported) = exported_without(VALUE, dir.path(), args).await;
    assert!(
        exported.contains(&slug),
        "the config was exported: {exported}"
    );
    let note = format!("note: no live resource records config {orphan}");
    assert!(out.contains(&note), "{out}");
    assert!(!out.contains(&format!("records config {slug}")), "{out}");
    h.stop().await;
}

/// A Config whose live resource takes a value from a Secret, exported for another namespace:
/// its manifest names that Secret, which must exist there with the same value (another Secret
/// of that name would be read and sent). The header says so, and so does a note on stderr;
/// exported for the resource's own namespace, no note. The value is never written.
#[tokio::test]
async fn export_for_another_namespace_says_which_secrets_it_takes_values_from() {
    const VALUE: &str = "sk-BORROWED-EXPORT-1";
    let h = with_secret("exp-borrowed", "llm-keys", json!({"openai": VALUE})).await;
    let mut spec = routing("borrowed");
    spec["secretRefs"] = json!([{"path": "/targets/0/api_key", "secretKeyRef": {"name": "llm-keys", "key": "openai"}}]);
    support::objects::create::<Config>(&h.env, "borrowed", spec).await;
    let slug = h.env.ready_config_slug("borrowed", WAIT).await;

    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, support::harness::TOKEN).unwrap();
    let export = async |namespace: &str| {
        let args = reading_the_cluster(&h, namespace, &token);
        exported_without(VALUE, dir.path(), args).await
    };
    let (out, exported) = export("team-elsewhere").await;
    let note = format!(
        "note: 1 exported manifests take values from the Secrets of a live resource in another namespace than they are for team-elsewhere (config {slug}: Secret llm-keys (as {}/borrowed does))",
        h.env.namespace
    );
    assert!(out.contains(&note), "{out}");
    assert!(
        exported.contains("# It takes values from Secret llm-keys, as its live resource does"),
        "{exported}"
    );
    let (out, _) = export(&h.env.namespace).await;
    assert!(!out.contains("another namespace"), "{out}");
    h.stop().await;
}
