//! What a Config's document refers to outside itself, resolved before anything is written:
//! Secret values (`spec.secretRefs`, substituted at apply time and only ever kept as a hash) and
//! guardrails named by slug or id (checked against the connection's full guardrail list, cached
//! per connection so a thousand Configs do not list a thousand times).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::controller::Controller;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Map, Value};

use super::Context;
use super::driver::Cx;
use super::error::Error;
use super::status::set_condition;
use crate::api::secret_fields::CREDENTIAL_KEYS;
use crate::resources::config::{Config, ConfigSecretRef, ConfigStatus};

/// Condition type: every guardrail the document names exists on the connection.
pub const GUARDRAILS_RESOLVED: &str = "GuardrailsResolved";

/// Condition and event reason: the document names a guardrail the connection does not have.
pub const UNRESOLVED_GUARDRAIL: &str = "UnresolvedGuardrail";

/// The longest a guardrail listing is trusted; shorter when the drift interval is shorter, so a
/// guardrail created later un-stalls its Configs within one interval.
const GUARDRAIL_TTL: Duration = Duration::from_secs(30);

/// Keys whose values name guardrails, at any level of `targets`.
const GUARDRAIL_KEYS: [&str; 4] = [
    "input_guardrails",
    "output_guardrails",
    "before_request_hooks",
    "after_request_hooks",
];

/// The document to send, with the Secret values filled in. Its `Debug` never shows the document.
pub struct Desired {
    pub document: Map<String, Value>,
    /// Hash of the substituted values (see [`secret_hash`]); `None` without `secretRefs`.
    pub secret_hash: Option<String>,
}

impl std::fmt::Debug for Desired {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Desired")
            .field("document", &"***")
            .field("secret_hash", &self.secret_hash)
            .finish()
    }
}

/// Everything a write of `config` needs, checked first: the Secret values (a missing Secret or
/// key stops here, so no document with a hole is sent) and the guardrail references (recorded
/// in the `GuardrailsResolved` condition).
pub async fn desired(
    config: &Config,
    cx: &Cx<'_, Config>,
    status: &mut ConfigStatus,
) -> Result<Desired, Error> {
    check_no_plaintext(&config.spec.config)?;
    let values = read_secret_values(config, &cx.ctx.kube).await?;
    let document = substitute(&config.spec.config, &values)?;
    check_guardrails(config, cx, status, &Value::Object(document.clone())).await?;
    let secret_hash =
        (!values.is_empty()).then(|| secret_hash(&config.uid().unwrap_or_default(), &values));
    Ok(Desired {
        document,
        secret_hash,
    })
}

/// True when the Secret values `spec.secretRefs` names are still the ones the last write
/// substituted (by their hash), so nothing but the spec could ask for a write. Any failure to
/// read them is "changed": the full reconcile then reports it.
pub async fn secrets_unchanged(
    config: &Config,
    kube: &kube::Client,
    status: &ConfigStatus,
) -> bool {
    if config.spec.secret_refs.is_empty() {
        return status.secret_hash.is_none();
    }
    match read_secret_values(config, kube).await {
        Ok(values) => {
            status.secret_hash.as_deref()
                == Some(secret_hash(&config.uid().unwrap_or_default(), &values).as_str())
        }
        Err(_) => false,
    }
}

/// Refuses credential keys written in plain text anywhere in the document: admission checks the
/// top levels, this catches what its rules cannot reach (deeper `targets`, nested strategies).
fn check_no_plaintext(document: &Map<String, Value>) -> Result<(), Error> {
    let mut found = Vec::new();
    plaintext_credentials(&Value::Object(document.clone()), "", &mut found);
    match found.is_empty() {
        true => Ok(()),
        false => Err(Error::InvalidSpec(format!(
            "spec.config holds credentials in plain text at {}: keep them in a Secret and set them with spec.secretRefs",
            found.join(", ")
        ))),
    }
}

