//! `aigw plan`'s view of the promotion gate (`spec.promotion`): a write the operator's gate
//! would hold now is planned as `gated`, with the gate's own message. With `--kubeconfig` the
//! sources' status is read (GET, nothing written) and judged by the operator's rule
//! ([`crate::resources::promotion`]); without it, the plan says what the write waits for.

use kube::api::ObjectMeta;

use super::GitopsError;
use super::plan::Live;
use super::validate::Object;
use crate::resources::common::REVISION_ANNOTATION;
use crate::resources::config::AppliedVersion;
use crate::resources::promotion::{
    Promotion, RevisionOrder, Source, SourceState, Verdict, judge, promote_now, revision_of,
};
use crate::resources::{ClusterGuardrail, Config, Guardrail};

/// Why the operator's promotion gate would hold a write of `object` now; `None` when it would
/// let it through (or the object has no `spec.promotion`). Only for updates: creating a remote
/// object is never gated.
pub async fn held(live: Option<&Live>, object: &Object) -> Result<Option<String>, GitopsError> {
    let (meta, promotion) = match object {
        Object::Config(o) => (&o.metadata, o.spec.promotion.as_ref()),
        Object::Guardrail(o) => (&o.metadata, o.spec.definition.promotion.as_ref()),
        Object::ClusterGuardrail(o) => (&o.metadata, o.spec.definition.promotion.as_ref()),
        _ => return Ok(None),
    };
    let Some(promotion) = promotion else {
        return Ok(None);
    };
    let Some(revision) = revision_of(meta) else {
        return Ok(Some(format!(
            "spec.promotion needs the {REVISION_ANNOTATION} annotation: the operator would stall (RevisionMissing) and write nothing"
        )));
    };
    if promote_now(meta) == Some(revision) {
        return Ok(None);
    }
    let soak = match promotion.soak() {
        Ok(soak) => soak,
        Err(why) => return Ok(Some(format!("invalid spec: {why}"))),
    };
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
