//! Every path the client calls, in one place. Handles name a route; only the client turns it into a URL.

use reqwest::Method;

/// Which base URL a path hangs off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Plane {
    /// `management_url` + `/ai_gw/v2…` or `/ai_gw/admin/v2…`.
    Management,
    /// `gateway_url` (already ends in `/v1`).
    Gateway,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verb {
    Get,
    Post,
    Put,
    Delete,
}

impl Verb {
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "GET",
            Verb::Post => "POST",
            Verb::Put => "PUT",
            Verb::Delete => "DELETE",
        }
    }

    pub fn method(self) -> Method {
        match self {
            Verb::Get => Method::GET,
            Verb::Post => Method::POST,
            Verb::Put => Method::PUT,
            Verb::Delete => Method::DELETE,
        }
    }

    /// Changes nothing on the server.
    pub fn is_read(self) -> bool {
        matches!(self, Verb::Get)
    }

    /// Safe to send again when the first answer was lost: a PUT is idempotent in HTTP terms,
    /// but here each config PUT mints a version and a `rotate_auth` PUT rotates.
    pub fn is_repeatable(self) -> bool {
        matches!(self, Verb::Get | Verb::Delete)
    }
}

/// A resolved route: the template (for logs and metrics) and the real, encoded path.
#[derive(Debug, Clone)]
pub(crate) struct Route {
    pub verb: Verb,
    pub plane: Plane,
    pub template: &'static str,
    pub path: String,
}

pub(crate) const CONFIGS: &str = "/ai_gw/v2/configs";
pub(crate) const CONFIG: &str = "/ai_gw/v2/configs/{slug}";
pub(crate) const CONFIG_VERSIONS: &str = "/ai_gw/v2/configs/{slug}/versions";
pub(crate) const DEPLOYMENTS: &str = "/ai_gw/admin/v2/deployments";
pub(crate) const DEPLOYMENT: &str = "/ai_gw/admin/v2/deployments/{deploymentId}";
pub(crate) const RATE_LIMITS: &str = "/ai_gw/v2/policies/rate-limits";
pub(crate) const RATE_LIMIT: &str = "/ai_gw/v2/policies/rate-limits/{rateLimitsPolicyId}";
pub(crate) const USAGE_LIMITS: &str = "/ai_gw/v2/policies/usage-limits";
pub(crate) const USAGE_LIMIT: &str = "/ai_gw/v2/policies/usage-limits/{policyUsageLimitsId}";
pub(crate) const USAGE_LIMIT_ENTITIES: &str =
    "/ai_gw/v2/policies/usage-limits/{policyUsageLimitsId}/entities";
pub(crate) const USAGE_LIMIT_ENTITY_RESET: &str =
    "/ai_gw/v2/policies/usage-limits/{policyUsageLimitsId}/entities/{entityId}/reset";
pub(crate) const SERVICE_API_KEYS: &str = "/ai_gw/v2/api-keys/service";
pub(crate) const SERVICE_API_KEY: &str = "/ai_gw/v2/api-keys/service/{keyId}";
pub(crate) const SERVICE_API_KEY_ROTATE: &str = "/ai_gw/v2/api-keys/service/{keyId}/rotate";
pub(crate) const USER_API_KEYS: &str = "/ai_gw/v2/api-keys/user";
pub(crate) const USER_API_KEY: &str = "/ai_gw/v2/api-keys/user/{keyId}";
pub(crate) const USER_API_KEY_ROTATE: &str = "/ai_gw/v2/api-keys/user/{keyId}/rotate";
pub(crate) const GUARDRAILS: &str = "/ai_gw/admin/v2/guardrails";
pub(crate) const ORG_GUARDRAIL: &str = "/ai_gw/admin/v2/guardrails/{guardrailId}";
pub(crate) const WORKSPACE_GUARDRAILS: &str = "/ai_gw/v2/guardrails";
pub(crate) const WORKSPACE_GUARDRAIL: &str = "/ai_gw/v2/guardrails/{guardrailId}";
pub(crate) const INTEGRATIONS: &str = "/ai_gw/admin/v2/integrations";
pub(crate) const INTEGRATION: &str = "/ai_gw/admin/v2/integrations/{integrationId}";
pub(crate) const INTEGRATION_WORKSPACES: &str =
    "/ai_gw/admin/v2/integrations/{integrationId}/workspaces";
pub(crate) const INTEGRATION_MODELS: &str = "/ai_gw/admin/v2/integrations/{integrationId}/models";
pub(crate) const PROVIDERS: &str = "/ai_gw/v2/providers";
pub(crate) const PROVIDER: &str = "/ai_gw/v2/providers/{providerId}";
pub(crate) const DATA_WORKSPACES: &str = "/ai_gw/v2/workspaces";
pub(crate) const DATA_WORKSPACE: &str = "/ai_gw/v2/workspaces/{workspaceRef}";
pub(crate) const ADMIN_WORKSPACES: &str = "/ai_gw/admin/v2/workspaces";
pub(crate) const ADMIN_WORKSPACE: &str = "/ai_gw/admin/v2/workspaces/{workspaceRef}";
/// SCM IAM, on the management host beside `/ai_gw`.
pub(crate) const IAM_SCOPES: &str = "/iam/v1/scopes";
pub(crate) const IAM_SCOPE: &str = "/iam/v1/scopes/{name}";
pub(crate) const LOG_GROUP: &str = "/ai_gw/v2/logs/groups/{dimension}";
pub(crate) const LOG_CHART: &str = "/ai_gw/v2/logs/charts/{metric}";
pub(crate) const SECRET_REFERENCES: &str = "/ai_gw/admin/v2/secret-references";
pub(crate) const SECRET_REFERENCE: &str = "/ai_gw/admin/v2/secret-references/{secretReferenceId}";
pub(crate) const MCP_INTEGRATIONS: &str = "/ai_gw/admin/v2/mcp-integrations";
pub(crate) const MCP_INTEGRATION: &str = "/ai_gw/admin/v2/mcp-integrations/{mcpIntegrationId}";
pub(crate) const MCP_INTEGRATION_WORKSPACES: &str =
    "/ai_gw/admin/v2/mcp-integrations/{mcpIntegrationId}/workspaces";
