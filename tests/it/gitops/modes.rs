//! The GitOps modes: `managementPolicy: Observe` (read, report `Drifted`, never write), the
//! `aigw.io/paused` annotation (no API call at all) and `status.history` on Config (which
//! revision produced which version), against the real apiserver and the emulator.

use crate::support;

use std::time::Duration;

use aigw::resources::{Config, Deployment, RateLimitsPolicy};
use k8s_openapi::api::core::v1::{Event, Secret};
use kube::ResourceExt;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use support::endpoints::{CONFIG_DELETE, CONFIG_GET, CONFIG_LIST, CONFIG_POST, CONFIG_PUT};
use support::harness::{Harness, count_in};
use support::objects::{Conditions, gateway, limits, object, routing};

const WAIT: Duration = Duration::from_secs(60);
const DRIFT: Duration = Duration::from_secs(2);
/// A config made outside aigw, with `attempts` retries; its slug.
async fn remote_config(h: &Harness, name: &str, attempts: u64) -> String {
    let created = h
        .post(
            "/ai_gw/v2/configs",
            json!({"name": name, "config": {"retry": {"attempts": attempts}}}),
        )
        .await;
    created["slug"].as_str().expect("slug").to_string()
}

/// `spec` adopting the config `slug`, wanting `attempts` retries.
fn adopting(slug: &str, name: &str, attempts: u64) -> Value {
    json!({"slug": slug, "name": name, "config": {"retry": {"attempts": attempts}}})
}

async fn remote_attempts(h: &Harness, slug: &str) -> Value {
    let remote = h.get(&format!("/ai_gw/v2/configs/{slug}")).await;
    let document: Value = match &remote["config"] {
        Value::String(text) => serde_json::from_str(text).expect("config document"),
        other => other.clone(),
    };
    document["retry"]["attempts"].clone()
}

/// Every request the emulator counted, any endpoint and status.
fn total_requests(stats: &Value) -> u64 {
    stats["requests"]
        .as_object()
        .map(|by_endpoint| by_endpoint.keys().map(|k| count_in(stats, k)).sum())
        .unwrap_or(0)
}

async fn merge<K>(h: &Harness, name: &str, patch: Value)
where
    K: crate::support::NamespacedKind,
{
    h.env
        .api::<K>()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("failed to patch {name}: {e}"));
}

fn drifted(c: &impl Conditions) -> Option<(String, String)> {
    c.condition("Drifted")
        .map(|(status, _, message)| (status, message))
}

/// Creates `name` of kind `K` with `spec` in Observe mode; the object once it is Ready and its
/// Drifted condition says `drifted` ("True" or "False").
async fn observed<K>(h: &Harness, name: &str, mut spec: Value, drifted_status: &str) -> K
where
    K: support::NamespacedKind + Conditions,
{
    spec["managementPolicy"] = json!("Observe");
    support::objects::create::<K>(&h.env, name, spec).await;
    h.wait_for::<K>(name, WAIT, |o| {
        o.ready() && drifted(o).is_some_and(|(s, _)| s == drifted_status)
    })
    .await
}

/// The events with `reason` about object `name`, and how many times each was reported (a
/// repeated event is one object with a `series`).
async fn events_about(h: &Harness, name: &str, reason: &str) -> Vec<i32> {
    let events = h
        .env
        .api::<Event>()
        .list(&ListParams::default())
        .await
        .expect("list events");
    events
        .items
        .iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(name))
        .filter(|e| e.reason.as_deref() == Some(reason))
        .map(|e| e.series.as_ref().and_then(|s| s.count).unwrap_or(1))
        .collect()
}

/// Waits until the emulator has counted `n` more requests to `endpoint` than `from`: the
/// The Config `name` routing as [`routing`] does, once Ready.
async fn ready_routing(h: &Harness, name: &str) -> Config {
    support::objects::create::<Config>(&h.env, name, routing(name)).await;
    h.wait_for::<Config>(name, WAIT, |c| c.ready()).await
}

/// Sets the Config `name`'s `aigw.io/paused` annotation to `value` (`null` removes it).
async fn set_paused(h: &Harness, name: &str, value: Value) {
    let patch = json!({"metadata": {"annotations": {"aigw.io/paused": value}}});
    merge::<Config>(h, name, patch).await;
}

/// drift checks that happened in the meantime.
async fn wait_for_requests(h: &Harness, endpoint: &str, from: u64, n: u64) {
    let reached = support::wait_until(WAIT, || async {
        (h.count(endpoint).await >= from + n).then_some(())
    })
    .await;
    if reached.is_none() {
        panic!("fewer than {n} more {endpoint}: {}", h.stats().await);
    }
}

