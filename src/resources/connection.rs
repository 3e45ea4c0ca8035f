//! The cluster-scoped `Connection` kind: how to reach and authenticate to the management API.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::common::conditions_schema;

/// The rule of a URL aigw sends requests to (it appends the API's paths), over the CEL value
/// `url` (`self.managementUrl`): http or https (any case), a host of letters, digits, `.`, `-`,
/// `_`, `~` and non-ASCII letters (an international name), not only digits and dots; an IPv4
/// address; or an IPv6 address in brackets; a port that exists, no query or fragment, no
/// space or backslash; and a URL as Kubernetes' URL library reads it. A host spelled otherwise
/// (percent-encoded, a zone id, symbols) is one the operator's HTTP client may not parse, so it
/// is refused rather than stored to stall. `aigw validate` reads it the same way
/// (`gitops::cel`).
pub fn http_url(url: &str) -> String {
    format!(
        r#"{url}.matches(r'^(?i:https?)://(((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){{3}}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])|([A-Za-z0-9._~-]|[^\x00-\x7F])*([A-Za-z_~-]|[^\x00-\x7F])([A-Za-z0-9._~-]|[^\x00-\x7F])*|\[[0-9A-Fa-f:.]+\])(:[0-9]+)?(/[^\t\n\f\r ?#\\]*)?$') && isURL({url}) && url({url}).getHostname() != '' && (url({url}).getPort() == '' || int(url({url}).getPort()) <= 65535)"#
    )
}

/// Header names the client sets itself (the Connection's auth, HTTP framing): a header of one
/// of them would be overridden, or break every request.
pub const RESERVED_HEADER: &str = r#"!self.name.matches('^(?i:host|authorization|content-length|content-type|transfer-encoding|connection|upgrade|te|trailer|keep-alive|proxy-connection|expect)$')"#;

/// How aigw reaches and authenticates to the management API. Namespaced resources name it in
/// `spec.connectionRef.name` (default `default`).
// kube's printcolumn(...) lists repeat `type_ = "string"`, which this lint misreads.
#[allow(clippy::duplicated_attributes)]
#[skip_serializing_none]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "aigw.io",
    doc = "How aigw reaches and authenticates to the management API (cluster-scoped).",
    version = "v1alpha1",
    kind = "Connection",
    plural = "connections",
    shortname = "aigwconn",
    category = "aigw",
    status = "ConnectionStatus",
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason"
    ),
    printcolumn(name = "URL", type_ = "string", json_path = ".spec.managementUrl")
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = super::rules::http_url_at("managementUrl", "spec.managementUrl"))]
#[x_kube(validation = super::rules::http_url_at("gatewayUrl", "spec.gatewayUrl"))]
#[x_kube(validation = super::rules::no_credentials_in_url("managementUrl", "spec.managementUrl", "aigw authenticates with spec.auth"))]
#[x_kube(validation = super::rules::no_credentials_in_url("gatewayUrl", "spec.gatewayUrl", "aigw authenticates with spec.auth"))]
pub struct ConnectionSpec {
    /// Root of the management API, e.g. `https://api.apps.paloaltonetworks.com`; the paths
    /// `/ai_gw/v2…` and `/ai_gw/admin/v2…` are appended.
    #[schemars(length(min = 1))]
    pub management_url: String,
    /// The gateway address including `/v1`, e.g. `https://gateway.example/v1`.
    pub gateway_url: Option<String>,
    /// How to obtain the bearer token.
    pub auth: ConnectionAuth,
    /// Extra headers sent on every request, e.g. `x-tsg-id`; at most 64.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub headers: Vec<Header>,
    /// Requests per second allowed to the API through this connection (at least 0.1).
    #[schemars(range(min = 0.1))]
    // The apiserver checks an integer against `minimum` truncated (0.1 as 0), so `qps: 0`,
    // which the client would take for no limit at all, passed the schema alone.
    #[x_kube(validation = Rule::new("self >= 0.1").message("spec.qps must be at least 0.1 requests per second"))]
    pub qps: Option<f64>,
    /// Burst above `qps`.
    #[schemars(range(min = 1))]
    pub burst: Option<u32>,
    /// Namespaces whose resources may use this connection. Absent (and no namespaceSelector)
    /// means all namespaces.
    pub allowed_namespaces: Option<Vec<String>>,
    /// Label selector of the namespaces whose resources may use this connection.
    #[x_kube(validation = super::rules::label_selector("spec.namespaceSelector"))]
    pub namespace_selector: Option<LabelSelector>,
    /// Tenancy rules: which namespaces may use this connection, for which workspaces, and
    /// whether they may adopt remote objects aigw did not create. When set, a namespace must
    /// match at least one grant (in addition to allowedNamespaces/namespaceSelector); its
    /// workspaces are the union of its grants', and it may adopt if any of its grants says so.
    /// Absent: every allowed namespace may manage any workspace and adopt (single-team installs).
    /// At most 100 grants (each selector's check is paid for every grant the schema allows).
    #[schemars(length(max = 100))]
    pub grants: Option<Vec<Grant>>,
}

