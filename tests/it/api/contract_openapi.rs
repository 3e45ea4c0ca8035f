//! Contract test: the emulator's responses against the published OpenAPI description, reduced to
//! the operations aigw calls (`tests/fixtures/openapi/openapi-subset.yaml`, and
//! `openapi-usage-limits.yaml` for usage-limits policies from the PANW spec,
//! `openapi-telemetry.yaml` for the telemetry reads, `openapi-rest-objects.yaml` for MCP
//! integrations and servers, SCM workspaces and IAM scopes, and `openapi-more-objects.yaml` for
//! secret references and guardrail ↔ MCP-server mappings; their README names
//! the upstream commits and how they were reduced). Kept in the repository so any clone can run
//! it.
//!
//! Every operation in the fixture is exercised here. Where
//! `shared/api/FACTS.md` records live behaviour that differs from the spec, the emulator follows
//! the live API and the test says so in `DEVIATIONS`, validating that response against the live
//! shape instead (a schema written below, each with its reason).
//!
//! The validator covers the JSON Schema subset the file uses: `$ref`, `allOf`, `anyOf`, `oneOf`,
//! `not`, `type`, OpenAPI 3.0 `nullable` (also beside a `$ref`), `enum`, `properties`,
//! `required`, `additionalProperties`, `items`, `minItems`, `maxItems`, `minLength`, `maxLength`,
//! `maxProperties`, `minimum`, `maximum`, `multipleOf` and the `uuid` / `date-time` formats.

use std::{collections::BTreeSet, path::PathBuf};

use crate::support::emu::Emu;
use aigw::resources::config_document::SecretDocument;
use aigw::resources::guardrail::GuardrailSpec;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// Live behaviour (FACTS.md) the emulator follows where the spec says otherwise.
const DEVIATIONS: &[(&str, &str)] = &[
    (
        "GET /logs/charts/{metric} 200",
        "the fragment's oneOf alternatives overlap (ScmEnvelope {success, data: object} matches every chart, and a latency answer also matches ScmCountChart), so no answer can match exactly one; each answer is validated against its metric's alternative (ScmCountChart, ScmLatencyChart, ScmErrorTrends, ScmErrorCategoryTrends), which must be one of the oneOf's",
    ),
    (
        "createGuardrail request checks[].parameters",
        "the spec's oneOf alternatives overlap (none forbids other properties, most require none), so no parameters object matches exactly one; each check's parameters are validated against its id's own alternative (RegexMatchParameters for default.regexMatch)",
    ),
    (
        "createConfig 200",
        "live returns the flat receipt {id, version_id, slug, object: \"config\"}, not {success, data} (FACTS §3); validated against LIVE_CONFIG_RECEIPT",
    ),
    (
        "getConfig 200",
        "live returns the flat record with `config` as a JSON-encoded string, `format`, `type`, `version_id`, not {success, data: {config: object}} (FACTS §3); validated against the listConfigVersions item schema, which documents that flat shape",
    ),
    (
        "listConfigs 200",
        "live envelope is {object: \"list\", total, data} with no `success` (FACTS §3); rows validated against the spec, the envelope against LIVE_LIST_ENVELOPE",
    ),
    (
        "RateLimitsPolicy.unit",
        "the PANW API adds `rpw` (FACTS §4); the emulator accepts it, this test creates only spec units",
    ),
    (
        "RateLimitsPolicy.conditions[].value",
        "the PANW API also takes a string array (FACTS §4); this test sends strings only",
    ),
    (
        "Albus_* deployments 200",
        "the spec's AlbusPublicApiResponse is any object; responses are also validated against the seed's Deployment fields and FACTS §5 (0/1 integer flags, masked secrets)",
    ),
    (
        "ValueKeyUsage.is_threshold_alerts_sent, is_exhausted_alerts_sent",
        "live reads carry 0/1 integers, not booleans (FACTS-more §0.6); `value_key_usage_map` entries are validated against the spec's ValueKeyUsage with those two as integers 0/1 (live_value_key_usage)",
    ),
    (
        "listUsageLimitsPolicyEntities 200",
        "live rows add status, the two 0/1 alert flags, last_used_at and object to the spec's {id, value_key, current_usage} (FACTS-more §5); rows are also validated against LIVE_USAGE_ENTITY",
    ),
    (
        "CreateUsageLimitsPolicyRequest",
        "the emulator also takes `periodic_reset_days` and `description` on create (FACTS §4 lists the reset days beside `periodic_reset`); this test sends only spec fields",
    ),
    (
        "McpIntegrations_list 200: configurations",
        "live list rows carry `configurations` as a JSON-encoded string, an object in the detail (FACTS-rest §4); rows are validated with the string parsed back (and checked to be a string)",
    ),
    (
        "McpIntegration.secret_mappings",
        "live reads say null until set (FACTS-rest §4, [LIVE]); the spec's array is not nullable; validated with a null left out",
    ),
    (
        "McpIntegrationWorkspaces_list 200",
        "the spec's oneOf branches require no field, so every object matches both; the legacy answer is validated against McpIntegrationWorkspacesLegacyResponse, the versioned (?version=) one against McpIntegrationWorkspacesListResponse",
    ),
    (
        "McpServers_update 200",
        "the spec says {}; live answers {id, slug, object} (FACTS-rest §6) — an object, so the spec's `type: object` still holds",
    ),
    (
        "McpServers_test, McpServerConnections_delete",
        "SCM answers 403 even on an owned server (FACTS-rest §6); the emulator answers the policy denial (403, x-opa-decision: false), checked instead of the spec's 200",
    ),
    (
        "McpServers_retrieve 200",
        "live omits workspace_id and mcp_integration_details (FACTS-rest §6); neither is required by the spec",
    ),
    (
        "SecretReferenceListItem.status, SecretReferenceDetailResponse.status",
        "the spec's enum is ACTIVE; live reads say `active` (FACTS-more §0.6); validated with the status upper-cased",
    ),
    (
        "listGuardrailMcpServers 200, listOrgGuardrailMcpServers 200",
        "SCM answers {object: \"list\", total, data} rather than the bare array (FACTS-rest §7); `data` is validated against the spec's array",
    ),
    (
        "DELETE /workspaces/{workspaceRef}, DELETE /scopes/{name} 200",
        "the fragments record no body; the emulator answers {}",
    ),
    (
        "Albus_delete_deploymentsDeploymentId 200",
        "live answers an empty body, not a JSON object (FACTS §5); the body is checked to be empty instead",
    ),
];

// ---------------------------------------------------------------------------------------------
// The spec and a validator for its JSON Schema subset.

/// The Portkey-derived fixture: configs, rate limits, guardrails, deployments, gateway reads.
const SUBSET: &str = "openapi-subset.yaml";
/// The PANW-derived fixture for usage-limits policies.
const USAGE_LIMITS: &str = "openapi-usage-limits.yaml";
/// The SCM-observed telemetry reads (`openapi-rest.yaml`'s fragments).
const TELEMETRY: &str = "openapi-telemetry.yaml";
/// MCP integrations and servers (PANW), SCM workspaces and IAM scopes (SCM-observed), from
/// `openapi-rest.yaml`.
const REST_OBJECTS: &str = "openapi-rest-objects.yaml";
/// Secret references and guardrail ↔ MCP-server mappings, from `openapi-more.yaml`.
const MORE_OBJECTS: &str = "openapi-more-objects.yaml";

fn spec_path(fixture: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/openapi")
        .join(fixture)
}

fn load_spec(fixture: &str) -> Value {
    let path = spec_path(fixture);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("the spec fixture {}: {err}", path.display()));
    let yaml: serde_yaml::Value = serde_yaml::from_str(&text).expect("spec is valid yaml");
    serde_json::to_value(yaml).expect("spec converts to json")
}

struct Spec {
    doc: Value,
}

impl Spec {
    fn load() -> Self {
        Self::load_fixture(SUBSET)
    }

