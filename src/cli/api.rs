//! `aigw api`: one direct call per seed operation (plus the create/read/delete ones the operator
//! uses). Prints the answer as pretty JSON on stdout; errors go to stderr with a non-zero exit.
//! Create and rotate answers include one-time secrets: they are printed, because that is the only
//! time they can be read.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::api_mcp::GuardrailMcp;
use aigw::api::{
    ApiError, ApiKeyKind, ApiKeysListQuery, Client, ClientConfig, DeploymentListQuery, Endpoint,
    Includable, LimitsPolicy, PolicyKind, PolicyListQuery, RotateApiKeyRequest, SecretString,
    StaticToken,
};

#[derive(Args)]
pub struct ApiArgs {
    #[command(flatten)]
    connection: ConnectionArgs,
    #[command(subcommand)]
    command: ApiCommand,
}

/// The connection flags, shared with `aigw plan` and `aigw export`.
#[derive(Args)]
pub(crate) struct ConnectionArgs {
    /// Root of the management API; `/ai_gw/v2…` and `/ai_gw/admin/v2…` are appended.
    #[arg(long, global = true, env = "AIGW_MANAGEMENT_URL", value_name = "URL")]
    pub(crate) management_url: Option<String>,
    /// The gateway address including `/v1`. Default: the management URL plus `/v1`.
    #[arg(long, global = true, env = "AIGW_GATEWAY_URL", value_name = "URL")]
    pub(crate) gateway_url: Option<String>,
    /// File holding the bearer token.
    #[arg(long, global = true, env = "AIGW_TOKEN_FILE", value_name = "FILE")]
    pub(crate) token_file: Option<PathBuf>,
    /// Extra header sent on every request, e.g. `x-tsg-id=1234`; repeatable. Values are not logged.
    #[arg(long = "header", global = true, value_name = "NAME=VALUE", value_parser = parse_header)]
    pub(crate) headers: Vec<(String, String)>,
    /// Per-request timeout.
    #[arg(long, global = true, default_value = "30s", value_parser = humantime::parse_duration, value_name = "DUR")]
    pub(crate) timeout: Duration,
}

#[derive(Subcommand)]
enum ApiCommand {
    /// Stored model responses (gateway).
    #[command(subcommand)]
    Responses(ResponsesCommand),
    /// Files of vector stores (gateway).
    #[command(subcommand)]
    VectorStoreFiles(VectorStoreFilesCommand),
    /// Registered self-hosted gateways.
    #[command(subcommand)]
    Deployments(DeploymentsCommand),
    /// Gateway routing configs.
    #[command(subcommand)]
    Configs(ConfigsCommand),
    /// The organisation's guardrails.
    #[command(subcommand)]
    Guardrails(GuardrailsCommand),
    /// Rate limits policies.
    #[command(subcommand)]
    RateLimits(PolicyCommand),
    /// Usage-limits policies (budgets) and the usage they counted.
    #[command(subcommand)]
    UsageLimits(UsageLimitsCommand),
    /// Gateway API keys, service or user (`--kind`).
    #[command(subcommand)]
    ApiKeys(ApiKeysCommand),
    /// The organisation's integrations (upstream credentials) and their workspace and model
    /// access.
    #[command(subcommand)]
    Integrations(super::api_access::IntegrationsCommand),
    /// Providers: a workspace's handle on an integration (`@slug` in configs).
    #[command(subcommand)]
    Providers(super::api_access::ProvidersCommand),
    /// Workspaces: reads on either plane, writes (create, update, archive) on the admin plane.
    #[command(subcommand)]
    Workspaces(super::api_workspaces::WorkspacesCommand),
    /// SCM IAM scopes: a workspace names one, and is visible on the data plane once its scope
    /// binds the workspace's slug.
    #[command(subcommand)]
    Scopes(super::api_workspaces::ScopesCommand),
    /// The gateway's telemetry: requests, errors and latency per API key, status code, provider
    /// or model over a window.
    #[command(subcommand)]
    Telemetry(Box<super::api_telemetry::TelemetryCommand>),
    /// Secret references: pointers into AWS Secrets Manager, Azure Key Vault or HashiCorp Vault
    /// that integrations map fields to.
    #[command(subcommand)]
    SecretReferences(super::api_mcp::SecretReferencesCommand),
    /// The organisation's MCP integrations, their workspace access, capabilities and metadata.
    #[command(subcommand)]
    McpIntegrations(super::api_mcp::McpIntegrationsCommand),
    /// Workspaces' MCP servers, their capabilities, user access and connections.
    #[command(subcommand)]
    McpServers(super::api_mcp::McpServersCommand),
}

