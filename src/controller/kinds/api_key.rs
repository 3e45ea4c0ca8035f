//! ApiKey: its verbs ([`Verbs`]) and what its answers issue ([`Issues`]). The driver
//! ([`crate::controller::driver::issuing`]) creates the gateway API key through the shared
//! create protocol and writes its one-time value into the Secret in the same reconcile, keeps
//! its mutable fields in line (a PUT of only the fields that differ), rotates it into the Secret
//! when asked or due, and deletes (or orphans) it on delete.
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

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::Api;

use crate::api::{self, ApiError, Client, Listing, Reading, SecretString};
use crate::controller::driver::calls::{Deleting, Own, OwnCalls, Post, Put, Read, Recovered};
use crate::controller::driver::create::{Created, one_of_ours, sent_or};
use crate::controller::driver::drift::{Listed, Row};
use crate::controller::driver::echoes::Echoable;
use crate::controller::driver::flow::Recovery;
use crate::controller::driver::issuing::Issues;
use crate::controller::driver::status::EmbedsManagedStatus;
use crate::controller::driver::verbs::{Comparison, Inputs, Made, Verbs};
use crate::controller::driver::{Cx, Managed};
use crate::controller::error::Error;
use crate::controller::runtime::failpoints;
use crate::controller::state::triggers::Triggers;
use crate::resources::Config;
use crate::resources::api_key::{ApiKey, ApiKeyStatus, SECRET_KEY};
use crate::resources::common::CreateAttempt;

use crate::controller::driver::secret_delivery;

mod rotation_calls;

/// Annotation on the key's Secret: the remote key its value belongs to.
pub const API_KEY_ID_ANNOTATION: &str = "aigw.io/api-key-id";
/// Annotation on the key's Secret: when the value it replaced stops working.
pub const PREVIOUS_EXPIRES_ANNOTATION: &str = "aigw.io/previous-key-expires-at";

impl EmbedsManagedStatus for ApiKeyStatus {
    fn without_own_timestamps(&self) -> Self {
        Self {
            rotation: self.rotation.without_timestamps(),
            ..self.clone()
        }
    }
    // A key being replaced is work in flight too: its deletion is not left to a full read.
    fn own_intent(&self) -> bool {
        self.rotation.pending_rotation.is_some() || self.replaced_key.is_some()
    }
}

impl Managed for ApiKey {
    crate::controller::driver::kind::namespaced_api!();
    const KIND: &'static str = "ApiKey";
    const LISTED: bool = true;

    crate::controller::driver::flow::driven!(issuing);

    /// A key given up after its rotation's answer was lost
    /// ([`crate::controller::driver::rotation::Rotates::give_up_lost`]), before its replacement
    /// exists: the key still works, but the Secret cannot be given its value.
    fn awaiting_replacement(status: &ApiKeyStatus) -> Option<String> {
        let replaced = status
            .replaced_key
            .as_deref()
            .filter(|_| status.id.is_none())?;
        Some(format!(
            "gave up API key {replaced}: the answer to its rotation was lost, and with it the value its Secret needs. Switch to Full to create the key that replaces it ({replaced} is deleted once the Secret holds the new value)"
        ))
    }

    /// A ConfigRollout moved the key (or returned it) since its config was last resolved. An
    /// observed-only key applies nothing, so nothing asks.
    fn asks_for_apply(&self, status: &ApiKeyStatus) -> bool {
        self.spec.management_policy == crate::resources::common::ManagementPolicy::Full
            && self.config_override() != status.config_override.as_deref()
    }

    /// The Secret still holds this key's value, and `defaults.config` still resolves to what
    /// was sent. Asked when the Secret or the Config changed ([`watch_inputs`]), and the
    /// first time this process sees the key.
    async fn inputs_unchanged(&self, cx: &Cx<'_, Self>, status: &ApiKeyStatus) -> bool {
        let name = &self.spec.secret_ref.name;
        let secret_holds_key = match secret_delivery::delivered(cx, name).await {
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
        let config_unchanged = match self.config_resource() {
            Some(_) => match held_override(self, cx).await {
                Ok(held) => {
                    resolve_config(self, cx, held.as_deref())
                        .await
                        .ok()
                        .flatten()
                        == status.config_id
                }
                Err(_) => false,
            },
            None => true,
        };
        secret_holds_key && config_unchanged
    }
}

impl Verbs for ApiKey {
    /// The config `defaults` names (its remote slug or id).
    type Desired = Option<String>;
    type Calls = Own;
    /// The PUT moves `last_updated_at`: the next list shows it, and the read after it records
    /// the new stamp.
    const READ_AFTER_UPDATE: bool = true;

