use crate::api::client::Call;
use crate::api::error::ApiError;
use crate::api::models::{
    CreateDeploymentRequest, Deployment, DeploymentCreated, DeploymentListQuery, DeploymentSummary,
    DeploymentUpdated, ListPage, Listing, UpdateDeploymentRequest,
};
use crate::api::routes::{DEPLOYMENT, DEPLOYMENTS, Route, Verb};

/// Deployments (`/ai_gw/admin/v2/deployments`).
pub type Deployments<'c> = super::Endpoint<'c, Deployment>;

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
        let call = super::post(DEPLOYMENTS, req)?.sensitive();
        self.client.json(call).await
    }

    pub async fn get(&self, id: &str) -> Result<Deployment, ApiError> {
        let call = super::on(Verb::Get, DEPLOYMENT, "deploymentId", id)?.sensitive();
        self.client.json(call).await
    }

    /// With `rotate_auth: true` the answer carries the new secrets, once.
    pub async fn update(
        &self,
        id: &str,
        req: &UpdateDeploymentRequest,
    ) -> Result<DeploymentUpdated, ApiError> {
        let call = super::send(Verb::Put, DEPLOYMENT, "deploymentId", id, req)?.sensitive();
        self.client.json(call).await
    }

    /// Archives the deployment; it stays in the list with `status: archived`.
    pub async fn delete(&self, id: &str) -> Result<(), ApiError> {
        let call = super::on(Verb::Delete, DEPLOYMENT, "deploymentId", id)?;
        self.client.empty(call).await
    }
}