/// What a Connection reaches: a management API host and, where it can be told, a tenant (the
/// TSG id). Ownership is decided per tenant, not per Connection name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant {
    /// `host:port` of the management URL, the port made explicit (443 for https, 80 for http).
    pub host: String,
    /// The tenant id: the `x-tsg-id` header's value, else the `tsg_id:` of the OAuth2 scope.
    /// `None` when it cannot be told (no such header or scope, or a header from a Secret).
    pub id: Option<String>,
}

impl Tenant {
    /// True unless the two provably differ: another host, or two known, different ids. A
    /// tenant that cannot be told may be any tenant of its host, so it is treated as the same.
    pub fn may_be(&self, other: &Tenant) -> bool {
        self.host == other.host
            && match (&self.id, &other.id) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            }
    }

    /// The host part of a management URL, with its port made explicit.
    pub fn host_of(url: &str) -> String {
        match reqwest::Url::parse(url.trim()) {
            Ok(parsed) => format!(
                "{}:{}",
                parsed.host_str().unwrap_or_default().to_ascii_lowercase(),
                parsed.port_or_known_default().unwrap_or_default()
            ),
            Err(_) => url.trim().trim_end_matches('/').to_ascii_lowercase(),
        }
    }
}

impl ConnectionSpec {
    /// The first field, as a spec path, where `other` would send requests elsewhere or send
    /// other values: the URLs, the token endpoint and scope, the Secrets read, the headers.
    /// `None` when a client built from either reaches the same place with the same material.
    /// Used by the CLI to refuse a `--connection` file that differs from the cluster's
    /// Connection: a file (which a pull request can edit) never decides where Secrets go.
    pub fn reach_differs(&self, other: &ConnectionSpec) -> Option<String> {
        let url = |u: &str| u.trim().trim_end_matches('/').to_string();
        if url(&self.management_url) != url(&other.management_url) {
            return Some("spec.managementUrl".into());
        }
        if self.gateway_url.as_deref().map(url) != other.gateway_url.as_deref().map(url) {
            return Some("spec.gatewayUrl".into());
        }
        let (a, b) = (&self.auth, &other.auth);
        if a.bearer_token.is_some() != b.bearer_token.is_some() {
            return Some("spec.auth.bearerToken".into());
        }
        if let (Some(a), Some(b)) = (&a.bearer_token, &b.bearer_token)
            && a.secret_ref != b.secret_ref
        {
            return Some("spec.auth.bearerToken.secretRef".into());
        }
        if a.oauth2_client_credentials.is_some() != b.oauth2_client_credentials.is_some() {
            return Some("spec.auth.oauth2ClientCredentials".into());
        }
        if let (Some(a), Some(b)) = (&a.oauth2_client_credentials, &b.oauth2_client_credentials) {
            let field = if url(&a.token_url) != url(&b.token_url) {
                Some("tokenUrl")
            } else if a.scope != b.scope {
                Some("scope")
            } else if a.client_id_ref != b.client_id_ref {
                Some("clientIdRef")
            } else if a.client_secret_ref != b.client_secret_ref {
                Some("clientSecretRef")
            } else {
                None
            };
            if let Some(field) = field {
                return Some(format!("spec.auth.oauth2ClientCredentials.{field}"));
            }
        }
        if self.headers.len() != other.headers.len() {
            return Some("spec.headers".into());
        }
        self.headers
            .iter()
            .zip(&other.headers)
            .position(|(a, b)| a != b)
            .map(|i| format!("spec.headers[{i}]"))
    }

