//! The kind contract: the verbs a kind supplies to the driver ([`Verbs`]). A kind resolves its
//! desired state (the spec and its inputs) and compares it with the remote object (pure), and names
//! how the API calls are made ([`Verbs::Calls`]: through its client handle with request bodies
//! of its own, or written out; [`super::calls`]). Everything around them (adoption, the workspace reach, immutable refusal,
//! create-once and its recovery, drift versus update, Observe, orphan, release) is the driver's
//! ([`super::flow`]). Optional capabilities are default methods: sub-resources kept with the
//! remote object ([`Verbs::sync_sub_resources`]), a check before a new create
//! ([`Verbs::before_create`]), a release instead of a delete ([`Verbs::release`]).

use std::future::Future;

use futures::future::Either;

use super::calls::{Calls, Found, Posted, Remote, Updated};
use super::create::Created;
use super::{Change, Cx, Managed};
use crate::api::ApiError;
use crate::controller::error::{Error, Halt};
use crate::resources::common::{DriftCorrection, Recorded};

/// How the remote object differs from the desired state
/// ([`crate::controller::driver::calls::Calls::compare`]).
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

/// What [`Verbs::resolve`] and [`Verbs::observed_inputs`] answer: the desired state.
pub type Inputs<K> = Result<<K as Verbs>::Desired, Halt>;
/// What [`Verbs::sync_sub_resources`] and [`Verbs::follow_up`] answer: the changes they made.
pub type Changes = Result<Vec<Change>, Halt>;
/// What [`Verbs::record_created`] records: a create's answer, or what a lookup recovered.
pub type Made<K> = Created<Posted<K>, Found<K>>;
/// What [`Verbs::release`] answers: why the remote object is left in place, if it is.
pub type Release = Result<Option<String>, Halt>;
/// What [`Verbs::sub_resources_differ`] answers: the sub-resources that differ.
pub type Differing = Result<Vec<&'static str>, Halt>;

/// What a kind supplies to the generic driver. The driver alone decides create versus update,
/// runs the create protocol ([`super::create`]), and honours Observe and `deletionPolicy`.
pub trait Verbs: Managed {
    /// The desired state, as [`Verbs::resolve`] gathers it besides the spec: Secret values,
    /// referenced objects.
    type Desired: Send + Sync;
    /// How the remote calls are made (through the API client's handle, or written out), and
    /// what a create lookup finds and a create and an update answer.
    type Calls: Calls<Self>;
    /// The event reason and verb of the remote removal: ("Deleted", "delete").
    const REMOVAL: (&'static str, &'static str) = ("Deleted", "delete");
    /// True for a kind whose status keeps `lastDriftCorrection` ([`Verbs::replaced`],
    /// [`Verbs::record_drift`]). False (the default): a drift correction is reported by the
    /// fields it restored, and those two are never called.
    const RECORDS_DRIFT: bool = false;
    /// True for a listed kind whose update answer lacks the new remote stamp: the next
    /// reconcile reads the object again ([`crate::controller::driver::drift::Drift::flag`]).
    const READ_AFTER_UPDATE: bool = false;
    /// The desired state Observe compares with when it reads nothing besides the spec (`Some`):
    /// `Some(None)` for a kind whose inputs are the Secret values it sends, which Observe never
    /// reads ([`crate::controller::kinds::secret_inputs::Written`]). `None` (the default):
    /// Observe reads them as [`Verbs::resolve`] does.
    const UNREAD_INPUTS: Option<Self::Desired> = None;

