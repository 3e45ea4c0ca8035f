//! `aigw validate`: every aigw manifest checked offline, the way the apiserver and then the
//! operator would check it, so a bad change fails in the pull request instead of in the cluster.
//!
//! Checks, in order: the bounds of the free-form fields ([`crate::resources::free_form`], what
//! the admission policies generated with the CRDs enforce); the CRD schema aigw itself generates
//! (types, required fields, enums, lengths, patterns, unknown fields) with its CEL rules that need
//! no stored object; the checks the operator makes before calling the API (a rotation interval
//! that parses, the API request limits); and claims the set makes twice (the same object name, or
//! the same remote object adopted by two resources). Documents of other API groups are counted
//! and ignored.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::load::{Document, Loaded};
use super::schema::{SchemaChecker, Violation};
use crate::api::{ApiError, Validate};
use crate::registry::SpecId;
use crate::resources::common::{GROUP, SendsSecretValues};
use crate::resources::config_document::MarkedDocument;
use crate::resources::guardrail::GuardrailKind;
use crate::resources::{
    ApiKey, ClusterGuardrail, Config, ConfigRollout, Connection, Deployment, Guardrail,
    Integration, McpIntegration, McpServer, Provider, RateLimitsPolicy, SecretReference,
    UsageLimitsPolicy, Workspace,
};

/// The largest object etcd stores by default (`--max-request-bytes`, 1.5 MiB).
const MAX_OBJECT_BYTES: usize = 1_572_864;

/// One problem: where, which resource, which field, what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// `file#index` (see [`Document::location`]).
    pub location: String,
    /// `Kind namespace/name`, `Kind name` without a namespace, or `-` when unknown.
    pub resource: String,
    /// Field path, e.g. `spec.groupBy`; empty for the whole document.
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.location, self.resource)?;
        if !self.path.is_empty() {
            write!(f, ": {}", self.path)?;
        }
        write!(f, ": {}", self.message)
    }
}

/// A manifest that passed its own checks, typed.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub location: String,
    pub object: Object,
}

/// The aigw kinds.
#[derive(Debug, Clone)]
pub enum Object {
    Config(Box<Config>),
    Deployment(Box<Deployment>),
    RateLimitsPolicy(Box<RateLimitsPolicy>),
    UsageLimitsPolicy(Box<UsageLimitsPolicy>),
    Guardrail(Box<Guardrail>),
    ClusterGuardrail(Box<ClusterGuardrail>),
    Connection(Box<Connection>),
    ApiKey(Box<ApiKey>),
    Integration(Box<Integration>),
    Provider(Box<Provider>),
    SecretReference(Box<SecretReference>),
    Workspace(Box<Workspace>),
    McpIntegration(Box<McpIntegration>),
    McpServer(Box<McpServer>),
    ConfigRollout(Box<ConfigRollout>),
}

impl Object {
    /// The metadata and `spec.promotion` of a kind that can be promoted (Config, Guardrail,
    /// ClusterGuardrail); `None` for the others.
    pub fn promotion(
        &self,
    ) -> Option<(
        &kube::api::ObjectMeta,
        Option<&crate::resources::promotion::Promotion>,
    )> {
        match self {
            Object::Config(o) => Some((&o.metadata, o.spec.promotion.as_ref())),
            Object::Guardrail(o) => Some((&o.metadata, o.spec.definition.promotion.as_ref())),
            Object::ClusterGuardrail(o) => {
                Some((&o.metadata, o.spec.definition.promotion.as_ref()))
            }
            _ => None,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Object::Config(_) => "Config",
            Object::Deployment(_) => "Deployment",
            Object::RateLimitsPolicy(_) => "RateLimitsPolicy",
            Object::UsageLimitsPolicy(_) => "UsageLimitsPolicy",
            Object::Guardrail(_) => "Guardrail",
            Object::ClusterGuardrail(_) => "ClusterGuardrail",
            Object::Connection(_) => "Connection",
            Object::ApiKey(_) => "ApiKey",
            Object::Integration(_) => "Integration",
            Object::Provider(_) => "Provider",
            Object::SecretReference(_) => "SecretReference",
            Object::Workspace(_) => "Workspace",
            Object::McpIntegration(_) => "McpIntegration",
            Object::McpServer(_) => "McpServer",
            Object::ConfigRollout(_) => "ConfigRollout",
        }
    }

    fn meta(&self) -> &kube::api::ObjectMeta {
        match self {
            Object::Config(o) => &o.metadata,
            Object::Deployment(o) => &o.metadata,
            Object::RateLimitsPolicy(o) => &o.metadata,
            Object::UsageLimitsPolicy(o) => &o.metadata,
            Object::Guardrail(o) => &o.metadata,
            Object::ClusterGuardrail(o) => &o.metadata,
            Object::Connection(o) => &o.metadata,
            Object::ApiKey(o) => &o.metadata,
            Object::Integration(o) => &o.metadata,
            Object::Provider(o) => &o.metadata,
            Object::SecretReference(o) => &o.metadata,
            Object::Workspace(o) => &o.metadata,
            Object::McpIntegration(o) => &o.metadata,
            Object::McpServer(o) => &o.metadata,
            Object::ConfigRollout(o) => &o.metadata,
        }
    }

    /// `spec.managementPolicy` (`Full` for a Connection, which has none).
    pub fn management_policy(&self) -> crate::resources::common::ManagementPolicy {
        match self {
            Object::Config(o) => o.spec.management_policy,
            Object::Deployment(o) => o.spec.management_policy,
            Object::RateLimitsPolicy(o) => o.spec.management_policy,
            Object::UsageLimitsPolicy(o) => o.spec.management_policy,
            Object::Guardrail(o) => o.spec.definition.management_policy,
            Object::ClusterGuardrail(o) => o.spec.definition.management_policy,
            Object::Connection(_) => crate::resources::common::ManagementPolicy::Full,
            Object::ApiKey(o) => o.spec.management_policy,
            Object::Integration(o) => o.spec.management_policy,
            Object::Provider(o) => o.spec.management_policy,
            Object::SecretReference(o) => o.spec.management_policy,
            Object::Workspace(o) => o.spec.management_policy,
            Object::McpIntegration(o) => o.spec.management_policy,
            Object::McpServer(o) => o.spec.management_policy,
            // A rollout has no remote object of its own.
            Object::ConfigRollout(_) => crate::resources::common::ManagementPolicy::Full,
        }
    }

    /// The Connection its calls go through (`spec.connectionRef`, `default` when absent);
    /// `None` for a Connection.
    pub fn connection_name(&self) -> Option<&str> {
        Some(match self {
            Object::Config(o) => o.spec.connection_name(),
            Object::Deployment(o) => o.spec.connection_name(),
            Object::RateLimitsPolicy(o) => o.spec.connection_name(),
            Object::UsageLimitsPolicy(o) => o.spec.connection_name(),
            Object::Guardrail(o) => o.spec.connection_name(),
            Object::ClusterGuardrail(o) => o.spec.connection_name(),
            Object::Connection(_) => return None,
            Object::ApiKey(o) => o.spec.connection_name(),
            Object::Integration(o) => o.spec.connection_name(),
            Object::Provider(o) => o.spec.connection_name(),
            Object::SecretReference(o) => o.spec.connection_name(),
            Object::Workspace(o) => o.spec.connection_name(),
            Object::McpIntegration(o) => o.spec.connection_name(),
            Object::McpServer(o) => o.spec.connection_name(),
            Object::ConfigRollout(o) => o
                .spec
                .connection_ref
                .as_ref()
                .map_or("default", |c| c.name.as_str()),
        })
    }

    pub fn name(&self) -> &str {
        self.meta().name.as_deref().unwrap_or_default()
    }

    /// The namespace the manifest names, if any (kubectl's `-n` or context decides otherwise).
    /// A cluster-scoped kind ([`crate::registry::Kind::namespaced`]) has none.
    pub fn namespace(&self) -> Option<&str> {
        match crate::registry::find(self.kind()) {
            Some(kind) if kind.namespaced => self.meta().namespace.as_deref(),
            _ => None,
        }
    }

