//! A resource of another kind that a resource names by a ref (a Provider's `spec.integration`,
//! an Integration's `secretReferenceRef`), read from that kind's watch cache, and when it can be
//! used: it exists, reaches the referrer's tenant, is not being deleted, and is Ready with its
//! remote object recorded.

use std::sync::Arc;

use kube::ResourceExt;

use kube::api::ListParams;

use super::Managed;
use super::status::CommonStatus;
use crate::controller::driver::gate::{CACHES_LISTED_WITHIN, tenant_peers};
use crate::controller::error::{Error, Halt, Wait};
use crate::controller::process::as_cached;
use crate::controller::{Context, spec_already_applied};
use crate::resources::common::Recorded;
use crate::resources::readable::{Readable, readable_api};

/// The resource of kind `K` named `name` in the watch cache, if it is there.
pub fn named<K: Managed>(ctx: &Context, name: &str) -> Option<Arc<K>> {
    let all = ctx.stores.of::<K>().all();
    all.into_iter().find(|r| r.name_any() == name)
}

/// A wait while the watch caches of kind `K` have not all listed once (an operator just
/// started, a watch begun again): a resource they lack may exist, so its absence is no reason
/// for a referrer to report it missing (Ready=False and a Warning at every start). Retried in
/// a second, with nothing written.
pub fn unless_listed<K: Managed>(ctx: &Context, named_by: &str) -> Result<(), Wait> {
    match ctx.listed::<K>() {
        true => Ok(()),
        false => Err(Wait::CachesNotReady(format!(
            "the {} watch cache has not listed yet, so the one {named_by} names cannot be looked up; waiting",
            K::KIND
        ))),
    }
}

/// True when a referrer names `resource`: by its name (`by_name`, a `…Ref`), or by a key of its
/// remote object its status recorded (`by_key`, a UUID or slug).
pub fn names<K: Managed>(resource: &K, by_name: Option<&str>, by_key: Option<&str>) -> bool {
    let recorded = |key: &str| {
        let status = resource.status();
        status.is_some_and(|s| s.remote_keys().contains(&key))
    };
    (by_name.is_some() && by_name == resource.meta().name.as_deref())
        || by_key.is_some_and(recorded)
}

/// The resource of kind `K` a spec binds by its name (`by_name`) or by a key its status recorded
/// of its remote object (`by_key`, a UUID or slug), if the watch cache holds one.
pub fn bound<K: Managed>(
    ctx: &Context,
    by_name: Option<&str>,
    by_key: Option<&str>,
) -> Option<Arc<K>> {
    match by_name {
        Some(name) => named::<K>(ctx, name),
        None => {
            let all = ctx.stores.of::<K>().all();
            all.into_iter().find(|r| names(&**r, None, by_key))
        }
    }
}

/// Every key (id, slug) the resource of kind `K` named `name` recorded of its remote object
/// (none before it recorded one); `None` when the watch cache has no such resource.
pub fn recorded_keys<K: Managed>(ctx: &Context, name: &str) -> Option<Vec<String>> {
    named::<K>(ctx, name).map(|found| {
        let status = found.status();
        status.map(Recorded::remote_key_strings).unwrap_or_default()
    })
}

/// A resource that a referrer's spec `field` names by `name`, and the condition `reason` the
/// referrer waits under until it can use it.
pub struct Ref<'a> {
    pub name: &'a str,
    pub field: &'static str,
    pub reason: &'static str,
}

impl<'a> Ref<'a> {
    pub fn new(name: &'a str, field: &'static str, reason: &'static str) -> Self {
        Self {
            name,
            field,
            reason,
        }
    }

    /// For messages: "Workspace ws-a named by spec.workspaces".
    pub fn what<K: Managed>(&self) -> String {
        format!("{} {} named by {}", K::KIND, self.name, self.field)
    }

    /// The referrer waits, for `why`.
    pub fn waiting(&self, why: String) -> Error {
        Error::not_allowed(self.reason, why)
    }
}

