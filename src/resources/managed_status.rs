//! The status fields the driver keeps for every kind that creates remote objects, as one block
//! each kind's status embeds with `#[serde(flatten)]` (Crossplane's `ManagedResourceStatus`).
//! The wire shape is the one each kind had before the block: the same camelCase keys at the
//! top of `status`, so a status written by an earlier release reads unchanged.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::common::{CreateAttempt, conditions_schema};

/// Generation, conditions, the create intent and the installation's claim of one object.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManagedStatus {
    /// The `metadata.generation` this status describes.
    pub observed_generation: Option<i64>,
    /// `Ready`, `Reconciling` and `Stalled`, each with a reason and its own observedGeneration.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
    /// Set just before a create is sent and cleared once its outcome is known.
    pub pending_create: Option<String>,
    /// The installation (its `--installation-id`) that manages this object, recorded by the
    /// operator before any other write of its own, or, while the `aigw.io/installation`
    /// annotation is guarded at admission, with its first status write after the annotation
    /// took the object. Only the status subresource holds it, which
    /// the chart's RBAC lets the operator write and a tenant's `edit` role does not: an
    /// `aigw.io/installation` annotation rewritten to another installation stalls the object
    /// (`ClaimChanged`) instead of moving it.
    pub installation: Option<String>,
    /// The id of the last create intent whose outcome was recorded (the intent itself is the
    /// `aigw.io/create-intent` annotation, written with the finalizer in one write): an
    /// annotation naming this id is settled.
    pub create_settled: Option<String>,
    /// What the create in flight sent, and when its request ended without an answer.
    // Boxed: it is set only while a create is in flight, and inline it would cost every cached
    // object its 120 bytes.
    pub create_attempt: Option<Box<CreateAttempt>>,
    /// Not status: whether the copy's `aigw.io/installation` annotation named the
    /// installation recorded above, set where a copy read from the cluster is prepared for
    /// reconciles ([`crate::controller::driver::status::project_claim`]), which drops such an
    /// annotation from the copy.
    #[serde(skip)]
    pub claim_annotated: ClaimAnnotated,
}

/// Whether an annotation dropped from a cached copy named the installation its status records
/// ([`ManagedStatus::claim_annotated`]). A one-entry annotation map costs every cached object a
/// B-tree node of about 540 bytes, and that annotation is the one almost every object carries.
/// It is metadata, not status: never serialized, and equal whatever its value, so a status
/// read from an answer compares equal to the cached copy of the same status.
#[derive(Clone, Copy, Debug, Default)]
pub struct ClaimAnnotated(pub bool);

