//! UsageLimitsPolicy on a real kube-apiserver against the emulator over HTTP: the lifecycle
//! (one POST, one PUT per change, archived on delete, nothing at steady state), admission of
//! the fixed fields, resets exactly once per trigger change, adoption, observe-only and drift.
//! The export round trip is in `tests/it/gitops/cli.rs`.

use crate::support;

use std::time::Duration;

use aigw::resources::UsageLimitsPolicy;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::harness::Harness;
use support::objects::Conditions;

const WAIT: Duration = Duration::from_secs(30);
const POLICIES: &str = "/ai_gw/v2/policies/usage-limits";

fn policy(name: &str, spec: Value) -> UsageLimitsPolicy {
    serde_json::from_value(
        json!({"apiVersion": "aigw.io/v1alpha1", "kind": "UsageLimitsPolicy",
        "metadata": {"name": name}, "spec": spec}),
    )
    .unwrap()
}

fn budget(name: &str) -> Value {
    json!({"name": name, "type": "cost", "creditLimit": 100, "alertThreshold": 80, "periodicReset": "monthly",
           "conditions": [{"key": "workspace_id", "value": "ws-1"}], "groupBy": [{"key": "api_key"}]})
}

/// The emulator's record of policy `id` (archived ones included), with its `resets` count.
async fn remote(h: &Harness, id: &str) -> Value {
    h.remote_record_present("usage_limits", "id", id).await
}

/// What gateway traffic would do: `usage` more for `value_key`.
async fn spend(h: &Harness, id: &str, value_key: &str, usage: f64) {
    let url = h.url(&format!("/_emulator/usage-limits/{id}/usage"));
    let response = reqwest::Client::new()
        .post(url)
        .json(&json!({"value_key": value_key, "usage": usage}))
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());
}

async fn create(h: &Harness, name: &str, spec: Value) -> String {
    support::create(&h.env.api(), &policy(name, spec)).await;
    let created = h
        .wait_for::<UsageLimitsPolicy>(name, WAIT, UsageLimitsPolicy::ready)
        .await;
    created.status.unwrap().id.unwrap()
}

async fn patch(h: &Harness, name: &str, patch: Value) {
    h.env
        .api::<UsageLimitsPolicy>()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    h.wait_for::<UsageLimitsPolicy>(name, WAIT, UsageLimitsPolicy::ready)
        .await;
}

#[tokio::test]
async fn a_usage_limits_policy_is_created_updated_and_archived_with_one_write_each() {
    let h = Harness::start_with("ulp-life", Duration::from_secs(1)).await;
    let id = create(&h, "budget", budget("budget")).await;
    assert_eq!(h.count(&format!("POST {POLICIES}")).await, 1);
    // Steady state (no write) is the conformance matrix's (`usage_limits_policy`, `steady`).
    h.reset_stats().await;

    patch(
        &h,
        "budget",
        json!({"spec": {"creditLimit": 250, "alertThreshold": null}}),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        h.count(&format!("PUT {POLICIES}/{{policyUsageLimitsId}}"))
            .await,
        1,
        "one PUT for the change"
    );
    let now = remote(&h, &id).await;
    assert_eq!(now["credit_limit"].as_f64(), Some(250.0));
    assert!(
        now["alert_threshold"].is_null(),
        "a dropped field is cleared"
    );

    // A remote edit is corrected with one PUT, and the event names it.
    h.reset_stats().await;
    h.put(&format!("{POLICIES}/{id}"), json!({"credit_limit": 1}))
        .await;
    support::wait_until(WAIT, || async {
        (remote(&h, &id).await["credit_limit"].as_f64() == Some(250.0)).then_some(())
    })
    .await
    .expect("the remote edit was not corrected");
    // The event follows the PUT (after the status write).
    h.env.wait_event("DriftCorrected", WAIT).await;
    let recorded = support::wait_until(WAIT, || async {
        let policy = h.env.api::<UsageLimitsPolicy>().get("budget").await.ok()?;
        policy.status?.last_drift_correction
    })
    .await
    .expect("status.lastDriftCorrection");
    let change = &recorded.changes[0];
    assert_eq!(change.path, "/creditLimit", "{recorded:?}");
    assert_eq!(
        (change.remote.as_deref(), change.desired.as_deref()),
        (Some("1.0"), Some("250.0")),
        "{recorded:?}"
    );

    h.reset_stats().await;
    h.env
        .delete_and_wait::<UsageLimitsPolicy>("budget", WAIT)
        .await;
    assert_eq!(
        h.count(&format!("DELETE {POLICIES}/{{policyUsageLimitsId}}"))
            .await,
        1
    );
    assert_eq!(remote(&h, &id).await["status"], "archived");
    h.stop().await;
}

