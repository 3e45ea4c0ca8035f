//! `secret_mappings`, the field by which integrations and MCP integrations take a value from a
//! secret reference instead of holding it (FACTS-rest §3).

use std::collections::HashSet;

use serde_json::Value;

use super::{
    errors::{ApiResult, EmulatorError},
    fields::{self, Object},
};

/// `secret_mappings`: `[{target_field, secret_reference_id, secret_key?, value_format?:
/// json|string}]`, targets unique and each one of `target_prefixes` (an entry ending in `.` is a
/// prefix that must be followed by a field: `configurations.`).
pub fn secret_mappings(body: &Object, target_prefixes: &[&str]) -> ApiResult<Option<Vec<Value>>> {
    let Some(items) = fields::opt_array(body, "secret_mappings")? else {
        return Ok(None);
    };
    let mut targets = HashSet::new();
    for item in &items {
        let item = fields::array_item("secret_mappings", item)?;
        let target = fields::item_str("secret_mappings", item, "target_field")?;
        fields::item_str("secret_mappings", item, "secret_reference_id")?;
        let allowed = target_prefixes.iter().any(|p| match p.ends_with('.') {
            true => target.starts_with(p) && target.len() > p.len(),
            false => target == *p,
        });
        if !allowed {
            return Err(EmulatorError::validation(format!(
                "secret_mappings[].target_field {target} must be one of {}",
                target_prefixes.join(", ")
            )));
        }
        if !targets.insert(target.clone()) {
            return Err(EmulatorError::validation(format!(
                "secret_mappings names target_field {target} twice"
            )));
        }
        fields::opt_enum(item, "value_format", &["json", "string"])
            .map_err(|e| EmulatorError::validation(format!("secret_mappings[].{e}")))?;
    }
    Ok(Some(items))
}
