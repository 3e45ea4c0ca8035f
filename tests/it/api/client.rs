//! The API client against the emulator over real HTTP: every operation, then the failure paths
//! (401, 400 envelopes, not found, 429, 5xx, timeouts, exhausted retries, lost answers).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::SendJson;
use crate::support::emu::{ClientEnv, TOKEN};
use crate::support::objects::remote_limits;
use aigw::api::{
    ApiError, Client, ClientConfig, Condition, CreateConfigRequest, CreateDeploymentRequest,
    CreateRateLimitsPolicyRequest, DeploymentAuthSettingsInput, DeploymentListQuery,
    DeploymentStatus, DeploymentType, GroupBy, Includable, ItemStatus, OneOrMany, OutputItem,
    PolicyStatus, RateLimit, RateLimitType, RateLimitUnit, RateLimitsListQuery, Reading,
    RequestObserver, RetryPolicy, SecretString, StaticToken, TokenFuture, TokenSource,
    UpdateConfigRequest, UpdateDeploymentRequest, UpdateRateLimitsPolicyRequest,
    VectorStoreFileStatus,
};
use aigw::api::{Listing, RateLimitsPolicy as RateLimitsPolicyRemote};
use aigw::controller::driver::drift;
use aigw::resources::RateLimitsPolicy;
use aigw::resources::policy::Policy;
use serde_json::{Value, json};

impl ClientEnv {
    async fn seed(&self, body: Value) -> Value {
        let (status, answer) = self.control(reqwest::Method::POST, "seed", body).await;
        assert!((200..300).contains(&status), "control seed: {status}");
        answer
    }

    /// How many answers with `status` the emulator gave to `key` (`"GET /ai_gw/..."`).
    async fn count(&self, key: &str, status: u16) -> u64 {
        let url = format!("{}/_emulator/stats", self.emulator.management_url());
        let stats: Value = self.control.get(url).json_value().await;
        stats["requests"][key][status.to_string()]
            .as_u64()
            .unwrap_or(0)
    }
}

/// Creates the config `name` through `client`, which fails; the error.
async fn create_fails(client: &Client, name: &str) -> ApiError {
    client
        .configs()
        .create(&config_request(name))
        .await
        .unwrap_err()
}

/// Creates the config `name` through `client`; the answer.
async fn create_ok(client: &Client, name: &str) -> aigw::api::ConfigCreated {
    client
        .configs()
        .create(&config_request(name))
        .await
        .unwrap()
}

/// Lists the configs through `client`, which fails; the error.
async fn list_fails(client: &Client) -> ApiError {
    client.configs().list(None).await.unwrap_err()
}

/// At least `least` passed since `started`.
fn assert_took_at_least(started: Instant, least: Duration) {
    assert!(started.elapsed() >= least, "{:?}", started.elapsed());
}

/// Records every attempt the client makes.
#[derive(Default)]
struct Attempts(Mutex<Vec<(String, String, Option<u16>)>>);

impl RequestObserver for Attempts {
    fn on_response(&self, method: &str, endpoint: &str, status: Option<u16>, _: Duration) {
        let mut seen = self.0.lock().unwrap();
        seen.push((method.to_owned(), endpoint.to_owned(), status));
    }
}

impl Attempts {
    fn of(&self, method: &str, endpoint: &str) -> Vec<Option<u16>> {
        let seen = self.0.lock().unwrap();
        seen.iter()
            .filter(|(m, e, _)| m == method && e == endpoint)
            .map(|(_, _, s)| *s)
            .collect()
    }
}

fn config_request(name: &str) -> CreateConfigRequest {
    CreateConfigRequest {
        name: name.into(),
        config: json!({"virtual_key": "vk-1", "retry": {"attempts": 3}}),
        workspace_id: None,
        is_default: None,
    }
}

fn policy_request(name: &str) -> CreateRateLimitsPolicyRequest {
    CreateRateLimitsPolicyRequest {
        name: Some(name.into()),
        description: None,
        conditions: vec![Condition {
            key: "workspace_id".into(),
            value: OneOrMany::One("ws-1".into()),
            excludes: None,
        }],
        group_by: vec![GroupBy {
            key: "api_key".into(),
        }],
        limit: RateLimit {
            limit_type: RateLimitType::Requests,
            unit: RateLimitUnit::Rpm,
            value: 100.0,
            target: None,
        },
        workspace_id: None,
        organisation_id: None,
    }
}

#[tokio::test]
async fn configs_crud() {
    let env = ClientEnv::start().await;
    let client = env.client();
    let configs = client.configs();

    let created = configs.create(&config_request("routing")).await.unwrap();
    let slug = created.slug.clone().expect("the emulator returns the slug");
    let detail = configs.get(&slug).await.unwrap();
    assert_eq!(detail.id, created.id);
    assert_eq!(detail.name, "routing");
    assert_eq!(
        detail.config["virtual_key"], "vk-1",
        "config string is parsed"
    );
    assert_eq!(detail.version_id, created.version_id);
    assert_eq!(
        configs.get(&created.id).await.unwrap().slug,
        slug,
        "id works as path"
    );

    let listed = configs.list(None).await.unwrap();
    assert!(listed.iter().any(|c| c.slug == slug));
    let ws = detail.workspace_id.clone().unwrap();
    assert!(
        configs
            .list(Some(&ws))
            .await
            .unwrap()
            .iter()
            .any(|c| c.slug == slug)
    );

    let update = UpdateConfigRequest {
        config: Some(json!({"virtual_key": "vk-2"})),
        ..Default::default()
    };
    let updated = configs.update(&slug, &update).await.unwrap();
    assert!(updated.version_id.is_some());
    assert_ne!(
        updated.version_id, created.version_id,
        "every update mints a version"
    );
    assert_eq!(
        configs.get(&slug).await.unwrap().config,
        json!({"virtual_key": "vk-2"})
    );
    assert!(configs.versions(&slug).await.unwrap().len() >= 2);

    configs.delete(&slug).await.unwrap();
    let gone = configs.get(&slug).await.unwrap_err();
    assert!(gone.is_not_found(), "{gone}");
    assert_eq!(gone.category(), "NotFound");
    assert!(configs.delete(&slug).await.unwrap_err().is_not_found());
}

