//! Cluster-managed credential rotation and Connections, on a real kube-apiserver and the
//! emulator.

use crate::support;

use std::time::Duration;

use aigw::controller::runtime::failpoints::AFTER_ROTATE_PUT;
use aigw::emulator::{EmulatorOptions, OAuthOptions};
use aigw::resources::{Config, Connection, Deployment};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment as AppsDeployment, StatefulSet};
use k8s_openapi::api::core::v1::Secret;
use kube::Resource;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::endpoints::DEPLOYMENT_PUT;
use support::harness::{CLUSTER_LABEL, Harness, TOKEN, captured_logs};
use support::objects::{Conditions, Rotates, ready_at};

const WAIT: Duration = Duration::from_secs(30);
const ANNOTATION: &str = "aigw.io/credentials-rotated-at";

fn object<K: serde::de::DeserializeOwned>(value: Value) -> K {
    serde_json::from_value(value).unwrap()
}

fn rotating_deployment(name: &str, rotation: Value) -> Deployment {
    object(
        json!({"apiVersion": "aigw.io/v1alpha1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"name": name, "credentialsSecretRef": {"name": format!("{name}-creds")}, "rotation": rotation}}),
    )
}

async fn remote(h: &Harness, id: &str) -> Value {
    h.remote_record_present("deployments", "id", id).await
}

async fn secret_values(h: &Harness, name: &str) -> (String, String, String) {
    let data = h.env.api::<Secret>().get(name).await.unwrap().data.unwrap();
    let text = |k: &str| String::from_utf8(data[k].0.clone()).unwrap();
    (text("client_auth"), text("username"), text("password"))
}

/// The Deployment `edge` rotating as `rotation`, Ready: its Secret matches the remote
/// credentials and the workload `gw` was not restarted. Its id and first credentials.
async fn edge_created(h: &Harness, rotation: Value) -> (String, String) {
    let created = ready_rotating(h, "edge", rotation).await;
    let id = created.status.as_ref().unwrap().id.clone().unwrap();
    let first = assert_secret_matches_remote(h, "edge-creds", &id).await;
    assert!(
        workload_annotation::<AppsDeployment>(h, "gw")
            .await
            .is_none(),
        "creating is not rotating"
    );
    (id, first)
}

/// Creates the workload `name` of kind `K` with `spec`.
async fn create_workload<K: support::NamespacedKind>(h: &Harness, name: &str, spec: Value) {
    let workload: K = object(json!({"metadata": {"name": name}, "spec": spec}));
    support::create(&h.env.api::<K>(), &workload).await;
}

/// Creates the Deployment `name` rotating as `rotation`.
async fn create_rotating(h: &Harness, name: &str, rotation: Value) {
    support::create(
        &h.env.api::<Deployment>(),
        &rotating_deployment(name, rotation),
    )
    .await;
}

/// [`create_rotating`], once Ready.
async fn ready_rotating(h: &Harness, name: &str, rotation: Value) -> Deployment {
    create_rotating(h, name, rotation).await;
    h.wait_for::<Deployment>(name, WAIT, Deployment::ready)
        .await
}

/// The Secret holds exactly the emulator's current credentials.
async fn assert_secret_matches_remote(h: &Harness, secret: &str, id: &str) -> String {
    let remote = remote(h, id).await;
    let (client_auth, username, password) = secret_values(h, secret).await;
    assert_eq!(
        client_auth,
        remote["client_auth"].as_str().unwrap(),
        "client_auth"
    );
    assert_eq!(
        username,
        remote["credentials"]["username"].as_str().unwrap(),
        "username"
    );
    assert_eq!(
        password,
        remote["credentials"]["password"].as_str().unwrap(),
        "password"
    );
    client_auth
}

fn secrets_in(state: &Value) -> Vec<String> {
    let mut secrets = vec![TOKEN.to_string()];
    for d in state["deployments"].as_array().into_iter().flatten() {
        secrets.extend(d["client_auth"].as_str().map(str::to_string));
        secrets.extend(d["credentials"]["password"].as_str().map(str::to_string));
    }
    secrets
}

async fn assert_no_leaks(h: &Harness, extra: &[&str]) {
    let mut secrets = secrets_in(&h.state().await);
    secrets.extend(extra.iter().map(|s| s.to_string()));
    let logs = captured_logs();
    let events = h.env.events_text().await;
    let statuses = format!(
        "{}\n{}",
        support::statuses(&h.env.api::<Deployment>()).await,
        support::statuses(&Api::<Connection>::all(h.env.client.clone())).await
    );
    let places = [
        ("the logs", logs.as_str()),
        ("the events", events.as_str()),
        ("a status", statuses.as_str()),
    ];
    support::assert_none_in(&secrets, "secret value", &places);
}

async fn workload_annotation<K>(h: &Harness, name: &str) -> Option<String>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let object = serde_json::to_value(h.env.api::<K>().get(name).await.ok()?).ok()?;
    object["spec"]["template"]["metadata"]["annotations"][ANNOTATION]
        .as_str()
        .map(str::to_string)
}

async fn create_workloads(h: &Harness) {
    let pod = json!({"metadata": {"labels": {"app": "gw"}}, "spec": {"containers": [{"name": "gw", "image": "gateway:1"}]}});
    let spec = json!({"selector": {"matchLabels": {"app": "gw"}}, "template": pod});
    create_workload::<AppsDeployment>(h, "gw", spec.clone()).await;
    let mut sts = spec.clone();
    sts["serviceName"] = json!("gw");
    create_workload::<StatefulSet>(h, "gw-sts", sts.clone()).await;
    create_workload::<DaemonSet>(h, "gw-ds", spec.clone()).await;
}

#[tokio::test]
async fn triggered_rotation_updates_the_secret_and_restarts_workloads() {
    let h = Harness::start("rot-trigger").await;
    create_workloads(&h).await;
    let restart = json!([{"kind": "Deployment", "name": "gw"}, {"kind": "StatefulSet", "name": "gw-sts"}, {"kind": "DaemonSet", "name": "gw-ds"}]);
    let (id, first) = edge_created(&h, json!({"trigger": "v1", "restart": restart})).await;

    h.reset_stats().await;
    h.env
        .patch_spec::<Deployment>("edge", json!({"rotation": {"trigger": "v2"}}))
        .await;
    let rotated = h
        .wait_for::<Deployment>("edge", WAIT, |d| d.rotated_for("v2"))
        .await;
    let second = assert_secret_matches_remote(&h, "edge-creds", &id).await;
    assert_ne!(first, second, "the old client_auth is replaced");
    assert_eq!(
        h.handshake(&id, &first).await,
        401,
        "the old client_auth is rejected"
    );
    assert_eq!(
        h.handshake(&id, &second).await,
        200,
        "the Secret's client_auth is accepted"
    );
    assert_eq!(
        h.count("PUT /ai_gw/admin/v2/deployments/{deploymentId}")
            .await,
        1,
        "one rotation"
    );
    let rotated_at = rotated.status.unwrap().rotation.last_rotated_at.unwrap();
    assert_eq!(
        workload_annotation::<AppsDeployment>(&h, "gw")
            .await
            .as_deref(),
        Some(rotated_at.as_str())
    );
    assert_eq!(
        workload_annotation::<StatefulSet>(&h, "gw-sts")
            .await
            .as_deref(),
        Some(rotated_at.as_str())
    );
    assert_eq!(
        workload_annotation::<DaemonSet>(&h, "gw-ds")
            .await
            .as_deref(),
        Some(rotated_at.as_str())
    );
    assert!(h.env.events_text().await.contains("Rotated"));
    assert_no_leaks(&h, &[&first]).await;
    h.stop().await;
}

#[tokio::test]
async fn scheduled_rotation_happens_when_due_and_never_by_accident() {
    let h = Harness::start_with("rot-interval", Duration::from_secs(1)).await;
    let created = ready_rotating(&h, "sched", json!({"interval": "4s"})).await;
    let status = created.status.clone().unwrap();
    let id = status.id.clone().unwrap();
    let created_at = status.rotation.last_rotated_at.clone().unwrap();
    assert!(status.rotation.next_rotation_at.is_some());
    let first = assert_secret_matches_remote(&h, "sched-creds", &id).await;

    // Due after 4 s: one rotation, and the next one scheduled from it.
    let rotated = h
        .wait_for::<Deployment>("sched", Duration::from_secs(20), |d| {
            d.ready()
                && d.status
                    .as_ref()
                    .unwrap()
                    .rotation
                    .last_rotated_at
                    .as_deref()
                    != Some(created_at.as_str())
        })
        .await;
    let second = assert_secret_matches_remote(&h, "sched-creds", &id).await;
    assert_ne!(first, second);
    assert_eq!(h.handshake(&id, &first).await, 401);
    assert_eq!(h.handshake(&id, &second).await, 200);
    let status = rotated.status.unwrap();
    let last: jiff::Timestamp = status.rotation.last_rotated_at.unwrap().parse().unwrap();
    let next: jiff::Timestamp = status.rotation.next_rotation_at.unwrap().parse().unwrap();
    assert_eq!(next.duration_since(last).as_secs(), 4);

    // Drift checks and a restart do not rotate when nothing is due: a long interval now.
    h.env
        .patch_spec::<Deployment>("sched", json!({"rotation": {"interval": "720h"}}))
        .await;
    h.wait_for::<Deployment>("sched", WAIT, Deployment::ready)
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let settled = secret_values(&h, "sched-creds").await.0;
    h.reset_stats().await;
    let mut h = h;
    h.restart_operator().await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(h.count(DEPLOYMENT_PUT).await, 0, "{}", h.stats().await);
    assert!(
        h.count("GET /ai_gw/admin/v2/deployments/{deploymentId}")
            .await
            >= 2,
        "drift checks ran"
    );
    assert_eq!(secret_values(&h, "sched-creds").await.0, settled);
    assert_secret_matches_remote(&h, "sched-creds", &id).await;
    assert_no_leaks(&h, &[&first]).await;
    h.stop().await;
}

#[tokio::test]
async fn a_crash_between_the_rotation_and_the_secret_write_is_recovered() {
    let mut h = Harness::start("rot-crash").await;
    let deployments = h.env.api::<Deployment>();
    let created = ready_rotating(&h, "crashy", json!({"trigger": "a"})).await;
    let id = created.status.unwrap().id.unwrap();
    let before = assert_secret_matches_remote(&h, "crashy-creds", &id).await;

    // The process "dies" right after the API issued new credentials.
    h.ctx.failpoints.arm(AFTER_ROTATE_PUT);
    h.env
        .patch_spec::<Deployment>("crashy", json!({"rotation": {"trigger": "b"}}))
        .await;
    support::wait_until(WAIT, || async {
        (remote(&h, &id).await["client_auth"] != before.as_str()).then_some(())
    })
    .await
    .expect("the rotation PUT never happened");
    let lost = remote(&h, &id).await["client_auth"]
        .as_str()
        .unwrap()
        .to_string();
    // The Secret holds revoked credentials now, and status must not claim Ready.
    assert_eq!(secret_values(&h, "crashy-creds").await.0, before);
    let frozen = deployments.get("crashy").await.unwrap();
    let status = frozen.status.unwrap();
    assert!(
        status.rotation.pending_rotation.is_some(),
        "the intent was recorded before the PUT"
    );
    assert!(
        !ready_at(&status.conditions, frozen.metadata.generation),
        "not Ready over dead credentials"
    );

    h.restart_operator().await;
    // The dead process's call is given the longest a call can take before it is redone.
    let recovered = h
        .wait_for::<Deployment>("crashy", Duration::from_secs(90), |d| d.settled())
        .await;
    let now = assert_secret_matches_remote(&h, "crashy-creds", &id).await;
    assert_ne!(now, before);
    assert_ne!(now, lost, "rotated again: the lost values were never seen");
    assert_eq!(h.handshake(&id, &before).await, 401);
    assert_eq!(h.handshake(&id, &lost).await, 401);
    assert_eq!(h.handshake(&id, &now).await, 200);
    assert_eq!(
        recovered
            .status
            .unwrap()
            .rotation
            .observed_rotation_trigger
            .as_deref(),
        Some("b")
    );
    assert_no_leaks(&h, &[&before, &lost]).await;
    h.stop().await;
}

fn oauth_emulator() -> EmulatorOptions {
    let mut options = EmulatorOptions::new(TOKEN);
    options.oauth = Some(OAuthOptions {
        client_id: "aigw-client".into(),
        client_secret: "oauth-client-secret-9f3e".into(),
        token_ttl: Duration::from_secs(2),
    });
    options
}

/// Creates Deployment `name` (trigger "a"), then changes its trigger to "b" with the process
/// set to freeze right after the rotation PUT: returns the remote id once that PUT happened.
async fn freeze_a_rotation_after_its_put(h: &Harness, name: &str) -> String {
    let deployments = h.env.api::<Deployment>();
    support::create(
        &deployments,
        &rotating_deployment(name, json!({"trigger": "a"})),
    )
    .await;
    let created = h
        .wait_for::<Deployment>(name, WAIT, Deployment::ready)
        .await;
    let id = created.status.unwrap().id.unwrap();
    let before = remote(h, &id).await["client_auth"].clone();
    h.ctx.failpoints.arm(AFTER_ROTATE_PUT);
    h.env
        .patch_spec::<Deployment>(name, json!({"rotation": {"trigger": "b"}}))
        .await;
    support::wait_until(WAIT, || async {
        (remote(h, &id).await["client_auth"] != before).then_some(())
    })
    .await
    .expect("the rotation PUT never happened");
    id
}

/// A trigger changed while a rotation is in flight (here: frozen between its PUT and its
/// Secret write, then the process restarts) is not marked as seen by finishing that rotation:
/// the rotation is finished for the trigger it was started for, and the new trigger rotates
/// once more.
#[tokio::test]
async fn a_trigger_changed_during_a_rotation_rotates_again() {
    let mut h = Harness::start("rot-inflight").await;
    let deployments = h.env.api::<Deployment>();
    let id = freeze_a_rotation_after_its_put(&h, "busy").await;
    let trigger = |t: &str| json!({"spec": {"rotation": {"trigger": t}}});
    // While that rotation is in flight, the trigger changes again.
    deployments
        .patch(
            "busy",
            &PatchParams::default(),
            &Patch::Merge(&trigger("c")),
        )
        .await
        .unwrap();
    h.restart_operator().await;
    let done = h
        .env
        // After the crash, its call is given the longest a call can take before it is redone.
        .wait_for::<Deployment>("busy", Duration::from_secs(90), |d| d.settled_at("c"))
        .await;
    assert!(done.status.unwrap().rotation.rotating_for.is_none());
    // b's PUT, b's again (its values were lost with the frozen reconcile), then c's.
    assert_eq!(remote(&h, &id).await["rotations"], 3);
    assert_secret_matches_remote(&h, "busy-creds", &id).await;
    h.stop().await;
}

/// `aigw.io/paused` set while a rotation is between its PUT and its Secret write does not
/// freeze it: the rotation finishes (the Secret holds live credentials), then the pause holds.
#[tokio::test]
async fn a_pause_waits_for_a_rotation_in_flight() {
    let mut h = Harness::start("rot-pause").await;
    let deployments = h.env.api::<Deployment>();
    let id = freeze_a_rotation_after_its_put(&h, "held").await;
    support::merge_patch(
        &deployments,
        "held",
        json!({"metadata": {"annotations": {"aigw.io/paused": "true"}}}),
    )
    .await;
    h.restart_operator().await;
    h.env
        // After the crash, its call is given the longest a call can take before it is redone.
        .wait_for::<Deployment>("held", Duration::from_secs(90), |d| {
            d.status.as_ref().is_some_and(|s| {
                s.rotation.pending_rotation.is_none()
                    && s.rotation.observed_rotation_trigger.as_deref() == Some("b")
            })
        })
        .await;
    // The Secret holds what the API issued last: the rotation was finished, not frozen.
    assert_secret_matches_remote(&h, "held-creds", &id).await;
    h.stop().await;
}

async fn create_connection(h: &Harness, name: &str, extra: Value) {
    create_connection_with_secret(h, name, extra, "oauth-client-secret-9f3e").await;
}

/// [`create_connection`] whose Secret holds `client_secret`.
async fn create_connection_with_secret(h: &Harness, name: &str, extra: Value, client_secret: &str) {
    let secret: Secret = object(json!({"metadata": {"name": format!("{name}-oauth")},
        "stringData": {"client_id": "aigw-client", "client_secret": client_secret}}));
    support::create(&h.env.api(), &secret).await;
    let ns = &h.env.namespace;
    let mut spec = json!({
        "managementUrl": h.emulator.management_url(),
        "gatewayUrl": h.emulator.gateway_url(),
        "auth": {"oauth2ClientCredentials": {
            "tokenUrl": h.url("/oauth2/access_token"), "scope": "tsg_id:1234",
            "clientIdRef": {"namespace": ns, "name": format!("{name}-oauth"), "key": "client_id"},
            "clientSecretRef": {"namespace": ns, "name": format!("{name}-oauth"), "key": "client_secret"}}},
        "headers": [{"name": "x-tsg-id", "value": "1234"}],
        "qps": 50, "burst": 50,
    });
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    let connection: Connection = object(
        // Labelled for this test's installation: a Connection its --cluster-selector does not
        // select is another installation's.
        json!({"apiVersion": "aigw.io/v1alpha1", "kind": "Connection",
               "metadata": {"name": name, "labels": {CLUSTER_LABEL: ns}}, "spec": spec}),
    );
    Api::<Connection>::all(h.env.client.clone())
        .create(&PostParams::default(), &connection)
        .await
        .unwrap();
}

/// A harness with the OAuth emulator, and Connection `<name>-<namespace>` (returned) that allows
/// the test's namespace.
async fn with_oauth_connection(prefix: &str, name: &str, drift: Duration) -> (Harness, String) {
    let h = Harness::start_with_emulator(prefix, drift, oauth_emulator()).await;
    let name = format!("{name}-{}", h.env.namespace);
    create_connection(&h, &name, json!({"allowedNamespaces": [h.env.namespace]})).await;
    (h, name)
}

async fn delete_connection(h: &Harness, name: &str) {
    let _ = Api::<Connection>::all(h.env.client.clone())
        .delete(name, &DeleteParams::default())
        .await;
}

#[tokio::test]
async fn oauth_connection_refreshes_expiring_tokens_under_load() {
    let (h, name) = with_oauth_connection("rot-oauth", "oauth", Duration::from_secs(600)).await;
    let connections = Api::<Connection>::all(h.env.client.clone());
    support::wait_until(WAIT, || async {
        let c = connections.get(&name).await.ok()?;
        c.status
            .as_ref()
            .is_some_and(|s| ready_at(&s.conditions, c.metadata.generation))
            .then_some(())
    })
    .await
    .expect("the Connection never became Ready");

    let configs = h.env.api::<Config>();
    for i in 0..6 {
        let config: Config = object(
            json!({"apiVersion": "aigw.io/v1alpha1", "kind": "Config", "metadata": {"name": format!("load-{i}")},
            "spec": {"name": format!("load-{i}"), "config": {"retry": {"attempts": 1}}, "connectionRef": {"name": name}}}),
        );
        support::create(&configs, &config).await;
    }
    // Keep changing them for several token lifetimes (2 s each).
    for round in 2..10 {
        for i in 0..6 {
            let patch = json!({"spec": {"config": {"retry": {"attempts": round}}}});
            support::merge_patch(&configs, &format!("load-{i}"), patch).await;
        }
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    for i in 0..6 {
        h.wait_for::<Config>(&format!("load-{i}"), WAIT, |c| {
            c.status
                .as_ref()
                .is_some_and(|s| ready_at(&s.conditions, c.metadata.generation))
        })
        .await;
    }
    let token_requests = h.count("POST /oauth2/access_token").await;
    assert!(
        token_requests >= 3,
        "tokens were refreshed as they expired: {token_requests}"
    );
    let events = h.env.events_text().await;
    assert!(
        !events.contains("Warning"),
        "no reconcile failed:\n{events}"
    );
    assert_eq!(h.count("POST /ai_gw/v2/configs").await, 6);
    assert_no_leaks(&h, &["oauth-client-secret-9f3e"]).await;
    delete_connection(&h, &name).await;
    h.stop().await;
}

/// An API's error that quotes the bearer token it was called with: the token is one the
/// operator obtained with the Connection's client credentials (read from no Secret), and it
/// stands in no condition, event or log line, neither from a reconcile nor from the drift pass.
#[tokio::test]
async fn a_minted_token_an_answer_quotes_is_concealed() {
    let (h, name) = with_oauth_connection("rot-quoted", "quoted", Duration::from_secs(2)).await;
    let configs = h.env.api::<Config>();
    let config = |name: &str, connection: &str| -> Config {
        object(
            json!({"apiVersion": "aigw.io/v1alpha1", "kind": "Config", "metadata": {"name": name},
            "spec": {"name": name, "config": {"retry": {"attempts": 1}}, "connectionRef": {"name": connection}}}),
        )
    };
    // One Config the drift pass lists.
    support::create(&configs, &config("settled", &name)).await;
    h.wait_for::<Config>("settled", WAIT, |c| c.ready()).await;
    let mark = support::harness::log_mark();
    h.faults(json!({"quote_credentials": true, "failing_routes": {
        "POST /ai_gw/v2/configs": 400, "GET /ai_gw/v2/configs": 400}}))
        .await;
    support::create(&configs, &config("quoted", &name)).await;
    let says_failing = |c: &Config| {
        c.conditions()
            .iter()
            .any(|c| c.message.contains("failing_routes"))
    };
    let failed = h.wait_for::<Config>("quoted", WAIT, says_failing).await;
    let message = failed
        .conditions()
        .iter()
        .find(|c| c.message.contains("failing_routes"))
        .unwrap()
        .message
        .clone();
    assert!(
        message.contains("for token <secret>"),
        "the API's answer quoted the token, concealed: {message}"
    );
    // The drift pass's list fails too (every 2 s); let it, and the create, retry and log.
    let logged = support::wait_until(WAIT, || async {
        let logs = support::harness::logs_since(mark);
        logs.lines()
            .any(|l| l.contains("drift list failed") && l.contains(&name))
            .then_some(())
    })
    .await;
    assert!(logged.is_some(), "the drift pass never listed");
    tokio::time::sleep(Duration::from_secs(2)).await;
    // The emulator's tokens are `emu-` and 48 hex digits; none may stand anywhere.
    let statuses = support::statuses(&configs).await;
    for (place, text) in [
        ("the logs", support::harness::logs_since(mark)),
        ("the events", h.env.events_text().await),
        ("a status", statuses),
    ] {
        assert!(
            !text.contains("for token emu-"),
            "a minted token stands in {place}"
        );
    }
    h.faults(json!({})).await;
    delete_connection(&h, &name).await;
    h.stop().await;
}

#[tokio::test]
async fn a_namespace_the_connection_does_not_allow_is_stalled() {
    let h = Harness::start_with_emulator("rot-denied", Duration::from_secs(600), oauth_emulator())
        .await;
    let name = format!("narrow-{}", h.env.namespace);
    create_connection(&h, &name, json!({"allowedNamespaces": ["team-elsewhere"]})).await;
    let config: Config = object(
        json!({"apiVersion": "aigw.io/v1alpha1", "kind": "Config", "metadata": {"name": "denied"},
        "spec": {"name": "denied", "config": {"retry": {"attempts": 1}}, "connectionRef": {"name": name}}}),
    );
    support::create(&h.env.api(), &config).await;
    let stalled = h
        .wait_for::<Config>("denied", WAIT, |c| c.is_true("Stalled"))
        .await;
    let conditions = stalled.status.unwrap().managed.conditions;
    let stalled = conditions.iter().find(|c| c.type_ == "Stalled").unwrap();
    assert_eq!(stalled.reason, "NamespaceNotAllowed");
    assert!(
        stalled.message.contains(&h.env.namespace),
        "{}",
        stalled.message
    );
    assert_eq!(h.count("POST /ai_gw/v2/configs").await, 0);

    // Allowing the namespace brings the Config back without a spec change: the Connection's
    // change requeues the objects that use it.
    Api::<Connection>::all(h.env.client.clone())
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"allowedNamespaces": [h.env.namespace]}})),
        )
        .await
        .unwrap();
    h.wait_for::<Config>("denied", WAIT, |c| c.is_true("Ready"))
        .await;
    assert_eq!(h.count("POST /ai_gw/v2/configs").await, 1);

    // A Connection whose secret is wrong is not Ready, and says why without the secret. It is
    // wrong from the start: a Secret changed after the Connection's first probe is seen only at
    // its next one (the drift interval), and a patch right after the create raced that probe.
    let bad = format!("bad-{}", h.env.namespace);
    create_connection_with_secret(&h, &bad, json!({}), "wrong-secret-value-123").await;
    let connections = Api::<Connection>::all(h.env.client.clone());
    let failing = support::wait_until(WAIT, || async {
        let c = connections.get(&bad).await.ok()?;
        let ready = c
            .status
            .as_ref()?
            .conditions
            .iter()
            .find(|c| c.type_ == "Ready")?
            .clone();
        (ready.status == "False").then_some(ready)
    })
    .await
    .expect("the bad Connection was never reported");
    assert!(failing.message.contains("401"), "{}", failing.message);
    assert!(!failing.message.contains("wrong-secret-value-123"));
    assert_no_leaks(&h, &["oauth-client-secret-9f3e", "wrong-secret-value-123"]).await;
    delete_connection(&h, &name).await;
    delete_connection(&h, &bad).await;
    h.stop().await;
}