    /// The key it was delivered: an update or delete refused after a restart may quote it,
    /// and no reconcile of this process handled it.
    fn echoable(&self, _ctx: &crate::controller::Context) -> Vec<Echoable> {
        vec![Echoable::Delivered {
            name: self.spec.secret_ref.name.clone(),
            keys: &[SECRET_KEY],
        }]
    }
    async fn resolve(&self, cx: &Cx<'_, Self>, status: &mut ApiKeyStatus) -> Inputs<Self> {
        let held = held_override(self, cx).await?;
        let config_id = resolve_config(self, cx, held.as_deref()).await?;
        status.config_id = config_id.clone();
        status.config_override = held;
        Ok(config_id)
    }
    /// The config last sent: Observe resolves no Config.
    async fn observed_inputs(&self, _cx: &Cx<'_, Self>, status: &mut ApiKeyStatus) -> Inputs<Self> {
        Ok(status.config_id.clone())
    }
    /// A key gone takes its id with it.
    fn record(status: &mut ApiKeyStatus, remote: Option<&api::ApiKey>) {
        status.remote_updated_at = remote.and_then(|r| r.last_updated_at.clone());
        if remote.is_none() {
            status.id = None;
        }
    }
    fn record_created(
        &self,
        status: &mut ApiKeyStatus,
        _: &Option<String>,
        created: Made<Self>,
    ) -> String {
        let id = match created {
            Created::Posted(created) => created.id,
            Created::Recovered(found) => found.id,
        };
        status.id = Some(id.clone());
        id
    }
}

impl OwnCalls for ApiKey {
    type Remote = api::ApiKey;
    type Found = api::ApiKey;
    type Posted = api::ApiKeyCreated;
    type Updated = ();
    /// A key that is gone (404, nothing else) is forgotten, so a new one is created into the
    /// Secret.
    async fn observe(&self, client: &Client, key: &str, _: &ApiKeyStatus) -> Read<Self> {
        client
            .api_keys(self.spec.kind.to_api())
            .get(key)
            .await
            .map(Some)
    }
    fn sent(&self, cx: &Cx<'_, Self>, config_id: &Option<String>) -> CreateAttempt {
        let request = create_request(self, config_id.as_deref());
        cx.create_attempt(
            Some(self.spec.name.clone()),
            self.spec.workspace_id.clone(),
            &request,
        )
    }
    async fn create(&self, client: &Client, config_id: &Option<String>) -> Post<Self> {
        let request = create_request(self, config_id.as_deref());
        client
            .api_keys(self.spec.kind.to_api())
            .create(&request)
            .await
    }
    fn compare(
        &self,
        config_id: &Option<String>,
        remote: &api::ApiKey,
        _status: &ApiKeyStatus,
    ) -> Comparison {
        Comparison {
            immutable: self.spec.immutable_conflicts(remote),
            differs: self.spec.update_for(remote, config_id.as_deref()).0,
            inputs: Vec::new(),
        }
    }
    async fn update(
        &self,
        client: &Client,
        config_id: &Option<String>,
        remote: &api::ApiKey,
    ) -> Put<Self> {
        let (_, update) = self.spec.update_for(remote, config_id.as_deref());
        client
            .api_keys(self.spec.kind.to_api())
            .update(&remote.id, &update.unwrap_or_default())
            .await
    }
    async fn delete(&self, at: Deleting<'_, Self>) -> Result<(), ApiError> {
        at.client
            .api_keys(self.spec.kind.to_api())
            .delete(at.key)
            .await
    }
    /// The key an earlier create made: the one key of its kind in the workspace it was sent to
    /// with the same name, created within the POST's window, claimed by no other resource, in a
    /// complete listing; proven by this resource's mark, or else taken only under the adoption
    /// grant (see [`one_of_ours`]).
    async fn find_created(&self, cx: &Cx<'_, Self>, status: &ApiKeyStatus) -> Recovered<Self> {
        let sent = sent_or(
            status,
            Some(self.spec.name.as_str()),
            self.spec.workspace_id.as_deref(),
        );
        let query = api::ApiKeysListQuery {
            workspace_id: sent.workspace_id.clone(),
            page_size: None,
        };
        let listing = cx
            .read("list API keys", |client| async move {
                client
                    .api_keys(self.spec.kind.to_api())
                    .listing(&query, Reading::Proof)
                    .await
            })
            .await?;
        // The key a replacement replaces has the same name and body, and is no answer to it.
        let sent_this = |k: &api::ApiKey| {
            k.name == sent.name
                && status.replaced_key.as_deref() != Some(k.id.as_str())
                && self.spec.immutable_conflicts(k).is_empty()
        };
        let unproven = |k: &api::ApiKey| {
            let name = k.name.as_deref().unwrap_or_default();
            (!ours(self, k)).then(|| format!("API key {name} ({})", k.id))
        };
        one_of_ours(cx, status, &sent, listing, sent_this, unproven).await
    }
}

impl Issues for ApiKey {
    const ID_ANNOTATION: &'static str = API_KEY_ID_ANNOTATION;
    /// A key whose value no Secret holds is deleted: nobody could ever use it.
    const DISCARDS_UNDELIVERED: bool = true;
    const AFTER_CREATE: Option<&'static str> = Some(failpoints::AFTER_API_KEY_CREATE);
    const HELD: &'static str = SECRET_KEY;

