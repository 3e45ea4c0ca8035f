//! `spec.promotion`: a change reaches this resource only once the resources it follows have
//! proven it. The rule is pure: the controller (from its watch caches) and `aigw plan` (from
//! the cluster) feed it what the sources' statuses say.
//!
//! The rule: a change carrying revision R (the `aigw.io/revision` annotation) is written only
//! once every source in `after` is Ready at its current generation, not Drifted, not paused,
//! and at revision R or one that contains R, and has been so for at least `soak`.
//! - A source *contains* R when it applied R and its own revision was not applied before R:
//!   it moved on from R (a revision never applied before R is newer), and is not a rollback
//!   to a revision older than R. The order is the source's `status.revisionOrder`, which
//!   counts each change of revision once (drift corrections and Secret changes do not push
//!   anything out of it): the 32 newest exactly, and the revisions older than those as a
//!   Bloom filter. A revision that may be in the filter counts as applied long ago, so a
//!   rollback is never taken for a newer revision; the price is that, rarely, a revision new
//!   to the source is taken for an old one and the follower waits for exactly R.
//! - A source has been proven since the latest of: the last time it wrote its document
//!   (`status.history[0].appliedAt`), the last time it became Ready, and the last time it
//!   stopped being Drifted. A new revision that changes the source's spec is written, so it
//!   restarts the soak; a revision that moves only its annotation leaves the same document
//!   running, and the soak goes on. Times are recorded to the second: the soak counts from
//!   the end of that second.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::KubeSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::common::{
    PAUSED_ANNOTATION, REVISION_ANNOTATION,
    condition::{DRIFTED, READY},
    find_condition,
};
use super::config::AppliedVersion;
use base64::Engine;

/// Annotation that lets exactly the named revision through the promotion gate at once (an
/// emergency fix): recorded in `status.history` as an override.
pub const PROMOTE_NOW_ANNOTATION: &str = "aigw.io/promote-now";

/// Condition type: whether the change this resource carries went through its promotion gate.
pub const PROMOTED: &str = "Promoted";
/// `Promoted=False`: every source is ready at the revision, the soak is running.
pub const SOAKING: &str = "Soaking";
/// `Promoted=False`: a source is missing, not Ready, Drifted, or at another revision.
pub const SOURCE_NOT_READY: &str = "SourceNotReady";
/// `Promoted=False` (and `Stalled`): `spec.promotion` needs the `aigw.io/revision` annotation.
pub const REVISION_MISSING: &str = "RevisionMissing";

/// The resources a change must have proven itself in first, and for how long.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct Promotion {
    /// The resources of the same kind this one follows, e.g. prod's Config after dev's. A
    /// change carrying revision R (the `aigw.io/revision` annotation) is written only once each
    /// of them has been Ready, not Drifted, and at revision R (or a later one that contains it,
    /// judged by its `status.history`) for at least `soak`. Until then this resource keeps its
    /// current remote object and reports `Promoted=False` (`Soaking` or `SourceNotReady`).
    /// Creating the first remote object is not gated: nothing uses it yet. Creating it again
    /// (deleted outside aigw) is: it would publish the held change.
    #[schemars(length(min = 1, max = 16))]
    pub after: Vec<PromotionSource>,
    /// How long each source must have been proven before the change is written, as a
    /// duration such as `20s`, `30m` or `24h`.
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"))]
    #[x_kube(validation = Rule::new("duration(self) <= duration('8760h')").message("spec.promotion.soak must be at most 8760h (a year)"))]
    pub soak: String,
}

/// One resource a promotion follows.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromotionSource {
    /// Its namespace; this resource's own when absent (and always absent for a cluster-scoped
    /// kind). Another namespace needs a grant: `spec.grants[].promoteFrom` on this resource's
    /// Connection. aigw only reads the source's status.
    #[schemars(length(min = 1, max = 63))]
    pub namespace: Option<String>,
    /// Its `metadata.name`.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

impl Promotion {
    /// `soak`, parsed.
    pub fn soak(&self) -> Result<Duration, String> {
        super::duration::parse(&self.soak).map_err(|e| format!("spec.promotion.soak {e}"))
    }

    /// The field of a source that names the resource `own_name` of namespace `own` itself (a
    /// resource cannot wait for its own proof), if any.
    pub fn names_itself(&self, own: Option<&str>, own_name: &str) -> Option<String> {
        self.sources(own)
            .find(|(_, namespace, name)| *namespace == own && *name == own_name)
            .map(|(field, ..)| field)
    }

