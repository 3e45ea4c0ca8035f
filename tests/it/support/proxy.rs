//! Proxies in front of the emulator, for tests that change what the operator sees of the API:
//! forward a request, answer one, serve the proxy; APIs that echo what they were sent.

use super::SendJson;
use serde_json::{Value, json};

/// Sends what a proxy received on to the emulator (its credentials and content type with it);
/// the status and body of the answer.
pub async fn forward(
    client: &reqwest::Client,
    upstream: &str,
    parts: &axum::http::request::Parts,
    path: &str,
    body: &[u8],
) -> (u16, Vec<u8>) {
    let mut out = client
        .request(parts.method.clone(), format!("{upstream}{path}"))
        .body(body.to_vec());
    for (name, value) in &parts.headers {
        if name == "authorization" || name == "content-type" || name.as_str().starts_with("x-") {
            out = out.header(name.as_str(), value.as_bytes());
        }
    }
    let answer = out.send().await.unwrap();
    let status = answer.status().as_u16();
    (status, answer.bytes().await.unwrap().to_vec())
}

/// A JSON answer of a proxy.
pub fn json_answer(
    status: u16,
    body: impl Into<axum::body::Body>,
) -> axum::response::Response<axum::body::Body> {
    axum::response::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(body.into())
        .unwrap()
}

/// A request a proxy received, read whole, with the client and the emulator's URL to send it on
/// with ([`forward`]).
pub struct Received {
    pub parts: axum::http::request::Parts,
    /// Its path and query.
    pub path: String,
    pub body: axum::body::Bytes,
    pub client: reqwest::Client,
    pub upstream: String,
}

impl Received {
    /// Sends it on to the emulator; the status and body of the answer.
    pub async fn forward(&self) -> (u16, Vec<u8>) {
        forward(
            &self.client,
            &self.upstream,
            &self.parts,
            &self.path,
            &self.body,
        )
        .await
    }

    /// Sends it on and answers what the emulator answered.
    pub async fn pass(&self) -> axum::response::Response<axum::body::Body> {
        let (status, text) = self.forward().await;
        json_answer(status, text)
    }
}

/// The API's error envelope with `message`, answered with `status`.
pub fn refusal(
    status: u16,
    message: impl std::fmt::Display,
) -> axum::response::Response<axum::body::Body> {
    let answer = json!({"success": false, "message": message.to_string()});
    json_answer(status, answer.to_string())
}

/// A 502 with a plain-text body, as a gateway in front of the API answers when the API's answer
/// is lost.
pub fn bad_gateway() -> axum::response::Response<axum::body::Body> {
    axum::response::Response::builder()
        .status(502)
        .body(axum::body::Body::from("bad gateway"))
        .unwrap()
}

/// Serves a proxy in front of the emulator at `upstream` that answers every request with what
/// `handle` makes of it; its URL.
pub async fn proxy<F, Fut>(upstream: String, handle: F) -> String
where
    F: Fn(Received) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = axum::response::Response<axum::body::Body>> + Send + 'static,
{
    let client = reqwest::Client::new();
    let app = axum::Router::new().fallback(move |request: axum::extract::Request| {
        let (client, upstream, handle) = (client.clone(), upstream.clone(), handle.clone());
        async move {
            let (parts, body) = request.into_parts();
            let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
            let path = parts
                .uri
                .path_and_query()
                .map_or("/", |p| p.as_str())
                .to_string();
            handle(Received {
                parts,
                path,
                body,
                client,
                upstream,
            })
            .await
        }
    });
    serve(app).await
}

/// Serves a proxy on a free local port; its URL.
pub async fn serve(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

// The echoing APIs of issue 29's secrecy tests (controller::secrecy_kinds).

/// The string and number leaves of `value`.
fn leaves(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Number(n) => out.push(n.to_string()),
        Value::Array(items) => items.iter().for_each(|v| leaves(v, out)),
        Value::Object(map) => map.values().for_each(|v| leaves(v, out)),
        _ => {}
    }
}

/// A proxy in front of the emulator answering every write of a secret reference, an MCP
/// integration or an integration (not their workspace, capability or model rows) with a 400
/// that echoes what was sent: a create's whole body, an update's values one by one (strings
/// and numbers, the way a validator lists what it refused, the JSON of a Secret's value
/// parsed).
pub async fn echo_proxy(upstream: String) -> String {
    proxy(upstream, move |received: Received| {
        async move {
            let Received { parts, body, .. } = &received;
            let route = parts.uri.path();
            let echoed = [
                "/ai_gw/admin/v2/secret-references",
                "/ai_gw/admin/v2/mcp-integrations",
                "/ai_gw/admin/v2/integrations",
            ]
            .iter()
            .any(|p| route.starts_with(p))
                && !["/workspaces", "/capabilities", "/models"]
                    .iter()
                    .any(|s| route.ends_with(s));
            let method = &parts.method;
            if echoed && (method == reqwest::Method::POST || method == reqwest::Method::PUT) {
                let message = match *method == reqwest::Method::POST {
                    true => format!("invalid request: {}", String::from_utf8_lossy(body)),
                    false => {
                        let sent: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
                        let mut found = Vec::new();
                        leaves(&sent, &mut found);
                        // A value holding JSON (a Secret's value) is listed parsed too.
                        for text in found.clone() {
                            if let Ok(inner @ (Value::Object(_) | Value::Array(_))) =
                                serde_json::from_str::<Value>(&text)
                            {
                                leaves(&inner, &mut found);
                            }
                        }
                        format!("rejected values: {}", found.join(", "))
                    }
                };
                return refusal(400, message);
            }
            received.pass().await
        }
    })
    .await
}

