//! The emulator's secret references over real HTTP (FACTS-more §6, FACTS-rest §3): manager
//! types and their `auth_config` variants, write-only masked `auth_config` (never echoed as
//! sent), workspace access rules, numeric TSG writes and UUID reads, hard deletes, and a delete
//! refused while an integration or MCP integration maps a field to the reference.

use crate::support;

use reqwest::StatusCode;
use serde_json::{Value, json};
use support::emu::{Emu, assert_ab01};

pub(super) const REFS: &str = "/ai_gw/admin/v2/secret-references";
const AWS_SECRET: &str = "wJalrXUtnFEMI-ref-secret-K7MDENG";
const AWS_KEY_ID: &str = "AKIAREFERENCE0042ID";
const VAULT_TOKEN: &str = "hvs.vault-token-Zx81Qw";

pub(super) fn aws_reference(slug: &str) -> Value {
    json!({
        "organisation_id": "1234567890", "name": "OpenAI key in AWS", "slug": slug,
        "manager_type": "aws_sm", "secret_path": "prod/openai", "secret_key": "api_key",
        "auth_config": {"aws_auth_type": "accessKey", "aws_access_key_id": AWS_KEY_ID,
                        "aws_secret_access_key": AWS_SECRET, "aws_region": "eu-west-1"},
        "tags": {"team": "payments"},
    })
}

#[tokio::test]
async fn references_are_checked_per_manager_and_read_masked() {
    let emu = Emu::start().await;
    let bad = [
        ("manager_type", json!({"manager_type": "gcp_sm"})),
        (
            "aws_auth_type",
            json!({"auth_config": {"aws_auth_type": "token"}}),
        ),
        (
            "aws_secret_access_key",
            json!({"auth_config": {"aws_auth_type": "accessKey", "aws_access_key_id": "a", "aws_region": "r"}}),
        ),
        ("secret_path", json!({"secret_path": null})),
        (
            "allow_all_workspaces",
            json!({"allow_all_workspaces": true, "allowed_workspaces": ["ws-a"]}),
        ),
        ("allowed_workspaces", json!({"allowed_workspaces": []})),
    ];
    for (mentions, patch) in bad {
        let mut body = aws_reference("bad");
        for (key, value) in patch.as_object().expect("patch") {
            body[key] = value.clone();
        }
        let (status, error) = emu.post(REFS, body).await;
        assert_ab01(status, &error, mentions);
    }
    let receipt = emu.post_receipt(REFS, aws_reference("openai-aws")).await;
    assert_eq!(receipt["object"], "secret-reference");
    let (status, error) = emu.post(REFS, aws_reference("openai-aws")).await;
    assert_ab01(status, &error, "already exists");

    let id = receipt["id"].as_str().expect("id").to_owned();
    let keys = [id.as_str(), "openai-aws"];
    for read in emu
        .read_by_each(REFS, keys, &[AWS_SECRET, AWS_KEY_ID])
        .await
    {
        assert_eq!(read["auth_config"]["aws_auth_type"], "accessKey");
        assert_eq!(read["auth_config"]["aws_region"], "eu-west-1");
        assert_eq!(
            read["auth_config"]["masked_aws_secret_access_key"],
            "****DENG"
        );
        assert!(read["auth_config"]["masked_aws_access_key_id"].is_string());
        assert!(read.get("allowed_workspaces").is_none(), "reads omit it");
        assert_eq!(read["allow_all_workspaces"], true, "the default");
        assert_eq!(read["status"], "active");
        assert_ne!(
            read["organisation_id"], "1234567890",
            "reads carry the UUID"
        );
    }

    let vault = json!({"name": "vault", "manager_type": "hashicorp_vault", "secret_path": "kv/a",
        "allowed_workspaces": ["ws-payments-1a2b3c"],
        "auth_config": {"vault_auth_type": "token", "vault_addr": "https://vault:8200", "vault_token": VAULT_TOKEN}});
    let (status, receipt) = emu.post(REFS, vault).await;
    assert_eq!(status, StatusCode::OK, "{receipt}");
    let vault_path = format!("{REFS}/{}", receipt["slug"].as_str().expect("slug"));
    let (_, read) = emu.get(&vault_path).await;
    assert_eq!(read["allow_all_workspaces"], false);
    assert!(!read.to_string().contains(VAULT_TOKEN));

    let (_, list) = emu.get(&format!("{REFS}?manager_type=aws_sm")).await;
    assert_eq!(list["total"], 1, "{list}");
    assert!(
        list["data"][0].get("auth_config").is_none(),
        "rows carry no auth_config"
    );
    let (_, list) = emu
        .get(&format!("{REFS}?tags=%7B%22team%22%3A%22payments%22%7D"))
        .await;
    assert_eq!(list["total"], 1, "{list}");
    let (_, list) = emu.get(&format!("{REFS}?search=vault")).await;
    assert_eq!(list["total"], 1, "{list}");

    let state = emu.state().await;
    let stored = &state["secret_references"][1];
    assert_eq!(stored["auth_config"]["vault_token"], VAULT_TOKEN);
    assert_eq!(stored["allowed_workspaces"], json!(["ws-payments-1a2b3c"]));
}

