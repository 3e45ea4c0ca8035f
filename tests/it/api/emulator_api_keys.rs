//! The emulator's API keys over real HTTP: create with a one-time key, masked reads, lists and
//! paging, update and its fixed fields, hard delete, rotation with a transition (shortened by
//! `min_key_transition`), the handshake, seeding, state and faults.

use std::time::Duration;

use crate::support;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use support::emu::{Emu, TOKEN, assert_ab, key_transition_options, text};
use support::objects::{USER_ID, WS_A, WS_B};

const SERVICE: &str = "/ai_gw/v2/api-keys/service";
const USER: &str = "/ai_gw/v2/api-keys/user";
/// The numeric TSG id writes carry as `organisation_id`.
const TSG: &str = "1234567890";
/// How long a rotation's old key keeps working in these tests.
const TRANSITION: Duration = Duration::from_secs(2);

impl Emu {
    /// An emulator whose rotations keep the old key for [`TRANSITION`] at most.
    async fn with_short_transitions() -> Self {
        Self::start_with(key_transition_options(TRANSITION)).await
    }

    /// Creates a key under `base`; returns its path and the one-time value.
    async fn create(&self, base: &str, body: Value) -> (String, String) {
        let (status, receipt) = self.post(base, body).await;
        assert_eq!(status, StatusCode::OK, "{receipt}");
        (
            format!("{base}/{}", text(&receipt["id"])),
            text(&receipt["key"]),
        )
    }

    /// `POST /_emulator/api-keys/{id}/handshake`: status and answer.
    async fn handshake(&self, key_path: &str, key: &str) -> (StatusCode, Value) {
        let path = format!("/_emulator/api-keys/{}/handshake", id_of(key_path));
        self.control(Method::POST, &path, Some(json!({ "key": key })))
            .await
    }

    /// The dump of one key from `GET /_emulator/state`.
    async fn dumped(&self, key_path: &str) -> Value {
        let id = id_of(key_path);
        self.state_record("api_keys", "id", id).await
    }
}

fn id_of(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or_default()
}

fn rows(list: &Value) -> usize {
    list["data"].as_array().map_or(0, Vec::len)
}

fn service_key(name: &str) -> Value {
    json!({"name": name, "scopes": ["completions.write"], "workspace_id": WS_A,
           "organisation_id": TSG, "type": "workspace"})
}

fn user_key(name: &str) -> Value {
    json!({"name": name, "scopes": ["completions.write"], "workspace_id": WS_A,
           "user_id": USER_ID, "type": "user"})
}

