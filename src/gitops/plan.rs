//! `aigw plan`: what the operator would do to each remote object if the manifests were
//! applied now, found through the management API with reads only (GET and list).
//!
//! The remote counterpart of a resource is the object its `spec.slug` / `spec.deploymentId` /
//! `spec.policyId` names; without one, the object the live resource's `status.slug` /
//! `status.id` names (only with a kubeconfig); otherwise there is none and the operator would
//! create one. Differences come from the same `diff` functions the operator runs.
//!
//! A plan is read by whoever wrote the pull request, so it shows of a remote object only what
//! the operator would let that manifest reach (`plan_claims`): with `--kubeconfig`, an
//! adoption the Connection's grants refuse, or of an object another live resource manages, is
//! a conflict that shows nothing of it, and the Secret paths of every live resource recording
//! the object are masked. Of an object the manifest adopts, every string of its document reads
//! `(value hidden)` ([`super::mask::hide_unconfirmed`]), whatever the manifest holds there: no one
//! can tell which of its values some resource took from a Secret, and a plan that compared them
//! with the manifest's would tell whether a guess is right. Such an adoption may write
//! ([`Entry::values_hidden`]). The manifest itself is masked by path, never by a Secret's value.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use kube::Resource;
use kube::core::object::HasStatus;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::GitopsError;
use super::line_diff;
use super::mask::{Masking, add_references, hide_unconfirmed, masked, masked_against};
use super::plan_claims::{Claimed, Own, claimed, refused_adoption};
use super::project;
use super::validate::{Manifest, Object};
use crate::api::{self, ApiError, Client};
use crate::resources::common::{Governed, ManagementPolicy, Recorded};
use crate::resources::config::ReferencedKind;
use crate::resources::config_document::MarkedDocument;
use crate::resources::guardrail::GuardrailKind;
use crate::resources::policy::Policy;
use crate::resources::{ApiKey, ClusterGuardrail, Config, Deployment, Guardrail};

/// Version of the `--output json` document; bumped only on incompatible changes.
pub const FORMAT_VERSION: u32 = 1;

/// What the operator would do with one resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// No remote counterpart: a POST.
    Create,
    /// The counterpart differs: a PUT of the listed fields.
    Update,
    /// The counterpart matches the spec.
    NoChange,
    /// The spec names an existing remote object aigw does not manage yet; `changes` lists what
    /// the first reconcile would PUT (none when it already matches).
    Adopt,
    /// The operator could not reconcile it: the named object does not exist, or an immutable
    /// field differs.
    Conflict,
    /// `managementPolicy: Observe`: the operator only reads; `changes` are the differences it
    /// would report (`Drifted`), never written.
    Observe,
    /// An update its promotion gate (`spec.promotion`) holds now: `changes` are written once
    /// the resources it follows have proven its revision; `reason` says what it waits for.
    Gated,
}

impl Action {
    fn word(self) -> &'static str {
        match self {
            Action::Create => "create",
            Action::Update => "update",
            Action::NoChange => "no change",
            Action::Adopt => "adopt",
            Action::Conflict => "conflict",
            Action::Observe => "observe",
            Action::Gated => "gated",
        }
    }
}

/// One field that changes. Secret-looking values are masked on both sides.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldChange {
    /// The spec field, e.g. `config`, `authSettings`, `value`.
    pub field: String,
    /// The remote value in spec form; `null` for a create.
    pub from: Value,
    pub to: Value,
    /// For documents (`config`, `deploymentConfig`): a line diff of the pretty JSON.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub diff: Vec<String>,
}

/// The plan for one resource.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub kind: String,
    /// As the manifest says; absent when kubectl's namespace would decide.
    pub namespace: Option<String>,
    pub name: String,
    /// `file#document` the manifest came from.
    pub source: String,
    pub action: Action,
    /// Slug (configs) or id of the remote counterpart, when there is one.
    pub remote: Option<String>,
    pub changes: Vec<FieldChange>,
    /// Why, for conflicts, for creates of a vanished counterpart, and for an adoption whose
    /// remote values are hidden.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// An adoption whose remote document's strings are hidden ([`super::mask::hide_unconfirmed`]):
    /// they are never compared with the manifest's, so the plan cannot tell whether applying
    /// writes them, and says it may (`changes` lists the document, exit code 2), whether or not
    /// they already match.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub values_hidden: bool,
    /// The id of the remote object read, however the manifest named it (slug or id): two
    /// manifests resolving to one object are a conflict ([`same_remote`]).
    #[serde(skip)]
    pub(super) remote_id: Option<String>,
}

impl Entry {
    /// True when applying would write to the management API (a gated update too: once its
    /// gate opens).
    pub fn writes(&self) -> bool {
        match self.action {
            Action::Create | Action::Update | Action::Gated => true,
            Action::Adopt => !self.changes.is_empty() || self.values_hidden,
            Action::NoChange | Action::Conflict | Action::Observe => false,
        }
    }

    /// The entry of an `Observe` resource: what a Full one would write becomes the differences
    /// it reports; with nothing to observe (no counterpart) it would stall, sending nothing.
    /// A conflict stays one: the operator would stall on it in Observe too.
    /// This entry, for the remote object of id `id`.
    pub(super) fn identified(self, id: &str) -> Self {
        Entry {
            remote_id: Some(id.to_string()),
            ..self
        }
    }

    /// This entry, of an adoption whose remote document had values hidden (`hidden`): said to
    /// write, whatever its remote strings are.
    pub(super) fn with_values_hidden(self, hidden: bool) -> Self {
        if !hidden {
            return self;
        }
        let reason = match self.action {
            Action::Adopt => self.reason.or_else(|| Some(VALUES_HIDDEN.to_string())),
            _ => self.reason,
        };
        Entry {
            values_hidden: true,
            reason,
            ..self
        }
    }

    /// Says which `secretRefs` paths change their source ([`sources_moved`]), unless the entry
    /// says something else already: they show changed whether the values are equal or not.
    pub(super) fn with_sources_moved(self, moved: &[String]) -> Self {
        if moved.is_empty() || self.reason.is_some() {
            return self;
        }
        self.because(&format!(
            "{}: the source of the value (a Secret, or a literal) differs between this manifest and what the remote holds or the live spec says: shown changed whatever the values",
            moved.join(", ")
        ))
    }

    /// The entry with `reason`.
    pub(super) fn because(self, reason: &str) -> Self {
        Entry {
            reason: Some(reason.to_string()),
            ..self
        }
    }

    fn observed(self) -> Self {
        if self.action == Action::Conflict {
            return self;
        }
        let reason = match self.action {
            Action::Create => Some(
                "nothing to observe: no remote counterpart (spec names none and none is recorded); the operator would stall (NothingToObserve) and send nothing"
                    .to_string(),
            ),
            _ if self.changes.is_empty() => None,
            _ if self.values_hidden => Some(
                "may differ from the remote object (its values are hidden): a difference is reported as Drifted, never written".into(),
            ),
            _ => Some("differs from the remote object: reported as Drifted, never written".into()),
        };
        let changes = match self.action {
            Action::Create => Vec::new(),
            _ => self.changes,
        };
        Entry {
            action: Action::Observe,
            changes,
            reason,
            ..self
        }
    }
}

/// Why an adoption says it may write ([`Entry::values_hidden`]).
const VALUES_HIDDEN: &str = "may write: this resource does not record the remote object (without --kubeconfig none is known to), so which of its values came from a Secret is unknown; its strings are hidden and never compared with the manifest's, and applying may write any of them";

/// Counts per action.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub create: usize,
    pub update: usize,
    pub no_change: usize,
    pub adopt: usize,
    pub conflict: usize,
    pub observe: usize,
    pub gated: usize,
}

