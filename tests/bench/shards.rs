//! `make bench-scale` with `BENCH_REPLICAS=R` (R > 1): the same backlog of N Configs spread
//! over [`NAMESPACES`] namespaces, rolled out by R operators with `--shards` (each under the
//! chart's sharded RBAC), then all R restarted: per replica its share, peak RSS and CPU, and the
//! rollout time, to set beside `scale-N.json` of one replica. Writes `shards-N-R.json`.

use super::*;

/// How many namespaces the Configs are spread over (the shard key is the namespace).
const NAMESPACES: usize = 24;

/// Creates `c-00000`… round-robin over `namespaces`, [`CREATORS`] at once.
async fn create_spread(kube: &kube::Client, namespaces: &[String], n: usize) -> Duration {
    let t0 = Instant::now();
    futures::stream::iter(0..n)
        .map(|i| {
            let api: Api<Config> = Api::namespaced(kube.clone(), &namespaces[i % namespaces.len()]);
            async move {
                let object: Config = serde_json::from_value(json!({
                    "apiVersion": "aigw.io/v1alpha1", "kind": "Config",
                    "metadata": {"name": format!("c-{i:05}")},
                    "spec": {"name": format!("bench {i}"), "config": document(i)},
                }))
                .expect("a Config");
                api.create(&PostParams::default(), &object)
                    .await
                    .expect("creating a Config failed");
            }
        })
        .buffer_unordered(CREATORS)
        .collect::<Vec<()>>()
        .await;
    t0.elapsed()
}

/// R operators with `--shards` over every namespace, their Leases in the first.
async fn start_shards(
    opts: &Opts,
    emulator: &Emulator,
    token_file: &std::path::Path,
    kubeconfig: &std::path::Path,
    namespaces: &[String],
    replicas: usize,
    phase: &str,
) -> Vec<Operator> {
    let mut args: Vec<String> = namespaces
        .iter()
        .flat_map(|ns| ["--namespace".to_string(), ns.clone()])
        .collect();
    args.extend([
        "--cluster-selector".to_string(),
        format!("aigw-test/env={}", namespaces[0]),
        "--shards=true".to_string(),
        "--leader-election-namespace".to_string(),
        namespaces[0].clone(),
    ]);
    args.extend(fast_flags());
    // `BENCH_SHARD_ARGS`: more operator flags, space-separated (e.g. longer Lease timings).
    if let Ok(extra) = std::env::var("BENCH_SHARD_ARGS") {
        args.extend(extra.split_whitespace().map(str::to_string));
    }
    // BENCH_HEAPTRACK=DIR profiles every replica of the rollout with heaptrack
    // (DIR/shard{r}-rollout-N.zst; build with `--no-default-features`, or jemalloc hides the heap).
    let heaptrack = std::env::var("BENCH_HEAPTRACK")
        .ok()
        .filter(|_| phase == "rollout");
    // Every replica starts at once, as a Deployment's pods do, and is waited for together.
    let logs: Vec<_> = (0..replicas)
        .map(|r| {
            opts.out
                .join(format!("operator-shard{r}-{phase}-{}.log", opts.n))
        })
        .collect();
    let launches = logs.iter().enumerate().map(|(r, log)| {
        let command = operator_command(opts, heaptrack.as_deref(), &format!("shard{r}-{phase}"));
        Operator::launch(
            command,
            emulator,
            token_file,
            kubeconfig,
            &args,
            log,
            heaptrack.is_some(),
        )
    });
    futures::future::join_all(launches).await
}

