//! The one create protocol every kind uses, so a remote object is created exactly once across
//! crashes, failover and lost answers.
//!
//! 1. **Intent first.** `status.pendingCreate` (when) and `status.createAttempt` (the name,
//!    workspace and body hash sent) are written (a compare-and-swap on the resourceVersion this
//!    reconcile read) *before* the POST. Of two writers acting on the same view only one gets
//!    its intent in; the other gets a conflict, re-reads, and sees the intent.
//! 2. **POST once, within the window.** The POST must be answered within [`LONGEST_ATTEMPT`]
//!    of the intent (less `SEND_MARGIN`): one that could not be by the time it would leave
//!    (after the rate limiter, the token, a 429's `Retry-After`) is not sent, and the intent is
//!    cleared like after a definite refusal; the next reconcile writes a new one. So nothing the
//!    POST makes is younger than the window a lookup searches, even when the process dies
//!    before it records the request's end. A definite refusal (4xx) clears the intent. Anything
//!    else without a readable success answer (a timeout, a reset, a 5xx that may have come
//!    after the commit, a 2xx that does not parse) leaves the outcome unknown: the intent
//!    stays.
//! 3. **Look before POSTing again.** A reconcile that finds the intent set asks the kind to find
//!    what the earlier POST made, by a deterministic identity where the API keeps one (a
//!    Deployment's `aigw.io/uid` tag), otherwise by exactly one match on what was sent, created
//!    within the POST's window (not before the intent, not after the request ended), claimed by
//!    no other resource, in a complete listing. A found object is adopted; a complete listing
//!    without it, taken a settle time after the request ended (lists lag creates), allows the
//!    POST again, and lets a cleanup go; anything else is "unknown" and is looked at again
//!    later, never taken as absence.
//! 4. The remote id is persisted by the reconcile's next status write, right after the answer
//!    (with the result, in one write). A crash before it leaves the intent, and step 3 finds the
//!    object again.

use std::time::{Duration, Instant};

use crate::api::{ApiError, Client, Listing};
use crate::controller::driver::status::IntentStatus;
use crate::controller::driver::verbs::Verbs;
use crate::controller::driver::{Cx, Managed};
use crate::controller::error::{Error, Halt, Wait};
use crate::controller::now_rfc3339;
use crate::controller::runtime::hash_key::HashKey;
use crate::resources::common::CreateAttempt;

/// How long after the end of the POST a list that does not show the object counts as proof
/// that the POST made nothing: lists may lag creates (eventual consistency). The API documents
/// no bound; 30 s covers the lags the emulator is run with (up to 20 s) with room to spare.
pub const LIST_SETTLE: Duration = Duration::from_secs(30);

/// How long after its intent a POST can have run when its end was never recorded (the process
/// died during it). The client never sends a create that could be answered later than this
/// (less `SEND_MARGIN`), whatever it waited for first.
pub const LONGEST_ATTEMPT: Duration = Duration::from_secs(60);

/// Taken off [`LONGEST_ATTEMPT`] for the POST's deadline: the intent's recorded time is read
/// before the intent write, the deadline's clock after it.
const SEND_MARGIN: Duration = Duration::from_secs(5);

/// Clock skew tolerated between aigw and the API when comparing `created_at` to the intent.
const CLOCK_SKEW: Duration = Duration::from_secs(5);

/// The two bounds the protocol waits out after a lost answer: how long a call may have run
/// ([`LONGEST_ATTEMPT`] by default, `--longest-api-call`) and how long lists may lag creates
/// ([`LIST_SETTLE`], `--list-settle`). Tests against an emulator that is told how much it lags
/// shorten them; the operator's defaults are these constants.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CallWindows {
    pub longest_attempt: Duration,
    pub list_settle: Duration,
}

impl Default for CallWindows {
    fn default() -> Self {
        Self {
            longest_attempt: LONGEST_ATTEMPT,
            list_settle: LIST_SETTLE,
        }
    }
}

impl CallWindows {
    /// `Err` when a call of `timeout` could never be sent within `longest_attempt` (less the
    /// send margin): every create would be refused unsent.
    pub fn check(&self, timeout: Duration) -> Result<(), String> {
        if self.longest_attempt < timeout + SEND_MARGIN {
            return Err(format!(
                "the longest API call ({:?}) must be at least the API timeout ({timeout:?}) plus {SEND_MARGIN:?}",
                self.longest_attempt
            ));
        }
        Ok(())
    }
}

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