/// A gateway whose remote deployment vanished (404, not archived) is registered again, with new
/// credentials: the workloads that read the old ones roll, as after a rotation.
#[tokio::test]
async fn a_gateway_registered_again_after_a_404_restarts_its_workloads() {
    let h = Harness::start("rot-recreate").await;
    create_workloads(&h).await;
    let deployments = h.env.api::<Deployment>();
    let (first_id, first) = edge_created(
        &h,
        json!({"restart": [{"kind": "Deployment", "name": "gw"}]}),
    )
    .await;

    h.purge_deployment(&first_id).await;
    // Any change makes the controller read the gateway again (Deployments are read on every
    // reconcile); an annotation does not change the spec.
    support::merge_patch(
        &deployments,
        "edge",
        json!({"metadata": {"annotations": {"test/poke": "1"}}}),
    )
    .await;
    let recreated = h
        .env
        .ready_with_new::<Deployment>("edge", Duration::from_secs(60), &first_id, |d| {
            d.status.as_ref()?.id.as_deref()
        })
        .await;
    let status = recreated.status.unwrap();
    let second_id = status.id.clone().unwrap();
    let second = assert_secret_matches_remote(&h, "edge-creds", &second_id).await;
    assert_ne!(first, second, "the new gateway has new credentials");
    assert_eq!(
        workload_annotation::<AppsDeployment>(&h, "gw")
            .await
            .as_deref(),
        status.rotation.last_rotated_at.as_deref(),
        "the workload rolled onto the new credentials"
    );
    assert_eq!(
        h.state().await["deployments"].as_array().unwrap().len(),
        1,
        "one remote gateway"
    );
    assert_no_leaks(&h, &[&first]).await;
    h.stop().await;
}

