//! Provider (namespaced): binds an integration into one workspace. The integration is an
//! Integration resource (from the watch cache: it must be Ready and grant the workspace access)
//! or a remote one (`integrationId`); the Connection's grants must allow the namespace to bind
//! it ([`crate::controller::gate::Gate::binding`]). Observe by id (or slug), PUT only the fields
//! that differ, create through the shared protocol, delete once no Config names it.
//!
//! A provider read may carry the upstream key (`key`, `model_config`): the client drops those
//! fields on decode, and only the id and slug of a read are ever recorded. Not a listed kind:
//! the provider list carries no `last_updated_at`, so each reconcile (once per drift interval)
//! reads the provider.

use kube::ResourceExt;
use serde_json::Value;

mod watches;
pub use watches::{watch_binders, watch_inputs};

use crate::api::{Provider as RemoteProvider, ProvidersListQuery};
use crate::controller::config_refs::{Referenced, slug_when_ready};
use crate::controller::create::{
    Created, Lookup, body_hash, create_once, made_by_unfinished_create, one_of_ours,
};
use crate::controller::driver::{Change, Cx, Managed, object_key, observed, orphaned, removed};
use crate::controller::error::Error;
use crate::controller::gate::{CACHES_LISTED_WITHIN, Op, tenant_peers};
use crate::controller::status::common_status;
use crate::controller::{Context, now_rfc3339, spec_already_applied};
use crate::resources::common::CreateAttempt;
use crate::resources::config::{Config, ReferencedKind};
use crate::resources::integration::Integration;
use crate::resources::provider::{Provider, ProviderDeletionPolicy, ProviderStatus};

/// Condition reason while the integration a Provider binds is not ready for it.
pub const INTEGRATION_NOT_READY: &str = "IntegrationNotReady";
/// Condition reason while a Config still names the provider being deleted.
pub const STILL_REFERENCED: &str = "StillReferenced";

common_status!(
    ProviderStatus,
    |s| ProviderStatus {
        last_applied_at: None,
        pending_create: s.pending_create.as_ref().map(|_| String::new()),
        ..s.clone()
    },
    intent_when = |s| s.pending_create.is_some()
);

impl Managed for Provider {
    crate::controller::driver::kind::namespaced_api!();
    type Status = ProviderStatus;
    const KIND: &'static str = "Provider";
    const MANAGER: &'static str = "aigw/provider";

    fn status(&self) -> Option<&ProviderStatus> {
        self.status.as_ref()
    }

    fn status_slot(&mut self) -> &mut Option<ProviderStatus> {
        &mut self.status
    }

    async fn apply(
        &self,
        cx: &Cx<'_, Self>,
        status: &mut ProviderStatus,
    ) -> Result<Vec<Change>, Error> {
        apply(self, cx, status).await
    }

    async fn observe_only(
        &self,
        cx: &Cx<'_, Self>,
        status: &mut ProviderStatus,
    ) -> Result<Vec<&'static str>, Error> {
        let keys = integration_keys(self, cx.ctx, status);
        let Some(remote) = observe(self, cx, status, &keys).await? else {
            return Ok(Vec::new());
        };
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let mut fields = self.spec.immutable_conflicts(&remote, &keys);
        fields.extend(self.spec.update_for(&remote, false).0);
        Ok(fields)
    }

    async fn cleanup(&self, cx: &Cx<'_, Self>) -> Result<Vec<Change>, Error> {
        cleanup(self, cx).await
    }
}

impl Referenced for Provider {
    const REFERENCED_AS: ReferencedKind = ReferencedKind::Provider;
    fn ready_slug(&self) -> Option<String> {
        let s = self.status.as_ref()?;
        slug_when_ready(
            &self.metadata,
            s.slug.as_ref(),
            s.observed_generation,
            &s.conditions,
        )
    }
}

/// The integration a provider binds: the UUID sent as `integration_id`, and what a provider
/// read may name it by (its UUID and slug).
struct Bound {
    id: String,
    keys: Vec<String>,
}

