//! Deployment: create or adopt the remote deployment, PUT only when a field differs, observe
//! its connection status, keep the one-time credentials in the owned Secret, rotate them when
//! asked or due, and archive (or orphan) on delete.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment as AppsDeployment, StatefulSet};
use k8s_openapi::api::core::v1::Secret;
use kube::Resource;
use kube::api::{Api, ObjectMeta, Patch, PatchParams};

use super::driver::{Change, Cx, Managed, observed, orphaned, removed};
use super::error::Error;
use super::failpoints::{AFTER_CREATE_POST, AFTER_ROTATE_PUT};
use super::status::{Outcome, common_status, record_outcome};
use super::{now_rfc3339, spec_already_applied};
use crate::api::{self, Credentials, DeploymentListQuery, SecretString, UpdateDeploymentRequest};
use crate::resources::deployment::{
    ConnectionStatus, Deployment, DeploymentDeletionPolicy, DeploymentStatus, RemoteStatus,
    WorkloadKind,
};

/// Pod-template annotation patched onto the workloads of `spec.rotation.restart`.
pub const ROTATED_AT_ANNOTATION: &str = "aigw.io/credentials-rotated-at";
const MANAGER: &str = "aigw/deployment";

common_status!(
    DeploymentStatus,
    |s| DeploymentStatus {
        last_synced_at: None,
        pending_create: s.pending_create.as_ref().map(|_| String::new()),
        pending_rotation: s.pending_rotation.as_ref().map(|_| String::new()),
        ..s.clone()
    },
    fresh_read_when =
        |s| s.id.is_none() || s.pending_create.is_some() || s.pending_rotation.is_some()
);

impl Managed for Deployment {
    type Status = DeploymentStatus;
    const KIND: &'static str = "Deployment";
    const MANAGER: &'static str = MANAGER;

    fn status(&self) -> Option<&DeploymentStatus> {
        self.status.as_ref()
    }

    fn connection_name(&self) -> &str {
        self.spec.connection_name()
    }

    async fn apply(
        &self,
        cx: &Cx<'_, Self>,
        status: &mut DeploymentStatus,
    ) -> Result<Vec<Change>, Error> {
        let interval = self.spec.rotation_interval().map_err(Error::InvalidSpec)?;
        let mut changes = Vec::new();
        let remote = match observe(self, cx, status).await? {
            Some(remote) => remote,
            None => {
                changes.extend(create(self, cx, status).await?);
                schedule_rotation(status, interval);
                return Ok(changes);
            }
        };
        record_remote(status, &remote);

        let differences = self.spec.diff(&remote);
        if !differences.is_empty() {
            cx.api
                .deployments()
                .update(&remote.id, &self.spec.update_request())
                .await
                .map_err(|e| Error::api(format!("update deployment {}", remote.id), e))?;
            status.remote_status = Some(RemoteStatus::Active);
            let fields = differences.join(", ");
            changes.push(
                if spec_already_applied(
                    self.metadata.generation,
                    status.observed_generation,
                    &status.conditions,
                ) {
                    Change::new(
                        "DriftCorrected",
                        format!(
                            "deployment {} was changed outside aigw ({fields}); restored it",
                            remote.id
                        ),
                    )
                } else {
                    Change::new(
                        "Updated",
                        format!("updated deployment {} ({fields})", remote.id),
                    )
                },
            );
        }

        if let Some(why) = rotation_due(self, status) {
            changes.push(rotate(self, cx, status, &remote.id, why).await?);
        } else {
            record_adopted_trigger(self, status);
            if !credentials_present(cx, &self.spec.credentials_secret_ref.name).await? {
                return Err(Error::MissingState(format!(
                    "the credentials Secret {} is missing and the one-time credentials of deployment {} cannot be read back; change spec.rotation.trigger to issue new ones",
                    self.spec.credentials_secret_ref.name, remote.id
                )));
            }
        }
        schedule_rotation(status, interval);
        Ok(changes)
    }

