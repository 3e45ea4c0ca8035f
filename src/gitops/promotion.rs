//! `aigw plan`'s view of the promotion gate (`spec.promotion`): a write the operator's gate
//! would hold now is planned as `gated`, with the gate's own message. With `--kubeconfig` the
//! sources' status is read (GET, nothing written) and judged by the operator's rule
//! ([`crate::resources::promotion`]), following another namespace is checked against the
//! grants of the Connection the manifest names (the operator's own rule,
//! [`crate::controller::state::connections::scope_of`]), and the live object tells a change from a
//! drift correction; without it, the plan says what the write waits for. Plan reads a source
//! wherever it is; the operator sees only the namespaces it watches (`--namespace`) and the
//! cluster-scoped objects its `--cluster-selector` selects, and holds a change whose source is
//! outside them (`SourceNotReady`).

use kube::api::ObjectMeta;

use super::GitopsError;
use super::plan::Live;
use super::validate::Object;
use crate::controller::driver::Managed;
use crate::controller::driver::promotion::state_of;
use crate::controller::driver::status::CommonStatus;
use crate::resources::common::REVISION_ANNOTATION;
use crate::resources::promotion::{Promotion, Source, Verdict, judge, promote_now, revision_of};
use crate::resources::{ClusterGuardrail, Config, Guardrail};

/// Why `object` cannot be applied at all when its `spec.promotion` follows the object itself
/// (in its namespace: the manifest's, else the kubeconfig context's with `live`): admission
/// refuses every create, and every update that changes the spec (an object stored before the
/// policy, applied with its spec unchanged, passes). `None` when it does not, or when the
/// namespace it will be applied into is not known.
pub async fn follows_itself(
    live: Option<&Live>,
    object: &Object,
) -> Result<Option<String>, GitopsError> {
    let Some((meta, promotion)) = object.promotion() else {
        return Ok(None);
    };
    let own = (meta.namespace.as_deref()).or(live.map(|l| l.default_namespace.as_str()));
    let Some(field) = promotion.and_then(|p| p.names_itself(own, object.name())) else {
        return Ok(None);
    };
    if let Some(live) = live
        && read_itself(live, object).await?.same_spec
    {
        return Ok(None);
    }
    Ok(Some(format!(
        "{field} names this {} itself: admission refuses it",
        object.kind()
    )))
}

/// Why the operator's promotion gate would hold a write of `object` now (`create`: a POST);
/// `None` when it would let it through (or the object has no `spec.promotion`). As in the
/// operator, the first create is never gated, nor a write that restores the spec the live
/// object already applied (a drift correction); creating a remote object again is.
pub async fn held(
    live: Option<&Live>,
    object: &Object,
    create: bool,
) -> Result<Option<String>, GitopsError> {
    let Some((meta, Some(promotion))) = object.promotion() else {
        return Ok(None);
    };
    if let Some(live) = live {
        let itself = read_itself(live, object).await?;
        if create && !itself.wrote_before {
            return Ok(None);
        }
        if itself.spec_applied {
            return Ok(None);
        }
    } else if create {
        return Ok(None);
    }
    let Some(revision) = revision_of(meta) else {
        return Ok(Some(format!(
            "spec.promotion needs the {REVISION_ANNOTATION} annotation: the operator would stall (RevisionMissing) and write nothing"
        )));
    };
    if let Some(live) = live
        && let Some(refused) = refused_source(live, object, meta, promotion).await?
    {
        return Ok(Some(refused));
    }
    // What the operator refuses whatever aigw.io/promote-now says.
    let soak = match promotion.soak() {
        Ok(soak) => soak,
        Err(why) => return Ok(Some(format!("invalid spec: {why} (InvalidSpec)"))),
    };
    if promote_now(meta) == Some(revision) {
        return Ok(None);
    }
    let Some(live) = live else {
        return Ok(Some(format!(
            "written only once {} have been Ready at revision {revision} for {} (spec.promotion; with --kubeconfig, plan reads whether they have)",
            names(object, meta, promotion, None).join(", "),
            promotion.soak
        )));
    };
    let verdict = match object {
        Object::Config(_) => {
            judge_sources::<Config>(live, object, meta, promotion, revision, soak).await?
        }
        Object::Guardrail(_) => {
            judge_sources::<Guardrail>(live, object, meta, promotion, revision, soak).await?
        }
        _ => {
            judge_sources::<ClusterGuardrail>(live, object, meta, promotion, revision, soak).await?
        }
    };
    Ok(match verdict {
        Verdict::Open { .. } => None,
        held => Some(format!("{} ({})", held.message(), held.reason())),
    })
}

