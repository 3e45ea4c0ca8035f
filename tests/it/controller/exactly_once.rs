//! Exactly once under races, lost and unreadable answers, hidden objects and normalising
//! servers: one focused test per way the promise used to break (issue 8), against the real
//! apiserver and the emulator with its faults switched on.

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aigw::resources::common::CreateIntent;
use aigw::resources::config::ConfigStatus;
use aigw::resources::{ApiKey, Config, Deployment, RateLimitsPolicy, UsageLimitsPolicy};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use support::NamespacedKind;
use support::endpoints::{CONFIG_POST, DEPLOYMENT_POST, DEPLOYMENT_PUT};
use support::harness::{CallWindows, Harness};
use support::objects::{
    Conditions, Rotates, create, gateway, limits, remote_limits, rotating_gateway, routing,
};
use support::proxy::{Received, json_answer, proxy, refusal};

const WAIT: Duration = Duration::from_secs(60);

async fn remote_deployment(h: &Harness, id: &str) -> Value {
    h.remote_record("deployments", "id", id).await
}

async fn client_auth(h: &Harness, secret: &str) -> String {
    let secret = h.env.api::<Secret>().get(secret).await.unwrap();
    let data = secret.data.unwrap();
    String::from_utf8(data["client_auth"].0.clone()).unwrap()
}

/// Creates `name` with `spec` while the emulator's `faults` are on; returns once its create
/// reached `endpoint` ("POST /template").
async fn create_under<K: NamespacedKind>(
    h: &Harness,
    faults: Value,
    (name, spec): (&str, Value),
    endpoint: &str,
) {
    h.faults(faults).await;
    create::<K>(&h.env, name, spec).await;
    support::wait_until(WAIT, || async {
        (h.count(endpoint).await >= 1).then_some(())
    })
    .await
    .expect("the create was sent");
}

/// Switches the emulator's faults off; `name` once it is Ready within `within`.
async fn ready_once_healed<K: NamespacedKind + Conditions>(
    h: &Harness,
    name: &str,
    within: Duration,
) -> K {
    h.faults(json!({})).await;
    h.wait_for::<K>(name, within, |o| o.ready()).await
}

/// Waits until `name`, whose create answer was lost, is held as `CreateOutcomeUnknown` by an
/// incomplete list, failing at once on a second POST to `endpoint`; then checks for a while
/// that none is made.
async fn held_as_unknown<K: NamespacedKind + Conditions>(h: &Harness, name: &str, endpoint: &str) {
    let api = h.env.api::<K>();
    let held = support::wait_until(WAIT, || async {
        if h.count(endpoint).await > 1 {
            return Some(false);
        }
        let object = api.get_opt(name).await.ok()??;
        let incomplete = object
            .condition("Ready")
            .is_some_and(|(_, _, message)| message.contains("incomplete"));
        (object.not_ready_with("CreateOutcomeUnknown") && incomplete).then_some(true)
    })
    .await;
    let stats = h.stats().await;
    assert_ne!(held, Some(false), "a second POST on a guess: {stats}");
    assert_eq!(
        held,
        Some(true),
        "never held by an incomplete list: {stats}"
    );
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(h.count(endpoint).await, 1, "a second POST on a guess");
}

/// The status of Config `name`, whose create answer was lost, once a capped list has held it
/// as `CreateOutcomeUnknown` a while with no second POST.
async fn held_by_a_capped_list(h: &Harness, name: &str) -> Option<ConfigStatus> {
    held_as_unknown::<Config>(h, name, CONFIG_POST).await;
    h.env.get::<Config>(name).await.status
}

/// Heals the emulator; Config `name` then ends Ready, made by its one POST.
async fn made_once_when_healed(h: &Harness, name: &str) {
    ready_once_healed::<Config>(h, name, WAIT).await;
    assert_eq!(h.remote_records("configs", "name", name).await.len(), 1);
    assert_eq!(h.count(CONFIG_POST).await, 1);
}

