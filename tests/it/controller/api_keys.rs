//! ApiKey on a real kube-apiserver against the emulator over HTTP: the key delivered into its
//! Secret (and live), rotations into the Secret exactly once per trigger change with the old
//! value working until its transition ends, workloads rolled, admission of a server-side
//! rotation refused, no write at steady state, a lost create answer leaving no orphaned key,
//! a crash between the rotate call and the Secret write, a lost rotate answer, and a key
//! deleted outside aigw.

use crate::support;

use std::time::Duration;

use aigw::controller::runtime::failpoints::AFTER_API_KEY_ROTATE;
use aigw::emulator::EmulatorOptions;
use aigw::resources::ApiKey;
use k8s_openapi::api::apps::v1::Deployment as AppsDeployment;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::api_keys::*;
use support::harness::{Harness, TOKEN, captured_logs};
use support::objects::{Conditions, Rotates};

const ROLLED: &str = "aigw.io/credentials-rotated-at";

async fn set_trigger(h: &Harness, name: &str, trigger: &str) -> ApiKey {
    h.env
        .patch_spec::<ApiKey>(name, json!({"rotation": {"trigger": trigger}}))
        .await;
    h.wait_for::<ApiKey>(name, WAIT, |k| k.settled_at(trigger))
        .await
}

/// A service key `name`'s spec (no rotation) with `field` set to `value`.
fn service_key_with(name: &str, (field, value): (&str, Value)) -> Value {
    let mut spec = service_key(name, json!({}));
    spec[field] = value;
    spec
}

/// Creates the service key `name` rotating as `rotation`: its id and the value its Secret
/// (`{name}-key`) holds.
async fn created_key(h: &Harness, name: &str, rotation: Value) -> (String, String) {
    let id = create(h, name, service_key(name, rotation)).await;
    (id, secret_value(h, &format!("{name}-key")).await)
}

/// The value the Secret `secret` holds: the key `(remote, id)`'s, which works (else a
/// panic saying `holds`).
async fn secret_holds(
    h: &Harness,
    secret: &str,
    (remote, id): (&Value, &str),
    holds: &str,
) -> String {
    let value = secret_value(h, secret).await;
    assert_eq!(remote["key"], value.as_str(), "{holds}");
    assert_eq!(handshake(h, id, &value).await, 200);
    value
}

/// Creates the ApiKey `name` with `spec`, which admission refuses (`expect` says why it must);
/// the refusal.
async fn refused_at_admission(h: &Harness, name: &str, spec: Value, expect: &str) -> kube::Error {
    h.env
        .api::<ApiKey>()
        .create(&PostParams::default(), &api_key(name, spec))
        .await
        .expect_err(expect)
}

/// Moves the rotation trigger of the ApiKey `name` to `b`; waits until the key `id` was
/// rotated once.
async fn rotate_to_b(h: &Harness, name: &str, id: &str) {
    h.env
        .patch_spec::<ApiKey>(name, json!({"rotation": {"trigger": "b"}}))
        .await;
    support::wait_until(WAIT, || async {
        (remote(h, id).await["rotations"] == 1).then_some(())
    })
    .await
    .expect("the rotate call never happened");
}

/// The Secret `name`, left in place without an owner (so garbage collection keeps it): its
/// annotations.
async fn released_secret(h: &Harness, name: &str) -> std::collections::BTreeMap<String, String> {
    let kept = h.env.api::<Secret>().get(name).await.unwrap();
    let owners = kept.metadata.owner_references.unwrap_or_default();
    assert!(owners.is_empty(), "{name} is still owned: {owners:?}");
    kept.metadata.annotations.unwrap_or_default()
}

/// Creates the key `name` of `spec` (rotation trigger `a`), then stops the operator right after
/// the rotate call for trigger `b` reached the API, before the Secret write: the rotation is
/// left recorded, unfinished. The key's id.
async fn interrupted_rotation(h: &mut Harness, name: &str, spec: Value) -> String {
    let id = create(h, name, spec).await;
    h.ctx.failpoints.arm(AFTER_API_KEY_ROTATE);
    rotate_to_b(h, name, &id).await;
    h.stop_operator().await;
    id
}

/// The key `id` is replaced and settled: Ready on another key, with no rotation or
/// replacement left in flight.
fn replaced(k: &ApiKey, id: &str) -> bool {
    let status = k.status.as_ref().unwrap();
    ready(k)
        && status.rotation.pending_rotation.is_none()
        && status.replaced_key.is_none()
        && status.id.as_deref().is_some_and(|new| new != id)
}

/// No key value the emulator ever handed out (nor `extra`) is in logs, events or statuses.
async fn assert_no_leaks(h: &Harness, extra: &[&str]) {
    let mut values: Vec<String> = vec![TOKEN.to_string()];
    for key in remote_keys(h).await {
        values.extend(key["key"].as_str().map(str::to_string));
        for old in key["previous_keys"].as_array().into_iter().flatten() {
            values.extend(old["key"].as_str().map(str::to_string));
        }
    }
    values.extend(extra.iter().map(|s| s.to_string()));
    let logs = captured_logs();
    let events = h.env.events_text().await;
    let statuses = support::statuses(&h.env.api::<ApiKey>()).await;
    let places = [
        ("the logs", logs.as_str()),
        ("events", events.as_str()),
        ("a status", statuses.as_str()),
    ];
    support::assert_none_in(&values, "key", &places);
}

