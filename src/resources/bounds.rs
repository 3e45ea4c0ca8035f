//! Bounds on every string, list and map of every kind's spec that declares none of its own: at
//! most [`MAX_STRING`] characters, [`MAX_ITEMS`] items and [`MAX_ENTRIES`] entries; and on every
//! integer narrower than 64 bits, the range of its Rust type.
//!
//! Why: an unbounded field lets one tenant store objects of the apiserver's whole request size
//! (1.5 MiB) in a field such as `spec.connectionRef.name`, which every watch of the kind, the
//! operator's caches and every list then carry; and the apiserver sizes its CEL cost estimates
//! by these bounds. No real spec comes near them. A field with a tighter bound of its own (a
//! name, a description) keeps it. The free-form fields (`x-kubernetes-preserve-unknown-fields`)
//! are bounded by [`super::free_form`]'s admission policy instead. `aigw validate` checks the
//! same bounds, read from the same schemas.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
    ValidationRule,
};

/// The most characters a spec string without a bound of its own may hold.
pub const MAX_STRING: i64 = 4096;

/// The most items a spec list without a bound of its own may hold.
pub const MAX_ITEMS: i64 = 1000;

/// The most entries a spec map (`additionalProperties`) without a bound of its own may hold.
pub const MAX_ENTRIES: i64 = 1000;

/// A DNS-1123 subdomain, as Kubernetes checks the name of a Secret or of an aigw resource.
pub const DNS_SUBDOMAIN: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// A DNS-1123 label, as Kubernetes checks the name of a namespace.
pub const DNS_LABEL: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";

/// A key of a Secret's data, as Kubernetes checks it.
pub const SECRET_KEY: &str = r"^[-._a-zA-Z0-9]+$";

/// The lists whose items name Kubernetes objects besides the `…Ref`/`…Refs` fields:
/// `promotion.after` (resources of the kind) and `rotation.restart` (workloads).
const REFERENCE_LISTS: [&str; 2] = ["after", "restart"];

/// `crd` with every string, list and map under `spec` that has no bound given one, and every
/// reference's `name`, `namespace` and Secret `key` checked as Kubernetes checks them
/// (`checked_references`).
pub fn bounded(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    for version in &mut crd.spec.versions {
        let spec = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
            .and_then(|root| root.properties.as_mut())
            .and_then(|properties| properties.get_mut("spec"));
        if let Some(spec) = spec {
            checked_references(spec);
            keyed_by_path(spec);
            selectors_bounded(spec);
            bound(spec);
        }
    }
    crd
}

/// Gives the `name`, `namespace` and `key` of every reference under `schema` (a `…Ref` object,
/// the items of a `…Refs` list or of [`REFERENCE_LISTS`]) the pattern and length Kubernetes
/// names and Secret keys have, so a name that could never be found (`My_Secret`) is refused at
/// admission naming its field rather than waited on as missing.
fn checked_references(schema: &mut JSONSchemaProps) {
    for (field, property) in schema.properties.iter_mut().flatten() {
        let listed = field.ends_with("Refs") || REFERENCE_LISTS.contains(&field.as_str());
        if field.ends_with("Ref") {
            name_checked(property);
        } else if listed && let Some(JSONSchemaPropsOrArray::Schema(items)) = &mut property.items {
            name_checked(items);
        }
        checked_references(property);
    }
    if let Some(JSONSchemaPropsOrArray::Schema(items)) = schema.items.as_mut() {
        checked_references(items);
    }
}

/// The lists that place values into a document by JSON Pointer (`secretRefs`, `resourceRefs`)
/// hold each `path` once: a list map keyed by it, so the apiserver refuses a second entry as a
/// `Duplicate value` (two values for one place would stall the object), and server-side apply
/// merges entries by path. Nor is one path inside another's value (`/targets/0` and
/// `/targets/0/api_key`: the first value is no object to hold the second).
fn keyed_by_path(schema: &mut JSONSchemaProps) {
    for (field, property) in schema.properties.iter_mut().flatten() {
        let has_path = |items: &JSONSchemaProps| {
            items
                .properties
                .as_ref()
                .is_some_and(|p| p.contains_key("path"))
        };
        if matches!(field.as_str(), "secretRefs" | "resourceRefs")
            && let Some(JSONSchemaPropsOrArray::Schema(items)) = &property.items
            && has_path(items)
        {
            property.x_kubernetes_list_type = Some("map".into());
            property.x_kubernetes_list_map_keys = Some(vec!["path".into()]);
            property
                .x_kubernetes_validations
                .get_or_insert_with(Vec::new)
                .push(ValidationRule {
                    rule: "self.all(a, !self.exists(b, b.path.startsWith(a.path + '/')))".into(),
                    message: Some(format!(
                        "spec.{field} names a path inside another's value (/targets/0 and \
                         /targets/0/api_key): the first value is no object to hold the second"
                    )),
                    ..Default::default()
                });
        }
        keyed_by_path(property);
    }
}

