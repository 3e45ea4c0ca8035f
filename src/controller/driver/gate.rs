//! The one gate in front of the management API. Every call made for a resource (apply,
//! observe, the drift read, cleanup, rotation) gets its client here, and only after the gate has
//! decided, for that resource and that operation:
//! - whether this replica may act now: it leads, and for a write its lease is within the renew
//!   deadline ([`crate::controller::Leadership::may_write`]), checked again right before the request leaves
//!   the process (the client handed out is guarded);
//! - whether this installation may act on it: its status records this installation and its
//!   `aigw.io/installation` annotation does not name another (`ClaimChanged`,
//!   [`crate::controller::state::installation`]); a deletion is still cleaned up;
//! - whether the resource owns the remote object ([`crate::controller::state::claims`]);
//! - whether its namespace may reach that object through its Connection: the namespace, the
//!   workspaces, adoption, and `allowDefault` for an organisation-wide object. A
//!   cluster-scoped object has no namespace and no grant applies to it: Kubernetes RBAC on the
//!   cluster-scoped kind decides who can make one;
//! - for an update of a spec not applied yet, whether its promotion gate (`spec.promotion`)
//!   lets the change through ([`crate::controller::driver::promotion`]).
//!
//! The client is reachable only through [`Gate::client`], so a kind cannot call the API without
//! asking, and a new path cannot forget a rule. Deletion asks the same gate: a resource that
//! never managed its object, or that the rules refuse, releases it without a call.

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;

use crate::api::Client;
use crate::controller::Context;
use crate::controller::driver::Managed;
use crate::controller::driver::promotion::{self, Decision};
use crate::controller::error::{Error, Halt, Wait};
use crate::controller::state::claims::owned_by_another;
use crate::controller::state::connections::{INTEGRATIONS, Resolved, Scope};
use crate::resources::common::CreateAttempt;

/// What a call does to the remote object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// GET or list: changes nothing remotely.
    Read,
    /// POST of a new object.
    Create,
    /// PUT of a changed object.
    Update,
    /// DELETE (or archive).
    Delete,
    /// A credential rotation (a PUT that mints new secrets).
    Rotate,
}

impl Op {
    /// True for every operation that changes something remotely.
    pub fn writes(self) -> bool {
        self != Op::Read
    }
}

/// How long a reconcile waits for every watch cache of its kind to list before it gives up
/// deciding ownership (and tries again later).
pub const CACHES_LISTED_WITHIN: Duration = Duration::from_secs(2);

/// The gate for one resource during one reconcile.
pub struct Gate<'a, K: Managed> {
    ctx: &'a Context,
    object: &'a K,
    /// What the kind is about to write, for a `--dry-run` report ([`Gate::intend`]).
    intended: std::sync::Mutex<Option<String>>,
    /// The Connection resolved for this object, its client guarded by the lease.
    resolved: tokio::sync::OnceCell<Resolved>,
    /// What the promotion gate decided for this reconcile's update, when it was asked.
    promotion: std::sync::Mutex<Option<Decision>>,
    /// A client was handed out: the reconcile has started its calls.
    started: std::sync::atomic::AtomicBool,
    /// The Connection's line told this reconcile to start ([`Gate::take_turn`]).
    told: std::sync::atomic::AtomicBool,
}

impl<'a, K: Managed> Gate<'a, K> {
    pub fn new(ctx: &'a Context, object: &'a K) -> Self {
        Self {
            ctx,
            object,
            intended: Default::default(),
            resolved: tokio::sync::OnceCell::new(),
            promotion: Default::default(),
            started: Default::default(),
            told: Default::default(),
        }
    }

    /// The client for `op` on this resource's remote object, once every rule allows it.
    pub async fn client(&self, op: Op) -> Result<&Client, Halt> {
        self.leads(op)?;
        self.admit().await?;
        if op == Op::Update || (op == Op::Create && self.recreates()) {
            self.promote(op).await?;
        }
        if self.ctx.dry_run && op.writes() {
            return Err(self.would(op).into());
        }
        Ok(&self.resolve().await?.client)
    }