/// The whole plan: `{"version": 1, "summary": {...}, "resources": [...]}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    pub version: u32,
    pub summary: Summary,
    pub resources: Vec<Entry>,
}

impl Plan {
    fn new(resources: Vec<Entry>) -> Self {
        let mut summary = Summary::default();
        for entry in &resources {
            *match entry.action {
                Action::Create => &mut summary.create,
                Action::Update => &mut summary.update,
                Action::NoChange => &mut summary.no_change,
                Action::Adopt => &mut summary.adopt,
                Action::Conflict => &mut summary.conflict,
                Action::Observe => &mut summary.observe,
                Action::Gated => &mut summary.gated,
            } += 1;
        }
        Self {
            version: FORMAT_VERSION,
            summary,
            resources,
        }
    }

    /// 1 with any conflict, 2 when applying would write to the API, 0 otherwise.
    pub fn exit_code(&self) -> u8 {
        if self.summary.conflict > 0 {
            1
        } else if self.resources.iter().any(Entry::writes) {
            2
        } else {
            0
        }
    }

    /// The human rendering: one block per resource, then a summary line.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for entry in &self.resources {
            render_entry(entry, &mut out);
        }
        let s = &self.summary;
        let observed = match s.observe {
            0 => String::new(),
            n => format!(", {n} observed (Observe: never written)"),
        };
        let gated = match s.gated {
            0 => String::new(),
            n => format!(", {n} gated (written once promoted)"),
        };
        out.push_str(&format!(
            "\nPlan: {} to create, {} to update, {} to adopt, {} unchanged, {} in conflict{observed}{gated}.\n",
            s.create, s.update, s.adopt, s.no_change, s.conflict
        ));
        out
    }
}

fn render_entry(entry: &Entry, out: &mut String) {
    let who = match &entry.namespace {
        Some(ns) => format!("{} {ns}/{}", entry.kind, entry.name),
        None => format!("{} {}", entry.kind, entry.name),
    };
    let remote = entry
        .remote
        .as_ref()
        .map(|r| format!(" {r}"))
        .unwrap_or_default();
    let in_sync = if entry.values_hidden && matches!(entry.action, Action::Adopt | Action::Gated) {
        " (may write; remote values hidden)"
    } else if entry.values_hidden {
        " (remote values hidden)"
    } else if entry.action == Action::Adopt && entry.changes.is_empty() {
        " (in sync, nothing to write)"
    } else {
        ""
    };
    out.push_str(&format!(
        "{who} ({}): {}{remote}{in_sync}\n",
        entry.source,
        entry.action.word()
    ));
    if let Some(reason) = &entry.reason {
        out.push_str(&format!("    {reason}\n"));
    }
    for change in &entry.changes {
        if change.diff.is_empty() && change.from.is_null() {
            out.push_str(&format!("    {}: {}\n", change.field, change.to));
        } else if change.diff.is_empty() {
            out.push_str(&format!(
                "    {}: {} → {}\n",
                change.field, change.from, change.to
            ));
        } else {
            out.push_str(&format!("    {}:\n", change.field));
            for line in &change.diff {
                out.push_str(&format!("      {line}\n"));
            }
        }
    }
}

/// Read access to the cluster, to find the remote counterpart of resources without an id in
/// their spec (`status.slug` / `status.id` of the live resource).
#[derive(Clone)]
pub struct Live {
    pub client: kube::Client,
    /// For manifests without `metadata.namespace` (the kubeconfig context's namespace).
    pub default_namespace: String,
    /// The grants of the connection the command's flags define (`--grants-file`): what the
    /// operator's default connection grants when no Connection named `default` exists.
    pub default_grants: Option<Vec<crate::resources::connection::Grant>>,
}

/// What plans a manifest: the management API it reads, and the live resources when the plan
/// has cluster access.
#[derive(Clone, Copy)]
pub(super) struct Planner<'a> {
    pub(super) api: &'a Client,
    pub(super) live: Option<&'a Live>,
}

/// Plans every manifest (Connections are skipped: they configure aigw, not the remote API).
pub async fn plan(
    api: &Client,
    live: Option<&Live>,
    manifests: &[Manifest],
) -> Result<Plan, GitopsError> {
    let mut entries = Vec::new();
    let mut claims = Vec::new();
    for manifest in manifests {
        if let Object::Connection(_) = manifest.object {
            continue;
        }
        // The workspace `spec.workspaceRef` names, resolved as the operator resolves it.
        let object = super::plan_workspace::reached(live, &manifest.object).await?;
        // A namespace its Connection's grants refuse the remote object is shown none of it.
        let entry = match &object {
            Err(waits) => waits.clone(),
            Ok(object) => match refused_adoption(live, object).await? {
                Some(refused) => refused,
                None => Planner { api, live }.object(object).await?,
            },
        };
        let object = object.as_ref().unwrap_or(&manifest.object);
        let entry = match object.management_policy() {
            ManagementPolicy::Observe => entry.observed(),
            ManagementPolicy::Full => gate(live, object, entry).await?,
        };
        claims.push(
            entry
                .remote_id
                .as_deref()
                .and_then(|id| claim_key(object, id)),
        );
        entries.push(Entry {
            kind: manifest.object.kind().into(),
            namespace: manifest.object.namespace().map(str::to_string),
            name: manifest.object.name().into(),
            source: manifest.location.clone(),
            ..entry
        });
    }
    same_remote(&mut entries, &claims);
    Ok(Plan::new(entries))
}

/// What a remote object `id` read for `object` is claimed as: the kinds that share its names
/// (both guardrail kinds name guardrails), the Connection, and the id, whether the manifest
/// named the object by slug or by id. `None` for kinds whose spec names their object by id
/// only (`aigw validate` compares those as written).
fn claim_key(object: &Object, id: &str) -> Option<String> {
    let among = crate::registry::find(object.kind())?
        .spec_id
        .as_ref()?
        .among;
    let connection = match object {
        Object::Config(_)
        | Object::Guardrail(_)
        | Object::ClusterGuardrail(_)
        | Object::Integration(_)
        | Object::Provider(_)
        | Object::SecretReference(_)
        | Object::McpIntegration(_)
        | Object::McpServer(_) => object.connection_name()?,
        _ => return None,
    };
    Some(format!("{among}/{connection}/{id}"))
}

/// Entries whose manifests resolve to one remote object (`claims`, by [`claim_key`]): one names
/// it by slug and another by id, which `aigw validate` cannot tell apart offline. Each becomes
/// a conflict naming the others: applied, they would claim one object (the operator lets only
/// one manage it, `AlreadyManaged`) or undo each other's writes.
fn same_remote(entries: &mut [Entry], claims: &[Option<String>]) {
    let named: Vec<String> = entries
        .iter()
        .map(|e| match &e.namespace {
            Some(ns) => format!("{} {ns}/{} ({})", e.kind, e.name, e.source),
            None => format!("{} {} ({})", e.kind, e.name, e.source),
        })
        .collect();
    for (at, entry) in entries.iter_mut().enumerate() {
        let Some(key) = &claims[at] else {
            continue;
        };
        let others: Vec<&str> = (0..claims.len())
            .filter(|other| *other != at && claims[*other].as_ref() == Some(key))
            .map(|other| named[other].as_str())
            .collect();
        if others.is_empty() {
            continue;
        }
        entry.action = Action::Conflict;
        entry.reason = Some(format!(
            "the same remote object as {} (named by slug in one, by id in another, or twice): applied, only one would manage it (AlreadyManaged); keep one manifest",
            others.join(", ")
        ));
    }
}

