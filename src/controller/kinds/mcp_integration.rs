//! McpIntegration (cluster-scoped): an upstream MCP server of the organisation. The verbs of the
//! kind ([`Verbs`]): the driver observes by id (or slug), PUTs only when a readable field (name,
//! description, URL, auth type, transport) differs or the keyed hash of the `configurations` a
//! read never shows in clear (from the Secret) changed, so a Secret change gives exactly one
//! PUT. Then the sub-resources ([`Verbs::sync_sub_resources`]): the workspace access rows the
//! spec names (merged; a removed workspace is disabled, never deleted; rows of other workspaces
//! never sent) and the capability toggles of what the gateway discovered, a toggle of a
//! capability not discovered yet waiting in `status.pendingCapabilities`. Delete per
//! `deletionPolicy`, once no MCP server instantiates the integration (`StillReferenced`).
//!
//! Not a listed kind: each reconcile (at least once per drift interval, sooner while a toggle
//! waits) reads the integration, its access rows and its capabilities. Integrations are few.

use std::collections::BTreeSet;
use std::time::Duration;

use kube::ResourceExt;
use serde_json::{Map, Value};

use crate::api::{self, ApiError, Client, McpIntegration as RemoteIntegration, Reading};
use crate::controller::Context;
use crate::controller::driver::calls::Through;
use crate::controller::driver::gate::Op;
use crate::controller::driver::referenced::{Ref, ready_named};
use crate::controller::driver::verbs::{
    Changes, Differing, Inputs, Made, STILL_REFERENCED, Verbs, refused_in_use, removed_once,
    still_referenced,
};
use crate::controller::driver::{Change, Cx, Managed};
use crate::controller::error::{Error, Halt};
use crate::controller::kinds::cluster_secret;
use crate::controller::kinds::config_refs::{self, ReadsSecrets};
use crate::controller::kinds::keyed;
use crate::controller::kinds::secret_inputs::{self, sent_hash};
use crate::controller::kinds::sub_resources::{self, Part, WORKSPACE_ACCESS};
use crate::controller::state::triggers::Triggers;
use crate::resources::Workspace;
use crate::resources::common::Recorded;
use crate::resources::config::{ConfigSecretRef, SecretKeyRef};
use crate::resources::mcp_integration::{
    McpIntegration, McpIntegrationStatus, WantedAccess, access_updates, capability_updates,
};

/// The capability toggles, as messages name them, and the reason of their writes.
const CAPABILITIES: Part = Part::new("capabilities", "CapabilitiesUpdated");

/// What lets the delete of an integration go on.
const NO_SERVER: &str = "no MCP server uses it";

/// Condition reason while a Workspace resource `spec.workspaces` names is missing, being
/// deleted or not Ready yet.
pub const WORKSPACE_NOT_READY: &str = "WorkspaceNotReady";

/// How soon a reconcile reads the capabilities again while a toggle waits for its capability.
const PENDING_LOOK_AGAIN: Duration = Duration::from_secs(30);

/// The Secret `spec.configurationsSecretRef` names, for the Secret watch (which matches by
/// name): the integration takes every key of it, so the key here names none.
impl ReadsSecrets for McpIntegration {
    fn secret_refs(&self) -> std::borrow::Cow<'_, [ConfigSecretRef]> {
        let named = self.spec.configurations_secret_ref.as_ref();
        std::borrow::Cow::Owned(
            named
                .map(|named| ConfigSecretRef {
                    path: "/configurations".into(),
                    secret_key_ref: SecretKeyRef {
                        name: named.name.clone(),
                        key: String::new(),
                    },
                })
                .into_iter()
                .collect(),
        )
    }

    fn secret_source(&self, _path: &str) -> String {
        "spec.configurationsSecretRef".into()
    }
}

impl Managed for McpIntegration {
    crate::controller::driver::kind::cluster_api!();
    const KIND: &'static str = "McpIntegration";

