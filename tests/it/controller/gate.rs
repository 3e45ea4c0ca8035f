//! One gate in front of every remote call (issue 16): deletion asks the same rules as apply,
//! Deployment grants cover what a gateway can reach, `connectionRef` cannot move an object to
//! another tenant, and the result of a create survives a change made during the call. Real
//! apiserver, real emulator.

use crate::support;

use std::time::Duration;

use aigw::resources::{Config, Deployment, RateLimitsPolicy};
use serde_json::{Value, json};
use support::harness::{CallWindows, Harness, TEST_CALL_WINDOWS};
use support::objects::{Conditions, create, gateway, limits, routing};

const WAIT: Duration = Duration::from_secs(60);
const DRIFT: Duration = Duration::from_secs(1);
const WS_A: &str = "6f1d8c1e-5a8b-4c5e-9c1a-0b2d3e4f5a6b";
const WS_B: &str = "0a9b8c7d-6e5f-4a3b-9c2d-1e0f9a8b7c6d";

/// Seeds one remote object made outside aigw (in the console) and returns its key.
async fn seed(h: &Harness, collection: &str, item: Value, key: &str) -> String {
    let seeded = h
        .post("/_emulator/seed", json!({ collection: [item] }))
        .await;
    seeded[collection][0][key]
        .as_str()
        .unwrap_or_else(|| panic!("seeded {collection}: {seeded}"))
        .to_string()
}

/// The remote object of `collection` whose `field` is `value`, from the emulator's state.
async fn remote(h: &Harness, collection: &str, field: &str, value: &str) -> Option<Value> {
    h.state().await[collection]
        .as_array()
        .into_iter()
        .flatten()
        .find(|o| o[field] == value)
        .cloned()
}

/// A team whose grant gives it one workspace and no adoption: deleting its resources that name
/// console objects (each kind) sends nothing to them, whatever `deletionPolicy` says. (aigw's
/// finalizer goes on only before a resource's first remote write, so these never had one.)
#[tokio::test]
async fn deleting_a_resource_refused_by_its_grants_writes_nothing_to_the_remote_object() {
    let grants = json!([{"namespaces": ["{ns}"], "workspaces": [WS_A], "allowAdoption": false}]);
    let h = Harness::start_two_teams("gate-grant", DRIFT, Some(grants)).await;
    let config_slug = seed(
        &h,
        "configs",
        json!({"name": "console", "workspace_id": WS_A, "config": routing("console")["config"]}),
        "slug",
    )
    .await;
    let policy_id = seed(
        &h,
        "rate_limits",
        json!({"name": "console", "workspace_id": WS_A, "type": "requests", "unit": "rpm", "value": 7,
               "conditions": [{"key": "api_key", "value": "k1"}], "group_by": [{"key": "api_key"}]}),
        "id",
    )
    .await;
    let deployment_id = seed(
        &h,
        "deployments",
        json!({"name": "console", "type": "non_production"}),
        "id",
    )
    .await;
    let before = h.state().await;

    let mut adopt_config = routing("adopt");
    adopt_config["slug"] = json!(config_slug);
    adopt_config["workspaceId"] = json!(WS_A);
    adopt_config["deletionPolicy"] = json!("Delete");
    let mut foreign_config = routing("foreign");
    foreign_config["workspaceId"] = json!(WS_B);
    let mut adopt_policy = limits("adopt");
    adopt_policy["policyId"] = json!(policy_id);
    adopt_policy["workspaceId"] = json!(WS_A);
    let mut adopt_gateway = gateway("adopt", "adopt-credentials");
    adopt_gateway["deploymentId"] = json!(deployment_id);
    create::<Config>(&h.env, "adopt", adopt_config).await;
    create::<Config>(&h.env, "foreign", foreign_config).await;
    create::<RateLimitsPolicy>(&h.env, "adopt", adopt_policy).await;
    create::<Deployment>(&h.env, "adopt", adopt_gateway).await;
    h.wait_for::<Config>("adopt", WAIT, |c| c.stalled_with("AdoptionNotAllowed"))
        .await;
    h.wait_for::<Config>("foreign", WAIT, |c| c.stalled_with("WorkspaceNotAllowed"))
        .await;
    h.wait_for::<RateLimitsPolicy>("adopt", WAIT, |p| p.stalled_with("AdoptionNotAllowed"))
        .await;
    h.wait_for::<Deployment>("adopt", WAIT, |d| d.stalled_with("AdoptionNotAllowed"))
        .await;

    let refused = h.env.api::<Config>().get("adopt").await.unwrap();
    assert!(
        !refused
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == "aigw.io/finalizer"),
        "{:?}",
        refused.metadata.finalizers
    );
    h.env.delete_and_wait::<Config>("adopt", WAIT).await;
    h.env.delete_and_wait::<Config>("foreign", WAIT).await;
    h.env
        .delete_and_wait::<RateLimitsPolicy>("adopt", WAIT)
        .await;
    h.env.delete_and_wait::<Deployment>("adopt", WAIT).await;
    assert_eq!(h.remote_writes().await, 0, "{}", h.stats().await);
    let after = h.state().await;
    for collection in ["configs", "rate_limits", "deployments"] {
        assert_eq!(
            after[collection], before[collection],
            "{collection} unchanged"
        );
    }
    // Refused before any remote write, they never carried aigw's finalizer: each went at
    // once, and the refusal named the rule.
    let events = h.env.events_text().await;
    assert!(events.contains("allowAdoption"), "names the rule: {events}");
    h.stop().await;
}

