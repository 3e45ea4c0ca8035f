//! `aigw export`: a live tenant as aigw manifests, one file per object plus a
//! `kustomization.yaml`. Every manifest adopts its object by id (`spec.slug`,
//! `spec.deploymentId`, `spec.policyId`) and matches it field for field, so applying the export
//! makes the operator adopt everything without writing to the API.
//!
//! Every exported object gets `deletionPolicy: Orphan`: these objects existed before aigw and
//! serve traffic, so removing a manifest (or a namespace, or a mistaken prune) during the
//! migration must never delete them. Switch to `Delete`/`Archive` once Git owns an object.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Debug;
use std::path::Path;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::ObjectMeta;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::GitopsError;
use super::mask::{Masking, add_references, secret_paths, secret_pointers};
use super::project;
use crate::api::{self, Client, DeploymentListQuery, Reading};
use crate::resources::config::ConfigSecretRef;
use crate::resources::config_document::{GuardrailRef, MarkedDocument};
use crate::resources::guardrail::GuardrailKind;
use crate::resources::policy::Policy;
use crate::resources::{
    ClusterGuardrail, Config, Deployment, Guardrail, Integration, RateLimitsPolicy,
    UsageLimitsPolicy,
};

mod access;
mod live_names;
mod mcp_integrations;
mod mcp_servers;
mod workspaces;

pub use live_names::{LiveName, LiveNames, add_secret_names, live_names};

/// What to export and where the manifests go.
#[derive(Debug, Clone, Default)]
pub struct ExportOptions {
    /// `metadata.namespace` of every manifest; absent leaves it to `kubectl -n` / kustomize.
    pub namespace: Option<String>,
    /// Only configs and rate-limit policies of this workspace. Deployments belong to the
    /// organisation, not a workspace, and are always exported.
    pub workspace_id: Option<String>,
    /// The `spec.secretRefs` of the live resources (read with a kubeconfig), by the remote slug
    /// or id each records: the values there came from Secrets and are never exported, whatever
    /// their key is called.
    pub live_secret_refs: HashMap<String, Vec<ConfigSecretRef>>,
    /// Where the live resources whose `secretRefs` those are are, by the same keys (every one
    /// of them: a Config and a Guardrail may record one slug): a manifest for another namespace
    /// names Secrets of those names there, which must hold the same values
    /// ([`Export::borrowed`]).
    pub live_secret_owners: HashMap<String, Vec<LiveName>>,
    /// What each live resource's Secrets hold (read as the operator reads them), by the same
    /// keys: a document holding one of those values outside its `secretRefs` paths (an older
    /// write at another index) is not exported.
    pub live_masking: HashMap<String, Masking>,
    /// The `spec.secretRefs` of the live Integrations, now and in every version they recorded
    /// (paths below `configurations`), by the remote slug and id each records or its spec
    /// names: those configurations came from Secrets and are never exported, even a public
    /// setting the API reads back.
    pub live_integration_refs: HashMap<String, Vec<ConfigSecretRef>>,
    /// The remote slugs and ids of the live Integrations whose spec is not applied yet (held,
    /// stalled, not reconciled): the remote may still hold a Secret's value at a path that
    /// spec no longer names (an Integration records no paths it applied), so none of their
    /// configurations is exported as it is.
    pub live_unapplied_integrations: HashSet<String>,
    /// Every remote slug and id a live Config, Guardrail or ClusterGuardrail records (`None`:
    /// the cluster was not read). A document none records may hold values some other operator
    /// or an orphaned resource took from Secrets, at paths nothing here names: it is exported,
    /// and listed in [`Export::unrecognised`].
    pub live_recorded: Option<HashSet<String>>,
    /// The live resources of the cluster (`None`: it was not read): an object one of them
    /// manages is listed in [`Export::managed`], and no manifest takes a live resource's name
    /// ([`LiveNames`]), nor a placeholder Secret a live Secret's (once [`add_secret_names`]
    /// added them).
    pub live_names: Option<LiveNames>,
    /// Leaves out each object a live resource manages (said skipped): for an export to be
    /// applied to the cluster it read.
    pub skip_managed: bool,
    /// The Connection the tenant was read through (`--connection`): every manifest names it in
    /// `spec.connectionRef`, so that applied it reaches that tenant. `None` (or `default`):
    /// none is named, and the manifests go through `default`.
    pub connection: Option<String>,
}

/// What [`live_secret_refs`] found: the `spec.secretRefs` of the live resources, and what to
/// hide for each, by the remote slug and id each records.
#[derive(Debug, Default)]
pub struct LiveSecrets {
    pub refs: HashMap<String, Vec<ConfigSecretRef>>,
    /// For [`ExportOptions::live_secret_owners`].
    pub owners: HashMap<String, Vec<LiveName>>,
    pub masking: HashMap<String, Masking>,
    /// The live Integrations' references, for [`ExportOptions::live_integration_refs`].
    pub integration_refs: HashMap<String, Vec<ConfigSecretRef>>,
    /// For [`ExportOptions::live_unapplied_integrations`].
    pub unapplied_integrations: HashSet<String>,
    /// For [`ExportOptions::live_recorded`].
    pub recorded: HashSet<String>,
}

/// The `spec.secretRefs` of every Config, Guardrail and ClusterGuardrail of the cluster, by the
/// remote slug and id each records, for [`ExportOptions::live_secret_refs`], and the values of
/// the Secrets they (and the versions they recorded) name, for [`ExportOptions::live_masking`];
/// those of every Integration for [`ExportOptions::live_integration_refs`].
pub async fn live_secret_refs(kube: &kube::Client) -> Result<LiveSecrets, GitopsError> {
    let mut live = LiveSecrets::default();
    live_refs_of::<Config>(kube, "Configs", &mut live).await?;
    live_refs_of::<Guardrail>(kube, "Guardrails", &mut live).await?;
    live_refs_of::<ClusterGuardrail>(kube, "ClusterGuardrails", &mut live).await?;
    // Integrations are keyed apart: a config's slug may equal an integration's.
    for record in live_records::<Integration>(kube, "Integrations").await? {
        let keys = record.recorded.iter().chain(&record.named);
        if !record.applied {
            live.unapplied_integrations.extend(keys.clone().cloned());
        }
        for key in keys {
            let refs = live.integration_refs.entry(key.clone()).or_default();
            refs.extend(record.refs.iter().cloned());
        }
    }
    Ok(live)
}

/// What [`live_records`] reads of a resource: the same fields on the three kinds (a
/// guardrail's definition is flattened into its spec).
#[derive(serde::Deserialize, Default)]
struct LiveRefs {
    #[serde(default)]
    metadata: LiveMeta,
    #[serde(default)]
    spec: LiveSpec,
    #[serde(default)]
    status: Option<LiveStatus>,
}

