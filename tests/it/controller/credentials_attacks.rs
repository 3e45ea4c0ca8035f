//! Attacks on the guarantees of the credential kinds (Integration, Provider, ApiKey), kept as
//! regression tests: grants on delete and on a lost create's recovery, an orphaned key after
//! a failed cleanup, secrets quoted back by the API, and an object never its own rival.

use crate::support;

use std::time::Duration;

use aigw::resources::{Integration, Provider};
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use serde_json::{Value, json};
use support::harness::Harness;
use support::objects::Conditions;
use support::objects::{WS_A, WS_B};
use support::proxy::{Received, bad_gateway, json_answer, proxy, refusal};

const WAIT: Duration = Duration::from_secs(30);
const KEY: &str = "sk-upstream-Fq3Wz8Lm1Rt6";

async fn put_key(h: &Harness, value: &str) {
    h.put_secret("openai-upstream", json!({"api-key": value}), true)
        .await;
}

fn integration_spec(h: &Harness) -> Value {
    json!({"slug": h.cluster_name("openai"), "name": "OpenAI prod", "aiProviderId": "open-ai",
           "keySecretRef": {"name": "openai-upstream", "key": "api-key"},
           "workspaces": [{"id": WS_A}]})
}

fn provider_spec(h: &Harness) -> Value {
    json!({"slug": format!("{}-openai-a", h.env.namespace), "name": "OpenAI for team A",
           "workspaceId": WS_A, "integration": h.cluster_name("openai"), "note": "managed"})
}

/// Creates the Integration `openai` with `spec` and waits until it is Ready.
async fn ready_integration(h: &Harness, spec: Value) {
    h.create_cluster::<Integration>("openai", spec).await;
    h.wait_cluster::<Integration>("openai", WAIT, |i| i.ready())
        .await;
}

async fn ready_integration_and_provider(h: &Harness) {
    put_key(h, KEY).await;
    ready_integration(h, integration_spec(h)).await;
    support::objects::create::<Provider>(&h.env, "openai-a", provider_spec(h)).await;
    h.wait_for::<Provider>("openai-a", WAIT, |p| p.ready())
        .await;
}

/// Grant of the integration revoked, then the Provider deleted: the gate's rule
/// ("a resource the rules refuse releases its object without a call") says no DELETE.
#[tokio::test]
async fn a_provider_whose_integration_grant_was_revoked_is_released_on_delete_without_a_call() {
    // The grant names the Integration resource by name ("{ns}-openai" is h.cluster_name("openai")).
    let grants =
        json!([{"namespaces": ["{ns}"], "workspaces": [WS_A], "integrations": ["{ns}-openai"]}]);
    let mut h = Harness::start_with_grants("cred-pdel", Duration::from_secs(1), grants).await;
    ready_integration_and_provider(&h).await;
    // Revoke: the namespace may now bind only another integration.
    h.set_grants(
        json!([{"namespaces": ["{ns}"], "workspaces": [WS_A], "integrations": ["anthropic-prod"]}]),
    );
    h.restart_operator().await;
    // An update is refused (control): touch the note.
    h.env
        .patch_spec::<Provider>("openai-a", json!({"note": "changed"}))
        .await;
    let refused = h
        .wait_for::<Provider>("openai-a", WAIT, |p| {
            p.stalled_with("IntegrationNotAllowed")
        })
        .await;
    eprintln!("update after revoke: {:?}", refused.condition("Stalled"));
    h.reset_stats().await;
    h.env.delete_and_wait::<Provider>("openai-a", WAIT).await;
    let deletes = h.count("DELETE /ai_gw/v2/providers/{providerId}").await;
    let puts = h.count("PUT /ai_gw/v2/providers/{providerId}").await;
    eprintln!("after revoke: DELETE provider calls = {deletes}, PUT = {puts}");
    eprintln!("events: {}", h.env.events_text().await);
    assert_eq!(
        deletes, 0,
        "the Provider deleted a provider of an integration its namespace is no longer granted"
    );
    h.stop().await;
}

// ------------------------------------------------------------------------------------------
// Exactly once on CREATE: the orphan's DELETE fails (transiently) after the lookup found it.
// ------------------------------------------------------------------------------------------

use aigw::resources::ApiKey;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

struct Knobs {
    lose_next_post: AtomicBool,
    fail_deletes: AtomicBool,
    failed_deletes: AtomicU64,
}

/// A proxy in front of the emulator: the next API-key POST is applied but answered 502 (its
/// answer is lost); while `fail_deletes`, API-key DELETEs are answered 503 without reaching the
/// emulator (a transient failure, nothing applied).
async fn faulty_proxy(upstream: String, knobs: Arc<Knobs>) -> String {
    proxy(upstream, move |received: Received| {
        let knobs = knobs.clone();
        async move {
            let Received { parts, .. } = &received;
            let is_key_route = parts.uri.path().starts_with("/ai_gw/v2/api-keys/");
            if is_key_route
                && parts.method == reqwest::Method::DELETE
                && knobs.fail_deletes.load(Ordering::SeqCst)
            {
                knobs.failed_deletes.fetch_add(1, Ordering::SeqCst);
                return refusal(503, "unavailable");
            }
            let (status, text) = received.forward().await;
            let creating = is_key_route
                && parts.method == reqwest::Method::POST
                && !parts.uri.path().contains("/rotate");
            if creating && status == 200 && knobs.lose_next_post.swap(false, Ordering::SeqCst) {
                return bad_gateway();
            }
            json_answer(status, text)
        }
    })
    .await
}