#[tokio::test]
async fn two_operators_racing_create_each_config_once() {
    let h = Harness::start_with("eo-race", Duration::from_secs(2)).await;
    let _second = h.second_operator();
    for i in 0..10 {
        let name = format!("race-{i}");
        create::<Config>(&h.env, &name, routing(&name)).await;
    }
    for i in 0..10 {
        h.wait_for::<Config>(&format!("race-{i}"), WAIT, |c| c.ready())
            .await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    for i in 0..10 {
        let found = h
            .remote_records("configs", "name", &format!("race-{i}"))
            .await;
        assert_eq!(found.len(), 1, "race-{i}: {found:?}");
    }
    assert_eq!(h.count(CONFIG_POST).await, 10, "{}", h.stats().await);
    h.stop().await;
}

#[tokio::test]
async fn a_lost_create_answer_never_claims_an_older_namesake() {
    let h = Harness::start_with("eo-namesake", Duration::from_secs(2)).await;
    let seeded = h
        .post(
            "/_emulator/seed",
            json!({"configs": [{"name": "shared", "created_at": "2026-01-01T00:00:00Z",
                                     "config": {"retry": {"attempts": 1}}}]}),
        )
        .await;
    let namesake = seeded["configs"][0]["id"].as_str().unwrap().to_string();
    let lost = json!({"drop_after_commit_rate": 1.0});
    create_under::<Config>(&h, lost, ("shared", routing("shared")), CONFIG_POST).await;
    let ready = ready_once_healed::<Config>(&h, "shared", WAIT).await;
    let ours = ready.status.unwrap().id.unwrap();
    assert_ne!(ours, namesake, "the older namesake was claimed");
    let found = h.remote_records("configs", "name", "shared").await;
    assert_eq!(found.len(), 2, "the namesake and ours: {found:?}");
    let untouched = found.iter().find(|c| c["id"] == namesake.as_str()).unwrap();
    assert_eq!(untouched["versions"], 1, "the namesake was overwritten");
    assert_eq!(h.count(CONFIG_POST).await, 1);
    h.stop().await;
}

#[tokio::test]
async fn a_capped_list_is_never_proof_of_absence() {
    let h = Harness::start_with("eo-capped", Duration::from_secs(2)).await;
    let lost = json!({"drop_after_commit_rate": 1.0});
    create_under::<Config>(&h, lost, ("capped", routing("capped")), CONFIG_POST).await;
    // The answer was lost; now the list is capped below its total.
    h.faults(json!({"list_cap": 0})).await;
    held_by_a_capped_list(&h, "capped").await;
    made_once_when_healed(&h, "capped").await;
    h.stop().await;
}

/// A config list answered without `total` (the spec's shape, `{success, data}`) and cut short
/// proves nothing either: nothing in it says the rows are all.
#[tokio::test]
async fn a_capped_list_without_total_is_never_proof_of_absence() {
    let h = Harness::start_with("eo-capped-untold", Duration::from_secs(2)).await;
    let lost = json!({"drop_after_commit_rate": 1.0});
    create_under::<Config>(&h, lost, ("untold", routing("untold")), CONFIG_POST).await;
    h.faults(json!({"list_cap": 0, "list_without_total": true}))
        .await;
    held_by_a_capped_list(&h, "untold").await;
    made_once_when_healed(&h, "untold").await;
    h.stop().await;
}

/// A paged list that answers without `total` proves nothing once it spans pages. A hundred older
/// policies fill the server's first page (the lookup names no `page_size`), and the one a lost
/// create made is on the second: a full first page taken for the whole list would prove it
/// absent, and a second POST would make a second policy over the same traffic. Read to its empty
/// page the listing shows the policy, but nothing counts its rows, so the match is not taken
/// for ours either (another namesake could hide among rows it left out): the resource holds
/// until the list is told whole again, then takes it.
#[tokio::test]
async fn a_paged_list_without_total_is_read_to_its_empty_page() {
    held_behind_a_full_page("eo-no-total", json!({"list_without_total": true})).await;
}

/// Rows that shift between two page reads, the count unchanged, skip a row without a repeat:
/// the policy a lost create made opens the second page, and while the first page is read one of
/// its rows leaves the list and another joins at the end, so ours moves onto the page already
/// read. A listing that spans pages proves absence only when a second reading gives the same
/// rows; one that took a single reading for the list would POST a second policy.
#[tokio::test]
async fn rows_shifting_between_pages_never_prove_absence() {
    held_behind_a_full_page("eo-churn", json!({"list_churn": true})).await;
}

/// A RateLimitsPolicy whose create answer is lost behind a hundred older policies (a full first
/// page), its lookup answered under `faults` (on from the create on): held as
/// `CreateOutcomeUnknown` with no second POST, then, the faults healed, Ready with the one
/// policy its POST made.
async fn held_behind_a_full_page(prefix: &str, faults: Value) {
    const POST: &str = "POST /ai_gw/v2/policies/rate-limits";
    let h = Harness::start_with(prefix, Duration::from_secs(2)).await;
    let older: Vec<Value> = (0..100)
        .map(|n| remote_limits(&format!("older-{n}"), n))
        .collect();
    h.post("/_emulator/seed", json!({ "rate_limits": older }))
        .await;
    let mut lost = faults.clone();
    lost["drop_after_commit_rate"] = json!(1.0);
    create_under::<RateLimitsPolicy>(&h, lost, ("policy", limits("policy")), POST).await;
    h.faults(faults).await;
    held_as_unknown::<RateLimitsPolicy>(&h, "policy", POST).await;
    let ready = ready_once_healed::<RateLimitsPolicy>(&h, "policy", WAIT).await;
    assert_eq!(h.count(POST).await, 1, "{}", h.stats().await);
    let found = h.remote_records("rate_limits", "name", "policy").await;
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(ready.status.unwrap().id.as_deref(), found[0]["id"].as_str());
    h.stop().await;
}

#[tokio::test]
async fn a_capped_list_never_proves_an_unmarked_match_ours() {
    let h = Harness::start_with("eo-capped-one", Duration::from_secs(2)).await;
    let lost = json!({"drop_after_commit_rate": 1.0});
    create_under::<Config>(&h, lost, ("seen", routing("seen")), CONFIG_POST).await;
    // A config made after ours: a list capped at one row shows ours and leaves this one out.
    // A config keeps no marker of its create, so the one namesake in sight proves nothing while
    // another could hide among the rows left out.
    h.post(
        "/_emulator/seed",
        json!({"configs": [{"name": "bystander", "config": {"retry": {"attempts": 1}}}]}),
    )
    .await;
    h.faults(json!({"list_cap": 1})).await;
    let held = held_by_a_capped_list(&h, "seen").await;
    assert!(
        held.as_ref().is_some_and(|s| s.id.is_none()),
        "the match in a capped list was taken: {held:?}"
    );
    made_once_when_healed(&h, "seen").await;
    h.stop().await;
}

#[tokio::test]
async fn an_unreadable_create_answer_loses_neither_object_nor_credentials() {
    let h = Harness::start_with("eo-garbage", Duration::from_secs(2)).await;
    let garbage = json!({"garbage_2xx_rate": 1.0});
    let spec = gateway("gw-garbage", "gw-creds");
    create_under::<Deployment>(&h, garbage, ("gw", spec), DEPLOYMENT_POST).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let ready = ready_once_healed::<Deployment>(&h, "gw", WAIT).await;
    let id = ready.status.unwrap().id.unwrap();
    assert_eq!(h.count(DEPLOYMENT_POST).await, 1, "one registration");
    let live = client_auth(&h, "gw-creds").await;
    assert_eq!(
        h.handshake(&id, &live).await,
        200,
        "the Secret holds live credentials"
    );
    let remote = remote_deployment(&h, &id).await;
    assert_eq!(
        remote["tags"]["aigw.io/uid"],
        ready.metadata.uid.unwrap().as_str()
    );
    h.stop().await;
}

#[tokio::test]
async fn a_create_answer_without_slug_is_followed_by_id() {
    let h = Harness::start_with("eo-noslug", Duration::from_secs(1)).await;
    h.faults(json!({"create_without_slug": true})).await;
    create::<Config>(&h.env, "noslug", routing("noslug")).await;
    let with_slug = h
        .wait_for::<Config>("noslug", WAIT, |c| {
            c.ready() && c.status.as_ref().is_some_and(|s| s.slug.is_some())
        })
        .await;
    let remote = h.remote_records("configs", "name", "noslug").await;
    assert_eq!(remote.len(), 1);
    assert_eq!(
        with_slug.status.unwrap().slug.as_deref(),
        remote[0]["slug"].as_str()
    );
    assert_eq!(h.count(CONFIG_POST).await, 1);
    h.stop().await;
}

#[tokio::test]
async fn ab03_means_out_of_scope_never_gone() {
    let h = Harness::start_with("eo-ab03", Duration::from_secs(1)).await;
    h.faults(json!({"missing_as_ab03": true})).await;
    let ready = {
        create::<Config>(&h.env, "scoped", routing("scoped")).await;
        h.wait_for::<Config>("scoped", WAIT, |c| c.ready()).await
    };
    let slug = ready.status.unwrap().slug.unwrap();
    h.delete(&format!("/ai_gw/v2/configs/{slug}")).await;
    h.wait_for::<Config>("scoped", WAIT, |c| c.stalled_with("NotVisible"))
        .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(h.count(CONFIG_POST).await, 1, "recreated on an AB03");
    // A 404 does mean gone: the config aigw created is made again.
    ready_once_healed::<Config>(&h, "scoped", WAIT).await;
    assert_eq!(h.count(CONFIG_POST).await, 2);
    h.stop().await;
}

#[tokio::test]
async fn an_adopted_object_that_comes_into_scope_recovers_without_a_spec_change() {
    let h = Harness::start_with("eo-scope", Duration::from_secs(1)).await;
    h.faults(json!({"missing_as_ab03": true})).await;
    let mut spec = routing("later");
    spec["slug"] = json!("pc-later-1");
    create::<Config>(&h.env, "later", spec).await;
    h.wait_for::<Config>("later", WAIT, |c| c.stalled_with("NotVisible"))
        .await;
    h.post(
        "/_emulator/seed",
        json!({"configs": [{"name": "later", "slug": "pc-later-1",
                                 "config": routing("later")["config"]}]}),
    )
    .await;
    h.wait_for::<Config>("later", WAIT, |c| c.ready()).await;
    assert_eq!(h.count(CONFIG_POST).await, 0);
    h.stop().await;
}

#[tokio::test]
async fn a_rotation_whose_answer_is_lost_finishes_with_live_credentials() {
    let h = Harness::start_with("eo-rotate", Duration::from_secs(2)).await;
    let spec = rotating_gateway("gw-rotate", "rot-creds", "a");
    let deployments = h.env.api::<Deployment>();
    create::<Deployment>(&h.env, "rot", spec).await;
    let ready = h.wait_for::<Deployment>("rot", WAIT, |d| d.ready()).await;
    let id = ready.status.unwrap().id.unwrap();
    // The rotation commits but its answer does not parse: on the old code a permanent
    // decode error stalled the rotation until the spec changed.
    h.faults(json!({"garbage_2xx_rate": 1.0})).await;
    h.env
        .patch_spec::<Deployment>("rot", json!({"rotation": {"trigger": "b"}}))
        .await;
    support::wait_until(WAIT, || async {
        (h.count(DEPLOYMENT_PUT).await >= 1).then_some(())
    })
    .await
    .expect("the rotation was sent");
    // Keep the faults on only briefly: each failure doubles the backoff.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pending = deployments.get("rot").await.unwrap();
    assert!(
        pending
            .status
            .as_ref()
            .unwrap()
            .rotation
            .pending_rotation
            .is_some(),
        "the rotation is still in flight"
    );
    assert!(
        pending
            .condition("Stalled")
            .is_none_or(|(status, _, _)| status != "True"),
        "a started rotation never stalls: {:?}",
        pending.condition("Stalled")
    );
    h.faults(json!({})).await;
    let lost = h.count(DEPLOYMENT_PUT).await;
    let done = h.wait_for::<Deployment>("rot", WAIT, |d| d.settled()).await;
    assert_eq!(
        done.status
            .unwrap()
            .rotation
            .observed_rotation_trigger
            .as_deref(),
        Some("b")
    );
    let live = client_auth(&h, "rot-creds").await;
    assert_eq!(h.handshake(&id, &live).await, 200);
    // Each lost answer may have rotated (its values are gone with it), so each is followed by
    // one more rotation; once an answer arrives, nothing rotates again.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rotations = remote_deployment(&h, &id).await["rotations"]
        .as_u64()
        .unwrap();
    h.assert_count(DEPLOYMENT_PUT, lost + 1).await;
    assert_eq!(
        rotations,
        lost + 1,
        "one rotation per PUT, none after the answer arrived"
    );
    h.stop().await;
}

#[tokio::test]
async fn deleting_needs_no_connection_when_no_call_is_needed() {
    let h = Harness::start("eo-noconn").await;
    let mut orphan = routing("orphan");
    orphan["connectionRef"] = json!({"name": "does-not-exist"});
    orphan["deletionPolicy"] = "Orphan".into();
    let mut never = routing("never");
    never["connectionRef"] = json!({"name": "does-not-exist"});
    for (name, spec) in [("orphan", orphan), ("never", never)] {
        create::<Config>(&h.env, name, spec).await;
        h.wait_for::<Config>(name, WAIT, |c| c.not_ready_with("ConnectionUnavailable"))
            .await;
        h.env.delete_and_wait::<Config>(name, WAIT).await;
    }
    h.stop().await;
}

#[tokio::test]
async fn an_adopted_deployment_without_credentials_is_ready_and_follows_the_gateway() {
    let h = Harness::start_with("eo-adopt", Duration::from_secs(1)).await;
    let id = h.seed_deployment("legacy", "production").await;
    let mut spec = gateway("legacy", "not-issued-yet");
    spec["type"] = "production".into();
    spec["deploymentId"] = json!(id);
    create::<Deployment>(&h.env, "legacy", spec).await;
    let ready = h
        .wait_for::<Deployment>("legacy", WAIT, |d| d.ready())
        .await;
    let (available, reason, _) = ready.condition("CredentialsAvailable").unwrap();
    assert_eq!(
        (available.as_str(), reason.as_str()),
        ("False", "NotIssued")
    );
    h.post(
        &format!("/_emulator/deployments/{id}/connection"),
        json!({"connection_status": "unhealthy"}),
    )
    .await;
    h.wait_for::<Deployment>("legacy", WAIT, |d| {
        d.ready()
            && d.status.as_ref().and_then(|s| s.connection_status)
                == Some(aigw::resources::deployment::ConnectionStatus::Unhealthy)
    })
    .await;
    assert_eq!(h.count(DEPLOYMENT_PUT).await, 0);
    h.stop().await;
}

#[tokio::test]
async fn a_normalising_server_causes_no_writes_at_steady_state() {
    let h = Harness::start_with("eo-normal", Duration::from_secs(1)).await;
    h.faults(json!({"normalise": true})).await;
    create::<Config>(&h.env, "norm", routing("norm")).await;
    create::<RateLimitsPolicy>(&h.env, "norm", limits("norm")).await;
    h.wait_for::<Config>("norm", WAIT, |c| c.ready()).await;
    h.wait_for::<RateLimitsPolicy>("norm", WAIT, |p| p.ready())
        .await;
    // Remote writes that change nothing aigw manages (the same name) make the drift lists show
    // both objects changed, so both are read, normalised, and compared: no PUT follows.
    let config = h.env.api::<Config>().get("norm").await.unwrap();
    let slug = config.status.and_then(|s| s.slug).unwrap();
    let policy = h.env.api::<RateLimitsPolicy>().get("norm").await.unwrap();
    let id = policy.status.and_then(|s| s.id).unwrap();
    h.put(
        &format!("/ai_gw/v2/configs/{slug}"),
        json!({"name": "norm"}),
    )
    .await;
    h.put(
        &format!("/ai_gw/v2/policies/rate-limits/{id}"),
        json!({"name": "norm"}),
    )
    .await;
    h.reset_stats().await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let stats = h.stats().await;
    let puts: u64 = stats["requests"]
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| k.starts_with("PUT "))
        .map(|k| support::harness::count_in(&stats, k))
        .sum();
    assert_eq!(puts, 0, "{stats}");
    assert!(
        h.count("GET /ai_gw/v2/configs/{slug}").await >= 1
            && h.count("GET /ai_gw/v2/policies/rate-limits/{rateLimitsPolicyId}")
                .await
                >= 1,
        "the touched objects were read: {stats}"
    );
    h.stop().await;
}

