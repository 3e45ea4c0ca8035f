//! `aigw export --out DIR`: the tenant as manifests (see `aigw::gitops::export`).

use std::path::PathBuf;

use aigw::gitops::GitopsError;
use aigw::gitops::export::{ExportOptions, add_secret_names, export, live_names, live_secret_refs};
use aigw::gitops::validate::{counted, dns1123_label};

use super::plan::{TargetArgs, client, connection_name, live};

#[derive(clap::Args)]
pub struct ExportArgs {
    /// Directory to write the manifests and `kustomization.yaml` into (created when missing).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Only the configs, guardrails and policies of this workspace, and its providers and MCP
    /// servers (exported per workspace only). Organisation objects (deployments, cluster
    /// guardrails, integrations, workspaces, MCP integrations) are always exported.
    #[arg(long, value_name = "ID")]
    workspace_id: Option<String>,
    /// `metadata.namespace` of every manifest; without it, kubectl or kustomize decides.
    #[arg(long, value_name = "NS")]
    namespace: Option<String>,
    /// With `--kubeconfig`: leave out each object a resource of that cluster manages already
    /// (said skipped: that resource is its manifest). For an export to be applied to the
    /// cluster it read; without it, each such object is exported (and said), and applied there
    /// it would be a second resource for its object (stalled `AlreadyManaged`).
    #[arg(long, requires = "kubeconfig")]
    skip_managed: bool,
    #[command(flatten)]
    target: TargetArgs,
}

pub async fn run(args: ExportArgs) -> anyhow::Result<()> {
    if let Some(ns) = &args.namespace {
        dns1123_label(ns).map_err(|why| anyhow::anyhow!("--namespace {ns:?}: {why}"))?;
    }
    // Applied, the manifests reach the tenant they were read from.
    let connection = connection_name(&args.target)?;
    let live = match &args.target.kubeconfig {
        Some(path) => Some(live(path).await?),
        None => None,
    };
    let api = client(&args.target, live.as_ref()).await?;
    // Values aigw substitutes from Secrets may sit at paths whose key does not look secret (a
    // hook id): only the live resources' secretRefs say where. Without a kubeconfig they are
    // unknown, and only values at secret-looking keys are held back.
    let live_secret_refs = match &live {
        Some(live) => live_secret_refs(&live.client).await?,
        None => {
            eprintln!(
                "note: without --kubeconfig, values that aigw substitutes from Secrets at paths that do not look secret (a hook id, a guardrail parameter) cannot be recognised; review the files before committing them"
            );
            Default::default()
        }
    };
    // Which objects the cluster's resources manage already: said, or with --skip-managed left
    // out. Without --skip-managed, a cluster whose resources cannot be listed (no right to list
    // every kind, a kind not installed) only leaves that unsaid.
    let mut live_names = match &live {
        Some(live) => match live_names(&live.client).await {
            Ok(names) => Some(names),
            Err(e) if !args.skip_managed => {
                eprintln!(
                    "warning: {}: which objects the cluster's resources manage already is not said, and manifests may take their names",
                    with_cause(&e)
                );
                // Still read for the Secrets' names below.
                Some(Default::default())
            }
            Err(e) => return Err(e.into()),
        },
        None => None,
    };
    // No Secret an export names (a placeholder, a Deployment's credentials) takes a live
    // Secret's name: applied, a placeholder's empty values would overwrite what that Secret
    // holds. Only names are kept, never a value. With --skip-managed (an export for the cluster
    // it read) a failed list stops the export, as a failed list of the kinds does.
    if let (Some(live), Some(names)) = (&live, &mut live_names)
        && let Err(e) = add_secret_names(&live.client, names).await
    {
        if args.skip_managed {
            return Err(e.into());
        }
        eprintln!(
            "warning: {}: the Secrets the manifests name (NAME-secrets, NAME-upstream, NAME-credentials) are not checked against the cluster's; applied over one of the same name, a placeholder's empty values would overwrite it, so check their names before applying",
            with_cause(&e)
        );
    }
    let options = ExportOptions {
        namespace: args.namespace.clone(),
        workspace_id: args.workspace_id.clone(),
        live_secret_refs: live_secret_refs.refs,
        live_secret_owners: live_secret_refs.owners,
        live_masking: live_secret_refs.masking,
        live_integration_refs: live_secret_refs.integration_refs,
        live_unapplied_integrations: live_secret_refs.unapplied_integrations,
        live_recorded: live.as_ref().map(|_| live_secret_refs.recorded),
        live_names,
        skip_managed: args.skip_managed,
        connection,
    };
    let exported = export(&api, &options).await?;
    exported.write(&args.out)?;
    for skipped in &exported.skipped {
        eprintln!("skipped {skipped}");
    }
    if !exported.unrecognised.is_empty() {
        eprintln!(
            "note: no live resource records {}: values taken from Secrets at paths that do not look secret (a hook id, a guardrail parameter) cannot be recognised in them; review those files before committing them",
            exported.unrecognised.join(", ")
        );
    }
    if !exported.dangling.is_empty() {
        eprintln!(
            "note: {} exported configs name guardrails that none of the guardrails read has ({}): applied, each waits (Stalled, UnresolvedGuardrail) and writes nothing until the guardrail exists; create it, or take the reference out of the document",
            exported.dangling.len(),
            super::first_few(&exported.dangling)
        );
    }
    if !exported.borrowed.is_empty() {
        let namespace = match &args.namespace {
            Some(namespace) => format!("for {namespace}"),
            None => "for a namespace not given".to_string(),
        };
        eprintln!(
            "note: {} exported manifests take values from the Secrets of a live resource in another namespace than they are {namespace} ({}): where they are applied, Secrets of those names must hold the same values, or theirs are sent to the API instead",
            exported.borrowed.len(),
            super::first_few(&exported.borrowed)
        );
    }
    if !exported.managed.is_empty() {
        eprintln!(
            "note: {} exported objects are managed already by resources of the cluster ({}): applied to that cluster, each manifest would be a second resource for its object and stall as AlreadyManaged; pass --skip-managed to leave them out",
            exported.managed.len(),
            super::first_few(&exported.managed)
        );
    }
    let out = args.out.display();
    let said = match counted(&exported.counts) {
        // `files` ends with kustomization.yaml.
        Some(counts) => {
            let manifests = exported.files.len().saturating_sub(1);
            let s = if manifests == 1 { "" } else { "s" };
            format!("exported {counts} to {out}: {manifests} manifest{s} and kustomization.yaml")
        }
        None => format!("exported nothing to {out}: it holds an empty kustomization.yaml"),
    };
    super::write_stdout(&said)
}

