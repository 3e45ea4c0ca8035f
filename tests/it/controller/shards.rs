//! Active-active shards across real `aigw operator --shards` processes under the chart's RBAC
//! (`sharding.enabled`): the live replicas split the objects of eight namespaces among
//! themselves, and a replica SIGKILLed, one added and one SIGTERMed mid-run hand their shares
//! over. Each replica caches its share alone. Every Config is created with one POST and updated
//! with one PUT per edit, and the emulator's write log shows no object written by two replicas
//! at once.

use crate::support;

use std::time::{Duration, Instant};

use aigw::resources::Config;
use kube::api::Api;
use serde_json::{Value, json};
use support::objects::Conditions;
use support::writes::assert_no_overlap;
use support::{metric_sum, wait_until};

use super::leader::{Field, Operator, config};

const NAMESPACES: usize = 8;
const PER_NAMESPACE: usize = 2;
const WITHIN: Duration = Duration::from_secs(90);

fn start(
    name: &str,
    namespaces: &[&str],
    lease: &str,
    emu: &aigw::emulator::Running,
    dir: &std::path::Path,
) -> Operator {
    Operator::spawn(name, namespaces, lease, emu, dir, &["--shards=true"])
}

/// Waits until every operator is ready as a shard and sees `members` live replicas.
pub(super) async fn settled(operators: &[&Operator], members: f64) {
    let seen = wait_until(WITHIN, || async {
        for operator in operators {
            let (status, role) = operator.readyz().await?;
            let metrics = operator.metrics().await;
            if status != 200
                || role != "shard"
                || metric_sum(&metrics, "aigw_shard_members") != members
            {
                return None;
            }
        }
        Some(())
    })
    .await;
    assert!(
        seen.is_some(),
        "the replicas did not settle on {members} members"
    );
}

/// Every replica's share of Configs, once they add up to `total`, both the Configs each
/// reconciles and those its cache holds: each Config is cached by one replica alone.
async fn shares(operators: &[&Operator], total: usize) -> Vec<f64> {
    let gauge =
        |metrics: &str, name: &str| metric_sum(metrics, &format!("{name}{{kind=\"Config\"}}"));
    wait_until(WITHIN, || async {
        let (mut shares, mut cached, mut census) = (Vec::new(), Vec::new(), Vec::new());
        for operator in operators {
            let metrics = operator.metrics().await;
            shares.push(gauge(&metrics, "aigw_shard_objects"));
            cached.push(gauge(&metrics, "aigw_shard_cached_objects"));
            // The census counts each replica's share too: the alerts' sum is the total.
            census.push(gauge(&metrics, "aigw_resources"));
        }
        let adds_up = |counts: &[f64]| counts.iter().sum::<f64>() == total as f64;
        (adds_up(&shares) && adds_up(&cached) && adds_up(&census)).then_some(shares)
    })
    .await
    .unwrap_or_else(|| {
        panic!("the replicas' shares (reconciled, cached and counted) never added up to {total}")
    })
}