/// Every label selector (an object with `matchLabels` and `matchExpressions`) holds at most
/// [`SELECTOR_LABELS`] labels and [`SELECTOR_EXPRESSIONS`] expressions, with keys and label
/// values no longer than Kubernetes allows them: the bounds under which the apiserver takes
/// [`super::rules::label_selector`]'s check of every key and value within its cost budget.
fn selectors_bounded(schema: &mut JSONSchemaProps) {
    for property in schema.properties.iter_mut().flat_map(|p| p.values_mut()) {
        selectors_bounded(property);
    }
    if let Some(JSONSchemaPropsOrArray::Schema(items)) = schema.items.as_mut() {
        selectors_bounded(items);
    }
    let Some(properties) = schema.properties.as_mut() else {
        return;
    };
    if !(properties.contains_key("matchLabels") && properties.contains_key("matchExpressions")) {
        return;
    }
    if let Some(labels) = properties.get_mut("matchLabels") {
        labels.max_properties = Some(SELECTOR_LABELS);
        if let Some(JSONSchemaPropsOrBool::Schema(value)) = labels.additional_properties.as_mut() {
            value.max_length = Some(63);
        }
    }
    if let Some(expressions) = properties.get_mut("matchExpressions") {
        expressions.max_items = Some(SELECTOR_EXPRESSIONS);
        let mut expression = match expressions.items.as_mut() {
            Some(JSONSchemaPropsOrArray::Schema(item)) => item.properties.as_mut(),
            _ => None,
        };
        // Patterns, not CEL: they cost nothing against the rules' budget, and neither a label
        // key nor a value is a secret to keep out of the refusal.
        if let Some(key) = expression.as_deref_mut().and_then(|p| p.get_mut("key")) {
            // A DNS-subdomain prefix (253), the slash and a name (63).
            key.max_length = Some(317);
            key.pattern = Some(super::rules::LABEL_KEY.into());
        }
        let values = expression
            .and_then(|p| p.get_mut("values"))
            .and_then(|values| match values.items.as_mut() {
                Some(JSONSchemaPropsOrArray::Schema(value)) => Some(value),
                _ => None,
            });
        if let Some(value) = values {
            value.max_length = Some(63);
            value.pattern = Some(super::rules::LABEL_VALUE.into());
        }
    }
}

/// The most `matchLabels` a label selector holds.
const SELECTOR_LABELS: i64 = 32;

/// The most `matchExpressions` a label selector holds.
const SELECTOR_EXPRESSIONS: i64 = 16;

fn name_checked(reference: &mut JSONSchemaProps) {
    for (field, property) in reference.properties.iter_mut().flatten() {
        let (pattern, longest) = match field.as_str() {
            "name" => (DNS_SUBDOMAIN, 253),
            "namespace" => (DNS_LABEL, 63),
            "key" => (SECRET_KEY, 253),
            _ => continue,
        };
        if property.type_.as_deref() == Some("string") && property.pattern.is_none() {
            property.pattern = Some(pattern.to_string());
            let length = property.max_length.get_or_insert(longest);
            *length = (*length).min(longest);
        }
    }
}

