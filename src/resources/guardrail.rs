//! The `Guardrail` kind: a workspace guardrail (the checks a config's `input_guardrails`,
//! `output_guardrails` or hooks name), with check parameters that may come from Secrets.

use super::common::DeletionPolicy;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::rules;
use serde_json::{Map, Value, json};

use super::common::Recorded;
use super::config::{AppliedVersion, ConfigSecretRef, ReferencedKind};
use super::config_document::SecretDocument;
use super::managed_spec::ManagedSpec;
use super::managed_status::{ManagedStatus, embeds_managed};
use super::promotion::RevisionOrder;
use crate::api;

/// A workspace guardrail (`/ai_gw/v2/guardrails`). Every change of `name`, `checks` or
/// `actions` is applied with one PUT, which replaces the checks and actions and mints a new
/// `status.versionId`; `workspaceId` and `target` are fixed at creation.
// kube's printcolumn(...) lists repeat `type_ = "string"`, which this lint misreads.
#[allow(clippy::duplicated_attributes)]
#[skip_serializing_none]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "aigw.io",
    doc = "A workspace guardrail of the AI gateway, kept in line with the management API by aigw.",
    version = "v1alpha1",
    kind = "Guardrail",
    plural = "guardrails",
    shortname = "aigwgr",
    category = "aigw",
    namespaced,
    status = "GuardrailStatus",
    printcolumn(name = "Slug", type_ = "string", json_path = ".status.slug"),
    printcolumn(name = "VersionId", type_ = "string", json_path = ".status.versionId")
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = rules::set_at_creation("slug", "Guardrail"))]
#[x_kube(validation = rules::set_at_creation("workspaceId", "Guardrail"))]
#[x_kube(validation = rules::fixed_defaulting("target", "llm", "Guardrail"))]
#[x_kube(validation = rules::same_connection("Guardrail"))]
// A workspace guardrail is created in one workspace: the API requires `workspace_id`, so a spec
// naming none is refused here rather than by a 400 on its first create.
#[x_kube(validation = Rule::new("has(self.workspaceId) != has(self.workspaceRef)").field_path(".workspaceRef").reason(Reason::FieldValueRequired).message("set exactly one of spec.workspaceId (a workspace's UUID) or spec.workspaceRef (a Workspace resource): a workspace guardrail lives in one workspace"))]
#[x_kube(validation = rules::set_at_creation("workspaceRef", "Guardrail"))]
// Its McpServers are of its own namespace (the admission policy refuses another): one is named
// once, by name.
#[x_kube(validation = Rule::new("!has(self.mcpServers) || self.mcpServers.all(s, !has(s.mcpServerRef) || self.mcpServers.exists_one(t, has(t.mcpServerRef) && t.mcpServerRef.name == s.mcpServerRef.name))").field_path(".mcpServers").reason(Reason::FieldValueInvalid).message("spec.mcpServers names one McpServer (by name) twice"))]
pub struct GuardrailSpec {
    /// UUID of the workspace the guardrail belongs to (the API requires one for a workspace
    /// guardrail). Immutable.
    #[x_kube(validation = Rule::new("self == oldSelf").message("workspaceId is immutable: create a new Guardrail to move it to another workspace"))]
    #[schemars(length(min = 1))]
    pub workspace_id: Option<String>,

    /// The Workspace resource whose workspace the guardrail belongs to, instead of `workspaceId` (set
    /// exactly one of the two): the UUID it recorded is used once it is Ready, and the Connection's grants
    /// apply to that workspace. Immutable.
    #[x_kube(validation = Rule::new("self == oldSelf").message("workspaceRef is immutable: create a new Guardrail to move it to another workspace"))]
    pub workspace_ref: Option<super::common::WorkspaceRef>,

    /// Everything else, which `ClusterGuardrail` says the same way.
    #[serde(flatten)]
    pub definition: GuardrailDefinition,
}

