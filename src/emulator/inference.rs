//! The data plane as a gateway: `POST /v1/chat/completions` and `POST /v1/responses`.
//!
//! A request carries the gateway key in `x-portkey-api-key` (FACTS §2, "Runtime gateway (`/v1`)
//! authentication"); the bearer token of the management API plays no part. The key's
//! `defaults.config_id` names the config, and the config's current document routes the request
//! ([`super::routing`]) over simulated providers: each answers a completion unless its
//! per-provider fault (`PUT /_emulator/faults` `providers`) fails the call. Answers are
//! OpenAI-shaped (a chat completion, a response object, or the OpenAI error envelope), so the
//! OpenAI SDKs can call the emulator with `default_headers={"x-portkey-api-key": …}`.
//!
//! Every request that got past the key check is one telemetry row ([`super::telemetry`]): key,
//! config id, slug and version, the provider that answered last, status, latency, tokens,
//! metadata (the key's `defaults.metadata` under the request's `x-portkey-metadata`, a JSON
//! object) and trace id (`x-portkey-trace-id`, else a fresh one). Answers carry
//! `x-portkey-trace-id`, `x-portkey-provider` and `x-portkey-last-used-option-index`.
//!
//! An unknown, expired or rotated-out key is 401; a key without a default config, a config that
//! is gone or cannot route, a malformed body or `stream: true` (not modelled) is 400.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{
    Json, Router,
    body::Bytes,
    extract::{FromRef, State},
    http::{HeaderMap, HeaderName, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    routing::post,
};
use rand::{Rng, rngs::StdRng};
use serde_json::{Value, json};

use super::{
    api_keys::ApiKeyStore,
    common::{
        clock::unix_now,
        errors::EmulatorError,
        fields::{self, Object},
        ids::{new_id, random_hex},
        state::{Common, lock},
    },
    configs::ConfigStore,
    gateway::{self, Responses},
    routing::{self, Plan},
    telemetry::{LogRow, TelemetryLog},
    workspaces::WorkspaceStore,
};

/// What the inference routes reach.
#[derive(Clone)]
pub struct InferenceState {
    pub common: Arc<Common>,
    pub api_keys: Arc<Mutex<ApiKeyStore>>,
    pub configs: Arc<Mutex<ConfigStore>>,
    pub telemetry: Arc<Mutex<TelemetryLog>>,
    pub rng: Arc<Mutex<StdRng>>,
    pub responses: Arc<Mutex<Responses>>,
    pub workspaces: Arc<Mutex<WorkspaceStore>>,
}

const API_KEY_HEADER: &str = "x-portkey-api-key";
const METADATA_HEADER: &str = "x-portkey-metadata";
const TRACE_HEADER: &str = "x-portkey-trace-id";

/// Which OpenAI route a request came in on.
#[derive(Clone, Copy)]
enum Api {
    ChatCompletions,
    Responses,
}

impl Api {
    fn path(self) -> &'static str {
        match self {
            Self::ChatCompletions => "/v1/chat/completions",
            Self::Responses => "/v1/responses",
        }
    }
}

/// The key a request authenticated as.
struct Caller {
    api_key_id: String,
    workspace: String,
    config_id: Option<String>,
    metadata: BTreeMap<String, String>,
}

/// What a request asked for, read from its body.
struct Prompt {
    model: Option<String>,
    text: String,
}

/// A request's outcome, before it is answered and logged.
struct Outcome {
    status: StatusCode,
    body: Value,
    provider: String,
    model: String,
    config: Option<(String, String, String)>,
    mode: String,
    option_index: usize,
    attempts: usize,
    units: (u64, u64),
}

impl Outcome {
    fn refused(error: &EmulatorError, model: String) -> Self {
        let body = error_body(error);
        Self {
            status: error.status(),
            body,
            provider: String::new(),
            model,
            config: None,
            mode: String::new(),
            option_index: 0,
            attempts: 0,
            units: (0, 0),
        }
    }
}

fn error_body(error: &EmulatorError) -> Value {
    error.body()
}

/// The data plane's routes: each OpenAI API at its path, served by [`serve`].
pub fn routes<S>() -> Router<S>
where
    InferenceState: FromRef<S>,
    S: Clone + Send + Sync + 'static,
{
    [Api::ChatCompletions, Api::Responses]
        .into_iter()
        .fold(Router::new(), |router, api| {
            let handler =
                move |State(state): State<InferenceState>, headers: HeaderMap, body: Bytes| {
                    serve(state, api, headers, body)
                };
            router.route(api.path(), post(handler))
        })
}

fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

/// Metadata values as strings (the live filter matches strings).
fn string_map(object: &Object) -> BTreeMap<String, String> {
    object
        .iter()
        .filter(|(_, value)| !value.is_null())
        .map(|(key, value)| {
            let text = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned);
            (key.clone(), text)
        })
        .collect()
}

