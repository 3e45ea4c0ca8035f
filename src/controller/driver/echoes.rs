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
//! an Integration maps. [`Managed::echoable`] names those Secrets (and their keys); they are
//! read only when a reconcile fails with a message that may quote an answer
//! ([`crate::controller::error::Halt::may_quote_an_answer`]) or publishes a Warning, once per
//! reconcile, and within a [`Budget`]: past it the message is withheld whole. So is a message
//! whose echoable Secrets are not all known: a watch cache that names them has not listed yet
//! (the first reconciles after a start), or one of them cannot be read.

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use serde_json::Value;
use tracing::debug;

use std::sync::Arc;

use super::{Cx, Managed};
use crate::controller::kinds::config_refs::cluster_readable;
use crate::controller::state::secret_cache::{Cached, MANAGED_BY, MANAGED_BY_LABEL, Reader};

/// A Secret whose values an API error about an object could quote, and which of its keys.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Echoable {
    /// A Secret aigw delivered into the object's namespace (a Deployment's credentials, an API
    /// key), and the keys aigw writes in it. The delivered-Secrets cache keeps no value, so it
    /// is read from the apiserver, counted in `aigw_secret_cache_fallbacks_total{reason="echo"}`:
    /// on a failure (or a Warning event) only, and only when that cache shows the Secret as
    /// aigw's (a Secret of the tenant's that the spec names, refused as not aigw's, was never
    /// delivered anything).
    Delivered {
        name: String,
        keys: &'static [&'static str],
    },
    /// The key a resource's `secretRefs` entry names in a Secret of the object's namespace (a
    /// Guardrail's that a Config names), from the values cache.
    Namespaced { name: String, key: String },
    /// A Secret of the namespace the operator reads Connection Secrets from, labelled
    /// cluster-readable (an Integration's key, an McpIntegration's configurations), from the
    /// values cache: its name, its namespace as the spec names it (another is not read), and
    /// the one key a `secretRefs` entry names (`None`: every key, for a Secret a spec names
    /// whole).
    ClusterReadable {
        name: String,
        namespace: Option<String>,
        key: Option<String>,
    },
    /// The watch cache of this kind, which would name such Secrets, has not listed yet (the
    /// operator just started): which Secrets the error could quote is unknown.
    NotListed(&'static str),
}

/// [`Echoable::NotListed`] while the watch cache of `R` has not listed: an `echoable` that
/// looks resources of `R` up adds it, so a failure in the first moments after a start is not
/// checked against a partial set.
pub fn unless_listed<R: Managed>(ctx: &crate::controller::Context) -> Option<Echoable> {
    (!ctx.listed::<R>()).then_some(Echoable::NotListed(R::KIND))
}

/// How much of the echoable Secrets one failure conceals at most: this many values, of this
/// many bytes in all. Past it, the failure's message is withheld whole ([`Budget::withheld`]):
/// concealing more would cost the operator (memory, and CPU on the threads every other
/// namespace's reconciles and the leader lease share) in proportion to what one tenant's
/// objects name, and a message that cannot be checked is not shown.
pub const ECHO_VALUES: usize = 64;
pub const ECHO_BYTES: usize = 16 * 1024;

/// What a failure's message reads as when its echoable Secrets hold more than [`Budget`] takes,
/// or are not all known.
pub const WITHHELD: &str = "<the API's message was withheld: the operator cannot check it against every value of the Secrets it could quote>";

/// Values to conceal, each once, within a bound of values and bytes: what a failure's echoable
/// Secrets hold (within [`ECHO_VALUES`] and [`ECHO_BYTES`], the default), or what a reconcile
/// handles ([`super::Cx::conceal`]). Past the bound none is kept (a Secret of a mebibyte is not
/// copied again), and what is said of the object is withheld.
pub struct Budget {
    pub values: Vec<String>,
    bytes: usize,
    most_values: usize,
    most_bytes: usize,
    /// Set once the values were more than the bound takes, or one could not be known.
    pub withheld: bool,
}

impl Default for Budget {
    fn default() -> Self {
        Self::up_to(ECHO_VALUES, ECHO_BYTES)
    }
}

impl Budget {
    /// An empty budget of at most `most_values` values of `most_bytes` bytes in all.
    pub fn up_to(most_values: usize, most_bytes: usize) -> Self {
        Self {
            values: Vec::new(),
            bytes: 0,
            most_values,
            most_bytes,
            withheld: false,
        }
    }

    /// Some of the values are unknown: nothing said of the failure can be checked.
    fn unknown(&mut self) {
        self.withheld = true;
        self.values.clear();
    }

    pub fn take(&mut self, value: &str) {
        if self.withheld || value.is_empty() || self.values.iter().any(|kept| kept == value) {
            return;
        }
        if self.values.len() == self.most_values || self.bytes + value.len() > self.most_bytes {
            self.withheld = true;
            self.values.clear();
            return;
        }
        self.bytes += value.len();
        self.values.push(value.to_string());
    }
}

