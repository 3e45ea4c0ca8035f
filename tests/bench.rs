//! `make bench` (hack/bench.sh): the real `aigw operator` process rolling out N Configs, beside
//! three floors at the same concurrency ([`Floor`]): a minimal client doing only the necessary
//! work (one POST per config, one status patch per resource), a crash-safe one that also writes
//! a finalizer and a create intent, with a precondition, before each POST, and one that first
//! claims the object for its installation as aigw does. Figures are reported, never asserted;
//! the target has `test = false` (Cargo.toml), so `make test` does not build it.
//!
//! It needs `KUBECONFIG` pointing at a control plane of its own (hack/bench.sh starts one), since
//! it reads the apiserver's `apiserver_request_total` and counts every request the apiserver saw.
//! Knobs: `N` (resources, default 1000), `BENCH_EDITS` (default 50), `BENCH_STEADY_SECONDS`
//! (default 60), `BENCH_OUT` (default `target/bench`), `BENCH_ROLLOUT_SECONDS` (default 1800).
//! Identity probes: `BENCH_IDENTITY=token` runs the operator with its ServiceAccount's own token
//! (TokenRequest) instead of the default impersonation of it, `BENCH_FLOOR_AS_OPERATOR=1` has the
//! floors write with the operator's identity instead of the admin's, and `BENCH_OPERATOR_FLAGS`
//! adds flags to every operator the bench starts. Size probe: `BENCH_FLOOR_SHAPE=operator` has
//! the floors write the annotations and status aigw leaves on a Config ([`FloorShape`]). Each
//! side runs on a fresh control plane ([`next_side`]) unless `BENCH_ONE_PLANE=1`;
//! `BENCH_LIVE_SIDE=floor|aigw` has `bench_live` run that side only.

/// The integration binary's support (`tests/it/support`); this target uses part of it.
#[allow(dead_code)]
#[path = "it/support/mod.rs"]
mod support;

#[path = "bench/shards.rs"]
mod shards;

#[path = "bench/footprint.rs"]
mod footprint;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aigw::api::{Client, ClientConfig, ConfigCreated, CreateConfigRequest, StaticToken};
use aigw::resources::Config;
use aigw::resources::common::{CREATE_INTENT_ANNOTATION, FINALIZER};
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, watch};

const TOKEN: &str = "bench-token-5d1e";
/// The issue's baseline: `--concurrency 16 --api-qps 1000`; the floor uses the same concurrency.
const CONCURRENCY: usize = 16;
const API_QPS: &str = "1000";
const LATENCY: &str = "20ms";
/// How many Config objects the bench itself creates at once, for both runs alike.
const CREATORS: usize = 16;
const WRITE_VERBS: [&str; 6] = [
    "POST",
    "PUT",
    "PATCH",
    "APPLY",
    "DELETE",
    "DELETECOLLECTION",
];

/// How long a rollout may take before the bench gives up: `BENCH_ROLLOUT_SECONDS` (default 1800;
/// 100,000 Configs on a machine shared with other work can need more).
fn rollout_limit() -> Duration {
    Duration::from_secs(support::env_or("BENCH_ROLLOUT_SECONDS", 1800))
}

struct Opts {
    n: usize,
    edits: usize,
    steady: Duration,
    out: PathBuf,
    bin: PathBuf,
}

impl Opts {
    fn from_env() -> Self {
        let num = support::env_or::<usize>;
        let out = std::env::var("BENCH_OUT")
            .map(PathBuf::from)
            .unwrap_or_else(|_| support::repo_root().join("target/bench"));
        Self {
            n: num("N", 1000),
            edits: num("BENCH_EDITS", 50),
            steady: Duration::from_secs(num("BENCH_STEADY_SECONDS", 60) as u64),
            out,
            bin: PathBuf::from(env!("CARGO_BIN_EXE_aigw")),
        }
    }
}

/// What every bench starts with: its options, the output directory with the token file the
/// emulator and the operator read, and a client of the bench's own control plane with the CRDs
/// installed (hack/bench.sh and hack/bench-scale.sh start one and set `KUBECONFIG`).
async fn setup() -> (Opts, kube::Client, PathBuf) {
    let opts = Opts::from_env();
    std::fs::create_dir_all(&opts.out).expect("cannot create the output directory");
    let token_file = opts.out.join("token");
    std::fs::write(&token_file, TOKEN).expect("cannot write the token file");
    assert!(
        std::env::var_os("KUBECONFIG").is_some(),
        "KUBECONFIG must name the bench's own control plane: run `make bench` (hack/bench.sh)"
    );
    let kube = kube::Client::try_default()
        .await
        .expect("KUBECONFIG must point at the bench control plane (hack/bench.sh)");
    support::install_crds(&kube).await;
    (opts, kube, token_file)
}

