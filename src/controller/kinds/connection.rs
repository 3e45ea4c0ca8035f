//! The Connection controller: `Ready` when a token can be obtained, with the reason when it
//! cannot. No secret material is ever written to its status.

use std::sync::Arc;

use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use crate::controller::Context;
use crate::controller::driver::status::{Outcome, common_status, record_outcome, worth_writing};
use crate::controller::error::Error;
use crate::controller::runtime::backoff::jittered;
use crate::resources::common::{condition::READY, find_condition};
use crate::resources::connection::{Connection, ConnectionStatus};

const MANAGER: &str = "aigw/connection";

common_status!(ConnectionStatus);

pub async fn reconcile(connection: Arc<Connection>, ctx: Arc<Context>) -> Result<Action, Error> {
    // A standby keeps its caches warm but acts on nothing; it reconciles everything on election.
    if !ctx.leadership.acts_on(connection.meta()) {
        return Ok(Action::await_change());
    }
    // Another installation's Connection (outside `--cluster-selector`, or claimed by another
    // installation's `aigw.io/installation`): not probed, no status.
    if !ctx.installation.sees_connection(connection.meta()) {
        return Ok(Action::await_change());
    }
    let name = connection.name_any();
    let key = format!("Connection/{name}");
    let generation = connection.meta().generation;
    let before = connection.status.clone();
    let mut status = before.clone().unwrap_or_default();
    status.observed_generation = generation;
    let outcome = match ctx.connections.probe(&connection).await {
        Ok(()) => Outcome::Ready {
            reason: "TokenObtained".into(),
            message: "a token was obtained".into(),
        },
        Err(e) if e.is_transient() => Outcome::Progressing {
            reason: e.category().into(),
            message: ctx.scrub(&key, &e.to_string()),
        },
        Err(e) => Outcome::Stalled {
            reason: e.category().into(),
            message: ctx.scrub(&key, &e.to_string()),
        },
    };
    record_outcome(&mut status.conditions, &outcome, generation);
    let ready = |s: Option<&ConnectionStatus>| {
        s.and_then(|s| find_condition(&s.conditions, READY))
            .map(|c| c.status.clone())
    };
    let changed = before.as_ref().and_then(|b| b.observed_generation) != generation
        || ready(before.as_ref()) != ready(Some(&status));
    // Every replica's cache tells the users when the status shows the change
    // (`process::run_connections`); a status not written (a dry run writes none, or the write
    // failed) is told here, to this replica's users.
    let tell = || {
        if changed {
            // Nobody listening (no kind controller yet) is fine.
            let _ = ctx.connection_changes.send(name.clone());
        }
    };
    if ctx.dry_run {
        tell();
    } else if worth_writing(before.as_ref(), &status) {
        let patch = serde_json::json!({"apiVersion": Connection::api_version(&()), "kind": "Connection", "status": status});
        Api::<Connection>::all(ctx.kube.clone())
            .patch_status(
                &name,
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(&patch),
            )
            .await
            .map_err(|e| {
                tell();
                Error::kube(format!("write status of Connection {name}"), e)
            })?;
    }
    // Secrets and token endpoints change outside this object: check again periodically.
    Ok(Action::requeue(jittered(ctx.drift_interval)))
}

pub fn error_policy(connection: Arc<Connection>, error: &Error, ctx: Arc<Context>) -> Action {
    let delay = ctx.backoff.next_delay(
        &format!("Connection/{}", connection.name_any()),
        error.retry_after(),
    );
    let key = format!("Connection/{}", connection.name_any());
    let error = ctx.scrub(&key, &error.to_string());
    tracing::warn!(connection = %connection.name_any(), %error, "reconcile failed");
    Action::requeue(delay)
}
