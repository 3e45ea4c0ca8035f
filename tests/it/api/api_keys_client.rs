//! The typed client and `aigw api api-keys` against the emulator over real HTTP: every operation
//! of both kinds, checks made before sending, one-time values that never reach `Debug`, reads or
//! errors, and create and rotate answers lost after commit (reported, never repeated).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::emu::{ClientEnv, TOKEN, key_transition_options};
use crate::support::objects::{USER_ID, WS_A};
use aigw::api::{
    ApiError, ApiKeyDefaults, ApiKeyKind, ApiKeysListQuery, Client, CreateApiKeyRequest, Reading,
    RequestObserver, RotateApiKeyRequest, UpdateApiKeyRequest,
};
use serde_json::{Value, json};

/// Caps transitions well above how long these tests take, so an old key is still live when checked.
const TRANSITION: Duration = Duration::from_secs(60);

impl ClientEnv {
    /// Its emulator caps transitions at [`TRANSITION`].
    async fn with_long_transitions() -> Self {
        Self::start_with(key_transition_options(TRANSITION)).await
    }

    async fn api_keys(&self) -> Vec<Value> {
        let (_, state) = self.control(reqwest::Method::GET, "state", json!({})).await;
        state["api_keys"].as_array().cloned().unwrap_or_default()
    }

    /// Whether the emulator takes `key` for the key `id` right now.
    async fn live(&self, id: &str, key: &str) -> bool {
        let path = format!("api-keys/{id}/handshake");
        let (status, _) = self
            .control(reqwest::Method::POST, &path, json!({ "key": key }))
            .await;
        status == 200
    }
}

/// Counts the attempts the client makes per method and endpoint.
#[derive(Default)]
struct Attempts(Mutex<Vec<(String, String)>>);

impl RequestObserver for Attempts {
    fn on_response(&self, method: &str, endpoint: &str, _: Option<u16>, _: Duration) {
        let mut seen = self.0.lock().unwrap();
        seen.push((method.to_owned(), endpoint.to_owned()));
    }
}

impl Attempts {
    fn count(&self, method: &str, endpoint: &str) -> usize {
        let seen = self.0.lock().unwrap();
        seen.iter()
            .filter(|(m, e)| m == method && e == endpoint)
            .count()
    }
}

fn request(name: &str) -> CreateApiKeyRequest {
    CreateApiKeyRequest {
        name: name.into(),
        scopes: vec!["completions.write".into()],
        key_type: Some("workspace".into()),
        workspace_id: Some(WS_A.into()),
        organisation_id: Some("1234567890".into()),
        ..Default::default()
    }
}

