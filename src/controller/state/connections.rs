//! Which management API client an object uses: the cluster-scoped `Connection` named by its
//! `spec.connectionRef` (default `default`), or the operator's flags for `default` when no
//! Connection of that name exists.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::ResourceExt;
use kube::api::{Api, PartialObjectMeta};

use crate::api::{
    Client, ClientConfig, OAuth2ClientCredentials, RequestObserver, SecretString, StaticToken,
    TokenSource,
};
use crate::controller::error::Error;
use crate::controller::state::claims::StoreList;
use crate::resources::connection::{Connection, ConnectionSpec, Grant, SecretKeyRef, Tenant};

/// The condition reasons by which a Connection's grants refuse a resource.
const NAMESPACE_NOT_ALLOWED: &str = "NamespaceNotAllowed";
const WORKSPACE_NOT_ALLOWED: &str = "WorkspaceNotAllowed";
pub(crate) const ADOPTION_NOT_ALLOWED: &str = "AdoptionNotAllowed";
const DEFAULT_NOT_ALLOWED: &str = "DefaultNotAllowed";
const INTEGRATION_NOT_ALLOWED: &str = "IntegrationNotAllowed";
const MCP_INTEGRATION_NOT_ALLOWED: &str = "McpIntegrationNotAllowed";
/// Every one of them: a claimant refused by them, that never managed its object, claims nothing.
pub const GRANT_REFUSALS: [&str; 6] = [
    NAMESPACE_NOT_ALLOWED,
    WORKSPACE_NOT_ALLOWED,
    ADOPTION_NOT_ALLOWED,
    DEFAULT_NOT_ALLOWED,
    INTEGRATION_NOT_ALLOWED,
    MCP_INTEGRATION_NOT_ALLOWED,
];
/// The reason by which a Connection's grants refuse following a resource of another namespace
/// (`spec.promotion.after`). It refuses a promotion, not the remote object: not a claim refusal.
pub const PROMOTION_NOT_ALLOWED: &str = "PromotionNotAllowed";

/// What the grants of Connection `connection` let `namespace` (whose labels are `labels`) do:
/// the union of the grants that match it. Refuses a namespace no grant matches. The operator's
/// gate and `aigw plan` both decide by it.
pub fn scope_of(
    connection: &str,
    grants: &[Grant],
    namespace: &str,
    labels: &BTreeMap<String, String>,
) -> Result<Scope, Error> {
    let mut workspaces: Option<BTreeSet<String>> = Some(BTreeSet::new());
    let mut integrations: Option<BTreeSet<String>> = Some(BTreeSet::new());
    let mut mcp_integrations: Option<BTreeSet<String>> = Some(BTreeSet::new());
    let mut adopt = false;
    let mut make_default = false;
    let mut promote_from = BTreeSet::new();
    let mut matched = false;
    for grant in grants {
        if !grant_matches(grant, namespace, labels)? {
            continue;
        }
        matched = true;
        adopt |= grant.allow_adoption;
        make_default |= grant.allow_default;
        promote_from.extend(grant.promote_from.iter().flatten().cloned());
        match (&mut workspaces, &grant.workspaces) {
            (Some(all), Some(these)) => all.extend(these.iter().cloned()),
            (_, None) => workspaces = None,
            (None, Some(_)) => {}
        }
        match (&mut integrations, &grant.integrations) {
            (Some(all), Some(these)) => all.extend(these.iter().cloned()),
            (_, None) => integrations = None,
            (None, Some(_)) => {}
        }
        match (&mut mcp_integrations, &grant.mcp_integrations) {
            (Some(all), Some(these)) => all.extend(these.iter().cloned()),
            (_, None) => mcp_integrations = None,
            (None, Some(_)) => {}
        }
    }
    if !matched {
        return Err(Error::not_allowed(
            NAMESPACE_NOT_ALLOWED,
            format!(
                "Connection {connection} grants nothing to namespace {namespace} (spec.grants)"
            ),
        ));
    }
    Ok(Scope {
        connection: connection.to_string(),
        workspaces,
        adopt,
        make_default,
        integrations,
        mcp_integrations,
        promote_from: Some(promote_from),
    })
}

