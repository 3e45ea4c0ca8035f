//! ApiKey: create the gateway API key through the shared create protocol and write its
//! one-time value into the Secret in the same reconcile, keep its mutable fields in line (a PUT
//! of only the fields that differ), rotate it into the Secret when asked or due, and delete (or
//! orphan) it on delete.
//!
//! The value exists only in the create or rotate answer. So:
//! - a create whose answer was lost made a key nobody can ever use: the create protocol's
//!   lookup finds it, aigw deletes it and creates a new one. No key is left in the API that no
//!   Secret holds;
//! - a rotation is recorded (`status.pendingRotation`, a compare-and-swap) before the call, and
//!   its value is written into the Secret stamped with the rotation's id before anything else.
//!   A reconcile that resumes the intent and finds the id on the Secret completes it without
//!   rotating; one that does not find it (the answer, or the process, was lost in between)
//!   rotates once more, since the lost value exists nowhere. The previous value keeps working
//!   until its transition ends, so the Secret never holds a dead key meanwhile.
//!
//! The API's own `rotation_policy` is never sent (refused at admission): a scheduled rotation
//! on the server would issue a value that never reaches the Secret.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::controller::Controller;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};

use crate::api::{self, ApiError, Client, Listing};
use crate::controller::create::{
    Created, Lookup, body_hash, create_once, made_by_unfinished_create, one_of_ours,
};
use crate::controller::drift::{Listed, Row};
use crate::controller::driver::{Change, Cx, Managed, observed, orphaned, removed};
use crate::controller::error::Error;
use crate::controller::gate::Op;
use crate::controller::status::common_status;
use crate::controller::{Context, scoped, spec_already_applied, stream_name};
use crate::resources::Config;
use crate::resources::api_key::{ApiKey, ApiKeyDeletionPolicy, ApiKeyStatus, SECRET_KEY};
use crate::resources::common::CreateAttempt;

use crate::controller::rotation;
use crate::controller::secret_delivery::{self, Delivery, ROTATION_ID_ANNOTATION};
use crate::resources::rotation::RotationStatus;

mod rotation_calls;
use rotation_calls::check_secret;

/// Annotation on the key's Secret: the remote key its value belongs to.
pub const API_KEY_ID_ANNOTATION: &str = "aigw.io/api-key-id";
/// Annotation on the key's Secret: when the value it replaced stops working.
pub const PREVIOUS_EXPIRES_ANNOTATION: &str = "aigw.io/previous-key-expires-at";
const WHAT: &str = "API key";

common_status!(
    ApiKeyStatus,
    |s| ApiKeyStatus {
        pending_create: s.pending_create.as_ref().map(|_| String::new()),
        rotation: RotationStatus {
            pending_rotation: s.rotation.pending_rotation.as_ref().map(|_| String::new()),
            ..s.rotation.clone()
        },
        ..s.clone()
    },
    // A key being replaced is work in flight too: its deletion is not left to a full read.
    intent_when = |s| s.pending_create.is_some()
        || s.rotation.pending_rotation.is_some()
        || s.replaced_key.is_some()
);

impl Managed for ApiKey {
    crate::controller::driver::kind::namespaced_api!();
    type Status = ApiKeyStatus;
    const KIND: &'static str = "ApiKey";
    const MANAGER: &'static str = "aigw/apikey";
    const LISTED: bool = true;

    fn status(&self) -> Option<&ApiKeyStatus> {
        self.status.as_ref()
    }

    fn status_slot(&mut self) -> &mut Option<ApiKeyStatus> {
        &mut self.status
    }

