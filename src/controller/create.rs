//! The one create protocol every kind uses, so a remote object is created exactly once across
//! crashes, failover and lost answers.
//!
//! 1. **Intent first.** `status.pendingCreate` is written (a compare-and-swap on the
//!    resourceVersion this reconcile read) *before* the POST. Of two writers acting on the same
//!    view only one gets its intent in; the other gets a conflict, re-reads, and sees the intent.
//! 2. **POST once.** A definite refusal (4xx) clears the intent. Anything else without a readable
//!    success answer (a timeout, a reset, a 5xx that may have come after the commit, a 2xx that
//!    does not parse) leaves the outcome unknown: the intent stays.
//! 3. **Look before POSTing again.** A reconcile that finds the intent set asks the kind to find
//!    what the earlier POST made, by a deterministic identity where the API keeps one (a
//!    Deployment's `aigw.io/uid` tag), otherwise by exactly one match created after the intent,
//!    in a complete listing. A found object is adopted; a complete listing without it, old
//!    enough for a lagging list to have caught up, allows the POST again; anything else is
//!    "unknown" and is looked at again later, never taken as absence.
//! 4. The remote id is persisted by the reconcile's next status write, right after the answer
//!    (with the result, in one write). A crash before it leaves the intent, and step 3 finds the
//!    object again.

use std::time::Duration;

use super::driver::{Cx, Managed};
use super::error::Error;
use super::now_rfc3339;
use super::status::IntentStatus;
use crate::api::{ApiError, Listing};

/// How long after the intent a list that does not show the object counts as proof that the
/// POST never happened: lists may lag creates (eventual consistency).
pub const LIST_SETTLE: Duration = Duration::from_secs(15);

/// Clock skew tolerated between aigw and the API when comparing `created_at` to the intent.
const CLOCK_SKEW: Duration = Duration::from_secs(5);

/// What a lookup for the object of an earlier create found.
#[derive(Debug)]
pub enum Lookup<F> {
    /// The object the earlier POST made.
    Found(F),
    /// A complete listing shows no such object.
    Absent,
    /// Nothing proves either (an incomplete list, several candidates): look again later.
    Unknown(String),
}

/// How the object came to exist.
#[derive(Debug)]
pub enum Created<N, F> {
    /// This reconcile's POST made it; the answer is here.
    Posted(N),
    /// An earlier POST whose answer was lost made it; the lookup found it.
    Recovered(F),
}

/// Runs the protocol: `lookup` is awaited only when an intent is set, `post` only when no
/// earlier create can have made the object. `what` names the kind in messages ("config").
pub async fn create_once<K, N, F>(
    cx: &Cx<'_, K>,
    status: &mut K::Status,
    what: &str,
    lookup: impl Future<Output = Result<Lookup<F>, Error>>,
    post: impl Future<Output = Result<N, ApiError>>,
) -> Result<Created<N, F>, Error>
where
    K: Managed,
{
    if let Some(intent) = status.pending_create_mut().clone() {
        match lookup.await? {
            Lookup::Found(found) => {
                *status.pending_create_mut() = None;
                return Ok(Created::Recovered(found));
            }
            Lookup::Unknown(why) => {
                return Err(Error::CreateOutcomeUnknown(format!(
                    "an earlier create of this {what} may have succeeded and {why}; looking again before creating"
                )));
            }
            Lookup::Absent if let Some(left) = unsettled_for(&intent) => {
                return Err(Error::NotYetSettled {
                    message: format!(
                        "an earlier create of this {what} is not in the list yet, which may lag; looking again before creating"
                    ),
                    look_again_in: left,
                });
            }
            Lookup::Absent => {}
        }
    }
    *status.pending_create_mut() = Some(now_rfc3339());
    cx.save_status(status).await?;
    match post.await {
        Ok(created) => {
            *status.pending_create_mut() = None;
            Ok(Created::Posted(created))
        }
        Err(e) if e.outcome_unknown() => Err(Error::CreateOutcomeUnknown(format!(
            "the answer to the create of this {what} was lost ({e}); looking it up before creating again"
        ))),
        Err(e) => {
            *status.pending_create_mut() = None;
            Err(Error::api(format!("create {what}"), e))
        }
    }
}

