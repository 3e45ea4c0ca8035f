//! ConfigRollout: a canary of a Config by API-key cohort, with real traffic through the
//! emulator's gateway (`POST /v1/chat/completions` with each key's value) and the analysis read
//! from its telemetry routes. A healthy candidate completes every step; a candidate whose
//! provider answers 5xx to 30 % of requests is rolled back at the first step, every key back on
//! the stable config; an operator stopped at each step boundary resumes with every key's config
//! changed exactly once per move (the emulator's write log of each key).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::support;

use aigw::resources::config_rollout::{ConfigRollout, Decision, Phase};
use aigw::resources::{ApiKey, Config};
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use support::api_keys::{remote, secret_value, service_key};
use support::harness::Harness;
use support::objects::create;

const WAIT: Duration = Duration::from_secs(60);
const WORKSPACE: &str = "ws-canary";
const TSG: &str = "1234567890";
const KEYS: [&str; 4] = ["key-a", "key-b", "key-c", "key-d"];

/// The stable and candidate Configs (each routing to a provider of its own), and four keys on
/// the stable Config, labelled for the rollout: their names and remote ids.
async fn setup(h: &Harness) -> Vec<(String, String)> {
    setup_in(h, None, None).await
}

/// [`setup`] with each Config in a workspace (`None`: the API's default).
async fn setup_in(
    h: &Harness,
    stable_workspace: Option<&str>,
    candidate_workspace: Option<&str>,
) -> Vec<(String, String)> {
    let mut waited = Vec::new();
    for (name, workspace) in [
        ("stable", stable_workspace),
        ("candidate", candidate_workspace),
    ] {
        let mut spec = json!({"name": name, "config": {"provider": format!("@{name}-openai")}});
        if let Some(workspace) = workspace {
            spec["workspaceId"] = json!(workspace);
        }
        create::<Config>(&h.env, name, spec).await;
        if workspace.is_none() || workspace == stable_workspace {
            waited.push(name);
        }
    }
    for name in waited {
        h.env
            .wait_for::<Config>(name, WAIT, |c| {
                c.status.as_ref().is_some_and(|s| s.slug.is_some())
            })
            .await;
    }
    let mut keys = Vec::new();
    for name in KEYS {
        let mut spec = service_key(name, json!({}));
        spec.as_object_mut().unwrap().remove("rotation");
        spec["workspaceId"] = json!(WORKSPACE);
        spec["defaults"] = json!({"config": "stable"});
        let mut key: ApiKey = support::objects::object("ApiKey", name, spec);
        key.metadata.labels = Some([("canary".to_string(), "checkout".to_string())].into());
        h.env
            .api::<ApiKey>()
            .create(&Default::default(), &key)
            .await
            .unwrap();
    }
    for name in KEYS {
        let key = h
            .env
            .wait_for::<ApiKey>(name, WAIT, support::api_keys::ready)
            .await;
        keys.push((name.to_string(), key.status.unwrap().id.unwrap()));
    }
    keys
}

fn rollout_spec(steps: Value) -> Value {
    json!({
        "stableConfigRef": {"name": "stable"},
        "candidateConfigRef": {"name": "candidate"},
        "apiKeySelector": {"matchLabels": {"canary": "checkout"}},
        "steps": steps,
        "analysis": {"workspaceSlug": WORKSPACE, "organisationId": TSG, "window": "4s",
                     "minRequests": 20, "maxErrorRate": 0.1, "maxErrorRateOverStable": 0.05},
    })
}

/// Sends chat completions with every key, one after the other, until stopped: what each
/// key's requests reach is decided by its default config, as in the gateway.
struct Traffic {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<u64>,
}

