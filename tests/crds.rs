//! The CRDs on a real kube-apiserver: each kind round-trips, and admission rejects bad
//! manifests with a message that names the field.

mod support;

use aigw::resources::{Config, Deployment, RateLimitsPolicy};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;
use support::TestEnv;

fn dynamic_api(env: &TestEnv, kind: &str, plural: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("aigw.io", "v1alpha1", kind);
    Api::namespaced_with(
        env.client.clone(),
        &env.namespace,
        &ApiResource::from_gvk_with_plural(&gvk, plural),
    )
}

fn object(kind: &str, name: &str, spec: serde_json::Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "aigw.io/v1alpha1", "kind": kind,
        "metadata": {"name": name}, "spec": spec,
    }))
    .unwrap()
}

fn config_spec() -> serde_json::Value {
    json!({"name": "routing", "config": {"strategy": {"mode": "fallback"}, "targets": [{"provider": "@openai-prod"}]}})
}

fn policy_spec() -> serde_json::Value {
    json!({"name": "per-key", "type": "requests", "unit": "rpm", "value": 100,
           "conditions": [{"key": "workspace_id", "value": "ws-1"}], "groupBy": [{"key": "api_key"}]})
}

fn deployment_spec() -> serde_json::Value {
    json!({"name": "edge", "type": "production", "credentialsSecretRef": {"name": "edge-creds"},
           "authSettings": {"gatewayBaseUrl": "https://gw.example", "workspacesAllowed": ["ws-1"]}})
}

#[tokio::test]
async fn each_kind_round_trips_through_the_apiserver() {
    let env = TestEnv::new("crds-roundtrip").await;
    let pp = PostParams::default();

    dynamic_api(&env, "Config", "configs")
        .create(&pp, &object("Config", "routing", config_spec()))
        .await
        .unwrap();
    let config = env.api::<Config>().get("routing").await.unwrap();
    assert_eq!(config.spec.name, "routing");
    assert_eq!(config.spec.config["strategy"]["mode"], "fallback");

    dynamic_api(&env, "Deployment", "deployments")
        .create(&pp, &object("Deployment", "edge", deployment_spec()))
        .await
        .unwrap();
    let deployment = env.api::<Deployment>().get("edge").await.unwrap();
    assert_eq!(deployment.spec.credentials_secret_ref.name, "edge-creds");
    assert_eq!(
        deployment.spec.deletion_policy,
        aigw::resources::deployment::DeploymentDeletionPolicy::Archive,
        "the apiserver defaults deletionPolicy"
    );

    dynamic_api(&env, "RateLimitsPolicy", "ratelimitspolicies")
        .create(&pp, &object("RateLimitsPolicy", "per-key", policy_spec()))
        .await
        .unwrap();
    let policy = env.api::<RateLimitsPolicy>().get("per-key").await.unwrap();
    assert_eq!(policy.spec.value, 100.0);
    env.cleanup().await;
}

async fn rejection(api: &Api<DynamicObject>, obj: &DynamicObject) -> String {
    match api.create(&PostParams::default(), obj).await {
        Ok(_) => panic!(
            "the apiserver accepted an invalid {}",
            obj.metadata.name.as_deref().unwrap_or("")
        ),
        Err(kube::Error::Api(status)) => status.message,
        Err(other) => panic!("unexpected error: {other}"),
    }
}

#[tokio::test]
async fn invalid_manifests_are_rejected_naming_the_field() {
    let env = TestEnv::new("crds-invalid").await;

    let mut spec = policy_spec();
    spec["unit"] = json!("rps");
    let message = rejection(
        &dynamic_api(&env, "RateLimitsPolicy", "ratelimitspolicies"),
        &object("RateLimitsPolicy", "bad-unit", spec),
    )
    .await;
    assert!(
        message.contains("spec.unit") && message.contains("rps"),
        "{message}"
    );

    let mut spec = deployment_spec();
    spec["type"] = json!("staging");
    let message = rejection(
        &dynamic_api(&env, "Deployment", "deployments"),
        &object("Deployment", "bad-type", spec),
    )
    .await;
    assert!(message.contains("spec.type"), "{message}");

    let mut spec = config_spec();
    spec.as_object_mut().unwrap().remove("name");
    let message = rejection(
        &dynamic_api(&env, "Config", "configs"),
        &object("Config", "no-name", spec),
    )
    .await;
    assert!(
        message.contains("spec.name") && message.contains("Required"),
        "{message}"
    );

    let mut spec = policy_spec();
    spec["groupBy"] = json!([]);
    let message = rejection(
        &dynamic_api(&env, "RateLimitsPolicy", "ratelimitspolicies"),
        &object("RateLimitsPolicy", "no-group", spec),
    )
    .await;
    assert!(message.contains("spec.groupBy"), "{message}");
    env.cleanup().await;
}

#[tokio::test]
async fn immutable_fields_cannot_change() {
    let env = TestEnv::new("crds-immutable").await;
    let api = dynamic_api(&env, "RateLimitsPolicy", "ratelimitspolicies");
    api.create(
        &PostParams::default(),
        &object("RateLimitsPolicy", "fixed", policy_spec()),
    )
    .await
    .unwrap();

    for (field, value, wanted) in [
        ("type", json!("tokens"), "type is immutable"),
        (
            "groupBy",
            json!([{"key": "workspace_id"}]),
            "groupBy is immutable",
        ),
        ("target", json!("mcp_tools"), "target is immutable"),
    ] {
        let mut spec = policy_spec();
        spec[field] = value;
        let patch = json!({"spec": spec});
        let result = api
            .patch("fixed", &PatchParams::default(), &Patch::Merge(&patch))
            .await;
        if field == "target" {
            // Setting an optional immutable field for the first time is allowed …
            result.expect("setting target the first time is allowed");
            // … changing it afterwards is not.
            let patch = json!({"spec": {"target": "llm"}});
            let err = api
                .patch("fixed", &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .unwrap_err();
            assert!(err.to_string().contains(wanted), "{err}");
            continue;
        }
        let err = result.expect_err("an immutable field changed");
        assert!(
            err.to_string().contains(wanted) && err.to_string().contains(&format!("spec.{field}")),
            "{err}"
        );
    }

    // A mutable field still changes.
    let patch = json!({"spec": {"value": 250, "unit": "rph"}});
    api.patch("fixed", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    env.cleanup().await;
}