/// An organisation guardrail (`/ai_gw/admin/v2/guardrails`), for every workspace: only those
/// who may create cluster-scoped objects (cluster administrators, by Kubernetes RBAC) can make
/// one. Like `Guardrail`, every change of `name`, `checks` or `actions` is one PUT; `target`
/// is fixed at creation.
// kube's printcolumn(...) lists repeat `type_ = "string"`, which this lint misreads.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "aigw.io",
    doc = "An organisation guardrail of the AI gateway (cluster-scoped), kept in line with the management API by aigw.",
    version = "v1alpha1",
    kind = "ClusterGuardrail",
    plural = "clusterguardrails",
    shortname = "aigwcgr",
    category = "aigw",
    status = "GuardrailStatus",
    printcolumn(name = "Slug", type_ = "string", json_path = ".status.slug"),
    printcolumn(name = "VersionId", type_ = "string", json_path = ".status.versionId")
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = rules::set_at_creation("slug", "ClusterGuardrail"))]
#[x_kube(validation = rules::fixed_defaulting("target", "llm", "ClusterGuardrail"))]
#[x_kube(validation = rules::same_connection("ClusterGuardrail"))]
#[x_kube(validation = Rule::new("!has(self.promotion) || self.promotion.after.all(a, !has(a.__namespace__))").field_path(".promotion.after").reason(Reason::FieldValueForbidden).message("spec.promotion.after of a ClusterGuardrail names other ClusterGuardrails, which are cluster-scoped: leave namespace out"))]
#[x_kube(validation = Rule::new("!has(self.mcpServers) || self.mcpServers.all(s, !has(s.mcpServerRef) || has(s.mcpServerRef.__namespace__))").field_path(".mcpServers").reason(Reason::FieldValueRequired).message("spec.mcpServers[].mcpServerRef of a ClusterGuardrail must set namespace: McpServers are namespaced, and a ClusterGuardrail has none of its own"))]
// `namespace` is a CEL keyword: a field of that name is `__namespace__` in a rule, which
// Kubernetes before 1.32 requires (1.32 accepts the plain name too).
// Its McpServers say their namespaces: namesakes of two namespaces are two servers.
#[x_kube(validation = Rule::new("!has(self.mcpServers) || self.mcpServers.all(s, !has(s.mcpServerRef) || self.mcpServers.exists_one(t, has(t.mcpServerRef) && t.mcpServerRef == s.mcpServerRef))").field_path(".mcpServers").reason(Reason::FieldValueInvalid).message("spec.mcpServers names one McpServer (by namespace and name) twice"))]
pub struct ClusterGuardrailSpec {
    /// The guardrail, said as a `Guardrail` says it (without a workspace).
    #[serde(flatten)]
    pub definition: GuardrailDefinition,
}

/// What a `Guardrail` and a `ClusterGuardrail` say of their guardrail.
#[skip_serializing_none]
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GuardrailDefinition {
    /// Slug (or UUID) of an existing guardrail to adopt. When absent, aigw creates one and
    /// records its slug in `status.slug`. Only set at creation.
    #[x_kube(validation = Rule::new("self == oldSelf").message("slug is immutable: create a new resource to adopt another guardrail"))]
    pub slug: Option<String>,

    /// Display name of the guardrail.
    #[schemars(length(min = 1, max = 255))]
    pub name: String,

    /// What the guardrail checks: `llm` (model calls, the default) or `mcp_tools`. Immutable;
    /// absent means `llm`, so writing `target: llm` out later, or leaving it out again, is no
    /// change.
    #[x_kube(validation = Rule::new("self == oldSelf").message("target is immutable: create a new resource to change it"))]
    pub target: Option<GuardrailTarget>,

    /// The checks, in order; at least one. Each update replaces them all.
    #[schemars(length(min = 1, max = 64))]
    pub checks: Vec<GuardrailCheck>,

    /// What happens when the checks pass or fail. Each update replaces it.
    #[serde(default)]
    pub actions: GuardrailActions,

    /// Check parameters taken from Secrets, substituted when the guardrail is sent and never
    /// shown anywhere else: each names a JSON Pointer into the guardrail's document `{checks,
    /// actions}` (e.g. `/checks/0/parameters/api_key`) and a Secret key. A `Guardrail` reads
    /// the Secrets of its namespace; a `ClusterGuardrail` those of the namespace the operator
    /// reads Connection Secrets from (`--connection-secret-namespace`, the chart's release
    /// namespace) labelled `aigw.io/cluster-readable: "true"`. A change of a referenced Secret
    /// is applied with one PUT within seconds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub secret_refs: Vec<ConfigSecretRef>,

    /// What happens to the remote guardrail when this resource is deleted: `Delete` (the
    /// default) or `Orphan`. A guardrail that a Config still names (a Config of the same
    /// namespace; of any namespace for a `ClusterGuardrail`) is not deleted until that
    /// reference is gone.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,

    /// Management policy and Connection: the block every kind keeps.
    #[serde(flatten)]
    pub managed: ManagedSpec,

    /// Gates every change of this guardrail behind other resources of its kind that must have
    /// run it first, e.g. prod's after dev's: see `after` and `soak`. The annotation
    /// `aigw.io/promote-now: <revision>` lets exactly that revision through at once.
    pub promotion: Option<super::promotion::Promotion>,

    /// The MCP servers the guardrail applies to (their tool calls; a guardrail with `target:
    /// mcp_tools`): the complete set. When what the API lists differs, aigw sends the whole set
    /// in one bulk write, so a mapping made outside aigw is removed; `[]` removes every
    /// mapping; absent, the mappings are left as the API has them. A `Guardrail` may name only
    /// servers of its own workspace. Each entry names its server by UUID (`id`) or by McpServer
    /// resource (`mcpServerRef`), resolved to the UUID it recorded once it is Ready (until then
    /// the guardrail's mappings wait, `McpServerNotReady`). At most 128: the rules that name
    /// each server once compare every pair, and past about 170 names of 253 characters they go
    /// beyond the apiserver's cost limit per rule at run time.
    #[schemars(length(max = 128))]
    #[x_kube(validation = Rule::new("self.all(s, !has(s.id) || self.exists_one(t, has(t.id) && t.id == s.id))").message("spec.mcpServers names one MCP server twice"))]
    pub mcp_servers: Option<Vec<GuardrailMcpServer>>,
}
embeds_managed!(GuardrailDefinition, ManagedSpec);

