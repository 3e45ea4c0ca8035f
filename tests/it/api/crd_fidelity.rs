//! The CRDs against the API's published request schemas: every field a kind's spec shares with
//! the request it is sent as has the JSON type the API gives it. A field typed otherwise (a
//! guardrail feedback's `metadata`, a string in the spec, was an object in the CRD) makes a
//! console-made object exported and re-applied differ from its own read, so aigw rewrites it
//! on adoption where the round trip must write nothing.
//!
//! The walk pairs a schema of a fixture in `tests/fixtures/openapi/` (a component, a component's
//! property path, or an operation's request body as `POST /path`) with a place in a kind's CRD,
//! and compares the fields both have, recursively: an API field `snake_case` is the CRD's field
//! of the same name or its `camelCase` form. Fields only one side has are not compared (the
//! CRDs leave out what aigw fills itself, such as `workspace_id` of an organisation object).

use std::collections::BTreeSet;

use serde_json::{Value, json};

/// Which schema is walked against which place of which CRD.
struct Walk {
    fixture: &'static str,
    schema: &'static str,
    kind: &'static str,
    at: &'static str,
}

/// The `spec` of `kind` against the request schema `schema` of `fixture`.
const fn walk(fixture: &'static str, schema: &'static str, kind: &'static str) -> Walk {
    Walk {
        fixture,
        schema,
        kind,
        at: "spec",
    }
}

/// The API's feedback of a guardrail action, and where the CRD has it under the spec.
const ON_SUCCESS: (&str, &str) = (
    "GuardrailActions/on_success/feedback",
    "spec/actions/onSuccess",
);
const ON_FAIL: (&str, &str) = ("GuardrailActions/on_fail/feedback", "spec/actions/onFail");

/// A guardrail action of `kind` against the API's feedback: the CRD flattens the API's
/// `{feedback: {…}}` into the action.
const fn feedback((schema, at): (&'static str, &'static str), kind: &'static str) -> Walk {
    Walk {
        fixture: SUBSET,
        schema,
        kind,
        at,
    }
}

const SUBSET: &str = "openapi-subset.yaml";
const USAGE_LIMITS: &str = "openapi-usage-limits.yaml";
const MORE_OBJECTS: &str = "openapi-more-objects.yaml";
const KIND_REQUESTS: &str = "openapi-kind-requests.yaml";
const REST_OBJECTS: &str = "openapi-rest-objects.yaml";

/// Every kind that writes a remote object, against the request that writes it. The guardrail
/// feedback is walked on its own: the CRD flattens the API's `{feedback: {…}}` into the action.
const WALKS: &[Walk] = &[
    walk(SUBSET, "POST /configs", "Config"),
    walk(SUBSET, "CreateRateLimitsPolicyRequest", "RateLimitsPolicy"),
    walk(SUBSET, "UpdateRateLimitsPolicyRequest", "RateLimitsPolicy"),
    walk(SUBSET, "POST /deployments", "Deployment"),
    walk(SUBSET, "CreateGuardrailRequest", "Guardrail"),
    walk(SUBSET, "CreateGuardrailRequest", "ClusterGuardrail"),
    feedback(ON_SUCCESS, "Guardrail"),
    feedback(ON_FAIL, "Guardrail"),
    feedback(ON_SUCCESS, "ClusterGuardrail"),
    feedback(ON_FAIL, "ClusterGuardrail"),
    walk(
        USAGE_LIMITS,
        "CreateUsageLimitsPolicyRequest",
        "UsageLimitsPolicy",
    ),
    walk(
        USAGE_LIMITS,
        "UpdateUsageLimitsPolicyRequest",
        "UsageLimitsPolicy",
    ),
    walk(
        MORE_OBJECTS,
        "CreateSecretReferenceRequest",
        "SecretReference",
    ),
    walk(
        MORE_OBJECTS,
        "UpdateSecretReferenceRequest",
        "SecretReference",
    ),
    walk(KIND_REQUESTS, "CreateIntegrationRequest", "Integration"),
    walk(KIND_REQUESTS, "POST /providers", "Provider"),
    walk(KIND_REQUESTS, "CreateApiKeyObject", "ApiKey"),
    walk(REST_OBJECTS, "ScmWorkspaceCreate", "Workspace"),
    walk(REST_OBJECTS, "ScmWorkspaceUpdate", "Workspace"),
];

