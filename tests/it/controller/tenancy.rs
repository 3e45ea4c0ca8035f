//! Many teams in one cluster (issue 9): one owner per remote object, tenancy grants, and Secrets
//! that stay where they belong. Real apiserver, real emulator.

use crate::support;

use std::time::Duration;

use aigw::resources::{Config, Deployment, RateLimitsPolicy};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};
use support::endpoints::CONFIG_DELETE;
use support::harness::{Harness, Installation};
use support::objects::{Conditions, Rotates, create, gateway, limits, rotating_gateway, routing};

const WAIT: Duration = Duration::from_secs(60);
const DRIFT: Duration = Duration::from_secs(1);

async fn remote_config(h: &Harness, slug: &str) -> Option<Value> {
    let record = h.remote_record("configs", "slug", slug).await;
    (!record.is_null()).then_some(record)
}

/// Installations `inst-a` and `inst-b`: each selects this test's cluster-scoped objects but
/// those labelled for the other.
async fn two_installations(h: &Harness) -> (Installation, Installation) {
    let ns = &h.env.namespace;
    let label = support::harness::CLUSTER_LABEL;
    let selector = |other: &str| format!("{label}={ns},aigw-test/installation!={other}");
    let a = h.installation("inst-a", &selector("inst-b")).await;
    let b = h.installation("inst-b", &selector("inst-a")).await;
    (a, b)
}

async fn writes(h: &Harness) -> u64 {
    h.remote_writes().await
}

#[tokio::test]
async fn a_second_claim_on_a_config_writes_nothing_and_takes_over_only_when_the_owner_is_gone() {
    let h = Harness::start_two_teams("ten-config", DRIFT, None).await;
    let dev = h.other.as_ref().unwrap();
    let mut prod_spec = routing("prod-routing");
    prod_spec["deletionPolicy"] = "Orphan".into();
    create::<Config>(&h.env, "routing", prod_spec).await;
    let slug = h.env.ready_config_slug("routing", WAIT).await;
    let owner_document = remote_config(&h, &slug).await.unwrap()["config"].clone();
    // Creation times have one-second resolution; a tie would be broken by uid.
    tokio::time::sleep(Duration::from_millis(1100)).await;

    // Two intruders in the other namespace name the same slug with another document.
    for name in ["intruder", "late-intruder"] {
        let mut spec = routing(name);
        spec["slug"] = json!(slug);
        spec["config"] = json!({"retry": {"attempts": 9}});
        create::<Config>(dev, name, spec).await;
        tokio::time::sleep(Duration::from_millis(1100)).await; // distinct creation seconds
    }
    let message = dev
        .condition_message::<Config>("intruder", WAIT, ("Stalled", "AlreadyManaged"))
        .await;
    // The owner sits in another namespace: the message says another resource manages the
    // object, never which (tenant b learns nothing of tenant a's resources).
    assert!(
        message.contains("another resource on this Connection manages it")
            && !message.contains(h.env.namespace.as_str()),
        "does not name the owner in another namespace: {message}"
    );
    h.reset_stats().await;
    tokio::time::sleep(DRIFT * 3 + Duration::from_secs(1)).await;
    assert_eq!(writes(&h).await, 0, "{}", h.stats().await);
    assert_eq!(
        remote_config(&h, &slug).await.unwrap()["config"],
        owner_document,
        "the owner's document stays"
    );

    // Deleting a claimant that does not own the object never touches it.
    dev.delete_and_wait::<Config>("late-intruder", WAIT).await;
    assert!(
        remote_config(&h, &slug).await.is_some(),
        "the remote config survives"
    );

    // When the owner goes (leaving the object), the next claimant adopts it.
    h.env.delete_and_wait::<Config>("routing", WAIT).await;
    dev.wait_for::<Config>("intruder", WAIT, |c| c.ready())
        .await;
    assert_eq!(
        remote_config(&h, &slug).await.unwrap()["config"],
        json!({"retry": {"attempts": 9}})
    );
    h.stop().await;
}

#[tokio::test]
async fn a_second_claim_on_a_policy_is_stalled() {
    let h = Harness::start_two_teams("ten-policy", DRIFT, None).await;
    let dev = h.other.as_ref().unwrap();
    create::<RateLimitsPolicy>(&h.env, "limits", limits("limits")).await;
    let owner = h
        .wait_for::<RateLimitsPolicy>("limits", WAIT, |p| p.ready())
        .await;
    let id = owner.status.unwrap().id.unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let mut spec = limits("limits");
    spec["policyId"] = json!(id);
    spec["value"] = json!(5);
    create::<RateLimitsPolicy>(dev, "limits", spec).await;
    dev.wait_for::<RateLimitsPolicy>("limits", WAIT, |p| p.stalled_with("AlreadyManaged"))
        .await;
    h.reset_stats().await;
    tokio::time::sleep(DRIFT * 3 + Duration::from_secs(1)).await;
    assert_eq!(writes(&h).await, 0, "{}", h.stats().await);
    let remote = h.remote_record_present("rate_limits", "id", &id).await;
    assert_eq!(
        remote["value"].as_f64(),
        Some(100.0),
        "the owner's policy stays"
    );
    h.stop().await;
}

#[tokio::test]
async fn only_the_owner_rotates_a_shared_deployment() {
    let h = Harness::start_two_teams("ten-deploy", DRIFT, None).await;
    let dev = h.other.as_ref().unwrap();
    let owner_spec = rotating_gateway("shared-gw", "owner-creds", "1");
    let owners = h.env.api::<Deployment>();
    create::<Deployment>(&h.env, "gw", owner_spec).await;
    let owner = h.wait_for::<Deployment>("gw", WAIT, |d| d.ready()).await;
    let id = owner.status.unwrap().id.unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let mut intruder_spec = rotating_gateway("shared-gw", "stolen-creds", "x");
    intruder_spec["deploymentId"] = json!(id);
    let intruders = dev.api::<Deployment>();
    create::<Deployment>(dev, "gw", intruder_spec).await;
    dev.wait_for::<Deployment>("gw", WAIT, |d| d.stalled_with("AlreadyManaged"))
        .await;
    for (api, trigger) in [(&intruders, "y"), (&owners, "2"), (&intruders, "z")] {
        support::merge_patch(
            api,
            "gw",
            json!({"spec": {"rotation": {"trigger": trigger}}}),
        )
        .await;
    }
    h.wait_for::<Deployment>("gw", WAIT, |d| d.rotated_for("2"))
        .await;
    tokio::time::sleep(DRIFT * 3).await;
    let remote = h.remote_record_present("deployments", "id", &id).await;
    assert_eq!(
        remote["rotations"], 1,
        "only the owner's trigger change rotated"
    );
    assert!(
        dev.api::<Secret>()
            .get_opt("stolen-creds")
            .await
            .unwrap()
            .is_none(),
        "the intruder's Secret never received credentials"
    );
    h.stop().await;
}