/// Resource `named` of kind `K` and the remote id its status records, once `referrer` (of kind
/// `R`) may use it; else why it waits ([`Ref::waiting`], or [`unless_listed`] while the caches
/// fill), or, for another tenant's resource, an invalid spec.
pub fn ready_named<K: Managed, R: Managed>(
    referrer: &R,
    ctx: &Context,
    named_by: &Ref<'_>,
    id: impl FnOnce(&K::Status) -> Option<String>,
) -> Result<(Arc<K>, String), Halt> {
    let (name, what) = (named_by.name, named_by.what::<K>());
    let waiting = |why: String| named_by.waiting(why);
    let Some(found) = named::<K>(ctx, name) else {
        unless_listed::<K>(ctx, named_by.field)?;
        return Err(waiting(format!("{what} does not exist yet; waiting for it")).into());
    };
    let peers = tenant_peers(ctx, referrer.connection_name());
    let theirs = found.connection_name();
    if !peers.iter().any(|p| p == theirs) {
        return Err(Error::InvalidSpec(format!(
            "{what} uses Connection {theirs}, which reaches another tenant than this {}'s Connection {}",
            R::KIND,
            referrer.connection_name()
        ))
        .into());
    }
    if found.meta().deletion_timestamp.is_some() {
        return Err(waiting(format!("{what} is being deleted")).into());
    }
    let recorded = found.status().and_then(|status| {
        let ready = spec_already_applied(
            found.meta().generation,
            status.observed_generation(),
            status.conditions(),
        );
        id(status).filter(|_| ready)
    });
    match recorded {
        Some(id) => Ok((found, id)),
        None => Err(waiting(format!("{what} is not Ready yet; waiting for it")).into()),
    }
}

/// The resources of kind `K` that use what a deletion waits for (`uses`), of this installation
/// (another's uses an object of its own tenant), as `shown` names them, sorted: from
/// [`every`], which asks `question`.
pub async fn users<K: Managed>(
    ctx: &Context,
    question: &str,
    uses: impl Fn(&K) -> bool,
    shown: impl Fn(&K) -> String,
) -> Result<Vec<String>, Halt> {
    let all = every::<K>(ctx, question).await?;
    let mut users: Vec<String> = all
        .iter()
        .map(Arc::as_ref)
        .filter(|k| !ctx.installation.is_theirs(*k) && uses(k))
        .map(shown)
        .collect();
    users.sort();
    Ok(users)
}

/// `namespace/name` of `resource`.
pub fn qualified<K: Managed>(resource: &K) -> String {
    format!(
        "{}/{}",
        resource.namespace().unwrap_or_default(),
        resource.name_any()
    )
}

/// Every resource of kind `K` in the watched namespaces, to decide `question` (for the message
/// while the caches fill, e.g. "whether a Config names this guardrail") across all of them:
/// from the watch caches once each has listed; with `--shards`, whose caches hold this
/// replica's share only, from the apiserver, in pages. The guards that ask (a deletion waiting
/// for the resources that name what it deletes) are rare, and must not take another replica's
/// share for "none".
pub async fn every<K: Managed>(ctx: &Context, question: &str) -> Result<Vec<Arc<K>>, Halt> {
    let stores = K::stores(&ctx.stores);
    if stores.whole() {
        if !stores
            .listed(ctx.stores_of::<K>(), CACHES_LISTED_WITHIN)
            .await
        {
            return Err(Wait::CachesNotReady(format!(
                "the {} caches have not listed every watched namespace yet, so {question} cannot be decided; waiting",
                K::KIND
            ))
            .into());
        }
        return Ok(stores.all());
    }
    let mut every = Vec::new();
    for namespace in &ctx.watched_namespaces {
        let api = readable_api::<K>(&ctx.kube, namespace.as_deref());
        let mut params = ListParams::default().limit(LIST_PAGE);
        loop {
            let page = api.list(&params).await.map_err(|source| Error::Kube {
                action: format!("list the {} resources to decide {question}", K::KIND),
                source,
            })?;
            every.extend(page.items.into_iter().filter_map(prepared));
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => break,
            }
        }
    }
    Ok(every)
}

/// Resource `namespace`/`name` of kind `K`: from the watch cache when it holds the namespace
/// (with `--shards`, another replica's share is not cached), else read from the apiserver.
pub async fn find_in<K: Managed>(
    ctx: &Context,
    namespace: &str,
    name: &str,
) -> Result<Option<Arc<K>>, Error> {
    if let Some(cached) = K::stores(&ctx.stores).find_in(namespace, name).await {
        return Ok(cached);
    }
    let read = readable_api::<K>(&ctx.kube, Some(namespace))
        .get_opt(name)
        .await
        .map_err(|source| Error::Kube {
            action: format!("read {} {namespace}/{name}", K::KIND),
            source,
        })?;
    // One that does not decode is reported by the watch of its own namespace's replica.
    Ok(read.and_then(prepared))
}

/// An object read from the apiserver as the cache would hold it; `None` when it does not decode.
fn prepared<K: Managed>(read: Readable<K>) -> Option<Arc<K>> {
    match read {
        Readable::Object(mut object) => {
            as_cached(&mut object, K::prepare);
            Some(Arc::new(object))
        }
        Readable::Unreadable(_) => None,
    }
}

/// Objects a page of [`every`]'s lists.
const LIST_PAGE: u32 = 500;
