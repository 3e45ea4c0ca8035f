//! The reconcile of a remote object, written once for every kind on [`Verbs`]: resolve →
//! desired → observe → compare, then the driver decides ([`decide`]): create once (the intent
//! protocol of [`super::create`], with recovery of a lost answer), refuse an immutable
//! difference, update (`Updated`, or `DriftCorrected` with its record), or nothing. Observe
//! mode reads and compares only ([`observe_only`]); deletion honours `deletionPolicy`
//! ([`cleanup`], [`removal`]). The decisions are pure functions, proven by the table tests
//! below.

use super::create::{create_once, made_by_unfinished_create};
use super::verbs::{Comparison, Verbs};
use super::{Change, Cx, object_key, observed, orphaned, removed};
use crate::controller::error::Error;
use crate::controller::gate::Op;
use crate::controller::status::{CommonStatus, IntentStatus};
use crate::controller::{now_rfc3339, spec_already_applied};

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

/// Brings the remote object in line with the spec, then runs the kind's follow-up.
pub async fn apply<K: Verbs>(
    object: &K,
    cx: &Cx<'_, K>,
    status: &mut K::Status,
) -> Result<Vec<Change>, Error> {
    let first_sight = K::recorded(status).is_none();
    let inputs = object.resolve(cx, status).await?;
    let desired = object.desired(inputs);
    let remote = observe(object, cx, status).await?;
    let applied = spec_already_applied(
        object.meta().generation,
        status.observed_generation(),
        status.conditions(),
    );
    let comparison = remote
        .as_ref()
        .map(|remote| object.compare(&desired, remote, status));
    let mut changes = match (decide(comparison.as_ref(), applied), &remote, &comparison) {
        (Step::Create, _, _) => vec![create(object, cx, status, &desired).await?],
        (Step::InSync, _, _) => Vec::new(),
        (Step::Refuse(fields), Some(remote), _) => {
            return Err(Error::InvalidSpec(format!(
                "remote {} {} has a different {} and the API cannot change it; create a new {} instead",
                K::WHAT,
                K::key(remote),
                fields.join(", "),
                K::KIND
            )));
        }
        (Step::Update { drift }, Some(remote), Some(comparison)) => {
            let change = update(object, cx, status, &desired, remote, comparison, drift).await?;
            vec![change]
        }
        // `decide` refuses or updates only an observed object.
        (Step::Refuse(_) | Step::Update { .. }, _, _) => Vec::new(),
    };
    changes.extend(object.follow_up(cx, status, &desired, first_sight).await?);
    Ok(changes)
}

/// Read-only: the spec fields that differ from the remote object (none when there is none).
/// Never writes remotely.
pub async fn observe_only<K: Verbs>(
    object: &K,
    cx: &Cx<'_, K>,
    status: &mut K::Status,
) -> Result<Vec<&'static str>, Error> {
    let inputs = object.observed_inputs(cx, status).await?;
    let desired = object.desired(inputs);
    Ok(match observe(object, cx, status).await? {
        Some(remote) => object.compare(&desired, &remote, status).fields(),
        None => Vec::new(),
    })
}

/// Honours `deletionPolicy` for what this resource recorded: never what the spec only names,
/// and what an unfinished create made only once the lookup finds it. "Already gone" is done.
pub async fn cleanup<K: Verbs>(object: &K, cx: &Cx<'_, K>) -> Result<Vec<Change>, Error> {
    let status = object.status().cloned().unwrap_or_default();
    let recorded = K::recorded(&status);
    let key = match removal(
        object.orphans(),
        recorded.clone(),
        status.pending_create().is_some(),
    ) {
        Removal::Orphan => {
            let what = format!("{} {}", K::WHAT, recorded.unwrap_or_default());
            return Ok(orphaned(&what));
        }
        Removal::Delete(key) => key,
        Removal::LookUp => {
            let lookup = object.find_created(cx, &status);
            match made_by_unfinished_create(&status, K::WHAT, lookup).await? {
                Some(found) => K::found_key(&found),
                None => return Ok(Vec::new()),
            }
        }
        Removal::Nothing => return Ok(Vec::new()),
    };
    object.before_delete(cx, &key).await?;
    let client = cx.api(Op::Delete).await?;
    let (reason, verb) = K::REMOVAL;
    let what = format!("{} {key}", K::WHAT);
    removed(
        reason,
        verb,
        &what,
        object.delete(client, &key, &status).await,
    )
}

/// GETs the remote object the spec adopts or the status recorded, and records what the API
/// reports. Only "not found" means gone; an adopted object's workspace must be granted too.
async fn observe<K: Verbs>(
    object: &K,
    cx: &Cx<'_, K>,
    status: &mut K::Status,
) -> Result<Option<K::Remote>, Error> {
    let adopted = object.named_remote();
    let Some(key) = adopted.map(str::to_string).or_else(|| K::recorded(status)) else {
        return Ok(None);
    };
    let client = cx.api(Op::Read).await?;
    let what = format!("{} {key}", K::WHAT);
    let adopted_by = adopted.map(|_| K::ADOPTED_BY);
    let found = match (object.observe(client, &key, status).await, adopted_by) {
        (Ok(None), Some(field)) => {
            return Err(Error::MissingState(format!(
                "{what} named by {field} does not exist"
            )));
        }
        (Ok(found), _) => found,
        (Err(e), _) => observed(&what, adopted_by, Err(e))?,
    };
    if let Some(why) = found.as_ref().and_then(K::refuses) {
        return Err(Error::InvalidSpec(why));
    }
    if let (Some(remote), Some(_)) = (&found, adopted) {
        // Adopting reaches an object made outside aigw: its own workspace must be granted too.
        let reach = format!("the workspace of {what}");
        cx.gate.reach(&reach, K::workspace(remote)).await?;
    }
    K::record(status, found.as_ref());
    Ok(found)
}