impl PartialEq for ClaimAnnotated {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl ManagedStatus {
    /// A copy with every timestamp blanked (the conditions' transition times, the time the
    /// create intent was recorded), to tell real changes from clock ticks.
    pub fn without_timestamps(&self) -> Self {
        Self {
            conditions: conditions_without_timestamps(&self.conditions),
            pending_create: self.pending_create.as_ref().map(|_| String::new()),
            ..self.clone()
        }
    }
}

/// Blanks `lastTransitionTime` of every condition (for comparisons).
pub fn conditions_without_timestamps(conditions: &[Condition]) -> Vec<Condition> {
    conditions
        .iter()
        .map(|c| Condition {
            last_transition_time: Time(jiff::Timestamp::UNIX_EPOCH),
            ..c.clone()
        })
        .collect()
}

/// Gives fields of the block the description one kind's CRD has always shown for them (where
/// it says more than the block's own, or less): `#[schemars(transform = Reword(&[..]))]` on
/// that kind's status. Keys are the camelCase property names.
pub struct Reword(pub &'static [(&'static str, &'static str)]);

/// [`Reword`] of `createSettled` told together with the annotation it settles.
pub const CREATE_SETTLED: (&str, &str) = (
    "createSettled",
    "The id of the last create intent whose outcome was recorded (the intent \
     itself is the `aigw.io/create-intent` annotation): an annotation naming this \
     id is settled.",
);

/// [`Reword`] of `pendingCreate` for the kinds that look a lost create up by name.
pub const PENDING_CREATE: (&str, &str) = (
    "pendingCreate",
    "Set just before a create is sent and cleared once its outcome is known: a \
     create whose outcome was lost is looked up by name instead of being sent \
     again.",
);

impl schemars::transform::Transform for Reword {
    fn transform(&mut self, schema: &mut schemars::Schema) {
        let Some(properties) = schema
            .get_mut("properties")
            .and_then(serde_json::Value::as_object_mut)
        else {
            return;
        };
        for (property, description) in self.0 {
            if let Some(property) = properties
                .get_mut(*property)
                .and_then(serde_json::Value::as_object_mut)
            {
                property.insert("description".into(), (*description).into());
            }
        }
    }
}

/// Lets a kind's status (or spec) read and write the fields of the block in its `managed`
/// field as its own (`status.conditions`), the way Go's embedded structs promote theirs: the
/// fields moved into the block without a change to the code that reads them.
macro_rules! embeds_managed {
    ($outer:ty, $block:ty) => {
        impl std::ops::Deref for $outer {
            type Target = $block;
            fn deref(&self) -> &Self::Target {
                &self.managed
            }
        }
        impl std::ops::DerefMut for $outer {
            fn deref_mut(&mut self) -> &mut Self::Target {
                &mut self.managed
            }
        }
    };
}
pub(crate) use embeds_managed;

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::resources::api_key::ApiKeyStatus;
    use crate::resources::config::ConfigStatus;

    /// A Config's status as the release before the block wrote it: every field of the block
    /// set (a create in flight, so `createAttempt` too) beside the kind's own fields.
    fn config_status_as_written() -> Value {
        json!({
            "observedGeneration": 3,
            "conditions": [
                {"type": "Ready", "status": "False", "reason": "Creating", "message": "creating",
                 "observedGeneration": 3, "lastTransitionTime": "2026-11-28T13:34:58Z"},
                {"type": "Reconciling", "status": "True", "reason": "Creating",
                 "message": "creating", "observedGeneration": 3,
                 "lastTransitionTime": "2026-11-28T13:34:58Z"},
            ],
            "id": "5e0c8a4e-6d1f-4a7b-9c3e-2f1d0b7a8c91",
            "slug": "config-1a2b3c",
            "versionId": "v-2",
            "secretHash": "hmac-sha256:00ff",
            "lastAppliedAt": "2026-11-28T13:34:58Z",
            "remoteUpdatedAt": "2026-11-28T13:34:57Z",
            "pendingCreate": "2026-11-28T13:34:50Z",
            "installation": "prod-eu",
            "createSettled": "intent-1",
            "createAttempt": {"intent": "intent-2", "name": "chat-routing",
                              "workspaceId": "ws-1", "bodyHash": "hmac-sha256:abcd",
                              "endedAt": "2026-11-28T13:34:51Z"},
            "lastDriftCorrection": {"at": "2026-11-28T13:30:00Z", "replacedVersionId": "v-1",
                                    "changes": [{"path": "/name", "remote": "\"old\"",
                                                 "desired": "\"chat-routing\""}],
                                    "more": 1},
            "history": [{"versionId": "v-2", "generation": 3,
                         "appliedAt": "2026-11-28T13:34:58Z", "revision": "abc123"}],
            "resolvedReferences": ["@openai-prod"],
        })
    }

    #[test]
    fn a_status_the_previous_release_wrote_reads_into_the_block_and_writes_back_unchanged() {
        let written = config_status_as_written();
        let status: ConfigStatus = serde_json::from_value(written.clone()).unwrap();
        assert_eq!(status.managed.observed_generation, Some(3));
        assert_eq!(status.managed.conditions.len(), 2);
        assert_eq!(status.managed.installation.as_deref(), Some("prod-eu"));
        assert_eq!(status.managed.create_settled.as_deref(), Some("intent-1"));
        assert_eq!(
            status.managed.pending_create.as_deref(),
            Some("2026-11-28T13:34:50Z")
        );
        let attempt = status.managed.create_attempt.as_deref().unwrap();
        assert_eq!(attempt.intent.as_deref(), Some("intent-2"));
        assert_eq!(attempt.ended_at.as_deref(), Some("2026-11-28T13:34:51Z"));
        assert_eq!(status.slug.as_deref(), Some("config-1a2b3c"));
        assert_eq!(status.history.len(), 1);
        assert!(status.last_drift_correction.is_some());
        assert_eq!(serde_json::to_value(&status).unwrap(), written);
    }

    #[test]
    fn a_status_with_two_blocks_keeps_each_field_in_its_own() {
        let written = json!({
            "observedGeneration": 1,
            "id": "k-1",
            "remoteUpdatedAt": "2026-11-28T13:34:57Z",
            "installation": "prod-eu",
            "createSettled": "intent-1",
            "pendingRotation": "rot-1",
            "lastRotatedAt": "2026-11-28T13:00:00Z",
            "replacements": 2,
        });
        let status: ApiKeyStatus = serde_json::from_value(written.clone()).unwrap();
        assert_eq!(status.managed.installation.as_deref(), Some("prod-eu"));
        assert_eq!(status.rotation.pending_rotation.as_deref(), Some("rot-1"));
        assert_eq!(status.replacements, 2);
        assert_eq!(serde_json::to_value(&status).unwrap(), written);
    }

    #[test]
    fn only_the_blocks_timestamps_are_blanked() {
        let status: ConfigStatus = serde_json::from_value(config_status_as_written()).unwrap();
        let blank = status.managed.without_timestamps();
        assert!(
            blank
                .conditions
                .iter()
                .all(|c| c.last_transition_time.0 == jiff::Timestamp::UNIX_EPOCH)
        );
        assert_eq!(blank.pending_create.as_deref(), Some(""));
        assert_eq!(blank.create_attempt, status.managed.create_attempt);
        assert_eq!(blank.installation, status.managed.installation);
    }
}
