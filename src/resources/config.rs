//! The `Config` kind: a named gateway routing config.

use super::common::DeletionPolicy;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::rules;

use super::managed_spec::ManagedSpec;
use super::managed_status::{ManagedStatus, PENDING_CREATE, Reword, embeds_managed};
use super::promotion::RevisionOrder;

/// A named routing config of the AI gateway (`/ai_gw/v2/configs`). Every change of `spec.config`,
/// `spec.name` or `spec.state` is applied with one PUT, which mints a new `status.versionId`.
// kube's printcolumn(...) lists repeat `type_ = "string"`, which this lint misreads.
#[allow(clippy::duplicated_attributes)]
#[skip_serializing_none]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "aigw.io",
    doc = "A named routing config of the AI gateway, kept in line with the management API by aigw.",
    version = "v1alpha1",
    kind = "Config",
    plural = "configs",
    shortname = "aigwconfig",
    category = "aigw",
    namespaced,
    status = "ConfigStatus",
    printcolumn(name = "Slug", type_ = "string", json_path = ".status.slug"),
    printcolumn(name = "VersionId", type_ = "string", json_path = ".status.versionId")
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = rules::set_at_creation("slug", "Config"))]
#[x_kube(validation = rules::set_at_creation("workspaceId", "Config"))]
#[x_kube(validation = rules::same_connection("Config"))]
#[x_kube(validation = rules::workspace_id_or_ref())]
#[x_kube(validation = rules::set_at_creation("workspaceRef", "Config"))]
#[x_kube(validation = Rule::new("!has(self.secretRefs) || !has(self.resourceRefs) || !self.resourceRefs.exists(r, self.secretRefs.exists(s, s.path == r.path || r.path.startsWith(s.path + '/') || s.path.startsWith(r.path + '/')))").field_path(".resourceRefs").reason(Reason::FieldValueInvalid).message("spec.resourceRefs and spec.secretRefs name the same path, or one inside the other: each value of the document comes from one of them"))]
#[schemars(transform = Reword(&[
    (
        "managementPolicy",
        "`Full` (the default): aigw creates, updates and deletes the remote config to \
         match this spec. `Observe`: aigw only reads it and reports differences in \
         the `Drifted` condition; it never writes to it, also not when this resource \
         is deleted (whatever `deletionPolicy` says).",
    ),
]))]
pub struct ConfigSpec {
    /// Slug of an existing remote config to adopt (for example `pc-routing-3f2a1b`). When absent,
    /// aigw creates a new config and records its slug in `status.slug`. Only set at creation: it
    /// cannot be added, removed or changed afterwards.
    #[x_kube(validation = Rule::new("self == oldSelf").message("slug is immutable: create a new Config to adopt another remote config"))]
    pub slug: Option<String>,

    /// Display name of the config in the management API.
    #[schemars(length(min = 1, max = 255))]
    pub name: String,

    /// UUID of the workspace the config belongs to. Cannot be changed once set.
    #[x_kube(validation = Rule::new("self == oldSelf").message("workspaceId is immutable: create a new Config to move it to another workspace"))]
    #[schemars(length(min = 1))]
    pub workspace_id: Option<String>,

    /// The Workspace resource whose workspace the config belongs to, instead of `workspaceId` (set
    /// at most one of the two): the UUID it recorded is used once it is Ready, and the Connection's grants
    /// apply to that workspace. Immutable.
    #[x_kube(validation = Rule::new("self == oldSelf").message("workspaceRef is immutable: create a new Config to move it to another workspace"))]
    pub workspace_ref: Option<super::common::WorkspaceRef>,

    /// The routing document, exactly as the API takes it: `strategy`, `targets`, `retry`,
    /// `cache`, `virtual_key`, `override_params`, hooks, … The whole document is sent on every
    /// update, so list every setting you want to keep.
    ///
    /// Credentials (`api_key`, `aws_secret_access_key`, `aws_session_token`,
    /// `vertex_service_account_json`, `azure_entra_client_secret`, `azure_ad_token`,
    /// `access_key_secret`, `client_secret`, `private_key`, `auth_token`, and each of these in
    /// camelCase: `apiKey`, `accessKeySecret`, …) are refused here in plain text, at the top level and in `targets` up to three levels deep (deeper
    /// ones before any write): set them with `secretRefs` instead. Keep header values that are
    /// credentials (`custom_headers`) in `secretRefs` too: they are masked in every output.
    #[schemars(schema_with = "config_document_schema")]
    pub config: super::json_object::JsonObject,

