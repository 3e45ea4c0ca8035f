//! Attacks on claims taken by the status record (issue 30's change to issue 27's
//! installations): a new object is taken by `status.installation` first, and the annotation
//! rides on its first metadata write. Each test sets up, with the installations stopped, a state
//! a race can leave between the record and the metadata write, or races two installations for
//! objects whose first reconcile writes no metadata; then checks that exactly one installation
//! has the object, and that no second remote copy exists. Real apiserver, real emulators.

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use aigw::controller::state::installation::ANNOTATION;
use aigw::resources::Config;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::harness::{CLUSTER_LABEL, Harness, Installation};
use support::objects::{Conditions, create, routing};

const WAIT: Duration = Duration::from_secs(60);
const DRIFT: Duration = Duration::from_secs(1);

/// Two installations of this test's namespace, both seeing every Connection (none exists: each
/// would use its own default), so which takes a new object is decided by the claim alone.
async fn two(h: &Harness) -> (Installation, Installation) {
    let ns = h.env.namespace.clone();
    let selector = format!("{CLUSTER_LABEL}={ns}");
    let a = h.installation("inst-a", &selector).await;
    let b = h.installation("inst-b", &selector).await;
    (a, b)
}

async fn copies(installation: &Installation) -> usize {
    let state = installation.state().await;
    state["configs"].as_array().map_or(0, Vec::len)
}

fn claim(config: &Config) -> Option<String> {
    config
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION))
        .cloned()
}

fn recorded(config: &Config) -> Option<String> {
    config.status.as_ref().and_then(|s| s.installation.clone())
}

/// What an operator's record writes (the status subresource, which a tenant cannot write).
async fn record(configs: &Api<Config>, name: &str, id: &str) {
    configs
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"installation": id}})),
        )
        .await
        .unwrap();
}

/// A tenant who writes the annotation right after another installation's record, before its
/// metadata write (the window the change opened), moves nothing: the recorded installation
/// stalls with `ClaimChanged` and makes no API call, the other does not take it, the
/// annotation the tenant wrote is not overwritten. A tenant cannot preset the record either:
/// A harness whose operator is stopped: the test runs the installations.
async fn without_operator(prefix: &str) -> Harness {
    let mut h = Harness::start_with(prefix, DRIFT).await;
    h.stop_operator().await;
    h
}

/// A Config with `metadata` routing as `name` does.
fn routing_config(metadata: Value, name: &str) -> Config {
    serde_json::from_value(json!({
        "apiVersion": "aigw.io/v1alpha1", "kind": "Config",
        "metadata": metadata, "spec": routing(name),
    }))
    .unwrap()
}

/// a `status` sent with the create is dropped.
#[tokio::test]
async fn a_claim_written_between_the_record_and_the_metadata_moves_nothing() {
    let h = without_operator("atk-window").await;
    let configs = h.env.api::<Config>();
    // A create carrying a record: the apiserver drops it.
    let mut preset = routing_config(json!({"name": "preset"}), "preset");
    preset.status = Some(aigw::resources::config::ConfigStatus {
        managed: aigw::resources::managed_status::ManagedStatus {
            installation: Some("inst-b".into()),
            ..Default::default()
        },
        ..Default::default()
    });
    let made = support::create(&configs, &preset).await;
    assert_eq!(recorded(&made), None, "a create set status.installation");

    create::<Config>(&h.env, "window", routing("window")).await;
    record(&configs, "window", "inst-a").await;
    support::merge_patch(
        &configs,
        "window",
        json!({"metadata": {"annotations": {ANNOTATION: "inst-b"}}}),
    )
    .await;
    let (a, b) = two(&h).await;
    let stalled = h
        .wait_for::<Config>("window", WAIT, |c| c.stalled_with("ClaimChanged"))
        .await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let window = configs.get("window").await.unwrap_or(stalled);
    assert_eq!(recorded(&window).as_deref(), Some("inst-a"));
    assert_eq!(claim(&window).as_deref(), Some("inst-b"));
    assert!(
        window
            .metadata
            .finalizers
            .clone()
            .unwrap_or_default()
            .is_empty(),
        "{:?}",
        window.metadata.finalizers
    );
    let remote = (copies(&a).await, copies(&b).await);
    // `preset` is taken by one of them and created once.
    assert_eq!(remote.0 + remote.1, 1, "remote copies a/b: {remote:?}");
    assert!(
        b.writes_to("configs", "window").is_empty(),
        "{:?}",
        b.writes_to("configs", "window")
    );
    drop((a, b));
    h.stop().await;
}

