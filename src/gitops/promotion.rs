//! `aigw plan`'s view of the promotion gate (`spec.promotion`): a write the operator's gate
//! would hold now is planned as `gated`, with the gate's own message. With `--kubeconfig` the
//! sources' status is read (GET, nothing written) and judged by the operator's rule
//! ([`crate::resources::promotion`]), following another namespace is checked against the
//! grants of the Connection the manifest names (the operator's own rule,
//! [`crate::controller::connections::scope_of`]), and the live object tells a change from a
//! drift correction; without it, the plan says what the write waits for. Plan reads a source
//! wherever it is; the operator sees only the namespaces it watches (`--namespace`) and the
//! cluster-scoped objects its `--cluster-selector` selects, and holds a change whose source is
//! outside them (`SourceNotReady`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::ObjectMeta;

use super::GitopsError;
use super::plan::Live;
use super::validate::Object;
use crate::controller::connections::scope_of;
use crate::resources::Connection;
use crate::resources::common::REVISION_ANNOTATION;
use crate::resources::config::AppliedVersion;
use crate::resources::promotion::{
    Promotion, RevisionOrder, Source, SourceState, Verdict, judge, promote_now, revision_of,
};
use crate::resources::{ClusterGuardrail, Config, Guardrail};

/// Why the operator's promotion gate would hold a write of `object` now (`create`: a POST);
/// `None` when it would let it through (or the object has no `spec.promotion`). As in the
/// operator, the first create is never gated, nor a write that restores the spec the live
/// object already applied (a drift correction); creating a remote object again is.
pub async fn held(
    live: Option<&Live>,
    object: &Object,
    create: bool,
) -> Result<Option<String>, GitopsError> {
    let (meta, promotion) = match object {
        Object::Config(o) => (&o.metadata, o.spec.promotion.as_ref()),
        Object::Guardrail(o) => (&o.metadata, o.spec.definition.promotion.as_ref()),
        Object::ClusterGuardrail(o) => (&o.metadata, o.spec.definition.promotion.as_ref()),
        _ => return Ok(None),
    };
    let Some(promotion) = promotion else {
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
    let own = meta
        .namespace
        .as_deref()
        .or(live.map(|l| l.default_namespace.as_str()));
    let itself = promotion
        .sources(own)
        .find(|(_, namespace, name)| *namespace == own && *name == object.name());
    if let Some((field, _, _)) = itself {
        return Ok(Some(format!(
            "invalid spec: {field} names this {} itself (InvalidSpec)",
            object.kind()
        )));
    }
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
    let sources = read_sources(live, object, meta, promotion).await?;
    let sources: Vec<Source<'_>> = sources
        .iter()
        .map(|(name, read)| Source {
            name: name.clone(),
            state: read.as_ref().map(Read::state),
        })
        .collect();
    Ok(
        match judge(revision, soak, &sources, jiff::Timestamp::now()) {
            Verdict::Open { .. } => None,
            held => Some(format!("{} ({})", held.message(), held.reason())),
        },
    )
}

/// What the live object of the manifest shows the gate.
#[derive(Default)]
struct Itself {
    /// It wrote its remote object before (`status.history` lists it).
    wrote_before: bool,
    /// Its spec is the manifest's, and it applied it at its current generation: a write now
    /// restores that spec (a drift correction), which the gate never holds.
    spec_applied: bool,
}

async fn read_itself(live: &Live, object: &Object) -> Result<Itself, GitopsError> {
    let namespace = object.namespace().unwrap_or(&live.default_namespace);
    let name = object.name();
    let failed = |e| GitopsError::kube(format!("failed to read {}", object.display()), e);
    let itself = match object {
        Object::Config(manifest) => kube::Api::<Config>::namespaced(live.client.clone(), namespace)
            .get_opt(name)
            .await
            .map_err(failed)?
            .map(|o| {
                let spec =
                    serde_json::to_value(&o.spec).ok() == serde_json::to_value(&manifest.spec).ok();
                itself(
                    &o.metadata,
                    o.status.as_ref().map(|s| {
                        (
                            s.observed_generation,
                            &s.conditions[..],
                            !s.history.is_empty(),
                        )
                    }),
                    spec,
                )
            }),
        Object::Guardrail(manifest) => {
            kube::Api::<Guardrail>::namespaced(live.client.clone(), namespace)
                .get_opt(name)
                .await
                .map_err(failed)?
                .map(|o| {
                    let spec = serde_json::to_value(&o.spec).ok()
                        == serde_json::to_value(&manifest.spec).ok();
                    itself(
                        &o.metadata,
                        o.status.as_ref().map(|s| {
                            (
                                s.observed_generation,
                                &s.conditions[..],
                                !s.history.is_empty(),
                            )
                        }),
                        spec,
                    )
                })
        }
        Object::ClusterGuardrail(manifest) => {
            kube::Api::<ClusterGuardrail>::all(live.client.clone())
                .get_opt(name)
                .await
                .map_err(failed)?
                .map(|o| {
                    let spec = serde_json::to_value(&o.spec).ok()
                        == serde_json::to_value(&manifest.spec).ok();
                    itself(
                        &o.metadata,
                        o.status.as_ref().map(|s| {
                            (
                                s.observed_generation,
                                &s.conditions[..],
                                !s.history.is_empty(),
                            )
                        }),
                        spec,
                    )
                })
        }
        _ => None,
    };
    Ok(itself.unwrap_or_default())
}

/// [`Itself`] from a live object's metadata, status parts (observed generation, conditions,
/// whether `history` lists anything) and whether its spec is the manifest's.
fn itself(
    meta: &ObjectMeta,
    status: Option<(
        Option<i64>,
        &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
        bool,
    )>,
    same_spec: bool,
) -> Itself {
    let Some((observed_generation, conditions, wrote_before)) = status else {
        return Itself::default();
    };
    Itself {
        wrote_before,
        spec_applied: same_spec
            && crate::controller::spec_already_applied(
                meta.generation,
                observed_generation,
                conditions,
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
            .get_metadata_opt(&own)
            .await
            .map_err(failed(format!("namespace {own}")))?
            .and_then(|ns| ns.metadata.labels)
            .unwrap_or_default(),
        false => BTreeMap::new(),
    };
    let refusal = |e: crate::controller::error::Error| {
        format!("{} ({}): the operator would refuse it", e, e.category())
    };
    let scope = match scope_of(connection, grants, &own, &labels) {
        Ok(scope) => scope,
        Err(e) => return Ok(Some(refusal(e))),
    };
    for (field, namespace, _) in others {
        if let Some(namespace) = namespace
            && let Err(e) = scope.check_promote_from(&field, &own, namespace)
        {
            return Ok(Some(refusal(e)));
        }
    }
    Ok(None)
}

/// What a source's live object shows: its metadata and the parts of its status the rule reads.
struct Read {
    meta: ObjectMeta,
    observed_generation: Option<i64>,
    conditions: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>,
    history: Vec<AppliedVersion>,
    order: RevisionOrder,
}

impl Read {
    fn state(&self) -> SourceState<'_> {
        SourceState {
            meta: &self.meta,
            observed_generation: self.observed_generation,
            conditions: &self.conditions,
            history: &self.history,
            order: Some(&self.order),
        }
    }
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

/// Each source, named, with its live object (`None`: not in the cluster).
async fn read_sources(
    live: &Live,
    object: &Object,
    meta: &ObjectMeta,
    promotion: &Promotion,
) -> Result<Vec<(String, Option<Read>)>, GitopsError> {
    let own = meta
        .namespace
        .clone()
        .unwrap_or_else(|| live.default_namespace.clone());
    let shown = names(object, meta, promotion, Some(&own));
    let mut sources = Vec::new();
    for ((_, namespace, name), shown) in promotion.sources(Some(&own)).zip(shown) {
        let namespace = namespace.unwrap_or(&own);
        let failed = |e| GitopsError::kube(format!("failed to read {shown}"), e);
        let read = match object {
            Object::Config(_) => kube::Api::<Config>::namespaced(live.client.clone(), namespace)
                .get_opt(name)
                .await
                .map_err(failed)?
                .map(|c| {
                    read(
                        c.metadata,
                        c.status.map(|s| {
                            (
                                s.observed_generation,
                                s.conditions,
                                s.history,
                                s.revision_order,
                            )
                        }),
                    )
                }),
            Object::Guardrail(_) => {
                kube::Api::<Guardrail>::namespaced(live.client.clone(), namespace)
                    .get_opt(name)
                    .await
                    .map_err(failed)?
                    .map(|g| {
                        read(
                            g.metadata,
                            g.status.map(|s| {
                                (
                                    s.observed_generation,
                                    s.conditions,
                                    s.history,
                                    s.revision_order,
                                )
                            }),
                        )
                    })
            }
            _ => kube::Api::<ClusterGuardrail>::all(live.client.clone())
                .get_opt(name)
                .await
                .map_err(failed)?
                .map(|g| {
                    read(
                        g.metadata,
                        g.status.map(|s| {
                            (
                                s.observed_generation,
                                s.conditions,
                                s.history,
                                s.revision_order,
                            )
                        }),
                    )
                }),
        };
        sources.push((shown, read));
    }
    Ok(sources)
}

type StatusParts = (
    Option<i64>,
    Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>,
    Vec<AppliedVersion>,
    RevisionOrder,
);

fn read(meta: ObjectMeta, status: Option<StatusParts>) -> Read {
    let (observed_generation, conditions, history, order) = status.unwrap_or_default();
    Read {
        meta,
        observed_generation,
        conditions,
        history,
        order,
    }
}