    /// The API's own `rotation_policy` is refused: a server-side rotation would issue a value
    /// that never reaches the Secret.
    fn timing(&self) -> Result<(Option<Duration>, Option<Duration>), Error> {
        if self.spec.rotation_policy.is_some() {
            return Err(Error::InvalidSpec(
                "spec.rotationPolicy is refused: a server-side rotation would leave the Secret with a dead key; use spec.rotation".into(),
            ));
        }
        let interval = self.spec.rotation_interval().map_err(Error::InvalidSpec)?;
        let transition = self.spec.transition_period().map_err(Error::InvalidSpec)?;
        Ok((interval, transition))
    }
    fn issued(created: &api::ApiKeyCreated) -> Vec<(&'static str, SecretString)> {
        vec![(SECRET_KEY, created.key.clone())]
    }
    fn created_message(id: &str, secret: &str) -> String {
        format!("created API key {id} and stored its value in Secret {secret}")
    }
    /// The value of a key an earlier create made went with the lost answer: the key is deleted
    /// and a new one created, so no key is left that no Secret holds; unless the Secret holds
    /// it already, or the key is not proven this create's (no mark: taken under the adoption
    /// grant, never deleted, and rotated to store a value).
    fn recovery(&self, found: &api::ApiKey, held: bool) -> Recovery {
        match (held, ours(self, found)) {
            (true, _) => Recovery::Stored,
            (false, false) => Recovery::Adopt,
            (false, true) => Recovery::Replace,
        }
    }
    fn replaced_remote(status: &ApiKeyStatus) -> Option<String> {
        status.replaced_key.clone()
    }
    fn forget_replaced(status: &mut ApiKeyStatus) {
        status.replaced_key = None;
    }
}

/// Reconciles an ApiKey when its Secret (one aigw wrote) or the Config its `defaults.config`
/// names changes: a deleted Secret is reported at once, a Config's new slug is sent. Either
/// marks the ApiKeys of its namespace that use it so their next reconcile checks their inputs.
pub fn watch_inputs(triggers: Triggers<'_, ApiKey>) -> Triggers<'_, ApiKey> {
    let namespace = triggers.namespace;
    // Heard once the delivered-Secrets cache, which the reconcile reads, holds the change.
    let triggers = triggers.inputs_from(namespace, |k: &ApiKey, secret: &Secret| {
        k.metadata.namespace == secret.metadata.namespace
            && k.spec.secret_ref.name == secret.name_any()
    });
    // Heard once the Config watch cache, which `defaults.config` is resolved from, holds it.
    triggers.inputs_from(namespace, |k: &ApiKey, config: &Config| {
        k.metadata.namespace == config.metadata.namespace && k.may_use_config(&config.name_any())
    })
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
            let listing = client.api_keys(kind).listing(&query, Reading::Once).await?;
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

/// The Config a ConfigRollout put the key on (`aigw.io/rollout-config`), honoured only while
/// `aigw.io/rollout` names a ConfigRollout of the key's namespace whose `status.movedKeys`
/// holds the key (a rollout records a key there before it annotates it), names that rollout's
/// candidate, and the rollout is progressing or completed. Annotations written by
/// hand, or left by a rollout that is gone, move nothing: the key keeps its own defaults.
///
/// Read from the ConfigRollout watch cache. The rollout records the key before it annotates it,
/// but the two watches are separate streams: a cache that does not show the key held yet (or
/// has not listed) is checked against the apiserver, so a move is never missed; only a hand-
/// written annotation costs that read.
async fn held_override(key: &ApiKey, cx: &Cx<'_, ApiKey>) -> Result<Option<String>, Error> {
    use crate::resources::config_rollout::{ConfigRollout, Phase, ROLLOUT_ANNOTATION};
    let Some(config) = key.config_override() else {
        return Ok(None);
    };
    let Some(rollout) = key.annotations().get(ROLLOUT_ANNOTATION) else {
        return Ok(None);
    };
    let name = key.name_any();
    // The rollout moved this key, puts it on its own candidate (no other Config of the
    // namespace, whatever the annotation says) and has not rolled back or been aborted.
    let holds = |r: Option<&ConfigRollout>| {
        r.is_some_and(|r| {
            r.spec.candidate_config_ref.name == config
                && r.status.as_ref().is_some_and(|s| {
                    s.moved_keys.contains(&name)
                        && matches!(s.phase, Phase::Progressing | Phase::Completed)
                })
        })
    };
    let namespace = cx.namespace();
    let cached = cx.ctx.stores.rollouts.find_in(&namespace, rollout).await;
    if cached.is_some_and(|r| holds(r.as_deref())) {
        return Ok(Some(config.to_string()));
    }
    let rollouts = Api::<ConfigRollout>::namespaced(cx.ctx.kube.clone(), &namespace);
    let found = rollouts
        .get_opt(rollout)
        .await
        .map_err(|e| Error::kube(format!("read ConfigRollout {rollout}"), e))?;
    Ok(holds(found.as_ref()).then(|| config.to_string()))
}

/// The config the key's defaults name: `held`, the Config resource a ConfigRollout put the key
/// on ([`held_override`]), else `defaults.configId` as written, or the remote slug of the
/// Config resource `defaults.config` names (waiting until it has one).
async fn resolve_config(
    key: &ApiKey,
    cx: &Cx<'_, ApiKey>,
    held: Option<&str>,
) -> Result<Option<String>, Error> {
    let Some(defaults) = &key.spec.defaults else {
        return Ok(None);
    };
    if let (None, Some(id)) = (held, &defaults.config_id) {
        return Ok(Some(id.clone()));
    }
    let Some(name) = held.or(defaults.config.as_deref()) else {
        return Ok(None);
    };
    let what = match held {
        Some(_) => "annotation aigw.io/rollout-config",
        None => "defaults.config",
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
            "{what} names Config {name}, which has no remote config yet; waiting for it"
        ))),
    }
}

/// What the create sends: the spec's key, with `defaults` naming `config_id`. Without a
/// description of the spec's, the key carries this resource's mark: what proves, after a lost
/// answer, that a key of the name is the one its create made.
fn create_request(key: &ApiKey, config_id: Option<&str>) -> api::CreateApiKeyRequest {
    let mut request = key.spec.create_request(config_id);
    if request.description.is_none() {
        request.description = created_mark(key);
    }
    request
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
