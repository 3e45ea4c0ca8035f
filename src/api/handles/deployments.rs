use crate::api::error::ApiError;
use crate::api::models::{
    CreateDeploymentRequest, Deployment, DeploymentCreated, DeploymentListQuery, DeploymentSummary,
    DeploymentUpdated, Listing, UpdateDeploymentRequest,
};
use crate::api::routes::{DEPLOYMENT, DEPLOYMENTS};

use super::collection::{DeletedByKey, ReadByKey, Receipt, Remote, Written};

/// Deployments (`/ai_gw/admin/v2/deployments`). The create's answer holds `client_auth` and the
/// password, which no later read returns: store them before doing anything else. An update with
/// `rotate_auth: true` answers the new secrets, once. A delete archives the deployment; it stays
/// in the list with `status: archived`.
pub type Deployments<'c> = super::Endpoint<'c, Deployment>;

impl Remote for Deployment {
    const COLLECTION: &'static str = DEPLOYMENTS;
    const ITEM: &'static str = DEPLOYMENT;
    const SECRET_READS: bool = true;
    const SECRET_WRITES: bool = true;
}

impl ReadByKey for Deployment {}

impl Written for Deployment {
    type Create = CreateDeploymentRequest;
    type Created = DeploymentCreated;
    type Update = UpdateDeploymentRequest;
    type Updated = DeploymentUpdated;
}

impl DeletedByKey for Deployment {}

impl Receipt for DeploymentUpdated {}

impl Deployments<'_> {
    /// The API does not page this list.
    pub async fn list(
        &self,
        query: &DeploymentListQuery,
    ) -> Result<Vec<DeploymentSummary>, ApiError> {
        Ok(self.listing(query).await?.items)
    }

    /// Like [`Self::list`], saying whether the answer held every row (`total`).
    pub async fn listing(
        &self,
        query: &DeploymentListQuery,
    ) -> Result<Listing<DeploymentSummary>, ApiError> {
        super::unpaged(self.client, DEPLOYMENTS, query.to_pairs()).await
    }
}
