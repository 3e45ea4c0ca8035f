//! Promotion gates (issue 20 §1): prod's Config follows dev's (`spec.promotion.after`) and
//! applies a revision only once dev has proven it for the soak; a source that is not ready holds
//! it; `aigw.io/promote-now` lets one revision through; following another namespace needs the
//! Connection's grant. Real apiserver, real emulator; PUTs counted by `/_emulator/stats`. The
//! tests at the end were found by attacks on the gate; each failed before its fix. (An attack
//! also found that `aigw plan` reads a source in a namespace the operator does not watch: plan
//! cannot know the operator's `--namespace`, and the Promotion chapter says so.)

use crate::support;

use std::time::Duration;

use aigw::resources::{Config, Guardrail};
use kube::api::PostParams;
use serde_json::{Value, json};
use support::TestEnv;
use support::endpoints::{CONFIG_POST, CONFIG_PUT, GUARDRAIL_POST};
use support::harness::Harness;
use support::objects::{Conditions, routing};

const WAIT: Duration = Duration::from_secs(60);
const WORKSPACE: &str = "9f3c2b1a-0d4e-4f6a-8b7c-1e2d3f4a5b6c";
/// Long enough that nothing here waits for a drift check: a gate opens through the watch of
/// its source, or at the end of its soak.
const DRIFT: Duration = Duration::from_secs(120);
const SOAK: Duration = Duration::from_secs(20);

/// A Config named `web` at `revision`, with `promotion` when given.
fn web(revision: &str, promotion: Option<Value>) -> Config {
    at_commit(("Config", "web"), revision, routing("web"), promotion)
}

/// The object `(kind, name)` as commit `revision` has it: `spec`, with `promotion` when given.
fn at_commit<K: serde::de::DeserializeOwned>(
    (kind, name): (&str, &str),
    revision: &str,
    mut spec: Value,
    promotion: Option<Value>,
) -> K {
    if let Some(promotion) = promotion {
        spec["promotion"] = promotion;
    }
    serde_json::from_value(json!({
        "apiVersion": "aigw.io/v1alpha1", "kind": kind,
        "metadata": {"name": name, "annotations": {"aigw.io/revision": revision}},
        "spec": spec
    }))
    .unwrap()
}

/// prod's `web` at r2 (retry attempts 4, following dev's with `soak`), as a manifest to plan.
fn prod_manifest_at_r2(prod: &TestEnv, dev: &TestEnv, soak: &str) -> Config {
    let mut manifest = web("r2", Some(after(&dev.namespace, soak)));
    manifest.metadata.namespace = Some(prod.namespace.clone());
    manifest
        .spec
        .config
        .insert("retry".into(), json!({"attempts": 4}));
    manifest
}

fn after(namespace: &str, soak: &str) -> Value {
    json!({"after": [{"namespace": namespace, "name": "web"}], "soak": soak})
}

/// Two teams, dev's `web` and prod's `web` (following dev's, with `soak`) both created at `r1`
/// and Ready, the emulator's counts reset from there on.
async fn following_at_r1(prefix: &str, grants: Option<Value>, soak: &str) -> Harness {
    let h = Harness::start_two_teams(prefix, DRIFT, grants).await;
    let (prod, dev) = (&h.env, h.other.as_ref().unwrap());
    support::create(&dev.api::<Config>(), &web("r1", None)).await;
    support::create(
        &prod.api::<Config>(),
        &web("r1", Some(after(&dev.namespace, soak))),
    )
    .await;
    for env in [dev, prod] {
        env.wait_for::<Config>("web", WAIT, |c| at_revision(c, "r1"))
            .await;
    }
    h.reset_stats().await;
    h
}

/// One Git commit applied to `env`: the revision annotation and the retry attempts (and the
/// remote name, when given) in one write.
async fn commit(env: &TestEnv, revision: &str, attempts: u64, name: Option<&str>) {
    let mut spec = json!({"config": {"retry": {"attempts": attempts}}});
    if let Some(name) = name {
        spec["name"] = json!(name);
    }
    let patch = json!({"metadata": {"annotations": {"aigw.io/revision": revision}}, "spec": spec});
    support::merge_patch(&env.api::<Config>(), "web", patch).await;
}