impl Traffic {
    async fn start(h: &Harness) -> Self {
        let mut values = Vec::new();
        for name in KEYS {
            values.push(secret_value(h, &format!("{name}-key")).await);
        }
        let url = h.url("/v1/chat/completions");
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let task = tokio::spawn(async move {
            let http = reqwest::Client::new();
            let mut sent = 0;
            while !stopping.load(Ordering::SeqCst) {
                for value in &values {
                    let answer = http
                        .post(&url)
                        .header("x-portkey-api-key", value)
                        .json(&json!({"model": "gpt-4o-mini",
                                      "messages": [{"role": "user", "content": "hi"}]}))
                        .send()
                        .await;
                    assert!(answer.is_ok(), "the gateway answers");
                    sent += 1;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            sent
        });
        Self { stop, task }
    }

    async fn stop(self) -> u64 {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.unwrap()
    }
}

fn status(r: &ConfigRollout) -> aigw::resources::config_rollout::ConfigRolloutStatus {
    r.status.clone().unwrap_or_default()
}

fn condition(r: &ConfigRollout, type_: &str) -> Option<(String, String, String)> {
    status(r)
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// The remote config each key's requests use now.
async fn remote_configs(h: &Harness, keys: &[(String, String)]) -> Vec<String> {
    let mut configs = Vec::new();
    for (_, id) in keys {
        let key = remote(h, id).await;
        configs.push(
            key["defaults"]["config_id"]
                .as_str()
                .unwrap_or("")
                .to_string(),
        );
    }
    configs
}

async fn slug(h: &Harness, name: &str) -> String {
    let config = h.env.api::<Config>().get(name).await.unwrap();
    config.status.unwrap().slug.unwrap()
}

/// The emulator's write log of key `id`'s default config.
async fn config_writes(h: &Harness, id: &str) -> Vec<Value> {
    remote(h, id).await["config_writes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn a_healthy_candidate_completes_every_step() {
    let h = Harness::start("rollout-ok").await;
    let keys = setup(&h).await;
    h.faults(json!({"gateway_seed": 3, "providers": {
        "stable-openai": {"error_rate": 0.01, "status": 502, "latency_ms": 2},
        "candidate-openai": {"latency_ms": 2}}}))
        .await;
    let traffic = Traffic::start(&h).await;
    let steps = json!([{"weight": 25, "pause": "2s"}, {"weight": 50, "pause": "2s"},
                       {"weight": 100, "pause": "2s"}]);
    create::<ConfigRollout>(&h.env, "checkout", rollout_spec(steps)).await;

    let done = h
        .env
        .wait_for::<ConfigRollout>("checkout", Duration::from_secs(90), |r| {
            status(r).phase != Phase::Progressing
        })
        .await;
    let sent = traffic.stop().await;
    let done_status = status(&done);
    assert_eq!(done_status.phase, Phase::Completed, "{done_status:#?}");
    let decisions: Vec<Decision> = done_status.decisions.iter().map(|d| d.decision).collect();
    assert_eq!(
        decisions,
        [Decision::Proceed, Decision::Proceed, Decision::Complete]
    );
    let analysis = done_status.analysis.expect("the last analysis");
    assert!(analysis.candidate.requests >= 20, "{analysis:?}");
    assert_eq!(analysis.candidate.keys, 4);
    assert_eq!(done_status.moved_keys, KEYS);
    let completed = h
        .env
        .wait_for::<ConfigRollout>("checkout", WAIT, |r| {
            condition(r, "Ready").is_some_and(|(s, reason, _)| s == "True" && reason == "Completed")
        })
        .await;
    let (_, _, message) = condition(&completed, "Ready").unwrap();
    assert!(message.contains("step 2 passed, the last"), "{message}");

    // Every key is on the candidate, each moved by one PUT of its config.
    let candidate = slug(&h, "candidate").await;
    let stable = slug(&h, "stable").await;
    assert_eq!(remote_configs(&h, &keys).await, vec![candidate.clone(); 4]);
    for (name, id) in &keys {
        assert_eq!(
            config_writes(&h, id).await,
            vec![json!(stable), json!(candidate)],
            "{name}"
        );
    }
    println!("completed after {sent} requests: {decisions:?}");

    // Deleting the rollout returns every key to its own defaults (the stable Config).
    h.env
        .api::<ConfigRollout>()
        .delete("checkout", &Default::default())
        .await
        .unwrap();
    let back = support::wait_until(WAIT, || async {
        (remote_configs(&h, &keys).await == vec![stable.clone(); 4]).then_some(())
    })
    .await;
    assert!(back.is_some(), "a deleted rollout returns its keys");
    h.stop().await;
}

#[tokio::test]
async fn a_failing_candidate_is_rolled_back_at_the_first_step() {
    let h = Harness::start("rollout-bad").await;
    let keys = setup(&h).await;
    h.faults(json!({"gateway_seed": 5, "providers": {
        "candidate-openai": {"error_rate": 0.3, "status": 503}}}))
        .await;
    let traffic = Traffic::start(&h).await;
    let steps = json!([{"weight": 25, "pause": "2s"}, {"weight": 50, "pause": "2s"},
                       {"weight": 100, "pause": "2s"}]);
    create::<ConfigRollout>(&h.env, "checkout", rollout_spec(steps)).await;

    let moved = h
        .env
        .wait_for::<ConfigRollout>("checkout", WAIT, |r| status(r).step_started_at.is_some())
        .await;
    let step_started = Instant::now();
    assert_eq!(status(&moved).moved_keys, ["key-a"]);
    let rolled_back = h
        .env
        .wait_for::<ConfigRollout>("checkout", WAIT, |r| status(r).phase != Phase::Progressing)
        .await;
    let decided_in = step_started.elapsed();
    let rolled = status(&rolled_back);
    assert_eq!(rolled.phase, Phase::RolledBack, "{rolled:#?}");
    assert_eq!(rolled.current_step, Some(0));
    let decision = rolled.decisions.last().unwrap();
    assert_eq!(decision.decision, Decision::RollBack);
    assert!(
        decision.message.contains("above maxErrorRate 0.1"),
        "{}",
        decision.message
    );
    let analysis = rolled.analysis.clone().unwrap();
    assert_eq!((analysis.candidate.keys, analysis.stable.keys), (1, 3));
    assert!(analysis.candidate.error_rate.unwrap() > 0.1, "{analysis:?}");

    // Every key back on the stable config, within one analysis window (pause 2s + window 4s).
    let stable = slug(&h, "stable").await;
    let candidate = slug(&h, "candidate").await;
    let back = support::wait_until(Duration::from_secs(6), || async {
        (remote_configs(&h, &keys).await == vec![stable.clone(); 4]).then_some(())
    })
    .await;
    let sent = traffic.stop().await;
    assert!(back.is_some(), "every key is back on the stable config");
    let settled = h
        .env
        .wait_for::<ConfigRollout>("checkout", WAIT, |r| {
            condition(r, "Ready")
                .is_some_and(|(s, reason, _)| s == "False" && reason == "RolledBack")
                && condition(r, "Stalled").is_some_and(|(s, _, _)| s == "True")
        })
        .await;
    let (_, _, message) = condition(&settled, "Ready").unwrap();
    assert!(message.contains("every moved key is back"), "{message}");
    assert!(
        message.contains("5xx"),
        "the figures that decided it: {message}"
    );
    assert_eq!(
        config_writes(&h, &keys[0].1).await,
        vec![json!(stable), json!(candidate), json!(stable)]
    );
    for (_, id) in &keys[1..] {
        assert_eq!(config_writes(&h, id).await, vec![json!(stable)]);
    }
    let metrics = h.ctx.metrics.encode();
    assert!(
        metrics.contains(r#"aigw_rollout_decisions_total{decision="RollBack"} 1"#),
        "{metrics}"
    );
    let step = format!(
        r#"aigw_rollout_step{{rollout_namespace="{}",rollout="checkout"}} -1"#,
        h.env.namespace
    );
    assert!(metrics.contains(&step), "{metrics}");
    println!(
        "rolled back {:.1}s after the step's keys moved, {sent} requests: {}",
        decided_in.as_secs_f64(),
        decision.message
    );
    h.stop().await;
}

/// A selector selecting nothing, weights that shrink, a Config of another namespace: refused
/// at admission or reported, and no key moves.
#[tokio::test]
async fn a_rollout_is_refused_what_it_cannot_do() {
    let h = Harness::start("rollout-refused").await;
    let api = h.env.api::<ConfigRollout>();
    let shrinking = json!([{"weight": 50, "pause": "1s"}, {"weight": 10, "pause": "1s"},
                           {"weight": 100, "pause": "1s"}]);
    let object: ConfigRollout =
        support::objects::object("ConfigRollout", "shrinks", rollout_spec(shrinking));
    let error = api.create(&Default::default(), &object).await.unwrap_err();
    assert!(
        error.to_string().contains("weights must only grow"),
        "{error}"
    );
    let mut unfinished = rollout_spec(json!([{"weight": 50, "pause": "1s"}]));
    let object: ConfigRollout =
        support::objects::object("ConfigRollout", "half", unfinished.clone());
    let error = api.create(&Default::default(), &object).await.unwrap_err();
    assert!(error.to_string().contains("must be 100"), "{error}");
    unfinished["apiKeySelector"] = json!({});
    unfinished["steps"] = json!([{"weight": 100, "pause": "1s"}]);
    let object: ConfigRollout = support::objects::object("ConfigRollout", "all", unfinished);
    let error = api.create(&Default::default(), &object).await.unwrap_err();
    assert!(error.to_string().contains("must not be empty"), "{error}");

    let mut elsewhere = rollout_spec(json!([{"weight": 100, "pause": "1s"}]));
    elsewhere["candidateConfigRef"] = json!({"name": "candidate", "namespace": "kube-system"});
    create::<ConfigRollout>(&h.env, "elsewhere", elsewhere).await;
    let refused = h
        .env
        .wait_for::<ConfigRollout>("elsewhere", WAIT, |r| {
            condition(r, "Stalled")
                .is_some_and(|(s, reason, _)| s == "True" && reason == "InvalidSpec")
        })
        .await;
    let (_, _, message) = condition(&refused, "Stalled").unwrap();
    assert!(message.contains("Config of its own namespace"), "{message}");
    assert!(status(&refused).moved_keys.is_empty());
    h.stop().await;
}

/// `aigw rollout ARGS… -n <test namespace> --kubeconfig <the test cluster's>`: its stdout.
async fn aigw_rollout(h: &Harness, args: &[&str]) -> String {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_aigw"))
        .arg("rollout")
        .args(args)
        .args(["-n", &h.env.namespace])
        .arg("--kubeconfig")
        .arg(support::kubeconfig_path())
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "aigw rollout {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// `aigw rollout abort` returns the moved keys at once, whatever the pause; with the
/// annotation gone and the spec changed the rollout starts over, and `aigw rollout promote`
/// completes it with every key on the candidate.
#[tokio::test]
async fn abort_and_promote_through_the_cli() {
    let h = Harness::start("rollout-cli").await;
    let keys = setup(&h).await;
    let steps = json!([{"weight": 50, "pause": "10m"}, {"weight": 100, "pause": "10m"}]);
    create::<ConfigRollout>(&h.env, "checkout", rollout_spec(steps)).await;
    h.env
        .wait_for::<ConfigRollout>("checkout", WAIT, |r| status(r).step_started_at.is_some())
        .await;
    let text = aigw_rollout(&h, &["status", "checkout"]).await;
    assert!(text.contains("Progressing, step 0 of 2 (50%)"), "{text}");
    assert!(
        text.contains("keys on the candidate (2): key-a, key-b"),
        "{text}"
    );
    let stable = slug(&h, "stable").await;
    let candidate = slug(&h, "candidate").await;
    assert_eq!(
        remote_configs(&h, &keys).await,
        [candidate.as_str(), &candidate, &stable, &stable]
    );

    aigw_rollout(&h, &["abort", "checkout"]).await;
    let aborted = h
        .env
        .wait_for::<ConfigRollout>("checkout", WAIT, |r| {
            condition(r, "Ready").is_some_and(|(s, reason, _)| s == "False" && reason == "Aborted")
                && condition(r, "Stalled").is_some_and(|(s, _, _)| s == "True")
        })
        .await;
    assert_eq!(status(&aborted).phase, Phase::Aborted);
    assert_eq!(remote_configs(&h, &keys).await, vec![stable.clone(); 4]);
    let text = aigw_rollout(&h, &["status", "checkout"]).await;
    assert!(text.contains("Abort"), "{text}");
    let json: Value =
        serde_json::from_str(&aigw_rollout(&h, &["status", "checkout", "-o", "json"]).await)
            .unwrap();
    assert_eq!(json["phase"], "Aborted");

    // Started over: the annotation removed and the spec changed.
    let patch = json!({"metadata": {"annotations": {"aigw.io/rollout-action": null}},
                       "spec": {"steps": [{"weight": 25, "pause": "10m"}, {"weight": 100, "pause": "10m"}]}});
    h.env
        .api::<ConfigRollout>()
        .patch("checkout", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    h.env
        .wait_for::<ConfigRollout>("checkout", WAIT, |r| {
            status(r).phase == Phase::Progressing && status(r).step_started_at.is_some()
        })
        .await;
    aigw_rollout(&h, &["promote", "checkout"]).await;
    let promoted = h
        .env
        .wait_for::<ConfigRollout>("checkout", WAIT, |r| {
            condition(r, "Ready").is_some_and(|(s, reason, _)| s == "True" && reason == "Completed")
        })
        .await;
    let decisions: Vec<Decision> = status(&promoted)
        .decisions
        .iter()
        .map(|d| d.decision)
        .collect();
    assert_eq!(decisions, [Decision::Abort, Decision::Promote]);
    assert_eq!(remote_configs(&h, &keys).await, vec![candidate.clone(); 4]);
    // key-a moved three times (on, back, on again), each once; the others twice or once.
    assert_eq!(
        config_writes(&h, &keys[0].1).await,
        [
            json!(stable),
            json!(candidate),
            json!(stable),
            json!(candidate)
        ]
    );
    assert_eq!(
        config_writes(&h, &keys[3].1).await,
        [json!(stable), json!(candidate)]
    );
    h.stop().await;
}

/// The operator stopped at each step boundary (right after the status records the next step,
/// before its keys are seen moved) and started again: the rollout completes, and the emulator's
/// write log shows each key's config changed exactly once per move.
#[tokio::test]
async fn a_restarted_operator_resumes_without_moving_a_key_twice() {
    let mut h = Harness::start("rollout-resume").await;
    let keys = setup(&h).await;
    let traffic = Traffic::start(&h).await;
    let steps = json!([{"weight": 25, "pause": "2s"}, {"weight": 50, "pause": "2s"},
                       {"weight": 100, "pause": "2s"}]);
    create::<ConfigRollout>(&h.env, "checkout", rollout_spec(steps)).await;
    for step in [0, 1, 2] {
        h.env
            .wait_for::<ConfigRollout>("checkout", WAIT, |r| status(r).current_step == Some(step))
            .await;
        h.stop_operator().await;
        let stopped = h.env.api::<ConfigRollout>().get("checkout").await.unwrap();
        println!(
            "stopped at step {step}: moved {:?}, started {:?}",
            status(&stopped).moved_keys,
            status(&stopped).step_started_at
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        h.restart_operator().await;
    }
    let done = h
        .env
        .wait_for::<ConfigRollout>("checkout", Duration::from_secs(90), |r| {
            status(r).phase != Phase::Progressing
        })
        .await;
    traffic.stop().await;
    assert_eq!(
        status(&done).phase,
        Phase::Completed,
        "{:#?}",
        status(&done)
    );
    let stable = slug(&h, "stable").await;
    let candidate = slug(&h, "candidate").await;
    for (name, id) in &keys {
        assert_eq!(
            config_writes(&h, id).await,
            [json!(stable), json!(candidate)],
            "{name}: one create on the stable config, one move"
        );
    }
    h.stop().await;
}

/// A second rollout over keys the first holds is refused, naming it, and moves nothing; the
/// first's candidate deleted mid-rollout rolls it back, every key back on the stable config.
#[tokio::test]
async fn a_second_rollout_over_the_same_keys_is_refused_and_a_deleted_candidate_rolls_back() {
    let h = Harness::start("rollout-two").await;
    let keys = setup(&h).await;
    let steps = json!([{"weight": 50, "pause": "10m"}, {"weight": 100, "pause": "10m"}]);
    create::<ConfigRollout>(&h.env, "first", rollout_spec(steps)).await;
    h.env
        .wait_for::<ConfigRollout>("first", WAIT, |r| status(r).step_started_at.is_some())
        .await;
    let stable = slug(&h, "stable").await;
    let candidate = slug(&h, "candidate").await;
    let split = [candidate.as_str(), &candidate, &stable, &stable];
    assert_eq!(remote_configs(&h, &keys).await, split);

    let steps = json!([{"weight": 100, "pause": "1s"}]);
    create::<ConfigRollout>(&h.env, "second", rollout_spec(steps)).await;
    let refused = h
        .env
        .wait_for::<ConfigRollout>("second", WAIT, |r| {
            condition(r, "Stalled")
                .is_some_and(|(s, reason, _)| s == "True" && reason == "InvalidSpec")
        })
        .await;
    let (_, _, message) = condition(&refused, "Stalled").unwrap();
    assert!(message.contains("is in ConfigRollout first"), "{message}");
    assert!(status(&refused).moved_keys.is_empty());
    assert_eq!(remote_configs(&h, &keys).await, split);

    h.env
        .api::<Config>()
        .delete("candidate", &Default::default())
        .await
        .unwrap();
    let rolled = h
        .env
        .wait_for::<ConfigRollout>("first", WAIT, |r| status(r).phase == Phase::RolledBack)
        .await;
    let decision = status(&rolled).decisions.last().cloned().unwrap();
    assert_eq!(decision.decision, Decision::RollBack);
    assert!(
        decision
            .message
            .contains("the candidate Config candidate is gone"),
        "{}",
        decision.message
    );
    let back = support::wait_until(WAIT, || async {
        (remote_configs(&h, &keys).await == vec![stable.clone(); 4]).then_some(())
    })
    .await;
    assert!(back.is_some(), "every key is back on the stable config");
    h.stop().await;
}

/// A candidate Config in a workspace the namespace's grants do not name is refused by its own
/// gate (no remote config): the rollout waits for it and moves no key. The keys' grants are
/// theirs too: a key moves only through its own reconcile.
#[tokio::test]
async fn a_candidate_outside_the_grant_moves_no_key() {
    const GRANTED: &str = "5b0e7c1a-3f2d-4e6b-9a8c-1d2e3f4a5b6c";
    const ELSEWHERE: &str = "9c8b7a6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d";
    let grants = json!([{"namespaces": ["{ns}"], "workspaces": [WORKSPACE, GRANTED]}]);
    let h = Harness::start_with_grants("rollout-grant", Duration::from_secs(600), grants).await;
    let keys = setup_in(&h, Some(GRANTED), Some(ELSEWHERE)).await;
    let refused = h
        .env
        .wait_for::<Config>("candidate", WAIT, |c| {
            c.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Stalled" && c.status == "True")
            })
        })
        .await;
    assert!(refused.status.unwrap().slug.is_none());
    let steps = json!([{"weight": 100, "pause": "1s"}]);
    create::<ConfigRollout>(&h.env, "checkout", rollout_spec(steps)).await;
    let waiting = h
        .env
        .wait_for::<ConfigRollout>("checkout", WAIT, |r| {
            condition(r, "Reconciling")
                .is_some_and(|(s, reason, _)| s == "True" && reason == "ConfigNotReady")
        })
        .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let still = h.env.api::<ConfigRollout>().get("checkout").await.unwrap();
    assert!(
        status(&still).moved_keys.is_empty(),
        "{:?}",
        status(&waiting)
    );
    let stable = slug(&h, "stable").await;
    assert_eq!(remote_configs(&h, &keys).await, vec![stable; 4]);
    for (name, _) in &keys {
        let key = h.env.api::<ApiKey>().get(name).await.unwrap();
        assert!(
            !key.annotations().contains_key("aigw.io/rollout-config"),
            "{name}"
        );
    }
    h.stop().await;
}

/// Too little traffic past `analysis.maxWait` rolls back, saying so.
#[tokio::test]
async fn no_traffic_past_max_wait_rolls_back() {
    let h = Harness::start("rollout-quiet").await;
    let keys = setup(&h).await;
    let mut spec =
        rollout_spec(json!([{"weight": 50, "pause": "1s"}, {"weight": 100, "pause": "1s"}]));
    spec["analysis"]["maxWait"] = json!("3s");
    create::<ConfigRollout>(&h.env, "checkout", spec).await;
    let waiting = h
        .env
        .wait_for::<ConfigRollout>("checkout", WAIT, |r| {
            condition(r, "Reconciling")
                .is_some_and(|(s, reason, _)| s == "True" && reason == "WaitingForTraffic")
        })
        .await;
    let (_, _, message) = condition(&waiting, "Reconciling").unwrap();
    assert!(
        message.contains("0 candidate requests of the 20 needed"),
        "{message}"
    );
    let rolled = h
        .env
        .wait_for::<ConfigRollout>("checkout", WAIT, |r| status(r).phase == Phase::RolledBack)
        .await;
    let decision = status(&rolled).decisions.last().cloned().unwrap();
    assert!(
        decision
            .message
            .contains("not enough traffic within analysis.maxWait"),
        "{}",
        decision.message
    );
    let stable = slug(&h, "stable").await;
    let back = support::wait_until(WAIT, || async {
        (remote_configs(&h, &keys).await == vec![stable.clone(); 4]).then_some(())
    })
    .await;
    assert!(back.is_some(), "every key is back on the stable config");
    h.stop().await;
}

// ---- issue 31, a fresh attack ----

async fn annotate(h: &Harness, key: &str, annotations: Value) {
    h.env
        .api::<ApiKey>()
        .patch(
            key,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": annotations}})),
        )
        .await
        .unwrap();
}

/// A rollout is claimed like every other kind (annotation, then `status.installation`): a second
/// installation over the same namespace neither judges it nor moves its keys.
#[tokio::test]
async fn a_second_installation_leaves_a_claimed_rollout_alone() {
    use support::harness::CLUSTER_LABEL;
    let h = Harness::start("roll-inst").await;
    let keys = setup(&h).await;
    let steps = json!([{"weight": 25, "pause": "120s"}, {"weight": 100, "pause": "2s"}]);
    create::<ConfigRollout>(&h.env, "checkout", rollout_spec(steps)).await;
    let started = h
        .env
        .wait_for::<ConfigRollout>("checkout", WAIT, |r| status(r).step_started_at.is_some())
        .await;
    let ns = h.env.namespace.clone();
    let b = h
        .installation("inst-b", &format!("{CLUSTER_LABEL}={ns}"))
        .await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let r = h.env.api::<ConfigRollout>().get("checkout").await.unwrap();
    assert_eq!(
        status(&r).phase,
        Phase::Progressing,
        "{:?}",
        status(&r).decisions.last()
    );
    assert_eq!(status(&r).moved_keys, ["key-a"]);
    assert_eq!(
        b.writes_to("configrollouts", "checkout"),
        Vec::<String>::new()
    );
    assert_eq!(b.writes_to("apikeys", "key-a"), Vec::<String>::new());
    let candidate = slug(&h, "candidate").await;
    assert_eq!(
        remote_configs(&h, &keys).await[0],
        candidate,
        "key-a stays on the candidate"
    );
    assert_eq!(status(&started).installation.as_deref(), Some("aigw"));
    assert_eq!(
        started
            .annotations()
            .get("aigw.io/installation")
            .map(String::as_str),
        Some("aigw")
    );
    drop(b);
    h.stop().await;
}

/// An `aigw.io/installation` annotation rewritten on a running rollout stalls it
/// (`ClaimChanged`), and its deletion still returns the keys and goes.
#[tokio::test]
async fn a_rewritten_rollout_claim_stalls_it_and_does_not_hold_its_deletion() {
    let h = Harness::start("roll-clm").await;
    let keys = setup(&h).await;
    let steps = json!([{"weight": 25, "pause": "60s"}, {"weight": 100, "pause": "2s"}]);
    create::<ConfigRollout>(&h.env, "checkout", rollout_spec(steps)).await;
    h.env
        .wait_for::<ConfigRollout>("checkout", WAIT, |r| status(r).step_started_at.is_some())
        .await;
    h.env
        .api::<ConfigRollout>()
        .patch(
            "checkout",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"aigw.io/installation": "nobody"}}})),
        )
        .await
        .unwrap();
    let stalled = h
        .env
        .wait_for::<ConfigRollout>("checkout", WAIT, |r| {
            condition(r, "Stalled")
                .is_some_and(|(s, reason, _)| s == "True" && reason == "ClaimChanged")
        })
        .await;
    assert_eq!(status(&stalled).installation.as_deref(), Some("aigw"));
    h.env
        .api::<ConfigRollout>()
        .delete("checkout", &Default::default())
        .await
        .unwrap();
    let gone = support::wait_until(WAIT, || async {
        let r = h
            .env
            .api::<ConfigRollout>()
            .get_opt("checkout")
            .await
            .unwrap();
        r.is_none().then_some(())
    })
    .await;
    let left = h
        .env
        .api::<ConfigRollout>()
        .get_opt("checkout")
        .await
        .unwrap();
    assert!(
        gone.is_some(),
        "the deletion hangs on finalizers {:?}",
        left.map(|r| r.finalizers().to_vec())
    );
    let stable = slug(&h, "stable").await;
    let back = support::wait_until(WAIT, || async {
        let remote = remote_configs(&h, &keys).await;
        remote.iter().all(|c| *c == stable).then_some(remote)
    })
    .await;
    assert!(
        back.is_some(),
        "every key is back on the stable config: {:?}",
        remote_configs(&h, &keys).await
    );
    h.stop().await;
}

/// `promote` skips the analysis, not the refusals: a selected key of another installation keeps
/// the rollout from completing, and no key is annotated onto the candidate.
#[tokio::test]
async fn promote_does_not_skip_a_refused_key() {
    use support::harness::CLUSTER_LABEL;
    let h = Harness::start("roll-pro").await;
    let keys = setup(&h).await;
    let ns = h.env.namespace.clone();
    let b = h
        .installation("inst-b", &format!("{CLUSTER_LABEL}={ns}"))
        .await;
    let mut spec = service_key("key-e", json!({}));
    spec.as_object_mut().unwrap().remove("rotation");
    spec["workspaceId"] = json!(WORKSPACE);
    spec["defaults"] = json!({"config": "stable"});
    let mut key: ApiKey = support::objects::object("ApiKey", "key-e", spec);
    key.metadata.labels = Some([("canary".to_string(), "checkout".to_string())].into());
    key.metadata.annotations =
        Some([("aigw.io/installation".to_string(), "inst-b".to_string())].into());
    h.env
        .api::<ApiKey>()
        .create(&Default::default(), &key)
        .await
        .unwrap();
    let recorded = support::wait_until(WAIT, || async {
        let k = h.env.api::<ApiKey>().get("key-e").await.unwrap();
        k.status.and_then(|s| s.installation)
    })
    .await;
    assert_eq!(recorded.as_deref(), Some("inst-b"));
    let steps = json!([{"weight": 25, "pause": "120s"}, {"weight": 100, "pause": "2s"}]);
    create::<ConfigRollout>(&h.env, "checkout", rollout_spec(steps)).await;
    h.env
        .wait_for::<ConfigRollout>("checkout", WAIT, |r| {
            condition(r, "Stalled").is_some_and(|(s, _, m)| {
                s == "True" && m.contains("belongs to another installation")
            })
        })
        .await;
    h.env
        .api::<ConfigRollout>()
        .patch(
            "checkout",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"aigw.io/rollout-action": "promote"}}}),
            ),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(8)).await;
    let r = h.env.api::<ConfigRollout>().get("checkout").await.unwrap();
    assert_eq!(
        status(&r).phase,
        Phase::Progressing,
        "{:?}",
        status(&r).decisions.last()
    );
    assert!(
        status(&r).moved_keys.is_empty(),
        "{:?}",
        status(&r).moved_keys
    );
    let stalled = condition(&r, "Stalled").unwrap();
    assert!(
        stalled.2.contains("belongs to another installation"),
        "{stalled:?}"
    );
    let e = h.env.api::<ApiKey>().get("key-e").await.unwrap();
    assert_eq!(e.annotations().get("aigw.io/rollout-config"), None);
    assert_eq!(e.annotations().get("aigw.io/rollout"), None);
    let stable = slug(&h, "stable").await;
    assert!(remote_configs(&h, &keys).await.iter().all(|c| *c == stable));
    drop(b);
    h.stop().await;
}

