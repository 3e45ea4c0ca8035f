//! The pure parts of a ConfigRollout's loop: which keys a step puts on the candidate, and what
//! an analysis of both cohorts' figures decides. No IO.

use super::config_rollout::{Analysis, CohortRecord};

/// How many of `keys` keys are on the candidate at `weight` percent: rounded up, at least one,
/// at most all of them.
pub fn cohort_size(weight: u32, keys: usize) -> usize {
    if keys == 0 {
        return 0;
    }
    let size = (weight as usize * keys).div_ceil(100);
    size.clamp(1, keys)
}

/// The keys on the candidate during a step of `size` keys: every key already `moved` that is
/// still `eligible`, then the first `eligible` keys (in their order: sorted by name) not moved
/// yet, until `size`. A resumed rollout asks the same and gets the same; a step only adds keys.
/// Sorted by name.
pub fn cohort(eligible: &[String], moved: &[String], size: usize) -> Vec<String> {
    let mut chosen: Vec<String> = moved
        .iter()
        .filter(|name| eligible.contains(name))
        .cloned()
        .collect();
    for name in eligible {
        if chosen.len() >= size {
            break;
        }
        if !chosen.contains(name) {
            chosen.push(name.clone());
        }
    }
    chosen.sort();
    chosen
}

/// What an analysis decides.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Every threshold holds: the figures, for the record.
    Pass(String),
    /// A threshold is crossed: which, with the figures.
    Fail(String),
    /// Too few candidate requests to judge.
    Wait(String),
}

/// Judges the candidate cohort against `analysis`'s thresholds, and against the stable cohort.
/// Each cohort's judged requests leave out the 4xx other than 429 (the caller's mistakes).
/// A relative threshold needs `min_requests` on the stable cohort too: a thin one waits, as a
/// thin candidate cohort does (judged on noise, or skipped, a baseline anyone sending requests
/// with the stable keys can thin out would decide). A stable cohort with no key (the 100 %
/// step) has no baseline: only the absolute thresholds judge then.
pub fn judge(
    analysis: &Analysis,
    min_requests: u64,
    stable: &CohortRecord,
    candidate: &CohortRecord,
) -> Verdict {
    let figures = format!(
        "candidate {}; stable {}",
        describe(candidate),
        describe(stable)
    );
    if candidate.judged() < min_requests {
        return Verdict::Wait(format!(
            "{} candidate requests of the {min_requests} needed ({figures})",
            candidate.judged()
        ));
    }
    let relative =
        analysis.max_error_rate_over_stable.is_some() || analysis.max_p90_latency_ratio.is_some();
    let stable_judged = stable.keys > 0 && stable.judged() >= min_requests;
    if relative && stable.keys > 0 && !stable_judged {
        return Verdict::Wait(format!(
            "{} stable requests of the {min_requests} the relative thresholds need ({figures})",
            stable.judged()
        ));
    }
    // Only relative thresholds and no stable cohort to judge against (the 100 % step of an
    // analysis admitted before an absolute threshold was required): nothing can pass it.
    if analysis.max_error_rate.is_none() && analysis.max_p90_latency_ms.is_none() && !stable_judged
    {
        return Verdict::Fail(format!(
            "no threshold could judge this step: the stable cohort has no keys and the analysis has no maxErrorRate or maxP90LatencyMs ({figures})"
        ));
    }
    let candidate_rate = candidate.error_rate.unwrap_or(0.0);
    if let Some(max) = analysis.max_error_rate
        && candidate_rate > max
    {
        return Verdict::Fail(format!(
            "candidate error rate {candidate_rate:.3} is above maxErrorRate {max} ({figures})"
        ));
    }
    if let (Some(max), Some(p90)) = (analysis.max_p90_latency_ms, candidate.p90_latency_ms)
        && p90 > max
    {
        return Verdict::Fail(format!(
            "candidate p90 latency {p90:.0}ms is above maxP90LatencyMs {max} ({figures})"
        ));
    }
    if let Some(max) = analysis.max_error_rate_over_stable
        && stable_judged
    {
        let over = candidate_rate - stable.error_rate.unwrap_or(0.0);
        if over > max {
            return Verdict::Fail(format!(
                "candidate error rate exceeds the stable cohort's by {over:.3}, above maxErrorRateOverStable {max} ({figures})"
            ));
        }
    }
    if let (Some(max), Some(p90), Some(stable_p90)) = (
        analysis.max_p90_latency_ratio,
        candidate.p90_latency_ms,
        stable.p90_latency_ms,
    ) && stable_judged
        && stable_p90 > 0.0
        && p90 / stable_p90 > max
    {
        return Verdict::Fail(format!(
            "candidate p90 latency is {:.2} times the stable cohort's, above maxP90LatencyRatio {max} ({figures})",
            p90 / stable_p90
        ));
    }
    // A latency threshold with no latency read (the counts and the latency are two reads, and
    // an empty or lagging one is null) judged nothing: it waits, as for traffic.
    let absolute_unread =
        analysis.max_p90_latency_ms.is_some() && candidate.p90_latency_ms.is_none();
    let relative_unread = analysis.max_p90_latency_ratio.is_some()
        && stable_judged
        && (candidate.p90_latency_ms.is_none() || stable.p90_latency_ms.is_none());
    if absolute_unread || relative_unread {
        return Verdict::Wait(format!(
            "no p90 latency read yet for the latency threshold ({figures})"
        ));
    }
    Verdict::Pass(figures)
}

