//! Typed reads of JSON request bodies, with AB01 messages that name the offending field.
//!
//! Bodies are parsed by hand rather than with axum's `Json` extractor so that malformed input gets
//! the API's error shape instead of axum's plain-text rejection.

use axum::{
    body::Bytes,
    extract::{FromRequest, Request},
    response::{IntoResponse, Response},
};
use serde_json::{Map, Number, Value};

use super::errors::{ApiResult, EmulatorError};

pub type Object = Map<String, Value>;

/// A request body that must be a JSON object, read by [`parse_object`]: the extractor of every
/// write route, rejecting as the API does.
pub struct JsonObject(pub Object);

impl<S: Send + Sync> FromRequest<S> for JsonObject {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Response> {
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(IntoResponse::into_response)?;
        parse_object(&bytes)
            .map(Self)
            .map_err(IntoResponse::into_response)
    }
}

/// Parses a request body that must be a JSON object.
pub fn parse_object(bytes: &[u8]) -> ApiResult<Object> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(EmulatorError::validation("request body is required"));
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(EmulatorError::validation(
            "request body must be a json object",
        )),
        Err(err) => Err(EmulatorError::validation(format!(
            "request body is not valid json: {err}"
        ))),
    }
}

/// A present, non-null field.
fn present<'a>(body: &'a Object, field: &str) -> Option<&'a Value> {
    body.get(field).filter(|value| !value.is_null())
}

/// A present field as `take` reads it; a 400 saying the field must be `what` ("a string") when
/// `take` cannot.
fn opt_as<T>(
    body: &Object,
    field: &str,
    what: &str,
    take: impl FnOnce(&Value) -> Option<T>,
) -> ApiResult<Option<T>> {
    let Some(value) = present(body, field) else {
        return Ok(None);
    };
    take(value)
        .map(Some)
        .ok_or_else(|| EmulatorError::validation(format!("{field} must be {what}")))
}

pub fn opt_str(body: &Object, field: &str) -> ApiResult<Option<String>> {
    opt_as(body, field, "a string", |value| {
        value.as_str().map(str::to_owned)
    })
}

pub fn req_str(body: &Object, field: &str) -> ApiResult<String> {
    match opt_str(body, field)? {
        Some(text) if !text.trim().is_empty() => Ok(text),
        _ => Err(required(field)),
    }
}

/// A required string no longer than `max` characters.
pub fn req_str_max(body: &Object, field: &str, max: usize) -> ApiResult<String> {
    let text = req_str(body, field)?;
    if text.chars().count() > max {
        return Err(EmulatorError::validation(format!(
            "{field} must be at most {max} characters"
        )));
    }
    Ok(text)
}

/// A string no longer than `max` characters.
pub fn opt_str_max(body: &Object, field: &str, max: usize) -> ApiResult<Option<String>> {
    let text = opt_str(body, field)?;
    if text.as_ref().is_some_and(|text| text.chars().count() > max) {
        return Err(EmulatorError::validation(format!(
            "{field} must be at most {max} characters"
        )));
    }
    Ok(text)
}

/// An update's `name`: absent, or not blank.
pub fn opt_name(body: &Object) -> ApiResult<Option<String>> {
    let name = opt_str(body, "name")?;
    if name.as_ref().is_some_and(|n| n.trim().is_empty()) {
        return Err(EmulatorError::validation("name must not be empty"));
    }
    Ok(name)
}

/// An update's nullable string of at most `max` characters: `None` when absent, `Some(None)`
/// for `null` (which clears it).
pub fn clearable_str(body: &Object, field: &str, max: usize) -> ApiResult<Option<Option<String>>> {
    body.contains_key(field)
        .then(|| opt_str_max(body, field, max))
        .transpose()
}

/// An update's assignment: what the request sent for a field replaces the stored value.
pub fn set<T>(slot: &mut T, sent: Option<T>) {
    if let Some(value) = sent {
        *slot = value;
    }
}

