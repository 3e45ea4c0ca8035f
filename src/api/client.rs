//! The HTTP client: one per connection, cheap to clone, shared by every controller.

use std::collections::HashMap;
use std::fmt;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::Semaphore;
use tracing::{Instrument, field};

use super::backoff::retry_after_header;
use super::config::{ClientConfig, RequestObserver, RetryPolicy};
use super::error::{ApiError, HttpError};
use super::handles::{
    AnswerBody, ApiKeys, Configs, Deployments, Guardrails, Integrations, Providers, RateLimits,
    Responses, Telemetry, UsageLimits, VectorStoreFiles,
};
use super::models::{ApiErrorBody, unwrap_success};
use super::routes::{Plane, Route, Verb};
use super::token::TokenSource;

/// A client of the management API and the gateway. Clones share the connection pool, the rate
/// limiter and the in-flight limit.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
    /// Asked right before each write is sent; `None` lets every write out.
    guard: Option<Arc<dyn WriteGuard>>,
    /// Every request through this client must be answered by then ([`Client::answered_by`]).
    deadline: Option<Instant>,
    /// Whose work this client's requests are, for the limiter's line ([`Client::turn`]).
    queue: Option<Arc<str>>,
    /// The piece of work (an object) this client's requests serve, for its place in that line.
    work: Option<Arc<str>>,
}

/// Decides, right before a write (POST, PUT, PATCH, DELETE) leaves the process, whether it may:
/// after the rate limiter and the in-flight limit, so a call that waited there is judged when it
/// would really be sent. Reads are never held back.
pub trait WriteGuard: Send + Sync {
    /// `Err(why)` withholds the write.
    fn may_write(&self) -> Result<(), String>;
}

struct Inner {
    http: reqwest::Client,
    management_url: String,
    gateway_url: String,
    token: Arc<dyn TokenSource>,
    timeout: Duration,
    retry: RetryPolicy,
    limiter: Option<DefaultDirectRateLimiter>,
    /// Requests per second the limiter allows (0: unlimited).
    qps: f64,
    /// How many requests the limiter lets through at once when nobody waits.
    burst: usize,
    /// Who waits for the limiter ([`Client::turn`]).
    line: Mutex<Line>,
    /// Held while waiting for the limiter, in the order the waits began.
    first_come: tokio::sync::Mutex<()>,
    in_flight: Semaphore,
    observer: Option<Arc<dyn RequestObserver>>,
}

/// A prepared call: route, query and JSON body.
pub(crate) struct Call {
    pub route: Route,
    pub query: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
    /// The answer carries secrets: never copy its body into an error.
    pub sensitive: bool,
    /// A success answer is decoded as it arrives ([`Client::json_streamed`]), never held whole.
    pub streamed: bool,
}

impl Call {
    pub fn new(route: Route) -> Self {
        Self {
            route,
            query: Vec::new(),
            body: None,
            sensitive: false,
            streamed: false,
        }
    }

    pub fn query<K: Into<String>>(mut self, pairs: Vec<(K, String)>) -> Self {
        self.query = pairs.into_iter().map(|(k, v)| (k.into(), v)).collect();
        self
    }

    pub fn json<B: Serialize>(mut self, body: &B) -> Result<Self, ApiError> {
        let bytes = serde_json::to_vec(body)
            .map_err(|e| ApiError::validation("body", format!("cannot be serialised: {e}")))?;
        self.body = Some(bytes);
        Ok(self)
    }

    pub fn sensitive(self) -> Self {
        self.sensitive_if(true)
    }

    /// [`Self::sensitive`] when `sensitive` holds (a kind's answers that carry credentials).
    pub fn sensitive_if(mut self, sensitive: bool) -> Self {
        self.sensitive |= sensitive;
        self
    }

    /// Decode a success answer as it arrives (a large list read often).
    pub fn streamed(mut self) -> Self {
        self.streamed = true;
        self
    }
}

/// A success answer.
struct Answer {
    status: u16,
    body: String,
    /// A streamed call's success answer, its body not read yet (`body` is then empty).
    stream: Option<reqwest::Response>,
}

/// The header naming the replica that sent a request (its leader-election identity), so the
/// gateway's access log (and the emulator's write log) tells replicas apart.
pub const REPLICA_HEADER: &str = "x-aigw-replica";

static REPLICA: std::sync::OnceLock<reqwest::header::HeaderValue> = std::sync::OnceLock::new();

/// Names this process in [`REPLICA_HEADER`] on every client built afterwards. Once per process;
/// an identity that is not a valid header value is left out.
pub fn identify_replica(identity: &str) {
    if let Ok(value) = reqwest::header::HeaderValue::from_str(identity) {
        let _ = REPLICA.set(value);
    }
}

