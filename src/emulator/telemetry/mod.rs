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

mod log;
mod query;

use std::collections::BTreeMap;

use axum::{
    Json,
    extract::{Path, Query, State},
};
use jiff::{civil::Date, tz::TimeZone};
use serde_json::{Map, Value, json};

use super::common::{
    errors::{ApiResult, EmulatorError},
    fields,
    state::{KindState, lock},
};
use log::timestamp;
use query::{Filters, days, invalid};

pub use log::{LogRow, TelemetryLog};

/// What the telemetry routes reach.
pub type TelemetryState = KindState<TelemetryLog>;

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
    fields::check_enum("dimension", Some(&dimension), DIMENSIONS)?;
    let filters = Filters::parse(&pairs)?;
    let log = lock(&state.store);
    let rows: Vec<&LogRow> = log.rows().filter(|row| filters.matches(row)).collect();
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
    fields::check_enum("metric", Some(&metric), METRICS)?;
    let filters = Filters::parse(&pairs)?;
    let filtered = matches!(metric.as_str(), "requests" | "cost" | "tokens" | "latency");
    let log = lock(&state.store);
    let rows: Vec<&LogRow> = log
        .rows()
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
    use jiff::Timestamp;

    use super::*;

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
        let min: Timestamp = "2026-09-07T00:00:00Z".parse().expect("time");
        let max: Timestamp = "2026-09-08T10:00:00Z".parse().expect("time");
        let data = chart("latency", &days(min, max), &[]).expect("modelled");
        for field in ["total", "p50", "p90", "p99"] {
            assert!(data[field].is_null(), "{field}: {data}");
        }
        assert_eq!(data["records"][0]["p90"], json!(0.0));
        assert_eq!(data["records"].as_array().map(Vec::len), Some(2));
    }
}
