//! The emulator's data plane as a gateway, over real HTTP: `POST /v1/chat/completions` and
//! `/v1/responses` routed by an API key's default config (single, fallback, loadbalance), the
//! per-provider faults, and the telemetry routes read back through the typed client (cohorts by
//! API key, status code and metadata; the window; nulls for an empty cohort).

use std::sync::Arc;

use crate::support;

use aigw::api::{
    Client, ClientConfig, CountMetric, GroupColumn, GroupDimension, StaticToken, TelemetryQuery,
};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use support::emu::{Emu, TOKEN};

/// The workspace every key here lives in; telemetry rows carry it as their workspace slug.
const WORKSPACE: &str = "ws-canary";
const TSG: &str = "1234567890";
const STABLE_KEY: &str = "0a1b2c3d-0000-4000-8000-000000000001";
const CANARY_KEY: &str = "0a1b2c3d-0000-4000-8000-000000000002";

/// A gateway answer: status, the provider that answered (`x-portkey-provider`), body.
struct Answer {
    status: StatusCode,
    provider: String,
    body: Value,
}

impl Emu {
    /// Seeds configs (`slug` → document) and keys (`id`, value, config slug, metadata).
    async fn seed_gateway(&self, configs: &[(&str, Value)], keys: &[(&str, &str, &str, Value)]) {
        let configs: Vec<Value> = configs
            .iter()
            .map(|(slug, document)| json!({"slug": slug, "name": slug, "config": document}))
            .collect();
        let keys: Vec<Value> = keys
            .iter()
            .map(|(id, key, config, metadata)| {
                json!({"id": id, "key": key, "name": id, "workspace_id": WORKSPACE,
                       "defaults": {"config_id": config, "metadata": metadata}})
            })
            .collect();
        let (status, body) = self
            .seed(json!({"configs": configs, "api_keys": keys}))
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }

    /// An emulator seeded with [`Emu::seed_gateway`]'s `configs` and `keys`.
    async fn with_gateway(configs: &[(&str, Value)], keys: &[(&str, &str, &str, Value)]) -> Self {
        let emu = Emu::start().await;
        emu.seed_gateway(configs, keys).await;
        emu
    }

    /// A gateway of one config `(slug, provider)` (routing to `@{provider}`) and one key
    /// `(id, value)` on it.
    async fn with_one_key((slug, provider): (&str, &str), (id, key): (&str, &str)) -> Self {
        let config = json!({"provider": format!("@{provider}")});
        Emu::with_gateway(&[(slug, config)], &[(id, key, slug, json!({}))]).await
    }

    /// [`Emu::chat`] with `key`, answered with `(status, provider)`.
    async fn chat_reaches(&self, key: &str, expected: (StatusCode, &str)) -> Answer {
        let answer = self.chat(key, None).await;
        assert_eq!((answer.status, answer.provider.as_str()), expected);
        answer
    }

    /// The status of a `PUT /_emulator/faults` of `faults`.
    async fn faults_status(&self, faults: Value) -> StatusCode {
        let (status, _) = self
            .control(Method::PUT, "/_emulator/faults", Some(faults))
            .await;
        status
    }

    /// `POST /v1/chat/completions` with a gateway key and optional metadata header.
    async fn chat(&self, key: &str, metadata: Option<&str>) -> Answer {
        let mut request = self
            .http
            .post(self.url("/v1/chat/completions"))
            .header("x-portkey-api-key", key)
            .json(&json!({"model": "gpt-4o-mini",
                          "messages": [{"role": "user", "content": "say hello"}]}));
        if let Some(metadata) = metadata {
            request = request.header("x-portkey-metadata", metadata);
        }
        let response = request.send().await.expect("gateway answers");
        let status = response.status();
        let provider = response
            .headers()
            .get("x-portkey-provider")
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let body = response.json().await.expect("json");
        Answer {
            status,
            provider,
            body,
        }
    }

    fn telemetry_client(&self) -> Client {
        Client::new(ClientConfig::new(
            self.running.management_url(),
            self.running.gateway_url(),
            Arc::new(StaticToken::new(TOKEN)),
        ))
        .expect("client builds")
    }

