//! The fresh attack on issue 29's kinds (Workspace, McpIntegration, McpServer): each test names
//! the guarantee it attacked. The holders of a Workspace and of an McpIntegration it broke are
//! fixed (the causes the tests' comments name, at the lines they had then, are gone): an
//! ungranted namespace or another installation holds no Workspace, an McpIntegration's access
//! rows hold the Workspace they name, a Workspace is requeued when an McpServer or an
//! McpIntegration naming it changes, and an McpServer that never made a server holds nothing.

use crate::support;

use std::time::Duration;

use aigw::resources::{Config, McpIntegration, McpServer, Workspace};
use kube::api::{Api, DeleteParams};
use serde_json::json;
use support::endpoints::{SCOPE_POST, WORKSPACE_DELETE, WORKSPACE_LIST, WORKSPACE_POST};
use support::harness::Harness;
use support::objects::{Conditions, mcp_server};

const WAIT: Duration = Duration::from_secs(30);
const WS_A: &str = "5d1c3b2a-4e6f-4a7b-8c9d-0e1f2a3b4c5d";

fn workspaces(h: &Harness) -> Api<Workspace> {
    Api::all(h.env.client.clone())
}

/// Waits for Workspace `name` to be gone (archived) or to stall with `StillReferenced`;
/// returns the stall message, `None` when it went.
async fn archived_or_held(h: &Harness, name: &str) -> Option<String> {
    let api = workspaces(h);
    let full = h.cluster_name(name);
    support::wait_until(WAIT, || async {
        match api.get_opt(&full).await.ok()? {
            None => Some(None),
            Some(w) if w.stalled_with("StillReferenced") => {
                Some(w.condition("Stalled").map(|(_, _, m)| m))
            }
            Some(_) => None,
        }
    })
    .await
    .expect("the Workspace neither went nor stalled")
}

/// Creates the McpIntegration `tools` (no auth, HTTP) enabling `workspaces` and waits until it
/// is Ready.
async fn ready_tools(h: &Harness, workspaces: serde_json::Value) {
    let spec = json!({"slug": h.cluster_name("tools"), "name": "Tools",
                      "url": "https://mcp.example.com/mcp", "authType": "none",
                      "transport": "http", "workspaces": workspaces});
    h.create_cluster::<McpIntegration>("tools", spec).await;
    h.wait_cluster::<McpIntegration>("tools", WAIT, |i| i.ready())
        .await;
}

/// Tenancy: a namespace whose grants do NOT allow Workspace `other` names it by `workspaceRef`.
/// The Config is refused (`WorkspaceNotAllowed`, no write), yet it holds the cluster's
/// Workspace from its archive (`StillReferenced`, naming the namespace's object) for as long as
/// the namespace likes: an ungranted namespace blocks another team's workspace. McpIntegration
/// deletion skips such holders (`refused_by_grants` in mcp_server/references.rs); the Workspace
/// does not (Stores::naming_workspace, src/controller/state/claims.rs:344).
#[tokio::test]
async fn attack_an_ungranted_namespace_naming_a_workspace_by_resource_blocks_its_archive() {
    let grants = json!([{"namespaces": ["{ns}"], "workspaces": ["{ns}-team"]}]);
    let h = Harness::start_with_grants("atk-wsgrant", Duration::from_secs(1), grants).await;
    h.ready_workspace("other").await;
    let configs: Api<Config> = h.env.api();
    let mut spec = support::objects::routing("squatter");
    spec["workspaceRef"] = json!({"name": h.cluster_name("other")});
    spec["deletionPolicy"] = json!("Orphan");
    support::objects::create::<Config>(&h.env, "squatter", spec).await;
    h.wait_for::<Config>("squatter", WAIT, |c| c.stalled_with("WorkspaceNotAllowed"))
        .await;
    h.delete_cluster::<Workspace>("other").await;
    let held = archived_or_held(&h, "other").await;
    let archives = h.count(WORKSPACE_DELETE).await;
    configs
        .delete("squatter", &DeleteParams::default())
        .await
        .unwrap();
    h.stop().await;
    assert_eq!(
        held, None,
        "a Config refused by its grants holds Workspace other from its archive"
    );
    assert_eq!(archives, 1);
}

