//! How the emulator authenticates callers and how fast it answers (`aigw emulator` flags).

use std::time::Duration;

/// How the emulator authenticates callers and how fast it answers.
#[derive(Clone, Debug)]
pub struct EmulatorOptions {
    /// The static bearer token every API request must carry (stays valid alongside OAuth tokens).
    pub token: String,
    /// A fixed delay added before every API request.
    pub latency: Option<Duration>,
    /// Enables `POST /oauth2/access_token` (client credentials grant).
    pub oauth: Option<OAuthOptions>,
    /// Caps every API-key rotation's transition: the old key stops working after the smaller of
    /// the requested period (at least 30 minutes, as the API demands) and this, so tests can see
    /// a transition end in seconds. `key_transition_expires_at` reports the capped expiry.
    pub min_key_transition: Option<Duration>,
}

impl EmulatorOptions {
    pub fn new(token: impl Into<String>) -> Self {
        Self {
            token: token.into(),
            latency: None,
            oauth: None,
            min_key_transition: None,
        }
    }
}

/// The one OAuth2 client the token endpoint accepts, and how long its tokens live.
#[derive(Clone, Debug)]
pub struct OAuthOptions {
    pub client_id: String,
    pub client_secret: String,
    pub token_ttl: Duration,
}
