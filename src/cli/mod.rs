//! One module per subcommand: clap arguments and the glue to the library.

pub mod api;
mod api_access;
mod api_mcp;
mod api_telemetry;
mod api_workspaces;
pub mod argocd_cm;
pub mod crds;
pub mod emulator;
pub mod export;
pub mod history;
pub mod operator;
pub mod plan;
pub mod rollout;
pub mod validate;

/// Logs to stderr; `RUST_LOG` filters (default `info`), `AIGW_LOG_FORMAT=json` for JSON lines.
pub fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = if std::env::var("AIGW_LOG_FORMAT").as_deref() == Ok("json") {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}

/// `text` as the CLI prints an error: a value after a secret-looking key, or one a request of
/// this command sent or obtained (a token, a Secret's value), hidden.
pub fn masked(text: &str) -> String {
    let concealed = aigw::api::concealment::conceal(text, &api::body_secrets());
    aigw::api::secret_fields::redact_text(&concealed)
}

/// The first five of `items`, comma-separated, with `…` when there are more: a note's list.
pub fn first_few(items: &[String]) -> String {
    let mut said: Vec<&str> = items.iter().take(5).map(String::as_str).collect();
    if items.len() > said.len() {
        said.push("…");
    }
    said.join(", ")
}

/// A client of the apiserver for a CLI command: kube's own (HTTP/1.1) stack, sending aigw's
/// User-Agent as the operator does.
pub fn kube_client(config: kube::Config) -> anyhow::Result<kube::Client> {
    use aigw::controller::runtime::apiserver;
    use anyhow::Context;
    apiserver::client(config, apiserver::Protocol::Http1)
        .context("failed to build a Kubernetes client")
}

/// Like `println!`, but a closed pipe (`aigw plan … | head`) is not an error.
pub fn write_stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

/// The grants of a `--grants-file`: a YAML list in the shape of a Connection's `spec.grants`.
pub fn read_grants_file(
    path: &std::path::Path,
) -> anyhow::Result<Vec<aigw::resources::connection::Grant>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("failed to read --grants-file {}: {e}", path.display()))?;
    serde_yaml::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "--grants-file {} is not a list of grants: {e}",
            path.display()
        )
    })
}
