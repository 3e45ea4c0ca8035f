//! Integration (cluster-scoped): the organisation's upstream credential on the admin plane.
//! Observe by id (or slug), PUT only when the name, description or a readable configuration
//! field differs or the hash of the write-only values (the key and configurations as sent, from
//! Secrets of the operator's namespace) changed, so a Secret change gives exactly one PUT;
//! create through the shared protocol with `create_default_provider: false`; then merge the
//! workspace access rows the spec names (a removed workspace is disabled, other rows untouched)
//! and the model access. Delete per `deletionPolicy` once no Provider resource binds it.
//!
//! Not a listed kind: the API's `last_updated_at` is null until the first update and an access
//! row's change does not move it, so each reconcile (at least once per drift interval) reads the
//! integration, its access rows and its models. Integrations are few.

use crate::api::{self, Client, Integration as RemoteIntegration, IntegrationsListQuery};
use kube::Resource;

use crate::controller::config_refs::{
    CLUSTER_READABLE, Desired, ReadsSecrets, SECRET_NOT_READABLE,
};
use crate::controller::create::{
    Created, Lookup, body_hash, create_once, made_by_unfinished_create, one_of_ours,
};
use crate::controller::driver::{Change, Cx, Managed, object_key, observed, orphaned, removed};
use crate::controller::error::Error;
use crate::controller::gate::{Op, tenant_id};
use crate::controller::status::common_status;
use crate::controller::{Context, now_rfc3339, spec_already_applied};
use crate::resources::common::CreateAttempt;
use crate::resources::config::ConfigSecretRef;
use crate::resources::config_document::SecretDocument;
use crate::resources::integration::{
    Integration, IntegrationDeletionPolicy, IntegrationSpec, IntegrationStatus, KEY_PATH,
};

/// Condition reason while a Provider resource still binds the integration being deleted.
pub const STILL_REFERENCED: &str = "StillReferenced";

common_status!(
    IntegrationStatus,
    |s| IntegrationStatus {
        last_applied_at: None,
        pending_create: s.pending_create.as_ref().map(|_| String::new()),
        ..s.clone()
    },
    intent_when = |s| s.pending_create.is_some()
);

impl ReadsSecrets for Integration {
    fn secret_refs(&self) -> std::borrow::Cow<'_, [ConfigSecretRef]> {
        SecretDocument::secret_refs(&self.spec)
    }

    /// `spec.keySecretRef` for the key; a configuration's path as `spec.secretRefs` writes it.
    fn secret_source(&self, path: &str) -> String {
        match path.strip_prefix("/configurations") {
            _ if path == KEY_PATH => "spec.keySecretRef".into(),
            Some(rest) => format!("spec.secretRefs, path {rest}"),
            None => format!("spec.secretRefs, path {path}"),
        }
    }
}

impl Managed for Integration {
    crate::controller::driver::kind::cluster_api!();
    type Status = IntegrationStatus;
    const KIND: &'static str = "Integration";
    const MANAGER: &'static str = "aigw/integration";

    fn status(&self) -> Option<&IntegrationStatus> {
        self.status.as_ref()
    }

    fn status_slot(&mut self) -> &mut Option<IntegrationStatus> {
        &mut self.status
    }

    async fn apply(
        &self,
        cx: &Cx<'_, Self>,
        status: &mut IntegrationStatus,
    ) -> Result<Vec<Change>, Error> {
        apply(self, cx, status).await
    }

