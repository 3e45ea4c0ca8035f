//! Guardrail (a workspace guardrail) and ClusterGuardrail (an organisation guardrail, on the
//! admin plane): one flow for both kinds, which differ only in their plane, their scope and
//! where their Secrets are. Observe by slug (or id), PUT name, checks and actions only when
//! they differ by meaning or a Secret value changed (every PUT mints a version), create through
//! the shared protocol, and delete per `deletionPolicy` once no Config names the guardrail.
//!
//! The API answers 403 (not 404) for a guardrail that does not exist (FACTS §6), and a 403 may
//! also be a refusal: such an answer counts as "gone" only when a complete listing of the
//! guardrails shows no guardrail with that id or slug.

use std::sync::Arc;

use kube::ResourceExt;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::api::{ApiError, Client, GuardrailDetails, GuardrailSummary, GuardrailsOn, Listing};
use crate::controller::Context;
use crate::controller::config_refs::{self, Desired, ReadsSecrets};
use crate::controller::create::{
    Created, Lookup, body_hash, create_once, made_by_unfinished_create, one_of_ours,
};
use crate::controller::drift::{Listed, Row};
use crate::controller::driver::{Change, Cx, Managed, object_key, observed, orphaned, removed};
use crate::controller::error::Error;
use crate::controller::gate::{CACHES_LISTED_WITHIN, Op};
use crate::controller::status::common_status;
use crate::controller::{now_rfc3339, spec_already_applied};
use crate::resources::common::CreateAttempt;
use crate::resources::config::{AppliedHistory, Config, ConfigSecretRef};
use crate::resources::guardrail::{
    ClusterGuardrail, Guardrail, GuardrailDeletionPolicy, GuardrailKind, GuardrailStatus,
};

/// Condition reason while a Config still names the guardrail being deleted.
pub const STILL_REFERENCED: &str = "StillReferenced";

common_status!(
    GuardrailStatus,
    |s| GuardrailStatus {
        last_applied_at: None,
        pending_create: s.pending_create.as_ref().map(|_| String::new()),
        ..s.clone()
    },
    intent_when = |s| s.pending_create.is_some()
);

/// What the flow needs of a guardrail kind.
pub trait GuardrailObject:
    GuardrailKind + Managed<Status = GuardrailStatus> + ReadsSecrets
{
}
impl<G: GuardrailKind + Managed<Status = GuardrailStatus> + ReadsSecrets> GuardrailObject for G {}

/// `Managed`, `Listed` and `ReadsSecrets` of a guardrail kind, all through the one flow below.
macro_rules! guardrail_kind {
    ($kind:ident, $manager:literal, $api:ident) => {
        impl ReadsSecrets for $kind {
            fn secret_refs(&self) -> std::borrow::Cow<'_, [ConfigSecretRef]> {
                std::borrow::Cow::Borrowed(&self.definition().secret_refs)
            }
        }

        impl Managed for $kind {
            crate::controller::driver::kind::$api!();
            type Status = GuardrailStatus;
            const KIND: &'static str = stringify!($kind);
            const MANAGER: &'static str = $manager;
            const LISTED: bool = true;

            fn status(&self) -> Option<&GuardrailStatus> {
                self.status.as_ref()
            }

            fn status_slot(&mut self) -> &mut Option<GuardrailStatus> {
                &mut self.status
            }

            async fn apply(
                &self,
                cx: &Cx<'_, Self>,
                status: &mut GuardrailStatus,
            ) -> Result<Vec<Change>, Error> {
                apply(self, cx, status).await
            }

            async fn inputs_unchanged(&self, cx: &Cx<'_, Self>, status: &GuardrailStatus) -> bool {
                config_refs::secrets_unchanged(self, cx.ctx, status.secret_hash.as_deref()).await
            }

            async fn observe_only(
                &self,
                cx: &Cx<'_, Self>,
                status: &mut GuardrailStatus,
            ) -> Result<Vec<&'static str>, Error> {
                observe_only(self, cx, status).await
            }

            async fn cleanup(&self, cx: &Cx<'_, Self>) -> Result<Vec<Change>, Error> {
                cleanup(self, cx).await
            }

            crate::controller::driver::kind::promotes!(|guardrail| guardrail
                .definition()
                .promotion);
        }

        impl Listed for $kind {
            fn list_workspace(&self) -> Option<String> {
                self.workspace_id().map(str::to_string)
            }

            async fn list(
                client: &Client,
                workspace: Option<String>,
            ) -> Result<Listing<Row>, ApiError> {
                list::<Self>(client, workspace).await
            }
        }
    };
}