/// An object deleted after an installation recorded itself but before its metadata write (a
/// foreign finalizer keeps it): nothing is created remotely, neither installation adds a
/// finalizer or a claim, and the object goes once the foreign finalizer does.
#[tokio::test]
async fn an_object_deleted_between_the_record_and_the_metadata_is_not_held() {
    let h = without_operator("atk-deleted").await;
    let configs = h.env.api::<Config>();
    let held = routing_config(
        json!({"name": "going", "finalizers": ["test.aigw.io/hold"]}),
        "going",
    );
    support::create(&configs, &held).await;
    record(&configs, "going", "inst-a").await;
    configs
        .delete("going", &DeleteParams::default())
        .await
        .unwrap();
    let (a, b) = two(&h).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    let going = configs.get("going").await.unwrap();
    assert_eq!(
        going.metadata.finalizers.clone().unwrap_or_default(),
        ["test.aigw.io/hold"]
    );
    assert_eq!(claim(&going), None);
    assert_eq!((copies(&a).await, copies(&b).await), (0, 0));
    assert_eq!((a.remote_writes().await, b.remote_writes().await), (0, 0));
    support::merge_patch(&configs, "going", json!({"metadata": {"finalizers": null}})).await;
    let gone = support::gone_within(&configs, "going", WAIT).await;
    assert!(gone, "the object stayed");
    drop((a, b));
    h.stop().await;
}

/// Two installations racing for new objects whose first reconcile writes no metadata (Observe
/// with nothing to observe, a pause) and for ones created at once: each ends recorded and
/// annotated for the same one installation, which alone holds a finalizer, and each Full one
/// exists once remotely.
#[tokio::test]
async fn racing_installations_take_each_new_object_once_and_annotate_it_as_recorded() {
    let h = without_operator("atk-race").await;
    let (a, b) = two(&h).await;
    let mut names = Vec::new();
    for i in 0..4 {
        let full = format!("full-{i}");
        create::<Config>(&h.env, &full, routing(&full)).await;
        let observed = format!("observed-{i}");
        let mut spec = routing(&observed);
        spec["managementPolicy"] = json!("Observe");
        create::<Config>(&h.env, &observed, spec).await;
        names.extend([full, observed]);
    }
    let paused = routing_config(
        json!({"name": "paused", "annotations": {"aigw.io/paused": "true"}}),
        "paused",
    );
    let configs = h.env.api::<Config>();
    support::create(&configs, &paused).await;
    names.push("paused".into());
    let settled = support::wait_until(WAIT, || async {
        let mut owners = BTreeMap::new();
        for name in &names {
            let config = configs.get(name).await.ok()?;
            let owner = recorded(&config)?;
            (claim(&config).as_deref() == Some(owner.as_str())).then_some(())?;
            owners.insert(name.clone(), (owner, config));
        }
        Some(owners)
    })
    .await;
    let Some(owners) = settled else {
        let shown: Vec<Value> = futures::future::join_all(names.iter().map(|n| configs.get(n)))
            .await
            .into_iter()
            .flatten()
            .map(|c| json!([c.metadata.name, claim(&c), recorded(&c)]))
            .collect();
        panic!("not every object recorded and annotated alike: {shown:?}");
    };
    tokio::time::sleep(Duration::from_secs(4)).await;
    let installations = [&a, &b];
    for (name, (owner, _)) in &owners {
        let now = configs.get(name).await.unwrap();
        assert_eq!(recorded(&now).as_ref(), Some(owner), "{name} moved");
        assert_eq!(claim(&now).as_ref(), Some(owner), "{name} re-annotated");
        let finalizers = now.metadata.finalizers.clone().unwrap_or_default();
        assert!(
            finalizers
                .iter()
                .all(|f| *f == format!("aigw.io/finalizer.{owner}")),
            "{name}: {finalizers:?}"
        );
        for other in installations.iter().filter(|i| i.id != *owner) {
            let writes: Vec<String> = other
                .writes_to("configs", name)
                .into_iter()
                .filter(|w| !w.contains(" 409"))
                .collect();
            assert!(
                writes.is_empty(),
                "{} wrote to {name}: {writes:?}",
                other.id
            );
        }
    }
    let remote = (copies(&a).await, copies(&b).await);
    assert_eq!(remote.0 + remote.1, 4, "remote copies a/b: {remote:?}");
    drop((a, b));
    h.stop().await;
}