#[tokio::test]
async fn a_lost_key_create_whose_orphan_delete_fails_keeps_looking_for_the_orphan() {
    let mut h = Harness::start_with("cred-orphan", Duration::from_secs(1)).await;
    let knobs = Arc::new(Knobs {
        lose_next_post: AtomicBool::new(true),
        fail_deletes: AtomicBool::new(true),
        failed_deletes: AtomicU64::new(0),
    });
    let proxy = faulty_proxy(h.emulator.management_url(), knobs.clone()).await;
    h.restart_operator_via(&proxy).await;
    let spec = json!({"name": "lost", "kind": "service", "scopes": ["completions.write"],
                      "secretRef": {"name": "lost-key"}});
    support::objects::create::<ApiKey>(&h.env, "lost", spec).await;
    // Wait until the orphan's delete has been tried and failed.
    support::wait_until(Duration::from_secs(60), || async {
        (knobs.failed_deletes.load(Ordering::SeqCst) > 0).then_some(())
    })
    .await
    .expect("the orphan's delete was never tried");
    // Let the status settle, then let deletes through again.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let mid = h.env.api::<ApiKey>().get("lost").await.unwrap();
    eprintln!(
        "status after the failed delete: {}",
        serde_json::to_string(&mid.status).unwrap()
    );
    knobs.fail_deletes.store(false, Ordering::SeqCst);
    let ready = h
        .wait_for::<ApiKey>("lost", Duration::from_secs(90), ApiKey::ready)
        .await;
    let id = ready.status.clone().unwrap().id.unwrap();
    // Give the operator time to clean anything up it knows of.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let keys = h.state().await["api_keys"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let ids: Vec<&str> = keys.iter().filter_map(|k| k["id"].as_str()).collect();
    eprintln!(
        "ApiKey id {id}; remote keys {ids:?}; failed deletes {}",
        knobs.failed_deletes.load(Ordering::SeqCst)
    );
    eprintln!("events: {}", h.env.events_text().await);
    assert_eq!(
        keys.len(),
        1,
        "a key no Secret holds is left in the API: {ids:?}, Secret holds {id}"
    );
    h.stop().await;
}

/// The claim index holds a newer copy of the object itself (after its own create-intent
/// write): the gate must not name the object as its own rival.
#[tokio::test]
async fn an_integration_is_never_already_managed_by_itself() {
    let h = Harness::start_with_secret_namespace("cred-self", Duration::from_secs(1)).await;
    ready_integration_and_provider(&h).await;
    let events = h.cluster_events_text().await;
    let logs = support::harness::captured_logs();
    let me = format!("managed by Integration /{}", h.cluster_name("openai"));
    let in_logs = logs.lines().filter(|l| l.contains(&me)).count();
    eprintln!("self-AlreadyManaged log lines: {in_logs}\nevents: {events}");
    assert!(
        !events.contains(&me) && in_logs == 0,
        "the Integration was reported AlreadyManaged by itself"
    );
    h.stop().await;
}

/// Held checks, gathered: an ApiKey outside the granted workspaces (or with none) makes no call;
/// an Integration naming another namespace's Secret, or an unlabelled one, reads nothing; an
/// Integration naming the slug another Integration owns writes nothing.
#[tokio::test]
async fn grants_and_secret_namespaces_hold_for_keys_and_integrations() {
    let grants =
        json!([{"namespaces": ["{ns}"], "workspaces": [WS_A], "integrations": ["{ns}-openai"]}]);
    let h = Harness::start_with_grants("cred-held", Duration::from_secs(1), grants).await;
    ready_integration_and_provider(&h).await;
    h.reset_stats().await;
    for (name, ws) in [("foreign", Some(WS_B)), ("nows", None)] {
        let mut spec = json!({"name": name, "kind": "service", "scopes": ["completions.write"],
                              "secretRef": {"name": format!("{name}-key")}});
        if let Some(ws) = ws {
            spec["workspaceId"] = json!(ws);
        }
        support::objects::create::<ApiKey>(&h.env, name, spec).await;
        let k = h
            .wait_for::<ApiKey>(name, WAIT, |k| k.stalled_with("WorkspaceNotAllowed"))
            .await;
        eprintln!("ApiKey {name}: {:?}", k.condition("Stalled"));
    }
    // A Secret of another namespace (the one named exists there), and an unlabelled one here.
    let other_ns = "default";
    let mut cross = integration_spec(&h);
    cross["slug"] = json!(h.cluster_name("cross"));
    cross["keySecretRef"] =
        json!({"name": "openai-upstream", "key": "api-key", "namespace": other_ns});
    cross["workspaces"] = json!([]);
    h.env
        .create_from::<Secret>(json!({"metadata": {"name": "plain"},
        "stringData": {"k": "sk-unlabelled-Zx9Yw8Vu7T"}}))
        .await;
    let mut plain = integration_spec(&h);
    plain["slug"] = json!(h.cluster_name("plain"));
    plain["keySecretRef"] = json!({"name": "plain", "key": "k"});
    plain["workspaces"] = json!([]);
    // The slug the first Integration owns.
    let mut thief = integration_spec(&h);
    thief["name"] = json!("thief");
    thief["workspaces"] = json!([]);
    let api = Api::<Integration>::all(h.env.client.clone());
    for (name, spec) in [("cross", cross), ("plain", plain), ("thief", thief)] {
        h.create_cluster::<Integration>(name, spec).await;
    }
    for (name, reason) in [
        ("cross", "SecretNotReadable"),
        ("plain", "SecretNotReadable"),
        ("thief", "AlreadyManaged"),
    ] {
        let full = h.cluster_name(name);
        let got = support::wait_until(WAIT, || async {
            let i = api.get_opt(&full).await.ok()??;
            i.stalled_with(reason).then_some(i)
        })
        .await;
        eprintln!(
            "Integration {name}: {:?}",
            got.as_ref().and_then(|i| i.condition("Stalled"))
        );
        assert!(
            got.is_some(),
            "Integration {name} not stalled with {reason}"
        );
    }
    eprintln!("remote writes after reset: {}", h.remote_writes().await);
    assert_eq!(h.remote_writes().await, 0, "{}", h.stats().await);
    h.stop().await;
}

