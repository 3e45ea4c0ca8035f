//! Delivering one-time values (a Deployment's credentials, an API key) into a Secret aigw owns,
//! and rolling the workloads that read them. Shared by every kind that receives a value the API
//! returns once.
//!
//! The Secret is created by aigw, labelled `app.kubernetes.io/managed-by: aigw`, annotated with
//! the uid of the resource that wrote it and owned by that resource; aigw never takes over a
//! Secret it did not create. Each write is conditional on the Secret's resourceVersion as read
//! before the call that issued the values, so a writer that was paused while another rotated
//! never stores revoked values over live ones.
//!
//! Those reads come from the watch caches of [`crate::controller::state::secret_cache`], not from the
//! apiserver: its documentation argues why the conditional writes keep the protocols exactly
//! once, and when a read waits for the cache to apply this process's own write or goes to the
//! apiserver instead (a counted fallback). The recovery paths (an interrupted rotation, a lost
//! create answer, a failed delivery) read the apiserver: [`fresh_metadata`].

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment as AppsDeployment, StatefulSet};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, ObjectMeta, PartialObjectMeta, Patch, PatchParams};

use crate::controller::driver::kind::own_write;
use crate::controller::driver::{Cx, Managed};
use crate::controller::error::{Error, Halt};
use crate::controller::state::secret_cache::Cached;
use crate::resources::deployment::{WorkloadKind, WorkloadRef};

/// Label on every Secret aigw writes; the delivered-Secrets cache selects by it.
pub use crate::controller::state::secret_cache::{MANAGED_BY, MANAGED_BY_LABEL};
/// Annotation on a delivered Secret: the rotation whose values it holds. A reconcile that
/// resumes an interrupted rotation and finds its id here completes it without rotating again.
pub const ROTATION_ID_ANNOTATION: &str = "aigw.io/rotation-id";
/// Annotation on a delivered Secret: the uid of the resource that wrote it.
pub const OWNER_UID_ANNOTATION: &str = "aigw.io/owner-uid";
/// Changed by every [`fence`] (a random id), so that the fence moves the Secret's version.
pub const FENCE_ANNOTATION: &str = "aigw.io/fence";
/// Pod-template annotation patched onto the workloads of `spec.rotation.restart`.
pub const ROTATED_AT_ANNOTATION: &str = "aigw.io/credentials-rotated-at";

/// The Secret's resourceVersion as read before a call that issues values (`None`: no such
/// Secret). Their write is conditional on it.
pub type SecretVersion = Option<String>;

pub fn secrets<K: Managed>(cx: &Cx<'_, K>) -> Api<Secret> {
    Api::<Secret>::namespaced(cx.ctx.kube.clone(), &cx.namespace())
}

/// The metadata of the Secret `name` of the resource's namespace, from the cache of every
/// Secret's metadata; from the apiserver when the cache cannot answer (counted).
pub async fn metadata<K: Managed>(
    cx: &Cx<'_, K>,
    name: &str,
) -> Result<Option<PartialObjectMeta<Secret>>, Error> {
    let cache = &cx.ctx.secrets;
    match cache.metadata(&cx.namespace(), name).await {
        Cached::Found(found) => Ok(found.map(|m| (*m).clone())),
        Cached::Uncached(reason) => {
            cache.fell_back(reason);
            read_metadata(cx, name).await
        }
    }
}

/// The metadata of the Secret `name` as the apiserver has it now: for the recovery paths,
/// which decide from what another process or a lost answer may just have written, with no
/// version of their own to wait for ([`crate::controller::state::secret_cache`]).
pub async fn fresh_metadata<K: Managed>(
    cx: &Cx<'_, K>,
    name: &str,
) -> Result<Option<PartialObjectMeta<Secret>>, Error> {
    cx.ctx.secrets.fell_back("recovery");
    read_metadata(cx, name).await
}

async fn read_metadata<K: Managed>(
    cx: &Cx<'_, K>,
    name: &str,
) -> Result<Option<PartialObjectMeta<Secret>>, Error> {
    secrets(cx)
        .get_metadata_opt(name)
        .await
        .map_err(|e| Error::kube(format!("read the credentials Secret {name}"), e))
}

