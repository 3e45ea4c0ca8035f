//! Config: observe by slug (or id), PUT the whole document only when it differs (every PUT mints
//! a new version_id), create through the shared protocol when there is nothing to adopt, delete
//! per `deletionPolicy`.

use tracing::debug;

use crate::api::{ApiError, Client, ConfigDetail, Listing};
use crate::controller::config_refs::{self, Desired};
use crate::controller::create::{
    Created, Lookup, body_hash, create_once, made_by_unfinished_create, one_of_ours,
};
use crate::controller::drift::{Listed, Row};
use crate::controller::driver::{Change, Cx, Managed, observed, orphaned, removed};
use crate::controller::error::Error;
use crate::controller::gate::Op;
use crate::controller::status::common_status;
use crate::controller::{now_rfc3339, spec_already_applied};
use crate::resources::common::CreateAttempt;
use crate::resources::config::{AppliedHistory, Config, ConfigDeletionPolicy, ConfigStatus};

common_status!(
    ConfigStatus,
    |s| ConfigStatus {
        last_applied_at: None,
        pending_create: s.pending_create.as_ref().map(|_| String::new()),
        ..s.clone()
    },
    intent_when = |s| s.pending_create.is_some()
);

impl Managed for Config {
    crate::controller::driver::kind::namespaced_api!();
    type Status = ConfigStatus;
    const KIND: &'static str = "Config";
    const MANAGER: &'static str = "aigw/config";
    const LISTED: bool = true;

    fn status(&self) -> Option<&ConfigStatus> {
        self.status.as_ref()
    }

    fn status_slot(&mut self) -> &mut Option<ConfigStatus> {
        &mut self.status
    }

    async fn apply(
        &self,
        cx: &Cx<'_, Self>,
        status: &mut ConfigStatus,
    ) -> Result<Vec<Change>, Error> {
        // The resources the document names, by their slugs: from here on the document is the
        // resolved one.
        let values = config_refs::resolved_values(self, cx.ctx)?;
        let changes = match config_refs::with_values(self, &values)? {
            Some(resolved) => apply_resolved(&resolved, cx, status).await?,
            None => apply_resolved(self, cx, status).await?,
        };
        // The remote document holds these now.
        status.resolved_references = values;
        Ok(changes)
    }

    /// The Secret values are the ones last sent, and every `spec.resourceRefs` entry resolves
    /// to the value the remote document was last brought in line with.
    async fn inputs_unchanged(&self, cx: &Cx<'_, Self>, status: &ConfigStatus) -> bool {
        let references = config_refs::resolved_values(self, cx.ctx)
            .is_ok_and(|values| values == status.resolved_references);
        references
            && config_refs::secrets_unchanged(self, cx.ctx, status.secret_hash.as_deref()).await
    }

    async fn observe_only(
        &self,
        cx: &Cx<'_, Self>,
        status: &mut ConfigStatus,
    ) -> Result<Vec<&'static str>, Error> {
        let resolved = config_refs::with_resources(self, cx.ctx)?;
        let config = resolved.as_ref().unwrap_or(self);
        Ok(match observe(config, cx, status).await? {
            Some(remote) => config.spec.diff(&remote),
            None => Vec::new(),
        })
    }

    async fn cleanup(&self, cx: &Cx<'_, Self>) -> Result<Vec<Change>, Error> {
        cleanup(self, cx).await
    }

    crate::controller::driver::kind::promotes!(|config| config.spec.promotion);
}