impl<F> Lookup<F> {
    /// The one candidate of a listing (`complete` when it held every row) that carries what
    /// marks the object as the create's. None in a complete listing means none was made;
    /// several, or none in an incomplete listing, prove nothing. `what` names the objects
    /// listed ("deployment").
    pub fn only(candidates: impl IntoIterator<Item = F>, complete: bool, what: &str) -> Self {
        let mut candidates: Vec<F> = candidates.into_iter().collect();
        match candidates.len() {
            1 => candidates.pop().map_or(Lookup::Absent, Lookup::Found),
            0 if complete => Lookup::Absent,
            0 => Lookup::Unknown(format!(
                "the {what} list is incomplete (fewer rows than its total, pages or two readings that disagree, or no total to count rows across pages)"
            )),
            n => Lookup::Unknown(format!(
                "{n} rows of the {what} list match it, so none can be claimed safely"
            )),
        }
    }
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
/// earlier create can have made the object, with `client` bound to answer within the intent's
/// window. `what` names the kind in messages ("config"); `sent` is what the POST carries.
pub async fn create_once<K, N, F>(
    cx: &Cx<'_, K>,
    status: &mut K::Status,
    what: &str,
    sent: CreateAttempt,
    lookup: impl Future<Output = Result<Lookup<F>, Halt>>,
    client: &Client,
    post: impl AsyncFnOnce(&Client) -> Result<N, ApiError>,
) -> Result<Created<N, F>, Halt>
where
    K: Managed,
{
    let windows = cx.ctx.call_windows;
    if status.pending_create().is_some()
        && let Some(found) = after_lookup(status, what, lookup.await?, windows)?
    {
        return Ok(Created::Recovered(found));
    }
    let sent = CreateAttempt {
        intent: Some(uuid::Uuid::new_v4().to_string()),
        ..sent
    };
    let intended = Instant::now();
    *status.pending_create_mut() = Some(now_rfc3339());
    *status.create_attempt_mut() = Some(Box::new(sent));
    // The intent and the finalizer in one write, guarded by the resourceVersion: durable
    // before the POST, and the remote object it may make is cleaned up on delete.
    cx.save_intent(status).await?;
    let client = client.answered_by(intended + windows.longest_attempt.saturating_sub(SEND_MARGIN));
    // A POST too late for the window is refused unsent (`PastDeadline`, outcome known): the
    // intent is cleared below like after any definite refusal, and the next reconcile writes
    // a new one, after the wait the API asked for.
    match post(&client).await {
        Ok(created) => {
            clear_intent(status);
            Ok(Created::Posted(created))
        }
        Err(e) if e.outcome_unknown() => {
            if let Some(attempt) = status.create_attempt_mut() {
                attempt.ended_at = Some(now_rfc3339());
            }
            Err(Wait::CreateOutcomeUnknown(format!(
                "the answer to the create of this {what} was lost ({e}); looking it up before creating again"
            ))
            .into())
        }
        Err(e) => {
            clear_intent(status);
            Err(Error::api(format!("create {what}"), e).into())
        }
    }
}

/// What a create whose intent `status` holds does after `lookup`: `Some` (the intent settled)
/// when it found what the earlier POST made; `None` when a complete list, taken a settle time
/// after the request ended, proves it made nothing (POST again); an error that looks again
/// later while neither is proven.
pub fn after_lookup<S: IntentStatus, F>(
    status: &mut S,
    what: &str,
    lookup: Lookup<F>,
    windows: CallWindows,
) -> Result<Option<F>, Wait> {
    match lookup {
        Lookup::Found(found) => {
            clear_intent(status);
            Ok(Some(found))
        }
        Lookup::Unknown(why) => Err(Wait::CreateOutcomeUnknown(format!(
            "an earlier create of this {what} may have succeeded and {why}; looking again before creating"
        ))),
        Lookup::Absent => settled_absence(status, what, windows).map(|()| None),
    }
}

/// The outcome of the create in flight is known: its intent is settled (the annotation that
/// holds it stays, named by `createSettled`, and means nothing more).
pub fn clear_intent<S: IntentStatus>(status: &mut S) {
    *status.pending_create_mut() = None;
    if let Some(id) = status.create_attempt_mut().take().and_then(|a| a.intent) {
        *status.create_settled_mut() = Some(id);
    }
}

/// `Ok` when a complete list without the object proves that the earlier create made nothing:
/// the list was taken a settle time after the request ended. Otherwise an error that looks
/// again once it has. Create and cleanup both ask this before taking absence for proof.
fn settled_absence<S: IntentStatus>(
    status: &S,
    what: &str,
    windows: CallWindows,
) -> Result<(), Wait> {
    let Some(left) = unsettled_for(status, windows) else {
        return Ok(());
    };
    Err(Wait::NotYetSettled {
        message: format!(
            "an earlier create of this {what} is not in the list yet, which may lag; looking again before taking it as absent"
        ),
        look_again_in: left,
    })
}

/// What an unfinished create (its intent in `status`, its outcome never learned) made, for a
/// cleanup: `Some` when `lookup` finds it; `None` when a complete list, taken a settle time
/// after the request ended, shows it never existed; an error while neither can be told.
pub async fn made_by_unfinished_create<S: IntentStatus, F>(
    status: &S,
    what: &str,
    lookup: impl Future<Output = Result<Lookup<F>, Halt>>,
    windows: CallWindows,
) -> Result<Option<F>, Halt> {
    let lookup = match lookup.await {
        // A namesake not proven this create's is never deleted: the resource goes without it.
        Err(e) if unproven_namesake(&e) => {
            tracing::warn!(error = %e, "a cleanup leaves a namesake it cannot prove its own");
            return Ok(None);
        }
        lookup => lookup?,
    };
    match lookup {
        Lookup::Found(found) => Ok(Some(found)),
        Lookup::Absent => {
            settled_absence(status, what, windows)?;
            Ok(None)
        }
        Lookup::Unknown(why) => Err(Wait::CreateOutcomeUnknown(format!(
            "cannot tell whether the {what} of an unfinished create exists: {why}"
        ))
        .into()),
    }
}

/// When the earlier request ended: as recorded, or else as late as it could have.
fn attempt_end<S: IntentStatus>(status: &S, windows: CallWindows) -> Option<jiff::Timestamp> {
    if let Some(ended) = ended_at(status) {
        return Some(ended);
    }
    let sent = status.pending_create()?.parse::<jiff::Timestamp>().ok()?;
    sent.checked_add(jiff::SignedDuration::try_from(windows.longest_attempt).ok()?)
        .ok()
}

/// When the earlier request ended without a readable answer, if that was recorded.
fn ended_at<S: IntentStatus>(status: &S) -> Option<jiff::Timestamp> {
    status
        .create_attempt()?
        .ended_at
        .as_deref()?
        .parse::<jiff::Timestamp>()
        .ok()
}

/// How long until the request's end is old enough for a list to show what it created; `None`
/// once it is (or when the intent has no readable time).
fn unsettled_for<S: IntentStatus>(status: &S, windows: CallWindows) -> Option<Duration> {
    let due = attempt_end(status, windows)?
        .checked_add(jiff::SignedDuration::try_from(windows.list_settle).ok()?)
        .ok()?;
    let left = Duration::try_from(due.duration_since(jiff::Timestamp::now())).ok()?;
    (!left.is_zero()).then_some(left + Duration::from_millis(100))
}

/// The window an earlier create's object was made in: from the intent (less clock skew) to the
/// end of its request (plus clock skew): the recorded end, else the longest a request runs.
#[derive(Debug, Clone, Copy)]
struct Window {
    since: Option<jiff::Timestamp>,
    until: Option<jiff::Timestamp>,
}

impl Window {
    fn of<S: IntentStatus>(status: &S, windows: CallWindows) -> Self {
        let skew = jiff::SignedDuration::try_from(CLOCK_SKEW).unwrap_or_default();
        let since = status
            .pending_create()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            .and_then(|t| t.checked_sub(skew).ok());
        // Without a recorded end (the process died during the POST, or its result write
        // failed) the request ran at most as long as a request can: never unbounded, or a
        // namesake made any time later would count as this create's.
        let until = attempt_end(status, windows).and_then(|t| t.checked_add(skew).ok());
        Self { since, until }
    }