#[derive(serde::Deserialize, Default)]
struct LiveMeta {
    #[serde(default)]
    name: String,
    namespace: Option<String>,
    generation: Option<i64>,
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct LiveSpec {
    #[serde(default)]
    secret_refs: Vec<ConfigSecretRef>,
    #[serde(default)]
    slug: Option<String>,
    #[serde(default)]
    connection_ref: Option<crate::resources::common::ConnectionRef>,
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct LiveVersion {
    #[serde(default)]
    secret_refs: Vec<ConfigSecretRef>,
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct LiveStatus {
    slug: Option<String>,
    id: Option<String>,
    observed_generation: Option<i64>,
    #[serde(default)]
    conditions: Vec<Condition>,
    /// The versions applied before, each with the `secretRefs` it had.
    #[serde(default)]
    history: Vec<LiveVersion>,
}

/// A live Config, Guardrail, ClusterGuardrail or Integration (its paths below
/// `configurations`) as the reading tools need it: where it is, the
/// remote object it records or names, and every Secret path it and its recorded versions name.
#[derive(Debug, Clone)]
pub struct LiveRecord {
    pub namespace: Option<String>,
    pub name: String,
    /// Its Connection (`spec.connectionRef`, `default` when absent).
    pub connection: String,
    /// The remote slug and id its status records.
    pub recorded: Vec<String>,
    /// The remote slug its spec names (adopts).
    pub named: Option<String>,
    /// Its current `spec.secretRefs`.
    pub current: Vec<ConfigSecretRef>,
    /// Its current `spec.secretRefs` and those of every version its status recorded.
    pub refs: Vec<ConfigSecretRef>,
    /// Its spec is applied: Ready (not merely observed) at its generation.
    pub applied: bool,
}

impl LiveRecord {
    /// True when it records or names the remote object `key`.
    pub fn claims(&self, key: &str) -> bool {
        self.recorded.iter().any(|r| r == key) || self.named.as_deref() == Some(key)
    }

    /// `refs` added to `masking`, with the values of their Secrets (in its namespace) when
    /// `kube` may read them. A ClusterGuardrail's Secrets sit in the operator's namespace,
    /// unknown here: it hides by the key names of its paths.
    pub async fn mask(&self, masking: &mut Masking, kube: Option<&kube::Client>, prefix: &str) {
        let source = kube.zip(self.namespace.as_deref());
        add_references(masking, source, prefix, &self.refs).await;
    }
}

/// Every `K` of the cluster, each read as `T` (the fields a reading tool needs of it). An
/// object too deep to decode whole is read for those fields alone ([`Unreadable::part`]); one
/// that does not read as `T` is left out. Neither fails the list.
///
/// [`Unreadable::part`]: crate::resources::readable::Unreadable::part
async fn read_as<K, T>(kube: &kube::Client, what: &str) -> Result<Vec<T>, GitopsError>
where
    K: kube::Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug,
    T: DeserializeOwned,
{
    let (objects, unreadable) = crate::resources::readable::list_readable::<K>(kube, None)
        .await
        .map_err(|e| GitopsError::kube(format!("failed to list {what}"), e))?;
    let decoded = objects
        .iter()
        .filter_map(|object| serde_json::from_value(serde_json::to_value(object).ok()?).ok());
    let read_in_part = unreadable.iter().filter_map(|u| u.part::<T>().ok());
    Ok(decoded.chain(read_in_part).collect())
}

/// Every `K` of the cluster as a [`LiveRecord`]. An object too deep to decode whole is read
/// for these fields alone ([`Unreadable::part`]): it does not fail the list.
///
/// [`Unreadable::part`]: crate::resources::readable::Unreadable::part
pub async fn live_records<K>(
    kube: &kube::Client,
    what: &str,
) -> Result<Vec<LiveRecord>, GitopsError>
where
    K: kube::Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug,
{
    Ok(read_as::<K, LiveRefs>(kube, what)
        .await?
        .into_iter()
        .map(|found| {
            let LiveRefs {
                metadata,
                spec,
                status,
            } = found;
            let status = status.unwrap_or_default();
            let applied = super::plan_access::spec_applied(
                metadata.generation,
                status.observed_generation,
                &status.conditions,
            );
            let mut refs = spec.secret_refs.clone();
            refs.extend(status.history.into_iter().flat_map(|v| v.secret_refs));
            LiveRecord {
                namespace: metadata.namespace,
                name: metadata.name,
                connection: spec
                    .connection_ref
                    .map_or_else(|| "default".to_string(), |c| c.name),
                recorded: [status.slug, status.id].into_iter().flatten().collect(),
                named: spec.slug,
                current: spec.secret_refs,
                refs,
                applied,
            }
        })
        .collect())
}

/// Adds the `spec.secretRefs` of every `K` of the cluster to `live`, by slug and id, with what
/// the Secrets they (and their recorded versions) name hold.
async fn live_refs_of<K>(
    kube: &kube::Client,
    what: &str,
    live: &mut LiveSecrets,
) -> Result<(), GitopsError>
where
    K: kube::Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug,
{
    for record in live_records::<K>(kube, what).await? {
        live.recorded.extend(record.recorded.iter().cloned());
        // `refs`, not only the current spec's: while a newer spec waits (a promotion gate, a
        // pause, a stall) the remote still holds the values the version applied last took from
        // Secrets, at paths only `status.history` names.
        if record.refs.is_empty() {
            continue;
        }
        let mut masking = Masking::default();
        record.mask(&mut masking, Some(kube), "").await;
        // Merged, not replaced: a Guardrail and a Config (or two Connections' objects) may
        // record the same slug.
        for key in &record.recorded {
            if !record.current.is_empty() {
                let owner = LiveName {
                    namespace: record.namespace.clone(),
                    name: record.name.clone(),
                };
                live.owners.entry(key.clone()).or_default().push(owner);
            }
            let hidden = live.masking.entry(key.clone()).or_default();
            hidden.absorb(masking.clone());
            let refs = live.refs.entry(key.clone()).or_default();
            refs.extend(record.current.iter().cloned());
        }
    }
    Ok(())
}

/// Takes the values at the live resource's `secretRefs` paths out of `document` and returns
/// those references, so the export names the same Secrets and carries no value.
fn take_live_secrets(
    document: &mut serde_json::Value,
    live: Option<&Vec<ConfigSecretRef>>,
) -> Vec<ConfigSecretRef> {
    let mut kept = Vec::new();
    for reference in live.into_iter().flatten() {
        if crate::resources::config::take_pointer(document, &reference.path).is_some() {
            kept.push(reference.clone());
        }
    }
    kept
}

/// The header lines of a manifest whose `secretRefs` were copied from its live resource (empty
/// when none were): the Secrets it names must exist where it is applied, holding what the live
/// resource's hold. Another namespace's Secret of the same name would be sent in their place.
fn borrowed_secrets(refs: &[ConfigSecretRef]) -> String {
    let names = secret_names(refs);
    if names.is_empty() {
        return String::new();
    }
    format!(
        "# It takes values from Secret {}, as its live resource does: where it is applied, a\n\
         # Secret of each name must hold what the live one holds, or its values are sent instead.\n",
        names.join(", ")
    )
}

/// The Secrets `refs` name, each once, in order.
fn secret_names(refs: &[ConfigSecretRef]) -> Vec<&str> {
    let mut names: Vec<&str> = refs
        .iter()
        .map(|r| r.secret_key_ref.name.as_str())
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// One file of the export.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportFile {
    pub name: String,
    pub content: String,
}

/// The rendered export.
#[derive(Debug, Clone, Default)]
pub struct Export {
    /// The manifests, then `kustomization.yaml`.
    pub files: Vec<ExportFile>,
    /// Objects left out, with why.
    pub skipped: Vec<String>,
    /// Documents exported that no live resource records, though the cluster was read
    /// ([`ExportOptions::live_recorded`]): values taken from Secrets at paths that do not look
    /// secret cannot be recognised in them.
    pub unrecognised: Vec<String>,
    /// Manifests written per kind.
    pub counts: BTreeMap<&'static str, usize>,
    /// Objects exported that a live resource of the cluster manages already, each with that
    /// resource ([`ExportOptions::live_names`]; none with [`ExportOptions::skip_managed`]):
    /// applied to that cluster, each manifest would be a second resource for its object.
    pub managed: Vec<String>,
    /// Configs naming a guardrail (by slug or id) that none of the guardrails read has, each
    /// with those references: applied, such a Config waits (`UnresolvedGuardrail`) and writes
    /// nothing until the guardrail exists.
    pub dangling: Vec<String>,
    /// Manifests whose `secretRefs` name a live resource's Secrets, for another namespace than
    /// that resource's (or for none given), each with those Secrets and that resource: where
    /// applied, Secrets of those names must hold the same values, or theirs are sent instead.
    pub borrowed: Vec<String>,
}

impl Export {
    /// Writes every file into `dir` (created when missing).
    pub fn write(&self, dir: &Path) -> Result<(), GitopsError> {
        let fail = |path: &Path| {
            let path = path.to_path_buf();
            move |error| GitopsError::Write { path, error }
        };
        std::fs::create_dir_all(dir).map_err(fail(dir))?;
        for file in &self.files {
            let path = dir.join(&file.name);
            std::fs::write(&path, &file.content).map_err(fail(&path))?;
        }
        Ok(())
    }
}

/// Reads every config, active deployment, guardrail, rate-limits and usage-limits policy,
/// organisation integration, active workspace and organisation MCP integration, and the providers and MCP servers of `--workspace-id` (GET and list only), and
/// renders them as manifests.
pub async fn export(api: &Client, options: &ExportOptions) -> Result<Export, GitopsError> {
    let mut out = Builder::new(options);
    let configs = listed(
        "configs",
        api.configs().list(options.workspace_id.as_deref()),
    )
    .await?;
    for summary in configs {
        let detail =
            api.configs().get(&summary.slug).await.map_err(|e| {
                GitopsError::api(format!("failed to read config {}", summary.slug), e)
            })?;
        out.config(&detail)?;
    }
    // Archived deployments are left out: declaring one would make the operator reactivate it.
    let query = DeploymentListQuery {
        status: Some(api::DeploymentStatus::Active),
        ..Default::default()
    };
    let deployments = listed("deployments", api.deployments().list(&query)).await?;
    for summary in deployments {
        let remote = api.deployments().get(&summary.id).await.map_err(|e| {
            GitopsError::api(format!("failed to read deployment {}", summary.id), e)
        })?;
        out.deployment(&remote)?;
    }
    export_guardrails::<Guardrail>(api, options.workspace_id.as_deref(), &mut out).await?;
    // Organisation guardrails belong to no workspace: always exported.
    export_guardrails::<ClusterGuardrail>(api, None, &mut out).await?;
    export_policies::<RateLimitsPolicy>(api, options, &mut out).await?;
    export_policies::<UsageLimitsPolicy>(api, options, &mut out).await?;
    // Integrations belong to the organisation: always exported.
    access::export_integrations(api, &mut out).await?;
    access::export_providers(api, options.workspace_id.as_deref(), &mut out).await?;
    // Workspaces belong to the organisation: always exported (but the default one).
    workspaces::export_workspaces(api, &mut out).await?;
    // MCP integrations belong to the organisation: always exported.
    mcp_integrations::export_mcp_integrations(api, &mut out).await?;
    mcp_servers::export_mcp_servers(api, options.workspace_id.as_deref(), &mut out).await?;
    skip_secret_references(api, &mut out).await?;
    out.finish()
}

/// The organisation's secret references, said skipped (never silently left out): a read masks
/// `auth_config` and omits `allowed_workspaces`, so no manifest can state them, and one that
/// guessed would make the operator rewrite the live credentials on adoption.
async fn skip_secret_references(api: &Client, out: &mut Builder<'_>) -> Result<(), GitopsError> {
    let query = Default::default();
    let references = listed("secret references", api.secret_references().list(&query)).await?;
    for reference in references {
        out.export.skipped.push(format!(
            "secret reference {}: its auth_config and allowed workspaces are write-only (reads mask or omit them); write its SecretReference by hand, with spec.slug {} to adopt it and a Secret for spec.authConfigSecretRef (the first apply writes them once)",
            reference.slug, reference.slug
        ));
    }
    Ok(())
}

/// Every guardrail of `G`'s plane (of `workspace`, if given) that is `G`'s: a workspace
/// guardrail has a workspace, an organisation guardrail has none.
async fn export_guardrails<G: GuardrailKind + Serialize>(
    api: &Client,
    workspace: Option<&str>,
    out: &mut Builder<'_>,
) -> Result<(), GitopsError> {
    let plane = api.guardrails_on(G::PLANE);
    let guardrails = listed("guardrails", plane.listing(workspace, Reading::Proof)).await?;
    let keys = guardrails.items.iter().flat_map(|g| [&g.id, &g.slug]);
    out.guardrail_keys.extend(keys.cloned());
    for summary in guardrails
        .items
        .iter()
        .filter(|g| G::lists_as_own(g.workspace_id.as_deref()))
    {
        let remote = plane.get(&summary.slug).await.map_err(|e| {
            GitopsError::api(format!("failed to read guardrail {}", summary.slug), e)
        })?;
        out.guardrail::<G>(&remote)?;
    }
    Ok(())
}

/// Every active policy of kind `P` (archived ones are gone for aigw), all pages.
async fn export_policies<P: Policy>(
    api: &Client,
    options: &ExportOptions,
    out: &mut Builder<'_>,
) -> Result<(), GitopsError> {
    let what = format!("{}s", P::WHAT);
    let listing = listed(
        &what,
        P::list(api, options.workspace_id.clone(), Reading::Proof),
    )
    .await?;
    for policy in &listing.items {
        out.policy::<P>(policy)?;
    }
    Ok(())
}

/// What a list call answers; its failure reads `failed to list {what}`.
async fn listed<T>(
    what: &str,
    list: impl Future<Output = Result<T, api::ApiError>>,
) -> Result<T, GitopsError> {
    list.await
        .map_err(|e| GitopsError::api(format!("failed to list {what}"), e))
}

/// Collects rendered manifests and keeps `metadata.name` unique per kind.
struct Builder<'o> {
    options: &'o ExportOptions,
    used: HashSet<(&'static str, String)>,
    /// (kind, manifest name) of each object a live resource manages, with what
    /// [`Export::managed`] says of it once its manifest is written.
    managed_by: HashMap<(&'static str, String), String>,
    /// The files `kustomization.yaml` does not list, with the namespace to apply each into:
    /// kustomize would put them where their reader does not look.
    unlisted: Vec<(String, &'static str)>,
    /// The slug of each config exported and the guardrails its document names (as the
    /// operator resolves them: by slug or id), and the slugs and ids of the guardrails listed.
    guardrail_refs: Vec<(String, Vec<GuardrailRef>)>,
    guardrail_keys: HashSet<String>,
    export: Export,
}

impl<'o> Builder<'o> {
    fn new(options: &'o ExportOptions) -> Self {
        Self {
            options,
            used: HashSet::new(),
            managed_by: HashMap::new(),
            unlisted: Vec::new(),
            guardrail_refs: Vec::new(),
            guardrail_keys: HashSet::new(),
            export: Export::default(),
        }
    }

    /// `workspace` (`--workspace-id`) for a kind exported per workspace only; without one, the
    /// `count` objects listed are said skipped (`what`: "providers: exported per workspace
    /// only").
    fn per_workspace<'w>(
        &mut self,
        workspace: Option<&'w str>,
        count: usize,
        what: &str,
    ) -> Option<&'w str> {
        if workspace.is_none() && count > 0 {
            self.export
                .skipped
                .push(format!("{count} {what}; pass --workspace-id"));
        }
        workspace
    }

    /// With [`ExportOptions::skip_managed`], true (and the object said skipped) when a live
    /// resource manages the remote object of `kind` whose id is `id`. A builder asks first, so
    /// that is the reason said for such an object, not another check's.
    fn left_as_managed(&mut self, kind: &'static str, known_as: &str, id: &str) -> bool {
        let live = self.options.live_names.as_ref();
        let Some(manager) = live
            .filter(|_| self.options.skip_managed)
            .and_then(|live| live.manager(kind, id))
        else {
            return false;
        };
        self.export.skipped.push(format!(
            "{kind} {known_as}: managed already by the {kind} {manager} of the cluster, which is its manifest (--skip-managed)"
        ));
        true
    }

    /// The manifest's metadata for the remote object of `kind` whose id is `id`: a name made
    /// of `wanted` (or `fallback`) that no other manifest of the kind has and, with the cluster
    /// read, no live resource of the kind has where the manifest will be applied (applying it
    /// would change that resource instead of adding one). An object a live resource manages is
    /// listed in [`Export::managed`] once its manifest is written; with
    /// [`ExportOptions::skip_managed`] it is left out instead (`None`, said skipped: that
    /// resource is its manifest).
    fn meta(
        &mut self,
        kind: &'static str,
        wanted: &str,
        fallback: &str,
        id: &str,
    ) -> Option<ObjectMeta> {
        // The slug (a workspace's and an MCP integration's fall back on their id).
        let known_as = if fallback == id { wanted } else { fallback };
        if self.left_as_managed(kind, known_as, id) {
            return None;
        }
        let live = self.options.live_names.as_ref();
        let managed = live
            .and_then(|live| live.manager(kind, id))
            .map(|manager| format!("{kind} {known_as} (by {kind} {manager})"));
        let namespace = self.options.namespace.as_deref();
        let taken = |name: &str| live.is_some_and(|live| live.taken(kind, namespace, name));
        let base = kubernetes_name(wanted)
            .or_else(|| kubernetes_name(fallback))
            .unwrap_or_else(|| kind.to_ascii_lowercase());
        let name = self.unique_name(kind, &base, 63, taken);
        if let Some(managed) = managed {
            self.managed_by.insert((kind, name.clone()), managed);
        }
        Some(ObjectMeta {
            name: Some(name),
            namespace: self.options.namespace.clone(),
            ..Default::default()
        })
    }

    /// `base`, or `base-2`, `base-3` … (at most `max` bytes): the first that `taken` refuses
    /// and no other manifest of `kind` has; reserved for this one.
    fn unique_name(
        &mut self,
        kind: &'static str,
        base: &str,
        max: usize,
        taken: impl Fn(&str) -> bool,
    ) -> String {
        let mut name = base.to_string();
        let mut n = 2;
        while taken(&name) || !self.used.insert((kind, name.clone())) {
            let suffix = format!("-{n}");
            name = format!("{}{suffix}", truncate(base, max - suffix.len()));
            n += 1;
        }
        name
    }

    /// The name of the Secret `base` an exported manifest names (a placeholder written beside
    /// it, `NAME-secrets` or `NAME-upstream`, or a Deployment's `NAME-credentials` for the user
    /// to create) where it will be applied, `namespace` (`None`: not known, so any): one no
    /// live Secret has there, with the cluster read. Applied over a live Secret, a
    /// placeholder's empty values would overwrite what it holds; a Deployment would read
    /// another's Secret as its gateway's credentials.
    fn placeholder_name(&mut self, base: &str, namespace: Option<&str>) -> String {
        let live = self.options.live_names.as_ref();
        let taken = |name: &str| live.is_some_and(|live| live.taken("Secret", namespace, name));
        self.unique_name("Secret", base, 253, taken)
    }

    /// What [`Export::borrowed`] says of the manifest of `what` (the remote object whose id is
    /// `id`), for `namespace`, whose `refs` are its live resources': `None` when it names none,
    /// or every such resource is in that namespace or cluster-scoped (a ClusterGuardrail's
    /// Secrets are the operator's namespace's wherever the manifest goes).
    fn borrowing(
        &self,
        what: &str,
        id: &str,
        namespace: Option<&str>,
        refs: &[ConfigSecretRef],
    ) -> Option<String> {
        let owners = self.options.live_secret_owners.get(id)?;
        let elsewhere = owners
            .iter()
            .find(|owner| owner.namespace.is_some() && owner.namespace.as_deref() != namespace)?;
        if refs.is_empty() {
            return None;
        }
        let names = secret_names(refs).join(", ");
        Some(format!("{what}: Secret {names} (as {elsewhere} does)"))
    }

    /// False (and the object recorded as skipped) when `document` holds inline secrets: they
    /// must not land in Git, and a manifest without them would make the operator erase them.
    fn free_of_secrets(
        &mut self,
        what: String,
        document: Option<&serde_json::Value>,
        field: &str,
    ) -> bool {
        let found = document.map(|d| secret_paths(d, field)).unwrap_or_default();
        self.none_or_skipped(&what, &found, |at| {
            format!("inline secrets at {at}; move them to a secret reference or virtual key, or write its manifest by hand")
        })
    }

    /// True when `found` (paths of values that must not land in Git) is empty; otherwise false,
    /// and `what` recorded as skipped: it holds what `holds` says is at those paths.
    fn none_or_skipped(
        &mut self,
        what: &str,
        found: &[String],
        holds: impl FnOnce(String) -> String,
    ) -> bool {
        if found.is_empty() {
            return true;
        }
        let holds = holds(found.join(", "));
        self.export.skipped.push(format!("{what}: holds {holds}"));
        false
    }

    /// False (and the object recorded as skipped) when `document` holds a value of a Secret
    /// its live resource names (or named, or wrote at one of its paths) anywhere but at a
    /// current `secretRefs` path: an older write left it at another index, and it would land
    /// in Git.
    fn free_of_secret_values(
        &mut self,
        what: &str,
        document: &serde_json::Value,
        key: &str,
    ) -> bool {
        let Some(masking) = self.options.live_masking.get(key) else {
            if self
                .options
                .live_recorded
                .as_ref()
                .is_some_and(|recorded| !recorded.contains(key))
            {
                self.export.unrecognised.push(what.to_string());
            }
            return true;
        };
        let mut masking = masking.clone();
        masking.learn(document);
        let mut stray = masking.stray(document);
        let current = self.options.live_secret_refs.get(key).into_iter().flatten();
        let current: Vec<&str> = current.map(|r| r.path.as_str()).collect();
        stray.retain(|pointer| !current.contains(&pointer.as_str()));
        self.none_or_skipped(what, &stray, |at| {
            format!("a value of a Secret its resource takes values from at {at}, outside its secretRefs paths; apply the resource so the operator rewrites the document, then export again")
        })
    }

    /// Inline secrets of the document (never exported) become `spec.secretRefs` to a Secret
    /// written as a placeholder with empty values, for the user to fill in before applying.
    fn config(&mut self, remote: &api::ConfigDetail) -> Result<(), GitopsError> {
        let Some(metadata) = self.meta("Config", &remote.name, &remote.slug, &remote.id) else {
            return Ok(());
        };
        let mut spec = project::config_spec(remote);
        let live = self.options.live_secret_refs.get(&remote.slug);
        let mut document = spec.config.to_value();
        let what = format!("config {}", remote.slug);
        if !self.free_of_secret_values(&what, &document, &remote.slug) {
            return Ok(());
        }
        spec.secret_refs = take_live_secrets(&mut document, live);
        // Before the placeholder's references join them.
        let borrowed = borrowed_secrets(&spec.secret_refs);
        let borrowing = self.borrowing(
            &what,
            &remote.id,
            metadata.namespace.as_deref(),
            &spec.secret_refs,
        );
        if let serde_json::Value::Object(map) = document {
            spec.config = map.into();
        }
        let name = metadata.name.clone().unwrap_or_default();
        let namespace = metadata.namespace.clone();
        let secret = self.placeholder_name(&format!("{name}-secrets"), namespace.as_deref());
        let keys = move_secrets_out(&mut spec, &secret);
        let object = Config {
            metadata,
            spec,
            status: None,
        };
        let header = match keys.is_empty() {
            true => format!("# Adopts config {} as it is.\n{borrowed}", remote.slug),
            false => format!(
                "# Adopts config {}. Its inline secrets are never exported: they come from Secret\n\
                 # {secret} (secret-{secret}.yaml), which must hold their values before applying.\n{borrowed}",
                remote.slug
            ),
        };
        // A Config left out leaves its placeholder out too.
        if !self.push("Config", "config", &object.metadata, &object, header)? {
            return Ok(());
        }
        // A name a Secret supplies is not known here.
        let named = MarkedDocument::new(&object.spec).and_then(|d| d.guardrail_references());
        let named = named.unwrap_or_default().into_iter();
        let named = named.filter(|r| r.secret.is_none()).collect();
        self.guardrail_refs.push((remote.slug.clone(), named));
        self.export.borrowed.extend(borrowing);
        if keys.is_empty() {
            return Ok(());
        }
        let placeholder = placeholder_secret(&secret, object.metadata.namespace.clone(), keys);
        let header = format!(
            "# Placeholder for the secrets of config {}: fill in every value before applying\n\
             # (aigw refuses empty values rather than send them).\n",
            remote.slug
        );
        let meta = placeholder.metadata.clone();
        self.push("Secret", "secret", &meta, &placeholder, header)
            .map(drop)
    }

    fn deployment(&mut self, remote: &api::Deployment) -> Result<(), GitopsError> {
        if self.left_as_managed("Deployment", &remote.slug, &remote.id) {
            return Ok(());
        }
        let what = format!("deployment {}", remote.id);
        if !self.free_of_secrets(
            what,
            remote.deployment_config.as_ref(),
            "spec.deploymentConfig",
        ) {
            return Ok(());
        }
        let Some(metadata) = self.meta("Deployment", &remote.name, &remote.slug, &remote.id) else {
            return Ok(());
        };
        let name = metadata.name.clone().unwrap_or_default();
        // Not written, but named: one of another's would be read as this gateway's.
        let namespace = metadata.namespace.clone();
        let secret = self.placeholder_name(&format!("{name}-credentials"), namespace.as_deref());
        let object = Deployment {
            metadata,
            spec: project::deployment_spec(remote, &secret),
            status: None,
        };
        let header = format!(
            "# Adopts deployment {} as it is. Its credentials are never exported: put the gateway's\n\
             # current client_auth, username and password into Secret {secret} before applying\n\
             # (or set spec.rotation.trigger to have aigw issue new ones).\n",
            remote.id
        );
        self.push(
            "Deployment",
            "deployment",
            &object.metadata,
            &object,
            header,
        )
        .map(drop)
    }

    /// A guardrail as it is, as a resource of kind `G`. One whose check parameters hold
    /// credentials (masked on read, so never known here) is left out: its manifest needs
    /// `secretRefs` by hand.
    fn guardrail<G: GuardrailKind + Serialize>(
        &mut self,
        remote: &api::GuardrailDetails,
    ) -> Result<(), GitopsError> {
        if self.left_as_managed(G::REFERENCED_AS.kind(), &remote.slug, &remote.id) {
            return Ok(());
        }
        let mut document = crate::resources::guardrail::remote_document(remote);
        let live = self.options.live_secret_refs.get(&remote.slug);
        let what = format!("guardrail {}", remote.slug);
        if !self.free_of_secret_values(&what, &document, &remote.slug) {
            return Ok(());
        }
        let secret_refs = take_live_secrets(&mut document, live);
        if !self.free_of_secrets(format!("guardrail {}", remote.slug), Some(&document), "") {
            return Ok(());
        }
        let kind = G::REFERENCED_AS.kind();
        let Some(mut metadata) = self.meta(kind, &remote.name, &remote.slug, &remote.id) else {
            return Ok(());
        };
        if !G::REFERENCED_AS.namespaced() {
            metadata.namespace = None;
        }
        let mut spec = project::guardrail_definition(remote);
        for reference in &secret_refs {
            // The spec's checks hold the same parameters as the document, under the same index.
            if let Some(rest) = reference.path.strip_prefix("/checks/")
                && let Some((n, path)) = rest.split_once("/parameters")
                && let Some(check) = n.parse::<usize>().ok().and_then(|n| spec.checks.get_mut(n))
            {
                let mut parameters =
                    serde_json::Value::Object(std::mem::take(&mut check.parameters));
                crate::resources::config::take_pointer(&mut parameters, path);
                check.parameters = parameters.as_object().cloned().unwrap_or_default();
            }
        }
        let borrowed = borrowed_secrets(&secret_refs);
        let borrowing = self.borrowing(
            &what,
            &remote.id,
            metadata.namespace.as_deref(),
            &secret_refs,
        );
        spec.secret_refs = secret_refs;
        let object = G::from_definition(metadata, spec, remote.workspace_id.clone());
        let header = format!("# Adopts guardrail {} as it is.\n{borrowed}", remote.slug);
        let prefix = kind.to_ascii_lowercase();
        if self.push(kind, &prefix, object.meta(), &object, header)? {
            self.export.borrowed.extend(borrowing);
        }
        Ok(())
    }

    fn policy<P: Policy>(&mut self, remote: &P::Remote) -> Result<(), GitopsError> {
        let id = P::facts(remote).id.to_string();
        if self.left_as_managed(P::RESOURCE, &format!("policy-{id}"), &id) {
            return Ok(());
        }
        let spec = match P::projected(remote) {
            Ok(spec) => spec,
            Err(why) => {
                self.export.skipped.push(format!("{} {id}: {why}", P::WHAT));
                return Ok(());
            }
        };
        let kind = P::RESOURCE;
        let wanted = P::facts(remote).name.unwrap_or_default().to_string();
        let Some(metadata) = self.meta(kind, &wanted, &format!("policy-{id}"), &id) else {
            return Ok(());
        };
        let object = P::with_spec(metadata, spec);
        let header = format!("# Adopts {} {id} as it is.\n", P::WHAT);
        self.push(kind, &kind.to_lowercase(), object.meta(), &object, header)
            .map(drop)
    }

    /// Adds the manifest of `object`, saying whether it was written (false: left out, and said
    /// so: it holds credentials in text).
    fn push<T: Serialize>(
        &mut self,
        kind: &'static str,
        prefix: &str,
        meta: &ObjectMeta,
        object: &T,
        header: String,
    ) -> Result<bool, GitopsError> {
        let name = meta.name.clone().unwrap_or_default();
        // Credentials in a URL's userinfo (a webhook's `https://user:pass@host`) or after a
        // secret-looking key in text (`?api_key=…`) never land in Git: a Config's and an
        // Integration's are Secret references by now; any other object holding one is left
        // out (`aigw plan` hides the same text).
        let value = serde_json::to_value(object).unwrap_or_default();
        let mut credentials = crate::api::secret_fields::userinfo_pointers(&value);
        credentials.extend(crate::api::secret_fields::secret_text_pointers(&value));
        if !credentials.is_empty() {
            credentials.sort();
            credentials.dedup();
            self.export.skipped.push(format!(
                "{kind} {name}: holds credentials in text (a URL's userinfo, or a value after a secret-looking key such as api_key=) at {}; write its manifest by hand, with that value in a Secret",
                credentials.join(", ")
            ));
            self.managed_by.remove(&(kind, name));
            return Ok(false);
        }
        let connection = self.options.connection.as_deref();
        let rendered = match connection.filter(|c| *c != "default" && kind != "Secret") {
            Some(connection) => naming_connection(object, connection)
                .and_then(|value| serde_yaml::to_string(&value)),
            None => serde_yaml::to_string(object),
        };
        let yaml = rendered.map_err(|e| GitopsError::Render {
            what: format!("{kind} {name}"),
            message: e.to_string(),
        })?;
        self.export.files.push(ExportFile {
            name: format!("{prefix}-{name}.yaml"),
            content: format!("{header}{yaml}"),
        });
        *self.export.counts.entry(kind).or_default() += 1;
        if let Some(managed) = self.managed_by.remove(&(kind, name)) {
            self.export.managed.push(managed);
        }
        Ok(true)
    }

    /// Keeps the file `name` out of `kustomization.yaml`, which says to apply it into
    /// `namespace` instead.
    fn unlisted(&mut self, name: String, namespace: &'static str) {
        self.unlisted.push((name, namespace));
    }

    fn finish(mut self) -> Result<Export, GitopsError> {
        for (config, named) in std::mem::take(&mut self.guardrail_refs) {
            // The paths only: a name may be a Secret's value that no live resource says is one
            // (an export without a kubeconfig), and stderr goes to CI logs.
            let missing: Vec<&str> = (named.iter())
                .filter(|r| !self.guardrail_keys.contains(&r.name))
                .map(|r| r.path.as_str())
                .collect();
            if !missing.is_empty() {
                let missing = missing.join(", ");
                self.export
                    .dangling
                    .push(format!("config {config} at {missing}"));
            }
        }
        let unlisted = |name: &String| self.unlisted.iter().any(|(n, _)| n == name);
        let resources: Vec<String> = (self.export.files.iter().map(|f| f.name.clone()))
            .filter(|name| !unlisted(name))
            .collect();
        let apart: String = (self.unlisted.iter())
            .map(|(name, namespace)| {
                format!("# Not listed: apply {name} into {namespace} (kubectl apply -n NAMESPACE -f {name}).\n")
            })
            .collect();
        let kustomization = serde_json::json!({
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": resources,
        });
        let yaml = serde_yaml::to_string(&kustomization).map_err(|e| GitopsError::Render {
            what: "kustomization.yaml".into(),
            message: e.to_string(),
        })?;
        self.export.files.push(ExportFile {
            name: "kustomization.yaml".into(),
            content: format!("# Generated by `aigw export`.\n{apart}{yaml}"),
        });
        Ok(self.export)
    }
}

/// `object` with `spec.connectionRef` naming `connection`, where the block of managed fields
/// puts it: after `spec.managementPolicy` (which every exported kind writes), the other keys
/// in their order.
fn naming_connection<T: Serialize>(
    object: &T,
    connection: &str,
) -> Result<serde_yaml::Value, serde_yaml::Error> {
    use serde_yaml::{Mapping, Value};
    let mut value = serde_yaml::to_value(object)?;
    let Some(spec) = value.get_mut("spec").and_then(Value::as_mapping_mut) else {
        return Ok(value);
    };
    let reference = || {
        let mut reference = Mapping::new();
        reference.insert("name".into(), connection.into());
        Value::Mapping(reference)
    };
    let mut named = Mapping::new();
    for (key, field) in std::mem::take(spec) {
        let after = key.as_str() == Some("managementPolicy");
        if key.as_str() != Some("connectionRef") {
            named.insert(key, field);
        }
        if after {
            named.insert("connectionRef".into(), reference());
        }
    }
    if !named.contains_key("connectionRef") {
        named.insert("connectionRef".into(), reference());
    }
    *spec = named;
    Ok(value)
}

/// Takes every secret-looking value out of `spec.config` (and every URL with userinfo, such as
/// `custom_host: https://user:pass@host`) and references it from Secret `secret` instead, under
/// a key derived from its path. Returns the Secret keys used.
fn move_secrets_out(spec: &mut crate::resources::config::ConfigSpec, secret: &str) -> Vec<String> {
    use crate::resources::config::{ConfigSecretRef, SecretKeyRef, take_pointer};
    let mut document = spec.config.to_value();
    let mut keys = Vec::new();
    let mut found = secret_pointers(&document);
    for path in crate::api::secret_fields::userinfo_pointers(&document) {
        if !found.contains(&path) {
            found.push(path);
        }
    }
    for path in found {
        take_pointer(&mut document, &path);
        let mut key = secret_key_for(&path);
        if keys.contains(&key) {
            key = format!("{key}-{}", keys.len());
        }
        keys.push(key.clone());
        spec.secret_refs.push(ConfigSecretRef {
            path,
            secret_key_ref: SecretKeyRef {
                name: secret.to_string(),
                key,
            },
        });
    }
    if let serde_json::Value::Object(map) = document {
        spec.config = map.into();
    }
    keys
}

/// A Secret data key (`[-._a-zA-Z0-9]+`) for a JSON Pointer: `/targets/0/api_key` →
/// `targets.0.api_key`.
fn secret_key_for(path: &str) -> String {
    let joined = path.trim_start_matches('/').replace('/', ".");
    let key: String = joined
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' | '.' => c,
            _ => '-',
        })
        .take(253)
        .collect();
    if key.is_empty() { "value".into() } else { key }
}

/// A Secret with an empty value at each key, to be filled in by the user.
fn placeholder_secret(
    name: &str,
    namespace: Option<String>,
    keys: Vec<String>,
) -> k8s_openapi::api::core::v1::Secret {
    k8s_openapi::api::core::v1::Secret {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace,
            ..Default::default()
        },
        type_: Some("Opaque".into()),
        string_data: Some(keys.into_iter().map(|k| (k, String::new())).collect()),
        ..Default::default()
    }
}

