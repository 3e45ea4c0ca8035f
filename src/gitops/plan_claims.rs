//! Who else holds the remote object a plan would read, decided as the operator decides it: the
//! grants of the Connection a manifest names (may its namespace adopt at all?), and the live
//! resources that record the object (another one manages it; its Secret paths are hidden).
//!
//! A plan is posted where the author of a pull request reads it. Without these, a manifest whose
//! `spec.slug` names another team's remote object printed that object's values, and those of
//! its values a Secret gave it were hidden only by the manifest's own `secretRefs`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Namespace;

use super::GitopsError;
use super::export::{LiveRecord, live_records};
use super::mask::Masking;
use super::plan::{Action, Counterpart, Entry, Live, entry};
use super::validate::Object;
use crate::controller::state::claims::Claims;
use crate::controller::state::connections::{Scope, scope_of};
use crate::resources::common::Recorded;
use crate::resources::{ClusterGuardrail, Config, Connection, Guardrail, Integration, Workspace};

/// What a grant entry naming a Workspace resource of the cluster stands for (the UUID and slug
/// it recorded), as the operator reads it; read only when `scope` limits the workspaces.
async fn live_workspaces(
    live: &Live,
    scope: &Scope,
) -> Result<impl Fn(&str) -> Option<Vec<String>> + use<>, GitopsError> {
    let workspaces = match scope.workspaces {
        None => Vec::new(),
        Some(_) => {
            kube::Api::<Workspace>::all(live.client.clone())
                .list(&Default::default())
                .await
                .map_err(|e| GitopsError::kube("failed to list Workspaces", e))?
                .items
        }
    };
    Ok(move |name: &str| {
        let found = workspaces
            .iter()
            .find(|w| w.metadata.name.as_deref() == Some(name))?;
        let status = found.status.as_ref();
        Some(status.map(Recorded::remote_key_strings).unwrap_or_default())
    })
}

/// What the grants of Connection `connection` let `namespace` do, as the operator decides it:
/// `None` when no grants apply (no such Connection, or one without `spec.grants`; for `default`
/// when no Connection has that name, the command's `--grants-file`), else the scope or the
/// operator's refusal, as a message.
pub(super) async fn grants_scope(
    live: &Live,
    connection: &str,
    namespace: &str,
) -> Result<Option<Result<Scope, String>>, GitopsError> {
    let failed = |what: String| move |e| GitopsError::kube(format!("failed to read {what}"), e);
    let found = kube::Api::<Connection>::all(live.client.clone())
        .get_opt(connection)
        .await
        .map_err(failed(format!("Connection {connection}")))?;
    let grants = match &found {
        Some(found) => found.spec.grants.as_deref(),
        None if connection == "default" => live.default_grants.as_deref(),
        None => None,
    };
    let Some(grants) = grants else {
        return Ok(None);
    };
    let labels = match grants.iter().any(|g| g.namespace_selector.is_some()) {
        true => kube::Api::<Namespace>::all(live.client.clone())
            .get_metadata_opt(namespace)
            .await
            .map_err(failed(format!("namespace {namespace}")))?
            .and_then(|ns| ns.metadata.labels)
            .unwrap_or_default(),
        false => BTreeMap::new(),
    };
    Ok(Some(
        scope_of(connection, grants, namespace, &labels).map_err(refusal),
    ))
}

/// How a plan words a refusal of the operator's.
pub(super) fn refusal(e: crate::controller::error::Error) -> String {
    format!("{} ({}): the operator would refuse it", e, e.category())
}

/// The entry of a manifest that adopts a remote object (`spec.slug`, `spec.deploymentId`,
/// `spec.policyId`) its namespace may not adopt through its Connection's grants, or that names
/// workspaces those grants refuse: a conflict that shows nothing of the remote object (the
/// operator would never read it for this namespace). `None` when the operator would let it
/// through, or without cluster access (the grants are unknown).
pub(super) async fn refused_adoption(
    live: Option<&Live>,
    object: &Object,
) -> Result<Option<Entry>, GitopsError> {
    let Some(live) = live else {
        return Ok(None);
    };
    let asked = match object {
        Object::Config(o) => Asked::of(o.as_ref()),
        Object::Deployment(o) => Asked::of(o.as_ref()),
        Object::RateLimitsPolicy(o) => Asked::of(o.as_ref()),
        Object::UsageLimitsPolicy(o) => Asked::of(o.as_ref()),
        Object::Guardrail(o) => Asked::of(o.as_ref()),
        // Cluster-scoped (grants do not limit them) or never adopted by a spec field.
        _ => return Ok(None),
    };
    let Some((field, id)) = asked.adopted else {
        return Ok(None);
    };
    let namespace = object
        .namespace()
        .map_or_else(|| live.default_namespace.clone(), str::to_string);
    let scope = match grants_scope(live, asked.connection, &namespace).await? {
        None => return Ok(None),
        Some(Ok(scope)) => scope,
        Some(Err(why)) => return Ok(Some(refused(id, why))),
    };
    let resource = live_workspaces(live, &scope).await?;
    let checked = asked
        .workspaces
        .iter()
        .try_for_each(|(field, ws)| scope.check_workspace_by(field, ws.as_deref(), &resource))
        .and_then(|()| scope.check_adoption(field, &id));
    Ok(checked.err().map(|e| refused(id, refusal(e))))
}

