//! Guardrail on a real kube-apiserver against the emulator over HTTP: a Secret-backed check
//! parameter reaches the API and nothing else, steady state writes nothing, a Secret change is
//! one PUT, a remote edit is corrected, and a guardrail a Config names waits for that Config.

mod support;

use std::time::Duration;

use aigw::resources::{Config, Guardrail};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams, PostParams};
use reqwest::Method;
use serde_json::{Value, json};
use support::harness::{Harness, captured_logs};
use support::objects::{Conditions, object};

const WAIT: Duration = Duration::from_secs(30);
const WORKSPACE: &str = "9f3c2b1a-0d4e-4f6a-8b7c-1e2d3f4a5b6c";
const SECRET_VALUE: &str = "airs-key-Zq8Wm3Lx7Pv2";
const ROTATED_VALUE: &str = "airs-key-Rt5Yn1Kc9Hd4";

fn guardrail_spec(name: &str) -> Value {
    json!({"name": name, "workspaceId": WORKSPACE,
           "checks": [{"id": "default.regexMatch", "parameters": {"rule": "\\d{16}"}},
                      {"id": "panw-prisma-airs.intercept", "parameters": {"profile_name": "strict"}}],
           "secretRefs": [{"path": "/checks/1/parameters/api_key",
                           "secretKeyRef": {"name": "airs", "key": "api-key"}}],
           "actions": {"deny": true, "onFail": {"value": -5}}})
}

async fn put_secret(h: &Harness, value: &str) {
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "airs"}, "stringData": {"api-key": value}
    }))
    .unwrap();
    h.env
        .api::<Secret>()
        .patch(
            "airs",
            &PatchParams::apply("test").force(),
            &Patch::Apply(&secret),
        )
        .await
        .unwrap();
}

/// The emulator's record of guardrail `slug`, parameters in clear.
async fn remote(h: &Harness, slug: &str) -> Option<Value> {
    h.state().await["guardrails"]
        .as_array()?
        .iter()
        .find(|g| g["slug"] == slug)
        .cloned()
}

async fn puts(h: &Harness) -> u64 {
    h.count("PUT /ai_gw/v2/guardrails/{guardrailId}").await
}

#[tokio::test]
async fn a_secret_parameter_reaches_the_api_and_nothing_else() {
    let h = Harness::start_with("gr-secret", Duration::from_secs(1)).await;
    put_secret(&h, SECRET_VALUE).await;
    h.env
        .api::<Guardrail>()
        .create(
            &PostParams::default(),
            &object("Guardrail", "pii", guardrail_spec("pii")),
        )
        .await
        .unwrap();
    let ready = h
        .env
        .wait_for::<Guardrail>("pii", WAIT, |g| g.ready())
        .await;
    let status = ready.status.clone().unwrap();
    let slug = status.slug.clone().expect("a slug");
    assert!(status.version_id.is_some() && !status.history.is_empty());
    let stored = remote(&h, &slug).await.expect("the remote guardrail");
    assert_eq!(
        stored["checks"][1]["parameters"]["api_key"], SECRET_VALUE,
        "the Secret's value reached the API"
    );

    // Steady state over several drift passes: reads may mask the value, nothing is written.
    h.reset_stats().await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(h.remote_writes().await, 0, "no write at steady state");

    // A Secret change: one PUT with the new value.
    put_secret(&h, ROTATED_VALUE).await;
    support::wait_until(WAIT, || async {
        let stored = remote(&h, &slug).await?;
        (stored["checks"][1]["parameters"]["api_key"] == ROTATED_VALUE).then_some(())
    })
    .await
    .expect("the rotated value was applied");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(puts(&h).await, 1, "one PUT for the Secret change");

    // A remote edit of the checks is corrected.
    h.call(
        Method::PUT,
        &format!("/ai_gw/v2/guardrails/{slug}"),
        Some(json!({"checks": [{"id": "default.regexMatch", "parameters": {"rule": "x"}}]})),
    )
    .await;
    support::wait_until(WAIT, || async {
        let stored = remote(&h, &slug).await?;
        (stored["checks"].as_array()?.len() == 2).then_some(())
    })
    .await
    .expect("the remote edit was not corrected");

    // The values are nowhere but in the API.
    let statuses = serde_json::to_string(
        &h.env
            .api::<Guardrail>()
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .iter()
            .map(|g| g.status.clone())
            .collect::<Vec<_>>(),
    )
    .unwrap();
    let events = h.env.events_text().await;
    let logs = captured_logs();
    for value in [SECRET_VALUE, ROTATED_VALUE] {
        assert!(!statuses.contains(value), "a Secret value in a status");
        assert!(!events.contains(value), "a Secret value in an event");
        assert!(!logs.contains(value), "a Secret value in the logs");
    }
    h.stop().await;
}