async fn annotate(env: &TestEnv, key: &str, value: &str) {
    let patch = json!({"metadata": {"annotations": {key: value}}});
    support::merge_patch(&env.api::<Config>(), "web", patch).await;
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
    h.remote_record_present("configs", "slug", &slug).await
}

/// `aigw plan -f` of `manifest` against the harness's emulator, with the cluster in view:
/// its exit code and output.
async fn plan(h: &Harness, manifest: &Config) -> (Option<i32>, String) {
    plan_with(h, manifest, None).await
}

/// [`plan`] with `--grants-file` holding `grants` (the operator's default-connection grants).
async fn plan_with(h: &Harness, manifest: &Config, grants: Option<Value>) -> (Option<i32>, String) {
    plan_through(h, manifest, grants, support::kubeconfig_path()).await
}

/// [`plan_with`] through the kubeconfig `kubeconfig`.
async fn plan_through(
    h: &Harness,
    manifest: &Config,
    grants: Option<Value>,
    kubeconfig: &std::path::Path,
) -> (Option<i32>, String) {
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
        .arg(kubeconfig)
        .args(["--management-url", &h.emulator.management_url()])
        .arg("--token-file")
        .arg(&token);
    if let Some(grants) = grants {
        let file = dir.path().join("grants.yaml");
        std::fs::write(&file, serde_yaml::to_string(&grants).unwrap()).unwrap();
        command.arg("--grants-file").arg(file);
    }
    support::cli::run(command).await
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
    let h = following_at_r1("promo-soak", None, "20s").await;
    let (prod, dev) = (&h.env, h.other.as_ref().unwrap());

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
        assert_eq!(
            h.count(CONFIG_PUT).await,
            1,
            "only dev's PUT: {}",
            h.stats().await
        );
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
        h.count(CONFIG_PUT).await,
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
    let h = following_at_r1("promo-stalled", None, "1s").await;
    let (prod, dev) = (&h.env, h.other.as_ref().unwrap());

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
        h.count(CONFIG_PUT).await,
        1,
        "dev's refused PUT only: {}",
        h.stats().await
    );
    h.stop().await;
}

#[tokio::test]
async fn promote_now_lets_exactly_that_revision_through_and_history_says_so() {
    let h = following_at_r1("promo-now", None, "1h").await;
    let (prod, dev) = (&h.env, h.other.as_ref().unwrap());
    r2_soaking_in_prod(dev, prod).await;
    h.reset_stats().await;

    // `aigw plan` (reading dev's status through the kubeconfig) shows the held update as gated.
    let manifest = prod_manifest_at_r2(prod, dev, "1h");
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
    assert_eq!(h.count(CONFIG_PUT).await, 0, "plan writes nothing");

    // An override naming another revision lets nothing through, and says so.
    annotate(prod, "aigw.io/promote-now", "r9").await;
    prod.wait_for::<Config>("web", WAIT, |c| {
        c.condition("Promoted")
            .is_some_and(|(s, _, m)| s == "False" && m.contains("names r9, not r2"))
    })
    .await;
    assert_eq!(h.count(CONFIG_PUT).await, 0, "{}", h.stats().await);

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
    assert_eq!(h.count(CONFIG_PUT).await, 1, "{}", h.stats().await);
    assert!(prod.events_text().await.contains("Normal web PromoteNow"));
    h.stop().await;
}

#[tokio::test]
async fn following_another_namespace_without_the_grant_is_refused_naming_the_rule() {
    // The default Connection grants both namespaces, but neither may follow the other.
    let grants = json!([{"namespaces": ["{ns}", "{other}"]}]);
    let h = following_at_r1("promo-grant", Some(grants), "1s").await;
    let (prod, dev) = (&h.env, h.other.as_ref().unwrap());
    commit(dev, "r2", 4, None).await;
    commit(prod, "r2", 4, None).await;
    let (refused, message) = prod
        .wait_condition::<Config>("web", WAIT, ("Stalled", "PromotionNotAllowed"))
        .await;
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
    let manifest = prod_manifest_at_r2(prod, dev, "1s");
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
    assert_eq!(
        h.count(CONFIG_PUT).await,
        1,
        "dev's only: {}",
        h.stats().await
    );
    assert_eq!(newest(&config).unwrap().revision.as_deref(), Some("r1"));
    h.stop().await;
}

