//! Attacks on active-active shards (`aigw operator --shards`), with real processes under the
//! chart's sharded RBAC: a member Lease deleted by hand, two processes with one identity, a
//! replica paused past its lease and resumed, a replica cut from the apiserver while the
//! management API still answers, a Lease with a renewTime a century off, a leader without
//! `--shards` beside a shard (a rolling update turning sharding on). Each asserts the
//! guarantee: no object acted on by two replicas at once (the emulator's write log, and each
//! replica's own count of the objects it acts on), no duplicate create, every edit reconciled.

use crate::support;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aigw::controller::runtime::shards;
use aigw::resources::Config;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::objects::Conditions;
use support::wait_until;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use super::leader::{Field, Operator, config};
use super::shards::{emulator, settled, succeeded};

const NAMESPACES: usize = 6;
const WITHIN: Duration = Duration::from_secs(90);
const GROUP_LABEL: &str = "aigw.io/shard-group";

impl Field {
    async fn new(prefix: &str) -> Self {
        Self::with(prefix, NAMESPACES).await
    }

    fn name(&self, n: &str) -> String {
        format!(
            "aigw-{n}-{}",
            &self.env.namespace[self.env.namespace.len() - 8..]
        )
    }

    /// A replica named `n`, with the kubeconfig and log in `dir`.
    fn start_in(&self, n: &str, dir: &Path) -> Operator {
        let watched: Vec<&str> = self.namespaces.iter().map(String::as_str).collect();
        let lease = &self.env.namespace;
        Operator::spawn(
            &self.name(n),
            &watched,
            lease,
            &self.emu,
            dir,
            &["--shards=true"],
        )
    }

    fn start(&self, n: &str) -> Operator {
        self.start_in(n, self.dir.path())
    }

    /// The names of two replicas (`a`, `b`, or `a1`, … for the first) that each own some of the
    /// field's namespaces once both are live. The namespaces' names are random, and rendezvous
    /// hashing gives one of two replicas none of six in one run of 64: a test of what a
    /// replica does with its share needs one.
    fn pair_names(&self) -> (String, String) {
        let b = "b".to_string();
        let first = (0..)
            .map(|i| match i {
                0 => "a".to_string(),
                i => format!("a{i}"),
            })
            .find(|a| {
                let mut view = vec![self.name(a), self.name(&b)];
                view.sort();
                let owners: Vec<&str> = self
                    .namespaces
                    .iter()
                    .filter_map(|ns| shards::owner(&view, &shards::namespace_key(ns)))
                    .collect();
                view.iter().all(|member| owners.contains(&member.as_str()))
            })
            .unwrap();
        (first, b)
    }