    async fn gateway_log(&self) -> Vec<Value> {
        self.state().await["gateway_log"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

/// The last hour up to a minute from now.
fn window() -> TelemetryQuery {
    let now = jiff::Timestamp::now();
    TelemetryQuery::window(
        TSG,
        WORKSPACE,
        now - jiff::SignedDuration::from_hours(1),
        now + jiff::SignedDuration::from_mins(1),
    )
}

fn cohort(key: &str) -> TelemetryQuery {
    let mut query = window();
    query.api_key_ids = vec![key.to_owned()];
    query
}

#[tokio::test]
async fn each_strategy_routes_by_the_keys_default_config() {
    let emu = Emu::start().await;
    let two = |mode: &str| json!({"strategy": {"mode": mode}, "targets": [{"provider": "@alpha"}, {"provider": "@beta"}]});
    emu.seed_gateway(
        &[
            ("pc-single", two("single")),
            ("pc-fallback", two("fallback")),
            (
                "pc-fallback-429",
                json!({"strategy": {"mode": "fallback", "on_status_codes": [429]},
                       "targets": [{"provider": "@alpha"}, {"provider": "@beta"}]}),
            ),
            (
                "pc-lb",
                json!({"strategy": {"mode": "loadbalance"},
                       "targets": [{"provider": "@alpha", "weight": 3}, {"provider": "@beta", "weight": 1}]}),
            ),
        ],
        &[
            ("0a1b2c3d-0000-4000-8000-00000000000a", "ak-single", "pc-single", json!({})),
            ("0a1b2c3d-0000-4000-8000-00000000000b", "ak-fallback", "pc-fallback", json!({})),
            ("0a1b2c3d-0000-4000-8000-00000000000c", "ak-429", "pc-fallback-429", json!({})),
            ("0a1b2c3d-0000-4000-8000-00000000000d", "ak-lb", "pc-lb", json!({})),
        ],
    )
    .await;

    let single = emu
        .chat_reaches("ak-single", (StatusCode::OK, "alpha"))
        .await;
    assert_eq!(single.body["object"], "chat.completion");
    assert_eq!(single.body["choices"][0]["message"]["role"], "assistant");

    emu.faults(json!({"providers": {"alpha": {"error_rate": 1.0, "status": 502}}}))
        .await;
    let single = emu
        .chat_reaches("ak-single", (StatusCode::BAD_GATEWAY, "alpha"))
        .await;
    assert_eq!(single.body["error"]["type"], "api_error", "{}", single.body);
    emu.chat_reaches("ak-fallback", (StatusCode::OK, "beta"))
        .await;
    let limited = emu.chat("ak-429", None).await;
    assert_eq!(
        (limited.status, limited.provider.as_str()),
        (StatusCode::BAD_GATEWAY, "alpha"),
        "a 502 is not among on_status_codes: no fallback"
    );
    emu.faults(json!({"providers": {"alpha": {"error_rate": 1.0, "status": 429}}}))
        .await;
    emu.chat_reaches("ak-429", (StatusCode::OK, "beta")).await;

    let mut runs = Vec::new();
    for _ in 0..2 {
        emu.faults(json!({"gateway_seed": 42})).await;
        let mut picks = Vec::new();
        for _ in 0..200 {
            picks.push(emu.chat("ak-lb", None).await.provider);
        }
        runs.push(picks);
    }
    assert_eq!(runs[0], runs[1], "the same seed picks the same targets");
    let alpha = runs[0].iter().filter(|p| *p == "alpha").count();
    assert!(
        (120..180).contains(&alpha),
        "weights 3:1 send about 150 of 200 to alpha: {alpha}"
    );

    let log = emu.gateway_log().await;
    assert_eq!(log.len(), 5 + 400, "every request is logged");
    let fallback_row = &log[2];
    assert_eq!(fallback_row["config_slug"], "pc-fallback");
    assert_eq!(fallback_row["mode"], "fallback");
    assert_eq!(fallback_row["attempts"], 2);
    assert_eq!(fallback_row["last_used_option_index"], 1);
    assert!(fallback_row["config_version_id"].is_string());
}

#[tokio::test]
async fn keys_are_checked_and_a_config_change_reroutes_at_once() {
    let emu = Emu::with_gateway(
        &[(
            "pc-a",
            json!({"provider": "@alpha", "override_params": {"model": "gpt-4o"}}),
        )],
        &[
            (STABLE_KEY, "ak-stable", "pc-a", json!({})),
            (CANARY_KEY, "ak-nowhere", "pc-missing", json!({})),
        ],
    )
    .await;
    let unknown = emu.chat("ak-unknown", None).await;
    assert_eq!(unknown.status, StatusCode::UNAUTHORIZED);
    assert_eq!(unknown.body["error"]["type"], "authentication_error");
    let missing = emu.chat("ak-nowhere", None).await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST, "{}", missing.body);
    let bad_metadata = emu.chat("ak-stable", Some("not json")).await;
    assert_eq!(bad_metadata.status, StatusCode::BAD_REQUEST);

    let answer = emu.chat("ak-stable", None).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.body["model"], "gpt-4o", "override_params.model wins");

    let (status, _) = emu
        .put(
            "/ai_gw/v2/configs/pc-a",
            json!({"config": {"provider": "@beta"}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let answer = emu.chat("ak-stable", None).await;
    assert_eq!(
        answer.provider, "beta",
        "the key follows its config's current version"
    );
    assert_eq!(answer.body["model"], "gpt-4o-mini");

    let versions: Vec<Value> = emu
        .gateway_log()
        .await
        .into_iter()
        .filter(|row| row["api_key_id"] == STABLE_KEY && row["response_status_code"] == 200)
        .map(|row| row["config_version_id"].clone())
        .collect();
    assert_eq!(versions.len(), 2);
    assert_ne!(
        versions[0], versions[1],
        "each row names the version that routed it"
    );

    let state = emu.state().await;
    let default_workspace = state["default_workspace_id"].clone();
    let slug = state["workspaces"]
        .as_array()
        .and_then(|all| all.iter().find(|w| w["id"] == default_workspace))
        .map(|w| w["slug"].clone())
        .expect("the default workspace");
    let (status, _) = emu
        .seed(
            json!({"api_keys": [{"key": "ak-by-uuid", "workspace_id": default_workspace,
                                      "defaults": {"config_id": "pc-a"}}]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(emu.chat("ak-by-uuid", None).await.status, StatusCode::OK);
    let last = emu.gateway_log().await.pop().expect("a row");
    assert_eq!(
        last["workspace_slug"], slug,
        "rows carry the workspace's slug, not its UUID"
    );

    let response = emu
        .http
        .post(emu.url("/v1/responses"))
        .header("x-portkey-api-key", "ak-stable")
        .json(&json!({"model": "gpt-4o-mini", "input": "hello"}))
        .send()
        .await
        .expect("responses answers");
    assert_eq!(response.status(), StatusCode::OK);
    let created: Value = response.json().await.expect("json");
    assert_eq!(created["object"], "response");
    assert_eq!(created["output"][0]["content"][0]["type"], "output_text");
    let (status, stored) = emu
        .get(&format!(
            "/v1/responses/{}",
            created["id"].as_str().expect("id")
        ))
        .await;
    assert_eq!(
        (status, stored["id"].clone()),
        (StatusCode::OK, created["id"].clone())
    );
}

#[tokio::test]
async fn provider_faults_fail_a_share_of_calls_and_add_latency() {
    let emu = Emu::with_one_key(("pc-slow", "slow"), (CANARY_KEY, "ak-canary")).await;
    let status = emu
        .faults_status(json!({"providers": {"slow": {"error_rate": 1.5}}}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "a rate is a probability");
    let status = emu
        .faults_status(json!({"providers": {"slow": {"status": 200}}}))
        .await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "a fault status is an error status"
    );

    emu.faults(json!({"gateway_seed": 3,
                      "providers": {"slow": {"error_rate": 0.3, "status": 500, "latency_ms": 40}}}))
        .await;
    let mut failed = 0;
    for _ in 0..100 {
        let answer = emu.chat("ak-canary", None).await;
        if answer.status == StatusCode::INTERNAL_SERVER_ERROR {
            failed += 1;
        } else {
            assert_eq!(answer.status, StatusCode::OK);
        }
    }
    assert!(
        (15..=45).contains(&failed),
        "about 30 of 100 fail: {failed}"
    );

    let client = emu.telemetry_client();
    let telemetry = client.telemetry();
    let latency = telemetry
        .latency(&cohort(CANARY_KEY))
        .await
        .expect("latency");
    assert!(latency.p90.is_some_and(|p90| p90 >= 40.0), "{latency:?}");
    let mut errors = cohort(CANARY_KEY);
    errors.status_codes = vec![500, 502, 503];
    let errors = telemetry
        .count(CountMetric::Requests, &errors)
        .await
        .expect("requests");
    assert_eq!(errors.total, Some(f64::from(failed)));
}

#[tokio::test]
async fn telemetry_reads_cohorts_by_key_status_and_metadata() {
    let emu = Emu::with_gateway(
        &[
            ("pc-stable", json!({"provider": "@stable-openai"})),
            (
                "pc-canary",
                json!({"strategy": {"mode": "fallback", "on_status_codes": [429]},
                       "targets": [{"provider": "@canary-openai"}, {"provider": "@stable-openai"}]}),
            ),
        ],
        &[
            (STABLE_KEY, "ak-stable", "pc-stable", json!({"team": "payments"})),
            (CANARY_KEY, "ak-canary", "pc-canary", json!({"team": "payments"})),
        ],
    )
    .await;
    emu.faults(json!({"gateway_seed": 11, "providers": {
        "canary-openai": {"error_rate": 0.3, "status": 503, "latency_ms": 30},
        "stable-openai": {"latency_ms": 5}}}))
        .await;
    let mut canary_failed: u32 = 0;
    for n in 0..60 {
        let tag = format!(r#"{{"aigw_canary":"r{}"}}"#, n % 2);
        emu.chat("ak-stable", Some(&tag)).await;
        if emu.chat("ak-canary", Some(&tag)).await.status == StatusCode::SERVICE_UNAVAILABLE {
            canary_failed += 1;
        }
    }
    assert!(canary_failed > 0);

    let client = emu.telemetry_client();
    let telemetry = client.telemetry();
    let by_key = telemetry
        .groups(
            GroupDimension::ApiKey,
            &window(),
            &[GroupColumn::AvgLatency, GroupColumn::SuccessRate],
        )
        .await
        .expect("groups");
    assert_eq!(by_key.object, "list");
    assert_eq!(by_key.total, 2.0);
    let canary = by_key
        .row(GroupDimension::ApiKey, CANARY_KEY)
        .expect("canary row");
    let stable = by_key
        .row(GroupDimension::ApiKey, STABLE_KEY)
        .expect("stable row");
    assert_eq!((canary.requests, stable.requests), (60.0, 60.0));
    assert_eq!(stable.success_rate, Some(100.0));
    let expected = 100.0 * f64::from(60 - canary_failed) / 60.0;
    assert!((canary.success_rate.expect("column asked") - expected).abs() < 1e-9);
    assert!(canary.avg_latency > stable.avg_latency);
    assert!(canary.cost.is_none(), "only the asked columns");

    let candidate = telemetry
        .cohort(&cohort(CANARY_KEY))
        .await
        .expect("figures");
    let baseline = telemetry
        .cohort(&cohort(STABLE_KEY))
        .await
        .expect("figures");
    assert_eq!(
        (candidate.requests, candidate.server_errors),
        (60, u64::from(canary_failed))
    );
    assert_eq!(candidate.error_rate, Some(f64::from(canary_failed) / 60.0));
    assert_eq!((baseline.requests, baseline.error_rate), (60, Some(0.0)));
    assert!(candidate.p90_ms.expect("p90") >= 30.0, "{candidate:?}");
    assert!(baseline.p90_ms.expect("p90") < candidate.p90_ms.expect("p90"));

    let statuses = telemetry
        .groups(GroupDimension::StatusCode, &cohort(CANARY_KEY), &[])
        .await
        .expect("groups");
    let count = |code: &str| {
        statuses
            .row(GroupDimension::StatusCode, code)
            .map_or(0.0, |row| row.requests)
    };
    assert_eq!(count("503"), f64::from(canary_failed));
    assert_eq!(count("200"), f64::from(60 - canary_failed));

    let mut tagged = cohort(CANARY_KEY);
    tagged.metadata.insert("aigw_canary".into(), "r1".into());
    tagged.metadata.insert("team".into(), "payments".into());
    let requests = telemetry
        .count(CountMetric::Requests, &tagged)
        .await
        .expect("requests");
    assert_eq!(requests.total, Some(30.0), "metadata narrows to one tag");
    tagged.status_codes = vec![200];
    let by_provider = telemetry
        .groups(GroupDimension::Provider, &tagged, &[])
        .await
        .expect("groups");
    assert_eq!(
        by_provider.total, 1.0,
        "a 503 is not a 429: no fallback to stable-openai"
    );
    assert!(
        by_provider
            .row(GroupDimension::Provider, "canary-openai")
            .is_some()
    );

    let (status, body) = emu
        .get(&format!(
            "/ai_gw/v2/logs/charts/requests?organisationId={TSG}&workspaceSlug={WORKSPACE}\
             &timeOfGenerationMin=2026-01-01T00:00:00Z&timeOfGenerationMax=2026-01-02T00:00:00Z"
        ))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "a Z suffix is refused");
    assert_eq!(body["data"]["errorCode"], "AB01");
    let (status, _) = emu
        .get(&format!(
            "/ai_gw/v2/logs/groups/api_key?workspaceSlug={WORKSPACE}\
             &timeOfGenerationMin=2026-01-01T00:00:00%2B00:00&timeOfGenerationMax=2026-01-02T00:00:00%2B00:00"
        ))
        .await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "organisationId is required"
    );
    let mut snake = window();
    snake.api_key_ids.clear();
    let all = telemetry
        .count(CountMetric::Requests, &snake)
        .await
        .expect("requests");
    let (status, ignored) = emu
        .get(&format!(
            "/ai_gw/v2/logs/charts/requests?{}&api_key_ids={CANARY_KEY}",
            pairs_text(&snake)
        ))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        ignored["data"]["total"].as_f64(),
        all.total,
        "snake_case is ignored"
    );
}

#[tokio::test]
async fn an_empty_cohort_reads_zero_counts_and_null_latency() {
    let emu = Emu::start().await;
    let client = emu.telemetry_client();
    let telemetry = client.telemetry();
    let nobody = cohort("00000000-0000-4000-8000-000000000000");
    let latency = telemetry.latency(&nobody).await.expect("latency");
    assert_eq!(
        (latency.total, latency.p50, latency.p90, latency.p99),
        (None, None, None, None)
    );
    assert!(!latency.records.is_empty(), "zero-valued buckets stay");
    assert!(latency.records.iter().all(|record| record.p90 == 0.0));
    let requests = telemetry
        .count(CountMetric::Requests, &nobody)
        .await
        .expect("requests");
    assert_eq!(requests.total, Some(0.0));
    let groups = telemetry
        .groups(GroupDimension::ApiKey, &nobody, &[GroupColumn::AvgLatency])
        .await
        .expect("groups");
    assert_eq!((groups.total, groups.data.len()), (0.0, 0));
    let users = telemetry.users(&nobody).await.expect("users");
    let figures = telemetry.cohort(&nobody).await.expect("figures");
    assert_eq!(
        (figures.requests, figures.error_rate, figures.p90_ms),
        (0, None, None)
    );
    assert!(users.records.is_empty());
}

fn pairs_text(query: &TelemetryQuery) -> String {
    query
        .pairs()
        .into_iter()
        .map(|(name, value)| format!("{name}={}", value.replace('+', "%2B")))
        .collect::<Vec<_>>()
        .join("&")
}

/// Runs the built `aigw api telemetry …` off the async runtime (the emulator keeps serving).
async fn aigw_telemetry(emu: &Emu, args: &[&str]) -> Value {
    let token = tempfile::NamedTempFile::new().expect("token file");
    std::fs::write(token.path(), TOKEN).expect("token written");
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_aigw"));
    command
        .args(["api", "telemetry"])
        .args(args)
        .args(["--organisation-id", TSG, "--workspace-slug", WORKSPACE])
        .args(["--management-url", &emu.running.management_url()])
        .arg("--token-file")
        .arg(token.path());
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("joined")
        .expect("aigw runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("json on stdout")
}

#[tokio::test]
async fn aigw_api_telemetry_reads_groups_and_charts() {
    let emu = Emu::with_one_key(("pc-a", "alpha"), (STABLE_KEY, "ak-stable")).await;
    emu.faults(json!({"gateway_seed": 1, "providers": {"alpha": {"error_rate": 0.5}}}))
        .await;
    for _ in 0..10 {
        emu.chat("ak-stable", Some(r#"{"env":"test"}"#)).await;
    }
    let groups = aigw_telemetry(
        &emu,
        &[
            "groups",
            "status_code",
            "--columns",
            "success_rate",
            "--since",
            "10m",
        ],
    )
    .await;
    let total: f64 = groups["data"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|row| row["requests"].as_f64().expect("requests"))
        .sum();
    assert_eq!(total, 10.0, "{groups}");
    let tagged = aigw_telemetry(
        &emu,
        &[
            "chart",
            "requests",
            "--api-key-id",
            STABLE_KEY,
            "--metadata",
            "env=test",
        ],
    )
    .await;
    assert_eq!(tagged["total"], json!(10.0));
    let nobody = aigw_telemetry(
        &emu,
        &[
            "chart",
            "latency",
            "--api-key-id",
            "00000000-0000-4000-8000-000000000000",
        ],
    )
    .await;
    assert!(nobody["p90"].is_null(), "{nobody}");
    let figures = aigw_telemetry(&emu, &["cohort", "--api-key-id", STABLE_KEY]).await;
    assert_eq!(figures["requests"], json!(10), "{figures}");
    let errors = figures["server_errors"].as_u64().expect("count");
    assert_eq!(figures["by_status"]["503"].as_u64().unwrap_or(0), errors);
    assert_eq!(figures["error_rate"].as_f64(), Some(errors as f64 / 10.0));
}