/// Whether `grant` names `namespace` or selects it by its `labels`.
fn grant_matches(
    grant: &Grant,
    namespace: &str,
    labels: &BTreeMap<String, String>,
) -> Result<bool, Error> {
    if grant
        .namespaces
        .as_ref()
        .is_some_and(|names| names.iter().any(|n| n == namespace))
    {
        return Ok(true);
    }
    match &grant.namespace_selector {
        Some(selector) => selects(selector, labels),
        None => Ok(false),
    }
}

/// Whether a namespace selector selects a namespace with `labels`.
fn selects(
    selector: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    labels: &BTreeMap<String, String>,
) -> Result<bool, Error> {
    let selector: kube::core::Selector = selector.clone().try_into().map_err(|e| {
        Error::not_allowed(
            NAMESPACE_NOT_ALLOWED,
            format!("invalid namespace selector: {e}"),
        )
    })?;
    Ok(kube::core::SelectorExt::matches(&selector, labels))
}

/// Resolves connection names to API clients and caches one client (with its rate limiter and
/// token cache) per Connection version.
pub struct Connections {
    kube: kube::Client,
    default: Option<Client>,
    /// Tenancy rules of the connection built from the operator's flags (`--grants-file`).
    default_grants: Option<Vec<Grant>>,
    /// The one namespace Connections may read Secrets from (the ClusterIssuer pattern).
    secret_namespace: Option<String>,
    observer: Option<Arc<dyn RequestObserver>>,
    /// How long a request of a client built from a Connection may take (`--api-timeout`).
    api_timeout: Duration,
    clients: Mutex<HashMap<String, Cached>>,
    /// The clients a new Connection version replaced in `clients`, with when, the latest last,
    /// at most [`RETIRED_KEPT`]: a reconcile or a drift pass that holds one still sends its
    /// tokens, and an answer may quote them.
    retired: Mutex<std::collections::VecDeque<(Cached, std::time::Instant)>>,
    /// Namespace labels (for namespace selectors), from a metadata-only watch.
    namespaces: StoreList<PartialObjectMeta<Namespace>>,
    /// The Secrets of `secret_namespace`, from a watch, so resolving a client reads none.
    secrets: StoreList<Secret>,
    /// The name of each Secret of `secret_namespace` that changed or went, once the cache
    /// holds it: the Connections that read it look again ([`Connections::secret_changes`]).
    secret_changes: tokio::sync::broadcast::Sender<String>,
}

/// A connection resolved for one object: its client and what the object's namespace may do
/// through it.
#[derive(Clone)]
pub struct Resolved {
    pub client: Client,
    pub scope: Scope,
}

/// What a namespace may do through a connection (the union of the grants that match it).
#[derive(Debug, Clone, PartialEq)]
pub struct Scope {
    /// The connection's name, for messages.
    pub connection: String,
    /// Workspaces it may manage; `None` means any.
    pub workspaces: Option<BTreeSet<String>>,
    /// Whether it may adopt remote objects aigw did not create.
    pub adopt: bool,
    /// Whether it may make a Deployment the organisation's default gateway.
    pub make_default: bool,
    /// Integrations it may bind into providers (by resource name, slug or UUID); `None`: any.
    pub integrations: Option<BTreeSet<String>>,
    /// MCP integrations it may instantiate as servers (by resource name, slug or UUID);
    /// `None`: any.
    pub mcp_integrations: Option<BTreeSet<String>>,
    /// Other namespaces whose resources it may follow (`spec.promotion.after`); `None` means any.
    pub promote_from: Option<BTreeSet<String>>,
}

impl Scope {
    fn unrestricted(connection: &str) -> Self {
        Self {
            connection: connection.to_string(),
            workspaces: None,
            adopt: true,
            make_default: true,
            integrations: None,
            mcp_integrations: None,
            promote_from: None,
        }
    }