/// A member Lease a crashed shard left behind (held, never renewed again; no shard runs to
/// delete it): a replica without `--shards` does not lead beside it while it may be live, and
/// leads once it has gone unchanged for its lease duration by the replica's own clock, rather
/// than standing by for good.
#[tokio::test]
async fn a_crashed_shards_member_lease_holds_a_leader_without_shards_back_for_one_duration() {
    use super::leader::{Operator, TOKEN};
    use aigw::controller::runtime::{leader::LEASE_NAME, shards};
    use k8s_openapi::api::coordination::v1::Lease;

    let env = support::TestEnv::new("atk-ghost").await;
    let ns = env.namespace.clone();
    let group = shards::group_of(&format!("{ns}/{LEASE_NAME}"));
    let ghost: Lease = serde_json::from_value(json!({
        "metadata": {"name": shards::member_lease_name(&group, "crashed"),
                     "labels": {shards::GROUP_LABEL: group},
                     "annotations": {shards::VIEW_ANNOTATION: "crashed"}},
        "spec": {"holderIdentity": "crashed", "leaseDurationSeconds": 15,
                 "renewTime": "2026-01-01T00:00:00.000000Z"}
    }))
    .unwrap();
    Api::<Lease>::namespaced(env.client.clone(), &ns)
        .create(&PostParams::default(), &ghost)
        .await
        .unwrap();
    let emulator = aigw::emulator::spawn(aigw::emulator::EmulatorOptions::new(TOKEN))
        .await
        .expect("emulator did not start");
    let dir = tempfile::tempdir().unwrap();
    support::chart::install(
        &env.client,
        &support::chart::Scope::watched(&[&ns]).lease_namespace(&ns),
    )
    .await
    .kubeconfig_file(dir.path());
    let started = std::time::Instant::now();
    let plain = Operator::spawn("plain", &[&ns], &ns, &emulator, dir.path(), &[]);
    let answering = support::wait_until(WAIT, || async { plain.readyz().await }).await;
    assert!(answering.is_some(), "the replica never answered /readyz");
    tokio::time::sleep(Duration::from_secs(5)).await;
    let role = plain.readyz().await.map(|(_, role)| role);
    assert_ne!(
        role.as_deref(),
        Some("leader"),
        "led beside a member Lease that may be live"
    );
    assert!(
        plain.leads_within(WAIT).await,
        "a crashed shard's Lease held the replica without --shards back for good"
    );
    let after = started.elapsed();
    println!("led {:.1} s after it started", after.as_secs_f64());
    assert!(after >= Duration::from_secs(15), "led after {after:?}");
    drop(plain);
    env.cleanup().await;
}