    async fn observe_only(
        &self,
        cx: &Cx<'_, Self>,
        status: &mut IntegrationStatus,
    ) -> Result<Vec<&'static str>, Error> {
        let Some(remote) = observe(self, cx, status).await? else {
            return Ok(Vec::new());
        };
        let spec = &self.spec;
        let mut fields = spec.immutable_conflicts(&remote);
        fields.extend(spec.diff(&remote));
        let client = cx.api(Op::Read).await?;
        let key = remote.id.clone();
        if !spec.workspaces.is_empty() || !status.workspaces.is_empty() {
            let rows = read_workspaces(client, &key).await?;
            if !spec.access_updates(&rows, &status.workspaces).is_empty() {
                fields.push("workspaces");
            }
        }
        if spec.models.is_some() {
            let models = read_models(client, &key).await?;
            if spec.model_updates(&models).is_some() {
                fields.push("models");
            }
        }
        Ok(fields)
    }

    async fn cleanup(&self, cx: &Cx<'_, Self>) -> Result<Vec<Change>, Error> {
        cleanup(self, cx).await
    }
}

/// The write-only values as sent (`{key?, configurations?}`, Secret values filled in), hashed
/// with the operator's key and the object's uid ([`body_hash`]): what `status.secretHash`
/// records.
fn write_only_hash(
    integration: &Integration,
    ctx: &Context,
    document: &serde_json::Map<String, serde_json::Value>,
) -> Option<String> {
    body_hash(&ctx.hash_key, integration.meta().uid.as_deref(), document)
}

/// `keySecretRef.namespace`, when given, must be the operator's Connection secret namespace: a
/// cluster-scoped resource never reads another namespace's Secrets.
fn check_key_namespace(integration: &Integration, ctx: &Context) -> Result<(), Error> {
    let Some(named) = integration
        .spec
        .key_secret_ref
        .as_ref()
        .and_then(|r| r.namespace.as_deref())
    else {
        return Ok(());
    };
    let own = ctx.connections.secret_namespace();
    if own == Some(named) {
        return Ok(());
    }
    Err(Error::not_allowed(
        SECRET_NOT_READABLE,
        format!(
            "spec.keySecretRef.namespace {named} is not the namespace the operator reads Connection Secrets from ({}): an Integration reads only Secrets there, labelled {CLUSTER_READABLE}=true",
            own.unwrap_or("none configured")
        ),
    ))
}

async fn apply(
    integration: &Integration,
    cx: &Cx<'_, Integration>,
    status: &mut IntegrationStatus,
) -> Result<Vec<Change>, Error> {
    let spec = &integration.spec;
    check_key_namespace(integration, cx.ctx)?;
    let desired = Desired::read(integration, spec, cx.ctx).await?;
    for value in desired.secret_values() {
        cx.conceal(value);
    }
    let document = desired.request_document();
    let hash = write_only_hash(integration, cx.ctx, &document);
    let mut changes = Vec::new();
    let key = match observe(integration, cx, status).await? {
        None => {
            changes.push(create(integration, cx, status, &document, hash).await?);
            status.id.clone().unwrap_or_default()
        }
        Some(remote) => {
            if let Some(change) = update(integration, cx, status, &remote, &document, hash).await? {
                changes.push(change);
            }
            remote.id.clone()
        }
    };
    if let Some(change) = apply_access(spec, cx, status, &key).await? {
        changes.push(change);
    }
    if let Some(change) = apply_models(spec, cx, &key).await? {
        changes.push(change);
    }
    Ok(changes)
}

