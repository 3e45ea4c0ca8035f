//! What stops a reconcile early: a failure ([`Error`], knowing whether time alone can fix it)
//! or a wait ([`Wait`]), one [`Halt`] either way.

use std::time::Duration;

use crate::api::ApiError;

/// Condition reasons that only a spec change can clear: the driver does not call the API again
/// for such an object until its generation changes (a 400 stays a 400). Every other `Stalled`
/// reason depends on something outside the spec (a grant, a token's scope, RBAC, another
/// resource, a Secret) and is rechecked with backoff, up to the drift interval.
const SPEC_REASONS: [&str; 2] = ["Validation", "InvalidSpec"];

/// A failure: what went wrong in a reconcile (a wait is a [`Wait`], not an error). Messages are
/// lowercase, say what failed, and never carry secrets: the API's own message is included, the
/// request body never is.
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
    /// The referenced Connection is missing, unusable or does not allow this object's namespace.
    #[error("{0}")]
    Connection(String),
    /// A tenancy rule of the Connection refuses this object; `reason` names the rule.
    #[error("{message}")]
    NotAllowed {
        reason: &'static str,
        message: String,
    },
    /// Another resource manages the same remote object.
    #[error("{0}")]
    AlreadyManaged(String),
    /// `credentialsSecretRef` names a Secret that aigw did not create.
    #[error("{0}")]
    SecretConflict(String),
    /// Kubernetes refuses aigw's writes of the credentials Secret (an admission policy, RBAC,
    /// a quota): no values are issued until a dry-run write of it passes.
    #[error("{0}")]
    SecretNotWritable(String),
    /// State that aigw must not invent is missing (for example a lost one-time credential).
    #[error("{0}")]
    MissingState(String),
    /// The operator was started without a setting this object needs (a cluster-scoped
    /// resource's Secrets with no `--connection-secret-namespace`): not the spec's fault, so it
    /// is looked at again, and a restart with the setting takes it up at once.
    #[error("{0}")]
    OperatorSettings(String),
}

impl Error {
    /// A status write the apiserver refused because the installed CRD lacks a field this
    /// release writes (the CRDs not upgraded with the operator): says what to do, not only what
    /// failed. `None` for any other error.
    pub fn crd_outdated(kind: &str, name: &str, error: &kube::Error) -> Option<Self> {
        match error {
            kube::Error::Api(status) if status.message.contains("field not declared in schema") => {
                Some(Self::MissingState(format!(
                    "cannot write the status of {kind} {name}: the installed CRD lacks a field this release writes ({}); apply the CRDs of this release: aigw crds | kubectl apply --server-side -f -",
                    status.message
                )))
            }
            _ => None,
        }
    }

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

    pub fn not_allowed(reason: &'static str, message: impl Into<String>) -> Self {
        Self::NotAllowed {
            reason,
            message: message.into(),
        }
    }

    /// True when retrying soon may succeed without a spec change.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Api { source, .. } => {
                source.is_transient()
                    || source.outcome_unknown()
                    || matches!(source.status(), Some(401 | 409))
            }
            Self::Kube { source, .. } => match source {
                kube::Error::Api(status) => status.code >= 500 || matches!(status.code, 409 | 429),
                _ => true,
            },
            // A Connection or its Secret may appear later; keep checking.
            Self::Connection(_) => true,
            Self::InvalidSpec(_)
            | Self::MissingState(_)
            | Self::OperatorSettings(_)
            | Self::NotAllowed { .. }
            | Self::AlreadyManaged(_)
            | Self::SecretConflict(_)
            | Self::SecretNotWritable(_) => false,
        }
    }

    /// Short CamelCase category, used as condition reason and event reason.
    pub fn category(&self) -> &'static str {
        match self {
            Self::Api { source, .. } => source.category(),
            Self::Kube { source, .. } => match source {
                kube::Error::Api(status) if status.code == 403 => "KubernetesForbidden",
                _ => "KubernetesApi",
            },
            Self::InvalidSpec(_) => "InvalidSpec",
            Self::Connection(_) => "ConnectionUnavailable",
            Self::NotAllowed { reason, .. } => reason,
            Self::AlreadyManaged(_) => "AlreadyManaged",
            Self::SecretConflict(_) => "SecretConflict",
            Self::SecretNotWritable(_) => "SecretNotWritable",
            Self::MissingState(_) => "MissingState",
            Self::OperatorSettings(_) => "OperatorSettings",
        }
    }

    /// Stalled on something outside the object's spec (a grant, a token's scope, RBAC, another
    /// resource): checked again with backoff up to the drift interval, not only on a spec change.
    pub fn recheck_while_stalled(&self) -> bool {
        Self::is_rechecked_reason(self.category())
    }

    /// True for every `Stalled` reason except the ones only a spec change can clear.
    pub fn is_rechecked_reason(reason: &str) -> bool {
        !SPEC_REASONS.contains(&reason)
    }

    /// How long the API asked us to wait, when it did.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Api { source, .. } => source.retry_after(),
            _ => None,
        }
    }
}

