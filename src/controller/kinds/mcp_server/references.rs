//! Who names what, between McpServers and McpIntegrations: the McpServer resources that hold an
//! McpIntegration against its deletion, and the watches that requeue one kind when the other
//! changes (each heard from its kind's own watch: [`crate::controller::state::relay`]).

use crate::controller::Context;
use crate::controller::driver::referenced::{names, qualified, users};
use crate::controller::error::Halt;
use crate::controller::state::claims::{Claims, refused_by_grants};
use crate::controller::state::triggers::Triggers;
use crate::resources::{McpIntegration, McpServer};

/// The McpServer resources (as `namespace/name`) that instantiate `integration`: by resource
/// name, or by the UUID or slug it recorded. From the caches, once every McpServer cache has
/// listed. A server that never made a remote server (or began to) does not count, nor one of
/// another installation.
pub async fn naming(integration: &McpIntegration, ctx: &Context) -> Result<Vec<String>, Halt> {
    let question = "whether an McpServer instantiates this integration";
    // One that never made (or began to make) a remote server holds nothing: any namespace
    // could otherwise keep the organisation's integration alive by naming it.
    let uses = |s: &McpServer| !refused_by_grants(s) && s.manages() && instantiates(s, integration);
    users(ctx, question, uses, qualified).await
}

/// True when `server` names `integration` (by resource, or by a key it recorded).
fn instantiates(server: &McpServer, integration: &McpIntegration) -> bool {
    let spec = &server.spec;
    let by_name = spec.integration_ref.as_ref().map(|r| r.name.as_str());
    names(integration, by_name, spec.integration_id.as_deref())
}

/// A server's own triggers: the McpIntegration resource it names (a server waiting for it to
/// be Ready and enable the workspace is created as soon as it does).
pub fn watch_inputs(triggers: Triggers<'_, McpServer>) -> Triggers<'_, McpServer> {
    triggers.when(|s: &McpServer, i: &McpIntegration| {
        s.spec.integration_ref.as_ref().map(|r| r.name.as_str()) == i.metadata.name.as_deref()
    })
}

/// Requeues the McpIntegrations McpServer resources name whenever one of those changes or
/// goes, so an integration whose deletion waits for its servers goes once the last lets go.
pub fn watch_servers(triggers: Triggers<'_, McpIntegration>) -> Triggers<'_, McpIntegration> {
    triggers.held_in(None, |i: &McpIntegration, s: &McpServer| instantiates(s, i))
}