    /// Each source's namespace (`own` when it names none) and name, with the field naming it.
    pub fn sources<'a>(
        &'a self,
        own: Option<&'a str>,
    ) -> impl Iterator<Item = (String, Option<&'a str>, &'a str)> + 'a {
        self.after.iter().enumerate().map(move |(n, source)| {
            let namespace = source.namespace.as_deref().or(own);
            (
                format!("spec.promotion.after[{n}]"),
                namespace,
                source.name.as_str(),
            )
        })
    }
}

/// The `aigw.io/revision` annotation of an object.
pub fn revision_of(meta: &kube::api::ObjectMeta) -> Option<&str> {
    annotation(meta, REVISION_ANNOTATION)
}

/// The revision `aigw.io/promote-now` lets through, if any.
pub fn promote_now(meta: &kube::api::ObjectMeta) -> Option<&str> {
    annotation(meta, PROMOTE_NOW_ANNOTATION)
}

fn annotation<'a>(meta: &'a kube::api::ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
        .filter(|v| !v.is_empty())
}

/// What a source's object shows, as read from a watch cache or the cluster.
#[derive(Debug, Clone, Copy)]
pub struct SourceState<'a> {
    pub meta: &'a kube::api::ObjectMeta,
    pub observed_generation: Option<i64>,
    pub conditions: &'a [Condition],
    /// `status.history`, newest first.
    pub history: &'a [AppliedVersion],
    /// `status.revisionOrder` (`None`: the source wrote no revision yet).
    pub order: Option<&'a RevisionOrder>,
}

/// How many revisions [`RevisionOrder::recent`] lists.
pub const RECENT_REVISIONS: usize = 32;
/// The size of [`RevisionOrder::older`] in bits, and how many bits each revision sets.
const OLDER_BITS: usize = 1024;
const OLDER_HASHES: usize = 4;

/// The order in which a resource applied its revisions (`aigw.io/revision`): what the
/// promotion gate of the resources that follow it reads to tell a revision that moved on from
/// R from a rollback to one older than R.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RevisionOrder {
    /// The revisions written, newest first, each listed again each time it became current
    /// again (a rollback lists the older revision anew); at most 32. A write at the current
    /// revision (a drift correction, a changed Secret value) adds nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recent: Vec<String>,
    /// The revisions that fell off `recent`, as a Bloom filter (base64 of 1024 bits, four
    /// SHA-256-derived bits per revision): one it does not hold was never applied before
    /// those in `recent`; one it holds may have been.
    pub older: Option<String>,
}

impl RevisionOrder {
    pub fn is_empty(&self) -> bool {
        self.recent.is_empty() && self.older.is_none()
    }

    /// Notes that `revision` was written; nothing when it is the current one already.
    pub fn record(&mut self, revision: &str) {
        if self.recent.first().map(String::as_str) == Some(revision) {
            return;
        }
        self.recent.insert(0, revision.to_string());
        while self.recent.len() > RECENT_REVISIONS {
            if let Some(gone) = self.recent.pop() {
                self.remember_older(&gone);
            }
        }
    }

    /// True when this source, now at revision `current`, contains `wanted`: the same
    /// revision, or `wanted` was applied and `current` was not applied before it.
    pub fn contains(&self, current: &str, wanted: &str) -> bool {
        if current == wanted {
            return true;
        }
        let Some(at) = self.recent.iter().position(|r| r == wanted) else {
            return false;
        };
        !self.recent[at + 1..].iter().any(|r| r == current) && !self.maybe_older(current)
    }

    fn bits(revision: &str) -> [usize; OLDER_HASHES] {
        let digest = ring::digest::digest(&ring::digest::SHA256, revision.as_bytes());
        let bytes = digest.as_ref();
        std::array::from_fn(|n| {
            usize::from(u16::from_be_bytes([bytes[2 * n], bytes[2 * n + 1]])) % OLDER_BITS
        })
    }

    fn filter(&self) -> Vec<u8> {
        self.older
            .as_deref()
            .and_then(|text| base64::engine::general_purpose::STANDARD.decode(text).ok())
            .filter(|bytes| bytes.len() == OLDER_BITS / 8)
            .unwrap_or_else(|| vec![0; OLDER_BITS / 8])
    }