/// Before each side of a comparison but the first: a fresh control plane (`hack/cluster-down.sh`,
/// then `hack/cluster-up.sh`, on the state directory `AIGW_DEV_DIR` names), with the CRDs, and a
/// client of it. A side run on the plane an earlier side left its N objects in runs slower: the
/// floor followed by aigw on one plane made aigw 10 s (18 %) slower than alone, aigw followed by
/// the floor made the floor 3 s (7 %) slower (Benchmark chapter). Every side then starts on the
/// same conditions. `BENCH_ONE_PLANE=1`, or no `AIGW_DEV_DIR`, keeps `kube`'s plane (the order
/// then weighs on the later sides).
async fn next_side(kube: kube::Client) -> kube::Client {
    if !plane_per_side() {
        return kube;
    }
    for script in ["hack/cluster-down.sh", "hack/cluster-up.sh"] {
        let output = Command::new("bash")
            .arg(support::repo_root().join(script))
            .output()
            .await
            .unwrap_or_else(|e| panic!("{script}: {e}"));
        assert!(
            output.status.success(),
            "{script} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let kube = kube::Client::try_default()
        .await
        .expect("a client of the fresh control plane");
    support::install_crds(&kube).await;
    kube
}

/// Whether each side runs on a control plane of its own ([`next_side`]), for the report.
fn plane_per_side() -> bool {
    std::env::var("BENCH_ONE_PLANE").map_or(true, |v| v != "1")
        && std::env::var_os("AIGW_DEV_DIR").is_some()
}

/// [`setup`], and the emulator the bench's operators and floors talk to.
async fn setup_with_emulator() -> (Opts, kube::Client, PathBuf, Emulator) {
    let (opts, kube, token_file) = setup().await;
    let emulator = Emulator::start(&opts, &token_file).await;
    (opts, kube, token_file, emulator)
}

/// Writes `report` as `file` in the output directory, and prints it.
fn write_report(opts: &Opts, file: &str, report: &Value) {
    let text = serde_json::to_string_pretty(report).unwrap_or_default();
    let path = opts.out.join(file);
    std::fs::write(&path, &text).expect("cannot write the report");
    println!("{text}");
    eprintln!("report written to {}", path.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bench() {
    let (opts, mut kube, token_file, emulator) = setup_with_emulator().await;

    let mut floors = Vec::new();
    for (i, floor) in Floor::ALL.into_iter().enumerate() {
        eprintln!(
            "== {floor:?} floor: N={} at concurrency {CONCURRENCY}",
            opts.n
        );
        if i > 0 {
            kube = next_side(kube).await;
        }
        floors.push(run_floor(&opts, &kube, &emulator, floor).await);
        eprintln!("{}", floors[floors.len() - 1]);
    }

    eprintln!("== aigw operator: N={}", opts.n);
    kube = next_side(kube).await;
    let (aigw, edits, steady) = run_operator(&opts, &kube, &emulator, &token_file).await;

    eprintln!("== backlog: N={} Configs before either side starts", opts.n);
    let mut backlog_floors = Vec::new();
    for floor in Floor::ALL {
        kube = next_side(kube).await;
        backlog_floors.push(run_floor_backlog(&opts, &kube, &emulator, floor).await);
        eprintln!("{floor:?}: {}", backlog_floors[backlog_floors.len() - 1]);
    }
    kube = next_side(kube).await;
    let backlog_aigw = run_operator_backlog(&opts, &kube, &emulator, &token_file).await;
    eprintln!(
        "{}",
        serde_json::to_string(&backlog_aigw).unwrap_or_default()
    );

    let ratio = |aigw: &Value, floor: &Value| {
        let seconds = |run: &Value| run["rollout_seconds"].as_f64();
        round(
            seconds(aigw).unwrap_or(0.0) / seconds(floor).unwrap_or(f64::NAN),
            2,
        )
    };
    // `floor` and `ratio` are the minimal floor's, as before; `floors` and `ratios` have each.
    let by_floor = |runs: &[Value], aigw: &Value| {
        let names = Floor::ALL.iter().map(|f| f.key().to_string());
        let floors: serde_json::Map<_, _> = names.clone().zip(runs.iter().cloned()).collect();
        let ratios = names.zip(runs.iter().map(|run| json!(ratio(aigw, run))));
        (floors, ratios.collect::<serde_json::Map<_, _>>())
    };
    let (live_floors, live_ratios) = by_floor(&floors, &aigw);
    let (old_floors, old_ratios) = by_floor(&backlog_floors, &backlog_aigw);
    let report = json!({
        "n": opts.n,
        "build": if cfg!(debug_assertions) { "debug" } else { "release" },
        "emulator_latency": LATENCY,
        "operator_flags": format!("--concurrency {CONCURRENCY} --api-qps {API_QPS} --leader-elect=false"),
        "control_plane_per_side": plane_per_side(),
        "floor": floors[0],
        "floors": live_floors,
        "aigw": aigw,
        "ratio": ratio(&aigw, &floors[0]),
        "ratios": live_ratios,
        "backlog": {
            "clock": "from the start of the operator (of the floor's first list) to the last Ready",
            "floor": backlog_floors[0],
            "floors": old_floors,
            "aigw": backlog_aigw,
            "ratio": ratio(&backlog_aigw, &backlog_floors[0]),
            "ratios": old_ratios,
        },
        "edit_to_version_id_ms": edits,
        "steady_state_after_restart": steady,
    });
    write_report(&opts, &format!("report-{}.json", opts.n), &report);
    drop(emulator);
}

/// Where a live rollout's time goes: the crash-safe floor and the operator only, live, each with
/// its phases per Config ([`Tracker::phases`]); no edits, restart or backlog. Writes
/// `report-live-N.json`. Not in `make bench`: `cargo test --release --test bench -- --exact
/// bench_live --nocapture` on the bench's control plane (`AIGW_DEV_DIR=target/bench/cluster
/// bash hack/cluster-up.sh`, then `KUBECONFIG=target/bench/cluster/kubeconfig`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bench_live() {
    let (opts, mut kube, token_file, emulator) = setup_with_emulator().await;
    // `BENCH_LIVE_SIDE=floor|aigw`: that side only.
    let side = std::env::var("BENCH_LIVE_SIDE").unwrap_or_default();
    let mut report = json!({
        "n": opts.n,
        "build": if cfg!(debug_assertions) { "debug" } else { "release" },
        "control_plane_per_side": plane_per_side(),
    });
    if side != "aigw" {
        eprintln!("== crash-safe floor, live: N={}", opts.n);
        let floor = run_floor(&opts, &kube, &emulator, Floor::CrashSafe).await;
        eprintln!("{floor}");
        report["crash_safe_floor"] = floor;
    }
    if side != "floor" {
        eprintln!("== aigw operator, live: N={}", opts.n);
        if side.is_empty() {
            kube = next_side(kube).await;
        }
        let ns = namespace(&kube, "bench-aigw").await;
        let api: Api<Config> = Api::namespaced(kube.clone(), &ns);
        let tracker = Tracker::watch(api.clone());
        let (mut operator, aigw) =
            rollout(&opts, &emulator, &token_file, (&ns, &api), &tracker).await;
        operator.kill().await;
        report["aigw"] = aigw;
    }
    let seconds = |run: &Value| run["rollout_seconds"].as_f64().unwrap_or(f64::NAN);
    if side.is_empty() {
        let ratio = seconds(&report["aigw"]) / seconds(&report["crash_safe_floor"]);
        report["ratio"] = json!(round(ratio, 2));
    }
    let name = match side.as_str() {
        "" => format!("report-live-{}.json", opts.n),
        side => format!("report-live-{side}-{}.json", opts.n),
    };
    write_report(&opts, &name, &report);
    drop(emulator);
}

/// `make bench-scale` (hack/bench-scale.sh, one N per fresh control plane): N Configs as a backlog,
/// the operator started on them at the rollout's flags, then edits, then a restart with default
/// flags; the operator's and the control plane's peak RSS and CPU, per object. Writes
/// `scale-N.json`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bench_scale() {
    let (opts, kube, token_file, emulator) = setup_with_emulator().await;
    let ns = namespace(&kube, "bench-scale").await;
    let api: Api<Config> = Api::namespaced(kube.clone(), &ns);

    eprintln!("== creating N={} Configs", opts.n);
    let created = create_all(&api, opts.n, None).await;
    let plane_idle = ControlPlane::stats();
    let tracker = Tracker::watch(api.clone());
    let window = Window::open(&emulator).await;
    let t0 = Instant::now();
    eprintln!("== operator on the backlog");
    let mut operator =
        Operator::rolling_out(&opts, &emulator, &token_file, &ns, "operator-scale").await;
    let readyz = t0.elapsed();
    let rollout = tracker.wait_all_ready(opts.n, t0).await;
    let apiserver = window.apiserver().await;
    let (rss, cpu) = operator.proc_stats();
    let plane = ControlPlane::stats();
    let reconciles = operator.reconciles().await;
    let management = management_figures(&emulator.stats().await, opts.n);
    eprintln!("== {} edits, one at a time", opts.edits);
    let edits = edit_latencies(&opts, &api, &tracker).await;
    operator.kill().await;
    eprintln!(
        "== restart with default flags, {} s window",
        opts.steady.as_secs()
    );
    let steady = steady_state(&opts, &emulator, &token_file, &ns, &api, &tracker).await;
    let plane_end = ControlPlane::stats();

    let n = opts.n as f64;
    let per_object_kib = |mib: f64, base: f64| round((mib - base) * 1024.0 / n, 2);
    let report = json!({
        "n": opts.n,
        "build": if cfg!(debug_assertions) { "debug" } else { "release" },
        "create_seconds": round(created.as_secs_f64(), 1),
        "rollout": {
            "rollout_seconds": round(rollout.as_secs_f64(), 1),
            "readyz_after_start_seconds": round(readyz.as_secs_f64(), 2),
            "reconciles_per_resource": round(reconciles / n, 2),
            "apiserver": apiserver_figures(&apiserver, opts.n),
            "management_api": management,
            "peak_rss_mib": rss,
            "cpu_seconds": cpu,
            "cpu_ms_per_object": round(cpu * 1000.0 / n, 3),
        },
        "edit_to_version_id_ms": edits,
        "steady_state_after_restart": steady,
        "control_plane": {
            "rss_mib_with_n_created": plane_idle.rss_mib,
            "rss_mib_after_rollout": plane.rss_mib,
            "peak_rss_mib": plane_end.peak_rss_mib,
            "cpu_seconds_during_rollout": round(plane.cpu_seconds - plane_idle.cpu_seconds, 1),
            "cpu_ms_per_object_during_rollout": round((plane.cpu_seconds - plane_idle.cpu_seconds) * 1000.0 / n, 3),
        },
        "operator_kib_per_object": {
            "rollout_peak": per_object_kib(rss, 0.0),
            "restart_peak": per_object_kib(steady["peak_rss_mib"].as_f64().unwrap_or(0.0), 0.0),
        },
    });
    write_report(&opts, &format!("scale-{}.json", opts.n), &report);
    drop(emulator);
}

/// `BENCH_STATUS=1 make bench` runs it too (or `cargo test --test bench -- --exact
/// bench_status_writes`): the operator's status write (server-side apply of the whole status with
/// a resourceVersion precondition) against a merge patch with the same precondition, each on N/2
/// Configs written twice (the first status, then a changed one), 16 in flight. The control
/// plane's CPU and the wall time per write. Writes `status-writes-N.json`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bench_status_writes() {
    let (opts, kube, _) = setup().await;
    let ns = namespace(&kube, "bench-status").await;
    let api: Api<Config> = Api::namespaced(kube.clone(), &ns);
    create_all(&api, opts.n, None).await;
    let half = opts.n / 2;
    let mut results = serde_json::Map::new();
    for (method, range) in [
        ("merge_patch", 0..half),
        ("server_side_apply", half..opts.n),
    ] {
        let names: Vec<String> = range.map(|i| format!("c-{i:05}")).collect();
        let mut versions: HashMap<String, String> = HashMap::new();
        for config in api
            .list(&kube::api::ListParams::default())
            .await
            .expect("list")
            .items
        {
            let name = config.metadata.name.clone().unwrap_or_default();
            versions.insert(name, config.metadata.resource_version.unwrap_or_default());
        }
        let mut rounds = Vec::new();
        for pass in 0..2 {
            let plane = ControlPlane::stats();
            let t0 = Instant::now();
            let written: Vec<(String, String)> = futures::stream::iter(names.iter().cloned())
                .map(|name| {
                    let api = api.clone();
                    let version = versions.get(&name).cloned().unwrap_or_default();
                    async move {
                        let status = operator_like_status(&name, pass);
                        let written = match method {
                            "merge_patch" => {
                                let patch = json!({"metadata": {"resourceVersion": version}, "status": status});
                                api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch)).await
                            }
                            _ => {
                                let patch = json!({
                                    "apiVersion": "aigw.io/v1alpha1", "kind": "Config",
                                    "metadata": {"resourceVersion": version}, "status": status,
                                });
                                api.patch_status(&name, &PatchParams::apply("aigw/config").force(), &Patch::Apply(&patch)).await
                            }
                        };
                        let written = written.unwrap_or_else(|e| panic!("{method} of {name} failed: {e}"));
                        (name, written.metadata.resource_version.unwrap_or_default())
                    }
                })
                .buffer_unordered(CONCURRENCY)
                .collect()
                .await;
            let took = t0.elapsed().as_secs_f64();
            let cpu = ControlPlane::stats().cpu_seconds - plane.cpu_seconds;
            versions.extend(written);
            rounds.push(json!({
                "pass": if pass == 0 { "first status" } else { "changed status" },
                "writes": names.len(),
                "seconds": round(took, 2),
                "control_plane_cpu_ms_per_write": round(cpu * 1000.0 / names.len() as f64, 3),
                "wall_ms_per_write_at_16": round(took * 1000.0 / names.len() as f64, 3),
            }));
        }
        results.insert(method.into(), Value::Array(rounds));
    }
    let report = json!({"n": opts.n, "build": if cfg!(debug_assertions) { "debug" } else { "release" }, "status_writes": results});
    write_report(&opts, &format!("status-writes-{}.json", opts.n), &report);
}

/// A status as the operator writes it for a Config it created: conditions, ids, a version, the
/// settled intent and one history entry. `pass` changes the version.
fn operator_like_status(name: &str, pass: usize) -> Value {
    let now = now_seconds();
    let version = format!("{}-v{pass}", uuid::Uuid::new_v4());
    json!({
        "observedGeneration": 1,
        "conditions": [condition("Ready", "True", 1), condition("Reconciling", "False", 1), condition("Stalled", "False", 1)],
        "id": uuid::Uuid::new_v4().to_string(),
        "slug": format!("pc-{name}"),
        "versionId": version,
        "lastAppliedAt": now,
        "remoteUpdatedAt": now,
        "createSettled": uuid::Uuid::new_v4().to_string(),
        "history": [{"versionId": version, "generation": 1, "appliedAt": now}],
    })
}

/// A status condition as aigw writes it (reason `Synced`), at `generation`, set now.
fn condition(type_: &str, status: &str, generation: i64) -> Value {
    json!({"type": type_, "status": status, "reason": "Synced", "message": "",
        "lastTransitionTime": now_seconds(), "observedGeneration": generation})
}

/// Now, to the second, as Kubernetes writes times.
fn now_seconds() -> String {
    jiff::Timestamp::now()
        .round(jiff::Unit::Second)
        .unwrap_or_else(|_| jiff::Timestamp::now())
        .to_string()
}

/// The control plane of hack/cluster-up.sh (kube-apiserver and etcd in one process): its RSS,
/// peak RSS and CPU seconds so far.
struct ControlPlane {
    rss_mib: f64,
    peak_rss_mib: f64,
    cpu_seconds: f64,
}

impl ControlPlane {
    fn stats() -> Self {
        let dir = std::env::var("AIGW_DEV_DIR").unwrap_or_else(|_| ".aigw-dev".into());
        let pid = std::fs::read_to_string(format!("{dir}/controlplane.pid")).unwrap_or_default();
        let (peak, cpu) = proc_stats(pid.trim().parse().unwrap_or(0));
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", pid.trim())).unwrap_or_default();
        Self {
            rss_mib: round(status_kib(&status, "VmRSS:") / 1024.0, 1),
            peak_rss_mib: peak,
            cpu_seconds: cpu,
        }
    }
}