    /// Called before the first call of a reconcile that has written nothing yet
    /// ([`super::Cx::api`]): when the Connection's rate limiter is backlogged, the reconcile
    /// leaves for its place in its namespace's line at that Connection ([`Wait::Throttled`],
    /// [`Client::turn`]) instead of holding its kind's slot while it waits, so that a backlog
    /// behind one slow Connection does not stop other Connections' objects, nor one
    /// namespace's backlog another's objects on the same Connection. A reconcile that has
    /// started its calls, or written anything (a create or rotation intent, a status), waits
    /// for the limiter as before.
    pub fn take_turn(&self) -> Result<(), Wait> {
        use std::sync::atomic::Ordering::SeqCst;
        let Some(resolved) = self.resolved.get() else {
            return Ok(());
        };
        if self.ctx.dry_run || self.started.swap(true, SeqCst) {
            return Ok(());
        }
        match resolved.client.turn() {
            Some(look_again_in) => Err(Wait::Throttled {
                connection: format!("Connection {}", resolved.scope.connection),
                look_again_in,
            }),
            None => {
                self.told.store(true, SeqCst);
                Ok(())
            }
        }
    }

    /// Says what the next write will do (e.g. "update config pc-x at /config/retry"), for the
    /// `Would…` event of a `--dry-run`.
    pub fn intend(&self, what: String) {
        *self.intended.lock().unwrap_or_else(|e| e.into_inner()) = Some(what);
    }

    /// The `--dry-run` refusal of `op`, saying what it would have done.
    fn would(&self, op: Op) -> Wait {
        let reason = match op {
            Op::Create => "WouldCreate",
            Op::Update | Op::Read => "WouldUpdate",
            Op::Delete => "WouldDelete",
            Op::Rotate => "WouldRotate",
        };
        let intended = self
            .intended
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let message = intended.unwrap_or_else(|| {
            format!(
                "would {} the remote object of {} {}",
                reason.trim_start_matches("Would").to_ascii_lowercase(),
                K::KIND,
                self.object.name_any()
            )
        });
        Wait::DryRun { reason, message }
    }

    /// The rules that need no API call: the Connection's grants, then ownership. `Ok` when
    /// this resource may act on its remote object.
    pub async fn admit(&self) -> Result<(), Halt> {
        let object = self.object;
        let stores = &self.ctx.stores;
        let kind_listed = K::stores(stores)
            .listed(self.ctx.stores_of::<K>(), CACHES_LISTED_WITHIN)
            .await;
        // The Connections decide which others reach the same tenant.
        if !kind_listed || !stores.connections.listed(1, CACHES_LISTED_WITHIN).await {
            return Err(Wait::CachesNotReady(format!(
                "the watch caches of {} and Connections have not listed every watched namespace yet, so ownership cannot be decided; waiting",
                K::KIND
            ))
            .into());
        }
        self.claim_unchanged()?;
        // Grants first: a refused resource reports its refusal (and ranks last among the
        // claimants), whatever else claims the object.
        self.granted().await?;
        let peers = self.same_tenant();
        if let Some(owner) = owned_by_another(object, &self.ctx.stores, &peers) {
            let namespace = object.namespace();
            return Err(Error::AlreadyManaged(already_managed(
                K::KIND,
                namespace.as_deref(),
                &owner,
            ))
            .into());
        }
        Ok(())
    }

    /// Refuses every call for an object whose `aigw.io/installation` annotation was rewritten
    /// to another installation than the one its status records (this one): neither writes
    /// remotely until the annotation names this installation again. The installation its
    /// status records still cleans up its deletion (`deletionPolicy`), so an annotation
    /// naming an installation nobody runs holds no deletion up.
    fn claim_unchanged(&self) -> Result<(), Error> {
        use crate::controller::state::installation::{ANNOTATION, CLAIM_CHANGED};
        if self.object.meta().deletion_timestamp.is_some() {
            return Ok(());
        }
        let Some(named) = self.ctx.installation.claim_changed(self.object) else {
            return Ok(());
        };
        let me = self.ctx.installation.id();
        Err(Error::not_allowed(
            CLAIM_CHANGED,
            format!(
                "the annotation {ANNOTATION} names installation {named:?}, but this {kind}'s status records installation {me:?}, which manages its remote object: {me:?} makes no API call for it until the annotation names {me:?} again (restoring it resumes), and {named:?} does not take it; deleting the {kind} is still cleaned up by {me:?}",
                kind = K::KIND
            ),
        ))
    }

