//! Pieces every aigw kind shares: status conditions, the connection reference and schema helpers.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

/// The API group of every aigw kind.
pub const GROUP: &str = "aigw.io";
/// The finalizer aigw puts on every namespaced kind so that `deletionPolicy` runs before removal.
pub const FINALIZER: &str = "aigw.io/finalizer";

/// What happens to the remote object when the resource is deleted, for the kinds the API deletes.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, schemars::JsonSchema,
)]
pub enum DeletionPolicy {
    /// Delete the remote object.
    #[default]
    Delete,
    /// Leave the remote object in place.
    Orphan,
}

/// What happens to the remote object when the resource is deleted, for the kinds the API
/// archives (its DELETE keeps the object, archived): Deployment and UsageLimitsPolicy.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, schemars::JsonSchema,
)]
pub enum ArchivePolicy {
    /// Archive the remote object (what the API's DELETE does).
    #[default]
    Archive,
    /// Leave the remote object in place.
    Orphan,
}

/// Annotation that pauses reconciling an object: while it is `"true"`, aigw makes no API call
/// for it at all (not even reads). Deletion still follows `deletionPolicy`.
pub const PAUSED_ANNOTATION: &str = "aigw.io/paused";
/// The label a Secret of the operator's namespace needs before a cluster-scoped resource may
/// read it (`"true"`): that namespace also holds the Connections' credentials.
pub const CLUSTER_READABLE: &str = "aigw.io/cluster-readable";
/// Annotation whose value (a Git commit, a release tag) is recorded with every version aigw
/// applies, in `status.history`.
pub const REVISION_ANNOTATION: &str = "aigw.io/revision";

/// Whether aigw may write to the remote object or only read it.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, schemars::JsonSchema,
)]
pub enum ManagementPolicy {
    /// Create, update, rotate and delete the remote object to match the spec.
    #[default]
    Full,
    /// Only read the remote object and report how it differs from the spec (the `Drifted`
    /// condition). Nothing is ever created, updated, rotated or deleted, also not on deletion of
    /// this resource, whatever `deletionPolicy` says.
    Observe,
}

/// What the spec's named remote object ([`Governed::named_remote`]) is to a kind
/// ([`Governed::NAMING`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Naming {
    /// An existing object the resource adopts (`spec.policyId`): read before anything the
    /// status recorded; gone is an error, since creating another would not be adopting it.
    Adopts,
    /// The identity a create sends (a provider's `spec.slug`): read after what the status
    /// recorded; gone means create it. Found before anything was recorded, it is adopted under
    /// the adoption grant, unless the create in flight made it
    /// ([`crate::controller::driver::verbs::Verbs::made_by_create`]). Found, it settles any
    /// create in flight.
    CreatesAs,
}

/// What the reconcile driver needs to know of every namespaced kind, whatever the kind: what
/// its remote object is called, how the spec names one, and what the spec says of its fate.
pub trait Governed {
    /// In messages, the remote object: "rate-limits policy".
    const WHAT: &'static str;
    /// What the spec's named remote object is to this kind.
    const NAMING: Naming;
    /// The spec field that names it, in messages (`spec.slug`); empty where none does.
    const NAMED_BY: &'static str;
    /// `spec.managementPolicy`.
    fn management_policy(&self) -> ManagementPolicy;
    /// The id or slug of the remote object the spec names (adoption), if any.
    fn named_remote(&self) -> Option<&str>;
    /// A copy whose `deletionPolicy` leaves the remote object in place: what deleting an
    /// `Observe` resource does, whatever its own `deletionPolicy` says.
    fn orphaning(&self) -> Self
    where
        Self: Sized;
    /// True when `deletionPolicy` leaves the remote object in place.
    fn orphans(&self) -> bool;

    /// True while the `aigw.io/paused` annotation is `"true"`.
    fn paused(&self) -> bool
    where
        Self: kube::Resource,
    {
        self.meta()
            .annotations
            .as_ref()
            .and_then(|a| a.get(PAUSED_ANNOTATION))
            .is_some_and(|v| v == "true")
    }
}

