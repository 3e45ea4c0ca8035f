//! `aigw operator`: run the controllers.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use aigw::api::{self, ClientConfig};
use aigw::controller::runtime::apiserver;
use aigw::controller::runtime::hash_key;
use aigw::controller::runtime::leader::{self, Elector, LeaseSettings};
use aigw::controller::state::claim_guard::ClaimMode;
use aigw::controller::{self, Connections, Context, Leadership, Metrics, Settings};
use anyhow::Context as _;
use clap::builder::BoolishValueParser;

// Two `mut_arg(…, boolish)` calls on different flags, which this lint misreads as repeats.
#[allow(clippy::duplicated_attributes)]
#[derive(clap::Args)]
#[command(mut_arg("leader_elect", boolish), mut_arg("shards", boolish))]
pub struct OperatorArgs {
    /// Root of the management API; `/ai_gw/v2…` and `/ai_gw/admin/v2…` are appended. Defines
    /// the connection named `default`.
    #[arg(long, env = "AIGW_MANAGEMENT_URL", value_name = "URL")]
    management_url: Option<String>,
    /// The gateway address including `/v1`, e.g. http://127.0.0.1:8787/v1. Default: the
    /// management URL plus `/v1`.
    #[arg(long, env = "AIGW_GATEWAY_URL", value_name = "URL")]
    gateway_url: Option<String>,
    /// File holding the bearer token for the default connection.
    #[arg(long, env = "AIGW_TOKEN_FILE", value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Namespace to watch; repeat for several (`AIGW_NAMESPACE`: comma-separated). Default: all
    /// namespaces.
    #[arg(
        long = "namespace",
        env = "AIGW_NAMESPACE",
        value_name = "NS",
        value_delimiter = ','
    )]
    namespaces: Vec<String>,
    /// Label selector of the cluster-scoped objects this installation sees, e.g.
    /// `aigw.io/environment=prod`: the cluster-scoped kinds it reconciles (ClusterGuardrail,
    /// Integration, McpIntegration, SecretReference, Workspace), and the Connections it uses (a resource naming a Connection outside it is another
    /// installation's, left untouched). Default: all.
    #[arg(long, env = "AIGW_CLUSTER_SELECTOR", value_name = "SELECTOR", value_parser = parse_selector)]
    cluster_selector: Option<String>,
    /// The id this installation claims its objects under (the annotation
    /// `aigw.io/installation`): an object claimed by another id is left untouched. Installations
    /// sharing a cluster need different ids; replicas of one installation (and its `--dry-run`)
    /// the same. Default: `<leader-election namespace>/aigw` (the chart renders
    /// `<release namespace>/<release fullname>`).
    #[arg(long, env = "AIGW_INSTALLATION_ID", value_name = "ID", value_parser = parse_installation_id)]
    installation_id: Option<String>,
    /// How a new object is taken for this installation. `auto`: in the metadata write it gets
    /// anyway (the finalizer and create intent before a create) while the admission policy
    /// `aigw-installation-claims` (shipped with the CRDs) guards the `aigw.io/installation`
    /// annotation, by a `status.installation` record first otherwise (checked at start and every
    /// 30 s). `status`: always by the status record, one apiserver write more per new object.
    #[arg(long, env = "AIGW_CLAIMS", value_enum, default_value_t = ClaimMode::Auto, value_name = "MODE")]
    claims: ClaimMode,
    /// Reconciles running at once, per kind, over all its watched namespaces.
    #[arg(long, env = "AIGW_CONCURRENCY", default_value_t = 4, value_name = "N")]
    concurrency: u16,
    /// Requests per second to the management API, shared by every controller (burst is twice this).
    #[arg(long, env = "AIGW_API_QPS", default_value_t = 10.0, value_name = "Q")]
    api_qps: f64,
    /// How often the remote objects are listed to detect and correct remote edits (jittered
    /// ±10 %): one list per Connection and workspace; only objects whose `last_updated_at`
    /// changed, that aigw never read, or that a list did not show are read again.
    #[arg(long, env = "AIGW_DRIFT_INTERVAL", default_value = "10m", value_parser = humantime::parse_duration, value_name = "DUR")]
    drift_interval: Duration,
    /// How often every object is read in full (GET) whatever the lists show: the safety net for
    /// changes a list cannot show. Spread over the interval; grown when the objects cannot be
    /// read within it at the drift share of the QPS.
    #[arg(long, env = "AIGW_FULL_READ_INTERVAL", default_value = "24h", value_parser = humantime::parse_duration, value_name = "DUR")]
    full_read_interval: Duration,
    /// Share of a Connection's QPS the drift reads may use (0 < S ≤ 1); the rest is kept for spec
    /// changes, creates and deletes.
    #[arg(long, env = "AIGW_DRIFT_QPS_SHARE", default_value_t = 0.5, value_parser = parse_share, value_name = "S")]
    drift_qps_share: f64,
    /// The shortest `spec.rotation.interval` this operator rotates at: a shorter one (and, for
    /// an ApiKey, one shorter than its `transitionPeriod`) is raised to it, with a
    /// `RotationIntervalRaised` condition and Warning event. At least 1s.
    #[arg(long, env = "AIGW_MIN_ROTATION_INTERVAL", default_value = "1h", value_parser = parse_min_rotation_interval, value_name = "DUR")]
    min_rotation_interval: Duration,
    /// The least time between two rotations of one resource, whatever asks for them (the
    /// interval, a changed `spec.rotation.trigger`): a later one waits, shown in
    /// `status.rotationHeldUntil`. `0s` spaces nothing.
    #[arg(long, env = "AIGW_ROTATION_SPACING", default_value = "5m", value_parser = humantime::parse_duration, value_name = "DUR")]
    rotation_spacing: Duration,
    /// How long one management-API request may take before it counts as timed out (the
    /// default connection's and every Connection's).
    #[arg(long, env = "AIGW_API_TIMEOUT", default_value = "30s", value_parser = humantime::parse_duration, value_name = "DUR")]
    api_timeout: Duration,
    /// The longest a management-API call may run: after a lost answer (a crash, a timeout,
    /// a reset), a create or rotation is done again only once the call it recorded cannot
    /// still be running. At least `--api-timeout` plus 5s.
    #[arg(long, env = "AIGW_LONGEST_API_CALL", default_value = "60s", value_parser = humantime::parse_duration, value_name = "DUR")]
    longest_api_call: Duration,
    /// How long the API's lists may lag its creates: a create whose answer was lost is taken
    /// for one that made nothing only by a list taken this long after it ended. Raise it for an
    /// API whose lists lag more.
    #[arg(long, env = "AIGW_LIST_SETTLE", default_value = "30s", value_parser = humantime::parse_duration, value_name = "DUR")]
    list_settle: Duration,
    /// Watches listing at once, over every kind and namespace (`0`: any number); the rest wait
    /// their turn. With many `--namespace` watches, or shards handing namespaces over, lists
    /// sent together overload the apiserver (500s, 429s) and leave the caches behind.
    #[arg(long, env = "AIGW_CONCURRENT_LISTS", default_value_t = aigw::controller::runtime::lists::AT_ONCE, value_name = "N")]
    concurrent_lists: usize,
    /// Speak HTTP/1.1 to the apiserver: one connection per watch and per request in flight, as
    /// kube's own client does. By default aigw speaks HTTP/2 where the apiserver offers it (TLS
    /// ALPN), every watch and request a stream of one connection; this is for a proxy or
    /// apiserver that misbehaves with it.
    #[arg(long, env = "AIGW_KUBE_HTTP1")]
    kube_http1: bool,
    /// YAML file with the tenancy grants of the default connection (the one these flags define),
    /// in the shape of a Connection's `spec.grants`: which namespaces may use it, for which
    /// workspaces, and whether they may adopt. Without it, the default connection is open to
    /// every watched namespace, every workspace, and adoption.
    #[arg(long, env = "AIGW_GRANTS_FILE", value_name = "FILE")]
    grants_file: Option<PathBuf>,
    /// The only namespace Connections may read Secrets from (tokens, client credentials,
    /// header values), and where cluster-scoped resources read theirs. Default: the operator's
    /// own namespace (`POD_NAMESPACE`); when that is unknown too, Connections read any
    /// namespace and a cluster-scoped resource naming a Secret stalls (`OperatorSettings`).
    #[arg(long, env = "AIGW_CONNECTION_SECRET_NAMESPACE", value_name = "NS")]
    connection_secret_namespace: Option<String>,
    /// Read everything and write nothing: no management-API write, no status, finalizer or
    /// Secret write, no Lease (it runs beside the real operator). Each write a reconcile reaches
    /// is logged and published as a `WouldCreate`, `WouldUpdate`, `WouldDelete` or `WouldRotate`
    /// event, and counted in `aigw_dry_run_actions_total{kind,action}`.
    #[arg(long, env = "AIGW_DRY_RUN")]
    dry_run: bool,
    /// Hold the leader Lease (`--leader-election-id`) so that of several replicas only one
    /// reconciles (the others stand by with warm caches); `--leader-elect=false` makes this
    /// replica always act.
    #[arg(long, env = "AIGW_LEADER_ELECT", default_value_t = true)]
    leader_elect: bool,
    /// Active-active shards: every replica holds a Lease of its own
    /// (`<leader-election-id>-<identity>` in the leader-election namespace) and the live replicas
    /// split the objects among themselves by namespace (by uid for cluster-scoped kinds). Needs
    /// `--leader-elect`.
    #[arg(long, env = "AIGW_SHARDS", default_value_t = false)]
    shards: bool,
    /// Name of the leader Lease (with `--shards`, the prefix of each replica's Lease). Two
    /// installations that share the leader-election namespace each need their own: with one
    /// Lease, one of them would stand by for as long as the other runs.
    #[arg(long, env = "AIGW_LEADER_ELECTION_ID", default_value = leader::LEASE_NAME, value_parser = parse_lease_name, value_name = "NAME")]
    leader_election_id: String,
    /// Namespace of the leader Lease (the pod's namespace via `POD_NAMESPACE`, else `default`).
    #[arg(
        long,
        env = "POD_NAMESPACE",
        default_value = "default",
        value_name = "NS"
    )]
    leader_election_namespace: String,
    /// How long the Lease lasts after its holder's last renewal before another replica may take
    /// it: the longest a dead leader's objects wait (whole seconds, at least 2s).
    #[arg(long, env = "AIGW_LEADER_ELECT_LEASE_DURATION", default_value = "15s", value_parser = humantime::parse_duration, value_name = "DUR")]
    leader_elect_lease_duration: Duration,
    /// How long the holder keeps acting without a successful renewal; shorter than the lease
    /// duration, so it stops before another replica may start.
    #[arg(long, env = "AIGW_LEADER_ELECT_RENEW_DEADLINE", default_value = "10s", value_parser = humantime::parse_duration, value_name = "DUR")]
    leader_elect_renew_deadline: Duration,
    /// How often the holder renews the Lease and a standby looks at it; shorter than the renew
    /// deadline.
    #[arg(long, env = "AIGW_LEADER_ELECT_RETRY_PERIOD", default_value = "2s", value_parser = humantime::parse_duration, value_name = "DUR")]
    leader_elect_retry_period: Duration,
    /// Address for Prometheus metrics (`/metrics`), `/healthz` and `/readyz`.
    #[arg(
        long,
        env = "AIGW_METRICS_ADDR",
        default_value = "127.0.0.1:9090",
        value_name = "ADDR"
    )]
    metrics_addr: SocketAddr,
}