impl Planner<'_> {
    /// The entry of one manifest (not a Connection), before its management policy and promotion
    /// gate are applied.
    async fn object(self, object: &Object) -> Result<Entry, GitopsError> {
        Ok(match object {
            Object::Config(o) => self.config(o).await?,
            Object::Deployment(o) => self.deployment(o).await?,
            Object::RateLimitsPolicy(o) => self.policy(o.as_ref()).await?,
            Object::UsageLimitsPolicy(o) => self.policy(o.as_ref()).await?,
            Object::Guardrail(o) => {
                let managed = live_object(self.live, o.as_ref()).await?;
                let namespace = o.metadata.namespace.clone();
                let secrets = self.live.map(|l| {
                    let namespace = namespace.unwrap_or_else(|| l.default_namespace.clone());
                    (l.client.clone(), namespace)
                });
                self.guardrail(o.as_ref(), managed, secrets).await?
            }
            Object::ClusterGuardrail(o) => {
                let managed = live_object(self.live, o.as_ref()).await?;
                // Its Secrets sit in the operator's namespace, which a plan does not know: it
                // hides by the key names of its paths.
                self.guardrail(o.as_ref(), managed, None).await?
            }
            // A rollout writes nothing to the management API: it moves ApiKeys, whose own
            // reconciles write.
            Object::Connection(_) | Object::ConfigRollout(_) => {
                entry(Action::NoChange, None, Vec::new(), None)
            }
            Object::ApiKey(o) => self.api_key(o).await?,
            Object::Integration(o) => self.integration(o).await?,
            Object::Provider(o) => self.provider(o).await?,
            Object::SecretReference(o) => self.secret_reference(o).await?,
            Object::Workspace(o) => self.workspace(o).await?,
            Object::McpIntegration(o) => self.mcp_integration(o).await?,
            Object::McpServer(o) => self.mcp_server(o).await?,
        })
    }
}

/// A write as the operator's promotion gate would hold it now: `gated`, with what it waits
/// for. The first create, or an entry that writes nothing, is never gated.
async fn gate(live: Option<&Live>, object: &Object, entry: Entry) -> Result<Entry, GitopsError> {
    // Refused at admission whatever the plan would do remotely (nothing, for a promotion added
    // to an unchanged document).
    if let Some(reason) = super::promotion::follows_itself(live, object).await? {
        return Ok(Entry {
            action: Action::Conflict,
            reason: Some(reason),
            ..entry
        });
    }
    let create = entry.action == Action::Create;
    let update = matches!(entry.action, Action::Update | Action::Adopt);
    if !(create || update) || !entry.writes() {
        return Ok(entry);
    }
    Ok(match super::promotion::held(live, object, create).await? {
        Some(reason) => Entry {
            action: Action::Gated,
            reason: Some(reason),
            ..entry
        },
        None => entry,
    })
}

/// Which remote object to read, and whether the operator would be adopting it.
pub(super) struct Counterpart {
    pub(super) key: String,
    /// Named by the spec and not yet managed by a live resource.
    pub(super) adopting: bool,
    /// Named by the spec (a missing one is a conflict, not a create).
    pub(super) from_spec: bool,
}

impl Counterpart {
    /// The remote object the live resource recorded (`recorded`), else the one the spec's slug
    /// names, which the operator adopts if it exists.
    pub(super) fn recorded_or_slug(recorded: Option<&str>, slug: Option<&str>) -> Option<Self> {
        let adopting = recorded.is_none();
        recorded.or(slug).map(|key| Counterpart {
            key: key.to_string(),
            adopting,
            from_spec: adopting,
        })
    }
}

/// The status of a resource's live copy (`managed`); a default one without it.
pub(super) fn status_of<K: HasStatus<Status: Default>>(managed: Option<K>) -> K::Status {
    managed
        .and_then(|mut m| m.status_mut().take())
        .unwrap_or_default()
}

/// The counterpart the live resource recorded (`recorded`), else the one the spec's `slug`
/// names ([`Counterpart::recorded_or_slug`]), with the remote object as `get` reads it (`what`,
/// in messages): `None` when there is none, or the API does not know it.
pub(super) async fn read_recorded_or_slug<T>(
    (recorded, slug): (Option<&str>, Option<&str>),
    what: &str,
    get: impl AsyncFnOnce(&str) -> Result<T, ApiError>,
) -> Result<Option<(Counterpart, T)>, GitopsError> {
    let Some(counterpart) = Counterpart::recorded_or_slug(recorded, slug) else {
        return Ok(None);
    };
    let remote = found(
        &format!("{what} {}", counterpart.key),
        get(&counterpart.key).await,
    )?;
    Ok(remote.map(|remote| (counterpart, remote)))
}

impl Planner<'_> {
    /// The remote object `object` stands for ([`Governed::WHAT`]): the one its live copy
    /// recorded ([`Recorded`]), else the one its spec names ([`Governed::named_remote`]), as
    /// `get` reads it ([`read_recorded_or_slug`]); with the live copy's status.
    pub(super) async fn counterpart<K, T>(
        self,
        object: &K,
        get: impl AsyncFnOnce(&str) -> Result<T, ApiError>,
    ) -> Result<(K::Status, Option<(Counterpart, T)>), GitopsError>
    where
        K: LiveKind + Governed + HasStatus<Status: Default + Recorded>,
    {
        let status = status_of(live_object(self.live, object).await?);
        let keys = (status.recorded_remote(), object.named_remote());
        let found = read_recorded_or_slug(keys, K::WHAT, get).await?;
        Ok((status, found))
    }
}

/// The entry of a create: every field of `desired` but those in `skip`.
pub(super) fn creating(desired: &Value, skip: &[&str]) -> Entry {
    entry(Action::Create, None, create_changes(desired, skip), None)
}

/// The entry for a found counterpart (a remote `what`): a conflict when its `immutable` fields
/// differ from the spec (the operator would stall), else [`compared`] with `changes`.
pub(super) fn compared_unless_immutable(
    counterpart: Counterpart,
    what: &str,
    immutable: &[&str],
    changes: Vec<FieldChange>,
) -> Entry {
    if immutable.is_empty() {
        return compared(&counterpart, changes);
    }
    entry(
        Action::Conflict,
        Some(counterpart.key),
        Vec::new(),
        Some(format!(
            "{} of the remote {what} differ(s) and cannot be changed: the operator would stall (InvalidSpec)",
            immutable.join(", ")
        )),
    )
}

/// The counterpart: the spec's id; else the live resource's status id; else none.
async fn counterpart<K: LiveKind>(
    live: Option<&Live>,
    object: &K,
    spec_id: Option<&String>,
    status_id: impl Fn(&K) -> Option<String>,
) -> Result<Option<Counterpart>, GitopsError> {
    let managed = live_object(live, object).await?.and_then(|o| status_id(&o));
    Ok(pair(spec_id, managed))
}

/// The counterpart named by the spec (`spec_id`), else the one the live resource recorded
/// (`managed`).
pub(super) fn pair(spec_id: Option<&String>, managed: Option<String>) -> Option<Counterpart> {
    match (spec_id, managed) {
        (Some(id), managed) => Some(Counterpart {
            key: id.clone(),
            adopting: managed.as_ref() != Some(id),
            from_spec: true,
        }),
        (None, Some(id)) => Some(Counterpart {
            key: id,
            adopting: false,
            from_spec: false,
        }),
        (None, None) => None,
    }
}

/// A kind whose live copy a plan reads ([`live_object`]), namespaced or cluster-scoped.
pub(super) trait LiveKind:
    Resource<DynamicType = (), Scope: LiveScope> + Clone + DeserializeOwned + std::fmt::Debug
{
}

impl<K> LiveKind for K where
    K: Resource<DynamicType = (), Scope: LiveScope> + Clone + DeserializeOwned + std::fmt::Debug
{
}