/// `-f FILE` (or `-f -` for stdin): a JSON request body.
#[derive(Args)]
pub(super) struct BodyArg {
    /// JSON request body; `-` reads stdin.
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub(super) file: PathBuf,
}

impl BodyArg {
    /// The request body, parsed (see [`read_body`]).
    pub(super) fn read<T: DeserializeOwned>(&self) -> anyhow::Result<T> {
        read_body(&self.file)
    }
}

/// An object's id and a request body for it (`aigw api … update ID -f FILE`).
#[derive(Args)]
pub(super) struct IdBody {
    pub(super) id: String,
    #[command(flatten)]
    pub(super) body: BodyArg,
}

#[derive(Subcommand)]
enum ResponsesCommand {
    /// Retrieve a response by id.
    Get {
        id: String,
        /// Extra data to include; repeatable: file_search_call.results,
        /// message.input_image.image_url, computer_call_output.output.image_url.
        #[arg(long = "include", value_name = "X")]
        include: Vec<String>,
    },
}

#[derive(Subcommand)]
enum VectorStoreFilesCommand {
    /// Retrieve one file of a vector store.
    Get {
        vector_store_id: String,
        file_id: String,
    },
}

#[derive(Subcommand)]
enum DeploymentsCommand {
    /// List deployments.
    List {
        /// active or archived.
        #[arg(long)]
        status: Option<String>,
        /// production or non_production.
        #[arg(long = "type")]
        deployment_type: Option<String>,
        #[arg(long)]
        search: Option<String>,
    },
    /// Retrieve a deployment (secrets come back masked).
    Get { id: String },
    /// Register a deployment; prints the one-time `client_auth` and credentials.
    Create(BodyArg),
    /// Update a deployment; with `"rotate_auth": true` prints the new secrets.
    Update(IdBody),
    /// Archive a deployment.
    Delete { id: String },
}

#[derive(Subcommand)]
enum ConfigsCommand {
    /// List configs.
    List {
        #[arg(long)]
        workspace_id: Option<String>,
    },
    /// Retrieve a config by slug or id.
    Get { slug: String },
    /// Create a config.
    Create(BodyArg),
    /// Update a config; a `config` in the body replaces the whole document.
    Update {
        slug: String,
        #[command(flatten)]
        body: BodyArg,
    },
    /// Delete a config.
    Delete { slug: String },
    /// List the versions of a config (as the API sends them), or with `--diff A B` the change
    /// between two of them (by `version_id`), secrets masked.
    Versions {
        slug: String,
        /// Print what changed from version A to version B instead of the list (each a
        /// `version_id`, or a start of one no other version shares).
        #[arg(long, num_args = 2, value_names = ["A", "B"])]
        diff: Option<Vec<String>>,
    },
}

#[derive(Subcommand)]
enum GuardrailsCommand {
    /// List one page of guardrails.
    List {
        /// 1 to 1000 (server default 100).
        #[arg(long)]
        page_size: Option<u32>,
        /// From 0.
        #[arg(long)]
        current_page: Option<u32>,
    },
    /// Retrieve a guardrail by UUID or slug, checks and actions as the API sent them (Secret
    /// parameters as the API masks them).
    Get {
        guardrail: String,
        /// An organisation guardrail (the admin plane) rather than a workspace guardrail.
        #[arg(long)]
        organisation: bool,
    },
    /// List the MCP servers a guardrail applies to.
    McpServers {
        guardrail: String,
        /// An organisation guardrail (the admin plane).
        #[arg(long)]
        organisation: bool,
    },
    /// Replace the whole set of MCP servers a guardrail applies to (`{"mcp_servers":
    /// {"<server uuid>": {"run_on": ["input", "output"]}}}`); servers left out lose it.
    SyncMcpServers {
        guardrail: String,
        #[arg(long)]
        organisation: bool,
        #[command(flatten)]
        body: BodyArg,
    },
    /// Apply a guardrail to one MCP server (`{"run_on": [...]}`).
    UpsertMcpServer {
        guardrail: String,
        server: String,
        #[arg(long)]
        organisation: bool,
        #[command(flatten)]
        body: BodyArg,
    },
}

