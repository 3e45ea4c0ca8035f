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
use kube::api::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Map, Value};

use crate::controller::Context;
use crate::controller::driver::gate::Op;
use crate::controller::driver::status::set_condition;
use crate::controller::driver::{Cx, Managed};
use crate::controller::error::{Error, Halt};
use crate::controller::process::Watchable;
use crate::controller::runtime::hash_key::HashKey;
use crate::controller::state::claims::Claims;
use crate::controller::state::relay::contained;
use crate::controller::state::secret_cache::Reader;
use crate::controller::state::triggers::{Triggers, inputs_changed};
use crate::resources::config::{
    Config, ConfigResourceRef, ConfigSecretRef, ConfigStatus, ReferencedKind,
};
use crate::resources::config_document::SecretDocument;
use crate::resources::config_document::{GuardrailRef, MarkedDocument};
use crate::resources::guardrail::GuardrailKind;
use crate::resources::{ClusterGuardrail, Guardrail, Provider};

/// Condition type: every guardrail the document names exists on the connection.
pub const GUARDRAILS_RESOLVED: &str = "GuardrailsResolved";

/// Condition and event reason: the document names a guardrail the connection does not have.
pub const UNRESOLVED_GUARDRAIL: &str = "UnresolvedGuardrail";

/// The longest a guardrail listing is trusted; shorter when the drift interval is shorter, so a
/// guardrail created later un-stalls its Configs within one interval.
const GUARDRAIL_TTL: Duration = Duration::from_secs(30);

/// The document to send: the spec's document with each Secret path marked, and the values
/// that fill them in when the request body is built. Its `Debug` never shows a value.
pub struct Desired {
    marked: MarkedDocument,
    values: SecretValues,
    /// Hash of the substituted values (see [`secret_hash`]); `None` without `secretRefs`.
    pub secret_hash: Option<String>,
}

impl Desired {
    /// The Secret values this document substitutes, so that no message can carry them.
    pub fn secret_values(&self) -> impl Iterator<Item = &str> {
        self.values.0.values().map(String::as_str)
    }
}

impl std::fmt::Debug for Desired {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Desired")
            .field("marked", &self.marked)
            .field("values", &self.values)
            .field("secret_hash", &self.secret_hash)
            .finish()
    }
}

impl Desired {
    /// The document for a request body, Secret values filled in. Call it only where the body is
    /// built: nothing else may hold the values.
    pub fn request_document(&self) -> Map<String, Value> {
        self.marked.filled(&self.values.0)
    }
}

/// Everything a write of `config` needs, checked first on the document as the spec writes it
/// (Secret paths marked, never filled): its shape, the Secret values (a missing Secret or key
/// stops here, so no document with a hole is sent) and the guardrail references (recorded in
/// the `GuardrailsResolved` condition).
pub async fn desired(
    config: &Config,
    cx: &Cx<'_, Config>,
    status: &mut ConfigStatus,
) -> Result<Desired, Halt> {
    let desired = Desired::read(config, &config.spec, cx.ctx).await?;
    let references = desired
        .marked
        .guardrail_references()
        .map_err(Error::InvalidSpec)?;
    check_guardrails(config, cx, status, &references, &desired.values).await?;
    Ok(desired)
}

/// Before a remote delete: the Secret values `spec` names, concealed from what a refusal may
/// echo. A process restarted since the object's last write remembers none; a Secret gone by
/// now leaves nothing to conceal.
pub async fn conceal_before_delete<K: Managed + ReadsSecrets, S: SecretDocument>(
    object: &K,
    spec: &S,
    cx: &Cx<'_, K>,
) {
    if let Ok(desired) = Desired::read(object, spec, cx.ctx).await {
        for value in desired.secret_values() {
            cx.conceal(value);
        }
    }
}

impl Desired {
    /// `spec`'s document with its Secret paths marked, and the values of those Secrets, read
    /// from the namespace `object` reads Secrets from ([`ReadsSecrets::secrets_namespace`];
    /// its uid salts the hash). A missing Secret or key stops here, so no document with a hole
    /// is sent.
    pub async fn read<S: SecretDocument>(
        object: &impl ReadsSecrets,
        spec: &S,
        ctx: &Context,
    ) -> Result<Self, Error> {
        let marked = MarkedDocument::new(spec).map_err(Error::InvalidSpec)?;
        let refs = spec.secret_refs();
        let values = match &*refs {
            [] => SecretValues(BTreeMap::new()),
            refs => read_secret_values(&secrets_namespace(object, ctx)?, refs, ctx).await?,
        };
        let uid = object.meta().uid.clone().unwrap_or_default();
        let secret_hash = (!values.is_empty()).then(|| secret_hash(&ctx.hash_key, &uid, &values));
        Ok(Desired {
            marked,
            values,
            secret_hash,
        })
    }
}

