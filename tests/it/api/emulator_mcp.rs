//! The emulator's MCP integrations, MCP servers and guardrail ↔ MCP-server mappings over real
//! HTTP (FACTS-rest §4–§7): `configurations` masked and a JSON string in list rows, workspace
//! access rows disabled but never deleted (both read shapes), capabilities that exist only after
//! discovery, servers only where their integration is enabled, the detail without
//! `workspace_id`, 403 for `test` and connection deletes, user access, and the mapping bulk
//! sync that replaces the whole set inside the `{object, total, data}` envelope.

use crate::support;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use support::emu::{Emu, assert_ab01, text};

const MCP: &str = "/ai_gw/admin/v2/mcp-integrations";
const SERVERS: &str = "/ai_gw/v2/mcp-servers";
const HEADER_SECRET: &str = "Bearer lin-api-Pq7Ws2Ex9Rt4";
const CLIENT_SECRET: &str = "oauth-client-secret-Hh31";

fn linear() -> Value {
    json!({"organisation_id": "1234567890", "name": "Linear", "slug": "linear",
           "url": "https://mcp.linear.app/mcp", "auth_type": "headers", "transport": "http",
           "configurations": {"custom_headers": {"Authorization": HEADER_SECRET},
                              "client_secret": CLIENT_SECRET,
                              "jwt_validation": {"headerKey": "x-jwt", "jwksUri": "https://idp/jwks"}}})
}

impl Emu {
    async fn discover(&self, integration: &str, body: Value) -> Value {
        let (status, metadata) = self
            .control(
                Method::POST,
                &format!("/_emulator/mcp-integrations/{integration}/discover"),
                Some(body),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{metadata}");
        metadata
    }

    async fn default_workspace(&self) -> (String, String) {
        let id = text(&self.state().await["default_workspace_id"]);
        let (_, read) = self.get(&format!("/ai_gw/v2/workspaces/{id}")).await;
        (id, text(&read["slug"]))
    }
}

#[tokio::test]
async fn integrations_hide_configurations_and_keep_every_access_row() {
    let emu = Emu::start().await;
    for (mentions, patch) in [
        ("auth_type", json!({"auth_type": "basic"})),
        ("transport", json!({"transport": "websocket"})),
        ("url", json!({"url": "ftp://x"})),
        ("slug", json!({"slug": "has space"})),
    ] {
        let mut body = linear();
        for (key, value) in patch.as_object().expect("patch") {
            body[key] = value.clone();
        }
        let (status, error) = emu.post(MCP, body).await;
        assert_ab01(status, &error, mentions);
    }
    let receipt = emu.post_receipt(MCP, linear()).await;
    let id = text(&receipt["id"]);

    let (_, detail) = emu.get(&format!("{MCP}/linear")).await;
    let shown = detail.to_string();
    assert!(
        !shown.contains("Pq7Ws2Ex9Rt4") && !shown.contains(CLIENT_SECRET),
        "{shown}"
    );
    assert!(detail["configurations"].is_object());
    assert!(detail["configurations"]["masked_client_secret"].is_string());
    assert_eq!(
        detail["configurations"]["jwt_validation"]["headerKey"],
        "x-jwt"
    );
    assert!(detail["secret_mappings"].is_null(), "null until set");
    assert!(detail["global_workspace_access"].is_null());
    assert_eq!(detail["type"], "organisation");
    assert!(detail["workspace_id"].is_null());

    let (_, list) = emu.get(MCP).await;
    let row = &list["data"][0];
    let configurations = row["configurations"]
        .as_str()
        .expect("a JSON string in rows");
    let parsed: Value = serde_json::from_str(configurations).expect("JSON");
    assert!(parsed["masked_client_secret"].is_string());
    assert!(!configurations.contains(CLIENT_SECRET));
    assert_eq!(row["metadata"]["sync_status"], "pending");
    assert!(
        row["organisation_id"]
            .as_str()
            .is_some_and(|o| o.len() == 36)
    );
    let (status, _) = emu.get(&format!("{MCP}?organisation_id=1234567890")).await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "no organisation_id query parameter"
    );

