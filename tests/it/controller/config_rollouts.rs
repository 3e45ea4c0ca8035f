//! ConfigRollout: a canary of a Config by API-key cohort, with real traffic through the
//! emulator's gateway (`POST /v1/chat/completions` with each key's value) and the analysis read
//! from its telemetry routes. A healthy candidate completes every step; a candidate whose
//! provider answers 5xx to 30 % of requests is rolled back at the first step, every key back on
//! the stable config; an operator stopped at each step boundary (in-process, and a real
//! `aigw operator` process SIGKILLed) resumes with every key's config changed exactly once per
//! move (the emulator's write log of each key).

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
use support::objects::{Conditions, create};

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
        h.wait_for::<Config>(name, WAIT, |c| {
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
            .wait_for::<ApiKey>(name, WAIT, support::api_keys::ready)
            .await;
        keys.push((name.to_string(), key.status.unwrap().id.unwrap()));
    }
    keys
}

/// A harness with [`setup`]'s Configs and keys.
async fn with_keys(prefix: &str) -> (Harness, Vec<(String, String)>) {
    let h = Harness::start(prefix).await;
    let keys = setup(&h).await;
    (h, keys)
}

/// [`with_keys`], and the rollout `name` with `steps` started over the keys.
async fn rolling(prefix: &str, name: &str, steps: Value) -> (Harness, Vec<(String, String)>) {
    let (h, keys) = with_keys(prefix).await;
    start_rollout(&h, name, steps).await;
    (h, keys)
}

/// Three steps of 2 s each: 25 %, 50 % and all of the keys.
fn three_steps() -> Value {
    steps(&[(25, "2s"), (50, "2s"), (100, "2s")])
}