    async fn apply(
        &self,
        cx: &Cx<'_, Self>,
        status: &mut ApiKeyStatus,
    ) -> Result<Vec<Change>, Error> {
        if self.spec.rotation_policy.is_some() {
            return Err(Error::InvalidSpec(
                "spec.rotationPolicy is refused: a server-side rotation would leave the Secret with a dead key; use spec.rotation".into(),
            ));
        }
        let interval = self.spec.rotation_interval().map_err(Error::InvalidSpec)?;
        let transition = self.spec.transition_period().map_err(Error::InvalidSpec)?;
        let interval = rotation::floored_interval(self, cx, status, interval, transition).await;
        let config_id = resolve_config(self, cx).await?;
        status.config_id = config_id.clone();
        let mut changes = Vec::new();
        let Some(remote) = observe(self, cx, status).await? else {
            changes.extend(create(self, cx, status, config_id.as_deref()).await?);
            changes.extend(retire_replaced(self, cx, status).await?);
            rotation::schedule(&mut status.rotation, interval);
            return Ok(changes);
        };
        let conflicts = self.spec.immutable_conflicts(&remote);
        if !conflicts.is_empty() {
            return Err(Error::InvalidSpec(format!(
                "remote API key {} has a different {} and the API cannot change it; create a new ApiKey instead",
                remote.id,
                conflicts.join(", ")
            )));
        }
        let (fields, update) = self.spec.update_for(&remote, config_id.as_deref());
        if let Some(update) = update {
            cx.gate.intend(format!(
                "would update API key {} ({})",
                remote.id,
                fields.join(", ")
            ));
            let client = cx.api(Op::Update).await?;
            client
                .api_keys(self.spec.kind.to_api())
                .update(&remote.id, &update)
                .await
                .map_err(|e| Error::api(format!("update API key {}", remote.id), e))?;
            let fields = fields.join(", ");
            let applied = spec_already_applied(
                self.metadata.generation,
                status.observed_generation,
                &status.conditions,
            );
            changes.push(if applied {
                Change::new(
                    "DriftCorrected",
                    format!(
                        "API key {} was changed outside aigw ({fields}); restored it",
                        remote.id
                    ),
                )
            } else {
                Change::new(
                    "Updated",
                    format!("updated API key {} ({fields})", remote.id),
                )
            });
            // The PUT moved `last_updated_at`: the next list shows it, and the read after it
            // records the new stamp.
            cx.ctx
                .drift
                .flag(crate::controller::driver::object_key(self));
        }
        match rotation::rotate_if_due(self, cx, status, &remote.id).await? {
            Some(rotated) => changes.push(rotated),
            None => check_secret(self, cx, status, &remote.id).await?,
        }
        if status.id.is_none() {
            // The key was given up (its rotated value was lost): a new one replaces it.
            changes.extend(create(self, cx, status, config_id.as_deref()).await?);
        }
        changes.extend(retire_replaced(self, cx, status).await?);
        rotation::schedule(&mut status.rotation, interval);
        Ok(changes)
    }