/// The remote object a status has recorded (created or adopted earlier), if any.
/// `Governed` for a kind whose remote object is called `$what`, whose spec has
/// `managementPolicy`, a `deletionPolicy` with an `Orphan` variant, and the field `$named` (e.g.
/// `slug`, `identity.policy_id`; shown as `$by`, by default `spec.slug`) that names a remote
/// object it [`Naming::Adopts`] or [`Naming::CreatesAs`] (`$naming`). `in $part` reads those
/// fields from `spec.$part` (a part the spec flattens).
macro_rules! governed {
    ($kind:ty, $what:literal, $orphan:path, $naming:ident $($named:ident).+ $(as $by:literal)?) => {
        $crate::resources::common::governed!(
            $kind, $what, $orphan, $naming $($named).+ $(as $by)?, in spec
        );
    };
    ($kind:ty, $what:literal, $orphan:path, $naming:ident $($named:ident).+ $(as $by:literal)?,
     in $($part:ident).+) => {
        impl $crate::resources::common::Governed for $kind {
            const WHAT: &'static str = $what;
            const NAMING: $crate::resources::common::Naming =
                $crate::resources::common::Naming::$naming;
            const NAMED_BY: &'static str = $crate::resources::common::governed!(@by $($by)?);
            fn management_policy(&self) -> $crate::resources::common::ManagementPolicy {
                self.$($part).+.management_policy
            }
            fn orphaning(&self) -> Self {
                let mut copy = self.clone();
                copy.$($part).+.deletion_policy = $orphan;
                copy
            }
            fn orphans(&self) -> bool {
                self.$($part).+.deletion_policy == $orphan
            }
            fn named_remote(&self) -> Option<&str> {
                self.$($part).+.$($named).+.as_deref()
            }
        }
    };
    (@by $by:literal) => { $by };
    (@by) => { "spec.slug" };
}
pub(crate) use governed;

/// [`Recorded`] of a status that records its remote object by `id` and `slug` (found by either;
/// `$first or $second` is the one it is recorded by), or by `id` alone (`$only`), and, where
/// named, the field that keeps the remote object's `last_updated_at`.
macro_rules! recorded {
    ($status:ty, $first:ident or $second:ident $(, $updated:ident)?) => {
        impl $crate::resources::common::Recorded for $status {
            fn recorded_remote(&self) -> Option<&str> {
                self.$first.as_deref().or(self.$second.as_deref())
            }
            fn remote_keys(&self) -> Vec<&str> {
                [self.id.as_deref(), self.slug.as_deref()]
                    .into_iter()
                    .flatten()
                    .collect()
            }
            $(fn remote_updated_at(&self) -> Option<&str> {
                self.$updated.as_deref()
            })?
        }
    };
    ($status:ty, $only:ident $(, $updated:ident)?) => {
        impl $crate::resources::common::Recorded for $status {
            fn recorded_remote(&self) -> Option<&str> {
                self.$only.as_deref()
            }
            $(fn remote_updated_at(&self) -> Option<&str> {
                self.$updated.as_deref()
            })?
        }
    };
}
pub(crate) use recorded;

pub trait Recorded {
    fn recorded_remote(&self) -> Option<&str>;
    /// Every key the remote object can be found by in a list: the id first, then the slug.
    fn remote_keys(&self) -> Vec<&str> {
        self.recorded_remote().into_iter().collect()
    }
    /// [`Recorded::remote_keys`], owned.
    fn remote_key_strings(&self) -> Vec<String> {
        self.remote_keys().into_iter().map(str::to_string).collect()
    }
    /// The remote object's `last_updated_at` as aigw last read it, where the kind records it.
    fn remote_updated_at(&self) -> Option<&str> {
        None
    }
}

