//! Which management API client an object uses: the cluster-scoped `Connection` named by its
//! `spec.connectionRef` (default `default`), or the operator's flags for `default` when no
//! Connection of that name exists.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::ResourceExt;
use kube::api::Api;

use super::error::Error;
use crate::api::{
    Client, ClientConfig, OAuth2ClientCredentials, RequestObserver, SecretString, StaticToken,
    TokenSource,
};
use crate::resources::connection::{Connection, ConnectionSpec, SecretKeyRef};

/// Resolves connection names to API clients and caches one client (with its rate limiter and
/// token cache) per Connection version.
pub struct Connections {
    kube: kube::Client,
    default: Option<Client>,
    observer: Option<Arc<dyn RequestObserver>>,
    clients: Mutex<HashMap<String, Cached>>,
}

impl Connections {
    /// `default` is the client built from the operator's flags, if any.
    pub fn new(kube: kube::Client, default: Option<Client>) -> Self {
        Self {
            kube,
            default,
            observer: None,
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// Reports every request of clients built from Connections (metrics).
    pub fn with_observer(mut self, observer: Arc<dyn RequestObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// The client for connection `name`, as used by an object in `namespace`.
    pub async fn client_for(&self, namespace: &str, name: &str) -> Result<Client, Error> {
        let connections: Api<Connection> = Api::all(self.kube.clone());
        let connection = connections
            .get_opt(name)
            .await
            .map_err(|e| Error::kube(format!("read Connection {name}"), e))?;
        let Some(connection) = connection else {
            return match (&self.default, name) {
                (Some(client), "default") => Ok(client.clone()),
                (None, "default") => Err(Error::Connection(
                    "no Connection named default exists and the operator has no --management-url/--token-file".into(),
                )),
                _ => Err(Error::Connection(format!("Connection {name} not found"))),
            };
        };
        self.check_namespace_allowed(&connection, namespace).await?;
        self.client(&connection).await
    }

    async fn check_namespace_allowed(
        &self,
        connection: &Connection,
        namespace: &str,
    ) -> Result<(), Error> {
        let spec = &connection.spec;
        let name = connection.name_any();
        if let Some(allowed) = &spec.allowed_namespaces
            && !allowed.iter().any(|n| n == namespace)
        {
            return Err(Error::NotAllowed(format!(
                "Connection {name} does not allow namespace {namespace} (spec.allowedNamespaces)"
            )));
        }
        if let Some(selector) = &spec.namespace_selector {
            let ns = Api::<Namespace>::all(self.kube.clone())
                .get(namespace)
                .await
                .map_err(|e| Error::kube(format!("read namespace {namespace}"), e))?;
            let selector: kube::core::Selector = selector.clone().try_into().map_err(|e| {
                Error::NotAllowed(format!(
                    "Connection {name} has an invalid namespaceSelector: {e}"
                ))
            })?;
            let labels: BTreeMap<String, String> = ns.labels().clone();
            if !kube::core::SelectorExt::matches(&selector, &labels) {
                return Err(Error::NotAllowed(format!(
                    "Connection {name} does not allow namespace {namespace} (spec.namespaceSelector)"
                )));
            }
        }
        Ok(())
    }

    /// The cached client of this Connection version, or a new one.
    pub async fn client(&self, connection: &Connection) -> Result<Client, Error> {
        Ok(self.cached(connection).await?.client)
    }

    /// The client and token source of this Connection's spec and Secrets, built once: the
    /// fingerprint is the spec's generation (status writes do not change it) and the
    /// resourceVersions of the Secrets read, so tokens stay cached across reconciles.
    async fn cached(&self, connection: &Connection) -> Result<Cached, Error> {
        let name = connection.name_any();
        let material = self.read_material(&connection.spec, &name).await?;
        let fingerprint = format!(
            "{}/{}/{}",
            connection.uid().unwrap_or_default(),
            connection.metadata.generation.unwrap_or_default(),
            material.versions
        );
        if let Some(cached) = self
            .clients
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&name)
            .filter(|c| c.fingerprint == fingerprint)
        {
            return Ok(cached.clone());
        }
        let unusable = |e: crate::api::ApiError| {
            Error::Connection(format!("Connection {name} is unusable: {e}"))
        };
        let token = token_source(material.auth).map_err(unusable)?;
        let client = build_client(
            &connection.spec,
            token.clone(),
            material.headers,
            self.observer.clone(),
        )
        .map_err(unusable)?;
        let cached = Cached {
            fingerprint,
            token,
            client,
        };
        self.clients
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name, cached.clone());
        Ok(cached)
    }

    /// Checks that a token can be obtained with this Connection (its Secrets exist, the
    /// client credentials are accepted).
    pub async fn probe(&self, connection: &Connection) -> Result<(), Error> {
        let name = connection.name_any();
        self.cached(connection)
            .await?
            .token
            .token()
            .await
            .map(|_| ())
            .map_err(|e| Error::api(format!("obtain a token for Connection {name}"), e))
    }

    async fn read_material(&self, spec: &ConnectionSpec, name: &str) -> Result<Material, Error> {
        let mut versions = Vec::new();
        let mut read = async |r: &SecretKeyRef| -> Result<SecretString, Error> {
            let (value, version) = read_secret_key(&self.kube, r, name).await?;
            versions.push(version);
            Ok(value)
        };
        let auth = if let Some(bearer) = &spec.auth.bearer_token {
            Auth::Bearer(read(&bearer.secret_ref).await?)
        } else if let Some(oauth) = &spec.auth.oauth2_client_credentials {
            Auth::OAuth2 {
                token_url: oauth.token_url.clone(),
                scope: oauth.scope.clone(),
                client_id: read(&oauth.client_id_ref).await?,
                client_secret: read(&oauth.client_secret_ref).await?,
            }
        } else {
            return Err(Error::Connection(format!("Connection {name} has no auth")));
        };
        let mut headers = Vec::new();
        for header in &spec.headers {
            let value = match (&header.value, &header.value_from) {
                (Some(value), _) => SecretString::new(value.clone()),
                (None, Some(from)) => read(&from.secret_ref).await?,
                (None, None) => {
                    return Err(Error::Connection(format!(
                        "header {} of Connection {name} has no value",
                        header.name
                    )));
                }
            };
            headers.push((header.name.clone(), value));
        }
        Ok(Material {
            auth,
            headers,
            versions: versions.join(","),
        })
    }
}

#[derive(Clone)]
struct Cached {
    fingerprint: String,
    token: Arc<dyn TokenSource>,
    client: Client,
}

struct Material {
    auth: Auth,
    headers: Vec<(String, SecretString)>,
    /// resourceVersions of the Secrets read, so a changed Secret makes a new client.
    versions: String,
}

enum Auth {
    Bearer(SecretString),
    OAuth2 {
        token_url: String,
        scope: Option<String>,
        client_id: SecretString,
        client_secret: SecretString,
    },
}

async fn read_secret_key(
    kube: &kube::Client,
    r: &SecretKeyRef,
    connection: &str,
) -> Result<(SecretString, String), Error> {
    let secret = Api::<Secret>::namespaced(kube.clone(), &r.namespace)
        .get_opt(&r.name)
        .await
        .map_err(|e| Error::kube(format!("read Secret {}/{}", r.namespace, r.name), e))?
        .ok_or_else(|| {
            Error::Connection(format!(
                "Secret {}/{} of Connection {connection} not found",
                r.namespace, r.name
            ))
        })?;
    let value = secret
        .data
        .as_ref()
        .and_then(|d| d.get(&r.key))
        .map(|v| String::from_utf8_lossy(&v.0).trim().to_string())
        .filter(|v| !v.is_empty())
        .ok_or_else(|| {
            Error::Connection(format!(
                "Secret {}/{} of Connection {connection} has no key {}",
                r.namespace, r.name, r.key
            ))
        })?;
    Ok((
        SecretString::new(value),
        secret.resource_version().unwrap_or_default(),
    ))
}

fn token_source(auth: Auth) -> Result<Arc<dyn TokenSource>, crate::api::ApiError> {
    Ok(match auth {
        Auth::Bearer(token) => Arc::new(StaticToken::new(token)),
        Auth::OAuth2 {
            token_url,
            scope,
            client_id,
            client_secret,
        } => Arc::new(OAuth2ClientCredentials::new(
            token_url,
            client_id.expose(),
            client_secret,
            scope,
            Duration::from_secs(30),
        )?),
    })
}

fn build_client(
    spec: &ConnectionSpec,
    token: Arc<dyn TokenSource>,
    headers: Vec<(String, SecretString)>,
    observer: Option<Arc<dyn RequestObserver>>,
) -> Result<Client, crate::api::ApiError> {
    let management = spec.management_url.trim_end_matches('/').to_string();
    let gateway = spec
        .gateway_url
        .clone()
        .unwrap_or_else(|| format!("{management}/v1"));
    let qps = spec.qps.unwrap_or(10.0);
    let mut config = ClientConfig::new(management, gateway, token)
        .rate_limit(qps, spec.burst.unwrap_or((qps * 2.0).ceil() as u32));
    for (name, value) in headers {
        config = config.header(name, value);
    }
    if let Some(observer) = observer {
        config = config.observer(observer);
    }
    Client::new(config)
}