/// Where the live copy of a resource of this scope is read.
pub(super) trait LiveScope {
    /// The API reading `meta`'s resource, and how messages name it (`namespace/name` when
    /// namespaced; the kubeconfig's namespace when the manifest names none).
    fn at<K: Resource<DynamicType = (), Scope = Self>>(
        live: &Live,
        meta: &ObjectMeta,
    ) -> (kube::Api<K>, String);
}

impl LiveScope for NamespaceResourceScope {
    fn at<K: Resource<DynamicType = (), Scope = Self>>(
        live: &Live,
        meta: &ObjectMeta,
    ) -> (kube::Api<K>, String) {
        let namespace = meta
            .namespace
            .clone()
            .unwrap_or_else(|| live.default_namespace.clone());
        let name = meta.name.clone().unwrap_or_default();
        let api = kube::Api::namespaced(live.client.clone(), &namespace);
        (api, format!("{namespace}/{name}"))
    }
}

impl LiveScope for ClusterResourceScope {
    fn at<K: Resource<DynamicType = (), Scope = Self>>(
        live: &Live,
        meta: &ObjectMeta,
    ) -> (kube::Api<K>, String) {
        let name = meta.name.clone().unwrap_or_default();
        (kube::Api::all(live.client.clone()), name)
    }
}

/// The live copy of a resource: `None` without cluster access, or when there is none.
pub(super) async fn live_object<K: LiveKind>(
    live: Option<&Live>,
    object: &K,
) -> Result<Option<K>, GitopsError> {
    let Some(live) = live else {
        return Ok(None);
    };
    let (api, what) = K::Scope::at::<K>(live, object.meta());
    let name = object.meta().name.clone().unwrap_or_default();
    api.get_opt(&name)
        .await
        .map_err(|e| GitopsError::kube(format!("failed to read {what}"), e))
}

/// The entry for a found counterpart: adopt, update or no change.
pub(super) fn compared(counterpart: &Counterpart, changes: Vec<FieldChange>) -> Entry {
    let action = match (counterpart.adopting, changes.is_empty()) {
        (true, _) => Action::Adopt,
        (false, true) => Action::NoChange,
        (false, false) => Action::Update,
    };
    entry(action, Some(counterpart.key.clone()), changes, None)
}

/// The entry for a found counterpart whose fixed fields `conflicts` and mutable `updates`
/// differ (each shown from `current` to `desired`): [`compared`] when no fixed one does, else a
/// conflict, as the remote `what` (`MCP server`) cannot change them and needs a new `kind`
/// (`McpServer`).
pub(super) fn compared_unless_fixed(
    counterpart: Counterpart,
    (conflicts, updates): (Vec<&str>, Vec<&str>),
    (current, desired): (&Value, &Value),
    (what, kind): (&str, &str),
) -> Entry {
    let mut fields = conflicts.clone();
    fields.extend(updates);
    let changes = field_changes(&fields, current, desired);
    if conflicts.is_empty() {
        return compared(&counterpart, changes);
    }
    let reason = fixed_differs(what, &conflicts, kind);
    entry(
        Action::Conflict,
        Some(counterpart.key),
        changes,
        Some(reason),
    )
}

/// Why a plan is a conflict when fixed `fields` of the remote `what` (`MCP server`) differ:
/// the API cannot change them, a new `kind` (`McpServer`) is needed.
pub(super) fn fixed_differs(what: &str, fields: &[&str], kind: &str) -> String {
    format!(
        "the remote {what} has a different {} and the API cannot change it; create a new {kind} instead",
        fields.join(", ")
    )
}

/// The entry for a counterpart the API does not know: a conflict when the spec names it, a
/// create when only the status did (the operator creates a vanished object again).
pub(super) fn missing(
    counterpart: &Counterpart,
    what: &str,
    field: &str,
    create: Vec<FieldChange>,
) -> Entry {
    if counterpart.from_spec {
        let reason = format!(
            "{field} names {what} {}, which does not exist",
            counterpart.key
        );
        return entry(
            Action::Conflict,
            Some(counterpart.key.clone()),
            Vec::new(),
            Some(reason),
        );
    }
    let reason = format!(
        "{what} {} recorded in the live status no longer exists; the operator creates a new one",
        counterpart.key
    );
    entry(Action::Create, None, create, Some(reason))
}

pub(super) fn entry(
    action: Action,
    remote: Option<String>,
    changes: Vec<FieldChange>,
    reason: Option<String>,
) -> Entry {
    Entry {
        kind: String::new(),
        namespace: None,
        name: String::new(),
        source: String::new(),
        action,
        remote,
        changes,
        reason,
        values_hidden: false,
        remote_id: None,
    }
}

/// `Ok(None)` for "not found"; other errors fail the plan (a plan must not guess).
pub(super) fn found<T>(what: &str, result: Result<T, ApiError>) -> Result<Option<T>, GitopsError> {
    match result {
        Ok(remote) => Ok(Some(remote)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(GitopsError::api(format!("failed to read {what}"), e)),
    }
}

/// `config` with the slug of each resource its `spec.resourceRefs` names written in (read from
/// the cluster with a kubeconfig); without one, or for a resource without a slug yet, a marker
/// naming it, and why the operator would wait.
async fn with_resources(
    live: Option<&Live>,
    config: &Config,
) -> Result<(Config, Option<String>), GitopsError> {
    let mut resolved = config.clone();
    let mut document = config.spec.config.to_value();
    let mut waiting = Vec::new();
    for reference in &config.spec.resource_refs {
        let slug = match live {
            Some(live) => {
                let namespace = config
                    .metadata
                    .namespace
                    .clone()
                    .unwrap_or_else(|| live.default_namespace.clone());
                let read = match reference.kind {
                    ReferencedKind::Guardrail => {
                        kube::Api::<Guardrail>::namespaced(live.client.clone(), &namespace)
                            .get_opt(&reference.name)
                            .await
                            .map(|g| g.and_then(|g| g.status).and_then(|s| s.slug))
                    }
                    ReferencedKind::ClusterGuardrail => {
                        kube::Api::<ClusterGuardrail>::all(live.client.clone())
                            .get_opt(&reference.name)
                            .await
                            .map(|g| g.and_then(|g| g.status).and_then(|s| s.slug))
                    }
                    ReferencedKind::Provider => {
                        kube::Api::<crate::resources::Provider>::namespaced(
                            live.client.clone(),
                            &namespace,
                        )
                        .get_opt(&reference.name)
                        .await
                        .map(|p| p.and_then(|p| p.status).and_then(|s| s.slug))
                    }
                };
                read.map_err(|e| {
                    GitopsError::kube(
                        format!("failed to read {:?} {}", reference.kind, reference.name),
                        e,
                    )
                })?
                .map(|slug| reference.kind.value(&slug))
            }
            None => None,
        };
        let value = slug.unwrap_or_else(|| {
            waiting.push(format!("{:?} {}", reference.kind, reference.name));
            format!("({:?} {})", reference.kind, reference.name)
        });
        if let Err(why) = crate::resources::config_document::set_reference(
            &mut document,
            &reference.path,
            Value::String(value),
        ) {
            return Ok((resolved, Some(format!("invalid spec: {why}"))));
        }
    }
    if let Value::Object(map) = document {
        resolved.spec.config = map.into();
    }
    let reason = (!waiting.is_empty()).then(|| {
        format!(
            "the operator waits for {} to be Ready with a slug (with --kubeconfig, plan reads them)",
            waiting.join(", ")
        )
    });
    Ok((resolved, reason))
}

impl Planner<'_> {
    async fn config(self, config: &Config) -> Result<Entry, GitopsError> {
        let (resolved, waiting) = with_resources(self.live, config).await?;
        let config = &resolved;
        let spec = &config.spec;
        let mut desired = to_json(spec);
        // The document the operator checks: each Secret path marked with its source, never read.
        let unresolved = match MarkedDocument::new(spec) {
            Ok(marked) => {
                desired["config"] = Value::Object(marked.document().clone());
                unresolved_guardrails(self.api, &marked).await?
            }
            Err(why) => {
                spec.show_secret_refs(&mut desired["config"], false);
                Some(format!(
                    "{why}: the operator would stall (InvalidSpec) and write nothing"
                ))
            }
        };
        let unresolved = unresolved.or(waiting);
        let managed = live_object(self.live, config).await?;
        let masking = config_masking(self.live, config, managed.as_ref()).await;
        let creation = || {
            let desired = masking.masked_by_path(&desired);
            create_changes(&desired, &["slug", "secretRefs", "resourceRefs"])
        };
        let recorded = managed
            .as_ref()
            .and_then(|c| c.status.as_ref()?.slug.clone());
        let Some(counterpart) = pair(spec.slug.as_ref(), recorded) else {
            return Ok(match unresolved {
                Some(reason) => entry(Action::Conflict, None, creation(), Some(reason)),
                None => entry(Action::Create, None, creation(), None),
            });
        };
        let what = format!("config {}", counterpart.key);
        let Some(remote) = found(&what, self.api.configs().get(&counterpart.key).await)? else {
            return Ok(missing(&counterpart, "config", "spec.slug", creation()));
        };
        let mut current = to_json(&project::config_spec(&remote));
        let mut masking = masking;
        let namespace = config.metadata.namespace.as_deref();
        let name = config.metadata.name.as_deref().unwrap_or_default();
        let own = Own {
            kind: Claimed::Config,
            namespace: self
                .live
                .map(|l| namespace.unwrap_or(l.default_namespace.as_str())),
            name,
            connection: spec.connection_name(),
        };
        if let Some(elsewhere) =
            claimed(self.live, &own, &counterpart, &mut masking, "/config").await
        {
            return Ok(elsewhere);
        }
        // The remote document holds the values at the paths the live resource wrote them to.
        masking.learn(&current);
        let hidden = counterpart.adopting && hide_unconfirmed(&mut current, &desired, "/config");
        spec.show_secret_refs(&mut current["config"], true);
        let mut fields = spec.diff(&remote);
        let live_refs = managed.as_ref().map(|m| {
            let history = m.status.as_ref().map_or(&[][..], |s| &s.history);
            held_at(&m.spec.secret_refs, history)
        });
        let moved = sources_moved(live_refs.as_deref(), &spec.secret_refs);
        for path in &moved {
            masking.source_moved(format!("/config{path}"));
        }
        if hidden || !moved.is_empty() {
            fields = with_hidden(fields, &["config"], &desired);
        }
        let changes = field_changes_masked(&fields, &current, &desired, &masking);
        let planned = match unresolved {
            Some(reason) => entry(
                Action::Conflict,
                Some(counterpart.key.clone()),
                changes,
                Some(reason),
            ),
            None => compared(&counterpart, changes),
        };
        let planned = planned.with_sources_moved(&moved);
        Ok(planned.with_values_hidden(hidden).identified(&remote.id))
    }
}

