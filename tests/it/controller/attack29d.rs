//! Fresh attack on issue 29's kinds (h/attack29d), aimed at the latest commits (the Workspace's
//! `remove_unused`, `grants.mcpIntegrations`). A test that passes proves the guarantee its
//! name states. The one break it found (a failing Workspace create leaving its IAM scope) is
//! fixed; its test passes now.

use crate::support;

use std::time::Duration;

use aigw::resources::{McpIntegration, McpServer, Workspace};
use kube::api::{Api, DeleteParams};
use serde_json::json;
use support::endpoints::{
    MCP_INTEGRATION_GET, MCP_SERVER_POST, SCOPE_POST, SCOPE_PUT, WORKSPACE_POST,
};
use support::harness::Harness;
use support::objects::Conditions;
use support::proxy::{Received, proxy, refusal};

const WAIT: Duration = Duration::from_secs(40);
const WS_A: &str = "5d1c3b2a-4e6f-4a7b-8c9d-0e1f2a3b4c5d";

fn workspaces(h: &Harness) -> Api<Workspace> {
    Api::all(h.env.client.clone())
}

async fn create_workspace(h: &Harness, name: &str) {
    h.create_cluster::<Workspace>(name, json!({"name": name}))
        .await;
}

/// The emulator's IAM scopes, by name.
async fn scope_names(h: &Harness) -> Vec<String> {
    h.state().await["scopes"]
        .as_array()
        .map(|all| {
            all.iter()
                .filter_map(|s| s["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Waits until `count(endpoint)` reaches `n`.
async fn sent(h: &Harness, endpoint: &str, n: u64) -> bool {
    support::wait_until(WAIT, || async {
        (h.count(endpoint).await >= n).then_some(())
    })
    .await
    .is_some()
}

/// Exactly once: the operator is killed after the first call of the three (the scope made, the
/// workspace POST failing), then a new one starts with the API healthy: one scope, one
/// workspace and one bind in all, the scope this resource's.
#[tokio::test]
async fn a_workspace_create_killed_between_scope_and_workspace_ends_with_one_call_each() {
    let mut h = Harness::start_with("atk-wskill", Duration::from_secs(1)).await;
    h.faults(json!({"failing_routes": {WORKSPACE_POST: 503}}))
        .await;
    let before = scope_names(&h).await.len();
    create_workspace(&h, "killed").await;
    assert!(sent(&h, SCOPE_POST, 1).await, "{}", h.stats().await);
    assert!(sent(&h, WORKSPACE_POST, 1).await, "{}", h.stats().await);
    h.stop_operator().await;
    h.faults(json!({})).await;
    h.restart_operator().await;
    let api = workspaces(&h);
    let full = h.cluster_name("killed");
    let ready = support::wait_until(WAIT, || async {
        let w = api.get_opt(&full).await.ok()??;
        w.ready().then_some(w)
    })
    .await;
    let Some(ready) = ready else {
        panic!("not Ready:\n{}", h.cluster_events_text().await);
    };
    let status = ready.status.unwrap();
    let stats = h.stats().await;
    let count = |e: &str| support::harness::count_in(&stats, e);
    assert_eq!(count(SCOPE_POST), 1, "{stats}");
    assert_eq!(count(SCOPE_PUT), 1, "{stats}");
    // The failed POSTs touched no state: exactly one workspace names the scope.
    let scope_name = status.scope_name.unwrap();
    let mine = h.state().await["workspaces"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|w| w["scope_name"] == scope_name.as_str())
        .count();
    assert_eq!(mine, 1);
    assert_eq!(scope_names(&h).await.len(), before + 1);
    h.stop().await;
}

/// Nothing left behind: a Workspace whose create never succeeds (every workspace POST answered
/// 503, so the API made no workspace) is deleted. Its IAM scope, made by the first call of the
/// flow and bound to nothing, is no one's: the finalizer deletes it once the lookup proves the
/// unfinished create made nothing (`Verbs::remove_unused`). Before, only a create whose
/// outcome was known (`create_settled`) had its scope removed, and this one stayed.
#[tokio::test]
async fn attack_a_workspace_deleted_while_its_create_fails_leaves_no_iam_scope() {
    let h = Harness::start_with("atk-wsleak", Duration::from_secs(1)).await;
    h.faults(json!({"failing_routes": {WORKSPACE_POST: 503}}))
        .await;
    let before = scope_names(&h).await;
    create_workspace(&h, "leak").await;
    assert!(sent(&h, WORKSPACE_POST, 2).await, "{}", h.stats().await);
    let api = workspaces(&h);
    let full = h.cluster_name("leak");
    api.delete(&full, &DeleteParams::default()).await.unwrap();
    // The deletion waits until a list taken a settle time (`--list-settle`) after the last POST
    // proves it made nothing.
    let gone = support::wait_until(Duration::from_secs(90), || async {
        api.get_opt(&full).await.ok()?.is_none().then_some(())
    })
    .await;
    let left: Vec<String> = scope_names(&h)
        .await
        .into_iter()
        .filter(|s| !before.contains(s))
        .collect();
    let events = h.cluster_events_text().await;
    h.faults(json!({})).await;
    h.stop().await;
    assert!(gone.is_some(), "the Workspace was not deleted: {events}");
    assert_eq!(
        left,
        Vec::<String>::new(),
        "IAM scope left behind\n{events}"
    );
}

/// A Ready McpIntegration resource `name` with `slug`, enabling [`WS_A`]; returns its UUID.
async fn mcp_integration(h: &Harness, name: &str, slug: &str) -> String {
    let api = Api::<McpIntegration>::all(h.env.client.clone());
    h.create_cluster::<McpIntegration>(
        name,
        json!({"slug": slug, "name": name, "url": "https://mcp.example.com/mcp",
                   "authType": "none", "transport": "http", "workspaces": [{"workspace": WS_A}]}),
    )
    .await;
    let full = h.cluster_name(name);
    let id = support::wait_until(WAIT, || async {
        let i = api.get_opt(&full).await.ok()??;
        i.ready().then(|| i.status.and_then(|s| s.id)).flatten()
    })
    .await;
    match id {
        Some(id) => id,
        None => panic!("{full} not Ready:\n{}", h.cluster_events_text().await),
    }
}

async fn server(h: &Harness, name: &str, by: serde_json::Value) {
    let mut spec = json!({"slug": format!("{name}-{}", &h.env.namespace[h.env.namespace.len() - 8..]),
                          "name": name, "workspaceId": WS_A});
    for (k, v) in by.as_object().into_iter().flatten() {
        spec[k] = v.clone();
    }
    support::objects::create::<McpServer>(&h.env, name, spec).await;
}

async fn refused(h: &Harness, name: &str) {
    let servers = h.env.api::<McpServer>();
    let refused = support::wait_until(WAIT, || async {
        let s = servers.get_opt(name).await.ok()??;
        s.stalled_with("McpIntegrationNotAllowed").then_some(())
    })
    .await;
    assert!(
        refused.is_some(),
        "{name} not refused: {:?}\n{}",
        servers
            .get_opt(name)
            .await
            .ok()
            .flatten()
            .and_then(|s| s.status),
        h.stats().await
    );
}

/// Grants (`spec.grants[].mcpIntegrations`): a namespace granted McpIntegration resource
/// `alpha` cannot reach integration `other` by its UUID while the integration read answers
/// 503 (the keys then are the UUID alone), nor by a slug that equals the granted resource's
/// name; both are refused with no POST, while `alpha` itself (by resource) is made once.
#[tokio::test]
async fn an_ungranted_mcp_integration_by_uuid_on_a_failing_read_or_by_a_granted_name_as_slug_is_refused()
 {
    let grants = json!([{"namespaces": ["{ns}"], "workspaces": [WS_A],
                         "mcpIntegrations": ["{ns}-alpha"]}]);
    let h = Harness::start_with_grants("atk-mcpg", Duration::from_secs(1), grants).await;
    let alpha = h.cluster_name("alpha");
    h.seed_workspace(WS_A, "payments", "payments").await;
    mcp_integration(&h, "alpha", &format!("{alpha}-slug")).await;
    // `other`'s slug is the granted resource's name.
    let other = mcp_integration(&h, "other", &alpha).await;
    h.faults(json!({"failing_routes": {MCP_INTEGRATION_GET: 503}}))
        .await;
    server(&h, "by-uuid", json!({"integrationId": other})).await;
    refused(&h, "by-uuid").await;
    let reads_failed = h.count(MCP_INTEGRATION_GET).await;
    h.faults(json!({})).await;
    server(&h, "by-slug", json!({"integrationId": alpha})).await;
    refused(&h, "by-slug").await;
    assert!(
        reads_failed > 0,
        "the read never failed: {}",
        h.stats().await
    );
    assert_eq!(h.count(MCP_SERVER_POST).await, 0, "{}", h.stats().await);
    let servers = h.env.api::<McpServer>();
    server(&h, "by-ref", json!({"integrationRef": {"name": alpha}})).await;
    let made = support::wait_until(WAIT, || async {
        servers.get_opt("by-ref").await.ok()??.ready().then_some(())
    })
    .await;
    let posts = h.count(MCP_SERVER_POST).await;
    for name in ["by-uuid", "by-slug", "by-ref"] {
        h.env.delete_and_wait::<McpServer>(name, WAIT).await;
    }
    h.stop().await;
    assert!(made.is_some(), "the granted server was not made");
    assert_eq!(posts, 1);
}

const SECRET_KEY: &str = "wJalr-attack29d-Qx7Zr3Lm8Vn2";

/// A proxy in front of the emulator answering every SecretReference or McpIntegration POST
/// with a 503 whose
/// message echoes the body it was sent (a gateway in trouble dumping the request): the
/// create's outcome is unknown, a path apart from the refusals the concealment was built for.
async fn echo_503_proxy(upstream: String) -> String {
    proxy(upstream, move |received: Received| async move {
        let Received { parts, body, .. } = &received;
        if parts.method == reqwest::Method::POST
            && [
                "/ai_gw/admin/v2/secret-references",
                "/ai_gw/admin/v2/mcp-integrations",
            ]
            .contains(&parts.uri.path())
        {
            let message = format!(
                "upstream unavailable while handling {}",
                String::from_utf8_lossy(body)
            );
            return refusal(503, message);
        }
        received.pass().await
    })
    .await
}

/// A harness whose operator reaches the emulator through [`echo_503_proxy`]; the log mark from
/// just before it did.
async fn behind_echoing_503(prefix: &str) -> (Harness, usize) {
    let mut h = Harness::start_with_secret_namespace(prefix, Duration::from_secs(1)).await;
    let proxy = echo_503_proxy(h.emulator.management_url()).await;
    let mark = support::harness::log_mark();
    h.restart_operator_via(&proxy).await;
    (h, mark)
}

/// Creates this test's cluster-scoped `name` of kind `K` with `spec` and waits until its
/// cluster-scoped events are `reported`; whether they were, and what the operator shows: the
/// object's status, those events and the log since `mark`. Then the object goes.
async fn create_and_show<K: support::cluster::ClusterKind>(
    h: &Harness,
    (name, spec): (&str, serde_json::Value),
    mark: usize,
    reported: impl Fn(&str) -> bool,
) -> (bool, [String; 3]) {
    h.create_cluster::<K>(name, spec).await;
    let seen = support::wait_until(WAIT, || async {
        reported(&h.cluster_events_text().await).then_some(())
    })
    .await;
    let api = h.cluster_api::<K>();
    let full = h.cluster_name(name);
    let status = api
        .get_opt(&full)
        .await
        .unwrap()
        .map(|r| serde_json::to_value(r).unwrap()["status"].to_string())
        .unwrap_or_default();
    let events = h.cluster_events_text().await;
    let logs = support::harness::logs_since(mark);
    api.delete(&full, &DeleteParams::default()).await.ok();
    (seen.is_some(), [status, events, logs])
}

/// Secrecy: a SecretReference create answered 503 with the request echoed (`auth_config` in
/// clear) is an unknown outcome, not a refusal; its `aws_secret_access_key` still reaches no
/// status, event or log line.
#[tokio::test]
async fn a_secret_reference_create_answered_503_echoing_auth_config_shows_it_nowhere() {
    let (h, mark) = behind_echoing_503("atk-sr503").await;
    let auth = json!({"aws_auth_type": "accessKey", "aws_region": "eu-west-1",
                      "aws_access_key_id": "AKIAQ7ATTACK29DEXMPL",
                      "aws_secret_access_key": SECRET_KEY});
    h.put_secret("aws-sm-auth", auth, true).await;
    let spec = json!({"slug": h.cluster_name("aws"), "name": "AWS prod", "managerType": "aws_sm",
                      "secretPath": "prod/openai", "secretKey": "api_key",
                      "authConfigSecretRef": {"name": "aws-sm-auth"}});
    // Several failed attempts, each reported.
    let reported = |events: &str| {
        events.matches("upstream unavailable").count() >= 2 || events.matches("503").count() >= 2
    };
    let (seen, [status, events, logs]) =
        create_and_show::<aigw::resources::SecretReference>(&h, ("aws", spec), mark, reported)
            .await;
    h.env
        .api::<k8s_openapi::api::core::v1::Secret>()
        .delete("aws-sm-auth", &DeleteParams::default())
        .await
        .ok();
    h.stop().await;
    assert!(seen, "the 503 was never reported:\n{events}");
    for (what, text) in [("status", &status), ("events", &events), ("log", &logs)] {
        assert!(
            !text.contains(SECRET_KEY),
            "auth_config in the {what}:\n{text}"
        );
    }
}

/// The rows of `family` in an installation's emulator whose `field` is `value`.
fn rows(state: &serde_json::Value, family: &str, field: &str, value: &str) -> usize {
    state[family]
        .as_array()
        .map(|all| all.iter().filter(|r| r[field] == value).count())
        .unwrap_or_default()
}

/// Ownership: two installations (their own `--installation` id and tenant) both selecting a
/// Workspace and an McpIntegration: one of them takes each, so there is one remote workspace
/// (one IAM scope) and one integration across both tenants, and the other installation writes
/// nothing about the resource to the cluster (beyond a claim the apiserver refused, 409).
#[tokio::test]
async fn two_installations_over_one_workspace_and_mcp_integration_make_one_of_each() {
    use support::harness::CLUSTER_LABEL;
    let mut h = Harness::start_with("atk-2inst", Duration::from_secs(1)).await;
    h.stop_operator().await;
    let selector = format!("{CLUSTER_LABEL}={}", h.env.namespace);
    let a = h.installation("inst-a", &selector).await;
    let b = h.installation("inst-b", &selector).await;
    let workspace = h.cluster_name("shared");
    let integration = h.cluster_name("tools");
    h.create_cluster::<Workspace>("shared", json!({"name": workspace}))
        .await;
    let integrations = Api::<McpIntegration>::all(h.env.client.clone());
    h.create_cluster::<McpIntegration>(
        "tools",
        json!({"slug": integration, "name": "Tools", "url": "https://mcp.example.com/mcp",
                       "authType": "none", "transport": "http"}),
    )
    .await;
    let ready = support::wait_until(WAIT, || async {
        let w = workspaces(&h).get_opt(&workspace).await.ok()??;
        let i = integrations.get_opt(&integration).await.ok()??;
        (w.ready() && i.ready()).then_some(())
    })
    .await;
    assert!(ready.is_some(), "{}", h.cluster_events_text().await);
    // Both have had time to act (drift every second).
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (sa, sb) = (a.state().await, b.state().await);
    let made = |family: &str, field: &str, value: &str| {
        rows(&sa, family, field, value) + rows(&sb, family, field, value)
    };
    assert_eq!(made("workspaces", "name", &workspace), 1, "{sa}\n{sb}");
    assert_eq!(made("mcp_integrations", "slug", &integration), 1);
    let scopes = |s: &serde_json::Value| {
        s["scopes"].as_array().map_or(0, |all| {
            all.iter()
                .filter(|x| x["name"].as_str().is_some_and(|n| n.contains("atk_2inst")))
                .count()
        })
    };
    assert_eq!(scopes(&sa) + scopes(&sb), 1, "{sa}\n{sb}");
    for (resource, name) in [
        ("workspaces", &workspace),
        ("mcpintegrations", &integration),
    ] {
        // A claim lost to the other (the apiserver's 409) is no write.
        let applied = |i: &support::harness::Installation| -> Vec<String> {
            let all = i.writes_to(resource, name);
            all.into_iter().filter(|w| !w.ends_with(" 409")).collect()
        };
        let (wa, wb) = (applied(&a), applied(&b));
        assert!(
            wa.is_empty() || wb.is_empty(),
            "both installations wrote {resource}/{name}:\n{wa:?}\n{wb:?}"
        );
    }
    drop((a, b));
    h.stop().await;
}

/// Exactly once: an McpServer create whose answer is lost after the commit, while the server
/// list answers 503, sends no second POST while it cannot tell; the list back, the server is
/// recovered: one POST, one server.
#[tokio::test]
async fn an_mcp_server_create_lost_while_its_list_fails_is_sent_once() {
    let h = Harness::start_with("atk-mcps-lost", Duration::from_secs(1)).await;
    h.seed_workspace(WS_A, "payments", "payments").await;
    let tools = h.cluster_name("tools");
    mcp_integration(&h, "tools", &tools).await;
    h.faults(json!({"drop_after_commit_once": [MCP_SERVER_POST],
                    "failing_routes": {"GET /ai_gw/v2/mcp-servers": 503}}))
        .await;
    server(&h, "lost", json!({"integrationRef": {"name": tools}})).await;
    assert!(sent(&h, MCP_SERVER_POST, 1).await, "{}", h.stats().await);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let while_failing = h.count(MCP_SERVER_POST).await;
    let lists = h.count("GET /ai_gw/v2/mcp-servers").await;
    h.faults(json!({})).await;
    let servers = h.env.api::<McpServer>();
    let ready = support::wait_until(WAIT, || async {
        servers.get_opt("lost").await.ok()??.ready().then_some(())
    })
    .await;
    let stats = h.stats().await;
    let made = h.state().await["mcp_servers"].as_array().map_or(0, |all| {
        all.iter()
            .filter(|s| s["slug"].as_str().is_some_and(|x| x.starts_with("lost-")))
            .count()
    });
    h.env.delete_and_wait::<McpServer>("lost", WAIT).await;
    h.stop().await;
    assert!(lists > 0, "the list was never tried: {stats}");
    assert_eq!(
        while_failing, 1,
        "a second POST while the list failed: {stats}"
    );
    assert!(ready.is_some(), "not recovered: {stats}");
    assert_eq!(
        support::harness::count_in(&stats, MCP_SERVER_POST),
        1,
        "{stats}"
    );
    assert_eq!(made, 1, "servers made");
}

/// Secrecy: an McpIntegration create answered 503 with the request echoed (its
/// `configurations` from a Secret in clear: a header value, a client secret and a numeric PIN
/// inside a JSON value) shows none of them in its status, the events or the log.
#[tokio::test]
async fn an_mcp_integration_create_answered_503_echoing_configurations_shows_them_nowhere() {
    let (h, mark) = behind_echoing_503("atk-mcpi503").await;
    let header = "hdr-attack29d-Zq4Wv8Np2Lk6";
    let client_secret = "cs-attack29d-Rt5Yu9Io3Pa7";
    let pin = 80_000_000_000u64 + u64::from(uuid::Uuid::new_v4().as_fields().0) % 9_999_999_999;
    let configurations = json!({"custom_headers": json!({"x-api-key": header}).to_string(),
                                "client_secret": client_secret,
                                "jwt_validation": json!({"clock_pin": pin}).to_string()});
    h.put_secret("mcp-conf", configurations, true).await;
    let spec = json!({"slug": h.cluster_name("tools"), "name": "Tools",
                      "url": "https://mcp.example.com/mcp", "authType": "headers",
                      "transport": "http", "configurationsSecretRef": {"name": "mcp-conf"}});
    let reported = |events: &str| events.contains("upstream unavailable");
    let (seen, [status, events, logs]) =
        create_and_show::<McpIntegration>(&h, ("tools", spec), mark, reported).await;
    h.stop().await;
    assert!(seen, "the 503 was never reported:\n{events}\n{status}");
    for value in [
        header.to_string(),
        client_secret.to_string(),
        pin.to_string(),
    ] {
        for (what, text) in [("status", &status), ("events", &events), ("log", &logs)] {
            assert!(!text.contains(&value), "{value} in the {what}:\n{text}");
        }
    }
}

/// Grants revoked then delete: a server made by `integrationId` (the UUID of a granted
/// McpIntegration resource) whose grant is then withdrawn is released on delete without a call,
/// and left in place.
#[tokio::test]
async fn a_server_by_integration_id_whose_grant_is_revoked_is_released_without_a_delete() {
    let granted = json!([{"namespaces": ["{ns}"], "workspaces": [WS_A],
                          "mcpIntegrations": ["{ns}-alpha"]}]);
    let mut h = Harness::start_with_grants("atk-mcprev", Duration::from_secs(1), granted).await;
    h.seed_workspace(WS_A, "payments", "payments").await;
    let alpha = h.cluster_name("alpha");
    let id = mcp_integration(&h, "alpha", &alpha).await;
    server(&h, "by-id", json!({"integrationId": id})).await;
    let servers = h.env.api::<McpServer>();
    let ready = support::wait_until(WAIT, || async {
        servers.get_opt("by-id").await.ok()??.ready().then_some(())
    })
    .await;
    assert!(ready.is_some(), "{}", h.stats().await);
    h.set_grants(json!([{"namespaces": ["{ns}"], "workspaces": [WS_A],
                         "mcpIntegrations": ["someone-else"]}]));
    h.restart_operator().await;
    h.reset_stats().await;
    h.env.delete_and_wait::<McpServer>("by-id", WAIT).await;
    let deletes = h.count("DELETE /ai_gw/v2/mcp-servers/{mcpServerId}").await;
    let left = h.state().await["mcp_servers"].as_array().map_or(0, |all| {
        all.iter()
            .filter(|s| s["slug"].as_str().is_some_and(|x| x.starts_with("by-id-")))
            .count()
    });
    h.stop().await;
    assert_eq!(deletes, 0, "a revoked grant still deleted the server");
    assert_eq!(left, 1, "the server is left in place");
}