#[tokio::test]
async fn grants_refuse_adoption_and_foreign_workspaces_without_any_api_call() {
    const WS_A: &str = "6f1d8c1e-5a8b-4c5e-9c1a-0b2d3e4f5a6b";
    const WS_B: &str = "0a9b8c7d-6e5f-4a3b-9c2d-1e0f9a8b7c6d";
    let grants = json!([
        {"namespaces": ["{ns}"], "workspaces": [WS_A], "allowAdoption": false},
        {"namespaces": ["{other}"], "allowAdoption": true}
    ]);
    let h = Harness::start_two_teams("ten-grant", DRIFT, Some(grants)).await;
    let mut adopt = routing("adopt");
    adopt["slug"] = json!("pc-someone-elses");
    adopt["workspaceId"] = json!(WS_A);
    let mut foreign = routing("foreign");
    foreign["workspaceId"] = json!(WS_B);
    let unscoped = routing("unscoped");
    for (name, spec) in [
        ("adopt", adopt),
        ("foreign", foreign),
        ("unscoped", unscoped),
    ] {
        create::<Config>(&h.env, name, spec).await;
    }
    let message = h
        .condition_message::<Config>("adopt", WAIT, ("Stalled", "AdoptionNotAllowed"))
        .await;
    assert!(message.contains("allowAdoption"), "{message}");
    let message = h
        .condition_message::<Config>("foreign", WAIT, ("Stalled", "WorkspaceNotAllowed"))
        .await;
    assert!(message.contains(WS_B), "{message}");
    h.wait_for::<Config>("unscoped", WAIT, |c| c.stalled_with("WorkspaceNotAllowed"))
        .await;
    tokio::time::sleep(DRIFT * 2).await;
    let stats = h.stats().await;
    assert_eq!(
        stats["requests"].as_object().map_or(0, |m| m.len()),
        0,
        "no API call at all: {stats}"
    );

    // The other namespace may adopt, in any workspace.
    let seeded = h
        .post(
            "/_emulator/seed",
            json!({"configs": [{"name": "theirs", "config": routing("theirs")["config"]}]}),
        )
        .await;
    let slug = seeded["configs"][0]["slug"].as_str().unwrap();
    let mut spec = routing("theirs");
    spec["slug"] = json!(slug);
    let other = h.other.as_ref().unwrap();
    create::<Config>(other, "theirs", spec).await;
    other
        .wait_for::<Config>("theirs", WAIT, |c| c.ready())
        .await;
    h.stop().await;
}

#[tokio::test]
async fn a_credentials_secret_aigw_did_not_create_is_never_taken_over() {
    let h = Harness::start("ten-secret").await;
    let secrets = h.env.api::<Secret>();
    let theirs: Secret = serde_json::from_value(json!({
        "metadata": {"name": "someone-elses"},
        "stringData": {"client_auth": "precious"}
    }))
    .unwrap();
    support::create(&secrets, &theirs).await;
    create::<Deployment>(&h.env, "gw", gateway("gw-conflict", "someone-elses")).await;
    h.wait_for::<Deployment>("gw", WAIT, |d| d.stalled_with("SecretConflict"))
        .await;
    assert_eq!(h.count("POST /ai_gw/admin/v2/deployments").await, 0);
    let after = secrets.get("someone-elses").await.unwrap();
    assert_eq!(after.data.unwrap()["client_auth"].0, b"precious");
    assert!(after.metadata.owner_references.is_none());
    h.stop().await;
}

#[tokio::test]
async fn an_orphaned_deployment_keeps_its_live_credentials() {
    let h = Harness::start("ten-orphan").await;
    let mut spec = gateway("gw-orphan", "orphan-creds");
    spec["deletionPolicy"] = "Orphan".into();
    create::<Deployment>(&h.env, "gw", spec).await;
    let ready = h.wait_for::<Deployment>("gw", WAIT, |d| d.ready()).await;
    let id = ready.status.unwrap().id.unwrap();
    h.env.delete_and_wait::<Deployment>("gw", WAIT).await;
    // Garbage collection would have removed an owned Secret by now; give it a moment anyway.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let secret = h.env.api::<Secret>().get("orphan-creds").await.unwrap();
    assert!(
        secret
            .metadata
            .owner_references
            .unwrap_or_default()
            .is_empty()
    );
    let client_auth = String::from_utf8(secret.data.unwrap()["client_auth"].0.clone()).unwrap();
    assert_eq!(h.handshake(&id, &client_auth).await, 200);
    h.stop().await;
}

#[tokio::test]
async fn a_connection_may_not_read_secrets_outside_its_namespace() {
    let h = Harness::start("ten-conn").await;
    let foreign_ns = h.env.namespace.clone();
    // The operator's Connections may read Secrets only in "aigw-system".
    let ctx_connections = aigw::controller::Connections::new(h.env.client.clone(), None)
        .with_secret_namespace(Some("aigw-system".into()));
    let connection: aigw::resources::Connection = serde_json::from_value(json!({
        "apiVersion": "aigw.io/v1alpha1", "kind": "Connection",
        "metadata": {"name": format!("{foreign_ns}-conn")},
        "spec": {"managementUrl": h.emulator.management_url(),
                 "auth": {"bearerToken": {"secretRef": {"namespace": foreign_ns, "name": "tok", "key": "token"}}}}
    }))
    .unwrap();
    let error = ctx_connections.probe(&connection).await.unwrap_err();
    assert_eq!(error.category(), "SecretNamespaceNotAllowed");
    assert!(error.to_string().contains("aigw-system"), "{error}");
    let _ = Api::<Secret>::namespaced(h.env.client.clone(), &foreign_ns)
        .delete("tok", &DeleteParams::default())
        .await;
    h.stop().await;
}