/// What a Config's plan hides beyond the secret list: the values of the Secrets its planned
/// manifest and its live resource (older paths) name, read with a kubeconfig as the operator
/// reads them, at every place; without cluster access, by the key names of those paths.
async fn config_masking(live: Option<&Live>, config: &Config, managed: Option<&Config>) -> Masking {
    let mut masking = Masking::default();
    let namespace = config
        .metadata
        .namespace
        .clone()
        .or_else(|| live.map(|l| l.default_namespace.clone()))
        .unwrap_or_default();
    let kube = live.map(|l| (&l.client, namespace.as_str()));
    let mut live_refs = Vec::new();
    if let Some(managed) = managed {
        live_refs.extend(managed.spec.secret_refs.iter().cloned());
        let recorded = managed.status.iter().flat_map(|s| &s.history);
        live_refs.extend(recorded.flat_map(|v| v.secret_refs.iter().cloned()));
    }
    let manifest_refs = &config.spec.secret_refs;
    add_trusted_references(&mut masking, kube, "/config", &live_refs, manifest_refs).await;
    masking
}

/// [`add_references`] of what the live resource named (`live`: its spec and the versions it
/// recorded), its Secrets read with `kube`; the manifest's own (`manifest`) by path and key
/// name only. A pull request chooses the manifest's Secrets: reading them would mask, in the
/// remote document, whichever value equals one, and a remote document holding candidates
/// would say which does.
pub(super) async fn add_trusted_references(
    masking: &mut Masking,
    kube: Option<(&kube::Client, &str)>,
    prefix: &str,
    live: &[crate::resources::config::ConfigSecretRef],
    manifest: &[crate::resources::config::ConfigSecretRef],
) {
    add_references(masking, kube, prefix, live).await;
    let untrusted: Vec<_> = manifest
        .iter()
        .filter(|r| !live.contains(r))
        .cloned()
        .collect();
    add_references(masking, None, prefix, &untrusted).await;
}

/// The guardrails the document names that the API does not have, as the operator would report
/// them (it would stall with `UnresolvedGuardrail` and write nothing). Lists only when the
/// document names any. Names a Secret supplies are not checked: a plan never reads a Config's
/// Secrets (the operator checks them).
async fn unresolved_guardrails(
    api: &Client,
    marked: &MarkedDocument,
) -> Result<Option<String>, GitopsError> {
    let references = match marked.guardrail_references() {
        Ok(references) => references,
        Err(why) => {
            return Ok(Some(format!(
                "invalid spec: {why}: the operator would stall (InvalidSpec) and write nothing"
            )));
        }
    };
    let literal: Vec<_> = references.iter().filter(|r| r.secret.is_none()).collect();
    if literal.is_empty() {
        return Ok(None);
    }
    let listing = api
        .guardrails()
        .listing_all()
        .await
        .map_err(|e| GitopsError::api("failed to list guardrails", e))?;
    let whole = listing.complete;
    let known: std::collections::HashSet<String> = listing
        .items
        .into_iter()
        .flat_map(|g| [g.id, g.slug])
        .collect();
    let missing: Vec<String> = literal
        .iter()
        .filter(|r| !known.contains(&r.name))
        .map(|r| r.describe())
        .collect();
    let shown = match whole {
        true => "",
        false => " (the guardrail list came back incomplete)",
    };
    Ok((!missing.is_empty()).then(|| {
        format!(
            "unresolved guardrail {}{shown}: the operator would stall (UnresolvedGuardrail) and write nothing",
            missing.join(", ")
        )
    }))
}