guardrail_kind!(Guardrail, "aigw/guardrail", namespaced_api);
guardrail_kind!(ClusterGuardrail, "aigw/clusterguardrail", cluster_api);

fn plane<G: GuardrailKind>(client: &Client) -> GuardrailsOn<'_> {
    client.guardrails_on(G::PLANE)
}

async fn apply<G: GuardrailObject>(
    guardrail: &G,
    cx: &Cx<'_, G>,
    status: &mut GuardrailStatus,
) -> Result<Vec<Change>, Error> {
    let spec = guardrail.definition();
    let desired = Desired::read(guardrail, spec, cx.ctx).await?;
    for value in desired.secret_values() {
        cx.conceal(value);
    }
    let Some(remote) = observe(guardrail, cx, status).await? else {
        return create(guardrail, cx, status, &desired)
            .await
            .map(|c| vec![c]);
    };
    let conflicts = spec.immutable_conflicts(&remote, guardrail.workspace_id());
    if !conflicts.is_empty() {
        return Err(Error::InvalidSpec(format!(
            "remote guardrail {} has a different {} and the API cannot change it; create a new {} instead",
            remote.slug,
            conflicts.join(", "),
            G::KIND
        )));
    }
    let mut differences = spec.diff(&remote);
    if desired.secret_hash != status.secret_hash {
        differences.push("secretRefs");
    }
    if differences.is_empty() {
        return Ok(Vec::new());
    }
    let key = key_of(&remote);
    let concealed: Vec<&str> = desired.secret_values().collect();
    let replaced = spec.drift_against(&remote, now_rfc3339(), &concealed);
    cx.gate.intend(format!(
        "would update guardrail {key} ({}) at {}",
        differences.join(", "),
        replaced.paths()
    ));
    let client = cx.api(Op::Update).await?;
    let updated = plane::<G>(client)
        .update(&key, &spec.update_request_with(&desired.request_document()))
        .await
        .map_err(|e| Error::api(format!("update guardrail {key}"), e))?;
    status.secret_hash = desired.secret_hash;
    status.version_id = updated.version_id.or(remote.version_id);
    status.record_applied_now(
        guardrail.meta(),
        now_rfc3339(),
        &guardrail.definition().secret_refs,
    );
    let fields = differences.join(", ");
    let outside = differences.iter().any(|field| *field != "secretRefs");
    let drift = outside
        && spec_already_applied(
            guardrail.meta().generation,
            status.observed_generation,
            &status.conditions,
        );
    Ok(vec![if drift {
        let paths = replaced.paths();
        status.last_drift_correction = Some(replaced);
        Change::new(
            "DriftCorrected",
            format!(
                "guardrail {key} was changed outside aigw at {paths}; restored it (status.lastDriftCorrection has the values it replaced)"
            ),
        )
    } else {
        Change::new("Updated", format!("updated guardrail {key} ({fields})"))
    }])
}

async fn observe_only<G: GuardrailObject>(
    guardrail: &G,
    cx: &Cx<'_, G>,
    status: &mut GuardrailStatus,
) -> Result<Vec<&'static str>, Error> {
    let spec = guardrail.definition();
    Ok(match observe(guardrail, cx, status).await? {
        Some(remote) => {
            let mut fields = spec.immutable_conflicts(&remote, guardrail.workspace_id());
            fields.extend(spec.diff(&remote));
            fields
        }
        None => Vec::new(),
    })
}

