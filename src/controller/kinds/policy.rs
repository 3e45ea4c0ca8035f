//! What the policy kinds (`RateLimitsPolicy`, `UsageLimitsPolicy`) share: a remote object with a
//! UUID and no slug, in one workspace, adopted by `spec.policyId` or created through the shared
//! protocol, updated in place for its mutable fields, and deleted (archived) per
//! `deletionPolicy`. A policy kind supplies its API calls and its diff ([`PolicyKind`]); the
//! flow here is written once.

use crate::api::{ApiError, Client, Listing};
use crate::controller::create::{
    Created, Lookup, body_hash, body_hash_matches, create_once, made_by_unfinished_create,
    one_of_ours,
};
use crate::controller::drift::Row;
use crate::controller::driver::{Change, Cx, Managed, object_key, observed, orphaned, removed};
use crate::controller::error::Error;
use crate::controller::gate::Op;
use crate::controller::status::{CommonStatus, IntentStatus};
use crate::controller::{now_rfc3339, spec_already_applied};
use crate::resources::common::{CreateAttempt, DriftCorrection};
pub use crate::resources::policy::{Facts, Policy};

/// A policy kind in the driver: its [`Policy`] binding, and what its status records.
pub trait PolicyKind: Managed<Status: PolicyStatus> + Policy {
    /// The event reason and verb of the remote removal: ("Deleted", "delete"), ("Archived",
    /// "archive").
    const REMOVAL: (&'static str, &'static str);
    /// Records in `status` what a read reported (`None`: the policy is gone).
    fn record(status: &mut Self::Status, remote: Option<&Self::Remote>);
    /// Records in `status` the policy a create made (`id`), before any read of it.
    fn record_created(status: &mut Self::Status, id: String);
}

/// The status field every policy kind records its remote policy in.
pub trait PolicyStatus {
    fn id(&self) -> Option<&str>;
    /// Keeps what the last drift correction replaced.
    fn record_drift(&mut self, replaced: DriftCorrection);
}

/// Observe, then create, or update only the fields that differ.
pub async fn apply<P: PolicyKind>(
    policy: &P,
    cx: &Cx<'_, P>,
    status: &mut P::Status,
) -> Result<Vec<Change>, Error> {
    let Some(remote) = observe(policy, cx, status).await? else {
        return create(policy, cx, status).await.map(|c| vec![c]);
    };
    let id = P::facts(&remote).id.to_string();
    let conflicts = policy.immutable_conflicts(&remote);
    if !conflicts.is_empty() {
        return Err(Error::InvalidSpec(format!(
            "remote {} {id} has a different {} and the API cannot change it; create a new {} instead",
            P::WHAT,
            conflicts.join(", "),
            P::KIND
        )));
    }
    let differences = policy.diff(&remote);
    if differences.is_empty() {
        return Ok(Vec::new());
    }
    let replaced = policy.drift_against(&remote, &differences, now_rfc3339());
    cx.gate.intend(format!(
        "would update {} {id} at {}",
        P::WHAT,
        replaced.paths()
    ));
    let client = cx.api(Op::Update).await?;
    P::update(policy, client, &id)
        .await
        .map_err(|e| Error::api(format!("update {} {id}", P::WHAT), e))?;
    let fields = differences.join(", ");
    let applied = spec_already_applied(
        policy.meta().generation,
        status.observed_generation(),
        status.conditions(),
    );
    Ok(vec![if applied {
        let paths = replaced.paths();
        status.record_drift(replaced);
        Change::new(
            "DriftCorrected",
            format!(
                "{} {id} was changed outside aigw at {paths}; restored it (status.lastDriftCorrection has the values it replaced)",
                P::WHAT
            ),
        )
    } else {
        Change::new("Updated", format!("updated {} {id} ({fields})", P::WHAT))
    }])
}

