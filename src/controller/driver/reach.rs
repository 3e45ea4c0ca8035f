//! The workspace reach: a namespaced object may name its workspace by resource
//! (`spec.workspaceRef`, a cluster-scoped Workspace) instead of by id (`spec.workspaceId`). It is
//! resolved here, in one place, from the Workspace watch cache to the UUID that Workspace
//! recorded (`status.id`), and written into the copy a reconcile acts on: the gate's grant check
//! ([`crate::controller::driver::gate::Gate::granted`]), the claims, the drift pass's lists and every
//! kind's requests then see the workspace by id, as if the spec had named it so. A grant of the
//! Connection therefore applies to the workspace the resource stands for: a namespace cannot
//! reach, by resource, a workspace its grants do not allow.
//!
//! Until the Workspace is Ready the object waits (`WorkspaceNotReady`) and nothing is written
//! remotely; the Workspace's own watch requeues it when it changes ([`requeue_referrers`]). An
//! object that already acts in the workspace keeps the UUID recorded while the Workspace's spec
//! changes or it is deleted (a deletion that waits for it: `StillReferenced`). When the
//! Workspace is gone, a referrer being deleted goes on unresolved: the gate then decides with no
//! workspace named (a namespace whose grants limit workspaces releases its remote object
//! without a call).

use std::sync::Arc;

use kube::ResourceExt;

use super::Managed;
use crate::controller::driver::gate::{CACHES_LISTED_WITHIN, tenant_peers};
use crate::controller::error::{Error, Halt, Wait};
use crate::controller::state::claims::Claims;
use crate::controller::state::triggers::Triggers;
use crate::controller::{Context, spec_already_applied};
use crate::resources::Workspace;

/// Condition reason while the Workspace `spec.workspaceRef` names has no Ready workspace to
/// resolve to.
pub const WORKSPACE_NOT_READY: &str = "WorkspaceNotReady";

/// `object` as a reconcile acts on it (its `spec.workspaceRef` resolved into
/// `spec.workspaceId`), and why it cannot act yet when the Workspace it names is not Ready (the
/// object is then returned as it is).
pub async fn reach<K: Managed>(ctx: &Context, object: Arc<K>) -> (Arc<K>, Option<Halt>) {
    match reached(ctx, object.as_ref()).await {
        Ok(Some(reached)) => (Arc::new(reached), None),
        Ok(None) => (object, None),
        Err(error) => (object, Some(error)),
    }
}

/// The copy of `object` with the workspace its `spec.workspaceRef` names written in as
/// `spec.workspaceId`; `Ok(None)` when it names none by resource.
pub async fn reached<K: Claims + Clone>(ctx: &Context, object: &K) -> Result<Option<K>, Halt> {
    let Some(name) = object.workspace_ref() else {
        return Ok(None);
    };
    let workspaces = ctx.stores.of::<Workspace>();
    if !workspaces.listed(1, CACHES_LISTED_WITHIN).await {
        return Err(Wait::CachesNotReady(
            "the Workspace watch cache has not listed yet, so spec.workspaceRef cannot be resolved; waiting".into(),
        )
        .into());
    }
    let peers = tenant_peers(ctx, object.connection_name());
    let id = ready_workspace(object, name, &workspaces.all(), &peers)?;
    let mut reached = object.clone();
    reached.reach_workspace(id);
    Ok(Some(reached))
}