/// Fields typed otherwise on purpose, each with its reason.
const DELIBERATE: &[(&str, &str)] = &[(
    "Integration spec/configurations/vertex_service_account_json",
    "a refusal placeholder: credentials are refused in `configurations` in plain text (the CRD \
     types each as a string only to name it in the refusal); the value comes from \
     `secretRefs`, a Secret key's text",
)];

fn fixture(name: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/openapi")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The CRD schema (`openAPIV3Schema`) of each kind, as `aigw crds` prints it.
fn crd_schema(kind: &str) -> Value {
    aigw::resources::crds()
        .into_iter()
        .find(|(_, crd)| crd.spec.names.kind == kind)
        .map(|(_, crd)| {
            let version = crd.spec.versions.into_iter().next().expect("a version");
            serde_json::to_value(version.schema.expect("a schema").open_api_v3_schema).unwrap()
        })
        .unwrap_or_else(|| panic!("no CRD of kind {kind}"))
}

struct Document {
    doc: Value,
}

impl Document {
    fn resolve<'a>(&'a self, schema: &'a Value) -> &'a Value {
        super::contract_openapi::resolve_ref(&self.doc, schema)
    }

    /// `POST /path` (that operation's request body), or `Component/property/…`.
    fn schema(&self, at: &str) -> &Value {
        if let Some(path) = at.strip_prefix("POST ") {
            let body = &self.doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]
                ["schema"];
            assert!(!body.is_null(), "POST {path} has a JSON request body");
            return self.resolve(body);
        }
        let mut parts = at.split('/');
        let name = parts.next().unwrap();
        let mut schema = self.resolve(&self.doc["components"]["schemas"][name]);
        assert!(!schema.is_null(), "no component {name}");
        for part in parts {
            schema = self.resolve(&schema["properties"][part]);
            assert!(!schema.is_null(), "no property {part} in {at}");
        }
        schema
    }

    /// The JSON types a value of `schema` may have (empty: any).
    fn types(&self, schema: &Value) -> BTreeSet<String> {
        let schema = self.resolve(schema);
        let mut types = BTreeSet::new();
        for key in ["oneOf", "anyOf", "allOf"] {
            for alternative in schema[key].as_array().into_iter().flatten() {
                types.extend(self.types(alternative));
            }
        }
        match &schema["type"] {
            Value::String(t) => {
                types.insert(t.clone());
            }
            Value::Array(ts) => types.extend(ts.iter().filter_map(Value::as_str).map(String::from)),
            _ if schema.get("properties").is_some() && types.is_empty() => {
                types.insert("object".into());
            }
            _ => {}
        }
        types
    }

    /// The properties of `schema`, its alternatives' included.
    fn properties(&self, schema: &Value) -> serde_json::Map<String, Value> {
        let schema = self.resolve(schema);
        let mut properties = serde_json::Map::new();
        for key in ["allOf", "oneOf", "anyOf"] {
            for alternative in schema[key].as_array().into_iter().flatten() {
                properties.extend(self.properties(alternative));
            }
        }
        if let Some(own) = schema["properties"].as_object() {
            properties.extend(own.clone());
        }
        properties
    }
}

/// The JSON types a value of a CRD `schema` may have; `any` for a free-form one.
fn crd_types(schema: &Value) -> BTreeSet<String> {
    if schema["x-kubernetes-int-or-string"] == json!(true) {
        return ["integer", "string"].map(String::from).into();
    }
    let mut types = BTreeSet::new();
    for key in ["anyOf", "oneOf"] {
        for alternative in schema[key].as_array().into_iter().flatten() {
            types.extend(crd_types(alternative));
        }
    }
    match schema["type"].as_str() {
        Some(t) => {
            types.insert(t.to_string());
        }
        None if types.is_empty() => {
            types.insert("any".into());
        }
        None => {}
    }
    types
}

fn compatible(api: &BTreeSet<String>, crd: &BTreeSet<String>) -> bool {
    let numeric = |types: &BTreeSet<String>| types.contains("number") || types.contains("integer");
    api.is_empty()
        || crd.contains("any")
        || api.intersection(crd).next().is_some()
        || (numeric(api) && numeric(crd))
}