    /// What this Connection reaches ([`Tenant`]).
    pub fn tenant(&self) -> Tenant {
        let header = self
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("x-tsg-id"))
            .and_then(|h| h.value.as_deref())
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty());
        let scope = self
            .auth
            .oauth2_client_credentials
            .as_ref()
            .and_then(|o| o.scope.as_deref())
            .and_then(|scope| {
                scope
                    .split_whitespace()
                    .find_map(|part| part.strip_prefix("tsg_id:"))
                    .map(str::to_string)
            });
        Tenant {
            host: Tenant::host_of(&self.management_url),
            id: header.or(scope),
        }
    }
}

/// What some namespaces may do through a connection.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.namespaces) || has(self.namespaceSelector)").message("a grant needs namespaces or namespaceSelector"))]
pub struct Grant {
    /// The namespaces this grant is for.
    pub namespaces: Option<Vec<String>>,
    /// Or: a label selector of the namespaces this grant is for.
    #[x_kube(validation = super::rules::label_selector("spec.grants[].namespaceSelector"))]
    pub namespace_selector: Option<LabelSelector>,
    /// Workspace ids (UUIDs) whose objects these namespaces may manage: the `workspaceId` of
    /// Configs and RateLimitsPolicies (which must then be set), the workspace of an adopted
    /// object, and a Deployment's `authSettings.workspacesAllowed`. An entry that is the name of
    /// a Workspace resource stands for the workspace that resource recorded (its UUID and
    /// slug), and for no other. Absent: any workspace.
    pub workspaces: Option<Vec<String>>,
    /// May these namespaces adopt existing remote objects (`spec.slug`, `spec.deploymentId`,
    /// `spec.policyId`, or a namesake found after a lost create answer that nothing proves
    /// aigw's own)? Adopting a deployment includes rotating its credentials and archiving
    /// it. Default false: without it a namespace can only reach objects aigw creates for it.
    #[serde(default)]
    pub allow_adoption: bool,
    /// May these namespaces make a Deployment the organisation's default gateway
    /// (`spec.isDefault: true`)? That changes where every team's traffic goes, so it needs this
    /// explicit grant. Default false.
    #[serde(default)]
    pub allow_default: bool,
    /// Integrations these namespaces may bind into their workspaces with a Provider: names of
    /// Integration resources (`spec.integration`), or slugs or UUIDs of remote integrations
    /// (`spec.integrationId`; an Integration resource is also matched by its recorded slug and
    /// UUID). Absent: any integration. The workspace a Provider binds it into must be among
    /// `workspaces`, and the integration must grant that workspace access itself.
    pub integrations: Option<Vec<String>>,
    /// MCP integrations these namespaces may instantiate as McpServers: names of McpIntegration
    /// resources (`spec.integrationRef`), or slugs or UUIDs of remote MCP integrations
    /// (`spec.integrationId`; an McpIntegration resource is also matched by its recorded slug
    /// and UUID). Absent: any MCP integration that enables the server's workspace.
    pub mcp_integrations: Option<Vec<String>>,
    /// Namespaces whose resources these namespaces may follow in `spec.promotion.after` (e.g.
    /// prod may follow dev): aigw reads only those resources' status, whether they are Ready
    /// and at which revision. Absent: only resources of their own namespace.
    pub promote_from: Option<Vec<String>>,
}

/// Exactly one way to authenticate.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.bearerToken) != has(self.oauth2ClientCredentials)").message("auth needs exactly one of bearerToken or oauth2ClientCredentials"))]
pub struct ConnectionAuth {
    /// A static bearer token read from a Secret.
    pub bearer_token: Option<BearerTokenAuth>,
    /// OAuth2 client credentials; tokens are cached and refreshed before they expire.
    pub oauth2_client_credentials: Option<OAuth2ClientCredentials>,
}

/// A bearer token kept in a Secret.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BearerTokenAuth {
    /// Where the token is.
    pub secret_ref: SecretKeyRef,
}

