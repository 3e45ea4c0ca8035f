//! Errors of the reconcile loop, each knowing whether time alone can fix it.

use std::time::Duration;

use crate::api::ApiError;

/// What stopped a reconcile. Messages are lowercase, say what failed, and never carry secrets:
/// the API's own message is included, the request body never is.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The management API refused or failed a call.
    #[error("failed to {action}: {source}")]
    Api {
        action: String,
        #[source]
        source: ApiError,
    },
    /// The Kubernetes API failed a read or write aigw needed.
    #[error("failed to {action}: {source}")]
    Kube {
        action: String,
        #[source]
        source: kube::Error,
    },
    /// The spec cannot be applied as written; only a spec change helps.
    #[error("invalid spec: {0}")]
    InvalidSpec(String),
    /// The referenced Connection is missing, unusable or does not allow this namespace.
    #[error("{0}")]
    Connection(String),
    /// The referenced Connection does not allow this object's namespace.
    #[error("{0}")]
    NotAllowed(String),
    /// State that aigw must not invent is missing (for example a lost one-time credential).
    #[error("{0}")]
    MissingState(String),
}

impl Error {
    pub fn api(action: impl Into<String>, source: ApiError) -> Self {
        Self::Api {
            action: action.into(),
            source,
        }
    }

    pub fn kube(action: impl Into<String>, source: kube::Error) -> Self {
        Self::Kube {
            action: action.into(),
            source,
        }
    }

    /// True when retrying later may succeed without a spec change.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Api { source, .. } => {
                source.is_transient() || matches!(source.status(), Some(401 | 409))
            }
            Self::Kube { source, .. } => match source {
                kube::Error::Api(status) => status.code >= 500 || matches!(status.code, 409 | 429),
                _ => true,
            },
            // A Connection or its Secret may appear later; keep checking, slowly.
            Self::Connection(_) => true,
            Self::InvalidSpec(_) | Self::MissingState(_) | Self::NotAllowed(_) => false,
        }
    }

    /// Short CamelCase category, used as condition reason and event reason.
    pub fn category(&self) -> &'static str {
        match self {
            Self::Api { source, .. } => source.category(),
            Self::Kube { .. } => "KubernetesApi",
            Self::InvalidSpec(_) => "InvalidSpec",
            Self::Connection(_) => "ConnectionUnavailable",
            Self::MissingState(_) => "MissingState",
            Self::NotAllowed(_) => "NamespaceNotAllowed",
        }
    }

    /// Stalled, but on something outside the object's spec (a Connection may start allowing the
    /// namespace): checked again at the drift interval rather than only on a spec change.
    pub fn recheck_while_stalled(&self) -> bool {
        matches!(self, Self::NotAllowed(_))
    }

    /// True for the categories of [`Error::recheck_while_stalled`] errors.
    pub fn is_rechecked_reason(reason: &str) -> bool {
        reason == "NamespaceNotAllowed"
    }

    /// How long the API asked us to wait, when it did.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Api { source, .. } => source.retry_after(),
            _ => None,
        }
    }
}
