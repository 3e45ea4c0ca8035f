//! Integration (cluster-scoped): the organisation's upstream credential on the admin plane.
//! The verbs of the kind ([`Verbs`]): the driver observes by id (or slug), PUTs only when the
//! name, description or a readable configuration field differs or the hash of the write-only
//! values (the key and configurations as sent, from Secrets of the operator's namespace)
//! changed, so a Secret change gives exactly one PUT; creates with
//! `create_default_provider: false`; then the workspace access rows the spec names are merged
//! (a removed workspace is disabled, other rows untouched) and the model access applied. Delete
//! per `deletionPolicy` once no Provider resource binds it.
//!
//! Not a listed kind: the API's `last_updated_at` is null until the first update and an access
//! row's change does not move it, so each reconcile (at least once per drift interval) reads the
//! integration, its access rows and its models. Integrations are few.

use kube::ResourceExt;
use serde_json::{Map, Value};

mod access;

use crate::api::{self, Integration as RemoteIntegration};
use crate::controller::Context;
use crate::controller::driver::calls::{Bodies, Through};
use crate::controller::driver::echoes::{Echoable, unless_listed};
use crate::controller::driver::gate::tenant_id;
use crate::controller::driver::referenced::{Ref, bound, ready_named, users};
use crate::controller::driver::verbs::{
    Changes, Comparison, Differing, Inputs, Verbs, still_referenced,
};
use crate::controller::driver::{Cx, Managed};
use crate::controller::error::{Error, Halt};
use crate::controller::kinds::config_refs::{
    self, CLUSTER_READABLE, Desired, ReadsSecrets, SECRET_NOT_READABLE,
};
use crate::controller::kinds::secret_inputs::{self, create_parts};
use crate::controller::state::triggers::Triggers;
use crate::resources::config::ConfigSecretRef;
use crate::resources::config_document::SecretDocument;
use crate::resources::integration::{
    Integration, IntegrationStatus, KEY_PATH, SecretMapping, same_mappings,
};
use crate::resources::secret_reference::SecretReference;

/// Condition reason while a SecretReference resource `spec.secretMappings` names is missing,
/// being deleted or not Ready yet.
pub const SECRET_REFERENCE_NOT_READY: &str = "SecretReferenceNotReady";

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
    const KIND: &'static str = "Integration";

    crate::controller::driver::flow::driven!();
}

/// What an integration is written with besides the spec.
#[derive(Clone, Default)]
pub struct Sent {
    /// `{key?, configurations?}`, Secret values filled in: what `status.secretHash` hashes.
    document: Map<String, Value>,
    /// `spec.secretMappings` in the API's form, references resolved; `None` leaves the API's.
    mappings: Option<Vec<Value>>,
}

type Written = secret_inputs::Written<Sent>;

/// The driver observes by id (or slug: [`CreatesAs`]) and PUTs only when the name,
/// description or a readable configuration field differs or the write-only values changed;
/// the workspace access rows and the model access follow ([`Verbs::sync_sub_resources`]).
///
/// [`CreatesAs`]: crate::resources::common::Naming::CreatesAs
impl Verbs for Integration {
    /// `None` in Observe, which reads no Secret ([`Verbs::UNREAD_INPUTS`]).
    type Desired = Option<Written>;
    type Calls = Through<api::Integrations<'static>>;
    const UNREAD_INPUTS: Option<Option<Written>> = Some(None);

    /// The `auth_config` Secrets of the secret references it maps (`spec.secretMappings`): the
    /// API keeps them, and a refusal of the mapping may quote them.
    fn echoable(&self, ctx: &Context) -> Vec<Echoable> {
        let mapped = self.spec.secret_mappings.iter().flatten().filter_map(|m| {
            let name = m.secret_reference_ref.as_ref().map(|r| r.name.as_str());
            bound::<SecretReference>(ctx, name, m.secret_reference.as_deref())
        });
        mapped
            .map(|reference| {
                let named = &reference.spec.auth_config_secret_ref;
                Echoable::ClusterReadable {
                    name: named.name.clone(),
                    namespace: named.namespace.clone(),
                    key: None,
                }
            })
            .chain(
                unless_listed::<SecretReference>(ctx)
                    .filter(|_| self.spec.secret_mappings.is_some()),
            )
            .collect()
    }
    async fn resolve(&self, cx: &Cx<'_, Self>, _: &mut IntegrationStatus) -> Inputs<Self> {
        check_key_namespace(self, cx.ctx)?;
        let desired = Desired::read(self, &self.spec, cx.ctx).await?;
        for value in desired.secret_values() {
            cx.conceal(value);
        }
        let document = desired.request_document();
        // Without a value from a Secret there is nothing write-only to send: an integration
        // whose key the gateway reads through `secretMappings` (as `aigw export` writes one) is
        // adopted without a write.
        let from_secrets = desired.secret_values().next().is_some();
        let hash = secret_inputs::hash(cx, &document).filter(|_| from_secrets);
        let mappings = secret_mappings(self, cx.ctx)?;
        Ok(Some(Written::new(cx, Sent { document, mappings }, hash)))
    }
    async fn before_delete(&self, cx: &Cx<'_, Self>, key: &str) -> Result<(), Halt> {
        let users = crate::controller::kinds::provider::naming(self, cx.ctx).await?;
        let until = "no Provider binds it";
        still_referenced::<Self>(key, "bound by Provider", &users, until)
    }
    secret_inputs::records_sent!();
    /// The workspace access rows, then the model access.
    async fn sync_sub_resources(
        &self,
        cx: &Cx<'_, Self>,
        status: &mut IntegrationStatus,
    ) -> Changes {
        access::sync(&self.spec, cx, status).await
    }
    async fn sub_resources_differ(
        &self,
        cx: &Cx<'_, Self>,
        status: &IntegrationStatus,
    ) -> Differing {
        access::differ(&self.spec, cx, status).await
    }
}