    /// What the Connection's grants allow this namespace: the Connection itself, the
    /// workspaces the object names, an adoption, an organisation-wide default. `Ok` when all
    /// of it is granted.
    pub async fn granted(&self) -> Result<(), Error> {
        let object = self.object;
        let scope = &self.resolve().await?.scope;
        let resource = workspace_resources(self.ctx);
        for (field, workspace) in object.workspaces() {
            let checked = scope.check_workspace_by(field, workspace.as_deref(), &resource);
            match (checked, object.workspace_ref()) {
                // Named by resource: the refusal names the resource, never the UUID it stands
                // for (a namespace learns nothing of a workspace it is not granted).
                (Err(Error::NotAllowed { reason, .. }), Some(name))
                    if field == "spec.workspaceRef" =>
                {
                    return Err(Error::not_allowed(
                        reason,
                        format!(
                            "spec.workspaceRef {name} names a workspace that is not among the workspaces this namespace may manage through Connection {} (spec.grants[].workspaces)",
                            object.connection_name()
                        ),
                    ));
                }
                (checked, _) => checked?,
            }
        }
        if let Some((field, id)) = object.adopted() {
            scope.check_adoption(field, &id)?;
        }
        if let Some(field) = object.organisation_wide() {
            scope.check_default(&format!(
                "{field} makes this gateway the organisation's default"
            ))?;
        }
        Ok(())
    }

    /// True when this resource wrote its remote object before (`status.history` lists it):
    /// creating it again publishes the spec as much as an update does. Only the first create
    /// passes the promotion gate unasked: nothing uses that object yet.
    fn recreates(&self) -> bool {
        self.object
            .status()
            .is_some_and(|status| !K::history(status).is_empty())
    }

    /// The promotion gate, for an update or a create again: the change passes, or the error
    /// says why it waits (`Soaking`, `SourceNotReady`) or is refused. What it decided is kept
    /// for the status.
    async fn promote(&self, op: Op) -> Result<(), Halt> {
        let scope = &self.resolve().await?.scope;
        let decided = promotion::decide(self.ctx, self.object, scope).await.map_err(|held| {
            if op != Op::Create {
                return held;
            }
            promotion::with_note(
                held,
                "(the remote object is gone: it is created again, with this change, once the gate opens, or at once when aigw.io/promote-now names the revision)",
            )
        });
        let kept = match &decided {
            Ok(decision) => decision.clone(),
            Err(error) => Some(Decision::held(error)),
        };
        *self.promotion.lock().unwrap_or_else(|e| e.into_inner()) = kept;
        decided.map(|_| ())
    }

    /// What the promotion gate decided in this reconcile, if it was asked.
    pub fn promotion(&self) -> Option<Decision> {
        self.promotion
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// An object read through an adoption lives in `workspace`: its namespace must be granted
    /// that workspace too, or nothing read from it may be used.
    pub async fn reach(&self, what: &str, workspace: Option<&str>) -> Result<(), Error> {
        let resource = workspace_resources(self.ctx);
        self.resolve()
            .await?
            .scope
            .check_workspace_by(what, workspace, resource)
    }

    /// True when another resource records or names the remote object `id` (through any
    /// Connection to this tenant): a create lookup never takes such an object for its own.
    pub fn claimed_elsewhere(&self) -> impl Fn(&str) -> bool + '_ {
        let peers = self.same_tenant();
        move |id| K::stores(&self.ctx.stores).claimed_by_other(self.object, &peers, id)
    }

    /// True when another resource of this installation reaching this tenant has a create in
    /// flight that sent the same name (and workspace): an object a lookup finds by name may be
    /// that one's, whose id has not been recorded yet. Another installation's objects count for
    /// nothing here (their status is no proof of a create, and would hold this one's lookups);
    /// what they made is told apart by its marker, or taken only under the adoption grant.
    /// Read from the claim index, which sees every namespace (with `--shards` too).
    pub fn attempts_elsewhere(&self, sent: &CreateAttempt) -> bool {
        let peers = self.same_tenant();
        K::stores(&self.ctx.stores).attempted_elsewhere(self.object, &peers, sent)
    }

    /// Adopting the existing remote object `id` (found where the spec named an identity to create
    /// with, such as a provider's slug) needs `allowAdoption`.
    pub async fn adopting(&self, field: &str, id: &str) -> Result<(), Error> {
        self.resolve().await?.scope.check_adoption(field, id)
    }

    /// Binding the integration `keys` name (resource name, slug, UUID) into a workspace needs
    /// a grant of it (`spec.grants[].integrations`).
    pub async fn binding(&self, field: &str, keys: &[String]) -> Result<(), Error> {
        self.resolve().await?.scope.check_integration(field, keys)
    }

    /// What the Connection's grants let this object's namespace do, for a check the gate has
    /// no verb of its own for (an McpServer's `spec.grants[].mcpIntegrations`).
    pub async fn grants(&self) -> Result<&Scope, Error> {
        Ok(&self.resolve().await?.scope)
    }

    /// Binding the remote integration `keys` name (its UUID and slug only) needs a grant of
    /// it: a grant entry naming an Integration resource stands for the integration that
    /// resource recorded.
    pub async fn binding_remote(
        &self,
        field: &str,
        keys: &[String],
        resource: impl Fn(&str) -> Option<Vec<String>>,
    ) -> Result<(), Error> {
        let scope = &self.resolve().await?.scope;
        scope.check_listed(&INTEGRATIONS, field, keys, resource)
    }