/// Two installations over one namespace and the same cluster-scoped kinds, each with its own id,
/// tenant (its own emulator and token behind its `default`) and `--cluster-selector`: each
/// object is taken by one of them, and the other makes no write about it, remote or in the
/// cluster (no claim, finalizer, status or event). A Config naming no Connection (each
/// installation's own `default`) has one remote copy; a ClusterGuardrail both select is not
/// created again by the other when the one that took it is gone; objects naming one
/// installation's Connection are that one's alone.
#[tokio::test]
async fn two_installations_act_only_on_their_own_objects() {
    use aigw::controller::state::installation::ANNOTATION;
    use aigw::resources::{ClusterGuardrail, Connection};
    use support::harness::CLUSTER_LABEL;

    let mut h = Harness::start_with("ten-inst", DRIFT).await;
    // The harness's own operator is neither installation.
    h.stop_operator().await;
    let ns = h.env.namespace.clone();
    // Both select this test's cluster-scoped objects; a Connection labelled for one is not the
    // other's.
    let (a, b) = two_installations(&h).await;

    // A Connection of b's (to b's tenant), and a Config naming it.
    h.env
        .create_from::<Secret>(json!({
            "metadata": {"name": "b-token"}, "stringData": {"token": b.token}
        }))
        .await;
    let conn_b = format!("{ns}-b");
    let connection: Connection = serde_json::from_value(json!({
        "apiVersion": "aigw.io/v1alpha1", "kind": "Connection",
        "metadata": {"name": conn_b, "labels": {CLUSTER_LABEL: ns, "aigw-test/installation": "inst-b"}},
        "spec": {"managementUrl": b.emulator.management_url(), "gatewayUrl": b.emulator.gateway_url(),
                 "auth": {"bearerToken": {"secretRef": {"namespace": ns, "name": "b-token", "key": "token"}}}}
    }))
    .unwrap();
    let connections = Api::<Connection>::all(h.env.client.clone());
    support::create(&connections, &connection).await;
    let mut through_b = routing("through-b");
    through_b["connectionRef"] = json!({"name": conn_b});
    create::<Config>(&h.env, "through-b", through_b).await;
    // A Connection both select but a third installation claimed by hand, and a Config naming
    // it: neither a nor b touches them.
    let conn_z = format!("{ns}-z");
    let claimed: Connection = serde_json::from_value(json!({
        "apiVersion": "aigw.io/v1alpha1", "kind": "Connection",
        "metadata": {"name": conn_z, "labels": {CLUSTER_LABEL: ns},
                     "annotations": {ANNOTATION: "inst-z"}},
        "spec": {"managementUrl": b.emulator.management_url(), "gatewayUrl": b.emulator.gateway_url(),
                 "auth": {"bearerToken": {"secretRef": {"namespace": ns, "name": "b-token", "key": "token"}}}}
    }))
    .unwrap();
    support::create(&connections, &claimed).await;
    let mut through_z = routing("through-z");
    through_z["connectionRef"] = json!({"name": conn_z});
    create::<Config>(&h.env, "through-z", through_z).await;
    // A Config naming no Connection, and a ClusterGuardrail: both installations see them.
    create::<Config>(&h.env, "shared", routing("shared")).await;
    let guardrail_spec = json!({"name": "org-shared",
        "checks": [{"id": "default.regexMatch", "parameters": {"rule": "\\d{16}"}}],
        "actions": {"deny": true}});
    let guardrails = Api::<ClusterGuardrail>::all(h.env.client.clone());
    let guardrail = h.cluster_name("org-shared");
    h.create_cluster::<aigw::resources::ClusterGuardrail>("org-shared", guardrail_spec)
        .await;

    for name in ["shared", "through-b"] {
        h.wait_for::<Config>(name, WAIT, |c| c.ready()).await;
    }
    support::wait_until(WAIT, || async {
        guardrails.get(&guardrail).await.ok().filter(|g| g.ready())
    })
    .await
    .expect("the ClusterGuardrail is Ready");
    // Both have had time to act (their drift interval is 1 s).
    tokio::time::sleep(Duration::from_secs(5)).await;

    let installations = [&a, &b];
    let by_id = |id: &str| *installations.iter().find(|i| i.id == id).unwrap();
    let other = |id: &str| *installations.iter().find(|i| i.id != id).unwrap();
    // One remote copy of each, in the tenant of the installation that took it.
    let mut copies = Vec::new();
    for installation in installations {
        let state = installation.state().await;
        for config in state["configs"].as_array().into_iter().flatten() {
            copies.push((
                installation.id.clone(),
                config["slug"].as_str().unwrap_or("").to_string(),
            ));
        }
    }
    let shared_copies: Vec<_> = copies
        .iter()
        .filter(|(_, slug)| slug.contains("shared"))
        .collect();
    assert_eq!(
        shared_copies.len(),
        1,
        "one remote copy of the Config naming no Connection: {copies:?}"
    );
    let (in_a, in_b) = (
        guardrail_copies(&a).await > 0,
        guardrail_copies(&b).await > 0,
    );
    assert!(
        in_a != in_b,
        "the ClusterGuardrail exists in exactly one tenant (a: {in_a}, b: {in_b})"
    );
    let claim = |annotations: Option<&std::collections::BTreeMap<String, String>>| {
        annotations.and_then(|a| a.get(ANNOTATION)).cloned()
    };
    let configs = h.env.api::<Config>();
    let shared = configs.get("shared").await.unwrap();
    let shared_owner = claim(shared.metadata.annotations.as_ref()).expect("shared is claimed");
    let through = configs.get("through-b").await.unwrap();
    assert_eq!(
        claim(through.metadata.annotations.as_ref()).as_deref(),
        Some("inst-b"),
        "a Config naming b's Connection is b's"
    );
    let org = guardrails.get(&guardrail).await.unwrap();
    let guardrail_owner =
        claim(org.metadata.annotations.as_ref()).expect("the guardrail is claimed");

    assert_eq!(shared_copies[0].0, shared_owner, "{copies:?}");
    assert_eq!(
        guardrail_copies(other(&guardrail_owner)).await,
        0,
        "the ClusterGuardrail exists only in its owner's tenant"
    );
    assert!(guardrail_copies(by_id(&guardrail_owner)).await > 0);

    // In the cluster: the installation that did not take an object wrote nothing about it. Of
    // two racing for an unclaimed one, the loser's claim (with the claim annotation guarded at
    // admission, its first metadata write) may have been sent and refused (409, the
    // precondition): that changed nothing.
    let not_theirs = [
        (other(&shared_owner), "configs", "shared".to_string(), true),
        (&a, "configs", "through-b".to_string(), false),
        (
            other(&guardrail_owner),
            "clusterguardrails",
            guardrail.clone(),
            true,
        ),
    ];
    for (installation, resource, name, raced) in not_theirs {
        let writes = installation.writes_to(resource, &name);
        let refused_claim = format!(
            "PATCH /apis/aigw.io/v1alpha1/{}{resource}/{name} 409",
            match resource {
                "configs" => format!("namespaces/{ns}/"),
                _ => String::new(),
            }
        );
        let allowed: &[String] = match raced {
            true => std::slice::from_ref(&refused_claim),
            false => &[],
        };
        assert!(
            writes.len() <= 1 && writes.iter().all(|w| allowed.contains(w)),
            "{} wrote to {resource}/{name}, which is not its own: {writes:?}",
            installation.id
        );
    }
    // The Connection a third installation claimed: not probed, and nothing naming it taken.
    for installation in [&a, &b] {
        for (resource, name) in [("connections", conn_z.as_str()), ("configs", "through-z")] {
            let writes = installation.writes_to(resource, name);
            assert!(
                writes.is_empty(),
                "{} wrote to {resource}/{name}, claimed by inst-z: {writes:?}",
                installation.id
            );
        }
    }
    // Taking and creating a new object costs two apiserver writes, in this order: the claim's
    // annotation with the finalizer and the create intent (one metadata write, before anything
    // else and before the POST), and the result, which records the installation in status.
    let path = format!("/apis/aigw.io/v1alpha1/namespaces/{ns}/configs/through-b");
    let done: Vec<String> = b
        .writes_to("configs", "through-b")
        .into_iter()
        .filter(|w| !w.ends_with(" 409"))
        .collect();
    assert_eq!(
        done,
        [
            format!("PATCH {path} 200"),
            format!("PATCH {path}/status 200"),
        ],
        "the writes of a create"
    );
    assert_eq!(
        through
            .status
            .as_ref()
            .and_then(|s| s.managed.installation.as_deref()),
        Some("inst-b"),
        "the result records the installation"
    );
    assert_eq!(
        claim(through.metadata.annotations.as_ref()).as_deref(),
        Some("inst-b"),
        "the claim's annotation came with the finalizer"
    );
    assert!(
        connections.get(&conn_z).await.unwrap().status.is_none(),
        "a Connection claimed by another installation gets no status"
    );
    let through_z = configs.get("through-z").await.unwrap();
    assert!(claim(through_z.metadata.annotations.as_ref()).is_none());
    assert!(through_z.status.is_none());
    assert!(!copies.iter().any(|(_, slug)| slug.contains("through-z")));

    let mut events = Vec::new();
    // Cluster-scoped objects' events go to the namespace `default`.
    for namespace in [ns.as_str(), "default"] {
        let api = kube::Api::<k8s_openapi::api::events::v1::Event>::namespaced(
            h.env.client.clone(),
            namespace,
        );
        events.extend(api.list(&Default::default()).await.unwrap().items);
    }
    for event in events {
        let regarding = event
            .regarding
            .as_ref()
            .and_then(|r| r.name.clone())
            .unwrap_or_default();
        let reporter = event.reporting_instance.clone().unwrap_or_default();
        let owner = match regarding.as_str() {
            "shared" => &shared_owner,
            "through-b" => "inst-b",
            n if n == guardrail => &guardrail_owner,
            _ => continue,
        };
        assert!(
            reporter == owner || !["inst-a", "inst-b"].contains(&reporter.as_str()),
            "{reporter} published an event about {regarding}, which is {owner}'s: {:?}",
            event.note
        );
    }

    // The owner of the guardrail leaves; a spec change must not make the other create it in its
    // own tenant.
    let mut a = a;
    let mut b = b;
    let (owner, survivor) = match guardrail_owner.as_str() {
        "inst-a" => (&mut a, &b),
        _ => (&mut b, &a),
    };
    owner.stop().await;
    let before = survivor.remote_writes().await;
    support::merge_patch(
        &guardrails,
        &guardrail,
        json!({"spec": {"actions": {"deny": false}}}),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        guardrail_copies(survivor).await,
        0,
        "re-created by the survivor"
    );
    assert!(
        survivor
            .writes_to("clusterguardrails", &guardrail)
            .iter()
            .all(|w| w.ends_with(" 409")),
        "{:?}",
        survivor.writes_to("clusterguardrails", &guardrail)
    );
    // Nothing of its own changed: no remote write at all since.
    assert_eq!(
        survivor.remote_writes().await,
        before,
        "{} wrote remotely after the other left",
        survivor.id
    );

    let _ = connections.delete(&conn_b, &DeleteParams::default()).await;
    stop_all(h, [a, b]).await;
}