    /// Refuses following (`field`, `spec.promotion.after[n]`) a resource of `source`, another
    /// namespace than `namespace`, without a grant that names it.
    pub fn check_promote_from(
        &self,
        field: &str,
        namespace: &str,
        source: &str,
    ) -> Result<(), Error> {
        match &self.promote_from {
            None => Ok(()),
            Some(allowed) if allowed.contains(source) => Ok(()),
            Some(_) => Err(Error::not_allowed(
                PROMOTION_NOT_ALLOWED,
                format!(
                    "{field} names a resource of namespace {source}, and Connection {} does not let namespace {namespace} follow resources of {source} (spec.grants[].promoteFrom)",
                    self.connection
                ),
            )),
        }
    }

    /// Refuses `workspace` (named by `field`) when the grants do not cover it.
    pub fn check_workspace(&self, field: &str, workspace: Option<&str>) -> Result<(), Error> {
        self.check_workspace_by(field, workspace, |_| None)
    }

    /// Like [`Self::check_workspace`], where a grant entry `resource` resolves (the name of a
    /// Workspace resource, to the UUID and slug it recorded) grants that workspace, never
    /// another whose id or slug happens to equal the name.
    pub fn check_workspace_by(
        &self,
        field: &str,
        workspace: Option<&str>,
        resource: impl Fn(&str) -> Option<Vec<String>>,
    ) -> Result<(), Error> {
        let Some(allowed) = &self.workspaces else {
            return Ok(());
        };
        match workspace {
            Some(ws) if granted(allowed, &[ws.to_string()], &resource) => Ok(()),
            Some(ws) => Err(Error::not_allowed(
                WORKSPACE_NOT_ALLOWED,
                format!(
                    "{field} {ws} is not among the workspaces this namespace may manage through Connection {} (spec.grants[].workspaces)",
                    self.connection
                ),
            )),
            None => Err(Error::not_allowed(
                WORKSPACE_NOT_ALLOWED,
                format!(
                    "{field} must be set: Connection {} limits this namespace to workspaces {} (spec.grants[].workspaces)",
                    self.connection,
                    allowed.iter().cloned().collect::<Vec<_>>().join(", ")
                ),
            )),
        }
    }

    /// Refuses what `field` describes (e.g. "spec.isDefault makes this gateway the
    /// organisation's default"), which is organisation-wide, without a grant that allows it.
    pub fn check_default(&self, field: &str) -> Result<(), Error> {
        self.flag_granted(self.make_default, DEFAULT_NOT_ALLOWED, || {
            format!(
                "{field}, and Connection {} does not let this namespace manage the organisation's default gateway (spec.grants[].allowDefault)",
                self.connection
            )
        })
    }

    /// `Ok` when the grant flag `allowed` is set, else refused with `reason` and `message`.
    fn flag_granted(
        &self,
        allowed: bool,
        reason: &'static str,
        message: impl FnOnce() -> String,
    ) -> Result<(), Error> {
        if allowed {
            Ok(())
        } else {
            Err(Error::not_allowed(reason, message()))
        }
    }

    /// Refuses binding the integration `keys` name (its resource name, slug, UUID: any one
    /// granted will do), named by `field`, when the grants do not cover it.
    pub fn check_integration(&self, field: &str, keys: &[String]) -> Result<(), Error> {
        self.check_listed(&INTEGRATIONS, field, keys, |_| None)
    }