/// The HTTP client `builder` makes, naming aigw and its version as the user agent (the
/// management API's and the OAuth token endpoint's alike).
pub(super) fn http_client(builder: reqwest::ClientBuilder) -> Result<reqwest::Client, ApiError> {
    builder
        .user_agent(concat!("aigw/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| ApiError::Config(format!("cannot build the HTTP client: {e}")))
}

impl Client {
    pub fn new(cfg: ClientConfig) -> Result<Self, ApiError> {
        let management_url = base_url("management_url", &cfg.management_url)?;
        let gateway_url = base_url("gateway_url", &cfg.gateway_url)?;
        let mut headers = extra_headers(&cfg.headers)?;
        if let Some(replica) = REPLICA.get() {
            headers.insert(REPLICA_HEADER, replica.clone());
        }
        let http = http_client(reqwest::Client::builder().default_headers(headers))?;
        Ok(Self {
            inner: Arc::new(Inner {
                http,
                management_url,
                gateway_url,
                token: cfg.token,
                timeout: cfg.timeout,
                retry: RetryPolicy {
                    max_attempts: cfg.retry.max_attempts.max(1),
                    ..cfg.retry
                },
                limiter: rate_limiter(cfg.qps, cfg.burst),
                qps: cfg.qps,
                burst: usize::try_from(cfg.burst.max(1)).unwrap_or(usize::MAX),
                line: Mutex::default(),
                first_come: tokio::sync::Mutex::new(()),
                in_flight: Semaphore::new(cfg.max_in_flight.max(1)),
                observer: cfg.observer,
            }),
            guard: None,
            deadline: None,
            queue: None,
            work: None,
        })
    }

    /// This client (same pool, limiter and in-flight limit), whose writes `guard` must let out.
    pub fn guarded(&self, guard: Arc<dyn WriteGuard>) -> Self {
        Self {
            guard: Some(guard),
            ..self.clone()
        }
    }

    /// This client, whose requests are `queue`'s work (a namespace) in the limiter's line
    /// ([`Client::turn`]).
    pub fn queued(&self, queue: &str) -> Self {
        Self {
            queue: Some(queue.into()),
            ..self.clone()
        }
    }

    /// This client, whose requests serve the work `key` (an object) in its queue's line
    /// ([`Client::turn`]).
    pub fn working_on(&self, key: &str) -> Self {
        Self {
            work: Some(key.into()),
            ..self.clone()
        }
    }

    /// This client, whose requests must be answered by `deadline`. A request leaves only if its
    /// whole timeout still fits before it, judged when it would really be sent (after the rate
    /// limiter, the in-flight limit and the token) and before each retry's wait (a 429's
    /// `Retry-After`); otherwise it is not sent and fails with [`ApiError::PastDeadline`], its
    /// outcome known. A create uses it so that nothing it makes is younger than its window.
    pub fn answered_by(&self, deadline: Instant) -> Self {
        Self {
            deadline: Some(deadline),
            ..self.clone()
        }
    }

    /// `Err` when a request sent after `wait` more could not be answered by the deadline.
    fn in_time(&self, call: &Call, wait: Duration) -> Result<(), ApiError> {
        let Some(deadline) = self.deadline else {
            return Ok(());
        };
        if Instant::now() + wait + self.inner.timeout <= deadline {
            return Ok(());
        }
        Err(ApiError::PastDeadline {
            method: call.route.verb.as_str(),
            endpoint: call.route.template,
            retry_after: (!wait.is_zero()).then_some(wait),
        })
    }

    /// When the requests already waiting for this client's rate limiter fill more than
    /// `LINE_LIMIT` of it and some are of this client's queue ([`Client::queued`]): how long
    /// the work ([`Client::working_on`]) about to start should wait before it starts, so that
    /// it does not hold a worker while it waits for the limiter (a reconcile holds one of its
    /// kind's `--concurrency` slots, which other objects need). Each queue has a line of its own: new
    /// work is given the next place in its queue's line, one request's time after the one
    /// before, so that those sent away come back one at a time; work that comes back early
    /// keeps its place, and work that comes back at its place and finds the backlog still there
    /// goes ahead of its line (after what waits now). Work told to start counts as a request
    /// waiting until its first request reaches the limiter, or it ends ([`Client::finished`]),
    /// so that work asking at the same moment does not all start; while no request waits, the
    /// first `burst` of it pass on the bucket's room. A queue none of whose requests waits and
    /// none of whose work is starting starts at once, so one queue's backlog never sends
    /// another queue's work behind it. `None`: start now (and always for a client serving no
    /// work).
    pub fn turn(&self) -> Option<Duration> {
        self.inner.limiter.as_ref()?;
        let key = self.work.as_deref()?;
        let per_request = Duration::from_secs_f64(1.0 / self.inner.qps);
        let queue = self.queue.as_deref().unwrap_or_default();
        let now = Instant::now();
        let mut line = self.inner.line.lock().unwrap_or_else(|e| e.into_inner());
        line.forget_past(now);
        line.starting.remove(key);
        let held = line.places.remove(key);
        let starting = line.starting.len();
        let ahead = match line.total {
            // Nobody waits: the first `burst` of the work told to start pass on the bucket's room.
            0 => starting.saturating_sub(self.inner.burst),
            waiting => waiting + starting,
        };
        let backlog = per_request.saturating_mul(u32::try_from(ahead).unwrap_or(u32::MAX));
        let queue_busy = line.waiting.contains_key(queue)
            || line.starting.values().any(|(of, _)| **of == *queue);
        if backlog <= LINE_LIMIT || !queue_busy {
            line.starting
                .insert(key.into(), (self.queue.clone().unwrap_or_default(), now));
            return None;
        }
        let after_backlog = now.checked_add(backlog)?;
        let place = match held {
            Some(place) if place > now => place,
            // Back at its place: ahead of its line, in the order they come back; new work at
            // the end of its line.
            held => {
                let cursors = match held {
                    Some(_) => &mut line.ahead,
                    None => &mut line.next,
                };
                let cursor = cursors.entry(queue.to_string()).or_insert(now);
                let place = (*cursor).max(after_backlog);
                *cursor = place.checked_add(per_request)?;
                place
            }
        };
        line.places.insert(key.to_string(), place);
        Some(place - now)
    }

    /// The work this client serves has ended: if it was told to start and sent no request, it
    /// no longer counts in the line ([`Client::turn`]).
    pub fn finished(&self) {
        if let Some(key) = self.work.as_deref() {
            let mut line = self.inner.line.lock().unwrap_or_else(|e| e.into_inner());
            line.starting.remove(key);
        }
    }

    /// Requests per second this client's rate limiter allows; `None` when it has none.
    pub fn qps(&self) -> Option<f64> {
        self.inner.limiter.as_ref().map(|_| self.inner.qps)
    }

    pub fn configs(&self) -> Configs<'_> {
        Configs::new(self)
    }

    pub fn deployments(&self) -> Deployments<'_> {
        Deployments::new(self)
    }

    pub fn rate_limits(&self) -> RateLimits<'_> {
        RateLimits::new(self)
    }

    /// A guardrail's reads and writes on `plane`.
    pub fn guardrails_on(
        &self,
        plane: crate::api::GuardrailPlane,
    ) -> super::handles::GuardrailsOn<'_> {
        super::handles::GuardrailsOn::on(self, plane)
    }

    pub fn usage_limits(&self) -> UsageLimits<'_> {
        UsageLimits::new(self)
    }

    /// Service or user API keys (`/ai_gw/v2/api-keys/{service|user}`).
    pub fn api_keys(&self, kind: crate::api::ApiKeyKind) -> ApiKeys<'_> {
        ApiKeys::on(self, kind)
    }

    /// The organisation's integrations (`/ai_gw/admin/v2/integrations`).
    pub fn integrations(&self) -> Integrations<'_> {
        Integrations::new(self)
    }

    /// Providers (`/ai_gw/v2/providers`).
    pub fn providers(&self) -> Providers<'_> {
        Providers::new(self)
    }

    pub fn guardrails(&self) -> Guardrails<'_> {
        Guardrails::new(self)
    }

    pub fn responses(&self) -> Responses<'_> {
        Responses::new(self)
    }

    /// The gateway's telemetry reads (`/ai_gw/v2/logs/…`).
    pub fn telemetry(&self) -> Telemetry<'_> {
        Telemetry::new(self)
    }

    pub fn vector_store_files(&self) -> VectorStoreFiles<'_> {
        VectorStoreFiles::new(self)
    }

    /// Workspaces through the admin plane (every workspace; writes).
    pub fn workspaces(&self) -> super::handles::Workspaces<'_> {
        super::handles::Workspaces::on(self, crate::api::ApiPlane::Admin)
    }

    /// Workspace reads through `plane` (the data plane shows only scope-bound workspaces).
    pub fn workspaces_on(&self, plane: crate::api::ApiPlane) -> super::handles::Workspaces<'_> {
        super::handles::Workspaces::on(self, plane)
    }

    /// SCM IAM scopes (`/iam/v1/scopes`).
    pub fn iam_scopes(&self) -> super::handles::IamScopes<'_> {
        super::handles::IamScopes::new(self)
    }

    /// The organisation's secret references.
    pub fn secret_references(&self) -> super::handles::SecretReferences<'_> {
        super::handles::SecretReferences::new(self)
    }

    /// The organisation's MCP integrations.
    pub fn mcp_integrations(&self) -> super::handles::McpIntegrations<'_> {
        super::handles::McpIntegrations::new(self)
    }

    /// Workspaces' MCP servers.
    pub fn mcp_servers(&self) -> super::handles::McpServers<'_> {
        super::handles::McpServers::new(self)
    }

    /// The MCP servers guardrails apply to, for guardrails on `plane`.
    pub fn guardrail_mcp_servers(
        &self,
        plane: crate::api::GuardrailPlane,
    ) -> super::handles::GuardrailMcpServers<'_> {
        super::handles::GuardrailMcpServers::on(self, plane)
    }

    /// The tokens this client has sent ([`TokenSource::handed_out`]): an API's error may quote
    /// one, so whoever prints messages conceals them.
    pub fn tokens_sent(&self) -> Vec<super::secret::SecretString> {
        self.inner.token.handed_out()
    }

    /// True while a clone of this client is held somewhere else than here.
    pub fn held_elsewhere(&self) -> bool {
        Arc::strong_count(&self.inner) > 1
    }

    pub fn management_url(&self) -> &str {
        &self.inner.management_url
    }

    pub fn gateway_url(&self) -> &str {
        &self.inner.gateway_url
    }

    /// Sends `call` and decodes the answer, unwrapping a `{success, data}` envelope.
    pub(crate) async fn json<T: DeserializeOwned>(&self, call: Call) -> Result<T, ApiError> {
        let answer = self.execute(&call).await?;
        let value = answer_value(&call, &answer)?;
        serde_json::from_value(value).map_err(|e| decode_error(&call, &answer, &e))
    }

    /// Like [`Self::json`] for a large answer: decoded into `T` as the body arrives, without
    /// the intermediate `Value` and without ever holding the whole body. An answer `T` cannot
    /// take is decoded again the usual way, so errors read the same (such answers, an error in
    /// a success envelope, are small; of a larger one only serde's message is kept).
    pub(crate) async fn json_streamed<T: DeserializeOwned + Send + 'static>(
        &self,
        call: Call,
    ) -> Result<T, ApiError> {
        let call = call.streamed();
        let mut answer = self.execute(&call).await?;
        let decoded = match answer.stream.take() {
            Some(response) => {
                let (decoded, head) = self.decode_arriving(&call, response).await?;
                answer.body = head.unwrap_or_default();
                decoded
            }
            None => serde_json::from_str(answer.body.trim()),
        };
        match decoded {
            Ok(decoded) => Ok(decoded),
            Err(_) if !answer.body.is_empty() => {
                let value = answer_value(&call, &answer)?;
                serde_json::from_value(value).map_err(|e| decode_error(&call, &answer, &e))
            }
            Err(e) => Err(decode_error(&call, &answer, &e)),
        }
    }

    /// Decodes `response`'s body into `T` on a blocking thread as its chunks arrive, a few at a
    /// time in memory. Also returns the whole body when it is small ([`STREAM_HEAD`]), for
    /// the usual decoding to report an answer `T` cannot take.
    async fn decode_arriving<T: DeserializeOwned + Send + 'static>(
        &self,
        call: &Call,
        mut response: reqwest::Response,
    ) -> Result<(serde_json::Result<T>, Option<String>), ApiError> {
        let (chunks, receiver) = tokio::sync::mpsc::channel::<bytes::Bytes>(8);
        let decoder = tokio::task::spawn_blocking(move || {
            let reader = ChunkReader {
                chunks: receiver,
                current: bytes::Bytes::new(),
            };
            serde_json::from_reader(std::io::BufReader::with_capacity(64 * 1024, reader))
        });
        let mut head = Some(Vec::new());
        let mut decoding = true;
        loop {
            let chunk = match response.chunk().await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => break,
                Err(e) => return Err(self.transport_error(call, &e)),
            };
            head = head.filter(|h| h.len() + chunk.len() <= STREAM_HEAD);
            if let Some(head) = head.as_mut() {
                head.extend_from_slice(&chunk);
            }
            // A decoder that stopped (the answer is not a `T`) takes no more; the rest is read
            // only while it may still complete the head.
            decoding = decoding && chunks.send(chunk).await.is_ok();
            if !decoding && head.is_none() {
                break;
            }
        }
        drop(chunks);
        let decoded = decoder.await.map_err(|e| ApiError::Decode {
            method: call.route.verb.as_str(),
            endpoint: call.route.template,
            status: 200,
            message: format!("the decoder stopped: {e}"),
            body: None,
        })?;
        let head = head.map(|h| String::from_utf8_lossy(&h).into_owned());
        Ok((decoded, head))
    }

    /// Sends `call` and ignores the body of a success answer (`{}` or empty).
    pub(crate) async fn empty(&self, call: Call) -> Result<(), ApiError> {
        self.answer(call).await
    }

    /// Sends `call` and reads a success answer as `T` does ([`AnswerBody`]).
    pub(crate) async fn answer<T: AnswerBody>(&self, call: Call) -> Result<T, ApiError> {
        let answer = self.execute(&call).await?;
        let value = answer_value(&call, &answer)?;
        T::decode(value).map_err(|e| decode_error(&call, &answer, &e))
    }

    async fn execute(&self, call: &Call) -> Result<Answer, ApiError> {
        let url = self.url(call)?;
        let span = tracing::debug_span!(
            "api_request",
            method = call.route.verb.as_str(),
            endpoint = call.route.template,
            status = field::Empty,
            attempt = field::Empty,
        );
        self.retry_loop(call, &url).instrument(span).await
    }

    async fn retry_loop(&self, call: &Call, url: &reqwest::Url) -> Result<Answer, ApiError> {
        let policy = self.inner.retry;
        let mut attempt = 0u32;
        let mut token_refreshed = false;
        loop {
            attempt += 1;
            tracing::Span::current().record("attempt", attempt);
            let err = match self.attempt(call, url).await {
                Ok(answer) => return Ok(answer),
                Err(err) => err,
            };
            if err.status() == Some(401) && !token_refreshed {
                // A fresh token may help once; this retry does not count against the budget.
                token_refreshed = true;
                attempt -= 1;
                self.inner.token.invalidate();
                tracing::debug!("401 answer, refreshing the token and retrying once");
                continue;
            }
            if !retryable(call.route.verb, &err) {
                return Err(err);
            }
            if attempt >= policy.max_attempts {
                return Err(exhausted(attempt, err));
            }
            let Some(delay) = policy.delay(attempt, err.retry_after()) else {
                return Err(err);
            };
            // Every attempt so far was refused without effect: a retry that would end too
            // late is not sent either, and the wait asked for goes back with the refusal.
            self.in_time(call, delay)?;
            tracing::debug!(
                category = err.category(),
                delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                "transient failure, retrying"
            );
            tokio::time::sleep(delay).await;
        }
    }

    /// A request reaching `limiter`: its work no longer counts as starting ([`Client::turn`]);
    /// it passes at once (`None`) when nobody waits and the limiter has a request's room now
    /// (taken), so a burst passes without counting as a backlog, else it joins the waiters.
    fn reach(&self, limiter: &DefaultDirectRateLimiter) -> Option<Waiting<'_>> {
        let mut line = self.inner.line.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(key) = self.work.as_deref() {
            line.starting.remove(key);
        }
        if line.total == 0 && limiter.check().is_ok() {
            return None;
        }
        Some(Waiting::join(
            &mut line,
            &self.inner.line,
            self.queue.as_deref(),
        ))
    }

    /// One HTTP exchange, under the rate limiter and the in-flight limit.
    async fn attempt(&self, call: &Call, url: &reqwest::Url) -> Result<Answer, ApiError> {
        if let Some(limiter) = &self.inner.limiter
            && let Some(_waiting) = self.reach(limiter)
        {
            // First come, first served: the limiter alone lets any of its waiters through next.
            let _first = self.inner.first_come.lock().await;
            limiter.until_ready().await;
        }
        let _permit = self
            .inner
            .in_flight
            .acquire()
            .await
            .map_err(|_| ApiError::Config("client is shut down".into()))?;
        let token = self.inner.token.token().await?;
        // The last await before the request leaves: a token refresh can take longer than the
        // lease's renew deadline, so the guard is asked after it.
        if let Some(guard) = self.guard.as_ref().filter(|_| !call.route.verb.is_read()) {
            guard.may_write().map_err(|reason| ApiError::Withheld {
                method: call.route.verb.as_str(),
                endpoint: call.route.template,
                reason,
            })?;
        }
        self.in_time(call, Duration::ZERO)?;
        let mut request = self
            .inner
            .http
            .request(call.route.verb.method(), url.clone())
            .bearer_auth(token.expose())
            .timeout(self.inner.timeout);
        if !call.query.is_empty() {
            request = request.query(&call.query);
        }
        if let Some(body) = &call.body {
            request = request
                .header(CONTENT_TYPE, "application/json")
                .body(body.clone());
        }
        let started = Instant::now();
        let result = self.exchange(call, request).await;
        let status = match &result {
            Ok(answer) => Some(answer.status),
            Err(err) => err.status(),
        };
        if let Some(status) = status {
            tracing::Span::current().record("status", status);
        }
        if let Some(observer) = &self.inner.observer {
            let r = &call.route;
            observer.on_response(r.verb.as_str(), r.template, status, started.elapsed());
        }
        result
    }

    async fn exchange(
        &self,
        call: &Call,
        request: reqwest::RequestBuilder,
    ) -> Result<Answer, ApiError> {
        let response = request
            .send()
            .await
            .map_err(|e| self.transport_error(call, &e))?;
        let status = response.status().as_u16();
        if call.streamed && (200..300).contains(&status) {
            return Ok(Answer {
                status,
                body: String::new(),
                stream: Some(response),
            });
        }
        let headers = response.headers().clone();
        let body = response
            .text()
            .await
            .map_err(|e| self.transport_error(call, &e))?;
        if (200..300).contains(&status) {
            return Ok(Answer {
                status,
                body,
                stream: None,
            });
        }
        let parsed = ApiErrorBody::parse(&body);
        let retry_after =
            retry_after_header(&headers).or_else(|| parsed.as_ref().and_then(|b| b.retry_after));
        let opa_denied = headers
            .get("x-opa-decision")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("false"));
        Err(HttpError {
            method: call.route.verb.as_str(),
            endpoint: call.route.template,
            status,
            body: parsed,
            raw: body,
            retry_after,
            opa_denied,
        }
        .into())
    }

    /// A failure with no (complete) answer. Unless the connection was never made, the server may
    /// have acted on the request.
    fn transport_error(&self, call: &Call, e: &reqwest::Error) -> ApiError {
        let method = call.route.verb.as_str();
        let endpoint = call.route.template;
        let outcome_unknown = !e.is_connect();
        if e.is_timeout() {
            return ApiError::Timeout {
                method,
                endpoint,
                timeout: self.inner.timeout,
                outcome_unknown,
            };
        }
        ApiError::Network {
            method,
            endpoint,
            message: error_chain(e),
            outcome_unknown,
        }
    }

    fn url(&self, call: &Call) -> Result<reqwest::Url, ApiError> {
        let base = match call.route.plane {
            Plane::Management => &self.inner.management_url,
            Plane::Gateway => &self.inner.gateway_url,
        };
        let url = format!("{base}{}", call.route.path);
        reqwest::Url::parse(&url).map_err(|e| ApiError::Config(format!("bad URL {url}: {e}")))
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("management_url", &self.inner.management_url)
            .field("gateway_url", &self.inner.gateway_url)
            .field("retry", &self.inner.retry)
            .finish_non_exhaustive()
    }
}

