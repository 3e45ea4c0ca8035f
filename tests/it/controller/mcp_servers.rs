//! McpServer (namespaced) on a real kube-apiserver against the emulator over HTTP, the quirks
//! the conformance matrix does not cover: the server waits (IntegrationNotReady, no POST) until
//! its McpIntegration enables its workspace and is created once it does; user access is one PUT
//! of what differs, nothing at steady state, a console change corrected with one PUT; a rename
//! is one PUT whose `{id, slug, object}` answer leaves the recorded id alone; an McpIntegration
//! named by the server waits (`StillReferenced`, naming it) and goes once the server is
//! deleted, which is hard. A Guardrail's `spec.mcpServers` names an McpServer by resource: the
//! mapping waits (`McpServerNotReady`) until the server is Ready, then maps its UUID.

use crate::support;

use std::time::Duration;

use aigw::resources::{Guardrail, McpIntegration, McpServer};
use kube::api::Api;
use serde_json::{Value, json};
use support::endpoints::{
    GUARDRAIL_MCP_SERVERS_PUT, MCP_INTEGRATION_DELETE, MCP_SERVER_DELETE, MCP_SERVER_POST,
    MCP_SERVER_PUT, MCP_SERVER_USER_ACCESS_PUT,
};
use support::harness::Harness;
use support::objects::{Conditions, mcp_server};

const WAIT: Duration = Duration::from_secs(30);
const WS_A: &str = "5d1c3b2a-4e6f-4a7b-8c9d-0e1f2a3b4c5d";

/// The emulator's record of the server `slug` (with its workspace and default user access).
async fn remote(h: &Harness, slug: &str) -> Value {
    h.remote_record("mcp_servers", "slug", slug).await
}

/// Seeds workspace [`WS_A`] and makes a Ready McpIntegration (`tools`) enabling it, if `enabled`.
async fn integration(h: &Harness, enabled: bool) -> String {
    h.seed_workspace(WS_A, "payments", "payments").await;
    let integration = h.cluster_name("tools");
    let workspaces = match enabled {
        true => json!([{"workspace": WS_A}]),
        false => json!([]),
    };
    h.create_cluster::<McpIntegration>(
        "tools",
        json!({"slug": integration, "name": "Tools", "url": "https://mcp.example.com/mcp",
                       "authType": "none", "transport": "http", "workspaces": workspaces}),
    )
    .await;
    h.wait_cluster::<McpIntegration>("tools", WAIT, |i| i.ready())
        .await;
    integration
}

#[tokio::test]
async fn a_guardrail_names_an_mcp_server_by_resource() {
    let h = Harness::start_with("mcps-guard", Duration::from_secs(2)).await;
    let integration = integration(&h, true).await;
    let spec = json!({"name": "tools", "workspaceId": WS_A, "target": "mcp_tools",
        "checks": [{"id": "default.regexMatch", "parameters": {"rule": "\\d{16}"}}],
        "mcpServers": [{"mcpServerRef": {"name": "pay-tools"}, "runOn": ["input"]}]});
    support::objects::create::<Guardrail>(&h.env, "tools", spec).await;
    // No McpServer yet: the mapping waits, naming it, and nothing is synced.
    let message = h
        .condition_message::<Guardrail>("tools", WAIT, ("Ready", "McpServerNotReady"))
        .await;
    let named = format!("McpServer {}/pay-tools", h.env.namespace);
    assert!(message.contains(&named), "{message}");
    assert_eq!(
        h.count(GUARDRAIL_MCP_SERVERS_PUT).await,
        0,
        "nothing mapped yet"
    );

    let slug = h.env.suffixed("gd");
    let spec = mcp_server(Some(&slug), "Payments tools", WS_A, &integration);
    support::objects::create::<McpServer>(&h.env, "pay-tools", spec).await;
    let server = h
        .wait_for::<McpServer>("pay-tools", WAIT, |s| s.ready())
        .await;
    let server_id = server.status.and_then(|s| s.id).unwrap();
    let ready = h.wait_for::<Guardrail>("tools", WAIT, |g| g.ready()).await;
    let guardrail_id = ready.status.clone().and_then(|s| s.id).unwrap();
    let mapped = h
        .get(&format!("/ai_gw/v2/guardrails/{guardrail_id}/mcp-servers"))
        .await;
    assert_eq!(mapped["data"][0]["mcp_server_id"], server_id.as_str());
    assert_eq!(mapped["data"][0]["run_on"], json!(["input"]));
    assert_eq!(
        h.count(GUARDRAIL_MCP_SERVERS_PUT).await,
        1,
        "one bulk write"
    );
    h.assert_no_write_over(Duration::from_secs(5)).await;

    // `aigw plan` with the cluster in view resolves `mcpServerRef` to the id the McpServer
    // recorded, as the operator does: the applied guardrail is unchanged, not a change.
    let mut object = serde_json::to_value(&ready).unwrap();
    object["metadata"] = json!({"name": "tools", "namespace": h.env.namespace});
    object.as_object_mut().unwrap().remove("status");
    let (code, said) = h.plan("guardrail.json", &object.to_string()).await;
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("1 unchanged"), "{said}");
    h.stop().await;
}

