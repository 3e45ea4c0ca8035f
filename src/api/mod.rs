//! Wire models and HTTP client for the management API and the gateway. No Kubernetes here.
//!
//! ```no_run
//! # async fn demo() -> Result<(), aigw::api::ApiError> {
//! use std::sync::Arc;
//! use aigw::api::{Client, ClientConfig, StaticToken, UpdateConfigRequest};
//!
//! let token = Arc::new(StaticToken::from_file("/var/run/secrets/aigw/token")?);
//! let client = Client::new(ClientConfig::new("https://api.example", "https://gw.example/v1", token))?;
//! let req = UpdateConfigRequest { name: Some("prod".into()), ..Default::default() };
//! let updated = client.configs().update("pc-prod-123", &req).await?;
//! # let _ = updated; Ok(()) }
//! ```

mod backoff;
mod client;
pub mod concealment;
mod config;
mod error;
mod handles;
pub mod models;
mod oauth;
mod routes;
mod secret;
pub mod secret_fields;
mod token;

pub use client::{Client, REPLICA_HEADER, WriteGuard, identify_replica};
pub use config::{ClientConfig, DEFAULT_TIMEOUT, RequestObserver, RetryPolicy};
pub use error::{ApiError, HttpError};
pub use handles::{
    AnswerBody, Archives, DeletedByKey, Listed, McpCapable, PolicyKind, ReadByKey, Reading,
    Receipt, Remote, Written,
};
pub use handles::{
    ApiKeys, Configs, Deployments, Endpoint, Guardrails, GuardrailsOn, Integrations, Providers,
    RateLimits, Responses, Telemetry, UsageLimits, VectorStoreFiles,
};
pub use handles::{
    GuardrailMcpServers, IamScopes, McpIntegrations, McpServers, SecretReferences, Workspaces,
};
pub use models::*;
pub use oauth::OAuth2ClientCredentials;
pub use secret::SecretString;
pub use token::{FileToken, IN_FLIGHT, StaticToken, TokenFuture, TokenSource};
