//! kstatus conditions and the status write: server-side apply under one field manager per kind,
//! skipped when nothing but timestamps would change.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::resources::common::condition::{READY, RECONCILING, STALLED};
use crate::resources::managed_status::ManagedStatus;

/// What a reconcile concluded, as the three kstatus conditions express it.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The remote object matches the spec.
    Ready { reason: String, message: String },
    /// Work is in progress or will be retried (transient failure).
    Progressing { reason: String, message: String },
    /// Only a spec change can help.
    Stalled { reason: String, message: String },
}

/// The parts of a kind's status the driver maintains.
pub trait CommonStatus:
    Clone + Default + PartialEq + serde::Serialize + Send + Sync + std::fmt::Debug
{
    fn observed_generation_mut(&mut self) -> &mut Option<i64>;
    fn observed_generation(&self) -> Option<i64>;
    fn conditions(&self) -> &[Condition];
    fn conditions_mut(&mut self) -> &mut Vec<Condition>;
    /// A copy with every timestamp blanked, to tell real changes from clock ticks.
    fn without_timestamps(&self) -> Self;
}

/// The status of a kind that creates remote objects: its intent records.
pub trait IntentStatus: CommonStatus {
    /// The create intent: when the POST of the create in flight was about to be sent.
    fn pending_create_mut(&mut self) -> &mut Option<String>;
    /// What the create in flight sent ([`crate::resources::common::CreateAttempt`]). Boxed: it
    /// is set only while a create is in flight, and inline it would cost every cached object
    /// its 120 bytes.
    fn create_attempt_mut(&mut self) -> &mut Option<Box<crate::resources::common::CreateAttempt>>;
    /// When the create in flight was about to be sent.
    fn pending_create(&self) -> Option<&str>;
    /// What the create in flight sent.
    fn create_attempt(&self) -> Option<&crate::resources::common::CreateAttempt>;
    /// True while an intent record (a create or rotation whose outcome is not yet known) is set:
    /// the work it stands for must finish, so every failure meanwhile is transient.
    fn has_intent(&self) -> bool;
    /// The id of the last create intent whose outcome was recorded.
    fn create_settled_mut(&mut self) -> &mut Option<String>;
    fn create_settled(&self) -> Option<&str>;
    /// The installation recorded as the one that manages the object (`status.installation`).
    fn installation(&self) -> Option<&str>;
    fn installation_mut(&mut self) -> &mut Option<String>;
    /// Whether the copy's claim annotation named the recorded installation ([`project_claim`]).
    fn claim_annotated_mut(&mut self) -> &mut bool;
}

/// Brings the create intent of an `aigw.io/create-intent` annotation into `status`, as
/// if the status had recorded it: unless its outcome was recorded (`createSettled` names it) or
/// the status carries it already (a failure recorded while it was in flight, with the time its
/// request ended). Every cached copy and every re-read passes here, so everything downstream
/// reads the intent from the status as before.
pub fn project_intent<S: IntentStatus>(
    intent: Option<crate::resources::common::CreateIntent>,
    status: &mut Option<S>,
) {
    let Some(intent) = intent else {
        return;
    };
    let Some(id) = intent.create_attempt.intent.clone() else {
        return;
    };
    let status = status.get_or_insert_with(S::default);
    let carried = status
        .create_attempt()
        .and_then(|a| a.intent.as_deref())
        .is_some_and(|carried| carried == id);
    if status.create_settled() == Some(id.as_str()) || carried {
        return;
    }
    *status.pending_create_mut() = Some(intent.pending_create);
    *status.create_attempt_mut() = Some(Box::new(intent.create_attempt));
}

/// Drops from `meta` an `aigw.io/installation` annotation naming `recorded`, the installation
/// the object's status records; true when it did. The caller notes that in the status
/// ([`ManagedStatus::claim_annotated`]): every cached copy and every re-read passes here
/// ([`crate::controller::driver::Managed::prepare`]), and claims are read through
/// [`crate::controller::state::installation::Installation::annotated`].
pub fn project_claim(
    meta: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    recorded: &str,
) -> bool {
    use crate::controller::state::installation::ANNOTATION;
    let Some(annotations) = meta.annotations.as_mut() else {
        return false;
    };
    if annotations.get(ANNOTATION).map(String::as_str) != Some(recorded) {
        return false;
    }
    annotations.remove(ANNOTATION);
    if annotations.is_empty() {
        meta.annotations = None;
    }
    true
}

