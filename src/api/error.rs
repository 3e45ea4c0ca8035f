//! The one error type of the API layer.

use std::path::PathBuf;
use std::time::Duration;

use super::models::ApiErrorBody;

/// The code the API uses for "this object is gone": `AB08` (404, not found or archived).
const GONE_CODE: &str = "AB08";
/// The code of a 403 for an object outside the token's scope. The object may well exist, so it
/// never means "gone": recreating it would duplicate it the moment the scope comes back.
const NOT_VISIBLE_CODE: &str = "AB03";

/// Everything that can go wrong talking to the API. `Debug` and `Display` never contain the token,
/// header values or secret response fields.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// A request was rejected before it was sent.
    #[error("invalid request: {field}: {reason}")]
    Validation { field: String, reason: String },

    /// The API answered with a non-success status.
    #[error("{0}")]
    Http(Box<HttpError>),

    /// The request did not get an answer: connection refused, reset or closed.
    #[error("{method} {endpoint} failed: {message}")]
    Network {
        method: &'static str,
        endpoint: &'static str,
        message: String,
        /// The request may have reached the server (it was sent, or the answer was lost).
        outcome_unknown: bool,
    },

    /// No answer within the per-request timeout.
    #[error("{method} {endpoint} timed out after {timeout:?}")]
    Timeout {
        method: &'static str,
        endpoint: &'static str,
        timeout: Duration,
        outcome_unknown: bool,
    },

    /// A success status with a body the client could not read.
    #[error("failed to decode the answer to {method} {endpoint} (HTTP {status}): {message}")]
    Decode {
        method: &'static str,
        endpoint: &'static str,
        status: u16,
        message: String,
        /// The raw body, or `None` when the endpoint returns secrets.
        body: Option<String>,
    },

    /// Every attempt failed; `last` is the final cause.
    #[error("gave up after {attempts} attempts: {last}")]
    RetriesExhausted { attempts: u32, last: Box<ApiError> },

    #[error("failed to get a bearer token: {0}")]
    Token(String),

    /// The io error is part of the message (not a `source`) so one-line renderings keep it.
    #[error("failed to read token file {path}: {error}")]
    TokenFile {
        path: PathBuf,
        error: std::io::Error,
    },

    #[error("invalid client configuration: {0}")]
    Config(String),

    /// A write this client's guard did not let out (see [`super::WriteGuard`]): it was never
    /// sent, so its outcome is known.
    #[error("{method} {endpoint} was not sent: {reason}")]
    Withheld {
        method: &'static str,
        endpoint: &'static str,
        reason: String,
    },

    /// A read answered in part (a capped telemetry query): readable, but it may leave out what
    /// the caller counts, so it proves nothing.
    #[error("{method} {endpoint} answered in part: {reason}")]
    Incomplete {
        method: &'static str,
        endpoint: &'static str,
        reason: String,
    },

    /// A request that could no longer be answered by its deadline when it could leave (see
    /// [`super::Client::answered_by`]): it was never sent, so its outcome is known.
    /// `retry_after` is the wait the API had asked for before the retry that was not sent.
    #[error("{method} {endpoint} was not sent: it could no longer be answered within its deadline")]
    PastDeadline {
        method: &'static str,
        endpoint: &'static str,
        retry_after: Option<Duration>,
    },
}

/// An HTTP error answer: status, the parsed API error (if any) and the raw body.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{method} {endpoint} returned HTTP {status}{}", describe(.body.as_ref(), .raw))]
pub struct HttpError {
    pub method: &'static str,
    pub endpoint: &'static str,
    pub status: u16,
    pub body: Option<ApiErrorBody>,
    pub raw: String,
    /// From the `Retry-After` header, or else the body's `retry_after`.
    pub retry_after: Option<Duration>,
    /// The 403 came from the SCM policy engine (`x-opa-decision: false`), not the API.
    pub opa_denied: bool,
}