// ------------------------------------------------------------------------------------------
// Secrecy: an API error that echoes what it was sent.
// ------------------------------------------------------------------------------------------

const LONG_KEY: &str = "sk-proj-Q7vN2mX9pL4kR8tW1yZ6cB3nH5jF0dS2aG7eU4iO9qP1wE6rT3yU8iO2pA5sD7fG9hJ1kL3zX5cV7bN9mQ2wE4rT6yU8";

/// A proxy in front of the emulator answering every integration POST/PUT with a 400 whose
/// message echoes the key sent: `mode` "full" (the whole body), "pydantic" (a truncated value,
/// as a pydantic 422 prints an `input_value`).
async fn echo_proxy(upstream: String, mode: &'static str) -> String {
    proxy(upstream, move |received: Received| {
        async move {
            let Received { parts, body, .. } = &received;
            let writes_integration = parts.uri.path().starts_with("/ai_gw/admin/v2/integrations")
                && !parts.uri.path().ends_with("/workspaces")
                && (parts.method == reqwest::Method::POST || parts.method == reqwest::Method::PUT);
            if writes_integration {
                let sent: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
                let key = sent["key"].as_str().unwrap_or("").to_string();
                let message = match mode {
                    "full" => format!("invalid request: {}", String::from_utf8_lossy(body)),
                    // Review F11: an all-letter value cut short, a URL-encoded and a base64 echo.
                    "elided" => {
                        let n = key.chars().count();
                        let head: String = key.chars().take(6).collect();
                        let tail: String = key.chars().skip(n.saturating_sub(6)).collect();
                        format!("bad value '{head}...{tail}'")
                    }
                    "url" => {
                        let url = format!("https://u:{key}@h");
                        let encoded = percent_encoding::utf8_percent_encode(
                            &url,
                            percent_encoding::NON_ALPHANUMERIC,
                        );
                        format!("custom_host {encoded} is not reachable")
                    }
                    "base64" => {
                        use base64::Engine;
                        let basic = base64::engine::general_purpose::STANDARD
                            .encode(format!("user:{key}"));
                        format!("upstream refused Authorization: Basic {basic}")
                    }
                    _ => {
                        let n = key.chars().count();
                        let head: String = key.chars().take(24).collect();
                        let tail: String = key.chars().skip(n.saturating_sub(24)).collect();
                        format!("1 validation error for IntegrationCreate\nkey\n  Value error, key is not valid for this provider [type=value_error, input_value='{head}...{tail}', input_type=str]")
                    }
                };
                return refusal(400, message);
            }
            received.pass().await
        }
    })
    .await
}

/// An all-letter passphrase: no 12-character run of it has a digit. Any 6 characters of it in
/// the log are a leak, and the log is the whole test process's: no run of 6 of its characters
/// may be in a word another test logs (`correct-horse-battery-staple` was: "DriftCorrected").
const PASSPHRASE: &str = "quixotic-zephyr-jackdaw-vexing";

async fn echo_attack(mode: &'static str) {
    let key = match mode {
        "elided" | "url" | "base64" => PASSPHRASE,
        _ => LONG_KEY,
    };
    let mut h =
        Harness::start_with_secret_namespace(&format!("cred-echo-{mode}"), Duration::from_secs(1))
            .await;
    let proxy = echo_proxy(h.emulator.management_url(), mode).await;
    h.restart_operator_via(&proxy).await;
    put_key(&h, key).await;
    let api = Api::<Integration>::all(h.env.client.clone());
    let mut spec = integration_spec(&h);
    spec["workspaces"] = json!([]);
    h.create_cluster::<Integration>("openai", spec).await;
    let name = h.cluster_name("openai");
    let got = support::wait_until(WAIT, || async {
        let i = api.get_opt(&name).await.ok()??;
        let failed = i.status.as_ref().is_some_and(|s| {
            s.conditions.iter().any(|c| {
                c.message.contains("validation error")
                    || c.message.contains("invalid request")
                    || c.message.contains("withheld")
                    || c.message.contains("<secret>")
                    || c.message.contains("400")
            })
        });
        failed.then_some(i)
    })
    .await
    .expect("the create failed");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let status = serde_json::to_string(&got.status).unwrap();
    let events = h.cluster_events_text().await;
    let logs = support::harness::captured_logs();
    eprintln!("[{mode}] status: {status}\n[{mode}] events: {events}");
    // Any 12-character window of the key is a leak of (part of) it; for the passphrase, any
    // 6 (what the elided echo quotes), and its URL and base64 encodings.
    let chars: Vec<char> = key.chars().collect();
    let window = if key == PASSPHRASE { 6 } else { 12 };
    let mut windows: Vec<String> = chars.windows(window).map(|w| w.iter().collect()).collect();
    windows.push(
        percent_encoding::utf8_percent_encode(key, percent_encoding::NON_ALPHANUMERIC).to_string(),
    );
    {
        use base64::Engine;
        windows.push(base64::engine::general_purpose::STANDARD.encode(format!("user:{key}")));
    }
    let leaked = |text: &str| windows.iter().any(|w| text.contains(w.as_str()));
    let (s, e, l) = (leaked(&status), leaked(&events), leaked(&logs));
    eprintln!("[{mode}] part of the key in status: {s}, events: {e}, logs: {l}");
    h.stop().await;
    assert!(!s && !e && !l, "[{mode}] part of the upstream key leaked");
}

