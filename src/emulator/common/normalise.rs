//! How a real server hands documents back: the `normalise` and `mask_credentials` faults.
//!
//! A client that compares what it wrote with what it reads byte for byte, or that trusts a read to
//! show its secrets, sees drift that is not there. These functions produce such reads: object keys
//! in reverse order, integral floats as integers (`1.0` → `1`), and credentials masked.

use axum::{
    http::{StatusCode, header},
    response::{IntoResponse, Response},
};
use serde_json::{Number, Value};

/// What a masked credential reads as.
pub const CREDENTIAL_MASK: &str = "********";

/// Replaces every credential in a config document with [`CREDENTIAL_MASK`]: the values of
/// the credential keys and header maps of [`crate::api::secret_fields`], the list aigw itself
/// hides by, so a read masks exactly what aigw treats as secret.
pub fn mask_credentials(value: &mut Value) {
    let masked = crate::api::secret_fields::masked_with(value, CREDENTIAL_MASK, &|_| false);
    *value = masked;
}

/// JSON text with every object's keys in reverse order and integral floats as integers.
///
/// `serde_json` here keeps keys sorted, and clients serialise the same way, so reversing them is
/// the reliable way to differ from what was written.
pub fn to_reordered_string(value: &Value) -> String {
    let mut out = String::new();
    write_reordered(value, &mut out);
    out
}

fn write_reordered(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            out.push('{');
            for (n, (key, item)) in map.iter().rev().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                // Display of a string Value is its quoted, escaped JSON form.
                out.push_str(&Value::from(key.as_str()).to_string());
                out.push(':');
                write_reordered(item, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (n, item) in items.iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                write_reordered(item, out);
            }
            out.push(']');
        }
        Value::Number(number) => out.push_str(&integral(number).to_string()),
        other => out.push_str(&other.to_string()),
    }
}

/// `1.0` → `1`; other numbers as they are.
fn integral(number: &Number) -> Number {
    // Beyond 2^53 a float no longer holds every integer; leave such values alone.
    const EXACT: f64 = 9_007_199_254_740_992.0;
    match number.as_f64() {
        Some(float) if number.is_f64() && float.fract() == 0.0 && float.abs() < EXACT => {
            // Exact: the value is integral and within i64 range.
            Number::from(float as i64)
        }
        _ => number.clone(),
    }
}

/// A 200 JSON answer, normalised when `normalise` is on.
pub fn reply(value: &Value, normalise: bool) -> Response {
    let body = if normalise {
        to_reordered_string(value)
    } else {
        value.to_string()
    };
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

/// The `config` string of a read: masked and normalised as the faults say.
pub fn config_text(stored: &str, normalise: bool, mask: bool) -> String {
    if !normalise && !mask {
        return stored.to_owned();
    }
    let Ok(mut document) = serde_json::from_str::<Value>(stored) else {
        return stored.to_owned();
    };
    if mask {
        mask_credentials(&mut document);
    }
    if normalise {
        to_reordered_string(&document)
    } else {
        document.to_string()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn reordered_text_is_the_same_document() {
        let value = json!({"a": 1.0, "b": {"c": [2.5, 3.0], "d": "x\"y"}, "e": null});
        let text = to_reordered_string(&value);
        assert_eq!(text, r#"{"e":null,"b":{"d":"x\"y","c":[2.5,3]},"a":1}"#);
        let parsed: Value = serde_json::from_str(&text).expect("valid json");
        assert_eq!(
            parsed,
            json!({"a": 1, "b": {"c": [2.5, 3], "d": "x\"y"}, "e": null})
        );
    }

    #[test]
    fn credentials_are_masked_at_any_depth() {
        let mut document = json!({
            "api_key": "sk-1", "provider": "openai",
            "targets": [{"virtual_key": "vk", "aws_access_key_id": "AKIA",
                         "vertex_service_account_json": "{}"}],
            "custom_headers": {"x-token": "t"}, "forward_headers": ["x-user"],
        });
        mask_credentials(&mut document);
        assert_eq!(document["api_key"], CREDENTIAL_MASK);
        assert_eq!(document["targets"][0]["virtual_key"], "vk");
        assert_eq!(
            document["targets"][0]["vertex_service_account_json"],
            CREDENTIAL_MASK
        );
        assert_eq!(document["targets"][0]["aws_access_key_id"], "AKIA");
        assert_eq!(document["custom_headers"]["x-token"], CREDENTIAL_MASK);
        assert_eq!(document["forward_headers"], json!(["x-user"]));
        assert_eq!(document["provider"], "openai");
    }
}
