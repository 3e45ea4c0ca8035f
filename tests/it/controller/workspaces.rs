//! Workspace (cluster-scoped) on a real kube-apiserver against the emulator over HTTP: created
//! in three calls (an IAM scope carrying the resource's owner token, the workspace naming it,
//! the scope bound to the slug), each exactly once even when its answer is lost after the
//! commit; a scope that is not the resource's is never written; drift of the settings and of
//! the binding is corrected with one write; the archive waits while aigw objects name the
//! workspace (`StillReferenced`) and then deletes the scope; the default workspace is adopted
//! and observed, never archived.

use crate::support;

use std::time::Duration;

use aigw::resources::{Config, Workspace};
use kube::api::{Api, DeleteParams};
use serde_json::{Value, json};
use support::endpoints::{
    CONFIG_POST, SCOPE_DELETE, SCOPE_POST, SCOPE_PUT, WORKSPACE_DELETE, WORKSPACE_POST,
    WORKSPACE_PUT,
};
use support::harness::Harness;
use support::objects::Conditions;

const WAIT: Duration = Duration::from_secs(40);

fn api(h: &Harness) -> Api<Workspace> {
    Api::all(h.env.client.clone())
}

async fn create(h: &Harness, name: &str, spec: Value) {
    h.create_cluster::<Workspace>(name, spec).await;
}

async fn wait_gone(h: &Harness, name: &str) {
    h.wait_cluster_gone::<Workspace>(name, WAIT).await;
}

