//! The emulator's integrations and providers over real HTTP: write-only keys and configurations
//! read masked, numeric TSG writes and UUID reads, fixed fields, workspace access merged per row
//! (never deleted, default providers unless refused), model access, providers bound only where
//! their integration is enabled, provider reads that carry credential material, hard deletes,
//! stats, state and seeding.

use crate::support;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use support::emu::{Emu, assert_ab01, text};
use support::objects::{WS_A, WS_B};

const INTEGRATIONS: &str = "/ai_gw/admin/v2/integrations";
const PROVIDERS: &str = "/ai_gw/v2/providers";
const TSG: &str = "1234567890";
const KEY: &str = "sk-upstream-Hq7Lw2Xp9Vz4";
const AWS_SECRET: &str = "wJalrXUtnFEMI-K7MDENG-bPxRfiCY";

fn integration(slug: &str) -> Value {
    json!({"name": "OpenAI prod", "ai_provider_id": "open-ai", "slug": slug, "key": KEY,
           "organisation_id": TSG, "create_default_provider": false,
           "configurations": {"aws_region": "eu-west-1", "aws_secret_access_key": AWS_SECRET}})
}

impl Emu {
    async fn integration_state(&self, slug: &str) -> Value {
        let state = self.state().await;
        state["integrations"]
            .as_array()
            .and_then(|all| all.iter().find(|i| i["slug"] == slug).cloned())
            .unwrap_or(Value::Null)
    }