    async fn cleanup(&self, cx: &Cx<'_, Self>) -> Result<Vec<Change>, Error> {
        let status = self.status.clone().unwrap_or_default();
        let known = status.id.or(self.spec.deployment_id.clone());
        if self.spec.deletion_policy == DeploymentDeletionPolicy::Orphan {
            return Ok(orphaned(&format!(
                "deployment {}",
                known.unwrap_or_default()
            )));
        }
        let pending = match (&known, status.pending_create) {
            (None, Some(_)) => find_by_name(self, cx).await?,
            _ => None,
        };
        let Some(id) = known.or(pending) else {
            return Ok(Vec::new());
        };
        // The API's DELETE archives a deployment; it never hard-deletes one.
        let result = cx.api.deployments().delete(&id).await;
        removed("Archived", "archive", &format!("deployment {id}"), result)
    }
}

fn record_remote(status: &mut DeploymentStatus, remote: &api::Deployment) {
    status.id = Some(remote.id.clone());
    status.slug = Some(remote.slug.clone()).filter(|s| !s.is_empty());
    status.connection_status = remote.connection_status.as_ref().map(|c| match c {
        api::ConnectionStatus::Healthy => ConnectionStatus::Healthy,
        api::ConnectionStatus::Unhealthy => ConnectionStatus::Unhealthy,
        _ => ConnectionStatus::Unknown,
    });
    status.last_synced_at = remote.last_synced_at.clone();
    status.remote_status = remote.status.map(|s| match s {
        api::DeploymentStatus::Active => RemoteStatus::Active,
        api::DeploymentStatus::Archived => RemoteStatus::Archived,
    });
}

async fn observe(
    deployment: &Deployment,
    cx: &Cx<'_, Deployment>,
    status: &mut DeploymentStatus,
) -> Result<Option<api::Deployment>, Error> {
    let adopted = deployment.spec.deployment_id.as_deref();
    let Some(id) = adopted.or(status.id.as_deref()).map(str::to_string) else {
        return Ok(None);
    };
    let result = cx.api.deployments().get(&id).await;
    let found = observed(
        &format!("deployment {id}"),
        adopted.map(|_| "spec.deploymentId"),
        result,
    )?;
    if found.is_none() {
        status.id = None;
        status.slug = None;
    }
    Ok(found)
}

/// Registers the deployment and stores its one-time credentials, or finds the deployment an
/// earlier create made.
///
/// The intent goes into `status.pendingCreate` before the POST (see `controller::config::create`
/// for why). When a reconcile finds the intent set, it looks the deployment up by name instead
/// of POSTing again. The credentials of such a deployment were in the lost answer, and aigw made
/// the deployment, so nobody else holds them: it rotates them at once to fill the Secret.
async fn create(
    deployment: &Deployment,
    cx: &Cx<'_, Deployment>,
    status: &mut DeploymentStatus,
) -> Result<Vec<Change>, Error> {
    if status.pending_create.is_some()
        && let Some(id) = find_by_name(deployment, cx).await?
    {
        status.id = Some(id.clone());
        status.pending_create = None;
        let found = Change::new(
            "Created",
            format!("found deployment {id} from an earlier create whose answer was lost"),
        );
        let rotated = rotate(
            deployment,
            cx,
            status,
            &id,
            "its first credentials were lost with the create answer",
        )
        .await?;
        refresh(cx, status, &id).await?;
        return Ok(vec![found, rotated]);
    }

    status.pending_create = Some(now_rfc3339());
    cx.save_status(status).await?;
    let created = match cx
        .api
        .deployments()
        .create(&deployment.spec.create_request())
        .await
    {
        Ok(created) => created,
        Err(e) if e.outcome_unknown() => {
            return Err(Error::api(
                "create deployment (outcome unknown, will look it up)",
                e,
            ));
        }
        Err(e) => {
            status.pending_create = None;
            return Err(Error::api("create deployment", e));
        }
    };
    cx.ctx.failpoints.hit(AFTER_CREATE_POST).await;
    // The credentials exist only in this answer: store them before anything else.
    write_credentials(
        deployment,
        cx,
        &created.id,
        &created.client_auth,
        &created.credentials,
    )
    .await?;
    status.pending_create = None;
    status.id = Some(created.id.clone());
    status.last_rotated_at = Some(now_rfc3339());
    status.observed_rotation_trigger = Some(current_trigger(deployment));
    refresh(cx, status, &created.id).await?;
    Ok(vec![Change::new(
        "Created",
        format!(
            "registered deployment {} and stored its credentials in Secret {}",
            created.id, deployment.spec.credentials_secret_ref.name
        ),
    )])
}

