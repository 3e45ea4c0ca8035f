//! The typed client (`client.integrations()`, `client.providers()`) and `aigw api integrations`
//! / `aigw api providers` against the emulator over real HTTP: every operation, checks made
//! before sending, and no key or credential in `Debug`, printed reads or errors.

use std::sync::Arc;

use aigw::api::{
    Client, ClientConfig, CreateIntegrationRequest, CreateProviderRequest, IntegrationsListQuery,
    ModelAccessUpdate, ProvidersListQuery, SensitiveFields, StaticToken, UpdateIntegrationRequest,
    UpdateModelsRequest, UpdateProviderRequest, UpdateWorkspacesRequest, WorkspaceAccessUpdate,
};
use aigw::emulator::{EmulatorOptions, Running, spawn};
use serde_json::{Value, json};

pub(super) const TOKEN: &str = "test-token";
const WORKSPACE: &str = "6f0e4a2c-5a4e-4c1b-9a53-3c2f1f0d9b11";
const KEY: &str = "sk-upstream-Zr4Tq8Mn2Bv6";
const AWS_SECRET: &str = "aws-secret-Lp3Ks9Jd7Hg1";

/// An emulator of its own.
pub(super) async fn emulator() -> Running {
    spawn(EmulatorOptions::new(TOKEN))
        .await
        .expect("emulator starts")
}

/// A client of `emulator`.
pub(super) fn client(emulator: &Running) -> Client {
    let config = ClientConfig::new(
        emulator.management_url(),
        emulator.gateway_url(),
        Arc::new(StaticToken::new(TOKEN)),
    );
    Client::new(config).expect("client builds")
}

/// Enables [`WORKSPACE`] without a default provider.
fn grant_workspace() -> UpdateWorkspacesRequest {
    UpdateWorkspacesRequest {
        workspaces: vec![WorkspaceAccessUpdate {
            id: WORKSPACE.into(),
            enabled: true,
            ..Default::default()
        }],
        create_default_provider: Some(false),
        ..Default::default()
    }
}

/// `GET /_emulator/{what}` (`state`, `stats`) of `emulator`.
/// Has `emulator` answer every POST with the fields of its body beside its own (fault
/// `echo_writes`): a receipt that echoes what was sent, Secret material and all.
pub(super) async fn echoing(emulator: &Running) {
    let url = format!("{}/_emulator/faults", emulator.management_url());
    let answer = reqwest::Client::new()
        .put(url)
        .json(&json!({"echo_writes": true}))
        .send()
        .await
        .expect("faults set");
    assert!(answer.status().is_success(), "{answer:?}");
}

pub(super) async fn control_json(emulator: &Running, what: &str) -> Value {
    reqwest::get(format!("{}/_emulator/{what}", emulator.management_url()))
        .await
        .expect(what)
        .json()
        .await
        .expect("json")
}

/// The provider `openai-team-a` of the integration `integration_id` in [`WORKSPACE`].
fn team_a_provider(integration_id: &str) -> CreateProviderRequest {
    CreateProviderRequest {
        name: "team a".into(),
        integration_id: integration_id.to_string(),
        workspace_id: Some(WORKSPACE.into()),
        slug: Some("openai-team-a".into()),
        ..Default::default()
    }
}

async fn state(emulator: &Running) -> Value {
    control_json(emulator, "state").await
}

fn create_request() -> CreateIntegrationRequest {
    CreateIntegrationRequest {
        name: "OpenAI prod".into(),
        ai_provider_id: "open-ai".into(),
        slug: Some("openai-prod".into()),
        key: Some(KEY.into()),
        organisation_id: Some("1234567890".into()),
        configurations: Some(SensitiveFields(
            json!({"aws_region": "eu-west-1", "aws_secret_access_key": AWS_SECRET})
                .as_object()
                .cloned()
                .unwrap(),
        )),
        create_default_provider: Some(false),
        ..Default::default()
    }
}