#[tokio::test]
async fn observe_reports_differences_without_writing_until_full() {
    let h = Harness::start_with("modes-observe", DRIFT).await;
    let slug = remote_config(&h, "observed", 2).await;
    let spec = adopting(&slug, "observed", 5);
    let seen: Config = observed(&h, "observed", spec, "True").await;
    let (_, message) = drifted(&seen).unwrap();
    assert!(message.contains("config"), "{message}");
    assert_eq!(
        seen.condition("Drifted").unwrap().1,
        "RemoteDiffers",
        "{seen:?}"
    );

    // Three more drift checks (lists) write nothing, and read nothing the list vouches for.
    let gets = h.count(CONFIG_GET).await;
    let lists = h.count(CONFIG_LIST).await;
    wait_for_requests(&h, CONFIG_LIST, lists, 3).await;
    let stats = h.stats().await;
    assert_eq!(count_in(&stats, CONFIG_PUT), 0, "{stats}");
    assert_eq!(count_in(&stats, CONFIG_GET), gets, "{stats}");
    assert_eq!(
        count_in(&stats, CONFIG_POST),
        1,
        "only the test's own: {stats}"
    );
    assert_eq!(remote_attempts(&h, &slug).await, 2);

    merge::<Config>(
        &h,
        "observed",
        json!({"spec": {"managementPolicy": "Full"}}),
    )
    .await;
    let applied = h
        .wait_for::<Config>("observed", WAIT, |c| {
            c.ready() && drifted(c).is_some_and(|(s, _)| s == "False")
        })
        .await;
    assert_eq!(remote_attempts(&h, &slug).await, 5);
    let lists = h.count(CONFIG_LIST).await;
    wait_for_requests(&h, CONFIG_LIST, lists, 2).await;
    assert_eq!(h.count(CONFIG_PUT).await, 1, "{}", h.stats().await);
    assert_eq!(
        applied.status.unwrap().history.len(),
        1,
        "the PUT is in the history"
    );
    h.stop().await;
}

#[tokio::test]
async fn observe_without_a_remote_object_is_stalled_and_never_creates() {
    let h = Harness::start_with("modes-nothing", DRIFT).await;
    let mut spec = routing("unborn");
    spec["managementPolicy"] = json!("Observe");
    support::objects::create::<Config>(&h.env, "unborn", spec).await;
    h.wait_for::<Config>("unborn", WAIT, |c| c.stalled_with("NothingToObserve"))
        .await;
    support::wait_until(WAIT, || async {
        (!events_about(&h, "unborn", "NothingToObserve")
            .await
            .is_empty())
        .then_some(())
    })
    .await
    .expect("a NothingToObserve event");
    assert_eq!(h.count(CONFIG_POST).await, 0, "{}", h.stats().await);

    // Full creates it: the test above would have seen a POST had Observe sent one.
    merge::<Config>(&h, "unborn", json!({"spec": {"managementPolicy": "Full"}})).await;
    h.wait_for::<Config>("unborn", WAIT, |c| c.ready()).await;
    assert_eq!(h.count(CONFIG_POST).await, 1, "{}", h.stats().await);
    h.stop().await;
}

#[tokio::test]
async fn deleting_an_observed_object_leaves_the_remote_one_whatever_the_deletion_policy() {
    let h = Harness::start_with("modes-delete", DRIFT).await;
    let slug = remote_config(&h, "kept", 2).await;
    let mut spec = adopting(&slug, "kept", 2);
    spec["deletionPolicy"] = json!("Delete");
    let seen: Config = observed(&h, "kept", spec, "False").await;
    assert_eq!(seen.condition("Drifted").unwrap().1, "InSync");
    h.env.delete_and_wait::<Config>("kept", WAIT).await;
    assert_eq!(h.count(CONFIG_DELETE).await, 0, "{}", h.stats().await);
    assert_eq!(
        remote_attempts(&h, &slug).await,
        2,
        "the config is still there"
    );
    assert_eq!(events_about(&h, "kept", "Orphaned").await.len(), 1);
    h.stop().await;
}

/// Requests that write: every POST, PUT and DELETE the emulator counted.
fn writes(stats: &Value) -> u64 {
    stats["requests"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| {
            ["POST ", "PUT ", "DELETE "]
                .iter()
                .any(|m| k.starts_with(m))
        })
        .map(|(k, _)| count_in(stats, k))
        .sum()
}

