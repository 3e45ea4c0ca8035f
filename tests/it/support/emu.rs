//! The emulator over real HTTP, for tests of its routes: calls with the test token, control
//! endpoints (state, faults) without one. Each test module adds its own helpers in an `impl Emu`
//! (one binary: their names must differ between modules).

use std::time::Duration;

use std::sync::Arc;

use aigw::api::{Client, ClientConfig, RetryPolicy, StaticToken};
use aigw::emulator::{EmulatorOptions, Running, spawn};
use reqwest::{Method, RequestBuilder, StatusCode};
use serde_json::{Value, json};

pub const TOKEN: &str = "test-token";

pub struct Emu {
    pub running: Running,
    pub http: reqwest::Client,
}

impl Emu {
    pub async fn start() -> Self {
        Self::start_with(EmulatorOptions::new(TOKEN)).await
    }

    pub async fn start_with(options: EmulatorOptions) -> Self {
        let running = spawn(options).await.expect("emulator starts");
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .expect("http client");
        Self { running, http }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.running.management_url())
    }

    pub fn call(&self, method: Method, path: &str) -> RequestBuilder {
        self.http.request(method, self.url(path)).bearer_auth(TOKEN)
    }

    /// The answer to `method path` without a body, as it came.
    pub async fn answer(&self, method: Method, path: &str) -> reqwest::Response {
        let request = self.call(method.clone(), path);
        let sent = request.send().await;
        sent.unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    /// Sends and returns status plus JSON body (`Null` for an empty body).
    pub async fn send(&self, request: RequestBuilder) -> (StatusCode, Value) {
        let response = request.send().await.expect("request succeeds");
        let status = response.status();
        let bytes = response.bytes().await.expect("body");
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).expect("json body")
        };
        (status, body)
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.send(self.call(Method::GET, path)).await
    }

    pub async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.send(self.call(Method::POST, path).json(&body)).await
    }

    pub async fn put(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.send(self.call(Method::PUT, path).json(&body)).await
    }

    pub async fn delete(&self, path: &str) -> (StatusCode, Value) {
        self.send(self.call(Method::DELETE, path)).await
    }

    /// A control endpoint (no token); returns status and body.
    pub async fn control(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut request = self.http.request(method, self.url(path));
        if let Some(body) = body {
            request = request.json(&body);
        }
        self.send(request).await
    }

    /// Reads the object of `base` by its id and by its slug (`keys`): both answers, each a 200
    /// that shows none of `hidden` (values sent that reads must never echo).
    pub async fn read_by_each(&self, base: &str, keys: [&str; 2], hidden: &[&str]) -> Vec<Value> {
        let mut reads = Vec::new();
        for key in keys {
            let (status, read) = self.get(&format!("{base}/{key}")).await;
            assert_eq!(status, StatusCode::OK, "{read}");
            let shown = read.to_string();
            let echoed: Vec<_> = hidden.iter().filter(|h| shown.contains(*h)).collect();
            assert!(echoed.is_empty(), "{echoed:?} echoed as sent: {shown}");
            reads.push(read);
        }
        reads
    }

    /// `POST /_emulator/seed` with `seed`: status and answer.
    pub async fn seed(&self, seed: Value) -> (StatusCode, Value) {
        self.control(Method::POST, "/_emulator/seed", Some(seed))
            .await
    }

    pub async fn state(&self) -> Value {
        self.control(Method::GET, "/_emulator/state", None).await.1
    }

    /// The record of the state's `collection` whose `field` is `value`; `Null` when there is
    /// none.
    pub async fn state_record(&self, collection: &str, field: &str, value: &str) -> Value {
        self.state().await[collection]
            .as_array()
            .and_then(|all| all.iter().find(|r| r[field] == value).cloned())
            .unwrap_or(Value::Null)
    }

    /// POSTs `body` to `path`, which answers 400; the answer.
    pub async fn post_refused(&self, path: &str, body: Value) -> Value {
        let (status, answer) = self.post(path, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        answer
    }

    /// Creates with `POST path`; the receipt, which holds `id`, `object` and `slug` only.
    pub async fn post_receipt(&self, path: &str, body: Value) -> Value {
        let (status, receipt) = self.post(path, body).await;
        assert_eq!(status, StatusCode::OK, "{receipt}");
        let fields: Vec<&String> = receipt.as_object().expect("receipt").keys().collect();
        assert_eq!(fields, ["id", "object", "slug"]);
        receipt
    }

    /// Deletes the policy at `path`: it answers `{}`, then is not found, but for
    /// `?status=archived`, where it stands archived.
    pub async fn delete_archives(&self, path: &str) {
        let (status, body) = self.delete(path).await;
        assert_eq!((status, body), (StatusCode::OK, json!({})));
        let (status, missing) = self.get(path).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_ab(&missing, "AB08", "not found");
        let (status, archived) = self.get(&format!("{path}?status=archived")).await;
        assert_eq!(
            (status, archived["status"].clone()),
            (StatusCode::OK, json!("archived"))
        );
    }

    pub async fn faults(&self, faults: Value) {
        let (status, _) = self
            .control(Method::PUT, "/_emulator/faults", Some(faults))
            .await;
        assert_eq!(status, StatusCode::OK);
    }
}

