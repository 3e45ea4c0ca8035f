//! The reconcile of a remote object, written once for every kind on [`Verbs`]: resolve →
//! desired → observe → compare, then the driver decides ([`decide`]): create once (the intent
//! protocol of [`super::create`], with recovery of a lost answer), refuse an immutable
//! difference, update (`Updated`, or `DriftCorrected` with its record), or nothing. Observe
//! mode reads and compares only ([`observe_only`]); deletion honours `deletionPolicy`
//! ([`cleanup`], [`removal`]) and releases what the kind says it must not delete. What a read
//! finds is taken as recorded, adopted or made by the create in flight ([`taking`]). The
//! decisions are pure functions, proven by the table tests below.

use super::calls::{Calls, Found, Posted, Remote};
use super::create::{Created, clear_intent, create_once, made_by_unfinished_create};
use super::verbs::{Comparison, Verbs};
use super::{Change, Cx, object_key, observed, orphaned, removed};
use crate::controller::driver::gate::Op;
use crate::controller::driver::status::{CommonStatus, IntentStatus};
use crate::controller::error::{Error, Halt};
use crate::controller::{now_rfc3339, spec_already_applied};
use crate::resources::common::Naming;

/// What the driver does with an observed remote object.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// There is none: create it, once.
    Create,
    /// It matches the desired state: no write.
    InSync,
    /// It differs in fields no update can change: `Stalled/InvalidSpec`, no write.
    Refuse(Vec<&'static str>),
    /// It differs: one update. `drift`: the spec was applied already and the remote object was
    /// edited outside aigw since (`DriftCorrected`); otherwise the spec changed (`Updated`).
    Update { drift: bool },
}

/// The driver's choice for the remote object `comparison` describes (`None`: there is none),
/// given whether this generation of the spec was applied already.
pub fn decide(comparison: Option<&Comparison>, applied: bool) -> Step {
    match comparison {
        None => Step::Create,
        Some(c) if !c.immutable.is_empty() => Step::Refuse(c.immutable.clone()),
        Some(c) if c.differs.is_empty() => Step::InSync,
        Some(c) => Step::Update {
            drift: applied && c.edited_outside(),
        },
    }
}

/// What deleting the resource does to the remote object.
#[derive(Debug, Clone, PartialEq)]
pub enum Removal {
    /// `deletionPolicy: Orphan`: left in place, no API call.
    Orphan,
    /// Delete the remote object this resource recorded (never what the spec only names).
    Delete(String),
    /// A create whose outcome was never learned may have made one: delete it only once the
    /// lookup finds it.
    LookUp,
    /// Nothing was made.
    Nothing,
}

/// The removal for a resource whose `deletionPolicy` orphans (or not), which recorded the remote
/// object `recorded`, with a create in flight or not.
pub fn removal(orphans: bool, recorded: Option<String>, create_in_flight: bool) -> Removal {
    match (orphans, recorded, create_in_flight) {
        (true, _, _) => Removal::Orphan,
        (false, Some(key), _) => Removal::Delete(key),
        (false, None, true) => Removal::LookUp,
        (false, None, false) => Removal::Nothing,
    }
}

/// What the driver reads, and whether it must exist: the key, and the spec field that names an
/// object which must (`None`: gone means "create it").
pub fn reading(
    naming: Naming,
    named: Option<&str>,
    recorded: Option<String>,
) -> (Option<String>, bool) {
    match naming {
        Naming::Adopts => (named.map(str::to_string).or(recorded), named.is_some()),
        Naming::CreatesAs => (recorded.or(named.map(str::to_string)), false),
    }
}

/// How the driver takes an object a read found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taking {
    /// The status recorded it: nothing to check.
    Recorded,
    /// The spec adopts it ([`Naming::Adopts`]): its workspace must be granted too.
    Adopted,
    /// Found by the identity a create sends, never recorded, not made by the create in flight:
    /// an adoption, which needs the adoption grant besides its workspace.
    AdoptedUnderGrant,
    /// The create in flight made it (its answer was lost): this resource's own.
    MadeByCreate,
}

