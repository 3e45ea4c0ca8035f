//! Found by a second attack on the promotion gate (issue 20, `spec.promotion`;
//! docs/src/gitops/promotion.md): each test names the guarantee it checks, and each failed
//! before its fix. Real apiserver, real emulator. (The attack also found that `aigw plan` reads
//! a source in a namespace the operator does not watch, which the operator never sees: plan
//! cannot know the operator's `--namespace`, and the Promotion chapter says so.)

mod support;

use std::time::Duration;

use aigw::resources::{Config, Guardrail};
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::TestEnv;
use support::harness::Harness;
use support::objects::{Conditions, routing};

const WAIT: Duration = Duration::from_secs(60);
const DRIFT: Duration = Duration::from_secs(120);
const PUT: &str = "PUT /ai_gw/v2/configs/{slug}";
const CREATE: &str = "POST /ai_gw/v2/configs";
const WORKSPACE: &str = "9f3c2b1a-0d4e-4f6a-8b7c-1e2d3f4a5b6c";

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

async fn commit(env: &TestEnv, revision: &str, attempts: u64) {
    let patch = json!({"metadata": {"annotations": {"aigw.io/revision": revision}},
                       "spec": {"config": {"retry": {"attempts": attempts}}}});
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

fn newest(config: &Config) -> Option<&aigw::resources::config::AppliedVersion> {
    config.status.as_ref().and_then(|s| s.history.first())
}

fn at_revision(config: &Config, revision: &str) -> bool {
    config.ready() && newest(config).and_then(|v| v.revision.as_deref()) == Some(revision)
}

fn promoted_with(config: &Config, status: &str, reason: &str) -> bool {
    config
        .condition("Promoted")
        .is_some_and(|(s, r, _)| s == status && r == reason)
}

/// The remote config with `slug`, as the emulator holds it.
async fn remote_by_slug(h: &Harness, slug: &str) -> Option<Value> {
    let state = h.state().await;
    state["configs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["slug"] == slug)
        .cloned()
}

/// Every remote config named `name`.
async fn remotes_named(h: &Harness, name: &str) -> Vec<Value> {
    let state = h.state().await;
    state["configs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["name"] == name)
        .cloned()
        .collect()
}

async fn plan(h: &Harness, manifest: &Config) -> (Option<i32>, String) {
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
    let h = Harness::start_two_teams("atk2-rollback", DRIFT, None).await;
    let (prod, dev) = (&h.env, h.other.as_ref().unwrap());
    dev.api::<Config>()
        .create(&PostParams::default(), &web("r1", None))
        .await
        .unwrap();
    prod.api::<Config>()
        .create(
            &PostParams::default(),
            &web("r1", Some(after(&dev.namespace, "1s"))),
        )
        .await
        .unwrap();
    for env in [dev, prod] {
        env.wait_for::<Config>("web", WAIT, |c| at_revision(c, "r1"))
            .await;
    }
    // Commit r2 does not change dev's document: only its annotation moves (no write).
    annotate(dev, "aigw.io/revision", "r2").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Commit r3 changes dev's document: written.
    commit(dev, "r3", 4).await;
    dev.wait_for::<Config>("web", WAIT, |c| at_revision(c, "r3"))
        .await;
    // r3 misbehaves in dev: the pipeline rolls dev back to r2 (its document: attempts 3).
    commit(dev, "r2", 3).await;
    let rolled_back = dev
        .wait_for::<Config>("web", WAIT, |c| at_revision(c, "r2"))
        .await;
    let order = rolled_back.status.as_ref().unwrap().revision_order.clone();
    h.reset_stats().await;

    // Meanwhile r3 reaches prod: dev no longer runs it, so prod must wait.
    commit(prod, "r3", 4).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    let config = prod.api::<Config>().get("web").await.unwrap();
    assert_eq!(
        h.count(PUT).await,
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
    dev.api::<Config>()
        .create(&PostParams::default(), &web("r1", None))
        .await
        .unwrap();
    dev.wait_for::<Config>("web", WAIT, |c| at_revision(c, "r1"))
        .await;
    // prod's create commits but its answer is lost; the lookup finds the config.
    h.faults(json!({"error_after_commit_rate": 1.0})).await;
    prod.api::<Config>()
        .create(
            &PostParams::default(),
            &web("r1", Some(after(&dev.namespace, "1h"))),
        )
        .await
        .unwrap();
    let created = prod
        .wait_for::<Config>("web", WAIT, |c| {
            c.ready() && c.status.as_ref().and_then(|s| s.slug.as_deref()).is_some()
        })
        .await;
    h.faults(json!({})).await;
    let slug = created.status.as_ref().unwrap().slug.clone().unwrap();
    let remote_name = remote_by_slug(&h, &slug).await.unwrap()["name"].clone();

    // r2 reaches both; prod soaks it for an hour.
    commit(dev, "r2", 4).await;
    commit(prod, "r2", 4).await;
    dev.wait_for::<Config>("web", WAIT, |c| at_revision(c, "r2"))
        .await;
    prod.wait_for::<Config>("web", WAIT, |c| promoted_with(c, "False", "Soaking"))
        .await;

    // prod's remote config goes away outside aigw.
    h.reset_stats().await;
    h.call(
        reqwest::Method::DELETE,
        &format!("/ai_gw/v2/configs/{slug}"),
        None,
    )
    .await;
    let touch = json!({"metadata": {"labels": {"touched": "1"}}});
    prod.api::<Config>()
        .patch("web", &PatchParams::default(), &Patch::Merge(&touch))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let config = prod.api::<Config>().get("web").await.unwrap();
    let _ = remotes_named(&h, remote_name.as_str().unwrap_or_default()).await;
    let published = match config.status.as_ref().and_then(|s| s.slug.clone()) {
        Some(new) => remote_by_slug(&h, &new)
            .await
            .map(|c| c["config"]["retry"].clone()),
        None => None,
    };
    assert_eq!(
        h.count(CREATE).await,
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
/// Attack: a Config whose `spec.promotion.after` names itself is refused by the operator
/// (`InvalidSpec`, Stalled, no write) even with `aigw.io/promote-now`, but `aigw plan` checks
/// promote-now before it looks at the sources and plans the write as a plain `update`.
#[tokio::test]
async fn plan_lets_promote_now_through_where_the_operator_refuses_an_invalid_promotion() {
    let h = Harness::start_with("atk2-plan-self", DRIFT).await;
    let env = &h.env;
    env.api::<Config>()
        .create(&PostParams::default(), &web("r1", None))
        .await
        .unwrap();
    env.wait_for::<Config>("web", WAIT, |c| at_revision(c, "r1"))
        .await;
    h.reset_stats().await;

    // The manifest: r2, following itself (a mistake admission lets through), promoted now.
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
    env.api::<Config>()
        .replace("web", &PostParams::default(), &{
            let mut m = manifest.clone();
            m.metadata.resource_version = env
                .api::<Config>()
                .get("web")
                .await
                .unwrap()
                .metadata
                .resource_version;
            m
        })
        .await
        .unwrap();
    let refused = env
        .wait_for::<Config>("web", WAIT, |c| c.stalled_with("InvalidSpec"))
        .await;
    assert_eq!(h.count(PUT).await, 0, "the operator writes nothing");

    let (code, out) = plan(&h, &manifest).await;
    assert!(
        out.contains("gated"),
        "the operator refuses this write ({:?}), but plan (exit {code:?}) plans it:\n{out}",
        refused.condition("Stalled")
    );
    h.stop().await;
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
    let h = Harness::start_two_teams("atk2-follow", Duration::from_secs(2), None).await;
    let (prod, dev) = (&h.env, h.other.as_ref().unwrap());
    let after_pii = json!({"after": [{"namespace": dev.namespace, "name": "pii"}], "soak": "1h"});
    dev.api::<Guardrail>()
        .create(&PostParams::default(), &guardrail("r1", "a1", None))
        .await
        .unwrap();
    prod.api::<Guardrail>()
        .create(
            &PostParams::default(),
            &guardrail("r1", "a1", Some(after_pii)),
        )
        .await
        .unwrap();
    for env in [dev, prod] {
        env.wait_for::<Guardrail>("pii", WAIT, |g| guardrail_at(g, "r1"))
            .await;
    }
    let slug_of = |g: Guardrail| g.status.and_then(|s| s.slug);
    let old_slug = slug_of(prod.api::<Guardrail>().get("pii").await.unwrap()).unwrap();
    // dev's and prod's Config `routes`; prod's follows dev's and names prod's guardrail.
    let routes = |promotion: Option<Value>, refs: bool| -> Config {
        let mut spec = routing("routes");
        if refs {
            spec["resourceRefs"] =
                json!([{"path": "/input_guardrails/0", "kind": "Guardrail", "name": "pii"}]);
        }
        if let Some(promotion) = promotion {
            spec["promotion"] = promotion;
        }
        serde_json::from_value(json!({
            "apiVersion": "aigw.io/v1alpha1", "kind": "Config",
            "metadata": {"name": "routes", "annotations": {"aigw.io/revision": "r1"}},
            "spec": spec
        }))
        .unwrap()
    };
    dev.api::<Config>()
        .create(&PostParams::default(), &routes(None, false))
        .await
        .unwrap();
    dev.wait_for::<Config>("routes", WAIT, |c| c.ready()).await;
    let after_routes =
        json!({"after": [{"namespace": dev.namespace, "name": "routes"}], "soak": "1s"});
    prod.api::<Config>()
        .create(&PostParams::default(), &routes(Some(after_routes), true))
        .await
        .unwrap();
    let config = prod.wait_for::<Config>("routes", WAIT, |c| c.ready()).await;
    let config_slug = config.status.unwrap().slug.unwrap();
    // dev's Config is paused (an operator investigating it): prod's Config makes no change
    // of its own meanwhile, and has none to make.
    let pause = json!({"metadata": {"annotations": {"aigw.io/paused": "true"}}});
    dev.api::<Config>()
        .patch("routes", &PatchParams::default(), &Patch::Merge(&pause))
        .await
        .unwrap();
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

    // r2 of the guardrail soaks in prod; its remote guardrail is deleted outside aigw.
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
    prod.wait_for::<Config>("routes", WAIT, |c| {
        c.condition("Ready")
            .is_some_and(|(s, r, _)| s == "False" && r == "ReferenceNotReady")
    })
    .await;

    // The guardrail's override lets r2 through: it is created again with a new slug.
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
    let followed = support::wait_until(Duration::from_secs(20), || async {
        (input_guardrail().await == json!(new_slug)).then_some(())
    })
    .await;
    let config = prod.api::<Config>().get("routes").await.unwrap();
    assert!(
        followed.is_some(),
        "prod's Config still names the deleted guardrail {} rather than {new_slug}; its Ready: {:?}; Promoted: {:?}",
        input_guardrail().await,
        config.condition("Ready"),
        config.condition("Promoted")
    );
    h.stop().await;
}
