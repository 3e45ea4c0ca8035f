//! Provider (namespaced): binds an integration into one workspace. The integration is an
//! Integration resource (from the watch cache: it must be Ready and grant the workspace access)
//! or a remote one (`integrationId`); the Connection's grants must allow the namespace to bind
//! it ([`crate::controller::driver::gate::Gate::binding`]). The verbs of the kind ([`Verbs`]); the
//! driver observes, creates, updates, releases and deletes.
//!
//! A provider read may carry the upstream key (`key`, `model_config`): the client drops those
//! fields on decode, and only the id and slug of a read are ever recorded. Not a listed kind:
//! the provider list carries no `last_updated_at`, so each reconcile (once per drift interval)
//! reads the provider.

use kube::ResourceExt;
use serde_json::Value;

mod binding;
mod watches;
use binding::{
    Binding, bound_integration, check_remote_integration, integration_granted, integration_keys,
};
pub use watches::{watch_binders, watch_inputs};

use crate::api::{
    ApiError, Client, CreateProviderRequest, Provider as RemoteProvider, ProviderWritten,
    ProvidersListQuery, Reading,
};
use crate::controller::Context;
use crate::controller::driver::calls::{
    Deleting, Own, OwnCalls, Post, Put, Read, Recovered, RemoteKey, key_or,
};
use crate::controller::driver::create::in_workspace;
use crate::controller::driver::echoes::{Echoable, unless_listed};
use crate::controller::driver::gate::Op;
use crate::controller::driver::referenced::{bound, names, qualified, users};
use crate::controller::driver::verbs::{
    Changes, Comparison, Inputs, Made, Release, Verbs, still_referenced,
};
use crate::controller::driver::{Cx, Managed};
use crate::controller::error::{Error, Halt};
use crate::controller::kinds::bound::{Bound, released};
use crate::controller::kinds::config_refs::{Referenced, slug_when_ready};
use crate::controller::kinds::keyed;
use crate::controller::state::claims::refused_by_grants;
use crate::resources::common::CreateAttempt;
use crate::resources::config::{Config, ReferencedKind};
use crate::resources::integration::Integration;
use crate::resources::provider::{Provider, ProviderStatus};

/// Condition reason while the integration a Provider binds is not ready for it.
pub const INTEGRATION_NOT_READY: &str = "IntegrationNotReady";

impl Managed for Provider {
    crate::controller::driver::kind::namespaced_api!();
    const KIND: &'static str = "Provider";

    crate::controller::driver::flow::driven!();
}

/// The driver observes by id (or slug: [`CreatesAs`]), adopts a provider of the slug
/// only under the grant and only when it binds this Provider's integration, PUTs only the
/// fields that differ (a usage reset is an input, no drift), and deletes once no Config names
/// it; a provider of another integration, or one the grants no longer let this namespace
/// bind, is released.
///
/// [`CreatesAs`]: crate::resources::common::Naming::CreatesAs
impl Verbs for Provider {
    type Desired = Binding;
    type Calls = Own;

    /// The Secrets of the Integration resource it binds (by name, or by the id or slug that
    /// resource recorded): the API keeps the integration's key and may quote it in a refusal
    /// about the provider.
    fn echoable(&self, ctx: &Context) -> Vec<Echoable> {
        let (name, key) = (&self.spec.integration, &self.spec.integration_id);
        let bound = bound::<Integration>(ctx, name.as_deref(), key.as_deref());
        let unlisted = unless_listed::<Integration>(ctx);
        bound.map_or_else(
            || unlisted.into_iter().collect(),
            |integration| {
                let spec = &integration.spec;
                let key = spec
                    .key_secret_ref
                    .iter()
                    .map(|r| Echoable::ClusterReadable {
                        name: r.name.clone(),
                        namespace: r.namespace.clone(),
                        key: Some(r.key.clone()),
                    });
                let refs = spec.secret_refs.iter().map(|r| Echoable::ClusterReadable {
                    name: r.secret_key_ref.name.clone(),
                    namespace: None,
                    key: Some(r.secret_key_ref.key.clone()),
                });
                key.chain(refs).collect()
            },
        )
    }

