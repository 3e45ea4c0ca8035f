//! `aigw api telemetry …`: the gateway's telemetry reads (`/ai_gw/v2/logs/groups/*` and
//! `/logs/charts/*`) over a window, narrowed by the verified filters. Nothing here is secret.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use jiff::{SignedDuration, Timestamp};

use aigw::api::{Client, CountMetric, GroupColumn, GroupDimension, TelemetryQuery};

use super::api::print;

#[derive(Subcommand)]
pub(super) enum TelemetryCommand {
    /// Requests per group: ai_service, model, api_key, provider, status_code, or users.
    Groups {
        /// ai_service, model, api_key, provider, status_code or users.
        dimension: String,
        /// Extra columns, comma-separated: cost, avg_latency, avg_tokens, total_tokens,
        /// success_rate, last_seen (not for users).
        #[arg(long, value_delimiter = ',')]
        columns: Vec<String>,
        #[command(flatten)]
        window: WindowArgs,
    },
    /// A canary's figures for the cohort the filters select: requests, 5xx count and rate, p90
    /// latency, requests per status code.
    Cohort {
        #[command(flatten)]
        window: WindowArgs,
    },
    /// A chart over the window: requests, errors, cost, tokens or latency.
    Chart {
        /// requests, errors, cost (cents), tokens or latency (ms, with p50/p90/p99).
        metric: String,
        #[command(flatten)]
        window: WindowArgs,
    },
}

/// The window and the filters every read takes.
#[derive(Args)]
pub(super) struct WindowArgs {
    /// The numeric TSG id.
    #[arg(long, env = "AIGW_ORGANISATION_ID")]
    organisation_id: String,
    /// The workspace slug (not its UUID).
    #[arg(long)]
    workspace_slug: String,
    /// The window ends this long before `--to`, e.g. `1h`.
    #[arg(long, default_value = "1h", value_parser = humantime::parse_duration, value_name = "DUR",
          conflicts_with = "from")]
    since: Duration,
    /// Window start, RFC 3339 (sent with a numeric offset).
    #[arg(long, value_name = "TIME")]
    from: Option<Timestamp>,
    /// Window end, RFC 3339. Default: now.
    #[arg(long, value_name = "TIME")]
    to: Option<Timestamp>,
    /// Only these API keys (UUIDs); repeatable or comma-separated.
    #[arg(long = "api-key-id", value_delimiter = ',', value_name = "ID")]
    api_key_ids: Vec<String>,
    /// Only these status codes; repeatable or comma-separated.
    #[arg(long = "status-code", value_delimiter = ',', value_name = "CODE")]
    status_codes: Vec<u16>,
    /// Only requests whose metadata has KEY=VALUE; repeatable (all must match).
    #[arg(long = "metadata", value_name = "KEY=VALUE", value_parser = parse_pair)]
    metadata: Vec<(String, String)>,
    /// Only this trace id.
    #[arg(long)]
    trace_id: Option<String>,
    /// Only these `<ai_org>__<ai_model>` pairs; repeatable or comma-separated.
    #[arg(
        long = "ai-org-model",
        value_delimiter = ',',
        value_name = "ORG__MODEL"
    )]
    ai_org_models: Vec<String>,
}

fn parse_pair(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .ok_or_else(|| "expected KEY=VALUE".to_owned())
}

impl WindowArgs {
    fn query(self) -> anyhow::Result<TelemetryQuery> {
        let to = self.to.unwrap_or_else(Timestamp::now);
        let from = match self.from {
            Some(from) => from,
            None => {
                let since = SignedDuration::try_from(self.since).context("--since is too long")?;
                to.checked_sub(since).context("--since is too long")?
            }
        };
        let mut query = TelemetryQuery::window(self.organisation_id, self.workspace_slug, from, to);
        query.api_key_ids = self.api_key_ids;
        query.status_codes = self.status_codes;
        query.metadata = self.metadata.into_iter().collect::<BTreeMap<_, _>>();
        query.trace_id = self.trace_id;
        query.ai_org_models = self.ai_org_models;
        Ok(query)
    }
}

/// `text` as a `T`; the error names the argument (`what`) and the one other value it takes.
fn parse_or<T: std::str::FromStr<Err = String>>(
    text: &str,
    what: &str,
    other: &str,
) -> anyhow::Result<T> {
    text.parse()
        .map_err(|err: String| anyhow::anyhow!("{what}: {err} or {other}"))
}

pub(super) async fn telemetry(client: &Client, cmd: TelemetryCommand) -> anyhow::Result<()> {
    let telemetry = client.telemetry();
    match cmd {
        TelemetryCommand::Groups {
            dimension,
            columns,
            window,
        } => {
            let query = window.query()?;
            if dimension == "users" {
                return print(&telemetry.users(&query).await?);
            }
            let dimension: GroupDimension = parse_or(&dimension, "dimension", "users")?;
            let columns = columns
                .iter()
                .map(|column| column.parse::<GroupColumn>())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|err| anyhow::anyhow!("--columns: {err}"))?;
            print(&telemetry.groups(dimension, &query, &columns).await?)
        }
        TelemetryCommand::Cohort { window } => print(&telemetry.cohort(&window.query()?).await?),
        TelemetryCommand::Chart { metric, window } => {
            let query = window.query()?;
            if metric == "latency" {
                return print(&telemetry.latency(&query).await?);
            }
            let metric: CountMetric = parse_or(&metric, "metric", "latency")?;
            print(&telemetry.count(metric, &query).await?)
        }
    }
}