/// Emulator options with the test token whose key rotations keep the old key for `transition`
/// at most.
pub fn key_transition_options(transition: Duration) -> EmulatorOptions {
    let mut options = EmulatorOptions::new(TOKEN);
    options.min_key_transition = Some(transition);
    options
}

/// A string value, owned.
pub fn text(value: &Value) -> String {
    value.as_str().expect("a string").to_owned()
}

/// An error envelope with the error code `code` whose message mentions `mentions`.
pub fn assert_ab(body: &Value, code: &str, mentions: &str) {
    assert_eq!(body["success"], json!(false), "{body}");
    assert_eq!(body["data"]["errorCode"], json!(code), "{body}");
    let message = body["data"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(mentions),
        "message {message:?} should mention {mentions:?}"
    );
}

/// A 400 `AB01` whose message mentions `mentions`.
pub fn assert_ab01(status: StatusCode, body: &Value, mentions: &str) {
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["data"]["errorCode"], "AB01", "{body}");
    let message = body["data"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(mentions),
        "{message:?} should mention {mentions:?}"
    );
}

/// An emulator and the API client's configuration for it, for the tests of the client; each
/// test module adds its own helpers in an `impl ClientEnv` (names differ between modules).
pub struct ClientEnv {
    pub emulator: Running,
    pub control: reqwest::Client,
}

impl ClientEnv {
    pub async fn start() -> Self {
        Self::start_with(EmulatorOptions::new(TOKEN)).await
    }

    pub async fn start_with(options: EmulatorOptions) -> Self {
        let Emu { running, http } = Emu::start_with(options).await;
        Self {
            emulator: running,
            control: http,
        }
    }

    /// The test token, quick retries and no rate limit.
    pub fn config(&self) -> ClientConfig {
        ClientConfig::new(
            self.emulator.management_url(),
            self.emulator.gateway_url(),
            Arc::new(StaticToken::new(TOKEN)),
        )
        .retry(RetryPolicy {
            max_attempts: 5,
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_secs(5),
        })
        .rate_limit(0.0, 1)
    }

    pub fn client(&self) -> Client {
        Client::new(self.config()).expect("client builds")
    }

    /// A control endpoint (`/_emulator/{path}`); its status and answer.
    pub async fn control(&self, method: Method, path: &str, body: Value) -> (u16, Value) {
        let url = format!("{}/_emulator/{path}", self.emulator.management_url());
        let response = self
            .control
            .request(method, url)
            .json(&body)
            .send()
            .await
            .expect("control call");
        let status = response.status().as_u16();
        (
            status,
            response.json().await.expect("control answer is JSON"),
        )
    }

    /// Runs `aigw api {args}` against its emulator with the test token.
    pub async fn aigw_api(&self, args: &[&str]) -> std::process::Output {
        super::cli::aigw_api(&self.emulator.management_url(), TOKEN, args).await
    }

    pub async fn faults(&self, faults: Value) {
        let (status, _) = self.control(Method::PUT, "faults", faults).await;
        assert_eq!(status, 200);
    }
}
