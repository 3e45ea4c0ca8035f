//! `aigw crds`.

pub fn run() -> anyhow::Result<()> {
    anyhow::bail!("aigw crds is not built yet")
}
