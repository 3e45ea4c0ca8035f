//! Config: observe by slug, PUT the whole document only when it differs (every PUT mints a new
//! version_id), create when there is nothing to adopt, delete per `deletionPolicy`.

use super::driver::{Change, Cx, Managed, observed, orphaned, removed};
use super::error::Error;
use super::status::common_status;
use super::{now_rfc3339, spec_already_applied};
use crate::api::ConfigDetail;
use crate::resources::config::{Config, ConfigDeletionPolicy, ConfigStatus};

common_status!(
    ConfigStatus,
    |s| ConfigStatus {
        last_applied_at: None,
        pending_create: s.pending_create.as_ref().map(|_| String::new()),
        ..s.clone()
    },
    fresh_read_when = |s| s.id.is_none() || s.pending_create.is_some()
);

impl Managed for Config {
    type Status = ConfigStatus;
    const KIND: &'static str = "Config";
    const MANAGER: &'static str = "aigw/config";

    fn status(&self) -> Option<&ConfigStatus> {
        self.status.as_ref()
    }

    fn connection_name(&self) -> &str {
        self.spec.connection_name()
    }

    async fn apply(
        &self,
        cx: &Cx<'_, Self>,
        status: &mut ConfigStatus,
    ) -> Result<Vec<Change>, Error> {
        let mut changes = Vec::new();
        let remote = match observe(self, cx, status).await? {
            Some(remote) => remote,
            None => {
                let Some(created) = create(self, cx, status).await? else {
                    return Ok(changes);
                };
                changes.push(created);
                return Ok(changes);
            }
        };
        status.id = Some(remote.id.clone());
        status.slug = Some(remote.slug.clone());
        let differences = self.spec.diff(&remote);
        if differences.is_empty() {
            status.version_id = remote.version_id.clone();
            return Ok(changes);
        }
        let updated = cx
            .api
            .configs()
            .update(&remote.slug, &self.spec.update_request())
            .await
            .map_err(|e| Error::api(format!("update config {}", remote.slug), e))?;
        status.version_id = updated.version_id.or(remote.version_id);
        status.last_applied_at = Some(now_rfc3339());
        let fields = differences.join(", ");
        changes.push(
            if spec_already_applied(
                self.metadata.generation,
                status.observed_generation,
                &status.conditions,
            ) {
                Change::new(
                    "DriftCorrected",
                    format!(
                        "config {} was changed outside aigw ({fields}); restored it",
                        remote.slug
                    ),
                )
            } else {
                Change::new(
                    "Updated",
                    format!("updated config {} ({fields})", remote.slug),
                )
            },
        );
        Ok(changes)
    }

    async fn cleanup(&self, cx: &Cx<'_, Self>) -> Result<Vec<Change>, Error> {
        let status = self.status.clone().unwrap_or_default();
        let known = status.slug.or(self.spec.slug.clone());
        if self.spec.deletion_policy == ConfigDeletionPolicy::Orphan {
            return Ok(orphaned(&format!("config {}", known.unwrap_or_default())));
        }
        // A create whose outcome was never learned may still have made the config.
        let pending = match (&known, status.pending_create) {
            (None, Some(_)) => find_by_name(self, cx).await?.map(|found| found.slug),
            _ => None,
        };
        let Some(slug) = known.or(pending) else {
            return Ok(Vec::new());
        };
        let result = cx.api.configs().delete(&slug).await;
        removed("Deleted", "delete", &format!("config {slug}"), result)
    }
}

/// GETs the remote config this object manages, if any. A config aigw created that vanished is
/// forgotten (so it is created again); an adopted one that is missing is an error.
async fn observe(
    config: &Config,
    cx: &Cx<'_, Config>,
    status: &mut ConfigStatus,
) -> Result<Option<ConfigDetail>, Error> {
    let adopted = config.spec.slug.as_deref();
    let Some(slug) = adopted.or(status.slug.as_deref()).map(str::to_string) else {
        return Ok(None);
    };
    let result = cx.api.configs().get(&slug).await;
    let found = observed(
        &format!("config {slug}"),
        adopted.map(|_| "spec.slug"),
        result,
    )?;
    if found.is_none() {
        status.id = None;
        status.slug = None;
        status.version_id = None;
    }
    Ok(found)
}

/// Creates the remote config, or finds the one an earlier create made.
///
/// A POST whose answer is lost (timeout, reset connection, response dropped after commit, or
/// this process killed mid-call) may or may not have created the config. To never leave two
/// remote configs, the intent is recorded in `status.pendingCreate` (written to the cluster)
/// *before* the POST and cleared only when its outcome is known. A reconcile that finds the
/// intent still set lists the configs and adopts the one with our name instead of POSTing
/// again; only when none exists is the POST repeated.
async fn create(
    config: &Config,
    cx: &Cx<'_, Config>,
    status: &mut ConfigStatus,
) -> Result<Option<Change>, Error> {
    if status.pending_create.is_some()
        && let Some(found) = find_by_name(config, cx).await?
    {
        status.id = Some(found.id.clone());
        status.slug = Some(found.slug.clone());
        status.pending_create = None;
        let remote = cx
            .api
            .configs()
            .get(&found.slug)
            .await
            .map_err(|e| Error::api(format!("read config {}", found.slug), e))?;
        status.version_id = remote.version_id.clone();
        if !config.spec.diff(&remote).is_empty() {
            let updated = cx
                .api
                .configs()
                .update(&found.slug, &config.spec.update_request())
                .await
                .map_err(|e| Error::api(format!("update config {}", found.slug), e))?;
            status.version_id = updated.version_id.or(remote.version_id);
        }
        return Ok(Some(Change::new(
            "Created",
            format!(
                "found config {} from an earlier create whose answer was lost",
                found.slug
            ),
        )));
    }

    status.pending_create = Some(now_rfc3339());
    cx.save_status(status).await?;
    match cx.api.configs().create(&config.spec.create_request()).await {
        Ok(created) => {
            status.pending_create = None;
            status.id = Some(created.id.clone());
            status.version_id = created.version_id.clone();
            status.slug = match created.slug {
                Some(slug) => Some(slug),
                None => Some(
                    cx.api
                        .configs()
                        .get(&created.id)
                        .await
                        .map_err(|e| Error::api(format!("read config {}", created.id), e))?
                        .slug,
                ),
            };
            status.last_applied_at = Some(now_rfc3339());
            let slug = status.slug.clone().unwrap_or_default();
            Ok(Some(Change::new(
                "Created",
                format!("created config {slug}"),
            )))
        }
        // Outcome unknown: keep the intent so the next reconcile looks before it creates.
        Err(e) if e.outcome_unknown() => Err(Error::api(
            "create config (outcome unknown, will look it up)",
            e,
        )),
        Err(e) => {
            status.pending_create = None;
            Err(Error::api("create config", e))
        }
    }
}

async fn find_by_name(
    config: &Config,
    cx: &Cx<'_, Config>,
) -> Result<Option<crate::api::ConfigSummary>, Error> {
    let configs = cx
        .api
        .configs()
        .list(config.spec.workspace_id.as_deref())
        .await
        .map_err(|e| Error::api("list configs", e))?;
    Ok(configs.into_iter().find(|c| c.name == config.spec.name))
}
