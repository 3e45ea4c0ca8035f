//! What the policy kinds (`RateLimitsPolicy`, `UsageLimitsPolicy`) share: their verbs
//! ([`Verbs`]) over a remote object with a UUID and no slug, in one workspace, adopted by
//! `spec.policyId`, updated in place for its mutable fields, deleted (archived) per
//! `deletionPolicy`. A policy kind supplies its API calls and its diff ([`Policy`]) and what its
//! status records besides [`PolicyRecord`] ([`PolicyKind`]); the driver does the rest ([`crate::controller::driver::flow`]).

use crate::api::{ApiError, Client, Listing, Reading};
use crate::controller::driver::calls::{Deleting, Own, OwnCalls, Put, Read, Recovered, RemoteKey};
use crate::controller::driver::create::{
    Claimable, Created, body_hash, body_hash_matches, one_of_ours, sent_or,
};
use crate::controller::driver::drift::Row;
use crate::controller::driver::verbs::{Changes, Comparison, Verbs};
use crate::controller::driver::{Change, Cx, Managed};
use crate::controller::error::Halt;
use crate::resources::common::{CreateAttempt, DriftCorrection};
pub use crate::resources::policy::{Facts, Policy};
use crate::resources::rate_limits_policy::RateLimitsPolicyStatus;
use crate::resources::usage_limits_policy::UsageLimitsPolicyStatus;
use kube::core::object::HasStatus;

/// The status fields every policy kind records of its remote policy.
pub struct PolicyRecord<'a> {
    id: &'a mut Option<String>,
    remote_status: &'a mut Option<String>,
    remote_updated_at: &'a mut Option<String>,
    last_drift_correction: &'a mut Option<Box<DriftCorrection>>,
}

/// A policy kind's status: where it keeps [`PolicyRecord`].
pub trait RecordsPolicy {
    fn policy_record(&mut self) -> PolicyRecord<'_>;
}

/// [`RecordsPolicy`] of statuses whose fields are named as [`PolicyRecord`]'s.
macro_rules! records_policy {
    ($($status:ty),+) => {$(
        impl RecordsPolicy for $status {
            fn policy_record(&mut self) -> PolicyRecord<'_> {
                PolicyRecord {
                    id: &mut self.id,
                    remote_status: &mut self.remote_status,
                    remote_updated_at: &mut self.remote_updated_at,
                    last_drift_correction: &mut self.last_drift_correction,
                }
            }
        }
    )+};
}

records_policy!(RateLimitsPolicyStatus, UsageLimitsPolicyStatus);

/// A policy kind in the driver: its [`Policy`] binding, and what its status records.
pub trait PolicyKind:
    Managed + HasStatus<Status: RecordsPolicy> + Policy<Remote: RemoteKey + Claimable>
{
    /// The event reason and verb of the remote removal: ("Deleted", "delete"), ("Archived",
    /// "archive").
    const REMOVAL: (&'static str, &'static str);
    /// Records in `status` what a read reported besides [`PolicyRecord`] (`None`: the policy
    /// is gone).
    fn record_more(_status: &mut Self::Status, _remote: Option<&Self::Remote>) {}
    /// [`Verbs::follow_up`] of this kind.
    fn follow_up(
        &self,
        _cx: &Cx<'_, Self>,
        _status: &mut Self::Status,
        _first_sight: bool,
    ) -> impl std::future::Future<Output = Result<Vec<Change>, Halt>> + Send {
        async { Ok(Vec::new()) }
    }
}

/// [`Verbs`] of every policy kind: the desired state is the resource itself (a policy
/// references nothing to resolve), compared by the kind's diff.
impl<P: PolicyKind> Verbs for P {
    type Desired = P;
    type Calls = Own;
    const RECORDS_DRIFT: bool = true;
    const REMOVAL: (&'static str, &'static str) = <P as PolicyKind>::REMOVAL;

