//! What wakes the Provider and Integration controllers besides their own objects: the
//! Integration resources a Provider binds, the Configs that name a Provider, and the Providers
//! that bind an Integration. Each is heard from its kind's own watch, once its cache holds
//! the change ([`crate::controller::state::relay`]).

use kube::ResourceExt;

use super::{binds, named_by};
use crate::controller::state::triggers::Triggers;
use crate::resources::integration::Integration;
use crate::resources::provider::Provider;

/// A provider's own triggers: the Integration resource it binds (a provider waiting for it:
/// Ready, its workspace granted, is created as soon as it can be), and the Configs that name
/// it, in its namespace (a provider whose deletion waits for them goes as soon as the last one
/// lets go).
pub fn watch_inputs(triggers: Triggers<'_, Provider>) -> Triggers<'_, Provider> {
    let bound_by = |p: &Provider, integration: &Integration| {
        p.spec.integration.as_deref() == Some(integration.name_any().as_str())
    };
    let namespace = triggers.namespace;
    triggers.when(bound_by).held_in(namespace, named_by)
}

/// Requeues the Integrations Providers bind whenever one of those changes or goes, so an
/// Integration whose deletion waits for its Providers goes as soon as the last one lets go.
pub fn watch_binders(triggers: Triggers<'_, Integration>) -> Triggers<'_, Integration> {
    // The Providers of every watched namespace.
    triggers.held_in(None, |i: &Integration, provider: &Provider| {
        binds(provider, i)
    })
}