    async fn observe_only(
        &self,
        cx: &Cx<'_, Self>,
        status: &mut ApiKeyStatus,
    ) -> Result<Vec<&'static str>, Error> {
        let config_id = status.config_id.clone();
        Ok(match observe(self, cx, status).await? {
            Some(remote) => {
                let mut fields = self.spec.immutable_conflicts(&remote);
                fields.extend(self.spec.update_for(&remote, config_id.as_deref()).0);
                fields
            }
            None => Vec::new(),
        })
    }

    async fn cleanup(&self, cx: &Cx<'_, Self>) -> Result<Vec<Change>, Error> {
        let status = self.status.clone().unwrap_or_default();
        let orphan = self.spec.deletion_policy == ApiKeyDeletionPolicy::Orphan;
        // Mid-replacement (no new key recorded yet) the Secret still holds the replaced key's
        // value, which works until that key goes: kept under Orphan, with the Secret.
        let secret_holds_replaced = status.replaced_key.is_some() && status.id.is_none();
        let mut changes = Vec::new();
        if orphan && secret_holds_replaced {
            // A key the replacement's unfinished create made is held by nobody: it goes.
            if status.pending_create.is_some() {
                let lookup = find_created(self, cx, &status);
                if let Some(found) = made_by_unfinished_create(&status, WHAT, lookup).await? {
                    let result = cx
                        .api(Op::Delete)
                        .await?
                        .api_keys(self.spec.kind.to_api())
                        .delete(&found.id)
                        .await;
                    changes.extend(removed(
                        "Deleted",
                        "delete",
                        &format!("API key {} (made by an unfinished replacement)", found.id),
                        result,
                    )?);
                }
            }
            secret_delivery::release_secret(cx, &self.spec.secret_ref.name).await?;
            changes.extend(orphaned(&format!(
                "API key {}",
                status.replaced_key.clone().unwrap_or_default()
            )));
            return Ok(changes);
        }
        // Otherwise a replaced key goes whatever the policy: its last value was lost.
        if let Some(replaced) = &status.replaced_key {
            let result = cx
                .api(Op::Delete)
                .await?
                .api_keys(self.spec.kind.to_api())
                .delete(replaced)
                .await;
            changes.extend(removed(
                "Deleted",
                "delete",
                &format!("API key {replaced}"),
                result,
            )?);
        }
        if orphan {
            // The key stays live and its value exists nowhere else: keep the Secret too.
            secret_delivery::release_secret(cx, &self.spec.secret_ref.name).await?;
            changes.extend(orphaned(&format!(
                "API key {}",
                status.id.unwrap_or_default()
            )));
            return Ok(changes);
        }
        let id = match (status.id.clone(), &status.pending_create) {
            (Some(id), _) => id,
            (None, Some(_)) => {
                let lookup = find_created(self, cx, &status);
                match made_by_unfinished_create(&status, WHAT, lookup).await? {
                    Some(found) => found.id,
                    None => return Ok(changes),
                }
            }
            (None, None) => return Ok(changes),
        };
        let result = cx
            .api(Op::Delete)
            .await?
            .api_keys(self.spec.kind.to_api())
            .delete(&id)
            .await;
        changes.extend(removed(
            "Deleted",
            "delete",
            &format!("API key {id}"),
            result,
        )?);
        Ok(changes)
    }

    fn due_in(&self, status: &ApiKeyStatus) -> Option<Duration> {
        rotation::due_in(&status.rotation)
    }

    async fn finish_in_flight(
        &self,
        cx: &Cx<'_, Self>,
        status: &mut Self::Status,
    ) -> Result<Option<Change>, Error> {
        let id = status.id.clone();
        rotation::finish_in_flight(self, cx, status, id.as_deref()).await
    }

    fn due_now(&self, status: &ApiKeyStatus) -> bool {
        rotation::rotation_pending(self, &status.rotation)
    }

    /// The Secret still holds this key's value, and `defaults.config` still resolves to what
    /// was sent. Asked when the Secret or the Config changed ([`watch_inputs`]), and the
    /// first time this process sees the key.
    async fn inputs_unchanged(&self, cx: &Cx<'_, Self>, status: &ApiKeyStatus) -> bool {
        let name = &self.spec.secret_ref.name;
        let secret_holds_key = match secret_delivery::secrets(cx).get_opt(name).await {
            Ok(Some(secret)) => {
                let annotated = secret
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(API_KEY_ID_ANNOTATION));
                secret.data.is_some_and(|d| d.contains_key(SECRET_KEY))
                    && annotated == status.id.as_ref()
            }
            _ => false,
        };
        let config_unchanged = match self.spec.defaults.as_ref().and_then(|d| d.config.as_ref()) {
            Some(_) => resolve_config(self, cx).await.ok().flatten() == status.config_id,
            None => true,
        };
        secret_holds_key && config_unchanged
    }
}

/// Reconciles an ApiKey when its Secret (one aigw wrote) or the Config its `defaults.config`
/// names changes: a deleted Secret is reported at once, a Config's new slug is sent.
pub fn watch_inputs(
    controller: Controller<ApiKey>,
    ctx: &Context,
    namespace: Option<&str>,
    keys: Store<ApiKey>,
) -> Controller<ApiKey> {
    let selector = format!(
        "{}={}",
        secret_delivery::MANAGED_BY_LABEL,
        secret_delivery::MANAGED_BY
    );
    let probe = ctx
        .health
        .register(stream_name("Secret(ApiKey)", namespace));
    let secrets = scoped::<PartialObjectMeta<Secret>>(&ctx.kube, namespace);
    let secrets = watcher(secrets, watcher::Config::default().labels(&selector))
        .default_backoff()
        .inspect(move |item| probe.observe(item))
        .touched_objects();
    let (drift, store) = (ctx.drift.clone(), keys.clone());
    let controller =
        controller.watches_stream(secrets, move |secret: PartialObjectMeta<Secret>| {
            users(&store, &drift, secret.namespace(), |k| {
                k.spec.secret_ref.name == secret.name_any()
            })
        });
    // Heard once the Config watch cache, which `defaults.config` is resolved from, holds it.
    let configs = ctx.relay.subscribe::<Config>(namespace.map(str::to_string));
    let drift = ctx.drift.clone();
    controller.watches_shared_stream(configs, move |config: Arc<Config>| {
        let name = config.name_any();
        users(&keys, &drift, config.namespace(), |k| {
            k.spec.defaults.as_ref().and_then(|d| d.config.as_ref()) == Some(&name)
        })
    })
}

