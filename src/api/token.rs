//! Where the bearer token comes from.

use std::fmt::Debug;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;

use super::error::ApiError;
use super::secret::SecretString;

/// The future a [`TokenSource`] returns.
pub type TokenFuture<'a> =
    Pin<Box<dyn Future<Output = Result<SecretString, ApiError>> + Send + 'a>>;

/// Supplies the bearer token for every request. An OAuth2 source caches its token and refreshes it
/// when [`TokenSource::invalidate`] is called; the client calls it after a 401 and retries once.
pub trait TokenSource: Send + Sync + Debug {
    fn token(&self) -> TokenFuture<'_>;

    fn invalidate(&self) {}
}

/// A fixed token, given directly or read once from a file (a mounted Secret).
#[derive(Debug, Clone)]
pub struct StaticToken(SecretString);

impl StaticToken {
    pub fn new(token: impl Into<SecretString>) -> Self {
        Self(token.into())
    }

    /// Reads the token from `path`, trimming surrounding whitespace and the trailing newline.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ApiError> {
        let path = path.as_ref();
        let raw = std::fs::read_to_string(path).map_err(|error| ApiError::TokenFile {
            path: PathBuf::from(path),
            error,
        })?;
        let token = raw.trim();
        if token.is_empty() {
            return Err(ApiError::Config(format!(
                "token file {} is empty",
                path.display()
            )));
        }
        Ok(Self(SecretString::new(token)))
    }
}

impl TokenSource for StaticToken {
    fn token(&self) -> TokenFuture<'_> {
        let token = self.0.clone();
        Box::pin(async move { Ok(token) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn from_file_trims_the_newline() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "abc123\n").unwrap();
        let source = StaticToken::from_file(&path).unwrap();
        assert_eq!(source.token().await.unwrap().expose(), "abc123");
        assert_eq!(format!("{source:?}"), "StaticToken(***)");
    }

    #[test]
    fn empty_file_is_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "\n").unwrap();
        assert!(StaticToken::from_file(&path).is_err());
        assert!(StaticToken::from_file(dir.path().join("missing")).is_err());
    }
}