#[tokio::test]
async fn an_api_error_echoing_the_whole_request_hides_the_key() {
    echo_attack("full").await;
}

#[tokio::test]
async fn an_api_error_quoting_part_of_the_key_is_withheld() {
    echo_attack("pydantic").await;
}

#[tokio::test]
async fn an_api_error_quoting_an_all_letter_value_cut_short_is_withheld() {
    echo_attack("elided").await;
}

#[tokio::test]
async fn an_api_error_echoing_a_url_encoded_value_hides_it() {
    echo_attack("url").await;
}

#[tokio::test]
async fn an_api_error_echoing_a_base64_encoded_value_hides_it() {
    echo_attack("base64").await;
}

// ------------------------------------------------------------------------------------------
// Grants on lost-create recovery: a rejected create (slug taken) whose answer is lost.
// ------------------------------------------------------------------------------------------

/// On the first provider POST: someone else's provider with the same slug is created first (in
/// the same workspace, same integration), our POST is forwarded (and refused: slug taken),
/// and its answer is lost (502).
async fn slug_race_proxy(
    upstream: String,
    armed: Arc<AtomicBool>,
    foreign: Arc<std::sync::Mutex<Option<String>>>,
    same_name: bool,
) -> String {
    proxy(upstream, move |received: Received| {
        let (armed, foreign) = (armed.clone(), foreign.clone());
        async move {
            let Received {
                parts,
                body,
                client,
                upstream,
                ..
            } = &received;
            let auth = parts.headers.get("authorization").cloned();
            let creating =
                parts.method == reqwest::Method::POST && parts.uri.path() == "/ai_gw/v2/providers";
            let race = creating && armed.swap(false, Ordering::SeqCst);
            if race {
                let mut theirs: Value = serde_json::from_slice(body).unwrap();
                if !same_name {
                    theirs["name"] = json!("someone else's provider");
                }
                theirs["note"] = json!("not aigw's");
                let mut out = client
                    .post(format!("{upstream}/ai_gw/v2/providers"))
                    .json(&theirs);
                if let Some(a) = &auth {
                    out = out.header("authorization", a.as_bytes());
                }
                let made = out.send().await.unwrap();
                let status = made.status();
                let made: Value = made.json().await.unwrap();
                let id = made["data"]["id"]
                    .as_str()
                    .or(made["id"].as_str())
                    .map(str::to_string);
                eprintln!("proxy: foreign provider POST -> {status} id {id:?}");
                *foreign.lock().unwrap() = id;
            }
            let (status, text) = received.forward().await;
            if race {
                eprintln!(
                    "proxy: our POST -> {status} {} (answer dropped: 502)",
                    String::from_utf8_lossy(&text)
                );
                return bad_gateway();
            }
            json_answer(status, text)
        }
    })
    .await
}

#[tokio::test]
async fn a_lost_answer_to_a_refused_provider_create_never_adopts_another_partys_provider() {
    refused_provider_create_race("cred-race", false).await;
}

/// The same with another party's provider of the same display name as well as slug (issue 27,
/// F3): the name alone used to count as proof that our create made it.
#[tokio::test]
async fn a_lost_answer_never_adopts_another_partys_provider_of_the_same_name() {
    refused_provider_create_race("cred-race-name", true).await;
}