/// The emulator's workspaces (archived ones too) and IAM scopes.
async fn workspaces(h: &Harness) -> Vec<Value> {
    h.state().await["workspaces"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

async fn scope(h: &Harness, name: &str) -> Option<Value> {
    h.state().await["scopes"]
        .as_array()?
        .iter()
        .find(|s| s["name"] == name)
        .cloned()
}

fn binds(scope: &Value, slug: &str) -> bool {
    scope["resources"].as_array().is_some_and(|r| {
        r.iter()
            .any(|r| r["resource_type"] == "workspace" && r["resource_id"] == slug)
    })
}

/// Merge-patches this test's Workspace `name` with `patch`.
async fn patch_workspace(h: &Harness, name: &str, patch: Value) {
    support::merge_patch(&api(h), &h.cluster_name(name), patch).await;
}

/// Deletes the Workspace `workspace` that the Config `config` names: its archive waits,
/// naming the Config, until the Config is deleted; then it goes.
async fn archived_once_config_lets_go(h: &Harness, workspace: &str, config: &str) {
    h.delete_cluster::<Workspace>(workspace).await;
    let message = h
        .cluster_condition_message::<Workspace>(workspace, WAIT, ("Stalled", "StillReferenced"))
        .await;
    let holder = format!("Config {}/{config}", h.env.namespace);
    assert!(message.contains(&holder), "{message}");
    assert_eq!(h.count(WORKSPACE_DELETE).await, 0, "archived while named");
    h.env
        .api::<Config>()
        .delete(config, &DeleteParams::default())
        .await
        .unwrap();
    wait_gone(h, workspace).await;
}

/// The remote workspace whose `key` is `value`.
async fn remote_workspace(h: &Harness, key: &str, value: &str) -> Value {
    workspaces(h)
        .await
        .into_iter()
        .find(|w| w[key] == value)
        .unwrap()
}

/// Deletes the Configs `names`.
async fn delete_configs(configs: &Api<Config>, names: &[&str]) {
    for name in names {
        configs
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
}

/// A harness whose Connection grants the namespace the Workspace resource `team` (created).
async fn with_team_granted(prefix: &str) -> Harness {
    let grants = json!([{"namespaces": ["{ns}"], "workspaces": ["{ns}-team"]}]);
    let h = Harness::start_with_grants(prefix, Duration::from_secs(1), grants).await;
    create(&h, "team", json!({"name": "Team"})).await;
    h
}

/// The status of a Ready Workspace: its id, slug and scope name.
fn recorded(workspace: &Workspace) -> (String, String, String) {
    let status = workspace.status.clone().unwrap();
    (
        status.id.unwrap(),
        status.slug.unwrap(),
        status.scope_name.unwrap(),
    )
}

#[tokio::test]
async fn a_workspace_is_made_in_three_calls_kept_in_line_and_archived_once_nothing_names_it() {
    let h = Harness::start_with("ws-flow", Duration::from_secs(1)).await;
    let spec = json!({"name": "Payments", "description": "the payments team",
        "defaults": {"metadata": {"team": "payments"}},
        "usageLimits": [{"creditLimit": 500, "type": "cost", "periodicReset": "monthly"}],
        "rateLimits": [{"type": "requests", "unit": "rpm", "value": 600}]});
    create(&h, "pay", spec).await;
    let ready = h
        .wait_cluster::<Workspace>("pay", WAIT, |w| w.ready())
        .await;
    let (id, slug, scope_name) = recorded(&ready);

    // Scope, workspace, bind: one call each.
    assert_eq!(h.count(SCOPE_POST).await, 1, "{}", h.stats().await);
    assert_eq!(h.count(WORKSPACE_POST).await, 1, "{}", h.stats().await);
    assert_eq!(h.count(SCOPE_PUT).await, 1, "{}", h.stats().await);
    let made = scope(&h, &scope_name).await.expect("the scope");
    assert!(binds(&made, &slug), "{made}");
    assert!(
        made["description"]
            .as_str()
            .is_some_and(|d| d.contains("owner token hmac-sha256:")),
        "the scope carries the owner token: {made}"
    );
    assert!(scope_name.starts_with("ws_"), "{scope_name}");
    // Bound, it is visible on the data plane.
    let visible = h.get(&format!("/ai_gw/v2/workspaces/{slug}")).await;
    assert_eq!(visible["id"], id.as_str(), "{visible}");
    let remote = h.get(&format!("/ai_gw/admin/v2/workspaces/{id}")).await;
    assert_eq!(remote["defaults"]["metadata"], json!({"team": "payments"}));
    assert_eq!(remote["usage_limits"][0]["credit_limit"], 500);
    assert_eq!(remote["rate_limits"][0]["value"], 600);

    // Steady: no write.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let before = h.remote_writes().await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(h.remote_writes().await, before, "{}", h.stats().await);

    // A console edit of the settings: one PUT restores them.
    let puts = h.count(WORKSPACE_PUT).await;
    let path = format!("/ai_gw/admin/v2/workspaces/{id}");
    h.put(&path, json!({"description": "edited", "rate_limits": []}))
        .await;
    let restored = support::wait_until(WAIT, || async {
        let remote = h.get(&path).await;
        (remote["description"] == "the payments team" && remote["rate_limits"][0]["value"] == 600)
            .then_some(())
    })
    .await;
    assert!(restored.is_some(), "{}", h.cluster_events_text().await);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        h.count(WORKSPACE_PUT).await,
        puts + 2,
        "the edit and one correction"
    );

    // The binding removed in the console: one full replacement binds the slug again.
    let scope_path = format!("/iam/v1/scopes/{scope_name}");
    let description = made["description"].clone();
    h.put(
        &scope_path,
        json!({"name": scope_name, "description": description, "resources": []}),
    )
    .await;
    let rebound = support::wait_until(WAIT, || async {
        binds(&scope(&h, &scope_name).await?, &slug).then_some(())
    })
    .await;
    assert!(rebound.is_some(), "{}", h.cluster_events_text().await);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(h.count(SCOPE_PUT).await, 3, "the edit and one bind");

    // A Config of the cluster names the workspace: the archive waits, naming it.
    let mut holder = support::objects::routing("in-pay");
    holder["workspaceId"] = json!(id);
    holder["deletionPolicy"] = json!("Orphan");
    support::objects::create::<Config>(&h.env, "in-pay", holder).await;
    archived_once_config_lets_go(&h, "pay", "in-pay").await;
    let archived = remote_workspace(&h, "id", &id).await;
    assert_eq!(archived["status"], "archived");
    assert!(
        scope(&h, &scope_name).await.is_none(),
        "its scope is deleted"
    );
    assert_eq!(h.count(WORKSPACE_DELETE).await, 1);
    assert_eq!(h.count(SCOPE_DELETE).await, 1);
    h.stop().await;
}

/// Each of the three calls loses its answer after the emulator committed it: the flow resumes
/// with no second scope, workspace or bind.
#[tokio::test]
async fn a_lost_answer_on_each_of_the_three_calls_is_recovered_without_a_duplicate() {
    let h = Harness::start_with("ws-lost", Duration::from_secs(1)).await;
    for (n, lost) in [SCOPE_POST, WORKSPACE_POST, SCOPE_PUT]
        .into_iter()
        .enumerate()
    {
        let name = format!("lost-{n}");
        let before = h.stats().await;
        let count = |stats: &Value, endpoint: &str| support::harness::count_in(stats, endpoint);
        h.faults(json!({"drop_after_commit_once": [lost]})).await;
        create(&h, &name, json!({"name": format!("Lost {n}")})).await;
        let ready = h
            .wait_cluster::<Workspace>(&name, WAIT, |w| w.ready())
            .await;
        let (id, slug, scope_name) = recorded(&ready);
        let faults = h.get("/_emulator/faults").await;
        assert!(
            faults.get("drop_after_commit_once").is_none(),
            "{lost}: the answer was not lost: {faults}"
        );
        let after = h.stats().await;
        for endpoint in [SCOPE_POST, WORKSPACE_POST, SCOPE_PUT] {
            assert_eq!(
                count(&after, endpoint) - count(&before, endpoint),
                1,
                "{lost} lost: {endpoint} sent again: {after}"
            );
        }
        let mine: Vec<Value> = workspaces(&h)
            .await
            .into_iter()
            .filter(|w| w["scope_name"] == scope_name.as_str())
            .collect();
        assert_eq!(mine.len(), 1, "{lost} lost: {mine:?}");
        assert_eq!(mine[0]["id"], id.as_str());
        let made = scope(&h, &scope_name).await.expect("the scope");
        assert!(binds(&made, &slug), "{lost} lost: {made}");
        let status = ready.status.unwrap();
        assert!(status.pending_create.is_none() && status.create_attempt.is_none());
    }
    h.stop().await;
}

/// A scope that lost the owner token is not the resource's: it is neither bound nor deleted.
#[tokio::test]
async fn a_scope_without_the_owner_token_is_never_written() {
    let h = Harness::start_with("ws-foreign", Duration::from_secs(1)).await;
    create(&h, "ops", json!({"name": "Ops"})).await;
    let ready = h
        .wait_cluster::<Workspace>("ops", WAIT, |w| w.ready())
        .await;
    let (_, slug, scope_name) = recorded(&ready);
    // Someone else now holds the scope: another description, no binding.
    let foreign =
        json!({"name": scope_name, "description": "the platform team's", "resources": []});
    h.put(&format!("/iam/v1/scopes/{scope_name}"), foreign)
        .await;
    let puts = h.count(SCOPE_PUT).await;
    let message = h
        .cluster_condition_message::<Workspace>("ops", WAIT, ("Stalled", "ScopeNotOwned"))
        .await;
    assert!(message.contains(&scope_name), "{message}");
    h.delete_cluster::<Workspace>("ops").await;
    wait_gone(&h, "ops").await;
    let kept = scope(&h, &scope_name)
        .await
        .expect("the foreign scope stays");
    assert_eq!(kept["description"], "the platform team's");
    assert!(!binds(&kept, &slug));
    assert_eq!(
        h.count(SCOPE_PUT).await,
        puts,
        "a foreign scope was written"
    );
    assert_eq!(h.count(SCOPE_DELETE).await, 0);
    h.stop().await;
}

#[tokio::test]
async fn the_default_workspace_is_adopted_and_observed_but_never_archived() {
    let h = Harness::start_with("ws-default", Duration::from_secs(1)).await;
    let default = workspaces(&h)
        .await
        .into_iter()
        .find(|w| w["is_default"] == 1)
        .expect("the default workspace");
    let slug = default["slug"].as_str().unwrap().to_string();
    create(&h, "default", json!({"slug": slug, "name": "Default"})).await;
    let ready = h
        .wait_cluster::<Workspace>("default", WAIT, |w| w.ready())
        .await;
    let status = ready.status.clone().unwrap();
    assert!(status.is_default);
    assert_eq!(status.slug.as_deref(), Some(slug.as_str()));
    assert_eq!(h.remote_writes().await, 0, "{}", h.stats().await);

    // Observe reports a difference and writes nothing.
    let patch = json!({"spec": {"description": "the organisation", "managementPolicy": "Observe"}});
    patch_workspace(&h, "default", patch).await;
    let drifted = h
        .wait_cluster::<Workspace>("default", WAIT, |w| w.is_true("Drifted"))
        .await;
    let (_, _, message) = drifted.condition("Drifted").unwrap();
    assert!(message.contains("description"), "{message}");
    let back = json!({"spec": {"managementPolicy": "Full", "description": null}});
    patch_workspace(&h, "default", back).await;
    h.wait_cluster::<Workspace>("default", WAIT, |w| w.ready())
        .await;

    // Deleting with deletionPolicy Delete is refused; Orphan lets it go and leaves it.
    h.delete_cluster::<Workspace>("default").await;
    let message = h
        .cluster_condition_message::<Workspace>("default", WAIT, ("Stalled", "DefaultWorkspace"))
        .await;
    assert!(message.contains("deletionPolicy: Orphan"), "{message}");
    let orphan = json!({"spec": {"deletionPolicy": "Orphan"}});
    patch_workspace(&h, "default", orphan).await;
    wait_gone(&h, "default").await;
    let kept = remote_workspace(&h, "slug", &slug).await;
    assert_eq!(kept["status"], "active");
    assert_eq!(h.count(WORKSPACE_DELETE).await, 0);
    assert_eq!(h.remote_writes().await, 0, "{}", h.stats().await);
    h.stop().await;
}

/// A workspace made in the console, exported by `aigw export` and applied: adopted with no write.
#[tokio::test]
async fn an_exported_workspace_is_adopted_without_a_write() {
    let h = Harness::start_with("ws-export", Duration::from_secs(1)).await;
    let scope_name = format!("ws_console_{}", h.env.namespace.replace('-', "_"));
    h.post(
        "/iam/v1/scopes",
        json!({"name": scope_name, "description": ""}),
    )
    .await;
    let made = h
        .post(
            "/ai_gw/admin/v2/workspaces",
            json!({"name": "Console made", "scope_name": scope_name, "icon": "🧪",
                "description": "made in the console",
                "defaults": {"metadata": {"team": "lab"}},
                "usage_limits": [{"credit_limit": 250, "type": "tokens", "alert_threshold": 200,
                                  "periodic_reset": "weekly"}],
                "rate_limits": [{"type": "tokens", "unit": "rph", "value": 90000}]}),
        )
        .await;
    let slug = made["slug"].as_str().expect("the slug").to_string();

    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, support::harness::TOKEN).unwrap();
    let out = dir.path().join("export");
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_aigw"));
    command
        .args(["export", "--out"])
        .arg(&out)
        .args(["--management-url", &h.emulator.management_url()])
        .arg("--token-file")
        .arg(&token);
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .expect("aigw runs");
    assert!(output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("the organisation's default workspace"),
        "{stderr}"
    );
    let text = support::cli::exported_manifest(&out, "Workspace", &slug);
    let mut exported: Value = serde_yaml::from_str(&text).unwrap();
    h.adopts_export::<Workspace>("exported", exported["spec"].take(), &slug)
        .await;
    h.stop().await;
}

/// `defaults.configRef` names a Config that can live only in the workspace once it exists: the
/// workspace is created without it (ReferenceNotReady), and the default is set with one PUT once
/// the Config recorded its config.
#[tokio::test]
async fn a_default_config_in_the_workspace_is_set_once_its_config_is_ready() {
    let h = Harness::start_with("ws-defcfg", Duration::from_secs(1)).await;
    let spec = json!({"name": "Routing", "defaults": {
        "configRef": {"namespace": h.env.namespace, "name": "main"},
        "metadata": {"team": "routing"}}});
    create(&h, "routing", spec).await;
    let waiting = h
        .wait_cluster::<Workspace>("routing", WAIT, |w| {
            w.not_ready_with("ReferenceNotReady")
                && w.status.as_ref().is_some_and(|s| s.id.is_some())
        })
        .await;
    let (id, _, _) = recorded(&waiting);
    let (_, _, message) = waiting.condition("Ready").unwrap();
    assert!(message.contains("Config"), "{message}");
    let path = format!("/ai_gw/admin/v2/workspaces/{id}");
    let remote = h.get(&path).await;
    assert_eq!(remote["defaults"]["config_id"], Value::Null, "{remote}");
    assert_eq!(remote["defaults"]["metadata"], json!({"team": "routing"}));
    let puts = h.count(WORKSPACE_PUT).await;

    let mut config = support::objects::routing("main");
    config["workspaceId"] = json!(id);
    config["deletionPolicy"] = json!("Orphan");
    support::objects::create::<Config>(&h.env, "main", config).await;
    let config = h.wait_for::<Config>("main", WAIT, |c| c.ready()).await;
    let config_id = config.status.unwrap().id.expect("the config's id");
    h.wait_cluster::<Workspace>("routing", WAIT, |w| w.ready())
        .await;
    let remote = h.get(&path).await;
    assert_eq!(
        remote["defaults"]["config_id"],
        config_id.as_str(),
        "{remote}"
    );
    assert_eq!(remote["defaults"]["metadata"], json!({"team": "routing"}));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        h.count(WORKSPACE_PUT).await,
        puts + 1,
        "one PUT sets the default"
    );
    h.env.delete::<Config>("main").await;
    h.stop().await;
}

