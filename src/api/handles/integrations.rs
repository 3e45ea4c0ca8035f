use crate::api::error::ApiError;
use crate::api::models::{
    CreateIntegrationRequest, Integration, IntegrationCreated, IntegrationModels,
    IntegrationWorkspaces, IntegrationsListQuery, UpdateIntegrationRequest, UpdateModelsRequest,
    UpdateWorkspacesRequest,
};
use crate::api::routes::{
    INTEGRATION, INTEGRATION_MODELS, INTEGRATION_WORKSPACES, INTEGRATIONS, Verb,
};

use super::collection::{Listed, ReadByKey, Remote, Written};

/// The organisation's integrations (`/ai_gw/admin/v2/integrations`), addressed by UUID or slug.
/// `key` and credential `configurations` are write-only: reads return them masked. An update
/// cannot change `ai_provider_id`, `slug` or `workspace_id`.
pub type Integrations<'c> = super::Endpoint<'c, Integration>;

impl Remote for Integration {
    const COLLECTION: &'static str = INTEGRATIONS;
    const ITEM: &'static str = INTEGRATION;
    const SECRET_WRITES: bool = true;
}

impl ReadByKey for Integration {}

impl Listed for Integration {
    type Query = IntegrationsListQuery;

    fn id(&self) -> &str {
        &self.id
    }
}

impl Written for Integration {
    type Create = CreateIntegrationRequest;
    type Created = IntegrationCreated;
    type Update = UpdateIntegrationRequest;
    type Updated = ();
}

impl Integrations<'_> {
    /// `organisation_id`: the numeric TSG the live API takes as a query parameter, when known.
    pub async fn delete(&self, id: &str, organisation_id: Option<&str>) -> Result<(), ApiError> {
        let call = super::on(Verb::Delete, INTEGRATION, id)?
            .query(super::optional_query("organisation_id", organisation_id));
        self.client.empty(call).await
    }

    /// The workspace access rows (a disabled row stays listed).
    pub async fn workspaces(&self, id: &str) -> Result<IntegrationWorkspaces, ApiError> {
        let call = super::on(Verb::Get, INTEGRATION_WORKSPACES, id)?;
        self.client.json(call).await
    }

    /// Merges the listed rows; there is no delete (a row is disabled with `enabled: false`).
    pub async fn update_workspaces(
        &self,
        id: &str,
        req: &UpdateWorkspacesRequest,
    ) -> Result<(), ApiError> {
        let call = super::send(Verb::Put, INTEGRATION_WORKSPACES, id, req)?;
        self.client.empty(call).await
    }

    pub async fn models(&self, id: &str) -> Result<IntegrationModels, ApiError> {
        let call = super::on(Verb::Get, INTEGRATION_MODELS, id)?;
        self.client.json(call).await
    }

    /// Merges per slug; a new slug must be a custom model.
    pub async fn update_models(&self, id: &str, req: &UpdateModelsRequest) -> Result<(), ApiError> {
        let call = super::send(Verb::Put, INTEGRATION_MODELS, id, req)?;
        self.client.empty(call).await
    }

    /// Deletes custom models (built-in ones can only be disabled).
    pub async fn delete_models(&self, id: &str, slugs: &[String]) -> Result<(), ApiError> {
        let call = super::on(Verb::Delete, INTEGRATION_MODELS, id)?;
        if slugs.is_empty() {
            return Err(ApiError::validation(
                "slugs",
                "must name at least one model",
            ));
        }
        let call = call.query(vec![("slugs", slugs.join(","))]);
        self.client.empty(call).await
    }
}