/// The Secret `name` aigw delivered, from the delivered-Secrets cache: its labels,
/// annotations and keys (the cache keeps no value). A Secret of that name that is not
/// labelled as aigw's (so not in that cache) is read from the apiserver, as is one the caches
/// cannot answer for (counted).
pub async fn delivered<K: Managed>(cx: &Cx<'_, K>, name: &str) -> Result<Option<Secret>, Error> {
    let cache = &cx.ctx.secrets;
    let namespace = cx.namespace();
    let reason = match cache.delivered(&namespace, name).await {
        Cached::Found(Some(secret)) => return Ok(Some((*secret).clone())),
        Cached::Found(None) => match cache.metadata(&namespace, name).await {
            Cached::Found(None) => return Ok(None),
            Cached::Found(Some(_)) => "unlabelled",
            Cached::Uncached(reason) => reason,
        },
        Cached::Uncached(reason) => reason,
    };
    cache.fell_back(reason);
    secrets(cx)
        .get_opt(name)
        .await
        .map_err(|e| Error::kube(format!("read the credentials Secret {name}"), e))
}

/// The Secret `name` must never be one aigw did not create for this resource: if it exists, it
/// must carry aigw's label and this resource's uid. `field` names the spec field that names it.
pub async fn check_secret_is_ours<K: Managed>(
    cx: &Cx<'_, K>,
    name: &str,
    field: &str,
) -> Result<SecretVersion, Error> {
    let Some(secret) = metadata(cx, name).await? else {
        return Ok(None);
    };
    if ours(cx, &secret) {
        return Ok(Some(secret.resource_version().unwrap_or_default()));
    }
    Err(Error::SecretConflict(format!(
        "Secret {name} exists and was not created by aigw for this {}; aigw never overwrites it: name another Secret in {field}, or delete that one",
        K::KIND
    )))
}

/// True when the Secret is aigw's, for this resource: aigw's label and this resource's uid.
fn ours<K: Managed>(cx: &Cx<'_, K>, secret: &PartialObjectMeta<Secret>) -> bool {
    let uid = cx.object.meta().uid.as_deref().unwrap_or_default();
    let managed = secret.labels().get(MANAGED_BY_LABEL).map(String::as_str) == Some(MANAGED_BY);
    let owned = secret
        .annotations()
        .get(OWNER_UID_ANNOTATION)
        .map(String::as_str)
        == Some(uid)
        || secret.owner_references().iter().any(|o| o.uid == uid);
    managed && owned
}

/// The value of `annotation` on the Secret `name`, if both exist, as the apiserver has it now:
/// asked by the recovery paths only ([`fresh_metadata`]).
pub async fn secret_annotation<K: Managed>(
    cx: &Cx<'_, K>,
    name: &str,
    annotation: &str,
) -> Result<Option<String>, Error> {
    Ok(read_now(cx, name, annotation).await?.named)
}

/// The Secret a recovery reads before it decides ([`read_now`]).
#[derive(Debug, Clone, Default)]
pub struct ReadNow {
    /// Its resourceVersion; `None`: no such Secret.
    pub version: SecretVersion,
    /// The annotation asked for (the remote object whose values it holds).
    pub named: Option<String>,
    /// It exists and is not aigw's for this resource.
    pub foreign: bool,
}

/// The Secret `name` as the apiserver has it now ([`fresh_metadata`]): its version, the value
/// of `annotation`, and whether it is someone else's.
pub async fn read_now<K: Managed>(
    cx: &Cx<'_, K>,
    name: &str,
    annotation: &str,
) -> Result<ReadNow, Error> {
    let Some(secret) = fresh_metadata(cx, name).await? else {
        return Ok(ReadNow::default());
    };
    Ok(ReadNow {
        version: Some(secret.resource_version().unwrap_or_default()),
        named: secret.annotations().get(annotation).cloned(),
        foreign: !ours(cx, &secret),
    })
}

