//! Guardrail and ClusterGuardrail on a real kube-apiserver against the emulator over HTTP: a
//! Secret-backed check parameter reaches the API and nothing else, steady state writes nothing,
//! a Secret change is one PUT, a remote edit is corrected, a guardrail a Config names waits for
//! that Config, an organisation guardrail is made on the admin plane, and Kubernetes RBAC alone
//! keeps a namespaced user from making one.

use crate::support;

use std::time::Duration;

use aigw::resources::{ClusterGuardrail, Config, Guardrail};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::endpoints::GUARDRAIL_MCP_SERVERS_PUT;
use support::harness::{Harness, captured_logs};
use support::objects::{Conditions, object};

const WAIT: Duration = Duration::from_secs(30);
const WORKSPACE: &str = "9f3c2b1a-0d4e-4f6a-8b7c-1e2d3f4a5b6c";
const SECRET_VALUE: &str = "airs-key-Zq8Wm3Lx7Pv2";
const ROTATED_VALUE: &str = "airs-key-Rt5Yn1Kc9Hd4";

fn guardrail_spec(name: &str) -> Value {
    json!({"name": name, "workspaceId": WORKSPACE,
           "checks": [{"id": "default.regexMatch", "parameters": {"rule": "\\d{16}"}},
                      {"id": "panw-prisma-airs.intercept", "parameters": {"profile_name": "strict"}}],
           "secretRefs": [{"path": "/checks/1/parameters/api_key",
                           "secretKeyRef": {"name": "airs", "key": "api-key"}}],
           "actions": {"deny": true, "onFail": {"value": -5}}})
}

async fn put_secret(h: &Harness, value: &str) {
    h.put_secret("airs", json!({"api-key": value}), false).await;
}

/// The Guardrail `name` checking for a card number (no Secret), once Ready; its slug.
async fn ready_card_number_guardrail(h: &Harness, name: &str) -> String {
    let mut spec = guardrail_spec(name);
    spec["secretRefs"] = json!([]);
    spec["checks"] = json!([{"id": "default.regexMatch", "parameters": {"rule": "\\d{16}"}}]);
    support::objects::create::<Guardrail>(&h.env, name, spec).await;
    let ready = h.wait_for::<Guardrail>(name, WAIT, |g| g.ready()).await;
    ready.status.unwrap().slug.unwrap()
}

/// The message of the ClusterGuardrail `name`'s `Stalled` condition once it says `reason`
/// (`waits` says what is waited for, on timeout).
async fn stalled_message(
    cluster: &Api<ClusterGuardrail>,
    name: &str,
    reason: &str,
    waits: &str,
) -> String {
    let stalled = support::wait_until(WAIT, || async {
        let g = cluster.get_opt(name).await.ok()??;
        g.stalled_with(reason).then_some(g)
    })
    .await
    .expect(waits);
    stalled.condition("Stalled").unwrap().2
}

/// The emulator's default workspace.
async fn default_workspace(h: &Harness) -> String {
    let state = h.state().await;
    state["default_workspace_id"].as_str().unwrap().to_string()
}

/// Nothing is written remotely for `for_`; the remote writes so far.
async fn assert_steady(h: &Harness, for_: Duration) -> u64 {
    let writes = h.remote_writes().await;
    tokio::time::sleep(for_).await;
    assert_eq!(h.remote_writes().await, writes, "0 writes at steady state");
    writes
}

/// The emulator's record of guardrail `slug`, parameters in clear.
async fn remote(h: &Harness, slug: &str) -> Option<Value> {
    let record = h.remote_record("guardrails", "slug", slug).await;
    (!record.is_null()).then_some(record)
}

async fn puts(h: &Harness) -> u64 {
    h.count("PUT /ai_gw/v2/guardrails/{guardrailId}").await
}

/// A Guardrail's DELETE refused with an answer quoting its Secret-backed parameter, after a
/// restart: the value is concealed (the Config case's counterpart).
#[tokio::test]
async fn a_refused_delete_quoting_a_secret_parameter_after_a_restart_hides_it() {
    let h = Harness::start_with("gr-delete-echo", Duration::from_secs(1)).await;
    put_secret(&h, ROTATED_VALUE).await;
    support::objects::create::<Guardrail>(&h.env, "pii", guardrail_spec("pii")).await;
    h.wait_for::<Guardrail>("pii", WAIT, |g| g.ready()).await;
    let route = "/ai_gw/v2/guardrails/";
    super::config_refs::refused_delete_hides::<Guardrail>(h, "pii", route, ROTATED_VALUE).await;
}