    /// `Kind namespace/name`, or `Kind name` without a namespace.
    pub fn display(&self) -> String {
        display(self.kind(), self.namespace(), self.name())
    }
}

/// An apiVersion whose group is within two edits of aigw's (`aigw.i0/v1alpha1`, `aigwio/v1`):
/// with one of aigw's kinds, a typo that `kubectl apply` fails on ("no matches for kind"), not
/// another tool's document.
fn misspelt_group(api_version: &str) -> bool {
    let group = api_version.split_once('/').map_or(api_version, |(g, _)| g);
    group != GROUP && strsim::levenshtein(&group.to_ascii_lowercase(), GROUP) <= 2
}

fn display(kind: &str, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// What [`Validator::validate`] found.
#[derive(Debug, Default)]
pub struct Report {
    pub problems: Vec<Problem>,
    /// The aigw manifests without problems of their own, in input order.
    pub manifests: Vec<Manifest>,
    /// aigw documents checked, per kind.
    pub checked: BTreeMap<String, usize>,
    /// Documents of other API groups (a Namespace, a kustomization, …).
    pub ignored: usize,
}

/// `2 Config, 1 Deployment`: how many of each kind `counts` holds; `None` when it is empty.
pub fn counted(counts: &BTreeMap<impl std::fmt::Display, usize>) -> Option<String> {
    let each: Vec<String> = counts
        .iter()
        .map(|(kind, n)| format!("{n} {kind}"))
        .collect();
    (!each.is_empty()).then(|| each.join(", "))
}

impl Report {
    pub fn is_valid(&self) -> bool {
        self.problems.is_empty()
    }

    pub fn checked_total(&self) -> usize {
        self.checked.values().sum()
    }

    /// `checked 3 aigw resources (2 Config, 1 Deployment), ignored 1 other document: valid`.
    pub fn summary(&self) -> String {
        let kinds = match counted(&self.checked) {
            Some(kinds) => format!(" ({kinds})"),
            None => String::new(),
        };
        let verdict = match self.problems.len() {
            0 => "valid".to_string(),
            1 => "1 problem".to_string(),
            n => format!("{n} problems"),
        };
        format!(
            "checked {} aigw resource{}{kinds}, ignored {} other document{}: {verdict}",
            self.checked_total(),
            plural(self.checked_total()),
            self.ignored,
            plural(self.ignored)
        )
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

struct KindSchema {
    version: String,
    namespaced: bool,
    schema: JSONSchemaProps,
}

/// Holds the generated CRD schemas with their regexes and CEL rules compiled.
pub struct Validator {
    kinds: HashMap<String, KindSchema>,
    checker: SchemaChecker,
    /// The operator's `--min-rotation-interval`: a shorter `spec.rotation.interval` is refused.
    min_rotation_interval: Duration,
}

impl Default for Validator {
    fn default() -> Self {
        Self::new()
    }
}

impl Validator {
    /// Built from [`crate::resources::crds`], the same generation `aigw crds` prints.
    pub fn new() -> Self {
        let mut kinds = HashMap::new();
        for (_, crd) in crate::resources::crds() {
            let Some(version) = crd.spec.versions.first() else {
                continue;
            };
            let Some(schema) = version
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.clone())
            else {
                continue;
            };
            kinds.insert(
                crd.spec.names.kind.clone(),
                KindSchema {
                    version: version.name.clone(),
                    namespaced: crd.spec.scope == "Namespaced",
                    schema,
                },
            );
        }
        let checker = SchemaChecker::new(kinds.values().map(|k| &k.schema));
        Self {
            kinds,
            checker,
            min_rotation_interval: crate::resources::rotation::DEFAULT_MIN_INTERVAL,
        }
    }

    /// Refuses a `spec.rotation.interval` shorter than `floor` (the operator's
    /// `--min-rotation-interval`, 1h by default), which the operator would raise to it.
    pub fn with_min_rotation_interval(mut self, floor: Duration) -> Self {
        self.min_rotation_interval = floor;
        self
    }

    pub fn validate(&self, loaded: &Loaded) -> Report {
        let mut report = Report::default();
        for failure in &loaded.failures {
            report.problems.push(Problem {
                location: format!("{}#{}", failure.source, failure.index),
                resource: "-".into(),
                path: String::new(),
                message: failure.message.clone(),
            });
        }
        let mut seen = Seen::default();
        for document in &loaded.documents {
            self.validate_document(document, &mut seen, &mut report);
        }
        report
    }

    fn validate_document(&self, document: &Document, seen: &mut Seen, report: &mut Report) {
        let value = &document.value;
        let api_version = value["apiVersion"].as_str().unwrap_or_default();
        let kind = value["kind"].as_str().unwrap_or_default();
        // A document that is no object, or has no apiVersion or kind, is a manifest kubectl
        // refuses ("apiVersion not set"); an empty one was skipped when it was read.
        if api_version.is_empty() || kind.is_empty() {
            report.problems.push(Problem {
                location: document.location(),
                resource: "-".into(),
                path: String::new(),
                message: "not a Kubernetes object: a manifest is an object with apiVersion and kind (kubectl apply refuses it)".into(),
            });
            return;
        }
        // An aigw kind under an apiVersion that is not `aigw.io/<version>` (a group without a
        // version, a misspelt group) is a mistake `kubectl apply` would fail on, never another
        // tool's document to ignore.
        let ours = self.kinds.contains_key(kind)
            && (api_version.starts_with(GROUP) || misspelt_group(api_version));
        let Some((_, version)) = api_version.split_once('/').filter(|(g, _)| *g == GROUP) else {
            if ours {
                let name = value["metadata"]["name"].as_str().unwrap_or_default();
                report.problems.push(Problem {
                    location: document.location(),
                    resource: display(kind, value["metadata"]["namespace"].as_str(), name),
                    path: "apiVersion".into(),
                    message: format!(
                        "Invalid value: {api_version:?}: an aigw kind's apiVersion is {GROUP}/<version>"
                    ),
                });
                *report.checked.entry(kind.to_string()).or_default() += 1;
            } else {
                report.ignored += 1;
            }
            return;
        };
        let name = value["metadata"]["name"].as_str().unwrap_or_default();
        // A cluster-scoped object is one object whatever namespace its manifest names (kubectl
        // ignores it).
        let namespaced = self.kinds.get(kind).is_none_or(|s| s.namespaced);
        let namespace = value["metadata"]["namespace"]
            .as_str()
            .filter(|_| namespaced);
        let resource = display(if kind.is_empty() { "-" } else { kind }, namespace, name);
        let problem = |path: &str, message: String| Problem {
            location: document.location(),
            resource: resource.clone(),
            path: path.into(),
            message,
        };
        *report.checked.entry(kind.to_string()).or_default() += 1;
        let Some(schema) = self.kinds.get(kind) else {
            let mut known: Vec<&str> = self.kinds.keys().map(String::as_str).collect();
            known.sort_unstable();
            let message = format!(
                "unknown kind {kind:?} in {GROUP}; known: {}",
                known.join(", ")
            );
            report.problems.push(problem("kind", message));
            return;
        };
        if version != schema.version {
            let message = format!(
                "unsupported version {version:?}; {GROUP} serves {kind} as {}",
                schema.version
            );
            report.problems.push(problem("apiVersion", message));
            return;
        }
        let mut violations = seen.duplicates(kind, &resource, value, &document.location());
        check_metadata(&value["metadata"], schema.namespaced, &mut violations);
        // What etcd takes in one write (its default `--max-request-bytes`): a larger object is
        // refused when created ("etcdserver: request is too large", naming nothing), and the
        // stored object, with its metadata and status, is larger than the manifest.
        let size = serde_json::to_vec(value).map_or(0, |bytes| bytes.len());
        if size > MAX_OBJECT_BYTES {
            violations.push(Violation {
                path: String::new(),
                message: format!(
                    "Too long: the object is {size} bytes as JSON; Kubernetes stores at most {MAX_OBJECT_BYTES} (etcd's default limit per write, 1.5 MiB), so the apiserver refuses it"
                ),
            });
        }
        // The free-form fields' bounds first: the schema's checks walk what they hold.
        let bounds = crate::resources::free_form::check(&schema.schema, value);
        if bounds.is_empty() {
            self.check_body(&schema.schema, value, &mut violations);
        }
        violations.extend(
            bounds
                .into_iter()
                .map(|(path, message)| Violation { path, message }),
        );
        if violations.is_empty() {
            // A field written `null` (a YAML key with nothing after it) is stored as absent by
            // the apiserver, so it decodes as absent here too.
            let stored = super::schema::without_null_fields(&schema.schema, value);
            match checked_object(kind, &stored, self.min_rotation_interval) {
                Ok(object) => report.manifests.push(Manifest {
                    location: document.location(),
                    object,
                }),
                Err(found) => violations = found,
            }
        }
        report
            .problems
            .extend(violations.into_iter().map(|v| problem(&v.path, v.message)));
    }

    /// `spec` against the schema; `status` is ignored (the apiserver ignores it on create and
    /// `kubectl apply` never sets it); anything else at the top level is an unknown field.
    fn check_body(&self, root: &JSONSchemaProps, value: &Value, out: &mut Vec<Violation>) {
        let Some(map) = value.as_object() else {
            out.push(Violation {
                path: String::new(),
                message: "a manifest must be an object".into(),
            });
            return;
        };
        let found = out.len();
        for required in root.required.iter().flatten() {
            if !map.contains_key(required) {
                out.push(Violation {
                    path: required.clone(),
                    message: "Required value".into(),
                });
            }
        }
        let mut fields = Vec::new();
        for (key, child) in map {
            match key.as_str() {
                "apiVersion" | "kind" | "metadata" | "status" => {}
                _ => match root.properties.as_ref().and_then(|p| p.get(key)) {
                    Some(schema) => fields.push((
                        schema,
                        super::schema::without_null_fields(schema, child),
                        key,
                    )),
                    None => {
                        let key = super::schema::shown_key(key);
                        out.push(Violation {
                            path: key.clone(),
                            message: format!("unknown field \"{key}\""),
                        })
                    }
                },
            }
        }
        // The apiserver evaluates no CEL rule of an object with a blocking finding ("some
        // validation rules were not checked because the object was invalid"); after any other
        // (a pattern, a minimum) it does.
        self.checker.without_rules(|| {
            for (schema, child, key) in &fields {
                self.checker.check(schema, child, key, out);
            }
        });
        if out[found..].iter().any(super::schema::blocks_rules) {
            return;
        }
        let mut with_rules = Vec::new();
        for (schema, child, key) in &fields {
            self.checker.check(schema, child, key, &mut with_rules);
        }
        let structural = out[found..].to_vec();
        out.extend(with_rules.into_iter().filter(|v| !structural.contains(v)));
    }
}

fn check_metadata(meta: &Value, namespaced: bool, out: &mut Vec<Violation>) {
    match meta["name"].as_str() {
        None if meta.get("generateName").is_some() => out.push(Violation {
            path: "metadata.generateName".into(),
            message: "generateName cannot be applied declaratively; set metadata.name".into(),
        }),
        None => out.push(Violation {
            path: "metadata.name".into(),
            message: "Required value: name is required".into(),
        }),
        Some(name) => {
            if let Err(why) = dns1123_subdomain(name) {
                out.push(Violation {
                    path: "metadata.name".into(),
                    message: format!("Invalid value: {name:?}: {why}"),
                });
            }
        }
    }
    if let Some(ns) = meta["namespace"].as_str()
        && namespaced
        && let Err(why) = dns1123_label(ns)
    {
        out.push(Violation {
            path: "metadata.namespace".into(),
            message: format!("Invalid value: {ns:?}: {why}"),
        });
    }
}

const SUBDOMAIN_RULE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const LABEL_RULE: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";

/// `metadata.name` of a custom resource: at most 253 characters, lowercase alphanumerics, `-`
/// and `.`, alphanumeric at both ends.
pub fn dns1123_subdomain(name: &str) -> Result<(), String> {
    if name.len() > 253 {
        return Err("must be no more than 253 characters".into());
    }
    let ok = name.split('.').all(|part| dns1123_label(part).is_ok());
    if ok {
        Ok(())
    } else {
        Err(SUBDOMAIN_RULE.into())
    }
}

/// A namespace name: at most 63 characters, lowercase alphanumerics and `-`.
pub fn dns1123_label(name: &str) -> Result<(), String> {
    let bytes = name.as_bytes();
    let ok = !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-';
    if ok { Ok(()) } else { Err(LABEL_RULE.into()) }
}

/// The typed object, once it passed the operator's own checks.
fn checked_object(
    kind: &str,
    value: &Value,
    min_rotation_interval: Duration,
) -> Result<Object, Vec<Violation>> {
    let object = typed(kind, value).map_err(|message| {
        vec![Violation {
            path: String::new(),
            message,
        }]
    })?;
    let mut violations = Vec::new();
    operator_checks(&object, &mut violations);
    rotation_floor(&object, min_rotation_interval, &mut violations);
    own_namespace_servers(&object, &mut violations);
    self_promotion(&object, &mut violations);
    unique_workspaces(&object, &mut violations);
    if violations.is_empty() {
        Ok(object)
    } else {
        Err(violations)
    }
}

fn typed(kind: &str, value: &Value) -> Result<Object, String> {
    fn parse<T: DeserializeOwned>(value: &Value) -> Result<Box<T>, String> {
        let mut value = value.clone();
        whole_numbers(&mut value);
        serde_json::from_value(value).map(Box::new).map_err(|e| {
            let said = crate::api::secret_fields::without_decoded_values(&e.to_string());
            format!("does not decode: {said}")
        })
    }
    Ok(match kind {
        "Config" => Object::Config(parse(value)?),
        "Deployment" => Object::Deployment(parse(value)?),
        "RateLimitsPolicy" => Object::RateLimitsPolicy(parse(value)?),
        "UsageLimitsPolicy" => Object::UsageLimitsPolicy(parse(value)?),
        "Guardrail" => Object::Guardrail(parse(value)?),
        "ClusterGuardrail" => Object::ClusterGuardrail(parse(value)?),
        "Connection" => Object::Connection(parse(value)?),
        "ApiKey" => Object::ApiKey(parse(value)?),
        "Integration" => Object::Integration(parse(value)?),
        "Provider" => Object::Provider(parse(value)?),
        "SecretReference" => Object::SecretReference(parse(value)?),
        "Workspace" => Object::Workspace(parse(value)?),
        "McpIntegration" => Object::McpIntegration(parse(value)?),
        "McpServer" => Object::McpServer(parse(value)?),
        "ConfigRollout" => Object::ConfigRollout(parse(value)?),
        other => return Err(format!("unknown kind {other:?}")),
    })
}

/// Every whole number written with a fraction (`20.0`) made an integer, as the apiserver
/// stores it (`20`), so a field the operator reads as an integer decodes.
fn whole_numbers(value: &mut Value) {
    match value {
        Value::Number(n) if n.is_f64() => {
            if let Some(f) = n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15) {
                *value = Value::from(f as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(whole_numbers),
        Value::Object(map) => map.values_mut().for_each(whole_numbers),
        _ => {}
    }
}

/// The create request of a guardrail kind, as the operator would check it.
fn guardrail_request<G: GuardrailKind>(
    guardrail: &G,
    out: &mut Vec<Violation>,
) -> Result<(), crate::api::ApiError> {
    let definition = guardrail.definition();
    match MarkedDocument::new(definition) {
        Ok(marked) => definition
            .create_request_with(marked.document(), guardrail.workspace_id())
            .validate(),
        Err(message) => {
            out.push(Violation {
                path: "spec.checks".into(),
                message,
            });
            Ok(())
        }
    }
}

/// What the operator checks before it calls the API: errors that would otherwise only show up
/// as a Stalled condition after the merge.
fn operator_checks(object: &Object, out: &mut Vec<Violation>) {
    let request = match object {
        Object::Config(o) => {
            // The document as the operator checks it: Secret paths marked, credentials refused
            // at any depth (admission reaches only the top levels), guardrail lists typed.
            let mut document = o.spec.config.to_value();
            for reference in &o.spec.resource_refs {
                let marker = serde_json::Value::String(format!("({})", reference.name));
                if let Err(message) = crate::resources::config_document::set_reference(
                    &mut document,
                    &reference.path,
                    marker,
                ) {
                    out.push(Violation {
                        path: "spec.resourceRefs".into(),
                        message,
                    });
                }
            }
            let checked = MarkedDocument::new(&o.spec)
                .and_then(|marked| marked.guardrail_references().map(|_| ()));
            if let Err(message) = checked {
                out.push(Violation {
                    path: "spec.config".into(),
                    message,
                });
            }
            o.spec.create_request().validate()
        }
        Object::Deployment(o) => {
            if let Err(message) = o.spec.rotation_interval() {
                out.push(Violation {
                    path: "spec.rotation.interval".into(),
                    message,
                });
            }
            o.spec.create_request(None).validate()
        }
        Object::RateLimitsPolicy(o) => o.spec.create_request().validate(),
        Object::UsageLimitsPolicy(o) => o.spec.create_request().validate(),
        Object::Guardrail(o) => guardrail_request(o.as_ref(), out),
        Object::ClusterGuardrail(o) => guardrail_request(o.as_ref(), out),
        Object::Connection(_) => Ok(()),
        Object::ApiKey(o) => api_key_request(o, out),
        Object::Integration(o) => integration_request(o, out),
        // The integration's UUID is resolved in the cluster; its form is not checked here.
        Object::Provider(o) => o.spec.create_request("(integration)").validate(),
        // `auth_config` comes from a Secret in the cluster: its values are not checked here.
        Object::SecretReference(o) => {
            let from_secret = serde_json::Map::from_iter([(
                "(spec.authConfigSecretRef)".to_string(),
                serde_json::Value::String("(from the Secret)".into()),
            )]);
            o.spec.create_request(from_secret, None).validate()
        }
        // The scope is the operator's own (named from the resource's uid); an adopted
        // workspace is written with the update alone.
        Object::Workspace(o) => {
            let settings = o.spec.settings(None);
            match &o.spec.slug {
                Some(_) => settings.update_request().validate(),
                None => settings
                    .create_request("(the workspace's IAM scope)")
                    .validate(),
            }
        }
        // `configurations` come from a Secret in the cluster: their values are not checked here.
        Object::McpIntegration(o) => o.spec.create_request(None, None).validate(),
        // The integration a resource names is resolved by the operator: its name stands in.
        Object::McpServer(o) => {
            let named = o.spec.integration_ref.as_ref().map(|r| r.name.clone());
            let integration = o.spec.integration_id.clone().or(named);
            o.spec
                .create_request(integration.as_deref().unwrap_or("(spec.integrationRef)"))
                .validate()
        }
        // A rollout makes no API request: what the operator refuses of it is its spec.
        Object::ConfigRollout(o) => {
            let namespace = o.metadata.namespace.as_deref().unwrap_or_default();
            if let Err(message) = o.spec.check(namespace) {
                out.push(Violation {
                    path: "spec".into(),
                    message,
                });
            }
            Ok(())
        }
    };
    if let Err(e) = request {
        out.push(api_violation(e));
    }
}

/// An McpIntegration naming one workspace (or one Workspace resource) twice in
/// `spec.workspaces`, which the operator refuses (`InvalidSpec`): found before it is applied.
/// No admission rule holds it: one that compares every pair goes past the apiserver's cost
/// limit at the field's 1,000 rows, and one that sorts needs Kubernetes 1.35.
fn unique_workspaces(object: &Object, out: &mut Vec<Violation>) {
    let Object::McpIntegration(integration) = object else {
        return;
    };
    let rows = &integration.spec.workspaces;
    let by_slug: Vec<&str> = rows.iter().filter_map(|r| r.workspace.as_deref()).collect();
    let by_resource: Vec<&str> = rows
        .iter()
        .filter_map(|r| r.workspace_ref.as_ref().map(|w| w.name.as_str()))
        .collect();
    for (keys, what) in [
        (by_slug, "a workspace"),
        (by_resource, "a Workspace resource"),
    ] {
        let distinct: std::collections::BTreeSet<&str> = keys.iter().copied().collect();
        if distinct.len() < keys.len() {
            out.push(Violation {
                path: "spec.workspaces".into(),
                message: format!("spec.workspaces names {what} twice: each workspace has one row"),
            });
        }
    }
}

/// A Guardrail's `mcpServerRef` naming another namespace than the manifest's (the admission
/// policy's rule, which reads the object's namespace: checked when the manifest says it).
fn own_namespace_servers(object: &Object, out: &mut Vec<Violation>) {
    let Object::Guardrail(guardrail) = object else {
        return;
    };
    let Some(own) = guardrail.metadata.namespace.as_deref() else {
        return;
    };
    let servers = guardrail.spec.definition.mcp_servers.iter().flatten();
    for (i, server) in servers.enumerate() {
        let named = server.mcp_server_ref.as_ref();
        if let Some(other) = named.and_then(|r| r.namespace.as_deref())
            && other != own
        {
            out.push(Violation {
                path: format!("spec.mcpServers[{i}].mcpServerRef.namespace"),
                message: format!(
                    "{other}: a Guardrail names McpServers of its own namespace ({own}; leave namespace out); a ClusterGuardrail names those of any namespace"
                ),
            });
        }
    }
}

/// A `spec.promotion.after` naming the resource itself (the admission policy's rule, which
/// reads the object's namespace: a source in another namespace is checked when the manifest
/// names its own).
fn self_promotion(object: &Object, out: &mut Vec<Violation>) {
    let Some((meta, Some(promotion))) = object.promotion() else {
        return;
    };
    let Some(name) = &meta.name else {
        return;
    };
    if let Some(path) = promotion.names_itself(meta.namespace.as_deref(), name) {
        out.push(Violation {
            path,
            message: format!(
                "names this {} itself: a resource follows others",
                object.kind()
            ),
        });
    }
}

/// Refuses a `spec.rotation.interval` the operator would raise: below `min_interval` (its
/// `--min-rotation-interval`), or, for an ApiKey, below its `transitionPeriod`.
fn rotation_floor(object: &Object, min_interval: Duration, out: &mut Vec<Violation>) {
    let (interval, transition) = match object {
        Object::Deployment(o) => (o.spec.rotation_interval(), Ok(None)),
        Object::ApiKey(o) => (o.spec.rotation_interval(), o.spec.transition_period()),
        _ => return,
    };
    // An unreadable duration is reported by the operator's own checks.
    let (Ok(Some(interval)), Ok(transition)) = (interval, transition) else {
        return;
    };
    let limits = crate::resources::rotation::RotationLimits {
        min_interval,
        ..Default::default()
    };
    let floor = limits.floor(transition);
    if interval < floor {
        out.push(Violation {
            path: "spec.rotation.interval".into(),
            message: format!(
                "{} is below the floor of {} (the operator's --min-rotation-interval, or the key's transitionPeriod when longer; aigw validate --min-rotation-interval sets the one your operator runs with): the operator would rotate every {} instead",
                humantime::format_duration(interval),
                humantime::format_duration(floor),
                humantime::format_duration(floor),
            ),
        });
    }
}

/// What the operator checks of an ApiKey before any call: durations, no server-side rotation,
/// and the create request (a `defaults.config` reference is resolved only in the cluster).
fn api_key_request(key: &ApiKey, out: &mut Vec<Violation>) -> Result<(), ApiError> {
    let spec = &key.spec;
    let durations = [
        ("spec.rotation.interval", spec.rotation_interval().err()),
        (
            "spec.rotation.transitionPeriod",
            spec.transition_period().err(),
        ),
    ];
    for (path, message) in durations {
        if let Some(message) = message {
            out.push(Violation {
                path: path.into(),
                message,
            });
        }
    }
    if spec.rotation_policy.is_some() {
        out.push(Violation {
            path: "spec.rotationPolicy".into(),
            message: "refused: a server-side rotation would leave the Secret with a dead key; use spec.rotation".into(),
        });
    }
    let config_id = spec.defaults.as_ref().and_then(|d| d.config_id.as_deref());
    spec.create_request(config_id)
        .validate_for(spec.kind.to_api())
}

/// The create request of an Integration as the operator would check it: no credential in
/// `configurations` in plain text (at any depth), each Secret path set once.
fn integration_request(
    integration: &Integration,
    out: &mut Vec<Violation>,
) -> Result<(), ApiError> {
    let spec = &integration.spec;
    match MarkedDocument::new(spec) {
        Ok(marked) => spec.create_request_with(marked.document(), None).validate(),
        Err(message) => {
            out.push(Violation {
                path: "spec.configurations".into(),
                message,
            });
            Ok(())
        }
    }
}

/// An API request check, pointed at the spec field it came from.
fn api_violation(error: ApiError) -> Violation {
    match error {
        ApiError::Validation { field, reason } => Violation {
            path: format!("spec.{}", camel_case(&field)),
            message: format!("rejected by the API request check: {reason}"),
        },
        other => Violation {
            path: "spec".into(),
            message: other.to_string(),
        },
    }
}

fn camel_case(snake: &str) -> String {
    let mut out = String::with_capacity(snake.len());
    let mut upper = false;
    for c in snake.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// The names and remote objects claimed so far: two manifests of one kind with the same
/// namespace and name (the second overwrites the first on apply), or claiming the same remote
/// object through the same connection (they would undo each other's changes). Read from the raw
/// document, so a duplicate is reported even when the manifest has other problems. Offline, one
/// manifest naming an object by slug and another by its id look different: `aigw plan`, which
/// reads the object, reports those (`plan::same_remote`).
#[derive(Default)]
struct Seen {
    names: HashMap<String, String>,
    claims: HashMap<String, String>,
}

impl Seen {
    fn duplicates(
        &mut self,
        kind: &str,
        resource: &str,
        value: &Value,
        location: &str,
    ) -> Vec<Violation> {
        let mut found = Vec::new();
        match self.names.get(resource) {
            Some(first) => found.push(Violation {
                path: "metadata.name".into(),
                message: format!("duplicate: {resource} is also defined at {first}"),
            }),
            None => {
                self.names
                    .insert(resource.to_string(), location.to_string());
            }
        }
        let Some(SpecId { field, among }) = crate::registry::find(kind).and_then(|k| k.spec_id)
        else {
            return found;
        };
        let Some(id) = value["spec"][field].as_str() else {
            return found;
        };
        let connection = value["spec"]["connectionRef"]["name"]
            .as_str()
            .unwrap_or("default");
        // Both guardrail kinds name guardrails: one slug is claimed once across them.
        let key = format!("{among}/{connection}/{id}");
        match self.claims.get(&key) {
            Some(first) => found.push(Violation {
                path: format!("spec.{field}"),
                message: format!("duplicate: {kind} {id} is also claimed by {first}"),
            }),
            None => {
                self.claims.insert(key, format!("{resource} at {location}"));
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    /// `aigw validate` (and so `plan`, which takes its objects) types every kind of the registry
    /// and no other: the example of each kind (`examples/<kind>.yaml`) is typed as its kind,
    /// with its kind's scope.
    #[test]
    fn every_kind_of_the_registry_is_typed() {
        use serde::Deserialize;
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        for kind in crate::registry::KINDS {
            let file = root.join("examples").join(kind.file);
            let text = std::fs::read_to_string(&file).expect("every kind has an example");
            let mut value = serde_yaml::Deserializer::from_str(&text)
                .map(|d| serde_json::Value::deserialize(d).expect("YAML"))
                .find(|v| v["kind"] == kind.kind)
                .unwrap_or_else(|| panic!("{} has no {}", file.display(), kind.kind));
            // A namespace on a cluster-scoped object is not its namespace.
            value["metadata"]["namespace"] = "ns".into();
            let object =
                super::typed(kind.kind, &value).unwrap_or_else(|e| panic!("{}: {e}", kind.kind));
            assert_eq!(object.kind(), kind.kind);
            let scoped = object.namespace().is_some();
            assert_eq!(scoped, kind.namespaced, "{}", kind.kind);
        }
        let unknown = super::typed("Unknown", &serde_json::json!({}));
        assert!(unknown.is_err_and(|e| e.starts_with("unknown kind")));
    }

    use super::*;
    use crate::gitops::load::parse_into;

    fn validate(text: &str) -> Report {
        let mut loaded = Loaded::default();
        parse_into(&mut loaded, "t.yaml", text, false);
        Validator::new().validate(&loaded)
    }

    /// Each problem of `report` as (path, message).
    fn paths_and_messages(report: &Report) -> Vec<(&str, &str)> {
        report
            .problems
            .iter()
            .map(|p| (p.path.as_str(), p.message.as_str()))
            .collect()
    }

    const POLICY: &str = "apiVersion: aigw.io/v1alpha1\nkind: RateLimitsPolicy\nmetadata: {name: p, namespace: team-a}\nspec: {type: requests, unit: rpm, value: 10, conditions: [{key: workspace_id, value: ws}], groupBy: [{key: api_key}]}\n";

    /// A cluster-scoped kind's problems name it without the namespace its manifest gives.
    #[test]
    fn a_cluster_scoped_resource_is_named_without_a_namespace() {
        let workspace = "apiVersion: aigw.io/v1alpha1\nkind: Workspace\nmetadata: {name: w, namespace: team-a}\nspec: {name: w}\n";
        let report = validate(&format!("{workspace}---\n{workspace}"));
        let named: Vec<&str> = report
            .problems
            .iter()
            .map(|p| p.resource.as_str())
            .collect();
        assert_eq!(named, ["Workspace w"]);
    }

    /// A list or object field written `null` (`workspaces:` with nothing after it) is absent,
    /// as the apiserver stores it, not a value that does not decode.
    #[test]
    fn a_null_field_is_an_absent_one() {
        let report = validate(
            "apiVersion: aigw.io/v1alpha1\nkind: McpIntegration\nmetadata: {name: m}\nspec:\n  name: m\n  url: https://mcp.example/mcp\n  authType: none\n  transport: http\n  workspaces:\n  capabilities: null\n  description: null\n",
        );
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        assert_eq!(report.manifests.len(), 1);
    }

    /// Each workspace, and each Workspace resource, once in an McpIntegration's
    /// `spec.workspaces` (the operator refuses one twice); a slug and a resource of one name
    /// are two keys.
    #[test]
    fn an_mcp_integration_names_each_workspace_once() {
        let integration = |rows: &str| {
            validate(&format!(
                "apiVersion: aigw.io/v1alpha1\nkind: McpIntegration\nmetadata: {{name: m}}\nspec: {{name: m, url: 'https://mcp.example/mcp', authType: none, transport: http, workspaces: {rows}}}\n"
            ))
        };
        let once = integration("[{workspace: a}, {workspaceRef: {name: a}}, {workspace: b}]");
        assert!(once.problems.is_empty(), "{:?}", once.problems);
        for (rows, what) in [
            (
                "[{workspace: a}, {workspace: b}, {workspace: a, enabled: false}]",
                "a workspace",
            ),
            (
                "[{workspaceRef: {name: a}}, {workspaceRef: {name: a}}]",
                "a Workspace resource",
            ),
        ] {
            let report = integration(rows);
            let found = paths_and_messages(&report);
            assert!(
                matches!(found.as_slice(), [("spec.workspaces", m)] if m.contains(&format!("names {what} twice"))),
                "{rows}: {found:?}"
            );
        }
    }

    /// A typo in aigw's group is a problem, as kubectl would fail on it; another group's
    /// document of a kind aigw also has (`Config`, `Deployment`) is ignored.
    #[test]
    fn a_misspelt_group_is_a_problem_and_another_group_is_ignored() {
        for typo in [
            "aigw.i0/v1alpha1",
            "aigwio/v1alpha1",
            "AIGW.IO/v1alpha1",
            "aigw.com/v1",
        ] {
            let report = validate(&POLICY.replace("aigw.io/v1alpha1", typo));
            let found = paths_and_messages(&report);
            assert!(
                matches!(found.as_slice(), [("apiVersion", m)] if m.contains("aigw.io/<version>")),
                "{typo}: {found:?}"
            );
        }
        for other in ["apps/v1", "other.example/v1", "example.com/v1", "v1"] {
            let report = validate(&POLICY.replace("aigw.io/v1alpha1", other));
            assert!(report.problems.is_empty(), "{other}: {:?}", report.problems);
            assert_eq!(report.ignored, 1, "{other}");
        }
    }

    #[test]
    fn a_good_policy_is_valid_and_other_kinds_are_ignored() {
        let report = validate(&format!(
            "{POLICY}---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: team-a}}\n"
        ));
        assert!(report.is_valid(), "{:?}", report.problems);
        assert_eq!(report.ignored, 1);
        assert_eq!(report.manifests.len(), 1);
    }

    /// What the apiserver's admission refuses of a Guardrail's and a Connection's references,
    /// validate refuses too: an McpServer of another namespace, a URL aigw cannot append its
    /// paths to, a header the client sets itself; a whole number written `20.0` is an integer.
    #[test]
    fn references_and_urls_are_refused_as_admission_refuses_them() {
        let guardrail = |servers: &str| {
            format!(
                "apiVersion: aigw.io/v1alpha1\nkind: Guardrail\nmetadata: {{name: g, namespace: team-a}}\nspec: {{name: g, workspaceId: ws, target: mcp_tools, checks: [{{id: default.regexMatch, parameters: {{rule: x}}}}], mcpServers: {servers}}}\n"
            )
        };
        let refused = validate(&guardrail(
            "[{mcpServerRef: {name: s, namespace: kube-system}}]",
        ));
        assert!(
            paths_and_messages(&refused).iter().any(|(path, message)| {
                *path == "spec.mcpServers[0].mcpServerRef.namespace"
                    && message.contains("its own namespace")
            }),
            "{:?}",
            refused.problems
        );
        assert_verdicts(
            guardrail,
            &[
                "[{mcpServerRef: {name: s, namespace: team-a}}]",
                "[{mcpServerRef: {name: s}}]",
                "null",
            ],
            // One McpServer named twice.
            &["[{mcpServerRef: {name: s}}, {mcpServerRef: {name: s, namespace: team-a}}]"],
        );
        let connection = |extra: &str| {
            format!(
                "apiVersion: aigw.io/v1alpha1\nkind: Connection\nmetadata: {{name: c}}\nspec: {{auth: {{bearerToken: {{secretRef: {{namespace: aigw, name: t, key: token}}}}}}, {extra}}}\n"
            )
        };
        assert_verdicts(
            connection,
            &[
                "managementUrl: HTTPS://api.example.com, burst: 20.0",
                "managementUrl: 'http://[::1]:8080/api'",
                "managementUrl: 'http://127.0.0.1:34567', gatewayUrl: 'https://a_b.example/v1'",
                "managementUrl: https://api.example, headers: [{name: x-tsg-id, value: '1'}]",
            ],
            &[
                "managementUrl: 'https://api.example.com/base?x=1'",
                "managementUrl: 'http://x:99999'",
                "managementUrl: 'https://'",
                "managementUrl: 'http://x/%zz'",
                "managementUrl: https://api.example, headers: [{name: Authorization, value: 'Bearer x'}]",
                "managementUrl: 'https://user:pw@api.example'",
                "managementUrl: 'https://10.0.0.256'",
                "managementUrl: 'https://ex%41mple.com'",
                "managementUrl: 'https://h.example:80:80'",
                "managementUrl: ' https:///user:pw@api.example'",
            ],
        );
    }

    /// A URL with a password where a string belongs (a list), or made an integer by a YAML tag,
    /// is refused without the password: as the apiserver, validate evaluates no rule of an
    /// object with a value of the wrong type (a rule's error quoted the list), and a decoding
    /// error says the type, not the value.
    #[test]
    fn a_value_of_the_wrong_type_is_refused_without_quoting_it() {
        for url in [
            "['https://user:PW-MARK-1@api.example']",
            "!!int https://user:PW-MARK-1@api.example",
        ] {
            let report = validate(&format!(
                "apiVersion: aigw.io/v1alpha1\nkind: Connection\nmetadata: {{name: c}}\nspec:\n  managementUrl: {url}\n  auth: {{bearerToken: {{secretRef: {{namespace: aigw, name: t, key: token}}}}}}\n"
            ));
            let said = format!("{:?}", report.problems);
            assert!(!report.is_valid(), "{url}");
            assert!(!said.contains("PW-MARK-1"), "{said}");
            assert!(!said.contains("rule"), "{said}");
        }
        // No space after the colon: the key is the field and its value, an unknown field.
        let report = validate(
            "apiVersion: aigw.io/v1alpha1\nkind: Deployment\nmetadata: {name: d, namespace: a}\nspec: {name: d, type: production, credentialsSecretRef: {name: c}, authSettings: {allowAllWorkspaces: false, gatewayBaseUrl:https://u:PW-MARK-2@gw.example}}\n",
        );
        let said = format!("{:?}", report.problems);
        assert!(said.contains("unknown field"), "{said}");
        assert!(said.contains("spec.authSettings.gatewayBaseUrl…"), "{said}");
        assert!(!said.contains("PW-MARK-2"), "{said}");
        // A missing required field blocks the rules too (one failed to evaluate without it).
        let report = validate(
            "apiVersion: aigw.io/v1alpha1\nkind: McpIntegration\nmetadata: {name: m}\nspec: {name: m, authType: none, transport: http}\n",
        );
        let said = format!("{:?}", report.problems);
        assert!(said.contains("Required value"), "{said}");
        assert!(!said.contains("rule"), "{said}");
        // Whitespace as the apiserver's regex reads it (ASCII only): a no-break space inside
        // an embedded URL's authority is refused by both, a plain space by neither (an attack
        // of stop 82 found validate admitting the first).
        let gateway = |url: &str| {
            format!(
                "apiVersion: aigw.io/v1alpha1\nkind: Deployment\nmetadata: {{name: d}}\nspec: {{name: d, type: production, credentialsSecretRef: {{name: c}}, authSettings: {{gatewayBaseUrl: \"{url}\"}}}}\n"
            )
        };
        let report = validate(&gateway("see https://u\u{a0}:pw@evil"));
        let said = format!("{:?}", report.problems);
        assert!(said.contains("must not carry credentials"), "{said}");
        let report = validate(&gateway("see https://u :pw@evil"));
        assert!(report.is_valid(), "{:?}", report.problems);
    }

    /// What kubectl refuses as no Kubernetes object is a problem, not another tool's document
    /// to ignore; an empty document and a byte-order mark are nothing.
    #[test]
    fn a_document_without_apiversion_or_kind_is_refused() {
        for text in [
            "kind: Connection\nmetadata: {name: c}\n",
            "apiVersion: aigw.io/v1alpha1\nmetadata: {name: c}\n",
            "- apiVersion: aigw.io/v1alpha1\n  kind: Connection\n",
            "just text\n",
        ] {
            let report = validate(text);
            assert!(!report.is_valid(), "{text}");
            assert!(
                report.problems[0]
                    .message
                    .contains("not a Kubernetes object"),
                "{text}: {:?}",
                report.problems
            );
        }
        let report = validate(&format!("\u{feff}{POLICY}---\n"));
        assert!(report.is_valid(), "{:?}", report.problems);
        assert_eq!(report.manifests.len(), 1);
    }

    /// An object larger than etcd stores is refused, saying so (the apiserver's refusal,
    /// "etcdserver: request is too large", names nothing); one within it is not.
    #[test]
    fn an_object_too_large_for_etcd_is_refused() {
        let config = |n: usize| {
            format!(
                "apiVersion: aigw.io/v1alpha1\nkind: Config\nmetadata: {{name: big}}\nspec: {{name: big, config: {{metadata: {{note: {}}}}}}}\n",
                "x".repeat(n)
            )
        };
        let report = validate(&config(1_600_000));
        let said = format!("{:?}", report.problems);
        assert!(said.contains("Kubernetes stores at most 1572864"), "{said}");
        let report = validate(&config(1_400_000));
        assert!(report.is_valid(), "{:?}", report.problems);
    }

    /// Each of `valid`, made a manifest by `manifest`, is valid; each of `refused` is not.
    fn assert_verdicts(manifest: impl Fn(&str) -> String, valid: &[&str], refused: &[&str]) {
        for part in valid {
            let report = validate(&manifest(part));
            assert!(report.is_valid(), "{part}: {:?}", report.problems);
        }
        for part in refused {
            assert!(!validate(&manifest(part)).is_valid(), "{part}");
        }
    }

    /// A promotion that follows the resource itself is refused, as the admission policy refuses
    /// it; a source of its name in another namespace is another resource.
    #[test]
    fn a_promotion_that_follows_the_resource_itself_is_refused() {
        let config = |after: &str| {
            format!(
                "apiVersion: aigw.io/v1alpha1\nkind: Config\nmetadata: {{name: prod, namespace: team-a}}\nspec: {{name: prod, config: {{retry: {{attempts: 2}}}}, promotion: {{after: {after}, soak: 1m}}}}\n"
            )
        };
        let report = validate(&config("[{name: dev}, {name: prod}]"));
        assert_eq!(
            paths_and_messages(&report),
            [(
                "spec.promotion.after[1]",
                "names this Config itself: a resource follows others"
            )]
        );
        assert_verdicts(
            config,
            &["[{name: dev}]", "[{name: prod, namespace: dev}]"],
            &["[{name: prod, namespace: team-a}]"],
        );
        let cluster = "apiVersion: aigw.io/v1alpha1\nkind: ClusterGuardrail\nmetadata: {name: pii}\nspec: {name: pii, workspaceId: ws, checks: [{id: default.regexMatch, parameters: {rule: x}}], promotion: {after: [{name: pii}], soak: 1m}}\n";
        assert!(!validate(cluster).is_valid());
    }

    /// A workspace is named by id or by Workspace resource, not both; a Provider names one.
    #[test]
    fn a_workspace_is_named_once_by_id_or_by_resource() {
        let by_ref = POLICY.replace("value: 10,", "value: 10, workspaceRef: {name: payments},");
        assert!(validate(&by_ref).is_valid());
        let both = POLICY.replace(
            "value: 10,",
            "value: 10, workspaceRef: {name: payments}, workspaceId: ws-1,",
        );
        let report = validate(&both);
        assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
        assert_eq!(report.problems[0].path, "spec.workspaceRef");
        let provider = "apiVersion: aigw.io/v1alpha1\nkind: Provider\nmetadata: {name: p, namespace: team-a}\nspec: {name: p, integration: openai}\n";
        let report = validate(provider);
        assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
        assert!(
            report.problems[0].message.contains("exactly one"),
            "{:?}",
            report.problems
        );
        let by_ref = provider.replace(
            "integration: openai",
            "integration: openai, workspaceRef: {name: payments}",
        );
        assert!(validate(&by_ref).is_valid());
    }

    #[test]
    fn schema_problems_name_the_field() {
        let bad = POLICY
            .replace("unit: rpm", "unit: rps")
            .replace("groupBy: [{key: api_key}]", "groupBy: []");
        let report = validate(&bad);
        let paths: Vec<&str> = report.problems.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(
            paths,
            vec!["spec.groupBy", "spec.unit"],
            "{:?}",
            report.problems
        );
        assert_eq!(report.problems[0].resource, "RateLimitsPolicy team-a/p");
        assert_eq!(report.problems[0].location, "t.yaml#0");
    }

    /// The bounds every spec string, list and map carries ([`crate::resources::bounds`]) are
    /// checked offline as admission checks them, naming the field.
    #[test]
    fn unbounded_strings_lists_and_maps_are_refused_naming_the_field() {
        let long = "a".repeat(crate::resources::bounds::MAX_STRING as usize + 1);
        let conditions = vec!["{key: workspace_id, value: ws}"; 1001].join(", ");
        let bad = POLICY
            .replace(
                "value: 10,",
                &format!("value: 10, connectionRef: {{name: {long}}},"),
            )
            .replace(
                "[{key: workspace_id, value: ws}]",
                &format!("[{conditions}]"),
            );
        let report = validate(&bad);
        let paths: Vec<&str> = report.problems.iter().map(|p| p.path.as_str()).collect();
        assert!(paths.contains(&"spec.conditions"), "{:?}", report.problems);
        assert!(
            paths.contains(&"spec.connectionRef.name"),
            "{:?}",
            report.problems
        );
        let tags = (0..1001)
            .map(|n| format!("t{n}: v"))
            .collect::<Vec<_>>()
            .join(", ");
        let reference = format!(
            "apiVersion: aigw.io/v1alpha1\nkind: SecretReference\nmetadata: {{name: r}}\nspec: {{name: vault, managerType: hashicorp_vault, authConfigSecretRef: {{name: s}}, tags: {{{tags}}}}}\n"
        );
        let report = validate(&reference);
        let tagged = report.problems.iter().find(|p| p.path == "spec.tags");
        assert!(
            tagged.is_some_and(|p| p.message.contains("at most 1000")),
            "{:?}",
            report.problems
        );
    }

    /// A flow mapping `levels` objects deep: `{a: {a: … 1 …}}`.
    fn nested_yaml(levels: usize) -> String {
        format!("{}1{}", "{a: ".repeat(levels), "}".repeat(levels))
    }

    #[test]
    fn free_form_fields_deeper_than_the_bound_are_refused_naming_the_field() {
        let config = "apiVersion: aigw.io/v1alpha1\nkind: Config\nmetadata: {name: c, namespace: a}\nspec: {name: c, config: {metadata: DOC}}\n";
        // spec.config itself is the first of its levels.
        let within = validate(&config.replace("DOC", &nested_yaml(31)));
        assert!(within.is_valid(), "{:?}", within.problems);
        // 150 levels: past the YAML parser's own recursion limit (128), still named.
        for levels in [32, 150] {
            let report = validate(&config.replace("DOC", &nested_yaml(levels)));
            let problems = paths_and_messages(&report);
            assert_eq!(problems.len(), 1, "{levels}: {problems:?}");
            assert_eq!(problems[0].0, "spec.config", "{levels}");
            assert!(
                problems[0].1.starts_with("nested deeper than 32 levels"),
                "{}",
                problems[0].1
            );
            assert_eq!(report.problems[0].resource, "Config a/c");
        }

        let guardrail = format!(
            "apiVersion: aigw.io/v1alpha1\nkind: Guardrail\nmetadata: {{name: g, namespace: a}}\nspec: {{name: g, checks: [{{id: default.regexMatch, parameters: {{rule: x}}}}, {{id: default.regexMatch, parameters: {}}}]}}\n",
            nested_yaml(150)
        );
        let report = validate(&guardrail);
        let paths: Vec<&str> = report.problems.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(
            paths,
            ["spec.checks[1].parameters"],
            "{:?}",
            report.problems
        );

        let json = serde_json::json!({
            "apiVersion": "aigw.io/v1alpha1", "kind": "Config",
            "metadata": {"name": "c", "namespace": "a"},
            "spec": {"name": "c", "config": {"metadata": "DOC"}},
        })
        .to_string()
        .replace(
            "\"DOC\"",
            &format!("{}1{}", "[".repeat(150), "]".repeat(150)),
        );
        let mut loaded = Loaded::default();
        parse_into(&mut loaded, "t.json", &json, true);
        let report = Validator::new().validate(&loaded);
        let paths: Vec<&str> = report.problems.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(paths, ["spec.config"], "{:?}", report.problems);
    }

    #[test]
    fn free_form_fields_of_more_values_than_the_bound_are_refused() {
        let values: Vec<String> = (0..25_000).map(|i| i.to_string()).collect();
        let config = format!(
            "apiVersion: aigw.io/v1alpha1\nkind: Config\nmetadata: {{name: c, namespace: a}}\nspec: {{name: c, config: {{metadata: {{words: [{}]}}}}}}\n",
            values.join(", ")
        );
        let report = validate(&config);
        let problems = paths_and_messages(&report);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].0, "spec.config");
        assert!(
            problems[0].1.starts_with("more than 25000 values"),
            "{}",
            problems[0].1
        );
    }

    #[test]
    fn credentials_are_refused_at_any_depth_and_never_quoted() {
        let config = "apiVersion: aigw.io/v1alpha1\nkind: Config\nmetadata: {name: c, namespace: a}\nspec: {name: c, config: CONFIG}\n";
        let top = validate(&config.replace("CONFIG", "{vertex_service_account_json: vx-hidden}"));
        let deep = validate(&config.replace(
            "CONFIG",
            "{targets: [{targets: [{targets: [{targets: [{azure_ad_token: az-hidden}]}]}]}]}",
        ));
        for (report, path) in [
            (top, "vertex_service_account_json"),
            (deep, "azure_ad_token"),
        ] {
            assert!(!report.is_valid());
            let text: Vec<String> = report.problems.iter().map(|p| p.to_string()).collect();
            let text = text.join("\n");
            assert!(text.contains(path), "{text}");
            assert!(!text.contains("-hidden"), "{text}");
        }
    }

    #[test]
    fn the_connection_cel_rule_is_evaluated() {
        let report = validate(
            "apiVersion: aigw.io/v1alpha1\nkind: Connection\nmetadata: {name: c}\nspec: {managementUrl: 'http://x', auth: {}}\n",
        );
        assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
        assert_eq!(report.problems[0].path, "spec.auth");
        assert!(
            report.problems[0]
                .message
                .contains("exactly one of bearerToken")
        );
    }

    #[test]
    fn a_bad_rotation_interval_and_duplicates_are_found() {
        let deployment = "apiVersion: aigw.io/v1alpha1\nkind: Deployment\nmetadata: {name: d}\nspec: {name: d, deploymentId: x, credentialsSecretRef: {name: s}, rotation: {interval: 5y}}\n";
        let report = validate(deployment);
        assert_eq!(report.problems[0].path, "spec.rotation.interval");
        let ok = deployment.replace("interval: 5y", "interval: 720h");
        let twice = format!("{ok}---\n{}", ok.replace("name: d}", "name: e}"));
        let report = validate(&twice);
        assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
        assert_eq!(report.problems[0].path, "spec.deploymentId");
        assert_eq!(report.problems[0].location, "t.yaml#1");
    }

    /// A remote object is claimed once among the kinds the registry's `spec_id` puts it with:
    /// a slug across both guardrail kinds, a policy id per policy kind.
    #[test]
    fn a_remote_object_is_claimed_once_among_its_kinds() {
        let claimed_twice = |text: &str| -> Vec<String> {
            validate(text)
                .problems
                .into_iter()
                .filter(|p| p.message.contains("is also claimed by"))
                .map(|p| format!("{} {}", p.resource, p.path))
                .collect()
        };
        let guardrails = "apiVersion: aigw.io/v1alpha1\nkind: Guardrail\nmetadata: {name: g, namespace: a}\nspec: {name: g, slug: s1, checks: []}\n---\napiVersion: aigw.io/v1alpha1\nkind: ClusterGuardrail\nmetadata: {name: c}\nspec: {name: c, slug: s1, checks: []}\n";
        assert_eq!(claimed_twice(guardrails), ["ClusterGuardrail c spec.slug"]);
        let with_id = |text: &str| text.replace("spec: {", "spec: {policyId: p1, ");
        let policies = format!(
            "{}---\n{}",
            with_id(POLICY),
            with_id(&POLICY.replace("RateLimitsPolicy", "UsageLimitsPolicy"))
        );
        assert_eq!(claimed_twice(&policies), Vec::<String>::new());
        let twice = format!(
            "{}---\n{}",
            with_id(POLICY),
            with_id(&POLICY.replace("name: p,", "name: q,"))
        );
        assert_eq!(
            claimed_twice(&twice),
            ["RateLimitsPolicy team-a/q spec.policyId"]
        );
    }

    #[test]
    fn a_rotation_interval_below_the_floor_is_refused_naming_the_field() {
        let deployment = "apiVersion: aigw.io/v1alpha1\nkind: Deployment\nmetadata: {name: d}\nspec: {name: d, credentialsSecretRef: {name: s}, rotation: {interval: 1s}}\n";
        let at_interval = |report: &Report| {
            report
                .problems
                .iter()
                .filter(|p| p.path == "spec.rotation.interval")
                .map(|p| p.message.clone())
                .collect::<Vec<_>>()
        };
        for short in ["1s", "59m"] {
            let report = validate(&deployment.replace("1s", short));
            assert_eq!(
                at_interval(&report).len(),
                1,
                "{short}: {:?}",
                report.problems
            );
        }
        let message = &at_interval(&validate(deployment))[0];
        assert!(message.contains("below the floor of 1h"), "{message}");
        for long in ["1h", "30d", "1d12h"] {
            let report = validate(&deployment.replace("1s", long));
            assert!(report.problems.is_empty(), "{long}: {:?}", report.problems);
        }
        // Admission's own rules: never zero, whole days.
        let report = validate(&deployment.replace("1s", "0s"));
        assert!(
            report
                .problems
                .iter()
                .any(|p| p.message.contains("longer than zero")),
            "{:?}",
            report.problems
        );
        let report = validate(&deployment.replace("1s", "0.5d"));
        assert!(!at_interval(&report).is_empty(), "{:?}", report.problems);

        // An operator run with a lower floor: validate told so accepts what it rotates at.
        let mut loaded = Loaded::default();
        parse_into(&mut loaded, "t.yaml", deployment, false);
        let lowered = Validator::new().with_min_rotation_interval(Duration::from_secs(1));
        assert!(lowered.validate(&loaded).problems.is_empty());

        // An ApiKey: never below its transition period, whatever the operator's floor.
        let key = "apiVersion: aigw.io/v1alpha1\nkind: ApiKey\nmetadata: {name: k}\nspec: {name: k, kind: service, scopes: [completions.write], secretRef: {name: s}, rotation: {interval: 2h, transitionPeriod: 3h}}\n";
        let mut loaded = Loaded::default();
        parse_into(&mut loaded, "t.yaml", key, false);
        let problems = lowered.validate(&loaded).problems;
        let messages: Vec<&str> = problems
            .iter()
            .filter(|p| p.path == "spec.rotation.interval")
            .map(|p| p.message.as_str())
            .collect();
        assert!(
            messages
                .iter()
                .any(|m| m.contains("at least spec.rotation.transitionPeriod")),
            "admission's rule: {problems:?}"
        );
        let report = validate(&key.replace("interval: 2h", "interval: 3h"));
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        let report = validate(&key.replace("interval: 2h", "interval: 1d"));
        assert!(report.problems.is_empty(), "{:?}", report.problems);
    }
}
