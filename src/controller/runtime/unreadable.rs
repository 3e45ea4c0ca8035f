//! Objects a watch could not decode ([`crate::resources::readable`]): each version is reported
//! once, by a log line naming it, `aigw_unreadable_objects_total`, and (by the leader) a Warning
//! Event on the object, then left out of the watch cache. Nothing else of the kind waits on it.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::EventType;
use tracing::warn;

use crate::controller::Context;
use crate::controller::state::installation::{Claim, Installation};
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

/// [`report`] for the watch of kind `K`: what a watch calls with an object it could not decode.
pub fn reporter<K: kube::Resource<DynamicType = ()>>(
    ctx: &Arc<Context>,
) -> impl Fn(&Unreadable) + Send + Sync + 'static {
    let ctx = ctx.clone();
    move |object: &Unreadable| report::<K>(&ctx, object)
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
    // Another installation's object gets no event from this one.
    if is_theirs(&ctx.installation, unreadable) || !ctx.leadership.acts_on(&unreadable.meta) {
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

/// Whether `unreadable` is another installation's, as [`Installation::claim_on`] decides it for
/// an object that decodes: the installation its status records, else the one its annotation
/// names. The record is read on its own (serde_json skips the rest, however deep): a new object
/// is taken by its record before its annotation is written, so the version between the two
/// names its installation only there.
fn is_theirs(installation: &Installation, unreadable: &Unreadable) -> bool {
    #[derive(serde::Deserialize)]
    struct Recorded {
        status: Option<RecordedStatus>,
    }
    #[derive(serde::Deserialize)]
    struct RecordedStatus {
        installation: Option<String>,
    }
    let recorded = unreadable
        .part::<Recorded>()
        .ok()
        .and_then(|r| r.status?.installation);
    match recorded {
        Some(id) => id != installation.id(),
        None => matches!(installation.claim_in(&unreadable.meta), Claim::Theirs(_)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Config;
    use crate::resources::readable::Readable;

    fn unreadable(annotation: Option<&str>, recorded: Option<&str>) -> Unreadable {
        let deep = (0..150).fold(serde_json::json!(1), |v, _| serde_json::json!([v]));
        let mut object = serde_json::json!({
            "apiVersion": "aigw.io/v1alpha1", "kind": "Config",
            "metadata": {"name": "c", "namespace": "n"},
            "spec": {"name": "c", "config": {"deep": deep}},
            "status": {"installation": recorded},
        });
        if let Some(id) = annotation {
            object["metadata"]["annotations"] = serde_json::json!({"aigw.io/installation": id});
        }
        let text = object.to_string();
        match Readable::<Config>::from_text(&text) {
            Readable::Unreadable(u) => *u,
            Readable::Object(_) => panic!("decoded"),
        }
    }

    #[test]
    fn an_unreadable_object_is_whose_status_records_it_before_its_annotation() {
        let me = Installation::new("a", None).unwrap();
        // Recorded by another, not annotated yet (between its record and its metadata write).
        assert!(is_theirs(&me, &unreadable(None, Some("b"))));
        // Recorded here, whatever the annotation says.
        assert!(!is_theirs(&me, &unreadable(Some("b"), Some("a"))));
        // No record: the annotation decides.
        assert!(is_theirs(&me, &unreadable(Some("b"), None)));
        assert!(!is_theirs(&me, &unreadable(None, None)));
        assert!(!is_theirs(&me, &unreadable(Some("a"), None)));
    }
}
