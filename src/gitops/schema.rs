//! A structural-schema check of one value against a CRD's `openAPIV3Schema`: the checks the
//! apiserver (with kubectl's default strict field validation) makes on create, worded like its
//! messages so a pipeline failure reads like the `kubectl apply` failure it prevents.

use std::collections::HashMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use serde_json::Value;

use super::cel::{Outcome, Rules};

/// One thing wrong at one field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Field path from the document root, e.g. `spec.groupBy[0].key`.
    pub path: String,
    pub message: String,
}

/// Checks values against schemas whose regexes and CEL rules were compiled up front.
#[derive(Default)]
pub struct SchemaChecker {
    patterns: HashMap<String, Result<regex::Regex, String>>,
    rules: Rules,
    /// Set while [`Self::without_rules`] runs: CEL rules are not evaluated.
    rules_held: std::cell::Cell<bool>,
}

impl SchemaChecker {
    /// Compiles every pattern and rule found in `schemas`.
    pub fn new<'a>(schemas: impl IntoIterator<Item = &'a JSONSchemaProps>) -> Self {
        let mut checker = Self::default();
        for schema in schemas {
            checker.prepare(schema);
        }
        checker
    }

    fn prepare(&mut self, schema: &JSONSchemaProps) {
        if let Some(pattern) = &schema.pattern {
            self.patterns
                .entry(pattern.clone())
                .or_insert_with(|| regex::Regex::new(pattern).map_err(|e| e.to_string()));
        }
        for rule in schema.x_kubernetes_validations.iter().flatten() {
            self.rules.compile(&rule.rule);
        }
        for child in children(schema) {
            self.prepare(child);
        }
    }

    /// Runs `checks` with CEL rules left out: the apiserver evaluates no rule of an object with
    /// a value of the wrong type, so a rule never sees, nor its error quotes, such a value.
    pub fn without_rules<T>(&self, checks: impl FnOnce() -> T) -> T {
        self.rules_held.set(true);
        let result = checks();
        self.rules_held.set(false);
        result
    }

    /// Appends every violation of `value` (found at `path`) against `schema` to `out`.
    pub fn check(
        &self,
        schema: &JSONSchemaProps,
        value: &Value,
        path: &str,
        out: &mut Vec<Violation>,
    ) {
        if value.is_null() && schema.nullable == Some(true) {
            return;
        }
        if !self.check_type(schema, value, path, out) {
            return;
        }
        check_enum(schema, value, path, out);
        match value {
            Value::String(s) => self.check_string(schema, s, path, out),
            Value::Number(n) => check_number(schema, n.as_f64().unwrap_or_default(), path, out),
            Value::Array(items) => self.check_array(schema, items, path, out),
            Value::Object(map) => self.check_object(schema, map, path, out),
            _ => {}
        }
        self.check_rules(schema, value, path, out);
    }

    fn check_type(
        &self,
        schema: &JSONSchemaProps,
        value: &Value,
        path: &str,
        out: &mut Vec<Violation>,
    ) -> bool {
        if schema.x_kubernetes_int_or_string == Some(true) {
            return true;
        }
        let Some(expected) = schema.type_.as_deref() else {
            return true;
        };
        // A type this check does not know is left to the apiserver.
        let ok = type_matches(expected, value).unwrap_or(true);
        if !ok {
            out.push(Violation {
                path: path.into(),
                message: format!(
                    "Invalid value: \"{}\": {path} in body must be of type {expected}",
                    json_type(value)
                ),
            });
        }
        ok
    }

    fn check_string(
        &self,
        schema: &JSONSchemaProps,
        s: &str,
        path: &str,
        out: &mut Vec<Violation>,
    ) {
        let len = s.chars().count() as i64;
        if let Some(min) = schema.min_length.filter(|min| len < *min) {
            let message = if min == 1 {
                "Invalid value: \"\": should be at least 1 chars long".to_string()
            } else {
                format!("Invalid value: {s:?}: should be at least {min} chars long")
            };
            out.push(violation(path, message));
        }
        if let Some(max) = schema.max_length.filter(|max| len > *max) {
            out.push(violation(
                path,
                format!("Too long: may not be more than {max} bytes"),
            ));
        }
        if let Some(pattern) = &schema.pattern {
            match self.patterns.get(pattern) {
                Some(Ok(re)) if re.is_match(s) => {}
                Some(Ok(_)) => out.push(violation(
                    path,
                    format!("Invalid value: {s:?}: {path} in body should match '{pattern}'"),
                )),
                _ => out.push(violation(
                    path,
                    format!("pattern {pattern:?} does not compile"),
                )),
            }
        }
    }

    fn check_array(
        &self,
        schema: &JSONSchemaProps,
        items: &[Value],
        path: &str,
        out: &mut Vec<Violation>,
    ) {
        let len = items.len() as i64;
        if let Some(min) = schema.min_items.filter(|min| len < *min) {
            out.push(violation(
                path,
                format!("Invalid value: {len}: {path} in body should have at least {min} items"),
            ));
        }
        if let Some(max) = schema.max_items.filter(|max| len > *max) {
            out.push(violation(
                path,
                format!("Too many: {len}: must have at most {max} items"),
            ));
        }
        if let Some(JSONSchemaPropsOrArray::Schema(item)) = &schema.items {
            for (i, value) in items.iter().enumerate() {
                self.check(item, value, &format!("{path}[{i}]"), out);
            }
        }
        check_unique(schema, items, path, out);
    }

    fn check_object(
        &self,
        schema: &JSONSchemaProps,
        map: &serde_json::Map<String, Value>,
        path: &str,
        out: &mut Vec<Violation>,
    ) {
        for name in schema.required.iter().flatten() {
            if !map.contains_key(name) {
                out.push(violation(&join(path, name), "Required value".to_string()));
            }
        }
        let len = map.len() as i64;
        if let Some(max) = schema.max_properties.filter(|max| len > *max) {
            out.push(violation(
                path,
                format!("Too many: {len}: must have at most {max} items"),
            ));
        }
        let properties = schema.properties.as_ref();
        let additional = match &schema.additional_properties {
            Some(JSONSchemaPropsOrBool::Schema(s)) => Some(s.as_ref()),
            _ => None,
        };
        let preserve = schema.x_kubernetes_preserve_unknown_fields == Some(true);
        for (key, value) in map {
            let child = join(path, key);
            match (properties.and_then(|p| p.get(key)), additional) {
                (Some(property), _) => self.check(property, value, &child, out),
                (None, Some(additional)) => self.check(additional, value, &child, out),
                // An object without declared properties (like `metadata` in a CRD) is not pruned.
                (None, None) if preserve || properties.is_none() => {}
                (None, None) => {
                    let child = join(path, &shown_key(key));
                    out.push(violation(&child, format!("unknown field \"{child}\"")))
                }
            }
        }
    }

    fn check_rules(
        &self,
        schema: &JSONSchemaProps,
        value: &Value,
        path: &str,
        out: &mut Vec<Violation>,
    ) {
        if self.rules_held.get() {
            return;
        }
        for rule in schema.x_kubernetes_validations.iter().flatten() {
            let at = match &rule.field_path {
                Some(field) => format!("{path}{field}"),
                None => path.to_string(),
            };
            match self.rules.evaluate(&rule.rule, value) {
                Outcome::Pass | Outcome::NeedsOldSelf => {}
                Outcome::Fail => {
                    let message = rule
                        .message
                        .clone()
                        .unwrap_or_else(|| format!("failed rule: {}", rule.rule));
                    out.push(violation(
                        &at,
                        format!("Invalid value: \"object\": {message}"),
                    ));
                }
                // An evaluation error may quote the value it met (a URL with a password):
                // said only when it quotes nothing.
                Outcome::Error(e) if !e.contains(['"', '\'']) => {
                    out.push(violation(&at, format!("rule {:?}: {e}", rule.rule)))
                }
                Outcome::Error(_) => out.push(violation(
                    &at,
                    format!("rule {:?} could not be evaluated on this value", rule.rule),
                )),
            }
        }
    }
}

