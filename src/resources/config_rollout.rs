//! The `ConfigRollout` kind: a canary of a Config by API-key cohort. It moves a growing share of
//! the ApiKeys it selects from a stable Config to a candidate Config, step by step, judges each
//! step by the gateway's own telemetry for both cohorts, and goes on, completes or rolls back.
//!
//! The types and the pure parts of the loop (which keys a step moves, what an analysis decides)
//! live here; the loop itself is `crate::controller::kinds::config_rollout`.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::common::{ConnectionRef, conditions_schema};

/// The annotation the rollout writes on each ApiKey it moves: the Config resource (of the key's
/// namespace) the key's requests use by default instead of its `spec.defaults`. The ApiKey's own
/// reconcile applies it, through the gate, like any change of its defaults.
pub const CONFIG_OVERRIDE_ANNOTATION: &str = "aigw.io/rollout-config";
/// The annotation naming the ConfigRollout that moved an ApiKey: another rollout never takes a
/// key that carries it, and a rollback returns every key that names its rollout.
pub const ROLLOUT_ANNOTATION: &str = "aigw.io/rollout";
/// The annotation a person (or `aigw rollout promote|abort`) sets on a ConfigRollout:
/// `promote` completes it now, every selected key on the candidate; `abort` rolls it back.
pub const ACTION_ANNOTATION: &str = "aigw.io/rollout-action";
/// The most decisions `status.decisions` keeps (the oldest go first).
pub const MAX_DECISIONS: usize = 20;

/// A canary of a Config by API-key cohort. Each step moves a share of the ApiKeys that
/// `apiKeySelector` selects from `stableConfigRef` to `candidateConfigRef` (through each
/// ApiKey's own reconcile), waits `pause`, then compares the candidate cohort's error rate and
/// p90 latency with the thresholds of `analysis` (and with the stable cohort's) over the
/// window. A failing step returns every moved key to the stable Config (`Ready=False`, reason
/// `RolledBack`); the last step (weight 100) passing completes the rollout. aigw never copies
/// the candidate into the stable Config: promote it in Git, then delete the rollout.
// kube's printcolumn(...) lists repeat `type_ = "string"`, which this lint misreads.
#[allow(clippy::duplicated_attributes)]
#[skip_serializing_none]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "aigw.io",
    doc = "A canary of a Config by API-key cohort, judged by the gateway's telemetry and rolled back by aigw.",
    version = "v1alpha1",
    kind = "ConfigRollout",
    plural = "configrollouts",
    shortname = "aigwrollout",
    category = "aigw",
    namespaced,
    status = "ConfigRolloutStatus",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Step", type_ = "integer", json_path = ".status.currentStep"),
    printcolumn(name = "Weight", type_ = "integer", json_path = ".status.weight")
)]
#[serde(rename_all = "camelCase")]
// On the spec rather than on `analysis`, which then carries no rule: the health test's
// generation bump (hack/health) changes a field inside it.
// An absolute threshold: the last step moves every key (steps end at 100), which leaves no
// stable cohort for a relative threshold to compare with, so only an absolute one can judge it.
#[x_kube(validation = Rule::new("has(self.analysis.maxErrorRate) || has(self.analysis.maxP90LatencyMs)").field_path(".analysis").reason(Reason::FieldValueRequired).message("spec.analysis needs an absolute threshold, maxErrorRate or maxP90LatencyMs: the last step moves every key, leaving no stable cohort for maxErrorRateOverStable or maxP90LatencyRatio to compare with"))]
// A step is judged on the requests of its window, `analysis.window` or else the step's pause: at
// least 1s ([`SHORTEST_WINDOW`]).
#[x_kube(validation = Rule::new("has(self.analysis.window) || self.steps.all(s, duration(s.pause) >= duration('1s'))").field_path(".steps").reason(Reason::FieldValueInvalid).message(SHORT_PAUSE))]
#[x_kube(validation = Rule::new("self.stableConfigRef.name != self.candidateConfigRef.name").field_path(".candidateConfigRef.name").reason(Reason::FieldValueInvalid).message("spec.candidateConfigRef must name another Config than spec.stableConfigRef"))]
pub struct ConfigRolloutSpec {
    /// The Config the selected keys use now, and return to on a rollback. A Config of this
    /// rollout's namespace. Immutable: create a new ConfigRollout to canary against another.
    #[x_kube(validation = Rule::new("self == oldSelf").message("spec.stableConfigRef is immutable: create a new ConfigRollout to canary another Config"))]
    pub stable_config_ref: LocalConfigRef,