fn parse_share(value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(share) if share > 0.0 && share <= 1.0 => Ok(share),
        _ => Err(format!("{value} is not a share between 0 (excluded) and 1")),
    }
}

fn parse_min_rotation_interval(value: &str) -> Result<Duration, String> {
    match humantime::parse_duration(value) {
        Ok(d) if d >= Duration::from_secs(1) => Ok(d),
        Ok(_) => Err(format!("{value} is shorter than 1s")),
        Err(e) => Err(e.to_string()),
    }
}

/// The holder must stop acting (renew deadline) before another replica may take the Lease
/// (lease duration), and try to renew more than once meanwhile (retry period).
fn check_lease_timing(args: &OperatorArgs) -> anyhow::Result<()> {
    let (lease, renew, retry) = (
        args.leader_elect_lease_duration,
        args.leader_elect_renew_deadline,
        args.leader_elect_retry_period,
    );
    if lease < Duration::from_secs(2) || lease.subsec_nanos() != 0 {
        anyhow::bail!(
            "--leader-elect-lease-duration: {lease:?} is not whole seconds of at least 2s"
        );
    }
    if renew >= lease || retry.is_zero() || retry >= renew {
        anyhow::bail!(
            "leader election needs 0 < --leader-elect-retry-period ({retry:?}) < --leader-elect-renew-deadline ({renew:?}) < --leader-elect-lease-duration ({lease:?})"
        );
    }
    Ok(())
}