/// The calls rate-limits and usage-limits policies take alike.
#[derive(Subcommand)]
enum PolicyCommand {
    /// List every active policy (all pages).
    List {
        #[arg(long)]
        workspace_id: Option<String>,
    },
    /// Retrieve a policy (a usage-limits policy with its usage).
    Get { id: String },
    /// Create a policy.
    Create(BodyArg),
    /// Update a policy's name, conditions or limit (a usage-limits update never resets usage).
    Update(IdBody),
    /// Archive a policy.
    Delete { id: String },
}

#[derive(Subcommand)]
enum UsageLimitsCommand {
    #[command(flatten)]
    Policy(PolicyCommand),
    /// List the values of the grouping key that have usage (all pages).
    Entities { id: String },
    /// Reset one value's usage to zero.
    Reset { id: String, entity_id: String },
}

/// `--kind service|user`: which per-kind route a key command uses.
#[derive(Args)]
struct KindArg {
    /// service or user.
    #[arg(long, default_value = "service", value_parser = ["service", "user"])]
    kind: String,
}

impl KindArg {
    fn kind(&self) -> anyhow::Result<ApiKeyKind> {
        parse_enum(&self.kind)
    }
}

#[derive(Subcommand)]
enum ApiKeysCommand {
    /// List every key of the kind (all pages; values masked).
    List {
        #[command(flatten)]
        kind: KindArg,
        #[arg(long)]
        workspace_id: Option<String>,
    },
    /// Retrieve a key (its value masked).
    Get {
        id: String,
        #[command(flatten)]
        kind: KindArg,
    },
    /// Create a key; prints the one-time key value.
    Create {
        #[command(flatten)]
        kind: KindArg,
        #[command(flatten)]
        body: BodyArg,
    },
    /// Update a key's name, description, scopes, limits, defaults, alert e-mails, expiry or
    /// rotation policy.
    Update {
        id: String,
        #[command(flatten)]
        kind: KindArg,
        #[command(flatten)]
        body: BodyArg,
    },
    /// Delete a key for good.
    Delete {
        id: String,
        #[command(flatten)]
        kind: KindArg,
    },
    /// Issue a new value (printed once); the old one works until `key_transition_expires_at`.
    Rotate {
        id: String,
        #[command(flatten)]
        kind: KindArg,
        /// How long the old value keeps working, at least 30m; the API's default when absent.
        #[arg(long, value_parser = humantime::parse_duration, value_name = "DUR")]
        transition: Option<Duration>,
    },
}