/// What a provider read may name the provider's integration by, without an API call: the UUID
/// and slug the Integration resource (`spec.integration`) recorded, or `spec.integrationId`
/// and the UUID it was resolved to (`status.integrationId`). Never a resource name.
fn integration_keys(provider: &Provider, ctx: &Context, status: &ProviderStatus) -> Vec<String> {
    let spec = &provider.spec;
    let mut keys = Vec::new();
    if let Some(id) = &spec.integration_id {
        keys.push(id.clone());
        keys.extend(status.integration_id.clone());
    } else if let Some(found) = spec
        .integration
        .as_deref()
        .and_then(|name| integration_resource(ctx, name))
    {
        let recorded = found.status.as_ref();
        keys.extend(recorded.and_then(|s| s.id.clone()));
        keys.extend(recorded.and_then(|s| s.slug.clone()));
    }
    keys.retain(|k| !k.is_empty());
    keys.dedup();
    keys
}

fn integration_resource(ctx: &Context, name: &str) -> Option<std::sync::Arc<Integration>> {
    let all = ctx.stores.integrations.all();
    all.into_iter().find(|i| i.name_any() == name)
}

/// The integration the provider binds, once it can be bound here. `spec.integration`: the
/// Integration resource exists, reaches the provider's tenant, is not being deleted, is Ready,
/// and grants the provider's workspace access; the grants may name it by resource name, UUID
/// or slug. `spec.integrationId`: the remote integration it names (a UUID or a slug) is read
/// first, and the grants must name *that* integration, by its UUID or slug: never by a
/// resource name, which could equal another integration's slug.
async fn bound_integration(provider: &Provider, cx: &Cx<'_, Provider>) -> Result<Bound, Error> {
    let spec = &provider.spec;
    match (&spec.integration, &spec.integration_id) {
        (_, Some(given)) => remote_integration(provider, cx, given).await,
        (Some(name), None) => {
            let id = ready_integration(provider, cx.ctx, name)?;
            let mut keys = integration_keys(provider, cx.ctx, &ProviderStatus::default());
            if !keys.contains(&id) {
                keys.insert(0, id.clone());
            }
            let mut granted = vec![name.clone()];
            granted.extend(keys.iter().cloned());
            cx.gate.binding("spec.integration", &granted).await?;
            Ok(Bound { id, keys })
        }
        (None, None) => Err(Error::InvalidSpec(
            "set spec.integration or spec.integrationId".into(),
        )),
    }
}

/// The remote integration `spec.integrationId` names (by UUID or slug), read through the gate,
/// once the grants name it by its UUID or slug.
async fn remote_integration(
    provider: &Provider,
    cx: &Cx<'_, Provider>,
    given: &str,
) -> Result<Bound, Error> {
    const FIELD: &str = "spec.integrationId";
    let read = cx.api(Op::Read).await?.integrations().get(given).await;
    match read {
        Ok(found) => {
            let id = match found.id.is_empty() {
                true => given.to_string(),
                false => found.id.clone(),
            };
            let mut keys = vec![id.clone()];
            if !found.slug.is_empty() && found.slug != id {
                keys.push(found.slug.clone());
            }
            let resource = |entry: &str| {
                integration_resource(cx.ctx, entry).map(|found| {
                    let recorded = found.status.clone().unwrap_or_default();
                    recorded.id.into_iter().chain(recorded.slug).collect()
                })
            };
            cx.gate.binding_remote(FIELD, &keys, resource).await?;
            Ok(Bound { id, keys })
        }
        Err(e) if e.is_not_found() => Err(Error::not_allowed(
            INTEGRATION_NOT_READY,
            format!("integration {given} named by {FIELD} does not exist"),
        )),
        // Unreadable (a Connection without admin rights): only a namespace whose grants do not
        // limit integrations may bind it, as the spec names it.
        Err(e) => match cx.gate.binding(FIELD, &[]).await {
            Ok(()) => {
                let status = provider.status.clone().unwrap_or_default();
                let id = given.to_string();
                let mut keys = vec![id.clone()];
                keys.extend(status.integration_id.filter(|i| i != given));
                Ok(Bound { id, keys })
            }
            Err(Error::NotAllowed { .. }) => Err(Error::api(
                format!(
                    "read integration {given} (named by {FIELD}) to check it against the Connection's grants (spec.grants[].integrations)"
                ),
                e,
            )),
            Err(other) => Err(other),
        },
    }
}

