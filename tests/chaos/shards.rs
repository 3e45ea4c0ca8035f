//! The chaos suite's sharded mode (`AIGW_CHAOS_SHARDS=N`, `make chaos-sharded`): N
//! `aigw operator --shards=true` replicas under the chart's sharded RBAC (`sharding.enabled`,
//! `watchNamespaces` = the 2×N namespaces the resources are spread over, the Leases in the
//! first), the same faults and the same checks. In place of the leader kills: each round
//! SIGKILLs a random replica (a fresh one replaces it); mid-run a replica is added and a random
//! one removed with SIGTERM (it must exit 0); one random replica is frozen (SIGSTOP) past its
//! lease and resumed (it must exit, like the paused leader). On top of the unsharded checks,
//! the emulator's write log (`GET /_emulator/writes`) must show no object written by two
//! replicas at overlapping times.
//!
//! Every change of members is timed until the shares have settled: every live replica answers
//! `/readyz` 200 as a `shard` and publishes on its Lease the live replicas as its view (the
//! `handover_s` figures). Each such change is an incident for the rotation counts: the kill at
//! its moment, an addition or removal from its start until the shares settled, the pause from
//! the SIGSTOP until the process exited.

use super::*;

use aigw::controller::runtime::shards::VIEW_ANNOTATION;
use serde_json::Map;
use support::writes::overlaps;

/// How long a replica may take to exit after SIGTERM, or after SIGCONT once paused past its
/// lease (its next renewal finds the renew deadline passed: about one retry period).
const EXIT_TIMEOUT: Duration = Duration::from_secs(30);

/// Applies the chart's RBAC with `sharding.enabled` for every namespace of `spread` (Leases in
/// the first) and returns the kubeconfig that impersonates its ServiceAccount.
pub(super) async fn chart_rbac(spread: &Spread, dir: &Path) -> PathBuf {
    let watched: Vec<&str> = spread.namespaces.iter().map(String::as_str).collect();
    // The processes run without `--connection-secret-namespace` or `POD_NAMESPACE`: their own
    // namespace (the hash key, the probe of the admission policies) is the Leases'.
    let scope = support::chart::Scope::watched(&watched)
        .lease_namespace(&spread.namespaces[0])
        .secret_namespace(Some(&spread.namespaces[0]))
        .sharded();
    support::chart::install(&spread.client, &scope)
        .await
        .kubeconfig_file(dir)
}

