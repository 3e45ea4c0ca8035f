//! Integration (cluster-scoped) and Provider on a real kube-apiserver against the emulator over
//! HTTP: the upstream key comes from a labelled Secret of the operator's namespace and reaches
//! the API write-only, each Secret change is exactly one PUT, no key value shows in status,
//! events, logs, metrics or CLI output; workspace access is merged per workspace and a removed
//! one is disabled without touching any other row.

use crate::support;

use std::time::Duration;

use aigw::resources::Integration;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use support::endpoints::{INTEGRATION_PUT, INTEGRATION_WORKSPACES_PUT};
use support::harness::{Harness, captured_logs};
use support::objects::Conditions;
use support::objects::{WS_A, WS_B, WS_OTHER};

const WAIT: Duration = Duration::from_secs(30);
const FIRST_KEY: &str = "sk-upstream-Fq3Wz8Lm1Rt6";
const SECOND_KEY: &str = "sk-upstream-Kd9Pv4Hx2Ny7";
const THIRD_KEY: &str = "sk-upstream-Bs5Jc7Qe0Ua3";

/// The upstream key Secret in the operator's namespace (the test namespace), labelled for
/// cluster-scoped readers unless `labelled` is false.
async fn put_key(h: &Harness, value: &str, labelled: bool) {
    h.put_secret("openai-upstream", json!({"api-key": value}), labelled)
        .await;
}

fn integration_spec(h: &Harness, workspaces: Value) -> Value {
    json!({"slug": h.cluster_name("openai"), "name": "OpenAI prod", "aiProviderId": "open-ai",
           "keySecretRef": {"name": "openai-upstream", "key": "api-key"},
           "configurations": {"aws_region": "eu-west-1"},
           "workspaces": workspaces})
}

async fn create_integration(h: &Harness, name: &str, spec: Value) -> Api<Integration> {
    h.create_cluster::<Integration>(name, spec).await;
    h.cluster_api()
}

/// A harness with its own secret namespace (drift every second) and the upstream key
/// [`FIRST_KEY`] in a Secret labelled cluster-readable.
async fn with_readable_key(prefix: &str) -> Harness {
    let h = Harness::start_with_secret_namespace(prefix, Duration::from_secs(1)).await;
    put_key(&h, FIRST_KEY, true).await;
    h
}

/// A harness with `grants` (drift every second), the readable key and the Integration
/// `granted` (slug `<prefix>-{slug}`, in [`WS_A`]) Ready.
async fn with_granted_integration(prefix: &str, grants: Value, slug: &str) -> Harness {
    let h = Harness::start_with_grants(prefix, Duration::from_secs(1), grants).await;
    put_key(&h, FIRST_KEY, true).await;
    let mut spec = integration_spec(&h, json!([{"id": WS_A}]));
    spec["slug"] = json!(h.cluster_name(slug));
    create_integration(&h, "granted", spec).await;
    h.wait_cluster::<Integration>("granted", WAIT, |i| i.ready())
        .await;
    h
}

/// Creates the Provider `openai-a`; the message of its `Stalled` condition once it says
/// `reason`.
async fn provider_stalled(h: &Harness, reason: &str) -> String {
    support::objects::create::<aigw::resources::Provider>(&h.env, "openai-a", provider_spec(h))
        .await;
    let stalled = h
        .wait_for::<aigw::resources::Provider>("openai-a", WAIT, |p| p.stalled_with(reason))
        .await;
    stalled.condition("Stalled").unwrap().2
}

/// Whether the Integration `openai` is gone within a minute.
async fn openai_gone(h: &Harness, integrations: &Api<Integration>) -> bool {
    support::gone_within(
        integrations,
        &h.cluster_name("openai"),
        Duration::from_secs(60),
    )
    .await
}

/// The emulator's record of the integration, key in clear.
async fn remote(h: &Harness, slug: &str) -> Value {
    h.remote_record("integrations", "slug", slug).await
}