fn describe(body: Option<&ApiErrorBody>, raw: &str) -> String {
    let code = body.and_then(|b| b.code.as_deref());
    let message = body.and_then(|b| b.message.as_deref());
    match (code, message) {
        (Some(c), Some(m)) => format!(": {m} ({c})"),
        (Some(c), None) => format!(" ({c})"),
        (None, Some(m)) => format!(": {m}"),
        (None, None) if raw.trim().is_empty() => String::new(),
        (None, None) => format!(": {}", shortened(raw.trim(), 200)),
    }
}

/// `s` cut to `max` characters, the cut marked with an ellipsis: a secret value cut in two there
/// is then read as an elided part of it by the concealment (`elided_part`), not passed over as
/// an unknown word.
fn shortened(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

impl ApiError {
    pub(crate) fn validation(field: impl Into<String>, reason: impl Into<String>) -> Self {
        ApiError::Validation {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// This error as its Display says it, but an HTTP answer's own text left out (its status
    /// and error code kept): for a failure about many objects at once (a list), whose text may
    /// quote what the API stores of any of them, values no single reconcile knows to conceal.
    pub fn without_answer_text(&self) -> String {
        match self {
            ApiError::Http(h) => {
                let code = h.body.as_ref().and_then(|b| b.code.as_deref());
                let code = code.map(|c| format!(" ({c})")).unwrap_or_default();
                format!(
                    "{} {} returned HTTP {}{code} (its message left out)",
                    h.method, h.endpoint, h.status
                )
            }
            ApiError::RetriesExhausted { attempts, last } => {
                format!(
                    "gave up after {attempts} attempts: {}",
                    last.without_answer_text()
                )
            }
            ApiError::Decode {
                method,
                endpoint,
                status,
                ..
            } => format!("failed to decode the answer to {method} {endpoint} (HTTP {status})"),
            other => other.to_string(),
        }
    }

    /// The final cause, looking through [`ApiError::RetriesExhausted`].
    pub fn root(&self) -> &ApiError {
        match self {
            ApiError::RetriesExhausted { last, .. } => last.root(),
            other => other,
        }
    }

    /// The HTTP error answer, if the API answered.
    pub fn http(&self) -> Option<&HttpError> {
        match self.root() {
            ApiError::Http(h) => Some(h),
            _ => None,
        }
    }

    /// Worth retrying later: network errors, timeouts, 5xx and 429.
    pub fn is_transient(&self) -> bool {
        match self.root() {
            ApiError::Network { .. }
            | ApiError::Timeout { .. }
            | ApiError::Token(_)
            | ApiError::Withheld { .. }
            | ApiError::PastDeadline { .. } => true,
            ApiError::Http(h) => h.status == 429 || h.status >= 500,
            _ => false,
        }
    }

    /// The object does not exist: 404, or `AB08`. Only these mean "gone"; `AB03` does not (see
    /// [`ApiError::is_not_visible`]) and neither does an OPA policy 403.
    pub fn is_not_found(&self) -> bool {
        let Some(h) = self.http() else { return false };
        if h.opa_denied {
            return false;
        }
        let gone_code = h
            .body
            .as_ref()
            .and_then(|b| b.code.as_deref())
            .is_some_and(|c| c == GONE_CODE);
        // A `{success: false}` body can come with a 2xx status; its code decides then.
        h.status == 404 || ((h.status == 403 || h.status < 300) && gone_code)
    }

    /// 403 `AB03`: the object is outside this token's scope. It may exist; it is not "gone".
    pub fn is_not_visible(&self) -> bool {
        let Some(h) = self.http() else { return false };
        !h.opa_denied
            && h.body
                .as_ref()
                .and_then(|b| b.code.as_deref())
                .is_some_and(|c| c == NOT_VISIBLE_CODE)
    }

    pub fn status(&self) -> Option<u16> {
        match self.root() {
            ApiError::Http(h) => Some(h.status),
            ApiError::Decode { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The API's own message, suitable for conditions and events.
    pub fn api_message(&self) -> Option<&str> {
        self.http()?.body.as_ref()?.message.as_deref()
    }

    /// The API's error code (`AB08`, `invalid_request_error` codes, …).
    pub fn api_code(&self) -> Option<&str> {
        self.http()?.body.as_ref()?.code.as_deref()
    }

    /// How long the API asked us to wait.
    pub fn retry_after(&self) -> Option<Duration> {
        match self.root() {
            ApiError::PastDeadline { retry_after, .. } => *retry_after,
            _ => self.http()?.retry_after,
        }
    }

    /// A short CamelCase reason for events and metrics labels.
    pub fn category(&self) -> &'static str {
        match self.root() {
            ApiError::Validation { .. } => "Validation",
            ApiError::Network { .. } => "Network",
            ApiError::Timeout { .. } => "Timeout",
            ApiError::Decode { .. } => "Decode",
            ApiError::Token(_) | ApiError::TokenFile { .. } => "Token",
            ApiError::Config(_) => "Config",
            ApiError::Withheld { .. } => "Withheld",
            ApiError::Incomplete { .. } => "Incomplete",
            ApiError::PastDeadline { .. } => "PastDeadline",
            ApiError::RetriesExhausted { .. } => "Unknown",
            ApiError::Http(_) if self.is_not_found() => "NotFound",
            ApiError::Http(_) if self.is_not_visible() => "NotVisible",
            ApiError::Http(h) => match h.status {
                401 => "Unauthorized",
                403 => "Forbidden",
                404 => "NotFound",
                405 => "MethodNotAllowed",
                409 => "Conflict",
                422 => "Unprocessable",
                429 => "RateLimited",
                400..=499 => "Validation",
                500.. => "ServerError",
                _ => "Rejected",
            },
        }
    }

    /// The request may have been applied although no readable success answer arrived: a
    /// timeout after sending, a connection reset or closed, a 5xx (servers fail after they
    /// commit, too), or a 2xx whose body could not be read. Look the object up before creating
    /// again; never repeat a non-idempotent call blindly.
    pub fn outcome_unknown(&self) -> bool {
        match self.root() {
            ApiError::Http(h) => h.status >= 500,
            ApiError::Decode { status, .. } => (200..300).contains(status),
            ApiError::Network {
                outcome_unknown, ..
            }
            | ApiError::Timeout {
                outcome_unknown, ..
            } => *outcome_unknown,
            _ => false,
        }
    }

    /// Sending it again might help: a permanent error (a 400, a bad config) will not.
    pub fn is_permanent(&self) -> bool {
        !self.is_transient()
    }
}

impl From<HttpError> for ApiError {
    fn from(value: HttpError) -> Self {
        ApiError::Http(Box::new(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A text answer cut at 200 characters through a secret it echoes: the part left before
    /// the cut is concealed too, not passed as an unknown word.
    #[test]
    fn a_secret_cut_by_the_shortening_is_concealed() {
        let secret = "Ab3dE5gH7jK9mN1pQ3rS5tU7vW9xY1zAq";
        let raw = format!("<html>{} {secret} rejected</html>", "x".repeat(184));
        let error = http(400, &raw, false).to_string();
        let cut = &secret[..9];
        assert!(
            error.contains(cut),
            "the cut falls inside the secret: {error}"
        );
        let shown = crate::api::concealment::conceal(&error, &[secret.to_string()]);
        assert!(!shown.contains(cut), "{shown}");
    }

    #[test]
    fn an_answer_left_out_keeps_its_status_and_code() {
        let raw =
            r#"{"errorCode":"AB01","message":"listing refused for key sk-live-Zq8Wm3Lx7Pv2"}"#;
        let error = ApiError::RetriesExhausted {
            attempts: 5,
            last: Box::new(http(400, raw, false)),
        };
        let shown = error.without_answer_text();
        assert!(!shown.contains("sk-live"), "{shown}");
        assert_eq!(
            shown,
            "gave up after 5 attempts: GET /ai_gw/v2/configs/{slug} returned HTTP 400 (AB01) (its message left out)"
        );
        let plain = http(500, "<html>sk-live-Zq8Wm3Lx7Pv2</html>", false).without_answer_text();
        assert!(!plain.contains("sk-live"), "{plain}");
    }

    fn http(status: u16, raw: &str, opa: bool) -> ApiError {
        HttpError {
            method: "GET",
            endpoint: "/ai_gw/v2/configs/{slug}",
            status,
            body: ApiErrorBody::parse(raw),
            raw: raw.to_owned(),
            retry_after: None,
            opa_denied: opa,
        }
        .into()
    }

    #[test]
    fn not_found_rules() {
        assert!(http(404, "", false).is_not_found());
        assert!(
            http(
                404,
                r#"{"errorCode":"AB08","message":"Resource not found"}"#,
                false
            )
            .is_not_found()
        );
        let out_of_scope = http(
            403,
            r#"{"success":false,"data":{"message":"x","errorCode":"AB03"}}"#,
            false,
        );
        assert!(!out_of_scope.is_not_found(), "AB03 is not proof of absence");
        assert!(out_of_scope.is_not_visible());
        assert!(!http(403, r#"{"msg":"Access denied"}"#, true).is_not_found());
        assert!(!http(403, r#"{"errorCode":"AB03"}"#, true).is_not_found());
        assert!(!http(403, r#"{"errorCode":"AB01"}"#, false).is_not_found());
        assert_eq!(
            http(403, r#"{"msg":"Access denied"}"#, true).category(),
            "Forbidden"
        );
        assert_eq!(
            http(403, r#"{"errorCode":"AB03"}"#, false).category(),
            "NotVisible"
        );
    }

    #[test]
    fn categories_and_transience() {
        assert_eq!(http(429, "", false).category(), "RateLimited");
        assert!(http(429, "", false).is_transient());
        assert_eq!(http(503, "", false).category(), "ServerError");
        assert!(http(500, "", false).is_transient());
        assert_eq!(http(400, "", false).category(), "Validation");
        assert!(!http(400, "", false).is_transient());
        assert_eq!(http(401, "", false).category(), "Unauthorized");
        assert_eq!(http(409, "", false).category(), "Conflict");
        let refused = http(
            200,
            r#"{"success":false,"data":{"errorCode":"AB01","message":"no"}}"#,
            false,
        );
        assert_eq!(refused.category(), "Rejected");
        assert!(!refused.is_transient());
        let gone = http(
            200,
            r#"{"success":false,"data":{"errorCode":"AB08","message":"gone"}}"#,
            false,
        );
        assert!(gone.is_not_found());
        let exhausted = ApiError::RetriesExhausted {
            attempts: 5,
            last: Box::new(http(503, r#"{"message":"down"}"#, false)),
        };
        assert_eq!(exhausted.category(), "ServerError");
        assert_eq!(exhausted.status(), Some(503));
        assert_eq!(exhausted.api_message(), Some("down"));
        assert!(exhausted.is_transient());
    }

    #[test]
    fn display_uses_api_message() {
        let e = http(
            400,
            r#"{"error":{"code":"AB01","message":"name is required","param":null,"type":"invalid_request_error"}}"#,
            false,
        );
        assert_eq!(
            e.to_string(),
            "GET /ai_gw/v2/configs/{slug} returned HTTP 400: name is required (AB01)"
        );
        assert_eq!(e.api_code(), Some("AB01"));
    }

    #[test]
    fn outcome_unknown_only_for_lost_answers() {
        let net = ApiError::Network {
            method: "POST",
            endpoint: "/x",
            message: "connection closed".into(),
            outcome_unknown: true,
        };
        assert!(net.outcome_unknown());
        assert!(net.is_transient());
        assert!(
            http(500, "", false).outcome_unknown(),
            "it may have committed"
        );
        assert!(http(503, "", false).outcome_unknown());
        assert!(!http(400, "", false).outcome_unknown());
        assert!(
            http(504, "", false).outcome_unknown(),
            "a proxy gave up waiting"
        );
        assert!(http(502, "", false).outcome_unknown());
    }
}