#[tokio::test]
async fn deployments_lifecycle_and_one_time_secrets() {
    let env = ClientEnv::start().await;
    let client = env.client();
    let deployments = client.deployments();

    let req = CreateDeploymentRequest {
        name: "edge-eu".into(),
        deployment_type: Some(DeploymentType::NonProduction),
        auth_settings: Some(DeploymentAuthSettingsInput {
            gateway_base_url: Some("https://gw.example".into()),
            workspaces_allowed: Some(vec!["ws-1".into()]),
            allow_all_workspaces: Some(false),
            ..Default::default()
        }),
        tags: Some([("env".to_owned(), "test".to_owned())].into()),
        ..Default::default()
    };
    let created = deployments.create(&req).await.unwrap();
    assert!(!created.client_auth.expose().is_empty());
    assert!(!created.credentials.password.expose().is_empty());
    assert!(!format!("{created:?}").contains(created.client_auth.expose()));

    let read = deployments.get(&created.id).await.unwrap();
    assert_eq!(read.name, "edge-eu");
    assert_eq!(read.deployment_type, Some(DeploymentType::NonProduction));
    assert_eq!(read.status, Some(DeploymentStatus::Active));
    let auth = read.auth_settings.as_ref().unwrap();
    assert_eq!(auth.allow_all_workspaces, Some(false));
    assert_eq!(auth.gateway_base_url.as_deref(), Some("https://gw.example"));
    assert_ne!(
        read.client_auth.as_ref().map(SecretString::expose),
        Some(created.client_auth.expose()),
        "reads mask client_auth"
    );

    let listed = deployments
        .list(&DeploymentListQuery {
            deployment_type: Some(DeploymentType::NonProduction),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(listed.iter().any(|d| d.id == created.id));

    let renamed = deployments
        .update(
            &created.id,
            &UpdateDeploymentRequest {
                name: Some("edge-eu-2".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(renamed.client_auth.is_none(), "no rotation, no secrets");
    assert_eq!(
        deployments.get(&created.id).await.unwrap().name,
        "edge-eu-2"
    );

    let rotated = deployments
        .update(
            &created.id,
            &UpdateDeploymentRequest {
                rotate_auth: Some(true),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let new_auth = rotated.client_auth.expect("rotation returns client_auth");
    assert_ne!(new_auth.expose(), created.client_auth.expose());
    assert!(rotated.credentials.is_some());

    deployments.delete(&created.id).await.unwrap();
    let archived = deployments.get(&created.id).await.unwrap();
    assert_eq!(archived.status, Some(DeploymentStatus::Archived));

    let missing = deployments
        .get("00000000-0000-4000-8000-000000000000")
        .await
        .unwrap_err();
    assert!(missing.is_not_found(), "{missing}");
}

#[tokio::test]
async fn rate_limits_crud_and_paging() {
    let env = ClientEnv::start().await;
    let client = env.client();
    let policies = client.rate_limits();

    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(
            policies
                .create(&policy_request(&format!("p{i}")))
                .await
                .unwrap()
                .id,
        );
    }
    let paged = policies
        .list(&RateLimitsListQuery {
            page_size: Some(2),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(paged.len(), 5, "all pages are fetched");
    assert!(env.count("GET /ai_gw/v2/policies/rate-limits", 200).await >= 3);

    let one = policies.get(&ids[0]).await.unwrap();
    assert_eq!(one.name.as_deref(), Some("p0"));
    assert_eq!(one.limit.limit_type, RateLimitType::Requests);
    assert_eq!(one.status, PolicyStatus::Active);

    let update = UpdateRateLimitsPolicyRequest {
        value: Some(250.0),
        unit: Some(RateLimitUnit::Rph),
        ..Default::default()
    };
    policies.update(&ids[0], &update).await.unwrap();
    let after = policies.get(&ids[0]).await.unwrap();
    assert_eq!(
        (after.limit.value, after.limit.unit),
        (250.0, RateLimitUnit::Rph)
    );

    policies.delete(&ids[0]).await.unwrap();
    assert!(policies.get(&ids[0]).await.unwrap_err().is_not_found());
    let archived = policies
        .get_with_status(&ids[0], PolicyStatus::Archived)
        .await
        .unwrap();
    assert_eq!(archived.status, PolicyStatus::Archived);
    assert!(policies.delete(&ids[0]).await.unwrap_err().is_not_found());
    assert_eq!(
        policies
            .list(&RateLimitsListQuery::default())
            .await
            .unwrap()
            .len(),
        4
    );
}

#[tokio::test]
async fn guardrails_pages() {
    let env = ClientEnv::start().await;
    let rows: Vec<Value> = (0..5)
        .map(|i| json!({"name": format!("g{i}"), "target": "llm"}))
        .collect();
    env.seed(json!({"guardrails": rows})).await;
    let client = env.client();

    let all = client.guardrails().list(None, None).await.unwrap();
    assert_eq!(all.total, 5);
    assert_eq!(all.data.len(), 5);
    let page = client.guardrails().list(Some(2), Some(2)).await.unwrap();
    assert_eq!((page.total, page.data.len()), (5, 1));

    let err = client.guardrails().list(Some(0), None).await.unwrap_err();
    assert!(matches!(&err, ApiError::Validation { field, .. } if field == "page_size"));
    assert_eq!(
        env.count("GET /ai_gw/admin/v2/guardrails", 400).await,
        0,
        "never sent"
    );
}

#[tokio::test]
async fn gateway_reads() {
    let env = ClientEnv::start().await;
    env.seed(json!({
        "responses": [{
            "id": "resp_1",
            "model": "o1-pro",
            "output": [{
                "type": "file_search_call", "id": "fs_1", "status": "completed", "queries": ["q"],
                "results": [{"file_id": "f1", "text": "t", "filename": "a.md", "score": 0.5}]
            }]
        }],
        "vector_store_files": [{
            "id": "file-1", "vector_store_id": "vs_1", "status": "completed",
            "chunking_strategy": {"type": "static", "static": {"max_chunk_size_tokens": 800, "chunk_overlap_tokens": 400}}
        }]
    }))
    .await;
    let client = env.client();

    let with = client
        .responses()
        .get("resp_1", &[Includable::FileSearchCallResults])
        .await
        .unwrap();
    let OutputItem::FileSearchCall(call) = &with.output[0] else {
        panic!("{:?}", with.output)
    };
    assert_eq!(call.status, ItemStatus::Completed);
    assert_eq!(call.results.as_ref().map(Vec::len), Some(1));
    let without = client.responses().get("resp_1", &[]).await.unwrap();
    let OutputItem::FileSearchCall(call) = &without.output[0] else {
        panic!()
    };
    assert!(call.results.is_none(), "results only when included");

    let file = client
        .vector_store_files()
        .get("vs_1", "file-1")
        .await
        .unwrap();
    assert_eq!(file.status, VectorStoreFileStatus::Completed);
    assert_eq!(file.vector_store_id, "vs_1");

    let missing = client
        .responses()
        .get("resp_missing", &[])
        .await
        .unwrap_err();
    assert!(missing.is_not_found());
    assert!(
        missing.api_message().is_some(),
        "the envelope is parsed: {missing}"
    );
    let missing = client
        .vector_store_files()
        .get("vs_1", "nope")
        .await
        .unwrap_err();
    assert!(missing.is_not_found());
}

/// Runs the built `aigw` off the async runtime, so the in-process emulator keeps serving.
async fn aigw_api(env: &ClientEnv, args: &[&str]) -> std::process::Output {
    let gateway = env.emulator.gateway_url();
    let args = [&["--gateway-url", gateway.as_str()], args].concat();
    crate::support::cli::aigw_api(&env.emulator.management_url(), TOKEN, &args).await
}

#[tokio::test]
async fn fields_the_models_do_not_name_are_read_and_printed() {
    let env = ClientEnv::start().await;
    let response = json!({
        "id": "resp_new", "model": "o1-pro", "service_tier": "default",
        "output": [
            {"type": "web_search_call", "id": "ws_1", "status": "completed",
             "action": {"type": "search", "query": "weather paris"}},
            {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": "Sunny.", "annotations": [],
                          "logprobs": [{"token": "Sunny", "logprob": -0.02}]}]},
            {"type": "code_interpreter_call", "id": "ci_1", "code": "print(1)"}
        ],
        "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 2, "cache_write_tokens": 5},
                  "output_tokens": 3, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 13}
    });
    env.seed(json!({"responses": [response.clone()]})).await;
    let expect_kept = |printed: &Value, how: &str| {
        assert_eq!(printed["service_tier"], "default", "{how}");
        assert_eq!(
            printed["output"][0]["action"], response["output"][0]["action"],
            "{how}"
        );
        assert_eq!(
            printed["output"][1]["content"][0]["logprobs"],
            response["output"][1]["content"][0]["logprobs"],
            "{how}"
        );
        assert_eq!(printed["output"][2], response["output"][2], "{how}");
        assert_eq!(printed["usage"], response["usage"], "{how}");
    };

    let read = env.client().responses().get("resp_new", &[]).await.unwrap();
    assert!(
        matches!(&read.output[0], OutputItem::WebSearchCall(w) if w.status == ItemStatus::Completed)
    );
    expect_kept(&serde_json::to_value(&read).unwrap(), "client");

    let output = aigw_api(&env, &["responses", "get", "resp_new"]).await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let printed: Value = serde_json::from_slice(&output.stdout).expect("aigw api prints JSON");
    expect_kept(&printed, "aigw api");
}

/// Hands out a stale token until invalidated.
#[derive(Debug, Default)]
struct StaleThenFresh {
    invalidations: AtomicUsize,
}

impl TokenSource for StaleThenFresh {
    fn token(&self) -> TokenFuture<'_> {
        let fresh = self.invalidations.load(Ordering::SeqCst) > 0;
        Box::pin(async move { Ok(SecretString::new(if fresh { TOKEN } else { "stale" })) })
    }

    fn invalidate(&self) {
        self.invalidations.fetch_add(1, Ordering::SeqCst);
    }

    fn handed_out(&self) -> Vec<SecretString> {
        ["stale", TOKEN].map(SecretString::new).to_vec()
    }
}

#[tokio::test]
async fn unauthorized_refreshes_the_token_once() {
    let env = ClientEnv::start().await;
    let source = Arc::new(StaleThenFresh::default());
    let mut cfg = env.config();
    cfg.token = source.clone();
    let client = Client::new(cfg).unwrap();
    client
        .configs()
        .list(None)
        .await
        .expect("second try has a fresh token");
    assert_eq!(source.invalidations.load(Ordering::SeqCst), 1);

    let mut cfg = env.config();
    cfg.token = Arc::new(StaticToken::new("wrong"));
    let attempts = Arc::new(Attempts::default());
    cfg.observer = Some(attempts.clone());
    let err = list_fails(&Client::new(cfg).unwrap()).await;
    assert_eq!(err.status(), Some(401));
    assert_eq!(err.category(), "Unauthorized");
    assert!(!err.is_transient());
    assert_eq!(
        attempts.of("GET", "/ai_gw/v2/configs"),
        [Some(401), Some(401)]
    );
    assert!(
        !err.to_string().contains("wrong"),
        "the token never shows: {err}"
    );
}

#[tokio::test]
async fn bad_request_envelope_is_permanent() {
    let env = ClientEnv::start().await;
    let client = env.client();
    let req = CreateDeploymentRequest {
        name: "a".into(),
        slug: Some("dp-fixed".into()),
        ..Default::default()
    };
    client.deployments().create(&req).await.unwrap();
    let attempts = Arc::new(Attempts::default());
    let client = Client::new(env.config().observer(attempts.clone())).unwrap();
    let err = client.deployments().create(&req).await.unwrap_err();
    assert_eq!(err.status(), Some(400));
    assert_eq!(err.category(), "Validation");
    assert_eq!(err.api_code(), Some("AB01"));
    assert!(err.api_message().unwrap().contains("dp-fixed"), "{err}");
    assert!(!err.is_transient() && !err.is_not_found() && !err.outcome_unknown());
    assert_eq!(
        attempts.of("POST", "/ai_gw/admin/v2/deployments").len(),
        1,
        "not retried"
    );
    let http = err.http().unwrap();
    assert!(http.raw.contains("AB01"), "raw body kept");
}

#[tokio::test]
async fn rate_limited_answers_are_retried_after_retry_after() {
    let env = ClientEnv::start().await;
    env.faults(json!({"rate_limit_qps": 1.0})).await;
    let client = env.client();
    let started = Instant::now();
    for _ in 0..2 {
        client
            .configs()
            .list(None)
            .await
            .expect("retried past the 429");
    }
    assert!(env.count("GET /ai_gw/v2/configs", 429).await >= 1);
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "Retry-After: 1 was honoured ({:?})",
        started.elapsed()
    );

    let mut cfg = env.config();
    cfg.retry = RetryPolicy::none();
    let strict = Client::new(cfg).unwrap();
    let _ = strict.configs().list(None).await;
    let err = list_fails(&strict).await;
    assert_eq!(err.status(), Some(429));
    assert_eq!(err.category(), "RateLimited");
    assert!(err.is_transient());
    assert_eq!(err.retry_after(), Some(Duration::from_secs(1)));
}

#[tokio::test]
async fn server_errors_are_retried_until_success() {
    let env = ClientEnv::start().await;
    let created = create_ok(&env.client(), "c").await;
    env.faults(json!({"error_rate": 0.3})).await;
    let mut cfg = env.config();
    cfg.retry.max_attempts = 12;
    let client = Client::new(cfg).unwrap();
    for _ in 0..20 {
        client
            .configs()
            .get(&created.id)
            .await
            .expect("eventually succeeds");
    }
    let failures = env.count("GET /ai_gw/v2/configs/{slug}", 500).await
        + env.count("GET /ai_gw/v2/configs/{slug}", 503).await;
    assert!(failures > 0, "some attempts failed and were retried");
    assert_eq!(env.count("GET /ai_gw/v2/configs/{slug}", 200).await, 20);
}

#[tokio::test]
async fn retry_budget_exhausted_returns_the_last_cause() {
    let env = ClientEnv::start().await;
    env.faults(json!({"error_rate": 1.0})).await;
    let attempts = Arc::new(Attempts::default());
    let mut cfg = env.config().observer(attempts.clone());
    cfg.retry.max_attempts = 3;
    let err = list_fails(&Client::new(cfg).unwrap()).await;
    assert!(
        matches!(err, ApiError::RetriesExhausted { attempts: 3, .. }),
        "{err:?}"
    );
    assert!(matches!(err.status(), Some(500 | 503)));
    assert_eq!(err.category(), "ServerError");
    assert!(err.is_transient());
    assert_eq!(attempts.of("GET", "/ai_gw/v2/configs").len(), 3);

    // A POST answered 5xx may have been applied before the server failed: it is not repeated,
    // and the caller is told the outcome is unknown (it looks before creating again).
    let attempts = Arc::new(Attempts::default());
    let mut cfg = env.config().observer(attempts.clone());
    cfg.retry.max_attempts = 2;
    let err = create_fails(&Client::new(cfg).unwrap(), "x").await;
    assert!(err.outcome_unknown());
    assert_eq!(attempts.of("POST", "/ai_gw/v2/configs").len(), 1);
}

#[tokio::test]
async fn timeouts() {
    let env = ClientEnv::start().await;
    env.faults(json!({"timeout_rate": 1.0})).await;
    let attempts = Arc::new(Attempts::default());
    let mut cfg = env
        .config()
        .timeout(Duration::from_millis(200))
        .observer(attempts.clone());
    cfg.retry.max_attempts = 2;
    let client = Client::new(cfg).unwrap();

    let err = list_fails(&client).await;
    assert_eq!(err.category(), "Timeout", "{err}");
    assert!(err.is_transient());
    assert_eq!(
        attempts.of("GET", "/ai_gw/v2/configs"),
        [None, None],
        "GET retried"
    );

    let err = create_fails(&client, "t").await;
    assert!(matches!(err, ApiError::Timeout { .. }), "{err:?}");
    assert!(err.outcome_unknown(), "the POST may have been applied");
    assert_eq!(
        attempts.of("POST", "/ai_gw/v2/configs"),
        [None],
        "POST not retried"
    );
}

#[tokio::test]
async fn lost_answer_to_a_post_is_outcome_unknown() {
    let env = ClientEnv::start().await;
    env.faults(json!({"drop_after_commit_rate": 1.0})).await;
    let attempts = Arc::new(Attempts::default());
    let client = Client::new(env.config().observer(attempts.clone())).unwrap();

    let err = create_fails(&client, "dropped").await;
    assert!(err.outcome_unknown(), "{err:?}");
    assert!(err.is_transient());
    assert_eq!(err.category(), "Network");
    assert_eq!(
        attempts.of("POST", "/ai_gw/v2/configs").len(),
        1,
        "not blindly retried"
    );

    env.faults(json!({})).await;
    let listed = client.configs().list(None).await.unwrap();
    assert_eq!(
        listed.iter().filter(|c| c.name == "dropped").count(),
        1,
        "applied exactly once; the caller finds it by looking it up"
    );
}

#[tokio::test]
async fn lost_answer_to_a_put_is_not_repeated() {
    // Each config PUT mints a version (and a rotate_auth PUT rotates): after a lost answer the
    // caller re-reads and compares instead of the client sending it again.
    let env = ClientEnv::start().await;
    let created = create_ok(&env.client(), "c").await;
    env.faults(json!({"drop_after_commit_rate": 1.0})).await;
    let attempts = Arc::new(Attempts::default());
    let client = Client::new(env.config().observer(attempts.clone())).unwrap();
    let update = UpdateConfigRequest {
        name: Some("renamed".into()),
        ..Default::default()
    };
    let err = client
        .configs()
        .update(&created.id, &update)
        .await
        .unwrap_err();
    assert!(err.outcome_unknown(), "{err:?}");
    assert_eq!(attempts.of("PUT", "/ai_gw/v2/configs/{slug}").len(), 1);
    env.faults(json!({})).await;
    let read = client.configs().get(&created.id).await.unwrap();
    assert_eq!(read.name, "renamed", "applied once, seen on re-read");
    assert_eq!(
        client.configs().versions(&created.id).await.unwrap().len(),
        2
    );
}

#[tokio::test]
async fn client_side_rate_limit_spaces_requests() {
    let env = ClientEnv::start().await;
    let client = Client::new(env.config().rate_limit(10.0, 1)).unwrap();
    let started = Instant::now();
    for _ in 0..6 {
        client.configs().list(None).await.unwrap();
    }
    assert_took_at_least(started, Duration::from_millis(450));
}

#[tokio::test]
async fn in_flight_limit_serialises_requests() {
    let env = ClientEnv::start().await;
    env.faults(json!({"latency_ms": 100})).await;
    let client = Client::new(env.config().max_in_flight(1)).unwrap();
    let started = Instant::now();
    let calls = (0..3).map(|_| {
        let client = client.clone();
        async move { client.configs().list(None).await }
    });
    for result in futures::future::join_all(calls).await {
        result.unwrap();
    }
    assert_took_at_least(started, Duration::from_millis(300));
}

#[tokio::test]
async fn bad_configuration_is_rejected() {
    let token: Arc<dyn TokenSource> = Arc::new(StaticToken::new(TOKEN));
    let cfg = ClientConfig::new("not a url", "http://127.0.0.1:1/v1", token.clone());
    assert!(matches!(Client::new(cfg), Err(ApiError::Config(_))));
    let cfg = ClientConfig::new("http://127.0.0.1:1", "http://127.0.0.1:1/v1", token)
        .header("bad header", "x");
    assert!(matches!(Client::new(cfg), Err(ApiError::Config(_))));
}

#[tokio::test]
async fn connection_refused_is_safe_to_retry() {
    let token: Arc<dyn TokenSource> = Arc::new(StaticToken::new(TOKEN));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let cfg = ClientConfig::new(format!("http://{addr}"), format!("http://{addr}/v1"), token)
        .retry(RetryPolicy {
            max_attempts: 2,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(10),
        });
    let err = create_fails(&Client::new(cfg).unwrap(), "x").await;
    assert_eq!(err.category(), "Network");
    assert!(
        !err.outcome_unknown(),
        "never connected, so never applied: {err:?}"
    );
    assert!(matches!(
        err,
        ApiError::RetriesExhausted { attempts: 2, .. }
    ));
}

/// A create bound to a deadline ([`Client::answered_by`]) leaves only while its whole timeout
/// fits before it: a 429's `Retry-After` that would push the retry past it ends the call with
/// `PastDeadline` (not sent, outcome known, the wait handed back), and a deadline already too
/// close sends nothing at all.
#[tokio::test]
async fn a_request_that_could_not_be_answered_by_its_deadline_is_not_sent() {
    let posts = Arc::new(AtomicUsize::new(0));
    let counted = posts.clone();
    let app = axum::Router::new().fallback(move || {
        let counted = counted.clone();
        async move {
            counted.fetch_add(1, Ordering::SeqCst);
            axum::response::Response::builder()
                .status(429)
                .header("retry-after", "1")
                .body(axum::body::Body::from("{\"message\":\"slow down\"}"))
                .unwrap()
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let token: Arc<dyn TokenSource> = Arc::new(StaticToken::new(TOKEN));
    let cfg = ClientConfig::new(format!("http://{addr}"), format!("http://{addr}/v1"), token)
        .timeout(Duration::from_secs(2))
        .retry(RetryPolicy {
            max_attempts: 5,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_secs(5),
        });
    let client = Client::new(cfg).unwrap();

    // Room for one attempt (2 s), not for a retry after `Retry-After: 1`.
    let bound = client.answered_by(Instant::now() + Duration::from_millis(2500));
    let started = Instant::now();
    let err = create_fails(&bound, "late").await;
    assert!(matches!(err, ApiError::PastDeadline { .. }), "{err:?}");
    assert_eq!(err.category(), "PastDeadline");
    assert!(!err.outcome_unknown(), "never sent: {err:?}");
    assert!(err.is_transient());
    assert_eq!(err.retry_after(), Some(Duration::from_secs(1)));
    assert_eq!(posts.load(Ordering::SeqCst), 1, "the late retry was sent");
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "it waited for a retry it could not send ({:?})",
        started.elapsed()
    );

    // Less than one timeout left: nothing leaves.
    let too_close = client.answered_by(Instant::now() + Duration::from_secs(1));
    let err = create_fails(&too_close, "late").await;
    assert!(matches!(err, ApiError::PastDeadline { .. }), "{err:?}");
    assert_eq!(err.retry_after(), None);
    assert_eq!(
        posts.load(Ordering::SeqCst),
        1,
        "a request too late was sent"
    );

    // The same client without a deadline retries past the 429s as before.
    let err = create_fails(&client, "late").await;
    assert_eq!(err.status(), Some(429), "{err:?}");
    assert_eq!(posts.load(Ordering::SeqCst), 6, "{err:?}");
}

#[tokio::test]
async fn usage_limits_through_the_cli_create_list_read_usage_and_reset() {
    let env = ClientEnv::start().await;
    let body = tempfile::NamedTempFile::new().expect("body file");
    std::fs::write(
        body.path(),
        r#"{"name": "budget", "type": "cost", "credit_limit": 100,
            "conditions": [{"key": "workspace_id", "value": "ws-1"}], "group_by": [{"key": "api_key"}]}"#,
    )
    .unwrap();
    let run = |args: Vec<String>| {
        let env = &env;
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let output = aigw_api(env, &args).await;
            assert!(
                output.status.success(),
                "{args:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            serde_json::from_slice::<Value>(&output.stdout).expect("aigw api prints JSON")
        }
    };
    let path = body.path().display().to_string();
    let created = run(vec![
        "usage-limits".into(),
        "create".into(),
        "-f".into(),
        path,
    ])
    .await;
    let id = created["id"].as_str().expect("an id").to_string();
    let listed = run(vec!["usage-limits".into(), "list".into()]).await;
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");

    // Usage from gateway traffic, then one value reset through the CLI.
    let http = reqwest::Client::new();
    let usage = format!(
        "{}/_emulator/usage-limits/{id}/usage",
        env.emulator.management_url()
    );
    let spent = http
        .post(&usage)
        .json(&json!({"value_key": "key-a", "usage": 12.5}))
        .send()
        .await
        .unwrap();
    assert!(spent.status().is_success());
    let entities = run(vec!["usage-limits".into(), "entities".into(), id.clone()]).await;
    assert_eq!(entities[0]["value_key"], "key-a", "{entities}");
    let entity = entities[0]["id"].as_str().unwrap().to_string();
    run(vec![
        "usage-limits".into(),
        "reset".into(),
        id.clone(),
        entity,
    ])
    .await;
    let read = run(vec!["usage-limits".into(), "get".into(), id.clone()]).await;
    assert_eq!(
        read["value_key_usage_map"]["key-a"]["current_usage"].as_f64(),
        Some(0.0),
        "{read}"
    );
    run(vec!["usage-limits".into(), "delete".into(), id]).await;
}

#[tokio::test]
async fn guardrails_get_through_the_cli_reads_either_plane_and_keeps_unknown_fields() {
    let env = ClientEnv::start().await;
    let http = reqwest::Client::new();
    let mut slugs = Vec::new();
    for (path, body) in [
        (
            "/ai_gw/v2/guardrails",
            json!({"name": "ws-check", "workspace_id": "9f3c2b1a-0d4e-4f6a-8b7c-1e2d3f4a5b6c",
                   "checks": [{"id": "default.regexMatch", "parameters": {"rule": "x"}},
                              {"id": "default.webhook",
                               "parameters": {"webhookURL": "https://hooks.example/check",
                                              "token": "hook-tok-Pq7Rs2Tv9Wx4"}}],
                   "actions": {"deny": true}}),
        ),
        (
            "/ai_gw/admin/v2/guardrails",
            json!({"name": "org-check",
                   "checks": [{"id": "default.regexMatch", "parameters": {"rule": "y"}}],
                   "actions": {"deny": true}}),
        ),
    ] {
        let created: Value = http
            .post(format!("{}{path}", env.emulator.management_url()))
            .bearer_auth(TOKEN)
            .json(&body)
            .json_value()
            .await;
        slugs.push(created["slug"].as_str().expect("a slug").to_string());
    }
    let output = aigw_api(&env, &["guardrails", "get", &slugs[0]]).await;
    assert!(output.status.success(), "{output:?}");
    let read: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(read["name"], "ws-check");
    assert_eq!(read["checks"][0]["parameters"]["rule"], "x", "{read}");
    // A check's secret-sounding parameter prints masked: it may come from a Secret.
    assert_eq!(
        read["checks"][1]["parameters"]["token"], "<masked>",
        "{read}"
    );
    let listed = aigw_api(&env, &["guardrails", "list"]).await;
    assert!(
        !String::from_utf8_lossy(&listed.stdout).contains("hook-tok"),
        "{listed:?}"
    );
    let output = aigw_api(&env, &["guardrails", "get", "--organisation", &slugs[1]]).await;
    assert!(output.status.success(), "{output:?}");
    let read: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(read["name"], "org-check");
    assert!(read["workspace_id"].is_null(), "{read}");
    // What the API sends beyond the typed fields is printed too.
    assert!(read.get("created_at").is_some(), "{read}");
}

#[tokio::test]
async fn config_versions_diff_through_the_cli_shows_the_change_masked() {
    let env = ClientEnv::start().await;
    let http = reqwest::Client::new();
    let url = |path: &str| format!("{}{path}", env.emulator.management_url());
    let created: Value = http
        .post(url("/ai_gw/v2/configs"))
        .bearer_auth(TOKEN)
        .json(
            &json!({"name": "routing", "config": {"retry": {"attempts": 2},
            "targets": [{"provider": "@openai", "api_key": "sk-first-version"}]}}),
        )
        .json_value()
        .await;
    let slug = created["slug"].as_str().unwrap().to_string();
    let updated = http
        .put(url(&format!("/ai_gw/v2/configs/{slug}")))
        .bearer_auth(TOKEN)
        .json(&json!({"config": {"retry": {"attempts": 5},
            "targets": [{"provider": "@openai", "api_key": "sk-second-version"}]}}))
        .send()
        .await
        .unwrap();
    assert!(updated.status().is_success());
    // The versions as the CLI lists them: each with its document and `version_id`.
    let listed = aigw_api(&env, &["configs", "versions", &slug]).await;
    assert!(listed.status.success(), "{listed:?}");
    // A document's credentials print masked: they may come from Secrets, which no read tells.
    let read = aigw_api(&env, &["configs", "get", &slug]).await;
    for output in [&listed, &read] {
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(text.contains("<masked>"), "{text}");
        assert!(!text.contains("sk-first-version"), "{text}");
        assert!(!text.contains("sk-second-version"), "{text}");
    }
    let versions: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let version_with = |attempts: u64| {
        versions
            .as_array()
            .unwrap()
            .iter()
            .find(|v| {
                let document: Value = match &v["config"] {
                    Value::String(text) => serde_json::from_str(text).unwrap(),
                    other => other.clone(),
                };
                document["retry"]["attempts"] == attempts
            })
            .and_then(|v| v["version_id"].as_str())
            .unwrap_or_else(|| panic!("no version with attempts {attempts}: {versions}"))
            .to_string()
    };
    let (first, second) = (version_with(2), version_with(5));
    let output = aigw_api(
        &env,
        &["configs", "versions", &slug, "--diff", &first, &second],
    )
    .await;
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("-     \"attempts\": 2"), "{text}");
    assert!(text.contains("+     \"attempts\": 5"), "{text}");
    assert!(text.contains("<masked, changed>"), "{text}");
    assert!(
        !text.contains("sk-first") && !text.contains("sk-second"),
        "{text}"
    );
    let output = aigw_api(
        &env,
        &["configs", "versions", &slug, "--diff", &first, "nope"],
    )
    .await;
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("has no version nope"),
        "{output:?}"
    );
}

/// An emulator holding 150 rate-limit policies, `limit-0`…`limit-149`: two pages at the
/// server's default size.
async fn with_150_rate_limits() -> ClientEnv {
    let env = ClientEnv::start().await;
    let seeded: Vec<Value> = (0..150)
        .map(|n| remote_limits(&format!("limit-{n}"), n))
        .collect();
    env.seed(json!({ "rate_limits": seeded })).await;
    env
}

/// The rate-limits policies, listed as proof of what is absent.
async fn proof_of_limits(client: &Client) -> Listing<RateLimitsPolicyRemote> {
    client
        .rate_limits()
        .listing(&RateLimitsListQuery::default(), Reading::Proof)
        .await
        .unwrap()
}

/// A paged list whose answers carry no `total` is read to its first empty page: a full page
/// of the server's default size (the query names none) is not the last.
#[tokio::test]
async fn a_paged_list_without_total_ends_only_at_an_empty_page() {
    let env = with_150_rate_limits().await;
    env.faults(json!({"list_without_total": true})).await;
    let raw: Value = env
        .control
        .get(format!(
            "{}/ai_gw/v2/policies/rate-limits",
            env.emulator.management_url()
        ))
        .bearer_auth(TOKEN)
        .json_value()
        .await;
    assert_eq!(raw["data"].as_array().map(Vec::len), Some(100), "{raw}");
    assert!(raw.get("total").is_none(), "the fault leaves total out");

    let client = env.client();
    let listing = proof_of_limits(&client).await;
    assert_eq!(listing.items.len(), 150, "the second page was left out");
    assert!(
        !listing.complete,
        "without a total nothing counts the rows of a listing that spans pages"
    );
    let pages = env.count("GET /ai_gw/v2/policies/rate-limits", 200).await;
    assert_eq!(
        pages,
        1 + 3,
        "the raw read, then pages 0, 1 and the empty 2"
    );
}

/// A listing that spans pages is complete only when a second reading gives the same rows: rows
/// that shift between two page reads (one leaves, one joins, the total unchanged) skip a row
/// without a repeat or a short count.
#[tokio::test]
async fn rows_shifting_between_pages_leave_a_listing_incomplete() {
    let env = with_150_rate_limits().await;
    let client = env.client();
    let list = || proof_of_limits(&client);
    let still = list().await;
    assert!(still.complete);
    assert_eq!(still.items.len(), 150);
    const PAGES: &str = "GET /ai_gw/v2/policies/rate-limits";
    assert_eq!(
        env.count(PAGES, 200).await,
        2 + 2,
        "two readings of two pages"
    );

    env.faults(json!({"list_churn": true})).await;
    let shifted = list().await;
    assert!(
        !shifted.complete,
        "a reading that skipped a row was taken for the list"
    );
    let names: Vec<&str> = shifted
        .items
        .iter()
        .filter_map(|p| p.name.as_deref())
        .collect();
    assert!(
        names.contains(&"limit-100-joined") && !names.contains(&"limit-100"),
        "the page after the first churned: {names:?}"
    );
    env.faults(json!({})).await;
    assert_eq!(
        list().await,
        still,
        "once the rows hold still, the listing is whole again"
    );
}

/// An answer that says more rows follow (`has_more`) is not a whole list, whatever its `total`
/// counts: neither a paged listing nor an unpaged one proves absence by it.
#[tokio::test]
async fn a_list_that_says_more_follow_proves_nothing() {
    let env = with_150_rate_limits().await;
    let client = env.client();
    env.faults(json!({"list_has_more": true})).await;
    let listing = proof_of_limits(&client).await;
    assert_eq!(listing.items.len(), 150, "every row counted was read");
    assert!(
        !listing.complete,
        "a last page saying more follow was taken for the end"
    );
    let configs = client.configs().listing(None).await.unwrap();
    assert!(configs.items.is_empty());
    assert!(
        !configs.complete,
        "an unpaged answer saying more follow was taken whole"
    );

    env.faults(json!({})).await;
    let listing = proof_of_limits(&client).await;
    assert!(listing.complete, "without the fault the list is whole");
}

/// A drift pass reads every object its list did not show, so it proves nothing by absence and
/// reads a list of several pages once; the recovery of a lost create reads the same list twice.
#[tokio::test]
async fn a_drift_pass_reads_a_paged_list_once() {
    let env = with_150_rate_limits().await;
    let client = env.client();
    const PAGES: &str = "GET /ai_gw/v2/policies/rate-limits";
    let rows = <RateLimitsPolicy as drift::Listed>::list(&client, None)
        .await
        .unwrap();
    assert_eq!(rows.items.len(), 150);
    assert!(rows.complete, "one reading, counted whole by its total");
    assert_eq!(env.count(PAGES, 200).await, 2, "one reading of two pages");

    let lookup = <RateLimitsPolicy as Policy>::list(&client, None, Reading::Proof)
        .await
        .unwrap();
    assert!(lookup.complete);
    assert_eq!(
        env.count(PAGES, 200).await,
        2 + 4,
        "a proof reads them twice"
    );
}

/// The guardrail reference list reads every page (1,000 a page), with or without a `total`;
/// without one it proves nothing whole.
#[tokio::test]
async fn every_guardrail_is_listed_across_pages() {
    let env = ClientEnv::start().await;
    let seeded: Vec<Value> = (0..1050)
        .map(|n| json!({"name": format!("g-{n}")}))
        .collect();
    env.seed(json!({ "guardrails": seeded })).await;
    let guardrails = env.client();
    let guardrails = guardrails.guardrails();
    let listing = guardrails.listing_all().await.unwrap();
    assert_eq!((listing.items.len(), listing.complete), (1050, true));
    env.faults(json!({"list_without_total": true})).await;
    let listing = guardrails.listing_all().await.unwrap();
    assert_eq!(listing.items.len(), 1050);
    assert!(!listing.complete, "nothing counts the rows of two pages");
}

/// The drift check's config list is decoded as it arrives (never held whole): thousands of
/// rows, far more than the part of an answer kept for error reports, come back complete and
/// the same as the ordinary list; a capped list is reported incomplete.
#[tokio::test]
async fn config_stamps_are_decoded_as_the_answer_arrives() {
    let env = ClientEnv::start().await;
    let seeded: Vec<Value> = (0..3000)
        .map(|i| {
            json!({"name": format!("seeded-{i:04}"), "slug": format!("pc-seeded-{i:04}"),
                   "config": {"retry": {"attempts": 3}, "note": "x".repeat(200)}})
        })
        .collect();
    env.seed(json!({ "configs": seeded })).await;
    let client = env.client();
    let configs = client.configs();
    let stamps = configs.stamps(None).await.unwrap();
    assert!(stamps.complete);
    assert_eq!(stamps.items.len(), 3000);
    let listing = configs.listing(None).await.unwrap();
    let ids = |rows: Vec<String>| {
        let mut rows = rows;
        rows.sort();
        rows
    };
    assert_eq!(
        ids(stamps.items.iter().map(|s| s.id.clone()).collect()),
        ids(listing.items.iter().map(|c| c.id.clone()).collect())
    );
    assert!(
        stamps
            .items
            .iter()
            .all(|s| s.slug.starts_with("pc-seeded-"))
    );

    env.faults(json!({"list_cap": 100})).await;
    let capped = configs.stamps(None).await.unwrap();
    assert_eq!(capped.items.len(), 100);
    assert!(
        !capped.complete,
        "a capped list proves nothing about absence"
    );
}
