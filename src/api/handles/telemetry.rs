use serde::de::DeserializeOwned;

use crate::api::client::Call;
use crate::api::error::ApiError;
use crate::api::models::{
    Capped, CohortFigures, CountChart, CountMetric, GroupColumn, GroupDimension, GroupList,
    LatencyChart, TelemetryQuery, UserGroups,
};
use crate::api::routes::{LOG_CHART, LOG_GROUP, Route, Verb};

/// The gateway's telemetry (`/ai_gw/v2/logs/groups/*`, `/ai_gw/v2/logs/charts/*`): reads only.
pub type Telemetry<'c> = super::Endpoint<'c, TelemetryQuery>;

impl Telemetry<'_> {
    /// `GET /logs/groups/{dimension}` with the asked `columns`.
    pub async fn groups(
        &self,
        dimension: GroupDimension,
        query: &TelemetryQuery,
        columns: &[GroupColumn],
    ) -> Result<GroupList, ApiError> {
        query.check()?;
        let mut pairs = query.pairs();
        if !columns.is_empty() {
            let names: Vec<&str> = columns.iter().map(|column| column.as_str()).collect();
            pairs.push(("columns", names.join(",")));
        }
        let route = Route::mgmt(Verb::Get, LOG_GROUP, &[dimension.as_str()]);
        self.client.json(Call::new(route).query(pairs)).await
    }

    /// `GET /logs/groups/users`: requests and cost per end user.
    pub async fn users(&self, query: &TelemetryQuery) -> Result<UserGroups, ApiError> {
        self.read(LOG_GROUP, "users", query).await
    }

    /// `GET /logs/charts/{requests|errors|cost|tokens}`.
    pub async fn count(
        &self,
        metric: CountMetric,
        query: &TelemetryQuery,
    ) -> Result<CountChart, ApiError> {
        self.read(LOG_CHART, metric.as_str(), query).await
    }

    /// `GET /logs/charts/latency`: mean and p50/p90/p99 in milliseconds, `None` for an empty
    /// cohort.
    pub async fn latency(&self, query: &TelemetryQuery) -> Result<LatencyChart, ApiError> {
        self.read(LOG_CHART, "latency", query).await
    }

    /// A canary's figures for one cohort (`query` narrowed to its keys or metadata): requests,
    /// 5xx count and rate, and p90 latency, from `groups/status_code` and `charts/latency`.
    /// A capped answer ([`CohortFigures::capped`]) is an error: waited for like telemetry
    /// that cannot be read, never judged.
    pub async fn cohort(&self, query: &TelemetryQuery) -> Result<CohortFigures, ApiError> {
        let statuses = self.groups(GroupDimension::StatusCode, query, &[]).await?;
        let latency = self.latency(query).await?;
        if let Some(capped) = CohortFigures::capped(&statuses, &latency) {
            let endpoint = match capped {
                Capped::StatusCodes => LOG_GROUP,
                Capped::Latency => LOG_CHART,
            };
            return Err(ApiError::Incomplete {
                method: "GET",
                endpoint,
                reason: "the API capped the query (isQuotaExceeded), so it may count only part of the cohort's requests".into(),
            });
        }
        Ok(CohortFigures::from_reads(&statuses, &latency))
    }

    /// `GET` of the group or chart `template` names by `name`, narrowed by `query`.
    async fn read<T: DeserializeOwned>(
        &self,
        template: &'static str,
        name: &str,
        query: &TelemetryQuery,
    ) -> Result<T, ApiError> {
        query.check()?;
        let route = Route::mgmt(Verb::Get, template, &[name]);
        self.client
            .json(Call::new(route).query(query.pairs()))
            .await
    }
}