/// Read-only: the spec fields that differ from the remote policy (none when there is none).
pub async fn observe_only<P: PolicyKind>(
    policy: &P,
    cx: &Cx<'_, P>,
    status: &mut P::Status,
) -> Result<Vec<&'static str>, Error> {
    Ok(match observe(policy, cx, status).await? {
        Some(remote) => {
            let mut fields = policy.immutable_conflicts(&remote);
            fields.extend(policy.diff(&remote));
            fields
        }
        None => Vec::new(),
    })
}

/// Honours `deletionPolicy` for what this resource recorded (see Config's cleanup): never what
/// the spec names, and what an unfinished create made only once the lookup finds it.
pub async fn cleanup<P: PolicyKind>(policy: &P, cx: &Cx<'_, P>) -> Result<Vec<Change>, Error> {
    let status = policy.status().cloned().unwrap_or_default();
    let known = status.id().map(str::to_string);
    if policy.orphaned() {
        return Ok(orphaned(&format!(
            "{} {}",
            P::WHAT,
            known.unwrap_or_default()
        )));
    }
    let id = match (known, status.pending_create()) {
        (Some(id), _) => id,
        (None, Some(_)) => {
            let lookup = find_created(policy, cx, &status);
            match made_by_unfinished_create(&status, P::WHAT, lookup).await? {
                Some(found) => P::facts(&found).id.to_string(),
                None => return Ok(Vec::new()),
            }
        }
        (None, None) => return Ok(Vec::new()),
    };
    let client = cx.api(Op::Delete).await?;
    let (reason, verb) = P::REMOVAL;
    removed(
        reason,
        verb,
        &format!("{} {id}", P::WHAT),
        P::delete(client, &id).await,
    )
}

/// GETs the policy this resource adopts or recorded, and records what the API reports. Only
/// "not found" means gone; an adopted policy's workspace must be granted too.
pub async fn observe<P: PolicyKind>(
    policy: &P,
    cx: &Cx<'_, P>,
    status: &mut P::Status,
) -> Result<Option<P::Remote>, Error> {
    let adopted = policy.adopts();
    let Some(id) = adopted.or(status.id()).map(str::to_string) else {
        return Ok(None);
    };
    let client = cx.api(Op::Read).await?;
    let found = observed(
        &format!("{} {id}", P::WHAT),
        adopted.map(|_| "spec.policyId"),
        P::get(client, &id).await,
    )?;
    if let (Some(remote), Some(_)) = (&found, adopted) {
        // Adopting reaches an object made outside aigw: its own workspace must be granted too.
        cx.gate
            .reach(
                &format!("the workspace of {} {id}", P::WHAT),
                P::facts(remote).workspace_id,
            )
            .await?;
    }
    P::record(status, found.as_ref());
    Ok(found)
}

/// Creates the remote policy through the shared protocol (see [`crate::controller::create`]).
async fn create<P: PolicyKind>(
    policy: &P,
    cx: &Cx<'_, P>,
    status: &mut P::Status,
) -> Result<Change, Error> {
    let before = status.clone();
    let client = cx.api(Op::Create).await?;
    let sent = CreateAttempt {
        name: policy.name().map(str::to_string),
        workspace_id: policy.workspace_id().map(str::to_string),
        body_hash: sent_fields(&policy.create_request())
            .and_then(|fields| body_hash(&cx.ctx.hash_key, policy.meta().uid.as_deref(), &fields)),
        ended_at: None,
        intent: None,
    };
    let outcome = create_once(
        cx,
        status,
        P::WHAT,
        sent,
        find_created(policy, cx, &before),
        client,
        async |client| P::create(policy, client).await,
    )
    .await?;
    let (id, change) = match outcome {
        Created::Posted(id) => {
            let change = Change::new("Created", format!("created {} {id}", P::WHAT));
            (id, change)
        }
        Created::Recovered(found) => {
            // What the earlier POST sent may be an older spec: read it and diff, soon.
            cx.ctx.drift.flag(object_key(policy));
            let id = P::facts(&found).id.to_string();
            let change = Change::new(
                "Created",
                format!(
                    "found {} {id} from an earlier create whose answer was lost",
                    P::WHAT
                ),
            );
            (id, change)
        }
    };
    P::record_created(status, id);
    // The driver's final status write records the id: a crash before it leaves the intent, and
    // the lookup finds the policy again.
    Ok(change)
}

