//! `aigw plan -f PATH`: validate, then compare with the live management API (reads only).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;

use aigw::api::secret_fields::without_decoded_values;
use aigw::api::{Client, ClientConfig, SecretString, StaticToken};
use aigw::gitops::plan::{self, Live};
use aigw::gitops::{load, validate::Validator};
use aigw::resources::Connection;

use super::api::{ConnectionArgs, connect};

#[derive(clap::Args)]
pub struct PlanArgs {
    #[command(flatten)]
    manifests: super::validate::Manifests,
    /// As `aigw validate`: the `--min-rotation-interval` of the operator the manifests are for.
    #[arg(long, env = "AIGW_MIN_ROTATION_INTERVAL", default_value = "1h", value_parser = humantime::parse_duration, value_name = "DUR")]
    min_rotation_interval: std::time::Duration,
    #[command(flatten)]
    target: TargetArgs,
    /// `human` (default) or `json` (a stable document: `{"version": 1, "summary", "resources"}`).
    #[arg(long, short = 'o', value_enum, default_value = "human")]
    output: Output,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Output {
    Human,
    Json,
}

/// How to reach the management API and, optionally, the cluster; shared with `aigw export`.
#[derive(clap::Args)]
pub struct TargetArgs {
    #[command(flatten)]
    connection: ConnectionArgs,
    /// A `Connection` manifest naming the connection to plan against. With `--kubeconfig` the
    /// cluster's Connection of that name is used (its URLs, token URL and Secrets, read from
    /// `--connection-secret-namespace`), and a file that differs from it in any of them is
    /// refused. With `--token-file`, `--management-url` is required: the token goes only there
    /// (`--header NAME=VALUE` gives any header the Connection takes from a Secret). Without
    /// `--kubeconfig`, the file's literal headers are all it supplies.
    #[arg(long = "connection", value_name = "FILE")]
    connection_file: Option<PathBuf>,
    /// The only namespace a `--connection` manifest's Secrets are read from, as the operator's
    /// `--connection-secret-namespace` (its own namespace, e.g. `aigw-system`). Required with
    /// `--connection` and `--kubeconfig`: a manifest naming another namespace is refused, as the
    /// operator refuses it.
    #[arg(long, env = "AIGW_CONNECTION_SECRET_NAMESPACE", value_name = "NS")]
    connection_secret_namespace: Option<String>,
    /// Kubeconfig for reads from the cluster: the live resources' `status.slug`/`status.id`
    /// (plan) and a Connection's Secrets. Nothing is written.
    #[arg(long, env = "AIGW_KUBECONFIG", value_name = "FILE")]
    pub(crate) kubeconfig: Option<PathBuf>,
    /// The grants of the connection these flags define, as the operator's `--grants-file`
    /// (a YAML list in the shape of a Connection's `spec.grants`). With `--kubeconfig`, plan
    /// judges a manifest naming the Connection `default` by them when no Connection of that
    /// name exists (e.g. `spec.promotion.after` in another namespace needs `promoteFrom`).
    #[arg(long, env = "AIGW_GRANTS_FILE", value_name = "FILE")]
    pub(crate) grants_file: Option<PathBuf>,
}

pub async fn run(args: PlanArgs) -> anyhow::Result<ExitCode> {
    let loaded = load::load(&args.manifests.files)?;
    let report = Validator::new()
        .with_min_rotation_interval(args.min_rotation_interval)
        .validate(&loaded);
    if !report.is_valid() {
        for problem in &report.problems {
            eprintln!("{problem}");
        }
        eprintln!("{}; not planning an invalid set", report.summary());
        return Ok(ExitCode::FAILURE);
    }
    let live = match &args.target.kubeconfig {
        Some(path) => Some(Live {
            default_grants: args
                .target
                .grants_file
                .as_deref()
                .map(super::read_grants_file)
                .transpose()?,
            ..live(path).await?
        }),
        None => None,
    };
    // Every manifest's remote object is read through the one Connection given: one naming
    // another is said, since its own Connection may reach another tenant.
    // (A file without a name is planned as before; only export needs the name.)
    if let Ok(Some(planned)) = connection_name(&args.target) {
        let elsewhere: Vec<String> = report
            .manifests
            .iter()
            .filter_map(|m| {
                let named = m.object.connection_name()?;
                (named != planned).then(|| format!("{} names {named}", m.object.display()))
            })
            .collect();
        if !elsewhere.is_empty() {
            eprintln!(
                "note: {} manifests name another Connection than {planned} ({}); their remote objects are read through {planned} all the same: plan each Connection's manifests with its own --connection",
                elsewhere.len(),
                super::first_few(&elsewhere)
            );
        }
    }
    let api = client(&args.target, live.as_ref()).await?;
    let plan = plan::plan(&api, live.as_ref(), &report.manifests).await?;
    let text = match args.output {
        Output::Human => plan.render(),
        Output::Json => serde_json::to_string_pretty(&plan)?,
    };
    super::write_stdout(&text)?;
    Ok(ExitCode::from(plan.exit_code()))
}

/// A read-only view of the cluster named by `path`.
pub(crate) async fn live(path: &Path) -> anyhow::Result<Live> {
    let kubeconfig = kube::config::Kubeconfig::read_from(path)
        .with_context(|| format!("failed to read kubeconfig {}", path.display()))?;
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .with_context(|| format!("invalid kubeconfig {}", path.display()))?;
    let default_namespace = config.default_namespace.clone();
    let client = super::kube_client(config)?;
    Ok(Live {
        client,
        default_namespace,
        default_grants: None,
    })
}

/// The `Connection` manifest at `path` (`--connection`).
fn connection_file(path: &std::path::Path) -> anyhow::Result<Connection> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("failed to read {}", path.display()))?;
    serde_yaml::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "{} is not a Connection manifest: {}",
            path.display(),
            without_decoded_values(&e.to_string())
        )
    })
}