    /// A toggle waiting for its capability is looked at again sooner than the drift interval.
    fn due_in(&self, status: &McpIntegrationStatus) -> Option<Duration> {
        (!status.pending_capabilities.is_empty()).then_some(PENDING_LOOK_AGAIN)
    }

    crate::controller::driver::flow::driven!();
}

/// What an integration is written with: `configurations` as the Secret holds it (`None`: the
/// spec names no Secret, and nothing is hashed).
type Written = secret_inputs::Written<Option<Map<String, Value>>>;

impl Verbs for McpIntegration {
    /// `None` in Observe, which reads no Secret ([`Verbs::UNREAD_INPUTS`]).
    type Desired = Option<Written>;
    type Calls = Through<api::McpIntegrations<'static>>;
    const UNREAD_INPUTS: Option<Option<Written>> = Some(None);

    async fn resolve(&self, cx: &Cx<'_, Self>, _: &mut McpIntegrationStatus) -> Inputs<Self> {
        let configurations = match &self.spec.configurations_secret_ref {
            Some(_) => Some(read_configurations(self, cx).await?),
            None => None,
        };
        let hash = configurations
            .as_ref()
            .and_then(|c| secret_inputs::hash(cx, c));
        Ok(Some(Written::new(cx, configurations, hash)))
    }
    /// A workspace's own MCP integration (`workspace_id` set) is not the organisation's.
    fn refuses(remote: &RemoteIntegration) -> Option<String> {
        remote.workspace_id.as_ref().map(|ws| {
            format!(
                "MCP integration {} belongs to workspace {ws}, not to the organisation: an McpIntegration manages organisation integrations only",
                remote.slug
            )
        })
    }
    /// Waits while an MCP server instantiates the integration, naming them: the McpServer
    /// resources that name it (from the caches, before it is created remotely too), and the
    /// servers the API lists with this integration's id or slug.
    async fn before_delete(&self, cx: &Cx<'_, Self>, key: &str) -> Result<(), Halt> {
        let resources = crate::controller::kinds::mcp_server::naming(self, cx.ctx).await?;
        let until = "no McpServer names it";
        still_referenced::<Self>(key, "named by McpServer", &resources, until)?;
        let keys = self.status.as_ref().map(Recorded::remote_key_strings);
        let keys = keys.unwrap_or_default();
        let servers = cx
            .read("list MCP servers", |client| async move {
                let query = api::McpServersListQuery::default();
                client.mcp_servers().listing(&query, Reading::Proof).await
            })
            .await?;
        // A server the list did not show may instantiate it, and a delete is for good.
        if !servers.complete {
            let why = format!(
                "MCP integration {key} waits for a whole list of MCP servers, to prove that \
                 none instantiates it (the list came back incomplete; it is read again); {}",
                removed_once::<Self>(NO_SERVER)
            );
            return Err(Error::not_allowed(STILL_REFERENCED, why).into());
        }
        let mut users: Vec<String> = servers
            .items
            .iter()
            .filter(|s| {
                s.mcp_integration_id
                    .as_ref()
                    .is_some_and(|i| keys.contains(i))
            })
            .map(|s| format!("MCP server {} ({})", s.slug, s.id))
            .collect();
        users.sort();
        still_referenced::<Self>(key, "instantiated by", &users, NO_SERVER)
    }
    /// An API that refuses the delete while servers use the integration (a 400 or 409 saying
    /// so): `StillReferenced` with its words, retried, never forced.
    fn delete_refused(&self, key: &str, error: &ApiError) -> Option<Error> {
        let message = error.api_message()?;
        let status = error.status()?;
        let in_use = message.contains("in use") || message.contains("server");
        ((status == 400 || status == 409) && in_use)
            .then(|| refused_in_use::<Self>(key, message, NO_SERVER))
    }
    fn record(status: &mut McpIntegrationStatus, remote: Option<&RemoteIntegration>) {
        keyed::record(status, remote);
        if remote.is_none() {
            status.workspaces.clear();
            status.pending_capabilities.clear();
        }
    }
    fn record_created(
        &self,
        status: &mut McpIntegrationStatus,
        desired: &Option<Written>,
        created: Made<Self>,
    ) -> String {
        keyed::record_created(status, sent_hash(desired), created)
    }
    /// Without `spec.configurationsSecretRef` nothing was sent from a Secret: the hash stays.
    fn record_updated(
        &self,
        status: &mut McpIntegrationStatus,
        desired: &Option<Written>,
        _: &RemoteIntegration,
        _: (),
    ) {
        let hash = sent_hash(desired).or_else(|| status.secret_hash.clone());
        keyed::record_updated(status, hash);
    }
    /// The workspace access rows, then the capability toggles.
    async fn sync_sub_resources(
        &self,
        cx: &Cx<'_, Self>,
        status: &mut McpIntegrationStatus,
    ) -> Changes {
        let key = status.id.clone().unwrap_or_default();
        let mut changes = Vec::new();
        changes.extend(apply_access(self, cx, status, &key).await?);
        changes.extend(apply_capabilities(self, cx, status, &key).await?);
        Ok(changes)
    }
    async fn sub_resources_differ(
        &self,
        cx: &Cx<'_, Self>,
        status: &McpIntegrationStatus,
    ) -> Differing {
        let key = status.id.clone().unwrap_or_default();
        let client = cx.api(Op::Read).await?;
        let mut fields = Vec::new();
        if !self.spec.workspaces.is_empty() || !status.workspaces.is_empty() {
            let wanted = wanted_access(self, cx).await?;
            let rows = read_workspaces(client, &key).await?;
            if !access_updates(&wanted, &rows, &status.workspaces).is_empty() {
                fields.push("workspaces");
            }
        }
        if !self.spec.capabilities.is_empty() {
            let discovered = read_capabilities(client, &key).await?;
            let (toggles, _) = capability_updates(&self.spec.capabilities, &discovered);
            if !toggles.is_empty() {
                fields.push("capabilities");
            }
        }
        Ok(fields)
    }
}