fn parse_selector(value: &str) -> Result<String, String> {
    aigw::controller::state::installation::parse_selector(value).map(|_| value.to_string())
}

/// A Lease name short enough that a replica's Lease (`<name>-<pod>`) is still a valid name: a
/// DNS-1123 label (at most 63 characters).
fn parse_lease_name(value: &str) -> Result<String, String> {
    aigw::gitops::validate::dns1123_label(value).map(|()| value.to_string())
}

fn parse_installation_id(value: &str) -> Result<String, String> {
    aigw::controller::state::installation::check_id(value).map(|()| value.to_string())
}

/// A boolean flag that also takes a value: `--flag` and `--flag=true` set it, `--flag=false`
/// (or `0`, `no`, `off`) clears it, so a default of `true` can be turned off.
fn boolish(arg: clap::Arg) -> clap::Arg {
    arg.num_args(0..=1)
        .require_equals(true)
        .default_missing_value("true")
        .action(clap::ArgAction::Set)
        .value_parser(BoolishValueParser::new())
        .value_name("BOOL")
}

/// Feeds per-request results of the API client into the operator's metrics.
struct MetricsObserver(Arc<Metrics>);

impl api::RequestObserver for MetricsObserver {
    fn on_response(&self, method: &str, endpoint: &str, status: Option<u16>, elapsed: Duration) {
        self.0
            .observe_api_request(method, endpoint, status, elapsed);
    }
}

