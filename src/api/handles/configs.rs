use crate::api::client::Call;
use crate::api::error::ApiError;
use crate::api::models::{
    ConfigCreated, ConfigDetail, ConfigStamp, ConfigSummary, ConfigUpdated, ConfigVersion,
    CreateConfigRequest, ListPage, Listing, StreamedPage, UpdateConfigRequest,
};
use crate::api::routes::{CONFIG, CONFIG_VERSIONS, CONFIGS, Route, Verb};

use super::collection::{DeletedByKey, ReadByKey, Receipt, Remote, Written};

/// The query of `GET /configs`: one workspace's configs when `workspace_id` is set.
fn list_query(workspace_id: Option<&str>) -> Vec<(&'static str, String)> {
    super::optional_query("workspace_id", workspace_id)
}

/// Configs (`/ai_gw/v2/configs`). Paths take the slug; the config UUID works too. An update
/// replaces the fields that are set, and every update mints a new `version_id`. A delete is
/// for good.
pub type Configs<'c> = super::Endpoint<'c, ConfigDetail>;

impl Remote for ConfigDetail {
    const COLLECTION: &'static str = CONFIGS;
    const ITEM: &'static str = CONFIG;
}

impl ReadByKey for ConfigDetail {}

impl Written for ConfigDetail {
    type Create = CreateConfigRequest;
    type Created = ConfigCreated;
    type Update = UpdateConfigRequest;
    type Updated = ConfigUpdated;
}

impl DeletedByKey for ConfigDetail {}

impl Receipt for ConfigUpdated {}

impl Configs<'_> {
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
        super::unpaged(self.client, CONFIGS, list_query(workspace_id)).await
    }

    /// Like [`Self::listing`], keeping of each row only its identity and timestamps, decoded
    /// row by row: the drift check lists every config once per interval.
    pub async fn stamps(
        &self,
        workspace_id: Option<&str>,
    ) -> Result<Listing<ConfigStamp>, ApiError> {
        let call = Call::new(Route::mgmt(Verb::Get, CONFIGS, &[])).query(list_query(workspace_id));
        let page: StreamedPage<ConfigStamp> = self.client.json_streamed(call).await?;
        Ok(page.into())
    }

    pub async fn versions(&self, slug: &str) -> Result<Vec<ConfigVersion>, ApiError> {
        let call = super::on(Verb::Get, CONFIG_VERSIONS, slug)?;
        let page: ListPage<ConfigVersion> = self.client.json(call).await?;
        Ok(page.data)
    }
}