/// The error message of an admission that refuses `object`.
async fn refused<K>(api: &kube::Api<K>, object: Value) -> String
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let object: K = serde_json::from_value(object).unwrap();
    let created = api.create(&PostParams::default(), &object).await;
    support::refusal(created, "an invalid promotion")
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
    support::assert_mentions(&message, &["spec.promotion.after", "leave namespace out"]);
    env.cleanup().await;
}

fn guardrail(revision: &str, rule: &str, promotion: Option<Value>) -> Guardrail {
    let spec = json!({"name": "pii", "workspaceId": WORKSPACE,
        "checks": [{"id": "default.regexMatch", "parameters": {"rule": rule}}],
        "actions": {"deny": true}});
    at_commit(("Guardrail", "pii"), revision, spec, promotion)
}

fn guardrail_at(g: &Guardrail, revision: &str) -> bool {
    g.ready()
        && g.status
            .as_ref()
            .and_then(|s| s.history.first())
            .and_then(|v| v.revision.as_deref())
            == Some(revision)
}

/// Two teams (drift every 2 s), dev's Guardrail `pii` and prod's (following dev's, soaking for
/// an hour) both created at `r1` and Ready; prod's remote slug.
async fn following_guardrails(prefix: &str) -> (Harness, String) {
    let h = Harness::start_two_teams(prefix, Duration::from_secs(2), None).await;
    let (prod, dev) = (&h.env, h.other.as_ref().unwrap());
    let after = json!({"after": [{"namespace": dev.namespace, "name": "pii"}], "soak": "1h"});
    support::create(&dev.api::<Guardrail>(), &guardrail("r1", "a1", None)).await;
    let followed = guardrail("r1", "a1", Some(after));
    support::create(&prod.api::<Guardrail>(), &followed).await;
    for env in [dev, prod] {
        env.wait_for::<Guardrail>("pii", WAIT, |g| guardrail_at(g, "r1"))
            .await;
    }
    let slug = guardrail_slug(prod).await.unwrap();
    (h, slug)
}

/// The slug `env`'s Guardrail `pii` records.
async fn guardrail_slug(env: &TestEnv) -> Option<String> {
    let guardrail = env.api::<Guardrail>().get("pii").await.unwrap();
    guardrail.status.and_then(|s| s.slug)
}

/// Commit r2 of `pii` reaches both Guardrails: dev applies it, prod soaks it.
async fn guardrail_r2_soaking_in_prod(dev: &TestEnv, prod: &TestEnv) {
    let commit = json!({"metadata": {"annotations": {"aigw.io/revision": "r2"}},
        "spec": {"checks": [{"id": "default.regexMatch", "parameters": {"rule": "b2"}}]}});
    for env in [dev, prod] {
        support::merge_patch(&env.api::<Guardrail>(), "pii", &commit).await;
    }
    dev.wait_for::<Guardrail>("pii", WAIT, |g| guardrail_at(g, "r2"))
        .await;
    prod.wait_for::<Guardrail>("pii", WAIT, |g| {
        g.condition("Promoted")
            .is_some_and(|(s, r, _)| s == "False" && r == "Soaking")
    })
    .await;
}

/// Commit r2 of `web` reaches both Configs: dev applies it, prod soaks it.
async fn r2_soaking_in_prod(dev: &TestEnv, prod: &TestEnv) {
    commit(dev, "r2", 4, None).await;
    commit(prod, "r2", 4, None).await;
    dev.wait_for::<Config>("web", WAIT, |c| at_revision(c, "r2"))
        .await;
    prod.wait_for::<Config>("web", WAIT, |c| promoted_with(c, "False", "Soaking"))
        .await;
}

/// prod's Config `routes` naming its Guardrail `pii` (`spec.resourceRefs`), Ready; its slug.
async fn routes_naming_pii(prod: &TestEnv) -> String {
    let mut spec = routing("routes");
    spec["resourceRefs"] =
        json!([{"path": "/input_guardrails/0", "kind": "Guardrail", "name": "pii"}]);
    support::objects::create::<Config>(prod, "routes", spec).await;
    prod.ready_config_slug("routes", WAIT).await
}

