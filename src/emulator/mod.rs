//! The management + data-plane API emulator (axum).
//!
//! One port serves the seed's endpoints (gateway `/v1`, management `/ai_gw/v2` and
//! `/ai_gw/admin/v2`) with the live API's semantics as recorded in `shared/api/FACTS.md`, plus
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

mod api_key_routes;
mod api_keys;
mod auth;
mod configs;
mod control;
mod deployment_routes;
mod deployments;
mod errors;
mod faults;
mod fields;
mod gateway;
mod guardrails;
mod integration_routes;
mod integrations;
mod listener;
mod normalise;
mod policy_fields;
mod providers;
mod rate_limits;
mod state;
mod usage_limit_routes;
mod usage_limits;

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
    middleware,
    routing::{delete, get, post, put},
};
use serde_json::json;
use tokio::{net::TcpListener, sync::watch, task::JoinHandle};

pub use errors::EmulatorError;
pub use faults::Faults;

use listener::{ConnHandle, KillableListener};
use state::{AppState, Shared};

/// How the emulator authenticates callers and how fast it answers.
#[derive(Clone, Debug)]
pub struct EmulatorOptions {
    /// The static bearer token every API request must carry (stays valid alongside OAuth tokens).
    pub token: String,
    /// A fixed delay added before every API request.
    pub latency: Option<Duration>,
    /// Enables `POST /oauth2/access_token` (client credentials grant).
    pub oauth: Option<OAuthOptions>,
    /// Caps every API-key rotation's transition: the old key stops working after the smaller of
    /// the requested period (at least 30 minutes, as the API demands) and this, so tests can see
    /// a transition end in seconds. `key_transition_expires_at` reports the capped expiry.
    pub min_key_transition: Option<Duration>,
}

impl EmulatorOptions {
    pub fn new(token: impl Into<String>) -> Self {
        Self {
            token: token.into(),
            latency: None,
            oauth: None,
            min_key_transition: None,
        }
    }
}

/// The one OAuth2 client the token endpoint accepts, and how long its tokens live.
#[derive(Clone, Debug)]
pub struct OAuthOptions {
    pub client_id: String,
    pub client_secret: String,
    pub token_ttl: Duration,
}

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
    let state = Arc::new(AppState::new(opts, stop_rx));
    run(listener, state, server_killed, async move {
        signal.await;
        let _ = stop_tx.send(true);
    })
    .await
}

