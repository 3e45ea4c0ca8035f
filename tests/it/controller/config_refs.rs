//! Issue 12 against a real kube-apiserver and the emulator over HTTP: Secret-backed values in a
//! Config's document (applied, hashed, never echoed) and guardrail references checked against
//! the connection's fully paged guardrail list before anything is written.

use crate::support;

use std::time::Duration;

use aigw::controller::runtime::hash_key::{self, HashKey};
use aigw::resources::Config;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};
use support::harness::{Harness, captured_logs};
use support::objects::{Conditions, object, secret};

const WAIT: Duration = Duration::from_secs(30);
const DRIFT: Duration = Duration::from_secs(2);

fn config(name: &str, spec: Value) -> Config {
    object("Config", name, spec)
}

async fn writes(h: &Harness) -> u64 {
    h.remote_writes().await
}

async fn remote_document(h: &Harness, slug: &str) -> Value {
    let remote = h.get(&format!("/ai_gw/v2/configs/{slug}")).await;
    serde_json::from_str(remote["config"].as_str().expect("config string")).expect("JSON config")
}

async fn seed(h: &Harness, body: Value) -> Value {
    let response = reqwest::Client::new()
        .post(h.url("/_emulator/seed"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "seed refused: {body}");
    response.json().await.unwrap()
}

/// Fails when `value` appears in the Config's status, the namespace's events or the logs.
async fn assert_not_echoed(h: &Harness, name: &str, value: &str) {
    let current = h.env.api::<Config>().get(name).await.unwrap();
    let status = serde_json::to_string(&current.status).unwrap();
    assert!(!status.contains(value), "a secret value is in the status");
    assert!(
        !h.env.events_text().await.contains(value),
        "a secret value is in the events"
    );
    assert!(
        !captured_logs().contains(value),
        "a secret value is in the logs"
    );
}

fn version(c: &Config) -> Option<String> {
    c.status.as_ref().and_then(|s| s.version_id.clone())
}

#[tokio::test]
async fn secret_backed_values_are_applied_hashed_and_never_echoed() {
    let mut h = Harness::start_with("refs-secret", DRIFT).await;
    let first = format!("sk-first-{}", uuid::Uuid::new_v4().simple());
    let target = format!("sk-target-{}", uuid::Uuid::new_v4().simple());
    h.env
        .api::<Secret>()
        .create(
            &PostParams::default(),
            &secret("provider-keys", &[("api_key", &first), ("backup", &target)]),
        )
        .await
        .unwrap();
    let spec = json!({
        "name": "routing",
        "config": {"provider": "openai", "retry": {"attempts": 2},
                   "strategy": {"mode": "fallback"}, "targets": [{"provider": "@backup"}]},
        "secretRefs": [
            {"path": "/api_key", "secretKeyRef": {"name": "provider-keys", "key": "api_key"}},
            {"path": "/targets/0/api_key", "secretKeyRef": {"name": "provider-keys", "key": "backup"}}
        ]
    });
    support::create(&h.env.api(), &config("routing", spec)).await;
    let ready = h.wait_for::<Config>("routing", WAIT, |c| c.ready()).await;
    let status = ready.status.clone().unwrap();
    let slug = status.slug.clone().expect("status.slug");
    assert!(
        status
            .secret_hash
            .as_deref()
            .is_some_and(|h| h.starts_with("hmac-sha256:"))
    );
    let document = remote_document(&h, &slug).await;
    assert_eq!(document["api_key"], first.as_str());
    assert_eq!(document["targets"][0]["api_key"], target.as_str());
    assert_eq!(
        document["provider"], "openai",
        "plain values sit beside them"
    );
    assert_not_echoed(&h, "routing", &first).await;
    assert_not_echoed(&h, "routing", &target).await;
    eprintln!(
        "[case 1] remote api_key is the Secret's value: {}; status.secretHash {}",
        document["api_key"] == first.as_str(),
        status.secret_hash.as_deref().unwrap_or_default()
    );

    // The Secret changes: one PUT, soon, and a new versionId.
    let rotated = format!("sk-rotated-{}", uuid::Uuid::new_v4().simple());
    h.reset_stats().await;
    let before = version(&ready);
    h.env
        .api::<Secret>()
        .replace(
            "provider-keys",
            &PostParams::default(),
            &secret(
                "provider-keys",
                &[("api_key", &rotated), ("backup", &target)],
            ),
        )
        .await
        .unwrap();
    let updated = h
        .wait_for::<Config>("routing", Duration::from_secs(10), |c| {
            c.ready() && version(c).is_some() && version(c) != before
        })
        .await;
    tokio::time::sleep(DRIFT * 2).await;
    h.assert_count("PUT /ai_gw/v2/configs/{slug}", 1).await;
    assert_eq!(
        remote_document(&h, &slug).await["api_key"],
        rotated.as_str()
    );
    assert_ne!(
        updated.status.as_ref().unwrap().secret_hash,
        status.secret_hash,
        "the recorded hash follows the value"
    );
    let events = h.env.events_text().await;
    assert!(
        events.contains("Updated") && !events.contains("DriftCorrected"),
        "{events}"
    );
    eprintln!(
        "[case 2] Secret changed: PUTs {}, versionId {:?} -> {:?}",
        h.count("PUT /ai_gw/v2/configs/{slug}").await,
        before.as_deref().unwrap_or_default(),
        version(&updated).unwrap_or_default()
    );

    // Reads that mask the values, after a restart: no write. A remote write that changes
    // nothing aigw manages (the same name) makes the drift list show the config changed, so the
    // restarted operator reads it, masked, again and again.
    h.faults(json!({"mask_credentials": true})).await;
    assert_eq!(remote_document(&h, &slug).await["api_key"], "********");
    h.restart_operator().await;
    for _ in 0..2 {
        h.put(
            &format!("/ai_gw/v2/configs/{slug}"),
            json!({"name": "routing"}),
        )
        .await;
        h.reset_stats().await;
        let reread = support::wait_until(WAIT, || async {
            (h.count("GET /ai_gw/v2/configs/{slug}").await >= 1).then_some(())
        })
        .await;
        assert!(
            reread.is_some(),
            "the restarted operator did not read the touched config: {}",
            h.stats().await
        );
        tokio::time::sleep(DRIFT * 3).await;
        assert_eq!(writes(&h).await, 0, "{}", h.stats().await);
    }
    eprintln!(
        "[case 3] masked reads over 3 drift intervals and a restart: GETs {}, writes {}",
        h.count("GET /ai_gw/v2/configs/{slug}").await,
        writes(&h).await
    );

    // The Secret is deleted: Ready=False naming it, and nothing is written.
    h.reset_stats().await;
    h.env.delete::<Secret>("provider-keys").await;
    let message = h
        .condition_message::<Config>("routing", WAIT, ("Ready", "SecretNotFound"))
        .await;
    assert!(message.contains("provider-keys"), "{message}");
    tokio::time::sleep(DRIFT * 2).await;
    assert_eq!(writes(&h).await, 0, "{}", h.stats().await);
    eprintln!(
        "[case 4] Secret deleted: Ready=False {message:?}; writes {}",
        writes(&h).await
    );
    for value in [&first, &target, &rotated] {
        assert_not_echoed(&h, "routing", value).await;
    }
    h.stop().await;
}

/// A Config `routing` whose one `secretRefs` entry names key `api_key` of Secret `keys`,
/// holding `first`: refused with `reason` (the message mentions `mentions`, never the data),
/// no API write; then the Secret replaced by `fixed`, noticed through the Secret watch, and
/// the Config made Ready without a spec change, by one POST.
async fn refused_until_the_secret_is_fixed(
    prefix: &str,
    first: &[(&str, &str)],
    reason: &str,
    mentions: &[&str],
    fixed: &[(&str, &str)],
) {
    let h = Harness::start_with(prefix, DRIFT).await;
    support::create(&h.env.api(), &secret("keys", first)).await;
    let spec = json!({"name": "routing", "config": {"provider": "openai"},
        "secretRefs": [{"path": "/api_key", "secretKeyRef": {"name": "keys", "key": "api_key"}}]});
    support::create(&h.env.api(), &config("routing", spec)).await;
    let (refused, message) = h
        .env
        .wait_condition::<Config>("routing", WAIT, ("Ready", reason))
        .await;
    support::assert_mentions(&message, mentions);
    for (_, value) in first {
        assert!(!message.contains(&value[..value.len().min(8)]), "{message}");
    }
    assert_eq!(writes(&h).await, 0);

    h.env
        .api::<Secret>()
        .replace("keys", &PostParams::default(), &secret("keys", fixed))
        .await
        .unwrap();
    let ready = h.wait_for::<Config>("routing", WAIT, |c| c.ready()).await;
    assert_eq!(ready.meta().generation, refused.meta().generation);
    assert_eq!(h.count("POST /ai_gw/v2/configs").await, 1);
    h.stop().await;
}

#[tokio::test]
async fn a_missing_key_names_the_secret_and_the_key() {
    let present = [("other", "x-other-value")];
    let fixed = [("other", "x-other-value"), ("api_key", "sk-late")];
    let mentions = ["keys", "api_key"];
    refused_until_the_secret_is_fixed("refs-key", &present, "SecretKeyNotFound", &mentions, &fixed)
        .await;
}

/// A Secret value past what a `secretRefs` value may hold (a tenant's Secret of hundreds of
/// KiB, named by many Configs, grew the operator past its memory limit as each reconcile built
/// and sent the document with it): refused before the document is built, naming the Secret and
/// the key, never the value; a smaller value is noticed through the Secret watch.
#[tokio::test]
async fn a_secret_value_past_the_bound_is_refused_before_the_document_is_built() {
    let large = "k".repeat(aigw::controller::kinds::config_refs::SECRET_VALUE_BYTES + 1);
    let first = [("api_key", large.as_str())];
    let mentions = ["keys", "api_key", "64 KiB"];
    let fixed = [("api_key", "sk-small")];
    refused_until_the_secret_is_fixed("refs-large", &first, "SecretTooLarge", &mentions, &fixed)
        .await;
}

#[tokio::test]
async fn plaintext_credentials_are_rejected_at_admission() {
    let env = support::TestEnv::new("refs-plain").await;
    let configs = env.api::<Config>();
    for (field, document) in [
        (
            "api_key",
            json!({"provider": "openai", "api_key": "sk-plain"}),
        ),
        (
            "aws_secret_access_key",
            json!({"targets": [{"targets": [{"provider": "bedrock", "aws_secret_access_key": "s"}]}]}),
        ),
    ] {
        let error = configs
            .create(
                &PostParams::default(),
                &config("plain", json!({"name": "plain", "config": document})),
            )
            .await
            .expect_err("a plaintext credential was admitted");
        let message = error.to_string();
        assert!(
            message.contains(field) && message.contains("spec.secretRefs"),
            "{message}"
        );
        assert!(
            !message.contains("sk-plain") && !message.contains("\"s\""),
            "{message}"
        );
        eprintln!("[case 5] plaintext {field} refused: {message}");
    }
    // The same document with the credential from a Secret is admitted.
    support::create(&configs, &config(
                "plain",
                json!({"name": "plain", "config": {"provider": "openai"},
                       "secretRefs": [{"path": "/api_key", "secretKeyRef": {"name": "k", "key": "api_key"}}]}),
            )).await;
    env.cleanup().await;
}

#[tokio::test]
async fn an_unknown_guardrail_stalls_until_it_exists() {
    let h = Harness::start_with("refs-guard", DRIFT).await;
    seed(
        &h,
        json!({"guardrails": [{"slug": "pg-known-1", "name": "known"}]}),
    )
    .await;
    let spec = json!({"name": "guarded", "config": {
        "output_guardrails": ["pg-known-1"],
        "strategy": {"mode": "fallback"},
        "targets": [{"provider": "@a", "input_guardrails": ["pg-missing-123"]}, {"provider": "@b"}]}});
    support::create(&h.env.api(), &config("guarded", spec)).await;
    let (stalled, message) = h
        .env
        .wait_condition::<Config>("guarded", WAIT, ("Stalled", "UnresolvedGuardrail"))
        .await;
    assert!(
        message.contains("pg-missing-123 at /targets/0/input_guardrails/0"),
        "{message}"
    );
    assert!(!message.contains("pg-known-1"), "{message}");
    let (resolved, reason, _) = stalled.condition("GuardrailsResolved").unwrap();
    assert_eq!(
        (resolved.as_str(), reason.as_str()),
        ("False", "UnresolvedGuardrail")
    );
    tokio::time::sleep(DRIFT * 2).await;
    assert_eq!(writes(&h).await, 0, "{}", h.stats().await);
    eprintln!(
        "[case 6] Stalled/UnresolvedGuardrail: {message:?}; writes {}",
        writes(&h).await
    );

    // The guardrail is created: Ready, without a spec change.
    seed(
        &h,
        json!({"guardrails": [{"slug": "pg-missing-123", "name": "late"}]}),
    )
    .await;
    let ready = h.wait_for::<Config>("guarded", WAIT, |c| c.ready()).await;
    assert_eq!(ready.meta().generation, stalled.meta().generation);
    let (resolved, _, _) = ready.condition("GuardrailsResolved").unwrap();
    assert_eq!(resolved, "True");
    assert_eq!(h.count("POST /ai_gw/v2/configs").await, 1);
    eprintln!(
        "[case 7] guardrail created: Ready, generation {:?} unchanged, GuardrailsResolved {resolved}",
        ready.meta().generation
    );
    h.stop().await;
}

/// A guardrail list that does not prove itself whole (here every answer says more rows follow)
/// is no proof that a reference names no guardrail: the Config says the list came back
/// incomplete, writes nothing, and once the list is whole says which guardrail is missing.
#[tokio::test]
async fn a_guardrail_list_that_proves_nothing_says_so() {
    let h = Harness::start_with("refs-unproven", DRIFT).await;
    h.faults(json!({"list_has_more": true})).await;
    let spec = json!({"name": "unproven", "config": {"output_guardrails": ["pg-unseen-1"]}});
    support::create(&h.env.api(), &config("unproven", spec)).await;
    let stalled = ("Stalled", "UnresolvedGuardrail");
    let (_, message) = h
        .env
        .wait_condition::<Config>("unproven", WAIT, stalled)
        .await;
    assert!(
        message.contains("came back incomplete and does not show pg-unseen-1"),
        "{message}"
    );
    h.faults(json!({})).await;
    let whole = support::wait_until(WAIT, || async {
        let config = h.env.api::<Config>().get("unproven").await.ok()?;
        let (_, _, message) = config.condition("GuardrailsResolved")?;
        message
            .contains("has no guardrail pg-unseen-1")
            .then_some(())
    })
    .await;
    assert!(whole.is_some(), "the whole list was not read again");
    assert_eq!(writes(&h).await, 0, "{}", h.stats().await);
    h.stop().await;
}

#[tokio::test]
async fn references_on_the_third_page_resolve() {
    let h = Harness::start_with("refs-pages", DRIFT).await;
    let made = seed(
        &h,
        json!({"generate_guardrails": {"count": 2500, "prefix": "pg-bulk"}}),
    )
    .await;
    assert_eq!(made["generate_guardrails"]["count"], 2500);
    let last_id = made["generate_guardrails"]["last"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let spec = json!({"name": "paged", "config": {
        "input_guardrails": ["pg-bulk-002400"],
        "before_request_hooks": [{"id": last_id}],
        "targets": [{"provider": "@a", "output_guardrails": ["pg-bulk-000001"]}]}});
    support::create(&h.env.api(), &config("paged", spec)).await;
    let ready = h.wait_for::<Config>("paged", WAIT, |c| c.ready()).await;
    let (resolved, _, message) = ready.condition("GuardrailsResolved").unwrap();
    assert_eq!(resolved, "True", "{message}");
    assert!(
        h.count("GET /ai_gw/admin/v2/guardrails").await >= 3,
        "three pages were read: {}",
        h.stats().await
    );
    eprintln!(
        "[case 8] 2,500 guardrails: GuardrailsResolved {resolved} ({message}); list requests {}",
        h.count("GET /ai_gw/admin/v2/guardrails").await
    );
    h.stop().await;
}

#[tokio::test]
async fn two_hundred_configs_share_a_few_listings() {
    // The default drift interval: the listing is trusted for its full TTL (30 s).
    let h = Harness::start("refs-many").await;
    seed(
        &h,
        json!({"guardrails": [{"slug": "pg-shared", "name": "shared"}]}),
    )
    .await;
    let configs = h.env.api::<Config>();
    let creates = (0..200).map(|n| {
        let configs = configs.clone();
        async move {
            let spec = json!({"name": format!("many-{n}"),
                              "config": {"input_guardrails": ["pg-shared"], "retry": {"attempts": 1}}});
            support::create(&configs, &config(&format!("many-{n}"), spec)).await;
        }
    });
    futures::future::join_all(creates).await;
    let all_ready = support::wait_until(Duration::from_secs(240), || async {
        let list = configs.list(&ListParams::default()).await.ok()?;
        (list.items.len() == 200 && list.items.iter().all(|c| c.ready())).then_some(())
    })
    .await;
    if all_ready.is_none() {
        let list = configs.list(&ListParams::default()).await.unwrap();
        let waiting: Vec<String> = list
            .items
            .iter()
            .filter(|c| !c.ready())
            .map(|c| c.name_any())
            .collect();
        panic!("not all Configs became Ready: {waiting:?}");
    }
    let listings = h.count("GET /ai_gw/admin/v2/guardrails").await;
    assert!(
        (1..=10).contains(&listings),
        "the guardrail list was read {listings} times for 200 Configs"
    );
    assert_eq!(h.count("POST /ai_gw/v2/configs").await, 200);
    eprintln!("[case 9] 200 Configs Ready; guardrail list requests: {listings}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_names_secret_sources_and_unresolved_guardrails() {
    let emulator = aigw::emulator::spawn(aigw::emulator::EmulatorOptions::new(
        support::harness::TOKEN,
    ))
    .await
    .unwrap();
    let url = emulator.management_url();
    let response = reqwest::Client::new()
        .post(format!("{url}/_emulator/seed"))
        .json(&json!({"guardrails": [{"slug": "pg-known-2", "name": "known"}]}))
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success());
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, support::harness::TOKEN).unwrap();
    let manifest = dir.path().join("config.yaml");
    std::fs::write(
        &manifest,
        r#"
apiVersion: aigw.io/v1alpha1
kind: Config
metadata: {name: planned, namespace: team-a}
spec:
  name: planned
  config:
    input_guardrails: [pg-known-2, pg-nope-9]
    targets: [{provider: openai}]
  secretRefs:
    - {path: /targets/0/api_key, secretKeyRef: {name: keys, key: openai}}
"#,
    )
    .unwrap();
    let args = [
        "plan".to_string(),
        "-f".into(),
        manifest.display().to_string(),
        "--management-url".into(),
        url.clone(),
        "--token-file".into(),
        token.display().to_string(),
    ];
    let mut command = support::cli::command();
    command.args(&args).env_remove("KUBECONFIG");
    let (code, text) = support::cli::run(command).await;
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("pg-nope-9 at /input_guardrails/1"), "{text}");
    assert!(!text.contains("pg-known-2 at"), "{text}");
    assert!(text.contains("(secret keys/openai)"), "{text}");
}

