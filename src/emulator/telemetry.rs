//! The data plane's request log and the telemetry reads over it: the two routes FACTS-rest §9.1
//! records as verified on the live tenant, `GET /ai_gw/v2/logs/groups/{dimension}` and
//! `GET /ai_gw/v2/logs/charts/{metric}`.
//!
//! Every request the data plane authenticated is one row ([`LogRow`]). A read takes the window
//! (`organisationId` as a numeric TSG, `workspaceSlug`, `timeOfGenerationMin` and
//! `timeOfGenerationMax` as ISO-8601 with a numeric offset; a `Z` suffix is refused with `AB01`,
//! as live) and the camelCase filters, ANDed: `traceId`, `metadata` (a JSON object of strings,
//! exact match on each key), `statusCode` and `apiKeyIds` (comma lists, OR), `aiOrgModel`
//! (`<ai_org>__<ai_model>`, OR), `totalUnitsMin/Max`, `costMin/Max` (inclusive; cents).
//! Snake_case names are ignored, as live. Groups also take `columns`.
//!
//! Where the emulator had to choose (no source says):
//! - a row's `workspace_slug` is the slug of the key's workspace (its `workspace_id` when the
//!   emulator has no such workspace), `ai_org` and `provider` are the target's provider slug;
//! - a row is a success (`is_success` 1) when its status is 2xx; `errors`, `error-trends`,
//!   `error-category-trends` and `success_rate` count the others;
//! - buckets are UTC days (`x` = `2026-09-07`), one per day of the window, empty ones with zeros;
//! - percentiles are nearest-rank; `success_rate` is a percentage like `errorPercent`;
//! - cost is one cent per 1000 tokens;
//! - filters narrow `requests`, `cost`, `tokens` and `latency` and every group, the reads
//!   FACTS-rest says they were verified on; every other chart takes the window only;
//! - the charts of users, caches, feedback and retries answer 501: the emulator does not model
//!   them.
//!
//! An empty cohort reads as the live API reads it: counts 0, and the latency mean and
//! percentiles `null` (zero-valued buckets stay).

use std::collections::{BTreeMap, VecDeque};

use axum::{
    Json,
    extract::{Path, Query, State},
};
use jiff::{Timestamp, civil::Date, tz::TimeZone};
use serde_json::{Map, Value, json};

use super::common::{
    errors::{ApiResult, EmulatorError},
    state::{KindState, lock},
};

/// What the telemetry routes reach.
pub type TelemetryState = KindState<TelemetryLog>;

/// Rows kept; the oldest go first.
const MAX_ROWS: usize = 200_000;
/// The longest window a chart buckets, in days.
const MAX_DAYS: i64 = 1_000;
/// Cents per token.
pub const CENTS_PER_TOKEN: f64 = 0.001;

pub const DIMENSIONS: &[&str] = &[
    "ai_service",
    "model",
    "api_key",
    "provider",
    "status_code",
    "users",
];
pub const METRICS: &[&str] = &[
    "cost",
    "requests",
    "latency",
    "tokens",
    "errors",
    "users",
    "cache-summary",
    "cache-hit-trend",
    "user-trends",
    "error-trends",
    "error-category-trends",
    "grouped-errors",
    "rescued-retries",
    "feedback-trend",
    "feedback-weighted",
    "feedback-score-distribution",
    "feedback-models",
];
const COLUMNS: &[&str] = &[
    "cost",
    "avg_latency",
    "avg_tokens",
    "total_tokens",
    "success_rate",
    "last_seen",
];

/// One request through the data plane.
#[derive(Clone, Debug)]
pub struct LogRow {
    pub id: String,
    pub created_at: Timestamp,
    pub workspace_slug: String,
    pub api_key_id: String,
    pub config_id: Option<String>,
    pub config_slug: Option<String>,
    pub config_version_id: Option<String>,
    /// The provider slug of the target that answered last (empty when none was reached).
    pub provider: String,
    pub ai_model: String,
    pub status: u16,
    pub latency_ms: u64,
    pub request_units: u64,
    pub response_units: u64,
    pub trace_id: String,
    pub metadata: BTreeMap<String, String>,
    pub mode: String,
    pub option_index: usize,
    /// Provider calls the request took (retries and fallbacks included).
    pub attempts: usize,
    pub request_url: String,
}

