//! SecretReference (cluster-scoped): the organisation's pointer into an external secret
//! manager. The verbs of the kind ([`Verbs`]): the driver observes by id (or slug), PUTs only
//! when a readable field (name, description, secret path and key, whether every workspace may
//! use it, tags) differs or the keyed hash of what a read never shows (`auth_config` from the
//! Secret, the allowed workspaces) changed, so a Secret change gives exactly one PUT. Delete
//! per `deletionPolicy`; while the API refuses it because an integration maps a field to the
//! reference, the resource reports `StillReferenced` with the API's words and tries again.
//!
//! Not a listed kind: references are few, and each reconcile (at least once per drift
//! interval) reads the reference.

use kube::{Resource, ResourceExt};
use serde_json::{Map, Value};

use crate::api::{self, ApiError, SecretReference as RemoteReference, SecretReferencesListQuery};
use crate::controller::Context;
use crate::controller::driver::calls::{Bodies, Through};
use crate::controller::driver::create::{Created, Lookup, Row, body_hash, by_slug_or_name};
use crate::controller::driver::gate::{Op, tenant_id};
use crate::controller::driver::verbs::{Comparison, Naming, Verbs};
use crate::controller::driver::{Cx, Managed};
use crate::controller::error::{Error, Halt};
use crate::controller::kinds::cluster_secret;
use crate::controller::kinds::config_refs::ReadsSecrets;
use crate::controller::kinds::keyed;
use crate::resources::common::Recorded;
use crate::resources::config::{ConfigSecretRef, SecretKeyRef};
use crate::resources::integration::Integration;
use crate::resources::secret_reference::{SecretReference, SecretReferenceStatus};

/// Condition reason while the API refuses the delete because something maps to the reference.
pub const STILL_REFERENCED: &str = "StillReferenced";

/// The Secret `spec.authConfigSecretRef` names, for the Secret watch (which matches by name):
/// the reference takes every key of it, so the key here names none.
impl ReadsSecrets for SecretReference {
    fn secret_refs(&self) -> std::borrow::Cow<'_, [ConfigSecretRef]> {
        std::borrow::Cow::Owned(vec![ConfigSecretRef {
            path: "/auth_config".into(),
            secret_key_ref: SecretKeyRef {
                name: self.spec.auth_config_secret_ref.name.clone(),
                key: String::new(),
            },
        }])
    }

    fn secret_source(&self, _path: &str) -> String {
        "spec.authConfigSecretRef".into()
    }
}

impl Managed for SecretReference {
    crate::controller::driver::kind::cluster_api!();
    const KIND: &'static str = "SecretReference";

    crate::controller::driver::flow::driven!();
}

/// What a reference is written with: `auth_config` as the Secret holds it, the hash of what a
/// read never shows, and the tenant a create names. Its `Debug` shows no value.
pub struct Written {
    auth_config: Map<String, Value>,
    /// [`unreadable_hash`]: what `status.secretHash` records.
    hash: Option<String>,
    organisation: Option<String>,
}

/// The field a change of the unreadable inputs reports: an input, never an outside edit.
const UNREADABLE: &str = "authConfig (from spec.authConfigSecretRef) or allowedWorkspaces";

impl Verbs for SecretReference {
    /// `None` in Observe, which reads no Secret.
    type Inputs = Option<Written>;
    type Desired = Option<Written>;
    type Remote = RemoteReference;
    type Found = RemoteReference;
    type Posted = api::Created;
    type Updated = ();
    type Calls = Through<api::SecretReferences<'static>>;
    const WHAT: &'static str = "secret reference";
    const ADOPTED_BY: &'static str = "spec.slug";
    const NAMING: Naming = Naming::CreatesAs;
    const RECORDS_DRIFT: bool = false;

