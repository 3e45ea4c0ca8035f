//! The trait every kind implements and the context its reconcile gets: the management API only
//! through the gate ([`Cx::api`]), status writes as compare-and-swaps, and the outcome helpers
//! the kinds share.

use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use kube::core::PartialObjectMeta;

use crate::api::concealment::CONCEALED_BYTES;
use crate::controller::driver::echoes::Budget;
use crate::controller::driver::status::CommonStatus;
use kube::ResourceExt;
use kube::core::object::HasStatus;
use kube::runtime::events::EventType;
use serde::Serialize;
use tracing::debug;

use super::publish;
use crate::controller::Context;
use crate::controller::driver::gate::{Gate, Op};
use crate::controller::driver::status::IntentStatus;
use crate::controller::error::{Error, Halt, Wait};
use crate::controller::process::Watchable;
use crate::resources::common::{CREATE_INTENT_ANNOTATION, CreateIntent, Governed, Recorded};
use crate::resources::config::AppliedVersion;
use crate::resources::promotion::{Promotion, RevisionOrder};

/// Something a reconcile did to the remote side, reported as an event: Normal, or Warning when
/// its `warning` flag says the user must act on it.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// CamelCase event reason, e.g. `Created`, `Updated`, `DriftCorrected`.
    pub reason: &'static str,
    /// Human readable, secret-free.
    pub message: String,
    /// Published as a Warning event (and logged at `warn`): done, but something the user must
    /// act on.
    pub warning: bool,
}

impl Change {
    pub fn new(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
            warning: false,
        }
    }

    /// A change the user must act on: published as a Warning.
    pub fn warning(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            warning: true,
            ..Self::new(reason, message)
        }
    }

    /// True when the change corrected an edit made outside aigw.
    pub fn is_drift(&self) -> bool {
        self.reason == "DriftCorrected"
    }
}

/// The change a kind reports when `deletionPolicy: Orphan` leaves `what` (e.g. "config
/// pc-abc") in place.
pub fn orphaned(what: &str) -> Vec<Change> {
    vec![Change::new(
        "Orphaned",
        format!("left {what} in place (deletionPolicy Orphan)"),
    )]
}

/// The outcome of the DELETE (or archive) of `what`: "already gone" (404, or `AB08`) counts
/// as done, so a finalizer that runs twice, or after an out-of-band delete, finishes.
pub fn removed(
    reason: &'static str,
    verb: &str,
    what: &str,
    result: Result<(), crate::api::ApiError>,
) -> Result<Vec<Change>, Error> {
    match result {
        Ok(()) => Ok(vec![Change::new(reason, format!("{verb}d {what}"))]),
        Err(e) if e.is_not_found() => Ok(vec![Change::new(
            reason,
            format!("{what} was already gone"),
        )]),
        Err(e) => Err(Error::api(format!("{verb} {what}"), e)),
    }
}

/// The outcome of the GET of the remote object `what`: `Some` when found; `None` when it is gone
/// and aigw created it (so it is created again); an error naming `adopted_by` (the spec field)
/// when an adopted object is gone, since creating another would not be adopting it.
pub fn observed<T>(
    what: &str,
    adopted_by: Option<&str>,
    result: Result<T, crate::api::ApiError>,
) -> Result<Option<T>, Error> {
    match result {
        Ok(remote) => Ok(Some(remote)),
        Err(e) if e.is_not_found() => match adopted_by {
            None => Ok(None),
            Some(field) => Err(Error::MissingState(format!(
                "{what} named by {field} does not exist: {}",
                e.api_message().unwrap_or("not found")
            ))),
        },
        Err(e) => Err(Error::api(format!("read {what}"), e)),
    }
}