    /// Values of `config` taken from Secrets in this Config's own namespace, substituted when the
    /// document is sent and never shown anywhere else. Each names a JSON Pointer into `config`
    /// (e.g. `/api_key`, `/targets/0/aws_secret_access_key`, `/custom_headers/x-api-key`) and a
    /// Secret key. The field itself must not be written in `config`; missing parent objects are
    /// created. A change of a referenced Secret is applied within seconds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub secret_refs: Vec<ConfigSecretRef>,

    /// Values of `config` that name other aigw resources, substituted with their remote slug
    /// when the config is applied (`@<slug>` for a Provider): each names a JSON Pointer into
    /// `config` (e.g. `/input_guardrails/0` or `/targets/0/provider`; the element need not
    /// exist, as with `secretRefs`), the `kind` and the `name` of a resource of this namespace
    /// (or of a cluster-scoped kind). Until the resource is Ready with a slug, the
    /// Config waits (`Stalled`, reason `ReferenceNotReady`, naming it) and writes nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub resource_refs: Vec<ConfigResourceRef>,

    /// Remote status of the config (the API's `status` field), e.g. `active`. Left as the API
    /// sets it when absent.
    pub state: Option<String>,

    /// What happens to the remote config when this resource is deleted: `Delete` removes it
    /// (the default), `Orphan` leaves it in place.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,

    /// Management policy and Connection: the block every kind keeps.
    #[serde(flatten)]
    pub managed: ManagedSpec,

    /// Gates every change of this Config behind other Configs that must have run it first,
    /// e.g. prod's after dev's: see `after` and `soak`. The annotation
    /// `aigw.io/promote-now: <revision>` lets exactly that revision through at once.
    pub promotion: Option<super::promotion::Promotion>,
}
embeds_managed!(ConfigSpec, ManagedSpec);

/// One value of the routing document that names another aigw resource.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigResourceRef {
    /// JSON Pointer (RFC 6901) into `spec.config` where the resource's slug goes, e.g.
    /// `/input_guardrails/0` or `/targets/0/output_guardrails/1`. At most 256 characters, as
    /// a secretRefs path: the rule that keeps the two lists' paths apart compares every pair.
    #[schemars(regex(pattern = r"^(/[^/]*)+$"), length(max = 256))]
    pub path: String,
    /// The kind of the resource: `Guardrail` (a Guardrail of this namespace),
    /// `ClusterGuardrail` (an organisation guardrail) or `Provider` (a Provider of this
    /// namespace, written as `@<slug>`).
    pub kind: ReferencedKind,
    /// The resource's `metadata.name`.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// The kinds a document can name by resource.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub enum ReferencedKind {
    /// A workspace guardrail of the Config's namespace.
    Guardrail,
    /// An organisation guardrail (cluster-scoped).
    ClusterGuardrail,
    /// A provider of the Config's namespace, substituted as `@<slug>`.
    Provider,
}

impl ReferencedKind {
    /// The kind's name, as in `kind:`.
    pub fn kind(self) -> &'static str {
        match self {
            ReferencedKind::Guardrail => "Guardrail",
            ReferencedKind::ClusterGuardrail => "ClusterGuardrail",
            ReferencedKind::Provider => "Provider",
        }
    }

    /// What a reference puts in the document for the resource's `slug`: the slug itself, and
    /// `@<slug>` for a provider (how configs route to one).
    pub fn value(self, slug: &str) -> String {
        match self {
            ReferencedKind::Provider => format!("@{slug}"),
            ReferencedKind::Guardrail | ReferencedKind::ClusterGuardrail => slug.to_string(),
        }
    }

    /// False for a cluster-scoped kind.
    pub fn namespaced(self) -> bool {
        match self {
            ReferencedKind::Guardrail | ReferencedKind::Provider => true,
            ReferencedKind::ClusterGuardrail => false,
        }
    }
}