/// One PUT when the remote integration differs or the write-only values changed.
async fn update(
    integration: &Integration,
    cx: &Cx<'_, Integration>,
    status: &mut IntegrationStatus,
    remote: &RemoteIntegration,
    document: &serde_json::Map<String, serde_json::Value>,
    hash: Option<String>,
) -> Result<Option<Change>, Error> {
    let spec = &integration.spec;
    let conflicts = spec.immutable_conflicts(remote);
    if !conflicts.is_empty() {
        return Err(Error::InvalidSpec(format!(
            "remote integration {} has a different {} (an Integration manages organisation integrations of its aiProviderId only) and the API cannot change it; create a new Integration instead",
            remote.slug,
            conflicts.join(", ")
        )));
    }
    let mut differences = spec.diff(remote);
    let outside = !differences.is_empty();
    if hash != status.secret_hash {
        differences.push("write-only values (key, configurations)");
    }
    if differences.is_empty() {
        return Ok(None);
    }
    let key = &remote.id;
    let fields = differences.join(", ");
    cx.gate.intend(format!(
        "would update integration {} ({fields})",
        remote.slug
    ));
    let client = cx.api(Op::Update).await?;
    client
        .integrations()
        .update(key, &spec.update_request_with(document))
        .await
        .map_err(|e| Error::api(format!("update integration {}", remote.slug), e))?;
    status.secret_hash = hash;
    status.last_applied_at = Some(now_rfc3339());
    let drift = outside
        && spec_already_applied(
            integration.meta().generation,
            status.observed_generation,
            &status.conditions,
        );
    Ok(Some(match drift {
        true => Change::new(
            "DriftCorrected",
            format!(
                "integration {} was changed outside aigw ({fields}); restored it",
                remote.slug
            ),
        ),
        false => Change::new(
            "Updated",
            format!("updated integration {} ({fields})", remote.slug),
        ),
    }))
}

/// GETs the integration this resource recorded (or its slug names), and records its id and
/// slug. Gone (404/`AB08`) means a new one is created (with `spec.slug`, if set).
async fn observe(
    integration: &Integration,
    cx: &Cx<'_, Integration>,
    status: &mut IntegrationStatus,
) -> Result<Option<RemoteIntegration>, Error> {
    let Some(key) = status
        .id
        .clone()
        .or(integration.spec.slug.clone())
        .or(status.slug.clone())
    else {
        return Ok(None);
    };
    let client = cx.api(Op::Read).await?;
    let read = client.integrations().get(&key).await;
    let found = observed(&format!("integration {key}"), None, read)?;
    match &found {
        Some(remote) => {
            status.id = Some(remote.id.clone()).filter(|id| !id.is_empty());
            status.slug = Some(remote.slug.clone()).filter(|s| !s.is_empty());
            // Found by `spec.slug` while a create of it was in flight: that create made it (a
            // slug taken before would have been refused, which clears the intent).
            crate::controller::driver::create::clear_intent(status);
        }
        None => {
            status.id = None;
            status.slug = None;
            status.secret_hash = None;
        }
    }
    Ok(found)
}

/// Creates the integration through the shared protocol (see [`crate::controller::create`]).
async fn create(
    integration: &Integration,
    cx: &Cx<'_, Integration>,
    status: &mut IntegrationStatus,
    document: &serde_json::Map<String, serde_json::Value>,
    hash: Option<String>,
) -> Result<Change, Error> {
    let spec = &integration.spec;
    let before = status.clone();
    let organisation = tenant_id(cx.ctx, spec.connection_name());
    let request = spec.create_request_with(document, organisation);
    let sent = CreateAttempt {
        name: Some(spec.name.clone()),
        workspace_id: None,
        body_hash: body_hash(
            &cx.ctx.hash_key,
            integration.meta().uid.as_deref(),
            &request,
        ),
        ended_at: None,
        intent: None,
    };
    let client = cx.api(Op::Create).await?;
    let outcome = create_once(
        cx,
        status,
        "integration",
        sent,
        find_created(integration, cx, &before),
        client,
        async |client| client.integrations().create(&request).await,
    )
    .await?;
    Ok(match outcome {
        Created::Posted(created) => {
            status.id = Some(created.id.clone());
            status.slug = Some(created.slug.clone()).filter(|s| !s.is_empty());
            status.secret_hash = hash;
            status.last_applied_at = Some(now_rfc3339());
            Change::new("Created", format!("created integration {}", created.slug))
        }
        Created::Recovered(found) => {
            status.id = Some(found.id.clone());
            status.slug = Some(found.slug.clone()).filter(|s| !s.is_empty());
            // What the earlier POST sent may be an older spec: the next read compares and the
            // unknown hash sends the write-only values once more.
            status.secret_hash = None;
            cx.ctx.drift.flag(object_key(integration));
            Change::new(
                "Created",
                format!(
                    "found integration {} from an earlier create whose answer was lost",
                    found.slug
                ),
            )
        }
    })
}