/// An object from before claims existed (the shared `aigw.io/finalizer`, no annotation, no
/// record) deleted while no operator ran: the installation that starts (a named one, as the
/// chart's `<namespace>/<release>`) takes it and lets it go, rather than leaving its deletion on a
/// finalizer no installation holds; of two, only one writes about it.
#[tokio::test]
async fn a_deleted_object_from_before_claims_is_not_held_by_the_shared_finalizer() {
    let h = without_operator("atk-legacy").await;
    let configs = h.env.api::<Config>();
    let old = routing_config(
        json!({"name": "old", "finalizers": ["aigw.io/finalizer"]}),
        "old",
    );
    support::create(&configs, &old).await;
    configs
        .delete("old", &DeleteParams::default())
        .await
        .unwrap();
    let (a, b) = two(&h).await;
    let gone = support::gone_within(&configs, "old", Duration::from_secs(30)).await;
    let left = configs.get_opt("old").await.unwrap();
    assert!(
        gone,
        "the deletion waits on the shared finalizer: {:?}",
        left.map(|c| c.metadata)
    );
    let writers: Vec<&str> = [&a, &b]
        .iter()
        .filter(|i| {
            i.writes_to("configs", "old")
                .iter()
                .any(|w| !w.contains(" 409"))
        })
        .map(|i| i.id.as_str())
        .collect();
    assert!(writers.len() <= 1, "both wrote: {writers:?}");
    drop((a, b));
    h.stop().await;
}

/// The claim annotation is guarded at admission (the policy `aigw-installation-claims` of
/// `crds/`): a tenant with every right on the namespaced kinds but their status (what the
/// chart's user roles grant) cannot move an object to another installation, neither by
/// rewriting its claim nor by removing it; the refusal names the field. Its other edits pass,
/// and an annotation it writes at creation still proposes a new object to an installation.
#[tokio::test]
async fn a_tenant_can_neither_rewrite_nor_remove_a_guarded_claim() {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let h = without_operator("atk-guard").await;
    let (a, b) = two(&h).await;
    create::<Config>(&h.env, "guarded", routing("guarded")).await;
    let made = h
        .wait_for::<Config>("guarded", WAIT, |c| c.ready() && recorded(c).is_some())
        .await;
    let owner = claim(&made).expect("the taken object carries its claim");
    assert_eq!(recorded(&made).as_ref(), Some(&owner));
    let other = if owner == a.id { &b.id } else { &a.id };

    let user = format!("{}-tenant", h.env.namespace);
    h.env
        .create_from::<Role>(json!({
            "metadata": {"name": "tenant"},
            "rules": [{"apiGroups": ["aigw.io"], "resources": ["configs"], "verbs": ["*"]}]
        }))
        .await;
    h.env
        .create_from::<RoleBinding>(json!({
            "metadata": {"name": "tenant"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "tenant"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]
        }))
        .await;
    let tenant: Api<Config> =
        Api::namespaced(support::impersonating(&user).await, &h.env.namespace);
    // The apiserver's authorizer learns a new RoleBinding from its watch: until it has, the
    // tenant's patch is refused by RBAC, not by the claim's guard.
    let allowed = support::wait_until(WAIT, || async { tenant.get("guarded").await.ok() }).await;
    assert!(allowed.is_some(), "the tenant's Role never took effect");
    for (what, annotations) in [
        ("rewritten", json!({ANNOTATION: other})),
        ("removed", json!({ANNOTATION: null})),
    ] {
        let refused = tenant
            .patch(
                "guarded",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": annotations}})),
            )
            .await;
        match refused {
            Err(kube::Error::Api(status)) => assert!(
                status.code == 403
                    && status
                        .message
                        .contains("metadata.annotations[aigw.io/installation]"),
                "{what}: {status:?}"
            ),
            Ok(_) => panic!("a tenant's claim {what} was admitted"),
            Err(e) => panic!("{what}: {e}"),
        }
    }
    tenant
        .patch(
            "guarded",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"team": "x"}}})),
        )
        .await
        .expect("another annotation is the tenant's to write");
    let kept = tenant.get("guarded").await.unwrap();
    assert_eq!(claim(&kept).as_ref(), Some(&owner));
    assert_eq!(recorded(&kept).as_ref(), Some(&owner));

    let proposed = routing_config(
        json!({"name": "proposed", "annotations": {ANNOTATION: other}}),
        "proposed",
    );
    tenant
        .create(&PostParams::default(), &proposed)
        .await
        .expect("a claim written at creation proposes the object");
    let taken = h
        .wait_for::<Config>("proposed", WAIT, |c| recorded(c).is_some())
        .await;
    assert_eq!(recorded(&taken).as_ref(), Some(other));
    drop((a, b));
    h.stop().await;
}