async fn cleanup<G: GuardrailObject>(guardrail: &G, cx: &Cx<'_, G>) -> Result<Vec<Change>, Error> {
    let status = guardrail.guardrail_status().cloned().unwrap_or_default();
    let known = status.slug.clone().or(status.id.clone());
    if guardrail.definition().deletion_policy == GuardrailDeletionPolicy::Orphan {
        return Ok(orphaned(&format!(
            "guardrail {}",
            known.unwrap_or_default()
        )));
    }
    let key = match (known, &status.pending_create) {
        (Some(key), _) => key,
        (None, Some(_)) => {
            let lookup = find_created(guardrail, cx, &status);
            match made_by_unfinished_create(&status, "guardrail", lookup).await? {
                Some(found) => found.slug,
                None => return Ok(Vec::new()),
            }
        }
        (None, None) => return Ok(Vec::new()),
    };
    let users = referencing_configs(guardrail, cx.ctx).await?;
    if !users.is_empty() {
        return Err(Error::not_allowed(
            STILL_REFERENCED,
            format!(
                "guardrail {key} is still named by Config {}; it is deleted once no Config names it (or set deletionPolicy: Orphan)",
                users.join(", ")
            ),
        ));
    }
    let client = cx.api(Op::Delete).await?;
    let result = match plane::<G>(client).delete(&key).await {
        Err(e) if missing_answer(&e) && absent_from_list(guardrail, client, &status).await => {
            Ok(())
        }
        other => other,
    };
    removed("Deleted", "delete", &format!("guardrail {key}"), result)
}

async fn list<G: GuardrailKind>(
    client: &Client,
    workspace: Option<String>,
) -> Result<Listing<Row>, ApiError> {
    let listing = plane::<G>(client).listing(workspace.as_deref()).await?;
    Ok(Listing {
        items: listing
            .items
            .into_iter()
            .map(|g| Row {
                keys: [g.id, g.slug]
                    .into_iter()
                    .filter(|k| !k.is_empty())
                    .collect(),
                created_at: g.created_at,
                updated_at: g.last_updated_at,
            })
            .collect(),
        complete: listing.complete,
    })
}

/// The Configs that name the guardrail (from the watch caches: no apiserver read), once every
/// Config cache has listed (an empty cache is not "no Config"): by name for a Guardrail (they
/// are of its namespace), `namespace/name` for a ClusterGuardrail. A Config being deleted still
/// counts until it is gone; one its grants refuse that never managed a config does not (it
/// never used the guardrail remotely, and a tenant cannot pin a cluster's guardrail).
async fn referencing_configs<G: GuardrailKind>(
    guardrail: &G,
    ctx: &Context,
) -> Result<Vec<String>, Error> {
    let configs = &ctx.stores.configs;
    if !configs
        .listed(ctx.stores_of::<Config>(), CACHES_LISTED_WITHIN)
        .await
    {
        return Err(Error::CachesNotReady(
            "the Config caches have not listed every watched namespace yet, so whether a Config names this guardrail cannot be decided; waiting".into(),
        ));
    }
    let mut users: Vec<String> = configs
        .all()
        .iter()
        .filter(|c| !crate::controller::claims::refused_by_grants(c.as_ref()))
        // Another installation's Config names a guardrail of its own tenant, not this one.
        .filter(|c| !ctx.installation.is_theirs(c.as_ref()))
        .filter(|c| guardrail.named_by(c))
        .map(|c| match guardrail.meta().namespace {
            Some(_) => c.name_any(),
            None => format!("{}/{}", c.namespace().unwrap_or_default(), c.name_any()),
        })
        .collect();
    users.sort();
    Ok(users)
}

/// The key the API addresses the guardrail by: its slug, else its id.
fn key_of(remote: &GuardrailDetails) -> String {
    if remote.slug.is_empty() {
        remote.id.clone()
    } else {
        remote.slug.clone()
    }
}

/// A 403 that may mean "no such guardrail" (FACTS §6): not an OPA denial, not `AB03`.
fn missing_answer(e: &ApiError) -> bool {
    e.http()
        .is_some_and(|h| h.status == 403 && !h.opa_denied && !e.is_not_visible())
}