    /// Refuses the object `keys` name (named by `field`) unless an entry of `listed` covers
    /// it (`granted`); `None` lists allow anything. For a remote object `keys` names by its
    /// UUID and slug only: a grant entry that `resource` resolves (the name of an Integration or
    /// McpIntegration resource, to the UUID and slug it recorded) grants that object, never
    /// another whose slug happens to equal the name.
    pub fn check_listed(
        &self,
        listed: &Listed,
        field: &str,
        keys: &[String],
        resource: impl Fn(&str) -> Option<Vec<String>>,
    ) -> Result<(), Error> {
        let Some(allowed) = (listed.allowed)(self) else {
            return Ok(());
        };
        if granted(allowed, keys, resource) {
            return Ok(());
        }
        Err(Error::not_allowed(
            listed.reason,
            format!(
                "{field} {} is not among the {} through Connection {} (spec.grants[].{}: {})",
                keys.first().map(String::as_str).unwrap_or_default(),
                listed.what,
                self.connection,
                listed.grant,
                allowed.iter().cloned().collect::<Vec<_>>().join(", ")
            ),
        ))
    }

    /// Refuses adopting the remote object `id` (named by `field`) without an adoption grant.
    pub fn check_adoption(&self, field: &str, id: &str) -> Result<(), Error> {
        self.flag_granted(self.adopt, ADOPTION_NOT_ALLOWED, || {
            format!(
                "{field} {id} names an existing remote object, and Connection {} does not let this namespace adopt objects aigw did not create (spec.grants[].allowAdoption)",
                self.connection
            )
        })
    }
}

/// A list of the grants that limits what a namespace may name, for [`Scope::check_listed`].
pub struct Listed {
    /// The list in a [`Scope`].
    allowed: fn(&Scope) -> &Option<BTreeSet<String>>,
    /// The condition reason of a refusal.
    reason: &'static str,
    /// What the list holds, for the message.
    what: &'static str,
    /// The grant field.
    grant: &'static str,
}

/// The integrations a namespace may bind into providers (`spec.grants[].integrations`).
pub const INTEGRATIONS: Listed = Listed {
    allowed: |scope| &scope.integrations,
    reason: INTEGRATION_NOT_ALLOWED,
    what: "integrations this namespace may bind",
    grant: "integrations",
};

/// The MCP integrations a namespace may instantiate as servers
/// (`spec.grants[].mcpIntegrations`): an entry naming an McpIntegration resource stands for the
/// UUID and slug it recorded, and for no other.
pub const MCP_INTEGRATIONS: Listed = Listed {
    allowed: |scope| &scope.mcp_integrations,
    reason: MCP_INTEGRATION_NOT_ALLOWED,
    what: "MCP integrations this namespace may instantiate",
    grant: "mcpIntegrations",
};

/// Whether a grant entry of `allowed` covers the object `keys` name: an entry `resource`
/// resolves (a resource's name) by what that resource recorded, any other entry literally.
fn granted(
    allowed: &BTreeSet<String>,
    keys: &[String],
    resource: impl Fn(&str) -> Option<Vec<String>>,
) -> bool {
    allowed.iter().any(|entry| match resource(entry) {
        Some(recorded) => recorded.iter().any(|r| keys.contains(r)),
        None => keys.contains(entry),
    })
}

impl Connections {
    /// `default` is the client built from the operator's flags, if any.
    pub fn new(kube: kube::Client, default: Option<Client>) -> Self {
        Self {
            kube,
            default,
            default_grants: None,
            secret_namespace: None,
            observer: None,
            api_timeout: crate::api::DEFAULT_TIMEOUT,
            clients: Mutex::new(HashMap::new()),
            retired: Mutex::default(),
            namespaces: StoreList::default(),
            secrets: StoreList::default(),
            secret_changes: tokio::sync::broadcast::channel(256).0,
        }
    }

    /// The names of the Secrets of the Connection secret namespace that change or go from now
    /// on, heard from its watch once the cache holds the change (none without that namespace:
    /// Connection Secrets are then read by name, and checked at each drift interval).
    pub fn secret_changes(&self) -> tokio::sync::broadcast::Receiver<String> {
        self.secret_changes.subscribe()
    }