/// The UUID of Integration `name`, once this provider may bind it (else why it waits).
fn ready_integration(provider: &Provider, ctx: &Context, name: &str) -> Result<String, Error> {
    let waiting = |why: String| Error::not_allowed(INTEGRATION_NOT_READY, why);
    let what = format!("Integration {name} named by spec.integration");
    let Some(integration) = integration_resource(ctx, name) else {
        return Err(waiting(format!(
            "{what} does not exist yet; waiting for it"
        )));
    };
    let peers = tenant_peers(ctx, provider.spec.connection_name());
    let theirs = integration.spec.connection_name();
    if !peers.iter().any(|p| p == theirs) {
        return Err(Error::InvalidSpec(format!(
            "{what} uses Connection {theirs}, which reaches another tenant than this Provider's Connection {}",
            provider.spec.connection_name()
        )));
    }
    if integration.metadata.deletion_timestamp.is_some() {
        return Err(waiting(format!("{what} is being deleted")));
    }
    let status = integration.status.clone().unwrap_or_default();
    let ready = spec_already_applied(
        integration.metadata.generation,
        status.observed_generation,
        &status.conditions,
    );
    let Some(id) = status.id.filter(|_| ready) else {
        return Err(waiting(format!("{what} is not Ready yet; waiting for it")));
    };
    let workspace = &provider.spec.workspace_id;
    if !status.workspaces.contains(workspace) {
        return Err(waiting(format!(
            "{what} does not grant workspace {workspace} access (its spec.workspaces); the provider waits until it does"
        )));
    }
    Ok(id)
}

async fn apply(
    provider: &Provider,
    cx: &Cx<'_, Provider>,
    status: &mut ProviderStatus,
) -> Result<Vec<Change>, Error> {
    let spec = &provider.spec;
    let bound = bound_integration(provider, cx).await?;
    let reset = spec.reset_usage.is_some() && spec.reset_usage != status.observed_reset_usage;
    let Some(remote) = observe(provider, cx, status, &bound.keys).await? else {
        let change = create(provider, cx, status, &bound).await?;
        // A new provider has no usage to reset.
        status.observed_reset_usage = spec.reset_usage.clone();
        return Ok(vec![change]);
    };
    status.integration_id = Some(bound.id.clone());
    let keys: Vec<&str> = bound.keys.iter().map(String::as_str).collect();
    let conflicts = spec.immutable_conflicts(&remote, &keys);
    if !conflicts.is_empty() {
        return Err(Error::InvalidSpec(format!(
            "remote provider {} has a different {} and the API cannot change it; create a new Provider instead",
            remote.slug,
            conflicts.join(", ")
        )));
    }
    let (fields, update) = spec.update_for(&remote, reset);
    let Some(update) = update else {
        status.observed_reset_usage = spec.reset_usage.clone();
        return Ok(Vec::new());
    };
    let key = key_of(&remote);
    let fields = fields.join(", ");
    cx.gate
        .intend(format!("would update provider {} ({fields})", remote.slug));
    cx.api(Op::Update)
        .await?
        .providers()
        .update(&key, Some(&spec.workspace_id), &update)
        .await
        .map_err(|e| Error::api(format!("update provider {}", remote.slug), e))?;
    status.observed_reset_usage = spec.reset_usage.clone();
    status.last_applied_at = Some(now_rfc3339());
    let drift = !reset
        && spec_already_applied(
            provider.metadata.generation,
            status.observed_generation,
            &status.conditions,
        );
    Ok(vec![match drift {
        true => Change::new(
            "DriftCorrected",
            format!(
                "provider {} was changed outside aigw ({fields}); restored it",
                remote.slug
            ),
        ),
        false => Change::new(
            "Updated",
            format!("updated provider {} ({fields})", remote.slug),
        ),
    }])
}

