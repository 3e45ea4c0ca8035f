use super::Reading;
use crate::api::client::Call;
use crate::api::error::ApiError;
use crate::api::models::{
    CreateGuardrailRequest, GuardrailDetails, GuardrailList, GuardrailListQuery, GuardrailPlane,
    GuardrailSummary, GuardrailWritten, ListQuery, UpdateGuardrailRequest, Validate,
};
use crate::api::routes::{
    GUARDRAIL_MCP_SERVER, GUARDRAIL_MCP_SERVERS, GUARDRAILS, ORG_GUARDRAIL,
    ORG_GUARDRAIL_MCP_SERVER, ORG_GUARDRAIL_MCP_SERVERS, Route, Verb, WORKSPACE_GUARDRAIL,
    WORKSPACE_GUARDRAILS,
};

/// The guardrail routes of one plane.
pub(super) struct PlaneRoutes {
    pub collection: &'static str,
    pub item: &'static str,
    /// The MCP servers a guardrail applies to, and one of them.
    pub mcp_servers: &'static str,
    pub mcp_server: &'static str,
}

/// The guardrail routes of `plane`.
pub(super) fn routes(plane: GuardrailPlane) -> PlaneRoutes {
    match plane {
        GuardrailPlane::Workspace => PlaneRoutes {
            collection: WORKSPACE_GUARDRAILS,
            item: WORKSPACE_GUARDRAIL,
            mcp_servers: GUARDRAIL_MCP_SERVERS,
            mcp_server: GUARDRAIL_MCP_SERVER,
        },
        GuardrailPlane::Organisation => PlaneRoutes {
            collection: GUARDRAILS,
            item: ORG_GUARDRAIL,
            mcp_servers: ORG_GUARDRAIL_MCP_SERVERS,
            mcp_server: ORG_GUARDRAIL_MCP_SERVER,
        },
    }
}

/// The organisation's guardrails (`/ai_gw/admin/v2/guardrails`).
pub type Guardrails<'c> = super::Endpoint<'c, GuardrailSummary>;

impl Guardrails<'_> {
    /// One page: `page_size` 1..=1000 (server default 100), `current_page` from 0.
    pub async fn list(
        &self,
        page_size: Option<u32>,
        current_page: Option<u32>,
    ) -> Result<GuardrailList, ApiError> {
        let query = GuardrailListQuery {
            page_size,
            current_page,
        };
        query.validate()?;
        let call = Call::new(Route::mgmt(Verb::Get, GUARDRAILS, &[])).query(query.to_pairs());
        self.client.json(call).await
    }

    /// Every guardrail of the organisation, all pages at the largest page size (the listing of
    /// [`GuardrailsOn::listing`], with its stops), saying whether the pages prove the whole
    /// list. A reference check needs the whole list: a slug on a later page is as real as one
    /// on the first, and one the list does not show names no guardrail only when it is whole.
    pub async fn listing_all(&self) -> Result<crate::api::Listing<GuardrailSummary>, ApiError> {
        let organisation = GuardrailsOn::on(self.client, GuardrailPlane::Organisation);
        organisation.listing(None, Reading::Proof).await
    }
}

/// One guardrail's writes and full reads, on the workspace or the organisation plane.
pub type GuardrailsOn<'c> = super::Endpoint<'c, GuardrailDetails, GuardrailPlane>;

impl GuardrailsOn<'_> {
    /// By UUID or slug. A missing guardrail answers 403 (FACTS §6), which reads as not found.
    pub async fn get(&self, key: &str) -> Result<GuardrailDetails, ApiError> {
        let call = super::on(Verb::Get, routes(self.plane).item, key)?;
        self.client.json(call).await
    }

    /// Not retried when the answer is lost (`outcome_unknown()`).
    pub async fn create(&self, req: &CreateGuardrailRequest) -> Result<GuardrailWritten, ApiError> {
        let call = super::post(routes(self.plane).collection, req)?;
        self.client.json(call).await
    }

    /// Replaces the checks and actions; mints a new `version_id`.
    pub async fn update(
        &self,
        key: &str,
        req: &UpdateGuardrailRequest,
    ) -> Result<GuardrailWritten, ApiError> {
        let call = super::send(Verb::Put, routes(self.plane).item, key, req)?;
        self.client.json(call).await
    }

    pub async fn delete(&self, key: &str) -> Result<(), ApiError> {
        let call = super::on(Verb::Delete, routes(self.plane).item, key)?;
        self.client.empty(call).await
    }

    /// Every guardrail of the plane (of `workspace` on the workspace plane), all pages, with
    /// whether the pages prove the whole list, read as `reading` says.
    pub async fn listing(
        &self,
        workspace: Option<&str>,
        reading: Reading,
    ) -> Result<crate::api::Listing<GuardrailSummary>, ApiError> {
        let collection = routes(self.plane).collection;
        let mut pairs = vec![("page_size", PAGE_SIZE.to_string())];
        pairs.extend(super::optional_query("workspace_id", workspace));
        super::paged(
            self.client,
            collection,
            &[],
            pairs,
            |g: &GuardrailSummary| g.id.as_str(),
            reading,
        )
        .await
    }
}

/// The largest page the API serves.
const PAGE_SIZE: u32 = 1000;