    /// A directory of its own (log, token) with the kubeconfig, its server replaced by `server`.
    fn dir_with_server(&self, server: Option<&str>) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let mut text = std::fs::read_to_string(self.dir.path().join("kubeconfig")).unwrap();
        if let Some(server) = server {
            let from = text.find("server: ").expect("a server in the kubeconfig") + 8;
            let to = from + text[from..].find('\n').unwrap();
            text.replace_range(from..to, server);
        }
        std::fs::write(dir.path().join("kubeconfig"), text).unwrap();
        dir
    }

    fn configs(&self, namespace: &str) -> Api<Config> {
        Api::namespaced(self.env.client.clone(), namespace)
    }

    fn leases(&self) -> Api<Lease> {
        Api::namespaced(self.env.client.clone(), &self.env.namespace)
    }

    /// One Config `c0` in every namespace, each Ready.
    async fn create_all(&self) {
        for namespace in &self.namespaces {
            // A remote name of its own per namespace: the write log keys a POST by it, and two
            // shards creating two namespaces' Configs at once are not two writers of one.
            let mut object = config("c0");
            object.spec.name = format!("{namespace}-c0");
            self.configs(namespace)
                .create(&PostParams::default(), &object)
                .await
                .unwrap();
        }
        self.all_ready().await;
    }

    /// Reorders every Config's targets (`round` even: as created), without waiting.
    async fn edit_all(&self, round: usize) {
        let targets = match round % 2 {
            0 => json!([{"provider": "@openai"}, {"provider": "@anthropic"}]),
            _ => json!([{"provider": "@anthropic"}, {"provider": "@openai"}]),
        };
        let patch =
            json!({"spec": {"config": {"strategy": {"mode": "fallback"}, "targets": targets}}});
        for namespace in &self.namespaces {
            self.configs(namespace)
                .patch("c0", &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .unwrap();
        }
    }

    async fn all_ready(&self) {
        for namespace in &self.namespaces {
            let api = self.configs(namespace);
            let ready = wait_until(WITHIN, || async {
                api.get_opt("c0").await.ok()??.ready().then_some(())
            })
            .await;
            assert!(
                ready.is_some(),
                "{namespace}/c0 was not Ready within {WITHIN:?}"
            );
        }
    }

    async fn writes(&self) -> Vec<Value> {
        let writes = emulator(&self.emu, "/_emulator/writes").await;
        writes["writes"].as_array().cloned().unwrap_or_default()
    }

    /// The emulator's write log holds no object written by two replicas at once, and every
    /// Config was created once (`edits` PUTs each at most: a PUT nothing asked for is a second
    /// writer's).
    async fn assert_no_overlap(&self, edits: u64) {
        let writes = self.writes().await;
        support::writes::assert_no_overlap(&writes);
        let stats = emulator(&self.emu, "/_emulator/stats").await;
        let total = NAMESPACES as u64;
        assert_eq!(
            succeeded(&stats, "POST /ai_gw/v2/configs"),
            total,
            "each Config is created once: {stats}"
        );
        assert!(
            succeeded(&stats, "PUT /ai_gw/v2/configs/{slug}") <= edits * total,
            "each edit is written once: {stats}"
        );
    }

    /// The name of the member Lease `holder` holds.
    async fn lease_of(&self, holder: &str) -> Lease {
        let leases = self
            .leases()
            .list(&ListParams::default().labels(GROUP_LABEL))
            .await
            .unwrap();
        leases
            .items
            .into_iter()
            .find(|l| l.spec.as_ref().and_then(|s| s.holder_identity.as_deref()) == Some(holder))
            .unwrap_or_else(|| panic!("no member Lease held by {holder}"))
    }

    /// [`Self::edit_all`] to `n`, then every Config Ready with it.
    async fn edit_all_until_ready(&self, n: usize) {
        self.edit_all(n).await;
        self.all_ready().await;
    }

    /// Replicas `a` and `b`, once they share the namespaces between them.
    async fn settled_pair(&self) -> (Operator, Operator) {
        let (a, b) = self.pair_names();
        let (a, b) = (self.start(&a), self.start(&b));
        settled(&[&a, &b], 2.0).await;
        (a, b)
    }

    /// The writes `replica` made since the first `mark` writes.
    async fn writes_by_since(&self, replica: &Operator, mark: usize) -> Vec<Value> {
        let writes = self.writes().await;
        writes[mark..]
            .iter()
            .filter(|w| w["writer"] == replica.name.as_str())
            .cloned()
            .collect()
    }

    /// [`Self::assert_no_overlap`] of `edits`, then stops the `replicas` and cleans up.
    async fn finish(self, edits: u64, replicas: impl Sized) {
        self.assert_no_overlap(edits).await;
        drop(replicas);
        self.cleanup().await;
    }

    async fn cleanup(self) {
        for namespace in &self.namespaces[1..] {
            support::drop_namespace(&self.env.client, namespace).await;
        }
        self.env.cleanup().await;
        let _ = self.emu.shutdown().await;
    }
}

/// How many Configs `operator` acts on now (`aigw_shard_objects{kind="Config"}`).
async fn acting_on(operator: &Operator) -> f64 {
    support::metric_sum(
        &operator.metrics().await,
        r#"aigw_shard_objects{kind="Config"}"#,
    )
}

/// The largest number of Configs the replicas together acted on at once, sampled every 50 ms
/// for `span` (more than one per Config: two replicas acted on one object).
async fn most_acted_on(operators: &[&Operator], span: Duration) -> f64 {
    let until = Instant::now() + span;
    let mut most: f64 = 0.0;
    while Instant::now() < until {
        let mut sum = 0.0;
        for operator in operators {
            sum += acting_on(operator).await;
        }
        most = most.max(sum);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    most
}

async fn set_faults(emu: &aigw::emulator::Running, faults: Value) {
    let response = reqwest::Client::new()
        .put(format!("{}/_emulator/faults", emu.management_url()))
        .json(&faults)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "faults {faults} refused");
}

