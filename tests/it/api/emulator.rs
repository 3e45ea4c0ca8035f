//! The emulator over real HTTP: auth, the live API's quirks, the control endpoints and faults.

use std::time::{Duration, Instant};

use aigw::emulator::{EmulatorOptions, OAuthOptions};
use reqwest::{Method, RequestBuilder, StatusCode};
use serde_json::{Value, json};

use crate::support::emu::{Emu, TOKEN, assert_ab, text};

/// An emulator holding the config `name` (its slug), then answering with `faults`.
async fn config_then_faults(name: &str, faults: Value) -> (Emu, String) {
    let emu = Emu::start().await;
    let slug = text(&emu.create_config(name).await["slug"]);
    emu.faults(faults).await;
    (emu, slug)
}

/// A deployment's credentials in a create or rotate answer: `client_auth` and the password.
fn credentials(answer: &Value) -> (String, String) {
    let client_auth = answer["client_auth"].as_str().expect("client_auth");
    let password = answer["credentials"]["password"]
        .as_str()
        .expect("password");
    (client_auth.to_owned(), password.to_owned())
}

/// Creates the config `name` holding `document`; its slug.
async fn config_of(emu: &Emu, name: &str, document: &Value) -> String {
    let (_, receipt) = emu
        .post(
            "/ai_gw/v2/configs",
            json!({"name": name, "config": document}),
        )
        .await;
    text(&receipt["slug"])
}

/// Config and guardrail `workspace_id`s are workspace UUIDs.
const WORKSPACE: &str = "6f0e4a2c-5a4e-4c1b-9a53-3c2f1f0d9b11";

impl Emu {
    /// Sends and returns status plus the body as text, for answers that are not JSON.
    async fn send_raw(&self, request: RequestBuilder) -> (StatusCode, String) {
        let response = request.send().await.expect("request succeeds");
        let status = response.status();
        (status, response.text().await.expect("body"))
    }

    /// A control endpoint (no token), which must succeed; its answer.
    async fn control_ok(&self, method: Method, path: &str, body: Option<Value>) -> Value {
        let (status, answer) = self.control(method, path, body).await;
        assert!(status.is_success(), "{path}: {status}");
        answer
    }

    async fn stats(&self) -> Value {
        self.control_ok(Method::GET, "/_emulator/stats", None).await["requests"].clone()
    }

    async fn create_config(&self, name: &str) -> Value {
        let body =
            json!({"name": name, "config": {"retry": {"attempts": 3}}, "workspace_id": WORKSPACE});
        let (status, receipt) = self.post("/ai_gw/v2/configs", body).await;
        assert_eq!(status, StatusCode::OK, "{receipt}");
        receipt
    }

    async fn create_rate_limit(&self, body: Value) -> Value {
        let (status, receipt) = self.post("/ai_gw/v2/policies/rate-limits", body).await;
        assert_eq!(status, StatusCode::OK, "{receipt}");
        receipt
    }

    async fn create_deployment(&self, body: Value) -> Value {
        let (status, receipt) = self.post("/ai_gw/admin/v2/deployments", body).await;
        assert_eq!(status, StatusCode::OK, "{receipt}");
        receipt
    }
}

fn rate_limit_body(value: Value) -> Value {
    json!({"conditions": [{"key": "api_key", "value": "k1"}, {"key": "metadata.team", "value": "t"}],
           "group_by": [{"key": "api_key"}, {"key": "workspace_id"}],
           "type": "requests", "unit": "rpm", "value": value})
}

fn assert_envelope(body: &Value, param: Option<&str>) {
    let error = &body["error"];
    for field in ["code", "message", "type"] {
        assert!(error[field].is_string(), "{field} in {body}");
    }
    assert!(error.get("param").is_some(), "param present in {body}");
    if let Some(param) = param {
        assert_eq!(error["param"], json!(param), "{body}");
    }
}