/// The Configs a rollout names cannot change under it (the moved keys were judged on them).
#[tokio::test]
async fn the_configs_of_a_rollout_cannot_change() {
    let h = Harness::start("roll-imm").await;
    let steps = json!([{"weight": 25, "pause": "20s"}, {"weight": 100, "pause": "2s"}]);
    create::<ConfigRollout>(&h.env, "checkout", rollout_spec(steps)).await;
    for field in ["candidateConfigRef", "stableConfigRef"] {
        let refused = h
            .env
            .api::<ConfigRollout>()
            .patch(
                "checkout",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {field: {"name": "candidate2"}}})),
            )
            .await
            .expect_err("the change is refused");
        let message = refused.to_string();
        assert!(
            message.contains(&format!("spec.{field} is immutable"))
                && message.contains("create a new ConfigRollout"),
            "{message}"
        );
    }
    h.stop().await;
}

/// A moved key re-tagged by hand to another rollout is still returned by the rollback, which
/// does not say every key is back while one is on the candidate.
#[tokio::test]
async fn a_retagged_moved_key_is_returned_by_the_rollback() {
    let h = Harness::start("roll-tag").await;
    let keys = setup(&h).await;
    let steps = json!([{"weight": 25, "pause": "60s"}, {"weight": 100, "pause": "2s"}]);
    create::<ConfigRollout>(&h.env, "checkout", rollout_spec(steps)).await;
    h.env
        .wait_for::<ConfigRollout>("checkout", WAIT, |r| status(r).step_started_at.is_some())
        .await;
    annotate(&h, "key-a", json!({"aigw.io/rollout": "ghost"})).await;
    let done = h
        .env
        .wait_for::<ConfigRollout>("checkout", WAIT, |r| {
            condition(r, "Stalled")
                .is_some_and(|(s, _, m)| s == "True" && m.contains("every moved key is back"))
        })
        .await;
    assert_eq!(status(&done).phase, Phase::RolledBack);
    let stable = slug(&h, "stable").await;
    assert_eq!(
        remote_configs(&h, &keys).await,
        vec![stable; 4],
        "said every key is back"
    );
    let a = h.env.api::<ApiKey>().get("key-a").await.unwrap();
    assert_eq!(a.annotations().get("aigw.io/rollout-config"), None);
    h.stop().await;
}