/// Fences the Secret `name` as `read` found it (not holding an object's values) before a
/// recovery deletes or rotates that object: a write conditional on the version read that stores
/// no value but a new [`FENCE_ANNOTATION`] (so the version moves: the apiserver keeps the
/// version of a write that changes nothing), creating the Secret empty and owned by this
/// resource if it did not exist. A process still holding the answer that issued the object's
/// values delivers them conditional on a version read before its call, so its write now fails
/// instead of storing values about to die; one that wrote first makes the fence fail, and the
/// recovery reads again. Returns the version the next delivery of this process expects; `None`
/// when nothing was written: in a dry run, and for someone else's Secret, which fails every
/// conditional write of aigw's already (and whose version is never used as a precondition).
pub async fn fence<K: Managed>(
    cx: &Cx<'_, K>,
    name: &str,
    read: &ReadNow,
) -> Result<Option<SecretVersion>, Halt> {
    if cx.ctx.dry_run || read.foreign {
        // Dry run: the deletion or rotation it guards reports what it would do.
        return Ok(None);
    }
    cx.gate.may_write()?;
    let delivery = Delivery {
        name,
        values: Vec::new(),
        annotations: vec![(FENCE_ANNOTATION, uuid::Uuid::new_v4().to_string())],
        expected: read.version.as_deref(),
    };
    Ok(Some(write(cx, delivery, false).await?))
}

/// True when the Secret `name` exists and holds `key`.
pub async fn secret_holds<K: Managed>(
    cx: &Cx<'_, K>,
    name: &str,
    key: &str,
) -> Result<bool, Error> {
    let secret = delivered(cx, name).await?;
    Ok(secret
        .and_then(|s| s.data)
        .is_some_and(|d| d.contains_key(key)))
}

/// One write of one-time values into the Secret `name`.
pub struct Delivery<'a> {
    pub name: &'a str,
    /// Keys and values; a key left out keeps its previous value.
    pub values: Vec<(&'a str, &'a str)>,
    /// Annotations stamped on the Secret besides the owner uid (the rotation id, the remote id).
    pub annotations: Vec<(&'a str, String)>,
    /// The Secret's resourceVersion before the call that issued the values; `None`: it must
    /// not exist yet.
    pub expected: Option<&'a str>,
}

/// Writes the values into the Secret, owned by this resource. Every value is concealed from
/// this reconcile's messages first. The write is conditional on `expected` and on this
/// replica's lease, so a stale writer fails instead of storing values since revoked.
pub async fn deliver<K: Managed>(cx: &Cx<'_, K>, delivery: Delivery<'_>) -> Result<(), Halt> {
    cx.gate.may_write()?;
    write(cx, delivery, false).await?;
    Ok(())
}

/// Asks Kubernetes whether aigw may write the Secret `name` as [`deliver`] would (`expected`
/// its resourceVersion, `None` when it does not exist), by a dry-run write that stores nothing:
/// called before values are issued (a create, a rotation), so that none are issued while their
/// Secret cannot be written. A refusal is [`Error::SecretNotWritable`].
pub async fn probe<K: Managed>(
    cx: &Cx<'_, K>,
    name: &str,
    expected: Option<&str>,
) -> Result<(), Error> {
    if cx.ctx.dry_run {
        return Ok(());
    }
    let delivery = Delivery {
        name,
        values: Vec::new(),
        annotations: Vec::new(),
        expected,
    };
    write(cx, delivery, true).await.map(|_| ())
}