/// A proxy in front of the emulator: the first three config POSTs are answered 429
/// `Retry-After: 25` without reaching it; later ones are forwarded, and their answers held 30 s.
/// `posts` records when each config POST arrived.
async fn slow_create_proxy(upstream: String, posts: Arc<Mutex<Vec<jiff::Timestamp>>>) -> String {
    proxy(upstream, move |received: Received| {
        let posts = posts.clone();
        async move {
            let Received { parts, .. } = &received;
            let creating =
                parts.method == reqwest::Method::POST && parts.uri.path() == "/ai_gw/v2/configs";
            if !creating {
                return received.pass().await;
            }
            let arrived = {
                let mut posts = posts.lock().unwrap();
                posts.push(jiff::Timestamp::now());
                posts.len()
            };
            if arrived <= 3 {
                let mut answer = json_answer(429, "{\"success\":false,\"message\":\"slow down\"}");
                answer
                    .headers_mut()
                    .insert("retry-after", axum::http::HeaderValue::from_static("25"));
                return answer;
            }
            let (status, text) = received.forward().await;
            tokio::time::sleep(Duration::from_secs(30)).await;
            json_answer(status, text)
        }
    })
    .await
}

/// A POST never leaves after its intent's window (issue 27, F7). 429s with `Retry-After: 25`
/// used to be waited out: the POST that went through left 75 s after its intent, and when the
/// process died before recording the request's end, a new one looked for the config only in
/// [intent, intent + 60 s], missed it, and created a second. Now a create that could no longer
/// be answered within the window is not sent: a new intent is written and the POST goes with it.
#[tokio::test]
async fn a_create_never_leaves_after_its_intents_window() {
    let mut h = Harness::start_with("eo-late", Duration::from_secs(2)).await;
    let posts = Arc::new(Mutex::new(Vec::new()));
    let proxy = slow_create_proxy(h.emulator.management_url(), posts.clone()).await;
    h.restart_operator_via_production_client(&proxy).await;
    create::<Config>(&h.env, "late", routing("late")).await;
    support::wait_until(Duration::from_secs(240), || async {
        (h.count(CONFIG_POST).await >= 1).then_some(())
    })
    .await
    .expect("no create reached the API");
    // The POST that reached the API is in flight (its answer held): its intent is the one in
    // status, and it left within that intent's window.
    let config = h.env.api::<Config>().get("late").await.unwrap();
    let intent: jiff::Timestamp = CreateIntent::of(&config.metadata)
        .expect("the create in flight has its intent recorded")
        .pending_create
        .parse()
        .unwrap();
    let sent = *posts.lock().unwrap().last().unwrap();
    let after = sent.duration_since(intent);
    assert!(
        after < jiff::SignedDuration::from_secs(60),
        "a POST left {after:?} after its intent (posts at {:?})",
        posts.lock().unwrap()
    );
    // The process dies before the answer arrives; a new one finds the config by the intent.
    h.restart_operator().await;
    let ready = h
        .wait_for::<Config>("late", Duration::from_secs(180), |c| c.ready())
        .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let found = h.remote_records("configs", "name", "late").await;
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(ready.status.unwrap().id.as_deref(), found[0]["id"].as_str());
    assert_eq!(h.count(CONFIG_POST).await, 1, "{}", h.stats().await);
    h.stop().await;
}