/// Sets one condition, keeping `lastTransitionTime` when its status did not change.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
    generation: Option<i64>,
) {
    let status = if status { "True" } else { "False" }.to_string();
    let now = Time(jiff::Timestamp::now());
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(existing) => {
            if existing.status != status {
                existing.last_transition_time = now;
            }
            existing.status = status;
            existing.reason = reason.to_string();
            existing.message = message.to_string();
            existing.observed_generation = generation;
        }
        None => conditions.push(Condition {
            type_: type_.to_string(),
            status,
            reason: reason.to_string(),
            message: message.to_string(),
            observed_generation: generation,
            last_transition_time: now,
        }),
    }
}

/// Writes the three conditions for `outcome`.
pub fn record_outcome(conditions: &mut Vec<Condition>, outcome: &Outcome, generation: Option<i64>) {
    match outcome {
        Outcome::Ready { reason, message } => {
            set_condition(conditions, READY, true, reason, message, generation);
            set_condition(conditions, RECONCILING, false, reason, "", generation);
            set_condition(conditions, STALLED, false, reason, "", generation);
        }
        Outcome::Progressing { reason, message } => {
            set_condition(conditions, READY, false, reason, message, generation);
            set_condition(conditions, RECONCILING, true, reason, message, generation);
            set_condition(conditions, STALLED, false, reason, "", generation);
        }
        Outcome::Stalled { reason, message } => {
            set_condition(conditions, READY, false, reason, message, generation);
            set_condition(conditions, RECONCILING, false, reason, "", generation);
            set_condition(conditions, STALLED, true, reason, message, generation);
        }
    }
}

/// True when writing `after` over `before` would change more than timestamps.
pub fn worth_writing<S: CommonStatus>(before: Option<&S>, after: &S) -> bool {
    match before {
        None => true,
        Some(before) => before.without_timestamps() != after.without_timestamps(),
    }
}

/// `message` as the operator records, publishes or logs it: every one of `values` concealed
/// ([`crate::api::concealment::conceal`]), then one line of at most 900 characters
/// ([`sanitize_message`]). A message longer than [`SCANNED_BYTES`] is withheld whole: looking
/// for a value costs in proportion to the text, and a message cut before it is looked at could
/// keep the start of a value whose end the cut took (concealing the values before it would
/// pull that start into the 900 characters kept).
pub fn scrubbed<S: AsRef<str>>(message: &str, values: &[S]) -> String {
    if message.len() > SCANNED_BYTES {
        return TOO_LONG.into();
    }
    let mut values: Vec<&str> = values.iter().map(AsRef::as_ref).collect();
    values.sort_unstable();
    values.dedup();
    sanitize_message(&crate::api::concealment::conceal(message, &values))
}

/// What [`scrubbed`] makes of `message` when the values to conceal in it are more than
/// [`crate::api::concealment::CONCEALED_BYTES`] (and were not kept).
pub fn scrubbed_past_bound(message: &str) -> String {
    match message.len() > SCANNED_BYTES {
        true => TOO_LONG.into(),
        false => crate::api::concealment::TOO_MANY_TO_CHECK.into(),
    }
}

/// The longest message [`scrubbed`] looks at.
pub const SCANNED_BYTES: usize = 64 * 1024;

/// What a message longer than [`SCANNED_BYTES`] reads as.
pub const TOO_LONG: &str =
    "<the API's message was withheld: it is too long to look for secret values in>";

