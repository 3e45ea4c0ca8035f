//! Workspace access rows, which AI integrations and MCP integrations keep alike: one row per
//! workspace a request named, never deleted, only disabled, each counting the requests that
//! wrote it.

use serde_json::{Value, json};

use super::clock::{now, touched};

/// One workspace's access.
pub struct WorkspaceAccess {
    /// The workspace as the request named it (UUID or slug; FACTS-more §8.4).
    pub id: String,
    pub enabled: bool,
    pub created_at: String,
    pub last_updated_at: String,
    /// Requests that wrote this row.
    pub writes: u64,
}

impl WorkspaceAccess {
    /// A row made now, written by no request yet.
    pub fn new(id: String, enabled: bool) -> Self {
        let at = now();
        Self {
            id,
            enabled,
            created_at: at.clone(),
            last_updated_at: at,
            writes: 0,
        }
    }

    /// Records a request that wrote the row.
    pub fn touch(&mut self) {
        self.last_updated_at = touched(&self.last_updated_at);
        self.writes += 1;
    }

    /// The live fields: `status` follows `enabled` (`archived` once disabled).
    pub fn row(&self) -> Value {
        json!({
            "id": self.id,
            "enabled": self.enabled,
            "status": if self.enabled { "active" } else { "archived" },
            "created_at": self.created_at,
            "last_updated_at": self.last_updated_at,
        })
    }
}

/// `override_existing_workspace_access: true`: disables every enabled row the request did not
/// list, each a write.
pub fn disable_unlisted<'a>(
    rows: impl IntoIterator<Item = &'a mut WorkspaceAccess>,
    listed: impl Fn(&str) -> bool,
) {
    for row in rows {
        if row.enabled && !listed(&row.id) {
            row.enabled = false;
            row.touch();
        }
    }
}

/// How many of `rows` are enabled (the reads' `workspaces_count`).
pub fn enabled_count<'a>(rows: impl IntoIterator<Item = &'a WorkspaceAccess>) -> usize {
    rows.into_iter().filter(|row| row.enabled).count()
}

/// A row as `GET /_emulator/state` shows it: its read shape `row` plus its write count.
pub fn with_writes(mut row: Value, writes: u64) -> Value {
    row["writes"] = json!(writes);
    row
}