/// The guardrail the remote config `config_slug` names first in `input_guardrails`.
async fn input_guardrail(h: &Harness, config_slug: &str) -> Value {
    let remote = h
        .remote_record_present("configs", "slug", config_slug)
        .await;
    remote["config"]["input_guardrails"][0].clone()
}

/// prod's remote guardrail goes away outside aigw; a label edit brings its Guardrail back to
/// its reconcile at once.
async fn delete_remote_guardrail(h: &Harness, prod: &TestEnv, slug: &str) {
    h.delete(&format!("/ai_gw/v2/guardrails/{slug}")).await;
    let touch = json!({"metadata": {"labels": {"touched": "1"}}});
    support::merge_patch(&prod.api::<Guardrail>(), "pii", touch).await;
}

/// `aigw.io/promote-now` lets prod's held r2 of `pii` through; the slug it is then Ready with.
async fn promote_guardrail_now(prod: &TestEnv) -> String {
    let promote = json!({"metadata": {"annotations": {"aigw.io/promote-now": "r2"}}});
    support::merge_patch(&prod.api::<Guardrail>(), "pii", promote).await;
    let recreated = prod
        .wait_for::<Guardrail>("pii", WAIT, |g| {
            g.ready() && g.status.as_ref().and_then(|s| s.slug.as_deref()).is_some()
        })
        .await;
    recreated.status.and_then(|s| s.slug).unwrap()
}

/// A prod Guardrail holding a change at its promotion gate keeps its remote guardrail (same
/// slug) as it is, so the prod Configs that name it (`spec.resourceRefs`) are unaffected: a
/// remote edit of such a Config is corrected as usual during the guardrail's soak. (Found by
/// an attack: a held Guardrail once stalled them `ReferenceNotReady` for the whole soak.)
#[tokio::test]
async fn a_guardrail_soaking_a_change_leaves_the_configs_that_name_it_working() {
    let (h, _) = following_guardrails("prom-gr-soak").await;
    let (prod, dev) = (&h.env, h.other.as_ref().unwrap());
    let slug = routes_naming_pii(prod).await;

    // Commit r2 reaches both guardrails: dev applies it, prod soaks it for an hour.
    guardrail_r2_soaking_in_prod(dev, prod).await;

    // Someone edits prod's remote config by hand during the soak.
    h.put(
        &format!("/ai_gw/v2/configs/{slug}"),
        json!({"config": {"retry": {"attempts": 9}}}),
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
            .managed
            .conditions
            .into_iter()
            .map(|c| (c.type_, c.status, c.reason, c.message))
            .collect::<Vec<_>>())
    );
    h.stop().await;
}

/// A change the gate holds makes no write on any path. prod's Guardrail soaks r2 and its remote
/// guardrail is deleted outside aigw: creating it again would publish r2 unsoaked, so it waits
/// for the gate (found by an attack: it was created at once from the held spec, and the
/// Config naming it kept the deleted slug until the full read). `aigw.io/promote-now` lets it
/// through, and the Config naming it is rewritten for the new slug at once.
#[tokio::test]
async fn a_held_guardrail_deleted_remotely_is_created_again_only_when_the_gate_opens() {
    let (h, old_slug) = following_guardrails("prom-gr-recreate").await;
    let (prod, dev) = (&h.env, h.other.as_ref().unwrap());
    let config_slug = routes_naming_pii(prod).await;
    assert_eq!(input_guardrail(&h, &config_slug).await, json!(old_slug));

    guardrail_r2_soaking_in_prod(dev, prod).await;

    // The remote guardrail goes away outside aigw; a label edit brings prod's back to its
    // reconcile at once.
    h.reset_stats().await;
    delete_remote_guardrail(&h, prod, &old_slug).await;
    let waiting = prod
        .wait_for::<Guardrail>("pii", WAIT, |g| {
            g.condition("Ready").is_some_and(|(s, r, m)| {
                s == "False" && r == "Soaking" && m.contains("the remote object is gone")
            })
        })
        .await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        h.count(GUARDRAIL_POST).await,
        0,
        "nothing created while r2 soaks: {}",
        h.stats().await
    );
    assert!(guardrail_slug(prod).await.is_none(), "{:?}", waiting.status);

    // The emergency override lets r2 through: created again, and the Config follows at once
    // (its drift pass trusts its own unchanged remote; the full read is a day away).
    let new_slug = promote_guardrail_now(prod).await;
    assert_ne!(new_slug, old_slug);
    assert_eq!(h.count(GUARDRAIL_POST).await, 1, "{}", h.stats().await);
    let followed = support::wait_until(Duration::from_secs(20), || async {
        (input_guardrail(&h, &config_slug).await == json!(new_slug)).then_some(())
    })
    .await;
    assert!(
        followed.is_some(),
        "prod's Config still names {} rather than {new_slug}",
        input_guardrail(&h, &config_slug).await
    );
    h.stop().await;
}