/// Only reads and deletes are retried after an answer was lost. Repeating a POST could create a
/// second object, and repeating a PUT mints another config version or rotates credentials
/// twice, so those errors go back to the caller with `outcome_unknown()`: it re-reads, compares
/// and decides.
fn retryable(verb: Verb, err: &ApiError) -> bool {
    let too_late = matches!(err, ApiError::PastDeadline { .. });
    err.is_transient() && !too_late && (verb.is_repeatable() || !err.outcome_unknown())
}

fn exhausted(attempts: u32, last: ApiError) -> ApiError {
    if attempts <= 1 {
        return last;
    }
    ApiError::RetriesExhausted {
        attempts,
        last: Box::new(last),
    }
}

fn answer_value(call: &Call, answer: &Answer) -> Result<Value, ApiError> {
    let text = answer.body.trim();
    let value = if text.is_empty() {
        Value::Object(Default::default())
    } else {
        serde_json::from_str(text).map_err(|e| decode_error(call, answer, &e))?
    };
    unwrap_success(value).map_err(|failed| {
        HttpError {
            method: call.route.verb.as_str(),
            endpoint: call.route.template,
            status: answer.status,
            body: ApiErrorBody::from_value(&failed),
            raw: if call.sensitive {
                String::new()
            } else {
                answer.body.clone()
            },
            retry_after: None,
            opa_denied: false,
        }
        .into()
    })
}