pub async fn run(args: ApiArgs) -> anyhow::Result<()> {
    crate::cli::init_tracing();
    let client = connect(&args.connection)?;
    match args.command {
        ApiCommand::Responses(cmd) => responses(&client, cmd).await,
        ApiCommand::VectorStoreFiles(VectorStoreFilesCommand::Get {
            vector_store_id,
            file_id,
        }) => print(
            &client
                .vector_store_files()
                .get(&vector_store_id, &file_id)
                .await?,
        ),
        ApiCommand::Deployments(cmd) => deployments(&client, cmd).await,
        ApiCommand::Configs(cmd) => configs(&client, cmd).await,
        ApiCommand::Guardrails(GuardrailsCommand::List {
            page_size,
            current_page,
        }) => print_masked(&client.guardrails().list(page_size, current_page).await?),
        ApiCommand::Guardrails(GuardrailsCommand::Get {
            guardrail,
            organisation,
        }) => {
            let plane = match organisation {
                true => aigw::api::GuardrailPlane::Organisation,
                false => aigw::api::GuardrailPlane::Workspace,
            };
            print_masked(&client.guardrails_on(plane).get(&guardrail).await?)
        }
        ApiCommand::RateLimits(cmd) => policies(client.rate_limits(), cmd).await,
        ApiCommand::UsageLimits(cmd) => usage_limits(&client, cmd).await,
        ApiCommand::ApiKeys(cmd) => api_keys(&client, cmd).await,
        ApiCommand::Integrations(cmd) => super::api_access::integrations(&client, cmd).await,
        ApiCommand::Providers(cmd) => super::api_access::providers(&client, cmd).await,
        ApiCommand::Workspaces(cmd) => super::api_workspaces::workspaces(&client, cmd).await,
        ApiCommand::Scopes(cmd) => super::api_workspaces::scopes(&client, cmd).await,
        ApiCommand::Telemetry(cmd) => super::api_telemetry::telemetry(&client, *cmd).await,
        ApiCommand::SecretReferences(cmd) => super::api_mcp::secret_references(&client, cmd).await,
        ApiCommand::McpIntegrations(cmd) => super::api_mcp::mcp_integrations(&client, cmd).await,
        ApiCommand::McpServers(cmd) => super::api_mcp::mcp_servers(&client, cmd).await,
        ApiCommand::Guardrails(GuardrailsCommand::McpServers {
            guardrail,
            organisation,
        }) => {
            super::api_mcp::guardrail_mcp(&client, &guardrail, organisation, GuardrailMcp::List)
                .await
        }
        ApiCommand::Guardrails(GuardrailsCommand::SyncMcpServers {
            guardrail,
            organisation,
            body,
        }) => {
            let req = GuardrailMcp::Sync(body.read()?);
            super::api_mcp::guardrail_mcp(&client, &guardrail, organisation, req).await
        }
        ApiCommand::Guardrails(GuardrailsCommand::UpsertMcpServer {
            guardrail,
            server,
            organisation,
            body,
        }) => {
            let req = GuardrailMcp::Upsert(server, body.read()?);
            super::api_mcp::guardrail_mcp(&client, &guardrail, organisation, req).await
        }
    }
}

pub(crate) fn connect(args: &ConnectionArgs) -> anyhow::Result<Client> {
    let management_url = args
        .management_url
        .clone()
        .context("--management-url (or AIGW_MANAGEMENT_URL) is required")?;
    let token_file = args
        .token_file
        .as_ref()
        .context("--token-file (or AIGW_TOKEN_FILE) is required")?;
    let gateway_url = args
        .gateway_url
        .clone()
        .unwrap_or_else(|| format!("{}/v1", management_url.trim_end_matches('/')));
    let token = Arc::new(StaticToken::from_file(token_file)?);
    confide_credentials(&token, args);
    let mut config = ClientConfig::new(management_url, gateway_url, token).timeout(args.timeout);
    for (name, value) in &args.headers {
        config = config.header(name.clone(), SecretString::new(value.clone()));
    }
    Ok(Client::new(config)?)
}

async fn responses(client: &Client, cmd: ResponsesCommand) -> anyhow::Result<()> {
    let ResponsesCommand::Get { id, include } = cmd;
    let include: Vec<Includable> = include
        .iter()
        .map(|i| Includable::from(i.as_str()))
        .collect();
    print(&client.responses().get(&id, &include).await?)
}

async fn deployments(client: &Client, cmd: DeploymentsCommand) -> anyhow::Result<()> {
    let api = client.deployments();
    match cmd {
        DeploymentsCommand::List {
            status,
            deployment_type,
            search,
        } => {
            let query = DeploymentListQuery {
                status: status.as_deref().map(parse_enum).transpose()?,
                deployment_type: deployment_type.as_deref().map(parse_enum).transpose()?,
                search,
                ..Default::default()
            };
            print(&api.list(&query).await?)
        }
        DeploymentsCommand::Get { id } => print(&api.get(&id).await?),
        DeploymentsCommand::Create(body) => print(&api.create(&body.read()?).await?),
        DeploymentsCommand::Update(IdBody { id, body }) => {
            print(&api.update(&id, &body.read()?).await?)
        }
        DeploymentsCommand::Delete { id } => done(api.delete(&id)).await,
    }
}