/// Every key of the Secret `spec.configurationsSecretRef` names ([`cluster_secret::texts`]), as
/// a `configurations` field (a JSON object or array as that JSON, anything else as a string),
/// each value concealed.
async fn read_configurations(
    integration: &McpIntegration,
    cx: &Cx<'_, McpIntegration>,
) -> Result<Map<String, Value>, Error> {
    let Some(named) = &integration.spec.configurations_secret_ref else {
        return Ok(Map::new());
    };
    let (_, texts) = cluster_secret::texts(
        cx.ctx,
        (&named.name, named.namespace.as_deref()),
        "spec.configurationsSecretRef",
        "an McpIntegration",
    )
    .await?;
    let mut configurations = Map::new();
    for (key, text) in texts {
        cx.conceal(&text);
        let value = match serde_json::from_str::<Value>(&text) {
            Ok(json @ (Value::Object(_) | Value::Array(_))) => {
                // A header's value inside `custom_headers`, a PIN in `jwt_validation`.
                for value in crate::controller::driver::echoes::leaves(&json) {
                    cx.conceal(&value);
                }
                json
            }
            _ => Value::String(text),
        };
        configurations.insert(key, value);
    }
    Ok(configurations)
}

/// `spec.workspaces` resolved: a Workspace resource to the UUID it recorded (and its slug, which
/// a read row may carry), once it is Ready on a Connection of this integration's tenant (until
/// then the integration waits: `WorkspaceNotReady`); a `workspace` (UUID or slug) to the
/// workspace one read finds, since rows read back under the UUID (FACTS-rest §5). A workspace
/// listed twice (by both keys, or by a resource and its UUID) is refused: its two rows would
/// be sent in turn for ever.
async fn wanted_access(
    integration: &McpIntegration,
    cx: &Cx<'_, McpIntegration>,
) -> Result<Vec<WantedAccess>, Halt> {
    let mut wanted: Vec<WantedAccess> = Vec::with_capacity(integration.spec.workspaces.len());
    for (i, entry) in integration.spec.workspaces.iter().enumerate() {
        let (id, keys) = match (&entry.workspace_ref, &entry.workspace) {
            (Some(named), _) => ready_workspace(integration, cx.ctx, &named.name)?,
            (None, Some(given)) => given_workspace(cx, given).await?,
            (None, None) => {
                return Err(Error::InvalidSpec(
                    "a spec.workspaces entry names no workspace: set workspaceRef or workspace"
                        .into(),
                )
                .into());
            }
        };
        if wanted
            .iter()
            .any(|w| w.keys.iter().any(|k| keys.contains(k)))
        {
            return Err(Error::InvalidSpec(format!(
                "spec.workspaces[{i}] names workspace {id} a second time: list each workspace once"
            ))
            .into());
        }
        wanted.push(WantedAccess {
            id,
            keys,
            enabled: entry.enabled,
        });
    }
    Ok(wanted)
}