    // Access rows: merged per row, disabled rows stay, both read shapes.
    let grant =
        json!({"workspaces": [{"id": "ws-a", "enabled": true}, {"id": "ws-b", "enabled": true}]});
    let (status, answer) = emu.put(&format!("{MCP}/{id}/workspaces"), grant).await;
    assert_eq!((status, answer), (StatusCode::OK, json!({})));
    let disable = json!({"workspaces": [{"id": "ws-a", "enabled": false}]});
    emu.put(&format!("{MCP}/linear/workspaces"), disable).await;
    let (_, legacy) = emu.get(&format!("{MCP}/linear/workspaces")).await;
    let rows = legacy["workspaces"].as_array().expect("legacy rows");
    assert_eq!(rows.len(), 2, "{legacy}");
    assert_eq!(rows[0]["enabled"], false);
    assert_eq!(rows[0]["status"], "archived");
    let (_, versioned) = emu.get(&format!("{MCP}/linear/workspaces?version=2")).await;
    assert_eq!(versioned["object"], "list");
    assert_eq!(versioned["total"], 2);
    assert_eq!(versioned["data"][1]["status"], "active");
    let (_, list) = emu.get(MCP).await;
    assert_eq!(list["data"][0]["workspaces_count"], 1);

    let (status, answer) = emu
        .put(&format!("{MCP}/linear"), json!({"description": "tickets"}))
        .await;
    assert_eq!((status, answer), (StatusCode::OK, json!({})));
    let (status, error) = emu
        .put(&format!("{MCP}/linear"), json!({"slug": "other"}))
        .await;
    assert_ab01(status, &error, "slug");
    let state = emu.state().await;
    assert_eq!(
        state["mcp_integrations"][0]["configurations"]["client_secret"],
        CLIENT_SECRET
    );
    let (status, _) = emu.delete(&format!("{MCP}/linear")).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = emu.get(&format!("{MCP}/{id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn capabilities_exist_only_after_discovery() {
    let emu = Emu::start().await;
    emu.post(MCP, linear()).await;
    let caps = format!("{MCP}/linear/capabilities");
    let (_, before) = emu.get(&caps).await;
    assert_eq!(before["total"], 0, "{before}");
    assert_eq!(before["counts"]["tools"], json!({"total": 0, "enabled": 0}));
    let toggle =
        json!({"capabilities": [{"name": "create_issue", "type": "tool", "enabled": false}]});
    let (status, error) = emu.put(&caps, toggle.clone()).await;
    assert_ab01(status, &error, "not been discovered");
    let (_, metadata) = emu.get(&format!("{MCP}/linear/metadata")).await;
    assert_eq!(metadata["sync_status"], "pending");

    let metadata = emu
        .discover(
            "linear",
            json!({"server_name": "linear-mcp", "tools": [{"name": "create_issue"}, {"name": "list_issues"}],
                   "prompts": [{"name": "triage"}]}),
        )
        .await;
    assert_eq!(metadata["sync_status"], "synced");
    let (status, answer) = emu.put(&caps, toggle).await;
    assert_eq!((status, answer), (StatusCode::OK, json!({"success": true})));
    let (_, after) = emu.get(&format!("{caps}?type=tool")).await;
    assert_eq!(after["total"], 2, "{after}");
    assert_eq!(after["counts"]["tools"], json!({"total": 2, "enabled": 1}));
    assert_eq!(after["counts"]["prompts"]["total"], 1);
    assert_eq!(after["data"][0]["name"], "create_issue");
    assert_eq!(after["data"][0]["enabled"], false);
    let (_, page) = emu.get(&format!("{caps}?page=2&page_size=2")).await;
    assert_eq!(page["data"].as_array().map(Vec::len), Some(1));
    let (status, _) = emu.get(&format!("{caps}?page=0")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "pages count from 1");

    // A second discovery keeps the toggle of a tool it sees again.
    emu.discover("linear", json!({"tools": [{"name": "create_issue"}]}))
        .await;
    let (_, again) = emu.get(&caps).await;
    assert_eq!(again["total"], 1);
    assert_eq!(again["data"][0]["enabled"], false);
    let failed = emu
        .discover("linear", json!({"error": "upstream 401"}))
        .await;
    assert_eq!(failed["sync_status"], "failed");
    assert_eq!(failed["sync_error"], "upstream 401");
}

#[tokio::test]
async fn servers_need_access_first_and_hide_their_workspace_in_the_detail() {
    let emu = Emu::start().await;
    let (workspace_id, workspace_slug) = emu.default_workspace().await;
    emu.post(MCP, linear()).await;
    let server = json!({"name": "Linear for payments", "mcp_integration_id": "linear",
                        "workspace_id": workspace_slug, "slug": "linear-pay"});
    let (status, error) = emu.post(SERVERS, server.clone()).await;
    assert_ab01(status, &error, "not enabled");
    let (status, error) = emu
        .post(
            SERVERS,
            json!({"name": "x", "mcp_integration_id": "nope", "workspace_id": workspace_id}),
        )
        .await;
    assert_ab01(status, &error, "mcp_integration_id");
    emu.put(
        &format!("{MCP}/linear/workspaces"),
        json!({"workspaces": [{"id": workspace_id, "enabled": true}]}),
    )
    .await;
    let receipt = emu.post_receipt(SERVERS, server.clone()).await;
    let id = text(&receipt["id"]);
    let (status, error) = emu.post(SERVERS, server).await;
    assert_ab01(status, &error, "already exists");

    let (_, detail) = emu.get(&format!("{SERVERS}/linear-pay")).await;
    assert!(detail.get("workspace_id").is_none(), "{detail}");
    assert_eq!(detail["guardrail_mappings"], json!([]));
    assert!(
        detail["mcp_integration_id"]
            .as_str()
            .is_some_and(|i| i.len() == 36)
    );
    let (_, list) = emu
        .get(&format!("{SERVERS}?workspace_id={workspace_slug}&id={id}"))
        .await;
    assert_eq!(list["total"], 1, "{list}");
    assert_eq!(list["data"][0]["workspace_id"], workspace_id.as_str());
    assert_eq!(list["data"][0]["workspace_slug"], workspace_slug.as_str());
    assert_eq!(list["data"][0]["mcp_integration_slug"], "linear");
    let (_, other) = emu.get(&format!("{SERVERS}?workspace_id=ws-other")).await;
    assert_eq!(other["total"], 0);

    let (status, answer) = emu
        .put(
            &format!("{SERVERS}/{id}"),
            json!({"description": "tickets"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(answer["slug"], "linear-pay");
    for field in ["workspace_id", "mcp_integration_id", "slug"] {
        let (status, error) = emu
            .put(&format!("{SERVERS}/{id}"), json!({field: "other"}))
            .await;
        assert_ab01(status, &error, field);
    }

    // Live 403s.
    for (method, path) in [
        (Method::POST, format!("{SERVERS}/{id}/test")),
        (Method::DELETE, format!("{SERVERS}/{id}/connections")),
    ] {
        let response = emu.call(method, &path).send().await.expect("request");
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "{path}");
        assert_eq!(response.headers()["x-opa-decision"], "false");
    }
    let (status, connections) = emu.get(&format!("{SERVERS}/{id}/connections")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(connections["total"], 0);

    // User access: merged per user, with the default.
    let (_, access) = emu.get(&format!("{SERVERS}/{id}/user-access")).await;
    assert_eq!(access["default_user_access"], "allow");
    let put = json!({"user_access": [{"user_id": "u-1", "enabled": false}], "default_user_access": "deny"});
    let (status, answer) = emu.put(&format!("{SERVERS}/{id}/user-access"), put).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(answer["success"], true);
    let (_, access) = emu.get(&format!("{SERVERS}/{id}/user-access")).await;
    assert_eq!(access["default_user_access"], "deny");
    assert_eq!(access["data"][0]["user_id"], "u-1");
    assert_eq!(access["data"][0]["has_override"], true);

    // Capabilities: the integration's, with the server's own layer on top.
    emu.discover("linear", json!({"tools": [{"name": "create_issue"}]}))
        .await;
    emu.put(
        &format!("{MCP}/linear/capabilities"),
        json!({"capabilities": [{"name": "create_issue", "type": "tool", "enabled": false}]}),
    )
    .await;
    let (_, caps) = emu.get(&format!("{SERVERS}/{id}/capabilities")).await;
    assert_eq!(caps["data"][0]["integration_enabled"], false);
    assert_eq!(caps["data"][0]["enabled"], true);
    let (status, _) = emu
        .put(
            &format!("{SERVERS}/{id}/capabilities"),
            json!({"capabilities": [{"name": "delete_issue", "type": "tool", "enabled": false}]}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    let (status, answer) = emu.delete(&format!("{SERVERS}/{id}")).await;
    assert_eq!((status, answer), (StatusCode::OK, json!({})));
    let (status, _) = emu.get(&format!("{SERVERS}/{id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "a hard delete");
}

#[tokio::test]
async fn a_guardrail_mapping_sync_replaces_the_whole_set() {
    let emu = Emu::start().await;
    let (workspace_id, _) = emu.default_workspace().await;
    let (_, seeded) = emu
        .seed(json!({"guardrails": [{"name": "pii", "workspace_id": workspace_id}]}))
        .await;
    let guardrail = text(&seeded["guardrails"][0]["id"]);
    emu.post(MCP, linear()).await;
    emu.put(
        &format!("{MCP}/linear/workspaces"),
        json!({"workspaces": [{"id": workspace_id, "enabled": true}]}),
    )
    .await;
    let mut servers = Vec::new();
    for name in ["one", "two"] {
        let (_, receipt) = emu
            .post(
                SERVERS,
                json!({"name": name, "mcp_integration_id": "linear", "workspace_id": workspace_id}),
            )
            .await;
        servers.push(text(&receipt["id"]));
    }
    let mappings = format!("/ai_gw/v2/guardrails/{guardrail}/mcp-servers");
    let (_, empty) = emu.get(&mappings).await;
    assert_eq!(empty, json!({"object": "list", "total": 0, "data": []}));

    let both =
        json!({"mcp_servers": {servers[0].clone(): {}, servers[1].clone(): {"run_on": ["input"]}}});
    let (status, result) = emu.put(&mappings, both).await;
    assert_eq!(status, StatusCode::OK, "{result}");
    assert_eq!(
        (
            result["changed"].clone(),
            result["added"].clone(),
            result["removed"].clone()
        ),
        (json!(true), json!(2), json!(0))
    );
    let (_, listed) = emu.get(&mappings).await;
    assert_eq!(listed["total"], 2, "{listed}");
    assert_eq!(
        listed["data"][0]["run_on"],
        json!(["input", "output"]),
        "the default"
    );
    assert_eq!(listed["data"][0]["guardrail_id"], guardrail.as_str());

    // The set names only the second server, changed: one removed, one updated.
    let second = json!({"mcp_servers": {servers[1].clone(): {"run_on": ["output"]}}});
    let (_, result) = emu.put(&mappings, second.clone()).await;
    assert_eq!(
        (
            result["added"].clone(),
            result["updated"].clone(),
            result["removed"].clone()
        ),
        (json!(0), json!(1), json!(1))
    );
    let (_, result) = emu.put(&mappings, second).await;
    assert_eq!(
        result["changed"], false,
        "the same set again changes nothing"
    );
    let (_, detail) = emu.get(&format!("{SERVERS}/{}", servers[1])).await;
    assert_eq!(detail["guardrail_mappings"][0]["run_on"], json!(["output"]));
    let (_, detail) = emu.get(&format!("{SERVERS}/{}", servers[0])).await;
    assert_eq!(detail["guardrail_mappings"], json!([]));

    let (status, error) = emu
        .put(
            &mappings,
            json!({"mcp_servers": {"6f0e4a2c-5a4e-4c1b-9a53-3c2f1f0d9b11": {}}}),
        )
        .await;
    assert_ab01(status, &error, "not an MCP server");
    let (status, error) = emu
        .put(
            &mappings,
            json!({"mcp_servers": {servers[0].clone(): {"run_on": []}}}),
        )
        .await;
    assert_ab01(status, &error, "run_on");

    let (status, written) = emu
        .put(
            &format!(
                "/ai_gw/admin/v2/guardrails/{guardrail}/mcp-servers/{}",
                servers[0]
            ),
            json!({"run_on": ["input"]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{written}");
    assert!(written["map_id"].as_str().is_some_and(|m| m.len() == 36));
    let (_, listed) = emu
        .get(&format!(
            "/ai_gw/admin/v2/guardrails/{guardrail}/mcp-servers"
        ))
        .await;
    assert_eq!(listed["total"], 2, "{listed}");

    let (status, _) = emu
        .get("/ai_gw/v2/guardrails/no-such-guardrail/mcp-servers")
        .await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "as the guardrail routes answer"
    );
    emu.delete(&format!("{SERVERS}/{}", servers[0])).await;
    let (_, listed) = emu.get(&mappings).await;
    assert_eq!(
        listed["total"], 1,
        "a deleted server takes its mapping along"
    );
}

#[tokio::test]
async fn seeded_references_integrations_and_servers_read_like_made_ones() {
    let emu = Emu::start().await;
    let (workspace_id, _) = emu.default_workspace().await;
    emu.faults(json!({"list_lag_ms": 60_000})).await;
    let (status, seeded) = emu
        .seed(json!({
            "secret_references": [{"name": "console ref", "slug": "console-ref",
                "manager_type": "azure_kv",
                "auth_config": {"azure_auth_mode": "entra", "azure_entra_tenant_id": "t",
                                "azure_entra_client_id": "c", "azure_vault_url": "https://kv",
                                "azure_entra_client_secret": CLIENT_SECRET}}],
            "mcp_integrations": [{"name": "Console MCP", "slug": "console-mcp",
                "configurations": {"client_secret": CLIENT_SECRET},
                "workspaces": [{"id": workspace_id, "enabled": true}], "tools": ["search"]}],
        }))
        .await;
    assert_eq!(status, StatusCode::OK, "{seeded}");
    let integration = text(&seeded["mcp_integrations"][0]["id"]);
    let (status, servers) = emu
        .seed(
            json!({"mcp_servers": [{"name": "console server", "slug": "console-server",
                "mcp_integration_id": integration, "workspace_id": workspace_id}]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{servers}");

    // Seeded objects existed before the test: lists show them despite the lag.
    let (_, refs) = emu.get("/ai_gw/admin/v2/secret-references").await;
    assert_eq!(refs["total"], 1, "{refs}");
    let (_, read) = emu
        .get("/ai_gw/admin/v2/secret-references/console-ref")
        .await;
    assert!(!read.to_string().contains(CLIENT_SECRET), "{read}");
    assert!(read["auth_config"]["masked_azure_entra_client_secret"].is_string());
    let (_, list) = emu.get(MCP).await;
    assert_eq!(list["total"], 1);
    assert!(!list.to_string().contains(CLIENT_SECRET));
    assert_eq!(list["data"][0]["metadata"]["sync_status"], "synced");
    let (_, caps) = emu.get(&format!("{MCP}/console-mcp/capabilities")).await;
    assert_eq!(caps["data"][0]["name"], "search");
    let (_, list) = emu
        .get(&format!("{SERVERS}?workspace_id={workspace_id}"))
        .await;
    assert_eq!(list["data"][0]["slug"], "console-server", "{list}");
    assert_eq!(list["data"][0]["mcp_integration_slug"], "console-mcp");

    let (status, error) = emu
        .seed(json!({"secret_references": [{"slug": "console-ref"}]}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
}