/// The key the API addresses the provider by: its UUID, else its slug.
fn key_of(remote: &RemoteProvider) -> String {
    match remote.id.is_empty() {
        true => remote.slug.clone(),
        false => remote.id.clone(),
    }
}

/// GETs the provider this resource recorded (or its slug names) in its workspace, and records
/// its id and slug, nothing else. One found by `spec.slug` that this resource never made is
/// an adoption, which needs the grant, and must bind the integration this provider binds
/// (`integration`: the UUID and slug it may be read as) in its workspace: else nothing of it is
/// recorded, so nothing this resource does (its deletion) ever touches it. Gone (404/`AB08`)
/// means a new one is created.
async fn observe(
    provider: &Provider,
    cx: &Cx<'_, Provider>,
    status: &mut ProviderStatus,
    integration: &[String],
) -> Result<Option<RemoteProvider>, Error> {
    let spec = &provider.spec;
    let Some(key) = status
        .id
        .clone()
        .or(spec.slug.clone())
        .or(status.slug.clone())
    else {
        return Ok(None);
    };
    let client = cx.api(Op::Read).await?;
    let read = client.providers().get(&key, Some(&spec.workspace_id)).await;
    let found = observed(&format!("provider {key}"), None, read)?;
    // Found by `spec.slug` while a create of it is in flight: that create made it only if it
    // carries the name the create sent and this resource's mark. The slug and the name alone
    // prove nothing: another party may have taken them first, and the refusal of our POST been
    // lost with its answer.
    let sent_name = status
        .create_attempt
        .as_ref()
        .and_then(|a| a.name.as_deref());
    let made_by_our_create = status.pending_create.is_some()
        && found.as_ref().is_some_and(|remote| {
            sent_name == Some(remote.name.as_str()) && ours(provider, remote)
        });
    let adopting = status.id.is_none() && !made_by_our_create;
    if let (Some(remote), true) = (&found, adopting) {
        cx.gate.adopting("spec.slug", &key).await?;
        let keys: Vec<&str> = integration.iter().map(String::as_str).collect();
        let conflicts = match keys.is_empty() {
            // What this provider binds is not known yet: nothing can be adopted.
            true => vec!["integration"],
            false => spec.immutable_conflicts(remote, &keys),
        };
        if !conflicts.is_empty() {
            return Err(Error::InvalidSpec(format!(
                "spec.slug {key} names an existing provider with a different {} than this Provider binds; it is not adopted: create the Provider with another slug",
                conflicts.join(", ")
            )));
        }
    }
    match &found {
        Some(remote) => {
            status.id = Some(remote.id.clone()).filter(|id| !id.is_empty());
            status.slug = Some(remote.slug.clone()).filter(|s| !s.is_empty());
            // Ours (recorded, made by our create, or adopted under the grant): whatever create
            // was in flight is settled.
            crate::controller::driver::create::clear_intent(status);
        }
        None => {
            status.id = None;
            status.slug = None;
        }
    }
    Ok(found)
}

/// Before binding a remote integration (`integrationId`), that it exists and grants the
/// workspace access, when the admin plane answers (a Connection without admin rights is left
/// to the create's own answer).
async fn check_remote_integration(
    provider: &Provider,
    cx: &Cx<'_, Provider>,
    id: &str,
) -> Result<(), Error> {
    let workspace = &provider.spec.workspace_id;
    let rows = cx.api(Op::Read).await?.integrations().workspaces(id).await;
    match rows {
        Err(e) if e.is_not_found() => Err(Error::not_allowed(
            INTEGRATION_NOT_READY,
            format!("integration {id} named by spec.integrationId does not exist"),
        )),
        Ok(rows)
            if rows.complete()
                && !rows
                    .workspaces
                    .iter()
                    .any(|r| r.enabled && &r.id == workspace) =>
        {
            Err(Error::not_allowed(
                INTEGRATION_NOT_READY,
                format!(
                    "integration {id} named by spec.integrationId does not grant workspace {workspace} access; the provider waits until it does"
                ),
            ))
        }
        _ => Ok(()),
    }
}