async fn run(
    listener: TcpListener,
    state: Shared,
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
    let state = Arc::new(AppState::new(opts, stop_rx.clone()));
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

/// Every route. API routes get, outermost first: stats, bearer auth, faults.
fn router(state: Shared) -> Router {
    let api = Router::new()
        .route("/v1/responses/{response_id}", get(gateway::get_response))
        .route(
            "/v1/vector_stores/{vector_store_id}/files/{file_id}",
            get(gateway::get_vector_store_file),
        )
        .route(
            "/ai_gw/v2/configs",
            get(configs::list).post(configs::create),
        )
        .route(
            "/ai_gw/v2/configs/{slug}",
            get(configs::get)
                .put(configs::update)
                .delete(configs::delete),
        )
        .route("/ai_gw/v2/configs/{slug}/versions", get(configs::versions))
        .route(
            "/ai_gw/admin/v2/deployments",
            get(deployment_routes::list).post(deployment_routes::create),
        )
        .route(
            "/ai_gw/admin/v2/deployments/{deploymentId}",
            get(deployment_routes::get)
                .put(deployment_routes::update)
                .delete(deployment_routes::delete),
        )
        .route(
            "/ai_gw/v2/policies/rate-limits",
            get(rate_limits::list).post(rate_limits::create),
        )
        .route(
            "/ai_gw/v2/policies/rate-limits/{rateLimitsPolicyId}",
            get(rate_limits::get)
                .put(rate_limits::update)
                .delete(rate_limits::delete),
        )
        .route(
            "/ai_gw/v2/policies/usage-limits",
            get(usage_limit_routes::list).post(usage_limit_routes::create),
        )
        .route(
            "/ai_gw/v2/policies/usage-limits/{policyUsageLimitsId}",
            get(usage_limit_routes::get)
                .put(usage_limit_routes::update)
                .delete(usage_limit_routes::delete),
        )
        .route(
            "/ai_gw/v2/policies/usage-limits/{policyUsageLimitsId}/entities",
            get(usage_limit_routes::entities),
        )
        .route(
            "/ai_gw/v2/policies/usage-limits/{policyUsageLimitsId}/entities/{entityId}/reset",
            put(usage_limit_routes::reset_entity),
        )
        .route(
            "/ai_gw/v2/guardrails",
            get(guardrails::list).post(guardrails::create_in_workspace),
        )
        .route(
            "/ai_gw/v2/guardrails/{guardrailId}",
            get(guardrails::get)
                .put(guardrails::update)
                .delete(guardrails::delete),
        )
        .route(
            "/ai_gw/admin/v2/guardrails",
            get(guardrails::list).post(guardrails::create_in_organisation),
        )
        .route(
            "/ai_gw/admin/v2/guardrails/{guardrailId}",
            get(guardrails::get)
                .put(guardrails::update)
                .delete(guardrails::delete),
        )
        .merge(api_key_routes::routes())
        .route(
            "/ai_gw/admin/v2/integrations",
            get(integration_routes::list).post(integration_routes::create),
        )
        .route(
            "/ai_gw/admin/v2/integrations/{integrationId}",
            get(integration_routes::get)
                .put(integration_routes::update)
                .delete(integration_routes::delete),
        )
        .route(
            "/ai_gw/admin/v2/integrations/{integrationId}/workspaces",
            get(integration_routes::workspaces).put(integration_routes::update_workspaces),
        )
        .route(
            "/ai_gw/admin/v2/integrations/{integrationId}/models",
            get(integration_routes::models)
                .put(integration_routes::update_models)
                .delete(integration_routes::delete_models),
        )
        .route(
            "/ai_gw/v2/providers",
            get(providers::list).post(providers::create),
        )
        .route(
            "/ai_gw/v2/providers/{providerId}",
            get(providers::get)
                .put(providers::update)
                .delete(providers::delete),
        )
        .layer(middleware::from_fn_with_state(
            state.clone(),
            faults::inject_faults,
        ))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_bearer,
        ))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            faults::record_stats,
        ));

    let oauth = Router::new()
        .route("/oauth2/access_token", post(auth::access_token))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            faults::record_stats,
        ));

    let control = Router::new()
        .route(
            "/_emulator/stats",
            get(control::get_stats).delete(control::reset_stats),
        )
        .route(
            "/_emulator/faults",
            get(control::get_faults).put(control::put_faults),
        )
        .route("/_emulator/seed", post(control::seed))
        .route(
            "/_emulator/state",
            get(control::get_state).delete(control::clear_state),
        )
        .route(
            "/_emulator/deployments/{id}",
            delete(deployment_routes::purge),
        )
        .route(
            "/_emulator/deployments/{id}/connection",
            post(deployment_routes::set_connection),
        )
        .route(
            "/_emulator/deployments/{id}/handshake",
            post(deployment_routes::handshake),
        )
        .route(
            "/_emulator/usage-limits/{id}/usage",
            post(usage_limit_routes::add_usage),
        )
        .route(
            "/_emulator/api-keys/{id}/handshake",
            post(api_key_routes::handshake),
        );

    api.merge(oauth)
        .merge(control)
        .fallback(|| async {
            let body = json!({"success": false, "data": {"message": "no such route", "errorCode": "AB08"}});
            (StatusCode::NOT_FOUND, Json(body))
        })
        .with_state(state)
}
