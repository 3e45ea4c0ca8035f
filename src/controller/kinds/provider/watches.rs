//! What wakes the Provider and Integration controllers besides their own objects: the
//! Integration resources a Provider binds, the Configs that name a Provider, and the Providers
//! that bind an Integration.

use futures::StreamExt;
use kube::ResourceExt;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};

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
    let probe = ctx.health.register(crate::controller::stream_name(
        "Integration(Provider refs)",
        None,
    ));
    let integrations = kube::Api::<Integration>::all(ctx.kube.clone());
    let stream = watcher(integrations, ctx.watch_config::<Integration>())
        .inspect(move |item| probe.observe(item))
        .touched_objects();
    controller.watches_stream(stream, move |integration: Integration| {
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
    let probe = ctx.health.register(crate::controller::stream_name(
        "Config(Provider users)",
        namespace,
    ));
    let configs = crate::controller::scoped::<Config>(&ctx.kube, namespace);
    let stream = watcher(configs, watcher::Config::default())
        .inspect(move |item| probe.observe(item))
        .touched_objects()
        .boxed();
    controller.watches_stream(stream, move |config: Config| {
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
    let streams = ctx.watched_namespaces.clone().into_iter().map(|namespace| {
        let probe = ctx.health.register(crate::controller::stream_name(
            "Provider(Integration users)",
            namespace.as_deref(),
        ));
        let providers = crate::controller::scoped::<Provider>(&ctx.kube, namespace.as_deref());
        watcher(providers, watcher::Config::default())
            .inspect(move |item| probe.observe(item))
            .touched_objects()
            .boxed()
    });
    let stream = futures::stream::select_all(streams);
    controller.watches_stream(stream, move |provider: Provider| {
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
