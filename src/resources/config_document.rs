//! A Config's routing document as the spec writes it, with each `spec.secretRefs` path marked:
//! what every check, diff and message works on. Secret values are filled in only by
//! [`MarkedDocument::filled`], for the request body, so nothing that describes the document
//! can quote one.

use std::collections::{BTreeMap, HashSet};

use serde_json::{Map, Value};

use super::config::{ConfigSecretRef, ConfigSpec};
use crate::api::secret_fields::credential_pointers;

/// Keys whose values name guardrails, at any level of `targets`.
const GUARDRAIL_KEYS: [&str; 4] = [
    "input_guardrails",
    "output_guardrails",
    "before_request_hooks",
    "after_request_hooks",
];

/// One `spec.secretRefs` entry: where its value goes and which Secret key holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretSlot {
    pub path: String,
    pub secret: String,
    pub key: String,
}

impl SecretSlot {
    /// What the document holds at the slot until the request body is built, e.g.
    /// `(secret db/password)`: it names the source, never the value.
    pub fn marker(&self) -> String {
        format!("(secret {}/{})", self.secret, self.key)
    }

    /// How messages speak of the slot's value.
    pub fn describe(&self) -> String {
        format!(
            "the value of secret {}/{} at {}",
            self.secret, self.key, self.path
        )
    }
}

/// A spec whose document takes values from Secrets through `spec.secretRefs` (a Config's
/// routing document, a Guardrail's checks): what [`MarkedDocument`] marks.
pub trait SecretDocument {
    /// The spec field the document is written in, for messages (`spec.config`).
    const FIELD: &'static str;
    /// The document as the API takes it, before any Secret value is filled in.
    fn document(&self) -> Map<String, Value>;
    /// Where the Secret values go (computed by a kind that gathers them from several fields).
    fn secret_refs(&self) -> std::borrow::Cow<'_, [ConfigSecretRef]>;
}

impl SecretDocument for ConfigSpec {
    const FIELD: &'static str = "spec.config";

    fn document(&self) -> Map<String, Value> {
        self.config.to_map()
    }

    fn secret_refs(&self) -> std::borrow::Cow<'_, [ConfigSecretRef]> {
        std::borrow::Cow::Borrowed(&self.secret_refs)
    }
}

/// The spec's document with a [`SecretSlot::marker`] at each `secretRefs` path.
#[derive(Debug, Clone)]
pub struct MarkedDocument {
    document: Map<String, Value>,
    slots: Vec<SecretSlot>,
}

impl MarkedDocument {
    /// Marks every `secretRefs` path of `spec`. Refuses credentials written in plain text (at
    /// any depth: admission only reaches the top levels), a path named twice, and a path that
    /// cannot be set. The messages are built from the spec alone, so they hold no Secret value.
    pub fn new<S: SecretDocument>(spec: &S) -> Result<Self, String> {
        let source = Value::Object(spec.document());
        let plaintext = credential_pointers(&source);
        if !plaintext.is_empty() {
            return Err(format!(
                "{} holds credentials in plain text at {}: keep them in a Secret and set them with spec.secretRefs",
                S::FIELD,
                plaintext.join(", ")
            ));
        }
        let mut seen = HashSet::new();
        let mut document = source;
        let mut slots = Vec::new();
        for reference in spec.secret_refs().iter() {
            if !seen.insert(reference.path.as_str()) {
                return Err(format!(
                    "spec.secretRefs names the path {} twice",
                    reference.path
                ));
            }
            let slot = SecretSlot {
                path: reference.path.clone(),
                secret: reference.secret_key_ref.name.clone(),
                key: reference.secret_key_ref.key.clone(),
            };
            set_new(&mut document, &slot.path, Value::String(slot.marker()))?;
            slots.push(slot);
        }
        let Value::Object(document) = document else {
            return Err(format!("{} is not an object", S::FIELD));
        };
        Ok(Self { document, slots })
    }

