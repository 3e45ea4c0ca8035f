//! The typed client (`client.iam_scopes()`, `client.workspaces()`, `client.workspaces_on()`) and
//! `aigw api scopes` / `aigw api workspaces` against the emulator over real HTTP: the three-call
//! create, data-plane visibility, the clearing forms, archive, and checks made before sending.

use aigw::api::{
    ApiPlane, CreateWorkspaceRequest, IamScopeWrite, UpdateWorkspaceRequest, WorkspacesListQuery,
};
use serde_json::{Value, json};

use super::integrations_client::{cli_stdout, client, emulator};

#[tokio::test]
async fn the_client_makes_binds_updates_and_archives_a_workspace() {
    let emulator = emulator().await;
    let client = client(&emulator);
    let scopes = client.iam_scopes();
    let admin = client.workspaces();
    let data = client.workspaces_on(ApiPlane::Data);

    let request = CreateWorkspaceRequest {
        name: "Payments".into(),
        scope_name: "ws_payments_k2j3h4".into(),
        icon: Some("💳".into()),
        ..Default::default()
    };
    let missing_scope = admin.create(&request).await.unwrap_err();
    assert_eq!(missing_scope.status(), Some(400), "{missing_scope}");
    assert_eq!(missing_scope.api_code(), Some("AB01"));

    let scope = scopes
        .create(&IamScopeWrite {
            name: "ws_payments_k2j3h4".into(),
            description: "aigw-owner:7f3a".into(),
            resources: vec![],
        })
        .await
        .unwrap();
    assert_eq!(scope.description, "aigw-owner:7f3a");
    let created = admin.create(&request).await.unwrap();
    assert_eq!(created.scope_name.as_deref(), Some("ws_payments_k2j3h4"));

    let hidden = data.get(&created.slug).await.unwrap_err();
    assert!(
        hidden.is_not_visible() && !hidden.is_not_found(),
        "{hidden}"
    );
    assert!(
        !data
            .list(&WorkspacesListQuery::default())
            .await
            .unwrap()
            .iter()
            .any(|w| w.slug == created.slug)
    );

    let bind = IamScopeWrite::binding("ws_payments_k2j3h4", &scope.description, &created.slug);
    let bound = scopes.replace("ws_payments_k2j3h4", &bind).await.unwrap();
    assert!(bound.binds(&created.slug));
    assert_eq!(bound.description, "aigw-owner:7f3a", "kept by the binding");
    let wrong = scopes.replace("another", &bind).await.unwrap_err();
    assert_eq!(wrong.status(), None, "refused before sending: {wrong}");

    let read = data.get(&created.slug).await.unwrap();
    assert_eq!(read.id, created.id);
    assert_eq!(read.plain_name(), "Payments");
    assert_eq!(read.name, "💳 Payments");
    assert_eq!(read.is_default, Some(false));
    let listed = data.list(&WorkspacesListQuery::default()).await.unwrap();
    assert!(listed.iter().any(|w| w.slug == created.slug));
    assert!(listed.iter().any(|w| w.is_default == Some(true)));

    let set = UpdateWorkspaceRequest {
        usage_limits: Some(Some(vec![json!({"credit_limit": 50, "type": "cost"})])),
        rate_limits: Some(vec![
            json!({"type": "requests", "unit": "rpm", "value": 10}),
        ]),
        ..Default::default()
    };
    admin.update(&created.id, &set).await.unwrap();
    let clear = UpdateWorkspaceRequest {
        defaults: Some(UpdateWorkspaceRequest::clear_defaults()),
        usage_limits: Some(None),
        rate_limits: Some(vec![]),
        icon: Some(String::new()),
        ..Default::default()
    };
    admin.update(&created.id, &clear).await.unwrap();
    let read = admin.get(&created.id).await.unwrap();
    assert!(
        read.usage_limits.as_ref().is_none_or(Value::is_null),
        "{read:?}"
    );
    assert_eq!(read.rate_limits, Some(json!([])));
    assert_eq!(read.name, "Payments");
    let empty = admin
        .update(&created.id, &UpdateWorkspaceRequest::default())
        .await
        .unwrap_err();
    assert_eq!(empty.status(), None, "refused before sending: {empty}");
    let on_data = data.archive(&created.id).await.unwrap_err();
    assert_eq!(on_data.status(), None, "writes are admin-plane only");

    admin.archive(&created.slug).await.unwrap();
    assert!(admin.get(&created.id).await.unwrap_err().is_not_found());
    let archived = admin
        .list(&WorkspacesListQuery {
            status: Some("archived".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(archived.len(), 1);
    let default = listed
        .iter()
        .find(|w| w.is_default == Some(true))
        .expect("the default workspace");
    let refused = admin.archive(&default.id).await.unwrap_err();
    assert_eq!(refused.status(), Some(400), "{refused}");
    scopes.delete("ws_payments_k2j3h4").await.unwrap();
    assert!(scopes.list().await.unwrap().is_empty());
}

#[tokio::test]
async fn the_cli_covers_scopes_and_workspaces() {
    let emulator = emulator().await;
    let body = tempfile::NamedTempFile::new().expect("body file");
    let file = body.path().display().to_string();
    let run = |args: &[&str]| {
        let stdout = cli_stdout(&emulator, args.iter().map(|s| s.to_string()).collect());
        async move { serde_json::from_str::<Value>(&stdout.await).expect("json on stdout") }
    };
    std::fs::write(
        body.path(),
        json!({"name": "ws_cli_a1b2c3", "description": "", "resources": []}).to_string(),
    )
    .unwrap();
    let scope = run(&["scopes", "create", "-f", &file]).await;
    assert_eq!(scope["name"], "ws_cli_a1b2c3");
    std::fs::write(
        body.path(),
        json!({"name": "Cli", "scope_name": "ws_cli_a1b2c3"}).to_string(),
    )
    .unwrap();
    let created = run(&["workspaces", "create", "-f", &file]).await;
    let slug = created["slug"].as_str().expect("slug").to_owned();
    let data_plane = run(&["workspaces", "list", "--data-plane"]).await;
    assert_eq!(data_plane.as_array().map(Vec::len), Some(1), "{data_plane}");
    let bound = run(&["scopes", "bind", "ws_cli_a1b2c3", &slug]).await;
    assert_eq!(bound["resources"][0]["resource_id"], slug.as_str());
    let read = run(&["workspaces", "get", &slug, "--data-plane"]).await;
    assert_eq!(read["slug"], slug.as_str());
    std::fs::write(body.path(), json!({"description": "cli made"}).to_string()).unwrap();
    assert_eq!(
        run(&["workspaces", "update", &slug, "-f", &file]).await,
        json!({})
    );
    assert_eq!(run(&["workspaces", "archive", &slug]).await, json!({}));
    let archived = run(&["workspaces", "list", "--status", "archived"]).await;
    assert_eq!(archived[0]["description"], "cli made");
    assert_eq!(
        run(&["scopes", "list"]).await.as_array().map(Vec::len),
        Some(1)
    );
    assert_eq!(
        run(&["scopes", "get", "ws_cli_a1b2c3"]).await["name"],
        "ws_cli_a1b2c3"
    );
    std::fs::write(
        body.path(),
        json!({"name": "ws_cli_a1b2c3", "description": "d", "resources": []}).to_string(),
    )
    .unwrap();
    let replaced = run(&["scopes", "replace", "ws_cli_a1b2c3", "-f", &file]).await;
    assert_eq!(replaced["resources"], json!([]));
    assert_eq!(run(&["scopes", "delete", "ws_cli_a1b2c3"]).await, json!({}));
}