// ---- Found by a second attack on the gate; each failed before its fix. ----

/// The remote config with `slug`, as the emulator holds it.
async fn remote_by_slug(h: &Harness, slug: &str) -> Option<Value> {
    let record = h.remote_record("configs", "slug", slug).await;
    (!record.is_null()).then_some(record)
}

/// Guarantee: "a source *contains* R when it applied R and its own revision was not applied
/// before R ... a rollback to an older revision does not count", with the order being
/// `status.revisionOrder`, where "each change of revision is listed once".
///
/// Attack: a revision that only moves the source's annotation (a commit that does not change
/// dev's document) is never recorded in `revisionOrder` (it is recorded on writes only). When
/// dev later rolls back to that revision (r3 -> r2), dev's order is [r2, r3, r1]: r2 looks
/// "newer" than r3, so prod takes dev for one that moved on from r3 and writes r3, the change
/// dev just rolled back.
#[tokio::test]
async fn a_rollback_to_an_annotation_only_revision_is_taken_for_one_that_contains_the_change() {
    let h = following_at_r1("atk2-rollback", None, "1s").await;
    let (prod, dev) = (&h.env, h.other.as_ref().unwrap());
    // Commit r2 does not change dev's document: only its annotation moves (no write).
    annotate(dev, "aigw.io/revision", "r2").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Commit r3 changes dev's document: written.
    commit(dev, "r3", 4, None).await;
    dev.wait_for::<Config>("web", WAIT, |c| at_revision(c, "r3"))
        .await;
    // r3 misbehaves in dev: the pipeline rolls dev back to r2 (its document: attempts 3).
    commit(dev, "r2", 3, None).await;
    let rolled_back = dev
        .wait_for::<Config>("web", WAIT, |c| at_revision(c, "r2"))
        .await;
    let order = rolled_back.status.as_ref().unwrap().revision_order.clone();
    h.reset_stats().await;

    // Meanwhile r3 reaches prod: dev no longer runs it, so prod must wait.
    commit(prod, "r3", 4, None).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    let config = prod.api::<Config>().get("web").await.unwrap();
    assert_eq!(
        h.count(CONFIG_PUT).await,
        0,
        "prod wrote r3 although dev rolled back from r3 to r2 (dev's revisionOrder {order:?}); Promoted: {:?}; {}",
        config.condition("Promoted"),
        h.stats().await
    );
    assert!(
        promoted_with(&config, "False", "SourceNotReady"),
        "{:?}",
        config.condition("Promoted")
    );
    h.stop().await;
}

