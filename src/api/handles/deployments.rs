use crate::api::client::{Call, Client};
use crate::api::error::ApiError;
use crate::api::models::{
    CreateDeploymentRequest, Deployment, DeploymentCreated, DeploymentListQuery, DeploymentSummary,
    DeploymentUpdated, ListPage, Listing, UpdateDeploymentRequest, Validate,
};
use crate::api::routes::{DEPLOYMENT, DEPLOYMENTS, Route, Verb};

/// Deployments (`/ai_gw/admin/v2/deployments`).
#[derive(Debug, Clone, Copy)]
pub struct Deployments<'c> {
    client: &'c Client,
}

impl<'c> Deployments<'c> {
    pub(crate) fn new(client: &'c Client) -> Self {
        Self { client }
    }

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
        let call = Call::new(Route::mgmt(Verb::Get, DEPLOYMENTS, &[])).query(query.to_pairs());
        let page: ListPage<DeploymentSummary> = self.client.json(call).await?;
        Ok(Listing::from_page(page))
    }

    /// The answer holds `client_auth` and the password, which no later read returns: store them
    /// before doing anything else. Not retried when the answer is lost (`outcome_unknown()`).
    pub async fn create(
        &self,
        req: &CreateDeploymentRequest,
    ) -> Result<DeploymentCreated, ApiError> {
        req.validate()?;
        let call = Call::new(Route::mgmt(Verb::Post, DEPLOYMENTS, &[]))
            .json(req)?
            .sensitive();
        self.client.json(call).await
    }

    pub async fn get(&self, id: &str) -> Result<Deployment, ApiError> {
        super::require("deploymentId", id)?;
        let call = Call::new(Route::mgmt(Verb::Get, DEPLOYMENT, &[id])).sensitive();
        self.client.json(call).await
    }

    /// With `rotate_auth: true` the answer carries the new secrets, once.
    pub async fn update(
        &self,
        id: &str,
        req: &UpdateDeploymentRequest,
    ) -> Result<DeploymentUpdated, ApiError> {
        super::require("deploymentId", id)?;
        req.validate()?;
        let call = Call::new(Route::mgmt(Verb::Put, DEPLOYMENT, &[id]))
            .json(req)?
            .sensitive();
        self.client.json(call).await
    }

    /// Archives the deployment; it stays in the list with `status: archived`.
    pub async fn delete(&self, id: &str) -> Result<(), ApiError> {
        super::require("deploymentId", id)?;
        self.client
            .empty(Call::new(Route::mgmt(Verb::Delete, DEPLOYMENT, &[id])))
            .await
    }
}