/// How a found object is taken, for a kind that `naming`s the spec's named object, given
/// whether the spec names one, whether the status recorded one before this read, and (for
/// [`Naming::CreatesAs`]) whether a create is in flight that made this one.
pub fn taking(naming: Naming, named: bool, recorded: bool, made_by_create: bool) -> Taking {
    match naming {
        Naming::Adopts if named => Taking::Adopted,
        Naming::Adopts => Taking::Recorded,
        Naming::CreatesAs if recorded => Taking::Recorded,
        Naming::CreatesAs if made_by_create => Taking::MadeByCreate,
        Naming::CreatesAs => Taking::AdoptedUnderGrant,
    }
}

/// What becomes of the object an earlier create made whose answer, with the one-time values it
/// carried, was lost (a kind that issues values: [`super::issuing::Issues::recovery`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Recovery {
    /// Take it as it is.
    Found,
    /// Take it, and rotate at once for this reason: its values were lost with the answer.
    Rotate(&'static str),
    /// Take it: the Secret holds its values already (a status write was lost, not the answer).
    Stored,
    /// Take it under the adoption grant (not proven this create's, so never deleted), and record
    /// a rotation to store a value of it.
    Adopt,
    /// Delete it (its value exists nowhere) and create again.
    Replace,
}

/// What follows a create whose values could not be written into the Secret.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Undelivered {
    /// The write whose answer was lost stored them after all.
    Stored,
    /// Record a rotation: it issues new values once the Secret may be written.
    Rotate,
    /// Delete the object nobody can hold the values of; if that fails, `or_rotate` records a
    /// rotation instead (otherwise the failure is the error).
    Discard { or_rotate: bool },
}

/// The step after a failed delivery, for a kind that `discards` undelivered objects or not,
/// when someone else's Secret took the name (`conflict`) and whether the Secret names the new
/// object (`held`).
pub fn undelivered(discards: bool, conflict: bool, held: bool) -> Undelivered {
    match (discards, conflict, held) {
        (false, _, _) => Undelivered::Rotate,
        (true, true, _) => Undelivered::Discard { or_rotate: false },
        (true, false, true) => Undelivered::Stored,
        (true, false, false) => Undelivered::Discard { or_rotate: true },
    }
}

/// Brings the remote object in line with the spec, then runs the kind's follow-up.
pub async fn apply<K: Verbs>(
    object: &K,
    cx: &Cx<'_, K>,
    status: &mut K::Status,
) -> Result<Vec<Change>, Halt> {
    let first_sight = K::recorded(status).is_none();
    let (desired, remote, comparison, step) = found(object, cx, status).await?;
    let mut changes = match (step, &remote, &comparison) {
        (Step::Create, _, _) => vec![create(object, cx, status, &desired).await?],
        (Step::InSync, _, _) => Vec::new(),
        (Step::Refuse(fields), Some(remote), _) => return Err(refusal::<K>(remote, &fields).into()),
        (Step::Update { drift }, Some(remote), Some(comparison)) => {
            let change = update(object, cx, status, &desired, remote, comparison, drift).await?;
            vec![change]
        }
        // `decide` refuses or updates only an observed object.
        (Step::Refuse(_) | Step::Update { .. }, _, _) => Vec::new(),
    };
    changes.extend(object.sync_sub_resources(cx, status).await?);
    changes.extend(object.follow_up(cx, status, &desired, first_sight).await?);
    Ok(changes)
}

/// What a reconcile finds before it writes: the desired state, the remote object (what it was
/// compared with recorded in `status`), how the two compare, and the step that takes.
pub(super) async fn found<K: Verbs>(
    object: &K,
    cx: &Cx<'_, K>,
    status: &mut K::Status,
) -> Result<(K::Desired, Option<Remote<K>>, Option<Comparison>, Step), Halt> {
    let desired = object.resolve(cx, status).await?;
    let remote = observe(object, cx, status, &desired).await?;
    if remote.is_some() {
        object.record_compared(status, &desired);
    }
    let applied = spec_already_applied(
        object.meta().generation,
        status.observed_generation(),
        status.conditions(),
    );
    let comparison = remote
        .as_ref()
        .map(|remote| K::Calls::compare(object, &desired, remote, status));
    let step = decide(comparison.as_ref(), applied);
    Ok((desired, remote, comparison, step))
}