/// Refuses an update that sends a field fixed at creation with a value other than the current
/// one (sending the current value, or `null`, is accepted): `{field} cannot be changed; {remedy}`.
pub fn reject_changes(body: &Object, fixed: &[(&str, Value)], remedy: &str) -> ApiResult<()> {
    for (field, current) in fixed {
        if body
            .get(*field)
            .is_some_and(|sent| !sent.is_null() && sent != current)
        {
            return Err(EmulatorError::validation(format!(
                "{field} cannot be changed; {remedy}"
            )));
        }
    }
    Ok(())
}

/// Refuses an update whose body sets none of the fields it may change (`changes` is false).
pub fn require_update(changes: bool) -> ApiResult<()> {
    if changes {
        return Ok(());
    }
    Err(EmulatorError::validation(
        "request body must contain at least one field to update",
    ))
}

/// A boolean; the API also takes (and returns) 0/1 integers for flags.
pub fn opt_bool(body: &Object, field: &str) -> ApiResult<Option<bool>> {
    opt_as(body, field, "a boolean (or 0/1)", |value| match value {
        Value::Bool(flag) => Some(*flag),
        Value::Number(n) => match n.as_u64() {
            Some(0) => Some(false),
            Some(1) => Some(true),
            _ => None,
        },
        _ => None,
    })
}

pub fn opt_enum(body: &Object, field: &str, allowed: &[&str]) -> ApiResult<Option<String>> {
    let Some(value) = present(body, field) else {
        return Ok(None);
    };
    check_enum(field, value.as_str(), allowed).map(Some)
}

/// Checks one value (query or body) against a closed enumeration.
pub fn check_enum(field: &str, value: Option<&str>, allowed: &[&str]) -> ApiResult<String> {
    match value {
        Some(text) if allowed.contains(&text) => Ok(text.to_owned()),
        _ => Err(EmulatorError::validation(format!(
            "{field} must be one of {}",
            allowed.join(", ")
        ))),
    }
}

pub fn opt_object(body: &Object, field: &str) -> ApiResult<Option<Object>> {
    opt_as(body, field, "an object", |value| value.as_object().cloned())
}

/// A required object field.
pub fn req_object(body: &Object, field: &str) -> ApiResult<Object> {
    opt_object(body, field)?.ok_or_else(|| required(field))
}

/// The answer for a required field the request lacks.
pub fn required(field: &str) -> EmulatorError {
    EmulatorError::validation(format!("{field} is required"))
}

/// An object whose values are all strings (tags, jwt_sub_workspace_mapping).
pub fn opt_string_map(body: &Object, field: &str) -> ApiResult<Option<Object>> {
    let map = opt_object(body, field)?;
    if map
        .as_ref()
        .is_some_and(|map| map.values().any(|v| !v.is_string()))
    {
        return Err(EmulatorError::validation(format!(
            "{field} values must be strings"
        )));
    }
    Ok(map)
}

pub fn opt_str_list(body: &Object, field: &str) -> ApiResult<Option<Vec<String>>> {
    opt_as(body, field, "an array of strings", |value| {
        let items = value.as_array()?;
        items
            .iter()
            .map(|item| item.as_str().map(str::to_owned))
            .collect()
    })
}

pub fn opt_number(body: &Object, field: &str) -> ApiResult<Option<Number>> {
    opt_as(body, field, "a non-negative number", |value| match value {
        Value::Number(n) if n.as_f64().is_some_and(|f| f >= 0.0) => Some(n.clone()),
        _ => None,
    })
}

/// A number that may be absent but not `null`: the API rejects `null` for its required numbers.
pub fn opt_number_not_null(body: &Object, field: &str) -> ApiResult<Option<Number>> {
    if body.get(field).is_some_and(Value::is_null) {
        return Err(EmulatorError::validation(format!(
            "{field} must be a non-negative number, not null"
        )));
    }
    opt_number(body, field)
}

/// A hyphenated UUID (`6f0e4a2c-5a4e-4c1b-9a53-3c2f1f0d9b11`), the only form the API writes.
pub fn is_uuid(text: &str) -> bool {
    text.len() == 36 && uuid::Uuid::try_parse(text).is_ok()
}

/// A numeric TSG id, which deployment writes take as `organisation_id` (FACTS §2).
fn is_tsg(text: &str) -> bool {
    (1..=20).contains(&text.len()) && text.bytes().all(|b| b.is_ascii_digit())
}