#[tokio::test]
async fn a_secret_parameter_reaches_the_api_and_nothing_else() {
    let h = Harness::start_with("gr-secret", Duration::from_secs(1)).await;
    put_secret(&h, SECRET_VALUE).await;
    support::objects::create::<Guardrail>(&h.env, "pii", guardrail_spec("pii")).await;
    let ready = h.wait_for::<Guardrail>("pii", WAIT, |g| g.ready()).await;
    let status = ready.status.clone().unwrap();
    let slug = status.slug.clone().expect("a slug");
    assert!(status.version_id.is_some() && !status.history.is_empty());
    let stored = remote(&h, &slug).await.expect("the remote guardrail");
    assert_eq!(
        stored["checks"][1]["parameters"]["api_key"], SECRET_VALUE,
        "the Secret's value reached the API"
    );

    // Steady state and the correction of a remote edit are the conformance matrix's
    // (`guardrail`); here, what the Secret-backed parameter changes.
    h.reset_stats().await;

    // A Secret change: one PUT with the new value.
    put_secret(&h, ROTATED_VALUE).await;
    support::wait_until(WAIT, || async {
        let stored = remote(&h, &slug).await?;
        (stored["checks"][1]["parameters"]["api_key"] == ROTATED_VALUE).then_some(())
    })
    .await
    .expect("the rotated value was applied");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(puts(&h).await, 1, "one PUT for the Secret change");

    // The values are nowhere but in the API.
    let statuses = support::statuses(&h.env.api::<Guardrail>()).await;
    let events = h.env.events_text().await;
    let logs = captured_logs();
    for value in [SECRET_VALUE, ROTATED_VALUE] {
        assert!(!statuses.contains(value), "a Secret value in a status");
        assert!(!events.contains(value), "a Secret value in an event");
        assert!(!logs.contains(value), "a Secret value in the logs");
    }
    h.stop().await;
}

/// Guardrail `kept`, named by Config `uses-it`, deleted: its slug and the message of its
/// deletion waiting (`StillReferenced`).
async fn deletion_held_by_a_config(h: &Harness) -> (String, String) {
    let slug = ready_card_number_guardrail(h, "kept").await;
    let config = json!({"name": "uses-it", "config": {"input_guardrails": [slug],
        "targets": [{"provider": "@openai"}]}});
    support::objects::create::<Config>(&h.env, "uses-it", config).await;
    h.wait_for::<Config>("uses-it", WAIT, |c| c.ready()).await;
    h.env.delete::<Guardrail>("kept").await;
    let message = h
        .condition_message::<Guardrail>("kept", WAIT, ("Stalled", "StillReferenced"))
        .await;
    (slug, message)
}

#[tokio::test]
async fn a_guardrail_a_config_names_is_deleted_only_once_the_config_lets_go() {
    let h = Harness::start_with("gr-refs", Duration::from_secs(1)).await;
    let (slug, message) = deletion_held_by_a_config(&h).await;
    assert!(message.contains("uses-it"), "{message}");
    assert!(remote(&h, &slug).await.is_some(), "not deleted while named");

    h.env.delete_and_wait::<Config>("uses-it", WAIT).await;
    assert!(
        support::gone_within(&h.env.api::<Guardrail>(), "kept", Duration::from_secs(60)).await,
        "the guardrail went once no Config named it"
    );
    assert!(remote(&h, &slug).await.is_none(), "deleted remotely");
    h.stop().await;
}

/// A Config edited to stop naming a guardrail whose deletion waits for it lets the deletion go
/// at once. The edit wakes the deleting guardrail though the Config's new copy no longer names
/// it; the guardrail had waited long enough (45 s: retries back off from 0.5 s, doubling) that
/// its own next retry was further away than the few seconds allowed here.
#[tokio::test]
async fn a_guardrail_a_config_stops_naming_is_deleted_at_once() {
    let h = Harness::start("gr-letgo").await;
    let (slug, _) = deletion_held_by_a_config(&h).await;

    tokio::time::sleep(Duration::from_secs(45)).await;
    let without = json!({"spec": {"config": {"input_guardrails": []}}});
    h.env
        .api::<Config>()
        .patch("uses-it", &PatchParams::default(), &Patch::Merge(&without))
        .await
        .unwrap();
    let guardrails = h.env.api::<Guardrail>();
    assert!(
        support::gone_within(&guardrails, "kept", Duration::from_secs(8)).await,
        "the guardrail went as soon as the Config let go"
    );
    assert!(remote(&h, &slug).await.is_none(), "deleted remotely");
    h.stop().await;
}