/// Why the remote object cannot be brought in line: `fields` no update can change.
pub(super) fn refusal<K: Verbs>(remote: &Remote<K>, fields: &[&str]) -> Error {
    Error::InvalidSpec(format!(
        "remote {} {} has a different {} and the API cannot change it; create a new {} instead",
        K::WHAT,
        K::Calls::key(remote),
        fields.join(", "),
        K::KIND
    ))
}

/// Read-only: the spec fields that differ from the remote object (none when there is none).
/// Never writes remotely.
pub async fn observe_only<K: Verbs>(
    object: &K,
    cx: &Cx<'_, K>,
    status: &mut K::Status,
) -> Result<Vec<&'static str>, Halt> {
    let desired = object.observed_inputs(cx, status).await?;
    let Some(remote) = observe(object, cx, status, &desired).await? else {
        return Ok(Vec::new());
    };
    let mut fields = K::Calls::compare(object, &desired, &remote, status).fields();
    fields.extend(object.sub_resources_differ(cx, status).await?);
    Ok(fields)
}

/// Honours `deletionPolicy` for what this resource recorded: never what the spec only names,
/// and what an unfinished create made only once the lookup finds it; what the kind says must
/// not be deleted ([`Verbs::release`]) is left in place without a call. "Already gone" is done.
pub async fn cleanup<K: Verbs>(object: &K, cx: &Cx<'_, K>) -> Result<Vec<Change>, Halt> {
    let status = object.status().cloned().unwrap_or_default();
    let recorded = K::recorded(&status);
    let key = match removal(
        object.orphans(),
        recorded.clone(),
        status.pending_create().is_some(),
    ) {
        Removal::Orphan => {
            let what = format!("{} {}", K::WHAT, K::shown(&status).unwrap_or_default());
            return Ok(orphaned(&what));
        }
        Removal::Delete(key) => key,
        Removal::LookUp => {
            let lookup = K::Calls::find_created(object, cx, &status);
            match made_by_unfinished_create(&status, K::WHAT, lookup, cx.ctx.call_windows).await? {
                Some(found) => K::Calls::found_key(&found),
                // Proven never made: only what was made for it may be left.
                None => return Verbs::remove_unused(object, cx).await,
            }
        }
        Removal::Nothing => return Verbs::remove_unused(object, cx).await,
    };
    if let Some(why) = object.release(cx, &key, &status).await? {
        return Ok(vec![Change::new(
            "Released",
            format!("left {} {key} in place without a call: {why}", K::WHAT),
        )]);
    }
    object.before_delete(cx, &key).await?;
    let client = cx.api(Op::Delete).await?;
    let (reason, verb) = K::REMOVAL;
    let what = format!("{} {}", K::WHAT, K::shown(&status).unwrap_or(key.clone()));
    let result = K::Calls::delete(object, cx, client, &key, &status).await;
    if let Err(error) = &result
        && let Some(refused) = object.delete_refused(&key, error)
    {
        return Err(refused.into());
    }
    Ok(removed(reason, verb, &what, result)?)
}

/// GETs the remote object the spec names or the status recorded ([`reading`]), takes it
/// ([`taking`]) and records what the API reports. Only "not found" means gone; an adopted
/// object's workspace must be granted too, and one found by the identity a create sends needs
/// the adoption grant unless the create in flight made it.
pub(super) async fn observe<K: Verbs>(
    object: &K,
    cx: &Cx<'_, K>,
    status: &mut K::Status,
    desired: &K::Desired,
) -> Result<Option<Remote<K>>, Halt> {
    let named = object.named_remote();
    let recorded = K::recorded(status);
    let (Some(key), must_exist) = reading(K::NAMING, named, recorded.clone()) else {
        return Ok(None);
    };
    let client = cx.api(Op::Read).await?;
    let what = format!("{} {key}", K::WHAT);
    let adopted_by = must_exist.then_some(K::NAMED_BY);
    let found = match (
        K::Calls::observe(object, client, &key, status).await,
        adopted_by,
    ) {
        (Ok(None), Some(field)) => {
            return Err(
                Error::MissingState(format!("{what} named by {field} does not exist")).into(),
            );
        }
        (Ok(found), _) => found,
        (Err(e), _) => observed(&what, adopted_by, Err(e))?,
    };
    if let Some(remote) = &found {
        take(
            object,
            cx,
            status,
            desired,
            remote,
            &key,
            recorded.is_some(),
        )
        .await?;
    }
    K::record(status, found.as_ref());
    if found.is_some() && K::NAMING == Naming::CreatesAs {
        // Recorded, made by the create in flight, or adopted under the grant: whatever create
        // was in flight is settled.
        clear_intent(status);
    }
    Ok(found)
}

