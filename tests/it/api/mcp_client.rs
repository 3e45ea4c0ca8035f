//! The typed client (`client.secret_references()`, `mcp_integrations()`, `mcp_servers()`,
//! `guardrail_mcp_servers()`) and `aigw api secret-references` / `mcp-integrations` /
//! `mcp-servers` / `guardrails *-mcp-servers` against the emulator over real HTTP: every
//! operation, checks made before sending, and no `auth_config` or MCP `configurations` value in
//! `Debug`, printed reads or errors.

use std::collections::BTreeMap;

use aigw::api::{
    CapabilityToggle, CreateMcpIntegrationRequest, CreateMcpServerRequest,
    CreateSecretReferenceRequest, GuardrailPlane, McpServerMappingTarget, McpServersListQuery,
    McpWorkspaceAccessUpdate, SecretMapping, SecretReferencesListQuery, SensitiveFields,
    SyncMcpServerMappingsRequest, UpdateCapabilitiesRequest, UpdateMcpIntegrationRequest,
    UpdateMcpServerRequest, UpdateMcpWorkspacesRequest, UpdateSecretReferenceRequest,
    UpdateUserAccessRequest, UserAccessUpdate,
};
use aigw::emulator::Running;
use serde_json::{Value, json};

use super::integrations_client::{TOKEN, aigw_api, client, control_json, echoing, emulator};
use crate::support::SendJson;

const AWS_SECRET: &str = "aws-ref-secret-Mn4Bv7Cx1Z";
const HEADER: &str = "Bearer mcp-header-Qe8Rt5Yu2I";

fn fields(value: Value) -> SensitiveFields {
    SensitiveFields(value.as_object().cloned().expect("an object"))
}

fn reference_request() -> CreateSecretReferenceRequest {
    CreateSecretReferenceRequest {
        name: "OpenAI key".into(),
        slug: Some("openai-key".into()),
        manager_type: "aws_sm".into(),
        auth_config: fields(
            json!({"aws_auth_type": "accessKey", "aws_access_key_id": "AKIA0000CLIENT",
                                   "aws_secret_access_key": AWS_SECRET, "aws_region": "eu-west-1"}),
        ),
        secret_path: "prod/openai".into(),
        organisation_id: Some("1234567890".into()),
        ..Default::default()
    }
}

fn mcp_request() -> CreateMcpIntegrationRequest {
    CreateMcpIntegrationRequest {
        name: "Linear".into(),
        slug: Some("linear".into()),
        url: "https://mcp.linear.app/mcp".into(),
        auth_type: "headers".into(),
        transport: "http".into(),
        configurations: Some(fields(json!({"custom_headers": {"Authorization": HEADER}}))),
        organisation_id: Some("1234567890".into()),
        ..Default::default()
    }
}

/// A guardrail `pii` of `workspace`, seeded; its id.
async fn seed_guardrail(emulator: &Running, workspace: &str) -> String {
    let seeded: Value = reqwest::Client::new()
        .post(format!("{}/_emulator/seed", emulator.management_url()))
        .json(&json!({"guardrails": [{"name": "pii", "workspace_id": workspace}]}))
        .json_value()
        .await;
    seeded["guardrails"][0]["id"].as_str().unwrap().to_owned()
}

/// The capabilities body enabling (or disabling) the tool `create_issue`.
fn toggle_create_issue(enabled: bool) -> String {
    json!({"capabilities": [{"name": "create_issue", "type": "tool", "enabled": enabled}]})
        .to_string()
}

async fn discover(emulator: &Running, integration: &str, tools: &[&str]) {
    let tools: Vec<Value> = tools.iter().map(|t| json!({"name": t})).collect();
    discovered(emulator, integration, json!({"tools": tools})).await;
}