/// The policy an earlier create made: the one policy of the workspace it was sent to with the
/// same name (or, without a name, the fields that create sent: not the spec's, which may have
/// been edited since) and fixed fields, created within the POST's window, claimed by no other
/// resource, in a complete, fully paged listing.
async fn find_created<P: PolicyKind>(
    policy: &P,
    cx: &Cx<'_, P>,
    status: &P::Status,
) -> Result<Lookup<P::Remote>, Error> {
    let sent = status
        .create_attempt()
        .cloned()
        .unwrap_or_else(|| CreateAttempt {
            name: policy.name().map(str::to_string),
            workspace_id: policy.workspace_id().map(str::to_string),
            ..Default::default()
        });
    let client = cx.api(Op::Read).await?;
    let listing = P::list(client, sent.workspace_id.clone())
        .await
        .map_err(|e| Error::api(format!("list {}s", P::WHAT), e))?;
    one_of_ours(
        cx,
        status,
        &sent,
        listing,
        |p| vec![P::facts(p).id],
        |p| P::facts(p).created_at,
        |p| match (sent.name.as_deref(), sent.body_hash.as_deref()) {
            (Some(name), _) => {
                P::facts(p).name == Some(name) && policy.immutable_conflicts(p).is_empty()
            }
            (None, Some(hash)) => {
                let read_back = P::projected(p)
                    .map(|spec| P::with_spec(Default::default(), spec).create_request());
                let uid = policy.meta().uid.as_deref();
                read_back.is_ok_and(|body| {
                    sent_fields(&body).is_some_and(|fields| {
                        body_hash_matches(&cx.ctx.hash_key, uid, &fields, hash)
                    })
                })
            }
            // An intent recorded without what it sent: the current spec is all there is.
            (None, None) => policy.diff(p).is_empty() && policy.immutable_conflicts(p).is_empty(),
        },
        // The API keeps no marker of the create on a policy: a match is never proven.
        |p| Some(format!("{} {}", P::WHAT, P::facts(p).id)),
    )
    .await
}

/// What [`CreateAttempt::body_hash`] of a policy create hashes: the fields `body` sends that a
/// policy it made reads back the same, so that a lookup can tell an unnamed policy by what was
/// sent. The name and workspace are left out (matched apart, and the API may fill them in), and
/// the sets (conditions, groupBy) are put in one order, as a read may return them in any.
fn sent_fields<B: serde::Serialize>(body: &B) -> Option<serde_json::Value> {
    let mut fields = serde_json::to_value(body).ok()?;
    let object = fields.as_object_mut()?;
    object.remove("name");
    object.remove("workspace_id");
    for set in ["conditions", "group_by"] {
        if let Some(serde_json::Value::Array(items)) = object.get_mut(set) {
            items.sort_by_cached_key(|item| item.to_string());
        }
    }
    Some(fields)
}

/// The drift pass's rows for a policy kind: one per remote policy of `workspace`.
pub async fn rows<P: PolicyKind>(
    client: &Client,
    workspace: Option<String>,
) -> Result<Listing<Row>, ApiError> {
    let listing = P::list(client, workspace).await?;
    Ok(Listing {
        items: listing
            .items
            .iter()
            .map(|p| {
                let facts = P::facts(p);
                Row {
                    keys: vec![facts.id.to_string()],
                    created_at: facts.created_at.map(str::to_string),
                    updated_at: facts.updated_at.map(str::to_string),
                }
            })
            .collect(),
        complete: listing.complete,
    })
}