/// Creates the provider through the shared protocol (see [`crate::controller::create`]).
async fn create(
    provider: &Provider,
    cx: &Cx<'_, Provider>,
    status: &mut ProviderStatus,
    bound: &Bound,
) -> Result<Change, Error> {
    let spec = &provider.spec;
    if spec.integration_id.is_some() && status.pending_create.is_none() {
        check_remote_integration(provider, cx, &bound.id).await?;
    }
    let before = status.clone();
    let mut request = spec.create_request(&bound.id);
    // Without a note of the spec's, the provider carries this resource's mark: what proves,
    // after a lost answer, that a provider of the name is the one its create made.
    if request.note.is_none() {
        request.note = created_mark(provider);
    }
    let sent = CreateAttempt {
        name: Some(spec.name.clone()),
        workspace_id: Some(spec.workspace_id.clone()),
        body_hash: body_hash(&cx.ctx.hash_key, provider.metadata.uid.as_deref(), &request),
        ended_at: None,
        intent: None,
    };
    let client = cx.api(Op::Create).await?;
    let outcome = create_once(
        cx,
        status,
        "provider",
        sent,
        find_created(provider, cx, &before),
        client,
        async |client| client.providers().create(&request).await,
    )
    .await?;
    status.integration_id = Some(bound.id.clone());
    Ok(match outcome {
        Created::Posted(created) => {
            status.id = Some(created.id.clone());
            status.slug = Some(created.slug.clone()).filter(|s| !s.is_empty());
            status.last_applied_at = Some(now_rfc3339());
            Change::new("Created", format!("created provider {}", created.slug))
        }
        Created::Recovered(found) => {
            status.id = Some(found.id.clone()).filter(|id| !id.is_empty());
            status.slug = Some(found.slug.clone()).filter(|s| !s.is_empty());
            cx.ctx.drift.flag(object_key(provider));
            Change::new(
                "Created",
                format!(
                    "found provider {} from an earlier create whose answer was lost",
                    found.slug
                ),
            )
        }
    })
}

/// The provider an earlier create made: the one of the workspace with the name it sent (and
/// `spec.slug`, when set), created within its window, claimed by no other resource, in a
/// complete listing.
async fn find_created(
    provider: &Provider,
    cx: &Cx<'_, Provider>,
    status: &ProviderStatus,
) -> Result<Lookup<RemoteProvider>, Error> {
    let spec = &provider.spec;
    let query = ProvidersListQuery {
        workspace_id: Some(spec.workspace_id.clone()),
        ..Default::default()
    };
    let listing = cx
        .api(Op::Read)
        .await?
        .providers()
        .listing(&query)
        .await
        .map_err(|e| Error::api("list providers", e))?;
    let sent = status
        .create_attempt
        .clone()
        .unwrap_or_else(|| CreateAttempt {
            name: Some(spec.name.clone()),
            workspace_id: Some(spec.workspace_id.clone()),
            ..Default::default()
        });
    // `spec.slug` narrows the search, but is no proof: someone else may hold that slug (and
    // our POST was refused for it). Only the provider our POST made counts as ours (the name
    // it sent, within its window, claimed by no other resource); any other is left to the
    // adoption rules of `observe`.
    let slug = spec.slug.as_deref();
    one_of_ours(
        cx,
        status,
        &sent,
        listing,
        |p| vec![p.id.as_str(), p.slug.as_str()],
        |p| p.created_at.as_deref(),
        |p| sent.name.as_deref() == Some(p.name.as_str()) && slug.is_none_or(|slug| p.slug == slug),
        |p| (!ours(provider, p)).then(|| format!("provider {} ({})", p.slug, p.id)),
    )
    .await
}

/// The note a provider aigw creates carries when the spec gives none: this resource's uid,
/// which no other party's provider has.
fn created_mark(provider: &Provider) -> Option<String> {
    let uid = provider.metadata.uid.as_deref()?;
    Some(format!("created by aigw for {uid}"))
}