/// A rollout's `steps`, each `(weight, pause)`.
fn steps(steps: &[(u32, &str)]) -> Value {
    let steps: Vec<Value> = steps
        .iter()
        .map(|(weight, pause)| json!({"weight": weight, "pause": pause}))
        .collect();
    json!(steps)
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

/// Whether `r`'s condition `type_` has `status` and `reason`.
fn has(r: &ConfigRollout, type_: &str, status: &str, reason: &str) -> bool {
    condition(r, type_).is_some_and(|(s, re, _)| s == status && re == reason)
}

/// Whether `r`'s condition `type_` has `status` and a message saying `text`.
fn says(r: &ConfigRollout, type_: &str, status: &str, text: &str) -> bool {
    condition(r, type_).is_some_and(|(s, _, m)| s == status && m.contains(text))
}

/// The rollout `name` once `done` holds for it.
async fn rollout(h: &Harness, name: &str, done: impl Fn(&ConfigRollout) -> bool) -> ConfigRollout {
    h.wait_for::<ConfigRollout>(name, WAIT, done).await
}

/// Creates the rollout `name` of the stable and candidate configs with `steps`.
async fn create_rollout(h: &Harness, name: &str, steps: Value) {
    create::<ConfigRollout>(&h.env, name, rollout_spec(steps)).await;
}

/// [`create_rollout`]; the rollout once its first step has started.
async fn start_rollout(h: &Harness, name: &str, steps: Value) -> ConfigRollout {
    create_rollout(h, name, steps).await;
    rollout(h, name, |r| status(r).step_started_at.is_some()).await
}

/// The status of `done`, a rollout completed after proceeding through its three steps, and its
/// decisions.
fn completed_in_three_steps(
    done: &ConfigRollout,
) -> (
    aigw::resources::config_rollout::ConfigRolloutStatus,
    Vec<Decision>,
) {
    let done_status = status(done);
    assert_eq!(done_status.phase, Phase::Completed, "{done_status:#?}");
    let decisions: Vec<Decision> = done_status.decisions.iter().map(|d| d.decision).collect();
    assert_eq!(
        decisions,
        [Decision::Proceed, Decision::Proceed, Decision::Complete]
    );
    (done_status, decisions)
}

/// Once the rollout `checkout` is over (within 90 s), `traffic` stopped: it completed; its
/// status.
async fn completed(
    h: &Harness,
    traffic: Traffic,
) -> aigw::resources::config_rollout::ConfigRolloutStatus {
    let done = h
        .wait_for::<ConfigRollout>("checkout", Duration::from_secs(90), |r| {
            status(r).phase != Phase::Progressing
        })
        .await;
    traffic.stop().await;
    let done = status(&done);
    assert_eq!(done.phase, Phase::Completed, "{done:#?}");
    done
}

/// [`with_keys`], with faults under which the candidate is the healthier (the stable provider
/// fails 1 % of requests), and [`Traffic`] through every key.
async fn healthy_traffic(prefix: &str) -> (Harness, Vec<(String, String)>, Traffic) {
    let (h, keys) = with_keys(prefix).await;
    h.faults(json!({"gateway_seed": 3, "providers": {
        "stable-openai": {"error_rate": 0.01, "status": 502, "latency_ms": 2},
        "candidate-openai": {"latency_ms": 2}}}))
        .await;
    let traffic = Traffic::start(&h).await;
    (h, keys, traffic)
}

/// Creates the rollout `checkout` (two steps of 1 s, `analysis.maxWait` of `max_wait`); the
/// message of its `Reconciling` condition once that says `reason`.
async fn waiting_past(h: &Harness, max_wait: &str, reason: &str) -> String {
    let mut spec = rollout_spec(steps(&[(50, "1s"), (100, "1s")]));
    spec["analysis"]["maxWait"] = json!(max_wait);
    create::<ConfigRollout>(&h.env, "checkout", spec).await;
    let waiting = rollout(h, "checkout", |r| has(r, "Reconciling", "True", reason)).await;
    let (_, _, message) = condition(&waiting, "Reconciling").unwrap();
    message
}

/// Once the rollout `checkout` is rolled back: its last decision a `RollBack` saying `why`, and
/// every key back on the stable config.
async fn rolled_back_saying(h: &Harness, keys: &[(String, String)], why: &str) {
    let rolled = rollout(h, "checkout", |r| status(r).phase == Phase::RolledBack).await;
    let decision = status(&rolled).decisions.last().cloned().unwrap();
    assert_eq!(decision.decision, Decision::RollBack);
    assert!(decision.message.contains(why), "{}", decision.message);
    let stable = slug(h, "stable").await;
    let back = all_on(h, keys, &stable, WAIT).await;
    assert!(back.is_some(), "every key is back on the stable config");
}

/// Sleeps `for_`, then reads the rollout `checkout`, still progressing.
async fn progressing_after(h: &Harness, for_: Duration) -> ConfigRollout {
    tokio::time::sleep(for_).await;
    let r = h.env.api::<ConfigRollout>().get("checkout").await.unwrap();
    assert_eq!(
        status(&r).phase,
        Phase::Progressing,
        "{:?}",
        status(&r).decisions.last()
    );
    r
}

/// Merge-patches `annotations` onto the object `name` of kind `K`.
async fn annotate_object<K: support::NamespacedKind>(h: &Harness, name: &str, annotations: Value) {
    let patch = json!({"metadata": {"annotations": annotations}});
    support::merge_patch(&h.env.api::<K>(), name, patch).await;
}

/// `r` is recorded and claimed by the installation `aigw`.
fn assert_claimed_by_aigw(r: &ConfigRollout) {
    assert_eq!(status(r).installation.as_deref(), Some("aigw"));
    assert_eq!(
        r.annotations()
            .get("aigw.io/installation")
            .map(String::as_str),
        Some("aigw")
    );
    // The claim's writes name their field manager.
    let claimer = r.metadata.managed_fields.iter().flatten().find(|entry| {
        let fields = entry.fields_v1.as_ref().map(|f| f.0.to_string());
        fields.is_some_and(|f| f.contains("aigw.io/installation"))
    });
    assert_eq!(
        claimer.and_then(|entry| entry.manager.as_deref()),
        Some("aigw/installation")
    );
}

/// Waits up to `within` until every key's requests use the remote config `config`.
async fn all_on(
    h: &Harness,
    keys: &[(String, String)],
    config: &str,
    within: Duration,
) -> Option<()> {
    support::wait_until(within, || async {
        (remote_configs(h, keys).await == vec![config; 4]).then_some(())
    })
    .await
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
    let (h, keys, traffic) = healthy_traffic("rollout-ok").await;
    create_rollout(&h, "checkout", three_steps()).await;

    let done = h
        .wait_for::<ConfigRollout>("checkout", Duration::from_secs(90), |r| {
            status(r).phase != Phase::Progressing
        })
        .await;
    let sent = traffic.stop().await;
    let (done_status, decisions) = completed_in_three_steps(&done);
    let analysis = done_status.analysis.expect("the last analysis");
    assert!(analysis.candidate.requests >= 20, "{analysis:?}");
    assert_eq!(analysis.candidate.keys, 4);
    assert_eq!(done_status.moved_keys, KEYS);
    let completed = rollout(&h, "checkout", |r| has(r, "Ready", "True", "Completed")).await;
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
    h.env.delete::<ConfigRollout>("checkout").await;
    let back = all_on(&h, &keys, &stable, WAIT).await;
    assert!(back.is_some(), "a deleted rollout returns its keys");
    h.stop().await;
}

#[tokio::test]
async fn a_failing_candidate_is_rolled_back_at_the_first_step() {
    let (h, keys) = with_keys("rollout-bad").await;
    h.faults(json!({"gateway_seed": 5, "providers": {
        "candidate-openai": {"error_rate": 0.3, "status": 503}}}))
        .await;
    let traffic = Traffic::start(&h).await;
    let moved = start_rollout(&h, "checkout", three_steps()).await;
    let step_started = Instant::now();
    assert_eq!(status(&moved).moved_keys, ["key-a"]);
    let rolled_back = rollout(&h, "checkout", |r| status(r).phase != Phase::Progressing).await;
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
    let back = all_on(&h, &keys, &stable, Duration::from_secs(6)).await;
    let sent = traffic.stop().await;
    assert!(back.is_some(), "every key is back on the stable config");
    let settled = rollout(&h, "checkout", |r| {
        has(r, "Ready", "False", "RolledBack")
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
    let shrinking = steps(&[(50, "1s"), (10, "1s"), (100, "1s")]);
    let object: ConfigRollout =
        support::objects::object("ConfigRollout", "shrinks", rollout_spec(shrinking));
    let error = api.create(&Default::default(), &object).await.unwrap_err();
    assert!(
        error.to_string().contains("weights must only grow"),
        "{error}"
    );
    let mut unfinished = rollout_spec(steps(&[(50, "1s")]));
    let object: ConfigRollout =
        support::objects::object("ConfigRollout", "half", unfinished.clone());
    let error = api.create(&Default::default(), &object).await.unwrap_err();
    assert!(error.to_string().contains("must be 100"), "{error}");
    unfinished["apiKeySelector"] = json!({});
    unfinished["steps"] = steps(&[(100, "1s")]);
    let object: ConfigRollout = support::objects::object("ConfigRollout", "all", unfinished);
    let error = api.create(&Default::default(), &object).await.unwrap_err();
    assert!(error.to_string().contains("must not be empty"), "{error}");
    // An operator the selector cannot parse would have stranded moved keys on the candidate
    // (and held the rollout's finalizer): refused, as In without values is.
    for expression in [
        json!({"key": "team", "operator": "in", "values": ["pay"]}),
        json!({"key": "team", "operator": "In"}),
        json!({"key": "team", "operator": "Exists", "values": ["pay"]}),
    ] {
        let mut typo = rollout_spec(steps(&[(100, "1s")]));
        typo["apiKeySelector"] = json!({"matchExpressions": [expression]});
        let object: ConfigRollout = support::objects::object("ConfigRollout", "typo", typo);
        let error = api.create(&Default::default(), &object).await.unwrap_err();
        assert!(
            error
                .to_string()
                .contains("operator In, NotIn, Exists or DoesNotExist"),
            "{expression}: {error}"
        );
    }
    // A window reaching before the earliest time there is panicked the controller of every
    // namespace's rollouts.
    for (field, path) in [
        ("window", "analysis.window"),
        ("maxWait", "analysis.maxWait"),
    ] {
        let mut endless = rollout_spec(steps(&[(100, "1s")]));
        endless["analysis"][field] = json!("1000000000h");
        let object: ConfigRollout = support::objects::object("ConfigRollout", "endless", endless);
        let error = api.create(&Default::default(), &object).await.unwrap_err();
        let expected = format!("spec.{path} must be at most 8760h (a year)");
        assert!(error.to_string().contains(&expected), "{error}");
    }
    let object: ConfigRollout = support::objects::object(
        "ConfigRollout",
        "endless",
        rollout_spec(steps(&[(100, "9000h")])),
    );
    let error = api.create(&Default::default(), &object).await.unwrap_err();
    assert!(
        error.to_string().contains("pause must be at most 8760h"),
        "{error}"
    );
    // A window under 1s holds no request to judge a step on: a pause of 0s only with a window.
    let mut empty = rollout_spec(steps(&[(50, "1s"), (100, "0s")]));
    empty["analysis"].as_object_mut().unwrap().remove("window");
    let dry_run = kube::api::PostParams {
        dry_run: true,
        ..Default::default()
    };
    let (pause, window) = (
        "spec.steps[].pause must be at least 1s",
        "spec.analysis.window must be at least 1s",
    );
    for (set, refused) in [
        (None, Some(pause)),
        (Some("0s"), Some(window)),
        (Some("500us"), Some(window)),
        (Some("1m"), None),
    ] {
        if let Some(set) = set {
            empty["analysis"]["window"] = json!(set);
        }
        let object: ConfigRollout =
            support::objects::object("ConfigRollout", "empty", empty.clone());
        match (api.create(&dry_run, &object).await, refused) {
            (Err(error), Some(refused)) => support::assert_mentions(&error.to_string(), &[refused]),
            (Ok(_), None) => {}
            (result, _) => panic!("window {set:?}: {result:?}"),
        }
    }

    let mut elsewhere = rollout_spec(steps(&[(100, "1s")]));
    elsewhere["candidateConfigRef"] = json!({"name": "candidate", "namespace": "kube-system"});
    create::<ConfigRollout>(&h.env, "elsewhere", elsewhere).await;
    let refused = rollout(&h, "elsewhere", |r| {
        has(r, "Stalled", "True", "InvalidSpec")
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
    let (h, keys) = rolling(
        "rollout-cli",
        "checkout",
        steps(&[(50, "10m"), (100, "10m")]),
    )
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
    let aborted = rollout(&h, "checkout", |r| {
        has(r, "Ready", "False", "Aborted")
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
    rollout(&h, "checkout", |r| {
        status(r).phase == Phase::Progressing && status(r).step_started_at.is_some()
    })
    .await;
    aigw_rollout(&h, &["promote", "checkout"]).await;
    let promoted = rollout(&h, "checkout", |r| has(r, "Ready", "True", "Completed")).await;
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
    create_rollout(&h, "checkout", three_steps()).await;
    for step in [0, 1, 2] {
        rollout(&h, "checkout", |r| status(r).current_step == Some(step)).await;
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
    completed(&h, traffic).await;
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

/// `spec.steps` shortened under way (paused at 75 % of [25, 50, 75, 100], now [75, 100]): the
/// rollout goes on from the step covering the keys already moved, judged anew; no key moves
/// unjudged and it completes (before: every key moved to the candidate, then Stalled on "no
/// step 2").
#[tokio::test]
async fn steps_shortened_under_way_go_on_from_the_step_covering_the_moved_keys() {
    let (h, keys, traffic) = healthy_traffic("rollout-replan").await;
    let four = steps(&[(25, "1s"), (50, "1s"), (75, "1h"), (100, "1s")]);
    create_rollout(&h, "checkout", four).await;
    let paused = h
        .wait_for::<ConfigRollout>("checkout", Duration::from_secs(90), |r| {
            status(r).current_step == Some(2) && status(r).step_started_at.is_some()
        })
        .await;
    assert_eq!(
        status(&paused).moved_keys.len(),
        3,
        "{:#?}",
        status(&paused)
    );

    let edit = json!({"spec": {"steps": steps(&[(75, "1s"), (100, "1s")])}});
    h.env
        .api::<ConfigRollout>()
        .patch("checkout", &PatchParams::default(), &Patch::Merge(&edit))
        .await
        .unwrap();
    let replanned = rollout(&h, "checkout", |r| status(r).current_step != Some(2)).await;
    let replanned = status(&replanned);
    assert_eq!(
        (replanned.current_step, replanned.weight),
        (Some(0), Some(75)),
        "{replanned:#?}"
    );
    assert_eq!(replanned.moved_keys.len(), 3, "no key moved with the edit");

    let done = completed(&h, traffic).await;
    let decisions: Vec<Decision> = done.decisions.iter().map(|d| d.decision).collect();
    assert_eq!(
        decisions,
        [
            Decision::Proceed,
            Decision::Proceed,
            Decision::Proceed,
            Decision::Complete
        ],
        "the 75 % step of the new plan was judged before every key moved"
    );
    let candidate = slug(&h, "candidate").await;
    assert_eq!(remote_configs(&h, &keys).await, vec![candidate; 4]);
    h.stop().await;
}

/// The candidate Config edited while a step pauses (a new `versionId`): the step's pause and
/// analysis start again on the new document, so no step is judged on traffic that ran another
/// (before: the rollout went on, and the next steps moved keys onto a document never judged).
#[tokio::test]
async fn a_candidate_edited_mid_step_starts_the_step_again() {
    let (h, _keys, traffic) = healthy_traffic("rollout-edit").await;
    let started = start_rollout(&h, "checkout", steps(&[(50, "8s"), (100, "1s")])).await;
    let before = status(&started);
    let version = before
        .candidate_version_id
        .clone()
        .expect("the version judged");

    let edit = json!({"name": "candidate",
                      "config": {"provider": "@candidate-openai", "metadata": {"rev": "2"}}});
    h.env.patch_spec::<Config>("candidate", edit).await;
    let again = rollout(&h, "checkout", |r| {
        let s = status(r);
        s.candidate_version_id
            .as_ref()
            .is_some_and(|v| *v != version)
            && s.step_started_at.is_some()
    })
    .await;
    let again = status(&again);
    assert_eq!(again.current_step, Some(0), "{again:#?}");
    assert!(
        again.step_started_at > before.step_started_at,
        "the pause starts again: {again:#?}"
    );
    assert!(again.decisions.is_empty(), "{:?}", again.decisions);

    completed(&h, traffic).await;
    h.stop().await;
}

/// A second rollout over keys the first holds is refused, naming it, and moves nothing; the
/// first's candidate deleted mid-rollout rolls it back, every key back on the stable config.
#[tokio::test]
async fn a_second_rollout_over_the_same_keys_is_refused_and_a_deleted_candidate_rolls_back() {
    let (h, keys) = rolling("rollout-two", "first", steps(&[(50, "10m"), (100, "10m")])).await;
    let stable = slug(&h, "stable").await;
    let candidate = slug(&h, "candidate").await;
    let split = [candidate.as_str(), &candidate, &stable, &stable];
    assert_eq!(remote_configs(&h, &keys).await, split);

    create_rollout(&h, "second", steps(&[(100, "1s")])).await;
    let refused = rollout(&h, "second", |r| has(r, "Stalled", "True", "InvalidSpec")).await;
    let (_, _, message) = condition(&refused, "Stalled").unwrap();
    assert!(message.contains("is in ConfigRollout first"), "{message}");
    assert!(status(&refused).moved_keys.is_empty());
    assert_eq!(remote_configs(&h, &keys).await, split);

    // Once no ApiKey changes any more, only the candidate's deletion can wake the rollout: its
    // pause has ten minutes to run, and the rollback must not wait for them.
    keys_quiet(&h, &keys).await;
    delete_config_and_see_the_rollback(
        &h,
        &keys,
        "candidate",
        "first",
        &stable,
        "the candidate Config candidate is gone",
    )
    .await;
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
        .wait_for::<Config>("candidate", WAIT, |c| c.is_true("Stalled"))
        .await;
    assert!(refused.status.unwrap().slug.is_none());
    create_rollout(&h, "checkout", steps(&[(100, "1s")])).await;
    let waiting = rollout(&h, "checkout", |r| {
        has(r, "Reconciling", "True", "ConfigNotReady")
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
    let (h, keys) = with_keys("rollout-quiet").await;
    let message = waiting_past(&h, "3s", "WaitingForTraffic").await;
    assert!(
        message.contains("0 candidate requests of the 20 needed"),
        "{message}"
    );
    rolled_back_saying(&h, &keys, "not enough traffic within analysis.maxWait").await;
    h.stop().await;
}

// ---- issue 31, a fresh attack ----

/// Deletes Config `config`, then sees rollout `rollout` decide `RollBack` with a message
/// containing `why`, and every key back on `stable`.
async fn delete_config_and_see_the_rollback(
    h: &Harness,
    keys: &[(String, String)],
    config: &str,
    rollout: &str,
    stable: &str,
    why: &str,
) {
    h.env.delete::<Config>(config).await;
    let rolled = h
        .wait_for::<ConfigRollout>(rollout, WAIT, |r| status(r).phase == Phase::RolledBack)
        .await;
    let decision = status(&rolled).decisions.last().cloned().unwrap();
    assert_eq!(decision.decision, Decision::RollBack);
    assert!(decision.message.contains(why), "{}", decision.message);
    let back = support::wait_until(WAIT, || async {
        (remote_configs(h, keys).await == vec![stable.to_string(); 4]).then_some(())
    })
    .await;
    assert!(back.is_some(), "every key is back on the stable config");
}

/// Waits until no ApiKey of `keys` has changed for 3 s (their resourceVersions held).
async fn keys_quiet(h: &Harness, keys: &[(String, String)]) {
    let versions = || async {
        let mut versions = Vec::new();
        for (name, _) in keys {
            let key = h.env.api::<ApiKey>().get(name).await.unwrap();
            versions.push(key.resource_version());
        }
        versions
    };
    let quiet = support::wait_until(WAIT, || async {
        let before = versions().await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        (versions().await == before).then_some(())
    })
    .await;
    assert!(quiet.is_some(), "the ApiKeys kept changing");
}

async fn annotate(h: &Harness, key: &str, annotations: Value) {
    annotate_object::<ApiKey>(h, key, annotations).await;
}

/// A rollout is claimed like every other kind (annotation, then `status.installation`): a second
/// installation over the same namespace neither judges it nor moves its keys.
#[tokio::test]
async fn a_second_installation_leaves_a_claimed_rollout_alone() {
    use support::harness::CLUSTER_LABEL;
    let (h, keys) = with_keys("roll-inst").await;
    let started = start_rollout(&h, "checkout", steps(&[(25, "120s"), (100, "2s")])).await;
    let ns = h.env.namespace.clone();
    let b = h
        .installation("inst-b", &format!("{CLUSTER_LABEL}={ns}"))
        .await;
    let r = progressing_after(&h, Duration::from_secs(10)).await;
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
    assert_claimed_by_aigw(&started);
    drop(b);
    h.stop().await;
}

/// An `aigw.io/installation` annotation rewritten on a running rollout stalls it
/// (`ClaimChanged`), and its deletion still returns the keys and goes.
#[tokio::test]
async fn a_rewritten_rollout_claim_stalls_it_and_does_not_hold_its_deletion() {
    let (h, keys) = rolling("roll-clm", "checkout", steps(&[(25, "60s"), (100, "2s")])).await;
    annotate_object::<ConfigRollout>(&h, "checkout", json!({"aigw.io/installation": "nobody"}))
        .await;
    let stalled = rollout(&h, "checkout", |r| {
        has(r, "Stalled", "True", "ClaimChanged")
    })
    .await;
    assert_eq!(status(&stalled).installation.as_deref(), Some("aigw"));
    h.env.delete::<ConfigRollout>("checkout").await;
    let rollouts = h.env.api::<ConfigRollout>();
    let gone = support::gone_within(&rollouts, "checkout", WAIT).await;
    let left = rollouts.get_opt("checkout").await.unwrap();
    assert!(
        gone,
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
    let (h, keys) = with_keys("roll-pro").await;
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
        k.status.and_then(|s| s.managed.installation)
    })
    .await;
    assert_eq!(recorded.as_deref(), Some("inst-b"));
    create_rollout(&h, "checkout", steps(&[(25, "120s"), (100, "2s")])).await;
    rollout(&h, "checkout", |r| {
        says(r, "Stalled", "True", "belongs to another installation")
    })
    .await;
    annotate_object::<ConfigRollout>(&h, "checkout", json!({"aigw.io/rollout-action": "promote"}))
        .await;
    let r = progressing_after(&h, Duration::from_secs(8)).await;
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
    create_rollout(&h, "checkout", steps(&[(25, "20s"), (100, "2s")])).await;
    for field in ["candidateConfigRef", "stableConfigRef"] {
        let changed = json!({field: {"name": "candidate2"}});
        let message =
            support::refused_patch(&h.env.api::<ConfigRollout>(), "checkout", changed).await;
        assert!(
            message.contains(&format!("spec.{field} is immutable"))
                && message.contains("create a new ConfigRollout"),
            "{message}"
        );
    }
    h.stop().await;
}

/// Merge-patches `spec` into the ApiKey `name`, then waits until it carries no rollout
/// annotation; `None` if it still does after [`WAIT`].
async fn edited_then_released(h: &Harness, name: &str, spec: Value) -> Option<()> {
    let edit = json!({ "spec": spec });
    h.env
        .api::<ApiKey>()
        .patch(name, &PatchParams::default(), &Patch::Merge(&edit))
        .await
        .unwrap();
    support::wait_until(WAIT, || async {
        let key = h.env.api::<ApiKey>().get(name).await.unwrap();
        let annotations = key.annotations();
        (!annotations.contains_key("aigw.io/rollout-config")
            && !annotations.contains_key("aigw.io/rollout"))
        .then_some(())
    })
    .await
}

/// A completed rollout holds its keys on the candidate until deleted, but lets go of a key
/// promoted in Git (its own defaults name the candidate: no override, no write) and of one it
/// may no longer take (observed only): that one goes back to its own defaults, and the rollout
/// says so.
#[tokio::test]
async fn a_completed_rollout_lets_go_of_a_promoted_key_and_of_an_unfit_one() {
    let (h, keys) = rolling("roll-held", "checkout", steps(&[(50, "10m"), (100, "10m")])).await;
    annotate_object::<ConfigRollout>(&h, "checkout", json!({"aigw.io/rollout-action": "promote"}))
        .await;
    rollout(&h, "checkout", |r| has(r, "Ready", "True", "Completed")).await;
    let candidate = slug(&h, "candidate").await;
    let stable = slug(&h, "stable").await;
    assert!(all_on(&h, &keys, &candidate, WAIT).await.is_some());

    let promoted = json!({"defaults": {"config": "candidate"}});
    let kept = "key-a kept its override";
    assert!(
        edited_then_released(&h, "key-a", promoted).await.is_some(),
        "{kept}"
    );
    h.wait_for::<ApiKey>("key-a", WAIT, |k| {
        support::api_keys::ready(k) && k.status.as_ref().unwrap().config_override.is_none()
    })
    .await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let held = h.env.api::<ConfigRollout>().get("checkout").await.unwrap();
    assert!(
        has(&held, "Ready", "True", "Completed"),
        "{:?}",
        status(&held).conditions
    );
    let let_go = ["key-b", "key-c", "key-d"];
    assert_eq!(status(&held).moved_keys, let_go, "key-a is let go");
    assert_eq!(remote_configs(&h, &keys).await, vec![candidate.clone(); 4]);
    assert_eq!(
        config_writes(&h, &keys[0].1).await,
        [json!(stable), json!(candidate)],
        "the promoted key was written again"
    );

    let observed = json!({"managementPolicy": "Observe"});
    let stayed = "key-b stayed on the candidate";
    assert!(
        edited_then_released(&h, "key-b", observed).await.is_some(),
        "{stayed}"
    );
    let refused = rollout(&h, "checkout", |r| has(r, "Stalled", "True", "KeyRefused")).await;
    let (_, _, message) = condition(&refused, "Stalled").unwrap();
    assert!(
        message.contains("ApiKey key-b is observed only"),
        "{message}"
    );
    // Observed only, it applies nothing: the message does not claim it is back.
    let runs = "it runs Config candidate until its own reconcile applies its defaults";
    assert!(message.contains(runs), "{message}");
    h.stop().await;
}

/// A moved key re-tagged by hand to a rollout that does not hold it is still this rollout's:
/// the abort returns it, and does not say every key is back while one is on the candidate.
#[tokio::test]
async fn a_retagged_moved_key_is_returned_by_the_abort() {
    let (h, keys) = rolling("roll-tag", "checkout", steps(&[(25, "60s"), (100, "2s")])).await;
    annotate(&h, "key-a", json!({"aigw.io/rollout": "ghost"})).await;
    annotate_object::<ConfigRollout>(&h, "checkout", json!({"aigw.io/rollout-action": "abort"}))
        .await;
    let done = rollout(&h, "checkout", |r| {
        says(r, "Stalled", "True", "every moved key is back")
    })
    .await;
    assert_eq!(status(&done).phase, Phase::Aborted);
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

/// Puts `key` on the candidate by hand, naming `rollout`, and gives the operator 8 s.
async fn hand_annotate(h: &Harness, key: &str, rollout: &str) {
    let annotations = json!({"aigw.io/rollout-config": "candidate", "aigw.io/rollout": rollout});
    annotate(h, key, annotations).await;
    tokio::time::sleep(Duration::from_secs(8)).await;
}

/// `aigw.io/rollout-config` is honoured only while `aigw.io/rollout` names a ConfigRollout of
/// the namespace that moved the key: written by hand (naming no rollout, or one that never
/// moved the key), it moves nothing.
#[tokio::test]
async fn a_hand_written_rollout_annotation_moves_no_key() {
    let (h, keys) = with_keys("roll-hand").await;
    let (stable, candidate) = (slug(&h, "stable").await, slug(&h, "candidate").await);
    // Naming no rollout.
    hand_annotate(&h, "key-b", "ghost").await;
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
    start_rollout(&h, "checkout", steps(&[(25, "60s"), (100, "2s")])).await;
    hand_annotate(&h, "key-c", "checkout").await;
    assert_eq!(
        remote_configs(&h, &keys).await,
        [candidate, stable.clone(), stable.clone(), stable],
        "only key-a, which the rollout moved, is on the candidate"
    );
    let c = h.env.api::<ApiKey>().get("key-c").await.unwrap();
    assert_eq!(c.status.unwrap().config_override, None);
    h.stop().await;
}

/// A tag naming a rollout that does not hold the key (gone without its cleanup, or written by
/// hand) holds nothing: a rollout selecting the key starts, and moves it under its own tag.
#[tokio::test]
async fn a_stale_rollout_tag_does_not_hold_a_key() {
    let (h, keys) = with_keys("roll-stale").await;
    hand_annotate(&h, "key-a", "ghost").await;
    let started = start_rollout(&h, "checkout", steps(&[(25, "60s"), (100, "2s")])).await;
    assert_eq!(status(&started).moved_keys, ["key-a"]);
    let candidate = slug(&h, "candidate").await;
    let moved = support::wait_until(WAIT, || async {
        (remote_configs(&h, &keys).await[0] == candidate).then_some(())
    })
    .await;
    assert!(moved.is_some(), "key-a was not moved");
    let a = h.env.api::<ApiKey>().get("key-a").await.unwrap();
    let tag = a.annotations().get("aigw.io/rollout").map(String::as_str);
    assert_eq!(tag, Some("checkout"));
    h.stop().await;
}

/// A moved key taken out of the selector mid-step goes back to its own defaults before the
/// step goes on, and is counted in neither cohort.
#[tokio::test]
async fn a_moved_key_leaving_the_selector_is_returned_and_not_counted() {
    let (h, keys) = with_keys("roll-sel").await;
    let moved = start_rollout(&h, "checkout", steps(&[(25, "3s"), (100, "2s")])).await;
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
    let judged = rollout(&h, "checkout", |r| {
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

// ---- a real operator process, SIGKILLed ----

/// One `aigw operator` process over the harness's namespace, emulator and installation (the
/// in-process operator stopped first), under the chart's RBAC. Killed with SIGKILL when
/// dropped; its log is printed if the test fails.
struct OperatorProcess(support::cli::Process);

impl OperatorProcess {
    fn start(h: &Harness, dir: &std::path::Path, n: usize) -> Self {
        use support::harness::{CLUSTER_LABEL, TOKEN};
        let token_file = dir.join("token");
        std::fs::write(&token_file, TOKEN).unwrap();
        let kubeconfig = h.identity.kubeconfig_file(dir);
        let mut command = support::cli::command();
        command
            .arg("operator")
            .args(["--management-url", &h.emulator.management_url()])
            .args(["--gateway-url", &h.emulator.gateway_url()])
            .arg("--token-file")
            .arg(&token_file)
            .args(["--namespace", &h.env.namespace])
            .args([
                "--cluster-selector",
                &format!("{CLUSTER_LABEL}={}", h.env.namespace),
            ])
            .args(["--metrics-addr", "127.0.0.1:0"])
            .arg("--leader-elect=false")
            // The harness's operator's installation, which recorded the keys.
            .args(["--installation-id", "aigw"])
            // Where the harness's operator keeps its hash key (the Lease namespace is only
            // that, without leader election).
            .args(["--leader-election-namespace", &h.hash_key_namespace])
            .env("KUBECONFIG", kubeconfig)
            .env_remove("POD_NAMESPACE")
            .env_remove("AIGW_LEADER_ELECT")
            .env_remove("AIGW_CONNECTION_SECRET_NAMESPACE");
        let log = dir.join(format!("operator-{n}.log"));
        Self(support::cli::Process::spawn(command, log))
    }

    /// SIGKILL, as the kernel's OOM killer or a node loss would stop it: no cleanup runs.
    fn kill(mut self) -> std::process::ExitStatus {
        self.0.signal("-KILL");
        self.0.child.wait().unwrap()
    }
}

/// Polls the rollout every 20 ms (rather than `wait_for`'s 100 ms) until `done`, so a kill
/// lands as close after the boundary as the test can see it.
async fn poll_rollout(h: &Harness, done: impl Fn(&ConfigRollout) -> bool) -> ConfigRollout {
    let api = h.env.api::<ConfigRollout>();
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Some(r) = api.get_opt("checkout").await.unwrap()
            && done(&r)
        {
            return r;
        }
        assert!(
            Instant::now() < deadline,
            "timed out: {:#?}",
            api.get_opt("checkout").await.unwrap().map(|r| status(&r))
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Which keys carry the annotation that puts them on the candidate.
async fn annotated_keys(h: &Harness) -> Vec<String> {
    let mut annotated = Vec::new();
    for name in KEYS {
        let key = h.env.api::<ApiKey>().get(name).await.unwrap();
        if key.annotations().contains_key("aigw.io/rollout-config") {
            annotated.push(name.to_string());
        }
    }
    annotated
}

/// A real `aigw operator` process SIGKILLed at each step boundary (as soon as the status
/// records the step, before or while its keys move) and started again: the rollout completes,
/// and the emulator's write log shows each key's config changed exactly once per move.
#[tokio::test]
async fn a_sigkilled_operator_process_resumes_at_each_step_boundary() {
    let mut h = Harness::start("roll-kill").await;
    let keys = setup(&h).await;
    h.stop_operator().await;
    let dir = tempfile::tempdir().unwrap();
    let traffic = Traffic::start(&h).await;
    let mut operator = OperatorProcess::start(&h, dir.path(), 0);
    create_rollout(&h, "checkout", three_steps()).await;
    for step in [0u32, 1, 2] {
        let seen = poll_rollout(&h, |r| status(r).current_step == Some(step)).await;
        let exit = operator.kill();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&exit),
            Some(9),
            "{exit:?}"
        );
        let killed = h.env.api::<ConfigRollout>().get("checkout").await.unwrap();
        println!(
            "SIGKILL at step {step}: status recorded movedKeys {:?} (seen {:?}), stepStartedAt {:?}; keys annotated at the kill {:?}",
            status(&killed).moved_keys,
            status(&seen).moved_keys,
            status(&killed).step_started_at,
            annotated_keys(&h).await
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        operator = OperatorProcess::start(&h, dir.path(), step as usize + 1);
    }
    let done = poll_rollout(&h, |r| status(r).phase != Phase::Progressing).await;
    let sent = traffic.stop().await;
    let (_, decisions) = completed_in_three_steps(&done);
    let stable = slug(&h, "stable").await;
    let candidate = slug(&h, "candidate").await;
    let moved = all_on(&h, &keys, &candidate, WAIT).await;
    assert!(moved.is_some(), "every key is on the candidate");
    for (name, id) in &keys {
        let writes = config_writes(&h, id).await;
        println!("{name}: write log {writes:?}");
        assert_eq!(
            writes,
            [json!(stable), json!(candidate)],
            "{name}: one create on the stable config, one move"
        );
    }
    println!("completed after {sent} requests and 3 SIGKILLs: {decisions:?}");
    drop(operator);
    h.stop().await;
}

/// A real operator process SIGKILLed right after it recorded a rollback (before or while the
/// moved key returns), and started again: the key returns once, its write log
/// `[stable, candidate, stable]`; the keys never moved are written once.
#[tokio::test]
async fn a_sigkilled_operator_process_finishes_a_rollback() {
    let mut h = Harness::start("roll-kill-back").await;
    let keys = setup(&h).await;
    h.stop_operator().await;
    h.faults(json!({"gateway_seed": 5, "providers": {
        "candidate-openai": {"error_rate": 0.3, "status": 503}}}))
        .await;
    let dir = tempfile::tempdir().unwrap();
    let traffic = Traffic::start(&h).await;
    let steps = steps(&[(25, "2s"), (100, "2s")]);
    let operator = OperatorProcess::start(&h, dir.path(), 0);
    create::<ConfigRollout>(&h.env, "checkout", rollout_spec(steps)).await;
    let decided = poll_rollout(&h, |r| status(r).phase != Phase::Progressing).await;
    operator.kill();
    assert_eq!(status(&decided).phase, Phase::RolledBack);
    println!(
        "SIGKILL after the rollback was recorded: keys annotated at the kill {:?}",
        annotated_keys(&h).await
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let operator = OperatorProcess::start(&h, dir.path(), 1);
    let stable = slug(&h, "stable").await;
    let candidate = slug(&h, "candidate").await;
    let back = all_on(&h, &keys, &stable, WAIT).await;
    traffic.stop().await;
    assert!(back.is_some(), "every key is back on the stable config");
    rollout(&h, "checkout", |r| {
        condition(r, "Ready").is_some_and(|(s, reason, m)| {
            s == "False" && reason == "RolledBack" && m.contains("every moved key is back")
        })
    })
    .await;
    for (name, id) in &keys {
        println!("{name}: write log {:?}", config_writes(&h, id).await);
    }
    assert_eq!(
        config_writes(&h, &keys[0].1).await,
        [json!(stable), json!(candidate), json!(stable)]
    );
    for (_, id) in &keys[1..] {
        assert_eq!(config_writes(&h, id).await, [json!(stable)]);
    }
    drop(operator);
    h.stop().await;
}

/// The stable Config deleted mid-step: the rollout rolls back, saying so, every key back on the
/// stable config; that Config's deletion waits (`StillReferenced`, naming the keys and the
/// rollout, no DELETE of the remote config) while anything names it, and goes once nothing does.
#[tokio::test]
async fn a_deleted_stable_config_rolls_back_and_is_held_while_keys_name_it() {
    use support::objects::Conditions;
    const DELETE: &str = "DELETE /ai_gw/v2/configs/{slug}";
    let (h, keys) = rolling(
        "roll-stable",
        "checkout",
        steps(&[(50, "10m"), (100, "10m")]),
    )
    .await;
    let (stable, candidate) = (slug(&h, "stable").await, slug(&h, "candidate").await);
    assert_eq!(
        remote_configs(&h, &keys).await,
        [candidate.as_str(), &candidate, &stable, &stable]
    );

    keys_quiet(&h, &keys).await;
    delete_config_and_see_the_rollback(
        &h,
        &keys,
        "stable",
        "checkout",
        &stable,
        "the stable Config stable is being deleted",
    )
    .await;
    let (held, message) = h
        .env
        .wait_condition::<Config>("stable", WAIT, ("Stalled", "StillReferenced"))
        .await;
    println!("held: {message}");
    for holder in [
        "ApiKey key-a",
        "ApiKey key-b",
        "ApiKey key-c",
        "ApiKey key-d",
        "ConfigRollout checkout",
    ] {
        assert!(message.contains(holder), "{holder}: {message}");
    }
    assert!(held.metadata.deletion_timestamp.is_some());
    assert_eq!(h.count(DELETE).await, 0, "no DELETE of the stable config");
    for (name, id) in &keys {
        let writes = config_writes(&h, id).await;
        println!("{name}: write log {writes:?}");
    }
    assert_eq!(
        config_writes(&h, &keys[0].1).await,
        [json!(stable), json!(candidate), json!(stable)]
    );

    // The rollout gone, the keys still hold it; the keys gone, it goes.
    h.env.delete::<ConfigRollout>("checkout").await;
    let still = h
        .wait_for::<Config>("stable", WAIT, |c| {
            c.condition("Stalled").is_some_and(|(s, r, m)| {
                s == "True" && r == "StillReferenced" && !m.contains("ConfigRollout")
            })
        })
        .await;
    println!("held: {}", still.condition("Stalled").unwrap().2);
    assert_eq!(h.count(DELETE).await, 0);
    for name in KEYS {
        h.env.delete::<ApiKey>(name).await;
    }
    let gone = support::wait_until(WAIT, || async {
        let c = h.env.api::<Config>().get_opt("stable").await.unwrap();
        c.is_none().then_some(())
    })
    .await;
    assert!(
        gone.is_some(),
        "the stable Config goes once nothing names it"
    );
    assert_eq!(h.count(DELETE).await, 1);
    h.stop().await;
}

/// The operator away past the pause and `analysis.maxWait`, then one failed telemetry read on
/// its return: the wait counts from that failure (`status.telemetryFailingSince`), so the read
/// is tried again and the step judged once the telemetry answers (before: rolled back at once).
#[tokio::test]
async fn a_telemetry_failure_after_the_operator_was_away_is_read_again() {
    let (mut h, _keys, traffic) = healthy_traffic("roll-away").await;
    let mut spec = rollout_spec(steps(&[(50, "1s"), (100, "1s")]));
    spec["analysis"]["maxWait"] = json!("4s");
    create::<ConfigRollout>(&h.env, "checkout", spec).await;
    rollout(&h, "checkout", |r| status(r).step_started_at.is_some()).await;
    h.stop_operator().await;
    tokio::time::sleep(Duration::from_secs(8)).await;
    let providers = json!({
        "stable-openai": {"error_rate": 0.01, "status": 502, "latency_ms": 2},
        "candidate-openai": {"latency_ms": 2}});
    h.faults(json!({"gateway_seed": 3, "providers": providers,
        "failing_routes": {"GET /ai_gw/v2/logs/groups/{dimension}": 503}}))
        .await;
    h.restart_operator().await;
    let failing = rollout(&h, "checkout", |r| {
        has(r, "Reconciling", "True", "TelemetryUnavailable")
            || status(r).phase != Phase::Progressing
    })
    .await;
    assert_eq!(
        status(&failing).phase,
        Phase::Progressing,
        "{:?}",
        status(&failing).decisions
    );
    assert!(status(&failing).telemetry_failing_since.is_some());
    h.faults(json!({"gateway_seed": 3, "providers": providers}))
        .await;
    let done = completed(&h, traffic).await;
    assert_eq!(done.telemetry_failing_since, None);
    h.stop().await;
}

/// The telemetry failing (the emulator's `failing_routes`: every read of the status-code groups
/// answered 503) is reported while it lasts (`TelemetryUnavailable`, with the API's answer) and,
/// past `analysis.maxWait`, rolls the step back, the decision carrying the API's answer.
#[tokio::test]
async fn a_telemetry_outage_past_max_wait_rolls_back() {
    let (h, keys) = with_keys("roll-tele").await;
    h.faults(json!({"failing_routes": {"GET /ai_gw/v2/logs/groups/{dimension}": 503}}))
        .await;
    let message = waiting_past(&h, "5s", "TelemetryUnavailable").await;
    println!("while it fails: {message}");
    support::assert_mentions(&message, &["503", "failing_routes"]);
    assert!(message.contains("analysis.maxWait (5s)"), "{message}");
    let rolled = rollout(&h, "checkout", |r| status(r).phase == Phase::RolledBack).await;
    let decision = status(&rolled).decisions.last().cloned().unwrap();
    println!("decided: {}", decision.message);
    assert_eq!(decision.decision, Decision::RollBack);
    assert!(
        decision
            .message
            .contains("the telemetry could not be read within analysis.maxWait")
            && decision.message.contains("503")
            && decision.message.contains("failing_routes"),
        "{}",
        decision.message
    );
    let stable = slug(&h, "stable").await;
    let back = all_on(&h, &keys, &stable, WAIT).await;
    assert!(back.is_some(), "every key is back on the stable config");
    h.faults(json!({})).await;
    h.stop().await;
}

/// Telemetry that cannot be asked for (here: no `analysis.organisationId`, and a Connection
/// that names no TSG id) is waited for like an outage and rolled back past `maxWait`, the
/// reason on the rollout meanwhile (before: `Stalled` on the error with the moved keys left on
/// the candidate, `maxWait` never applied).
#[tokio::test]
async fn telemetry_that_cannot_be_asked_for_rolls_back_past_max_wait() {
    let (h, keys) = with_keys("roll-no-tsg").await;
    let mut spec = rollout_spec(steps(&[(50, "1s"), (100, "1s")]));
    spec["analysis"]["maxWait"] = json!("5s");
    spec["analysis"]
        .as_object_mut()
        .unwrap()
        .remove("organisationId");
    create::<ConfigRollout>(&h.env, "checkout", spec).await;
    let waiting = rollout(&h, "checkout", |r| {
        has(r, "Reconciling", "True", "TelemetryUnavailable")
    })
    .await;
    let (_, _, message) = condition(&waiting, "Reconciling").unwrap();
    support::assert_mentions(&message, &["organisationId", "analysis.maxWait (5s)"]);
    rolled_back_saying(&h, &keys, "could not be read within analysis.maxWait").await;
    h.stop().await;
}

/// A recorded rollout whose Connection leaves this installation's reach (relabelled out of its
/// `--cluster-selector`) is treated as every kind is: given back (its record and claim removed)
/// when it holds none of the installation's finalizers; left untouched (record, claim and
/// finalizer kept, nothing written) when it holds one.
#[tokio::test]
async fn a_rollout_whose_connection_leaves_reach_is_given_back_or_left_alone() {
    use support::harness::CLUSTER_LABEL;
    let h = Harness::start("roll-reach").await;
    let (name, connections) = h.connection_in_reach().await;
    // One refused before it adds its finalizer (a candidate of another namespace), one that
    // holds it (it waits for its Configs).
    let mut early = rollout_spec(steps(&[(100, "1s")]));
    early["connectionRef"] = json!({"name": name});
    early["candidateConfigRef"] = json!({"name": "candidate", "namespace": "kube-system"});
    create::<ConfigRollout>(&h.env, "early", early).await;
    let mut started = rollout_spec(steps(&[(100, "1s")]));
    started["connectionRef"] = json!({"name": name});
    create::<ConfigRollout>(&h.env, "started", started).await;
    let api = h.env.api::<ConfigRollout>();
    rollout(&h, "early", |r| {
        status(r).installation.as_deref() == Some("aigw")
            && has(r, "Stalled", "True", "InvalidSpec")
    })
    .await;
    rollout(&h, "started", |r| {
        status(r).installation.as_deref() == Some("aigw") && !r.finalizers().is_empty()
    })
    .await;

    support::merge_patch(
        &connections,
        &name,
        json!({"metadata": {"labels": {CLUSTER_LABEL: "elsewhere"}}}),
    )
    .await;
    // A relabelled Connection shows in no watch of the rollouts': a touch reconciles them now
    // (the drift interval would, later).
    tokio::time::sleep(Duration::from_secs(1)).await;
    for rollout in ["early", "started"] {
        support::merge_patch(
            &api,
            rollout,
            json!({"metadata": {"annotations": {"touched": "1"}}}),
        )
        .await;
    }
    let given = rollout(&h, "early", |r| {
        status(r).installation.is_none() && !r.annotations().contains_key("aigw.io/installation")
    })
    .await;
    println!("early: given back, annotations {:?}", given.annotations());
    let before = api.get("started").await.unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after = api.get("started").await.unwrap();
    assert_claimed_by_aigw(&after);
    assert!(!after.finalizers().is_empty(), "{:?}", after.finalizers());
    assert_eq!(
        before.resource_version(),
        after.resource_version(),
        "nothing written to a rollout left alone"
    );
    // Deleted while out of reach, it is held; back in reach, its deletion goes at once.
    h.deletion_held_until_back_in_reach(&api, "started", (&name, &connections), WAIT)
        .await;
    h.stop().await;
}

/// Whether a moved key's rollout holds it is read from the ConfigRollout watch cache: an
/// operator started over (every key reconciled afresh, each asking whether its rollout holds it)
/// sends no GET of the rollout.
#[tokio::test]
async fn a_moved_key_asks_the_watch_cache_not_the_apiserver() {
    let mut h = Harness::start("roll-cache").await;
    let keys = setup(&h).await;
    start_rollout(&h, "checkout", steps(&[(100, "10m")])).await;
    let candidate = slug(&h, "candidate").await;
    assert_eq!(remote_configs(&h, &keys).await, vec![candidate.clone(); 4]);
    let requests = h.restart_operator_recording().await;
    // Every key reconciled by the new operator, its override still applied.
    let mark = support::harness::log_mark();
    let seen = support::wait_until(WAIT, || async {
        let logs = support::harness::logs_since(mark);
        KEYS.iter()
            .all(|k| logs.contains(&format!("ApiKey/{}/{k}", h.env.namespace)))
            .then_some(())
    })
    .await;
    assert!(seen.is_some(), "every key reconciled after the restart");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let sent = requests.lock().unwrap().clone();
    let path = "/configrollouts/checkout";
    let gets: Vec<&String> = sent
        .iter()
        .filter(|r| r.starts_with("GET ") && r.contains(path))
        .collect();
    let key_reads = sent
        .iter()
        .filter(|r| r.starts_with("GET ") && r.contains("/apikeys"))
        .count();
    println!(
        "after the restart: {} requests, {} GETs of the rollout, {key_reads} reads of ApiKeys",
        sent.len(),
        gets.len()
    );
    assert!(gets.is_empty(), "{gets:?}");
    assert_eq!(remote_configs(&h, &keys).await, vec![candidate; 4]);
    h.stop().await;
}

/// A rollout aborted and left in place (as the docs allow) still lists its keys in
/// `status.movedKeys`; a later rollout over the same keys moves them once, and the aborted one
/// never writes them again, not even when it is deleted (fresh attack on issue 31, F-A: key-a's
/// config changed 398 times in 20 s, the two rollouts stripping each other's annotations).
#[tokio::test]
async fn an_aborted_rollout_left_in_place_leaves_a_later_rollouts_keys_alone() {
    let (h, keys) = with_keys("rollout-yank").await;
    let steps = steps(&[(50, "10m"), (100, "10m")]);
    create::<ConfigRollout>(&h.env, "first", rollout_spec(steps.clone())).await;
    rollout(&h, "first", |r| status(r).step_started_at.is_some()).await;
    annotate_object::<ConfigRollout>(&h, "first", json!({"aigw.io/rollout-action": "abort"})).await;
    let aborted = rollout(&h, "first", |r| has(r, "Stalled", "True", "Aborted")).await;
    assert_eq!(status(&aborted).moved_keys, ["key-a", "key-b"]);
    let stable = slug(&h, "stable").await;
    let candidate = slug(&h, "candidate").await;
    assert_eq!(remote_configs(&h, &keys).await, vec![stable.clone(); 4]);

    start_rollout(&h, "second", steps).await;
    tokio::time::sleep(Duration::from_secs(8)).await;
    let once_more = vec![
        json!(stable),
        json!(candidate),
        json!(stable),
        json!(candidate),
    ];
    let on_second = vec![
        candidate.clone(),
        candidate.clone(),
        stable.clone(),
        stable.clone(),
    ];
    // Each key where the second rollout put it, the first two moved once more, no further.
    let assert_on_second = || async {
        assert_eq!(remote_configs(&h, &keys).await, on_second);
        for (name, id) in &keys[..2] {
            assert_eq!(
                config_writes(&h, id).await,
                once_more,
                "{name}'s config writes"
            );
        }
    };
    assert_on_second().await;
    let first = h.env.api::<ConfigRollout>().get("first").await.unwrap();
    let (ready, reason, _) = condition(&first, "Stalled").unwrap();
    assert_eq!((ready.as_str(), reason.as_str()), ("True", "Aborted"));

    // Deleting the aborted rollout does not pull the later one's keys back either.
    h.env.delete::<ConfigRollout>("first").await;
    let gone = support::gone_within(&h.env.api::<ConfigRollout>(), "first", WAIT).await;
    assert!(gone, "the aborted rollout's deletion hangs");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_on_second().await;
    h.stop().await;
}

/// Two rollouts over the same keys created at the same moment: one takes the keys, the other
/// is refused, and each key's config changes at most once (a fresh attack on issue 31 tried
/// it; it held).
#[tokio::test]
async fn two_rollouts_created_together_move_each_key_at_most_once() {
    let (h, keys) = with_keys("rollout-race").await;
    let steps = steps(&[(50, "10m"), (100, "10m")]);
    let (a, b) = tokio::join!(
        create::<ConfigRollout>(&h.env, "first", rollout_spec(steps.clone())),
        create::<ConfigRollout>(&h.env, "second", rollout_spec(steps.clone()))
    );
    drop((a, b));
    tokio::time::sleep(Duration::from_secs(12)).await;
    for (name, id) in &keys {
        let writes = config_writes(&h, id).await;
        assert!(
            writes.len() <= 2,
            "{name}'s config changed {} times: {writes:?}",
            writes.len()
        );
    }
    h.stop().await;
}

/// An analysis with only relative thresholds is refused at admission: the last step moves
/// every key, which leaves no stable cohort to compare with (fresh attack on issue 31, F-B: a
/// candidate failing half its requests completed).
#[tokio::test]
async fn an_analysis_without_an_absolute_threshold_is_refused() {
    let h = Harness::start("rollout-rel").await;
    let mut spec = rollout_spec(steps(&[(100, "2s")]));
    spec["analysis"] = json!({"workspaceSlug": WORKSPACE, "organisationId": TSG, "window": "4s",
                              "minRequests": 20, "maxErrorRateOverStable": 0.05});
    let object: ConfigRollout = support::objects::object("ConfigRollout", "checkout", spec);
    let created = h
        .env
        .api::<ConfigRollout>()
        .create(&Default::default(), &object)
        .await;
    let error = support::refusal(created, "an analysis without an absolute threshold");
    assert!(
        error.contains("spec.analysis needs an absolute threshold"),
        "{error}"
    );
    h.stop().await;
}

/// A key a rollout moved, re-annotated by hand with another Config of the namespace in
/// `aigw.io/rollout-config` (its `aigw.io/rollout` left as the rollout wrote it): the key is
/// never put on that Config (fresh attack on issue 31, F-C: it was, with two extra writes).
#[tokio::test]
async fn a_hand_rewritten_rollout_config_moves_nothing() {
    let (h, keys) = with_keys("rollout-hand").await;
    create::<Config>(
        &h.env,
        "other",
        json!({"name": "other", "config": {"provider": "@other-openai"}}),
    )
    .await;
    h.wait_for::<Config>("other", WAIT, |c| {
        c.status.as_ref().is_some_and(|s| s.slug.is_some())
    })
    .await;
    start_rollout(&h, "checkout", steps(&[(50, "10m"), (100, "10m")])).await;
    annotate(&h, "key-a", json!({"aigw.io/rollout-config": "other"})).await;
    tokio::time::sleep(Duration::from_secs(8)).await;
    let other = slug(&h, "other").await;
    let writes = config_writes(&h, &keys[0].1).await;
    assert!(
        !writes.contains(&json!(other)),
        "key-a was put on Config other: {writes:?}"
    );
    h.stop().await;
}