/// The name of the Connection `--connection` names (`None` without it: the connection flags
/// define one that has no name in the cluster).
pub(crate) fn connection_name(target: &TargetArgs) -> anyhow::Result<Option<String>> {
    let Some(path) = &target.connection_file else {
        return Ok(None);
    };
    // What the manifests will name must be a Connection's name, or they would go to
    // `default` (none) or be refused at admission.
    let name = connection_file(path)?.metadata.name.unwrap_or_default();
    aigw::gitops::validate::dns1123_subdomain(&name)
        .map_err(|why| anyhow::anyhow!("{}: metadata.name {name:?}: {why}", path.display()))?;
    Ok(Some(name))
}

/// The API client: from `--connection FILE` when given, else from the connection flags.
///
/// A `--connection` file names the Connection; it never decides where credentials go. With
/// `--kubeconfig` the URLs, token URL and Secret references are the cluster's Connection of that
/// name (a file that differs in any of them is refused, naming the field); with `--token-file`
/// the token goes only to `--management-url`.
pub(crate) async fn client(target: &TargetArgs, live: Option<&Live>) -> anyhow::Result<Client> {
    let Some(path) = &target.connection_file else {
        return connect(&target.connection);
    };
    let file = connection_file(path)?;
    let token_file = target.connection.token_file.is_some();
    if token_file && target.connection.management_url.is_none() {
        // The token goes only where the command line says, never where a manifest says.
        anyhow::bail!(
            "--token-file with --connection needs --management-url: the token is sent only to a URL given with --management-url, never to one a Connection manifest names"
        );
    }
    let connection = match live {
        Some(live) => live_connection(live, &file, path).await?,
        None => file,
    };
    if token_file {
        return client_with_token_file(&connection, &target.connection, live.is_some());
    }
    let Some(live) = live else {
        anyhow::bail!(
            "the Secrets of Connection {} are in the cluster: pass --kubeconfig to read them, or --token-file with --management-url (and --header for headers taken from Secrets)",
            connection.metadata.name.as_deref().unwrap_or_default()
        );
    };
    let Some(namespace) = &target.connection_secret_namespace else {
        anyhow::bail!(
            "--connection with --kubeconfig needs --connection-secret-namespace (the operator's, e.g. aigw-system): Secrets are only read from the namespace the operator reads them from, never from one the manifest names"
        );
    };
    // Resolved exactly as the operator does: the cluster's Connection, its Secrets read (GET)
    // only from the operator's Connection secret namespace.
    let connections = Arc::new(
        aigw::controller::Connections::new(live.client.clone(), None)
            .with_secret_namespace(Some(namespace.clone())),
    );
    // An API's error may quote what the client sent: the Secrets' values and the tokens it
    // obtained with them (an OAuth2 access token, known only once fetched).
    let known = connections.clone();
    super::api::confide_later(move || known.secret_values());
    connections
        .client(&connection)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))
}