/// `2 keys, 40 requests, 2 5xx (0.050), p90 120ms`, with `, N 429` and `, N other 4xx not
/// judged` when there are any (or `no requests`).
pub fn describe(cohort: &CohortRecord) -> String {
    if cohort.requests == 0 {
        return format!("{} keys, no requests", cohort.keys);
    }
    let p90 = cohort
        .p90_latency_ms
        .map_or("-".to_string(), |p| format!("{p:.0}ms"));
    let mut counts = format!("{} 5xx", cohort.server_errors);
    let limited = cohort.errors.saturating_sub(cohort.server_errors);
    if limited > 0 {
        counts.push_str(&format!(", {limited} 429"));
    }
    if cohort.client_errors > 0 {
        counts.push_str(&format!(", {} other 4xx not judged", cohort.client_errors));
    }
    format!(
        "{} keys, {} requests, {counts} ({:.3}), p90 {p90}",
        cohort.keys,
        cohort.requests,
        cohort.error_rate.unwrap_or(0.0)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn analysis() -> Analysis {
        Analysis {
            workspace_slug: "ws".into(),
            organisation_id: None,
            window: None,
            min_requests: None,
            max_wait: None,
            max_error_rate: Some(0.1),
            max_p90_latency_ms: None,
            max_error_rate_over_stable: Some(0.05),
            max_p90_latency_ratio: Some(2.0),
        }
    }

    /// The verdict of [`analysis`] at a minimum of 20 requests per cohort.
    fn judged(stable: &CohortRecord, candidate: &CohortRecord) -> Verdict {
        judge(&analysis(), 20, stable, candidate)
    }

    fn figures(requests: u64, errors: u64, p90: f64) -> CohortRecord {
        CohortRecord {
            keys: 2,
            requests,
            server_errors: errors,
            errors,
            client_errors: 0,
            error_rate: (requests > 0).then(|| errors as f64 / requests as f64),
            p90_latency_ms: (requests > 0).then_some(p90),
        }
    }

    #[test]
    fn a_step_rounds_up_and_takes_at_least_one_key() {
        assert_eq!(cohort_size(10, 4), 1);
        assert_eq!(cohort_size(50, 4), 2);
        assert_eq!(cohort_size(51, 4), 3);
        assert_eq!(cohort_size(100, 4), 4);
        assert_eq!(cohort_size(1, 1), 1);
        assert_eq!(cohort_size(10, 0), 0);
    }

    #[test]
    fn the_cohort_keeps_the_moved_keys_and_adds_by_name() {
        let eligible = names(&["a", "b", "c", "d"]);
        assert_eq!(cohort(&eligible, &[], 1), names(&["a"]));
        assert_eq!(cohort(&eligible, &names(&["a"]), 2), names(&["a", "b"]));
        // A key moved before (say, before a label change put "a" first) stays moved.
        assert_eq!(cohort(&eligible, &names(&["c"]), 2), names(&["a", "c"]));
        // A moved key no longer selected is not counted.
        assert_eq!(cohort(&eligible, &names(&["z"]), 1), names(&["a"]));
        assert_eq!(cohort(&eligible, &names(&["a", "b"]), 4), eligible);
    }

    #[test]
    fn the_callers_4xx_are_not_judged_and_429_counts_as_an_error() {
        let mut candidate = figures(100, 5, 10.0);
        candidate.client_errors = 90;
        // 10 judged requests: too few.
        let verdict = judged(&figures(100, 0, 10.0), &candidate);
        assert!(
            matches!(&verdict, Verdict::Wait(m) if m.contains("10 candidate requests of the 20")),
            "{verdict:?}"
        );
        let mut limited = figures(100, 0, 10.0);
        limited.errors = 20;
        limited.error_rate = Some(0.2);
        let verdict = judged(&figures(100, 0, 10.0), &limited);
        let Verdict::Fail(message) = verdict else {
            panic!("{verdict:?}")
        };
        assert!(
            message.contains("0 5xx, 20 429 (0.200)") && message.contains("maxErrorRate 0.1"),
            "{message}"
        );
    }

    #[test]
    fn too_little_traffic_waits() {
        let verdict = judged(&figures(100, 0, 10.0), &figures(5, 5, 10.0));
        assert!(matches!(verdict, Verdict::Wait(m) if m.contains("5 candidate requests")));
    }

    #[test]
    fn an_absolute_threshold_fails_with_the_figures() {
        let verdict = judged(&figures(100, 0, 10.0), &figures(100, 30, 10.0));
        let Verdict::Fail(message) = verdict else {
            panic!("{verdict:?}")
        };
        assert!(
            message.contains("0.300 is above maxErrorRate 0.1"),
            "{message}"
        );
        assert!(message.contains("100 requests, 30 5xx"), "{message}");
    }

    #[test]
    fn relative_thresholds_need_a_judged_stable_cohort() {
        // 8% is under the absolute 10%, but 8 points over the stable cohort's 0%.
        let verdict = judged(&figures(100, 0, 10.0), &figures(100, 8, 10.0));
        assert!(matches!(verdict, Verdict::Fail(m) if m.contains("maxErrorRateOverStable")));
        // A thin stable cohort is not compared with: the analysis waits for it (issue 31, F8;
        // it passed on the absolute thresholds alone before, so starving the stable keys of
        // traffic switched the relative thresholds off).
        let verdict = judged(&figures(3, 0, 10.0), &figures(100, 8, 10.0));
        assert!(
            matches!(&verdict, Verdict::Wait(m) if m.contains("3 stable requests of the 20 the relative thresholds need")),
            "{verdict:?}"
        );
        // A stable cohort with no key (the 100 % step) has no baseline: the absolute
        // thresholds judge alone.
        let empty = CohortRecord::default();
        let verdict = judged(&empty, &figures(100, 8, 10.0));
        assert!(matches!(verdict, Verdict::Pass(_)), "{verdict:?}");
        let verdict = judged(&figures(100, 0, 10.0), &figures(100, 0, 30.0));
        assert!(matches!(verdict, Verdict::Fail(m) if m.contains("3.00 times")));
        let verdict = judged(&figures(100, 1, 10.0), &figures(100, 2, 15.0));
        assert!(matches!(verdict, Verdict::Pass(_)));
    }
    /// A latency threshold is judged on a latency read, never passed on none (the requests
    /// counted, the latency chart empty or lagging).
    #[test]
    fn a_latency_threshold_without_a_latency_read_waits() {
        let mut no_p90 = figures(100, 0, 10.0);
        no_p90.p90_latency_ms = None;
        let latency_only = Analysis {
            max_error_rate: None,
            max_p90_latency_ms: Some(500.0),
            max_error_rate_over_stable: None,
            max_p90_latency_ratio: None,
            ..analysis()
        };
        let empty = CohortRecord::default();
        let verdict = judge(&latency_only, 20, &empty, &no_p90);
        assert!(
            matches!(&verdict, Verdict::Wait(m) if m.starts_with("no p90 latency read yet")),
            "{verdict:?}"
        );
        // The ratio needs both cohorts' latency.
        let verdict = judged(&no_p90, &figures(100, 0, 10.0));
        assert!(matches!(&verdict, Verdict::Wait(_)), "{verdict:?}");
        // An error-rate failure is not held up by a missing latency.
        let verdict = judged(&figures(100, 0, 10.0), &{
            let mut failing = figures(100, 30, 10.0);
            failing.p90_latency_ms = None;
            failing
        });
        assert!(matches!(&verdict, Verdict::Fail(_)), "{verdict:?}");
        let verdict = judge(&latency_only, 20, &empty, &figures(100, 0, 10.0));
        assert!(matches!(&verdict, Verdict::Pass(_)), "{verdict:?}");
    }

    #[test]
    fn relative_thresholds_alone_never_pass_a_step_without_a_stable_cohort() {
        // Admitted before an absolute threshold was required (issue 31, attack F-B): the 100 %
        // step leaves no stable key, so nothing judged a candidate failing half its requests.
        let relative_only = Analysis {
            max_error_rate: None,
            ..analysis()
        };
        let empty = CohortRecord::default();
        let verdict = judge(&relative_only, 20, &empty, &figures(300, 150, 10.0));
        assert!(
            matches!(&verdict, Verdict::Fail(m) if m.starts_with("no threshold could judge this step")),
            "{verdict:?}"
        );
        // With a stable cohort the relative thresholds judge as before.
        let verdict = judge(
            &relative_only,
            20,
            &figures(100, 1, 10.0),
            &figures(100, 2, 15.0),
        );
        assert!(matches!(verdict, Verdict::Pass(_)), "{verdict:?}");
    }
}