/// Creates the remote object through the shared protocol ([`create_once`]).
async fn create<K: Verbs>(
    object: &K,
    cx: &Cx<'_, K>,
    status: &mut K::Status,
    desired: &K::Desired,
) -> Result<Change, Error> {
    let before = status.clone();
    let client = cx.api(Op::Create).await?;
    let sent = object.sent(cx, desired);
    let lookup = object.find_created(cx, &before);
    let post = async |client: &crate::api::Client| object.create(client, desired).await;
    let outcome = create_once(cx, status, K::WHAT, sent, lookup, client, post).await?;
    let recovered = matches!(outcome, super::create::Created::Recovered(_));
    if recovered {
        // What the earlier POST sent may be an older spec: read it and compare, soon.
        cx.ctx.drift.flag(object_key(object));
    }
    // The driver's final status write records the key: a crash before it leaves the intent,
    // and the lookup finds the object again.
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

/// One update of what differs, reported as `Updated`, or as `DriftCorrected` with what it
/// replaced kept in the status.
async fn update<K: Verbs>(
    object: &K,
    cx: &Cx<'_, K>,
    status: &mut K::Status,
    desired: &K::Desired,
    remote: &K::Remote,
    comparison: &Comparison,
    drift: bool,
) -> Result<Change, Error> {
    let key = K::key(remote);
    let replaced = object.replaced(desired, remote, comparison, now_rfc3339());
    let paths = replaced.paths();
    let fields = comparison.differs.join(", ");
    cx.gate.intend(format!(
        "would update {} {key} ({fields}) at {paths}",
        K::WHAT
    ));
    let client = cx.api(Op::Update).await?;
    let updated = object
        .update(client, desired, remote)
        .await
        .map_err(|e| Error::api(format!("update {} {key}", K::WHAT), e))?;
    object.record_updated(status, desired, remote, updated);
    if !drift {
        return Ok(Change::new(
            "Updated",
            format!("updated {} {key} ({fields})", K::WHAT),
        ));
    }
    K::record_drift(status, replaced);
    Ok(Change::new(
        "DriftCorrected",
        format!(
            "{} {key} was changed outside aigw at {paths}; restored it (status.lastDriftCorrection has the values it replaced)",
            K::WHAT
        ),
    ))
}

/// [`Managed::apply`], [`Managed::observe_only`] and [`Managed::cleanup`] of a kind on
/// [`Verbs`]: the driver's flow.
macro_rules! driven {
    () => {
        async fn apply(
            &self,
            cx: &$crate::controller::driver::Cx<'_, Self>,
            status: &mut Self::Status,
        ) -> Result<Vec<$crate::controller::driver::Change>, $crate::controller::error::Error> {
            $crate::controller::driver::flow::apply(self, cx, status).await
        }

        async fn observe_only(
            &self,
            cx: &$crate::controller::driver::Cx<'_, Self>,
            status: &mut Self::Status,
        ) -> Result<Vec<&'static str>, $crate::controller::error::Error> {
            $crate::controller::driver::flow::observe_only(self, cx, status).await
        }

        async fn cleanup(
            &self,
            cx: &$crate::controller::driver::Cx<'_, Self>,
        ) -> Result<Vec<$crate::controller::driver::Change>, $crate::controller::error::Error> {
            $crate::controller::driver::flow::cleanup(self, cx).await
        }
    };
}
pub(crate) use driven;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::create::{Lookup, after_lookup};
    use crate::controller::status::IntentStatus;
    use crate::resources::common::CreateAttempt;
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

    fn in_flight(sent_at: &str, ended_at: Option<&str>) -> RateLimitsPolicyStatus {
        RateLimitsPolicyStatus {
            pending_create: Some(sent_at.into()),
            create_attempt: Some(CreateAttempt {
                intent: Some("intent-1".into()),
                ended_at: ended_at.map(str::to_string),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_lost_create_answer_is_recovered_or_waited_for_never_guessed() {
        let long_ago = "2020-01-01T00:00:00Z";
        // Found: adopted, the intent settled.
        let mut status = in_flight(long_ago, Some(long_ago));
        let found = after_lookup(&mut status, "policy", Lookup::Found("p1")).unwrap();
        assert_eq!(found, Some("p1"));
        assert_eq!(status.pending_create(), None);
        assert_eq!(status.create_settled(), Some("intent-1"));
        // Unknown (several candidates, an incomplete list): wait, the intent stays.
        let mut status = in_flight(long_ago, Some(long_ago));
        let unknown = after_lookup::<_, &str>(&mut status, "policy", Lookup::Unknown("2".into()));
        assert_eq!(unknown.unwrap_err().category(), "CreateOutcomeUnknown");
        assert!(status.pending_create().is_some());
        // Absent in a list taken a settle time after the request ended: POST again.
        let mut status = in_flight(long_ago, Some(long_ago));
        let absent = after_lookup::<_, &str>(&mut status, "policy", Lookup::Absent).unwrap();
        assert_eq!(absent, None);
        // Absent, but the request ended just now (lists lag creates): wait, no second POST.
        let now = now_rfc3339();
        let mut status = in_flight(&now, Some(&now));
        let early = after_lookup::<_, &str>(&mut status, "policy", Lookup::Absent).unwrap_err();
        assert!(matches!(early, Error::NotYetSettled { .. }), "{early}");
        assert!(status.pending_create().is_some());
    }
}