/// Another installation's Config names nothing of this installation's: it does not take the
/// slug of a Guardrail this installation took (that slug is of another tenant: `default` is each
/// installation's own), and it does not keep that Guardrail from being deleted. Failed before:
/// the other's Config went Ready with the slug, and the deletion waited on it for good.
#[tokio::test]
async fn another_installations_config_neither_uses_nor_pins_a_guardrail() {
    use aigw::controller::state::installation::ANNOTATION;
    use aigw::resources::Guardrail;

    let (h, a, b) = two_without_operator("ten-pin").await;
    // Claimed up front, so which installation has which is not a race.
    fn claimed<K: serde::de::DeserializeOwned>(kind: &str, name: &str, id: &str, spec: Value) -> K {
        serde_json::from_value(json!({
            "apiVersion": "aigw.io/v1alpha1", "kind": kind,
            "metadata": {"name": name, "annotations": {ANNOTATION: id}}, "spec": spec
        }))
        .unwrap()
    }
    let guardrail = json!({"name": "pii", "workspaceId": "9f3c2b1a-0d4e-4f6a-8b7c-1e2d3f4a5b6c",
        "checks": [{"id": "default.regexMatch", "parameters": {"rule": "\\d{16}"}}],
        "actions": {"deny": true}});
    support::create(
        &h.env.api::<Guardrail>(),
        &claimed("Guardrail", "pii", "inst-a", guardrail),
    )
    .await;
    h.wait_for::<Guardrail>("pii", WAIT, |g| g.ready()).await;
    assert!(
        a.state().await.to_string().contains("pii"),
        "a created it in its tenant"
    );
    let mut user = routing("user");
    user["resourceRefs"] =
        json!([{"path": "/input_guardrails/0", "kind": "Guardrail", "name": "pii"}]);
    support::create(
        &h.env.api::<Config>(),
        &claimed("Config", "user", "inst-b", user),
    )
    .await;
    let message = h
        .condition_message::<Config>("user", WAIT, ("Stalled", "InvalidSpec"))
        .await;
    assert!(message.contains("another installation"), "{message}");
    let b_configs = b.state().await["configs"].clone();
    assert_eq!(
        b_configs.as_array().map_or(0, Vec::len),
        0,
        "b created no config with a's slug: {b_configs}"
    );

    // a deletes its Guardrail: b's Config does not hold it.
    h.env.delete_and_wait::<Guardrail>("pii", WAIT).await;
    assert!(
        !a.state().await.to_string().contains("pii"),
        "the guardrail is gone from a's tenant"
    );
    stop_all(h, [a, b]).await;
}