fn camel(name: &str) -> String {
    let mut parts = name.split('_');
    let mut out = parts.next().unwrap_or_default().to_string();
    for part in parts {
        let mut chars = part.chars();
        if let Some(first) = chars.next() {
            out.extend(first.to_uppercase());
            out.push_str(chars.as_str());
        }
    }
    out
}

/// Each field both `api` and `crd` have whose types differ, as `path: …`, recursively.
fn compare(doc: &Document, api: &Value, crd: &Value, path: &str, found: &mut Vec<String>) {
    let crd_properties = crd["properties"].as_object();
    for (name, field) in doc.properties(api) {
        let Some((crd_name, crd_field)) = crd_properties.and_then(|p| {
            p.get_key_value(name.as_str())
                .or_else(|| p.get_key_value(camel(&name).as_str()))
        }) else {
            continue;
        };
        let at = format!("{path}/{crd_name}");
        let (api_types, crd_types) = (doc.types(&field), crd_types(crd_field));
        if !compatible(&api_types, &crd_types) {
            found.push(format!(
                "{at}: the API types it {api_types:?}, the CRD {crd_types:?}"
            ));
            continue;
        }
        if api_types.contains("object") && crd_field.get("properties").is_some() {
            compare(doc, &field, crd_field, &at, found);
        }
        if api_types.contains("array") && crd_types.contains("array") {
            let items = doc.resolve(&field)["items"].clone();
            if !items.is_null() && crd_field["items"].get("properties").is_some() {
                compare(doc, &items, &crd_field["items"], &format!("{at}[]"), found);
            }
        }
    }
}

fn crd_at<'a>(mut crd: &'a Value, at: &str) -> &'a Value {
    for part in at.split('/') {
        crd = &crd["properties"][part];
        assert!(!crd.is_null(), "the CRD has no {at}");
    }
    crd
}

/// Every walk's differences, as `Kind path: …`, less the deliberate ones.
fn differences() -> Vec<String> {
    let mut found = Vec::new();
    for w in WALKS {
        let doc = Document {
            doc: fixture(w.fixture),
        };
        let crd = crd_schema(w.kind);
        let mut here = Vec::new();
        compare(
            &doc,
            doc.schema(w.schema),
            crd_at(&crd, w.at),
            w.at,
            &mut here,
        );
        found.extend(here.into_iter().map(|d| format!("{} {d}", w.kind)));
    }
    found.retain(|d| !DELIBERATE.iter().any(|(what, _)| d.starts_with(what)));
    found
}

#[test]
fn every_crd_field_the_api_also_has_is_typed_as_the_api_types_it() {
    let found = differences();
    assert!(
        found.is_empty(),
        "CRD fields typed otherwise than the API's request schemas (fix the CRD type, or list \
         the field in DELIBERATE with its reason):\n{}",
        found.join("\n")
    );
    for (what, why) in DELIBERATE {
        assert!(!why.is_empty(), "{what} needs a reason");
    }
}

/// The walk finds what it is for: a CRD that types a feedback's `metadata` as an object
/// (as aigw's did) against the spec's string.
#[test]
fn the_walk_finds_a_field_typed_otherwise() {
    let doc = Document {
        doc: fixture(SUBSET),
    };
    let crd = json!({"properties": {
        "value": {"type": "number"}, "weight": {"type": "integer"},
        "metadata": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}});
    let mut found = Vec::new();
    let api = doc.schema("GuardrailActions/on_fail/feedback");
    compare(&doc, api, &crd, "spec/actions/onFail", &mut found);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("spec/actions/onFail/metadata: the API types it {\"string\"}"));
    // Nested objects and arrays are walked too.
    let crd = json!({"properties": {"checks": {"type": "array", "items": {"properties": {
        "is_enabled": {"type": "string"}, "id": {"type": "string"}}}}}});
    let mut found = Vec::new();
    compare(
        &doc,
        doc.schema("CreateGuardrailRequest"),
        &crd,
        "spec",
        &mut found,
    );
    assert_eq!(
        found,
        ["spec/checks[]/is_enabled: the API types it {\"boolean\"}, the CRD {\"string\"}"]
    );
}
