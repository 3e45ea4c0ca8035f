//! Promotion gates (issue 20 §1): prod's Config follows dev's (`spec.promotion.after`) and
//! applies a revision only once dev has proven it for the soak; a source that is not ready holds
//! it; `aigw.io/promote-now` lets one revision through; following another namespace needs the
//! Connection's grant. Real apiserver, real emulator; PUTs counted by `/_emulator/stats`.

mod support;

use std::time::Duration;

use aigw::resources::{Config, Guardrail};
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::TestEnv;
use support::harness::Harness;
use support::objects::{Conditions, routing};

const WAIT: Duration = Duration::from_secs(60);
const WORKSPACE: &str = "9f3c2b1a-0d4e-4f6a-8b7c-1e2d3f4a5b6c";
/// Long enough that nothing here waits for a drift check: a gate opens through the watch of
/// its source, or at the end of its soak.
const DRIFT: Duration = Duration::from_secs(120);
const PUT: &str = "PUT /ai_gw/v2/configs/{slug}";
const SOAK: Duration = Duration::from_secs(20);

/// A Config named `web` at `revision`, with `promotion` when given.
fn web(revision: &str, promotion: Option<Value>) -> Config {
    let mut spec = routing("web");
    if let Some(promotion) = promotion {
        spec["promotion"] = promotion;
    }
    serde_json::from_value(json!({
        "apiVersion": "aigw.io/v1alpha1", "kind": "Config",
        "metadata": {"name": "web", "annotations": {"aigw.io/revision": revision}},
        "spec": spec
    }))
    .unwrap()
}

fn after(namespace: &str, soak: &str) -> Value {
    json!({"after": [{"namespace": namespace, "name": "web"}], "soak": soak})
}

/// dev's `web` and prod's `web` (following dev's), both created at `r1` and Ready.
async fn both_at_r1(dev: &TestEnv, prod: &TestEnv, soak: &str) {
    dev.api::<Config>()
        .create(&PostParams::default(), &web("r1", None))
        .await
        .unwrap();
    prod.api::<Config>()
        .create(
            &PostParams::default(),
            &web("r1", Some(after(&dev.namespace, soak))),
        )
        .await
        .unwrap();
    for env in [dev, prod] {
        env.wait_for::<Config>("web", WAIT, |c| at_revision(c, "r1"))
            .await;
    }
}

