//! The calls every collection of the management API makes alike, written once on
//! [`Endpoint`]: a kind says where its objects live ([`Remote`]) and which of the usual calls
//! it takes as they are ([`ReadByKey`], [`Listed`], [`Written`], [`DeletedByKey`],
//! [`Archives`]); a call that differs stays in the kind's own module.

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{Endpoint, Reading};
use crate::api::error::ApiError;
use crate::api::models::{ListQuery, Listing, PolicyStatus, Validate, enum_str};
use crate::api::routes::Verb;

/// A collection of the management API whose objects are addressed by one key (UUID or slug):
/// its routes, and which answers carry credentials.
pub trait Remote: DeserializeOwned {
    /// The collection route: list, create.
    const COLLECTION: &'static str;
    /// The item route: get, update, delete. Its one placeholder names the key (an empty key is
    /// refused by that name).
    const ITEM: &'static str;
    /// A read's answer carries credentials: it never reaches an error.
    const SECRET_READS: bool = false;
    /// A create's or update's answer carries credentials (their bodies may echo them).
    const SECRET_WRITES: bool = false;

    /// What a read asks for besides the key.
    fn read_query() -> Vec<(&'static str, String)> {
        Vec::new()
    }
}

/// A [`Remote`] listed page by page (see `paged`), filtered by `Query`: its [`Endpoint`] has
/// `list` and `listing`.
pub trait Listed: Remote {
    type Query: ListQuery;

    /// The UUID that tells rows apart across pages.
    fn id(&self) -> &str;
}

/// A [`Remote`] created by POSTing a `Create` to the collection and updated by PUTting an
/// `Update` to the item: its [`Endpoint`] has `create` and `update`.
pub trait Written: Remote {
    type Create: Validate + Serialize;
    /// The create's answer.
    type Created: DeserializeOwned;
    type Update: Validate + Serialize;
    /// The update's answer: `()` where it says nothing worth reading.
    type Updated: AnswerBody;
}

/// A [`Remote`] read by its key alone: its [`Endpoint`] has `get`.
pub trait ReadByKey: Remote {}

/// A [`Remote`] deleted by its key alone: its [`Endpoint`] has `delete`.
pub trait DeletedByKey: Remote {}

/// A [`Remote`] whose delete archives: an archived object reads as not found unless asked for
/// by status, with `get_with_status`.
pub trait Archives: Remote {}

/// How a success answer's body is read: `()` ignores it (`{}` or empty), a [`Receipt`]
/// decodes it.
pub trait AnswerBody: Sized {
    fn decode(body: serde_json::Value) -> serde_json::Result<Self>;
}

/// An answer decoded as it is.
pub trait Receipt: DeserializeOwned {}

impl AnswerBody for () {
    fn decode(_: serde_json::Value) -> serde_json::Result<Self> {
        Ok(())
    }
}

impl<T: Receipt> AnswerBody for T {
    fn decode(body: serde_json::Value) -> serde_json::Result<Self> {
        serde_json::from_value(body)
    }
}

impl<K: ReadByKey> Endpoint<'_, K> {
    /// The object `key` (UUID or slug) names.
    pub async fn get(&self, key: &str) -> Result<K, ApiError> {
        let call = super::on(Verb::Get, K::ITEM, key)?
            .query(K::read_query())
            .sensitive_if(K::SECRET_READS);
        self.client.json(call).await
    }
}

impl<K: Listed> Endpoint<'_, K> {
    /// Every row that matches `query`, all pages.
    pub async fn list(&self, query: &K::Query) -> Result<Vec<K>, ApiError> {
        Ok(self.listing(query, Reading::Proof).await?.items)
    }

    /// Like [`Self::list`], saying whether the pages prove the whole list, read as `reading`
    /// says (see `paged`).
    pub async fn listing(
        &self,
        query: &K::Query,
        reading: Reading,
    ) -> Result<Listing<K>, ApiError> {
        let pairs = query.to_pairs();
        super::paged(self.client, K::COLLECTION, &[], pairs, K::id, reading).await
    }
}

impl<K: Written> Endpoint<'_, K> {
    /// Not retried when the answer is lost (`outcome_unknown()`): look the object up (by its
    /// slug) before creating it again.
    pub async fn create(&self, req: &K::Create) -> Result<K::Created, ApiError> {
        let call = super::post(K::COLLECTION, req)?.sensitive_if(K::SECRET_WRITES);
        self.client.json(call).await
    }

    /// Sends `req` to the object `key` names; what cannot change is the kind's to say.
    pub async fn update(&self, key: &str, req: &K::Update) -> Result<K::Updated, ApiError> {
        let call = super::send(Verb::Put, K::ITEM, key, req)?.sensitive_if(K::SECRET_WRITES);
        self.client.answer(call).await
    }
}

impl<K: DeletedByKey> Endpoint<'_, K> {
    /// Deletes (or archives, see [`Archives`]) the object `key` names.
    pub async fn delete(&self, key: &str) -> Result<(), ApiError> {
        let call = super::on(Verb::Delete, K::ITEM, key)?;
        self.client.empty(call).await
    }
}

impl<K: Archives> Endpoint<'_, K> {
    /// The object `key` names in `status`: an archived one too.
    pub async fn get_with_status(&self, key: &str, status: PolicyStatus) -> Result<K, ApiError> {
        let call = super::on(Verb::Get, K::ITEM, key)?.query(vec![("status", enum_str(&status))]);
        self.client.json(call).await
    }
}
