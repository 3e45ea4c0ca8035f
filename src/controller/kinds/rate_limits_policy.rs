//! RateLimitsPolicy: create (through the shared protocol) or adopt, PUT the mutable fields
//! (name, unit, value, conditions) only when they differ, delete per `deletionPolicy`.

use crate::api::{
    ApiError, Client, Listing, RateLimitsListQuery, RateLimitsPolicy as RemotePolicy,
};
use crate::controller::create::{
    Created, Lookup, body_hash, create_once, made_by_unfinished_create, one_of_ours,
};
use crate::controller::drift::{Listed, Row};
use crate::controller::driver::{Change, Cx, Managed, observed, orphaned, removed};
use crate::controller::error::Error;
use crate::controller::gate::Op;
use crate::controller::spec_already_applied;
use crate::controller::status::common_status;
use crate::resources::common::CreateAttempt;
use crate::resources::rate_limits_policy::{
    RateLimitsPolicy, RateLimitsPolicyDeletionPolicy, RateLimitsPolicyStatus,
};

common_status!(
    RateLimitsPolicyStatus,
    |s| RateLimitsPolicyStatus {
        pending_create: s.pending_create.as_ref().map(|_| String::new()),
        ..s.clone()
    },
    intent_when = |s| s.pending_create.is_some()
);

impl Managed for RateLimitsPolicy {
    type Status = RateLimitsPolicyStatus;
    const KIND: &'static str = "RateLimitsPolicy";
    const MANAGER: &'static str = "aigw/ratelimitspolicy";
    const LISTED: bool = true;

    fn status(&self) -> Option<&RateLimitsPolicyStatus> {
        self.status.as_ref()
    }

    async fn apply(
        &self,
        cx: &Cx<'_, Self>,
        status: &mut RateLimitsPolicyStatus,
    ) -> Result<Vec<Change>, Error> {
        let Some(remote) = observe(self, cx, status).await? else {
            return create(self, cx, status).await.map(|c| vec![c]);
        };
        let conflicts = self.spec.immutable_conflicts(&remote);
        if !conflicts.is_empty() {
            return Err(Error::InvalidSpec(format!(
                "remote policy {} has a different {} and the API cannot change it; create a new RateLimitsPolicy instead",
                remote.id,
                conflicts.join(", ")
            )));
        }
        let differences = self.spec.diff(&remote);
        if differences.is_empty() {
            return Ok(Vec::new());
        }
        cx.api(Op::Update)
            .await?
            .rate_limits()
            .update(&remote.id, &self.spec.update_request())
            .await
            .map_err(|e| Error::api(format!("update rate-limits policy {}", remote.id), e))?;
        let fields = differences.join(", ");
        Ok(vec![if spec_already_applied(
            self.metadata.generation,
            status.observed_generation,
            &status.conditions,
        ) {
            Change::new(
                "DriftCorrected",
                format!(
                    "rate-limits policy {} was changed outside aigw ({fields}); restored it",
                    remote.id
                ),
            )
        } else {
            Change::new(
                "Updated",
                format!("updated rate-limits policy {} ({fields})", remote.id),
            )
        }])
    }

    async fn observe_only(
        &self,
        cx: &Cx<'_, Self>,
        status: &mut RateLimitsPolicyStatus,
    ) -> Result<Vec<&'static str>, Error> {
        Ok(match observe(self, cx, status).await? {
            Some(remote) => {
                let mut fields = self.spec.immutable_conflicts(&remote);
                fields.extend(self.spec.diff(&remote));
                fields
            }
            None => Vec::new(),
        })
    }

    async fn cleanup(&self, cx: &Cx<'_, Self>) -> Result<Vec<Change>, Error> {
        let status = self.status.clone().unwrap_or_default();
        // Only what this resource recorded (see Config's cleanup).
        let known = status.id.clone();
        if self.spec.deletion_policy == RateLimitsPolicyDeletionPolicy::Orphan {
            return Ok(orphaned(&format!(
                "rate-limits policy {}",
                known.unwrap_or_default()
            )));
        }
        let id = match (known, &status.pending_create) {
            (Some(id), _) => id,
            (None, Some(_)) => {
                let lookup = find_created(self, cx, &status);
                match made_by_unfinished_create(&status, "rate-limits policy", lookup).await? {
                    Some(found) => found.id,
                    None => return Ok(Vec::new()),
                }
            }
            (None, None) => return Ok(Vec::new()),
        };
        let result = cx.api(Op::Delete).await?.rate_limits().delete(&id).await;
        removed(
            "Deleted",
            "delete",
            &format!("rate-limits policy {id}"),
            result,
        )
    }
}