    async fn resolve(&self, cx: &Cx<'_, Self>, status: &mut ProviderStatus) -> Inputs<Self> {
        let bound = bound_integration(self, cx).await?;
        let reset =
            self.spec.reset_usage.is_some() && self.spec.reset_usage != status.observed_reset_usage;
        Ok(Binding {
            integration: bound,
            reset,
        })
    }
    /// Without an API call: what the provider binds, as the status and the caches tell.
    async fn observed_inputs(
        &self,
        cx: &Cx<'_, Self>,
        status: &mut ProviderStatus,
    ) -> Inputs<Self> {
        let keys = integration_keys(self, cx.ctx, status);
        Ok(Binding {
            integration: Bound { id: None, keys },
            reset: false,
        })
    }
    /// A provider of the slug binds another integration (or lives in another workspace).
    fn not_adoptable(&self, desired: &Binding, remote: &RemoteProvider) -> Option<String> {
        let conflicts = |keys: &[&str]| self.spec.immutable_conflicts(remote, keys);
        desired
            .integration
            .not_adoptable(conflicts, "this Provider binds")
    }
    /// Found by `spec.slug` while a create of it is in flight: that create made it only if it
    /// carries the name the create sent and this resource's mark. The slug and the name alone
    /// prove nothing: another party may have taken them first, and the refusal of our POST
    /// been lost with its answer.
    fn made_by_create(&self, status: &ProviderStatus, remote: &RemoteProvider) -> bool {
        let sent = status
            .create_attempt
            .as_ref()
            .and_then(|a| a.name.as_deref());
        sent == Some(remote.name.as_str()) && ours(self, remote)
    }
    async fn before_create(&self, cx: &Cx<'_, Self>, desired: &Binding) -> Result<(), Halt> {
        match (&self.spec.integration_id, &desired.integration.id) {
            (Some(_), Some(id)) => check_remote_integration(self, cx, id).await,
            _ => Ok(()),
        }
    }
    async fn release(&self, cx: &Cx<'_, Self>, key: &str, status: &ProviderStatus) -> Release {
        if let Some(why) = binds_another(self, cx, status, key).await? {
            return Ok(Some(why));
        }
        // A delete reaches the integration's provider as much as an update: a namespace no
        // longer granted the integration releases it without a call, as for a revoked
        // workspace.
        released(integration_granted(self, cx, status).await)
    }
    async fn before_delete(&self, cx: &Cx<'_, Self>, key: &str) -> Result<(), Halt> {
        let users = referencing_configs(self, cx.ctx).await?;
        let until = "no Config names it";
        still_referenced::<Self>(key, "named by Config", &users, until)
    }
    /// Only the id and slug of a read are ever recorded (a read may carry the upstream key).
    fn record(status: &mut ProviderStatus, remote: Option<&RemoteProvider>) {
        keyed::record(status, remote);
    }
    fn record_compared(&self, status: &mut ProviderStatus, desired: &Binding) {
        desired.integration.record(&mut status.integration_id);
    }
    fn record_created(
        &self,
        status: &mut ProviderStatus,
        _desired: &Binding,
        created: Made<Self>,
    ) -> String {
        keyed::record_created(status, None, created)
    }
    fn record_updated(
        &self,
        status: &mut ProviderStatus,
        _: &Binding,
        _: &RemoteProvider,
        _: ProviderWritten,
    ) {
        keyed::record_updated(status, None);
    }
    /// The reset value is acted upon once the provider matches the spec (a new provider has
    /// no usage to reset).
    async fn follow_up(
        &self,
        _cx: &Cx<'_, Self>,
        status: &mut ProviderStatus,
        _desired: &Binding,
        _first_sight: bool,
    ) -> Changes {
        status.observed_reset_usage = self.spec.reset_usage.clone();
        Ok(Vec::new())
    }
}