/// The UUID and the keys (UUID and slug) of the workspace `given` names, by one read. A UUID the
/// read does not find (or may not see) is sent as written (the access PUT's answer tells; its
/// row reads back under it); a slug waits (`WorkspaceNotReady`): sent, its row would read back
/// under a UUID it cannot be matched to, and be sent again at every reconcile.
async fn given_workspace(
    cx: &Cx<'_, McpIntegration>,
    given: &str,
) -> Result<(String, Vec<String>), Halt> {
    match cx.api(Op::Read).await?.workspaces().get(given).await {
        Ok(found) if !found.id.is_empty() => Ok((found.id.clone(), found.keys())),
        Ok(_) => Ok((given.to_string(), vec![given.to_string()])),
        Err(e) if e.is_not_found() || e.is_not_visible() => match uuid::Uuid::parse_str(given) {
            Ok(_) => Ok((given.to_string(), vec![given.to_string()])),
            Err(_) => Err(Error::not_allowed(
                WORKSPACE_NOT_READY,
                format!("workspace {given} named by spec.workspaces is not found (or archived)"),
            )
            .into()),
        },
        Err(e) => {
            let action = format!("read workspace {given} named by spec.workspaces");
            Err(Error::api(action, e).into())
        }
    }
}

/// The UUID (and the keys: UUID and slug) the Workspace resource `name` recorded, once it can be
/// named ([`ready_named`]).
fn ready_workspace(
    integration: &McpIntegration,
    ctx: &Context,
    name: &str,
) -> Result<(String, Vec<String>), Halt> {
    let by = Ref::new(name, "spec.workspaces", WORKSPACE_NOT_READY);
    let (workspace, id) = ready_named::<Workspace, _>(integration, ctx, &by, |s| s.id.clone())?;
    let keys = workspace.status.as_ref().map(Recorded::remote_key_strings);
    Ok((id, keys.unwrap_or_default()))
}

async fn read_workspaces(
    client: &Client,
    key: &str,
) -> Result<api::McpIntegrationWorkspaces, Error> {
    let integrations = client.mcp_integrations();
    WORKSPACE_ACCESS
        .read::<McpIntegration, _>(key, integrations.workspaces(key))
        .await
}

async fn read_capabilities(client: &Client, key: &str) -> Result<Vec<api::McpCapability>, Error> {
    let integrations = client.mcp_integrations();
    let read = integrations.capabilities(key, None);
    let read = CAPABILITIES.read::<McpIntegration, _>(key, read);
    read.await.map(|c| c.page.data)
}