#[tokio::test]
async fn a_config_naming_a_guardrail_resource_waits_for_it_then_applies_with_one_put() {
    let h = Harness::start_with("gr-named", Duration::from_secs(1)).await;
    let config = json!({"name": "routes", "config": {"targets": [{"provider": "@openai"}]}});
    support::objects::create::<Config>(&h.env, "routes", config).await;
    h.wait_for::<Config>("routes", WAIT, |c| c.ready()).await;

    // Name a Guardrail that does not exist yet: the Config waits, naming it, and writes nothing.
    h.reset_stats().await;
    let refs = json!({"spec": {"resourceRefs": [
        {"path": "/input_guardrails/0", "kind": "Guardrail", "name": "pii-later"}]}});
    support::merge_patch(&h.env.api::<Config>(), "routes", &refs).await;
    let message = h
        .condition_message::<Config>("routes", WAIT, ("Stalled", "ReferenceNotReady"))
        .await;
    assert!(message.contains("pii-later"), "{message}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(h.remote_writes().await, 0, "nothing written while waiting");

    let slug = ready_card_number_guardrail(&h, "pii-later").await;
    let ready = h.wait_for::<Config>("routes", WAIT, |c| c.ready()).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        h.count("PUT /ai_gw/v2/configs/{slug}").await,
        1,
        "one PUT once the guardrail is Ready"
    );
    let remote_slug = ready.status.unwrap().slug.unwrap();
    let remote = h.get(&format!("/ai_gw/v2/configs/{remote_slug}")).await;
    let document: Value = match &remote["config"] {
        Value::String(text) => serde_json::from_str(text).unwrap(),
        other => other.clone(),
    };
    assert_eq!(document["input_guardrails"], json!([slug]));
    h.stop().await;
}

/// The emulator's guardrail `slug` as the admin plane reads it.
async fn org_guardrail(h: &Harness, slug: &str) -> Option<Value> {
    let listed = h.get("/ai_gw/admin/v2/guardrails").await;
    listed["data"]
        .as_array()?
        .iter()
        .find(|g| g["slug"] == slug)
        .cloned()
}