async fn refused_provider_create_race(prefix: &str, same_name: bool) {
    let grants = json!([{"namespaces": ["{ns}"], "workspaces": [WS_A], "integrations": ["{ns}-openai"], "allowAdoption": false}]);
    let mut h = Harness::start_with_grants(prefix, Duration::from_secs(1), grants).await;
    let armed = Arc::new(AtomicBool::new(true));
    let foreign_id = Arc::new(std::sync::Mutex::new(None));
    let proxy = slug_race_proxy(
        h.emulator.management_url(),
        armed.clone(),
        foreign_id.clone(),
        same_name,
    )
    .await;
    h.restart_operator_via(&proxy).await;
    put_key(&h, KEY).await;
    let api = Api::<Integration>::all(h.env.client.clone());
    h.create_cluster::<Integration>("openai", integration_spec(&h))
        .await;
    let name = h.cluster_name("openai");
    support::wait_until(WAIT, || async {
        api.get_opt(&name).await.ok()??.ready().then_some(())
    })
    .await
    .expect("integration ready");
    support::objects::create::<Provider>(&h.env, "openai-a", provider_spec(&h)).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    let p = h.env.api::<Provider>().get("openai-a").await.unwrap();
    let providers = h.state().await["providers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    eprintln!(
        "Provider status: {}",
        serde_json::to_string(&p.status).unwrap()
    );
    eprintln!(
        "remote providers: {}",
        serde_json::to_string(&providers).unwrap()
    );
    let adopted = p.status.as_ref().and_then(|s| s.id.clone());
    let foreign = foreign_id.lock().unwrap().clone();
    h.reset_stats().await;
    // If it was taken over: an edit is now PUT onto someone else's provider, the delete deletes it.
    h.env
        .patch_spec::<Provider>("openai-a", json!({"note": "aigw's now"}))
        .await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    // The create's outcome settles as "never made" only once a list taken a settle time after it
    // still lacks it: the deletion waits that long.
    h.env
        .delete_and_wait::<Provider>("openai-a", Duration::from_secs(90))
        .await;
    let puts = h.count("PUT /ai_gw/v2/providers/{providerId}").await;
    let deletes = h.count("DELETE /ai_gw/v2/providers/{providerId}").await;
    eprintln!("adopted {adopted:?}, foreign {foreign:?}; then PUT {puts}, DELETE {deletes}");
    eprintln!("events: {}", h.env.events_text().await);
    h.stop().await;
    assert!(foreign.is_some(), "the race did not happen");
    assert_ne!(
        adopted, foreign,
        "a provider aigw never created was taken over without allowAdoption"
    );
    assert_eq!(
        (puts, deletes),
        (0, 0),
        "another party's provider was written to"
    );
}

/// A proxy in front of the emulator answering every integration DELETE with a 400 whose message
/// echoes the key the integration was created with (seen in the create's body).
async fn delete_echo_proxy(upstream: String) -> String {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    proxy(upstream, move |received: Received| {
        let seen = seen.clone();
        async move {
            let Received { parts, body, .. } = &received;
            let integrations = parts.uri.path().starts_with("/ai_gw/admin/v2/integrations");
            if integrations && parts.method == reqwest::Method::POST {
                let sent: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
                if let Some(key) = sent["key"].as_str() {
                    *seen.lock().unwrap() = key.to_string();
                }
            }
            if integrations && parts.method == reqwest::Method::DELETE {
                let key = seen.lock().unwrap().clone();
                let message = format!("cannot delete: integration with key {key} is in use");
                return refusal(400, message);
            }
            received.pass().await
        }
    })
    .await
}

/// A failed cleanup is recorded in status and logged by the controller's error policy, after
/// the reconcile that read the key is over (attack on issue 27): an API error echoing the key
/// reaches neither. Before, the error policy's log line only collapsed whitespace, and the
/// cleanup's own status message knew no value: both carried the key.
#[tokio::test]
async fn a_failed_cleanup_echoing_the_key_reaches_no_log_or_status() {
    let mut h =
        Harness::start_with_secret_namespace("cred-cleanup-echo", Duration::from_secs(1)).await;
    let proxy = delete_echo_proxy(h.emulator.management_url()).await;
    h.restart_operator_via(&proxy).await;
    put_key(&h, LONG_KEY).await;
    let api = Api::<Integration>::all(h.env.client.clone());
    let mut spec = integration_spec(&h);
    spec["workspaces"] = json!([]);
    ready_integration(&h, spec).await;
    let name = h.cluster_name("openai");
    api.delete(&name, &Default::default()).await.unwrap();
    // The cleanup fails and is retried (and logged) a few times.
    support::wait_until(WAIT, || async {
        let logs = support::harness::captured_logs();
        (logs.matches("reconcile failed").count() >= 2).then_some(())
    })
    .await
    .expect("the failed cleanup was logged");
    let status = serde_json::to_string(&api.get(&name).await.unwrap().status).unwrap();
    let events = h.cluster_events_text().await;
    let logs = support::harness::captured_logs();
    let chars: Vec<char> = LONG_KEY.chars().collect();
    let windows: Vec<String> = chars.windows(12).map(|w| w.iter().collect()).collect();
    let leaked = |text: &str| windows.iter().any(|w| text.contains(w.as_str()));
    let (s, e, l) = (leaked(&status), leaked(&events), leaked(&logs));
    eprintln!("part of the key in status: {s}, events: {e}, logs: {l}\nstatus: {status}");
    for line in logs.lines().filter(|line| leaked(line)) {
        eprintln!("leaking log line: {line}");
    }
    // Let the object go.
    let direct = h.emulator.management_url();
    h.restart_operator_via(&direct).await;
    support::wait_until(WAIT, || async {
        api.get_opt(&name).await.ok()?.is_none().then_some(())
    })
    .await
    .expect("deleted once the DELETE goes through");
    h.stop().await;
    assert!(!s && !e && !l, "part of the upstream key leaked");
}

// ------------------------------------------------------------------------------------------
// Values a reconcile did not read, quoted back (helper 171): the credentials a Deployment and
// an ApiKey were delivered, the upstream credentials a Provider and an McpServer bind.
// ------------------------------------------------------------------------------------------