    /// An adopted object that is organisation-wide (the default gateway) needs `allowDefault`.
    pub async fn reach_default(&self, what: &str) -> Result<(), Error> {
        self.resolve().await?.scope.check_default(what)
    }

    /// Whether deleting this resource may touch its remote object. `Ok(None)`: go ahead.
    /// `Ok(Some(why))`: release it without a call, for the reason given (it never managed the
    /// object, another resource owns it, or a grant refuses it). `Err`: not decidable now.
    pub async fn release_reason(&self) -> Result<Option<String>, Halt> {
        if !self.object.manages() {
            return Ok(Some(format!(
                "this {} never created or adopted a remote object",
                K::KIND
            )));
        }
        match self.admit().await {
            Ok(()) => Ok(None),
            Err(Halt::Fail(e @ (Error::AlreadyManaged(_) | Error::NotAllowed { .. }))) => {
                Ok(Some(e.to_string()))
            }
            Err(e) => Err(e),
        }
    }

    /// Before a write that is not a management-API call but must not come from a deposed
    /// leader either (a rotation's Secret write).
    pub fn may_write(&self) -> Result<(), Wait> {
        self.leads(Op::Update)?;
        match self.ctx.dry_run {
            true => Err(self.would(Op::Update)),
            false => Ok(()),
        }
    }

    fn leads(&self, op: Op) -> Result<(), Wait> {
        let leadership = self.ctx.leadership.for_object(self.object.meta());
        let verdict = match op.writes() {
            true => leadership.may_write(),
            false if leadership.acts_on(self.object.meta()) => Ok(()),
            false => Err("this replica does not reconcile this object now".to_string()),
        };
        verdict.map_err(Wait::NotLeader)
    }

    /// The names of the Connections that reach this object's tenant, its own first.
    fn same_tenant(&self) -> Vec<String> {
        tenant_peers(self.ctx, self.object.connection_name())
    }

    async fn resolve(&self) -> Result<&Resolved, Error> {
        self.resolved
            .get_or_try_init(|| {
                let namespace = self.object.namespace();
                let guard = self.ctx.leadership.for_object(self.object.meta());
                let connection = self.object.connection_name();
                async move {
                    let mut resolved =
                        resolve_guarded(self.ctx, connection, namespace, guard).await?;
                    let key = super::object_key(self.object);
                    resolved.client = resolved.client.working_on(&key);
                    Ok(resolved)
                }
            })
            .await
    }
}

impl<K: Managed> Drop for Gate<'_, K> {
    /// A reconcile told to start at its Connection ([`Gate::take_turn`]) that ended before its
    /// first request no longer counts in the Connection's line.
    fn drop(&mut self) {
        if let Some(resolved) = self.resolved.get().filter(|_| *self.told.get_mut()) {
            resolved.client.finished();
        }
    }
}

/// What a grant entry naming a Workspace resource stands for: the UUID and slug that resource
/// recorded (`None` for a name no Workspace of the cluster has).
pub fn workspace_resources(ctx: &Context) -> impl Fn(&str) -> Option<Vec<String>> + use<> {
    let workspaces = ctx.stores.of::<crate::resources::Workspace>().all();
    move |name| {
        let found = workspaces.iter().find(|w| w.name_any() == name)?;
        let status = found.status.as_ref();
        Some(
            [
                status.and_then(|s| s.id.clone()),
                status.and_then(|s| s.slug.clone()),
            ]
            .into_iter()
            .flatten()
            .collect(),
        )
    }
}

/// The tenant id (the TSG) Connection `name` reaches, when it can be told (an `x-tsg-id` header
/// or a `tsg_id:` scope): what writes that take the numeric TSG as `organisation_id` send.
pub fn tenant_id(ctx: &Context, name: &str) -> Option<String> {
    let all = ctx.stores.connections.all();
    let found = all.iter().find(|c| c.name_any() == name).map(|c| &**c);
    ctx.connections.tenant_of(name, found).and_then(|t| t.id)
}