/// One value of the routing document taken from a Secret.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigSecretRef {
    /// JSON Pointer (RFC 6901) into `spec.config` where the value goes, e.g. `/api_key` or
    /// `/targets/1/api_key`. At most 256 characters: rules compare it with the resource's other
    /// paths, pair by pair.
    #[schemars(regex(pattern = r"^(/[^/]*)+$"), length(max = 256))]
    pub path: String,
    /// The Secret (in this Config's namespace) and key holding the value.
    pub secret_key_ref: SecretKeyRef,
}

/// A key of a Secret in the same namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct SecretKeyRef {
    /// Name of the Secret.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Key within the Secret's data; its value is used as a string (UTF-8).
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

/// How many levels of `targets` the admission rules look into; deeper documents are checked by
/// the controller before any write.
const CHECKED_TARGET_DEPTH: usize = 3;

/// The most targets per level: bounds the cost of the admission rules.
const MAX_TARGETS: u64 = 100;

/// Schema of `spec.config`: free-form, except that credential keys are refused in plain text at
/// the top level and in nested `targets`, by the admission policy
/// ([`crate::resources::free_form::credential_levels`]).
fn config_document_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let value = document_level(CHECKED_TARGET_DEPTH);
    serde_json::from_value(value).unwrap_or_else(|_| schemars::json_schema!({"type": "object"}))
}

fn document_level(depth: usize) -> serde_json::Value {
    use serde_json::json;
    let mut targets = serde_json::Map::new();
    if depth > 0 {
        targets.insert(
            "targets".into(),
            json!({
                "type": "array",
                "maxItems": MAX_TARGETS,
                "description": "The providers or nested strategies this level routes to (`provider: \"@slug\"`, or a Provider resource through spec.resourceRefs).",
                "items": document_level(depth - 1),
            }),
        );
    }
    super::common::refusing_credentials(
        |_| {
            "A credential: refused here in plain text. Keep it in a Secret and set it with spec.secretRefs (path: the JSON Pointer of this field).".into()
        },
        targets,
    )
}

/// What the management API reports about the config.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = Reword(&[
    (
        "conditions",
        "`Ready`, `Reconciling` and `Stalled`, each with a reason and its own \
         observedGeneration, and `GuardrailsResolved` when the document names \
         guardrails.",
    ),
    PENDING_CREATE,
]))]
pub struct ConfigStatus {
    /// Generation, conditions, create intent and claim: the block every kind keeps.
    #[serde(flatten)]
    pub managed: ManagedStatus,
    /// UUID of the remote config.
    pub id: Option<String>,
    /// Slug of the remote config; gateways reference configs by slug.
    pub slug: Option<String>,
    /// Version the API minted for the last applied document.
    pub version_id: Option<String>,
    /// HMAC-SHA256 (keyed with the operator's Secret `aigw-hash-key`, over the object's uid)
    /// of the Secret values the last write substituted
    /// for `spec.secretRefs`. The API may mask them on read, so a Secret change is found by
    /// comparing this hash, never by reading values back. Never the values themselves.
    pub secret_hash: Option<String>,
    /// When aigw last wrote the document (create or update).
    pub last_applied_at: Option<String>,
    /// The remote object's `last_updated_at` when aigw last read it. The drift check lists the
    /// remote objects and reads again only those whose `last_updated_at` differs from this.
    pub remote_updated_at: Option<String>,
    /// What the last drift correction replaced: when, the remote version, and each changed
    /// path with the remote and the desired value (masked where secret).
    pub last_drift_correction: Option<Box<super::common::DriftCorrection>>,
    /// The last ten versions aigw applied (created or updated), newest first: which
    /// generation and which `aigw.io/revision` produced each `versionId`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<AppliedVersion>,
    /// The order in which the revisions were written, read by the promotion gate of the
    /// resources that follow this one (`spec.promotion.after`).
    #[serde(default, skip_serializing_if = "RevisionOrder::is_empty")]
    pub revision_order: RevisionOrder,
    /// The value each `spec.resourceRefs` entry put in the document when aigw last brought
    /// the remote config in line (a guardrail's slug, `@` and a provider's slug), in order: a
    /// resource created again under a new slug is found by comparing them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resolved_references: Vec<String>,
}
embeds_managed!(ConfigStatus, ManagedStatus);