    /// The watch caches this resolver reads instead of the apiserver: every Namespace's
    /// metadata, and the Secrets of the Connection secret namespace when there is one (without
    /// one, Connection Secrets may be anywhere and are read by name). Returns the futures that
    /// keep them filled, each with the name its health is reported under.
    pub fn watches(&self) -> Vec<(&'static str, WatchProgress)> {
        let mut watches = vec![(
            "Namespace/*",
            filled(
                Api::<PartialObjectMeta<Namespace>>::all(self.kube.clone()),
                &self.namespaces,
            ),
        )];
        if let Some(namespace) = &self.secret_namespace {
            use futures::StreamExt;
            let changes = self.secret_changes.clone();
            let told = move |event: &kube::runtime::watcher::Event<Secret>| {
                use kube::runtime::watcher::Event;
                if let Event::Apply(secret) | Event::Delete(secret) = event {
                    // Nobody listening (no Connection controller yet) is fine.
                    let _ = changes.send(secret.name_any());
                }
            };
            watches.push((
                "Secret(Connections)",
                stored_in(
                    Api::<Secret>::namespaced(self.kube.clone(), namespace),
                    &self.secrets,
                    told,
                )
                .boxed(),
            ));
        }
        watches
    }

    /// Tenancy rules for the connection built from the operator's flags.
    pub fn with_default_grants(mut self, grants: Option<Vec<Grant>>) -> Self {
        self.default_grants = grants;
        self
    }

    /// Lets Connections read Secrets only in `namespace`.
    pub fn with_secret_namespace(mut self, namespace: Option<String>) -> Self {
        self.secret_namespace = namespace;
        self
    }

    /// The timeout of the clients built from Connections (`--api-timeout`; 30 s by default).
    pub fn with_api_timeout(mut self, timeout: Duration) -> Self {
        self.api_timeout = timeout;
        self
    }

    /// Reports every request of clients built from Connections (metrics).
    pub fn with_observer(mut self, observer: Arc<dyn RequestObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// The namespace Connections read Secrets from, when the operator has one
    /// (`--connection-secret-namespace`): a cluster-scoped kind reads its Secrets there too.
    pub fn secret_namespace(&self) -> Option<&str> {
        self.secret_namespace.as_deref()
    }

    /// The client for connection `name`, as used by an object in `namespace`, and what that
    /// namespace may do through it. `cached` is the Connection from the watch cache, when the
    /// caller has one (then no apiserver read is made).
    ///
    /// A cluster-scoped object (`namespace` `None`) belongs to no namespace, so neither
    /// `allowedNamespaces`, `namespaceSelector` nor `grants` (all about namespaces) apply to
    /// it: only those who may create cluster-scoped objects can make one (Kubernetes RBAC),
    /// the `Issuer`/`ClusterIssuer` split.
    pub async fn client_for(
        &self,
        namespace: Option<&str>,
        name: &str,
        cached: Option<Option<Arc<Connection>>>,
    ) -> Result<Resolved, Error> {
        let connection = match cached {
            Some(found) => found.map(|c| (*c).clone()),
            None => Api::<Connection>::all(self.kube.clone())
                .get_opt(name)
                .await
                .map_err(|e| Error::kube(format!("read Connection {name}"), e))?,
        };
        let Some(connection) = connection else {
            return match (&self.default, name) {
                (Some(client), "default") => Ok(Resolved {
                    client: client.clone(),
                    scope: self
                        .scope(name, self.default_grants.as_deref(), namespace)
                        .await?,
                }),
                (None, "default") => Err(Error::Connection(
                    "no Connection named default exists and the operator has no --management-url/--token-file".into(),
                )),
                _ => Err(Error::Connection(format!("Connection {name} not found"))),
            };
        };
        if let Some(namespace) = namespace {
            self.check_namespace_allowed(&connection, namespace).await?;
        }
        let scope = self
            .scope(name, connection.spec.grants.as_deref(), namespace)
            .await?;
        Ok(Resolved {
            client: self.client(&connection).await?,
            scope,
        })
    }

    /// The union of the grants matching `namespace`; refuses a namespace no grant matches.
    /// A cluster-scoped object (`None`) is not limited by grants.
    async fn scope(
        &self,
        connection: &str,
        grants: Option<&[Grant]>,
        namespace: Option<&str>,
    ) -> Result<Scope, Error> {
        let (Some(grants), Some(namespace)) = (grants, namespace) else {
            return Ok(Scope::unrestricted(connection));
        };
        let selects = grants.iter().any(|g| g.namespace_selector.is_some());
        let labels = match selects {
            true => self.namespace_labels(namespace).await?,
            false => BTreeMap::new(),
        };
        scope_of(connection, grants, namespace, &labels)
    }

    /// The labels of `namespace`, from the watch cache when it is filled.
    async fn namespace_labels(&self, namespace: &str) -> Result<BTreeMap<String, String>, Error> {
        Ok(match self.namespaces.find(namespace).await {
            Some(Some(ns)) => ns.labels().clone(),
            // Not in a filled cache: no such namespace, so no labels.
            Some(None) => BTreeMap::new(),
            None => Api::<Namespace>::all(self.kube.clone())
                .get_metadata(namespace)
                .await
                .map_err(|e| Error::kube(format!("read namespace {namespace}"), e))?
                .labels()
                .clone(),
        })
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
            return Err(Error::not_allowed(
                NAMESPACE_NOT_ALLOWED,
                format!(
                    "Connection {name} does not allow namespace {namespace} (spec.allowedNamespaces)"
                ),
            ));
        }
        if let Some(selector) = &spec.namespace_selector
            && !selects(selector, &self.namespace_labels(namespace).await?)?
        {
            return Err(Error::not_allowed(
                NAMESPACE_NOT_ALLOWED,
                format!(
                    "Connection {name} does not allow namespace {namespace} (spec.namespaceSelector)"
                ),
            ));
        }
        Ok(())
    }