pub(crate) const MCP_INTEGRATION_CAPABILITIES: &str =
    "/ai_gw/admin/v2/mcp-integrations/{mcpIntegrationId}/capabilities";
pub(crate) const MCP_INTEGRATION_METADATA: &str =
    "/ai_gw/admin/v2/mcp-integrations/{mcpIntegrationId}/metadata";
pub(crate) const MCP_SERVERS: &str = "/ai_gw/v2/mcp-servers";
pub(crate) const MCP_SERVER: &str = "/ai_gw/v2/mcp-servers/{mcpServerId}";
pub(crate) const MCP_SERVER_TEST: &str = "/ai_gw/v2/mcp-servers/{mcpServerId}/test";
pub(crate) const MCP_SERVER_CAPABILITIES: &str = "/ai_gw/v2/mcp-servers/{mcpServerId}/capabilities";
pub(crate) const MCP_SERVER_USER_ACCESS: &str = "/ai_gw/v2/mcp-servers/{mcpServerId}/user-access";
pub(crate) const MCP_SERVER_CONNECTIONS: &str = "/ai_gw/v2/mcp-servers/{mcpServerId}/connections";
pub(crate) const GUARDRAIL_MCP_SERVERS: &str = "/ai_gw/v2/guardrails/{guardrailId}/mcp-servers";
pub(crate) const GUARDRAIL_MCP_SERVER: &str =
    "/ai_gw/v2/guardrails/{guardrailId}/mcp-servers/{mcpServerId}";
pub(crate) const ORG_GUARDRAIL_MCP_SERVERS: &str =
    "/ai_gw/admin/v2/guardrails/{guardrailId}/mcp-servers";
pub(crate) const ORG_GUARDRAIL_MCP_SERVER: &str =
    "/ai_gw/admin/v2/guardrails/{guardrailId}/mcp-servers/{mcpServerId}";
pub(crate) const RESPONSE: &str = "/responses/{response_id}";
pub(crate) const VECTOR_STORE_FILE: &str = "/vector_stores/{vector_store_id}/files/{file_id}";

/// The names of the `{…}` placeholders of `template`, in order.
pub(crate) fn placeholders(template: &str) -> impl Iterator<Item = &str> {
    template
        .split('{')
        .skip(1)
        .filter_map(|rest| rest.split_once('}').map(|(name, _)| name))
}

impl Route {
    /// Fills the `{…}` placeholders of `template` with `params`, in order, percent-encoded.
    pub fn new(verb: Verb, plane: Plane, template: &'static str, params: &[&str]) -> Self {
        let mut path = String::with_capacity(template.len());
        let mut params = params.iter();
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            path.push_str(&rest[..open]);
            let close = rest[open..].find('}').map_or(rest.len(), |c| open + c + 1);
            path.push_str(&encode_segment(params.next().copied().unwrap_or_default()));
            rest = &rest[close..];
        }
        path.push_str(rest);
        Self {
            verb,
            plane,
            template,
            path,
        }
    }

    pub fn mgmt(verb: Verb, template: &'static str, params: &[&str]) -> Self {
        Self::new(verb, Plane::Management, template, params)
    }

    pub fn gateway(verb: Verb, template: &'static str, params: &[&str]) -> Self {
        Self::new(verb, Plane::Gateway, template, params)
    }
}

/// Percent-encodes everything but RFC 3986 unreserved characters, so an id can never add a path
/// segment or a query.
fn encode_segment(raw: &str) -> String {
    // `.` and `..` alone would be resolved away by URL parsing.
    let dot_only = raw.bytes().all(|b| b == b'.');
    let mut out = String::with_capacity(raw.len());
    for b in raw.bytes() {
        let unreserved = b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'~');
        if unreserved || (b == b'.' && !dot_only) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_and_encodes_placeholders() {
        let r = Route::mgmt(Verb::Put, CONFIG, &["pc-abc/../x?y"]);
        assert_eq!(r.path, "/ai_gw/v2/configs/pc-abc%2F..%2Fx%3Fy");
        assert_eq!(r.template, CONFIG);
        let r = Route::gateway(Verb::Get, VECTOR_STORE_FILE, &["vs_1", "file 2"]);
        assert_eq!(r.path, "/vector_stores/vs_1/files/file%202");
        let r = Route::mgmt(Verb::Get, CONFIG_VERSIONS, &["pc-1"]);
        assert_eq!(r.path, "/ai_gw/v2/configs/pc-1/versions");
        let r = Route::mgmt(Verb::Get, CONFIG, &[".."]);
        assert_eq!(r.path, "/ai_gw/v2/configs/%2E%2E");
    }

    #[test]
    fn names_placeholders_in_order() {
        let names: Vec<&str> = placeholders(GUARDRAIL_MCP_SERVER).collect();
        assert_eq!(names, ["guardrailId", "mcpServerId"]);
        assert_eq!(placeholders(CONFIGS).count(), 0);
    }
}