/// [`Managed::apply`] for a Config whose resource references are resolved.
async fn apply_resolved(
    config: &Config,
    cx: &Cx<'_, Config>,
    status: &mut ConfigStatus,
) -> Result<Vec<Change>, Error> {
    // Secret values and guardrail references are settled before anything is read or written.
    let desired = config_refs::desired(config, cx, status).await?;
    for value in desired.secret_values() {
        cx.conceal(value);
    }
    let Some(remote) = observe(config, cx, status).await? else {
        return create(config, cx, status, &desired).await.map(|c| vec![c]);
    };
    let mut differences = config.spec.diff_without_secrets(&remote);
    if desired.secret_hash != status.secret_hash {
        differences.push("secretRefs");
    }
    if differences.is_empty() {
        return Ok(Vec::new());
    }
    let concealed: Vec<&str> = desired.secret_values().collect();
    let replaced = config
        .spec
        .drift_against(&remote, now_rfc3339(), &concealed);
    cx.gate.intend(format!(
        "would update config {} ({}) at {}",
        remote.slug,
        differences.join(", "),
        replaced.paths()
    ));
    let updated = cx
        .api(Op::Update)
        .await?
        .configs()
        .update(
            &remote.slug,
            &config.spec.update_request_with(&desired.request_document()),
        )
        .await
        .map_err(|e| Error::api(format!("update config {}", remote.slug), e))?;
    status.secret_hash = desired.secret_hash;
    status.version_id = updated.version_id.or(remote.version_id);
    status.record_applied_now(&config.metadata, now_rfc3339(), &config.spec.secret_refs);
    let fields = differences.join(", ");
    // A changed Secret value is an update asked for, not an edit made outside aigw.
    let outside = differences.iter().any(|field| *field != "secretRefs");
    let drift = outside
        && spec_already_applied(
            config.metadata.generation,
            status.observed_generation,
            &status.conditions,
        );
    Ok(vec![if drift {
        let paths = replaced.paths();
        status.last_drift_correction = Some(replaced);
        Change::new(
            "DriftCorrected",
            format!(
                "config {} was changed outside aigw at {paths}; restored it (status.lastDriftCorrection has the values it replaced)",
                remote.slug
            ),
        )
    } else {
        Change::new(
            "Updated",
            format!("updated config {} ({fields})", remote.slug),
        )
    }])
}

/// Honours `deletionPolicy` for what this Config recorded.
async fn cleanup(config: &Config, cx: &Cx<'_, Config>) -> Result<Vec<Change>, Error> {
    let status = config.status.clone().unwrap_or_default();
    // Only what this resource recorded: a slug its spec names but it never adopted is not
    // its to delete (the gate releases such a resource before this runs).
    let known = status.slug.clone().or(status.id.clone());
    if config.spec.deletion_policy == ConfigDeletionPolicy::Orphan {
        return Ok(orphaned(&format!("config {}", known.unwrap_or_default())));
    }
    let key = match (known, &status.pending_create) {
        (Some(key), _) => key,
        // A create whose outcome was never learned may still have made the config.
        (None, Some(_)) => {
            let lookup = find_created(config, cx, &status);
            match made_by_unfinished_create(&status, "config", lookup).await? {
                Some(found) => found.slug,
                None => return Ok(Vec::new()),
            }
        }
        (None, None) => return Ok(Vec::new()),
    };
    let result = cx.api(Op::Delete).await?.configs().delete(&key).await;
    removed("Deleted", "delete", &format!("config {key}"), result)
}

impl Listed for Config {
    fn list_workspace(&self) -> Option<String> {
        self.spec.workspace_id.clone()
    }

    async fn list(client: &Client, workspace: Option<String>) -> Result<Listing<Row>, ApiError> {
        let listing = client.configs().stamps(workspace.as_deref()).await?;
        Ok(Listing {
            items: listing
                .items
                .into_iter()
                .map(|c| Row {
                    keys: [c.id, c.slug]
                        .into_iter()
                        .filter(|k| !k.is_empty())
                        .collect(),
                    created_at: c.created_at,
                    updated_at: c.last_updated_at,
                })
                .collect(),
            complete: listing.complete,
        })
    }
}

/// GETs the remote config this object manages, if any, and records what it reports. A config
/// aigw created that is gone (404 or `AB08`, nothing else) is forgotten, so it is created again;
/// an adopted one that is missing is an error.
async fn observe(
    config: &Config,
    cx: &Cx<'_, Config>,
    status: &mut ConfigStatus,
) -> Result<Option<ConfigDetail>, Error> {
    let adopted = config.spec.slug.as_deref();
    let Some(key) = adopted
        .or(status.slug.as_deref())
        .or(status.id.as_deref())
        .map(str::to_string)
    else {
        return Ok(None);
    };
    let result = cx.api(Op::Read).await?.configs().get(&key).await;
    let found = observed(
        &format!("config {key}"),
        adopted.map(|_| "spec.slug"),
        result,
    )?;
    if let (Some(remote), Some(_)) = (&found, adopted) {
        // Adopting reaches an object made outside aigw: its own workspace must be granted too.
        cx.gate
            .reach(
                &format!("the workspace of config {key}"),
                remote.workspace_id.as_deref(),
            )
            .await?;
    }
    match &found {
        Some(remote) => {
            status.id = Some(remote.id.clone())
                .filter(|id| !id.is_empty())
                .or(status.id.take());
            status.slug = Some(remote.slug.clone())
                .filter(|s| !s.is_empty())
                .or(status.slug.take());
            status.version_id = remote.version_id.clone();
            status.remote_updated_at = remote.last_updated_at.clone();
        }
        None => {
            status.id = None;
            status.slug = None;
            status.version_id = None;
            status.remote_updated_at = None;
        }
    }
    Ok(found)
}

