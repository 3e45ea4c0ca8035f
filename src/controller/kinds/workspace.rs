//! Workspace (cluster-scoped): the organisation's workspace, on the kind contract ([`Verbs`]).
//!
//! Creating one is three calls, each made idempotent or recorded so that a crash or a lost
//! answer between them resumes without a duplicate:
//! 1. the IAM scope ([`Verbs::before_create`]): its name is fixed by the resource's name and
//!    ownership token ([`scope_name`]), and its description carries the token
//!    ([`scope_marker`]), a keyed hash of the resource's uid only the operator can compute. A
//!    scope found with that name is reused when it carries the token and refused otherwise:
//!    a foreign scope is never taken;
//! 2. the workspace naming the scope: the driver's create protocol records the intent before
//!    the POST, and a lost answer is recovered by the scope the workspace names
//!    ([`OwnCalls::find_created`]), never by display name;
//! 3. the bind of the scope to the workspace's slug ([`Verbs::sync_sub_resources`]): a full
//!    replacement, sent only while the scope does not bind the slug, so a lost answer is
//!    followed by a read that finds it bound.
//!
//! Adopted by `spec.slug`, a workspace's scope is not aigw's and is never written. Deletion
//! archives (the default workspace never: `DefaultWorkspace`), once no aigw object of the
//! cluster names the workspace (`StillReferenced`), then deletes the scope aigw made for it.

use std::collections::BTreeSet;

use kube::{Resource, ResourceExt};

use crate::api::{
    self, ApiError, Client, IamScope, IamScopeWrite, Workspace as RemoteWorkspace,
    WorkspacesListQuery,
};
use crate::controller::driver::calls::{Deleting, Own, OwnCalls, Post, Put, Read, Recovered};
use crate::controller::driver::create::{Created, Lookup};
use crate::controller::driver::gate::Op;
use crate::controller::driver::referenced;
use crate::controller::driver::verbs::{
    Changes, Comparison, Differing, Inputs, Made, STILL_REFERENCED, Verbs, removed_once,
    still_referenced,
};
use crate::controller::driver::{Change, Cx, Managed};
use crate::controller::error::{Error, Halt, Wait};
use crate::controller::kinds::config_refs::REFERENCE_NOT_READY;
use crate::controller::kinds::mcp_integration;
use crate::controller::state::triggers::Triggers;
use crate::controller::{Context, now_rfc3339};
use crate::resources::Config;
use crate::resources::common::CreateAttempt;
use crate::resources::workspace::{
    DefaultConfig, Workspace, WorkspaceSettings, WorkspaceStatus, scope_marker, scope_name,
};

/// Condition reason when deleting would archive the organisation's default workspace.
pub const DEFAULT_WORKSPACE: &str = "DefaultWorkspace";
/// Condition reason when the IAM scope aigw would make exists and is not this resource's.
pub const SCOPE_NOT_OURS: &str = "ScopeNotOwned";

impl Managed for Workspace {
    crate::controller::driver::kind::cluster_api!();
    const KIND: &'static str = "Workspace";

    crate::controller::driver::flow::driven!();
}

/// What a workspace is written with: its settings, and the IAM scope a create names (this
/// resource's own, [`scope_name`]).
pub struct Desired {
    settings: WorkspaceSettings,
    /// `None` when the resource has no uid to derive it from (never on a live object).
    scope: Option<OwnedScope>,
    /// Why the default config is not applied yet (a Config not Ready).
    pending: Option<String>,
}

/// The IAM scope this resource owns: its name, and the description that proves it ours.
#[derive(Clone)]
struct OwnedScope {
    name: String,
    marker: String,
}

impl Verbs for Workspace {
    type Desired = Desired;
    type Calls = Own;
    const REMOVAL: (&'static str, &'static str) = ("Archived", "archive");