fn bound(schema: &mut JSONSchemaProps) {
    if schema.x_kubernetes_preserve_unknown_fields == Some(true) {
        return;
    }
    match schema.type_.as_deref() {
        Some("string") if schema.enum_.is_none() => {
            schema.max_length.get_or_insert(MAX_STRING);
        }
        Some("array") => {
            schema.max_items.get_or_insert(MAX_ITEMS);
        }
        Some("object") if schema.additional_properties.is_some() => {
            schema.max_properties.get_or_insert(MAX_ENTRIES);
        }
        Some("integer") => {
            // What the Rust type holds: a larger number would be stored, then fail to decode,
            // and the watch would leave the object out (a Connection's `burst: 5000000000`).
            let (least, most) = match schema.format.as_deref() {
                Some("uint32") => (0.0, f64::from(u32::MAX)),
                Some("int32") => (f64::from(i32::MIN), f64::from(i32::MAX)),
                Some("uint16") => (0.0, f64::from(u16::MAX)),
                Some("uint8") => (0.0, f64::from(u8::MAX)),
                // The apiserver keeps integers as int64, which every other type here holds
                // (an unsigned one has its `minimum: 0`).
                _ => (f64::NEG_INFINITY, f64::INFINITY),
            };
            if least.is_finite() {
                schema.minimum.get_or_insert(least);
                schema.maximum.get_or_insert(most);
            }
        }
        _ => {}
    }
    for property in schema.properties.iter_mut().flat_map(|p| p.values_mut()) {
        bound(property);
    }
    if let Some(JSONSchemaPropsOrArray::Schema(items)) = schema.items.as_mut() {
        bound(items);
    }
    if let Some(JSONSchemaPropsOrBool::Schema(values)) = schema.additional_properties.as_mut() {
        bound(values);
    }
    for alternative in [&mut schema.one_of, &mut schema.any_of, &mut schema.all_of] {
        alternative.iter_mut().flatten().for_each(bound);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every string, list, map and narrow integer of every kind's spec has a bound, its own or
    /// ours; the free-form fields are left to the admission policy.
    #[test]
    fn every_spec_string_list_and_map_is_bounded() {
        fn unbounded(schema: &JSONSchemaProps, path: &str, out: &mut Vec<String>) {
            if schema.x_kubernetes_preserve_unknown_fields == Some(true) {
                return;
            }
            let missing = match schema.type_.as_deref() {
                Some("string") => schema.enum_.is_none() && schema.max_length.is_none(),
                Some("integer") => {
                    let narrow = matches!(
                        schema.format.as_deref(),
                        Some("uint32" | "int32" | "uint16" | "uint8")
                    );
                    narrow && (schema.maximum.is_none() || schema.minimum.is_none())
                }
                Some("array") => schema.max_items.is_none(),
                Some("object") => {
                    schema.additional_properties.is_some() && schema.max_properties.is_none()
                }
                _ => false,
            };
            if missing {
                out.push(path.to_string());
            }
            for (name, property) in schema.properties.iter().flatten() {
                unbounded(property, &format!("{path}.{name}"), out);
            }
            if let Some(JSONSchemaPropsOrArray::Schema(items)) = &schema.items {
                unbounded(items, &format!("{path}[]"), out);
            }
            if let Some(JSONSchemaPropsOrBool::Schema(values)) = &schema.additional_properties {
                unbounded(values, &format!("{path}{{}}"), out);
            }
        }
        let mut found = Vec::new();
        let mut strings = 0;
        for (_, crd) in crate::resources::crds() {
            let root = crd.spec.versions[0].schema.clone().unwrap();
            let spec = &root.open_api_v3_schema.unwrap().properties.unwrap()["spec"];
            let kind = &crd.spec.names.kind;
            unbounded(spec, &format!("{kind}.spec"), &mut found);
            strings += serde_json::to_string(spec)
                .unwrap()
                .matches("\"maxLength\"")
                .count();
        }
        assert!(found.is_empty(), "unbounded: {found:#?}");
        assert!(strings > 100, "{strings} bounded strings");
    }

    /// Every reference's name, namespace and Secret key is checked as Kubernetes checks it.
    #[test]
    fn every_reference_name_is_checked_as_kubernetes_names_are() {
        let checked = |kind: &str, path: &str| {
            let crd = crate::resources::crds()
                .into_iter()
                .map(|(_, crd)| crd)
                .find(|crd| crd.spec.names.kind == kind)
                .unwrap();
            let root = crd.spec.versions[0].schema.clone().unwrap();
            let mut schema = root.open_api_v3_schema.unwrap();
            for step in path.split('.') {
                schema = match step {
                    "[]" => match schema.items {
                        Some(JSONSchemaPropsOrArray::Schema(items)) => *items,
                        _ => panic!("{kind} {path}: no items"),
                    },
                    _ => schema.properties.unwrap().remove(step).unwrap(),
                };
            }
            (schema.pattern, schema.max_length)
        };
        let subdomain = (Some(DNS_SUBDOMAIN.to_string()), Some(253));
        let label = (Some(DNS_LABEL.to_string()), Some(63));
        let key = (Some(SECRET_KEY.to_string()), Some(253));
        for (kind, path, wanted) in [
            ("Config", "spec.connectionRef.name", &subdomain),
            ("Config", "spec.resourceRefs.[].name", &subdomain),
            ("Config", "spec.secretRefs.[].secretKeyRef.key", &key),
            ("Config", "spec.promotion.after.[].namespace", &label),
            ("Deployment", "spec.rotation.restart.[].name", &subdomain),
            ("ConfigRollout", "spec.stableConfigRef.namespace", &label),
            (
                "Connection",
                "spec.auth.bearerToken.secretRef.namespace",
                &label,
            ),
            (
                "McpIntegration",
                "spec.workspaces.[].workspaceRef.name",
                &subdomain,
            ),
        ] {
            assert_eq!(&checked(kind, path), wanted, "{kind} {path}");
        }
        // A display name is no Kubernetes name.
        assert_eq!(checked("Config", "spec.name").0, None);
    }
}