pub async fn run(args: OperatorArgs) -> anyhow::Result<()> {
    crate::cli::init_tracing();
    // Before anything connects: a window no request fits would refuse every create unsent.
    let call_windows = aigw::controller::driver::create::CallWindows {
        longest_attempt: args.longest_api_call,
        list_settle: args.list_settle,
    };
    call_windows
        .check(args.api_timeout)
        .map_err(|e| anyhow::anyhow!("--longest-api-call: {e} (--api-timeout)"))?;
    check_lease_timing(&args)?;
    // Bound first: the probes live on it, so an address already in use stops the process
    // here (and Kubernetes restarts it) rather than leaving a replica that can never be ready.
    let probes = tokio::net::TcpListener::bind(args.metrics_addr)
        .await
        .with_context(|| format!("--metrics-addr: cannot listen on {}", args.metrics_addr))?;
    let probes_addr = probes.local_addr()?;
    let kube_config = kube::Config::infer().await?;
    let kube = apiserver::client(
        kube_config.clone(),
        if args.kube_http1 {
            apiserver::Protocol::Http1
        } else {
            apiserver::Protocol::Http2
        },
    )?;
    // The Leases' own client, HTTP/1.1: a renewal never waits behind the watches sharing an
    // HTTP/2 connection, and one that timed out takes its connection with it, so the next
    // dials afresh instead of waiting up to 45 s for pings to find a dead connection.
    let leases = apiserver::client(kube_config, apiserver::Protocol::Http1)?;
    controller::check_crds_installed(&kube)
        .await
        .map_err(anyhow::Error::msg)?;
    let metrics = Arc::new(Metrics::default());

    // The identity this replica campaigns with, on every management-API request it sends.
    let identity = leader::default_identity();
    api::identify_replica(&identity);
    let default_client = match (&args.management_url, &args.token_file) {
        (Some(url), Some(token_file)) => {
            let token = Arc::new(api::FileToken::new(token_file)?);
            let gateway = args
                .gateway_url
                .clone()
                .unwrap_or_else(|| format!("{}/v1", url.trim_end_matches('/')));
            let config = ClientConfig::new(url.clone(), gateway, token)
                .timeout(args.api_timeout)
                .rate_limit(args.api_qps, (args.api_qps * 2.0).ceil().max(1.0) as u32)
                .observer(Arc::new(MetricsObserver(metrics.clone())));
            Some(api::Client::new(config)?)
        }
        (None, None) => None,
        _ => anyhow::bail!("--management-url and --token-file go together"),
    };
    if args.shards && !args.leader_elect {
        anyhow::bail!("--shards needs --leader-elect: each shard is held by a Lease");
    }

    let secret_namespace = args
        .connection_secret_namespace
        .clone()
        .or_else(|| std::env::var("POD_NAMESPACE").ok());
    // The hash key lives in the operator's own namespace: the Connection secret namespace,
    // else the Lease namespace (both `POD_NAMESPACE` by default).
    let hash_key_namespace = secret_namespace
        .clone()
        .unwrap_or_else(|| args.leader_election_namespace.clone());
    let settings = Settings {
        namespaces: args.namespaces,
        concurrency: args.concurrency.max(1),
        drift_interval: args.drift_interval,
        full_read_interval: args.full_read_interval,
        drift_qps_share: args.drift_qps_share,
        cluster_selector: args.cluster_selector.clone(),
        // Not after the Lease's name: an id that followed `--leader-election-id` would find every
        // object this installation claimed under the old one another installation's.
        installation_id: args.installation_id.clone().unwrap_or_else(|| {
            format!("{}/{}", args.leader_election_namespace, leader::LEASE_NAME)
        }),
        dry_run: args.dry_run,
        rotation: aigw::resources::rotation::RotationLimits {
            min_interval: args.min_rotation_interval,
            spacing: args.rotation_spacing,
        },
        call_windows,
        concurrent_lists: args.concurrent_lists,
        claims: args.claims,
        own_namespace: Some(hash_key_namespace.clone()),
    };
    tracing::info!(installation = %settings.installation_id, "this installation acts only on the objects it claims (aigw.io/installation)");
    let grants = args
        .grants_file
        .as_deref()
        .map(super::read_grants_file)
        .transpose()?;
    let hash_key = hash_key::load(&kube, &hash_key_namespace, args.dry_run)
        .await
        .map_err(anyhow::Error::msg)?;
    let connections = Connections::new(kube.clone(), default_client)
        .with_default_grants(grants)
        .with_secret_namespace(secret_namespace)
        .with_api_timeout(args.api_timeout)
        .with_observer(Arc::new(MetricsObserver(metrics.clone())));
    // A dry run writes no Lease: it must never take over from the operator that does write.
    let (leadership, elector) = if args.leader_elect && !args.dry_run {
        let lease = LeaseSettings {
            lease_duration: args.leader_elect_lease_duration,
            renew_deadline: args.leader_elect_renew_deadline,
            retry_period: args.leader_elect_retry_period,
            name: args.leader_election_id.clone(),
            ..LeaseSettings::new(args.leader_election_namespace, identity)
        };
        let (leadership, elector) = match args.shards {
            true => leader::elect_shard(leases, lease, &settings.installation_id),
            false => {
                let (leadership, elector) = leader::elect(leases, lease);
                (
                    leadership,
                    elector.deferring_to_shards(&settings.installation_id),
                )
            }
        };
        (
            leadership,
            Some(elector.of_installation(&settings.installation_id)),
        )
    } else {
        (Leadership::always(), None)
    };
    let ctx = Context::new(kube, connections, metrics, &settings)
        .with_leadership(leadership)
        .with_hash_key(hash_key);
    let ctx = Arc::new(ctx);
    let served = ctx.clone();
    tracing::info!(addr = %probes_addr, "serving /metrics, /healthz and /readyz");
    tokio::spawn(async move {
        if let Err(e) = controller::runtime::metrics::serve(probes, served).await {
            tracing::error!(error = %e, addr = %probes_addr, "metrics server failed");
        }
    });
    match elector {
        Some(elector) => run_elected(ctx, settings, elector).await,
        None => {
            controller::run(ctx, settings).await;
            Ok(())
        }
    }
}