/// The UUID of Workspace `name` (among `workspaces`), once `object` may act in it, else why it
/// waits. The same message whether the Workspace is missing, not Ready, being deleted or
/// managed through a Connection to another tenant: a namespace learns nothing of Workspaces it
/// cannot use.
/// `peers` are the Connections reaching `object`'s tenant.
fn ready_workspace<K: Claims>(
    object: &K,
    name: &str,
    workspaces: &[Arc<Workspace>],
    peers: &[String],
) -> Result<String, Error> {
    let waiting = || {
        Error::not_allowed(
            WORKSPACE_NOT_READY,
            format!(
                "Workspace {name} named by spec.workspaceRef has no Ready workspace of this object's tenant (it does not exist, is not Ready, is being deleted, or is managed through a Connection to another tenant); nothing is written until it has, and this object is looked at again when it changes"
            ),
        )
    };
    let Some(workspace) = workspaces.iter().find(|w| w.name_any() == name) else {
        return Err(waiting());
    };
    if !peers.iter().any(|p| p == workspace.spec.connection_name()) {
        return Err(waiting());
    }
    let status = workspace.status.clone().unwrap_or_default();
    let Some(id) = status.id.clone().filter(|id| !id.is_empty()) else {
        return Err(waiting());
    };
    // What already acts in the workspace keeps it (the Workspace's deletion waits for it).
    if object.manages() {
        return Ok(id);
    }
    let ready = workspace.metadata.deletion_timestamp.is_none()
        && spec_already_applied(
            workspace.metadata.generation,
            status.observed_generation,
            &status.conditions,
        );
    match ready {
        true => Ok(id),
        false => Err(waiting()),
    }
}

/// Requeues the objects of kind `K` whose `spec.workspaceRef` names a Workspace whenever that
/// Workspace changes or goes (heard from the Workspace controller's own watch, once its cache
/// holds the change), so an object waiting for it (`WorkspaceNotReady`) acts as soon as it can.
/// Every namespaced kind's controller has it.
pub fn requeue_referrers<K: Managed>(triggers: Triggers<'_, K>) -> Triggers<'_, K> {
    triggers.when(|o: &K, w: &Workspace| o.workspace_ref() == w.metadata.name.as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Config;
    use serde_json::json;

    fn config(recorded: bool) -> Config {
        let status = match recorded {
            true => json!({"slug": "pc-1"}),
            false => json!({}),
        };
        serde_json::from_value(json!({
            "apiVersion": "aigw.io/v1alpha1", "kind": "Config",
            "metadata": {"name": "c", "namespace": "team-a"},
            "spec": {"name": "c", "workspaceRef": {"name": "pay"}, "config": {}},
            "status": status,
        }))
        .unwrap()
    }

    fn workspace(connection: &str, ready: bool, deleting: bool) -> Arc<Workspace> {
        let status = json!({"id": "ws-uuid", "slug": "pay", "observedGeneration": 1,
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" },
                "reason": "Reconciled", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z",
                "observedGeneration": 1}]});
        let mut metadata = json!({"name": "pay", "generation": 1});
        if deleting {
            metadata["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "aigw.io/v1alpha1", "kind": "Workspace",
                "metadata": metadata,
                "spec": {"name": "Pay", "connectionRef": {"name": connection}},
                "status": status,
            }))
            .unwrap(),
        )
    }

    fn resolved(object: &Config, workspaces: &[Arc<Workspace>]) -> Result<String, String> {
        let peers = ["default".to_string()];
        ready_workspace(object, "pay", workspaces, &peers).map_err(|e| e.to_string())
    }

    /// A Ready Workspace of the object's tenant resolves to its UUID; missing, not Ready, being
    /// deleted or another tenant's, it waits, with one message for all four; what already acts
    /// in the workspace keeps it while the Workspace changes or goes.
    #[test]
    fn a_workspace_resolves_once_ready_and_of_the_same_tenant() {
        let new = config(false);
        assert_eq!(
            resolved(&new, &[workspace("default", true, false)]),
            Ok("ws-uuid".into())
        );
        let waits: Vec<String> = [
            vec![],
            vec![workspace("default", false, false)],
            vec![workspace("default", true, true)],
            vec![workspace("other-tenant", true, false)],
        ]
        .iter()
        .map(|found| resolved(&new, found).unwrap_err())
        .collect();
        assert!(waits[0].contains("has no Ready workspace"), "{waits:?}");
        assert!(waits.iter().all(|w| *w == waits[0]), "{waits:?}");
        let acting = config(true);
        for found in [
            workspace("default", false, false),
            workspace("default", true, true),
        ] {
            assert_eq!(resolved(&acting, &[found]), Ok("ws-uuid".into()));
        }
        assert!(resolved(&acting, &[workspace("other-tenant", true, false)]).is_err());
    }
}
