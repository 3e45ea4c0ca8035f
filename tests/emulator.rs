//! The emulator over real HTTP: auth, the live API's quirks, the control endpoints and faults.

use std::time::{Duration, Instant};

use aigw::emulator::{EmulatorOptions, OAuthOptions, Running, spawn};
use reqwest::{Method, RequestBuilder, StatusCode};
use serde_json::{Value, json};

const TOKEN: &str = "test-token";
/// Config and guardrail `workspace_id`s are workspace UUIDs.
const WORKSPACE: &str = "6f0e4a2c-5a4e-4c1b-9a53-3c2f1f0d9b11";

struct Emu {
    running: Running,
    http: reqwest::Client,
}

impl Emu {
    async fn start() -> Self {
        Self::with(EmulatorOptions::new(TOKEN)).await
    }

    async fn with(options: EmulatorOptions) -> Self {
        let running = spawn(options).await.expect("emulator starts");
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .expect("http client");
        Self { running, http }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.running.management_url())
    }

    fn call(&self, method: Method, path: &str) -> RequestBuilder {
        self.http.request(method, self.url(path)).bearer_auth(TOKEN)
    }

    /// Sends and returns status plus JSON body (`Null` for an empty body).
    async fn send(&self, request: RequestBuilder) -> (StatusCode, Value) {
        let response = request.send().await.expect("request succeeds");
        let status = response.status();
        let bytes = response.bytes().await.expect("body");
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).expect("json body")
        };
        (status, body)
    }

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.send(self.call(Method::GET, path)).await
    }

    async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.send(self.call(Method::POST, path).json(&body)).await
    }

    async fn put(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.send(self.call(Method::PUT, path).json(&body)).await
    }

    async fn delete(&self, path: &str) -> (StatusCode, Value) {
        self.send(self.call(Method::DELETE, path)).await
    }

    /// Control endpoints need no token.
    async fn control(&self, method: Method, path: &str, body: Option<Value>) -> Value {
        let mut request = self.http.request(method, self.url(path));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("control request");
        assert!(
            response.status().is_success(),
            "{path}: {}",
            response.status()
        );
        response.json().await.expect("control json")
    }

    async fn faults(&self, faults: Value) {
        self.control(Method::PUT, "/_emulator/faults", Some(faults))
            .await;
    }

    async fn state(&self) -> Value {
        self.control(Method::GET, "/_emulator/state", None).await
    }

    async fn create_config(&self, name: &str) -> Value {
        let body =
            json!({"name": name, "config": {"retry": {"attempts": 3}}, "workspace_id": WORKSPACE});
        let (status, receipt) = self.post("/ai_gw/v2/configs", body).await;
        assert_eq!(status, StatusCode::OK, "{receipt}");
        receipt
    }

    async fn create_deployment(&self, body: Value) -> Value {
        let (status, receipt) = self.post("/ai_gw/admin/v2/deployments", body).await;
        assert_eq!(status, StatusCode::OK, "{receipt}");
        receipt
    }
}

fn assert_ab(body: &Value, code: &str, mentions: &str) {
    assert_eq!(body["success"], json!(false), "{body}");
    assert_eq!(body["data"]["errorCode"], json!(code), "{body}");
    let message = body["data"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(mentions),
        "message {message:?} should mention {mentions:?}"
    );
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
    let (status, body) = emu.post("/ai_gw/v2/configs", json!({"config": {}})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_ab(&body, "AB01", "name");
    let (status, body) = emu
        .post("/ai_gw/v2/configs", json!({"name": "x", "config": "str"}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
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
    let client_auth = receipt["client_auth"]
        .as_str()
        .expect("client_auth")
        .to_owned();
    let password = receipt["credentials"]["password"]
        .as_str()
        .expect("password")
        .to_owned();
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
    let new_auth = rotated["client_auth"]
        .as_str()
        .expect("new client_auth")
        .to_owned();
    let new_password = rotated["credentials"]["password"]
        .as_str()
        .expect("new password")
        .to_owned();
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
    let (status, error) = emu
        .post("/ai_gw/admin/v2/deployments", json!({"type": "production"}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_ab(&error, "AB01", "name");

    let response = emu
        .call(Method::DELETE, &path)
        .send()
        .await
        .expect("delete");
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
    emu.control(
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
    let (status, error) = emu
        .post(base, json!({"conditions": [], "group_by": [{"key": "api_key"}], "type": "requests", "unit": "rpm", "value": 10}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_ab(&error, "AB01", "conditions");
    let (status, error) = emu
        .post(base, json!({"conditions": [{"key": "workspace_id", "value": "w"}], "group_by": [{"key": "api_key"}], "type": "requests", "unit": "rps", "value": 10}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
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

    let (status, body) = emu.delete(&path).await;
    assert_eq!((status, body), (StatusCode::OK, json!({})));
    let (status, missing) = emu.get(&path).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_ab(&missing, "AB08", "not found");
    let (status, archived) = emu.get(&format!("{path}?status=archived")).await;
    assert_eq!(
        (status, archived["status"].clone()),
        (StatusCode::OK, json!("archived"))
    );
    let (status, _) = emu.delete(&path).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn guardrails_page_and_reject_out_of_bounds_with_the_envelope() {
    let emu = Emu::start().await;
    let guardrails: Vec<Value> = (0..5).map(|n| json!({"name": format!("g{n}")})).collect();
    emu.control(
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
        .control(Method::POST, "/_emulator/seed", Some(seed))
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
        .control(Method::POST, "/_emulator/seed", Some(seed))
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
    emu.control(Method::DELETE, "/_emulator/state", None).await;
    let (_, list) = emu.get("/ai_gw/v2/configs").await;
    assert_eq!(list["total"], json!(0));
}

#[tokio::test]
async fn stats_count_by_method_and_path_template() {
    let emu = Emu::start().await;
    let slug = emu.create_config("stats").await["slug"]
        .as_str()
        .unwrap_or("")
        .to_owned();
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

    let stats = emu.control(Method::GET, "/_emulator/stats", None).await;
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
    emu.control(Method::DELETE, "/_emulator/stats", None).await;
    let stats = emu.control(Method::GET, "/_emulator/stats", None).await;
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
    let emu = Emu::start().await;
    let slug = emu.create_config("dropped").await["slug"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    emu.faults(json!({"drop_after_commit_rate": 1.0})).await;
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
    let response = emu
        .call(Method::GET, "/ai_gw/v2/configs")
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry_after: u64 = response
        .headers()
        .get("retry-after")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse().ok())
        .expect("Retry-After in seconds");
    assert!((1..=2).contains(&retry_after));
    let stats = emu.control(Method::GET, "/_emulator/stats", None).await;
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
    let emu = Emu::with(options).await;
    let token_url = emu.url("/oauth2/access_token");
    let form = "grant_type=client_credentials&scope=tsg_id%3A1234";
    let wrong = emu
        .http
        .post(&token_url)
        .basic_auth("client", Some("wrong"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form)
        .send()
        .await
        .expect("token request");
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    let granted: Value = emu
        .http
        .post(&token_url)
        .basic_auth("client", Some("secret"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form)
        .send()
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