/// OAuth2 client-credentials grant.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = super::rules::http_url_at("tokenUrl", "spec.auth.oauth2ClientCredentials.tokenUrl"))]
#[x_kube(validation = super::rules::no_credentials_in_url("tokenUrl", "spec.auth.oauth2ClientCredentials.tokenUrl", "the client credentials come from clientIdRef and clientSecretRef"))]
pub struct OAuth2ClientCredentials {
    /// Token endpoint, e.g. `https://auth.apps.paloaltonetworks.com/oauth2/access_token`.
    #[schemars(length(min = 1))]
    pub token_url: String,
    /// Scope to request, e.g. `tsg_id:1234567890`.
    pub scope: Option<String>,
    /// Where the client id is.
    pub client_id_ref: SecretKeyRef,
    /// Where the client secret is.
    pub client_secret_ref: SecretKeyRef,
}

impl ConnectionSpec {
    /// Every Secret key the Connection reads: its token or client credentials, and the headers
    /// taken from Secrets.
    pub fn secret_refs(&self) -> impl Iterator<Item = &SecretKeyRef> {
        let bearer = self.auth.bearer_token.iter().map(|b| &b.secret_ref);
        let oauth = self
            .auth
            .oauth2_client_credentials
            .iter()
            .flat_map(|o| [&o.client_id_ref, &o.client_secret_ref]);
        let headers = self
            .headers
            .iter()
            .filter_map(|h| h.value_from.as_ref().map(|f| &f.secret_ref));
        bearer.chain(oauth).chain(headers)
    }
}

/// A key of a Secret in a given namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    /// Namespace of the Secret.
    #[schemars(length(min = 1))]
    pub namespace: String,
    /// Name of the Secret.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Key within the Secret.
    #[schemars(length(min = 1))]
    pub key: String,
}

/// An extra request header.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.value) != has(self.valueFrom)").message("a header needs exactly one of value or valueFrom"))]
// On the header, not on `name` or `value`: a refusal of a string (a schema pattern or a rule
// on it) quotes it, and a value may be a key (or a name a pasted `X-Api-Key: sk-…` line).
#[x_kube(validation = Rule::new(r"!has(self.value) || self.value.matches(r'^[\t\x20-\x7e\x{80}-\x{10FFFF}]*$')").field_path(".value").reason(Reason::FieldValueInvalid).message("spec.headers[].value must hold no line break or control character but tab"))]
#[x_kube(validation = Rule::new(r"self.name.matches(r'^[-!#$%&\x27*+.^_`|~0-9A-Za-z]+$')").field_path(".name").reason(Reason::FieldValueInvalid).message("spec.headers[].name must be an HTTP header name: letters, digits and !#$%&'*+-.^_`|~ (no colon, no value)"))]
#[x_kube(validation = Rule::new(RESERVED_HEADER).field_path(".name").reason(Reason::FieldValueInvalid).message("spec.headers[].name must not be one the client sets itself (Host, Authorization, Content-Length, Content-Type, Transfer-Encoding, Connection, …): the Connection's auth sets Authorization"))]
pub struct Header {
    /// Header name, e.g. `x-tsg-id`: an HTTP token (letters, digits and ``!#$%&'*+-.^_`|~``).
    #[schemars(length(min = 1, max = 256))]
    pub name: String,
    /// Literal value: visible characters, spaces and tabs (no line breaks).
    pub value: Option<String>,
    /// Value taken from a Secret.
    pub value_from: Option<HeaderValueFrom>,
}

/// Where a header value comes from.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HeaderValueFrom {
    /// The Secret key holding the value.
    pub secret_ref: SecretKeyRef,
}

