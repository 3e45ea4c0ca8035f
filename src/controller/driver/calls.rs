//! The remote calls of a kind ([`Calls`]): read, what a create sends, create, update, delete.
//! A kind names how it makes them ([`Verbs::Calls`]): through its API client handle
//! ([`Through`]), supplying only its request bodies ([`Bodies`]), or written out ([`Own`],
//! [`OwnCalls`]) where a call is more than the handle's (a read merged with a list row, a
//! plane or key kind the handle is chosen by).

use std::future::Future;
use std::marker::PhantomData;

use super::Cx;
use super::verbs::Verbs;
use crate::api::{self, ApiError, Client, Integrations, McpIntegrations, SecretReferences};
use crate::resources::common::CreateAttempt;

/// How the driver makes a kind's remote calls (through the gate: it hands each the client
/// [`Cx::api`] gave for its operation).
pub trait Calls<K: Verbs> {
    /// GETs the remote object `key` names. `Ok(None)`: gone, as the kind proves it besides a
    /// 404 (which the driver takes for gone itself).
    fn observe(
        kind: &K,
        client: &Client,
        key: &str,
        status: &K::Status,
    ) -> impl Future<Output = Result<Option<K::Remote>, ApiError>> + Send;
    /// What the create of `desired` sends, for the intent (name, workspace, body hash).
    fn sent(kind: &K, cx: &Cx<'_, K>, desired: &K::Desired) -> CreateAttempt;
    /// POSTs `desired`.
    fn create(
        kind: &K,
        client: &Client,
        desired: &K::Desired,
    ) -> impl Future<Output = Result<K::Posted, ApiError>> + Send;
    /// PUTs what differs.
    fn update(
        kind: &K,
        client: &Client,
        desired: &K::Desired,
        remote: &K::Remote,
    ) -> impl Future<Output = Result<K::Updated, ApiError>> + Send;
    /// DELETEs (or archives) the remote object `key` names ("already gone" is done); `cx`
    /// tells what the call needs besides the key (the tenant an organisation's object is of).
    fn delete(
        kind: &K,
        cx: &Cx<'_, K>,
        client: &Client,
        key: &str,
        status: &K::Status,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
}

/// An API client handle as the driver calls it: one kind's collection, by key.
pub trait Handle: 'static {
    type Remote: Send + Sync;
    type Create: serde::Serialize + Send + Sync;
    type Posted: Send;
    type Update: Send + Sync;
    type Updated: Send;
    fn get(
        client: &Client,
        key: &str,
    ) -> impl Future<Output = Result<Self::Remote, ApiError>> + Send;
    fn create(
        client: &Client,
        request: &Self::Create,
    ) -> impl Future<Output = Result<Self::Posted, ApiError>> + Send;
    fn update(
        client: &Client,
        key: &str,
        request: &Self::Update,
    ) -> impl Future<Output = Result<Self::Updated, ApiError>> + Send;
    /// `tenant`: the organisation the object is of, where the API takes it.
    fn delete(
        client: &Client,
        key: &str,
        tenant: Option<&str>,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// The key an update of `remote` addresses (its UUID).
    fn id(remote: &Self::Remote) -> &str;
}

/// What a kind whose calls are its handle's ([`Through`]) supplies: its request bodies, and
/// what a delete needs first.
pub trait Bodies<H: Handle>:
    Verbs<Remote = H::Remote, Posted = H::Posted, Updated = H::Updated>
{
    /// The name a create sends, for its intent.
    fn sent_name(&self) -> String;
    /// The body a create of `desired` sends.
    fn create_request(&self, desired: &Self::Desired) -> H::Create;
    /// The body an update of `remote` to `desired` sends.
    fn update_request(&self, desired: &Self::Desired, remote: &Self::Remote) -> H::Update;
    /// Before a delete: what a refusal may echo is concealed (the Secret values this resource
    /// sends, read for that alone, which an operator restarted since its last write does not
    /// remember); the tenant the delete names.
    fn before_remote_delete(
        &self,
        _cx: &Cx<'_, Self>,
    ) -> impl Future<Output = Option<String>> + Send {
        async { None }
    }
}

/// The calls of a kind, made through its client handle `H` ([`Bodies`]).
pub struct Through<H>(PhantomData<fn() -> H>);

impl<K: Bodies<H>, H: Handle> Calls<K> for Through<H> {
    async fn observe(
        _kind: &K,
        client: &Client,
        key: &str,
        _status: &K::Status,
    ) -> Result<Option<K::Remote>, ApiError> {
        H::get(client, key).await.map(Some)
    }
    fn sent(kind: &K, cx: &Cx<'_, K>, desired: &K::Desired) -> CreateAttempt {
        cx.create_attempt(Some(kind.sent_name()), None, &kind.create_request(desired))
    }
    async fn create(
        kind: &K,
        client: &Client,
        desired: &K::Desired,
    ) -> Result<H::Posted, ApiError> {
        H::create(client, &kind.create_request(desired)).await
    }
    async fn update(
        kind: &K,
        client: &Client,
        desired: &K::Desired,
        remote: &K::Remote,
    ) -> Result<H::Updated, ApiError> {
        H::update(client, H::id(remote), &kind.update_request(desired, remote)).await
    }
    async fn delete(
        kind: &K,
        cx: &Cx<'_, K>,
        client: &Client,
        key: &str,
        _status: &K::Status,
    ) -> Result<(), ApiError> {
        let tenant = kind.before_remote_delete(cx).await;
        H::delete(client, key, tenant.as_deref()).await
    }
}

/// The calls of a kind that writes them out ([`OwnCalls`]).
pub struct Own;

/// [`Calls`] written out by the kind, with the same meaning.
pub trait OwnCalls: Verbs {
    /// [`Calls::observe`].
    fn observe(
        &self,
        client: &Client,
        key: &str,
        status: &Self::Status,
    ) -> impl Future<Output = Result<Option<Self::Remote>, ApiError>> + Send;
    /// [`Calls::sent`].
    fn sent(&self, cx: &Cx<'_, Self>, desired: &Self::Desired) -> CreateAttempt;
    /// [`Calls::create`].
    fn create(
        &self,
        client: &Client,
        desired: &Self::Desired,
    ) -> impl Future<Output = Result<Self::Posted, ApiError>> + Send;
    /// [`Calls::update`].
    fn update(
        &self,
        client: &Client,
        desired: &Self::Desired,
        remote: &Self::Remote,
    ) -> impl Future<Output = Result<Self::Updated, ApiError>> + Send;
    /// [`Calls::delete`].
    fn delete(
        &self,
        cx: &Cx<'_, Self>,
        client: &Client,
        key: &str,
        status: &Self::Status,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
}

impl<K: OwnCalls> Calls<K> for Own {
    fn observe(
        kind: &K,
        client: &Client,
        key: &str,
        status: &K::Status,
    ) -> impl Future<Output = Result<Option<K::Remote>, ApiError>> + Send {
        kind.observe(client, key, status)
    }
    fn sent(kind: &K, cx: &Cx<'_, K>, desired: &K::Desired) -> CreateAttempt {
        kind.sent(cx, desired)
    }
    fn create(
        kind: &K,
        client: &Client,
        desired: &K::Desired,
    ) -> impl Future<Output = Result<K::Posted, ApiError>> + Send {
        kind.create(client, desired)
    }
    fn update(
        kind: &K,
        client: &Client,
        desired: &K::Desired,
        remote: &K::Remote,
    ) -> impl Future<Output = Result<K::Updated, ApiError>> + Send {
        kind.update(client, desired, remote)
    }
    fn delete(
        kind: &K,
        cx: &Cx<'_, K>,
        client: &Client,
        key: &str,
        status: &K::Status,
    ) -> impl Future<Output = Result<(), ApiError>> + Send {
        kind.delete(cx, client, key, status)
    }
}

impl Handle for SecretReferences<'static> {
    type Remote = api::SecretReference;
    type Create = api::CreateSecretReferenceRequest;
    type Posted = api::Created;
    type Update = api::UpdateSecretReferenceRequest;
    type Updated = ();
    async fn get(client: &Client, key: &str) -> Result<Self::Remote, ApiError> {
        client.secret_references().get(key).await
    }
    async fn create(client: &Client, request: &Self::Create) -> Result<Self::Posted, ApiError> {
        client.secret_references().create(request).await
    }
    async fn update(client: &Client, key: &str, request: &Self::Update) -> Result<(), ApiError> {
        client.secret_references().update(key, request).await
    }
    async fn delete(client: &Client, key: &str, _tenant: Option<&str>) -> Result<(), ApiError> {
        client.secret_references().delete(key).await
    }
    fn id(remote: &Self::Remote) -> &str {
        &remote.id
    }
}

impl Handle for McpIntegrations<'static> {
    type Remote = api::McpIntegration;
    type Create = api::CreateMcpIntegrationRequest;
    type Posted = api::Created;
    type Update = api::UpdateMcpIntegrationRequest;
    type Updated = ();
    async fn get(client: &Client, key: &str) -> Result<Self::Remote, ApiError> {
        client.mcp_integrations().get(key).await
    }
    async fn create(client: &Client, request: &Self::Create) -> Result<Self::Posted, ApiError> {
        client.mcp_integrations().create(request).await
    }
    async fn update(client: &Client, key: &str, request: &Self::Update) -> Result<(), ApiError> {
        client.mcp_integrations().update(key, request).await
    }
    async fn delete(client: &Client, key: &str, _tenant: Option<&str>) -> Result<(), ApiError> {
        client.mcp_integrations().delete(key).await
    }
    fn id(remote: &Self::Remote) -> &str {
        &remote.id
    }
}

impl Handle for Integrations<'static> {
    type Remote = api::Integration;
    type Create = api::CreateIntegrationRequest;
    type Posted = api::IntegrationCreated;
    type Update = api::UpdateIntegrationRequest;
    type Updated = ();
    async fn get(client: &Client, key: &str) -> Result<Self::Remote, ApiError> {
        client.integrations().get(key).await
    }
    async fn create(client: &Client, request: &Self::Create) -> Result<Self::Posted, ApiError> {
        client.integrations().create(request).await
    }
    async fn update(client: &Client, key: &str, request: &Self::Update) -> Result<(), ApiError> {
        client.integrations().update(key, request).await
    }
    async fn delete(client: &Client, key: &str, tenant: Option<&str>) -> Result<(), ApiError> {
        client.integrations().delete(key, tenant).await
    }
    fn id(remote: &Self::Remote) -> &str {
        &remote.id
    }
}