/// One MCP server a guardrail applies to, by UUID or by McpServer resource.
#[skip_serializing_none]
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.id) != has(self.mcpServerRef)").message("a spec.mcpServers entry names its server once: set id (a UUID) or mcpServerRef (an McpServer resource)"))]
pub struct GuardrailMcpServer {
    /// UUID of the MCP server.
    #[schemars(length(min = 1, max = 255))]
    pub id: Option<String>,
    /// Or: an McpServer resource, standing for the server it recorded (`status.id`). A
    /// Guardrail names one of its own namespace (`namespace` absent or its own); a
    /// ClusterGuardrail must say the namespace.
    pub mcp_server_ref: Option<McpServerResourceRef>,
    /// What the guardrail checks of the server's tool calls: `input`, `output` or both (the
    /// default).
    #[schemars(length(min = 1, max = 2))]
    pub run_on: Option<Vec<McpRunOn>>,
    /// The capabilities (tools) of the server's MCP integration the mapping is limited to, by
    /// UUID; empty: all of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256))]
    pub capability_ids: Vec<String>,
}

/// An McpServer resource, by name (and namespace).
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct McpServerResourceRef {
    /// Its `metadata.name`.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Its namespace: for a Guardrail absent (its own) or its own; required for a
    /// ClusterGuardrail.
    #[schemars(length(min = 1, max = 63))]
    pub namespace: Option<String>,
}

/// When a guardrail runs on an MCP server's tool calls.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum McpRunOn {
    /// The tool call's arguments.
    Input,
    /// The tool's result.
    Output,
}

impl McpRunOn {
    pub fn as_str(self) -> &'static str {
        match self {
            McpRunOn::Input => "input",
            McpRunOn::Output => "output",
        }
    }
}

impl GuardrailMcpServer {
    /// `run_on` as the API takes it (the default written out), sorted.
    pub fn run_on(&self) -> Vec<String> {
        let mut run_on: Vec<McpRunOn> = match &self.run_on {
            Some(r) if !r.is_empty() => r.clone(),
            _ => vec![McpRunOn::Input, McpRunOn::Output],
        };
        run_on.sort();
        run_on.dedup();
        run_on.into_iter().map(|r| r.as_str().to_string()).collect()
    }

    /// A mapping the API lists, in the spec's terms (a `run_on` value the spec cannot say is
    /// dropped, so the mapping differs from any spec).
    pub fn listed(row: &api::McpServerMapping) -> Self {
        let run_on = row
            .run_on
            .iter()
            .filter_map(|r| serde_json::from_value(Value::String(r.clone())).ok())
            .collect();
        Self {
            id: Some(row.mcp_server_id.clone()),
            mcp_server_ref: None,
            run_on: Some(run_on),
            capability_ids: row.capability_ids.clone(),
        }
    }