// ---- Found by an attack on the rotation protocol; it failed before its fix. ----

/// A proxy in front of the emulator that removes `client_auth` from the next answer to a
/// `rotate_auth` PUT (the API rotated, its answer lacked the value: `Issued::incomplete`).
async fn stripping_proxy(
    upstream: String,
    armed: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> String {
    use std::sync::atomic::Ordering;
    fn strip(value: &mut Value) {
        if let Some(map) = value.as_object_mut() {
            map.remove("client_auth");
            if let Some(data) = map.get_mut("data") {
                strip(data);
            }
        }
    }
    support::proxy::proxy(upstream, move |received: support::proxy::Received| {
        let armed = armed.clone();
        async move {
            let support::proxy::Received {
                parts,
                path,
                body,
                client,
                upstream,
            } = &received;
            // Only the credentials and the content type go on (no `x-` header).
            let mut out = client
                .request(parts.method.clone(), format!("{upstream}{path}"))
                .body(body.to_vec());
            for (name, value) in &parts.headers {
                if name == "authorization" || name == "content-type" {
                    out = out.header(name.as_str(), value.as_bytes());
                }
            }
            let answer = out.send().await.unwrap();
            let status = answer.status().as_u16();
            let mut text = answer.bytes().await.unwrap().to_vec();
            let rotating = parts.method == reqwest::Method::PUT
                && parts.uri.path().contains("/deployments/")
                && String::from_utf8_lossy(body).contains("\"rotate_auth\":true");
            if rotating && status == 200 && armed.swap(false, Ordering::SeqCst) {
                let mut value: Value = serde_json::from_slice(&text).unwrap();
                strip(&mut value);
                text = serde_json::to_vec(&value).unwrap();
            }
            support::proxy::json_answer(status, text)
        }
    })
    .await
}

/// The API rotates, but its answer carries no `client_auth` (`Issued::incomplete`). The Secret
/// was once stamped with the rotation id before that was checked, so the next reconcile took
/// the rotation as stored and left revoked credentials in a Ready Deployment's Secret. A
/// partial answer is now never stamped: the rotation is done again.
#[tokio::test]
async fn an_incomplete_rotate_answer_is_done_again_never_completed_over_revoked_credentials() {
    let mut h = Harness::start("rot-incomplete").await;
    let created = ready_rotating(&h, "partial", json!({"trigger": "v1"})).await;
    let id = created.status.unwrap().id.unwrap();
    let first = assert_secret_matches_remote(&h, "partial-creds", &id).await;

    let armed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let proxy = stripping_proxy(h.emulator.management_url(), armed.clone()).await;
    h.restart_operator_via(&proxy).await;
    h.env
        .patch_spec::<Deployment>("partial", json!({"rotation": {"trigger": "v2"}}))
        .await;
    let settled = h
        .wait_for::<Deployment>("partial", Duration::from_secs(60), |d| d.settled_at("v2"))
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        !armed.load(std::sync::atomic::Ordering::SeqCst),
        "the rotate answer went through the proxy"
    );
    let (client_auth, _, _) = secret_values(&h, "partial-creds").await;
    let live = remote(&h, &id).await;
    let credentials = settled
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == "CredentialsAvailable")
        .map(|c| format!("{} {}", c.status, c.reason));
    eprintln!(
        "secret client_auth unchanged={} handshake={} CredentialsAvailable={credentials:?} events={}",
        client_auth == first,
        h.handshake(&id, &client_auth).await,
        h.env
            .events_text()
            .await
            .lines()
            .filter(|l| l.contains("Rotated") || l.contains("MissingState"))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    assert_eq!(
        client_auth,
        live["client_auth"].as_str().unwrap(),
        "the Secret holds the live client_auth"
    );
    assert_eq!(h.handshake(&id, &client_auth).await, 200);
    h.stop().await;
}