async fn configs(client: &Client, cmd: ConfigsCommand) -> anyhow::Result<()> {
    let api = client.configs();
    match cmd {
        ConfigsCommand::List { workspace_id } => {
            print_masked(&api.list(workspace_id.as_deref()).await?)
        }
        ConfigsCommand::Get { slug } => print_masked(&api.get(&slug).await?),
        ConfigsCommand::Create(body) => print_masked(&api.create(&body.read()?).await?),
        ConfigsCommand::Update { slug, body } => {
            print_masked(&api.update(&slug, &body.read()?).await?)
        }
        ConfigsCommand::Delete { slug } => done(api.delete(&slug)).await,
        ConfigsCommand::Versions { slug, diff: None } => print_masked(&api.versions(&slug).await?),
        ConfigsCommand::Versions {
            slug,
            diff: Some(pair),
        } => {
            let versions = api.versions(&slug).await?;
            let (a, b) = (
                resolve_version(&slug, &versions, &pair[0])?,
                resolve_version(&slug, &versions, &pair[1])?,
            );
            // No Config names which paths come from Secrets here: `aigw history` knows them.
            write_stdout(&version_diff(
                &slug,
                &versions,
                (&a, &b),
                &Default::default(),
                &[],
            )?)
        }
    }
}

/// The calls of either policy collection (`L` says which).
async fn policies<L>(api: Endpoint<'_, LimitsPolicy<L>>, cmd: PolicyCommand) -> anyhow::Result<()>
where
    L: PolicyKind + Serialize,
    L::Filters: Default,
    L::Create: DeserializeOwned,
    L::Update: DeserializeOwned,
{
    match cmd {
        PolicyCommand::List { workspace_id } => {
            let query = PolicyListQuery {
                workspace_id,
                ..Default::default()
            };
            print(&api.list(&query).await?)
        }
        PolicyCommand::Get { id } => print(&api.get(&id).await?),
        PolicyCommand::Create(body) => print(&api.create(&body.read()?).await?),
        PolicyCommand::Update(IdBody { id, body }) => done(api.update(&id, &body.read()?)).await,
        PolicyCommand::Delete { id } => done(api.delete(&id)).await,
    }
}

async fn usage_limits(client: &Client, cmd: UsageLimitsCommand) -> anyhow::Result<()> {
    let api = client.usage_limits();
    match cmd {
        UsageLimitsCommand::Policy(cmd) => policies(api, cmd).await,
        UsageLimitsCommand::Entities { id } => print(&api.entities(&id).await?.items),
        UsageLimitsCommand::Reset { id, entity_id } => {
            done(api.reset_entity(&id, &entity_id)).await
        }
    }
}

async fn api_keys(client: &Client, cmd: ApiKeysCommand) -> anyhow::Result<()> {
    match cmd {
        ApiKeysCommand::List { kind, workspace_id } => {
            let query = ApiKeysListQuery {
                workspace_id,
                ..Default::default()
            };
            print(&client.api_keys(kind.kind()?).list(&query).await?)
        }
        ApiKeysCommand::Get { id, kind } => print(&client.api_keys(kind.kind()?).get(&id).await?),
        ApiKeysCommand::Create { kind, body } => {
            print(&client.api_keys(kind.kind()?).create(&body.read()?).await?)
        }
        ApiKeysCommand::Update { id, kind, body } => {
            done(client.api_keys(kind.kind()?).update(&id, &body.read()?)).await
        }
        ApiKeysCommand::Delete { id, kind } => {
            done(client.api_keys(kind.kind()?).delete(&id)).await
        }
        ApiKeysCommand::Rotate {
            id,
            kind,
            transition,
        } => {
            let req = transition.map_or_else(
                RotateApiKeyRequest::default,
                RotateApiKeyRequest::with_transition,
            );
            print(&client.api_keys(kind.kind()?).rotate(&id, &req).await?)
        }
    }
}

pub(super) fn read_body<T: DeserializeOwned>(file: &Path) -> anyhow::Result<T> {
    let text = if file == Path::new("-") {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("failed to read the request body from stdin")?;
        text
    } else {
        std::fs::read_to_string(file)
            .with_context(|| format!("failed to read the request body from {}", file.display()))?
    };
    let body: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("invalid request body in {}", file.display()))?;
    let mut secrets = Vec::new();
    sensitive_values(&body, false, &mut secrets);
    confided(secrets);
    // serde quotes the value it refuses, which may be one of those.
    serde_json::from_value(body)
        .with_context(|| format!("invalid request body in {}", file.display()))
}

