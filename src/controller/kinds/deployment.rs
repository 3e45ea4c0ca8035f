//! Deployment: create or adopt the remote deployment, PUT only when a field differs, observe
//! its connection status, keep the one-time credentials in the owned Secret, rotate them when
//! asked or due, and archive (or orphan) on delete.

use std::time::Duration;

use crate::api::{self, Credentials, DeploymentListQuery, SecretString, UpdateDeploymentRequest};
use crate::controller::create::{
    Created, Lookup, body_hash, create_once, made_by_unfinished_create,
};
use crate::controller::driver::{Change, Cx, Managed, observed, orphaned, removed};
use crate::controller::error::Error;
use crate::controller::failpoints::{AFTER_CREATE_POST, AFTER_ROTATE_PUT};
use crate::controller::gate::Op;
use crate::controller::status::common_status;
use crate::controller::{now_rfc3339, spec_already_applied};
use crate::resources::common::{CreateAttempt, DriftCorrection};
use crate::resources::deployment::{
    ConnectionStatus, Deployment, DeploymentDeletionPolicy, DeploymentSpec, DeploymentStatus,
    RemoteStatus, Rotation, RotationStatus, UID_TAG,
};

pub use crate::controller::rotation::CREDENTIALS_AVAILABLE;
use crate::controller::rotation::{self, Issued, Rotates, set_credentials_condition};
use crate::controller::secret_delivery::{self, Delivery};
pub use crate::controller::secret_delivery::{
    MANAGED_BY, MANAGED_BY_LABEL, OWNER_UID_ANNOTATION, ROTATED_AT_ANNOTATION,
    ROTATION_ID_ANNOTATION,
};
const MANAGER: &str = "aigw/deployment";

common_status!(
    DeploymentStatus,
    |s| DeploymentStatus {
        last_synced_at: None,
        pending_create: s.pending_create.as_ref().map(|_| String::new()),
        rotation: RotationStatus {
            pending_rotation: s.rotation.pending_rotation.as_ref().map(|_| String::new()),
            ..s.rotation.clone()
        },
        ..s.clone()
    },
    intent_when = |s| s.pending_create.is_some() || s.rotation.pending_rotation.is_some()
);

/// Annotation on the credentials Secret: the remote deployment its values belong to.
pub const DEPLOYMENT_ID_ANNOTATION: &str = "aigw.io/deployment-id";

impl Managed for Deployment {
    crate::controller::driver::kind::namespaced_api!();
    type Status = DeploymentStatus;
    const KIND: &'static str = "Deployment";
    const MANAGER: &'static str = MANAGER;

    fn status(&self) -> Option<&DeploymentStatus> {
        self.status.as_ref()
    }

    fn status_slot(&mut self) -> &mut Option<DeploymentStatus> {
        &mut self.status
    }

