//! The gateway's telemetry reads (FACTS-rest §9.1): `GET /ai_gw/v2/logs/groups/{dimension}` and
//! `GET /ai_gw/v2/logs/charts/{metric}`, with their window and camelCase filters. Only the routes
//! and filters verified on the live tenant are modelled; there is no config filter (none is
//! verified), so a cohort is a set of API keys or a metadata tag.

use std::collections::BTreeMap;
use std::fmt;

use jiff::{Timestamp, tz::TimeZone};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use serde_with::skip_serializing_none;

use super::validate;
use crate::api::error::ApiError;

/// A telemetry read's window and filters. Filters combine with AND; each list is an OR.
#[derive(Debug, Clone, PartialEq)]
pub struct TelemetryQuery {
    /// The numeric TSG id (`organisationId`).
    pub organisation_id: String,
    /// The workspace slug, not its UUID (`workspaceSlug`).
    pub workspace_slug: String,
    /// Window start (`timeOfGenerationMin`), sent with a numeric offset (`+00:00`): the API
    /// refuses a `Z` suffix.
    pub from: Timestamp,
    /// Window end (`timeOfGenerationMax`).
    pub to: Timestamp,
    pub trace_id: Option<String>,
    /// Exact match on each key (`metadata`, a JSON object of strings).
    pub metadata: BTreeMap<String, String>,
    /// `statusCode`.
    pub status_codes: Vec<u16>,
    /// `apiKeyIds`: API key UUIDs.
    pub api_key_ids: Vec<String>,
    /// `aiOrgModel`: `<ai_org>__<ai_model>` each.
    pub ai_org_models: Vec<String>,
    pub total_units_min: Option<u64>,
    pub total_units_max: Option<u64>,
    /// Cents.
    pub cost_min: Option<f64>,
    /// Cents.
    pub cost_max: Option<f64>,
}

/// ISO-8601 in UTC with a numeric offset, as the window parameters need.
pub fn offset_time(at: Timestamp) -> String {
    at.to_zoned(TimeZone::UTC)
        .strftime("%Y-%m-%dT%H:%M:%S%.3f%:z")
        .to_string()
}

impl TelemetryQuery {
    /// A window with no filters.
    pub fn window(
        organisation_id: impl Into<String>,
        workspace_slug: impl Into<String>,
        from: Timestamp,
        to: Timestamp,
    ) -> Self {
        Self {
            organisation_id: organisation_id.into(),
            workspace_slug: workspace_slug.into(),
            from,
            to,
            trace_id: None,
            metadata: BTreeMap::new(),
            status_codes: Vec::new(),
            api_key_ids: Vec::new(),
            ai_org_models: Vec::new(),
            total_units_min: None,
            total_units_max: None,
            cost_min: None,
            cost_max: None,
        }
    }

    /// Refuses what the API would: a TSG that is not numeric, an empty slug, a window that ends
    /// before it starts.
    pub fn check(&self) -> Result<(), ApiError> {
        if self.organisation_id.is_empty()
            || !self.organisation_id.bytes().all(|b| b.is_ascii_digit())
        {
            return Err(ApiError::validation(
                "organisationId",
                "must be the numeric TSG id",
            ));
        }
        validate::not_blank([("workspaceSlug", &self.workspace_slug)])?;
        if self.from > self.to {
            return Err(ApiError::validation(
                "timeOfGenerationMin",
                "must not be after timeOfGenerationMax",
            ));
        }
        Ok(())
    }

    /// The query string pairs, camelCase as the live API reads them.
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        let join = |items: &[String]| items.join(",");
        let mut pairs = vec![
            ("organisationId", self.organisation_id.clone()),
            ("workspaceSlug", self.workspace_slug.clone()),
            ("timeOfGenerationMin", offset_time(self.from)),
            ("timeOfGenerationMax", offset_time(self.to)),
        ];
        if let Some(trace_id) = &self.trace_id {
            pairs.push(("traceId", trace_id.clone()));
        }
        if !self.metadata.is_empty() {
            let metadata = serde_json::to_string(&self.metadata).unwrap_or_default();
            pairs.push(("metadata", metadata));
        }
        if !self.status_codes.is_empty() {
            let codes: Vec<String> = self.status_codes.iter().map(u16::to_string).collect();
            pairs.push(("statusCode", join(&codes)));
        }
        if !self.api_key_ids.is_empty() {
            pairs.push(("apiKeyIds", join(&self.api_key_ids)));
        }
        if !self.ai_org_models.is_empty() {
            pairs.push(("aiOrgModel", join(&self.ai_org_models)));
        }
        let numbers = [
            ("totalUnitsMin", self.total_units_min.map(|n| n.to_string())),
            ("totalUnitsMax", self.total_units_max.map(|n| n.to_string())),
            ("costMin", self.cost_min.map(|n| n.to_string())),
            ("costMax", self.cost_max.map(|n| n.to_string())),
        ];
        pairs.extend(
            numbers
                .into_iter()
                .filter_map(|(name, value)| value.map(|value| (name, value))),
        );
        pairs
    }
}