/// The ApiKeys of `namespace` that `uses` an input that changed, each marked so its next
/// reconcile checks its inputs.
fn users(
    keys: &Store<ApiKey>,
    drift: &crate::controller::drift::Drift,
    namespace: Option<String>,
    uses: impl Fn(&ApiKey) -> bool,
) -> Vec<ObjectRef<ApiKey>> {
    keys.state()
        .iter()
        .filter(|k| k.namespace() == namespace && uses(k))
        .map(|k| {
            drift.inputs_changed(crate::controller::driver::object_key(k.as_ref()));
            ObjectRef::from_obj(k.as_ref())
        })
        .collect()
}

impl Listed for ApiKey {
    fn list_workspace(&self) -> Option<String> {
        self.spec.workspace_id.clone()
    }

    /// Service and user keys live under separate routes: both lists, complete only when both
    /// are.
    async fn list(client: &Client, workspace: Option<String>) -> Result<Listing<Row>, ApiError> {
        let query = api::ApiKeysListQuery {
            workspace_id: workspace,
            page_size: None,
        };
        let mut rows = Vec::new();
        let mut complete = true;
        for kind in [api::ApiKeyKind::Service, api::ApiKeyKind::User] {
            let listing = client.api_keys(kind).listing(&query).await?;
            complete &= listing.complete;
            rows.extend(listing.items.into_iter().map(|k| Row {
                keys: vec![k.id],
                created_at: k.created_at,
                updated_at: k.last_updated_at,
            }));
        }
        Ok(Listing {
            items: rows,
            complete,
        })
    }
}

/// The config the key's defaults name: `defaults.configId` as written, or the remote slug of
/// the Config resource `defaults.config` names (waiting until it has one).
async fn resolve_config(key: &ApiKey, cx: &Cx<'_, ApiKey>) -> Result<Option<String>, Error> {
    let Some(defaults) = &key.spec.defaults else {
        return Ok(None);
    };
    if let Some(id) = &defaults.config_id {
        return Ok(Some(id.clone()));
    }
    let Some(name) = &defaults.config else {
        return Ok(None);
    };
    let configs = Api::<Config>::namespaced(cx.ctx.kube.clone(), &cx.namespace());
    let config = configs
        .get_opt(name)
        .await
        .map_err(|e| Error::kube(format!("read Config {name}"), e))?;
    let slug = config.and_then(|c| c.status).and_then(|s| s.slug.or(s.id));
    match slug {
        Some(slug) => Ok(Some(slug)),
        None => Err(Error::MissingState(format!(
            "defaults.config names Config {name}, which has no remote config yet; waiting for it"
        ))),
    }
}

/// GETs the key this resource recorded and records what the API reports. A key that is gone
/// (404, nothing else) is forgotten, so a new one is created into the Secret.
async fn observe(
    key: &ApiKey,
    cx: &Cx<'_, ApiKey>,
    status: &mut ApiKeyStatus,
) -> Result<Option<api::ApiKey>, Error> {
    let Some(id) = status.id.clone() else {
        return Ok(None);
    };
    let result = cx
        .api(Op::Read)
        .await?
        .api_keys(key.spec.kind.to_api())
        .get(&id)
        .await;
    let found = observed(&format!("API key {id}"), None, result)?;
    match &found {
        Some(remote) => {
            status.remote_updated_at = remote.last_updated_at.clone();
        }
        None => {
            status.id = None;
            status.remote_updated_at = None;
        }
    }
    Ok(found)
}