/// The mixed set's kinds and their share of every 20 objects (documented in the benchmark
/// chapter): the namespaced kinds a team holds, each through its own controller and drift pass.
const MIX: [(&str, usize); 6] = [
    ("Config", 8),
    ("RateLimitsPolicy", 3),
    ("UsageLimitsPolicy", 2),
    ("Guardrail", 3),
    ("Deployment", 2),
    ("ApiKey", 2),
];

/// The kind of the mixed set's `i`th object.
fn mixed_kind(i: usize) -> &'static str {
    let mut at = i % 20;
    for (kind, share) in MIX {
        if at < share {
            return kind;
        }
        at -= share;
    }
    MIX[0].0
}

/// The spec of the mixed set's `i`th object (`workspace`: the emulator's default workspace).
fn mixed_spec(kind: &str, i: usize, workspace: &str) -> Value {
    match kind {
        "Config" => json!({"name": format!("mixed {i}"), "config": document(i)}),
        "RateLimitsPolicy" => json!({
            "name": format!("rl {i}"), "type": "requests", "unit": "rpm", "value": 600,
            "conditions": [{"key": "workspace_id", "value": workspace}],
            "groupBy": [{"key": "api_key"}], "target": "llm",
        }),
        "UsageLimitsPolicy" => json!({
            "name": format!("ul {i}"), "type": "cost", "creditLimit": 500,
            "periodicReset": "monthly",
            "conditions": [{"key": "workspace_id", "value": workspace}],
            "groupBy": [{"key": "api_key"}],
        }),
        "Guardrail" => json!({
            "name": format!("gr {i}"), "workspaceId": workspace,
            "checks": [{"id": "default.regexMatch", "name": "cards",
                "parameters": {"rule": format!("\\d{{16}}-{i}")}}],
            "actions": {"deny": true},
        }),
        "Deployment" => json!({
            "name": format!("dep-{i}"), "type": "non_production",
            "credentialsSecretRef": {"name": format!("m-{i:05}-credentials")},
            "deletionPolicy": "Archive",
        }),
        _ => json!({
            "name": format!("key {i}"), "kind": "service", "workspaceId": workspace,
            "scopes": ["completions.write"],
            "secretRef": {"name": format!("m-{i:05}-key")},
        }),
    }
}

/// The typed kind's API resource, for a dynamic `Api`.
fn api_resource(kind: &str) -> kube::discovery::ApiResource {
    use aigw::resources::{ApiKey, Deployment, Guardrail, RateLimitsPolicy, UsageLimitsPolicy};
    use kube::discovery::ApiResource;
    match kind {
        "Config" => ApiResource::erase::<Config>(&()),
        "RateLimitsPolicy" => ApiResource::erase::<RateLimitsPolicy>(&()),
        "UsageLimitsPolicy" => ApiResource::erase::<UsageLimitsPolicy>(&()),
        "Guardrail" => ApiResource::erase::<Guardrail>(&()),
        "Deployment" => ApiResource::erase::<Deployment>(&()),
        _ => ApiResource::erase::<ApiKey>(&()),
    }
}

/// Creates the mixed set's `n` objects in `ns` with [`CREATORS`] in flight; each kind, name,
/// generation and spec goes to `tx` as soon as it exists.
async fn create_mixed(
    kube: &kube::Client,
    ns: &str,
    n: usize,
    workspace: &str,
    tx: Option<mpsc::UnboundedSender<Created>>,
) -> Duration {
    let t0 = Instant::now();
    futures::stream::iter(0..n)
        .map(|i| {
            let (kube, tx) = (kube.clone(), tx.clone());
            async move {
                let kind = mixed_kind(i);
                let resource = api_resource(kind);
                let api: Api<DynamicObject> = Api::namespaced_with(kube, ns, &resource);
                let name = format!("m-{i:05}");
                let spec = mixed_spec(kind, i, workspace);
                let object: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": resource.api_version, "kind": kind,
                    "metadata": {"name": name}, "spec": spec,
                }))
                .expect("an object");
                let created = api
                    .create(&PostParams::default(), &object)
                    .await
                    .unwrap_or_else(|e| panic!("creating {kind} {name} failed: {e}"));
                if let Some(tx) = tx {
                    let generation = created.metadata.generation.unwrap_or(1);
                    let _ = tx.send(Created {
                        kind,
                        name,
                        generation,
                        spec,
                    });
                }
            }
        })
        .buffer_unordered(CREATORS)
        .collect::<Vec<()>>()
        .await;
    t0.elapsed()
}

/// One object of the mixed set, as the floor hears of it.
struct Created {
    kind: &'static str,
    name: String,
    generation: i64,
    spec: Value,
}

/// The floor for one object of any kind of the mix: its POST, the Secret the key or
/// credentials go to (Deployment, ApiKey), and its status Ready.
async fn floor_mixed_worker(
    kube: kube::Client,
    ns: String,
    client: Client,
    rx: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<Created>>>,
) {
    use aigw::resources::config_document::SecretDocument;
    use aigw::resources::{RateLimitsPolicy, UsageLimitsPolicy, api_key, deployment, guardrail};
    loop {
        let next = rx.lock().await.recv().await;
        let Some(Created {
            kind,
            name,
            generation,
            spec,
        }) = next
        else {
            return;
        };
        let secret: Option<(String, String)> = match kind {
            "Config" => {
                let spec: aigw::resources::config::ConfigSpec =
                    serde_json::from_value(spec).expect("a spec");
                client
                    .configs()
                    .create(&spec.create_request())
                    .await
                    .expect("floor POST");
                None
            }
            "RateLimitsPolicy" => post_policy::<RateLimitsPolicy>(&client, spec).await,
            "UsageLimitsPolicy" => post_policy::<UsageLimitsPolicy>(&client, spec).await,
            "Guardrail" => {
                let spec: guardrail::GuardrailSpec = serde_json::from_value(spec).expect("a spec");
                let request = spec
                    .definition
                    .create_request_with(&spec.definition.document(), spec.workspace_id.as_deref());
                client
                    .guardrails_on(aigw::api::GuardrailPlane::Workspace)
                    .create(&request)
                    .await
                    .expect("floor POST");
                None
            }
            "Deployment" => {
                let spec: deployment::DeploymentSpec =
                    serde_json::from_value(spec).expect("a spec");
                let created = client
                    .deployments()
                    .create(&spec.create_request(None))
                    .await
                    .expect("floor POST");
                Some((
                    spec.credentials_secret_ref.name.clone(),
                    created.client_auth.expose().to_string(),
                ))
            }
            _ => {
                let spec: api_key::ApiKeySpec = serde_json::from_value(spec).expect("a spec");
                let created = client
                    .api_keys(spec.kind.to_api())
                    .create(&spec.create_request(None))
                    .await
                    .expect("floor POST");
                Some((
                    spec.secret_ref.name.clone(),
                    created.key.expose().to_string(),
                ))
            }
        };
        if let Some((secret_name, value)) = secret {
            let secrets: Api<k8s_openapi::api::core::v1::Secret> =
                Api::namespaced(kube.clone(), &ns);
            let secret = serde_json::from_value(json!({
                "metadata": {"name": secret_name}, "stringData": {"key": value},
            }))
            .expect("a Secret");
            secrets
                .create(&PostParams::default(), &secret)
                .await
                .expect("floor Secret");
        }
        let resource = api_resource(kind);
        let api: Api<DynamicObject> = Api::namespaced_with(kube.clone(), &ns, &resource);
        let status = json!({"status": {
            "observedGeneration": generation,
            "conditions": [condition("Ready", "True", generation)],
        }});
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .expect("floor status patch failed");
    }
}

/// The floor's POST of a policy kind's spec: the call the operator's create makes. A policy
/// has no Secret to write (`None`).
async fn post_policy<P>(client: &Client, spec: Value) -> Option<(String, String)>
where
    P: aigw::resources::policy::Policy<Spec: serde::de::DeserializeOwned>,
{
    let spec: P::Spec = serde_json::from_value(spec).expect("a spec");
    let policy = P::with_spec(Default::default(), spec);
    policy.create(client).await.expect("floor POST");
    None
}

/// `make bench` (after the Configs): the mixed set of [`MIX`] at N objects in total, rolled out
/// by the floor and by the operator, live and as a backlog. Writes `report-mixed-N.json`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bench_mixed() {
    let (opts, kube, token_file, emulator) = setup_with_emulator().await;
    let workspace = emulator.default_workspace().await;
    let n = opts.n;
    let counts: BTreeMap<&str, usize> = MIX
        .iter()
        .map(|(kind, _)| (*kind, (0..n).filter(|i| mixed_kind(*i) == *kind).count()))
        .collect();

    // The floor, live: as each object is created, a worker does its API work.
    eprintln!("== mixed floor: N={n} at concurrency {CONCURRENCY}");
    let floor = {
        let ns = namespace(&kube, "mixed-floor").await;
        let tracker = MixedTracker::watch(&kube, &ns);
        let window = Window::open(&emulator).await;
        let t0 = Instant::now();
        let (tx, workers) =
            floor_pool(|rx| floor_mixed_worker(kube.clone(), ns.clone(), emulator.client(), rx));
        create_mixed(&kube, &ns, n, &workspace, Some(tx)).await;
        let rollout = tracker.wait_all_ready(n, t0).await;
        workers.join().await;
        Value::Object(window.figures(rollout, n).await)
    };
    eprintln!("{floor}");

    // The operator, live, then on a backlog of the same size.
    let mut runs = Vec::new();
    for backlog in [false, true] {
        eprintln!("== mixed aigw operator: N={n}, backlog {backlog}");
        let ns = namespace(
            &kube,
            if backlog {
                "mixed-backlog"
            } else {
                "mixed-aigw"
            },
        )
        .await;
        let tracker = MixedTracker::watch(&kube, &ns);
        if backlog {
            create_mixed(&kube, &ns, n, &workspace, None).await;
        }
        let t_start = Instant::now();
        let operator = Operator::rolling_out(
            &opts,
            &emulator,
            &token_file,
            &ns,
            if backlog {
                "operator-mixed-backlog"
            } else {
                "operator-mixed"
            },
        )
        .await;
        let window = Window::open(&emulator).await;
        let t0 = if backlog { t_start } else { Instant::now() };
        if !backlog {
            create_mixed(&kube, &ns, n, &workspace, None).await;
        }
        let rollout = tracker.wait_all_ready(n, t0).await;
        let mut run = window.figures(rollout, n).await;
        let reconciles = operator.reconciles().await;
        let (rss, cpu) = operator.proc_stats();
        run.extend(as_map(json!({
            "reconciles_per_resource": round(reconciles / n as f64, 2),
            "peak_rss_mib": rss,
            "cpu_seconds": cpu,
        })));
        let run = Value::Object(run);
        eprintln!("{run}");
        runs.push(run);
    }
    let backlog = runs.pop().unwrap_or_default();
    let live = runs.pop().unwrap_or_default();
    let ratio = |run: &Value| {
        round(
            run["rollout_seconds"].as_f64().unwrap_or(0.0)
                / floor["rollout_seconds"].as_f64().unwrap_or(f64::NAN),
            2,
        )
    };
    let report = json!({
        "n": n,
        "kinds": counts,
        "build": if cfg!(debug_assertions) { "debug" } else { "release" },
        "emulator_latency": LATENCY,
        "floor": floor,
        "aigw": live,
        "ratio": ratio(&live),
        "backlog": {
            "clock": "from the start of the operator to the last Ready (the floor: its live rollout)",
            "aigw": backlog,
            "ratio_to_live_floor": ratio(&backlog),
        },
    });
    write_report(&opts, &format!("report-mixed-{n}.json"), &report);
    drop(emulator);
}

