//! How the data plane routes a request by a config document: the plan a document describes
//! (`strategy.mode` `single`, `fallback` or `loadbalance` over `targets`, nested to any depth;
//! a document without targets is one target) and its walk over simulated providers.
//!
//! The walk is pure: each provider call is a closure answering a status and a latency, and every
//! random choice (a weighted pick, a fault roll) draws from the caller's RNG, so a seeded RNG
//! gives the same routes every run. The document fields read are those of FACTS §3 ("What the
//! `config` document holds"):
//! - a target is named by `provider` (`@slug` or a provider name; the `@` is dropped) or else by
//!   `virtual_key`;
//! - `weight` (default 1, at least 0) weighs a `loadbalance` pick;
//! - `strategy.on_status_codes` limits which failures a `fallback` moves on from (absent: any
//!   non-2xx answer);
//! - `retry {attempts, on_status_codes}` repeats a call to the same target (at most 5 times, the
//!   gateway's own cap; codes default to 429, 500, 502, 503, 504), inherited by nested targets;
//! - `override_params.model` replaces the request's model, inherited by nested targets.
//!
//! `conditional` routing is refused: the emulator does not evaluate its queries.

use rand::Rng;
use serde_json::Value;

/// The most retries a `retry.attempts` can ask for (the gateway caps it at 5).
const MAX_RETRIES: u64 = 5;
/// The statuses retried when `retry.on_status_codes` is absent.
const RETRY_CODES: &[u16] = &[429, 500, 502, 503, 504];

/// A routing mode of `strategy.mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Single,
    Fallback,
    Loadbalance,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Single => "single",
            Self::Fallback => "fallback",
            Self::Loadbalance => "loadbalance",
        }
    }
}

/// `retry`: how often a failed call to one target is repeated, and on which statuses.
#[derive(Clone, Debug, PartialEq)]
pub struct Retry {
    pub attempts: u64,
    pub on_status_codes: Vec<u16>,
}

/// One provider a request can reach.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// The provider slug (`provider` without its `@`, or the `virtual_key`).
    pub provider: String,
    /// `override_params.model`, if the target (or a parent) sets it.
    pub model: Option<String>,
    pub retry: Option<Retry>,
}

/// The plan a config document describes.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    Target(Target),
    Group {
        mode: Mode,
        on_status_codes: Option<Vec<u16>>,
        /// Each child with its `weight`.
        targets: Vec<(Plan, f64)>,
    },
}

/// What the parent passes down: `retry` and `override_params.model`.
#[derive(Clone, Default)]
struct Inherited {
    model: Option<String>,
    retry: Option<Retry>,
}

impl Plan {
    /// The plan of a config document, or why it cannot route.
    pub fn parse(document: &Value) -> Result<Self, String> {
        parse(document, &Inherited::default(), "config")
    }

    /// The top-level mode (a document without targets is `single`).
    pub fn mode(&self) -> Mode {
        match self {
            Self::Target(_) => Mode::Single,
            Self::Group { mode, .. } => *mode,
        }
    }
}