#[tokio::test]
async fn a_cluster_guardrail_lives_on_the_admin_plane_and_waits_for_configs_of_any_namespace() {
    let h = Harness::start_with_secret_namespace("cgr-life", Duration::from_secs(1)).await;
    // The harness's operator reads Connection Secrets (and so a ClusterGuardrail's) in the test
    // namespace.
    put_secret(&h, SECRET_VALUE).await;
    let mut spec = guardrail_spec("org-pii");
    spec.as_object_mut().unwrap().remove("workspaceId");
    let cluster = Api::<ClusterGuardrail>::all(h.env.client.clone());
    let name = h.cluster_name("org-pii");
    h.create_cluster::<ClusterGuardrail>("org-pii", spec).await;
    // The operator's namespace also holds Connection credentials: a cluster-scoped resource
    // reads only the Secrets labelled for it there, and sends nothing until then.
    let message = stalled_message(
        &cluster,
        &name,
        "SecretNotReadable",
        "an unlabelled Secret is refused",
    )
    .await;
    assert!(message.contains("aigw.io/cluster-readable"), "{message}");
    assert_eq!(h.remote_writes().await, 0, "nothing sent without the label");
    let label = json!({"metadata": {"labels": {"aigw.io/cluster-readable": "true"}}});
    h.env
        .api::<Secret>()
        .patch("airs", &PatchParams::default(), &Patch::Merge(&label))
        .await
        .unwrap();
    let ready = support::wait_until(WAIT, || async {
        let g = cluster.get_opt(&name).await.ok()??;
        g.ready().then_some(g)
    })
    .await
    .unwrap_or_else(|| panic!("ClusterGuardrail {name} never became Ready"));
    let slug = ready.status.unwrap().slug.expect("a slug");
    assert_eq!(h.count("POST /ai_gw/admin/v2/guardrails").await, 1);
    assert_eq!(h.count("POST /ai_gw/v2/guardrails").await, 0);
    let listed = org_guardrail(&h, &slug)
        .await
        .expect("an organisation guardrail");
    assert!(listed["workspace_id"].is_null(), "{listed}");
    let stored = remote(&h, &slug).await.unwrap();
    assert_eq!(
        stored["checks"][1]["parameters"]["api_key"], SECRET_VALUE,
        "the Secret's value reached the API"
    );

    // Steady state is the conformance matrix's (`cluster_guardrail`).
    h.reset_stats().await;

    // A team's Guardrail cannot adopt the organisation guardrail: it stalls and writes nothing.
    let mut adopting = guardrail_spec("org-pii");
    adopting["slug"] = json!(slug);
    adopting["secretRefs"] = json!([]);
    support::objects::create::<Guardrail>(&h.env, "takeover", adopting).await;
    let message = h
        .condition_message::<Guardrail>("takeover", WAIT, ("Stalled", "InvalidSpec"))
        .await;
    assert!(message.contains("organisation guardrail"), "{message}");
    h.env.delete_and_wait::<Guardrail>("takeover", WAIT).await;
    assert_eq!(h.remote_writes().await, 0, "the takeover wrote nothing");
    assert!(
        org_guardrail(&h, &slug).await.is_some(),
        "and deleted nothing"
    );

    // A Config of the test namespace names it by resource.
    let config = json!({"name": "uses-org", "config": {"targets": [{"provider": "@openai"}]},
        "resourceRefs": [{"path": "/input_guardrails/0", "kind": "ClusterGuardrail", "name": name}]});
    support::objects::create::<Config>(&h.env, "uses-org", config).await;
    let config_slug = h.env.ready_config_slug("uses-org", WAIT).await;
    let document = h.get(&format!("/ai_gw/v2/configs/{config_slug}")).await;
    let document: Value = serde_json::from_str(document["config"].as_str().unwrap()).unwrap();
    assert_eq!(document["input_guardrails"][0], slug, "{document}");

    // Deleting it waits for that Config, naming it with its namespace.
    cluster.delete(&name, &Default::default()).await.unwrap();
    let message = stalled_message(
        &cluster,
        &name,
        "StillReferenced",
        "the deletion waits for the Config",
    )
    .await;
    assert!(
        message.contains(&format!("{}/uses-org", h.env.namespace)),
        "{message}"
    );
    assert!(
        org_guardrail(&h, &slug).await.is_some(),
        "not deleted while named"
    );

    h.env.delete_and_wait::<Config>("uses-org", WAIT).await;
    let gone = support::wait_until(Duration::from_secs(60), || async {
        cluster.get_opt(&name).await.ok()?.is_none().then_some(())
    })
    .await;
    assert!(
        gone.is_some(),
        "the ClusterGuardrail went once no Config named it"
    );
    assert!(org_guardrail(&h, &slug).await.is_none(), "deleted remotely");
    assert_eq!(
        h.count("DELETE /ai_gw/admin/v2/guardrails/{guardrailId}")
            .await,
        1
    );

    let events = h.env.events_text().await;
    let logs = captured_logs();
    assert!(!events.contains(SECRET_VALUE), "a Secret value in an event");
    assert!(!logs.contains(SECRET_VALUE), "a Secret value in the logs");
    h.stop().await;
}