/// An update and a delete refused with errors quoting the credentials a Deployment and an
/// ApiKey were delivered, and the key and headers of the integrations a Provider and an
/// McpServer bind, answered to an operator restarted since (it remembers none of them): the
/// values reach no status, event, log line or metric.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_quoting_delivered_and_bound_credentials_reach_no_output() {
    use aigw::resources::{Deployment, McpIntegration, McpServer};
    let mut h =
        Harness::start_with_secret_namespace("cred-stored-echo", Duration::from_secs(1)).await;
    h.seed_workspace(WS_A, "payments", "payments").await;
    put_key(&h, KEY).await;
    ready_integration(&h, integration_spec(&h)).await;
    support::objects::create::<Provider>(&h.env, "openai-a", provider_spec(&h)).await;
    // A header no pattern tells from an ordinary one: only knowing the value hides it.
    h.put_secret(
        "mcp-conf",
        json!({"custom_headers": json!({"X-Tenant": "mcp-tok-W4xR7qZ2nK9v"}).to_string()}),
        true,
    )
    .await;
    h.create_cluster::<McpIntegration>(
        "tools",
        json!({"slug": h.cluster_name("tools"), "name": "Tools",
               "url": "https://mcp.example.com/mcp", "authType": "headers", "transport": "http",
               "configurationsSecretRef": {"name": "mcp-conf"},
               "workspaces": [{"workspace": WS_A}]}),
    )
    .await;
    h.wait_cluster::<McpIntegration>("tools", WAIT, |i| i.ready())
        .await;
    let server = support::objects::mcp_server(None, "Tools", WS_A, &h.cluster_name("tools"));
    support::objects::create::<McpServer>(&h.env, "tools-a", server).await;
    let deployment = json!({"name": "edge", "credentialsSecretRef": {"name": "edge-creds"}});
    support::objects::create::<Deployment>(&h.env, "edge", deployment).await;
    let key = json!({"name": "billing", "kind": "service", "scopes": ["completions.write"],
                     "secretRef": {"name": "billing-key"}});
    support::objects::create::<ApiKey>(&h.env, "billing", key).await;
    h.wait_for::<Provider>("openai-a", WAIT, |p| p.ready())
        .await;
    h.wait_for::<McpServer>("tools-a", WAIT, |s| s.ready())
        .await;
    h.wait_for::<Deployment>("edge", WAIT, |d| d.ready()).await;
    h.wait_for::<ApiKey>("billing", WAIT, |k| k.ready()).await;
    // Every value the refusals may quote.
    let secrets = Api::<Secret>::namespaced(h.env.client.clone(), &h.env.namespace);
    let mut values = vec![KEY.to_string(), "mcp-tok-W4xR7qZ2nK9v".to_string()];
    for name in ["edge-creds", "billing-key"] {
        let secret = secrets.get(name).await.unwrap();
        for bytes in secret.data.unwrap_or_default().values() {
            let text = String::from_utf8(bytes.0.clone()).unwrap();
            if text.len() >= 12 {
                values.push(text);
            }
        }
    }
    assert!(values.len() >= 4, "credentials delivered: {}", values.len());

    let direct = h.emulator.management_url();
    let echoing = support::proxy::stored_echo_proxy(direct.clone()).await;
    h.restart_operator_via(&echoing).await;
    h.env
        .patch_spec::<Provider>("openai-a", json!({"note": "changed"}))
        .await;
    h.env
        .patch_spec::<McpServer>("tools-a", json!({"description": "changed"}))
        .await;
    h.env
        .patch_spec::<Deployment>("edge", json!({"tags": {"team": "x"}}))
        .await;
    h.env
        .patch_spec::<ApiKey>("billing", json!({"description": "changed"}))
        .await;
    let refused = |c: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition]| {
        c.iter()
            .any(|c| c.message.contains("refused") || c.message.contains("withheld"))
    };
    h.wait_for::<Provider>("openai-a", WAIT, |p| refused(p.conditions()))
        .await;
    h.wait_for::<McpServer>("tools-a", WAIT, |s| refused(s.conditions()))
        .await;
    h.wait_for::<Deployment>("edge", WAIT, |d| refused(d.conditions()))
        .await;
    h.wait_for::<ApiKey>("billing", WAIT, |k| refused(k.conditions()))
        .await;
    h.env.delete::<Provider>("openai-a").await;
    h.env.delete::<McpServer>("tools-a").await;
    h.env.delete::<Deployment>("edge").await;
    h.env.delete::<ApiKey>("billing").await;
    // The refused deletes retry and log a few times.
    tokio::time::sleep(Duration::from_secs(5)).await;

    let mut leaked = Vec::new();
    let mut check = |place: &str, text: &str| {
        for value in values.iter().filter(|v| text.contains(v.as_str())) {
            leaked.push(format!("--- {value} in {place} ---\n{text}"));
        }
    };
    check(
        "Provider",
        &serde_json::to_string(&h.env.api::<Provider>().get("openai-a").await.unwrap()).unwrap(),
    );
    check(
        "McpServer",
        &serde_json::to_string(&h.env.api::<McpServer>().get("tools-a").await.unwrap()).unwrap(),
    );
    check(
        "Deployment",
        &serde_json::to_string(&h.env.api::<Deployment>().get("edge").await.unwrap()).unwrap(),
    );
    check(
        "ApiKey",
        &serde_json::to_string(&h.env.api::<ApiKey>().get("billing").await.unwrap()).unwrap(),
    );
    check("the events", &h.env.events_text().await);
    check("the metrics", &h.ctx.metrics.encode());
    check("the operator log", &support::harness::captured_logs());
    let logs = support::harness::captured_logs();
    assert!(logs.contains("refused"), "the refusals were logged");
    // Let the objects go.
    h.restart_operator_via(&direct).await;
    for name in ["openai-a", "tools-a", "edge", "billing"] {
        let gone = support::wait_until(WAIT, || async {
            let left = h.env.api::<Provider>().get_opt(name).await.ok()?.is_none();
            let others = [
                h.env.api::<McpServer>().get_opt(name).await.ok()?.is_none(),
                h.env
                    .api::<Deployment>()
                    .get_opt(name)
                    .await
                    .ok()?
                    .is_none(),
                h.env.api::<ApiKey>().get_opt(name).await.ok()?.is_none(),
            ];
            (left && others.iter().all(|g| *g)).then_some(())
        })
        .await;
        assert!(gone.is_some(), "{name} was not deleted");
    }
    h.stop().await;
    assert!(leaked.is_empty(), "values leaked:\n{}", leaked.join("\n"));
}