#[tokio::test]
async fn an_api_key_is_delivered_into_its_secret_and_kept_in_line_without_idle_writes() {
    let h = Harness::start_with("ak-life", Duration::from_secs(1)).await;
    let id = create(&h, "app", service_key("app", json!({"trigger": "a"}))).await;
    assert_eq!(h.count(&format!("POST {SERVICE_KEYS}")).await, 1);
    let value = secret_value(&h, "app-key").await;
    assert_eq!(
        handshake(&h, &id, &value).await,
        200,
        "the Secret's key is live"
    );
    let remote_key = remote(&h, &id).await;
    assert_eq!(remote_key["key"], value.as_str());
    assert!(
        remote_key["rotation_policy"].is_null(),
        "never a rotation_policy"
    );

    // Steady state across several drift passes: no write.
    h.assert_no_write_over(Duration::from_secs(4)).await;

    // A change: one PUT of the changed fields only, no rotation.
    h.env
        .patch_spec::<ApiKey>(
            "app",
            json!({"description": "billing", "scopes": ["completions.write", "logs.write"]}),
        )
        .await;
    h.wait_for::<ApiKey>("app", WAIT, ready).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(h.remote_writes().await, 1, "{}", h.stats().await);
    let remote_key = remote(&h, &id).await;
    assert_eq!(remote_key["description"], "billing");
    assert_eq!(remote_key["rotations"], 0);
    assert_eq!(secret_value(&h, "app-key").await, value);

    // An edit outside aigw is corrected by one PUT, found by the drift list.
    h.reset_stats().await;
    h.put(&format!("{SERVICE_KEYS}/{id}"), json!({"name": "edited"}))
        .await;
    support::wait_until(WAIT, || async {
        (remote(&h, &id).await["name"] == "app").then_some(())
    })
    .await
    .expect("the remote edit was not corrected");
    assert_eq!(h.count(&format!("PUT {SERVICE_KEYS}/{{keyId}}")).await, 2);
    h.env.wait_event("DriftCorrected", WAIT).await;

    h.reset_stats().await;
    h.env.delete_and_wait::<ApiKey>("app", WAIT).await;
    assert_eq!(
        h.count(&format!("DELETE {SERVICE_KEYS}/{{keyId}}")).await,
        1
    );
    assert!(remote_keys(&h).await.is_empty(), "the key is deleted");
    assert_no_leaks(&h, &[&value]).await;
    h.stop().await;
}

#[tokio::test]
async fn two_trigger_changes_rotate_twice_and_the_old_key_works_until_its_transition_ends() {
    let mut options = EmulatorOptions::new(TOKEN);
    options.min_key_transition = Some(Duration::from_secs(6));
    let h = Harness::start_with_emulator("ak-rotate", Duration::from_secs(600), options).await;
    let pod = json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "web:1"}]}});
    h.env
        .create_from::<AppsDeployment>(json!({"metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": pod}}))
        .await;
    let rotation = json!({"trigger": "a", "transitionPeriod": "1h",
                          "restart": [{"kind": "Deployment", "name": "web"}]});
    let id = create(&h, "rot", service_key("rot", rotation)).await;
    let first = secret_value(&h, "rot-key").await;

    let rotated = set_trigger(&h, "rot", "b").await;
    let second = secret_value(&h, "rot-key").await;
    assert_ne!(first, second);
    assert_eq!(handshake(&h, &id, &second).await, 200, "the new key works");
    assert_eq!(
        handshake(&h, &id, &first).await,
        200,
        "the old one still works"
    );
    let status = rotated.status.unwrap();
    let expires: jiff::Timestamp = status
        .previous_key_expires_at
        .as_deref()
        .expect("previousKeyExpiresAt")
        .parse()
        .unwrap();
    let workload = h.env.api::<AppsDeployment>().get("web").await.unwrap();
    let rolled =
        serde_json::to_value(&workload).unwrap()["spec"]["template"]["metadata"]["annotations"]
            [ROLLED]
            .as_str()
            .map(str::to_string);
    assert_eq!(
        rolled, status.rotation.last_rotated_at,
        "the workload was rolled"
    );
    // The transition ends: the old key stops working, the Secret's keeps working.
    let left = expires.duration_since(jiff::Timestamp::now());
    let left = Duration::try_from(left).unwrap_or_default() + Duration::from_secs(1);
    tokio::time::sleep(left).await;
    assert_eq!(handshake(&h, &id, &first).await, 401, "the old key expired");
    assert_eq!(handshake(&h, &id, &second).await, 200);

    set_trigger(&h, "rot", "c").await;
    let third = secret_value(&h, "rot-key").await;
    assert_eq!(handshake(&h, &id, &third).await, 200);
    assert_eq!(remote(&h, &id).await["rotations"], 2, "exactly 2 rotations");
    // Nothing rotates again by itself.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(remote(&h, &id).await["rotations"], 2);
    assert!(h.env.events_text().await.contains("Rotated"));
    assert_no_leaks(&h, &[&first, &second]).await;
    h.stop().await;
}