#[tokio::test]
async fn the_typed_client_manages_integrations_access_and_providers() {
    let emulator = emulator().await;
    let client = client(&emulator);
    let api = client.integrations();
    let bad = CreateIntegrationRequest {
        slug: Some("not a slug".into()),
        ..create_request()
    };
    assert!(
        api.create(&bad)
            .await
            .unwrap_err()
            .to_string()
            .contains("slug")
    );
    assert!(
        api.update("x", &Default::default()).await.is_err(),
        "an empty update"
    );

    let created = api.create(&create_request()).await.expect("created");
    assert_eq!(created.slug, "openai-prod");
    assert_eq!(created.provider_id, None);
    let read = api.get(&created.id).await.expect("read");
    assert_eq!(read.masked_key.as_deref(), Some("****2Bv6"));
    let printed = format!("{read:?} {}", serde_json::to_string(&read).unwrap());
    assert!(
        !printed.contains(KEY) && !printed.contains(AWS_SECRET),
        "{printed}"
    );
    let listed = api.list(&IntegrationsListQuery::default()).await.unwrap();
    assert_eq!(listed.len(), 1);

    let update = UpdateIntegrationRequest {
        key: Some("sk-upstream-new-000000".into()),
        ..Default::default()
    };
    assert!(!format!("{update:?}").contains("sk-upstream-new"));
    api.update("openai-prod", &update).await.expect("updated");
    let dumped = state(&emulator).await;
    assert_eq!(dumped["integrations"][0]["key"], "sk-upstream-new-000000");

    let grant = grant_workspace();
    api.update_workspaces(&created.id, &grant).await.unwrap();
    let rows = api.workspaces(&created.id).await.unwrap();
    assert!(rows.complete() && rows.workspaces[0].enabled);
    let models = UpdateModelsRequest {
        models: vec![ModelAccessUpdate {
            slug: "gpt-4o-mini".into(),
            enabled: false,
            ..Default::default()
        }],
        ..Default::default()
    };
    api.update_models(&created.id, &models).await.unwrap();
    let read = api.models(&created.id).await.unwrap();
    assert!(
        read.models
            .iter()
            .any(|m| m.slug == "gpt-4o-mini" && !m.enabled)
    );
    assert!(
        api.delete_models(&created.id, &["gpt-4o".into()])
            .await
            .is_err()
    );

    let providers = client.providers();
    let provider = team_a_provider(&created.id);
    let written = providers.create(&provider).await.expect("provider");
    let read = providers.get(&written.id, Some(WORKSPACE)).await.unwrap();
    let printed = format!("{read:?} {}", serde_json::to_string(&read).unwrap());
    assert!(
        !printed.contains("sk-upstream") && !printed.contains(AWS_SECRET),
        "a provider read's credentials are withheld: {printed}"
    );
    let update = UpdateProviderRequest {
        note: Some(Some("managed".into())),
        ..Default::default()
    };
    providers
        .update(&written.slug, Some(WORKSPACE), &update)
        .await
        .unwrap();
    let listed = providers
        .list(&ProvidersListQuery {
            workspace_id: Some(WORKSPACE.into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(listed[0].note.as_deref(), Some("managed"));
    providers
        .delete(&written.id, Some(WORKSPACE))
        .await
        .unwrap();
    let gone = providers.get(&written.id, None).await.unwrap_err();
    assert!(gone.is_not_found(), "{gone}");
    api.delete(&created.id, Some("1234567890")).await.unwrap();
    assert!(api.get(&created.id).await.unwrap_err().is_not_found());
}

/// Runs the built `aigw api` off the async runtime, so the in-process emulator keeps serving.
pub(super) async fn aigw_api(emulator: &Running, args: Vec<String>) -> std::process::Output {
    crate::support::cli::aigw_api(&emulator.management_url(), TOKEN, &args).await
}

/// `aigw api ARGS` against `emulator`, which must succeed; its stdout.
pub(super) async fn cli_stdout(emulator: &Running, args: Vec<String>) -> String {
    let url = emulator.management_url();
    let output = crate::support::cli::aigw_api_ok(&url, TOKEN, &args).await;
    String::from_utf8(output.stdout).expect("utf-8")
}

#[tokio::test]
async fn the_cli_never_prints_a_key_or_a_credential() {
    let emulator = emulator().await;
    echoing(&emulator).await;
    let body = tempfile::NamedTempFile::new().expect("body file");
    let file = body.path().display().to_string();
    let run = |args: &[&str]| cli_stdout(&emulator, args.iter().map(|s| s.to_string()).collect());
    let create = serde_json::to_value(create_request()).unwrap();
    std::fs::write(body.path(), create.to_string()).unwrap();
    // The receipt echoes the body (fault `echo_writes`): it is printed with the key hidden.
    let receipt = run(&["integrations", "create", "-f", &file]).await;
    let created: Value = serde_json::from_str(&receipt).unwrap();
    let id = created["id"].as_str().expect("an id").to_string();
    std::fs::write(
        body.path(),
        json!({"workspaces": [{"id": WORKSPACE, "enabled": true}], "create_default_provider": false})
            .to_string(),
    )
    .unwrap();
    run(&["integrations", "update-workspaces", &id, "-f", &file]).await;
    std::fs::write(
        body.path(),
        json!({"name": "p", "integration_id": id, "workspace_id": WORKSPACE, "slug": "openai-a"})
            .to_string(),
    )
    .unwrap();
    run(&["providers", "create", "-f", &file]).await;

    let mut printed = receipt;
    for args in [
        vec!["integrations", "get", "openai-prod"],
        vec!["integrations", "list"],
        vec!["integrations", "workspaces", "openai-prod"],
        vec!["integrations", "models", "openai-prod"],
        vec!["providers", "get", "openai-a", "--workspace-id", WORKSPACE],
        vec!["providers", "list"],
    ] {
        printed.push_str(&run(&args).await);
    }
    crate::support::assert_mentions(&printed, &["****", "(withheld)"]);
    assert!(
        !printed.contains(KEY) && !printed.contains(AWS_SECRET),
        "{printed}"
    );

    std::fs::write(
        body.path(),
        json!({"key": "sk-second-value-123456"}).to_string(),
    )
    .unwrap();
    assert_eq!(
        run(&["integrations", "update", &id, "-f", &file])
            .await
            .trim(),
        "{}"
    );
    run(&[
        "providers",
        "delete",
        "openai-a",
        "--workspace-id",
        WORKSPACE,
    ])
    .await;
    run(&[
        "integrations",
        "delete",
        &id,
        "--organisation-id",
        "1234567890",
    ])
    .await;
    let missing = aigw_api(&emulator, vec!["integrations".into(), "get".into(), id]).await;
    assert!(!missing.status.success());
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(stderr.contains("404"), "{stderr}");
}

/// `aigw validate`, `plan` and `export` of Integration manifests against the emulator: plain
/// credentials refused offline, the write-only key shown by its source and planned as a change
/// only when the operator would send it, and an export that references a placeholder Secret.
#[tokio::test]
async fn validate_plan_and_export_never_handle_a_key() {
    use aigw::gitops::{export, load, plan, validate};
    let manifest = |slug: &str, configurations: Value| {
        format!(
            "apiVersion: aigw.io/v1alpha1\nkind: Integration\nmetadata: {{name: {slug}}}\nspec:\n  slug: {slug}\n  name: OpenAI prod\n  aiProviderId: open-ai\n  keySecretRef: {{name: upstream, key: api-key}}\n  configurations: {configurations}\n  workspaces: [{{id: {WORKSPACE}}}]\n"
        )
    };
    let validator = validate::Validator::new();
    let check = |text: String| {
        let mut loaded = load::Loaded::default();
        load::parse_into(&mut loaded, "i.yaml", &text, false);
        validator.validate(&loaded)
    };
    let plain = check(manifest(
        "openai-prod",
        json!({"aws_secret_access_key": "aws-plain"}),
    ));
    assert!(!plain.is_valid());
    let problems: Vec<String> = plain.problems.iter().map(|p| p.to_string()).collect();
    assert!(
        problems.join("\n").contains("aws_secret_access_key"),
        "{problems:?}"
    );
    assert!(!problems.join("\n").contains("aws-plain"));
    let good = check(manifest("openai-prod", json!({"aws_region": "eu-west-1"})));
    assert!(good.is_valid(), "{:?}", good.problems);

    let emulator = emulator().await;
    let client = client(&emulator);
    let planned = plan::plan(&client, None, &good.manifests).await.unwrap();
    assert_eq!(planned.resources[0].action, plan::Action::Create);
    let shown = serde_json::to_string(&planned).unwrap();
    assert!(shown.contains("(secret upstream/api-key)"), "{shown}");

    // An existing integration of that slug is adopted: the key is sent once, the row granted.
    client
        .integrations()
        .create(&create_request())
        .await
        .unwrap();
    let planned = plan::plan(&client, None, &good.manifests).await.unwrap();
    let entry = &planned.resources[0];
    assert_eq!(entry.action, plan::Action::Adopt);
    let fields: Vec<&str> = entry.changes.iter().map(|c| c.field.as_str()).collect();
    assert!(
        fields.contains(&"keySecretRef") && fields.contains(&"workspaces"),
        "{fields:?}"
    );
    let shown = serde_json::to_string(&planned).unwrap();
    assert!(
        !shown.contains(KEY) && !shown.contains(AWS_SECRET),
        "{shown}"
    );
    let stats = control_json(&emulator, "stats").await;
    let writes: Vec<&String> = stats["requests"]
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| !k.starts_with("GET"))
        .collect();
    assert_eq!(
        writes,
        ["POST /ai_gw/admin/v2/integrations"],
        "plan only reads"
    );

    let exported = export::export(&client, &Default::default()).await.unwrap();
    let files: String = exported.files.iter().map(|f| f.content.clone()).collect();
    assert!(
        !files.contains(KEY) && !files.contains(AWS_SECRET),
        "{files}"
    );
    crate::support::assert_mentions(&files, &["kind: Integration", "keySecretRef"]);
    assert!(files.contains("aigw.io/cluster-readable"), "{files}");
    let back = check(
        exported
            .files
            .iter()
            .filter(|f| f.name.starts_with("integration-"))
            .map(|f| f.content.clone())
            .collect(),
    );
    assert!(back.is_valid(), "{:?}", back.problems);
}

/// A Provider manifest planned against an existing provider (adopted by slug, its read's
/// credentials never shown) and exported for its workspace (bound by `integrationId`).
#[tokio::test]
async fn providers_are_planned_and_exported_without_their_credentials() {
    use aigw::gitops::{export, load, plan, validate};
    let emulator = emulator().await;
    let client = client(&emulator);
    let created = client
        .integrations()
        .create(&create_request())
        .await
        .unwrap();
    let grant = grant_workspace();
    client
        .integrations()
        .update_workspaces(&created.id, &grant)
        .await
        .unwrap();
    let provider = team_a_provider(&created.id);
    client.providers().create(&provider).await.unwrap();

    let manifest = format!(
        "apiVersion: aigw.io/v1alpha1\nkind: Provider\nmetadata: {{name: openai-team-a, namespace: team-a}}\nspec:\n  slug: openai-team-a\n  name: team a\n  workspaceId: {WORKSPACE}\n  integrationId: {}\n  note: from git\n",
        created.id
    );
    let mut loaded = load::Loaded::default();
    load::parse_into(&mut loaded, "p.yaml", &manifest, false);
    let report = validate::Validator::new().validate(&loaded);
    assert!(report.is_valid(), "{:?}", report.problems);
    let planned = plan::plan(&client, None, &report.manifests).await.unwrap();
    let entry = &planned.resources[0];
    assert_eq!(entry.action, plan::Action::Adopt, "{entry:?}");
    let fields: Vec<&str> = entry.changes.iter().map(|c| c.field.as_str()).collect();
    assert_eq!(fields, ["note"]);
    let shown = serde_json::to_string(&planned).unwrap();
    assert!(
        !shown.contains(KEY) && !shown.contains(AWS_SECRET),
        "{shown}"
    );

    let options = export::ExportOptions {
        workspace_id: Some(WORKSPACE.into()),
        ..Default::default()
    };
    let exported = export::export(&client, &options).await.unwrap();
    let file = exported
        .files
        .iter()
        .find(|f| f.name.starts_with("provider-"))
        .expect("a provider manifest");
    assert!(
        file.content
            .contains(&format!("integrationId: {}", created.id)),
        "{}",
        file.content
    );
    assert!(
        !file.content.contains(KEY) && !file.content.contains("withheld"),
        "{}",
        file.content
    );
    let everywhere = export::export(&client, &Default::default()).await.unwrap();
    crate::support::assert_any(&everywhere.skipped, |s| s.contains("--workspace-id"));
}

/// An API whose 401 quotes the token and a `--header` value it was sent: `aigw api` prints the
/// error with both concealed (it concealed only the request body's fields).
#[tokio::test]
async fn the_cli_conceals_the_token_and_headers_an_error_quotes() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const TOKEN_SENT: &str = "tok-Zr8Qm2Wx6Lp4Nb7Vc1";
    const TENANT: &str = "tsg-Hd5Kj9Fs3Ga7Yt2Ue8";
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut request = vec![0u8; 8192];
            let read = stream.read(&mut request).await.unwrap_or(0);
            let request = String::from_utf8_lossy(&request[..read]).to_string();
            // The value of header `name` (matched ignoring case), as it was sent.
            let header = |name: &str| {
                request
                    .lines()
                    .find(|l| l.to_lowercase().starts_with(name))
                    .map(|l| l[name.len()..].trim().to_string())
                    .unwrap_or_default()
            };
            let message = format!(
                "token {} of tenant {} has expired",
                header("authorization: bearer "),
                header("x-tsg-id: ")
            );
            let body = json!({"message": message}).to_string();
            let answer = format!(
                "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(answer.as_bytes()).await;
        }
    });
    let args = ["configs", "list", "--header", &format!("x-tsg-id={TENANT}")];
    let output = crate::support::cli::against("api", &url, TOKEN_SENT, &args).await;
    server.abort();
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(!output.status.success());
    assert!(
        stderr.contains("has expired"),
        "the API's message is kept: {stderr}"
    );
    for secret in [TOKEN_SENT, TENANT] {
        assert!(
            !stderr.to_lowercase().contains(&secret.to_lowercase()),
            "{stderr}"
        );
    }
}