macro_rules! wire_names {
    ($(#[$meta:meta])* $name:ident { $($variant:ident => $wire:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $name {
            $($variant),+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $wire),+
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;

            fn from_str(text: &str) -> Result<Self, String> {
                Self::ALL
                    .iter()
                    .copied()
                    .find(|item| item.as_str() == text)
                    .ok_or_else(|| {
                        let names: Vec<&str> = Self::ALL.iter().map(|item| item.as_str()).collect();
                        format!("expected one of {}", names.join(", "))
                    })
            }
        }
    };
}

wire_names!(
    /// A `logs/groups` dimension with the `{object, is_quota_exceeded, total, data}` answer
    /// (`users` answers another shape: [`Telemetry::users`](crate::api::Telemetry::users)).
    GroupDimension {
        AiService => "ai_service",
        Model => "model",
        ApiKey => "api_key",
        Provider => "provider",
        StatusCode => "status_code",
    }
);

wire_names!(
    /// An optional column of a group row (`columns`).
    GroupColumn {
        Cost => "cost",
        AvgLatency => "avg_latency",
        AvgTokens => "avg_tokens",
        TotalTokens => "total_tokens",
        SuccessRate => "success_rate",
        LastSeen => "last_seen",
    }
);

wire_names!(
    /// A `logs/charts` metric whose answer is a count series (`{records: [{x, y}], total}`).
    CountMetric {
        Requests => "requests",
        Errors => "errors",
        Cost => "cost",
        Tokens => "tokens",
    }
);

/// `logs/groups/{dimension}`: groups ordered by requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupList {
    #[serde(default)]
    pub object: String,
    #[serde(default)]
    pub is_quota_exceeded: bool,
    #[serde(default)]
    pub total: f64,
    #[serde(default)]
    pub data: Vec<GroupRow>,
}

impl GroupList {
    /// The row whose dimension key (e.g. `api_key`) is `key` (a status code as its digits).
    pub fn row(&self, dimension: GroupDimension, key: &str) -> Option<&GroupRow> {
        self.data
            .iter()
            .find(|row| row.key(dimension).as_deref() == Some(key))
    }
}

/// One group. The dimension key (`api_key`, `status_code`, …) is among `extra`.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupRow {
    pub requests: f64,
    pub cost: Option<f64>,
    pub avg_latency: Option<f64>,
    pub avg_tokens: Option<f64>,
    pub total_tokens: Option<f64>,
    pub success_rate: Option<f64>,
    pub last_seen: Option<String>,
    pub object: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl GroupRow {
    /// The row's value of the dimension, as text.
    pub fn key(&self, dimension: GroupDimension) -> Option<String> {
        match self.extra.get(dimension.as_str())? {
            Value::String(text) => Some(text.clone()),
            other => Some(other.to_string()),
        }
    }
}

/// `logs/groups/users` (the `{success, data: {records, total}}` shape).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserGroups {
    #[serde(default)]
    pub records: Vec<UserGroup>,
    #[serde(default)]
    pub total: f64,
    #[serde(rename = "isQuotaExceeded", default)]
    pub is_quota_exceeded: bool,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One end user (`_user: ""` gathers calls with no end-user id).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserGroup {
    #[serde(rename = "_user", default)]
    pub user: String,
    #[serde(default)]
    pub count: f64,
    #[serde(default)]
    pub cost: f64,
}