/// `aigw.io/rollout-config` is honoured only while `aigw.io/rollout` names a ConfigRollout of
/// the namespace that moved the key: written by hand (naming no rollout, or one that never
/// moved the key), it moves nothing.
#[tokio::test]
async fn a_hand_written_rollout_annotation_moves_no_key() {
    let h = Harness::start("roll-hand").await;
    let keys = setup(&h).await;
    let (stable, candidate) = (slug(&h, "stable").await, slug(&h, "candidate").await);
    // Naming no rollout.
    annotate(
        &h,
        "key-b",
        json!({"aigw.io/rollout-config": "candidate", "aigw.io/rollout": "ghost"}),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(remote_configs(&h, &keys).await, vec![stable.clone(); 4]);
    let b = h.env.api::<ApiKey>().get("key-b").await.unwrap();
    assert_eq!(b.status.unwrap().config_override, None);
    annotate(
        &h,
        "key-b",
        json!({"aigw.io/rollout-config": null, "aigw.io/rollout": null}),
    )
    .await;
    // Naming a rollout that never moved the key.
    let steps = json!([{"weight": 25, "pause": "60s"}, {"weight": 100, "pause": "2s"}]);
    create::<ConfigRollout>(&h.env, "checkout", rollout_spec(steps)).await;
    h.env
        .wait_for::<ConfigRollout>("checkout", WAIT, |r| status(r).step_started_at.is_some())
        .await;
    annotate(
        &h,
        "key-c",
        json!({"aigw.io/rollout-config": "candidate", "aigw.io/rollout": "checkout"}),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(
        remote_configs(&h, &keys).await,
        [candidate, stable.clone(), stable.clone(), stable],
        "only key-a, which the rollout moved, is on the candidate"
    );
    let c = h.env.api::<ApiKey>().get("key-c").await.unwrap();
    assert_eq!(c.status.unwrap().config_override, None);
    h.stop().await;
}

/// A moved key taken out of the selector mid-step goes back to its own defaults before the
/// step goes on, and is counted in neither cohort.
#[tokio::test]
async fn a_moved_key_leaving_the_selector_is_returned_and_not_counted() {
    let h = Harness::start("roll-sel").await;
    let keys = setup(&h).await;
    let steps = json!([{"weight": 25, "pause": "3s"}, {"weight": 100, "pause": "2s"}]);
    create::<ConfigRollout>(&h.env, "checkout", rollout_spec(steps)).await;
    let moved = h
        .env
        .wait_for::<ConfigRollout>("checkout", WAIT, |r| status(r).step_started_at.is_some())
        .await;
    assert_eq!(status(&moved).moved_keys, ["key-a"]);
    h.env
        .api::<ApiKey>()
        .patch(
            "key-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"canary": null}}})),
        )
        .await
        .unwrap();
    let judged = h
        .env
        .wait_for::<ConfigRollout>("checkout", WAIT, |r| {
            let s = status(r);
            s.moved_keys == ["key-b"]
                && s.analysis.as_ref().is_some_and(|a| {
                    let at = |t: &str| t.parse::<jiff::Timestamp>().ok();
                    s.step_started_at
                        .as_deref()
                        .is_some_and(|started| at(&a.from) >= at(started))
                })
        })
        .await;
    let analysis = status(&judged).analysis.unwrap();
    assert_eq!(
        (analysis.candidate.keys, analysis.stable.keys),
        (1, 2),
        "key-a, out of the selector, is in neither cohort"
    );
    let (stable, candidate) = (slug(&h, "stable").await, slug(&h, "candidate").await);
    assert_eq!(
        remote_configs(&h, &keys).await,
        [stable.clone(), candidate, stable.clone(), stable]
    );
    let a = h.env.api::<ApiKey>().get("key-a").await.unwrap();
    assert_eq!(a.annotations().get("aigw.io/rollout-config"), None);
    h.stop().await;
}