/// Something shaped like a UUID (8-4-4-4-12 dashes) whatever its digits: a slug never is.
fn uuid_shaped(text: &str) -> bool {
    text.len() == 36
        && text
            .char_indices()
            .all(|(at, c)| matches!(at, 8 | 13 | 18 | 23) == (c == '-'))
}

/// A workspace slug: ASCII letters, digits, `-` and `_`, at most 100 characters.
fn is_slug(text: &str) -> bool {
    (1..=100).contains(&text.len())
        && !uuid_shaped(text)
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// What a reference field must look like; each rule is where FACTS places that field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdRule {
    /// Configs and guardrails: `workspace_id` is a workspace UUID; rate limits: `organisation_id`.
    Uuid,
    /// Rate limits: `workspace_id` is "Workspace ID or slug".
    UuidOrSlug,
    /// Deployment writes: `organisation_id` is the numeric TSG (reads return a UUID; both pass).
    TsgOrUuid,
}

impl IdRule {
    fn accepts(self, text: &str) -> bool {
        match self {
            Self::Uuid => is_uuid(text),
            Self::UuidOrSlug => is_uuid(text) || is_slug(text),
            Self::TsgOrUuid => is_tsg(text) || is_uuid(text),
        }
    }

    fn expected(self) -> &'static str {
        match self {
            Self::Uuid => "a UUID",
            Self::UuidOrSlug => "a UUID or a workspace slug",
            Self::TsgOrUuid => "a numeric TSG id or a UUID",
        }
    }

    /// Checks one value (query or body); an empty string counts as absent, as the lists treat it.
    pub fn check(self, param: &'static str, text: &str) -> ApiResult<()> {
        if text.is_empty() || self.accepts(text) {
            return Ok(());
        }
        Err(EmulatorError::InvalidParam {
            param,
            message: format!("{param} must be {}", self.expected()),
        })
    }

    /// Reads an optional string field of a body and checks it.
    pub fn opt_field(self, body: &Object, param: &'static str) -> ApiResult<Option<String>> {
        let text = opt_str(body, param)?;
        if let Some(text) = &text {
            self.check(param, text)?;
        }
        Ok(text)
    }

    /// [`opt_field`](Self::opt_field), an empty string counting as absent (as creates take an
    /// empty `workspace_id`).
    pub fn opt_nonempty(self, body: &Object, param: &'static str) -> ApiResult<Option<String>> {
        Ok(self.opt_field(body, param)?.filter(|text| !text.is_empty()))
    }

    /// Checks an optional query filter and answers it (an empty one counts as absent, as the
    /// lists treat it).
    pub fn filter<'a>(
        self,
        query: &'a std::collections::HashMap<String, String>,
        param: &'static str,
    ) -> ApiResult<Option<&'a String>> {
        self.query(query, param)?;
        Ok(query.get(param).filter(|text| !text.is_empty()))
    }

    /// Checks an optional query parameter.
    pub fn query(
        self,
        query: &std::collections::HashMap<String, String>,
        param: &'static str,
    ) -> ApiResult<()> {
        query
            .get(param)
            .map_or(Ok(()), |text| self.check(param, text))
    }
}

pub fn opt_array(body: &Object, field: &str) -> ApiResult<Option<Vec<Value>>> {
    match present(body, field) {
        None => Ok(None),
        Some(Value::Array(items)) => Ok(Some(items.clone())),
        Some(_) => Err(EmulatorError::validation(format!(
            "{field} must be an array"
        ))),
    }
}

/// One item of a workspace access PUT (`workspaces[]`, integrations and MCP integrations):
/// the object, its `id` (a workspace UUID or slug) and `enabled`, both required.
pub fn access_item(item: &Value) -> ApiResult<(&Object, String, bool)> {
    let item = array_item("workspaces", item)?;
    let id = item_str("workspaces", item, "id")?;
    IdRule::UuidOrSlug.check("workspace_id", &id)?;
    let enabled = item_bool("workspaces", item, "enabled")?;
    Ok((item, id, enabled))
}

/// The `workspaces` of a seed item (integrations and MCP integrations) as `(id, enabled)` access
/// rows: a seed is taken as given, so an item that is not an object is passed over, a missing
/// `id` is empty and `enabled` defaults to true.
pub fn seeded_access(item: &Object) -> impl Iterator<Item = (String, bool)> + '_ {
    item.get("workspaces")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
        .map(|row| (str_or(row, "id", ""), flag_or(row, "enabled", true)))
}