/// An unnamed policy is found after a lost create answer by what that create sent, not by the
/// spec as edited since (issue 27, F6). The create's answer is lost; `creditLimit` changes
/// from 100 to 200 before a list shows the policy. It used to compare the remote policy with the current
/// spec, miss it, and create a second budget over the same traffic. Reads come back reordered
/// (`normalise`), as a real server may return `conditions` and `group_by`.
#[tokio::test]
async fn an_unnamed_policy_edited_after_a_lost_create_is_created_once() {
    use support::endpoints::USAGE_LIMITS_POST as POST;
    // Lists miss the new policy for 20 s: the lookup cannot find it before the edit. The
    // default 30 s settle time covers that lag, a test's shortened one does not.
    let h = Harness::start_with("eo-unnamed", Duration::from_secs(2))
        .await
        .with_call_windows(CallWindows::default())
        .await;
    let lagging = json!({"list_lag_ms": 20_000, "normalise": true});
    let mut lossy = lagging.clone();
    lossy["drop_after_commit_rate"] = json!(1.0);
    h.faults(lossy).await;
    let spec = json!({"type": "cost", "creditLimit": 100,
        "conditions": [{"key": "workspace_id", "value": "ws-1"}, {"key": "api_key", "value": "k1"}],
        "groupBy": [{"key": "metadata.user_id"}, {"key": "api_key"}]});
    create::<UsageLimitsPolicy>(&h.env, "budget", spec).await;
    let policies = h.env.api::<UsageLimitsPolicy>();
    support::wait_until(WAIT, || async {
        let policy = policies.get("budget").await.ok()?;
        let attempt = policy.status?.managed.create_attempt?;
        attempt.ended_at.map(drop)
    })
    .await
    .expect("the lost create's end was recorded");
    h.faults(lagging).await;
    h.env
        .patch_spec::<UsageLimitsPolicy>("budget", json!({"creditLimit": 200}))
        .await;
    let ready = h
        .wait_for::<UsageLimitsPolicy>("budget", Duration::from_secs(120), |p| p.ready())
        .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let state = h.state().await;
    let active: Vec<&Value> = state["usage_limits"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["status"] == "active")
        .collect();
    assert_eq!(
        active.len(),
        1,
        "two budgets over the same traffic: {active:?}"
    );
    assert_eq!(
        ready.status.unwrap().id.as_deref(),
        active[0]["id"].as_str()
    );
    assert_eq!(active[0]["credit_limit"], 200, "the edit was not applied");
    assert_eq!(h.count(POST).await, 1, "{}", h.stats().await);
    h.stop().await;
}

