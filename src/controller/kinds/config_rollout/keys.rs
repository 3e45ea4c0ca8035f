//! Which ApiKeys a rollout moves, and moving them: the keys of the namespace as the rollout
//! sees them, the checks that keep a rollout from taking a key, and the annotation writes the
//! keys' own reconciles apply.

use kube::api::{ListParams, Patch};
use kube::{Resource, ResourceExt};
use tracing::debug;

use super::{KIND, Run, connection_name};
use crate::controller::error::{Error, Halt, Wait};
use crate::controller::runtime::apiserver::written_by;
use crate::resources::api_key::ApiKey;
use crate::resources::common::condition::{READY, STALLED};
use crate::resources::common::{ManagementPolicy, find_condition};
use crate::resources::config_rollout as rollout;

/// The keys of the namespace as the rollout sees them.
pub(super) struct Keys {
    /// Selected by `apiKeySelector` and fit to move, sorted by name.
    pub(super) eligible: Vec<ApiKey>,
    /// Every key of the namespace that names this rollout in `aigw.io/rollout`.
    pub(super) tagged: Vec<ApiKey>,
    /// Selected keys another rollout holds (its `movedKeys` lists them): `(key, rollout)`.
    pub(super) held_elsewhere: Vec<(String, String)>,
    /// Every key of the namespace (a key this rollout moved may have left the selector, or
    /// been re-tagged: it is still returned).
    pub(super) all: Vec<ApiKey>,
    /// Keys another rollout holds: `aigw.io/rollout` names it and its `status.movedKeys` lists
    /// the key. This rollout never writes them, even if its own `movedKeys` still lists them
    /// (it finished and a later rollout took them): the holder moves and returns them.
    pub(super) taken: Vec<String>,
}