async fn observe(
    policy: &RateLimitsPolicy,
    cx: &Cx<'_, RateLimitsPolicy>,
    status: &mut RateLimitsPolicyStatus,
) -> Result<Option<RemotePolicy>, Error> {
    let adopted = policy.spec.policy_id.as_deref();
    let Some(id) = adopted.or(status.id.as_deref()).map(str::to_string) else {
        return Ok(None);
    };
    let result = cx.api(Op::Read).await?.rate_limits().get(&id).await;
    let found = observed(
        &format!("rate-limits policy {id}"),
        adopted.map(|_| "spec.policyId"),
        result,
    )?;
    if let (Some(remote), Some(_)) = (&found, adopted) {
        // Adopting reaches an object made outside aigw: its own workspace must be granted too.
        cx.gate
            .reach(
                &format!("the workspace of rate-limits policy {id}"),
                remote.workspace_id.as_deref(),
            )
            .await?;
    }
    match &found {
        Some(remote) => {
            status.id = Some(remote.id.clone());
            status.remote_status = Some(
                match remote.status {
                    crate::api::PolicyStatus::Active => "active",
                    crate::api::PolicyStatus::Archived => "archived",
                }
                .to_string(),
            );
            status.remote_updated_at = remote.last_updated_at.clone();
        }
        None => {
            status.id = None;
            status.remote_status = None;
            status.remote_updated_at = None;
        }
    }
    Ok(found)
}

/// Creates the remote policy through the shared protocol (see [`crate::controller::create`]).
async fn create(
    policy: &RateLimitsPolicy,
    cx: &Cx<'_, RateLimitsPolicy>,
    status: &mut RateLimitsPolicyStatus,
) -> Result<Change, Error> {
    let before = status.clone();
    let api = cx.api(Op::Create).await?;
    let request = policy.spec.create_request();
    let sent = CreateAttempt {
        name: policy.spec.name.clone(),
        workspace_id: policy.spec.workspace_id.clone(),
        body_hash: body_hash(policy.metadata.uid.as_deref(), &request),
        ended_at: None,
    };
    let outcome = create_once(
        cx,
        status,
        "rate-limits policy",
        sent,
        find_created(policy, cx, &before),
        api.rate_limits().create(&request),
    )
    .await?;
    let (id, change) = match outcome {
        Created::Posted(created) => (
            created.id.clone(),
            Change::new(
                "Created",
                format!("created rate-limits policy {}", created.id),
            ),
        ),
        Created::Recovered(found) => (
            {
                // What the earlier POST sent may be an older spec: read it and diff, soon.
                cx.ctx
                    .drift
                    .flag(crate::controller::driver::object_key(policy));
                found.id.clone()
            },
            Change::new(
                "Created",
                format!(
                    "found rate-limits policy {} from an earlier create whose answer was lost",
                    found.id
                ),
            ),
        ),
    };
    status.id = Some(id);
    status.remote_status = Some("active".into());
    // The driver's final status write records the id: a crash before it leaves the intent, and
    // the lookup finds the policy again.
    Ok(change)
}

impl Listed for RateLimitsPolicy {
    fn list_workspace(&self) -> Option<String> {
        self.spec.workspace_id.clone()
    }

    async fn list(client: &Client, workspace: Option<String>) -> Result<Listing<Row>, ApiError> {
        let query = RateLimitsListQuery {
            workspace_id: workspace,
            ..Default::default()
        };
        let listing = client.rate_limits().listing(&query).await?;
        Ok(Listing {
            items: listing
                .items
                .into_iter()
                .map(|p| Row {
                    keys: vec![p.id],
                    created_at: p.created_at,
                    updated_at: p.last_updated_at,
                })
                .collect(),
            complete: listing.complete,
        })
    }
}

/// The policy an earlier create made: the one policy of this workspace with the same name (or,
/// without a name, the same limits) and immutable fields, created after the intent, in a
/// complete, fully paged listing.
async fn find_created(
    policy: &RateLimitsPolicy,
    cx: &Cx<'_, RateLimitsPolicy>,
    status: &RateLimitsPolicyStatus,
) -> Result<Lookup<RemotePolicy>, Error> {
    let sent = status
        .create_attempt
        .clone()
        .unwrap_or_else(|| CreateAttempt {
            name: policy.spec.name.clone(),
            workspace_id: policy.spec.workspace_id.clone(),
            ..Default::default()
        });
    let query = RateLimitsListQuery {
        workspace_id: sent.workspace_id.clone(),
        ..Default::default()
    };
    let listing = cx
        .api(Op::Read)
        .await?
        .rate_limits()
        .listing(&query)
        .await
        .map_err(|e| Error::api("list rate-limits policies", e))?;
    Ok(one_of_ours(
        cx,
        status,
        &sent,
        listing,
        |p| vec![p.id.as_str()],
        |p| p.created_at.as_deref(),
        |p| {
            let same = match sent.name.as_deref() {
                Some(name) => p.name.as_deref() == Some(name),
                None => policy.spec.diff(p).is_empty(),
            };
            same && policy.spec.immutable_conflicts(p).is_empty()
        },
    ))
}