#[tokio::test]
async fn updates_merge_auth_config_and_replace_workspaces() {
    let emu = Emu::start().await;
    emu.post(REFS, aws_reference("openai-aws")).await;
    let path = format!("{REFS}/openai-aws");
    let (status, error) = emu.put(&path, json!({})).await;
    assert_ab01(status, &error, "no valid fields");
    let (status, error) = emu
        .put(&path, json!({"manager_type": "azure_kv", "name": "x"}))
        .await;
    assert_ab01(status, &error, "manager_type");

    let rotated = "new-secret-value-0001-Rotated";
    let (status, answer) = emu
        .put(
            &path,
            json!({"auth_config": {"aws_secret_access_key": rotated}, "allowed_workspaces": ["ws-a"]}),
        )
        .await;
    assert_eq!((status, answer), (StatusCode::OK, json!({})));
    let (_, read) = emu.get(&path).await;
    assert_eq!(read["auth_config"]["aws_region"], "eu-west-1", "merged");
    assert_eq!(
        read["auth_config"]["masked_aws_secret_access_key"],
        "****ated"
    );
    assert_eq!(read["allow_all_workspaces"], false, "a list turns it off");
    let state = emu.state().await;
    assert_eq!(state["secret_references"][0]["auth_config_writes"], 2);

    emu.put(&path, json!({"allow_all_workspaces": true})).await;
    let state = emu.state().await;
    assert_eq!(
        state["secret_references"][0]["allowed_workspaces"],
        json!([])
    );
}

#[tokio::test]
async fn a_reference_in_use_cannot_be_deleted() {
    let emu = Emu::start().await;
    let (_, receipt) = emu.post(REFS, aws_reference("openai-aws")).await;
    let id = receipt["id"].as_str().expect("id").to_owned();
    let integration = json!({"name": "OpenAI", "ai_provider_id": "open-ai", "slug": "openai-mapped",
        "create_default_provider": false,
        "secret_mappings": [{"target_field": "key", "secret_reference_id": "openai-aws"}]});
    let (status, created) = emu.post("/ai_gw/admin/v2/integrations", integration).await;
    assert_eq!(status, StatusCode::OK, "{created}");
    let (status, error) = emu
        .post(
            "/ai_gw/admin/v2/integrations",
            json!({"name": "x", "ai_provider_id": "open-ai", "create_default_provider": false,
                   "secret_mappings": [{"target_field": "model_config.x", "secret_reference_id": "openai-aws"}]}),
        )
        .await;
    assert_ab01(status, &error, "target_field");
    let mcp = json!({"name": "Linear", "url": "https://mcp.linear.app/mcp", "auth_type": "headers",
        "transport": "http", "slug": "linear",
        "secret_mappings": [{"target_field": "configurations.custom_headers", "secret_reference_id": id, "value_format": "json"}]});
    let (status, created) = emu.post("/ai_gw/admin/v2/mcp-integrations", mcp).await;
    assert_eq!(status, StatusCode::OK, "{created}");

    let (status, error) = emu.delete(&format!("{REFS}/{id}")).await;
    assert_ab01(
        status,
        &error,
        "in use by integration openai-mapped, MCP integration linear",
    );
    emu.put(
        "/ai_gw/admin/v2/integrations/openai-mapped",
        json!({"secret_mappings": []}),
    )
    .await;
    let (status, error) = emu.delete(&format!("{REFS}/openai-aws")).await;
    assert_ab01(status, &error, "MCP integration linear");
    emu.put(
        "/ai_gw/admin/v2/mcp-integrations/linear",
        json!({"secret_mappings": []}),
    )
    .await;
    let (status, answer) = emu.delete(&format!("{REFS}/openai-aws")).await;
    assert_eq!((status, answer), (StatusCode::OK, json!({})));
    let (status, _) = emu.get(&format!("{REFS}/{id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "a hard delete");
}
