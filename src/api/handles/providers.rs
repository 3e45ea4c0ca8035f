use crate::api::error::ApiError;
use crate::api::models::{
    CreateProviderRequest, Provider, ProviderWritten, ProvidersListQuery, UpdateProviderRequest,
};
use crate::api::routes::{PROVIDER, PROVIDERS, Verb};

use super::collection::{Listed, Remote};

/// Providers (`/ai_gw/v2/providers`), addressed by UUID or slug, with the workspace as a query
/// parameter. Reads drop every field that may carry credentials ([`Provider`]).
pub type Providers<'c> = super::Endpoint<'c, Provider>;

/// The query naming the provider's workspace, when given.
fn workspace_query(workspace: Option<&str>) -> Vec<(&'static str, String)> {
    super::optional_query("workspace_id", workspace)
}

impl Remote for Provider {
    const COLLECTION: &'static str = PROVIDERS;
    const ITEM: &'static str = PROVIDER;
}

/// Rows are told apart by their id, else their slug (the PANW schema has no provider `id`).
impl Listed for Provider {
    type Query = ProvidersListQuery;

    fn id(&self) -> &str {
        match self.id.is_empty() {
            true => &self.slug,
            false => &self.id,
        }
    }
}

impl Providers<'_> {
    /// The detail, its credential material withheld. The answer may carry the upstream key:
    /// it is never copied into an error.
    pub async fn get(&self, id: &str, workspace: Option<&str>) -> Result<Provider, ApiError> {
        let call = super::on(Verb::Get, PROVIDER, id)?
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
        let call = super::send(Verb::Put, PROVIDER, id, req)?.query(workspace_query(workspace));
        self.client.json(call).await
    }

    /// Deletes it for good.
    pub async fn delete(&self, id: &str, workspace: Option<&str>) -> Result<(), ApiError> {
        let call = super::on(Verb::Delete, PROVIDER, id)?.query(workspace_query(workspace));
        self.client.empty(call).await
    }
}