/// Deletion order: a Workspace that an McpIntegration enables by resource
/// (`spec.workspaces[].workspaceRef`) is archived at once, with no `StillReferenced`: the
/// McpIntegration is no holder (its Claims::workspaces is empty,
/// src/controller/kinds/mcp_integration.rs:124, and Workspace::watch_referrers lists neither it
/// nor McpServer, src/controller/kinds/workspace.rs:529). The integration then stays stuck on
/// a Workspace that no longer exists (every other row and toggle waits with it).
#[tokio::test]
async fn attack_a_workspace_an_mcp_integration_enables_by_resource_is_archived_under_it() {
    let h = Harness::start_with("atk-wsmcpi", Duration::from_secs(1)).await;
    h.ready_workspace("payments").await;
    let integrations = Api::<McpIntegration>::all(h.env.client.clone());
    let slug = h.cluster_name("tools");
    ready_tools(
        &h,
        json!([{"workspaceRef": {"name": h.cluster_name("payments")}}]),
    )
    .await;
    h.delete_cluster::<Workspace>("payments").await;
    let held = archived_or_held(&h, "payments").await;
    let after = integrations
        .get_opt(&slug)
        .await
        .unwrap()
        .and_then(|i| i.condition("Ready"));
    let _ = integrations.delete(&slug, &DeleteParams::default()).await;
    h.stop().await;
    let message = held.unwrap_or_else(|| {
        panic!("Workspace payments was archived while McpIntegration tools enables it; the integration now: {after:?}")
    });
    assert!(message.contains("McpIntegration"), "{message}");
}

/// Tenancy / deletion order: an McpServer that never made a remote server (its workspace is not
/// enabled by the integration: IntegrationNotReady, no POST) still holds the cluster-scoped
/// McpIntegration's deletion (`StillReferenced`): any namespace allowed to create McpServers
/// keeps the organisation's integration alive by naming it (references.rs:27-31 filters only
/// grant refusals).
#[tokio::test]
async fn attack_an_mcp_server_that_never_made_anything_holds_the_integration() {
    let h = Harness::start_with("atk-mcpihold", Duration::from_secs(1)).await;
    h.seed_workspace(WS_A, "payments", "payments").await;
    let integrations = Api::<McpIntegration>::all(h.env.client.clone());
    let slug = h.cluster_name("tools");
    ready_tools(&h, json!([])).await;
    let servers = h.env.api::<McpServer>();
    let spec = mcp_server(None, "Squatter", WS_A, &slug);
    support::objects::create::<McpServer>(&h.env, "squatter", spec).await;
    h.wait_for::<McpServer>("squatter", WAIT, |s| {
        s.condition("Ready")
            .is_some_and(|(st, reason, _)| st == "False" && reason == "IntegrationNotReady")
    })
    .await;
    let gone = support::deleted_within(&integrations, &slug, WAIT).await;
    let left = integrations
        .get_opt(&slug)
        .await
        .ok()
        .flatten()
        .and_then(|i| i.condition("Stalled"));
    let _ = servers.delete("squatter", &DeleteParams::default()).await;
    h.stop().await;
    assert!(
        gone,
        "an McpServer that made nothing holds the McpIntegration: {left:?}"
    );
}

/// The IAM scopes aigw made (their description carries an owner token).
async fn owned_scopes(h: &Harness) -> Vec<serde_json::Value> {
    h.state().await["scopes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|s| {
            s["description"]
                .as_str()
                .is_some_and(|d| d.starts_with("managed by aigw; owner token"))
        })
        .collect()
}

/// Creates the Workspace `name` (display name `display`) and waits until its workspace POST
/// was sent.
async fn create_until_posted(h: &Harness, name: &str, display: &str) {
    h.create_cluster::<Workspace>(name, json!({"name": display}))
        .await;
    let posted = support::wait_until(WAIT, || async {
        (h.count(WORKSPACE_POST).await >= 1).then_some(())
    })
    .await;
    assert!(posted.is_some(), "{}", h.stats().await);
}