/// Readiness of every object of the mix in one namespace, from one watch per kind.
#[derive(Clone)]
struct MixedTracker {
    ready: Arc<Mutex<HashMap<String, bool>>>,
    tick: watch::Receiver<u64>,
}

impl MixedTracker {
    fn watch(kube: &kube::Client, ns: &str) -> Self {
        let ready = Arc::new(Mutex::new(HashMap::new()));
        let (tx, tick) = watch::channel(0u64);
        let tx = Arc::new(tx);
        for (kind, _) in MIX {
            let resource = api_resource(kind);
            let api: Api<DynamicObject> = Api::namespaced_with(kube.clone(), ns, &resource);
            let (map, tx) = (ready.clone(), tx.clone());
            tokio::spawn(async move {
                let mut stream = watcher(api, watcher::Config::default())
                    .default_backoff()
                    .applied_objects()
                    .boxed();
                while let Ok(Some(object)) = stream.try_next().await {
                    let generation = object.metadata.generation;
                    let conditions = object.data["status"]["conditions"].as_array().cloned();
                    let is_ready = conditions.unwrap_or_default().iter().any(|c| {
                        c["type"] == "Ready"
                            && c["status"] == "True"
                            && c["observedGeneration"].as_i64() == generation
                    });
                    let key = format!("{kind}/{}", object.metadata.name.unwrap_or_default());
                    map.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(key, is_ready);
                    tx.send_modify(|t| *t += 1);
                }
            });
        }
        Self { ready, tick }
    }

    async fn wait_all_ready(&self, n: usize, t0: Instant) -> Duration {
        let mut tick = self.tick.clone();
        let deadline = tokio::time::Instant::now() + rollout_limit();
        loop {
            let count = self
                .ready
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .values()
                .filter(|r| **r)
                .count();
            if count >= n {
                return t0.elapsed();
            }
            let waited = tokio::time::timeout_at(deadline, tick.changed()).await;
            assert!(
                matches!(waited, Ok(Ok(()))),
                "only {count} of {n} objects of the mix became Ready within 30 min"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The rollouts: the floors' and the operator's

/// What a floor client writes besides the POST and the status patch.
#[derive(Clone, Copy, Debug)]
enum Floor {
    /// Nothing: the work itself, with no crash safety (a crash between the POST and the status
    /// patch leaves a remote Config no resource records; one before the POST, nothing).
    Minimal,
    /// A merge patch of the finalizer and a create intent before each POST, with the copy's
    /// `resourceVersion` as its precondition: the least a client needs so a crash can neither
    /// leak the remote object (the finalizer keeps a deleted resource until it is cleaned up)
    /// nor create it twice (the intent tells a restarted client a create may be in flight).
    CrashSafe,
    /// The crash-safe floor, first taking the object for its installation as aigw does: a
    /// status merge patch of `status.installation`, with the copy's `resourceVersion` as its
    /// precondition, so that of two installations racing for one object exactly one takes it
    /// (the status subresource, which a tenant's `edit` role cannot write). Three apiserver
    /// writes and one POST, each in series: aigw's own count.
    Claimed,
}

impl Floor {
    const ALL: [Floor; 3] = [Floor::Minimal, Floor::CrashSafe, Floor::Claimed];

    /// Its name in the report.
    fn key(self) -> &'static str {
        match self {
            Floor::Minimal => "minimal",
            Floor::CrashSafe => "crash_safe",
            Floor::Claimed => "crash_safe_claimed",
        }
    }

    fn namespace(self, backlog: bool) -> String {
        let name = format!("bench-floor-{}", self.key().replace('_', "-"));
        if backlog { name + "-backlog" } else { name }
    }
}

/// A Config as the bench or the floor's list saw it, for a floor worker.
struct Made {
    name: String,
    generation: i64,
    resource_version: String,
}

impl Made {
    fn of(config: &Config) -> Self {
        Self {
            name: config.metadata.name.clone().unwrap_or_default(),
            generation: config.metadata.generation.unwrap_or(1),
            resource_version: config.metadata.resource_version.clone().unwrap_or_default(),
        }
    }
}

/// The kubeconfig of the operator's identity for namespace `ns` (the chart's RBAC for it): the
/// ServiceAccount impersonated, or with `BENCH_IDENTITY=token` its own token, as a real install
/// authenticates.
async fn operator_kubeconfig(admin: &kube::Client, ns: &str, out: &std::path::Path) -> PathBuf {
    match std::env::var("BENCH_IDENTITY").as_deref() {
        Ok("token") => support::chart::operator_token_kubeconfig(admin, ns, out).await,
        _ => support::chart::operator_kubeconfig(admin, ns, out).await,
    }
}

/// The floor: as each Config is created, a worker POSTs it and patches its status Ready.
async fn run_floor(opts: &Opts, kube: &kube::Client, emulator: &Emulator, floor: Floor) -> Value {
    let ns = namespace(kube, &floor.namespace(false)).await;
    let api: Api<Config> = Api::namespaced(kube.clone(), &ns);
    let tracker = Tracker::watch(api.clone());
    // `BENCH_FLOOR_AS_OPERATOR=1`: the workers write as the operator does, impersonating the
    // chart's ServiceAccount (a probe of what the identity costs the apiserver).
    let writer = match std::env::var("BENCH_FLOOR_AS_OPERATOR").as_deref() {
        Ok("1") => {
            let path = operator_kubeconfig(kube, &ns, &opts.out).await;
            let config =
                kube::config::Kubeconfig::read_from(&path).expect("the operator's kubeconfig");
            let options = kube::config::KubeConfigOptions::default();
            let config = kube::Config::from_custom_kubeconfig(config, &options)
                .await
                .expect("a config from the operator's kubeconfig");
            let client = kube::Client::try_from(config).expect("a client as the operator");
            Api::namespaced(client, &ns)
        }
        _ => api.clone(),
    };
    let window = Window::open(emulator).await;
    let client = emulator.client();
    let t0 = Instant::now();
    let (tx, workers) = floor_pool(|rx| floor_worker(writer.clone(), client.clone(), rx, floor));
    let created = create_all(&api, opts.n, Some(tx)).await;
    let rollout = tracker.wait_all_ready(opts.n, t0).await;
    workers.join().await;
    let mut figures = window.figures(rollout, opts.n).await;
    let create_seconds = round(created.as_secs_f64(), 2);
    figures.insert("create_seconds".into(), json!(create_seconds));
    figures.insert("phases".into(), tracker.phases(t0));
    Value::Object(figures)
}

async fn floor_worker(
    api: Api<Config>,
    client: Client,
    rx: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<Made>>>,
    floor: Floor,
) {
    let shape = FloorShape::from_env();
    loop {
        let next = rx.lock().await.recv().await;
        let Some(Made {
            name,
            generation,
            mut resource_version,
        }) = next
        else {
            return;
        };
        if let Floor::Claimed = floor {
            let claim = json!({
                "metadata": {"resourceVersion": resource_version},
                "status": {"installation": "default"},
            });
            let claimed = api
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&claim))
                .await
                .expect("floor claim patch failed");
            resource_version = claimed.metadata.resource_version.unwrap_or_default();
        }
        if let Floor::CrashSafe | Floor::Claimed = floor {
            let metadata = json!({"metadata": {
                "resourceVersion": resource_version,
                "finalizers": [FINALIZER],
                "annotations": shape.annotations(&name),
            }});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&metadata))
                .await
                .expect("floor intent patch failed");
        }
        let request = CreateConfigRequest {
            name: name.clone(),
            config: document(0),
            workspace_id: None,
            is_default: None,
        };
        let created = client
            .configs()
            .create(&request)
            .await
            .expect("floor POST failed");
        let status = json!({"status": shape.status(generation, created)});
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .expect("floor status patch failed");
    }
}

/// What a floor writes: the least a crash-safe client records (default), or, with
/// `BENCH_FLOOR_SHAPE=operator`, what aigw's own writes leave on a Config (its create-intent and
/// installation annotations, a status of three kstatus conditions, the settled intent, a history
/// entry and the installation), written the floor's way (two merge patches). A probe of what the
/// objects' size costs the control plane, apart from how aigw writes them.
/// `BENCH_FLOOR_SHAPE=operator-metadata` writes aigw's annotations and the least status,
/// `operator-status` the least annotation and aigw's status: which of the two costs what.
/// `BENCH_FLOOR_SHAPE=design` writes the least annotation and only the status DESIGN.md requires
/// of every Config (`observedGeneration`, `Ready`, `Reconciling` and `Stalled`, `lastAppliedAt`,
/// a `history` entry), without aigw's own bookkeeping or messages: what any operator honouring
/// that contract writes.
#[derive(Clone, Copy)]
enum FloorShape {
    Least,
    Design,
    Operator,
    OperatorMetadata,
    OperatorStatus,
}

impl FloorShape {
    fn from_env() -> Self {
        match std::env::var("BENCH_FLOOR_SHAPE").as_deref() {
            Ok("operator") => Self::Operator,
            Ok("operator-metadata") => Self::OperatorMetadata,
            Ok("operator-status") => Self::OperatorStatus,
            Ok("design") => Self::Design,
            _ => Self::Least,
        }
    }