#[tokio::test]
async fn a_server_side_rotation_policy_is_refused_at_admission_saying_why() {
    let h = Harness::start("ak-admit").await;
    let spec = service_key_with(
        "policy",
        ("rotationPolicy", json!({"rotation_period": "weekly"})),
    );
    let refused =
        refused_at_admission(&h, "policy", spec, "a rotationPolicy must be refused").await;
    let message = refused.to_string();
    assert!(message.contains("rotationPolicy"), "{message}");
    assert!(message.contains("dead key"), "{message}");

    let short = service_key("short", json!({"transitionPeriod": "10m"}));
    let refused =
        refused_at_admission(&h, "short", short, "a transition under 30m must be refused").await;
    assert!(refused.to_string().contains("30m"), "{refused}");

    let user = service_key_with("user", ("kind", json!("user")));
    let refused = refused_at_admission(&h, "user", user, "a user key needs a userId").await;
    assert!(refused.to_string().contains("userId"), "{refused}");

    // An empty workspaceId would mean the default workspace to the API and read back as
    // another value: refused, naming the field.
    let empty = service_key_with("empty", ("workspaceId", json!("")));
    let refused =
        refused_at_admission(&h, "empty", empty, "an empty workspaceId must be refused").await;
    assert!(
        refused.to_string().contains("spec.workspaceId"),
        "{refused}"
    );

    // kind is fixed once created.
    create(&h, "fixed", service_key("fixed", json!({}))).await;
    let user = json!({"kind": "user", "userId": "6f1c2b3a-4d5e-4f60-8a7b-9c0d1e2f3a4b"});
    let changed = support::refused_patch(&h.env.api::<ApiKey>(), "fixed", user).await;
    assert!(changed.contains("immutable"), "{changed}");
    h.stop().await;
}

#[tokio::test]
async fn a_lost_create_answer_leaves_no_orphaned_key() {
    let h = Harness::start("ak-lost").await;
    h.faults(json!({"drop_after_commit_rate": 1.0})).await;
    h.env
        .api::<ApiKey>()
        .create(
            &PostParams::default(),
            &api_key("lost", service_key("lost", json!({}))),
        )
        .await
        .unwrap();
    support::wait_until(WAIT, || async {
        (!remote_keys(&h).await.is_empty()).then_some(())
    })
    .await
    .expect("the create was never applied");
    let orphan = remote_keys(&h).await[0]["id"].as_str().unwrap().to_string();
    h.faults(json!({})).await;

    let created = h
        .wait_for::<ApiKey>("lost", Duration::from_secs(90), ready)
        .await;
    let id = created.status.unwrap().id.unwrap();
    assert_ne!(id, orphan, "the key whose value was lost is not used");
    let keys = remote_keys(&h).await;
    assert_eq!(keys.len(), 1, "one key in the API: {keys:?}");
    assert_eq!(keys[0]["id"], id.as_str());
    let value = secret_value(&h, "lost-key").await;
    assert_eq!(keys[0]["key"], value.as_str(), "held by the Secret");
    assert_eq!(handshake(&h, &id, &value).await, 200);
    assert!(
        h.env.events_text().await.contains(&orphan),
        "the deletion is reported"
    );
    assert_no_leaks(&h, &[]).await;
    h.stop().await;
}

#[tokio::test]
async fn a_crash_between_the_rotate_call_and_the_secret_write_is_recovered() {
    let mut h = Harness::start("ak-crash").await;
    let (id, before) = created_key(&h, "crashy", json!({"trigger": "a"})).await;

    // The process "dies" right after the API issued the new value.
    h.ctx.failpoints.arm(AFTER_API_KEY_ROTATE);
    rotate_to_b(&h, "crashy", &id).await;
    let lost = remote(&h, &id).await["key"].as_str().unwrap().to_string();
    assert_eq!(secret_value(&h, "crashy-key").await, before);
    let frozen = h.env.api::<ApiKey>().get("crashy").await.unwrap();
    assert!(
        frozen
            .status
            .as_ref()
            .unwrap()
            .rotation
            .pending_rotation
            .is_some()
    );
    assert!(!ready(&frozen), "not Ready while the Secret lags the API");
    // Meanwhile the Secret's key still works: the rotation keeps it live for its transition.
    assert_eq!(handshake(&h, &id, &before).await, 200);

    h.restart_operator().await;
    let recovered = h
        .env
        // The dead process's call is given the longest a call can take before it is given up.
        .wait_for::<ApiKey>("crashy", Duration::from_secs(90), |k| replaced(k, &id))
        .await;
    let status = recovered.status.clone().unwrap();
    let new_id = status.id.clone().unwrap();
    // No second rotation: the key whose value was lost is replaced by a new key, and deleted
    // once the Secret holds the new one, so no live value is left that nobody holds.
    let keys = remote_keys(&h).await;
    let ours: Vec<_> = keys.iter().filter(|k| k["name"] == "crashy").collect();
    assert_eq!(ours.len(), 1, "one key left in the API: {ours:?}");
    assert_eq!(ours[0]["id"], new_id.as_str());
    assert_eq!(ours[0]["rotations"], 0, "the new key was never rotated");
    secret_holds(
        &h,
        "crashy-key",
        (ours[0], &new_id),
        "the Secret holds the live key",
    )
    .await;
    assert_ne!(
        handshake(&h, &id, &lost).await,
        200,
        "the lost value is dead"
    );
    assert_ne!(handshake(&h, &id, &before).await, 200);
    assert_eq!(
        status.rotation.observed_rotation_trigger.as_deref(),
        Some("b")
    );
    let events = h.env.events_text().await;
    for (reason, names) in [("Replacing", &id), ("Deleted", &id), ("Created", &new_id)] {
        let line = format!("crashy {reason}: ");
        assert!(
            events
                .lines()
                .any(|l| l.contains(&line) && l.contains(names.as_str())),
            "no {reason} event naming {names}:\n{events}"
        );
    }
    // Restarts and resyncs rotate or replace nothing more.
    h.restart_operator().await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let keys = remote_keys(&h).await;
    let ours: Vec<_> = keys.iter().filter(|k| k["name"] == "crashy").collect();
    assert_eq!(ours.len(), 1);
    assert_eq!(ours[0]["id"], new_id.as_str());
    assert_eq!(ours[0]["rotations"], 0);
    assert_no_leaks(&h, &[&before, &lost]).await;
    h.stop().await;
}