#[tokio::test]
async fn requests_without_a_valid_bearer_token_get_401() {
    let emu = Emu::start().await;
    for path in [
        "/ai_gw/v2/configs",
        "/ai_gw/admin/v2/deployments",
        "/v1/responses/resp_1",
    ] {
        let response = emu.http.get(emu.url(path)).send().await.expect("request");
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{path}");
        let body: Value = response.json().await.expect("json 401 body");
        assert!(body.is_object());
        let wrong = emu
            .http
            .get(emu.url(path))
            .bearer_auth("nope")
            .send()
            .await
            .expect("request");
        assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED, "{path}");
    }
    let (status, _) = emu.get("/ai_gw/v2/configs").await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn config_create_read_update_versions_delete() {
    let emu = Emu::start().await;
    let receipt = emu.create_config("Pplx Cache Test").await;
    assert_eq!(receipt["object"], "config");
    let slug = receipt["slug"].as_str().expect("slug").to_owned();
    assert!(slug.starts_with("pc-pplx-c-") && slug.len() == 16, "{slug}");
    let id = receipt["id"].as_str().expect("id").to_owned();
    let first_version = receipt["version_id"].as_str().expect("version").to_owned();

    let (status, read) = emu.get(&format!("/ai_gw/v2/configs/{slug}")).await;
    assert_eq!(status, StatusCode::OK);
    let document: Value =
        serde_json::from_str(read["config"].as_str().expect("config is a string"))
            .expect("config string is json");
    assert_eq!(document, json!({"retry": {"attempts": 3}}));
    assert_eq!(read["format"], "json");
    assert_eq!(read["type"], "ORG_CONFIG");
    assert_eq!(read["is_default"], json!(0));
    assert_eq!(read["version_id"], json!(first_version));
    assert_eq!(read["workspace_id"], WORKSPACE);
    let (_, by_id) = emu.get(&format!("/ai_gw/v2/configs/{id}")).await;
    assert_eq!(by_id["slug"], json!(slug));

    let mut versions = vec![first_version];
    for attempts in [4, 4] {
        let body =
            json!({"config": {"cache": {"mode": "simple"}, "retry": {"attempts": attempts}}});
        let (status, updated) = emu.put(&format!("/ai_gw/v2/configs/{slug}"), body).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(updated["success"], json!(true));
        let version = updated["data"]["version_id"]
            .as_str()
            .expect("version")
            .to_owned();
        assert!(
            !versions.contains(&version),
            "every PUT mints a new version_id"
        );
        versions.push(version);
    }
    let (_, read) = emu.get(&format!("/ai_gw/v2/configs/{slug}")).await;
    assert_eq!(read["version_id"], json!(versions[2]));
    let document: Value =
        serde_json::from_str(read["config"].as_str().unwrap_or("")).expect("json");
    assert_eq!(
        document,
        json!({"cache": {"mode": "simple"}, "retry": {"attempts": 4}})
    );

    let (_, history) = emu.get(&format!("/ai_gw/v2/configs/{slug}/versions")).await;
    assert_eq!(history["total"], json!(3));
    assert_eq!(history["data"][0]["version_id"], json!(versions[2]));
    assert!(history["data"][0]["version_created_at"].is_string());

    let (_, list) = emu.get("/ai_gw/v2/configs").await;
    assert_eq!(list["object"], "list");
    assert_eq!(list["total"], json!(1));
    let row = list["data"][0].as_object().expect("row");
    assert_eq!(row.len(), 12, "list rows are the 12-field subset: {row:?}");
    assert!(!row.contains_key("config") && !row.contains_key("version_id"));

    let (status, deleted) = emu.delete(&format!("/ai_gw/v2/configs/{slug}")).await;
    assert_eq!((status, deleted), (StatusCode::OK, json!({})));
    let (status, missing) = emu.get(&format!("/ai_gw/v2/configs/{slug}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_ab(&missing, "AB08", &slug);
    let (_, list) = emu.get("/ai_gw/v2/configs").await;
    assert_eq!(list["total"], json!(0), "delete is a hard delete");
}

#[tokio::test]
async fn config_validation_names_the_field() {
    let emu = Emu::start().await;
    let body = emu
        .post_refused("/ai_gw/v2/configs", json!({"config": {}}))
        .await;
    assert_ab(&body, "AB01", "name");
    let body = emu
        .post_refused("/ai_gw/v2/configs", json!({"name": "x", "config": "str"}))
        .await;
    assert_ab(&body, "AB01", "config");
    let slug = emu.create_config("valid").await["slug"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let (status, body) = emu
        .put(&format!("/ai_gw/v2/configs/{slug}"), json!({}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_ab(&body, "AB01", "config");
    let raw = emu
        .call(Method::POST, "/ai_gw/v2/configs")
        .body("{not json");
    let (status, body) = emu.send(raw).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_ab(&body, "AB01", "json");
}

#[tokio::test]
async fn deployment_secrets_are_one_time_masked_and_rotated() {
    let emu = Emu::start().await;
    let receipt = emu.create_deployment(json!({"name": "talos"})).await;
    let keys: Vec<&str> = receipt
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys.len(), 5, "{receipt}");
    assert_eq!(receipt["object"], "deployment");
    let id = receipt["id"].as_str().expect("id").to_owned();
    let (client_auth, password) = credentials(&receipt);
    assert!(client_auth.len() > 16 && password.len() > 16);

    let other = emu.create_deployment(json!({"name": "talos"})).await;
    assert_ne!(
        other["client_auth"],
        json!(client_auth),
        "secrets are random"
    );

    let (status, read) = emu.get(&format!("/ai_gw/admin/v2/deployments/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(read["client_auth"], "****");
    assert_eq!(read["credentials"]["password"], "****");
    assert_eq!(
        read["credentials"]["username"],
        receipt["credentials"]["username"]
    );
    assert!(!read.to_string().contains(&client_auth) && !read.to_string().contains(&password));

    let state = emu.state().await;
    let stored = &state["deployments"][0];
    assert_eq!(stored["client_auth"], json!(client_auth));
    assert_eq!(stored["credentials"]["password"], json!(password));

    let path = format!("/ai_gw/admin/v2/deployments/{id}");
    let (_, plain) = emu.put(&path, json!({"name": "talos-2"})).await;
    assert_eq!(
        plain["client_auth"], "****",
        "a plain update reveals nothing"
    );
    let (status, rotated) = emu.put(&path, json!({"rotate_auth": true})).await;
    assert_eq!(status, StatusCode::OK);
    let (new_auth, new_password) = credentials(&rotated);
    assert_ne!(new_auth, client_auth);
    assert_ne!(new_password, password);
    assert_ne!(new_auth, "****");
    let state = emu.state().await;
    let stored = state["deployments"]
        .as_array()
        .and_then(|all| all.iter().find(|d| d["id"] == json!(id)))
        .expect("stored deployment");
    assert_eq!(
        stored["client_auth"],
        json!(new_auth),
        "the old client_auth is no longer valid"
    );
    assert_eq!(stored["credentials"]["password"], json!(new_password));
    let (_, read) = emu.get(&path).await;
    assert_eq!(read["client_auth"], "****");

    // A gateway presenting the revoked value is refused; the new one is accepted.
    let handshake = emu.url(&format!("/_emulator/deployments/{id}/handshake"));
    for (presented, expected) in [
        (&client_auth, StatusCode::UNAUTHORIZED),
        (&new_auth, StatusCode::OK),
    ] {
        let response = emu
            .http
            .post(&handshake)
            .json(&json!({"client_auth": presented}))
            .send()
            .await;
        assert_eq!(response.expect("handshake").status(), expected);
    }
}

#[tokio::test]
async fn deployment_read_shape_update_and_archive() {
    let emu = Emu::start().await;
    let body = json!({
        "name": "edge", "type": "non_production", "is_default": true, "tags": {"env": "dev"},
        "auth_settings": {"gateway_base_url": "https://gw.example", "workspaces_allowed": ["a"],
                          "jwt_subs_allowed": ["s1"], "allow_all_workspaces": false},
    });
    let id = emu.create_deployment(body).await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let path = format!("/ai_gw/admin/v2/deployments/{id}");
    let (_, read) = emu.get(&path).await;
    assert_eq!(read["is_default"], json!(1));
    assert_eq!(read["type"], "non_production");
    assert_eq!(read["status"], "active");
    assert_eq!(read["connection_status"], "unknown");
    assert_eq!(read["last_synced_at"], Value::Null);
    assert_eq!(read["auth_settings"]["allow_all_workspaces"], json!(0));
    assert_eq!(read["workspaces"], json!([]));
    assert!(
        read["slug"]
            .as_str()
            .unwrap_or_default()
            .starts_with("dp-edge-")
    );

    let merge = json!({"auth_settings": {"workspaces_allowed": ["b"], "remove_subs_allowed": ["s1"],
                                         "allow_all_workspaces": true}});
    let (status, _) = emu.put(&path, merge).await;
    assert_eq!(status, StatusCode::OK);
    let (_, read) = emu.get(&path).await;
    assert_eq!(
        read["auth_settings"]["workspaces_allowed"],
        json!(["a", "b"])
    );
    assert_eq!(read["auth_settings"]["jwt_subs_allowed"], json!([]));
    assert_eq!(read["auth_settings"]["allow_all_workspaces"], json!(1));
    let replace =
        json!({"override_existing": true, "auth_settings": {"workspaces_allowed": ["c"]}});
    emu.put(&path, replace).await;
    let (_, read) = emu.get(&path).await;
    assert_eq!(read["auth_settings"]["workspaces_allowed"], json!(["c"]));

    for (body, field) in [
        (json!({"type": "staging"}), "type"),
        (json!({"status": "deleted"}), "status"),
        (json!({"is_default": "yes"}), "is_default"),
        (
            json!({"auth_settings": {"workspaces_allowed": "a"}}),
            "auth_settings.workspaces_allowed",
        ),
    ] {
        let (status, error) = emu.put(&path, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{field}");
        assert_ab(&error, "AB01", field);
    }
    let error = emu
        .post_refused("/ai_gw/admin/v2/deployments", json!({"type": "production"}))
        .await;
    assert_ab(&error, "AB01", "name");

    let response = emu.answer(Method::DELETE, &path).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(
        response.bytes().await.expect("body").is_empty(),
        "archive answers an empty body"
    );
    let (status, read) = emu.get(&path).await;
    assert_eq!(status, StatusCode::OK, "archived deployments stay readable");
    assert_eq!(read["status"], "archived");
    let (_, list) = emu.get("/ai_gw/admin/v2/deployments?status=archived").await;
    assert_eq!(list["total"], json!(1));
    let (_, list) = emu.get("/ai_gw/admin/v2/deployments?status=active").await;
    assert_eq!(list["total"], json!(0));
    let (_, list) = emu
        .get("/ai_gw/admin/v2/deployments?search=EDG&tags[env]=dev")
        .await;
    assert_eq!(list["total"], json!(1));
    let (_, list) = emu.get("/ai_gw/admin/v2/deployments?tags=env:prod").await;
    assert_eq!(list["total"], json!(0));
    let (status, _) = emu.get("/ai_gw/admin/v2/deployments?type=other").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = emu.put(&path, json!({"status": "active"})).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "an archived deployment can be reactivated"
    );
}

#[tokio::test]
async fn connection_status_is_set_through_the_control_endpoint() {
    let emu = Emu::start().await;
    let id = emu.create_deployment(json!({"name": "gw"})).await["id"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let body = json!({"connection_status": "healthy"});
    emu.control_ok(
        Method::POST,
        &format!("/_emulator/deployments/{id}/connection"),
        Some(body),
    )
    .await;
    let (_, read) = emu.get(&format!("/ai_gw/admin/v2/deployments/{id}")).await;
    assert_eq!(read["connection_status"], "healthy");
    assert!(read["last_synced_at"].is_string());
}

#[tokio::test]
async fn rate_limit_policies_keep_immutable_fields_and_archive_on_delete() {
    let emu = Emu::start().await;
    let base = "/ai_gw/v2/policies/rate-limits";
    let error = emu.post_refused(base, json!({"conditions": [], "group_by": [{"key": "api_key"}], "type": "requests", "unit": "rpm", "value": 10})).await;
    assert_ab(&error, "AB01", "conditions");
    let error = emu.post_refused(base, json!({"conditions": [{"key": "workspace_id", "value": "w"}], "group_by": [{"key": "api_key"}], "type": "requests", "unit": "rps", "value": 10})).await;
    assert_ab(&error, "AB01", "unit");

    let create = json!({
        "name": "100 rpm", "conditions": [{"key": "workspace_id", "value": "ws-1"}],
        "group_by": [{"key": "api_key"}], "type": "requests", "unit": "rpm", "value": 100,
        "workspace_id": "ws-1",
    });
    let (status, receipt) = emu.post(base, create).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(receipt["object"], "policy_rate_limits");
    let path = format!("{base}/{}", receipt["id"].as_str().expect("id"));
    let (_, read) = emu.get(&path).await;
    assert_eq!(read["target"], "llm");
    assert_eq!(read["status"], "active");

    for (field, value) in [
        ("type", json!("tokens")),
        ("group_by", json!([{"key": "workspace_id"}])),
        ("target", json!("mcp_tools")),
        ("workspace_id", json!("ws-2")),
    ] {
        let (status, error) = emu.put(&path, json!({ field: value })).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{field}");
        assert_ab(&error, "AB01", field);
    }
    let (status, body) = emu
        .put(
            &path,
            json!({"type": "requests", "value": 200, "unit": "rph"}),
        )
        .await;
    assert_eq!((status, body), (StatusCode::OK, json!({})));
    let (_, read) = emu.get(&path).await;
    assert_eq!(
        (read["value"].clone(), read["unit"].clone()),
        (json!(200), json!("rph"))
    );

    for n in 0..4 {
        let body = json!({"conditions": [{"key": "metadata.team", "value": ["a", "b"]}],
                          "group_by": [{"key": "api_key"}], "type": "tokens", "unit": "rpd", "value": n});
        emu.post(base, body).await;
    }
    let (_, page) = emu
        .get(&format!("{base}?type=tokens&page_size=3&current_page=1"))
        .await;
    assert_eq!(
        (page["total"].clone(), page["data"].as_array().map(Vec::len)),
        (json!(4), Some(1))
    );
    assert_eq!(page["object"], "list");

    emu.delete_archives(&path).await;
    let (status, _) = emu.delete(&path).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn guardrails_page_and_reject_out_of_bounds_with_the_envelope() {
    let emu = Emu::start().await;
    let guardrails: Vec<Value> = (0..5).map(|n| json!({"name": format!("g{n}")})).collect();
    emu.control_ok(
        Method::POST,
        "/_emulator/seed",
        Some(json!({"guardrails": guardrails})),
    )
    .await;
    for base in ["/ai_gw/admin/v2/guardrails", "/ai_gw/v2/guardrails"] {
        let (status, page) = emu.get(&format!("{base}?page_size=2&current_page=1")).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(page["total"], json!(5));
        assert_eq!(page["data"][0]["name"], "g2");
        let (_, all) = emu.get(base).await;
        assert_eq!(all["data"].as_array().map(Vec::len), Some(5));
        for (query, param) in [
            ("page_size=0", "page_size"),
            ("page_size=1001", "page_size"),
            ("page_size=abc", "page_size"),
            ("current_page=-1", "current_page"),
        ] {
            let (status, error) = emu.get(&format!("{base}?{query}")).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{query}");
            assert_envelope(&error, Some(param));
        }
        let (status, error) = emu.get(&format!("{base}/missing")).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert_envelope(&error, None);
    }
}

#[tokio::test]
async fn not_found_shapes() {
    let emu = Emu::start().await;
    for path in [
        "/ai_gw/admin/v2/deployments/00000000-0000-0000-0000-000000000000",
        "/ai_gw/v2/configs/pc-nope-000000",
        "/ai_gw/v2/policies/rate-limits/00000000-0000-0000-0000-000000000000",
    ] {
        let (status, body) = emu.get(path).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        assert_ab(&body, "AB08", "not found");
    }
    let (status, body) = emu.get("/v1/responses/resp_missing").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_envelope(&body, None);
}

#[tokio::test]
async fn gateway_serves_seeded_responses_and_files() {
    let emu = Emu::start().await;
    let output = json!([{"id": "fs_1", "type": "file_search_call", "status": "completed",
                         "queries": ["q"], "results": [{"file_id": "f", "text": "t", "score": 0.5}]}]);
    let seed = json!({
        "responses": [{"id": "resp_1", "output": output}],
        "vector_store_files": [{"id": "file_1", "vector_store_id": "vs_1", "usage_bytes": 42}],
    });
    let created = emu
        .control_ok(Method::POST, "/_emulator/seed", Some(seed))
        .await;
    assert_eq!(created["responses"][0]["id"], "resp_1");
    let (status, response) = emu.get("/v1/responses/resp_1").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(response["object"], "response");
    assert_eq!(
        response["output"][0]["results"],
        Value::Null,
        "results need include"
    );
    let (_, response) = emu
        .get("/v1/responses/resp_1?include=file_search_call.results")
        .await;
    assert_eq!(response["output"][0]["results"][0]["file_id"], "f");
    let (status, error) = emu.get("/v1/responses/resp_1?include=bogus").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_envelope(&error, Some("include"));
    let (status, file) = emu.get("/v1/vector_stores/vs_1/files/file_1").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        (file["usage_bytes"].clone(), file["object"].clone()),
        (json!(42), json!("vector_store.file"))
    );
    let (status, _) = emu.get("/v1/vector_stores/vs_2/files/file_1").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn seeded_objects_take_read_shapes() {
    let emu = Emu::start().await;
    let seed = json!({
        "configs": [{"slug": "pc-seeded-abc123", "name": "seeded", "config": "{\"retry\":{\"attempts\":2}}"}],
        "deployments": [{"name": "seeded", "client_auth": "ca-known", "credentials": {"username": "u", "password": "p"}}],
        "rate_limits": [{"conditions": [{"key": "api_key", "value": "k"}], "group_by": [{"key": "api_key"}],
                         "type": "requests", "unit": "rpw", "value": 5}],
    });
    let created = emu
        .control_ok(Method::POST, "/_emulator/seed", Some(seed))
        .await;
    let (_, config) = emu.get("/ai_gw/v2/configs/pc-seeded-abc123").await;
    assert_eq!(config["config"], "{\"retry\":{\"attempts\":2}}");
    let deployment_id = created["deployments"][0]["id"].as_str().expect("id");
    let (_, read) = emu
        .get(&format!("/ai_gw/admin/v2/deployments/{deployment_id}"))
        .await;
    assert_eq!(read["client_auth"], "****");
    let state = emu.state().await;
    assert_eq!(state["deployments"][0]["client_auth"], "ca-known");
    assert_eq!(
        state["configs"][0]["config"],
        json!({"retry": {"attempts": 2}})
    );
    let (_, list) = emu.get("/ai_gw/v2/policies/rate-limits?unit=rpw").await;
    assert_eq!(list["total"], json!(1));
    emu.control_ok(Method::DELETE, "/_emulator/state", None)
        .await;
    let (_, list) = emu.get("/ai_gw/v2/configs").await;
    assert_eq!(list["total"], json!(0));
}

#[tokio::test]
async fn stats_count_by_method_and_path_template() {
    let emu = Emu::start().await;
    let slug = text(&emu.create_config("stats").await["slug"]);
    for _ in 0..2 {
        emu.put(
            &format!("/ai_gw/v2/configs/{slug}"),
            json!({"name": "stats"}),
        )
        .await;
    }
    emu.get(&format!("/ai_gw/v2/configs/{slug}")).await;
    emu.get("/ai_gw/v2/configs/pc-missing").await;
    emu.http
        .get(emu.url("/ai_gw/v2/configs"))
        .send()
        .await
        .expect("unauthenticated");
    emu.state().await;

    let stats = emu.control_ok(Method::GET, "/_emulator/stats", None).await;
    let requests = &stats["requests"];
    assert_eq!(requests["PUT /ai_gw/v2/configs/{slug}"], json!({"200": 2}));
    assert_eq!(
        requests["GET /ai_gw/v2/configs/{slug}"],
        json!({"200": 1, "404": 1})
    );
    assert_eq!(requests["POST /ai_gw/v2/configs"], json!({"200": 1}));
    assert_eq!(requests["GET /ai_gw/v2/configs"], json!({"401": 1}));
    assert!(
        requests
            .as_object()
            .is_some_and(|all| all.keys().all(|key| !key.contains("/_emulator"))),
        "{stats}"
    );
    emu.control_ok(Method::DELETE, "/_emulator/stats", None)
        .await;
    let stats = emu.control_ok(Method::GET, "/_emulator/stats", None).await;
    assert_eq!(stats, json!({"requests": {}}));
}

#[tokio::test]
async fn error_fault_answers_5xx_without_touching_state() {
    let emu = Emu::start().await;
    emu.faults(json!({"error_rate": 1.0})).await;
    for _ in 0..6 {
        let (status, _) = emu
            .post("/ai_gw/v2/configs", json!({"name": "x", "config": {}}))
            .await;
        assert!(
            status == StatusCode::INTERNAL_SERVER_ERROR
                || status == StatusCode::SERVICE_UNAVAILABLE,
            "{status}"
        );
    }
    assert_eq!(
        emu.state().await["configs"],
        json!([]),
        "faults are not applied to /_emulator"
    );
    emu.faults(json!({})).await;
    let (status, _) = emu.get("/ai_gw/v2/configs").await;
    assert_eq!(status, StatusCode::OK, "{{}} clears the faults");
}

#[tokio::test]
async fn timeout_fault_hangs_past_the_client_timeout() {
    let emu = Emu::start().await;
    emu.faults(json!({"timeout_rate": 1.0})).await;
    let started = Instant::now();
    let result = emu
        .call(Method::GET, "/ai_gw/v2/configs")
        .timeout(Duration::from_millis(500))
        .send()
        .await;
    let error = result.expect_err("the request must time out");
    assert!(error.is_timeout(), "{error}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn drop_after_commit_applies_the_change_then_cuts_the_connection() {
    let (emu, slug) = config_then_faults("dropped", json!({"drop_after_commit_rate": 1.0})).await;
    let result = emu
        .call(Method::PUT, &format!("/ai_gw/v2/configs/{slug}"))
        .json(&json!({"config": {"retry": {"attempts": 9}}}))
        .send()
        .await;
    let error = result.expect_err("the client sees a network error, not a status");
    assert!(error.status().is_none(), "{error}");
    emu.faults(json!({})).await;
    let (_, read) = emu.get(&format!("/ai_gw/v2/configs/{slug}")).await;
    assert_eq!(
        read["config"], "{\"retry\":{\"attempts\":9}}",
        "the change was committed"
    );
    let (_, versions) = emu.get(&format!("/ai_gw/v2/configs/{slug}/versions")).await;
    assert_eq!(versions["total"], json!(2));
}

#[tokio::test]
async fn rate_limit_fault_answers_429_with_retry_after() {
    let emu = Emu::start().await;
    emu.faults(json!({"rate_limit_qps": 1.0})).await;
    let (first, _) = emu.get("/ai_gw/v2/configs").await;
    assert_eq!(first, StatusCode::OK);
    let response = emu.answer(Method::GET, "/ai_gw/v2/configs").await;
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry_after: u64 = response
        .headers()
        .get("retry-after")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse().ok())
        .expect("Retry-After in seconds");
    assert!((1..=2).contains(&retry_after));
    let stats = emu.control_ok(Method::GET, "/_emulator/stats", None).await;
    assert_eq!(
        stats["requests"]["GET /ai_gw/v2/configs"],
        json!({"200": 1, "429": 1})
    );
}

#[tokio::test]
async fn latency_fault_delays_requests() {
    let emu = Emu::start().await;
    emu.faults(json!({"latency_ms": 300})).await;
    let started = Instant::now();
    let (status, _) = emu.get("/ai_gw/v2/configs").await;
    assert_eq!(status, StatusCode::OK);
    assert!(started.elapsed() >= Duration::from_millis(300));
    let started = Instant::now();
    emu.state().await;
    assert!(
        started.elapsed() < Duration::from_millis(300),
        "control routes are not delayed"
    );
    let response = emu
        .http
        .put(emu.url("/_emulator/faults"))
        .json(&json!({"error_rate": 2}))
        .send()
        .await;
    assert_eq!(response.expect("request").status(), StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn oauth_tokens_work_until_they_expire() {
    let mut options = EmulatorOptions::new(TOKEN);
    options.oauth = Some(OAuthOptions {
        client_id: "client".into(),
        client_secret: "secret".into(),
        token_ttl: Duration::from_secs(1),
    });
    let emu = Emu::start_with(options).await;
    let token_url = emu.url("/oauth2/access_token");
    let form = "grant_type=client_credentials&scope=tsg_id%3A1234";
    let token_request = |secret: &'static str| {
        emu.http
            .post(&token_url)
            .basic_auth("client", Some(secret))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form)
            .send()
    };
    let wrong = token_request("wrong").await.expect("token request");
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    let granted: Value = token_request("secret")
        .await
        .expect("token request")
        .json()
        .await
        .expect("token json");
    assert_eq!(granted["token_type"], "Bearer");
    assert_eq!(granted["expires_in"], json!(1));
    let access_token = granted["access_token"]
        .as_str()
        .expect("access_token")
        .to_owned();

    let with_token = |token: &str| {
        emu.http
            .get(emu.url("/ai_gw/v2/configs"))
            .bearer_auth(token)
            .send()
    };
    assert_eq!(
        with_token(&access_token).await.expect("request").status(),
        StatusCode::OK
    );
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(
        with_token(&access_token).await.expect("request").status(),
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        with_token(TOKEN).await.expect("request").status(),
        StatusCode::OK,
        "static token stays valid"
    );
}

#[tokio::test]
async fn token_endpoint_is_absent_without_oauth_options() {
    let emu = Emu::start().await;
    let response = emu
        .http
        .post(emu.url("/oauth2/access_token"))
        .basic_auth("client", Some("secret"))
        .body("grant_type=client_credentials")
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn dropping_the_handle_stops_the_server() {
    let emu = Emu::start().await;
    let url = emu.url("/ai_gw/v2/configs");
    let http = emu.http.clone();
    let Emu { running, .. } = emu;
    running.shutdown().await.expect("clean shutdown");
    let fresh = reqwest::Client::new();
    assert!(fresh.get(&url).bearer_auth(TOKEN).send().await.is_err());
    drop(http);
}

#[tokio::test]
async fn new_fault_switches_are_validated_reported_and_cleared() {
    let emu = Emu::start().await;
    let all = json!({
        "error_after_commit_rate": 0.5, "garbage_2xx_rate": 0.25, "create_without_slug": true,
        "missing_as_ab03": true, "list_cap": 2, "list_lag_ms": 100, "normalise": true,
        "mask_credentials": true,
    });
    emu.faults(all.clone()).await;
    assert_eq!(
        emu.control_ok(Method::GET, "/_emulator/faults", None).await,
        all
    );
    for bad in [
        json!({"error_after_commit_rate": 1.5}),
        json!({"garbage_2xx_rate": -0.1}),
        json!({"list_cap": -1}),
        json!({"list_lag_ms": 3_600_000}),
        json!({"normalise": "yes"}),
        json!({"no_such_switch": true}),
    ] {
        let (status, body) = emu
            .control(Method::PUT, "/_emulator/faults", Some(bad.clone()))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
        assert_eq!(body["data"]["errorCode"], "AB01", "{body}");
    }
    emu.faults(json!({})).await;
    assert_eq!(
        emu.control_ok(Method::GET, "/_emulator/faults", None).await,
        json!({})
    );
}

#[tokio::test]
async fn create_without_slug_omits_it_from_the_receipt_only() {
    let emu = Emu::start().await;
    emu.faults(json!({"create_without_slug": true})).await;
    let receipt = emu.create_config("no slug").await;
    assert!(receipt.get("slug").is_none(), "{receipt}");
    let id = text(&receipt["id"]);
    let (status, read) = emu.get(&format!("/ai_gw/v2/configs/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(text(&read["slug"]).starts_with("pc-no-slu-"), "{read}");
    let (_, list) = emu.get("/ai_gw/v2/configs").await;
    assert_eq!(list["data"][0]["slug"], read["slug"]);
    let deployment = emu.create_deployment(json!({"name": "no slug"})).await;
    assert!(deployment.get("slug").is_none(), "{deployment}");
    emu.faults(json!({})).await;
    assert!(emu.create_config("with slug").await["slug"].is_string());
}

#[tokio::test]
async fn missing_as_ab03_answers_403_for_every_missing_object() {
    let (emu, slug) = config_then_faults("kept", json!({"missing_as_ab03": true})).await;
    let missing = "00000000-0000-0000-0000-000000000000";
    for path in [
        "/ai_gw/v2/configs/pc-gone-000000".to_owned(),
        format!("/ai_gw/admin/v2/deployments/{missing}"),
        format!("/ai_gw/v2/policies/rate-limits/{missing}"),
    ] {
        for method in [Method::GET, Method::PUT, Method::DELETE] {
            let request = emu.call(method.clone(), &path).json(&json!({"name": "x"}));
            let (status, body) = emu.send(request).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path}");
            assert_envelope(&body, None);
            assert_eq!(body["error"]["code"], "AB03", "{body}");
        }
    }
    let (status, _) = emu.get(&format!("/ai_gw/v2/configs/{slug}")).await;
    assert_eq!(status, StatusCode::OK, "existing objects are unaffected");
    let stats = emu.stats().await;
    assert_eq!(
        stats["GET /ai_gw/v2/configs/{slug}"],
        json!({"200": 1, "403": 1})
    );
    assert_eq!(
        stats["DELETE /ai_gw/admin/v2/deployments/{deploymentId}"],
        json!({"403": 1})
    );
    emu.faults(json!({})).await;
    let (status, _) = emu.get("/ai_gw/v2/configs/pc-gone-000000").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn list_cap_cuts_config_and_deployment_lists_but_total_tells_the_truth() {
    let emu = Emu::start().await;
    for n in 0..3 {
        emu.create_config(&format!("c{n}")).await;
        emu.create_deployment(json!({"name": format!("d{n}")}))
            .await;
        emu.create_rate_limit(rate_limit_body(json!(n))).await;
    }
    emu.faults(json!({"list_cap": 2})).await;
    for path in ["/ai_gw/v2/configs", "/ai_gw/admin/v2/deployments"] {
        let (_, list) = emu.get(path).await;
        assert_eq!(list["total"], json!(3), "{path}");
        assert_eq!(list["data"].as_array().map(Vec::len), Some(2), "{path}");
    }
    let (_, policies) = emu.get("/ai_gw/v2/policies/rate-limits").await;
    assert_eq!(
        policies["data"].as_array().map(Vec::len),
        Some(3),
        "paged lists are not capped"
    );
}

#[tokio::test]
async fn list_lag_hides_fresh_objects_from_lists_but_not_from_reads() {
    let emu = Emu::start().await;
    let seed = json!({"configs": [{"name": "old"}]});
    emu.control_ok(Method::POST, "/_emulator/seed", Some(seed))
        .await;
    emu.faults(json!({"list_lag_ms": 60_000})).await;
    let config = text(&emu.create_config("fresh").await["slug"]);
    let deployment = text(&emu.create_deployment(json!({"name": "fresh"})).await["id"]);
    let policy = text(&emu.create_rate_limit(rate_limit_body(json!(1))).await["id"]);
    let (_, configs) = emu.get("/ai_gw/v2/configs").await;
    assert_eq!(
        configs["total"],
        json!(1),
        "only the seeded config: {configs}"
    );
    assert_eq!(configs["data"][0]["name"], "old");
    for path in [
        "/ai_gw/admin/v2/deployments",
        "/ai_gw/v2/policies/rate-limits",
    ] {
        let (_, list) = emu.get(path).await;
        assert_eq!(list["total"], json!(0), "{path}: {list}");
    }
    for path in [
        format!("/ai_gw/v2/configs/{config}"),
        format!("/ai_gw/admin/v2/deployments/{deployment}"),
        format!("/ai_gw/v2/policies/rate-limits/{policy}"),
    ] {
        let (status, _) = emu.get(&path).await;
        assert_eq!(status, StatusCode::OK, "{path} is readable at once");
    }
    emu.faults(json!({})).await;
    let (_, configs) = emu.get("/ai_gw/v2/configs").await;
    assert_eq!(configs["total"], json!(2));
}

#[tokio::test]
async fn error_after_commit_applies_writes_then_answers_5xx() {
    let (emu, slug) =
        config_then_faults("committed", json!({"error_after_commit_rate": 1.0})).await;
    let path = format!("/ai_gw/v2/configs/{slug}");
    let (status, body) = emu
        .put(&path, json!({"config": {"retry": {"attempts": 7}}}))
        .await;
    assert!(
        [500, 502, 503].contains(&status.as_u16()),
        "{status} {body}"
    );
    assert_envelope(&body, None);
    let (status, _) = emu
        .post("/ai_gw/v2/configs", json!({"name": "ghost", "config": {}}))
        .await;
    assert!(status.is_server_error(), "{status}");
    let (status, read) = emu.get(&path).await;
    assert_eq!(status, StatusCode::OK, "reads are not affected");
    assert_eq!(read["config"], "{\"retry\":{\"attempts\":7}}");
    let (status, _) = emu.put(&path, json!({})).await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "rejected writes keep their answer"
    );
    let state = emu.state().await;
    assert_eq!(
        state["configs"].as_array().map(Vec::len),
        Some(2),
        "the failed create was applied"
    );
    let stats = emu.stats().await;
    let puts = stats["PUT /ai_gw/v2/configs/{slug}"]
        .as_object()
        .expect("counted");
    let errors: u64 = puts
        .iter()
        .filter(|(status, _)| status.starts_with('5'))
        .filter_map(|(_, n)| n.as_u64())
        .sum();
    assert_eq!((errors, puts.get("400")), (1, Some(&json!(1))));
}

#[tokio::test]
async fn garbage_2xx_applies_writes_then_answers_unparseable_200() {
    let (emu, slug) = config_then_faults("garbled", json!({"garbage_2xx_rate": 1.0})).await;
    let path = format!("/ai_gw/v2/configs/{slug}");
    let request = emu
        .call(Method::PUT, &path)
        .json(&json!({"config": {"retry": {"attempts": 8}}}));
    let (status, body) = emu.send_raw(request).await;
    assert_eq!(status, StatusCode::OK);
    assert!(serde_json::from_str::<Value>(&body).is_err(), "{body}");
    let (status, read) = emu.get(&path).await;
    assert_eq!(status, StatusCode::OK, "reads stay JSON");
    assert_eq!(read["config"], "{\"retry\":{\"attempts\":8}}");
}

#[tokio::test]
async fn normalise_returns_documents_in_another_shape_with_the_same_meaning() {
    let emu = Emu::start().await;
    let document = json!({"cache": {"mode": "simple", "max_age": 60.0},
                          "retry": {"attempts": 3.0, "on_status_codes": [500, 503]}});
    let slug = config_of(&emu, "n", &document).await;
    let written = document.to_string();
    let (_, plain) = emu.get(&format!("/ai_gw/v2/configs/{slug}")).await;
    assert_eq!(text(&plain["config"]), written);
    let policy = text(&emu.create_rate_limit(rate_limit_body(json!(10.0))).await["id"]);
    let deployment = emu
        .create_deployment(
            json!({"name": "n", "deployment_config": {"replicas": 2.0, "zone": "a"}}),
        )
        .await;

    emu.faults(json!({"normalise": true})).await;
    let (_, read) = emu.get(&format!("/ai_gw/v2/configs/{slug}")).await;
    let config = text(&read["config"]);
    assert_ne!(config, written, "not byte for byte what was written");
    assert!(
        config.find("\"retry\"") < config.find("\"cache\""),
        "{config}"
    );
    let parsed: Value = serde_json::from_str(&config).expect("still json");
    assert_eq!(parsed["retry"]["attempts"], json!(3), "1.0 comes back as 1");
    assert_eq!(parsed["cache"]["max_age"], json!(60));
    let (_, versions) = emu.get(&format!("/ai_gw/v2/configs/{slug}/versions")).await;
    assert_eq!(versions["data"][0]["config"], json!(config));

    let (_, read) = emu
        .get(&format!("/ai_gw/v2/policies/rate-limits/{policy}"))
        .await;
    assert_eq!(read["conditions"][0]["key"], "metadata.team");
    assert_eq!(read["group_by"][0]["key"], "workspace_id");
    assert_eq!(read["value"], json!(10));
    let (_, list) = emu.get("/ai_gw/v2/policies/rate-limits").await;
    assert_eq!(list["data"][0]["conditions"], read["conditions"]);

    let path = format!("/ai_gw/admin/v2/deployments/{}", text(&deployment["id"]));
    let (_, raw) = emu.send_raw(emu.call(Method::GET, &path)).await;
    assert!(
        raw.find("\"workspaces\"") < raw.find("\"auth_settings\""),
        "{raw}"
    );
    let read: Value = serde_json::from_str(&raw).expect("json");
    assert_eq!(
        read["deployment_config"],
        json!({"replicas": 2, "zone": "a"})
    );
}

#[tokio::test]
async fn mask_credentials_hides_secrets_in_config_reads() {
    let emu = Emu::start().await;
    let document = json!({
        "api_key": "sk-live", "provider": "openai", "custom_headers": {"x-api-key": "hdr"},
        "strategy": {"mode": "fallback"},
        "targets": [{"virtual_key": "vk-1", "aws_secret_access_key": "aws-s", "aws_access_key_id": "AKIA",
                     "vertex_service_account_json": "vx-1"}],
    });
    let slug = config_of(&emu, "m", &document).await;
    emu.faults(json!({"mask_credentials": true})).await;
    let (_, read) = emu.get(&format!("/ai_gw/v2/configs/{slug}")).await;
    let config = text(&read["config"]);
    for secret in ["sk-live", "hdr", "aws-s", "vx-1"] {
        assert!(!config.contains(secret), "{secret} in {config}");
    }
    let parsed: Value = serde_json::from_str(&config).expect("json");
    assert_eq!(parsed["api_key"], "********");
    // A virtual key names a stored key; it is not one itself.
    assert_eq!(parsed["targets"][0]["virtual_key"], "vk-1");
    assert_eq!(parsed["targets"][0]["aws_access_key_id"], "AKIA");
    assert_eq!(parsed["provider"], "openai");
    let (_, versions) = emu.get(&format!("/ai_gw/v2/configs/{slug}/versions")).await;
    assert!(!versions.to_string().contains("sk-live"));
    assert_eq!(
        emu.state().await["configs"][0]["config"]["api_key"],
        "sk-live",
        "the stored document is intact"
    );
}

#[tokio::test]
async fn generated_guardrails_page_by_the_thousand_and_resolve_by_slug_and_id() {
    let emu = Emu::start().await;
    let seed = json!({"generate_guardrails": {"count": 2500, "prefix": "pg-gen"}});
    let made = emu
        .control_ok(Method::POST, "/_emulator/seed", Some(seed.clone()))
        .await;
    assert_eq!(made["generate_guardrails"]["count"], json!(2500));
    assert_eq!(made["generate_guardrails"]["last"]["slug"], "pg-gen-002499");
    let mut ids = std::collections::HashSet::new();
    for (page, expected) in [(0, 1000), (1, 1000), (2, 500), (3, 0)] {
        let (status, body) = emu
            .get(&format!(
                "/ai_gw/admin/v2/guardrails?page_size=1000&current_page={page}"
            ))
            .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body["total"], json!(2500));
        let rows = body["data"].as_array().expect("rows");
        assert_eq!(rows.len(), expected, "page {page}");
        ids.extend(rows.iter().map(|row| text(&row["id"])));
    }
    assert_eq!(ids.len(), 2500, "pages do not overlap");
    let (status, by_slug) = emu.get("/ai_gw/v2/guardrails/pg-gen-001234").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(by_slug["name"], "pg-gen 1234");
    let id = text(&by_slug["id"]);
    let (_, by_id) = emu.get(&format!("/ai_gw/admin/v2/guardrails/{id}")).await;
    assert_eq!(by_id["slug"], "pg-gen-001234");
    let (again, _) = emu.seed(seed).await;
    assert_eq!(again, StatusCode::BAD_REQUEST, "slugs stay unique");
    let (_, default_page) = emu.get("/ai_gw/v2/guardrails").await;
    assert_eq!(default_page["data"].as_array().map(Vec::len), Some(100));
}

#[tokio::test]
async fn list_rows_carry_timestamps_that_move_on_every_write() {
    let emu = Emu::start().await;
    let slug = text(&emu.create_config("ts").await["slug"]);
    let deployment = text(&emu.create_deployment(json!({"name": "ts"})).await["id"]);
    let policy = text(&emu.create_rate_limit(rate_limit_body(json!(1))).await["id"]);
    let row = |list: &Value| list["data"][0].clone();
    let lists = [
        "/ai_gw/v2/configs",
        "/ai_gw/admin/v2/deployments",
        "/ai_gw/v2/policies/rate-limits",
    ];
    let mut before = Vec::new();
    for path in lists {
        let (_, list) = emu.get(path).await;
        let row = row(&list);
        assert!(row["created_at"].is_string(), "{path}: {row}");
        before.push(text(&row["last_updated_at"]));
    }
    // Written back to back, within the same millisecond as the create more often than not.
    emu.put(&format!("/ai_gw/v2/configs/{slug}"), json!({"name": "ts2"}))
        .await;
    emu.put(
        &format!("/ai_gw/admin/v2/deployments/{deployment}"),
        json!({"rotate_auth": true}),
    )
    .await;
    emu.put(
        &format!("/ai_gw/v2/policies/rate-limits/{policy}"),
        json!({"value": 2}),
    )
    .await;
    for (path, before) in lists.into_iter().zip(before) {
        let (_, list) = emu.get(path).await;
        let after = text(&row(&list)["last_updated_at"]);
        assert!(after > before, "{path}: {after} after {before}");
    }
}

#[tokio::test]
async fn deployment_list_filters_by_deep_object_tags() {
    let emu = Emu::start().await;
    for (name, tags) in [
        ("alpha", json!({"aigw.io/uid": "u1", "env": "dev"})),
        ("beta", json!({"aigw.io/uid": "u2", "env": "dev"})),
        ("gamma", json!({})),
    ] {
        emu.create_deployment(json!({"name": name, "tags": tags}))
            .await;
    }
    let list = |query: Vec<(&'static str, &'static str)>| {
        let request = emu
            .call(Method::GET, "/ai_gw/admin/v2/deployments")
            .query(&query);
        emu.send(request)
    };
    let (status, one) = list(vec![("tags[aigw.io/uid]", "u1")]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(one["total"], json!(1));
    assert_eq!(
        one["data"][0]["tags"],
        json!({"aigw.io/uid": "u1", "env": "dev"})
    );
    let (_, dev) = list(vec![("tags[env]", "dev")]).await;
    assert_eq!(dev["total"], json!(2));
    let (_, both) = list(vec![("tags[env]", "dev"), ("tags[aigw.io/uid]", "u2")]).await;
    assert_eq!(both["data"][0]["name"], "beta");
    assert_eq!(both["total"], json!(1));
    let (_, none) = list(vec![("tags[env]", "dev"), ("tags[aigw.io/uid]", "u3")]).await;
    assert_eq!(none["total"], json!(0), "every given tag must match");
    let (_, searched) = list(vec![
        ("tags[env]", "dev"),
        ("search", "ALP"),
        ("status", "active"),
    ])
    .await;
    assert_eq!(searched["total"], json!(1));
    let (_, archived) = list(vec![("tags[env]", "dev"), ("status", "archived")]).await;
    assert_eq!(archived["total"], json!(0));
}

#[tokio::test]
async fn state_counts_rotations_per_deployment() {
    let emu = Emu::start().await;
    let rotated = text(&emu.create_deployment(json!({"name": "r"})).await["id"]);
    let plain = text(&emu.create_deployment(json!({"name": "p"})).await["id"]);
    for body in [
        json!({"rotate_auth": true}),
        json!({"rotate_auth": true}),
        json!({"name": "r2"}),
        json!({"rotate_auth": false}),
    ] {
        emu.put(&format!("/ai_gw/admin/v2/deployments/{rotated}"), body)
            .await;
    }
    emu.put(
        &format!("/ai_gw/admin/v2/deployments/{plain}"),
        json!({"name": "p2"}),
    )
    .await;
    let state = emu.state().await;
    let rotations = |id: &str| {
        state["deployments"]
            .as_array()
            .and_then(|all| all.iter().find(|d| d["id"] == json!(id)))
            .map(|d| d["rotations"].clone())
    };
    assert_eq!(rotations(&rotated), Some(json!(2)));
    assert_eq!(rotations(&plain), Some(json!(0)));
    assert!(
        state["deployments"][0]["client_auth"].is_string(),
        "the rest of the dump stays"
    );
}

#[tokio::test]
async fn malformed_references_are_rejected_naming_the_field() {
    let emu = Emu::start().await;
    let body = emu
        .post_refused(
            "/ai_gw/v2/configs",
            json!({"name": "x", "config": {}, "workspace_id": "ws-1"}),
        )
        .await;
    assert_envelope(&body, Some("workspace_id"));
    for path in [
        "/ai_gw/v2/configs?workspace_id=6f0e4a2c-zzzz",
        "/ai_gw/v2/guardrails?workspace_id=not-a-uuid",
        "/ai_gw/v2/policies/rate-limits?workspace_id=has%20space",
        "/ai_gw/admin/v2/deployments?organisation_id=tsg-1",
    ] {
        let (status, body) = emu.get(path).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}");
        assert!(body["error"]["param"].is_string(), "{path}: {body}");
    }
    let mut policy = rate_limit_body(json!(5));
    policy["organisation_id"] = json!("org-1");
    let body = emu
        .post_refused("/ai_gw/v2/policies/rate-limits", policy)
        .await;
    assert_envelope(&body, Some("organisation_id"));
    let mut policy = rate_limit_body(json!(5));
    policy["workspace_id"] = json!("ws-slug-1");
    emu.create_rate_limit(policy).await;

    for organisation in ["1234567890", WORKSPACE] {
        emu.create_deployment(json!({"name": "tsg", "organisation_id": organisation}))
            .await;
    }
    let body = emu
        .post_refused(
            "/ai_gw/admin/v2/deployments",
            json!({"name": "tsg", "organisation_id": "tsg-12"}),
        )
        .await;
    assert_envelope(&body, Some("organisation_id"));
    let id = text(&emu.create_deployment(json!({"name": "del"})).await["id"]);
    let (status, _) = emu
        .delete(&format!(
            "/ai_gw/admin/v2/deployments/{id}?organisation_id=abc"
        ))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = emu
        .delete(&format!(
            "/ai_gw/admin/v2/deployments/{id}?organisation_id=1234567890"
        ))
        .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn null_for_a_required_number_is_a_400() {
    let emu = Emu::start().await;
    let body = emu
        .post_refused(
            "/ai_gw/v2/policies/rate-limits",
            rate_limit_body(Value::Null),
        )
        .await;
    assert_ab(&body, "AB01", "value");
    let id = text(&emu.create_rate_limit(rate_limit_body(json!(5))).await["id"]);
    let path = format!("/ai_gw/v2/policies/rate-limits/{id}");
    let (status, body) = emu.put(&path, json!({"value": null})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_ab(&body, "AB01", "null");
    let (_, read) = emu.get(&path).await;
    assert_eq!(read["value"], json!(5));
}

#[tokio::test]
async fn rate_limit_paging_rejects_bad_parameters() {
    let emu = Emu::start().await;
    for n in 0..3 {
        emu.create_rate_limit(rate_limit_body(json!(n))).await;
    }
    let base = "/ai_gw/v2/policies/rate-limits";
    let (_, page) = emu.get(&format!("{base}?page_size=2&current_page=1")).await;
    assert_eq!(
        (page["total"].clone(), page["data"].as_array().map(Vec::len)),
        (json!(3), Some(1))
    );
    let (_, default) = emu.get(&format!("{base}?page_size=0")).await;
    assert_eq!(
        default["data"].as_array().map(Vec::len),
        Some(3),
        "0 means the default of 100"
    );
    for query in ["page_size=-1", "current_page=-1", "page_size=abc"] {
        let (status, body) = emu.get(&format!("{base}?{query}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}");
        assert_eq!(body["data"]["errorCode"], "AB01", "{body}");
    }
}

#[tokio::test]
async fn guardrails_are_created_read_updated_and_deleted_on_both_planes() {
    let emu = Emu::start().await;
    let checks =
        json!([{"id": "default.regexMatch", "parameters": {"rule": "x", "api_key": "sk-airs-1"}}]);
    // The workspace plane needs a workspace.
    let _ = emu
        .post_refused(
            "/ai_gw/v2/guardrails",
            json!({"name": "pii", "checks": checks}),
        )
        .await;
    let (status, created) = emu
        .post(
            "/ai_gw/v2/guardrails",
            json!({"name": "pii", "workspace_id": WORKSPACE, "checks": checks, "actions": {"deny": true}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{created}");
    let slug = created["slug"].as_str().unwrap().to_string();
    assert!(slug.starts_with("pg-"), "{slug}");
    let first_version = created["version_id"].clone();
    assert!(first_version.is_string());

    // Read by slug and by id: defaults filled, credentials masked; the state shows them in clear.
    for key in [slug.as_str(), created["id"].as_str().unwrap()] {
        let (status, read) = emu.get(&format!("/ai_gw/v2/guardrails/{key}")).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(read["checks"][0]["is_enabled"], true);
        assert_eq!(read["actions"], json!({"deny": true, "async": false}));
        assert_ne!(
            read["checks"][0]["parameters"]["api_key"], "sk-airs-1",
            "masked on read"
        );
        assert_eq!(read["checks"][0]["parameters"]["rule"], "x");
    }
    let stored = emu.state_record("guardrails", "slug", &slug).await;
    assert_eq!(stored["checks"][0]["parameters"]["api_key"], "sk-airs-1");
    // Lists show summaries, never checks.
    let (_, list) = emu.get("/ai_gw/v2/guardrails").await;
    assert!(
        list["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|g| g.get("checks").is_none())
    );

    // An update replaces the checks and mints a version; the fixed fields are refused.
    let (status, updated) = emu
        .put(
            &format!("/ai_gw/v2/guardrails/{slug}"),
            json!({"checks": [{"id": "default.contains", "parameters": {"words": ["a"]}}]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{updated}");
    assert_ne!(updated["version_id"], first_version);
    let (_, read) = emu.get(&format!("/ai_gw/v2/guardrails/{slug}")).await;
    assert_eq!(read["checks"].as_array().unwrap().len(), 1);
    assert_eq!(read["checks"][0]["id"], "default.contains");
    for fixed in [
        json!({"target": "mcp_tools"}),
        json!({"workspace_id": WORKSPACE}),
    ] {
        let (status, _) = emu
            .put(&format!("/ai_gw/v2/guardrails/{slug}"), fixed)
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
    }

    // A hard delete: reads then answer the missing-guardrail 403, and the list forgets it.
    let (status, _) = emu.delete(&format!("/ai_gw/v2/guardrails/{slug}")).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = emu.get(&format!("/ai_gw/v2/guardrails/{slug}")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = emu.delete(&format!("/ai_gw/v2/guardrails/{slug}")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (_, list) = emu.get("/ai_gw/v2/guardrails").await;
    assert_eq!(list["total"], 0);

    // The admin plane makes organisation guardrails (no workspace).
    let (status, org) = emu
        .post(
            "/ai_gw/admin/v2/guardrails",
            json!({"name": "org-wide", "checks": checks}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{org}");
    let (_, read) = emu
        .get(&format!(
            "/ai_gw/admin/v2/guardrails/{}",
            org["slug"].as_str().unwrap()
        ))
        .await;
    assert!(read["workspace_id"].is_null(), "{read}");
}