fn row(remote: &Value, id: &str) -> Value {
    remote["workspaces"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["id"] == id).cloned())
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn the_key_comes_from_a_labelled_secret_and_each_change_is_one_put() {
    let h = Harness::start_with_secret_namespace("int-key", Duration::from_secs(1)).await;
    put_key(&h, FIRST_KEY, true).await;
    let slug = h.cluster_name("openai");
    create_integration(&h, "openai", integration_spec(&h, json!([{"id": WS_A}]))).await;

    let ready = h
        .wait_cluster::<Integration>("openai", WAIT, |i| i.ready())
        .await;
    let status = ready.status.clone().unwrap();
    assert_eq!(status.slug.as_deref(), Some(slug.as_str()));
    assert_eq!(status.workspaces, vec![WS_A.to_string()]);
    let stored = remote(&h, &slug).await;
    assert_eq!(stored["key"], FIRST_KEY, "the key reached the API");
    assert_eq!(stored["configurations"]["aws_region"], "eu-west-1");
    assert_eq!(row(&stored, WS_A)["enabled"], true);
    assert_eq!(
        h.state().await["providers"],
        json!([]),
        "create_default_provider: false, so no provider nobody manages"
    );

    // Steady state over several drift intervals: reads only.
    h.assert_no_write_over(Duration::from_secs(4)).await;

    // Each Secret change: the new key reaches the API with exactly one PUT.
    for (n, value) in [SECOND_KEY, THIRD_KEY].into_iter().enumerate() {
        put_key(&h, value, true).await;
        support::wait_until(WAIT, || async {
            (remote(&h, &slug).await["key"] == value).then_some(())
        })
        .await
        .unwrap_or_else(|| panic!("key {n} never reached the API"));
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(
            h.count(INTEGRATION_PUT).await,
            n as u64 + 1,
            "one PUT per Secret change"
        );
    }
    assert_eq!(remote(&h, &slug).await["key_writes"], 3);
    assert_eq!(
        h.count(INTEGRATION_WORKSPACES_PUT).await,
        0,
        "the access rows were not touched"
    );

    // A keySecretRef naming another namespace is refused before any read.
    let mut elsewhere = integration_spec(&h, json!([]));
    elsewhere["slug"] = json!(h.cluster_name("elsewhere"));
    elsewhere["keySecretRef"]["namespace"] = json!("kube-system");
    create_integration(&h, "elsewhere", elsewhere).await;
    let message = h
        .cluster_condition_message::<Integration>(
            "elsewhere",
            WAIT,
            ("Stalled", "SecretNotReadable"),
        )
        .await;
    assert!(message.contains("kube-system"), "{message}");

    // No key value anywhere but the API.
    let statuses = support::statuses(&Api::<Integration>::all(h.env.client.clone())).await;
    let events = h.all_events_text().await;
    assert!(events.contains("Updated"), "{events}");
    let cli = format!(
        "{}{}",
        h.aigw_api(&["integrations", "get", &slug]).await,
        h.aigw_api(&["integrations", "list"]).await
    );
    assert!(cli.contains("masked_key"), "{cli}");
    h.assert_hidden(&[FIRST_KEY, SECOND_KEY, THIRD_KEY], &statuses, &cli)
        .await;

    // Deleting it deletes the remote integration.
    let api = Api::<Integration>::all(h.env.client.clone());
    h.delete_cluster::<Integration>("openai").await;
    assert!(
        support::gone_within(&api, &h.cluster_name("openai"), Duration::from_secs(60)).await,
        "the Integration went"
    );
    assert!(remote(&h, &slug).await.is_null(), "deleted remotely");
    h.stop().await;
}

#[tokio::test]
async fn a_removed_workspace_is_disabled_and_no_other_row_is_touched() {
    let h = with_readable_key("int-access").await;
    let slug = h.cluster_name("openai");
    let workspaces = json!([
        {"id": WS_A, "usageLimits": {"creditLimit": 500, "type": "cost", "periodicReset": "monthly"}},
        {"id": WS_B, "rateLimits": {"type": "requests", "unit": "rpm", "value": 60}}
    ]);
    let api = create_integration(&h, "openai", integration_spec(&h, workspaces)).await;
    h.wait_cluster::<Integration>("openai", WAIT, |i| {
        i.ready() && i.status.as_ref().is_some_and(|s| s.workspaces.len() == 2)
    })
    .await;
    let stored = remote(&h, &slug).await;
    assert_eq!(row(&stored, WS_A)["usage_limits"][0]["credit_limit"], 500);
    assert_eq!(row(&stored, WS_B)["rate_limits"][0]["value"], 60);

    // A row aigw does not manage, granted out of band.
    let rows = json!({"workspaces": [{"id": WS_OTHER, "enabled": true}], "create_default_provider": false});
    h.put(
        &format!("/ai_gw/admin/v2/integrations/{slug}/workspaces"),
        rows,
    )
    .await;
    let before = remote(&h, &slug).await;
    h.reset_stats().await;

    let dropped = json!({"spec": {"workspaces": [
        {"id": WS_A, "usageLimits": {"creditLimit": 500, "type": "cost", "periodicReset": "monthly"}}]}});
    support::merge_patch(&api, &slug, dropped).await;
    h.wait_cluster::<Integration>("openai", WAIT, |i| {
        i.ready() && i.status.as_ref().is_some_and(|s| s.workspaces == [WS_A])
    })
    .await;
    let after = remote(&h, &slug).await;
    assert_eq!(row(&after, WS_B)["enabled"], false, "disabled, not deleted");
    assert_eq!(row(&after, WS_B)["status"], "archived");
    for untouched in [WS_A, WS_OTHER] {
        assert_eq!(
            row(&after, untouched),
            row(&before, untouched),
            "row {untouched} was not touched"
        );
    }
    assert_eq!(
        h.count(INTEGRATION_WORKSPACES_PUT).await,
        1,
        "one PUT, naming only the removed row"
    );
    assert_eq!(h.count(INTEGRATION_PUT).await, 0);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(h.remote_writes().await, 1, "nothing more at steady state");
    assert_eq!(
        h.state().await["providers"],
        json!([]),
        "no default provider"
    );
    h.stop().await;
}

