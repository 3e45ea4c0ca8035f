//! Deployment: its verbs ([`Verbs`]) and what its answers issue ([`Issues`]). The driver
//! creates or adopts the remote deployment, PUTs only when a field differs, keeps the one-time
//! credentials in the owned Secret, rotates them when asked or due, and archives (or orphans)
//! on delete ([`crate::controller::driver::issuing`]).

use std::time::Duration;

use crate::api::{
    self, ApiError, Client, DeploymentCreated, DeploymentListQuery, SecretString,
    UpdateDeploymentRequest,
};
use crate::controller::driver::calls::{Deleting, Own, OwnCalls, Put, Read, Recovered};
use crate::controller::driver::create::{Created, Lookup};
use crate::controller::driver::echoes::Echoable;
use crate::controller::driver::flow::Recovery;
use crate::controller::driver::gate::Op;
use crate::controller::driver::issuing::Issues;
use crate::controller::driver::status::EmbedsManagedStatus;
use crate::controller::driver::verbs::{Comparison, Inputs, Made, Verbs};
use crate::controller::driver::{Cx, Managed};
use crate::controller::error::{Error, Halt};
use crate::controller::runtime::failpoints::{AFTER_CREATE_POST, AFTER_ROTATE_PUT};
use crate::resources::common::{CreateAttempt, DriftCorrection};
use crate::resources::deployment::{
    ConnectionStatus, Deployment, DeploymentSpec, DeploymentStatus, RemoteStatus, Rotation, UID_TAG,
};

pub use crate::controller::driver::rotation::CREDENTIALS_AVAILABLE;
use crate::controller::driver::rotation::{Issued, Rotates};
pub use crate::controller::driver::secret_delivery::{
    MANAGED_BY, MANAGED_BY_LABEL, OWNER_UID_ANNOTATION, ROTATED_AT_ANNOTATION,
    ROTATION_ID_ANNOTATION,
};

impl EmbedsManagedStatus for DeploymentStatus {
    fn without_own_timestamps(&self) -> Self {
        Self {
            last_synced_at: None,
            rotation: self.rotation.without_timestamps(),
            ..self.clone()
        }
    }
    fn own_intent(&self) -> bool {
        self.rotation.pending_rotation.is_some()
    }
}

/// Annotation on the credentials Secret: the remote deployment its values belong to.
pub const DEPLOYMENT_ID_ANNOTATION: &str = "aigw.io/deployment-id";

impl Managed for Deployment {
    crate::controller::driver::kind::namespaced_api!();
    const KIND: &'static str = "Deployment";

    crate::controller::driver::flow::driven!(issuing);
}

impl Verbs for Deployment {
    type Desired = ();
    type Calls = Own;
    const RECORDS_DRIFT: bool = true;
    /// The API's DELETE archives a deployment; it never hard-deletes one.
    const REMOVAL: (&'static str, &'static str) = ("Archived", "archive");

    async fn resolve(&self, _cx: &Cx<'_, Self>, _: &mut DeploymentStatus) -> Inputs<Self> {
        Ok(())
    }
    /// The credentials it was delivered: an update or archive refused after a restart may
    /// quote them, and no reconcile of this process handled them.
    fn echoable(&self, _ctx: &crate::controller::Context) -> Vec<Echoable> {
        vec![Echoable::Delivered {
            name: self.spec.credentials_secret_ref.name.clone(),
            keys: &[CLIENT_AUTH, "username", "password"],
        }]
    }
    /// Adopting reaches a gateway made outside aigw: everything it serves must be granted too
    /// (its workspaces; the organisation, if it is the default gateway).
    async fn reach_adopted(
        &self,
        cx: &Cx<'_, Self>,
        what: &str,
        remote: &api::Deployment,
    ) -> Result<(), Error> {
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
        Ok(())
    }
    fn record(status: &mut DeploymentStatus, remote: Option<&api::Deployment>) {
        match remote {
            Some(remote) => record_remote(status, remote),
            None => {
                status.id = None;
                status.slug = None;
            }
        }
    }
    fn record_created(
        &self,
        status: &mut DeploymentStatus,
        _desired: &(),
        created: Made<Self>,
    ) -> String {
        match created {
            Created::Posted(created) => {
                status.id = Some(created.id.clone());
                status.slug = created.slug.clone();
                status.remote_status = Some(RemoteStatus::Active);
                // A new gateway has not reported in yet; the next observation says how it is.
                status.connection_status = Some(ConnectionStatus::Unknown);
                created.id
            }
            Created::Recovered(found) => {
                status.id = Some(found.id.clone());
                found.id
            }
        }
    }
    fn record_updated(
        &self,
        status: &mut DeploymentStatus,
        _desired: &(),
        _remote: &api::Deployment,
        _updated: api::DeploymentUpdated,
    ) {
        status.remote_status = Some(RemoteStatus::Active);
    }
    fn replaced(
        &self,
        _desired: &(),
        remote: &api::Deployment,
        comparison: &Comparison,
        at: String,
    ) -> DriftCorrection {
        let secret = &self.spec.credentials_secret_ref.name;
        let current = DeploymentSpec::adopting(remote, secret);
        DriftCorrection::of_fields(at, None, &self.spec, &current, &comparison.differs)
    }
    fn record_drift(status: &mut DeploymentStatus, replaced: DriftCorrection) {
        status.last_drift_correction = Some(Box::new(replaced));
    }
}

