//! McpServer (namespaced): a workspace's instance of an MCP integration. The verbs of the kind
//! ([`Verbs`]); the driver observes, creates once, updates, and deletes.
//!
//! - The integration is an McpIntegration resource (`spec.integrationRef`, from the watch
//!   cache: Ready, of the server's tenant, and enabling the server's workspace) or a remote one
//!   (`spec.integrationId`, whose workspace rows are read before a create). Until then the
//!   server waits (`IntegrationNotReady`) and nothing is written: the API would refuse the
//!   create. The McpIntegration's own watch requeues it ([`watch_inputs`]).
//! - The detail read has no `workspace_id` (FACTS-rest §6): [`OwnCalls::observe`] takes it from
//!   the list row of the server's id, so a server of another workspace is refused (immutable),
//!   not adopted.
//! - A PUT sends `name` and `description` only and answers `{id, slug, object}`: nothing of
//!   the answer but the id is kept. The delete is hard.
//! - User access (`/user-access`) is a sub-resource ([`Verbs::sync_sub_resources`]): one PUT
//!   of the rows and default that differ, other users' rows never sent.
//!
//! Not a listed kind: each reconcile (once per drift interval) reads the server.

mod references;
pub use references::{naming, watch_inputs, watch_servers};

use crate::api::{self, ApiError, Client, McpServer as RemoteServer, McpServersListQuery, Reading};
use crate::controller::Context;
use crate::controller::driver::calls::{Deleting, Own, OwnCalls, Post, Put, Read, Recovered};
use crate::controller::driver::create::in_workspace;
use crate::controller::driver::echoes::{Echoable, unless_listed};
use crate::controller::driver::gate::Op;
use crate::controller::driver::referenced::{Ref, bound, ready_named, recorded_keys};
use crate::controller::driver::verbs::{
    Changes, Comparison, Differing, Inputs, Made, Release, Verbs,
};
use crate::controller::driver::{Cx, Managed};
use crate::controller::error::{Error, Halt};
use crate::controller::kinds::bound::{Bound, recorded_keys_of, released};
use crate::controller::kinds::keyed;
use crate::controller::kinds::sub_resources::Part;
use crate::controller::state::connections::MCP_INTEGRATIONS;
use crate::resources::common::{CreateAttempt, Recorded};
use crate::resources::mcp_server::{McpServer, McpServerStatus, user_access_update};
use crate::resources::{McpIntegration, Workspace};

/// The sub-resource, as messages name it, and the reason of its writes.
const ACCESS: Part = Part::new("user access", "AccessUpdated");

/// Condition reason while the MCP integration a server instantiates is not ready for it.
pub const INTEGRATION_NOT_READY: &str = "IntegrationNotReady";

impl Managed for McpServer {
    crate::controller::driver::kind::namespaced_api!();
    const KIND: &'static str = "McpServer";

    crate::controller::driver::flow::driven!();
}

/// The integration a server instantiates, sent as `mcp_integration_id`.
type Instantiates = Bound;

impl Verbs for McpServer {
    type Desired = Instantiates;
    type Calls = Own;

    /// The configurations Secret of the McpIntegration resource it instantiates (by name, or
    /// by the id or slug that resource recorded): the API keeps the integration's headers and
    /// tokens and may quote them in a refusal about the server.
    fn echoable(&self, ctx: &Context) -> Vec<Echoable> {
        let name = self.spec.integration_ref.as_ref().map(|r| r.name.as_str());
        let key = self.spec.integration_id.as_deref();
        let bound = bound::<McpIntegration>(ctx, name, key);
        let configurations = bound.and_then(|i| i.spec.configurations_secret_ref.clone());
        configurations
            .map(|r| Echoable::ClusterReadable {
                name: r.name,
                namespace: r.namespace,
                key: None,
            })
            .into_iter()
            .chain(unless_listed::<McpIntegration>(ctx))
            .collect()
    }

