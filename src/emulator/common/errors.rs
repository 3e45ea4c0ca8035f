//! The emulator's one error type and the wire shapes it renders to.
//!
//! The real API answers in three dialects, and so does the emulator:
//! - management routes: `{"success": false, "data": {"message", "errorCode"}}` (AB01 validation,
//!   AB08 not found);
//! - guardrail routes: the seed's error envelope `{"error": {"code", "message", "param", "type"}}`;
//! - gateway (`/v1`) routes: the same envelope, OpenAI style (so an OpenAI SDK reads it).
//!
//! With the `missing_as_ab03` fault a missing management object answers 403 in the envelope with
//! `code: "AB03"` ("not visible with this token"), which is how the live API reports objects
//! outside the caller's scope or deleted out of band.

use axum::{
    Json,
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};

/// Everything a handler can fail with; each variant knows its status code and body dialect.
#[derive(Debug, thiserror::Error)]
pub enum EmulatorError {
    /// A management request body or query failed validation (400, AB01).
    #[error("{0}")]
    Validation(String),
    /// A management object does not exist (404, AB08).
    #[error("{0}")]
    NotFound(String),
    /// A management object that does not exist, reported as out of scope (403, envelope, AB03).
    #[error("{0}")]
    NotVisible(String),
    /// A query parameter or reference field is malformed (400, error envelope naming it).
    #[error("{message}")]
    InvalidParam {
        param: &'static str,
        message: String,
    },
    /// A guardrail does not exist; the API reports this as 403 (error envelope).
    #[error("{0}")]
    GuardrailNotFound(String),
    /// A gateway object does not exist (404, error envelope).
    #[error("{0}")]
    GatewayNotFound(String),
    /// A gateway request is invalid (400, error envelope).
    #[error("{message}")]
    GatewayInvalid {
        param: &'static str,
        message: String,
    },
    /// A data-plane request without a live `x-portkey-api-key` (401, error envelope).
    #[error("{0}")]
    GatewayUnauthorized(String),
    /// A simulated provider failed the data-plane request (its status, error envelope).
    #[error("{message}")]
    Upstream { status: StatusCode, message: String },
    /// A route the API has that the emulator does not model (501, management body). Not an API
    /// answer: the emulator saying it cannot stand in here.
    #[error("{0}")]
    NotModelled(String),
    /// Missing, unknown or expired bearer token (401).
    #[error("missing or invalid bearer token")]
    Unauthorized,
    /// Injected by the fault settings (500, 502 or 503; any 4xx or 5xx for `failing_routes`).
    #[error("injected fault: {message}")]
    Injected {
        status: StatusCode,
        message: std::borrow::Cow<'static, str>,
    },
    /// Injected rate limit (429 with `Retry-After`).
    #[error("rate limit exceeded")]
    RateLimited { retry_after_secs: u64 },
    /// An OAuth token request failed (RFC 6749 error body).
    #[error("oauth error {code}")]
    OAuth {
        status: StatusCode,
        code: &'static str,
    },
}

impl EmulatorError {
    /// An injected fault's answer ([`EmulatorError::Injected`]).
    pub fn injected(
        status: StatusCode,
        message: impl Into<std::borrow::Cow<'static, str>>,
    ) -> Self {
        Self::Injected {
            status,
            message: message.into(),
        }
    }

    pub fn validation(message: impl Into<String>) -> Self {
        Self::Validation(message.into())
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::NotFound(message.into())
    }

    /// Qualifies a validation message with the enclosing field or object (`rate_limits[].unit
    /// must be …`, `auth_settings.x must be …`); other errors pass unchanged.
    pub fn prefixed(self, prefix: &str) -> Self {
        match self {
            Self::Validation(message) => Self::Validation(format!("{prefix}{message}")),
            other => other,
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            Self::Validation(_) | Self::InvalidParam { .. } | Self::GatewayInvalid { .. } => {
                StatusCode::BAD_REQUEST
            }
            Self::NotFound(_) | Self::GatewayNotFound(_) => StatusCode::NOT_FOUND,
            Self::GuardrailNotFound(_) | Self::NotVisible(_) => StatusCode::FORBIDDEN,
            Self::Unauthorized | Self::GatewayUnauthorized(_) => StatusCode::UNAUTHORIZED,
            Self::Upstream { status, .. } => *status,
            Self::NotModelled(_) => StatusCode::NOT_IMPLEMENTED,
            Self::Injected { status, .. } | Self::OAuth { status, .. } => *status,
            Self::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
        }
    }

    /// The body this error answers with.
    pub fn body(&self) -> Value {
        let message = self.to_string();
        match self {
            Self::Validation(_) => management_body(&message, "AB01"),
            Self::NotFound(_) => management_body(&message, "AB08"),
            // Not a documented code: the live 401 body was never recorded.
            Self::Unauthorized => management_body(&message, "AB02"),
            // Not an API code: the emulator's own.
            Self::NotModelled(_) => management_body(&message, "EMULATOR_NOT_MODELLED"),
            Self::GatewayUnauthorized(_) => {
                envelope("invalid_api_key", &message, None, "authentication_error")
            }
            Self::Upstream { .. } => envelope("provider_error", &message, None, "api_error"),
            Self::InvalidParam { param, .. } | Self::GatewayInvalid { param, .. } => envelope(
                "invalid_parameter",
                &message,
                Some(param),
                "invalid_request_error",
            ),
            Self::GuardrailNotFound(_) => {
                envelope("forbidden", &message, None, "invalid_request_error")
            }
            Self::NotVisible(_) => envelope("AB03", &message, None, "forbidden"),
            Self::GatewayNotFound(_) => {
                envelope("not_found", &message, None, "invalid_request_error")
            }
            Self::Injected { .. } => envelope("server_error", &message, None, "server_error"),
            Self::RateLimited { .. } => {
                envelope("rate_limit_exceeded", &message, None, "rate_limit_error")
            }
            Self::OAuth { code, .. } => json!({ "error": code }),
        }
    }
}

fn management_body(message: &str, code: &str) -> Value {
    json!({ "success": false, "data": { "message": message, "errorCode": code } })
}

fn envelope(code: &str, message: &str, param: Option<&str>, kind: &str) -> Value {
    json!({ "error": { "code": code, "message": message, "param": param, "type": kind } })
}

impl IntoResponse for EmulatorError {
    fn into_response(self) -> Response {
        let mut response = (self.status(), Json(self.body())).into_response();
        if let Self::RateLimited { retry_after_secs } = self {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
        }
        if matches!(self, Self::Unauthorized) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

pub type ApiResult<T> = Result<T, EmulatorError>;