/// The spec of an organisation kind that sends the values of one Secret, which no read shows
/// (SecretReference's `auth_config`, McpIntegration's `configurations`): its bodies with those
/// values filled in, and how a read differs from it.
pub trait SendsSecretValues {
    /// The remote object as a read shows it.
    type Remote;
    /// The values filled in from the Secret.
    type Values: Clone + Default;
    type Create;
    type Update;
    /// The field a change of the Secret's values reports as differing: an input, never an
    /// outside edit.
    const FROM_SECRET: &'static str;
    /// The create body with `values` filled in, in the tenant `organisation_id`.
    fn create_request(&self, values: Self::Values, organisation_id: Option<String>)
    -> Self::Create;
    /// The update body, with `values` where they were read.
    fn update_request(&self, values: Option<Self::Values>) -> Self::Update;
    /// Fields where `remote` differs from the spec as far as a read can tell (the values read
    /// masked, if at all).
    fn diff(&self, remote: &Self::Remote) -> Vec<&'static str>;
    /// Fixed fields where `remote` differs; no update can fix these.
    fn immutable_conflicts(&self, remote: &Self::Remote) -> Vec<&'static str>;
}

/// What a create in flight sent, recorded with its intent (`pendingCreate`), so that a lookup
/// after a lost answer matches on what was sent (not on a spec edited since) and within the
/// window the POST could have created something in.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateAttempt {
    /// The name the request carried.
    pub name: Option<String>,
    /// The workspace the request carried.
    pub workspace_id: Option<String>,
    /// The slug the request carried, for a kind whose create names one: an object of another
    /// slug is not this create's.
    pub slug: Option<String>,
    /// HMAC-SHA256 (`hmac-sha256:`, keyed with the operator's Secret `aigw-hash-key`) of the
    /// object's uid and the request body: what was sent, without a way to test guesses of the
    /// Secret values in it.
    pub body_hash: Option<String>,
    /// When the request ended without a readable answer: nothing it made can be younger, and a
    /// list may be taken as proof of absence only a settle time after this.
    pub ended_at: Option<String>,
    /// The id of the intent this attempt belongs to (the `aigw.io/create-intent` annotation).
    pub intent: Option<String>,
}

/// Annotation holding the create intent of a resource: written, with aigw's finalizer, in one
/// metadata write guarded by the resourceVersion before the POST is sent; settled by the
/// status write of its outcome (`status.createSettled` names its id), never removed. The watch
/// caches do not keep it: `Managed::prepare` reads it into the status as each copy arrives.
pub const CREATE_INTENT_ANNOTATION: &str = "aigw.io/create-intent";

/// The value of [`CREATE_INTENT_ANNOTATION`] (JSON).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CreateIntent {
    /// When the POST was about to be sent (the status's `pendingCreate` while it is in flight).
    pub pending_create: String,
    /// What it sends; `intent` is this intent's id.
    pub create_attempt: CreateAttempt,
}

impl CreateIntent {
    /// The intent an object's annotation holds, if any (one that does not parse is none).
    pub fn of(meta: &kube::api::ObjectMeta) -> Option<Self> {
        let text = meta.annotations.as_ref()?.get(CREATE_INTENT_ANNOTATION)?;
        serde_json::from_str(text).ok()
    }
}

/// Names the cluster-scoped `Connection` that says how to reach the management API.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionRef {
    /// Name of the cluster-scoped Connection. When no Connection of that name exists and the
    /// name is `default`, the operator's own flags (--management-url, --token-file) are used.
    pub name: String,
}

impl Default for ConnectionRef {
    fn default() -> Self {
        Self {
            name: "default".into(),
        }
    }
}

/// Names a cluster-scoped `Workspace` resource, instead of the UUID of its remote workspace
/// (`workspaceId`). The operator sends the UUID that Workspace recorded (`status.id`) once it
/// is Ready; until then the object waits (`WorkspaceNotReady`) and writes nothing. The
/// Connection's grants apply to that workspace as to one named by id.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceRef {
    /// Name of the Workspace resource.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// Condition types every aigw status carries (kstatus).
pub mod condition {
    /// The remote object matches the spec.
    pub const READY: &str = "Ready";
    /// Work towards the spec is in progress.
    pub const RECONCILING: &str = "Reconciling";
    /// Only a change of the spec can make progress.
    pub const STALLED: &str = "Stalled";
    /// `managementPolicy: Observe` found the remote object different from the spec.
    pub const DRIFTED: &str = "Drifted";
    /// The `aigw.io/paused` annotation holds reconciling.
    pub const PAUSED: &str = "Paused";
}