/// Restarts the harness's operator behind a [`namesake_proxy`] of `route` making `foreign`;
/// where the id of what it made will be.
pub(super) async fn behind_namesake_proxy(
    h: &mut Harness,
    route: &'static str,
    foreign: Value,
) -> Arc<Mutex<Option<String>>> {
    let made = Arc::new(Mutex::new(None));
    let proxy = namesake_proxy(h.emulator.management_url(), route, foreign, made.clone()).await;
    h.restart_operator_via(&proxy).await;
    made
}

/// A proxy in front of the emulator: the first POST to `route` never reaches it; instead
/// `foreign` (another party's create of the same name, made in the console or by another
/// cluster) is created, and the POST is answered 503, so its outcome is unknown. `made` gets
/// the foreign object's id.
async fn namesake_proxy(
    upstream: String,
    route: &'static str,
    foreign: Value,
    made: Arc<Mutex<Option<String>>>,
) -> String {
    proxy(upstream, move |received: Received| {
        let (foreign, made) = (foreign.clone(), made.clone());
        async move {
            let Received {
                parts,
                path,
                client,
                upstream,
                ..
            } = &received;
            let first = parts.method == reqwest::Method::POST
                && parts.uri.path() == route
                && made.lock().unwrap().is_none();
            if !first {
                return received.pass().await;
            }
            let foreign = serde_json::to_vec(&foreign).unwrap();
            let (status, text) =
                support::proxy::forward(client, upstream, parts, path, &foreign).await;
            assert_eq!(status, 200, "{}", String::from_utf8_lossy(&text));
            let answer: Value = serde_json::from_slice(&text).unwrap();
            *made.lock().unwrap() = Some(answer["id"].as_str().unwrap().to_string());
            refusal(503, "unavailable")
        }
    })
    .await
}