/// `e` with why the apiserver refused (its Status message: `… is forbidden: User … cannot
/// list …`), masked as every error the CLI prints is ([`super::masked`]): a body that was no
/// Status (a proxy's, which may echo the request) is told by its HTTP code alone, and any
/// other failure by its class (an exec plugin's output, a decoder's quote stay unprinted).
fn with_cause(e: &GitopsError) -> String {
    let GitopsError::Kube { what, source } = e else {
        return super::masked(&e.to_string());
    };
    let cause = match source {
        kube::Error::Api(status)
            if status.message.is_empty() || status.reason == "Failed to parse error data" =>
        {
            format!("HTTP {}", status.code)
        }
        kube::Error::Api(status) => status.message.clone(),
        kube::Error::Auth(_) => "the kubeconfig's credentials failed".to_string(),
        kube::Error::HyperError(_) | kube::Error::Service(_) => {
            "the apiserver could not be reached".to_string()
        }
        _ => "the request failed".to_string(),
    };
    super::masked(&format!("{what}: {cause}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(code: u16, reason: &str, message: &str) -> GitopsError {
        let status = kube::core::Status::failure(message, reason).with_code(code);
        GitopsError::Kube {
            what: "failed to list Deployments".into(),
            source: kube::Error::Api(Box::new(status)),
        }
    }

    /// A warning says why the apiserver refused, but never what a proxy's body (no Status)
    /// echoed back: only its HTTP code.
    #[test]
    fn a_warning_gives_the_apiserver_reason_and_never_a_raw_body() {
        let forbidden = refused(
            403,
            "Forbidden",
            "deployments.aigw.io is forbidden: User \"u\" cannot list resource \"deployments\"",
        );
        assert_eq!(
            with_cause(&forbidden),
            "failed to list Deployments: deployments.aigw.io is forbidden: User \"u\" cannot list resource \"deployments\""
        );
        let echoed = refused(
            403,
            "Failed to parse error data",
            "denied: Authorization: Bearer eyJ-echoed-token",
        );
        assert_eq!(with_cause(&echoed), "failed to list Deployments: HTTP 403");
        let empty = refused(500, "InternalError", "");
        assert_eq!(with_cause(&empty), "failed to list Deployments: HTTP 500");
    }
}