/// Whether a token can be obtained with this connection.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionStatus {
    /// The `metadata.generation` this status describes.
    pub observed_generation: Option<i64>,
    /// `Ready` when a token can be obtained, with the reason when it cannot.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenants_differ_only_when_provably_different() {
        let host = Tenant::host_of("https://API.example");
        assert_eq!(host, Tenant::host_of("https://api.example:443/"));
        let known = |id: &str| Tenant {
            host: host.clone(),
            id: Some(id.into()),
        };
        let unknown = Tenant {
            host: host.clone(),
            id: None,
        };
        assert!(known("1234").may_be(&known("1234")));
        assert!(!known("1234").may_be(&known("5678")));
        assert!(
            unknown.may_be(&known("5678")),
            "an unknown tenant may be any"
        );
        let elsewhere = Tenant {
            host: Tenant::host_of("https://other.example"),
            id: None,
        };
        assert!(!unknown.may_be(&elsewhere));
    }

    #[test]
    fn the_tenant_comes_from_the_header_or_the_oauth_scope() {
        let spec: ConnectionSpec = serde_json::from_value(serde_json::json!({
            "managementUrl": "https://api.example",
            "auth": {"oauth2ClientCredentials": {
                "tokenUrl": "https://auth.example/token", "scope": "tsg_id:1234",
                "clientIdRef": {"namespace": "a", "name": "o", "key": "id"},
                "clientSecretRef": {"namespace": "a", "name": "o", "key": "secret"}}}
        }))
        .unwrap();
        assert_eq!(spec.tenant().id.as_deref(), Some("1234"));
        let mut by_header = spec.clone();
        by_header.headers = vec![Header {
            name: "X-TSG-ID".into(),
            value: Some("1234".into()),
            value_from: None,
        }];
        assert_eq!(by_header.tenant(), spec.tenant());
    }

    #[test]
    fn a_connection_that_sends_elsewhere_or_reads_another_secret_differs_by_field() {
        let spec: ConnectionSpec = serde_json::from_value(serde_json::json!({
            "managementUrl": "https://api.example",
            "auth": {"oauth2ClientCredentials": {
                "tokenUrl": "https://auth.example/token", "scope": "tsg_id:1234",
                "clientIdRef": {"namespace": "aigw-system", "name": "o", "key": "id"},
                "clientSecretRef": {"namespace": "aigw-system", "name": "o", "key": "secret"}}},
            "headers": [{"name": "x-tsg-id", "value": "1234"}]
        }))
        .unwrap();
        let mut same = spec.clone();
        same.management_url = "https://api.example/".into();
        same.qps = Some(3.0);
        assert_eq!(
            spec.reach_differs(&same),
            None,
            "a trailing slash or qps is no difference"
        );
        let changed = |edit: &dyn Fn(&mut ConnectionSpec)| {
            let mut other = spec.clone();
            edit(&mut other);
            spec.reach_differs(&other)
        };
        type Edit<'a> = &'a dyn Fn(&mut ConnectionSpec);
        let cases: [(Edit, &str); 7] = [
            (
                &|s| s.management_url = "http://127.0.0.1:9999".into(),
                "spec.managementUrl",
            ),
            (
                &|s| s.gateway_url = Some("http://127.0.0.1:9999/v1".into()),
                "spec.gatewayUrl",
            ),
            (
                &|s| oauth(s).token_url = "http://127.0.0.1:9999/token".into(),
                "spec.auth.oauth2ClientCredentials.tokenUrl",
            ),
            (
                &|s| oauth(s).client_secret_ref.name = "integration-key".into(),
                "spec.auth.oauth2ClientCredentials.clientSecretRef",
            ),
            (
                &|s| oauth(s).client_id_ref.key = "other".into(),
                "spec.auth.oauth2ClientCredentials.clientIdRef",
            ),
            (&|s| s.headers[0].value = None, "spec.headers[0]"),
            (
                &|s| {
                    s.auth.oauth2_client_credentials = None;
                    s.auth.bearer_token = Some(BearerTokenAuth {
                        secret_ref: oauth_ref(),
                    });
                },
                "spec.auth.bearerToken",
            ),
        ];
        for (edit, field) in cases {
            assert_eq!(changed(edit).as_deref(), Some(field));
        }
    }

    fn oauth(s: &mut ConnectionSpec) -> &mut OAuth2ClientCredentials {
        s.auth.oauth2_client_credentials.as_mut().unwrap()
    }

    fn oauth_ref() -> SecretKeyRef {
        SecretKeyRef {
            namespace: "aigw-system".into(),
            name: "o".into(),
            key: "secret".into(),
        }
    }
}