    fn encode(bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    fn remember_older(&mut self, revision: &str) {
        let mut filter = self.filter();
        for bit in Self::bits(revision) {
            filter[bit / 8] |= 1 << (bit % 8);
        }
        self.older = Some(Self::encode(&filter));
    }

    fn maybe_older(&self, revision: &str) -> bool {
        if self.older.is_none() {
            return false;
        }
        let filter = self.filter();
        Self::bits(revision)
            .iter()
            .all(|bit| filter[bit / 8] & (1 << (bit % 8)) != 0)
    }
}

/// One source of a promotion: how it is named in messages (`Config aigw-dev/web`) and what it
/// shows (`None`: it does not exist, or is not where this reader looks).
#[derive(Debug, Clone)]
pub struct Source<'a> {
    pub name: String,
    pub state: Option<SourceState<'a>>,
}

/// What the gate says of a change carrying one revision.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Every source has proven it: write it.
    Open { message: String },
    /// Every source is ready at the revision; the soak ends at `until`.
    Soaking {
        until: jiff::Timestamp,
        message: String,
    },
    /// A source is missing or not ready at the revision; `message` names it.
    SourceNotReady { message: String },
}

impl Verdict {
    /// The condition reason it is reported under.
    pub fn reason(&self) -> &'static str {
        match self {
            Verdict::Open { .. } => "Promoted",
            Verdict::Soaking { .. } => SOAKING,
            Verdict::SourceNotReady { .. } => SOURCE_NOT_READY,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            Verdict::Open { message }
            | Verdict::Soaking { message, .. }
            | Verdict::SourceNotReady { message } => message,
        }
    }
}

