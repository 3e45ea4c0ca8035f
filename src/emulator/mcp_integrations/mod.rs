//! MCP integrations in memory (organisation level, admin plane; FACTS-rest §4, §5): the
//! upstream MCP servers the organisation registers, with their workspace access, their tool
//! capabilities and their sync metadata.
//!
//! - `configurations` is write-only: the detail shows it as an object with its secret fields
//!   masked (`client_secret` → `masked_client_secret`, `oauth_metadata` → `masked_oauth_metadata`,
//!   `custom_headers` values masked in place); **list rows carry it as a JSON-encoded string** of
//!   that masked object. `GET /_emulator/state` shows it in clear with `configuration_writes`.
//! - `secret_mappings` read `null` until set; a mapping's `target_field` must be
//!   `configurations.<field>` and unique; `secret_reference_id` is a UUID or slug.
//! - Workspace access (`…/workspaces`): a PUT merges the listed rows (`override_existing_
//!   workspace_access: true` disables every other one) and answers `{}`; a row naming a known
//!   workspace by slug is kept, and read back, under its UUID (an admin key's rows, FACTS-rest
//!   §5); a row is never deleted:
//!   disabled, it stays listed with `enabled: false, status: "archived"`. `GET` answers the legacy
//!   `{workspaces, global_workspace_access, object}`, or with `?version=` the
//!   `{object: "list", global_workspace_access, total, data}` shape.
//! - Capabilities exist only after discovery: a new integration has none and its metadata says
//!   `sync_status: "pending"`. `POST /_emulator/mcp-integrations/{id}/discover` plays the gateway
//!   connecting upstream (`initialize` + `tools/list`): it sets the tools, prompts and resources
//!   the body lists (a name seen before keeps its `enabled`), and the metadata (`synced`, or
//!   `failed` with `sync_error` when the body carries `error`). `GET …/capabilities` pages from
//!   1 (`page`, `page_size` 1–500, `type`); a `PUT` toggles listed capabilities and answers
//!   `{success: true}`; naming one not discovered is `400 AB01` (FACTS leaves the live answer
//!   open).
//! - Create takes `organisation_id` as the numeric TSG or a UUID (reads show the internal UUID)
//!   and answers `{id, slug, object}`; `slug` and `workspace_id` are fixed; DELETE is a hard
//!   delete (FACTS: "Permanently delete").

mod capabilities;
mod crud;
mod store;

use axum::{Router, extract::FromRef, routing::get};

use super::common::routes as common_routes;
use super::workspaces::WorkspacesState;

pub use capabilities::{capabilities_page, capability_updates, discover, undiscovered};
pub use store::{McpIntegrationStore, McpIntegrationsState};

/// The routes under `/ai_gw/admin/v2/mcp-integrations`.
pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    McpIntegrationsState: FromRef<S>,
    WorkspacesState: FromRef<S>,
{
    let base = "/ai_gw/admin/v2/mcp-integrations";
    common_routes::crud(
        base,
        "mcpIntegrationId",
        (crud::list, crud::create),
        (crud::read, crud::update, crud::delete),
    )
    .route(
        &format!("{base}/{{mcpIntegrationId}}/workspaces"),
        get(crud::workspaces).put(crud::update_workspaces),
    )
    .route(
        &format!("{base}/{{mcpIntegrationId}}/capabilities"),
        get(capabilities::capabilities).put(capabilities::update_capabilities),
    )
    .route(
        &format!("{base}/{{mcpIntegrationId}}/metadata"),
        get(capabilities::metadata),
    )
}
