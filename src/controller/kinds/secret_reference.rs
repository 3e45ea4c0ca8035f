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

use kube::ResourceExt;
use serde_json::{Map, Value};

use crate::api::{self, ApiError};
use crate::controller::Context;
use crate::controller::driver::calls::Through;
use crate::controller::driver::referenced::names;
use crate::controller::driver::verbs::{Inputs, Verbs, refused_in_use, still_referenced};
use crate::controller::driver::{Cx, Managed};
use crate::controller::error::{Error, Halt};
use crate::controller::kinds::cluster_secret;
use crate::controller::kinds::config_refs::{self, ReadsSecrets};
use crate::controller::kinds::secret_inputs;
use crate::controller::state::triggers::Triggers;
use crate::resources::common::Recorded;
use crate::resources::config::{ConfigSecretRef, SecretKeyRef};
use crate::resources::integration::Integration;
use crate::resources::secret_reference::{SecretReference, SecretReferenceStatus};

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

/// What a reference is written with: `auth_config` as the Secret holds it; the hash also
/// covers the allowed workspaces ([`unreadable`]).
type Written = secret_inputs::Written<Map<String, Value>>;

impl Verbs for SecretReference {
    /// `None` in Observe, which reads no Secret ([`Verbs::UNREAD_INPUTS`]).
    type Desired = Option<Written>;
    type Calls = Through<api::SecretReferences<'static>>;
    const UNREAD_INPUTS: Option<Option<Written>> = Some(None);

    async fn resolve(&self, cx: &Cx<'_, Self>, _: &mut SecretReferenceStatus) -> Inputs<Self> {
        let auth_config = read_auth_config(self, cx.ctx).await?;
        for value in auth_config.values().filter_map(Value::as_str) {
            cx.conceal(value);
        }
        let hash = secret_inputs::hash(cx, &unreadable(self, &auth_config));
        Ok(Some(Written::new(cx, auth_config, hash)))
    }
    /// Waits while an Integration resource maps a field to the reference (by resource, or by
    /// its UUID or slug), naming them: the API would refuse the delete too, but later.
    async fn before_delete(&self, cx: &Cx<'_, Self>, key: &str) -> Result<(), Halt> {
        let keys = self.status.as_ref().map(Recorded::remote_key_strings);
        let keys = keys.unwrap_or_default();
        let users =
            crate::controller::kinds::integration::mapping(cx.ctx, &self.name_any(), &keys).await?;
        still_referenced::<Self>(key, "mapped by Integration", &users, "none maps it")
    }
    /// The API's 400 while an integration maps a field to the reference: `StillReferenced`
    /// with its words (they name the integrations), retried, never forced.
    fn delete_refused(&self, key: &str, error: &ApiError) -> Option<Error> {
        let message = error.api_message()?;
        (error.status() == Some(400) && message.contains("in use"))
            .then(|| refused_in_use::<Self>(key, message, "nothing maps to it"))
    }
    secret_inputs::records_sent!();
}

/// What a read never shows: `auth_config` and the allowed workspaces, whose hash
/// `status.secretHash` records.
fn unreadable(reference: &SecretReference, auth_config: &Map<String, Value>) -> Value {
    serde_json::json!({
        "auth_config": auth_config,
        "allowed_workspaces": reference.spec.allowed_workspaces,
    })
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

/// A SecretReference's own triggers: the Secret it reads (in the operator's namespace).
pub fn watch_inputs(triggers: Triggers<'_, SecretReference>) -> Triggers<'_, SecretReference> {
    // An Integration that stops mapping a reference lets its waiting delete go on. What a
    // mapping names is taken for the reference's name, UUID or slug alike.
    let mapped_by = |r: &SecretReference, integration: &Integration| {
        let mut mappings = integration.spec.secret_mappings.iter().flatten();
        mappings.any(|m| {
            let by_resource = m.secret_reference_ref.as_ref().map(|r| r.name.as_str());
            let named = [by_resource, m.secret_reference.as_deref()];
            named
                .into_iter()
                .flatten()
                .any(|n| names(r, Some(n), Some(n)))
        })
    };
    config_refs::watch_secrets(triggers).held_in(None, mapped_by)
}
