//! A telemetry read's window and filters, parsed from its query string as the live API reads it.

use std::collections::BTreeMap;

use jiff::{Timestamp, civil::Date, tz::TimeZone};
use serde_json::Value;

use super::log::LogRow;
use crate::emulator::common::errors::{ApiResult, EmulatorError};

/// The longest window a chart buckets, in days.
const MAX_DAYS: i64 = 1_000;
const COLUMNS: &[&str] = &[
    "cost",
    "avg_latency",
    "avg_tokens",
    "total_tokens",
    "success_rate",
    "last_seen",
];

/// A telemetry read's window and filters.
#[derive(Debug, Default)]
pub struct Filters {
    pub min: Option<Timestamp>,
    pub max: Option<Timestamp>,
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
    pub columns: Vec<String>,
}

pub fn invalid(message: impl Into<String>) -> EmulatorError {
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
    pub fn parse(pairs: &[(String, String)]) -> ApiResult<Self> {
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
    pub fn in_window(&self, row: &LogRow) -> bool {
        self.min.is_none_or(|min| row.created_at >= min)
            && self.max.is_none_or(|max| row.created_at <= max)
            && row.workspace_slug == self.workspace
    }

    /// In the window and through every filter.
    pub fn matches(&self, row: &LogRow) -> bool {
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
pub fn days(min: Timestamp, max: Timestamp) -> Vec<Date> {
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
}