#[tokio::test]
async fn an_observed_deployment_is_never_written_nor_archived() {
    let h = Harness::start_with("modes-deploy", DRIFT).await;
    let id = h.seed_deployment("legacy", "production").await;
    h.reset_stats().await;
    let mut spec = gateway("renamed", "legacy-credentials");
    spec["type"] = "production".into();
    spec["deploymentId"] = json!(id);
    let seen: Deployment = observed(&h, "legacy", spec, "True").await;
    assert!(drifted(&seen).unwrap().1.contains("name"), "{seen:?}");
    let gets = h
        .count("GET /ai_gw/admin/v2/deployments/{deploymentId}")
        .await;
    wait_for_requests(
        &h,
        "GET /ai_gw/admin/v2/deployments/{deploymentId}",
        gets,
        2,
    )
    .await;
    let secret = h.env.api::<Secret>().get_opt("legacy-credentials").await;
    assert!(
        matches!(secret, Ok(None)),
        "no Secret is written: {secret:?}"
    );
    h.env.delete_and_wait::<Deployment>("legacy", WAIT).await;
    let stats = h.stats().await;
    assert_eq!(writes(&stats), 0, "{stats}");
    let remote = h.remote_deployment(&id).await;
    assert_eq!(remote["name"], "legacy");
    assert_eq!(remote["status"], "active", "not archived: {remote}");
    h.stop().await;
}

#[tokio::test]
async fn observe_works_for_rate_limits_policies_too() {
    let h = Harness::start_with("modes-rlp", DRIFT).await;
    let policy = json!({"name": "shared-limit", "type": "requests", "unit": "rpm", "value": 50,
                        "conditions": [{"key": "api_key", "value": "k1"}, {"key": "metadata.user_id", "value": "u1"}],
                        "group_by": [{"key": "api_key"}]});
    let created = h.post("/ai_gw/v2/policies/rate-limits", policy).await;
    let id = created["id"].as_str().expect("policy id").to_string();
    h.reset_stats().await;
    let mut spec = limits("shared-limit");
    spec["policyId"] = json!(id);
    let seen: RateLimitsPolicy = observed(&h, "shared", spec, "True").await;
    let (_, message) = drifted(&seen).unwrap();
    assert!(message.contains("value"), "{message}");
    let stats = h.stats().await;
    assert_eq!(writes(&stats), 0, "{stats}");
    h.stop().await;
}

#[tokio::test]
async fn a_paused_object_makes_no_api_call_until_unpaused() {
    let h = Harness::start_with("modes-paused", DRIFT).await;
    ready_routing(&h, "held").await;

    set_paused(&h, "held", json!("true")).await;
    let paused = h
        .wait_for::<Config>("held", WAIT, |c| c.is_true("Paused"))
        .await;
    assert!(paused.ready(), "Ready stays as it was: {paused:?}");
    h.reset_stats().await;
    // A spec change while paused is not applied either.
    let mut spec = routing("held");
    spec["config"]["retry"]["attempts"] = json!(7.0);
    merge::<Config>(&h, "held", json!({"spec": spec})).await;
    tokio::time::sleep(DRIFT * 3 + Duration::from_millis(500)).await;
    let stats = h.stats().await;
    assert_eq!(total_requests(&stats), 0, "{stats}");
    assert_eq!(events_about(&h, "held", "Paused").await, vec![1]);

    set_paused(&h, "held", json!(null)).await;
    let resumed = h
        .wait_for::<Config>("held", WAIT, |c| {
            c.ready() && c.condition("Paused").is_some_and(|(s, _, _)| s == "False")
        })
        .await;
    assert_eq!(h.count(CONFIG_PUT).await, 1, "{}", h.stats().await);
    let slug = resumed.status.unwrap().slug.unwrap();
    assert_eq!(remote_attempts(&h, &slug).await, 7);
    assert_eq!(events_about(&h, "held", "Paused").await, vec![1]);
    h.stop().await;
}

/// Unpausing alone (no spec change) is recorded too, although the object's spec was applied
/// and a reconcile would otherwise trust its status and make no call.
#[tokio::test]
async fn unpausing_without_a_spec_change_clears_paused() {
    let h = Harness::start_with("modes-unpause", DRIFT).await;
    ready_routing(&h, "idle").await;
    for (value, paused) in [(json!("true"), "True"), (Value::Null, "False")] {
        set_paused(&h, "idle", value).await;
        h.wait_for::<Config>("idle", WAIT, |c| {
            c.condition("Paused").is_some_and(|(s, _, _)| s == paused)
        })
        .await;
    }
    let stats = h.stats().await;
    assert_eq!(count_in(&stats, CONFIG_POST), 1, "{stats}");
    assert_eq!(count_in(&stats, CONFIG_PUT), 0, "{stats}");
    h.stop().await;
}