/// An item of the array field `array`, which must be an object.
pub fn array_item<'a>(array: &str, item: &'a Value) -> ApiResult<&'a Object> {
    item.as_object()
        .ok_or_else(|| EmulatorError::validation(format!("{array} items must be objects")))
}

/// The items of the array field `array` (as [`req_array`] or [`opt_array`] read it), each an
/// object read by `read`.
pub fn items<T>(
    array: &str,
    items: &[Value],
    mut read: impl FnMut(&Object) -> ApiResult<T>,
) -> ApiResult<Vec<T>> {
    items
        .iter()
        .map(|item| read(array_item(array, item)?))
        .collect()
}

/// A required array field of objects, each read by `read`.
pub fn req_items<T>(
    body: &Object,
    array: &str,
    read: impl FnMut(&Object) -> ApiResult<T>,
) -> ApiResult<Vec<T>> {
    items(array, &req_array(body, array)?, read)
}

/// A required string of an item of the array field `array`: `{array}[].{field} is required`
/// when it is absent, blank or not a string.
pub fn item_str(array: &str, item: &Object, field: &str) -> ApiResult<String> {
    req_str(item, field).map_err(|_| item_required(array, field))
}

/// A required boolean of an item of the array field `array`.
pub fn item_bool(array: &str, item: &Object, field: &str) -> ApiResult<bool> {
    opt_bool(item, field)?.ok_or_else(|| item_required(array, field))
}

fn item_required(array: &str, field: &str) -> EmulatorError {
    EmulatorError::validation(format!("{array}[].{field} is required"))
}

/// A required array field.
pub fn req_array(body: &Object, field: &str) -> ApiResult<Vec<Value>> {
    opt_array(body, field)?.ok_or_else(|| required(field))
}

/// Reads a field of a seeded object leniently: a string, or the default.
pub fn str_or(body: &Object, field: &str, default: impl Into<String>) -> String {
    match body.get(field) {
        Some(Value::String(text)) => text.clone(),
        _ => default.into(),
    }
}

/// An update's nullable field: `Some(value)` when the body has `field` (`value` being `None`
/// for `null`), `None` when it leaves the field as it is.
pub fn sent<T>(body: &Object, field: &str, value: Option<T>) -> Option<Option<T>> {
    body.contains_key(field).then_some(value)
}

/// Reads a nullable string field of a seeded object leniently.
pub fn nullable_str(body: &Object, field: &str) -> Option<String> {
    body.get(field).and_then(Value::as_str).map(str::to_owned)
}

/// Reads a 0/1-or-boolean flag of a seeded object leniently.
pub fn flag_or(body: &Object, field: &str, default: bool) -> bool {
    match body.get(field) {
        Some(Value::Bool(flag)) => *flag,
        Some(Value::Number(n)) => n.as_i64().is_some_and(|n| n != 0),
        _ => default,
    }
}

/// The API's read shape for flags.
pub fn flag(value: bool) -> u8 {
    u8::from(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_rules_follow_facts() {
        let uuid = "6f0e4a2c-5a4e-4c1b-9a53-3c2f1f0d9b11";
        assert!(IdRule::Uuid.accepts(uuid));
        assert!(!IdRule::Uuid.accepts("ws-1"));
        assert!(!IdRule::Uuid.accepts("6f0e4a2c5a4e4c1b9a533c2f1f0d9b11"));
        assert!(IdRule::UuidOrSlug.accepts("ws-1"));
        assert!(!IdRule::UuidOrSlug.accepts("6f0e4a2c-5a4e-4c1b-9a53-3c2f1f0d9bzz"));
        assert!(!IdRule::UuidOrSlug.accepts("my workspace"));
        assert!(IdRule::TsgOrUuid.accepts("1234567890"));
        assert!(IdRule::TsgOrUuid.accepts(uuid));
        assert!(!IdRule::TsgOrUuid.accepts("tsg-123"));
        assert!(IdRule::Uuid.check("workspace_id", "").is_ok());
    }
}