impl LogRow {
    pub fn total_units(&self) -> u64 {
        self.request_units + self.response_units
    }

    /// In cents.
    pub fn cost(&self) -> f64 {
        self.total_units() as f64 * CENTS_PER_TOKEN
    }

    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    fn user(&self) -> &str {
        self.metadata.get("_user").map_or("", String::as_str)
    }

    /// The row as `GET /_emulator/state` shows it: the live log row's fields, plus the config.
    pub fn dump(&self) -> Value {
        let (keys, values): (Vec<&String>, Vec<&String>) = self.metadata.iter().unzip();
        json!({
            "id": self.id,
            "created_at": timestamp(self.created_at),
            "workspace_slug": self.workspace_slug,
            "api_key_id": self.api_key_id,
            "config_id": self.config_id,
            "config_slug": self.config_slug,
            "config_version_id": self.config_version_id,
            "provider": self.provider,
            "ai_org": self.provider,
            "ai_model": self.ai_model,
            "response_status_code": self.status,
            "is_success": u8::from(self.is_success()),
            "latency_ms": self.latency_ms,
            "request_units": self.request_units,
            "response_units": self.response_units,
            "total_units": self.total_units(),
            "cost": self.cost(),
            "trace_id": self.trace_id,
            "metadataKey": keys,
            "metadataValue": values,
            "_user": self.user(),
            "mode": self.mode,
            "last_used_option_index": self.option_index,
            "attempts": self.attempts,
            "request_url": self.request_url,
            "request_method": "POST",
        })
    }
}

fn timestamp(at: Timestamp) -> String {
    at.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// The data plane's request log, oldest first.
#[derive(Default)]
pub struct TelemetryLog {
    rows: VecDeque<LogRow>,
}

impl TelemetryLog {
    pub fn push(&mut self, row: LogRow) {
        if self.rows.len() == MAX_ROWS {
            self.rows.pop_front();
        }
        self.rows.push_back(row);
    }

    /// Every row (for `GET /_emulator/state`).
    pub fn dump(&self) -> Vec<Value> {
        self.rows.iter().map(LogRow::dump).collect()
    }
}

/// A telemetry read's window and filters.
#[derive(Debug, Default)]
struct Filters {
    min: Option<Timestamp>,
    max: Option<Timestamp>,
    workspace: String,
    trace_id: Option<String>,
    metadata: Option<BTreeMap<String, String>>,
    status_codes: Option<Vec<u16>>,
    api_key_ids: Option<Vec<String>>,
    ai_org_models: Option<Vec<(String, String)>>,
    units_min: Option<u64>,
    units_max: Option<u64>,
    cost_min: Option<f64>,
    cost_max: Option<f64>,
    columns: Vec<String>,
}

fn invalid(message: impl Into<String>) -> EmulatorError {
    EmulatorError::validation(message)
}

/// `2026-09-07T00:00:00+00:00`: ISO-8601 with a numeric offset; a `Z` suffix is refused.
fn offset_time(name: &str, text: &str) -> ApiResult<Timestamp> {
    if text.ends_with(['Z', 'z']) {
        return Err(invalid(format!(
            "{name} must carry a numeric UTC offset (e.g. +00:00), not Z"
        )));
    }
    text.parse::<Timestamp>().map_err(|_| {
        invalid(format!(
            "{name} must be an ISO-8601 date-time with a UTC offset"
        ))
    })
}

fn comma_list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect()
}

fn number<T: std::str::FromStr>(name: &str, text: &str) -> ApiResult<T> {
    text.trim()
        .parse()
        .map_err(|_| invalid(format!("{name} must be a number >= 0")))
}