/// The condition `type` of `d`, if set.
fn condition<'a>(
    d: &'a Deployment,
    type_: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    d.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
}

/// Bounded rotation (issue 27, F5): admission refuses an interval of zero and an ApiKey's
/// interval shorter than its transition; an interval admission takes but the operator's floor
/// (`--min-rotation-interval`, 1h by default) does not is rotated at the floor, with a
/// `RotationIntervalRaised` condition and Warning event, and no rotation before it.
#[tokio::test]
async fn a_rotation_interval_below_the_floor_is_refused_or_raised() {
    let mut h = Harness::start_with("rot-floor", Duration::from_secs(1)).await;
    h.set_rotation_limits(support::harness::RotationLimits::default());
    h.restart_operator().await;
    let deployments = h.env.api::<Deployment>();

    // Admission: zero, and an ApiKey's interval below its transition period.
    let zero = deployments
        .create(
            &PostParams::default(),
            &rotating_deployment("zero", json!({"interval": "0s"})),
        )
        .await
        .expect_err("an interval of zero is refused at admission");
    assert!(
        zero.to_string()
            .contains("spec.rotation.interval must be longer than zero"),
        "{zero}"
    );
    let key: aigw::resources::ApiKey = object(json!({"apiVersion": "aigw.io/v1alpha1",
        "kind": "ApiKey", "metadata": {"name": "short"},
        "spec": {"name": "short", "kind": "service", "scopes": ["completions.write"],
            "secretRef": {"name": "short-key"},
            "rotation": {"interval": "30m", "transitionPeriod": "1h"}}}));
    let short = h
        .env
        .api::<aigw::resources::ApiKey>()
        .create(&PostParams::default(), &key)
        .await
        .expect_err("an interval below the transition period is refused at admission");
    assert!(
        short
            .to_string()
            .contains("spec.rotation.interval must be at least spec.rotation.transitionPeriod"),
        "{short}"
    );

    // Taken by admission, below the operator's floor: raised to it.
    create_rotating(&h, "fast", json!({"interval": "4s"})).await;
    let raised = h
        .wait_for::<Deployment>("fast", WAIT, |d| {
            d.ready() && condition(d, "RotationIntervalRaised").is_some()
        })
        .await;
    let raised_condition = condition(&raised, "RotationIntervalRaised").unwrap();
    assert_eq!(raised_condition.status, "True");
    assert_eq!(raised_condition.reason, "BelowFloor");
    assert!(
        raised_condition
            .message
            .contains("spec.rotation.interval 4s is below the floor of 1h"),
        "{}",
        raised_condition.message
    );
    let rotation = raised.status.clone().unwrap().rotation;
    let last: jiff::Timestamp = rotation.last_rotated_at.unwrap().parse().unwrap();
    let next: jiff::Timestamp = rotation.next_rotation_at.unwrap().parse().unwrap();
    assert_eq!(
        next.duration_since(last).as_secs(),
        3600,
        "rotated at the floor"
    );
    let events = h.env.events_text().await;
    assert!(
        events.contains("RotationIntervalRaised"),
        "a Warning event: {events}"
    );

    // Well past the 4 s: no rotation.
    h.reset_stats().await;
    tokio::time::sleep(Duration::from_secs(9)).await;
    assert_eq!(h.count(DEPLOYMENT_PUT).await, 0, "{}", h.stats().await);

    // An interval at the floor clears the condition.
    h.env
        .patch_spec::<Deployment>("fast", json!({"rotation": {"interval": "1h"}}))
        .await;
    h.wait_for::<Deployment>("fast", WAIT, |d| {
        d.ready() && condition(d, "RotationIntervalRaised").is_none()
    })
    .await;
    h.stop().await;
}

