use crate::api::client::Call;
use crate::api::error::ApiError;
use crate::api::models::{
    CreateIntegrationRequest, Integration, IntegrationCreated, IntegrationModels,
    IntegrationWorkspaces, IntegrationsListQuery, Listing, UpdateIntegrationRequest,
    UpdateModelsRequest, UpdateWorkspacesRequest,
};
use crate::api::routes::{
    INTEGRATION, INTEGRATION_MODELS, INTEGRATION_WORKSPACES, INTEGRATIONS, Route, Verb,
};

/// The organisation's integrations (`/ai_gw/admin/v2/integrations`), addressed by UUID or slug.
/// `key` and credential `configurations` are write-only: reads return them masked.
pub type Integrations<'c> = super::Endpoint<'c, Integration>;

impl Integrations<'_> {
    /// Every integration that matches, all pages.
    pub async fn list(&self, query: &IntegrationsListQuery) -> Result<Vec<Integration>, ApiError> {
        Ok(self.listing(query).await?.items)
    }

    /// Like [`Self::list`], saying whether the pages prove the whole list.
    pub async fn listing(
        &self,
        query: &IntegrationsListQuery,
    ) -> Result<Listing<Integration>, ApiError> {
        super::paged(
            self.client,
            INTEGRATIONS,
            &[],
            query.to_pairs(),
            |i: &Integration| i.id.as_str(),
        )
        .await
    }

    /// The detail (key and credentials masked).
    pub async fn get(&self, id: &str) -> Result<Integration, ApiError> {
        let call = super::on(Verb::Get, INTEGRATION, "integrationId", id)?;
        self.client.json(call).await
    }

    /// Not retried when the answer is lost (`outcome_unknown()`): look it up (by its slug)
    /// before creating again.
    pub async fn create(
        &self,
        req: &CreateIntegrationRequest,
    ) -> Result<IntegrationCreated, ApiError> {
        let call = super::post(INTEGRATIONS, req)?.sensitive();
        self.client.json(call).await
    }

    /// `ai_provider_id`, `slug` and `workspace_id` cannot change.
    pub async fn update(&self, id: &str, req: &UpdateIntegrationRequest) -> Result<(), ApiError> {
        let call = super::send(Verb::Put, INTEGRATION, "integrationId", id, req)?.sensitive();
        self.client.empty(call).await
    }

    /// `organisation_id`: the numeric TSG the live API takes as a query parameter, when known.
    pub async fn delete(&self, id: &str, organisation_id: Option<&str>) -> Result<(), ApiError> {
        super::require("integrationId", id)?;
        let query: Vec<(&str, String)> = organisation_id
            .map(|org| ("organisation_id", org.to_string()))
            .into_iter()
            .collect();
        let call = Call::new(Route::mgmt(Verb::Delete, INTEGRATION, &[id])).query(query);
        self.client.empty(call).await
    }

    /// The workspace access rows (a disabled row stays listed).
    pub async fn workspaces(&self, id: &str) -> Result<IntegrationWorkspaces, ApiError> {
        let call = super::on(Verb::Get, INTEGRATION_WORKSPACES, "integrationId", id)?;
        self.client.json(call).await
    }

    /// Merges the listed rows; there is no delete (a row is disabled with `enabled: false`).
    pub async fn update_workspaces(
        &self,
        id: &str,
        req: &UpdateWorkspacesRequest,
    ) -> Result<(), ApiError> {
        let call = super::send(Verb::Put, INTEGRATION_WORKSPACES, "integrationId", id, req)?;
        self.client.empty(call).await
    }

    pub async fn models(&self, id: &str) -> Result<IntegrationModels, ApiError> {
        let call = super::on(Verb::Get, INTEGRATION_MODELS, "integrationId", id)?;
        self.client.json(call).await
    }

    /// Merges per slug; a new slug must be a custom model.
    pub async fn update_models(&self, id: &str, req: &UpdateModelsRequest) -> Result<(), ApiError> {
        let call = super::send(Verb::Put, INTEGRATION_MODELS, "integrationId", id, req)?;
        self.client.empty(call).await
    }

    /// Deletes custom models (built-in ones can only be disabled).
    pub async fn delete_models(&self, id: &str, slugs: &[String]) -> Result<(), ApiError> {
        super::require("integrationId", id)?;
        if slugs.is_empty() {
            return Err(ApiError::validation(
                "slugs",
                "must name at least one model",
            ));
        }
        let call = Call::new(Route::mgmt(Verb::Delete, INTEGRATION_MODELS, &[id]))
            .query(vec![("slugs", slugs.join(","))]);
        self.client.empty(call).await
    }
}
