//! The replacement of an ApiKey whose rotated value was lost, attacked: a replacement whose
//! own Secret write fails, a deletion under `Orphan` mid-replacement, lost answers during the
//! replacement (one operator and two), and a deletion mid-replacement. At rest one live key per
//! ApiKey, held by its Secret; never a second rotation; never a key nobody holds.

use crate::support;

use std::time::Duration;

use aigw::controller::runtime::failpoints::{
    AFTER_API_KEY_CREATE, AFTER_RECOVERY_DELETE, BEFORE_CREATE_LOOKUP, BEFORE_RECOVERY_DELETE,
};
use aigw::resources::ApiKey;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use support::harness::Harness;

use support::api_keys::*;

fn live_ours(keys: &[Value], name: &str) -> Vec<Value> {
    keys.iter().filter(|k| k["name"] == name).cloned().collect()
}

async fn set_trigger_no_wait(h: &Harness, name: &str, trigger: &str) {
    h.env
        .patch_spec::<ApiKey>(name, json!({"rotation": {"trigger": trigger}}))
        .await;
}

/// Trigger `b` for the ApiKey `name` (key `id`), whose rotate answer is lost after the commit:
/// the API has rotated it once; answers stay lost until the caller clears the faults.
async fn lose_the_rotate_answer(h: &Harness, name: &str, id: &str) {
    h.faults(json!({"error_after_commit_rate": 1.0})).await;
    set_trigger_no_wait(h, name, "b").await;
    support::wait_until(WAIT, || async {
        (remote(h, id).await["rotations"] == 1).then_some(())
    })
    .await
    .expect("the rotate call never happened");
}