/// Runs the controllers while campaigning. On SIGTERM/SIGINT the controllers finish their
/// in-flight reconciles first, then the lease is released so a standby takes over at once.
/// A lease that could not be renewed ends the process with an error, as controller-runtime
/// does: restarting is the only sure way to stop every reconcile already under way.
async fn run_elected(
    ctx: Arc<Context>,
    settings: Settings,
    elector: Elector,
) -> anyhow::Result<()> {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let mut campaign = tokio::spawn(elector.run(async {
        let _ = stopped.await;
    }));
    tokio::select! {
        () = controller::run(ctx, settings) => {
            let _ = stop.send(());
            campaign.await??;
            Ok(())
        }
        ended = &mut campaign => {
            let lost = match ended? {
                Err(lost) => lost,
                Ok(()) => anyhow::bail!("leader election ended unexpectedly"),
            };
            tracing::error!(error = %lost, "stopping: this replica is no longer the leader");
            Err(lost.into())
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::{Args, Command, FromArgMatches};

    use super::OperatorArgs;

    fn parse(args: &[&str]) -> OperatorArgs {
        let command = OperatorArgs::augment_args(Command::new("operator"));
        let matches = command
            .try_get_matches_from(std::iter::once("operator").chain(args.iter().copied()))
            .expect("valid flags");
        OperatorArgs::from_arg_matches(&matches).expect("parsed")
    }

    #[test]
    fn boolish_flags_take_an_optional_value() {
        let defaults = parse(&[]);
        assert!(defaults.leader_elect && !defaults.shards);
        let set = parse(&["--leader-elect=false", "--shards"]);
        assert!(!set.leader_elect && set.shards);
        let words = parse(&["--leader-elect=yes", "--shards=off"]);
        assert!(words.leader_elect && !words.shards);
    }

    #[test]
    fn the_lease_name_is_a_dns_label() {
        assert_eq!(parse(&[]).leader_election_id, "aigw");
        let named = parse(&["--leader-election-id", "aigw-staging"]);
        assert_eq!(named.leader_election_id, "aigw-staging");
        for bad in [
            "",
            "Aigw",
            "aigw_staging",
            "-aigw",
            "aigw.staging",
            &"a".repeat(64),
        ] {
            assert!(super::parse_lease_name(bad).is_err(), "{bad:?}");
        }
    }
}