    async fn resolve(&self, cx: &Cx<'_, Self>, _: &mut WorkspaceStatus) -> Inputs<Self> {
        let (config, pending) = default_config(self, cx.ctx).await?;
        Ok(Desired {
            settings: self.spec.settings(config),
            scope: owned_scope(self, cx.ctx),
            pending,
        })
    }
    /// The first of the three calls: this resource's IAM scope, made once.
    async fn before_create(&self, cx: &Cx<'_, Self>, desired: &Desired) -> Result<(), Halt> {
        let scope = require_scope(desired)?;
        if owned(cx, scope).await?.is_some() {
            return Ok(());
        }
        cx.gate.intend(format!(
            "would create IAM scope {} for the workspace",
            scope.name
        ));
        let client = cx.api(Op::Create).await?;
        let request = IamScopeWrite {
            name: scope.name.clone(),
            description: scope.marker.clone(),
            resources: Vec::new(),
        };
        Ok(client
            .iam_scopes()
            .create(&request)
            .await
            .map(drop)
            .map_err(|e| Error::api(format!("create IAM scope {}", scope.name), e))?)
    }
    /// Never the default workspace; never while an aigw object of the cluster names it.
    async fn before_delete(&self, cx: &Cx<'_, Self>, key: &str) -> Result<(), Halt> {
        let status = self.status.clone().unwrap_or_default();
        let client = cx.api(Op::Read).await?;
        let remote = match client.workspaces().get(key).await {
            Ok(remote) => Some(remote),
            Err(e) if e.is_not_found() => None,
            Err(e) => return Err(Error::api(format!("read workspace {key}"), e).into()),
        };
        let shown = Self::shown(&status).unwrap_or(key.to_string());
        if status.is_default || remote.as_ref().is_some_and(|r| r.is_default == Some(true)) {
            return Err(Error::not_allowed(
                DEFAULT_WORKSPACE,
                format!(
                    "workspace {shown} is the organisation's default workspace, which is never archived: set deletionPolicy: Orphan to delete this Workspace and leave it"
                ),
            ).into());
        }
        let mut keys: BTreeSet<&str> = [key].into_iter().collect();
        keys.extend(status.id.as_deref());
        keys.extend(status.slug.as_deref());
        if let Some(remote) = &remote {
            keys.extend([remote.id.as_str(), remote.slug.as_str()]);
        }
        keys.remove("");
        let namespaces = cx.ctx.watched_namespaces.len();
        let Some(mut holders) = cx
            .ctx
            .stores
            .naming_workspace(&keys, &self.name_any(), namespaces)
        else {
            return Err(Wait::CachesNotReady(
                "the watch of every kind has not listed every watched namespace yet, so whether a resource acts in this workspace cannot be decided; waiting".into(),
            )
            .into());
        };
        holders.extend(mcp_integration::naming_workspace(
            cx.ctx,
            &keys,
            &self.name_any(),
        ));
        let until = "they are gone";
        still_referenced::<Self>(&shown, "named by", &holders, until)
    }
    /// The IAM scope [`Verbs::before_create`] made for a workspace the API never made (its
    /// create refused, or failed and proven to have made nothing): deleted when it carries this resource's token and binds nothing. A
    /// scope of the same name that is not ours is left alone.
    async fn remove_unused(&self, cx: &Cx<'_, Self>) -> Result<Vec<Change>, Halt> {
        // Only a create that was sent (refused, failed or unanswered) made one: a resource
        // that never got that far goes without a call, even when its Connection is gone.
        let sent = self
            .status
            .as_ref()
            .is_some_and(|s| s.create_settled.is_some() || s.pending_create.is_some());
        if self.spec.slug.is_some() || !sent {
            return Ok(Vec::new());
        }
        let Some(scope) = owned_scope(self, cx.ctx) else {
            return Ok(Vec::new());
        };
        let found = match owned(cx, &scope).await {
            Ok(Some(found)) => found,
            Ok(None) => return Ok(Vec::new()),
            Err(Halt::Fail(Error::NotAllowed { .. })) => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        if !found.resources.is_empty() {
            tracing::warn!(
                scope = %scope.name,
                "the IAM scope of a workspace never recorded binds resources; it is left in place"
            );
            return Ok(Vec::new());
        }
        cx.gate.intend(format!(
            "would delete IAM scope {}, made for a workspace the API never created",
            scope.name
        ));
        let client = cx.api(Op::Delete).await?;
        match client.iam_scopes().delete(&scope.name).await {
            Err(e) if !e.is_not_found() => {
                Err(Error::api(format!("delete IAM scope {}", scope.name), e).into())
            }
            _ => Ok(vec![Change::new(
                "Deleted",
                format!(
                    "deleted IAM scope {}, made for a workspace the API never created",
                    scope.name
                ),
            )]),
        }
    }
    /// The API's refusal to archive a workspace that still holds objects (`409`).
    fn delete_refused(&self, key: &str, error: &ApiError) -> Option<Error> {
        (error.status() == Some(409)).then(|| {
            let message = error.api_message().unwrap_or("conflict");
            Error::not_allowed(
                STILL_REFERENCED,
                format!(
                    "the API refuses to archive workspace {key} ({message}); {}",
                    removed_once::<Self>("nothing lives in it")
                ),
            )
        })
    }
    fn record(status: &mut WorkspaceStatus, remote: Option<&RemoteWorkspace>) {
        status.id = remote.map(|r| r.id.clone()).filter(|id| !id.is_empty());
        status.slug = remote.map(|r| r.slug.clone()).filter(|s| !s.is_empty());
        status.scope_name = remote.and_then(|r| r.scope_name.clone());
        status.is_default = remote.is_some_and(|r| r.is_default == Some(true));
    }
    fn record_created(
        &self,
        status: &mut WorkspaceStatus,
        desired: &Desired,
        created: Made<Self>,
    ) -> String {
        let (id, slug) = match created {
            Created::Posted(created) => {
                status.last_applied_at = Some(now_rfc3339());
                (created.id, created.slug)
            }
            Created::Recovered(found) => (found.id, found.slug),
        };
        status.id = Some(id);
        status.slug = Some(slug.clone()).filter(|s| !s.is_empty());
        status.scope_name = desired.scope.as_ref().map(|s| s.name.clone());
        status.is_default = false;
        slug
    }
    fn record_updated(
        &self,
        status: &mut WorkspaceStatus,
        _: &Desired,
        _: &RemoteWorkspace,
        _: (),
    ) {
        status.last_applied_at = Some(now_rfc3339());
    }
    /// The third call: the scope aigw made binds the workspace's slug.
    async fn sync_sub_resources(&self, cx: &Cx<'_, Self>, status: &mut WorkspaceStatus) -> Changes {
        let Some((scope, slug)) = own_binding(self, cx.ctx, status) else {
            return Ok(Vec::new());
        };
        let found = owned(cx, &scope).await?.ok_or_else(|| {
            Error::MissingState(format!(
                "IAM scope {} of workspace {slug} is gone; aigw does not make it again for a workspace that exists",
                scope.name
            ))
        })?;
        if found.binds(&slug) {
            return Ok(Vec::new());
        }
        cx.gate.intend(format!(
            "would bind IAM scope {} to workspace {slug}",
            scope.name
        ));
        let client = cx.api(Op::Update).await?;
        let mut request = IamScopeWrite::binding(&scope.name, &found.description, &slug);
        // A full replacement: whatever else the scope holds is sent back with the binding.
        request.resources.splice(0..0, found.resources);
        client
            .iam_scopes()
            .replace(&scope.name, &request)
            .await
            .map_err(|e| {
                Error::api(
                    format!("bind IAM scope {} to workspace {slug}", scope.name),
                    e,
                )
            })?;
        Ok(vec![Change::new(
            "ScopeBound",
            format!("bound IAM scope {} to workspace {slug}", scope.name),
        )])
    }
    async fn sub_resources_differ(&self, cx: &Cx<'_, Self>, status: &WorkspaceStatus) -> Differing {
        let Some((scope, slug)) = own_binding(self, cx.ctx, status) else {
            return Ok(Vec::new());
        };
        let bound = owned(cx, &scope).await?.is_some_and(|s| s.binds(&slug));
        Ok(if bound {
            Vec::new()
        } else {
            vec!["scopeBinding"]
        })
    }
    /// Once the workspace matches: a default config named by a Config not Ready yet waits.
    async fn follow_up(
        &self,
        _cx: &Cx<'_, Self>,
        _: &mut WorkspaceStatus,
        desired: &Desired,
        _first_sight: bool,
    ) -> Changes {
        match &desired.pending {
            Some(why) => Err(Error::not_allowed(REFERENCE_NOT_READY, why.clone()).into()),
            None => Ok(Vec::new()),
        }
    }
}

impl OwnCalls for Workspace {
    type Remote = RemoteWorkspace;
    type Found = RemoteWorkspace;
    type Posted = api::WorkspaceCreated;
    type Updated = ();
    async fn observe(&self, client: &Client, key: &str, _: &WorkspaceStatus) -> Read<Self> {
        client.workspaces().get(key).await.map(Some)
    }
    fn sent(&self, cx: &Cx<'_, Self>, desired: &Desired) -> CreateAttempt {
        let scope = desired.scope.as_ref().map(|s| s.name.as_str());
        cx.create_attempt(
            Some(self.spec.name.clone()),
            None,
            &desired.settings.create_request(scope.unwrap_or_default()),
        )
    }
    async fn create(&self, client: &Client, desired: &Desired) -> Post<Self> {
        let scope = desired.scope.as_ref().map(|s| s.name.as_str());
        let request = desired.settings.create_request(scope.unwrap_or_default());
        client.workspaces().create(&request).await
    }
    fn compare(
        &self,
        desired: &Desired,
        remote: &RemoteWorkspace,
        _: &WorkspaceStatus,
    ) -> Comparison {
        let mut immutable = Vec::new();
        if let Some(slug) = &self.spec.slug
            && !remote.slug.is_empty()
            && &remote.slug != slug
        {
            immutable.push("slug");
        }
        Comparison {
            immutable,
            differs: desired.settings.diff(remote),
            inputs: Vec::new(),
        }
    }
    async fn update(
        &self,
        client: &Client,
        desired: &Desired,
        remote: &RemoteWorkspace,
    ) -> Put<Self> {
        client
            .workspaces()
            .update(&remote.id, &desired.settings.update_request())
            .await
    }
    /// Archives the workspace, then deletes the IAM scope aigw made for it (each "already
    /// gone" is done, so a retry after a failure between the two finishes the second).
    async fn delete(&self, at: Deleting<'_, Self>) -> Result<(), ApiError> {
        let client = at.client;
        match client.workspaces().archive(at.key).await {
            Err(e) if !e.is_not_found() => return Err(e),
            _ => {}
        }
        // The scope the status records, or (a workspace found again after a lost answer, not
        // recorded yet) the one this resource's create made: either carries its token.
        let Some(scope) = owned_scope(self, at.cx.ctx).filter(|s| {
            self.spec.slug.is_none() && at.status.scope_name.as_deref().is_none_or(|n| n == s.name)
        }) else {
            return Ok(());
        };
        match client.iam_scopes().get(&scope.name).await {
            Ok(found) if found.description == scope.marker => {}
            Ok(_) => return Ok(()),
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(e),
        }
        match client.iam_scopes().delete(&scope.name).await {
            Err(e) if !e.is_not_found() => Err(e),
            _ => Ok(()),
        }
    }
    /// The workspace an earlier create made: the one naming this resource's own IAM scope (which
    /// carries its ownership token), in a complete listing of the organisation's workspaces.
    async fn find_created(&self, cx: &Cx<'_, Self>, _: &WorkspaceStatus) -> Recovered<Self> {
        let Some(scope) = owned_scope(self, cx.ctx) else {
            return Ok(Lookup::Absent);
        };
        // A scope of the name that is someone else's refuses. One that is gone proves nothing:
        // an admin may have deleted it after the POST made the workspace naming it.
        owned(cx, &scope).await?;
        let listing = cx
            .read("list workspaces", |client| async move {
                client
                    .workspaces()
                    .listing(&WorkspacesListQuery::default())
                    .await
            })
            .await?;
        let ours = listing
            .items
            .into_iter()
            .filter(|w| w.scope_name.as_deref() == Some(scope.name.as_str()));
        Ok(Lookup::only(ours, listing.complete, "workspace"))
    }
}

/// The IAM scope this resource owns: named from its Kubernetes name and ownership token.
fn owned_scope(workspace: &Workspace, ctx: &Context) -> Option<OwnedScope> {
    let uid = workspace.meta().uid.as_deref()?;
    let token = ctx
        .hash_key
        .hash([b"aigw.io/workspace-scope".as_slice(), uid.as_bytes()]);
    Some(OwnedScope {
        name: scope_name(&workspace.name_any(), &token),
        marker: scope_marker(&token),
    })
}

fn require_scope(desired: &Desired) -> Result<&OwnedScope, Error> {
    desired.scope.as_ref().ok_or_else(|| {
        Error::MissingState("the Workspace has no uid to derive its IAM scope from".into())
    })
}

/// The scope `scope` names when it is this resource's (it carries the ownership token);
/// `None` when there is none; refused when one of that name is someone else's.
async fn owned(cx: &Cx<'_, Workspace>, scope: &OwnedScope) -> Result<Option<IamScope>, Halt> {
    let client = cx.api(Op::Read).await?;
    match client.iam_scopes().get(&scope.name).await {
        Ok(found) if found.description == scope.marker => Ok(Some(found)),
        Ok(_) => Err(Error::not_allowed(
            SCOPE_NOT_OURS,
            format!(
                "IAM scope {} exists and was not made by this Workspace (it lacks its owner token); aigw never takes a scope it did not make",
                scope.name
            ),
        ).into()),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(Error::api(format!("read IAM scope {}", scope.name), e).into()),
    }
}

/// The scope and slug to bind, for a workspace this resource created (none for an adopted one).
fn own_binding(
    workspace: &Workspace,
    ctx: &Context,
    status: &WorkspaceStatus,
) -> Option<(OwnedScope, String)> {
    if workspace.spec.slug.is_some() {
        return None;
    }
    let scope = owned_scope(workspace, ctx)?;
    let slug = status.slug.clone()?;
    (status.scope_name.as_deref() == Some(scope.name.as_str())).then_some((scope, slug))
}

/// The default config the spec's `defaults.configRef` resolves to, and why it is pending. The
/// Config is read from its watch cache, or (another shard's) from the apiserver.
async fn default_config(
    workspace: &Workspace,
    ctx: &Context,
) -> Result<(Option<DefaultConfig>, Option<String>), Error> {
    let Some(named) = workspace.spec.default_config_ref() else {
        return Ok((None, None));
    };
    let found = referenced::find_in::<Config>(ctx, &named.namespace, &named.name).await?;
    Ok(match found.and_then(|c| c.status.as_ref()?.id.clone()) {
        Some(id) => (Some(DefaultConfig::Id(id)), None),
        None => (
            Some(DefaultConfig::Pending),
            Some(format!(
                "spec.defaults.configRef names Config {}/{}, which has no remote config yet; the default is set once it is Ready",
                named.namespace, named.name
            )),
        ),
    })
}

/// Requeues a Workspace being deleted whenever an object of a kind that may name it (by UUID or
/// slug, or by `spec.workspaceRef`) changes or goes, so that its archive, which waits for them
/// (`StillReferenced`), goes on as soon as the last one lets go. A spec change or a deletion of
/// any one counts ([`Triggers::held_in`]): an edit that drops the reference shows only in the
/// new copy, which no longer names the Workspace.
pub fn watch_referrers(triggers: Triggers<'_, Workspace>) -> Triggers<'_, Workspace> {
    use crate::resources::{
        ApiKey, Deployment, Guardrail, McpIntegration, McpServer, Provider, RateLimitsPolicy,
        UsageLimitsPolicy,
    };
    // A live Workspace hears the Config its `defaults.configRef` names: the default is set
    // once that Config is Ready (or moved when it is made again).
    let triggers = triggers.held_in(None, |w: &Workspace, config: &Config| {
        w.spec
            .defaults
            .as_ref()
            .and_then(|d| d.config_ref.as_ref())
            .is_some_and(|named| {
                config.namespace().as_deref() == Some(named.namespace.as_str())
                    && config.name_any() == named.name
            })
    });
    let triggers = held_by::<RateLimitsPolicy>(triggers);
    let triggers = held_by::<UsageLimitsPolicy>(triggers);
    let triggers = held_by::<Guardrail>(triggers);
    let triggers = held_by::<ApiKey>(triggers);
    let triggers = held_by::<Provider>(triggers);
    let triggers = held_by::<McpServer>(triggers);
    let triggers = held_by::<McpIntegration>(triggers);
    held_by::<Deployment>(triggers)
}

/// [`watch_referrers`] for the objects of kind `K`, of every watched namespace: a Workspace
/// being deleted hears a spec change or a deletion of one ([`Triggers::held_in`]; a live one,
/// none).
fn held_by<K: Managed>(triggers: Triggers<'_, Workspace>) -> Triggers<'_, Workspace> {
    triggers.held_in(None, |_: &Workspace, _: &K| false)
}