/// A count series: `requests`, `errors`, `cost` (cents) or `tokens`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CountChart {
    #[serde(default)]
    pub records: Vec<ChartRecord>,
    /// The period total (`null` when the API has none).
    pub total: Option<f64>,
    #[serde(rename = "isQuotaExceeded", default)]
    pub is_quota_exceeded: bool,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One bucket (`x` is a date such as `2026-09-07`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChartRecord {
    pub x: String,
    pub y: f64,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `logs/charts/latency`, in milliseconds. The period mean (`total`) and percentiles are `None`
/// for an empty cohort; buckets stay, with zeros.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyChart {
    #[serde(default)]
    pub records: Vec<LatencyRecord>,
    pub total: Option<f64>,
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p99: Option<f64>,
    #[serde(rename = "isQuotaExceeded", default)]
    pub is_quota_exceeded: bool,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyRecord {
    pub x: String,
    pub y: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
}

/// What a canary analysis compares between cohorts, read from two calls
/// ([`Telemetry::cohort`](crate::api::Telemetry::cohort)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CohortFigures {
    /// Requests in the window.
    pub requests: u64,
    /// Requests answered 5xx.
    pub server_errors: u64,
    /// Requests the analysis counts as failed: 5xx, and 429 (a config's provider or limits
    /// refusing the load is the config's doing).
    pub errors: u64,
    /// Requests answered 4xx other than 429: the caller's own mistakes (a bad body, a revoked
    /// key), which a config neither causes nor fixes. Left out of the judged requests, so they
    /// neither dilute nor raise the error rate.
    pub client_errors: u64,
    /// `errors / (requests - client_errors)`; `None` when no request is judged.
    pub error_rate: Option<f64>,
    /// p90 latency in ms; `None` for an empty cohort.
    pub p90_ms: Option<f64>,
    /// Requests per status code.
    pub by_status: BTreeMap<u16, u64>,
}

/// The telemetry read the API capped ([`CohortFigures::capped`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capped {
    StatusCodes,
    Latency,
}

impl CohortFigures {
    /// Which read cannot be judged, if one cannot: an answer the API capped
    /// (`is_quota_exceeded`, "a capped query") may count only part of the cohort's requests,
    /// so it proves nothing either way. (The groups' `total` is not checked: whether it counts
    /// groups or requests is not established.)
    pub fn capped(statuses: &GroupList, latency: &LatencyChart) -> Option<Capped> {
        match (statuses.is_quota_exceeded, latency.is_quota_exceeded) {
            (true, _) => Some(Capped::StatusCodes),
            (false, true) => Some(Capped::Latency),
            (false, false) => None,
        }
    }