/// Two rotations of one resource are `--rotation-spacing` apart whatever asks for them: a
/// trigger changed right after the create, then again right after that rotation, each waits
/// (`status.rotationHeldUntil`), then rotates once.
#[tokio::test]
async fn rotations_of_one_resource_are_spaced_whatever_asks_for_them() {
    let spacing = Duration::from_secs(8);
    let mut h = Harness::start_with("rot-spacing", Duration::from_secs(1)).await;
    h.set_rotation_limits(support::harness::RotationLimits {
        min_interval: Duration::from_secs(1),
        spacing,
    });
    h.restart_operator().await;
    create_rotating(&h, "spaced", json!({"trigger": "a"})).await;
    h.wait_for::<Deployment>("spaced", WAIT, Deployment::ready)
        .await;
    let rotations = "PUT /ai_gw/admin/v2/deployments/{deploymentId}";
    h.reset_stats().await;

    for (n, trigger) in [(1, "b"), (2, "c")] {
        h.env
            .patch_spec::<Deployment>("spaced", json!({"rotation": {"trigger": trigger}}))
            .await;
        let held = h
            .wait_for::<Deployment>("spaced", WAIT, |d| {
                d.status
                    .as_ref()
                    .is_some_and(|s| s.rotation.rotation_held_until.is_some())
            })
            .await;
        let rotation = held.status.unwrap().rotation;
        let last: jiff::Timestamp = rotation.last_rotated_at.unwrap().parse().unwrap();
        let until: jiff::Timestamp = rotation.rotation_held_until.unwrap().parse().unwrap();
        let apart = until.duration_since(last).as_secs_f64();
        assert!(
            (8.0..=9.0).contains(&apart),
            "held {apart} s after the last rotation"
        );
        assert_ne!(rotation.observed_rotation_trigger.as_deref(), Some(trigger));
        assert_eq!(h.count(rotations).await, n - 1, "{}", h.stats().await);
        let rotated = h
            .wait_for::<Deployment>("spaced", WAIT, |d| d.rotated_for(trigger))
            .await;
        let rotation = rotated.status.unwrap().rotation;
        assert_eq!(rotation.rotation_held_until, None);
        let at: jiff::Timestamp = rotation.last_rotated_at.unwrap().parse().unwrap();
        let after = at.duration_since(last).as_secs_f64();
        assert!(after >= 8.0, "rotated {after} s after the last rotation");
        assert_eq!(h.count(rotations).await, n, "{}", h.stats().await);
    }
    // A hold is said where `kubectl describe` shows it (the second as a repeat of the first:
    // the event recorder counts events of one reason as a series).
    let events = h.env.events_text().await;
    let held: Vec<&str> = events
        .lines()
        .filter(|l| l.contains("RotationHeld"))
        .collect();
    assert!(!held.is_empty(), "{events}");
    assert!(
        held.iter()
            .all(|l| l.contains("spec.rotation.trigger changed: the rotation waits until")),
        "{events}"
    );
    h.stop().await;
}