impl Run<'_> {
    /// Writes the annotations so that `names` (of `keys`) use `config` (`None`: their own
    /// defaults). A key whose annotations already say so is not written; each write has the
    /// key's resourceVersion as a precondition.
    pub(super) async fn place(
        &self,
        keys: &Keys,
        names: &[String],
        config: Option<&str>,
    ) -> Result<(), Halt> {
        for name in names {
            let Some(key) = keys.all.iter().find(|k| k.name_any() == *name) else {
                continue;
            };
            if keys.taken.contains(name) {
                continue;
            }
            let annotations = key.annotations();
            let has = |a: &str| annotations.get(a).map(String::as_str);
            let (override_value, owner) = match config {
                // A key whose own defaults name the config (promoted in Git) needs no
                // override; one the rollout may not take is never put on the candidate
                // (whatever asked: a step, a promote, a completed rollout holding its keys).
                // Either way, only this rollout's own annotations are removed.
                Some(config) if promoted(key, config) || self.unfit(key).is_some() => {
                    if !tagged_by(key, &self.name) {
                        continue;
                    }
                    (None, None)
                }
                Some(config) => (Some(config), Some(self.name.as_str())),
                None => (None, None),
            };
            if has(rollout::CONFIG_OVERRIDE_ANNOTATION) == override_value
                && has(rollout::ROLLOUT_ANNOTATION) == owner
            {
                continue;
            }
            self.ctx
                .leadership
                .for_object(self.rollout.meta())
                .may_write()
                .map_err(Wait::NotLeader)?;
            let patch = serde_json::json!({"metadata": {
                "resourceVersion": key.resource_version(),
                "annotations": {
                    rollout::CONFIG_OVERRIDE_ANNOTATION: override_value,
                    rollout::ROLLOUT_ANNOTATION: owner,
                },
            }});
            self.keys
                .patch(name, &written_by(super::MANAGER), &Patch::Merge(&patch))
                .await
                .map_err(|e| match e {
                    kube::Error::Api(s) if s.code == 409 => {
                        Halt::from(Wait::Conflict(format!("ApiKey {name} changed meanwhile")))
                    }
                    e => Error::kube(format!("annotate ApiKey {name}"), e).into(),
                })?;
            debug!(kind = KIND, rollout = %self.name, key = %name, config = ?config, "moved ApiKey");
        }
        Ok(())
    }

    /// The keys of `names` whose status does not show `config` (`None`: no override) applied.
    pub(super) fn not_placed(
        &self,
        keys: &Keys,
        names: &[String],
        config: Option<&str>,
    ) -> Vec<String> {
        let all = &keys.all;
        names
            .iter()
            .filter(|name| {
                let Some(key) = all.iter().find(|k| k.name_any() == **name) else {
                    return false;
                };
                let Some(status) = &key.status else {
                    return true;
                };
                let config = config.filter(|c| !promoted(key, c));
                let ready = find_condition(&status.conditions, READY).is_some_and(|c| {
                    c.status == "True" && c.observed_generation == key.meta().generation
                });
                // The annotation as this rollout wrote it; one it did not write (a stale tag of
                // another rollout, or by hand) moves nothing and is left alone.
                let annotated = config.is_some() || tagged_by(key, &self.name);
                !(ready
                    && status.config_override.as_deref() == config
                    && (!annotated || key.config_override() == config))
            })
            .cloned()
            .collect()
    }

    /// The keys of `names` promoted in Git (their own defaults name `candidate`) that carry no
    /// tag of this rollout and show their own defaults applied, or that a later rollout holds:
    /// nothing of this rollout is left on them.
    pub(super) fn promoted_and_applied(
        &self,
        keys: &Keys,
        names: &[String],
        candidate: &str,
    ) -> Vec<String> {
        let promoted: Vec<String> = names
            .iter()
            .filter(|name| {
                keys.all.iter().any(|k| {
                    k.name_any() == **name && promoted(k, candidate) && !tagged_by(k, &self.name)
                })
            })
            .cloned()
            .collect();
        let waiting = self.not_placed(keys, &promoted, None);
        promoted
            .into_iter()
            .filter(|n| keys.taken.contains(n) || !waiting.contains(n))
            .collect()
    }

    /// Why a key the rollout holds on `candidate` is not there: [`Self::unfit`], unless its own
    /// defaults name `candidate` (promoted in Git).
    pub(super) fn refused_on(&self, key: &ApiKey, candidate: &str) -> Option<String> {
        (!promoted(key, candidate))
            .then(|| self.unfit(key))
            .flatten()
    }

    /// What keeps the rollout from starting: a selected key another rollout holds, one not on
    /// the stable Config, one aigw only observes, or one reached through another Connection.
    pub(super) fn refusal(&self, keys: &Keys) -> Option<String> {
        if let Some((name, other)) = keys.held_elsewhere.first() {
            return Some(format!(
                "ApiKey {name} is in ConfigRollout {other}; a key is in one rollout at a time"
            ));
        }
        keys.eligible.iter().find_map(|key| self.unfit(key))
    }

    /// Why the rollout may not put `key` on the candidate: it is not on the stable Config, aigw
    /// only observes it, it is reached through another Connection, or it is another
    /// installation's. `None` when it may.
    pub(super) fn unfit(&self, key: &ApiKey) -> Option<String> {
        let spec = &self.rollout.spec;
        let connection = connection_name(self.rollout);
        let name = key.name_any();
        let defaults = key.spec.defaults.as_ref();
        if defaults.and_then(|d| d.config.as_deref()) != Some(&spec.stable_config_ref.name) {
            return Some(format!(
                "ApiKey {name} does not use the stable Config: its spec.defaults.config must be {}",
                spec.stable_config_ref.name
            ));
        }
        if key.spec.management_policy == ManagementPolicy::Observe {
            return Some(format!(
                "ApiKey {name} is observed only (managementPolicy: Observe): aigw cannot move it"
            ));
        }
        if key.spec.connection_name() != connection {
            return Some(format!(
                "ApiKey {name} uses Connection {}, this rollout reads telemetry through {connection}",
                key.spec.connection_name()
            ));
        }
        if self.ctx.installation.is_theirs(key) {
            return Some(format!("ApiKey {name} belongs to another installation"));
        }
        None
    }

    pub(super) async fn keys(&self) -> Result<Keys, Halt> {
        let selector = self.selector().map_err(Error::InvalidSpec)?;
        self.keys_of(Some(&selector)).await
    }

    /// The keys as a deletion returns them: those this rollout tagged or recorded, whatever
    /// `spec.apiKeySelector` says now. A selector that no longer parses (edited since) selects
    /// nothing, so it never keeps a moved key on the candidate or the finalizer in place.
    pub(super) async fn keys_to_return(&self) -> Result<Keys, Halt> {
        self.keys_of(self.selector().ok().as_ref()).await
    }

    fn selector(&self) -> Result<kube::core::Selector, String> {
        let selector = self.rollout.spec.api_key_selector.clone();
        selector
            .try_into()
            .map_err(|e| format!("spec.apiKeySelector: {e}"))
    }

    /// The keys of the namespace, sorted into [`Keys`] by `selector` (none: selects nothing).
    async fn keys_of(&self, selector: Option<&kube::core::Selector>) -> Result<Keys, Halt> {
        let listed = self
            .keys
            .list(&ListParams::default())
            .await
            .map_err(|e| Error::kube("list ApiKeys", e))?;
        let (mut eligible, mut tagged, mut held_elsewhere) = (Vec::new(), Vec::new(), Vec::new());
        let mut taken = Vec::new();
        for key in listed.items.iter().cloned() {
            let holder = key.annotations().get(rollout::ROLLOUT_ANNOTATION).cloned();
            let ours = holder.as_ref() == Some(&self.name);
            if ours {
                tagged.push(key.clone());
            }
            // Another rollout holds the key only while its movedKeys lists it (it records a
            // key there before tagging it): a tag naming a rollout that does not (gone, or
            // written by hand) holds nothing, and the key's own reconcile ignores it too.
            let held = match holder.as_deref() {
                Some(other) if !ours => self.holds(other, &key.name_any()).await?,
                _ => false,
            };
            if held {
                taken.push(key.name_any());
            }
            let selected =
                selector.is_some_and(|s| kube::core::SelectorExt::matches(s, key.labels()));
            if !selected || key.meta().deletion_timestamp.is_some() {
                continue;
            }
            match holder {
                Some(other) if held => held_elsewhere.push((key.name_any(), other)),
                _ => eligible.push(key),
            }
        }
        eligible.sort_by_key(|k| k.name_any());
        tagged.sort_by_key(|k| k.name_any());
        held_elsewhere.sort();
        Ok(Keys {
            eligible,
            tagged,
            held_elsewhere,
            all: listed.items,
            taken,
        })
    }

    /// Whether the ConfigRollout `other` of this namespace lists `key` in its `movedKeys`
    /// (from the watch cache; read from the apiserver only while the cache does not show it).
    async fn holds(&self, other: &str, key: &str) -> Result<bool, Halt> {
        let lists = |r: Option<&rollout::ConfigRollout>| {
            r.and_then(|r| r.status.as_ref())
                .is_some_and(|s| s.moved_keys.iter().any(|k| k == key))
        };
        let cached = self
            .ctx
            .stores
            .rollouts
            .find_in(&self.namespace, other)
            .await;
        if cached.is_some_and(|r| lists(r.as_deref())) {
            return Ok(true);
        }
        let found = self
            .rollouts
            .get_opt(other)
            .await
            .map_err(|e| Error::kube(format!("read ConfigRollout {other}"), e))?;
        Ok(lists(found.as_ref()))
    }
}