/// Without the guard (`--claims status`, or a cluster without the policy) a new object is
/// taken by its status record before anything else, and its create costs three apiserver
/// writes: the record, the finalizer with the create intent and the claim, the result.
#[tokio::test]
async fn without_the_guard_a_new_object_is_taken_by_its_status_record_first() {
    use aigw::controller::state::claim_guard::ClaimMode;
    let h = without_operator("atk-status").await;
    let selector = format!("{CLUSTER_LABEL}={}", h.env.namespace);
    let only = h
        .installation_claiming("inst-s", &selector, ClaimMode::Status)
        .await;
    create::<Config>(&h.env, "recorded", routing("recorded")).await;
    let made = h.wait_for::<Config>("recorded", WAIT, |c| c.ready()).await;
    assert_eq!(recorded(&made).as_deref(), Some("inst-s"));
    assert_eq!(claim(&made).as_deref(), Some("inst-s"));
    let path = format!(
        "/apis/aigw.io/v1alpha1/namespaces/{}/configs/recorded",
        h.env.namespace
    );
    assert_eq!(
        only.writes_to("configs", "recorded"),
        [
            format!("PATCH {path}/status 200"),
            format!("PATCH {path} 200"),
            format!("PATCH {path}/status 200"),
        ]
    );
    drop(only);
    h.stop().await;
}

/// An object claimed by its annotation alone and in sync (as a release from before the record
/// leaves it, its status unchanged since) gets this installation's record at the first
/// reconcile of the operator that starts, although nothing else of its status changes: the
/// record, which a tenant cannot rewrite, is what decides whose it is. No API write.
#[tokio::test]
async fn an_object_claimed_by_its_annotation_alone_is_recorded_at_the_next_start() {
    let mut h = Harness::start("atk-record").await;
    let configs = h.env.api::<Config>();
    create::<Config>(&h.env, "old", routing("old")).await;
    let made = h
        .wait_for::<Config>("old", WAIT, |c| {
            c.ready() && recorded(c).is_some() && claim(c).is_some()
        })
        .await;
    let id = recorded(&made).unwrap();
    h.stop_operator().await;
    configs
        .patch_status(
            "old",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"installation": null}})),
        )
        .await
        .unwrap();
    h.reset_stats().await;
    h.restart_operator().await;
    let again = h
        .wait_for::<Config>("old", WAIT, |c| recorded(c).is_some())
        .await;
    assert_eq!(recorded(&again), Some(id));
    assert_eq!(h.remote_writes().await, 0);
    h.stop().await;
}

/// An object from before claims (the shared `aigw.io/finalizer`, no annotation, no record) is
/// taken by a named installation without a finalizer of its own beside the shared one, which
/// counts as its claimant's: a second one would stay on the object after a downgrade to a
/// release without them, its deletion waiting on a finalizer nothing removes.
#[tokio::test]
async fn an_object_from_before_claims_gets_no_second_finalizer_when_taken() {
    let h = without_operator("atk-shared").await;
    let configs = h.env.api::<Config>();
    let old = routing_config(
        json!({"name": "old", "finalizers": ["aigw.io/finalizer"]}),
        "old",
    );
    support::create(&configs, &old).await;
    let ns = h.env.namespace.clone();
    let one = h
        .installation("inst-a", &format!("{CLUSTER_LABEL}={ns}"))
        .await;
    let taken = h
        .wait_for::<Config>("old", WAIT, |c| c.ready() && claim(c).is_some())
        .await;
    assert_eq!(
        taken.metadata.finalizers.as_deref(),
        Some(&["aigw.io/finalizer".to_string()][..]),
        "a second finalizer beside the shared one"
    );
    assert_eq!(copies(&one).await, 1);
    drop(one);
    h.stop().await;
}