#[tokio::test]
async fn a_guardrail_a_config_names_is_deleted_only_once_the_config_lets_go() {
    let h = Harness::start_with("gr-refs", Duration::from_secs(1)).await;
    let mut spec = guardrail_spec("kept");
    spec["secretRefs"] = json!([]);
    spec["checks"] = json!([{"id": "default.regexMatch", "parameters": {"rule": "\\d{16}"}}]);
    h.env
        .api::<Guardrail>()
        .create(&PostParams::default(), &object("Guardrail", "kept", spec))
        .await
        .unwrap();
    let slug = h
        .env
        .wait_for::<Guardrail>("kept", WAIT, |g| g.ready())
        .await
        .status
        .unwrap()
        .slug
        .unwrap();
    let config = json!({"name": "uses-it", "config": {"input_guardrails": [slug],
        "targets": [{"provider": "@openai"}]}});
    h.env
        .api::<Config>()
        .create(&PostParams::default(), &object("Config", "uses-it", config))
        .await
        .unwrap();
    h.env
        .wait_for::<Config>("uses-it", WAIT, |c| c.ready())
        .await;

    h.env
        .api::<Guardrail>()
        .delete("kept", &Default::default())
        .await
        .unwrap();
    let waiting = h
        .env
        .wait_for::<Guardrail>("kept", WAIT, |g| g.stalled_with("StillReferenced"))
        .await;
    let (_, _, message) = waiting.condition("Stalled").unwrap();
    assert!(message.contains("uses-it"), "{message}");
    assert!(remote(&h, &slug).await.is_some(), "not deleted while named");

    h.env.delete_and_wait::<Config>("uses-it", WAIT).await;
    let gone = support::wait_until(Duration::from_secs(60), || async {
        h.env
            .api::<Guardrail>()
            .get_opt("kept")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    assert!(gone.is_some(), "the guardrail went once no Config named it");
    assert!(remote(&h, &slug).await.is_none(), "deleted remotely");
    h.stop().await;
}

#[tokio::test]
async fn a_config_naming_a_guardrail_resource_waits_for_it_then_applies_with_one_put() {
    let h = Harness::start_with("gr-named", Duration::from_secs(1)).await;
    let config = json!({"name": "routes", "config": {"targets": [{"provider": "@openai"}]}});
    h.env
        .api::<Config>()
        .create(&PostParams::default(), &object("Config", "routes", config))
        .await
        .unwrap();
    h.env
        .wait_for::<Config>("routes", WAIT, |c| c.ready())
        .await;

    // Name a Guardrail that does not exist yet: the Config waits, naming it, and writes nothing.
    h.reset_stats().await;
    let refs = json!({"spec": {"resourceRefs": [
        {"path": "/input_guardrails/0", "kind": "Guardrail", "name": "pii-later"}]}});
    h.env
        .api::<Config>()
        .patch("routes", &PatchParams::default(), &Patch::Merge(&refs))
        .await
        .unwrap();
    let waiting = h
        .env
        .wait_for::<Config>("routes", WAIT, |c| c.stalled_with("ReferenceNotReady"))
        .await;
    let (_, _, message) = waiting.condition("Stalled").unwrap();
    assert!(message.contains("pii-later"), "{message}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(h.remote_writes().await, 0, "nothing written while waiting");

    let mut spec = guardrail_spec("pii-later");
    spec["secretRefs"] = json!([]);
    spec["checks"] = json!([{"id": "default.regexMatch", "parameters": {"rule": "\\d{16}"}}]);
    h.env
        .api::<Guardrail>()
        .create(
            &PostParams::default(),
            &object("Guardrail", "pii-later", spec),
        )
        .await
        .unwrap();
    let slug = h
        .env
        .wait_for::<Guardrail>("pii-later", WAIT, |g| g.ready())
        .await
        .status
        .unwrap()
        .slug
        .unwrap();
    let ready = h
        .env
        .wait_for::<Config>("routes", WAIT, |c| c.ready())
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        h.count("PUT /ai_gw/v2/configs/{slug}").await,
        1,
        "one PUT once the guardrail is Ready"
    );
    let remote_slug = ready.status.unwrap().slug.unwrap();
    let remote = h
        .call(
            Method::GET,
            &format!("/ai_gw/v2/configs/{remote_slug}"),
            None,
        )
        .await;
    let document: Value = match &remote["config"] {
        Value::String(text) => serde_json::from_str(text).unwrap(),
        other => other.clone(),
    };
    assert_eq!(document["input_guardrails"], json!([slug]));
    h.stop().await;
}