/// How often the guardrail `org-shared` shows in `installation`'s tenant.
async fn guardrail_copies(installation: &support::harness::Installation) -> usize {
    let state = installation.state().await;
    state.to_string().matches("org-shared").count()
}

/// A dry run writes no claim: on an object no installation has claimed yet it reports what the
/// installation that takes it would do (`WouldCreate`), and leaves it unclaimed for that one.
#[tokio::test]
async fn a_dry_run_writes_no_claim() {
    use aigw::controller::state::installation::ANNOTATION;
    let mut h = Harness::start("ten-dry").await;
    h.stop_operator().await;
    create::<Config>(&h.env, "unclaimed", routing("unclaimed")).await;
    h.restart_dry_run().await;
    let reported = support::wait_until(WAIT, || async {
        let events = h.env.events_text().await;
        events.contains("unclaimed WouldCreate").then_some(())
    })
    .await;
    assert!(reported.is_some(), "{}", h.env.events_text().await);
    let config = h.env.api::<Config>().get("unclaimed").await.unwrap();
    let annotations = config.metadata.annotations.unwrap_or_default();
    assert!(!annotations.contains_key(ANNOTATION), "{annotations:?}");
    assert!(config.metadata.finalizers.unwrap_or_default().is_empty());
    assert_eq!(h.remote_writes().await, 0);
    h.stop().await;
}

/// A resource this installation's grants refuse is not claimed by it (attack on issue 27): the
/// refusal is reported in status, but no `aigw.io/installation` annotation and no finalizer
/// are written, so an installation whose grants admit it can take it. Once the grants admit it,
/// this installation claims it and reconciles it. Before, the claim was written first, and the
/// refused resource was this installation's for good.
#[tokio::test]
async fn a_resource_refused_by_the_grants_is_not_claimed() {
    const WS_A: &str = "6f1d8c1e-5a8b-4c5e-9c1a-0b2d3e4f5a6b";
    const WS_B: &str = "0a9b8c7d-6e5f-4a3b-9c2d-1e0f9a8b7c6d";
    let mut h = Harness::start_with_grants(
        "ten-noclaim",
        DRIFT,
        json!([{"namespaces": ["{ns}"], "workspaces": [WS_A]}]),
    )
    .await;
    let mut foreign = routing("foreign");
    foreign["workspaceId"] = json!(WS_B);
    create::<Config>(&h.env, "foreign", foreign).await;
    let refused = h
        .wait_for::<Config>("foreign", WAIT, |c| c.stalled_with("WorkspaceNotAllowed"))
        .await;
    tokio::time::sleep(DRIFT * 3).await;
    let refused = h
        .env
        .api::<Config>()
        .get("foreign")
        .await
        .unwrap_or(refused);
    let annotations = refused.metadata.annotations.clone().unwrap_or_default();
    assert!(
        !annotations.contains_key("aigw.io/installation"),
        "claimed though refused: {annotations:?}"
    );
    assert!(
        refused
            .metadata
            .finalizers
            .as_ref()
            .is_none_or(Vec::is_empty),
        "{:?}",
        refused.metadata.finalizers
    );

    // Admitted now: claimed and reconciled.
    h.set_grants(json!([{"namespaces": ["{ns}"], "workspaces": [WS_A, WS_B]}]));
    h.restart_operator().await;
    let ready = h.wait_for::<Config>("foreign", WAIT, |c| c.ready()).await;
    let annotations = ready.metadata.annotations.unwrap_or_default();
    assert!(
        annotations.contains_key("aigw.io/installation"),
        "{annotations:?}"
    );
    h.stop().await;
}

/// Stops the installations, then the harness.
async fn stop_all<const N: usize>(h: Harness, installations: [Installation; N]) {
    drop(installations);
    h.stop().await;
}

/// A harness whose operator is stopped, and two installations (`inst-a`, `inst-b`) over its
/// namespace.
async fn two_without_operator(prefix: &str) -> (Harness, Installation, Installation) {
    let mut h = Harness::start_with(prefix, DRIFT).await;
    h.stop_operator().await;
    let (a, b) = two_installations(&h).await;
    (h, a, b)
}

