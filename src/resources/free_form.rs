//! Bounds on the free-form fields (`x-kubernetes-preserve-unknown-fields`: `spec.config`, guardrail
//! `parameters`, ApiKey `usageLimits` and `defaults.metadata`, …): at most [`MAX_DEPTH`] levels of
//! nested objects and arrays and [`MAX_VALUES`] values in all; and no credential key in plain
//! text where a kind's schema declares them ([`credential_levels`]).
//!
//! Why: the apiserver keeps JSON nested up to 10,000 levels, and a decoder that stops at 128
//! (serde_json's, which kube-client uses) failed a whole list over one such object; see
//! [`super::readable`] for how the operator survives objects already stored. No real document
//! comes near these bounds: the API's own documents nest fewer than 10 levels, and the largest
//! routing document we know of (100 targets of 200 parameters) holds about 20,300 values.
//!
//! Where: a CRD schema cannot bound the depth of a free-form field (its CEL rules see such a
//! field as an object without fields), so each kind that has one gets a
//! ValidatingAdmissionPolicy, generated here from the same CRD schema, whose CEL walks the
//! field's values; it ships with the CRDs (`crds/free-form-limits.yaml`). `aigw validate` checks
//! the same fields against the same bounds ([`check`]), and the CRD field descriptions state
//! them ([`describe`]).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use serde_json::{Value, json};

/// The most levels of objects and arrays a free-form field may nest, counting the field itself.
pub const MAX_DEPTH: usize = 32;

/// The most values (objects, arrays, strings, numbers, booleans, nulls, each counted once) a
/// free-form field may hold, counting the field itself. Also keeps the admission policy's CEL
/// within the apiserver's cost budget (it ran out at about 60,000 values).
pub const MAX_VALUES: usize = 25_000;

/// What every free-form field's description says of the bounds; `repeated` for a field of
/// each entry of a list or map, whose entries share the values bound.
pub fn limits_sentence(repeated: bool) -> String {
    let all = if repeated {
        "in all, every entry's together"
    } else {
        "in all"
    };
    format!(
        "Free-form, within bounds no real document reaches: at most {MAX_DEPTH} levels of nested objects and arrays (counting this field) and {MAX_VALUES} values {all}; more is refused at admission (the ValidatingAdmissionPolicy in crds/free-form-limits.yaml) and by `aigw validate`."
    )
}

/// What is wrong with a field deeper than [`MAX_DEPTH`] (admission and `aigw validate` say the
/// same).
pub fn too_deep() -> String {
    format!(
        "nested deeper than {MAX_DEPTH} levels of objects and arrays (a free-form field's bound; see `kubectl explain`)"
    )
}

/// What is wrong with a field of more than [`MAX_VALUES`] values (for a field of each entry of
/// a list or map, `repeated`: all entries together).
pub fn too_large(repeated: bool) -> String {
    let together = if repeated {
        ", every entry's together"
    } else {
        ""
    };
    format!(
        "more than {MAX_VALUES} values{together} (a free-form field's bound; see `kubectl explain`)"
    )
}

/// One step from a parent schema to a child.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    Field(String),
    /// Every item of an array.
    Items,
    /// Every value of a map (`additionalProperties`).
    Values,
}

/// A free-form field, by its steps from the object root (e.g. `spec`, `checks`, items,
/// `parameters`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    steps: Vec<Step>,
}

impl Field {
    /// A field of each entry of a list or map (`spec.checks[].parameters`): its entries share
    /// the values bound, since the admission policy counts them in one expression, whose cost
    /// the apiserver limits (two checks of 13,000 values each went past it).
    fn repeated(&self) -> bool {
        self.steps
            .iter()
            .any(|s| matches!(s, Step::Items | Step::Values))
    }

    /// `spec.checks[].parameters`, `spec.config`.
    pub fn display(&self) -> String {
        let mut out = String::new();
        for step in &self.steps {
            match step {
                Step::Field(name) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(name);
                }
                Step::Items => out.push_str("[]"),
                Step::Values => out.push_str("[*]"),
            }
        }
        out
    }
}

/// The outermost free-form fields under `spec` of a kind's schema (a free-form field's own
/// declared children are within its bounds already).
pub fn fields(root: &JSONSchemaProps) -> Vec<Field> {
    let free_form =
        |schema: &JSONSchemaProps| schema.x_kubernetes_preserve_unknown_fields == Some(true);
    under_spec(root, &free_form, false)
}

