//! `aigw emulator`.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use aigw::emulator::{EmulatorOptions, OAuthOptions};
use anyhow::Context;

#[derive(clap::Args)]
pub struct EmulatorArgs {
    /// Address to listen on.
    #[arg(long, env = "AIGW_EMULATOR_LISTEN", default_value = "127.0.0.1:8787")]
    listen: SocketAddr,
    /// Bearer token every API request must carry.
    #[arg(
        long,
        env = "AIGW_EMULATOR_TOKEN",
        hide_env_values = true,
        required_unless_present = "token_file",
        conflicts_with = "token_file"
    )]
    token: Option<String>,
    /// File holding the bearer token (surrounding whitespace is ignored).
    #[arg(long, env = "AIGW_EMULATOR_TOKEN_FILE")]
    token_file: Option<PathBuf>,
    /// Delay added to every API request, e.g. `20ms`.
    #[arg(long, env = "AIGW_EMULATOR_LATENCY", value_parser = humantime::parse_duration)]
    latency: Option<Duration>,
    /// Enables `POST /oauth2/access_token` for this client id.
    #[arg(long, env = "AIGW_EMULATOR_CLIENT_ID", requires = "client_secret")]
    client_id: Option<String>,
    /// Secret of the OAuth2 client.
    #[arg(
        long,
        env = "AIGW_EMULATOR_CLIENT_SECRET",
        hide_env_values = true,
        requires = "client_id"
    )]
    client_secret: Option<String>,
    /// Lifetime of issued OAuth2 tokens.
    #[arg(long, env = "AIGW_EMULATOR_TOKEN_TTL", value_parser = humantime::parse_duration,
          default_value = "15m")]
    token_ttl: Duration,
    /// Caps every API-key rotation's transition at DUR, e.g. `2s`: the old key stops working
    /// after the smaller of the requested period (still at least 30 minutes) and DUR, and
    /// `key_transition_expires_at` says so. For tests; absent, transitions last as asked.
    #[arg(long, env = "AIGW_EMULATOR_MIN_KEY_TRANSITION", value_parser = humantime::parse_duration,
          value_name = "DUR")]
    min_key_transition: Option<Duration>,
}

pub async fn run(args: EmulatorArgs) -> anyhow::Result<()> {
    crate::cli::init_tracing();
    let token = match (args.token, args.token_file) {
        (Some(token), _) => token,
        (None, Some(path)) => std::fs::read_to_string(&path)
            .with_context(|| format!("failed to read token file {}", path.display()))?
            .trim()
            .to_owned(),
        (None, None) => anyhow::bail!("--token or --token-file is required"),
    };
    anyhow::ensure!(!token.is_empty(), "the emulator token must not be empty");
    let oauth = match (args.client_id, args.client_secret) {
        (Some(client_id), Some(client_secret)) => Some(OAuthOptions {
            client_id,
            client_secret,
            token_ttl: args.token_ttl,
        }),
        _ => None,
    };
    let options = EmulatorOptions {
        token,
        latency: args.latency,
        oauth,
        min_key_transition: args.min_key_transition,
    };
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("failed to listen on {}", args.listen))?;
    let addr = listener.local_addr()?;
    tracing::info!(%addr, oauth = options.oauth.is_some(), "emulator listening");
    aigw::emulator::serve_with_shutdown(listener, options, shutdown_signal())
        .await
        .context("emulator server failed")?;
    tracing::info!("emulator stopped");
    Ok(())
}

/// Completes on ctrl-c or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}