/// The first of `names` whose ApiKey reports `Stalled=True` for its current generation (a
/// refused grant, an invalid spec): `ApiKey NAME is Stalled (REASON: MESSAGE)`.
pub(super) fn stalled_key(keys: &Keys, names: &[String]) -> Option<String> {
    keys.all.iter().find_map(|key| {
        let name = key.name_any();
        if !names.contains(&name) {
            return None;
        }
        let status = key.status.as_ref()?;
        let stalled = find_condition(&status.conditions, STALLED)?;
        (stalled.status == "True" && stalled.observed_generation == key.meta().generation).then(
            || {
                format!(
                    "ApiKey {name} is Stalled ({}: {})",
                    stalled.reason, stalled.message
                )
            },
        )
    })
}

pub(super) fn names(keys: &[ApiKey]) -> Vec<String> {
    keys.iter().map(|k| k.name_any()).collect()
}

/// The remote key ids of the candidate cohort (every key whose status shows `candidate`
/// applied) and of the stable one (the selected keys whose status shows their own defaults
/// applied), from what each key applied rather than what the rollout asked. A key with no remote
/// id yet, or between the two, is in neither.
pub(super) fn cohort_ids(keys: &Keys, candidate: &str) -> (Vec<String>, Vec<String>) {
    let (mut on_candidate, mut stable) = (Vec::new(), Vec::new());
    for key in keys.eligible.iter().chain(&keys.tagged) {
        let Some(status) = key.status.as_ref() else {
            continue;
        };
        let Some(id) = status.id.clone() else {
            continue;
        };
        let selected = keys.eligible.iter().any(|k| k.name_any() == key.name_any());
        let list = match status.config_override.as_deref() {
            Some(applied) if applied == candidate => &mut on_candidate,
            None if selected => &mut stable,
            _ => continue,
        };
        if !list.contains(&id) {
            list.push(id);
        }
    }
    (on_candidate, stable)
}

/// Whether `key` uses `config` by its own defaults (`spec.defaults.config`): a key promoted in
/// Git after a rollout completed, which needs no override.
fn promoted(key: &ApiKey, config: &str) -> bool {
    key.spec.defaults.as_ref().and_then(|d| d.config.as_deref()) == Some(config)
}

/// Whether `key`'s `aigw.io/rollout` names the rollout `name`.
fn tagged_by(key: &ApiKey, name: &str) -> bool {
    key.annotations()
        .get(rollout::ROLLOUT_ANNOTATION)
        .map(String::as_str)
        == Some(name)
}
