//! Middleware for the API routes: request statistics and injected faults.
//!
//! Faults come in three kinds: transport (latency, timeouts, 429, dropped connections), commit
//! faults (the write is applied, then the answer is lost, a 5xx or garbage), and shape faults that
//! the handlers read through [`Faults`](super::faults::Faults) (lagging and capped lists, 403 for
//! missing objects, normalised or masked documents, create receipts without a slug).

use std::{io, sync::Arc, time::Duration};

use axum::{
    body::{Body, Bytes},
    extract::{ConnectInfo, MatchedPath, Request, State},
    http::{Method, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};

use super::{
    auth::bearer,
    errors::EmulatorError,
    faults::roll,
    listener::ConnHandle,
    state::{Common, WRITE_LOG_CAP, WriteRecord, lock},
};

/// How long a `timeout_rate` request hangs: longer than any sane client timeout.
const HANG: Duration = Duration::from_secs(60);

/// What `garbage_2xx_rate` answers: the start of a JSON object, cut short like a truncated proxy
/// response.
const GARBAGE: &str = "{\"success\": true, \"data\": {\"id\": ";

/// Counts every response by `"<METHOD> <path template>"` and status.
pub async fn record_stats(
    State(state): State<Arc<Common>>,
    request: Request,
    next: Next,
) -> Response {
    let template = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("<unmatched>", MatchedPath::as_str);
    let key = format!("{} {}", request.method(), template);
    let response = next.run(request).await;
    let status = response.status().as_u16();
    *lock(&state.stats)
        .entry(key)
        .or_default()
        .entry(status)
        .or_default() += 1;
    response
}

/// Keeps every write request in the write log ([`WriteRecord`]): the per-object history a test
/// checks for overlapping writers.
pub async fn record_writes(
    State(state): State<Arc<Common>>,
    request: Request,
    next: Next,
) -> Response {
    if matches!(*request.method(), Method::GET | Method::HEAD) {
        return next.run(request).await;
    }
    let method = request.method().to_string();
    let writer = request
        .headers()
        .get(crate::api::REPLICA_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let mut object = request.uri().path().to_string();
    let (parts, body) = request.into_parts();
    let body = match axum::body::to_bytes(body, 16 * 1024 * 1024).await {
        Ok(body) => body,
        Err(_) => return StatusCode::PAYLOAD_TOO_LARGE.into_response(),
    };
    if method == "POST" {
        let named = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| {
                ["slug", "name"]
                    .iter()
                    .find_map(|k| v.get(*k).and_then(|s| s.as_str()).map(str::to_string))
            });
        if let Some(name) = named {
            object = format!("{object}#{name}");
        }
    }
    let started_ms = millis(&state);
    let response = next.run(Request::from_parts(parts, Body::from(body))).await;
    let record = WriteRecord {
        object,
        method,
        writer,
        status: response.status().as_u16(),
        started_ms,
        ended_ms: millis(&state),
    };
    let mut writes = lock(&state.writes);
    if writes.len() >= WRITE_LOG_CAP {
        writes.pop_front();
    }
    writes.push_back(record);
    response
}

fn millis(state: &Common) -> u64 {
    u64::try_from(state.started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Applies the configured faults (and `--latency`) around an API request.
pub async fn inject_faults(
    State(state): State<Arc<Common>>,
    request: Request,
    next: Next,
) -> Response {
    let faults = lock(&state.faults).clone();
    if let Some(qps) = faults.rate_limit_qps
        && let Err(retry_after_secs) = lock(&state.rate_window).take(qps)
    {
        return EmulatorError::RateLimited { retry_after_secs }.into_response();
    }
    let latency = state.options.latency.unwrap_or_default()
        + Duration::from_millis(faults.latency_ms.unwrap_or(0));
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    if roll(faults.timeout_rate) {
        hang(&state).await;
        return StatusCode::GATEWAY_TIMEOUT.into_response();
    }
    if roll(faults.error_rate) {
        let (status, message) = if rand::random::<bool>() {
            (StatusCode::INTERNAL_SERVER_ERROR, "internal server error")
        } else {
            (StatusCode::SERVICE_UNAVAILABLE, "service unavailable")
        };
        return EmulatorError::injected(status, message).into_response();
    }
    let is_write = matches!(
        *request.method(),
        Method::POST | Method::PUT | Method::DELETE
    );
    let endpoint = request
        .extensions()
        .get::<MatchedPath>()
        .map(|path| format!("{} {}", request.method(), path.as_str()));
    if let Some(status) = endpoint
        .as_ref()
        .and_then(|e| faults.failing_routes.get(e))
        .and_then(|status| StatusCode::from_u16(*status).ok())
    {
        let message = match bearer(&request).filter(|_| faults.quote_credentials) {
            Some(token) => format!("this route is failing (failing_routes) for token {token}"),
            None => "this route is failing (failing_routes)".to_string(),
        };
        return EmulatorError::injected(status, message).into_response();
    }
    let later_page = !is_write && later_page(request.uri().query());
    let dropped_once = endpoint.is_some_and(|e| lock(&state.faults).take_drop_once(&e));
    if dropped_once || roll(faults.drop_after_commit_rate) {
        return drop_after_commit(request, next).await;
    }
    if faults.echo_writes && request.method() == Method::POST {
        return echoed(request, next).await;
    }
    let response = next.run(request).await;
    let churn = later_page && faults.list_churn;
    let untold = !is_write && faults.list_without_total;
    let more = !is_write && faults.list_has_more;
    if (churn || untold || more) && response.status().is_success() {
        return reshape_list(response, |list| {
            if churn {
                churned(list);
            }
            if untold {
                list.remove("total");
            }
            if more {
                list.insert("has_more".into(), true.into());
            }
        })
        .await;
    }
    if !is_write || !response.status().is_success() {
        return response;
    }
    if roll(faults.error_after_commit_rate) {
        return error_after_commit();
    }
    if roll(faults.garbage_2xx_rate) {
        return garbage();
    }
    response
}

/// A list answer (an object with a `data` array) as `reshape` leaves it; any other answer as
/// it came.
async fn reshape_list(
    response: Response,
    reshape: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>),
) -> Response {
    reshape_object(response, |list| {
        let is_list = list.get("data").is_some_and(serde_json::Value::is_array);
        if is_list {
            reshape(list);
        }
        is_list
    })
    .await
}

/// An answer that is a JSON object as `reshape` leaves it, when it says it changed it; any
/// other answer byte for byte as it came (the key order the `normalise` fault sets kept).
async fn reshape_object(
    response: Response,
    reshape: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>) -> bool,
) -> Response {
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        let message = "the answer's body failed";
        let status = StatusCode::BAD_GATEWAY;
        return EmulatorError::injected(status, message).into_response();
    };
    let mut object: serde_json::Map<String, serde_json::Value> =
        match serde_json::from_slice(&bytes) {
            Ok(object) => object,
            Err(_) => return Response::from_parts(parts, Body::from(bytes)),
        };
    if !reshape(&mut object) {
        return Response::from_parts(parts, Body::from(bytes));
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    let body = serde_json::to_vec(&object).unwrap_or_default();
    Response::from_parts(parts, Body::from(body))
}

/// `echo_writes`: the answer as it came, with the request body's fields it lacks added.
async fn echoed(request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let Ok(sent) = axum::body::to_bytes(body, usize::MAX).await else {
        let message = "the request's body failed";
        let status = StatusCode::BAD_REQUEST;
        return EmulatorError::injected(status, message).into_response();
    };
    let fields: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&sent).unwrap_or_default();
    let response = next.run(Request::from_parts(parts, Body::from(sent))).await;
    if !response.status().is_success() {
        return response;
    }
    reshape_object(response, |answer| {
        for (field, value) in fields {
            answer.entry(field).or_insert(value);
        }
        true
    })
    .await
}