/// A Connection grant may name a Workspace resource: it stands for the workspace that resource
/// recorded (its UUID), and for no other.
#[tokio::test]
async fn a_grant_naming_a_workspace_resource_lets_a_namespace_into_that_workspace_only() {
    let h = with_team_granted("ws-grant").await;
    let ready = h
        .wait_cluster::<Workspace>("team", WAIT, |w| w.ready())
        .await;
    let (id, _, _) = recorded(&ready);
    let configs: Api<Config> = h.env.api();
    for (name, workspace) in [("inside", id.as_str()), ("outside", OUTSIDE)] {
        let mut spec = support::objects::routing(name);
        spec["workspaceId"] = json!(workspace);
        spec["deletionPolicy"] = json!("Orphan");
        support::objects::create::<Config>(&h.env, name, spec).await;
    }
    h.wait_for::<Config>("inside", WAIT, |c| c.ready()).await;
    let message = h
        .condition_message::<Config>("outside", WAIT, ("Stalled", "WorkspaceNotAllowed"))
        .await;
    assert!(message.contains(OUTSIDE), "{message}");
    delete_configs(&configs, &["inside", "outside"]).await;
    h.stop().await;
}

const OUTSIDE: &str = "0b7c1d2e-3f40-4a5b-8c6d-7e8f9a0b1c2d";