fn decode_error(call: &Call, answer: &Answer, e: &serde_json::Error) -> ApiError {
    let full = e.to_string();
    // serde quotes offending values, which for secret-bearing answers could be a secret.
    let message = if !call.sensitive || full.starts_with("missing field") {
        full
    } else {
        "the answer does not have the expected shape".to_owned()
    };
    ApiError::Decode {
        method: call.route.verb.as_str(),
        endpoint: call.route.template,
        status: answer.status,
        message,
        body: (!call.sensitive).then(|| answer.body.clone()),
    }
}

fn error_chain(e: &reqwest::Error) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    parts.join(": ")
}

fn base_url(field: &str, raw: &str) -> Result<String, ApiError> {
    let trimmed = raw.trim().trim_end_matches('/');
    let url = reqwest::Url::parse(trimmed)
        .map_err(|e| ApiError::Config(format!("{field} {trimmed:?} is not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ApiError::Config(format!("{field} must be http or https")));
    }
    Ok(trimmed.to_owned())
}

fn extra_headers(headers: &[(String, super::secret::SecretString)]) -> Result<HeaderMap, ApiError> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| ApiError::Config(format!("invalid header name {name:?}")))?;
        let mut value = HeaderValue::from_str(value.expose())
            .map_err(|_| ApiError::Config(format!("invalid value for header {name:?}")))?;
        value.set_sensitive(true);
        map.append(header, value);
    }
    Ok(map)
}

