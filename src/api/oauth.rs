//! OAuth2 client-credentials tokens (RFC 6749 §4.4), as the management API expects them: HTTP
//! Basic client authentication, `grant_type=client_credentials&scope=…`, a bearer token that
//! lives about 15 minutes.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::client::http_client;
use super::error::{ApiError, HttpError};
use super::secret::SecretString;
use super::token::{TokenFuture, TokenSource};

const ENDPOINT: &str = "/oauth2/access_token";

/// Fetches tokens with the client-credentials grant, caches them, and fetches a new one after
/// three quarters of its lifetime, or at once after [`TokenSource::invalidate`] (a 401).
pub struct OAuth2ClientCredentials {
    token_url: String,
    client_id: String,
    client_secret: SecretString,
    scope: Option<String>,
    http: reqwest::Client,
    cached: Mutex<Option<Cached>>,
    /// The tokens fetched before the cached one ([`TokenSource::handed_out`]).
    replaced: super::token::Replaced,
    /// One fetch at a time: concurrent callers wait for it instead of fetching too.
    fetching: tokio::sync::Mutex<()>,
}

#[derive(Clone)]
struct Cached {
    token: SecretString,
    refresh_at: Instant,
}

#[derive(Deserialize)]
struct TokenResponse {
    access_token: SecretString,
    #[serde(default)]
    expires_in: Option<u64>,
}

impl std::fmt::Debug for OAuth2ClientCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuth2ClientCredentials")
            .field("token_url", &self.token_url)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl OAuth2ClientCredentials {
    pub fn new(
        token_url: impl Into<String>,
        client_id: impl Into<String>,
        client_secret: impl Into<SecretString>,
        scope: Option<String>,
        timeout: Duration,
    ) -> Result<Self, ApiError> {
        let http = http_client(reqwest::Client::builder().timeout(timeout))?;
        Ok(Self {
            token_url: token_url.into(),
            client_id: client_id.into(),
            client_secret: client_secret.into(),
            scope,
            http,
            cached: Mutex::new(None),
            replaced: Default::default(),
            fetching: tokio::sync::Mutex::new(()),
        })
    }

    /// `next` cached instead of the token cached now, which is kept among the replaced.
    fn replace(&self, next: Option<Cached>) {
        let mut cached = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(previous) = std::mem::replace(&mut *cached, next) {
            self.replaced.push(previous.token);
        }
    }

    fn fresh(&self) -> Option<SecretString> {
        let cached = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        cached
            .as_ref()
            .filter(|c| Instant::now() < c.refresh_at)
            .map(|c| c.token.clone())
    }

    async fn fetch(&self) -> Result<SecretString, ApiError> {
        let mut form = vec![("grant_type", "client_credentials")];
        if let Some(scope) = &self.scope {
            form.push(("scope", scope.as_str()));
        }
        let sent = Instant::now();
        let response = self
            .http
            .post(&self.token_url)
            .basic_auth(&self.client_id, Some(self.client_secret.expose()))
            .form(&form)
            .send()
            .await
            .map_err(|e| {
                let timed_out = e.is_timeout();
                let message = format!("token request failed: {}", e.without_url());
                if timed_out {
                    ApiError::Timeout {
                        method: "POST",
                        endpoint: ENDPOINT,
                        timeout: sent.elapsed(),
                        outcome_unknown: false,
                    }
                } else {
                    ApiError::Network {
                        method: "POST",
                        endpoint: ENDPOINT,
                        message,
                        outcome_unknown: false,
                    }
                }
            })?;
        let status = response.status().as_u16();
        if !response.status().is_success() {
            // The body of a token endpoint error is not kept: some echo the credentials.
            return Err(ApiError::Http(Box::new(HttpError {
                method: "POST",
                endpoint: ENDPOINT,
                status,
                body: None,
                raw: String::new(),
                retry_after: None,
                opa_denied: false,
            })));
        }
        let body: TokenResponse = response.json().await.map_err(|e| ApiError::Decode {
            method: "POST",
            endpoint: ENDPOINT,
            status,
            message: e.without_url().to_string(),
            body: None,
        })?;
        if body.access_token.is_empty() {
            return Err(ApiError::Token(
                "the token endpoint returned an empty access_token".into(),
            ));
        }
        let lifetime = Duration::from_secs(body.expires_in.unwrap_or(900));
        let fetched = Cached {
            token: body.access_token.clone(),
            refresh_at: sent + lifetime.mul_f64(0.75),
        };
        self.replace(Some(fetched));
        tracing::debug!(lifetime = ?lifetime, "fetched an OAuth2 access token");
        Ok(body.access_token)
    }
}

impl TokenSource for OAuth2ClientCredentials {
    fn token(&self) -> TokenFuture<'_> {
        Box::pin(async move {
            if let Some(token) = self.fresh() {
                return Ok(token);
            }
            let _one_fetch = self.fetching.lock().await;
            // Someone else may have fetched while we waited.
            if let Some(token) = self.fresh() {
                return Ok(token);
            }
            self.fetch().await
        })
    }

    fn invalidate(&self) {
        self.replace(None);
    }

    fn handed_out(&self) -> Vec<SecretString> {
        // `cached`, then `replaced`, as `replace` takes them.
        let cached = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        let mut tokens = self.replaced.recent();
        tokens.extend(cached.as_ref().map(|c| c.token.clone()));
        tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emulator::{EmulatorOptions, OAuthOptions};

    async fn emulator(ttl: Duration) -> crate::emulator::Running {
        let mut opts = EmulatorOptions::new("static-token");
        opts.oauth = Some(OAuthOptions {
            client_id: "client-1".into(),
            client_secret: "s3cret-value".into(),
            token_ttl: ttl,
        });
        crate::emulator::spawn(opts).await.unwrap()
    }

    #[tokio::test]
    async fn caches_refreshes_and_invalidates() {
        let emu = emulator(Duration::from_secs(2)).await;
        let url = format!("{}/oauth2/access_token", emu.management_url());
        let source = OAuth2ClientCredentials::new(
            url,
            "client-1",
            "s3cret-value",
            Some("tsg_id:1".into()),
            Duration::from_secs(5),
        )
        .unwrap();
        let first = source.token().await.unwrap();
        assert_eq!(
            source.token().await.unwrap(),
            first,
            "cached within its lifetime"
        );
        tokio::time::sleep(Duration::from_millis(1600)).await;
        let second = source.token().await.unwrap();
        assert_ne!(
            second, first,
            "refreshed after three quarters of its lifetime"
        );
        source.invalidate();
        let third = source.token().await.unwrap();
        assert_ne!(third, second, "fetched again after invalidate");
        assert_eq!(
            source.handed_out(),
            vec![first, second, third],
            "every token fetched is known to whoever conceals, the invalidated ones too"
        );
        assert!(!format!("{source:?}").contains("s3cret-value"));
    }

    #[tokio::test]
    async fn wrong_client_secret_is_a_permanent_401() {
        let emu = emulator(Duration::from_secs(60)).await;
        let url = format!("{}/oauth2/access_token", emu.management_url());
        let source =
            OAuth2ClientCredentials::new(url, "client-1", "wrong", None, Duration::from_secs(5))
                .unwrap();
        let err = source.token().await.unwrap_err();
        assert_eq!(err.status(), Some(401));
        assert!(!err.is_transient());
        assert!(!err.to_string().contains("wrong"));
    }
}