/// The grants of a namespace that may not adopt: any workspace, no `allowAdoption`.
fn no_adoption() -> Value {
    json!([{"namespaces": ["{ns}"]}])
}

/// Waits until the object `name` reports `AdoptionNotAllowed` naming the namesake the proxy
/// `made` (`expect` says it was made); the namesake's id.
async fn namesake_refused<K>(
    h: &Harness,
    name: &str,
    made: &Mutex<Option<String>>,
    expect: &str,
) -> String
where
    K: support::NamespacedKind + Conditions,
{
    let found = h
        .wait_for::<K>(name, WAIT, |k| reported(k, "AdoptionNotAllowed").is_some())
        .await;
    let foreign_id = made.lock().unwrap().clone().expect(expect);
    let message = reported(&found, "AdoptionNotAllowed").unwrap();
    assert!(message.contains(&foreign_id), "{message}");
    foreign_id
}

/// The message of `object`'s condition with `reason`, if it has one.
pub(super) fn reported<K: Conditions>(object: &K, reason: &str) -> Option<String> {
    let condition = object.conditions().iter().find(|c| c.reason == reason)?;
    Some(condition.message.clone())
}

/// A lost create answer plus a namesake another party made inside the lookup window (issue 27,
/// F3): the API key found has the name but not this resource's mark, so it is neither deleted
/// (it used to be, as "our orphan whose value was lost") nor taken without the adoption grant;
/// the ApiKey reports it and leaves it alone.
#[tokio::test]
async fn a_foreign_namesake_key_is_never_deleted_after_a_lost_create() {
    let mut h = Harness::start_with_grants("eo-fkey", Duration::from_secs(1), no_adoption()).await;
    let made = behind_namesake_proxy(
        &mut h,
        "/ai_gw/v2/api-keys/service",
        json!({"name": "checkout", "scopes": ["completions.write"]}),
    )
    .await;
    let spec = json!({"name": "checkout", "kind": "service", "scopes": ["completions.write"],
                      "secretRef": {"name": "checkout-key"}});
    create::<ApiKey>(&h.env, "checkout", spec).await;
    let foreign_id =
        namesake_refused::<ApiKey>(&h, "checkout", &made, "the foreign key was made").await;
    // Long enough for a delete and a replacement create, as before the fix.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let state = h.state().await;
    let deleted = state["deleted_api_keys"].to_string();
    assert!(
        !deleted.contains(&foreign_id),
        "the foreign key was deleted: {deleted}"
    );
    let keys = state["api_keys"].as_array().cloned().unwrap_or_default();
    let live: Vec<&Value> = keys.iter().filter(|k| k["name"] == "checkout").collect();
    assert_eq!(live.len(), 1, "{live:?}");
    assert_eq!(live[0]["id"], foreign_id.as_str());
    assert_eq!(
        live[0]["rotations"], 0,
        "the foreign key was rotated: {:?}",
        live[0]
    );
    let status = h.env.get::<ApiKey>("checkout").await.status.unwrap();
    assert_eq!(status.id, None, "the foreign key was taken");
    h.stop().await;
}

