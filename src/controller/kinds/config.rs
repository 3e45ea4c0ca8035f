//! Config: its verbs ([`Verbs`]). The driver observes by slug (or id), PUTs the whole document
//! only when it differs (every PUT mints a new version_id), creates through the shared protocol
//! when there is nothing to adopt, and deletes per `deletionPolicy`.

use kube::ResourceExt;
use tracing::debug;

use crate::api::{
    ApiError, Client, ConfigCreated, ConfigDetail, ConfigSummary, ConfigUpdated, Listing,
};
use crate::controller::Context;
use crate::controller::driver::calls::{Deleting, Own, OwnCalls, Post, Put, Read, Recovered};
use crate::controller::driver::create::{Created, one_unmarked, sent_or};
use crate::controller::driver::drift::{Listed, Row};
use crate::controller::driver::echoes::{Echoable, unless_listed};
use crate::controller::driver::gate::CACHES_LISTED_WITHIN;
use crate::controller::driver::referenced::names;
use crate::controller::driver::verbs::{
    Changes, Comparison, Inputs, Made, Verbs, still_referenced,
};
use crate::controller::driver::{Cx, Managed};
use crate::controller::error::{Halt, Wait};
use crate::controller::kinds::config_refs::{self, Desired};
use crate::controller::kinds::keyed;
use crate::controller::now_rfc3339;
use crate::resources::common::{CreateAttempt, DriftCorrection};
use crate::resources::config::{AppliedHistory, Config, ConfigStatus, ReferencedKind};
use crate::resources::config_document::{GuardrailRef, guardrail_references};
use crate::resources::guardrail::{ClusterGuardrail, Guardrail};
use crate::resources::provider::Provider;

/// True when `config` names `resource` of `kind`: by `spec.resourceRefs`, or, a guardrail, by a
/// slug or id its resource recorded that the document holds (`written`).
fn names_resource<K: Managed>(
    config: &Config,
    written: &[GuardrailRef],
    resource: &K,
    kind: ReferencedKind,
) -> bool {
    let refs = &config.spec.resource_refs;
    let by_ref = refs
        .iter()
        .any(|r| r.kind == kind && names(resource, Some(&r.name), None));
    let by_key = kind != ReferencedKind::Provider
        && written.iter().any(|w| names(resource, None, Some(&w.name)));
    by_ref || by_key
}

/// What uses `config` (from the watch caches, once every watched namespace listed), sorted:
/// `ApiKey NAME` for each key of its namespace whose `defaults.config` names it or that a
/// ConfigRollout put on it (asked or applied), `ConfigRollout NAME` for each rollout of its
/// namespace (not being deleted) naming it as stable or candidate. Another installation's
/// objects do not count.
pub async fn holders(config: &Config, ctx: &Context) -> Result<Vec<String>, Halt> {
    use crate::resources::ApiKey;
    let name = config.name_any();
    let namespace = config.namespace();
    let keys = ctx.stores.of::<ApiKey>();
    let listed = keys
        .listed(ctx.stores_of::<ApiKey>(), CACHES_LISTED_WITHIN)
        .await
        && ctx
            .stores
            .rollouts
            .listed(ctx.stores_of::<Config>(), CACHES_LISTED_WITHIN)
            .await;
    if !listed {
        return Err(Wait::CachesNotReady(
            "the ApiKey and ConfigRollout caches have not listed every watched namespace yet, so whether one uses this Config cannot be decided; waiting".into(),
        ).into());
    }
    let mut holders: Vec<String> = keys
        .all()
        .iter()
        .filter(|k| k.namespace() == namespace && !ctx.installation.is_theirs(k.as_ref()))
        .filter(|k| {
            let by_defaults = k.spec.defaults.as_ref().is_some_and(|d| {
                d.config_id.is_none() && d.config.as_deref() == Some(name.as_str())
            });
            let applied = k.status.as_ref().and_then(|s| s.config_override.as_deref());
            by_defaults || k.config_override() == Some(name.as_str()) || applied == Some(&name)
        })
        .map(|k| format!("ApiKey {}", k.name_any()))
        .collect();
    holders.extend(
        ctx.stores
            .rollouts
            .all()
            .iter()
            .filter(|r| r.namespace() == namespace && r.metadata.deletion_timestamp.is_none())
            .filter(|r| {
                let recorded = r.status.as_ref().and_then(|s| s.installation.as_deref());
                recorded.is_none_or(|id| id == ctx.installation.id())
            })
            .filter(|r| {
                r.spec.stable_config_ref.name == name || r.spec.candidate_config_ref.name == name
            })
            .map(|r| format!("ConfigRollout {}", r.name_any())),
    );
    holders.sort();
    Ok(holders)
}

