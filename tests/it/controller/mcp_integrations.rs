//! McpIntegration (cluster-scoped) on a real kube-apiserver against the emulator over HTTP:
//! `configurations` come from a labelled Secret of the operator's namespace and reach the API
//! write-only (a JSON value as JSON), one POST creates it, nothing is written at steady state, a
//! console edit is corrected with one PUT and a Secret change is exactly one PUT; workspace
//! access names a Workspace resource (waiting until it is Ready) or a workspace id, and a
//! workspace removed from the spec is disabled, never deleted; a toggle of a tool not
//! discovered yet is Pending and applied once the gateway discovers it; a delete waits as
//! `StillReferenced` while an MCP server uses the integration; an exported integration is
//! adopted with no write; no configuration value shows in status, events, the operator's log,
//! metrics or CLI output.

use crate::support;

use std::time::Duration;

use aigw::resources::McpIntegration;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use support::endpoints::{
    MCP_INTEGRATION_CAPABILITIES_PUT, MCP_INTEGRATION_DELETE, MCP_INTEGRATION_POST,
    MCP_INTEGRATION_WORKSPACES_PUT,
};
use support::harness::Harness;
use support::objects::Conditions;
use support::objects::{WS_A, WS_B};

const WAIT: Duration = Duration::from_secs(30);
const FIRST_HEADER: &str = "hdr-first-Qm7Vx2Lp9Rt4";
const SECOND_HEADER: &str = "hdr-second-Zk3Wn8Bd5Hy1";
const CLIENT_SECRET: &str = "cs-mcp-Jt6Fq1Xs8Ne2";

/// The `configurations` Secret in the operator's namespace (the test namespace), labelled for
/// cluster-scoped readers unless `labelled` is false.
async fn put_config(h: &Harness, header: &str, labelled: bool) {
    let data = json!({"custom_headers": format!("{{\"x-api-key\":\"{header}\"}}"),
                      "client_secret": CLIENT_SECRET});
    h.put_secret("github-mcp", data, labelled).await;
}

fn api(h: &Harness) -> Api<McpIntegration> {
    Api::all(h.env.client.clone())
}

async fn create(h: &Harness, name: &str, spec: Value) {
    h.create_cluster::<McpIntegration>(name, spec).await;
}

/// The emulator's record of the integration, `configurations` in clear.
async fn remote(h: &Harness, slug: &str) -> Value {
    h.remote_record("mcp_integrations", "slug", slug).await
}

/// The emulator's access row of `workspace`.
fn row<'a>(remote: &'a Value, workspace: &str) -> Option<&'a Value> {
    remote["workspaces"]
        .as_array()?
        .iter()
        .find(|r| r["id"] == workspace)
}

/// Waits until the access row of `workspace` on the integration `slug` is disabled.
async fn disabled(h: &Harness, slug: &str, workspace: &str) {
    support::wait_until(WAIT, || async {
        let stored = remote(h, slug).await;
        (row(&stored, workspace)?["enabled"] == false).then_some(())
    })
    .await
    .expect("the dropped workspace was disabled");
}