/// Schema of a free-form JSON object kept as the user wrote it.
pub fn free_form_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// A free-form object whose credential keys ([`CREDENTIAL_KEYS`]) are refused in plain text:
/// each declared as a string described by `description(key)`, so `kubectl explain` says it, and
/// so the admission policy of the kind finds the object and refuses them
/// ([`crate::resources::free_form::credential_levels`]). `more` follows as further properties.
///
/// The refusal is the admission policy's, not a CEL rule of the CRD: the apiserver runs a CRD's
/// rules again on every write of an object, its metadata and status writes included, and each
/// `has(self.key)` there builds a map of every property the object declares, so twenty such
/// tests at each level took 14 % of the control plane's CPU on status writes; without them a
/// rollout of Configs ran 15 to 20 % faster. The policy runs only when the spec is written.
///
/// [`CREDENTIAL_KEYS`]: crate::api::secret_fields::CREDENTIAL_KEYS
pub(crate) fn refusing_credentials(
    description: impl Fn(&str) -> String,
    more: serde_json::Map<String, serde_json::Value>,
) -> serde_json::Value {
    use crate::api::secret_fields::CREDENTIAL_KEYS;
    use serde_json::json;
    let mut properties = serde_json::Map::new();
    for key in CREDENTIAL_KEYS.iter().copied() {
        let property = json!({"type": "string", "description": description(key)});
        properties.insert(key.into(), property);
    }
    properties.extend(more);
    json!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
        "properties": properties,
    })
}

/// Schema of the status conditions list: a map keyed by `type`, so server-side apply merges them.
pub fn conditions_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut schema = generator.subschema_for::<Vec<Condition>>();
    if let Some(object) = schema.as_object_mut() {
        object.insert("x-kubernetes-list-type".into(), "map".into());
        object.insert(
            "x-kubernetes-list-map-keys".into(),
            serde_json::json!(["type"]),
        );
    }
    schema
}

/// Returns the condition of the given type, if present.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// The fields of `checks` that differ, in the order given: what a `diff` or an
/// `immutable_conflicts` reports, each check a spec field's name and whether the remote object
/// differs in it.
pub fn differing<const N: usize>(checks: [(&'static str, bool); N]) -> Vec<&'static str> {
    checks
        .into_iter()
        .filter_map(|(field, differs)| differs.then_some(field))
        .collect()
}

/// True when the spec sets `wanted` and the remote value differs: a field the spec leaves out
/// leaves the remote value alone.
pub fn set_and_differs<T: PartialEq>(wanted: &Option<T>, remote: &Option<T>) -> bool {
    wanted.is_some() && wanted != remote
}

/// True when the spec names a slug (`wanted`) and the remote object has another one (an empty
/// remote slug is none yet).
pub fn other_slug(wanted: Option<&String>, remote: &str) -> bool {
    wanted.is_some_and(|slug| !remote.is_empty() && remote != slug)
}

/// True when the remote object belongs to a workspace (an empty id is none) other than
/// `wanted`.
pub fn other_workspace(remote: Option<&str>, wanted: &str) -> bool {
    remote.is_some_and(|ws| !ws.is_empty() && ws != wanted)
}

/// True when two JSON documents mean the same: key order never matters (maps compare by key),
/// and numbers compare by value, so a server that returns `1.0` as `1` is not a difference.
/// Array order does matter (targets, fallbacks).
pub fn json_equivalent(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => x == y,
            _ => x == y,
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_equivalent(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equivalent(v, w)))
        }
        _ => a == b,
    }
}

/// What a drift correction replaced: when, the remote version it replaced (for kinds with
/// versions), and for each path that differed the remote value and the desired one, as JSON
/// text, masked where the path or a key on it is secret.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DriftCorrection {
    /// When aigw wrote the correction.
    pub at: String,
    /// The remote `version_id` the correction replaced.
    pub replaced_version_id: Option<String>,
    /// The paths that differed (JSON Pointers into the API's object), first
    /// [`DRIFT_PATHS_KEPT`] of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<DriftedValue>,
    /// How many more paths differed than `changes` lists.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub more: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// One path a drift correction overwrote.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DriftedValue {
    /// JSON Pointer into the API's object, e.g. `/config/retry/attempts`.
    pub path: String,
    /// What the remote object held (JSON text; absent when it had nothing there).
    pub remote: Option<String>,
    /// What aigw wrote back (JSON text; absent when it removed the path).
    pub desired: Option<String>,
}