/// Why a reconcile waits: nothing failed, and time, another writer or a human settles it.
/// Messages follow the rules of [`Error`]'s.
#[derive(Debug, thiserror::Error)]
pub enum Wait {
    /// `--dry-run`: the reconcile reached a write, which the gate refused. `reason` is the
    /// event reason (`WouldCreate`, `WouldUpdate`, `WouldDelete`, `WouldRotate`).
    #[error("dry run: {message}")]
    DryRun {
        reason: &'static str,
        message: String,
    },
    /// The promotion gate (`spec.promotion`) holds this change: nothing is written until it
    /// opens. `reason` is `Soaking` or `SourceNotReady`; `look_again_in` is when the soak ends.
    #[error("{message}")]
    Gated {
        reason: &'static str,
        message: String,
        look_again_in: Option<Duration>,
    },
    /// A status write lost a race: the object changed since this reconcile read it. Nothing was
    /// done remotely on the stale view; the object is reconciled again from its current state.
    #[error("{0} changed while it was reconciled; starting over from its current state")]
    Conflict(String),
    /// This replica may not act now (it does not lead, or its lease was not renewed in time):
    /// nothing was sent, and nothing of this reconcile is recorded.
    #[error("not acting: {0}")]
    NotLeader(String),
    /// The watch caches cannot answer a question yet (they have not listed every namespace).
    #[error("{0}")]
    CachesNotReady(String),
    /// A create may or may not have happened and nothing yet proves either: keep the intent and
    /// look again later, never POST a second time on a guess.
    #[error("{0}")]
    CreateOutcomeUnknown(String),
    /// Like `CreateOutcomeUnknown`, but waiting only for time to pass (a list that may lag a
    /// create): look again after `look_again_in`, not after a growing backoff.
    #[error("{message}")]
    NotYetSettled {
        message: String,
        look_again_in: Duration,
    },
    /// The object's Connection is backlogged: the requests waiting for its rate limiter fill
    /// more than a second of it ([`crate::api::Client::turn`]). Nothing was done; the reconcile
    /// comes back at its place in that Connection's line instead of holding one of the kind's
    /// slots, which other Connections' objects need, while it waits.
    #[error("{connection}: its rate limit is backlogged; starting in {look_again_in:?}")]
    Throttled {
        connection: String,
        look_again_in: Duration,
    },
    /// A rotation recorded by another writer (or a process that died) may still be in flight:
    /// redoing it now could revoke the values it is about to store. Look again after
    /// `look_again_in`, when any such call has ended.
    #[error("{message}")]
    RotationInFlight {
        message: String,
        look_again_in: Duration,
    },
}

impl Wait {
    /// Short CamelCase category, used as condition reason and event reason.
    pub fn category(&self) -> &'static str {
        match self {
            Self::DryRun { reason, .. } | Self::Gated { reason, .. } => reason,
            Self::Conflict(_) => "Conflict",
            Self::NotLeader(_) => "NotLeader",
            Self::CachesNotReady(_) => "CachesNotReady",
            Self::CreateOutcomeUnknown(_) | Self::NotYetSettled { .. } => "CreateOutcomeUnknown",
            Self::RotationInFlight { .. } => "RotationInFlight",
            Self::Throttled { .. } => "Throttled",
        }
    }

    /// When to look again, for a wait that only time resolves (instead of the backoff).
    pub fn look_again_in(&self) -> Option<Duration> {
        match self {
            Self::NotYetSettled { look_again_in, .. }
            | Self::RotationInFlight { look_again_in, .. }
            | Self::Throttled { look_again_in, .. } => Some(*look_again_in),
            Self::Gated { look_again_in, .. } => *look_again_in,
            Self::CachesNotReady(_) => Some(Duration::from_secs(1)),
            _ => None,
        }
    }
}

