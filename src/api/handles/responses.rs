use crate::api::client::Call;
use crate::api::error::ApiError;
use crate::api::models::{Includable, Response};
use crate::api::routes::{RESPONSE, Route, Verb};

/// Stored model responses on the gateway (`{gateway_url}/responses`).
pub type Responses<'c> = super::Endpoint<'c, Response>;

impl Responses<'_> {
    /// `include` adds search results, input image URLs or computer-call screenshots.
    pub async fn get(&self, id: &str, include: &[Includable]) -> Result<Response, ApiError> {
        super::require(RESPONSE, &[id])?;
        let pairs = include
            .iter()
            .map(|i| ("include", i.as_str().to_owned()))
            .collect();
        let call = Call::new(Route::gateway(Verb::Get, RESPONSE, &[id])).query(pairs);
        self.client.json(call).await
    }
}
