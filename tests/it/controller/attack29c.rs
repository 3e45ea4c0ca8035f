//! A fresh attack on issue 29's kinds (helper attack29c): a grant entry that is an McpIntegration
//! resource name must stand for what that resource recorded, never for another integration whose
//! slug happens to equal that name.

use crate::support;

use std::time::Duration;

use aigw::resources::{McpIntegration, McpServer};
use kube::api::Api;
use serde_json::json;
use support::endpoints::MCP_SERVER_POST;
use support::harness::Harness;
use support::objects::{Conditions, mcp_server};

const WAIT: Duration = Duration::from_secs(30);
const WS_A: &str = "5d1c3b2a-4e6f-4a7b-8c9d-0e1f2a3b4c5d";

async fn ready_integration(h: &Harness, name: &str, slug: &str) {
    let integrations = Api::<McpIntegration>::all(h.env.client.clone());
    h.create_cluster::<McpIntegration>(
        name,
        json!({"slug": slug, "name": "Tools", "url": "https://mcp.example.com/mcp",
                       "authType": "none", "transport": "http",
                       "workspaces": [{"workspace": WS_A}]}),
    )
    .await;
    let full = h.cluster_name(name);
    let ready = support::wait_until(WAIT, || async {
        let i = integrations.get_opt(&full).await.ok()??;
        i.ready().then_some(())
    })
    .await;
    assert!(ready.is_some(), "McpIntegration {full} never Ready");
}

/// A harness whose emulator holds the workspace `WS_A`.
async fn with_workspace(prefix: &str) -> Harness {
    let h = Harness::start_with(prefix, Duration::from_secs(1)).await;
    h.seed_workspace(WS_A, "payments", "payments").await;
    h
}

/// Creates the McpServer `tools` in `WS_A` on the McpIntegration resource `integration`, its
/// slug `slug_prefix` and the namespace's suffix.
async fn create_tools(h: &Harness, slug_prefix: &str, integration: &str) {
    let slug = h.env.suffixed(slug_prefix);
    let spec = mcp_server(Some(&slug), "Tools", WS_A, integration);
    support::objects::create::<McpServer>(&h.env, "tools", spec).await;
}

/// Integration `a` (slug `a-slug`) is granted by resource name; integration `b` has the slug equal
/// to `a`'s resource name. A server of `b` must be refused with no POST.
#[tokio::test]
async fn a_grant_by_resource_name_does_not_cover_an_integration_whose_slug_equals_it() {
    let mut h = with_workspace("atk29c-slug").await;
    let a = h.cluster_name("a");
    let b = h.cluster_name("b");
    ready_integration(&h, "a", &h.cluster_name("a-slug")).await;
    ready_integration(&h, "b", &a).await;
    h.set_grants(json!([{"namespaces": ["{ns}"], "workspaces": [WS_A], "mcpIntegrations": [a]}]));
    h.restart_operator().await;
    h.reset_stats().await;
    let servers = h.env.api::<McpServer>();
    create_tools(&h, "atk", &b).await;
    let refused = support::wait_until(WAIT, || async {
        let s = servers.get_opt("tools").await.ok()??;
        s.stalled_with("McpIntegrationNotAllowed").then_some(s)
    })
    .await;
    let posts = h.count(MCP_SERVER_POST).await;
    assert!(
        refused.is_some(),
        "a server of {b} (slug {a}) was not refused though only resource {a} is granted: {}",
        serde_json::to_string(&servers.get_opt("tools").await.ok().flatten()).unwrap()
    );
    assert_eq!(posts, 0, "{}", h.stats().await);
    h.stop().await;
}

/// The grant revoked while the server exists: an edit of the server is refused with no PUT
/// (the existing test checks only the delete).
#[tokio::test]
async fn a_revoked_mcp_integration_grant_refuses_an_edit_without_a_put() {
    let mut h = with_workspace("atk29c-rev").await;
    let a = h.cluster_name("a");
    ready_integration(&h, "a", &a).await;
    h.set_grants(json!([{"namespaces": ["{ns}"], "workspaces": [WS_A], "mcpIntegrations": [a]}]));
    h.restart_operator().await;
    let servers = h.env.api::<McpServer>();
    create_tools(&h, "rev", &a).await;
    let made = support::wait_until(WAIT, || async {
        let s = servers.get_opt("tools").await.ok()??;
        s.ready().then_some(())
    })
    .await;
    assert!(made.is_some(), "granted server never Ready");
    h.set_grants(
        json!([{"namespaces": ["{ns}"], "workspaces": [WS_A], "mcpIntegrations": ["other"]}]),
    );
    h.restart_operator().await;
    h.reset_stats().await;
    servers
        .patch(
            "tools",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"name": "Renamed"}})),
        )
        .await
        .unwrap();
    let refused = support::wait_until(WAIT, || async {
        let s = servers.get_opt("tools").await.ok()??;
        s.stalled_with("McpIntegrationNotAllowed").then_some(())
    })
    .await;
    assert!(refused.is_some(), "edit after revocation not refused");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(h.remote_writes().await, 0, "{}", h.stats().await);
    h.stop().await;
}