#[tokio::test]
async fn a_server_waits_for_workspace_access_syncs_user_access_and_holds_its_integration() {
    let h = Harness::start_with("mcps-quirks", Duration::from_secs(2)).await;
    let integration = integration(&h, false).await;
    let integrations = Api::<McpIntegration>::all(h.env.client.clone());

    // The integration enables no workspace: the server waits, naming what, and posts nothing.
    let servers = h.env.api::<McpServer>();
    let slug = h.env.suffixed("pay");
    let spec = json!({"slug": slug, "name": "Payments tools", "workspaceId": WS_A,
        "integrationRef": {"name": integration}, "defaultUserAccess": "deny",
        "userAccess": [{"userId": "user-1", "enabled": true}]});
    support::objects::create::<McpServer>(&h.env, "pay-tools", spec).await;
    let message = h
        .condition_message::<McpServer>("pay-tools", WAIT, ("Ready", "IntegrationNotReady"))
        .await;
    assert!(
        message.contains(&integration) && message.contains("does not enable workspace"),
        "{message}"
    );
    assert_eq!(
        h.count(MCP_SERVER_POST).await,
        0,
        "no create before workspace access"
    );

    // Enabled: created with one POST, its user access with one PUT.
    support::merge_patch(
        &integrations,
        &integration,
        json!({"spec": {"workspaces": [{"workspace": WS_A}]}}),
    )
    .await;
    let ready = h
        .wait_for::<McpServer>("pay-tools", WAIT, |s| s.ready())
        .await;
    let id = ready.status.as_ref().and_then(|s| s.id.clone()).unwrap();
    let stored = remote(&h, &slug).await;
    assert_eq!(stored["workspace_id"], WS_A);
    assert_eq!(stored["default_user_access"], "deny");
    assert_eq!(h.count(MCP_SERVER_POST).await, 1, "one POST");
    assert_eq!(
        h.count(MCP_SERVER_USER_ACCESS_PUT).await,
        1,
        "one user-access PUT"
    );
    let rows = h
        .get(&format!("/ai_gw/v2/mcp-servers/{id}/user-access"))
        .await;
    assert_eq!(rows["data"][0]["user_id"], "user-1");
    assert_eq!(rows["data"][0]["enabled"], true);

    // Steady state: nothing written over a few drift intervals.
    h.assert_no_write_over(Duration::from_secs(5)).await;

    // A console change of the default is corrected with one PUT.
    h.console_edit_corrected_once(
        &format!("/ai_gw/v2/mcp-servers/{id}/user-access"),
        json!({"user_access": [], "default_user_access": "allow"}),
        WAIT,
        MCP_SERVER_USER_ACCESS_PUT,
        || async { remote(&h, &slug).await["default_user_access"] == "deny" },
    )
    .await;

    // A rename: one PUT, whose short answer leaves the recorded id as it was.
    h.reset_stats().await;
    h.env
        .patch_spec::<McpServer>("pay-tools", json!({"name": "Payments MCP tools"}))
        .await;
    let renamed = h
        .wait_for::<McpServer>("pay-tools", WAIT, |s| s.ready())
        .await;
    assert_eq!(remote(&h, &slug).await["name"], "Payments MCP tools");
    assert_eq!(renamed.status.and_then(|s| s.id), Some(id.clone()));
    assert_eq!(h.count(MCP_SERVER_PUT).await, 1, "one PUT renames it");

    // The integration's deletion waits for the resource naming it, and forces nothing.
    h.reset_stats().await;
    let named = format!("McpServer {}/pay-tools", h.env.namespace);
    h.delete_waits_for::<McpIntegration>("tools", &named).await;
    assert_eq!(h.count(MCP_INTEGRATION_DELETE).await, 0, "nothing forced");

    // The server goes (a hard delete), then the integration.
    servers
        .delete("pay-tools", &Default::default())
        .await
        .unwrap();
    assert!(
        support::gone_within(&integrations, &integration, Duration::from_secs(60)).await,
        "the McpIntegration went once no McpServer named it"
    );
    assert_eq!(
        h.count(MCP_SERVER_DELETE).await,
        1,
        "one DELETE of the server"
    );
    assert!(remote(&h, &slug).await.is_null(), "the server is gone");
    let gone = reqwest::Client::new()
        .get(h.url(&format!("/ai_gw/v2/mcp-servers/{id}")))
        .bearer_auth(support::harness::TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), 404, "a hard delete");
    h.stop().await;
}