/// True when a complete listing of the guardrail's workspace shows no guardrail with the id or
/// slug it recorded: only then is a 403 taken for "gone".
async fn absent_from_list<G: GuardrailKind>(
    guardrail: &G,
    client: &Client,
    status: &GuardrailStatus,
) -> bool {
    let Ok(listing) = plane::<G>(client).listing(guardrail.workspace_id()).await else {
        return false;
    };
    let keys: Vec<&str> = [
        status.id.as_deref(),
        status.slug.as_deref(),
        guardrail.definition().slug.as_deref(),
    ]
    .into_iter()
    .flatten()
    .collect();
    listing.complete
        && !listing
            .items
            .iter()
            .any(|g| keys.contains(&g.id.as_str()) || keys.contains(&g.slug.as_str()))
}

/// GETs the guardrail this object adopts or recorded, and records what it reports. Gone means
/// 404/`AB08`, or a 403 that a complete listing confirms; an adopted one that is gone is an
/// error.
async fn observe<G: GuardrailObject>(
    guardrail: &G,
    cx: &Cx<'_, G>,
    status: &mut GuardrailStatus,
) -> Result<Option<GuardrailDetails>, Error> {
    let adopted = guardrail.definition().slug.as_deref();
    let Some(key) = adopted
        .or(status.slug.as_deref())
        .or(status.id.as_deref())
        .map(str::to_string)
    else {
        return Ok(None);
    };
    let client = cx.api(Op::Read).await?;
    let result = plane::<G>(client).get(&key).await;
    let gone = match &result {
        Err(e) if missing_answer(e) => absent_from_list(guardrail, client, status).await,
        _ => false,
    };
    let found = match (gone, adopted) {
        (true, Some(_)) => {
            return Err(Error::MissingState(format!(
                "guardrail {key} named by spec.slug does not exist"
            )));
        }
        (true, None) => None,
        (false, _) => observed(
            &format!("guardrail {key}"),
            adopted.map(|_| "spec.slug"),
            result,
        )?,
    };
    if let Some(remote) = &found {
        of_this_kind::<G>(remote)?;
    }
    if let (Some(remote), Some(_)) = (&found, adopted) {
        cx.gate
            .reach(
                &format!("the workspace of guardrail {key}"),
                remote.workspace_id.as_deref(),
            )
            .await?;
    }
    match &found {
        Some(remote) => {
            status.id = Some(remote.id.clone()).filter(|id| !id.is_empty());
            status.slug = Some(remote.slug.clone()).filter(|s| !s.is_empty());
            status.version_id = remote.version_id.clone();
            status.remote_updated_at = remote.last_updated_at.clone();
        }
        None => {
            status.id = None;
            status.slug = None;
            status.version_id = None;
            status.remote_updated_at = None;
        }
    }
    Ok(found)
}

/// Refuses a remote guardrail of the other kind ([`GuardrailKind::other_kind`]), before
/// anything is recorded or written.
fn of_this_kind<G: GuardrailKind>(remote: &GuardrailDetails) -> Result<(), Error> {
    match G::other_kind(remote) {
        Some(why) => Err(Error::InvalidSpec(why)),
        None => Ok(()),
    }
}