    /// What Connection `name` reaches ([`ConnectionSpec::tenant`]); the operator's flags for
    /// `default` when no Connection of that name exists (a tenant that cannot be told).
    /// `None`: it reaches nothing known.
    pub fn tenant_of(&self, name: &str, connection: Option<&Connection>) -> Option<Tenant> {
        match (connection, &self.default, name) {
            (Some(c), _, _) => Some(c.spec.tenant()),
            (None, Some(client), "default") => Some(Tenant {
                host: Tenant::host_of(client.management_url()),
                id: None,
            }),
            _ => None,
        }
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
        let secrets = Arc::new(material.secrets);
        let token = token_source(material.auth).map_err(unusable)?;
        let client = build_client(
            &connection.spec,
            token.clone(),
            material.headers,
            self.observer.clone(),
            self.api_timeout,
        )
        .map_err(unusable)?;
        let cached = Cached {
            fingerprint,
            token,
            client,
            secrets,
        };
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        // Built at once by another reconcile for the same version: that one is kept, this one
        // (which sent nothing yet) dropped.
        if let Some(same) = clients
            .get(&name)
            .filter(|c| c.fingerprint == cached.fingerprint)
        {
            return Ok(same.clone());
        }
        if let Some(replaced) = clients.insert(name, cached.clone()) {
            // Under `clients`, as `secret_values` takes them: never missing from both.
            let mut retired = self.retired.lock().unwrap_or_else(|e| e.into_inner());
            if retired.len() == RETIRED_KEPT {
                retired.pop_front();
            }
            retired.push_back((replaced, std::time::Instant::now()));
        }
        Ok(cached)
    }

