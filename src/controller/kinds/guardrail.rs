//! Guardrail (a workspace guardrail) and ClusterGuardrail (an organisation guardrail, on the
//! admin plane): the verbs of both kinds ([`Verbs`]), which differ only in their plane, their
//! scope and where their Secrets are. The driver observes by slug (or id), PUTs name, checks
//! and actions only when they differ by meaning or a Secret value changed (every PUT mints a
//! version), creates through the shared protocol, and deletes per `deletionPolicy` once no
//! Config names the guardrail.
//!
//! The API answers 403 (not 404) for a guardrail that does not exist (FACTS §6), and a 403 may
//! also be a refusal: such an answer counts as "gone" only when a complete listing of the
//! guardrails shows no guardrail with that id or slug.

use kube::ResourceExt;

use crate::api::{
    ApiError, Client, GuardrailDetails, GuardrailSummary, GuardrailWritten, GuardrailsOn, Listing,
    Reading,
};
use crate::controller::Context;
use crate::controller::driver::calls::{
    Deleting, Own, OwnCalls, Post, Put, Read, Recovered, RemoteKey,
};
use crate::controller::driver::create::{Created, Lookup, one_unmarked, sent_or};
use crate::controller::driver::drift::{Listed, Row};
use crate::controller::driver::referenced::{qualified, users};
use crate::controller::driver::verbs::{
    Changes, Comparison, Differing, Inputs, Verbs, still_referenced,
};
use crate::controller::driver::{Cx, Managed};
use crate::controller::error::{Error, Halt};
use crate::controller::kinds::config_refs::{self, Desired, ReadsSecrets, conceal_before_delete};
use crate::controller::kinds::keyed;
use crate::controller::now_rfc3339;
use crate::controller::state::claims::refused_by_grants;
use crate::controller::state::triggers::Triggers;
use crate::resources::common::{CreateAttempt, DriftCorrection};
use crate::resources::config::{AppliedHistory, Config, ConfigSecretRef};
use crate::resources::guardrail::{ClusterGuardrail, Guardrail, GuardrailKind, GuardrailStatus};

mod mcp_servers;

/// What the flow needs of a guardrail kind.
pub trait GuardrailObject:
    GuardrailKind + Managed<Status = GuardrailStatus> + ReadsSecrets
{
}
impl<G: GuardrailKind + Managed<Status = GuardrailStatus> + ReadsSecrets> GuardrailObject for G {}

