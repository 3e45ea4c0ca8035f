//! The data plane's request log: one row per request that got past the key check.

use std::collections::{BTreeMap, VecDeque};

use jiff::Timestamp;
use serde_json::{Value, json};

/// Rows kept; the oldest go first.
const MAX_ROWS: usize = 200_000;
/// Cents per token.
pub const CENTS_PER_TOKEN: f64 = 0.001;

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

    pub fn user(&self) -> &str {
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

pub fn timestamp(at: Timestamp) -> String {
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

    /// Every row, oldest first.
    pub fn rows(&self) -> impl Iterator<Item = &LogRow> {
        self.rows.iter()
    }

    /// Every row (for `GET /_emulator/state`).
    pub fn dump(&self) -> Vec<Value> {
        self.rows.iter().map(LogRow::dump).collect()
    }
}