    /// The values this operator read from the Secrets of its Connections (tokens, client
    /// credentials, header values), the tokens their clients sent (OAuth2 access tokens it
    /// obtained with them included), those of the clients they replaced, and the tokens of the
    /// client of the operator's flags: no message it writes may carry one.
    pub fn secret_values(&self) -> Vec<String> {
        let clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        let mut retired = self.retired.lock().unwrap_or_else(|e| e.into_inner());
        // A replaced client counts while a reconcile or a drift pass still holds it, or its
        // last requests may still be answered.
        retired.retain(|(c, at)| c.client.held_elsewhere() || at.elapsed() < RETIRED_FOR);
        let mut values: Vec<String> = clients
            .values()
            .chain(retired.iter().map(|(c, _)| c))
            .flat_map(|c| c.secrets.iter().cloned().chain(c.token.handed_out()))
            .chain(self.default.iter().flat_map(Client::tokens_sent))
            .map(|s| s.expose().to_string())
            .collect();
        values.sort();
        values.dedup();
        values
    }

    /// The qps of the client built for Connection `name` (for `default` without one, the
    /// client of the operator's flags), if one was built: `Some(None)` for a client without a
    /// limit.
    pub fn qps_of(&self, name: &str) -> Option<Option<f64>> {
        let clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        match clients.get(name) {
            Some(cached) => Some(cached.client.qps()),
            None if name == "default" => self.default.as_ref().map(Client::qps),
            None => None,
        }
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
        let mut secrets = Vec::new();
        let mut read = async |r: &SecretKeyRef| -> Result<SecretString, Error> {
            if let Some(allowed) = &self.secret_namespace
                && r.namespace != *allowed
            {
                return Err(Error::not_allowed(
                    "SecretNamespaceNotAllowed",
                    format!(
                        "Connection {name} refers to Secret {}/{}, but Connections may only read Secrets in namespace {allowed} (--connection-secret-namespace)",
                        r.namespace, r.name
                    ),
                ));
            }
            let cached = match &self.secret_namespace {
                Some(allowed) if r.namespace == *allowed => self.secrets.find(&r.name).await,
                _ => None,
            };
            let (value, version) = read_secret_key(&self.kube, r, name, cached).await?;
            versions.push(version);
            secrets.push(value.clone());
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
            secrets,
        })
    }
}

/// What a cache-filling watch reports, for the health probe: whether a list completed.
pub type WatchProgress = futures::stream::BoxStream<
    'static,
    Result<kube::runtime::watcher::Event<()>, kube::runtime::watcher::Error>,
>;

/// A watch of `api` that keeps a new store of `stores` filled (without managedFields).
fn filled<K: crate::controller::Watchable>(api: Api<K>, stores: &StoreList<K>) -> WatchProgress {
    use futures::StreamExt;
    stored_in(api, stores, |_| {}).boxed()
}

/// [`filled`], with `told` hearing each event once the cache holds it.
fn stored_in<K: crate::controller::Watchable>(
    api: Api<K>,
    stores: &StoreList<K>,
    told: impl Fn(&kube::runtime::watcher::Event<K>) + Send + 'static,
) -> impl futures::Stream<
    Item = Result<kube::runtime::watcher::Event<()>, kube::runtime::watcher::Error>,
> + Send
+ 'static {
    use futures::StreamExt;
    use kube::runtime::{WatchStreamExt, reflector, watcher};
    let (reader, writer) = reflector::store();
    stores.register(reader);
    let objects = watcher(api, watcher::Config::default().any_semantic())
        .default_backoff()
        .modify(|object| object.meta_mut().managed_fields = None);
    reflector::reflector(writer, objects).map(move |event| {
        if let Ok(event) = &event {
            told(event);
        }
        event.map(progress)
    })
}

fn progress<K>(event: kube::runtime::watcher::Event<K>) -> kube::runtime::watcher::Event<()> {
    use kube::runtime::watcher::Event;
    match event {
        Event::InitDone => Event::InitDone,
        _ => Event::Init,
    }
}

/// How many replaced clients [`Connections::secret_values`] still answers for.
const RETIRED_KEPT: usize = 32;

/// How long a replaced client nobody holds any more still counts: its last requests' timeout
/// and retries, as long as a token source answers for a token it replaced.
const RETIRED_FOR: Duration = crate::api::IN_FLIGHT;