/// The schemas under `spec` of `root` that `found` picks, by their steps; below one picked only
/// when `deeper`.
fn under_spec(
    root: &JSONSchemaProps,
    found: &dyn Fn(&JSONSchemaProps) -> bool,
    deeper: bool,
) -> Vec<Field> {
    fn walk(
        schema: &JSONSchemaProps,
        found: &dyn Fn(&JSONSchemaProps) -> bool,
        deeper: bool,
        steps: &mut Vec<Step>,
        out: &mut Vec<Field>,
    ) {
        if found(schema) {
            out.push(Field {
                steps: steps.clone(),
            });
            if !deeper {
                return;
            }
        }
        for (name, child) in schema.properties.iter().flatten() {
            steps.push(Step::Field(name.clone()));
            walk(child, found, deeper, steps, out);
            steps.pop();
        }
        if let Some(JSONSchemaPropsOrArray::Schema(items)) = &schema.items {
            steps.push(Step::Items);
            walk(items, found, deeper, steps, out);
            steps.pop();
        }
        if let Some(JSONSchemaPropsOrBool::Schema(values)) = &schema.additional_properties {
            steps.push(Step::Values);
            walk(values, found, deeper, steps, out);
            steps.pop();
        }
    }
    let mut out = Vec::new();
    if let Some(spec) = root.properties.as_ref().and_then(|p| p.get("spec")) {
        walk(
            spec,
            found,
            deeper,
            &mut vec![Step::Field("spec".into())],
            &mut out,
        );
    }
    out
}

fn schema_of(crd: &mut CustomResourceDefinition) -> Option<&mut JSONSchemaProps> {
    crd.spec
        .versions
        .first_mut()?
        .schema
        .as_mut()?
        .open_api_v3_schema
        .as_mut()
}

/// Appends the bounds to the description of every free-form field of `crd` (what `kubectl
/// explain` shows).
pub fn describe(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    let Some(root) = schema_of(&mut crd) else {
        return crd;
    };
    for field in fields(root) {
        let mut schema = &mut *root;
        for step in &field.steps {
            let next = match step {
                Step::Field(name) => schema.properties.as_mut().and_then(|p| p.get_mut(name)),
                Step::Items => match schema.items.as_mut() {
                    Some(JSONSchemaPropsOrArray::Schema(items)) => Some(&mut **items),
                    _ => None,
                },
                Step::Values => match schema.additional_properties.as_mut() {
                    Some(JSONSchemaPropsOrBool::Schema(values)) => Some(&mut **values),
                    _ => None,
                },
            };
            let Some(next) = next else { break };
            schema = next;
        }
        let sentence = limits_sentence(field.repeated());
        schema.description = Some(match schema.description.take() {
            Some(text) if !text.is_empty() => format!("{text}\n\n{sentence}"),
            _ => sentence,
        });
    }
    crd
}

/// CEL: the values `value` holds (a map's values, a list's items) as a list. Written with the
/// one-variable `map` macro: the two-variable comprehensions (`all(k, v, …)`, `transformList`)
/// compile in a ValidatingAdmissionPolicy only from Kubernetes 1.33 (new expressions compile at
/// the version before the apiserver's), and the chart supports 1.30.
fn children(value: &str, levels: usize) -> String {
    format!("(type({value}) == map ? {value}.map(k{levels}, {value}[k{levels}]) : {value})")
}

/// CEL: true when `value` nests at most `levels` levels of objects and arrays. Each level
/// names its own variable, so the expression grows linearly with `levels`.
fn depth_rule(value: &str, levels: usize) -> String {
    let scalar = format!("type({value}) != map && type({value}) != list");
    if levels == 0 {
        return scalar;
    }
    let child = format!("v{levels}");
    format!(
        "{scalar} || {}.all({child}, {})",
        children(value, levels),
        depth_rule(&child, levels - 1)
    )
}

/// CEL: how many values `value` holds, itself included, counted `levels` levels deep (the depth
/// rule refuses anything deeper).
fn count_expression(value: &str, levels: usize) -> String {
    if levels == 0 {
        return "1".into();
    }
    let child = format!("v{levels}");
    format!(
        "(type({value}) != map && type({value}) != list ? 1 : 1 + {}.map({child}, {}).sum())",
        children(value, levels),
        count_expression(&child, levels - 1)
    )
}

