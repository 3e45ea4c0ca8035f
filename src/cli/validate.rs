//! `aigw validate -f PATH`: offline checks of aigw manifests (see `aigw::gitops::validate`).

use std::path::PathBuf;
use std::process::ExitCode;

use aigw::gitops::{load, validate::Validator};

#[derive(clap::Args)]
pub struct ValidateArgs {
    #[command(flatten)]
    manifests: Manifests,
    /// The `--min-rotation-interval` of the operator the manifests are for: a shorter
    /// `spec.rotation.interval` is refused (the operator would raise it).
    #[arg(long, env = "AIGW_MIN_ROTATION_INTERVAL", default_value = "1h", value_parser = humantime::parse_duration, value_name = "DUR")]
    min_rotation_interval: std::time::Duration,
}

/// The `-f` manifests of `aigw validate` and `aigw plan`.
#[derive(clap::Args)]
pub struct Manifests {
    /// Manifest file, directory (searched recursively for *.yaml, *.yml, *.json) or `-` for
    /// stdin, e.g. the output of `kustomize build overlays/prod`; repeatable.
    #[arg(
        short = 'f',
        long = "filename",
        alias = "file",
        required = true,
        value_name = "PATH"
    )]
    pub files: Vec<PathBuf>,
}

/// Prints one line per problem, then a summary; exit 0 when valid, 1 otherwise.
pub fn run(args: ValidateArgs) -> anyhow::Result<ExitCode> {
    let loaded = load::load(&args.manifests.files)?;
    let report = Validator::new()
        .with_min_rotation_interval(args.min_rotation_interval)
        .validate(&loaded);
    let mut text = String::new();
    for problem in &report.problems {
        text.push_str(&format!("{problem}\n"));
    }
    text.push_str(&report.summary());
    super::write_stdout(&text)?;
    Ok(if report.is_valid() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