/// How many changed paths a [`DriftCorrection`] lists.
pub const DRIFT_PATHS_KEPT: usize = 20;
/// The longest value a [`DriftedValue`] shows, in characters.
const DRIFT_VALUE_CHARS: usize = 200;
/// What a secret value shows as.
const MASKED: &str = "\"(masked)\"";
/// What a secret value the remote object changed shows as.
const MASKED_DIFFERENT: &str = "\"(masked, different)\"";

impl DriftCorrection {
    /// The paths where `remote` differs from `desired` (both in the API's shape, compared by
    /// meaning as [`json_equivalent`] does). Secrets are masked wherever they stand: values
    /// under a secret-sounding key or in a header map (the one secret list), and any text
    /// holding one of `concealed` (the values `secretRefs` substituted: a remote edit may move
    /// them to another index, where no path names them).
    pub fn between(
        at: String,
        replaced_version_id: Option<String>,
        desired: &serde_json::Value,
        remote: &serde_json::Value,
        concealed: &[&str],
    ) -> Self {
        // Secrets go before anything is compared or cut out: a changed subtree that holds one
        // (an added target with its `api_key`, a `custom_headers` map) shows it masked too.
        let (mut desired, mut remote) = masked_pair(desired, remote);
        for document in [&mut desired, &mut remote] {
            mask_values(document, concealed);
        }
        let (desired, remote) = (&desired, &remote);
        let mut changes = Vec::new();
        leaf_changes(desired, remote, String::new(), &mut changes);
        let more = changes.len().saturating_sub(DRIFT_PATHS_KEPT) as u32;
        changes.truncate(DRIFT_PATHS_KEPT);
        let changes = changes
            .into_iter()
            .map(|(path, remote, desired)| {
                let hidden = path
                    .split('/')
                    .any(crate::api::secret_fields::is_secret_key);
                let show = |value: Option<&serde_json::Value>| {
                    value.map(|v| match hidden {
                        true => MASKED.to_string(),
                        false => shortened(v.to_string()),
                    })
                };
                DriftedValue {
                    remote: show(remote),
                    desired: show(desired),
                    path,
                }
            })
            .collect();
        DriftCorrection {
            at,
            replaced_version_id,
            changes,
            more,
        }
    }

    /// For a kind compared field by field: the `fields` that differ (camelCase spec names),
    /// as the spec says them (`desired`) and as a spec adopting the remote object would
    /// (`current`).
    pub fn of_fields(
        at: String,
        replaced_version_id: Option<String>,
        desired: &impl Serialize,
        current: &impl Serialize,
        fields: &[&str],
    ) -> Self {
        let pick = |value: serde_json::Value| {
            serde_json::Value::Object(
                fields
                    .iter()
                    .filter_map(|f| value.get(*f).map(|v| (f.to_string(), v.clone())))
                    .collect(),
            )
        };
        let desired = pick(serde_json::to_value(desired).unwrap_or_default());
        let current = pick(serde_json::to_value(current).unwrap_or_default());
        Self::between(at, replaced_version_id, &desired, &current, &[])
    }

    /// The record with `entries` (the `secretRefs` paths drift changed or removed) among its
    /// changes, in path order, within the [`DRIFT_PATHS_KEPT`] it lists.
    pub fn with_secret_paths(mut self, entries: Vec<DriftedValue>) -> Self {
        let total = self.changes.len() + self.more as usize + entries.len();
        self.changes.extend(entries);
        self.changes.sort_by(|a, b| a.path.cmp(&b.path));
        self.changes.truncate(DRIFT_PATHS_KEPT);
        self.more = (total - self.changes.len()) as u32;
        self
    }