    async fn providers_state(&self) -> Vec<Value> {
        self.state().await["providers"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    async fn grant(&self, slug: &str, rows: Value) -> (StatusCode, Value) {
        let body = json!({"workspaces": rows, "create_default_provider": false});
        self.put(&format!("{INTEGRATIONS}/{slug}/workspaces"), body)
            .await
    }
}

/// The row of `rows` whose `key` is `value`.
fn find_row(rows: &Value, key: &str, value: &str) -> Value {
    let rows = rows.as_array().unwrap();
    rows.iter().find(|r| r[key] == value).cloned().unwrap()
}
#[tokio::test]
async fn integrations_are_written_once_and_read_masked() {
    let emu = Emu::start().await;
    for (field, patch) in [
        ("name", json!({"name": null})),
        ("ai_provider_id", json!({"ai_provider_id": null})),
        ("slug", json!({"slug": "has space"})),
        ("key", json!({"key": ""})),
        ("configurations", json!({"configurations": "x"})),
    ] {
        let mut body = integration("bad");
        for (key, value) in patch.as_object().expect("patch") {
            body[key] = value.clone();
        }
        let (status, error) = emu.post(INTEGRATIONS, body).await;
        assert_ab01(status, &error, field);
    }
    let mut bad_org = integration("bad");
    bad_org["organisation_id"] = json!("tsg-1");
    let error = emu.post_refused(INTEGRATIONS, bad_org).await;
    assert_eq!(error["error"]["param"], "organisation_id", "{error}");

    let (status, receipt) = emu.post(INTEGRATIONS, integration("openai-prod")).await;
    assert_eq!(status, StatusCode::OK, "{receipt}");
    let fields: Vec<&String> = receipt.as_object().expect("receipt").keys().collect();
    assert_eq!(fields, ["id", "object", "provider_id", "slug"]);
    assert_eq!(
        (receipt["slug"].clone(), receipt["provider_id"].clone()),
        (json!("openai-prod"), Value::Null)
    );
    let (status, error) = emu.post(INTEGRATIONS, integration("openai-prod")).await;
    assert_ab01(status, &error, "already exists");

    let id = text(&receipt["id"]);
    let keys = [id.as_str(), "openai-prod"];
    for read in emu
        .read_by_each(INTEGRATIONS, keys, &[KEY, AWS_SECRET])
        .await
    {
        assert_eq!(read["masked_key"], "****9Vz4");
        assert_eq!(read["configurations"]["aws_region"], "eu-west-1");
        assert_eq!(
            read["configurations"]["masked_aws_secret_access_key"],
            "****fiCY"
        );
        assert!(
            read["last_updated_at"].is_null(),
            "null until the first update"
        );
        assert!(read["global_workspace_access"].is_null());
        assert_eq!(read["allow_all_models"], true);
        assert_eq!(read["type"], "organisation");
        let state = emu.state().await;
        assert_eq!(
            read["organisation_id"], state["organisation_id"],
            "a UUID, not the TSG"
        );
    }
    let dumped = emu.integration_state("openai-prod").await;
    assert_eq!(
        (dumped["key"].clone(), dumped["key_writes"].clone()),
        (json!(KEY), json!(1))
    );
    assert_eq!(
        dumped["configurations"]["aws_secret_access_key"],
        AWS_SECRET
    );

    // Updates: at least one field, fixed fields refused, the key written again.
    let path = format!("{INTEGRATIONS}/openai-prod");
    let (status, error) = emu.put(&path, json!({})).await;
    assert_ab01(status, &error, "at least one field");
    for (field, value) in [
        ("ai_provider_id", "anthropic"),
        ("slug", "other"),
        ("workspace_id", WS_A),
    ] {
        let (status, error) = emu.put(&path, json!({"name": "x", field: value})).await;
        assert_ab01(status, &error, field);
    }
    let (status, answer) = emu
        .put(&path, json!({"key": "sk-rotated-Aa1Bb2Cc3Dd4", "configurations": {"aws_region": "us-east-1"}}))
        .await;
    assert_eq!((status, answer), (StatusCode::OK, json!({})));
    let dumped = emu.integration_state("openai-prod").await;
    assert_eq!(dumped["key_writes"], 2);
    assert_eq!(
        dumped["configurations"],
        json!({"aws_region": "us-east-1"}),
        "sent whole"
    );
    let (_, read) = emu.get(&path).await;
    assert!(read["last_updated_at"].is_string());

    let (_, list) = emu.get(&format!("{INTEGRATIONS}?type=organisation")).await;
    assert_eq!(
        (list["object"].clone(), list["total"].clone()),
        (json!("list"), json!(1))
    );
    assert!(
        list["data"][0].get("masked_key").is_none(),
        "list rows are summaries"
    );
    let (_, none) = emu.get(&format!("{INTEGRATIONS}?type=workspace")).await;
    assert_eq!(none["total"], 0);

    let (status, answer) = emu.delete(&format!("{path}?organisation_id={TSG}")).await;
    assert_eq!((status, answer), (StatusCode::OK, json!({})));
    let (status, _) = emu.get(&path).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "a hard delete");
    let stats = emu.control(Method::GET, "/_emulator/stats", None).await.1;
    assert_eq!(
        stats["requests"]["PUT /ai_gw/admin/v2/integrations/{integrationId}"]["200"],
        1
    );
}

#[tokio::test]
async fn workspace_access_merges_per_row_and_is_disabled_never_deleted() {
    let emu = Emu::start().await;
    emu.post(INTEGRATIONS, integration("openai-prod")).await;
    let (status, _) = emu
        .grant(
            "openai-prod",
            json!([{"id": WS_A, "enabled": true}, {"id": WS_B, "enabled": 1,
            "usage_limits": [{"credit_limit": 100, "type": "cost"}]}]),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let path = format!("{INTEGRATIONS}/openai-prod/workspaces");
    for bad in [
        json!({}),
        json!({"workspaces": [{"id": WS_A}]}),
        json!({"workspaces": [{"id": WS_A, "enabled": true}, {"id": WS_A, "enabled": false}]}),
        json!({"workspaces": [{"id": WS_A, "enabled": true, "usage_limits": [{}, {}]}]}),
        json!({"workspaces": [{"id": WS_A, "enabled": true, "rate_limits": [{"type": "requests", "unit": "rps", "value": 1}]}]}),
    ] {
        let (status, error) = emu.put(&path, bad.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {error}");
    }

    // Disabling one row touches only that row; it stays listed, archived.
    let before = emu.integration_state("openai-prod").await;
    let (status, _) = emu
        .grant("openai-prod", json!([{"id": WS_A, "enabled": false}]))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (_, rows) = emu.get(&path).await;
    assert_eq!(rows["total"], 2, "{rows}");
    assert_eq!(rows["global_workspace_access"]["enabled"], false);
    let row = |id: &str| find_row(&rows["workspaces"], "id", id);
    assert_eq!(
        (row(WS_A)["enabled"].clone(), row(WS_A)["status"].clone()),
        (json!(false), json!("archived"))
    );
    assert_eq!(row(WS_B)["usage_limits"][0]["credit_limit"], 100);
    let after = emu.integration_state("openai-prod").await;
    let writes = |state: &Value, id: &str| {
        state["workspaces"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id)
            .unwrap()["writes"]
            .clone()
    };
    assert_eq!(writes(&after, WS_A), json!(2));
    assert_eq!(
        writes(&after, WS_B),
        writes(&before, WS_B),
        "the other row untouched"
    );
    assert!(
        emu.providers_state().await.is_empty(),
        "no default provider was asked for"
    );

    // Without `create_default_provider: false` the API makes a provider nobody manages.
    let (status, _) = emu
        .put(&path, json!({"workspaces": [{"id": WS_A, "enabled": true}], "default_provider_slug": "auto-made"}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let made = emu.providers_state().await;
    assert_eq!(made.len(), 1, "{made:?}");
    assert_eq!(
        (made[0]["slug"].clone(), made[0]["default"].clone()),
        (json!("auto-made"), json!(true))
    );

    // override_existing_workspace_access disables every row not listed.
    let (status, _) = emu
        .put(&path, json!({"workspaces": [{"id": WS_B, "enabled": true}],
                            "override_existing_workspace_access": true, "create_default_provider": false}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (_, rows) = emu.get(&path).await;
    let enabled: Vec<&Value> = rows["workspaces"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["enabled"] == true)
        .collect();
    assert_eq!(enabled.len(), 1);
    assert_eq!(enabled[0]["id"], WS_B);
}

#[tokio::test]
async fn model_access_merges_per_slug_and_only_custom_models_go() {
    let emu = Emu::start().await;
    emu.post(INTEGRATIONS, integration("openai-prod")).await;
    let path = format!("{INTEGRATIONS}/openai-prod/models");
    let (_, models) = emu.get(&path).await;
    assert_eq!(models["total"], 2, "{models}");
    assert_eq!(models["models"][0]["is_custom"], 0, "0/1 integers");
    assert_eq!(models["models"][0]["enabled"], true, "a real boolean");
    let (status, error) = emu
        .put(
            &path,
            json!({"models": [{"slug": "gpt-9", "enabled": true}]}),
        )
        .await;
    assert_ab01(status, &error, "custom model");
    let (status, _) = emu
        .put(&path, json!({"models": [{"slug": "gpt-4o-mini", "enabled": false},
                                      {"slug": "ft-1", "enabled": true, "is_custom": "true", "base_model_slug": "gpt-4o"}],
                           "allow_all_models": false}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (_, models) = emu.get(&path).await;
    assert_eq!(models["total"], 3);
    assert_eq!(models["allow_all_models"], false);
    let by_slug = |slug: &str| find_row(&models["models"], "slug", slug);
    assert_eq!(by_slug("gpt-4o-mini")["enabled"], false);
    assert_eq!(by_slug("gpt-4o")["enabled"], true, "not listed: untouched");
    assert_eq!(by_slug("ft-1")["is_custom"], 1);
    let (status, error) = emu.delete(&format!("{path}?slugs=gpt-4o")).await;
    assert_ab01(status, &error, "cannot be deleted");
    let (status, _) = emu.delete(&format!("{path}?slugs=ft-1")).await;
    assert_eq!(status, StatusCode::OK);
    let (_, models) = emu.get(&path).await;
    assert_eq!(models["total"], 2);
}

#[tokio::test]
async fn providers_bind_an_enabled_integration_and_their_reads_carry_credentials() {
    let emu = Emu::start().await;
    let (_, created) = emu.post(INTEGRATIONS, integration("openai-prod")).await;
    let integration_id = text(&created["id"]);
    let provider = json!({"name": "OpenAI for team A", "integration_id": integration_id,
                          "workspace_id": WS_A, "slug": "openai-team-a", "note": "managed"});
    let (status, error) = emu.post(PROVIDERS, provider.clone()).await;
    assert_ab01(status, &error, "not enabled for workspace");
    emu.grant("openai-prod", json!([{"id": WS_A, "enabled": true}]))
        .await;
    let mut inline = provider.clone();
    inline["rate_limits"] = json!({"type": "requests", "unit": "rpm", "value": 10});
    let (status, _) = emu.post(PROVIDERS, inline).await;
    assert_eq!(
        status,
        StatusCode::SERVICE_UNAVAILABLE,
        "inline rate limits fail live"
    );

    let (status, receipt) = emu.post(PROVIDERS, provider.clone()).await;
    assert_eq!(status, StatusCode::OK, "{receipt}");
    let fields: Vec<&String> = receipt.as_object().unwrap().keys().collect();
    assert_eq!(fields, ["id", "object", "slug"], "no version_id");
    let (status, error) = emu.post(PROVIDERS, provider).await;
    assert_ab01(status, &error, "already exists");

    let path = format!("{PROVIDERS}/openai-team-a");
    let (status, read) = emu.get(&format!("{path}?workspace_id={WS_A}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(read["key"], KEY, "a provider read carries the upstream key");
    assert_eq!(read["model_config"]["aws_secret_access_key"], AWS_SECRET);
    assert_eq!(read["integration_id"], json!(integration_id));
    assert_eq!(read["status"], "active");
    let (status, _) = emu.get(&format!("{path}?workspace_id={WS_B}")).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "another workspace's provider"
    );

    let (status, error) = emu.put(&path, json!({})).await;
    assert_ab01(status, &error, "at least one field");
    let (status, error) = emu.put(&path, json!({"integration_id": "other"})).await;
    assert_ab01(status, &error, "integration_id");
    let (status, answer) = emu
        .put(
            &path,
            json!({"note": null, "usage_limits": {"credit_limit": 50, "type": "tokens"},
                           "expires_at": "2000-01-01T00:00:00Z", "reset_usage": true}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["slug"], "openai-team-a");
    let (_, read) = emu.get(&path).await;
    assert!(read["note"].is_null());
    assert_eq!(read["status"], "expired");
    assert!(read["last_reset_at"].is_string());
    let (_, list) = emu.get(&format!("{PROVIDERS}?workspace_id={WS_A}")).await;
    assert_eq!(list["total"], 1);
    assert!(
        list["data"][0].get("key").is_none(),
        "list rows carry no key"
    );

    let (status, _) = emu.delete(&format!("{path}?workspace_id={WS_A}")).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = emu.get(&path).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "a hard delete");
    let stats = emu.control(Method::GET, "/_emulator/stats", None).await.1;
    assert_eq!(stats["requests"]["POST /ai_gw/v2/providers"]["200"], 1);
    assert_eq!(
        stats["requests"]["DELETE /ai_gw/v2/providers/{providerId}"]["200"],
        1
    );
}

#[tokio::test]
async fn a_workspace_scoped_create_makes_a_default_provider_unless_refused_and_seeds_work() {
    let emu = Emu::start().await;
    let mut scoped = integration("scoped");
    scoped["workspace_id"] = json!(WS_A);
    scoped
        .as_object_mut()
        .unwrap()
        .remove("create_default_provider");
    let (_, receipt) = emu.post(INTEGRATIONS, scoped).await;
    assert!(receipt["provider_id"].is_string(), "{receipt}");
    let (_, read) = emu.get(&format!("{INTEGRATIONS}/scoped")).await;
    assert_eq!(
        (read["type"].clone(), read["workspace_id"].clone()),
        (json!("workspace"), json!(WS_A))
    );

    let seed = json!({
        "integrations": [{"slug": "seeded", "name": "Seeded", "key": "sk-seeded-1234567890",
                          "workspaces": [{"id": WS_B, "enabled": true}]}],
    });
    let (status, answer) = emu.seed(seed).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let seeded_id = text(&answer["integrations"][0]["id"]);
    let seed = json!({"providers": [{"slug": "seeded-p", "integration_id": seeded_id, "workspace_id": WS_B}]});
    let (status, _) = emu.seed(seed).await;
    assert_eq!(status, StatusCode::OK);
    let (_, read) = emu.get(&format!("{PROVIDERS}/seeded-p")).await;
    assert_eq!(read["key"], "sk-seeded-1234567890");
    assert_eq!(emu.providers_state().await.len(), 2);

    emu.faults(json!({"missing_as_ab03": true})).await;
    let (status, error) = emu.get(&format!("{INTEGRATIONS}/nope")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(error["error"]["code"], "AB03", "{error}");
    emu.faults(json!({})).await;
    emu.control(Method::DELETE, "/_emulator/state", None).await;
    let state = emu.state().await;
    assert_eq!(
        (state["integrations"].clone(), state["providers"].clone()),
        (json!([]), json!([]))
    );
}