/// Creates the guardrail through the shared protocol (see [`crate::controller::create`]).
async fn create<G: GuardrailObject>(
    guardrail: &G,
    cx: &Cx<'_, G>,
    status: &mut GuardrailStatus,
    desired: &Desired,
) -> Result<Change, Error> {
    let before = status.clone();
    let client = cx.api(Op::Create).await?;
    let spec = guardrail.definition();
    let request = spec.create_request_with(&desired.request_document(), guardrail.workspace_id());
    let sent = CreateAttempt {
        name: Some(spec.name.clone()),
        workspace_id: guardrail.workspace_id().map(str::to_string),
        body_hash: body_hash(&cx.ctx.hash_key, guardrail.meta().uid.as_deref(), &request),
        ended_at: None,
        intent: None,
    };
    let outcome = create_once(
        cx,
        status,
        "guardrail",
        sent,
        find_created(guardrail, cx, &before),
        client,
        async |client| plane::<G>(client).create(&request).await,
    )
    .await?;
    let change = match outcome {
        Created::Posted(created) => {
            status.id = Some(created.id.clone());
            status.slug = Some(created.slug.clone()).filter(|s| !s.is_empty());
            status.version_id = created.version_id.clone();
            status.secret_hash = desired.secret_hash.clone();
            status.record_applied_now(
                guardrail.meta(),
                now_rfc3339(),
                &guardrail.definition().secret_refs,
            );
            let name = status.slug.clone().unwrap_or(created.id);
            Change::new("Created", format!("created guardrail {name}"))
        }
        Created::Recovered(found) => {
            status.id = Some(found.id.clone());
            status.slug = Some(found.slug.clone()).filter(|s| !s.is_empty());
            // A version this resource published, whose spec is not known (no generation): it
            // counts as written before, so creating it again waits for the promotion gate.
            status.record_applied(crate::resources::config::AppliedVersion {
                applied_at: now_rfc3339(),
                ..Default::default()
            });
            // What the earlier POST sent may be an older spec: read it and diff, soon.
            cx.ctx.drift.flag(object_key(guardrail));
            Change::new(
                "Created",
                format!(
                    "found guardrail {} from an earlier create whose answer was lost",
                    found.slug
                ),
            )
        }
    };
    Ok(change)
}

/// The guardrail an earlier create made: the one of the workspace it was sent to with the name
/// it sent, created within its window, claimed by no other resource, in a complete listing.
async fn find_created<G: GuardrailObject>(
    guardrail: &G,
    cx: &Cx<'_, G>,
    status: &GuardrailStatus,
) -> Result<Lookup<GuardrailSummary>, Error> {
    let sent = status
        .create_attempt
        .clone()
        .unwrap_or_else(|| CreateAttempt {
            name: Some(guardrail.definition().name.clone()),
            workspace_id: guardrail.workspace_id().map(str::to_string),
            ..Default::default()
        });
    let client = cx.api(Op::Read).await?;
    let listing = plane::<G>(client)
        .listing(sent.workspace_id.as_deref())
        .await
        .map_err(|e| Error::api("list guardrails", e))?;
    one_of_ours(
        cx,
        status,
        &sent,
        listing,
        |g| vec![g.id.as_str(), g.slug.as_str()],
        |g| g.created_at.as_deref(),
        |g| {
            sent.name.as_deref() == Some(g.name.as_str())
                && G::lists_as_own(g.workspace_id.as_deref())
                && (sent.workspace_id.is_none() || g.workspace_id == sent.workspace_id)
        },
        // The API keeps no marker of the create on a guardrail: a match is never proven.
        |g| Some(format!("guardrail {} ({})", g.slug, g.id)),
    )
    .await
}

/// Requeues the guardrails a Config names (by resource, or by slug or id in its document)
/// whenever that Config changes or goes, so a guardrail whose deletion waits for its Configs
/// goes as soon as the last one lets go. A Guardrail hears the Configs of its namespace; a
/// ClusterGuardrail those of every watched namespace.
fn watch_referrers<G: GuardrailObject>(
    controller: Controller<G>,
    ctx: &Context,
    namespace: Option<&str>,
    guardrails: Store<G>,
) -> Controller<G> {
    // A ClusterGuardrail hears the Configs of every watched namespace.
    let namespace = namespace.filter(|_| G::NAMESPACED).map(str::to_string);
    let stream = ctx.relay.subscribe::<Config>(namespace);
    controller.watches_shared_stream(stream, move |config: Arc<Config>| {
        guardrails
            .state()
            .into_iter()
            .filter(|g| g.named_by(&config))
            .map(|g| ObjectRef::from_obj(g.as_ref()))
            .collect::<Vec<_>>()
    })
}

/// A guardrail's own triggers: the Secrets it reads and the Configs that name it.
pub fn watch_inputs<G: GuardrailObject>(
    controller: Controller<G>,
    ctx: &Context,
    namespace: Option<&str>,
    guardrails: Store<G>,
) -> Controller<G> {
    let controller = config_refs::watch_secrets(controller, ctx, namespace, guardrails.clone());
    watch_referrers(controller, ctx, namespace, guardrails)
}
