//! `aigw operator`: run the controllers.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use aigw::api::{self, ClientConfig};
use aigw::controller::{self, Connections, Context, Metrics, Settings};

#[derive(clap::Args)]
pub struct OperatorArgs {
    /// Root of the management API; `/ai_gw/v2…` and `/ai_gw/admin/v2…` are appended. Defines
    /// the connection named `default`.
    #[arg(long, env = "AIGW_MANAGEMENT_URL", value_name = "URL")]
    management_url: Option<String>,
    /// The gateway address including `/v1`, e.g. http://127.0.0.1:8787/v1.
    #[arg(long, env = "AIGW_GATEWAY_URL", value_name = "URL")]
    gateway_url: Option<String>,
    /// File holding the bearer token for the default connection.
    #[arg(long, env = "AIGW_TOKEN_FILE", value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Namespace to watch; repeat for several. Default: all namespaces.
    #[arg(
        long = "namespace",
        env = "AIGW_NAMESPACE",
        value_name = "NS",
        value_delimiter = ','
    )]
    namespaces: Vec<String>,
    /// Reconciles running at once, per kind.
    #[arg(long, env = "AIGW_CONCURRENCY", default_value_t = 4, value_name = "N")]
    concurrency: u16,
    /// Requests per second to the management API, shared by every controller (burst is twice this).
    #[arg(long, env = "AIGW_API_QPS", default_value_t = 10.0, value_name = "Q")]
    api_qps: f64,
    /// How often each object is re-read to detect and correct remote edits (jittered ±10 %).
    #[arg(long, env = "AIGW_DRIFT_INTERVAL", default_value = "10m", value_parser = humantime::parse_duration, value_name = "DUR")]
    drift_interval: Duration,
    /// YAML file with the tenancy grants of the default connection (the one these flags define),
    /// in the shape of a Connection's `spec.grants`: which namespaces may use it, for which
    /// workspaces, and whether they may adopt. Without it, the default connection is open to
    /// every watched namespace, every workspace, and adoption.
    #[arg(long, env = "AIGW_GRANTS_FILE", value_name = "FILE")]
    grants_file: Option<PathBuf>,
    /// The only namespace Connections may read Secrets from (tokens, client credentials,
    /// header values). Default: the operator's own namespace (`POD_NAMESPACE`); when that is
    /// unknown too, any namespace.
    #[arg(long, env = "AIGW_CONNECTION_SECRET_NAMESPACE", value_name = "NS")]
    connection_secret_namespace: Option<String>,
    /// Address for Prometheus metrics (`/metrics`) and `/healthz`.
    #[arg(
        long,
        env = "AIGW_METRICS_ADDR",
        default_value = "127.0.0.1:9090",
        value_name = "ADDR"
    )]
    metrics_addr: SocketAddr,
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
    let kube = kube::Client::try_default().await?;
    controller::check_crds_installed(&kube)
        .await
        .map_err(anyhow::Error::msg)?;
    let metrics = Arc::new(Metrics::default());

    let default_client = match (&args.management_url, &args.token_file) {
        (Some(url), Some(token_file)) => {
            let token = Arc::new(api::FileToken::new(token_file)?);
            let gateway = args
                .gateway_url
                .clone()
                .unwrap_or_else(|| format!("{}/v1", url.trim_end_matches('/')));
            let config = ClientConfig::new(url.clone(), gateway, token)
                .rate_limit(args.api_qps, (args.api_qps * 2.0).ceil().max(1.0) as u32)
                .observer(Arc::new(MetricsObserver(metrics.clone())));
            Some(api::Client::new(config)?)
        }
        (None, None) => None,
        _ => anyhow::bail!("--management-url and --token-file go together"),
    };

    let settings = Settings {
        namespaces: args.namespaces,
        concurrency: args.concurrency.max(1),
        drift_interval: args.drift_interval,
    };
    let grants = match &args.grants_file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                anyhow::anyhow!("failed to read --grants-file {}: {e}", path.display())
            })?;
            Some(serde_yaml::from_str(&text).map_err(|e| {
                anyhow::anyhow!(
                    "--grants-file {} is not a list of grants: {e}",
                    path.display()
                )
            })?)
        }
        None => None,
    };
    let secret_namespace = args
        .connection_secret_namespace
        .clone()
        .or_else(|| std::env::var("POD_NAMESPACE").ok());
    let connections = Connections::new(kube.clone(), default_client)
        .with_default_grants(grants)
        .with_secret_namespace(secret_namespace)
        .with_observer(Arc::new(MetricsObserver(metrics.clone())));
    let ctx = Arc::new(Context::new(kube, connections, metrics.clone(), &settings));
    let metrics_addr = args.metrics_addr;
    tokio::spawn(async move {
        if let Err(e) = controller::metrics::serve(metrics_addr, metrics).await {
            tracing::error!(error = %e, addr = %metrics_addr, "metrics server failed");
        }
    });
    controller::run(ctx, settings).await;
    Ok(())
}