/// What the operator's gate asks of a resource's grants before any API call.
struct Asked<'a> {
    connection: &'a str,
    /// The spec field and id of the remote object it adopts.
    adopted: Option<(&'static str, String)>,
    /// The workspaces it acts in, each with the spec field naming it.
    workspaces: Vec<(&'static str, Option<String>)>,
}

impl<'a> Asked<'a> {
    fn of<K: Claims>(object: &'a K) -> Self {
        Self {
            connection: object.connection_name(),
            adopted: object.adopted(),
            workspaces: object.workspaces(),
        }
    }
}

fn refused(id: String, why: String) -> Entry {
    let reason = format!("{why}; the plan shows nothing of the remote object");
    entry(Action::Conflict, Some(id), Vec::new(), Some(reason))
}

/// Which live resources may have written a remote object of a kind.
pub(super) enum Claimed {
    Config,
    /// A Guardrail or ClusterGuardrail, named as the manifest's kind.
    Guardrail(String),
    /// An Integration: its `secretRefs` paths are below `/configurations`.
    Integration,
}

/// The resource a manifest plans, as its claim on a remote object is told from others'.
pub(super) struct Own<'a> {
    pub(super) kind: Claimed,
    /// Its namespace (the manifest's, else the kubeconfig's); `None` when cluster-scoped or
    /// without cluster access.
    pub(super) namespace: Option<&'a str>,
    pub(super) name: &'a str,
    pub(super) connection: &'a str,
}

/// With cluster access, what the live resources that record or name the remote object
/// `counterpart` tell the plan of `own`. Adopting an object another live resource records
/// through the same Connection: the entry that says so (the operator makes no API call for this
/// one while that one holds it, `AlreadyManaged`) and shows nothing of the object. Otherwise
/// `masking` (paths below `prefix`) learns every Secret path any version of those resources
/// named, with the values of those Secrets the user may read.
pub(super) async fn claimed(
    live: Option<&Live>,
    own: &Own<'_>,
    counterpart: &Counterpart,
    masking: &mut Masking,
    prefix: &str,
) -> Option<Entry> {
    let live = live?;
    let key = counterpart.key.as_str();
    // A user who may not list them: what they hold is unknown (an adoption shows only what the
    // manifest holds, whatever they are).
    let claimants = claimants(live, &own.kind, key).await?;
    let elsewhere = claimants.iter().find(|record| {
        record.connection == own.connection
            && record.recorded.iter().any(|r| r == key)
            && !(record.namespace.as_deref() == own.namespace && record.name == own.name)
    });
    if let (true, Some(other)) = (counterpart.adopting, elsewhere) {
        let kind = match &own.kind {
            Claimed::Config => "Config",
            Claimed::Guardrail(kind) => kind,
            Claimed::Integration => "Integration",
        };
        // Named only in the manifest's own namespace (or cluster-scoped beside a cluster-scoped
        // one): another namespace's resource is another tenant's, not the author's to learn.
        let who = match (&other.namespace, own.namespace) {
            (Some(ns), Some(mine)) if ns == mine => format!("{kind} {ns}/{}", other.name),
            (None, None) => format!("{kind} {}", other.name),
            _ => "another resource on this Connection (not in this namespace)".to_string(),
        };
        let reason = format!(
            "the remote object is managed by {who}; the operator makes no API call for this one while it is (AlreadyManaged), and the plan shows nothing of it"
        );
        return Some(entry(
            Action::Conflict,
            Some(key.to_string()),
            Vec::new(),
            Some(reason),
        ));
    }
    for claimant in &claimants {
        claimant.mask(masking, Some(&live.client), prefix).await;
    }
    None
}

/// The live resources that record or name the remote object `key`; `None` when the cluster
/// cannot be listed.
async fn claimants(live: &Live, kind: &Claimed, key: &str) -> Option<Vec<LiveRecord>> {
    let kube = &live.client;
    let mut all = match kind {
        Claimed::Config => live_records::<Config>(kube, "Configs").await.ok()?,
        Claimed::Guardrail(_) => live_records::<Guardrail>(kube, "Guardrails").await.ok()?,
        Claimed::Integration => live_records::<Integration>(kube, "Integrations")
            .await
            .ok()?,
    };
    if let Claimed::Guardrail(_) = kind {
        let cluster = live_records::<ClusterGuardrail>(kube, "ClusterGuardrails").await;
        all.extend(cluster.ok()?);
    }
    all.retain(|record| record.claims(key));
    Some(all)
}
