//! What wakes the Provider and Integration controllers besides their own objects: the
//! Integration resources a Provider binds, the Configs that name a Provider, and the Providers
//! that bind an Integration. Each is heard from its kind's own watch, once its cache holds
//! the change ([`crate::controller::state::relay`]).

use kube::ResourceExt;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::Store;

use super::{binds, named_by};
use crate::controller::Context;
use crate::controller::state::relay::requeue_when;
use crate::resources::integration::Integration;
use crate::resources::provider::Provider;

/// A provider's own triggers: the Integration resource it binds (a provider waiting for it:
/// Ready, its workspace granted, is created as soon as it can be), and the Configs that name
/// it, in its namespace (a provider whose deletion waits for them goes as soon as the last one
/// lets go).
pub fn watch_inputs(
    controller: Controller<Provider>,
    ctx: &Context,
    namespace: Option<&str>,
    providers: Store<Provider>,
) -> Controller<Provider> {
    let bound_by = |p: &Provider, integration: &Integration| {
        p.spec.integration.as_deref() == Some(integration.name_any().as_str())
    };
    let controller = requeue_when(controller, &ctx.relay, None, providers.clone(), bound_by);
    requeue_when(controller, &ctx.relay, namespace, providers, named_by)
}

/// Requeues the Integrations Providers bind whenever one of those changes or goes, so an
/// Integration whose deletion waits for its Providers goes as soon as the last one lets go.
pub fn watch_binders(
    controller: Controller<Integration>,
    ctx: &Context,
    integrations: Store<Integration>,
) -> Controller<Integration> {
    // The Providers of every watched namespace.
    let bound_by = |i: &Integration, provider: &Provider| binds(provider, i);
    requeue_when(controller, &ctx.relay, None, integrations, bound_by)
}
