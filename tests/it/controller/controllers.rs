//! The controllers against a real kube-apiserver and the emulator over HTTP.

use crate::support;

use std::time::Duration;

use aigw::resources::{Config, Deployment, RateLimitsPolicy};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{DeleteParams, PostParams};
use serde_json::{Value, json};
use support::harness::{Harness, TOKEN, captured_logs};
use support::objects::Conditions;

const WAIT: Duration = Duration::from_secs(30);

fn condition(
    conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    type_: &str,
) -> Option<(String, String, String)> {
    conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

fn config(name: &str, spec: Value) -> Config {
    serde_json::from_value(json!({"apiVersion": "aigw.io/v1alpha1", "kind": "Config", "metadata": {"name": name}, "spec": spec})).unwrap()
}

fn deployment(name: &str, spec: Value) -> Deployment {
    serde_json::from_value(json!({"apiVersion": "aigw.io/v1alpha1", "kind": "Deployment", "metadata": {"name": name}, "spec": spec}))
        .unwrap()
}

fn policy(name: &str, spec: Value) -> RateLimitsPolicy {
    serde_json::from_value(json!({"apiVersion": "aigw.io/v1alpha1", "kind": "RateLimitsPolicy", "metadata": {"name": name}, "spec": spec}))
        .unwrap()
}

fn routing_spec(name: &str) -> Value {
    json!({"name": name, "config": {"strategy": {"mode": "fallback"}, "targets": [{"provider": "@openai"}, {"provider": "@anthropic"}]}})
}

fn policy_spec(name: &str) -> Value {
    json!({"name": name, "type": "requests", "unit": "rpm", "value": 100,
           "conditions": [{"key": "workspace_id", "value": "ws-1"}], "groupBy": [{"key": "api_key"}]})
}

async fn writes(h: &Harness) -> u64 {
    h.remote_writes().await
}

/// No token, password or client_auth in the captured logs or the namespace's events.
async fn assert_no_secrets_leaked(h: &Harness) {
    let state = h.state().await;
    let mut secrets = vec![TOKEN.to_string()];
    for d in state["deployments"].as_array().into_iter().flatten() {
        for key in ["client_auth"] {
            if let Some(v) = d[key].as_str() {
                secrets.push(v.to_string());
            }
        }
        if let Some(v) = d["credentials"]["password"].as_str() {
            secrets.push(v.to_string());
        }
    }
    let logs = captured_logs();
    let events = h.env.events_text().await;
    let places = [("the logs", logs.as_str()), ("the events", events.as_str())];
    support::assert_none_in(&secrets, "secret", &places);
}

#[tokio::test]
async fn config_lifecycle_create_update_drift_delete() {
    let h = Harness::start_with("ctl-config", Duration::from_secs(1)).await;
    let configs = h.env.api::<Config>();
    support::create(&configs, &config("routing", routing_spec("routing"))).await;
    let ready = h.wait_for::<Config>("routing", WAIT, Config::ready).await;
    let status = ready.status.clone().unwrap();
    let slug = status.slug.clone().expect("status.slug");
    let first_version = status.version_id.clone().expect("status.versionId");
    assert!(
        status.id.is_some() && status.last_applied_at.is_some() && status.pending_create.is_none()
    );
    assert_eq!(h.count("POST /ai_gw/v2/configs").await, 1);
    let remote = h.get(&format!("/ai_gw/v2/configs/{slug}")).await;
    assert_eq!(remote["version_id"], first_version.as_str());

    // Several drift intervals without a change: each is one list, and the list shows the
    // config untouched since aigw created it, so it is neither read again nor written.
    h.reset_stats().await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        writes(&h).await,
        0,
        "remote writes without a change: {}",
        h.stats().await
    );
    assert!(
        h.count("GET /ai_gw/v2/configs").await >= 2,
        "drift checks list the configs: {}",
        h.stats().await
    );
    assert_eq!(
        h.count("GET /ai_gw/v2/configs/{slug}").await,
        0,
        "an untouched config is not read again: {}",
        h.stats().await
    );

    // A spec change: exactly one PUT, and a new versionId.
    h.reset_stats().await;
    let patch = json!({"spec": {"config": {"strategy": {"mode": "loadbalance"}, "targets": [{"provider": "@openai"}]}}});
    support::merge_patch(&configs, "routing", patch).await;
    let updated = h
        .env
        .ready_with_new::<Config>("routing", WAIT, &first_version, |c| {
            c.status.as_ref()?.version_id.as_deref()
        })
        .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    h.assert_count("PUT /ai_gw/v2/configs/{slug}", 1).await;
    let second_version = updated.status.unwrap().version_id.unwrap();
    let remote = h.get(&format!("/ai_gw/v2/configs/{slug}")).await;
    let document: Value = serde_json::from_str(remote["config"].as_str().unwrap()).unwrap();
    assert_eq!(document["strategy"]["mode"], "loadbalance");

    // A remote edit is corrected with one PUT and reported.
    h.put(
        &format!("/ai_gw/v2/configs/{slug}"),
        json!({"config": {"retry": {"attempts": 9}}}),
    )
    .await;
    h.reset_stats().await;
    h.wait_for::<Config>("routing", WAIT, |c| {
        c.status
            .as_ref()
            .unwrap()
            .version_id
            .as_deref()
            .is_some_and(|v| v != second_version)
    })
    .await;
    let remote = h.get(&format!("/ai_gw/v2/configs/{slug}")).await;
    let document: Value = serde_json::from_str(remote["config"].as_str().unwrap()).unwrap();
    assert_eq!(
        document["strategy"]["mode"], "loadbalance",
        "the remote edit was reverted"
    );
    assert_eq!(h.count("PUT /ai_gw/v2/configs/{slug}").await, 1);
    assert!(h.env.events_text().await.contains("DriftCorrected"));
    assert_eq!(h.ctx.metrics.drift_corrections("Config"), 1);
    // What the correction replaced: the remote version, each path with both values.
    let corrected = h.env.api::<Config>().get("routing").await.unwrap();
    let record = corrected
        .status
        .unwrap()
        .last_drift_correction
        .expect("status.lastDriftCorrection");
    assert!(record.replaced_version_id.is_some(), "{record:?}");
    assert!(
        record
            .changes
            .iter()
            .any(|c| c.path.starts_with("/config/retry")
                && c.remote.as_deref().is_some_and(|r| r.contains('9'))),
        "{record:?}"
    );
    assert!(
        record
            .changes
            .iter()
            .any(|c| c.path.starts_with("/config/strategy") && c.remote.is_none()),
        "{record:?}"
    );
    h.env.wait_event("/config/retry", WAIT).await;

    // Delete (the default policy) removes the remote config and then the resource.
    h.env.delete_and_wait::<Config>("routing", WAIT).await;
    assert_eq!(h.count("DELETE /ai_gw/v2/configs/{slug}").await, 1);
    let state = h.state().await;
    assert!(
        state["configs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["slug"] != slug.as_str())
    );
    assert_no_secrets_leaked(&h).await;
    h.stop().await;
}

#[tokio::test]
async fn config_adopt_and_orphan() {
    let h = Harness::start("ctl-config-adopt").await;
    let existing = json!({"name": "existing", "config": {"retry": {"attempts": 2}}});
    let slug = h.made_outside("/ai_gw/v2/configs", existing, "slug").await;

    let mut spec = json!({"slug": slug, "name": "existing", "config": {"retry": {"attempts": 2}}, "deletionPolicy": "Orphan"});
    support::create(&h.env.api(), &config("adopted", spec.clone())).await;
    let ready = h.wait_for::<Config>("adopted", WAIT, Config::ready).await;
    assert_eq!(ready.status.unwrap().slug.as_deref(), Some(slug.as_str()));
    assert_eq!(
        writes(&h).await,
        0,
        "adopting an identical config writes nothing"
    );

    spec["config"]["retry"]["attempts"] = json!(5);
    h.env.patch_spec::<Config>("adopted", json!(spec)).await;
    h.wait_for::<Config>("adopted", WAIT, Config::ready).await;
    assert_eq!(h.count("PUT /ai_gw/v2/configs/{slug}").await, 1);

    h.env.delete_and_wait::<Config>("adopted", WAIT).await;
    h.get(&format!("/ai_gw/v2/configs/{slug}")).await; // still there
    assert_eq!(h.count("DELETE /ai_gw/v2/configs/{slug}").await, 0);
    h.stop().await;
}

#[tokio::test]
async fn api_validation_error_stalls_without_a_retry_storm() {
    let h = Harness::start("ctl-stalled").await;
    // Admission accepts any condition key; the API knows only api_key, organisation_id,
    // workspace_id and metadata.* and answers 400.
    let mut spec = policy_spec("bad-key");
    spec["conditions"] = json!([{"key": "team", "value": "a"}]);
    let policies = h.env.api::<RateLimitsPolicy>();
    support::create(&policies, &policy("bad-key", spec)).await;
    let stalled = h
        .wait_for::<RateLimitsPolicy>("bad-key", WAIT, |p| p.is_true("Stalled"))
        .await;
    let conditions = stalled.status.unwrap().managed.conditions;
    let (_, reason, message) = condition(&conditions, "Stalled").unwrap();
    assert_eq!(condition(&conditions, "Ready").unwrap().0, "False");
    assert_eq!(condition(&conditions, "Reconciling").unwrap().0, "False");
    assert!(
        message.contains("unknown key \"team\""),
        "the API's message is shown: {message}"
    );
    assert_eq!(reason, "Validation");
    tokio::time::sleep(Duration::from_secs(5)).await;
    let posts = h.count("POST /ai_gw/v2/policies/rate-limits").await;
    assert!(
        (1..=2).contains(&posts),
        "a stalled object is not retried: {posts} POSTs"
    );
    assert_eq!(
        h.env
            .events_text()
            .await
            .matches("Warning bad-key Validation")
            .count(),
        1,
        "one Warning event per failure kind"
    );

    // Client-side validation stalls the same way, without a call.
    h.env
        .api::<Config>()
        .create(
            &PostParams::default(),
            &config("blank", routing_spec("   ")),
        )
        .await
        .unwrap();
    let blank = h
        .wait_for::<Config>("blank", WAIT, |c| c.is_true("Stalled"))
        .await;
    let (_, _, message) = condition(&blank.status.unwrap().conditions, "Stalled").unwrap();
    assert!(message.contains("name"), "{message}");
    assert_eq!(h.count("POST /ai_gw/v2/configs").await, 0);

    // A spec change un-stalls it.
    let patch = json!({"spec": {"conditions": [{"key": "metadata.team", "value": "a"}]}});
    support::merge_patch(&policies, "bad-key", patch).await;
    h.wait_for::<RateLimitsPolicy>("bad-key", WAIT, RateLimitsPolicy::ready)
        .await;
    h.stop().await;
}

#[tokio::test]
async fn a_stall_recorded_before_the_operator_started_is_tried_once_more() {
    // An older release (or the API then) refused the spec: a new operator tries it once, then
    // holds the stall again until the spec changes.
    let mut h = Harness::start("ctl-stall-start").await;
    let post = "POST /ai_gw/v2/policies/rate-limits";
    h.faults(json!({"failing_routes": {post: 400}})).await;
    let policies = h.env.api::<RateLimitsPolicy>();
    support::create(&policies, &policy("refused", policy_spec("refused"))).await;
    support::create(&policies, &policy("still", policy_spec("still"))).await;
    for name in ["refused", "still"] {
        h.wait_for::<RateLimitsPolicy>(name, WAIT, |p| p.is_true("Stalled"))
            .await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let posts = h.count(post).await;
    assert!(
        (2..=4).contains(&posts),
        "each stalled object is tried once or twice: {posts} POSTs"
    );

    // Restarted while the API still refuses: one more try each, and the stall holds.
    h.restart_operator().await;
    support::wait_until(WAIT, || async {
        (h.count(post).await >= posts + 2).then_some(())
    })
    .await
    .expect("a stall recorded by the earlier process was not tried again");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        h.count(post).await,
        posts + 2,
        "tried once each, not retried"
    );
    let held = policies.get("still").await.unwrap();
    assert!(held.is_true("Stalled"));

    // Restarted once the API takes the spec: Ready without a spec change.
    h.faults(json!({})).await;
    h.restart_operator().await;
    for name in ["refused", "still"] {
        let ready = h
            .wait_for::<RateLimitsPolicy>(name, WAIT, |p| p.is_true("Ready"))
            .await;
        assert_eq!(ready.metadata.generation, held.metadata.generation);
    }
    h.stop().await;
}

#[tokio::test]
async fn server_errors_and_rate_limits_are_recovered_from() {
    let h = Harness::start("ctl-faults").await;
    // Every call fails until one has: six calls at 0.3 all passed one run in nine.
    h.faults(json!({"error_rate": 1.0, "rate_limit_qps": 5}))
        .await;
    let configs = h.env.api::<Config>();
    for i in 0..6 {
        let name = format!("burst-{i}");
        support::create(&configs, &config(&name, routing_spec(&name))).await;
    }
    support::wait_until(Duration::from_secs(60), || async {
        let stats = h.stats().await;
        let post = &stats["requests"]["POST /ai_gw/v2/configs"];
        (post["500"].as_u64().unwrap_or(0) + post["503"].as_u64().unwrap_or(0) > 0).then_some(())
    })
    .await
    .expect("a create was refused");
    h.faults(json!({"error_rate": 0.3, "rate_limit_qps": 5}))
        .await;
    // A 5xx to a POST may have come after the commit, so each one is looked up, and absence
    // counts only a list-settle time after it (30 s by default, 3 s in tests: TEST_CALL_WINDOWS).
    for i in 0..6 {
        h.wait_for::<Config>(
            &format!("burst-{i}"),
            Duration::from_secs(180),
            Config::ready,
        )
        .await;
    }
    let stats = h.stats().await;
    let failures: u64 = ["500", "503", "429"]
        .iter()
        .map(|s| {
            stats["requests"]
                .as_object()
                .unwrap()
                .values()
                .filter_map(|v| v[*s].as_u64())
                .sum::<u64>()
        })
        .sum();
    assert!(failures > 0, "the faults did fire: {stats}");
    h.faults(json!({})).await;
    let state = h.state().await;
    let names: Vec<&str> = state["configs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    for i in 0..6 {
        assert_eq!(
            names.iter().filter(|n| **n == format!("burst-{i}")).count(),
            1,
            "exactly one remote config each: {names:?}"
        );
    }
    h.stop().await;
}

/// A deployment's first credentials exist only in its create answer: when that answer is lost
/// (the emulator commits the create and cuts the connection), the deployment found again gets
/// live credentials into its Secret, and none leaks. That the create is recovered with one POST
/// and no duplicate, for every kind, is the conformance matrix's `lost_create`.
#[tokio::test]
async fn a_lost_deployment_create_answer_ends_with_live_credentials() {
    let h = Harness::start("ctl-drop").await;
    h.faults(json!({"drop_after_commit_rate": 1.0})).await;
    let spec = json!({"name": "dropped-gw", "credentialsSecretRef": {"name": "dropped-creds"}});
    support::create(&h.env.api(), &deployment("dropped", spec)).await;
    // Let the create land (and its answer be lost), then heal the network.
    support::wait_until(WAIT, || async {
        let s = h.state().await;
        (s["deployments"].as_array().map_or(0, Vec::len) >= 1).then_some(())
    })
    .await
    .expect("the create never reached the emulator");
    tokio::time::sleep(Duration::from_secs(1)).await;
    h.faults(json!({})).await;

    let deployment = h
        .wait_for::<Deployment>("dropped", WAIT, Deployment::ready)
        .await;
    let state = h.state().await;
    // The deployment's credentials were in a lost answer: the Secret holds live ones.
    let id = deployment.status.unwrap().id.unwrap();
    let remote = state["deployments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["id"] == id.as_str())
        .unwrap()
        .clone();
    let secret = h.env.api::<Secret>().get("dropped-creds").await.unwrap();
    let data = secret.data.unwrap();
    assert_eq!(
        String::from_utf8(data["client_auth"].0.clone()).unwrap(),
        remote["client_auth"].as_str().unwrap()
    );
    assert_no_secrets_leaked(&h).await;
    h.stop().await;
}

#[tokio::test]
async fn deployment_create_secret_connection_status_and_archive() {
    let h = Harness::start_with("ctl-deploy", Duration::from_secs(1)).await;
    let spec = json!({
        "name": "edge-gw", "type": "production", "credentialsSecretRef": {"name": "edge-creds"},
        "tags": {"team": "platform"},
        "authSettings": {"gatewayBaseUrl": "https://gw.example", "workspacesAllowed": ["ws-1"]}
    });
    let deployments = h.env.api::<Deployment>();
    support::create(&deployments, &deployment("edge", spec)).await;
    let ready = h
        .wait_for::<Deployment>("edge", WAIT, Deployment::ready)
        .await;
    let status = ready.status.clone().unwrap();
    let id = status.id.clone().unwrap();
    assert_eq!(
        status.connection_status,
        Some(aigw::resources::deployment::ConnectionStatus::Unknown)
    );
    assert_eq!(
        status.remote_status,
        Some(aigw::resources::deployment::RemoteStatus::Active)
    );

    // The Secret holds exactly the emulator's one-time values and is owned by the resource.
    let remote = h.remote_record_present("deployments", "id", &id).await;
    let secret = h.env.api::<Secret>().get("edge-creds").await.unwrap();
    let data = secret.data.clone().unwrap();
    let text = |k: &str| String::from_utf8(data[k].0.clone()).unwrap();
    assert_eq!(text("client_auth"), remote["client_auth"].as_str().unwrap());
    assert_eq!(
        text("username"),
        remote["credentials"]["username"].as_str().unwrap()
    );
    assert_eq!(
        text("password"),
        remote["credentials"]["password"].as_str().unwrap()
    );
    let owner = &secret.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Deployment", "edge")
    );
    let json_status = serde_json::to_string(&ready.status).unwrap();
    assert!(
        !json_status.contains(remote["client_auth"].as_str().unwrap()),
        "no secret in status"
    );

    // The gateway's heartbeat shows up in status at the next observation.
    h.reset_stats().await;
    h.post(
        &format!("/_emulator/deployments/{id}/connection"),
        json!({"connection_status": "healthy"}),
    )
    .await;
    let healthy = h
        .wait_for::<Deployment>("edge", WAIT, |d| {
            d.status.as_ref().unwrap().connection_status
                == Some(aigw::resources::deployment::ConnectionStatus::Healthy)
        })
        .await;
    assert!(healthy.status.unwrap().last_synced_at.is_some());
    assert_eq!(
        h.count("PUT /ai_gw/admin/v2/deployments/{deploymentId}")
            .await,
        0,
        "observing writes nothing"
    );

    // A remote edit is corrected.
    h.put(
        &format!("/ai_gw/admin/v2/deployments/{id}"),
        json!({"name": "renamed"}),
    )
    .await;
    support::wait_until(WAIT, || async {
        let d = h.remote_deployment(&id).await;
        (d["name"] == "edge-gw").then_some(())
    })
    .await
    .expect("the remote rename was not corrected");
    let recorded = support::wait_until(WAIT, || async {
        let d = h.env.api::<Deployment>().get("edge").await.ok()?;
        d.status?.last_drift_correction
    })
    .await
    .expect("status.lastDriftCorrection");
    let change = &recorded.changes[0];
    assert_eq!(
        (
            change.path.as_str(),
            change.remote.as_deref(),
            change.desired.as_deref()
        ),
        ("/name", Some("\"renamed\""), Some("\"edge-gw\"")),
        "{recorded:?}"
    );

    // Deleting a credentials Secret is reported, never papered over with invented values.
    h.env.delete::<Secret>("edge-creds").await;
    let missing = h
        .wait_for::<Deployment>("edge", WAIT, |d| {
            condition(&d.status.as_ref().unwrap().conditions, "Ready")
                .is_some_and(|(s, r, _)| s == "False" && r == "MissingState")
        })
        .await;
    let (_, _, message) = condition(&missing.status.unwrap().conditions, "Ready").unwrap();
    assert!(message.contains("edge-creds"), "{message}");
    assert!(h.env.get_opt::<Secret>("edge-creds").await.is_none());

    // Archive on delete.
    h.env.delete_and_wait::<Deployment>("edge", WAIT).await;
    let remote = h.remote_deployment(&id).await;
    assert_eq!(remote["status"], "archived");
    assert_no_secrets_leaked(&h).await;
    h.stop().await;
}

#[tokio::test]
async fn deployment_adopt_and_orphan() {
    let h = Harness::start("ctl-deploy-adopt").await;
    let legacy = json!({"name": "legacy", "type": "non_production"});
    let id = h
        .made_outside("/ai_gw/admin/v2/deployments", legacy, "id")
        .await;
    let spec = json!({"deploymentId": id, "name": "legacy", "type": "non_production",
                      "credentialsSecretRef": {"name": "legacy-creds"}, "deletionPolicy": "Orphan"});
    support::create(&h.env.api(), &deployment("legacy", spec)).await;
    // Adopted: the one-time credentials are elsewhere, which is said in a condition.
    let adopted = h
        .wait_for::<Deployment>("legacy", WAIT, |d| {
            d.status
                .as_ref()
                .is_some_and(|s| s.id.as_deref() == Some(id.as_str()))
        })
        .await;
    assert_eq!(h.count("POST /ai_gw/admin/v2/deployments").await, 0);
    assert_eq!(
        h.count("PUT /ai_gw/admin/v2/deployments/{deploymentId}")
            .await,
        0,
        "in sync: no PUT"
    );
    let _ = adopted;
    h.env.delete_and_wait::<Deployment>("legacy", WAIT).await;
    let remote = h.remote_deployment(&id).await;
    assert_eq!(
        remote["status"], "active",
        "Orphan leaves the remote deployment alone"
    );
    h.stop().await;
}

/// A rate-limits policy's update (one PUT), adoption and deletion under both policies. Its
/// steady state and drift correction are the conformance matrix's (`rate_limits_policy`).
#[tokio::test]
async fn rate_limits_policy_lifecycle() {
    let h = Harness::start_with("ctl-rlp", Duration::from_secs(1)).await;
    let policies = h.env.api::<RateLimitsPolicy>();
    support::create(&policies, &policy("per-key", policy_spec("per-key"))).await;
    let ready = h
        .wait_for::<RateLimitsPolicy>("per-key", WAIT, RateLimitsPolicy::ready)
        .await;
    let id = ready.status.unwrap().id.unwrap();
    h.reset_stats().await;

    let patch = json!({"spec": {"value": 250, "unit": "rph"}});
    support::merge_patch(&policies, "per-key", patch).await;
    h.wait_for::<RateLimitsPolicy>("per-key", WAIT, RateLimitsPolicy::ready)
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        h.count("PUT /ai_gw/v2/policies/rate-limits/{rateLimitsPolicyId}")
            .await,
        1
    );
    let remote = h.get(&format!("/ai_gw/v2/policies/rate-limits/{id}")).await;
    assert_eq!(
        (remote["value"].as_f64(), remote["unit"].as_str()),
        (Some(250.0), Some("rph"))
    );

    // Adopt an existing policy, then delete both under different policies.
    let console_made = json!({"name": "shared", "type": "tokens", "unit": "rpd", "value": 1000,
            "conditions": [{"key": "api_key", "value": "k1"}], "group_by": [{"key": "workspace_id"}]});
    let existing = h.post("/ai_gw/v2/policies/rate-limits", console_made).await;
    let existing_id = existing["id"].as_str().unwrap().to_string();
    let spec = json!({"policyId": existing_id, "name": "shared", "type": "tokens", "unit": "rpd", "value": 1000,
                      "conditions": [{"key": "api_key", "value": "k1"}], "groupBy": [{"key": "workspace_id"}], "deletionPolicy": "Orphan"});
    support::create(&policies, &policy("shared", spec)).await;
    let adopted = h
        .wait_for::<RateLimitsPolicy>("shared", WAIT, RateLimitsPolicy::ready)
        .await;
    assert_eq!(
        adopted.status.unwrap().id.as_deref(),
        Some(existing_id.as_str())
    );

    policies
        .delete("per-key", &DeleteParams::default())
        .await
        .unwrap();
    policies
        .delete("shared", &DeleteParams::default())
        .await
        .unwrap();
    support::wait_until(WAIT, || async {
        let left = policies
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .len();
        (left == 0).then_some(())
    })
    .await
    .expect("the policies were not deleted");
    assert_eq!(
        h.count("DELETE /ai_gw/v2/policies/rate-limits/{rateLimitsPolicyId}")
            .await,
        1
    );
    h.get(&format!("/ai_gw/v2/policies/rate-limits/{existing_id}"))
        .await;
    assert_no_secrets_leaked(&h).await;
    h.stop().await;
}