/// True when the Secret values `spec.secretRefs` names are still the ones the last write
/// substituted (by their hash), so nothing but the spec could ask for a write. Any failure to
/// read them is "changed": the full reconcile then reports it.
pub async fn secrets_unchanged(
    object: &impl ReadsSecrets,
    ctx: &Context,
    recorded_hash: Option<&str>,
) -> bool {
    let refs = object.secret_refs();
    if refs.is_empty() {
        return recorded_hash.is_none();
    }
    let Ok(source) = secrets_namespace(object, ctx) else {
        return false;
    };
    match read_secret_values(&source, &refs, ctx).await {
        Ok(values) => {
            let uid = object.meta().uid.clone().unwrap_or_default();
            recorded_hash == Some(secret_hash(&ctx.hash_key, &uid, &values).as_str())
        }
        Err(_) => false,
    }
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

/// Reads each referenced Secret (once, from the object's own namespace) and picks its key.
/// The values come from [`crate::controller::state::secret_cache::SecretCache::values`]: from the
/// values cache of the Secrets resources read (labelled by aigw in a namespaced resource's
/// namespace, by their user for a cluster-scoped one), at the version the metadata cache
/// shows, so no read reaches the apiserver. Their freshness needs no more: each change of a
/// referenced Secret wakes its users only once the metadata cache holds it
/// ([`watch_secrets`]), and the read waits for the values cache to hold that version.
async fn read_secret_values(
    source: &SecretSource,
    refs: &[ConfigSecretRef],
    ctx: &Context,
) -> Result<SecretValues, Error> {
    let namespace = source.namespace.clone();
    let reader = match source.labelled_only {
        true => Reader::Cluster,
        false => Reader::Namespaced,
    };
    let mut read: HashMap<String, Option<Arc<Secret>>> = HashMap::new();
    let mut values = BTreeMap::new();
    let mut bytes = 0;
    for reference in refs {
        let selector = &reference.secret_key_ref;
        if !read.contains_key(&selector.name) {
            let secret = ctx
                .secrets
                .values(ctx, &namespace, &selector.name, reader)
                .await
                .map_err(|e| {
                    Error::kube(format!("read Secret {namespace}/{}", selector.name), e)
                })?;
            read.insert(selector.name.clone(), secret);
        }
        let secret = read
            .get(&selector.name)
            .and_then(Option::as_ref)
            .map(|s| &**s);
        if let (true, Some(secret)) = (source.labelled_only, secret) {
            require_cluster_readable(secret, &source.secret_source(&reference.path))?;
        }
        let named_by = source.secret_source(&reference.path);
        // Measured before the value is copied out of the cached Secret.
        let length = secret
            .and_then(|s| s.data.as_ref()?.get(&selector.key))
            .map_or(0, |b| b.0.len());
        bytes += length;
        within_bounds(length, bytes, &namespace, reference, &named_by)?;
        let value = secret_value(secret, &namespace, reference, &named_by)?;
        values.insert(reference.path.clone(), value);
    }
    Ok(SecretValues(values))
}

/// The most bytes one `secretRefs` value may hold, and all of a resource's together: a
/// document is built and sent with its values in it, in as many copies as the request needs,
/// for each reconcile; a tenant's Secrets of a mebibyte (the most a Secret holds) would grow
/// the operator past its memory limit, stopping every other tenant's objects with it.
pub const SECRET_VALUE_BYTES: usize = 64 * 1024;
pub const SECRET_VALUES_BYTES: usize = 256 * 1024;

/// Refuses a value of `length` bytes past [`SECRET_VALUE_BYTES`], or one that brings the
/// resource's values past [`SECRET_VALUES_BYTES`] (`bytes`, with it): `SecretTooLarge`,
/// rechecked (a change of the Secret wakes the resource).
fn within_bounds(
    length: usize,
    bytes: usize,
    namespace: &str,
    reference: &ConfigSecretRef,
    named_by: &str,
) -> Result<(), Error> {
    let selector = &reference.secret_key_ref;
    if length > SECRET_VALUE_BYTES {
        return Err(Error::not_allowed(
            SECRET_TOO_LARGE,
            format!(
                "key {} of Secret {namespace}/{} (named by {named_by}) holds {} bytes, more than the {} KiB a secretRefs value may hold",
                selector.key,
                selector.name,
                length,
                SECRET_VALUE_BYTES / 1024
            ),
        ));
    }
    if bytes > SECRET_VALUES_BYTES {
        return Err(Error::not_allowed(
            SECRET_TOO_LARGE,
            format!(
                "the Secret values the secretRefs name hold more than {} KiB in all (at {named_by}, key {} of Secret {namespace}/{})",
                SECRET_VALUES_BYTES / 1024,
                selector.key,
                selector.name
            ),
        ));
    }
    Ok(())
}

/// The reason of a Secret value refused as too large: past [`SECRET_VALUE_BYTES`] or [`SECRET_VALUES_BYTES`].
pub const SECRET_TOO_LARGE: &str = "SecretTooLarge";

/// Refuses `secret` (named by the spec field `named_by`) to a cluster-scoped resource unless it
/// is labelled [`CLUSTER_READABLE`]: the operator's namespace also holds the Connections'
/// credentials, which no resource may send anywhere.
pub fn require_cluster_readable(secret: &Secret, named_by: &str) -> Result<(), Error> {
    if cluster_readable(secret) {
        return Ok(());
    }
    Err(Error::not_allowed(
        SECRET_NOT_READABLE,
        format!(
            "Secret {}/{} (named by {named_by}) is not labelled {CLUSTER_READABLE}=true: a cluster-scoped resource reads only the Secrets labelled for it in the operator's namespace, so the Connection Secrets there stay out of its reach",
            secret.namespace().unwrap_or_default(),
            secret.name_any(),
        ),
    ))
}

/// True for a Secret labelled [`CLUSTER_READABLE`]`=true`, for cluster-scoped resources to read.
pub fn cluster_readable(secret: &Secret) -> bool {
    secret.labels().get(CLUSTER_READABLE).map(String::as_str) == Some("true")
}

/// The value of one reference; the errors name the Secret and key, never a value.
fn secret_value(
    secret: Option<&Secret>,
    namespace: &str,
    reference: &ConfigSecretRef,
    named_by: &str,
) -> Result<String, Error> {
    let selector = &reference.secret_key_ref;
    let Some(secret) = secret else {
        return Err(Error::not_allowed(
            "SecretNotFound",
            format!(
                "Secret {namespace}/{} (named by {named_by}) does not exist",
                selector.name
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
                    "Secret {namespace}/{} has no key {} (named by {named_by})",
                    selector.name, selector.key
                ),
            )
        })?;
    if bytes.0.is_empty() {
        // An exported placeholder not filled in yet: sending "" would erase the live credential.
        return Err(Error::not_allowed(
            "SecretKeyNotFound",
            format!(
                "key {} of Secret {namespace}/{} (named by {named_by}) is empty",
                selector.key, selector.name
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

/// HMAC-SHA256 (keyed with the operator's [`HashKey`]) over the object's uid and the sorted
/// `path`, `value` pairs. Without the key, a reader of the object cannot test guesses of a
/// value against it; the uid keeps the hash of a common value from looking the same on every
/// object.
pub fn secret_hash(key: &HashKey, uid: &str, values: &SecretValues) -> String {
    let pairs = values
        .0
        .iter()
        .flat_map(|(path, value)| [path.as_bytes(), value.as_bytes()]);
    key.hash(std::iter::once(uid.as_bytes()).chain(pairs))
}

/// Resolves every guardrail reference against the connection's list (from the cache) and
/// records `GuardrailsResolved`. An unknown one is `Stalled/UnresolvedGuardrail`, rechecked
/// with backoff, so a guardrail created later un-stalls the Config without a spec change.
async fn check_guardrails(
    config: &Config,
    cx: &Cx<'_, Config>,
    status: &mut ConfigStatus,
    references: &[GuardrailRef],
    values: &SecretValues,
) -> Result<(), Halt> {
    let generation = config.metadata.generation;
    if references.is_empty() {
        status.conditions.retain(|c| c.type_ != GUARDRAILS_RESOLVED);
        return Ok(());
    }
    let ttl = GUARDRAIL_TTL.min(cx.ctx.drift_interval);
    let known = cx
        .ctx
        .guardrails
        .known(config.spec.connection_name(), ttl, cx.api(Op::Read).await?)
        .await?;
    let resources = slugs_of_resources(config, cx.ctx);
    let missing = unresolved(references, values, |name| {
        known.names.contains(name) || resources.contains(name)
    });
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
    let message = match known.complete {
        true => format!(
            "the connection has no guardrail {}; nothing is written until every reference \
             resolves",
            missing.join(", ")
        ),
        false => format!(
            "the connection's guardrail list came back incomplete and does not show {}; \
             nothing is written until every reference resolves (the list is read again)",
            missing.join(", ")
        ),
    };
    set_condition(
        &mut status.conditions,
        GUARDRAILS_RESOLVED,
        false,
        UNRESOLVED_GUARDRAIL,
        &message,
        generation,
    );
    Err(Error::not_allowed(UNRESOLVED_GUARDRAIL, message).into())
}

/// The references `known` lacks, described for a message. A Secret supplies some names: its
/// value is what is looked up, and only its source (Secret, key, path) is described.
fn unresolved(
    references: &[GuardrailRef],
    values: &SecretValues,
    known: impl Fn(&str) -> bool,
) -> Vec<String> {
    references
        .iter()
        .filter(|r| {
            let name = match &r.secret {
                Some(slot) => values.0.get(&slot.path).unwrap_or(&r.name),
                None => &r.name,
            };
            !known(name)
        })
        .map(GuardrailRef::describe)
        .collect()
}

/// The guardrail ids and slugs of each connection, listed in full at most once per TTL (a list
/// that did not prove itself whole, at most once per `INCOMPLETE_REUSED_FOR`). Callers of one
/// connection share one listing: while it is being read, the others wait for it (single
/// flight) instead of listing again.
#[derive(Default)]
pub struct GuardrailCache {
    slots: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<Option<Listing>>>>>,
}

/// How long a guardrail list that did not prove itself whole is reused: a reference it does not
/// show is looked for again soon, not after the whole TTL.
const INCOMPLETE_REUSED_FOR: Duration = Duration::from_secs(5);

struct Listing {
    known: Known,
    fetched: Instant,
}

/// The ids and slugs a guardrail list showed, and whether it proved itself whole: only then does
/// a reference it lacks name no guardrail.
#[derive(Clone)]
pub struct Known {
    pub names: Arc<HashSet<String>>,
    pub complete: bool,
}

impl GuardrailCache {
    /// The ids and slugs of `connection`'s guardrails, no older than `ttl`.
    pub async fn known(
        &self,
        connection: &str,
        ttl: Duration,
        client: &crate::api::Client,
    ) -> Result<Known, Error> {
        let slot = self.slot(connection);
        let mut listing = slot.lock().await;
        let fresh = |l: &&Listing| match l.known.complete {
            true => l.fetched.elapsed() < ttl,
            false => l.fetched.elapsed() < ttl.min(INCOMPLETE_REUSED_FOR),
        };
        if let Some(fresh) = listing.as_ref().filter(fresh) {
            return Ok(fresh.known.clone());
        }
        let all = client
            .guardrails()
            .listing_all()
            .await
            .map_err(|e| Error::api("list guardrails", e))?;
        let names: HashSet<String> = all
            .items
            .into_iter()
            .flat_map(|g| [g.id, g.slug])
            .filter(|name| !name.is_empty())
            .collect();
        let known = Known {
            names: Arc::new(names),
            complete: all.complete,
        };
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

/// Requeues the objects of `namespace` (or all) that reference a Secret whenever it changes or
/// goes away, so a rotated value is applied within seconds rather than at the next drift check,
/// and notes that their inputs changed: only then does an object whose spec is applied read its
/// Secrets. Only metadata is watched: the values are read when the object is reconciled. A
/// cluster-scoped kind's Secrets are those of the operator's Connection secret namespace.
pub fn watch_secrets<K>(triggers: Triggers<'_, K>) -> Triggers<'_, K>
where
    K: crate::controller::driver::Managed + ReadsSecrets,
{
    let ctx = triggers.ctx;
    let operator = ctx.connections.secret_namespace().map(str::to_string);
    let namespace = match K::NAMESPACED {
        true => triggers.namespace.map(str::to_string),
        // Without that namespace a cluster-scoped object can read no Secret: nothing to hear.
        false if operator.is_none() => return triggers,
        false => operator.clone(),
    };
    let namespace = namespace.as_deref();
    let (objects, drift) = (triggers.objects.clone(), ctx.drift.clone());
    let mapper = move |secret: &PartialObjectMeta<Secret>| {
        let namespace = secret.namespace();
        let name = secret.name_any();
        inputs_changed(&objects, &drift, |o| {
            o.secrets_namespace(operator.as_deref()) == namespace
                && o.secret_refs()
                    .iter()
                    .any(|r| r.secret_key_ref.name == name)
        })
    };
    if ctx.secrets.covers(namespace) {
        // The metadata cache of the namespace's Secrets, which the values are read against,
        // holds each change before it is heard here. (A namespace no such cache covers, the
        // operator's outside `--namespace`, has its values read from the apiserver each time.)
        let stream = ctx
            .relay
            .subscribe::<PartialObjectMeta<Secret>>(namespace.map(str::to_string));
        return triggers.with(|controller| {
            let map = move |secret: Arc<PartialObjectMeta<Secret>>| mapper(&secret);
            controller.watches_shared_stream(stream, contained(ctx.metrics.clone(), map))
        });
    }
    let probe = ctx.health.register(crate::controller::stream_name(
        &format!("Secret({} refs)", K::KIND),
        namespace,
    ));
    let secrets = crate::controller::scoped::<PartialObjectMeta<Secret>>(&ctx.kube, namespace);
    // Paged initial lists: a namespace may hold many Secrets.
    let stream = ctx
        .lists
        .queued(watcher(secrets, watcher::Config::default()))
        .default_backoff()
        .inspect(move |item| probe.observe(item))
        .touched_objects();
    triggers.with(|controller| {
        let map = move |secret: PartialObjectMeta<Secret>| mapper(&secret);
        controller.watches_stream(stream, contained(ctx.metrics.clone(), map))
    })
}

/// Condition reason while a resource a Config names (`spec.resourceRefs`) is not Ready yet.
pub const REFERENCE_NOT_READY: &str = "ReferenceNotReady";

/// `config` with the remote slug of every resource its `spec.resourceRefs` names written in its
/// document (from the watch caches: no apiserver read). `None` when it names none. A resource
/// that is missing, not Ready at its generation, or without a slug yet makes the Config wait,
/// naming it: nothing is written until every reference resolves.
pub fn with_resources(config: &Config, ctx: &Context) -> Result<Option<Config>, Halt> {
    Ok(with_values(config, &resolved_values(config, ctx)?)?)
}

/// The value each `spec.resourceRefs` entry of `config` puts in its document, in order (from
/// the watch caches), or why one does not resolve yet.
pub fn resolved_values(config: &Config, ctx: &Context) -> Result<Vec<String>, Halt> {
    let refs = config.spec.resource_refs.iter().enumerate();
    refs.map(|(n, reference)| {
        referenced_slug(config, n, reference, ctx).map(|slug| reference.kind.value(&slug))
    })
    .collect()
}

/// `config` with `values` ([`resolved_values`]) written at its `spec.resourceRefs` paths;
/// `None` when it names no resource.
pub fn with_values(config: &Config, values: &[String]) -> Result<Option<Config>, Error> {
    if config.spec.resource_refs.is_empty() {
        return Ok(None);
    }
    let mut document = config.spec.config.to_value();
    for (reference, value) in config.spec.resource_refs.iter().zip(values) {
        crate::resources::config_document::set_reference(
            &mut document,
            &reference.path,
            Value::String(value.clone()),
        )
        .map_err(Error::InvalidSpec)?;
    }
    let mut resolved = config.clone();
    if let Value::Object(map) = document {
        resolved.spec.config = map.into();
    }
    Ok(Some(resolved))
}

/// The values the resources `config` names put in its document, once Ready: guardrails known
/// to exist, whatever a listing of the Connection's guardrails shows (an organisation guardrail
/// may not be in it).
fn slugs_of_resources(config: &Config, ctx: &Context) -> HashSet<String> {
    let refs = config.spec.resource_refs.iter().enumerate();
    refs.filter_map(|(n, r)| {
        referenced_slug(config, n, r, ctx)
            .ok()
            .map(|s| r.kind.value(&s))
    })
    .collect()
}

/// The slug of the resource `spec.resourceRefs[n]` names, once it is Ready; else why the
/// Config waits.
fn referenced_slug(
    config: &Config,
    n: usize,
    reference: &ConfigResourceRef,
    ctx: &Context,
) -> Result<String, Halt> {
    let what = format!(
        "{:?} {} named by spec.resourceRefs[{n}] (path {})",
        reference.kind, reference.name, reference.path
    );
    let peers = crate::controller::driver::gate::tenant_peers(ctx, config.spec.connection_name());
    let (what, peers) = (what.as_str(), peers.as_slice());
    match reference.kind {
        ReferencedKind::Guardrail => named_slug::<Guardrail>(config, reference, what, peers, ctx),
        ReferencedKind::ClusterGuardrail => {
            named_slug::<ClusterGuardrail>(config, reference, what, peers, ctx)
        }
        ReferencedKind::Provider => named_slug::<Provider>(config, reference, what, peers, ctx),
    }
}

/// [`ready_slug`] of the resource of kind `G` that `reference` names (one of the Config's
/// namespace, where `G` is namespaced).
fn named_slug<G: Referenced + crate::controller::driver::Managed>(
    config: &Config,
    reference: &ConfigResourceRef,
    what: &str,
    peers: &[String],
    ctx: &Context,
) -> Result<String, Halt> {
    let namespace = config.namespace();
    let all = ctx.stores.of::<G>().all();
    let found = all.iter().find(|g| {
        (!G::REFERENCED_AS.namespaced() || g.namespace() == namespace)
            && g.meta().name.as_ref() == Some(&reference.name)
    });
    if found.is_none() {
        crate::controller::driver::referenced::unless_listed::<G>(ctx, "spec.resourceRefs")?;
    }
    Ok(ready_slug(found.map(|g| &**g), what, peers, ctx)?)
}

/// A kind a Config's `spec.resourceRefs` may name: what it puts in the document once Ready.
pub trait Referenced: Claims + kube::Resource<DynamicType = ()> {
    /// The kind `spec.resourceRefs` names it by.
    const REFERENCED_AS: ReferencedKind;
    /// Its remote slug, once it is Ready at its generation.
    fn ready_slug(&self) -> Option<String>;
}

/// The slug `status` recorded, when its Ready condition is for `meta`'s generation, or when
/// only a promotion gate holds its change (`Promoted=False`, `Soaking` or `SourceNotReady`):
/// the remote object and its slug are there, serving the revision before the held one.
pub fn slug_when_ready(
    meta: &kube::api::ObjectMeta,
    slug: Option<&String>,
    observed_generation: Option<i64>,
    conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
) -> Option<String> {
    use crate::resources::promotion::{PROMOTED, SOAKING, SOURCE_NOT_READY};
    let ready =
        crate::controller::spec_already_applied(meta.generation, observed_generation, conditions);
    let held = conditions.iter().any(|c| {
        c.type_ == PROMOTED
            && c.status == "False"
            && (c.reason == SOAKING || c.reason == SOURCE_NOT_READY)
    });
    slug.filter(|_| ready || held).cloned()
}

/// [`Referenced`] of a guardrail kind, through [`GuardrailKind`].
macro_rules! referenced_guardrail {
    ($kind:ty) => {
        impl Referenced for $kind {
            const REFERENCED_AS: ReferencedKind = <$kind as GuardrailKind>::REFERENCED_AS;
            fn ready_slug(&self) -> Option<String> {
                let s = self.guardrail_status()?;
                slug_when_ready(
                    kube::Resource::meta(self),
                    s.slug.as_ref(),
                    s.observed_generation,
                    &s.conditions,
                )
            }
        }
    };
}

referenced_guardrail!(Guardrail);
referenced_guardrail!(ClusterGuardrail);

/// The slug of `found` once it is Ready at its generation, not being deleted, and reached
/// through a Connection to the Config's tenant (`peers`: a slug of another tenant names
/// nothing the Config's API knows).
fn ready_slug<G: Referenced>(
    found: Option<&G>,
    what: &str,
    peers: &[String],
    ctx: &Context,
) -> Result<String, Error> {
    let Some(resource) = found else {
        let scope = match G::REFERENCED_AS.namespaced() {
            true => " in this namespace",
            false => "",
        };
        return Err(Error::not_allowed(
            REFERENCE_NOT_READY,
            format!("{what} does not exist{scope} yet; waiting for it"),
        ));
    };
    // Another installation's: its slug is of that installation's tenant (`default` is each
    // installation's own), and nothing of it is this one's to read.
    if ctx.installation.is_theirs(resource) {
        return Err(Error::InvalidSpec(format!(
            "{what} is another installation's (annotation {}); a Config names only resources of its own installation",
            crate::controller::state::installation::ANNOTATION
        )));
    }
    if !peers.iter().any(|p| p == resource.connection_name()) {
        return Err(Error::InvalidSpec(format!(
            "{what} uses Connection {}, which reaches another tenant than this Config's Connection {}",
            resource.connection_name(),
            peers.first().map(String::as_str).unwrap_or("default")
        )));
    }
    if resource.meta().deletion_timestamp.is_some() {
        return Err(Error::not_allowed(
            REFERENCE_NOT_READY,
            format!(
                "{what} is being deleted (it waits until no Config names it); remove this reference"
            ),
        ));
    }
    resource.ready_slug().ok_or_else(|| {
        Error::not_allowed(
            REFERENCE_NOT_READY,
            format!("{what} is not Ready yet; waiting for its slug"),
        )
    })
}

/// Requeues the Configs that name a resource of kind `G` (`spec.resourceRefs`) whenever one
/// changes, so a Config waiting for it applies as soon as it is Ready, and notes that their
/// inputs changed: a resource created again under a new slug is sent at once, not at the next
/// full read. A Guardrail or Provider is heard in the Configs' namespace, a ClusterGuardrail
/// everywhere; each change only once `G`'s watch cache, which the Config reads, holds it.
fn watch_referenced<G>(triggers: Triggers<'_, Config>) -> Triggers<'_, Config>
where
    G: Referenced + crate::controller::driver::Managed,
{
    let namespace = triggers.namespace.filter(|_| G::NAMESPACED);
    triggers.inputs_from(namespace, |c: &Config, resource: &G| {
        let namespace = &resource.meta().namespace;
        let name = resource.meta().name.as_deref();
        (namespace.is_none() || c.metadata.namespace == *namespace)
            && c.spec
                .resource_refs
                .iter()
                .any(|r| r.kind == G::REFERENCED_AS && Some(r.name.as_str()) == name)
    })
}

/// The Config's own triggers: the Secrets and the guardrail and provider resources it names.
pub fn watch_inputs(triggers: Triggers<'_, Config>) -> Triggers<'_, Config> {
    let triggers = watch_referenced::<Guardrail>(watch_secrets(triggers));
    let triggers = watch_referenced::<ClusterGuardrail>(triggers);
    let triggers = watch_referenced::<Provider>(triggers);
    let triggers = watch_users::<crate::resources::ApiKey>(triggers);
    watch_users::<crate::resources::ConfigRollout>(triggers)
}

/// Requeues the Configs of a namespace whose deletion waits ([`super::config::holders`])
/// whenever an object of kind `U` there (an ApiKey, a ConfigRollout) changes or goes, once
/// `U`'s watch cache holds the change: the deletion goes on as soon as nothing uses them.
fn watch_users<U: Watchable>(triggers: Triggers<'_, Config>) -> Triggers<'_, Config> {
    triggers.when_beside(|c: &Config, user: &U| {
        c.namespace() == user.meta().namespace && c.metadata.deletion_timestamp.is_some()
    })
}

/// A kind whose spec takes values from Secrets (`spec.secretRefs`).
pub trait ReadsSecrets: kube::Resource<DynamicType = ()> {
    fn secret_refs(&self) -> std::borrow::Cow<'_, [ConfigSecretRef]>;

    /// How messages name the spec field that puts a Secret value at `path`.
    fn secret_source(&self, path: &str) -> String {
        format!("spec.secretRefs, path {path}")
    }

    /// The namespace its Secrets are read from: its own; for a cluster-scoped object, the one
    /// the operator reads Connection Secrets from (`operator`), if it has one.
    fn secrets_namespace(&self, operator: Option<&str>) -> Option<String> {
        self.meta()
            .namespace
            .clone()
            .or_else(|| operator.map(str::to_string))
    }
}

pub use crate::resources::common::CLUSTER_READABLE;
/// Condition reason when a cluster-scoped resource names a Secret not labelled for it.
pub const SECRET_NOT_READABLE: &str = "SecretNotReadable";

/// Where an object's Secrets are read: a namespace, and for a cluster-scoped object only the
/// Secrets labelled [`CLUSTER_READABLE`] there (the operator's namespace also holds the
/// Connections' credentials, which no guardrail may send anywhere).
struct SecretSource {
    namespace: String,
    labelled_only: bool,
    /// How messages name the spec field behind each path ([`ReadsSecrets::secret_source`]).
    named: std::collections::HashMap<String, String>,
}

impl SecretSource {
    fn secret_source(&self, path: &str) -> String {
        self.named
            .get(path)
            .cloned()
            .unwrap_or_else(|| format!("spec.secretRefs, path {path}"))
    }
}

/// [`ReadsSecrets::secrets_namespace`] of `object`, or why it has none.
fn secrets_namespace(object: &impl ReadsSecrets, ctx: &Context) -> Result<SecretSource, Error> {
    let labelled_only = object.meta().namespace.is_none();
    let named = object
        .secret_refs()
        .iter()
        .map(|r| (r.path.clone(), object.secret_source(&r.path)))
        .collect();
    object
        .secrets_namespace(ctx.connections.secret_namespace())
        .map(|namespace| SecretSource {
            namespace,
            labelled_only,
            named,
        })
        .ok_or_else(|| {
            Error::OperatorSettings(
                "a cluster-scoped resource reads the Secrets it names (secretRefs, keySecretRef) from the namespace the operator reads Connection Secrets from (--connection-secret-namespace, or its own POD_NAMESPACE), and this operator has none: start it with --connection-secret-namespace".into(),
            )
        })
}

impl ReadsSecrets for Config {
    fn secret_refs(&self) -> std::borrow::Cow<'_, [ConfigSecretRef]> {
        std::borrow::Cow::Borrowed(&self.spec.secret_refs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::config::ConfigSpec;
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
    fn an_unknown_guardrail_from_a_secret_is_described_by_its_source_never_its_value() {
        let spec: ConfigSpec = serde_json::from_value(json!({
            "name": "c",
            "config": {"before_request_hooks": [{}], "input_guardrails": ["pg-known", {}]},
            "secretRefs": [
                {"path": "/before_request_hooks/0/id", "secretKeyRef": {"name": "db", "key": "password"}},
                {"path": "/input_guardrails/1/id", "secretKeyRef": {"name": "db", "key": "known"}}
            ]
        }))
        .unwrap();
        let references = MarkedDocument::new(&spec)
            .unwrap()
            .guardrail_references()
            .unwrap();
        let secrets = values(&[
            ("/before_request_hooks/0/id", "s3cr3t-hook"),
            ("/input_guardrails/1/id", "pg-secret-known"),
        ]);
        let known: HashSet<String> = ["pg-known", "pg-secret-known"].map(String::from).into();
        let missing = unresolved(&references, &secrets, |n| known.contains(n));
        assert_eq!(
            missing,
            vec!["the value of secret db/password at /before_request_hooks/0/id"]
        );
        let known_too: HashSet<String> = ["pg-known", "pg-secret-known", "s3cr3t-hook"]
            .map(String::from)
            .into();
        assert!(unresolved(&references, &secrets, |n| known_too.contains(n)).is_empty());
    }

    #[test]
    fn the_hash_changes_with_any_value_and_depends_on_the_object_and_the_key() {
        let key = HashKey::from_bytes(&[7; 32]);
        let hash = |uid: &str, pairs: &[(&str, &str)]| secret_hash(&key, uid, &values(pairs));
        let one = hash("uid-1", &[("/api_key", "a"), ("/x", "b")]);
        assert!(one.starts_with("hmac-sha256:") && one.len() == 12 + 64);
        assert_eq!(one, hash("uid-1", &[("/x", "b"), ("/api_key", "a")]));
        assert_ne!(one, hash("uid-1", &[("/api_key", "a"), ("/x", "c")]));
        assert_ne!(one, hash("uid-2", &[("/api_key", "a"), ("/x", "b")]));
        // A path and a value never trade bytes unnoticed.
        assert_ne!(
            hash("uid-1", &[("/a=b", "c")]),
            hash("uid-1", &[("/a", "b=c")])
        );
        // Another key (another installation, or a guess without the key): another hash.
        let other = HashKey::from_bytes(&[8; 32]);
        let same = values(&[("/api_key", "a"), ("/x", "b")]);
        assert_ne!(one, secret_hash(&other, "uid-1", &same));
        // Not the unkeyed SHA-256 an earlier release wrote (which anyone could recompute).
        let mut unkeyed = ring::digest::Context::new(&ring::digest::SHA256);
        unkeyed.update(b"uid-1");
        for (path, value) in [("/api_key", "a"), ("/x", "b")] {
            unkeyed.update(format!("\0{path}={value}").as_bytes());
        }
        let hex = crate::controller::runtime::hash_key::hex(unkeyed.finish().as_ref());
        assert!(!one.contains(&hex));
        assert_ne!(one, format!("sha256:{hex}"));
        assert!(!format!("{:?}", values(&[("/p", "hunter2")])).contains("hunter2"));
    }
}