impl Filters {
    fn parse(pairs: &[(String, String)]) -> ApiResult<Self> {
        let mut filters = Self::default();
        let mut organisation = None;
        let mut workspace = None;
        for (name, value) in pairs {
            match name.as_str() {
                "organisationId" => organisation = Some(value.clone()),
                "workspaceSlug" => workspace = Some(value.clone()),
                "timeOfGenerationMin" => filters.min = Some(offset_time(name, value)?),
                "timeOfGenerationMax" => filters.max = Some(offset_time(name, value)?),
                "traceId" => filters.trace_id = Some(value.clone()),
                "metadata" => filters.metadata = Some(metadata_filter(value)?),
                "statusCode" => {
                    let codes = comma_list(value)
                        .iter()
                        .map(|code| {
                            code.parse::<u16>().map_err(|_| {
                                invalid("statusCode must be a comma-separated list of status codes")
                            })
                        })
                        .collect::<ApiResult<Vec<_>>>()?;
                    filters.status_codes = Some(codes);
                }
                "apiKeyIds" => filters.api_key_ids = Some(comma_list(value)),
                "aiOrgModel" => {
                    let pairs = comma_list(value)
                        .iter()
                        .map(|item| {
                            item.split_once("__")
                                .map(|(org, model)| (org.to_owned(), model.to_owned()))
                                .ok_or_else(|| invalid("aiOrgModel items are <ai_org>__<ai_model>"))
                        })
                        .collect::<ApiResult<Vec<_>>>()?;
                    filters.ai_org_models = Some(pairs);
                }
                "totalUnitsMin" => filters.units_min = Some(number(name, value)?),
                "totalUnitsMax" => filters.units_max = Some(number(name, value)?),
                "costMin" => filters.cost_min = Some(number(name, value)?),
                "costMax" => filters.cost_max = Some(number(name, value)?),
                "columns" => {
                    filters.columns = comma_list(value)
                        .into_iter()
                        .filter(|column| COLUMNS.contains(&column.as_str()))
                        .collect();
                }
                _ => {}
            }
        }
        match organisation {
            Some(id) if !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) => {}
            Some(_) => return Err(invalid("organisationId must be the numeric TSG id")),
            None => return Err(invalid("organisationId is required")),
        }
        filters.workspace = workspace
            .filter(|slug| !slug.is_empty())
            .ok_or_else(|| invalid("workspaceSlug is required"))?;
        let (Some(min), Some(max)) = (filters.min, filters.max) else {
            return Err(invalid(
                "timeOfGenerationMin and timeOfGenerationMax are required",
            ));
        };
        if min > max {
            return Err(invalid(
                "timeOfGenerationMin must not be after timeOfGenerationMax",
            ));
        }
        if days(min, max).len() as i64 > MAX_DAYS {
            return Err(invalid(format!(
                "the window spans more than {MAX_DAYS} days"
            )));
        }
        Ok(filters)
    }

    /// In the window and the workspace.
    fn in_window(&self, row: &LogRow) -> bool {
        self.min.is_none_or(|min| row.created_at >= min)
            && self.max.is_none_or(|max| row.created_at <= max)
            && row.workspace_slug == self.workspace
    }

    /// In the window and through every filter.
    fn matches(&self, row: &LogRow) -> bool {
        self.in_window(row)
            && self.trace_id.as_ref().is_none_or(|id| &row.trace_id == id)
            && self.metadata.as_ref().is_none_or(|wanted| {
                wanted
                    .iter()
                    .all(|(key, value)| row.metadata.get(key) == Some(value))
            })
            && self
                .status_codes
                .as_ref()
                .is_none_or(|codes| codes.contains(&row.status))
            && self
                .api_key_ids
                .as_ref()
                .is_none_or(|ids| ids.contains(&row.api_key_id))
            && self.ai_org_models.as_ref().is_none_or(|pairs| {
                pairs
                    .iter()
                    .any(|(org, model)| *org == row.provider && *model == row.ai_model)
            })
            && self.units_min.is_none_or(|min| row.total_units() >= min)
            && self.units_max.is_none_or(|max| row.total_units() <= max)
            && self.cost_min.is_none_or(|min| row.cost() >= min)
            && self.cost_max.is_none_or(|max| row.cost() <= max)
    }
}

