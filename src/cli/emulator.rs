//! `aigw emulator`.

#[derive(clap::Args)]
pub struct EmulatorArgs {}

pub async fn run(_args: EmulatorArgs) -> anyhow::Result<()> {
    anyhow::bail!("aigw emulator is not built yet")
}