/// How much of a rate limiter's time the requests waiting for it may fill before
/// [`Client::turn`] sends new work away: a second.
const LINE_LIMIT: Duration = Duration::from_secs(1);

/// How long work told to start counts in the line before its first request: longer than a
/// reconcile's apiserver writes before that request take.
const STARTING_LIMIT: Duration = Duration::from_secs(10);

/// The requests waiting for a client's rate limiter, and the lines of work sent away to come
/// back later ([`Client::turn`]), per queue.
#[derive(Default)]
struct Line {
    /// Requests waiting for the limiter now.
    total: usize,
    /// Of those, each queue's (a queue none of whose requests waits is absent).
    waiting: HashMap<String, usize>,
    /// The place [`Client::turn`] hands out next in each queue's line, while it is to come.
    next: HashMap<String, Instant>,
    /// Likewise, to work that came back at its place and found the backlog still there.
    ahead: HashMap<String, Instant>,
    /// The place each piece of work sent away was given, until it comes back.
    places: HashMap<String, Instant>,
    /// Work told to start that has sent no request yet: its queue, and when it was told.
    starting: HashMap<String, (Arc<str>, Instant)>,
    /// When places whose time is long past (their work gone, or started meanwhile) were last
    /// forgotten.
    forgotten_at: Option<Instant>,
}