/// A Config names its workspace by resource (`spec.workspaceRef`): it waits
/// (`WorkspaceNotReady`, no call) until the Workspace is Ready, is then created with one POST in
/// the workspace that Workspace recorded, and holds the Workspace's archive while it names it
/// (`StillReferenced`).
#[tokio::test]
async fn a_config_naming_its_workspace_by_resource_waits_then_is_created_once_in_it() {
    let h = Harness::start_with("ws-ref", Duration::from_secs(1)).await;
    let configs: Api<Config> = h.env.api();
    let mut spec = support::objects::routing("by-ref");
    spec["workspaceRef"] = json!({"name": h.cluster_name("later")});
    spec["deletionPolicy"] = json!("Orphan");
    support::objects::create::<Config>(&h.env, "by-ref", spec).await;
    let message = h
        .condition_message::<Config>("by-ref", WAIT, ("Stalled", "WorkspaceNotReady"))
        .await;
    assert!(message.contains("spec.workspaceRef"), "{message}");
    assert_eq!(h.count(CONFIG_POST).await, 0, "no write while it waits");

    create(&h, "later", json!({"name": "Later"})).await;
    let ready = h
        .wait_cluster::<Workspace>("later", WAIT, |w| w.ready())
        .await;
    let (id, _, _) = recorded(&ready);
    let config = h.wait_for::<Config>("by-ref", WAIT, |c| c.ready()).await;
    let slug = config.status.unwrap().slug.expect("the config's slug");
    let remote = h.get(&format!("/ai_gw/v2/configs/{slug}")).await;
    assert_eq!(remote["workspace_id"], id.as_str(), "{remote}");
    assert_eq!(h.count(CONFIG_POST).await, 1, "{}", h.stats().await);
    // The spec is as written: the resolved id lives only in what the reconcile acted on.
    let stored = configs.get("by-ref").await.unwrap();
    assert_eq!(stored.spec.workspace_id, None);
    let writes = h.remote_writes().await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(h.remote_writes().await, writes, "0 writes at steady state");

    // The Workspace's archive waits while the Config names it by resource.
    archived_once_config_lets_go(&h, "later", "by-ref").await;
    assert_eq!(h.count(WORKSPACE_DELETE).await, 1);
    h.stop().await;
}