fn provider_spec(h: &Harness) -> Value {
    json!({"slug": format!("{}-openai-a", h.env.namespace), "name": "OpenAI for team A",
           "workspaceId": WS_A, "integration": h.cluster_name("openai"), "note": "managed",
           "usageLimits": {"creditLimit": 200, "type": "cost"}})
}

#[tokio::test]
async fn a_config_naming_a_provider_resource_applies_its_slug_with_one_put_once_ready() {
    let h = with_readable_key("int-prov").await;
    let config = json!({"name": "routes", "config": {"targets": [{"weight": 1}]}});
    support::objects::create::<aigw::resources::Config>(&h.env, "routes", config).await;
    let slug = h
        .wait_for::<aigw::resources::Config>("routes", WAIT, |c| c.ready())
        .await
        .status
        .unwrap()
        .slug
        .unwrap();

    // The Config names a Provider that does not exist yet, which binds an Integration that does
    // not exist yet: each waits, naming what it waits for, and nothing is written.
    h.reset_stats().await;
    let refs = json!({"spec": {"resourceRefs": [
        {"path": "/targets/0/provider", "kind": "Provider", "name": "openai-a"}]}});
    h.env
        .api::<aigw::resources::Config>()
        .patch("routes", &PatchParams::default(), &Patch::Merge(&refs))
        .await
        .unwrap();
    let message = h
        .condition_message::<aigw::resources::Config>(
            "routes",
            WAIT,
            ("Ready", "ReferenceNotReady"),
        )
        .await;
    assert!(message.contains("Provider openai-a"), "{message}");
    let message = provider_stalled(&h, "IntegrationNotReady").await;
    assert!(message.contains(&h.cluster_name("openai")), "{message}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(h.remote_writes().await, 0, "nothing written while waiting");

    // The Integration grants the workspace: the provider is made, then the Config applies its
    // slug with exactly one PUT.
    create_integration(&h, "openai", integration_spec(&h, json!([{"id": WS_A}]))).await;
    let provider = h
        .wait_for::<aigw::resources::Provider>("openai-a", WAIT, |p| p.ready())
        .await;
    let provider_slug = provider.status.clone().unwrap().slug.unwrap();
    assert_eq!(provider_slug, format!("{}-openai-a", h.env.namespace));
    h.wait_for::<aigw::resources::Config>("routes", WAIT, |c| c.ready())
        .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(h.count("PUT /ai_gw/v2/configs/{slug}").await, 1, "one PUT");
    assert_eq!(h.count("POST /ai_gw/v2/providers").await, 1);
    let document = h.get(&format!("/ai_gw/v2/configs/{slug}")).await;
    let document: Value = serde_json::from_str(document["config"].as_str().unwrap()).unwrap();
    assert_eq!(
        document["targets"][0]["provider"],
        format!("@{provider_slug}"),
        "{document}"
    );
    let state = h.state().await;
    let made = state["providers"].as_array().unwrap();
    assert_eq!(made.len(), 1, "only the managed provider: {made:?}");
    assert_eq!(made[0]["workspace_id"], WS_A);
    assert_eq!(made[0]["usage_limits"]["credit_limit"], 200);

    // Steady state: the provider is read (its read carries the upstream key), never copied.
    h.assert_no_write_over(Duration::from_secs(3)).await;
    assert!(h.count("GET /ai_gw/v2/providers/{providerId}").await > 0);
    let statuses = support::statuses(&h.env.api::<aigw::resources::Provider>()).await;
    let events = h.all_events_text().await;
    let logs = captured_logs();
    for text in [&statuses, &events, &logs] {
        assert!(!text.contains(FIRST_KEY), "the upstream key leaked");
    }

    // Deletion runs in reverse: the Integration waits for its Provider, the Provider for the
    // Config that names it.
    let integrations = Api::<Integration>::all(h.env.client.clone());
    h.delete_cluster::<Integration>("openai").await;
    let message = h
        .cluster_condition_message::<Integration>("openai", WAIT, ("Stalled", "StillReferenced"))
        .await;
    assert!(
        message.contains(&format!("{}/openai-a", h.env.namespace)),
        "{message}"
    );
    h.env.delete::<aigw::resources::Provider>("openai-a").await;
    h.wait_for::<aigw::resources::Provider>("openai-a", WAIT, |p| {
        p.stalled_with("StillReferenced")
    })
    .await;
    assert_eq!(
        h.state().await["providers"].as_array().map(Vec::len),
        Some(1)
    );
    h.env
        .delete_and_wait::<aigw::resources::Config>("routes", WAIT)
        .await;
    assert!(
        openai_gone(&h, &integrations).await,
        "the Integration went once its Provider had gone"
    );
    let state = h.state().await;
    assert_eq!(state["providers"], json!([]), "the provider was deleted");
    assert_eq!(
        state["integrations"],
        json!([]),
        "the integration was deleted"
    );
    h.stop().await;
}

#[tokio::test]
async fn grants_decide_which_integrations_a_namespace_may_bind() {
    let grants =
        json!([{"namespaces": ["{ns}"], "workspaces": [WS_A], "integrations": ["anthropic-prod"]}]);
    let h = Harness::start_with_grants("int-grant", Duration::from_secs(1), grants).await;
    put_key(&h, FIRST_KEY, true).await;
    create_integration(
        &h,
        "openai",
        integration_spec(&h, json!([{"id": WS_A}, {"id": WS_B}])),
    )
    .await;
    h.wait_cluster::<Integration>("openai", WAIT, |i| i.ready())
        .await;
    h.reset_stats().await;
    let message = provider_stalled(&h, "IntegrationNotAllowed").await;
    assert!(message.contains("spec.grants[].integrations"), "{message}");
    // Another workspace than the grants' is refused by the workspace rule.
    let mut elsewhere = provider_spec(&h);
    elsewhere["workspaceId"] = json!(WS_B);
    elsewhere["slug"] = json!(format!("{}-openai-b", h.env.namespace));
    support::objects::create::<aigw::resources::Provider>(&h.env, "openai-b", elsewhere).await;
    h.wait_for::<aigw::resources::Provider>("openai-b", WAIT, |p| {
        p.stalled_with("WorkspaceNotAllowed")
    })
    .await;
    assert_eq!(
        h.count("POST /ai_gw/v2/providers").await,
        0,
        "nothing created"
    );
    // Refused Providers bind nothing, so they do not pin the Integration: it is deleted (once
    // a refused tenant's Provider held it forever, StillReferenced).
    let integrations = Api::<Integration>::all(h.env.client.clone());
    h.delete_cluster::<Integration>("openai").await;
    assert!(
        openai_gone(&h, &integrations).await,
        "the Integration was pinned by Providers its grants refuse"
    );
    assert_eq!(
        h.state().await["integrations"],
        json!([]),
        "deleted remotely"
    );
    h.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Found by attacks (branch attack-int): each test below states a guarantee, and once failed.
// ---------------------------------------------------------------------------------------------

/// An organisation integration made out of band (not by aigw), enabled for `workspace`; its id.
async fn out_of_band_integration(h: &Harness, slug: &str, workspace: &str) -> String {
    let created = h
        .post(
            "/ai_gw/admin/v2/integrations",
            json!({"name": format!("out of band {slug}"), "ai_provider_id": "anthropic",
                        "slug": slug, "key": "sk-out-of-band-Qw8Er4Ty6U",
                        "create_default_provider": false}),
        )
        .await;
    let created = created.get("data").cloned().unwrap_or(created);
    let rows = json!({"workspaces": [{"id": workspace, "enabled": true}], "create_default_provider": false});
    h.put(
        &format!("/ai_gw/admin/v2/integrations/{slug}/workspaces"),
        rows,
    )
    .await;
    created["id"]
        .as_str()
        .expect("an integration id")
        .to_string()
}

fn remote_providers(state: &Value) -> Vec<Value> {
    state["providers"].as_array().cloned().unwrap_or_default()
}

/// Tenancy: a Provider's `spec.integrationId` is resolved to the remote integration first, and
/// granted only by that integration's UUID or slug; a grant entry naming an Integration
/// resource stands for what that resource recorded. Here `grants[].integrations` names the
/// Integration *resource* `<ns>-granted` (remote slug `<ns>-granted-slug`), and
/// `integrationId: <ns>-granted` is the slug of another, ungranted integration: it is refused.
/// Once, `integrationId` was matched against the list as written, passed, and the namespace
/// bound the other integration.
#[tokio::test]
async fn an_integration_id_is_granted_by_the_remote_integration_never_by_a_resource_name() {
    let grants = json!([{"namespaces": ["{ns}"], "workspaces": [WS_A],
                          "integrations": ["{ns}-granted"]}]);
    let h = with_granted_integration("atk-intid", grants, "granted-slug").await;
    // Another team's integration whose slug equals the granted resource's name.
    let other_slug = h.cluster_name("granted");
    let other_id = out_of_band_integration(&h, &other_slug, WS_A).await;

    let provider = json!({"slug": format!("{}-bound", h.env.namespace), "name": "bound",
                          "workspaceId": WS_A, "integrationId": other_slug});
    support::objects::create::<aigw::resources::Provider>(&h.env, "bound", provider).await;
    let settled = support::wait_until(WAIT, || async {
        let p = h
            .env
            .api::<aigw::resources::Provider>()
            .get_opt("bound")
            .await
            .ok()??;
        p.status
            .as_ref()?
            .conditions
            .iter()
            .any(|c| c.type_ == "Stalled" && c.status == "True")
            .then_some(p)
    })
    .await;
    let made: Vec<Value> = remote_providers(&h.state().await)
        .into_iter()
        .filter(|p| p["integration_id"] == other_id.as_str())
        .collect();
    let status = settled.and_then(|p| p.status);
    h.stop().await;
    assert!(
        made.is_empty(),
        "the namespace bound integration {other_slug} ({other_id}), which its grants do not name: \
         {made:?}; Provider status: {status:?}"
    );
}

/// `spec.integrationId` is "the UUID (or slug)": bound by slug, the provider is created with the
/// UUID the slug resolves to (recorded as `status.integrationId`), and its reads, which name
/// the integration by UUID, agree: it becomes Ready. Once, every read after the create was
/// taken for an immutable conflict and the Provider stalled forever.
#[tokio::test]
async fn a_provider_bound_by_integration_slug_becomes_ready() {
    let h = Harness::start_with_secret_namespace("atk-intslug", Duration::from_secs(1)).await;
    let slug = h.cluster_name("by-slug");
    out_of_band_integration(&h, &slug, WS_A).await;
    let provider = json!({"slug": format!("{}-by-slug", h.env.namespace), "name": "by slug",
                          "workspaceId": WS_A, "integrationId": slug});
    support::objects::create::<aigw::resources::Provider>(&h.env, "by-slug", provider).await;
    support::wait_until(WAIT, || async {
        (h.count("POST /ai_gw/v2/providers").await > 0).then_some(())
    })
    .await
    .expect("the provider was created");
    // Several drift intervals (1 s): every later reconcile reads the provider back.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let providers = h.env.api::<aigw::resources::Provider>();
    let provider = providers.get_opt("by-slug").await.ok().flatten();
    let ready = provider.clone().filter(|p| p.ready());
    let status = provider.and_then(|p| p.status);
    let posts = h.count("POST /ai_gw/v2/providers").await;
    h.stop().await;
    assert!(
        ready.is_some(),
        "never Ready after {posts} create(s); status: {status:?}"
    );
}

/// Tenancy on adopt and delete: a namespace granted integration `<ns>-granted` (and adoption)
/// names, by `spec.slug`, an existing provider of its workspace that binds an ungranted
/// integration. It is not adopted (nothing of it is recorded), and deleting the Provider never
/// deletes it. Once, the adoption was recorded before the integration was compared, and the
/// deletion then deleted the other integration's provider.
#[tokio::test]
async fn a_provider_of_another_integration_is_never_adopted_nor_deleted() {
    let grants = json!([{"namespaces": ["{ns}"], "workspaces": [WS_A], "allowAdoption": true,
                          "integrations": ["{ns}-granted"]}]);
    let h = with_granted_integration("atk-adopt", grants, "granted").await;
    let other = h.cluster_name("other");
    let other_id = out_of_band_integration(&h, &other, WS_A).await;
    let victim = format!("{}-victim", h.env.namespace);
    h.post(
        "/ai_gw/v2/providers",
        json!({"name": "another team's", "integration_id": other_id, "workspace_id": WS_A,
                    "slug": victim}),
    )
    .await;

    let grab = json!({"slug": victim, "name": "grab", "workspaceId": WS_A,
                      "integration": h.cluster_name("granted")});
    let providers = h.env.api::<aigw::resources::Provider>();
    support::objects::create::<aigw::resources::Provider>(&h.env, "grab", grab).await;
    // Whatever it concludes (it was once Stalled with the victim's id recorded; now Stalled
    // without it), the reconcile settled.
    let stalled = h
        .wait_for::<aigw::resources::Provider>("grab", WAIT, |p| {
            p.status.as_ref().is_some_and(|s| !s.conditions.is_empty())
        })
        .await;
    let recorded = stalled.status.clone().unwrap();
    h.reset_stats().await;
    providers.delete("grab", &Default::default()).await.unwrap();
    assert!(
        support::gone_within(&providers, "grab", WAIT).await,
        "the Provider went"
    );
    let left = remote_providers(&h.state().await)
        .into_iter()
        .any(|p| p["slug"] == victim.as_str());
    let deletes = h.count("DELETE /ai_gw/v2/providers/{providerId}").await;
    h.stop().await;
    assert!(
        left,
        "provider {victim} of ungranted integration {other} was deleted ({deletes} DELETE) by a \
         namespace granted only {{ns}}-granted; the Provider had recorded id {:?} and conditions {:?}",
        recorded.id, recorded.conditions
    );
}

/// Secrecy in `aigw plan`, `aigw export` and `aigw api`: a configuration value the spec takes
/// from a Secret (`spec.secretRefs`) is substituted when the integration is sent and never shown
/// anywhere else, even when the API reads it back unmasked (any field outside the secret-word
/// list, e.g. `aws_access_key_id` or `aws_external_id`). Once, plan printed it, export wrote it
/// into Git and `aigw api integrations get` printed it.
#[tokio::test]
async fn plan_export_and_api_never_show_a_configuration_value_from_a_secret() {
    use aigw::gitops::{export, load, plan, validate};
    const FROM_SECRET: &str = "ext-id-from-secret-Vb7Nm3Kx9";
    let h = Harness::start_with_secret_namespace("atk-cfgsec", Duration::from_secs(1)).await;
    let string_data = json!({"api-key": FIRST_KEY, "external-id": FROM_SECRET});
    h.put_secret("openai-upstream", string_data, true).await;
    let slug = h.cluster_name("bedrock");
    let mut spec = integration_spec(&h, json!([]));
    spec["slug"] = json!(slug);
    spec["aiProviderId"] = json!("bedrock");
    spec["secretRefs"] = json!([{"path": "/aws_external_id",
                                 "secretKeyRef": {"name": "openai-upstream", "key": "external-id"}}]);
    create_integration(&h, "bedrock", spec.clone()).await;
    h.wait_cluster::<Integration>("bedrock", WAIT, |i| i.ready())
        .await;
    assert_eq!(
        remote(&h, &slug).await["configurations"]["aws_external_id"],
        FROM_SECRET,
        "the Secret value reached the API"
    );

    let client = aigw::api::Client::new(aigw::api::ClientConfig::new(
        h.emulator.management_url(),
        h.emulator.gateway_url(),
        std::sync::Arc::new(aigw::api::StaticToken::new(support::harness::TOKEN)),
    ))
    .unwrap();
    // The manifest in Git: the same Integration, its region changed.
    let mut changed = spec.clone();
    changed["configurations"]["aws_region"] = json!("us-east-1");
    let manifest = serde_yaml::to_string(&json!({
        "apiVersion": "aigw.io/v1alpha1", "kind": "Integration",
        "metadata": {"name": "bedrock"}, "spec": changed
    }))
    .unwrap();
    let mut loaded = load::Loaded::default();
    load::parse_into(&mut loaded, "i.yaml", &manifest, false);
    let report = validate::Validator::new().validate(&loaded);
    assert!(report.is_valid(), "{:?}", report.problems);
    let planned = plan::plan(&client, None, &report.manifests).await.unwrap();
    let shown_plan = serde_json::to_string(&planned).unwrap();
    let exported = export::export(&client, &export::ExportOptions::default())
        .await
        .unwrap();
    let shown_export: String = exported.files.iter().map(|f| f.content.clone()).collect();
    let cli = h.aigw_api(&["integrations", "get", &slug]).await;
    h.stop().await;
    let leaks: Vec<&str> = [
        ("plan", &shown_plan),
        ("export", &shown_export),
        ("aigw api", &cli),
    ]
    .into_iter()
    .filter(|(_, text)| text.contains(FROM_SECRET))
    .map(|(what, _)| what)
    .collect();
    assert!(
        leaks.is_empty(),
        "a value taken from a Secret is shown by {leaks:?}\n--- plan ---\n{shown_plan}\n--- export ---\n{shown_export}"
    );
}

/// Exactly once: one PUT per Secret change, even when the Integration is edited (metadata only:
/// an annotation, as Argo CD or kubectl writes) during the reconcile that PUTs it. The hash of
/// what was sent is the result of a side effect: its status write re-reads on a conflict and
/// writes again. Once, that write was guarded by the resourceVersion first read only, so it
/// conflicted, the hash was lost, and the same key was PUT again.
#[tokio::test]
async fn a_secret_change_is_one_put_even_when_the_integration_is_annotated_meanwhile() {
    let h = Harness::start_with_secret_namespace("atk-oneput", Duration::from_secs(1)).await;
    put_key(&h, FIRST_KEY, true).await;
    let slug = h.cluster_name("openai");
    let api = create_integration(&h, "openai", integration_spec(&h, json!([{"id": WS_A}]))).await;
    h.wait_cluster::<Integration>("openai", WAIT, |i| i.ready())
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    h.reset_stats().await;
    // Slow API calls, so that the reconcile the Secret change starts is still running when the
    // annotation lands.
    h.faults(json!({"latency_ms": 1500})).await;
    put_key(&h, SECOND_KEY, true).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let annotate = json!({"metadata": {"annotations": {"example.com/touched": "yes"}}});
    support::merge_patch(&api, &slug, annotate).await;
    support::wait_until(WAIT, || async {
        (remote(&h, &slug).await["key"] == SECOND_KEY).then_some(())
    })
    .await
    .expect("the new key reached the API");
    tokio::time::sleep(Duration::from_secs(8)).await;
    h.faults(json!({})).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let puts = h.count(INTEGRATION_PUT).await;
    let writes = remote(&h, &slug).await["key_writes"].clone();
    h.stop().await;
    assert_eq!(
        puts, 1,
        "one Secret change, {puts} PUTs of the integration (emulator key_writes {writes})"
    );
}

/// A paused Integration holds back a change of its input, a new key in its Secret, as it holds
/// back a spec edit (the conformance matrix: `conformance::integration`, `pause`): nothing is
/// written until unpaused, and then the key that waited is applied.
#[tokio::test]
async fn a_paused_integration_holds_a_secret_change_until_let_go() {
    let drift = Duration::from_secs(1);
    let h = Harness::start_with_secret_namespace("int-modes", drift).await;
    put_key(&h, FIRST_KEY, true).await;
    let slug = h.cluster_name("openai");
    let integrations =
        create_integration(&h, "openai", integration_spec(&h, json!([{"id": WS_A}]))).await;
    h.wait_cluster::<Integration>("openai", WAIT, |i| i.ready())
        .await;
    let name = h.cluster_name("openai");
    let pause = json!({"metadata": {"annotations": {"aigw.io/paused": "true"}}});
    support::merge_patch(&integrations, &name, pause).await;
    h.wait_cluster::<Integration>("openai", WAIT, |i| i.is_true("Paused"))
        .await;
    h.reset_stats().await;
    put_key(&h, SECOND_KEY, true).await;
    tokio::time::sleep(drift * 3 + Duration::from_millis(500)).await;
    assert_eq!(h.remote_writes().await, 0, "{}", h.stats().await);
    assert_eq!(remote(&h, &slug).await["key"], FIRST_KEY);

    let unpause = json!({"metadata": {"annotations": {"aigw.io/paused": null}}});
    support::merge_patch(&integrations, &name, unpause).await;
    let let_go = support::wait_until(WAIT, || async {
        (remote(&h, &slug).await["key"] == SECOND_KEY).then_some(())
    })
    .await;
    assert!(
        let_go.is_some(),
        "the key that waited was not applied: {}",
        h.state().await
    );
    h.stop().await;
}

/// `resetUsage` is a trigger: each new value resets the provider's usage with one PUT, the
/// same value again does nothing; `expiresAt` is sent once and kept.
#[tokio::test]
async fn a_provider_resets_usage_once_per_trigger_value_and_keeps_its_expiry() {
    let h = with_readable_key("int-reset").await;
    create_integration(&h, "openai", integration_spec(&h, json!([{"id": WS_A}]))).await;
    h.wait_cluster::<Integration>("openai", WAIT, |i| i.ready())
        .await;
    let mut spec = provider_spec(&h);
    spec["expiresAt"] = json!("2031-01-01T00:00:00Z");
    support::objects::create::<aigw::resources::Provider>(&h.env, "openai-a", spec).await;
    let settled = |value: Option<&'static str>| {
        move |p: &aigw::resources::Provider| {
            p.ready()
                && p.status
                    .as_ref()
                    .is_some_and(|s| s.observed_reset_usage.as_deref() == value)
        }
    };
    h.wait_for::<aigw::resources::Provider>("openai-a", WAIT, settled(None))
        .await;
    let slug = format!("{}-openai-a", h.env.namespace);
    let stored = || async {
        h.state().await["providers"]
            .as_array()
            .and_then(|all| all.iter().find(|p| p["slug"] == slug.as_str()).cloned())
            .unwrap_or(Value::Null)
    };
    let created = stored().await;
    assert!(
        created["expires_at"]
            .as_str()
            .is_some_and(|e| e.starts_with("2031-01-01")),
        "{created}"
    );
    assert_eq!(created["last_reset_at"], Value::Null);
    use support::endpoints::PROVIDER_PUT as PUT;

    let mut resets = Vec::new();
    for (value, puts) in [("r1", 1), ("r1", 1), ("r2", 2)] {
        h.env
            .patch_spec::<aigw::resources::Provider>("openai-a", json!({"resetUsage": value}))
            .await;
        h.wait_for::<aigw::resources::Provider>("openai-a", WAIT, settled(Some(value)))
            .await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert_eq!(h.count(PUT).await, puts, "{}", h.stats().await);
        resets.push(stored().await["last_reset_at"].clone());
    }
    assert!(resets[0].is_string(), "r1 reset the usage");
    assert_eq!(resets[0], resets[1], "the same value again resets nothing");
    assert_ne!(resets[1], resets[2], "r2 reset it again");
    assert!(
        stored().await["expires_at"]
            .as_str()
            .is_some_and(|e| e.starts_with("2031-01-01"))
    );
    h.stop().await;
}

/// `spec.models` through the controller: a built-in model disabled, a custom one added, and
/// `allowAllModels` set, with one model-access PUT; a model the spec does not list is left as
/// it was; nothing is written again at steady state, and a model enabled out of band is
/// disabled again by the drift check.
#[tokio::test]
async fn model_access_is_applied_with_one_put_and_kept() {
    let h = with_readable_key("int-models").await;
    let slug = h.cluster_name("openai");
    let mut spec = integration_spec(&h, json!([{"id": WS_A}]));
    spec["models"] = json!({"allowAllModels": false, "models": [
        {"slug": "gpt-4o-mini", "enabled": false},
        {"slug": "ft-gpt-4o-acme", "custom": true, "baseModelSlug": "gpt-4o"}]});
    create_integration(&h, "openai", spec).await;
    h.wait_cluster::<Integration>("openai", WAIT, |i| i.ready())
        .await;
    use support::endpoints::INTEGRATION_MODELS_PUT as PUT_MODELS;
    let models = || async {
        let stored = remote(&h, &slug).await;
        let enabled: Vec<(String, bool)> = stored["models"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| {
                let on = m["enabled"] == json!(true) || m["enabled"] == json!(1);
                (m["slug"].as_str().unwrap_or_default().to_string(), on)
            })
            .collect();
        (enabled, stored["allow_all_models"].clone())
    };
    let (enabled, allow_all) = models().await;
    assert!(enabled.contains(&("gpt-4o".into(), true)), "{enabled:?}");
    assert!(
        enabled.contains(&("gpt-4o-mini".into(), false)),
        "{enabled:?}"
    );
    assert!(
        enabled.contains(&("ft-gpt-4o-acme".into(), true)),
        "{enabled:?}"
    );
    assert_eq!(allow_all, json!(false));
    assert_eq!(h.count(PUT_MODELS).await, 1, "{}", h.stats().await);

    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        h.count(PUT_MODELS).await,
        1,
        "nothing written at steady state"
    );

    h.put(
        &format!("/ai_gw/admin/v2/integrations/{slug}/models"),
        json!({"models": [{"slug": "gpt-4o-mini", "enabled": true}]}),
    )
    .await;
    let restored = support::wait_until(WAIT, || async {
        models()
            .await
            .0
            .contains(&("gpt-4o-mini".into(), false))
            .then_some(())
    })
    .await;
    assert!(
        restored.is_some(),
        "the out-of-band change stayed: {:?}",
        models().await
    );
    assert_eq!(h.count(PUT_MODELS).await, 3, "{}", h.stats().await);
    h.stop().await;
}

/// An operator started without `--connection-secret-namespace` cannot read a cluster-scoped
/// resource's Secrets: the Integration stalls saying which setting it lacks (a setting, not
/// the spec: reason `OperatorSettings`, the message readable, not masked), and the restart with
/// the setting takes it up without a spec change.
#[tokio::test]
async fn an_operator_without_a_secret_namespace_says_so_and_its_restart_with_one_takes_it_up() {
    let mut h = with_readable_key("int-nosecretns").await;
    let namespace = h.env.namespace.clone();
    h.restart_operator_with_secret_namespace(None).await;
    create_integration(&h, "openai", integration_spec(&h, json!([{"id": WS_A}]))).await;
    let stalled = h
        .wait_cluster::<Integration>("openai", WAIT, |i| i.stalled_with("OperatorSettings"))
        .await;
    let (_, _, message) = stalled.condition("Stalled").unwrap();
    assert!(
        message.contains("start it with --connection-secret-namespace")
            && message.contains("keySecretRef")
            && !message.contains("<masked>"),
        "{message}"
    );
    h.restart_operator_with_secret_namespace(Some(namespace))
        .await;
    h.wait_cluster::<Integration>("openai", WAIT, |i| i.ready())
        .await;
    h.stop().await;
}