    /// `servers` as they compare: by id, each `runOn` written out and sorted, its capability
    /// ids sorted. Two sets are the same mappings exactly when these are equal.
    pub fn normalized(servers: &[Self]) -> Vec<Self> {
        let mut normalized: Vec<Self> = servers
            .iter()
            .map(|s| {
                let mut run_on: Vec<McpRunOn> = match &s.run_on {
                    Some(r) if !r.is_empty() => r.clone(),
                    Some(_) => Vec::new(),
                    None => vec![McpRunOn::Input, McpRunOn::Output],
                };
                run_on.sort();
                run_on.dedup();
                let mut capability_ids = s.capability_ids.clone();
                capability_ids.sort();
                capability_ids.dedup();
                Self {
                    id: s.id.clone(),
                    mcp_server_ref: s.mcp_server_ref.clone(),
                    run_on: Some(run_on),
                    capability_ids,
                }
            })
            .collect();
        normalized.sort_by(|a, b| a.id.cmp(&b.id));
        normalized
    }
}

/// One check of a guardrail.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GuardrailCheck {
    /// The check's id, e.g. `default.regexMatch` or `panw-prisma-airs.intercept`.
    #[schemars(length(min = 1, max = 255))]
    pub id: String,
    /// The check's parameters, as the API takes them (free-form). Credentials go in
    /// `spec.secretRefs`, never here.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    #[schemars(schema_with = "free_form")]
    pub parameters: Map<String, Value>,
    /// Display name of the check.
    pub name: Option<String>,
    /// False disables the check; true (the default) runs it.
    pub is_enabled: Option<bool>,
}

/// What happens on a guardrail's verdict.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GuardrailActions {
    /// Deny the request when a check fails.
    #[serde(default)]
    pub deny: bool,
    /// Run the checks without holding the request.
    #[serde(default)]
    pub r#async: bool,
    /// Run the checks one after another (the live API's `sequential`).
    pub sequential: Option<bool>,
    /// Feedback recorded when the checks pass.
    pub on_success: Option<Feedback>,
    /// Feedback recorded when a check fails.
    pub on_fail: Option<Feedback>,
}

/// A feedback action: the value and weight recorded, with metadata.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Feedback {
    /// The feedback value (the API's default: 5 on success, -5 on failure).
    pub value: f64,
    /// Its weight (default 1).
    #[serde(default = "one")]
    pub weight: f64,
    /// Metadata recorded with the feedback: a string, as the API types it (default empty).
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "metadata_text"
    )]
    #[schemars(length(max = 4096))]
    pub metadata: String,
}

fn one() -> f64 {
    1.0
}

fn free_form(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

/// Reads `metadata` as a string. Objects written before it was typed as the API types it (a
/// string) are still read, as their JSON text (`{}` as empty), so a resource stored by an
/// earlier release keeps reconciling; the next write sends that text.
fn metadata_text<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    Ok(match Value::deserialize(deserializer)? {
        Value::Null => String::new(),
        Value::String(text) => text,
        Value::Object(map) if map.is_empty() => String::new(),
        other => other.to_string(),
    })
}

/// What a guardrail checks.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GuardrailTarget {
    /// Model calls.
    Llm,
    /// MCP tool calls.
    McpTools,
}

impl GuardrailTarget {
    fn as_api(self) -> &'static str {
        match self {
            GuardrailTarget::Llm => "llm",
            GuardrailTarget::McpTools => "mcp_tools",
        }
    }
}

/// What the management API reports about the guardrail.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GuardrailStatus {
    /// Generation, conditions, create intent and claim: the block every kind keeps.
    #[serde(flatten)]
    pub managed: ManagedStatus,
    /// UUID of the remote guardrail.
    pub id: Option<String>,
    /// Slug of the remote guardrail: what a Config names.
    pub slug: Option<String>,
    /// The `version_id` of the guardrail as aigw last wrote or read it.
    pub version_id: Option<String>,
    /// When aigw last wrote the guardrail.
    pub last_applied_at: Option<String>,
    /// The versions aigw applied, newest first (at most 10).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<AppliedVersion>,
    /// The order in which the revisions were written, read by the promotion gate of the
    /// resources that follow this one (`spec.promotion.after`).
    #[serde(default, skip_serializing_if = "RevisionOrder::is_empty")]
    pub revision_order: RevisionOrder,
    /// Keyed hash (HMAC-SHA256 with the operator's Secret `aigw-hash-key`) of the Secret values
    /// last sent (never the values).
    pub secret_hash: Option<String>,
    /// The remote object's `last_updated_at` when aigw last read it (for the drift check).
    pub remote_updated_at: Option<String>,
    /// What the last drift correction replaced: when, the remote version, and each changed
    /// path with the remote and the desired value (masked where secret).
    pub last_drift_correction: Option<Box<super::common::DriftCorrection>>,
}
embeds_managed!(GuardrailStatus, ManagedStatus);