impl Managed for Config {
    crate::controller::driver::kind::namespaced_api!();
    const KIND: &'static str = "Config";
    const LISTED: bool = true;

    crate::controller::driver::flow::driven!();

    /// The Secret values are the ones last sent, and every `spec.resourceRefs` entry resolves
    /// to the value the remote document was last brought in line with.
    async fn inputs_unchanged(&self, cx: &Cx<'_, Self>, status: &ConfigStatus) -> bool {
        let references = config_refs::resolved_values(self, cx.ctx)
            .is_ok_and(|values| values == status.resolved_references);
        references
            && config_refs::secrets_unchanged(self, cx.ctx, status.secret_hash.as_deref()).await
    }

    crate::controller::driver::kind::promotes!(|config| config.spec.promotion);
}

/// What a Config is brought in line with: its document with the resources it names resolved to
/// their slugs, and the Secret values it substitutes (none in Observe, which never sends them).
pub struct Resolved {
    /// The Config with each `spec.resourceRefs` value written in its document.
    config: Config,
    secrets: Option<Desired>,
    /// The value of each `spec.resourceRefs` entry.
    references: Vec<String>,
}

impl Resolved {
    fn document(&self) -> serde_json::Map<String, serde_json::Value> {
        self.secrets
            .as_ref()
            .map(Desired::request_document)
            .unwrap_or_default()
    }
}

impl Verbs for Config {
    type Desired = Resolved;
    type Calls = Own;
    const RECORDS_DRIFT: bool = true;

    /// What the resources its document names hold (`spec.resourceRefs`, or a guardrail's slug
    /// or id written in the document): a guardrail's Secret values, the key of a provider's
    /// integration. The API keeps them, and a refusal of the document may quote them.
    fn echoable(&self, ctx: &Context) -> Vec<Echoable> {
        let written = guardrail_references(&self.spec.config.to_value());
        let guardrails = ctx.stores.of::<Guardrail>().all();
        let guardrails = guardrails
            .iter()
            .filter(|g| g.namespace() == self.namespace())
            .filter(|g| names_resource(self, &written, &***g, ReferencedKind::Guardrail))
            .flat_map(|g| &g.spec.definition.secret_refs)
            .map(|r| Echoable::Namespaced {
                name: r.secret_key_ref.name.clone(),
                key: r.secret_key_ref.key.clone(),
            });
        let organisation = ctx.stores.of::<ClusterGuardrail>().all();
        let organisation = organisation
            .iter()
            .filter(|g| names_resource(self, &written, &***g, ReferencedKind::ClusterGuardrail))
            .flat_map(|g| &g.spec.definition.secret_refs)
            .map(|r| Echoable::ClusterReadable {
                name: r.secret_key_ref.name.clone(),
                namespace: None,
                key: Some(r.secret_key_ref.key.clone()),
            });
        let providers = ctx.stores.of::<Provider>().all();
        let providers = providers
            .iter()
            .filter(|p| p.namespace() == self.namespace())
            .filter(|p| names_resource(self, &written, &***p, ReferencedKind::Provider))
            .flat_map(|p| Verbs::echoable(&**p, ctx));
        let unlisted = [
            unless_listed::<Guardrail>(ctx),
            unless_listed::<ClusterGuardrail>(ctx),
            unless_listed::<Provider>(ctx),
        ];
        (guardrails.chain(organisation).chain(providers))
            .chain(unlisted.into_iter().flatten())
            .collect()
    }

