//! The cluster-scoped `Connection` kind: how to reach and authenticate to the management API.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::common::conditions_schema;

/// How aigw reaches and authenticates to the management API. Namespaced resources name it in
/// `spec.connectionRef.name` (default `default`).
// kube's printcolumn(...) lists repeat `type_ = "string"`, which this lint misreads.
#[allow(clippy::duplicated_attributes)]
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
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(name = "URL", type_ = "string", json_path = ".spec.managementUrl"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionSpec {
    /// Root of the management API, e.g. `https://api.apps.paloaltonetworks.com`; the paths
    /// `/ai_gw/v2…` and `/ai_gw/admin/v2…` are appended.
    #[schemars(length(min = 1))]
    pub management_url: String,
    /// The gateway address including `/v1`, e.g. `https://gateway.example/v1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway_url: Option<String>,
    /// How to obtain the bearer token.
    pub auth: ConnectionAuth,
    /// Extra headers sent on every request, e.g. `x-tsg-id`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<Header>,
    /// Requests per second allowed to the API through this connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.1))]
    pub qps: Option<f64>,
    /// Burst above `qps`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub burst: Option<u32>,
    /// Namespaces whose resources may use this connection. Absent (and no namespaceSelector)
    /// means all namespaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_namespaces: Option<Vec<String>>,
    /// Label selector of the namespaces whose resources may use this connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// Tenancy rules: which namespaces may use this connection, for which workspaces, and
    /// whether they may adopt remote objects aigw did not create. When set, a namespace must
    /// match at least one grant (in addition to allowedNamespaces/namespaceSelector); its
    /// workspaces are the union of its grants', and it may adopt if any of its grants says so.
    /// Absent: every allowed namespace may manage any workspace and adopt (single-team installs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grants: Option<Vec<Grant>>,
}

impl ConnectionSpec {
    /// What this Connection reaches: its management URL and tenant (the `x-tsg-id` header, else
    /// the OAuth2 scope, which names the TSG). Two Connections to one tenant reach the same
    /// remote objects, so ownership is decided per tenant, not per Connection name. A tenant
    /// that cannot be told (a header from a Secret) is named by its Secret reference.
    pub fn tenant(&self) -> String {
        let url = self
            .management_url
            .trim_end_matches('/')
            .to_ascii_lowercase();
        let header = self
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("x-tsg-id"))
            .map(|h| match (&h.value, &h.value_from) {
                (Some(value), _) => value.trim().to_string(),
                (None, Some(from)) => format!(
                    "secret:{}/{}/{}",
                    from.secret_ref.namespace, from.secret_ref.name, from.secret_ref.key
                ),
                (None, None) => String::new(),
            });
        let scope = self
            .auth
            .oauth2_client_credentials
            .as_ref()
            .and_then(|o| o.scope.clone());
        let tenant = header.or(scope).unwrap_or_default();
        format!("{url} {tenant}")
    }
}

/// What some namespaces may do through a connection.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.namespaces) || has(self.namespaceSelector)").message("a grant needs namespaces or namespaceSelector"))]
pub struct Grant {
    /// The namespaces this grant is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<Vec<String>>,
    /// Or: a label selector of the namespaces this grant is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// Workspace ids (UUIDs) whose objects these namespaces may manage: the `workspaceId` of
    /// Configs and RateLimitsPolicies (which must then be set), the workspace of an adopted
    /// object, and a Deployment's `authSettings.workspacesAllowed`. Absent: any workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspaces: Option<Vec<String>>,
    /// May these namespaces adopt existing remote objects (`spec.slug`, `spec.deploymentId`,
    /// `spec.policyId`)? Adopting a deployment includes rotating its credentials and archiving
    /// it. Default false: without it a namespace can only reach objects aigw creates for it.
    #[serde(default)]
    pub allow_adoption: bool,
    /// May these namespaces make a Deployment the organisation's default gateway
    /// (`spec.isDefault: true`)? That changes where every team's traffic goes, so it needs this
    /// explicit grant. Default false.
    #[serde(default)]
    pub allow_default: bool,
}

/// Exactly one way to authenticate.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.bearerToken) != has(self.oauth2ClientCredentials)").message("auth needs exactly one of bearerToken or oauth2ClientCredentials"))]
pub struct ConnectionAuth {
    /// A static bearer token read from a Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_token: Option<BearerTokenAuth>,
    /// OAuth2 client credentials; tokens are cached and refreshed before they expire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
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
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OAuth2ClientCredentials {
    /// Token endpoint, e.g. `https://auth.apps.paloaltonetworks.com/oauth2/access_token`.
    #[schemars(length(min = 1))]
    pub token_url: String,
    /// Scope to request, e.g. `tsg_id:1234567890`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// Where the client id is.
    pub client_id_ref: SecretKeyRef,
    /// Where the client secret is.
    pub client_secret_ref: SecretKeyRef,
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
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.value) != has(self.valueFrom)").message("a header needs exactly one of value or valueFrom"))]
pub struct Header {
    /// Header name, e.g. `x-tsg-id`.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Literal value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Value taken from a Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
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
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready` when a token can be obtained, with the reason when it cannot.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
}