super::config::applied_history!(GuardrailStatus);

impl GuardrailCheck {
    fn to_api(&self) -> Value {
        let mut check = Map::new();
        check.insert("id".into(), Value::String(self.id.clone()));
        check.insert("parameters".into(), Value::Object(self.parameters.clone()));
        if let Some(name) = &self.name {
            check.insert("name".into(), Value::String(name.clone()));
        }
        check.insert(
            "is_enabled".into(),
            Value::Bool(self.is_enabled.unwrap_or(true)),
        );
        Value::Object(check)
    }
}

impl Feedback {
    fn to_api(&self) -> Value {
        json!({"feedback": {"value": self.value, "weight": self.weight, "metadata": self.metadata}})
    }
}

impl GuardrailActions {
    fn to_api(&self) -> Value {
        let mut actions = Map::new();
        actions.insert("deny".into(), Value::Bool(self.deny));
        actions.insert("async".into(), Value::Bool(self.r#async));
        if let Some(sequential) = self.sequential {
            actions.insert("sequential".into(), Value::Bool(sequential));
        }
        if let Some(feedback) = &self.on_success {
            actions.insert("on_success".into(), feedback.to_api());
        }
        if let Some(feedback) = &self.on_fail {
            actions.insert("on_fail".into(), feedback.to_api());
        }
        Value::Object(actions)
    }
}

impl SecretDocument for GuardrailDefinition {
    const FIELD: &'static str = "spec.checks";

    /// `{checks, actions}` as the API takes them.
    fn document(&self) -> Map<String, Value> {
        let mut document = Map::new();
        document.insert(
            "checks".into(),
            Value::Array(self.checks.iter().map(GuardrailCheck::to_api).collect()),
        );
        document.insert("actions".into(), self.actions.to_api());
        document
    }

    fn secret_refs(&self) -> std::borrow::Cow<'_, [ConfigSecretRef]> {
        std::borrow::Cow::Borrowed(&self.secret_refs)
    }
}

/// A remote guardrail's `{checks, actions}` in the shape a [`GuardrailDefinition`]'s
/// [`SecretDocument::document`] writes: booleans given as 0/1 read as booleans, defaults filled
/// in, and only the fields the spec can say.
pub fn remote_document(remote: &api::GuardrailDetails) -> Value {
    let flag = |v: Option<&Value>, default: bool| -> Value {
        Value::Bool(match v {
            Some(Value::Bool(b)) => *b,
            Some(Value::Number(n)) => n.as_f64().is_some_and(|n| n != 0.0),
            _ => default,
        })
    };
    let checks: Vec<Value> = remote
        .checks
        .iter()
        .map(|c| {
            let mut check = Map::new();
            check.insert("id".into(), c.get("id").cloned().unwrap_or(Value::Null));
            let parameters = match c.get("parameters") {
                Some(Value::Object(p)) => Value::Object(p.clone()),
                _ => Value::Object(Map::new()),
            };
            check.insert("parameters".into(), parameters);
            if let Some(Value::String(name)) = c.get("name") {
                check.insert("name".into(), Value::String(name.clone()));
            }
            check.insert("is_enabled".into(), flag(c.get("is_enabled"), true));
            Value::Object(check)
        })
        .collect();
    let source = remote.actions.as_object().cloned().unwrap_or_default();
    let mut actions = Map::new();
    actions.insert("deny".into(), flag(source.get("deny"), false));
    actions.insert("async".into(), flag(source.get("async"), false));
    for key in ["sequential", "on_success", "on_fail"] {
        match (key, source.get(key)) {
            (_, None | Some(Value::Null)) => {}
            ("sequential", value) => {
                actions.insert(key.into(), flag(value, false));
            }
            (_, Some(value)) => {
                actions.insert(key.into(), feedback_read(value));
            }
        }
    }
    json!({"checks": checks, "actions": actions})
}

/// A feedback action as read, with the API's default for `metadata` (an empty string) where
/// the read leaves it out: what aigw would send for the same action.
fn feedback_read(action: &Value) -> Value {
    let mut action = action.clone();
    if let Some(feedback) = action.get_mut("feedback").and_then(Value::as_object_mut)
        && feedback.get("metadata").is_none_or(Value::is_null)
    {
        feedback.insert("metadata".into(), Value::String(String::new()));
    }
    action
}

/// What the controller, the claims and the Config references need of either guardrail kind.
pub trait GuardrailKind: kube::Resource<DynamicType = ()> + Sized {
    /// The API plane its guardrails live on.
    const PLANE: api::GuardrailPlane;
    /// The kind a Config's `spec.resourceRefs` names it by.
    const REFERENCED_AS: ReferencedKind;
    type Spec: Serialize;
    fn spec(&self) -> &Self::Spec;
    fn definition(&self) -> &GuardrailDefinition;
    /// The workspace it belongs to (`None` for an organisation guardrail).
    fn workspace_id(&self) -> Option<&str>;
    fn guardrail_status(&self) -> Option<&GuardrailStatus>;
    /// A resource saying `definition`, in `workspace_id` where the kind has one.
    fn from_definition(
        metadata: kube::api::ObjectMeta,
        definition: GuardrailDefinition,
        workspace_id: Option<String>,
    ) -> Self;