    /// Reads what the desired state depends on besides the spec (Secrets, references), and
    /// records in `status` the conditions of what it read (a guardrail a Config names).
    fn resolve(
        &self,
        cx: &Cx<'_, Self>,
        status: &mut Self::Status,
    ) -> impl Future<Output = Inputs<Self>> + Send;
    /// What Observe compares with (it never writes, so it needs no Secret values): by default
    /// [`Verbs::UNREAD_INPUTS`] where the kind gives it, else what [`Verbs::resolve`] gathers.
    fn observed_inputs(
        &self,
        cx: &Cx<'_, Self>,
        status: &mut Self::Status,
    ) -> impl Future<Output = Inputs<Self>> + Send {
        match Self::UNREAD_INPUTS {
            Some(unread) => Either::Left(std::future::ready(Ok(unread))),
            None => Either::Right(self.resolve(cx, status)),
        }
    }
    /// The key of the remote object this resource recorded in `status` (id or slug): what its
    /// status records it by ([`Recorded::recorded_remote`]).
    fn recorded(status: &Self::Status) -> Option<String> {
        status.recorded_remote().map(str::to_string)
    }
    /// How the messages of a deletion name the remote object `status` recorded: the slug users
    /// route by where the status keeps one (the last of [`Recorded::remote_keys`], which lists
    /// the id first), else its key.
    fn shown(status: &Self::Status) -> Option<String> {
        status.remote_keys().last().map(|key| key.to_string())
    }
    /// What adopting `remote` (named `what`) reaches besides this resource's own grant: by
    /// default its workspace; a gateway reaches every workspace it serves.
    fn reach_adopted(
        &self,
        cx: &Cx<'_, Self>,
        what: &str,
        remote: &Remote<Self>,
    ) -> impl Future<Output = Result<(), Error>> + Send {
        let reach = format!("the workspace of {what}");
        async move { cx.gate.reach(&reach, Self::Calls::workspace(remote)).await }
    }
    /// Why `remote` can never be this resource's (another kind's object), before anything is
    /// recorded or written.
    fn refuses(_remote: &Remote<Self>) -> Option<String> {
        None
    }
    /// Why `remote`, found where the spec names it and never recorded, is not adopted although
    /// the grants allow adoption (it binds another integration than `desired`).
    fn not_adoptable(&self, _desired: &Self::Desired, _remote: &Remote<Self>) -> Option<String> {
        None
    }
    /// With [`Naming::CreatesAs`](crate::resources::common::Naming::CreatesAs): whether `remote`, found by the named identity while a create
    /// is in flight, is proven what that create made (it carries this resource's mark, where the
    /// API keeps one) rather than another party's object, taken only under the adoption grant.
    /// A slug or a name proves nothing: whoever creates chooses them.
    fn made_by_create(&self, _status: &Self::Status, _remote: &Remote<Self>) -> bool {
        false
    }
    /// What must hold before a new create is sent (not when one in flight is resumed): the
    /// integration a provider binds grants its workspace access.
    fn before_create(
        &self,
        _cx: &Cx<'_, Self>,
        _desired: &Self::Desired,
    ) -> impl Future<Output = Result<(), Halt>> + Send {
        async { Ok(()) }
    }
    /// Why the remote object `key` must be left in place without a call rather than deleted
    /// (`Some`): it binds another integration than this resource, or the grants no longer let
    /// this namespace bind its integration. The driver releases it and says why.
    fn release(
        &self,
        _cx: &Cx<'_, Self>,
        _key: &str,
        _status: &Self::Status,
    ) -> impl Future<Output = Release> + Send {
        async { Ok(None) }
    }
    /// What must hold before the remote object `key` is deleted (no Config names it).
    fn before_delete(
        &self,
        _cx: &Cx<'_, Self>,
        _key: &str,
    ) -> impl Future<Output = Result<(), Halt>> + Send {
        async { Ok(()) }
    }
    /// Removes what [`Verbs::before_create`] made for a create that never made the remote
    /// object, when the resource goes with nothing recorded, or a lookup proved its unfinished
    /// create made nothing (never under `deletionPolicy: Orphan`): the IAM scope a refused or
    /// failed workspace create left. Only what carries this resource's mark; the changes made.
    fn remove_unused(&self, _cx: &Cx<'_, Self>) -> impl Future<Output = Changes> + Send {
        async { Ok(Vec::new()) }
    }
    /// The Secrets whose values an API error about this object could quote although a
    /// reconcile need not read them ([`super::echoes`]): the credentials it was delivered (a
    /// Deployment's, an API key), the upstream credentials of what it binds (a Provider's
    /// Integration, an McpServer's McpIntegration). Read only when a reconcile fails. None by
    /// default.
    fn echoable(&self, _ctx: &crate::controller::Context) -> Vec<super::echoes::Echoable> {
        Vec::new()
    }

    /// The failure to report when the API refused the delete of `key` with `error` because
    /// something still uses the remote object (a `StillReferenced` the driver retries), rather
    /// than the API error itself.
    fn delete_refused(&self, _key: &str, _error: &ApiError) -> Option<Error> {
        None
    }