/// A kind aigw keeps in line with the management API. The kind supplies observe/create/
/// update/delete (in `apply`, `observe_only` and `cleanup`); the driver does everything around
/// them.
pub trait Managed:
    crate::controller::state::claims::Claims
    + HasStatus<Status: IntentStatus + Recorded>
    + Governed
    + Watchable
    + Serialize
{
    /// Kind name, for logs, metrics and messages.
    const KIND: &'static str;
    /// The API of this kind's objects in `namespace` (all namespaces for `None`). The trait does
    /// not tie a kind to namespaces: a cluster-scoped kind would answer `Api::all`.
    fn api(client: &kube::Client, namespace: Option<&str>) -> Api<Self>;
    /// False for a cluster-scoped kind: one controller and one watch cache for it, whatever
    /// `--namespace` says, and no namespace grants (see [`crate::controller::driver::gate`]).
    const NAMESPACED: bool = true;
    /// Server-side apply field manager for this kind's status: `aigw/` and the kind's name in
    /// lower case.
    fn manager() -> String {
        format!("aigw/{}", Self::KIND.to_lowercase())
    }

    /// Makes a copy read from the cluster (a watch event, a re-read) what reconciles read: the
    /// create intent of its `aigw.io/create-intent` annotation shown in its status
    /// ([`crate::controller::driver::status::project_intent`]), and its `aigw.io/installation`
    /// annotation, when it names the installation the status records, kept as a flag of the
    /// status ([`crate::controller::driver::status::project_claim`]).
    fn prepare(&mut self) {
        use crate::controller::driver::status::{project_claim, project_intent};
        let intent = CreateIntent::of(self.meta());
        project_intent(intent, self.status_mut());
        let recorded = self
            .status()
            .and_then(|s| s.installation())
            .map(str::to_owned);
        if let Some(recorded) = recorded
            && project_claim(self.meta_mut(), &recorded)
            && let Some(status) = self.status_mut()
        {
            *status.claim_annotated_mut() = true;
        }
    }

    /// Observe the remote object, diff it against the spec, create or update only when they
    /// differ, and fill `status` with what the API reported.
    fn apply(
        &self,
        cx: &Cx<'_, Self>,
        status: &mut Self::Status,
    ) -> impl Future<Output = Result<Vec<Change>, Halt>> + Send;

    /// Read-only: GET the remote object this resource manages (if it knows one), record what it
    /// reports in `status`, and return the spec fields that differ. Never writes remotely. Used
    /// to keep status following the remote while the object waits for a spec change.
    fn observe_only(
        &self,
        cx: &Cx<'_, Self>,
        status: &mut Self::Status,
    ) -> impl Future<Output = Result<Vec<&'static str>, Halt>> + Send;

    /// Honour `deletionPolicy` for the remote object (treating "already gone" as done). Resolve
    /// the client (`cx.api()`) only when an API call is needed.
    fn cleanup(&self, cx: &Cx<'_, Self>) -> impl Future<Output = Result<Vec<Change>, Halt>> + Send;

    /// What a create that never made the remote object left behind (the IAM scope of a
    /// workspace the API refused), removed when a resource that manages nothing goes
    /// ([`super::verbs::Verbs::remove_unused`]).
    fn remove_unused(
        &self,
        _cx: &Cx<'_, Self>,
    ) -> impl Future<Output = Result<Vec<Change>, Halt>> + Send {
        async { Ok(Vec::new()) }
    }

    /// The Secrets whose values an API error about this object could quote although a
    /// reconcile need not read them ([`super::echoes`]): the credentials it was delivered, the
    /// upstream credentials of what it binds. None by default.
    fn echoable(&self, _ctx: &Context) -> Vec<super::echoes::Echoable> {
        Vec::new()
    }

    /// When this object needs looking at again sooner than the drift interval (a rotation that
    /// falls due), given the status just computed.
    fn due_in(&self, _status: &Self::Status) -> Option<Duration> {
        None
    }

    /// Finishes a side effect recorded before `managementPolicy: Observe` was set (a rotation
    /// whose values may be on their way to the Secret): Observe stops new writes, it never
    /// leaves one half done. `None` when nothing is in flight.
    fn finish_in_flight(
        &self,
        _cx: &Cx<'_, Self>,
        _status: &mut Self::Status,
    ) -> impl Future<Output = Result<Option<Change>, Halt>> + Send {
        async { Ok(None) }
    }

    /// The remote object this one gave up to be replaced, while no replacement exists yet (an
    /// API key whose rotation answer was lost): said in Observe, which creates no replacement,
    /// as the clause after "this `<kind>`" instead of "names no remote object".
    fn awaiting_replacement(_status: &Self::Status) -> Option<String> {
        None
    }

    /// True when something besides the spec and the remote object asks for work now (a
    /// rotation whose time has come), so a reconcile must not trust the recorded state.
    fn due_now(&self, _status: &Self::Status) -> bool {
        false
    }

    /// True when something besides the spec asks for a write although the spec was applied,
    /// known from the object alone (a ConfigRollout's `aigw.io/rollout-config` annotation on
    /// an ApiKey that its status does not show applied), so a reconcile must not trust the
    /// recorded state.
    fn asks_for_apply(&self, _status: &Self::Status) -> bool {
        false
    }

    /// True for kinds whose drift is found by the list-based drift pass ([`crate::controller::driver::drift`]):
    /// between drift checks, a reconcile of an applied spec trusts the recorded state and makes
    /// no API call. False: every reconcile reads the remote object.
    const LISTED: bool = false;

    /// False when this object keeps something its kind's list does not show (a guardrail's MCP
    /// server mappings): between drift checks it is not trusted on its recorded state, and it
    /// is read at every drift check, as an object of an unlisted kind is.
    fn listed_whole(&self) -> bool {
        true
    }

    /// False when something besides the spec asks for a write although the spec was applied
    /// (a Secret value the object substitutes changed). Checked before trusting the status,
    /// when the watch of those inputs reported a change ([`crate::controller::driver::drift::Drift::inputs_changed`]).
    fn inputs_unchanged(
        &self,
        _cx: &Cx<'_, Self>,
        _status: &Self::Status,
    ) -> impl Future<Output = bool> + Send {
        async { true }
    }

    /// `spec.promotion`, for the kinds whose changes wait behind resources of their kind
    /// (Config, Guardrail, ClusterGuardrail): see [`crate::controller::driver::promotion`].
    fn promotion(&self) -> Option<&Promotion> {
        None
    }

    /// `status.history` (newest first), for the kinds that keep one.
    fn history(_status: &Self::Status) -> &[AppliedVersion] {
        &[]
    }

    /// `status.history`, to mark an entry (a promotion override).
    fn history_mut(_status: &mut Self::Status) -> Option<&mut Vec<AppliedVersion>> {
        None
    }

    /// `status.revisionOrder`, for the kinds that keep `history`.
    fn revision_order(_status: &Self::Status) -> Option<&RevisionOrder> {
        None
    }

    /// Notes in `status.revisionOrder` the revision (`aigw.io/revision`) this resource stands
    /// at, once its spec is applied: a revision that moved only the annotation counts as
    /// applied then too (nothing was written for it). True when the status changed.
    fn note_revision(&self, _status: &mut Self::Status) -> bool {
        false
    }
}

/// [`Managed::promotion`], [`Managed::history`] and [`Managed::history_mut`] of a kind whose
/// status keeps `history` ([`crate::resources::config::AppliedHistory`]); `|o| expr` is its
/// `spec.promotion`.
macro_rules! promotes {
    (|$o:ident| $promotion:expr) => {
        fn promotion(&self) -> Option<&$crate::resources::promotion::Promotion> {
            let $o = self;
            $promotion.as_ref()
        }
        fn history(status: &Self::Status) -> &[$crate::resources::config::AppliedVersion] {
            $crate::resources::config::AppliedHistory::history(status)
        }
        fn history_mut(
            status: &mut Self::Status,
        ) -> Option<&mut Vec<$crate::resources::config::AppliedVersion>> {
            Some($crate::resources::config::AppliedHistory::history_mut(
                status,
            ))
        }
        fn revision_order(
            status: &Self::Status,
        ) -> Option<&$crate::resources::promotion::RevisionOrder> {
            Some($crate::resources::config::AppliedHistory::revision_order(
                status,
            ))
        }
        fn note_revision(&self, status: &mut Self::Status) -> bool {
            use $crate::resources::config::AppliedHistory;
            let Some(revision) =
                $crate::resources::promotion::revision_of(kube::Resource::meta(self))
            else {
                return false;
            };
            let order = status.revision_order_mut();
            if order.recent.first().map(String::as_str) == Some(revision) {
                return false;
            }
            order.record(revision);
            true
        }
    };
}
pub(crate) use promotes;

/// [`Managed::api`] of a namespaced kind.
macro_rules! namespaced_api {
    () => {
        fn api(client: &kube::Client, namespace: Option<&str>) -> kube::Api<Self> {
            $crate::controller::scoped::<Self>(client, namespace)
        }
    };
}
pub(crate) use namespaced_api;

/// [`Managed::api`] and [`Managed::NAMESPACED`] of a cluster-scoped kind.
macro_rules! cluster_api {
    () => {
        fn api(client: &kube::Client, _namespace: Option<&str>) -> kube::Api<Self> {
            kube::Api::all(client.clone())
        }
        const NAMESPACED: bool = false;
    };
}
pub(crate) use cluster_api;

/// The values a reconcile conceals, each once, as long as they are within what one message
/// is looked at for ([`CONCEALED_BYTES`]): past it every message is withheld
/// ([`crate::api::concealment::TOO_MANY_TO_CHECK`]), and none is kept.
fn concealed() -> Budget {
    Budget::up_to(usize::MAX, CONCEALED_BYTES)
}

/// What a kind's apply/cleanup may use: the gate to the management API for this object (the
/// only way to its client), the Kubernetes client, and status writes guarded by the
/// resourceVersion this reconcile last saw.
pub struct Cx<'a, K: Managed> {
    pub ctx: &'a Context,
    pub objects: Api<K>,
    pub object: &'a K,
    /// Every management-API call for this object passes here.
    pub gate: Gate<'a, K>,
    /// The resourceVersion of the object as this reconcile last read or wrote it: every status
    /// write is a compare-and-swap against it.
    resource_version: std::sync::Mutex<Option<String>>,
    /// The status last written by `save_status`, so the final write compares against what the
    /// cluster holds now rather than what the reconcile started from.
    saved: std::sync::Mutex<Option<K::Status>>,
    /// Values no message of this reconcile may carry ([`Cx::conceal`]).
    concealed: std::sync::Mutex<Budget>,
    /// Set once this reconcile concealed the values of its object's echoable Secrets
    /// ([`Cx::scrub_failure`]).
    echoes_concealed: std::sync::atomic::AtomicBool,
    /// The status as read, when it holds an intent this reconcile resumes (an interrupted
    /// create, rotation or reset): its result writes are conflict-proof too.
    resumed: Option<K::Status>,
    /// Set once this reconcile was handed a client for a remote write: from then on what it
    /// writes into the status is the result of a side effect (a hash of what a PUT sent, a new
    /// id), conflict-proof like an intent's result.
    wrote_remotely: std::sync::atomic::AtomicBool,
    /// Whether the object carries aigw's finalizer (as read, or since this reconcile added it).
    finalized: std::sync::atomic::AtomicBool,
    /// Set once a metadata write of this reconcile carried this installation's claim.
    claimed: std::sync::atomic::AtomicBool,
    /// Set once this reconcile published a Warning ([`Cx::warn`]).
    warned: std::sync::atomic::AtomicBool,
    /// Set when this reconcile took a read the drift pass asked for, or a changed-inputs mark
    /// ([`Cx::took_read_request`]).
    read_requested: std::sync::atomic::AtomicBool,
    /// Set when this reconcile takes a new object while the claim annotation is guarded at
    /// admission ([`Cx::taking`]): its first write carries the claim, and nothing else comes
    /// before it ([`Cx::settle_claim`]).
    owes_claim: std::sync::atomic::AtomicBool,
}

