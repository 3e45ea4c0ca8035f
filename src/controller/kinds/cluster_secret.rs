//! The Secret a cluster-scoped kind reads write-only values from (a SecretReference's
//! `auth_config`, an McpIntegration's `configurations`): every key of it, as text.

use crate::controller::Context;
use crate::controller::error::Error;
use crate::controller::kinds::config_refs::{
    CLUSTER_READABLE, SECRET_NOT_READABLE, require_cluster_readable,
};
use crate::controller::state::secret_cache::Reader;

/// Every key of the Secret `name` (in `namespace`, where the spec names one) as text, in key
/// order, and the namespace it was read from: from the namespace the operator reads Connection Secrets from, and only when
/// labelled [`CLUSTER_READABLE`]. `field` is the spec field that names it, `reader` the kind
/// in messages ("a SecretReference"). An empty value is refused: a placeholder not filled in
/// yet, and sending "" would erase the live value. The errors name the Secret and its keys,
/// never a value.
pub async fn texts(
    ctx: &Context,
    (name, namespace): (&str, Option<&str>),
    field: &str,
    reader: &str,
) -> Result<(String, Vec<(String, String)>), Error> {
    let own = ctx.connections.secret_namespace();
    let namespace = match (own, namespace) {
        (Some(own), None) => own,
        (Some(own), Some(given)) if own == given => own,
        (own, given) => {
            return Err(Error::not_allowed(
                SECRET_NOT_READABLE,
                format!(
                    "{field}: {reader} reads only Secrets of the namespace the operator reads Connection Secrets from ({}), labelled {CLUSTER_READABLE}=true{}",
                    own.unwrap_or("none configured"),
                    given.map(|g| format!("; it names {g}")).unwrap_or_default()
                ),
            ));
        }
    };
    // From the values cache of the Secrets labelled for cluster-scoped readers
    // (crate::controller::state::secret_cache), like a cluster-scoped resource's spec.secretRefs.
    let secret = ctx
        .secrets
        .values(ctx, namespace, name, Reader::Cluster)
        .await
        .map_err(|e| Error::kube(format!("read Secret {namespace}/{name}"), e))?
        .ok_or_else(|| {
            Error::not_allowed(
                "SecretNotFound",
                format!("Secret {namespace}/{name} (named by {field}) does not exist"),
            )
        })?;
    require_cluster_readable(&secret, field)?;
    let mut texts = Vec::new();
    for (key, bytes) in secret.data.iter().flatten() {
        let text = String::from_utf8(bytes.0.clone()).map_err(|_| {
            Error::not_allowed(
                "SecretKeyNotFound",
                format!("key {key} of Secret {namespace}/{name} is not UTF-8 text"),
            )
        })?;
        if text.is_empty() {
            return Err(Error::not_allowed(
                "SecretKeyNotFound",
                format!("key {key} of Secret {namespace}/{name} is empty"),
            ));
        }
        texts.push((key.clone(), text));
    }
    Ok((namespace.to_string(), texts))
}