    /// The Config under test. A Config of this rollout's namespace. Immutable: the keys it
    /// moved were judged on this Config, so another one needs a new ConfigRollout.
    #[x_kube(validation = Rule::new("self == oldSelf").message("spec.candidateConfigRef is immutable: create a new ConfigRollout to canary another Config"))]
    pub candidate_config_ref: LocalConfigRef,

    /// The ApiKeys in play: a label selector over the ApiKey resources of this namespace. It
    /// must not be empty (an empty selector would take every key of the namespace); at least
    /// one key must match for the rollout to start.
    #[x_kube(validation = Rule::new("(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)").message("spec.apiKeySelector must not be empty: name the ApiKeys in play with matchLabels or matchExpressions"))]
    #[x_kube(validation = super::rules::label_selector("spec.apiKeySelector"))]
    pub api_key_selector: LabelSelector,

    /// The steps, in order: each moves `weight` percent of the selected keys (rounded up, at
    /// least one) to the candidate and waits `pause` before the analysis. Weights only grow,
    /// and the last is 100.
    #[schemars(length(min = 1, max = 10))]
    #[x_kube(validation = Rule::new("self.map(s, s.weight).isSorted() && self.all(s, self.exists_one(t, t.weight == s.weight))").message("spec.steps: weights must only grow, each step above the one before"))]
    #[x_kube(validation = Rule::new("self[size(self) - 1].weight == 100").message("spec.steps: the last step's weight must be 100"))]
    // On the list, not on each step's `pause`: the items of an atomic list are not matched with
    // the stored ones, so a rule on an item would refuse every write (status and finalizer ones
    // too) of a rollout stored with a longer pause before the rule; on the list it ratchets
    // while the steps are unchanged.
    #[x_kube(validation = Rule::new("self.all(s, duration(s.pause) <= duration('8760h'))").message("spec.steps[].pause must be at most 8760h (a year)"))]
    pub steps: Vec<RolloutStep>,

    /// How each step is judged.
    pub analysis: Analysis,

    /// The Connection whose telemetry is read; defaults to `default`.
    pub connection_ref: Option<ConnectionRef>,
}

/// A Config resource of the rollout's namespace.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalConfigRef {
    /// Its `metadata.name`.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Refused unless it is this rollout's own namespace: a rollout moves keys of its namespace
    /// onto a Config of its namespace only.
    pub namespace: Option<String>,
}

/// One step of a rollout.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStep {
    /// The percentage of the selected keys on the candidate during this step, 1 to 100.
    #[schemars(range(min = 1, max = 100))]
    pub weight: u32,
    /// How long to wait, once the step's keys are on the candidate, before the analysis, as a
    /// duration such as `30s`, `10m` or `1h`.
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"))]
    pub pause: String,
}