/// Reorders every Config's targets (`round` even: as created) and waits until all are Ready
/// at their new generation.
async fn edit_all(client: &kube::Client, namespaces: &[String], round: usize) {
    let targets = match round % 2 {
        0 => json!([{"provider": "@openai"}, {"provider": "@anthropic"}]),
        _ => json!([{"provider": "@anthropic"}, {"provider": "@openai"}]),
    };
    let started = Instant::now();
    for namespace in namespaces {
        let api: Api<Config> = Api::namespaced(client.clone(), namespace);
        for i in 0..PER_NAMESPACE {
            let patch =
                json!({"spec": {"config": {"strategy": {"mode": "fallback"}, "targets": targets}}});
            support::merge_patch(&api, &format!("c{i}"), patch).await;
        }
    }
    all_ready(client, namespaces).await;
    println!(
        "edit round {round}: every Config Ready after {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

async fn all_ready(client: &kube::Client, namespaces: &[String]) {
    for namespace in namespaces {
        let api: Api<Config> = Api::namespaced(client.clone(), namespace);
        for i in 0..PER_NAMESPACE {
            let name = format!("c{i}");
            let ready = wait_until(WITHIN, || async {
                let config = api.get_opt(&name).await.ok()??;
                config.ready().then_some(())
            })
            .await;
            assert!(
                ready.is_some(),
                "{namespace}/{name} was not Ready within {WITHIN:?}"
            );
        }
    }
}

pub(super) async fn emulator(emu: &aigw::emulator::Running, path: &str) -> Value {
    reqwest::get(format!("{}{path}", emu.management_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

pub(super) fn succeeded(stats: &Value, endpoint: &str) -> u64 {
    stats["requests"][endpoint]
        .as_object()
        .map(|by| {
            by.iter()
                .filter(|(status, _)| status.starts_with('2'))
                .filter_map(|(_, n)| n.as_u64())
                .sum()
        })
        .unwrap_or(0)
}

#[tokio::test]
async fn shards_split_the_objects_and_hand_them_over_without_overlap() {
    let Field {
        env,
        namespaces,
        emu,
        dir,
    } = Field::with("shards", NAMESPACES).await;
    let watched: Vec<&str> = namespaces.iter().map(String::as_str).collect();
    let suffix = &env.namespace[env.namespace.len() - 8..];
    let name = |n: &str| format!("aigw-{n}-{suffix}");
    let a = start(&name("a"), &watched, &env.namespace, &emu, dir.path());
    let mut b = start(&name("b"), &watched, &env.namespace, &emu, dir.path());
    let c = start(&name("c"), &watched, &env.namespace, &emu, dir.path());
    settled(&[&a, &b, &c], 3.0).await;

    let started = Instant::now();
    for namespace in &namespaces {
        let api: Api<Config> = Api::namespaced(env.client.clone(), namespace);
        for i in 0..PER_NAMESPACE {
            // A remote name of its own per namespace: the write log keys a POST by it.
            let mut object = config(&format!("c{i}"));
            object.spec.name = format!("{namespace}-c{i}");
            support::create(&api, &object).await;
        }
    }
    all_ready(&env.client, &namespaces).await;
    let total = NAMESPACES * PER_NAMESPACE;
    println!(
        "{total} Configs Ready after {:.1} s",
        started.elapsed().as_secs_f64()
    );
    println!(
        "shares of a, b, c: {:?}",
        shares(&[&a, &b, &c], total).await
    );

    // SIGKILL: a's Lease is not released; its share moves once the lease has lapsed.
    let killed = Instant::now();
    drop(a);
    settled(&[&b, &c], 2.0).await;
    println!(
        "a SIGKILLed: b and c settled on 2 members after {:.1} s",
        killed.elapsed().as_secs_f64()
    );
    edit_all(&env.client, &namespaces, 1).await;

    // A replica added mid-run takes its share without a restart of the others.
    let d = start(&name("d"), &watched, &env.namespace, &emu, dir.path());
    settled(&[&b, &c, &d], 3.0).await;
    println!(
        "shares of b, c, d: {:?}",
        shares(&[&b, &c, &d], total).await
    );
    edit_all(&env.client, &namespaces, 2).await;

    // SIGTERM: b releases its Lease, so its share moves at the others' next list.
    let terminated = Instant::now();
    b.signal("-TERM");
    assert_eq!(b.exit_code(Duration::from_secs(30)).await, Some(0));
    settled(&[&c, &d], 2.0).await;
    println!(
        "b SIGTERMed: c and d settled on 2 members after {:.1} s",
        terminated.elapsed().as_secs_f64()
    );
    edit_all(&env.client, &namespaces, 3).await;
    println!("shares of c, d: {:?}", shares(&[&c, &d], total).await);

    let stats = emulator(&emu, "/_emulator/stats").await;
    assert_eq!(
        succeeded(&stats, "POST /ai_gw/v2/configs"),
        total as u64,
        "each Config is created once: {stats}"
    );
    assert_eq!(
        succeeded(&stats, "PUT /ai_gw/v2/configs/{slug}"),
        3 * total as u64,
        "each edit is written once: {stats}"
    );
    let writes = emulator(&emu, "/_emulator/writes").await;
    let writes = writes["writes"].as_array().cloned().unwrap_or_default();
    assert_no_overlap(&writes);

    drop((b, c, d));
    for namespace in &namespaces[1..] {
        support::drop_namespace(&env.client, namespace).await;
    }
    env.cleanup().await;
    let _ = emu.shutdown().await;
}