/// Whether `violation` keeps the apiserver from evaluating the object's CEL rules: a value of
/// the wrong type, a missing required field, a value outside its enum, too long a string, too
/// many items (`hasBlockingErr` of its CRD strategy). A pattern or a bound below does not.
pub fn blocks_rules(violation: &Violation) -> bool {
    let message = violation.message.as_str();
    message.contains("must be of type")
        || [
            "Required value",
            "Unsupported value",
            "Too long",
            "Too many",
        ]
        .iter()
        .any(|start| message.starts_with(start))
}

/// An unknown field's name as validate shows it: up to its first `:`, `@`, space or control
/// character. A field name never holds one, but a value does when the space after a colon was
/// left out (`gatewayBaseUrl:https://user:password@host` is one unknown key).
pub fn shown_key(key: &str) -> String {
    match key.find(|c: char| c == ':' || c == '@' || c.is_whitespace() || c.is_control()) {
        Some(end) => format!("{}…", &key[..end]),
        None => key.to_string(),
    }
}

/// `value` as the apiserver validates it: without its declared fields that are `null`, at any
/// depth. It prunes a null of a field that is not nullable (then defaults it), and a nullable
/// field that is null is absent to CEL (`has()` is false, the field's rules are not run). A
/// free-form field's content is kept as written.
pub fn without_null_fields(schema: &JSONSchemaProps, value: &Value) -> Value {
    match value {
        Value::Object(map) if schema.x_kubernetes_preserve_unknown_fields != Some(true) => {
            let additional = match &schema.additional_properties {
                Some(JSONSchemaPropsOrBool::Schema(s)) => Some(s.as_ref()),
                _ => None,
            };
            let mut kept = serde_json::Map::new();
            for (key, field) in map {
                let declared = schema.properties.as_ref().and_then(|p| p.get(key));
                if field.is_null() && declared.is_some() {
                    continue;
                }
                let field = match declared.or(additional) {
                    Some(child) => without_null_fields(child, field),
                    None => field.clone(),
                };
                kept.insert(key.clone(), field);
            }
            Value::Object(kept)
        }
        Value::Array(items) => match &schema.items {
            Some(JSONSchemaPropsOrArray::Schema(item)) => {
                Value::Array(items.iter().map(|i| without_null_fields(item, i)).collect())
            }
            _ => value.clone(),
        },
        _ => value.clone(),
    }
}