/// What a step must show to go on. At least one threshold is required.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct Analysis {
    /// The workspace slug (not its UUID) the keys' requests are logged under: telemetry is
    /// read per workspace.
    #[schemars(length(min = 1, max = 253))]
    pub workspace_slug: String,
    /// The numeric TSG id telemetry is read with; by default the one the Connection names
    /// (its `x-tsg-id` header or `tsg_id:` OAuth2 scope).
    #[schemars(regex(pattern = r"^[0-9]+$"))]
    pub organisation_id: Option<String>,
    /// The span of telemetry a step is judged on, ending at the analysis and never starting
    /// before the step's keys moved, e.g. `5m`; at least `1s`. Defaults to the step's pause
    /// (which must then be at least `1s`).
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"))]
    #[x_kube(validation = Rule::new("duration(self) <= duration('8760h')").message("spec.analysis.window must be at most 8760h (a year)"))]
    #[x_kube(validation = Rule::new("duration(self) >= duration('1s')").message(SHORT_WINDOW))]
    pub window: Option<String>,
    /// The fewest candidate requests a window must hold to be judged (4xx other than 429 not
    /// counted); fewer, and the analysis waits for more traffic (up to `maxWait`). With a
    /// relative threshold, the stable cohort must hold as many (while it has keys). Default 20.
    #[schemars(range(min = 1))]
    pub min_requests: Option<u64>,
    /// How long past its pause a step may wait for `minRequests`, or for the telemetry to
    /// answer; then the rollout rolls back, the decision saying which (with the API's message
    /// for a telemetry error). Absent: it waits as long as it takes.
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"))]
    #[x_kube(validation = Rule::new("duration(self) <= duration('8760h')").message("spec.analysis.maxWait must be at most 8760h (a year)"))]
    pub max_wait: Option<String>,
    /// The highest error rate of the candidate cohort, from 0 to 1 (e.g. `0.05`): requests
    /// answered 5xx or 429, of those answered anything but another 4xx (a caller's own
    /// mistake, which the config neither causes nor fixes, is not judged).
    #[schemars(range(min = 0.0, max = 1.0))]
    pub max_error_rate: Option<f64>,
    /// The highest p90 latency of the candidate cohort, in milliseconds.
    #[schemars(range(min = 0.0))]
    pub max_p90_latency_ms: Option<f64>,
    /// The most the candidate's error rate may exceed the stable cohort's, from 0 to 1 (e.g.
    /// `0.02`: two points). The stable cohort must hold `minRequests` too (the analysis waits
    /// for them); at the 100 % step it has no key and only the absolute thresholds judge. The
    /// stable keys' traffic is the baseline: whoever sends requests with them moves it, so pair
    /// a relative threshold with an absolute one.
    #[schemars(range(min = 0.0, max = 1.0))]
    pub max_error_rate_over_stable: Option<f64>,
    /// The highest ratio of the candidate's p90 latency to the stable cohort's (e.g. `1.5`).
    /// Needs `minRequests` on the stable cohort, as `maxErrorRateOverStable` does.
    #[schemars(range(min = 1.0))]
    pub max_p90_latency_ratio: Option<f64>,
}

/// `analysis.minRequests` when the spec gives none.
pub const DEFAULT_MIN_REQUESTS: u64 = 20;

/// Where a rollout stands.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, schemars::JsonSchema,
)]
pub enum Phase {
    /// Moving keys, pausing or analysing.
    #[default]
    Progressing,
    /// The last step passed (or `promote` was asked): every selected key is on the candidate.
    Completed,
    /// An analysis failed (or the candidate went): every moved key is back on the stable
    /// Config.
    RolledBack,
    /// `abort` was asked: every moved key is back on the stable Config.
    Aborted,
}

impl Phase {
    /// Completed, rolled back or aborted: the rollout moves no key any more (but keeps them
    /// where its outcome put them).
    pub fn is_final(self) -> bool {
        self != Phase::Progressing
    }
}