/// How many applied versions `status.history` keeps.
pub const HISTORY_LIMIT: usize = 10;

/// One version of the document that aigw applied.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppliedVersion {
    /// The `version_id` the API minted for this version.
    pub version_id: Option<String>,
    /// The `metadata.generation` of this resource that was applied.
    pub generation: Option<i64>,
    /// When aigw applied it (RFC 3339).
    pub applied_at: String,
    /// The `aigw.io/revision` annotation at the time (a Git commit, a release tag); absent when
    /// the resource had none.
    pub revision: Option<String>,
    /// True when the `aigw.io/promote-now` annotation let this revision through before its
    /// promotion gate (`spec.promotion`) would have.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub promotion_override: bool,
    /// The `spec.secretRefs` this version was filled from: paths and the Secret keys, never a
    /// value. `aigw history --diff` and `aigw plan` hide what a version holds at these paths
    /// wherever it shows later (an inserted target moves a value to another index).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "recorded_secret_refs")]
    pub secret_refs: Vec<ConfigSecretRef>,
}

/// The longest `secretRefs` path a spec has admitted: 512 characters until the bound became 256
/// (so that the rules comparing paths pair by pair fit the apiserver's cost limit). A resource
/// stored with a longer path keeps it under ratcheting, and every version applied from it
/// records that path in its history entry, which must not refuse it.
const RECORDED_PATH_MAX_LENGTH: u64 = 512;

/// The schema of a history entry's `secretRefs`: the spec's, with room for any path a spec ever
/// admitted ([`RECORDED_PATH_MAX_LENGTH`]).
fn recorded_secret_refs(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut schema = generator.subschema_for::<Vec<ConfigSecretRef>>();
    if let Some(serde_json::Value::Object(path)) = schema.pointer_mut("/items/properties/path") {
        path.insert("maxLength".into(), RECORDED_PATH_MAX_LENGTH.into());
        path.insert(
            "description".into(),
            "The JSON Pointer into `spec.config` this version took the value for, as the spec \
             held it."
                .into(),
        );
    }
    schema
}

/// A status that keeps the versions aigw applied (`versionId`, `lastAppliedAt`, `history`):
/// Config and Guardrail.
pub trait AppliedHistory {
    fn version_id(&self) -> Option<String>;
    fn last_applied_at_mut(&mut self) -> &mut Option<String>;
    fn history(&self) -> &[AppliedVersion];
    fn history_mut(&mut self) -> &mut Vec<AppliedVersion>;
    fn revision_order(&self) -> &super::promotion::RevisionOrder;
    fn revision_order_mut(&mut self) -> &mut super::promotion::RevisionOrder;

    /// Records `applied` as the newest entry of `history`, dropping the oldest beyond
    /// [`HISTORY_LIMIT`].
    fn record_applied(&mut self, applied: AppliedVersion) {
        let history = self.history_mut();
        history.insert(0, applied);
        history.truncate(HISTORY_LIMIT);
    }

    /// Notes the version just written (`versionId`) as applied at `at` by the object `meta`
    /// describes, with its generation, its `aigw.io/revision` annotation and the
    /// `secretRefs` it was filled from.
    fn record_applied_now(
        &mut self,
        meta: &kube::api::ObjectMeta,
        at: String,
        secret_refs: &[ConfigSecretRef],
    ) {
        *self.last_applied_at_mut() = Some(at.clone());
        let applied = AppliedVersion {
            version_id: self.version_id(),
            generation: meta.generation,
            applied_at: at,
            revision: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(super::common::REVISION_ANNOTATION))
                .cloned(),
            promotion_override: false,
            secret_refs: secret_refs.to_vec(),
        };
        if let Some(revision) = &applied.revision {
            self.revision_order_mut().record(revision);
        }
        self.record_applied(applied);
    }
}