/// A claimant that never managed the object (`AlreadyManaged`) is released on deletion, even
/// when its owner goes in the same moment: the object is deleted once, by its owner.
#[tokio::test]
async fn deleting_an_owner_and_its_claimant_together_deletes_the_object_once() {
    let h = Harness::start_two_teams("gate-claim", DRIFT, None).await;
    let dev = h.other.as_ref().unwrap();
    create::<Config>(&h.env, "routing", routing("routing")).await;
    let slug = h.env.ready_config_slug("routing", WAIT).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let mut claimant = routing("claimant");
    claimant["slug"] = json!(slug);
    create::<Config>(dev, "claimant", claimant).await;
    dev.wait_for::<Config>("claimant", WAIT, |c| c.stalled_with("AlreadyManaged"))
        .await;
    h.reset_stats().await;
    let (a, b) = tokio::join!(
        h.env.delete_and_wait::<Config>("routing", WAIT),
        dev.delete_and_wait::<Config>("claimant", WAIT)
    );
    let _ = (a, b);
    h.assert_count("DELETE /ai_gw/v2/configs/{slug}", 1).await;
    assert!(remote(&h, "configs", "slug", &slug).await.is_none());
    h.stop().await;
}

/// `jwtSubWorkspaceMapping` lets JWT subjects into workspaces, and `isDefault` makes a gateway
/// the organisation's default: both need grants, and a refusal makes no call.
#[tokio::test]
async fn deployment_grants_cover_jwt_workspaces_and_the_default_gateway() {
    let grants = json!([{"namespaces": ["{ns}"], "workspaces": [WS_A]}]);
    let h = Harness::start_two_teams("gate-deploy", DRIFT, Some(grants)).await;
    let mut mapped = gateway("mapped", "mapped-credentials");
    mapped["authSettings"] =
        json!({"workspacesAllowed": [WS_A], "jwtSubWorkspaceMapping": {"svc": WS_B}});
    let mut default = gateway("default", "default-credentials");
    default["isDefault"] = json!(true);
    create::<Deployment>(&h.env, "mapped", mapped).await;
    create::<Deployment>(&h.env, "default", default).await;
    let message = h
        .condition_message::<Deployment>("mapped", WAIT, ("Stalled", "WorkspaceNotAllowed"))
        .await;
    assert!(message.contains("jwtSubWorkspaceMapping"), "{message}");
    let message = h
        .condition_message::<Deployment>("default", WAIT, ("Stalled", "DefaultNotAllowed"))
        .await;
    assert!(message.contains("allowDefault"), "{message}");
    tokio::time::sleep(DRIFT * 2).await;
    assert_eq!(h.remote_writes().await, 0, "{}", h.stats().await);
    h.stop().await;
}

/// Creates a `K` (named as its kind, lowercase) with `spec`, then moves it to another
/// Connection: the apiserver's refusal.
async fn switch_connection<K: support::NamespacedKind>(
    env: &support::TestEnv,
    spec: Value,
) -> String {
    let name = K::kind(&()).to_ascii_lowercase();
    create::<K>(env, &name, spec).await;
    let other = json!({"connectionRef": {"name": "other-tenant"}});
    support::refused_patch(&env.api::<K>(), &name, other).await
}

/// Switching `spec.connectionRef` would orphan the remote object and create another in the
/// other tenant: admission refuses it, naming the field.
#[tokio::test]
async fn connection_ref_cannot_be_changed_after_creation() {
    let env = support::TestEnv::new("gate-connref").await;
    for kind in ["Config", "RateLimitsPolicy", "Deployment"] {
        let error = match kind {
            "Config" => switch_connection::<Config>(&env, routing("r")).await,
            "RateLimitsPolicy" => switch_connection::<RateLimitsPolicy>(&env, limits("r")).await,
            _ => switch_connection::<Deployment>(&env, gateway("r", "r-credentials")).await,
        };
        assert!(
            error.contains("spec.connectionRef is immutable"),
            "{kind}: {error}"
        );
    }
    env.cleanup().await;
}