    async fn resolve(
        &self,
        cx: &Cx<'_, Self>,
        _status: &mut SecretReferenceStatus,
    ) -> Result<Option<Written>, Halt> {
        let auth_config = read_auth_config(self, cx.ctx).await?;
        for value in auth_config.values().filter_map(Value::as_str) {
            cx.conceal(value);
        }
        Ok(Some(Written {
            hash: unreadable_hash(self, cx.ctx, &auth_config),
            organisation: tenant_id(cx.ctx, self.spec.connection_name()),
            auth_config,
        }))
    }
    async fn observed_inputs(
        &self,
        _cx: &Cx<'_, Self>,
        _status: &mut SecretReferenceStatus,
    ) -> Result<Option<Written>, Halt> {
        Ok(None)
    }
    fn desired(&self, inputs: Option<Written>) -> Option<Written> {
        inputs
    }
    fn compare(
        &self,
        desired: &Option<Written>,
        remote: &RemoteReference,
        status: &SecretReferenceStatus,
    ) -> Comparison {
        let mut differs = self.spec.diff(remote);
        let mut inputs = Vec::new();
        if desired
            .as_ref()
            .is_some_and(|w| w.hash != status.secret_hash)
        {
            differs.push(UNREADABLE);
            inputs.push(UNREADABLE);
        }
        Comparison {
            immutable: self.spec.immutable_conflicts(remote),
            differs,
            inputs,
        }
    }
    async fn find_created(
        &self,
        cx: &Cx<'_, Self>,
        status: &SecretReferenceStatus,
    ) -> Result<Lookup<RemoteReference>, Halt> {
        find_created(self, cx, status).await
    }
    /// Waits while an Integration resource maps a field to the reference (by resource, or by
    /// its UUID or slug), naming them: the API would refuse the delete too, but later.
    async fn before_delete(&self, cx: &Cx<'_, Self>, key: &str) -> Result<(), Halt> {
        let keys = self.status.as_ref().map(Recorded::remote_key_strings);
        let keys = keys.unwrap_or_default();
        let users = crate::controller::kinds::integration::mapping(cx.ctx, &self.name_any(), &keys);
        if users.is_empty() {
            return Ok(());
        }
        Err(Error::not_allowed(
            STILL_REFERENCED,
            format!(
                "secret reference {key} is still mapped by Integration {}; it is deleted once none maps it (or set deletionPolicy: Orphan)",
                users.join(", ")
            ),
        ).into())
    }
    /// The API's 400 while an integration maps a field to the reference: `StillReferenced`
    /// with its words (they name the integrations), retried, never forced.
    fn delete_refused(&self, key: &str, error: &ApiError) -> Option<Error> {
        let message = error.api_message()?;
        (error.status() == Some(400) && message.contains("in use")).then(|| {
            Error::not_allowed(
                STILL_REFERENCED,
                format!(
                    "secret reference {key} is still in use, so the API refuses its delete ({message}); it is deleted once nothing maps to it (or set deletionPolicy: Orphan)"
                ),
            )
        })
    }
    fn record(status: &mut SecretReferenceStatus, remote: Option<&RemoteReference>) {
        keyed::record(status, remote.map(|r| (r.id.as_str(), r.slug.as_str())));
    }
    fn record_created(
        &self,
        status: &mut SecretReferenceStatus,
        desired: &Option<Written>,
        created: Created<api::Created, RemoteReference>,
    ) -> String {
        let keys = created.map(|c| (c.id, c.slug), |found| (found.id, found.slug));
        keyed::record_created(status, desired.as_ref().and_then(|w| w.hash.clone()), keys)
    }
    fn record_updated(
        &self,
        status: &mut SecretReferenceStatus,
        desired: &Option<Written>,
        _: &RemoteReference,
        _: (),
    ) {
        keyed::record_updated(status, desired.as_ref().and_then(|w| w.hash.clone()));
    }
}

impl Bodies<api::SecretReferences<'static>> for SecretReference {
    fn sent_name(&self) -> String {
        self.spec.name.clone()
    }
    /// The spec with `auth_config` filled in, in the tenant it names.
    fn create_request(&self, desired: &Option<Written>) -> api::CreateSecretReferenceRequest {
        let (auth_config, organisation) = match desired {
            Some(w) => (w.auth_config.clone(), w.organisation.clone()),
            None => Default::default(),
        };
        self.spec.create_request(auth_config, organisation)
    }
    fn update_request(
        &self,
        desired: &Option<Written>,
        _: &RemoteReference,
    ) -> api::UpdateSecretReferenceRequest {
        let auth_config = desired.as_ref().map(|w| w.auth_config.clone());
        self.spec.update_request(auth_config)
    }
    /// The `auth_config` values are concealed (a Secret gone by now leaves nothing to conceal).
    async fn before_remote_delete(&self, cx: &Cx<'_, Self>) -> Option<String> {
        if let Ok(auth_config) = read_auth_config(self, cx.ctx).await {
            for value in auth_config.values().filter_map(Value::as_str) {
                cx.conceal(value);
            }
        }
        None
    }
}