/// `Managed`, `Listed` and `ReadsSecrets` of a guardrail kind, all through the one flow below.
macro_rules! guardrail_kind {
    ($kind:ident, $api:ident) => {
        impl ReadsSecrets for $kind {
            fn secret_refs(&self) -> std::borrow::Cow<'_, [ConfigSecretRef]> {
                std::borrow::Cow::Borrowed(&self.definition().secret_refs)
            }
        }

        impl Managed for $kind {
            crate::controller::driver::kind::$api!();
            const KIND: &'static str = stringify!($kind);
            const LISTED: bool = true;

            crate::controller::driver::flow::driven!();

            async fn inputs_unchanged(&self, cx: &Cx<'_, Self>, status: &GuardrailStatus) -> bool {
                config_refs::secrets_unchanged(self, cx.ctx, status.secret_hash.as_deref()).await
            }

            crate::controller::driver::kind::promotes!(|guardrail| guardrail
                .definition()
                .promotion);

            /// Its MCP server mappings do not show in the guardrails' list.
            fn listed_whole(&self) -> bool {
                self.definition().mcp_servers.is_none()
            }
        }

        impl Verbs for $kind {
            type Desired = Option<Desired>;
            type Calls = Own;
            const RECORDS_DRIFT: bool = true;
            /// Observe reads no Secret.
            const UNREAD_INPUTS: Option<Option<Desired>> = Some(None);

            async fn resolve(&self, cx: &Cx<'_, Self>, _: &mut GuardrailStatus) -> Inputs<Self> {
                Ok(Some(resolve(self, cx).await?))
            }
            fn refuses(remote: &GuardrailDetails) -> Option<String> {
                Self::other_kind(remote)
            }
            async fn before_delete(&self, cx: &Cx<'_, Self>, key: &str) -> Result<(), Halt> {
                unreferenced(self, cx, key).await
            }
            fn record(status: &mut GuardrailStatus, remote: Option<&GuardrailDetails>) {
                record(status, remote)
            }
            fn record_created(
                &self,
                status: &mut GuardrailStatus,
                desired: &Option<Desired>,
                created: $crate::controller::driver::verbs::Made<Self>,
            ) -> String {
                record_created(self, status, desired.as_ref(), created)
            }
            fn record_updated(
                &self,
                status: &mut GuardrailStatus,
                desired: &Option<Desired>,
                remote: &GuardrailDetails,
                updated: GuardrailWritten,
            ) {
                status.secret_hash = desired.as_ref().and_then(|d| d.secret_hash.clone());
                status.version_id = updated.version_id.or(remote.version_id.clone());
                status.record_applied_now(
                    kube::Resource::meta(self),
                    now_rfc3339(),
                    &self.definition().secret_refs,
                );
            }
            fn replaced(
                &self,
                desired: &Option<Desired>,
                remote: &GuardrailDetails,
                _comparison: &Comparison,
                at: String,
            ) -> DriftCorrection {
                let concealed: Vec<&str> =
                    desired.iter().flat_map(Desired::secret_values).collect();
                self.definition().drift_against(remote, at, &concealed)
            }
            /// The MCP servers it applies to (`spec.mcpServers`), the complete set.
            async fn sync_sub_resources(
                &self,
                cx: &Cx<'_, Self>,
                status: &mut GuardrailStatus,
            ) -> Changes {
                mcp_servers::sync(self, cx, status).await
            }
            async fn sub_resources_differ(
                &self,
                cx: &Cx<'_, Self>,
                status: &GuardrailStatus,
            ) -> Differing {
                mcp_servers::differ(self, cx, status).await
            }
            fn record_drift(status: &mut GuardrailStatus, replaced: DriftCorrection) {
                status.last_drift_correction = Some(Box::new(replaced));
            }
        }

        impl OwnCalls for $kind {
            type Remote = GuardrailDetails;
            type Found = GuardrailSummary;
            type Posted = GuardrailWritten;
            type Updated = GuardrailWritten;
            async fn observe(
                &self,
                client: &Client,
                key: &str,
                status: &GuardrailStatus,
            ) -> Read<Self> {
                observe(self, client, key, status).await
            }
            fn sent(&self, cx: &Cx<'_, Self>, desired: &Option<Desired>) -> CreateAttempt {
                sent(self, cx, desired.as_ref())
            }
            async fn create(&self, client: &Client, desired: &Option<Desired>) -> Post<Self> {
                let request = create_request(self, desired.as_ref());
                plane::<Self>(client).create(&request).await
            }
            fn compare(
                &self,
                desired: &Option<Desired>,
                remote: &GuardrailDetails,
                status: &GuardrailStatus,
            ) -> Comparison {
                compare(self, desired.as_ref(), remote, status)
            }
            async fn update(
                &self,
                client: &Client,
                desired: &Option<Desired>,
                remote: &GuardrailDetails,
            ) -> Put<Self> {
                let document = desired
                    .as_ref()
                    .map(Desired::request_document)
                    .unwrap_or_default();
                let request = self.definition().update_request_with(&document);
                plane::<Self>(client).update(&remote.key(), &request).await
            }
            async fn delete(&self, at: Deleting<'_, Self>) -> Result<(), ApiError> {
                conceal_before_delete(self, self.definition(), at.cx).await;
                delete(self, at.client, at.key, at.status).await
            }
            async fn find_created(
                &self,
                cx: &Cx<'_, Self>,
                status: &GuardrailStatus,
            ) -> Recovered<Self> {
                find_created(self, cx, status).await
            }
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

guardrail_kind!(Guardrail, namespaced_api);
guardrail_kind!(ClusterGuardrail, cluster_api);

fn plane<G: GuardrailKind>(client: &Client) -> GuardrailsOn<'_> {
    client.guardrails_on(G::PLANE)
}

/// The Secret values the guardrail's document substitutes, concealed from every message.
async fn resolve<G: GuardrailObject>(guardrail: &G, cx: &Cx<'_, G>) -> Result<Desired, Error> {
    let desired = Desired::read(guardrail, guardrail.definition(), cx.ctx).await?;
    for value in desired.secret_values() {
        cx.conceal(value);
    }
    Ok(desired)
}

/// Fixed fields, and the fields that differ by meaning; `secretRefs` when a Secret value
/// changed (an input, not an outside edit). Without Secret values (Observe) only the spec's.
fn compare<G: GuardrailObject>(
    guardrail: &G,
    desired: Option<&Desired>,
    remote: &GuardrailDetails,
    status: &GuardrailStatus,
) -> Comparison {
    let spec = guardrail.definition();
    let mut differs = spec.diff(remote);
    let mut inputs = Vec::new();
    if desired.is_some_and(|d| d.secret_hash != status.secret_hash) {
        differs.push("secretRefs");
        inputs.push("secretRefs");
    }
    Comparison {
        immutable: spec.immutable_conflicts(remote, guardrail.workspace_id()),
        differs,
        inputs,
    }
}

/// The create body: the definition with its Secret values filled in.
fn create_request<G: GuardrailObject>(
    guardrail: &G,
    desired: Option<&Desired>,
) -> crate::api::CreateGuardrailRequest {
    let document = desired.map(Desired::request_document).unwrap_or_default();
    guardrail
        .definition()
        .create_request_with(&document, guardrail.workspace_id())
}

/// What the create sends, for its intent.
fn sent<G: GuardrailObject>(
    guardrail: &G,
    cx: &Cx<'_, G>,
    desired: Option<&Desired>,
) -> CreateAttempt {
    let request = create_request(guardrail, desired);
    cx.create_attempt(
        Some(guardrail.definition().name.clone()),
        guardrail.workspace_id().map(str::to_string),
        &request,
    )
}

/// Records what a create made: the answer, or what the lookup found after a lost answer.
fn record_created<G: GuardrailObject>(
    guardrail: &G,
    status: &mut GuardrailStatus,
    desired: Option<&Desired>,
    created: Created<GuardrailWritten, GuardrailSummary>,
) -> String {
    match created {
        Created::Posted(created) => {
            status.id = Some(created.id.clone());
            status.slug = Some(created.slug.clone()).filter(|s| !s.is_empty());
            status.version_id = created.version_id.clone();
            status.secret_hash = desired.and_then(|d| d.secret_hash.clone());
            status.record_applied_now(
                guardrail.meta(),
                now_rfc3339(),
                &guardrail.definition().secret_refs,
            );
            status.slug.clone().unwrap_or(created.id)
        }
        Created::Recovered(found) => keyed::record_recovered_version(status, &found),
    }
}

/// Refuses the deletion while a Config names the guardrail.
async fn unreferenced<G: GuardrailObject + Verbs>(
    guardrail: &G,
    cx: &Cx<'_, G>,
    key: &str,
) -> Result<(), Halt> {
    let users = referencing_configs(guardrail, cx.ctx).await?;
    let until = "no Config names it";
    still_referenced::<G>(key, "named by Config", &users, until)
}

/// DELETEs the guardrail; a 403 that a complete listing confirms counts as "already gone".
async fn delete<G: GuardrailObject>(
    guardrail: &G,
    client: &Client,
    key: &str,
    status: &GuardrailStatus,
) -> Result<(), ApiError> {
    match plane::<G>(client).delete(key).await {
        Err(e) if missing_answer(&e) && absent_from_list(guardrail, client, status).await => Ok(()),
        other => other,
    }
}

async fn list<G: GuardrailKind>(
    client: &Client,
    workspace: Option<String>,
) -> Result<Listing<Row>, ApiError> {
    let listing = plane::<G>(client)
        .listing(workspace.as_deref(), Reading::Once)
        .await?;
    Ok(listing.map(|g| Row::new([g.id, g.slug], g.created_at, g.last_updated_at)))
}

/// The Configs that name the guardrail (from the watch caches: no apiserver read), once every
/// Config cache has listed (an empty cache is not "no Config"): by name for a Guardrail (they
/// are of its namespace), `namespace/name` for a ClusterGuardrail. A Config being deleted still
/// counts until it is gone; one its grants refuse that never managed a config does not (it
/// never used the guardrail remotely, and a tenant cannot pin a cluster's guardrail).
async fn referencing_configs<G: GuardrailKind>(
    guardrail: &G,
    ctx: &Context,
) -> Result<Vec<String>, Halt> {
    let question = "whether a Config names this guardrail";
    let uses = |c: &Config| !refused_by_grants(c) && guardrail.named_by(c);
    let shown = |c: &Config| match guardrail.meta().namespace {
        Some(_) => c.name_any(),
        None => qualified(c),
    };
    users(ctx, question, uses, shown).await
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
    let Ok(listing) = plane::<G>(client)
        .listing(guardrail.workspace_id(), Reading::Proof)
        .await
    else {
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

/// GETs the guardrail `key` names. Gone means 404/`AB08` (the driver's), or a 403 that a
/// complete listing confirms (`Ok(None)`).
async fn observe<G: GuardrailObject>(
    guardrail: &G,
    client: &Client,
    key: &str,
    status: &GuardrailStatus,
) -> Result<Option<GuardrailDetails>, ApiError> {
    match plane::<G>(client).get(key).await {
        Err(e) if missing_answer(&e) && absent_from_list(guardrail, client, status).await => {
            Ok(None)
        }
        result => result.map(Some),
    }
}

/// Records what a read of the guardrail reported (`None`: it is gone).
fn record(status: &mut GuardrailStatus, remote: Option<&GuardrailDetails>) {
    let read = remote.map(|r| (r, [&r.version_id, &r.last_updated_at]));
    keyed::record_version(status, read, false);
}

/// The guardrail an earlier create made: the one of the workspace it was sent to with the name
/// it sent, created within its window, claimed by no other resource, in a complete listing.
async fn find_created<G: GuardrailObject>(
    guardrail: &G,
    cx: &Cx<'_, G>,
    status: &GuardrailStatus,
) -> Result<Lookup<GuardrailSummary>, Halt> {
    let sent = sent_or(
        status,
        Some(guardrail.definition().name.as_str()),
        guardrail.workspace_id(),
    );
    let workspace = sent.workspace_id.as_deref();
    let listing = cx
        .read("list guardrails", |client| async move {
            plane::<G>(client).listing(workspace, Reading::Proof).await
        })
        .await?;
    let own = |g: &GuardrailSummary| G::lists_as_own(g.workspace_id.as_deref());
    one_unmarked(
        cx,
        status,
        (&sent, listing),
        "guardrail",
        |g| g.workspace_id.as_deref(),
        own,
    )
    .await
}

/// Requeues the guardrails a Config names (by resource, or by slug or id in its document)
/// whenever that Config changes or goes, so a guardrail whose deletion waits for its Configs
/// goes as soon as the last one lets go. A Guardrail hears the Configs of its namespace; a
/// ClusterGuardrail those of every watched namespace.
fn watch_referrers<G: GuardrailObject>(triggers: Triggers<'_, G>) -> Triggers<'_, G> {
    // A ClusterGuardrail hears the Configs of every watched namespace.
    let namespace = triggers.namespace.filter(|_| G::NAMESPACED);
    triggers.held_in(namespace, |g: &G, config: &Config| g.named_by(config))
}

/// A guardrail's own triggers: the Secrets it reads, the McpServer resources its
/// `spec.mcpServers` names and the Configs that name it.
pub fn watch_inputs<G: GuardrailObject>(triggers: Triggers<'_, G>) -> Triggers<'_, G> {
    let triggers = config_refs::watch_secrets(triggers);
    watch_referrers(mcp_servers::watch_servers(triggers))
}