    /// Why `remote` is not a guardrail of this kind, if it is not: a Guardrail manages only
    /// workspace guardrails (with a workspace), a ClusterGuardrail only organisation
    /// guardrails (without one), whatever plane answered the read. So a team's Guardrail can
    /// never adopt, change or delete an organisation guardrail (which only RBAC on
    /// ClusterGuardrails may reach), nor a ClusterGuardrail a team's guardrail, and one remote
    /// guardrail is claimed by one kind only.
    fn other_kind(remote: &api::GuardrailDetails) -> Option<String> {
        if Self::lists_as_own(remote.workspace_id.as_deref()) {
            return None;
        }
        Some(match &remote.workspace_id {
            Some(workspace) => format!(
                "guardrail {} belongs to workspace {workspace}: a ClusterGuardrail manages only organisation guardrails; use a Guardrail",
                remote.slug
            ),
            None => format!(
                "guardrail {} is an organisation guardrail: a Guardrail manages only workspace guardrails; use a ClusterGuardrail",
                remote.slug
            ),
        })
    }

    /// Whether a guardrail in `workspace` (`None`: organisation-wide) is of this kind.
    fn lists_as_own(workspace: Option<&str>) -> bool {
        workspace.is_some() == Self::REFERENCED_AS.namespaced()
    }

    /// True when `config` names this guardrail: by resource (`spec.resourceRefs`, a
    /// `Guardrail` only from its own namespace), or by the slug or id it recorded, written in
    /// the config's document.
    fn named_by(&self, config: &super::Config) -> bool {
        let keys = self
            .guardrail_status()
            .map(Recorded::remote_keys)
            .unwrap_or_default();
        let reachable =
            self.meta().namespace.is_none() || self.meta().namespace == config.metadata.namespace;
        let name = self.meta().name.as_deref().unwrap_or_default();
        reachable && config.names_guardrail(Self::REFERENCED_AS, name, &keys)
    }
}

impl GuardrailKind for Guardrail {
    const PLANE: api::GuardrailPlane = api::GuardrailPlane::Workspace;
    const REFERENCED_AS: ReferencedKind = ReferencedKind::Guardrail;
    type Spec = GuardrailSpec;
    fn spec(&self) -> &GuardrailSpec {
        &self.spec
    }
    fn from_definition(
        metadata: kube::api::ObjectMeta,
        definition: GuardrailDefinition,
        workspace_id: Option<String>,
    ) -> Self {
        Guardrail {
            metadata,
            spec: GuardrailSpec {
                workspace_id,
                workspace_ref: None,
                definition,
            },
            status: None,
        }
    }
    fn definition(&self) -> &GuardrailDefinition {
        &self.spec.definition
    }
    fn workspace_id(&self) -> Option<&str> {
        self.spec.workspace_id.as_deref()
    }
    fn guardrail_status(&self) -> Option<&GuardrailStatus> {
        self.status.as_ref()
    }
}

impl GuardrailKind for ClusterGuardrail {
    const PLANE: api::GuardrailPlane = api::GuardrailPlane::Organisation;
    const REFERENCED_AS: ReferencedKind = ReferencedKind::ClusterGuardrail;
    type Spec = ClusterGuardrailSpec;
    fn spec(&self) -> &ClusterGuardrailSpec {
        &self.spec
    }
    fn from_definition(
        metadata: kube::api::ObjectMeta,
        definition: GuardrailDefinition,
        _workspace_id: Option<String>,
    ) -> Self {
        ClusterGuardrail {
            metadata,
            spec: ClusterGuardrailSpec { definition },
            status: None,
        }
    }
    fn definition(&self) -> &GuardrailDefinition {
        &self.spec.definition
    }
    fn workspace_id(&self) -> Option<&str> {
        None
    }
    fn guardrail_status(&self) -> Option<&GuardrailStatus> {
        self.status.as_ref()
    }
}

impl GuardrailSpec {
    /// The `connectionRef` name, `default` when absent.
    pub fn connection_name(&self) -> &str {
        self.definition.connection_name()
    }
}

impl ClusterGuardrailSpec {
    /// The `connectionRef` name, `default` when absent.
    pub fn connection_name(&self) -> &str {
        self.definition.connection_name()
    }
}

impl GuardrailDefinition {
    /// The create body sending `document` (the spec's `{checks, actions}`, Secret values
    /// filled in).
    pub fn create_request_with(
        &self,
        document: &Map<String, Value>,
        workspace_id: Option<&str>,
    ) -> api::CreateGuardrailRequest {
        api::CreateGuardrailRequest {
            name: self.name.clone(),
            target: self.target.map(|t| t.as_api().to_string()),
            workspace_id: workspace_id.map(str::to_string),
            checks: document
                .get("checks")
                .cloned()
                .unwrap_or(Value::Array(Vec::new())),
            actions: document
                .get("actions")
                .cloned()
                .unwrap_or(Value::Object(Map::new())),
        }
    }