#[tokio::test]
async fn defaults_config_names_a_config_resource_and_waits_until_it_exists() {
    let h = Harness::start("ak-config").await;
    let spec = service_key_with(
        "routed",
        (
            "defaults",
            json!({"config": "routing", "allowConfigOverride": false}),
        ),
    );
    support::create(&h.env.api(), &api_key("routed", spec)).await;
    // No Config yet: the key waits, and nothing is created.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(remote_keys(&h).await.is_empty());
    let waiting = h.env.api::<ApiKey>().get("routed").await.unwrap();
    assert!(!ready(&waiting));

    support::objects::create::<aigw::resources::Config>(
        &h.env,
        "routing",
        support::objects::routing("routing"),
    )
    .await;
    let config = h
        .wait_for::<aigw::resources::Config>("routing", WAIT, |c| {
            c.status.as_ref().is_some_and(|s| s.slug.is_some())
        })
        .await;
    let slug = config.status.unwrap().slug.unwrap();
    let created = h
        .wait_for::<ApiKey>("routed", Duration::from_secs(90), ready)
        .await;
    let status = created.status.unwrap();
    assert_eq!(status.config_id.as_deref(), Some(slug.as_str()));
    let remote_key = remote(&h, &status.id.unwrap()).await;
    assert_eq!(remote_key["defaults"]["config_id"], slug.as_str());
    h.stop().await;
}

#[tokio::test]
async fn a_deleted_secret_is_reported_at_once_and_a_trigger_change_refills_it() {
    let h = Harness::start("ak-gone").await;
    let id = create(&h, "gone", service_key("gone", json!({"trigger": "a"}))).await;
    h.env.delete::<Secret>("gone-key").await;
    h.wait_for::<ApiKey>("gone", WAIT, |k| {
        k.status.as_ref().is_some_and(|s| {
            s.conditions.iter().any(|c| {
                c.type_ == "CredentialsAvailable"
                    && c.status == "False"
                    && c.reason == "SecretMissing"
            })
        })
    })
    .await;
    assert_eq!(
        remote(&h, &id).await["rotations"],
        0,
        "nothing rotates by itself"
    );
    set_trigger(&h, "gone", "b").await;
    let value = secret_value(&h, "gone-key").await;
    assert_eq!(handshake(&h, &id, &value).await, 200);
    assert_eq!(remote(&h, &id).await["rotations"], 1);
    h.stop().await;
}

#[tokio::test]
async fn a_scheduled_rotation_happens_when_due() {
    let h = Harness::start_with("ak-sched", Duration::from_secs(1)).await;
    let (id, first) = created_key(&h, "sched", json!({"interval": "4s"})).await;
    support::wait_until(Duration::from_secs(20), || async {
        (remote(&h, &id).await["rotations"] == 1).then_some(())
    })
    .await
    .expect("no scheduled rotation");
    let rotated = h.wait_for::<ApiKey>("sched", WAIT, |k| k.settled()).await;
    let second = secret_value(&h, "sched-key").await;
    assert_ne!(first, second);
    assert_eq!(handshake(&h, &id, &second).await, 200);
    let status = rotated.status.unwrap();
    let last: jiff::Timestamp = status.rotation.last_rotated_at.unwrap().parse().unwrap();
    let next: jiff::Timestamp = status.rotation.next_rotation_at.unwrap().parse().unwrap();
    assert_eq!(next.duration_since(last).as_secs(), 4);
    h.stop().await;
}

/// `aigw plan` off the async runtime (the in-process emulator keeps serving).
async fn plan(h: &Harness, manifest: String) -> (i32, String) {
    let (code, text) = h.plan("key.yaml", &manifest).await;
    (code.unwrap_or(-1), text)
}

#[tokio::test]
async fn plan_compares_the_recorded_key_and_never_prints_its_value() {
    let h = Harness::start("ak-plan").await;
    create(&h, "planned", service_key("planned", json!({}))).await;
    let value = secret_value(&h, "planned-key").await;
    let manifest = |scopes: &str| {
        format!(
            "apiVersion: aigw.io/v1alpha1\nkind: ApiKey\nmetadata: {{name: planned, namespace: {}}}\nspec: {{name: planned, kind: service, scopes: [{scopes}], secretRef: {{name: planned-key}}}}\n",
            h.env.namespace
        )
    };
    h.reset_stats().await;
    let (code, text) = plan(&h, manifest("completions.write")).await;
    assert_eq!(code, 0, "{text}");
    let (code, text) = plan(&h, manifest("completions.write, logs.write")).await;
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("scopes"), "{text}");
    assert!(!text.contains(&value), "the plan never prints the key");
    assert_eq!(h.remote_writes().await, 0, "a plan never writes");
    h.stop().await;
}

#[tokio::test]
async fn a_user_key_is_orphaned_with_its_secret_when_asked() {
    let h = Harness::start("ak-orphan").await;
    let mut spec = service_key_with("mine", ("kind", json!("user")));
    spec["userId"] = json!("6f1c2b3a-4d5e-4f60-8a7b-9c0d1e2f3a4b");
    spec["deletionPolicy"] = json!("Orphan");
    let id = create(&h, "mine", spec).await;
    assert_eq!(h.count("POST /ai_gw/v2/api-keys/user").await, 1);
    let value = secret_value(&h, "mine-key").await;
    assert_eq!(handshake(&h, &id, &value).await, 200);
    h.env.delete_and_wait::<ApiKey>("mine", WAIT).await;
    assert_eq!(remote_keys(&h).await.len(), 1, "the key stays");
    // Garbage collection would have taken an owned Secret by now; give it a moment anyway.
    tokio::time::sleep(Duration::from_secs(2)).await;
    released_secret(&h, "mine-key").await;
    assert_eq!(
        secret_value(&h, "mine-key").await,
        value,
        "and so does its Secret"
    );
    h.stop().await;
}