/// Creates the key through the shared create protocol and writes its value into the Secret. A
/// key an earlier create made whose answer was lost is deleted first: its value is gone.
async fn create(
    key: &ApiKey,
    cx: &Cx<'_, ApiKey>,
    status: &mut ApiKeyStatus,
    config_id: Option<&str>,
) -> Result<Vec<Change>, Error> {
    let secret_version = rotation::check_secret_is_ours(key, cx).await?;
    let mut request = key.spec.create_request(config_id);
    // Without a description of the spec's, the key carries this resource's mark: what proves,
    // after a lost answer, that a key of the name is the one its create made.
    if request.description.is_none() {
        request.description = created_mark(key);
    }
    let sent = CreateAttempt {
        name: Some(key.spec.name.clone()),
        workspace_id: key.spec.workspace_id.clone(),
        body_hash: body_hash(&cx.ctx.hash_key, key.metadata.uid.as_deref(), &request),
        ended_at: None,
        intent: None,
    };
    let before = status.clone();
    let client = cx.api(Op::Create).await?;
    // No key is issued while its Secret cannot be written.
    let secret = &key.spec.secret_ref.name;
    secret_delivery::probe(cx, secret, secret_version.as_deref()).await?;
    let kind = key.spec.kind.to_api();
    let outcome = create_once(
        cx,
        status,
        WHAT,
        sent.clone(),
        find_created(key, cx, &before),
        client,
        async |client| client.api_keys(kind).create(&request).await,
    )
    .await?;
    let mut changes = Vec::new();
    let created = match outcome {
        Created::Posted(created) => created,
        Created::Recovered(found) => {
            // Until the orphan is known gone the create intent stays recorded: a failure below
            // (a read, the gate, the DELETE) leaves it, and the next reconcile finds the orphan
            // again instead of creating past it.
            let keep_intent = |status: &mut ApiKeyStatus, e: Error| {
                *status = before.clone();
                e
            };
            let name = &key.spec.secret_ref.name;
            let held = secret_delivery::secret_annotation(cx, name, API_KEY_ID_ANNOTATION)
                .await
                .map_err(|e| keep_intent(status, e))?;
            if !ours(key, &found) && held.as_deref() != Some(found.id.as_str()) {
                // Not proven this create's, and taken under the adoption grant: never deleted.
                // Its value is not known here: a rotation puts a new one into the Secret.
                status.id = Some(found.id.clone());
                rotation::issued_by_create(key, status, false);
                cx.save_status(status).await?;
                return Ok(vec![Change::new(
                    "Adopted",
                    format!(
                        "adopted API key {} (it has the name an unanswered create sent, but not this resource's mark); rotating it to store a value in Secret {name}",
                        found.id
                    ),
                )]);
            }
            if held.as_deref() == Some(found.id.as_str()) {
                // The answer reached the Secret before its status write was lost: the key is
                // the one the Secret holds, not an orphan.
                status.id = Some(found.id.clone());
                rotation::issued_by_create(key, status, true);
                cx.save_status(status).await?;
                return Ok(vec![Change::new(
                    "Created",
                    format!(
                        "found API key {} from an earlier create whose status write was lost; Secret {name} already holds its value",
                        found.id
                    ),
                )]);
            }
            let result = cx
                .api(Op::Delete)
                .await
                .map_err(|e| keep_intent(status, e))?
                .api_keys(kind)
                .delete(&found.id)
                .await;
            let what = format!(
                "API key {} (an earlier create made it, but its answer and so its value were lost)",
                found.id
            );
            changes.extend(
                removed("Deleted", "delete", &what, result).map_err(|e| keep_intent(status, e))?,
            );
            let nothing_to_find = async { Ok::<Lookup<api::ApiKey>, Error>(Lookup::Absent) };
            match create_once(
                cx,
                status,
                WHAT,
                sent,
                nothing_to_find,
                client,
                async |client| client.api_keys(kind).create(&request).await,
            )
            .await?
            {
                Created::Posted(created) => created,
                Created::Recovered(_) => {
                    return Err(Error::MissingState(
                        "the create of the replacement API key found no answer".into(),
                    ));
                }
            }
        }
    };
    cx.conceal(created.key.expose());
    status.id = Some(created.id.clone());
    let delivery = Delivery {
        name: secret,
        values: vec![(SECRET_KEY, created.key.expose())],
        annotations: vec![
            (API_KEY_ID_ANNOTATION, created.id.clone()),
            (ROTATION_ID_ANNOTATION, "create".into()),
        ],
        expected: secret_version.as_deref(),
    };
    if let Err(e) = secret_delivery::deliver(cx, delivery).await {
        if matches!(e, Error::SecretConflict(_)) {
            // Someone else's Secret took the name: no Secret can hold this key, so it goes.
            let result = cx
                .api(Op::Delete)
                .await?
                .api_keys(key.spec.kind.to_api())
                .delete(&created.id)
                .await;
            let what = format!("API key {} (no Secret can hold its value)", created.id);
            removed("Deleted", "delete", &what, result)?;
            status.id = None;
            return Err(e);
        }
        // A write whose answer was lost may have stored it after all.
        let held = secret_delivery::secret_annotation(cx, secret, API_KEY_ID_ANNOTATION).await;
        if held.ok().flatten().as_deref() != Some(created.id.as_str()) {
            // Its value was never stored, and is lost with this answer: the key goes, so no
            // key is left that no Secret holds. The next create first asks whether the Secret
            // may be written (a dry run), and issues no key while it may not.
            let result = cx
                .api(Op::Delete)
                .await?
                .api_keys(key.spec.kind.to_api())
                .delete(&created.id)
                .await;
            let what = format!(
                "API key {} (its value could not be stored in Secret {secret})",
                created.id
            );
            if removed("Deleted", "delete", &what, result).is_ok() {
                status.id = None;
                return Err(e);
            }
            // The key stays: only a rotation can give the Secret a value of it, once the
            // Secret may be written. Record that intent with the id.
            rotation::issued_by_create(key, status, false);
            cx.save_status(status).await?;
            return Err(e);
        }
    }
    // A key created again (the remote one was gone) has a new value: roll the workloads.
    let recreated = status.rotation.last_rotated_at.is_some();
    status.previous_key_expires_at = None;
    let now = rotation::issued_by_create(key, status, true);
    cx.save_status(status).await?;
    if recreated {
        rotation::restart_workloads(key, cx, &now).await;
    }
    changes.push(Change::new(
        "Created",
        format!(
            "created API key {} and stored its value in Secret {secret}",
            created.id
        ),
    ));
    Ok(changes)
}