/// The unkeyed hash an earlier release recorded: `sha256:` of the uid and `\0path=value`.
fn unkeyed_hash(uid: &str, pairs: &[(&str, &str)]) -> String {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    context.update(uid.as_bytes());
    for (path, value) in pairs {
        context.update(format!("\0{path}={value}").as_bytes());
    }
    let hex: String = context
        .finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

/// Issue 27 (F8): `status.secretHash` is keyed with the operator's own Secret. Restarts read the
/// same key (no write at steady state); a hash in the earlier unkeyed format is one re-check and
/// one rewrite, never an error.
#[tokio::test]
async fn secret_hashes_are_keyed_by_the_operators_secret_and_survive_restarts() {
    let mut h = Harness::start_with("refs-hashkey", DRIFT).await;
    let value = "Summer2025!";
    support::create(&h.env.api(), &secret("pw", &[("pw", value)])).await;
    let spec = json!({
        "name": "keyed",
        "config": {"provider": "openai", "metadata": {}},
        "secretRefs": [{"path": "/metadata/pw", "secretKeyRef": {"name": "pw", "key": "pw"}}]
    });
    support::create(&h.env.api(), &config("keyed", spec)).await;
    let ready = h.wait_for::<Config>("keyed", WAIT, |c| c.ready()).await;
    let uid = ready.meta().uid.clone().unwrap();
    let recorded = ready
        .status
        .clone()
        .unwrap()
        .secret_hash
        .expect("secretHash");
    let old = unkeyed_hash(&uid, &[("/metadata/pw", value)]);
    assert!(recorded.starts_with("hmac-sha256:"), "{recorded}");
    assert_ne!(recorded, old, "the guessable unkeyed hash");

    // The key is in the operator's Secret, 32 bytes, and it is the one the operator hashes with.
    let secrets = kube::Api::<Secret>::namespaced(h.env.client.clone(), &h.hash_key_namespace);
    let stored = secrets
        .get(hash_key::SECRET_NAME)
        .await
        .expect("the hash key Secret");
    let bytes = stored.data.as_ref().unwrap()[hash_key::DATA_KEY].0.clone();
    assert_eq!(bytes.len(), 32);
    let probe = [b"probe".as_slice()];
    assert_eq!(
        HashKey::from_bytes(&bytes).hash(probe),
        h.ctx.hash_key.hash(probe)
    );

    // Two restarts: the same key, no remote write, the same hash, the Secret untouched.
    tokio::time::sleep(DRIFT * 2).await;
    h.reset_stats().await;
    for _ in 0..2 {
        h.restart_operator().await;
        tokio::time::sleep(DRIFT * 2).await;
    }
    assert_eq!(h.remote_writes().await, 0, "{}", h.stats().await);
    let after = h.env.api::<Config>().get("keyed").await.unwrap();
    assert_eq!(
        after.status.unwrap().secret_hash.as_deref(),
        Some(recorded.as_str())
    );
    let again = secrets.get(hash_key::SECRET_NAME).await.unwrap();
    assert_eq!(
        again.metadata.resource_version,
        stored.metadata.resource_version
    );
    assert_eq!(again.data.unwrap()[hash_key::DATA_KEY].0, bytes);
    eprintln!("[case 1] two restarts: remote writes 0, secretHash kept, key Secret untouched");

    // A status written by the previous release (the unkeyed format): one re-check, one PUT of
    // the same values, the keyed hash recorded; then quiet, and no warning.
    h.env
        .api::<Config>()
        .patch_status(
            "keyed",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"secretHash": old}})),
        )
        .await
        .unwrap();
    h.reset_stats().await;
    h.restart_operator().await;
    let rewritten = h
        .wait_for::<Config>("keyed", WAIT, |c| {
            c.ready() && c.status.as_ref().and_then(|s| s.secret_hash.as_deref()) == Some(&recorded)
        })
        .await;
    tokio::time::sleep(DRIFT * 3).await;
    h.assert_count("PUT /ai_gw/v2/configs/{slug}", 1).await;
    assert_eq!(h.remote_writes().await, 1, "{}", h.stats().await);
    assert!(rewritten.ready());
    let events = h.env.events_text().await;
    assert!(!events.contains("Warning"), "{events}");
    assert_not_echoed(&h, "keyed", value).await;
    eprintln!("[case 2] old-format secretHash: 1 PUT, keyed hash recorded, no warning");

    // Two operators starting at once in a namespace without the Secret agree on one key (the
    // second create meets 409 and reads the first's); a dry run there creates nothing.
    let fresh = &h.env.namespace;
    let dry = hash_key::load(&h.ctx.kube, fresh, true).await.unwrap();
    let own = kube::Api::<Secret>::namespaced(h.env.client.clone(), fresh);
    assert!(
        own.get_opt(hash_key::SECRET_NAME).await.unwrap().is_none(),
        "a dry run created it"
    );
    let (one, two) = tokio::join!(
        hash_key::load(&h.ctx.kube, fresh, false),
        hash_key::load(&h.ctx.kube, fresh, false)
    );
    let (one, two) = (one.unwrap(), two.unwrap());
    assert_eq!(one.hash(probe), two.hash(probe));
    assert_ne!(dry.hash(probe), one.hash(probe));
    assert!(own.get_opt(hash_key::SECRET_NAME).await.unwrap().is_some());
    h.stop().await;
}