/// The rotate answer lost without a crash (the API applied it, then answered 5xx): the value
/// it carried exists nowhere, so the key is replaced rather than rotated again: a new key into
/// the Secret, then the old one deleted. No second rotation, one key left, held by the Secret,
/// and nothing rotates or is replaced after that.
#[tokio::test]
async fn a_lost_rotate_answer_replaces_the_key_and_the_secret_ends_live() {
    let h = Harness::start("ak-lost-rotate").await;
    let id = create(&h, "shaky", service_key("shaky", json!({"trigger": "a"}))).await;
    h.reset_stats().await;
    h.faults(json!({"error_after_commit_rate": 1.0})).await;
    rotate_to_b(&h, "shaky", &id).await;
    h.faults(json!({})).await;
    let settled = h
        .wait_for::<ApiKey>("shaky", WAIT, |k| {
            let status = k.status.as_ref().unwrap();
            ready(k)
                && status.rotation.observed_rotation_trigger.as_deref() == Some("b")
                && status.replaced_key.is_none()
                && status.id.as_deref().is_some_and(|new| new != id)
        })
        .await;
    let new_id = settled.status.unwrap().id.unwrap();

    let rotate = format!("POST {SERVICE_KEYS}/{{keyId}}/rotate");
    assert_eq!(h.count(&rotate).await, 1, "no second rotation");
    let state = h.state().await;
    let replaced: Vec<_> = state["deleted_api_keys"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["id"] == id.as_str())
        .collect();
    assert_eq!(replaced.len(), 1, "the replaced key was deleted: {state}");
    assert_eq!(replaced[0]["rotations"], 1);
    let ours: Vec<_> = remote_keys(&h)
        .await
        .into_iter()
        .filter(|k| k["name"] == "shaky")
        .collect();
    assert_eq!(ours.len(), 1, "one key left in the API: {ours:?}");
    assert_eq!(ours[0]["id"], new_id.as_str());
    secret_holds(
        &h,
        "shaky-key",
        (&ours[0], &new_id),
        "the Secret holds the live key",
    )
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(h.count(&rotate).await, 1);
    assert_eq!(remote(&h, &new_id).await["rotations"], 0);
    assert_no_leaks(&h, &[]).await;
    h.stop().await;
}

/// A key deleted outside aigw (hard delete: its value stops working) is found gone by the
/// drift list, created again through the create protocol, its value written to the Secret and
/// the workloads rolled. Only a 404 means gone.
#[tokio::test]
async fn a_key_deleted_outside_aigw_is_created_again_into_the_secret() {
    let h = Harness::start_with("ak-gone", Duration::from_secs(1)).await;
    let (id, before) = created_key(&h, "gone", json!({"trigger": "a"})).await;
    h.delete(&format!("{SERVICE_KEYS}/{id}")).await;
    assert_eq!(
        handshake(&h, &id, &before).await,
        404,
        "the old key is gone"
    );
    let again = h
        .env
        .ready_with_new::<ApiKey>("gone", WAIT, &id, |k| k.status.as_ref()?.id.as_deref())
        .await;
    let new_id = again.status.unwrap().id.unwrap();
    let keys = remote_keys(&h).await;
    assert_eq!(keys.len(), 1, "one key in the API: {keys:?}");
    secret_holds(
        &h,
        "gone-key",
        (&keys[0], &new_id),
        "the Secret holds the new key",
    )
    .await;
    assert_no_leaks(&h, &[&before]).await;
    h.stop().await;
}

// ---- Found by an attack on the rotation protocol; each failed before its fix. ----

async fn pending_rotation(h: &Harness, name: &str) -> Option<String> {
    h.env
        .api::<ApiKey>()
        .get(name)
        .await
        .unwrap()
        .status
        .and_then(|s| s.rotation.pending_rotation)
}

/// Two writers (two replicas without leader election, or two installs whose leases differ):
/// writer A records the intent and sends the rotate call, which is slow in the network. Writer
/// B sees the intent and no stamp on the Secret. Redoing the rotation at once (as aigw once did)
/// made A's late value the current one while the Secret kept B's, which died when its
/// transition ended. B now waits until any call of the recorded rotation has ended: one
/// rotation for one trigger change, and the Secret holds the current key.
#[tokio::test]
async fn a_rotation_in_flight_is_not_redone_by_a_second_writer() {
    let mut options = EmulatorOptions::new(TOKEN);
    options.min_key_transition = Some(Duration::from_secs(8));
    let h = Harness::start_with_emulator("ak-inflight", Duration::from_secs(600), options).await;
    let id = create(
        &h,
        "race",
        service_key("race", json!({"trigger": "a", "transitionPeriod": "1h"})),
    )
    .await;
    // Writer A's rotate call spends 7 s in the network.
    h.faults(json!({"latency_ms": 7000})).await;
    h.env
        .patch_spec::<ApiKey>("race", json!({"rotation": {"trigger": "b"}}))
        .await;
    support::wait_until(Duration::from_secs(20), || async {
        pending_rotation(&h, "race").await.map(|_| ())
    })
    .await
    .expect("writer A never recorded its intent");
    // A's rotate request leaves right after its intent write; then the network is fast again.
    tokio::time::sleep(Duration::from_millis(700)).await;
    h.faults(json!({})).await;
    let _writer_b = h.second_operator();
    h.wait_for::<ApiKey>("race", WAIT, |k| k.settled_at("b"))
        .await;
    // Let A's slow call land, and both writers settle.
    tokio::time::sleep(Duration::from_secs(9)).await;
    let remote_key = remote(&h, &id).await;
    let value = secret_value(&h, "race-key").await;
    let settled = h.env.api::<ApiKey>().get("race").await.unwrap();
    eprintln!(
        "rotations={} secret_is_current={} secret_is_previous={} ready={}",
        remote_key["rotations"],
        remote_key["key"] == value.as_str(),
        remote_key["previous_keys"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|p| p["key"] == value.as_str()),
        ready(&settled)
    );
    let handshake_now = handshake(&h, &id, &value).await;
    // The transition of the previous value ends (min_key_transition 8 s).
    tokio::time::sleep(Duration::from_secs(9)).await;
    let handshake_later = handshake(&h, &id, &value).await;
    eprintln!("secret handshake now={handshake_now} after the transition={handshake_later}");
    assert_eq!(
        remote_key["rotations"], 1,
        "one trigger change, no crash, no lost answer: one rotation"
    );
    assert_eq!(
        remote_key["key"],
        value.as_str(),
        "the Secret holds the current key"
    );
    assert_eq!(handshake_later, 200, "the Secret's key still works");
    h.stop().await;
}

