//! The CRDs on a real kube-apiserver: each kind round-trips, and admission rejects bad
//! manifests with a message that names the field.

use crate::support;

use aigw::resources::{Config, Deployment, RateLimitsPolicy};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::TestEnv;

fn dynamic_api(env: &TestEnv, kind: &str, plural: &str) -> Api<DynamicObject> {
    let resource = support::aigw_resource(kind, plural);
    Api::namespaced_with(env.client.clone(), &env.namespace, &resource)
}

const CONFIGS: (&str, &str) = ("Config", "configs");
const DEPLOYMENTS: (&str, &str) = ("Deployment", "deployments");
const POLICIES: (&str, &str) = ("RateLimitsPolicy", "ratelimitspolicies");

/// Creates the object `name` of `(kind, plural)` with `spec`.
async fn create_dynamic(env: &TestEnv, (kind, plural): (&str, &str), name: &str, spec: Value) {
    dynamic_api(env, kind, plural)
        .create(&PostParams::default(), &object(kind, name, spec))
        .await
        .unwrap();
}

/// A create that the apiserver checks and admits, or refuses, and stores nothing.
fn dry_run() -> PostParams {
    PostParams {
        dry_run: true,
        ..Default::default()
    }
}

fn object(kind: &str, name: &str, spec: serde_json::Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "aigw.io/v1alpha1", "kind": kind,
        "metadata": {"name": name}, "spec": spec,
    }))
    .unwrap()
}

fn config_spec() -> Value {
    json!({"name": "routing", "config": {"strategy": {"mode": "fallback"}, "targets": [{"provider": "@openai-prod"}]}})
}

fn policy_spec() -> Value {
    json!({"name": "per-key", "type": "requests", "unit": "rpm", "value": 100,
           "conditions": [{"key": "workspace_id", "value": "ws-1"}], "groupBy": [{"key": "api_key"}]})
}

fn deployment_spec() -> Value {
    json!({"name": "edge", "type": "production", "credentialsSecretRef": {"name": "edge-creds"},
           "authSettings": {"gatewayBaseUrl": "https://gw.example", "workspacesAllowed": ["ws-1"]}})
}

#[tokio::test]
async fn each_kind_round_trips_through_the_apiserver() {
    let env = TestEnv::new("crds-roundtrip").await;

    create_dynamic(&env, CONFIGS, "routing", config_spec()).await;
    let config = env.api::<Config>().get("routing").await.unwrap();
    assert_eq!(config.spec.name, "routing");
    assert_eq!(
        config.spec.config.to_value()["strategy"]["mode"],
        "fallback"
    );

    create_dynamic(&env, DEPLOYMENTS, "edge", deployment_spec()).await;
    let deployment = env.api::<Deployment>().get("edge").await.unwrap();
    assert_eq!(deployment.spec.credentials_secret_ref.name, "edge-creds");
    assert_eq!(
        deployment.spec.deletion_policy,
        aigw::resources::common::ArchivePolicy::Archive,
        "the apiserver defaults deletionPolicy"
    );

    create_dynamic(&env, POLICIES, "per-key", policy_spec()).await;
    let policy = env.api::<RateLimitsPolicy>().get("per-key").await.unwrap();
    assert_eq!(policy.spec.value, 100.0);
    env.cleanup().await;
}

/// The apiserver's refusal of the object `name` of `(kind, plural)` with `spec`.
async fn rejection(env: &TestEnv, (kind, plural): (&str, &str), name: &str, spec: Value) -> String {
    let created = dynamic_api(env, kind, plural)
        .create(&PostParams::default(), &object(kind, name, spec))
        .await;
    support::refusal(created, format!("an invalid {name}"))
}

#[tokio::test]
async fn invalid_manifests_are_rejected_naming_the_field() {
    let env = TestEnv::new("crds-invalid").await;

    let mut spec = policy_spec();
    spec["unit"] = json!("rps");
    let message = rejection(&env, POLICIES, "bad-unit", spec).await;
    support::assert_mentions(&message, &["spec.unit", "rps"]);

    let mut spec = deployment_spec();
    spec["type"] = json!("staging");
    let message = rejection(&env, DEPLOYMENTS, "bad-type", spec).await;
    assert!(message.contains("spec.type"), "{message}");

    let mut spec = config_spec();
    spec.as_object_mut().unwrap().remove("name");
    let message = rejection(&env, CONFIGS, "no-name", spec).await;
    support::assert_mentions(&message, &["spec.name", "Required"]);

    let mut spec = policy_spec();
    spec["groupBy"] = json!([]);
    let message = rejection(&env, POLICIES, "no-group", spec).await;
    assert!(message.contains("spec.groupBy"), "{message}");

    // Every spec string, list and map is bounded (a tenant could store 1.5 MiB in a name).
    let mut spec = policy_spec();
    spec["conditions"] = json!([{"key": "a".repeat(4097), "value": "ws"}]);
    let message = rejection(&env, POLICIES, "long-key", spec).await;
    support::assert_mentions(&message, &["spec.conditions[0].key", "4096"]);
    let mut spec = policy_spec();
    spec["conditions"] = json!(vec![json!({"key": "workspace_id", "value": "ws"}); 1001]);
    let message = rejection(&env, POLICIES, "many-conditions", spec).await;
    support::assert_mentions(&message, &["spec.conditions", "1000"]);

    // A reference names a Kubernetes object or a Secret key as Kubernetes checks them: one that
    // could never be found is refused, not waited on as missing.
    let mut spec = config_spec();
    spec["connectionRef"] = json!({"name": "Team_Connection"});
    let message = rejection(&env, CONFIGS, "bad-reference", spec).await;
    support::assert_mentions(&message, &["spec.connectionRef.name", "Team_Connection"]);
    let mut spec = config_spec();
    let secret = json!({"name": "pins", "key": "account pin"});
    spec["secretRefs"] = json!([{"path": "/targets/0/pin", "secretKeyRef": secret}]);
    let message = rejection(&env, CONFIGS, "bad-key", spec).await;
    support::assert_mentions(
        &message,
        &["spec.secretRefs[0].secretKeyRef.key", "account pin"],
    );

    // The apiserver checks an integer against a fractional minimum truncated: `qps: 0` passed
    // `minimum: 0.1` (and the client took it for no limit).
    let resource = support::aigw_resource("Connection", "connections");
    let connections = Api::<DynamicObject>::all_with(env.client.clone(), &resource);
    let secret = json!({"name": "t", "key": "token", "namespace": env.namespace});
    let spec = json!({"managementUrl": "https://api.example", "qps": 0,
                      "auth": {"bearerToken": {"secretRef": secret}}});
    let dry_run = dry_run();
    let created = connections
        .create(&dry_run, &object("Connection", "no-limit", spec))
        .await;
    let message = support::refusal(created, "a Connection of qps 0".to_string());
    support::assert_mentions(&message, &["spec.qps", "at least 0.1"]);
    env.cleanup().await;
}

