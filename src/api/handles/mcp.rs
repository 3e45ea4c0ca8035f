use serde::de::DeserializeOwned;

use crate::api::client::{Call, Client};
use crate::api::error::ApiError;
use crate::api::models::{
    CreateMcpIntegrationRequest, CreateMcpServerRequest, Created, GuardrailPlane, ListPage,
    Listing, McpCapabilities, McpCapability, McpConnections, McpIntegration,
    McpIntegrationWorkspaces, McpServer, McpServerMapping, McpServerMappingTarget,
    McpServerMappingWritten, McpServerMappingsSynced, McpServersListQuery, McpUserAccess, MorePage,
    SyncMcpServerMappingsRequest, UpdateCapabilitiesRequest, UpdateMcpIntegrationRequest,
    UpdateMcpServerRequest, UpdateMcpWorkspacesRequest, UpdateUserAccessRequest,
};
use crate::api::routes::{
    MCP_INTEGRATION, MCP_INTEGRATION_CAPABILITIES, MCP_INTEGRATION_METADATA,
    MCP_INTEGRATION_WORKSPACES, MCP_INTEGRATIONS, MCP_SERVER, MCP_SERVER_CAPABILITIES,
    MCP_SERVER_CONNECTIONS, MCP_SERVER_TEST, MCP_SERVER_USER_ACCESS, MCP_SERVERS, Route, Verb,
};

use super::collection::{DeletedByKey, Listed, ReadByKey, Receipt, Remote, Written};

/// A capabilities page query: `page` from 1, `page_size` 1..=500, `type`.
fn capability_pairs(page: u32, kind: Option<&str>) -> Vec<(&'static str, String)> {
    let mut pairs = vec![
        ("page", page.max(1).to_string()),
        ("page_size", "500".into()),
    ];
    pairs.extend(super::optional_query("type", kind));
    pairs
}

/// The capabilities pages a read follows at most.
const CAPABILITY_PAGES: u32 = 1000;

/// An answer the API pages by `page` (from 1) while it has more: [`MorePage`] and what else
/// the first page says.
trait MorePaged: DeserializeOwned {
    type Row;

    fn page(&mut self) -> &mut MorePage<Self::Row>;
}

impl MorePaged for McpCapabilities {
    type Row = McpCapability;

    fn page(&mut self) -> &mut MorePage<McpCapability> {
        &mut self.page
    }
}

impl MorePaged for McpUserAccess {
    type Row = serde_json::Value;

    fn page(&mut self) -> &mut MorePage<serde_json::Value> {
        &mut self.page
    }
}

/// The first page of `template` for `key` with the rows of every page after it, read while a
/// page says there are more (and was not empty), `max_pages` at most; `query` is a page's query.
async fn every_page<R: MorePaged>(
    client: &Client,
    template: &'static str,
    key: &str,
    max_pages: u32,
    query: impl Fn(u32) -> Vec<(&'static str, String)>,
) -> Result<R, ApiError> {
    super::require(template, &[key])?;
    let read = move |page| {
        let call = Call::new(Route::mgmt(Verb::Get, template, &[key])).query(query(page));
        client.json::<R>(call)
    };
    let mut all = read(1).await?;
    let mut more = all.page().more();
    for page in 2..=max_pages {
        if !more {
            break;
        }
        let mut next = read(page).await?;
        more = next.page().more();
        all.page().data.append(&mut next.page().data);
    }
    Ok(all)
}

/// An MCP integration or server: each discovers its server's capabilities, which are then
/// turned on or off one by one.
pub trait McpCapable: Remote {
    /// The capabilities route, keyed like the item route.
    const CAPABILITIES: &'static str;
}

impl<K: McpCapable> super::Endpoint<'_, K> {
    /// Every discovered capability (all pages, `page` counting from 1), optionally of one
    /// `type`.
    pub async fn capabilities(
        &self,
        key: &str,
        kind: Option<&str>,
    ) -> Result<McpCapabilities, ApiError> {
        every_page(
            self.client,
            K::CAPABILITIES,
            key,
            CAPABILITY_PAGES,
            |page| capability_pairs(page, kind),
        )
        .await
    }

    /// Toggles discovered capabilities; one not discovered yet is refused.
    pub async fn update_capabilities(
        &self,
        key: &str,
        req: &UpdateCapabilitiesRequest,
    ) -> Result<(), ApiError> {
        let call = super::send(Verb::Put, K::CAPABILITIES, key, req)?;
        self.client.empty(call).await
    }
}

/// Rows a user-access read asks for at once (the API's most), and the pages it reads at most
/// (500,000 users).
const USER_ACCESS_PAGE_SIZE: u32 = 500;
const USER_ACCESS_PAGES: u32 = 1000;

/// The organisation's MCP integrations (`/ai_gw/admin/v2/mcp-integrations`), by UUID or slug.
/// `configurations` is write-only.
pub type McpIntegrations<'c> = super::Endpoint<'c, McpIntegration>;

impl Remote for McpIntegration {
    const COLLECTION: &'static str = MCP_INTEGRATIONS;
    const ITEM: &'static str = MCP_INTEGRATION;
    const SECRET_WRITES: bool = true;
}

impl ReadByKey for McpIntegration {}

impl Written for McpIntegration {
    type Create = CreateMcpIntegrationRequest;
    type Created = Created;
    type Update = UpdateMcpIntegrationRequest;
    type Updated = ();
}

impl DeletedByKey for McpIntegration {}

impl McpCapable for McpIntegration {
    const CAPABILITIES: &'static str = MCP_INTEGRATION_CAPABILITIES;
}