impl OwnCalls for Provider {
    type Remote = RemoteProvider;
    type Found = RemoteProvider;
    type Posted = ProviderWritten;
    type Updated = ProviderWritten;
    async fn observe(&self, client: &Client, key: &str, _: &ProviderStatus) -> Read<Self> {
        let workspace = Some(self.spec.workspace());
        client.providers().get(key, workspace).await.map(Some)
    }
    fn sent(&self, cx: &Cx<'_, Self>, desired: &Binding) -> CreateAttempt {
        let request = create_request(self, desired);
        cx.create_attempt(
            Some(self.spec.name.clone()),
            Some(self.spec.workspace().to_string()),
            &request,
        )
    }
    async fn create(&self, client: &Client, desired: &Binding) -> Post<Self> {
        client
            .providers()
            .create(&create_request(self, desired))
            .await
    }
    fn compare(
        &self,
        desired: &Binding,
        remote: &RemoteProvider,
        _: &ProviderStatus,
    ) -> Comparison {
        let (differs, _) = self.spec.update_for(remote, desired.reset);
        Comparison {
            immutable: self
                .spec
                .immutable_conflicts(remote, &desired.integration.keys()),
            // A usage reset is asked for by the spec: the update it is part of is no drift.
            inputs: if desired.reset {
                differs.clone()
            } else {
                Vec::new()
            },
            differs,
        }
    }
    async fn update(
        &self,
        client: &Client,
        desired: &Binding,
        remote: &RemoteProvider,
    ) -> Put<Self> {
        let (_, update) = self.spec.update_for(remote, desired.reset);
        let workspace = Some(self.spec.workspace());
        let update = update.unwrap_or_default();
        client
            .providers()
            .update(&key_of(remote), workspace, &update)
            .await
    }
    async fn delete(&self, at: Deleting<'_, Self>) -> Result<(), ApiError> {
        let workspace = Some(self.spec.workspace());
        at.client.providers().delete(at.key, workspace).await
    }
    /// The provider an earlier create made: the one of the workspace with the name it sent (and
    /// `spec.slug`, when set), created within its window, claimed by no other resource, in a
    /// complete listing.
    async fn find_created(&self, cx: &Cx<'_, Self>, status: &ProviderStatus) -> Recovered<Self> {
        let spec = &self.spec;
        let query = ProvidersListQuery {
            workspace_id: Some(spec.workspace().to_string()),
            ..Default::default()
        };
        // `spec.slug` narrows the search, but is no proof: someone else may hold that slug (and
        // our POST was refused for it). Only the provider our POST made counts as ours (the name
        // it sent, within its window, claimed by no other resource); any other is left to the
        // adoption rules of `observe`.
        let identity = (spec.slug.as_deref(), spec.name.as_str(), spec.workspace());
        let unproven = |p: &RemoteProvider| {
            (!ours(self, p)).then(|| format!("provider {} ({})", p.slug, p.id))
        };
        in_workspace(cx, status, identity, unproven, |client| async move {
            client.providers().listing(&query, Reading::Proof).await
        })
        .await
    }
}

/// The key the API addresses the provider by: its UUID, else its slug.
/// A provider is read by its slug (its id while it has none); a create lookup's candidate by
/// its id (`key_of`).
impl RemoteKey for RemoteProvider {
    fn key(&self) -> String {
        key_or(&self.slug, &self.id)
    }
    fn found_key(&self) -> String {
        key_of(self)
    }
    fn workspace(&self) -> Option<&str> {
        self.workspace_id.as_deref()
    }
}

fn key_of(remote: &RemoteProvider) -> String {
    key_or(&remote.id, &remote.slug)
}

/// The create body binding the integration. Without a note of the spec's, the provider carries
/// this resource's mark: what proves, after a lost answer, that a provider of the name is the
/// one its create made.
fn create_request(provider: &Provider, desired: &Binding) -> CreateProviderRequest {
    let mut request = provider
        .spec
        .create_request(desired.integration.id.as_deref().unwrap_or_default());
    if request.note.is_none() {
        request.note = created_mark(provider);
    }
    request
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

/// Before a delete: why the provider `key` names must not be deleted by this resource, when
/// the read shows it binds another integration (or lives in another workspace) than this
/// Provider binds (what it recorded, `status.integrationId`, or its Integration resource's).
async fn binds_another(
    provider: &Provider,
    cx: &Cx<'_, Provider>,
    status: &ProviderStatus,
    key: &str,
) -> Result<Option<String>, Halt> {
    let mut keys = integration_keys(provider, cx.ctx, status);
    keys.extend(status.integration_id.clone());
    let read = cx
        .api(Op::Read)
        .await?
        .providers()
        .get(key, Some(provider.spec.workspace()))
        .await;
    let remote = match read {
        Ok(remote) => remote,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(Error::api(format!("read provider {key}"), e).into()),
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
async fn referencing_configs(provider: &Provider, ctx: &Context) -> Result<Vec<String>, Halt> {
    let question = "whether a Config names this provider";
    let uses = |c: &Config| named_by(provider, c);
    users(ctx, question, uses, |c| c.name_any()).await
}

/// The Providers (as `namespace/name`) that bind `integration`: by resource name, or by the
/// UUID or slug it recorded. From the caches, once every Provider cache has listed. A Provider
/// its grants refuse (Stalled `IntegrationNotAllowed`, `NamespaceNotAllowed`, …) that never
/// managed a provider binds nothing and does not count: a tenant cannot pin the Integration.
pub async fn naming(integration: &Integration, ctx: &Context) -> Result<Vec<String>, Halt> {
    let question = "whether a Provider binds this integration";
    let uses = |p: &Provider| !refused_by_grants(p) && binds(p, integration);
    users(ctx, question, uses, qualified).await
}

/// True when `provider` binds `integration`: by resource name, or by the UUID or slug it
/// recorded.
fn binds(provider: &Provider, integration: &Integration) -> bool {
    let spec = &provider.spec;
    names(
        integration,
        spec.integration.as_deref(),
        spec.integration_id.as_deref(),
    )
}