    /// The changed paths, for an event message.
    pub fn paths(&self) -> String {
        let mut paths: Vec<&str> = self.changes.iter().map(|c| c.path.as_str()).collect();
        if paths.is_empty() {
            paths.push("/");
        }
        let more = match self.more {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        format!("{}{more}", paths.join(", "))
    }
}

/// `desired` and `remote` with every secret the one secret list finds in either (a secret key,
/// a header map's values) replaced: `"(masked)"` where both hold the same value, and on the
/// remote side `"(masked, different)"` where they differ, so the change still shows.
fn masked_pair(
    desired: &serde_json::Value,
    remote: &serde_json::Value,
) -> (serde_json::Value, serde_json::Value) {
    use crate::api::secret_fields::secret_pointers;
    let (mut d, mut r) = (desired.clone(), remote.clone());
    let mut pointers = secret_pointers(desired);
    pointers.extend(secret_pointers(remote));
    pointers.sort();
    pointers.dedup();
    for pointer in pointers {
        let same = desired.pointer(&pointer) == remote.pointer(&pointer);
        if let Some(slot) = d.pointer_mut(&pointer) {
            *slot = serde_json::Value::String("(masked)".into());
        }
        if let Some(slot) = r.pointer_mut(&pointer) {
            let mark = if same {
                "(masked)"
            } else {
                "(masked, different)"
            };
            *slot = serde_json::Value::String(mark.into());
        }
    }
    (d, r)
}

/// Prepares the two documents of a drift record for a resource whose `secretRefs` fill
/// `paths`, and returns the record's entries for those paths. Each path is taken out of both
/// documents (a path into a list is masked in place: taking it out would shift the rest), and
/// values under the paths' key names, or in the lists they index, are masked wherever they
/// stand (a remote edit may have moved a value). A path the remote object lacks, or holds
/// something else at than what `concealed` (the values substituted) says, gets an entry with
/// its value masked, so a console edit that removed a credential leaves a trace. `prefix`:
/// where the documents sit in the record (`/config` for a Config).
pub fn take_secret_paths(
    desired: &mut serde_json::Value,
    remote: &mut serde_json::Value,
    paths: &[&str],
    concealed: &[&str],
    prefix: &str,
) -> Vec<DriftedValue> {
    use serde_json::Value;
    let mut entries = Vec::new();
    for path in paths {
        let theirs = remote.pointer(path);
        let unchanged = theirs
            .and_then(Value::as_str)
            .is_some_and(|s| concealed.contains(&s) || s.contains('*') || s.contains("masked"));
        if !unchanged {
            entries.push(DriftedValue {
                path: format!("{prefix}{path}"),
                remote: theirs.map(|_| MASKED_DIFFERENT.to_string()),
                desired: Some(MASKED.to_string()),
            });
        }
        for document in [&mut *desired, &mut *remote] {
            let in_list = path
                .rsplit_once('/')
                .is_some_and(|(parent, _)| document.pointer(parent).is_some_and(Value::is_array));
            match in_list {
                true => {
                    if let Some(slot) = document.pointer_mut(path) {
                        *slot = Value::String("(masked)".into());
                    }
                }
                false => {
                    super::config::take_pointer(document, path);
                }
            }
        }
    }
    let keys = secret_ref_keys(paths.iter().copied());
    let lists = secret_ref_lists(paths.iter().copied());
    for document in [desired, remote] {
        mask_secret_ref_keys(document, &keys);
        mask_secret_ref_lists(document, &lists, None);
    }
    entries
}

/// The keys of the lists `secretRefs` paths index (`/input_guardrails/1` → `input_guardrails`).
fn secret_ref_lists<'a>(paths: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    paths
        .into_iter()
        .filter_map(|path| {
            let (parent, last) = path.rsplit_once('/')?;
            last.parse::<usize>().ok()?;
            parent.rsplit('/').next().filter(|key| !key.is_empty())
        })
        .collect()
}

/// Masks every item (not an object or list) of a list under one of `lists`, anywhere.
fn mask_secret_ref_lists(document: &mut serde_json::Value, lists: &[&str], key: Option<&str>) {
    use serde_json::Value;
    match document {
        Value::Array(items) => {
            let listed = key.is_some_and(|k| lists.contains(&k));
            for item in items.iter_mut() {
                match item {
                    Value::Object(_) | Value::Array(_) => mask_secret_ref_lists(item, lists, None),
                    Value::Null => {}
                    _ if listed => *item = Value::String("(masked)".into()),
                    _ => {}
                }
            }
        }
        Value::Object(map) => {
            for (name, value) in map.iter_mut() {
                mask_secret_ref_lists(value, lists, Some(name));
            }
        }
        _ => {}
    }
}