    fn annotations(self, name: &str) -> Value {
        match self {
            Self::Least | Self::Design | Self::OperatorStatus => {
                let intent = json!({"name": name, "at": now_seconds()}).to_string();
                json!({CREATE_INTENT_ANNOTATION: intent})
            }
            Self::Operator | Self::OperatorMetadata => {
                let intent = json!({
                    "pendingCreate": now_seconds(),
                    "createAttempt": {
                        "name": name,
                        "bodyHash": format!("hmac-sha256:{}", "0f".repeat(32)),
                        "intent": Self::intent_id(name),
                    },
                });
                json!({
                    CREATE_INTENT_ANNOTATION: intent.to_string(),
                    "aigw.io/installation": "bench-floor/aigw",
                })
            }
        }
    }

    fn status(self, generation: i64, created: ConfigCreated) -> Value {
        let mut status = json!({
            "observedGeneration": generation,
            "id": created.id, "slug": created.slug, "versionId": created.version_id,
            "conditions": [condition("Ready", "True", generation)],
        });
        if let Self::Design = self {
            let (now, version) = (now_seconds(), status["versionId"].clone());
            status["conditions"] = json!([
                condition("Ready", "True", generation),
                condition("Reconciling", "False", generation),
                condition("Stalled", "False", generation),
            ]);
            status["history"] =
                json!([{"appliedAt": now, "generation": generation, "versionId": version}]);
            status["lastAppliedAt"] = json!(now);
        }
        if let Self::Operator | Self::OperatorStatus = self {
            let (now, version) = (now_seconds(), status["versionId"].clone());
            let quiet = |type_: &str| {
                let mut c = condition(type_, "False", generation);
                c["reason"] = json!("Reconciled");
                c
            };
            let mut ready = condition("Ready", "True", generation);
            ready["reason"] = json!("Reconciled");
            ready["message"] = json!("Config is in sync with the management API");
            status["conditions"] = json!([ready, quiet("Reconciling"), quiet("Stalled")]);
            status["createSettled"] = json!(Self::intent_id(&created.id));
            status["history"] =
                json!([{"appliedAt": now, "generation": generation, "versionId": version}]);
            status["installation"] = json!("bench-floor/aigw");
            status["lastAppliedAt"] = json!(now);
        }
        status
    }

    /// A UUID-shaped id, as aigw's intents carry.
    fn intent_id(seed: &str) -> String {
        let n = seed
            .bytes()
            .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
        format!(
            "{:08x}-0000-4000-8000-{:012x}",
            n >> 32,
            n & 0xffff_ffff_ffff
        )
    }
}

/// The real operator process at the issue's flags: rollout, edits, then a restart with default
/// flags and the steady-state window.
async fn run_operator(
    opts: &Opts,
    kube: &kube::Client,
    emulator: &Emulator,
    token_file: &std::path::Path,
) -> (Value, Value, Value) {
    let ns = namespace(kube, "bench-aigw").await;
    let api: Api<Config> = Api::namespaced(kube.clone(), &ns);
    let tracker = Tracker::watch(api.clone());
    let (mut operator, aigw) = rollout(opts, emulator, token_file, (&ns, &api), &tracker).await;
    eprintln!("{}", serde_json::to_string(&aigw).unwrap_or_default());
    eprintln!("== {} edits, one at a time", opts.edits);
    let edits = edit_latencies(opts, &api, &tracker).await;
    eprintln!("{edits}");
    operator.kill().await;
    eprintln!(
        "== restart with default flags, {} s window",
        opts.steady.as_secs()
    );
    let steady = steady_state(opts, emulator, token_file, &ns, &api, &tracker).await;
    (aigw, edits, steady)
}

/// The operator at the issue's flags, started on the empty namespace `ns`, and its live rollout of
/// N Configs the bench creates meanwhile: the running operator and the rollout's figures.
async fn rollout(
    opts: &Opts,
    emulator: &Emulator,
    token_file: &std::path::Path,
    (ns, api): (&str, &Api<Config>),
    tracker: &Tracker,
) -> (Operator, Value) {
    let operator = Operator::rolling_out(opts, emulator, token_file, ns, "operator-rollout").await;
    let window = Window::open(emulator).await;
    let t0 = Instant::now();
    let created = create_all(api, opts.n, None).await;
    let rollout = tracker.wait_all_ready(opts.n, t0).await;
    let mut aigw = window.figures(rollout, opts.n).await;
    let reconciles = operator.reconciles().await;
    let proc_stats = operator.proc_stats();
    aigw.extend(as_map(json!({
        "create_seconds": round(created.as_secs_f64(), 2),
        "phases": tracker.phases(t0),
        "reconciles": reconciles,
        "reconciles_per_resource": round(reconciles / opts.n as f64, 2),
        "reconcile_mean_ms": operator.reconcile_mean_ms().await,
        "management_api_mean_ms": operator.api_request_mean_ms().await,
        "peak_rss_mib": proc_stats.0,
        "cpu_seconds": proc_stats.1,
    })));
    let aigw = Value::Object(aigw);
    (operator, aigw)
}

/// The floor on a backlog: the N Configs exist before it starts; the clock runs from its first
/// (paged) list to the last Ready.
async fn run_floor_backlog(
    opts: &Opts,
    kube: &kube::Client,
    emulator: &Emulator,
    floor: Floor,
) -> Value {
    let ns = namespace(kube, &floor.namespace(true)).await;
    let api: Api<Config> = Api::namespaced(kube.clone(), &ns);
    create_all(&api, opts.n, None).await;
    let tracker = Tracker::watch(api.clone());
    let window = Window::open(emulator).await;
    let client = emulator.client();
    let t0 = Instant::now();
    let (tx, workers) = floor_pool(|rx| floor_worker(api.clone(), client.clone(), rx, floor));
    let mut params = kube::api::ListParams::default().limit(500);
    loop {
        let page = api.list(&params).await.expect("the floor's list failed");
        for config in &page.items {
            let _ = tx.send(Made::of(config));
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }
    drop(tx);
    let rollout = tracker.wait_all_ready(opts.n, t0).await;
    workers.join().await;
    Value::Object(window.figures(rollout, opts.n).await)
}

/// The operator on a backlog: the N Configs exist before it starts, at the rollout's flags; the
/// clock runs from its start to the last Ready.
async fn run_operator_backlog(
    opts: &Opts,
    kube: &kube::Client,
    emulator: &Emulator,
    token_file: &std::path::Path,
) -> Value {
    let ns = namespace(kube, "bench-aigw-backlog").await;
    let api: Api<Config> = Api::namespaced(kube.clone(), &ns);
    create_all(&api, opts.n, None).await;
    let tracker = Tracker::watch(api.clone());
    let window = Window::open(emulator).await;
    let t0 = Instant::now();
    let operator = Operator::rolling_out(opts, emulator, token_file, &ns, "operator-backlog").await;
    let readyz = t0.elapsed();
    let rollout = tracker.wait_all_ready(opts.n, t0).await;
    let mut figures = window.figures(rollout, opts.n).await;
    let reconciles = operator.reconciles().await;
    let (rss, cpu) = operator.proc_stats();
    figures.extend(as_map(json!({
        "readyz_after_start_seconds": round(readyz.as_secs_f64(), 2),
        "reconciles": reconciles,
        "reconciles_per_resource": round(reconciles / opts.n as f64, 2),
        "peak_rss_mib": rss,
        "cpu_seconds": cpu,
    })));
    Value::Object(figures)
}

/// The rollout's flags: the issue's baseline concurrency and API budget.
fn fast_flags() -> [String; 4] {
    [
        "--concurrency",
        &CONCURRENCY.to_string(),
        "--api-qps",
        API_QPS,
    ]
    .map(String::from)
}

/// Creates `c-00000`… with [`CREATORS`] requests in flight; each goes to `tx` as soon as it
/// exists. The time it took.
async fn create_all(
    api: &Api<Config>,
    n: usize,
    tx: Option<mpsc::UnboundedSender<Made>>,
) -> Duration {
    let t0 = Instant::now();
    futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            let tx = tx.clone();
            async move {
                let name = format!("c-{i:05}");
                let object: Config = serde_json::from_value(json!({
                    "apiVersion": "aigw.io/v1alpha1", "kind": "Config",
                    "metadata": {"name": name},
                    "spec": {"name": format!("bench {i}"), "config": document(i)},
                }))
                .expect("a Config");
                let created = api
                    .create(&PostParams::default(), &object)
                    .await
                    .expect("creating a Config failed");
                if let Some(tx) = tx {
                    let _ = tx.send(Made::of(&created));
                }
            }
        })
        .buffer_unordered(CREATORS)
        .collect::<Vec<()>>()
        .await;
    t0.elapsed()
}

fn document(i: usize) -> Value {
    json!({"retry": {"attempts": 3}, "targets": [{"provider": "@openai", "virtual_key": format!("vk-{i}")}]})
}

// ---------------------------------------------------------------------------------------------
// Edits and the steady state

/// One spec edit at a time on configs spread over the N; milliseconds from the PATCH until the
/// watch shows a new `status.versionId`.
async fn edit_latencies(opts: &Opts, api: &Api<Config>, tracker: &Tracker) -> Value {
    let mut samples = Vec::new();
    for k in 0..opts.edits {
        let name = format!("c-{:05}", k * opts.n / opts.edits.max(1));
        if let Some(ms) = edit_once(api, tracker, &name, 100 + k, Duration::from_secs(60)).await {
            samples.push(ms);
        }
    }
    percentiles(samples, opts.edits)
}

/// Patches `spec.config.retry.attempts` to `attempts` and waits for a new `versionId`.
async fn edit_once(
    api: &Api<Config>,
    tracker: &Tracker,
    name: &str,
    attempts: usize,
    timeout: Duration,
) -> Option<f64> {
    let old = tracker.version(name);
    let patch = json!({"spec": {"config": {"retry": {"attempts": attempts}}}});
    let t0 = Instant::now();
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("editing a Config failed");
    let applied = tracker
        .wait_for(timeout, |seen| {
            seen.get(name)
                .is_some_and(|s| s.version.is_some() && s.version != old)
        })
        .await;
    applied.then(|| round(t0.elapsed().as_secs_f64() * 1000.0, 1))
}

fn percentiles(mut samples: Vec<f64>, attempted: usize) -> Value {
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| {
        let idx = ((q * samples.len() as f64).ceil() as usize).clamp(1, samples.len().max(1)) - 1;
        samples.get(idx).copied()
    };
    json!({
        "edits": attempted, "applied": samples.len(),
        "p50": at(0.50), "p99": at(0.99), "max": samples.last(),
    })
}