/// `auth_config` and the allowed workspaces, hashed with the operator's key and the object's
/// uid ([`body_hash`]): what `status.secretHash` records.
fn unreadable_hash(
    reference: &SecretReference,
    ctx: &Context,
    auth_config: &Map<String, Value>,
) -> Option<String> {
    let unreadable = serde_json::json!({
        "auth_config": auth_config,
        "allowed_workspaces": reference.spec.allowed_workspaces,
    });
    body_hash(&ctx.hash_key, reference.meta().uid.as_deref(), &unreadable)
}

/// Every key of the Secret `spec.authConfigSecretRef` names, as a string
/// ([`cluster_secret::texts`]); at least one.
async fn read_auth_config(
    reference: &SecretReference,
    ctx: &Context,
) -> Result<Map<String, Value>, Error> {
    let named = &reference.spec.auth_config_secret_ref;
    let field = "spec.authConfigSecretRef";
    let (namespace, texts) = cluster_secret::texts(
        ctx,
        (&named.name, named.namespace.as_deref()),
        field,
        "a SecretReference",
    )
    .await?;
    if texts.is_empty() {
        return Err(Error::not_allowed(
            "SecretKeyNotFound",
            format!(
                "Secret {namespace}/{} (named by {field}) holds no key: auth_config must not be empty",
                named.name
            ),
        ));
    }
    Ok(texts
        .into_iter()
        .map(|(key, text)| (key, Value::String(text)))
        .collect())
}

/// The reference an earlier create made: the one with `spec.slug` (a deterministic identity),
/// else the one with the name it sent, created within its window, claimed by no other
/// resource, in a complete listing of the organisation's references.
async fn find_created(
    reference: &SecretReference,
    cx: &Cx<'_, SecretReference>,
    status: &SecretReferenceStatus,
) -> Result<Lookup<RemoteReference>, Halt> {
    let client = cx.api(Op::Read).await?;
    let listing = client
        .secret_references()
        .listing(&SecretReferencesListQuery::default())
        .await
        .map_err(|e| Error::api("list secret references", e))?;
    by_slug_or_name(
        cx,
        status,
        listing,
        (reference.spec.slug.as_deref(), &reference.spec.name),
        "secret reference",
        |r| Row {
            id: &r.id,
            slug: &r.slug,
            name: &r.name,
            created_at: r.created_at.as_deref(),
        },
        |_| true,
    )
    .await
}

/// A SecretReference's own triggers: the Secret it reads (in the operator's namespace).
pub fn watch_inputs(
    controller: kube::runtime::controller::Controller<SecretReference>,
    ctx: &Context,
    namespace: Option<&str>,
    references: kube::runtime::reflector::Store<SecretReference>,
) -> kube::runtime::controller::Controller<SecretReference> {
    let controller = crate::controller::kinds::config_refs::watch_secrets(
        controller,
        ctx,
        namespace,
        references.clone(),
    );
    // An Integration that stops mapping a reference lets its waiting delete go on.
    let stream = ctx.relay.subscribe::<Integration>(None);
    controller.watches_shared_stream(stream, move |integration: std::sync::Arc<Integration>| {
        let named: Vec<String> = integration
            .spec
            .secret_mappings
            .iter()
            .flatten()
            .flat_map(|m| {
                let by_resource = m.secret_reference_ref.as_ref().map(|r| r.name.clone());
                by_resource.into_iter().chain(m.secret_reference.clone())
            })
            .collect();
        references
            .state()
            .into_iter()
            .filter(|r| {
                let status = r.status.as_ref();
                named.iter().any(|n| {
                    *n == r.name_any()
                        || status.and_then(|s| s.id.as_ref()) == Some(n)
                        || status.and_then(|s| s.slug.as_ref()) == Some(n)
                })
            })
            .map(|r| kube::runtime::reflector::ObjectRef::from_obj(r.as_ref()))
            .collect::<Vec<_>>()
    })
}
