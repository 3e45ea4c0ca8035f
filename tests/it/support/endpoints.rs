//! The emulator's endpoints as its stats count them (`METHOD /template`), named once for the
//! tests that count calls to them.

pub const CONFIG_DELETE: &str = "DELETE /ai_gw/v2/configs/{slug}";
pub const CONFIG_GET: &str = "GET /ai_gw/v2/configs/{slug}";
/// A drift check of configs is one list.
pub const CONFIG_LIST: &str = "GET /ai_gw/v2/configs";
pub const CONFIG_POST: &str = "POST /ai_gw/v2/configs";
pub const CONFIG_PUT: &str = "PUT /ai_gw/v2/configs/{slug}";
pub const DEPLOYMENT_POST: &str = "POST /ai_gw/admin/v2/deployments";
pub const DEPLOYMENT_PUT: &str = "PUT /ai_gw/admin/v2/deployments/{deploymentId}";
pub const GUARDRAIL_MCP_SERVERS_PUT: &str = "PUT /ai_gw/v2/guardrails/{guardrailId}/mcp-servers";
pub const GUARDRAIL_POST: &str = "POST /ai_gw/v2/guardrails";
pub const INTEGRATION_MODELS_PUT: &str = "PUT /ai_gw/admin/v2/integrations/{integrationId}/models";
pub const INTEGRATION_POST: &str = "POST /ai_gw/admin/v2/integrations";
pub const INTEGRATION_PUT: &str = "PUT /ai_gw/admin/v2/integrations/{integrationId}";
pub const INTEGRATION_WORKSPACES_PUT: &str =
    "PUT /ai_gw/admin/v2/integrations/{integrationId}/workspaces";
pub const MCP_INTEGRATION_CAPABILITIES_PUT: &str =
    "PUT /ai_gw/admin/v2/mcp-integrations/{mcpIntegrationId}/capabilities";
pub const MCP_INTEGRATION_DELETE: &str =
    "DELETE /ai_gw/admin/v2/mcp-integrations/{mcpIntegrationId}";
pub const MCP_INTEGRATION_GET: &str = "GET /ai_gw/admin/v2/mcp-integrations/{mcpIntegrationId}";
pub const MCP_INTEGRATION_POST: &str = "POST /ai_gw/admin/v2/mcp-integrations";
pub const MCP_INTEGRATION_PUT: &str = "PUT /ai_gw/admin/v2/mcp-integrations/{mcpIntegrationId}";
pub const MCP_INTEGRATION_WORKSPACES_PUT: &str =
    "PUT /ai_gw/admin/v2/mcp-integrations/{mcpIntegrationId}/workspaces";
pub const MCP_SERVER_DELETE: &str = "DELETE /ai_gw/v2/mcp-servers/{mcpServerId}";
pub const MCP_SERVER_POST: &str = "POST /ai_gw/v2/mcp-servers";
pub const MCP_SERVER_PUT: &str = "PUT /ai_gw/v2/mcp-servers/{mcpServerId}";
pub const MCP_SERVER_USER_ACCESS_PUT: &str = "PUT /ai_gw/v2/mcp-servers/{mcpServerId}/user-access";
pub const PROVIDER_PUT: &str = "PUT /ai_gw/v2/providers/{providerId}";
pub const SCOPE_DELETE: &str = "DELETE /iam/v1/scopes/{name}";
pub const SCOPE_POST: &str = "POST /iam/v1/scopes";
/// The IAM bind, the third call of a Workspace's create.
pub const SCOPE_PUT: &str = "PUT /iam/v1/scopes/{name}";
pub const SECRET_REFERENCE_DELETE: &str =
    "DELETE /ai_gw/admin/v2/secret-references/{secretReferenceId}";
pub const SECRET_REFERENCE_POST: &str = "POST /ai_gw/admin/v2/secret-references";
pub const USAGE_LIMITS_POST: &str = "POST /ai_gw/v2/policies/usage-limits";
pub const WORKSPACE_DELETE: &str = "DELETE /ai_gw/admin/v2/workspaces/{workspaceRef}";
pub const WORKSPACE_LIST: &str = "GET /ai_gw/admin/v2/workspaces";
pub const WORKSPACE_POST: &str = "POST /ai_gw/admin/v2/workspaces";
pub const WORKSPACE_PUT: &str = "PUT /ai_gw/admin/v2/workspaces/{workspaceRef}";
