//! SecretReference (cluster-scoped) on a real kube-apiserver against the emulator over HTTP:
//! `auth_config` comes from a labelled Secret of the operator's namespace and reaches the API
//! write-only, one POST creates it, nothing is written at steady state, a console edit is
//! corrected with one PUT and each Secret change is exactly one PUT; a delete the API refuses
//! while an integration maps a field to the reference waits as `StillReferenced` and goes
//! through once the mapping goes; no `auth_config` value shows in status, events, the
//! operator's log or CLI output.

use crate::support;

use std::time::Duration;

use aigw::resources::SecretReference;
use kube::api::{Api, PostParams};
use reqwest::Method;
use serde_json::{Value, json};
use support::endpoints::{
    INTEGRATION_POST, INTEGRATION_PUT, SECRET_REFERENCE_DELETE, SECRET_REFERENCE_POST,
};
use support::harness::Harness;
use support::objects::Conditions;
use support::objects::WS_A;

const WAIT: Duration = Duration::from_secs(30);
const KEY_ID: &str = "AKIAQ7SECREF0EXAMPLE";
const FIRST_SECRET: &str = "wJalr-first-Vb8Nq2Lx5Tz1";
const SECOND_SECRET: &str = "wJalr-second-Hc3Ry6Pk9Dm4";

/// The `auth_config` Secret in the operator's namespace (the test namespace), labelled for
/// cluster-scoped readers unless `labelled` is false.
async fn put_auth(h: &Harness, secret_key: &str, labelled: bool) {
    let data = json!({"aws_auth_type": "accessKey", "aws_region": "eu-west-1",
                      "aws_access_key_id": KEY_ID, "aws_secret_access_key": secret_key});
    h.put_secret("aws-sm-auth", data, labelled).await;
}

fn api(h: &Harness) -> Api<SecretReference> {
    Api::all(h.env.client.clone())
}

/// The emulator's record of the reference, `auth_config` in clear.
async fn remote(h: &Harness, slug: &str) -> Value {
    h.remote_record("secret_references", "slug", slug).await
}

#[tokio::test]
async fn auth_config_comes_from_a_labelled_secret_and_an_in_use_reference_waits_to_be_deleted() {
    let h = Harness::start_with_secret_namespace("secref", Duration::from_secs(1)).await;
    put_auth(&h, FIRST_SECRET, true).await;
    let slug = h.cluster_name("aws");
    let spec = json!({"slug": slug, "name": "AWS prod", "managerType": "aws_sm",
                      "secretPath": "prod/openai", "secretKey": "api_key",
                      "description": "managed from Git",
                      "authConfigSecretRef": {"name": "aws-sm-auth"},
                      "allowedWorkspaces": [WS_A], "tags": {"team": "platform"}});
    h.create_cluster::<SecretReference>("aws", spec).await;

    // One POST; auth_config and the allowed workspaces reached the API.
    let ready = h
        .wait_cluster::<SecretReference>("aws", WAIT, |r| r.ready())
        .await;
    let status = ready.status.clone().unwrap();
    assert_eq!(status.slug.as_deref(), Some(slug.as_str()));
    assert!(status.secret_hash.is_some());
    assert_eq!(h.count(SECRET_REFERENCE_POST).await, 1, "one POST");
    let stored = remote(&h, &slug).await;
    assert_eq!(stored["auth_config"]["aws_secret_access_key"], FIRST_SECRET);
    assert_eq!(stored["auth_config"]["aws_access_key_id"], KEY_ID);
    assert_eq!(stored["allowed_workspaces"], json!([WS_A]));
    assert_eq!(stored["allow_all_workspaces"], false);
    assert_eq!(stored["secret_key"], "api_key");
    assert_eq!(stored["tags"], json!({"team": "platform"}));

    // An integration maps its key to the reference: the API refuses the delete, the resource
    // says who holds it and waits; nothing is forced.
    let integration = h
        .post(
            "/ai_gw/admin/v2/integrations",
            json!({"name": "mapped", "ai_provider_id": "open-ai", "slug": "mapped-openai",
                        "create_default_provider": false,
                        "secret_mappings": [{"target_field": "key", "secret_reference_id": slug}]}),
        )
        .await;
    assert!(integration["id"].is_string(), "{integration}");
    let (held, message) = h
        .delete_waits_for::<SecretReference>("aws", "integration mapped-openai")
        .await;
    assert!(message.contains("deletionPolicy: Orphan"), "{message}");
    assert!(
        !remote(&h, &slug).await.is_null(),
        "not deleted while in use"
    );
    assert!(
        h.count(SECRET_REFERENCE_DELETE).await >= 1,
        "the delete was tried"
    );

    // The mapping goes: the next try deletes it.
    let unmapped = Some(json!({"secret_mappings": []}));
    let mapping = "/ai_gw/admin/v2/integrations/mapped-openai";
    let release = h.call(Method::PUT, mapping, unmapped);
    h.released_then_gone::<SecretReference>("aws", ("secret_references", &slug), release)
        .await;

    // No auth_config value anywhere but the API.
    let statuses = serde_json::to_string(&held.status).unwrap();
    // A reference to read with the CLI, its auth_config set through the API.
    h.post(
        "/ai_gw/admin/v2/secret-references",
        json!({"name": "cli", "slug": "cli-ref", "manager_type": "aws_sm",
                    "secret_path": "p", "auth_config": {"aws_auth_type": "accessKey",
                    "aws_region": "eu-west-1", "aws_access_key_id": KEY_ID,
                    "aws_secret_access_key": SECOND_SECRET}}),
    )
    .await;
    let cli = format!(
        "{}{}",
        h.aigw_api(&["secret-references", "get", "cli-ref"]).await,
        h.aigw_api(&["secret-references", "list"]).await
    );
    assert!(cli.contains("cli-ref"), "{cli}");
    h.assert_hidden(&[FIRST_SECRET, SECOND_SECRET], &statuses, &cli)
        .await;
    h.stop().await;
}