/// True when `remote` carries the mark of this resource's creates ([`created_mark`]).
fn ours(provider: &Provider, remote: &RemoteProvider) -> bool {
    created_mark(provider).is_some_and(|mark| remote.note.as_deref() == Some(mark.as_str()))
}

async fn cleanup(provider: &Provider, cx: &Cx<'_, Provider>) -> Result<Vec<Change>, Error> {
    let status = provider.status.clone().unwrap_or_default();
    let known = status.id.clone().or(status.slug.clone());
    if provider.spec.deletion_policy == ProviderDeletionPolicy::Orphan {
        return Ok(orphaned(&format!(
            "provider {}",
            status.slug.clone().or(known).unwrap_or_default()
        )));
    }
    let key = match (known, &status.pending_create) {
        (Some(key), _) => key,
        (None, Some(_)) => {
            let lookup = find_created(provider, cx, &status);
            match made_by_unfinished_create(&status, "provider", lookup).await? {
                Some(found) => key_of(&found),
                None => return Ok(Vec::new()),
            }
        }
        (None, None) => return Ok(Vec::new()),
    };
    if let Some(why) = binds_another(provider, cx, &status, &key).await? {
        return Ok(vec![Change::new(
            "Released",
            format!("left provider {key} in place without a call: {why}"),
        )]);
    }
    // A delete reaches the integration's provider as much as an update: a namespace no longer
    // granted the integration releases it without a call, as for a revoked workspace.
    match integration_granted(provider, cx, &status).await {
        Ok(()) => {}
        Err(refused @ Error::NotAllowed { .. }) => {
            return Ok(vec![Change::new(
                "Released",
                format!("left provider {key} in place without a call: {refused}"),
            )]);
        }
        Err(other) => return Err(other),
    }
    let users = referencing_configs(provider, cx.ctx).await?;
    if !users.is_empty() {
        return Err(Error::not_allowed(
            STILL_REFERENCED,
            format!(
                "provider {key} is still named by Config {}; it is deleted once no Config names it (or set deletionPolicy: Orphan)",
                users.join(", ")
            ),
        ));
    }
    let client = cx.api(Op::Delete).await?;
    let result = client
        .providers()
        .delete(&key, Some(&provider.spec.workspace_id))
        .await;
    let name = status.slug.clone().unwrap_or(key);
    removed("Deleted", "delete", &format!("provider {name}"), result)
}

/// Whether the grants still let this namespace bind the provider's integration, as recorded
/// (no API call): the rule [`bound_integration`] applies before every write.
async fn integration_granted(
    provider: &Provider,
    cx: &Cx<'_, Provider>,
    status: &ProviderStatus,
) -> Result<(), Error> {
    let keys = integration_keys(provider, cx.ctx, status);
    match (&provider.spec.integration, &provider.spec.integration_id) {
        (_, Some(_)) => {
            let resource = |entry: &str| {
                integration_resource(cx.ctx, entry).map(|found| {
                    let recorded = found.status.clone().unwrap_or_default();
                    recorded.id.into_iter().chain(recorded.slug).collect()
                })
            };
            cx.gate
                .binding_remote("spec.integrationId", &keys, resource)
                .await
        }
        (Some(name), None) => {
            let mut granted = vec![name.clone()];
            granted.extend(keys);
            cx.gate.binding("spec.integration", &granted).await
        }
        (None, None) => Ok(()),
    }
}