/// A member Lease deleted by hand (`kubectl delete lease`) while its holder runs: the others
/// must not take the holder's share before it stops acting on it (it recreates the Lease at its
/// At `most` Configs acted on at once, no Config was acted on twice; else a panic saying `who`
/// did it, and `when`.
fn assert_each_once(most: f64, (who, when): (&str, &str)) {
    assert!(
        most <= NAMESPACES as f64,
        "{who} acted on {most} of {NAMESPACES} Configs{when}"
    );
}

/// next renewal and acts on).
#[tokio::test]
async fn a_member_lease_deleted_by_hand_does_not_hand_its_share_over_while_its_holder_acts() {
    let field = Field::new("atk-del").await;
    let (a_name, b_name) = field.pair_names();
    let a = field.start(&a_name);
    // Out of step with a by about half a renewal period, so b lists while a's Lease is gone.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let b = field.start(&b_name);
    settled(&[&a, &b], 2.0).await;
    field.create_all().await;
    // Slow writes, so two writers of one object would show overlapping in the write log.
    set_faults(&field.emu, json!({"latency_ms": 300})).await;

    let mut most: f64 = 0.0;
    for round in 1..=3 {
        // Right after a renewal of a's, so a recreates its Lease only at its next one (2 s on)
        // while b lists in between.
        let lease = field.lease_of(&a.name).await;
        let name = lease.metadata.name.clone().unwrap();
        let version = lease.metadata.resource_version.clone();
        let renewed = wait_until(Duration::from_secs(10), || async {
            let now = field.leases().get(&name).await.ok()?;
            (now.metadata.resource_version != version).then_some(())
        })
        .await;
        assert!(renewed.is_some(), "a did not renew its Lease");
        field
            .leases()
            .delete(&name, &DeleteParams::default())
            .await
            .unwrap();
        field.edit_all(round).await;
        most = most.max(most_acted_on(&[&a, &b], Duration::from_secs(4)).await);
        assert_eq!(
            a.readyz().await.map(|(_, role)| role).as_deref(),
            Some("shard"),
            "a stopped being a shard"
        );
    }
    println!("a's Lease deleted 3 times: at most {most} Configs acted on at once");
    set_faults(&field.emu, json!({})).await;
    field.all_ready().await;
    assert_each_once(most, ("a and b", " at once after a's Lease was deleted"));
    field.finish(3, (a, b)).await;
}

/// Two processes with one identity (`POD_NAME`): they would hold one Lease and act on one share
/// twice. The second must stand by while the first renews.
#[tokio::test]
async fn two_processes_with_one_identity_do_not_both_act() {
    let field = Field::new("atk-twin").await;
    let a = field.start("a");
    settled(&[&a], 1.0).await;
    let twin_dir = field.dir_with_server(None);
    let twin = field.start_in("a", twin_dir.path());
    let answered = wait_until(WITHIN, || async {
        twin.readyz().await.filter(|(status, _)| *status == 200)
    })
    .await;
    assert!(answered.is_some(), "the twin never got ready");
    // A few renewals of both.
    tokio::time::sleep(Duration::from_secs(6)).await;
    field.create_all().await;
    field.edit_all(1).await;
    let most = most_acted_on(&[&a, &twin], Duration::from_secs(4)).await;
    field.all_ready().await;
    println!(
        "two processes as {}: at most {most} Configs acted on at once",
        a.name
    );
    assert_each_once(most, ("two processes with one identity", ""));
    field.finish(1, (a, twin)).await;
}

