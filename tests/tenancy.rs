//! Many teams in one cluster (issue 9): one owner per remote object, tenancy grants, and Secrets
//! that stay where they belong. Real apiserver, real emulator.

mod support;

use std::time::Duration;

use aigw::resources::{Config, Deployment, RateLimitsPolicy};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use reqwest::Method;
use serde_json::{Value, json};
use support::harness::Harness;
use support::objects::{Conditions, create, gateway, limits, object, routing};

const WAIT: Duration = Duration::from_secs(60);
const DRIFT: Duration = Duration::from_secs(1);

async fn remote_config(h: &Harness, slug: &str) -> Option<Value> {
    let state = h.state().await;
    state["configs"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["slug"] == slug)
        .cloned()
}

async fn writes(h: &Harness) -> u64 {
    h.remote_writes().await
}

#[tokio::test]
async fn a_second_claim_on_a_config_writes_nothing_and_takes_over_only_when_the_owner_is_gone() {
    let h = Harness::start_two_teams("ten-config", DRIFT, None).await;
    let dev = h.other.as_ref().unwrap();
    let mut prod_spec = routing("prod-routing");
    prod_spec["deletionPolicy"] = "Orphan".into();
    create::<Config>(&h.env, "routing", prod_spec).await;
    let prod = h
        .env
        .wait_for::<Config>("routing", WAIT, |c| c.ready())
        .await;
    let slug = prod.status.unwrap().slug.unwrap();
    let owner_document = remote_config(&h, &slug).await.unwrap()["config"].clone();
    // Creation times have one-second resolution; a tie would be broken by uid.
    tokio::time::sleep(Duration::from_millis(1100)).await;

    // Two intruders in the other namespace name the same slug with another document.
    for name in ["intruder", "late-intruder"] {
        let mut spec = routing(name);
        spec["slug"] = json!(slug);
        spec["config"] = json!({"retry": {"attempts": 9}});
        create::<Config>(dev, name, spec).await;
        tokio::time::sleep(Duration::from_millis(1100)).await; // distinct creation seconds
    }
    let stalled = dev
        .wait_for::<Config>("intruder", WAIT, |c| c.stalled_with("AlreadyManaged"))
        .await;
    let (_, _, message) = stalled.condition("Stalled").unwrap();
    assert!(
        message.contains(&format!("{}/routing", h.env.namespace)),
        "names the owner: {message}"
    );
    h.reset_stats().await;
    tokio::time::sleep(DRIFT * 3 + Duration::from_secs(1)).await;
    assert_eq!(writes(&h).await, 0, "{}", h.stats().await);
    assert_eq!(
        remote_config(&h, &slug).await.unwrap()["config"],
        owner_document,
        "the owner's document stays"
    );

    // Deleting a claimant that does not own the object never touches it.
    dev.delete_and_wait::<Config>("late-intruder", WAIT).await;
    assert!(
        remote_config(&h, &slug).await.is_some(),
        "the remote config survives"
    );

    // When the owner goes (leaving the object), the next claimant adopts it.
    h.env.delete_and_wait::<Config>("routing", WAIT).await;
    dev.wait_for::<Config>("intruder", WAIT, |c| c.ready())
        .await;
    assert_eq!(
        remote_config(&h, &slug).await.unwrap()["config"],
        json!({"retry": {"attempts": 9}})
    );
    h.stop().await;
}