    async fn apply(
        &self,
        cx: &Cx<'_, Self>,
        status: &mut DeploymentStatus,
    ) -> Result<Vec<Change>, Error> {
        let interval = self.spec.rotation_interval().map_err(Error::InvalidSpec)?;
        let interval = rotation::floored_interval(self, cx, status, interval, None).await;
        let mut changes = Vec::new();
        let Some(remote) = observe(self, cx, status).await? else {
            changes.extend(create(self, cx, status).await?);
            rotation::schedule(&mut status.rotation, interval);
            return Ok(changes);
        };

        let differences = self.spec.diff(&remote);
        if !differences.is_empty() {
            let replaced = DriftCorrection::of_fields(
                now_rfc3339(),
                None,
                &self.spec,
                &DeploymentSpec::adopting(&remote, &self.spec.credentials_secret_ref.name),
                &differences,
            );
            cx.gate.intend(format!(
                "would update deployment {} at {}",
                remote.id,
                replaced.paths()
            ));
            cx.api(Op::Update)
                .await?
                .deployments()
                .update(&remote.id, &self.spec.update_request(created_uid(self)))
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
                    let paths = replaced.paths();
                    status.last_drift_correction = Some(replaced);
                    Change::new(
                        "DriftCorrected",
                        format!(
                            "deployment {} was changed outside aigw at {paths}; restored it (status.lastDriftCorrection has the values it replaced)",
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

        match rotation::rotate_if_due(self, cx, status, &remote.id).await? {
            Some(rotated) => changes.push(rotated),
            None => check_credentials(self, cx, status, &remote.id).await?,
        }
        rotation::schedule(&mut status.rotation, interval);
        Ok(changes)
    }

    async fn observe_only(
        &self,
        cx: &Cx<'_, Self>,
        status: &mut DeploymentStatus,
    ) -> Result<Vec<&'static str>, Error> {
        Ok(match observe(self, cx, status).await? {
            Some(remote) => self.spec.diff(&remote),
            None => Vec::new(),
        })
    }

    async fn cleanup(&self, cx: &Cx<'_, Self>) -> Result<Vec<Change>, Error> {
        let status = self.status.clone().unwrap_or_default();
        // Only what this resource recorded (see Config's cleanup).
        let known = status.id.clone();
        if self.spec.deletion_policy == DeploymentDeletionPolicy::Orphan {
            // The remote deployment stays live and its one-time credentials exist nowhere else:
            // keep the Secret when this resource goes.
            release_credentials(self, cx).await?;
            return Ok(orphaned(&format!(
                "deployment {}",
                known.unwrap_or_default()
            )));
        }
        let id = match (known, &status.pending_create) {
            (Some(id), _) => id,
            (None, Some(_)) => {
                let lookup = find_created(self, cx);
                match made_by_unfinished_create(&status, "deployment", lookup).await? {
                    Some(found) => found.id,
                    None => return Ok(Vec::new()),
                }
            }
            (None, None) => return Ok(Vec::new()),
        };
        // The API's DELETE archives a deployment; it never hard-deletes one.
        let result = cx.api(Op::Delete).await?.deployments().delete(&id).await;
        removed("Archived", "archive", &format!("deployment {id}"), result)
    }

    fn due_in(&self, status: &DeploymentStatus) -> Option<Duration> {
        rotation::due_in(&status.rotation)
    }

    fn due_now(&self, status: &DeploymentStatus) -> bool {
        rotation::rotation_pending(self, &status.rotation)
    }

    async fn finish_in_flight(
        &self,
        cx: &Cx<'_, Self>,
        status: &mut Self::Status,
    ) -> Result<Option<Change>, Error> {
        let id = status.id.clone();
        rotation::finish_in_flight(self, cx, status, id.as_deref()).await
    }
}

impl Rotates for Deployment {
    const ROTATING_REASON: &'static str = "RotatingCredentials";
    const AFTER_ROTATE: &'static str = AFTER_ROTATE_PUT;
    const SECRET_FIELD: &'static str = "spec.credentialsSecretRef";
    const STORED: &'static str = "the credentials Secret holds the credentials aigw was issued";

    fn rotation(&self) -> Option<&Rotation> {
        self.spec.rotation.as_ref()
    }

    fn secret_name(&self) -> &str {
        &self.spec.credentials_secret_ref.name
    }

    fn what(id: &str) -> String {
        format!("the credentials of deployment {id}")
    }

    fn rotation_status(status: &mut DeploymentStatus) -> &mut RotationStatus {
        &mut status.rotation
    }

    /// PUTs `rotate_auth: true`. Whatever values the answer carried are stored; one without
    /// `client_auth` leaves the rotation unfinished (and done again).
    async fn call_rotate(&self, cx: &Cx<'_, Self>, id: &str) -> Result<Issued, Error> {
        let request = UpdateDeploymentRequest {
            rotate_auth: Some(true),
            ..Default::default()
        };
        let rotated = cx
            .api(Op::Rotate)
            .await?
            .deployments()
            .update(id, &request)
            .await
            .map_err(|e| Error::api(format!("rotate the credentials of deployment {id}"), e))?;
        let mut values = Vec::new();
        if let Some(client_auth) = rotated.client_auth {
            values.push(("client_auth", client_auth));
        }
        let note = match rotated.credentials {
            Some(credentials) => {
                values.push(("username", SecretString::from(credentials.username)));
                values.push(("password", credentials.password));
                ""
            }
            None => {
                " (the answer carried no registry credentials; the Secret keeps the previous ones)"
            }
        };
        let incomplete = (!values.iter().any(|(key, _)| *key == "client_auth")).then(|| {
            format!(
                "the API rotated deployment {id} but its answer carried no client_auth; rotating again"
            )
        });
        Ok(Issued {
            values,
            annotations: vec![(DEPLOYMENT_ID_ANNOTATION, id.to_string())],
            note: note.into(),
            incomplete,
        })
    }
}

/// The uid for the identity tag, on a deployment aigw creates (not on an adopted one).
fn created_uid(deployment: &Deployment) -> Option<&str> {
    match deployment.spec.deployment_id {
        Some(_) => None,
        None => deployment.metadata.uid.as_deref(),
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

/// Every workspace an existing gateway can act in: the workspaces it reports serving, its
/// auth settings' `workspaces_allowed` and `jwt_sub_workspace_mapping` values, and `*` when it
/// allows all workspaces (which only a grant of `"*"` covers).
fn served_workspaces(remote: &api::Deployment) -> Vec<&str> {
    let mut workspaces: Vec<&str> = remote.workspaces.iter().map(|w| w.id.as_str()).collect();
    if let Some(auth) = &remote.auth_settings {
        if auth.allow_all_workspaces == Some(true) {
            workspaces.push("*");
        }
        workspaces.extend(auth.workspaces_allowed.iter().flatten().map(String::as_str));
        workspaces.extend(
            auth.jwt_sub_workspace_mapping
                .iter()
                .flat_map(|m| m.values())
                .map(String::as_str),
        );
    }
    workspaces.sort_unstable();
    workspaces.dedup();
    workspaces
}

/// GETs the remote deployment and records what it reports. Only 404 or `AB08` means it is gone.
async fn observe(
    deployment: &Deployment,
    cx: &Cx<'_, Deployment>,
    status: &mut DeploymentStatus,
) -> Result<Option<api::Deployment>, Error> {
    let adopted = deployment.spec.deployment_id.as_deref();
    let Some(id) = adopted.or(status.id.as_deref()).map(str::to_string) else {
        return Ok(None);
    };
    let result = cx.api(Op::Read).await?.deployments().get(&id).await;
    let found = observed(
        &format!("deployment {id}"),
        adopted.map(|_| "spec.deploymentId"),
        result,
    )?;
    if let (Some(remote), Some(_)) = (&found, adopted) {
        // Adopting reaches a gateway made outside aigw: everything it serves must be granted
        // too (its workspaces; the organisation, if it is the default gateway).
        let what = format!("deployment {id}");
        for workspace in served_workspaces(remote) {
            cx.gate
                .reach(&format!("a workspace {what} serves"), Some(workspace))
                .await?;
        }
        if remote.summary.is_default == Some(true) {
            cx.gate
                .reach_default(&format!("{what} is the organisation's default gateway"))
                .await?;
        }
    }
    match &found {
        Some(remote) => record_remote(status, remote),
        None => {
            status.id = None;
            status.slug = None;
        }
    }
    Ok(found)
}

/// Registers the deployment through the shared create protocol (see [`crate::controller::create`]) and
/// stores its one-time credentials, or finds the deployment an earlier create made by its
/// `aigw.io/uid` tag. A deployment found that way had its credentials in the lost answer and
/// was made by aigw for this resource (the tag says so), so aigw rotates them to fill the
/// Secret, unless the Secret already holds them.
async fn create(
    deployment: &Deployment,
    cx: &Cx<'_, Deployment>,
    status: &mut DeploymentStatus,
) -> Result<Vec<Change>, Error> {
    let secret_version = rotation::check_secret_is_ours(deployment, cx).await?;
    let api = cx.api(Op::Create).await?;
    let request = deployment.spec.create_request(created_uid(deployment));
    let sent = CreateAttempt {
        name: Some(deployment.spec.name.clone()),
        workspace_id: None,
        body_hash: body_hash(
            &cx.ctx.hash_key,
            deployment.metadata.uid.as_deref(),
            &request,
        ),
        ended_at: None,
        intent: None,
    };
    let outcome = create_once(
        cx,
        status,
        "deployment",
        sent,
        find_created(deployment, cx),
        api,
        async |api| api.deployments().create(&request).await,
    )
    .await?;
    let created = match outcome {
        Created::Posted(created) => created,
        Created::Recovered(found) => {
            status.id = Some(found.id.clone());
            cx.save_status(status).await?;
            let mut changes = vec![Change::new(
                "Created",
                format!(
                    "found deployment {} from an earlier create whose answer was lost",
                    found.id
                ),
            )];
            if secret_delivery::secret_annotation(
                cx,
                &deployment.spec.credentials_secret_ref.name,
                DEPLOYMENT_ID_ANNOTATION,
            )
            .await?
            .as_deref()
                != Some(found.id.as_str())
            {
                changes.push(
                    rotation::rotate(
                        deployment,
                        cx,
                        status,
                        &found.id,
                        "its first credentials were lost with the create answer",
                    )
                    .await?,
                );
            }
            return Ok(changes);
        }
    };
    cx.ctx.failpoints.hit(AFTER_CREATE_POST).await;
    status.id = Some(created.id.clone());
    status.slug = created.slug.clone();
    status.remote_status = Some(RemoteStatus::Active);
    // A new gateway has not reported in yet; the next observation says how it is.
    status.connection_status = Some(ConnectionStatus::Unknown);
    // The credentials exist only in this answer: store them before anything else. If that
    // fails they are lost, and only a rotation can issue new ones: record that intent with
    // the id, so the next reconcile rotates.
    let stored = write_credentials(
        deployment,
        cx,
        &created.id,
        "create",
        Some(&created.client_auth),
        Some(&created.credentials),
        secret_version.as_deref(),
    )
    .await;
    if let Err(e) = stored {
        rotation::issued_by_create(deployment, status, false);
        cx.save_status(status).await?;
        return Err(e);
    }
    // A gateway created again (its remote deployment was gone) has new credentials: the
    // workloads reading the old ones roll, as after a rotation.
    let recreated = status.rotation.last_rotated_at.is_some();
    let now = rotation::issued_by_create(deployment, status, true);
    cx.save_status(status).await?;
    if recreated {
        rotation::restart_workloads(deployment, cx, &now).await;
    }
    Ok(vec![Change::new(
        "Created",
        format!(
            "registered deployment {} and stored its credentials in Secret {}",
            created.id, deployment.spec.credentials_secret_ref.name
        ),
    )])
}

/// The deployment an earlier create made for this resource: the one carrying its
/// `aigw.io/uid` tag, in a complete listing.
async fn find_created(
    deployment: &Deployment,
    cx: &Cx<'_, Deployment>,
) -> Result<Lookup<api::DeploymentSummary>, Error> {
    let Some(uid) = created_uid(deployment) else {
        return Ok(Lookup::Absent);
    };
    let query = DeploymentListQuery {
        tags: [(UID_TAG.to_string(), uid.to_string())].into(),
        ..Default::default()
    };
    let listing = cx
        .api(Op::Read)
        .await?
        .deployments()
        .listing(&query)
        .await
        .map_err(|e| Error::api("list deployments", e))?;
    let complete = listing.complete;
    // The filter is applied here too, in case the server ignores it; a deployment another
    // resource records is never taken for this one's, whatever its tags say.
    let claimed_elsewhere = cx.gate.claimed_elsewhere();
    let mut tagged: Vec<_> = listing
        .items
        .into_iter()
        .filter(|d| {
            d.tags
                .as_ref()
                .and_then(|t| t.get(UID_TAG))
                .map(String::as_str)
                == Some(uid)
        })
        .filter(|d| !claimed_elsewhere(&d.id))
        .collect();
    Ok(match tagged.len() {
        1 => tagged.pop().map_or(Lookup::Absent, Lookup::Found),
        0 if complete => Lookup::Absent,
        0 => {
            Lookup::Unknown("the deployment list is incomplete (fewer rows than its total)".into())
        }
        n => Lookup::Unknown(format!("{n} deployments carry this resource's uid tag")),
    })
}

/// Checks that the credentials Secret holds this deployment's credentials. For a deployment
/// aigw created, a missing Secret is an error (the values cannot be read back). For an adopted
/// one whose credentials were issued before aigw knew it, it is the normal state: reported in
/// `CredentialsAvailable`, with the object Ready.
async fn check_credentials(
    deployment: &Deployment,
    cx: &Cx<'_, Deployment>,
    status: &mut DeploymentStatus,
    id: &str,
) -> Result<(), Error> {
    let name = &deployment.spec.credentials_secret_ref.name;
    if credentials_present(cx, name).await? {
        set_credentials_condition(deployment, status, true, "Stored", Deployment::STORED);
        return Ok(());
    }
    if deployment.spec.deployment_id.is_some() && status.rotation.last_rotated_at.is_none() {
        let message = format!(
            "deployment {id} was adopted: its credentials were issued before aigw managed it; change spec.rotation.trigger to issue new ones into Secret {name}"
        );
        set_credentials_condition(deployment, status, false, "NotIssued", &message);
        return Ok(());
    }
    let message = format!(
        "the credentials Secret {name} is missing and the one-time credentials of deployment {id} cannot be read back; change spec.rotation.trigger to issue new ones"
    );
    set_credentials_condition(deployment, status, false, "SecretMissing", &message);
    Err(Error::MissingState(message))
}

/// Writes the one-time values the API returned into the credentials Secret, stamped with
/// `rotation` and the deployment id. A value the answer lacked is left as it is.
async fn write_credentials(
    deployment: &Deployment,
    cx: &Cx<'_, Deployment>,
    id: &str,
    rotation: &str,
    client_auth: Option<&SecretString>,
    credentials: Option<&Credentials>,
    expected: Option<&str>,
) -> Result<(), Error> {
    let mut values = Vec::new();
    if let Some(client_auth) = client_auth {
        values.push(("client_auth", client_auth.expose()));
    }
    if let Some(credentials) = credentials {
        values.push(("username", credentials.username.as_str()));
        values.push(("password", credentials.password.expose()));
    }
    let delivery = Delivery {
        name: &deployment.spec.credentials_secret_ref.name,
        values,
        annotations: vec![
            (DEPLOYMENT_ID_ANNOTATION, id.to_string()),
            (ROTATION_ID_ANNOTATION, rotation.to_string()),
        ],
        expected,
    };
    secret_delivery::deliver(cx, delivery).await
}

async fn credentials_present(cx: &Cx<'_, Deployment>, name: &str) -> Result<bool, Error> {
    secret_delivery::secret_holds(cx, name, "client_auth").await
}

/// Keeps the credentials Secret when the resource goes (`deletionPolicy: Orphan`).
async fn release_credentials(
    deployment: &Deployment,
    cx: &Cx<'_, Deployment>,
) -> Result<(), Error> {
    secret_delivery::release_secret(cx, &deployment.spec.credentials_secret_ref.name).await
}