/// Masks, anywhere in `document`, every value under one of `keys`: the last segments of the
/// `secretRefs` paths. A remote edit may move a Secret-supplied value (an earlier one, which
/// no current value matches) to another index, where no path names it.
pub fn mask_secret_ref_keys(document: &mut serde_json::Value, keys: &[&str]) {
    use serde_json::Value;
    match document {
        Value::Array(items) => items.iter_mut().for_each(|v| mask_secret_ref_keys(v, keys)),
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                if keys.contains(&key.as_str()) && !value.is_null() {
                    *value = Value::String("(masked)".into());
                } else {
                    mask_secret_ref_keys(value, keys);
                }
            }
        }
        _ => {}
    }
}

/// The keys `secretRefs` paths end in (`/targets/0/api_key` → `api_key`), for
/// [`mask_secret_ref_keys`]; an index is no key.
pub fn secret_ref_keys<'a>(paths: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    paths
        .into_iter()
        .filter_map(|path| path.rsplit('/').next())
        .filter(|key| !key.is_empty() && key.parse::<usize>().is_err())
        .collect()
}

/// Every string (or number) in `document` that holds one of `values`
/// ([`crate::api::concealment::holds`]: as written or encoded, short values where they stand
/// alone) reads `"(masked)"`.
fn mask_values(document: &mut serde_json::Value, values: &[&str]) {
    use serde_json::Value;
    match document {
        Value::String(text)
            if values
                .iter()
                .any(|v| crate::api::concealment::holds(text, v)) =>
        {
            *text = "(masked)".into();
        }
        // An API may keep a Secret's digits as a number.
        Value::Number(number)
            if values
                .iter()
                .any(|v| crate::api::concealment::holds(&number.to_string(), v)) =>
        {
            *document = Value::String("(masked)".into());
        }
        Value::Array(items) => items.iter_mut().for_each(|v| mask_values(v, values)),
        Value::Object(map) => map.values_mut().for_each(|v| mask_values(v, values)),
        _ => {}
    }
}

type LeafChange<'a> = (
    String,
    Option<&'a serde_json::Value>,
    Option<&'a serde_json::Value>,
);

/// Every leaf path where the two documents differ, in document order (maps by key).
fn leaf_changes<'a>(
    desired: &'a serde_json::Value,
    remote: &'a serde_json::Value,
    path: String,
    out: &mut Vec<LeafChange<'a>>,
) {
    use serde_json::Value;
    if json_equivalent(desired, remote) {
        return;
    }
    match (desired, remote) {
        (Value::Object(d), Value::Object(r)) => {
            let mut keys: Vec<&String> = d.keys().chain(r.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let child = format!("{path}/{}", key.replace('~', "~0").replace('/', "~1"));
                match (d.get(key), r.get(key)) {
                    (Some(dv), Some(rv)) => leaf_changes(dv, rv, child, out),
                    (dv, rv) => out.push((child, rv, dv)),
                }
            }
        }
        (Value::Array(d), Value::Array(r)) if d.len() == r.len() => {
            for (n, (dv, rv)) in d.iter().zip(r).enumerate() {
                leaf_changes(dv, rv, format!("{path}/{n}"), out);
            }
        }
        _ => out.push((path, Some(remote), Some(desired))),
    }
}