#[tokio::test]
async fn a_second_claim_on_a_policy_is_stalled() {
    let h = Harness::start_two_teams("ten-policy", DRIFT, None).await;
    let dev = h.other.as_ref().unwrap();
    create::<RateLimitsPolicy>(&h.env, "limits", limits("limits")).await;
    let owner = h
        .env
        .wait_for::<RateLimitsPolicy>("limits", WAIT, |p| p.ready())
        .await;
    let id = owner.status.unwrap().id.unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let mut spec = limits("limits");
    spec["policyId"] = json!(id);
    spec["value"] = json!(5);
    create::<RateLimitsPolicy>(dev, "limits", spec).await;
    dev.wait_for::<RateLimitsPolicy>("limits", WAIT, |p| p.stalled_with("AlreadyManaged"))
        .await;
    h.reset_stats().await;
    tokio::time::sleep(DRIFT * 3 + Duration::from_secs(1)).await;
    assert_eq!(writes(&h).await, 0, "{}", h.stats().await);
    let state = h.state().await;
    let remote = state["rate_limits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == id.as_str())
        .unwrap();
    assert_eq!(
        remote["value"].as_f64(),
        Some(100.0),
        "the owner's policy stays"
    );
    h.stop().await;
}

#[tokio::test]
async fn only_the_owner_rotates_a_shared_deployment() {
    let h = Harness::start_two_teams("ten-deploy", DRIFT, None).await;
    let dev = h.other.as_ref().unwrap();
    let mut owner_spec = gateway("shared-gw", "owner-creds");
    owner_spec["rotation"] = json!({"trigger": "1"});
    let owners = h.env.api::<Deployment>();
    owners
        .create(
            &PostParams::default(),
            &object("Deployment", "gw", owner_spec),
        )
        .await
        .unwrap();
    let owner = h
        .env
        .wait_for::<Deployment>("gw", WAIT, |d| d.ready())
        .await;
    let id = owner.status.unwrap().id.unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let mut intruder_spec = gateway("shared-gw", "stolen-creds");
    intruder_spec["deploymentId"] = json!(id);
    intruder_spec["rotation"] = json!({"trigger": "x"});
    let intruders = dev.api::<Deployment>();
    intruders
        .create(
            &PostParams::default(),
            &object("Deployment", "gw", intruder_spec),
        )
        .await
        .unwrap();
    dev.wait_for::<Deployment>("gw", WAIT, |d| d.stalled_with("AlreadyManaged"))
        .await;
    for (api, trigger) in [(&intruders, "y"), (&owners, "2"), (&intruders, "z")] {
        api.patch(
            "gw",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"rotation": {"trigger": trigger}}})),
        )
        .await
        .unwrap();
    }
    h.env
        .wait_for::<Deployment>("gw", WAIT, |d| {
            d.ready()
                && d.status
                    .as_ref()
                    .unwrap()
                    .rotation
                    .observed_rotation_trigger
                    .as_deref()
                    == Some("2")
        })
        .await;
    tokio::time::sleep(DRIFT * 3).await;
    let state = h.state().await;
    let remote = state["deployments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["id"] == id.as_str())
        .unwrap()
        .clone();
    assert_eq!(
        remote["rotations"], 1,
        "only the owner's trigger change rotated"
    );
    assert!(
        dev.api::<Secret>()
            .get_opt("stolen-creds")
            .await
            .unwrap()
            .is_none(),
        "the intruder's Secret never received credentials"
    );
    h.stop().await;
}

#[tokio::test]
async fn grants_refuse_adoption_and_foreign_workspaces_without_any_api_call() {
    const WS_A: &str = "6f1d8c1e-5a8b-4c5e-9c1a-0b2d3e4f5a6b";
    const WS_B: &str = "0a9b8c7d-6e5f-4a3b-9c2d-1e0f9a8b7c6d";
    let grants = json!([
        {"namespaces": ["{ns}"], "workspaces": [WS_A], "allowAdoption": false},
        {"namespaces": ["{other}"], "allowAdoption": true}
    ]);
    let h = Harness::start_two_teams("ten-grant", DRIFT, Some(grants)).await;
    let configs = h.env.api::<Config>();
    let mut adopt = routing("adopt");
    adopt["slug"] = json!("pc-someone-elses");
    adopt["workspaceId"] = json!(WS_A);
    let mut foreign = routing("foreign");
    foreign["workspaceId"] = json!(WS_B);
    let unscoped = routing("unscoped");
    for (name, spec) in [
        ("adopt", adopt),
        ("foreign", foreign),
        ("unscoped", unscoped),
    ] {
        configs
            .create(&PostParams::default(), &object("Config", name, spec))
            .await
            .unwrap();
    }
    let refused = h
        .env
        .wait_for::<Config>("adopt", WAIT, |c| c.stalled_with("AdoptionNotAllowed"))
        .await;
    assert!(
        refused
            .condition("Stalled")
            .unwrap()
            .2
            .contains("allowAdoption")
    );
    let refused = h
        .env
        .wait_for::<Config>("foreign", WAIT, |c| c.stalled_with("WorkspaceNotAllowed"))
        .await;
    assert!(refused.condition("Stalled").unwrap().2.contains(WS_B));
    h.env
        .wait_for::<Config>("unscoped", WAIT, |c| c.stalled_with("WorkspaceNotAllowed"))
        .await;
    tokio::time::sleep(DRIFT * 2).await;
    let stats = h.stats().await;
    assert_eq!(
        stats["requests"].as_object().map_or(0, |m| m.len()),
        0,
        "no API call at all: {stats}"
    );

    // The other namespace may adopt, in any workspace.
    let seeded = h
        .call(
            Method::POST,
            "/_emulator/seed",
            Some(json!({"configs": [{"name": "theirs", "config": routing("theirs")["config"]}]})),
        )
        .await;
    let slug = seeded["configs"][0]["slug"].as_str().unwrap();
    let mut spec = routing("theirs");
    spec["slug"] = json!(slug);
    let other = h.other.as_ref().unwrap();
    create::<Config>(other, "theirs", spec).await;
    other
        .wait_for::<Config>("theirs", WAIT, |c| c.ready())
        .await;
    h.stop().await;
}