/// Restarts the operator with default flags and samples, once a second for the window,
/// management-API calls and apiserver writes and GETs. One edit is made 2 s in, to see how long a
/// user's change waits behind the restart's re-reads.
async fn steady_state(
    opts: &Opts,
    emulator: &Emulator,
    token_file: &std::path::Path,
    ns: &str,
    api: &Api<Config>,
    tracker: &Tracker,
) -> Value {
    emulator.reset_stats().await;
    let mut previous = (apiserver_snapshot().await, 0.0);
    let started = Instant::now();
    let mut operator =
        Operator::start(opts, emulator, token_file, ns, &[], "operator-steady").await;
    let ready_after = started.elapsed();
    let t0 = Instant::now();
    let probe = {
        let (api, tracker) = (api.clone(), tracker.clone());
        let timeout = opts.steady + Duration::from_secs(5);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(2)).await;
            edit_once(&api, &tracker, "c-00000", 999, timeout).await
        })
    };
    let mut seconds: Vec<(f64, f64, f64, f64)> = Vec::new();
    let mut total = BTreeMap::new();
    // The first second also holds the start-up (CRD check, initial lists) until `/readyz`.
    let mut last = started;
    while t0.elapsed() < opts.steady {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = (
            apiserver_snapshot().await,
            total_calls(&emulator.stats().await),
        );
        let dt = last.elapsed().as_secs_f64();
        last = Instant::now();
        let d = delta(&previous.0, &now.0);
        let (writes, gets) = writes_and_gets(&d);
        seconds.push((dt, now.1 - previous.1, writes, gets));
        for (key, value) in d {
            *total.entry(key).or_insert(0.0) += value;
        }
        previous = now;
    }
    // The window ends with the last sample, before waiting for the probe edit.
    let window = started.elapsed().as_secs_f64();
    let by_endpoint = emulator.stats().await["requests"].clone();
    let (rss, cpu) = operator.proc_stats();
    let reconciles = operator.reconciles().await;
    let edit_ms = probe.await.ok().flatten();
    operator.kill().await;
    json!({
        "flags": "defaults (--concurrency 4 --api-qps 10 --drift-interval 10m) --leader-elect=false",
        "window_seconds": round(window, 1),
        "readyz_after_start_seconds": round(ready_after.as_secs_f64(), 2),
        "management_api": burst(&seconds, |s| s.1, window),
        "management_api_by_endpoint": by_endpoint,
        "apiserver_writes": burst(&seconds, |s| s.2, window),
        "apiserver_gets": burst(&seconds, |s| s.3, window),
        "apiserver_by_request": round_map(&without_watches(&total)),
        "bench_writes_included": "1 PATCH configs (the probe edit)",
        "edit_2s_after_restart_ms": edit_ms,
        "reconciles": reconciles,
        "peak_rss_mib": rss,
        "cpu_seconds": cpu,
    })
}

/// Total, mean per second, and the largest one-second rate against that mean.
fn burst(
    seconds: &[(f64, f64, f64, f64)],
    pick: impl Fn(&(f64, f64, f64, f64)) -> f64,
    window: f64,
) -> Value {
    let total: f64 = seconds.iter().map(&pick).sum();
    let max = seconds
        .iter()
        .map(|s| pick(s) / s.0.max(1e-3))
        .fold(0.0, f64::max);
    let mean = total / window.max(1e-3);
    json!({
        "total": round(total, 0),
        "mean_per_s": round(mean, 2),
        "max_1s": round(max, 1),
        "max_over_mean": if mean > 0.0 { Some(round(max / mean, 1)) } else { None },
    })
}

// ---------------------------------------------------------------------------------------------
// Watching readiness and versions

#[derive(Clone, Debug)]
struct Seen {
    ready: bool,
    version: Option<String>,
    /// When the watch first showed the Config (its creation, give or take the watch's delay).
    first: Instant,
    /// When it first showed the finalizer: the intent write (or the floor's) came through.
    claimed: Option<Instant>,
    /// When it first showed it Ready.
    ready_at: Option<Instant>,
}

/// What a watch on the namespace's Configs last showed, and a tick on every change.
#[derive(Clone)]
struct Tracker {
    seen: Arc<Mutex<HashMap<String, Seen>>>,
    tick: watch::Receiver<u64>,
}

impl Tracker {
    fn watch(api: Api<Config>) -> Self {
        let seen = Arc::new(Mutex::new(HashMap::new()));
        let (tx, tick) = watch::channel(0u64);
        let map = seen.clone();
        tokio::spawn(async move {
            let mut stream = watcher(api, watcher::Config::default())
                .default_backoff()
                .applied_objects()
                .boxed();
            while let Ok(Some(config)) = stream.try_next().await {
                let name = config.metadata.name.clone().unwrap_or_default();
                let status = config.status.as_ref();
                let generation = config.metadata.generation;
                let ready = status.is_some_and(|s| {
                    s.conditions.iter().any(|c| {
                        c.type_ == "Ready"
                            && c.status == "True"
                            && c.observed_generation == generation
                    })
                });
                let version = status.and_then(|s| s.version_id.clone());
                let finalized = !config
                    .metadata
                    .finalizers
                    .as_ref()
                    .is_none_or(Vec::is_empty);
                let now = Instant::now();
                let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
                let seen = map.entry(name).or_insert_with(|| Seen {
                    ready,
                    version: None,
                    first: now,
                    claimed: None,
                    ready_at: None,
                });
                seen.ready = ready;
                seen.version = version;
                if finalized && seen.claimed.is_none() {
                    seen.claimed = Some(now);
                }
                if ready && seen.ready_at.is_none() {
                    seen.ready_at = Some(now);
                }
                drop(map);
                tx.send_modify(|t| *t += 1);
            }
        });
        Self { seen, tick }
    }

    fn version(&self, name: &str) -> Option<String> {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.get(name).and_then(|s| s.version.clone())
    }

    /// Waits until `done` holds for what the watch shows; false after `timeout`.
    async fn wait_for(
        &self,
        timeout: Duration,
        done: impl Fn(&HashMap<String, Seen>) -> bool,
    ) -> bool {
        let mut tick = self.tick.clone();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if done(&self.seen.lock().unwrap_or_else(|e| e.into_inner())) {
                return true;
            }
            match tokio::time::timeout_at(deadline, tick.changed()).await {
                Ok(Ok(())) => {}
                _ => return false,
            }
        }
    }

    /// Where a rollout's time went, per Config, from what the watch showed: from its first
    /// sight to its finalizer (the watch's and the queue's delay, then the intent write), from
    /// the finalizer to Ready (the POST and the status write), and from first sight to Ready;
    /// and how many were first seen and how many became Ready in each 10 s since `t0`.
    fn phases(&self, t0: Instant) -> Value {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let ms =
            |from: Instant, to: Instant| to.saturating_duration_since(from).as_secs_f64() * 1e3;
        let spread = |mut samples: Vec<f64>| {
            samples.sort_by(f64::total_cmp);
            let at = |q: f64| {
                let last = samples.len().max(1);
                let idx = ((q * samples.len() as f64).ceil() as usize).clamp(1, last) - 1;
                samples.get(idx).map(|v| round(*v, 1))
            };
            json!({"n": samples.len(), "p10": at(0.1), "p50": at(0.5), "p90": at(0.9), "p99": at(0.99)})
        };
        let to_claim = seen.values().filter_map(|s| Some(ms(s.first, s.claimed?)));
        let claim_to_ready = seen
            .values()
            .filter_map(|s| Some(ms(s.claimed?, s.ready_at?)));
        let to_ready = seen.values().filter_map(|s| Some(ms(s.first, s.ready_at?)));
        let per_10s = |at: &dyn Fn(&Seen) -> Option<Instant>| {
            let mut windows: Vec<u64> = Vec::new();
            for s in seen.values() {
                let Some(when) = at(s) else { continue };
                let window = (when.saturating_duration_since(t0).as_secs() / 10) as usize;
                if windows.len() <= window {
                    windows.resize(window + 1, 0);
                }
                windows[window] += 1;
            }
            windows
        };
        json!({
            "ms_first_seen_to_finalizer": spread(to_claim.collect()),
            "ms_finalizer_to_ready": spread(claim_to_ready.collect()),
            "ms_first_seen_to_ready": spread(to_ready.collect()),
            "first_seen_per_10s": per_10s(&|s| Some(s.first)),
            "ready_per_10s": per_10s(&|s| s.ready_at),
        })
    }

    /// Time from `t0` until all `n` are Ready for their generation (panics after
    /// [`rollout_limit`]).
    async fn wait_all_ready(&self, n: usize, t0: Instant) -> Duration {
        let all = self
            .wait_for(rollout_limit(), |seen| {
                seen.values().filter(|s| s.ready).count() >= n
            })
            .await;
        assert!(
            all,
            "not all {n} Configs became Ready within {:?}",
            rollout_limit()
        );
        t0.elapsed()
    }
}

// ---------------------------------------------------------------------------------------------
// Processes: the emulator and the operator

struct Emulator {
    child: Child,
    url: String,
    http: reqwest::Client,
}

impl Emulator {
    async fn start(opts: &Opts, token_file: &std::path::Path) -> Self {
        let log_path = opts.out.join("emulator.log");
        let log = std::fs::File::create(&log_path).expect("emulator log");
        // The kernel picks the port at the bind (a port picked here and handed over could be
        // taken in between); the emulator says which in its log.
        let child = Command::new(&opts.bin)
            .args(["emulator", "--listen", "127.0.0.1:0"])
            .arg("--token-file")
            .arg(token_file)
            .args(["--latency", LATENCY])
            .env("RUST_LOG", "warn,aigw::cli::emulator=info")
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .expect("cannot start aigw emulator");
        let addr =
            support::cli::said_addr(&log_path, "emulator listening", Duration::from_secs(30)).await;
        let emulator = Self {
            child,
            url: format!("http://{addr}"),
            http: reqwest::Client::new(),
        };
        let up = answers_within(&emulator.http, &emulator.stats_url(), 30).await;
        assert!(up, "the emulator did not answer within 30 s");
        emulator
    }

    fn stats_url(&self) -> String {
        format!("{}/_emulator/stats", self.url)
    }

    /// A management-API client for the floor, with no rate limit in the way.
    fn client(&self) -> Client {
        let config = ClientConfig::new(
            self.url.clone(),
            format!("{}/v1", self.url),
            Arc::new(StaticToken::new(TOKEN)),
        )
        .rate_limit(1000.0, 2000);
        Client::new(config).expect("a management-API client")
    }

    async fn stats(&self) -> Value {
        let response = self.http.get(self.stats_url()).send().await;
        response
            .expect("emulator stats")
            .json()
            .await
            .expect("stats JSON")
    }