async fn write<K: Managed>(
    cx: &Cx<'_, K>,
    delivery: Delivery<'_>,
    dry_run: bool,
) -> Result<SecretVersion, Error> {
    let Delivery {
        name,
        values,
        annotations,
        expected,
    } = delivery;
    let mut data: BTreeMap<String, ByteString> = BTreeMap::new();
    for (key, value) in values {
        cx.conceal(value);
        data.insert(key.to_string(), ByteString(value.as_bytes().to_vec()));
    }
    let annotations = annotations
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .chain([(
            OWNER_UID_ANNOTATION.to_string(),
            cx.object.meta().uid.clone().unwrap_or_default(),
        )])
        .collect();
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(cx.namespace()),
            labels: Some([(MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string())].into()),
            annotations: Some(annotations),
            owner_references: cx.object.controller_owner_ref(&()).map(|o| vec![o]),
            resource_version: expected.map(str::to_string),
            ..Default::default()
        },
        type_: Some("Opaque".into()),
        data: Some(data),
        ..Default::default()
    };
    // A merge patch keeps the values an answer did not carry; a Secret that did not exist is
    // created (and a create that finds one fails: someone else wrote it meanwhile).
    let api = secrets(cx);
    let written = match expected {
        Some(_) => {
            let params = PatchParams {
                dry_run,
                ..own_write::<K>()
            };
            api.patch(name, &params, &Patch::Merge(&secret)).await
        }
        None => {
            let params = kube::api::PostParams {
                dry_run,
                field_manager: Some(K::manager()),
            };
            api.create(&params, &secret).await
        }
    };
    if !dry_run {
        // Read-your-writes: the next read of this Secret waits for the caches to apply the
        // version written, or reads the apiserver when its outcome is unknown.
        let version = written.as_ref().ok().and_then(|s| s.resource_version());
        cx.ctx
            .secrets
            .wrote(&cx.namespace(), name, version.as_deref());
    }
    let written = written.map(|s| s.resource_version());
    let tried = if dry_run { "may write" } else { "write" };
    // Created since it was read: refused as someone else's only when it reads back so; one
    // another aigw process made for this resource (a recovery's fence, a slower delivery), or
    // one gone again or unreadable, is retried like any conflict.
    let foreign = match &written {
        Err(kube::Error::Api(status)) if status.code == 409 && expected.is_none() => {
            let now = fresh_metadata(cx, name).await.ok().flatten();
            now.is_some_and(|s| !ours(cx, &s))
        }
        _ => false,
    };
    written.map_err(|e| match e {
        kube::Error::Api(status) if status.code == 409 && expected.is_none() && !foreign => {
            Error::kube(
                format!(
                    "write the credentials Secret {name}: it was created since it was read (by another aigw process for this resource, or it could not be read back); not overwriting it"
                ),
                kube::Error::Api(status),
            )
        }
        kube::Error::Api(status) if status.code == 409 && expected.is_none() => {
            Error::SecretConflict(format!(
                "Secret {name} was created by someone else while aigw was issuing the values it was to hold; aigw never overwrites it"
            ))
        }
        kube::Error::Api(status) if status.code == 409 => Error::kube(
            format!(
                "write the credentials Secret {name}: it changed since it was read (another writer); not overwriting it"
            ),
            kube::Error::Api(status),
        ),
        // Refused by RBAC, an admission policy or a quota: no retry soon helps.
        kube::Error::Api(status) if matches!(status.code, 400 | 403 | 422) => {
            Error::SecretNotWritable(format!(
                "Kubernetes refuses to let aigw {tried} the credentials Secret {name} ({}: {}); no values are issued until it may",
                status.reason, status.message
            ))
        }
        e => Error::kube(format!("{tried} the credentials Secret {name}"), e),
    })
}

/// On a Secret released while a rotation of its values was unfinished (its value: when that
/// rotation was recorded): the rotate call may have reached the API, so the values the Secret
/// holds may no longer work.
pub const UNFINISHED_ROTATION_ANNOTATION: &str = "aigw.io/unfinished-rotation";

/// A rotation unfinished when a resource is released ([`release_secret`]): its id, and when it
/// was recorded.
pub struct Unfinished<'a> {
    pub rotation: &'a str,
    pub since: &'a str,
}