/// One Git commit applied to `env`: the revision annotation and the retry attempts (and the
/// remote name, when given) in one write.
async fn commit(env: &TestEnv, revision: &str, attempts: u64, name: Option<&str>) {
    let mut spec = json!({"config": {"retry": {"attempts": attempts}}});
    if let Some(name) = name {
        spec["name"] = json!(name);
    }
    let patch = json!({"metadata": {"annotations": {"aigw.io/revision": revision}}, "spec": spec});
    env.api::<Config>()
        .patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

async fn annotate(env: &TestEnv, key: &str, value: &str) {
    let patch = json!({"metadata": {"annotations": {key: value}}});
    env.api::<Config>()
        .patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// Ready at its generation, with `revision` the newest entry of `status.history`.
fn at_revision(config: &Config, revision: &str) -> bool {
    config.ready() && newest(config).and_then(|v| v.revision.as_deref()) == Some(revision)
}

fn newest(config: &Config) -> Option<&aigw::resources::config::AppliedVersion> {
    config.status.as_ref().and_then(|s| s.history.first())
}

fn promoted_with(config: &Config, status: &str, reason: &str) -> bool {
    config
        .condition("Promoted")
        .is_some_and(|(s, r, _)| s == status && r == reason)
}

/// The remote document of the config `config` recorded, as the emulator holds it.
async fn remote(h: &Harness, config: &Config) -> Value {
    let slug = config.status.as_ref().unwrap().slug.clone().unwrap();
    let state = h.state().await;
    state["configs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["slug"] == slug.as_str())
        .cloned()
        .unwrap_or_else(|| panic!("no remote config {slug}: {state}"))
}

/// `aigw plan -f` of `manifest` against the harness's emulator, with the cluster in view:
/// its exit code and output.
async fn plan(h: &Harness, manifest: &Config) -> (Option<i32>, String) {
    plan_with(h, manifest, None).await
}

/// [`plan`] with `--grants-file` holding `grants` (the operator's default-connection grants).
async fn plan_with(h: &Harness, manifest: &Config, grants: Option<Value>) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("web.yaml");
    std::fs::write(&file, serde_yaml::to_string(manifest).unwrap()).unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, support::harness::TOKEN).unwrap();
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_aigw"));
    command
        .arg("plan")
        .arg("-f")
        .arg(&file)
        .arg("--kubeconfig")
        .arg(support::kubeconfig_path())
        .args(["--management-url", &h.emulator.management_url()])
        .arg("--token-file")
        .arg(&token);
    if let Some(grants) = grants {
        let file = dir.path().join("grants.yaml");
        std::fs::write(&file, serde_yaml::to_string(&grants).unwrap()).unwrap();
        command.arg("--grants-file").arg(file);
    }
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .expect("aigw runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code(), text)
}

/// `retry.attempts` of the remote document.
async fn attempts(h: &Harness, config: &Config) -> f64 {
    let remote = remote(h, config).await;
    remote["config"]["retry"]["attempts"]
        .as_f64()
        .unwrap_or_else(|| panic!("no retry.attempts: {remote}"))
}

/// When dev became Ready at its newest revision, as its status records it (the later of its
/// last write and its Ready transition).
fn ready_since(config: &Config) -> jiff::Timestamp {
    let applied: jiff::Timestamp = newest(config).unwrap().applied_at.parse().unwrap();
    let ready = config
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .unwrap()
        .last_transition_time
        .0;
    applied.max(ready)
}

#[tokio::test]
async fn prod_applies_a_revision_once_dev_has_been_ready_at_it_for_the_soak() {
    let h = Harness::start_two_teams("promo-soak", DRIFT, None).await;
    let (prod, dev) = (&h.env, h.other.as_ref().unwrap());
    both_at_r1(dev, prod, "20s").await;
    h.reset_stats().await;

    // One commit reaches both at once.
    commit(dev, "r2", 4, None).await;
    commit(prod, "r2", 4, None).await;
    let dev_at_r2 = dev
        .wait_for::<Config>("web", WAIT, |c| at_revision(c, "r2"))
        .await;
    let proven = ready_since(&dev_at_r2);
    let soaking = prod
        .wait_for::<Config>("web", WAIT, |c| promoted_with(c, "False", "Soaking"))
        .await;
    let (_, _, message) = soaking.condition("Promoted").unwrap();
    let eligible = proven + SOAK;
    assert!(
        message.contains(&format!("Config {}/web", dev.namespace))
            && message.contains("eligible at"),
        "names the source and when the change becomes eligible: {message}"
    );
    let (ready, reason, _) = soaking.condition("Ready").unwrap();
    assert_eq!((ready.as_str(), reason.as_str()), ("False", "Soaking"));
    assert!(
        soaking
            .condition("Reconciling")
            .is_some_and(|(s, _, _)| s == "True"),
        "a gated change is in progress, not stalled"
    );

    // Not one prod PUT until the soak has passed since dev was Ready at r2.
    while jiff::Timestamp::now() < eligible {
        assert_eq!(h.count(PUT).await, 1, "only dev's PUT: {}", h.stats().await);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let config = prod.api::<Config>().get("web").await.unwrap();
    assert_eq!(
        attempts(&h, &config).await,
        3.0,
        "prod keeps r1's document while it soaks"
    );

    let promoted = prod
        .wait_for::<Config>("web", SOAK, |c| at_revision(c, "r2"))
        .await;
    let applied: jiff::Timestamp = newest(&promoted).unwrap().applied_at.parse().unwrap();
    assert!(
        applied >= eligible,
        "applied at {applied}, eligible at {eligible}"
    );
    assert!(
        promoted_with(&promoted, "True", "Promoted"),
        "{:?}",
        promoted.status
    );
    assert!(!newest(&promoted).unwrap().promotion_override);
    assert_eq!(attempts(&h, &promoted).await, 4.0);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        h.count(PUT).await,
        2,
        "exactly one PUT for prod: {}",
        h.stats().await
    );
    let events = prod.events_text().await;
    assert!(events.contains("Normal web Soaking"), "{events}");
    h.stop().await;
}

#[tokio::test]
async fn a_stalled_source_keeps_prod_at_its_revision() {
    let h = Harness::start_two_teams("promo-stalled", DRIFT, None).await;
    let (prod, dev) = (&h.env, h.other.as_ref().unwrap());
    both_at_r1(dev, prod, "1s").await;
    h.reset_stats().await;

    // The API refuses r2 in dev (a blank name: 400), which stalls it.
    commit(dev, "r2", 4, Some("   ")).await;
    commit(prod, "r2", 4, None).await;
    dev.wait_for::<Config>("web", WAIT, |c| c.stalled_with("Validation"))
        .await;
    let held = prod
        .wait_for::<Config>("web", WAIT, |c| {
            promoted_with(c, "False", "SourceNotReady")
                && c.condition("Promoted")
                    .is_some_and(|(_, _, m)| m.contains("is not Ready (Validation"))
        })
        .await;
    let (_, _, message) = held.condition("Promoted").unwrap();
    assert!(
        message.contains(&format!("Config {}/web", dev.namespace)),
        "names dev: {message}"
    );
    assert!(
        !held.stalled_with("SourceNotReady"),
        "waiting is not stalled"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let config = prod.api::<Config>().get("web").await.unwrap();
    assert_eq!(newest(&config).unwrap().revision.as_deref(), Some("r1"));
    assert_eq!(attempts(&h, &config).await, 3.0, "prod stays at r1");
    assert_eq!(
        remote(&h, &config).await["versions"],
        json!(1),
        "no version besides prod's create"
    );
    assert_eq!(
        h.count(PUT).await,
        1,
        "dev's refused PUT only: {}",
        h.stats().await
    );
    h.stop().await;
}

#[tokio::test]
async fn promote_now_lets_exactly_that_revision_through_and_history_says_so() {
    let h = Harness::start_two_teams("promo-now", DRIFT, None).await;
    let (prod, dev) = (&h.env, h.other.as_ref().unwrap());
    both_at_r1(dev, prod, "1h").await;
    commit(dev, "r2", 4, None).await;
    commit(prod, "r2", 4, None).await;
    dev.wait_for::<Config>("web", WAIT, |c| at_revision(c, "r2"))
        .await;
    prod.wait_for::<Config>("web", WAIT, |c| promoted_with(c, "False", "Soaking"))
        .await;
    h.reset_stats().await;

    // `aigw plan` (reading dev's status through the kubeconfig) shows the held update as gated.
    let mut manifest = web("r2", Some(after(&dev.namespace, "1h")));
    manifest.metadata.namespace = Some(prod.namespace.clone());
    manifest.spec.config["retry"] = json!({"attempts": 4});
    let (code, out) = plan(&h, &manifest).await;
    assert_eq!(code, Some(2), "a gated update is still a change: {out}");
    assert!(
        out.contains(&format!("Config {}/web", prod.namespace))
            && out.contains(": gated pc-")
            && out.contains("eligible at")
            && out.contains("(Soaking)")
            && out.contains("1 gated"),
        "{out}"
    );
    assert_eq!(h.count(PUT).await, 0, "plan writes nothing");

    // An override naming another revision lets nothing through, and says so.
    annotate(prod, "aigw.io/promote-now", "r9").await;
    prod.wait_for::<Config>("web", WAIT, |c| {
        c.condition("Promoted")
            .is_some_and(|(s, _, m)| s == "False" && m.contains("names r9, not r2"))
    })
    .await;
    assert_eq!(h.count(PUT).await, 0, "{}", h.stats().await);

    annotate(prod, "aigw.io/promote-now", "r2").await;
    let promoted = prod
        .wait_for::<Config>("web", WAIT, |c| at_revision(c, "r2"))
        .await;
    let entry = newest(&promoted).unwrap();
    assert!(
        entry.promotion_override,
        "history records the override: {entry:?}"
    );
    assert!(
        promoted_with(&promoted, "True", "PromoteNow"),
        "{:?}",
        promoted.status
    );
    let history = serde_json::to_value(&promoted.status.as_ref().unwrap().history).unwrap();
    assert_eq!(history[0]["promotionOverride"], json!(true), "{history}");
    assert!(history[1].get("promotionOverride").is_none(), "{history}");
    assert_eq!(h.count(PUT).await, 1, "{}", h.stats().await);
    assert!(prod.events_text().await.contains("Normal web PromoteNow"));
    h.stop().await;
}

#[tokio::test]
async fn following_another_namespace_without_the_grant_is_refused_naming_the_rule() {
    // The default Connection grants both namespaces, but neither may follow the other.
    let grants = json!([{"namespaces": ["{ns}", "{other}"]}]);
    let h = Harness::start_two_teams("promo-grant", DRIFT, Some(grants)).await;
    let (prod, dev) = (&h.env, h.other.as_ref().unwrap());
    both_at_r1(dev, prod, "1s").await;
    h.reset_stats().await;
    commit(dev, "r2", 4, None).await;
    commit(prod, "r2", 4, None).await;
    let refused = prod
        .wait_for::<Config>("web", WAIT, |c| c.stalled_with("PromotionNotAllowed"))
        .await;
    let (_, _, message) = refused.condition("Stalled").unwrap();
    assert!(
        message.contains("spec.grants[].promoteFrom")
            && message.contains("spec.promotion.after[0]")
            && message.contains(&dev.namespace),
        "{message}"
    );
    assert!(promoted_with(&refused, "False", "PromotionNotAllowed"));
    dev.wait_for::<Config>("web", WAIT, |c| at_revision(c, "r2"))
        .await;
    // `aigw plan` decides by the same grants (found by an attack: it planned an update).
    let mut manifest = web("r2", Some(after(&dev.namespace, "1s")));
    manifest.metadata.namespace = Some(prod.namespace.clone());
    manifest
        .spec
        .config
        .insert("retry".into(), json!({"attempts": 4}));
    let granted = json!([{"namespaces": [prod.namespace, dev.namespace]}]);
    let (code, out) = plan_with(&h, &manifest, Some(granted)).await;
    assert!(
        out.contains("gated")
            && out.contains("PromotionNotAllowed")
            && out.contains("spec.grants[].promoteFrom"),
        "plan (exit {code:?}):\n{out}"
    );
    // aigw.io/promote-now cuts a wait short, never a refusal.
    annotate(prod, "aigw.io/promote-now", "r2").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let config = prod.api::<Config>().get("web").await.unwrap();
    assert!(
        config.stalled_with("PromotionNotAllowed"),
        "{:?}",
        config.condition("Stalled")
    );
    assert_eq!(h.count(PUT).await, 1, "dev's only: {}", h.stats().await);
    assert_eq!(newest(&config).unwrap().revision.as_deref(), Some("r1"));
    h.stop().await;
}

/// The error message of an admission that refuses `object`.
async fn refused<K>(api: &kube::Api<K>, object: Value) -> String
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let object: K = serde_json::from_value(object).unwrap();
    match api.create(&PostParams::default(), &object).await {
        Ok(_) => panic!("the apiserver accepted an invalid promotion"),
        Err(kube::Error::Api(status)) => status.message,
        Err(other) => panic!("unexpected error: {other}"),
    }
}

#[tokio::test]
async fn promotion_is_validated_at_admission_naming_the_field() {
    let env = TestEnv::new("promo-admission").await;
    let configs = env.api::<Config>();
    let config = |promotion: Value| {
        let mut spec = routing("web");
        spec["promotion"] = promotion;
        json!({"apiVersion": "aigw.io/v1alpha1", "kind": "Config",
               "metadata": {"name": "web"}, "spec": spec})
    };
    let message = refused(
        &configs,
        config(json!({"after": [{"name": "web"}], "soak": "a day"})),
    )
    .await;
    assert!(message.contains("spec.promotion.soak"), "{message}");
    let message = refused(&configs, config(json!({"after": [], "soak": "1h"}))).await;
    assert!(message.contains("spec.promotion.after"), "{message}");

    let cluster = kube::Api::<aigw::resources::ClusterGuardrail>::all(env.client.clone());
    let guardrail = json!({"apiVersion": "aigw.io/v1alpha1", "kind": "ClusterGuardrail",
        "metadata": {"name": format!("{}-org-pii", env.namespace)},
        "spec": {"name": "org pii", "checks": [{"id": "default.regexMatch", "parameters": {"rule": "x"}}],
                 "promotion": {"after": [{"namespace": "dev", "name": "org-pii"}], "soak": "1h"}}});
    let message = refused(&cluster, guardrail).await;
    assert!(
        message.contains("spec.promotion.after") && message.contains("leave namespace out"),
        "{message}"
    );
    env.cleanup().await;
}

fn guardrail(revision: &str, rule: &str, promotion: Option<Value>) -> Guardrail {
    let mut spec = json!({"name": "pii", "workspaceId": WORKSPACE,
        "checks": [{"id": "default.regexMatch", "parameters": {"rule": rule}}],
        "actions": {"deny": true}});
    if let Some(promotion) = promotion {
        spec["promotion"] = promotion;
    }
    serde_json::from_value(json!({
        "apiVersion": "aigw.io/v1alpha1", "kind": "Guardrail",
        "metadata": {"name": "pii", "annotations": {"aigw.io/revision": revision}},
        "spec": spec
    }))
    .unwrap()
}

fn guardrail_at(g: &Guardrail, revision: &str) -> bool {
    g.ready()
        && g.status
            .as_ref()
            .and_then(|s| s.history.first())
            .and_then(|v| v.revision.as_deref())
            == Some(revision)
}

/// A prod Guardrail holding a change at its promotion gate keeps its remote guardrail (same
/// slug) as it is, so the prod Configs that name it (`spec.resourceRefs`) are unaffected: a
/// remote edit of such a Config is corrected as usual during the guardrail's soak. (Found by
/// an attack: a held Guardrail once stalled them `ReferenceNotReady` for the whole soak.)
#[tokio::test]
async fn a_guardrail_soaking_a_change_leaves_the_configs_that_name_it_working() {
    let h = Harness::start_two_teams("prom-gr-soak", Duration::from_secs(2), None).await;
    let (prod, dev) = (&h.env, h.other.as_ref().unwrap());
    let after = json!({"after": [{"namespace": dev.namespace, "name": "pii"}], "soak": "1h"});
    dev.api::<Guardrail>()
        .create(&PostParams::default(), &guardrail("r1", "a1", None))
        .await
        .unwrap();
    prod.api::<Guardrail>()
        .create(
            &PostParams::default(),
            &guardrail("r1", "a1", Some(after.clone())),
        )
        .await
        .unwrap();
    for env in [dev, prod] {
        env.wait_for::<Guardrail>("pii", WAIT, |g| guardrail_at(g, "r1"))
            .await;
    }
    let mut spec = routing("routes");
    spec["resourceRefs"] =
        json!([{"path": "/input_guardrails/0", "kind": "Guardrail", "name": "pii"}]);
    prod.api::<Config>()
        .create(
            &PostParams::default(),
            &support::objects::object("Config", "routes", spec),
        )
        .await
        .unwrap();
    let config = prod.wait_for::<Config>("routes", WAIT, |c| c.ready()).await;
    let slug = config.status.unwrap().slug.unwrap();

    // Commit r2 reaches both guardrails: dev applies it, prod soaks it for an hour.
    let commit = json!({"metadata": {"annotations": {"aigw.io/revision": "r2"}},
        "spec": {"checks": [{"id": "default.regexMatch", "parameters": {"rule": "b2"}}]}});
    for env in [dev, prod] {
        env.api::<Guardrail>()
            .patch("pii", &PatchParams::default(), &Patch::Merge(&commit))
            .await
            .unwrap();
    }
    dev.wait_for::<Guardrail>("pii", WAIT, |g| guardrail_at(g, "r2"))
        .await;
    prod.wait_for::<Guardrail>("pii", WAIT, |g| {
        g.condition("Promoted")
            .is_some_and(|(s, r, _)| s == "False" && r == "Soaking")
    })
    .await;

    // Someone edits prod's remote config by hand during the soak.
    h.call(
        reqwest::Method::PUT,
        &format!("/ai_gw/v2/configs/{slug}"),
        Some(json!({"config": {"retry": {"attempts": 9}}})),
    )
    .await;
    let corrected = support::wait_until(Duration::from_secs(30), || async {
        let state = h.state().await;
        let remote = state["configs"]
            .as_array()?
            .iter()
            .find(|c| c["slug"] == slug.as_str())?
            .clone();
        (remote["config"]["retry"]["attempts"] == json!(3.0)
            || remote["config"]["retry"]["attempts"] == json!(3))
        .then_some(())
    })
    .await;
    let config = prod.api::<Config>().get("routes").await.unwrap();
    assert!(
        corrected.is_some() && !config.stalled_with("ReferenceNotReady"),
        "the remote edit of prod's Config was not corrected while its guardrail soaks: {:?}",
        config.status.map(|s| s
            .conditions
            .into_iter()
            .map(|c| (c.type_, c.status, c.reason, c.message))
            .collect::<Vec<_>>())
    );
    h.stop().await;
}

const GUARDRAIL_CREATE: &str = "POST /ai_gw/v2/guardrails";

/// A change the gate holds makes no write on any path. prod's Guardrail soaks r2 and its remote
/// guardrail is deleted outside aigw: creating it again would publish r2 unsoaked, so it waits
/// for the gate (found by an attack: it was created at once from the held spec, and the
/// Config naming it kept the deleted slug until the full read). `aigw.io/promote-now` lets it
/// through, and the Config naming it is rewritten for the new slug at once.
#[tokio::test]
async fn a_held_guardrail_deleted_remotely_is_created_again_only_when_the_gate_opens() {
    let h = Harness::start_two_teams("prom-gr-recreate", Duration::from_secs(2), None).await;
    let (prod, dev) = (&h.env, h.other.as_ref().unwrap());
    let after = json!({"after": [{"namespace": dev.namespace, "name": "pii"}], "soak": "1h"});
    dev.api::<Guardrail>()
        .create(&PostParams::default(), &guardrail("r1", "a1", None))
        .await
        .unwrap();
    prod.api::<Guardrail>()
        .create(&PostParams::default(), &guardrail("r1", "a1", Some(after)))
        .await
        .unwrap();
    for env in [dev, prod] {
        env.wait_for::<Guardrail>("pii", WAIT, |g| guardrail_at(g, "r1"))
            .await;
    }
    let slug_of = |g: Guardrail| g.status.and_then(|s| s.slug);
    let old_slug = slug_of(prod.api::<Guardrail>().get("pii").await.unwrap()).unwrap();
    let mut spec = routing("routes");
    spec["resourceRefs"] =
        json!([{"path": "/input_guardrails/0", "kind": "Guardrail", "name": "pii"}]);
    prod.api::<Config>()
        .create(
            &PostParams::default(),
            &support::objects::object("Config", "routes", spec),
        )
        .await
        .unwrap();
    let config = prod.wait_for::<Config>("routes", WAIT, |c| c.ready()).await;
    let config_slug = config.status.unwrap().slug.unwrap();
    let input_guardrail = || async {
        let state = h.state().await;
        state["configs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["slug"] == config_slug.as_str())
            .map(|c| c["config"]["input_guardrails"][0].clone())
            .unwrap()
    };
    assert_eq!(input_guardrail().await, json!(old_slug));

    let commit = json!({"metadata": {"annotations": {"aigw.io/revision": "r2"}},
        "spec": {"checks": [{"id": "default.regexMatch", "parameters": {"rule": "b2"}}]}});
    for env in [dev, prod] {
        env.api::<Guardrail>()
            .patch("pii", &PatchParams::default(), &Patch::Merge(&commit))
            .await
            .unwrap();
    }
    dev.wait_for::<Guardrail>("pii", WAIT, |g| guardrail_at(g, "r2"))
        .await;
    prod.wait_for::<Guardrail>("pii", WAIT, |g| {
        g.condition("Promoted")
            .is_some_and(|(s, r, _)| s == "False" && r == "Soaking")
    })
    .await;

    // The remote guardrail goes away outside aigw; a label edit brings prod's back to its
    // reconcile at once.
    h.reset_stats().await;
    h.call(
        reqwest::Method::DELETE,
        &format!("/ai_gw/v2/guardrails/{old_slug}"),
        None,
    )
    .await;
    let touch = json!({"metadata": {"labels": {"touched": "1"}}});
    prod.api::<Guardrail>()
        .patch("pii", &PatchParams::default(), &Patch::Merge(&touch))
        .await
        .unwrap();
    let waiting = prod
        .wait_for::<Guardrail>("pii", WAIT, |g| {
            g.condition("Ready").is_some_and(|(s, r, m)| {
                s == "False" && r == "Soaking" && m.contains("the remote object is gone")
            })
        })
        .await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        h.count(GUARDRAIL_CREATE).await,
        0,
        "nothing created while r2 soaks: {}",
        h.stats().await
    );
    assert!(
        slug_of(prod.api::<Guardrail>().get("pii").await.unwrap()).is_none(),
        "{:?}",
        waiting.status
    );

    // The emergency override lets r2 through: created again, and the Config follows at once
    // (its drift pass trusts its own unchanged remote; the full read is a day away).
    let promote = json!({"metadata": {"annotations": {"aigw.io/promote-now": "r2"}}});
    prod.api::<Guardrail>()
        .patch("pii", &PatchParams::default(), &Patch::Merge(&promote))
        .await
        .unwrap();
    let recreated = prod
        .wait_for::<Guardrail>("pii", WAIT, |g| {
            g.ready() && g.status.as_ref().and_then(|s| s.slug.as_deref()).is_some()
        })
        .await;
    let new_slug = slug_of(recreated).unwrap();
    assert_ne!(new_slug, old_slug);
    assert_eq!(h.count(GUARDRAIL_CREATE).await, 1, "{}", h.stats().await);
    let followed = support::wait_until(Duration::from_secs(20), || async {
        (input_guardrail().await == json!(new_slug)).then_some(())
    })
    .await;
    assert!(
        followed.is_some(),
        "prod's Config still names {} rather than {new_slug}",
        input_guardrail().await
    );
    h.stop().await;
}