/// The cluster's Connection named by the manifest at `path`, when the manifest agrees with it
/// on everything that decides where requests go and what they carry.
async fn live_connection(
    live: &Live,
    file: &Connection,
    path: &Path,
) -> anyhow::Result<Connection> {
    let Some(name) = file.metadata.name.as_deref().filter(|n| !n.is_empty()) else {
        anyhow::bail!("{}: metadata.name is required", path.display());
    };
    let found = kube::Api::<Connection>::all(live.client.clone())
        .get_opt(name)
        .await
        .with_context(|| format!("failed to read Connection {name} from the cluster"))?;
    let Some(found) = found else {
        anyhow::bail!(
            "Connection {name} (named by {}) does not exist in the cluster: with --kubeconfig the URLs, token URL and Secret references are taken from the cluster's Connection, never from a file",
            path.display()
        );
    };
    if let Some(field) = found.spec.reach_differs(&file.spec) {
        anyhow::bail!(
            "{}: {field} differs from the cluster's Connection {name}; refused: with --kubeconfig the URLs, token URL and Secret references come from the cluster, never from a file (a file a pull request can edit would decide where credentials go)",
            path.display()
        );
    }
    Ok(found)
}

/// The Connection's literal headers, with the token from `--token-file`, sent to
/// `--management-url` (required); the flags override the manifest.
fn client_with_token_file(
    connection: &Connection,
    flags: &ConnectionArgs,
    from_cluster: bool,
) -> anyhow::Result<Client> {
    let spec = &connection.spec;
    let management_url = flags
        .management_url
        .clone()
        .context("--token-file with --connection needs --management-url")?;
    // The gateway URL of the cluster's Connection is trusted; a file's is not.
    let gateway_url = flags
        .gateway_url
        .clone()
        .or_else(|| spec.gateway_url.clone().filter(|_| from_cluster))
        .unwrap_or_else(|| format!("{}/v1", management_url.trim_end_matches('/')));
    let token_file = flags
        .token_file
        .as_ref()
        .context("--token-file is required")?;
    let token = Arc::new(StaticToken::from_file(token_file)?);
    super::api::confide_credentials(&token, flags);
    let mut config = ClientConfig::new(management_url, gateway_url, token).timeout(flags.timeout);
    for header in &spec.headers {
        let given = flags
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(&header.name));
        let value = match (given, &header.value) {
            (Some((_, v)), _) | (None, Some(v)) => v.clone(),
            (None, None) => anyhow::bail!(
                "header {} of the Connection comes from a Secret: give it with --header {}=VALUE",
                header.name,
                header.name
            ),
        };
        config = config.header(header.name.clone(), SecretString::new(value));
    }
    for (name, value) in &flags.headers {
        if !spec
            .headers
            .iter()
            .any(|h| h.name.eq_ignore_ascii_case(name))
        {
            config = config.header(name.clone(), SecretString::new(value.clone()));
        }
    }
    Ok(Client::new(config)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_file_error_names_the_field_but_not_the_value() {
        let text = "apiVersion: aigw.io/v1alpha1\nkind: Connection\nmetadata: {name: c}\nspec: {headers: [\"sk-live-123\"]}\n";
        let error = serde_yaml::from_str::<Connection>(text)
            .unwrap_err()
            .to_string();
        assert!(error.contains("sk-live-123"), "serde quotes it: {error}");
        let shown = without_decoded_values(&error);
        assert!(!shown.contains("sk-live-123"), "{shown}");
        assert!(shown.contains("invalid type: string"), "{shown}");
    }
}
