//! Masking of secret-looking values in what `plan` prints. Config documents may carry provider
//! keys inline (`api_key`, `Authorization` override headers, …); a plan is posted as a pull
//! request comment, so those values never appear in it.

use serde_json::Value;

/// What a masked value reads as.
pub const MASK: &str = "<masked>";

/// Keys (compared lowercase, `-` read as `_`) whose values are masked.
fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase().replace('-', "_");
    [
        "api_key",
        "apikey",
        "password",
        "secret",
        "token",
        "client_auth",
        "authorization",
        "credential",
        "private_key",
    ]
    .iter()
    .any(|word| key.contains(word))
}

/// True for the `(secret name/key)` a plan shows where `spec.secretRefs` fills a value in: it
/// names the value's source, not the value.
fn names_a_secret(value: &Value) -> bool {
    value
        .as_str()
        .is_some_and(|s| s.starts_with("(secret ") && s.ends_with(')') && !s.contains('\n'))
}

/// `value` with every value under a secret-looking key replaced by [`MASK`].
pub fn masked(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let v = if is_secret_key(k) && !v.is_null() && !names_a_secret(v) {
                        Value::String(MASK.into())
                    } else {
                        masked(v)
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(masked).collect()),
        other => other.clone(),
    }
}

/// Paths (below `path`) of the values [`masked`] would hide, e.g. `config.targets[0].api_key`.
pub fn secret_paths(value: &Value, path: &str) -> Vec<String> {
    match value {
        Value::Object(map) => map
            .iter()
            .flat_map(|(k, v)| {
                let here = format!("{path}.{k}");
                let empty = v.is_null() || v.as_str() == Some("");
                if is_secret_key(k) && !empty {
                    vec![here]
                } else {
                    secret_paths(v, &here)
                }
            })
            .collect(),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .flat_map(|(i, v)| secret_paths(v, &format!("{path}[{i}]")))
            .collect(),
        _ => Vec::new(),
    }
}

/// JSON Pointers of the values [`masked`] would hide in `value`, e.g. `/targets/0/api_key`.
pub fn secret_pointers(value: &Value) -> Vec<String> {
    let mut found = Vec::new();
    collect_pointers(value, "", &mut found);
    found
}

fn collect_pointers(value: &Value, path: &str, found: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                let here = format!("{path}/{}", k.replace('~', "~0").replace('/', "~1"));
                let empty = v.is_null() || v.as_str() == Some("");
                if is_secret_key(k) && !empty {
                    found.push(here);
                } else {
                    collect_pointers(v, &here, found);
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                collect_pointers(v, &format!("{path}/{i}"), found);
            }
        }
        _ => {}
    }
}

/// Like [`masked`], but a secret that differs from the one in `other` (the other side of a
/// diff) reads `<masked, changed>`, so the plan still shows *that* it changes.
pub fn masked_against(value: &Value, other: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let theirs = other.get(k).unwrap_or(&Value::Null);
                    let v = if is_secret_key(k) && !v.is_null() && !names_a_secret(v) {
                        let mark = if v == theirs {
                            MASK
                        } else {
                            "<masked, changed>"
                        };
                        Value::String(mark.into())
                    } else {
                        masked_against(v, theirs)
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, v)| masked_against(v, other.get(i).unwrap_or(&Value::Null)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secrets_are_masked_and_changes_still_show() {
        let old = json!({"targets": [{"provider": "@a", "api_key": "sk-old"}]});
        let new = json!({"targets": [{"provider": "@a", "api_key": "sk-new"}]});
        assert_eq!(masked(&old)["targets"][0]["api_key"], MASK);
        assert_eq!(
            masked_against(&new, &old)["targets"][0]["api_key"],
            "<masked, changed>"
        );
        assert_eq!(masked_against(&old, &old)["targets"][0]["api_key"], MASK);
        assert_eq!(masked(&old)["targets"][0]["provider"], "@a");
        assert_eq!(
            secret_paths(&old, "config"),
            vec!["config.targets[0].api_key"]
        );
    }
}
