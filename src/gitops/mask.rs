//! Masking of secrets in what `plan` prints and `export` writes. Config documents may carry
//! provider keys inline (`api_key`, `vertex_service_account_json`, `custom_headers` values, …);
//! a plan is posted as a pull request comment and an export is committed to Git, so those
//! values never appear in either. Which values are secrets is decided by
//! [`crate::api::secret_fields`], the list the operator and the emulator use too.

use serde_json::Value;

use crate::api::secret_fields::{self, secret_pointers as pointers};

/// What a masked value reads as.
pub use crate::api::secret_fields::MASK;

/// What a masked value that differs from the other side of a diff reads as.
const MASK_CHANGED: &str = "<masked, changed>";

/// True for what needs no masking: the `(secret name/key)` a plan shows where
/// `spec.secretRefs` fills a value in (it names the value's source, not the value), and a value
/// masked already.
fn names_a_secret(value: &Value) -> bool {
    value.as_str().is_some_and(|s| {
        (s.starts_with("(secret ") && s.ends_with(')') && !s.contains('\n'))
            || s == MASK
            || s == MASK_CHANGED
    })
}

/// `value` with every secret replaced by [`MASK`].
pub fn masked(value: &Value) -> Value {
    secret_fields::masked_with(value, MASK, &names_a_secret)
}

/// Paths (below `path`) of the secrets in `value`, e.g. `config/targets/0/api_key`.
pub fn secret_paths(value: &Value, path: &str) -> Vec<String> {
    pointers(value)
        .into_iter()
        .map(|pointer| format!("{path}{pointer}"))
        .collect()
}

/// JSON Pointers of the secrets in `value`, e.g. `/targets/0/api_key`, `/custom_headers/x-key`.
pub fn secret_pointers(value: &Value) -> Vec<String> {
    pointers(value)
}

/// Like [`masked`], but a secret that differs from the one in `other` (the other side of a
/// diff) reads `<masked, changed>`, so the plan still shows *that* it changes.
pub fn masked_against(value: &Value, other: &Value) -> Value {
    let mut copy = value.clone();
    for pointer in pointers(value) {
        let theirs = other.pointer(&pointer);
        if let Some(slot) = copy.pointer_mut(&pointer)
            && !names_a_secret(slot)
        {
            let mark = if Some(&*slot) == theirs {
                MASK
            } else {
                MASK_CHANGED
            };
            *slot = Value::String(mark.into());
        }
    }
    copy
}

/// Like [`masked_against`], and also every value at `extra` (JSON Pointers: the paths
/// `spec.secretRefs` fills from Secrets, whatever their key is called).
pub fn masked_against_at(value: &Value, other: &Value, extra: &[String]) -> Value {
    let mut copy = masked_against(value, other);
    for pointer in extra {
        let Some(mine) = value.pointer(pointer) else {
            continue;
        };
        if names_a_secret(mine) {
            continue;
        }
        let mark = match other.pointer(pointer) == Some(mine) {
            true => MASK,
            false => MASK_CHANGED,
        };
        if let Some(slot) = copy.pointer_mut(pointer) {
            *slot = Value::String(mark.into());
        }
    }
    copy
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
            vec!["config/targets/0/api_key"]
        );
    }

    #[test]
    fn vertex_service_accounts_and_header_values_are_masked() {
        let document = json!({
            "provider": "@vertex",
            "vertex_service_account_json": "{\"private_key\": \"pk-1\"}",
            "custom_headers": {"x-team": "hv-1", "x-source": "(secret keys/h)"},
            "forward_headers": {"x-forward": "hv-2"},
            "targets": [{"forward_headers": ["x-user"], "azure_entra_client_secret": "az-1"}]
        });
        let shown = masked(&document).to_string();
        for value in ["pk-1", "hv-1", "hv-2", "az-1"] {
            assert!(!shown.contains(value), "{value} in {shown}");
        }
        assert!(shown.contains("(secret keys/h)") && shown.contains("x-user"));
        let changed = json!({"custom_headers": {"x-team": "hv-9"}});
        let against = masked_against(&changed, &document);
        assert_eq!(against["custom_headers"]["x-team"], "<masked, changed>");
        let mut paths = secret_pointers(&document);
        paths.sort();
        assert_eq!(
            paths,
            vec![
                "/custom_headers/x-source",
                "/custom_headers/x-team",
                "/forward_headers/x-forward",
                "/targets/0/azure_entra_client_secret",
                "/vertex_service_account_json",
            ]
        );
    }
}