/// CEL: how many values the field's steps reach from `value` hold in all (0 where the field is
/// absent): every entry's together, in one expression.
fn total_over_field(steps: &[Step], value: &str, index: usize) -> String {
    match steps.split_first() {
        None => count_expression(value, MAX_DEPTH),
        Some((Step::Field(name), rest)) => {
            let child = format!("{value}.{name}");
            format!(
                "(has({child}) ? {} : 0)",
                total_over_field(rest, &child, index)
            )
        }
        Some((Step::Items, rest)) => {
            let item = format!("i{index}");
            format!(
                "{value}.map({item}, {}).sum()",
                total_over_field(rest, &item, index + 1)
            )
        }
        Some((Step::Values, rest)) => {
            let key = format!("m{index}");
            let child = format!("{value}[{key}]");
            format!(
                "{value}.map({key}, {}).sum()",
                total_over_field(rest, &child, index + 1)
            )
        }
    }
}

/// CEL: `check` holds for every value the field's steps reach from `object`.
fn over_field(steps: &[Step], value: &str, index: usize, check: &dyn Fn(&str) -> String) -> String {
    match steps.split_first() {
        None => check(value),
        Some((Step::Field(name), rest)) => {
            let child = format!("{value}.{name}");
            format!(
                "!has({child}) || {}",
                over_field(rest, &child, index, check)
            )
        }
        Some((Step::Items, rest)) => {
            let item = format!("i{index}");
            format!(
                "{value}.all({item}, {})",
                over_field(rest, &item, index + 1, check)
            )
        }
        Some((Step::Values, rest)) => {
            let key = format!("m{index}");
            let child = format!("{value}[{key}]");
            format!(
                "{value}.all({key}, {})",
                over_field(rest, &child, index + 1, check)
            )
        }
    }
}

/// The objects of a kind's schema that declare every credential key ([`CREDENTIAL_KEYS`]) as a
/// property (`refusing_credentials` in `resources::common`): `spec.config` and each nested
/// level of its `targets`, an Integration's `spec.configurations`. The admission policy refuses
/// those keys in plain text there (`credential_refusal`).
///
/// [`CREDENTIAL_KEYS`]: crate::api::secret_fields::CREDENTIAL_KEYS
pub fn credential_levels(root: &JSONSchemaProps) -> Vec<Field> {
    use crate::api::secret_fields::CREDENTIAL_KEYS;
    let declares_every_key = |schema: &JSONSchemaProps| {
        let declared = |key: &&str| {
            schema
                .properties
                .as_ref()
                .is_some_and(|p| p.contains_key(*key))
        };
        CREDENTIAL_KEYS.iter().all(declared)
    };
    under_spec(root, &declares_every_key, true)
}

/// The policy's variable holding [`CREDENTIAL_KEYS`] as a CEL list.
///
/// [`CREDENTIAL_KEYS`]: crate::api::secret_fields::CREDENTIAL_KEYS
fn credential_keys_variable() -> Value {
    use crate::api::secret_fields::CREDENTIAL_KEYS;
    let keys: Vec<String> = CREDENTIAL_KEYS.iter().map(|k| format!("'{k}'")).collect();
    json!({"name": "credentialKeys", "expression": format!("[{}]", keys.join(", "))})
}

/// What a refusal of a credential says to do instead.
const INSTEAD: &str = "keep it in a Secret and set it with spec.secretRefs (path: its JSON Pointer, secretKeyRef: {name, key})";

/// The validation refusing every credential key at `level` (each object it reaches) in plain
/// text; its message names the level and the keys written, never a value. A key is tested on
/// the object's own keys (`exists` over a map), so an object of a few keys costs a few tests.
fn credential_refusal(level: &Field) -> Value {
    let name = level.display();
    let absent = over_field(&level.steps, "object", 0, &|v| {
        format!("!{v}.exists(k, k in variables.credentialKeys)")
    });
    let nowhere = over_field(&level.steps, "object", 0, &|v| format!("!(c in {v})"));
    json!({
        "expression": absent,
        "messageExpression": format!(
            "'{name}: ' + variables.credentialKeys.filter(c, !({nowhere})).join(', ') + ' must not be written in plain text: {INSTEAD}'"
        ),
        "message": format!("{name}: a credential key must not be written in plain text: {INSTEAD}"),
        "reason": "Invalid",
    })
}

