//! The reads and writes of the sub-resources kept with a remote object
//! ([`Verbs::sync_sub_resources`]): an integration's workspace access and models, an MCP
//! integration's capabilities, an MCP server's user access. Each is a [`Part`] of the remote
//! object `key`, named by it ("workspace access") in every message about it.

use std::future::Future;

use crate::api::{self, ApiError, Client};
use crate::controller::driver::gate::Op;
use crate::controller::driver::verbs::Verbs;
use crate::controller::driver::{Change, Cx};
use crate::controller::error::{Error, Halt};

/// A sub-resource: how messages name it (`name`: "workspace access") and the event reason of a
/// write of it (`updated`: "AccessUpdated").
#[derive(Debug, Clone, Copy)]
pub struct Part {
    pub name: &'static str,
    pub updated: &'static str,
}

/// An integration's (or MCP integration's) workspace access rows.
pub const WORKSPACE_ACCESS: Part = Part::new("workspace access", "AccessUpdated");

impl Part {
    pub const fn new(name: &'static str, updated: &'static str) -> Self {
        Self { name, updated }
    }

    /// The read of this part of the remote object `key` (`read`'s answer).
    pub async fn read<K: Verbs, T>(
        self,
        key: &str,
        read: impl Future<Output = Result<T, ApiError>>,
    ) -> Result<T, Error> {
        let part = self.name;
        read.await
            .map_err(|e| Error::api(format!("read the {part} of {} {key}", K::WHAT), e))
    }

    /// One write of this part of the remote object `key` (`write`, with the client for an
    /// update), which changes what `what` says: announced first (the `Would…` event of a dry
    /// run), then reported as [`Part::updated`].
    pub async fn write<'a, K: Verbs, T, F>(
        self,
        cx: &'a Cx<'_, K>,
        (key, what): (&str, &str),
        write: impl FnOnce(&'a Client) -> F,
    ) -> Result<Change, Halt>
    where
        F: Future<Output = Result<T, ApiError>>,
    {
        let part = self.name;
        cx.gate.intend(format!(
            "would update the {part} of {} {key}: {what}",
            K::WHAT
        ));
        write(cx.api(Op::Update).await?)
            .await
            .map_err(|e| Error::api(format!("update the {part} of {} {key}", K::WHAT), e))?;
        Ok(Change::new(
            self.updated,
            format!("{part} of {} {key}: {what}", K::WHAT),
        ))
    }
}

/// A row of a workspace access write: the workspace's id, and whether it is enabled.
pub trait AccessRow {
    fn toggle(&self) -> (&str, bool);
}

impl AccessRow for api::WorkspaceAccessUpdate {
    fn toggle(&self) -> (&str, bool) {
        (&self.id, self.enabled)
    }
}

impl AccessRow for api::McpWorkspaceAccessUpdate {
    fn toggle(&self) -> (&str, bool) {
        (&self.id, self.enabled)
    }
}

/// The workspace access write of the remote object `key`: one PUT (`write`, with the client
/// for an update) of the `rows` that differ, none when none does, named by the ids it enables
/// (as `enabled` says: "enabled") and those it disables ([`toggled`]).
pub async fn write_access<'a, K: Verbs, R: AccessRow, T, F>(
    cx: &'a Cx<'_, K>,
    key: &str,
    (rows, enabled): (Vec<R>, &str),
    write: impl FnOnce(&'a Client, Vec<R>) -> F,
) -> Result<Option<Change>, Halt>
where
    F: Future<Output = Result<T, ApiError>>,
{
    if rows.is_empty() {
        return Ok(None);
    }
    let what = toggled(rows.iter().map(AccessRow::toggle), enabled);
    let change = WORKSPACE_ACCESS
        .write(cx, (key, &what), |client| write(client, rows))
        .await?;
    Ok(Some(change))
}

/// What an access write changes, for its messages: the ids of the `rows` it enables (as
/// `enabled` says: "enabled"), then those it disables ("enabled w1, w2; disabled w3").
pub fn toggled<'a>(rows: impl Iterator<Item = (&'a str, bool)> + Clone, enabled: &str) -> String {
    let ids = |on: bool| {
        let ids: Vec<&str> = rows
            .clone()
            .filter(|(_, enabled)| *enabled == on)
            .map(|(id, _)| id)
            .collect();
        ids.join(", ")
    };
    [(enabled, ids(true)), ("disabled", ids(false))]
        .into_iter()
        .filter(|(_, ids)| !ids.is_empty())
        .map(|(verb, ids)| format!("{verb} {ids}"))
        .collect::<Vec<_>>()
        .join("; ")
}