/// Merges the access rows the spec names and disables the workspaces it no longer lists, in
/// one PUT (never `override_existing_workspace_access`); records the workspaces it enabled.
async fn apply_access<'a>(
    integration: &McpIntegration,
    cx: &'a Cx<'_, McpIntegration>,
    status: &mut McpIntegrationStatus,
    key: &str,
) -> Result<Option<Change>, Halt> {
    if integration.spec.workspaces.is_empty() && status.workspaces.is_empty() {
        return Ok(None);
    }
    let wanted = wanted_access(integration, cx).await?;
    let enabled: Vec<String> = wanted
        .iter()
        .filter(|w| w.enabled)
        .map(|w| w.id.clone())
        .collect();
    let rows = read_workspaces(cx.api(Op::Read).await?, key).await?;
    let updates = access_updates(&wanted, &rows, &status.workspaces);
    let write = |client: &'a Client, workspaces| async move {
        let request = api::UpdateMcpWorkspacesRequest {
            workspaces,
            ..Default::default()
        };
        client
            .mcp_integrations()
            .update_workspaces(key, &request)
            .await
    };
    let change = sub_resources::write_access(cx, key, (updates, "enabled"), write);
    let change = change.await?;
    status.workspaces = enabled;
    Ok(change)
}

/// One PUT of the toggles whose capability was discovered and differs; the others wait in
/// `status.pendingCapabilities`.
async fn apply_capabilities(
    integration: &McpIntegration,
    cx: &Cx<'_, McpIntegration>,
    status: &mut McpIntegrationStatus,
    key: &str,
) -> Result<Option<Change>, Halt> {
    if integration.spec.capabilities.is_empty() {
        status.pending_capabilities.clear();
        return Ok(None);
    }
    let discovered = read_capabilities(cx.api(Op::Read).await?, key).await?;
    let (toggles, pending) = capability_updates(&integration.spec.capabilities, &discovered);
    status.pending_capabilities = pending;
    if toggles.is_empty() {
        return Ok(None);
    }
    let what = toggles
        .iter()
        .map(|t| {
            let state = if t.enabled { "enabled" } else { "disabled" };
            format!("{} {} {state}", t.kind, t.name)
        })
        .collect::<Vec<_>>()
        .join(", ");
    let request = api::UpdateCapabilitiesRequest {
        capabilities: toggles,
    };
    let change = CAPABILITIES
        .write(cx, (key, &what), |client| async move {
            client
                .mcp_integrations()
                .update_capabilities(key, &request)
                .await
        })
        .await?;
    Ok(Some(change))
}

/// True when a row of `integration`'s `spec.workspaces` names the workspace: by the Workspace
/// resource `resource`, or by one of `keys` (its UUID, its slug).
pub fn names_workspace(
    integration: &McpIntegration,
    keys: &BTreeSet<&str>,
    resource: &str,
) -> bool {
    integration.spec.workspaces.iter().any(|row| {
        row.workspace_ref
            .as_ref()
            .is_some_and(|r| r.name == resource)
            || row.workspace.as_deref().is_some_and(|ws| keys.contains(ws))
    })
}

/// The McpIntegration resources of this installation whose `spec.workspaces` names the
/// workspace (see [`names_workspace`]): they hold a Workspace against its archive, since a row
/// naming an archived workspace could never be written again.
pub fn naming_workspace(ctx: &Context, keys: &BTreeSet<&str>, resource: &str) -> Vec<String> {
    ctx.stores
        .of::<McpIntegration>()
        .all()
        .iter()
        .filter(|i| !ctx.installation.is_theirs(i.as_ref()))
        .filter(|i| names_workspace(i, keys, resource))
        .map(|i| format!("McpIntegration {}", i.name_any()))
        .collect()
}

/// An McpIntegration's own triggers: the Secret it reads (in the operator's namespace), the
/// McpServer resources that name it (a deletion waiting for them), and the Workspace resources
/// its `spec.workspaces` names (one waiting for a Workspace goes on once it
/// is Ready).
pub fn watch_inputs(triggers: Triggers<'_, McpIntegration>) -> Triggers<'_, McpIntegration> {
    let triggers = config_refs::watch_secrets(triggers);
    let triggers = crate::controller::kinds::mcp_server::watch_servers(triggers);
    triggers.when(|i: &McpIntegration, workspace: &Workspace| {
        let name = workspace.name_any();
        i.spec
            .workspaces
            .iter()
            .any(|w| w.workspace_ref.as_ref().is_some_and(|r| r.name == name))
    })
}