    /// Records in `status` what a read reported (`None`: the remote object is gone).
    fn record(status: &mut Self::Status, remote: Option<&Remote<Self>>);
    /// Records in `status` what the remote object found was compared with (the integration a
    /// provider binds), before the driver decides what to do with it; and what a create made
    /// it with, before [`Verbs::record_created`].
    fn record_compared(&self, _status: &mut Self::Status, _desired: &Self::Desired) {}
    /// Records in `status` what a create made, before any read of it; the key, for messages.
    fn record_created(
        &self,
        status: &mut Self::Status,
        desired: &Self::Desired,
        created: Made<Self>,
    ) -> String;
    /// Records in `status` that an update (its answer `updated`) brought `remote` in line
    /// with `desired`.
    fn record_updated(
        &self,
        _status: &mut Self::Status,
        _desired: &Self::Desired,
        _remote: &Remote<Self>,
        _updated: Updated<Self>,
    ) {
    }
    /// What correcting `remote` replaces, in the spec's terms, at time `at` (a kind that
    /// keeps it: [`Verbs::RECORDS_DRIFT`]).
    fn replaced(
        &self,
        _desired: &Self::Desired,
        _remote: &Remote<Self>,
        _comparison: &Comparison,
        at: String,
    ) -> DriftCorrection {
        DriftCorrection {
            at,
            ..Default::default()
        }
    }
    /// Keeps in `status` what the last drift correction replaced ([`Verbs::RECORDS_DRIFT`]).
    fn record_drift(_status: &mut Self::Status, _replaced: DriftCorrection) {}

    /// Sub-resources kept with the remote object (an integration's workspace access rows and
    /// model access): brought in line once the object is, after a create, an update or none,
    /// one write each where they differ. The remote object's key is in `status`.
    fn sync_sub_resources(
        &self,
        _cx: &Cx<'_, Self>,
        _status: &mut Self::Status,
    ) -> impl Future<Output = Changes> + Send {
        async { Ok(Vec::new()) }
    }
    /// Observe: the sub-resources that differ from the spec, read without a write.
    fn sub_resources_differ(
        &self,
        _cx: &Cx<'_, Self>,
        _status: &Self::Status,
    ) -> impl Future<Output = Differing> + Send {
        async { Ok(Vec::new()) }
    }

    /// A capability's work once the remote object matches the spec (a usage reset, a
    /// rotation, a Secret delivery, sub-resource rows, the references a Config applied).
    /// `first_sight`: the resource had no remote object recorded before this reconcile.
    fn follow_up(
        &self,
        _cx: &Cx<'_, Self>,
        _status: &mut Self::Status,
        _desired: &Self::Desired,
        _first_sight: bool,
    ) -> impl Future<Output = Changes> + Send {
        async { Ok(Vec::new()) }
    }
}

/// Condition reason while something still uses the remote object being deleted (or the API
/// refuses its delete for that).
pub const STILL_REFERENCED: &str = "StillReferenced";

/// [`Verbs::before_delete`] of the remote object `key` that `users` (named in messages) still
/// use as `relation` says ("named by Config"): `StillReferenced` until none does (`until`).
pub fn still_referenced<K: Verbs>(
    key: &str,
    relation: &str,
    users: &[String],
    until: &str,
) -> Result<(), Halt> {
    if users.is_empty() {
        return Ok(());
    }
    Err(Error::not_allowed(
        STILL_REFERENCED,
        format!(
            "{} {key} is still {relation} {}; {}",
            K::WHAT,
            users.join(", "),
            removed_once::<K>(until)
        ),
    )
    .into())
}

/// [`Verbs::delete_refused`]: the API refuses the delete of `key` with `message` while
/// something uses the remote object (`until` says what must go first).
pub fn refused_in_use<K: Verbs>(key: &str, message: &str, until: &str) -> Error {
    Error::not_allowed(
        STILL_REFERENCED,
        format!(
            "{} {key} is still in use, so the API refuses its {} ({message}); {}",
            K::WHAT,
            K::REMOVAL.1,
            removed_once::<K>(until)
        ),
    )
}

/// How a refused removal ends: "it is deleted once {until} (or set deletionPolicy: Orphan)".
pub fn removed_once<K: Verbs>(until: &str) -> String {
    format!(
        "it is {}d once {until} (or set deletionPolicy: Orphan)",
        K::REMOVAL.1
    )
}