/// Neither installation holds a copy of a config any more.
async fn assert_no_copies(a: &Installation, b: &Installation) {
    let (in_a, in_b) = (config_copies(a).await, config_copies(b).await);
    assert_eq!(
        (in_a, in_b),
        (0, 0),
        "copies after delete: a={in_a} b={in_b}"
    );
}

/// The installation the Config's status records.
fn recorded(config: &Config) -> Option<&str> {
    config
        .status
        .as_ref()
        .and_then(|s| s.installation.as_deref())
}

/// The Config `name` once it reports `Stalled`/`ClaimChanged` (`None` if it does not in time).
async fn claim_changed(configs: &Api<Config>, name: &str) -> Option<Config> {
    support::wait_until(WAIT, || async {
        let config = configs.get(name).await.ok()?;
        config.stalled_with("ClaimChanged").then_some(config)
    })
    .await
}

/// Rewrites the claim annotation of the Config `name` to the installation `id`.
async fn rewrite_claim(configs: &Api<Config>, name: &str, id: &str) {
    configs
        .patch(name, &PatchParams::default(), &rewritten_claim(id))
        .await
        .unwrap();
}

/// The remote configs in `installation`'s tenant.
async fn config_copies(installation: &support::harness::Installation) -> usize {
    let state = installation.state().await;
    state["configs"].as_array().map_or(0, Vec::len)
}

/// A Config of installation `id`, claimed up front (so which installation has it is no race).
fn claimed_config(name: &str, id: &str) -> Config {
    use aigw::controller::state::installation::ANNOTATION;
    serde_json::from_value(json!({
        "apiVersion": "aigw.io/v1alpha1", "kind": "Config",
        "metadata": {"name": name, "annotations": {ANNOTATION: id}}, "spec": routing(name)
    }))
    .unwrap()
}

/// The merge patch a tenant sends to rewrite its object's claim to `id`.
fn rewritten_claim(id: &str) -> Patch<Value> {
    use aigw::controller::state::installation::ANNOTATION;
    Patch::Merge(json!({"metadata": {"annotations": {ANNOTATION: id}}}))
}

/// A tenant that rewrites its object's `aigw.io/installation` to another running installation
/// moves nothing (attack on issue 27): the installation its status records keeps it, writes
/// nothing remotely and reports `Stalled`/`ClaimChanged` naming both installations, with an
/// event; the other installation does not take it (no second remote copy, no write about it).
/// Restoring the annotation resumes; deleting the object while the annotation names the other
/// installation deletes the one remote copy, once. Failed before: the other installation
/// created a second copy in its tenant and the first was left orphaned.
#[tokio::test]
async fn a_tenant_rewriting_the_claim_moves_nothing() {
    let (h, a, b) = two_without_operator("ten-move").await;
    let configs = h.env.api::<Config>();
    support::create(&configs, &claimed_config("moved", "inst-a")).await;
    let ready = h.wait_for::<Config>("moved", WAIT, |c| c.ready()).await;
    assert_eq!(config_copies(&a).await, 1, "a created it in its tenant");
    let finalizers = ready.metadata.finalizers.clone().unwrap_or_default();
    assert_eq!(
        finalizers,
        ["aigw.io/finalizer.inst-a"],
        "inst-a's own finalizer"
    );
    assert_eq!(recorded(&ready), Some("inst-a"));

    rewrite_claim(&configs, "moved", "inst-b").await;
    let stalled = claim_changed(&configs, "moved").await;
    // Both have had time to act (their drift interval is 1 s).
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (in_a, in_b) = (config_copies(&a).await, config_copies(&b).await);
    assert_eq!(
        (in_a, in_b),
        (1, 0),
        "remote copies after the claim was rewritten to inst-b: a={in_a} b={in_b}"
    );
    assert!(
        b.writes_to("configs", "moved").is_empty(),
        "inst-b wrote to a Config inst-a's status records: {:?}",
        b.writes_to("configs", "moved")
    );
    let stalled = stalled.expect("inst-a reports ClaimChanged");
    let (_, _, message) = stalled.condition("Stalled").unwrap();
    support::assert_mentions(&message, &["inst-a", "inst-b"]);
    let events = h.env.events_text().await;
    assert!(events.contains("moved ClaimChanged"), "{events}");
    let writes_while_changed = a.remote_writes().await;
    // A spec change is not applied while the claim names another installation.
    let attempts = |n: f64| Patch::Merge(json!({"spec": {"config": {"retry": {"attempts": n}}}}));
    configs
        .patch("moved", &PatchParams::default(), &attempts(5.0))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(a.remote_writes().await, writes_while_changed);
    assert_eq!(b.remote_writes().await, 0);

    // Restored: inst-a resumes, and applies the change.
    rewrite_claim(&configs, "moved", "inst-a").await;
    let resumed = h.wait_for::<Config>("moved", WAIT, |c| c.ready()).await;
    assert!(!resumed.stalled_with("ClaimChanged"));
    assert!(a.remote_writes().await > writes_while_changed);
    assert_eq!(
        resumed.metadata.finalizers.unwrap_or_default(),
        finalizers,
        "the finalizer is inst-a's own"
    );

    // Rewritten again, then deleted: inst-a deletes its one copy, once; nothing hangs.
    rewrite_claim(&configs, "moved", "inst-b").await;
    h.wait_for::<Config>("moved", WAIT, |c| c.stalled_with("ClaimChanged"))
        .await;
    h.env.delete_and_wait::<Config>("moved", WAIT).await;
    assert_no_copies(&a, &b).await;
    assert_eq!(
        (a.count(CONFIG_DELETE).await, b.count(CONFIG_DELETE).await),
        (1, 0)
    );
    stop_all(h, [a, b]).await;
}