/// Before a delete: why the provider `key` names must not be deleted by this resource, when
/// the read shows it binds another integration (or lives in another workspace) than this
/// Provider binds (what it recorded, `status.integrationId`, or its Integration resource's).
async fn binds_another(
    provider: &Provider,
    cx: &Cx<'_, Provider>,
    status: &ProviderStatus,
    key: &str,
) -> Result<Option<String>, Error> {
    let mut keys = integration_keys(provider, cx.ctx, status);
    keys.extend(status.integration_id.clone());
    let read = cx
        .api(Op::Read)
        .await?
        .providers()
        .get(key, Some(&provider.spec.workspace_id))
        .await;
    let remote = match read {
        Ok(remote) => remote,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(Error::api(format!("read provider {key}"), e)),
    };
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let conflicts = match keys.is_empty() {
        true => Vec::new(),
        false => provider.spec.immutable_conflicts(&remote, &keys),
    };
    Ok((!conflicts.is_empty()).then(|| {
        format!(
            "it has a different {} than this Provider binds",
            conflicts.join(", ")
        )
    }))
}

/// True when `config` (of the provider's namespace) names the provider: by resource
/// (`spec.resourceRefs`), or by routing to its `@<slug>` anywhere in its document.
fn named_by(provider: &Provider, config: &Config) -> bool {
    if config.metadata.namespace != provider.metadata.namespace {
        return false;
    }
    let name = provider.name_any();
    let by_resource = config
        .spec
        .resource_refs
        .iter()
        .any(|r| r.kind == ReferencedKind::Provider && r.name == name);
    by_resource || routes_to(provider, &config.spec.config.to_value())
}

fn routes_to(provider: &Provider, document: &Value) -> bool {
    match document {
        Value::Array(items) => items.iter().any(|v| routes_to(provider, v)),
        Value::Object(map) => map.values().any(|v| routes_to(provider, v)),
        other => provider.routed_by(other),
    }
}

/// The Configs (by name) that name the provider, once every Config cache has listed.
async fn referencing_configs(provider: &Provider, ctx: &Context) -> Result<Vec<String>, Error> {
    let configs = &ctx.stores.configs;
    if !configs
        .listed(ctx.stores_of::<Config>(), CACHES_LISTED_WITHIN)
        .await
    {
        return Err(Error::CachesNotReady(
            "the Config caches have not listed every watched namespace yet, so whether a Config names this provider cannot be decided; waiting".into(),
        ));
    }
    let mut users: Vec<String> = configs
        .all()
        .iter()
        // Another installation's Config names a provider of its own tenant, not this one.
        .filter(|c| !ctx.installation.is_theirs(c.as_ref()))
        .filter(|c| named_by(provider, c))
        .map(|c| c.name_any())
        .collect();
    users.sort();
    Ok(users)
}

/// The Providers (as `namespace/name`) that bind `integration`: by resource name, or by the
/// UUID or slug it recorded. From the caches, once every Provider cache has listed. A Provider
/// its grants refuse (Stalled `IntegrationNotAllowed`, `NamespaceNotAllowed`, …) that never
/// managed a provider binds nothing and does not count: a tenant cannot pin the Integration.
pub async fn naming(integration: &Integration, ctx: &Context) -> Result<Vec<String>, Error> {
    let providers = &ctx.stores.providers;
    if !providers
        .listed(ctx.stores_of::<Provider>(), CACHES_LISTED_WITHIN)
        .await
    {
        return Err(Error::CachesNotReady(
            "the Provider caches have not listed every watched namespace yet, so whether a Provider binds this integration cannot be decided; waiting".into(),
        ));
    }
    let name = integration.name_any();
    let status = integration.status.as_ref();
    let keys: Vec<&str> = [
        status.and_then(|s| s.id.as_deref()),
        status.and_then(|s| s.slug.as_deref()),
    ]
    .into_iter()
    .flatten()
    .collect();
    let mut users: Vec<String> = providers
        .all()
        .iter()
        .filter(|p| !crate::controller::claims::refused_by_grants(p.as_ref()))
        // Another installation's Provider binds an integration of its own tenant.
        .filter(|p| !ctx.installation.is_theirs(p.as_ref()))
        .filter(|p| {
            p.spec.integration.as_deref() == Some(name.as_str())
                || p.spec
                    .integration_id
                    .as_deref()
                    .is_some_and(|id| keys.contains(&id))
        })
        .map(|p| format!("{}/{}", p.namespace().unwrap_or_default(), p.name_any()))
        .collect();
    users.sort();
    Ok(users)
}