    async fn resolve(&self, cx: &Cx<'_, Self>, _: &mut McpServerStatus) -> Inputs<Self> {
        let instantiates = match (&self.spec.integration_ref, &self.spec.integration_id) {
            (_, Some(given)) => remote_integration(cx, given).await?,
            (Some(named), None) => ready_integration(self, cx.ctx, &named.name)?,
            (None, None) => {
                return Err(Error::InvalidSpec(
                    "set spec.integrationRef or spec.integrationId".into(),
                )
                .into());
            }
        };
        integration_granted(self, cx, &instantiates.keys).await?;
        Ok(instantiates)
    }
    /// Without an API call: the integration as the status and the caches tell.
    async fn observed_inputs(
        &self,
        cx: &Cx<'_, Self>,
        status: &mut McpServerStatus,
    ) -> Inputs<Self> {
        Ok(Instantiates {
            id: None,
            keys: integration_keys(self, cx.ctx, status),
        })
    }
    /// A server of the slug in another workspace or of another integration.
    fn not_adoptable(&self, desired: &Instantiates, remote: &RemoteServer) -> Option<String> {
        let conflicts = |keys: &[&str]| self.spec.immutable_conflicts(remote, keys);
        desired.not_adoptable(conflicts, "this McpServer names")
    }
    async fn before_create(&self, cx: &Cx<'_, Self>, desired: &Instantiates) -> Result<(), Halt> {
        match (&self.spec.integration_id, &desired.id) {
            (Some(_), Some(id)) => check_remote_access(self, cx, id).await,
            _ => Ok(()),
        }
    }
    /// A namespace no longer granted the integration releases its server without a call, as
    /// for a revoked workspace: a delete reaches the integration as much as an update.
    async fn release(&self, cx: &Cx<'_, Self>, _key: &str, status: &McpServerStatus) -> Release {
        let keys = integration_keys(self, cx.ctx, status);
        released(integration_granted(self, cx, &keys).await)
    }
    fn record(status: &mut McpServerStatus, remote: Option<&RemoteServer>) {
        keyed::record(status, remote);
    }
    fn record_compared(&self, status: &mut McpServerStatus, desired: &Instantiates) {
        desired.record(&mut status.integration_id);
    }
    fn record_created(
        &self,
        status: &mut McpServerStatus,
        _desired: &Instantiates,
        created: Made<Self>,
    ) -> String {
        keyed::record_created(status, None, created)
    }
    /// The answer is `{id, slug, object}` only: nothing of it is recorded.
    fn record_updated(
        &self,
        status: &mut McpServerStatus,
        _: &Instantiates,
        _: &RemoteServer,
        _: api::Created,
    ) {
        keyed::record_updated(status, None);
    }
    /// User access: one PUT of the rows and default that differ.
    async fn sync_sub_resources(&self, cx: &Cx<'_, Self>, status: &mut McpServerStatus) -> Changes {
        let Some(key) = status.id.clone() else {
            return Ok(Vec::new());
        };
        let Some(update) = access_differs(self, cx.api(Op::Read).await?, &key).await? else {
            return Ok(Vec::new());
        };
        let (key, what) = (key.as_str(), access_shown(&update));
        let change = ACCESS
            .write(cx, (key, &what), |client| async move {
                client.mcp_servers().update_user_access(key, &update).await
            })
            .await?;
        Ok(vec![change])
    }
    async fn sub_resources_differ(&self, cx: &Cx<'_, Self>, status: &McpServerStatus) -> Differing {
        let Some(key) = status.id.clone() else {
            return Ok(Vec::new());
        };
        let differs = access_differs(self, cx.api(Op::Read).await?, &key).await?;
        Ok(differs.map(|_| vec!["userAccess"]).unwrap_or_default())
    }
}