/// The values of every Secret of `echoable` (each named once), within the [`Budget`]; reading
/// stops once it is spent.
pub(super) async fn within_budget<K: Managed>(
    cx: &Cx<'_, K>,
    mut echoable: Vec<Echoable>,
) -> Budget {
    echoable.sort();
    echoable.dedup();
    let mut budget = Budget::default();
    for one in &echoable {
        match values(cx, one).await {
            Some(values) => values.iter().for_each(|value| budget.take(value)),
            None => budget.unknown(),
        }
        if budget.withheld {
            debug!(
                kind = K::KIND,
                ?one,
                "the Secrets an API error could quote hold more than one failure conceals, or are not all known; its message is withheld"
            );
            break;
        }
    }
    budget
}

/// The texts `echoable` holds at the keys it names, each with the strings and numbers inside
/// it when it is a JSON document (a header inside `custom_headers`); nothing when there is no
/// such Secret; `None` when they are unknown (a cache not listed, a Secret that cannot be read).
async fn values<K: Managed>(cx: &Cx<'_, K>, echoable: &Echoable) -> Option<Vec<String>> {
    let (read, keys) = match echoable {
        Echoable::NotListed(_) => return None,
        Echoable::Delivered { name, keys } => {
            let namespace = cx.namespace();
            if let Cached::Found(None) = cx.ctx.secrets.delivered(&namespace, name).await {
                return Some(Vec::new());
            }
            cx.ctx.secrets.fell_back("echo");
            let read = super::secret_delivery::secrets(cx).get_opt(name).await;
            let ours = read.map(|found| found.filter(delivered_by_aigw).map(Arc::new));
            (ours, keys.iter().map(|k| k.to_string()).collect())
        }
        Echoable::Namespaced { name, key } => {
            let namespace = cx.namespace();
            let secrets = &cx.ctx.secrets;
            let read = secrets
                .values(cx.ctx, &namespace, name, Reader::Namespaced)
                .await;
            (read, vec![key.clone()])
        }
        Echoable::ClusterReadable {
            name,
            namespace,
            key,
        } => {
            let own = cx.ctx.connections.secret_namespace();
            let read =
                match own.filter(|own| namespace.as_deref().is_none_or(|given| given == *own)) {
                    Some(own) => {
                        let secrets = &cx.ctx.secrets;
                        secrets.values(cx.ctx, own, name, Reader::Cluster).await
                    }
                    None => Ok(None),
                };
            // A Secret not labelled cluster-readable (any more) comes without its values, which
            // the API may still hold from when it was: unknown, not empty.
            if let Ok(Some(secret)) = &read
                && !cluster_readable(secret)
            {
                return None;
            }
            (read, key.iter().cloned().collect())
        }
    };
    match read {
        Ok(secret) => Some(secret.map(|s| texts(&s, &keys)).unwrap_or_default()),
        Err(e) => {
            debug!(kind = K::KIND, ?echoable, error = %e, "cannot read a Secret an API error could quote; its values are unknown, so the failure's message is withheld");
            None
        }
    }
}

/// True for a Secret aigw wrote (labelled `app.kubernetes.io/managed-by=aigw`).
fn delivered_by_aigw(secret: &Secret) -> bool {
    secret.labels().get(MANAGED_BY_LABEL).map(String::as_str) == Some(MANAGED_BY)
}

/// Every UTF-8 value of `secret` at `keys` (every key when `keys` is empty), with what a JSON
/// value holds.
fn texts(secret: &Secret, keys: &[String]) -> Vec<String> {
    let mut texts = Vec::new();
    let named = |key: &String| keys.is_empty() || keys.contains(key);
    let data = secret.data.iter().flat_map(|data| data.iter());
    for (_, bytes) in data.filter(|(key, _)| named(key)) {
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
        let found = texts(&secret, &[]);
        for expected in ["sk-live-123", "Bearer tok-9", "4711"] {
            assert!(found.iter().any(|t| t == expected), "{expected}: {found:?}");
        }
        assert_eq!(found.len(), 4, "{found:?}");
        let named = texts(&secret, &["api-key".to_string()]);
        assert_eq!(named, ["sk-live-123"]);
    }

    #[test]
    fn a_budget_takes_each_value_once_and_withholds_past_its_bounds() {
        let mut budget = Budget::default();
        budget.take(&"a".repeat(10));
        budget.take(&"a".repeat(10));
        assert_eq!(budget.values.len(), 1);
        for n in 1..ECHO_VALUES {
            budget.take(&format!("value-{n}"));
        }
        assert!(!budget.withheld);
        budget.take("one too many");
        assert!(budget.withheld && budget.values.is_empty());
        let mut budget = Budget::default();
        budget.take(&"x".repeat(ECHO_BYTES + 1));
        assert!(budget.withheld);
    }
}