/// [`AppliedHistory`] for a status with `version_id`, `last_applied_at` and `history` fields.
macro_rules! applied_history {
    ($status:ty) => {
        impl $crate::resources::config::AppliedHistory for $status {
            fn version_id(&self) -> Option<String> {
                self.version_id.clone()
            }
            fn last_applied_at_mut(&mut self) -> &mut Option<String> {
                &mut self.last_applied_at
            }
            fn history(&self) -> &[$crate::resources::config::AppliedVersion] {
                &self.history
            }
            fn history_mut(&mut self) -> &mut Vec<$crate::resources::config::AppliedVersion> {
                &mut self.history
            }
            fn revision_order(&self) -> &$crate::resources::promotion::RevisionOrder {
                &self.revision_order
            }
            fn revision_order_mut(&mut self) -> &mut $crate::resources::promotion::RevisionOrder {
                &mut self.revision_order
            }
        }
    };
}
pub(crate) use applied_history;

applied_history!(ConfigStatus);

impl ConfigSpec {
    /// The create body for this spec.
    pub fn create_request(&self) -> api::CreateConfigRequest {
        self.create_request_with(&self.config.to_map())
    }

    /// The create body sending `document` (the spec's document with Secret values filled in).
    pub fn create_request_with(
        &self,
        document: &serde_json::Map<String, serde_json::Value>,
    ) -> api::CreateConfigRequest {
        api::CreateConfigRequest {
            name: self.name.clone(),
            config: serde_json::Value::Object(document.clone()),
            workspace_id: self.workspace_id.clone(),
            is_default: None,
        }
    }

    /// The update body: the whole document (the API replaces it), the name and the state.
    pub fn update_request(&self) -> api::UpdateConfigRequest {
        self.update_request_with(&self.config.to_map())
    }

    /// The update body sending `document` (the spec's document with Secret values filled in).
    pub fn update_request_with(
        &self,
        document: &serde_json::Map<String, serde_json::Value>,
    ) -> api::UpdateConfigRequest {
        api::UpdateConfigRequest {
            name: Some(self.name.clone()),
            config: Some(serde_json::Value::Object(document.clone())),
            status: self.state.clone(),
            workspace_id: None,
        }
    }

    /// Names of the fields where the remote config differs from this spec; empty when in sync.
    /// The document is compared as canonical JSON (key order and formatting do not matter).
    pub fn diff(&self, remote: &api::ConfigDetail) -> Vec<&'static str> {
        self.diff_without_secrets(remote)
    }

    /// What correcting `remote` to this spec at time `at` replaces: the name and the document,
    /// the `secretRefs` paths left out of both (their values never reach a status).
    /// `concealed`: the values its `secretRefs` substituted, masked wherever they stand.
    pub fn drift_against(
        &self,
        remote: &api::ConfigDetail,
        at: String,
        concealed: &[&str],
    ) -> super::common::DriftCorrection {
        let mut desired = self.config.to_value();
        let mut current = remote.config.clone();
        let paths: Vec<&str> = self.secret_refs.iter().map(|r| r.path.as_str()).collect();
        let secret_paths = super::common::take_secret_paths(
            &mut desired,
            &mut current,
            &paths,
            concealed,
            "/config",
        );
        super::common::DriftCorrection::between(
            at,
            remote.version_id.clone(),
            &serde_json::json!({"name": self.name, "config": desired}),
            &serde_json::json!({"name": remote.name, "config": current}),
            concealed,
        )
        .with_secret_paths(secret_paths)
    }

    /// [`Self::diff`] for a document whose `secretRefs` paths are compared elsewhere (by hash):
    /// the remote value at each of those paths may be masked, so it only has to be present.
    pub fn diff_without_secrets(&self, remote: &api::ConfigDetail) -> Vec<&'static str> {
        let mut fields = Vec::new();
        if self.name != remote.name {
            fields.push("name");
        }
        if !self.document_matches(&remote.config) {
            fields.push("config");
        }
        if self
            .state
            .as_ref()
            .is_some_and(|state| *state != remote.status)
        {
            fields.push("state");
        }
        fields
    }

    /// True when `remote` equals `spec.config` once the `secretRefs` paths are taken out of it,
    /// and holds something at each of them.
    fn document_matches(&self, remote: &serde_json::Value) -> bool {
        let mut remote = remote.clone();
        for reference in &self.secret_refs {
            if take_pointer(&mut remote, &reference.path).is_none() {
                return false;
            }
        }
        let mut desired = self.config.to_value();
        for reference in &self.secret_refs {
            take_pointer(&mut desired, &reference.path);
        }
        prune_emptied(&mut desired, &mut remote, &self.secret_refs);
        super::common::json_equivalent(&desired, &remote)
    }
}