    /// The document with markers where the Secret values go.
    pub fn document(&self) -> &Map<String, Value> {
        &self.document
    }

    pub fn slots(&self) -> &[SecretSlot] {
        &self.slots
    }

    /// The slot at `path`, if a Secret fills it.
    pub fn slot(&self, path: &str) -> Option<&SecretSlot> {
        self.slots.iter().find(|s| s.path == path)
    }

    /// The request body's document: each slot's marker replaced by its value from `values`
    /// (by path). Every path was checked by [`MarkedDocument::new`], so each one is set.
    pub fn filled(&self, values: &BTreeMap<String, String>) -> Map<String, Value> {
        let mut filled = Value::Object(self.document.clone());
        for slot in &self.slots {
            if let (Some(target), Some(value)) =
                (filled.pointer_mut(&slot.path), values.get(&slot.path))
            {
                *target = Value::String(value.clone());
            }
        }
        match filled {
            Value::Object(map) => map,
            _ => self.document.clone(),
        }
    }

    /// Every guardrail the document names (see [`guardrail_references`]), each knowing whether
    /// a Secret supplies it. A guardrail list that is not a list, or an entry that is neither a
    /// name nor a hook object, is an error that names the value's type or its Secret.
    pub fn guardrail_references(&self) -> Result<Vec<GuardrailRef>, String> {
        let mut found = Vec::new();
        let mut wrong = Vec::new();
        collect(
            &Value::Object(self.document.clone()),
            "",
            &mut found,
            &mut wrong,
        );
        for reference in &mut found {
            reference.secret = self.slot(&reference.path).cloned();
        }
        if wrong.is_empty() {
            return Ok(found);
        }
        let described: Vec<String> = wrong
            .into_iter()
            .map(|(path, expected, found)| match self.slot(&path) {
                Some(slot) => format!("{path} must be {expected}, but it is {}", slot.describe()),
                None => format!("{path} must be {expected}, not {found}"),
            })
            .collect();
        Err(format!("spec.config: {}", described.join("; ")))
    }
}

/// A guardrail the document names, with the JSON Pointer where it does. `name` is the marker
/// when `secret` is set: compare the Secret's value, and say [`GuardrailRef::describe`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardrailRef {
    pub path: String,
    pub name: String,
    pub secret: Option<SecretSlot>,
}

impl GuardrailRef {
    /// `pg-x at /input_guardrails/0`, or for a Secret's value, its Secret and path only.
    pub fn describe(&self) -> String {
        match &self.secret {
            Some(slot) => slot.describe(),
            None => format!("{} at {}", self.name, self.path),
        }
    }
}

/// Every guardrail slug or id `document` names: strings in the guardrail lists and hooks, and
/// `id`s of hook objects that carry no inline `checks`, at the top level and in nested `targets`.
pub fn guardrail_references(document: &Value) -> Vec<GuardrailRef> {
    let mut found = Vec::new();
    collect(document, "", &mut found, &mut Vec::new());
    found
}