/// Makes a message fit for a condition, an event or a log line: the value after any
/// secret-looking key hidden (an API error may echo a request field; the keys are those of
/// [`crate::api::secret_fields`]), one line, bounded length.
pub fn sanitize_message(message: &str) -> String {
    let one_line: String = message.split_whitespace().collect::<Vec<_>>().join(" ");
    let one_line = crate::api::secret_fields::redact_text(&one_line);
    if one_line.chars().count() > 900 {
        let mut cut: String = one_line.chars().take(900).collect();
        cut.push('…');
        cut
    } else {
        one_line
    }
}

/// A kind's status that embeds [`ManagedStatus`]: [`CommonStatus`] and [`IntentStatus`] come
/// with the block, and the kind says only what is its own.
pub trait EmbedsManagedStatus:
    Clone
    + Default
    + PartialEq
    + serde::Serialize
    + Send
    + Sync
    + std::fmt::Debug
    + std::ops::DerefMut<Target = ManagedStatus>
{
    /// A copy with the kind's own timestamps blanked (the block's are blanked with it); a copy
    /// for a kind that keeps none.
    fn without_own_timestamps(&self) -> Self {
        self.clone()
    }
    /// True while work of the kind's own whose outcome is not yet known is in flight (a
    /// rotation, a usage reset, a key being replaced): it must finish like a create.
    fn own_intent(&self) -> bool {
        false
    }
}

impl<S: EmbedsManagedStatus> CommonStatus for S {
    fn observed_generation_mut(&mut self) -> &mut Option<i64> {
        &mut self.observed_generation
    }
    fn observed_generation(&self) -> Option<i64> {
        self.observed_generation
    }
    fn conditions(&self) -> &[Condition] {
        &self.conditions
    }
    fn conditions_mut(&mut self) -> &mut Vec<Condition> {
        &mut self.conditions
    }
    fn without_timestamps(&self) -> Self {
        let mut copy = self.without_own_timestamps();
        *copy = ManagedStatus::without_timestamps(self);
        copy
    }
}

impl<S: EmbedsManagedStatus> IntentStatus for S {
    fn pending_create_mut(&mut self) -> &mut Option<String> {
        &mut self.pending_create
    }
    fn create_attempt_mut(&mut self) -> &mut Option<Box<crate::resources::common::CreateAttempt>> {
        &mut self.create_attempt
    }
    fn pending_create(&self) -> Option<&str> {
        self.pending_create.as_deref()
    }
    fn create_attempt(&self) -> Option<&crate::resources::common::CreateAttempt> {
        self.create_attempt.as_deref()
    }
    fn has_intent(&self) -> bool {
        self.pending_create.is_some() || self.own_intent()
    }
    fn create_settled_mut(&mut self) -> &mut Option<String> {
        &mut self.create_settled
    }
    fn create_settled(&self) -> Option<&str> {
        self.create_settled.as_deref()
    }
    fn installation(&self) -> Option<&str> {
        self.installation.as_deref()
    }
    fn installation_mut(&mut self) -> &mut Option<String> {
        &mut self.installation
    }
    fn claim_annotated_mut(&mut self) -> &mut bool {
        &mut self.claim_annotated.0
    }
}