fn metadata_filter(text: &str) -> ApiResult<BTreeMap<String, String>> {
    let not_an_object = || invalid("metadata must be a JSON object of string values");
    let value: Value = serde_json::from_str(text).map_err(|_| not_an_object())?;
    value
        .as_object()
        .ok_or_else(not_an_object)?
        .iter()
        .map(|(key, value)| {
            value
                .as_str()
                .map(|value| (key.clone(), value.to_owned()))
                .ok_or_else(not_an_object)
        })
        .collect()
}

/// The UTC days of a window, in order.
fn days(min: Timestamp, max: Timestamp) -> Vec<Date> {
    let first = min.to_zoned(TimeZone::UTC).date();
    let last = max.to_zoned(TimeZone::UTC).date();
    let mut out = Vec::new();
    let mut day = first;
    while day <= last && (out.len() as i64) <= MAX_DAYS {
        out.push(day);
        match day.tomorrow() {
            Ok(next) => day = next,
            Err(_) => break,
        }
    }
    out
}

fn day_of(row: &LogRow) -> Date {
    row.created_at.to_zoned(TimeZone::UTC).date()
}

/// Nearest-rank percentile of sorted values (`None` when empty).
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

fn latency_figures(rows: &[&LogRow]) -> (Option<f64>, [Option<f64>; 3]) {
    let mut values: Vec<f64> = rows.iter().map(|row| row.latency_ms as f64).collect();
    values.sort_by(f64::total_cmp);
    (
        mean(&values),
        [0.5, 0.9, 0.99].map(|p| percentile(&values, p)),
    )
}

fn error_percent(rows: &[&LogRow]) -> f64 {
    if rows.is_empty() {
        return 0.0;
    }
    let errors = rows.iter().filter(|row| !row.is_success()).count();
    errors as f64 * 100.0 / rows.len() as f64
}