fn status_codes(value: Option<&Value>, at: &str) -> Result<Option<Vec<u16>>, String> {
    let Some(value) = value.filter(|value| !value.is_null()) else {
        return Ok(None);
    };
    let items = value
        .as_array()
        .ok_or_else(|| format!("{at} must be an array of status codes"))?;
    items
        .iter()
        .map(|item| {
            item.as_u64()
                .and_then(|code| u16::try_from(code).ok())
                .filter(|code| (100..600).contains(code))
                .ok_or_else(|| format!("{at} must hold HTTP status codes, not {item}"))
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

fn parse(document: &Value, inherited: &Inherited, at: &str) -> Result<Plan, String> {
    let object = document
        .as_object()
        .ok_or_else(|| format!("{at} must be an object"))?;
    let mut here = inherited.clone();
    if let Some(model) = object
        .get("override_params")
        .and_then(|params| params.get("model"))
        .and_then(Value::as_str)
    {
        here.model = Some(model.to_owned());
    }
    if let Some(retry) = object.get("retry").filter(|retry| !retry.is_null()) {
        let attempts = retry
            .get("attempts")
            .and_then(Value::as_u64)
            .ok_or_else(|| format!("{at}.retry.attempts must be an integer >= 0"))?;
        let codes = status_codes(
            retry.get("on_status_codes"),
            &format!("{at}.retry.on_status_codes"),
        )?;
        here.retry = Some(Retry {
            attempts: attempts.min(MAX_RETRIES),
            on_status_codes: codes.unwrap_or_else(|| RETRY_CODES.to_vec()),
        });
    }
    let strategy = object.get("strategy").filter(|value| !value.is_null());
    let mode = strategy.and_then(|strategy| strategy.get("mode"));
    let mode = match mode.and_then(Value::as_str) {
        None if mode.is_some() => return Err(format!("{at}.strategy.mode must be a string")),
        None | Some("single") => Mode::Single,
        Some("fallback") => Mode::Fallback,
        Some("loadbalance") => Mode::Loadbalance,
        Some("conditional") => {
            return Err(format!(
                "{at}: conditional routing is not modelled by the emulator"
            ));
        }
        Some(other) => {
            return Err(format!(
                "{at}.strategy.mode {other:?} is not a routing mode"
            ));
        }
    };
    match object.get("targets").filter(|targets| !targets.is_null()) {
        Some(targets) => {
            let targets = targets
                .as_array()
                .filter(|targets| !targets.is_empty())
                .ok_or_else(|| format!("{at}.targets must be a non-empty array"))?;
            let children = targets
                .iter()
                .enumerate()
                .map(|(index, target)| {
                    let at = format!("{at}.targets[{index}]");
                    let weight = match target.get("weight") {
                        None | Some(Value::Null) => 1.0,
                        Some(weight) => weight
                            .as_f64()
                            .filter(|weight| weight.is_finite() && *weight >= 0.0)
                            .ok_or_else(|| format!("{at}.weight must be a number >= 0"))?,
                    };
                    Ok((parse(target, &here, &at)?, weight))
                })
                .collect::<Result<Vec<_>, String>>()?;
            if mode == Mode::Loadbalance && children.iter().all(|(_, weight)| *weight <= 0.0) {
                return Err(format!(
                    "{at}: loadbalance needs a target with a weight above 0"
                ));
            }
            let on_status_codes = status_codes(
                strategy.and_then(|strategy| strategy.get("on_status_codes")),
                &format!("{at}.strategy.on_status_codes"),
            )?;
            Ok(Plan::Group {
                mode,
                on_status_codes,
                targets: children,
            })
        }
        None => {
            let provider = object
                .get("provider")
                .and_then(Value::as_str)
                .map(|provider| provider.strip_prefix('@').unwrap_or(provider))
                .or_else(|| object.get("virtual_key").and_then(Value::as_str))
                .filter(|provider| !provider.is_empty())
                .ok_or_else(|| format!("{at} names no provider, virtual_key or targets"))?;
            Ok(Plan::Target(Target {
                provider: provider.to_owned(),
                model: here.model,
                retry: here.retry,
            }))
        }
    }
}

/// One call to a provider.
#[derive(Clone, Debug, PartialEq)]
pub struct Attempt {
    pub provider: String,
    pub status: u16,
    pub latency_ms: u64,
}

/// What a walk did: every call in order, the target that answered last, and the index of the
/// top-level target it went through (`last_used_option_index`).
#[derive(Clone, Debug)]
pub struct Routed {
    pub attempts: Vec<Attempt>,
    pub target: Target,
    pub option_index: usize,
}

impl Routed {
    /// The status of the answer the caller gets: the last call's.
    pub fn status(&self) -> u16 {
        self.attempts.last().map_or(500, |attempt| attempt.status)
    }

    /// The simulated time of all calls together.
    pub fn latency_ms(&self) -> u64 {
        self.attempts.iter().map(|attempt| attempt.latency_ms).sum()
    }
}

fn success(status: u16) -> bool {
    (200..300).contains(&status)
}

/// Walks `plan`: `call` answers `(status, latency_ms)` for one call to a target.
pub fn route<R: Rng>(
    plan: &Plan,
    rng: &mut R,
    call: &mut impl FnMut(&Target, &mut R) -> (u16, u64),
) -> Routed {
    let mut attempts = Vec::new();
    let (target, option_index) = walk(plan, rng, call, &mut attempts);
    Routed {
        attempts,
        target,
        option_index,
    }
}

/// Returns the target that answered last and its top-level index.
fn walk<R: Rng>(
    plan: &Plan,
    rng: &mut R,
    call: &mut impl FnMut(&Target, &mut R) -> (u16, u64),
    attempts: &mut Vec<Attempt>,
) -> (Target, usize) {
    match plan {
        Plan::Target(target) => {
            let retries = target.retry.as_ref().map_or(0, |retry| retry.attempts);
            for attempt in 0..=retries {
                let (status, latency_ms) = call(target, rng);
                attempts.push(Attempt {
                    provider: target.provider.clone(),
                    status,
                    latency_ms,
                });
                let retryable = target
                    .retry
                    .as_ref()
                    .is_some_and(|retry| retry.on_status_codes.contains(&status));
                if success(status) || !retryable || attempt == retries {
                    break;
                }
            }
            (target.clone(), 0)
        }
        Plan::Group {
            mode: Mode::Single,
            targets,
            ..
        } => (walk(&targets[0].0, rng, call, attempts).0, 0),
        Plan::Group {
            mode: Mode::Loadbalance,
            targets,
            ..
        } => {
            let index = pick(targets, rng);
            (walk(&targets[index].0, rng, call, attempts).0, index)
        }
        Plan::Group {
            mode: Mode::Fallback,
            on_status_codes,
            targets,
        } => {
            let mut last = None;
            for (index, (child, _)) in targets.iter().enumerate() {
                let target = walk(child, rng, call, attempts).0;
                last = Some((target, index));
                let status = attempts.last().map_or(500, |attempt| attempt.status);
                let moves_on = !success(status)
                    && on_status_codes
                        .as_ref()
                        .is_none_or(|codes| codes.contains(&status));
                if !moves_on {
                    break;
                }
            }
            last.unwrap_or_else(|| walk(&targets[0].0, rng, call, attempts))
        }
    }
}

/// A weighted draw over the targets (parse made sure one weight is above 0).
fn pick<R: Rng>(targets: &[(Plan, f64)], rng: &mut R) -> usize {
    let total: f64 = targets.iter().map(|(_, weight)| weight).sum();
    let mut point = rng.random::<f64>() * total;
    for (index, (_, weight)) in targets.iter().enumerate() {
        if *weight > 0.0 && point < *weight {
            return index;
        }
        point -= weight;
    }
    targets
        .iter()
        .rposition(|(_, weight)| *weight > 0.0)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use rand::{SeedableRng, rngs::StdRng};
    use serde_json::json;

    use super::*;

    fn run(document: Value, failing: &HashMap<&str, u16>, seed: u64) -> Routed {
        let plan = Plan::parse(&document).expect("plan");
        let mut rng = StdRng::seed_from_u64(seed);
        route(&plan, &mut rng, &mut |target, _| {
            (
                failing
                    .get(target.provider.as_str())
                    .copied()
                    .unwrap_or(200),
                10,
            )
        })
    }

    /// Which provider answered last, and with which status.
    fn answered(routed: &Routed) -> (&str, u16) {
        (routed.target.provider.as_str(), routed.status())
    }

    #[test]
    fn a_document_without_targets_is_one_target() {
        let routed = run(json!({"provider": "@openai-prod"}), &HashMap::new(), 1);
        assert_eq!(routed.target.provider, "openai-prod");
        assert_eq!(routed.status(), 200);
        let routed = run(json!({"virtual_key": "vk-1"}), &HashMap::new(), 1);
        assert_eq!(routed.target.provider, "vk-1");
    }

    #[test]
    fn single_uses_the_first_target() {
        let doc = json!({"strategy": {"mode": "single"}, "targets": [{"provider": "@a"}, {"provider": "@b"}]});
        let routed = run(doc, &HashMap::from([("a", 503)]), 1);
        assert_eq!(answered(&routed), ("a", 503));
    }

    #[test]
    fn fallback_moves_on_only_for_listed_codes() {
        let doc = json!({"strategy": {"mode": "fallback"},
                         "targets": [{"provider": "@a"}, {"provider": "@b"}]});
        let routed = run(doc.clone(), &HashMap::from([("a", 503)]), 1);
        assert_eq!(routed.target.provider, "b");
        assert_eq!(routed.option_index, 1);
        assert_eq!(routed.attempts.len(), 2);
        assert_eq!(routed.latency_ms(), 20);

        let limited = json!({"strategy": {"mode": "fallback", "on_status_codes": [429]},
                             "targets": [{"provider": "@a"}, {"provider": "@b"}]});
        let routed = run(limited.clone(), &HashMap::from([("a", 503)]), 1);
        assert_eq!(answered(&routed), ("a", 503));
        let routed = run(limited, &HashMap::from([("a", 429)]), 1);
        assert_eq!(answered(&routed), ("b", 200));

        let routed = run(doc, &HashMap::from([("a", 500), ("b", 502)]), 1);
        assert_eq!(answered(&routed), ("b", 502));
    }

    #[test]
    fn loadbalance_follows_the_weights_and_the_seed() {
        let doc = json!({"strategy": {"mode": "loadbalance"},
                         "targets": [{"provider": "@a", "weight": 3}, {"provider": "@b", "weight": 1},
                                     {"provider": "@never", "weight": 0}]});
        let plan = Plan::parse(&doc).expect("plan");
        let picks = |seed| {
            let mut rng = StdRng::seed_from_u64(seed);
            (0..4000)
                .map(|_| route(&plan, &mut rng, &mut |_, _| (200, 1)).target.provider)
                .collect::<Vec<_>>()
        };
        let first = picks(7);
        assert_eq!(first, picks(7), "the same seed routes the same way");
        let a = first.iter().filter(|p| *p == "a").count();
        assert!(first.iter().all(|p| p != "never"));
        assert!((2800..3200).contains(&a), "about 3 in 4 go to a: {a}");
    }

    #[test]
    fn retries_repeat_the_same_target_and_nesting_inherits() {
        let doc = json!({"retry": {"attempts": 2}, "override_params": {"model": "gpt-x"},
                         "strategy": {"mode": "fallback"},
                         "targets": [{"provider": "@a"},
                                     {"strategy": {"mode": "single"}, "targets": [{"provider": "@b"}]}]});
        let routed = run(doc, &HashMap::from([("a", 503)]), 1);
        assert_eq!(routed.attempts.len(), 4, "{:?}", routed.attempts);
        assert_eq!(routed.target.provider, "b");
        assert_eq!(routed.target.model.as_deref(), Some("gpt-x"));
    }

    #[test]
    fn documents_that_cannot_route_are_refused() {
        for doc in [
            json!({}),
            json!({"strategy": {"mode": "conditional"}, "targets": [{"provider": "@a"}]}),
            json!({"strategy": {"mode": "loadbalance"}, "targets": [{"provider": "@a", "weight": 0}]}),
            json!({"strategy": {"mode": "fallback"}, "targets": []}),
            json!({"strategy": {"mode": "fallback", "on_status_codes": ["x"]}, "targets": [{"provider": "@a"}]}),
            json!({"targets": [{"provider": "@a", "weight": -1}]}),
        ] {
            assert!(Plan::parse(&doc).is_err(), "{doc}");
        }
    }
}