    /// Whether a row's `created_at` is a time a window can hold.
    fn readable(created_at: Option<&str>) -> bool {
        created_at.is_some_and(|t| t.parse::<jiff::Timestamp>().is_ok())
    }

    fn contains(&self, created_at: Option<&str>) -> bool {
        let Some(at) = created_at.and_then(|t| t.parse::<jiff::Timestamp>().ok()) else {
            // Without a time the match is only by name: not enough to claim it.
            return false;
        };
        self.since.is_some_and(|since| at >= since) && self.until.is_none_or(|until| at <= until)
    }
}

/// HMAC-SHA256 (keyed with the operator's [`HashKey`]) over the object's uid and a request
/// body, for [`CreateAttempt::body_hash`]. The body may hold Secret values: without the key, a
/// reader of the object cannot test guesses of them against the hash.
pub fn body_hash<B: serde::Serialize>(
    key: &HashKey,
    uid: Option<&str>,
    body: &B,
) -> Option<String> {
    let bytes = serde_json::to_vec(body).ok()?;
    Some(key.hash([uid.unwrap_or_default().as_bytes(), bytes.as_slice()]))
}

/// Whether `recorded` is the hash of `body` for the object `uid`: by [`body_hash`], or, for an
/// attempt an earlier release recorded (an unkeyed hex SHA-256 over the uid, a NUL and the
/// body), by that, so that a create in flight across the upgrade is still recognised.
pub fn body_hash_matches<B: serde::Serialize>(
    key: &HashKey,
    uid: Option<&str>,
    body: &B,
    recorded: &str,
) -> bool {
    if recorded.starts_with(crate::controller::runtime::hash_key::PREFIX) {
        return body_hash(key, uid, body).as_deref() == Some(recorded);
    }
    let Ok(bytes) = serde_json::to_vec(body) else {
        return false;
    };
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    context.update(uid.unwrap_or_default().as_bytes());
    context.update(b"\0");
    context.update(&bytes);
    crate::controller::runtime::hash_key::hex(context.finish().as_ref()) == recorded
}

/// The single object of `listing` that `matches` what was sent and was created within
/// `window`. Several candidates, or none in an incomplete listing, are "unknown".
fn one_created_within<T>(
    listing: Listing<T>,
    window: Window,
    created_at: impl Fn(&T) -> Option<&str>,
    matches: impl Fn(&T) -> bool,
) -> Lookup<T> {
    let matched: Vec<T> = listing
        .items
        .into_iter()
        .filter(|item| matches(item))
        .collect();
    if matched
        .iter()
        .any(|item| !Window::readable(created_at(item)))
    {
        // Without its time such a row may be the create's or not: never proof of absence.
        return Lookup::Unknown(
            "a listed object that matches it has no readable creation time, so whether the create made it cannot be told".into(),
        );
    }
    let candidates = matched
        .into_iter()
        .filter(|item| window.contains(created_at(item)));
    Lookup::only(candidates, listing.complete, "object")
}

/// The single object of `listing` this resource may take for the one its earlier create made
/// (the intent in `status`; see `one_created_within`): the [`Claimable::keys`] of a candidate
/// that another resource records or names rule it out, and a match is not claimed while
/// another resource's create of the same name (and workspace) is in flight, since it may be
/// that one's whose id is not recorded yet.
///
/// A match is this create's only when a marker the API keeps proves it (`unproven` is `None`
/// for it). Otherwise (`unproven` names it) another party may have made it with the same name
/// in the window (another cluster applying the same manifests, a person in the console): it is
/// taken only under the Connection's adoption grant, and else reported (`AdoptionNotAllowed`,
/// naming it) and left alone, never written to or deleted.
pub async fn one_of_ours<K: Managed, T: Claimable>(
    cx: &Cx<'_, K>,
    status: &K::Status,
    sent: &CreateAttempt,
    mut listing: Listing<T>,
    matches: impl Fn(&T) -> bool,
    unproven: impl Fn(&T) -> Option<String>,
) -> Result<Lookup<T>, Halt> {
    let claimed_elsewhere = cx.gate.claimed_elsewhere();
    listing
        .items
        .retain(|item| !item.keys().into_iter().any(&claimed_elsewhere));
    let complete = listing.complete;
    let window = Window::of(status, cx.ctx.call_windows);
    let found = match one_created_within(listing, window, T::created_at, matches) {
        Lookup::Found(_) if cx.gate.attempts_elsewhere(sent) => {
            return Ok(Lookup::Unknown(
                "another resource's create with the same name is in flight, so the match may be its"
                    .into(),
            ));
        }
        Lookup::Found(found) => found,
        lookup => return Ok(lookup),
    };
    let Some(what) = unproven(&found) else {
        return Ok(Lookup::Found(found));
    };
    // Nothing proves the match ours, so it is the one only if no other namesake made in the
    // window hides among the rows an incomplete listing left out.
    if !complete {
        return Ok(Lookup::Unknown(format!(
            "{what} may be what the create made, but the list is incomplete, so another namesake made in its window may be among the rows it left out"
        )));
    }
    match cx.gate.adopting("the namesake", &what).await {
        Ok(()) => Ok(Lookup::Found(found)),
        Err(Error::NotAllowed { reason, .. }) => Err(Error::not_allowed(
            reason,
            format!(
                "{what} has the name an unanswered create of this resource sent and was made in its window, but nothing it keeps proves that create made it, and this namespace may not adopt objects aigw did not create: it is left alone (delete it to create anew, or grant spec.grants[].allowAdoption on the Connection to take it)"
            ),
        )
        .into()),
        Err(e) => Err(e.into()),
    }
}

/// What [`by_slug_or_name`] and [`one_named`] read of a row of an object's list.
pub struct Row<'a> {
    pub id: &'a str,
    pub slug: &'a str,
    pub name: &'a str,
    pub created_at: Option<&'a str>,
}

