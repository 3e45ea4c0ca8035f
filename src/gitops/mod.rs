//! The GitOps side of aigw: what a pipeline runs before (and instead of) the operator.
//!
//! - [`load`] reads manifests (files, directories, stdin; YAML or JSON, many documents each).
//! - [`validate`] checks them offline against the CRD schemas aigw generates, the CEL rules that
//!   need no stored object, the operator's own pre-flight checks and duplicate claims.
//! - [`plan`] compares them with the live management API (reads only) and says what the operator
//!   would do to each remote object.
//! - [`export`] turns a live tenant into manifests that adopt every object as it is.
//!
//! Everything here reuses the mapping and diff code of [`crate::resources`], so a plan shows
//! exactly the differences the operator acts on.

mod cel;
pub mod export;
pub mod line_diff;
pub mod load;
pub mod mask;
pub mod plan;
mod plan_access;
mod plan_claims;
mod plan_mcp_integration;
mod plan_mcp_server;
mod plan_workspace;
mod project;
mod promotion;
pub mod schema;
pub mod validate;

use std::path::PathBuf;

/// Everything that stops a gitops command from producing its report. Problems found *in* the
/// manifests are not errors: they are the report.
#[derive(Debug, thiserror::Error)]
pub enum GitopsError {
    #[error("failed to read {path}: {error}")]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },

    #[error("failed to read manifests from stdin: {0}")]
    Stdin(std::io::Error),

    /// No document at all, as `kubectl apply` refuses one: an empty standard input (a
    /// `kustomize build | aigw plan -f -` whose build failed) is no clean set.
    #[error("no objects passed: {0} held no YAML or JSON document")]
    Empty(String),

    #[error("failed to write {path}: {error}")]
    Write {
        path: PathBuf,
        error: std::io::Error,
    },

    /// `source` is the cause; `{:#}` renderings append it.
    #[error("{what}")]
    Api {
        what: String,
        source: crate::api::ApiError,
    },

    #[error("{what}")]
    Kube { what: String, source: kube::Error },

    #[error("failed to render {what}: {message}")]
    Render { what: String, message: String },

    #[error("invalid connection: {0}")]
    Connection(String),
}

impl GitopsError {
    pub(crate) fn api(what: impl Into<String>, source: crate::api::ApiError) -> Self {
        GitopsError::Api {
            what: what.into(),
            source,
        }
    }

    pub(crate) fn kube(what: impl Into<String>, source: kube::Error) -> Self {
        GitopsError::Kube {
            what: what.into(),
            source,
        }
    }
}
