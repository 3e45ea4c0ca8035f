use super::Reading;
use crate::api::client::Call;
use crate::api::error::ApiError;
use crate::api::models::{
    ApiKey, ApiKeyCreated, ApiKeyKind, ApiKeyRotated, ApiKeysListQuery, CreateApiKeyRequest,
    ListQuery, Listing, RotateApiKeyRequest, UpdateApiKeyRequest, Validate,
};
use crate::api::routes::{
    Route, SERVICE_API_KEY, SERVICE_API_KEY_ROTATE, SERVICE_API_KEYS, USER_API_KEY,
    USER_API_KEY_ROTATE, USER_API_KEYS, Verb,
};

/// Service or user API keys (`/ai_gw/v2/api-keys/service`, `…/user`), of the kind the handle
/// holds. The key value is one-time: only [`ApiKeys::create`] and [`ApiKeys::rotate`] return it.
pub type ApiKeys<'c> = super::Endpoint<'c, ApiKey, ApiKeyKind>;

/// The collection, item and rotate routes of one kind.
struct KindRoutes {
    collection: &'static str,
    item: &'static str,
    rotate: &'static str,
}

impl ApiKeys<'_> {
    fn routes(&self) -> KindRoutes {
        match self.plane {
            ApiKeyKind::Service => KindRoutes {
                collection: SERVICE_API_KEYS,
                item: SERVICE_API_KEY,
                rotate: SERVICE_API_KEY_ROTATE,
            },
            ApiKeyKind::User => KindRoutes {
                collection: USER_API_KEYS,
                item: USER_API_KEY,
                rotate: USER_API_KEY_ROTATE,
            },
        }
    }

    /// Every key of this kind that matches, all pages (keys masked).
    pub async fn list(&self, query: &ApiKeysListQuery) -> Result<Vec<ApiKey>, ApiError> {
        Ok(self.listing(query, Reading::Proof).await?.items)
    }

    /// Like [`Self::list`], saying whether the pages prove the whole list, read as `reading`
    /// says.
    pub async fn listing(
        &self,
        query: &ApiKeysListQuery,
        reading: Reading,
    ) -> Result<Listing<ApiKey>, ApiError> {
        let collection = self.routes().collection;
        super::paged(
            self.client,
            collection,
            &[],
            query.to_pairs(),
            |k: &ApiKey| k.id.as_str(),
            reading,
        )
        .await
    }

    /// The key with its value masked.
    pub async fn get(&self, id: &str) -> Result<ApiKey, ApiError> {
        let call = super::on(Verb::Get, self.routes().item, id)?.sensitive();
        self.client.json(call).await
    }

    /// The answer holds the key's value, which no later read returns: store it before doing
    /// anything else. Not retried when the answer is lost (`outcome_unknown()`): the key may
    /// exist without anyone holding its value.
    pub async fn create(&self, req: &CreateApiKeyRequest) -> Result<ApiKeyCreated, ApiError> {
        req.validate_for(self.plane)?;
        let call = Call::new(Route::mgmt(Verb::Post, self.routes().collection, &[]))
            .json(req)?
            .sensitive();
        self.client.json(call).await
    }

    /// `type`, `workspace_id`, `user_id` and `organisation_id` cannot change; recreate the key.
    pub async fn update(&self, id: &str, req: &UpdateApiKeyRequest) -> Result<(), ApiError> {
        let call = super::send(Verb::Put, self.routes().item, id, req)?;
        self.client.empty(call).await
    }

    /// Deletes the key for good; every value of it stops working.
    pub async fn delete(&self, id: &str) -> Result<(), ApiError> {
        let call = super::on(Verb::Delete, self.routes().item, id)?;
        self.client.empty(call).await
    }

    /// Issues a new value (returned once) and keeps the old one working until
    /// `key_transition_expires_at`. Without a period no body is sent and the API applies its
    /// default. Not retried when the answer is lost (`outcome_unknown()`): a second rotation
    /// would replace a value nobody has seen.
    pub async fn rotate(
        &self,
        id: &str,
        req: &RotateApiKeyRequest,
    ) -> Result<ApiKeyRotated, ApiError> {
        let mut call = super::on(Verb::Post, self.routes().rotate, id)?.sensitive();
        req.validate()?;
        if req.key_transition_period_ms.is_some() {
            call = call.json(req)?;
        }
        self.client.json(call).await
    }
}