/// A row of a listing [`one_of_ours`] searches: the keys another resource may record or name
/// it by, and when it was made.
pub trait Claimable {
    fn keys(&self) -> Vec<&str>;
    fn created_at(&self) -> Option<&str>;
}

/// Rows of lists keyed by UUID and slug.
impl<T: Candidate> Claimable for T {
    fn keys(&self) -> Vec<&str> {
        vec![self.row().id, self.row().slug]
    }
    fn created_at(&self) -> Option<&str> {
        self.row().created_at
    }
}

/// [`Claimable`] of API objects keyed by their `id` alone, with their `created_at`.
macro_rules! claimable_by_id {
    ($($remote:ty),+) => {$(
        impl Claimable for $remote {
            fn keys(&self) -> Vec<&str> {
                vec![&self.id]
            }
            fn created_at(&self) -> Option<&str> {
                self.created_at.as_deref()
            }
        }
    )+};
}

claimable_by_id!(
    crate::api::ApiKey,
    crate::api::RateLimitsPolicy,
    crate::api::UsageLimitsPolicy
);

/// A candidate of a create lookup: its row of a list keyed by UUID and slug, with the name a
/// create sends.
pub trait Candidate {
    fn row(&self) -> Row<'_>;
}

/// [`Candidate`] of API objects whose row is their `id`, `slug`, `name` and `created_at`.
macro_rules! candidate {
    ($($remote:ty),+) => {$(
        impl Candidate for $remote {
            fn row(&self) -> Row<'_> {
                Row {
                    id: &self.id,
                    slug: &self.slug,
                    name: &self.name,
                    created_at: self.created_at.as_deref(),
                }
            }
        }
    )+};
}

