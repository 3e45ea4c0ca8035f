//! `aigw argocd-cm`: print the argocd-cm ConfigMap installing aigw's Argo CD health script.

#[derive(clap::Args)]
pub struct ArgocdCmArgs {
    /// One key per kind instead of one wildcard key for the group, for an Argo CD that cannot
    /// take wildcard keys.
    #[arg(long)]
    per_kind: bool,
}

pub fn run(args: ArgocdCmArgs) -> anyhow::Result<()> {
    print!("{}", aigw::argocd::config_map(args.per_kind));
    Ok(())
}