/// What aigw knows of the rollout. Written with a precondition (its resourceVersion) before
/// each key is moved, so a resumed rollout moves no key twice and leaves none behind.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigRolloutStatus {
    /// The `metadata.generation` this status describes.
    pub observed_generation: Option<i64>,
    /// `Ready` (True once Completed; False with reason `RolledBack` or `Aborted`),
    /// `Reconciling` and `Stalled`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
    /// Progressing, Completed, RolledBack or Aborted.
    #[serde(default)]
    pub phase: Phase,
    /// The index of the step in progress (0 for the first).
    pub current_step: Option<u32>,
    /// The weight of the step in progress, in percent.
    pub weight: Option<u32>,
    /// When every key of the step in progress was on the candidate (the pause runs from here);
    /// absent while its keys are moving.
    pub step_started_at: Option<String>,
    /// The ApiKeys (names, sorted) moved to the candidate, recorded before they are moved.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moved_keys: Vec<String>,
    /// The remote config (slug) of the stable Config when the rollout started.
    pub stable_config_id: Option<String>,
    /// The remote config (slug) of the candidate Config when the rollout started.
    pub candidate_config_id: Option<String>,
    /// The candidate Config's `versionId` the step in progress is judged on, recorded when its
    /// pause starts. A new version (the candidate edited mid-step) starts the step's pause and
    /// analysis again: a step is never judged on a document its keys did not run.
    pub candidate_version_id: Option<String>,
    /// The figures of the last analysis (or the last wait for traffic).
    pub analysis: Option<AnalysisRecord>,
    /// When the telemetry first failed to be read for the step in progress: cleared by a read
    /// that succeeds and when a step (re)starts, kept by the rollback it caused. The step rolls
    /// back only once it has failed for `analysis.maxWait`.
    pub telemetry_failing_since: Option<String>,
    /// The installation (its `--installation-id`) that runs this rollout, recorded before it
    /// moves any key. Only the status subresource holds it, which a tenant's `edit` role cannot
    /// write: an `aigw.io/installation` annotation rewritten later stalls the rollout
    /// (`ClaimChanged`) instead of handing it, and its keys, to another installation.
    pub installation: Option<String>,
    /// What the rollout decided, step by step (the last 20).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<DecisionRecord>,
}

impl ConfigRolloutStatus {
    /// The step in progress starts (again): its pause once its keys are on the candidate, and
    /// its wait for the telemetry from its own first failure.
    pub fn restart_step(&mut self) {
        self.step_started_at = None;
        self.telemetry_failing_since = None;
    }
}

/// One cohort's figures over a window.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CohortRecord {
    /// How many keys the cohort has.
    pub keys: u32,
    /// Requests in the window.
    pub requests: u64,
    /// Requests answered 5xx.
    pub server_errors: u64,
    /// Requests counted as failed: 5xx and 429.
    #[serde(default)]
    pub errors: u64,
    /// Requests answered 4xx other than 429 (the caller's own mistakes): not judged, neither
    /// in `minRequests` nor in the error rate.
    #[serde(default)]
    pub client_errors: u64,
    /// `errors / (requests - clientErrors)`; absent when no request is judged.
    pub error_rate: Option<f64>,
    /// p90 latency in milliseconds; absent for an empty cohort.
    pub p90_latency_ms: Option<f64>,
}

impl CohortRecord {
    /// The requests an analysis judges: all but the 4xx other than 429.
    pub fn judged(&self) -> u64 {
        self.requests.saturating_sub(self.client_errors)
    }
}

/// An analysis: the window and both cohorts' figures.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnalysisRecord {
    /// The step judged.
    pub step: u32,
    /// Window start (RFC 3339).
    pub from: String,
    /// Window end (RFC 3339).
    pub to: String,
    pub stable: CohortRecord,
    pub candidate: CohortRecord,
}

/// What the rollout decided at one point.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DecisionRecord {
    /// When (RFC 3339).
    pub at: String,
    /// The step it was made at.
    pub step: u32,
    /// `Proceed`, `Complete`, `RollBack`, `Promote` or `Abort`.
    pub decision: Decision,
    /// Why, with the figures that decided it.
    pub message: String,
}

/// A decision of the loop.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub enum Decision {
    /// The step passed; the next one starts.
    Proceed,
    /// The last step passed.
    Complete,
    /// The step failed (or the candidate went): every moved key returns.
    RollBack,
    /// `promote` was asked.
    Promote,
    /// `abort` was asked.
    Abort,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Proceed => "Proceed",
            Decision::Complete => "Complete",
            Decision::RollBack => "RollBack",
            Decision::Promote => "Promote",
            Decision::Abort => "Abort",
        }
    }
}