/// Three-call create: the first call (the IAM scope) is made, the second (the workspace) is
/// refused by the API for good; the Workspace resource is then deleted. The scope aigw made for
/// it goes with it (`Verbs::remove_unused`; before, only a scope recorded in status was deleted
/// and this one stayed in the tenant forever).
#[tokio::test]
async fn attack_a_workspace_whose_create_is_refused_leaves_no_iam_scope_behind() {
    let h = Harness::start_with("atk-wsscope", Duration::from_secs(1)).await;
    let before = owned_scopes(&h).await.len();
    h.faults(json!({"failing_routes": {WORKSPACE_POST: 400}}))
        .await;
    let api = workspaces(&h);
    create_until_posted(&h, "refused", "Refused").await;
    assert_eq!(h.count(SCOPE_POST).await, 1);
    let full = h.cluster_name("refused");
    let gone = support::deleted_within(&api, &full, WAIT).await;
    let left = owned_scopes(&h).await;
    h.stop().await;
    assert!(gone, "the Workspace was not deleted");
    assert_eq!(
        left.len(),
        before,
        "the IAM scope aigw made for a Workspace that never existed outlives it: {left:?}"
    );
}

/// Exactly once across a delete: the workspace POST is committed but its answer lost, and the
/// lookup that would recover it cannot run yet (the list answers 503); the resource is deleted
/// meanwhile. Once the API answers again, the workspace the POST made must be archived (or the
/// delete must wait for it), never left active with nobody managing it, and the scope made for
/// it goes too (it was kept when the status had not recorded its name yet).
#[tokio::test]
async fn attack_a_workspace_deleted_while_its_create_is_uncertain_is_not_left_behind() {
    let h = Harness::start_with("atk-wsuncertain", Duration::from_secs(1)).await;
    let scopes_before = owned_scopes(&h).await.len();
    h.faults(json!({"drop_after_commit_once": [WORKSPACE_POST], "failing_routes": {WORKSPACE_LIST: 503}}))
        .await;
    let api = workspaces(&h);
    create_until_posted(&h, "uncertain", "Uncertain").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    h.delete_cluster::<Workspace>("uncertain").await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    h.faults(json!({})).await;
    let full = h.cluster_name("uncertain");
    let gone = support::gone_within(&api, &full, WAIT).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let state = h.state().await;
    let active: Vec<serde_json::Value> = state["workspaces"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|w| w["name"] == "Uncertain" && w["status"] == "active")
        .collect();
    let posts = h.count(WORKSPACE_POST).await;
    let scopes = owned_scopes(&h).await;
    h.stop().await;
    assert!(gone, "the Workspace was not deleted");
    assert_eq!(posts, 1, "one POST");
    assert_eq!(
        scopes.len(),
        scopes_before,
        "the scope of the workspace found again and archived is left behind: {scopes:?}"
    );
    assert!(
        active.is_empty(),
        "the workspace an uncertain create made is left active with no resource: {active:?}"
    );
}

/// Exactly once when the resource's own IAM scope goes mid-create: the workspace POST is
/// committed but its answer lost, the lookup cannot run yet (the list answers 503), and an
/// admin deletes the scope meanwhile. The workspace the POST made still names that scope, so the
/// listing finds it: no second scope or workspace is made (before, a missing scope answered "none
/// made" without listing, and the create ran again). The missing scope is reported, not made
/// again.
#[tokio::test]
async fn attack_a_workspace_whose_scope_goes_mid_create_is_recovered_not_made_twice() {
    let h = Harness::start_with("atk-wsscopegone", Duration::from_secs(1)).await;
    h.faults(json!({"drop_after_commit_once": [WORKSPACE_POST], "failing_routes": {WORKSPACE_LIST: 503}}))
        .await;
    create_until_posted(&h, "scopeless", "Scopeless").await;
    let named = |state: serde_json::Value| -> Vec<serde_json::Value> {
        let all = state["workspaces"].as_array().cloned().unwrap_or_default();
        all.into_iter()
            .filter(|w| w["name"] == "Scopeless")
            .collect()
    };
    let made = named(h.state().await);
    assert_eq!(made.len(), 1, "{made:?}");
    let scope = made[0]["scope_name"].as_str().expect("a scope name");
    h.delete(&format!("/iam/v1/scopes/{scope}")).await;
    h.faults(json!({})).await;
    let message = h
        .cluster_condition_message::<Workspace>("scopeless", WAIT, ("Stalled", "MissingState"))
        .await;
    assert!(message.contains(scope), "{message}");
    let state = h.state().await;
    let (posts, scope_posts) = (h.count(WORKSPACE_POST).await, h.count(SCOPE_POST).await);
    h.stop().await;
    assert_eq!((posts, scope_posts), (1, 1), "made again");
    assert_eq!(named(state).len(), 1, "a second workspace");
}