#[tokio::test]
async fn immutable_fields_cannot_change() {
    let env = TestEnv::new("crds-immutable").await;
    let api = dynamic_api(&env, "RateLimitsPolicy", "ratelimitspolicies");
    support::create(&api, &object("RateLimitsPolicy", "fixed", policy_spec())).await;

    for (field, value, wanted) in [
        ("type", json!("tokens"), "type is immutable"),
        (
            "groupBy",
            json!([{"key": "workspace_id"}]),
            "groupBy is immutable",
        ),
        ("target", json!("mcp_tools"), "target is immutable"),
    ] {
        let mut spec = policy_spec();
        spec[field] = value;
        let patch = json!({"spec": spec});
        let result = api
            .patch("fixed", &PatchParams::default(), &Patch::Merge(&patch))
            .await;
        if field == "target" {
            // Absent is `llm` (what the API takes it for): `mcp_tools` later is a change …
            let err = result.unwrap_err();
            assert!(err.to_string().contains(wanted), "{err}");
            // … writing out the default is not.
            let patch = json!({"spec": {"target": "llm"}});
            api.patch("fixed", &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .expect("writing out the default target is allowed");
            continue;
        }
        let err = result.expect_err("an immutable field changed");
        assert!(
            err.to_string().contains(wanted) && err.to_string().contains(&format!("spec.{field}")),
            "{err}"
        );
    }

    // A mutable field still changes.
    let patch = json!({"spec": {"value": 250, "unit": "rph"}});
    support::merge_patch(&api, "fixed", patch).await;
    env.cleanup().await;
}

#[tokio::test]
async fn identity_fields_are_only_set_at_creation() {
    let env = TestEnv::new("crds-identity").await;
    let pp = PostParams::default();
    let remote_id = "0b6f2a1e-7c4d-4e8a-9f3b-2d5c6e7f8a9b";
    let workspace = "9f3c2b1a-0d4e-4f6a-8b7c-1e2d3f4a5b6c";
    let (config, policy) = (
        ("Config", "configs"),
        ("RateLimitsPolicy", "ratelimitspolicies"),
    );
    // The kind, the field, the value it is created with or added. (A policy's `target` may be
    // set once: absent, it is whatever the remote policy has.)
    for ((kind, plural), base, field, value) in [
        (config, config_spec(), "slug", "pc-routing-3f2a1b"),
        (config, config_spec(), "workspaceId", workspace),
        (
            ("Deployment", "deployments"),
            deployment_spec(),
            "deploymentId",
            remote_id,
        ),
        (policy, policy_spec(), "policyId", remote_id),
        (policy, policy_spec(), "workspaceId", workspace),
    ] {
        let api = dynamic_api(&env, kind, plural);
        let wanted = format!("spec.{field} cannot be added or removed after creation");
        // An explicit null reads as absent to aigw, so setting the field later is also refused.
        let named = |how: &str| format!("{}-{how}", field.to_lowercase());
        let (new, null, adopted) = (
            named("created-without"),
            named("null"),
            named("created-with"),
        );
        let (new, null, adopted) = (new.as_str(), null.as_str(), adopted.as_str());
        for (name, created, patched, what) in [
            (new, None, json!(value), "adding"),
            (null, Some(Value::Null), json!(value), "setting a null"),
            (adopted, Some(json!(value)), Value::Null, "removing"),
        ] {
            let mut spec = base.clone();
            if let Some(created) = created {
                spec[field] = created;
            }
            api.create(&pp, &object(kind, name, spec)).await.unwrap();
            let message = support::refused_patch(&api, name, json!({field: patched})).await;
            assert!(
                message.contains(&wanted),
                "{what} {kind} {field}: {message}"
            );
        }
        let message = support::refused_patch(&api, adopted, json!({field: "another"})).await;
        assert!(
            message.contains(&format!("{field} is immutable")),
            "changing {kind} {field}: {message}"
        );

        // The rule holds the identity only: other fields of every object still change.
        for name in [new, null, adopted] {
            let patch = json!({"spec": {"name": "renamed"}});
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .unwrap_or_else(|err| panic!("renaming {kind} {name}: {err}"));
        }
    }
    env.cleanup().await;
}

/// A Guardrail's and a RateLimitsPolicy's `target` is fixed at creation, absent meaning `llm`
/// (what the API takes it for): writing the default out later, as a manifest that spells every
/// field does, or leaving it out again, is no change and is allowed; any other value, and
/// removing a value that is not the default, is refused (a RateLimitsPolicy's rule alone let
/// `mcp_tools` be removed, which the API cannot follow).
#[tokio::test]
async fn a_target_may_be_written_out_as_its_default_and_never_changed() {
    let env = TestEnv::new("crds-target").await;
    let guardrail = json!({"name": "pii", "workspaceId": "9f3c2b1a-0d4e-4f6a-8b7c-1e2d3f4a5b6c",
                           "checks": [{"id": "default.regexMatch", "parameters": {"rule": "x"}}]});
    let mut policy = policy_spec();
    policy["workspaceId"] = json!("9f3c2b1a-0d4e-4f6a-8b7c-1e2d3f4a5b6c");
    for (kind, plural, base) in [
        ("Guardrail", "guardrails", guardrail),
        ("RateLimitsPolicy", "ratelimitspolicies", policy),
    ] {
        let api = dynamic_api(&env, kind, plural);
        let spec = |target: Option<&str>| {
            let mut spec = base.clone();
            if let Some(target) = target {
                spec["target"] = json!(target);
            }
            spec
        };
        let target = |value: Value| json!({"spec": {"target": value}});
        let refused = "spec.target is immutable (absent means llm)";

        support::create(&api, &object(kind, "implicit", spec(None))).await;
        support::merge_patch(&api, "implicit", target(json!("llm"))).await;
        support::merge_patch(&api, "implicit", target(Value::Null)).await;
        let message =
            support::refused_patch(&api, "implicit", json!({"target": "mcp_tools"})).await;
        support::assert_mentions(&message, &[refused, &format!("create a new {kind}")]);

        support::create(&api, &object(kind, "tools", spec(Some("mcp_tools")))).await;
        for value in [Value::Null, json!("llm")] {
            let message = support::refused_patch(&api, "tools", json!({"target": value})).await;
            support::assert_mentions(&message, &["target is immutable"]);
        }
    }
    env.cleanup().await;
}

/// The identities of Integration, Provider and ApiKey cannot change once created (the API
/// cannot change them either): each refusal names the field and says what to do instead.
#[tokio::test]
async fn integration_provider_and_api_key_identities_are_immutable() {
    let env = TestEnv::new("crds-immutable-new").await;
    let pp = PostParams::default();
    let workspace = "6f0e4a2c-5a4e-4c1b-9a53-3c2f1f0d9b11";
    let integrations: Api<DynamicObject> = Api::all_with(
        env.client.clone(),
        &support::aigw_resource("Integration", "integrations"),
    );
    let integration = format!("{}-openai", env.namespace);
    let spec = json!({"slug": integration, "name": "OpenAI", "aiProviderId": "openai",
                      "keySecretRef": {"name": "upstream", "key": "api-key"}});
    integrations
        .create(&pp, &object("Integration", &integration, spec))
        .await
        .unwrap();
    let providers = dynamic_api(&env, "Provider", "providers");
    let spec = json!({"slug": "openai-a", "name": "OpenAI A", "workspaceId": workspace,
                      "integration": integration});
    providers
        .create(&pp, &object("Provider", "openai-a", spec))
        .await
        .unwrap();
    let keys = dynamic_api(&env, "ApiKey", "apikeys");
    let spec = json!({"name": "app", "kind": "user", "userId": "6f1c2b3a-4d5e-4f60-8a7b-9c0d1e2f3a4b", "workspaceId": workspace,
                      "scopes": ["completions.write"], "secretRef": {"name": "app-key"}});
    keys.create(&pp, &object("ApiKey", "app", spec))
        .await
        .unwrap();

    for (api, name, spec, wanted) in [
        (
            &integrations,
            integration.as_str(),
            json!({"slug": "other"}),
            "slug is immutable: create a new Integration",
        ),
        (
            &integrations,
            integration.as_str(),
            json!({"aiProviderId": "anthropic"}),
            "aiProviderId is immutable",
        ),
        (
            &providers,
            "openai-a",
            json!({"workspaceId": "0b7c1d2e-3f40-4a5b-8c6d-7e8f9a0b1c2d"}),
            "workspaceId is immutable",
        ),
        (
            &providers,
            "openai-a",
            json!({"integration": "another"}),
            "integration is immutable",
        ),
        (
            &providers,
            "openai-a",
            json!({"slug": "openai-b"}),
            "slug is immutable: create a new Provider",
        ),
        (&keys, "app", json!({"kind": "service"}), "kind"),
        (
            &keys,
            "app",
            json!({"userId": "7a2d3c4b-5e6f-4a71-9b8c-0d1e2f3a4b5c"}),
            "userId",
        ),
        (
            &keys,
            "app",
            json!({"workspaceId": null}),
            "spec.workspaceId cannot be added or removed after creation",
        ),
    ] {
        let message = support::refused_patch(api, name, spec.clone()).await;
        assert!(message.contains(wanted), "{spec}: {message}");
    }
    // What may change still does.
    support::merge_patch(&providers, "openai-a", json!({"spec": {"note": "edited"}})).await;
    integrations
        .delete(&integration, &Default::default())
        .await
        .unwrap();
    env.cleanup().await;
}

/// What admission let through before (the admission attack of stop 80), now refused naming the
/// field: a number wider than the type aigw reads, a label selector the operator cannot build, a
/// URL or header no client can send, and McpServer references a guardrail cannot resolve. A
/// ClusterGuardrail naming two namesake McpServers of two namespaces is valid.
#[tokio::test]
async fn connections_and_guardrail_references_are_checked_at_admission() {
    let env = TestEnv::new("crds-checked").await;
    let dry_run = dry_run();
    let cluster = |kind: &str, plural: &str| {
        Api::<DynamicObject>::all_with(env.client.clone(), &support::aigw_resource(kind, plural))
    };
    let secret = json!({"name": "t", "key": "token", "namespace": env.namespace});
    let connection = |change: &dyn Fn(&mut Value)| {
        let mut spec = json!({"managementUrl": "https://api.example",
                              "auth": {"bearerToken": {"secretRef": secret.clone()}}});
        change(&mut spec);
        object("Connection", "checked", spec)
    };
    let connections = cluster("Connection", "connections");
    let refused = |created, what: &str| support::refusal(created, what.to_string());
    type Change<'a> = &'a dyn Fn(&mut Value);
    let cases: [(Change, &[&str]); 16] = [
        (
            &|s| s["managementUrl"] = json!("https://ex%41mple.com:80:80"),
            &["spec.managementUrl", "http:// or https:// URL"],
        ),
        (
            &|s| s["managementUrl"] = json!("https://admin:sk-url-4Zp@api.example"),
            &["spec.managementUrl", "must not carry credentials"],
        ),
        (
            &|s| s["gatewayUrl"] = json!("https://u:sk-url-4Zp@gateway.example/v1"),
            &["spec.gatewayUrl", "must not carry credentials"],
        ),
        (
            &|s| s["namespaceSelector"] = json!({"matchLabels": {"team/x/y": "a"}}),
            &["spec.namespaceSelector", "a label key"],
        ),
        (
            &|s| {
                s["grants"] = json!([{"namespaceSelector": {"matchExpressions":
                    [{"key": "bad key", "operator": "Exists"}]}}])
            },
            &["spec.grants[0].namespaceSelector.matchExpressions[0].key"],
        ),
        (
            &|s| s["burst"] = json!(5_000_000_000u64),
            &["spec.burst", "4294967295"],
        ),
        (
            &|s| s["grants"] = json!([{"namespaceSelector": {"matchExpressions": [{"key": "a", "operator": "Foo"}]}}]),
            &[
                "spec.grants[0].namespaceSelector",
                "In, NotIn, Exists or DoesNotExist",
            ],
        ),
        (
            &|s| {
                s["namespaceSelector"] =
                    json!({"matchExpressions": [{"key": "a", "operator": "In"}]})
            },
            &["spec.namespaceSelector", "with values for In and NotIn"],
        ),
        (
            &|s| s["managementUrl"] = json!("not a url"),
            &["spec.managementUrl", "http:// or https:// URL"],
        ),
        (
            &|s| s["gatewayUrl"] = json!("ftp://gateway.example/v1"),
            &["spec.gatewayUrl", "http:// or https:// URL"],
        ),
        (
            &|s| s["headers"] = json!([{"name": "x-api-key", "value": "sk-hdr-7Qw\r\nx-evil: 1"}]),
            &["spec.headers[0].value"],
        ),
        (
            &|s| s["headers"] = json!([{"name": "x tsg", "value": "1"}]),
            &["spec.headers[0].name"],
        ),
        (
            // A header line pasted as a name.
            &|s| s["headers"] = json!([{"name": "X-Api-Key: sk-hdr-7Qw", "value": "1"}]),
            &["spec.headers[0].name", "an HTTP header name"],
        ),
        (
            &|s| s["headers"] = json!([{"name": "Authorization", "value": "Bearer x"}]),
            &["spec.headers[0].name", "client sets itself"],
        ),
        (
            &|s| s["managementUrl"] = json!("https://api.example/base?api_key=sk-url-4Zp"),
            &["spec.managementUrl", "without a query"],
        ),
        (
            &|s| s["managementUrl"] = json!("http://x:99999"),
            &["spec.managementUrl"],
        ),
    ];
    for (change, mentions) in cases {
        let created = connections.create(&dry_run, &connection(change)).await;
        let message = refused(created, &format!("{mentions:?}"));
        support::assert_mentions(&message, mentions);
        // A refusal of a string field quotes the string: these rules sit on the object holding
        // it, so a key in a URL or a header is never quoted back (into a CI log, an Argo CD UI).
        for key in ["sk-hdr-7Qw", "sk-url-4Zp"] {
            assert!(
                !message.contains(key),
                "the refusal quotes {key}: {message}"
            );
        }
    }
    let oauth = json!({"tokenUrl": "::::", "clientIdRef": secret, "clientSecretRef": secret});
    let created = connections
        .create(
            &dry_run,
            &connection(&|s| s["auth"] = json!({"oauth2ClientCredentials": oauth})),
        )
        .await;
    let message = refused(created, "a token URL");
    support::assert_mentions(&message, &["spec.auth.oauth2ClientCredentials.tokenUrl"]);
    let oauth = json!({"tokenUrl": "https://id:sk-url-4Zp@auth.example/token",
                       "clientIdRef": secret, "clientSecretRef": secret});
    let created = connections
        .create(
            &dry_run,
            &connection(&|s| s["auth"] = json!({"oauth2ClientCredentials": oauth})),
        )
        .await;
    let message = refused(created, "a token URL with credentials");
    support::assert_mentions(
        &message,
        &[
            "spec.auth.oauth2ClientCredentials.tokenUrl",
            "must not carry credentials",
        ],
    );
    assert!(!message.contains("sk-url-4Zp"), "{message}");
    let valid = |s: &mut Value| {
        s["burst"] = json!(4_294_967_295u64);
        s["managementUrl"] = json!("HTTPS://[::1]:8443/api/");
        s["headers"] = json!([{"name": "x-tsg-id", "value": "1234 ü\t"}]);
        s["namespaceSelector"] = json!({"matchLabels": {"example.com/team": "a_b.c-d", "env": ""}});
    };
    connections
        .create(&dry_run, &connection(&valid))
        .await
        .expect("the largest burst, an upper-case scheme, IPv6 and a unicode header are valid");

    // McpServers by reference: a ClusterGuardrail says each one's namespace, and may name two
    // namesakes of two namespaces; a Guardrail names only those of its own namespace.
    let guardrail = |servers: Value| {
        json!({"name": "tools", "target": "mcp_tools", "mcpServers": servers,
               "checks": [{"id": "default.regexMatch", "parameters": {"rule": "x"}}]})
    };
    let cluster_guardrails = cluster("ClusterGuardrail", "clusterguardrails");
    let namesakes = json!([{"mcpServerRef": {"name": "github", "namespace": "team-a"}},
                           {"mcpServerRef": {"name": "github", "namespace": "team-b"}}]);
    let spec = guardrail(namesakes);
    cluster_guardrails
        .create(&dry_run, &object("ClusterGuardrail", "checked", spec))
        .await
        .expect("two namesake McpServers of two namespaces are two servers");
    let spec = guardrail(json!([{"mcpServerRef": {"name": "github"}}]));
    let created = cluster_guardrails
        .create(&dry_run, &object("ClusterGuardrail", "checked", spec))
        .await;
    let message = refused(
        created,
        "a ClusterGuardrail's reference without a namespace",
    );
    support::assert_mentions(&message, &["spec.mcpServers", "must set namespace"]);
    // An MCP server's URL carries no credentials: they go in the configurations Secret.
    let integrations = cluster("McpIntegration", "mcpintegrations");
    let integration = |url: &str| {
        let spec = json!({"name": "tools", "url": url, "authType": "none", "transport": "http"});
        object("McpIntegration", "checked", spec)
    };
    for (url, mentions, secret) in [
        (
            "https://octo:s3cr3t-pw@mcp.example/mcp",
            "must not carry credentials",
            "s3cr3t-pw",
        ),
        (
            "ftp://mcp.example/mcp?token=sk-url-4Zp",
            "http:// or https://",
            "sk-url-4Zp",
        ),
        (
            "https:///octo:s3cr3t-pw@mcp.example/mcp",
            "must not carry credentials",
            "s3cr3t-pw",
        ),
        ("u:s3cr3t-pw@h", "http:// or https://", "s3cr3t-pw"),
    ] {
        let created = integrations.create(&dry_run, &integration(url)).await;
        let message = refused(created, url);
        support::assert_mentions(&message, &["spec.url", mentions]);
        assert!(
            !message.contains(secret),
            "the refusal quotes {secret}: {message}"
        );
    }
    integrations
        .create(
            &dry_run,
            &integration("https://mcp.example/@org/mcp?user=a@b"),
        )
        .await
        .expect("an @ after the host is no credential");
    // The most workspace rows the field takes are admitted: no rule that compares every pair
    // (which went past the apiserver's cost limit at about 680 rows) checks them at admission;
    // the operator refuses a workspace named twice (`InvalidSpec`), and `aigw validate` finds it.
    let most: Vec<Value> = (0..1000)
        .map(|i| json!({"workspace": format!("team-{i}-{}", "w".repeat(240))}))
        .collect();
    let spec = json!({"name": "tools", "url": "https://mcp.example/mcp", "authType": "none",
                      "transport": "http", "workspaces": most});
    integrations
        .create(&dry_run, &object("McpIntegration", "checked", spec))
        .await
        .expect("1,000 workspaces of 250 characters are admitted");

    let guardrails = dynamic_api(&env, "Guardrail", "guardrails");
    let mut spec =
        guardrail(json!([{"mcpServerRef": {"name": "github", "namespace": "kube-system"}}]));
    spec["workspaceId"] = json!("9f3c2b1a-0d4e-4f6a-8b7c-1e2d3f4a5b6c");
    // The admission policy refuses it.
    let message = refused_by_policy(
        &guardrails,
        &object("Guardrail", "checked", spec.clone()),
        "a Guardrail's reference to another namespace",
    )
    .await;
    support::assert_mentions(
        &message,
        &[
            "spec.mcpServers[].mcpServerRef.namespace",
            "its own namespace",
        ],
    );
    spec["mcpServers"][0]["mcpServerRef"]["namespace"] = json!(env.namespace);
    guardrails
        .create(&dry_run, &object("Guardrail", "checked", spec.clone()))
        .await
        .expect("a Guardrail may name its own namespace");
    // One server named twice, with and without its (own) namespace: refused.
    let own = spec["mcpServers"][0].clone();
    spec["mcpServers"] = json!([own, {"mcpServerRef": {"name": "github"}}]);
    let created = guardrails
        .create(&dry_run, &object("Guardrail", "checked", spec.clone()))
        .await;
    let message = refused(created, "a Guardrail naming one McpServer twice");
    support::assert_mentions(&message, &["spec.mcpServers", "twice"]);
    // A null (server-side apply sends one for an empty field) is no server at all.
    spec["mcpServers"] = Value::Null;
    guardrails
        .create(&dry_run, &object("Guardrail", "checked", spec))
        .await
        .expect("mcpServers: null is admitted");

    env.cleanup().await;
}

/// The message with which an admission policy refuses a dry-run create of `object`. Installed
/// with the CRDs, a policy may take a moment longer to be in force than the CRD, which the
/// install waits for.
async fn refused_by_policy(api: &Api<DynamicObject>, object: &DynamicObject, what: &str) -> String {
    let dry_run = dry_run();
    let created = support::wait_until(std::time::Duration::from_secs(15), || async {
        let created = api.create(&dry_run, object).await;
        created.is_err().then_some(created)
    })
    .await
    .unwrap_or_else(|| panic!("the apiserver accepted {what}"));
    support::refusal(created, what)
}

/// Values the API would refuse, or aigw could never apply, are refused at admission naming the
/// field, rather than stored and then Stalled: an instant that is no RFC 3339, a user id that is
/// no UUID, a document path named twice or inside another's value, a selector key that is no
/// label key, credentials in a gateway URL (never quoted back), a promotion that follows the
/// resource itself.
#[tokio::test]
async fn values_that_could_only_stall_are_refused_at_admission() {
    let env = TestEnv::new("crds-values").await;
    let dry_run = dry_run();
    let refused = |created: Result<DynamicObject, kube::Error>, what: &str| {
        support::refusal(created, what.to_string())
    };
    let keys = dynamic_api(&env, "ApiKey", "apikeys");
    let key = json!({"name": "app", "kind": "user", "userId": "user-1", "scopes": ["a"],
                     "secretRef": {"name": "app-key"}, "expiresAt": "next week"});
    let message = refused(
        keys.create(&dry_run, &object("ApiKey", "app", key)).await,
        "an ApiKey of a bad userId and expiresAt",
    );
    support::assert_mentions(
        &message,
        &["spec.userId", "UUID", "spec.expiresAt", "RFC 3339"],
    );
    let key = json!({"name": "app", "kind": "user", "scopes": ["a"],
                     "userId": "6F1C2B3A-4D5E-4F60-8A7B-9C0D1E2F3A4B",
                     "secretRef": {"name": "app-key"}, "expiresAt": "2027-01-01T00:00:00.5+02:00"});
    keys.create(&dry_run, &object("ApiKey", "app", key))
        .await
        .expect("a UUID in capitals and an instant with an offset are valid");
    for (at, valid) in [
        ("2027-02-31T00:00:00Z", false),
        ("2027-04-31T00:00:00Z", false),
        ("2027-02-29T00:00:00Z", false),
        ("2027-06-30T12:34:60Z", false),
        ("2028-02-29T00:00:00Z", true),
        ("2000-02-29T23:59:59Z", true),
    ] {
        let key = json!({"name": "app", "kind": "service", "scopes": ["a"],
                         "secretRef": {"name": "app-key"}, "expiresAt": at});
        let created = keys.create(&dry_run, &object("ApiKey", "app", key)).await;
        match valid {
            true => drop(created.expect(at)),
            false => support::assert_mentions(&refused(created, at), &["spec.expiresAt"]),
        }
    }

    let configs = dynamic_api(&env, "Config", "configs");
    let secret = |key: &str| json!({"name": "provider-keys", "key": key});
    for (refs, mentions) in [
        (
            json!({"secretRefs": [{"path": "/targets/0/api_key", "secretKeyRef": secret("a")},
                                  {"path": "/targets/0/api_key", "secretKeyRef": secret("b")}]}),
            &["spec.secretRefs[1]", "Duplicate value"][..],
        ),
        (
            json!({"secretRefs": [{"path": "/targets/0/provider", "secretKeyRef": secret("a")}],
                   "resourceRefs": [{"path": "/targets/0/provider", "kind": "Provider", "name": "p"}]}),
            &["spec.resourceRefs", "name the same path"],
        ),
        (
            json!({"secretRefs": [{"path": "/targets/0", "secretKeyRef": secret("a")}],
                   "resourceRefs": [{"path": "/targets/0/provider", "kind": "Provider", "name": "p"}]}),
            &["spec.resourceRefs", "one inside the other"],
        ),
        (
            json!({"secretRefs": [{"path": "/targets/0/api_key", "secretKeyRef": secret("a")},
                                  {"path": "/targets/0", "secretKeyRef": secret("b")}]}),
            &["spec.secretRefs", "inside another's value"],
        ),
    ] {
        let mut spec = config_spec();
        spec.as_object_mut()
            .unwrap()
            .extend(refs.as_object().unwrap().clone());
        let created = configs
            .create(&dry_run, &object("Config", "refs", spec))
            .await;
        support::assert_mentions(&refused(created, &format!("{mentions:?}")), mentions);
    }
    let mut spec = config_spec();
    spec["secretRefs"] = json!([{"path": "/targets/0/api_key", "secretKeyRef": secret("a")},
                                {"path": "/targets/10/api_key", "secretKeyRef": secret("b")},
                                {"path": "/custom_headers/01", "secretKeyRef": secret("c")}]);
    configs
        .create(&dry_run, &object("Config", "refs", spec))
        .await
        .expect("distinct paths are valid, /01 among them (an object key)");
    // A Config that follows itself, named with or without its own namespace, would wait for
    // its own proof: the admission policy refuses it. One of its name in another namespace is
    // another Config.
    for source in [
        json!({"name": "refs"}),
        json!({"name": "refs", "namespace": env.namespace}),
    ] {
        let mut spec = config_spec();
        spec["promotion"] = json!({"after": [{"name": "dev"}, source], "soak": "1m"});
        let object = object("Config", "refs", spec);
        let message = refused_by_policy(&configs, &object, "a Config that follows itself").await;
        support::assert_mentions(&message, &["spec.promotion.after", "itself"]);
    }
    let mut spec = config_spec();
    spec["promotion"] = json!({"after": [{"name": "refs", "namespace": "dev"}], "soak": "1m"});
    configs
        .create(&dry_run, &object("Config", "refs", spec))
        .await
        .expect("a Config of the same name in another namespace is another Config");

    let rollouts = dynamic_api(&env, "ConfigRollout", "configrollouts");
    let rollout = |selector: Value| {
        let spec = json!({"stableConfigRef": {"name": "a"}, "candidateConfigRef": {"name": "b"},
            "apiKeySelector": selector, "steps": [{"weight": 100, "pause": "5m"}],
            "analysis": {"workspaceSlug": "w", "minRequests": 5, "maxErrorRate": 0.05}});
        object("ConfigRollout", "canary", spec)
    };
    for (selector, field) in [
        (
            json!({"matchLabels": {"bad key!": "x"}}),
            "spec.apiKeySelector",
        ),
        (
            json!({"matchLabels": {"canary": "not a value"}}),
            "spec.apiKeySelector",
        ),
        (
            json!({"matchLabels": {format!("{}/x", "a".repeat(254)): "y"}}),
            "spec.apiKeySelector",
        ),
        (
            json!({"matchExpressions": [{"key": "-x", "operator": "Exists"}]}),
            "spec.apiKeySelector.matchExpressions[0].key",
        ),
        (
            json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a b"]}]}),
            "spec.apiKeySelector.matchExpressions[0].values[0]",
        ),
    ] {
        let created = rollouts.create(&dry_run, &rollout(selector.clone())).await;
        let message = refused(created, &selector.to_string());
        support::assert_mentions(&message, &[field]);
    }
    let selector = json!({"matchLabels": {"app.kubernetes.io/name": "", "my_label": "a.b-c_d"},
        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In",
                              "values": ["team-a", "Team_B.1"]}]});
    rollouts
        .create(&dry_run, &rollout(selector))
        .await
        .expect("label keys with prefixes, empty and dotted values are valid");

    // Credentials however a URL parser still finds them: a leading space, no slashes, three.
    let deployments = dynamic_api(&env, "Deployment", "deployments");
    for url in [
        "https://gw:hunter2-Xq@gw.example/mcp",
        " https://gw:hunter2-Xq@gw.example/mcp",
        "https:gw:hunter2-Xq@gw.example/mcp",
        "https:///gw:hunter2-Xq@gw.example/mcp",
        "//gw:hunter2-Xq@gw.example/mcp",
        "gw:hunter2-Xq@gw.example/mcp",
        // In text that is no URL from its start, and in a query (an attack of stop 82 stored
        // these, which aigw export then skipped as holding credentials).
        "x https://gw:hunter2-Xq@gw.example/mcp",
        "\u{a0}https://gw:hunter2-Xq@gw.example/mcp",
        "ht_tp://gw:hunter2-Xq@gw.example/mcp",
        "https://gw.example/mcp?access_token=hunter2-Xq",
        "https://gw.example/mcp?team=a&X-Api-Key=hunter2-Xq",
        "https://gw.example/mcp#clientSecret=hunter2-Xq",
        "https://gw.example/p/access_token=hunter2-Xq",
        "https://gw.example/mcp?secretKey=hunter2-Xq",
        "https://gw.example/mcp?tokenId=hunter2-Xq",
    ] {
        let mut spec = deployment_spec();
        spec["authSettings"]["mcpGatewayBaseUrl"] = json!(url);
        let created = deployments
            .create(&dry_run, &object("Deployment", "edge", spec))
            .await;
        let message = refused(created, url);
        support::assert_mentions(&message, &["spec.authSettings.mcpGatewayBaseUrl"]);
        assert!(!message.contains("hunter2-Xq"), "{message}");
    }
    // What the API takes and aigw never calls is recorded as written, so that an exported
    // deployment adopts: no scheme, a query.
    for (gateway, mcp) in [
        ("", "https://gw.example/@org/mcp"),
        ("gateway.internal.example:8443", "mcp.internal.example"),
        (
            "https://gw.example.com?x=1#frag",
            "HTTP://GW.Example.COM:80",
        ),
        (
            "https://gw.example/?max_tokens=5&monkey=1",
            "see https://gw.example/@org",
        ),
        (
            "http://token-service:8080/v1",
            "https://m.example/api/token:exchange",
        ),
    ] {
        let mut spec = deployment_spec();
        spec["authSettings"]["gatewayBaseUrl"] = json!(gateway);
        spec["authSettings"]["mcpGatewayBaseUrl"] = json!(mcp);
        deployments
            .create(&dry_run, &object("Deployment", "edge", spec))
            .await
            .unwrap_or_else(|e| panic!("{gateway:?} and {mcp:?} are valid: {e}"));
    }
    env.cleanup().await;
}