impl Line {
    /// Forgets the lines whose last place has come, and, once a minute, the places that came
    /// more than a minute ago.
    fn forget_past(&mut self, now: Instant) {
        const MINUTE: Duration = Duration::from_secs(60);
        self.next.retain(|_, next| *next > now);
        self.ahead.retain(|_, ahead| *ahead > now);
        // Work whose first request never came (it ended without telling) is not waited for.
        self.starting
            .retain(|_, (_, told)| *told + STARTING_LIMIT > now);
        if self.forgotten_at.is_none_or(|at| at + MINUTE <= now) {
            self.places.retain(|_, place| *place + MINUTE > now);
            self.forgotten_at = Some(now);
        }
    }
}

/// One request counted as waiting for the limiter until it is dropped (its wait ended, or it
/// was cancelled).
struct Waiting<'a> {
    line: &'a Mutex<Line>,
    queue: String,
}

impl<'a> Waiting<'a> {
    /// Counts a request of `queue` in `held`, the locked `line`.
    fn join(held: &mut Line, line: &'a Mutex<Line>, queue: Option<&str>) -> Self {
        let queue = queue.unwrap_or_default().to_string();
        held.total += 1;
        *held.waiting.entry(queue.clone()).or_default() += 1;
        Self { line, queue }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut line = self.line.lock().unwrap_or_else(|e| e.into_inner());
        line.total = line.total.saturating_sub(1);
        if let Some(n) = line.waiting.get_mut(&self.queue) {
            *n -= 1;
            if *n == 0 {
                line.waiting.remove(&self.queue);
            }
        }
    }
}

