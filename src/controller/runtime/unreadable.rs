//! Objects a watch could not decode ([`crate::resources::readable`]): each version is reported
//! once, by a log line naming it, `aigw_unreadable_objects_total`, and (by the leader) a Warning
//! Event on the object, then left out of the watch cache. Nothing else of the kind waits on it.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::EventType;
use tracing::warn;

use crate::controller::Context;
use crate::controller::state::installation::Claim;
use crate::resources::readable::Unreadable;

/// The reason of the Event on an object a watch could not decode.
pub const REASON: &str = "Unreadable";

/// The object versions already reported (kind, uid, resourceVersion), so a relist or a restarted
/// watch does not report them again.
#[derive(Default)]
pub struct Reported(Mutex<HashSet<(String, String, String)>>);

impl Reported {
    /// True the first time `unreadable` (this version of it) is seen.
    fn first(&self, kind: &str, unreadable: &Unreadable) -> bool {
        let meta = &unreadable.meta;
        let key = (
            kind.to_string(),
            meta.uid
                .clone()
                .unwrap_or_else(|| unreadable.display_name()),
            meta.resource_version.clone().unwrap_or_default(),
        );
        self.0.lock().unwrap_or_else(|e| e.into_inner()).insert(key)
    }
}

/// Reports an object of kind `K` that did not decode (see the module doc).
pub fn report<K: kube::Resource<DynamicType = ()>>(ctx: &Arc<Context>, unreadable: &Unreadable) {
    let kind = K::kind(&()).to_string();
    if !ctx.unreadable.first(&kind, unreadable) {
        return;
    }
    let object = unreadable.display_name();
    warn!(
        kind = %kind,
        object = %object,
        reason = %unreadable.reason,
        "cannot read this object: it is left out of the watch cache and not reconciled; the rest of the kind goes on"
    );
    ctx.metrics.unreadable(&kind);
    // Another installation's object gets no event from this one (its claim is in the metadata,
    // which is read even when the spec is not).
    let theirs = matches!(
        ctx.installation.claim_in(&unreadable.meta),
        Claim::Theirs(_)
    );
    if theirs || !ctx.leadership.acts_on(&unreadable.meta) {
        return;
    }
    let reference = ObjectReference {
        api_version: Some(K::api_version(&()).to_string()),
        kind: Some(kind.clone()),
        name: unreadable.meta.name.clone(),
        namespace: unreadable.meta.namespace.clone(),
        uid: unreadable.meta.uid.clone(),
        resource_version: unreadable.meta.resource_version.clone(),
        ..Default::default()
    };
    let message = format!(
        "aigw cannot read this {kind}, so it is not reconciled (other objects are): {}",
        unreadable.reason
    );
    let ctx = ctx.clone();
    tokio::spawn(async move {
        crate::controller::driver::publish_on(
            &ctx,
            &kind,
            &reference,
            EventType::Warning,
            REASON,
            &message,
        )
        .await;
    });
}