async fn refresh(
    cx: &Cx<'_, Deployment>,
    status: &mut DeploymentStatus,
    id: &str,
) -> Result<(), Error> {
    let remote = cx
        .api
        .deployments()
        .get(id)
        .await
        .map_err(|e| Error::api(format!("read deployment {id}"), e))?;
    record_remote(status, &remote);
    Ok(())
}

async fn find_by_name(
    deployment: &Deployment,
    cx: &Cx<'_, Deployment>,
) -> Result<Option<String>, Error> {
    let query = DeploymentListQuery {
        search: Some(deployment.spec.name.clone()),
        status: Some(api::DeploymentStatus::Active),
        ..Default::default()
    };
    let found = cx
        .api
        .deployments()
        .list(&query)
        .await
        .map_err(|e| Error::api("list deployments", e))?;
    Ok(found
        .into_iter()
        .find(|d| d.name == deployment.spec.name)
        .map(|d| d.id))
}

/// The trigger as recorded in status: the spec's value, or "" when it sets none.
fn current_trigger(deployment: &Deployment) -> String {
    deployment
        .spec
        .rotation
        .as_ref()
        .and_then(|r| r.trigger.clone())
        .unwrap_or_default()
}

/// Why a rotation is due now, if it is. Restarts, drift checks and status writes never make
/// one due: only an interrupted rotation, a changed `spec.rotation.trigger` or the interval.
fn rotation_due(deployment: &Deployment, status: &DeploymentStatus) -> Option<&'static str> {
    if status.pending_rotation.is_some() {
        return Some("an interrupted rotation is done again");
    }
    // The first trigger aigw sees (on an adopted deployment) is only recorded: rotating then
    // would cut off the gateway that holds the current credentials.
    if status
        .observed_rotation_trigger
        .as_ref()
        .is_some_and(|seen| *seen != current_trigger(deployment))
    {
        return Some("spec.rotation.trigger changed");
    }
    let due_at = status
        .next_rotation_at
        .as_deref()
        .and_then(|t| t.parse::<jiff::Timestamp>().ok());
    let has_interval = deployment
        .spec
        .rotation
        .as_ref()
        .is_some_and(|r| r.interval.is_some());
    if has_interval && due_at.is_some_and(|due| due <= jiff::Timestamp::now()) {
        return Some("the rotation interval has passed");
    }
    None
}

fn record_adopted_trigger(deployment: &Deployment, status: &mut DeploymentStatus) {
    if status.observed_rotation_trigger.is_none() {
        status.observed_rotation_trigger = Some(current_trigger(deployment));
    }
}

/// Sets `nextRotationAt` from the last rotation (or from now, for a deployment aigw has not
/// rotated yet) and the interval.
fn schedule_rotation(status: &mut DeploymentStatus, interval: Option<Duration>) {
    let Some(interval) = interval else {
        status.next_rotation_at = None;
        return;
    };
    let base = status
        .last_rotated_at
        .as_deref()
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .unwrap_or_else(jiff::Timestamp::now);
    let next = jiff::SignedDuration::try_from(interval)
        .ok()
        .and_then(|d| base.checked_add(d).ok())
        .and_then(|t| t.round(jiff::Unit::Second).ok());
    if status.next_rotation_at.is_none() || status.last_rotated_at.is_some() {
        status.next_rotation_at = next.map(|t| t.to_string());
    }
}

/// Rotates the credentials: records the intent, PUTs `rotate_auth: true`, writes the new
/// one-time values to the Secret, then clears the intent and restarts the listed workloads.
///
/// If the process dies between the PUT and the Secret write, the new values are lost and the
/// Secret holds revoked ones. The intent recorded first (`status.pendingRotation`, with Ready
/// False) makes the next reconcile rotate again, so the Secret ends up with live values and
/// Ready is never reported over dead credentials.
async fn rotate(
    deployment: &Deployment,
    cx: &Cx<'_, Deployment>,
    status: &mut DeploymentStatus,
    id: &str,
    why: &str,
) -> Result<Change, Error> {
    status.pending_rotation = Some(now_rfc3339());
    let rotating = Outcome::Progressing {
        reason: "RotatingCredentials".into(),
        message: format!("rotating the credentials of deployment {id}: {why}"),
    };
    record_outcome(
        &mut status.conditions,
        &rotating,
        deployment.metadata.generation,
    );
    cx.save_status(status).await?;

    let request = UpdateDeploymentRequest {
        rotate_auth: Some(true),
        ..Default::default()
    };
    let rotated = cx
        .api
        .deployments()
        .update(id, &request)
        .await
        .map_err(|e| Error::api(format!("rotate the credentials of deployment {id}"), e))?;
    cx.ctx.failpoints.hit(AFTER_ROTATE_PUT).await;
    let (Some(client_auth), Some(credentials)) = (rotated.client_auth, rotated.credentials) else {
        return Err(Error::MissingState(format!(
            "the API rotated deployment {id} but returned no new credentials"
        )));
    };
    write_credentials(deployment, cx, id, &client_auth, &credentials).await?;

    let now = now_rfc3339();
    status.pending_rotation = None;
    status.last_rotated_at = Some(now.clone());
    status.next_rotation_at = None;
    status.observed_rotation_trigger = Some(current_trigger(deployment));
    restart_workloads(deployment, cx, &now).await;
    Ok(Change::new(
        "Rotated",
        format!(
            "rotated the credentials of deployment {id} ({why}); Secret {} updated",
            deployment.spec.credentials_secret_ref.name
        ),
    ))
}