/// `GET /ai_gw/v2/logs/groups/{dimension}`.
pub async fn groups(
    State(state): State<TelemetryState>,
    Path(dimension): Path<String>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> ApiResult<Json<Value>> {
    if !DIMENSIONS.contains(&dimension.as_str()) {
        return Err(invalid(format!(
            "dimension must be one of {}",
            DIMENSIONS.join(", ")
        )));
    }
    let filters = Filters::parse(&pairs)?;
    let log = lock(&state.store);
    let rows: Vec<&LogRow> = log.rows.iter().filter(|row| filters.matches(row)).collect();
    Ok(Json(group_answer(&dimension, &rows, &filters.columns)))
}

fn group_key(dimension: &str, row: &LogRow) -> Value {
    match dimension {
        "ai_service" | "provider" => json!(row.provider),
        "model" => json!(row.ai_model),
        "api_key" => json!(row.api_key_id),
        "status_code" => json!(row.status),
        _ => json!(row.user()),
    }
}

fn group_answer(dimension: &str, rows: &[&LogRow], columns: &[String]) -> Value {
    let mut groups: BTreeMap<String, (Value, Vec<&LogRow>)> = BTreeMap::new();
    for row in rows {
        let key = group_key(dimension, row);
        groups
            .entry(key.to_string())
            .or_insert_with(|| (key, Vec::new()))
            .1
            .push(row);
    }
    let mut groups: Vec<(Value, Vec<&LogRow>)> = groups.into_values().collect();
    groups.sort_by_key(|group| std::cmp::Reverse(group.1.len()));
    if dimension == "users" {
        let records: Vec<Value> = groups
            .iter()
            .map(|(user, rows)| {
                let cost: f64 = rows.iter().map(|row| row.cost()).sum();
                json!({"_user": user, "count": rows.len(), "cost": cost})
            })
            .collect();
        return json!({"success": true, "data": {"total": records.len(), "records": records,
                                                "isQuotaExceeded": false}});
    }
    let data: Vec<Value> = groups
        .iter()
        .map(|(key, rows)| {
            let mut item = Map::new();
            item.insert(dimension.to_owned(), key.clone());
            item.insert("requests".to_owned(), json!(rows.len()));
            for column in columns {
                let tokens: u64 = rows.iter().map(|row| row.total_units()).sum();
                let value = match column.as_str() {
                    "cost" => json!(rows.iter().map(|row| row.cost()).sum::<f64>()),
                    "avg_latency" => json!(latency_figures(rows).0.unwrap_or(0.0)),
                    "avg_tokens" => json!(tokens as f64 / rows.len() as f64),
                    "total_tokens" => json!(tokens),
                    "success_rate" => json!(100.0 - error_percent(rows)),
                    _ => json!(
                        rows.iter()
                            .map(|row| row.created_at)
                            .max()
                            .map(timestamp)
                            .unwrap_or_default()
                    ),
                };
                item.insert(column.clone(), value);
            }
            item.insert("object".to_owned(), json!("analytics-group"));
            Value::Object(item)
        })
        .collect();
    json!({"object": "list", "is_quota_exceeded": false, "total": data.len(), "data": data})
}

/// `GET /ai_gw/v2/logs/charts/{metric}`.
pub async fn charts(
    State(state): State<TelemetryState>,
    Path(metric): Path<String>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> ApiResult<Json<Value>> {
    if !METRICS.contains(&metric.as_str()) {
        return Err(invalid(format!(
            "metric must be one of {}",
            METRICS.join(", ")
        )));
    }
    let filters = Filters::parse(&pairs)?;
    let filtered = matches!(metric.as_str(), "requests" | "cost" | "tokens" | "latency");
    let log = lock(&state.store);
    let rows: Vec<&LogRow> = log
        .rows
        .iter()
        .filter(|row| {
            if filtered {
                filters.matches(row)
            } else {
                filters.in_window(row)
            }
        })
        .collect();
    let (Some(min), Some(max)) = (filters.min, filters.max) else {
        return Err(invalid("the window is required"));
    };
    let data = chart(&metric, &days(min, max), &rows).ok_or_else(|| {
        EmulatorError::NotModelled(format!(
            "the {metric} chart is not modelled by the emulator"
        ))
    })?;
    Ok(Json(json!({"success": true, "data": data})))
}

/// The `data` of a chart, or `None` for a metric the emulator does not model.
fn chart(metric: &str, days: &[Date], rows: &[&LogRow]) -> Option<Value> {
    let per_day: Vec<(String, Vec<&LogRow>)> = days
        .iter()
        .map(|day| {
            let of_day = rows
                .iter()
                .copied()
                .filter(|row| day_of(row) == *day)
                .collect();
            (day.to_string(), of_day)
        })
        .collect();
    let errors = |rows: &[&LogRow]| rows.iter().filter(|row| !row.is_success()).count();
    let data = match metric {
        "requests" => {
            let records: Vec<Value> = per_day
                .iter()
                .map(|(x, rows)| {
                    json!({"x": x, "y": rows.len(), "llm_count": rows.len(),
                           "llm_error_count": errors(rows)})
                })
                .collect();
            json!({"records": records, "total": rows.len(), "total_llm_count": rows.len(),
                   "total_llm_error_count": errors(rows), "isQuotaExceeded": false})
        }
        "errors" => {
            let records: Vec<Value> = per_day
                .iter()
                .map(
                    |(x, rows)| json!({"x": x, "y": errors(rows), "llm_error_count": errors(rows)}),
                )
                .collect();
            json!({"records": records, "total": errors(rows),
                   "total_llm_error_count": errors(rows), "isQuotaExceeded": false})
        }
        "latency" => {
            let records: Vec<Value> = per_day
                .iter()
                .map(|(x, rows)| {
                    let (mean, [p50, p90, p99]) = latency_figures(rows);
                    json!({"x": x, "y": mean.unwrap_or(0.0), "p50": p50.unwrap_or(0.0),
                           "p90": p90.unwrap_or(0.0), "p99": p99.unwrap_or(0.0)})
                })
                .collect();
            let (mean, [p50, p90, p99]) = latency_figures(rows);
            json!({"records": records, "total": mean, "p50": p50, "p90": p90, "p99": p99,
                   "isQuotaExceeded": false})
        }
        "cost" => {
            let cost = |rows: &[&LogRow]| rows.iter().map(|row| row.cost()).sum::<f64>();
            let avg = |rows: &[&LogRow]| cost(rows) / rows.len().max(1) as f64;
            let records: Vec<Value> = per_day
                .iter()
                .map(|(x, rows)| json!({"x": x, "y": cost(rows), "avg": avg(rows)}))
                .collect();
            json!({"records": records, "total": cost(rows), "avg": avg(rows),
                   "isQuotaExceeded": false})
        }
        "tokens" => {
            let sums = |rows: &[&LogRow]| {
                let request: u64 = rows.iter().map(|row| row.request_units).sum();
                let response: u64 = rows.iter().map(|row| row.response_units).sum();
                let avg = (request + response) as f64 / rows.len().max(1) as f64;
                (request, response, avg)
            };
            let records: Vec<Value> = per_day
                .iter()
                .map(|(x, rows)| {
                    let (request, response, avg) = sums(rows);
                    json!({"x": x, "y": request + response, "total_request_units": request,
                           "total_response_units": response, "avg": avg})
                })
                .collect();
            let (request, response, avg) = sums(rows);
            json!({"records": records, "total": request + response, "avg": avg,
                   "total_request_units": request, "total_response_units": response,
                   "isQuotaExceeded": false})
        }
        "error-trends" => {
            let trend: Vec<Value> = per_day
                .iter()
                .map(|(x, rows)| json!({"x": x, "y": error_percent(rows)}))
                .collect();
            json!({"summary": {"errorPercent": error_percent(rows)}, "trend": trend,
                   "isQuotaExceeded": false})
        }
        "error-category-trends" => {
            let mut counts: BTreeMap<u16, u64> = BTreeMap::new();
            for row in rows.iter().filter(|row| !row.is_success()) {
                *counts.entry(row.status).or_default() += 1;
            }
            let trend: Vec<Value> = counts
                .iter()
                .map(|(code, count)| json!({"response_status_code": code, "count": count}))
                .collect();
            json!({"summary": {"totalErrors": errors(rows), "totalUniqueErrorCodes": counts.len()},
                   "trend": trend, "isQuotaExceeded": false})
        }
        _ => return None,
    };
    Some(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    const WINDOW: &[(&str, &str)] = &[
        ("organisationId", "1234567890"),
        ("workspaceSlug", "ws-1"),
        ("timeOfGenerationMin", "2026-09-07T00:00:00+00:00"),
        ("timeOfGenerationMax", "2026-09-08T12:00:00+02:00"),
    ];

    #[test]
    fn the_window_needs_numeric_offsets_and_its_four_parameters() {
        let filters = Filters::parse(&pairs(WINDOW)).expect("window");
        assert_eq!(days(filters.min.unwrap(), filters.max.unwrap()).len(), 2);
        let mut zulu = pairs(WINDOW);
        zulu[2].1 = "2026-09-07T00:00:00Z".into();
        assert!(Filters::parse(&zulu).is_err(), "Z is refused");
        for missing in 0..WINDOW.len() {
            let mut partial = pairs(WINDOW);
            partial.remove(missing);
            assert!(Filters::parse(&partial).is_err(), "{missing}");
        }
        let mut tsg = pairs(WINDOW);
        tsg[0].1 = "not-a-tsg".into();
        assert!(Filters::parse(&tsg).is_err());
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let values: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(percentile(&values, 0.9), Some(9.0));
        assert_eq!(percentile(&values, 0.5), Some(5.0));
        assert_eq!(percentile(&values, 0.99), Some(10.0));
        assert_eq!(percentile(&[], 0.9), None);
    }

    #[test]
    fn an_empty_latency_cohort_reads_null_with_zero_buckets() {
        let filters = Filters::parse(&pairs(WINDOW)).expect("window");
        let data = chart(
            "latency",
            &days(filters.min.unwrap(), filters.max.unwrap()),
            &[],
        )
        .expect("modelled");
        for field in ["total", "p50", "p90", "p99"] {
            assert!(data[field].is_null(), "{field}: {data}");
        }
        assert_eq!(data["records"][0]["p90"], json!(0.0));
        assert_eq!(data["records"].as_array().map(Vec::len), Some(2));
    }
}