/// An object's per-object memory (its failure count for the backoff, its drift schedule) goes
/// with the object, whatever route it leaves by: its finalizer run by aigw, or removed by hand
/// while it kept failing.
#[tokio::test]
async fn backoff_and_drift_bookkeeping_go_with_the_object() {
    let h = Harness::start("prune").await;
    let configs = h.env.api::<Config>();
    let mut failing = routing_spec("failing");
    failing["connectionRef"] = json!({"name": "does-not-exist"});
    support::create(&configs, &config("failing", failing)).await;
    support::create(&configs, &config("kept", routing_spec("kept"))).await;
    h.wait_for::<Config>("kept", WAIT, Config::ready).await;
    let key = |name: &str| format!("Config/{}/{name}", h.env.namespace);
    let failed = support::wait_until(WAIT, || async {
        (h.ctx.backoff.failures(&key("failing")) >= 2).then_some(())
    })
    .await;
    assert!(failed.is_some(), "the failing Config is backing off");
    assert!(
        !h.ctx.drift.first_sight(&key("kept")),
        "the Ready Config has a drift schedule"
    );

    // Route 1: the finalizer taken off by hand, then deleted, while it still fails.
    support::merge_patch(
        &configs,
        "failing",
        json!({"metadata": {"finalizers": null}}),
    )
    .await;
    h.env.delete_and_wait::<Config>("failing", WAIT).await;
    // Route 2: an ordinary deletion, the finalizer run by aigw.
    h.env.delete_and_wait::<Config>("kept", WAIT).await;
    let pruned = support::wait_until(WAIT, || async {
        (h.ctx.backoff.failures(&key("failing")) == 0 && h.ctx.drift.first_sight(&key("kept")))
            .then_some(())
    })
    .await;
    assert!(
        pruned.is_some(),
        "failures {} for the deleted Config; drift schedule kept: {}",
        h.ctx.backoff.failures(&key("failing")),
        !h.ctx.drift.first_sight(&key("kept"))
    );
    h.stop().await;
}

