//! Shards and what is not split by namespace: cluster-scoped objects (McpIntegrations, split by
//! uid) go to one replica each and move when it dies, and a `--dry-run` beside the shards is no
//! member, takes no share, counts nothing and writes nothing.

use crate::support;

use std::time::Duration;

use aigw::resources::McpIntegration;
use kube::api::{Api, ListParams};
use serde_json::json;
use support::endpoints::{MCP_INTEGRATION_POST, MCP_INTEGRATION_PUT};
use support::objects::Conditions;
use support::writes::{assert_no_overlap, overlaps};
use support::{metric_sum, wait_until};

use super::leader::{Field, Operator};
use super::shards::{emulator, settled, succeeded};

const OBJECTS: usize = 6;
const WITHIN: Duration = Duration::from_secs(90);
/// The label the operators' `--cluster-selector` selects on (the test's namespace).
const CLUSTER_LABEL: &str = "aigw-test/env";

fn gauge(metrics: &str, name: &str, kind: &str) -> f64 {
    metric_sum(
        &metrics
            .lines()
            .filter(|l| l.contains(&format!("kind=\"{kind}\"")))
            .collect::<Vec<_>>()
            .join("\n"),
        name,
    )
}

/// Waits until every McpIntegration of the test is Ready at `description`.
async fn all_ready(api: &Api<McpIntegration>, selector: &str, description: &str) {
    let ready = wait_until(WITHIN, || async {
        let list = api
            .list(&ListParams::default().labels(selector))
            .await
            .ok()?;
        let done = list.items.len() == OBJECTS
            && list
                .items
                .iter()
                .all(|m| m.ready() && m.spec.description.as_deref() == Some(description));
        done.then_some(())
    })
    .await;
    assert!(
        ready.is_some(),
        "the McpIntegrations were not all Ready at {description:?} within {WITHIN:?}"
    );
}

#[tokio::test]
async fn cluster_scoped_objects_split_by_uid_and_a_dry_run_beside_the_shards_takes_nothing() {
    let Field {
        env,
        namespaces,
        emu,
        dir,
    } = Field::with("shardsc", 2).await;
    let watched: Vec<&str> = namespaces.iter().map(String::as_str).collect();
    let suffix = &env.namespace[env.namespace.len() - 8..];
    let name = |n: &str| format!("aigw-{n}-{suffix}");
    let spawn = |n: &str, extra: &[&str]| {
        Operator::spawn(&name(n), &watched, &env.namespace, &emu, dir.path(), extra)
    };
    let a = spawn("a", &["--shards=true"]);
    let b = spawn("b", &["--shards=true"]);
    let dry = spawn("dry", &["--dry-run"]);
    settled(&[&a, &b], 2.0).await;

    let api: Api<McpIntegration> = Api::all(env.client.clone());
    let selector = format!("{CLUSTER_LABEL}={}", env.namespace);
    for i in 0..OBJECTS {
        let object: McpIntegration = serde_json::from_value(json!({
            "apiVersion": "aigw.io/v1alpha1", "kind": "McpIntegration",
            "metadata": {"name": format!("{}-m{i}", env.namespace),
                         "labels": {CLUSTER_LABEL: env.namespace}},
            "spec": {"slug": format!("{}-m{i}", env.namespace), "name": format!("tools {i}"),
                     "url": format!("https://mcp.example.com/m{i}"), "authType": "none",
                     "transport": "http", "description": "first"}
        }))
        .unwrap();
        support::create(&api, &object).await;
    }
    all_ready(&api, &selector, "first").await;

    // Each object is one replica's (by its uid); the dry run holds no share and counts none.
    let split = wait_until(WITHIN, || async {
        let (a, b, dry) = (a.metrics().await, b.metrics().await, dry.metrics().await);
        let shares = [
            gauge(&a, "aigw_shard_objects", "McpIntegration"),
            gauge(&b, "aigw_shard_objects", "McpIntegration"),
        ];
        let census = gauge(&a, "aigw_resources", "McpIntegration")
            + gauge(&b, "aigw_resources", "McpIntegration");
        let dry_counts = gauge(&dry, "aigw_resources", "McpIntegration");
        (shares.iter().sum::<f64>() == OBJECTS as f64
            && census == OBJECTS as f64
            && dry_counts == 0.0)
            .then_some(shares)
    })
    .await
    .expect("the two shards' McpIntegrations add up to all of them, the dry run's to none");
    println!("McpIntegrations of a, b: {split:?}");
    assert_eq!(
        metric_sum(&dry.metrics().await, "aigw_shard_members"),
        0.0,
        "the dry run is no member"
    );

    // An edit of every object is written once, by its replica; a SIGKILLed, its objects move to
    // b once its lease has lapsed, and the next edit of each is written once, by b.
    let edit = |description: &'static str| {
        let (api, selector, namespace) = (api.clone(), selector.clone(), env.namespace.clone());
        async move {
            for i in 0..OBJECTS {
                let patch = json!({"spec": {"description": description}});
                support::merge_patch(&api, &format!("{namespace}-m{i}"), patch).await;
            }
            all_ready(&api, &selector, description).await;
        }
    };
    edit("second").await;
    drop(a);
    settled(&[&b], 1.0).await;
    edit("third").await;

    let stats = emulator(&emu, "/_emulator/stats").await;
    assert_eq!(
        succeeded(&stats, MCP_INTEGRATION_POST),
        OBJECTS as u64,
        "each McpIntegration is created once: {stats}"
    );
    assert_eq!(
        succeeded(&stats, MCP_INTEGRATION_PUT),
        2 * OBJECTS as u64,
        "each edit is written once: {stats}"
    );
    let writes = emulator(&emu, "/_emulator/writes").await;
    let writes = writes["writes"].as_array().cloned().unwrap_or_default();
    assert_no_overlap(&writes);
    // The PUTs of an object name it alike: each of a's changed writer once, to b.
    let (_, switches) = overlaps(&writes);
    assert_eq!(switches as f64, split[0], "a's objects moved to b");
    let by_dry: Vec<_> = writes
        .iter()
        .filter(|w| w["writer"] == dry.name.as_str())
        .collect();
    assert!(by_dry.is_empty(), "the dry run wrote: {by_dry:?}");

    drop((b, dry));
    support::force_delete_all(&api, &ListParams::default().labels(&selector)).await;
    for namespace in &namespaces[1..] {
        support::drop_namespace(&env.client, namespace).await;
    }
    env.cleanup().await;
    let _ = emu.shutdown().await;
}