/// A request for a later page of a paged list: `current_page` 1 or more.
fn later_page(query: Option<&str>) -> bool {
    query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .filter_map(|pair| pair.strip_prefix("current_page="))
        .any(|page| page.parse::<u64>().is_ok_and(|page| page > 0))
}

/// `list_churn`: the page's first row moved onto the page before, a new row joined at the
/// end.
fn churned(list: &mut serde_json::Map<String, serde_json::Value>) {
    let Some(serde_json::Value::Array(rows)) = list.get_mut("data") else {
        return;
    };
    if rows.is_empty() {
        return;
    }
    let mut joined = rows.remove(0);
    if let Some(row) = joined.as_object_mut() {
        row.insert("id".into(), uuid::Uuid::new_v4().to_string().into());
        for key in ["slug", "name", "scope_name"] {
            if let Some(serde_json::Value::String(text)) = row.get_mut(key) {
                text.push_str("-joined");
            }
        }
    }
    rows.push(joined);
}

/// Applies the request, then cuts the connection so the client sees no response at all.
async fn drop_after_commit(request: Request, next: Next) -> Response {
    let connection = request
        .extensions()
        .get::<ConnectInfo<ConnHandle>>()
        .cloned();
    let response = next.run(request).await;
    if let Some(ConnectInfo(connection)) = connection {
        connection.kill();
    }
    // Belt and braces: should the connection survive, the body still fails mid-stream.
    let (parts, _) = response.into_parts();
    let failing = futures::stream::once(async {
        Err::<Bytes, io::Error>(io::Error::new(
            io::ErrorKind::ConnectionAborted,
            "connection dropped by the emulator",
        ))
    });
    Response::from_parts(parts, Body::from_stream(failing))
}

/// The answer to a write that was applied: a 500, 502 or 503 in the error envelope.
fn error_after_commit() -> Response {
    let (status, message) = match rand::random_range(0..3u8) {
        0 => (StatusCode::INTERNAL_SERVER_ERROR, "internal server error"),
        1 => (StatusCode::BAD_GATEWAY, "bad gateway"),
        _ => (StatusCode::SERVICE_UNAVAILABLE, "service unavailable"),
    };
    EmulatorError::injected(status, message).into_response()
}

/// The answer to a write that was applied: 200 with a truncated, unparseable JSON body.
fn garbage() -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        GARBAGE,
    )
        .into_response()
}

/// Waits out the hang, or until the server shuts down.
async fn hang(state: &Common) {
    let mut shutdown = state.shutdown.clone();
    tokio::select! {
        () = tokio::time::sleep(HANG) => {}
        _ = shutdown.wait_for(|stopped| *stopped) => {}
    }
}