/// The values of the request bodies' sensitive fields, the token and the `--header` values: an
/// API's error may echo what it was sent (a validator quoting what it refused, a 401 quoting the
/// token), and `main` conceals them in the error it prints.
static BODY_SECRETS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Adds `values` to those `main` conceals in an error ([`body_secrets`]).
fn confided(values: impl IntoIterator<Item = String>) {
    let mut known = BODY_SECRETS.lock().unwrap_or_else(|e| e.into_inner());
    known.extend(values.into_iter().filter(|value| !value.is_empty()));
}

/// Where values to conceal are known only later (the tokens a Connection's client obtains
/// while the command runs): asked when `main` prints an error.
type Later = Box<dyn Fn() -> Vec<String> + Send>;
static CONFIDED_LATER: std::sync::Mutex<Vec<Later>> = std::sync::Mutex::new(Vec::new());

/// `values` is asked, when `main` prints an error, for more values to conceal in it.
pub(crate) fn confide_later(values: impl Fn() -> Vec<String> + Send + 'static) {
    let mut later = CONFIDED_LATER.lock().unwrap_or_else(|e| e.into_inner());
    later.push(Box::new(values));
}

/// An API's error may quote the credentials it was sent: the token read from `--token-file`
/// and the `--header` values are concealed in what `main` prints. Not the values of headers
/// that describe the request (`Content-Type=application/json`): concealing them would withhold
/// every message that names the media type.
pub(crate) fn confide_credentials(token: &StaticToken, args: &ConnectionArgs) {
    use aigw::api::TokenSource;
    confided(token.handed_out().iter().map(|t| t.expose().to_string()));
    let describing = ["content-type", "accept", "user-agent"];
    let confidential = args
        .headers
        .iter()
        .filter(|(name, _)| !describing.contains(&name.to_ascii_lowercase().as_str()));
    confided(confidential.map(|(_, value)| value.clone()));
}

/// Fields whose whole value is sensitive, beside any secret-looking one: an integration's
/// `key`, a secret reference's `auth_config`, an (MCP) integration's `configurations`.
const SENSITIVE_BODY_FIELDS: &[&str] = &["key", "auth_config", "configurations"];

/// What [`read_body`] read of sensitive fields, the token and the header values, and what the
/// clients of Connections sent ([`confide_later`]), to conceal in an error.
pub fn body_secrets() -> Vec<String> {
    let mut values = BODY_SECRETS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let later = CONFIDED_LATER.lock().unwrap_or_else(|e| e.into_inner());
    values.extend(later.iter().flat_map(|values| values()));
    values.retain(|value| !value.is_empty());
    values
}

/// The string and number leaves of `value` below a sensitive field (`inside`: below one
/// already), a string holding JSON read as that JSON too.
fn sensitive_values(value: &serde_json::Value, inside: bool, out: &mut Vec<String>) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            for (field, value) in map {
                let sensitive = inside
                    || SENSITIVE_BODY_FIELDS.contains(&field.as_str())
                    || aigw::api::secret_fields::is_secret_key(field);
                sensitive_values(value, sensitive, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| sensitive_values(v, inside, out)),
        Value::String(text) if inside => {
            out.push(text.clone());
            if let Ok(json @ (Value::Object(_) | Value::Array(_))) = serde_json::from_str(text) {
                sensitive_values(&json, true, out);
            }
        }
        Value::Number(number) if inside => out.push(number.to_string()),
        _ => {}
    }
}