/// Implements [`CommonStatus`] for a status that keeps `observed_generation` and `conditions`
/// fields of its own instead of the block (a kind that creates nothing remotely, whose CRD
/// never had the block's other fields) and no timestamp but its conditions'.
macro_rules! common_status {
    ($status:ty) => {
        impl $crate::controller::driver::status::CommonStatus for $status {
            fn observed_generation_mut(&mut self) -> &mut Option<i64> {
                &mut self.observed_generation
            }
            fn observed_generation(&self) -> Option<i64> {
                self.observed_generation
            }
            fn conditions(&self) -> &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition] {
                &self.conditions
            }
            fn conditions_mut(
                &mut self,
            ) -> &mut Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
                &mut self.conditions
            }
            fn without_timestamps(&self) -> Self {
                Self {
                    conditions: $crate::resources::managed_status::conditions_without_timestamps(
                        &self.conditions,
                    ),
                    ..self.clone()
                }
            }
        }
    };
}
pub(crate) use common_status;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_past_what_is_kept_is_concealed_whole_however_long_the_message() {
        // Helper 177's message: a pad, a long value, then a value with spaces where a cut at
        // 2,048 characters fell; concealing the long value pulled the other's start into the
        // 900 characters kept.
        let long: String = (0..1200).map(|n| (b'a' + (n % 26) as u8) as char).collect();
        let spaced = "correct horse battery staple purple monkey dishwasher".to_string();
        let body = format!("{{name:cpu-pp-671,config:{{custom_headers:{{a:{long},b:{spaced}}}}}}}");
        // Padded so that the second value starts 20 characters before the 2,048th.
        let at = "invalid config body: ".len() + body.find(&spaced).unwrap();
        let message = format!("{}invalid config body: {body}", "p".repeat(2028 - at));
        assert_eq!(message.find(&spaced), Some(2028));
        let shown = scrubbed(&message, &[long.clone(), spaced.clone()]);
        for word in [
            "correct",
            "horse",
            "battery",
            "staple",
            "purple",
            "dishwasher",
        ] {
            assert!(!shown.contains(word), "{word} shows: {shown}");
        }
        let too_long = "x ".repeat(SCANNED_BYTES);
        assert_eq!(scrubbed(&too_long, &[long]), TOO_LONG);
    }

    /// The condition `type_` of `conditions`.
    fn find<'a>(conditions: &'a [Condition], type_: &str) -> &'a Condition {
        conditions.iter().find(|c| c.type_ == type_).unwrap()
    }

    #[test]
    fn transition_time_moves_only_when_status_flips() {
        let mut conditions = Vec::new();
        let reconciled = Outcome::Ready {
            reason: "Reconciled".into(),
            message: "ok".into(),
        };
        record_outcome(&mut conditions, &reconciled, Some(1));
        let first = find(&conditions, READY).last_transition_time.clone();
        std::thread::sleep(std::time::Duration::from_millis(5));
        record_outcome(&mut conditions, &reconciled, Some(2));
        let ready = find(&conditions, READY);
        assert_eq!(ready.last_transition_time, first);
        assert_eq!(ready.observed_generation, Some(2));
        let refused = Outcome::Stalled {
            reason: "Validation".into(),
            message: "bad".into(),
        };
        record_outcome(&mut conditions, &refused, Some(3));
        let ready = find(&conditions, READY);
        assert_ne!(ready.last_transition_time, first);
        assert_eq!(ready.status, "False");
        let stalled = find(&conditions, STALLED);
        assert_eq!(
            (stalled.status.as_str(), stalled.message.as_str()),
            ("True", "bad")
        );
        assert_eq!(conditions.len(), 3);
    }

    #[test]
    fn intent_records_are_recognised() {
        use crate::resources::config::ConfigStatus;
        use crate::resources::deployment::DeploymentStatus;
        let settled = DeploymentStatus {
            id: Some("d1".into()),
            ..Default::default()
        };
        assert!(!settled.has_intent());
        let rotating = DeploymentStatus {
            rotation: crate::resources::rotation::RotationStatus {
                pending_rotation: Some("t".into()),
                ..Default::default()
            },
            ..settled.clone()
        };
        assert!(rotating.has_intent());
        let creating = ConfigStatus {
            managed: ManagedStatus {
                pending_create: Some("t".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        assert!(creating.has_intent());
        assert!(!ConfigStatus::default().has_intent());
    }

    #[test]
    fn messages_are_one_bounded_line() {
        assert_eq!(sanitize_message("a\n  b\tc"), "a b c");
        assert!(sanitize_message(&"x".repeat(5000)).chars().count() <= 901);
    }

    #[test]
    fn messages_never_carry_a_credential_value() {
        let message = r#"failed to update config pc-1: PUT /configs returned HTTP 400: {"vertex_service_account_json": "vx-secret", "custom_headers": {"x-api-key": "hv-secret"}} Authorization: Bearer tok-secret"#;
        let clean = sanitize_message(message);
        for value in ["vx-secret", "hv-secret", "tok-secret"] {
            assert!(!clean.contains(value), "{value} in {clean}");
        }
        assert!(clean.starts_with("failed to update config pc-1"));
    }
}