/// Creates the remote config through the shared protocol (see [`crate::controller::create`]). A create
/// answer without a slug is fine: the config is observed by id.
async fn create(
    config: &Config,
    cx: &Cx<'_, Config>,
    status: &mut ConfigStatus,
    desired: &Desired,
) -> Result<Change, Error> {
    let before = status.clone();
    let api = cx.api(Op::Create).await?;
    let request = config.spec.create_request_with(&desired.request_document());
    let sent = CreateAttempt {
        name: Some(config.spec.name.clone()),
        workspace_id: config.spec.workspace_id.clone(),
        body_hash: body_hash(&cx.ctx.hash_key, config.metadata.uid.as_deref(), &request),
        ended_at: None,
        intent: None,
    };
    let outcome = create_once(
        cx,
        status,
        "config",
        sent,
        find_created(config, cx, &before),
        api,
        async |api| api.configs().create(&request).await,
    )
    .await?;
    let change = match outcome {
        Created::Posted(created) => {
            status.id = Some(created.id.clone());
            status.slug = created.slug.clone();
            status.version_id = created.version_id.clone();
            status.record_applied_now(&config.metadata, now_rfc3339(), &config.spec.secret_refs);
            status.secret_hash = desired.secret_hash.clone();
            if created.slug.is_none() {
                // Gateways reference configs by slug: an answer without one is completed by a
                // read by id. A failed read (a list or a read that lags the create) keeps the
                // id: the drift list shows the slug the status lacks, and it is read then.
                match api.configs().get(&created.id).await {
                    Ok(remote) => {
                        status.slug = Some(remote.slug).filter(|s| !s.is_empty());
                        status.version_id = remote.version_id.or(status.version_id.take());
                        status.remote_updated_at = remote.last_updated_at;
                    }
                    Err(e) => {
                        debug!(config = %created.id, error = %e, "the read after a create answer without a slug failed; the drift list will show the slug")
                    }
                }
            }
            let name = created.slug.unwrap_or(created.id);
            Change::new("Created", format!("created config {name}"))
        }
        Created::Recovered(found) => {
            status.id = Some(found.id.clone());
            status.slug = Some(found.slug.clone()).filter(|s| !s.is_empty());
            // A version this resource published, whose spec is not known (no generation): it
            // counts as written before, so creating it again waits for the promotion gate.
            status.record_applied(crate::resources::config::AppliedVersion {
                applied_at: now_rfc3339(),
                ..Default::default()
            });
            // What the earlier POST sent may be an older spec: read it and diff, soon.
            cx.ctx
                .drift
                .flag(crate::controller::driver::object_key(config));
            Change::new(
                "Created",
                format!(
                    "found config {} from an earlier create whose answer was lost",
                    found.slug
                ),
            )
        }
    };
    // The driver's final status write records the id: a crash before it leaves the intent, and
    // the lookup finds the config again.
    Ok(change)
}

/// The config an earlier create made: the one config with the name and workspace that create
/// sent (not the spec's, which may have been edited since), created within its window, that no
/// other resource records, in a complete listing. The API keeps no marker on configs, so a
/// namesake outside the window, another resource's config, or two candidates never count.
async fn find_created(
    config: &Config,
    cx: &Cx<'_, Config>,
    status: &ConfigStatus,
) -> Result<Lookup<crate::api::ConfigSummary>, Error> {
    let sent = status
        .create_attempt
        .clone()
        .unwrap_or_else(|| CreateAttempt {
            name: Some(config.spec.name.clone()),
            workspace_id: config.spec.workspace_id.clone(),
            ..Default::default()
        });
    let listing = cx
        .api(Op::Read)
        .await?
        .configs()
        .listing(sent.workspace_id.as_deref())
        .await
        .map_err(|e| Error::api("list configs", e))?;
    one_of_ours(
        cx,
        status,
        &sent,
        listing,
        |c| vec![c.id.as_str(), c.slug.as_str()],
        |c| c.created_at.as_deref(),
        |c| {
            sent.name.as_deref() == Some(c.name.as_str())
                && (sent.workspace_id.is_none() || c.workspace_id == sent.workspace_id)
        },
        // The API keeps no marker of the create on a config: a match is never proven.
        |c| Some(format!("config {} ({})", c.slug, c.id)),
    )
    .await
}