fn authenticate(state: &InferenceState, headers: &HeaderMap) -> Result<Caller, EmulatorError> {
    let presented = header(headers, API_KEY_HEADER)
        .map(str::trim)
        .filter(|key| !key.is_empty())
        .ok_or_else(|| {
            EmulatorError::GatewayUnauthorized(format!("{API_KEY_HEADER} header is required"))
        })?;
    let mut caller = {
        let store = lock(&state.api_keys);
        let record = store
            .sorted()
            .into_iter()
            .find(|record| record.liveness(presented).is_some())
            .ok_or_else(|| EmulatorError::GatewayUnauthorized("Invalid API Key".to_owned()))?;
        Caller {
            api_key_id: record.id.clone(),
            workspace: record.workspace_id.clone().unwrap_or_default(),
            config_id: record.defaults.config_id.clone(),
            metadata: record
                .defaults
                .metadata
                .as_object()
                .map(string_map)
                .unwrap_or_default(),
        }
    };
    // Telemetry is per workspace slug: the slug of the key's workspace when the emulator knows
    // it, else the key's workspace_id as the key holds it. (The key store is not held here.)
    if let Some(found) = lock(&state.workspaces).find(&caller.workspace) {
        caller.workspace = found.key.slug.clone();
    }
    Ok(caller)
}

/// The text of a message `content`: a string, or parts with `text`.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

fn prompt(api: Api, body: &Object) -> Result<Prompt, EmulatorError> {
    let model = fields::opt_str(body, "model").map_err(|_| EmulatorError::GatewayInvalid {
        param: "model",
        message: "model must be a string".to_owned(),
    })?;
    if body.get("stream").and_then(Value::as_bool) == Some(true) {
        return Err(EmulatorError::GatewayInvalid {
            param: "stream",
            message: "streaming is not modelled by the emulator".to_owned(),
        });
    }
    let text = match api {
        Api::ChatCompletions => {
            let messages = body
                .get("messages")
                .and_then(Value::as_array)
                .filter(|messages| !messages.is_empty())
                .ok_or_else(|| EmulatorError::GatewayInvalid {
                    param: "messages",
                    message: "messages must be a non-empty array".to_owned(),
                })?;
            messages
                .iter()
                .filter_map(|message| message.get("content"))
                .map(content_text)
                .collect::<Vec<_>>()
                .join("\n")
        }
        Api::Responses => match body.get("input") {
            Some(Value::String(text)) => text.clone(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| {
                    item.get("content")
                        .map_or_else(|| content_text(item), content_text)
                })
                .collect::<Vec<_>>()
                .join("\n"),
            _ => {
                return Err(EmulatorError::GatewayInvalid {
                    param: "input",
                    message: "input must be a string or an array of input items".to_owned(),
                });
            }
        },
    };
    Ok(Prompt { model, text })
}

fn request_metadata(headers: &HeaderMap) -> Result<BTreeMap<String, String>, EmulatorError> {
    let Some(text) = header(headers, METADATA_HEADER) else {
        return Ok(BTreeMap::new());
    };
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|value| value.as_object().map(string_map))
        .ok_or_else(|| EmulatorError::GatewayInvalid {
            param: METADATA_HEADER,
            message: format!("{METADATA_HEADER} must be a JSON object"),
        })
}

fn words(text: &str) -> u64 {
    (text.split_whitespace().count() as u64).max(1)
}

async fn serve(state: InferenceState, api: Api, headers: HeaderMap, body: Bytes) -> Response {
    let started = Instant::now();
    let caller = match authenticate(&state, &headers) {
        Ok(caller) => caller,
        Err(error) => return error.into_response(),
    };
    let trace_id = header(&headers, TRACE_HEADER).map_or_else(new_id, str::to_owned);
    let mut metadata = caller.metadata.clone();
    let outcome = match request_metadata(&headers) {
        Ok(sent) => {
            metadata.extend(sent);
            route(&state, api, &caller, &body).await
        }
        Err(error) => Outcome::refused(&error, String::new()),
    };
    let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let (config_id, config_slug, config_version_id) = match &outcome.config {
        Some((id, slug, version)) => (Some(id.clone()), Some(slug.clone()), Some(version.clone())),
        None => (None, None, None),
    };
    lock(&state.telemetry).push(LogRow {
        id: new_id(),
        created_at: jiff::Timestamp::now(),
        workspace_slug: caller.workspace.clone(),
        api_key_id: caller.api_key_id.clone(),
        config_id,
        config_slug,
        config_version_id,
        provider: outcome.provider.clone(),
        ai_model: outcome.model.clone(),
        status: outcome.status.as_u16(),
        latency_ms,
        request_units: outcome.units.0,
        response_units: outcome.units.1,
        trace_id: trace_id.clone(),
        metadata,
        mode: outcome.mode.clone(),
        option_index: outcome.option_index,
        attempts: outcome.attempts,
        request_url: api.path().to_owned(),
    });
    let mut response = (outcome.status, Json(outcome.body)).into_response();
    let answer_headers = response.headers_mut();
    for (name, value) in [
        (TRACE_HEADER, trace_id),
        ("x-portkey-provider", outcome.provider),
        (
            "x-portkey-last-used-option-index",
            outcome.option_index.to_string(),
        ),
    ] {
        if let Ok(value) = HeaderValue::from_str(&value) {
            answer_headers.insert(HeaderName::from_static(name), value);
        }
    }
    response
}