/// Deletion order, liveness: a Workspace whose archive waits for an McpServer
/// (`StillReferenced`) is not requeued when that McpServer goes (Workspace::watch_referrers,
/// src/controller/kinds/workspace.rs:529-537, requeues on Config, policies, Guardrail, ApiKey,
/// Provider and Deployment only): after a while of waiting it goes only when its backoff (up
/// to 300 s) expires. A Config holder in the same place lets it go at once.
#[tokio::test]
async fn attack_a_workspace_held_by_an_mcp_server_goes_as_soon_as_the_server_does() {
    let h = Harness::start_with("atk-wsmcps", Duration::from_secs(1)).await;
    let id = h.ready_workspace("pay").await;
    let integrations = Api::<McpIntegration>::all(h.env.client.clone());
    let slug = h.cluster_name("tools");
    h.create_cluster::<McpIntegration>(
        "tools",
        json!({"slug": slug, "name": "Tools", "url": "https://mcp.example.com/mcp",
                       "authType": "none", "transport": "http",
                       "workspaces": [{"workspace": id}], "deletionPolicy": "Orphan"}),
    )
    .await;
    let servers = h.env.api::<McpServer>();
    let spec = mcp_server(None, "Pay tools", &id, &slug);
    support::objects::create::<McpServer>(&h.env, "pay-tools", spec).await;
    h.wait_for::<McpServer>("pay-tools", WAIT, |s| s.ready())
        .await;
    h.delete_cluster::<Workspace>("pay").await;
    let held = archived_or_held(&h, "pay").await;
    assert!(
        held.as_deref().is_some_and(|m| m.contains("McpServer")),
        "{held:?}"
    );
    // Held a while: the Workspace's retries back off.
    tokio::time::sleep(Duration::from_secs(45)).await;
    let server_gone = support::deleted_within(&servers, "pay-tools", WAIT).await;
    assert!(server_gone, "the McpServer was not deleted");
    // The integration's access row names the workspace too, and holds it in turn; once the
    // integration goes (Orphan), nothing names the workspace.
    let still = archived_or_held(&h, "pay").await;
    assert!(
        still
            .as_deref()
            .is_some_and(|m| m.contains("McpIntegration")),
        "{still:?}"
    );
    let integration_gone = support::deleted_within(&integrations, &slug, WAIT).await;
    assert!(integration_gone, "the McpIntegration was not deleted");
    let full = h.cluster_name("pay");
    let api = workspaces(&h);
    let started = std::time::Instant::now();
    let gone = support::gone_within(&api, &full, Duration::from_secs(10)).await;
    h.stop().await;
    assert!(
        gone,
        "the Workspace was still waiting {:?} after the last object naming it went",
        started.elapsed()
    );
}

/// Ownership: Workspace `b` adopts by slug the workspace Workspace `a` created; it must stand
/// aside (`AlreadyManaged`) and deleting it (deletionPolicy Delete) must not archive `a`'s
/// workspace.
#[tokio::test]
async fn attack_adopting_a_managed_workspace_by_slug_then_deleting_it_leaves_it_alone() {
    let h = Harness::start_with("atk-wsadopt", Duration::from_secs(1)).await;
    h.ready_workspace("a").await;
    let api = workspaces(&h);
    let a = api.get(&h.cluster_name("a")).await.unwrap();
    let slug = a.status.and_then(|s| s.slug).unwrap();
    h.create_cluster::<Workspace>(
        "b",
        json!({"name": "B", "slug": slug, "deletionPolicy": "Delete"}),
    )
    .await;
    let full = h.cluster_name("b");
    let stalled = support::wait_until(WAIT, || async {
        let w = api.get_opt(&full).await.ok()??;
        w.stalled_with("AlreadyManaged").then_some(())
    })
    .await;
    let gone = support::deleted_within(&api, &full, WAIT).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let archives = h.count(WORKSPACE_DELETE).await;
    let a_ready = api
        .get(&h.cluster_name("a"))
        .await
        .map(|w| w.ready())
        .unwrap_or(false);
    h.stop().await;
    assert!(stalled.is_some(), "b did not stand aside");
    assert!(gone, "b was not deleted");
    assert_eq!(archives, 0, "b's delete archived a's workspace");
    assert!(a_ready);
}