    /// The resources the document names, by their slugs, then (from the resolved document)
    /// the Secret values and guardrail references, settled before anything is read or written.
    async fn resolve(&self, cx: &Cx<'_, Self>, status: &mut ConfigStatus) -> Inputs<Self> {
        let references = config_refs::resolved_values(self, cx.ctx)?;
        let config = config_refs::with_values(self, &references)?.unwrap_or_else(|| self.clone());
        let secrets = config_refs::desired(&config, cx, status).await?;
        for value in secrets.secret_values() {
            cx.conceal(value);
        }
        Ok(Resolved {
            config,
            secrets: Some(secrets),
            references,
        })
    }
    async fn observed_inputs(&self, cx: &Cx<'_, Self>, _: &mut ConfigStatus) -> Inputs<Self> {
        let config = config_refs::with_resources(self, cx.ctx)?.unwrap_or_else(|| self.clone());
        Ok(Resolved {
            config,
            secrets: None,
            references: Vec::new(),
        })
    }
    /// Never while an ApiKey's requests use the config (its `defaults.config`, or a
    /// ConfigRollout's `aigw.io/rollout-config` asked or applied) or a ConfigRollout names it:
    /// a key is never left pointing at a deleted config.
    async fn before_delete(&self, cx: &Cx<'_, Self>, key: &str) -> Result<(), Halt> {
        let holders = holders(self, cx.ctx).await?;
        let until = format!("none of them names Config {}", self.name_any());
        still_referenced::<Self>(key, "used by", &holders, &until)
    }
    /// A config aigw created that is gone (404 or `AB08`, nothing else) is forgotten, so it is
    /// created again.
    fn record(status: &mut ConfigStatus, remote: Option<&ConfigDetail>) {
        // A read that lacks a key keeps the one recorded.
        let read = remote.map(|r| (r, [&r.version_id, &r.last_updated_at]));
        keyed::record_version(status, read, true);
    }
    fn record_created(
        &self,
        status: &mut ConfigStatus,
        desired: &Resolved,
        created: Made<Self>,
    ) -> String {
        let config = &desired.config;
        match created {
            Created::Posted((created, read)) => {
                status.id = Some(created.id.clone());
                status.slug = created.slug.clone();
                status.version_id = created.version_id.clone();
                status.record_applied_now(
                    &config.metadata,
                    now_rfc3339(),
                    &config.spec.secret_refs,
                );
                status.secret_hash = desired.secrets.as_ref().and_then(|s| s.secret_hash.clone());
                if let Some(remote) = read {
                    status.slug = Some(remote.slug).filter(|s| !s.is_empty());
                    status.version_id = remote.version_id.or(status.version_id.take());
                    status.remote_updated_at = remote.last_updated_at;
                }
                created.slug.unwrap_or(created.id)
            }
            Created::Recovered(found) => keyed::record_recovered_version(status, &found),
        }
    }
    fn record_updated(
        &self,
        status: &mut ConfigStatus,
        desired: &Resolved,
        remote: &ConfigDetail,
        updated: ConfigUpdated,
    ) {
        let config = &desired.config;
        status.secret_hash = desired.secrets.as_ref().and_then(|s| s.secret_hash.clone());
        status.version_id = updated.version_id.or(remote.version_id.clone());
        status.record_applied_now(&config.metadata, now_rfc3339(), &config.spec.secret_refs);
    }
    fn replaced(
        &self,
        desired: &Resolved,
        remote: &ConfigDetail,
        _comparison: &Comparison,
        at: String,
    ) -> DriftCorrection {
        let concealed: Vec<&str> = desired
            .secrets
            .iter()
            .flat_map(Desired::secret_values)
            .collect();
        desired.config.spec.drift_against(remote, at, &concealed)
    }
    fn record_drift(status: &mut ConfigStatus, replaced: DriftCorrection) {
        status.last_drift_correction = Some(Box::new(replaced));
    }
    /// The remote document holds the resolved references now.
    async fn follow_up(
        &self,
        _cx: &Cx<'_, Self>,
        status: &mut ConfigStatus,
        desired: &Resolved,
        _first_sight: bool,
    ) -> Changes {
        status.resolved_references = desired.references.clone();
        Ok(Vec::new())
    }
}