/// An Integration maps its key to a SecretReference resource: it waits until the reference is
/// Ready, then sends the reference's UUID in `secret_mappings` with its one POST; nothing is
/// written at steady state; a console edit of the mappings is put back with one PUT; the
/// reference's delete waits, naming the Integration, until the Integration lets go of it.
#[tokio::test]
async fn an_integration_maps_its_key_to_a_secret_reference_resource() {
    let h = Harness::start_with_secret_namespace("secmap", Duration::from_secs(1)).await;
    let integrations: Api<aigw::resources::Integration> = Api::all(h.env.client.clone());
    let reference = h.cluster_name("vault");
    let integration = h.cluster_name("mapped");
    // Refused at admission, naming the field: a reference named twice, a field mapped twice.
    for (mappings, says) in [
        (
            json!([{"targetField": "key", "secretReferenceRef": {"name": "a"}, "secretReference": "b"}]),
            "names its secret reference once",
        ),
        (
            json!([{"targetField": "key", "secretReference": "a"},
                   {"targetField": "key", "secretReference": "b"}]),
            "spec.secretMappings names a targetField twice",
        ),
        (
            json!([{"targetField": "name", "secretReference": "a"}]),
            "spec.secretMappings[0].targetField",
        ),
    ] {
        let spec = json!({"name": "bad", "aiProviderId": "open-ai", "secretMappings": mappings});
        let refused = integrations
            .create(
                &PostParams::default(),
                &h.cluster_object("Integration", "bad", spec),
            )
            .await
            .expect_err("refused at admission")
            .to_string();
        assert!(refused.contains(says), "{refused}");
    }
    let spec = json!({"slug": integration, "name": "mapped", "aiProviderId": "open-ai",
                      "secretMappings": [{"targetField": "key",
                                          "secretReferenceRef": {"name": reference},
                                          "secretKey": "openai_key"}]});
    h.create_cluster::<aigw::resources::Integration>("mapped", spec)
        .await;
    let waiting = support::wait_until(WAIT, || async {
        let i = integrations.get_opt(&integration).await.ok()??;
        i.condition("Ready")
            .is_some_and(|(_, reason, _)| reason == "SecretReferenceNotReady")
            .then_some(i)
    })
    .await
    .expect("the integration waits for its SecretReference");
    let (_, _, message) = waiting.condition("Ready").unwrap();
    assert!(message.contains("does not exist yet"), "{message}");
    assert_eq!(
        h.remote_writes().await,
        0,
        "nothing sent before it is Ready"
    );

    put_auth(&h, FIRST_SECRET, true).await;
    let spec = json!({"slug": reference, "name": "Vault", "managerType": "aws_sm",
                      "secretPath": "prod/openai", "authConfigSecretRef": {"name": "aws-sm-auth"}});
    h.create_cluster::<SecretReference>("vault", spec).await;
    let ready = h
        .wait_cluster::<SecretReference>("vault", WAIT, |r| r.ready())
        .await;
    let id = ready.status.unwrap().id.expect("the reference's UUID");
    let mapped = support::wait_until(WAIT, || async {
        let i = integrations.get_opt(&integration).await.ok()??;
        i.ready().then_some(i)
    })
    .await
    .expect("the integration is created once its reference is Ready");
    assert!(mapped.status.unwrap().id.is_some());
    let wanted =
        json!([{"target_field": "key", "secret_reference_id": id, "secret_key": "openai_key"}]);
    assert_eq!(
        remote_integration(&h, &integration).await["secret_mappings"],
        wanted
    );
    assert_eq!(h.count(INTEGRATION_POST).await, 1, "one POST");

    h.assert_no_write_over(Duration::from_secs(4)).await;

    // The mappings cleared in the console: put back with one PUT.
    h.console_edit_corrected_once(
        &format!("/ai_gw/admin/v2/integrations/{integration}"),
        json!({"secret_mappings": []}),
        WAIT,
        INTEGRATION_PUT,
        || async { remote_integration(&h, &integration).await["secret_mappings"] == wanted },
    )
    .await;

    // The reference cannot go while the Integration maps it: it says who, and waits.
    let holder = format!("Integration {integration}");
    h.delete_waits_for::<SecretReference>("vault", &holder)
        .await;
    assert_eq!(
        h.count(SECRET_REFERENCE_DELETE).await,
        0,
        "no delete tried while mapped"
    );
    assert!(!remote(&h, &reference).await.is_null());

    // The Integration goes: then the reference does.
    integrations
        .delete(&integration, &Default::default())
        .await
        .unwrap();
    assert!(
        support::gone_within(&api(&h), &reference, Duration::from_secs(60)).await,
        "the SecretReference went once no Integration mapped it"
    );
    assert!(remote(&h, &reference).await.is_null(), "deleted remotely");
    assert!(
        remote_integration(&h, &integration).await.is_null(),
        "integration deleted"
    );
    h.stop().await;
}