/// A `set` list's items, and a `map` list's keys (`x-kubernetes-list-map-keys`), each once, as
/// the apiserver refuses them: `Duplicate value`.
fn check_unique(schema: &JSONSchemaProps, items: &[Value], path: &str, out: &mut Vec<Violation>) {
    let by_keys = match schema.x_kubernetes_list_type.as_deref() {
        Some("map") => true,
        Some("set") => false,
        _ => return,
    };
    let identity = |item: &Value| match by_keys {
        true => {
            let keys = schema.x_kubernetes_list_map_keys.iter().flatten();
            let fields = keys.map(|k| (k.clone(), item.get(k).cloned().unwrap_or(Value::Null)));
            Value::Object(fields.collect())
        }
        false => item.clone(),
    };
    let mut seen: Vec<Value> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let id = identity(item);
        if seen.contains(&id) {
            out.push(violation(
                &format!("{path}[{i}]"),
                format!("Duplicate value: {id}"),
            ));
        }
        seen.push(id);
    }
}

fn check_enum(schema: &JSONSchemaProps, value: &Value, path: &str, out: &mut Vec<Violation>) {
    let Some(allowed) = &schema.enum_ else {
        return;
    };
    if allowed.iter().any(|a| a.0 == *value) {
        return;
    }
    let supported: Vec<String> = allowed.iter().map(|a| a.0.to_string()).collect();
    out.push(violation(
        path,
        format!(
            "Unsupported value: {value}: supported values: {}",
            supported.join(", ")
        ),
    ));
}

fn check_number(schema: &JSONSchemaProps, n: f64, path: &str, out: &mut Vec<Violation>) {
    if let Some(min) = schema.minimum {
        let exclusive = schema.exclusive_minimum == Some(true);
        if n < min || (exclusive && n == min) {
            out.push(violation(
                path,
                format!(
                    "Invalid value: {n}: {path} in body should be greater than or equal to {min}"
                ),
            ));
        }
    }
    if let Some(max) = schema.maximum {
        let exclusive = schema.exclusive_maximum == Some(true);
        if n > max || (exclusive && n == max) {
            out.push(violation(
                path,
                format!("Invalid value: {n}: {path} in body should be less than or equal to {max}"),
            ));
        }
    }
}

/// The direct sub-schemas of `schema`.
fn children(schema: &JSONSchemaProps) -> Vec<&JSONSchemaProps> {
    let mut found: Vec<&JSONSchemaProps> =
        schema.properties.iter().flat_map(|p| p.values()).collect();
    if let Some(JSONSchemaPropsOrArray::Schema(item)) = &schema.items {
        found.push(item);
    }
    if let Some(JSONSchemaPropsOrBool::Schema(additional)) = &schema.additional_properties {
        found.push(additional);
    }
    found
}

fn violation(path: &str, message: String) -> Violation {
    Violation {
        path: path.into(),
        message,
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.into()
    } else {
        format!("{path}.{key}")
    }
}

/// Whether `value` is of the OpenAPI `type` `expected`; `None` for a type name OpenAPI does not
/// have. The contract tests check the management API's schemas with it too.
pub fn type_matches(expected: &str, value: &Value) -> Option<bool> {
    Some(match expected {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        // A whole number written with a fraction (`20.0`) is an integer, as JSON Schema and the
        // apiserver (which stores it as `20`) read it.
        "integer" => {
            value.is_i64()
                || value.is_u64()
                || value
                    .as_f64()
                    .is_some_and(|f| f.is_finite() && f.fract() == 0.0)
        }
        "number" => value.is_number(),
        _ => return None,
    })
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
