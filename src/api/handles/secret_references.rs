use crate::api::error::ApiError;
use crate::api::models::{
    CreateSecretReferenceRequest, Created, Listing, SecretReference, SecretReferencesListQuery,
    UpdateSecretReferenceRequest,
};
use crate::api::routes::{SECRET_REFERENCE, SECRET_REFERENCES, Verb};

/// The organisation's secret references (`/ai_gw/admin/v2/secret-references`), by UUID or slug.
/// `auth_config` is write-only: reads return it masked.
pub type SecretReferences<'c> = super::Endpoint<'c, SecretReference>;

impl SecretReferences<'_> {
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
        let call = super::on(Verb::Get, SECRET_REFERENCE, "secretReferenceId", key)?;
        self.client.json(call).await
    }

    /// Not retried when the answer is lost: look it up by slug first.
    pub async fn create(&self, req: &CreateSecretReferenceRequest) -> Result<Created, ApiError> {
        let call = super::post(SECRET_REFERENCES, req)?.sensitive();
        self.client.json(call).await
    }

    /// `auth_config` is merged into the stored one; `manager_type` cannot change.
    pub async fn update(
        &self,
        key: &str,
        req: &UpdateSecretReferenceRequest,
    ) -> Result<(), ApiError> {
        let call =
            super::send(Verb::Put, SECRET_REFERENCE, "secretReferenceId", key, req)?.sensitive();
        self.client.empty(call).await
    }

    /// Refused (400) while an integration or MCP integration maps a field to it.
    pub async fn delete(&self, key: &str) -> Result<(), ApiError> {
        let call = super::on(Verb::Delete, SECRET_REFERENCE, "secretReferenceId", key)?;
        self.client.empty(call).await
    }
}
