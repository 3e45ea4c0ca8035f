//! `aigw api`.

#[derive(clap::Args)]
pub struct ApiArgs {}

pub async fn run(_args: ApiArgs) -> anyhow::Result<()> {
    anyhow::bail!("aigw api is not built yet")
}