/// The process dies after the create's Secret write and before the status write that records
/// the id (api_key.rs: deliver, then save_status): the status still shows the create intent,
/// the Secret already holds the key's value (stamped with its id). The resumed reconcile finds
/// the key and keeps it, as Deployment's recovered create does (it once deleted the key the
/// Secret held and made another).
#[tokio::test]
async fn a_crash_after_the_create_secret_write_keeps_the_key_the_secret_holds() {
    let mut h = Harness::start("ak-crash-create").await;
    let intent = jiff::Timestamp::now().to_string();
    let (id, value) = created_key(&h, "held", json!({"trigger": "a"})).await;
    // The status as a crash between the Secret write and the status write leaves it: the
    // intent recorded before the POST, no id.
    h.stop_operator().await;
    h.env
        .api::<ApiKey>()
        .patch_status(
            "held",
            // As the operator's own field manager: what it omits on its next write goes.
            &PatchParams::apply("aigw/apikey").force(),
            &Patch::Apply(&json!({"apiVersion": "aigw.io/v1alpha1", "kind": "ApiKey",
                "status": {"pendingCreate": intent, "createAttempt": {"name": "held"}}})),
        )
        .await
        .unwrap();
    h.reset_stats().await;
    h.restart_operator().await;
    let settled = h
        .wait_for::<ApiKey>("held", Duration::from_secs(60), |k| {
            ready(k)
                && k.status
                    .as_ref()
                    .is_some_and(|s| s.pending_create.is_none())
        })
        .await;
    let now_id = settled.status.unwrap().id.unwrap();
    let now_value = secret_value(&h, "held-key").await;
    eprintln!(
        "before: id={id}; after: id={now_id}; deletes={} creates={}; old value live={}",
        h.count(&format!("DELETE {SERVICE_KEYS}/{{keyId}}")).await,
        h.count(&format!("POST {SERVICE_KEYS}")).await,
        handshake(&h, &id, &value).await
    );
    assert_eq!(
        now_id, id,
        "the key the Secret already holds is kept, not deleted and replaced"
    );
    assert_eq!(now_value, value);
    h.stop().await;
}

/// A rotation is interrupted (crash after the rotate call), and the key is deleted outside aigw
/// meanwhile. The resumed reconcile finds it gone and creates a new key into the Secret; the old
/// `pendingRotation` is settled with it (it was once left behind, and the next reconcile
/// rotated the brand-new key, which no trigger asked for).
#[tokio::test]
async fn a_stale_rotation_intent_never_rotates_a_freshly_created_key() {
    let mut h = Harness::start("ak-stale-intent").await;
    let id = interrupted_rotation(
        &mut h,
        "stale",
        service_key("stale", json!({"trigger": "a"})),
    )
    .await;
    h.delete(&format!("{SERVICE_KEYS}/{id}")).await;
    h.restart_operator().await;
    let again = h
        .wait_for::<ApiKey>("stale", WAIT, |k| {
            ready(k)
                && k.status.as_ref().is_some_and(|s| {
                    s.id.as_deref().is_some_and(|n| n != id)
                        && s.rotation.pending_rotation.is_none()
                })
        })
        .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let new_id = again.status.unwrap().id.unwrap();
    let fresh = remote(&h, &new_id).await;
    eprintln!("new key rotations={}", fresh["rotations"]);
    assert_eq!(
        fresh["rotations"], 0,
        "a key created for trigger b needs no rotation"
    );
    h.stop().await;
}