impl Replicas {
    /// Waits until every live replica is a ready shard that has published the live replicas as
    /// its view; returns how long that took.
    pub(super) async fn settled(&mut self) -> Duration {
        let since = Instant::now();
        loop {
            self.keep_up();
            let roles = self.roles().await;
            let views = self.views().await;
            let mut live: Vec<String> = self.live.iter().map(|p| p.name.clone()).collect();
            live.sort();
            let ready = roles
                .iter()
                .all(|r| matches!(r, Some((200, role)) if role == "shard"));
            let agreed = live.iter().all(|name| views.get(name) == Some(&live));
            if ready && agreed {
                return since.elapsed();
            }
            assert!(
                since.elapsed() < TAKEOVER_TIMEOUT,
                "the shards did not settle on {live:?} within {TAKEOVER_TIMEOUT:?}: roles {roles:?}, views {views:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The view each holder of a member Lease published (empty while the apiserver is down).
    async fn views(&self) -> HashMap<String, Vec<String>> {
        let Ok(leases) = self.leases.list(&ListParams::default()).await else {
            return HashMap::new();
        };
        let mut views = HashMap::new();
        for lease in leases {
            let holder = lease.spec.as_ref().and_then(|s| s.holder_identity.clone());
            let view = lease.annotations().get(VIEW_ANNOTATION).map(|v| {
                let mut members: Vec<String> = v
                    .split(',')
                    .filter(|m| !m.is_empty())
                    .map(str::to_string)
                    .collect();
                members.sort();
                members
            });
            if let (Some(holder), Some(view)) = (holder, view) {
                views.insert(holder, view);
            }
        }
        views
    }

    fn pick(&self) -> usize {
        rand::rng().random_range(0..self.live.len())
    }

    /// SIGKILLs a random replica (its Lease stays until it lapses) and starts its replacement;
    /// returns when it was killed and how long until the shares settled.
    async fn kill_one(&mut self) -> (Timestamp, Duration) {
        let mut victim = self.live.remove(self.pick());
        let (at, killed) = (Timestamp::now(), Instant::now());
        victim.child.kill().unwrap();
        victim.child.wait().unwrap();
        self.settled().await;
        (at, killed.elapsed())
    }

    /// Starts one more replica; returns from its start until the shares settled.
    async fn add_one(&mut self) -> (Timestamp, Timestamp) {
        let start = Timestamp::now();
        self.wanted += 1;
        self.settled().await;
        (start, Timestamp::now())
    }

    /// SIGTERMs a random replica, which must release its Lease and exit 0; returns from the
    /// signal until the shares settled, and what went wrong with the exit.
    async fn remove_one(&mut self) -> ((Timestamp, Timestamp), Option<String>) {
        let mut removed = self.live.remove(self.pick());
        self.wanted -= 1;
        let start = Timestamp::now();
        signal(&removed, "-TERM");
        let problem = match exit_code(&mut removed).await {
            Some(Some(0)) => None,
            Some(code) => Some(format!("{} exited {code:?} after SIGTERM", removed.name)),
            None => Some(format!(
                "{} still ran {EXIT_TIMEOUT:?} after SIGTERM",
                removed.name
            )),
        };
        drop(removed);
        self.settled().await;
        ((start, Timestamp::now()), problem)
    }

    /// Freezes a random replica (SIGSTOP) for longer than its lease, so the others take its
    /// share, then resumes it (SIGCONT): it must send none of the writes it had queued (its
    /// renew deadline has passed) and exit. Returns from the SIGSTOP until it exited, and the
    /// replica's name when it kept running (it is SIGKILLed then).
    async fn pause_one(&mut self) -> ((Timestamp, Timestamp), Option<String>) {
        let mut paused = self.live.remove(self.pick());
        let stopped = Timestamp::now();
        signal(&paused, "-STOP");
        tokio::time::sleep(PAUSE).await;
        signal(&paused, "-CONT");
        let kept_running = exit_code(&mut paused).await.is_none();
        let exited = Timestamp::now();
        let name = paused.name.clone();
        drop(paused);
        self.settled().await;
        ((stopped, exited), kept_running.then_some(name))
    }
}

fn signal(process: &Process, signal: &str) {
    let pid = process.child.id().to_string();
    let status = Command::new("kill").args([signal, &pid]).status().unwrap();
    assert!(status.success(), "kill {signal} {} failed", process.name);
}

/// The exit code once `process` exited within [`EXIT_TIMEOUT`] (`Some(None)`: by a signal).
async fn exit_code(process: &mut Process) -> Option<Option<i32>> {
    let deadline = Instant::now() + EXIT_TIMEOUT;
    while Instant::now() < deadline {
        if let Some(status) = process.child.try_wait().unwrap() {
            return Some(status.code());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// A round of the sharded mode: the leader-election round with a random replica in place of
/// the leader, a replica added (a quarter in) and one removed (three quarters in).
pub(super) async fn round(round: Round<'_>, chaos: &mut Chaos, replicas: &mut Replicas) -> Kill {
    replicas.settled().await;
    let changed = round.change_triggers().await;
    if round.step == round.scale.kills / 4 {
        let added = replicas.add_one().await;
        chaos.incidents.push(added);
        chaos.added += 1;
        eprintln!(
            "chaos: replica added, shares settled after {:.1} s",
            span(added)
        );
    }
    if round.step == (round.scale.kills / 3).max(1) {
        let (pause, kept_running) = replicas.pause_one().await;
        chaos.paused(pause);
        chaos.kept_running.extend(kept_running);
        eprintln!("chaos: replica paused (SIGSTOP) for {PAUSE:?}, resumed, exited");
    }
    chaos.disrupt_at(&round).await;
    if round.step == round.scale.kills * 3 / 4 {
        let (removed, problem) = replicas.remove_one().await;
        chaos.incidents.push(removed);
        chaos.removed += 1;
        chaos.unclean_removals.extend(problem);
        eprintln!(
            "chaos: replica removed (SIGTERM), shares settled after {:.1} s",
            span(removed)
        );
    }
    let (at, took) = replicas.kill_one().await;
    let settled = "shares settled after";
    Kill {
        at,
        changed,
        took,
        settled,
    }
}

fn span((start, end): (Timestamp, Timestamp)) -> f64 {
    end.duration_since(start).as_secs_f64()
}

/// Adds the sharded mode's figures to the summary; returns the overlapping writes.
pub(super) async fn figures(
    summary: &mut Map<String, Value>,
    scale: &Scale,
    chaos: &Chaos,
    emulator: &Emulator,
) -> Vec<String> {
    let log = emulator.get("/_emulator/writes").await.unwrap();
    let writes = log["writes"].as_array().cloned().unwrap_or_default();
    // Kept beside the logs: the evidence when two replicas overlapped.
    std::fs::write(run_dir().join("writes.json"), log.to_string()).unwrap();
    let (overlapping, writer_changes) = overlaps(&writes);
    let figures = [
        ("shards", json!(scale.shards)),
        ("namespaces", json!(scale.shards * 2)),
        ("replicas_added", json!(chaos.added)),
        ("replicas_removed", json!(chaos.removed)),
        ("replica_pauses", json!(chaos.pauses)),
        ("paused_kept_running", json!(chaos.kept_running.len())),
        ("unclean_removals", json!(chaos.unclean_removals.len())),
        ("writes", json!(writes.len())),
        ("writer_changes", json!(writer_changes)),
        ("overlapping_writes", json!(overlapping.len())),
    ];
    for (name, value) in figures {
        summary.insert(name.to_string(), value);
    }
    overlapping
}

/// The sharded mode's own checks (nothing to check in the unsharded mode: all empty).
pub(super) fn assert_held(chaos: &Chaos, overlapping: &[String]) {
    assert!(
        overlapping.is_empty(),
        "two replicas wrote one object at once:\n{}",
        overlapping.join("\n")
    );
    assert_empty(
        &chaos.kept_running,
        "paused past their lease, these replicas kept running after SIGCONT",
    );
    assert!(
        chaos.unclean_removals.is_empty(),
        "{:?}",
        chaos.unclean_removals
    );
}
