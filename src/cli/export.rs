//! `aigw export --out DIR`: the tenant as manifests (see `aigw::gitops::export`).

use std::path::PathBuf;

use aigw::gitops::export::{ExportOptions, export};
use aigw::gitops::validate::dns1123_label;

use super::plan::{TargetArgs, client, live};

#[derive(clap::Args)]
pub struct ExportArgs {
    /// Directory to write the manifests and `kustomization.yaml` into (created when missing).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Only the configs and rate-limits policies of this workspace (deployments belong to the
    /// organisation and are always exported).
    #[arg(long, value_name = "ID")]
    workspace_id: Option<String>,
    /// `metadata.namespace` of every manifest; without it, kubectl or kustomize decides.
    #[arg(long, value_name = "NS")]
    namespace: Option<String>,
    #[command(flatten)]
    target: TargetArgs,
}

pub async fn run(args: ExportArgs) -> anyhow::Result<()> {
    if let Some(ns) = &args.namespace {
        dns1123_label(ns).map_err(|why| anyhow::anyhow!("--namespace {ns:?}: {why}"))?;
    }
    let live = match &args.target.kubeconfig {
        Some(path) => Some(live(path).await?),
        None => None,
    };
    let api = client(&args.target, live.as_ref()).await?;
    let options = ExportOptions {
        namespace: args.namespace.clone(),
        workspace_id: args.workspace_id.clone(),
    };
    let exported = export(&api, &options).await?;
    exported.write(&args.out)?;
    for skipped in &exported.skipped {
        eprintln!("skipped {skipped}");
    }
    let counts: Vec<String> = exported
        .counts
        .iter()
        .map(|(kind, n)| format!("{n} {kind}"))
        .collect();
    let counts = if counts.is_empty() {
        "nothing".to_string()
    } else {
        counts.join(", ")
    };
    super::write_stdout(&format!(
        "exported {counts} to {} ({} files with kustomization.yaml)",
        args.out.display(),
        exported.files.len()
    ))
}