/// A paused ApiKey neither rotates nor updates its key until unpaused, and then rotates once;
/// an observed one reports how the key differs and writes nothing until it is Full again.
#[tokio::test]
async fn a_paused_or_observed_api_key_writes_nothing_until_let_go() {
    let drift = Duration::from_secs(1);
    let h = Harness::start_with("ak-modes", drift).await;
    let (id, before) = created_key(&h, "held", json!({"trigger": "a"})).await;
    let patch = |patch: Value| {
        let keys = h.env.api::<ApiKey>();
        async move {
            support::merge_patch(&keys, "held", patch).await;
        }
    };

    patch(json!({"metadata": {"annotations": {"aigw.io/paused": "true"}}})).await;
    h.wait_for::<ApiKey>("held", WAIT, |k| k.is_true("Paused"))
        .await;
    h.reset_stats().await;
    patch(json!({"spec": {"description": "paused edit", "rotation": {"trigger": "b"}}})).await;
    tokio::time::sleep(drift * 3 + Duration::from_millis(500)).await;
    assert_eq!(h.remote_writes().await, 0, "{}", h.stats().await);
    assert_eq!(remote(&h, &id).await["rotations"], 0);
    assert_eq!(secret_value(&h, "held-key").await, before);

    patch(json!({"metadata": {"annotations": {"aigw.io/paused": null}}})).await;
    let resumed = set_trigger(&h, "held", "b").await;
    assert!(ready(&resumed));
    let remote_key = remote(&h, &id).await;
    assert_eq!(
        remote_key["rotations"], 1,
        "one rotation for the held trigger change"
    );
    assert_eq!(remote_key["description"], "paused edit");
    assert_eq!(
        secret_value(&h, "held-key").await,
        remote_key["key"].as_str().unwrap()
    );

    patch(
        json!({"spec": {"managementPolicy": "Observe", "description": "observed edit",
                          "rotation": {"trigger": "c"}}}),
    )
    .await;
    let observed = h
        .wait_for::<ApiKey>("held", WAIT, |k| k.is_true("Drifted"))
        .await;
    let (_, _, message) = observed.condition("Drifted").unwrap();
    assert!(message.contains("description"), "{message}");
    h.assert_no_write_over(drift * 3 + Duration::from_millis(500))
        .await;
    assert_eq!(remote(&h, &id).await["rotations"], 1);

    patch(json!({"spec": {"managementPolicy": "Full"}})).await;
    set_trigger(&h, "held", "c").await;
    let remote_key = remote(&h, &id).await;
    assert_eq!(remote_key["description"], "observed edit");
    assert_eq!(remote_key["rotations"], 2);
    assert_no_leaks(&h, &[&before]).await;
    h.stop().await;
}

/// A ValidatingAdmissionPolicy (and its binding) refusing every write of the Secret `name` in
/// the test's namespace, in force when this returns; `lift` removes it.
struct SecretRefusal {
    policies: kube::Api<kube::api::DynamicObject>,
    bindings: kube::Api<kube::api::DynamicObject>,
    name: String,
}

impl SecretRefusal {
    async fn install(h: &Harness, secret: &str) -> Self {
        use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
        let admin = h.env.client.clone();
        let group = "admissionregistration.k8s.io";
        let resource = |kind: &str, plural: &str| {
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", kind), plural)
        };
        let policies = kube::Api::<DynamicObject>::all_with(
            admin.clone(),
            &resource("ValidatingAdmissionPolicy", "validatingadmissionpolicies"),
        );
        let bindings = kube::Api::<DynamicObject>::all_with(
            admin.clone(),
            &resource(
                "ValidatingAdmissionPolicyBinding",
                "validatingadmissionpolicybindings",
            ),
        );
        let name = format!("refuse-{}", h.env.namespace);
        let policy: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {"failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                    "operations": ["CREATE", "UPDATE"], "resources": ["secrets"]}]},
                "validations": [{"expression": format!("object.metadata.name != '{secret}'"),
                                 "message": "this Secret may not be written"}]}}))
        .unwrap();
        let binding: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {"policyName": name, "validationActions": ["Deny"],
                "matchResources": {"namespaceSelector": {"matchLabels":
                    {"kubernetes.io/metadata.name": h.env.namespace}}}}}))
        .unwrap();
        support::create(&policies, &policy).await;
        support::create(&bindings, &binding).await;
        // In force once a dry-run create of the Secret is refused.
        let secrets = h.env.api::<Secret>();
        let probe: Secret = serde_json::from_value(json!({"metadata": {"name": secret}})).unwrap();
        let dry_run = PostParams {
            dry_run: true,
            ..Default::default()
        };
        support::wait_until(WAIT, || async {
            secrets
                .create(&dry_run, &probe)
                .await
                .is_err()
                .then_some(())
        })
        .await
        .expect("the admission policy never took effect");
        Self {
            policies,
            bindings,
            name,
        }
    }

    async fn lift(&self) {
        let _ = self.bindings.delete(&self.name, &Default::default()).await;
        let _ = self.policies.delete(&self.name, &Default::default()).await;
    }
}

/// While Kubernetes refuses the Secret write (an admission policy), an ApiKey stops at
/// `Stalled`, reason `SecretNotWritable`, and leaves no key in the API that no Secret holds:
/// the key whose value could not be stored is deleted, and no other is minted (no
/// replacement, no rotation) until a dry-run write of the Secret passes (issue 27, F13). It
/// used to keep the first key, replace it, then rotate the replacement on every backoff.
#[tokio::test]
async fn a_secret_that_cannot_be_written_mints_no_keys() {
    let h = Harness::start_with("key-unwritable", Duration::from_secs(1)).await;
    let refusal = SecretRefusal::install(&h, "refused-key").await;
    let spec = json!({"name": "refused", "kind": "service", "scopes": ["completions.write"],
                      "secretRef": {"name": "refused-key"}});
    support::create(&h.env.api(), &api_key("refused", spec)).await;
    // Retries (backoff up to the 1 s drift interval) for 15 s.
    tokio::time::sleep(Duration::from_secs(15)).await;
    let named = |keys: Vec<Value>| -> Vec<Value> {
        keys.into_iter()
            .filter(|k| k["name"] == "refused")
            .collect()
    };
    let live: Vec<Value> = named(remote_keys(&h).await)
        .iter()
        .map(|k| json!({"id": k["id"], "rotations": k["rotations"]}))
        .collect();
    let posts = h.count("POST /ai_gw/v2/api-keys/service").await;
    let rotations = h
        .count("POST /ai_gw/v2/api-keys/service/{keyId}/rotate")
        .await;
    eprintln!("live keys {live:?}; creates {posts}; rotations {rotations}");
    assert!(live.is_empty(), "keys no Secret holds: {live:?}");
    // The dry run before the create is refused too: not even a first key is minted.
    assert_eq!(
        posts, 0,
        "keys were minted while the Secret could not be written"
    );
    let message = h
        .condition_message::<ApiKey>("refused", WAIT, ("Stalled", "SecretNotWritable"))
        .await;
    assert!(message.contains("refused-key"), "{message}");
    assert!(
        h.env.get_opt::<Secret>("refused-key").await.is_none(),
        "the refused Secret exists"
    );
    // Once the Secret may be written, one key is created into it.
    refusal.lift().await;
    let ready = h.wait_for::<ApiKey>("refused", WAIT, ready).await;
    let id = ready.status.unwrap().id.unwrap();
    let live = named(remote_keys(&h).await);
    assert_eq!(live.len(), 1, "{live:?}");
    assert_eq!(live[0]["id"], id.as_str());
    let value = secret_value(&h, "refused-key").await;
    assert_eq!(handshake(&h, &id, &value).await, 200);
    h.stop().await;
}