impl OwnCalls for Config {
    type Remote = ConfigDetail;
    type Found = ConfigSummary;
    type Posted = (ConfigCreated, Option<ConfigDetail>);
    type Updated = ConfigUpdated;
    async fn observe(&self, client: &Client, key: &str, _: &ConfigStatus) -> Read<Self> {
        client.configs().get(key).await.map(Some)
    }
    fn sent(&self, cx: &Cx<'_, Self>, desired: &Resolved) -> CreateAttempt {
        let config = &desired.config;
        let request = config.spec.create_request_with(&desired.document());
        cx.create_attempt(
            Some(config.spec.name.clone()),
            config.spec.workspace_id.clone(),
            &request,
        )
    }
    /// POSTs the config. Gateways reference configs by slug: an answer without one is
    /// completed by a read by id. A failed read (a list or a read that lags the create) keeps
    /// the id: the drift list shows the slug the status lacks, and it is read then.
    async fn create(&self, client: &Client, desired: &Resolved) -> Post<Self> {
        let request = desired.config.spec.create_request_with(&desired.document());
        let created = client.configs().create(&request).await?;
        if created.slug.is_some() {
            return Ok((created, None));
        }
        let read = match client.configs().get(&created.id).await {
            Ok(remote) => Some(remote),
            Err(e) => {
                // Its category and status only: the answer may quote the credentials it was sent,
                // and nothing here can conceal them.
                let (error, status) = (e.category(), e.status());
                debug!(config = %created.id, error, ?status, "the read after a create answer without a slug failed; the drift list will show the slug");
                None
            }
        };
        Ok((created, read))
    }
    /// A config has no fixed fields; `secretRefs` differs when a Secret value changed (an
    /// input, not an outside edit).
    fn compare(
        &self,
        desired: &Resolved,
        remote: &ConfigDetail,
        status: &ConfigStatus,
    ) -> Comparison {
        let mut differs = desired.config.spec.diff_without_secrets(remote);
        let mut inputs = Vec::new();
        if desired
            .secrets
            .as_ref()
            .is_some_and(|s| s.secret_hash != status.secret_hash)
        {
            differs.push("secretRefs");
            inputs.push("secretRefs");
        }
        Comparison {
            immutable: Vec::new(),
            differs,
            inputs,
        }
    }
    async fn update(
        &self,
        client: &Client,
        desired: &Resolved,
        remote: &ConfigDetail,
    ) -> Put<Self> {
        let request = desired.config.spec.update_request_with(&desired.document());
        client.configs().update(&remote.slug, &request).await
    }
    async fn delete(&self, at: Deleting<'_, Self>) -> Result<(), ApiError> {
        config_refs::conceal_before_delete(self, &self.spec, at.cx).await;
        at.client.configs().delete(at.key).await
    }
    /// The config an earlier create made: the one config with the name and workspace that create
    /// sent (not the spec's, which may have been edited since), created within its window, that no
    /// other resource records, in a complete listing. The API keeps no marker on configs, so a
    /// namesake outside the window, another resource's config, or two candidates never count.
    async fn find_created(&self, cx: &Cx<'_, Self>, status: &ConfigStatus) -> Recovered<Self> {
        let sent = sent_or(
            status,
            Some(self.spec.name.as_str()),
            self.spec.workspace_id.as_deref(),
        );
        let workspace = sent.workspace_id.as_deref();
        let listing = cx
            .read("list configs", |client| async move {
                client.configs().listing(workspace).await
            })
            .await?;
        one_unmarked(
            cx,
            status,
            (&sent, listing),
            "config",
            |c| c.workspace_id.as_deref(),
            |_| true,
        )
        .await
    }
}

impl Listed for Config {
    fn list_workspace(&self) -> Option<String> {
        self.spec.workspace_id.clone()
    }

    async fn list(client: &Client, workspace: Option<String>) -> Result<Listing<Row>, ApiError> {
        let listing = client.configs().stamps(workspace.as_deref()).await?;
        Ok(listing.map(|c| Row::new([c.id, c.slug], c.created_at, c.last_updated_at)))
    }
}