#[tokio::test]
async fn the_client_creates_reads_updates_rotates_and_deletes_keys() {
    let env = ClientEnv::with_long_transitions().await;
    let client = env.client();
    let service = client.api_keys(ApiKeyKind::Service);
    let users = client.api_keys(ApiKeyKind::User);

    // Checked before sending: nothing reaches the emulator.
    let err = users.create(&request("no user")).await.unwrap_err();
    assert!(
        matches!(err, ApiError::Validation { ref field, .. } if field == "user_id"),
        "{err:?}"
    );
    let no_scopes = CreateApiKeyRequest {
        scopes: Vec::new(),
        ..request("x")
    };
    assert!(service.create(&no_scopes).await.is_err());
    let short = RotateApiKeyRequest::with_transition(Duration::from_secs(60));
    assert!(matches!(
        service.rotate("k", &short).await,
        Err(ApiError::Validation { .. })
    ));
    assert!(env.api_keys().await.is_empty());

    let created = service.create(&request("svc")).await.unwrap();
    assert!(
        !format!("{created:?}").contains(created.key.expose()),
        "Debug hides the key"
    );
    assert!(env.live(&created.id, created.key.expose()).await);
    let user = CreateApiKeyRequest {
        user_id: Some(USER_ID.into()),
        key_type: Some("user".into()),
        ..request("mine")
    };
    let user = users.create(&user).await.unwrap();
    for n in 0..2 {
        service
            .create(&request(&format!("more {n}")))
            .await
            .unwrap();
    }

    let read = service.get(&created.id).await.unwrap();
    assert!(
        read.key.as_ref().is_some_and(|key| key.is_masked()),
        "{read:?}"
    );
    assert_eq!(read.expiry_enforced, Some(false));
    assert_eq!(
        read.extra["creation_mode"], "api",
        "unknown fields are kept"
    );
    let paged = ApiKeysListQuery {
        page_size: Some(1),
        ..Default::default()
    };
    let listing = service.listing(&paged, Reading::Proof).await.unwrap();
    assert_eq!(listing.items.len(), 3, "all pages");
    assert!(listing.complete);
    assert_eq!(
        users
            .list(&ApiKeysListQuery::default())
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(
        service.get(&user.id).await.unwrap_err().is_not_found(),
        "kind matters"
    );

    let update = UpdateApiKeyRequest {
        name: Some("renamed".into()),
        scopes: Some(vec!["completions.write".into(), "logs.write".into()]),
        expires_at: Some(Some("2999-01-01T00:00:00Z".into())),
        defaults: Some(ApiKeyDefaults {
            allow_config_override: Some(false),
            ..Default::default()
        }),
        ..Default::default()
    };
    service.update(&created.id, &update).await.unwrap();
    let read = service.get(&created.id).await.unwrap();
    assert_eq!(read.name.as_deref(), Some("renamed"));
    assert_eq!(
        (read.expiry_enforced, read.allow_config_override),
        (Some(true), Some(false))
    );
    assert!(
        service
            .update(&created.id, &UpdateApiKeyRequest::default())
            .await
            .is_err()
    );

    let rotation = RotateApiKeyRequest::with_transition(Duration::from_secs(3600));
    let rotated = service.rotate(&created.id, &rotation).await.unwrap();
    assert_eq!(rotated.id, created.id);
    assert_ne!(rotated.key, created.key);
    assert!(rotated.key_transition_expires_at.is_some());
    assert!(
        env.live(&created.id, created.key.expose()).await,
        "old key in transition"
    );
    assert!(env.live(&created.id, rotated.key.expose()).await);
    let again = service
        .rotate(&created.id, &RotateApiKeyRequest::default())
        .await
        .unwrap();
    assert!(env.live(&created.id, again.key.expose()).await);

    service.delete(&created.id).await.unwrap();
    let gone = service.get(&created.id).await.unwrap_err();
    assert!(gone.is_not_found(), "{gone:?}");
    assert!(!gone.to_string().contains(again.key.expose()));
    users.delete(&user.id).await.unwrap();
}

#[tokio::test]
async fn lost_answers_to_create_and_rotate_are_reported_not_repeated() {
    let env = ClientEnv::with_long_transitions().await;
    let attempts = Arc::new(Attempts::default());
    let client = Client::new(env.config().observer(attempts.clone())).unwrap();
    let service = client.api_keys(ApiKeyKind::Service);

    env.faults(json!({"drop_after_commit_rate": 1.0})).await;
    let err = service.create(&request("dropped")).await.unwrap_err();
    assert!(err.outcome_unknown(), "{err:?}");
    assert!(err.is_transient());
    assert_eq!(
        attempts.count("POST", "/ai_gw/v2/api-keys/service"),
        1,
        "not retried"
    );
    env.faults(json!({})).await;
    let keys = env.api_keys().await;
    assert_eq!(
        keys.len(),
        1,
        "the key exists once; its value reached nobody"
    );
    let id = keys[0]["id"].as_str().unwrap().to_string();
    let listed = service.list(&ApiKeysListQuery::default()).await.unwrap();
    assert_eq!(listed.len(), 1, "the caller finds it by listing");

    env.faults(json!({"drop_after_commit_rate": 1.0})).await;
    let err = service
        .rotate(&id, &RotateApiKeyRequest::default())
        .await
        .unwrap_err();
    assert!(err.outcome_unknown(), "{err:?}");
    let rotate = "/ai_gw/v2/api-keys/service/{keyId}/rotate";
    assert_eq!(attempts.count("POST", rotate), 1, "not retried");
    env.faults(json!({})).await;
    assert_eq!(
        env.api_keys().await[0]["rotations"],
        1,
        "rotated exactly once"
    );
}

#[tokio::test]
async fn api_keys_through_the_cli_print_the_value_only_on_create_and_rotate() {
    let env = ClientEnv::with_long_transitions().await;
    let body = tempfile::NamedTempFile::new().expect("body file");
    let create = json!({"name": "cli", "scopes": ["completions.write"], "user_id": USER_ID,
                        "workspace_id": WS_A, "type": "user"});
    std::fs::write(body.path(), create.to_string()).unwrap();
    let file = body.path().display().to_string();
    let run = |args: Vec<String>| {
        let env = &env;
        async move {
            let url = env.emulator.management_url();
            let output = crate::support::cli::aigw_api_ok(&url, TOKEN, &args).await;
            String::from_utf8(output.stdout).expect("utf-8")
        }
    };
    let args = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();

    let created: Value = serde_json::from_str(
        &run(args(&["api-keys", "create", "--kind", "user", "-f", &file])).await,
    )
    .unwrap();
    let id = created["id"].as_str().expect("an id").to_string();
    let key = created["key"]
        .as_str()
        .expect("the one-time key")
        .to_string();
    assert_eq!(env.api_keys().await[0]["key"], json!(key));

    let listed = run(args(&["api-keys", "list", "--kind", "user"])).await;
    let read = run(args(&["api-keys", "get", &id, "--kind", "user"])).await;
    for printed in [&listed, &read] {
        assert!(
            !printed.contains(&key),
            "reads never print the key: {printed}"
        );
        assert!(printed.contains("****"), "{printed}");
    }
    let listed: Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    let none: Value = serde_json::from_str(&run(args(&["api-keys", "list"])).await).unwrap();
    assert_eq!(none, json!([]), "no service keys");

    std::fs::write(
        body.path(),
        r#"{"name": "renamed", "alert_emails": ["ops@example.com"]}"#,
    )
    .unwrap();
    let updated = run(args(&[
        "api-keys", "update", &id, "--kind", "user", "-f", &file,
    ]))
    .await;
    assert_eq!(updated.trim(), "{}");

    let rotate = |transition: &'static str| {
        [
            "api-keys",
            "rotate",
            id.as_str(),
            "--kind",
            "user",
            "--transition",
            transition,
        ]
    };
    let rotated = run(args(&rotate("45m"))).await;
    let rotated: Value = serde_json::from_str(&rotated).unwrap();
    let new_key = rotated["key"].as_str().expect("the new key").to_string();
    assert_ne!(new_key, key);
    assert!(
        rotated["key_transition_expires_at"].is_string(),
        "{rotated}"
    );
    assert!(
        env.live(&id, &key).await,
        "the old key is in its transition"
    );
    assert!(env.live(&id, &new_key).await);

    let too_short = env.aigw_api(&rotate("5m")).await;
    assert!(!too_short.status.success(), "refused before sending");
    run(args(&["api-keys", "delete", &id, "--kind", "user"])).await;
    let missing = env
        .aigw_api(&["api-keys", "get", &id, "--kind", "user"])
        .await;
    assert!(!missing.status.success());
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(stderr.contains("404"), "{stderr}");
    assert!(
        !stderr.contains(&key) && !stderr.contains(&new_key),
        "{stderr}"
    );
}