#[tokio::test]
async fn usage_is_reset_exactly_once_per_trigger_change_and_never_by_an_apply() {
    let h = Harness::start("ulp-reset").await;
    let mut spec = budget("reset");
    spec["resetUsage"] = json!("initial");
    let id = create(&h, "reset", spec).await;
    assert_eq!(
        remote(&h, &id).await["resets"],
        0,
        "creating resets nothing"
    );

    spend(&h, &id, "key-a", 40.0).await;
    spend(&h, &id, "key-b", 10.0).await;
    // A spec change that is not the trigger never resets usage.
    patch(&h, "reset", json!({"spec": {"creditLimit": 300}})).await;
    assert_eq!(
        remote(&h, &id).await["resets"],
        0,
        "an apply resets nothing"
    );

    patch(&h, "reset", json!({"spec": {"resetUsage": "first"}})).await;
    let after_first = remote(&h, &id).await;
    assert_eq!(after_first["resets"], 2, "both keys with usage reset once");
    spend(&h, &id, "key-a", 5.0).await;
    patch(&h, "reset", json!({"spec": {"resetUsage": "second"}})).await;
    // Only key-a had usage again.
    assert_eq!(remote(&h, &id).await["resets"], 3);
    let status = h
        .wait_for::<UsageLimitsPolicy>("reset", WAIT, UsageLimitsPolicy::ready)
        .await
        .status
        .unwrap();
    assert_eq!(status.observed_reset_usage.as_deref(), Some("second"));
    assert!(status.resetting_for.is_none());
    // Restarts and resyncs do not reset again.
    let mut h = h;
    h.restart_operator().await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        remote(&h, &id).await["resets"],
        3,
        "no reset after a restart"
    );
    assert!(h.env.events_text().await.contains("UsageReset"));
    h.stop().await;
}

#[tokio::test]
async fn fixed_fields_and_both_reset_forms_are_refused_at_admission() {
    let h = Harness::start("ulp-admit").await;
    let policies = h.env.api::<UsageLimitsPolicy>();
    let mut both = budget("both");
    both["periodicResetDays"] = json!(7);
    let refused = policies
        .create(&PostParams::default(), &policy("both", both))
        .await
        .expect_err("both reset forms");
    assert!(
        refused.to_string().contains("periodicResetDays"),
        "{refused}"
    );
    create(&h, "fixed", budget("fixed")).await;
    for (field, value) in [
        ("type", json!("tokens")),
        ("groupBy", json!([{"key": "workspace_id"}])),
        ("workspaceId", json!("ws-2")),
    ] {
        let refused = support::refused_patch(&policies, "fixed", json!({field: value})).await;
        assert!(refused.contains(field), "{field}: {refused}");
    }
    h.stop().await;
}

#[tokio::test]
async fn an_adopted_policy_is_observed_without_a_write() {
    let h = Harness::start("ulp-adopt").await;
    let console_made = json!({"name": "shared", "type": "tokens", "credit_limit": 1000, "periodic_reset_days": 30,
            "conditions": [{"key": "api_key", "value": "k1"}], "group_by": [{"key": "workspace_id"}]});
    let existing = h.post(POLICIES, console_made).await;
    let id = existing["id"].as_str().unwrap().to_string();
    // Observe-only with a different limit: Drifted, never written.
    h.reset_stats().await;
    let spec = json!({"policyId": id, "name": "shared", "type": "tokens", "creditLimit": 5, "periodicResetDays": 30,
        "conditions": [{"key": "api_key", "value": "k1"}], "groupBy": [{"key": "workspace_id"}],
        "managementPolicy": "Observe", "deletionPolicy": "Orphan"});
    support::create(&h.env.api(), &policy("shared", spec)).await;
    let observed = h
        .wait_for::<UsageLimitsPolicy>("shared", WAIT, |p| p.is_true("Drifted"))
        .await;
    assert_eq!(observed.status.unwrap().id.as_deref(), Some(id.as_str()));
    assert_eq!(h.remote_writes().await, 0, "observe-only writes nothing");

    h.stop().await;
}

/// A condition with several values (and excluded values), as the API allows: created as a
/// list, left alone by the drift checks though the API lists them in another order, and an
/// existing policy whose conditions hold lists is adopted without a write.
#[tokio::test]
async fn conditions_with_several_values_are_written_once_and_adopted_without_a_write() {
    let h = Harness::start_with("ulp-values", Duration::from_secs(2)).await;
    let mut spec = budget("teams");
    spec["conditions"] =
        json!([{"key": "metadata.team", "values": ["b", "a"], "excludedValues": ["intern"]}]);
    let id = create(&h, "teams", spec).await;
    let record = remote(&h, &id).await;
    assert_eq!(record["conditions"][0]["value"], json!(["b", "a"]));
    assert_eq!(record["conditions"][0]["excludes"], json!(["intern"]));
    h.reset_stats().await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(h.remote_writes().await, 0, "{}", h.stats().await);

    let existing = h
        .post(
            POLICIES,
            json!({"name": "shared", "type": "tokens", "credit_limit": 1000, "periodic_reset_days": 30,
                   "conditions": [{"key": "api_key", "value": ["k2", "k1"], "excludes": "k3"}],
                   "group_by": [{"key": "workspace_id"}]}),
        )
        .await;
    let id = existing["id"].as_str().unwrap().to_string();
    h.reset_stats().await;
    let spec = json!({"policyId": id, "name": "shared", "type": "tokens", "creditLimit": 1000, "periodicResetDays": 30,
        "conditions": [{"key": "api_key", "values": ["k1", "k2"], "excludedValues": ["k3"]}],
        "groupBy": [{"key": "workspace_id"}], "deletionPolicy": "Orphan"});
    create(&h, "shared", spec).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(h.remote_writes().await, 0, "{}", h.stats().await);
    h.stop().await;
}