/// Parses a closed enum the way the API spells it (`non_production`, `archived`).
fn parse_enum<T: DeserializeOwned>(value: &str) -> anyhow::Result<T> {
    serde_json::from_value(serde_json::Value::String(value.to_owned()))
        .with_context(|| format!("unknown value {value:?}"))
}

fn parse_header(raw: &str) -> Result<(String, String), String> {
    match raw.split_once('=') {
        Some((name, value)) if !name.trim().is_empty() => {
            Ok((name.trim().to_owned(), value.to_owned()))
        }
        _ => Err("expected NAME=VALUE".to_owned()),
    }
}

/// The `version_id` of config `slug` that `id` names: the id itself, or the one version whose
/// id starts with it (`5a2c09de`, as `aigw history` lists them), as git takes a short commit.
pub(crate) fn resolve_version(
    slug: &str,
    versions: &[aigw::api::ConfigVersion],
    id: &str,
) -> anyhow::Result<String> {
    let ids: Vec<&str> = versions
        .iter()
        .filter_map(|v| v.detail.version_id.as_deref())
        .collect();
    if ids.contains(&id) {
        return Ok(id.to_string());
    }
    let starting: Vec<&str> = match id.is_empty() {
        true => Vec::new(),
        false => ids.into_iter().filter(|v| v.starts_with(id)).collect(),
    };
    match starting.as_slice() {
        [one] => Ok(one.to_string()),
        [] => anyhow::bail!(
            "config {slug} has no version {id} (nor one whose id starts with it): `aigw api configs versions {slug}` lists them"
        ),
        many => anyhow::bail!(
            "{id} starts {} versions of config {slug} ({}): give more of the id",
            many.len(),
            many.join(", ")
        ),
    }
}

/// The change from version `a` to version `b` of config `slug` (by `version_id`), as a line
/// diff of the documents. A secret (by the one secret list, and every value at `secret_refs`,
/// the pointers a Config fills from Secrets) shows as `<masked>` on A's side and
/// `<masked, changed>` on B's when it changed, so the diff says that it changed, never what it
/// is. A version of `paths_only` (one whose Secret paths are unknown) shows its paths only,
/// every value [`aigw::gitops::mask::HIDDEN`].
pub(crate) fn version_diff(
    slug: &str,
    versions: &[aigw::api::ConfigVersion],
    (a, b): (&str, &str),
    masking: &aigw::gitops::mask::Masking,
    paths_only: &[&str],
) -> anyhow::Result<String> {
    let find = |id: &str| {
        versions
            .iter()
            .find(|v| v.detail.version_id.as_deref() == Some(id))
            .map(|v| &v.detail.config)
            .with_context(|| format!("config {slug} has no version {id}"))
    };
    let (old, new) = (find(a)?, find(b)?);
    // What either version holds at a `secretRefs` path is hidden in both, wherever it sits.
    let mut masking = masking.clone();
    masking.learn(old);
    masking.learn(new);
    let (mut before, mut after) = (masking.masked(old), masking.masked_against(new, old));
    for (id, document) in [(a, &mut before), (b, &mut after)] {
        if paths_only.contains(&id) {
            aigw::gitops::mask::hide_unconfirmed(document, &serde_json::Value::Null, "");
        }
    }
    let before = serde_json::to_string_pretty(&before)?;
    let after = serde_json::to_string_pretty(&after)?;
    let lines = aigw::gitops::line_diff::diff(&before, &after);
    Ok(match lines.is_empty() {
        true => format!("no change between {a} and {b}"),
        false => lines.join("\n"),
    })
}