/// The largest lists the rules that compare every pair walk (a Guardrail's McpServers by id
/// and by name, a Config's resourceRefs beside its secretRefs), at the bounds the CRDs declare,
/// are admitted, and one twice at their end is refused with the rule's own message: past the
/// apiserver's cost limit per rule at run time a valid object was refused with "actual cost
/// limit exceeded" instead, and an object stored before could no longer take a status or
/// finalizer write (at 256 servers, and at paths of 512 characters).
#[tokio::test]
async fn the_largest_lists_a_pairwise_rule_walks_are_admitted() {
    let env = TestEnv::new("crds-largest").await;
    let dry_run = dry_run();
    // A bound of `spec` in the committed CRD of `file`, at the dotted path below it.
    let bound = |file: &str, path: &str| -> usize {
        let text = std::fs::read_to_string(support::repo_root().join("crds").join(file)).unwrap();
        let crd: Value = serde_yaml::from_str(&text).unwrap();
        let mut at = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        for step in path.split('.') {
            at = match step {
                "items" => &at["items"],
                "maxItems" | "maxLength" => &at[step],
                field => &at["properties"][field],
            };
        }
        at.as_u64()
            .unwrap_or_else(|| panic!("{file}: no bound at {path}")) as usize
    };
    let padded = |prefix: &str, i: usize, len: usize| {
        let head = format!("{prefix}{i}-");
        format!("{head}{}", "a".repeat(len - head.len()))
    };
    let guardrails = dynamic_api(&env, "Guardrail", "guardrails");
    let guardrail = |servers: Vec<Value>| {
        let spec = json!({"name": "tools", "target": "mcp_tools", "mcpServers": servers,
                          "workspaceId": "9f3c2b1a-0d4e-4f6a-8b7c-1e2d3f4a5b6c",
                          "checks": [{"id": "default.regexMatch", "parameters": {"rule": "x"}}]});
        object("Guardrail", "largest", spec)
    };
    let servers = bound("guardrail.yaml", "mcpServers.maxItems");
    let (id, name) = (
        bound("guardrail.yaml", "mcpServers.items.id.maxLength"),
        bound(
            "guardrail.yaml",
            "mcpServers.items.mcpServerRef.name.maxLength",
        ),
    );
    let by_id: Vec<Value> = (0..servers)
        .map(|i| json!({"id": padded("s", i, id)}))
        .collect();
    let by_name: Vec<Value> = (0..servers)
        .map(|i| json!({"mcpServerRef": {"name": padded("s", i, name)}}))
        .collect();
    for (mut listed, what) in [
        (by_id, "one MCP server twice"),
        (by_name, "(by name) twice"),
    ] {
        guardrails
            .create(&dry_run, &guardrail(listed.clone()))
            .await
            .unwrap_or_else(|e| panic!("{servers} McpServers, each once, refused ({what}): {e}"));
        listed[servers - 1] = listed[servers - 2].clone();
        let created = guardrails.create(&dry_run, &guardrail(listed)).await;
        let message = support::refusal(created, "a Guardrail naming its last McpServer twice");
        support::assert_mentions(&message, &["spec.mcpServers", what]);
    }

    let configs = dynamic_api(&env, "Config", "configs");
    let (secrets, secret_path) = (
        bound("config.yaml", "secretRefs.maxItems"),
        bound("config.yaml", "secretRefs.items.path.maxLength"),
    );
    let (resources, resource_path) = (
        bound("config.yaml", "resourceRefs.maxItems"),
        bound("config.yaml", "resourceRefs.items.path.maxLength"),
    );
    let mut spec = config_spec();
    spec["secretRefs"] = json!(
        (0..secrets)
            .map(|i| json!({"path": padded("/s", i, secret_path), "secretKeyRef": {"name": "keys", "key": "k"}}))
            .collect::<Vec<_>>()
    );
    spec["resourceRefs"] = json!(
        (0..resources)
            .map(|i| json!({"path": padded("/r", i, resource_path), "kind": "Guardrail", "name": "g"}))
            .collect::<Vec<_>>()
    );
    configs
        .create(&dry_run, &object("Config", "largest", spec.clone()))
        .await
        .unwrap_or_else(|e| {
            panic!("{resources} resourceRefs beside {secrets} secretRefs refused: {e}")
        });
    let last = resources.min(secrets) - 1;
    spec["resourceRefs"][last]["path"] = spec["secretRefs"][last]["path"].clone();
    let created = configs
        .create(&dry_run, &object("Config", "largest", spec))
        .await;
    let message = support::refusal(created, "a Config whose two lists name one path");
    support::assert_mentions(&message, &["spec.resourceRefs", "name the same path"]);

    env.cleanup().await;
}

/// A Config stored while a `secretRefs` path could be 512 characters long keeps its path under
/// ratcheting after the bound fell to 256, and the operator records that path in each history
/// entry it writes: the status must take it, or every version applied from such a Config would
/// fail its status write.
#[tokio::test]
async fn a_history_entry_takes_any_path_a_spec_admitted() {
    let env = TestEnv::new("crds-history-path").await;
    let configs = dynamic_api(&env, "Config", "configs");
    create_dynamic(&env, CONFIGS, "recorded", config_spec()).await;
    let path = format!("/{}", "p".repeat(511));
    let status = json!({"status": {"history": [{
        "appliedAt": "2026-12-05T00:00:00Z", "generation": 1, "versionId": "v1",
        "secretRefs": [{"path": path, "secretKeyRef": {"name": "keys", "key": "k"}}],
    }]}});
    let params = PatchParams {
        dry_run: true,
        ..Default::default()
    };
    configs
        .patch_status("recorded", &params, &Patch::Merge(&status))
        .await
        .unwrap_or_else(|e| panic!("a history entry with a path of 512 characters refused: {e}"));
    env.cleanup().await;
}