/// What `aigw.io/rollout-action` asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Promote,
    Abort,
}

impl ConfigRollout {
    /// The action its `aigw.io/rollout-action` annotation asks, if any: `Err` for another value.
    pub fn action(&self) -> Result<Option<Action>, String> {
        let asked = self
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ACTION_ANNOTATION));
        match asked.map(|a| a.trim()) {
            None | Some("") => Ok(None),
            Some("promote") => Ok(Some(Action::Promote)),
            Some("abort") => Ok(Some(Action::Abort)),
            Some(other) => Err(format!(
                "annotation {ACTION_ANNOTATION} is {other:?}: it takes promote or abort"
            )),
        }
    }
}

impl ConfigRolloutSpec {
    /// Refuses what admission cannot see: a Config of another namespace, and durations that do
    /// not parse. `namespace` is the rollout's own.
    pub fn check(&self, namespace: &str) -> Result<(), String> {
        for (field, reference) in [
            ("spec.stableConfigRef", &self.stable_config_ref),
            ("spec.candidateConfigRef", &self.candidate_config_ref),
        ] {
            if let Some(other) = reference.namespace.as_deref()
                && other != namespace
            {
                return Err(format!(
                    "{field}.namespace is {other}: a rollout moves keys of its namespace ({namespace}) onto a Config of its own namespace only"
                ));
            }
        }
        for (n, step) in self.steps.iter().enumerate() {
            parse(&format!("spec.steps[{n}].pause"), &step.pause)?;
        }
        check_weights(&self.steps)?;
        for n in 0..self.steps.len() {
            if self.window(n)? < SHORTEST_WINDOW {
                return Err(match self.analysis.window {
                    Some(_) => SHORT_WINDOW.into(),
                    None => SHORT_PAUSE.into(),
                });
            }
        }
        self.max_wait()?;
        Ok(())
    }

    /// The pause of step `n`.
    pub fn pause(&self, n: usize) -> Result<Duration, String> {
        let step = self
            .steps
            .get(n)
            .ok_or_else(|| format!("spec.steps has no step {n}"))?;
        parse(&format!("spec.steps[{n}].pause"), &step.pause)
    }

    /// The analysis window of step `n`: `analysis.window`, else the step's pause.
    pub fn window(&self, n: usize) -> Result<Duration, String> {
        match &self.analysis.window {
            Some(window) => parse("spec.analysis.window", window),
            None => self.pause(n),
        }
    }

    /// `analysis.maxWait`, if set.
    pub fn max_wait(&self) -> Result<Option<Duration>, String> {
        self.analysis
            .max_wait
            .as_deref()
            .map(|text| parse("spec.analysis.maxWait", text))
            .transpose()
    }

    pub fn min_requests(&self) -> u64 {
        self.analysis.min_requests.unwrap_or(DEFAULT_MIN_REQUESTS)
    }
}

fn parse(field: &str, text: &str) -> Result<Duration, String> {
    let past_a_year = || format!("{field} must be at most 8760h (a year)");
    match super::duration::parse(text) {
        Ok(duration) if duration <= LONGEST => Ok(duration),
        Ok(_) => Err(past_a_year()),
        Err(e) if e.too_long() => Err(past_a_year()),
        Err(e) => Err(format!("{field} {e}")),
    }
}

/// The shortest window a step is judged on, a chosen minimum: a window of 0s, or under a
/// millisecond (telemetry is read by whole milliseconds), holds no request, and one under a second
/// too few to judge, so the step would only wait for traffic until `maxWait` rolled it back
/// (admission and the reconcile say the same).
const SHORTEST_WINDOW: Duration = Duration::from_secs(1);
const SHORT_WINDOW: &str =
    "spec.analysis.window must be at least 1s: a step is judged on the requests of its window";
/// A pause is its step's window when `analysis.window` is not set.
const SHORT_PAUSE: &str = "spec.steps[].pause must be at least 1s unless spec.analysis.window is set: a step is judged on the requests of its window, by default its pause";

