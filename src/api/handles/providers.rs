use crate::api::client::Call;
use crate::api::error::ApiError;
use crate::api::models::{
    CreateProviderRequest, Provider, ProviderWritten, ProvidersListQuery, UpdateProviderRequest,
    Validate,
};
use crate::api::routes::{PROVIDER, PROVIDERS, Route, Verb};

use super::collection::{Listed, Remote};

/// Providers (`/ai_gw/v2/providers`), addressed by UUID or slug, with the workspace as a query
/// parameter. Reads drop every field that may carry credentials ([`Provider`]).
pub type Providers<'c> = super::Endpoint<'c, Provider>;

fn workspace_query(workspace: Option<&str>) -> Vec<(&'static str, String)> {
    workspace
        .map(|ws| ("workspace_id", ws.to_string()))
        .into_iter()
        .collect()
}

impl Remote for Provider {
    const COLLECTION: &'static str = PROVIDERS;
    const ITEM: &'static str = PROVIDER;
    const KEY: &'static str = "providerId";
}

impl Listed for Provider {
    type Query = ProvidersListQuery;

    fn id(&self) -> &str {
        &self.id
    }
}

impl Providers<'_> {
    /// The detail, its credential material withheld. The answer may carry the upstream key:
    /// it is never copied into an error.
    pub async fn get(&self, id: &str, workspace: Option<&str>) -> Result<Provider, ApiError> {
        let call = super::on(Verb::Get, PROVIDER, "providerId", id)?
            .query(workspace_query(workspace))
            .sensitive();
        self.client.json(call).await
    }

    /// Not retried when the answer is lost (`outcome_unknown()`).
    pub async fn create(&self, req: &CreateProviderRequest) -> Result<ProviderWritten, ApiError> {
        let call = super::post(PROVIDERS, req)?;
        self.client.json(call).await
    }

    /// `integration_id`, `workspace_id` and `slug` cannot change.
    pub async fn update(
        &self,
        id: &str,
        workspace: Option<&str>,
        req: &UpdateProviderRequest,
    ) -> Result<ProviderWritten, ApiError> {
        super::require("providerId", id)?;
        req.validate()?;
        let call = Call::new(Route::mgmt(Verb::Put, PROVIDER, &[id]))
            .query(workspace_query(workspace))
            .json(req)?;
        self.client.json(call).await
    }

    /// Deletes it for good.
    pub async fn delete(&self, id: &str, workspace: Option<&str>) -> Result<(), ApiError> {
        let call =
            super::on(Verb::Delete, PROVIDER, "providerId", id)?.query(workspace_query(workspace));
        self.client.empty(call).await
    }
}