impl Planner<'_> {
    async fn deployment(self, deployment: &Deployment) -> Result<Entry, GitopsError> {
        let spec = &deployment.spec;
        let desired = to_json(spec);
        let creation = || {
            create_changes(
                &desired,
                &[
                    "deploymentId",
                    "credentialsSecretRef",
                    "rotation",
                    "overrideExisting",
                ],
            )
        };
        let Some(counterpart) = counterpart(
            self.live,
            deployment,
            spec.deployment_id.as_ref(),
            |d: &Deployment| d.status.as_ref().and_then(|s| s.id.clone()),
        )
        .await?
        else {
            return Ok(entry(Action::Create, None, creation(), None));
        };
        let what = format!("deployment {}", counterpart.key);
        let Some(remote) = found(&what, self.api.deployments().get(&counterpart.key).await)? else {
            return Ok(missing(
                &counterpart,
                "deployment",
                "spec.deploymentId",
                creation(),
            ));
        };
        let mut current = to_json(&project::deployment_spec(
            &remote,
            &spec.credentials_secret_ref.name,
        ));
        let mut desired = desired;
        if remote.status == Some(api::DeploymentStatus::Archived) {
            current["status"] = Value::from("archived");
            desired["status"] = Value::from("active");
        }
        let changes = field_changes(&spec.diff(&remote), &current, &desired);
        Ok(compared(&counterpart, changes))
    }

    /// A Guardrail or ClusterGuardrail: its counterpart is `spec.slug`, else the live
    /// `status.slug` (of `managed`, the live resource). Secret parameters show where their value
    /// comes from, never a value.
    async fn guardrail<G: GuardrailKind>(
        self,
        guardrail: &G,
        managed: Option<G>,
        secrets: Option<(kube::Client, String)>,
    ) -> Result<Entry, GitopsError> {
        let definition = guardrail.definition();
        let mut desired = to_json(guardrail.spec());
        let invalid = match MarkedDocument::new(definition) {
            Ok(marked) => {
                // `{checks, actions}` in the API's form, the form `secretRefs` paths name.
                desired["checks"] = marked.document()["checks"].clone();
                desired["actions"] = marked.document()["actions"].clone();
                None
            }
            Err(why) => Some(format!(
                "{why}: the operator would stall (InvalidSpec) and write nothing"
            )),
        };
        let mut live_refs = Vec::new();
        if let Some(managed) = &managed {
            live_refs.extend(managed.definition().secret_refs.iter().cloned());
            let recorded = managed
                .guardrail_status()
                .into_iter()
                .flat_map(|s| &s.history);
            live_refs.extend(recorded.flat_map(|v| v.secret_refs.iter().cloned()));
        }
        let mut masking = Masking::default();
        let kube = secrets.as_ref().map(|(c, ns)| (c, ns.as_str()));
        let manifest_refs = &definition.secret_refs;
        add_trusted_references(&mut masking, kube, "", &live_refs, manifest_refs).await;
        let creation =
            || create_changes(&masking.masked_by_path(&desired), &["slug", "secretRefs"]);
        let recorded = managed
            .as_ref()
            .and_then(|g| g.guardrail_status()?.slug.clone());
        let Some(counterpart) = pair(definition.slug.as_ref(), recorded) else {
            return Ok(match invalid {
                Some(reason) => entry(Action::Conflict, None, creation(), Some(reason)),
                None => entry(Action::Create, None, creation(), None),
            });
        };
        let what = format!("guardrail {}", counterpart.key);
        let read = self.api.guardrails_on(G::PLANE).get(&counterpart.key).await;
        let Some(remote) = found(&what, read)? else {
            return Ok(missing(&counterpart, "guardrail", "spec.slug", creation()));
        };
        let projected = G::from_definition(
            Default::default(),
            project::guardrail_definition(&remote),
            remote.workspace_id.clone(),
        );
        let mut current = to_json(projected.spec());
        let document = crate::resources::guardrail::remote_document(&remote);
        current["checks"] = document["checks"].clone();
        current["actions"] = document["actions"].clone();
        let own = Own {
            kind: Claimed::Guardrail(format!("{:?}", G::REFERENCED_AS)),
            // A Guardrail's namespace (the manifest's, else the kubeconfig's); none for a
            // ClusterGuardrail.
            namespace: secrets.as_ref().map(|(_, ns)| ns.as_str()),
            name: guardrail.meta().name.as_deref().unwrap_or_default(),
            connection: definition.connection_name(),
        };
        if let Some(elsewhere) = claimed(self.live, &own, &counterpart, &mut masking, "").await {
            return Ok(elsewhere);
        }
        // The remote object holds the values at the paths the live resource wrote them to.
        masking.learn(&current);
        let mut hidden = Vec::new();
        if counterpart.adopting {
            for field in ["checks", "actions"] {
                if hide_unconfirmed(&mut current, &desired, &format!("/{field}")) {
                    hidden.push(field);
                }
            }
        }
        for reference in &definition.secret_refs {
            if let Some(value) = current.pointer_mut(&reference.path) {
                *value = Value::String(format!(
                    "(secret {}/{})",
                    reference.secret_key_ref.name, reference.secret_key_ref.key
                ));
            }
        }
        let conflicts = definition.immutable_conflicts(&remote, guardrail.workspace_id());
        let mut fields = conflicts.clone();
        fields.extend(definition.diff(&remote));
        // The MCP server mappings the spec names: the complete set, compared as the operator does.
        if let Some(servers) = &definition.mcp_servers {
            use crate::resources::guardrail::GuardrailMcpServer;
            let rows = self
                .api
                .guardrail_mcp_servers(G::PLANE)
                .list(&remote.id)
                .await
                .map_err(|e| {
                    let what = format!("the MCP servers of guardrail {}", counterpart.key);
                    GitopsError::api(format!("failed to read {what}"), e)
                })?;
            let listed: Vec<GuardrailMcpServer> =
                rows.iter().map(GuardrailMcpServer::listed).collect();
            let namespace = secrets.as_ref().map(|(_, ns)| ns.as_str());
            let servers =
                super::plan_mcp_server::resolved_mappings(self.live, namespace, servers).await?;
            let (wanted, have) = (
                GuardrailMcpServer::normalized(&servers),
                GuardrailMcpServer::normalized(&listed),
            );
            desired["mcpServers"] = to_json(&wanted);
            current["mcpServers"] = to_json(&have);
            if wanted != have {
                fields.push("mcpServers");
            }
        }
        let live_refs = managed.as_ref().map(|m| {
            let history = m.guardrail_status().map_or(&[][..], |s| &s.history);
            held_at(&m.definition().secret_refs, history)
        });
        let moved = sources_moved(live_refs.as_deref(), &definition.secret_refs);
        let mut shown = hidden.clone();
        for path in moved.iter().cloned() {
            let top = path.split('/').nth(1);
            let field = ["checks", "actions"].into_iter().find(|f| top == Some(*f));
            shown.extend(field.filter(|f| !shown.contains(f)));
            masking.source_moved(path);
        }
        if !shown.is_empty() {
            fields = with_hidden(fields, &shown, &desired);
        }
        let changes = field_changes_masked(&fields, &current, &desired, &masking);
        let invalid = invalid.or_else(|| {
            G::other_kind(&remote)
                .map(|why| format!("{why}: the operator would stall and write nothing"))
        });
        let planned = match (invalid, conflicts.is_empty()) {
            (Some(reason), _) => entry(
                Action::Conflict,
                Some(counterpart.key),
                changes,
                Some(reason),
            ),
            (None, false) => entry(
                Action::Conflict,
                Some(counterpart.key),
                changes,
                Some(fixed_differs("guardrail", &conflicts, "resource")),
            ),
            (None, true) => compared(&counterpart, changes),
        };
        Ok(planned
            .with_sources_moved(&moved)
            .with_values_hidden(!hidden.is_empty())
            .identified(&remote.id))
    }

    /// A policy kind ([`Policy`]): its counterpart is `spec.policyId`, else the live `status.id`.
    async fn policy<P: Policy>(self, policy: &P) -> Result<Entry, GitopsError> {
        let desired = to_json(policy.spec());
        let creation = || create_changes(&desired, &["policyId", "resetUsage"]);
        let adopts = policy.adopts().map(str::to_string);
        let Some(counterpart) = counterpart(self.live, policy, adopts.as_ref(), |p: &P| {
            p.recorded().map(str::to_string)
        })
        .await?
        else {
            return Ok(entry(Action::Create, None, creation(), None));
        };
        let what = format!("{} {}", P::WHAT, counterpart.key);
        let Some(remote) = found(&what, P::get(self.api, &counterpart.key).await)? else {
            return Ok(missing(&counterpart, P::WHAT, "spec.policyId", creation()));
        };
        let current = match P::projected(&remote) {
            Ok(projected) => to_json(&projected),
            Err(_) => serde_json::to_value(&remote).unwrap_or_default(),
        };
        let conflicts = policy.immutable_conflicts(&remote);
        if !conflicts.is_empty() {
            let reason = fixed_differs("policy", &conflicts, P::RESOURCE);
            let changes = field_changes(&conflicts, &current, &desired);
            return Ok(entry(
                Action::Conflict,
                Some(counterpart.key),
                changes,
                Some(reason),
            ));
        }
        let changes = field_changes(&policy.diff(&remote), &current, &desired);
        Ok(compared(&counterpart, changes))
    }

    /// An API key: a create when the live resource recorded none, else the fields a PUT would
    /// send. Never the key's value (reads mask it, and the plan never shows it).
    async fn api_key(self, key: &ApiKey) -> Result<Entry, GitopsError> {
        let desired = to_json(&key.spec);
        let creation = || create_changes(&desired, &["secretRef", "rotation", "kind", "userId"]);
        let managed = live_object(self.live, key).await?;
        let status = managed.and_then(|m| m.status);
        let Some(counterpart) = pair(None, status.as_ref().and_then(|s| s.id.clone())) else {
            return Ok(entry(Action::Create, None, creation(), None));
        };
        let what = format!("API key {}", counterpart.key);
        let read = self
            .api
            .api_keys(key.spec.kind.to_api())
            .get(&counterpart.key)
            .await;
        let Some(remote) = found(&what, read)? else {
            return Ok(missing(&counterpart, "API key", "status.id", creation()));
        };
        let config_id = key
            .spec
            .defaults
            .as_ref()
            .and_then(|d| d.config_id.clone())
            .or_else(|| status.and_then(|s| s.config_id));
        let current = serde_json::json!({
            "name": remote.name,
            "description": remote.description,
            "scopes": remote.scopes,
            "rateLimits": remote.rate_limits,
            "usageLimits": remote.usage_limits,
            "defaults": remote.defaults.as_ref().map(|d| serde_json::json!({
                "configId": d.config_id.clone().flatten(),
                "allowConfigOverride": d.allow_config_override,
            })),
            "expiresAt": remote.expires_at,
        });
        let (fields, _) = key.spec.update_for(&remote, config_id.as_deref());
        Ok(compared(
            &counterpart,
            field_changes(&fields, &current, &desired),
        ))
    }
}