impl OwnCalls for Deployment {
    type Remote = api::Deployment;
    type Found = api::DeploymentSummary;
    type Posted = DeploymentCreated;
    type Updated = api::DeploymentUpdated;
    /// Only 404 or `AB08` means it is gone.
    async fn observe(&self, client: &Client, key: &str, _: &DeploymentStatus) -> Read<Self> {
        client.deployments().get(key).await.map(Some)
    }
    fn sent(&self, cx: &Cx<'_, Self>, _desired: &()) -> CreateAttempt {
        let request = self.spec.create_request(created_uid(self));
        cx.create_attempt(Some(self.spec.name.clone()), None, &request)
    }
    async fn create(&self, client: &Client, _desired: &()) -> Result<DeploymentCreated, ApiError> {
        let request = self.spec.create_request(created_uid(self));
        client.deployments().create(&request).await
    }
    fn compare(
        &self,
        _desired: &(),
        remote: &api::Deployment,
        _status: &DeploymentStatus,
    ) -> Comparison {
        Comparison {
            differs: self.spec.diff(remote),
            ..Default::default()
        }
    }
    async fn update(&self, client: &Client, _desired: &(), remote: &api::Deployment) -> Put<Self> {
        client
            .deployments()
            .update(&remote.id, &self.spec.update_request(created_uid(self)))
            .await
    }
    async fn delete(&self, at: Deleting<'_, Self>) -> Result<(), ApiError> {
        at.client.deployments().delete(at.key).await
    }
    /// The deployment an earlier create made for this resource: the one carrying its
    /// `aigw.io/uid` tag, in a complete listing.
    async fn find_created(&self, cx: &Cx<'_, Self>, _: &DeploymentStatus) -> Recovered<Self> {
        let Some(uid) = created_uid(self) else {
            return Ok(Lookup::Absent);
        };
        let query = DeploymentListQuery {
            tags: [(UID_TAG.to_string(), uid.to_string())].into(),
            ..Default::default()
        };
        let listing = cx
            .read("list deployments", |client| async move {
                client.deployments().listing(&query).await
            })
            .await?;
        // The filter is applied here too, in case the server ignores it; a deployment another
        // resource records is never taken for this one's, whatever its tags say.
        let claimed_elsewhere = cx.gate.claimed_elsewhere();
        let tagged = listing
            .items
            .into_iter()
            .filter(|d| {
                d.tags
                    .as_ref()
                    .and_then(|t| t.get(UID_TAG))
                    .map(String::as_str)
                    == Some(uid)
            })
            .filter(|d| !claimed_elsewhere(&d.id));
        Ok(Lookup::only(tagged, listing.complete, "deployment"))
    }
}

/// The key of the Secret that holds the gateway's token, the value a rotation must deliver.
const CLIENT_AUTH: &str = "client_auth";

impl Issues for Deployment {
    const ID_ANNOTATION: &'static str = DEPLOYMENT_ID_ANNOTATION;
    const AFTER_CREATE: Option<&'static str> = Some(AFTER_CREATE_POST);
    const HELD: &'static str = CLIENT_AUTH;

    fn timing(&self) -> Result<(Option<Duration>, Option<Duration>), Error> {
        let interval = self.spec.rotation_interval().map_err(Error::InvalidSpec)?;
        Ok((interval, None))
    }
    fn issued(created: &DeploymentCreated) -> Vec<(&'static str, SecretString)> {
        vec![
            (CLIENT_AUTH, created.client_auth.clone()),
            (
                "username",
                SecretString::from(created.credentials.username.clone()),
            ),
            ("password", created.credentials.password.clone()),
        ]
    }
    fn created_message(id: &str, secret: &str) -> String {
        format!("registered deployment {id} and stored its credentials in Secret {secret}")
    }
    /// A deployment found by its `aigw.io/uid` tag was made by aigw for this resource; its
    /// credentials were in the lost answer, so aigw rotates them to fill the Secret, unless
    /// the Secret already holds them.
    fn recovery(&self, _found: &api::DeploymentSummary, held: bool) -> Recovery {
        match held {
            true => Recovery::Found,
            false => Recovery::Rotate("its first credentials were lost with the create answer"),
        }
    }
    /// For a deployment aigw created, a missing Secret is an error (the values cannot be read
    /// back). For an adopted one whose credentials were issued before aigw knew it, it is the
    /// normal state: reported in `CredentialsAvailable`, with the object Ready.
    fn never_issued(&self, status: &DeploymentStatus, id: &str, secret: &str) -> Option<String> {
        (self.spec.deployment_id.is_some() && status.rotation.last_rotated_at.is_none()).then(|| {
            format!(
                "deployment {id} was adopted: its credentials were issued before aigw managed it; change spec.rotation.trigger to issue new ones into Secret {secret}"
            )
        })
    }
}

impl Rotates for Deployment {
    const ROTATING_REASON: &'static str = "RotatingCredentials";
    const AFTER_ROTATE: &'static str = AFTER_ROTATE_PUT;
    const SECRET_FIELD: &'static str = "spec.credentialsSecretRef";
    const STORED: &'static str = "the credentials Secret holds the gateway's credentials";

    fn rotation(&self) -> Option<&Rotation> {
        self.spec.rotation.as_ref()
    }

    fn secret_name(&self) -> &str {
        &self.spec.credentials_secret_ref.name
    }

    fn what(id: &str) -> String {
        format!("the credentials of deployment {id}")
    }

    /// PUTs `rotate_auth: true`. Whatever values the answer carried are stored; one without
    /// `client_auth` leaves the rotation unfinished (and done again).
    async fn call_rotate(&self, cx: &Cx<'_, Self>, id: &str) -> Result<Issued, Halt> {
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
            values.push((CLIENT_AUTH, client_auth));
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
        let incomplete = (!values.iter().any(|(key, _)| *key == CLIENT_AUTH)).then(|| {
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