/// Writes the one-time values into the credentials Secret, owned by the Deployment resource.
async fn write_credentials(
    deployment: &Deployment,
    cx: &Cx<'_, Deployment>,
    id: &str,
    client_auth: &SecretString,
    credentials: &Credentials,
) -> Result<(), Error> {
    let name = &deployment.spec.credentials_secret_ref.name;
    let data: BTreeMap<String, ByteString> = [
        ("client_auth", client_auth.expose()),
        ("username", credentials.username.as_str()),
        ("password", credentials.password.expose()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
    .collect();
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(cx.namespace()),
            labels: Some(
                [(
                    "app.kubernetes.io/managed-by".to_string(),
                    "aigw".to_string(),
                )]
                .into(),
            ),
            annotations: Some([("aigw.io/deployment-id".to_string(), id.to_string())].into()),
            owner_references: deployment.controller_owner_ref(&()).map(|o| vec![o]),
            ..Default::default()
        },
        type_: Some("Opaque".into()),
        data: Some(data),
        ..Default::default()
    };
    Api::<Secret>::namespaced(cx.ctx.kube.clone(), &cx.namespace())
        .patch(
            name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&secret),
        )
        .await
        .map_err(|e| Error::kube(format!("write the credentials Secret {name}"), e))?;
    Ok(())
}

async fn credentials_present(cx: &Cx<'_, Deployment>, name: &str) -> Result<bool, Error> {
    let secret = Api::<Secret>::namespaced(cx.ctx.kube.clone(), &cx.namespace())
        .get_opt(name)
        .await
        .map_err(|e| Error::kube(format!("read the credentials Secret {name}"), e))?;
    Ok(secret
        .and_then(|s| s.data)
        .is_some_and(|d| d.contains_key("client_auth")))
}

/// Patches a pod-template annotation so the workloads roll and read the new credentials.
/// A workload that cannot be patched is reported, not retried: the rotation itself is done.
async fn restart_workloads(deployment: &Deployment, cx: &Cx<'_, Deployment>, rotated_at: &str) {
    let Some(rotation) = &deployment.spec.rotation else {
        return;
    };
    let patch = serde_json::json!({
        "spec": {"template": {"metadata": {"annotations": {ROTATED_AT_ANNOTATION: rotated_at}}}}
    });
    let params = PatchParams::default();
    let ns = cx.namespace();
    for workload in &rotation.restart {
        let kube = cx.ctx.kube.clone();
        let result = match workload.kind {
            WorkloadKind::Deployment => Api::<AppsDeployment>::namespaced(kube, &ns)
                .patch(&workload.name, &params, &Patch::Merge(&patch))
                .await
                .map(|_| ()),
            WorkloadKind::StatefulSet => Api::<StatefulSet>::namespaced(kube, &ns)
                .patch(&workload.name, &params, &Patch::Merge(&patch))
                .await
                .map(|_| ()),
            WorkloadKind::DaemonSet => Api::<DaemonSet>::namespaced(kube, &ns)
                .patch(&workload.name, &params, &Patch::Merge(&patch))
                .await
                .map(|_| ()),
        };
        if let Err(e) = result {
            let message = format!(
                "failed to restart {:?} {} after the rotation: {e}",
                workload.kind, workload.name
            );
            cx.warn("RestartFailed", &message).await;
        }
    }
}