/// A valid `metadata.name` (RFC 1123 label, so it also works as a file name) derived from a
/// display name: lowercase, runs of anything else become `-`, at most 63 characters. `None`
/// when nothing usable is left.
pub fn kubernetes_name(display: &str) -> Option<String> {
    let mut name = String::with_capacity(display.len());
    for c in display.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            name.push(c);
        } else if !name.ends_with('-') {
            name.push('-');
        }
    }
    let name = truncate(name.trim_matches('-'), 63).trim_end_matches('-');
    (!name.is_empty()).then(|| name.to_string())
}

fn truncate(s: &str, max: usize) -> &str {
    // Names here are ASCII, so byte and char positions agree.
    &s[..s.len().min(max)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_secrets_become_references_to_a_placeholder_secret() {
        let remote: api::ConfigDetail = serde_json::from_value(serde_json::json!({
            "id": "id-1", "slug": "pc-1", "name": "r", "status": "active",
            "config": r#"{"targets": [{"provider": "openai", "api_key": "sk-live"}], "custom_headers": {"authorization": "Bearer t"}, "virtual_key": ""}"#
        }))
        .unwrap();
        let mut spec = project::config_spec(&remote);
        let keys = move_secrets_out(&mut spec, "r-secrets");
        assert_eq!(
            keys,
            vec!["custom_headers.authorization", "targets.0.api_key"]
        );
        let text = serde_json::to_string(&spec).unwrap();
        assert!(
            !text.contains("sk-live") && !text.contains("Bearer t"),
            "{text}"
        );
        assert_eq!(spec.secret_refs[1].path, "/targets/0/api_key");
        assert_eq!(spec.secret_refs[1].secret_key_ref.name, "r-secrets");
        assert!(spec.diff_without_secrets(&remote).is_empty());
        let secret = serde_json::to_value(placeholder_secret("r-secrets", None, keys)).unwrap();
        assert_eq!(secret["kind"], "Secret");
        assert_eq!(secret["stringData"]["targets.0.api_key"], "");
    }

    /// With `--skip-managed`, a managed object is said skipped as managed, whatever else would
    /// have left it out (here: inline secrets in a deployment's config).
    #[test]
    fn a_managed_object_is_said_skipped_as_managed_first() {
        let remote: api::Deployment = serde_json::from_value(serde_json::json!({
            "id": "d1", "name": "edge", "slug": "dp-edge", "type": "non_production",
            "status": "active", "is_default": 0, "deployment_config": {"api_key": "sk-live"}
        }))
        .unwrap();
        let mut live = LiveNames::default();
        let at = LiveName {
            namespace: Some("team-a".into()),
            name: "gw".into(),
        };
        live.add("Deployment", at, Some("d1"));
        let mut options = ExportOptions {
            live_names: Some(live),
            skip_managed: true,
            ..Default::default()
        };
        let mut builder = Builder::new(&options);
        builder.deployment(&remote).unwrap();
        assert_eq!(
            builder.export.skipped,
            vec![
                "Deployment dp-edge: managed already by the Deployment team-a/gw of the cluster, which is its manifest (--skip-managed)"
            ]
        );
        // Without --skip-managed, the other reason stands.
        options.skip_managed = false;
        let mut builder = Builder::new(&options);
        builder.deployment(&remote).unwrap();
        assert_eq!(builder.export.skipped.len(), 1);
        assert!(!builder.export.skipped[0].contains("managed already"));
        assert!(builder.export.files.is_empty());
    }

    /// A config left out for credentials in text leaves out the placeholder Secret of its
    /// inline secrets too (it used to be written alone, listed in `kustomization.yaml`).
    #[test]
    fn a_config_left_out_leaves_its_placeholder_out() {
        let remote: api::ConfigDetail = serde_json::from_value(serde_json::json!({
            "id": "id-1", "slug": "pc-1", "name": "r", "status": "active",
            "config": r#"{"targets": [{"provider": "openai", "api_key": "sk-live", "custom_host": "https://h.example/v1?api_key=abc"}]}"#
        }))
        .unwrap();
        let options = ExportOptions::default();
        let mut builder = Builder::new(&options);
        builder.config(&remote).unwrap();
        assert!(
            builder.export.files.is_empty(),
            "{:?}",
            builder.export.files
        );
        assert_eq!(
            builder.export.skipped.len(),
            1,
            "{:?}",
            builder.export.skipped
        );
        assert!(builder.export.skipped[0].starts_with("Config r: holds credentials in text"));
    }

    /// A config naming a guardrail none of the listed guardrails is (by slug or id) is said:
    /// applied, it would wait for that guardrail and write nothing (an export round trip found
    /// such a config adopted as Stalled, with nothing said at export).
    #[test]
    fn a_config_naming_a_guardrail_none_has_is_said() {
        let remote: api::ConfigDetail = serde_json::from_value(serde_json::json!({
            "id": "id-1", "slug": "pc-1", "name": "r", "status": "active",
            "config": r#"{"input_guardrails": ["pg-pii", "pg-gone"], "before_request_hooks": [{"id": "0b5c-id"}]}"#
        }))
        .unwrap();
        let options = ExportOptions::default();
        let mut builder = Builder::new(&options);
        builder.config(&remote).unwrap();
        builder
            .guardrail_keys
            .extend(["pg-pii".into(), "0b5c-id".into()]);
        let export = builder.finish().unwrap();
        assert_eq!(export.dangling, ["config pc-1 at /input_guardrails/1"]);
    }

    /// An export for `team-a` of a cluster holding the Secret `name` in `namespace`.
    fn exporting_beside_a_secret(namespace: Option<&str>, name: &str) -> ExportOptions {
        let mut live = LiveNames::default();
        let secret = LiveName {
            namespace: namespace.map(str::to_string),
            name: name.into(),
        };
        live.add("Secret", secret, None);
        ExportOptions {
            namespace: Some("team-a".into()),
            live_names: Some(live),
            ..Default::default()
        }
    }

    /// A placeholder Secret never takes the name of a live Secret where it will be applied:
    /// applied, its empty values would overwrite that Secret's. The Config names the one
    /// written.
    #[test]
    fn a_placeholder_secret_does_not_take_a_live_secrets_name() {
        let remote: api::ConfigDetail = serde_json::from_value(serde_json::json!({
            "id": "id-1", "slug": "pc-1", "name": "r", "status": "active",
            "config": r#"{"targets": [{"provider": "openai", "api_key": "sk-live"}]}"#
        }))
        .unwrap();
        let secret_of = |namespace: Option<&str>| {
            let options = exporting_beside_a_secret(namespace, "r-secrets");
            let mut builder = Builder::new(&options);
            builder.config(&remote).unwrap();
            let names: Vec<String> = builder
                .export
                .files
                .iter()
                .map(|f| f.name.clone())
                .collect();
            let config = &builder.export.files[0].content;
            (names, config.contains("name: r-secrets-2"))
        };
        // A Secret of that name where the export goes: the placeholder is another.
        let (files, renamed) = secret_of(Some("team-a"));
        assert_eq!(files, ["config-r.yaml", "secret-r-secrets-2.yaml"]);
        assert!(renamed, "the Config names the Secret written");
        // In another namespace only: the name is free.
        let (files, renamed) = secret_of(Some("team-b"));
        assert_eq!(files, ["config-r.yaml", "secret-r-secrets.yaml"]);
        assert!(!renamed);
    }

    /// A Deployment's credentials Secret (named, for the user to create) never takes a live
    /// Secret's name either: the adopted gateway would read another's Secret as its own.
    #[test]
    fn a_deployments_credentials_secret_does_not_take_a_live_secrets_name() {
        let remote: api::Deployment = serde_json::from_value(serde_json::json!({
            "id": "d-1", "slug": "edge-eu", "name": "edge-eu", "type": "production",
            "status": "active"
        }))
        .unwrap();
        let options = exporting_beside_a_secret(Some("team-a"), "edge-eu-credentials");
        let mut builder = Builder::new(&options);
        builder.deployment(&remote).unwrap();
        let file = &builder.export.files[0].content;
        let exported: Deployment = serde_yaml::from_str(file).unwrap();
        let named = exported.spec.credentials_secret_ref.name;
        assert_eq!(named, "edge-eu-credentials-2", "{file}");
        assert!(file.contains("into Secret edge-eu-credentials-2"), "{file}");
    }

    #[test]
    fn values_aigw_substitutes_from_secrets_are_never_exported_whatever_their_key() {
        let remote: api::ConfigDetail = serde_json::from_value(serde_json::json!({
            "id": "id-1", "slug": "pc-1", "name": "r", "status": "active",
            "config": r#"{"before_request_hooks": [{"id": "hunter2-hook"}], "targets": [{"provider": "openai"}]}"#
        }))
        .unwrap();
        let live: ConfigSecretRef = serde_json::from_value(serde_json::json!({
            "path": "/before_request_hooks/0/id", "secretKeyRef": {"name": "db", "key": "password"}
        }))
        .unwrap();
        let options = ExportOptions {
            live_secret_refs: HashMap::from([("pc-1".to_string(), vec![live.clone()])]),
            ..Default::default()
        };
        let mut builder = Builder::new(&options);
        builder.config(&remote).unwrap();
        let file = &builder.export.files[0];
        assert!(!file.content.contains("hunter2-hook"), "{}", file.content);
        let exported: Config = serde_yaml::from_str(&file.content).unwrap();
        assert_eq!(exported.spec.secret_refs, vec![live]);
        // The header says which Secrets it needs where it is applied.
        assert!(
            file.content
                .contains("# It takes values from Secret db, as its live resource does"),
            "{}",
            file.content
        );
        // Without the live references, only secret-looking keys are held back.
        let defaults = ExportOptions::default();
        let mut blind = Builder::new(&defaults);
        blind.config(&remote).unwrap();
        assert!(blind.export.files[0].content.contains("hunter2-hook"));
        assert!(!blind.export.files[0].content.contains("It takes values"));
    }

    /// A manifest for another namespace than its live resource's names that resource's Secrets
    /// by name: it is said, since the Secrets of that name where it is applied are read.
    #[test]
    fn secrets_named_for_another_namespace_are_said() {
        let remote: api::ConfigDetail = serde_json::from_value(serde_json::json!({
            "id": "id-1", "slug": "pc-1", "name": "r", "status": "active",
            "config": r#"{"targets": [{"provider": "openai", "api_key": "sk-from-secret"}]}"#
        }))
        .unwrap();
        let live: ConfigSecretRef = serde_json::from_value(serde_json::json!({
            "path": "/targets/0/api_key", "secretKeyRef": {"name": "shared-llm-keys", "key": "k"}
        }))
        .unwrap();
        let said = |namespace: Option<&str>| {
            // A cluster-scoped resource recording the same object first: the namespaced one
            // still counts.
            let owners =
                [(None, "shared"), (Some("team-b"), "billing")].map(|(ns, name)| LiveName {
                    namespace: ns.map(str::to_string),
                    name: name.into(),
                });
            let options = ExportOptions {
                namespace: namespace.map(str::to_string),
                live_secret_refs: HashMap::from([("pc-1".to_string(), vec![live.clone()])]),
                live_secret_owners: HashMap::from([("id-1".to_string(), owners.to_vec())]),
                ..Default::default()
            };
            let mut builder = Builder::new(&options);
            builder.config(&remote).unwrap();
            assert!(!builder.export.files[0].content.contains("sk-from-secret"));
            builder.export.borrowed
        };
        let expected = ["config pc-1: Secret shared-llm-keys (as team-b/billing does)"];
        assert_eq!(said(Some("team-a")), expected);
        assert_eq!(said(None), expected, "where it goes is not known");
        assert!(said(Some("team-b")).is_empty(), "its own namespace");
    }

    #[test]
    fn display_names_become_kubernetes_names() {
        assert_eq!(
            kubernetes_name("Prod Routing (EU) v2").as_deref(),
            Some("prod-routing-eu-v2")
        );
        assert_eq!(kubernetes_name("ÄÖ__x--").as_deref(), Some("x"));
        assert_eq!(kubernetes_name("---"), None);
        assert_eq!(kubernetes_name(&"a".repeat(80)).map(|n| n.len()), Some(63));
    }

    #[test]
    fn names_are_unique_per_kind() {
        let options = ExportOptions::default();
        let mut builder = Builder::new(&options);
        let name = |meta: Option<ObjectMeta>| meta.and_then(|m| m.name);
        let first = name(builder.meta("Config", "routing", "pc-1", "id-1"));
        let second = name(builder.meta("Config", "Routing", "pc-2", "id-2"));
        let other_kind = name(builder.meta("Deployment", "routing", "d", "id-3"));
        assert_eq!(first.as_deref(), Some("routing"));
        assert_eq!(second.as_deref(), Some("routing-2"));
        assert_eq!(other_kind.as_deref(), Some("routing"));
    }

    /// With the cluster read, no manifest takes a live resource's name where it will be
    /// applied (the same name elsewhere is free). An object a live resource manages is said
    /// once its manifest is written, or, with `--skip-managed`, left out (said skipped).
    #[test]
    fn managed_objects_are_said_or_left_out_and_live_names_are_not_taken() {
        let at = |namespace: &str, name: &str| LiveName {
            namespace: Some(namespace.to_string()),
            name: name.to_string(),
        };
        let mut live = LiveNames::default();
        live.add("Config", at("team-a", "edge-routing"), Some("id-1"));
        live.add("Config", at("team-a", "routing"), Some("id-9"));
        live.add("Config", at("team-b", "canary"), Some("id-8"));
        let mut options = ExportOptions {
            namespace: Some("team-a".into()),
            live_names: Some(live),
            skip_managed: true,
            ..Default::default()
        };
        let mut builder = Builder::new(&options);
        assert_eq!(builder.meta("Config", "routing", "pc-1", "id-1"), None);
        assert_eq!(
            builder.export.skipped,
            vec![
                "Config pc-1: managed already by the Config team-a/edge-routing of the cluster, which is its manifest (--skip-managed)"
            ]
        );
        // pc-2 is called "routing" remotely, but a live Config of that name manages id-9.
        let fresh = builder.meta("Config", "routing", "pc-2", "id-2").unwrap();
        assert_eq!(fresh.name.as_deref(), Some("routing-2"));
        assert_eq!(fresh.namespace.as_deref(), Some("team-a"));
        // "canary" is taken in team-b only.
        let elsewhere = builder.meta("Config", "canary", "pc-3", "id-3").unwrap();
        assert_eq!(elsewhere.name.as_deref(), Some("canary"));
        // Managed in another namespace than --namespace: left out all the same.
        assert_eq!(builder.meta("Config", "canary", "pc-8", "id-8"), None);
        assert!(builder.export.managed.is_empty());

        // Without --skip-managed: exported under a name no live resource has, and said once
        // written; not said when its manifest is left out (credentials in text).
        options.skip_managed = false;
        let mut builder = Builder::new(&options);
        let meta = builder.meta("Config", "routing", "pc-1", "id-1").unwrap();
        assert_eq!(meta.name.as_deref(), Some("routing-2"));
        assert!(builder.export.managed.is_empty());
        let object = serde_json::json!({"metadata": {"name": "routing-2"}});
        builder
            .push("Config", "config", &meta, &object, String::new())
            .unwrap();
        assert_eq!(
            builder.export.managed,
            vec!["Config pc-1 (by Config team-a/edge-routing)"]
        );
        let meta = builder.meta("Config", "canary", "pc-8", "id-8").unwrap();
        let leaky = serde_json::json!({"spec": {"url": "https://user:pass@host"}});
        builder
            .push("Config", "config", &meta, &leaky, String::new())
            .unwrap();
        assert_eq!(builder.export.managed.len(), 1);
        assert_eq!(builder.export.files.len(), 1);
    }
}
