//! `aigw history config/NAME`: the remote versions of a Config beside what aigw recorded for
//! each (the `aigw.io/revision` it was applied from, when), and `--diff A B` between two.

use std::process::ExitCode;

use anyhow::Context;

use super::plan::{TargetArgs, client, live};
use crate::cli::api::{resolve_version, version_diff};
use aigw::resources::Config;

#[derive(clap::Args)]
pub struct HistoryArgs {
    /// `config/NAME`: the resource whose remote versions to list (Configs have versions).
    resource: String,
    /// Its namespace; default: the kubeconfig context's.
    #[arg(long, short = 'n', value_name = "NS")]
    namespace: Option<String>,
    /// Print the change from version A to version B (`version_id`s, or starts of them no other
    /// version shares) instead of the list; a
    /// secret shows as `<masked>`, `<masked, changed>` on B's side when it changed.
    #[arg(long, num_args = 2, value_names = ["A", "B"])]
    diff: Option<Vec<String>>,
    #[command(flatten)]
    target: TargetArgs,
}

pub async fn run(args: HistoryArgs) -> anyhow::Result<ExitCode> {
    let name = match args.resource.split_once('/') {
        Some(("config" | "configs" | "Config" | "configs.aigw.io", name)) if !name.is_empty() => {
            name.to_string()
        }
        _ => anyhow::bail!(
            "{}: name a Config as config/NAME (the kind whose updates make remote versions)",
            args.resource
        ),
    };
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let path = args
        .target
        .kubeconfig
        .clone()
        .or_else(|| default_kubeconfig(std::env::var_os("KUBECONFIG"), home))
        .context("aigw history reads the resource's status: pass --kubeconfig (or AIGW_KUBECONFIG), or set KUBECONFIG")?;
    let live = live(&path).await?;
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| live.default_namespace.clone());
    let config = kube::Api::<Config>::namespaced(live.client.clone(), &namespace)
        .get(&name)
        .await
        .with_context(|| format!("failed to read Config {namespace}/{name}"))?;
    let status = config.status.clone().unwrap_or_default();
    let slug = status.slug.clone().with_context(|| {
        format!("Config {namespace}/{name} has no remote config yet (no status.slug)")
    })?;
    let api = client(&args.target, Some(&live)).await?;
    let versions = api
        .configs()
        .versions(&slug)
        .await
        .with_context(|| format!("failed to list the versions of config {slug}"))?;
    if let Some(given) = &args.diff {
        let pair = [
            resolve_version(&slug, &versions, &given[0])?,
            resolve_version(&slug, &versions, &given[1])?,
        ];
        // Every Secret this Config named, now or in a version it recorded, is read and its
        // value hidden wherever it sits; one that cannot be read hides by its key names.
        let mut refs = config.spec.secret_refs.clone();
        refs.extend(
            status
                .history
                .iter()
                .flat_map(|v| v.secret_refs.iter().cloned()),
        );
        let mut masking = aigw::gitops::mask::Masking::default();
        let kube = Some((&live.client, namespace.as_str()));
        aigw::gitops::mask::add_references(&mut masking, kube, "", &refs).await;
        // A version not in the recorded history (older than the versions `status.history`
        // keeps, or made outside aigw): which of its values came from Secrets is unknown.
        let unrecorded: Vec<&str> = pair
            .iter()
            .map(String::as_str)
            .filter(|id| {
                !status
                    .history
                    .iter()
                    .any(|v| v.version_id.as_deref() == Some(*id))
            })
            .collect();
        for id in &unrecorded {
            eprintln!(
                "note: version {id} is not in the history Config {namespace}/{name} records (older than the {} versions status.history keeps, or made outside aigw): the Secrets its values came from are unknown, so it shows its paths only, each value {}",
                aigw::resources::config::HISTORY_LIMIT,
                aigw::gitops::mask::HIDDEN
            );
        }
        let diff = version_diff(
            &slug,
            &versions,
            (&pair[0], &pair[1]),
            &masking,
            &unrecorded,
        )?;
        super::write_stdout(&diff)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut lines = vec![format!(
        "{:<38}{:<26}{:<14}{}",
        "VERSION", "CREATED", "REVISION", "APPLIED BY AIGW"
    )];
    for version in &versions {
        let id = version.detail.version_id.clone().unwrap_or_default();
        let created = version
            .version_created_at
            .clone()
            .or(version.detail.last_updated_at.clone())
            .unwrap_or_default();
        let applied = status
            .history
            .iter()
            .find(|entry| entry.version_id.as_deref() == Some(id.as_str()));
        let revision = applied
            .and_then(|entry| entry.revision.clone())
            .unwrap_or_else(|| "-".into());
        let by_aigw = applied
            .map(|entry| entry.applied_at.clone())
            .unwrap_or_else(|| "no (made outside aigw, or older than its history)".into());
        lines.push(format!("{id:<38}{created:<26}{revision:<14}{by_aigw}"));
    }
    super::write_stdout(&lines.join("\n"))?;
    Ok(ExitCode::SUCCESS)
}

/// The kubeconfig kubectl would read when none is given: the first file `KUBECONFIG` lists,
/// else `~/.kube/config` when it exists.
fn default_kubeconfig(
    listed: Option<std::ffi::OsString>,
    home: Option<std::path::PathBuf>,
) -> Option<std::path::PathBuf> {
    let listed =
        listed.and_then(|paths| std::env::split_paths(&paths).find(|p| !p.as_os_str().is_empty()));
    listed.or_else(|| {
        let file = home?.join(".kube").join("config");
        file.exists().then_some(file)
    })
}

#[cfg(test)]
mod tests {
    use super::default_kubeconfig;

    #[test]
    fn the_default_kubeconfig_is_kubectls() {
        let listed = Some(std::ffi::OsString::from(":/tmp/a.yaml:/tmp/b.yaml"));
        assert_eq!(default_kubeconfig(listed, None), Some("/tmp/a.yaml".into()));
        let home = std::env::temp_dir().join(format!("aigw-history-home-{}", std::process::id()));
        assert_eq!(default_kubeconfig(None, Some(home.clone())), None);
        std::fs::create_dir_all(home.join(".kube")).unwrap();
        std::fs::write(home.join(".kube/config"), "").unwrap();
        assert_eq!(
            default_kubeconfig(None, Some(home.clone())),
            Some(home.join(".kube/config"))
        );
        std::fs::remove_dir_all(&home).unwrap();
    }
}