#[tokio::test]
async fn a_namespaced_user_cannot_create_a_cluster_guardrail() {
    let env = support::TestEnv::new("cgr-rbac").await;
    let user = format!("{}-dev", env.namespace);
    // Everything aigw serves in the namespace: the RBAC a team gets for its own namespace.
    env.create_from::<Role>(json!({
        "metadata": {"name": "aigw-editor"},
        "rules": [{"apiGroups": ["aigw.io"], "resources": ["*"], "verbs": ["*"]}]
    }))
    .await;
    env.create_from::<RoleBinding>(json!({
        "metadata": {"name": "aigw-editor"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "aigw-editor"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]
    }))
    .await;
    let as_user = support::impersonating(&user).await;
    let guardrails = Api::<Guardrail>::namespaced(as_user.clone(), &env.namespace);
    // The apiserver's authorizer learns a new RoleBinding from its watch: until it has, the
    // team's requests are refused whatever they ask for.
    let allowed = support::wait_until(Duration::from_secs(30), || async {
        guardrails.list(&Default::default()).await.ok()
    })
    .await;
    assert!(allowed.is_some(), "the team's Role never took effect");

    let mut spec = guardrail_spec("team-pii");
    spec["secretRefs"] = json!([]);
    guardrails
        .create(
            &PostParams::default(),
            &object("Guardrail", "team-pii", spec.clone()),
        )
        .await
        .expect("the team may create a Guardrail in its namespace");
    spec.as_object_mut().unwrap().remove("workspaceId");
    let refused = Api::<ClusterGuardrail>::all(as_user)
        .create(
            &PostParams::default(),
            &object("ClusterGuardrail", &format!("{}-org", env.namespace), spec),
        )
        .await;
    match refused {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 403, "{status:?}"),
        other => panic!("a namespaced user created a ClusterGuardrail: {other:?}"),
    }
    env.cleanup().await;
}

/// An MCP integration enabled for `workspace` and `names` servers of it: their UUIDs.
async fn mcp_servers(h: &Harness, workspace: &str, names: &[&str]) -> Vec<String> {
    let integrations = "/ai_gw/admin/v2/mcp-integrations";
    h.post(
        integrations,
        json!({"organisation_id": "1234567890", "name": "Linear", "slug": "linear",
                    "url": "https://mcp.linear.app/mcp", "auth_type": "none", "transport": "http"}),
    )
    .await;
    h.put(
        &format!("{integrations}/linear/workspaces"),
        json!({"workspaces": [{"id": workspace, "enabled": true}]}),
    )
    .await;
    let mut ids = Vec::new();
    for name in names {
        let receipt = h
            .post(
                "/ai_gw/v2/mcp-servers",
                json!({"name": name, "mcp_integration_id": "linear", "workspace_id": workspace}),
            )
            .await;
        ids.push(receipt["id"].as_str().expect("a server id").to_string());
    }
    ids
}