    fn load_fixture(fixture: &str) -> Self {
        Self {
            doc: load_spec(fixture),
        }
    }

    /// Each operation's `operationId`, or `METHOD path` for one without (the SCM-observed
    /// telemetry fragments have none).
    fn operation_ids(&self) -> BTreeSet<String> {
        self.operations()
            .iter()
            .map(|(method, path, op)| operation_name(method, path, op))
            .collect()
    }

    fn operations(&self) -> Vec<(String, String, Value)> {
        let mut ops = Vec::new();
        for (path, item) in self.doc["paths"].as_object().expect("paths") {
            for method in ["get", "put", "post", "delete", "patch"] {
                if let Some(op) = item.get(method) {
                    ops.push((method.to_uppercase(), path.clone(), op.clone()));
                }
            }
        }
        ops
    }

    fn operation(&self, operation_id: &str) -> Value {
        let (_, _, op) = self
            .operations()
            .into_iter()
            .find(|(method, path, op)| operation_name(method, path, op) == operation_id)
            .unwrap_or_else(|| panic!("operation {operation_id} is in the spec"));
        op
    }

    fn request_schema(&self, operation_id: &str) -> Value {
        let op = self.operation(operation_id);
        op["requestBody"]["content"]["application/json"]["schema"].clone()
    }

    fn response_schema(&self, operation_id: &str, status: u16) -> Value {
        let op = self.operation(operation_id);
        op["responses"][status.to_string()]["content"]["application/json"]["schema"].clone()
    }

    /// The query parameters of an operation: every name, and the required ones.
    fn query_parameters(&self, operation_id: &str) -> (BTreeSet<String>, BTreeSet<String>) {
        let op = self.operation(operation_id);
        let mut names = BTreeSet::new();
        let mut required = BTreeSet::new();
        for parameter in op["parameters"].as_array().into_iter().flatten() {
            let parameter = match parameter.get("$ref").and_then(Value::as_str) {
                Some(reference) => {
                    let name = reference
                        .strip_prefix("#/components/parameters/")
                        .unwrap_or_else(|| panic!("unsupported parameter $ref {reference}"));
                    &self.doc["components"]["parameters"][name]
                }
                None => parameter,
            };
            if parameter["in"] != json!("query") {
                continue;
            }
            let name = parameter["name"].as_str().expect("a named parameter");
            names.insert(name.to_owned());
            if parameter["required"] == json!(true) {
                required.insert(name.to_owned());
            }
        }
        (names, required)
    }

    fn component(&self, name: &str) -> Value {
        self.doc["components"]["schemas"][name].clone()
    }

    fn resolve<'a>(&'a self, schema: &'a Value) -> &'a Value {
        resolve_ref(&self.doc, schema)
    }

    /// All violations of `schema` by `value`, each with its JSON path.
    fn violations(&self, schema: &Value, value: &Value) -> Vec<String> {
        let mut errors = Vec::new();
        self.check(schema, value, "$", &mut errors);
        errors
    }

    fn check(&self, schema: &Value, value: &Value, at: &str, errors: &mut Vec<String>) {
        if value.is_null() && schema.get("nullable") == Some(&json!(true)) {
            return;
        }
        let schema = self.resolve(schema);
        if schema.is_null() || schema.as_object().is_some_and(|s| s.is_empty()) {
            return;
        }
        if value.is_null() && schema.get("nullable") == Some(&json!(true)) {
            return;
        }
        if let Some(parts) = schema.get("allOf").and_then(Value::as_array) {
            for part in parts {
                self.check(part, value, at, errors);
            }
        }
        for (keyword, exactly_one) in [("anyOf", false), ("oneOf", true)] {
            if let Some(options) = schema.get(keyword).and_then(Value::as_array) {
                let passing = options
                    .iter()
                    .filter(|o| self.violations(o, value).is_empty())
                    .count();
                if passing == 0 || (exactly_one && passing > 1) {
                    errors.push(format!("{at}: matches {passing} of the {keyword} options"));
                }
            }
        }
        if let Some(not) = schema.get("not")
            && self.violations(not, value).is_empty()
        {
            errors.push(format!("{at}: must not match the `not` schema"));
        }
        if let Some(expected) = schema.get("type").and_then(Value::as_str) {
            if !type_matches(expected, value) {
                errors.push(format!("{at}: expected {expected}, got {value}"));
                return;
            }
        } else if value.is_null() && schema.get("properties").is_some() {
            errors.push(format!("{at}: null is not allowed"));
            return;
        }
        if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
            && !allowed.contains(value)
        {
            errors.push(format!("{at}: {value} is not one of {allowed:?}"));
        }
        self.check_bounds(schema, value, at, errors);
        match value {
            Value::Object(map) => self.check_object(schema, map, at, errors),
            Value::Array(items) => {
                if let Some(item_schema) = schema.get("items") {
                    for (index, item) in items.iter().enumerate() {
                        self.check(item_schema, item, &format!("{at}[{index}]"), errors);
                    }
                }
            }
            Value::String(text) => check_format(schema, text, at, errors),
            _ => {}
        }
    }

    fn check_object(
        &self,
        schema: &Value,
        map: &serde_json::Map<String, Value>,
        at: &str,
        errors: &mut Vec<String>,
    ) {
        for field in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let field = field.as_str().unwrap_or_default();
            if !map.contains_key(field) {
                errors.push(format!("{at}: missing required field {field}"));
            }
        }
        let properties = schema.get("properties").and_then(Value::as_object);
        for (field, item) in map {
            let path = format!("{at}.{field}");
            match (
                properties.and_then(|p| p.get(field)),
                schema.get("additionalProperties"),
            ) {
                (Some(property), _) => self.check(property, item, &path, errors),
                (None, Some(Value::Bool(false))) => {
                    errors.push(format!("{path}: additional property not allowed"));
                }
                (None, Some(extra @ Value::Object(_))) => self.check(extra, item, &path, errors),
                (None, _) => {}
            }
        }
        if let Some(max) = schema.get("maxProperties").and_then(Value::as_u64)
            && map.len() as u64 > max
        {
            errors.push(format!("{at}: more than {max} properties"));
        }
    }

    fn check_bounds(&self, schema: &Value, value: &Value, at: &str, errors: &mut Vec<String>) {
        let limit = |name: &str| schema.get(name).and_then(Value::as_f64);
        if let Some(number) = value.as_f64() {
            if limit("minimum").is_some_and(|min| number < min) {
                errors.push(format!("{at}: {number} below minimum"));
            }
            if limit("maximum").is_some_and(|max| number > max) {
                errors.push(format!("{at}: {number} above maximum"));
            }
            if limit("multipleOf").is_some_and(|m| (number / m).fract().abs() > 1e-9) {
                errors.push(format!("{at}: {number} not a multiple"));
            }
        }
        let length = match value {
            Value::String(text) => Some((text.chars().count(), "minLength", "maxLength")),
            Value::Array(items) => Some((items.len(), "minItems", "maxItems")),
            _ => None,
        };
        if let Some((len, min_key, max_key)) = length {
            if limit(min_key).is_some_and(|min| (len as f64) < min) {
                errors.push(format!("{at}: shorter than {min_key}"));
            }
            if limit(max_key).is_some_and(|max| (len as f64) > max) {
                errors.push(format!("{at}: longer than {max_key}"));
            }
        }
    }
}

fn operation_name(method: &str, path: &str, op: &Value) -> String {
    op["operationId"]
        .as_str()
        .map_or_else(|| format!("{method} {path}"), str::to_owned)
}

/// The product's type check ([`aigw::gitops::schema::type_matches`]), refusing a type it does
/// not know.
fn type_matches(expected: &str, value: &Value) -> bool {
    aigw::gitops::schema::type_matches(expected, value)
        .unwrap_or_else(|| panic!("unsupported schema type {expected}"))
}