/// The integration an earlier create made: the one with `spec.slug` (a deterministic identity),
/// else the one with the name it sent, created within its window, claimed by no other
/// resource, in a complete listing of the organisation's integrations.
async fn find_created(
    integration: &Integration,
    cx: &Cx<'_, Integration>,
    status: &IntegrationStatus,
) -> Result<Lookup<RemoteIntegration>, Error> {
    let client = cx.api(Op::Read).await?;
    let query = IntegrationsListQuery {
        integration_type: Some("organisation".into()),
        ..Default::default()
    };
    let listing = client
        .integrations()
        .listing(&query)
        .await
        .map_err(|e| Error::api("list integrations", e))?;
    if let Some(slug) = &integration.spec.slug {
        let found = listing.items.iter().find(|i| &i.slug == slug).cloned();
        return Ok(match (found, listing.complete) {
            (Some(found), _) => Lookup::Found(found),
            (None, true) => Lookup::Absent,
            (None, false) => Lookup::Unknown("the integration list is incomplete".into()),
        });
    }
    let sent = status
        .create_attempt
        .clone()
        .unwrap_or_else(|| CreateAttempt {
            name: Some(integration.spec.name.clone()),
            ..Default::default()
        });
    one_of_ours(
        cx,
        status,
        &sent,
        listing,
        |i| vec![i.id.as_str(), i.slug.as_str()],
        |i| i.created_at.as_deref(),
        |i| sent.name.as_deref() == Some(i.name.as_str()) && i.workspace_id.is_none(),
        // The API keeps no marker of the create on a integration: a match is never proven.
        |i| Some(format!("integration {} ({})", i.slug, i.id)),
    )
    .await
}

async fn read_workspaces(client: &Client, key: &str) -> Result<api::IntegrationWorkspaces, Error> {
    client
        .integrations()
        .workspaces(key)
        .await
        .map_err(|e| Error::api(format!("read the workspace access of integration {key}"), e))
}

async fn read_models(client: &Client, key: &str) -> Result<api::IntegrationModels, Error> {
    client
        .integrations()
        .models(key)
        .await
        .map_err(|e| Error::api(format!("read the models of integration {key}"), e))
}

/// Merges the access rows the spec names and disables the workspaces it no longer lists, in
/// one PUT; rows of other workspaces are never sent. Records the workspaces it enabled.
async fn apply_access(
    spec: &IntegrationSpec,
    cx: &Cx<'_, Integration>,
    status: &mut IntegrationStatus,
    key: &str,
) -> Result<Option<Change>, Error> {
    if spec.workspaces.is_empty() && status.workspaces.is_empty() {
        return Ok(None);
    }
    let rows = read_workspaces(cx.api(Op::Read).await?, key).await?;
    let updates = spec.access_updates(&rows, &status.workspaces);
    if updates.is_empty() {
        status.workspaces = spec.enabled_workspaces();
        return Ok(None);
    }
    let describe = |enabled: bool| {
        let ids: Vec<&str> = updates
            .iter()
            .filter(|u| u.enabled == enabled)
            .map(|u| u.id.as_str())
            .collect();
        ids.join(", ")
    };
    let (granted, disabled) = (describe(true), describe(false));
    let mut what = Vec::new();
    if !granted.is_empty() {
        what.push(format!("enabled or changed {granted}"));
    }
    if !disabled.is_empty() {
        what.push(format!("disabled {disabled}"));
    }
    let what = what.join("; ");
    cx.gate.intend(format!(
        "would update the workspace access of integration {key}: {what}"
    ));
    let request = api::UpdateWorkspacesRequest {
        workspaces: updates,
        create_default_provider: Some(false),
        ..Default::default()
    };
    cx.api(Op::Update)
        .await?
        .integrations()
        .update_workspaces(key, &request)
        .await
        .map_err(|e| {
            Error::api(
                format!("update the workspace access of integration {key}"),
                e,
            )
        })?;
    status.workspaces = spec.enabled_workspaces();
    Ok(Some(Change::new(
        "AccessUpdated",
        format!("workspace access of integration {key}: {what}"),
    )))
}