#[tokio::test]
async fn create_validates_and_reads_back_the_masked_live_shape() {
    let emu = Emu::with_short_transitions().await;
    let cases = [
        ("name", json!({"name": null})),
        ("scopes", json!({"scopes": null})),
        ("scopes", json!({"scopes": []})),
        ("scopes", json!({"scopes": [""]})),
        ("type", json!({"type": "user"})),
        ("user_id", json!({"user_id": USER_ID})),
        (
            "rate_limits",
            json!({"rate_limits": [{"type": "requests", "unit": "rpy", "value": 1}]}),
        ),
        ("alert_emails", json!({"alert_emails": ["nobody"]})),
        ("expires_at", json!({"expires_at": "tomorrow"})),
        (
            "rotation_policy",
            json!({"rotation_policy": {"key_transition_period_ms": 60000}}),
        ),
        (
            "rotation_policy",
            json!({"rotation_policy": {"rotation_period": "weekly", "next_rotation_at": "2030-01-01T00:00:00Z"}}),
        ),
    ];
    for (field, patch) in cases {
        let mut body = service_key("svc");
        for (key, value) in patch.as_object().expect("patch") {
            body[key] = value.clone();
        }
        let (status, error) = emu.post(SERVICE, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{field}: {error}");
        assert_ab(&error, "AB01", field);
    }
    let mut no_scopes = service_key("svc");
    no_scopes.as_object_mut().expect("body").remove("scopes");
    let error = emu.post_refused(SERVICE, no_scopes).await;
    assert_ab(&error, "AB01", "scopes");
    let mut no_user = user_key("u");
    no_user.as_object_mut().expect("body").remove("user_id");
    let error = emu.post_refused(USER, no_user).await;
    assert_ab(&error, "AB01", "user_id");
    let mut bad_org = service_key("svc");
    bad_org["organisation_id"] = json!("tsg-1");
    let (status, error) = emu.post(SERVICE, bad_org).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    assert_eq!(error["error"]["param"], "organisation_id", "{error}");

    let mut body = service_key("svc");
    body["defaults"] = json!({"config_id": "pc-routin-1a2b3c", "allow_config_override": false});
    body["expires_at"] = json!("2999-01-01T00:00:00.000Z");
    let (status, receipt) = emu.post(SERVICE, body).await;
    assert_eq!(status, StatusCode::OK, "{receipt}");
    assert_eq!(receipt["object"], "api-key");
    assert_eq!(receipt.as_object().map(|r| r.len()), Some(3), "{receipt}");
    let key = text(&receipt["key"]);
    let path = format!("{SERVICE}/{}", text(&receipt["id"]));
    let (status, read) = emu.get(&path).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(read["key"], "****", "reads mask the key");
    assert!(!read.to_string().contains(&key), "{read}");
    let state = emu.state().await;
    assert_eq!(
        read["organisation_id"], state["organisation_id"],
        "a UUID, not the TSG"
    );
    assert_eq!(read["type"], "workspace-service");
    assert_eq!(read["workspace_id"], WS_A);
    assert!(read["user_id"].is_null());
    assert_eq!(read["expiry_enforced"], 1);
    assert_eq!(read["allow_config_override"], 0);
    assert_eq!(read["defaults"]["config_id"], "pc-routin-1a2b3c");
    assert_eq!(read["scopes"], json!(["completions.write"]));
    assert_eq!(read["rate_limits"], json!([]));
    assert_eq!(read["status"], "active");
    assert_eq!(read["object"], "api-key");
    for field in [
        "creation_mode",
        "usage_limits",
        "last_reset_at",
        "api_key_defaults_id",
        "created_by",
    ] {
        assert!(read.get(field).is_some(), "{field} missing from {read}");
    }
    assert_eq!(
        emu.dumped(&path).await["key"],
        json!(key),
        "the state shows the value"
    );

    // The other reading of the create `type` (the kind), and no `type` at all.
    let mut terraform_style = service_key("tf");
    terraform_style["type"] = json!("service");
    let (tf, _) = emu.create(SERVICE, terraform_style).await;
    let (_, read) = emu.get(&tf).await;
    assert_eq!(read["expiry_enforced"], 0);
    assert!(read["allow_config_override"].is_null(), "{read}");
    let mut untyped = service_key("untyped");
    untyped.as_object_mut().expect("body").remove("type");
    emu.create(SERVICE, untyped).await;
    let mut organisation = service_key("org");
    organisation["type"] = json!("organisation");
    organisation
        .as_object_mut()
        .expect("body")
        .remove("workspace_id");
    let (org, _) = emu.create(SERVICE, organisation).await;
    let (_, read) = emu.get(&org).await;
    assert_eq!(read["type"], "organisation-service");
    assert!(read["workspace_id"].is_null());

    let (user, _) = emu.create(USER, user_key("u")).await;
    let (_, read) = emu.get(&user).await;
    assert_eq!(read["type"], "workspace-user");
    assert_eq!(read["user_id"], USER_ID);
    let (status, error) = emu.get(&format!("{SERVICE}/{}", id_of(&user))).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "a user key is not under /service"
    );
    assert_ab(&error, "AB08", "not found");
}