fn check_format(schema: &Value, text: &str, at: &str, errors: &mut Vec<String>) {
    match schema.get("format").and_then(Value::as_str) {
        Some("uuid") if uuid::Uuid::parse_str(text).is_err() => {
            errors.push(format!("{at}: {text:?} is not a uuid"));
        }
        Some("date-time") if text.parse::<jiff::Timestamp>().is_err() => {
            errors.push(format!("{at}: {text:?} is not an RFC 3339 date-time"));
        }
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------
// Live shapes (see DEVIATIONS).

fn live_config_receipt() -> Value {
    json!({
        "type": "object",
        "required": ["id", "version_id", "slug", "object"],
        "properties": {
            "id": {"type": "string", "format": "uuid"},
            "version_id": {"type": "string", "format": "uuid"},
            "slug": {"type": "string"},
            "object": {"type": "string", "enum": ["config"]},
        },
    })
}

fn live_list_envelope() -> Value {
    json!({
        "type": "object",
        "required": ["object", "total", "data"],
        "properties": {
            "object": {"type": "string", "enum": ["list"]},
            "total": {"type": "integer", "minimum": 0},
            "data": {"type": "array"},
        },
    })
}

/// The seed's Deployment table with FACTS §5's read conventions.
fn seed_deployment() -> Value {
    let flag = json!({"type": "integer", "enum": [0, 1]});
    let timestamp = json!({"type": "string", "format": "date-time"});
    let nullable_timestamp = json!({"type": "string", "format": "date-time", "nullable": true});
    let strings = json!({"type": "array", "items": {"type": "string"}});
    json!({
        "type": "object",
        "required": ["id", "name", "slug", "type", "status", "is_default", "connection_status",
                     "created_by", "created_at", "last_updated_at", "last_synced_at",
                     "last_resynced_at", "tags", "object", "auth_settings", "deployment_config",
                     "workspaces", "credentials", "client_auth"],
        "properties": {
            "id": {"type": "string", "format": "uuid"},
            "name": {"type": "string"},
            "slug": {"type": "string"},
            "type": {"type": "string", "enum": ["production", "non_production"]},
            "status": {"type": "string", "enum": ["active", "archived"]},
            "is_default": flag,
            "connection_status": {"type": "string", "enum": ["healthy", "unhealthy", "unknown"]},
            "created_by": {"type": "string"},
            "created_at": timestamp,
            "last_updated_at": timestamp,
            "last_synced_at": nullable_timestamp,
            "last_resynced_at": nullable_timestamp,
            "tags": {"type": "object", "additionalProperties": {"type": "string"}},
            "object": {"type": "string", "enum": ["deployment"]},
            "deployment_config": {"type": "object", "nullable": true},
            "workspaces": {"type": "array", "items": {"type": "object", "required": ["id", "slug"]}},
            "credentials": {
                "type": "object", "required": ["username", "password"],
                "properties": {"username": {"type": "string"}, "password": {"type": "string"}},
            },
            "client_auth": {"type": "string"},
            "auth_settings": {
                "type": "object",
                "required": ["gateway_base_url", "mcp_gateway_base_url", "private_link_endpoint",
                             "use_private_link_proxy", "is_dataservice_hosted",
                             "is_playground_proxy_allowed", "disable_service_gateway",
                             "workspaces_allowed", "jwt_subs_allowed", "jwt_sub_workspace_mapping",
                             "allow_all_workspaces"],
                "properties": {
                    "gateway_base_url": {"type": "string"},
                    "mcp_gateway_base_url": {"type": "string"},
                    "private_link_endpoint": {"type": "string"},
                    "use_private_link_proxy": flag,
                    "is_dataservice_hosted": flag,
                    "is_playground_proxy_allowed": flag,
                    "disable_service_gateway": flag,
                    "workspaces_allowed": strings,
                    "jwt_subs_allowed": strings,
                    "jwt_sub_workspace_mapping": {"type": "object"},
                    "allow_all_workspaces": flag,
                },
            },
        },
    })
}

/// The spec's `ValueKeyUsage` with the alert flags as the live API writes them: 0/1 integers.
fn live_value_key_usage(spec: &Spec) -> Value {
    let mut schema = spec.component("ValueKeyUsage");
    for flag in ["is_threshold_alerts_sent", "is_exhausted_alerts_sent"] {
        schema["properties"][flag] = json!({"type": "integer", "enum": [0, 1]});
    }
    schema["required"] = json!([
        "current_usage",
        "status",
        "is_threshold_alerts_sent",
        "is_exhausted_alerts_sent"
    ]);
    schema
}

/// A live entity row (FACTS-more §5).
fn live_usage_entity() -> Value {
    let flag = json!({"type": "integer", "enum": [0, 1]});
    json!({
        "type": "object",
        "required": ["id", "value_key", "current_usage", "status", "is_threshold_alerts_sent",
                     "is_exhausted_alerts_sent", "last_used_at", "object"],
        "properties": {
            "id": {"type": "string", "format": "uuid"},
            "value_key": {"type": "string"},
            "current_usage": {"type": "number", "minimum": 0},
            "status": {"type": "string", "enum": ["active", "exhausted"]},
            "is_threshold_alerts_sent": flag,
            "is_exhausted_alerts_sent": flag,
            "last_used_at": {"type": "string", "format": "date-time", "nullable": true},
            "object": {"type": "string"},
        },
    })
}

/// FACTS §5 `DeploymentCreateResponse`.
fn live_deployment_receipt() -> Value {
    json!({
        "type": "object",
        "required": ["id", "organisation_id", "client_auth", "credentials", "object"],
        "additionalProperties": false,
        "properties": {
            "id": {"type": "string", "format": "uuid"},
            "organisation_id": {"type": "string", "format": "uuid"},
            "client_auth": {"type": "string", "minLength": 1},
            "credentials": {
                "type": "object", "required": ["username", "password"],
                "properties": {"username": {"type": "string"}, "password": {"type": "string", "minLength": 1}},
            },
            "object": {"type": "string", "enum": ["deployment"]},
        },
    })
}

// ---------------------------------------------------------------------------------------------
// Driving the emulator.

struct Harness {
    spec: Spec,
    emu: Emu,
    checked: BTreeSet<String>,
}

impl Harness {
    async fn start() -> Self {
        Self::start_with(Spec::load()).await
    }

    async fn start_with(spec: Spec) -> Self {
        Self {
            spec,
            emu: Emu::start().await,
            checked: BTreeSet::new(),
        }
    }

    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = self.emu.call(method, path);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let (status, body) = self.emu.send(request).await;
        (status.as_u16(), body)
    }

    async fn control(&self, path: &str, body: Value) -> Value {
        let response = self
            .emu
            .http
            .post(self.emu.url(path))
            .json(&body)
            .send()
            .await
            .expect("control");
        assert_eq!(response.status(), StatusCode::OK);
        response.json().await.expect("control json")
    }

    /// Calls `operation_id`, expects 200 and validates the answer against the spec; the answer.
    async fn ok(
        &mut self,
        operation_id: &str,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Value {
        let (status, body) = self.call(method, path, body).await;
        assert_eq!(status, 200, "{body}");
        self.expect_spec(operation_id, 200, &body);
        body
    }

    async fn get_ok(&mut self, operation_id: &str, path: &str) -> Value {
        self.ok(operation_id, Method::GET, path, None).await
    }

    /// [`Self::get_ok`] of a list of `total` rows.
    async fn total_ok(&mut self, operation_id: &str, path: &str, total: u64) -> Value {
        let list = self.get_ok(operation_id, path).await;
        assert_eq!(list["total"], json!(total));
        list
    }

    async fn post_ok(&mut self, operation_id: &str, path: &str, body: Value) -> Value {
        self.ok(operation_id, Method::POST, path, Some(body)).await
    }

    async fn put_ok(&mut self, operation_id: &str, path: &str, body: Value) -> Value {
        self.ok(operation_id, Method::PUT, path, Some(body)).await
    }

    async fn delete_ok(&mut self, operation_id: &str, path: &str) -> Value {
        self.ok(operation_id, Method::DELETE, path, None).await
    }

    /// [`Self::read`], validating the answer as `live` makes it of what the API sends.
    async fn read_as(&mut self, operation_id: &str, path: &str, live: impl FnOnce(Value) -> Value) {
        let (_, body) = self.call(Method::GET, path, None).await;
        self.expect_spec(operation_id, 200, &live(body));
    }

    /// Reads `path` (`operation_id`) and validates the answer against the spec's 200; the answer.
    async fn read(&mut self, operation_id: &str, path: &str) -> Value {
        let (_, body) = self.call(Method::GET, path, None).await;
        self.expect_spec(operation_id, 200, &body);
        body
    }

    /// Validates against the spec's schema for this operation and status.
    fn expect_spec(&mut self, operation_id: &str, status: u16, body: &Value) {
        let schema = self.spec.response_schema(operation_id, status);
        assert!(
            !schema.is_null(),
            "{operation_id} {status} has a schema in the spec"
        );
        self.expect_schema(operation_id, &schema, body);
    }

    fn expect_schema(&mut self, operation_id: &str, schema: &Value, body: &Value) {
        let violations = self.spec.violations(schema, body);
        assert!(
            violations.is_empty(),
            "{operation_id}: {violations:#?}\nbody: {body:#}"
        );
        self.checked.insert(operation_id.to_owned());
    }
}

const WORKSPACE: &str = "6f0e4a2c-5a4e-4c1b-9a53-3c2f1f0d9b11";

#[test]
fn the_spec_is_present_and_every_operation_is_accounted_for() {
    for (fixture, checked) in [
        (SUBSET, CHECKED),
        (USAGE_LIMITS, CHECKED_USAGE_LIMITS),
        (TELEMETRY, CHECKED_TELEMETRY),
        (REST_OBJECTS, CHECKED_REST_OBJECTS),
        (MORE_OBJECTS, CHECKED_MORE_OBJECTS),
    ] {
        let expected: BTreeSet<String> = checked.iter().map(|id| (*id).to_owned()).collect();
        assert_eq!(
            Spec::load_fixture(fixture).operation_ids(),
            expected,
            "{fixture} operations changed; regenerate it (tests/fixtures/openapi/README.md) or update its CHECKED list"
        );
    }
    for (what, why) in DEVIATIONS {
        assert!(!why.is_empty(), "{what} needs a reason");
        println!("deviation: {what}: {why}");
    }
}

/// Operations the tests below exercise: exactly those in the fixture, the ones aigw calls.
const CHECKED: &[&str] = &[
    "listConfigs",
    "createConfig",
    "getConfig",
    "updateConfig",
    "deleteConfig",
    "listConfigVersions",
    "createRateLimitsPolicy",
    "listRateLimitsPolicies",
    "getRateLimitsPolicy",
    "updateRateLimitsPolicy",
    "deleteRateLimitsPolicy",
    "createGuardrail",
    "listGuardrails",
    "getResponse",
    "getVectorStoreFile",
    "Albus_get_deployments",
    "Albus_post_deployments",
    "Albus_get_deploymentsDeploymentId",
    "Albus_put_deploymentsDeploymentId",
    "Albus_delete_deploymentsDeploymentId",
];

/// The operations of the usage-limits fixture; `usage_limit_responses_match_the_spec` calls each.
const CHECKED_USAGE_LIMITS: &[&str] = &[
    "createUsageLimitsPolicy",
    "listUsageLimitsPolicies",
    "getUsageLimitsPolicy",
    "updateUsageLimitsPolicy",
    "deleteUsageLimitsPolicy",
    "listUsageLimitsPolicyEntities",
    "resetUsageLimitsPolicyEntity",
];

/// The MCP, workspace and scope operations; `rest_object_responses_match_the_fragments` calls
/// each.
const CHECKED_REST_OBJECTS: &[&str] = &[
    "McpIntegrations_create",
    "McpIntegrations_list",
    "McpIntegrations_retrieve",
    "McpIntegrations_update",
    "McpIntegrations_delete",
    "McpIntegrationWorkspaces_list",
    "McpIntegrationWorkspaces_bulkUpdate",
    "McpIntegrationCapabilities_list",
    "McpIntegrationCapabilities_bulkUpdate",
    "McpIntegrationMetadata_retrieve",
    "McpServers_create",
    "McpServers_list",
    "McpServers_retrieve",
    "McpServers_update",
    "McpServers_delete",
    "McpServers_test",
    "McpServerCapabilities_list",
    "McpServerCapabilities_bulkUpdate",
    "McpServerUserAccess_list",
    "McpServerUserAccess_bulkUpdate",
    "McpServerConnections_list",
    "McpServerConnections_delete",
    "GET /workspaces",
    "POST /workspaces",
    "GET /workspaces/{workspaceRef}",
    "PUT /workspaces/{workspaceRef}",
    "DELETE /workspaces/{workspaceRef}",
    "GET /scopes",
    "POST /scopes",
    "GET /scopes/{name}",
    "PUT /scopes/{name}",
    "DELETE /scopes/{name}",
];

/// Secret references and guardrail mappings; `secret_reference_and_mapping_responses_match_the_spec`
/// calls each.
const CHECKED_MORE_OBJECTS: &[&str] = &[
    "listSecretReferences",
    "createSecretReference",
    "getSecretReference",
    "updateSecretReference",
    "deleteSecretReference",
    "listGuardrailMcpServers",
    "bulkSyncGuardrailMcpServers",
    "upsertGuardrailMcpServer",
    "listOrgGuardrailMcpServers",
    "bulkSyncOrgGuardrailMcpServers",
    "upsertOrgGuardrailMcpServer",
];

/// The telemetry reads; `telemetry_responses_match_the_fragments` calls each.
const CHECKED_TELEMETRY: &[&str] = &["GET /logs/charts/{metric}", "GET /logs/groups/{dimension}"];

#[test]
fn the_validator_rejects_wrong_shapes() {
    let spec = Spec::load();
    let policy = spec.component("RateLimitsPolicy");
    let good = json!({"id": WORKSPACE, "type": "requests", "unit": "rpm", "value": 1, "status": "active",
                      "workspace_id": WORKSPACE, "organisation_id": WORKSPACE,
                      "created_at": "2024-05-12T21:37:06.000Z", "last_updated_at": "2024-05-12T21:37:06.000Z",
                      "name": null});
    assert_eq!(spec.violations(&policy, &good), Vec::<String>::new());
    let mut bad = good.clone();
    bad["unit"] = json!("rps");
    bad["id"] = json!("not-a-uuid");
    bad["created_at"] = json!("yesterday");
    assert_eq!(
        spec.violations(&policy, &bad).len(),
        3,
        "{:?}",
        spec.violations(&policy, &bad)
    );
    let envelope = spec.component("ErrorResponse");
    let missing_param = json!({"error": {"code": "x", "message": "m", "type": "t"}});
    assert_eq!(spec.violations(&envelope, &missing_param).len(), 1);
    let null_param = json!({"error": {"code": null, "message": "m", "type": "t", "param": null}});
    assert!(
        spec.violations(&envelope, &null_param).is_empty(),
        "nullable is honoured"
    );
    let response = spec.component("Response");
    let wrong_model = json!({"id": "r", "object": "response", "created_at": 1, "error": null,
                             "incomplete_details": null, "instructions": null, "model": "gpt-4o",
                             "tools": [], "output": [], "parallel_tool_calls": true, "metadata": null,
                             "tool_choice": "auto", "temperature": 1, "top_p": 1});
    let violations = spec.violations(&response, &wrong_model);
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert!(violations[0].contains("model"), "{violations:?}");
}

#[tokio::test]
async fn config_responses_match_the_spec() {
    let mut h = Harness::start().await;
    let body = json!({"name": "contract", "config": {"retry": {"attempts": 3}}, "workspace_id": WORKSPACE});
    let receipt = h.post_ok("createConfig", "/ai_gw/v2/configs", body).await;
    h.expect_schema("createConfig", &live_config_receipt(), &receipt);
    let slug = receipt["slug"].as_str().expect("slug").to_owned();

    let list = h.get_ok("listConfigs", "/ai_gw/v2/configs").await;
    h.expect_schema("listConfigs", &live_list_envelope(), &list);

    let (status, config) = h
        .call(Method::GET, &format!("/ai_gw/v2/configs/{slug}"), None)
        .await;
    assert_eq!(status, 200);
    let flat =
        h.spec.response_schema("listConfigVersions", 200)["properties"]["data"]["items"].clone();
    h.expect_schema("getConfig", &flat, &config);
    assert!(
        config["config"].is_string(),
        "live: config is a JSON string"
    );

    let update = json!({"name": "testConf", "config": {"virtual_key": "copy-of-anthrop-b20259"}, "status": "active"});
    let updated = h
        .put_ok("updateConfig", &format!("/ai_gw/v2/configs/{slug}"), update)
        .await;
    assert!(updated["data"]["version_id"].is_string());

    h.get_ok(
        "listConfigVersions",
        &format!("/ai_gw/v2/configs/{slug}/versions"),
    )
    .await;

    h.delete_ok("deleteConfig", &format!("/ai_gw/v2/configs/{slug}"))
        .await;
    assert_eq!(h.checked.len(), 6);
}

#[tokio::test]
async fn rate_limit_responses_match_the_spec() {
    let mut h = Harness::start().await;
    let base = "/ai_gw/v2/policies/rate-limits";
    let body = json!({"name": "100 RPM per API Key", "conditions": [{"key": "workspace_id", "value": "workspace-123"}],
                      "group_by": [{"key": "api_key"}], "type": "requests", "unit": "rpm", "value": 100,
                      "workspace_id": WORKSPACE});
    let created = h.post_ok("createRateLimitsPolicy", base, body).await;
    let path = format!("{base}/{}", created["id"].as_str().expect("id"));

    h.total_ok(
        "listRateLimitsPolicies",
        &format!("{base}?page_size=10&current_page=0"),
        1,
    )
    .await;

    h.get_ok("getRateLimitsPolicy", &path).await;

    h.put_ok(
        "updateRateLimitsPolicy",
        &path,
        json!({"value": 200, "unit": "rph"}),
    )
    .await;

    h.delete_ok("deleteRateLimitsPolicy", &path).await;
    assert_eq!(h.checked.len(), 5);
}

#[tokio::test]
async fn guardrail_responses_match_the_spec() {
    let mut h = Harness::start().await;
    let guardrails: Vec<Value> = (0..3)
        .map(|n| json!({"name": format!("guard {n}"), "workspace_id": if n == 0 { Value::Null } else { json!(WORKSPACE) }}))
        .collect();
    h.control("/_emulator/seed", json!({"guardrails": guardrails}))
        .await;
    for base in ["/ai_gw/admin/v2/guardrails", "/ai_gw/v2/guardrails"] {
        h.get_ok("listGuardrails", &format!("{base}?page_size=2"))
            .await;
        for query in ["page_size=0", "page_size=1001", "current_page=-1"] {
            let (status, error) = h.call(Method::GET, &format!("{base}?{query}"), None).await;
            assert_eq!(status, 400, "{query}");
            h.expect_spec("listGuardrails", 400, &error);
        }
        let (status, error) = h
            .call(Method::GET, &format!("{base}/pg-missing"), None)
            .await;
        assert_eq!(status, 403);
        h.expect_spec("listGuardrails", 403, &error);
    }
    // What aigw sends to create a Guardrail with both feedback actions is the spec's request
    // (a feedback's `metadata` a string, as the spec types it), and the answer is the spec's.
    let guardrail: GuardrailSpec = serde_json::from_value(json!({
        "name": "pii", "workspaceId": WORKSPACE,
        "checks": [{"id": "default.regexMatch", "parameters": {"rule": "\\d{3}"}}],
        "actions": {"deny": true, "onSuccess": {"value": 5},
                    "onFail": {"value": -5, "metadata": "team=a"}}}))
    .unwrap();
    let definition = &guardrail.definition;
    let request = definition.create_request_with(&definition.document(), Some(WORKSPACE));
    let body = serde_json::to_value(request).unwrap();
    assert_eq!(body["actions"]["on_success"]["feedback"]["metadata"], "");
    // The spec's `parameters` alternatives overlap (see DEVIATIONS): the check's are validated
    // against its id's own alternative, everything else against the request schema as is.
    assert_eq!(
        h.spec.request_schema("createGuardrail")["$ref"],
        "#/components/schemas/CreateGuardrailRequest"
    );
    let mut schema = h.spec.component("CreateGuardrailRequest");
    let mut check = h.spec.component("GuardrailCheck");
    check["properties"]["parameters"] =
        json!({"$ref": "#/components/schemas/RegexMatchParameters"});
    schema["properties"]["checks"]["items"] = check;
    h.expect_schema("createGuardrail", &schema, &body);
    h.post_ok("createGuardrail", "/ai_gw/v2/guardrails", body)
        .await;
    assert_eq!(h.checked.len(), 2);
}

#[tokio::test]
async fn gateway_responses_match_the_spec() {
    let mut h = Harness::start().await;
    let output = json!([
        {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "hi", "annotations": []}]},
        {"id": "fs_1", "type": "file_search_call", "status": "completed", "queries": ["q"],
         "results": [{"file_id": "file_1", "text": "t", "filename": "a.txt", "score": 0.5}]},
    ]);
    let usage = json!({"input_tokens": 3, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 1,
                       "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 4});
    let seed = json!({
        "responses": [{"id": "resp_1", "output": output, "usage": usage}],
        "vector_store_files": [{"id": "file_1", "vector_store_id": "vs_1", "usage_bytes": 1024}],
    });
    h.control("/_emulator/seed", seed).await;
    for path in [
        "/v1/responses/resp_1",
        "/v1/responses/resp_1?include=file_search_call.results",
    ] {
        h.get_ok("getResponse", path).await;
    }
    h.get_ok("getVectorStoreFile", "/v1/vector_stores/vs_1/files/file_1")
        .await;
    let (status, missing) = h
        .call(Method::GET, "/v1/responses/resp_missing", None)
        .await;
    assert_eq!(status, 404);
    h.expect_schema("getResponse", &h.spec.component("ErrorResponse"), &missing);
}

#[tokio::test]
async fn deployment_responses_match_the_spec_and_the_seed() {
    let mut h = Harness::start().await;
    let base = "/ai_gw/admin/v2/deployments";
    let body = json!({"name": "edge", "type": "production", "is_default": true, "tags": {"env": "prod"},
                      "auth_settings": {"gateway_base_url": "https://gw.example", "workspaces_allowed": [WORKSPACE]}});
    let receipt = h.post_ok("Albus_post_deployments", base, body).await;
    h.expect_schema(
        "Albus_post_deployments",
        &live_deployment_receipt(),
        &receipt,
    );
    let path = format!("{base}/{}", receipt["id"].as_str().expect("id"));

    let list = h.get_ok("Albus_get_deployments", base).await;
    h.expect_schema("Albus_get_deployments", &live_list_envelope(), &list);

    let detail = h.get_ok("Albus_get_deploymentsDeploymentId", &path).await;
    h.expect_schema(
        "Albus_get_deploymentsDeploymentId",
        &seed_deployment(),
        &detail,
    );

    let updated = h
        .put_ok(
            "Albus_put_deploymentsDeploymentId",
            &path,
            json!({"rotate_auth": true, "status": "active"}),
        )
        .await;
    h.expect_schema(
        "Albus_put_deploymentsDeploymentId",
        &seed_deployment(),
        &updated,
    );

    let (status, deleted) = h.call(Method::DELETE, &path, None).await;
    assert_eq!((status, deleted), (200, Value::Null), "live: empty body");
    h.checked
        .insert("Albus_delete_deploymentsDeploymentId".to_owned());
    assert_eq!(h.checked.len(), 5);
}

#[tokio::test]
async fn usage_limit_responses_match_the_spec() {
    let mut h = Harness::start_with(Spec::load_fixture(USAGE_LIMITS)).await;
    let base = "/ai_gw/v2/policies/usage-limits";
    let body = json!({"name": "team budget", "type": "cost", "credit_limit": 100, "alert_threshold": 80,
                      "periodic_reset": "monthly", "workspace_id": WORKSPACE,
                      "conditions": [{"key": "workspace_id", "value": [WORKSPACE], "excludes": "other"}],
                      "group_by": [{"key": "api_key"}]});
    let created = h.post_ok("createUsageLimitsPolicy", base, body).await;
    let id = created["id"].as_str().expect("id").to_owned();
    let path = format!("{base}/{id}");
    for (value_key, usage) in [("key-1", 85.5), ("key-2", 120.0), ("key-3", 1.0)] {
        h.control(
            &format!("/_emulator/usage-limits/{id}/usage"),
            json!({"value_key": value_key, "usage": usage}),
        )
        .await;
    }

    h.total_ok(
        "listUsageLimitsPolicies",
        &format!("{base}?type=cost&page_size=10&current_page=0"),
        1,
    )
    .await;

    let (status, mut policy) = h
        .call(Method::GET, &format!("{path}?include_usage=true"), None)
        .await;
    assert_eq!(status, 200);
    let usage = policy
        .as_object_mut()
        .and_then(|p| p.remove("value_key_usage_map"))
        .expect("include_usage adds the map");
    h.expect_spec("getUsageLimitsPolicy", 200, &policy);
    let spec_usage = h.spec.component("ValueKeyUsage");
    let live_usage = live_value_key_usage(&h.spec);
    for entry in usage.as_object().expect("a map").values() {
        h.expect_schema("getUsageLimitsPolicy", &live_usage, entry);
        assert!(
            !h.spec.violations(&spec_usage, entry).is_empty(),
            "the deviation is real: the spec wants booleans, live sends 0/1"
        );
    }

    let entities = h
        .total_ok(
            "listUsageLimitsPolicyEntities",
            &format!("{path}/entities?page_size=2"),
            3,
        )
        .await;
    h.expect_schema(
        "listUsageLimitsPolicyEntities",
        &live_list_envelope(),
        &entities,
    );
    for row in entities["data"].as_array().expect("rows") {
        h.expect_schema("listUsageLimitsPolicyEntities", &live_usage_entity(), row);
    }
    let entity = entities["data"][1]["id"].as_str().expect("entity id");

    h.ok(
        "resetUsageLimitsPolicyEntity",
        Method::PUT,
        &format!("{path}/entities/{entity}/reset"),
        None,
    )
    .await;

    let update = json!({"name": "renamed", "description": null, "credit_limit": 200, "alert_threshold": null,
                        "periodic_reset": null, "periodic_reset_days": 30,
                        "next_usage_reset_at": "2030-01-01T00:00:00Z", "reset_usage_for_value": "key-1",
                        "conditions": [{"key": "api_key", "value": "k"}]});
    h.put_ok("updateUsageLimitsPolicy", &path, update).await;

    h.delete_ok("deleteUsageLimitsPolicy", &path).await;
    let archived = h
        .get_ok("getUsageLimitsPolicy", &format!("{path}?status=archived"))
        .await;
    assert_eq!(archived["periodic_reset_days"], json!(30));
    assert_eq!(h.checked.len(), CHECKED_USAGE_LIMITS.len());
}

/// Drives traffic through the data plane (two keys, one whose provider fails a share of calls),
/// then reads every group dimension and every chart the emulator models, checking each answer
/// against the telemetry fragments and every query parameter the client sends against the
/// operation's parameters.
#[tokio::test]
async fn telemetry_responses_match_the_fragments() {
    use aigw::api::{GroupDimension, TelemetryQuery};

    let mut h = Harness::start_with(Spec::load_fixture(TELEMETRY)).await;
    let workspace = "ws-contract";
    let seed = json!({
        "configs": [
            {"slug": "pc-stable", "config": {"provider": "@stable"}},
            {"slug": "pc-canary", "config": {"strategy": {"mode": "loadbalance"},
                                             "targets": [{"provider": "@canary", "weight": 1},
                                                         {"provider": "@stable", "weight": 1}]}},
        ],
        "api_keys": [
            {"id": "0a1b2c3d-0000-4000-8000-000000000011", "key": "ak-stable",
             "workspace_id": workspace, "defaults": {"config_id": "pc-stable"}},
            {"id": "0a1b2c3d-0000-4000-8000-000000000012", "key": "ak-canary",
             "workspace_id": workspace, "defaults": {"config_id": "pc-canary",
                                                     "metadata": {"_user": "alice"}}},
        ],
    });
    h.control("/_emulator/seed", seed).await;
    let faults = json!({"gateway_seed": 5,
                        "providers": {"canary": {"error_rate": 0.5, "status": 503, "latency_ms": 5}}});
    h.emu.faults(faults).await;
    for n in 0..20 {
        let key = if n % 2 == 0 { "ak-stable" } else { "ak-canary" };
        let response = h
            .emu
            .http
            .post(h.emu.url("/v1/chat/completions"))
            .header("x-portkey-api-key", key)
            .header("x-portkey-metadata", r#"{"aigw_canary":"contract"}"#)
            .json(&json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await
            .expect("chat");
        assert!(
            [200, 503].contains(&response.status().as_u16()),
            "{}",
            response.status()
        );
    }

    let now = jiff::Timestamp::now();
    let window = TelemetryQuery::window(
        "1234567890",
        workspace,
        now - jiff::SignedDuration::from_hours(2),
        now + jiff::SignedDuration::from_mins(1),
    );
    let mut filtered = window.clone();
    filtered.api_key_ids = vec!["0a1b2c3d-0000-4000-8000-000000000012".into()];
    filtered
        .metadata
        .insert("aigw_canary".into(), "contract".into());
    filtered.status_codes = vec![200, 503];
    filtered.trace_id = None;
    filtered.ai_org_models = vec!["canary__gpt-4o-mini".into(), "stable__gpt-4o-mini".into()];
    filtered.total_units_min = Some(0);
    filtered.total_units_max = Some(1_000);
    filtered.cost_min = Some(0.0);
    filtered.cost_max = Some(100.0);
    let mut empty = window.clone();
    empty.api_key_ids = vec!["00000000-0000-4000-8000-000000000000".into()];

    for (operation, extra) in [
        (
            "GET /logs/groups/{dimension}",
            vec![("columns", String::new())],
        ),
        ("GET /logs/charts/{metric}", vec![]),
    ] {
        let (names, required) = h.spec.query_parameters(operation);
        let mut sent: BTreeSet<String> = filtered
            .pairs()
            .into_iter()
            .map(|(name, _)| name.to_owned())
            .collect();
        sent.extend(extra.into_iter().map(|(name, _)| name.to_owned()));
        assert!(
            sent.is_superset(&required),
            "{operation}: {required:?} ⊄ {sent:?}"
        );
        assert!(sent.is_subset(&names), "{operation}: {sent:?} ⊄ {names:?}");
    }

    let query_text = |query: &TelemetryQuery| {
        let mut url = reqwest::Url::parse("http://x/").expect("url");
        url.query_pairs_mut().extend_pairs(query.pairs());
        url.query().unwrap_or_default().to_owned()
    };
    let groups = "GET /logs/groups/{dimension}";
    // Every dimension the client asks for, and `users` (its own read, the same operation).
    let dimensions = GroupDimension::ALL.iter().map(|d| d.as_str());
    for dimension in dimensions.chain(["users"]) {
        for query in [&window, &filtered, &empty] {
            let path = format!(
                "/ai_gw/v2/logs/groups/{dimension}?{}&columns=cost,avg_latency,avg_tokens,total_tokens,success_rate,last_seen",
                query_text(query)
            );
            let (status, body) = h.call(Method::GET, &path, None).await;
            assert_eq!(status, 200, "{path}: {body}");
            h.expect_spec(groups, 200, &body);
            if query == &window {
                let rows = if dimension == "users" {
                    &body["data"]["records"]
                } else {
                    &body["data"]
                };
                assert!(
                    !rows.as_array().expect("rows").is_empty(),
                    "{dimension}: {body}"
                );
            }
        }
    }

    let charts = "GET /logs/charts/{metric}";
    let alternatives = h.spec.response_schema(charts, 200)["oneOf"].clone();
    for (metric, component) in [
        ("requests", "ScmCountChart"),
        ("errors", "ScmCountChart"),
        ("cost", "ScmCountChart"),
        ("tokens", "ScmCountChart"),
        ("latency", "ScmLatencyChart"),
        ("error-trends", "ScmErrorTrends"),
        ("error-category-trends", "ScmErrorCategoryTrends"),
    ] {
        let reference = json!({"$ref": format!("#/components/schemas/{component}")});
        assert!(
            alternatives
                .as_array()
                .is_some_and(|options| options.contains(&reference)),
            "{component} is one of the chart answers"
        );
        for query in [&window, &filtered, &empty] {
            let path = format!("/ai_gw/v2/logs/charts/{metric}?{}", query_text(query));
            let (status, body) = h.call(Method::GET, &path, None).await;
            assert_eq!(status, 200, "{path}: {body}");
            h.expect_schema(charts, &reference, &body);
        }
    }
    let (_, empty_latency) = h
        .call(
            Method::GET,
            &format!("/ai_gw/v2/logs/charts/latency?{}", query_text(&empty)),
            None,
        )
        .await;
    for field in ["total", "p50", "p90", "p99"] {
        assert!(
            empty_latency["data"][field].is_null(),
            "{field}: {empty_latency}"
        );
    }
    assert_eq!(h.checked.len(), CHECKED_TELEMETRY.len());
}

/// An MCP integration read as the spec would have it: `secret_mappings: null` (live until set)
/// left out.
fn live_mcp_integration(mut body: Value) -> Value {
    if body["secret_mappings"].is_null()
        && let Some(fields) = body.as_object_mut()
    {
        fields.remove("secret_mappings");
    }
    body
}

/// Every MCP integration and server operation, and the SCM workspace and IAM scope routes,
/// against `openapi-rest-objects.yaml`.
#[tokio::test]
async fn rest_object_responses_match_the_fragments() {
    let mut h = Harness::start_with(Spec::load_fixture(REST_OBJECTS)).await;

    // IAM scope → workspace → bind.
    let scope = json!({"name": "ws_contract_a1b2c3", "description": "", "resources": []});
    h.post_ok("POST /scopes", "/iam/v1/scopes", scope).await;
    let create = json!({"name": "Contract", "scope_name": "ws_contract_a1b2c3", "description": "d",
                        "icon": "📜", "defaults": {"metadata": {"team": "t"}},
                        "rate_limits": [{"type": "requests", "unit": "rpm", "value": 5}]});
    let body = h
        .post_ok("POST /workspaces", "/ai_gw/admin/v2/workspaces", create)
        .await;
    let slug = body["slug"].as_str().expect("slug").to_owned();
    let bind = json!({"name": "ws_contract_a1b2c3", "description": "", "resources": [
        {"resource_type": "workspace", "resource_id": slug, "metadata": []}]});
    h.put_ok(
        "PUT /scopes/{name}",
        "/iam/v1/scopes/ws_contract_a1b2c3",
        bind,
    )
    .await;
    h.read("GET /scopes/{name}", "/iam/v1/scopes/ws_contract_a1b2c3")
        .await;
    h.read("GET /scopes", "/iam/v1/scopes").await;
    for plane in ["/ai_gw/v2", "/ai_gw/admin/v2"] {
        let (_, body) = h
            .call(Method::GET, &format!("{plane}/workspaces"), None)
            .await;
        assert_eq!(body["total"], 2, "{body}");
        h.expect_spec("GET /workspaces", 200, &body);
        h.get_ok(
            "GET /workspaces/{workspaceRef}",
            &format!("{plane}/workspaces/{slug}"),
        )
        .await;
    }
    let update = json!({"usage_limits": [{"credit_limit": 10, "type": "cost"}], "icon": ""});
    h.put_ok(
        "PUT /workspaces/{workspaceRef}",
        &format!("/ai_gw/admin/v2/workspaces/{slug}"),
        update,
    )
    .await;
    let body = h
        .read(
            "GET /workspaces/{workspaceRef}",
            &format!("/ai_gw/admin/v2/workspaces/{slug}"),
        )
        .await;
    let workspace_id = body["id"].as_str().expect("id").to_owned();

    // MCP integration.
    let create = json!({"name": "Linear", "slug": "linear", "url": "https://mcp.linear.app/mcp",
                        "auth_type": "headers", "transport": "http", "description": "tickets",
                        "configurations": {"custom_headers": {"Authorization": "Bearer x-123456789012"}}});
    h.post_ok(
        "McpIntegrations_create",
        "/ai_gw/admin/v2/mcp-integrations",
        create,
    )
    .await;
    let base = "/ai_gw/admin/v2/mcp-integrations/linear";
    h.control(
        "/_emulator/mcp-integrations/linear/discover",
        json!({"tools": [{"name": "create_issue", "description": "d"}], "prompts": [{"name": "triage"}]}),
    )
    .await;
    let (_, mut body) = h
        .call(Method::GET, "/ai_gw/admin/v2/mcp-integrations", None)
        .await;
    for row in body["data"].as_array_mut().expect("rows") {
        let text = row["configurations"]
            .as_str()
            .expect("a JSON string in rows");
        row["configurations"] = serde_json::from_str(text).expect("JSON");
        *row = live_mcp_integration(row.take());
    }
    h.expect_spec("McpIntegrations_list", 200, &body);
    h.read_as("McpIntegrations_retrieve", base, |body| {
        assert!(body["configurations"].is_object(), "{body}");
        live_mcp_integration(body)
    })
    .await;
    h.put_ok(
        "McpIntegrations_update",
        base,
        json!({"description": "issues"}),
    )
    .await;
    let grant = json!({"workspaces": [{"id": workspace_id, "enabled": true}],
                       "global_workspace_access": null});
    h.put_ok(
        "McpIntegrationWorkspaces_bulkUpdate",
        &format!("{base}/workspaces"),
        grant,
    )
    .await;
    let branches = h.spec.response_schema("McpIntegrationWorkspaces_list", 200)["oneOf"].clone();
    for (query, component, rows) in [
        ("", "McpIntegrationWorkspacesLegacyResponse", "workspaces"),
        ("?version=2", "McpIntegrationWorkspacesListResponse", "data"),
    ] {
        let reference = json!({"$ref": format!("#/components/schemas/{component}")});
        assert!(branches.as_array().is_some_and(|b| b.contains(&reference)));
        let (_, body) = h
            .call(Method::GET, &format!("{base}/workspaces{query}"), None)
            .await;
        assert_eq!(body[rows][0]["enabled"], true, "{body}");
        h.expect_schema("McpIntegrationWorkspaces_list", &reference, &body);
    }
    let (_, body) = h
        .call(
            Method::GET,
            &format!("{base}/capabilities?page=1&type=tool"),
            None,
        )
        .await;
    assert_eq!(body["total"], 1, "{body}");
    h.expect_spec("McpIntegrationCapabilities_list", 200, &body);
    let toggle =
        json!({"capabilities": [{"name": "create_issue", "type": "tool", "enabled": false}]});
    h.put_ok(
        "McpIntegrationCapabilities_bulkUpdate",
        &format!("{base}/capabilities"),
        toggle.clone(),
    )
    .await;
    h.read(
        "McpIntegrationMetadata_retrieve",
        &format!("{base}/metadata"),
    )
    .await;

    // MCP server.
    let create = json!({"name": "Linear", "mcp_integration_id": "linear", "workspace_id": slug,
                        "slug": "linear-contract", "description": "d"});
    h.post_ok("McpServers_create", "/ai_gw/v2/mcp-servers", create)
        .await;
    let server = "/ai_gw/v2/mcp-servers/linear-contract";
    h.read(
        "McpServers_list",
        &format!("/ai_gw/v2/mcp-servers?workspace_id={slug}"),
    )
    .await;
    h.read("McpServers_retrieve", server).await;
    h.put_ok(
        "McpServers_update",
        server,
        json!({"name": "Linear tickets"}),
    )
    .await;
    let access = json!({"user_access": [{"user_id": "u-1", "enabled": true}], "default_user_access": "deny"});
    for (part, list, update, body) in [
        (
            "capabilities",
            "McpServerCapabilities_list",
            "McpServerCapabilities_bulkUpdate",
            toggle,
        ),
        (
            "user-access",
            "McpServerUserAccess_list",
            "McpServerUserAccess_bulkUpdate",
            access,
        ),
    ] {
        let path = format!("{server}/{part}");
        h.read(list, &path).await;
        h.put_ok(update, &path, body).await;
    }
    h.read("McpServerUserAccess_list", &format!("{server}/user-access"))
        .await;
    h.read(
        "McpServerConnections_list",
        &format!("{server}/connections"),
    )
    .await;
    for (operation, method, path) in [
        ("McpServers_test", Method::POST, format!("{server}/test")),
        (
            "McpServerConnections_delete",
            Method::DELETE,
            format!("{server}/connections"),
        ),
    ] {
        let (status, body) = h.call(method, &path, None).await;
        assert_eq!(
            (status, body),
            (403, json!({"msg": "Access denied"})),
            "{operation}"
        );
        h.checked.insert(operation.to_owned());
    }
    h.delete_ok("McpServers_delete", server).await;
    h.delete_ok("McpIntegrations_delete", base).await;

    for (operation, path) in [
        (
            "DELETE /workspaces/{workspaceRef}",
            format!("/ai_gw/admin/v2/workspaces/{slug}"),
        ),
        (
            "DELETE /scopes/{name}",
            "/iam/v1/scopes/ws_contract_a1b2c3".to_owned(),
        ),
    ] {
        let (status, body) = h.call(Method::DELETE, &path, None).await;
        assert_eq!((status, body), (200, json!({})), "{operation}");
        h.checked.insert(operation.to_owned());
    }
    assert_eq!(
        h.checked,
        CHECKED_REST_OBJECTS
            .iter()
            .map(|o| (*o).to_owned())
            .collect()
    );
}

/// Secret references and guardrail ↔ MCP-server mappings against `openapi-more-objects.yaml`.
#[tokio::test]
async fn secret_reference_and_mapping_responses_match_the_spec() {
    let mut h = Harness::start_with(Spec::load_fixture(MORE_OBJECTS)).await;
    let upper = |mut body: Value| {
        if body["status"] == "active" {
            body["status"] = json!("ACTIVE");
        }
        body
    };
    let create = json!({"name": "vault", "slug": "vault-ref", "manager_type": "hashicorp_vault",
        "secret_path": "kv/openai", "secret_key": "key", "description": "d", "tags": {"t": "v"},
        "allowed_workspaces": [WORKSPACE],
        "auth_config": {"vault_auth_type": "approle", "vault_addr": "https://vault:8200",
                        "vault_role_id": "role-123456789", "vault_secret_id": "secret-123456789"}});
    h.post_ok(
        "createSecretReference",
        "/ai_gw/admin/v2/secret-references",
        create,
    )
    .await;
    let (_, mut body) = h
        .call(Method::GET, "/ai_gw/admin/v2/secret-references", None)
        .await;
    for row in body["data"].as_array_mut().expect("rows") {
        *row = upper(row.take());
    }
    h.expect_spec("listSecretReferences", 200, &body);
    let item = "/ai_gw/admin/v2/secret-references/vault-ref";
    h.read_as("getSecretReference", item, upper).await;
    h.put_ok(
        "updateSecretReference",
        item,
        json!({"secret_key": "other"}),
    )
    .await;
    h.delete_ok("deleteSecretReference", item).await;

    let seeded = h
        .control(
            "/_emulator/seed",
            json!({"guardrails": [{"name": "pii", "workspace_id": WORKSPACE}]}),
        )
        .await;
    let guardrail = seeded["guardrails"][0]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let state = h.emu.state().await;
    let workspace = state["default_workspace_id"]
        .as_str()
        .expect("id")
        .to_owned();
    let integration = json!({"name": "Linear", "slug": "linear", "url": "https://mcp.linear.app/mcp",
                             "auth_type": "none", "transport": "sse"});
    h.call(
        Method::POST,
        "/ai_gw/admin/v2/mcp-integrations",
        Some(integration),
    )
    .await;
    h.call(
        Method::PUT,
        "/ai_gw/admin/v2/mcp-integrations/linear/workspaces",
        Some(json!({"workspaces": [], "global_workspace_access": {"enabled": true}})),
    )
    .await;
    let (_, server) = h
        .call(
            Method::POST,
            "/ai_gw/v2/mcp-servers",
            Some(json!({"name": "s", "mcp_integration_id": "linear", "workspace_id": workspace})),
        )
        .await;
    let server = server["id"].as_str().expect("server id").to_owned();
    let array = |spec: &Spec, operation: &str| spec.response_schema(operation, 200);
    for (plane, list, sync, upsert) in [
        (
            "/ai_gw/v2",
            "listGuardrailMcpServers",
            "bulkSyncGuardrailMcpServers",
            "upsertGuardrailMcpServer",
        ),
        (
            "/ai_gw/admin/v2",
            "listOrgGuardrailMcpServers",
            "bulkSyncOrgGuardrailMcpServers",
            "upsertOrgGuardrailMcpServer",
        ),
    ] {
        let path = format!("{plane}/guardrails/{guardrail}/mcp-servers");
        let body = json!({"mcp_servers": {server.clone(): {"run_on": ["input"],
                          "mcp_integration_capability_ids": [WORKSPACE]}}});
        let (status, body) = h.call(Method::PUT, &path, Some(body)).await;
        assert_eq!(status, 200, "{body}");
        h.expect_spec(sync, 200, &body);
        let (status, body) = h
            .call(
                Method::PUT,
                &format!("{path}/{server}"),
                Some(json!({"run_on": ["output"]})),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        h.expect_spec(upsert, 200, &body);
        let (_, body) = h.call(Method::GET, &path, None).await;
        assert_eq!(
            (body["object"].clone(), body["total"].clone()),
            (json!("list"), json!(1))
        );
        let schema = array(&h.spec, list);
        h.expect_schema(list, &schema, &body["data"]);
    }
    assert_eq!(
        h.checked,
        CHECKED_MORE_OBJECTS
            .iter()
            .map(|o| (*o).to_owned())
            .collect()
    );
}

/// `schema` with its `$ref`s to `#/components/schemas/…` of `doc` followed.
pub(super) fn resolve_ref<'a>(doc: &'a Value, mut schema: &'a Value) -> &'a Value {
    while let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        let name = reference
            .strip_prefix("#/components/schemas/")
            .unwrap_or_else(|| panic!("unsupported $ref {reference}"));
        schema = &doc["components"]["schemas"][name];
        assert!(!schema.is_null(), "dangling $ref {reference}");
    }
    schema
}