/// A namespace whose grants allow one Workspace names another by resource: refused
/// (`WorkspaceNotAllowed`) before any write, the refusal naming the resource and not the
/// workspace it stands for; the granted one is created in.
#[tokio::test]
async fn a_workspace_named_by_resource_outside_the_grants_is_refused_before_any_write() {
    let h = with_team_granted("ws-refgrant").await;
    create(&h, "other", json!({"name": "Other"})).await;
    let team = h
        .wait_cluster::<Workspace>("team", WAIT, |w| w.ready())
        .await;
    let other = h
        .wait_cluster::<Workspace>("other", WAIT, |w| w.ready())
        .await;
    let (team_id, _, _) = recorded(&team);
    let (other_id, _, _) = recorded(&other);
    let configs: Api<Config> = h.env.api();
    for (name, workspace) in [("inside", "team"), ("outside", "other")] {
        let mut spec = support::objects::routing(name);
        spec["workspaceRef"] = json!({"name": h.cluster_name(workspace)});
        spec["deletionPolicy"] = json!("Orphan");
        support::objects::create::<Config>(&h.env, name, spec).await;
    }
    let slug = h.env.ready_config_slug("inside", WAIT).await;
    let remote = h.get(&format!("/ai_gw/v2/configs/{slug}")).await;
    assert_eq!(remote["workspace_id"], team_id.as_str(), "{remote}");
    let message = h
        .condition_message::<Config>("outside", WAIT, ("Stalled", "WorkspaceNotAllowed"))
        .await;
    assert!(message.contains("spec.workspaceRef"), "{message}");
    assert!(!message.contains(&other_id), "{message}");
    assert_eq!(h.count(CONFIG_POST).await, 1, "only the granted one");
    delete_configs(&configs, &["inside", "outside"]).await;
    h.stop().await;
}