/// One model access PUT when a listed model (or `allowAllModels`) differs.
async fn apply_models(
    spec: &IntegrationSpec,
    cx: &Cx<'_, Integration>,
    key: &str,
) -> Result<Option<Change>, Error> {
    if spec.models.is_none() {
        return Ok(None);
    }
    let models = read_models(cx.api(Op::Read).await?, key).await?;
    let Some(request) = spec.model_updates(&models) else {
        return Ok(None);
    };
    let slugs: Vec<&str> = request.models.iter().map(|m| m.slug.as_str()).collect();
    let what = match (slugs.is_empty(), request.allow_all_models) {
        (_, Some(all)) => format!("{} (allowAllModels {all})", slugs.join(", ")),
        (_, None) => slugs.join(", "),
    };
    cx.gate.intend(format!(
        "would update the models of integration {key}: {what}"
    ));
    cx.api(Op::Update)
        .await?
        .integrations()
        .update_models(key, &request)
        .await
        .map_err(|e| Error::api(format!("update the models of integration {key}"), e))?;
    Ok(Some(Change::new(
        "ModelsUpdated",
        format!("models of integration {key}: {what}"),
    )))
}

async fn cleanup(
    integration: &Integration,
    cx: &Cx<'_, Integration>,
) -> Result<Vec<Change>, Error> {
    let status = integration.status.clone().unwrap_or_default();
    let known = status.id.clone().or(status.slug.clone());
    if integration.spec.deletion_policy == IntegrationDeletionPolicy::Orphan {
        return Ok(orphaned(&format!(
            "integration {}",
            status.slug.clone().or(known).unwrap_or_default()
        )));
    }
    let key = match (known, &status.pending_create) {
        (Some(key), _) => key,
        (None, Some(_)) => {
            let lookup = find_created(integration, cx, &status);
            match made_by_unfinished_create(&status, "integration", lookup).await? {
                Some(found) => found.id,
                None => return Ok(Vec::new()),
            }
        }
        (None, None) => return Ok(Vec::new()),
    };
    let users = crate::controller::provider::naming(integration, cx.ctx).await?;
    if !users.is_empty() {
        return Err(Error::not_allowed(
            STILL_REFERENCED,
            format!(
                "integration {key} is still bound by Provider {}; it is deleted once no Provider binds it (or set deletionPolicy: Orphan)",
                users.join(", ")
            ),
        ));
    }
    let organisation = tenant_id(cx.ctx, integration.spec.connection_name());
    let client = cx.api(Op::Delete).await?;
    let result = client
        .integrations()
        .delete(&key, organisation.as_deref())
        .await;
    let name = status.slug.clone().unwrap_or(key);
    removed("Deleted", "delete", &format!("integration {name}"), result)
}

/// An Integration's own triggers: the Secrets it reads (in the operator's namespace) and the
/// Providers that bind it.
pub fn watch_inputs(
    controller: kube::runtime::controller::Controller<Integration>,
    ctx: &Context,
    namespace: Option<&str>,
    integrations: kube::runtime::reflector::Store<Integration>,
) -> kube::runtime::controller::Controller<Integration> {
    let controller = crate::controller::config_refs::watch_secrets(
        controller,
        ctx,
        namespace,
        integrations.clone(),
    );
    crate::controller::provider::watch_binders(controller, ctx, integrations)
}