    async fn resolve(&self, _cx: &Cx<'_, P>, _status: &mut P::Status) -> Result<P, Halt> {
        Ok(self.clone())
    }
    fn record(status: &mut P::Status, remote: Option<&P::Remote>) {
        let facts = remote.map(P::facts);
        let record = status.policy_record();
        *record.id = facts.as_ref().map(|r| r.id.to_string());
        *record.remote_status = facts.as_ref().map(|r| r.remote_status().into());
        *record.remote_updated_at = facts.and_then(|r| r.updated_at.map(str::to_string));
        P::record_more(status, remote);
    }
    fn record_created(
        &self,
        status: &mut P::Status,
        _desired: &P,
        created: Created<String, P::Remote>,
    ) -> String {
        let id = match created {
            Created::Posted(id) => id,
            Created::Recovered(found) => P::facts(&found).id.to_string(),
        };
        let record = status.policy_record();
        *record.id = Some(id.clone());
        *record.remote_status = Some("active".into());
        id
    }
    fn replaced(
        &self,
        desired: &P,
        remote: &P::Remote,
        comparison: &Comparison,
        at: String,
    ) -> DriftCorrection {
        desired.drift_against(remote, &comparison.differs, at)
    }
    fn record_drift(status: &mut P::Status, replaced: DriftCorrection) {
        *status.policy_record().last_drift_correction = Some(Box::new(replaced));
    }
    async fn follow_up(
        &self,
        cx: &Cx<'_, P>,
        status: &mut P::Status,
        _desired: &P,
        first_sight: bool,
    ) -> Changes {
        <P as PolicyKind>::follow_up(self, cx, status, first_sight).await
    }
}

impl<P: PolicyKind> OwnCalls for P {
    type Remote = <P as Policy>::Remote;
    type Found = P::Remote;
    type Posted = String;
    type Updated = ();
    async fn observe(&self, client: &Client, key: &str, _: &P::Status) -> Read<Self> {
        P::get(client, key).await.map(Some)
    }
    fn sent(&self, cx: &Cx<'_, P>, desired: &P) -> CreateAttempt {
        CreateAttempt {
            name: desired.name().map(str::to_string),
            workspace_id: desired.workspace_id().map(str::to_string),
            body_hash: sent_fields(&desired.create_request()).and_then(|fields| {
                body_hash(&cx.ctx.hash_key, desired.meta().uid.as_deref(), &fields)
            }),
            ..Default::default()
        }
    }
    async fn create(&self, client: &Client, desired: &P) -> Result<String, ApiError> {
        <P as Policy>::create(desired, client).await
    }
    fn compare(&self, desired: &P, remote: &P::Remote, _status: &P::Status) -> Comparison {
        Comparison {
            immutable: desired.immutable_conflicts(remote),
            differs: desired.diff(remote),
            inputs: Vec::new(),
        }
    }
    async fn update(&self, client: &Client, desired: &P, remote: &P::Remote) -> Put<Self> {
        <P as Policy>::update(desired, client, P::facts(remote).id).await
    }
    async fn delete(&self, at: Deleting<'_, Self>) -> Result<(), ApiError> {
        <P as Policy>::delete(at.client, at.key).await
    }
    /// The policy an earlier create made: the one policy of the workspace it was sent to with the
    /// same name (or, without a name, the fields that create sent: not the spec's, which may have
    /// been edited since) and fixed fields, created within the POST's window, claimed by no other
    /// resource, in a complete, fully paged listing.
    async fn find_created(&self, cx: &Cx<'_, Self>, status: &P::Status) -> Recovered<Self> {
        let sent = sent_or(status, self.name(), self.workspace_id());
        let listing = cx
            .read(format!("list {}s", P::WHAT), |client| {
                P::list(client, sent.workspace_id.clone(), Reading::Proof)
            })
            .await?;
        let sent_this = |p: &P::Remote| match (sent.name.as_deref(), sent.body_hash.as_deref()) {
            (Some(name), _) => {
                P::facts(p).name == Some(name) && self.immutable_conflicts(p).is_empty()
            }
            (None, Some(hash)) => {
                let read_back = P::projected(p)
                    .map(|spec| P::with_spec(Default::default(), spec).create_request());
                let uid = self.meta().uid.as_deref();
                read_back.is_ok_and(|body| {
                    sent_fields(&body).is_some_and(|fields| {
                        body_hash_matches(&cx.ctx.hash_key, uid, &fields, hash)
                    })
                })
            }
            // An intent recorded without what it sent: the current spec is all there is.
            (None, None) => self.diff(p).is_empty() && self.immutable_conflicts(p).is_empty(),
        };
        // The API keeps no marker of the create on a policy: a match is never proven.
        let unproven = |p: &P::Remote| Some(format!("{} {}", P::WHAT, P::facts(p).id));
        one_of_ours(cx, status, &sent, listing, sent_this, unproven).await
    }
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
    let listing = P::list(client, workspace, Reading::Once).await?;
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