/// A claim rewritten to an installation nobody runs (attack on issue 27): the installation the
/// status records reports `ClaimChanged` and still cleans up on delete, so the object does not
/// hang on a finalizer no running installation would remove. Failed before: the claimant left
/// the object alone, and its deletion waited on the shared finalizer for good.
#[tokio::test]
async fn a_claim_naming_nobody_does_not_hold_the_deletion() {
    let (h, a, b) = two_without_operator("ten-nobody").await;
    let configs = h.env.api::<Config>();
    support::create(&configs, &claimed_config("stray", "inst-a")).await;
    h.wait_for::<Config>("stray", WAIT, |c| c.ready()).await;
    rewrite_claim(&configs, "stray", "inst-gone").await;
    let stalled = claim_changed(&configs, "stray").await;
    configs
        .delete("stray", &DeleteParams::default())
        .await
        .unwrap();
    let gone = support::wait_until(WAIT, || async {
        configs.get_opt("stray").await.ok()?.is_none().then_some(())
    })
    .await;
    let left = configs.get_opt("stray").await.unwrap();
    assert!(
        gone.is_some(),
        "the deletion hangs on finalizers {:?}",
        left.and_then(|c| c.metadata.finalizers)
    );
    assert_no_copies(&a, &b).await;
    let stalled = stalled.expect("inst-a reports ClaimChanged");
    let (_, _, message) = stalled.condition("Stalled").unwrap();
    support::assert_mentions(&message, &["inst-a", "inst-gone"]);
    stop_all(h, [a, b]).await;
}

/// An object from before finalizers were per installation (the shared `aigw.io/finalizer`,
/// no `status.installation`) keeps working under a named installation without migration: it is
/// recorded, reconciled without a second finalizer, and its deletion is cleaned up by that
/// installation, which removes the shared finalizer; another installation leaves it alone.
#[tokio::test]
async fn an_object_with_the_shared_finalizer_is_cleaned_up_by_its_installation() {
    let mut h = Harness::start_with("ten-legacy", DRIFT).await;
    h.stop_operator().await;
    let configs = h.env.api::<Config>();
    let mut old = claimed_config("old", "inst-a");
    old.metadata.finalizers = Some(vec!["aigw.io/finalizer".into()]);
    support::create(&configs, &old).await;
    let (a, b) = two_installations(&h).await;
    let ready = h.wait_for::<Config>("old", WAIT, |c| c.ready()).await;
    assert_eq!(
        ready.metadata.finalizers.clone().unwrap_or_default(),
        ["aigw.io/finalizer"],
        "no second finalizer"
    );
    assert_eq!(recorded(&ready), Some("inst-a"));
    h.env.delete_and_wait::<Config>("old", WAIT).await;
    assert_no_copies(&a, &b).await;
    assert_eq!(
        (a.count(CONFIG_DELETE).await, b.count(CONFIG_DELETE).await),
        (1, 0)
    );
    assert!(b.writes_to("configs", "old").is_empty());
    stop_all(h, [a, b]).await;
}

/// The same attack on a cluster-scoped object both installations select: a ClusterGuardrail
/// whose claim is rewritten to the other installation stays with the one its status records
/// (`ClaimChanged`), the other creates no copy of it in its tenant, and deleting it removes the
/// one remote guardrail.
#[tokio::test]
async fn a_rewritten_claim_on_a_cluster_scoped_object_moves_nothing() {
    use aigw::controller::state::installation::ANNOTATION;
    use aigw::resources::ClusterGuardrail;
    let (h, a, b) = two_without_operator("ten-movec").await;
    let spec = json!({"name": "org-shared",
        "checks": [{"id": "default.regexMatch", "parameters": {"rule": "\\d{16}"}}],
        "actions": {"deny": true}});
    let mut guardrail: ClusterGuardrail = h.cluster_object("ClusterGuardrail", "org-shared", spec);
    guardrail.metadata.annotations = Some([(ANNOTATION.to_string(), "inst-a".to_string())].into());
    let name = h.cluster_name("org-shared");
    let guardrails = Api::<ClusterGuardrail>::all(h.env.client.clone());
    support::create(&guardrails, &guardrail).await;
    support::wait_until(WAIT, || async {
        guardrails.get(&name).await.ok().filter(|g| g.ready())
    })
    .await
    .expect("the ClusterGuardrail is Ready");
    assert!(guardrail_copies(&a).await > 0);
    guardrails
        .patch(&name, &PatchParams::default(), &rewritten_claim("inst-b"))
        .await
        .unwrap();
    let stalled = support::wait_until(WAIT, || async {
        let guardrail = guardrails.get(&name).await.ok()?;
        guardrail.stalled_with("ClaimChanged").then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        guardrail_copies(&b).await,
        0,
        "inst-b created a second copy"
    );
    assert!(
        b.writes_to("clusterguardrails", &name).is_empty(),
        "{:?}",
        b.writes_to("clusterguardrails", &name)
    );
    assert!(stalled.is_some(), "inst-a reports ClaimChanged");
    guardrails
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    assert!(
        support::gone_within(&guardrails, &name, WAIT).await,
        "the deletion hangs"
    );
    assert_eq!(
        (guardrail_copies(&a).await, guardrail_copies(&b).await),
        (0, 0)
    );
    stop_all(h, [a, b]).await;
}

/// A Config whose Connection leaves this installation's reach (relabelled out of its
/// `--cluster-selector`) is left alone, its deletion included. Relabelled back (no generation
/// and no readiness change, so the Connection's own reconcile tells no one), the Config is
/// reconciled at once, not at its next drift check ten minutes on, and its deletion goes.
#[tokio::test]
async fn a_config_deleted_while_its_connection_is_out_of_reach_goes_once_it_is_back() {
    use support::harness::CLUSTER_LABEL;
    let h = Harness::start("reach-back").await;
    let (name, connections) = h.connection_in_reach().await;
    let mut spec = routing("reach-routing");
    spec["connectionRef"] = json!({"name": name});
    create::<Config>(&h.env, "routing", spec).await;
    h.wait_for::<Config>("routing", WAIT, |c| c.ready()).await;
    let away = json!({"metadata": {"labels": {CLUSTER_LABEL: "elsewhere"}}});
    support::merge_patch(&connections, &name, away).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let configs = h.env.api::<Config>();
    h.deletion_held_until_back_in_reach(&configs, "routing", (&name, &connections), WAIT)
        .await;
    h.stop().await;
}

/// A Connection whose token Secret (in the Connection secret namespace) lacks its key is not
/// Ready; the key added, it is Ready at once: the Secret's watch wakes it, where the drift check
/// (an hour here) would have come much later.
#[tokio::test]
async fn a_connection_is_ready_as_soon_as_its_token_secret_is_fixed() {
    use aigw::resources::Connection;
    let h = Harness::start_with_secret_namespace("ten-conn-fix", Duration::from_secs(3600)).await;
    let (name, connections) = h.connection_with_secret("fix", json!({"other": "x"})).await;
    let ready = |c: &Connection| {
        c.status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
            .map(|c| c.status.clone())
    };
    support::wait_until(WAIT, || async {
        let c = connections.get(&name).await.ok()?;
        (ready(&c).as_deref() == Some("False")).then_some(())
    })
    .await
    .expect("the Connection was never reported not Ready");
    let secrets: Api<Secret> = h.env.api();
    secrets
        .patch(
            "fix-token",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"token": "t0ken"}})),
        )
        .await
        .unwrap();
    support::wait_until(WAIT, || async {
        let c = connections.get(&name).await.ok()?;
        (ready(&c).as_deref() == Some("True")).then_some(())
    })
    .await
    .expect("the Connection did not become Ready once its Secret held the token");
    let _ = connections.delete(&name, &DeleteParams::default()).await;
    h.stop().await;
}