/// What stops a reconcile early: a [`Wait`] or a failure ([`Error`]). Deep code (the gate,
/// the create protocol, a rotation) returns it with `?`; the driver's `finish` decides what
/// each one records.
#[derive(Debug, thiserror::Error)]
pub enum Halt {
    #[error(transparent)]
    Wait(#[from] Wait),
    #[error(transparent)]
    Fail(#[from] Error),
}

impl Halt {
    /// Whether the message may quote an answer: the management API's or the apiserver's text
    /// (an error of a call, a create whose outcome is unknown), which may echo a Secret's value
    /// the reconcile did not read. Not a message the operator wrote from the object and its
    /// caches alone (a refused or waiting reference, an invalid spec, a wait on caches, the
    /// rate limiter, the promotion gate or the lease).
    pub fn may_quote_an_answer(&self) -> bool {
        use crate::controller::driver::verbs::STILL_REFERENCED;
        // A removal the API refuses as in use quotes the API's reason.
        if let Self::Fail(Error::NotAllowed { reason, .. }) = self
            && *reason == STILL_REFERENCED
        {
            return true;
        }
        !matches!(
            self,
            Self::Fail(
                Error::InvalidSpec(_) | Error::NotAllowed { .. } | Error::OperatorSettings(_)
            ) | Self::Wait(
                Wait::CachesNotReady(_)
                    | Wait::Throttled { .. }
                    | Wait::NotLeader(_)
                    | Wait::Gated { .. }
                    | Wait::DryRun { .. }
            )
        )
    }

    /// Short CamelCase category, used as condition reason and event reason.
    pub fn category(&self) -> &'static str {
        match self {
            Self::Wait(wait) => wait.category(),
            Self::Fail(error) => error.category(),
        }
    }

    /// True when retrying soon may succeed without a spec change: every wait, and a
    /// transient failure.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Wait(_) => true,
            Self::Fail(error) => error.is_transient(),
        }
    }

    /// See [`Error::recheck_while_stalled`] (a wait is never recorded as `Stalled`).
    pub fn recheck_while_stalled(&self) -> bool {
        Error::is_rechecked_reason(self.category())
    }

    /// True when the reconcile must stop without recording anything: its view is stale (a
    /// lost status race), this replica may not act (not the leader, a write withheld by the
    /// lease guard, caches that have not listed), or it has not started (its Connection's line).
    pub fn records_nothing(&self) -> bool {
        match self {
            Self::Wait(
                Wait::Conflict(_)
                | Wait::NotLeader(_)
                | Wait::CachesNotReady(_)
                | Wait::Throttled { .. },
            ) => true,
            Self::Fail(Error::Api { source, .. }) => {
                matches!(source.root(), ApiError::Withheld { .. })
            }
            _ => false,
        }
    }

    /// When to look again, for a halt that only time resolves (instead of the backoff).
    pub fn look_again_in(&self) -> Option<Duration> {
        match self {
            Self::Wait(wait) => wait.look_again_in(),
            Self::Fail(_) => None,
        }
    }

    /// How long the API asked us to wait, when it did.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Wait(_) => None,
            Self::Fail(error) => error.retry_after(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::HttpError;

    fn http(status: u16, raw: &str) -> Error {
        Error::api(
            "read config a",
            ApiError::Http(Box::new(HttpError {
                method: "GET",
                endpoint: "/ai_gw/v2/configs/{slug}",
                status,
                body: crate::api::ApiErrorBody::parse(raw),
                raw: raw.to_string(),
                retry_after: None,
                opa_denied: false,
            })),
        )
    }

    #[test]
    fn outside_causes_are_rechecked_and_bad_specs_wait_for_a_change() {
        for (status, raw, reason) in [
            (
                403,
                r#"{"errorCode":"AB03","message":"out of scope"}"#,
                "NotVisible",
            ),
            (403, "", "Forbidden"),
            (405, "", "MethodNotAllowed"),
            (422, "", "Unprocessable"),
        ] {
            let e = http(status, raw);
            assert_eq!(e.category(), reason);
            assert!(!e.is_transient(), "{reason}");
            assert!(e.recheck_while_stalled(), "{reason}");
        }
        let bad = http(400, r#"{"message":"unknown key"}"#);
        assert_eq!(bad.category(), "Validation");
        assert!(!bad.recheck_while_stalled());
        assert!(!Error::InvalidSpec("x".into()).recheck_while_stalled());
        assert!(Error::AlreadyManaged("x".into()).recheck_while_stalled());
        assert!(Error::not_allowed("WorkspaceNotAllowed", "x").recheck_while_stalled());
    }

    #[test]
    fn a_server_error_after_a_write_is_retried_as_unknown() {
        let e = http(500, "");
        assert!(e.is_transient());
        let unknown = Halt::from(Wait::CreateOutcomeUnknown("x".into()));
        assert!(unknown.is_transient());
        assert_eq!(unknown.category(), "CreateOutcomeUnknown");
    }

    /// Every wait is retried and never recorded as `Stalled`; of the halts, only a stale view, a
    /// replica that may not act (the lease guard's withheld write among them) or a reconcile
    /// sent to its Connection's line records nothing.
    #[test]
    fn waits_are_transient_and_only_a_stale_idle_or_unstarted_reconcile_records_nothing() {
        let later = Duration::from_secs(3);
        let waits = [
            (
                Wait::DryRun {
                    reason: "WouldCreate",
                    message: "x".into(),
                },
                "WouldCreate",
                false,
            ),
            (
                Wait::Gated {
                    reason: "Soaking",
                    message: "x".into(),
                    look_again_in: Some(later),
                },
                "Soaking",
                false,
            ),
            (Wait::Conflict("x".into()), "Conflict", true),
            (Wait::NotLeader("x".into()), "NotLeader", true),
            (Wait::CachesNotReady("x".into()), "CachesNotReady", true),
            (
                Wait::CreateOutcomeUnknown("x".into()),
                "CreateOutcomeUnknown",
                false,
            ),
            (
                Wait::NotYetSettled {
                    message: "x".into(),
                    look_again_in: later,
                },
                "CreateOutcomeUnknown",
                false,
            ),
            (
                Wait::RotationInFlight {
                    message: "x".into(),
                    look_again_in: later,
                },
                "RotationInFlight",
                false,
            ),
            (
                Wait::Throttled {
                    connection: "Connection slow".into(),
                    look_again_in: later,
                },
                "Throttled",
                true,
            ),
        ];
        for (wait, category, records_nothing) in waits {
            let halt = Halt::from(wait);
            assert_eq!(halt.category(), category);
            assert!(halt.is_transient(), "{category}");
            assert_eq!(halt.records_nothing(), records_nothing, "{category}");
            assert_eq!(halt.retry_after(), None);
        }
        let withheld = Halt::from(Error::api(
            "update config a",
            ApiError::Withheld {
                method: "PUT",
                endpoint: "/ai_gw/v2/configs/{slug}",
                reason: "not the leader".into(),
            },
        ));
        assert!(withheld.records_nothing());
        assert!(!Halt::from(http(500, "")).records_nothing());
        assert_eq!(Halt::from(http(400, "")).look_again_in(), None);
    }

    #[test]
    fn a_status_field_the_installed_crd_lacks_says_to_apply_the_crds() {
        let refused = |message: &str| {
            let mut status = kube::core::Status::failure(message, "BadRequest");
            status.code = 400;
            kube::Error::Api(Box::new(status))
        };
        let outdated = refused(".status.telemetryFailingSince: field not declared in schema");
        let said = Error::crd_outdated("ConfigRollout", "checkout", &outdated)
            .expect("an outdated CRD")
            .to_string();
        assert!(said.contains("ConfigRollout checkout"), "{said}");
        assert!(said.contains("telemetryFailingSince"), "{said}");
        assert!(
            said.contains("aigw crds | kubectl apply --server-side -f -"),
            "{said}"
        );
        let other = refused("admission webhook denied the request");
        assert!(Error::crd_outdated("ConfigRollout", "checkout", &other).is_none());
    }
}