fn rate_limiter(qps: f64, burst: u32) -> Option<DefaultDirectRateLimiter> {
    if !qps.is_finite() || qps <= 0.0 {
        return None;
    }
    let quota = Quota::with_period(Duration::from_secs_f64(1.0 / qps))?
        .allow_burst(NonZeroU32::new(burst.max(1))?);
    Some(RateLimiter::direct(quota))
}

/// How much of a streamed answer is kept whole, for reporting one that does not decode.
const STREAM_HEAD: usize = 64 * 1024;

/// The chunks of an answer's body as a [`std::io::Read`], for a decoder on a blocking thread.
struct ChunkReader {
    chunks: tokio::sync::mpsc::Receiver<bytes::Bytes>,
    current: bytes::Bytes,
}

impl std::io::Read for ChunkReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.current.is_empty() {
            match self.chunks.blocking_recv() {
                Some(chunk) => self.current = chunk,
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current.split_to(n));
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::token::StaticToken;

    fn limited(qps: f64) -> Client {
        let token = Arc::new(StaticToken::new("t0ken"));
        let config = ClientConfig::new("http://127.0.0.1:1", "http://127.0.0.1:1/v1", token);
        Client::new(config.rate_limit(qps, 1)).unwrap()
    }

    /// Work starts at once while the requests waiting for the limiter, and the work told to
    /// start that has sent none yet, fill at most a second of it, or while none of them is its
    /// queue's; past that new work gets the next place in its queue's line, work back early
    /// keeps its place, work back at its place goes ahead of the line, and another queue's work
    /// is never sent behind that line.
    #[test]
    fn a_backlogged_limiter_hands_out_places_in_a_line_per_queue() {
        let second = Duration::from_secs(1);
        let base = limited(1.0);
        let (a, b) = (base.queued("a"), base.queued("b"));
        let on = |client: &Client, key: &str| client.working_on(key);
        let line = &base.inner.line;
        let limiter = base.inner.limiter.as_ref().unwrap();
        let join = |queue| Waiting::join(&mut line.lock().unwrap(), line, Some(queue));
        let starting = || line.lock().unwrap().starting.len();
        // Within half a second below `seconds`.
        let at = |got: Option<Duration>, seconds: u32, what: &str| {
            let (got, want) = (got.unwrap(), second * seconds);
            assert!(got <= want && got + second / 2 > want, "{what}: {got:?}");
        };
        let starts = |client: &Client, key: &str, what: &str| {
            assert_eq!(on(client, key).turn(), None, "{what}");
        };
        assert_eq!(base.turn(), None, "no work named");
        starts(&a, "a/0", "the first passes on the burst");
        starts(&a, "a/1", "so does the second, nobody waiting");
        starts(&a, "a/2", "one beyond the burst is a second");
        starts(&a, "a/2", "asking again, a/2 is not counted twice");
        at(
            on(&a, "a/3").turn(),
            2,
            "four told to start at once are a backlog, though none has sent a request",
        );
        starts(
            &b,
            "b/0",
            "another queue's work told to start does not make b's queue busy",
        );
        on(&b, "b/0").finished();
        on(&a, "a/1").finished();
        on(&a, "a/2").finished();
        assert_eq!(starting(), 1, "a/1 and a/2 ended without a request");
        drop(on(&a, "a/0").reach(limiter));
        assert_eq!(
            starting(),
            0,
            "a/0 passed at once on the burst, no longer starting"
        );
        line.lock().unwrap().starting.insert(
            "a/gone".into(),
            ("a".into(), Instant::now() - STARTING_LIMIT),
        );
        assert_eq!(on(&b, "b/9").turn(), None);
        assert_eq!(
            starting(),
            1,
            "work told long ago and never heard of is forgotten"
        );
        on(&b, "b/9").finished();
        let _one = join("a");
        let _two = join("a");
        let _three = join("a");
        let back_at_its_place = |key: &str| {
            let now = Instant::now();
            line.lock().unwrap().places.insert(key.into(), now);
            on(&a, key).turn()
        };
        for n in 4..7 {
            at(
                on(&a, &format!("a/{n}")).turn(),
                n - 1,
                "new work, at the end of the line (after a/3's place)",
            );
        }
        at(on(&a, "a/6").turn(), 5, "back early, a/6 keeps its place");
        at(
            back_at_its_place("a/6"),
            3,
            "back at its place, ahead of the line",
        );
        at(
            back_at_its_place("a/4"),
            4,
            "the next one back comes after it",
        );
        starts(&b, "b/0", "b has no request waiting: it starts");
        at(
            on(&b, "b/1").turn(),
            4,
            "b waits for the backlog only, b/0 in it",
        );
        drop((_one, _two, _three));
        on(&b, "b/0").finished();
        starts(&a, "a/7", "the backlog is gone");
        let unlimited = limited(0.0).queued("a").working_on("a/0");
        assert_eq!(unlimited.turn(), None, "no limiter");
    }
}