/// A Guardrail `pii` whose AIRS check takes `airs` from the Secret `airs`, Ready: its slug.
async fn airs_guardrail(h: &Harness, airs: &str) -> String {
    use aigw::resources::Guardrail;
    h.put_secret("airs", json!({"api-key": airs}), false).await;
    let guardrail = json!({"name": "pii", "workspaceId": WS_A,
        "checks": [{"id": "panw-prisma-airs.intercept", "parameters": {"profile_name": "strict"}}],
        "secretRefs": [{"path": "/checks/0/parameters/api_key",
                        "secretKeyRef": {"name": "airs", "key": "api-key"}}]});
    support::objects::create::<Guardrail>(&h.env, "pii", guardrail).await;
    let ready = h.wait_for::<Guardrail>("pii", WAIT, |g| g.ready()).await;
    ready
        .status
        .and_then(|s| s.slug)
        .expect("the guardrail's slug")
}

/// A provider bound by `spec.integrationId` to an Integration resource's remote id, and a
/// Config naming a Guardrail whose check takes a Secret value (`resourceRefs`): their creates
/// are refused with errors quoting the integration's key and the guardrail's value, which
/// neither reconcile read. The values reach no status, event, log line or metric.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_quoting_what_a_provider_or_a_config_binds_reach_no_output() {
    use aigw::resources::Config;
    let mut h =
        Harness::start_with_secret_namespace("cred-bound-echo", Duration::from_secs(1)).await;
    put_key(&h, KEY).await;
    ready_integration(&h, integration_spec(&h)).await;
    let integration = Api::<Integration>::all(h.env.client.clone())
        .get(&h.cluster_name("openai"))
        .await
        .unwrap();
    let id = integration
        .status
        .and_then(|s| s.id)
        .expect("the integration's id");
    let airs = "airs-key-Hx4Nq8Tz2Wb6";
    let slug = airs_guardrail(&h, airs).await;

    let direct = h.emulator.management_url();
    let echoing = support::proxy::bound_echo_proxy(direct.clone()).await;
    h.restart_operator_via(&echoing).await;
    let mut by_id = provider_spec(&h);
    by_id["integrationId"] = json!(id);
    by_id.as_object_mut().unwrap().remove("integration");
    support::objects::create::<Provider>(&h.env, "by-id", by_id).await;
    let config = json!({"name": "guarded", "config": {"provider": "@openai-prod"},
        "resourceRefs": [{"path": "/input_guardrails/0", "kind": "Guardrail", "name": "pii"}]});
    support::objects::create::<Config>(&h.env, "guarded", config).await;
    // The same guardrail named by the slug its resource recorded, written in the document.
    let by_slug = json!({"name": "by-slug",
        "config": {"provider": "@openai-prod", "input_guardrails": [slug]}});
    support::objects::create::<Config>(&h.env, "by-slug", by_slug).await;
    let refused = |c: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition]| {
        c.iter()
            .any(|c| c.message.contains("refused") || c.message.contains("withheld"))
    };
    h.wait_for::<Provider>("by-id", WAIT, |p| refused(p.conditions()))
        .await;
    h.wait_for::<Config>("guarded", WAIT, |c| refused(c.conditions()))
        .await;
    let by_slug = h
        .wait_for::<Config>("by-slug", WAIT, |c| refused(c.conditions()))
        .await;
    let mut leaked = Vec::new();
    let provider = h.env.api::<Provider>().get("by-id").await.unwrap();
    let config = h.env.api::<Config>().get("guarded").await.unwrap();
    let places = [
        ("Provider", serde_json::to_string(&provider).unwrap()),
        ("Config", serde_json::to_string(&config).unwrap()),
        ("Config by slug", serde_json::to_string(&by_slug).unwrap()),
        ("the events", h.env.events_text().await),
        ("the metrics", h.ctx.metrics.encode()),
        ("the operator log", support::harness::captured_logs()),
    ];
    for (place, text) in places {
        for value in [KEY, airs].iter().filter(|v| text.contains(**v)) {
            leaked.push(format!("--- {value} in {place} ---\n{text}"));
        }
    }
    h.restart_operator_via(&direct).await;
    h.stop().await;
    assert!(leaked.is_empty(), "values leaked:\n{}", leaked.join("\n"));
}