/// The API refuses a Config's DELETE with an answer quoting a Secret-backed value, after a
/// restart: this process never resolved the Config, so it remembers no value to conceal. The
/// cleanup reads the Secrets the spec names and conceals them. Before, the value reached the
/// status, the events and the log.
#[tokio::test]
async fn a_refused_delete_quoting_a_secret_value_after_a_restart_hides_it() {
    let h = Harness::start_with("refs-delete-echo", DRIFT).await;
    let value = format!("sk-held-{}", uuid::Uuid::new_v4().simple());
    support::create(&h.env.api(), &secret("keys", &[("api_key", &value)])).await;
    let spec = json!({"name": "routing", "config": {"provider": "openai"},
        "secretRefs": [{"path": "/api_key", "secretKeyRef": {"name": "keys", "key": "api_key"}}]});
    support::create(&h.env.api(), &config("routing", spec)).await;
    h.wait_for::<Config>("routing", WAIT, |c| c.ready()).await;
    refused_delete_hides::<Config>(h, "routing", "/ai_gw/v2/configs/", &value).await;
}

/// Restarts the operator behind a proxy that refuses every DELETE under `route` quoting
/// `value`, deletes the Ready `name`, and checks that the refusal is recorded without the
/// value (status, events, log); then lets the delete through and stops `h`.
pub async fn refused_delete_hides<K>(mut h: Harness, name: &str, route: &'static str, value: &str)
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>,
    K: Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    use support::proxy::{Received, proxy, refusal};
    let quoted = value.to_string();
    let refusing = proxy(h.emulator.management_url(), move |received: Received| {
        let quoted = quoted.clone();
        async move {
            let parts = &received.parts;
            if parts.method == reqwest::Method::DELETE && parts.uri.path().starts_with(route) {
                return refusal(400, format!("cannot delete: it holds {quoted}"));
            }
            received.pass().await
        }
    })
    .await;
    h.restart_operator_via(&refusing).await;
    let api = h.env.api::<K>();
    api.delete(name, &Default::default()).await.unwrap();
    let status = support::wait_until(WAIT, || async {
        let object = serde_json::to_value(api.get(name).await.ok()?).ok()?;
        let status = object["status"].to_string();
        status.contains("cannot delete").then_some(status)
    })
    .await
    .expect("the refused cleanup is recorded");
    assert!(!status.contains(value), "a secret value is in the status");
    let events = h.env.events_text().await;
    assert!(!events.contains(value), "a secret value is in the events");
    let logs = captured_logs();
    assert!(!logs.contains(value), "a secret value is in the logs");
    let direct = h.emulator.management_url();
    h.restart_operator_via(&direct).await;
    support::wait_until(WAIT, || async {
        api.get_opt(name).await.ok()?.is_none().then_some(())
    })
    .await
    .expect("deleted once the DELETE goes through");
    h.stop().await;
}
