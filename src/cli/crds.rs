//! `aigw crds`: print every CRD, and the admission policies bounding their free-form fields, as
//! multi-document YAML (what `crds/` holds).

use std::path::PathBuf;

#[derive(clap::Args)]
pub struct CrdsArgs {
    /// Write one file per kind into this directory instead of printing (what `make crds` does).
    #[arg(long, value_name = "DIR")]
    out_dir: Option<PathBuf>,
}

pub fn run(args: CrdsArgs) -> anyhow::Result<()> {
    let Some(dir) = args.out_dir else {
        print!("{}", aigw::resources::crds_yaml()?);
        return Ok(());
    };
    std::fs::create_dir_all(&dir)?;
    for (file, crd) in aigw::resources::crds() {
        std::fs::write(dir.join(file), aigw::resources::crd_yaml(&crd)?)?;
    }
    std::fs::write(
        dir.join(aigw::resources::ADMISSION_POLICIES_FILE),
        aigw::resources::admission_policies_yaml()?,
    )?;
    Ok(())
}