/// A backlog behind one slow Connection does not hold a kind's slots while it waits for that
/// Connection's rate limit: a reconcile whose Connection is backlogged leaves for its place in
/// the Connection's line before its first call. A Config of another Connection, in the same
/// namespace and so the same queue, is Ready after a few of the backlog's reconciles, not after
/// the backlog (which it waited for when each reconcile held its slot while it waited).
#[tokio::test]
async fn a_backlog_behind_a_slow_connection_leaves_the_slots_to_other_connections() {
    let h = Harness::start_with("ten-line", Duration::from_secs(60)).await;
    let before = behind_a_slow_backlog(&h, async |_| {
        create::<Config>(&h.env, "fast", routing("fast")).await;
        h.env.wait_for::<Config>("fast", WAIT, |c| c.ready()).await;
    })
    .await;
    println!("the default Connection's Config was Ready after {before} more of the slow one's");
    assert!(
        before <= 6,
        "the Config waited for {before} of the slow Connection's Configs"
    );
    let metrics = h.ctx.metrics.encode();
    assert!(
        metrics.contains(r#"aigw_reconciles_total{kind="Config",result="throttled"}"#),
        "no reconcile was sent to the slow Connection's line"
    );
    h.stop().await;
}

/// Teams whose namespaces the operator lists (`--namespace`, the chart's `watchNamespaces`) take
/// turns at a kind's `--concurrency` slots, and a reconcile sent to a Connection's line takes
/// its place in its namespace's line there: team b's Config on the Connection of team a's
/// backlog does not wait behind that backlog (the multi-team guide). Listed namespaces took
/// turns before the line as well; this proves the line keeps it (one line for all would put
/// team b's first reconcile behind team a's).
#[tokio::test]
async fn listed_namespaces_take_turns_at_a_kinds_slots() {
    let h = Harness::start_two_teams("ten-share", Duration::from_secs(60), None).await;
    let other = h.other.as_ref().unwrap();
    let before = behind_a_slow_backlog(&h, async |slow| {
        let mut spec = routing("b");
        spec["connectionRef"] = json!({"name": slow});
        create::<Config>(other, "b", spec).await;
        other.wait_for::<Config>("b", WAIT, |c| c.ready()).await;
    })
    .await;
    println!("team b's Config on the slow Connection was Ready after {before} of team a's");
    assert!(
        before <= 6,
        "team b's Config waited for {before} of team a's Configs"
    );
    h.stop().await;
}

/// Creates 32 Configs in the test namespace on a Connection of one request a second; once that
/// backlog moves, runs `other` with that Connection's name (it makes another Config and waits
/// until it is Ready) and tells how many more of the backlog were Ready meanwhile.
async fn behind_a_slow_backlog(h: &Harness, other: impl AsyncFnOnce(String)) -> usize {
    use aigw::resources::Connection;
    use kube::ResourceExt;
    use support::harness::{CLUSTER_LABEL, TOKEN};
    const BACKLOG: usize = 32;
    let a = &h.env;
    a.create_from::<Secret>(
        json!({"metadata": {"name": "slow-token"}, "stringData": {"token": TOKEN}}),
    )
    .await;
    let slow = format!("{}-slow", a.namespace);
    let connection: Connection = serde_json::from_value(json!({
        "apiVersion": "aigw.io/v1alpha1", "kind": "Connection",
        "metadata": {"name": slow, "labels": {CLUSTER_LABEL: a.namespace}},
        "spec": {"managementUrl": h.emulator.management_url(), "qps": 1, "burst": 1,
                 "auth": {"bearerToken": {"secretRef": {"namespace": a.namespace, "name": "slow-token", "key": "token"}}}}
    }))
    .unwrap();
    let connections = Api::<Connection>::all(a.client.clone());
    support::create(&connections, &connection).await;
    for n in 0..BACKLOG {
        let mut spec = routing(&format!("a-{n}"));
        spec["connectionRef"] = json!({"name": slow});
        create::<Config>(a, &format!("a-{n}"), spec).await;
    }
    let configs = a.api::<Config>();
    let ready = async || {
        let list = configs.list(&Default::default()).await.unwrap();
        list.items
            .iter()
            .filter(|c| c.name_any().starts_with("a-") && c.ready())
            .count()
    };
    // The other Config comes once the backlog moves (one a second).
    support::wait_until(WAIT, || async { (ready().await > 0).then_some(()) })
        .await
        .expect("the slow Connection's backlog does not move");
    let at_start = ready().await;
    other(slow.clone()).await;
    let before = ready().await - at_start;
    let _ = connections.delete(&slow, &DeleteParams::default()).await;
    before
}