/// Guarantee: "A held change makes NO remote write on any path"; "A remote object deleted
/// outside aigw while a change waits is created again only when the gate opens".
///
/// Attack: `recreates` judges "wrote before" by `status.history`, but a create whose answer was
/// lost and that was then found by the lookup (`Created::Recovered`) records no history. Such a
/// Config, holding a change, whose remote object is deleted outside aigw, is created again at
/// once with the held change, as if it were its first create.
#[tokio::test]
async fn a_held_change_is_published_by_recreating_an_object_whose_create_answer_was_lost() {
    let h = Harness::start_two_teams("atk2-recovered", Duration::from_secs(2), None).await;
    let (prod, dev) = (&h.env, h.other.as_ref().unwrap());
    support::create(&dev.api::<Config>(), &web("r1", None)).await;
    dev.wait_for::<Config>("web", WAIT, |c| at_revision(c, "r1"))
        .await;
    // prod's create commits but its answer is lost; the lookup finds the config.
    h.faults(json!({"error_after_commit_rate": 1.0})).await;
    support::create(
        &prod.api::<Config>(),
        &web("r1", Some(after(&dev.namespace, "1h"))),
    )
    .await;
    let created = prod
        .wait_for::<Config>("web", WAIT, |c| {
            c.ready() && c.status.as_ref().and_then(|s| s.slug.as_deref()).is_some()
        })
        .await;
    h.faults(json!({})).await;
    let slug = created.status.as_ref().unwrap().slug.clone().unwrap();
    let remote_name = remote_by_slug(&h, &slug).await.unwrap()["name"].clone();

    // r2 reaches both; prod soaks it for an hour.
    r2_soaking_in_prod(dev, prod).await;

    // prod's remote config goes away outside aigw.
    h.reset_stats().await;
    h.delete(&format!("/ai_gw/v2/configs/{slug}")).await;
    let touch = json!({"metadata": {"labels": {"touched": "1"}}});
    support::merge_patch(&prod.api::<Config>(), "web", touch).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    let config = prod.api::<Config>().get("web").await.unwrap();
    let _ = h
        .remote_records("configs", "name", remote_name.as_str().unwrap_or_default())
        .await;
    let published = match config.status.as_ref().and_then(|s| s.slug.clone()) {
        Some(new) => remote_by_slug(&h, &new)
            .await
            .map(|c| c["config"]["retry"].clone()),
        None => None,
    };
    assert_eq!(
        h.count(CONFIG_POST).await,
        0,
        "r2 soaks for an hour, yet prod created its config again with it (prod's remote retry now {published:?}; r1 had attempts 3); history {:?}; Promoted {:?}; {}",
        config.status.as_ref().map(|s| &s.history),
        config.condition("Promoted"),
        h.stats().await
    );
    h.stop().await;
}

/// Guarantee: "`aigw plan` ... decides as the operator does"; promote-now "cuts waits short,
/// never a refusal" (an invalid `spec.promotion` "stays refused, whatever the annotation says").
///
/// Attack: a Config whose `spec.promotion.after` names itself, with `aigw.io/promote-now`. The
/// admission policy refuses it (the operator would refuse it too: `InvalidSpec`, Stalled, no
/// write), and `aigw plan` must not plan it as a plain `update` either: it used to check
/// promote-now before it looked at the sources.
#[tokio::test]
async fn plan_lets_promote_now_through_where_the_operator_refuses_an_invalid_promotion() {
    let h = Harness::start_with("atk2-plan-self", DRIFT).await;
    let env = &h.env;
    support::create(&env.api::<Config>(), &web("r1", None)).await;
    env.wait_for::<Config>("web", WAIT, |c| at_revision(c, "r1"))
        .await;
    h.reset_stats().await;

    // The manifest: r2, following itself, promoted now.
    let mut manifest = web(
        "r2",
        Some(json!({"after": [{"name": "web"}], "soak": "1s"})),
    );
    manifest.metadata.namespace = Some(env.namespace.clone());
    manifest
        .metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert("aigw.io/promote-now".into(), "r2".into());
    manifest
        .spec
        .config
        .insert("retry".into(), json!({"attempts": 4}));
    let mut replaced = manifest.clone();
    replaced.metadata.resource_version = env
        .api::<Config>()
        .get("web")
        .await
        .unwrap()
        .metadata
        .resource_version;
    let refused = env
        .api::<Config>()
        .replace("web", &PostParams::default(), &replaced)
        .await;
    let refusal = support::refusal(refused, "a Config that follows itself");
    support::assert_mentions(&refusal, &["spec.promotion.after", "itself"]);
    assert_eq!(h.count(CONFIG_PUT).await, 0, "nothing is written");

    let (code, out) = plan(&h, &manifest).await;
    assert!(
        code == Some(1) && out.contains("itself") && !out.contains("update"),
        "plan (exit {code:?}) plans a Config that follows itself:\n{out}"
    );
    // The live document unchanged, the promotion added, the manifest's namespace left to the
    // kubeconfig's context (aigw validate cannot tell it follows itself): nothing to write
    // remotely, which plan said as `no change` with exit 0 (an attack of stop 82); admission
    // refuses it all the same.
    let unchanged = web(
        "r1",
        Some(json!({"after": [{"name": "web", "namespace": env.namespace}], "soak": "1s"})),
    );
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let mut config: Value =
        serde_yaml::from_str(&std::fs::read_to_string(support::kubeconfig_path()).unwrap())
            .unwrap();
    for context in config["contexts"].as_array_mut().expect("contexts") {
        context["context"]["namespace"] = json!(env.namespace);
    }
    std::fs::write(&kubeconfig, serde_yaml::to_string(&config).unwrap()).unwrap();
    let (code, out) = plan_through(&h, &unchanged, None, &kubeconfig).await;
    assert!(
        code == Some(1) && out.contains("itself"),
        "plan (exit {code:?}) lets an unchanged Config that follows itself through:\n{out}"
    );
    h.stop().await;
}

