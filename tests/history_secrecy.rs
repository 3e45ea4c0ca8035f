//! `aigw history config/NAME --diff A B` on a real kube-apiserver and the emulator: a value a
//! Config takes from a Secret is never printed, whatever its key is called (found by an attack
//! on issue 20's secrecy; it failed before the fix).

mod support;

use std::time::Duration;

use aigw::resources::Config;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use support::harness::Harness;
use support::objects::{Conditions, object, routing};

const WAIT: Duration = Duration::from_secs(60);

/// `aigw history config/NAME --diff A B`: a value taken from a Secret (`spec.secretRefs`) is
/// never printed, whatever its key.
#[tokio::test]
async fn history_diff_never_prints_a_secret_backed_value() {
    const FIRST: &str = "AKIAQ7ZX3EXAMPLEKEY1";
    const SECOND: &str = "AKIAQ7ZX3EXAMPLEKEY2";
    let h = Harness::start_with("atk-hist-secret", Duration::from_secs(600)).await;
    let put = |value: &'static str| {
        let secrets = h.env.api::<Secret>();
        async move {
            let secret: Secret = serde_json::from_value(
                json!({"metadata": {"name": "aws"}, "stringData": {"id": value}}),
            )
            .unwrap();
            secrets
                .patch(
                    "aws",
                    &PatchParams::apply("test").force(),
                    &Patch::Apply(&secret),
                )
                .await
                .unwrap();
        }
    };
    put(FIRST).await;
    let mut spec = routing("bedrock");
    spec["secretRefs"] =
        json!([{"path": "/aws_access_key_id", "secretKeyRef": {"name": "aws", "key": "id"}}]);
    h.env
        .api::<Config>()
        .create(&PostParams::default(), &object("Config", "bedrock", spec))
        .await
        .unwrap();
    h.env
        .wait_for::<Config>("bedrock", WAIT, |c| c.ready())
        .await;
    put(SECOND).await;
    let config = h
        .env
        .wait_for::<Config>("bedrock", WAIT, |c| {
            c.ready() && c.status.as_ref().is_some_and(|s| s.history.len() == 2)
        })
        .await;
    let history = config.status.unwrap().history;
    let (newer, older) = (
        history[0].version_id.clone().unwrap(),
        history[1].version_id.clone().unwrap(),
    );
    let token = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(token.path(), support::harness::TOKEN).unwrap();
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_aigw"));
    command
        .args(["history", "config/bedrock", "--diff", &older, &newer])
        .args(["-n", &h.env.namespace])
        .arg("--kubeconfig")
        .arg(support::kubeconfig_path())
        .args(["--management-url", &h.emulator.management_url()])
        .arg("--token-file")
        .arg(token.path());
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .expect("aigw runs");
    let out = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(output.status.success(), "{output:?}");
    assert!(
        !out.contains(FIRST) && !out.contains(SECOND),
        "aigw history --diff printed the Secret's values:\n{out}"
    );
    h.stop().await;
}