/// Refuses `remote` (found by `key`) when it can never be this resource's, and checks what
/// taking it needs ([`taking`]), before anything of it is recorded.
async fn take<K: Verbs>(
    object: &K,
    cx: &Cx<'_, K>,
    status: &K::Status,
    desired: &K::Desired,
    remote: &Remote<K>,
    key: &str,
    recorded: bool,
) -> Result<(), Error> {
    if let Some(why) = K::refuses(remote) {
        return Err(Error::InvalidSpec(why));
    }
    let made_by_create = status.pending_create().is_some() && object.made_by_create(status, remote);
    let named = object.named_remote().is_some();
    let adoption = match taking(K::NAMING, named, recorded, made_by_create) {
        Taking::Recorded | Taking::MadeByCreate => return Ok(()),
        Taking::Adopted => false,
        Taking::AdoptedUnderGrant => true,
    };
    if adoption {
        cx.gate.adopting(K::NAMED_BY, key).await?;
    }
    if let Some(why) = object.not_adoptable(desired, remote) {
        return Err(Error::InvalidSpec(format!(
            "{} {key} names an existing {} with {why}; it is not adopted: create the {} with another {}",
            K::NAMED_BY,
            K::WHAT,
            K::KIND,
            K::NAMED_BY.trim_start_matches("spec."),
        )));
    }
    // Adopting reaches an object made outside aigw: what it reaches must be granted too.
    let what = format!("{} {key}", K::WHAT);
    object.reach_adopted(cx, &what, remote).await
}

/// Creates the remote object through the shared protocol ([`create_once`]).
async fn create<K: Verbs>(
    object: &K,
    cx: &Cx<'_, K>,
    status: &mut K::Status,
    desired: &K::Desired,
) -> Result<Change, Halt> {
    if status.pending_create().is_none() {
        object.before_create(cx, desired).await?;
    }
    let before = status.clone();
    let client = cx.create_client().await?;
    let outcome = post_once(object, cx, status, &before, desired, client).await?;
    let recovered = matches!(outcome, Created::Recovered(_));
    if recovered {
        // What the earlier POST sent may be an older spec: read it and compare, soon.
        cx.ctx.drift.flag(object_key(object));
    }
    // The driver's final status write records the key: a crash before it leaves the intent,
    // and the lookup finds the object again.
    object.record_compared(status, desired);
    let key = object.record_created(status, desired, outcome);
    Ok(Change::new(
        "Created",
        match recovered {
            true => format!(
                "found {} {key} from an earlier create whose answer was lost",
                K::WHAT
            ),
            false => format!("created {} {key}", K::WHAT),
        },
    ))
}

/// The create protocol ([`create_once`]) for `desired`, with `client` for the create: the
/// lookup of what an earlier create made reads the intent in `before` (the status as this
/// reconcile found it).
pub(super) async fn post_once<K: Verbs>(
    object: &K,
    cx: &Cx<'_, K>,
    status: &mut K::Status,
    before: &K::Status,
    desired: &K::Desired,
    client: &crate::api::Client,
) -> Result<Created<Posted<K>, Found<K>>, Halt> {
    let sent = K::Calls::sent(object, cx, desired);
    let lookup = K::Calls::find_created(object, cx, before);
    let post = async |client: &crate::api::Client| K::Calls::create(object, client, desired).await;
    create_once(cx, status, K::WHAT, sent, lookup, client, post).await
}

