//! Tolerant field readers for the quirks FACTS.md records: booleans sent as `0`/`1`, JSON documents
//! sent as strings, lists that may be `null`.

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serializer};
use serde_json::Value;

/// A flag that may arrive as `true`/`false`, `0`/`1` or `"0"`/`"1"`/`"true"`/`"false"`.
pub fn flag<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    let value = Value::deserialize(d)?;
    value_to_flag(&value).ok_or_else(|| de::Error::custom(format!("expected a flag, got {value}")))
}

/// Like [`flag`], for optional fields; `null` reads as `None`.
pub fn opt_flag<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    let value = Value::deserialize(d)?;
    if value.is_null() {
        return Ok(None);
    }
    value_to_flag(&value)
        .map(Some)
        .ok_or_else(|| de::Error::custom(format!("expected a flag, got {value}")))
}

fn value_to_flag(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(b) => Some(*b),
        Value::Number(n) => match n.as_f64()? {
            0.0 => Some(false),
            1.0 => Some(true),
            _ => None,
        },
        Value::String(s) => match s.as_str() {
            "0" | "false" => Some(false),
            "1" | "true" => Some(true),
            _ => None,
        },
        _ => None,
    }
}

/// Writes an optional flag as the integer `0`/`1` (the create-config body's `isDefault`).
pub fn opt_flag_as_int<S: Serializer>(value: &Option<bool>, s: S) -> Result<S::Ok, S::Error> {
    match value {
        Some(b) => s.serialize_u8(u8::from(*b)),
        None => s.serialize_none(),
    }
}

/// Writes a whole number without a fraction (`100`, not `100.0`), as the API writes it.
pub fn whole_f64<S: Serializer>(value: &f64, s: S) -> Result<S::Ok, S::Error> {
    const MAX_EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if value.fract() == 0.0 && value.abs() < MAX_EXACT {
        // Exact: whole and within the range f64 represents without rounding.
        return s.serialize_i64(*value as i64);
    }
    s.serialize_f64(*value)
}

/// Like [`whole_f64`], for optional fields.
pub fn opt_whole_f64<S: Serializer>(value: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match value {
        Some(v) => whole_f64(v, s),
        None => s.serialize_none(),
    }
}

/// A JSON document that reads return as a string (`"config": "{\"retry\":…}"`) and writes send as
/// an object. A string that is not JSON is kept as a string.
pub fn json_document<'de, D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
    let value = Value::deserialize(d)?;
    Ok(parse_embedded_json(value))
}

pub(crate) fn parse_embedded_json(value: Value) -> Value {
    match value {
        Value::String(s) => serde_json::from_str(&s).unwrap_or(Value::String(s)),
        other => other,
    }
}

/// A list that may be absent or `null`; both read as empty.
pub fn null_as_empty<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

/// A field where absent and `null` differ (`Option<Option<T>>`): absent reads as `None` (with
/// `#[serde(default)]`), `null` as `Some(None)`. With `skip_serializing_if = "Option::is_none"`
/// an update body sends `null` only when asked to clear the field.
pub fn double_option<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Flags {
        #[serde(deserialize_with = "flag")]
        a: bool,
        #[serde(default, deserialize_with = "opt_flag")]
        b: Option<bool>,
        #[serde(default, deserialize_with = "json_document")]
        doc: Value,
    }

    #[test]
    fn flags_from_ints_bools_and_strings() {
        let f: Flags = serde_json::from_str(r#"{"a":1,"b":0}"#).unwrap();
        assert!(f.a);
        assert_eq!(f.b, Some(false));
        let f: Flags = serde_json::from_str(r#"{"a":false,"b":"1"}"#).unwrap();
        assert!(!f.a);
        assert_eq!(f.b, Some(true));
        let f: Flags = serde_json::from_str(r#"{"a":true,"b":null}"#).unwrap();
        assert_eq!(f.b, None);
        let f: Flags = serde_json::from_str(r#"{"a":true}"#).unwrap();
        assert_eq!(f.b, None);
        assert!(serde_json::from_str::<Flags>(r#"{"a":2}"#).is_err());
    }

    #[test]
    fn json_document_from_string_or_object() {
        let f: Flags =
            serde_json::from_str(r#"{"a":1,"doc":"{\"retry\":{\"attempts\":3}}"}"#).unwrap();
        assert_eq!(f.doc, serde_json::json!({"retry": {"attempts": 3}}));
        let f: Flags = serde_json::from_str(r#"{"a":1,"doc":{"x":1}}"#).unwrap();
        assert_eq!(f.doc, serde_json::json!({"x": 1}));
        let f: Flags = serde_json::from_str(r#"{"a":1,"doc":"not json"}"#).unwrap();
        assert_eq!(f.doc, Value::String("not json".into()));
    }
}