/// The longest pause, window or wait a rollout takes, as the CRD's rules say: a year. A longer
/// one (written before the rule, or sent around it) is refused as the spec, never computed with.
const LONGEST: Duration = Duration::from_secs(8760 * 3600);

/// The same rules as the CRD's: weights 1 to 100, strictly growing, the last 100.
pub fn check_weights(steps: &[RolloutStep]) -> Result<(), String> {
    let Some(last) = steps.last() else {
        return Err("spec.steps needs at least one step".into());
    };
    for (n, step) in steps.iter().enumerate() {
        if !(1..=100).contains(&step.weight) {
            return Err(format!("spec.steps[{n}].weight must be from 1 to 100"));
        }
        if n > 0 && step.weight <= steps[n - 1].weight {
            return Err(format!(
                "spec.steps[{n}].weight: weights must only grow, each step above the one before"
            ));
        }
    }
    if last.weight != 100 {
        return Err("spec.steps: the last step's weight must be 100".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(weights: &[u32]) -> Vec<RolloutStep> {
        weights
            .iter()
            .map(|w| RolloutStep {
                weight: *w,
                pause: "1s".into(),
            })
            .collect()
    }

    #[test]
    fn weights_only_grow_and_end_at_100() {
        assert!(check_weights(&steps(&[10, 50, 100])).is_ok());
        assert!(check_weights(&steps(&[100])).is_ok());
        assert!(check_weights(&steps(&[50, 10, 100])).is_err());
        assert!(check_weights(&steps(&[10, 10, 100])).is_err());
        assert!(check_weights(&steps(&[10, 50])).is_err());
        assert!(check_weights(&steps(&[0, 100])).is_err());
        assert!(check_weights(&[]).is_err());
    }

    /// A pause, window or wait past a year is the spec's error, never a time computed with (a
    /// window of 10^9 hours reached before the earliest time there is).
    #[test]
    fn durations_past_a_year_are_refused() {
        assert_eq!(parse("spec.analysis.window", "8760h"), Ok(LONGEST));
        assert_eq!(
            parse("spec.analysis.window", "1000000000h"),
            Err("spec.analysis.window must be at most 8760h (a year)".into())
        );
        assert!(parse("spec.steps[0].pause", "8760h1s").is_err());
        assert!(parse("spec.analysis.maxWait", "soon").is_err());
    }

    /// A window under 1s (`analysis.window`, or a pause standing for it) could only wait.
    #[test]
    fn windows_under_a_second_are_refused() {
        let spec = |pause: &str, window: Option<&str>| {
            let mut spec: ConfigRolloutSpec = serde_json::from_value(serde_json::json!({
                "stableConfigRef": {"name": "stable"}, "candidateConfigRef": {"name": "canary"},
                "apiKeySelector": {"matchLabels": {"a": "b"}},
                "steps": [{"weight": 50, "pause": "1m"}, {"weight": 100, "pause": pause}],
                "analysis": {"workspaceSlug": "ws", "maxErrorRate": 0.1},
            }))
            .unwrap();
            spec.analysis.window = window.map(str::to_string);
            spec
        };
        assert_eq!(spec("1s", None).check("ns"), Ok(()));
        // What the apiserver's duration() takes, the reconcile takes (humantime refused it).
        assert_eq!(spec("1.0001h", Some("0.1234567891s1m")).check("ns"), Ok(()));
        assert_eq!(spec("0s", Some("5m")).check("ns"), Ok(()));
        assert_eq!(spec("0s", None).check("ns"), Err(SHORT_PAUSE.into()));
        assert_eq!(spec("500ms", None).check("ns"), Err(SHORT_PAUSE.into()));
        assert_eq!(spec("1m", Some("0m")).check("ns"), Err(SHORT_WINDOW.into()));
        assert_eq!(
            spec("1m", Some("1us")).check("ns"),
            Err(SHORT_WINDOW.into())
        );
    }
}
