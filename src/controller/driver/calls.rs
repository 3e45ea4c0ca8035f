//! The remote calls of a kind ([`Calls`]): read, what a create sends, create, update, delete,
//! and what they answer. A kind names how it makes them ([`Verbs::Calls`]): through its API
//! client handle ([`Through`]), supplying only its request bodies ([`Bodies`]), or written out
//! ([`Own`], [`OwnCalls`]) where a call is more than the handle's (a read merged with a list
//! row, a plane or key kind the handle is chosen by).

use std::future::Future;
use std::marker::PhantomData;

use super::Cx;
use super::create::{Candidate, Lookup, by_slug_or_name};
use super::verbs::{Comparison, Verbs};
use crate::api::{
    self, ApiError, Client, Integrations, IntegrationsListQuery, Listing, McpIntegrations, Reading,
    SecretReferences, SecretReferencesListQuery,
};
use crate::controller::error::Halt;
use crate::resources::common::CreateAttempt;

/// How the driver makes a kind's remote calls (through the gate: it hands each the client
/// [`Cx::api`] gave for its operation).
pub trait Calls<K: Verbs> {
    /// The remote object as a read returns it.
    type Remote: Send + Sync;
    /// A candidate of a create lookup (a list row).
    type Found: Send + Sync;
    /// What a create answers.
    type Posted: Send + Sync;
    /// What an update answers.
    type Updated: Send + Sync;
    /// The key `remote` is read and written by.
    fn key(remote: &Self::Remote) -> String;
    /// The key of a lookup's candidate.
    fn found_key(found: &Self::Found) -> String;
    /// The workspace `remote` lives in (an adopted object's must be granted too).
    fn workspace(remote: &Self::Remote) -> Option<&str>;
    /// GETs the remote object `key` names. `Ok(None)`: gone, as the kind proves it besides a
    /// 404 (which the driver takes for gone itself).
    fn observe(
        kind: &K,
        client: &Client,
        key: &str,
        status: &K::Status,
    ) -> impl Future<Output = Result<Option<Self::Remote>, ApiError>> + Send;
    /// What the create of `desired` sends, for the intent (name, workspace, body hash).
    fn sent(kind: &K, cx: &Cx<'_, K>, desired: &K::Desired) -> CreateAttempt;
    /// POSTs `desired`.
    fn create(
        kind: &K,
        client: &Client,
        desired: &K::Desired,
    ) -> impl Future<Output = Result<Self::Posted, ApiError>> + Send;
    /// How `remote` differs from `desired`. Pure.
    fn compare(
        kind: &K,
        desired: &K::Desired,
        remote: &Self::Remote,
        status: &K::Status,
    ) -> Comparison;
    /// PUTs what differs.
    fn update(
        kind: &K,
        client: &Client,
        desired: &K::Desired,
        remote: &Self::Remote,
    ) -> impl Future<Output = Result<Self::Updated, ApiError>> + Send;
    /// DELETEs (or archives) the remote object `key` names ("already gone" is done); `cx`
    /// tells what the call needs besides the key (the tenant an organisation's object is of).
    fn delete(
        kind: &K,
        cx: &Cx<'_, K>,
        client: &Client,
        key: &str,
        status: &K::Status,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// What an earlier create whose answer was lost made, proven by what it sent (the intent
    /// in `status`): a marker or a body hash the API keeps, or one match in a complete listing
    /// within the create's window ([`super::create::one_of_ours`]). Never a guess by name alone.
    fn find_created(
        kind: &K,
        cx: &Cx<'_, K>,
        status: &K::Status,
    ) -> impl Future<Output = Result<Lookup<Self::Found>, Halt>> + Send;
}

/// `K`'s remote object as a read returns it ([`Calls::Remote`]).
pub type Remote<K> = <<K as Verbs>::Calls as Calls<K>>::Remote;
/// A candidate of `K`'s create lookup ([`Calls::Found`]).
pub type Found<K> = <<K as Verbs>::Calls as Calls<K>>::Found;
/// What `K`'s create answers ([`Calls::Posted`]).
pub type Posted<K> = <<K as Verbs>::Calls as Calls<K>>::Posted;
/// What `K`'s update answers ([`Calls::Updated`]).
pub type Updated<K> = <<K as Verbs>::Calls as Calls<K>>::Updated;

/// An API client handle as the driver calls it: one kind's collection, by key.
pub trait Handle: 'static {
    type Remote: Send + Sync + Candidate;
    type Create: serde::Serialize + Send + Sync;
    type Posted: Send + Sync;
    type Update: Send + Sync;
    type Updated: Send + Sync;
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
    /// The name `request` creates the object with.
    fn sent_name(request: &Self::Create) -> &str;
    /// The key `remote` is read by.
    fn key(remote: &Self::Remote) -> String;
    /// The key an update of `remote` addresses (its UUID).
    fn id(remote: &Self::Remote) -> &str;
    /// The workspace `remote` lives in.
    fn workspace(remote: &Self::Remote) -> Option<&str>;
    /// Every object of the organisation's collection, as complete as the API lists it.
    fn listing(
        client: &Client,
    ) -> impl Future<Output = Result<Listing<Self::Remote>, ApiError>> + Send;
    /// False for an object of a workspace in the collection's list (never the organisation's).
    fn of_organisation(remote: &Self::Remote) -> bool;
}

/// What a kind whose calls are its handle's ([`Through`]) supplies: its request bodies, how a
/// read differs from them, and what a delete needs first.
pub trait Bodies<H: Handle>: Verbs {
    /// [`Calls::compare`].
    fn compare(
        &self,
        desired: &Self::Desired,
        remote: &H::Remote,
        status: &Self::Status,
    ) -> Comparison;
    /// The body a create of `desired` sends. The name in it is the spec's alone: a lookup after
    /// a lost answer takes it from the body of no inputs when the intent recorded no attempt.
    fn create_request(&self, desired: &Self::Desired) -> H::Create;
    /// The body an update to `desired` sends.
    fn update_request(&self, desired: &Self::Desired) -> H::Update;
    /// Before a delete: what a refusal may echo is concealed (the Secret values this resource
    /// sends, read again: an operator restarted since its last write does not remember them);
    /// the tenant the delete names.
    fn before_remote_delete(
        &self,
        _cx: &Cx<'_, Self>,
    ) -> impl Future<Output = Option<String>> + Send {
        async { None }
    }
}

/// The calls of a kind, made through its client handle `H` ([`Bodies`]).
pub struct Through<H>(PhantomData<fn() -> H>);

impl<K: Bodies<H, Desired: Default>, H: Handle> Calls<K> for Through<H> {
    type Remote = H::Remote;
    type Found = H::Remote;
    type Posted = H::Posted;
    type Updated = H::Updated;
    fn key(remote: &H::Remote) -> String {
        H::key(remote)
    }
    fn found_key(found: &H::Remote) -> String {
        H::id(found).to_string()
    }
    fn workspace(remote: &H::Remote) -> Option<&str> {
        H::workspace(remote)
    }
    async fn observe(
        _kind: &K,
        client: &Client,
        key: &str,
        _status: &K::Status,
    ) -> Result<Option<H::Remote>, ApiError> {
        H::get(client, key).await.map(Some)
    }
    fn sent(kind: &K, cx: &Cx<'_, K>, desired: &K::Desired) -> CreateAttempt {
        let request = kind.create_request(desired);
        cx.create_attempt(Some(H::sent_name(&request).into()), None, &request)
    }
    async fn create(
        kind: &K,
        client: &Client,
        desired: &K::Desired,
    ) -> Result<H::Posted, ApiError> {
        H::create(client, &kind.create_request(desired)).await
    }
    fn compare(
        kind: &K,
        desired: &K::Desired,
        remote: &H::Remote,
        status: &K::Status,
    ) -> Comparison {
        kind.compare(desired, remote, status)
    }
    async fn update(
        kind: &K,
        client: &Client,
        desired: &K::Desired,
        remote: &H::Remote,
    ) -> Result<H::Updated, ApiError> {
        H::update(client, H::id(remote), &kind.update_request(desired)).await
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
    /// The organisation's object with the name the create sent (as its intent recorded it; for
    /// an intent recorded with no attempt, by a release before attempts were recorded, the name
    /// a create sends now), and the slug when the spec names one, created within its window,
    /// claimed by no other resource, in a complete listing, and taken only under the adoption
    /// grant ([`by_slug_or_name`]).
    async fn find_created(
        kind: &K,
        cx: &Cx<'_, K>,
        status: &K::Status,
    ) -> Result<Lookup<H::Remote>, Halt> {
        let listing = cx
            .read(format!("list {}s", K::WHAT), |client| H::listing(client))
            .await?;
        let request = kind.create_request(&K::Desired::default());
        let identity = (kind.named_remote(), H::sent_name(&request));
        by_slug_or_name(cx, status, listing, identity, K::WHAT, H::of_organisation).await
    }
}

/// The calls of a kind that writes them out ([`OwnCalls`]).
pub struct Own;

/// What [`OwnCalls::observe`] answers: the remote object, `None` where it is gone.
pub type Read<K> = Result<Option<<K as OwnCalls>::Remote>, ApiError>;
/// What [`OwnCalls::find_created`] answers: what an earlier create made, if anything.
pub type Recovered<K> = Result<Lookup<<K as OwnCalls>::Found>, Halt>;

/// What [`OwnCalls::create`] answers.
pub type Post<K> = Result<<K as OwnCalls>::Posted, ApiError>;
/// What [`OwnCalls::update`] answers.
pub type Put<K> = Result<<K as OwnCalls>::Updated, ApiError>;

/// [`Calls`] written out by the kind, with the same meaning.
pub trait OwnCalls: Verbs {
    /// [`Calls::Remote`].
    type Remote: RemoteKey + Send + Sync;
    /// [`Calls::Found`].
    type Found: RemoteKey + Send + Sync;
    /// [`Calls::Posted`].
    type Posted: Send + Sync;
    /// [`Calls::Updated`].
    type Updated: Send + Sync;
    /// [`Calls::observe`].
    fn observe(
        &self,
        client: &Client,
        key: &str,
        status: &Self::Status,
    ) -> impl Future<Output = Read<Self>> + Send;
    /// [`Calls::sent`].
    fn sent(&self, cx: &Cx<'_, Self>, desired: &Self::Desired) -> CreateAttempt;
    /// [`Calls::create`].
    fn create(
        &self,
        client: &Client,
        desired: &Self::Desired,
    ) -> impl Future<Output = Post<Self>> + Send;
    /// [`Calls::compare`].
    fn compare(
        &self,
        desired: &Self::Desired,
        remote: &Self::Remote,
        status: &Self::Status,
    ) -> Comparison;
    /// [`Calls::update`].
    fn update(
        &self,
        client: &Client,
        desired: &Self::Desired,
        remote: &Self::Remote,
    ) -> impl Future<Output = Put<Self>> + Send;
    /// [`Calls::delete`].
    fn delete(&self, at: Deleting<'_, Self>) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// [`Calls::find_created`].
    fn find_created(
        &self,
        cx: &Cx<'_, Self>,
        status: &Self::Status,
    ) -> impl Future<Output = Recovered<Self>> + Send;
}

/// What the driver reads of a remote object, or of a create lookup's candidate, of a kind on
/// [`OwnCalls`]: [`Calls::key`] (a candidate's: [`Calls::found_key`]) and [`Calls::workspace`].
pub trait RemoteKey {
    fn key(&self) -> String;
    /// The key of a create lookup's candidate: by default its key.
    fn found_key(&self) -> String {
        self.key()
    }
    /// By default none (an organisation's object).
    fn workspace(&self) -> Option<&str> {
        None
    }
}

/// The key an object is addressed by: `preferred` (its slug, say), else `otherwise` when the
/// API gave no `preferred`.
pub fn key_or(preferred: &str, otherwise: &str) -> String {
    match preferred.is_empty() {
        true => otherwise.to_string(),
        false => preferred.to_string(),
    }
}

/// [`RemoteKey`] of API objects read by the field `$key` (`slug else id`: by their slug, by
/// their id while they have none; `in workspace`: living in their `workspace_id`).
macro_rules! read_by {
    (slug else id: $($remote:ty),+ ; in workspace) => {$(
        impl RemoteKey for $remote {
            fn key(&self) -> String {
                key_or(&self.slug, &self.id)
            }
            fn workspace(&self) -> Option<&str> {
                self.workspace_id.as_deref()
            }
        }
    )+};
    ($key:ident: $($remote:ty),+ ; in workspace) => {$(
        impl RemoteKey for $remote {
            fn key(&self) -> String {
                self.$key.clone()
            }
            fn workspace(&self) -> Option<&str> {
                self.workspace_id.as_deref()
            }
        }
    )+};
    ($key:ident: $($remote:ty),+) => {$(
        impl RemoteKey for $remote {
            fn key(&self) -> String {
                self.$key.clone()
            }
        }
    )+};
}

read_by!(id: api::ApiKey, api::McpServer, api::RateLimitsPolicy, api::UsageLimitsPolicy; in workspace);
read_by!(id: api::Deployment, api::DeploymentSummary, api::Workspace);
read_by!(slug: api::ConfigDetail; in workspace);
read_by!(slug: api::ConfigSummary, api::GuardrailSummary);
read_by!(slug else id: api::GuardrailDetails; in workspace);

/// What [`OwnCalls::delete`] is given: the remote object's `key`, the `client` for the call, the
/// status so far, and `cx` for what else the call needs.
pub struct Deleting<'a, K: Verbs> {
    pub cx: &'a Cx<'a, K>,
    pub client: &'a Client,
    pub key: &'a str,
    pub status: &'a K::Status,
}

impl<K: OwnCalls> Calls<K> for Own {
    type Remote = K::Remote;
    type Found = K::Found;
    type Posted = K::Posted;
    type Updated = K::Updated;
    fn key(remote: &K::Remote) -> String {
        remote.key()
    }
    fn found_key(found: &K::Found) -> String {
        found.found_key()
    }
    fn workspace(remote: &K::Remote) -> Option<&str> {
        remote.workspace()
    }
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
    fn compare(
        kind: &K,
        desired: &K::Desired,
        remote: &K::Remote,
        status: &K::Status,
    ) -> Comparison {
        kind.compare(desired, remote, status)
    }
    fn update(
        kind: &K,
        client: &Client,
        desired: &K::Desired,
        remote: &K::Remote,
    ) -> impl Future<Output = Result<K::Updated, ApiError>> + Send {
        kind.update(client, desired, remote)
    }
    async fn delete(
        kind: &K,
        cx: &Cx<'_, K>,
        client: &Client,
        key: &str,
        status: &K::Status,
    ) -> Result<(), ApiError> {
        let at = Deleting {
            cx,
            client,
            key,
            status,
        };
        kind.delete(at).await
    }
    fn find_created(
        kind: &K,
        cx: &Cx<'_, K>,
        status: &K::Status,
    ) -> impl Future<Output = Result<Lookup<K::Found>, Halt>> + Send {
        kind.find_created(cx, status)
    }
}

/// [`Handle`] of a client handle whose calls are `client.$of()`'s, keyed by slug, else UUID:
/// the remote types, how a delete names the tenant, and the workspace a remote object is in.
macro_rules! handle {
    ($handle:ident = $of:ident: $remote:ident, $create:ident -> $posted:ident, $update:ident;
     delete($c:ident, $k:ident, $t:ident) $delete:expr; workspace($r:ident) $workspace:expr;
     listing($lc:ident) $listing:expr; of_organisation($o:ident) $of_organisation:expr) => {
        impl Handle for $handle<'static> {
            type Remote = api::$remote;
            type Create = api::$create;
            type Posted = api::$posted;
            type Update = api::$update;
            type Updated = ();
            async fn get(client: &Client, key: &str) -> Result<Self::Remote, ApiError> {
                client.$of().get(key).await
            }
            async fn create(client: &Client, req: &Self::Create) -> Result<Self::Posted, ApiError> {
                client.$of().create(req).await
            }
            async fn update(
                client: &Client,
                key: &str,
                req: &Self::Update,
            ) -> Result<(), ApiError> {
                client.$of().update(key, req).await
            }
            async fn delete($c: &Client, $k: &str, $t: Option<&str>) -> Result<(), ApiError> {
                $delete.await
            }
            fn sent_name(request: &Self::Create) -> &str {
                &request.name
            }
            fn key(remote: &Self::Remote) -> String {
                key_or(&remote.slug, &remote.id)
            }
            fn id(remote: &Self::Remote) -> &str {
                &remote.id
            }
            fn workspace($r: &Self::Remote) -> Option<&str> {
                $workspace
            }
            async fn listing($lc: &Client) -> Result<Listing<Self::Remote>, ApiError> {
                $listing.await
            }
            fn of_organisation($o: &Self::Remote) -> bool {
                $of_organisation
            }
        }
    };
}

handle! {
    SecretReferences = secret_references: SecretReference,
        CreateSecretReferenceRequest -> Created, UpdateSecretReferenceRequest;
    delete(client, key, _tenant) client.secret_references().delete(key);
    workspace(_remote) None;
    listing(client) client.secret_references().listing(&SecretReferencesListQuery::default(), Reading::Proof);
    of_organisation(_remote) true
}
handle! {
    McpIntegrations = mcp_integrations: McpIntegration,
        CreateMcpIntegrationRequest -> Created, UpdateMcpIntegrationRequest;
    delete(client, key, _tenant) client.mcp_integrations().delete(key);
    workspace(_remote) None;
    listing(client) client.mcp_integrations().listing();
    of_organisation(remote) remote.workspace_id.is_none()
}
handle! {
    Integrations = integrations: Integration,
        CreateIntegrationRequest -> IntegrationCreated, UpdateIntegrationRequest;
    delete(client, key, tenant) client.integrations().delete(key, tenant);
    workspace(remote) remote.workspace_id.as_deref();
    listing(client) client.integrations().listing(&IntegrationsListQuery {
        integration_type: Some("organisation".into()),
        ..Default::default()
    }, Reading::Proof);
    of_organisation(remote) remote.workspace_id.is_none()
}