pub(super) fn to_json<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or_default()
}

/// Spec fields that never reach the API.
const LOCAL_FIELDS: [&str; 4] = [
    "deletionPolicy",
    "managementPolicy",
    "connectionRef",
    "promotion",
];

/// What a create sends: every API field the spec sets, from nothing.
pub(super) fn create_changes(desired: &Value, skip: &[&str]) -> Vec<FieldChange> {
    let Some(map) = desired.as_object() else {
        return Vec::new();
    };
    let fields: Vec<&str> = map
        .keys()
        .map(String::as_str)
        .filter(|k| !skip.contains(k) && !LOCAL_FIELDS.contains(k))
        .collect();
    field_changes(&fields, &Value::Null, desired)
}

/// `fields` (that differ) with `hidden` (whose remote values are hidden, so may differ) added,
/// in the order `desired` (the spec as JSON) holds them: neither which fields an adoption lists
/// nor their order may depend on whether its hidden strings match the manifest's.
pub(super) fn with_hidden(
    mut fields: Vec<&'static str>,
    hidden: &[&'static str],
    desired: &Value,
) -> Vec<&'static str> {
    for &field in hidden {
        if !fields.contains(&field) {
            fields.push(field);
        }
    }
    let place = |field: &str| {
        desired
            .as_object()
            .and_then(|map| map.keys().position(|key| key == field))
            .unwrap_or(usize::MAX)
    };
    fields.sort_by_key(|field| place(field));
    fields
}

/// The `secretRefs` entries whose paths may hold a Secret's value remotely, or soon will: the
/// live resource's spec, and the version aigw applied last (the newest of its `history`),
/// which the remote object holds while a newer spec waits (a promotion gate, a stall,
/// Observe).
pub(super) fn held_at(
    spec: &[crate::resources::config::ConfigSecretRef],
    history: &[crate::resources::config::AppliedVersion],
) -> Vec<crate::resources::config::ConfigSecretRef> {
    let applied = history.first().map(|v| v.secret_refs.as_slice());
    let mut refs = spec.to_vec();
    refs.extend(applied.unwrap_or_default().iter().cloned());
    refs
}

/// The `secretRefs` paths whose source a manifest changes against its live resource's
/// (`live`, [`held_at`]; none without one): a Secret's value made a literal, or a literal
/// taken from a Secret. A plan shows them changed whatever the values
/// ([`Masking::source_moved`]).
pub(super) fn sources_moved(
    live: Option<&[crate::resources::config::ConfigSecretRef]>,
    manifest: &[crate::resources::config::ConfigSecretRef],
) -> Vec<String> {
    let Some(live) = live else {
        return Vec::new();
    };
    let paths = |refs: &[crate::resources::config::ConfigSecretRef]| {
        refs.iter()
            .map(|r| r.path.clone())
            .collect::<std::collections::BTreeSet<_>>()
    };
    let (before, now) = (paths(live), paths(manifest));
    before.symmetric_difference(&now).cloned().collect()
}

/// [`field_changes`] of the documents once `masking` hid what it knows on both sides (a
/// value at the same place on both reads `<masked>`, else `<masked, changed>`). The manifest's
/// side (`desired`) is hidden by path only, never by the values of the Secrets: masking a
/// literal the author wrote because it equals a Secret's value would tell them which one does.
pub(super) fn field_changes_masked(
    fields: &[&str],
    current: &Value,
    desired: &Value,
    masking: &Masking,
) -> Vec<FieldChange> {
    let shown_current = masking.masked_against(current, desired);
    let shown_desired = masking.masked_by_path_against(desired, current);
    field_changes(fields, &shown_current, &shown_desired)
}

/// One change per field of `fields`, from what `read` says the remote object holds to the
/// spec's value in `desired`: plain values (no Secret, no document), shown as they are but for
/// credentials a string may carry: a URL's userinfo (`https://(hidden)@host`) and the value
/// after a secret-looking key (`?api_key=…`). An adopted object's `url` is another team's.
pub(super) fn plain_changes(
    fields: Vec<&str>,
    desired: &Value,
    read: impl Fn(&str) -> Value,
) -> Vec<FieldChange> {
    // At any depth (a workspace's `defaults`, a reference's `tags`), and under a
    // secret-looking key (`x-api-key`) too.
    let shown = |value: &Value| {
        crate::api::secret_fields::text_credentials_hidden(&super::mask::masked(value))
    };
    fields
        .into_iter()
        .map(|field| FieldChange {
            field: field.into(),
            from: shown(&read(field)),
            to: shown(&desired[field]),
            diff: Vec::new(),
        })
        .collect()
}

/// One change per field, masked; documents get a line diff of their pretty JSON.
pub(super) fn field_changes(fields: &[&str], current: &Value, desired: &Value) -> Vec<FieldChange> {
    fields
        .iter()
        .map(|field| {
            let from = current.get(*field).cloned().unwrap_or(Value::Null);
            let to = desired.get(*field).cloned().unwrap_or(Value::Null);
            // The line diff shows the old secret as `<masked>` and a new one as
            // `<masked, changed>`, so a changed secret is a changed line.
            let old_lines = pretty(&masked(&from));
            let (from, to) = (masked_against(&from, &to), masked_against(&to, &from));
            let diff = if from.is_object() || to.is_object() {
                line_diff::diff(&old_lines, &pretty(&to))
            } else {
                Vec::new()
            };
            FieldChange {
                field: (*field).to_string(),
                from,
                to,
                diff,
            }
        })
        .collect()
}

/// The pretty JSON a line diff compares: whole numbers spelled one way (`-5.0` as `-5`), so
/// a number the API and the manifest spell differently is not a changed line.
fn pretty(value: &Value) -> String {
    if value.is_null() {
        return String::new();
    }
    serde_json::to_string_pretty(&whole_numbers(masked(value))).unwrap_or_default()
}