impl Bodies<api::Integrations<'static>> for Integration {
    fn compare(
        &self,
        desired: &Option<Written>,
        remote: &RemoteIntegration,
        status: &IntegrationStatus,
    ) -> Comparison {
        let mut differs = self.spec.diff(remote);
        let wanted = desired.as_ref().and_then(|w| w.values.mappings.as_deref());
        if wanted.is_some_and(|m| !same_mappings(m, remote.secret_mappings.as_deref())) {
            differs.push("secretMappings");
        }
        let readable = (self.spec.immutable_conflicts(remote), differs);
        // The field a change of the write-only values reports: an input, never an outside edit.
        const WRITE_ONLY: &str = "write-only values (key, configurations)";
        secret_inputs::compare(desired, status.secret_hash.as_ref(), WRITE_ONLY, readable)
    }
    /// The spec with the write-only values filled in, in the tenant it names.
    fn create_request(&self, desired: &Option<Written>) -> api::CreateIntegrationRequest {
        let (sent, organisation) = create_parts(desired);
        let mut request = self.spec.create_request_with(&sent.document, organisation);
        request.secret_mappings = sent.mappings;
        request
    }
    fn update_request(&self, desired: &Option<Written>) -> api::UpdateIntegrationRequest {
        let sent = desired
            .as_ref()
            .map(|w| w.values.clone())
            .unwrap_or_default();
        let mut request = self.spec.update_request_with(&sent.document);
        request.secret_mappings = sent.mappings;
        request
    }
    /// The Secret values this resource sends are concealed (a Secret gone by now leaves
    /// nothing to conceal); the delete names the integration's tenant.
    async fn before_remote_delete(&self, cx: &Cx<'_, Self>) -> Option<String> {
        if check_key_namespace(self, cx.ctx).is_ok()
            && let Ok(desired) = Desired::read(self, &self.spec, cx.ctx).await
        {
            for value in desired.secret_values() {
                cx.conceal(value);
            }
        }
        tenant_id(cx.ctx, self.spec.connection_name())
    }
}

/// `spec.secretMappings` in the API's form: a SecretReference resource resolved to the UUID it
/// recorded, once it is Ready on a Connection of this integration's tenant (until then the
/// integration waits: `SecretReferenceNotReady`); a `secretReference` as written. `None`: the
/// spec leaves the API's mappings as they are.
fn secret_mappings(integration: &Integration, ctx: &Context) -> Result<Option<Vec<Value>>, Halt> {
    let Some(mappings) = &integration.spec.secret_mappings else {
        return Ok(None);
    };
    let mut sent = Vec::with_capacity(mappings.len());
    for mapping in mappings {
        let reference = match (&mapping.secret_reference_ref, &mapping.secret_reference) {
            (Some(named), _) => ready_reference(integration, ctx, &named.name)?,
            (None, Some(given)) => given.clone(),
            (None, None) => {
                return Err(Error::InvalidSpec(format!(
                    "spec.secretMappings entry {} names no secret reference: set secretReferenceRef or secretReference",
                    mapping.target_field
                ))
                .into());
            }
        };
        sent.push(mapping.to_api(&reference));
    }
    Ok(Some(sent))
}

/// The UUID the SecretReference resource `name` recorded, once it can be mapped.
fn ready_reference(integration: &Integration, ctx: &Context, name: &str) -> Result<String, Halt> {
    let by = Ref::new(name, "spec.secretMappings", SECRET_REFERENCE_NOT_READY);
    let (_, id) = ready_named::<SecretReference, _>(integration, ctx, &by, |s| s.id.clone())?;
    Ok(id)
}

/// The Integration resources whose `spec.secretMappings` name the SecretReference resource
/// `name` (by resource) or `keys` (its UUID and slug, as a `secretReference`), by name, of
/// every watched one ([`users`]: it waits while the caches fill).
pub async fn mapping(ctx: &Context, name: &str, keys: &[String]) -> Result<Vec<String>, Halt> {
    let question = "whether an Integration maps this secret reference";
    let maps = |i: &Integration| {
        i.spec.secret_mappings.iter().flatten().any(|m| {
            by_resource(m) == Some(name)
                || m.secret_reference
                    .as_ref()
                    .is_some_and(|k| keys.contains(k))
        })
    };
    users(ctx, question, maps, |i: &Integration| i.name_any()).await
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

/// An Integration's own triggers: the Secrets it reads (in the operator's namespace) and the
/// Providers that bind it.
pub fn watch_inputs(triggers: Triggers<'_, Integration>) -> Triggers<'_, Integration> {
    let triggers = watch_references(config_refs::watch_secrets(triggers));
    crate::controller::kinds::provider::watch_binders(triggers)
}

/// Requeues the Integrations whose `spec.secretMappings` name a SecretReference resource
/// whenever it changes, so one waiting for it is written as soon as it is Ready.
fn watch_references(triggers: Triggers<'_, Integration>) -> Triggers<'_, Integration> {
    triggers.when(|i: &Integration, reference: &SecretReference| {
        let name = reference.metadata.name.as_deref();
        let mut mappings = i.spec.secret_mappings.iter().flatten();
        name.is_some() && mappings.any(|m| by_resource(m) == name)
    })
}

/// The SecretReference resource a mapping names (`secretReferenceRef`), by name.
fn by_resource(mapping: &SecretMapping) -> Option<&str> {
    let named = mapping.secret_reference_ref.as_ref();
    named.map(|r| r.name.as_str())
}