#[tokio::test]
async fn a_credentials_secret_aigw_did_not_create_is_never_taken_over() {
    let h = Harness::start("ten-secret").await;
    let secrets = h.env.api::<Secret>();
    let theirs: Secret = serde_json::from_value(json!({
        "metadata": {"name": "someone-elses"},
        "stringData": {"client_auth": "precious"}
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &theirs)
        .await
        .unwrap();
    create::<Deployment>(&h.env, "gw", gateway("gw-conflict", "someone-elses")).await;
    h.env
        .wait_for::<Deployment>("gw", WAIT, |d| d.stalled_with("SecretConflict"))
        .await;
    assert_eq!(h.count("POST /ai_gw/admin/v2/deployments").await, 0);
    let after = secrets.get("someone-elses").await.unwrap();
    assert_eq!(after.data.unwrap()["client_auth"].0, b"precious");
    assert!(after.metadata.owner_references.is_none());
    h.stop().await;
}

#[tokio::test]
async fn an_orphaned_deployment_keeps_its_live_credentials() {
    let h = Harness::start("ten-orphan").await;
    let mut spec = gateway("gw-orphan", "orphan-creds");
    spec["deletionPolicy"] = "Orphan".into();
    create::<Deployment>(&h.env, "gw", spec).await;
    let ready = h
        .env
        .wait_for::<Deployment>("gw", WAIT, |d| d.ready())
        .await;
    let id = ready.status.unwrap().id.unwrap();
    h.env.delete_and_wait::<Deployment>("gw", WAIT).await;
    // Garbage collection would have removed an owned Secret by now; give it a moment anyway.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let secret = h.env.api::<Secret>().get("orphan-creds").await.unwrap();
    assert!(
        secret
            .metadata
            .owner_references
            .unwrap_or_default()
            .is_empty()
    );
    let client_auth = String::from_utf8(secret.data.unwrap()["client_auth"].0.clone()).unwrap();
    assert_eq!(h.handshake(&id, &client_auth).await, 200);
    h.stop().await;
}

#[tokio::test]
async fn a_connection_may_not_read_secrets_outside_its_namespace() {
    let h = Harness::start("ten-conn").await;
    let foreign_ns = h.env.namespace.clone();
    // The operator's Connections may read Secrets only in "aigw-system".
    let ctx_connections = aigw::controller::Connections::new(h.env.client.clone(), None)
        .with_secret_namespace(Some("aigw-system".into()));
    let connection: aigw::resources::Connection = serde_json::from_value(json!({
        "apiVersion": "aigw.io/v1alpha1", "kind": "Connection",
        "metadata": {"name": format!("{foreign_ns}-conn")},
        "spec": {"managementUrl": h.emulator.management_url(),
                 "auth": {"bearerToken": {"secretRef": {"namespace": foreign_ns, "name": "tok", "key": "token"}}}}
    }))
    .unwrap();
    let error = ctx_connections.probe(&connection).await.unwrap_err();
    assert_eq!(error.category(), "SecretNamespaceNotAllowed");
    assert!(error.to_string().contains("aigw-system"), "{error}");
    let _ = Api::<Secret>::namespaced(h.env.client.clone(), &foreign_ns)
        .delete("tok", &DeleteParams::default())
        .await;
    h.stop().await;
}
