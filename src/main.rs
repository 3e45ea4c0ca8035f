//! The `aigw` command line. Parsing and dispatch only; the work lives in the library.

mod cli;

/// jemalloc: the watch caches churn through many small objects, and glibc's per-thread arenas
/// kept freed list pages and status copies as resident memory.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read when it starts (`_RJEM_MALLOC_CONF` in the environment still
/// overrides them): one arena, since the operator's threads share the caches anyway and every
/// further arena kept pages of its own; and freed pages handed back to the system within a
/// second by a background thread, rather than kept for ten, which a restart's burst of
/// decoded list pages made the peak. `make bench-scale` at 10,000 Configs: peak RSS rollout /
/// restart 81.9 / 96.5 MiB with jemalloc's defaults, 77.8 / 84.9 MiB with these, at the same
/// CPU (Benchmark chapter).
#[cfg(feature = "jemalloc")]
#[unsafe(export_name = "_rjem_malloc_conf")]
static MALLOC_CONF: MallocConf =
    MallocConf(c"narenas:1,background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0".as_ptr());

/// A C string jemalloc reads at its start: immutable, so safe to share.
#[cfg(feature = "jemalloc")]
#[repr(transparent)]
struct MallocConf(*const std::ffi::c_char);

// SAFETY: the pointer is to a string literal, never written.
#[cfg(feature = "jemalloc")]
unsafe impl Sync for MallocConf {}

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "aigw",
    version,
    about = "GitOps operator for an AI gateway's management API"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the controllers against the cluster in the current kubeconfig context.
    Operator(cli::operator::OperatorArgs),
    /// Serve the management API and data-plane emulator on one port.
    Emulator(cli::emulator::EmulatorArgs),
    /// Print every CustomResourceDefinition as multi-document YAML.
    Crds(cli::crds::CrdsArgs),
    /// Print the argocd-cm ConfigMap that installs aigw's Argo CD health script.
    ArgocdCm(cli::argocd_cm::ArgocdCmArgs),
    /// Call the management API directly.
    Api(cli::api::ApiArgs),
    /// Check aigw manifests offline (exit 0 valid, 1 invalid).
    Validate(cli::validate::ValidateArgs),
    /// Show what applying manifests would change, reading the management API only
    /// (exit 0 no change, 2 changes, 1 error or conflict).
    Plan(cli::plan::PlanArgs),
    /// Write the tenant's objects as manifests: configs, active deployments, guardrails, policies,
    /// integrations, workspaces, MCP integrations, and with --workspace-id its providers and MCP
    /// servers.
    Export(cli::export::ExportArgs),
    /// List a Config's remote versions with the revision aigw applied each from, or diff two.
    History(cli::history::HistoryArgs),
    /// A ConfigRollout's step, cohorts' figures and decisions; promote or abort it.
    Rollout(cli::rollout::RolloutArgs),
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    // A usage error exits 1, not clap's 2: `aigw plan` exits 2 for "changes", and a typo in a
    // flag must not read as a plan. Help and version exit 0.
    let cli = match command()
        .try_get_matches()
        .and_then(|matches| Cli::from_arg_matches(&matches))
    {
        Ok(cli) => cli,
        // A usage error may echo an argument's value (a `--header` holding a bearer token):
        // hidden as any other error's.
        Err(usage) if usage.use_stderr() => {
            let text = usage.render().to_string();
            eprint!("{}", aigw::api::secret_fields::redact_text(&text));
            return std::process::ExitCode::FAILURE;
        }
        Err(help) => {
            let _ = help.print();
            return std::process::ExitCode::SUCCESS;
        }
    };
    match run(cli).await {
        Ok(code) => code,
        Err(e) => {
            // `{:#}` prints the cause chain on one line; never a backtrace. A value after a
            // secret-looking key, or of a sensitive field of a request body `aigw api` sent
            // (an API that echoed one back), is hidden.
            eprintln!("error: {}", cli::masked(&format!("{e:#}")));
            std::process::ExitCode::FAILURE
        }
    }
}

/// The command line, whose help never prints an environment variable's value (a token, a URL
/// with credentials): `[env: AIGW_EMULATOR_TOKEN]`, not its value.
fn command() -> clap::Command {
    fn values_hidden(command: clap::Command) -> clap::Command {
        command
            .mut_args(|arg| arg.hide_env_values(true))
            .mut_subcommands(values_hidden)
    }
    values_hidden(Cli::command())
}

/// The exit code: success for most commands; `validate` and `plan` say more with theirs.
async fn run(cli: Cli) -> anyhow::Result<std::process::ExitCode> {
    let done = std::process::ExitCode::SUCCESS;
    match cli.command {
        Command::Operator(args) => cli::operator::run(args).await.map(|()| done),
        Command::Emulator(args) => cli::emulator::run(args).await.map(|()| done),
        Command::Crds(args) => cli::crds::run(args).map(|()| done),
        Command::ArgocdCm(args) => cli::argocd_cm::run(args).map(|()| done),
        Command::Api(args) => cli::api::run(args).await.map(|()| done),
        Command::Validate(args) => cli::validate::run(args),
        Command::Plan(args) => cli::plan::run(args).await,
        Command::Export(args) => cli::export::run(args).await.map(|()| done),
        Command::History(args) => cli::history::run(args).await,
        Command::Rollout(args) => cli::rollout::run(args).await.map(|()| done),
    }
}