/// Deleted under `Orphan` while a rotation is unfinished (the operator stopped after the rotate
/// call reached the API, before the Secret write): the cleanup makes no API call, keeps the
/// Secret, marks it `aigw.io/unfinished-rotation`, and a Warning says its values may no longer
/// work. (Before, the Secret was released as if its values were sound.)
#[tokio::test]
async fn an_orphan_released_mid_rotation_marks_its_secret_and_warns() {
    let mut h = Harness::start("ak-orphan-rotating").await;
    let mut spec = service_key("mid", json!({"trigger": "a"}));
    spec["deletionPolicy"] = json!("Orphan");
    let id = interrupted_rotation(&mut h, "mid", spec).await;
    let value = secret_value(&h, "mid-key").await;
    let keys = h.env.api::<ApiKey>();
    let rotating = keys.get("mid").await.unwrap().status.unwrap().rotation;
    assert!(
        rotating.pending_rotation.is_some(),
        "the rotation is unfinished when the deletion is asked for"
    );
    keys.delete("mid", &Default::default()).await.unwrap();
    h.reset_stats().await;
    h.restart_operator().await;
    assert!(
        support::gone_within(&keys, "mid", WAIT).await,
        "{}",
        h.env.events_text().await
    );

    assert_eq!(h.remote_writes().await, 0, "{}", h.stats().await);
    assert_eq!(remote(&h, &id).await["rotations"], 1, "the key stays");
    let marked = released_secret(&h, "mid-key").await;
    assert_eq!(
        marked.get("aigw.io/unfinished-rotation"),
        rotating.pending_rotation_since.as_ref(),
        "marked with when the rotation was recorded: {marked:?}"
    );
    assert_eq!(
        secret_value(&h, "mid-key").await,
        value,
        "the values it held"
    );
    let events = h.env.events_text().await;
    assert!(
        events
            .lines()
            .any(|l| l.starts_with("Warning mid UnfinishedRotation: left the Secret mid-key")),
        "{events}"
    );
    assert_no_leaks(&h, &[]).await;
    h.stop().await;
}

/// `managementPolicy: Observe` set while a rotation's answer is lost (the operator stopped after
/// the rotate call, before the Secret write): the key is given up as under Full, but Observe
/// creates no replacement, so the ApiKey stalls saying which key it gave up and that Full
/// replaces it (not "names no remote object"), with no remote write; back to Full, the key is
/// replaced and the given-up one deleted.
#[tokio::test]
async fn observe_says_which_key_a_lost_rotation_gave_up_and_full_replaces_it() {
    let mut h = Harness::start("ak-observe-lost").await;
    let id =
        interrupted_rotation(&mut h, "seen", service_key("seen", json!({"trigger": "a"}))).await;
    h.env
        .patch_spec::<ApiKey>("seen", json!({"managementPolicy": "Observe"}))
        .await;
    h.reset_stats().await;
    h.restart_operator().await;
    // Past the longest call (20 s here), a rotation recorded by another process is given up.
    let stalled = h
        .wait_for::<ApiKey>("seen", Duration::from_secs(90), |k| {
            k.stalled_with("NothingToObserve")
        })
        .await;
    let (_, _, message) = stalled.condition("Stalled").unwrap();
    assert!(
        message.contains(&format!(
            "gave up API key {id}: the answer to its rotation was lost"
        )) && message.contains("Switch to Full"),
        "{}",
        message
    );
    assert!(!message.contains("names no remote object"), "{}", message);
    let status = stalled.status.clone().unwrap();
    assert_eq!(status.replaced_key.as_deref(), Some(id.as_str()));
    assert_eq!(h.remote_writes().await, 0, "{}", h.stats().await);
    assert_eq!(
        remote_keys(&h).await.len(),
        1,
        "the given-up key still works"
    );

    h.env
        .patch_spec::<ApiKey>("seen", json!({"managementPolicy": "Full"}))
        .await;
    let settled = h
        .wait_for::<ApiKey>("seen", WAIT, |k| replaced(k, &id))
        .await;
    let new_id = settled.status.unwrap().id.unwrap();
    let new_key = remote(&h, &new_id).await;
    assert_eq!(
        secret_value(&h, "seen-key").await,
        new_key["key"].as_str().unwrap()
    );
    assert_eq!(
        remote_keys(&h).await.len(),
        1,
        "the given-up key is deleted"
    );
    assert_no_leaks(&h, &[]).await;
    h.stop().await;
}