impl McpIntegrations<'_> {
    /// Every integration, all pages (`configurations` a JSON string in each row).
    pub async fn list(&self) -> Result<Vec<McpIntegration>, ApiError> {
        Ok(self.listing().await?.items)
    }

    pub async fn listing(&self) -> Result<Listing<McpIntegration>, ApiError> {
        super::paged(
            self.client,
            MCP_INTEGRATIONS,
            &[],
            vec![("page_size", "100".to_owned())],
            |i: &McpIntegration| i.id.as_str(),
            super::Reading::Proof,
        )
        .await
    }

    /// The workspace access rows (disabled ones stay listed), in the versioned shape.
    pub async fn workspaces(&self, key: &str) -> Result<McpIntegrationWorkspaces, ApiError> {
        let call = super::on(Verb::Get, MCP_INTEGRATION_WORKSPACES, key)?
            .query(vec![("version", "2".to_owned())]);
        self.client.json(call).await
    }

    /// Merges the listed rows; a row is disabled, never deleted.
    pub async fn update_workspaces(
        &self,
        key: &str,
        req: &UpdateMcpWorkspacesRequest,
    ) -> Result<(), ApiError> {
        let call = super::send(Verb::Put, MCP_INTEGRATION_WORKSPACES, key, req)?;
        self.client.empty(call).await
    }

    /// The sync metadata (`sync_status`, `sync_error`, `last_synced_at`, server identity).
    pub async fn metadata(&self, key: &str) -> Result<serde_json::Value, ApiError> {
        let call = super::on(Verb::Get, MCP_INTEGRATION_METADATA, key)?;
        self.client.json(call).await
    }
}

/// Workspaces' MCP servers (`/ai_gw/v2/mcp-servers`), by UUID or slug. The detail has no
/// `workspace_id`: list with `workspace_id` and `ids` to prove it.
pub type McpServers<'c> = super::Endpoint<'c, McpServer>;

impl Remote for McpServer {
    const COLLECTION: &'static str = MCP_SERVERS;
    const ITEM: &'static str = MCP_SERVER;
}

impl ReadByKey for McpServer {}

impl Listed for McpServer {
    type Query = McpServersListQuery;

    fn id(&self) -> &str {
        &self.id
    }
}

/// An update answers `{id, slug, object}`.
impl Written for McpServer {
    type Create = CreateMcpServerRequest;
    type Created = Created;
    type Update = UpdateMcpServerRequest;
    type Updated = Created;
}

impl DeletedByKey for McpServer {}

impl McpCapable for McpServer {
    const CAPABILITIES: &'static str = MCP_SERVER_CAPABILITIES;
}

impl Receipt for Created {}

impl McpServers<'_> {
    /// A connectivity test. SCM answers 403 even for an owned server.
    pub async fn test(&self, key: &str) -> Result<serde_json::Value, ApiError> {
        let call = super::on(Verb::Post, MCP_SERVER_TEST, key)?;
        self.client.json(call).await
    }

    /// Every user-access row of server `key`, page after page (500 a page) while the API says
    /// it has more: a user past the first page is compared like any other.
    pub async fn user_access(&self, key: &str) -> Result<McpUserAccess, ApiError> {
        let mut all: McpUserAccess = every_page(
            self.client,
            MCP_SERVER_USER_ACCESS,
            key,
            USER_ACCESS_PAGES,
            |page| {
                vec![
                    ("page", page.to_string()),
                    ("page_size", USER_ACCESS_PAGE_SIZE.to_string()),
                ]
            },
        )
        .await?;
        all.page.has_more = false;
        Ok(all)
    }

    pub async fn update_user_access(
        &self,
        key: &str,
        req: &UpdateUserAccessRequest,
    ) -> Result<(), ApiError> {
        let call = super::send(Verb::Put, MCP_SERVER_USER_ACCESS, key, req)?;
        self.client.empty(call).await
    }

    pub async fn connections(&self, key: &str) -> Result<McpConnections, ApiError> {
        let call = super::on(Verb::Get, MCP_SERVER_CONNECTIONS, key)?;
        self.client.json(call).await
    }

    /// Ends users' connections. SCM answers 403.
    pub async fn delete_connections(&self, key: &str) -> Result<(), ApiError> {
        let call = super::on(Verb::Delete, MCP_SERVER_CONNECTIONS, key)?;
        self.client.empty(call).await
    }
}

/// The MCP servers a guardrail applies to (`…/guardrails/{id}/mcp-servers`), on `plane`.
pub type GuardrailMcpServers<'c> = super::Endpoint<'c, McpServerMapping, GuardrailPlane>;

impl GuardrailMcpServers<'_> {
    fn routes(&self) -> super::guardrails::PlaneRoutes {
        super::guardrails::routes(self.plane)
    }

    /// The guardrail's mappings (SCM's `{object, total, data}` or the spec's bare array).
    pub async fn list(&self, guardrail: &str) -> Result<Vec<McpServerMapping>, ApiError> {
        let call = super::on(Verb::Get, self.routes().mcp_servers, guardrail)?;
        let page: ListPage<McpServerMapping> = self.client.json(call).await?;
        Ok(page.data)
    }

    /// Replaces the whole set: servers not named lose the guardrail.
    pub async fn sync(
        &self,
        guardrail: &str,
        req: &SyncMcpServerMappingsRequest,
    ) -> Result<McpServerMappingsSynced, ApiError> {
        let call = super::send(Verb::Put, self.routes().mcp_servers, guardrail, req)?;
        self.client.json(call).await
    }

    /// Adds or changes one server's mapping.
    pub async fn upsert(
        &self,
        guardrail: &str,
        server: &str,
        target: &McpServerMappingTarget,
    ) -> Result<McpServerMappingWritten, ApiError> {
        let call =
            super::at(Verb::Put, self.routes().mcp_server, &[guardrail, server])?.json(target)?;
        self.client.json(call).await
    }
}
