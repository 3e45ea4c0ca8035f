//! What wakes the Provider and Integration controllers besides their own objects: the
//! Integration resources a Provider binds, the Configs that name a Provider, and the Providers
//! that bind an Integration. Each is heard from its kind's own watch, once its cache holds
//! the change ([`crate::controller::state::relay`]).

use kube::ResourceExt;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::Store;

use super::named_by;
use crate::controller::Context;
use crate::controller::state::relay::requeue_when;
use crate::resources::integration::Integration;
use crate::resources::provider::Provider;

/// Requeues the Providers that bind an Integration resource whenever it changes, so a provider
/// waiting for it (Ready, its workspace granted) is created as soon as it can be.
fn integrations(
    controller: Controller<Provider>,
    ctx: &Context,
    _namespace: Option<&str>,
    providers: Store<Provider>,
) -> Controller<Provider> {
    requeue_when(
        controller,
        &ctx.relay,
        None,
        providers,
        |p: &Provider, integration: &Integration| {
            p.spec.integration.as_deref() == Some(integration.name_any().as_str())
        },
    )
}

/// Requeues the Providers a Config names whenever that Config changes or goes, so a provider
/// whose deletion waits for its Configs goes as soon as the last one lets go.
fn referrers(
    controller: Controller<Provider>,
    ctx: &Context,
    namespace: Option<&str>,
    providers: Store<Provider>,
) -> Controller<Provider> {
    requeue_when(controller, &ctx.relay, namespace, providers, named_by)
}

/// A provider's own triggers: the Integration resources it binds and the Configs that name it.
pub fn watch_inputs(
    controller: Controller<Provider>,
    ctx: &Context,
    namespace: Option<&str>,
    providers: Store<Provider>,
) -> Controller<Provider> {
    let controller = integrations(controller, ctx, namespace, providers.clone());
    referrers(controller, ctx, namespace, providers)
}

/// Requeues the Integrations Providers bind whenever one of those changes or goes, so an
/// Integration whose deletion waits for its Providers goes as soon as the last one lets go.
pub fn watch_binders(
    controller: Controller<Integration>,
    ctx: &Context,
    integrations: Store<Integration>,
) -> Controller<Integration> {
    // The Providers of every watched namespace.
    requeue_when(
        controller,
        &ctx.relay,
        None,
        integrations,
        |i: &Integration, provider: &Provider| {
            let status = i.status.as_ref();
            let recorded = |id: &String| {
                status.and_then(|s| s.id.as_ref()) == Some(id)
                    || status.and_then(|s| s.slug.as_ref()) == Some(id)
            };
            provider.spec.integration.as_deref() == Some(i.name_any().as_str())
                || provider.spec.integration_id.as_ref().is_some_and(recorded)
        },
    )
}
