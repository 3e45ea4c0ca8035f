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
/// kube's client module is held to errors whatever `RUST_LOG` says ([`QUIET_MODULES`]).
pub fn init_tracing() {
    let builder = tracing_subscriber::fmt()
        .with_env_filter(log_filter(std::env::var("RUST_LOG").ok().as_deref()))
        .with_writer(std::io::stderr);
    let _ = if std::env::var("AIGW_LOG_FORMAT").as_deref() == Ok("json") {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}

/// The log filter of `RUST_LOG` (`None`, or one that does not parse: `info`), with
/// [`QUIET_MODULES`] over it.
fn log_filter(rust_log: Option<&str>) -> tracing_subscriber::EnvFilter {
    use tracing_subscriber::EnvFilter;
    let asked = rust_log.and_then(|spec| EnvFilter::try_new(spec).ok());
    let mut filter = asked.unwrap_or_else(|| EnvFilter::new("info"));
    for directive in QUIET_MODULES {
        filter = filter.add_directive(directive.parse().expect("a static directive"));
    }
    filter
}

/// Modules held to errors whatever `RUST_LOG` asks: kube's client logs an apiserver's answer
/// verbatim at `debug` when a request fails (an admission message may quote the data of the
/// Secret refused, such as the credentials aigw was delivering) and at `warn` when an answer does
/// not decode (a Secret's data with it). aigw reports each failure itself, its message
/// concealed. A directive naming the same module in `RUST_LOG` is replaced by this one.
pub const QUIET_MODULES: [&str; 1] = ["kube_client::client=error"];

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// What a subscriber with the filter of `rust_log` writes for one line of kube's client at
    /// each level, and one of aigw's at `debug`.
    fn logged(rust_log: &str) -> String {
        let out = Arc::new(Mutex::new(Vec::<u8>::new()));
        let writer = {
            let out = out.clone();
            move || Sink(out.clone())
        };
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(log_filter(Some(rust_log)))
            .with_writer(writer)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::debug!(target: "kube_client::client", "client-debug");
            tracing::warn!(target: "kube_client::client", "client-warn");
            tracing::error!(target: "kube_client::client", "client-error");
            tracing::debug!(target: "kube_client::client::builder", "builder-debug");
            tracing::debug!(target: "aigw::controller", "aigw-debug");
        });
        String::from_utf8(out.lock().unwrap().clone()).unwrap()
    }

    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn kubes_client_logs_only_errors_whatever_rust_log_asks() {
        for rust_log in [
            "debug",
            "trace",
            "kube_client=trace,debug",
            "kube_client::client=trace,debug",
            "debug,kube_client::client=debug",
        ] {
            let out = logged(rust_log);
            assert!(out.contains("client-error"), "{rust_log}: {out}");
            assert!(out.contains("aigw-debug"), "{rust_log}: {out}");
            for quiet in ["client-debug", "client-warn", "builder-debug"] {
                assert!(!out.contains(quiet), "{rust_log}: {quiet} logged: {out}");
            }
        }
    }
}