/// Routes an authenticated request: its config, the walk over the providers (with their
/// simulated latency slept), and the answer.
async fn route(state: &InferenceState, api: Api, caller: &Caller, body: &Bytes) -> Outcome {
    let parsed = fields::parse_object(body)
        .map_err(|_| EmulatorError::GatewayInvalid {
            param: "body",
            message: "the body must be a JSON object".to_owned(),
        })
        .and_then(|body| prompt(api, &body));
    let prompt = match parsed {
        Ok(prompt) => prompt,
        Err(error) => return Outcome::refused(&error, String::new()),
    };
    let requested_model = prompt.model.clone().unwrap_or_default();
    let Some(config_ref) = caller.config_id.as_deref() else {
        let error = EmulatorError::GatewayInvalid {
            param: API_KEY_HEADER,
            message: "the API key has no default config (defaults.config_id)".to_owned(),
        };
        return Outcome::refused(&error, requested_model);
    };
    let Some(config) = lock(&state.configs).current(config_ref) else {
        let error = EmulatorError::GatewayInvalid {
            param: API_KEY_HEADER,
            message: format!("the API key's default config {config_ref} does not exist"),
        };
        return Outcome::refused(&error, requested_model);
    };
    let identity = (
        config.id.clone(),
        config.slug.clone(),
        config.version_id.clone(),
    );
    let plan = serde_json::from_str::<Value>(&config.document)
        .map_err(|err| err.to_string())
        .and_then(|document| Plan::parse(&document));
    let plan = match plan {
        Ok(plan) => plan,
        Err(why) => {
            let error = EmulatorError::GatewayInvalid {
                param: "config",
                message: format!("config {} cannot route: {why}", config.slug),
            };
            let mut outcome = Outcome::refused(&error, requested_model);
            outcome.config = Some(identity);
            return outcome;
        }
    };
    let faults = state.common.faults().providers;
    let routed = {
        let mut rng = lock(&state.rng);
        routing::route(&plan, &mut *rng, &mut |target, rng| {
            let fault = faults.get(&target.provider).cloned().unwrap_or_default();
            let fails = fault
                .error_rate
                .is_some_and(|rate| rate > 0.0 && rng.random::<f64>() < rate);
            let status = if fails { fault.failure_status() } else { 200 };
            (status, fault.latency_ms.unwrap_or(0))
        })
    };
    let delay = Duration::from_millis(routed.latency_ms());
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let model = routed
        .target
        .model
        .clone()
        .or(prompt.model)
        .unwrap_or_default();
    let provider = routed.target.provider.clone();
    let status = StatusCode::from_u16(routed.status()).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut outcome = Outcome {
        status,
        body: Value::Null,
        provider: provider.clone(),
        model: model.clone(),
        config: Some(identity),
        mode: plan.mode().as_str().to_owned(),
        option_index: routed.option_index,
        attempts: routed.attempts.len(),
        units: (0, 0),
    };
    if !status.is_success() {
        let error = EmulatorError::Upstream {
            status,
            message: format!("provider {provider} answered {status}"),
        };
        outcome.body = error_body(&error);
        return outcome;
    }
    if model.is_empty() {
        let error = EmulatorError::GatewayInvalid {
            param: "model",
            message: "model is required (in the body or the config's override_params)".to_owned(),
        };
        outcome.status = error.status();
        outcome.body = error_body(&error);
        return outcome;
    }
    let echo: String = prompt.text.chars().take(200).collect();
    let reply = format!("[{provider}] {model} answers: {echo}");
    let units = (words(&prompt.text), words(&reply));
    outcome.units = units;
    outcome.body = match api {
        Api::ChatCompletions => chat_completion(&model, &reply, units),
        Api::Responses => {
            let response = response_object(&model, &reply, units);
            if let Some(id) = response["id"].as_str() {
                lock(&state.responses).insert(id.to_owned(), response.clone());
            }
            response
        }
    };
    outcome
}

fn chat_completion(model: &str, reply: &str, (prompt, completion): (u64, u64)) -> Value {
    json!({
        "id": format!("chatcmpl-{}", random_hex(12)),
        "object": "chat.completion",
        "created": unix_now(),
        "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": reply, "refusal": null},
            "logprobs": null,
            "finish_reason": "stop",
        }],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                  "total_tokens": prompt + completion},
        "system_fingerprint": null,
    })
}

fn response_object(model: &str, reply: &str, (input, output): (u64, u64)) -> Value {
    let item = json!({
        "id": format!("resp_{}", random_hex(12)),
        "model": model,
        "output": [{
            "id": format!("msg_{}", random_hex(12)),
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": reply, "annotations": []}],
        }],
        "usage": {"input_tokens": input, "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": output, "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": input + output},
    });
    let object = item.as_object().cloned().unwrap_or_default();
    Value::Object(gateway::seeded_response(&object))
}