#[tokio::test]
async fn deleting_a_paused_object_still_follows_its_deletion_policy() {
    let h = Harness::start_with("modes-paused-delete", DRIFT).await;
    let ready = ready_routing(&h, "gone").await;
    let slug = ready.status.unwrap().slug.unwrap();
    set_paused(&h, "gone", json!("true")).await;
    h.wait_for::<Config>("gone", WAIT, |c| c.is_true("Paused"))
        .await;
    h.env.delete_and_wait::<Config>("gone", WAIT).await;
    assert_eq!(h.count(CONFIG_DELETE).await, 1, "{}", h.stats().await);
    let state = h.state().await;
    let left = state["configs"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["slug"] == slug.as_str());
    assert!(!left, "the config was deleted: {state}");
    h.stop().await;
}

/// Edits spec and `aigw.io/revision` in one write, as one Git commit applied by Argo CD would.
async fn commit(h: &Harness, name: &str, attempts: u64, revision: &str) {
    let mut spec = routing(name);
    spec["config"]["retry"]["attempts"] = json!(attempts);
    merge::<Config>(
        h,
        name,
        json!({"metadata": {"annotations": {"aigw.io/revision": revision}}, "spec": spec}),
    )
    .await;
    h.wait_for::<Config>(name, WAIT, |c| {
        c.ready()
            && c.status
                .as_ref()
                .and_then(|s| s.history.first())
                .is_some_and(|e| e.revision.as_deref() == Some(revision))
    })
    .await;
}

#[tokio::test]
async fn history_records_each_applied_version_with_its_revision() {
    let h = Harness::start_with("modes-history", DRIFT).await;
    let mut first: Config = object("Config", "promoted", routing("promoted"));
    first
        .annotations_mut()
        .insert("aigw.io/revision".into(), "c0ffee0".into());
    support::create(&h.env.api(), &first).await;
    h.wait_for::<Config>("promoted", WAIT, |c| c.ready()).await;
    commit(&h, "promoted", 4, "c0ffee1").await;
    commit(&h, "promoted", 5, "c0ffee2").await;

    let config = h.env.api::<Config>().get("promoted").await.unwrap();
    let status = config.status.unwrap();
    let slug = status.slug.clone().unwrap();
    let revisions: Vec<_> = status
        .history
        .iter()
        .map(|e| e.revision.as_deref().unwrap_or(""))
        .collect();
    assert_eq!(revisions, ["c0ffee2", "c0ffee1", "c0ffee0"]);
    let versions = h.get(&format!("/ai_gw/v2/configs/{slug}/versions")).await;
    let reported: Vec<_> = versions["data"]
        .as_array()
        .expect("versions")
        .iter()
        .map(|v| v["version_id"].as_str().unwrap_or("").to_string())
        .collect();
    let recorded: Vec<_> = status
        .history
        .iter()
        .map(|e| e.version_id.clone().unwrap_or_default())
        .collect();
    assert_eq!(recorded, reported, "newest first, as the API lists them");
    assert_eq!(status.version_id.as_deref(), Some(reported[0].as_str()));
    let generations: Vec<_> = status.history.iter().map(|e| e.generation).collect();
    assert!(
        generations.windows(2).all(|w| w[0] > w[1]),
        "{generations:?}"
    );

    for i in 3..=12 {
        commit(&h, "promoted", 10 + i, &format!("c0ffee{i}")).await;
    }
    let status = h.env.get::<Config>("promoted").await.status.unwrap();
    let revisions: Vec<_> = status
        .history
        .iter()
        .map(|e| e.revision.clone().unwrap_or_default())
        .collect();
    let expected: Vec<_> = (3..=12).rev().map(|i| format!("c0ffee{i}")).collect();
    assert_eq!(revisions, expected, "the newest ten");

    // `aigw history` joins the API's versions with what aigw recorded, and diffs two of them.
    let newest = status.history[0].version_id.clone().unwrap();
    let before = status.history[1].version_id.clone().unwrap();
    let listed = history(&h, &["config/promoted"]).await;
    let line = listed
        .lines()
        .find(|l| l.starts_with(&newest))
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(line.contains("c0ffee12"), "{listed}");
    assert!(
        listed.contains("made outside aigw, or older than its history"),
        "{listed}"
    );
    let diff = history(&h, &["config/promoted", "--diff", &before, &newest]).await;
    assert!(
        diff.contains("-     \"attempts\": 21") && diff.contains("+     \"attempts\": 22"),
        "{diff}"
    );
    h.stop().await;
}

/// `aigw history ARGS` against the harness's cluster and emulator; its stdout.
pub(super) async fn history(h: &Harness, args: &[&str]) -> String {
    let token = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(token.path(), support::harness::TOKEN).unwrap();
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_aigw"));
    command
        .arg("history")
        .args(args)
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
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap()
}
