//! The `aigw` command line. Parsing and dispatch only; the work lives in the library.

mod cli;

use clap::{Parser, Subcommand};

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
    /// Call the management API directly.
    Api(cli::api::ApiArgs),
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // `{:#}` prints the cause chain on one line; never a backtrace.
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Operator(args) => cli::operator::run(args).await,
        Command::Emulator(args) => cli::emulator::run(args).await,
        Command::Crds(args) => cli::crds::run(args),
        Command::Api(args) => cli::api::run(args).await,
    }
}
