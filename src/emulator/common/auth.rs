//! Bearer authentication for the API routes and the optional OAuth2 client-credentials endpoint.

use std::{sync::Arc, time::Instant};

use axum::{
    Json,
    body::Bytes,
    extract::{Request, State},
    http::{HeaderMap, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use base64::Engine;
use serde_json::{Value, json};

use super::{
    errors::{ApiResult, EmulatorError},
    ids::random_hex,
    state::{Common, lock},
};

/// Rejects API requests without `Authorization: Bearer <static token or unexpired OAuth token>`.
pub async fn require_bearer(
    State(state): State<Arc<Common>>,
    request: Request,
    next: Next,
) -> Response {
    match bearer(&request) {
        Some(token) if token_is_valid(&state, token) => next.run(request).await,
        _ => EmulatorError::Unauthorized.into_response(),
    }
}

/// The bearer token of `request`'s `Authorization` header.
pub fn bearer(request: &Request) -> Option<&str> {
    request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| {
            value
                .strip_prefix("Bearer ")
                .or_else(|| value.strip_prefix("bearer "))
        })
        .map(str::trim)
}

fn token_is_valid(state: &Common, token: &str) -> bool {
    if token.is_empty() {
        return false;
    }
    if constant_time_eq(token.as_bytes(), state.options.token.as_bytes()) {
        return true;
    }
    let mut tokens = lock(&state.oauth_tokens);
    match tokens.get(token) {
        Some(expiry) if *expiry > Instant::now() => true,
        Some(_) => {
            tokens.remove(token);
            false
        }
        None => false,
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `POST /oauth2/access_token`: HTTP Basic client authentication (or `client_id` and
/// `client_secret` in the form), `grant_type=client_credentials` → a bearer token for `token_ttl`.
pub async fn access_token(
    State(state): State<Arc<Common>>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let Some(oauth) = state.options.oauth.as_ref() else {
        return Ok(StatusCode::NOT_FOUND.into_response());
    };
    let form = parse_form(&body);
    let form_value = |name: &str| {
        form.iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.clone())
    };
    let (client_id, client_secret) = basic_credentials(&headers)
        .or_else(|| Some((form_value("client_id")?, form_value("client_secret")?)))
        .ok_or(EmulatorError::OAuth {
            status: StatusCode::UNAUTHORIZED,
            code: "invalid_client",
        })?;
    let id_ok = constant_time_eq(client_id.as_bytes(), oauth.client_id.as_bytes());
    let secret_ok = constant_time_eq(client_secret.as_bytes(), oauth.client_secret.as_bytes());
    if !(id_ok && secret_ok) {
        return Err(EmulatorError::OAuth {
            status: StatusCode::UNAUTHORIZED,
            code: "invalid_client",
        });
    }
    if form_value("grant_type").as_deref() != Some("client_credentials") {
        return Err(EmulatorError::OAuth {
            status: StatusCode::BAD_REQUEST,
            code: "unsupported_grant_type",
        });
    }
    let token = format!("emu-{}", random_hex(24));
    let expiry = Instant::now() + oauth.token_ttl;
    {
        let mut tokens = lock(&state.oauth_tokens);
        let now = Instant::now();
        tokens.retain(|_, expiry| *expiry > now);
        tokens.insert(token.clone(), expiry);
    }
    let mut body = json!({
        "access_token": token,
        "token_type": "Bearer",
        "expires_in": oauth.token_ttl.as_secs(),
    });
    if let Some(scope) = form_value("scope") {
        body["scope"] = Value::String(scope);
    }
    Ok(Json(body).into_response())
}

fn basic_credentials(headers: &HeaderMap) -> Option<(String, String)> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let encoded = value
        .strip_prefix("Basic ")
        .or_else(|| value.strip_prefix("basic "))?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (id, secret) = text.split_once(':')?;
    Some((percent_decode(id), percent_decode(secret)))
}

/// `application/x-www-form-urlencoded` pairs.
fn parse_form(body: &[u8]) -> Vec<(String, String)> {
    String::from_utf8_lossy(body)
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(key), percent_decode(value))
        })
        .collect()
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'+' => out.push(b' '),
            b'%' if index + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[index + 1..index + 3]).ok();
                match hex.and_then(|hex| u8::from_str_radix(hex, 16).ok()) {
                    Some(byte) => {
                        out.push(byte);
                        index += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            byte => out.push(byte),
        }
        index += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_pairs_are_decoded() {
        let form = parse_form(b"grant_type=client_credentials&scope=tsg_id%3A1234+x");
        assert_eq!(form[0], ("grant_type".into(), "client_credentials".into()));
        assert_eq!(form[1], ("scope".into(), "tsg_id:1234 x".into()));
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%4"), "%4");
    }
}