/// Waits until one of `operators` exits and says which: a replica that cannot renew its Lease
/// stops (a Deployment would restart it; nothing does here), and the rollout would then wait out
/// the bench's whole limit.
async fn first_exit(operators: &mut [Operator]) -> String {
    loop {
        for (r, operator) in operators.iter_mut().enumerate() {
            if let Ok(Some(status)) = operator.child.try_wait() {
                return format!(
                    "replica {r} exited ({status}) during the rollout; its log is operator-shard{r}-rollout-*.log"
                );
            }
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// SIGTERM to every replica (each releases its Lease, so the next ones need not wait for it to
/// lapse), then waits for them to exit.
async fn terminate(operators: Vec<Operator>) {
    for operator in &operators {
        // The operator itself, also under heaptrack (whose script is the child).
        operator.signal("-TERM").await;
    }
    for mut operator in operators {
        let _ = tokio::time::timeout(Duration::from_secs(30), operator.child.wait()).await;
    }
}

/// The Configs each replica reconciles now (`aigw_shard_objects{kind="Config"}`).
async fn share(operator: &Operator) -> f64 {
    let text = operator.metrics_text().await;
    support::metric_sum(&text, r#"aigw_shard_objects{kind="Config"}"#)
}

async fn replica_figures(operators: &[Operator], n: f64) -> Vec<Value> {
    let mut figures = Vec::new();
    for operator in operators {
        let (rss, cpu) = operator.proc_stats();
        figures.push(json!({
            "share": share(operator).await,
            "peak_rss_mib": rss,
            "cpu_seconds": cpu,
            "reconciles_per_resource": round(operator.reconciles().await / n, 2),
        }));
    }
    figures
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bench_shards() {
    let replicas: usize = support::env_or("BENCH_REPLICAS", 3);
    let (opts, kube, token_file, emulator) = setup_with_emulator().await;
    let mut namespaces = Vec::new();
    for _ in 0..NAMESPACES {
        namespaces.push(namespace(&kube, "bench-shard").await);
    }
    let watched: Vec<&str> = namespaces.iter().map(String::as_str).collect();
    let scope = support::chart::Scope::watched(&watched)
        .lease_namespace(&namespaces[0])
        .sharded();
    let kubeconfig = support::chart::install(&kube, &scope)
        .await
        .kubeconfig_file(&opts.out);

    eprintln!(
        "== creating N={} Configs over {NAMESPACES} namespaces",
        opts.n
    );
    let created = create_spread(&kube, &namespaces, opts.n).await;
    let tracker = Tracker::watch(Api::all(kube.clone()));
    emulator.reset_stats().await;
    let before = apiserver_snapshot().await;
    let start = |phase| {
        start_shards(
            &opts,
            &emulator,
            &token_file,
            &kubeconfig,
            &namespaces,
            replicas,
            phase,
        )
    };
    let t0 = Instant::now();
    eprintln!("== {replicas} shards on the backlog");
    let mut operators = start("rollout").await;
    let rollout = tokio::select! {
        rollout = tracker.wait_all_ready(opts.n, t0) => rollout,
        exited = first_exit(&mut operators) => panic!("{exited} (N={})", opts.n),
    };
    let after = apiserver_snapshot().await;
    let n = opts.n as f64;
    let rollout_replicas = replica_figures(&operators, n).await;
    let management = management_figures(&emulator.stats().await, opts.n);
    terminate(operators).await;

    eprintln!(
        "== restart of all {replicas}, {} s window",
        opts.steady.as_secs()
    );
    emulator.reset_stats().await;
    let quiet_from = apiserver_snapshot().await;
    let restarted = start("restart").await;
    tokio::time::sleep(opts.steady).await;
    let restart_replicas = replica_figures(&restarted, n).await;
    let (writes, gets) = writes_and_gets(&delta(&quiet_from, &apiserver_snapshot().await));
    let steady_calls = total_calls(&emulator.stats().await);
    terminate(restarted).await;

    let peak = |figures: &[Value]| {
        figures
            .iter()
            .filter_map(|f| f["peak_rss_mib"].as_f64())
            .fold(0.0, f64::max)
    };
    let report = json!({
        "n": opts.n,
        "replicas": replicas,
        "namespaces": NAMESPACES,
        "build": if cfg!(debug_assertions) { "debug" } else { "release" },
        "create_seconds": round(created.as_secs_f64(), 1),
        "rollout": {
            "rollout_seconds": round(rollout.as_secs_f64(), 1),
            "apiserver": apiserver_figures(&delta(&before, &after), opts.n),
            "management_api": management,
            "replicas": rollout_replicas,
            "max_peak_rss_mib": peak(&rollout_replicas),
        },
        "after_restart": {
            "window_seconds": opts.steady.as_secs(),
            "replicas": restart_replicas,
            "max_peak_rss_mib": peak(&restart_replicas),
            "apiserver_writes": writes,
            "apiserver_gets": gets,
            "management_api_calls": steady_calls,
        },
    });
    write_report(
        &opts,
        &format!("shards-{}-{replicas}.json", opts.n),
        &report,
    );
    drop(emulator);
}
