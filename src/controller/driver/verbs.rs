//! The kind contract: the verbs a kind supplies to the driver ([`Verbs`]). A kind resolves its
//! inputs, computes its desired state and compares it with the remote object (pure), and makes
//! the API calls (through the gate: the driver hands each verb the client [`Cx::api`] gave for
//! its operation). Everything around them (adoption, the workspace reach, immutable refusal,
//! create-once and its recovery, drift versus update, Observe, orphan) is the driver's
//! ([`super::flow`]).

use std::future::Future;

use super::create::{Created, Lookup};
use super::{Change, Cx, Managed};
use crate::api::{ApiError, Client};
use crate::controller::error::Error;
use crate::resources::common::{CreateAttempt, DriftCorrection};

/// How the remote object differs from the desired state ([`Verbs::compare`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Comparison {
    /// Fields no update can change: the remote object is refused (`Stalled/InvalidSpec`).
    pub immutable: Vec<&'static str>,
    /// Fields an update brings in line.
    pub differs: Vec<&'static str>,
    /// Of `differs`, the fields that differ because an input changed (a Secret value), not
    /// because someone edited the remote object: an update for them alone is no drift.
    pub inputs: Vec<&'static str>,
}

impl Comparison {
    /// Every field that differs, immutable ones first (what Observe reports as `Drifted`).
    pub fn fields(&self) -> Vec<&'static str> {
        self.immutable
            .iter()
            .chain(&self.differs)
            .copied()
            .collect()
    }

    /// True when some differing field was edited outside aigw (not only an input changed).
    pub fn edited_outside(&self) -> bool {
        self.differs.iter().any(|f| !self.inputs.contains(f))
    }
}

/// What a kind supplies to the generic driver. The driver alone decides create versus update,
/// runs the create protocol ([`super::create`]), and honours Observe and `deletionPolicy`.
pub trait Verbs: Managed {
    /// What `resolve` gathered: Secret values, referenced objects.
    type Inputs: Send + Sync;
    /// The desired state, computed from the inputs alone.
    type Desired: Send + Sync;
    /// The remote object as a read returns it.
    type Remote: Send + Sync;
    /// A candidate of a create lookup (a list row).
    type Found: Send + Sync;
    /// What a create answers.
    type Posted: Send + Sync;
    /// What an update answers.
    type Updated: Send + Sync;
    /// In messages: "rate-limits policy".
    const WHAT: &'static str;
    /// The spec field that names an adopted remote object: "spec.policyId".
    const ADOPTED_BY: &'static str;
    /// The event reason and verb of the remote removal: ("Deleted", "delete").
    const REMOVAL: (&'static str, &'static str) = ("Deleted", "delete");

    /// Reads what the desired state depends on besides the spec (Secrets, references), and
    /// records in `status` the conditions of what it read (a guardrail a Config names).
    fn resolve(
        &self,
        cx: &Cx<'_, Self>,
        status: &mut Self::Status,
    ) -> impl Future<Output = Result<Self::Inputs, Error>> + Send;
    /// What Observe compares with (it never writes, so it needs no Secret values): by default
    /// what [`Verbs::resolve`] gathers.
    fn observed_inputs(
        &self,
        cx: &Cx<'_, Self>,
        status: &mut Self::Status,
    ) -> impl Future<Output = Result<Self::Inputs, Error>> + Send {
        self.resolve(cx, status)
    }
    /// The desired state. Pure.
    fn desired(&self, inputs: Self::Inputs) -> Self::Desired;
    /// How `remote` differs from `desired`. Pure.
    fn compare(
        &self,
        desired: &Self::Desired,
        remote: &Self::Remote,
        status: &Self::Status,
    ) -> Comparison;
    /// The key of the remote object this resource recorded in `status` (id or slug).
    fn recorded(status: &Self::Status) -> Option<String>;
    /// The key `remote` is read and written by.
    fn key(remote: &Self::Remote) -> String;
    /// The key of a lookup's candidate.
    fn found_key(found: &Self::Found) -> String;
    /// The workspace `remote` lives in (an adopted object's must be granted too).
    fn workspace(remote: &Self::Remote) -> Option<&str>;