impl<'a, K: Managed> Cx<'a, K> {
    /// What the create about to be sent carries into its intent ([`Calls::sent`]): the name
    /// and workspace it creates with, the slug `body` names, and a keyed hash of `body` with
    /// this resource's uid.
    ///
    /// [`Calls::sent`]: super::calls::Calls::sent
    pub fn create_attempt(
        &self,
        name: Option<String>,
        workspace_id: Option<String>,
        body: &impl serde::Serialize,
    ) -> crate::resources::common::CreateAttempt {
        let sent = serde_json::to_value(body).ok();
        let slug = sent.as_ref().and_then(|body| body.get("slug")?.as_str());
        crate::resources::common::CreateAttempt {
            name,
            workspace_id,
            slug: slug.map(str::to_string),
            body_hash: super::create::body_hash(
                &self.ctx.hash_key,
                self.object.meta().uid.as_deref(),
                body,
            ),
            ended_at: None,
            intent: None,
        }
    }

    pub fn new(ctx: &'a Context, objects: Api<K>, object: &'a K) -> Self {
        Self {
            ctx,
            objects,
            object,
            gate: Gate::new(ctx, object),
            resource_version: std::sync::Mutex::new(object.resource_version()),
            saved: Default::default(),
            concealed: std::sync::Mutex::new(concealed()),
            echoes_concealed: Default::default(),
            resumed: object.status().filter(|s| s.has_intent()).cloned(),
            wrote_remotely: Default::default(),
            finalized: ctx.installation.holds(object).into(),
            claimed: Default::default(),
            warned: Default::default(),
            read_requested: Default::default(),
            owes_claim: Default::default(),
        }
    }