/// A proxy in front of the emulator answering every DELETE of a secret reference, an MCP
/// integration or an integration with a 400 that echoes what the API stores of them (its
/// `auth_config`, `configurations` and key in clear), as an API explaining why the object is in
/// use might: after an operator restart, the reconcile that read the Secret is long over.
pub async fn delete_echo_proxy(upstream: String) -> String {
    proxy(upstream, move |received: Received| async move {
        let route = received.parts.uri.path();
        let stored = [
            ("/ai_gw/admin/v2/secret-references/", "secret_references"),
            ("/ai_gw/admin/v2/mcp-integrations/", "mcp_integrations"),
            ("/ai_gw/admin/v2/integrations/", "integrations"),
        ]
        .into_iter()
        .find(|(prefix, _)| route.starts_with(prefix));
        if let (Some((prefix, family)), &reqwest::Method::DELETE) = (stored, &received.parts.method)
        {
            let key = route.trim_start_matches(prefix);
            let state = emulator_state(&received).await;
            let record = stored_record(&state, family, key);
            let message = format!("cannot delete {key}: in use with {record}");
            return refusal(400, message);
        }
        received.pass().await
    })
    .await
}

/// A proxy in front of the emulator refusing every PUT and DELETE of a deployment, API key,
/// provider or MCP server with a 400 quoting what the API stores of it (credentials a
/// deployment or key was issued) and of the integration it binds (its key, its headers), as
/// an API explaining a refusal might: values the refused reconcile did not read.
pub async fn stored_echo_proxy(upstream: String) -> String {
    proxy(upstream, move |received: Received| async move {
        let route = received.parts.uri.path();
        let families = [
            ("/ai_gw/admin/v2/deployments/", "deployments"),
            ("/ai_gw/v2/api-keys/", "api_keys"),
            ("/ai_gw/v2/providers/", "providers"),
            ("/ai_gw/v2/mcp-servers/", "mcp_servers"),
        ];
        let family = families.into_iter().find(|(prefix, _)| {
            route.starts_with(prefix) && route[prefix.len()..].split('/').count() <= 2
        });
        let method = &received.parts.method;
        let write = [reqwest::Method::PUT, reqwest::Method::DELETE].contains(method);
        let (Some((_, family)), true) = (family, write) else {
            return received.pass().await;
        };
        let key = route.rsplit('/').next().unwrap_or_default().to_string();
        let state = emulator_state(&received).await;
        let record = stored_record(&state, family, &key);
        let bound = match family {
            "providers" => ("integrations", "integration_id"),
            "mcp_servers" => ("mcp_integrations", "mcp_integration_id"),
            _ => ("-", "-"),
        };
        let bound = stored_record(&state, bound.0, record[bound.1].as_str().unwrap_or("-"));
        let message = format!("refused {key}: the API holds {record} bound to {bound}");
        refusal(400, message)
    })
    .await
}

/// The emulator's whole state, credentials in clear.
async fn emulator_state(received: &Received) -> Value {
    let url = format!("{}/_emulator/state", received.upstream);
    received.client.get(url).json_value().await
}

/// The record of `family` in `state` whose id or slug is `key` (null when none is).
fn stored_record(state: &Value, family: &str, key: &str) -> Value {
    state[family]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["id"] == key || r["slug"] == key)
        .cloned()
        .unwrap_or(Value::Null)
}

/// A proxy in front of the emulator refusing every provider POST with a 400 quoting what the
/// API stores of the integration the request binds (its key in clear), and every config POST
/// quoting what it stores of the guardrails (their checks' parameters in clear): values of
/// another resource than the one refused.
pub async fn bound_echo_proxy(upstream: String) -> String {
    proxy(upstream, move |received: Received| async move {
        let route = received.parts.uri.path();
        if received.parts.method != reqwest::Method::POST {
            return received.pass().await;
        }
        let state = emulator_state(&received).await;
        let quoted = match route {
            "/ai_gw/v2/providers" => {
                let sent: Value = serde_json::from_slice(&received.body).unwrap_or(Value::Null);
                let bound = sent["integration_id"].as_str().unwrap_or("-");
                stored_record(&state, "integrations", bound)
            }
            // Bare, as no pattern would tell them from other words.
            "/ai_gw/v2/configs" => {
                let mut found = Vec::new();
                leaves(&state["guardrails"], &mut found);
                Value::String(found.join(" "))
            }
            _ => return received.pass().await,
        };
        refusal(400, format!("refused: it conflicts with {quoted}"))
    })
    .await
}
