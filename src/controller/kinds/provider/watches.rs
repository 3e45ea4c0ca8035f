//! What wakes the Provider and Integration controllers besides their own objects: the
//! Integration resources a Provider binds, the Configs that name a Provider, and the Providers
//! that bind an Integration. Each is heard from its kind's own watch, once its cache holds
//! the change ([`crate::controller::relay`]).

use std::sync::Arc;

use kube::ResourceExt;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::{ObjectRef, Store};

use super::named_by;
use crate::controller::Context;
use crate::resources::config::Config;
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
    let stream = ctx.relay.subscribe::<Integration>(None);
    controller.watches_shared_stream(stream, move |integration: Arc<Integration>| {
        let name = integration.name_any();
        providers
            .state()
            .into_iter()
            .filter(|p| p.spec.integration.as_deref() == Some(name.as_str()))
            .map(|p| ObjectRef::from_obj(p.as_ref()))
            .collect::<Vec<_>>()
    })
}

/// Requeues the Providers a Config names whenever that Config changes or goes, so a provider
/// whose deletion waits for its Configs goes as soon as the last one lets go.
fn referrers(
    controller: Controller<Provider>,
    ctx: &Context,
    namespace: Option<&str>,
    providers: Store<Provider>,
) -> Controller<Provider> {
    let stream = ctx.relay.subscribe::<Config>(namespace.map(str::to_string));
    controller.watches_shared_stream(stream, move |config: Arc<Config>| {
        providers
            .state()
            .into_iter()
            .filter(|p| named_by(p, &config))
            .map(|p| ObjectRef::from_obj(p.as_ref()))
            .collect::<Vec<_>>()
    })
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
    let stream = ctx.relay.subscribe::<Provider>(None);
    controller.watches_shared_stream(stream, move |provider: Arc<Provider>| {
        let named = provider.spec.integration.clone();
        let id = provider.spec.integration_id.clone();
        integrations
            .state()
            .into_iter()
            .filter(|i| {
                named.as_deref() == Some(i.name_any().as_str())
                    || id.as_ref().is_some_and(|id| {
                        let s = i.status.as_ref();
                        s.and_then(|s| s.id.as_ref()) == Some(id)
                            || s.and_then(|s| s.slug.as_ref()) == Some(id)
                    })
            })
            .map(|i| ObjectRef::from_obj(i.as_ref()))
            .collect::<Vec<_>>()
    })
}