/// Has the emulator's discovery of `integration` end with `outcome` (its tools, or an error).
async fn discovered(emulator: &Running, integration: &str, outcome: Value) {
    let response = reqwest::Client::new()
        .post(format!(
            "{}/_emulator/mcp-integrations/{integration}/discover",
            emulator.management_url()
        ))
        .json(&outcome)
        .send()
        .await
        .expect("discover");
    assert!(response.status().is_success());
}

#[tokio::test]
async fn the_client_covers_secret_references_mcp_and_mappings() {
    let emulator = emulator().await;
    let client = client(&emulator);
    let refs = client.secret_references();
    let request = reference_request();
    assert!(!format!("{request:?}").contains(AWS_SECRET));
    let created = refs.create(&request).await.unwrap();
    assert_eq!(created.slug, "openai-key");
    let read = refs.get("openai-key").await.unwrap();
    assert!(!format!("{read:?}").contains(AWS_SECRET));
    assert!(!serde_json::to_string(&read).unwrap().contains(AWS_SECRET));
    assert_eq!(read.allow_all_workspaces, Some(true));
    let listed = refs
        .list(&SecretReferencesListQuery {
            manager_type: Some("aws_sm".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    refs.update(
        &created.id,
        &UpdateSecretReferenceRequest {
            allowed_workspaces: Some(vec!["ws-payments".into()]),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(
        refs.get(&created.id).await.unwrap().allow_all_workspaces,
        Some(false)
    );
    // `aigw export` cannot state a reference (write-only auth_config, unread allowed
    // workspaces): it says so by slug, and writes none of its values anywhere.
    let exported = aigw::gitops::export::export(&client, &Default::default())
        .await
        .unwrap();
    crate::support::assert_any(&exported.skipped, |s| {
        s.starts_with("secret reference openai-key: ")
    });
    assert!(!format!("{:?}", exported.skipped).contains(AWS_SECRET));
    assert!(
        exported
            .files
            .iter()
            .all(|f| !f.content.contains(AWS_SECRET))
    );

    let mcp = client.mcp_integrations();
    let mut create = mcp_request();
    create.secret_mappings = Some(vec![SecretMapping {
        target_field: "configurations.oauth_metadata".into(),
        secret_reference_id: "openai-key".into(),
        secret_key: None,
        value_format: Some("json".into()),
    }]);
    let integration = mcp.create(&create).await.unwrap();
    let in_use = refs.delete("openai-key").await.unwrap_err();
    assert_eq!(in_use.status(), Some(400), "{in_use}");
    assert!(!in_use.to_string().contains(AWS_SECRET));
    let detail = mcp.get("linear").await.unwrap();
    assert!(!format!("{detail:?}").contains("Qe8Rt5Yu2I"));
    assert_eq!(detail.secret_mappings.as_ref().map(Vec::len), Some(1));
    let rows = mcp.list().await.unwrap();
    assert!(
        rows[0]
            .configurations
            .as_ref()
            .is_some_and(|c| c.0.is_string())
    );
    mcp.update(
        "linear",
        &UpdateMcpIntegrationRequest {
            secret_mappings: Some(vec![]),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    refs.delete("openai-key").await.unwrap();
    assert!(refs.get(&created.id).await.unwrap_err().is_not_found());

    let state = control_json(&emulator, "state").await;
    let workspace = state["default_workspace_id"].as_str().unwrap().to_owned();
    mcp.update_workspaces(
        &integration.id,
        &UpdateMcpWorkspacesRequest {
            workspaces: vec![McpWorkspaceAccessUpdate {
                id: workspace.clone(),
                enabled: true,
            }],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let access = mcp.workspaces("linear").await.unwrap();
    assert!(access.workspaces[0].enabled);

    let toggle = UpdateCapabilitiesRequest {
        capabilities: vec![CapabilityToggle {
            name: "create_issue".into(),
            kind: "tool".into(),
            enabled: false,
        }],
    };
    let pending = mcp
        .update_capabilities("linear", &toggle)
        .await
        .unwrap_err();
    assert_eq!(pending.status(), Some(400), "not discovered yet: {pending}");
    assert_eq!(
        mcp.metadata("linear").await.unwrap()["sync_status"],
        "pending"
    );
    discover(&emulator, "linear", &["create_issue", "list_issues"]).await;
    mcp.update_capabilities("linear", &toggle).await.unwrap();
    let caps = mcp.capabilities("linear", Some("tool")).await.unwrap();
    assert_eq!(caps.page.data.len(), 2);
    assert!(!caps.page.data[0].enabled);

    let servers = client.mcp_servers();
    let server = servers
        .create(&CreateMcpServerRequest {
            name: "Linear".into(),
            mcp_integration_id: "linear".into(),
            workspace_id: Some(workspace.clone()),
            slug: Some("linear-ws".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    let detail = servers.get(&server.id).await.unwrap();
    assert!(detail.workspace_id.is_none(), "the detail omits it");
    let listed = servers
        .list(&McpServersListQuery {
            workspace_id: Some(workspace.clone()),
            ids: vec![server.id.clone()],
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(listed[0].workspace_id.as_deref(), Some(workspace.as_str()));
    let rename = UpdateMcpServerRequest {
        name: Some("Linear tickets".into()),
        ..Default::default()
    };
    let renamed = servers.update(&server.id, &rename).await.unwrap();
    assert_eq!(renamed.slug, "linear-ws");
    assert!(
        servers
            .test(&server.id)
            .await
            .unwrap_err()
            .http()
            .is_some_and(|h| h.opa_denied)
    );
    assert_eq!(
        servers
            .delete_connections(&server.id)
            .await
            .unwrap_err()
            .status(),
        Some(403)
    );
    assert_eq!(
        servers.connections(&server.id).await.unwrap().total,
        Some(0)
    );
    let deny = UpdateUserAccessRequest {
        default_user_access: Some("deny".into()),
        ..Default::default()
    };
    servers.update_user_access(&server.id, &deny).await.unwrap();
    assert_eq!(
        servers
            .user_access(&server.id)
            .await
            .unwrap()
            .default_user_access,
        "deny"
    );
    // Past one page (500 rows): the read follows `has_more`, so a user on page 2 is seen.
    for batch in 0..2 {
        let rows = (0..300)
            .map(|i| UserAccessUpdate {
                user_id: format!("user-{}", batch * 300 + i),
                enabled: i % 2 == 0,
            })
            .collect();
        let request = UpdateUserAccessRequest {
            user_access: rows,
            ..Default::default()
        };
        servers
            .update_user_access(&server.id, &request)
            .await
            .unwrap();
    }
    let all = servers.user_access(&server.id).await.unwrap();
    assert_eq!(all.page.data.len(), 600, "every page is read");
    assert!(all.page.data.iter().any(|r| r["user_id"] == "user-599"));
    let server_caps = servers.capabilities(&server.id, None).await.unwrap();
    assert_eq!(server_caps.page.data[0].integration_enabled, Some(false));
    servers
        .update_capabilities(&server.id, &toggle)
        .await
        .unwrap();

    let guardrail = seed_guardrail(&emulator, &workspace).await;
    let mappings = client.guardrail_mcp_servers(GuardrailPlane::Workspace);
    let set = SyncMcpServerMappingsRequest {
        mcp_servers: BTreeMap::from([(
            server.id.clone(),
            McpServerMappingTarget {
                run_on: None,
                mcp_integration_capability_ids: vec![],
            },
        )]),
    };
    let synced = mappings.sync(&guardrail, &set).await.unwrap();
    assert_eq!((synced.changed, synced.added), (true, 1));
    let listed = mappings.list(&guardrail).await.unwrap();
    assert_eq!(listed[0].mcp_server_id, server.id);
    assert_eq!(listed[0].run_on, ["input", "output"]);
    let written = client
        .guardrail_mcp_servers(GuardrailPlane::Organisation)
        .upsert(
            &guardrail,
            &server.id,
            &McpServerMappingTarget {
                run_on: Some(vec!["input".into()]),
                mcp_integration_capability_ids: vec![],
            },
        )
        .await
        .unwrap();
    assert_eq!(written.map_id, listed[0].id, "the same mapping, updated");
    let cleared = mappings
        .sync(&guardrail, &SyncMcpServerMappingsRequest::default())
        .await
        .unwrap();
    assert_eq!(cleared.removed, 1);
    servers.delete(&server.id).await.unwrap();
    mcp.delete("linear").await.unwrap();
    assert!(mcp.get("linear").await.unwrap_err().is_not_found());
}

#[tokio::test]
async fn the_cli_never_prints_auth_config_or_mcp_configurations() {
    let emulator = emulator().await;
    echoing(&emulator).await;
    let body = tempfile::NamedTempFile::new().expect("body file");
    let file = body.path().display().to_string();
    let run = |args: &[&str]| {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let emulator = &emulator;
        async move {
            let url = emulator.management_url();
            let output = crate::support::cli::aigw_api_ok(&url, TOKEN, &args).await;
            let stdout = String::from_utf8(output.stdout).expect("utf-8");
            let stderr = String::from_utf8(output.stderr).expect("utf-8");
            for secret in [AWS_SECRET, "AKIA0000CLIENT", "Qe8Rt5Yu2I"] {
                assert!(
                    !stdout.contains(secret) && !stderr.contains(secret),
                    "{args:?} printed a secret: {stdout}{stderr}"
                );
            }
            serde_json::from_str::<Value>(&stdout)
                .unwrap_or_else(|e| panic!("{args:?}: {e}: {stdout}"))
        }
    };
    std::fs::write(
        body.path(),
        serde_json::to_string(&reference_request()).unwrap(),
    )
    .unwrap();
    run(&["secret-references", "create", "-f", &file]).await;
    let read = run(&["secret-references", "get", "openai-key"]).await;
    assert_eq!(read["auth_config"]["aws_region"], "eu-west-1");
    assert!(read["auth_config"]["masked_aws_secret_access_key"].is_string());
    run(&["secret-references", "list"]).await;
    std::fs::write(
        body.path(),
        json!({"auth_config": {"aws_secret_access_key": AWS_SECRET}}).to_string(),
    )
    .unwrap();
    run(&["secret-references", "update", "openai-key", "-f", &file]).await;

    std::fs::write(body.path(), serde_json::to_string(&mcp_request()).unwrap()).unwrap();
    let created = run(&["mcp-integrations", "create", "-f", &file]).await;
    let integration = created["id"].as_str().expect("id").to_owned();
    let read = run(&["mcp-integrations", "get", "linear"]).await;
    assert!(
        read["configurations"]["custom_headers"].is_string(),
        "{read}"
    );
    let rows = run(&["mcp-integrations", "list"]).await;
    assert_eq!(rows[0]["slug"], "linear");
    std::fs::write(
        body.path(),
        json!({"configurations": {"custom_headers": {"Authorization": HEADER}}}).to_string(),
    )
    .unwrap();
    run(&["mcp-integrations", "update", "linear", "-f", &file]).await;
    let state = control_json(&emulator, "state").await;
    let workspace = state["default_workspace_id"].as_str().unwrap().to_owned();
    std::fs::write(
        body.path(),
        json!({"workspaces": [{"id": workspace, "enabled": true}]}).to_string(),
    )
    .unwrap();
    run(&[
        "mcp-integrations",
        "update-workspaces",
        "linear",
        "-f",
        &file,
    ])
    .await;
    let access = run(&["mcp-integrations", "workspaces", "linear"]).await;
    assert_eq!(access["workspaces"][0]["enabled"], true);
    discover(&emulator, &integration, &["create_issue"]).await;
    std::fs::write(body.path(), toggle_create_issue(false)).unwrap();
    run(&[
        "mcp-integrations",
        "update-capabilities",
        "linear",
        "-f",
        &file,
    ])
    .await;
    let caps = run(&[
        "mcp-integrations",
        "capabilities",
        "linear",
        "--type",
        "tool",
    ])
    .await;
    assert_eq!(caps["data"][0]["enabled"], false);
    assert_eq!(
        run(&["mcp-integrations", "metadata", "linear"]).await["sync_status"],
        "synced"
    );
    // A failed discovery's error, as the API relays it, may quote the header it sent.
    let failed = format!("upstream answered 401 to initialize with Authorization: {HEADER}");
    discovered(&emulator, &integration, json!({"error": failed})).await;
    let metadata = run(&["mcp-integrations", "metadata", "linear"]).await;
    let sync_error = metadata["sync_error"].as_str().expect("a sync_error");
    assert!(sync_error.contains("answered 401"), "{metadata}");
    assert!(!metadata.to_string().contains(&HEADER[7..]), "{metadata}");

    std::fs::write(
        body.path(),
        json!({"name": "Linear", "mcp_integration_id": "linear", "workspace_id": workspace, "slug": "linear-cli"})
            .to_string(),
    )
    .unwrap();
    let server = run(&["mcp-servers", "create", "-f", &file]).await;
    let server_id = server["id"].as_str().expect("id").to_owned();
    assert_eq!(
        run(&["mcp-servers", "list", "--id", &server_id]).await[0]["slug"],
        "linear-cli"
    );
    assert_eq!(
        run(&["mcp-servers", "get", "linear-cli"]).await["id"],
        server_id.as_str()
    );
    std::fs::write(body.path(), json!({"description": "d"}).to_string()).unwrap();
    run(&["mcp-servers", "update", "linear-cli", "-f", &file]).await;
    run(&["mcp-servers", "capabilities", "linear-cli"]).await;
    std::fs::write(body.path(), toggle_create_issue(true)).unwrap();
    run(&[
        "mcp-servers",
        "update-capabilities",
        "linear-cli",
        "-f",
        &file,
    ])
    .await;
    std::fs::write(
        body.path(),
        json!({"user_access": [{"user_id": "u-1", "enabled": true}]}).to_string(),
    )
    .unwrap();
    run(&[
        "mcp-servers",
        "update-user-access",
        "linear-cli",
        "-f",
        &file,
    ])
    .await;
    assert_eq!(
        run(&["mcp-servers", "user-access", "linear-cli"]).await["data"][0]["user_id"],
        "u-1"
    );
    assert_eq!(
        run(&["mcp-servers", "connections", "linear-cli"]).await["total"],
        0
    );
    let denied = aigw_api(
        &emulator,
        vec!["mcp-servers".into(), "test".into(), "linear-cli".into()],
    )
    .await;
    assert!(!denied.status.success(), "SCM answers 403");

    let guardrail = seed_guardrail(&emulator, &workspace).await;
    std::fs::write(
        body.path(),
        json!({"mcp_servers": {server_id.clone(): {"run_on": ["input"]}}}).to_string(),
    )
    .unwrap();
    let synced = run(&["guardrails", "sync-mcp-servers", &guardrail, "-f", &file]).await;
    assert_eq!(synced["added"], 1);
    std::fs::write(body.path(), json!({"run_on": ["output"]}).to_string()).unwrap();
    run(&[
        "guardrails",
        "upsert-mcp-server",
        &guardrail,
        &server_id,
        "--organisation",
        "-f",
        &file,
    ])
    .await;
    let listed = run(&["guardrails", "mcp-servers", &guardrail]).await;
    assert_eq!(listed[0]["run_on"], json!(["output"]));
    run(&["mcp-servers", "delete", "linear-cli"]).await;
    run(&["mcp-integrations", "delete", "linear"]).await;
    run(&["secret-references", "delete", "openai-key"]).await;
}
