//! Where the bearer token comes from.

use std::fmt::Debug;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::{Duration, Instant};

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

    /// The tokens this source has handed out (the last few: a token replaced after a 401 or a
    /// file change may still be quoted by an answer to a request that carried it), the latest
    /// last. An API's error may quote one, so whoever prints messages conceals them.
    fn handed_out(&self) -> Vec<SecretString>;
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

    fn handed_out(&self) -> Vec<SecretString> {
        vec![self.0.clone()]
    }
}

/// A token kept in a file that may change in place (a mounted Secret, updated by the kubelet
/// through a symlink swap): read again whenever the file's modification time or size changes,
/// so a rotated token is used without a restart. A file that became unreadable or empty keeps
/// the last good token and says so in the log.
#[derive(Debug)]
pub struct FileToken {
    path: PathBuf,
    current: std::sync::Mutex<(SecretString, Option<(std::time::SystemTime, u64)>)>,
    /// The tokens the file held before the current one.
    replaced: Replaced,
}

/// How long a replaced token may still ride a request (its timeout and retries) whose answer
/// quotes it: [`TokenSource::handed_out`] answers with it that long.
pub const IN_FLIGHT: Duration = Duration::from_secs(300);

/// How many replaced tokens a source remembers at most (within [`IN_FLIGHT`]).
const REPLACED_KEPT: usize = 16;

/// The tokens a source replaced, each with when; at most [`REPLACED_KEPT`], none older than
/// [`IN_FLIGHT`].
#[derive(Debug, Default)]
pub(super) struct Replaced(std::sync::Mutex<std::collections::VecDeque<(SecretString, Instant)>>);

impl Replaced {
    pub(super) fn push(&self, token: SecretString) {
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        kept.retain(|(_, at)| at.elapsed() < IN_FLIGHT);
        if kept.len() == REPLACED_KEPT {
            kept.pop_front();
        }
        kept.push_back((token, Instant::now()));
    }

    /// The tokens replaced less than [`IN_FLIGHT`] ago.
    pub(super) fn recent(&self) -> Vec<SecretString> {
        let kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let recent = kept.iter().filter(|(_, at)| at.elapsed() < IN_FLIGHT);
        recent.map(|(token, _)| token.clone()).collect()
    }
}

impl FileToken {
    /// Reads the token now: a missing or empty file is an error at startup.
    pub fn new(path: impl AsRef<Path>) -> Result<Self, ApiError> {
        let path = path.as_ref().to_path_buf();
        let token = StaticToken::from_file(&path)?.0;
        Ok(Self {
            current: std::sync::Mutex::new((token, stamp(&path))),
            replaced: Replaced::default(),
            path,
        })
    }

    fn refresh(&self) -> SecretString {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        let now = stamp(&self.path);
        if now.is_some() && now != current.1 {
            match StaticToken::from_file(&self.path) {
                Ok(token) => {
                    tracing::info!(path = %self.path.display(), "token file changed; using the new token");
                    let (replaced, _) = std::mem::replace(&mut *current, (token.0, now));
                    self.replaced.push(replaced);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "token file changed but cannot be used; keeping the last token")
                }
            }
        }
        current.0.clone()
    }
}

/// The modification time and size of `path` (following symlinks), when it can be read.
fn stamp(path: &Path) -> Option<(std::time::SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

impl TokenSource for FileToken {
    fn token(&self) -> TokenFuture<'_> {
        Box::pin(async move { Ok(self.refresh()) })
    }

    fn handed_out(&self) -> Vec<SecretString> {
        // `current`, then `replaced`, as `refresh` takes them: a token being replaced is in one
        // of the two.
        let current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        let mut tokens = self.replaced.recent();
        tokens.push(current.0.clone());
        tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file `token` holding `text`, in a directory that lives as long as the guard.
    fn token_file(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    #[tokio::test]
    async fn from_file_trims_the_newline() {
        let (_dir, path) = token_file("abc123\n");
        let source = StaticToken::from_file(&path).unwrap();
        assert_eq!(source.token().await.unwrap().expose(), "abc123");
        assert_eq!(format!("{source:?}"), "StaticToken(***)");
    }

    #[tokio::test]
    async fn a_file_token_follows_changes_in_place() {
        let (_dir, path) = token_file("first\n");
        let source = FileToken::new(&path).unwrap();
        assert_eq!(source.token().await.unwrap().expose(), "first");
        // A kubelet update swaps the file; a different size is enough to notice even within
        // the same mtime tick.
        std::fs::write(&path, "second-token\n").unwrap();
        assert_eq!(source.token().await.unwrap().expose(), "second-token");
        std::fs::write(&path, "").unwrap();
        assert_eq!(
            source.token().await.unwrap().expose(),
            "second-token",
            "an emptied file keeps the last good token"
        );
    }

    #[test]
    fn empty_file_is_rejected() {
        let (dir, path) = token_file("\n");
        assert!(StaticToken::from_file(&path).is_err());
        assert!(StaticToken::from_file(dir.path().join("missing")).is_err());
    }
}
