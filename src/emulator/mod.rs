//! The management + data-plane API emulator (axum).
//!
//! One port serves the seed's endpoints (gateway `/v1`, management `/ai_gw/v2` and
//! `/ai_gw/admin/v2`) with the live API's semantics as recorded in `shared/api/FACTS.md`, a
//! data plane that routes chat completions and responses by an API key's default config over
//! simulated providers and logs them for the telemetry routes (`/ai_gw/v2/logs/…`), plus
//! test-only control endpoints under `/_emulator/` (stats, faults, seed, state) and an optional
//! OAuth2 token endpoint. State is in memory.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! let emulator = aigw::emulator::spawn(aigw::emulator::EmulatorOptions::new("t0ken")).await?;
//! let management_url = emulator.management_url(); // http://127.0.0.1:PORT
//! let gateway_url = emulator.gateway_url(); // http://127.0.0.1:PORT/v1
//! # Ok(()) }
//! ```

mod api_keys;
mod common;
mod configs;
mod control;
mod denied;
mod deployments;
mod gateway;
mod guardrail_mcp;
mod guardrails;
mod iam_scopes;
mod inference;
mod integrations;
mod mcp_integrations;
mod mcp_servers;
mod providers;
mod rate_limits;
mod routing;
mod secret_references;
mod telemetry;
mod usage_limits;
mod workspaces;

#[cfg(test)]
mod layering;

use std::{
    future::Future,
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use axum::{
    Json, Router,
    http::StatusCode,
    middleware::from_fn_with_state,
    routing::{delete, get, post, put},
};
use serde_json::json;
use tokio::{net::TcpListener, sync::watch, task::JoinHandle};

// The options are the emulator's public face (`aigw emulator` flags, tests); they live in the
// leaf `common` so that every kind can read them.
pub use common::options::{EmulatorOptions, OAuthOptions};

use common::{
    auth,
    listener::{ConnHandle, KillableListener},
    middleware, policy_fields,
    routes::crud,
};
use control::AppState;
use rate_limits::RateLimit;
use usage_limits::UsageLimit;

/// Serves until the process ends.
pub async fn serve(listener: TcpListener, opts: EmulatorOptions) -> std::io::Result<()> {
    serve_with_shutdown(listener, opts, std::future::pending()).await
}

/// Serves until `signal` completes, then stops accepting and finishes in-flight requests
/// (hung timeout-fault requests are released at once).
pub async fn serve_with_shutdown(
    listener: TcpListener,
    opts: EmulatorOptions,
    signal: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let server_killed = Arc::new(AtomicBool::new(false));
    let state = AppState::new(opts, stop_rx);
    run(listener, state, server_killed, async move {
        signal.await;
        let _ = stop_tx.send(true);
    })
    .await
}

async fn run(
    listener: TcpListener,
    state: AppState,
    server_killed: Arc<AtomicBool>,
    signal: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = router(state).into_make_service_with_connect_info::<ConnHandle>();
    axum::serve(KillableListener::new(listener, server_killed), app)
        .with_graceful_shutdown(signal)
        .await
}

/// Binds `127.0.0.1:0` and serves in a background task until the handle is dropped.
pub async fn spawn(opts: EmulatorOptions) -> std::io::Result<Running> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let server_killed = Arc::new(AtomicBool::new(false));
    let state = AppState::new(opts, stop_rx.clone());
    let mut signal = stop_rx;
    let task = tokio::spawn(run(
        listener,
        state,
        Arc::clone(&server_killed),
        async move {
            let _ = signal.wait_for(|stopped| *stopped).await;
        },
    ));
    Ok(Running {
        addr,
        stop: stop_tx,
        server_killed,
        task: Some(task),
    })
}