/// How long until the intent is old enough for a list to show what it created; `None` once it
/// is (or when the intent has no readable time).
fn unsettled_for(intent: &str) -> Option<Duration> {
    let due = intent
        .parse::<jiff::Timestamp>()
        .ok()?
        .checked_add(jiff::SignedDuration::try_from(LIST_SETTLE).ok()?)
        .ok()?;
    let left = Duration::try_from(due.duration_since(jiff::Timestamp::now())).ok()?;
    (!left.is_zero()).then_some(left + Duration::from_millis(100))
}

/// The single object of `listing` that `matches` and was created after `intent` (less clock
/// skew). Several candidates, or none in an incomplete listing, are "unknown".
pub fn one_created_since<T>(
    listing: Listing<T>,
    intent: Option<&str>,
    created_at: impl Fn(&T) -> Option<&str>,
    matches: impl Fn(&T) -> bool,
) -> Lookup<T> {
    let since = intent
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .and_then(|t| {
            jiff::SignedDuration::try_from(CLOCK_SKEW)
                .ok()
                .and_then(|d| t.checked_sub(d).ok())
        });
    let complete = listing.complete;
    let mut candidates: Vec<T> = listing
        .items
        .into_iter()
        .filter(|item| matches(item))
        .filter(|item| match (since, created_at(item)) {
            (Some(since), Some(at)) => at.parse::<jiff::Timestamp>().is_ok_and(|at| at >= since),
            // Without both timestamps the match is only by name: not enough to claim it.
            _ => false,
        })
        .collect();
    match candidates.len() {
        1 => candidates.pop().map_or(Lookup::Absent, Lookup::Found),
        0 if complete => Lookup::Absent,
        0 => Lookup::Unknown("the list is incomplete (fewer rows than its total)".into()),
        n => Lookup::Unknown(format!(
            "{n} objects match it, so none can be claimed safely"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct Row(&'static str, &'static str);

    fn listing(rows: Vec<Row>, complete: bool) -> Listing<Row> {
        Listing {
            items: rows,
            complete,
        }
    }

    fn lookup(rows: Vec<Row>, complete: bool) -> Lookup<Row> {
        one_created_since(
            listing(rows, complete),
            Some("2026-01-01T00:00:10Z"),
            |r| Some(r.1),
            |r| r.0 == "a",
        )
    }

    #[test]
    fn exactly_one_match_created_after_the_intent_is_found() {
        let found = lookup(
            vec![
                Row("a", "2026-01-01T00:00:11Z"),
                Row("b", "2026-01-01T00:00:12Z"),
            ],
            true,
        );
        assert!(matches!(found, Lookup::Found(Row("a", _))));
    }

    #[test]
    fn an_older_namesake_is_not_ours() {
        let absent = lookup(vec![Row("a", "2026-01-01T00:00:01Z")], true);
        assert!(matches!(absent, Lookup::Absent));
    }

    #[test]
    fn ambiguity_and_incomplete_lists_are_unknown_never_absent() {
        let two = lookup(
            vec![
                Row("a", "2026-01-01T00:00:11Z"),
                Row("a", "2026-01-01T00:00:12Z"),
            ],
            true,
        );
        assert!(matches!(two, Lookup::Unknown(_)));
        let capped = lookup(vec![Row("b", "2026-01-01T00:00:11Z")], false);
        assert!(matches!(capped, Lookup::Unknown(_)));
    }

    #[test]
    fn a_fresh_intent_has_not_settled() {
        let left = unsettled_for(&now_rfc3339()).unwrap();
        // The intent is rounded to the second, so it may lie up to half a second ahead.
        assert!(left <= LIST_SETTLE + Duration::from_secs(1), "{left:?}");
        assert!(left > Duration::from_secs(10), "{left:?}");
        assert_eq!(unsettled_for("2020-01-01T00:00:00Z"), None);
    }
}