/// Keeps the Secret `name` when the resource goes (`deletionPolicy: Orphan`): drops its owner
/// reference so garbage collection leaves it, unless it holds no value. With a rotation
/// `unfinished` whose values the Secret does not hold (not stamped with its id), the same patch
/// marks this resource's Secret ([`UNFINISHED_ROTATION_ANNOTATION`]): true when this call did.
/// A Secret aigw did not make for this resource is never written.
pub async fn release_secret<K: Managed>(
    cx: &Cx<'_, K>,
    name: &str,
    unfinished: Option<Unfinished<'_>>,
) -> Result<bool, Halt> {
    let uid = cx.object.meta().uid.as_deref().unwrap_or_default();
    let Some(secret) = metadata(cx, name).await? else {
        return Ok(false);
    };
    let kept: Vec<_> = secret
        .owner_references()
        .iter()
        .filter(|o| o.uid != uid)
        .cloned()
        .collect();
    let owned = kept.len() != secret.owner_references().len();
    let annotations = secret.annotations();
    let mark = unfinished.filter(|u| {
        ours(cx, &secret)
            && !annotations.contains_key(UNFINISHED_ROTATION_ANNOTATION)
            && annotations.get(ROTATION_ID_ANNOTATION).map(String::as_str) != Some(u.rotation)
    });
    if !owned && mark.is_none() {
        return Ok(false);
    }
    // A Secret that holds no value (only a recovery's fence made it) keeps nothing worth
    // keeping: it goes with the resource instead of being left behind, empty.
    let holds = delivered(cx, name).await?.and_then(|s| s.data);
    if holds.is_none_or(|data| data.is_empty()) {
        return Ok(false);
    }
    cx.gate.may_write()?;
    let mut patch = serde_json::json!({"metadata": {}});
    if owned {
        patch["metadata"]["ownerReferences"] = serde_json::json!(kept);
    }
    if let Some(unfinished) = &mark {
        patch["metadata"]["annotations"] =
            serde_json::json!({ UNFINISHED_ROTATION_ANNOTATION: unfinished.since });
    }
    let released = secrets(cx)
        .patch(name, &own_write::<K>(), &Patch::Merge(&patch))
        .await;
    let version = released.as_ref().ok().and_then(|s| s.resource_version());
    cx.ctx
        .secrets
        .wrote(&cx.namespace(), name, version.as_deref());
    released.map_err(|e| Error::kube(format!("release the credentials Secret {name}"), e))?;
    Ok(mark.is_some())
}

/// Patches a pod-template annotation so the `workloads` roll and read the new values. A
/// workload that cannot be patched is reported, not retried: the rotation itself is done. Each
/// patch asks the lease first, as the Secret write does: a replica that no longer leads (paused
/// past a takeover) rolls nothing, and the leader that resumes the rotation rolls them.
pub async fn restart_workloads<K: Managed>(
    cx: &Cx<'_, K>,
    workloads: &[WorkloadRef],
    rotated_at: &str,
) {
    if cx.ctx.dry_run {
        return;
    }
    let patch = serde_json::json!({
        "spec": {"template": {"metadata": {"annotations": {ROTATED_AT_ANNOTATION: rotated_at}}}}
    });
    let params = own_write::<K>();
    let ns = cx.namespace();
    for workload in workloads {
        if let Err(e) = cx.gate.may_write() {
            tracing::info!(
                object = %cx.name(),
                namespace = %ns,
                reason = %e,
                "not restarting the workloads after the rotation: this replica may not write"
            );
            return;
        }
        let kube = cx.ctx.kube.clone();
        let result = match workload.kind {
            WorkloadKind::Deployment => Api::<AppsDeployment>::namespaced(kube, &ns)
                .patch(&workload.name, &params, &Patch::Merge(&patch))
                .await
                .map(|_| ()),
            WorkloadKind::StatefulSet => Api::<StatefulSet>::namespaced(kube, &ns)
                .patch(&workload.name, &params, &Patch::Merge(&patch))
                .await
                .map(|_| ()),
            WorkloadKind::DaemonSet => Api::<DaemonSet>::namespaced(kube, &ns)
                .patch(&workload.name, &params, &Patch::Merge(&patch))
                .await
                .map(|_| ()),
        };
        if let Err(e) = result {
            let message = format!(
                "failed to restart {:?} {} after the rotation: {e}",
                workload.kind, workload.name
            );
            cx.warn("RestartFailed", &message).await;
        }
    }
}