/// A `spec.name` edit while the create's POST is on the wire changes the object under the
/// reconcile: the id the POST returned is still recorded, and no second config is created.
#[tokio::test]
async fn a_spec_edit_during_a_slow_create_keeps_its_result_and_one_remote_config() {
    let h = Harness::start("gate-result").await;
    h.faults(json!({"latency_ms": 3000})).await;
    create::<Config>(&h.env, "slow", routing("slow")).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    h.env
        .patch_spec::<Config>("slow", json!({"name": "slow-renamed"}))
        .await;
    let done = h
        .wait_for::<Config>("slow", WAIT, |c| {
            c.ready()
                && c.status.as_ref().and_then(|s| s.observed_generation) == c.metadata.generation
        })
        .await;
    h.faults(json!({})).await;
    // Past the create's window and the list-settle time after it, a lost result (even one
    // whose end was never recorded) would have led to a second POST.
    let windows = TEST_CALL_WINDOWS;
    tokio::time::sleep(windows.longest_attempt + windows.list_settle + Duration::from_secs(2))
        .await;
    h.assert_count("POST /ai_gw/v2/configs", 1).await;
    // The result was written straight away, not found again by a lookup after a lost write.
    let logs: Vec<String> = support::harness::captured_logs()
        .lines()
        .filter(|l| l.contains(&h.env.namespace))
        .map(str::to_string)
        .collect();
    assert!(
        logs.iter().any(|l| l.contains("created config"))
            && !logs.iter().any(|l| l.contains("earlier create")),
        "{logs:#?}"
    );
    let configs = h.state().await["configs"].as_array().cloned().unwrap();
    assert_eq!(configs.len(), 1, "{configs:?}");
    let slug = done.status.unwrap().slug.unwrap();
    assert_eq!(configs[0]["slug"], slug.as_str());
    assert_eq!(configs[0]["name"], "slow-renamed");
    h.stop().await;
}

/// Whether the Config's create attempt has ended (with its answer lost, it is not Ready).
fn create_attempt_ended(c: &Config) -> bool {
    c.status.as_ref().is_some_and(|s| {
        s.create_attempt
            .as_ref()
            .is_some_and(|a| a.ended_at.is_some())
    })
}

/// A create whose answer is lost, deleted while the list still lags it: the resource goes only
/// once the outcome is known, and the config the lost POST made is deleted, not left behind.
#[tokio::test]
async fn a_delete_during_an_unknown_create_waits_for_the_list_and_leaves_nothing() {
    // Lists lag 20 s: the default 30 s settle time covers it, a test's shortened one does not.
    let h = Harness::start("gate-lag")
        .await
        .with_call_windows(CallWindows::default())
        .await;
    h.faults(json!({"drop_after_commit_rate": 1.0, "list_lag_ms": 20000}))
        .await;
    create::<Config>(&h.env, "lost", routing("lost")).await;
    h.wait_for::<Config>("lost", WAIT, create_attempt_ended)
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    h.faults(json!({"list_lag_ms": 20000})).await;
    let started = std::time::Instant::now();
    h.env
        .delete_and_wait::<Config>("lost", Duration::from_secs(120))
        .await;
    assert!(
        started.elapsed() >= Duration::from_secs(10),
        "a lagging list was not taken for absence ({:?})",
        started.elapsed()
    );
    let configs = h.state().await["configs"].as_array().cloned().unwrap();
    assert!(configs.is_empty(), "no remote config left: {configs:?}");
    h.stop().await;
}

/// A create in one namespace loses its answer; a few seconds later another namespace creates a
/// config with the same name and document. The first never claims the second's config.
#[tokio::test]
async fn a_lost_create_never_claims_another_namespaces_namesake() {
    let h = Harness::start_two_teams("gate-namesake", DRIFT, None).await;
    let other = h.other.as_ref().unwrap();
    h.faults(json!({"drop_after_commit_rate": 1.0})).await;
    create::<Config>(&h.env, "twin", routing("twin")).await;
    h.wait_for::<Config>("twin", WAIT, create_attempt_ended)
        .await;
    h.faults(json!({})).await;
    // Meanwhile the operator looks the lost create up: delete what it made, as if the POST had
    // never committed, so the only namesake left is the other namespace's.
    for c in h.state().await["configs"].as_array().cloned().unwrap() {
        let slug = c["slug"].as_str().unwrap().to_string();
        h.delete(&format!("/ai_gw/v2/configs/{slug}")).await;
    }
    // Past the lost request's window (its end plus the clock skew allowed): a namesake made
    // now cannot be what that request made. One made sooner is excluded once its own resource
    // records it.
    tokio::time::sleep(Duration::from_secs(6)).await;
    create::<Config>(other, "twin", routing("twin")).await;
    let theirs = other.ready_config_slug("twin", WAIT).await;
    let ours = h
        .env
        .ready_config_slug("twin", Duration::from_secs(90))
        .await;
    assert_ne!(ours, theirs, "each namespace has its own config");
    let configs = h.state().await["configs"].as_array().cloned().unwrap();
    assert_eq!(configs.len(), 2, "{configs:?}");
    h.stop().await;
}
