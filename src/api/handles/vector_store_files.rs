use crate::api::client::Call;
use crate::api::error::ApiError;
use crate::api::models::VectorStoreFile;
use crate::api::routes::{Route, VECTOR_STORE_FILE, Verb};

/// Files of vector stores on the gateway (`{gateway_url}/vector_stores/{vs}/files`).
pub type VectorStoreFiles<'c> = super::Endpoint<'c, VectorStoreFile>;

impl VectorStoreFiles<'_> {
    pub async fn get(
        &self,
        vector_store_id: &str,
        file_id: &str,
    ) -> Result<VectorStoreFile, ApiError> {
        super::require(VECTOR_STORE_FILE, &[vector_store_id, file_id])?;
        let route = Route::gateway(Verb::Get, VECTOR_STORE_FILE, &[vector_store_id, file_id]);
        self.client.json(Call::new(route)).await
    }
}