/// A running emulator; dropping it (or calling [`Running::shutdown`]) stops the server and cuts
/// its open connections.
pub struct Running {
    pub addr: SocketAddr,
    stop: watch::Sender<bool>,
    server_killed: Arc<AtomicBool>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl Running {
    /// The management root, `http://127.0.0.1:PORT` (paths `/ai_gw/...` are appended).
    pub fn management_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The gateway base URL, `http://127.0.0.1:PORT/v1`.
    pub fn gateway_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Stops the server and waits (briefly) for it to finish.
    pub async fn shutdown(mut self) -> std::io::Result<()> {
        self.signal_stop();
        let Some(task) = self.task.take() else {
            return Ok(());
        };
        let abort = task.abort_handle();
        match tokio::time::timeout(Duration::from_secs(5), task).await {
            Ok(Ok(result)) => result,
            Ok(Err(join_error)) if join_error.is_cancelled() => Ok(()),
            Ok(Err(join_error)) => Err(std::io::Error::other(join_error)),
            Err(_) => {
                abort.abort();
                Ok(())
            }
        }
    }

    fn signal_stop(&self) {
        let _ = self.stop.send(true);
        self.server_killed.store(true, Ordering::SeqCst);
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.signal_stop();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Every route. API routes get, outermost first: stats, the write log, bearer auth, faults.
fn router(state: AppState) -> Router {
    let common = || Arc::clone(&state.common);
    let api = Router::new()
        .route("/v1/responses/{response_id}", get(gateway::get_response))
        .route(
            "/v1/vector_stores/{vector_store_id}/files/{file_id}",
            get(gateway::get_vector_store_file),
        )
        .merge(crud(
            "/ai_gw/v2/configs",
            "slug",
            (configs::list, configs::create),
            (configs::get, configs::update, configs::delete),
        ))
        .route("/ai_gw/v2/configs/{slug}/versions", get(configs::versions))
        .merge(crud(
            "/ai_gw/admin/v2/deployments",
            "deploymentId",
            (deployments::list, deployments::create),
            (deployments::get, deployments::update, deployments::delete),
        ))
        .merge(crud(
            "/ai_gw/v2/policies/rate-limits",
            "rateLimitsPolicyId",
            (rate_limits::list, policy_fields::create::<RateLimit>),
            (
                rate_limits::get,
                policy_fields::update::<RateLimit>,
                policy_fields::delete::<RateLimit>,
            ),
        ))
        .merge(crud(
            "/ai_gw/v2/policies/usage-limits",
            "policyUsageLimitsId",
            (usage_limits::list, policy_fields::create::<UsageLimit>),
            (
                usage_limits::get,
                policy_fields::update::<UsageLimit>,
                policy_fields::delete::<UsageLimit>,
            ),
        ))
        .route(
            "/ai_gw/v2/policies/usage-limits/{policyUsageLimitsId}/entities",
            get(usage_limits::entities),
        )
        .route(
            "/ai_gw/v2/policies/usage-limits/{policyUsageLimitsId}/entities/{entityId}/reset",
            put(usage_limits::reset_entity),
        )
        .merge(crud(
            "/ai_gw/v2/guardrails",
            "guardrailId",
            (guardrails::list, guardrails::create_in_workspace),
            (guardrails::get, guardrails::update, guardrails::delete),
        ))
        .merge(crud(
            "/ai_gw/admin/v2/guardrails",
            "guardrailId",
            (guardrails::list, guardrails::create_in_organisation),
            (guardrails::get, guardrails::update, guardrails::delete),
        ))
        .merge(api_keys::routes())
        .merge(workspaces::routes())
        .merge(iam_scopes::routes())
        .merge(denied::routes())
        .merge(secret_references::routes())
        .merge(mcp_integrations::routes())
        .merge(mcp_servers::routes())
        .merge(guardrail_mcp::routes())
        .merge(crud(
            "/ai_gw/admin/v2/integrations",
            "integrationId",
            (integrations::list, integrations::create),
            (
                integrations::get,
                integrations::update,
                integrations::delete,
            ),
        ))
        .route(
            "/ai_gw/admin/v2/integrations/{integrationId}/workspaces",
            get(integrations::workspaces).put(integrations::update_workspaces),
        )
        .route(
            "/ai_gw/admin/v2/integrations/{integrationId}/models",
            get(integrations::models)
                .put(integrations::update_models)
                .delete(integrations::delete_models),
        )
        .merge(crud(
            "/ai_gw/v2/providers",
            "providerId",
            (providers::list, providers::create),
            (providers::get, providers::update, providers::delete),
        ))
        .route("/ai_gw/v2/logs/groups/{dimension}", get(telemetry::groups))
        .route("/ai_gw/v2/logs/charts/{metric}", get(telemetry::charts))
        .layer(from_fn_with_state(common(), middleware::inject_faults))
        .layer(from_fn_with_state(common(), auth::require_bearer))
        .layer(from_fn_with_state(common(), middleware::record_writes));

    let oauth = Router::new().route("/oauth2/access_token", post(auth::access_token));

    // Every served request is counted; the data plane authenticates by gateway key, not bearer
    // token, and sees only the per-provider faults.
    let served = api
        .merge(oauth)
        .merge(inference::routes())
        .layer(from_fn_with_state(common(), middleware::record_stats));

    let control = Router::new()
        .route(
            "/_emulator/stats",
            get(control::get_stats).delete(control::reset_stats),
        )
        .route(
            "/_emulator/faults",
            get(control::get_faults).put(control::put_faults),
        )
        .route("/_emulator/writes", get(control::get_writes))
        .route("/_emulator/seed", post(control::seed))
        .route(
            "/_emulator/state",
            get(control::get_state).delete(control::clear_state),
        )
        .route("/_emulator/deployments/{id}", delete(deployments::purge))
        .route(
            "/_emulator/deployments/{id}/connection",
            post(deployments::set_connection),
        )
        .route(
            "/_emulator/deployments/{id}/handshake",
            post(deployments::handshake),
        )
        .route(
            "/_emulator/usage-limits/{id}/usage",
            post(usage_limits::add_usage),
        )
        .route(
            "/_emulator/api-keys/{id}/handshake",
            post(api_keys::handshake),
        )
        .route(
            "/_emulator/mcp-integrations/{id}/discover",
            post(mcp_integrations::discover),
        );

    served
        .merge(control)
        .fallback(|| async {
            let body = json!({"success": false, "data": {"message": "no such route", "errorCode": "AB08"}});
            (StatusCode::NOT_FOUND, Json(body))
        })
        .with_state(state)
}