/// The operator's verdict on `revision`, its sources (of kind `K`) read from the cluster.
async fn judge_sources<K: Managed>(
    live: &Live,
    object: &Object,
    meta: &ObjectMeta,
    promotion: &Promotion,
    revision: &str,
    soak: std::time::Duration,
) -> Result<Verdict, GitopsError> {
    let own = meta
        .namespace
        .clone()
        .unwrap_or_else(|| live.default_namespace.clone());
    let shown = names(object, meta, promotion, Some(&own));
    let mut read = Vec::new();
    for ((_, namespace, name), shown) in promotion.sources(Some(&own)).zip(shown) {
        let found = live_object::<K>(live, namespace.unwrap_or(&own), name, &shown).await?;
        read.push((shown, found));
    }
    let sources: Vec<Source<'_>> = read
        .iter()
        .map(|(name, found)| Source {
            name: name.clone(),
            state: found.as_ref().map(state_of),
        })
        .collect();
    Ok(judge(revision, soak, &sources, jiff::Timestamp::now()))
}

/// The live `K` named `name` (in `namespace` when the kind is namespaced); `shown` names it in
/// an error.
async fn live_object<K: Managed>(
    live: &Live,
    namespace: &str,
    name: &str,
    shown: &str,
) -> Result<Option<K>, GitopsError> {
    K::api(&live.client, Some(namespace))
        .get_opt(name)
        .await
        .map_err(|e| GitopsError::kube(format!("failed to read {shown}"), e))
}

/// What the live object of the manifest shows the gate.
#[derive(Default)]
struct Itself {
    /// The live object's spec is the manifest's: applying it changes no spec.
    same_spec: bool,
    /// It wrote its remote object before (`status.history` lists it).
    wrote_before: bool,
    /// Its spec is the manifest's, and it applied it at its current generation: a write now
    /// restores that spec (a drift correction), which the gate never holds.
    spec_applied: bool,
}

async fn read_itself(live: &Live, object: &Object) -> Result<Itself, GitopsError> {
    let namespace = object.namespace().unwrap_or(&live.default_namespace);
    let (name, shown) = (object.name(), object.display());
    Ok(match object {
        Object::Config(manifest) => itself(
            live_object(live, namespace, name, &shown).await?,
            &**manifest,
        ),
        Object::Guardrail(manifest) => itself(
            live_object(live, namespace, name, &shown).await?,
            &**manifest,
        ),
        Object::ClusterGuardrail(manifest) => itself(
            live_object(live, namespace, name, &shown).await?,
            &**manifest,
        ),
        _ => Itself::default(),
    })
}

/// [`Itself`] from the live object (`None`: not in the cluster) and the manifest.
fn itself<K: Managed>(live: Option<K>, manifest: &K) -> Itself {
    let spec = |o: &K| serde_json::to_value(o).ok().map(|v| v["spec"].clone());
    let same_spec = live.as_ref().is_some_and(|l| spec(l) == spec(manifest));
    let Some((live, status)) = live.as_ref().and_then(|o| Some((o, o.status()?))) else {
        return Itself {
            same_spec,
            ..Itself::default()
        };
    };
    Itself {
        same_spec,
        wrote_before: !K::history(status).is_empty(),
        spec_applied: same_spec
            && crate::controller::spec_already_applied(
                live.meta().generation,
                status.observed_generation(),
                status.conditions(),
            ),
    }
}

/// Why the operator would refuse following a source of another namespace: by the grants of the
/// Connection the manifest names, as the operator decides; for `default` when no such
/// Connection exists, by the command's `--grants-file` (the operator's flags). `None` when
/// nothing is refused or no grants are known.
async fn refused_source(
    live: &Live,
    object: &Object,
    meta: &ObjectMeta,
    promotion: &Promotion,
) -> Result<Option<String>, GitopsError> {
    let connection = match object {
        Object::Config(o) => o.spec.connection_name(),
        Object::Guardrail(o) => o.spec.definition.connection_name(),
        // Cluster-scoped: grants do not limit it.
        _ => return Ok(None),
    };
    let own = meta
        .namespace
        .clone()
        .unwrap_or_else(|| live.default_namespace.clone());
    let others: Vec<_> = promotion
        .sources(Some(&own))
        .filter(|(_, namespace, _)| *namespace != Some(own.as_str()))
        .collect();
    if others.is_empty() {
        return Ok(None);
    }
    let scope = match super::plan_claims::grants_scope(live, connection, &own).await? {
        None => return Ok(None),
        Some(Ok(scope)) => scope,
        Some(Err(refused)) => return Ok(Some(refused)),
    };
    for (field, namespace, _) in others {
        if let Some(namespace) = namespace
            && let Err(e) = scope.check_promote_from(&field, &own, namespace)
        {
            return Ok(Some(super::plan_claims::refusal(e)));
        }
    }
    Ok(None)
}

/// How each source is named in messages, with the namespace it is read from.
fn names(
    object: &Object,
    meta: &ObjectMeta,
    promotion: &Promotion,
    default_namespace: Option<&str>,
) -> Vec<String> {
    let own = meta.namespace.as_deref().or(default_namespace);
    promotion
        .sources(own)
        .map(|(_, namespace, name)| match namespace {
            Some(namespace) if !matches!(object, Object::ClusterGuardrail(_)) => {
                format!("{} {namespace}/{name}", object.kind())
            }
            _ => format!("{} {name}", object.kind()),
        })
        .collect()
}