#[tokio::test]
async fn lists_filter_by_workspace_and_page() {
    let emu = Emu::with_short_transitions().await;
    for n in 0..3 {
        emu.create(SERVICE, service_key(&format!("k{n}"))).await;
    }
    let mut elsewhere = service_key("elsewhere");
    elsewhere["workspace_id"] = json!(WS_B);
    emu.create(SERVICE, elsewhere).await;
    emu.create(USER, user_key("u")).await;

    let (status, all) = emu.get(SERVICE).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        (all["object"].clone(), all["total"].clone()),
        (json!("list"), json!(4))
    );
    assert!(
        all["data"]
            .as_array()
            .expect("rows")
            .iter()
            .all(|row| row["key"] == "****")
    );
    let (_, mine) = emu.get(&format!("{SERVICE}?workspace_id={WS_A}")).await;
    assert_eq!((mine["total"].clone(), rows(&mine)), (json!(3), 3));
    let (_, page) = emu
        .get(&format!(
            "{SERVICE}?workspace_id={WS_A}&page_size=2&current_page=1"
        ))
        .await;
    assert_eq!((page["total"].clone(), rows(&page)), (json!(3), 1));
    assert_eq!(page["data"][0]["name"], "k2", "creation order");
    let (_, users) = emu.get(USER).await;
    assert_eq!((users["total"].clone(), rows(&users)), (json!(1), 1));

    for query in [
        "page_size=-1",
        "current_page=x",
        "workspace_id=not%20a%20workspace",
    ] {
        let (status, error) = emu.get(&format!("{SERVICE}?{query}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {error}");
    }
}

#[tokio::test]
async fn update_answers_empty_object_and_refuses_fixed_fields() {
    let emu = Emu::with_short_transitions().await;
    let (path, _) = emu.create(SERVICE, service_key("svc")).await;
    let (_, before) = emu.get(&path).await;
    for body in [
        json!({}),
        json!({"status": "exhausted"}),
        json!({"name": null}),
    ] {
        let (status, error) = emu.put(&path, body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {error}");
        assert_ab(&error, "AB01", "at least one field");
    }
    for (field, value) in [
        ("type", json!("workspace")),
        ("workspace_id", json!(WS_B)),
        ("user_id", json!(USER_ID)),
        ("organisation_id", json!(TSG)),
        ("key", json!("ak-mine")),
    ] {
        let (status, error) = emu.put(&path, json!({"name": "x", field: value})).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{field}: {error}");
        assert_ab(&error, "AB01", field);
    }
    let (_, unchanged) = emu.get(&path).await;
    assert_eq!(unchanged, before, "a refused update changes nothing");

    let change = json!({
        "name": "renamed", "description": "d", "scopes": ["completions.write", "logs.write"],
        "rate_limits": [{"type": "requests", "unit": "rps", "value": 5}],
        "alert_emails": ["ops@example.com"], "expires_at": "2999-01-01T00:00:00Z",
        "defaults": {"config_id": "pc-a-000001", "allow_config_override": true},
    });
    let (status, answer) = emu.put(&path, change).await;
    assert_eq!((status, answer), (StatusCode::OK, json!({})));
    let (_, read) = emu.get(&path).await;
    assert_eq!(read["name"], "renamed");
    assert_eq!(read["scopes"], json!(["completions.write", "logs.write"]));
    assert_eq!(
        read["rate_limits"][0],
        json!({"type": "requests", "unit": "rps", "value": 5})
    );
    assert_eq!(read["alert_emails"], json!(["ops@example.com"]));
    assert_eq!(
        (
            read["expiry_enforced"].clone(),
            read["allow_config_override"].clone()
        ),
        (json!(1), json!(1))
    );
    assert!(text(&read["last_updated_at"]) > text(&before["last_updated_at"]));

    let clear = json!({"description": null, "expires_at": null, "alert_emails": null,
                       "defaults": {"config_id": null}, "reset_usage": true});
    let (status, _) = emu.put(&path, clear).await;
    assert_eq!(status, StatusCode::OK);
    let (_, read) = emu.get(&path).await;
    assert!(
        read["description"].is_null() && read["expires_at"].is_null(),
        "{read}"
    );
    assert_eq!(read["alert_emails"], json!([]));
    assert!(read["defaults"]["config_id"].is_null(), "config unbound");
    assert_eq!(
        read["defaults"]["allow_config_override"], true,
        "other defaults stay"
    );
    assert!(read["last_reset_at"].is_string(), "a reset is stamped");
    assert_eq!(read["reset_usage"], 0, "the flag is not kept");
}

#[tokio::test]
async fn delete_is_hard_and_afterwards_the_key_is_not_found() {
    let emu = Emu::with_short_transitions().await;
    let (path, key) = emu.create(SERVICE, service_key("svc")).await;
    let (status, answer) = emu.delete(&path).await;
    assert_eq!((status, answer), (StatusCode::OK, json!({})));
    let (status, error) = emu.get(&path).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_ab(&error, "AB08", id_of(&path));
    for (status, error) in [
        emu.delete(&path).await,
        emu.put(&path, json!({"name": "x"})).await,
        emu.post(&format!("{path}/rotate"), json!({})).await,
    ] {
        assert_eq!(status, StatusCode::NOT_FOUND, "{error}");
        assert_ab(&error, "AB08", "not found");
    }
    let (_, list) = emu.get(SERVICE).await;
    assert_eq!(list["total"], 0);
    assert_eq!(emu.state().await["api_keys"], json!([]));
    let (status, _) = emu.handshake(&path, &key).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "a deleted key's value is dead"
    );

    emu.faults(json!({"missing_as_ab03": true})).await;
    let (status, error) = emu.get(&path).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(error["error"]["code"], "AB03", "{error}");
}