/// The rules of the kind `kind` that read the object's namespace or name, which a CRD's CEL
/// cannot see below the root: a resource's promotion does not follow itself, a Guardrail names
/// McpServers of its own namespace.
fn namespace_rules(kind: &str) -> Vec<Value> {
    let mut rules = Vec::new();
    // A resource that follows itself would wait for its own proof forever.
    let same_name = "a.name == object.metadata.name";
    let itself = match kind {
        "Config" | "Guardrail" => Some(format!(
            "{same_name} && (!has(a.namespace) || a.namespace == null || a.namespace == object.metadata.namespace)"
        )),
        "ClusterGuardrail" => Some(same_name.to_string()),
        _ => None,
    };
    if let Some(itself) = itself {
        rules.push(json!({
            "expression": format!("!has(object.spec.promotion) || object.spec.promotion == null || !object.spec.promotion.after.exists(a, {itself})"),
            "message": format!("spec.promotion.after names this {kind} itself: a resource follows others"),
            "reason": "Invalid",
        }));
    }
    rules.extend(match kind {
        "Guardrail" => vec![json!({
            // A null (server-side apply sends one for an empty field) is absent.
            "expression": "!has(object.spec.mcpServers) || object.spec.mcpServers == null || object.spec.mcpServers.all(s, !has(s.mcpServerRef) || s.mcpServerRef == null || !has(s.mcpServerRef.namespace) || s.mcpServerRef.namespace == null || s.mcpServerRef.namespace == object.metadata.namespace)",
            "message": "spec.mcpServers[].mcpServerRef.namespace: a Guardrail names McpServers of its own namespace (leave namespace out); a ClusterGuardrail names those of any namespace",
            "reason": "Invalid",
        })],
        _ => Vec::new(),
    });
    rules
}

/// The name of the admission policy (and its binding) of the kind `plural`.
pub fn policy_name(crd: &CustomResourceDefinition) -> String {
    format!("aigw-free-form-limits.{}", crd.spec.names.plural)
}

/// The ValidatingAdmissionPolicy and its binding that bound the free-form fields of `crd`,
/// refuse credentials written in plain text in them ([`credential_levels`]) and hold the rules
/// a CRD's CEL cannot (`namespace_rules`), or `None` for a kind with none of
/// these. It runs when the spec is written (`spec-written`), not on a metadata or status write.
pub fn admission_policy(crd: &CustomResourceDefinition) -> Option<[Value; 2]> {
    let root = crd
        .spec
        .versions
        .first()?
        .schema
        .as_ref()?
        .open_api_v3_schema
        .as_ref()?;
    let fields = fields(root);
    let credentials = credential_levels(root);
    let namespaced = namespace_rules(&crd.spec.names.kind);
    if fields.is_empty() && credentials.is_empty() && namespaced.is_empty() {
        return None;
    }
    let mut validations = Vec::new();
    for field in &fields {
        let name = field.display();
        let steps = &field.steps;
        validations.push(json!({
            "expression": over_field(steps, "object", 0, &|v| depth_rule(v, MAX_DEPTH)),
            "message": format!("{name}: {}", too_deep()),
            "reason": "Invalid",
        }));
        validations.push(json!({
            "expression": format!("{} <= {MAX_VALUES}", total_over_field(steps, "object", 0)),
            "message": format!("{name}: {}", too_large(field.repeated())),
            "reason": "Invalid",
        }));
    }
    validations.extend(credentials.iter().map(credential_refusal));
    validations.extend(namespaced);
    let name = policy_name(crd);
    let mut policy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "aigw"}},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [crd.spec.group],
                "apiVersions": ["*"],
                "operations": ["CREATE", "UPDATE"],
                "resources": [crd.spec.names.plural],
            }]},
            // An update that leaves the spec as it was (a finalizer removed, a label, an
            // annotation) passes, so an object stored before these bounds can still be
            // cleaned up.
            "matchConditions": [{
                "name": "spec-written",
                "expression": "oldObject == null || !has(oldObject.spec) || !has(object.spec) || oldObject.spec != object.spec",
            }],
            "validations": validations,
        },
    });
    if !credentials.is_empty() {
        policy["spec"]["variables"] = json!([credential_keys_variable()]);
    }
    let binding = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "aigw"}},
        "spec": {"policyName": name, "validationActions": ["Deny"]},
    });
    Some([policy, binding])
}