/// A replica SIGSTOPped past its lease, its share taken and edited by another, then SIGCONTed:
/// it must send nothing and exit.
#[tokio::test]
async fn a_paused_replica_resumed_after_its_share_moved_sends_nothing_and_exits() {
    let field = Field::new("atk-stop").await;
    let (first, second) = field.settled_pair().await;
    field.create_all().await;
    // The replica paused is one with a share: the namespaces' names are random, and all of
    // them hash to one replica now and then (1 in 32 with six).
    let shared = wait_until(WITHIN, || async {
        let each = (acting_on(&first).await, acting_on(&second).await);
        (each.0 + each.1 >= field.namespaces.len() as f64).then_some(each)
    })
    .await;
    let (on_first, _) = shared.expect("the two replicas never acted on every Config");
    let (mut a, b) = match on_first > 0.0 {
        true => (first, second),
        false => (second, first),
    };
    assert!(acting_on(&a).await > 0.0, "{} acts on no Config", a.name);

    a.signal("-STOP");
    settled(&[&b], 1.0).await;
    field.edit_all_until_ready(1).await;
    let mark = field.writes().await.len();
    // Edits a's watches deliver when it resumes: work it must not do.
    field.edit_all(2).await;
    a.signal("-CONT");
    let code = a.exit_code(Duration::from_secs(30)).await;
    assert_ne!(code, Some(0), "a resumed replica must exit non-zero");
    field.all_ready().await;
    let late = field.writes_by_since(&a, mark).await;
    assert!(late.is_empty(), "a wrote after it resumed: {late:?}");
    field.finish(2, (a, b)).await;
}

/// A TCP proxy to `upstream` that [`Cut::cut`] closes: every connection, and no new one.
struct Cut {
    addr: String,
    tasks: Arc<Mutex<JoinSet<()>>>,
}