/// `aigw export --workspace-id` writes a console-made server as an McpServer adopting it by slug
/// (its integration by id, its default user access), which applied writes nothing.
#[tokio::test]
async fn an_exported_mcp_server_is_adopted_without_a_write() {
    let h = Harness::start_with("mcps-export", Duration::from_secs(1)).await;
    let integration = integration(&h, true).await;
    let slug = h.env.suffixed("console");
    let made = h
        .post(
            "/ai_gw/v2/mcp-servers",
            json!({"name": "Console made", "slug": slug, "workspace_id": WS_A,
                        "mcp_integration_id": integration, "description": "made in the console"}),
        )
        .await;
    let id = made["id"].as_str().unwrap().to_string();
    h.put(
        &format!("/ai_gw/v2/mcp-servers/{id}/user-access"),
        json!({"user_access": [], "default_user_access": "deny"}),
    )
    .await;

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("export");
    super::mcp_integrations::aigw(
        &h,
        &[
            "export",
            "--workspace-id",
            WS_A,
            "--out",
            out.to_str().unwrap(),
        ],
    )
    .await;
    let text = support::cli::exported_manifest(&out, "McpServer", &slug);
    let mut exported: Value = serde_yaml::from_str(&text).unwrap();
    let spec = exported["spec"].take();
    assert_eq!(spec["slug"], slug.as_str());
    assert_eq!(spec["workspaceId"], WS_A);
    assert_eq!(spec["defaultUserAccess"], "deny");
    assert_eq!(spec["deletionPolicy"], "Orphan");
    let before = h.remote_writes().await;
    support::objects::create::<McpServer>(&h.env, "exported", spec).await;
    let ready = h
        .wait_for::<McpServer>("exported", WAIT, |s| s.ready())
        .await;
    assert_eq!(ready.status.and_then(|s| s.id), Some(id));
    h.assert_no_write_since(before, "adopting the export").await;
    h.stop().await;
}

