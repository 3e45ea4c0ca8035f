//! Error bodies. The API answers errors in several shapes; they are all read into [`ApiErrorBody`].
//!
//! - the seed's envelope: `{"error": {"code", "message", "param", "type"}}`
//! - app RBAC: `{"success": false, "data": {"message", "errorCode"}}`
//! - Portkey style: `{"errorCode": "AB08", "message": "..."}`
//! - SCM OPA denial: `{"msg": "Access denied"}`
//!
//! Any of them may carry `retry_after: {interval, unit}`.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The seed's error envelope, as the emulator writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorEnvelope {
    pub error: ErrorObject,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The `error` object of the seed's envelope. `code` and `param` are nullable.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ErrorObject {
    #[serde(default)]
    pub code: Option<String>,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub param: Option<String>,
    #[serde(rename = "type", default)]
    pub error_type: String,
    /// Fields not modelled here, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// What the client could read out of an error body, whichever shape it had.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ApiErrorBody {
    /// `error.code` or `errorCode` (e.g. `AB03`, `AB08`).
    pub code: Option<String>,
    pub message: Option<String>,
    pub param: Option<String>,
    /// `error.type` of the seed's envelope.
    pub error_type: Option<String>,
    /// From a body field `retry_after: {interval, unit}`.
    pub retry_after: Option<Duration>,
}

impl ApiErrorBody {
    /// Reads a body; `None` when it is not JSON or has none of the known fields.
    pub fn parse(raw: &str) -> Option<Self> {
        let value: Value = serde_json::from_str(raw).ok()?;
        Self::from_value(&value)
    }

    pub fn from_value(value: &Value) -> Option<Self> {
        let obj = value.as_object()?;
        let mut body = ApiErrorBody {
            retry_after: obj.get("retry_after").and_then(parse_retry_after_body),
            ..Default::default()
        };
        if let Some(error) = obj.get("error") {
            match error {
                Value::Object(e) => {
                    body.code = string_field(e.get("code"));
                    body.message = string_field(e.get("message"));
                    body.param = string_field(e.get("param"));
                    body.error_type = string_field(e.get("type"));
                }
                Value::String(s) => body.message = Some(s.clone()),
                _ => {}
            }
        }
        if let Some(Value::Object(data)) = obj.get("data") {
            body.code = body.code.or_else(|| string_field(data.get("errorCode")));
            body.message = body.message.or_else(|| string_field(data.get("message")));
        }
        body.code = body.code.or_else(|| string_field(obj.get("errorCode")));
        body.message = body
            .message
            .or_else(|| string_field(obj.get("message")))
            .or_else(|| string_field(obj.get("msg")));
        let empty = body.code.is_none()
            && body.message.is_none()
            && body.error_type.is_none()
            && body.retry_after.is_none();
        (!empty).then_some(body)
    }
}

fn string_field(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// `retry_after: {interval: 2, unit: "s"}`; a bare number means seconds.
fn parse_retry_after_body(value: &Value) -> Option<Duration> {
    let (interval, unit) = match value {
        Value::Number(n) => (n.as_f64()?, "s"),
        Value::Object(o) => (
            o.get("interval")?.as_f64()?,
            o.get("unit").and_then(Value::as_str).unwrap_or("s"),
        ),
        _ => return None,
    };
    let seconds_per_unit = match unit.to_ascii_lowercase().as_str() {
        "ms" | "msec" | "millis" | "milliseconds" => 0.001,
        "s" | "sec" | "secs" | "second" | "seconds" => 1.0,
        "m" | "min" | "mins" | "minute" | "minutes" => 60.0,
        "h" | "hr" | "hour" | "hours" => 3600.0,
        _ => return None,
    };
    let secs = interval * seconds_per_unit;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_envelope() {
        let b = ApiErrorBody::parse(
            r#"{"error":{"code":"invalid_page_size","message":"page_size must be 1..1000","param":"page_size","type":"invalid_request_error"}}"#,
        )
        .unwrap();
        assert_eq!(b.code.as_deref(), Some("invalid_page_size"));
        assert_eq!(b.message.as_deref(), Some("page_size must be 1..1000"));
        assert_eq!(b.param.as_deref(), Some("page_size"));
        assert_eq!(b.error_type.as_deref(), Some("invalid_request_error"));
    }

    #[test]
    fn seed_envelope_with_null_code_and_param() {
        let b = ApiErrorBody::parse(
            r#"{"error":{"code":null,"message":"bad","param":null,"type":"invalid_request_error"}}"#,
        )
        .unwrap();
        assert_eq!(b.code, None);
        assert_eq!(b.param, None);
        let typed: ErrorEnvelope = serde_json::from_str(
            r#"{"error":{"code":null,"message":"bad","param":null,"type":"x"}}"#,
        )
        .unwrap();
        assert_eq!(typed.error.message, "bad");
    }

    #[test]
    fn rbac_envelope() {
        let b = ApiErrorBody::parse(
            r#"{"success":false,"data":{"message":"workspace out of scope","errorCode":"AB03"}}"#,
        )
        .unwrap();
        assert_eq!(b.code.as_deref(), Some("AB03"));
        assert_eq!(b.message.as_deref(), Some("workspace out of scope"));
    }

    #[test]
    fn portkey_flat_and_opa() {
        let b =
            ApiErrorBody::parse(r#"{"errorCode":"AB08","message":"Resource not found"}"#).unwrap();
        assert_eq!(b.code.as_deref(), Some("AB08"));
        let b = ApiErrorBody::parse(r#"{"msg":"Access denied"}"#).unwrap();
        assert_eq!(b.code, None);
        assert_eq!(b.message.as_deref(), Some("Access denied"));
    }

    #[test]
    fn retry_after_in_body() {
        let b = ApiErrorBody::parse(
            r#"{"error":{"message":"slow down","type":"rate_limit"},"retry_after":{"interval":1500,"unit":"ms"}}"#,
        )
        .unwrap();
        assert_eq!(b.retry_after, Some(Duration::from_millis(1500)));
        let b = ApiErrorBody::parse(r#"{"retry_after":{"interval":2,"unit":"minutes"}}"#).unwrap();
        assert_eq!(b.retry_after, Some(Duration::from_secs(120)));
    }

    #[test]
    fn non_json_and_unrelated_bodies() {
        assert_eq!(ApiErrorBody::parse("<html>bad gateway</html>"), None);
        assert_eq!(ApiErrorBody::parse(r#"{"foo":1}"#), None);
        assert_eq!(ApiErrorBody::parse(r#"[1,2]"#), None);
    }
}