/// `--dry-run` against 50 Configs, 10 of them with a spec the remote does not match yet and one
/// edited remotely before it starts: one `WouldUpdate` event each, naming what it would change, and no write anywhere (no API write,
/// no status, finalizer or any other write to the resources).
#[tokio::test]
async fn a_dry_run_reports_what_it_would_write_and_writes_nothing() {
    // A long drift interval: only the dry run's first read of each object can find a remote
    // edit made before it starts.
    let mut h = Harness::start_with("dry-run", Duration::from_secs(600)).await;
    let configs = h.env.api::<Config>();
    for n in 0..50 {
        let config: Config = serde_json::from_value(json!({
            "apiVersion": "aigw.io/v1alpha1", "kind": "Config",
            "metadata": {"name": format!("c{n:02}")},
            "spec": {"name": format!("c{n:02}"), "config": {"retry": {"attempts": 2}}}
        }))
        .unwrap();
        support::create(&configs, &config).await;
    }
    for n in 0..50 {
        h.wait_for::<Config>(&format!("c{n:02}"), WAIT, |c| c.ready())
            .await;
    }
    // A remote edit the real operator has not seen (its drift check is 10 minutes away).
    let slug = configs
        .get("c49")
        .await
        .unwrap()
        .status
        .unwrap()
        .slug
        .unwrap();
    h.put(
        &format!("/ai_gw/v2/configs/{slug}"),
        json!({"config": {"retry": {"attempts": 9}}}),
    )
    .await;
    h.restart_dry_run().await;
    for n in 0..10 {
        let edit = json!({"spec": {"config": {"retry": {"attempts": 5}}}});
        support::merge_patch(&configs, &format!("c{n:02}"), edit).await;
    }
    let versions = |list: Vec<Config>| -> Vec<(String, Option<String>)> {
        list.into_iter()
            .map(|c| (c.name_any(), c.resource_version()))
            .collect()
    };
    // A Config whose Secret is missing: its Warning keeps the reason, its note says whose.
    let missing: Config = serde_json::from_value(json!({
        "apiVersion": "aigw.io/v1alpha1", "kind": "Config", "metadata": {"name": "c-missing"},
        "spec": {"name": "c-missing", "config": {"retry": {"attempts": 2}},
                 "secretRefs": [{"path": "/api_key",
                                 "secretKeyRef": {"name": "absent", "key": "api_key"}}]}
    }))
    .unwrap();
    support::create(&configs, &missing).await;
    let before = versions(configs.list(&Default::default()).await.unwrap().items);
    h.reset_stats().await;
    let warned = support::wait_until(WAIT, || async {
        let events = h.env.events_text().await;
        let line = events
            .lines()
            .find(|l| l.contains("c-missing") && l.contains("absent"));
        line.map(str::to_string)
    })
    .await
    .expect("the dry run's Warning about the missing Secret");
    assert!(warned.contains("(dry run)"), "{warned}");

    let reported = support::wait_until(WAIT, || async {
        let events = h.env.events_text().await;
        let would: Vec<&str> = events
            .lines()
            .filter(|l| l.contains("WouldUpdate"))
            .collect();
        (would.len() == 11).then(|| would.join("\n"))
    })
    .await
    .expect("one WouldUpdate event per differing Config, the remote edit included");
    assert!(reported.contains("c49"), "{reported}");
    support::assert_mentions(
        &reported,
        &["would update config", "/config/retry/attempts"],
    );
    for n in 0..10 {
        assert!(reported.contains(&format!("c{n:02}")), "{reported}");
    }
    // A little longer: still nothing written, to the API or to the resources.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(h.remote_writes().await, 0, "{}", h.stats().await);
    let after = versions(configs.list(&Default::default()).await.unwrap().items);
    assert_eq!(before, after, "a resource was written");
    assert!(h.ctx.metrics.would_count("Config", "WouldUpdate") >= 11);
    h.stop().await;
}