/// The emulator's record of the integration `slug`.
async fn remote_integration(h: &Harness, slug: &str) -> Value {
    h.remote_record("integrations", "slug", slug).await
}

/// An integration whose key the gateway reads through a secret reference, made in the console,
/// applied as `aigw export` writes it (`secretMappings` naming the reference's UUID, no key from
/// a Secret): adopted without a write. (It once sent its "write-only values" on adoption, an
/// empty document, since nothing had recorded their hash.)
#[tokio::test]
async fn a_mapped_integration_as_exported_is_adopted_without_a_write() {
    let h = Harness::start_with_secret_namespace("secmap-adopt", Duration::from_secs(1)).await;
    let slug = h.cluster_name("console-mapped");
    let reference = h
        .post(
            "/ai_gw/admin/v2/secret-references",
            json!({"name": "Console vault", "slug": format!("{slug}-ref"),
                        "manager_type": "aws_sm", "secret_path": "prod/openai",
                        "auth_config": {"aws_auth_type": "accessKey", "aws_region": "eu-west-1",
                                        "aws_access_key_id": KEY_ID,
                                        "aws_secret_access_key": FIRST_SECRET}}),
        )
        .await;
    let reference_id = reference["id"]
        .as_str()
        .expect("the reference's id")
        .to_string();
    h.post(
        "/ai_gw/admin/v2/integrations",
        json!({"name": "Console mapped", "slug": slug, "ai_provider_id": "open-ai",
                    "secret_mappings": [{"target_field": "key",
                                         "secret_reference_id": reference_id}]}),
    )
    .await;
    let before = h.remote_writes().await;
    let integrations: Api<aigw::resources::Integration> = Api::all(h.env.client.clone());
    let spec = json!({"slug": slug, "name": "Console mapped", "aiProviderId": "open-ai",
                      "secretMappings": [{"targetField": "key", "secretReference": reference_id}],
                      "deletionPolicy": "Orphan"});
    h.create_cluster::<aigw::resources::Integration>("console-mapped", spec)
        .await;
    assert!(
        support::ready_within(&integrations, &slug, WAIT).await,
        "the exported integration is adopted"
    );
    h.assert_no_write_since(before, "adopting the export").await;
    h.stop().await;
}