    /// The update body sending `document`: the name, checks and actions, replaced whole.
    pub fn update_request_with(
        &self,
        document: &Map<String, Value>,
    ) -> api::UpdateGuardrailRequest {
        api::UpdateGuardrailRequest {
            name: Some(self.name.clone()),
            checks: document.get("checks").cloned(),
            actions: document.get("actions").cloned(),
        }
    }

    /// Fields that differ from `remote`, by meaning (key order and number spelling do not
    /// count). The values at `secretRefs` paths are compared elsewhere (by hash): the remote
    /// may mask them, so they only have to be present.
    pub fn diff(&self, remote: &api::GuardrailDetails) -> Vec<&'static str> {
        let mut fields = Vec::new();
        if self.name != remote.name {
            fields.push("name");
        }
        let mut desired = Value::Object(self.document());
        let mut current = remote_document(remote);
        for reference in &self.secret_refs {
            super::config::take_pointer(&mut desired, &reference.path);
            if super::config::take_pointer(&mut current, &reference.path).is_none() {
                fields.push("checks");
            }
        }
        if !super::common::json_equivalent(&desired["checks"], &current["checks"])
            && !fields.contains(&"checks")
        {
            fields.push("checks");
        }
        if !super::common::json_equivalent(&desired["actions"], &current["actions"]) {
            fields.push("actions");
        }
        fields
    }

    /// What correcting `remote` to this definition at time `at` replaces: the name, checks and
    /// actions as the API holds them, the `secretRefs` paths left out of both.
    /// `concealed`: the values its `secretRefs` substituted, masked wherever they stand.
    pub fn drift_against(
        &self,
        remote: &api::GuardrailDetails,
        at: String,
        concealed: &[&str],
    ) -> super::common::DriftCorrection {
        let mut desired = Value::Object(self.document());
        let mut current = remote_document(remote);
        let paths: Vec<&str> = self.secret_refs.iter().map(|r| r.path.as_str()).collect();
        let secret_paths =
            super::common::take_secret_paths(&mut desired, &mut current, &paths, concealed, "");
        desired["name"] = Value::String(self.name.clone());
        current["name"] = Value::String(remote.name.clone());
        super::common::DriftCorrection::between(
            at,
            remote.version_id.clone(),
            &desired,
            &current,
            concealed,
        )
        .with_secret_paths(secret_paths)
    }

    /// Fixed fields where the remote guardrail differs; no PUT can fix these.
    /// `workspace_id` is the resource's (`None` for an organisation guardrail).
    pub fn immutable_conflicts(
        &self,
        remote: &api::GuardrailDetails,
        workspace_id: Option<&str>,
    ) -> Vec<&'static str> {
        let mut fields = Vec::new();
        let target = self.target.unwrap_or(GuardrailTarget::Llm).as_api();
        if remote.target.as_deref().unwrap_or("llm") != target {
            fields.push("target");
        }
        if workspace_id.is_some()
            && remote.workspace_id.is_some()
            && workspace_id != remote.workspace_id.as_deref()
        {
            fields.push("workspaceId");
        }
        fields
    }
}