impl Config {
    /// True when the Config names the resource `name` of `kind` (`spec.resourceRefs`), or its
    /// document names one of `keys` (its slug or id, written in it). A name a Secret supplies
    /// is not known here and does not count.
    pub fn names_guardrail(&self, kind: ReferencedKind, name: &str, keys: &[&str]) -> bool {
        let by_resource = self
            .spec
            .resource_refs
            .iter()
            .any(|r| r.kind == kind && r.name == name);
        by_resource
            || (!keys.is_empty()
                && super::config_document::guardrail_references(&self.spec.config.to_value())
                    .iter()
                    .any(|r| keys.contains(&r.name.as_str())))
    }
}

impl ConfigSpec {
    /// Puts `(secret name/key)` at each `secretRefs` path of `document` (a `config` shown by
    /// `aigw plan`), so a plan names where a value comes from and never shows one. With
    /// `only_present`, paths the document lacks are left out (a remote document).
    pub fn show_secret_refs(&self, document: &mut serde_json::Value, only_present: bool) {
        for reference in &self.secret_refs {
            if only_present && document.pointer(&reference.path).is_none() {
                continue;
            }
            let slot = super::config_document::SecretSlot {
                path: reference.path.clone(),
                secret: reference.secret_key_ref.name.clone(),
                key: reference.secret_key_ref.key.clone(),
            };
            put_pointer(
                document,
                &slot.path,
                serde_json::Value::String(slot.marker()),
            );
        }
    }
}

/// Sets the value at JSON Pointer `path`, creating missing parent objects; a path through
/// anything else is left alone.
fn put_pointer(value: &mut serde_json::Value, path: &str, new: serde_json::Value) {
    let tokens: Vec<String> = path
        .split('/')
        .skip(1)
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect();
    let Some((last, parents)) = tokens.split_last() else {
        return;
    };
    let mut here = value;
    for token in parents {
        here = match here {
            serde_json::Value::Object(map) => map
                .entry(token.clone())
                .or_insert_with(|| serde_json::Value::Object(Default::default())),
            serde_json::Value::Array(items) => {
                match token.parse::<usize>().ok().and_then(|n| items.get_mut(n)) {
                    Some(item) => item,
                    None => return,
                }
            }
            _ => return,
        };
    }
    if let serde_json::Value::Object(map) = here {
        map.insert(last.clone(), new);
    }
}

/// Removes and returns the value at JSON Pointer `path`.
pub fn take_pointer(value: &mut serde_json::Value, path: &str) -> Option<serde_json::Value> {
    let (parent, last) = path.rsplit_once('/')?;
    let last = last.replace("~1", "/").replace("~0", "~");
    match value.pointer_mut(parent)? {
        serde_json::Value::Object(map) => map.remove(&last),
        _ => None,
    }
}

/// Parent objects a `secretRefs` path created (absent from the spec) are empty in both
/// documents once the secret values are taken out; drop them from the spec side only when the
/// spec never had them, so both sides compare alike.
fn prune_emptied(
    desired: &mut serde_json::Value,
    remote: &mut serde_json::Value,
    refs: &[ConfigSecretRef],
) {
    for reference in refs {
        let mut parent = reference.path.as_str();
        while let Some((up, _)) = parent.rsplit_once('/') {
            if up.is_empty() {
                break;
            }
            let empty = |v: &serde_json::Value| {
                v.pointer(up)
                    .is_some_and(|p| p.as_object().is_some_and(|o| o.is_empty()))
            };
            if empty(remote) && desired.pointer(up).is_none() {
                take_pointer(remote, up);
            }
            parent = up;
        }
    }
}

use crate::api;

super::common::governed!(Config, "config", DeletionPolicy::Orphan, Adopts slug);