    /// The figures of a cohort from its `status_code` groups and its latency chart.
    pub fn from_reads(statuses: &GroupList, latency: &LatencyChart) -> Self {
        let by_status: BTreeMap<u16, u64> = statuses
            .data
            .iter()
            .filter_map(|row| {
                let code = row.key(GroupDimension::StatusCode)?.parse::<u16>().ok()?;
                Some((code, row.requests.max(0.0).round() as u64))
            })
            .collect();
        let requests = by_status.values().sum();
        let count = |wanted: &dyn Fn(u16) -> bool| -> u64 {
            by_status
                .iter()
                .filter(|(code, _)| wanted(**code))
                .map(|(_, count)| count)
                .sum()
        };
        let server_errors = count(&|code| code >= 500);
        let errors = count(&|code| code >= 500 || code == 429);
        let client_errors = count(&|code| (400..500).contains(&code) && code != 429);
        let judged = requests - client_errors;
        Self {
            requests,
            server_errors,
            errors,
            client_errors,
            error_rate: (judged > 0).then(|| errors as f64 / judged as f64),
            p90_ms: latency.p90,
            by_status,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capped_answer_is_not_judged() {
        let groups = |capped: bool, total: usize| -> GroupList {
            serde_json::from_value(serde_json::json!({"object": "list",
                "is_quota_exceeded": capped, "total": total,
                "data": [{"status_code": "200", "requests": 10}]}))
            .expect("groups")
        };
        let latency = |capped: bool| -> LatencyChart {
            serde_json::from_value(serde_json::json!({"records": [], "p90": 12.0,
                "isQuotaExceeded": capped}))
            .expect("latency")
        };
        assert_eq!(
            CohortFigures::capped(&groups(false, 1), &latency(false)),
            None
        );
        assert_eq!(
            CohortFigures::capped(&groups(true, 1), &latency(false)),
            Some(Capped::StatusCodes)
        );
        assert_eq!(
            CohortFigures::capped(&groups(false, 1), &latency(true)),
            Some(Capped::Latency)
        );
        // A `total` above the rows is left alone: it may count requests.
        assert_eq!(
            CohortFigures::capped(&groups(false, 10), &latency(false)),
            None
        );
    }

    #[test]
    fn the_window_is_sent_with_a_numeric_offset_and_filters_in_camel_case() {
        let from: Timestamp = "2026-09-07T00:00:00Z".parse().expect("time");
        let to: Timestamp = "2026-09-07T01:30:00.250Z".parse().expect("time");
        let mut query = TelemetryQuery::window("1234", "ws-main", from, to);
        query.api_key_ids = vec!["k1".into(), "k2".into()];
        query.status_codes = vec![500, 503];
        query.metadata.insert("aigw_canary".into(), "r1".into());
        let pairs = query.pairs();
        let get = |name: &str| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| value.as_str())
        };
        assert_eq!(
            get("timeOfGenerationMin"),
            Some("2026-09-07T00:00:00.000+00:00")
        );
        assert_eq!(
            get("timeOfGenerationMax"),
            Some("2026-09-07T01:30:00.250+00:00")
        );
        assert_eq!(get("apiKeyIds"), Some("k1,k2"));
        assert_eq!(get("statusCode"), Some("500,503"));
        assert_eq!(get("metadata"), Some(r#"{"aigw_canary":"r1"}"#));
        assert_eq!(get("traceId"), None);
        assert!(query.check().is_ok());
        query.organisation_id = "tsg-1".into();
        assert!(query.check().is_err());
    }

    /// A status-code group list as the API sends it, a row per `(status_code, requests)`.
    fn status_groups(rows: &[(u16, u64)]) -> GroupList {
        let data: Vec<_> = rows
            .iter()
            .map(|(code, requests)| {
                serde_json::json!({"status_code": code, "requests": requests, "object": "analytics-group"})
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "object": "list", "is_quota_exceeded": false, "total": rows.len(), "data": data}))
        .expect("groups")
    }

    /// A latency chart without records: its `total`, `p50`, `p90` and `p99` (`null` for none).
    fn latency_chart([total, p50, p90, p99]: [Option<f64>; 4]) -> LatencyChart {
        serde_json::from_value(serde_json::json!({
            "records": [], "total": total, "p50": p50, "p90": p90, "p99": p99,
            "isQuotaExceeded": false}))
        .expect("latency")
    }

    #[test]
    fn cohort_figures_count_5xx_as_errors_and_an_empty_cohort_as_none() {
        let statuses = status_groups(&[(200, 14), (503, 5), (429, 1)]);
        let latency = latency_chart([Some(12.0), Some(10.0), Some(30.0), Some(31.0)]);
        let figures = CohortFigures::from_reads(&statuses, &latency);
        assert_eq!((figures.requests, figures.server_errors), (20, 5));
        // 429 counts as an error (issue 31, F8): 6 of 20.
        assert_eq!((figures.errors, figures.client_errors), (6, 0));
        assert_eq!(figures.error_rate, Some(0.3));
        assert_eq!(figures.p90_ms, Some(30.0));
        let empty = status_groups(&[]);
        let nulls = latency_chart([None; 4]);
        let figures = CohortFigures::from_reads(&empty, &nulls);
        assert_eq!(
            (figures.requests, figures.error_rate, figures.p90_ms),
            (0, None, None)
        );
    }

    #[test]
    fn client_errors_other_than_429_are_not_judged() {
        let statuses = status_groups(&[(200, 10), (400, 70), (401, 10), (502, 10)]);
        let latency = latency_chart([Some(1.0); 4]);
        let figures = CohortFigures::from_reads(&statuses, &latency);
        // 80 bad requests of the caller's would have diluted 10 5xx to 0.1: judged on the 20
        // others, the rate is 0.5.
        assert_eq!(
            (figures.requests, figures.client_errors, figures.errors),
            (100, 80, 10)
        );
        assert_eq!(figures.error_rate, Some(0.5));
        let only_4xx = status_groups(&[(404, 5)]);
        let figures = CohortFigures::from_reads(&only_4xx, &latency);
        assert_eq!((figures.requests, figures.error_rate), (5, None));
    }

    #[test]
    fn wire_names_parse_back() {
        for dimension in GroupDimension::ALL {
            assert_eq!(dimension.as_str().parse::<GroupDimension>(), Ok(*dimension));
        }
        assert!("users".parse::<GroupDimension>().is_err());
        assert_eq!(
            "success_rate".parse::<GroupColumn>(),
            Ok(GroupColumn::SuccessRate)
        );
    }
}