/// Runs the built `aigw <args[0]>` (`api` or `export`) against the harness's emulator with the
/// rest of `args`; its stdout and stderr.
pub(super) async fn aigw(h: &Harness, args: &[&str]) -> String {
    let url = h.emulator.management_url();
    let output = support::cli::against(args[0], &url, support::harness::TOKEN, &args[1..]).await;
    assert!(output.status.success(), "{args:?}: {output:?}");
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[tokio::test]
async fn configurations_come_from_a_labelled_secret_access_rows_are_disabled_and_a_used_integration_waits()
 {
    let h = Harness::start_with_secret_namespace("mcpi", Duration::from_secs(1)).await;
    put_config(&h, FIRST_HEADER, true).await;
    let slug = h.cluster_name("github");
    // Cluster-scoped names carry the test's prefix.
    let payments_name = h.cluster_name("payments");
    let spec = json!({"slug": slug, "name": "GitHub tools", "url": "https://mcp.example.com/mcp",
                      "authType": "headers", "transport": "http", "description": "from Git",
                      "configurationsSecretRef": {"name": "github-mcp"},
                      "workspaces": [{"workspaceRef": {"name": payments_name}},
                                     {"workspace": WS_A}]});
    create(&h, "github", spec.clone()).await;

    // One POST; configurations reached the API (a JSON value as JSON); the Workspace resource
    // does not exist yet, so its access row waits while the literal workspace's is enabled.
    let waiting = h
        .wait_cluster::<McpIntegration>("github", WAIT, |r| {
            r.condition("Ready")
                .is_some_and(|(s, reason, _)| s == "False" && reason == "WorkspaceNotReady")
        })
        .await;
    let (_, _, message) = waiting.condition("Ready").unwrap();
    assert!(
        message.contains(&format!("Workspace {payments_name}")),
        "{message}"
    );
    assert_eq!(h.count(MCP_INTEGRATION_POST).await, 1, "one POST");
    let stored = remote(&h, &slug).await;
    assert_eq!(
        stored["configurations"]["custom_headers"]["x-api-key"],
        FIRST_HEADER
    );
    assert_eq!(stored["configurations"]["client_secret"], CLIENT_SECRET);
    assert_eq!(stored["auth_type"], "headers");
    assert!(
        row(&stored, WS_A).is_none(),
        "no access sent before it can all be"
    );

    // The Workspace becomes Ready: both rows are enabled, in one PUT.
    let payments = h.ready_workspace("payments").await;
    let ready = h
        .wait_cluster::<McpIntegration>("github", WAIT, |r| r.ready())
        .await;
    let status = ready.status.clone().unwrap();
    assert_eq!(status.slug.as_deref(), Some(slug.as_str()));
    assert!(status.secret_hash.is_some());
    let mut enabled = status.workspaces.clone();
    enabled.sort();
    let mut expected = vec![payments.clone(), WS_A.to_string()];
    expected.sort();
    assert_eq!(enabled, expected);
    let stored = remote(&h, &slug).await;
    assert_eq!(row(&stored, &payments).unwrap()["enabled"], true);
    assert_eq!(row(&stored, WS_A).unwrap()["enabled"], true);
    assert_eq!(
        h.count(MCP_INTEGRATION_WORKSPACES_PUT).await,
        1,
        "one access PUT for both rows"
    );

    // A workspace dropped from the spec is disabled, its row kept; the other is untouched.
    h.reset_stats().await;
    let mut fewer = spec.clone();
    fewer["workspaces"] = json!([{"workspaceRef": {"name": payments_name}}]);
    api(&h)
        .patch(
            &slug,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": fewer})),
        )
        .await
        .unwrap();
    disabled(&h, &slug, WS_A).await;
    let stored = remote(&h, &slug).await;
    assert_eq!(row(&stored, WS_A).unwrap()["status"], "archived");
    assert_eq!(row(&stored, &payments).unwrap()["enabled"], true);
    h.wait_cluster::<McpIntegration>("github", WAIT, |r| {
        r.ready()
            && r.status
                .as_ref()
                .is_some_and(|s| s.workspaces == [payments.clone()])
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        h.count(MCP_INTEGRATION_WORKSPACES_PUT).await,
        1,
        "one PUT disables it"
    );

    // An MCP server of the integration: the delete waits, naming it, and makes no call.
    let server = h
        .post(
            "/ai_gw/v2/mcp-servers",
            json!({"name": "Payments GitHub", "slug": "payments-github",
                        "mcp_integration_id": slug, "workspace_id": payments}),
        )
        .await;
    let server_id = server["id"].as_str().expect("the server's id").to_string();
    h.reset_stats().await;
    let (held, message) = h
        .delete_waits_for::<McpIntegration>("github", "MCP server payments-github")
        .await;
    assert!(message.contains("deletionPolicy: Orphan"), "{message}");
    assert!(!remote(&h, &slug).await.is_null(), "not deleted while used");
    assert_eq!(h.count(MCP_INTEGRATION_DELETE).await, 0, "nothing forced");

    // The server goes: the next try deletes the integration.
    let server = format!("/ai_gw/v2/mcp-servers/{server_id}");
    let release = h.delete(&server);
    h.released_then_gone::<McpIntegration>("github", ("mcp_integrations", &slug), release)
        .await;

    // No configuration value anywhere but the API.
    let statuses = serde_json::to_string(&held.status).unwrap();
    // An integration to read with the CLI, its configurations set through the API.
    h.post(
        "/ai_gw/admin/v2/mcp-integrations",
        json!({"name": "cli", "slug": "cli-mcp", "url": "https://mcp.example.com/cli",
                    "auth_type": "headers", "transport": "sse",
                    "configurations": {"custom_headers": {"x-api-key": SECOND_HEADER},
                                       "client_secret": CLIENT_SECRET}}),
    )
    .await;
    let cli = format!(
        "{}{}",
        aigw(&h, &["api", "mcp-integrations", "get", "cli-mcp"]).await,
        aigw(&h, &["api", "mcp-integrations", "list"]).await
    );
    assert!(cli.contains("cli-mcp"), "{cli}");
    h.assert_hidden(
        &[FIRST_HEADER, SECOND_HEADER, CLIENT_SECRET],
        &statuses,
        &cli,
    )
    .await;
    h.stop().await;
}

#[tokio::test]
async fn a_toggle_of_a_tool_not_discovered_yet_is_pending_then_applied() {
    let h = Harness::start_with_secret_namespace("mcpi-tools", Duration::from_secs(1)).await;
    let slug = h.cluster_name("tools");
    create(
        &h,
        "tools",
        json!({"slug": slug, "name": "Tools", "url": "https://mcp.example.com/tools",
               "authType": "none", "transport": "http",
               "capabilities": [{"name": "delete_repo", "enabled": false},
                                {"name": "summarise", "type": "prompt", "enabled": false}]}),
    )
    .await;

    // Nothing discovered: Ready, both toggles pending, no toggle sent.
    let pending = h
        .wait_cluster::<McpIntegration>("tools", WAIT, |r| {
            r.ready()
                && r.status
                    .as_ref()
                    .is_some_and(|s| !s.pending_capabilities.is_empty())
        })
        .await;
    assert_eq!(
        pending.status.unwrap().pending_capabilities,
        ["prompt summarise", "tool delete_repo"]
    );
    assert_eq!(h.count(MCP_INTEGRATION_CAPABILITIES_PUT).await, 0);

    // The gateway discovers the tools (not the prompt): the tool's toggle goes in one PUT,
    // the prompt's keeps waiting.
    let id = remote(&h, &slug).await["id"].as_str().unwrap().to_string();
    h.post(
        &format!("/_emulator/mcp-integrations/{id}/discover"),
        json!({"tools": [{"name": "delete_repo"}, {"name": "list_repos"}]}),
    )
    .await;
    let applied = h
        .wait_cluster::<McpIntegration>("tools", WAIT, |r| {
            r.status
                .as_ref()
                .is_some_and(|s| s.pending_capabilities == ["prompt summarise"])
        })
        .await;
    assert!(applied.ready());
    let stored = remote(&h, &slug).await;
    let tool = |name: &str| {
        stored["capabilities"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .cloned()
            .unwrap()
    };
    assert_eq!(tool("delete_repo")["enabled"], false);
    assert_eq!(
        tool("list_repos")["enabled"],
        true,
        "an unlisted tool is left"
    );
    assert_eq!(
        h.count(MCP_INTEGRATION_CAPABILITIES_PUT).await,
        1,
        "one toggle PUT"
    );

    // Steady: the pending prompt is read again, nothing written.
    h.assert_no_write_over(Duration::from_secs(3)).await;
    h.stop().await;
}

/// An MCP integration made in the console, exported by `aigw export` and applied: adopted with
/// no write; its configurations are named in the manifest's header, never printed.
#[tokio::test]
async fn an_exported_mcp_integration_is_adopted_without_a_write() {
    let h = Harness::start_with("mcpi-export", Duration::from_secs(1)).await;
    let slug = format!("console-{}", h.env.namespace);
    let made = json!({"name": "Console made", "slug": slug, "url": "https://mcp.example.com/console",
                    "auth_type": "headers", "transport": "sse", "description": "made in the console",
                    "configurations": {"custom_headers": {"x-api-key": FIRST_HEADER}}});
    h.post("/ai_gw/admin/v2/mcp-integrations", made).await;
    h.put(
        &format!("/ai_gw/admin/v2/mcp-integrations/{slug}/workspaces"),
        json!({"workspaces": [{"id": WS_A, "enabled": true}]}),
    )
    .await;

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("export");
    let output = aigw(&h, &["export", "--out", out.to_str().unwrap()]).await;
    assert!(!output.contains(FIRST_HEADER), "{output}");
    let text = support::cli::exported_manifest(&out, "McpIntegration", &slug);
    assert!(!text.contains(FIRST_HEADER), "{text}");
    assert!(text.contains("configurationsSecretRef"), "{text}");
    let mut exported: Value = serde_yaml::from_str(&text).unwrap();
    assert_eq!(
        exported["spec"]["workspaces"],
        json!([{"workspace": WS_A, "enabled": true}])
    );
    h.adopts_export::<McpIntegration>("exported", exported["spec"].take(), &slug)
        .await;
    h.stop().await;
}

/// Two integrations of one display name and two slugs, deleted while their creates are both
/// unanswered: each cleanup finds its own by its slug and deletes it. The in-flight check
/// compared the name only, so each took the other's unfinished create for a possible maker of
/// its match, and both finalizers waited for good.
#[tokio::test]
async fn two_namesakes_of_different_slugs_deleted_mid_create_each_delete_their_own() {
    let h = Harness::start_with("mcpi-twins", Duration::from_secs(1)).await;
    let list = "GET /ai_gw/admin/v2/mcp-integrations";
    let lost = json!({"drop_after_commit_once": [MCP_INTEGRATION_POST, MCP_INTEGRATION_POST],
                      "failing_routes": {list: 503}});
    h.faults(lost).await;
    let names = ["twin-a", "twin-b"];
    for name in names {
        let spec = json!({"slug": h.cluster_name(name), "name": "Twins",
                          "url": "https://mcp.example.com/mcp", "authType": "none",
                          "transport": "http", "workspaces": [{"workspace": WS_A}]});
        create(&h, name, spec).await;
    }
    let both_sent = support::wait_until(WAIT, || async {
        (h.count(MCP_INTEGRATION_POST).await == 2).then_some(())
    })
    .await;
    assert!(both_sent.is_some(), "{}", h.stats().await);
    // Both creates are in flight, their answers lost; both are deleted before a lookup ran.
    for name in names {
        h.delete_cluster::<McpIntegration>(name).await;
    }
    h.faults(json!({})).await;
    for name in names {
        let gone = support::gone_within(&api(&h), &h.cluster_name(name), WAIT).await;
        assert!(
            gone,
            "{name} was never deleted: {:?}",
            api(&h).get_opt(&h.cluster_name(name)).await
        );
    }
    let state = h.state().await;
    let (posts, deletes) = (
        h.count(MCP_INTEGRATION_POST).await,
        h.count(MCP_INTEGRATION_DELETE).await,
    );
    h.stop().await;
    assert_eq!((posts, deletes), (2, 2), "{state}");
}

/// An integration's delete is for good, and what it refuses while servers use it is not
/// documented: before it, the list of MCP servers must prove that none instantiates it. A list
/// that does not (here every answer says more rows follow) holds the delete, with no call,
/// until a whole one does.
#[tokio::test]
async fn a_delete_waits_for_a_whole_list_of_servers() {
    let h = Harness::start_with("mcpi-unproven", Duration::from_secs(1)).await;
    let slug = h.cluster_name("lone");
    let spec = json!({"slug": slug, "name": "Lone", "url": "https://mcp.example.com/mcp",
                      "authType": "none", "transport": "http", "workspaces": [{"workspace": WS_A}]});
    create(&h, "lone", spec).await;
    h.wait_cluster::<McpIntegration>("lone", WAIT, |r| r.ready())
        .await;
    h.faults(json!({"list_has_more": true})).await;
    let waits = "waits for a whole list of MCP servers, to prove that none instantiates it \
                 (the list came back incomplete";
    h.delete_waits_for::<McpIntegration>("lone", waits).await;
    let deletes = h.count(MCP_INTEGRATION_DELETE).await;
    assert_eq!(deletes, 0, "deleted on a list that proved nothing");
    let heal = h.faults(json!({}));
    h.released_then_gone::<McpIntegration>("lone", ("mcp_integrations", &slug), heal)
        .await;
    h.stop().await;
}

/// A workspace named by slug reads back under its UUID (FACTS-rest §5): enabled with one PUT,
/// recorded by UUID, nothing sent at steady state. Named twice (by slug and by UUID) the
/// integration is refused, naming the entry, and nothing is sent; dropped, it is disabled. A
/// slug no workspace has waits.
#[tokio::test]
async fn a_workspace_named_by_slug_is_matched_under_its_uuid_and_one_named_twice_is_refused() {
    let h = Harness::start_with_secret_namespace("mcpslug", Duration::from_secs(1)).await;
    let slug = h.cluster_name("linear");
    let team = h.cluster_name("team-b");
    h.seed_workspace(WS_B, "Team B", &team).await;
    let spec = json!({"slug": slug, "name": "Linear", "url": "https://mcp.example.com/linear",
                      "authType": "none", "transport": "http",
                      "workspaces": [{"workspace": team}]});
    create(&h, "linear", spec).await;
    let ready = h
        .wait_cluster::<McpIntegration>("linear", WAIT, |r| r.ready())
        .await;
    assert_eq!(ready.status.unwrap().workspaces, [WS_B]);
    let stored = remote(&h, &slug).await;
    assert_eq!(row(&stored, WS_B).unwrap()["enabled"], true);
    // Several drift intervals (1 s): the row is matched, never sent again.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        h.count(MCP_INTEGRATION_WORKSPACES_PUT).await,
        1,
        "one PUT, none at steady state"
    );

    let twice = json!([{"workspace": team}, {"workspace": WS_B}]);
    let message = set_workspaces_until(&h, &slug, twice, "InvalidSpec").await;
    assert!(message.contains("spec.workspaces[1]"), "{message}");
    assert_eq!(
        h.count(MCP_INTEGRATION_WORKSPACES_PUT).await,
        1,
        "nothing sent"
    );

    let none = json!({"spec": {"workspaces": []}});
    api(&h)
        .patch(&slug, &PatchParams::default(), &Patch::Merge(none))
        .await
        .unwrap();
    disabled(&h, &slug, WS_B).await;

    // A slug no workspace has (or an archived one's) waits and sends nothing: its row could
    // never be matched.
    h.reset_stats().await;
    let unknown = json!([{"workspace": "no-such-team"}]);
    let message = set_workspaces_until(&h, &slug, unknown, "WorkspaceNotReady").await;
    assert!(message.contains("no-such-team"), "{message}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        h.count(MCP_INTEGRATION_WORKSPACES_PUT).await,
        0,
        "nothing sent"
    );
    h.stop().await;
}

/// Sets `spec.workspaces` of the McpIntegration `linear` (remote slug `slug`) to `workspaces`,
/// then waits until it is not Ready for `reason`: its message.
async fn set_workspaces_until(h: &Harness, slug: &str, workspaces: Value, reason: &str) -> String {
    let patch = json!({"spec": {"workspaces": workspaces}});
    api(h)
        .patch(slug, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap();
    let waiting = h
        .wait_cluster::<McpIntegration>("linear", WAIT, |r| {
            r.condition("Ready")
                .is_some_and(|(s, why, _)| s == "False" && why == reason)
        })
        .await;
    waiting.condition("Ready").unwrap().2
}