candidate!(
    crate::api::SecretReference,
    crate::api::McpIntegration,
    crate::api::Integration,
    crate::api::Provider,
    crate::api::ConfigSummary,
    crate::api::GuardrailSummary
);

/// The MCP server's list row keeps `created_at` among the fields the client does not model.
impl Candidate for crate::api::McpServer {
    fn row(&self) -> Row<'_> {
        Row {
            id: &self.id,
            slug: &self.slug,
            name: &self.name,
            created_at: self.extra.get("created_at").and_then(|c| c.as_str()),
        }
    }
}

/// The lookup after an unanswered create of an object whose spec may name the slug it is made
/// with (`slug`): the row with the name the create sent (and that slug, when named; `also`
/// narrowing it further), made in the create's window, by [`one_of_ours`]. A slug is unique but
/// chosen by whoever creates, so another party may hold it: the API keeps no marker of a create
/// on these objects, so such a match is never proven (`what` names it).
pub async fn by_slug_or_name<K: Managed, T: Candidate>(
    cx: &Cx<'_, K>,
    status: &K::Status,
    listing: Listing<T>,
    (slug, name): (Option<&str>, &str),
    what: &str,
    also: impl Fn(&T) -> bool,
) -> Result<Lookup<T>, Halt> {
    let sent = sent_or(status, Some(name), None);
    let unproven = |item: &T| Some(format!("{what} {} ({})", item.row().slug, item.row().id));
    let named = |item: &T| slug.is_none_or(|slug| item.row().slug == slug) && also(item);
    one_named(cx, status, &sent, listing, named, unproven).await
}

