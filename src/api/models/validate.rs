//! Client-side checks of the limits the seed states, so a bad request fails with the field's name
//! before it costs a round trip.

use std::collections::BTreeMap;

use crate::api::error::ApiError;

/// A request body (or part of one) that knows its own limits.
pub trait Validate {
    fn validate(&self) -> Result<(), ApiError>;
}

impl<T: Validate> Validate for Option<T> {
    fn validate(&self) -> Result<(), ApiError> {
        self.as_ref().map_or(Ok(()), Validate::validate)
    }
}

/// `value`, when set, must lie in `min..=max`.
pub(crate) fn range<T: PartialOrd + std::fmt::Display + Copy>(
    field: &str,
    value: Option<T>,
    min: T,
    max: T,
) -> Result<(), ApiError> {
    match value {
        Some(v) if !(min..=max).contains(&v) => Err(ApiError::validation(
            field,
            format!("must be between {min} and {max}, got {v}"),
        )),
        _ => Ok(()),
    }
}

/// `value`, when set, must be a finite number of at least 0.
pub(crate) fn non_negative(field: &str, value: Option<f64>) -> Result<(), ApiError> {
    match value {
        Some(v) if !v.is_finite() || v < 0.0 => {
            Err(ApiError::validation(field, "must be a non-negative number"))
        }
        _ => Ok(()),
    }
}

pub(crate) fn max_chars(field: &str, value: Option<&str>, max: usize) -> Result<(), ApiError> {
    match value {
        Some(v) if v.chars().count() > max => Err(ApiError::validation(
            field,
            format!("must be at most {max} characters"),
        )),
        _ => Ok(()),
    }
}

/// Each `(field, value)`, in order, must hold more than whitespace ("must not be empty").
pub(crate) fn not_blank<const N: usize>(fields: [(&str, &str); N]) -> Result<(), ApiError> {
    first_blank(fields).map_or(Ok(()), |field| {
        Err(ApiError::validation(field, "must not be empty"))
    })
}

/// `value`, when set, must hold more than whitespace: an update's optional field that may be
/// left out but not cleared ("must not be empty").
pub(crate) fn not_blank_if_set(field: &str, value: Option<&str>) -> Result<(), ApiError> {
    value.map_or(Ok(()), |value| not_blank([(field, value)]))
}

/// `value`, when set, must be one of `allowed` ("must be a, b or c").
pub(crate) fn one_of(field: &str, value: Option<&str>, allowed: &[&str]) -> Result<(), ApiError> {
    match value {
        Some(v) if !allowed.contains(&v) => Err(ApiError::validation(
            field,
            format!("must be {}", alternatives(allowed)),
        )),
        _ => Ok(()),
    }
}

/// `a, b or c`.
fn alternatives(allowed: &[&str]) -> String {
    match allowed.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// Like [`not_blank`], for the fields a create requires ("is required").
pub(crate) fn required<const N: usize>(fields: [(&str, &str); N]) -> Result<(), ApiError> {
    first_blank(fields).map_or(Ok(()), |field| {
        Err(ApiError::validation(field, "is required"))
    })
}

fn first_blank<'f, const N: usize>(fields: [(&'f str, &str); N]) -> Option<&'f str> {
    fields
        .into_iter()
        .find(|(_, value)| value.trim().is_empty())
        .map(|(field, _)| field)
}

/// An update body must set some field: one left all default (nothing set) is refused as the
/// `body`, with `message` (the kinds' messages differ).
pub(crate) fn some_update<T: Default + PartialEq>(
    update: &T,
    message: &str,
) -> Result<(), ApiError> {
    if *update == T::default() {
        return Err(ApiError::validation("body", message));
    }
    Ok(())
}

pub(crate) fn non_empty<T>(field: &str, items: &[T]) -> Result<(), ApiError> {
    if items.is_empty() {
        return Err(ApiError::validation(field, "must have at least one item"));
    }
    Ok(())
}

/// `[A-Za-z0-9_-]{1,64}`, the json_schema format name rule.
pub(crate) fn schema_name(field: &str, name: &str) -> Result<(), ApiError> {
    let len = name.chars().count();
    let allowed = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if len == 0 || len > 64 || !allowed {
        return Err(ApiError::validation(
            field,
            "must be 1 to 64 letters, digits, underscores or dashes",
        ));
    }
    Ok(())
}

/// Metadata: at most 16 pairs, keys at most 64 characters, values at most 512.
pub(crate) fn metadata(field: &str, map: &BTreeMap<String, String>) -> Result<(), ApiError> {
    if map.len() > 16 {
        return Err(ApiError::validation(
            field,
            format!("must have at most 16 pairs, got {}", map.len()),
        ));
    }
    for (key, value) in map {
        if key.chars().count() > 64 {
            return Err(ApiError::validation(
                format!("{field}.{key}"),
                "key must be at most 64 characters",
            ));
        }
        max_chars(&format!("{field}.{key}"), Some(value), 512)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(result: Result<(), ApiError>) -> Option<(String, String)> {
        match result {
            Err(ApiError::Validation { field, reason }) => Some((field, reason)),
            _ => None,
        }
    }

    #[test]
    fn one_of_names_the_alternatives() {
        assert!(one_of("kind", None, &["a", "b"]).is_ok());
        assert!(one_of("kind", Some("b"), &["a", "b"]).is_ok());
        assert_eq!(
            reason(one_of("kind", Some("c"), &["a", "b"])),
            Some(("kind".into(), "must be a or b".into()))
        );
        assert_eq!(
            reason(one_of("kind", Some("d"), &["a", "b", "c"])),
            Some(("kind".into(), "must be a, b or c".into()))
        );
    }

    #[test]
    fn an_unset_field_is_not_blank() {
        assert!(not_blank_if_set("name", None).is_ok());
        assert!(not_blank_if_set("name", Some("x")).is_ok());
        assert_eq!(
            reason(not_blank_if_set("name", Some(" "))),
            Some(("name".into(), "must not be empty".into()))
        );
    }
}