/// The same for a Config: a foreign config of the same name made during a lost create is not
/// adopted and not overwritten (it used to be, and then PUT over and deleted with the Config).
#[tokio::test]
async fn a_foreign_namesake_config_is_never_adopted_after_a_lost_create() {
    let mut h = Harness::start_with_grants("eo-fcfg", Duration::from_secs(1), no_adoption()).await;
    let made = behind_namesake_proxy(
        &mut h,
        "/ai_gw/v2/configs",
        json!({"name": "shared", "config": {"retry": {"attempts": 1}}}),
    )
    .await;
    create::<Config>(&h.env, "shared", routing("shared")).await;
    let foreign_id =
        namesake_refused::<Config>(&h, "shared", &made, "the foreign config was made").await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let config = h.env.api::<Config>().get("shared").await.unwrap();
    assert_eq!(
        config.status.unwrap().id,
        None,
        "the foreign config was adopted"
    );
    let found = h.remote_records("configs", "name", "shared").await;
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["id"], foreign_id.as_str());
    assert_eq!(
        found[0]["versions"], 1,
        "the foreign config was overwritten"
    );
    // Deleting the Config leaves the foreign config in place.
    h.env.delete_and_wait::<Config>("shared", WAIT).await;
    assert_eq!(h.remote_records("configs", "name", "shared").await.len(), 1);
    h.stop().await;
}