    /// This reconcile takes its object (claimed by nobody) without a status record first,
    /// the claim annotation being guarded at admission
    /// ([`crate::controller::state::claim_guard`]): the first metadata write carries the claim
    /// (the finalizer and create intent before a create), and a reconcile that would write a
    /// status, publish an event or write remotely before one writes the claim first
    /// ([`Self::settle_claim`]). Each such write carries the resourceVersion the decision was
    /// made on, so of two installations racing for the object exactly one takes it.
    pub(super) fn taking(self, take: bool) -> Self {
        self.owes_claim
            .store(take, std::sync::atomic::Ordering::SeqCst);
        self
    }

    /// Writes the claim of an object this reconcile takes ([`Self::taking`]) when no write has
    /// carried it yet: one metadata write of the annotation, guarded by the resourceVersion the
    /// decision was made on (a conflict records nothing: the next reconcile decides again).
    /// Called before any status write or event of the reconcile.
    pub(super) async fn settle_claim(&self) -> Result<(), Halt> {
        use std::sync::atomic::Ordering::SeqCst;
        if self.ctx.dry_run || !self.owes_claim.load(SeqCst) || self.claimed.load(SeqCst) {
            return Ok(());
        }
        let name = self.name();
        self.write_claim()
            .await
            .map_err(|e| write_failed::<K>("claim", &name, e))
    }