/// Deletes the key a new one replaced ([`ApiKeyStatus::replaced_key`]) once the Secret holds the
/// new key's value: the old key's last value was lost with a rotation's answer, so nobody can
/// hold it. Until then the old key stays, and with it the value the Secret still holds.
async fn retire_replaced(
    key: &ApiKey,
    cx: &Cx<'_, ApiKey>,
    status: &mut ApiKeyStatus,
) -> Result<Vec<Change>, Error> {
    let Some(old) = status.replaced_key.clone() else {
        return Ok(Vec::new());
    };
    // A new key whose Secret write failed waits for its own rotation into the Secret; and the
    // key the Secret holds is never the one deleted.
    if status.id.is_none()
        || status.id == status.replaced_key
        || status.rotation.pending_rotation.is_some()
    {
        return Ok(Vec::new());
    }
    cx.gate.intend(format!(
        "would delete API key {old}, replaced by a new key because the value of its last rotation was lost"
    ));
    let result = cx
        .api(Op::Delete)
        .await?
        .api_keys(key.spec.kind.to_api())
        .delete(&old)
        .await;
    let what = format!(
        "API key {old} (replaced by {}: the value of its last rotation was lost with the answer)",
        status.id.as_deref().unwrap_or_default()
    );
    let changes = removed("Deleted", "delete", &what, result)?;
    status.replaced_key = None;
    Ok(changes)
}

/// The description a key aigw creates carries when the spec gives none: this resource's uid,
/// which no other party's key has.
fn created_mark(key: &ApiKey) -> Option<String> {
    let uid = key.metadata.uid.as_deref()?;
    Some(format!("created by aigw for {uid}"))
}

/// True when `found` carries the mark of this resource's creates ([`created_mark`]).
fn ours(key: &ApiKey, found: &api::ApiKey) -> bool {
    created_mark(key).is_some_and(|mark| found.description.as_deref() == Some(mark.as_str()))
}

/// The key an earlier create made: the one key of its kind in the workspace it was sent to
/// with the same name, created within the POST's window, claimed by no other resource, in a
/// complete listing; proven by this resource's mark, or else taken only under the adoption
/// grant (see [`one_of_ours`]).
async fn find_created(
    key: &ApiKey,
    cx: &Cx<'_, ApiKey>,
    status: &ApiKeyStatus,
) -> Result<Lookup<api::ApiKey>, Error> {
    let sent = status
        .create_attempt
        .clone()
        .unwrap_or_else(|| CreateAttempt {
            name: Some(key.spec.name.clone()),
            workspace_id: key.spec.workspace_id.clone(),
            ..Default::default()
        });
    let query = api::ApiKeysListQuery {
        workspace_id: sent.workspace_id.clone(),
        page_size: None,
    };
    let listing = cx
        .api(Op::Read)
        .await?
        .api_keys(key.spec.kind.to_api())
        .listing(&query)
        .await
        .map_err(|e| Error::api("list API keys", e))?;
    one_of_ours(
        cx,
        status,
        &sent,
        listing,
        |k| vec![k.id.as_str()],
        |k| k.created_at.as_deref(),
        // The key a replacement replaces has the same name and body, and is no answer to it.
        |k| {
            k.name == sent.name
                && status.replaced_key.as_deref() != Some(k.id.as_str())
                && key.spec.immutable_conflicts(k).is_empty()
        },
        |k| {
            (!ours(key, k)).then(|| {
                format!(
                    "API key {} ({})",
                    k.name.as_deref().unwrap_or_default(),
                    k.id
                )
            })
        },
    )
    .await
}