impl OwnCalls for McpServer {
    type Remote = RemoteServer;
    type Found = RemoteServer;
    type Posted = api::Created;
    type Updated = api::Created;
    /// The detail, with the workspace its list row tells (the detail omits it; a row not
    /// listed yet leaves it unknown, and so not compared).
    async fn observe(&self, client: &Client, key: &str, _: &McpServerStatus) -> Read<Self> {
        let mut detail = client.mcp_servers().get(key).await?;
        let query = McpServersListQuery {
            ids: vec![detail.id.clone()],
            ..Default::default()
        };
        let rows = client.mcp_servers().list(&query).await?;
        if let Some(row) = rows.into_iter().find(|r| r.id == detail.id) {
            detail.workspace_id = row.workspace_id;
            detail.workspace_slug = row.workspace_slug;
            detail.mcp_integration_slug = row.mcp_integration_slug;
        }
        Ok(Some(detail))
    }
    fn sent(&self, cx: &Cx<'_, Self>, desired: &Instantiates) -> CreateAttempt {
        let request = self
            .spec
            .create_request(desired.id.as_deref().unwrap_or_default());
        cx.create_attempt(
            Some(self.spec.name.clone()),
            Some(self.spec.workspace().to_string()),
            &request,
        )
    }
    async fn create(&self, client: &Client, desired: &Instantiates) -> Post<Self> {
        let request = self
            .spec
            .create_request(desired.id.as_deref().unwrap_or_default());
        client.mcp_servers().create(&request).await
    }
    fn compare(
        &self,
        desired: &Instantiates,
        remote: &RemoteServer,
        _: &McpServerStatus,
    ) -> Comparison {
        Comparison {
            immutable: self.spec.immutable_conflicts(remote, &desired.keys()),
            differs: self.spec.update_for(remote).0,
            inputs: Vec::new(),
        }
    }
    async fn update(&self, client: &Client, _: &Instantiates, remote: &RemoteServer) -> Put<Self> {
        let (_, update) = self.spec.update_for(remote);
        client.mcp_servers().update(&remote.id, &update).await
    }
    async fn delete(&self, at: Deleting<'_, Self>) -> Result<(), ApiError> {
        at.client.mcp_servers().delete(at.key).await
    }
    /// The server an earlier create made: in its workspace, the one with `spec.slug` (and the name
    /// it sent), else the one with the name it sent, created within its window, claimed by no
    /// other resource, in a complete listing.
    async fn find_created(&self, cx: &Cx<'_, Self>, status: &McpServerStatus) -> Recovered<Self> {
        let spec = &self.spec;
        let query = McpServersListQuery {
            workspace_id: Some(spec.workspace().to_string()),
            ..Default::default()
        };
        let slug = spec.slug.as_deref();
        let identity = (slug, spec.name.as_str(), spec.workspace());
        // A slug is unique but chosen by whoever creates: found with it (and the name sent),
        // the server may still be another party's, so nothing proves it this create's.
        let unproven = |s: &RemoteServer| Some(format!("MCP server {} ({})", s.slug, s.id));
        in_workspace(cx, status, identity, unproven, |client| async move {
            client.mcp_servers().listing(&query, Reading::Proof).await
        })
        .await
    }
}

/// The user-access PUT the spec needs, read from the API (`None`: none, or the spec manages no
/// user access).
async fn access_differs(
    server: &McpServer,
    client: &Client,
    key: &str,
) -> Result<Option<api::UpdateUserAccessRequest>, Error> {
    let spec = &server.spec;
    if spec.default_user_access.is_none() && spec.user_access.is_empty() {
        return Ok(None);
    }
    let servers = client.mcp_servers();
    let read = ACCESS.read::<McpServer, _>(key, servers.user_access(key));
    let read = read.await?;
    Ok(user_access_update(spec, &read))
}

/// `default deny; u1 enabled, u2 disabled`.
fn access_shown(update: &api::UpdateUserAccessRequest) -> String {
    let mut parts: Vec<String> = update
        .default_user_access
        .iter()
        .map(|d| format!("default {d}"))
        .collect();
    let rows: Vec<String> = update
        .user_access
        .iter()
        .map(|u| {
            let state = if u.enabled { "enabled" } else { "disabled" };
            format!("{} {state}", u.user_id)
        })
        .collect();
    if !rows.is_empty() {
        parts.push(rows.join(", "));
    }
    parts.join("; ")
}

/// What a read may name the server's integration by, without an API call: the UUID and slug
/// the McpIntegration resource recorded, or `spec.integrationId` and the UUID it was resolved
/// to (`status.integrationId`).
fn integration_keys(server: &McpServer, ctx: &Context, status: &McpServerStatus) -> Vec<String> {
    let spec = &server.spec;
    let by_name = spec.integration_ref.as_ref().map(|r| r.name.as_str());
    let given = spec.integration_id.as_ref();
    recorded_keys_of::<McpIntegration>(ctx, by_name, given, status.integration_id.as_ref())
}