/// The lookup after an unanswered create of an object of a workspace whose spec may name its
/// slug: of the workspace's objects (`list` reads them), the one with the name the create sent
/// (and the slug, when named), by [`one_named`]; `unproven` as there.
pub async fn in_workspace<'c, K: Verbs, T: Candidate, F>(
    cx: &'c Cx<'_, K>,
    status: &K::Status,
    (slug, name, workspace): (Option<&str>, &str, &str),
    unproven: impl Fn(&T) -> Option<String>,
    list: impl FnOnce(&'c Client) -> F,
) -> Result<Lookup<T>, Halt>
where
    F: Future<Output = Result<Listing<T>, ApiError>>,
{
    let listing = cx.read(format!("list {}s", K::WHAT), list).await?;
    let sent = sent_or(status, Some(name), Some(workspace));
    let also = |item: &T| slug.is_none_or(|slug| item.row().slug == slug);
    one_named(cx, status, &sent, listing, also, unproven).await
}

/// [`one_named`] for objects the API keeps no marker of the create on (configs, guardrails):
/// a candidate of the workspace the create was sent to (`workspace` of a candidate; any, when
/// it named none) that `also` admits. A match is never proven, so it is taken only under the
/// adoption grant (`what` names it).
pub async fn one_unmarked<K: Managed, T: Candidate>(
    cx: &Cx<'_, K>,
    status: &K::Status,
    (sent, listing): (&CreateAttempt, Listing<T>),
    what: &str,
    workspace: impl Fn(&T) -> Option<&str>,
    also: impl Fn(&T) -> bool,
) -> Result<Lookup<T>, Halt> {
    let sent_to = sent.workspace_id.as_deref();
    let matches = |item: &T| also(item) && (sent_to.is_none() || workspace(item) == sent_to);
    let unproven = |item: &T| Some(format!("{what} {} ({})", item.row().slug, item.row().id));
    one_named(cx, status, sent, listing, matches, unproven).await
}

/// What the create in flight sent (the intent in `status`), else what a create of `name` in
/// `workspace` sends (a policy may send no name): what a lookup after a lost answer matches the
/// candidates with.
pub fn sent_or<S: IntentStatus>(
    status: &S,
    name: Option<&str>,
    workspace: Option<&str>,
) -> CreateAttempt {
    status
        .create_attempt()
        .cloned()
        .unwrap_or_else(|| CreateAttempt {
            name: name.map(str::to_string),
            workspace_id: workspace.map(str::to_string),
            ..Default::default()
        })
}

/// [`one_of_ours`] over rows keyed by UUID and slug: a candidate matches when it has the name
/// `sent` (and `also` holds); `unproven` as there.
pub async fn one_named<K: Managed, T: Candidate>(
    cx: &Cx<'_, K>,
    status: &K::Status,
    sent: &CreateAttempt,
    listing: Listing<T>,
    also: impl Fn(&T) -> bool,
    unproven: impl Fn(&T) -> Option<String>,
) -> Result<Lookup<T>, Halt> {
    let named = |item: &T| sent.name.as_deref() == Some(item.row().name) && also(item);
    one_of_ours(cx, status, sent, listing, named, unproven).await
}

