//! A resource of another kind that a resource names by a ref (a Provider's `spec.integration`,
//! an Integration's `secretReferenceRef`), read from that kind's watch cache, and when it can be
//! used: it exists, reaches the referrer's tenant, is not being deleted, and is Ready with its
//! remote object recorded.

use std::sync::Arc;

use kube::ResourceExt;

use super::Managed;
use super::status::CommonStatus;
use crate::controller::driver::gate::tenant_peers;
use crate::controller::error::Error;
use crate::controller::{Context, spec_already_applied};

/// The resource of kind `K` named `name` in the watch cache, if it is there.
pub fn named<K: Managed>(ctx: &Context, name: &str) -> Option<Arc<K>> {
    let all = ctx.stores.of::<K>().all();
    all.into_iter().find(|r| r.name_any() == name)
}

/// Resource `name` of kind `K` and the remote id `id` reads from its status, once `referrer`
/// (of kind `R`) may use it; else why it waits (`waiting`), or, for another tenant's resource,
/// an invalid spec. `what` names the resource and the field naming it, for the messages.
pub fn ready_named<K: Managed, R: Managed>(
    referrer: &R,
    ctx: &Context,
    name: &str,
    what: &str,
    waiting: impl Fn(String) -> Error,
    id: impl FnOnce(&K::Status) -> Option<String>,
) -> Result<(Arc<K>, String), Error> {
    let Some(found) = named::<K>(ctx, name) else {
        return Err(waiting(format!(
            "{what} does not exist yet; waiting for it"
        )));
    };
    let peers = tenant_peers(ctx, referrer.connection_name());
    let theirs = found.connection_name();
    if !peers.iter().any(|p| p == theirs) {
        return Err(Error::InvalidSpec(format!(
            "{what} uses Connection {theirs}, which reaches another tenant than this {}'s Connection {}",
            R::KIND,
            referrer.connection_name()
        )));
    }
    if found.meta().deletion_timestamp.is_some() {
        return Err(waiting(format!("{what} is being deleted")));
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
        None => Err(waiting(format!("{what} is not Ready yet; waiting for it"))),
    }
}
