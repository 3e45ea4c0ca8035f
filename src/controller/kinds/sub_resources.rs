//! The reads and writes of the sub-resources kept with a remote object
//! ([`Verbs::sync_sub_resources`]): an integration's workspace access and models, an MCP
//! integration's capabilities, an MCP server's user access. Each is named by its `part`
//! ("workspace access") of the remote object `key`, in every message about it.

use std::future::Future;

use crate::api::{ApiError, Client};
use crate::controller::driver::gate::Op;
use crate::controller::driver::verbs::Verbs;
use crate::controller::driver::{Change, Cx};
use crate::controller::error::{Error, Halt};

/// The read of `part` of the remote object `key` (`read`'s answer).
pub async fn read<K: Verbs, T>(
    (part, key): (&str, &str),
    read: impl Future<Output = Result<T, ApiError>>,
) -> Result<T, Error> {
    read.await
        .map_err(|e| Error::api(format!("read the {part} of {} {key}", K::WHAT), e))
}

/// One write of `part` of the remote object `key` (`write`, with the client for an update),
/// which changes what `what` says: announced first (the `Would…` event of a dry run), then
/// reported as `reason`.
pub async fn write<'a, K: Verbs, T, F>(
    cx: &'a Cx<'_, K>,
    (part, key, what): (&str, &str, &str),
    reason: &'static str,
    write: impl FnOnce(&'a Client) -> F,
) -> Result<Change, Halt>
where
    F: Future<Output = Result<T, ApiError>>,
{
    cx.gate.intend(format!(
        "would update the {part} of {} {key}: {what}",
        K::WHAT
    ));
    write(cx.api(Op::Update).await?)
        .await
        .map_err(|e| Error::api(format!("update the {part} of {} {key}", K::WHAT), e))?;
    Ok(Change::new(
        reason,
        format!("{part} of {} {key}: {what}", K::WHAT),
    ))
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