/// How deep `value` nests objects and arrays (0 for a scalar) and how many values it holds,
/// itself included; measured with a loop, so any depth is measured without recursion.
pub fn measure(value: &Value) -> (usize, usize) {
    let (mut deepest, mut count) = (0, 0);
    let mut pending = vec![(value, 0usize)];
    while let Some((value, level)) = pending.pop() {
        count += 1;
        match value {
            Value::Object(map) => {
                deepest = deepest.max(level + 1);
                pending.extend(map.values().map(|v| (v, level + 1)));
            }
            Value::Array(items) => {
                deepest = deepest.max(level + 1);
                pending.extend(items.iter().map(|v| (v, level + 1)));
            }
            _ => {}
        }
    }
    (deepest, count)
}

/// Each free-form field of `document` (a manifest of the kind whose schema is `root`) over its
/// bounds: `(path, message)`, the path with its indexes, e.g. `spec.checks[1].parameters`.
pub fn check(root: &JSONSchemaProps, document: &Value) -> Vec<(String, String)> {
    fn reach<'a>(
        steps: &[Step],
        value: &'a Value,
        path: String,
        out: &mut Vec<(String, &'a Value)>,
    ) {
        match steps.split_first() {
            None => out.push((path, value)),
            Some((Step::Field(name), rest)) => {
                if let Some(child) = value.get(name) {
                    let path = if path.is_empty() {
                        name.clone()
                    } else {
                        format!("{path}.{name}")
                    };
                    reach(rest, child, path, out);
                }
            }
            Some((Step::Items, rest)) => {
                for (i, item) in value.as_array().into_iter().flatten().enumerate() {
                    reach(rest, item, format!("{path}[{i}]"), out);
                }
            }
            Some((Step::Values, rest)) => {
                for (key, child) in value.as_object().into_iter().flatten() {
                    reach(rest, child, format!("{path}[{key}]"), out);
                }
            }
        }
    }
    let mut out = Vec::new();
    for field in fields(root) {
        let mut reached = Vec::new();
        reach(&field.steps, document, String::new(), &mut reached);
        let mut total = 0;
        for (path, value) in &reached {
            let (depth, values) = measure(value);
            if depth > MAX_DEPTH {
                out.push((path.clone(), too_deep()));
            }
            if values > MAX_VALUES && !field.repeated() {
                out.push((path.clone(), too_large(false)));
            }
            total += values;
        }
        // Every entry's together, as the admission policy counts them.
        if total > MAX_VALUES && field.repeated() {
            out.push((field.display(), too_large(true)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema_of_kind(kind: &str) -> JSONSchemaProps {
        let (_, crd) = crate::resources::crds()
            .into_iter()
            .find(|(_, crd)| crd.spec.names.kind == kind)
            .unwrap();
        crd.spec.versions[0]
            .schema
            .clone()
            .unwrap()
            .open_api_v3_schema
            .unwrap()
    }

    #[test]
    fn the_free_form_fields_of_each_kind_are_found_in_its_schema() {
        let names = |kind: &str| -> Vec<String> {
            fields(&schema_of_kind(kind))
                .iter()
                .map(Field::display)
                .collect()
        };
        assert_eq!(names("Config"), ["spec.config"]);
        let guardrail = names("Guardrail");
        assert!(
            guardrail.contains(&"spec.checks[].parameters".to_string()),
            "{guardrail:?}"
        );
        let api_key = names("ApiKey");
        assert!(
            api_key.iter().any(|f| f.contains("usageLimits")),
            "{api_key:?}"
        );
        assert!(
            api_key.iter().any(|f| f.contains("metadata")),
            "{api_key:?}"
        );
    }

    /// A field of each entry of a list (a guardrail check's `parameters`) is bounded in all, the
    /// entries together, as the admission policy counts them in one expression.
    #[test]
    fn the_entries_of_a_list_share_the_values_bound() {
        let parameters = |values: usize| {
            let map: serde_json::Map<String, Value> =
                (1..values).map(|i| (format!("k{i}"), json!({}))).collect();
            json!({"id": "default.regexMatch", "parameters": map})
        };
        let guardrail =
            |each: usize| json!({"spec": {"checks": [parameters(each), parameters(each)]}});
        let root = schema_of_kind("Guardrail");
        assert_eq!(check(&root, &guardrail(12_500)), []);
        assert_eq!(
            check(&root, &guardrail(12_501)),
            [("spec.checks[].parameters".to_string(), too_large(true))]
        );
        let config = |values: usize| {
            let list: Vec<Value> = (2..values).map(|i| json!(i)).collect();
            json!({"spec": {"config": {"list": list}}})
        };
        assert_eq!(check(&schema_of_kind("Config"), &config(MAX_VALUES)), []);
        assert_eq!(
            check(&schema_of_kind("Config"), &config(MAX_VALUES + 1)),
            [("spec.config".to_string(), too_large(false))]
        );
    }

    #[test]
    fn measure_counts_levels_and_values() {
        assert_eq!(measure(&json!(1)), (0, 1));
        assert_eq!(measure(&json!({})), (1, 1));
        assert_eq!(measure(&json!({"a": [1, {"b": null}]})), (3, 5));
    }

    #[test]
    fn the_depth_rule_is_linear_in_the_depth() {
        let rule = depth_rule("object.spec.config", MAX_DEPTH);
        assert!(rule.len() < 6_000, "{}", rule.len());
        assert!(
            rule.contains(
                "(type(v2) == map ? v2.map(k1, v2[k1]) : v2).all(v1, type(v1) != map && type(v1) != list)"
            ),
            "{rule}"
        );
    }

    /// Credentials are refused where a kind declares them, by the admission policy (which runs
    /// when the spec is written), and by no CRD rule (which the apiserver would run on every
    /// metadata and status write too).
    #[test]
    fn credentials_are_refused_by_the_policies_where_the_kinds_declare_them() {
        let levels = |kind: &str| -> Vec<String> {
            credential_levels(&schema_of_kind(kind))
                .iter()
                .map(Field::display)
                .collect()
        };
        assert_eq!(
            levels("Config"),
            [
                "spec.config",
                "spec.config.targets[]",
                "spec.config.targets[].targets[]",
                "spec.config.targets[].targets[].targets[]",
            ]
        );
        assert_eq!(levels("Integration"), ["spec.configurations"]);
        for (_, crd) in crate::resources::crds() {
            let root = crd.spec.versions[0].schema.clone().unwrap();
            let text = serde_json::to_string(&root).unwrap();
            assert!(
                !text.contains("!has(self.api_key)"),
                "{}",
                crd.spec.names.kind
            );
            let policy = admission_policy(&crd);
            let kind = &crd.spec.names.kind;
            if levels(kind).is_empty() {
                continue;
            }
            let [policy, _] = policy.expect(kind);
            let refusals = policy["spec"]["validations"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|v| v["expression"].as_str().unwrap().contains("credentialKeys"))
                .count();
            assert_eq!(refusals, levels(kind).len(), "{kind}");
            let keys = policy["spec"]["variables"][0]["expression"]
                .as_str()
                .unwrap();
            for key in crate::api::secret_fields::CREDENTIAL_KEYS {
                assert!(keys.contains(&format!("'{key}'")), "{kind}: {key}");
            }
        }
    }

    /// The policies compile where the chart installs (Kubernetes 1.30): no two-variable
    /// comprehension (`all(k, v, …)`, `transformList`, …: 1.33 for a new expression).
    #[test]
    fn the_policies_use_no_cel_newer_than_kubernetes_1_30() {
        let text = crate::resources::admission_policies_yaml().unwrap();
        let two_variables =
            regex::Regex::new(r"\.(all|exists|exists_one|map|filter)\(\s*\w+\s*,\s*\w+\s*,")
                .unwrap();
        for (line, expression) in text.lines().enumerate() {
            // cel-go's list extension (`sort()`, `distinct()`, `lists.range()`, …) is served
            // from Kubernetes 1.34, for a new expression from 1.35.
            for newer in [
                "transformList",
                "transformMap",
                "transformMapEntry",
                ".sort()",
                ".sortBy(",
                ".distinct()",
                "lists.range(",
                ".flatten(",
                ".slice(",
                ".reverse()",
                ".first()",
                ".last()",
            ] {
                assert!(!expression.contains(newer), "line {}: {newer}", line + 1);
            }
            let found = two_variables.find(expression).map(|m| m.as_str());
            assert_eq!(found, None, "line {}", line + 1);
        }
    }
}