impl Cut {
    async fn new(upstream: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let tasks = Arc::new(Mutex::new(JoinSet::new()));
        let spawner = tasks.clone();
        tasks.lock().unwrap().spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let upstream = upstream.clone();
                spawner.lock().unwrap().spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(&upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        Self { addr, tasks }
    }

    fn cut(&self) {
        self.tasks.lock().unwrap().abort_all();
    }
}

/// A replica whose apiserver connection is cut while the management API still answers: it must
/// stop before the others take its share (renew deadline < lease duration), and exit.
#[tokio::test]
async fn a_replica_cut_from_the_apiserver_stops_before_its_share_moves() {
    let field = Field::new("atk-cut").await;
    let kubeconfig = std::fs::read_to_string(field.dir.path().join("kubeconfig")).unwrap();
    let server = kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: "))
        .unwrap()
        .to_string();
    let upstream = server.trim_start_matches("https://").to_string();
    let proxy = Cut::new(upstream).await;
    let a_dir = field.dir_with_server(Some(&format!("https://{}", proxy.addr)));
    let (a_name, b_name) = field.pair_names();
    let mut a = field.start_in(&a_name, a_dir.path());
    let b = field.start(&b_name);
    settled(&[&a, &b], 2.0).await;
    field.create_all().await;
    // The gauge follows a's caches, which list in turn: wait for it rather than read it once.
    let share = support::wait_until(Duration::from_secs(30), || async {
        let share = acting_on(&a).await;
        (share > 0.0).then_some(share)
    })
    .await;
    assert!(share.is_some(), "a acts on no Config");

    let mark = field.writes().await.len();
    let cut = Instant::now();
    proxy.cut();
    field.edit_all(1).await;
    let code = a.exit_code(Duration::from_secs(40)).await;
    println!(
        "a cut from the apiserver: exited {code:?} after {:.1} s",
        cut.elapsed().as_secs_f64()
    );
    assert_ne!(
        code,
        Some(0),
        "a replica that lost its Lease must exit non-zero"
    );
    field.all_ready().await;
    println!(
        "b took a's share: every Config Ready after {:.1} s",
        cut.elapsed().as_secs_f64()
    );
    let late = field.writes_by_since(&a, mark).await;
    assert!(late.is_empty(), "a wrote after it was cut: {late:?}");
    field.finish(1, (a, b)).await;
}

/// A member Lease written by hand with a renewTime a century ahead (a node's clock far off):
/// the replicas time Leases by their own monotonic clocks, so it counts as live for one lease
/// duration after its last change, like any other, and then lapses; a live member's renewTime
/// set far back changes nothing.
#[tokio::test]
async fn lease_renew_times_far_off_change_nothing() {
    let field = Field::new("atk-skew").await;
    let (a, b) = field.settled_pair().await;
    field.create_all().await;

    let group = field.lease_of(&a.name).await.metadata.labels.unwrap()[GROUP_LABEL].clone();
    let ghost: Lease = serde_json::from_value(json!({
        "metadata": {"name": format!("{group}-ghost"), "labels": {GROUP_LABEL: group},
                     "annotations": {"aigw.io/shard-view": ""}},
        "spec": {"holderIdentity": "ghost", "leaseDurationSeconds": 15,
                 "renewTime": "2126-01-01T00:00:00.000000Z",
                 "acquireTime": "2126-01-01T00:00:00.000000Z"}
    }))
    .unwrap();
    support::create(&field.leases(), &ghost).await;
    let b_lease = field.lease_of(&b.name).await;
    let patch = json!({"spec": {"renewTime": "1970-01-02T00:00:00.000000Z"}});
    let b_name = b_lease.metadata.name.as_deref().unwrap();
    support::merge_patch(&field.leases(), b_name, patch).await;
    let start = Instant::now();
    settled(&[&a, &b], 3.0).await;
    field.edit_all(1).await;
    // The ghost published no view: nothing moves until it lapses, then a and b settle again.
    settled(&[&a, &b], 2.0).await;
    println!(
        "a Lease renewed in 2126 lapsed after {:.1} s",
        start.elapsed().as_secs_f64()
    );
    assert!(
        start.elapsed() < Duration::from_secs(40),
        "the ghost counted for too long"
    );
    field.all_ready().await;
    field.finish(1, (a, b)).await;
}

/// A Secret a Config references is labelled for the values cache by the replica that acts on
/// the Config (a write for the Secret's namespace, which is the Config's shard), so its values
/// come from the cache rather than an apiserver GET at every reconcile.
#[tokio::test]
async fn a_sharded_replica_labels_the_secrets_of_its_share() {
    use aigw::controller::state::secret_cache::REFERENCED_LABEL;
    use k8s_openapi::api::core::v1::Secret;

    let field = Field::new("atk-sec").await;
    let (a, b) = field.settled_pair().await;
    for namespace in &field.namespaces {
        let secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": "db"}, "stringData": {"password": "s3cret-value-7f2a"}
        }))
        .unwrap();
        Api::<Secret>::namespaced(field.env.client.clone(), namespace)
            .create(&PostParams::default(), &secret)
            .await
            .unwrap();
        let routing: Config = serde_json::from_value(json!({
            "apiVersion": "aigw.io/v1alpha1", "kind": "Config", "metadata": {"name": "c0"},
            "spec": {"name": format!("{namespace}-c0"), "config": {"provider": "openai"},
                     "secretRefs": [{"path": "/api_key",
                                     "secretKeyRef": {"name": "db", "key": "password"}}]}
        }))
        .unwrap();
        field
            .configs(namespace)
            .create(&PostParams::default(), &routing)
            .await
            .unwrap();
    }
    field.all_ready().await;
    for namespace in &field.namespaces {
        let secret = Api::<Secret>::namespaced(field.env.client.clone(), namespace)
            .get("db")
            .await
            .unwrap();
        let labels = secret.metadata.labels.unwrap_or_default();
        assert_eq!(
            labels.get(REFERENCED_LABEL).map(String::as_str),
            Some("true"),
            "{namespace}/db was not labelled by the replica that acts on its Config"
        );
    }
    field.finish(0, (a, b)).await;
}

