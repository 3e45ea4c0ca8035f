//! The Secrets whose values an API error about an object could quote although its reconcile
//! did not read them, concealed before a failure is recorded, published or logged
//! ([`super::Cx::scrub_failure`]).
//!
//! A reconcile conceals every value it handles ([`super::Cx::conceal`]), and the operator
//! remembers them per object. What it does not handle in a given reconcile can still come back
//! in an API's error: the credentials a Deployment or an API key was delivered, once the
//! process that delivered them is gone (an update or a delete after a restart reads no Secret),
//! or the upstream credential of the integration a Provider or an McpServer binds, which the
//! API keeps and may quote in a refusal about the binding; likewise what a Config's document
//! names (a guardrail's Secret values, a provider's integration key) and the secret references
//! an Integration maps. [`Managed::echoable`] names those Secrets; they are read only when a
//! reconcile fails or publishes a Warning, once per reconcile.

use k8s_openapi::api::core::v1::Secret;
use serde_json::Value;
use tracing::debug;

use super::{Cx, Managed};
use crate::controller::state::secret_cache::Reader;

/// A Secret whose values an API error about an object could quote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Echoable {
    /// A Secret aigw delivered into the object's namespace (a Deployment's credentials, an API
    /// key). The delivered-Secrets cache keeps no value, so it is read from the apiserver,
    /// counted in `aigw_secret_cache_fallbacks_total{reason="echo"}`: on a failure (or a
    /// Warning event) only.
    Delivered(String),
    /// A Secret of the object's namespace a resource reads (a Guardrail's `secretRefs` a
    /// Config names), from the values cache.
    Namespaced(String),
    /// A Secret of the namespace the operator reads Connection Secrets from, labelled
    /// cluster-readable (an Integration's key, an McpIntegration's configurations), from the
    /// values cache: its name, and its namespace as the spec names it (another is not read).
    ClusterReadable {
        name: String,
        namespace: Option<String>,
    },
}

/// The texts `echoable` holds, each with the strings and numbers inside it when it is a JSON
/// document (a header inside `custom_headers`); nothing when it cannot be read.
pub(super) async fn values<K: Managed>(cx: &Cx<'_, K>, echoable: &Echoable) -> Vec<String> {
    let read = match echoable {
        Echoable::Delivered(name) => {
            cx.ctx.secrets.fell_back("echo");
            super::secret_delivery::secrets(cx)
                .get_opt(name)
                .await
                .map(|found| found.map(std::sync::Arc::new))
        }
        Echoable::Namespaced(name) => {
            let namespace = cx.namespace();
            let secrets = &cx.ctx.secrets;
            secrets
                .values(cx.ctx, &namespace, name, Reader::Namespaced)
                .await
        }
        Echoable::ClusterReadable { name, namespace } => {
            let own = cx.ctx.connections.secret_namespace();
            match own.filter(|own| namespace.as_deref().is_none_or(|given| given == *own)) {
                Some(own) => {
                    let secrets = &cx.ctx.secrets;
                    secrets.values(cx.ctx, own, name, Reader::Cluster).await
                }
                None => Ok(None),
            }
        }
    };
    match read {
        Ok(secret) => secret.map(|s| texts(&s)).unwrap_or_default(),
        Err(e) => {
            debug!(kind = K::KIND, ?echoable, error = %e, "cannot read a Secret an API error could quote; its values stay unknown to this reconcile");
            Vec::new()
        }
    }
}

/// Every UTF-8 value of `secret`, with what a JSON value holds.
fn texts(secret: &Secret) -> Vec<String> {
    let mut texts = Vec::new();
    for bytes in secret.data.iter().flat_map(|data| data.values()) {
        if let Ok(text) = std::str::from_utf8(&bytes.0) {
            if let Ok(json @ (Value::Object(_) | Value::Array(_))) = serde_json::from_str(text) {
                texts.extend(leaves(&json));
            }
            texts.push(text.to_string());
        }
    }
    texts
}

/// The strings and numbers of `value`, at any depth: each a value to conceal when `value` is a
/// Secret's JSON document (a header inside `custom_headers`, a PIN in `jwt_validation`).
pub fn leaves(value: &Value) -> Vec<String> {
    fn walk(value: &Value, into: &mut Vec<String>) {
        match value {
            Value::String(s) => into.push(s.clone()),
            Value::Number(n) => into.push(n.to_string()),
            Value::Array(items) => items.iter().for_each(|v| walk(v, into)),
            Value::Object(map) => map.values().for_each(|v| walk(v, into)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    walk(value, &mut found);
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    #[test]
    fn a_secrets_values_come_with_what_their_json_holds() {
        let secret = Secret {
            data: Some(
                [
                    ("api-key".to_string(), ByteString(b"sk-live-123".to_vec())),
                    (
                        "custom_headers".to_string(),
                        ByteString(br#"{"Authorization":"Bearer tok-9","pin":4711}"#.to_vec()),
                    ),
                    ("binary".to_string(), ByteString(vec![0xff, 0xfe])),
                ]
                .into(),
            ),
            ..Default::default()
        };
        let found = texts(&secret);
        for expected in ["sk-live-123", "Bearer tok-9", "4711"] {
            assert!(found.iter().any(|t| t == expected), "{expected}: {found:?}");
        }
        assert_eq!(found.len(), 4, "{found:?}");
    }
}