/// Fills `found`, and `wrong` with `(path, what it must be, what it is)` for values of the
/// wrong type.
fn collect(
    level: &Value,
    path: &str,
    found: &mut Vec<GuardrailRef>,
    wrong: &mut Vec<(String, &'static str, &'static str)>,
) {
    let Some(map) = level.as_object() else {
        return;
    };
    for key in GUARDRAIL_KEYS {
        let list_path = format!("{path}/{key}");
        let items = match map.get(key) {
            None | Some(Value::Null) => continue,
            Some(Value::Array(items)) => items,
            Some(other) => {
                wrong.push((list_path, "a list", type_name(other)));
                continue;
            }
        };
        for (n, item) in items.iter().enumerate() {
            let here = format!("{list_path}/{n}");
            match item {
                Value::String(name) => found.push(GuardrailRef {
                    path: here,
                    name: name.clone(),
                    secret: None,
                }),
                Value::Object(hook) if !hook.contains_key("checks") => match hook.get("id") {
                    Some(Value::String(id)) => found.push(GuardrailRef {
                        path: format!("{here}/id"),
                        name: id.clone(),
                        secret: None,
                    }),
                    None | Some(Value::Null) => {}
                    Some(other) => wrong.push((format!("{here}/id"), "a string", type_name(other))),
                },
                Value::Object(_) => {}
                other => wrong.push((here, "a guardrail name or object", type_name(other))),
            }
        }
    }
    if let Some(targets) = map.get("targets").and_then(Value::as_array) {
        for (n, target) in targets.iter().enumerate() {
            collect(target, &format!("{path}/targets/{n}"), found, wrong);
        }
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Sets `path` in `root` where nothing is written yet; missing parent objects are created, every
/// other step must be an object or an existing array index. The errors name the path only.
fn set_new(root: &mut Value, path: &str, value: Value) -> Result<(), String> {
    let invalid =
        |why: &str| format!("spec.secretRefs path {path} cannot be set in spec.config: {why}");
    let tokens: Vec<String> = path.split('/').skip(1).map(unescape).collect();
    let Some((last, parents)) = tokens.split_last() else {
        return Err(invalid("it is not a JSON Pointer to a field"));
    };
    let mut here = root;
    for token in parents {
        here = match here {
            Value::Object(map) => map
                .entry(token.clone())
                .or_insert_with(|| Value::Object(Map::new())),
            Value::Array(items) => array_index(token)
                .and_then(|n| items.get_mut(n))
                .ok_or_else(|| invalid(&format!("there is no array element {token}")))?,
            _ => {
                return Err(invalid(&format!(
                    "{token} is inside a value that is not an object"
                )));
            }
        };
    }
    let Value::Object(map) = here else {
        return Err(invalid("its parent is not an object"));
    };
    if map.contains_key(last) {
        return Err(invalid(
            "the field is already written in spec.config (or by another secretRefs entry); remove it there",
        ));
    }
    map.insert(last.clone(), value);
    Ok(())
}

/// An array index as JSON Pointer writes one (RFC 6901): digits, no leading zero. `01` is not
/// `1` to a pointer lookup, so a slot marked there would never be filled.
fn array_index(token: &str) -> Option<usize> {
    let canonical = token == "0" || (!token.starts_with('0') && !token.is_empty());
    canonical.then(|| token.parse::<usize>().ok()).flatten()
}

/// Sets `value` at `path` of `root` for a `spec.resourceRefs` entry: missing parents are created
/// (an array where the next token is an index), and the last token may name a new array element
/// at the end of its array. Nothing already written is overwritten.
pub fn set_reference(root: &mut Value, path: &str, value: Value) -> Result<(), String> {
    let invalid =
        |why: &str| format!("spec.resourceRefs path {path} cannot be set in spec.config: {why}");
    let tokens: Vec<String> = path.split('/').skip(1).map(unescape).collect();
    let Some((last, parents)) = tokens.split_last() else {
        return Err(invalid("it is not a JSON Pointer"));
    };
    let empty_for = |next: &str| match array_index(next) {
        Some(_) => Value::Array(Vec::new()),
        None => Value::Object(Map::new()),
    };
    let mut here = root;
    for (n, token) in parents.iter().enumerate() {
        let next = tokens[n + 1].as_str();
        here = match here {
            Value::Object(map) => map.entry(token.clone()).or_insert_with(|| empty_for(next)),
            Value::Array(items) => {
                let at = array_index(token)
                    .ok_or_else(|| invalid(&format!("{token} is not an array index")))?;
                if at == items.len() {
                    items.push(empty_for(next));
                }
                items
                    .get_mut(at)
                    .ok_or_else(|| invalid(&format!("there is no array element {token}")))?
            }
            _ => {
                return Err(invalid(&format!(
                    "{token} is inside a value that is neither an object nor a list"
                )));
            }
        };
    }
    match here {
        Value::Object(map) if !map.contains_key(last) => {
            map.insert(last.clone(), value);
            Ok(())
        }
        Value::Array(items) if array_index(last) == Some(items.len()) => {
            items.push(value);
            Ok(())
        }
        Value::Object(_) | Value::Array(_) => Err(invalid(
            "a value is already written there in spec.config; remove it there",
        )),
        _ => Err(invalid("its parent is neither an object nor a list")),
    }
}

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn references_fill_new_elements_and_never_overwrite() {
        let mut doc = json!({"targets": [{"provider": "@a"}]});
        set_reference(&mut doc, "/input_guardrails/0", json!("pg-1")).unwrap();
        set_reference(&mut doc, "/input_guardrails/1", json!("pg-2")).unwrap();
        set_reference(&mut doc, "/targets/0/output_guardrails/0", json!("pg-3")).unwrap();
        assert_eq!(
            doc,
            json!({"targets": [{"provider": "@a", "output_guardrails": ["pg-3"]}], "input_guardrails": ["pg-1", "pg-2"]})
        );
        assert!(set_reference(&mut doc, "/input_guardrails/0", json!("x")).is_err());
        assert!(set_reference(&mut doc, "/input_guardrails/5", json!("x")).is_err());
        assert!(set_reference(&mut doc, "/targets/01/x", json!("x")).is_err());
    }

    #[test]
    fn a_secret_path_with_a_leading_zero_index_is_refused() {
        let mut doc = json!({"targets": [{}, {}]});
        assert!(set_new(&mut doc, "/targets/01/api_key", json!("(secret s/k)")).is_err());
        assert!(set_new(&mut doc, "/targets/1/api_key", json!("(secret s/k)")).is_ok());
    }

    const VALUE: &str = "s3cr3t-value";

    fn spec(config: Value, refs: &[(&str, &str, &str)]) -> ConfigSpec {
        let refs: Vec<Value> = refs
            .iter()
            .map(|(path, name, key)| json!({"path": path, "secretKeyRef": {"name": name, "key": key}}))
            .collect();
        serde_json::from_value(json!({"name": "c", "config": config, "secretRefs": refs})).unwrap()
    }

    fn values(paths: &[&str]) -> BTreeMap<String, String> {
        paths
            .iter()
            .map(|p| (p.to_string(), VALUE.to_string()))
            .collect()
    }

    #[test]
    fn values_fill_their_paths_only_in_the_request_document() {
        let spec = spec(
            json!({"provider": "openai", "targets": [{"provider": "@a"}]}),
            &[
                ("/api_key", "keys", "openai"),
                ("/targets/0/api_key", "keys", "t"),
                ("/custom_headers/x-team~1key", "keys", "h"),
            ],
        );
        let marked = MarkedDocument::new(&spec).unwrap();
        assert_eq!(marked.document()["api_key"], "(secret keys/openai)");
        assert!(
            !Value::Object(marked.document().clone())
                .to_string()
                .contains(VALUE)
        );
        let filled = marked.filled(&values(&[
            "/api_key",
            "/targets/0/api_key",
            "/custom_headers/x-team~1key",
        ]));
        assert_eq!(filled["api_key"], VALUE);
        assert_eq!(filled["targets"][0]["api_key"], VALUE);
        assert_eq!(filled["custom_headers"]["x-team/key"], VALUE);
        assert_eq!(filled["provider"], "openai");
    }

    #[test]
    fn a_path_that_cannot_be_set_is_refused_by_its_path() {
        let config = json!({"targets": [{"provider": "@a"}], "retry": 3, "provider": "x"});
        for path in [
            "/provider",
            "/targets/4/api_key",
            "/retry/x",
            "/retry/x/y",
            "x",
        ] {
            let error = MarkedDocument::new(&spec(config.clone(), &[(path, "s", "k")]));
            assert!(error.unwrap_err().contains("spec.secretRefs"), "{path}");
        }
        let twice = spec(config, &[("/a", "s", "k"), ("/a", "s", "j")]);
        assert!(MarkedDocument::new(&twice).unwrap_err().contains("twice"));
    }

    #[test]
    fn plaintext_credentials_are_refused_at_any_depth_without_their_value() {
        let config = json!({"targets": [{"targets": [{"targets": [{"targets": [{"aws_session_token": "tok-hidden"}]}]}]}],
                            "virtual_key": "vk-ok", "api_key": null});
        let error = MarkedDocument::new(&spec(config, &[])).unwrap_err();
        assert!(error.contains("/targets/0/targets/0/targets/0/targets/0/aws_session_token"));
        assert!(error.contains("spec.secretRefs") && !error.contains("tok-hidden"));
        let vertex = json!({"targets": [{"vertex_service_account_json": "{}"}]});
        assert!(MarkedDocument::new(&spec(vertex, &[])).is_err());
    }

    #[test]
    fn guardrail_references_from_secrets_are_described_by_secret_and_path() {
        let spec = spec(
            json!({"before_request_hooks": [{}], "input_guardrails": ["pg-plain"]}),
            &[
                ("/before_request_hooks/0/id", "db", "password"),
                ("/output_guardrails", "db", "list"),
            ],
        );
        let marked = MarkedDocument::new(&spec).unwrap();
        let error = marked.guardrail_references().unwrap_err();
        assert!(
            error.contains("/output_guardrails must be a list, but it is the value of secret db/list at /output_guardrails"),
            "{error}"
        );
        let spec_ok = super::tests::spec(
            json!({"before_request_hooks": [{}], "input_guardrails": ["pg-plain"]}),
            &[("/before_request_hooks/0/id", "db", "password")],
        );
        let references = MarkedDocument::new(&spec_ok)
            .unwrap()
            .guardrail_references()
            .unwrap();
        let described: Vec<String> = references.iter().map(GuardrailRef::describe).collect();
        assert_eq!(
            described,
            vec![
                "pg-plain at /input_guardrails/0",
                "the value of secret db/password at /before_request_hooks/0/id",
            ]
        );
    }

    #[test]
    fn wrong_types_in_guardrail_lists_name_the_type_not_the_value() {
        let marked = MarkedDocument::new(&spec(
            json!({"input_guardrails": "pg-a", "before_request_hooks": [7, {"id": 3}]}),
            &[],
        ))
        .unwrap();
        let error = marked.guardrail_references().unwrap_err();
        assert!(
            error.contains("/input_guardrails must be a list, not a string"),
            "{error}"
        );
        assert!(
            error.contains(
                "/before_request_hooks/0 must be a guardrail name or object, not a number"
            )
        );
        assert!(error.contains("/before_request_hooks/1/id must be a string, not a number"));
        assert!(!error.contains("pg-a"));
    }

    #[test]
    fn references_are_found_in_lists_hooks_and_nested_targets() {
        let document = json!({
            "input_guardrails": ["pg-a", {"default.contains": {"words": ["x"]}}],
            "before_request_hooks": [{"id": "pg-b"}, {"id": "inline", "checks": [{"id": "default.regex"}]}],
            "targets": [{"provider": "@a", "output_guardrails": ["pg-c"],
                         "targets": [{"after_request_hooks": [{"id": "pg-d"}]}]}]
        });
        let found: Vec<(String, String)> = guardrail_references(&document)
            .into_iter()
            .map(|r| (r.name, r.path))
            .collect();
        let expected = [
            ("pg-a", "/input_guardrails/0"),
            ("pg-b", "/before_request_hooks/0/id"),
            ("pg-c", "/targets/0/output_guardrails/0"),
            ("pg-d", "/targets/0/targets/0/after_request_hooks/0/id"),
        ];
        let expected: Vec<(String, String)> = expected
            .iter()
            .map(|(n, p)| (n.to_string(), p.to_string()))
            .collect();
        assert_eq!(found, expected);
    }
}
