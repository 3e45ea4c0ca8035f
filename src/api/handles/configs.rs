use crate::api::client::{Call, Client};
use crate::api::error::ApiError;
use crate::api::models::{
    ConfigCreated, ConfigDetail, ConfigStamp, ConfigSummary, ConfigUpdated, ConfigVersion,
    CreateConfigRequest, ListPage, Listing, StreamedPage, UpdateConfigRequest, Validate,
};
use crate::api::routes::{CONFIG, CONFIG_VERSIONS, CONFIGS, Route, Verb};

/// `GET /configs`, of one workspace when `workspace_id` is set.
fn list_call(workspace_id: Option<&str>) -> Call {
    let query = workspace_id
        .map(|ws| vec![("workspace_id", ws.to_owned())])
        .unwrap_or_default();
    Call::new(Route::mgmt(Verb::Get, CONFIGS, &[])).query(query)
}

/// Configs (`/ai_gw/v2/configs`). Paths take the slug; the config UUID works too.
#[derive(Debug, Clone, Copy)]
pub struct Configs<'c> {
    client: &'c Client,
}

impl<'c> Configs<'c> {
    pub(crate) fn new(client: &'c Client) -> Self {
        Self { client }
    }

    /// All configs, optionally of one workspace. The API does not page this list.
    pub async fn list(&self, workspace_id: Option<&str>) -> Result<Vec<ConfigSummary>, ApiError> {
        Ok(self.listing(workspace_id).await?.items)
    }

    /// Like [`Self::list`], saying whether the answer held every row (`total`): this list may be
    /// capped, and an incomplete one proves nothing about absence.
    pub async fn listing(
        &self,
        workspace_id: Option<&str>,
    ) -> Result<Listing<ConfigSummary>, ApiError> {
        let page: ListPage<ConfigSummary> = self.client.json(list_call(workspace_id)).await?;
        Ok(Listing::from_page(page))
    }

    /// Like [`Self::listing`], keeping of each row only its identity and timestamps, decoded
    /// row by row: the drift check lists every config once per interval.
    pub async fn stamps(
        &self,
        workspace_id: Option<&str>,
    ) -> Result<Listing<ConfigStamp>, ApiError> {
        let page: StreamedPage<ConfigStamp> =
            self.client.json_streamed(list_call(workspace_id)).await?;
        Ok(page.into())
    }

    /// Not retried when the answer is lost: check `outcome_unknown()` and look the config up.
    pub async fn create(&self, req: &CreateConfigRequest) -> Result<ConfigCreated, ApiError> {
        req.validate()?;
        let call = Call::new(Route::mgmt(Verb::Post, CONFIGS, &[])).json(req)?;
        self.client.json(call).await
    }

    pub async fn get(&self, slug_or_id: &str) -> Result<ConfigDetail, ApiError> {
        super::require("slug", slug_or_id)?;
        let call = Call::new(Route::mgmt(Verb::Get, CONFIG, &[slug_or_id]));
        self.client.json(call).await
    }

    /// Replaces the fields that are set; every update mints a new `version_id`.
    pub async fn update(
        &self,
        slug: &str,
        req: &UpdateConfigRequest,
    ) -> Result<ConfigUpdated, ApiError> {
        super::require("slug", slug)?;
        req.validate()?;
        let call = Call::new(Route::mgmt(Verb::Put, CONFIG, &[slug])).json(req)?;
        self.client.json(call).await
    }

    /// Hard delete.
    pub async fn delete(&self, slug: &str) -> Result<(), ApiError> {
        super::require("slug", slug)?;
        self.client
            .empty(Call::new(Route::mgmt(Verb::Delete, CONFIG, &[slug])))
            .await
    }

    pub async fn versions(&self, slug: &str) -> Result<Vec<ConfigVersion>, ApiError> {
        super::require("slug", slug)?;
        let call = Call::new(Route::mgmt(Verb::Get, CONFIG_VERSIONS, &[slug]));
        let page: ListPage<ConfigVersion> = self.client.json(call).await?;
        Ok(page.data)
    }
}