/// `helm upgrade --set sharding.enabled=true` rolls the Deployment (RollingUpdate, maxSurge 1):
/// a new replica with `--shards` starts while the old leader, without it, still holds the
/// installation's leader Lease `aigw` and acts on every object. The new replica must act on
/// nothing beside it, and take everything once the old one has shut down (released its Lease).
#[tokio::test]
async fn a_shard_acts_on_nothing_while_a_leader_without_shards_holds_the_leader_lease() {
    let field = Field::new("atk-mix").await;
    let watched: Vec<&str> = field.namespaces.iter().map(String::as_str).collect();
    let old_dir = field.dir_with_server(None);
    let mut old = Operator::spawn(
        &field.name("old"),
        &watched,
        &field.env.namespace,
        &field.emu,
        old_dir.path(),
        &[],
    );
    assert!(old.leads_within(WITHIN).await, "the old replica never led");
    field.create_all().await;
    let new = field.start("new");
    settled(&[&new], 1.0).await;
    field.edit_all(1).await;
    let acting = wait_until(Duration::from_secs(10), || async {
        let share = acting_on(&new).await;
        (share > 0.0).then_some(share)
    })
    .await;
    field.all_ready().await;
    println!("beside a leader, the new shard acts on {acting:?} Configs");
    assert!(
        acting.is_none(),
        "a --shards replica acted on {acting:?} Configs while the leader acts on all"
    );

    let stopped = Instant::now();
    old.signal("-TERM");
    assert_eq!(old.exit_code(Duration::from_secs(30)).await, Some(0));
    let all = wait_until(WITHIN, || async {
        (acting_on(&new).await == NAMESPACES as f64).then_some(())
    })
    .await;
    assert!(
        all.is_some(),
        "the shard never took the objects of the old leader"
    );
    println!(
        "the old leader SIGTERMed: the shard acts on all after {:.1} s",
        stopped.elapsed().as_secs_f64()
    );
    field.edit_all_until_ready(2).await;
    field.finish(2, (old, new)).await;
}

/// Turning sharding off by a rolling update: a replica without `--shards` (under the chart's
/// unsharded RBAC) starts while two shards act. It must not act beside them: it neither leads
/// nor writes while their member Leases are live, and leads once both have shut down. As in a
/// `helm upgrade`, installing the unsharded RBAC replaces the Lease Role the shards hold, so they
/// may fail to renew and stop on their own (exit 1) before their SIGTERM.
#[tokio::test]
async fn a_leader_without_shards_acts_on_nothing_while_shards_hold_live_leases() {
    let field = Field::new("atk-off").await;
    let watched: Vec<&str> = field.namespaces.iter().map(String::as_str).collect();
    let mut shards = [field.start("s1"), field.start("s2")];
    settled(&[&shards[0], &shards[1]], 2.0).await;
    field.create_all().await;

    // The new leader, with the RBAC of the chart without `sharding.enabled`.
    let plain = support::chart::install(
        &field.env.client,
        &support::chart::Scope::watched(&watched).lease_namespace(&field.env.namespace),
    )
    .await;
    let leader_dir = tempfile::tempdir().unwrap();
    plain.kubeconfig_file(leader_dir.path());
    let leader = Operator::spawn(
        &field.name("leader"),
        &watched,
        &field.env.namespace,
        &field.emu,
        leader_dir.path(),
        &[],
    );
    let answering = wait_until(WITHIN, || async { leader.readyz().await }).await;
    assert!(answering.is_some(), "the new leader never answered /readyz");
    field.edit_all_until_ready(1).await;
    // Several of its retry periods beside live shards.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let role = leader.readyz().await.map(|(_, role)| role);
    let by_leader = |writes: &[Value]| {
        writes
            .iter()
            .filter(|w| w["writer"].as_str() == Some(leader.name.as_str()))
            .count()
    };
    let written = by_leader(&field.writes().await);
    println!("beside two shards, the new leader's role: {role:?}, its writes: {written}");
    assert_ne!(
        role.as_deref(),
        Some("leader"),
        "a replica without --shards led while shards held live Leases"
    );
    assert_eq!(written, 0, "the new leader wrote beside the shards");

    let stopped = Instant::now();
    for shard in &mut shards {
        shard.signal("-TERM");
    }
    for shard in &mut shards {
        let code = shard.exit_code(Duration::from_secs(30)).await;
        assert!(matches!(code, Some(0 | 1)), "a shard exited with {code:?}");
    }
    assert!(
        leader.leads_within(WITHIN).await,
        "the replica without --shards never led after the shards shut down"
    );
    println!(
        "the shards SIGTERMed: the new leader leads after {:.1} s",
        stopped.elapsed().as_secs_f64()
    );
    field.edit_all_until_ready(2).await;
    assert!(
        by_leader(&field.writes().await) > 0,
        "the new leader wrote the second edit"
    );
    field.finish(2, (shards, leader)).await;
}