    /// One metadata write of this installation's claim annotation alone, guarded by the
    /// resourceVersion this reconcile last saw ([`Self::settle_claim`], [`Self::write_owed_claim`]).
    async fn write_claim(&self) -> Result<(), kube::Error> {
        use crate::controller::state::installation::ANNOTATION;
        let metadata = serde_json::json!({
            "resourceVersion": self.expected_version(),
            "annotations": {ANNOTATION: self.ctx.installation.id()},
        });
        let intent = self
            .last_saved()
            .or_else(|| self.object.status().cloned())
            .is_some_and(|s| s.has_intent());
        self.patch_metadata(metadata, intent).await?;
        self.claimed
            .store(true, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }

    /// Whether this installation's record is owed to the object's status: none is recorded
    /// yet, and the status this reconcile writes would record it ([`Self::records_installation`]).
    /// An object claimed by its annotation alone (taken before the record was written with a
    /// claim, as by a release from before it) gets it with its next reconcile, even when
    /// nothing else of its status changes.
    pub(super) fn owes_record(&self) -> bool {
        let recorded = match self.last_saved() {
            Some(saved) => saved.installation().is_some(),
            None => self.object.recorded_installation().is_some(),
        };
        !self.ctx.dry_run && !recorded && self.records_installation()
    }

    /// Whether the status this reconcile writes records this installation
    /// (`status.installation`): its status records it already, or none is recorded and the
    /// annotation names it (as read, or written by this reconcile: a claim taken by the guarded
    /// annotation, or one left by a crash before its record).
    fn records_installation(&self) -> bool {
        use crate::controller::state::installation::Claim;
        match self.object.recorded_installation() {
            Some(id) => id == self.ctx.installation.id(),
            None => {
                self.claimed.load(std::sync::atomic::Ordering::SeqCst)
                    || self.ctx.installation.annotated(self.object) == Claim::Ours
            }
        }
    }

    /// The management API client for `op` on this object's remote object, once the gate
    /// allows it ([`Gate::client`]). Before any remote write the object carries aigw's
    /// finalizer, so that what it makes or changes is cleaned up on delete: a create's intent
    /// write adds it ([`Cx::save_intent`]); any other write adds it here first.
    pub async fn api(&self, op: Op) -> Result<&crate::api::Client, Halt> {
        self.client_for(op, true).await
    }

    /// The client for the create protocol's POST ([`super::flow::post_once`]), whose intent
    /// write carries the claim of an object this reconcile takes, before the POST.
    pub(super) async fn create_client(&self) -> Result<&crate::api::Client, Halt> {
        self.client_for(Op::Create, false).await
    }

    /// [`Self::api`]; `settle`: write the claim of an object this reconcile takes before
    /// handing out a client for a remote write, unless the caller's next write carries it.
    async fn client_for(&self, op: Op, settle: bool) -> Result<&crate::api::Client, Halt> {
        let client = self.gate.client(op).await?;
        // Nothing of this reconcile written yet (every write of its object, an intent, a
        // finalizer, a claim or a status, moves the version) nor told: it may still leave for
        // its Connection's line.
        if self.wrote_nothing() && !self.warned.load(std::sync::atomic::Ordering::SeqCst) {
            self.gate.take_turn()?;
        }
        // The create protocol's intent write adds the finalizer; any other write (a create made
        // before the intent, such as a Workspace's IAM scope, included) adds it here first.
        if op.writes() && (op != Op::Create || settle) {
            self.ensure_finalizer().await?;
        }
        // An object this reconcile takes is this installation's before anything is written for
        // it remotely: the intent's or the finalizer's write carried the claim, or it is written
        // now (a create made before the intent, such as a Workspace's IAM scope; an object that
        // carried this installation's finalizer already). A lost claim stops the call here.
        if op.writes() && settle {
            self.settle_claim().await?;
        }
        if op.writes() {
            self.wrote_remotely
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
        Ok(client)
    }

    /// A read through the client for reads ([`Op::Read`]): `read` with it, whose failure says
    /// it could not `action` ("list providers").
    pub async fn read<'c, T, F>(
        &'c self,
        action: impl Into<String>,
        read: impl FnOnce(&'c crate::api::Client) -> F,
    ) -> Result<T, Halt>
    where
        F: Future<Output = Result<T, crate::api::ApiError>>,
    {
        let client = self.api(Op::Read).await?;
        Ok(read(client).await.map_err(|e| Error::api(action, e))?)
    }

    /// Adds aigw's finalizer when the object lacks it: one metadata write guarded by the
    /// resourceVersion this reconcile last saw.
    pub async fn ensure_finalizer(&self) -> Result<(), Halt> {
        if self.ctx.dry_run || self.finalized.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(());
        }
        self.write_metadata(serde_json::Map::new(), false).await
    }

    /// Records the create intent `status` holds (its `pendingCreate` and `createAttempt`, with
    /// the intent's id) in the `aigw.io/create-intent` annotation, adding aigw's finalizer in the
    /// same write: one metadata write guarded by the resourceVersion this reconcile last saw,
    /// so of two writers acting on the same view exactly one records its intent. From here on
    /// every copy of the object shows the intent in its status
    /// ([`crate::controller::driver::status::project_intent`]) until the status settles it.
    pub async fn save_intent(&self, status: &K::Status) -> Result<(), Halt> {
        if self.ctx.dry_run {
            return Ok(());
        }
        let intent = CreateIntent {
            pending_create: status.pending_create().unwrap_or_default().to_string(),
            create_attempt: status.create_attempt().cloned().unwrap_or_default(),
        };
        let text = serde_json::to_string(&intent)
            .map_err(|e| Error::MissingState(format!("create intent: {e}")))?;
        let mut annotations = serde_json::Map::new();
        annotations.insert(CREATE_INTENT_ANNOTATION.into(), text.into());
        self.write_metadata(annotations, true).await?;
        // What every reader now sees: the status as last written, with this intent.
        let mut shown = self
            .last_saved()
            .or_else(|| self.object.status().cloned())
            .unwrap_or_default();
        *shown.pending_create_mut() = status.pending_create().map(str::to_string);
        *shown.create_attempt_mut() = status.create_attempt().cloned().map(Box::new);
        *self.saved.lock().unwrap_or_else(|e| e.into_inner()) = Some(shown);
        Ok(())
    }

    /// One merge patch of the object's metadata: `annotations`, aigw's finalizer when the
    /// object lacks it, and this installation's claim (`aigw.io/installation`) when it names
    /// none (an object taken by its status record in this reconcile), guarded by the
    /// resourceVersion this reconcile last saw.
    async fn write_metadata(
        &self,
        mut annotations: serde_json::Map<String, serde_json::Value>,
        intent: bool,
    ) -> Result<(), Halt> {
        use crate::controller::state::installation::{ANNOTATION, Claim};
        let claiming = self.ctx.installation.annotated(self.object) == Claim::None;
        if claiming {
            annotations.insert(ANNOTATION.into(), self.ctx.installation.id().into());
        }
        let mut metadata = serde_json::json!({ "resourceVersion": self.expected_version() });
        if !annotations.is_empty() {
            metadata["annotations"] = annotations.into();
        }
        // An object from before claims holds the shared finalizer, which is the finalizer of
        // its claimant: this write's claim makes it this installation's, with no second one
        // (which a downgrade to a release without them would leave on the object).
        let shared = crate::resources::common::FINALIZER;
        let held_once_claimed = claiming && self.object.finalizers().iter().any(|f| f == shared);
        if !self.finalized.load(std::sync::atomic::Ordering::SeqCst) && !held_once_claimed {
            // The whole list as of that resourceVersion, plus ours: the precondition makes
            // replacing it safe.
            let mut finalizers = self.object.finalizers().to_vec();
            finalizers.push(self.ctx.installation.finalizer().to_string());
            metadata["finalizers"] = serde_json::json!(finalizers);
        }
        let name = self.name();
        self.patch_metadata(metadata, intent)
            .await
            .map_err(|e| write_failed::<K>("metadata", &name, e))?;
        self.finalized
            .store(true, std::sync::atomic::Ordering::SeqCst);
        if claiming {
            self.claimed
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
        Ok(())
    }

    /// Merge-patches `metadata` (which carries the resourceVersion precondition) and records
    /// the write: the drift tracker's own-write mark (`intent`: the status then shown holds a
    /// create intent) and the resourceVersion the next write of this reconcile is guarded by.
    async fn patch_metadata(
        &self,
        metadata: serde_json::Value,
        intent: bool,
    ) -> Result<(), kube::Error> {
        let replaced = metadata["resourceVersion"].as_str().map(str::to_string);
        let written = self
            .objects
            .patch_metadata(
                &self.name(),
                &own_write::<K>(),
                &Patch::Merge(serde_json::json!({ "metadata": metadata })),
            )
            .await?;
        let version = written.resource_version();
        self.ctx.drift.wrote(
            &object_key(self.object),
            replaced.as_deref(),
            version.clone(),
            intent,
            None,
        );
        *self
            .resource_version
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = version;
        Ok(())
    }

    /// Writes this installation's claim (`aigw.io/installation`) on an object its status records
    /// here whose annotation names none, when this reconcile wrote no metadata to carry it
    /// ([`Self::write_metadata`]): a new object taken by its record whose reconcile ended in
    /// Observe, a pause or a wait, which may wait for a change of the object, so no later
    /// reconcile would write it. Guarded by the resourceVersion this reconcile last saw (a
    /// conflict: the next reconcile writes it). Not after a remote write (its result is what the
    /// drift tracker waits for; the next reconcile writes the claim then).
    pub(super) async fn write_owed_claim(&self) -> Result<(), Halt> {
        use crate::controller::state::installation::Claim;
        use std::sync::atomic::Ordering::SeqCst;
        let me = self.ctx.installation.id();
        let owed = !self.ctx.dry_run
            && self.object.meta().deletion_timestamp.is_none()
            && self.object.recorded_installation() == Some(me)
            && self.ctx.installation.annotated(self.object) == Claim::None
            && !self.claimed.load(SeqCst)
            && !self.wrote_remotely.load(SeqCst);
        if !owed {
            return Ok(());
        }
        let name = self.name();
        match self.write_claim().await {
            Ok(()) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {
                return Err(Wait::Conflict(format!("{} {name}", K::KIND)).into());
            }
            Err(e) => return Err(Error::kube(format!("claim {} {name}", K::KIND), e).into()),
        }
        Ok(())
    }

    pub fn name(&self) -> String {
        self.object.name_any()
    }

    pub fn namespace(&self) -> String {
        self.object.namespace().unwrap_or_default()
    }

    /// Publishes a Normal event about this object (after its claim: `Self::settle_claim`).
    pub async fn note(&self, reason: &str, message: &str) {
        self.event(EventType::Normal, reason, message).await;
    }

    /// Publishes a Warning event about this object (after its claim: `Self::settle_claim`).
    pub async fn warn(&self, reason: &str, message: &str) {
        self.event(EventType::Warning, reason, message).await;
    }

    /// Publishes an event of `type_` about this object once its claim is settled, its message
    /// scrubbed.
    async fn event(&self, type_: EventType, reason: &str, message: &str) {
        if self.settle_claim().await.is_err() {
            return;
        }
        if type_ == EventType::Warning {
            // Told once: this reconcile goes on rather than leave for its Connection's line
            // and tell it again when it comes back.
            self.warned.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        let message = match type_ {
            // A warning may relay an API's error.
            EventType::Warning => self.scrub_failure(message).await,
            _ => self.scrub(message),
        };
        publish(self.ctx, self.object, type_, reason, &message).await;
    }

    /// Writes `status` now, before a call whose outcome might be lost (intent records) or right
    /// after one (a remote id). The write carries the resourceVersion this reconcile last saw:
    /// if anyone changed the object since, it fails with [`Wait::Conflict`] and nothing that
    /// depends on it may happen. That is what makes an intent a lock: of two writers acting on
    /// the same view, exactly one records its intent; the other re-reads.
    ///
    /// Once this reconcile holds an intent (its last write recorded one, or it resumes one it
    /// read), what it writes next
    /// is the result of a side effect, which must not be lost to a change made during the call
    /// (a `kubectl delete`, an annotation or spec edit): on a conflict it re-reads the object
    /// and, while the status there is still exactly what this reconcile wrote (nobody else took
    /// the work over), writes again on the new resourceVersion.
    pub async fn save_status(&self, status: &K::Status) -> Result<(), Halt> {
        const ATTEMPTS: usize = 5;
        if self.ctx.dry_run {
            // `--dry-run` writes no status: what it would do goes into `Would…` events.
            return Ok(());
        }
        self.settle_claim().await?;
        let saved = self.saved.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let held = saved
            .clone()
            .filter(|s| s.has_intent())
            .or_else(|| self.resumed.clone());
        // The status this reconcile last wrote or read: after a remote write, what it writes
        // next is that write's result, kept while the status there is still this one.
        let mine = match held {
            Some(held) => serde_json::to_value(&held).ok(),
            None if self
                .wrote_remotely
                .load(std::sync::atomic::Ordering::SeqCst) =>
            {
                match saved {
                    Some(saved) => serde_json::to_value(&saved).ok(),
                    None => self
                        .object
                        .status()
                        .and_then(|s| serde_json::to_value(s).ok()),
                }
            }
            None => return self.write_once(status).await,
        };
        for _ in 0..ATTEMPTS {
            match self.write_once(status).await {
                Err(Halt::Wait(Wait::Conflict(_))) => {}
                other => return other,
            }
            // The object itself, not its status subresource: the chart grants `get` on the
            // kinds and only `patch` on `*/status`, and the object carries the status anyway.
            let fresh = match self.objects.get(&self.name()).await {
                Ok(mut fresh) => {
                    fresh.prepare();
                    fresh
                }
                // Gone: nothing holds a status any more, and its finalizer kept it until
                // cleanup, so this only happens once the cleanup has run.
                Err(kube::Error::Api(e)) if e.code == 404 => return Ok(()),
                Err(e) => {
                    return Err(
                        Error::kube(format!("re-read {} {}", K::KIND, self.name()), e).into(),
                    );
                }
            };
            if fresh.status().and_then(|s| serde_json::to_value(s).ok()) != mine {
                return Err(Wait::Conflict(format!(
                    "{} {} (its intent was taken over)",
                    K::KIND,
                    self.name()
                ))
                .into());
            }
            debug!(kind = K::KIND, object = %object_key(self.object), "the object changed during a side effect; writing its result on the new version");
            *self
                .resource_version
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = fresh.resource_version();
        }
        Err(Wait::Conflict(format!("{} {}", K::KIND, self.name())).into())
    }

    async fn write_once(&self, status: &K::Status) -> Result<(), Halt> {
        // Fenced like a management-API write: a replica that lost the lease (or, with
        // `--shards`, the object's share) during the reconcile writes no status; the replica
        // that acts on the object now reconciles it, from its intent if one is in flight.
        self.ctx
            .leadership
            .for_object(self.object.meta())
            .may_write()
            .map_err(|why| {
                Wait::NotLeader(format!("status of {} not written: {why}", self.name()))
            })?;
        let expected = self.expected_version();
        // The installation recorded for this object goes on being recorded (also by the
        // kind's field manager), whatever status this reconcile started from; one that took
        // the object by its guarded annotation is recorded with the first status it writes.
        let mut status = status.clone();
        if self.records_installation() {
            *status.installation_mut() = Some(self.ctx.installation.id().to_string());
        }
        let status = &status;
        let written =
            write_status::<K>(&self.objects, &self.name(), status, expected.as_deref()).await?;
        // After a remote write, the next reconcile waits until the cache shows this status;
        // any other write replaces what it waited for.
        let result = self
            .wrote_remotely
            .load(std::sync::atomic::Ordering::SeqCst)
            .then(|| super::drift::Fingerprint::of(&CommonStatus::without_timestamps(status)))
            .flatten();
        self.ctx.drift.wrote(
            &object_key(self.object),
            expected.as_deref(),
            written.clone(),
            status.has_intent(),
            result,
        );
        *self
            .resource_version
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = written;
        *self.saved.lock().unwrap_or_else(|e| e.into_inner()) = Some(status.clone());
        Ok(())
    }

    /// Remembers a Secret value (or a credential) this reconcile handles, so that no message it
    /// records, publishes or logs can carry it, even one an API echoed back.
    /// Short values too: see [`crate::api::concealment`] for where they count.
    /// The operator remembers it for the object past this reconcile
    /// ([`crate::controller::state::secret_values`]): an error logged after it is concealed too.
    pub fn conceal(&self, value: &str) {
        if !value.is_empty() {
            self.concealed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take(value);
            self.ctx
                .secret_values
                .remember(&object_key(self.object), value);
        }
    }

    /// `message` with every concealed value replaced, then trimmed to one line. Values are
    /// replaced first, in every form an API may echo them in (JSON-escaped, URL-encoded, base64,
    /// whitespace collapsed: a value with a newline, a PEM key), so trimming can neither split
    /// nor reshape one; a message quoting part of one is withheld.
    pub fn scrub(&self, message: &str) -> String {
        let concealed = self.concealed.lock().unwrap_or_else(|e| e.into_inner());
        // Values too many to conceal in one message: withheld whole.
        if concealed.withheld {
            return super::status::scrubbed_past_bound(message);
        }
        // With what earlier reconciles of the object handled (a cleanup reads no Secret, yet
        // its API's error may echo one), and the Connections' Secrets.
        let key = object_key(self.object);
        self.ctx.scrub_with(&key, message, &concealed.values)
    }

    /// `message`, a failure about to be recorded, published or logged, scrubbed as
    /// [`Self::scrub`] does once the values of the Secrets an API error about this object could
    /// quote, though this reconcile did not read them, are concealed too
    /// ([`Managed::echoable`], [`super::echoes`]): read once per reconcile, and only when it
    /// fails.
    ///
    /// Those values are bounded per failure ([`super::echoes::Budget`]): past the bound the
    /// message is withheld whole ([`super::echoes::WITHHELD`]), here and in what the
    /// controller's error policy logs of this failure.
    pub async fn scrub_failure(&self, message: &str) -> String {
        let key = object_key(self.object);
        if !self
            .echoes_concealed
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            let budget = super::echoes::within_budget(self, self.object.echoable(self.ctx)).await;
            let kept = (!budget.withheld).then_some(budget.values);
            self.ctx.secret_values.keep_echoes(&key, kept);
        }
        self.scrub(message)
    }

    /// [`Self::scrub_failure`] of `error`'s message when it may quote an answer
    /// ([`Halt::may_quote_an_answer`]); [`Self::scrub`] of one the operator wrote from the
    /// object and its caches alone, which reads no Secret for it.
    pub async fn scrub_halt(&self, error: &Halt) -> String {
        let message = error.to_string();
        match error.may_quote_an_answer() {
            true => self.scrub_failure(&message).await,
            false => self.scrub(&message),
        }
    }

    /// True when this reconcile has not written its object (so far): no status, intent,
    /// finalizer or claim.
    pub(super) fn wrote_nothing(&self) -> bool {
        self.expected_version() == self.object.resource_version()
    }

    fn expected_version(&self) -> Option<String> {
        self.resource_version
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// This reconcile took a read the drift pass asked for, or the mark of a changed input: it
    /// owes them back if it leaves without reading ([`Wait::Throttled`]).
    pub(super) fn took_read_request(&self) {
        self.read_requested
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    pub(super) fn took_a_read_request(&self) -> bool {
        self.read_requested
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The status this reconcile last wrote, if it wrote one.
    pub(super) fn last_saved(&self) -> Option<K::Status> {
        self.saved.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Server-side applies `status` under the kind's field manager. With `expected` set, the write
/// only succeeds while the object still has that resourceVersion. Returns the new one. The
/// answer is the object's metadata only (`as=PartialObjectMetadata`, as
/// [`Api::patch_metadata`] asks for it): nothing else of it is read, so the apiserver encodes,
/// and this process decodes, no spec or status of its own write.
async fn write_status<K: Managed>(
    objects: &Api<K>,
    name: &str,
    status: &K::Status,
    expected: Option<&str>,
) -> Result<Option<String>, Halt> {
    let mut patch = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    if let Some(version) = expected {
        patch["metadata"] = serde_json::json!({ "resourceVersion": version });
    }
    let params = PatchParams {
        force: true,
        ..own_write::<K>()
    };
    let written = async {
        let mut request = kube::core::Request::new(objects.resource_url())
            .patch_subresource("status", name, &params, &Patch::Apply(&patch))
            .map_err(kube::Error::BuildRequest)?;
        request.headers_mut().insert(
            http::header::ACCEPT,
            http::HeaderValue::from_static(METADATA_ONLY),
        );
        let client = objects.clone().into_client();
        client.request::<PartialObjectMeta<K>>(request).await
    }
    .await
    .map_err(|e| write_failed::<K>("status", name, e))?;
    debug!(
        kind = K::KIND,
        object = %format!("{}/{name}", written.namespace().unwrap_or_default()),
        resource_version = written.resource_version().unwrap_or_default(),
        "status written"
    );
    Ok(written.resource_version())
}

/// The parameters of this process's own writes for `K`: of its objects, and of the Secrets and
/// workloads it writes for them. Under the kind's field manager ([`Managed::manager`]), so
/// `managedFields` names the controller behind each field, and without
/// the apiserver's strict field validation. Every body is serialized from the kind's own types,
/// so it holds neither a duplicate nor an unknown field, which is all that check (the default,
/// `Warn`) looks for; on a status apply the check is a second YAML parse of the body, about
/// 0.2 ms of the apiserver's CPU per write (Benchmark chapter). A CRD older than this release
/// still fails a status apply ("field not declared in schema", [`Error::crd_outdated`]).
pub(crate) fn own_write<K: Managed>() -> PatchParams {
    PatchParams {
        field_validation: Some(kube::api::ValidationDirective::Ignore),
        ..crate::controller::runtime::apiserver::written_by(&K::manager())
    }
}

/// The `Accept` of a write whose answer is read for its metadata only.
const METADATA_ONLY: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";

/// A failed write of the `part` ("status", "metadata") of the object `name`: a conflict (the
/// object changed since this reconcile's view) is [`Wait::Conflict`], anything else an error.
fn write_failed<K: Managed>(part: &str, name: &str, e: kube::Error) -> Halt {
    match e {
        kube::Error::Api(status) if status.code == 409 => {
            Halt::from(Wait::Conflict(format!("{} {name}", K::KIND)))
        }
        e => match Error::crd_outdated(K::KIND, name, &e) {
            Some(outdated) => outdated.into(),
            None => Error::kube(format!("write {part} of {} {name}", K::KIND), e).into(),
        },
    }
}

pub fn object_key<K: Managed>(object: &K) -> String {
    format!(
        "{}/{}/{}",
        K::KIND,
        object.namespace().unwrap_or_default(),
        object.name_any()
    )
}

#[cfg(test)]
mod tests {
    use super::{CONCEALED_BYTES, concealed};
    use crate::api::concealment::conceal as conceal_in;

    #[test]
    fn a_reconcile_keeps_each_value_once_and_none_past_the_bound() {
        let mut concealed = concealed();
        concealed.take("token-1");
        concealed.take("token-1");
        assert_eq!(concealed.values, ["token-1"]);
        let big = "x".repeat(CONCEALED_BYTES / 2);
        concealed.take(&big);
        assert_eq!(concealed.values.len(), 2);
        concealed.take(&"y".repeat(CONCEALED_BYTES / 2));
        assert!(concealed.withheld);
        assert!(concealed.values.is_empty(), "nothing copied past the bound");
        concealed.take("token-2");
        assert!(concealed.values.is_empty());
        // What a scrub says then is what one over every value would say.
        let message = "refused: bad key";
        let values = ["token-1".to_string(), big, "y".repeat(CONCEALED_BYTES / 2)];
        assert_eq!(
            crate::controller::driver::status::scrubbed_past_bound(message),
            crate::controller::driver::status::scrubbed(message, &values)
        );
    }

    #[test]
    fn concealed_values_go_before_the_message_is_reshaped() {
        let key = "sk-live-0123456789abcdef\n".to_string();
        let pem =
            "-----BEGIN KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END KEY-----".to_string();
        let message = format!("the API said: bad value '{key}' and {pem:?} and\n{pem}");
        let out =
            crate::controller::driver::status::sanitize_message(&conceal_in(&message, &[key, pem]));
        assert!(!out.contains("sk-live-0123456789abcdef"), "{out}");
        assert!(!out.contains("MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"), "{out}");
        assert!(out.contains("<secret>"), "{out}");
    }

    #[test]
    fn a_message_quoting_part_of_a_value_is_withheld_and_prose_is_not() {
        let key = "sk-proj-Q7vN2mX9pL4kR8tW1yZ6cB3nH5jF0dS2aG7eU4iO9qP1wE6rT3yU8".to_string();
        let echo = "1 validation error for IntegrationCreate: key [input_value='sk-proj-Q7vN2mX9pL4k...1wE6rT3yU8']";
        let out = conceal_in(echo, std::slice::from_ref(&key));
        assert!(!out.contains("Q7vN2mX9"), "{out}");
        assert!(out.contains("withheld"), "{out}");
        // A value that shares words with the message (a service account's field names) does
        // not hide a message that only names them.
        let account = r#"{"type": "service_account", "private_key_id": "3f9a0c1b7d"}"#.to_string();
        let prose = "vertex_service_account_json: private_key_id is missing";
        assert_eq!(conceal_in(prose, &[account]), prose);
    }
}