super::common::recorded!(ConfigStatus, slug or id, remote_updated_at);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec() -> ConfigSpec {
        serde_json::from_value(json!({
            "name": "routing",
            "config": {"strategy": {"mode": "fallback"}, "targets": [{"provider": "@a"}, {"provider": "@b"}]},
            "state": "active"
        }))
        .unwrap()
    }

    fn remote(config: serde_json::Value) -> api::ConfigDetail {
        serde_json::from_value(json!({
            "id": "id-1", "slug": "pc-routing-1", "name": "routing", "status": "active",
            "config": serde_json::to_string(&config).unwrap(), "version_id": "v1"
        }))
        .unwrap()
    }

    #[test]
    fn same_document_in_another_key_order_is_in_sync() {
        let remote = remote(
            json!({"targets": [{"provider": "@a"}, {"provider": "@b"}], "strategy": {"mode": "fallback"}}),
        );
        assert!(spec().diff(&remote).is_empty());
    }

    #[test]
    fn a_changed_document_name_or_state_is_a_difference() {
        let mut remote = remote(
            json!({"strategy": {"mode": "loadbalance"}, "targets": [{"provider": "@a"}, {"provider": "@b"}]}),
        );
        assert_eq!(spec().diff(&remote), vec!["config"]);
        remote.name = "other".into();
        remote.status = "archived".into();
        assert_eq!(spec().diff(&remote), vec!["name", "config", "state"]);
    }

    #[test]
    fn target_order_matters() {
        let remote = remote(
            json!({"strategy": {"mode": "fallback"}, "targets": [{"provider": "@b"}, {"provider": "@a"}]}),
        );
        assert_eq!(spec().diff(&remote), vec!["config"]);
    }

    #[test]
    fn history_keeps_the_newest_ten_first() {
        let mut status = ConfigStatus::default();
        for i in 0..12 {
            status.record_applied(AppliedVersion {
                version_id: Some(format!("v{i}")),
                generation: Some(i),
                applied_at: "2026-01-01T00:00:00Z".into(),
                revision: None,
                promotion_override: false,
                secret_refs: Vec::new(),
            });
        }
        assert_eq!(status.history.len(), HISTORY_LIMIT);
        assert_eq!(status.history[0].version_id.as_deref(), Some("v11"));
        assert_eq!(status.history[9].version_id.as_deref(), Some("v2"));
        let written = serde_json::to_value(&status.history[0]).unwrap();
        assert_eq!(
            written,
            json!({"versionId": "v11", "generation": 11, "appliedAt": "2026-01-01T00:00:00Z"})
        );
    }

    #[test]
    fn secret_backed_fields_only_have_to_be_present_remotely() {
        let mut spec = spec();
        spec.secret_refs = serde_json::from_value(json!([
            {"path": "/targets/0/api_key", "secretKeyRef": {"name": "s", "key": "a"}},
            {"path": "/custom_headers/x-key", "secretKeyRef": {"name": "s", "key": "h"}}
        ]))
        .unwrap();
        let masked = json!({"strategy": {"mode": "fallback"}, "custom_headers": {"x-key": "********"},
                            "targets": [{"provider": "@a", "api_key": "********"}, {"provider": "@b"}]});
        assert!(
            spec.diff_without_secrets(&remote(masked.clone()))
                .is_empty()
        );
        let mut removed = masked.clone();
        removed["targets"][0]
            .as_object_mut()
            .unwrap()
            .remove("api_key");
        assert_eq!(spec.diff_without_secrets(&remote(removed)), vec!["config"]);
        let mut edited = masked;
        edited["targets"][1]["provider"] = json!("@c");
        assert_eq!(spec.diff_without_secrets(&remote(edited)), vec!["config"]);
    }

    #[test]
    fn plans_show_where_a_secret_comes_from() {
        let mut spec = spec();
        spec.secret_refs = serde_json::from_value(json!([
            {"path": "/targets/0/api_key", "secretKeyRef": {"name": "keys", "key": "openai"}},
            {"path": "/custom_headers/x-key", "secretKeyRef": {"name": "keys", "key": "h"}}
        ]))
        .unwrap();
        let mut desired = spec.config.to_value();
        spec.show_secret_refs(&mut desired, false);
        assert_eq!(desired["targets"][0]["api_key"], "(secret keys/openai)");
        assert_eq!(desired["custom_headers"]["x-key"], "(secret keys/h)");
        let mut remote = json!({"targets": [{"api_key": "sk-real"}]});
        spec.show_secret_refs(&mut remote, true);
        assert_eq!(
            remote,
            json!({"targets": [{"api_key": "(secret keys/openai)"}]})
        );
    }

    #[test]
    fn update_sends_the_whole_document() {
        let body = serde_json::to_value(spec().update_request()).unwrap();
        assert_eq!(body["config"]["targets"][1]["provider"], "@b");
        assert_eq!(body["status"], "active");
        assert_eq!(body["name"], "routing");
    }

    /// `status.lastDriftCorrection` never shows a Secret-backed value. A Secret changed while the
    /// remote object was edited (both seen by one reconcile: the operator was down, or handed over
    /// from a dry run): the remote edit moved the old value to another index, where no
    /// `secretRefs` path names it, and only the new value is concealed.
    #[test]
    fn a_drift_record_never_shows_the_previous_secret_value() {
        const OLD: &str = "AKIAOLDVALUE00000001";
        const NEW: &str = "AKIANEWVALUE00000002";
        let spec: ConfigSpec = serde_json::from_value(json!({
            "name": "bedrock",
            "config": {"strategy": {"mode": "fallback"},
                       "targets": [{"provider": "@bedrock-a"}, {"provider": "@bedrock-b"}]},
            "secretRefs": [{"path": "/targets/0/aws_access_key_id",
                            "secretKeyRef": {"name": "aws", "key": "id"}}]
        }))
        .unwrap();
        // Someone swapped the targets by hand; the value aigw wrote (OLD) moved with target 0.
        let remote: crate::api::ConfigDetail = serde_json::from_value(json!({
            "id": "1", "slug": "pc-bedrock-1", "name": "bedrock", "version_id": "v2",
            "config": {"strategy": {"mode": "fallback"},
                       "targets": [{"provider": "@bedrock-b"},
                                   {"provider": "@bedrock-a", "aws_access_key_id": OLD}]}
        }))
        .unwrap();
        let record = spec.drift_against(&remote, "2030-01-01T00:00:00Z".into(), &[NEW]);
        let text = serde_json::to_string(&record).unwrap();
        assert!(
            !text.contains(OLD),
            "lastDriftCorrection shows the Secret's previous value: {text}"
        );
    }

    /// A path into a list (a guardrail id in `input_guardrails`) that a remote edit reordered,
    /// while the Secret changed: the old value shows nowhere, and the path is listed, masked.
    /// A keyed path the remote edit removed is listed too (review F12).
    #[test]
    fn a_drift_record_lists_secret_paths_drift_changed_or_removed_with_their_values_masked() {
        const OLD: &str = "pg-old-secret-guardrail";
        const NEW: &str = "pg-new-secret-guardrail";
        let spec: ConfigSpec = serde_json::from_value(json!({
            "name": "guarded",
            "config": {"input_guardrails": ["pg-a", "placeholder"], "retry": {"attempts": 2}},
            "secretRefs": [
                {"path": "/input_guardrails/1", "secretKeyRef": {"name": "g", "key": "id"}},
                {"path": "/targets/0/api_key", "secretKeyRef": {"name": "k", "key": "key"}}
            ]
        }))
        .unwrap();
        let remote: crate::api::ConfigDetail = serde_json::from_value(json!({
            "id": "1", "slug": "pc-guarded-1", "name": "guarded", "version_id": "v2",
            "config": {"input_guardrails": [OLD, "pg-a"], "retry": {"attempts": 2},
                       "targets": [{"provider": "@openai"}]}
        }))
        .unwrap();
        let record = spec.drift_against(&remote, "2030-01-01T00:00:00Z".into(), &[NEW, "sk-1"]);
        let text = serde_json::to_string(&record).unwrap();
        assert!(
            !text.contains(OLD),
            "the drift record shows the old value: {text}"
        );
        let entry = |path: &str| record.changes.iter().find(|c| c.path == path);
        let listed = entry("/config/input_guardrails/1").expect(&text);
        assert_eq!(listed.remote.as_deref(), Some("\"(masked, different)\""));
        let removed = entry("/config/targets/0/api_key").expect(&text);
        assert_eq!(removed.remote, None);
        assert_eq!(removed.desired.as_deref(), Some("\"(masked)\""));
    }
}