/// The UUID (and keys) of McpIntegration `name`, once this server may instantiate it: Ready, of
/// the server's tenant, and enabling the server's workspace (by its UUID or the slug its
/// Workspace resource recorded); else why it waits.
fn ready_integration(server: &McpServer, ctx: &Context, name: &str) -> Result<Bound, Halt> {
    let by = Ref::new(name, "spec.integrationRef", INTEGRATION_NOT_READY);
    let (integration, id) = ready_named::<McpIntegration, _>(server, ctx, &by, |s| s.id.clone())?;
    let workspace = server.spec.workspace();
    let mut names = vec![workspace.to_string()];
    names.extend(
        ctx.stores
            .of::<Workspace>()
            .all()
            .iter()
            .filter_map(|w| w.status.as_ref())
            .filter(|s| s.remote_keys().contains(&workspace))
            .flat_map(Recorded::remote_key_strings),
    );
    let status = integration.status.clone().unwrap_or_default();
    if !status.workspaces.iter().any(|w| names.contains(w)) {
        return Err(by.waiting(format!(
            "{} does not enable workspace {workspace} (its spec.workspaces); the server is created once it does",
            by.what::<McpIntegration>()
        ))
        .into());
    }
    let keys = [Some(id.clone()), status.slug].into_iter().flatten();
    Ok(Bound {
        id: Some(id),
        keys: keys.collect(),
    })
}

/// Whether the Connection's grants let this namespace instantiate the integration `keys` name
/// (`spec.grants[].mcpIntegrations`): an entry naming an McpIntegration resource stands for the
/// UUID and slug it recorded; `spec.integrationRef` is also granted by the resource's name.
async fn integration_granted(
    server: &McpServer,
    cx: &Cx<'_, McpServer>,
    keys: &[String],
) -> Result<(), Error> {
    let mut named_by = Vec::new();
    let field = match (&server.spec.integration_ref, &server.spec.integration_id) {
        (_, Some(_)) => "spec.integrationId",
        (Some(by), None) => {
            named_by.push(by.name.clone());
            "spec.integrationRef"
        }
        (None, None) => return Ok(()),
    };
    named_by.extend(keys.iter().cloned());
    let resource = |entry: &str| recorded_keys::<McpIntegration>(cx.ctx, entry);
    cx.gate
        .grants()
        .await?
        .check_listed(&MCP_INTEGRATIONS, field, &named_by, resource)
}

/// The remote integration `spec.integrationId` names (UUID or slug), read to learn both its
/// keys; unreadable (a Connection without admin rights), it is sent as given.
async fn remote_integration(cx: &Cx<'_, McpServer>, given: &str) -> Result<Instantiates, Halt> {
    match cx.api(Op::Read).await?.mcp_integrations().get(given).await {
        Ok(found) => {
            let id = Some(found.id.clone()).filter(|i| !i.is_empty());
            let id = id.unwrap_or_else(|| given.to_string());
            let mut keys = vec![id.clone()];
            keys.extend(Some(found.slug).filter(|s| !s.is_empty() && *s != id));
            Ok(Instantiates { id: Some(id), keys })
        }
        Err(e) if e.is_not_found() => Err(Error::not_allowed(
            INTEGRATION_NOT_READY,
            format!("MCP integration {given} named by spec.integrationId does not exist"),
        )
        .into()),
        Err(_) => Ok(Instantiates {
            id: Some(given.to_string()),
            keys: vec![given.to_string()],
        }),
    }
}

/// Before instantiating a remote integration (`integrationId`), that it enables the workspace,
/// when its rows can be read (otherwise the create's own answer tells).
async fn check_remote_access(
    server: &McpServer,
    cx: &Cx<'_, McpServer>,
    id: &str,
) -> Result<(), Halt> {
    let workspace = server.spec.workspace();
    let rows = cx
        .api(Op::Read)
        .await?
        .mcp_integrations()
        .workspaces(id)
        .await;
    let Ok(rows) = rows else {
        return Ok(());
    };
    let global = rows
        .global_workspace_access
        .as_ref()
        .is_some_and(|g| g.get("enabled").and_then(|e| e.as_bool()) == Some(true));
    let enables = |keys: &[String]| {
        let mut enabled = rows.workspaces.iter().filter(|r| r.enabled);
        enabled.any(|r| keys.contains(&r.id))
    };
    if global || enables(&[workspace.to_string()]) {
        return Ok(());
    }
    // Rows read back under the UUID (FACTS-rest §5): a workspace named by slug is read for it.
    let client = cx.api(Op::Read).await?;
    match client.workspaces().get(workspace).await {
        Ok(found) if enables(&found.keys()) => return Ok(()),
        Err(e) if e.is_transient() => {
            let action = format!("read workspace {workspace} of spec.workspaceId");
            return Err(Error::api(action, e).into());
        }
        _ => {}
    }
    Err(Error::not_allowed(
        INTEGRATION_NOT_READY,
        format!(
            "MCP integration {id} named by spec.integrationId does not enable workspace {workspace}; the server is created once it does"
        ),
    ).into())
}