/// Prints `value` as pretty JSON, the userinfo of every URL in it hidden
/// (`https://(hidden)@host`: a `custom_host` or a webhook URL may carry credentials there), and
/// the value after each secret-looking key in its text (`Authorization: Bearer …`,
/// `?api_key=…`): an error the API relays (an MCP integration's `sync_error`, a webhook's last
/// failure) may quote the credential it was sent.
pub(super) fn print<T: Serialize>(value: &T) -> anyhow::Result<()> {
    use aigw::api::secret_fields::{
        secret_text_pointers, text_credentials_hidden, userinfo_pointers,
    };
    let read = serde_json::to_value(value)?;
    match userinfo_pointers(&read).is_empty() && secret_text_pointers(&read).is_empty() {
        true => write_stdout(&serde_json::to_string_pretty(value)?),
        false => write_stdout(&serde_json::to_string_pretty(&text_credentials_hidden(
            &read,
        ))?),
    }
}

/// Prints an answer holding config documents or guardrail checks with the value of every
/// credential key (`api_key`, `aws_secret_access_key`, …), secret-sounding key (`token`,
/// `password`, `Authorization`, …) and header map in them as [`MASK`]: their credentials may come
/// from Secrets (`spec.secretRefs`), which this command cannot tell, and an API that does not
/// mask them on read (or echoes a write) would put them on stdout. `configs versions --diff`
/// masks them as `aigw history --diff` does.
///
/// [`MASK`]: aigw::api::secret_fields::MASK
fn print_masked<T: Serialize>(answer: &T) -> anyhow::Result<()> {
    use aigw::api::secret_fields::{MASK, masked_with};
    print(&masked_with(&serde_json::to_value(answer)?, MASK, &|_| {
        false
    }))
}

/// Prints the answer to a create that sent Secret material (`key`, `auth_config`,
/// `configurations`): an API that echoes it in its receipt (kept whole, in `extra`) would put it
/// on stdout, as a `get` of the object never does. Every such field of the answer is hidden.
pub(super) fn print_receipt<T: Serialize>(receipt: &T) -> anyhow::Result<()> {
    let sensitive = |key: Option<&str>, value: &serde_json::Value| {
        key.is_some_and(|key| SENSITIVE_BODY_FIELDS.contains(&key)) && !value.is_null()
    };
    let answer = serde_json::to_value(receipt)?;
    let hidden = aigw::api::HIDDEN_CONFIGURATION;
    print(&aigw::api::secret_fields::masked_where(
        &answer, hidden, &sensitive,
    ))
}

/// Prints `rows`, each first passed through `shown`, which hides what must not reach stdout.
pub(super) fn print_rows<T, U: Serialize>(
    rows: Vec<T>,
    shown: impl FnMut(T) -> U,
) -> anyhow::Result<()> {
    print(&rows.into_iter().map(shown).collect::<Vec<_>>())
}

/// Waits for a call that answers nothing and prints `{}` for it.
pub(super) async fn done(
    call: impl std::future::Future<Output = Result<(), ApiError>>,
) -> anyhow::Result<()> {
    call.await?;
    write_stdout("{}")
}

/// Like `println!`, but a closed pipe (`aigw api … | head`) is not an error.
fn write_stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn versions(ids: &[&str]) -> Vec<aigw::api::ConfigVersion> {
        ids.iter()
            .map(|id| serde_json::from_value(serde_json::json!({"version_id": id})).unwrap())
            .collect()
    }

    /// A version is named by its id or by the start of it, as `aigw history` lists them; a start
    /// two versions share, or none has, is refused saying so.
    #[test]
    fn a_version_is_named_by_its_id_or_a_start_only_it_has() {
        let all = versions(&["5a2c09de-20b4", "13be36d7-2503", "13be99aa-0000"]);
        let resolve = |id: &str| resolve_version("pc-x", &all, id);
        assert_eq!(resolve("5a2c09de-20b4").unwrap(), "5a2c09de-20b4");
        assert_eq!(resolve("5a2c").unwrap(), "5a2c09de-20b4");
        assert_eq!(resolve("13be36").unwrap(), "13be36d7-2503");
        let shared = resolve("13be").unwrap_err().to_string();
        assert!(shared.contains("starts 2 versions"), "{shared}");
        let none = resolve("ffff").unwrap_err().to_string();
        assert!(none.contains("has no version ffff"), "{none}");
        assert!(resolve("").is_err());
    }
}