/// One update of what differs, reported as `Updated`, or as `DriftCorrected` with what it
/// replaced kept in the status.
pub(super) async fn update<K: Verbs>(
    object: &K,
    cx: &Cx<'_, K>,
    status: &mut K::Status,
    desired: &K::Desired,
    remote: &Remote<K>,
    comparison: &Comparison,
    drift: bool,
) -> Result<Change, Halt> {
    let key = K::Calls::key(remote);
    let fields = comparison.differs.join(", ");
    let replaced =
        K::RECORDS_DRIFT.then(|| object.replaced(desired, remote, comparison, now_rfc3339()));
    let paths = replaced.as_ref().map(|r| r.paths());
    let at = paths
        .as_deref()
        .map(|p| format!(" at {p}"))
        .unwrap_or_default();
    cx.gate
        .intend(format!("would update {} {key} ({fields}){at}", K::WHAT));
    let client = cx.api(Op::Update).await?;
    let updated = K::Calls::update(object, client, desired, remote)
        .await
        .map_err(|e| Error::api(format!("update {} {key}", K::WHAT), e))?;
    object.record_updated(status, desired, remote, updated);
    if K::READ_AFTER_UPDATE {
        cx.ctx.drift.flag(object_key(object));
    }
    let change = updated_change(K::WHAT, &key, &fields, drift, paths.as_deref());
    if let (true, Some(replaced)) = (drift, replaced) {
        K::record_drift(status, replaced);
    }
    Ok(change)
}

/// How an update of `what` `key` (its differing `fields`) is reported: `Updated`, or
/// `DriftCorrected` naming the `paths` it replaced, kept in the status, where the kind keeps
/// them (else the fields it restored).
pub fn updated_change(
    what: &str,
    key: &str,
    fields: &str,
    drift: bool,
    paths: Option<&str>,
) -> Change {
    match (drift, paths) {
        (false, _) => Change::new("Updated", format!("updated {what} {key} ({fields})")),
        (true, Some(paths)) => Change::new(
            "DriftCorrected",
            format!(
                "{what} {key} was changed outside aigw at {paths}; restored it (status.lastDriftCorrection has the values it replaced)"
            ),
        ),
        (true, None) => Change::new(
            "DriftCorrected",
            format!("{what} {key} was changed outside aigw ({fields}); restored it"),
        ),
    }
}