#[derive(Clone)]
struct Cached {
    fingerprint: String,
    token: Arc<dyn TokenSource>,
    client: Client,
    /// The values read from the Connection's Secrets, for [`Connections::secret_values`].
    secrets: Arc<Vec<SecretString>>,
}

struct Material {
    auth: Auth,
    headers: Vec<(String, SecretString)>,
    /// Every value read from a Secret (token, client credentials, header values).
    secrets: Vec<SecretString>,
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

/// The key `r` names, from `cached` (the watch cache's answer, when it has one) or else read
/// from the apiserver; with the Secret's resourceVersion, so a changed Secret makes a new client.
async fn read_secret_key(
    kube: &kube::Client,
    r: &SecretKeyRef,
    connection: &str,
    cached: Option<Option<Arc<Secret>>>,
) -> Result<(SecretString, String), Error> {
    let found = match cached {
        Some(found) => found.map(|s| (*s).clone()),
        None => Api::<Secret>::namespaced(kube.clone(), &r.namespace)
            .get_opt(&r.name)
            .await
            .map_err(|e| Error::kube(format!("read Secret {}/{}", r.namespace, r.name), e))?,
    };
    let secret = found.ok_or_else(|| {
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
    timeout: Duration,
) -> Result<Client, crate::api::ApiError> {
    let management = spec.management_url.trim_end_matches('/').to_string();
    let gateway = spec
        .gateway_url
        .clone()
        .unwrap_or_else(|| format!("{management}/v1"));
    let qps = spec.qps.unwrap_or(10.0);
    let mut config = ClientConfig::new(management, gateway, token)
        .timeout(timeout)
        .rate_limit(qps, spec.burst.unwrap_or((qps * 2.0).ceil() as u32));
    for (name, value) in headers {
        config = config.header(name, value);
    }
    if let Some(observer) = observer {
        config = config.observer(observer);
    }
    Client::new(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_naming_a_workspace_resource_grants_what_it_recorded_and_nothing_else() {
        let scope = Scope {
            workspaces: Some(["payments".to_string(), "ws-literal".to_string()].into()),
            ..Scope::unrestricted("tenant")
        };
        let resource = |name: &str| {
            (name == "payments").then(|| vec!["uuid-pay".to_string(), "ws-pay-1a2b3c".to_string()])
        };
        for granted in ["uuid-pay", "ws-pay-1a2b3c", "ws-literal"] {
            assert!(
                scope
                    .check_workspace_by("spec.workspaceId", Some(granted), resource)
                    .is_ok(),
                "{granted}"
            );
        }
        // The resource's name is not a workspace id: a remote workspace whose slug is
        // `payments` is not granted by it.
        let refused = scope
            .check_workspace_by("spec.workspaceId", Some("payments"), resource)
            .unwrap_err();
        assert_eq!(refused.category(), WORKSPACE_NOT_ALLOWED);
        assert!(
            scope
                .check_workspace("spec.workspaceId", Some("uuid-pay"))
                .is_err()
        );
    }

    #[test]
    fn following_another_namespace_needs_a_grant_naming_it() {
        let unrestricted = Scope::unrestricted("default");
        assert!(
            unrestricted
                .check_promote_from("spec.promotion.after[0]", "prod", "dev")
                .is_ok()
        );
        let granted = Scope {
            promote_from: Some(["dev".to_string()].into()),
            ..Scope::unrestricted("tenant")
        };
        assert!(
            granted
                .check_promote_from("spec.promotion.after[0]", "prod", "dev")
                .is_ok()
        );
        let refused = granted
            .check_promote_from("spec.promotion.after[1]", "prod", "team-b")
            .unwrap_err();
        assert_eq!(refused.category(), PROMOTION_NOT_ALLOWED);
        let message = refused.to_string();
        assert!(
            message.contains("spec.promotion.after[1]")
                && message.contains("spec.grants[].promoteFrom")
                && message.contains("Connection tenant"),
            "{message}"
        );
    }
}