/// The servers the API maps guardrail `key` to, sorted.
async fn mapped(h: &Harness, key: &str) -> Vec<String> {
    let listed = h
        .get(&format!("/ai_gw/v2/guardrails/{key}/mcp-servers"))
        .await;
    let mut servers: Vec<String> = listed["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["mcp_server_id"].as_str().map(str::to_string))
        .collect();
    servers.sort();
    servers
}

/// `spec.mcpServers` is the complete set: made with one bulk write, a mapping added in the
/// console is removed with one more, and nothing is written at steady state; a server of
/// another workspace is refused before any write.
#[tokio::test]
async fn a_guardrails_mcp_servers_are_the_full_set() {
    let h = Harness::start_with("gr-mcp", Duration::from_secs(1)).await;
    let workspace = default_workspace(&h).await;
    let servers = mcp_servers(&h, &workspace, &["tickets", "wiki"]).await;
    let spec = json!({"name": "tools", "workspaceId": workspace, "target": "mcp_tools",
        "checks": [{"id": "default.regexMatch", "parameters": {"rule": "\\d{16}"}}],
        "mcpServers": [{"id": servers[0], "runOn": ["input"]}]});
    support::objects::create::<Guardrail>(&h.env, "tools", spec).await;
    let ready = h.wait_for::<Guardrail>("tools", WAIT, |g| g.ready()).await;
    let id = ready.status.unwrap().id.expect("the guardrail's id");
    assert_eq!(mapped(&h, &id).await, [servers[0].clone()]);
    h.assert_count(GUARDRAIL_MCP_SERVERS_PUT, 1).await;

    // The console maps another server: one bulk write takes it off again.
    h.put(
        &format!("/ai_gw/v2/guardrails/{id}/mcp-servers/{}", servers[1]),
        json!({}),
    )
    .await;
    let restored = support::wait_until(WAIT, || async {
        (mapped(&h, &id).await == [servers[0].clone()]).then_some(())
    })
    .await;
    assert!(restored.is_some(), "{}", h.env.events_text().await);
    assert_eq!(
        h.count(GUARDRAIL_MCP_SERVERS_PUT).await,
        2,
        "one bulk write removed it"
    );
    let writes = assert_steady(&h, Duration::from_secs(4)).await;
    assert_eq!(
        puts(&h).await,
        0,
        "the guardrail itself was never rewritten"
    );

    // `aigw plan` compares the set as the operator does: the applied one is no change, another
    // is an update of `mcpServers`; a plan writes nothing.
    let applied = h.env.api::<Guardrail>().get("tools").await.unwrap();
    for (wanted, exit) in [
        (json!([{"id": servers[0], "runOn": ["input"]}]), 0),
        (json!([{"id": servers[1]}]), 2),
    ] {
        let mut manifest = applied.clone();
        manifest.metadata = kube::api::ObjectMeta {
            name: Some("tools".into()),
            namespace: Some(h.env.namespace.clone()),
            ..Default::default()
        };
        manifest.status = None;
        manifest.spec.definition.mcp_servers = Some(serde_json::from_value(wanted).unwrap());
        let (code, report) = plan(&h, &serde_yaml::to_string(&manifest).unwrap()).await;
        assert_eq!(code, exit, "{report}");
        assert_eq!(report.contains("mcpServers"), exit == 2, "{report}");
    }
    assert_eq!(h.remote_writes().await, writes, "a plan writes nothing");

    // A server the guardrail's workspace does not have: refused, nothing written.
    let mut foreign = h.env.api::<Guardrail>().get("tools").await.unwrap();
    foreign.spec.definition.mcp_servers = Some(vec![
        serde_json::from_value(json!({"id": "0b7c1d2e-3f40-4a5b-8c6d-7e8f9a0b1c2d"})).unwrap(),
    ]);
    foreign.metadata.managed_fields = None;
    h.env
        .api::<Guardrail>()
        .replace("tools", &PostParams::default(), &foreign)
        .await
        .unwrap();
    let message = h
        .condition_message::<Guardrail>("tools", WAIT, ("Stalled", "McpServerNotInWorkspace"))
        .await;
    assert!(message.contains("0b7c1d2e"), "{message}");
    assert_eq!(
        h.count(GUARDRAIL_MCP_SERVERS_PUT).await,
        2,
        "no write for it"
    );
    assert_eq!(mapped(&h, &id).await, [servers[0].clone()]);
    h.stop().await;
}

/// A ClusterGuardrail's `spec.mcpServers` is written on the admin plane, with one bulk write,
/// and may name a server of any workspace.
#[tokio::test]
async fn a_cluster_guardrails_mcp_servers_are_written_on_the_admin_plane() {
    let h = Harness::start_with("cgr-mcp", Duration::from_secs(1)).await;
    let workspace = default_workspace(&h).await;
    let servers = mcp_servers(&h, &workspace, &["tickets"]).await;
    let spec = json!({"name": "org-tools", "target": "mcp_tools",
        "checks": [{"id": "default.regexMatch", "parameters": {"rule": "\\d{16}"}}],
        "mcpServers": [{"id": servers[0]}]});
    let cluster = Api::<ClusterGuardrail>::all(h.env.client.clone());
    let name = h.cluster_name("org-tools");
    h.create_cluster::<ClusterGuardrail>("org-tools", spec)
        .await;
    let ready = support::wait_until(WAIT, || async {
        let g = cluster.get_opt(&name).await.ok()??;
        g.ready().then_some(g)
    })
    .await
    .expect("the ClusterGuardrail is Ready");
    let id = ready.status.unwrap().id.expect("its id");
    let listed = h
        .get(&format!("/ai_gw/admin/v2/guardrails/{id}/mcp-servers"))
        .await;
    assert_eq!(listed["total"], 1, "{listed}");
    assert_eq!(listed["data"][0]["mcp_server_id"], servers[0].as_str());
    assert_eq!(listed["data"][0]["run_on"], json!(["input", "output"]));
    assert_eq!(
        h.count("PUT /ai_gw/admin/v2/guardrails/{guardrailId}/mcp-servers")
            .await,
        1
    );
    assert_eq!(
        h.count(GUARDRAIL_MCP_SERVERS_PUT).await,
        0,
        "not on the workspace plane"
    );
    assert_steady(&h, Duration::from_secs(3)).await;
    h.stop().await;
}

/// `aigw plan` of `manifest` against the harness's emulator and cluster: its exit code and what
/// it printed.
async fn plan(h: &Harness, manifest: &str) -> (i32, String) {
    let (code, report) = h.plan("manifest.yaml", manifest).await;
    (code.expect("aigw was killed"), report)
}