/// The same Config naming the guardrail by the slug it recorded, refused (the API quoting the
/// guardrail's Secret value) right after a start, while the Guardrail watch cache has not
/// listed yet: which Secrets the refusal could quote is unknown then, so its message is
/// withheld, not shown unchecked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_before_the_caches_that_name_its_secrets_have_listed_is_withheld() {
    use aigw::controller::driver::echoes::WITHHELD;
    use aigw::resources::Config;
    let mut h = Harness::start_with_secret_namespace("cred-unlisted", Duration::from_secs(1)).await;
    let airs = "airs-key-Pz7Kc2Vq9Lm4";
    let slug = airs_guardrail(&h, airs).await;

    let direct = h.emulator.management_url();
    let echoing = support::proxy::bound_echo_proxy(direct.clone()).await;
    h.restart_operator_via_with_late_reads(&echoing, "guardrails", Duration::from_secs(15))
        .await;
    let by_slug = json!({"name": "by-slug",
        "config": {"provider": "@openai-prod", "input_guardrails": [slug]}});
    support::objects::create::<Config>(&h.env, "by-slug", by_slug).await;
    let refused = h
        .wait_for::<Config>("by-slug", WAIT, |c| {
            c.conditions()
                .iter()
                .any(|c| c.message.contains("withheld") || c.message.contains("refused"))
        })
        .await;
    let shown = serde_json::to_string(&refused).unwrap();
    let places = [
        ("Config", shown.clone()),
        ("the events", h.env.events_text().await),
        ("the operator log", support::harness::captured_logs()),
    ];
    let mut leaked = Vec::new();
    for (place, text) in places {
        if text.contains(airs) {
            leaked.push(format!("--- {airs} in {place} ---\n{text}"));
        }
    }
    h.restart_operator_via(&direct).await;
    h.stop().await;
    assert!(leaked.is_empty(), "values leaked:\n{}", leaked.join("\n"));
    assert!(shown.contains(WITHHELD), "withheld: {shown}");
}

/// A failure whose Secrets to conceal hold more values than one message takes
/// (`aigw::controller::driver::echoes::ECHO_VALUES`): a tenant's Config naming two guardrails of
/// forty Secret keys each, refused by the API. Its message is withheld whole, in status and
/// events, instead of being checked against every value (which cost the operator memory and CPU
/// in proportion to what one tenant names, enough to lose its lease or be OOM-killed); a Config
/// of another namespace is still made Ready.
#[tokio::test]
async fn a_failure_naming_more_secret_values_than_one_message_takes_is_withheld() {
    use aigw::controller::driver::echoes::WITHHELD;
    use aigw::resources::{Config, Guardrail};
    let h = Harness::start_two_teams("echo-budget", Duration::from_secs(60), None).await;
    let mut data = serde_json::Map::new();
    for n in 0..80 {
        data.insert(format!("k{n}"), json!(format!("value-{n:03}-Qz7Lp2Xw")));
    }
    h.put_secret("many", Value::Object(data), false).await;
    for (name, keys) in [("g1", 0..40), ("g2", 40..80)] {
        let refs: Vec<Value> = keys
            .map(|n| {
                json!({"path": format!("/checks/0/parameters/p{n}"),
                       "secretKeyRef": {"name": "many", "key": format!("k{n}")}})
            })
            .collect();
        let guardrail = json!({"name": name, "workspaceId": WS_A,
            "checks": [{"id": "panw-prisma-airs.intercept", "parameters": {"profile_name": "strict"}}],
            "secretRefs": refs});
        support::objects::create::<Guardrail>(&h.env, name, guardrail).await;
        h.wait_for::<Guardrail>(name, WAIT, |g| g.ready()).await;
    }
    h.faults(json!({"failing_routes": {support::endpoints::CONFIG_POST: 400}}))
        .await;
    let config = json!({"name": "over", "config": {"provider": "@openai-prod"},
        "resourceRefs": [{"path": "/input_guardrails/0", "kind": "Guardrail", "name": "g1"},
                         {"path": "/input_guardrails/1", "kind": "Guardrail", "name": "g2"}]});
    support::objects::create::<Config>(&h.env, "over", config).await;
    let withheld = |c: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition]| {
        c.iter()
            .any(|c| c.type_ == "Ready" && c.message == WITHHELD)
    };
    h.wait_for::<Config>("over", WAIT, |c| withheld(c.conditions()))
        .await;
    assert!(h.env.events_text().await.contains(WITHHELD));
    h.faults(json!({})).await;
    h.ready_configs_in_both(("mine", "theirs"), WAIT).await;
    h.stop().await;
}

/// An API key whose `secretRef` names a Secret aigw did not deliver (refused, `SecretConflict`)
/// makes no read of it when its failure is concealed: nothing aigw delivered can be in it, and
/// a tenant's Secret of a mebibyte read on every failure cost the operator a GET and the
/// concealment of all it holds.
#[tokio::test]
async fn a_refused_secret_aigw_never_delivered_is_not_read_to_conceal_a_failure() {
    use aigw::resources::ApiKey;
    let h = Harness::start("echo-theirs").await;
    let theirs: Secret = serde_json::from_value(json!({
        "metadata": {"name": "theirs"},
        "stringData": {"doc": "x".repeat(100_000)}
    }))
    .unwrap();
    support::create(&h.env.api::<Secret>(), &theirs).await;
    let key = json!({"name": "taken", "kind": "service", "scopes": ["completions.write"],
                     "secretRef": {"name": "theirs"}});
    support::objects::create::<ApiKey>(&h.env, "taken", key).await;
    h.wait_for::<ApiKey>("taken", WAIT, |k| k.stalled_with("SecretConflict"))
        .await;
    let echo_reads = h.ctx.secrets.fallbacks().get("echo").copied().unwrap_or(0);
    h.stop().await;
    assert_eq!(
        echo_reads, 0,
        "the refused Secret was read to conceal the failure"
    );
}