    /// GETs the remote object `key` names. `Ok(None)`: gone, as the kind proves it besides a
    /// 404 (which the driver takes for gone itself).
    fn observe(
        &self,
        client: &Client,
        key: &str,
        status: &Self::Status,
    ) -> impl Future<Output = Result<Option<Self::Remote>, ApiError>> + Send;
    /// Why `remote` can never be this resource's (another kind's object), before anything is
    /// recorded or written.
    fn refuses(_remote: &Self::Remote) -> Option<String> {
        None
    }
    /// What the create of `desired` sends, for the intent (name, workspace, body hash).
    fn sent(&self, cx: &Cx<'_, Self>, desired: &Self::Desired) -> CreateAttempt;
    /// POSTs `desired`.
    fn create(
        &self,
        client: &Client,
        desired: &Self::Desired,
    ) -> impl Future<Output = Result<Self::Posted, ApiError>> + Send;
    /// What an earlier create whose answer was lost made, proven by what it sent (the intent
    /// in `status`): a marker or a body hash the API keeps, or one match in a complete listing
    /// within the create's window ([`super::create::one_of_ours`]). Never a guess by name alone.
    fn find_created(
        &self,
        cx: &Cx<'_, Self>,
        status: &Self::Status,
    ) -> impl Future<Output = Result<Lookup<Self::Found>, Error>> + Send;
    /// PUTs what differs.
    fn update(
        &self,
        client: &Client,
        desired: &Self::Desired,
        remote: &Self::Remote,
    ) -> impl Future<Output = Result<Self::Updated, ApiError>> + Send;
    /// What must hold before the remote object `key` is deleted (no Config names it).
    fn before_delete(
        &self,
        _cx: &Cx<'_, Self>,
        _key: &str,
    ) -> impl Future<Output = Result<(), Error>> + Send {
        async { Ok(()) }
    }
    /// DELETEs (or archives) the remote object `key` names ("already gone" is done).
    fn delete(
        &self,
        client: &Client,
        key: &str,
        status: &Self::Status,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;

    /// Records in `status` what a read reported (`None`: the remote object is gone).
    fn record(status: &mut Self::Status, remote: Option<&Self::Remote>);
    /// Records in `status` what a create made, before any read of it; the key, for messages.
    fn record_created(
        &self,
        status: &mut Self::Status,
        desired: &Self::Desired,
        created: Created<Self::Posted, Self::Found>,
    ) -> String;
    /// Records in `status` that an update (its answer `updated`) brought `remote` in line
    /// with `desired`.
    fn record_updated(
        &self,
        _status: &mut Self::Status,
        _desired: &Self::Desired,
        _remote: &Self::Remote,
        _updated: Self::Updated,
    ) {
    }
    /// What correcting `remote` replaces, in the spec's terms, at time `at`.
    fn replaced(
        &self,
        desired: &Self::Desired,
        remote: &Self::Remote,
        comparison: &Comparison,
        at: String,
    ) -> DriftCorrection;
    /// Keeps in `status` what the last drift correction replaced.
    fn record_drift(status: &mut Self::Status, replaced: DriftCorrection);

    /// A capability's work once the remote object matches the spec (a usage reset, a
    /// rotation, a Secret delivery, sub-resource rows, the references a Config applied).
    /// `first_sight`: the resource had no remote object recorded before this reconcile.
    fn follow_up(
        &self,
        _cx: &Cx<'_, Self>,
        _status: &mut Self::Status,
        _desired: &Self::Desired,
        _first_sight: bool,
    ) -> impl Future<Output = Result<Vec<Change>, Error>> + Send {
        async { Ok(Vec::new()) }
    }
}