/// True for the refusal [`one_of_ours`] gives a namesake it cannot prove this create's: a
/// cleanup leaves such an object alone rather than deleting it.
fn unproven_namesake(error: &Halt) -> bool {
    matches!(error, Halt::Fail(Error::NotAllowed { reason, .. }) if *reason == crate::controller::state::connections::ADOPTION_NOT_ALLOWED)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::config::ConfigStatus;
    use crate::resources::managed_status::ManagedStatus;

    #[derive(Debug, PartialEq)]
    struct Row(&'static str, &'static str);

    fn listing(rows: Vec<Row>, complete: bool) -> Listing<Row> {
        Listing {
            items: rows,
            complete,
        }
    }

    fn status(sent: &str, ended: Option<&str>) -> ConfigStatus {
        ConfigStatus {
            managed: ManagedStatus {
                pending_create: Some(sent.into()),
                create_attempt: Some(Box::new(CreateAttempt {
                    ended_at: ended.map(str::to_string),
                    ..Default::default()
                })),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn lookup_in(rows: Vec<Row>, complete: bool, ended: Option<&str>) -> Lookup<Row> {
        let window = Window::of(&status("2026-01-01T00:00:10Z", ended), DEFAULTS);
        one_created_within(
            listing(rows, complete),
            window,
            |r| Some(r.1),
            |r| r.0 == "a",
        )
    }

    fn lookup(rows: Vec<Row>, complete: bool) -> Lookup<Row> {
        lookup_in(rows, complete, None)
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
    fn a_match_without_a_readable_time_is_unknown_never_absent() {
        let untimed = lookup(vec![Row("a", "2026-01-01T00:00:11")], true);
        assert!(matches!(untimed, Lookup::Unknown(m) if m.contains("creation time")));
        let other = lookup(vec![Row("b", "")], true);
        assert!(matches!(other, Lookup::Absent), "{other:?}");
    }

    #[test]
    fn an_older_namesake_is_not_ours() {
        let absent = lookup(vec![Row("a", "2026-01-01T00:00:01Z")], true);
        assert!(matches!(absent, Lookup::Absent));
    }

    #[test]
    fn a_namesake_created_after_the_request_ended_is_not_ours() {
        let later = lookup_in(
            vec![Row("a", "2026-01-01T00:00:30Z")],
            true,
            Some("2026-01-01T00:00:12Z"),
        );
        assert!(matches!(later, Lookup::Absent));
        let within = lookup_in(
            vec![Row("a", "2026-01-01T00:00:12Z")],
            true,
            Some("2026-01-01T00:00:12Z"),
        );
        assert!(matches!(within, Lookup::Found(_)));
    }

    #[test]
    fn without_a_recorded_end_the_window_closes_after_the_longest_request() {
        let day_later = lookup(vec![Row("a", "2026-01-02T00:00:11Z")], true);
        assert!(matches!(day_later, Lookup::Absent), "{day_later:?}");
        let within = lookup(vec![Row("a", "2026-01-01T00:01:05Z")], true);
        assert!(matches!(within, Lookup::Found(_)), "{within:?}");
    }

    #[test]
    fn only_one_candidate_is_found_and_only_a_complete_list_proves_none() {
        let only = |rows: &[&'static str], complete| Lookup::only(rows.to_vec(), complete, "x");
        assert!(matches!(only(&["a"], true), Lookup::Found("a")));
        assert!(matches!(only(&["a"], false), Lookup::Found("a")));
        assert!(matches!(only(&[], true), Lookup::Absent));
        assert!(matches!(only(&[], false), Lookup::Unknown(m) if m.contains("incomplete")));
        assert!(matches!(only(&["a", "b"], true), Lookup::Unknown(m) if m.starts_with("2 rows")));
        assert!(matches!(only(&["a", "b"], false), Lookup::Unknown(_)));
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
    fn absence_settles_from_the_end_of_the_request() {
        let now = now_rfc3339();
        // The request ended just now: a list is no proof for another settle time.
        let left = unsettled_for(&status("2020-01-01T00:00:00Z", Some(&now)), DEFAULTS).unwrap();
        assert!(left <= LIST_SETTLE + Duration::from_secs(1), "{left:?}");
        assert!(left > LIST_SETTLE - Duration::from_secs(5), "{left:?}");
        // Its end was never recorded: it may have run as long as a request can.
        let left = unsettled_for(&status(&now, None), DEFAULTS).unwrap();
        assert!(left > LONGEST_ATTEMPT, "{left:?}");
        assert_eq!(
            unsettled_for(
                &status("2020-01-01T00:00:00Z", Some("2020-01-01T00:00:03Z")),
                DEFAULTS
            ),
            None
        );
        // Shorter windows (`--list-settle`, `--longest-api-call`) settle sooner.
        let short = CallWindows {
            longest_attempt: Duration::from_secs(20),
            list_settle: Duration::from_secs(3),
        };
        let left = unsettled_for(&status(&now, None), short).unwrap();
        assert!(
            left > Duration::from_secs(22) && left <= Duration::from_secs(24),
            "{left:?}"
        );
    }

    const DEFAULTS: CallWindows = CallWindows {
        longest_attempt: LONGEST_ATTEMPT,
        list_settle: LIST_SETTLE,
    };

    #[test]
    fn a_longest_call_shorter_than_the_timeout_and_its_margin_is_refused() {
        assert!(DEFAULTS.check(Duration::from_secs(30)).is_ok());
        let short = CallWindows {
            longest_attempt: Duration::from_secs(20),
            ..DEFAULTS
        };
        assert!(short.check(Duration::from_secs(15)).is_ok());
        assert!(short.check(Duration::from_secs(16)).is_err());
    }
}