fn shortened(text: String) -> String {
    match text.char_indices().nth(DRIFT_VALUE_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

#[cfg(test)]
mod drift_tests {
    use super::DriftCorrection;
    use serde_json::json;

    #[test]
    fn a_correction_names_each_path_with_both_values_and_masks_secrets() {
        let desired = json!({"name": "routing", "config": {"retry": {"attempts": 3},
            "targets": [{"provider": "@openai", "api_key": "sk-desired"}], "hook": "from-secret"}});
        let remote = json!({"name": "routing", "config": {"retry": {"attempts": 5.0},
            "targets": [{"provider": "@other", "api_key": "sk-remote"}], "hook": "edited", "extra": true}});
        let record = DriftCorrection::between(
            "2026-11-26T12:00:00Z".into(),
            Some("v7".into()),
            &desired,
            &remote,
            &["from-secret", "edited"],
        );
        let shown: Vec<(&str, Option<&str>, Option<&str>)> = record
            .changes
            .iter()
            .map(|c| (c.path.as_str(), c.remote.as_deref(), c.desired.as_deref()))
            .collect();
        assert_eq!(
            shown,
            vec![
                ("/config/extra", Some("true"), None),
                ("/config/retry/attempts", Some("5.0"), Some("3")),
                (
                    "/config/targets/0/api_key",
                    Some("\"(masked)\""),
                    Some("\"(masked)\"")
                ),
                (
                    "/config/targets/0/provider",
                    Some("\"@other\""),
                    Some("\"@openai\"")
                ),
            ]
        );
        let added = DriftCorrection::between(
            "t".into(),
            None,
            &json!({"targets": [{"provider": "@a"}]}),
            &json!({"targets": [{"provider": "@a"}, {"provider": "@b", "custom_headers": {"x-tenant": "hdr-secret"},
                                                     "override_params": {"api_key": "sk-nested"}}]}),
            &[],
        );
        let text = serde_json::to_string(&added).unwrap();
        assert!(
            !text.contains("hdr-secret") && !text.contains("sk-nested"),
            "{text}"
        );
        assert!(text.contains("@b"), "the rest of the subtree shows: {text}");
        // A remote edit moved a Secret-supplied value to another index (check 0 deleted): no
        // path names it any more, its value still never shows.
        let shifted = DriftCorrection::between(
            "t".into(),
            None,
            &json!({"checks": [{"id": "a"}, {"id": "b", "parameters": {}}]}),
            &json!({"checks": [{"id": "b", "parameters": {"webhookURL": "https://hook.example/S3CRET"}}]}),
            &["https://hook.example/S3CRET"],
        );
        let text = serde_json::to_string(&shifted).unwrap();
        assert!(!text.contains("S3CRET"), "{text}");
        assert!(text.contains("/checks"), "{text}");
        let text = serde_json::to_string(&record).unwrap();
        for secret in ["sk-desired", "sk-remote", "from-secret", "\"edited\""] {
            assert!(!text.contains(secret), "{text}");
        }
        assert_eq!(
            record.paths(),
            "/config/extra, /config/retry/attempts, /config/targets/0/api_key, /config/targets/0/provider"
        );
    }
}

#[cfg(test)]
mod drift_echo_tests {
    use super::DriftCorrection;
    use serde_json::json;

    /// A remote edit (or the API) keeps a Secret-supplied value as a number, or upper-cased,
    /// at a path no `secretRefs` names: the drift record printed it (attack on issue 27).
    #[test]
    fn a_moved_secret_value_kept_as_a_number_or_recased_is_masked() {
        let record = DriftCorrection::between(
            "t".into(),
            None,
            &json!({"checks": [{"id": "a"}, {"id": "b", "parameters": {"pin": "90417735"}}]}),
            &json!({"checks": [{"id": "b", "parameters": {"code": 90417735.0, "tag": "TOKEN-ABCD-EF12"}}]}),
            &["90417735", "token-abcd-ef12"],
        );
        let text = serde_json::to_string(&record).unwrap();
        assert!(!text.contains("90417735"), "{text}");
        assert!(!text.contains("TOKEN-ABCD-EF12"), "{text}");
        assert!(text.contains("/checks"), "{text}");
    }
}

#[cfg(test)]
mod json_tests {
    use super::json_equivalent;
    use serde_json::json;

    #[test]
    fn normalised_documents_are_equivalent() {
        let written =
            json!({"retry": {"attempts": 3.0}, "cache": {"mode": "simple", "max_age": 60}});
        let read = json!({"cache": {"max_age": 60.0, "mode": "simple"}, "retry": {"attempts": 3}});
        assert!(json_equivalent(&written, &read));
        assert!(!json_equivalent(&json!({"a": 1}), &json!({"a": 1.5})));
        assert!(!json_equivalent(&json!([1, 2]), &json!([2, 1])));
        assert!(!json_equivalent(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
    }
}