fn whole_numbers(value: Value) -> Value {
    match value {
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 9.0e15 => Value::from(f as i64),
            _ => Value::Number(n),
        },
        Value::Array(items) => Value::Array(items.into_iter().map(whole_numbers).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, whole_numbers(v)))
                .collect(),
        ),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    /// A plain field's value (an MCP integration's `url`) never shows a credential it carries,
    /// on either side.
    #[test]
    fn plain_changes_hide_a_urls_credentials() {
        let desired = serde_json::json!({"url": "https://mcp.example.com/mcp", "name": "n"});
        let remote = |field: &str| match field {
            "url" => serde_json::json!("https://svc:T0KEN@mcp.internal/mcp?api_key=sk-live-1"),
            _ => serde_json::json!("n"),
        };
        let changes = super::plain_changes(vec!["url"], &desired, remote);
        let shown = serde_json::to_string(&changes).unwrap();
        assert!(
            !shown.contains("T0KEN") && !shown.contains("sk-live-1"),
            "{shown}"
        );
        assert!(shown.contains("(hidden)@mcp.internal"), "{shown}");
        let mine = serde_json::json!({"url": "https://me:P4SS@mcp.example.com/mcp"});
        let changes = super::plain_changes(vec!["url"], &mine, remote);
        let shown = serde_json::to_string(&changes).unwrap();
        assert!(!shown.contains("P4SS"), "{shown}");
        // Nested (a workspace's defaults), under a secret-looking key or in its text.
        let defaults = serde_json::json!({"defaults": {"metadata": {
            "x-api-key": "sk-nested-1", "note": "token=sk-nested-2"}}});
        let changes = super::plain_changes(vec!["defaults"], &defaults, |_| Value::Null);
        let shown = serde_json::to_string(&changes).unwrap();
        assert!(!shown.contains("sk-nested"), "{shown}");
    }

    use super::*;
    use serde_json::json;

    #[test]
    fn a_number_spelled_otherwise_is_no_changed_line() {
        let changes = field_changes(
            &["actions"],
            &json!({"actions": {"on_fail": {"feedback": {"value": -5, "weight": 1}}, "deny": false}}),
            &json!({"actions": {"on_fail": {"feedback": {"value": -5.0, "weight": 1.0}}, "deny": true}}),
        );
        let changed: Vec<&String> = changes[0]
            .diff
            .iter()
            .filter(|l| l.starts_with('-') || l.starts_with('+'))
            .collect();
        assert_eq!(changed.len(), 2, "{changed:?}");
        assert!(
            changed.iter().all(|l| l.contains("\"deny\"")),
            "{changed:?}"
        );
        assert_eq!(whole_numbers(json!(2.5)), json!(2.5));
    }

    #[test]
    fn document_changes_are_line_diffs_and_secrets_stay_masked() {
        let current = json!({"config": {"retry": {"attempts": 2}, "api_key": "sk-old"}});
        let desired = json!({"config": {"retry": {"attempts": 3}, "api_key": "sk-new"}});
        let changes = field_changes(&["config"], &current, &desired);
        let text = serde_json::to_string(&changes).unwrap();
        assert!(
            !text.contains("sk-old") && !text.contains("sk-new"),
            "{text}"
        );
        // A changed secret is a changed line, still without either value.
        for line in [
            "-     \"attempts\": 2",
            "+     \"attempts\": 3",
            "+   \"api_key\": \"<masked, changed>\",",
        ] {
            let line = line.to_string();
            assert!(changes[0].diff.contains(&line), "{:?}", changes[0].diff);
        }
    }

    #[test]
    fn an_observe_resource_is_planned_as_observed_and_never_as_a_write() {
        let change = FieldChange {
            field: "value".into(),
            from: Value::from(100),
            to: Value::from(250),
            diff: Vec::new(),
        };
        let update = entry(Action::Update, Some("p1".into()), vec![change], None).observed();
        assert_eq!(update.action, Action::Observe);
        assert_eq!(update.changes.len(), 1, "the differences it would report");
        let create = entry(Action::Create, None, Vec::new(), None).observed();
        assert!(
            create
                .reason
                .as_deref()
                .unwrap()
                .contains("NothingToObserve")
        );
        let plan = Plan::new(vec![update, create]);
        assert_eq!(plan.exit_code(), 0, "an Observe resource writes nothing");
        assert_eq!(plan.summary.observe, 2);
        assert!(plan.render().contains("2 observed"), "{}", plan.render());
        let conflict = entry(Action::Conflict, None, Vec::new(), Some("x".into())).observed();
        assert_eq!(conflict.action, Action::Conflict);
    }

    #[test]
    fn a_gated_update_is_counted_shown_with_its_reason_and_still_a_change() {
        let gated = Entry {
            action: Action::Gated,
            reason: Some("revision r2 waits for Config dev/web, which is not Ready".into()),
            ..entry(Action::Update, Some("pc-1".into()), Vec::new(), None)
        };
        let plan = Plan::new(vec![gated]);
        assert_eq!(plan.summary.gated, 1);
        assert_eq!(plan.exit_code(), 2, "written once its gate opens");
        let text = plan.render();
        assert!(text.contains(": gated pc-1"), "{text}");
        assert!(text.contains("waits for Config dev/web"), "{text}");
        assert!(text.contains("1 gated (written once promoted)"), "{text}");
        let json = serde_json::to_value(&plan).unwrap();
        assert_eq!(json["resources"][0]["action"], "gated");
    }

    /// An adoption whose remote strings are hidden says it may write, and exits 2, whether its
    /// changes list anything or not; which fields it lists, and their order, do not depend on
    /// which of them differ (attack on issue 27: a guessing oracle).
    #[test]
    fn an_adoption_with_hidden_values_may_write_and_lists_its_fields_in_one_order() {
        let hidden = entry(Action::Adopt, Some("pc-1".into()), Vec::new(), None);
        let plan = Plan::new(vec![hidden.with_values_hidden(true)]);
        assert_eq!(plan.exit_code(), 2);
        let text = plan.render();
        assert!(
            text.contains(": adopt pc-1 (may write; remote values hidden)\n    may write:"),
            "{text}"
        );
        let json = serde_json::to_value(&plan).unwrap();
        assert_eq!(json["resources"][0]["valuesHidden"], true);
        let plain = Plan::new(vec![entry(Action::Adopt, None, Vec::new(), None)]);
        let json = serde_json::to_value(&plain).unwrap();
        assert!(json["resources"][0].get("valuesHidden").is_none(), "{json}");
        let desired = json!({"actions": {}, "checks": [], "name": "n"});
        let forced = ["checks", "actions"];
        for differing in [
            vec![],
            vec!["actions"],
            vec!["checks", "actions"],
            vec!["name"],
        ] {
            let shown = with_hidden(differing.clone(), &forced, &desired);
            let expected = match differing.contains(&"name") {
                true => vec!["actions", "checks", "name"],
                false => vec!["actions", "checks"],
            };
            assert_eq!(shown, expected, "{differing:?}");
        }
    }

    #[test]
    fn exit_codes_follow_the_actions() {
        let adopt_in_sync = entry(Action::Adopt, Some("x".into()), Vec::new(), None);
        assert_eq!(Plan::new(vec![adopt_in_sync.clone()]).exit_code(), 0);
        let create = entry(Action::Create, None, Vec::new(), None);
        assert_eq!(
            Plan::new(vec![adopt_in_sync, create.clone()]).exit_code(),
            2
        );
        let conflict = entry(Action::Conflict, None, Vec::new(), None);
        assert_eq!(Plan::new(vec![create, conflict]).exit_code(), 1);
    }
}
