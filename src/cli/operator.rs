//! `aigw operator`.

#[derive(clap::Args)]
pub struct OperatorArgs {}

pub async fn run(_args: OperatorArgs) -> anyhow::Result<()> {
    anyhow::bail!("aigw operator is not built yet")
}