/// [`Managed::apply`], [`Managed::observe_only`] and [`Managed::cleanup`] of a kind on
/// [`Verbs`]: the driver's flow. `driven!(issuing)`: a kind on
/// [`super::issuing::Issues`], whose apply and cleanup are the issuing flow's (its observe is
/// this one).
macro_rules! driven {
    () => {
        $crate::controller::driver::flow::driven!(flow);
    };
    // A kind whose values the API issues once ([`crate::controller::driver::rotation::Rotates`]):
    // its rotations fall due, and one in flight is finished under Observe.
    (issuing) => {
        $crate::controller::driver::flow::driven!(@flow issuing);

        fn due_in(&self, status: &Self::Status) -> Option<std::time::Duration> {
            let rotation = $crate::resources::rotation::RotationRecord::rotation(status);
            $crate::controller::driver::rotation::due_in(rotation)
        }

        fn due_now(&self, status: &Self::Status) -> bool {
            let rotation = $crate::resources::rotation::RotationRecord::rotation(status);
            $crate::controller::driver::rotation::rotation_pending(self, rotation)
        }

        async fn finish_in_flight(
            &self,
            cx: &$crate::controller::driver::Cx<'_, Self>,
            status: &mut Self::Status,
        ) -> Result<Option<$crate::controller::driver::Change>, $crate::controller::error::Halt> {
            $crate::controller::driver::rotation::finish_recorded(self, cx, status).await
        }
    };
    ($flow:ident) => {
        $crate::controller::driver::flow::driven!(@flow $flow);
    };
    (@flow $flow:ident) => {
        async fn apply(
            &self,
            cx: &$crate::controller::driver::Cx<'_, Self>,
            status: &mut Self::Status,
        ) -> Result<Vec<$crate::controller::driver::Change>, $crate::controller::error::Halt> {
            $crate::controller::driver::$flow::apply(self, cx, status).await
        }

        async fn observe_only(
            &self,
            cx: &$crate::controller::driver::Cx<'_, Self>,
            status: &mut Self::Status,
        ) -> Result<Vec<&'static str>, $crate::controller::error::Halt> {
            $crate::controller::driver::flow::observe_only(self, cx, status).await
        }

        async fn cleanup(
            &self,
            cx: &$crate::controller::driver::Cx<'_, Self>,
        ) -> Result<Vec<$crate::controller::driver::Change>, $crate::controller::error::Halt> {
            $crate::controller::driver::$flow::cleanup(self, cx).await
        }

        async fn remove_unused(
            &self,
            cx: &$crate::controller::driver::Cx<'_, Self>,
        ) -> Result<Vec<$crate::controller::driver::Change>, $crate::controller::error::Halt> {
            $crate::controller::driver::verbs::Verbs::remove_unused(self, cx).await
        }

        fn echoable(
            &self,
            ctx: &$crate::controller::Context,
        ) -> Vec<$crate::controller::driver::echoes::Echoable> {
            $crate::controller::driver::verbs::Verbs::echoable(self, ctx)
        }
    };
}
pub(crate) use driven;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::driver::create::{CallWindows, Lookup, after_lookup};
    use crate::controller::driver::status::IntentStatus;
    use crate::controller::error::Wait;
    use crate::resources::common::CreateAttempt;
    use crate::resources::managed_status::ManagedStatus;
    use crate::resources::rate_limits_policy::RateLimitsPolicyStatus;

    fn differing(immutable: &[&'static str], differs: &[&'static str]) -> Comparison {
        Comparison {
            immutable: immutable.to_vec(),
            differs: differs.to_vec(),
            inputs: Vec::new(),
        }
    }

    #[test]
    fn the_driver_decides_create_update_drift_and_refusal() {
        let same = Comparison::default();
        let edited = differing(&[], &["value"]);
        let fixed = differing(&["unit"], &["value"]);
        let secret_only = Comparison {
            differs: vec!["secretRefs"],
            inputs: vec!["secretRefs"],
            ..Default::default()
        };
        let table: [(&str, Option<&Comparison>, bool, Step); 9] = [
            ("absent: create", None, false, Step::Create),
            ("absent after apply: create again", None, true, Step::Create),
            ("matches: no write", Some(&same), true, Step::InSync),
            (
                "matches a new spec: no write",
                Some(&same),
                false,
                Step::InSync,
            ),
            (
                "differs, spec applied: drift corrected",
                Some(&edited),
                true,
                Step::Update { drift: true },
            ),
            (
                "differs, new generation: updated",
                Some(&edited),
                false,
                Step::Update { drift: false },
            ),
            (
                "only an input changed: updated, no drift",
                Some(&secret_only),
                true,
                Step::Update { drift: false },
            ),
            (
                "immutable differs: refused",
                Some(&fixed),
                true,
                Step::Refuse(vec!["unit"]),
            ),
            (
                "immutable differs on a new spec: refused",
                Some(&fixed),
                false,
                Step::Refuse(vec!["unit"]),
            ),
        ];
        for (case, comparison, applied, step) in table {
            assert_eq!(decide(comparison, applied), step, "{case}");
        }
    }

    #[test]
    fn a_refusal_stalls_until_the_spec_changes() {
        let refused = Error::InvalidSpec("remote x has a different unit".into());
        assert_eq!(refused.category(), "InvalidSpec");
        assert!(!refused.is_transient());
        assert!(!refused.recheck_while_stalled());
    }

    #[test]
    fn observe_reports_every_differing_field_and_immutable_ones_first() {
        let c = differing(&["unit"], &["value", "conditions"]);
        assert_eq!(c.fields(), ["unit", "value", "conditions"]);
        assert!(Comparison::default().fields().is_empty());
    }

    #[test]
    fn deletion_orphans_deletes_what_was_recorded_or_looks_up_an_unfinished_create() {
        let table = [
            (
                "orphan: no delete",
                true,
                Some("p1"),
                false,
                Removal::Orphan,
            ),
            (
                "orphan with a create in flight: no lookup either",
                true,
                None,
                true,
                Removal::Orphan,
            ),
            (
                "recorded: delete it",
                false,
                Some("p1"),
                true,
                Removal::Delete("p1".into()),
            ),
            (
                "unfinished create: look it up first",
                false,
                None,
                true,
                Removal::LookUp,
            ),
            (
                "nothing made: nothing to do",
                false,
                None,
                false,
                Removal::Nothing,
            ),
        ];
        for (case, orphans, recorded, in_flight, expected) in table {
            let recorded = recorded.map(str::to_string);
            assert_eq!(removal(orphans, recorded, in_flight), expected, "{case}");
        }
    }

    #[test]
    fn the_driver_reads_an_adopted_object_first_and_a_create_identity_after_the_record() {
        let (adopts, creates) = (Naming::Adopts, Naming::CreatesAs);
        let p1 = || Some("p1".to_string());
        let table = [
            (
                "adopts: the named object, which must exist",
                adopts,
                Some("named"),
                p1(),
                (Some("named"), true),
            ),
            (
                "adopts: nothing named, the record",
                adopts,
                None,
                p1(),
                (Some("p1"), false),
            ),
            (
                "creates as: the record first",
                creates,
                Some("slug"),
                p1(),
                (Some("p1"), false),
            ),
            (
                "creates as: the identity to create with; gone means create",
                creates,
                Some("slug"),
                None,
                (Some("slug"), false),
            ),
            (
                "nothing named or recorded: no read",
                creates,
                None,
                None,
                (None, false),
            ),
            (
                "adopts, nothing at all: no read",
                adopts,
                None,
                None,
                (None, false),
            ),
        ];
        for (case, naming, named, recorded, (key, must_exist)) in table {
            let expected = (key.map(str::to_string), must_exist);
            assert_eq!(reading(naming, named, recorded), expected, "{case}");
        }
    }

    #[test]
    fn a_found_object_is_recorded_adopted_or_the_create_in_flights_own() {
        use Taking::*;
        let (adopts, creates) = (Naming::Adopts, Naming::CreatesAs);
        // (case, naming, named, recorded before, made by the create in flight, taking)
        let table = [
            (
                "adopts what the spec names: reach its workspace",
                adopts,
                true,
                true,
                false,
                Adopted,
            ),
            (
                "adopts, named and never recorded",
                adopts,
                true,
                false,
                false,
                Adopted,
            ),
            (
                "adopts nothing: the record",
                adopts,
                false,
                true,
                false,
                Recorded,
            ),
            (
                "creates as, recorded: nothing to check",
                creates,
                true,
                true,
                false,
                Recorded,
            ),
            (
                "creates as, recorded, a create marked in flight: the record",
                creates,
                true,
                true,
                true,
                Recorded,
            ),
            (
                "creates as, the create in flight made it",
                creates,
                true,
                false,
                true,
                MadeByCreate,
            ),
            (
                "creates as, someone else's: the adoption grant",
                creates,
                true,
                false,
                false,
                AdoptedUnderGrant,
            ),
        ];
        for (case, naming, named, recorded, made, expected) in table {
            assert_eq!(taking(naming, named, recorded, made), expected, "{case}");
        }
    }

    #[test]
    fn an_update_is_updated_or_drift_corrected_with_or_without_a_record() {
        let table = [
            (
                "new spec",
                false,
                Some("/name"),
                "Updated",
                "updated provider p (name)",
            ),
            (
                "new spec, no record kept",
                false,
                None,
                "Updated",
                "updated provider p (name)",
            ),
            (
                "drift, recorded",
                true,
                Some("/name"),
                "DriftCorrected",
                "provider p was changed outside aigw at /name; restored it (status.lastDriftCorrection has the values it replaced)",
            ),
            (
                "drift, no record kept: the fields",
                true,
                None,
                "DriftCorrected",
                "provider p was changed outside aigw (name); restored it",
            ),
        ];
        for (case, drift, paths, reason, message) in table {
            let change = updated_change("provider", "p", "name", drift, paths);
            assert_eq!(change, Change::new(reason, message), "{case}");
        }
    }

    #[test]
    fn undelivered_values_are_stored_after_all_discarded_or_rotated_in() {
        let table = [
            (
                "a kind that keeps it: rotate",
                false,
                false,
                false,
                Undelivered::Rotate,
            ),
            (
                "keeps it, another's Secret: rotate",
                false,
                true,
                false,
                Undelivered::Rotate,
            ),
            (
                "the lost write stored them",
                true,
                false,
                true,
                Undelivered::Stored,
            ),
            (
                "not stored: delete it, else rotate",
                true,
                false,
                false,
                Undelivered::Discard { or_rotate: true },
            ),
            (
                "another's Secret took the name: delete it",
                true,
                true,
                false,
                Undelivered::Discard { or_rotate: false },
            ),
        ];
        for (case, discards, conflict, held, expected) in table {
            assert_eq!(undelivered(discards, conflict, held), expected, "{case}");
        }
    }

    #[test]
    fn an_api_key_a_lost_create_made_is_stored_adopted_or_replaced() {
        use crate::controller::driver::issuing::Issues;
        use crate::resources::api_key::ApiKey;
        let spec = serde_json::json!({"name": "k", "kind": "service", "scopes": [],
            "secretRef": {"name": "k-secret"}});
        let mut key = ApiKey::new("k", serde_json::from_value(spec).unwrap());
        key.metadata.uid = Some("u1".into());
        let found = |description: &str| -> crate::api::ApiKey {
            serde_json::from_value(serde_json::json!({"id": "k1", "description": description}))
                .unwrap()
        };
        let (ours, other) = (found("created by aigw for u1"), found("a namesake"));
        let table = [
            (
                "the Secret names it: its value is stored",
                &ours,
                true,
                Recovery::Stored,
            ),
            (
                "the Secret names a namesake: stored",
                &other,
                true,
                Recovery::Stored,
            ),
            (
                "ours, its value lost: replaced",
                &ours,
                false,
                Recovery::Replace,
            ),
            (
                "not proven ours: adopted, never deleted",
                &other,
                false,
                Recovery::Adopt,
            ),
        ];
        for (case, found, held, expected) in table {
            assert_eq!(key.recovery(found, held), expected, "{case}");
        }
    }

    fn in_flight(sent_at: &str, ended_at: Option<&str>) -> RateLimitsPolicyStatus {
        RateLimitsPolicyStatus {
            managed: ManagedStatus {
                pending_create: Some(sent_at.into()),
                create_attempt: Some(Box::new(CreateAttempt {
                    intent: Some("intent-1".into()),
                    ended_at: ended_at.map(str::to_string),
                    ..Default::default()
                })),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn a_lost_create_answer_is_recovered_or_waited_for_never_guessed() {
        let long_ago = "2020-01-01T00:00:00Z";
        // Found: adopted, the intent settled.
        let mut status = in_flight(long_ago, Some(long_ago));
        let found = after_lookup(
            &mut status,
            "policy",
            Lookup::Found("p1"),
            CallWindows::default(),
        )
        .unwrap();
        assert_eq!(found, Some("p1"));
        assert_eq!(status.pending_create(), None);
        assert_eq!(status.create_settled(), Some("intent-1"));
        // Unknown (several candidates, an incomplete list): wait, the intent stays.
        let mut status = in_flight(long_ago, Some(long_ago));
        let unknown = after_lookup::<_, &str>(
            &mut status,
            "policy",
            Lookup::Unknown("2".into()),
            CallWindows::default(),
        );
        assert_eq!(unknown.unwrap_err().category(), "CreateOutcomeUnknown");
        assert!(status.pending_create().is_some());
        // Absent in a list taken a settle time after the request ended: POST again.
        let mut status = in_flight(long_ago, Some(long_ago));
        let absent = after_lookup::<_, &str>(
            &mut status,
            "policy",
            Lookup::Absent,
            CallWindows::default(),
        )
        .unwrap();
        assert_eq!(absent, None);
        // Absent, but the request ended just now (lists lag creates): wait, no second POST.
        let now = now_rfc3339();
        let mut status = in_flight(&now, Some(&now));
        let early = after_lookup::<_, &str>(
            &mut status,
            "policy",
            Lookup::Absent,
            CallWindows::default(),
        )
        .unwrap_err();
        assert!(matches!(early, Wait::NotYetSettled { .. }), "{early}");
        assert!(status.pending_create().is_some());
    }
}