/// The verdict on a change carrying `revision` that must soak `soak` in every one of
/// `sources`, at `now`.
pub fn judge(
    revision: &str,
    soak: Duration,
    sources: &[Source<'_>],
    now: jiff::Timestamp,
) -> Verdict {
    let mut latest: Option<(jiff::Timestamp, &str)> = None;
    for source in sources {
        let since = match source.state.map(|state| proven_since(&state, revision)) {
            None => Err("does not exist (or is not in a namespace this operator watches)".into()),
            Some(since) => since,
        };
        match since {
            Err(why) => {
                return Verdict::SourceNotReady {
                    message: format!("revision {revision} waits for {}, which {why}", source.name),
                };
            }
            Ok(since) if latest.is_none_or(|(t, _)| since > t) => {
                latest = Some((since, &source.name));
            }
            Ok(_) => {}
        }
    }
    let Some((since, name)) = latest else {
        return Verdict::Open {
            message: format!("revision {revision} follows no resource"),
        };
    };
    // Recorded times are whole seconds: count from the end of that second.
    let until = since
        .checked_add(soak + Duration::from_secs(1))
        .unwrap_or(jiff::Timestamp::MAX);
    let soak_text = humantime::format_duration(soak);
    if now < until {
        return Verdict::Soaking {
            until,
            message: format!(
                "revision {revision} becomes eligible at {}: {name} has been proven at it since {} and must stay so for {soak_text} (spec.promotion.soak)",
                until.round(jiff::Unit::Second).unwrap_or(until),
                since
            ),
        };
    }
    Verdict::Open {
        message: format!(
            "revision {revision} was written after {name} had been proven at it since {since} (soak {soak_text})"
        ),
    }
}

/// Since when `source` has been proven at `revision`; else why it is not.
pub fn proven_since(source: &SourceState<'_>, revision: &str) -> Result<jiff::Timestamp, String> {
    let meta = source.meta;
    if meta.deletion_timestamp.is_some() {
        return Err("is being deleted".into());
    }
    if annotation(meta, PAUSED_ANNOTATION) == Some("true") {
        return Err("is paused (aigw.io/paused): nothing checks it".into());
    }
    let generation = meta.generation;
    let ready = find_condition(source.conditions, READY);
    let ready_now = ready.filter(|c| {
        c.status == "True"
            && c.observed_generation == generation
            && source.observed_generation == generation
    });
    let Some(ready) = ready_now else {
        return Err(match ready {
            Some(c) if c.status != "True" => format!("is not Ready ({}: {})", c.reason, c.message),
            _ => format!(
                "has not applied its generation {} yet",
                generation.unwrap_or_default()
            ),
        });
    };
    let drifted = find_condition(source.conditions, DRIFTED);
    if drifted.is_some_and(|c| c.status == "True") {
        return Err("is Drifted: its remote object differs from its spec".into());
    }
    let Some(current) = revision_of(meta) else {
        return Err(format!("carries no {REVISION_ANNOTATION} annotation"));
    };
    let contained = source
        .order
        .is_some_and(|order| order.contains(current, revision));
    if current != revision && !contained {
        return Err(format!(
            "is at revision {current}, which does not contain {revision}"
        ));
    }
    let applied = source
        .history
        .first()
        .and_then(|v| v.applied_at.parse::<jiff::Timestamp>().ok());
    let since = [
        Some(ready.last_transition_time.0),
        drifted.map(|c| c.last_transition_time.0),
        applied,
    ]
    .into_iter()
    .flatten()
    .max()
    .unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    Ok(since)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn applied(revision: &str, at: &str) -> AppliedVersion {
        AppliedVersion {
            revision: Some(revision.into()),
            applied_at: at.into(),
            ..Default::default()
        }
    }

    fn at(text: &str) -> jiff::Timestamp {
        text.parse().unwrap()
    }

    fn condition(type_: &str, status: &str, since: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: "Reconciled".into(),
            message: "in sync".into(),
            observed_generation: Some(2),
            last_transition_time: Time(at(since)),
        }
    }

    fn meta(revision: &str) -> kube::api::ObjectMeta {
        kube::api::ObjectMeta {
            generation: Some(2),
            annotations: Some([(REVISION_ANNOTATION.to_string(), revision.to_string())].into()),
            ..Default::default()
        }
    }

    fn order(oldest_first: &[&str]) -> RevisionOrder {
        let mut order = RevisionOrder::default();
        for revision in oldest_first {
            order.record(revision);
        }
        order
    }

    #[test]
    fn a_revision_is_contained_by_itself_and_by_what_came_after_it_never_by_a_rollback() {
        let order = order(&["r1", "r2", "r3"]);
        assert!(order.contains("r2", "r2"));
        assert!(order.contains("r3", "r2"));
        assert!(
            order.contains("r4", "r2"),
            "an annotation moved on after r3"
        );
        assert!(!order.contains("r1", "r2"), "r1 came before r2");
        assert!(!order.contains("r3", "r9"), "r9 was never applied");
        let rolled_back = self::order(&["r1", "r2", "r1"]);
        assert!(!rolled_back.contains("r1", "r2"), "a rollback to r1");
    }

    /// Found by an attack: the order was read from `status.history`, which keeps ten writes of
    /// any kind, so ten drift corrections at r2 pushed r1 out and a rollback to r1 read as
    /// containing r2.
    #[test]
    fn writes_at_the_same_revision_never_push_a_rollback_out_of_sight() {
        let mut order = order(&["r1", "r2"]);
        for _ in 0..100 {
            order.record("r2");
        }
        order.record("r1");
        assert_eq!(order.recent, ["r1", "r2", "r1"]);
        assert!(!order.contains("r1", "r2"));
    }

    #[test]
    fn a_rollback_to_a_revision_older_than_the_recent_ones_is_still_seen() {
        let mut revisions: Vec<String> = (0..200).map(|n| format!("c{n:03}")).collect();
        let mut order = RevisionOrder::default();
        for revision in &revisions {
            order.record(revision);
        }
        assert_eq!(order.recent.len(), RECENT_REVISIONS);
        assert_eq!(order.recent[0], "c199");
        // Every revision that fell off is still known as older: a rollback to any of them
        // never contains a recent one.
        for old in &revisions[..200 - RECENT_REVISIONS] {
            assert!(!order.contains(old, "c190"), "{old}");
        }
        // Moving on still counts for almost every new revision (a false "older" only makes
        // the follower wait for exactly its revision).
        revisions = (0..1000).map(|n| format!("new{n}")).collect();
        let moved_on = revisions
            .iter()
            .filter(|r| order.contains(r, "c190"))
            .count();
        assert!(moved_on > 900, "{moved_on} of 1000");
        let written = serde_json::to_value(&order).unwrap();
        assert_eq!(
            serde_json::from_value::<RevisionOrder>(written).unwrap(),
            order
        );
    }

    #[test]
    fn the_gate_opens_a_soak_after_the_source_is_proven_at_the_revision() {
        let history = [
            applied("r2", "2030-01-01T10:00:05Z"),
            applied("r1", "2030-01-01T09:00:00Z"),
        ];
        let conditions = [condition(READY, "True", "2030-01-01T09:00:00Z")];
        let meta = meta("r2");
        let state = SourceState {
            meta: &meta,
            observed_generation: Some(2),
            conditions: &conditions,
            history: &history,
            order: None,
        };
        let sources = [Source {
            name: "Config dev/web".into(),
            state: Some(state),
        }];
        let soak = Duration::from_secs(20);
        let soaking = judge("r2", soak, &sources, at("2030-01-01T10:00:20Z"));
        assert_eq!(soaking.reason(), SOAKING);
        let Verdict::Soaking { until, message } = &soaking else {
            panic!("{soaking:?}")
        };
        assert_eq!(
            *until,
            at("2030-01-01T10:00:26Z"),
            "applied at :05, 20 s, whole seconds"
        );
        assert!(message.contains("2030-01-01T10:00:26Z"), "{message}");
        assert!(message.contains("Config dev/web"), "{message}");
        assert_eq!(
            judge("r2", soak, &sources, at("2030-01-01T10:00:26Z")).reason(),
            "Promoted"
        );
        // The source is not at r1 any more, and never contained r3.
        let older = judge("r3", soak, &sources, at("2030-01-02T00:00:00Z"));
        assert_eq!(older.reason(), SOURCE_NOT_READY);
        assert!(
            older
                .message()
                .contains("is at revision r2, which does not contain r3")
        );
    }

    #[test]
    fn a_source_that_is_not_ready_drifted_missing_or_paused_holds_the_gate() {
        let history = [applied("r2", "2030-01-01T10:00:00Z")];
        let mut meta = meta("r2");
        let stalled = [Condition {
            status: "False".into(),
            reason: "InvalidSpec".into(),
            message: "invalid spec: name".into(),
            ..condition(READY, "False", "2030-01-01T10:00:00Z")
        }];
        let state = |conditions| SourceState {
            meta: &meta,
            observed_generation: Some(2),
            conditions,
            history: &history,
            order: None,
        };
        let why = proven_since(&state(&stalled), "r2").unwrap_err();
        assert!(why.contains("not Ready (InvalidSpec"), "{why}");
        let drifted = [
            condition(READY, "True", "2030-01-01T10:00:00Z"),
            condition(DRIFTED, "True", "2030-01-01T10:00:00Z"),
        ];
        assert!(
            proven_since(&state(&drifted), "r2")
                .unwrap_err()
                .contains("Drifted")
        );
        // Drift gone: proven from when it went.
        let settled = [
            condition(READY, "True", "2030-01-01T10:00:00Z"),
            condition(DRIFTED, "False", "2030-01-01T11:00:00Z"),
        ];
        assert_eq!(
            proven_since(&state(&settled), "r2"),
            Ok(at("2030-01-01T11:00:00Z"))
        );
        let old_generation = [Condition {
            observed_generation: Some(1),
            ..condition(READY, "True", "2030-01-01T10:00:00Z")
        }];
        assert!(
            proven_since(&state(&old_generation), "r2")
                .unwrap_err()
                .contains("has not applied its generation 2")
        );
        let missing = judge(
            "r2",
            Duration::ZERO,
            &[Source {
                name: "Config dev/web".into(),
                state: None,
            }],
            at("2030-01-01T10:00:00Z"),
        );
        assert!(
            missing
                .message()
                .contains("Config dev/web, which does not exist"),
            "{missing:?}"
        );
        meta.annotations
            .as_mut()
            .unwrap()
            .insert(PAUSED_ANNOTATION.into(), "true".into());
        let paused = SourceState {
            meta: &meta,
            observed_generation: Some(2),
            conditions: &settled,
            history: &history,
            order: None,
        };
        assert!(proven_since(&paused, "r2").unwrap_err().contains("paused"));
    }

    #[test]
    fn the_latest_source_decides_when_the_soak_ends() {
        let soak = Duration::from_secs(60);
        let early = [applied("r2", "2030-01-01T10:00:00Z")];
        let late = [applied("r2", "2030-01-01T10:30:00Z")];
        let conditions = [condition(READY, "True", "2030-01-01T09:00:00Z")];
        let meta = meta("r2");
        let source = |name: &str, history| Source {
            name: name.into(),
            state: Some(SourceState {
                meta: &meta,
                observed_generation: Some(2),
                conditions: &conditions,
                history,
                order: None,
            }),
        };
        let sources = [
            source("Config dev/a", &early),
            source("Config stage/b", &late),
        ];
        let verdict = judge("r2", soak, &sources, at("2030-01-01T10:30:30Z"));
        assert!(verdict.message().contains("Config stage/b"), "{verdict:?}");
        assert_eq!(
            judge("r2", soak, &sources, at("2030-01-01T10:31:01Z")).reason(),
            "Promoted"
        );
    }
}