fn plaintext_credentials(value: &Value, path: &str, found: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, item) in map {
                let here = format!("{path}/{}", escape(key));
                if CREDENTIAL_KEYS.contains(&key.as_str()) && !item.is_null() {
                    found.push(here);
                } else {
                    plaintext_credentials(item, &here, found);
                }
            }
        }
        Value::Array(items) => {
            for (n, item) in items.iter().enumerate() {
                plaintext_credentials(item, &format!("{path}/{n}"), found);
            }
        }
        _ => {}
    }
}

/// A JSON Pointer token for `key` (RFC 6901).
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

/// A Secret value by the `spec.secretRefs` path it goes to. Its `Debug` never shows the values.
pub struct SecretValues(BTreeMap<String, String>);

impl std::fmt::Debug for SecretValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.keys()).finish()
    }
}

impl SecretValues {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Reads each referenced Secret (once, from the Config's own namespace) and picks its key.
async fn read_secret_values(config: &Config, kube: &kube::Client) -> Result<SecretValues, Error> {
    let refs = &config.spec.secret_refs;
    check_paths(refs)?;
    let namespace = config.namespace().unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(kube.clone(), &namespace);
    let mut read: HashMap<String, Option<Secret>> = HashMap::new();
    let mut values = BTreeMap::new();
    for reference in refs {
        let selector = &reference.secret_key_ref;
        if !read.contains_key(&selector.name) {
            let secret = secrets.get_opt(&selector.name).await.map_err(|e| {
                Error::kube(format!("read Secret {namespace}/{}", selector.name), e)
            })?;
            read.insert(selector.name.clone(), secret);
        }
        let secret = read.get(&selector.name).and_then(Option::as_ref);
        let value = secret_value(secret, &namespace, reference)?;
        values.insert(reference.path.clone(), value);
    }
    Ok(SecretValues(values))
}

/// Each path once: two values for one field cannot both be applied.
fn check_paths(refs: &[ConfigSecretRef]) -> Result<(), Error> {
    let mut seen = HashSet::new();
    for reference in refs {
        if !seen.insert(reference.path.as_str()) {
            return Err(Error::InvalidSpec(format!(
                "spec.secretRefs names the path {} twice",
                reference.path
            )));
        }
    }
    Ok(())
}

/// The value of one reference; the errors name the Secret and key, never a value.
fn secret_value(
    secret: Option<&Secret>,
    namespace: &str,
    reference: &ConfigSecretRef,
) -> Result<String, Error> {
    let selector = &reference.secret_key_ref;
    let Some(secret) = secret else {
        return Err(Error::not_allowed(
            "SecretNotFound",
            format!(
                "Secret {namespace}/{} named by spec.secretRefs (path {}) does not exist",
                selector.name, reference.path
            ),
        ));
    };
    let bytes = secret
        .data
        .as_ref()
        .and_then(|data| data.get(&selector.key))
        .ok_or_else(|| {
            Error::not_allowed(
                "SecretKeyNotFound",
                format!(
                    "Secret {namespace}/{} has no key {} (named by spec.secretRefs, path {})",
                    selector.name, selector.key, reference.path
                ),
            )
        })?;
    if bytes.0.is_empty() {
        // An exported placeholder not filled in yet: sending "" would erase the live credential.
        return Err(Error::not_allowed(
            "SecretKeyNotFound",
            format!(
                "key {} of Secret {namespace}/{} (named by spec.secretRefs, path {}) is empty",
                selector.key, selector.name, reference.path
            ),
        ));
    }
    String::from_utf8(bytes.0.clone()).map_err(|_| {
        Error::not_allowed(
            "SecretKeyNotFound",
            format!(
                "key {} of Secret {namespace}/{} is not UTF-8 text",
                selector.key, selector.name
            ),
        )
    })
}

/// The spec's document with each value set at its path; missing parent objects are created.
fn substitute(
    document: &Map<String, Value>,
    values: &SecretValues,
) -> Result<Map<String, Value>, Error> {
    let mut filled = Value::Object(document.clone());
    for (path, value) in &values.0 {
        set_pointer(&mut filled, path, Value::String(value.clone()))?;
    }
    match filled {
        Value::Object(map) => Ok(map),
        _ => Ok(document.clone()),
    }
}

/// Sets `path` in `root`. The field must not be in the spec already (it would be plain text),
/// and every step but the last must be an object or an existing array index.
fn set_pointer(root: &mut Value, path: &str, value: Value) -> Result<(), Error> {
    let invalid = |why: &str| {
        Error::InvalidSpec(format!(
            "spec.secretRefs path {path} cannot be set in spec.config: {why}"
        ))
    };
    let tokens: Vec<String> = path.split('/').skip(1).map(unescape).collect();
    let Some((last, parents)) = tokens.split_last() else {
        return Err(invalid("it is not a JSON Pointer to a field"));
    };
    let mut here = root;
    for token in parents {
        here = match here {
            Value::Object(map) => map
                .entry(token.clone())
                .or_insert_with(|| Value::Object(Map::new())),
            Value::Array(items) => token
                .parse::<usize>()
                .ok()
                .and_then(|n| items.get_mut(n))
                .ok_or_else(|| invalid(&format!("there is no array element {token}")))?,
            _ => {
                return Err(invalid(&format!(
                    "{token} is inside a value that is not an object"
                )));
            }
        };
    }
    let Value::Object(map) = here else {
        return Err(invalid("its parent is not an object"));
    };
    if map.contains_key(last) {
        return Err(invalid(
            "the field is already written in spec.config; remove it there",
        ));
    }
    map.insert(last.clone(), value);
    Ok(())
}

/// SHA-256 over the object's uid and the sorted `path=value` pairs, hex-encoded. The uid salts it,
/// so the hash of a common value does not look the same on every object.
pub fn secret_hash(uid: &str, values: &SecretValues) -> String {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    context.update(uid.as_bytes());
    for (path, value) in &values.0 {
        context.update(b"\0");
        context.update(path.as_bytes());
        context.update(b"=");
        context.update(value.as_bytes());
    }
    let digest = context.finish();
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// A guardrail the document names, with the JSON Pointer where it does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardrailRef {
    pub path: String,
    pub name: String,
}

/// Every guardrail slug or id the document names: strings in the guardrail lists and hooks, and
/// `id`s of hook objects that carry no inline `checks`, at the top level and in nested `targets`.
pub fn guardrail_references(document: &Value) -> Vec<GuardrailRef> {
    let mut found = Vec::new();
    collect_references(document, "", &mut found);
    found
}

fn collect_references(level: &Value, path: &str, found: &mut Vec<GuardrailRef>) {
    let Some(map) = level.as_object() else {
        return;
    };
    for key in GUARDRAIL_KEYS {
        let Some(items) = map.get(key).and_then(Value::as_array) else {
            continue;
        };
        for (n, item) in items.iter().enumerate() {
            let here = format!("{path}/{key}/{n}");
            match item {
                Value::String(name) => found.push(GuardrailRef {
                    path: here,
                    name: name.clone(),
                }),
                Value::Object(hook) if !hook.contains_key("checks") => {
                    if let Some(id) = hook.get("id").and_then(Value::as_str) {
                        found.push(GuardrailRef {
                            path: format!("{here}/id"),
                            name: id.to_string(),
                        });
                    }
                }
                _ => {}
            }
        }
    }
    if let Some(targets) = map.get("targets").and_then(Value::as_array) {
        for (n, target) in targets.iter().enumerate() {
            collect_references(target, &format!("{path}/targets/{n}"), found);
        }
    }
}

/// Resolves every guardrail reference against the connection's list (from the cache) and
/// records `GuardrailsResolved`. An unknown one is `Stalled/UnresolvedGuardrail`, rechecked
/// with backoff, so a guardrail created later un-stalls the Config without a spec change.
async fn check_guardrails(
    config: &Config,
    cx: &Cx<'_, Config>,
    status: &mut ConfigStatus,
    document: &Value,
) -> Result<(), Error> {
    let references = guardrail_references(document);
    let generation = config.metadata.generation;
    if references.is_empty() {
        status.conditions.retain(|c| c.type_ != GUARDRAILS_RESOLVED);
        return Ok(());
    }
    let ttl = GUARDRAIL_TTL.min(cx.ctx.drift_interval);
    let known = cx
        .ctx
        .guardrails
        .known(config.spec.connection_name(), ttl, cx.api().await?)
        .await?;
    let missing: Vec<String> = references
        .iter()
        .filter(|r| !known.contains(&r.name))
        .map(|r| format!("{} at {}", r.name, r.path))
        .collect();
    if missing.is_empty() {
        let message = format!("all {} guardrail references resolve", references.len());
        set_condition(
            &mut status.conditions,
            GUARDRAILS_RESOLVED,
            true,
            "Resolved",
            &message,
            generation,
        );
        return Ok(());
    }
    let message = format!(
        "the connection has no guardrail {}; nothing is written until every reference resolves",
        missing.join(", ")
    );
    set_condition(
        &mut status.conditions,
        GUARDRAILS_RESOLVED,
        false,
        UNRESOLVED_GUARDRAIL,
        &message,
        generation,
    );
    Err(Error::not_allowed(UNRESOLVED_GUARDRAIL, message))
}

/// The guardrail ids and slugs of each connection, listed in full at most once per TTL. Callers
/// of one connection share one listing: while it is being read, the others wait for it
/// (single flight) instead of listing again.
#[derive(Default)]
pub struct GuardrailCache {
    slots: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<Option<Listing>>>>>,
}

struct Listing {
    known: Arc<HashSet<String>>,
    fetched: Instant,
}

impl GuardrailCache {
    /// The ids and slugs of `connection`'s guardrails, no older than `ttl`.
    pub async fn known(
        &self,
        connection: &str,
        ttl: Duration,
        client: &crate::api::Client,
    ) -> Result<Arc<HashSet<String>>, Error> {
        let slot = self.slot(connection);
        let mut listing = slot.lock().await;
        if let Some(fresh) = listing.as_ref().filter(|l| l.fetched.elapsed() < ttl) {
            return Ok(fresh.known.clone());
        }
        let all = client
            .guardrails()
            .list_all()
            .await
            .map_err(|e| Error::api("list guardrails", e))?;
        let known: HashSet<String> = all
            .into_iter()
            .flat_map(|g| [g.id, g.slug])
            .filter(|name| !name.is_empty())
            .collect();
        let known = Arc::new(known);
        *listing = Some(Listing {
            known: known.clone(),
            fetched: Instant::now(),
        });
        Ok(known)
    }

    fn slot(&self, connection: &str) -> Arc<tokio::sync::Mutex<Option<Listing>>> {
        self.slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(connection.to_string())
            .or_default()
            .clone()
    }
}

/// Requeues the Configs of `namespace` (or all) that reference a Secret whenever it changes or
/// goes away, so a rotated value is applied within seconds rather than at the next drift check,
/// and notes that their inputs changed: only then does a Config whose spec is applied read its
/// Secrets. Only metadata is watched: the values are read when the Config is reconciled.
pub fn watch_secrets(
    controller: Controller<Config>,
    ctx: &Context,
    namespace: Option<&str>,
    configs: Store<Config>,
) -> Controller<Config> {
    let probe = ctx
        .health
        .register(super::stream_name("Secret(Config refs)", namespace));
    let secrets = super::scoped::<PartialObjectMeta<Secret>>(&ctx.kube, namespace);
    // Paged initial lists: a namespace may hold many Secrets.
    let stream = watcher(secrets, watcher::Config::default())
        .inspect(move |item| probe.observe(item))
        .touched_objects();
    let drift = ctx.drift.clone();
    controller.watches_stream(stream, move |secret: PartialObjectMeta<Secret>| {
        let namespace = secret.namespace();
        let name = secret.name_any();
        let users: Vec<_> = configs
            .state()
            .into_iter()
            .filter(|c| c.namespace() == namespace)
            .filter(|c| {
                c.spec
                    .secret_refs
                    .iter()
                    .any(|r| r.secret_key_ref.name == name)
            })
            .collect();
        for config in &users {
            drift.inputs_changed(super::driver::object_key(config.as_ref()));
        }
        users
            .iter()
            .map(|c| ObjectRef::from_obj(c.as_ref()))
            .collect::<Vec<_>>()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn values(pairs: &[(&str, &str)]) -> SecretValues {
        SecretValues(
            pairs
                .iter()
                .map(|(p, v)| (p.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn values_fill_their_paths_and_create_missing_parents() {
        let document = json!({"provider": "openai", "targets": [{"provider": "@a"}]});
        let document = document.as_object().unwrap();
        let filled = substitute(
            document,
            &values(&[
                ("/api_key", "sk-1"),
                ("/targets/0/api_key", "sk-2"),
                ("/custom_headers/x-team~1key", "h"),
            ]),
        )
        .unwrap();
        assert_eq!(filled["api_key"], "sk-1");
        assert_eq!(filled["targets"][0]["api_key"], "sk-2");
        assert_eq!(filled["custom_headers"]["x-team/key"], "h");
        assert_eq!(filled["provider"], "openai");
    }

    #[test]
    fn a_path_that_cannot_be_set_is_an_invalid_spec_without_the_value() {
        let document = json!({"api_key": "plain", "targets": [{"provider": "@a"}], "retry": 3});
        let document = document.as_object().unwrap();
        for path in ["/api_key", "/targets/4/api_key", "/retry/x"] {
            let error = substitute(document, &values(&[(path, "sk-hidden")])).unwrap_err();
            assert_eq!(error.category(), "InvalidSpec", "{path}");
            assert!(!error.to_string().contains("sk-hidden"));
        }
    }

    #[test]
    fn plaintext_credentials_are_found_at_any_depth() {
        let document = json!({"targets": [{"targets": [{"targets": [{"targets": [{"aws_session_token": "t"}]}]}]}],
                              "virtual_key": "vk-ok", "api_key": null});
        let error = check_no_plaintext(document.as_object().unwrap()).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("/targets/0/targets/0/targets/0/targets/0/aws_session_token")
        );
        assert!(error.to_string().contains("spec.secretRefs"));
        assert!(!error.to_string().contains("\"t\""));
        let clean = json!({"provider": "openai", "virtual_key": "vk-ok"});
        assert!(check_no_plaintext(clean.as_object().unwrap()).is_ok());
    }

    #[test]
    fn the_hash_changes_with_any_value_and_depends_on_the_object() {
        let one = secret_hash("uid-1", &values(&[("/api_key", "a"), ("/x", "b")]));
        assert!(one.starts_with("sha256:") && one.len() == 7 + 64);
        assert_eq!(
            one,
            secret_hash("uid-1", &values(&[("/x", "b"), ("/api_key", "a")]))
        );
        assert_ne!(
            one,
            secret_hash("uid-1", &values(&[("/api_key", "a"), ("/x", "c")]))
        );
        assert_ne!(
            one,
            secret_hash("uid-2", &values(&[("/api_key", "a"), ("/x", "b")]))
        );
        assert!(!format!("{:?}", values(&[("/p", "hunter2")])).contains("hunter2"));
    }

    #[test]
    fn references_are_found_in_lists_hooks_and_nested_targets() {
        let document = json!({
            "input_guardrails": ["pg-a", {"default.contains": {"words": ["x"]}}],
            "before_request_hooks": [{"id": "pg-b"}, {"id": "inline", "checks": [{"id": "default.regex"}]}],
            "targets": [{"provider": "@a", "output_guardrails": ["pg-c"],
                         "targets": [{"after_request_hooks": [{"id": "pg-d"}]}]}]
        });
        let found: Vec<(String, String)> = guardrail_references(&document)
            .into_iter()
            .map(|r| (r.name, r.path))
            .collect();
        assert_eq!(
            found,
            vec![
                ("pg-a".to_string(), "/input_guardrails/0".to_string()),
                ("pg-b".to_string(), "/before_request_hooks/0/id".to_string()),
                (
                    "pg-c".to_string(),
                    "/targets/0/output_guardrails/0".to_string()
                ),
                (
                    "pg-d".to_string(),
                    "/targets/0/targets/0/after_request_hooks/0/id".to_string()
                ),
            ]
        );
    }
}