    /// The emulator's default workspace (`GET /_emulator/state`, while it is still empty).
    async fn default_workspace(&self) -> String {
        let url = format!("{}/_emulator/state", self.url);
        let state: Value = self
            .http
            .get(url)
            .send()
            .await
            .expect("emulator state")
            .json()
            .await
            .expect("state JSON");
        let id = state["default_workspace_id"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(!id.is_empty(), "the emulator names no default workspace");
        id
    }

    async fn reset_stats(&self) {
        self.http
            .delete(self.stats_url())
            .send()
            .await
            .expect("resetting emulator stats");
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

struct Operator {
    child: Child,
    pid: u32,
    metrics: String,
    /// Run under heaptrack (`BENCH_HEAPTRACK`): stopped with SIGINT so the profile is written.
    profiled: bool,
}

impl Operator {
    /// [`Operator::start`] at the rollout's flags ([`fast_flags`]).
    async fn rolling_out(
        opts: &Opts,
        emulator: &Emulator,
        token_file: &std::path::Path,
        ns: &str,
        log_name: &str,
    ) -> Self {
        Self::start(opts, emulator, token_file, ns, &fast_flags(), log_name).await
    }

    /// Starts `aigw operator` on the one namespace with `extra` flags and waits for `/readyz`.
    async fn start(
        opts: &Opts,
        emulator: &Emulator,
        token_file: &std::path::Path,
        ns: &str,
        extra: &[String],
        log_name: &str,
    ) -> Self {
        let log = opts.out.join(format!("{log_name}-{}.log", opts.n));
        // BENCH_HEAPTRACK=DIR profiles the operator of the steady state after the restart with
        // heaptrack (DIR/steady-N.zst; its RSS figures are the operator's under heaptrack).
        let heaptrack = std::env::var("BENCH_HEAPTRACK")
            .ok()
            .filter(|_| log_name == "operator-steady");
        // The operator holds the chart's RBAC (its `watchNamespaces` form for the one namespace),
        // impersonated through a kubeconfig of its own, never the bench's admin.
        let admin = kube::Client::try_default()
            .await
            .expect("a client of the bench's control plane (KUBECONFIG)");
        let kubeconfig = operator_kubeconfig(&admin, ns, &opts.out).await;
        let mut args: Vec<String> = ["--namespace", ns, "--cluster-selector"]
            .map(String::from)
            .to_vec();
        args.push(format!("aigw-test/env={ns}"));
        args.extend(["--leader-elect=false", "--leader-election-namespace", ns].map(String::from));
        args.extend(extra.iter().cloned());
        // `BENCH_OPERATOR_FLAGS`: more flags for every operator the bench starts (a probe).
        let probe = std::env::var("BENCH_OPERATOR_FLAGS").unwrap_or_default();
        args.extend(probe.split_whitespace().map(String::from));
        let command = operator_command(opts, heaptrack.as_deref(), "steady");
        Self::launch(
            command,
            emulator,
            token_file,
            &kubeconfig,
            &args,
            &log,
            heaptrack.is_some(),
        )
        .await
    }

    /// Runs `command operator` against the emulator with `args` (its scope: namespaces, the
    /// Lease, flags) under `kubeconfig`, logging to `log`, and waits for `/readyz`. Its metrics
    /// port is the kernel's pick at the bind, read from the log.
    async fn launch(
        mut command: Command,
        emulator: &Emulator,
        token_file: &std::path::Path,
        kubeconfig: &std::path::Path,
        args: &[String],
        log: &std::path::Path,
        profiled: bool,
    ) -> Self {
        let file = std::fs::File::create(log).expect("operator log");
        let program = operator_bin(&command);
        let child = command
            .arg("operator")
            .args(["--management-url", &emulator.url])
            .args(["--gateway-url", &format!("{}/v1", emulator.url)])
            .arg("--token-file")
            .arg(token_file)
            .args(["--metrics-addr", "127.0.0.1:0"])
            // The scope; the Lease and the hash key Secret go where the chart's RBAC lets them.
            .args(args)
            .env("KUBECONFIG", kubeconfig)
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(file)
            .kill_on_drop(true)
            .spawn()
            .expect("cannot start aigw operator");
        let started = child.id().expect("the operator has a pid");
        let addr = support::cli::said_addr(
            log,
            "serving /metrics, /healthz and /readyz",
            Duration::from_secs(120),
        )
        .await;
        // Under heaptrack the child is its script: the operator is the script's descendant that
        // runs the binary (its RSS and CPU are what the figures report; it is what is signalled).
        let pid = match profiled {
            true => descendant_running(started, &program).expect("the operator under heaptrack"),
            false => started,
        };
        let operator = Self {
            child,
            pid,
            metrics: format!("http://{addr}"),
            profiled,
        };
        let url = format!("{}/readyz", operator.metrics);
        let ready = answers_within(&reqwest::Client::new(), &url, 120).await;
        assert!(ready, "the operator was not ready within 120 s");
        operator
    }

    /// What its `/metrics` answers (empty when the body cannot be read).
    async fn metrics_text(&self) -> String {
        support::metrics_text(&self.metrics)
            .await
            .unwrap_or_default()
    }

    /// Sum of `aigw_reconciles_total` over kinds and results, `throttled` left out.
    async fn reconciles(&self) -> f64 {
        // Those sent to their Connection's line before they started are not reconciles.
        let started: String = (self.metrics_text().await.lines())
            .filter(|l| !l.contains(r#"result="throttled""#))
            .map(|l| format!("{l}\n"))
            .collect();
        support::metric_sum(&started, "aigw_reconciles_total")
    }

    /// The mean time of one reconcile so far, in milliseconds (`aigw_reconcile_duration_seconds`,
    /// every kind and result).
    async fn reconcile_mean_ms(&self) -> f64 {
        self.mean_ms("aigw_reconcile_duration_seconds").await
    }

    /// The mean time of one management-API request so far as the operator saw it, in
    /// milliseconds (`aigw_api_request_duration_seconds`, every endpoint).
    async fn api_request_mean_ms(&self) -> f64 {
        self.mean_ms("aigw_api_request_duration_seconds").await
    }

    /// A histogram's mean so far in milliseconds, over all its labels.
    async fn mean_ms(&self, histogram: &str) -> f64 {
        let text = self.metrics_text().await;
        let count = support::metric_sum(&text, &format!("{histogram}_count"));
        round(
            support::metric_sum(&text, &format!("{histogram}_sum")) * 1000.0 / count,
            1,
        )
    }

    /// Peak RSS (MiB) and CPU seconds so far.
    fn proc_stats(&self) -> (f64, f64) {
        proc_stats(self.pid)
    }

    async fn kill(&mut self) {
        if self.profiled {
            // heaptrack writes its profile once the program exits by itself.
            self.signal("-INT").await;
            let _ = tokio::time::timeout(Duration::from_secs(60), self.child.wait()).await;
        }
        let _ = self.child.kill().await;
    }

    /// Sends the operator itself (not heaptrack's script) `signal` (`-INT`, `-TERM`).
    async fn signal(&self, signal: &str) {
        let _ = Command::new("kill")
            .args([signal, &self.pid.to_string()])
            .status()
            .await;
    }
}

/// The operator binary, under heaptrack writing `DIR/NAME-N.zst` when `heaptrack` is `DIR`.
fn operator_command(opts: &Opts, heaptrack: Option<&str>, name: &str) -> Command {
    match heaptrack {
        Some(dir) => {
            let mut command = Command::new("heaptrack");
            command
                .args(["-o", &format!("{dir}/{name}-{}", opts.n)])
                .arg(&opts.bin);
            command
        }
        None => Command::new(&opts.bin),
    }
}

/// Peak RSS (MiB, `VmHWM`) and CPU seconds (user + system) of a process so far.
fn proc_stats(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the `(comm)`: state is field 3, utime 14 and stime 15.
    let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i)?.parse::<f64>().ok())
        .sum();
    (
        round(status_kib(&status, "VmHWM:") / 1024.0, 1),
        round(ticks / clock_ticks(), 2),
    )
}

/// A `kB` line of `/proc/PID/status`.
fn status_kib(status: &str, field: &str) -> f64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// Whether a GET of `url` succeeds within `seconds`, asked again until then.
async fn answers_within(http: &reqwest::Client, url: &str, seconds: u64) -> bool {
    let answered = support::wait_until(Duration::from_secs(seconds), || async {
        let response = http.get(url).send().await.ok()?;
        response.status().is_success().then_some(())
    });
    answered.await.is_some()
}

/// The operator binary of [`operator_command`]'s `command`: its program, or under heaptrack
/// its last argument (`heaptrack -o OUT BIN`).
fn operator_bin(command: &Command) -> std::path::PathBuf {
    let std = command.as_std();
    let last = std.get_args().last().map(std::path::PathBuf::from);
    last.unwrap_or_else(|| std.get_program().into())
}

/// The pid of `root` or of a descendant of it whose executable is `program`, once one runs
/// (within 30 s).
fn descendant_running(root: u32, program: &std::path::Path) -> Option<u32> {
    let program = std::fs::canonicalize(program).ok()?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let mut parents = std::collections::HashMap::<u32, Vec<u32>>::new();
        for entry in std::fs::read_dir("/proc").ok()?.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // The parent is the second field after the `(comm)`.
            let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
            if let Some(ppid) = after.split_whitespace().nth(1).and_then(|p| p.parse().ok()) {
                parents.entry(ppid).or_default().push(pid);
            }
        }
        if std::fs::read_link(format!("/proc/{root}/exe"))
            .ok()
            .as_deref()
            == Some(&program)
        {
            return Some(root);
        }
        let mut todo = vec![root];
        while let Some(pid) = todo.pop() {
            for &child in parents.get(&pid).into_iter().flatten() {
                let exe = std::fs::read_link(format!("/proc/{child}/exe")).ok();
                if exe.as_deref() == Some(program.as_path()) {
                    return Some(child);
                }
                todo.push(child);
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}

async fn namespace(kube: &kube::Client, prefix: &str) -> String {
    let name = format!(
        "{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..6]
    );
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(kube.clone());
    let ns = serde_json::from_value(json!({"metadata": {"name": name}})).expect("a Namespace");
    api.create(&PostParams::default(), &ns)
        .await
        .expect("creating the namespace failed");
    name
}

// ---------------------------------------------------------------------------------------------
// Counting: apiserver_request_total and the emulator's stats

/// One measured run: it opens with the emulator's counters reset and the apiserver's read.
struct Window<'a> {
    emulator: &'a Emulator,
    before: BTreeMap<String, f64>,
    latency: Latency,
    cpu: Cpu,
}

/// CPU seconds spent so far: by the control plane (kube-apiserver and etcd, one process), by this
/// bench process (the creates, a floor's workers, the tracker's watch), and by the whole machine
/// (every process, from `/proc/stat`). On a machine whose cores the control plane saturates, a
/// side's rollout time follows what the machine spends per object, so a run reports where that
/// went.
#[derive(Clone, Copy)]
struct Cpu {
    control_plane: f64,
    bench: f64,
    machine: f64,
}

impl Cpu {
    fn now() -> Self {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        // user nice system idle iowait irq softirq steal: busy is all but idle and iowait.
        let busy: f64 = stat
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("cpu "))
            .map(|rest| {
                let ticks: Vec<f64> = rest
                    .split_whitespace()
                    .filter_map(|t| t.parse().ok())
                    .collect();
                [0, 1, 2, 5, 6].iter().filter_map(|&i| ticks.get(i)).sum()
            })
            .unwrap_or(0.0);
        Self {
            control_plane: ControlPlane::stats().cpu_seconds,
            bench: proc_stats(std::process::id()).1,
            machine: busy / clock_ticks(),
        }
    }

    /// Milliseconds of CPU per object (of `n`) since `self`.
    fn per_object_since(self, n: usize) -> Value {
        let now = Self::now();
        let ms = |from: f64, to: f64| round((to - from) * 1000.0 / n as f64, 2);
        json!({
            "control_plane": ms(self.control_plane, now.control_plane),
            "bench_process": ms(self.bench, now.bench),
            "machine": ms(self.machine, now.machine),
        })
    }
}

impl<'a> Window<'a> {
    async fn open(emulator: &'a Emulator) -> Self {
        emulator.reset_stats().await;
        let text = apiserver_metrics().await;
        let before = request_totals(&text);
        let latency = Latency::read(&text);
        Self {
            emulator,
            before,
            latency,
            cpu: Cpu::now(),
        }
    }

    /// The apiserver's requests since the window opened.
    async fn apiserver(&self) -> BTreeMap<String, f64> {
        delta(&self.before, &apiserver_snapshot().await)
    }

    /// What every run reports as it ends now: the rollout's time and the calls per object (of
    /// `n`) to the apiserver and to the management API, and the CPU spent per object ([`Cpu`]). A
    /// run adds its own figures.
    async fn figures(&self, rollout: Duration, n: usize) -> serde_json::Map<String, Value> {
        let cpu = self.cpu.per_object_since(n);
        let text = apiserver_metrics().await;
        let apiserver = apiserver_figures(&delta(&self.before, &request_totals(&text)), n);
        let mut figures = serde_json::Map::new();
        figures.insert(
            "rollout_seconds".into(),
            json!(round(rollout.as_secs_f64(), 2)),
        );
        figures.insert("apiserver".into(), apiserver);
        // The apiserver's mean time per request the run made about once per object or more.
        let latency = Latency::read(&text).mean_ms_since(&self.latency, n as f64 / 2.0);
        figures.insert("apiserver_mean_ms".into(), json!(latency));
        let management = management_figures(&self.emulator.stats().await, n);
        figures.insert("management_api".into(), management);
        figures.insert("cpu_ms_per_object".into(), cpu);
        figures
    }
}

/// [`CONCURRENCY`] floor workers, `worker(rx)` each, sharing one channel: what the returned
/// sender sends is their work, and dropping it (every clone) ends them.
fn floor_pool<T, F>(
    worker: impl Fn(Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<T>>>) -> F,
) -> (mpsc::UnboundedSender<T>, FloorPool)
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = mpsc::unbounded_channel();
    let rx = Arc::new(tokio::sync::Mutex::new(rx));
    let workers = (0..CONCURRENCY)
        .map(|_| tokio::spawn(worker(rx.clone())))
        .collect();
    (tx, FloorPool(workers))
}

/// The workers of [`floor_pool`].
struct FloorPool(Vec<tokio::task::JoinHandle<()>>);

impl FloorPool {
    /// Waits for every worker to end (its channel closed and drained).
    async fn join(self) {
        for worker in self.0 {
            worker.await.expect("a floor worker panicked");
        }
    }
}

/// `apiserver_request_total` summed by `VERB resource[/subresource]`, with the code appended
/// when it is not 2xx (resource requests only).
async fn apiserver_snapshot() -> BTreeMap<String, f64> {
    request_totals(&apiserver_metrics().await)
}

/// [`apiserver_snapshot`] of a `/metrics` text already read.
fn request_totals(text: &str) -> BTreeMap<String, f64> {
    request_metric(text, "apiserver_request_total")
}

/// The apiserver's `/metrics` text.
async fn apiserver_metrics() -> String {
    let output = Command::new("kubectl")
        .args(["get", "--raw", "/metrics"])
        .output()
        .await
        .expect("kubectl get --raw /metrics");
    assert!(output.status.success(), "kubectl get --raw /metrics failed");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// One per-request metric of the apiserver's `/metrics` text summed by `VERB
/// resource[/subresource]`, with the code appended where the metric has one and it is not 2xx
/// (resource requests only).
fn request_metric(text: &str, metric: &str) -> BTreeMap<String, f64> {
    let label = regex::Regex::new(r#"(\w+)="([^"]*)""#).expect("a regex");
    let prefix = format!("{metric}{{");
    let mut sums = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(prefix.as_str()) else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let labels: HashMap<&str, &str> = label
            .captures_iter(labels)
            .filter_map(|c| Some((c.get(1)?.as_str(), c.get(2)?.as_str())))
            .collect();
        let resource = labels.get("resource").copied().unwrap_or("");
        if resource.is_empty() {
            continue;
        }
        let verb = labels.get("verb").copied().unwrap_or("");
        let mut key = match labels.get("subresource").copied().unwrap_or("") {
            "" => format!("{verb} {resource}"),
            sub => format!("{verb} {resource}/{sub}"),
        };
        // Failed requests (409 conflicts above all) are work too; they are named apart.
        if let Some(code) = labels.get("code").filter(|code| !code.starts_with('2')) {
            key = format!("{key} {code}");
        }
        // A dry run (the operator's probe of the admission policies) stores nothing: named
        // apart, and neither a write nor a GET.
        if labels.get("dry_run").is_some_and(|d| !d.is_empty()) {
            key = format!("dry-run {key}");
        }
        *sums.entry(key).or_insert(0.0) += value.trim().parse::<f64>().unwrap_or(0.0);
    }
    sums
}

/// The apiserver's time per request, `apiserver_request_duration_seconds` (from the request's
/// arrival to its answer, admission and etcd included): its sums and counts by request.
struct Latency {
    seconds: BTreeMap<String, f64>,
    count: BTreeMap<String, f64>,
}

impl Latency {
    /// The sums and counts in the apiserver's `/metrics` `text`.
    fn read(text: &str) -> Self {
        Self {
            seconds: request_metric(text, "apiserver_request_duration_seconds_sum"),
            count: request_metric(text, "apiserver_request_duration_seconds_count"),
        }
    }

    /// The mean in milliseconds of each request the apiserver answered at least `least` times
    /// since `before` (LIST and WATCH left out: a watch lasts as long as it is open).
    fn mean_ms_since(&self, before: &Self, least: f64) -> BTreeMap<String, f64> {
        let seconds = delta(&before.seconds, &self.seconds);
        without_watches(&delta(&before.count, &self.count))
            .into_iter()
            .filter(|(_, count)| *count >= least)
            .filter_map(|(key, count)| {
                Some((key.clone(), round(seconds.get(&key)? * 1000.0 / count, 1)))
            })
            .collect()
    }
}

fn delta(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .filter(|(_, v)| *v > 0.0)
        .collect()
}

/// The bench's own creates (the user's work, not the operator's), by apiserver resource.
const USER_CREATES: [&str; 6] = [
    "POST configs",
    "POST ratelimitspolicies",
    "POST usagelimitspolicies",
    "POST guardrails",
    "POST deployments",
    "POST apikeys",
];

/// Leaves out LIST and WATCH (a constant number per process, not per resource) and the bench's
/// own creates of its objects (the user's work, not the operator's).
fn without_watches(d: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    d.iter()
        .filter(|(k, _)| {
            !k.starts_with("LIST ")
                && !k.starts_with("WATCH ")
                && !USER_CREATES.contains(&k.as_str())
        })
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

fn writes_and_gets(d: &BTreeMap<String, f64>) -> (f64, f64) {
    let counted = without_watches(d);
    let verb_sum = |pred: &dyn Fn(&str) -> bool| -> f64 {
        counted
            .iter()
            .filter(|(k, _)| pred(k.split(' ').next().unwrap_or("")))
            .map(|(_, v)| v)
            .sum()
    };
    (
        verb_sum(&|v| WRITE_VERBS.contains(&v)),
        verb_sum(&|v| v == "GET"),
    )
}

fn apiserver_figures(d: &BTreeMap<String, f64>, n: usize) -> Value {
    let counted = without_watches(d);
    let total: f64 = counted.values().sum();
    let (writes, gets) = writes_and_gets(d);
    let n = n as f64;
    json!({
        "requests_per_resource": round(total / n, 2),
        "writes_per_resource": round(writes / n, 2),
        "gets_per_resource": round(gets / n, 2),
        "by_request": round_map(&counted),
        "not_counted": round_map(&d.iter().filter(|(k, _)| !counted.contains_key(*k)).map(|(k, v)| (k.clone(), *v)).collect()),
    })
}

fn total_calls(stats: &Value) -> f64 {
    stats["requests"]
        .as_object()
        .map(|endpoints| {
            endpoints
                .values()
                .filter_map(Value::as_object)
                .flat_map(|by_status| by_status.values().filter_map(Value::as_f64))
                .sum()
        })
        .unwrap_or(0.0)
}

fn management_figures(stats: &Value, n: usize) -> Value {
    let total = total_calls(stats);
    json!({
        "calls_per_resource": round(total / n as f64, 2),
        "calls": total,
        "by_endpoint": stats["requests"],
    })
}

/// Rounded to `digits` decimals; `+ 0.0` turns the `-0.0` of an empty sum into `0`.
fn round(value: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (value * scale).round() / scale + 0.0
}

/// The fields of a JSON object (`json!({…})` of a run's own figures).
fn as_map(value: Value) -> serde_json::Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => serde_json::Map::new(),
    }
}

fn round_map(map: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    map.iter().map(|(k, v)| (k.clone(), round(*v, 0))).collect()
}