/// A server of the spec's slug in another workspace (which only its list row tells: the detail
/// has no workspace) is refused, never adopted, and nothing is written.
#[tokio::test]
async fn a_server_of_the_slug_in_another_workspace_is_not_adopted() {
    const WS_B: &str = "7a8b9c0d-1e2f-4a3b-9c4d-5e6f7a8b9c0d";
    let h = Harness::start_with("mcps-other", Duration::from_secs(1)).await;
    let integration = integration(&h, true).await;
    h.seed_workspace(WS_B, "other", "other").await;
    h.put(
        &format!("/ai_gw/admin/v2/mcp-integrations/{integration}/workspaces"),
        json!({"workspaces": [{"id": WS_B, "enabled": true}]}),
    )
    .await;
    let slug = h.env.suffixed("taken");
    h.post(
        "/ai_gw/v2/mcp-servers",
        json!({"name": "Other team's", "slug": slug, "workspace_id": WS_B,
                    "mcp_integration_id": integration}),
    )
    .await;
    h.reset_stats().await;
    let spec = mcp_server(Some(&slug), "Other team's", WS_A, &integration);
    support::objects::create::<McpServer>(&h.env, "mine", spec).await;
    let (refused, message) = h
        .env
        .wait_condition::<McpServer>("mine", WAIT, ("Stalled", "InvalidSpec"))
        .await;
    support::assert_mentions(&message, &["workspaceId", "not adopted"]);
    assert!(
        refused.status.and_then(|s| s.id).is_none(),
        "nothing recorded"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(h.remote_writes().await, 0, "{}", h.stats().await);
    assert_eq!(remote(&h, &slug).await["workspace_id"], WS_B);
    h.stop().await;
}

/// The Connection's grants limit which MCP integrations a namespace may instantiate
/// (`spec.grants[].mcpIntegrations`): one not granted is refused before any write, naming the
/// grant; granted, the server is made; the grant revoked, deleting the McpServer releases its
/// server without a call, as for a revoked workspace.
#[tokio::test]
async fn a_server_of_an_mcp_integration_not_granted_makes_no_call() {
    let not_granted = json!([{"namespaces": ["{ns}"], "workspaces": [WS_A], "mcpIntegrations": ["another-integration"]}]);
    let mut h =
        Harness::start_with_grants("mcps-grant", Duration::from_secs(1), not_granted.clone()).await;
    let integration = integration(&h, true).await;
    let slug = h.env.suffixed("gr");
    let spec = mcp_server(Some(&slug), "Tools", WS_A, &integration);
    support::objects::create::<McpServer>(&h.env, "tools", spec).await;
    let message = h
        .condition_message::<McpServer>("tools", WAIT, ("Stalled", "McpIntegrationNotAllowed"))
        .await;
    assert!(
        message.contains("spec.grants[].mcpIntegrations"),
        "{message}"
    );
    assert_eq!(h.count(MCP_SERVER_POST).await, 0, "{}", h.stats().await);

    // Granted by the McpIntegration resource's name: the server is made, once.
    h.set_grants(
        json!([{"namespaces": ["{ns}"], "workspaces": [WS_A], "mcpIntegrations": [integration]}]),
    );
    h.restart_operator().await;
    h.wait_for::<McpServer>("tools", WAIT, |s| s.ready()).await;
    assert_eq!(h.count(MCP_SERVER_POST).await, 1, "{}", h.stats().await);

    // Revoked: an update is refused and the delete leaves the server, without a call.
    h.set_grants(not_granted);
    h.restart_operator().await;
    h.reset_stats().await;
    h.env.delete_and_wait::<McpServer>("tools", WAIT).await;
    assert_eq!(h.count(MCP_SERVER_DELETE).await, 0, "{}", h.stats().await);
    assert!(
        !remote(&h, &slug).await.is_null(),
        "the server is left in place"
    );
    h.stop().await;
}

/// A lost create answer plus a server of the spec's slug and name that another party made in
/// its window: a slug is chosen by whoever creates, so it proves nothing. Without the adoption
/// grant the server is reported (`AdoptionNotAllowed`, naming the slug) and left alone: never
/// taken, written to or deleted. (It used to be taken as the create's own.)
#[tokio::test]
async fn a_foreign_server_of_the_slug_is_never_taken_after_a_lost_create() {
    let no_adoption = |integration: &str| json!([{"namespaces": ["{ns}"], "workspaces": [WS_A], "mcpIntegrations": [integration]}]);
    let mut h =
        Harness::start_with_grants("mcps-foreign", Duration::from_secs(1), no_adoption("none"))
            .await;
    let integration = integration(&h, true).await;
    h.set_grants(no_adoption(&integration));
    let slug = h.env.suffixed("shared");
    let foreign = json!({"name": "Tools", "slug": slug, "workspace_id": WS_A,
                         "mcp_integration_id": integration, "description": "the console's"});
    let route = "/ai_gw/v2/mcp-servers";
    let made = super::exactly_once::behind_namesake_proxy(&mut h, route, foreign).await;
    let spec = mcp_server(Some(&slug), "Tools", WS_A, &integration);
    support::objects::create::<McpServer>(&h.env, "tools", spec).await;
    let refused = h
        .wait_for::<McpServer>("tools", WAIT, |s| {
            super::exactly_once::reported(s, "AdoptionNotAllowed").is_some()
        })
        .await;
    let message = super::exactly_once::reported(&refused, "AdoptionNotAllowed").unwrap();
    assert!(message.contains(slug.as_str()), "{message}");
    assert!(
        made.lock().unwrap().is_some(),
        "the foreign server was made"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let status = h.env.get::<McpServer>("tools").await.status.unwrap();
    assert_eq!(status.id, None, "the foreign server was taken");
    assert_eq!(h.count(MCP_SERVER_PUT).await, 0, "{}", h.stats().await);
    assert_eq!(remote(&h, &slug).await["description"], "the console's");
    // Deleting the McpServer leaves the foreign server in place.
    h.env.delete_and_wait::<McpServer>("tools", WAIT).await;
    assert_eq!(h.count(MCP_SERVER_DELETE).await, 0, "{}", h.stats().await);
    h.stop().await;
}

/// A server naming its workspace and its integration by slug, on a Connection that cannot read
/// the integration (403): created with one POST, and Ready after, though the server reads back
/// with UUIDs (its list row carries both slugs); nothing is written at steady state.
#[tokio::test]
async fn a_server_named_by_slugs_stays_ready_when_its_integration_cannot_be_read() {
    let h = Harness::start_with("mcps-slugs", Duration::from_secs(2)).await;
    let integration = integration(&h, true).await;
    h.faults(json!({"failing_routes": {
        "GET /ai_gw/admin/v2/mcp-integrations/{mcpIntegrationId}": 403
    }}))
    .await;
    let slug = h.env.suffixed("slugs");
    let spec = json!({"slug": slug, "name": "By slugs", "workspaceId": "payments",
        "integrationId": integration});
    support::objects::create::<McpServer>(&h.env, "by-slugs", spec).await;
    h.wait_for::<McpServer>("by-slugs", WAIT, |s| s.ready())
        .await;
    let stored = remote(&h, &slug).await;
    assert_eq!(stored["workspace_id"], WS_A, "stored under the UUID");
    assert_eq!(h.count(MCP_SERVER_POST).await, 1, "one POST");
    h.assert_no_write_over(Duration::from_secs(5)).await;
    let still = h.env.api::<McpServer>().get("by-slugs").await.unwrap();
    assert!(still.ready(), "{:?}", still.status);
    h.stop().await;
}