/// The names of the Connections that reach the tenant Connection `own` reaches, `own` first
/// (from the watch cache).
pub fn tenant_peers(ctx: &Context, own: &str) -> Vec<String> {
    let own = own.to_string();
    let connections = &ctx.connections;
    let all = ctx.stores.connections.all();
    let find = |name: &str| all.iter().find(|c| c.name_any() == name).map(|c| &**c);
    let Some(tenant) = connections.tenant_of(&own, find(&own)) else {
        return vec![own];
    };
    let mut peers = vec![own.clone()];
    let names = all
        .iter()
        .map(|c| c.name_any())
        .chain(std::iter::once("default".to_string()));
    for name in names {
        if name != own
            && !peers.contains(&name)
            && connections
                .tenant_of(&name, find(&name))
                .is_some_and(|theirs| theirs.may_be(&tenant))
        {
            peers.push(name);
        }
    }
    peers
}

/// Connection `name` as used by the objects of `namespace` (its grants for them; none for a
/// cluster-scoped object), with a client whose writes the lease guards.
async fn resolve_guarded(
    ctx: &Context,
    name: &str,
    namespace: Option<String>,
    guard: crate::controller::Leadership,
) -> Result<Resolved, Error> {
    let cached = ctx.stores.connections.find(name).await;
    let mut resolved = ctx
        .connections
        .client_for(namespace.as_deref(), name, cached)
        .await?;
    let client = resolved
        .client
        .queued(namespace.as_deref().unwrap_or_default());
    resolved.client = match ctx.dry_run {
        // Whatever a caller declared, a dry run's client sends no write.
        true => client.guarded(Arc::new(DryRunGuard)),
        false => client.guarded(Arc::new(guard)),
    };
    Ok(resolved)
}

/// The guard of a `--dry-run` client: every write is withheld, at the last moment too.
struct DryRunGuard;

impl crate::api::WriteGuard for DryRunGuard {
    fn may_write(&self) -> Result<(), String> {
        Err("--dry-run: this operator writes nothing".into())
    }
}

/// The client for the drift pass's list of one Connection and workspace, as used by the
/// objects of `namespace`: a read, so it needs leadership and the namespace's grants; the
/// objects it shows changed are then read one by one through their own [`Gate`].
pub async fn list_client(
    ctx: &Context,
    connection: &str,
    namespace: Option<&str>,
) -> Result<Client, Halt> {
    if !ctx.leadership.is_leader() {
        return Err(Wait::NotLeader("this replica is not the leader".into()).into());
    }
    Ok(
        // A list is a read: with --shards its guard (made for no object) lets no write out.
        resolve_guarded(
            ctx,
            connection,
            namespace.map(str::to_string),
            ctx.leadership.clone(),
        )
        .await?
        .client
        // Lists are nobody's objects: they count towards the Connection's backlog, but never
        // send one namespace's reconciles to the line on their own.
        .queued(LISTS),
    )
}

/// The queue of the lists' requests in a Connection's line ([`Client::turn`]): no namespace is
/// named so.
const LISTS: &str = "(lists)";

/// The `AlreadyManaged` message of a `kind` resource in `namespace` (`None`: cluster-scoped)
/// whose remote object `owner` (`namespace/name`, the namespace empty when cluster-scoped)
/// manages. The owner is named only when it sits in the same namespace (or is cluster-scoped
/// like this one): a resource of another namespace is another tenant's, whose names are not
/// this tenant's to learn from its own status and events. A cluster admin finds it with `aigw`
/// or by the resources' labels.
pub(crate) fn already_managed(kind: &str, namespace: Option<&str>, owner: &str) -> String {
    let here = namespace.unwrap_or_default();
    match owner.split_once('/') {
        Some((theirs, _)) if theirs == here => format!(
            "the remote object this {kind} names is managed by {kind} {owner}; this one makes no API call until that one is gone"
        ),
        _ => format!(
            "the remote object this {kind} names: another resource on this Connection manages it (not in this namespace); this one makes no API call until that one is gone"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::already_managed;

    /// Tenant b's resource stalled on tenant a's object learnt the owner's namespace and name
    /// (attack on issue 27); an owner of its own namespace, or a cluster-scoped one of a
    /// cluster-scoped resource, is still named.
    #[test]
    fn already_managed_names_the_owner_only_in_the_same_namespace() {
        let foreign = already_managed("Config", Some("team-b"), "team-a/routing");
        assert!(!foreign.contains("team-a"), "{foreign}");
        assert!(
            foreign.contains("another resource on this Connection manages it"),
            "{foreign}"
        );
        let own = already_managed("Config", Some("team-b"), "team-b/routing");
        assert!(own.contains("managed by Config team-b/routing"), "{own}");
        let cluster = already_managed("Integration", None, "/openai");
        assert!(
            cluster.contains("managed by Integration /openai"),
            "{cluster}"
        );
        let namespaced = already_managed("Guardrail", Some("team-b"), "/org-pii");
        assert!(!namespaced.contains("org-pii"), "{namespaced}");
    }
}
