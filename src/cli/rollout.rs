//! `aigw rollout status|promote|abort NAME`: a ConfigRollout's step, cohorts' figures and
//! decisions, and the manual actions (the `aigw.io/rollout-action` annotation the operator
//! acts on).

use std::path::PathBuf;

use anyhow::Context;
use kube::api::{Api, Patch};

use aigw::resources::config_rollout::{
    ACTION_ANNOTATION, ConfigRollout, ConfigRolloutStatus, Phase,
};
use aigw::resources::rollout_plan::describe;

#[derive(clap::Args)]
pub struct RolloutArgs {
    #[command(subcommand)]
    command: RolloutCommand,
}

#[derive(clap::Subcommand)]
enum RolloutCommand {
    /// Where a rollout stands: phase, step, the keys on the candidate, the last analysis's
    /// figures for both cohorts, and the decisions.
    Status {
        #[command(flatten)]
        target: Target,
        /// `text` (default) or `json` (the rollout's status as the cluster holds it).
        #[arg(long, short = 'o', default_value = "text", value_parser = ["text", "json"])]
        output: String,
    },
    /// Complete the rollout now: every selected key goes to the candidate (sets
    /// `aigw.io/rollout-action: promote`).
    Promote {
        #[command(flatten)]
        target: Target,
    },
    /// Roll the rollout back now: every moved key returns to the stable Config (sets
    /// `aigw.io/rollout-action: abort`).
    Abort {
        #[command(flatten)]
        target: Target,
    },
}

#[derive(clap::Args)]
struct Target {
    /// The ConfigRollout's name.
    name: String,
    /// Its namespace; default: the kubeconfig context's.
    #[arg(long, short = 'n', value_name = "NS")]
    namespace: Option<String>,
    /// Kubeconfig; default: `KUBECONFIG`, `~/.kube/config`, or the in-cluster config.
    #[arg(long, env = "AIGW_KUBECONFIG", value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
}

impl Target {
    async fn api(&self) -> anyhow::Result<(Api<ConfigRollout>, String)> {
        let (client, default_namespace) = match &self.kubeconfig {
            Some(path) => {
                let live = super::plan::live(path).await?;
                (live.client, live.default_namespace)
            }
            None => {
                let config = kube::Config::infer()
                    .await
                    .context("no kubeconfig found: pass --kubeconfig")?;
                let namespace = config.default_namespace.clone();
                let client = super::kube_client(config)?;
                (client, namespace)
            }
        };
        let namespace = self.namespace.clone().unwrap_or(default_namespace);
        Ok((Api::namespaced(client, &namespace), namespace))
    }
}

pub async fn run(args: RolloutArgs) -> anyhow::Result<()> {
    match args.command {
        RolloutCommand::Status { target, output } => {
            let (api, namespace) = target.api().await?;
            let rollout = api.get(&target.name).await.with_context(|| {
                format!("failed to read ConfigRollout {namespace}/{}", target.name)
            })?;
            let text = match output.as_str() {
                "json" => serde_json::to_string_pretty(&rollout.status)?,
                _ => status_text(&namespace, &rollout),
            };
            super::write_stdout(&text)
        }
        RolloutCommand::Promote { target } => act(&target, "promote").await,
        RolloutCommand::Abort { target } => act(&target, "abort").await,
    }
}

async fn act(target: &Target, action: &str) -> anyhow::Result<()> {
    let (api, namespace) = target.api().await?;
    let patch = serde_json::json!({"metadata": {"annotations": {ACTION_ANNOTATION: action}}});
    api.patch(
        &target.name,
        &aigw::controller::runtime::apiserver::written_by("aigw-cli"),
        &Patch::Merge(&patch),
    )
    .await
    .with_context(|| {
        format!(
            "failed to annotate ConfigRollout {namespace}/{}",
            target.name
        )
    })?;
    super::write_stdout(&format!(
        "ConfigRollout {namespace}/{}: {ACTION_ANNOTATION}={action} set; the operator acts on it at its next reconcile (aigw rollout status {} -n {namespace})",
        target.name, target.name
    ))
}

/// The status as a few lines, the way Argo Rollouts shows an AnalysisRun.
pub fn status_text(namespace: &str, rollout: &ConfigRollout) -> String {
    let status: ConfigRolloutStatus = rollout.status.clone().unwrap_or_default();
    let spec = &rollout.spec;
    let name = rollout.metadata.name.clone().unwrap_or_default();
    let step = status
        .current_step
        .map_or("-".to_string(), |s| s.to_string());
    let weight = status.weight.map_or("-".to_string(), |w| format!("{w}%"));
    let mut lines = vec![
        format!(
            "ConfigRollout {namespace}/{name}: {:?}, step {step} of {} ({weight})",
            status.phase,
            spec.steps.len()
        ),
        format!(
            "  stable Config {} ({}), candidate Config {} ({})",
            spec.stable_config_ref.name,
            status.stable_config_id.as_deref().unwrap_or("-"),
            spec.candidate_config_ref.name,
            status.candidate_config_id.as_deref().unwrap_or("-"),
        ),
        format!(
            "  {} ({}): {}",
            // Rolled back or aborted, the keys it moved are back on (or returning to) stable.
            match status.phase {
                Phase::RolledBack | Phase::Aborted => "keys it moved, back to their own defaults",
                _ => "keys on the candidate",
            },
            status.moved_keys.len(),
            match status.moved_keys.is_empty() {
                true => "none".to_string(),
                false => status.moved_keys.join(", "),
            }
        ),
    ];
    for condition in &status.conditions {
        if condition.status == "True" || condition.type_ == "Ready" {
            lines.push(format!(
                "  {}={} {}: {}",
                condition.type_, condition.status, condition.reason, condition.message
            ));
        }
    }
    if let Some(analysis) = &status.analysis {
        lines.push(format!(
            "  analysis of step {}, {} to {}:",
            analysis.step, analysis.from, analysis.to
        ));
        lines.push(format!("    candidate: {}", describe(&analysis.candidate)));
        lines.push(format!("    stable:    {}", describe(&analysis.stable)));
    }
    if !status.decisions.is_empty() {
        lines.push("  decisions:".into());
        for decision in &status.decisions {
            lines.push(format!(
                "    {}  step {}  {:<8}  {}",
                decision.at,
                decision.step,
                decision.decision.as_str(),
                decision.message
            ));
        }
    }
    lines.join("\n")
}