#[tokio::test]
async fn rotation_keeps_the_old_key_live_until_the_transition_ends() {
    let emu = Emu::with_short_transitions().await;
    let (path, first) = emu.create(SERVICE, service_key("svc")).await;
    let (status, live) = emu.handshake(&path, &first).await;
    assert_eq!(
        (status, live),
        (StatusCode::OK, json!({"live": true, "as": "current"}))
    );
    let rotate = format!("{path}/rotate");
    for body in [
        json!({"key_transition_period_ms": 1_799_999}),
        json!({"key_transition_period_ms": "1800000"}),
        json!({"key_transition_period_ms": 1_800_000.5}),
    ] {
        let (status, error) = emu.post(&rotate, body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {error}");
        assert_ab(&error, "AB01", "key_transition_period_ms");
    }
    assert_eq!(
        emu.dumped(&path).await["rotations"],
        0,
        "refused rotations count nothing"
    );

    let (status, receipt) = emu
        .post(&rotate, json!({"key_transition_period_ms": 3_600_000}))
        .await;
    assert_eq!(status, StatusCode::OK, "{receipt}");
    let fields: Vec<&String> = receipt.as_object().expect("receipt").keys().collect();
    assert_eq!(fields, ["id", "key", "key_transition_expires_at", "object"]);
    let second = text(&receipt["key"]);
    assert_ne!(second, first);
    let expires: jiff::Timestamp = text(&receipt["key_transition_expires_at"])
        .parse()
        .expect("a timestamp");
    let uncapped = jiff::Timestamp::now() + jiff::SignedDuration::from_mins(30);
    assert!(expires < uncapped, "reports the capped expiry, {expires}");

    let (status, answer) = emu.handshake(&path, &first).await;
    assert_eq!(
        (status, answer),
        (StatusCode::OK, json!({"live": true, "as": "previous"}))
    );
    let (status, _) = emu.handshake(&path, &second).await;
    assert_eq!(status, StatusCode::OK);
    let (status, answer) = emu.handshake(&path, "ak-guess").await;
    assert_eq!(
        (status, answer),
        (StatusCode::UNAUTHORIZED, json!({"live": false}))
    );
    let dump = emu.dumped(&path).await;
    assert_eq!(
        (dump["rotations"].clone(), dump["key"].clone()),
        (json!(1), json!(second))
    );
    assert_eq!(dump["previous_keys"][0]["key"], json!(first));
    let (_, read) = emu.get(&path).await;
    assert_eq!(read["key"], "****");

    // The transition ends (within a few seconds here) and only the new value works.
    let deadline = tokio::time::Instant::now() + TRANSITION * 5;
    loop {
        let (status, _) = emu.handshake(&path, &first).await;
        if status == StatusCode::UNAUTHORIZED {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the old key never stopped working"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (status, _) = emu.handshake(&path, &second).await;
    assert_eq!(status, StatusCode::OK, "the new key stays live");
    assert_eq!(emu.dumped(&path).await["previous_keys"], json!([]));

    // No body: the default period (capped the same way).
    let response = emu.answer(Method::POST, &rotate).await;
    assert_eq!(response.status(), StatusCode::OK);
    let third: Value = response.json().await.expect("receipt");
    assert_ne!(third["key"], json!(second));
    assert_eq!(emu.dumped(&path).await["rotations"], 2);
}

#[tokio::test]
async fn seeded_keys_keep_their_values_and_show_in_state() {
    let emu = Emu::with_short_transitions().await;
    let ahead = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(1);
    let seed = json!({"api_keys": [
        {"id": "5d1c3b2a-1e2f-4a3b-9c4d-5e6f7a8b9c0d", "name": "seeded", "type": "workspace-user",
         "user_id": USER_ID, "workspace_id": WS_A, "scopes": ["mcp.invoke"], "key": "ak-seeded",
         "rotations": 2, "expiry_enforced": 0,
         "previous_keys": [{"key": "ak-older", "key_transition_expires_at": ahead.to_string()}]},
        {"name": "masked", "key": "****", "scopes": ["completions.write"]},
    ]});
    let (status, answer) = emu.seed(seed).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let seeded = &answer["api_keys"];
    assert_eq!(seeded[0]["key"], "ak-seeded");
    assert_ne!(
        seeded[1]["key"], "****",
        "a masked value is replaced by a fresh one"
    );

    let path = format!("{USER}/{}", text(&seeded[0]["id"]));
    let (status, read) = emu.get(&path).await;
    assert_eq!(status, StatusCode::OK, "{read}");
    assert_eq!(
        (read["key"].clone(), read["type"].clone()),
        (json!("****"), json!("workspace-user"))
    );
    let (status, _) = emu.handshake(&path, "ak-seeded").await;
    assert_eq!(status, StatusCode::OK);
    let (_, answer) = emu.handshake(&path, "ak-older").await;
    assert_eq!(answer["as"], "previous");
    let (_, list) = emu.get(SERVICE).await;
    assert_eq!(list["total"], 1, "the second one is a service key");
    assert_eq!(emu.dumped(&path).await["rotations"], 2);

    emu.control(Method::DELETE, "/_emulator/state", None).await;
    assert_eq!(emu.state().await["api_keys"], json!([]));
}

#[tokio::test]
async fn faults_apply_to_api_keys_as_to_every_route() {
    let emu = Emu::with_short_transitions().await;
    // Applied, then the connection is cut: the caller never sees the one-time value.
    emu.faults(json!({"drop_after_commit_rate": 1.0})).await;
    let lost = emu
        .call(Method::POST, SERVICE)
        .json(&service_key("lost"))
        .send()
        .await;
    let lost = match lost {
        Ok(response) => response.bytes().await.map(drop),
        Err(err) => Err(err),
    };
    assert!(lost.is_err(), "the answer must be lost");
    emu.faults(json!({})).await;
    let state = emu.state().await;
    let keys = state["api_keys"].as_array().expect("api_keys");
    assert_eq!(keys.len(), 1, "created exactly once: {state}");
    assert_eq!(keys[0]["name"], "lost");
    assert!(
        keys[0]["key"]
            .as_str()
            .is_some_and(|key| key.starts_with("ak-"))
    );
    let path = format!("{SERVICE}/{}", text(&keys[0]["id"]));

    // A rotation that is applied, then answered 5xx, still counts.
    emu.faults(json!({"error_after_commit_rate": 1.0})).await;
    let (status, _) = emu.post(&format!("{path}/rotate"), json!({})).await;
    assert!(status.is_server_error(), "{status}");
    emu.faults(json!({})).await;
    assert_eq!(emu.dumped(&path).await["rotations"], 1);

    emu.faults(json!({"list_lag_ms": 60_000})).await;
    let (fresh, _) = emu.create(SERVICE, service_key("fresh")).await;
    let (_, list) = emu.get(SERVICE).await;
    assert_eq!(
        list["total"], 0,
        "keys made through the API lag behind: {list}"
    );
    let (status, _) = emu.get(&fresh).await;
    assert_eq!(status, StatusCode::OK, "reads by id find it at once");

    emu.faults(json!({"normalise": true})).await;
    let (_, normalised) = emu.get(&path).await;
    emu.faults(json!({})).await;
    let (_, plain) = emu.get(&path).await;
    assert_eq!(
        normalised, plain,
        "the same document, keys in another order"
    );

    emu.faults(json!({"error_rate": 1.0})).await;
    let (status, _) = emu.post(SERVICE, service_key("never")).await;
    assert!(status.is_server_error());
    emu.faults(json!({})).await;
    assert_eq!(
        emu.state().await["api_keys"].as_array().map(Vec::len),
        Some(2)
    );
}

/// `aigw emulator --min-key-transition 2s`, the flag tests and demos use: a rotation's old key
/// works right after it and stops within seconds, and the receipt says when.
#[tokio::test]
async fn the_min_key_transition_flag_caps_transitions() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = support::cli::command();
    command.args(["emulator", "--listen", "127.0.0.1:0"]).args([
        "--token",
        TOKEN,
        "--min-key-transition",
        "2s",
    ]);
    // Killed when dropped; the kernel picks the port, the log says which.
    let emulator = support::cli::Process::spawn(command, dir.path().join("emulator.log"));
    let base = format!("http://{}", emulator.said_addr("emulator listening").await);
    let http = reqwest::Client::new();
    let call = |method: Method, path: &str, body: Value| {
        http.request(method, format!("{base}{path}"))
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
    };
    let started = support::wait_until(Duration::from_secs(30), || async {
        call(Method::GET, "/_emulator/faults", Value::Null)
            .await
            .ok()
            .map(|_| ())
    })
    .await;
    assert!(started.is_some(), "the emulator did not answer");
    let receipt: Value = call(Method::POST, SERVICE, service_key("flagged"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let (id, first) = (text(&receipt["id"]), text(&receipt["key"]));
    let rotated: Value = call(
        Method::POST,
        &format!("{SERVICE}/{id}/rotate"),
        json!({"key_transition_period_ms": 1_800_000}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let expires: jiff::Timestamp = text(&rotated["key_transition_expires_at"]).parse().unwrap();
    assert!(
        expires < jiff::Timestamp::now() + jiff::SignedDuration::from_secs(10),
        "the receipt reports the capped expiry: {expires}"
    );
    let handshake = |key: String| {
        let path = format!("/_emulator/api-keys/{id}/handshake");
        let request = call(Method::POST, &path, json!({ "key": key }));
        async move { request.await.unwrap().status() }
    };
    assert_eq!(handshake(first.clone()).await, StatusCode::OK);
    let ended = support::wait_until(Duration::from_secs(10), || async {
        (handshake(first.clone()).await == StatusCode::UNAUTHORIZED).then_some(())
    })
    .await;
    assert!(
        ended.is_some(),
        "the old key still works after its capped transition"
    );
    assert_eq!(handshake(text(&rotated["key"])).await, StatusCode::OK);
    drop(emulator);
}