/// Another installation's object whose status says it has a create of the same name in flight
/// holds nothing of this installation's (attack on issue 27): a Config whose create answer was
/// lost finds its own remote copy and is Ready, created once. Before, the lookup counted the
/// other installation's in-flight create and stayed `CreateOutcomeUnknown` for as long as that
/// status said so.
#[tokio::test]
async fn another_installations_create_in_flight_holds_no_lookup_of_this_one() {
    let h = Harness::start_with("eo-other-inst", Duration::from_secs(2)).await;
    let theirs: Config = serde_json::from_value(json!({
        "apiVersion": "aigw.io/v1alpha1", "kind": "Config",
        "metadata": {"name": "theirs", "annotations": {"aigw.io/installation": "someone-else"}},
        "spec": routing("shared-name")
    }))
    .unwrap();
    let configs = h.env.api::<Config>();
    support::create(&configs, &theirs).await;
    let in_flight = json!({"status": {
        "pendingCreate": jiff::Timestamp::now().to_string(),
        "createAttempt": {"name": "shared-name", "intent": "their-intent"}
    }});
    configs
        .patch_status("theirs", &PatchParams::default(), &Patch::Merge(&in_flight))
        .await
        .unwrap();

    let lost = json!({"drop_after_commit_rate": 1.0});
    create_under::<Config>(&h, lost, ("ours", routing("shared-name")), CONFIG_POST).await;
    let ready = ready_once_healed::<Config>(&h, "ours", Duration::from_secs(30)).await;
    let found = h.remote_records("configs", "name", "shared-name").await;
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(ready.status.unwrap().id.as_deref(), found[0]["id"].as_str());
    assert_eq!(h.count(CONFIG_POST).await, 1, "{}", h.stats().await);
    // The other installation's object is left as it was.
    let left = configs.get("theirs").await.unwrap();
    assert!(left.metadata.finalizers.is_none(), "{:?}", left.metadata);
    h.stop().await;
}

/// A finalizer removal that fails after the remote DELETE (another controller's finalizer,
/// listed before aigw's, went meanwhile, so the removal's index test fails) is retried alone:
/// the remote config is deleted once, not once per attempt.
#[tokio::test]
async fn a_finalizer_removal_that_fails_after_the_delete_does_not_delete_again() {
    use support::endpoints::CONFIG_DELETE;
    let h = Harness::start("eo-release").await;
    create::<Config>(&h.env, "gone", routing("gone")).await;
    h.wait_for::<Config>("gone", WAIT, |c| c.ready()).await;
    let configs = h.env.api::<Config>();
    let json_patch = |operations: Value| {
        Patch::Json::<()>(serde_json::from_value(operations).expect("a JSON patch"))
    };
    let before = "example.com/before";
    let add = json!([{"op": "add", "path": "/metadata/finalizers/0", "value": before}]);
    configs
        .patch("gone", &PatchParams::default(), &json_patch(add))
        .await
        .unwrap();
    // The DELETE takes 3 s; the other finalizer goes while it is in flight.
    h.faults(json!({"latency_ms": 3000})).await;
    h.env.delete::<Config>("gone").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let remove = json!([{"op": "test", "path": "/metadata/finalizers/0", "value": before},
                        {"op": "remove", "path": "/metadata/finalizers/0"}]);
    configs
        .patch("gone", &PatchParams::default(), &json_patch(remove))
        .await
        .unwrap();
    assert!(
        support::gone_within(&configs, "gone", WAIT).await,
        "the Config went"
    );
    h.faults(json!({})).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    h.assert_count(CONFIG_DELETE, 1).await;
    h.stop().await;
}