/// Once the ApiKey `name` records the key it replaces, the operator dies, answers come back,
/// `name` is deleted and a new operator finishes the deletion.
async fn delete_mid_replacement(h: &mut Harness, name: &str) {
    h.wait_for::<ApiKey>(name, WAIT, |k| {
        k.status.as_ref().is_some_and(|s| s.replaced_key.is_some())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    h.stop_operator().await;
    h.faults(json!({})).await;
    delete_with_a_new_operator(h, name).await;
}

/// Deletes the ApiKey `name` and starts a new operator, which finishes the deletion.
async fn delete_with_a_new_operator(h: &mut Harness, name: &str) {
    h.env.delete::<ApiKey>(name).await;
    h.restart_operator().await;
    let gone = support::wait_until(Duration::from_secs(90), || async {
        h.env.get_opt::<ApiKey>(name).await.is_none().then_some(())
    })
    .await;
    assert!(gone.is_some(), "the ApiKey was never deleted");
}

/// The spec of a service key `name` with `deletionPolicy: Orphan`.
fn orphaning(name: &str) -> Value {
    let mut spec = service_key(name, json!({"trigger": "a"}));
    spec["deletionPolicy"] = json!("Orphan");
    spec
}

/// A lost rotate answer, then the replacement key's own Secret write fails (an immutable
/// Secret): the replaced key stays recorded until it is deleted, and no key piles up.
#[tokio::test]
async fn a_replacement_whose_secret_write_fails_keeps_track_of_the_replaced_key() {
    let h = Harness::start("rep-imm").await;
    let id = create(&h, "imm", service_key("imm", json!({"trigger": "a"}))).await;
    h.env
        .api::<Secret>()
        .patch(
            "imm-key",
            &PatchParams::default(),
            &Patch::Merge(&json!({"immutable": true})),
        )
        .await
        .unwrap();
    lose_the_rotate_answer(&h, "imm", &id).await;
    h.faults(json!({})).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    h.env.delete::<Secret>("imm-key").await;
    let settled = h
        .wait_for::<ApiKey>("imm", Duration::from_secs(90), |k| {
            let s = k.status.as_ref().unwrap();
            ready(k) && s.replaced_key.is_none() && s.rotation.pending_rotation.is_none()
        })
        .await;
    let new_id = settled.status.unwrap().id.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let ours = live_ours(&remote_keys(&h).await, "imm");
    assert_eq!(
        ours.len(),
        1,
        "one live key for one ApiKey at rest: {ours:?}"
    );
    assert_eq!(ours[0]["id"], new_id.as_str());
    let value = secret_value(&h, "imm-key").await;
    assert_eq!(handshake(&h, &new_id, &value).await, 200);
    h.stop().await;
}

/// Deleted under `Orphan` while its replacement's create is unfinished: the Secret is kept with
/// a value that works (the replaced key's), and the key the unfinished create made goes.
#[tokio::test]
async fn an_orphaned_api_key_mid_replacement_keeps_a_live_secret_and_no_stray_key() {
    let mut h = Harness::start("rep-orph").await;
    let id = create(&h, "orph", orphaning("orph")).await;
    lose_the_rotate_answer(&h, "orph", &id).await;
    delete_mid_replacement(&mut h, "orph").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let value = secret_value(&h, "orph-key").await;
    assert_eq!(
        handshake(&h, &id, &value).await,
        200,
        "the kept Secret holds a live key"
    );
    let ours = live_ours(&remote_keys(&h).await, "orph");
    for key in &ours {
        assert_eq!(
            key["id"],
            id.as_str(),
            "a key no Secret holds was left: {key}"
        );
    }
    h.stop().await;
}

/// Deleted under `Orphan` when the replacement's create had delivered its key but not recorded
/// it (the operator died between the Secret write and the status write, forged here: the
/// replacement's POST answer is lost and the test writes its key into the Secret as the
/// operator would have). The kept Secret holds the replacement's key, so that key stays live;
/// the replaced key, which nothing holds any more, goes. Before, the lookup's key was deleted
/// as if nothing held it, and the kept Secret held a dead value.
#[tokio::test]
async fn an_orphaned_api_key_whose_secret_holds_the_unrecorded_replacement_keeps_it_live() {
    let h = Harness::start("rep-held").await;
    orphaned_with_the_replacement_delivered(h, orphaning("held")).await;
}

/// The same with a key nothing proves the replacement's (a spec `description` leaves no mark)
/// in a namespace that may not adopt: the lookup cannot take it, yet the Secret names it, so it
/// stays, and the replaced key, whose value the Secret no longer holds, still goes.
#[tokio::test]
async fn an_orphaned_api_key_whose_secret_holds_an_unproven_replacement_keeps_it_live() {
    let grants = json!([{"namespaces": ["{ns}"]}]);
    let h = Harness::start_with_grants("rep-heldu", Duration::from_secs(600), grants).await;
    let mut spec = orphaning("held");
    spec["description"] = json!("the payments team's key");
    orphaned_with_the_replacement_delivered(h, spec).await;
}

async fn orphaned_with_the_replacement_delivered(mut h: Harness, spec: Value) {
    let id = create(&h, "held", spec).await;
    // The rotate answer is lost, then the replacement's create answer; the list the lookup
    // reads answers 503, so the replacement stays unrecorded.
    let lost = json!({
        "drop_after_commit_once": [format!("POST {SERVICE_KEYS}/{{keyId}}/rotate"), format!("POST {SERVICE_KEYS}")],
        "failing_routes": {format!("GET {SERVICE_KEYS}"): 503},
    });
    h.faults(lost).await;
    set_trigger_no_wait(&h, "held", "b").await;
    let replacement = support::wait_until(WAIT, || async {
        let keys = live_ours(&remote_keys(&h).await, "held");
        keys.into_iter().find(|k| k["id"] != id.as_str())
    })
    .await
    .expect("the replacement's create never reached the API");
    h.stop_operator().await;
    h.faults(json!({})).await;
    let (new_id, value) = (
        replacement["id"].as_str().unwrap(),
        replacement["key"].as_str().unwrap(),
    );
    let delivered = json!({
        "metadata": {"annotations": {"aigw.io/api-key-id": new_id}},
        "stringData": {"api_key": value},
    });
    let secrets = h.env.api::<Secret>();
    let patch = Patch::Merge(&delivered);
    secrets
        .patch("held-key", &PatchParams::default(), &patch)
        .await
        .unwrap();
    // The intent is the annotation (the status shows it once a failure is recorded).
    let unrecorded = h.env.get::<ApiKey>("held").await;
    let annotations = unrecorded.metadata.annotations.unwrap_or_default();
    assert!(annotations.contains_key("aigw.io/create-intent"));
    assert_eq!(unrecorded.status.unwrap().id, None);
    delete_with_a_new_operator(&mut h, "held").await;
    let kept = secret_value(&h, "held-key").await;
    assert_eq!(kept, value);
    assert_eq!(
        handshake(&h, new_id, &kept).await,
        200,
        "the kept Secret's key is dead"
    );
    let ours = live_ours(&remote_keys(&h).await, "held");
    h.stop().await;
    let ids: Vec<&Value> = ours.iter().map(|k| &k["id"]).collect();
    assert_eq!(ids, [new_id], "one live key, the one the Secret holds");
}

async fn lost_answers_during_replacement(two: bool, prefix: &str) {
    let h = Harness::start(prefix).await;
    let id = create(&h, "lost", service_key("lost", json!({"trigger": "a"}))).await;
    let second = if two {
        h.second_operator()
    } else {
        tokio::spawn(async {})
    };
    h.reset_stats().await;
    lose_the_rotate_answer(&h, "lost", &id).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    h.faults(json!({})).await;
    let settled = h
        .wait_for::<ApiKey>("lost", Duration::from_secs(120), |k| {
            let s = k.status.as_ref().unwrap();
            ready(k)
                && s.replaced_key.is_none()
                && s.rotation.pending_rotation.is_none()
                && s.id.as_deref().is_some_and(|n| n != id)
        })
        .await;
    let new_id = settled.status.unwrap().id.unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await;
    let rotate = format!("POST {SERVICE_KEYS}/{{keyId}}/rotate");
    let ours = live_ours(&remote_keys(&h).await, "lost");
    let value = secret_value(&h, "lost-key").await;
    second.abort();
    assert_eq!(ours.len(), 1, "one live key at rest: {ours:?}");
    assert_eq!(ours[0]["key"], value.as_str());
    assert_eq!(handshake(&h, &new_id, &value).await, 200);
    assert_eq!(h.count(&rotate).await, 1, "no second rotation");
    h.stop().await;
}

/// Lost answers during the replacement too: the replaced key, of the same name and body, is
/// never taken for the replacement's own create.
#[tokio::test]
async fn lost_answers_during_a_replacement_end_with_one_live_key() {
    lost_answers_during_replacement(false, "rep-lost1").await
}

#[tokio::test]
async fn lost_answers_during_a_replacement_with_two_operators_end_with_one_live_key() {
    lost_answers_during_replacement(true, "rep-lost2").await
}

/// Creates the ApiKey `name` with the harness's operator frozen right after the create's
/// answer (before its Secret write); returns the id of the key it made.
async fn made_by_a_frozen_creator(h: &Harness, name: &str) -> String {
    made_by_a_frozen_creator_of(h, name, service_key(name, json!({"trigger": "a"}))).await
}

async fn made_by_a_frozen_creator_of(h: &Harness, name: &str, spec: Value) -> String {
    h.ctx.failpoints.arm(AFTER_API_KEY_CREATE);
    support::create(&h.env.api(), &api_key(name, spec)).await;
    let made = support::wait_until(WAIT, || async {
        live_ours(&remote_keys(h).await, name).first().cloned()
    });
    let made = made
        .await
        .expect("the first operator never created the key");
    made["id"].as_str().unwrap().to_string()
}

/// Waits until the operator of `cx` is frozen at `point`.
async fn reached(cx: &aigw::controller::Context, point: &str) {
    support::wait_until(WAIT, || async {
        cx.failpoints.reached(point).then_some(())
    })
    .await
    .unwrap_or_else(|| panic!("the second operator never reached {point}"))
}

/// At rest, the ApiKey `name` (recording `id`) has one live key, `id`, and its Secret holds
/// its value.
async fn one_live_key_held(h: &Harness, name: &str, id: &str) {
    let live = live_ours(&remote_keys(h).await, name);
    let value = secret_value(h, &format!("{name}-key")).await;
    assert_eq!(live.len(), 1, "one live key at rest: {live:?}");
    assert_eq!(live[0]["id"], id);
    assert_eq!(
        handshake(h, id, &value).await,
        200,
        "the recorded key is dead"
    );
}

/// A create unfinished, not lost: one operator holds its answer (frozen before the Secret
/// write) while a second one, taking the create for lost, deletes the key to replace it and
/// stalls right after the DELETE. When the first resumes, its delivery fails (the second fenced
/// the Secret before the DELETE): it never stores and records the deleted key.
#[tokio::test]
async fn a_key_another_operators_recovery_deleted_is_never_delivered() {
    let h = Harness::start("rep-fence").await;
    let made = made_by_a_frozen_creator(&h, "fenced").await;
    let (second, b) = h.second_operator_armed(&[AFTER_RECOVERY_DELETE]);
    reached(&b, AFTER_RECOVERY_DELETE).await;
    assert!(live_ours(&remote_keys(&h).await, "fenced").is_empty());
    h.ctx.failpoints.release(AFTER_API_KEY_CREATE);
    let settled = h
        .wait_for::<ApiKey>("fenced", Duration::from_secs(90), ready)
        .await;
    let id = settled.status.unwrap().id.unwrap();
    assert_ne!(made, id, "the deleted key was recorded");
    one_live_key_held(&h, "fenced", &id).await;
    second.abort();
    // The Secret the fence created is aigw's: the failed delivery retries, blaming no one.
    let events = h.env.events_text().await;
    assert!(!events.contains("SecretConflict"), "{events}");
    h.stop().await;
}

/// An `Orphan` ApiKey deleted while its Secret holds nothing but a recovery's fence: the empty
/// Secret is not released (kept forever, empty, blocking the name); it goes with the resource.
#[tokio::test]
async fn an_orphaned_api_key_leaves_no_empty_fenced_secret_behind() {
    let mut h = Harness::start("rep-fence5").await;
    made_by_a_frozen_creator_of(&h, "emptied", orphaning("emptied")).await;
    let (second, b) = h.second_operator_armed(&[AFTER_RECOVERY_DELETE]);
    reached(&b, AFTER_RECOVERY_DELETE).await;
    let uid = h
        .env
        .get_opt::<ApiKey>("emptied")
        .await
        .unwrap()
        .uid()
        .unwrap();
    delete_with_a_new_operator(&mut h, "emptied").await;
    second.abort();
    let secret = h.env.api::<Secret>().get("emptied-key").await.unwrap();
    assert!(
        secret.data.as_ref().is_none_or(|d| d.is_empty()),
        "only the fence wrote it"
    );
    let owners: Vec<String> = secret
        .owner_references()
        .iter()
        .map(|o| o.uid.clone())
        .collect();
    assert_eq!(owners, [uid], "the empty Secret goes with its ApiKey");
    h.stop().await;
}

/// The same race, another way: the second operator is frozen before its DELETE (after its
/// fences), and the first one's own DELETE of the key is refused once its Secret write fails,
/// so it keeps the key (a rotation owed). Once the second operator deletes the key, what
/// settles holds a live key: the first never stored and recorded the key about to be deleted.
#[tokio::test]
async fn a_key_another_operators_recovery_is_deleting_is_never_recorded() {
    let h = Harness::start("rep-fence2").await;
    let made = made_by_a_frozen_creator(&h, "fenced2").await;
    let (second, b) = h.second_operator_armed(&[BEFORE_RECOVERY_DELETE]);
    reached(&b, BEFORE_RECOVERY_DELETE).await;
    let delete = format!("DELETE {SERVICE_KEYS}/{{keyId}}");
    h.faults(json!({"failing_routes": {delete: 400}})).await;
    h.ctx.failpoints.release(AFTER_API_KEY_CREATE);
    tokio::time::sleep(Duration::from_secs(3)).await;
    h.faults(json!({})).await;
    b.failpoints.release(BEFORE_RECOVERY_DELETE);
    let settled = h
        .wait_for::<ApiKey>("fenced2", Duration::from_secs(90), ready)
        .await;
    let id = settled.status.unwrap().id.unwrap();
    assert_ne!(made, id, "the deleted key was recorded");
    one_live_key_held(&h, "fenced2", &id).await;
    second.abort();
    h.stop().await;
}

/// The race mid-replacement, where the Secret exists (it holds the replaced key's value): the
/// fence must move its version, or the frozen creator's delivery would overwrite the replaced
/// key's working value with the replacement key the second operator deleted.
#[tokio::test]
async fn a_replacement_another_operators_recovery_deleted_never_reaches_the_secret() {
    let h = Harness::start("rep-fence4").await;
    let replaced = create(&h, "midway", service_key("midway", json!({"trigger": "a"}))).await;
    let value = secret_value(&h, "midway-key").await;
    h.ctx.failpoints.arm(AFTER_API_KEY_CREATE);
    lose_the_rotate_answer(&h, "midway", &replaced).await;
    h.faults(json!({})).await;
    // The rotation is given up and the replacement created; its answer is held.
    let made = support::wait_until(WAIT, || async {
        let keys = live_ours(&remote_keys(&h).await, "midway");
        keys.into_iter().find(|k| k["id"] != replaced.as_str())
    });
    let made = made.await.expect("the replacement was never created");
    let (second, b) = h.second_operator_armed(&[AFTER_RECOVERY_DELETE]);
    reached(&b, AFTER_RECOVERY_DELETE).await;
    h.ctx.failpoints.release(AFTER_API_KEY_CREATE);
    let secrets = h.env.api::<Secret>();
    for _ in 0..30 {
        let secret = secrets.get("midway-key").await.unwrap();
        let named = secret.annotations().get("aigw.io/api-key-id").cloned();
        assert_ne!(
            named.as_deref(),
            made["id"].as_str(),
            "the deleted key reached the Secret"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let settled = h
        .wait_for::<ApiKey>("midway", Duration::from_secs(90), |k| {
            let s = k.status.as_ref().unwrap();
            ready(k) && s.replaced_key.is_none() && s.id.as_deref() != Some(replaced.as_str())
        })
        .await;
    let id = settled.status.unwrap().id.unwrap();
    assert_ne!(made["id"], id.as_str(), "the deleted key was recorded");
    assert_ne!(secret_value(&h, "midway-key").await, value);
    one_live_key_held(&h, "midway", &id).await;
    second.abort();
    h.stop().await;
}

/// A recovery from a stale view: the second operator read the ApiKey while its create was
/// unanswered and stalls; meanwhile the first records the key, the user deletes the Secret and
/// asks for a new value (trigger `b`). The stale recovery finds the key, not in the (missing)
/// Secret, and would delete it just after the first rotated it into the Secret. It writes the
/// intent again first, conditional on its view: that fails, so it deletes nothing, and the
/// rotated key stays live.
#[tokio::test]
async fn a_recovery_from_a_stale_view_never_deletes_a_key_rotated_since() {
    let h = Harness::start("rep-fence3").await;
    let made = made_by_a_frozen_creator(&h, "stale").await;
    let armed = [BEFORE_CREATE_LOOKUP, BEFORE_RECOVERY_DELETE];
    let (second, b) = h.second_operator_armed(&armed);
    reached(&b, BEFORE_CREATE_LOOKUP).await;
    h.ctx.failpoints.release(AFTER_API_KEY_CREATE);
    h.wait_for::<ApiKey>("stale", WAIT, |k| {
        ready(k) && k.status.as_ref().and_then(|s| s.id.as_deref()) == Some(made.as_str())
    })
    .await;
    let secrets = h.env.api::<Secret>();
    secrets
        .delete("stale-key", &Default::default())
        .await
        .unwrap();
    support::wait_until(WAIT, || async {
        secrets
            .get_opt("stale-key")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await
    .expect("the Secret was never deleted");
    b.failpoints.release(BEFORE_CREATE_LOOKUP);
    // The stale recovery fences the Secret (creating it, empty) before anything else.
    support::wait_until(WAIT, || async {
        secrets.get_opt("stale-key").await.unwrap().map(|_| ())
    })
    .await
    .expect("the stale recovery never fenced the Secret");
    tokio::time::sleep(Duration::from_secs(2)).await;
    set_trigger_no_wait(&h, "stale", "b").await;
    let rotated = h
        .wait_for::<ApiKey>("stale", WAIT, |k| {
            let rotated = k
                .status
                .as_ref()
                .map(|s| &s.rotation.observed_rotation_trigger);
            ready(k) && rotated.is_some_and(|t| t.as_deref() == Some("b"))
        })
        .await;
    b.failpoints.release(BEFORE_RECOVERY_DELETE);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let id = rotated.status.unwrap().id.unwrap();
    assert_eq!(id, made, "the key is rotated, not replaced");
    one_live_key_held(&h, "stale", &id).await;
    second.abort();
    h.stop().await;
}

/// Deleted (policy Delete) mid-replacement: no key is left.
#[tokio::test]
async fn an_api_key_deleted_mid_replacement_leaves_no_key() {
    let mut h = Harness::start("rep-del").await;
    let id = create(&h, "del", service_key("del", json!({"trigger": "a"}))).await;
    lose_the_rotate_answer(&h, "del", &id).await;
    delete_mid_replacement(&mut h, "del").await;
    let ours = live_ours(&remote_keys(&h).await, "del");
    assert!(
        ours.is_empty(),
        "keys left live after a Delete-policy deletion: {ours:?}"
    );
    h.stop().await;
}

/// A rotate call the API refuses (a 400: it surely did not rotate) is not taken for a lost
/// answer: nothing is replaced (the refusal stalls, as a permanent error does), and the next
/// trigger rotates the same key, once, its id kept and its new value in the Secret.
#[tokio::test]
async fn a_refused_rotate_call_is_made_again_and_never_replaces_the_key() {
    let h = Harness::start("rep-refused").await;
    let id = create(
        &h,
        "refused",
        service_key("refused", json!({"trigger": "a"})),
    )
    .await;
    let rotate = format!("POST {SERVICE_KEYS}/{{keyId}}/rotate");
    h.faults(json!({"failing_routes": {rotate: 400}})).await;
    set_trigger_no_wait(&h, "refused", "b").await;
    tokio::time::sleep(Duration::from_secs(8)).await;
    let refused = h.env.api::<ApiKey>().get("refused").await.unwrap();
    let status = refused.status.unwrap();
    assert_eq!(status.id.as_deref(), Some(id.as_str()), "not replaced");
    assert!(status.replaced_key.is_none(), "not replaced: {status:?}");
    assert_eq!(live_ours(&remote_keys(&h).await, "refused").len(), 1);

    // A refusal stalls this generation, as any permanent error does: the next trigger asks
    // again, and rotates the same key.
    h.faults(json!({})).await;
    set_trigger_no_wait(&h, "refused", "c").await;
    let rotated = h
        .wait_for::<ApiKey>("refused", Duration::from_secs(60), |k| {
            let s = k.status.as_ref().unwrap();
            ready(k)
                && s.rotation.observed_rotation_trigger.as_deref() == Some("c")
                && s.rotation.pending_rotation.is_none()
        })
        .await;
    assert_eq!(rotated.status.unwrap().id.as_deref(), Some(id.as_str()));
    assert_eq!(remote(&h, &id).await["rotations"], 1, "rotated once");
    let ours = live_ours(&remote_keys(&h).await, "refused");
    assert_eq!(ours.len(), 1, "one live key: {ours:?}");
    let value = secret_value(&h, "refused-key").await;
    assert_eq!(handshake(&h, &id, &value).await, 200);
    h.stop().await;
}