/// A create whose answer was lost is found and its id recorded, and the process dies before
/// the rotation that fills the Secret (the chaos suite's sharded run caught this window): the
/// rotation was owed in the same status write, so the next process issues the credentials
/// instead of stalling on a Secret nothing will ever fill.
#[tokio::test]
async fn a_process_dying_between_a_recovered_create_and_its_rotation_leaves_the_rotation_owed() {
    let mut h = Harness::start("rot-recover").await;
    h.faults(json!({"drop_after_commit_once": ["POST /ai_gw/admin/v2/deployments"]}))
        .await;
    h.ctx
        .failpoints
        .arm(aigw::controller::runtime::failpoints::AFTER_RECOVERY_SAVED);
    create_rotating(&h, "recovered", json!({"trigger": "a"})).await;
    // Frozen right after the recovered id was saved, before any rotation was sent.
    let frozen = h
        .wait_for::<Deployment>("recovered", WAIT, |d| {
            d.status.as_ref().is_some_and(|s| s.id.is_some())
        })
        .await;
    let status = frozen.status.unwrap();
    let id = status.id.clone().unwrap();
    assert!(
        status.rotation.pending_rotation.is_some(),
        "the recovered id is saved with the rotation it still owes: {:?}",
        status.rotation
    );

    h.restart_operator().await;
    h.wait_for::<Deployment>("recovered", Duration::from_secs(90), Deployment::ready)
        .await;
    let stored = assert_secret_matches_remote(&h, "recovered-creds", &id).await;
    assert_eq!(h.handshake(&id, &stored).await, 200);
    assert_eq!(h.count("POST /ai_gw/admin/v2/deployments").await, 1);
    h.stop().await;
}
