use crate::api::client::{Call, Client};
use crate::api::error::ApiError;
use crate::api::models::{
    CreateSecretReferenceRequest, Created, Listing, SecretReference, SecretReferencesListQuery,
    UpdateSecretReferenceRequest, Validate,
};
use crate::api::routes::{Route, SECRET_REFERENCE, SECRET_REFERENCES, Verb};

/// The organisation's secret references (`/ai_gw/admin/v2/secret-references`), by UUID or slug.
/// `auth_config` is write-only: reads return it masked.
#[derive(Debug, Clone, Copy)]
pub struct SecretReferences<'c> {
    client: &'c Client,
}

impl<'c> SecretReferences<'c> {
    pub(crate) fn new(client: &'c Client) -> Self {
        Self { client }
    }

    pub async fn list(
        &self,
        query: &SecretReferencesListQuery,
    ) -> Result<Vec<SecretReference>, ApiError> {
        Ok(self.listing(query).await?.items)
    }

    /// Every page, saying whether they prove the whole list.
    pub async fn listing(
        &self,
        query: &SecretReferencesListQuery,
    ) -> Result<Listing<SecretReference>, ApiError> {
        super::paged(
            self.client,
            SECRET_REFERENCES,
            &[],
            query.to_pairs(),
            |r: &SecretReference| r.id.as_str(),
        )
        .await
    }

    /// The detail (`auth_config` masked; no `allowed_workspaces`).
    pub async fn get(&self, key: &str) -> Result<SecretReference, ApiError> {
        super::require("secretReferenceId", key)?;
        let call = Call::new(Route::mgmt(Verb::Get, SECRET_REFERENCE, &[key]));
        self.client.json(call).await
    }

    /// Not retried when the answer is lost: look it up by slug first.
    pub async fn create(&self, req: &CreateSecretReferenceRequest) -> Result<Created, ApiError> {
        req.validate()?;
        let call = Call::new(Route::mgmt(Verb::Post, SECRET_REFERENCES, &[]))
            .json(req)?
            .sensitive();
        self.client.json(call).await
    }

    /// `auth_config` is merged into the stored one; `manager_type` cannot change.
    pub async fn update(
        &self,
        key: &str,
        req: &UpdateSecretReferenceRequest,
    ) -> Result<(), ApiError> {
        super::require("secretReferenceId", key)?;
        req.validate()?;
        let call = Call::new(Route::mgmt(Verb::Put, SECRET_REFERENCE, &[key]))
            .json(req)?
            .sensitive();
        self.client.empty(call).await
    }

    /// Refused (400) while an integration or MCP integration maps a field to it.
    pub async fn delete(&self, key: &str) -> Result<(), ApiError> {
        super::require("secretReferenceId", key)?;
        let call = Call::new(Route::mgmt(Verb::Delete, SECRET_REFERENCE, &[key]));
        self.client.empty(call).await
    }
}
