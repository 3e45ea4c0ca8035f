//! The integration a Provider binds, and whether this namespace may bind it: the Integration
//! resource (from the watch cache: Ready, of the provider's tenant, granting the workspace
//! access) or the remote integration `spec.integrationId` names, and the Connection's grants
//! ([`crate::controller::driver::gate::Gate::binding`]). Checked before every write and before a delete.

use super::INTEGRATION_NOT_READY;
use crate::controller::Context;
use crate::controller::driver::Cx;
use crate::controller::driver::gate::Op;
use crate::controller::driver::referenced::{Ref, ready_named, recorded_keys};
use crate::controller::error::{Error, Halt};
use crate::controller::kinds::bound::{Bound, recorded_keys_of};
use crate::resources::integration::Integration;
use crate::resources::provider::{Provider, ProviderStatus};

/// What a provider is written and compared with: the integration it binds (sent as
/// `integration_id`), and whether its usage is to be reset.
pub struct Binding {
    pub(super) integration: Bound,
    /// `spec.resetUsage` holds a value not acted upon yet.
    pub(super) reset: bool,
}

/// What a provider read may name the provider's integration by, without an API call: the UUID
/// and slug the Integration resource (`spec.integration`) recorded, or `spec.integrationId`
/// and the UUID it was resolved to (`status.integrationId`). Never a resource name.
pub(super) fn integration_keys(
    provider: &Provider,
    ctx: &Context,
    status: &ProviderStatus,
) -> Vec<String> {
    let spec = &provider.spec;
    let by_name = spec.integration.as_deref();
    let given = spec.integration_id.as_ref();
    recorded_keys_of::<Integration>(ctx, by_name, given, status.integration_id.as_ref())
}

/// The integration the provider binds, once it can be bound here. `spec.integration`: the
/// Integration resource exists, reaches the provider's tenant, is not being deleted, is Ready,
/// and grants the provider's workspace access; the grants may name it by resource name, UUID
/// or slug. `spec.integrationId`: the remote integration it names (a UUID or a slug) is read
/// first, and the grants must name *that* integration, by its UUID or slug: never by a
/// resource name, which could equal another integration's slug.
pub(super) async fn bound_integration(
    provider: &Provider,
    cx: &Cx<'_, Provider>,
) -> Result<Bound, Halt> {
    let spec = &provider.spec;
    match (&spec.integration, &spec.integration_id) {
        (_, Some(given)) => remote_integration(provider, cx, given).await,
        (Some(name), None) => {
            let id = ready_integration(provider, cx.ctx, name)?;
            let mut keys = integration_keys(provider, cx.ctx, &ProviderStatus::default());
            if !keys.contains(&id) {
                keys.insert(0, id.clone());
            }
            let mut granted = vec![name.clone()];
            granted.extend(keys.iter().cloned());
            cx.gate.binding("spec.integration", &granted).await?;
            Ok(Bound { id: Some(id), keys })
        }
        (None, None) => {
            Err(Error::InvalidSpec("set spec.integration or spec.integrationId".into()).into())
        }
    }
}

/// The remote integration `spec.integrationId` names (by UUID or slug), read through the gate,
/// once the grants name it by its UUID or slug.
async fn remote_integration(
    provider: &Provider,
    cx: &Cx<'_, Provider>,
    given: &str,
) -> Result<Bound, Halt> {
    const FIELD: &str = "spec.integrationId";
    let read = cx.api(Op::Read).await?.integrations().get(given).await;
    match read {
        Ok(found) => {
            let id = match found.id.is_empty() {
                true => given.to_string(),
                false => found.id.clone(),
            };
            let mut keys = vec![id.clone()];
            if !found.slug.is_empty() && found.slug != id {
                keys.push(found.slug.clone());
            }
            let resource = |entry: &str| recorded_keys::<Integration>(cx.ctx, entry);
            cx.gate.binding_remote(FIELD, &keys, resource).await?;
            Ok(Bound { id: Some(id), keys })
        }
        Err(e) if e.is_not_found() => Err(Error::not_allowed(
            INTEGRATION_NOT_READY,
            format!("integration {given} named by {FIELD} does not exist"),
        ).into()),
        // Unreadable (a Connection without admin rights): only a namespace whose grants do not
        // limit integrations may bind it, as the spec names it.
        Err(e) => match cx.gate.binding(FIELD, &[]).await {
            Ok(()) => {
                let status = provider.status.clone().unwrap_or_default();
                let id = given.to_string();
                let mut keys = vec![id.clone()];
                keys.extend(status.integration_id.filter(|i| i != given));
                Ok(Bound { id: Some(id), keys })
            }
            Err(Error::NotAllowed { .. }) => Err(Error::api(
                format!(
                    "read integration {given} (named by {FIELD}) to check it against the Connection's grants (spec.grants[].integrations)"
                ),
                e,
            ).into()),
            Err(other) => Err(other.into()),
        },
    }
}

/// The UUID of Integration `name`, once this provider may bind it (else why it waits).
fn ready_integration(provider: &Provider, ctx: &Context, name: &str) -> Result<String, Halt> {
    let by = Ref::new(name, "spec.integration", INTEGRATION_NOT_READY);
    let (integration, id) = ready_named::<Integration, _>(provider, ctx, &by, |s| s.id.clone())?;
    let workspace = provider.spec.workspace();
    let granted = integration
        .status
        .as_ref()
        .map(|s| s.workspaces.as_slice())
        .unwrap_or_default();
    if !granted.iter().any(|w| w == workspace) {
        return Err(by.waiting(format!(
            "{} does not grant workspace {workspace} access (its spec.workspaces); the provider waits until it does",
            by.what::<Integration>()
        ))
        .into());
    }
    Ok(id)
}

/// Before binding a remote integration (`integrationId`), that it exists and grants the
/// workspace access, when the admin plane answers (a Connection without admin rights is left
/// to the create's own answer).
pub(super) async fn check_remote_integration(
    provider: &Provider,
    cx: &Cx<'_, Provider>,
    id: &str,
) -> Result<(), Halt> {
    let workspace = provider.spec.workspace();
    let rows = cx.api(Op::Read).await?.integrations().workspaces(id).await;
    match rows {
        Err(e) if e.is_not_found() => Err(Error::not_allowed(
            INTEGRATION_NOT_READY,
            format!("integration {id} named by spec.integrationId does not exist"),
        ).into()),
        Ok(rows)
            if rows.complete()
                && !rows
                    .workspaces
                    .iter()
                    .any(|r| r.enabled && r.id == workspace) =>
        {
            Err(Error::not_allowed(
                INTEGRATION_NOT_READY,
                format!(
                    "integration {id} named by spec.integrationId does not grant workspace {workspace} access; the provider waits until it does"
                ),
            ).into())
        }
        _ => Ok(()),
    }
}

/// Whether the grants still let this namespace bind the provider's integration, as recorded
/// (no API call): the rule [`bound_integration`] applies before every write.
pub(super) async fn integration_granted(
    provider: &Provider,
    cx: &Cx<'_, Provider>,
    status: &ProviderStatus,
) -> Result<(), Error> {
    let keys = integration_keys(provider, cx.ctx, status);
    match (&provider.spec.integration, &provider.spec.integration_id) {
        (_, Some(_)) => {
            let resource = |entry: &str| recorded_keys::<Integration>(cx.ctx, entry);
            cx.gate
                .binding_remote("spec.integrationId", &keys, resource)
                .await
        }
        (Some(name), None) => {
            let mut granted = vec![name.clone()];
            granted.extend(keys);
            cx.gate.binding("spec.integration", &granted).await
        }
        (None, None) => Ok(()),
    }
}