super::common::governed!(
    Guardrail,
    "guardrail",
    DeletionPolicy::Orphan,
    Adopts slug,
    in spec.definition
);
super::common::governed!(
    ClusterGuardrail,
    "guardrail",
    DeletionPolicy::Orphan,
    Adopts slug,
    in spec.definition
);

super::common::recorded!(GuardrailStatus, slug or id, remote_updated_at);

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> GuardrailSpec {
        serde_json::from_value(json!({
            "name": "pii", "workspaceId": "ws-1",
            "checks": [{"id": "default.regexMatch", "parameters": {"rule": "\\d{3}", "max": 2}}],
            "actions": {"deny": true, "onFail": {"value": -5}},
            "secretRefs": [{"path": "/checks/0/parameters/api_key", "secretKeyRef": {"name": "s", "key": "k"}}]
        }))
        .unwrap()
    }

    fn remote(checks: Value, actions: Value) -> api::GuardrailDetails {
        serde_json::from_value(json!({
            "id": "g1", "slug": "pg-pii-1a2b3c", "name": "pii", "workspace_id": "ws-1", "target": "llm",
            "checks": checks, "actions": actions, "version_id": "v1"
        }))
        .unwrap()
    }

    #[test]
    fn a_normalised_read_with_a_masked_secret_is_in_sync() {
        let read = remote(
            json!([{"is_enabled": 1, "parameters": {"max": 2.0, "rule": "\\d{3}", "api_key": "****"}, "id": "default.regexMatch"}]),
            json!({"on_fail": {"feedback": {"weight": 1, "value": -5.0, "metadata": ""}}, "async": 0, "deny": 1}),
        );
        assert!(
            spec().definition.diff(&read).is_empty(),
            "{:?}",
            spec().definition.diff(&read)
        );
        assert!(
            spec()
                .definition
                .immutable_conflicts(&read, Some("ws-1"))
                .is_empty()
        );
    }

    #[test]
    fn changed_checks_actions_and_a_missing_secret_are_differences() {
        let read = remote(
            json!([{"id": "default.regexMatch", "parameters": {"rule": "x", "max": 2, "api_key": "****"}}]),
            json!({"deny": false, "async": false}),
        );
        assert_eq!(spec().definition.diff(&read), vec!["checks", "actions"]);
        let without_secret = remote(
            json!([{"id": "default.regexMatch", "parameters": {"rule": "\\d{3}", "max": 2}}]),
            json!({"deny": true, "async": false, "on_fail": {"feedback": {"value": -5, "weight": 1}}}),
        );
        assert_eq!(spec().definition.diff(&without_secret), vec!["checks"]);
    }

    #[test]
    fn both_kinds_read_the_same_spec_and_only_a_guardrail_has_a_workspace() {
        let cluster: ClusterGuardrailSpec =
            serde_json::from_value(serde_json::to_value(spec().definition).unwrap()).unwrap();
        assert_eq!(cluster.definition, spec().definition);
        let written = serde_json::to_value(spec()).unwrap();
        assert_eq!(written["workspaceId"], "ws-1");
        assert_eq!(written["checks"][0]["id"], "default.regexMatch");
        let read = remote(json!([]), json!({}));
        assert_eq!(
            spec().definition.immutable_conflicts(&read, Some("ws-2")),
            vec!["workspaceId"]
        );
        assert!(
            cluster
                .definition
                .immutable_conflicts(&read, None)
                .is_empty()
        );
    }

    #[test]
    fn each_kind_refuses_the_other_kinds_guardrail() {
        let workspace = remote(json!([]), json!({}));
        let mut organisation = workspace.clone();
        organisation.workspace_id = None;
        assert!(Guardrail::other_kind(&workspace).is_none());
        assert!(ClusterGuardrail::other_kind(&organisation).is_none());
        let why = Guardrail::other_kind(&organisation).unwrap();
        assert!(why.contains("use a ClusterGuardrail"), "{why}");
        let why = ClusterGuardrail::other_kind(&workspace).unwrap();
        assert!(why.contains("belongs to workspace ws-1"), "{why}");
    }
}