/// Guarantee: "Not gated: ... writes that restore the spec already applied at this generation
/// (... the new slug of a guardrail or provider the document names)"; "Configs follow a
/// referenced Guardrail's new slug at once".
///
/// Attack: a prod Config with its own `spec.promotion` names a prod Guardrail whose remote
/// object is deleted while the guardrail holds a change. The Config goes `ReferenceNotReady`
/// (Ready=False at its generation), so when the guardrail is created again (new slug) its
/// spec no longer counts as applied: the write of the new slug goes through the Config's own
/// promotion gate, which holds it while the Config's source is not ready. The remote Config
/// keeps naming a guardrail that no longer exists.
#[tokio::test]
async fn a_promoted_config_does_not_follow_its_guardrails_new_slug_while_its_own_source_waits() {
    let (h, old_slug) = following_guardrails("atk2-follow").await;
    let (prod, dev) = (&h.env, h.other.as_ref().unwrap());
    // dev's and prod's Config `routes`; prod's follows dev's and names prod's guardrail.
    let routes = |promotion: Option<Value>, refs: bool| -> Config {
        let mut spec = routing("routes");
        if refs {
            spec["resourceRefs"] =
                json!([{"path": "/input_guardrails/0", "kind": "Guardrail", "name": "pii"}]);
        }
        at_commit(("Config", "routes"), "r1", spec, promotion)
    };
    support::create(&dev.api::<Config>(), &routes(None, false)).await;
    dev.wait_for::<Config>("routes", WAIT, |c| c.ready()).await;
    let after_routes =
        json!({"after": [{"namespace": dev.namespace, "name": "routes"}], "soak": "1s"});
    support::create(&prod.api::<Config>(), &routes(Some(after_routes), true)).await;
    let config_slug = prod.ready_config_slug("routes", WAIT).await;
    // dev's Config is paused (an operator investigating it): prod's Config makes no change
    // of its own meanwhile, and has none to make.
    let pause = json!({"metadata": {"annotations": {"aigw.io/paused": "true"}}});
    support::merge_patch(&dev.api::<Config>(), "routes", pause).await;
    assert_eq!(input_guardrail(&h, &config_slug).await, json!(old_slug));

    // r2 of the guardrail soaks in prod; its remote guardrail is deleted outside aigw.
    guardrail_r2_soaking_in_prod(dev, prod).await;
    delete_remote_guardrail(&h, prod, &old_slug).await;
    prod.wait_for::<Config>("routes", WAIT, |c| {
        c.condition("Ready")
            .is_some_and(|(s, r, _)| s == "False" && r == "ReferenceNotReady")
    })
    .await;

    // The guardrail's override lets r2 through: it is created again with a new slug.
    let new_slug = promote_guardrail_now(prod).await;
    assert_ne!(new_slug, old_slug);
    let followed = support::wait_until(Duration::from_secs(20), || async {
        (input_guardrail(&h, &config_slug).await == json!(new_slug)).then_some(())
    })
    .await;
    let config = prod.api::<Config>().get("routes").await.unwrap();
    assert!(
        followed.is_some(),
        "prod's Config still names the deleted guardrail {} rather than {new_slug}; its Ready: {:?}; Promoted: {:?}",
        input_guardrail(&h, &config_slug).await,
        config.condition("Ready"),
        config.condition("Promoted")
    );
    h.stop().await;
}
