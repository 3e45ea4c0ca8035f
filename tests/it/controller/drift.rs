//! Drift detection that costs a list, not N reads (issue 10): untouched objects are vouched for
//! by one list per drift interval; a remote edit or deletion is still found and corrected; an
//! incomplete list falls back to reads; a restart reads nothing it can trust, and a spec change
//! made right after it goes through. Real apiserver, real emulator.

use crate::support;

use std::time::{Duration, Instant};

use aigw::resources::{Config, RateLimitsPolicy};
use serde_json::json;
use support::harness::Harness;
use support::objects::{Conditions, create, limits, routing};

const WAIT: Duration = Duration::from_secs(60);
const DRIFT: Duration = Duration::from_secs(1);
const NAMES: [&str; 3] = ["alpha", "beta", "gamma"];

async fn writes(h: &Harness) -> u64 {
    h.remote_writes().await
}

/// Waits for an event with `reason` (published right after the status write that follows the
/// correction).
async fn wait_for_event(h: &Harness, reason: &str) {
    h.env.wait_event(reason, WAIT).await;
}

async fn slug_of(h: &Harness, name: &str) -> String {
    let config = h.wait_for::<Config>(name, WAIT, |c| c.ready()).await;
    config.status.and_then(|s| s.slug).expect("status.slug")
}

#[tokio::test]
async fn drift_is_found_by_listing_and_only_changed_objects_are_read() {
    let mut h = Harness::start_with("drift-list", DRIFT).await;
    for name in NAMES {
        create::<Config>(&h.env, name, routing(name)).await;
    }
    let mut slugs = Vec::new();
    for name in NAMES {
        slugs.push(slug_of(&h, name).await);
    }
    assert_eq!(h.count("POST /ai_gw/v2/configs").await, 3);
    assert_eq!(
        h.count("GET /ai_gw/v2/configs/{slug}").await,
        0,
        "a create answer is trusted: no read after it"
    );

    // Untouched: the lists vouch for all three; nothing is read or written.
    h.reset_stats().await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let lists = h.count("GET /ai_gw/v2/configs").await;
    assert!(
        lists >= 2,
        "one list per drift interval: {}",
        h.stats().await
    );
    assert_eq!(h.count("GET /ai_gw/v2/configs/{slug}").await, 0);
    assert_eq!(writes(&h).await, 0, "{}", h.stats().await);

    // A remote edit of one config: that one is read and restored, the others are not read.
    h.reset_stats().await;
    h.put(
        &format!("/ai_gw/v2/configs/{}", slugs[0]),
        json!({"config": {"retry": {"attempts": 9}}}),
    )
    .await;
    h.reset_stats().await;
    let deadline = Instant::now() + WAIT;
    while h.count("PUT /ai_gw/v2/configs/{slug}").await == 0 {
        assert!(Instant::now() < deadline, "the edit was never corrected");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let remote = h.get(&format!("/ai_gw/v2/configs/{}", slugs[0])).await;
    let document: serde_json::Value =
        serde_json::from_str(remote["config"].as_str().unwrap()).unwrap();
    assert_eq!(document["strategy"]["mode"], "fallback", "{document}");
    wait_for_event(&h, "DriftCorrected").await;
    // The correction is read once more by the next list (aigw's own PUT changed
    // last_updated_at), then never again.
    tokio::time::sleep(Duration::from_secs(4)).await;
    h.reset_stats().await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        h.count("GET /ai_gw/v2/configs/{slug}").await,
        0,
        "settled objects are not read again: {}",
        h.stats().await
    );

    // A remote deletion: absent from a complete list, read (404), and created again.
    h.reset_stats().await;
    h.delete(&format!("/ai_gw/v2/configs/{}", slugs[1])).await;
    let deadline = Instant::now() + WAIT;
    while h.count("POST /ai_gw/v2/configs").await == 0 {
        assert!(
            Instant::now() < deadline,
            "the deleted config was never recreated"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    h.env
        .ready_with_new::<Config>(NAMES[1], WAIT, &slugs[1], |c| {
            c.status.as_ref()?.slug.as_deref()
        })
        .await;

    // An incomplete list (capped below its total) proves nothing: what it does not show is read.
    tokio::time::sleep(Duration::from_secs(3)).await;
    h.faults(json!({"list_cap": 1})).await;
    h.reset_stats().await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(
        h.count("GET /ai_gw/v2/configs/{slug}").await >= 2,
        "objects a capped list did not show are read: {}",
        h.stats().await
    );
    assert_eq!(writes(&h).await, 0, "{}", h.stats().await);
    h.faults(json!({})).await;

    // A restart reads nothing it can trust, and a spec change right after it goes through.
    tokio::time::sleep(Duration::from_secs(3)).await;
    h.restart_operator().await;
    h.reset_stats().await;
    let edited = Instant::now();
    h.env
        .patch_spec::<Config>(NAMES[2], json!({"config": {"retry": {"attempts": 5}}}))
        .await;
    h.wait_for::<Config>(NAMES[2], WAIT, |c| {
        c.ready() && c.status.as_ref().and_then(|s| s.observed_generation) == c.metadata.generation
    })
    .await;
    eprintln!("edit after restart applied in {:?}", edited.elapsed());
    assert_eq!(h.count("PUT /ai_gw/v2/configs/{slug}").await, 1);
    tokio::time::sleep(Duration::from_secs(3)).await;
    // The edited config is read once by its own reconcile (the PUT needs the remote document)
    // and once more by the next list; the two untouched ones are not read at all.
    assert!(
        h.count("GET /ai_gw/v2/configs/{slug}").await <= 2,
        "a restart does not re-read everything: {}",
        h.stats().await
    );
    assert_eq!(h.count("POST /ai_gw/v2/configs").await, 0);
    h.stop().await;
}

/// Policies are found by their (paged) list the same way; the correction of a remote edit
/// through it is in `tests/it/controller/controllers.rs` (`rate_limits_policy_lifecycle`).
#[tokio::test]
async fn untouched_policies_are_listed_not_read() {
    let h = Harness::start_with("drift-rlp", DRIFT).await;
    create::<RateLimitsPolicy>(&h.env, "limit", limits("limit")).await;
    h.wait_for::<RateLimitsPolicy>("limit", WAIT, |p| p.ready())
        .await;
    h.reset_stats().await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(h.count("GET /ai_gw/v2/policies/rate-limits").await >= 2);
    assert_eq!(
        h.count("GET /ai_gw/v2/policies/rate-limits/{rateLimitsPolicyId}")
            .await,
        0,
        "{}",
        h.stats().await
    );
    assert_eq!(writes(&h).await, 0, "{}", h.stats().await);
    h.stop().await;
}

/// An operator watching two namespaces (`--namespace a --namespace b`) runs one drift pass per
/// Connection and workspace, not one per namespace: the configs of both are vouched for by
/// one list per interval.
#[tokio::test]
async fn two_watched_namespaces_share_one_drift_list_per_interval() {
    let interval = Duration::from_secs(3);
    let h = Harness::start_two_teams("drift-two-ns", interval, None).await;
    h.ready_configs_in_both(("mine", "theirs"), WAIT).await;
    h.reset_stats().await;
    let window = Duration::from_secs(10);
    tokio::time::sleep(window).await;
    let lists = h.count("GET /ai_gw/v2/configs").await;
    // One pass every ~3 s (±10 %) lists 3 or 4 times in 10 s; a pass per namespace, twice that.
    assert!(
        (1..=4).contains(&lists),
        "{lists} lists in {window:?}: {}",
        h.stats().await
    );
    h.stop().await;
}
